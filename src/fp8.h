/*
 * fp8.h — float -> float8_e4m3fn (the encoding of torch.float8_e4m3fn), for the CPU backend and the
 * CUDA kernels alike. Not installed.
 *
 * e4m3fn: 1 sign bit, 4 exponent bits (bias 7), 3 mantissa bits; no infinities; S.1111.111 is NaN;
 * largest finite 448, smallest normal 2^-6, subnormals in steps of 2^-9. The cast rounds to nearest,
 * ties to even. What would round above 448 (|x| >= 464) and +-inf become +-448 when `saturate` is 1
 * (PyTorch 2.13's `x.to(torch.float8_e4m3fn)`), NaN when it is 0 (PyTorch 2.11's, measured on the
 * H200 image: bench/results/nvidia-h200/2026-11-30-11-*); NaN stays NaN. fastglu_set_fp8_saturate()
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
    if (a > 0x7f800000u) return sign | 0x7fu;  /* NaN */
    if (saturate ? a >= 0x43e80000u : a > 0x43e80000u) /* rounds above 448 (464 is a tie: 448), inf */
        return sign | (saturate ? 0x7eu : 0x7fu);
    if (a < 0x3c800000u) {                     /* |x| < 2^-6: subnormal, units of 2^-9 */
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

#endif /* FASTGLU_FP8_H */
