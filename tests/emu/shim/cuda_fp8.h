#pragma once
/* Host shim of cuda_fp8.h: the e4m3 conversions glu_cuda.cu uses. */
#include "cuda_fp16.h"
#include "fp8.h"
enum __nv_fp8_interpretation_t { __NV_E4M3 = 0, __NV_E5M2 = 1 };
enum __nv_saturation_t { __NV_NOSAT = 0, __NV_SATFINITE = 1 };
typedef unsigned char __nv_fp8_storage_t;
typedef unsigned short __nv_fp8x2_storage_t;
/* e4m3 -> half: exact (every e4m3 value is a half); NaN (S.1111.111) -> 0x7fff with its sign, as
 * the hardware's cvt gives it. */
static inline __half_raw __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t b, __nv_fp8_interpretation_t) {
    __half_raw r;
    if ((b & 0x7f) == 0x7f)
        r.x = (unsigned short)(0x7fffu | (b & 0x80u) << 8);
    else
        r.x = f32_to_fp16(fastglu_e4m3_to_f32(b));
    return r;
}
/* float2 -> two e4m3 codes (x in the low byte), rounded to nearest even and saturated to +-448
 * (satfinite; inf included): fastglu_f32_to_e4m3 in its saturating mode, which glu_cuda.cu's
 * put_fp8x2 relies on the hardware's cvt to equal wherever it calls it. */
static inline __nv_fp8x2_storage_t __nv_cvt_float2_to_fp8x2(float2 v, __nv_saturation_t,
                                                            __nv_fp8_interpretation_t) {
    return (unsigned short)(fastglu_f32_to_e4m3(v.x, 1) | fastglu_f32_to_e4m3(v.y, 1) << 8);
}
