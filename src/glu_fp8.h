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
 * fastglu_glu_bwd_fp8_* (y then stands for dh: outputs 2F wide; dbias and dweights, NULL in the
 * forward, the backward's reductions); fn names the function in the message. *empty = 1 when
 * tokens == 0 or F == 0 (nothing to do; the pointers are then not checked, except dbias's and
 * dweights', which the caller then zero-fills: dbias when F > 0, dweights when tokens > 0).
 * need_workspace: the backend needs the workspace for FASTGLU_FP8_SCALING_TENSOR (CUDA); with
 * dbias or dweights both backends need it (the partials). scale_inv (the backward only; NULL: the
 * operands in the call's dtype): gate and up are the blockwise copy's codes
 * (fastglu_glu_bwd_fp8_saved_blockwise_*) with these 1 x 128 scales, and the call's dtype is
 * dy's. */
fastglu_status fastglu_check_glu_fp8(const char *fn, const fastglu_glu_params *params,
                                     const fastglu_fp8_recipe *recipe, const fastglu_tensor *dy,
                                     fastglu_tensor gate, fastglu_tensor up,
                                     const fastglu_tensor *scale_inv, fastglu_tensor bias,
                                     fastglu_tensor weights, fastglu_tensor y,
                                     const fastglu_tensor *dbias, const fastglu_tensor *dweights,
                                     const fastglu_fp8_out *out, int64_t tokens, int64_t F,
                                     int need_workspace, int *empty);

/* Validates every argument of fastglu_quantize_fp8_*; *empty = 1 when rows == 0 or cols == 0
 * (nothing to do; the pointers are then not checked). */
fastglu_status fastglu_check_quantize_fp8(const char *fn, const fastglu_fp8_recipe *recipe,
                                          fastglu_tensor x, const fastglu_fp8_out *out,
                                          int64_t rows, int64_t cols, int *empty);

/* Validates every argument of fastglu_glu_fp8_store_blockwise_*; *empty = 1 when tokens == 0 or
 * F == 0 (nothing to do; the pointers are then not checked). */
fastglu_status fastglu_check_glu_fp8_store(const char *fn, const fastglu_glu_params *params,
                                           fastglu_tensor gate, fastglu_tensor up,
                                           fastglu_tensor gate_fp8, fastglu_tensor up_fp8,
                                           fastglu_tensor scale_inv, int64_t tokens, int64_t F,
                                           int *empty);

/* Validates every argument of fastglu_glu_fwd_fp8_store_blockwise_*: the forward's
 * (fastglu_check_glu_fwd on the descriptors, no saved_fp8), the copy's
 * (fastglu_check_glu_fp8_store) and output against the copy's outputs. *empty as those. */
fastglu_status fastglu_check_glu_fwd_fp8_store(const char *fn, const fastglu_glu_params *params,
                                               const fastglu_glu_operands *operands,
                                               fastglu_tensor output, fastglu_tensor gate_fp8,
                                               fastglu_tensor up_fp8, fastglu_tensor scale_inv,
                                               int64_t tokens, int64_t F, int *empty);

/* Validates every argument of fastglu_glu_fwd_fp8_copy_blockwise_*: the forward's
 * (fastglu_check_glu_fp8), the copy's (fastglu_check_glu_fp8_store) and each of the copy's outputs
 * against every region the forward reads or writes. *empty as those. */
fastglu_status fastglu_check_glu_fwd_fp8_copy(
    const char *fn, const fastglu_glu_params *params, const fastglu_fp8_recipe *recipe,
    fastglu_tensor gate, fastglu_tensor up, fastglu_tensor bias, fastglu_tensor weights,
    fastglu_tensor y, const fastglu_fp8_out *out, fastglu_tensor gate_fp8, fastglu_tensor up_fp8,
    fastglu_tensor scale_inv, int64_t tokens, int64_t F, int need_workspace, int *empty);

static inline int64_t fastglu_fp8_blocks(int64_t n) { return (n + 127) / 128; }

/* The backward's workspace (fastglu_glu_bwd_fp8_workspace_bytes), each part 16-byte aligned:
 *   [0, 16)                 the amax of FASTGLU_FP8_SCALING_TENSOR (CUDA; present for TENSOR)
 *   [db_offset, + db_bytes) dbias partials, fp32 [ceil(T / 128)][2F]: the row tiles' column sums
 *   [dw_offset, + dw_bytes) dweights partials, fp32 [ceil(2F / 128)][T]: the column tiles' row
 *                           sums (SPLIT fills the first ceil(F / 128), the tiles with d_gate
 *                           columns; INTERLEAVED all)
 * Absent parts have offset and bytes 0; total 0 when nothing is needed. */
typedef struct fastglu_fp8_bwd_workspace {
    size_t db_offset, db_bytes, dw_offset, dw_bytes, total;
} fastglu_fp8_bwd_workspace;
fastglu_fp8_bwd_workspace fastglu_fp8_bwd_workspace_layout(const fastglu_fp8_recipe *recipe,
                                                           int64_t tokens, int64_t F,
                                                           int want_dbias, int want_dweights);

/* The empty backward's sums over nothing on host memory: dbias (F > 0) and dweights (T > 0), those
 * present, set to zero. */
void fastglu_fp8_zero_sums(fastglu_tensor gate, fastglu_tensor dbias, fastglu_tensor dweights,
                           int64_t tokens, int64_t F);

/* The dweights partials' column tiles: those holding d_gate columns (SPLIT: ceil(F / 128), the
 * tiles of d_gate's columns [0, F); INTERLEAVED: every tile, ceil(2F / 128)). */
static inline int64_t fastglu_fp8_dw_tiles(int il, int64_t F) {
    return fastglu_fp8_blocks(il ? 2 * F : F);
}

#ifdef __cplusplus
}
#endif

#endif /* FASTGLU_GLU_FP8_H */
