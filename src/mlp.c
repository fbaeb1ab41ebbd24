/*
 * mlp.c — the gated MLP block's forward (fastglu_mlp_fwd_cpu / fastglu_mlp_fwd_cuda):
 *
 *   h[tokens, 2F]   = x @ w1^T (+ bias1)     } fastglu_linear_glu_fwd_* (y into the caller's buffer,
 *   y[tokens, F]    = glu(h) (* weights)     }   h stored when h.data is not NULL)
 *   out[tokens, H]  = y @ w2^T (+ bias2)       fastglu_linear_*
 *
 * Both calls are validated before either runs (each with its own contract; the messages say which
 * GEMM, and name fc2's operands as fastglu_linear_* does: x = y, w = w2, bias = bias2), and out,
 * which is written last, against everything the block reads or writes before it, and fc1's
 * outputs against fc2's weights: on an error nothing is written and nothing launched. CUDA: the
 * two launches on `stream`, no allocation, no synchronization.
 */
#include "gemm_common.h"

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        fastglu_status s_ = (expr);                                                                \
        if (s_ != FASTGLU_SUCCESS) return s_;                                                      \
    } while (0)

static fastglu_status check_mlp(const char *fc1, const char *fc2, const fastglu_glu_params *params,
                                fastglu_tensor x, fastglu_tensor w1, fastglu_tensor bias1,
                                fastglu_tensor weights, fastglu_tensor w2, fastglu_tensor bias2,
                                fastglu_tensor h, fastglu_tensor y, fastglu_tensor out,
                                int64_t tokens, int64_t hidden, int64_t ffn_hidden_size,
                                int *fc1_empty, int *fc2_empty) {
    const fastglu_tensor none = {NULL, FASTGLU_DTYPE_FP32, 0};
    TRY(fastglu_check_linear(fc1, 1, params, x, w1, bias1, weights, h, y, tokens, hidden,
                             ffn_hidden_size, fc1_empty));
    TRY(fastglu_check_linear(fc2, 0, NULL, y, w2, bias2, none, out, none, tokens, ffn_hidden_size,
                             hidden, fc2_empty));
    if (*fc1_empty || *fc2_empty) return FASTGLU_SUCCESS; /* one GEMM at most: its own check */
    /* both run (tokens, hidden, F > 0): every tensor below passed its check, this fills regions */
    const int64_t T = tokens, H = hidden, F = ffn_hidden_size;
    const size_t es = fastglu_dtype_size(x.dtype);
    fastglu_region r_out, r_w2, r_b2, fc1_regions[6];
    int n = 0;
    TRY(fastglu_check_tensor(fc2, &r_out, "out", out.data, T, H, out.row_stride, 1, es, 1));
    TRY(fastglu_check_tensor(fc2, &r_w2, "w2", w2.data, H, F, w2.row_stride, 1, es, 0));
    TRY(fastglu_check_tensor(fc1, &fc1_regions[n++], "x", x.data, T, H, x.row_stride, 1, es, 0));
    TRY(fastglu_check_tensor(fc1, &fc1_regions[n++], "w1", w1.data, 2 * F, H, w1.row_stride, 1, es,
                             0));
    if (bias1.data != NULL)
        TRY(fastglu_check_tensor(fc1, &fc1_regions[n++], "bias1", bias1.data, 1, 2 * F, 0, 1, es,
                                 0));
    if (weights.data != NULL)
        TRY(fastglu_check_tensor(fc1, &fc1_regions[n++], "weights", weights.data, T, 1,
                                 weights.row_stride, 1, fastglu_dtype_size(weights.dtype), 0));
    const int first_output = n;
    if (h.data != NULL)
        TRY(fastglu_check_tensor(fc1, &fc1_regions[n++], "h", h.data, T, 2 * F, h.row_stride, 1, es,
                                 1));
    for (int i = 0; i < n; ++i) TRY(fastglu_check_disjoint(fc2, &r_out, &fc1_regions[i]));
    /* fc1 writes h and y before fc2 reads w2 and bias2 */
    TRY(fastglu_check_tensor(fc1, &fc1_regions[n++], "y", y.data, T, F, y.row_stride, 1, es, 1));
    for (int i = first_output; i < n; ++i) {
        TRY(fastglu_check_disjoint(fc1, &fc1_regions[i], &r_w2));
        if (bias2.data != NULL) {
            TRY(fastglu_check_tensor(fc2, &r_b2, "bias2", bias2.data, 1, H, 0, 1, es, 0));
            TRY(fastglu_check_disjoint(fc1, &fc1_regions[i], &r_b2));
        }
    }
    return FASTGLU_SUCCESS;
}

fastglu_status fastglu_mlp_fwd_cpu(const fastglu_glu_params *params, fastglu_tensor x,
                                   fastglu_tensor w1, fastglu_tensor bias1, fastglu_tensor weights,
                                   fastglu_tensor w2, fastglu_tensor bias2, fastglu_tensor h,
                                   fastglu_tensor y, fastglu_tensor out, int64_t tokens,
                                   int64_t hidden, int64_t ffn_hidden_size) {
    int e1, e2;
    TRY(check_mlp("fastglu_mlp_fwd_cpu (fc1)",
                  "fastglu_mlp_fwd_cpu (fc2: x = y, w = w2, bias = bias2)", params, x, w1, bias1,
                  weights, w2, bias2, h, y, out, tokens, hidden, ffn_hidden_size, &e1, &e2));
    if (!e1)
        TRY(fastglu_linear_glu_fwd_cpu(params, x, w1, bias1, weights, h, y, tokens, hidden,
                                       ffn_hidden_size));
    if (!e2) TRY(fastglu_linear_cpu(y, w2, bias2, out, tokens, ffn_hidden_size, hidden));
    return FASTGLU_SUCCESS;
}

fastglu_status fastglu_mlp_fwd_cuda(const fastglu_glu_params *params, fastglu_tensor x,
                                    fastglu_tensor w1, fastglu_tensor bias1, fastglu_tensor weights,
                                    fastglu_tensor w2, fastglu_tensor bias2, fastglu_tensor h,
                                    fastglu_tensor y, fastglu_tensor out, int64_t tokens,
                                    int64_t hidden, int64_t ffn_hidden_size, void *stream) {
    int e1, e2;
    TRY(check_mlp("fastglu_mlp_fwd_cuda (fc1)",
                  "fastglu_mlp_fwd_cuda (fc2: x = y, w = w2, bias = bias2)", params, x, w1, bias1,
                  weights, w2, bias2, h, y, out, tokens, hidden, ffn_hidden_size, &e1, &e2));
    if (!e1)
        TRY(fastglu_linear_glu_fwd_cuda(params, x, w1, bias1, weights, h, y, tokens, hidden,
                                        ffn_hidden_size, stream));
    if (!e2) TRY(fastglu_linear_cuda(y, w2, bias2, out, tokens, ffn_hidden_size, hidden, stream));
    return FASTGLU_SUCCESS;
}
