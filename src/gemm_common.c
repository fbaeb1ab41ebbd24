/*
 * gemm_common.c — validation of the linear layers (fastglu_linear_*, fastglu_linear_glu_fwd_*),
 * the fastglu_gemm_problem of a validated call, and, in a build without the CUDA backend, their
 * CUDA entry points (validate like the real ones; an empty problem succeeds, anything else is
 * FASTGLU_ERROR_NO_CUDA with nothing touched).
 */
#include <inttypes.h>

#include "gemm_common.h"

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        fastglu_status s_ = (expr);                                                                \
        if (s_ != FASTGLU_SUCCESS) return s_;                                                      \
    } while (0)

/* The operand `name` (present) has dtype `dt` equal to x's. */
static fastglu_status check_same_dtype(const char *fn, const char *name, fastglu_dtype dt,
                                       fastglu_dtype x_dt) {
    if (dt == x_dt) return FASTGLU_SUCCESS;
    return fastglu_set_error(FASTGLU_ERROR_UNSUPPORTED_DTYPE,
                             "%s: %s.dtype %d differs from x.dtype %d (x, w, bias and the outputs "
                             "share one dtype)",
                             fn, name, (int)dt, (int)x_dt);
}

static fastglu_status check_size(const char *fn, const char *name, int64_t v) {
    if (v < 0)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE, "%s: %s = %" PRId64 " is negative",
                                 fn, name, v);
    if (v > INT64_MAX / 4)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE, "%s: %s = %" PRId64 " is too large",
                                 fn, name, v);
    return FASTGLU_SUCCESS;
}

fastglu_status fastglu_check_linear(const char *fn, int glu, const fastglu_glu_params *params,
                                    fastglu_tensor x, fastglu_tensor w, fastglu_tensor bias,
                                    fastglu_tensor weights, fastglu_tensor h, fastglu_tensor y,
                                    int64_t tokens, int64_t in_features, int64_t out_features,
                                    int *empty) {
    const char *w_name = glu ? "w1" : "w", *h_name = glu ? "h" : "out";
    const char *n_name = glu ? "ffn_hidden_size" : "out_features";
    const char *k_name = glu ? "hidden" : "in_features";
    fastglu_region in[4], out[2];
    int n_in = 0, n_out = 0;
    TRY(fastglu_check_compute_dtype(fn, "x.dtype", x.dtype));
    if (glu) {
        /* params through the family's own check (an empty problem: nothing else is looked at),
         * the clamp against x's dtype, the dtype of h that the epilogue clamps */
        int unused;
        TRY(fastglu_check_glu_fwd(fn, params, NULL, 0, NULL, 0, NULL, NULL, FASTGLU_DTYPE_FP32, 0,
                                  NULL, 0, NULL, 0, 0, 0, x.dtype, &unused));
    } else if (weights.data != NULL || y.data != NULL) {
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: weights and y must be absent (data NULL) for a plain linear",
                                 fn);
    }
    TRY(check_same_dtype(fn, glu ? "w1" : "w", w.dtype, x.dtype));
    if (bias.data != NULL) TRY(check_same_dtype(fn, "bias", bias.dtype, x.dtype));
    if (h.data != NULL) TRY(check_same_dtype(fn, h_name, h.dtype, x.dtype));
    if (glu) TRY(check_same_dtype(fn, "y", y.dtype, x.dtype));
    if (weights.data != NULL) TRY(fastglu_check_compute_dtype(fn, "weights.dtype", weights.dtype));
    TRY(check_size(fn, "tokens", tokens));
    TRY(check_size(fn, k_name, in_features));
    TRY(check_size(fn, n_name, out_features));
    *empty = tokens == 0 || out_features == 0;
    if (*empty) return FASTGLU_SUCCESS;

    const int64_t T = tokens, K = in_features, N = out_features, NW = glu ? 2 * N : N;
    const size_t es = fastglu_dtype_size(x.dtype);
    if (K > 0) { /* with K == 0 neither is read */
        TRY(fastglu_check_tensor(fn, &in[n_in++], "x", x.data, T, K, x.row_stride, 1, es, 0));
        TRY(fastglu_check_tensor(fn, &in[n_in++], w_name, w.data, NW, K, w.row_stride, 1, es, 0));
    }
    if (bias.data != NULL) {
        if (bias.row_stride != 1 && NW > 1)
            return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                     "%s: bias.row_stride = %" PRId64 " is not 1 (bias must be "
                                     "contiguous)",
                                     fn, bias.row_stride);
        TRY(fastglu_check_tensor(fn, &in[n_in++], "bias", bias.data, 1, NW, 0, 1, es, 0));
    }
    if (weights.data != NULL)
        TRY(fastglu_check_tensor(fn, &in[n_in++], "weights", weights.data, T, 1, weights.row_stride,
                                 1, fastglu_dtype_size(weights.dtype), 0));
    if (glu) {
        if (h.data != NULL)
            TRY(fastglu_check_tensor(fn, &out[n_out++], "h", h.data, T, NW, h.row_stride, 1, es,
                                     1));
        TRY(fastglu_check_tensor(fn, &out[n_out++], "y", y.data, T, N, y.row_stride, 1, es, 1));
    } else {
        TRY(fastglu_check_tensor(fn, &out[n_out++], "out", h.data, T, N, h.row_stride, 1, es, 1));
    }
    for (int o = 0; o < n_out; ++o) {
        for (int i = 0; i < n_in; ++i) TRY(fastglu_check_disjoint(fn, &out[o], &in[i]));
        for (int p = 0; p < o; ++p) TRY(fastglu_check_disjoint(fn, &out[o], &out[p]));
    }
    return FASTGLU_SUCCESS;
}

fastglu_gemm_problem fastglu_gemm_make_problem(const fastglu_glu_params *params, fastglu_tensor x,
                                               fastglu_tensor w, fastglu_tensor bias,
                                               fastglu_tensor weights, fastglu_tensor h,
                                               fastglu_tensor y, int64_t tokens,
                                               int64_t in_features, int64_t out_features) {
    fastglu_gemm_problem p;
    p.glu = params;
    p.x = x.data, p.x_row_stride = x.row_stride;
    p.w = w.data, p.w_row_stride = w.row_stride;
    p.bias = bias.data;
    p.weights = params ? weights.data : NULL;
    p.weights_dtype = weights.data ? weights.dtype : FASTGLU_DTYPE_FP32;
    p.weights_stride = weights.row_stride;
    p.h = h.data, p.h_row_stride = h.row_stride;
    p.y = params ? y.data : NULL, p.y_row_stride = y.row_stride;
    p.dglu = 0;
    p.dh = NULL, p.dh_row_stride = 0, p.dweights = NULL, p.dweights_stride = 0;
    p.M = tokens, p.N = out_features, p.K = in_features;
    p.dtype = x.dtype;
    return p;
}

fastglu_status fastglu_check_linear_dglu(const char *fn, const fastglu_glu_params *params,
                                         fastglu_tensor d_out, fastglu_tensor w2, fastglu_tensor h,
                                         fastglu_tensor weights, fastglu_tensor dh,
                                         fastglu_tensor y, fastglu_tensor dweights, int64_t tokens,
                                         int64_t hidden, int64_t ffn_hidden_size, int *empty) {
    fastglu_region in[4], out[3];
    int n_in = 0, n_out = 0, unused, h_in = -1, dh_out = -1;
    const fastglu_dtype dt = d_out.dtype;
    /* dh written over h: the same pointer and row stride (each element is read before it is
     * written, by the thread or chunk that writes it); any other overlap is refused */
    const int in_place = dh.data != NULL && dh.data == h.data && dh.row_stride == h.row_stride;
    TRY(fastglu_check_compute_dtype(fn, "d_out.dtype", dt));
    /* params through the family's own check (an empty problem), the clamp against the dtype of h */
    TRY(fastglu_check_glu_fwd(fn, params, NULL, 0, NULL, 0, NULL, NULL, FASTGLU_DTYPE_FP32, 0, NULL,
                              0, NULL, 0, 0, 0, dt, &unused));
    if (w2.dtype != dt || h.dtype != dt || dh.dtype != dt || (y.data != NULL && y.dtype != dt)) {
        const char *name = w2.dtype != dt   ? "w2"
                           : h.dtype != dt  ? "h"
                           : dh.dtype != dt ? "dh"
                                            : "y";
        const fastglu_dtype bad = w2.dtype != dt   ? w2.dtype
                                  : h.dtype != dt  ? h.dtype
                                  : dh.dtype != dt ? dh.dtype
                                                   : y.dtype;
        return fastglu_set_error(FASTGLU_ERROR_UNSUPPORTED_DTYPE,
                                 "%s: %s.dtype %d differs from d_out.dtype %d (d_out, w2, h, dh "
                                 "and y share one dtype)",
                                 fn, name, (int)bad, (int)dt);
    }
    if (weights.data != NULL) TRY(fastglu_check_compute_dtype(fn, "weights.dtype", weights.dtype));
    if (dweights.data != NULL) {
        if (weights.data == NULL)
            return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                     "%s: dweights is given without weights", fn);
        if (dweights.dtype != weights.dtype)
            return fastglu_set_error(FASTGLU_ERROR_UNSUPPORTED_DTYPE,
                                     "%s: dweights.dtype %d differs from weights.dtype %d", fn,
                                     (int)dweights.dtype, (int)weights.dtype);
    }
    TRY(check_size(fn, "tokens", tokens));
    TRY(check_size(fn, "hidden", hidden));
    TRY(check_size(fn, "ffn_hidden_size", ffn_hidden_size));
    *empty = tokens == 0 || (ffn_hidden_size == 0 && dweights.data == NULL);
    if (*empty) return FASTGLU_SUCCESS;

    const int64_t T = tokens, K = hidden, F = ffn_hidden_size;
    const size_t es = fastglu_dtype_size(dt);
    if (weights.data != NULL)
        TRY(fastglu_check_tensor(fn, &in[n_in++], "weights", weights.data, T, 1, weights.row_stride,
                                 1, fastglu_dtype_size(weights.dtype), 0));
    if (dweights.data != NULL)
        TRY(fastglu_check_tensor(fn, &out[n_out++], "dweights", dweights.data, T, 1,
                                 dweights.row_stride, 1, fastglu_dtype_size(dweights.dtype), 1));
    if (F > 0) {
        if (K > 0) { /* with K == 0 neither is read */
            TRY(fastglu_check_tensor(fn, &in[n_in++], "d_out", d_out.data, T, K, d_out.row_stride,
                                     1, es, 0));
            TRY(fastglu_check_tensor(fn, &in[n_in++], "w2", w2.data, K, F, w2.row_stride, 1, es,
                                     0));
        }
        h_in = n_in, dh_out = n_out;
        TRY(fastglu_check_tensor(fn, &in[n_in++], "h", h.data, T, 2 * F, h.row_stride, 1, es, 0));
        TRY(fastglu_check_tensor(fn, &out[n_out++], "dh", dh.data, T, 2 * F, dh.row_stride, 1, es,
                                 1));
        if (y.data != NULL)
            TRY(fastglu_check_tensor(fn, &out[n_out++], "y", y.data, T, F, y.row_stride, 1, es, 1));
    }
    for (int o = 0; o < n_out; ++o) {
        for (int i = 0; i < n_in; ++i)
            if (!(in_place && o == dh_out && i == h_in))
                TRY(fastglu_check_disjoint(fn, &out[o], &in[i]));
        for (int q = 0; q < o; ++q) TRY(fastglu_check_disjoint(fn, &out[o], &out[q]));
    }
    return FASTGLU_SUCCESS;
}

fastglu_gemm_problem fastglu_gemm_make_dglu_problem(const fastglu_glu_params *params,
                                                    fastglu_tensor d_out, fastglu_tensor w2,
                                                    fastglu_tensor h, fastglu_tensor weights,
                                                    fastglu_tensor dh, fastglu_tensor y,
                                                    fastglu_tensor dweights, int64_t tokens,
                                                    int64_t hidden, int64_t ffn_hidden_size) {
    fastglu_gemm_problem p;
    p.glu = params;
    p.x = d_out.data, p.x_row_stride = d_out.row_stride;
    p.w = w2.data, p.w_row_stride = w2.row_stride;
    p.bias = NULL;
    p.weights = weights.data;
    p.weights_dtype = weights.data ? weights.dtype : FASTGLU_DTYPE_FP32;
    p.weights_stride = weights.row_stride;
    p.h = h.data, p.h_row_stride = h.row_stride;
    p.y = y.data, p.y_row_stride = y.row_stride;
    p.dglu = 1;
    p.dh = dh.data, p.dh_row_stride = dh.row_stride;
    p.dweights = dweights.data, p.dweights_stride = dweights.row_stride;
    p.M = tokens, p.N = ffn_hidden_size, p.K = hidden;
    p.dtype = d_out.dtype;
    return p;
}

#ifndef FASTGLU_HAVE_CUDA
static fastglu_status no_cuda(const char *fn) {
    return fastglu_set_error(FASTGLU_ERROR_NO_CUDA,
                             "%s: fastglu was built without the CUDA backend", fn);
}

fastglu_status fastglu_linear_cuda(fastglu_tensor x, fastglu_tensor w, fastglu_tensor bias,
                                   fastglu_tensor out, int64_t tokens, int64_t in_features,
                                   int64_t out_features, void *stream) {
    static const char fn[] = "fastglu_linear_cuda";
    const fastglu_tensor none = {NULL, FASTGLU_DTYPE_FP32, 0};
    int empty;
    fastglu_status st = fastglu_check_linear(fn, 0, NULL, x, w, bias, none, out, none, tokens,
                                             in_features, out_features, &empty);
    (void)stream;
    return st != FASTGLU_SUCCESS || empty ? st : no_cuda(fn);
}

fastglu_status fastglu_linear_glu_fwd_cuda(const fastglu_glu_params *params, fastglu_tensor x,
                                           fastglu_tensor w1, fastglu_tensor bias,
                                           fastglu_tensor weights, fastglu_tensor h,
                                           fastglu_tensor y, int64_t tokens, int64_t hidden,
                                           int64_t ffn_hidden_size, void *stream) {
    static const char fn[] = "fastglu_linear_glu_fwd_cuda";
    int empty;
    fastglu_status st = fastglu_check_linear(fn, 1, params, x, w1, bias, weights, h, y, tokens,
                                             hidden, ffn_hidden_size, &empty);
    (void)stream;
    return st != FASTGLU_SUCCESS || empty ? st : no_cuda(fn);
}

fastglu_status fastglu_linear_dglu_bwd_cuda(const fastglu_glu_params *params, fastglu_tensor d_out,
                                            fastglu_tensor w2, fastglu_tensor h,
                                            fastglu_tensor weights, fastglu_tensor dh,
                                            fastglu_tensor y, fastglu_tensor dweights,
                                            int64_t tokens, int64_t hidden, int64_t ffn_hidden_size,
                                            void *stream) {
    static const char fn[] = "fastglu_linear_dglu_bwd_cuda";
    int empty;
    fastglu_status st =
        fastglu_check_linear_dglu(fn, params, d_out, w2, h, weights, dh, y, dweights, tokens,
                                  hidden, ffn_hidden_size, &empty);
    (void)stream;
    return st != FASTGLU_SUCCESS || empty ? st : no_cuda(fn);
}

void fastglu_debug_set_gemm_fallback(int on) { (void)on; }
#endif /* !FASTGLU_HAVE_CUDA */
