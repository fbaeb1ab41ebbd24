/*
 * common.c — status strings, the per-thread error message, and argument validation shared by
 * both backends.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

/* The message of the last failed call on this thread. Like errno, a successful call leaves it as it
 * is (include/fastglu.h): only fastglu_set_error writes it. */
static _Thread_local char last_message[512];

const char *fastglu_strerror(fastglu_status status) {
    switch (status) {
    case FASTGLU_SUCCESS: return "success";
    case FASTGLU_ERROR_INVALID_VALUE: return "invalid value";
    case FASTGLU_ERROR_UNSUPPORTED_DTYPE: return "unsupported dtype";
    case FASTGLU_ERROR_NO_CUDA: return "CUDA backend not available";
    case FASTGLU_ERROR_CUDA: return "CUDA error";
    }
    return "unknown fastglu status";
}

const char *fastglu_last_error_message(void) { return last_message; }

static int fp8_saturate = 1; /* fastglu_set_fp8_saturate */
void fastglu_set_fp8_saturate(int saturate) { fp8_saturate = saturate != 0; }
int fastglu_fp8_saturate(void) { return fp8_saturate; }

fastglu_status fastglu_set_error(fastglu_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_message, sizeof last_message, fmt, ap);
    va_end(ap);
    return status;
}

int fastglu_version(void) {
    return FASTGLU_VERSION_MAJOR * 10000 + FASTGLU_VERSION_MINOR * 100 + FASTGLU_VERSION_PATCH;
}

size_t fastglu_dtype_size(fastglu_dtype dtype) {
    switch (dtype) {
    case FASTGLU_DTYPE_FP32: return 4;
    case FASTGLU_DTYPE_FP16: return 2;
    case FASTGLU_DTYPE_BF16: return 2;
    case FASTGLU_DTYPE_FP8_E4M3: return 1;
    }
    return 0;
}

int fastglu_is_compute_dtype(fastglu_dtype dtype) {
    return dtype == FASTGLU_DTYPE_FP32 || dtype == FASTGLU_DTYPE_FP16 ||
           dtype == FASTGLU_DTYPE_BF16;
}

fastglu_status fastglu_check_compute_dtype(const char *fn, const char *name, fastglu_dtype dtype) {
    if (fastglu_is_compute_dtype(dtype)) return FASTGLU_SUCCESS;
    if (dtype == FASTGLU_DTYPE_FP8_E4M3)
        return fastglu_set_error(FASTGLU_ERROR_UNSUPPORTED_DTYPE,
                                 "%s: %s %d (FASTGLU_DTYPE_FP8_E4M3) is not FASTGLU_DTYPE_FP32, "
                                 "_FP16 or _BF16 (fp8 is accepted only as the saved input of "
                                 "fastglu_glu_bwd_*, input_dtype)",
                                 fn, name, (int)dtype);
    return fastglu_set_error(FASTGLU_ERROR_UNSUPPORTED_DTYPE,
                             "%s: %s %d is not FASTGLU_DTYPE_FP32, _FP16 or _BF16", fn, name,
                             (int)dtype);
}

typedef fastglu_region region; /* see internal.h */

/*
 * Bytes spanned by a [rows, cols] region with the given element strides (rows, cols >= 1,
 * strides >= 0). Returns 0 if the span does not fit in int64 (the caller reports it).
 */
static int span_bytes(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride,
                      size_t esize, uint64_t *bytes) {
    int64_t a, b, last;
    if (__builtin_mul_overflow(rows - 1, row_stride, &a)) return 0;
    if (__builtin_mul_overflow(cols - 1, col_stride, &b)) return 0;
    if (__builtin_add_overflow(a, b, &last)) return 0;
    if (__builtin_add_overflow(last, (int64_t)1, &last)) return 0;
    if (__builtin_mul_overflow(last, (int64_t)esize, &last)) return 0;
    *bytes = (uint64_t)last;
    return 1;
}

/*
 * fastglu_regions_overlap (internal.h): regions whose rows are contiguous intervals with one
 * common row stride r are tested exactly: rows i of x and j of y meet iff, with
 * d = y.begin - x.begin and k = j - i, -y.width < d + k r < x.width for some |k| < rows; any other
 * pair by bounding ranges (which may refuse a legal interleaving, never accept an overlap).
 */
__extension__ typedef __int128 i128; /* GCC/Clang: exact arithmetic on address differences */

static i128 floor_div(i128 a, i128 r) { /* r > 0 */
    i128 q = a / r;
    return (a % r != 0 && a < 0) ? q - 1 : q;
}

int fastglu_regions_overlap(const region *x, const region *y) {
    if (!(x->begin < y->begin + y->bytes && y->begin < x->begin + x->bytes)) return 0;
    if (x->width_bytes == 0 || y->width_bytes == 0 || x->row_bytes != y->row_bytes ||
        x->row_bytes <= 0)
        return 1;
    const i128 r = x->row_bytes, d = (i128)y->begin - (i128)x->begin;
    /* k r must lie in the open interval (lo, hi) */
    const i128 lo = -(i128)y->width_bytes - d, hi = (i128)x->width_bytes - d;
    i128 kmin = floor_div(lo, r) + 1;                             /* smallest k with k r > lo */
    i128 kmax = -floor_div(-hi, r) - 1;                           /* largest k with k r < hi */
    if (kmin < -(i128)(x->rows - 1)) kmin = -(i128)(x->rows - 1); /* k = j - i */
    if (kmax > (i128)(y->rows - 1)) kmax = (i128)(y->rows - 1);
    return kmin <= kmax;
}

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        fastglu_status s_ = (expr);                                                                \
        if (s_ != FASTGLU_SUCCESS) return s_;                                                      \
    } while (0)

/* Checks shared by both swiglu directions: dtype and sizes. */
static fastglu_status check_sizes(const char *fn, int64_t tokens, int64_t ffn_hidden_size,
                                  fastglu_dtype dtype, int *empty) {
    TRY(fastglu_check_compute_dtype(fn, "dtype", dtype));
    return fastglu_check_shape(fn, tokens, ffn_hidden_size, empty);
}

fastglu_status fastglu_check_shape(const char *fn, int64_t tokens, int64_t ffn_hidden_size,
                                   int *empty) {
    if (tokens < 0)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: tokens = %" PRId64 " is negative", fn, tokens);
    if (ffn_hidden_size < 0)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: ffn_hidden_size = %" PRId64 " is negative", fn,
                                 ffn_hidden_size);
    if (ffn_hidden_size > INT64_MAX / 4)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: ffn_hidden_size = %" PRId64 " is too large", fn,
                                 ffn_hidden_size);
    *empty = (tokens == 0 || ffn_hidden_size == 0);
    return FASTGLU_SUCCESS;
}

fastglu_status fastglu_check_tensor(const char *fn, region *r, const char *name, const void *ptr,
                                    int64_t rows, int64_t cols, int64_t row_stride,
                                    int64_t col_stride, size_t esize, int is_output) {
    r->name = name;
    if (ptr == NULL)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE, "%s: %s is NULL", fn, name);
    if ((uintptr_t)ptr % esize != 0)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: %s = %p is not aligned to its %zu-byte element", fn, name,
                                 ptr, esize);
    if (row_stride < 0 || col_stride < 0)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: %s has a negative stride (row %" PRId64 ", column %" PRId64
                                 ")",
                                 fn, name, row_stride, col_stride);
    if (is_output && rows > 1 && row_stride < cols)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: %s row stride %" PRId64 " is smaller than its row of %" PRId64
                                 " elements (rows would overlap)",
                                 fn, name, row_stride, cols);
    if (!span_bytes(rows, cols, row_stride, col_stride, esize, &r->bytes))
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: %s spans more than 2^63 bytes (rows %" PRId64
                                 ", row stride %" PRId64 ")",
                                 fn, name, rows, row_stride);
    r->begin = (uintptr_t)ptr;
    if (r->begin + r->bytes < r->begin)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: %s = %p spans past the end of the address space", fn, name,
                                 ptr);
    r->rows = rows;
    r->row_bytes = rows > 1 ? row_stride * (int64_t)esize : 0;
    r->width_bytes = (col_stride == 1 || cols == 1) ? cols * (int64_t)esize : 0;
    return FASTGLU_SUCCESS;
}

fastglu_status fastglu_check_disjoint(const char *fn, const region *out, const region *in) {
    if (fastglu_regions_overlap(out, in))
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE, "%s: %s overlaps %s", fn, out->name,
                                 in->name);
    return FASTGLU_SUCCESS;
}

fastglu_status fastglu_check_swiglu_fwd(const char *fn, const void *input, int64_t input_row_stride,
                                        const void *output, int64_t output_row_stride,
                                        int64_t tokens, int64_t ffn_hidden_size,
                                        fastglu_dtype dtype, int *empty) {
    region in, out;
    size_t esize = fastglu_dtype_size(dtype);
    TRY(check_sizes(fn, tokens, ffn_hidden_size, dtype, empty));
    if (*empty) return FASTGLU_SUCCESS;
    TRY(fastglu_check_tensor(fn, &in, "input", input, tokens, 2 * ffn_hidden_size, input_row_stride,
                             1, esize, 0));
    TRY(fastglu_check_tensor(fn, &out, "output", output, tokens, ffn_hidden_size, output_row_stride,
                             1, esize, 1));
    return fastglu_check_disjoint(fn, &out, &in);
}

fastglu_status fastglu_check_swiglu_bwd(const char *fn, const void *dy, int64_t dy_row_stride,
                                        int64_t dy_col_stride, const void *input,
                                        int64_t input_row_stride, const void *dinput,
                                        int64_t dinput_row_stride, int64_t tokens,
                                        int64_t ffn_hidden_size, fastglu_dtype dtype, int *empty) {
    region g, in, din;
    size_t esize = fastglu_dtype_size(dtype);
    TRY(check_sizes(fn, tokens, ffn_hidden_size, dtype, empty));
    if (*empty) return FASTGLU_SUCCESS;
    TRY(fastglu_check_tensor(fn, &g, "dy", dy, tokens, ffn_hidden_size, dy_row_stride,
                             dy_col_stride, esize, 0));
    TRY(fastglu_check_tensor(fn, &in, "input", input, tokens, 2 * ffn_hidden_size, input_row_stride,
                             1, esize, 0));
    TRY(fastglu_check_tensor(fn, &din, "dinput", dinput, tokens, 2 * ffn_hidden_size,
                             dinput_row_stride, 1, esize, 1));
    TRY(fastglu_check_disjoint(fn, &din, &g));
    /* In place (dinput is exactly input) is legal: each thread reads an element before writing it. */
    if (dinput == input && (dinput_row_stride == input_row_stride || tokens == 1))
        return FASTGLU_SUCCESS;
    return fastglu_check_disjoint(fn, &din, &in);
}
