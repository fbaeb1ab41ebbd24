#pragma once
#include "convert.h"
struct __nv_bfloat16 { uint16_t x; };
static inline float __bfloat162float(__nv_bfloat16 h) { return bf16_to_f32(h.x); }
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { __nv_bfloat16 h; h.x = f32_to_bf16(f); return h; }
static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short b) { __nv_bfloat16 h; h.x = b; return h; }
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.x; }
