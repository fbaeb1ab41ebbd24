/*
 * cuda_stub.c — the CUDA entry points of a CPU-only build: they validate their arguments like the
 * real ones; an empty problem succeeds (as it does with CUDA: nothing to launch; an empty glu
 * backward zero-fills dbias / dweights as the contract says), anything else returns
 * FASTGLU_ERROR_NO_CUDA without touching memory.
 */
#include <string.h>

#include "internal.h"

int fastglu_cuda_built(void) { return 0; }

int fastglu_cuda_available(void) { return 0; }

static fastglu_status no_cuda(const char *fn) {
    return fastglu_set_error(FASTGLU_ERROR_NO_CUDA,
                             "%s: fastglu was built without the CUDA backend", fn);
}

/* fastglu_swiglu_*_cuda: src/swiglu.c (a wrapper over fastglu_glu_*_cuda below). */

static fastglu_status fwd_entry(const fastglu_glu_params *params, const void *gate,
                                int64_t gate_row_stride, const void *up, int64_t up_row_stride,
                                const void *bias, const void *weights, fastglu_dtype weights_dtype,
                                int64_t weights_stride, void *output, int64_t output_row_stride,
                                void *saved_fp8, int64_t saved_fp8_row_stride, int64_t tokens,
                                int64_t ffn_hidden_size, fastglu_dtype dtype, void *stream) {
    static const char fn[] = "fastglu_glu_fwd_cuda";
    int empty;
    fastglu_status st =
        fastglu_check_glu_fwd(fn, params, gate, gate_row_stride, up, up_row_stride, bias, weights,
                              weights_dtype, weights_stride, output, output_row_stride, saved_fp8,
                              saved_fp8_row_stride, tokens, ffn_hidden_size, dtype, &empty);
    (void)stream;
    return st != FASTGLU_SUCCESS || empty ? st : no_cuda(fn);
}

/* An empty backward succeeds and writes its zero dbias / dweights, as the CUDA backend does (a
 * CPU-only build has no device memory: the pointers it is given are host memory). */
static fastglu_status bwd_entry(const fastglu_glu_params *params, const void *dy,
                                int64_t dy_row_stride, int64_t dy_col_stride, const void *gate,
                                int64_t gate_row_stride, const void *up, int64_t up_row_stride,
                                fastglu_dtype input_dtype, const float *input_scale_inv,
                                int64_t input_scale_stride, int input_scale_1x128, const void *bias,
                                const void *weights, fastglu_dtype weights_dtype,
                                int64_t weights_stride, void *d_gate, int64_t d_gate_row_stride,
                                void *d_up, int64_t d_up_row_stride, void *dbias, void *dweights,
                                void *workspace, size_t workspace_bytes, int64_t tokens,
                                int64_t ffn_hidden_size, fastglu_dtype dtype, void *stream) {
    static const char fn[] = "fastglu_glu_bwd_cuda";
    int empty;
    fastglu_status st = fastglu_check_glu_bwd(
        fn, params, dy, dy_row_stride, dy_col_stride, gate, gate_row_stride, up, up_row_stride,
        input_dtype, input_scale_inv, input_scale_stride, input_scale_1x128, bias, weights,
        weights_dtype, weights_stride, d_gate, d_gate_row_stride, d_up, d_up_row_stride, dbias,
        dweights, workspace, workspace_bytes, tokens, ffn_hidden_size, dtype, &empty);
    (void)stream;
    if (st != FASTGLU_SUCCESS) return st;
    if (!empty) return no_cuda(fn);
    if (dbias != NULL && ffn_hidden_size > 0)
        memset(dbias, 0, (size_t)(2 * ffn_hidden_size) * fastglu_dtype_size(dtype));
    if (dweights != NULL && tokens > 0)
        memset(dweights, 0, (size_t)tokens * fastglu_dtype_size(weights_dtype));
    return FASTGLU_SUCCESS;
}

fastglu_status fastglu_glu_fwd_cuda(FASTGLU_GLU_FWD_ARGS, void *stream) {
    const fastglu_status st =
        fastglu_check_glu_fwd_descriptors("fastglu_glu_fwd_cuda", operands, &output, &saved_fp8);
    if (st != FASTGLU_SUCCESS) return st;
    return fwd_entry(params,
                     FASTGLU_GLU_FWD_FIELDS(operands, output, saved_fp8, tokens, ffn_hidden_size),
                     stream);
}

fastglu_status fastglu_glu_bwd_cuda(FASTGLU_GLU_BWD_ARGS, void *stream) {
    const fastglu_status st =
        fastglu_check_glu_bwd_descriptors("fastglu_glu_bwd_cuda", &dy, operands, grads);
    if (st != FASTGLU_SUCCESS) return st;
    return bwd_entry(params,
                     FASTGLU_GLU_BWD_FIELDS(dy, dy_col_stride, operands, grads, workspace, tokens,
                                            ffn_hidden_size),
                     stream);
}

void fastglu_debug_set_max_blocks(int64_t max_blocks) { (void)max_blocks; }
void fastglu_debug_set_generic_kernels(int on) { (void)on; }
void fastglu_debug_set_fp8_saved_shift(int on) { (void)on; }
