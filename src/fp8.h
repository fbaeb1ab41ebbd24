/*
 * fp8.h — float -> float8_e4m3fn (the encoding of torch.float8_e4m3fn), for the CPU backend and the
 * CUDA kernels alike. Not installed.
 *
 * e4m3fn: 1 sign bit, 4 exponent bits (bias 7), 3 mantissa bits; no infinities; S.1111.111 is NaN;
 * largest finite 448, smallest normal 2^-6, subnormals in steps of 2^-9. The cast rounds to nearest,
 * ties to even. What would round above 448 (|x| >= 464) and +-inf become +-448 when `saturate` is 1
 * (PyTorch 2.13's `x.to(torch.float8_e4m3fn)`), NaN when it is 0 (PyTorch 2.11's, measured on the
 * H200 image); NaN stays NaN. fastglu_set_fp8_saturate()
 * picks the mode; the Python package sets it to the installed torch's behaviour at import.
 */
#ifndef FASTGLU_FP8_H
#define FASTGLU_FP8_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define FASTGLU_HD __host__ __device__
#else
#define FASTGLU_HD
#endif

static inline FASTGLU_HD unsigned char fastglu_f32_to_e4m3(float x, int saturate) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    const unsigned char sign = (unsigned char)((u >> 24) & 0x80u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7fu; /* NaN */
    if (saturate ? a >= 0x43e80000u
                 : a > 0x43e80000u) /* rounds above 448 (464 is a tie: 448), inf */
        return sign | (saturate ? 0x7eu : 0x7fu);
    if (a < 0x3c800000u) { /* |x| < 2^-6: subnormal, units of 2^-9 */
        float f;
        memcpy(&f, &a, sizeof f);
        return sign | (unsigned char)rintf(f * 512.0f); /* exact scaling; rintf: ties to even */
    }
    /* normal: 23 mantissa bits to 3, ties to even; a carry moves into the exponent */
    const uint32_t mant = a & 0x7fffffu, rem = mant & 0xfffffu;
    uint32_t q = mant >> 20;
    if (rem > 0x80000u || (rem == 0x80000u && (q & 1u))) q++;
    const uint32_t bits = ((uint32_t)((int)(a >> 23) - 127 + 7) << 3) + q; /* <= 0x7e here */
    return sign | (unsigned char)bits;
}

/* The exact value of an e4m3fn code: normals (1 + m/8) 2^(e-7), subnormals m 2^-9; NaN for
 * S.1111.111. */
static inline FASTGLU_HD float fastglu_e4m3_to_f32(unsigned char b) {
    const uint32_t sign = (uint32_t)(b & 0x80u) << 24, e = (b >> 3) & 0xfu, m = b & 0x7u;
    uint32_t u;
    float f;
    if (e == 0xfu && m == 0x7u) return NAN;
    if (e == 0) {
        f = (float)m * 0.001953125f; /* m * 2^-9, exact */
        return sign ? -f : f;
    }
    u = sign | ((e + 120u) << 23) | (m << 20); /* exponent e - 7 + 127 */
    memcpy(&f, &u, sizeof f);
    return f;
}

/*
 * The fp8 copy under a clamp (include/fastglu.h, saved_fp8). The backward clamps and masks the
 * decoded copy as it does any saved input, so the copy must decode beyond the bound exactly where
 * the forward's clamp cut the operand. For the clamp value c (0 < c < 448 or +inf, already in the
 * operands' dtype), lo is the largest e4m3 value <= c and hi the smallest > c; an operand is stored as:
 *   gate  g > c: hi;   else min(g, lo)                        (NaN stays NaN)
 *   up    u > c: hi;   u < -c: -hi;   else clamp(u, -lo, lo)
 * and then cast as usual (c = +inf, which cuts nothing: the plain cast). An element the clamp leaves alone keeps its cast unless the cast would
 * round it beyond the bound (then it gets lo, the neighbour on the bound's side); a cut element
 * becomes the e4m3 value nearest the bound beyond it, which the backward clamps back to c.
 */
static inline void fastglu_e4m3_clamp_bounds(float c, float *lo, float *hi) {
    if (isinf(c)) { /* c = +inf cuts nothing: lo = hi = inf leave every operand as it is */
        *lo = *hi = c;
        return;
    }
    const unsigned char q =
        fastglu_f32_to_e4m3(c, 1); /* the nearest, 0x00 .. 0x7e for 0 < c < 448 */
    const unsigned char qlo = fastglu_e4m3_to_f32(q) <= c ? q : (unsigned char)(q - 1);
    *lo = fastglu_e4m3_to_f32(qlo);
    *hi = fastglu_e4m3_to_f32((unsigned char)(qlo + 1));
}
static inline FASTGLU_HD float fastglu_fp8_gate_operand(float g, float c, float lo, float hi) {
    return g > c ? hi : g > lo ? lo : g;
}
static inline FASTGLU_HD float fastglu_fp8_up_operand(float u, float c, float lo, float hi) {
    return u > c ? hi : u < -c ? -hi : u > lo ? lo : u < -lo ? -lo : u;
}

#endif /* FASTGLU_FP8_H */
