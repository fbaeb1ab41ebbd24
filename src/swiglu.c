/*
 * swiglu.c — fastglu_swiglu_{fwd,bwd}_{cpu,cuda}: plain SwiGLU on Megatron's fc1 output, as the
 * gated-linear-unit family's call with the plain SILU parameters, the SPLIT layout and
 * up = input + F (the same row stride); likewise dinput's halves. Both backends then run the
 * family's code (the CUDA one its kernels for that case, src/glu_swiglu.cuh), so a wrapper gives
 * the family's bits. The arguments are validated here first, under the wrapper's own names (input,
 * output, dy, dinput), so that a bad call is reported as the caller wrote it.
 */
#include "internal.h"

/* The family's call for plain SwiGLU: the forward with no bias, weights or fp8 copy. */
#define SWIGLU_FWD_ARGS(input, in_rs, output, out_rs, tokens, F, dtype)                            \
    &params, (input), (in_rs), (const char *)(input) + (F) * (int64_t)fastglu_dtype_size(dtype),   \
        (in_rs), NULL, NULL, FASTGLU_DTYPE_FP32, 0, (output), (out_rs), NULL, 0, (tokens), (F),     \
        (dtype)
#define SWIGLU_BWD_ARGS(dy, dy_rs, dy_cs, input, in_rs, dinput, din_rs, tokens, F, dtype)          \
    &params, (dy), (dy_rs), (dy_cs), (input), (in_rs),                                             \
        (const char *)(input) + (F) * (int64_t)fastglu_dtype_size(dtype), (in_rs), (dtype), NULL,   \
        0, NULL, NULL, FASTGLU_DTYPE_FP32, 0, (dinput), (din_rs),                                  \
        (char *)(dinput) + (F) * (int64_t)fastglu_dtype_size(dtype), (din_rs), NULL, NULL, NULL, 0, \
        (tokens), (F), (dtype)

fastglu_status fastglu_swiglu_fwd_cpu(const void *input, int64_t input_row_stride, void *output,
                                      int64_t output_row_stride, int64_t tokens,
                                      int64_t ffn_hidden_size, fastglu_dtype dtype) {
    int empty;
    const fastglu_status st =
        fastglu_check_swiglu_fwd("fastglu_swiglu_fwd_cpu", input, input_row_stride, output,
                                 output_row_stride, tokens, ffn_hidden_size, dtype, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    const fastglu_glu_params params = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    return fastglu_glu_fwd_cpu(SWIGLU_FWD_ARGS(input, input_row_stride, output, output_row_stride,
                                               tokens, ffn_hidden_size, dtype));
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
    return fastglu_glu_fwd_cuda(SWIGLU_FWD_ARGS(input, input_row_stride, output, output_row_stride,
                                                tokens, ffn_hidden_size, dtype),
                                stream);
}

fastglu_status fastglu_swiglu_bwd_cpu(const void *dy, int64_t dy_row_stride, int64_t dy_col_stride,
                                      const void *input, int64_t input_row_stride, void *dinput,
                                      int64_t dinput_row_stride, int64_t tokens,
                                      int64_t ffn_hidden_size, fastglu_dtype dtype) {
    int empty;
    const fastglu_status st = fastglu_check_swiglu_bwd(
        "fastglu_swiglu_bwd_cpu", dy, dy_row_stride, dy_col_stride, input, input_row_stride,
        dinput, dinput_row_stride, tokens, ffn_hidden_size, dtype, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    const fastglu_glu_params params = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    return fastglu_glu_bwd_cpu(SWIGLU_BWD_ARGS(dy, dy_row_stride, dy_col_stride, input,
                                               input_row_stride, dinput, dinput_row_stride, tokens,
                                               ffn_hidden_size, dtype));
}

fastglu_status fastglu_swiglu_bwd_cuda(const void *dy, int64_t dy_row_stride,
                                       int64_t dy_col_stride, const void *input,
                                       int64_t input_row_stride, void *dinput,
                                       int64_t dinput_row_stride, int64_t tokens,
                                       int64_t ffn_hidden_size, fastglu_dtype dtype, void *stream) {
    int empty;
    const fastglu_status st = fastglu_check_swiglu_bwd(
        "fastglu_swiglu_bwd_cuda", dy, dy_row_stride, dy_col_stride, input, input_row_stride,
        dinput, dinput_row_stride, tokens, ffn_hidden_size, dtype, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    const fastglu_glu_params params = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    return fastglu_glu_bwd_cuda(SWIGLU_BWD_ARGS(dy, dy_row_stride, dy_col_stride, input,
                                                input_row_stride, dinput, dinput_row_stride,
                                                tokens, ffn_hidden_size, dtype),
                                stream);
}
