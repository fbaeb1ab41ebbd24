/*
 * reference.h — the C test driver shared by the CPU and CUDA tests: random inputs, a float64
 * reference of SwiGLU forward/backward written from the formulas, sentinel-filled outputs, and a
 * suite that runs one backend over every width, row count, dtype and layout the tests cover.
 */
#ifndef FASTGLU_TEST_REFERENCE_H
#define FASTGLU_TEST_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

#include "fastglu.h"

/* A backend under test: how to run it and how to move bytes to and from its memory. */
typedef struct test_backend {
    const char *name;
    fastglu_status (*fwd)(const void *input, int64_t input_row_stride, void *output,
                          int64_t output_row_stride, int64_t tokens, int64_t F,
                          fastglu_dtype dtype);
    fastglu_status (*bwd)(const void *dy, int64_t dy_row_stride, int64_t dy_col_stride,
                          const void *input, int64_t input_row_stride, void *dinput,
                          int64_t dinput_row_stride, int64_t tokens, int64_t F,
                          fastglu_dtype dtype);
    void *(*alloc)(size_t bytes);
    void (*release)(void *p);
    void (*upload)(void *dst, const void *src, size_t bytes);   /* host -> backend */
    void (*download)(void *dst, const void *src, size_t bytes); /* backend -> host */
    void (*sync)(void);                                         /* wait for the last call */
} test_backend;

/* Runs the whole suite on one backend; prints one line per failure and a summary line.
 * Returns the number of failed checks. */
int run_swiglu_suite(const test_backend *b);

/* The sentinel sweep: F in {1, 2, 3, 5, 7, 8, 127, 256, 257, 320, 640, 768, 1408, 2816, 3420, 5632}
 * x rows in {1, 2, 257, 4097} x every dtype, outputs in padded rows pre-filled with a sentinel.
 * Returns the number of failed checks. */
int run_sentinel_sweep(const test_backend *b);

#endif
