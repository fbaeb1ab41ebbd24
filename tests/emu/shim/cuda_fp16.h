#pragma once
#include "convert.h"
struct __half { uint16_t x; };
static inline float __half2float(__half h) { return fp16_to_f32(h.x); }
static inline __half __float2half_rn(float f) { __half h; h.x = f32_to_fp16(f); return h; }
