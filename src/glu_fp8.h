/*
 * glu_fp8.h — validation shared by fastglu_glu_fwd_fp8_cpu and _cuda (glu_fp8_common.c). Not
 * installed.
 */
#ifndef FASTGLU_GLU_FP8_H
#define FASTGLU_GLU_FP8_H

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Validates every argument of fastglu_glu_fwd_fp8_* and, with dy (not NULL), of
 * fastglu_glu_bwd_fp8_* (y then stands for dh: outputs 2F wide); fn names the function in the
 * message. *empty = 1 when tokens == 0 or F == 0 (nothing to do; the pointers are then not
 * checked). need_workspace: the backend needs the workspace for FASTGLU_FP8_SCALING_TENSOR (CUDA). */
fastglu_status fastglu_check_glu_fp8(const char *fn, const fastglu_glu_params *params,
                                     const fastglu_fp8_recipe *recipe, const fastglu_tensor *dy,
                                     fastglu_tensor gate, fastglu_tensor up, fastglu_tensor bias,
                                     fastglu_tensor weights, fastglu_tensor y,
                                     const fastglu_fp8_out *out, int64_t tokens, int64_t F,
                                     int need_workspace, int *empty);

static inline int64_t fastglu_fp8_blocks(int64_t n) { return (n + 127) / 128; }

#ifdef __cplusplus
}
#endif

#endif /* FASTGLU_GLU_FP8_H */
