/*
 * cpu_elements.h — strided loads and stores of one dtype's elements as fp32, for the C CPU backends
 * (glu_cpu.c, gemm_cpu.c). Not installed.
 */
#ifndef FASTGLU_CPU_ELEMENTS_H
#define FASTGLU_CPU_ELEMENTS_H

#include <stdint.h>

#include "convert.h"
#include "fastglu.h"
#include "fp8.h"

/* dst[i] = element (start + i * stride) of `base` (type dt) as fp32, i < n; fp8 values times
 * scale_inv (one fp32 multiply). */
static inline void load_f32(fastglu_dtype dt, const void *base, int64_t start, int64_t stride,
                            int n, float scale_inv, float *dst) {
    switch (dt) {
    case FASTGLU_DTYPE_FP32: {
        const float *p = (const float *)base + start;
        for (int i = 0; i < n; ++i) dst[i] = p[i * stride];
        break;
    }
    case FASTGLU_DTYPE_FP16: {
        const uint16_t *p = (const uint16_t *)base + start;
        for (int i = 0; i < n; ++i) dst[i] = fp16_to_f32(p[i * stride]);
        break;
    }
    case FASTGLU_DTYPE_BF16: {
        const uint16_t *p = (const uint16_t *)base + start;
        for (int i = 0; i < n; ++i) dst[i] = bf16_to_f32(p[i * stride]);
        break;
    }
    case FASTGLU_DTYPE_FP8_E4M3: {
        const uint8_t *p = (const uint8_t *)base + start;
        for (int i = 0; i < n; ++i) dst[i] = fastglu_e4m3_to_f32(p[i * stride]) * scale_inv;
        break;
    }
    }
}

/* Element (start + i * stride) of `base` (type dt, a compute type) = src[i], rounded, i < n. */
static inline void store_f32(fastglu_dtype dt, void *base, int64_t start, int64_t stride, int n,
                             const float *src) {
    switch (dt) {
    case FASTGLU_DTYPE_FP32: {
        float *p = (float *)base + start;
        for (int i = 0; i < n; ++i) p[i * stride] = src[i];
        break;
    }
    case FASTGLU_DTYPE_FP16: {
        uint16_t *p = (uint16_t *)base + start;
        for (int i = 0; i < n; ++i) p[i * stride] = f32_to_fp16(src[i]);
        break;
    }
    case FASTGLU_DTYPE_BF16: {
        uint16_t *p = (uint16_t *)base + start;
        for (int i = 0; i < n; ++i) p[i * stride] = f32_to_bf16(src[i]);
        break;
    }
    case FASTGLU_DTYPE_FP8_E4M3: break; /* never an output type (validated) */
    }
}

static inline float load_one(fastglu_dtype dt, const void *base, int64_t index) {
    float v = 0.0f; /* (every validated dtype writes it) */
    load_f32(dt, base, index, 1, 1, 1.0f, &v);
    return v;
}

#endif /* FASTGLU_CPU_ELEMENTS_H */
