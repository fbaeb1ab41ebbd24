/*
 * gemm_internal.h — the contract between the GEMM entry points (gemm_cuda.cu: validation, choice of
 * kernel, fallback) and the Hopper kernel (gemm_sm90.cu: TMA + wgmma, sm_90a only). Not installed.
 *
 * Problem, all matrices row-major with column stride 1, element type `dtype` (BF16 or FP16) unless
 * said otherwise, fp32 accumulation:
 *
 *   plain GEMM (glu == NULL):   out[M, N] = x[M, K] @ w[N, K]^T (+ bias[N])            (F.linear)
 *                               `out` is h / h_row_stride; y is unused (NULL).
 *   fc1 + GLU (glu != NULL):    h[M, 2F] = x[M, K] @ w[2F, K]^T (+ bias[2F]),  F = N
 *                               y[M, F]  = glu(h) with the family's math (include/fastglu.h),
 *                               computed from h rounded to `dtype` (the value the standalone
 *                               kernel and the backward read), per-token weights[M] optional.
 *                               SPLIT: gate = h[:, 0:F] (w rows [0, F)), up = h[:, F:2F]
 *                               (w rows [F, 2F)); INTERLEAVED: gate = h[:, 2j], up = h[:, 2j + 1]
 *                               (w rows interleaved the same way). h may be NULL (not stored).
 *   fc2 dgrad + dGLU (dglu != 0, glu != NULL):
 *                               dY[M, F] = x[M, K] @ w[K, F]   (x = dO, w = fc2's weight w2, row-major
 *                               [K rows of F]: the B operand is N-major, not K-major), fp32,
 *                               rounded to dtype; h[M, 2F] (an input) the saved pre-activation,
 *                               no bias;
 *                               dh[M, 2F] = the family's backward in h's layout; y NULL or [M, F]
 *                               = glu(h); dweights NULL or [M] (weights_dtype) = the per-token sum.
 *
 * The problem has been validated before it reaches a kernel (sizes >= 0, pointers, strides,
 * no output overlapping an input); M, N or K may still be 0 only where the caller handles it.
 */
#ifndef FASTGLU_GEMM_INTERNAL_H
#define FASTGLU_GEMM_INTERNAL_H

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fastglu_gemm_problem {
    const fastglu_glu_params *glu; /* NULL: plain GEMM; else the epilogue's activation and layout */
    const void *x; /* [M, K], row stride x_row_stride                              */
    int64_t x_row_stride;
    const void *w; /* [N, K] plain, [2F, K] with glu; row stride w_row_stride        */
    int64_t w_row_stride;
    const void *bias;    /* NULL, or [N] plain / [2F] with glu, contiguous, dtype          */
    const void *weights; /* glu only: NULL, or [M] per-token weights                       */
    fastglu_dtype weights_dtype; /* FP32, FP16 or BF16                                            */
    int64_t weights_stride;      /* elements between weights[t] and weights[t + 1]                */
    void *h; /* plain: the output [M, N]; glu: NULL or [M, 2F]                 */
    int64_t h_row_stride;
    void *y; /* glu: [M, F]; plain: NULL                                      */
    int64_t y_row_stride;
    int dglu; /* 1: fc2 dgrad + dGLU (h an input; dh, dweights outputs)        */
    void *dh; /* dglu: [M, 2F], h's layout                                      */
    int64_t dh_row_stride;
    void *dweights; /* dglu: NULL or [M], weights_dtype, stride dweights_stride      */
    int64_t dweights_stride;
    int64_t M, N, K;     /* tokens, output features (F with glu), input features (hidden) */
    fastglu_dtype dtype; /* FASTGLU_DTYPE_BF16 or FASTGLU_DTYPE_FP16                       */
} fastglu_gemm_problem;

/* 1 when the sm_90a kernel takes this problem on `device` (compute capability 9.0, the library
 * built with it, TMA's rules: 16-byte aligned base pointers and row strides, K and N multiples
 * of 8, ...), else 0 (the caller then runs the fallback). Never records an error. */
int fastglu_gemm_sm90_supported(const fastglu_gemm_problem *p, int device);

/* Enqueue the sm_90a kernel on `stream` (a cudaStream_t). Only called when supported() said 1.
 * Returns FASTGLU_SUCCESS or FASTGLU_ERROR_CUDA (with fastglu_set_error's message). */
fastglu_status fastglu_gemm_sm90_launch(const fastglu_gemm_problem *p, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* FASTGLU_GEMM_INTERNAL_H */
