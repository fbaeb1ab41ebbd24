/*
 * gemm_common.h — the linear layers' validation and the fastglu_gemm_problem it builds, shared by
 * the CPU backend (gemm_cpu.c), the CUDA entry points (gemm_cuda.cu) and a CPU-only build's CUDA
 * stubs (gemm_common.c). Not installed.
 */
#ifndef FASTGLU_GEMM_COMMON_H
#define FASTGLU_GEMM_COMMON_H

#include "gemm_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Validate a linear call: glu 0 for fastglu_linear_* (params unused, w named "w", out is `h`,
 * weights / y must be absent), 1 for fastglu_linear_glu_fwd_* (w named "w1", out_features = F, w1
 * and h have 2F rows / columns). Order: params, dtypes, sizes; then, unless *empty (tokens == 0
 * or out_features == 0), every tensor (NULL, element alignment, strides, span; bias contiguous)
 * and every output against every input and the other output. Messages name the argument.
 */
fastglu_status fastglu_check_linear(const char *fn, int glu, const fastglu_glu_params *params,
                                    fastglu_tensor x, fastglu_tensor w, fastglu_tensor bias,
                                    fastglu_tensor weights, fastglu_tensor h, fastglu_tensor y,
                                    int64_t tokens, int64_t in_features, int64_t out_features,
                                    int *empty);

/* The problem of a validated call (gemm_internal.h): M = tokens, N = out_features (F), K. */
fastglu_gemm_problem fastglu_gemm_make_problem(const fastglu_glu_params *params, fastglu_tensor x,
                                               fastglu_tensor w, fastglu_tensor bias,
                                               fastglu_tensor weights, fastglu_tensor h,
                                               fastglu_tensor y, int64_t tokens,
                                               int64_t in_features, int64_t out_features);

/*
 * Validate fastglu_linear_dglu_bwd_* (include/fastglu.h): params, dtypes (d_out, w2, h, dh, y one
 * compute dtype; weights and dweights one compute dtype; dweights requires weights), sizes; then,
 * unless *empty (tokens == 0, or F == 0 without dweights), every tensor and every output against
 * every input and the other outputs. Messages name the argument.
 */
fastglu_status fastglu_check_linear_dglu(const char *fn, const fastglu_glu_params *params,
                                         fastglu_tensor d_out, fastglu_tensor w2, fastglu_tensor h,
                                         fastglu_tensor weights, fastglu_tensor dh,
                                         fastglu_tensor y, fastglu_tensor dweights, int64_t tokens,
                                         int64_t hidden, int64_t ffn_hidden_size, int *empty);

/* The problem of a validated fastglu_linear_dglu_bwd_* call (gemm_internal.h, dglu = 1). */
fastglu_gemm_problem fastglu_gemm_make_dglu_problem(const fastglu_glu_params *params,
                                                    fastglu_tensor d_out, fastglu_tensor w2,
                                                    fastglu_tensor h, fastglu_tensor weights,
                                                    fastglu_tensor dh, fastglu_tensor y,
                                                    fastglu_tensor dweights, int64_t tokens,
                                                    int64_t hidden, int64_t ffn_hidden_size);

#ifdef __cplusplus
}
#endif

#endif /* FASTGLU_GEMM_COMMON_H */
