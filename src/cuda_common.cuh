/*
 * cuda_common.cuh — device helpers shared by the CUDA kernels (glu_cuda.cu, glu_swiglu.cuh, the GEMMs): element
 * conversions, the fixed-divisor division, access widths, and a launch's status. Not installed.
 */
#ifndef FASTGLU_CUDA_COMMON_CUH
#define FASTGLU_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "internal.h"

/* ---- element conversions (overloads stand in for C11 _Generic) ----------------------------- */

static __device__ __forceinline__ float to_f32(float x) { return x; }
static __device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
static __device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

static __device__ __forceinline__ void from_f32(float *dst, float x) { *dst = x; }
static __device__ __forceinline__ void from_f32(__half *dst, float x) { *dst = __float2half_rn(x); }
static __device__ __forceinline__ void from_f32(__nv_bfloat16 *dst, float x) {
    *dst = __float2bfloat16_rn(x);
}

/* 2^x and 1 / x from the special-function unit, subnormals flushed to zero: in sigmoid(q) =
 * 1 / (1 + 2^(-q log2 e)) a subnormal 2^... vanishes against 1 anyway, 1 + 2^... >= 1 is never
 * subnormal, and its reciprocal, subnormal where it exceeds 2^126, was 0 there with __fdividef too;
 * so the flush changes no result and saves the non-flushing forms' range checks (__expf, __fdividef). */
#ifndef FASTGLU_HOST_EMULATION
static __device__ __forceinline__ float ex2_ftz(float x) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}
static __device__ __forceinline__ float rcp_ftz(float x) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}
/* The sigmoid's reciprocal: 1 / x for x = RN(1 + e), e = 2^... >= 0, subnormal results kept, as
 * torch's fp32 sigmoid keeps them (for x > 2^126): the flushing reciprocal of x / 4, times 1 / 4
 * (exact where the result is normal, rounded once into the subnormal range). x / 4 is one FMA,
 * RN(e / 4 + 1 / 4): 1 + e lies in [1, FLT_MAX + 1] (or is inf or NaN), where scaling by 1 / 4
 * commutes with the rounding, so it equals RN(1 + e) / 4 bit for bit.
 * A multiply where rcp.approx without .ftz brings a slow path whose registers made some of the
 * family's kernels spill. */
static __device__ __forceinline__ float rcp_sigmoid(float e) {
    return __fmul_rn(rcp_ftz(__fmaf_rn(e, 0.25f, 0.25f)), 0.25f);
}
/* 1 / x from the special-function unit with subnormal results kept (max. error 1 ulp). */
static __device__ __forceinline__ float rcp_approx(float x) {
    float r;
    asm("rcp.approx.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}
#endif /* (the host emulation, tests/emu, takes glu_math.h's host sigmoid instead) */

#define LOG2E 1.44269504f

/* Division by a fixed d as multiply-high and shift (Granlund & Montgomery), exact for n < 2^32. */
typedef struct fastdiv {
    uint64_t d;
    unsigned magic, shift;
    int small; /* 1: every index fits in 32 bits and the multiply-shift is used */
} fastdiv;

static fastdiv make_fastdiv(uint64_t d, uint64_t n_max) {
    fastdiv f;
    f.d = d, f.magic = 0, f.shift = 0;
    f.small = n_max <= 0xffffffffull && d < 0x80000000ull;
    if (f.small) {
        while ((1ull << f.shift) < d) f.shift++;
        f.magic = (unsigned)(((1ull << 32) * ((1ull << f.shift) - d)) / d + 1);
    }
    return f;
}

static __device__ __forceinline__ uint64_t fastdiv_div(const fastdiv &f, uint64_t n) {
    if (f.small) {
        unsigned n32 = (unsigned)n;
        return ((uint64_t)__umulhi(n32, f.magic) + n32) >> f.shift;
    }
    return n / f.d;
}

/* Widest access (bytes: a power of two, at most `cap`, at least one element of esize) that
 * divides the address of every row's start: the base address and, with more than one row, the row
 * stride in bytes. Offsets within a row are the caller's business (multiples of the access). */
static inline int access_width_cap(const void *base, int64_t row_stride, int64_t tokens,
                                   size_t esize, int cap) {
    uint64_t bits = (uint64_t)(uintptr_t)base;
    if (tokens > 1) bits |= (uint64_t)row_stride * esize;
    int w = cap;
    while (w > (int)esize && bits % (uint64_t)w) w /= 2;
    return w;
}

/* Widest access (16, 8, 4 or 2 bytes; at least one element) that divides the address of every
 * row's chunks: the base address and the row stride in bytes (when there is more than one row);
 * a chunk's offset within its row is a multiple of 16 bytes. */
static inline int access_width(const void *base, int64_t row_stride, int64_t tokens, size_t esize) {
    return access_width_cap(base, row_stride, tokens, esize, 16);
}

/* A launch's status: no device or no (recent enough) driver is FASTGLU_ERROR_NO_CUDA, any other
 * failure FASTGLU_ERROR_CUDA. `err` is what cudaLaunchKernel returned for this launch alone (an
 * earlier, unrelated error left pending by other code is not taken for ours). */
static fastglu_status launch_status(const char *fn, cudaError_t err) {
    if (err == cudaSuccess) return FASTGLU_SUCCESS;
    const int no_device = err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver;
    return fastglu_set_error(no_device ? FASTGLU_ERROR_NO_CUDA : FASTGLU_ERROR_CUDA,
                             "%s: kernel launch failed: %s", fn, cudaGetErrorString(err));
}

#endif /* FASTGLU_CUDA_COMMON_CUH */
