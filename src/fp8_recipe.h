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

/* ---- The saved input's blockwise copy (fastglu_glu_fp8_store_blockwise_*) ----------------------
 * One scale per 1 x 128 block of an operand's row. A block whose amax is a normal fp32 number
 * (2^-126 <= amax < inf, the bits of fastglu_abs_bits) takes the recipe above: scale = amax / 448
 * correctly rounded, codes = the cast of x / scale (so the bits of fastglu_quantize_fp8_* on that
 * block). Any other block (all zeros, a subnormal amax, +-inf or NaN in it) takes scale 1 and the
 * plain cast, so a non-finite element stays its own and its block's finite ones keep their value. */
static inline FASTGLU_HD int fastglu_fp8_store_scaled(uint32_t amax_bits) {
    return amax_bits >= 0x00800000u && amax_bits < 0x7f800000u;
}

/* The block's scale; with a clamp (clamp != 0) raised by one ulp where RN(448 scale) < amax, so
 * that the largest code decodes at or above amax and an element the clamp cut (> c, so amax > c)
 * always has a code beyond the bound to take. */
static inline FASTGLU_HD float fastglu_fp8_store_scale(uint32_t amax_bits, int clamp) {
    float amax, s;
    uint32_t u;
    if (!fastglu_fp8_store_scaled(amax_bits)) return 1.0f;
    memcpy(&amax, &amax_bits, sizeof amax);
    s = fastglu_div448(amax, amax_bits);
#ifdef __CUDA_ARCH__
    const float top = __fmul_rn(s, FASTGLU_E4M3_MAX);
#else
    const float top = s * FASTGLU_E4M3_MAX;
#endif
    if (clamp && top < amax) {
        memcpy(&u, &s, sizeof u);
        u++; /* s > 0 and finite: the next float up */
        memcpy(&s, &u, sizeof s);
    }
    return s;
}

/* Under the clamp c (0 < c < inf, in the operands' dtype), the block's bounds in the codes' domain
 * (x / scale): lo the largest non-negative e4m3 value whose decoding RN(value * scale) is <= c,
 * hi the next one (448 if lo is 448). The decoding is the backward's, so it cuts exactly where the
 * forward's clamp cut. Found by bisection over the 127 non-negative finite codes (their values and
 * their rounded decodings are non-decreasing). */
static inline FASTGLU_HD void fastglu_fp8_store_bounds(float scale, float c, float *lo, float *hi) {
    int a = 0, b = 126; /* code 0 decodes to 0 <= c */
    while (a < b) {
        const int m = (a + b + 1) / 2;
#ifdef __CUDA_ARCH__
        const float d = __fmul_rn(fastglu_e4m3_to_f32((unsigned char)m), scale);
#else
        const float d = fastglu_e4m3_to_f32((unsigned char)m) * scale;
#endif
        if (d <= c)
            a = m;
        else
            b = m - 1;
    }
    *lo = fastglu_e4m3_to_f32((unsigned char)a);
    *hi = fastglu_e4m3_to_f32((unsigned char)(a < 126 ? a + 1 : 126));
}

/* The value cast for an element of raw value x and scaled value v (x / scale) under the clamp c:
 * the saved_fp8 rule (fp8.h) with the comparisons against c on x and against lo on v: a cut gate
 * (x > c) becomes hi, an uncut one min(v, lo); a cut up +-hi, an uncut one v clamped to [-lo, lo].
 * NaN stays NaN. */
static inline FASTGLU_HD float fastglu_fp8_store_value(float x, float v, int up, float c, float lo,
                                                       float hi) {
    if (up) return x > c ? hi : x < -c ? -hi : v > lo ? lo : v < -lo ? -lo : v;
    return x > c ? hi : v > lo ? lo : v;
}

#endif /* FASTGLU_FP8_RECIPE_H */
