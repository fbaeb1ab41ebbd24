/*
 * internal.h — helpers shared by the CPU and CUDA backends (not installed).
 *
 * Argument validation lives here, in C, so that both backends reject exactly the same inputs with
 * exactly the same messages, before touching any memory.
 */
#ifndef FASTGLU_INTERNAL_H
#define FASTGLU_INTERNAL_H

#include "fastglu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Records `status` and a printf-style message for fastglu_last_error_message(); returns status. */
fastglu_status fastglu_set_error(fastglu_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Clears the thread's last error message. */
void fastglu_clear_error(void);

/*
 * Validate the forward's arguments. Returns FASTGLU_SUCCESS when the call is legal; *empty is set
 * to 1 when there is no work (tokens == 0 or F == 0), in which case the pointers are not used.
 */
fastglu_status fastglu_check_swiglu_fwd(const char *fn, const void *input, int64_t input_row_stride,
                                        const void *output, int64_t output_row_stride,
                                        int64_t tokens, int64_t ffn_hidden_size,
                                        fastglu_dtype dtype, int *empty);

/* Validate the backward's arguments; as fastglu_check_swiglu_fwd. */
fastglu_status fastglu_check_swiglu_bwd(const char *fn, const void *dy, int64_t dy_row_stride,
                                        int64_t dy_col_stride, const void *input,
                                        int64_t input_row_stride, const void *dinput,
                                        int64_t dinput_row_stride, int64_t tokens,
                                        int64_t ffn_hidden_size, fastglu_dtype dtype, int *empty);

#ifdef __cplusplus
}
#endif

#endif /* FASTGLU_INTERNAL_H */
