/*
 * fastglu.h — gated-linear-unit activations (SwiGLU) for LLM training, C API.
 *
 * Plain C11; also compiles as C++. No CUDA header is needed to include it: streams are passed as
 * `void *` and mean `cudaStream_t` (NULL = the legacy default stream).
 *
 * Layout (Megatron-Core "fc1 output" layout): the input holds, for each of `tokens` rows, the gate
 * and the up projection concatenated on the last dimension:
 *
 *     input  [tokens, 2F]   gate = input[:, 0:F],  up = input[:, F:2F]
 *     output [tokens, F]    F = ffn_hidden_size (the per-rank width under tensor parallelism)
 *
 * Math (Megatron-Core megatron/core/fusions/fused_bias_swiglu.py: `swiglu`, `swiglu_back`):
 *
 *     forward:   y      = silu(gate) * up,          silu(x) = x * sigmoid(x)
 *     backward:  d_gate = dy * up * sigmoid(gate) * (1 + gate * (1 - sigmoid(gate)))
 *                d_up   = dy * silu(gate)
 *
 * All arithmetic is in fp32; values are rounded to the tensor's element type only when stored.
 *
 * Strides and sizes are counted in elements (not bytes) and are 64-bit. A "row stride" is the
 * distance between the first elements of consecutive rows; within a row, input and output elements
 * are contiguous (column stride 1). The upstream gradient dy may have any row and column strides,
 * including 0 (an expanded scalar, as `y.sum().backward()` produces); it is read in place.
 *
 * Every function validates its arguments first; on an error it returns a status other than
 * FASTGLU_SUCCESS, writes nothing, and launches nothing. `fastglu_last_error_message()` then gives
 * a sentence naming the offending argument (thread-local). tokens == 0 or F == 0 is legal: nothing
 * is read, written or launched.
 *
 * CUDA functions are asynchronous with respect to the host: they enqueue one kernel on `stream`
 * and return; they never synchronize and never allocate.
 */
#ifndef FASTGLU_H
#define FASTGLU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FASTGLU_VERSION_MAJOR 0
#define FASTGLU_VERSION_MINOR 1
#define FASTGLU_VERSION_PATCH 0

#if defined(_WIN32)
#define FASTGLU_API __declspec(dllexport)
#else
#define FASTGLU_API __attribute__((visibility("default")))
#endif

/* Status codes. */
typedef enum fastglu_status {
    FASTGLU_SUCCESS = 0,
    FASTGLU_ERROR_INVALID_VALUE = 1,   /* a NULL pointer, negative size, bad stride, aliasing  */
    FASTGLU_ERROR_UNSUPPORTED_DTYPE = 2, /* dtype is not one of fastglu_dtype                  */
    FASTGLU_ERROR_NO_CUDA = 3,         /* library built without CUDA, or no usable device/driver */
    FASTGLU_ERROR_CUDA = 4             /* the CUDA runtime reported an error (launch failure)   */
} fastglu_status;

/* Element types of input, output, dinput and dy (all four share one type). */
typedef enum fastglu_dtype {
    FASTGLU_DTYPE_FP32 = 0, /* IEEE binary32                         */
    FASTGLU_DTYPE_FP16 = 1, /* IEEE binary16                         */
    FASTGLU_DTYPE_BF16 = 2  /* bfloat16 (8-bit exponent, 7-bit mantissa) */
} fastglu_dtype;

/* A static, human-readable name of a status code ("success", "invalid value", ...). */
FASTGLU_API const char *fastglu_strerror(fastglu_status status);

/* The message of the last failed call on this thread ("" if none). */
FASTGLU_API const char *fastglu_last_error_message(void);

/* Library version as MAJOR*10000 + MINOR*100 + PATCH. */
FASTGLU_API int fastglu_version(void);

/* Size in bytes of one element of dtype, or 0 for an unknown dtype. */
FASTGLU_API size_t fastglu_dtype_size(fastglu_dtype dtype);

/* 1 if the library was built with the CUDA backend (whether or not a GPU is present), else 0. */
FASTGLU_API int fastglu_cuda_built(void);

/* 1 if the library was built with the CUDA backend and a CUDA device is usable, else 0. */
FASTGLU_API int fastglu_cuda_available(void);

/* ---------------------------------------------------------------------------------------------
 * SwiGLU forward.
 *
 *   input            [tokens, 2 * ffn_hidden_size], row stride input_row_stride (any >= 0: rows
 *                    may overlap, e.g. 0 for one row broadcast to every token; it is only read)
 *   output           [tokens, ffn_hidden_size],     row stride output_row_stride (>= F if tokens > 1)
 *   tokens           number of rows (S * B for a [S, B, 2F] input), >= 0
 *   ffn_hidden_size  F, >= 0
 *   dtype            element type of input and output
 *   stream           (CUDA only) cudaStream_t to launch on
 *
 * output must not overlap input.
 * Errors: FASTGLU_ERROR_INVALID_VALUE, FASTGLU_ERROR_UNSUPPORTED_DTYPE, FASTGLU_ERROR_NO_CUDA,
 *         FASTGLU_ERROR_CUDA.
 * ------------------------------------------------------------------------------------------- */
FASTGLU_API fastglu_status fastglu_swiglu_fwd_cuda(const void *input, int64_t input_row_stride,
                                                   void *output, int64_t output_row_stride,
                                                   int64_t tokens, int64_t ffn_hidden_size,
                                                   fastglu_dtype dtype, void *stream);

FASTGLU_API fastglu_status fastglu_swiglu_fwd_cpu(const void *input, int64_t input_row_stride,
                                                  void *output, int64_t output_row_stride,
                                                  int64_t tokens, int64_t ffn_hidden_size,
                                                  fastglu_dtype dtype);

/* ---------------------------------------------------------------------------------------------
 * SwiGLU backward (dgrad of the input).
 *
 *   dy               [tokens, F] upstream gradient; element (t, j) at dy[t * dy_row_stride +
 *                    j * dy_col_stride]; any strides >= 0 (0 = broadcast), read in place
 *   input            [tokens, 2F] the forward input (gate | up), row stride input_row_stride
 *   dinput           [tokens, 2F] output: d_gate in columns [0, F), d_up in [F, 2F),
 *                    row stride dinput_row_stride (>= 2F if tokens > 1)
 *   tokens, ffn_hidden_size, dtype, stream: as in the forward
 *
 * dinput must not overlap dy. It may be exactly the input (dinput == input and
 * dinput_row_stride == input_row_stride): the in-place backward, where each element of the input is
 * read before its gradient is written over it; any other overlap with input is an error.
 * Errors: as the forward.
 * ------------------------------------------------------------------------------------------- */
FASTGLU_API fastglu_status fastglu_swiglu_bwd_cuda(const void *dy, int64_t dy_row_stride,
                                                   int64_t dy_col_stride, const void *input,
                                                   int64_t input_row_stride, void *dinput,
                                                   int64_t dinput_row_stride, int64_t tokens,
                                                   int64_t ffn_hidden_size, fastglu_dtype dtype,
                                                   void *stream);

FASTGLU_API fastglu_status fastglu_swiglu_bwd_cpu(const void *dy, int64_t dy_row_stride,
                                                  int64_t dy_col_stride, const void *input,
                                                  int64_t input_row_stride, void *dinput,
                                                  int64_t dinput_row_stride, int64_t tokens,
                                                  int64_t ffn_hidden_size, fastglu_dtype dtype);

#ifdef __cplusplus
}
#endif

#endif /* FASTGLU_H */
