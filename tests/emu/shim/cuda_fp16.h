#pragma once
#include "convert.h"
#include "cuda_runtime.h"
struct __half { uint16_t x; };
static inline float __half2float(__half h) { return fp16_to_f32(h.x); }
static inline __half __float2half_rn(float f) { __half h; h.x = f32_to_fp16(f); return h; }
static inline __half __ushort_as_half(unsigned short b) { __half h; h.x = b; return h; }
static inline unsigned short __half_as_ushort(__half h) { return h.x; }
/* the raw bits of a half, as __nv_cvt_fp8_to_halfraw returns them (__half(raw) converts) */
struct __half_raw {
    unsigned short x;
    operator __half() const { __half h; h.x = x; return h; }
};
struct __half2 { __half x, y; };
static inline __half2 __floats2half2_rn(float a, float b) { __half2 v = {__float2half_rn(a), __float2half_rn(b)}; return v; }
static inline float2 __half22float2(__half2 v) { return make_float2(__half2float(v.x), __half2float(v.y)); }
