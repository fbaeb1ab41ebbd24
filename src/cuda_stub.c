/*
 * cuda_stub.c — the CUDA entry points of a CPU-only build: they validate their arguments like the
 * real ones; an empty problem succeeds (as it does with CUDA: nothing to launch), anything else
 * returns FASTGLU_ERROR_NO_CUDA without touching memory.
 */
#include "internal.h"

int fastglu_cuda_built(void) { return 0; }

int fastglu_cuda_available(void) { return 0; }

static fastglu_status no_cuda(const char *fn) {
    return fastglu_set_error(FASTGLU_ERROR_NO_CUDA,
                             "%s: fastglu was built without the CUDA backend", fn);
}

fastglu_status fastglu_swiglu_fwd_cuda(const void *input, int64_t input_row_stride, void *output,
                                       int64_t output_row_stride, int64_t tokens,
                                       int64_t ffn_hidden_size, fastglu_dtype dtype,
                                       void *stream) {
    static const char fn[] = "fastglu_swiglu_fwd_cuda";
    int empty;
    fastglu_status st = fastglu_check_swiglu_fwd(fn, input, input_row_stride, output,
                                                 output_row_stride, tokens, ffn_hidden_size, dtype,
                                                 &empty);
    (void)stream;
    return st != FASTGLU_SUCCESS || empty ? st : no_cuda(fn);
}

fastglu_status fastglu_swiglu_bwd_cuda(const void *dy, int64_t dy_row_stride, int64_t dy_col_stride,
                                       const void *input, int64_t input_row_stride, void *dinput,
                                       int64_t dinput_row_stride, int64_t tokens,
                                       int64_t ffn_hidden_size, fastglu_dtype dtype,
                                       void *stream) {
    static const char fn[] = "fastglu_swiglu_bwd_cuda";
    int empty;
    fastglu_status st = fastglu_check_swiglu_bwd(fn, dy, dy_row_stride, dy_col_stride, input,
                                                 input_row_stride, dinput, dinput_row_stride,
                                                 tokens, ffn_hidden_size, dtype, &empty);
    (void)stream;
    return st != FASTGLU_SUCCESS || empty ? st : no_cuda(fn);
}
