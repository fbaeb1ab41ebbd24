/* fp8_test_util.h — what the FP8 C tests (test_glu_fp8.c, test_quant_fp8.c, test_fp8_store.c)
 * share: the failure count and FAIL, the inputs' random stream with its printed seed
 * (FASTGLU_TEST_SEED replays one), an element of a bf16 / fp16 / fp32 buffer read and written as
 * fp32, the value of an e4m3fn code from the format's definition, and with FP8_TEST_CUDA the
 * test's non-blocking stream and check_cuda. Included once per test
 * program, after the standard headers. */
#ifndef FASTGLU_FP8_TEST_UTIL_H
#define FASTGLU_FP8_TEST_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "convert.h"
#include "fastglu.h"

#ifdef FP8_TEST_CUDA
#include <cuda_runtime_api.h>
static cudaStream_t stream;
static void check_cuda(cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
        fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}
#endif

static int failures;
#define FAIL(...)                                                                                  \
    do {                                                                                           \
        if (failures++ < 20) {                                                                     \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
        }                                                                                          \
    } while (0)

static uint64_t rng;
static double urand(void) { /* xorshift64*, [0, 1) */
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return (double)((rng * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}
/* fresh inputs every run: the seed from FASTGLU_TEST_SEED or the clock, printed; returned */
static uint64_t seed_rng(void) {
    const char *seed = getenv("FASTGLU_TEST_SEED");
    rng = seed ? (uint64_t)strtoull(seed, NULL, 10)
               : (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull | 1;
    if (rng == 0) rng = 1;
    printf("seed %llu (FASTGLU_TEST_SEED replays it)\n", (unsigned long long)rng);
    return rng;
}

/* element i of a buffer of dtype dt, as its exact value; v rounded to dt and stored there */
static double get(fastglu_dtype dt, const void *base, int64_t i) {
    if (dt == FASTGLU_DTYPE_FP32) return ((const float *)base)[i];
    const uint16_t b = ((const uint16_t *)base)[i];
    return dt == FASTGLU_DTYPE_BF16 ? bf16_to_f32(b) : fp16_to_f32(b);
}
static void put(fastglu_dtype dt, void *base, int64_t i, float v) {
    if (dt == FASTGLU_DTYPE_FP32)
        ((float *)base)[i] = v;
    else
        ((uint16_t *)base)[i] = dt == FASTGLU_DTYPE_BF16 ? f32_to_bf16(v) : f32_to_fp16(v);
}

/* an e4m3fn code's value from the format's definition (bias 7, no inf, S.1111.111 NaN) */
static double e4m3_value(int code) {
    const int s = (code >> 7) & 1, e = (code >> 3) & 15, m = code & 7;
    if (e == 15 && m == 7) return NAN;
    const double v = e == 0 ? ldexp(m, -9) : ldexp(8 + m, e - 10);
    return s ? -v : v;
}

#endif /* FASTGLU_FP8_TEST_UTIL_H */
