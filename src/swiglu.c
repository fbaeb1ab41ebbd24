/*
 * swiglu.c — fastglu_swiglu_{fwd,bwd}_{cpu,cuda}: plain SwiGLU on Megatron's fc1 output, as the
 * gated-linear-unit family's call with the plain SILU parameters, the SPLIT layout and
 * up = input + F (the same row stride); likewise dinput's halves. Both backends then run the
 * family's code (the CUDA one its kernels for that case, src/glu_swiglu.cuh), so a wrapper gives
 * the family's bits. The arguments are validated here first, under the wrapper's own names (input,
 * output, dy, dinput), so that a bad call is reported as the caller wrote it.
 */
#include <string.h>

#include "internal.h"

/* The family's operands for Megatron's fc1 output x [tokens, 2F]: gate = x[:, 0:F], up = x[:, F:2F]
 * (the same row stride), no bias or weights; likewise the gradients' halves in dinput. */
static fastglu_tensor part(const void *x, int64_t row_stride, int64_t col, fastglu_dtype dtype) {
    fastglu_tensor t;
    t.data = (char *)(uintptr_t)x + col * (int64_t)fastglu_dtype_size(dtype);
    t.dtype = dtype, t.row_stride = row_stride;
    return t;
}
static fastglu_glu_operands fc1_operands(const void *input, int64_t row_stride, int64_t F,
                                         fastglu_dtype dtype) {
    fastglu_glu_operands o;
    memset(&o, 0, sizeof o);
    o.gate = part(input, row_stride, 0, dtype), o.up = part(input, row_stride, F, dtype);
    return o;
}
static fastglu_glu_grads fc1_grads(void *dinput, int64_t row_stride, int64_t F,
                                   fastglu_dtype dtype) {
    fastglu_glu_grads g;
    memset(&g, 0, sizeof g);
    g.d_gate = part(dinput, row_stride, 0, dtype), g.d_up = part(dinput, row_stride, F, dtype);
    return g;
}
static const fastglu_tensor none = {NULL, FASTGLU_DTYPE_FP32, 0};
static const fastglu_workspace no_workspace = {NULL, 0};

fastglu_status fastglu_swiglu_fwd_cpu(const void *input, int64_t input_row_stride, void *output,
                                      int64_t output_row_stride, int64_t tokens,
                                      int64_t ffn_hidden_size, fastglu_dtype dtype) {
    int empty;
    const fastglu_status st =
        fastglu_check_swiglu_fwd("fastglu_swiglu_fwd_cpu", input, input_row_stride, output,
                                 output_row_stride, tokens, ffn_hidden_size, dtype, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    const fastglu_glu_params params = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    const fastglu_glu_operands o = fc1_operands(input, input_row_stride, ffn_hidden_size, dtype);
    return fastglu_glu_fwd_cpu(&params, &o, part(output, output_row_stride, 0, dtype), none, tokens,
                               ffn_hidden_size);
}

fastglu_status fastglu_swiglu_fwd_cuda(const void *input, int64_t input_row_stride, void *output,
                                       int64_t output_row_stride, int64_t tokens,
                                       int64_t ffn_hidden_size, fastglu_dtype dtype, void *stream) {
    int empty;
    const fastglu_status st =
        fastglu_check_swiglu_fwd("fastglu_swiglu_fwd_cuda", input, input_row_stride, output,
                                 output_row_stride, tokens, ffn_hidden_size, dtype, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    const fastglu_glu_params params = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    const fastglu_glu_operands o = fc1_operands(input, input_row_stride, ffn_hidden_size, dtype);
    return fastglu_glu_fwd_cuda(&params, &o, part(output, output_row_stride, 0, dtype), none,
                                tokens, ffn_hidden_size, stream);
}

fastglu_status fastglu_swiglu_bwd_cpu(const void *dy, int64_t dy_row_stride, int64_t dy_col_stride,
                                      const void *input, int64_t input_row_stride, void *dinput,
                                      int64_t dinput_row_stride, int64_t tokens,
                                      int64_t ffn_hidden_size, fastglu_dtype dtype) {
    int empty;
    const fastglu_status st = fastglu_check_swiglu_bwd(
        "fastglu_swiglu_bwd_cpu", dy, dy_row_stride, dy_col_stride, input, input_row_stride, dinput,
        dinput_row_stride, tokens, ffn_hidden_size, dtype, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    const fastglu_glu_params params = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    const fastglu_glu_operands o = fc1_operands(input, input_row_stride, ffn_hidden_size, dtype);
    const fastglu_glu_grads g = fc1_grads(dinput, dinput_row_stride, ffn_hidden_size, dtype);
    return fastglu_glu_bwd_cpu(&params, part(dy, dy_row_stride, 0, dtype), dy_col_stride, &o, &g,
                               no_workspace, tokens, ffn_hidden_size);
}

fastglu_status fastglu_swiglu_bwd_cuda(const void *dy, int64_t dy_row_stride, int64_t dy_col_stride,
                                       const void *input, int64_t input_row_stride, void *dinput,
                                       int64_t dinput_row_stride, int64_t tokens,
                                       int64_t ffn_hidden_size, fastglu_dtype dtype, void *stream) {
    int empty;
    const fastglu_status st = fastglu_check_swiglu_bwd(
        "fastglu_swiglu_bwd_cuda", dy, dy_row_stride, dy_col_stride, input, input_row_stride,
        dinput, dinput_row_stride, tokens, ffn_hidden_size, dtype, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    const fastglu_glu_params params = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    const fastglu_glu_operands o = fc1_operands(input, input_row_stride, ffn_hidden_size, dtype);
    const fastglu_glu_grads g = fc1_grads(dinput, dinput_row_stride, ffn_hidden_size, dtype);
    return fastglu_glu_bwd_cuda(&params, part(dy, dy_row_stride, 0, dtype), dy_col_stride, &o, &g,
                                no_workspace, tokens, ffn_hidden_size, stream);
}
