/*
 * swiglu_cpu.c — SwiGLU forward and backward on host memory (the CPU backend).
 *
 * Math and layout: see include/fastglu.h. Plain loops over rows and columns; each element is
 * widened to float, computed in fp32 in the CUDA kernels' order of operations, and rounded to the
 * storage type (round-to-nearest-even) when stored, as the CUDA backend does.
 */
#include <math.h>

#include "convert.h"
#include "internal.h"

static inline float f32_load(float x) { return x; }
static inline float f32_store(float x) { return x; }

/* ---- the math, in fp32 -------------------------------------------------------------------- */

/* The CUDA kernels' operations (swiglu_cuda.cu, cuda_common.cuh: silu_sigmoid), each rounded to
 * fp32 (the library's C is compiled with -ffp-contract=off): sigmoid(g) = 1 / (1 + 2^(-log2(e) g)).
 * The GPU's 2^x and 1 / x are within a few ulp of exp2f and the division; tests/emu compares the
 * kernels, compiled for the host with these functions, with this backend bit for bit. */
static inline float sigmoidf(float g) { return 1.0f / (1.0f + exp2f(-1.44269504f * g)); }

/*
 * The loops, written once per storage type through a macro: T is the storage type, LOAD/STORE
 * convert it to and from float.
 */
#define DEFINE_SWIGLU_CPU(SUFFIX, T, LOAD, STORE)                                                  \
    static void swiglu_fwd_##SUFFIX(const T *input, int64_t in_rs, T *out, int64_t out_rs,         \
                                    int64_t tokens, int64_t F) {                                   \
        for (int64_t t = 0; t < tokens; ++t) {                                                     \
            const T *gate = input + t * in_rs;                                                     \
            const T *up = gate + F;                                                                \
            T *y = out + t * out_rs;                                                               \
            for (int64_t j = 0; j < F; ++j) {                                                      \
                float g = LOAD(gate[j]);                                                           \
                y[j] = STORE((g * sigmoidf(g)) * LOAD(up[j]));                                     \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    static void swiglu_bwd_##SUFFIX(const T *dy, int64_t dy_rs, int64_t dy_cs, const T *input,     \
                                    int64_t in_rs, T *dinput, int64_t din_rs, int64_t tokens,      \
                                    int64_t F) {                                                   \
        for (int64_t t = 0; t < tokens; ++t) {                                                     \
            const T *gate = input + t * in_rs;                                                     \
            const T *up = gate + F;                                                                \
            const T *d = dy + t * dy_rs;                                                           \
            T *dgate = dinput + t * din_rs;                                                        \
            T *dup = dgate + F;                                                                    \
            for (int64_t j = 0; j < F; ++j) {                                                      \
                float g = LOAD(gate[j]), u = LOAD(up[j]), dj = LOAD(d[j * dy_cs]);                 \
                float s = sigmoidf(g), a = g * s;                                                  \
                dgate[j] = STORE((dj * u) * (a * (1.0f - s) + s));                                 \
                dup[j] = STORE(dj * a);                                                            \
            }                                                                                      \
        }                                                                                          \
    }

DEFINE_SWIGLU_CPU(f32, float, f32_load, f32_store)
DEFINE_SWIGLU_CPU(f16, uint16_t, fp16_to_f32, f32_to_fp16)
DEFINE_SWIGLU_CPU(bf16, uint16_t, bf16_to_f32, f32_to_bf16)

/* ---- public entry points ------------------------------------------------------------------ */

fastglu_status fastglu_swiglu_fwd_cpu(const void *input, int64_t input_row_stride, void *output,
                                      int64_t output_row_stride, int64_t tokens,
                                      int64_t ffn_hidden_size, fastglu_dtype dtype) {
    int empty;
    fastglu_status st =
        fastglu_check_swiglu_fwd("fastglu_swiglu_fwd_cpu", input, input_row_stride, output,
                                 output_row_stride, tokens, ffn_hidden_size, dtype, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    switch (dtype) {
    case FASTGLU_DTYPE_FP32:
        swiglu_fwd_f32((const float *)input, input_row_stride, (float *)output, output_row_stride,
                       tokens, ffn_hidden_size);
        break;
    case FASTGLU_DTYPE_FP16:
        swiglu_fwd_f16((const uint16_t *)input, input_row_stride, (uint16_t *)output,
                       output_row_stride, tokens, ffn_hidden_size);
        break;
    case FASTGLU_DTYPE_BF16:
        swiglu_fwd_bf16((const uint16_t *)input, input_row_stride, (uint16_t *)output,
                        output_row_stride, tokens, ffn_hidden_size);
        break;
    default: /* FP8 is rejected by the check above */
        break;
    }
    return FASTGLU_SUCCESS;
}

fastglu_status fastglu_swiglu_bwd_cpu(const void *dy, int64_t dy_row_stride, int64_t dy_col_stride,
                                      const void *input, int64_t input_row_stride, void *dinput,
                                      int64_t dinput_row_stride, int64_t tokens,
                                      int64_t ffn_hidden_size, fastglu_dtype dtype) {
    int empty;
    fastglu_status st = fastglu_check_swiglu_bwd(
        "fastglu_swiglu_bwd_cpu", dy, dy_row_stride, dy_col_stride, input, input_row_stride,
        dinput, dinput_row_stride, tokens, ffn_hidden_size, dtype, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    switch (dtype) {
    case FASTGLU_DTYPE_FP32:
        swiglu_bwd_f32((const float *)dy, dy_row_stride, dy_col_stride, (const float *)input,
                       input_row_stride, (float *)dinput, dinput_row_stride, tokens,
                       ffn_hidden_size);
        break;
    case FASTGLU_DTYPE_FP16:
        swiglu_bwd_f16((const uint16_t *)dy, dy_row_stride, dy_col_stride,
                       (const uint16_t *)input, input_row_stride, (uint16_t *)dinput,
                       dinput_row_stride, tokens, ffn_hidden_size);
        break;
    case FASTGLU_DTYPE_BF16:
        swiglu_bwd_bf16((const uint16_t *)dy, dy_row_stride, dy_col_stride,
                        (const uint16_t *)input, input_row_stride, (uint16_t *)dinput,
                        dinput_row_stride, tokens, ffn_hidden_size);
        break;
    default: /* FP8 is rejected by the check above */
        break;
    }
    return FASTGLU_SUCCESS;
}
