#pragma once
#include "convert.h"
#include "cuda_runtime.h"
struct __nv_bfloat16 { uint16_t x; };
static inline float __bfloat162float(__nv_bfloat16 h) { return bf16_to_f32(h.x); }
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { __nv_bfloat16 h; h.x = f32_to_bf16(f); return h; }
static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short b) { __nv_bfloat16 h; h.x = b; return h; }
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.x; }
struct __nv_bfloat162 { __nv_bfloat16 x, y; };
static inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { __nv_bfloat162 v = {__float2bfloat16_rn(a), __float2bfloat16_rn(b)}; return v; }
static inline float2 __bfloat1622float2(__nv_bfloat162 v) { return make_float2(__bfloat162float(v.x), __bfloat162float(v.y)); }
