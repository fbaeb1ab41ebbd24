/*
 * convert.h — bf16 / fp16 <-> fp32 conversions on the host (round-to-nearest-even, NaN kept
 * quiet), shared by the CPU backend and the C tests. Not installed.
 */
#ifndef FASTGLU_CONVERT_H
#define FASTGLU_CONVERT_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint16_t f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);                                             /* RNE */
    return (uint16_t)(u >> 16);
}

static inline float fp16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t u;
    float f;
    if (exp == 0) { /* zero or subnormal: mant * 2^-24 */
        f = (float)mant * 5.9604644775390625e-8f;
        return sign ? -f : f;
    }
    if (exp == 31)
        u = sign | 0x7f800000u | (mant << 13); /* Inf or NaN */
    else
        u = sign | ((exp + 112u) << 23) | (mant << 13);
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint16_t f32_to_fp16(float f) {
    uint32_t u, a;
    uint16_t sign;
    memcpy(&u, &f, sizeof u);
    sign = (uint16_t)((u >> 16) & 0x8000u);
    a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: Inf */
    if (a < 0x38800000u) {                                   /* below 2^-14: subnormal half */
        float m;
        memcpy(&m, &a, sizeof m);
        return (uint16_t)(sign | (uint16_t)nearbyintf(m * 16777216.0f)); /* RNE of |f| * 2^24 */
    }
    a += 0xfffu + ((a >> 13) & 1u); /* RNE on the 13 dropped bits */
    return (uint16_t)(sign | (uint16_t)((a - (112u << 23)) >> 13));
}

#endif /* FASTGLU_CONVERT_H */
