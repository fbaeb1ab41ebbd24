/*
 * fp8_tile.cuh — the device helpers of the FP8 kernels (glu_fp8_cuda.cu, quant_fp8_cuda.cu): 8-element
 * chunks as 32-bit words, the recipe's codes without a division per element (glu_fp8_cuda.cu's
 * header derives them), the amax over the bits of |x|, and the shuffles. Not installed.
 */
#ifndef FASTGLU_FP8_TILE_CUH
#define FASTGLU_FP8_TILE_CUH

#include <cuda_fp8.h>

#include "cuda_common.cuh"
#include "fp8_recipe.h"

/* The FP8 kernels' tile: one block of 256 threads per 128 x 128 tile; the transposed codes' shared
 * tile has rows of CT_PITCH bytes. */
#define TILE FASTGLU_FP8_BLOCK
#define THREADS 256
#define WARPS (THREADS / 32)
#define CT_PITCH (TILE + 16) /* bytes per row of the transposed codes' tile */

/* 8 consecutive elements of dtype E as 32-bit words (16 bytes, 32 for fp32). */
template <typename E> struct vec8 {
    unsigned w[2 * sizeof(E)];
};

static __device__ __forceinline__ float vget(const vec8<float> &v, int i) {
    return __uint_as_float(v.w[i]);
}
static __device__ __forceinline__ float vget(const vec8<__half> &v, int i) {
    return __half2float(__ushort_as_half((unsigned short)(v.w[i >> 1] >> (16 * (i & 1)))));
}
/* a bf16's value is its bits in the high half of a float's: one shift or mask an element */
static __device__ __forceinline__ float vget(const vec8<__nv_bfloat16> &v, int i) {
    return __uint_as_float(i & 1 ? v.w[i >> 1] & 0xffff0000u : v.w[i >> 1] << 16);
}
static __device__ __forceinline__ unsigned ebits(float e) { return __float_as_uint(e); }
static __device__ __forceinline__ unsigned ebits(__half e) { return __half_as_ushort(e); }
static __device__ __forceinline__ unsigned ebits(__nv_bfloat16 e) {
    return __bfloat16_as_ushort(e);
}
/* The divisor of a block's codes: its scale s, its reciprocal r = RN(1 / s) (correctly rounded:
 * __frcp_rn; on the host the division), and whether the reciprocal route holds: 2^-90 <= s <
 * 2^119 (NaN outside), where the quotient's remainder below is exact for every element whose code
 * is not +-0 (the remainder of a faithful quotient is exact when it does not underflow), r is
 * normal and every element of the block (|y| <= 448 s) is finite. A block takes the division only
 * where its amax is under 2^-81 or above 2^127.8 (or inf, NaN). */
typedef struct fp8_divisor {
    float s, r;
    int exact;
} fp8_divisor;

static __device__ __forceinline__ float fma_rn(float a, float b, float c) {
#ifdef __CUDA_ARCH__
    return __fmaf_rn(a, b, c);
#else
    return fmaf(a, b, c);
#endif
}
static __device__ __forceinline__ float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

/* r: RN(1 / s) */
static __device__ __forceinline__ fp8_divisor divisor_of(float s, float r) {
    fp8_divisor d;
    d.s = s, d.r = r;
    d.exact = !(s >= 0x1p-90f && s < 0x1p119f); /* NaN included */
    return d;
}

/* RN(1 / s) */
static __device__ __forceinline__ float rcp_rn(float s) {
#ifdef __CUDA_ARCH__
    return __frcp_rn(s);
#else
    return 1.0f / s;
#endif
}

static __device__ __forceinline__ fp8_divisor make_divisor(float s) {
    return divisor_of(s, rcp_rn(s));
}

/* y / s correctly rounded on the reciprocal route (Markstein's theorem: with r = RN(1 / s),
 * q = RN(y r) is within one ulp of y / s, its remainder y - s q is exact, and q + r (y - s q)
 * rounded once is the quotient rounded to nearest). The remainder is taken negated (s q - y) so that y = -0 gives -0. Three
 * instructions an element, no branch: tests/emu/fp8_emu.cpp checks it against the division at
 * and around every rounding midpoint of e4m3. */
static __device__ __forceinline__ float quotient(const fp8_divisor &d, float y) {
    const float q = mul_rn(y, d.r);
    return fma_rn(-fma_rn(d.s, q, -y), d.r, q);
}

/* Two e4m3 codes (y0's in the low byte) under the saturating cast: the cvt instruction, which
 * equals fastglu_f32_to_e4m3(x, 1) for every non-NaN x (tests/emu/shim/cuda_fp8.h on the host). */
static __device__ __forceinline__ unsigned e4m3x2(float x0, float x1) {
    return __nv_cvt_float2_to_fp8x2(make_float2(x0, x1), __NV_SATFINITE, __NV_E4M3);
}

/* The recipe's division for two elements: out of line, as the route below rarely takes it (the
 * kernels' code stays small enough for the instruction cache). */
static __device__ __noinline__ unsigned quantise2_exact(float y0, float y1, float s) {
    return fastglu_fp8_quantise(y0, s) | (unsigned)fastglu_fp8_quantise(y1, s) << 8;
}

/* fastglu_fp8_quantise(y0, d.s) | fastglu_fp8_quantise(y1, d.s) << 8: the cast of the quotients
 * of the reciprocal route, or the division where the scale leaves it (the block's choice, the
 * same for all of its elements). */
static __device__ __forceinline__ unsigned quantise2(const fp8_divisor &d, float y0, float y1) {
    if (!d.exact) return e4m3x2(quotient(d, y0), quotient(d, y1));
    return quantise2_exact(y0, y1, d.s);
}

/* The same for a chunk's 8 elements (element 0's code in the low byte). */
template <typename E>
static __device__ __forceinline__ uint2 quantise8(const fp8_divisor &d, const vec8<E> &y) {
    float v[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = vget(y, e);
    unsigned w[2];
    if (!d.exact) {
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            const float *x = v + 4 * k;
            w[k] = e4m3x2(quotient(d, x[0]), quotient(d, x[1])) |
                   e4m3x2(quotient(d, x[2]), quotient(d, x[3])) << 16;
        }
        return make_uint2(w[0], w[1]);
    }
#pragma unroll
    for (int k = 0; k < 2; ++k)
        w[k] = quantise2_exact(v[4 * k], v[4 * k + 1], d.s) |
               quantise2_exact(v[4 * k + 2], v[4 * k + 3], d.s) << 16;
    return make_uint2(w[0], w[1]);
}

/* y rounded to dtype E, 8 elements from their fp32 values, and am: the running max over the
 * elements' |y| as bits (per 16-bit half for the 2-byte dtypes, whose order of |bits| is the
 * numeric order of |y|, NaN above inf, as for fp32); amax_bits gives a lane's max as fp32 |bits|
 * (fastglu_abs_bits). The 2-byte dtypes round two elements an instruction (the cvt's x2 forms). */
static __device__ __forceinline__ void round8(vec8<float> &y, unsigned &am, const float *v) {
#pragma unroll
    for (int e = 0; e < 8; ++e)
        y.w[e] = __float_as_uint(v[e]), am = max(am, fastglu_abs_bits(v[e]));
}
static __device__ __forceinline__ unsigned max_u16x2(unsigned a, unsigned b) {
#ifdef __CUDA_ARCH__
    return __vmaxu2(a, b);
#else
    return max(a & 0xffffu, b & 0xffffu) | max(a >> 16, b >> 16) << 16;
#endif
}
static __device__ __forceinline__ void round8(vec8<__nv_bfloat16> &y, unsigned &am,
                                              const float *v) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
#ifdef __CUDA_ARCH__
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(y.w[k]) : "f"(v[2 * k + 1]), "f"(v[2 * k]));
#else
        y.w[k] = ebits(__float2bfloat16_rn(v[2 * k])) |
                 (unsigned)ebits(__float2bfloat16_rn(v[2 * k + 1])) << 16;
#endif
        am = max_u16x2(am, y.w[k] & 0x7fff7fffu);
    }
}
static __device__ __forceinline__ void round8(vec8<__half> &y, unsigned &am, const float *v) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
#ifdef __CUDA_ARCH__
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(y.w[k]) : "f"(v[2 * k + 1]), "f"(v[2 * k]));
#else
        y.w[k] = ebits(__float2half_rn(v[2 * k])) | (unsigned)ebits(__float2half_rn(v[2 * k + 1]))
                                                        << 16;
#endif
        am = max_u16x2(am, y.w[k] & 0x7fff7fffu);
    }
}
static __device__ __forceinline__ unsigned amax_bits(unsigned am, const float *) { return am; }
static __device__ __forceinline__ unsigned amax_bits(unsigned am, const __nv_bfloat16 *) {
    return max(am << 16, am & 0xffff0000u);
}
static __device__ __forceinline__ unsigned amax_bits(unsigned am, const __half *) {
    return fastglu_abs_bits(to_f32(__ushort_as_half((unsigned short)max(am & 0xffffu, am >> 16))));
}

/* a chunk's largest |x| as fp32 |bits| (fastglu_abs_bits; the 2-byte dtypes' |bits| two at a
 * time, their order that of the values, NaN above inf) */
static __device__ __forceinline__ unsigned chunk_amax(const vec8<float> &v) {
    unsigned am = 0;
#pragma unroll
    for (int e = 0; e < 8; ++e) am = max(am, v.w[e] & 0x7fffffffu);
    return am;
}
template <typename E> static __device__ __forceinline__ unsigned chunk_amax(const vec8<E> &v) {
    unsigned am = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) am = max_u16x2(am, v.w[k] & 0x7fff7fffu);
    return amax_bits(am, (const E *)0);
}

template <typename E> static __device__ __forceinline__ vec8<E> pack8(const E *e) {
    vec8<E> v;
#pragma unroll
    for (int k = 0; k < 2 * (int)sizeof(E); ++k)
        v.w[k] = sizeof(E) == 4 ? ebits(e[k]) : ebits(e[2 * k]) | ebits(e[2 * k + 1]) << 16;
    return v;
}
/* The compiler no longer knows v's words here: keeps the bias packed (16 registers for the 2-byte
 * forward's 16 columns) instead of hoisting its 32 fp32 values out of the row loop, which spilled. */
template <typename E, int N> static __device__ __forceinline__ void opaque(vec8<E> (&v)[N]) {
#ifdef __CUDA_ARCH__
#pragma unroll
    for (int k = 0; k < N; ++k)
#pragma unroll
        for (int i = 0; i < 2 * (int)sizeof(E); ++i) asm("" : "+r"(v[k].w[i]));
#else
    (void)v;
#endif
}
/* Global loads and stores of the 8 elements at p (16-byte aligned). The operands never overlap
 * the outputs (fastglu_check_glu_fp8): the read-only path. */
template <typename E> static __device__ __forceinline__ void ld8(vec8<E> &v, const E *p) {
#pragma unroll
    for (int k = 0; k < (int)sizeof(E) / 2; ++k) {
        const uint4 x = __ldg((const uint4 *)p + k);
        v.w[4 * k] = x.x, v.w[4 * k + 1] = x.y, v.w[4 * k + 2] = x.z, v.w[4 * k + 3] = x.w;
    }
}
template <typename E> static __device__ __forceinline__ void st8(E *p, const vec8<E> &v) {
#pragma unroll
    for (int k = 0; k < (int)sizeof(E) / 2; ++k)
        ((uint4 *)p)[k] = make_uint4(v.w[4 * k], v.w[4 * k + 1], v.w[4 * k + 2], v.w[4 * k + 3]);
}
/* ldmatrix.x4.trans of 16-bit elements from shared memory: lane L gives the address of row L % 8
 * of matrix L / 8 (8 elements, 16 bytes, on 16 bytes); register i of lane t receives matrix i's
 * elements (2 (t % 4), t / 4) in its low half and (2 (t % 4) + 1, t / 4) in its high half, i.e.
 * two consecutive rows of column t / 4. Every lane of the warp executes it. The host emulation
 * (FASTGLU_HOST_EMULATION) exchanges the lanes' addresses through its warp barrier. */
static __device__ __forceinline__ void ldsm_x4_trans(unsigned (&r)[4], const void *row) {
#if defined(__CUDA_ARCH__)
    const unsigned a = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a)
                 : "memory");
#elif defined(FASTGLU_HOST_EMULATION)
    emu_ldsm_x4_trans(r, row);
#else
    (void)row, r[0] = r[1] = r[2] = r[3] = 0u; /* nvcc's host pass: never run */
#endif
}

/* The same into shared memory at p (8-byte aligned). */
template <typename E> static __device__ __forceinline__ void st8_shared(E *p, const vec8<E> &v) {
#pragma unroll
    for (int k = 0; k < (int)sizeof(E); ++k)
        ((uint2 *)p)[k] = make_uint2(v.w[2 * k], v.w[2 * k + 1]);
}

static __device__ __forceinline__ float *scale_at(float *s, int64_t ld, int mn, int64_t i,
                                                  int64_t b) {
    return mn ? s + b * ld + i : s + i * ld + b;
}

/* max over each group of N consecutive lanes (N a power of two), every lane of the warp executing
 * it: xor shuffles within the group, no mask that differs between the groups */
template <int N> static __device__ __forceinline__ unsigned group_max(unsigned v) {
#pragma unroll
    for (int o = N / 2; o; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
/* the same for two 16-bit unsigned maxima packed in a word */
template <int N> static __device__ __forceinline__ unsigned group_max_u16x2(unsigned v) {
#pragma unroll
    for (int o = N / 2; o; o >>= 1) v = max_u16x2(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
/* sum over each half-warp in the order of a butterfly (xor 8, 4, 2, 1), likewise */
static __device__ __forceinline__ float half_warp_sum(float v) {
#pragma unroll
    for (int o = 8; o; o >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* The column-wise copy's shared tile: a row's chunk of 8 elements at p, fp32 in 8-byte stores (its
 * rows on 8 bytes), the 2-byte dtypes in one 16-byte store (rows on 16 bytes). */
static __device__ __forceinline__ void st8_tile(float *p, const vec8<float> &v) {
    st8_shared(p, v);
}
template <typename E> static __device__ __forceinline__ void st8_tile(E *p, const vec8<E> &v) {
    *(uint4 *)p = make_uint4(v.w[0], v.w[1], v.w[2], v.w[3]);
}

/* Where the transposed codes of a 128 x 128 tile go: the tile's first code (its first column's row
 * of the transposed operand, at the tile's first token: dt + j0 * dt_rs + t0), the row stride, the
 * widest access its rows start on (t_width), and the column-wise scales (scale_at(st, st_ld, mn,
 * j0 + column, row tile)). */
typedef struct fp8_t_out {
    unsigned char *dt;
    int64_t dt_rs;
    int t_width;
    float *st;
    int64_t st_ld, j0, row_tile;
    int mn, pow2;
} fp8_t_out;

/* fp8_t_out of the 128 x 128 tile at (t0, j0) of a kernel's arguments A (glu_fp8_cuda.cu's fp8_args,
 * quant_fp8_cuda.cu's quant_args: their fields dt, dt_rs, t_width, st, st_ld, mn_major, pow2),
 * the scales at row tile blockIdx.x */
template <typename A>
static __device__ __forceinline__ fp8_t_out t_out_of(const A &a, int64_t j0, int64_t t0) {
    fp8_t_out o;
    o.dt = a.dt + j0 * a.dt_rs + t0, o.dt_rs = a.dt_rs, o.t_width = a.t_width;
    o.st = a.st, o.st_ld = a.st_ld, o.j0 = j0, o.row_tile = blockIdx.x;
    o.mn = a.mn_major, o.pow2 = a.pow2;
    return o;
}

/* Where column c of row r of a shared tile is stored: the 2-byte tiles' 16-byte chunks are
 * XOR-swizzled, chunk c / 8 of row r at chunk c / 8 ^ 2 ((r / 8) % 4). transposed_codes16's
 * ldmatrix reads one chunk of the 8 rows 2 i + {0, 1, 8, 9, 16, 17, 24, 25} at once; at a pitch
 * of 17 chunks (272 bytes) those rows would fall in 2 of the 8 16-byte bank groups (a 4-way
 * conflict), swizzled they fall in 8. A row's chunks stay a permutation of themselves, so the row
 * phase's writes (consecutive chunks of a row) remain conflict-free. fp32's tiles: unswizzled. */
template <typename E> static __device__ __forceinline__ int tile_col(int r, int c) {
    return sizeof(E) == 2 ? c ^ ((r << 1) & 48) : c;
}
/* Element (r, c) of a shared tile of row pitch P elements: every reader and writer of the tiles
 * goes through it, so that none misses the swizzle. */
template <int P, typename E> static __device__ __forceinline__ E *tile_at(E *tile, int r, int c) {
    return tile + r * P + tile_col<E>(r, c);
}

/* The transposed codes of a 2-byte tile in shared memory (tile: rows 0 .. nt - 1, columns 0 .. nj
 * - 1 of the operand, stored at tile_at, rows past nt zero where OWN, rows on 16 bytes, pitch P
 * elements; after a barrier). OWN: each column is its own 128 x 1 block (its amax, scale and
 * divisor); else every code under d. Warp w takes the column groups g = w, w + 8 of 8 columns; per
 * group 4 ldmatrix.x4.trans of 32 tokens each give lane l the column 8 g + l / 4 and, from each,
 * the 8 consecutive tokens 32 m + 8 (l % 4) .. + 7 (matrix i's row r is token 8 (r / 2) + 2 i +
 * r % 2, so that register i holds the lane's tokens 2 i and 2 i + 1): a column's amax is a max over
 * the lane's 16 words and a 4-lane max, its scale one per lane and 32 elements, and each 8 codes
 * one 8-byte store into the transposed row (a quad of lanes writes 32 contiguous bytes, whole
 * sectors). Every lane of the warp takes the ldmatrix and the shuffles, those of columns past nj
 * included. */
template <typename E, int OWN, int P>
static __device__ __forceinline__ void transposed_codes16(const fp8_t_out &o, const E *tile, int nj,
                                                          int nt, const fp8_divisor &d0) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, k = lane & 3;
    const int i = lane >> 3, r = lane & 7;         /* the ldmatrix row this lane addresses */
    const int tr = 8 * (r >> 1) + 2 * i + (r & 1); /* its token within 32 */
#pragma unroll 1
    for (int g = warp; g < TILE / 8 && 8 * g < nj; g += WARPS) { /* uniform across the warp */
        const int cl = 8 * g + (lane >> 2);
        const E *src = tile_at<P>(tile, tr, 8 * g); /* + 32 m rows: the same swizzle */
        vec8<E> v[4];
#pragma unroll
        for (int m = 0; m < 4; ++m) ldsm_x4_trans(v[m].w, src + 32 * m * P);
        fp8_divisor d = d0;
        if (OWN) {
            unsigned am = 0;
#pragma unroll
            for (int m = 0; m < 4; ++m)
#pragma unroll
                for (int q = 0; q < 4; ++q) am = max_u16x2(am, v[m].w[q] & 0x7fff7fffu);
            am = group_max_u16x2<4>(am);
            const float s = fastglu_fp8_scale(amax_bits(am, (const E *)0), o.pow2);
            if (k == 0 && cl < nj) *scale_at(o.st, o.st_ld, o.mn, o.j0 + cl, o.row_tile) = s;
            d = make_divisor(s);
        }
        if (cl >= nj) continue;
        unsigned char *row = o.dt + cl * o.dt_rs;
#pragma unroll
        for (int m = 0; m < 4; ++m) {
            const int tk = 32 * m + 8 * k;
            const uint2 c = quantise8(d, v[m]);
            if (o.t_width >= 8 && tk + 8 <= nt) {
                *(uint2 *)(row + tk) = c;
            } else {
#pragma unroll 1
                for (int b = 0; b < 8 && tk + b < nt; ++b)
                    row[tk + b] = (unsigned char)((b < 4 ? c.x : c.y) >> (8 * (b & 3)));
            }
        }
    }
}

/* Rows nt .. 127 of a 2-byte tile (pitch P) set to zero, so that they raise no column amax: the
 * block's threads, 16 bytes each. */
template <typename E, int P> static __device__ __forceinline__ void zero_rows16(E *tile, int nt) {
    for (int i = threadIdx.x; i < (TILE - nt) * (TILE / 8); i += THREADS)
        *(uint4 *)(tile + (nt + i / (TILE / 8)) * P + 8 * (i % (TILE / 8))) =
            make_uint4(0u, 0u, 0u, 0u);
}

/* The transposed copy's rows j0 .. j0 + nj - 1 (dt: its first byte, row stride dt_rs; vec_t: rows
 * on 16 bytes), columns t0 .. t0 + nt - 1, from the codes' shared tile ct laid out as those rows
 * (after a barrier): 16 bytes a thread */
static __device__ __forceinline__ void write_transposed(unsigned char *dt, int64_t dt_rs, int vec_t,
                                                        const unsigned char *ct, int64_t j0, int nj,
                                                        int64_t t0, int nt) {
    for (int i = threadIdx.x; i < nj * (TILE / 16); i += THREADS) {
        const int cl = i / (TILE / 16), r0 = 16 * (i % (TILE / 16));
        if (r0 >= nt) continue;
        unsigned char *dst = dt + (j0 + cl) * dt_rs + t0 + r0;
        const unsigned char *src = ct + cl * CT_PITCH + r0;
        if (vec_t && r0 + 16 <= nt) {
            *(uint4 *)dst = *(const uint4 *)src;
        } else {
            for (int b = 0; b < 16 && r0 + b < nt; ++b) dst[b] = src[b];
        }
    }
}

#endif /* FASTGLU_FP8_TILE_CUH */
