/*
 * fp8_recipe.h — the scale of one block of the FP8 recipe (include/fastglu.h, "The activation
 * quantised to FP8"), for the CPU backend and the CUDA kernels alike, so that both give the same
 * bits. Not installed.
 */
#ifndef FASTGLU_FP8_RECIPE_H
#define FASTGLU_FP8_RECIPE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fp8.h"

#define FASTGLU_FP8_BLOCK 128
#define FASTGLU_E4M3_MAX 448.0f

/* |x| as its bits: for non-negative floats the unsigned order of the bits is the numeric order, and
 * every NaN lies above +inf, so a max over the bits is an amax in which a NaN wins. */
static inline FASTGLU_HD uint32_t fastglu_abs_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u & 0x7fffffffu;
}

/* a / 448 correctly rounded, for a >= 0 of bits a_bits: from 2^-120 up to the largest finite a
 * (where tests/c/test_fp8_scale.c finds it equal to the division, checking every such a) the
 * product by RN(1 / 448) corrected by its residual, two FMAs and a product instead of a division;
 * below 2^-120 (quotients near the subnormals), +inf and NaN the division itself. */
static inline FASTGLU_HD float fastglu_div448(float a, uint32_t a_bits) {
    const float c = 1.0f / FASTGLU_E4M3_MAX; /* RN(1 / 448) */
    if (a_bits >= 0x03800000u && a_bits < 0x7f800000u) {
#ifdef __CUDA_ARCH__
        const float q = __fmul_rn(a, c);
        return __fmaf_rn(__fmaf_rn(-FASTGLU_E4M3_MAX, q, a), c, q);
#else
        const float q = a * c;
        return fmaf(fmaf(-FASTGLU_E4M3_MAX, q, a), c, q);
#endif
    }
#ifdef __CUDA_ARCH__
    return __fdiv_rn(a, FASTGLU_E4M3_MAX);
#else
    return a / FASTGLU_E4M3_MAX;
#endif
}

/* The scale of a block from its amax (as bits, fastglu_abs_bits): amax / 448 rounded to fp32; 1
 * for amax 0; 2^-149 where the quotient underflows to 0; pow2: a finite quotient rounded up to a
 * power of two. NaN and +inf amax give NaN and +inf. */
static inline FASTGLU_HD float fastglu_fp8_scale(uint32_t amax_bits, int pow2) {
    float amax, s;
    uint32_t u;
    if (amax_bits > 0x7f800000u) amax_bits = 0x7fc00000u; /* one NaN for every NaN block */
    memcpy(&amax, &amax_bits, sizeof amax);
    if (amax_bits == 0) return 1.0f;
    s = fastglu_div448(amax, amax_bits);
    memcpy(&u, &s, sizeof u);
    if (u == 0) u = 1; /* 2^-149 */
    if (pow2 && u < 0x7f800000u) {
        if (u >= 0x00800000u) {
            if (u & 0x007fffffu) u = (u & 0x7f800000u) + 0x00800000u; /* next power of two */
        } else {
            uint32_t p = 1; /* subnormal: the smallest power of two >= u */
            while (p < u) p <<= 1;
            u = p;
        }
    }
    memcpy(&s, &u, sizeof s);
    return s;
}

/* One element's code: the e4m3fn cast (saturating) of y / scale. */
static inline FASTGLU_HD unsigned char fastglu_fp8_quantise(float y, float scale) {
#ifdef __CUDA_ARCH__
    return fastglu_f32_to_e4m3(__fdiv_rn(y, scale), 1);
#else
    return fastglu_f32_to_e4m3(y / scale, 1);
#endif
}

#endif /* FASTGLU_FP8_RECIPE_H */
