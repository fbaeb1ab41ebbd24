/*
 * gemm_reference.h — the C test driver of the linear layers (fastglu_linear_*,
 * fastglu_linear_glu_fwd_*), shared by the CPU and CUDA tests: fresh random inputs each run
 * (FASTGLU_TEST_SEED=N repeats one), a float64 reference written from include/fastglu.h, outputs in
 * padded rows pre-filled with a NaN sentinel, and suites over the variants (activations, layouts,
 * bias, weights, clamp, offset, multipliers, h stored or not), dtypes and shapes.
 */
#ifndef FASTGLU_TEST_GEMM_REFERENCE_H
#define FASTGLU_TEST_GEMM_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

#include "fastglu.h"

typedef struct gemm_backend {
    const char *name;
    fastglu_status (*linear)(fastglu_tensor x, fastglu_tensor w, fastglu_tensor bias,
                             fastglu_tensor out, int64_t tokens, int64_t in_features,
                             int64_t out_features);
    fastglu_status (*linear_glu)(const fastglu_glu_params *params, fastglu_tensor x,
                                 fastglu_tensor w1, fastglu_tensor bias, fastglu_tensor weights,
                                 fastglu_tensor h, fastglu_tensor y, int64_t tokens, int64_t hidden,
                                 int64_t F);
    fastglu_status (*glu_fwd)(const fastglu_glu_params *params, const void *gate, int64_t gate_rs,
                              const void *up, int64_t up_rs, const void *bias, const void *weights,
                              fastglu_dtype weights_dtype, int64_t weights_stride, void *output,
                              int64_t output_rs, void *saved_fp8, int64_t saved_fp8_rs,
                              int64_t tokens, int64_t F, fastglu_dtype dtype);
    void *(*alloc)(size_t bytes);
    void (*release)(void *p);
    void (*upload)(void *dst, const void *src, size_t bytes);
    void (*download)(void *dst, const void *src, size_t bytes);
    void (*sync)(void);
    /* fastglu_linear_dglu_bwd_* (the run_dglu_* suites call it; may be set after the initializer) */
    fastglu_status (*linear_dglu)(const fastglu_glu_params *params, fastglu_tensor d_out,
                                  fastglu_tensor w2, fastglu_tensor h, fastglu_tensor weights,
                                  fastglu_tensor dh, fastglu_tensor y, fastglu_tensor dweights,
                                  int64_t tokens, int64_t hidden, int64_t F);
} gemm_backend;

typedef struct gemm_shape {
    int64_t T, H, F;
} gemm_shape;

void gemm_seed(const char *name);

/* Every variant (and the plain linear) x dtype (mask: 1 FP32, 2 FP16, 4 BF16) at each shape, with
 * misaligned (one element off) base pointers and padded row strides on every other case. Each case:
 * y and h (and out) against the float64 reference (relative Frobenius error <= bf16 1e-2, fp16
 * 1e-3, fp32 1e-5, over every row, or over a sample of 48 rows where T * 2F * H > 2^28), every
 * output element written and no padding byte touched, y bitwise equal to the backend's
 * fastglu_glu_fwd on the stored h (where b->glu_fwd is not NULL), and y computed without storing h
 * bitwise equal to y with h.
 * variants_mask selects variants (bit i: variant i; ~0 all). Returns the number of failures. */
int run_gemm_suite(const gemm_backend *b, const gemm_shape *shapes, int n_shapes, int dtype_mask,
                   unsigned variants_mask);

/* Bad input: wrong dtypes, misaligned pointers, negative sizes, a non-contiguous bias, short
 * output rows, outputs overlapping inputs or each other, bad params: each returns its status with
 * a message naming the argument, and leaves every output byte as it was. */
int run_gemm_errors(const gemm_backend *b);

/* The same call twice gives bitwise identical h and y, at each shape; with set_config, under each
 * configuration 0..n_configs-1 (e.g. the sm_90 kernel and the general one) separately. */
int run_gemm_determinism(const gemm_backend *b, const gemm_shape *shapes, int n_shapes,
                         void (*set_config)(int k), int n_configs);

/* fc2 dgrad + dGLU (fastglu_linear_dglu_bwd_*): every GLU variant x dtype (mask as above) at
 * each shape (H the GEMM's K), odd (one element off, odd strides, dweights strided) and aligned
 * cases alternating (dweights asked on the odd ones). Inputs dO, w2, h, weights fresh and random;
 * dh, y, dweights against float64
 * (dY exact, the family's backward from include/fastglu.h with the clamp bound rounded to dtype),
 * relative Frobenius error within the dtype's tolerance (dweights: its own dtype's); sentinel
 * padding untouched, every element written; dh again without y and dweights, bitwise equal; y
 * bitwise equal to the backend's fastglu_glu_fwd on h (where b->glu_fwd is not NULL). */
int run_dglu_suite(const gemm_backend *b, const gemm_shape *shapes, int n_shapes, int dtype_mask,
                   unsigned variants_mask);

/* Bad input of fastglu_linear_dglu_bwd_*: status, message naming the argument, nothing written. */
int run_dglu_errors(const gemm_backend *b);

/* The same dglu call (weights; with dweights and without) twice: bitwise equal dh, y, dweights;
 * with set_config under each configuration. */
int run_dglu_determinism(const gemm_backend *b, const gemm_shape *shapes, int n_shapes,
                         void (*set_config)(int k), int n_configs);

#endif
