/*
 * glu_fp8_cuda.cu — fastglu_glu_fwd_fp8_cuda: the family's forward quantised to float8_e4m3fn with
 * the recipe of include/fastglu.h ("The activation quantised to FP8"), in the pass that computes it.
 *
 * One block of 256 threads (8 warps) per tile of 128 tokens x 128 columns: one row-wise block wide
 * (1 x 128) and one column-wise block tall (128 x 1). The kernels are memory-bound, so the layout
 * is chosen for the bytes in flight (an H200 needs some 40 KB per SM):
 *
 * Row phase. A half-warp takes a row of the tile, lane l (0..15) its 8 consecutive columns 8 l ..
 * 8 l + 7: 16 bytes of each operand per lane (two 16-byte loads for fp32), so a 1 x 128 block is one
 * half-warp and its amax one 16-lane max (xor shuffles within the half-warp). A warp
 * takes two rows a step, the block 16; each thread issues the loads of U steps (4 for 2-byte
 * dtypes, 2 for fp32 and for the backward's three operands) before it computes any of them. Per
 * row: y (glu_math.cuh's glu_forward, the general path's operations, so y is fastglu_glu_fwd_cuda's
 * y bit for bit), rounded to dtype, stored when asked (16-byte stores); the row's amax over the
 * bits of |y| (fp8_recipe.h); its scale; the 8 codes in one 8-byte store.
 *
 * The kernels are bound by the instructions they issue, not by the bytes (Nsight Compute): the
 * per-element work, the per-row scale, and the instruction cache where cold paths are unrolled
 * into the hot loop. Hence: plain SwiGLU / quick-GeGLU without bias or weights has its own kernels
 * (FAST: no multipliers, offset, clamp, bias or weight in the code; the same bits, as those
 * operations are exact no-ops there); the element-by-element path is a loop that computes each
 * element twice (for the amax, then for the code), not unrolled copies per step; the recipe's
 * division sits in a function out of line.
 *
 * That vector path needs SPLIT operands whose rows start on 16 bytes (base and row stride), y
 * likewise, the codes' rows on 8 bytes, and for the backward F % 8 == 0 (a lane's 8 columns of dh
 * then lie in d_gate or in d_up); the host decides once per launch (fp8_args.vec). Otherwise, and
 * for a lane whose 8 columns pass the tile's last column, the lane loads and computes its elements
 * one by one (the same math: the same bits), in a loop.
 *
 * Column-wise copy. The row phase also puts the rounded y in shared memory (row pitch 132 2-byte or
 * 130 fp32 elements: 8-byte stores, and the column reads below hit 32 distinct banks). After a
 * barrier a half-warp takes a column of the tile, lane l its tokens l, l + 16, .., l + 112: the
 * column's amax (a 16-lane max, both half-warps taking the shuffles), its scale, and its codes into
 * a second shared tile laid out as y_t's rows; after another barrier the block writes that tile out
 * along y_t's rows with 16-byte stores (the transposition happens in shared memory, in the same
 * kernel).
 *
 * The codes without a division per element (quantise2): the recipe's code is the e4m3 cast of the
 * fp32 quotient y / scale, correctly rounded. With r within one ulp of 1 / scale (rcp.approx), q =
 * y r rounded lies within 2^-22 of that quotient (relative), so where q (1 - 2^-20) and q (1 +
 * 2^-20) cast to the same code, every value between them does, the quotient's included: that code,
 * from the hardware's cvt (two elements an instruction). Where they differ (the quotient within a
 * few ulps of a rounding midpoint of e4m3: some 2^-16 of the elements) and for a scale outside
 * [2^-126, 2^126) (where r or a value one ulp from it is not normal), the element takes the
 * recipe's own division: the same bits in every case, at some 5 instructions an element instead of
 * a division and a cast in software.
 *
 * FASTGLU_FP8_SCALING_TENSOR: two passes over the operands, the fewest the math allows without
 * keeping y (the amax of the whole tensor must be known before any element is quantised; storing
 * y and reading it back moves as many bytes as reading h again). A 4-byte memset of the workspace,
 * a first kernel (MODE_AMAX) that computes y (stores it when asked) and folds its tile's amax into
 * the workspace with one atomicMax per warp (the max over the bits is exact and order-free:
 * deterministic) and writes nothing else, and a second (MODE_TENSOR) that reads the amax, derives
 * the scale (block (0, 0) stores it), recomputes y from the operands and writes the codes.
 *
 * fastglu_glu_bwd_fp8_cuda (BWD = 1): the same tiles over dh [T, 2F] in h's layout; a column of dh
 * maps to an operand column j and to d_gate or d_up; each element's gradient from gate, up and dy
 * (glu_math.cuh's glu_backward, the general path's: fastglu_glu_bwd_cuda's values bit for bit).
 * With SPLIT, d_gate's and d_up's tiles over the same operand columns read the same gate, up and dy:
 * their launch order interleaves them (split_tile), so that the second read comes from L2.
 *
 * The backward's dbias / dweights (RED = 1: separate instantiations, so that the kernels without
 * them keep their code; FAST never has them, as they need bias / weights). Each tile writes its
 * partial sums to the workspace in a fixed order, then fp8_reduce_kernel adds the tiles' partials
 * (fp32 throughout; the order never depends on the grid or the scheduling):
 *   dbias    the thread of half-warp rho = 2 warp + half (rows rho, rho + 16, ...) sums the
 *            unmasked d_a / d_v of each of its 8 columns over its rows in order, from +0, in
 *            registers; after the row phase the two half-warps of a warp add theirs (a shuffle)
 *            and the 8 warps' sums are added in order (warp 0 first) through shared memory:
 *            partial[row tile][dh column].
 *   dweights each lane sums m_d act (v + o) dy over its d_gate columns in order, from +0 (each
 *            operand column j once: d_up's columns carry the same term), and the half-warp adds
 *            its 16 lanes with a butterfly (xor 8, 4, 2, 1; exact in every lane, as a + b = b + a):
 *            partial[column tile][token], for the column tiles holding d_gate columns.
 * glu_fp8_cpu.c's tile_dh follows these orders, and fp8_reduce_kernel glu_cuda.cu's reduction
 * (fastglu_reduce_partials), so the CPU backend's sums equal the host emulation's bit for bit.
 */
#include <cuda_fp8.h>

#include "fp8_recipe.h"
#include "glu_fp8.h"
#include "glu_math.cuh"

#define TILE FASTGLU_FP8_BLOCK
#define THREADS 256
#define WARPS (THREADS / 32)
#define SPAN 8                /* a lane's consecutive columns: 16 bytes of a 2-byte dtype */
#define STEP_ROWS (2 * WARPS) /* rows of the block per step: one per half-warp */
#define CT_PITCH (TILE + 16)  /* bytes per row of the column-wise codes' tile */

enum { MODE_BLOCK = 0, MODE_AMAX = 1, MODE_TENSOR = 2 };

typedef struct fp8_args {
    glu_math m;
    const void *gate, *up, *bias, *weights, *dy;
    int64_t g_rs, u_rs, w_stride, step, bias_up; /* step: 1 SPLIT, 2 INTERLEAVED */
    int w_dtype, mn_major, pow2;
    int vec;   /* the row phase's 16-byte path (see the header) */
    int vec_t; /* y_t's rows start on 16 bytes: 16-byte stores of the column-wise codes */
    void *y;
    int64_t y_rs;
    unsigned char *d, *dt;
    int64_t d_rs, dt_rs;
    float *s, *st;
    int64_t s_ld, st_ld;
    unsigned *amax;
    int64_t dy_rs;
    int64_t T, F, W;        /* W: the quantised operand's width, F (y) or 2F (dh) */
    float *wsb, *wsw;       /* the backward's dbias / dweights partials (RED), NULL: not asked */
    void *dbias, *dweights; /* the backward's sums (fp8_reduce_kernel) */
    int64_t nwt;            /* the column tiles with dweights partials (fastglu_fp8_dw_tiles) */
} fp8_args;

/* Per dtype and direction: the shared tile's row pitch in elements (8-byte row starts; 2 l + const
 * words apart for tokens l = 0..15, so a half-warp's column read hits 16 distinct banks, the other
 * half-warp's column the other 16); the row steps whose loads a thread issues before computing any
 * (unroll: 128 bytes of loads in flight per thread in the forward, 96 in the backward); the blocks
 * per SM the registers are held to (3: <= 80 registers, 4: <= 64; the 2-byte forward needs ~110
 * unbounded and spills at 64, the backward fits 64 with its 2 steps). RED (the backward's sums:
 * 8 more accumulators) is held to 3 for 2-byte types and to 2 for fp32, which spills at 3 (its
 * column-wise shared tiles allow only 2 blocks anyway). */
template <typename E, int BWD, int RED = 0> struct geom {
    enum {
        pitch = sizeof(E) == 4 ? TILE + 2 : TILE + 4,
        tile_bytes = TILE * pitch * (int)sizeof(E),
        unroll = sizeof(E) == 4 || BWD ? 2 : 4,
        min_blocks = RED                     ? (sizeof(E) == 4 ? 2 : 3)
                     : BWD && sizeof(E) != 4 ? 4
                                             : 3
    };
};
/* RED's shared memory: the 8 warps' dbias sums of the tile's columns, after the column-wise tiles */
#define RED_BYTES (WARPS * TILE * (int)sizeof(float))

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
static __device__ __forceinline__ float vget(const vec8<__nv_bfloat16> &v, int i) {
    return __bfloat162float(__ushort_as_bfloat16((unsigned short)(v.w[i >> 1] >> (16 * (i & 1)))));
}
static __device__ __forceinline__ unsigned ebits(float e) { return __float_as_uint(e); }
static __device__ __forceinline__ unsigned ebits(__half e) { return __half_as_ushort(e); }
static __device__ __forceinline__ unsigned ebits(__nv_bfloat16 e) {
    return __bfloat16_as_ushort(e);
}
/* The divisor of a block's codes: its scale, an approximate reciprocal r (the bracket below
 * needs |r s - 1| <= 2^-23: the hardware's rcp.approx, within one ulp; on the host the division)
 * and whether the reciprocal route holds: 2^-126 <= s < 2^126, where r and every value within one
 * ulp of it are finite and normal (at s = 2^126 one ulp below 2^-126 is subnormal, which .ftz
 * flushes to 0; the recipe's scales stay below 2^121, so the bound costs no element). */
typedef struct fp8_divisor {
    float s, r;
    int exact;
} fp8_divisor;

static __device__ __forceinline__ fp8_divisor make_divisor(float s) {
    fp8_divisor d;
    d.s = s;
#ifdef __CUDA_ARCH__
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(d.r) : "f"(s));
#else
    /* the host (tests/emu): the division with rcp.approx.ftz's flushes of a subnormal input and
     * result to 0 */
    d.r = 1.0f / (fabsf(s) < 0x1p-126f ? copysignf(0.0f, s) : s);
    if (fabsf(d.r) < 0x1p-126f) d.r = copysignf(0.0f, d.r);
#endif
    d.exact = !(s >= 0x1p-126f && s < 0x1p126f); /* NaN included */
    return d;
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

/* fastglu_fp8_quantise(y0, d.s) | fastglu_fp8_quantise(y1, d.s) << 8, by the reciprocal where
 * its bracket decides the codes (the header's "codes without a division"). */
static __device__ __forceinline__ unsigned quantise2(const fp8_divisor &d, float y0, float y1) {
    if (!d.exact) {
        const float q0 = y0 * d.r, q1 = y1 * d.r;
        const float below = 1.0f - 0x1p-20f, above = 1.0f + 0x1p-20f;
        const unsigned lo = e4m3x2(q0 * below, q1 * below), hi = e4m3x2(q0 * above, q1 * above);
        if (lo == hi) return lo;
    }
    return quantise2_exact(y0, y1, d.s);
}

template <typename E> static __device__ __forceinline__ vec8<E> pack8(const E *e) {
    vec8<E> v;
#pragma unroll
    for (int k = 0; k < 2 * (int)sizeof(E); ++k)
        v.w[k] = sizeof(E) == 4 ? ebits(e[k]) : ebits(e[2 * k]) | ebits(e[2 * k + 1]) << 16;
    return v;
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

/* max over each half-warp (lanes 0-15 and 16-31 apart), every lane of the warp executing it:
 * xor shuffles within 16 lanes, no mask that differs between the halves */
static __device__ __forceinline__ unsigned half_warp_max(unsigned v) {
#pragma unroll
    for (int o = 8; o; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
/* sum over each half-warp in the order of a butterfly (xor 8, 4, 2, 1), likewise */
static __device__ __forceinline__ float half_warp_sum(float v) {
#pragma unroll
    for (int o = 8; o; o >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* The backward with SPLIT: dh's column tile of launch row y (of n), interleaving d_gate's tiles
 * (0 .. ng - 1, ng = ceil(F / 128): those with a column of d_gate) with d_up's (ng .. n - 1):
 * d_gate's tile m, then d_up's tile ng + m, whose operand columns are next to m's. Both read the
 * same gate, up and dy columns; launched one tile row apart (T / 128 blocks), the second read finds
 * them in L2, so that DRAM sees the operands about once. */
static __device__ __forceinline__ int64_t split_tile(int64_t y, int64_t n, int64_t F) {
    const int64_t ng = (F + TILE - 1) / TILE, nu = n - ng, p = ng < nu ? ng : nu;
    if (y < 2 * p) return y & 1 ? ng + (y >> 1) : y >> 1;
    return ng > nu ? y - p : y;
}

/* One element of the quantised operand (column col of y or dh) from the operands, loaded one by
 * one: the path of lanes outside the vector path. The backward's gradients whole (*is_up: col is
 * d_up's) and the element's value. */
template <typename E, int BWD>
static __device__ __forceinline__ glu_grads element_grads(const fp8_args &a, int64_t t, int64_t col,
                                                          float w, int *is_up) {
    const E *gate = (const E *)a.gate, *up = (const E *)a.up;
    int64_t j = col;
    *is_up = 0;
    if (BWD) {
        if (a.step == 2)
            *is_up = (int)(col & 1), j = col >> 1;
        else if (col >= a.F)
            *is_up = 1, j = col - a.F;
    }
    const float g = to_f32(gate[t * a.g_rs + j * a.step]), u = to_f32(up[t * a.u_rs + j * a.step]);
    float bg = -0.0f, bu = -0.0f; /* no bias: -0, as the general path adds it */
    if (a.bias) {
        bg = to_f32(((const E *)a.bias)[j * a.step]);
        bu = to_f32(((const E *)a.bias)[j * a.step + a.bias_up]);
    }
    glu_grads gr;
    if (!BWD) {
        gr.y = glu_forward<MM_ANY, 1, 1>(a.m, g, u, bg, bu, w);
        return gr;
    }
    return glu_backward<MM_ANY, 1, 1>(a.m, g, u, bg, bu, w,
                                      to_f32(((const E *)a.dy)[t * a.dy_rs + j]));
}
template <typename E, int BWD>
static __device__ __forceinline__ float element(const fp8_args &a, int64_t t, int64_t col,
                                                float w) {
    int is_up;
    const glu_grads gr = element_grads<E, BWD>(a, t, col, w, &is_up);
    return !BWD ? gr.y : is_up ? gr.du : gr.dg;
}

/* FAST: the common case's kernels (math mode MM_K: plain SwiGLU or quick-GeGLU; no bias, no
 * weights), the multipliers, offset, clamp, bias and weight left out at compile time: the same
 * bits, as those operations are exact no-ops there (x + -0, 1 x). Otherwise the general math.
 * The host picks FAST once per launch (glu_fp8). */
template <typename E, int MODE, int COLWISE, int BWD, int FAST, int RED = 0>
__global__ void __launch_bounds__(THREADS, (geom<E, BWD, RED>::min_blocks))
    glu_fp8_kernel(const fp8_args a) {
    enum { P = geom<E, BWD>::pitch, U = geom<E, BWD>::unroll, MM = FAST ? MM_K : MM_ANY };
    /* RED: the backward's sums, in the kernels that write codes (not MODE_AMAX's first pass) */
    enum { R = RED && BWD && !FAST && MODE != MODE_AMAX };
    extern __shared__ __align__(16) unsigned char smem_raw[];
    E *tile = (E *)smem_raw;                                 /* y [128][P], COLWISE */
    unsigned char *ct = smem_raw + geom<E, BWD>::tile_bytes; /* codes [128][CT_PITCH] */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, half = lane >> 4, l16 = lane & 15;
    const int64_t by = BWD && a.step == 1 ? split_tile(blockIdx.y, gridDim.y, a.F) : blockIdx.y;
    const int64_t t0 = (int64_t)blockIdx.x * TILE, j0 = by * TILE;
    const int nt = (int)min((int64_t)TILE, a.T - t0), nj = (int)min((int64_t)TILE, a.W - j0);
    const E *gate = (const E *)a.gate, *up = (const E *)a.up, *dy = (const E *)a.dy;
    float ts = 0.0f;
    if (MODE == MODE_TENSOR) {
        ts = fastglu_fp8_scale(*(volatile unsigned *)a.amax, a.pow2);
        if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) a.s[0] = ts;
    }
    const fp8_divisor td = make_divisor(ts);
    const int c = SPAN * l16;               /* the lane's first column in the tile */
    const int vl = a.vec && c + SPAN <= nj; /* the lane's columns by the vector path */
    /* vector path (SPLIT): the operands' column of the lane's first element; dh: d_up's or not */
    int64_t jv = j0 + c;
    int up_half = 0;
    if (BWD && jv >= a.F) jv -= a.F, up_half = 1;
    /* the backward: the row-wise scale of the thread's first row, the next row's s_step floats
     * on (computed once: the backward's 64 registers leave the per-row address its cost; the
     * forward's 80 do better recomputing it than keeping the pointer live, measured both ways) */
    float *s_row = NULL;
    int64_t s_step = 0;
    if (MODE == MODE_BLOCK && BWD) {
        s_row = scale_at(a.s, a.s_ld, a.mn_major, t0 + 2 * warp + half, by);
        s_step = a.mn_major ? 1 : a.s_ld;
    }
    unsigned tile_max = 0;
    /* R: this thread's dbias sums of its 8 columns over its rows; the tile's dweights partials
     * (a tile with d_gate columns, asked for) */
    float cb[SPAN];
#pragma unroll
    for (int e = 0; e < SPAN; ++e) cb[e] = 0.0f;
    const int rw = R && a.wsw && by < a.nwt;
    const int nsteps = (nt + STEP_ROWS - 1) / STEP_ROWS;
    for (int s0 = 0; s0 < nsteps; s0 += U) {
        /* the loads of U steps, before any of them is used (the stores below could alias the
         * operands as far as the compiler knows: it would not move a load above them) */
        vec8<E> rg[U], ru[U], rd[U];
#pragma unroll
        for (int q = 0; q < U; ++q) {
            const int r = (s0 + q) * STEP_ROWS + 2 * warp + half;
            if (vl && r < nt) {
                const int64_t t = t0 + r;
                ld8(rg[q], gate + t * a.g_rs + jv);
                ld8(ru[q], up + t * a.u_rs + jv);
                if (BWD) ld8(rd[q], dy + t * a.dy_rs + jv);
            }
        }
#pragma unroll
        for (int q = 0; q < U; ++q) {
            if (s0 + q >= nsteps) break; /* uniform across the block */
            const int r = (s0 + q) * STEP_ROWS + 2 * warp + half;
            const int valid = r < nt; /* uniform across the half-warp */
            const int64_t t = t0 + r;
            E ye[SPAN];
            unsigned am = 0;
            float dwp = 0.0f; /* R: the lane's dweights sum over its d_gate columns of this row */
            if (valid) {
                const float w = !FAST && a.weights
                                    ? load_token_weight(a.weights, a.w_dtype, t * a.w_stride)
                                    : 1.0f;
                if (vl) {
#pragma unroll
                    for (int e = 0; e < SPAN; ++e) {
                        float bg = -0.0f, bu = -0.0f; /* no bias: -0, as the general path's */
                        if (!FAST && a.bias) {
                            bg = to_f32(((const E *)a.bias)[jv + e]);
                            bu = to_f32(((const E *)a.bias)[jv + e + a.bias_up]);
                        }
                        float v;
                        if (BWD) {
                            const glu_grads gr = glu_backward<MM, !FAST, !FAST>(
                                a.m, vget(rg[q], e), vget(ru[q], e), bg, bu, w, vget(rd[q], e));
                            v = up_half ? gr.du : gr.dg;
                            if (R) {
                                cb[e] = __fadd_rn(cb[e], up_half ? gr.dbu : gr.dbg);
                                if (!up_half) dwp = __fadd_rn(dwp, gr.dw);
                            }
                        } else {
                            v = glu_forward<MM, !FAST, !FAST>(a.m, vget(rg[q], e), vget(ru[q], e),
                                                              bg, bu, w);
                        }
                        from_f32(&ye[e], v);
                        am = max(am, fastglu_abs_bits(to_f32(ye[e])));
                    }
                    const vec8<E> yv = pack8(ye);
                    if (MODE != MODE_TENSOR && a.y) st8((E *)a.y + t * a.y_rs + j0 + c, yv);
                    if (COLWISE) st8_shared(tile + r * P + c, yv);
                } else {
                    /* element by element, a loop (cold: ragged lanes, unaligned operands); the
                     * codes below compute each element again (the same bits) */
#pragma unroll 1
                    for (int e = 0; e < SPAN && c + e < nj; ++e) {
                        E ve;
                        if (R) {
                            int is_up;
                            const glu_grads gr = element_grads<E, BWD>(a, t, j0 + c + e, w, &is_up);
                            from_f32(&ve, is_up ? gr.du : gr.dg);
                            const float db = is_up ? gr.dbu : gr.dbg;
#pragma unroll
                            for (int k = 0; k < SPAN; ++k) /* cb[e] kept in registers */
                                if (k == e) cb[k] = __fadd_rn(cb[k], db);
                            if (!is_up) dwp = __fadd_rn(dwp, gr.dw);
                        } else {
                            from_f32(&ve, element<E, BWD>(a, t, j0 + c + e, w));
                        }
                        am = max(am, fastglu_abs_bits(to_f32(ve)));
                        if (MODE != MODE_TENSOR && a.y) ((E *)a.y)[t * a.y_rs + j0 + c + e] = ve;
                        if (COLWISE) tile[r * P + c + e] = ve;
                    }
                }
            }
            if (MODE == MODE_AMAX) {
                tile_max = max(tile_max, am);
                continue;
            }
            if (rw) { /* every lane takes the shuffles; the row's partial from its lane 0 */
                const float sw = half_warp_sum(dwp);
                if (valid && l16 == 0) a.wsw[by * a.T + t] = sw;
            }
            fp8_divisor d = td;
            if (MODE == MODE_BLOCK) {
                const float s = fastglu_fp8_scale(half_warp_max(am), a.pow2);
                if (valid && l16 == 0) {
                    if (BWD)
                        s_row[(int64_t)((s0 + q) * STEP_ROWS) * s_step] = s;
                    else
                        *scale_at(a.s, a.s_ld, a.mn_major, t, by) = s;
                }
                d = make_divisor(s);
            }
            if (!valid) continue;
            unsigned char *drow = a.d + t * a.d_rs + j0 + c;
            if (vl) {
                unsigned w[2];
#pragma unroll
                for (int k = 0; k < 2; ++k)
                    w[k] = quantise2(d, to_f32(ye[4 * k]), to_f32(ye[4 * k + 1])) |
                           quantise2(d, to_f32(ye[4 * k + 2]), to_f32(ye[4 * k + 3])) << 16;
                *(uint2 *)drow = make_uint2(w[0], w[1]);
            } else {
                const float w =
                    a.weights ? load_token_weight(a.weights, a.w_dtype, t * a.w_stride) : 1.0f;
#pragma unroll 1
                for (int e = 0; e < SPAN && c + e < nj; ++e) {
                    E ve;
                    from_f32(&ve, element<E, BWD>(a, t, j0 + c + e, w));
                    drow[e] = fastglu_fp8_quantise(to_f32(ve), d.s);
                }
            }
        }
    }
    if (MODE == MODE_AMAX) {
        tile_max = half_warp_max(tile_max);
        tile_max = max(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 16));
        if (lane == 0) atomicMax(a.amax, tile_max);
        return;
    }
    if (R && a.wsb) { /* uniform: the tile's dbias partials, the 8 warps' sums added in order */
        float *red =
            (float *)(smem_raw + (COLWISE ? geom<E, BWD>::tile_bytes + TILE * CT_PITCH : 0));
#pragma unroll
        for (int e = 0; e < SPAN; ++e)
            cb[e] = __fadd_rn(cb[e], __shfl_xor_sync(0xffffffffu, cb[e], 16));
        if (half == 0)
#pragma unroll
            for (int e = 0; e < SPAN; ++e) red[warp * TILE + c + e] = cb[e];
        __syncthreads();
        if (threadIdx.x < nj) {
            float sb = red[threadIdx.x];
#pragma unroll
            for (int w = 1; w < WARPS; ++w) sb = __fadd_rn(sb, red[w * TILE + threadIdx.x]);
            a.wsb[(int64_t)blockIdx.x * a.W + j0 + threadIdx.x] = sb;
        }
    }
    if (!COLWISE) return;
    __syncthreads();
    /* a half-warp per column, 8 columns each: columns 2 (fp32: 1) apart in the two half-warps of a
     * warp, so that their reads fall in different banks */
#pragma unroll 1
    for (int p = 0; p < 8; ++p) {
        const int cl =
            16 * warp + (sizeof(E) == 4 ? 2 * p + half : (p & 1) + 4 * (p >> 1) + 2 * half);
        const int live = cl < nj; /* uniform across the half-warp; both take the shuffles */
        float v[8];
        unsigned am = 0;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const int r = l16 + 16 * i;
            v[i] = 0.0f;
            if (live && r < nt)
                v[i] = to_f32(tile[r * P + cl]), am = max(am, fastglu_abs_bits(v[i]));
        }
        fp8_divisor d = td;
        if (MODE == MODE_BLOCK) {
            const float s = fastglu_fp8_scale(half_warp_max(am), a.pow2);
            if (live && l16 == 0) *scale_at(a.st, a.st_ld, a.mn_major, j0 + cl, blockIdx.x) = s;
            d = make_divisor(s);
        }
        if (!live) continue;
#pragma unroll
        for (int i = 0; i < 8; i += 2) {
            const unsigned q = quantise2(d, v[i], v[i + 1]);
            unsigned char *dst = ct + cl * CT_PITCH + l16 + 16 * i;
            if (l16 + 16 * i < nt) dst[0] = (unsigned char)q;
            if (l16 + 16 * (i + 1) < nt) dst[16] = (unsigned char)(q >> 8);
        }
    }
    __syncthreads();
    /* y_t's rows j0 .. j0 + nj - 1, tokens t0 .. t0 + nt - 1: 16 bytes a thread */
    for (int i = threadIdx.x; i < nj * (TILE / 16); i += THREADS) {
        const int cl = i / (TILE / 16), r0 = 16 * (i % (TILE / 16));
        if (r0 >= nt) continue;
        unsigned char *dst = a.dt + (j0 + cl) * a.dt_rs + t0 + r0;
        const unsigned char *src = ct + cl * CT_PITCH + r0;
        if (a.vec_t && r0 + 16 <= nt) {
            *(uint4 *)dst = *(const uint4 *)src;
        } else {
            for (int b = 0; b < 16 && r0 + b < nt; ++b) dst[b] = src[b];
        }
    }
}

/* The backward's sums from the tiles' partials (fp8_args.wsb / wsw), in a fixed order: a block
 * takes 32 consecutive outputs (one per lane) of dbias (blocks [0, nb_db)) or dweights (the next
 * nb_dw); warp g sums the partials q = g, g + 8, ... in order from +0, then warp 0 adds the 8
 * warps' sums in order from +0: fastglu_reduce_partials' order (glu_cuda.cu's glu_reduce_kernel's),
 * whatever the grid. */
typedef struct fp8_red_args {
    const float *wsb, *wsw;
    void *dbias, *dweights;
    int64_t nrt, nwt, T, W; /* the partials per dbias column, per token; the outputs' extents */
    int w_dtype;
} fp8_red_args;

template <typename E>
__global__ void __launch_bounds__(THREADS) fp8_reduce_kernel(const fp8_red_args a) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    float *part = (float *)smem_raw; /* [WARPS][32] */
    const int lane = threadIdx.x & 31, g = threadIdx.x >> 5;
    const int64_t nb_db = a.dbias ? (a.W + 31) / 32 : 0, b = blockIdx.x;
    const int is_db = b < nb_db;
    const float *ws = is_db ? a.wsb : a.wsw;
    const int64_t n = is_db ? a.W : a.T, nq = is_db ? a.nrt : a.nwt;
    const int64_t i = (is_db ? b : b - nb_db) * 32 + lane;
    float sum = 0.0f;
    if (i < n)
        for (int64_t q = g; q < nq; q += WARPS) sum = __fadd_rn(sum, ws[q * n + i]);
    part[g * 32 + lane] = sum;
    __syncthreads();
    if (g != 0 || i >= n) return;
    float r = 0.0f;
#pragma unroll
    for (int k = 0; k < WARPS; ++k) r = __fadd_rn(r, part[k * 32 + lane]);
    if (is_db)
        from_f32(&((E *)a.dbias)[i], r);
    else if (a.w_dtype == FASTGLU_DTYPE_FP32)
        ((float *)a.dweights)[i] = r;
    else if (a.w_dtype == FASTGLU_DTYPE_BF16)
        from_f32(&((__nv_bfloat16 *)a.dweights)[i], r);
    else
        from_f32(&((__half *)a.dweights)[i], r);
}

template <typename E, int MODE, int COLWISE, int BWD, int FAST, int RED>
static cudaError_t launch(const fp8_args &a, cudaStream_t s) {
    const void *kern = (const void *)glu_fp8_kernel<E, MODE, COLWISE, BWD, FAST, RED>;
    const size_t smem = (COLWISE ? geom<E, BWD>::tile_bytes + TILE * CT_PITCH : 0) +
                        (RED && MODE != MODE_AMAX ? RED_BYTES : 0);
    if (smem > 48 * 1024) { /* the column-wise tiles: the opt-in, on the current device */
        const cudaError_t err =
            cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (err != cudaSuccess) return err;
    }
    const dim3 grid((unsigned)((a.T + TILE - 1) / TILE), (unsigned)((a.W + TILE - 1) / TILE));
    void *args[] = {(void *)&a};
    return cudaLaunchKernel(kern, grid, dim3(THREADS), args, smem, s);
}

/* RED: the backward's sums (the MODE_AMAX pass has none: its kernel is RED = 0's), then their
 * reduction */
template <typename E, int BWD, int FAST, int RED>
static cudaError_t run(const fp8_args &a, int tensor, int colwise, cudaStream_t s) {
    cudaError_t err = cudaSuccess;
    if (!tensor) {
        err = colwise ? launch<E, MODE_BLOCK, 1, BWD, FAST, RED>(a, s)
                      : launch<E, MODE_BLOCK, 0, BWD, FAST, RED>(a, s);
    } else {
        err = cudaMemsetAsync(a.amax, 0, sizeof(unsigned), s);
        if (err == cudaSuccess) err = launch<E, MODE_AMAX, 0, BWD, FAST, 0>(a, s);
        if (err == cudaSuccess)
            err = colwise ? launch<E, MODE_TENSOR, 1, BWD, FAST, RED>(a, s)
                          : launch<E, MODE_TENSOR, 0, BWD, FAST, RED>(a, s);
    }
    if (!RED || err != cudaSuccess) return err;
    fp8_red_args r;
    r.wsb = a.wsb, r.wsw = a.wsw, r.dbias = a.dbias, r.dweights = a.dweights;
    r.nrt = (a.T + TILE - 1) / TILE, r.nwt = a.nwt, r.T = a.T, r.W = a.W, r.w_dtype = a.w_dtype;
    const int64_t blocks = (a.dbias ? (a.W + 31) / 32 : 0) + (a.dweights ? (a.T + 31) / 32 : 0);
    void *args[] = {(void *)&r};
    return cudaLaunchKernel((const void *)fp8_reduce_kernel<E>, dim3((unsigned)blocks),
                            dim3(THREADS), args, WARPS * 32 * sizeof(float), s);
}

template <typename E, int BWD>
static cudaError_t run_fast(const fp8_args &a, int fast, int red, int tensor, int colwise,
                            cudaStream_t s) {
    if (fast) return run<E, BWD, 1, 0>(a, tensor, colwise, s);
    /* RED only in the backward (BWD as RED: the forward's red is 0) */
    return red ? run<E, BWD, 0, BWD>(a, tensor, colwise, s)
               : run<E, BWD, 0, 0>(a, tensor, colwise, s);
}

template <int BWD>
static cudaError_t run_dtype(const fp8_args &a, fastglu_dtype dt, int fast, int red, int tensor,
                             int colwise, cudaStream_t s) {
    switch (dt) {
    case FASTGLU_DTYPE_FP32: return run_fast<float, BWD>(a, fast, red, tensor, colwise, s);
    case FASTGLU_DTYPE_FP16: return run_fast<__half, BWD>(a, fast, red, tensor, colwise, s);
    default: return run_fast<__nv_bfloat16, BWD>(a, fast, red, tensor, colwise, s);
    }
}

/* Both entry points: validate, fill the kernel's arguments, launch. dy NULL: the forward. */
static fastglu_status glu_fp8(const char *fn, const fastglu_glu_params *params,
                              const fastglu_fp8_recipe *recipe, const fastglu_tensor *dy,
                              fastglu_tensor gate, fastglu_tensor up, fastglu_tensor bias,
                              fastglu_tensor weights, fastglu_tensor y, const fastglu_tensor *dbias,
                              const fastglu_tensor *dweights, const fastglu_fp8_out *out,
                              int64_t tokens, int64_t F, void *stream) {
    int empty;
    fastglu_status st = fastglu_check_glu_fp8(fn, params, recipe, dy, gate, up, bias, weights, y,
                                              dbias, dweights, out, tokens, F, 1, &empty);
    if (st != FASTGLU_SUCCESS) return st;
    cudaStream_t s = (cudaStream_t)stream;
    void *db = dbias ? dbias->data : NULL, *dw = dweights ? dweights->data : NULL;
    if (empty) { /* the sums over nothing */
        cudaError_t err = cudaSuccess;
        if (db && F > 0)
            err = cudaMemsetAsync(db, 0, (size_t)(2 * F) * fastglu_dtype_size(gate.dtype), s);
        if (err == cudaSuccess && dw && tokens > 0)
            err = cudaMemsetAsync(dw, 0, (size_t)tokens * fastglu_dtype_size(dweights->dtype), s);
        return launch_status(fn, err);
    }
    const int64_t W = dy ? 2 * F : F;
    if (fastglu_fp8_blocks(W) > 65535 || fastglu_fp8_blocks(tokens) > 0x7fffffff)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: tokens = %lld, ffn_hidden_size = %lld: more 128 x 128 tiles "
                                 "than the CUDA grid holds",
                                 fn, (long long)tokens, (long long)F);
    if ((db ? (W + 31) / 32 : 0) + (dw ? (tokens + 31) / 32 : 0) >
        0x7fffffff) /* the reduction's blocks of 32 outputs */
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: tokens = %lld, ffn_hidden_size = %lld: more outputs of dbias "
                                 "and dweights than the reduction's grid holds",
                                 fn, (long long)tokens, (long long)F);
    const int il = params->layout == FASTGLU_LAYOUT_INTERLEAVED;
    const size_t es = fastglu_dtype_size(gate.dtype);
    fp8_args a;
    a.m = make_math(params, gate.dtype, 0);
    a.gate = gate.data, a.g_rs = gate.row_stride;
    a.up = il ? (const void *)((const char *)gate.data + es) : up.data;
    a.u_rs = il ? gate.row_stride : up.row_stride;
    a.step = il ? 2 : 1, a.bias_up = il ? 1 : F;
    a.bias = bias.data, a.weights = weights.data, a.w_stride = weights.row_stride;
    a.w_dtype = (int)weights.dtype;
    a.dy = dy ? dy->data : NULL, a.dy_rs = dy ? dy->row_stride : 0;
    a.mn_major = recipe->scale_layout == FASTGLU_FP8_SCALES_MN_MAJOR,
    a.pow2 = recipe->pow2_scales != 0;
    a.y = y.data, a.y_rs = y.row_stride;
    a.d = (unsigned char *)out->data.data, a.d_rs = out->data.row_stride;
    a.dt = (unsigned char *)out->data_t.data, a.dt_rs = out->data_t.row_stride;
    a.s = (float *)out->scale.data, a.s_ld = out->scale.row_stride;
    a.st = (float *)out->scale_t.data, a.st_ld = out->scale_t.row_stride;
    a.amax = (unsigned *)out->workspace;
    a.T = tokens, a.F = F, a.W = W;
    a.vec = !il && (!dy || F % 8 == 0) && access_width(gate.data, a.g_rs, tokens, es) == 16 &&
            access_width(a.up, a.u_rs, tokens, es) == 16 &&
            (!dy || access_width(a.dy, a.dy_rs, tokens, es) == 16) &&
            (!a.y || access_width(a.y, a.y_rs, tokens, es) == 16) &&
            access_width_cap(a.d, a.d_rs, tokens, 1, 8) == 8;
    a.vec_t = a.dt && access_width_cap(a.dt, a.dt_rs, W, 1, 16) == 16;
    const fastglu_fp8_bwd_workspace ws =
        fastglu_fp8_bwd_workspace_layout(recipe, tokens, F, db != NULL, dw != NULL);
    a.dbias = db, a.dweights = dw;
    a.wsb = db ? (float *)((char *)out->workspace + ws.db_offset) : NULL;
    a.wsw = dw ? (float *)((char *)out->workspace + ws.dw_offset) : NULL;
    a.nwt = fastglu_fp8_dw_tiles(il, F);
    if (dw) a.w_dtype = (int)dweights->dtype;
    const int tensor = recipe->scaling == FASTGLU_FP8_SCALING_TENSOR, colwise = a.dt != NULL;
    const int fast = math_mode_of(params) == MM_K && !a.bias && !a.weights;
    const int red = db != NULL || dw != NULL;
    const cudaError_t err = dy ? run_dtype<1>(a, gate.dtype, fast, red, tensor, colwise, s)
                               : run_dtype<0>(a, gate.dtype, fast, 0, tensor, colwise, s);
    return launch_status(fn, err);
}

extern "C" fastglu_status fastglu_glu_fwd_fp8_cuda(const fastglu_glu_params *params,
                                                   const fastglu_fp8_recipe *recipe,
                                                   fastglu_tensor gate, fastglu_tensor up,
                                                   fastglu_tensor bias, fastglu_tensor weights,
                                                   fastglu_tensor y, const fastglu_fp8_out *out,
                                                   int64_t tokens, int64_t F, void *stream) {
    return glu_fp8("fastglu_glu_fwd_fp8_cuda", params, recipe, NULL, gate, up, bias, weights, y,
                   NULL, NULL, out, tokens, F, stream);
}

extern "C" fastglu_status
fastglu_glu_bwd_fp8_cuda(const fastglu_glu_params *params, const fastglu_fp8_recipe *recipe,
                         fastglu_tensor dy, fastglu_tensor gate, fastglu_tensor up,
                         fastglu_tensor bias, fastglu_tensor weights, fastglu_tensor dh,
                         fastglu_tensor dbias, fastglu_tensor dweights, const fastglu_fp8_out *out,
                         int64_t tokens, int64_t F, void *stream) {
    return glu_fp8("fastglu_glu_bwd_fp8_cuda", params, recipe, &dy, gate, up, bias, weights, dh,
                   &dbias, &dweights, out, tokens, F, stream);
}
