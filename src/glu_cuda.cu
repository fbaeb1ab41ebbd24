/*
 * glu_cuda.cu — the gated-linear-unit family on the GPU (fastglu_glu_fwd_cuda, fastglu_glu_bwd_cuda),
 * written as C. Math, layouts and dtypes: include/fastglu.h ("The gated-linear-unit family"; sources:
 * Megatron-Core fused_bias_swiglu.py / fused_bias_geglu.py, Liger-Kernel's SwiGLU multipliers).
 *
 * Plain SwiGLU (SiLU without bias, weights, clamp, offset, multipliers or fp8; SPLIT; no
 * reductions) runs the kernels of glu_swiglu.cuh (128 threads, one 16-byte chunk per thread, an
 * aligned forward on 32-bit indices, a flat forward for F % 8 != 0: bench/PERF_NOTES.md). Every
 * other case runs three kernels:
 *   glu_fwd_kernel   forward; flat: each thread takes chunks of E = 16 / sizeof(T) output columns of
 *                    one row (tokens * ceil(F / E) chunks numbered row by row, as glu_swiglu.cuh).
 *   glu_bwd_kernel   backward without dbias; flat, like the forward. dweights alone only where a
 *                    warp's chunks are one column tile of one row (see the kernel); else the tile kernel.
 *   glu_bwd_tile_kernel + glu_reduce_kernel
 *                    backward with dbias and/or dweights. A block of 4 warps takes a tile of
 *                    FASTGLU_SLAB_ROWS (64) rows x FASTGLU_TILE_COLS (256) columns: lane l of warp w
 *                    owns columns 8l .. 8l + 7 of the tile and rows w, w + 4, ..., w + 60 of the slab,
 *                    4 of them in flight at a time (2 for fp32).
 *                    Fixed summation order, whatever the grid:
 *                      dweights: per row, each lane sums its 8 columns in order into shared
 *                      memory; at the tile's end two threads a row add its 32 lanes in the order
 *                      of a butterfly (xor 16, 8, 4, 2, 1); the tile's value goes to
 *                      workspace[tile_col][row] (one coalesced store for 64 rows).
 *                      dbias: each lane sums its rows in order (w, w + 4, ...) in registers, the
 *                      block adds the 4 warps in order through shared memory; the slab's value goes
 *                      to workspace[slab][column].
 *                      glu_reduce_kernel: each of 8 warps adds every 8th partial (tiles or slabs)
 *                      in order, then the 8 warps' sums are added in order. It is launched as the
 *                      writing kernel's programmatic dependent; the partials are stored evict-last
 *                      (they stay in the L2 until it reads them) and it discards their lines once
 *                      read (never written back to DRAM).
 *                    So results are bitwise identical run to run and for any grid size.
 *
 * Each kernel comes in a general form (below) and, for the common cases where every access can be
 * full-width, specialised forms chosen by the launchers ("the specialised path"): specialised on
 * the case (bias, weights, the fp8 copy, the gradients asked for) and on the math mode (which
 * parameters are read at run time: math_mode); both give the same bits.
 *
 * Operands are read with the widest access their alignment allows (16 bytes down to one element),
 * uniform over a launch; chunks that run past F are done element by element. Loads are plain
 * (ld.global, no read-only path) so that the in-place backward, which writes the memory it reads,
 * is correct: each thread reads a chunk of gate/up before it writes that chunk's gradient, and no
 * element is read by another thread. All offsets are int64.
 */
#include <cuda_fp8.h>
#include <string.h>

#include "cuda_common.cuh"
#include "fp8.h"
#include "glu_math.cuh"

#define GLU_THREADS 256 /* flat kernels and the reduction: threads per block */
#define TILE_WARPS 4    /* the tile kernel: warps per block */
#define LANE_COLS 8 /* columns per lane in the tile kernel: FASTGLU_TILE_COLS = 32 * LANE_COLS */
/* rows a warp of the tile kernel has in flight: 4 (16-bit types, 128 registers), 2 for fp32 (whose
 * lane columns take twice the registers) */
#define TILE_ROWS(T) (sizeof(T) == 4 ? 2 : 4)
#if FASTGLU_TILE_COLS != 32 * LANE_COLS || FASTGLU_SLAB_ROWS % (4 * TILE_WARPS) != 0
#error "tile shape mismatch with internal.h"
#endif

/* Programmatic dependent launch (sm_90): a kernel that writes partials lets its dependent (the
 * reduction, launched with cudaLaunchAttributeProgrammaticStreamSerialization) be scheduled once
 * every one of its blocks has started; the dependent's grid_dependency_wait returns when the whole
 * writing grid has finished and its stores are visible. Either is a no-op for a normal launch. */
static __device__ __forceinline__ void grid_dependents_may_launch(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
static __device__ __forceinline__ void grid_dependency_wait(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* The reductions' partials (8 MB at the seed shape) are written with an L2 evict-last policy where
 * they take at most half the L2 (ws_keep), so that they are still in the L2 cache when the
 * reduction reads them after the tile kernel's streaming traffic; the reduction then discards each
 * 128-byte line it has consumed whole: the line is dropped from the L2 without being written back,
 * so the partials need not reach DRAM at all (the workspace's contents are undefined on return, as
 * fastglu.h says). */
static __device__ __forceinline__ uint64_t l2_evict_last_policy(void) {
    uint64_t pol = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
#endif
    return pol;
}
static __device__ __forceinline__ void store_partial(float *p, float v, uint64_t pol, int keep) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if (keep) {
        asm volatile("st.global.L2::cache_hint.f32 [%0], %1, %2;" ::"l"(p), "f"(v), "l"(pol)
                     : "memory");
        return;
    }
#endif
    *p = v;
}
static __device__ __forceinline__ void discard_line(const float *p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("discard.global.L2 [%0], 128;" ::"l"(p) : "memory");
#endif
}

/* fastglu_debug_set_max_blocks: 0 = no cap (tests show results do not depend on it). */
static int64_t debug_max_blocks = 0;
extern "C" void fastglu_debug_set_max_blocks(int64_t max_blocks) {
    debug_max_blocks = max_blocks > 0 ? max_blocks : 0;
}
static unsigned grid_size(uint64_t blocks) {
    uint64_t cap = 2147483647ull;
    if (debug_max_blocks > 0 && (uint64_t)debug_max_blocks < cap) cap = (uint64_t)debug_max_blocks;
    return (unsigned)(blocks < cap ? (blocks ? blocks : 1) : cap);
}

/* The kernels for plain SwiGLU, the family's most common case (swiglu_fwd_case / _bwd_case). */
#include "glu_swiglu.cuh"

extern "C" int fastglu_cuda_built(void) { return 1; }

extern "C" int fastglu_cuda_available(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no device" so it does not leak into a later call */
        return 0;
    }
    return n > 0;
}

/* ---- element types ---------------------------------------------------------------------------- */

typedef struct fp8e4m3 { /* storage of torch.float8_e4m3fn */
    unsigned char bits;
} fp8e4m3;

static __device__ __forceinline__ float to_f32(fp8e4m3 x) { /* exact */
    return __half2float(__half(__nv_cvt_fp8_to_halfraw(x.bits, __NV_E4M3)));
}

/* weights / dweights: a runtime dtype (load_token_weight, glu_math.cuh). The weight through the
 * read-only path, the 16-bit types decoded without a second branch: the
 * specialised forward's weight, read after the operands' loads (fwd_chunk_fast): the operands'
 * loads are then in flight before the weight's, which the weighted forward measured as no slower
 * and for quick-GeGLU with bias, weights and clamp slightly faster (bench/PERF_NOTES.md, the
 * variant tile kernel). */
static __device__ __forceinline__ float load_weight_nc(const void *w, int dtype, int64_t i) {
    if (dtype == FASTGLU_DTYPE_FP32) return __ldg((const float *)w + i);
    const unsigned short b = __ldg((const unsigned short *)w + i);
    return dtype == FASTGLU_DTYPE_BF16 ? __uint_as_float((unsigned)b << 16)
                                       : __half2float(__ushort_as_half(b));
}
static __device__ __forceinline__ void store_weight(void *w, int dtype, int64_t i, float v) {
    if (dtype == FASTGLU_DTYPE_FP32)
        ((float *)w)[i] = v;
    else if (dtype == FASTGLU_DTYPE_BF16)
        from_f32(&((__nv_bfloat16 *)w)[i], v);
    else
        from_f32(&((__half *)w)[i], v);
}

/* ---- NB contiguous bytes moved with accesses of `width` bytes (width | NB, address aligned) ---- */

template <int NB> struct raw_bytes { /* NB >= 4, a multiple of 4 */
    uint32_t w[NB / 4];
};

/* NC: 16-, 8- and 4-byte accesses through the read-only path (the forward, which reads nothing it
 * writes). With width 16 known at compile time (the specialised path) only the NB-sized accesses
 * remain: 16-byte ones, or a single 8- or 4-byte one when NB is that small. */
template <int NB, int NC = 0>
static __device__ __forceinline__ raw_bytes<NB> load_raw(const void *p, int width) {
    raw_bytes<NB> r;
    if (width >= 16 && NB % 16 == 0) {
#pragma unroll
        for (int i = 0; i < NB / 16; ++i) {
            const uint4 v = NC ? __ldg((const uint4 *)p + i) : ((const uint4 *)p)[i];
            r.w[4 * i] = v.x, r.w[4 * i + 1] = v.y, r.w[4 * i + 2] = v.z, r.w[4 * i + 3] = v.w;
        }
    } else if (width >= 8 && NB % 8 == 0) {
#pragma unroll
        for (int i = 0; i < NB / 8; ++i) {
            const uint2 v = NC ? __ldg((const uint2 *)p + i) : ((const uint2 *)p)[i];
            r.w[2 * i] = v.x, r.w[2 * i + 1] = v.y;
        }
    } else if (width >= 4) {
#pragma unroll
        for (int i = 0; i < NB / 4; ++i)
            r.w[i] = NC ? __ldg((const unsigned *)p + i) : ((const uint32_t *)p)[i];
    } else if (width == 2) {
#pragma unroll
        for (int i = 0; i < NB / 4; ++i)
            r.w[i] = ((const uint16_t *)p)[2 * i] | (uint32_t)((const uint16_t *)p)[2 * i + 1]
                                                        << 16;
    } else {
        const unsigned char *b = (const unsigned char *)p;
#pragma unroll
        for (int i = 0; i < NB / 4; ++i)
            r.w[i] = b[4 * i] | (uint32_t)b[4 * i + 1] << 8 | (uint32_t)b[4 * i + 2] << 16 |
                     (uint32_t)b[4 * i + 3] << 24;
    }
    return r;
}

/* 16- and 8-byte stores as one vector st.global each (inline PTX): a plain uint4 assignment came
 * out as four 32-bit stores in the tile kernel, and __stwb as a strong (.STRONG.SM) store. */
static __device__ __forceinline__ void st_v4(void *p, uint32_t a, uint32_t b, uint32_t c,
                                             uint32_t d) {
#ifndef FASTGLU_HOST_EMULATION
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "r"(a), "r"(b), "r"(c),
                 "r"(d));
#else /* tests/emu compiles these kernels as host C++: the shim's checked store there */
    emu_st_plain((uint4 *)p, make_uint4(a, b, c, d));
#endif
}
static __device__ __forceinline__ void st_v2(void *p, uint32_t a, uint32_t b) {
#ifndef FASTGLU_HOST_EMULATION
    asm volatile("st.global.v2.u32 [%0], {%1, %2};\n" ::"l"(p), "r"(a), "r"(b));
#else
    emu_st_plain((uint2 *)p, make_uint2(a, b));
#endif
}
template <int NB>
static __device__ __forceinline__ void store_raw(void *p, const raw_bytes<NB> &r, int width) {
    if (width >= 16 && NB % 16 == 0) {
#pragma unroll
        for (int i = 0; i < NB / 16; ++i)
            st_v4((uint4 *)p + i, r.w[4 * i], r.w[4 * i + 1], r.w[4 * i + 2], r.w[4 * i + 3]);
    } else if (width >= 8 && NB % 8 == 0) {
#pragma unroll
        for (int i = 0; i < NB / 8; ++i) st_v2((uint2 *)p + i, r.w[2 * i], r.w[2 * i + 1]);
    } else if (width >= 4) {
#pragma unroll
        for (int i = 0; i < NB / 4; ++i) ((uint32_t *)p)[i] = r.w[i];
    } else if (width == 2) {
#pragma unroll
        for (int i = 0; i < NB / 4; ++i) {
            ((uint16_t *)p)[2 * i] = (uint16_t)r.w[i];
            ((uint16_t *)p)[2 * i + 1] = (uint16_t)(r.w[i] >> 16);
        }
    } else { /* 1: the fp8 copy of an operand at an odd offset */
#pragma unroll
        for (int i = 0; i < NB; ++i)
            ((unsigned char *)p)[i] = (unsigned char)(r.w[i / 4] >> (8 * (i % 4)));
    }
}

/* N elements of S at p, as floats. */
template <typename S, int N>
static __device__ __forceinline__ void load_elems(const S *p, int width, float (&out)[N]) {
    raw_bytes<N *(int)sizeof(S)> r = load_raw<N *(int)sizeof(S)>(p, width);
    S v[N];
    memcpy(v, &r, sizeof v);
#pragma unroll
    for (int k = 0; k < N; ++k) out[k] = to_f32(v[k]);
}

template <typename T, int N>
static __device__ __forceinline__ void store_elems(T *p, int width, const float (&in)[N]) {
    T v[N];
#pragma unroll
    for (int k = 0; k < N; ++k) from_f32(&v[k], in[k]);
    raw_bytes<N *(int)sizeof(T)> r;
    memcpy(&r, v, sizeof v);
    store_raw<N *(int)sizeof(T)>(p, r, width);
}

/* The math (glu_math, the activation, the clamp, one element forward and backward): glu_math.cuh. */

/* ---- launch arguments ------------------------------------------------------------------------ */

/* enum dy_mode (DY_CHUNK, DY_SCALAR, DY_STRIDED): glu_swiglu.cuh */

typedef struct glu_args {
    glu_math m;
    const void *gate, *up; /* up: SPLIT only */
    int64_t gate_rs, up_rs;
    const float *scale_inv; /* fp8 input only, or NULL */
    int64_t scale_stride;
    int scale_1x128;  /* scale_inv per 1 x 128 block (operand_scales) */
    const void *bias; /* [2F] or NULL */
    const void *weights;
    int64_t w_stride;
    int w_dtype;
    const void *dy;
    int64_t dy_rs, dy_cs;
    int dy_mode;
    void *out, *out2; /* forward: output; backward: d_gate, d_up (SPLIT) */
    int64_t out_rs, out2_rs;
    void *dweights;
    unsigned char *fp8; /* forward: the fp8 copy of the operands [tokens, 2F], or NULL */
    int64_t fp8_rs;
    float *ws_dbias, *ws_dw; /* workspace partials (tile kernel) */
    int ws_keep; /* 1: store the partials evict-last (they fit in the L2; see store_partial) */
    int64_t tokens, F;
    uint64_t chunks;
    fastdiv nvec;
    /* access widths in bytes */
    int w_gate, w_up, w_out, w_out2, w_dy, w_bias_g, w_bias_u, w_fp8_g, w_fp8_u;
} glu_args;

/* The fp8 copy of N operand columns from j0 (forward, fp8_input_store): gate and up before bias
 * (with a clamp, fp8_operand's values), in the operands' layout: SPLIT [gate F | up F],
 * INTERLEAVED pairs. */
template <int IL, int N>
static __device__ __forceinline__ void store_fp8(const glu_args &a, int64_t t, int64_t j0,
                                                 const float (&g)[N], const float (&u)[N]) {
    unsigned char *row = a.fp8 + t * a.fp8_rs;
    unsigned char b[2 * N];
#pragma unroll
    for (int k = 0; k < N; ++k) {
        const unsigned char bg =
            fastglu_f32_to_e4m3(fp8_operand<MM_ANY>(a.m, g[k], 0), a.m.fp8_sat);
        const unsigned char bu =
            fastglu_f32_to_e4m3(fp8_operand<MM_ANY>(a.m, u[k], 1), a.m.fp8_sat);
        if (IL)
            b[2 * k] = bg, b[2 * k + 1] = bu;
        else
            b[k] = bg, b[N + k] = bu;
    }
    if (IL) {
        raw_bytes<2 * N> r;
        memcpy(&r, b, sizeof b);
        store_raw<2 * N>(row + 2 * j0, r, a.w_fp8_g);
    } else {
        raw_bytes<N> rg, ru;
        memcpy(&rg, b, N);
        memcpy(&ru, b + N, N);
        store_raw<N>(row + j0, rg, a.w_fp8_g);
        store_raw<N>(row + a.F + j0, ru, a.w_fp8_u);
    }
}

/* ---- per-chunk loads shared by the kernels ---------------------------------------------------- */

/* The decoding scales of gate and up columns j0 .. j0 + N - 1 of row t (a.scale_inv given): the
 * row's one value, or with 1 x 128 blocks each operand's block of j0 (the columns a chunk of the
 * kernels holds lie in one block: N divides 64 and j0 is a multiple of N). */
template <int IL>
static __device__ __forceinline__ void operand_scales(const glu_args &a, int64_t t, int64_t j0,
                                                      float *sg, float *su) {
    const float *row = a.scale_inv + t * a.scale_stride;
    *sg = row[a.scale_1x128 ? glu_scale_block(IL, a.F, j0, 0) : 0];
    *su = IL || !a.scale_1x128 ? *sg : row[glu_scale_block(IL, a.F, j0, 1)];
}

/* N consecutive columns j0 .. j0 + N - 1 of row t (all < F): gate, up (decoded, times scale_inv)
 * and their bias. IL: interleaved layout. TIN: the stored operand type (T or fp8e4m3). */
template <typename TIN, int IL, int N>
static __device__ __forceinline__ void load_operands(const glu_args &a, int64_t t, int64_t j0,
                                                     float (&g)[N], float (&u)[N]) {
    const TIN *row = (const TIN *)a.gate + t * a.gate_rs;
    if (IL) {
        float x[2 * N];
        load_elems<TIN, 2 * N>(row + 2 * j0, a.w_gate, x);
#pragma unroll
        for (int k = 0; k < N; ++k) g[k] = x[2 * k], u[k] = x[2 * k + 1];
    } else {
        load_elems<TIN, N>(row + j0, a.w_gate, g);
        load_elems<TIN, N>((const TIN *)a.up + t * a.up_rs + j0, a.w_up, u);
    }
    if (a.scale_inv) {
        static_assert(64 % N == 0, "a chunk's columns lie in one 1 x 128 block");
        float sg, su;
        operand_scales<IL>(a, t, j0, &sg, &su);
#pragma unroll
        for (int k = 0; k < N; ++k) g[k] = __fmul_rn(g[k], sg), u[k] = __fmul_rn(u[k], su);
    }
}

template <typename T, int IL, int N>
static __device__ __forceinline__ void load_bias(const glu_args &a, int64_t j0, float (&bg)[N],
                                                 float (&bu)[N]) {
    if (!a.bias) {
#pragma unroll
        for (int k = 0; k < N; ++k)
            bg[k] = bu[k] = -0.0f; /* adding it changes nothing, -0 included */
        return;
    }
    const T *b = (const T *)a.bias;
    if (IL) {
        float x[2 * N];
        load_elems<T, 2 * N>(b + 2 * j0, a.w_bias_g, x);
#pragma unroll
        for (int k = 0; k < N; ++k) bg[k] = x[2 * k], bu[k] = x[2 * k + 1];
    } else {
        load_elems<T, N>(b + j0, a.w_bias_g, bg);
        load_elems<T, N>(b + a.F + j0, a.w_bias_u, bu);
    }
}

template <typename T, int N>
static __device__ __forceinline__ void load_dy(const glu_args &a, int64_t t, int64_t j0,
                                               float (&d)[N]) {
    const T *p = (const T *)a.dy + t * a.dy_rs + j0 * a.dy_cs;
    if (a.dy_mode == DY_CHUNK) {
        load_elems<T, N>(p, a.w_dy, d);
    } else {
#pragma unroll
        for (int k = 0; k < N; ++k) d[k] = to_f32(p[a.dy_mode == DY_SCALAR ? 0 : k * a.dy_cs]);
    }
}

/* Element-wise versions for the columns of a chunk that runs past F. */
template <typename TIN, int IL>
static __device__ __forceinline__ void load_operand1(const glu_args &a, int64_t t, int64_t j,
                                                     float *g, float *u) {
    const TIN *row = (const TIN *)a.gate + t * a.gate_rs;
    *g = to_f32(IL ? row[2 * j] : row[j]);
    *u = to_f32(IL ? row[2 * j + 1] : ((const TIN *)a.up)[t * a.up_rs + j]);
    if (a.scale_inv) {
        float sg, su;
        operand_scales<IL>(a, t, j, &sg, &su);
        *g = __fmul_rn(*g, sg), *u = __fmul_rn(*u, su);
    }
}
template <typename T, int IL>
static __device__ __forceinline__ void load_bias1(const glu_args &a, int64_t j, float *bg,
                                                  float *bu) {
    const T *b = (const T *)a.bias;
    *bg = b ? to_f32(IL ? b[2 * j] : b[j]) : -0.0f;
    *bu = b ? to_f32(IL ? b[2 * j + 1] : b[a.F + j]) : -0.0f;
}

/* d_gate / d_up of N columns from j0 (all < F). */
template <typename T, int IL, int N>
static __device__ __forceinline__ void store_grads(const glu_args &a, int64_t t, int64_t j0,
                                                   const float (&dg)[N], const float (&du)[N]) {
    T *row = (T *)a.out + t * a.out_rs;
    if (IL) {
        float x[2 * N];
#pragma unroll
        for (int k = 0; k < N; ++k) x[2 * k] = dg[k], x[2 * k + 1] = du[k];
        store_elems<T, 2 * N>(row + 2 * j0, a.w_out, x);
    } else {
        store_elems<T, N>(row + j0, a.w_out, dg);
        store_elems<T, N>((T *)a.out2 + t * a.out2_rs + j0, a.w_out2, du);
    }
}
template <typename T, int IL>
static __device__ __forceinline__ void store_grad1(const glu_args &a, int64_t t, int64_t j,
                                                   float dg, float du) {
    T *row = (T *)a.out + t * a.out_rs;
    if (IL) {
        from_f32(&row[2 * j], dg), from_f32(&row[2 * j + 1], du);
    } else {
        from_f32(&row[j], dg), from_f32(&((T *)a.out2)[t * a.out2_rs + j], du);
    }
}

/* ---- the specialised path: full-width accesses and the case's features known at compile time ---
 *
 * Taken where every chunk of every operand moves with full-width accesses (F a multiple of the
 * chunk, base addresses and row strides aligned: chunks_full_width) and the case is a common one (bias or
 * weights or neither; the fp8 copy or not). Each kernel then holds only the registers its case
 * needs: the elements are converted straight from the loaded words and packed straight into the
 * stored ones. Results are bitwise those of the general path (same per-element math, same
 * summation order; test_glu_cuda checks both against each other). */

enum glu_features {
    FL_FAST = 1, /* the specialised path; without it every feature below is read at run time */
    FL_BIAS = 2, /* bias given */
    FL_W = 4,    /* weights given */
    FL_FP8 = 8,  /* forward: writes the fp8 copy */
    FL_DB = 16,  /* backward: dbias */
    FL_DW = 32   /* backward: dweights */
};
/* The math mode (MM_*) in bits 6-7 of the feature set; 0 (MM_ANY) for the general kernels. */
#define FL_MM(mm) ((mm) << 6)
#define MM_OF(FL) (((FL) >> 6) & 3)

/* Full-width accesses: load_raw / store_raw with width FULL (a compile-time constant). */
#define FULL 16

/* Element k of the words, as a float (the pointer argument only selects the type). */
template <int NB>
static __device__ __forceinline__ float elem(const raw_bytes<NB> &r, int k, const float *) {
    return __uint_as_float(r.w[k]);
}
template <int NB>
static __device__ __forceinline__ float elem(const raw_bytes<NB> &r, int k, const __nv_bfloat16 *) {
    const uint32_t w = r.w[k >> 1];
    return __uint_as_float((k & 1) ? (w & 0xffff0000u) : (w << 16));
}
template <int NB>
static __device__ __forceinline__ float elem(const raw_bytes<NB> &r, int k, const __half *) {
    return __half2float(__ushort_as_half((unsigned short)(r.w[k >> 1] >> (16 * (k & 1)))));
}
template <int NB>
static __device__ __forceinline__ float elem(const raw_bytes<NB> &r, int k, const fp8e4m3 *) {
    fp8e4m3 x;
    x.bits = (unsigned char)(r.w[k >> 2] >> (8 * (k & 3)));
    return to_f32(x);
}

/* Sets element k of the words to v, rounded to T as from_f32 does. */
template <int NB>
static __device__ __forceinline__ void put(raw_bytes<NB> &r, int k, float v, const float *) {
    r.w[k] = __float_as_uint(v);
}
template <int NB>
static __device__ __forceinline__ void put(raw_bytes<NB> &r, int k, float v,
                                           const __nv_bfloat16 *) {
    __nv_bfloat16 h;
    from_f32(&h, v);
    const uint32_t b = __bfloat16_as_ushort(h);
    r.w[k >> 1] = (k & 1) ? (r.w[k >> 1] & 0xffffu) | b << 16 : b;
}
template <int NB>
static __device__ __forceinline__ void put(raw_bytes<NB> &r, int k, float v, const __half *) {
    __half h;
    from_f32(&h, v);
    const uint32_t b = __half_as_ushort(h);
    r.w[k >> 1] = (k & 1) ? (r.w[k >> 1] & 0xffffu) | b << 16 : b;
}

/* Elements k, k + 1 (k even) of the words from v0, v1, rounded as put does, by one paired
 * conversion (cvt.rn.bf16x2.f32 / cvt.rn.f16x2.f32: the rounding of two single ones, which ptxas
 * itself merges into one F2FP.PACK_AB where it can). Written out because in the split-layout tile
 * kernels with weights of the fixed math modes ptxas merged few: 48 single conversions (F2F) and a
 * shift and an OR to pack each pair, per 4 rows of a lane, where 24 F2FP.PACK_AB do the same
 * (bench/PERF_NOTES.md, the variants). The paired cvt is sm_80's; older targets take two single
 * ones. */
template <int NB>
static __device__ __forceinline__ void put2(raw_bytes<NB> &r, int k, float v0, float v1,
                                            const float *) {
    r.w[k] = __float_as_uint(v0), r.w[k + 1] = __float_as_uint(v1);
}
template <int NB>
static __device__ __forceinline__ void put2(raw_bytes<NB> &r, int k, float v0, float v1,
                                            const __nv_bfloat16 *) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    uint32_t b;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(b) : "f"(v1), "f"(v0)); /* v0 in the low half */
    r.w[k >> 1] = b;
#else
    put(r, k, v0, (const __nv_bfloat16 *)0), put(r, k + 1, v1, (const __nv_bfloat16 *)0);
#endif
}
template <int NB>
static __device__ __forceinline__ void put2(raw_bytes<NB> &r, int k, float v0, float v1,
                                            const __half *) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    uint32_t b;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(b) : "f"(v1), "f"(v0));
    r.w[k >> 1] = b;
#else
    put(r, k, v0, (const __half *)0), put(r, k + 1, v1, (const __half *)0);
#endif
}

/* Elements k, k + 1 (k even) of the fp8 copy: the hardware's cvt (satfinite) where it equals
 * fastglu_f32_to_e4m3, which takes NaN (the sign is kept) and, without saturation, |x| > 464. */
template <int NB>
static __device__ __forceinline__ void put_fp8x2(raw_bytes<NB> &r, int k, float v0, float v1,
                                                 int sat) {
    const uint32_t lim = sat ? 0x7f800000u : 0x43e80000u;
    uint32_t b;
    if ((__float_as_uint(v0) & 0x7fffffffu) > lim || (__float_as_uint(v1) & 0x7fffffffu) > lim)
        b = fastglu_f32_to_e4m3(v0, sat) | (uint32_t)fastglu_f32_to_e4m3(v1, sat) << 8;
    else
        b = __nv_cvt_float2_to_fp8x2(make_float2(v0, v1), __NV_SATFINITE, __NV_E4M3);
    const int s = 8 * (k & 3);
    r.w[k >> 2] = (r.w[k >> 2] & ~(0xffffu << s)) | b << s;
}

/* Gate and up of column k from words x and y of S: IL, the pairs in x; SPLIT, gate in x, up in y. */
template <int IL, int NB, typename S>
static __device__ __forceinline__ void pair_at(const raw_bytes<NB> &x, const raw_bytes<NB> &y,
                                               int k, const S *tag, float *g, float *u) {
    *g = elem(x, IL ? 2 * k : k, tag);
    *u = IL ? elem(x, 2 * k + 1, tag) : elem(y, k, tag);
}

/* The bias's words for the C columns from j0 (NB bytes in x, and in y for SPLIT), as pair_at reads them. */
template <typename T, int IL, int NB, int NC>
static __device__ __forceinline__ void load_bias_words(const glu_args &a, int64_t j0,
                                                       raw_bytes<NB> &x, raw_bytes<NB> &y) {
    x = load_raw<NB, NC>((const T *)a.bias + (IL ? 2 * j0 : j0), FULL);
    if (!IL) y = load_raw<NB, NC>((const T *)a.bias + a.F + j0, FULL);
}

/* Forward of the C columns j0 .. j0 + C - 1 of row t (all < F), specialised; the per-token weight
 * (FL_W) is read after the operands' loads are issued. */
template <typename T, int IL, int FL, int C>
static __device__ __forceinline__ void fwd_chunk_fast(const glu_args &a, int64_t t, int64_t j0) {
    enum { NI = C * (int)sizeof(T) * (IL ? 2 : 1), NO = C * (int)sizeof(T), N8 = C * (IL ? 2 : 1) };
    const T *tag = NULL;
    const T *grow = (const T *)a.gate + t * a.gate_rs;
    /* IL: gate and up alternate in x; SPLIT: gate in x, up in y (likewise the bias) */
    const raw_bytes<NI> x = load_raw<NI, 1>(grow + (IL ? 2 * j0 : j0), FULL);
    raw_bytes<NI> y, bx, by;
    if (!IL) y = load_raw<NI, 1>((const T *)a.up + t * a.up_rs + j0, FULL);
    if (FL & FL_BIAS) load_bias_words<T, IL, NI, 1>(a, j0, bx, by);
    const float w = (FL & FL_W) ? load_weight_nc(a.weights, a.w_dtype, t * a.w_stride) : 1.0f;
    if (FL & FL_FP8) { /* the operands before bias (with a clamp, fp8_operand's values) */
        enum { MM = MM_OF(FL) };
        unsigned char *row = a.fp8 + t * a.fp8_rs;
        raw_bytes<N8> fx, fy;
#pragma unroll
        for (int k = 0; k < N8; k += 2) /* IL: gate at even k, up at odd */
            put_fp8x2(fx, k, fp8_operand<MM>(a.m, elem(x, k, tag), 0),
                      fp8_operand<MM>(a.m, elem(x, k + 1, tag), IL), a.m.fp8_sat);
        store_raw<N8>(row + (IL ? 2 * j0 : j0), fx, FULL);
        if (!IL) {
#pragma unroll
            for (int k = 0; k < N8; k += 2)
                put_fp8x2(fy, k, fp8_operand<MM>(a.m, elem(y, k, tag), 1),
                          fp8_operand<MM>(a.m, elem(y, k + 1, tag), 1), a.m.fp8_sat);
            store_raw<N8>(row + a.F + j0, fy, FULL);
        }
    }
    raw_bytes<NO> o;
#pragma unroll
    for (int k = 0; k < C; ++k) {
        float g, u, bg = 0.0f, bu = 0.0f;
        pair_at<IL>(x, y, k, tag, &g, &u);
        if (FL & FL_BIAS) pair_at<IL>(bx, by, k, tag, &bg, &bu);
        put(o, k,
            glu_forward<MM_OF(FL), (FL & FL_BIAS) != 0, (FL & FL_W) != 0>(a.m, g, u, bg, bu, w),
            tag);
    }
    store_raw<NO>((T *)a.out + t * a.out_rs + j0, o, FULL);
}

/* The words one row's backward reads for C columns: gate and up as stored (IL: pairs in x), dy.
 * Loaded apart from the math (bwd_load_fast) so that the tile kernel can have its next rows' loads
 * in flight before it computes any of them. */
template <typename T, typename TIN, int IL, int C> struct bwd_words {
    raw_bytes<C *(int)sizeof(TIN) * (IL ? 2 : 1)> x, y;
    raw_bytes<C *(int)sizeof(T)> d;
};

template <typename T, typename TIN, int IL, int C>
static __device__ __forceinline__ bwd_words<T, TIN, IL, C> bwd_load_fast(const glu_args &a,
                                                                         int64_t t, int64_t j0) {
    enum { NI = C * (int)sizeof(TIN) * (IL ? 2 : 1), ND = C * (int)sizeof(T) };
    bwd_words<T, TIN, IL, C> r;
    r.x = load_raw<NI>((const TIN *)a.gate + t * a.gate_rs + (IL ? 2 * j0 : j0), FULL);
    if (!IL) r.y = load_raw<NI>((const TIN *)a.up + t * a.up_rs + j0, FULL);
    r.d = load_raw<ND>((const T *)a.dy + t * a.dy_rs + j0, FULL);
    return r;
}

/* The bias's words for C columns (FL_BIAS; unset otherwise), loaded apart so that the tile kernel
 * reads them once per tile. */
template <typename T, int IL, int C> struct bias_words {
    raw_bytes<C *(int)sizeof(T) * (IL ? 2 : 1)> x, y;
};
template <typename T, int IL, int FL, int C>
static __device__ __forceinline__ bias_words<T, IL, C> bias_load_fast(const glu_args &a,
                                                                      int64_t j0) {
    bias_words<T, IL, C> b;
    if (FL & FL_BIAS) load_bias_words<T, IL, C *(int)sizeof(T) * (IL ? 2 : 1), 0>(a, j0, b.x, b.y);
    return b;
}

/* Backward of the C columns j0 .. j0 + C - 1 of row t (all < F) from its loaded words, specialised:
 * writes d_gate and d_up, adds the bias gradients of column k to sg[k] (gate) and su[k] (up)
 * (FL_DB), and returns the weight-gradient terms summed in column order (FL_DW; 0 otherwise).
 * PK: the gradients are rounded two columns at a time (put2; the tile kernel) or one at a time (put;
 * the flat kernel: with pairs, its split-layout quick-GeGLU / clamped-SwiGLU kernels with weights
 * spilled, 14-16 local loads and stores at their 40 registers; bench/PERF_NOTES.md, the variants). */
template <typename T, typename TIN, int IL, int FL, int C, int PK>
static __device__ __forceinline__ float bwd_chunk_fast(const glu_args &a, int64_t t, int64_t j0,
                                                       float w, const bwd_words<T, TIN, IL, C> &in,
                                                       const bias_words<T, IL, C> &bw,
                                                       float (&sg)[C], float (&su)[C]) {
    enum { NT = C * (int)sizeof(T) * (IL ? 2 : 1) };
    const T *tag = NULL;
    const TIN *tin = NULL;
    const raw_bytes<NT> &bx = bw.x, &by = bw.y;
    static_assert(64 % C == 0, "a chunk's columns lie in one 1 x 128 block");
    float scale_g = 1.0f, scale_u = 1.0f;
    if (a.scale_inv) operand_scales<IL>(a, t, j0, &scale_g, &scale_u);
    raw_bytes<NT> ox, oy;
    float part = 0.0f, dg0 = 0.0f,
          du0 = 0.0f; /* PK, SPLIT: column k - 1's gradients, stored with column k's */
    static_assert(!PK || C % 2 == 0, "columns are stored in pairs");
#pragma unroll
    for (int k = 0; k < C; ++k) {
        float g, u, bg = 0.0f, bu = 0.0f;
        pair_at<IL>(in.x, in.y, k, tin, &g, &u);
        if (a.scale_inv) g = __fmul_rn(g, scale_g), u = __fmul_rn(u, scale_u);
        if (FL & FL_BIAS) pair_at<IL>(bx, by, k, tag, &bg, &bu);
        const glu_grads q = glu_backward<MM_OF(FL), (FL & FL_BIAS) != 0, (FL & FL_W) != 0>(
            a.m, g, u, bg, bu, w, elem(in.d, k, tag));
        if (!PK) {
            put(ox, IL ? 2 * k : k, q.dg, tag);
            if (IL)
                put(ox, 2 * k + 1, q.du, tag);
            else
                put(oy, k, q.du, tag);
        } else if (IL) {
            put2(ox, 2 * k, q.dg, q.du, tag);
        } else if (k & 1) {
            put2(ox, k - 1, dg0, q.dg, tag), put2(oy, k - 1, du0, q.du, tag);
        } else {
            dg0 = q.dg, du0 = q.du;
        }
        if (FL & FL_DB) sg[k] = __fadd_rn(sg[k], q.dbg), su[k] = __fadd_rn(su[k], q.dbu);
        if (FL & FL_DW) part = __fadd_rn(part, q.dw);
    }
    store_raw<NT>((T *)a.out + t * a.out_rs + (IL ? 2 * j0 : j0), ox, FULL);
    if (!IL) store_raw<NT>((T *)a.out2 + t * a.out2_rs + j0, oy, FULL);
    return part;
}

/* ---- the general path: any alignment, the row's last partial chunk, features at run time ------- */

/* Forward of the chunk of E columns from j0 of row t (fewer where it runs past F). */
template <typename T, int IL>
static __device__ __forceinline__ void fwd_chunk_generic(const glu_args &a, int64_t t, int64_t j0,
                                                         float w) {
    enum { E = 16 / sizeof(T) };
    T *y = (T *)a.out + t * a.out_rs + j0;
    if (j0 + E <= a.F) {
        float g[E], u[E], bg[E], bu[E], r[E];
        load_operands<T, IL, E>(a, t, j0, g, u);
        if (a.fp8) store_fp8<IL, E>(a, t, j0, g, u);
        load_bias<T, IL, E>(a, j0, bg, bu);
#pragma unroll
        for (int k = 0; k < E; ++k)
            r[k] = glu_forward<MM_ANY, 1, 1>(a.m, g[k], u[k], bg[k], bu[k], w);
        store_elems<T, E>(y, a.w_out, r);
    } else {
        for (int64_t j = j0; j < a.F; ++j) {
            float g, u, bg, bu;
            load_operand1<T, IL>(a, t, j, &g, &u);
            if (a.fp8) {
                unsigned char *row = a.fp8 + t * a.fp8_rs;
                row[IL ? 2 * j : j] =
                    fastglu_f32_to_e4m3(fp8_operand<MM_ANY>(a.m, g, 0), a.m.fp8_sat);
                row[IL ? 2 * j + 1 : a.F + j] =
                    fastglu_f32_to_e4m3(fp8_operand<MM_ANY>(a.m, u, 1), a.m.fp8_sat);
            }
            load_bias1<T, IL>(a, j, &bg, &bu);
            from_f32(&y[j - j0], glu_forward<MM_ANY, 1, 1>(a.m, g, u, bg, bu, w));
        }
    }
}

/* Backward of the ncols <= C columns from j0 of row t: as bwd_chunk_fast, with every feature read
 * at run time (dbg / dbu always accumulate; the caller uses them or not). */
template <typename T, typename TIN, int IL, int C>
static __device__ __forceinline__ float bwd_chunk_generic(const glu_args &a, int64_t t, int64_t j0,
                                                          int ncols, float w, float (&dbg)[C],
                                                          float (&dbu)[C]) {
    float part = 0.0f;
    if (ncols == C) {
        float g[C], u[C], bg[C], bu[C], d[C], dg[C], du[C];
        load_operands<TIN, IL, C>(a, t, j0, g, u);
        load_bias<T, IL, C>(a, j0, bg, bu);
        load_dy<T, C>(a, t, j0, d);
#pragma unroll
        for (int k = 0; k < C; ++k) {
            const glu_grads q = glu_backward<MM_ANY, 1, 1>(a.m, g[k], u[k], bg[k], bu[k], w, d[k]);
            dg[k] = q.dg, du[k] = q.du;
            dbg[k] = __fadd_rn(dbg[k], q.dbg), dbu[k] = __fadd_rn(dbu[k], q.dbu);
            part = __fadd_rn(part, q.dw);
        }
        store_grads<T, IL, C>(a, t, j0, dg, du);
    } else {
#pragma unroll
        for (int k = 0; k < C; ++k) {
            if (k < ncols) {
                const int64_t j = j0 + k;
                float g, u, bg, bu;
                load_operand1<TIN, IL>(a, t, j, &g, &u);
                load_bias1<T, IL>(a, j, &bg, &bu);
                const T *dp = (const T *)a.dy + t * a.dy_rs + j * a.dy_cs;
                const glu_grads q = glu_backward<MM_ANY, 1, 1>(a.m, g, u, bg, bu, w, to_f32(*dp));
                store_grad1<T, IL>(a, t, j, q.dg, q.du);
                dbg[k] = __fadd_rn(dbg[k], q.dbg), dbu[k] = __fadd_rn(dbu[k], q.dbu);
                part = __fadd_rn(part, q.dw);
            }
        }
    }
    return part;
}

/* ---- kernels ------------------------------------------------------------------------------- */

/* Templates on the element type T, the stored operand type TIN, the layout and the feature set
 * FL: one body for every combination the launchers pick, where macros would paste it once each. */

/* The per-token weight, 1 without weights. */
template <int FL>
static __device__ __forceinline__ float token_weight(const glu_args &a, int64_t t) {
    const int has_w = (FL & FL_FAST) ? (FL & FL_W) != 0 : a.weights != NULL;
    return has_w ? load_token_weight(a.weights, a.w_dtype, t * a.w_stride) : 1.0f;
}

/* Row t and first column j0 of the flat kernels' chunk i (chunks of e columns, row by row). */
static __device__ __forceinline__ void flat_chunk(const glu_args &a, uint64_t i, int e, int64_t *t,
                                                  int64_t *j0) {
    *t = (int64_t)fastdiv_div(a.nvec, i);
    *j0 = (int64_t)(i - (uint64_t)*t * a.nvec.d) * e;
}

/* Forward, flat: chunks of E = 16 / sizeof(T) columns, numbered row by row. The specialised
 * kernels are held to FWD_MIN_BLOCKS blocks per SM (<= 32 registers), as glu_swiglu.cuh's forward. */
#define FWD_MIN_BLOCKS 8
#define FWD_MIN_BLOCKS_FP8 6 /* the fp8 copy needs ~40 registers; 8 blocks spill 8-80 bytes */
template <typename T, int IL, int FL>
__global__ void __launch_bounds__(GLU_THREADS,
                                  (FL & FL_FAST)
                                      ? ((FL & FL_FP8) ? FWD_MIN_BLOCKS_FP8 : FWD_MIN_BLOCKS)
                                      : 1) glu_fwd_kernel(const glu_args a) {
    enum { E = 16 / sizeof(T) };
    const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.chunks; i += step) {
        int64_t t, j0;
        flat_chunk(a, i, E, &t, &j0);
        if (FL & FL_FAST)
            fwd_chunk_fast<T, IL, FL, E>(a, t, j0);
        else
            fwd_chunk_generic<T, IL>(a, t, j0, token_weight<FL>(a, t));
    }
}

/* dweights of row t from column tile tc (the flat kernel's): the lanes' column-ordered sums added
 * by a butterfly (xor 16, 8, 4, 2, 1; the whole warp takes part), into the workspace. */
static __device__ __forceinline__ void tile_dweights(const glu_args &a, float part, int64_t tc,
                                                     int64_t t, int lane, uint64_t pol) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) part = __fadd_rn(part, __shfl_xor_sync(0xffffffffu, part, o));
    if (lane == 0) store_partial(&a.ws_dw[tc * a.tokens + t], part, pol, a.ws_keep);
}

/* dweights of the slab's rows of column tile tc from the lanes' column-ordered sums, held in
 * sdw[row of the slab][lane] (row stride SDW_STRIDE): two threads a row (the even lanes' and the odd
 * lanes' halves), the additions of tile_dweights' butterfly (xor 16, 8, 4, 2 within a half, then 1
 * across the pair), so the sum is the flat kernel's to the bit; the even thread stores it (64 rows:
 * one coalesced store). Faster than the butterfly in the row loop (5 shuffles a row and warp, a
 * 4-byte store a row) for quick-GeGLU with bias, weights and clamp, and without the registers that
 * case spilled there (bench/PERF_NOTES.md, the variant tile kernel). */
#define SDW_STRIDE 34 /* 2 r + parity: the 32 threads of a warp read 32 distinct banks */
static __device__ __forceinline__ void tile_dweights_rows(const glu_args &a, const float *sdw,
                                                          int64_t slab, int64_t tc, uint64_t pol) {
    const int r = threadIdx.x >> 1, par = threadIdx.x & 1;
    float w[16]; /* lanes par, par + 2, ..., par + 30 */
#pragma unroll
    for (int m = 0; m < 16; ++m) w[m] = sdw[r * SDW_STRIDE + par + 2 * m];
#pragma unroll
    for (int m = 0; m < 8; ++m) w[m] = __fadd_rn(w[m], w[m + 8]); /* lane l + 16 */
#pragma unroll
    for (int m = 0; m < 4; ++m) w[m] = __fadd_rn(w[m], w[m + 4]); /* l + 8 */
#pragma unroll
    for (int m = 0; m < 2; ++m) w[m] = __fadd_rn(w[m], w[m + 2]);           /* l + 4 */
    w[0] = __fadd_rn(w[0], w[1]);                                           /* l + 2 */
    const float s = __fadd_rn(w[0], __shfl_xor_sync(0xffffffffu, w[0], 1)); /* l + 1 */
    const int64_t t = slab * FASTGLU_SLAB_ROWS + r;
    if (!par && t < a.tokens) store_partial(&a.ws_dw[tc * a.tokens + t], s, pol, a.ws_keep);
}

/* Backward, flat like the forward; the specialised kernels held to BWD_MIN_BLOCKS blocks per SM
 * (<= 40 registers; 48 without the bound, 5 blocks). No reductions, except dweights alone (FL_DW;
 * 16-bit types, F a multiple of FASTGLU_TILE_COLS): a warp's 32 chunks are then the 256 columns of
 * one column tile of one row, and the warp sums them as the tile kernel does, into the same
 * workspace slot, so the result is the tile kernel's to the bit. */
#define BWD_MIN_BLOCKS 6
template <typename T, typename TIN, int IL, int FL>
__global__ void __launch_bounds__(GLU_THREADS, (FL & FL_FAST) ? BWD_MIN_BLOCKS : 1)
    glu_bwd_kernel(const glu_args a) {
    enum { E = 16 / sizeof(T) };
    if (FL & FL_DW)
        grid_dependents_may_launch(); /* the reduction of the dweights partials follows */
    const uint64_t pol = (FL & FL_DW) ? l2_evict_last_policy() : 0;
    const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.chunks; i += step) {
        int64_t t, j0;
        flat_chunk(a, i, E, &t, &j0);
        const float w = token_weight<FL>(a, t);
        float unused_g[E], unused_u[E]; /* the bias-gradient sums: none in the flat kernel */
        if (FL & FL_FAST) {
            const float part = bwd_chunk_fast<T, TIN, IL, FL, E, 0>(
                a, t, j0, w, bwd_load_fast<T, TIN, IL, E>(a, t, j0),
                bias_load_fast<T, IL, FL, E>(a, j0), unused_g, unused_u);
            if (FL & FL_DW)
                tile_dweights(a, part, j0 / FASTGLU_TILE_COLS, t, threadIdx.x & 31, pol);
        } else {
            const int ncols = a.F - j0 < E ? (int)(a.F - j0) : E;
            bwd_chunk_generic<T, TIN, IL, E>(a, t, j0, ncols, w, unused_g, unused_u);
        }
    }
}

/* Backward with reductions: one tile (64 rows x 256 columns) per block iteration; see the top. The
 * specialised kernels are held to TILE_MIN_BLOCKS blocks of 4 warps per SM (<= 128 registers: for
 * the 16-bit types the lane's 16 sums, the tile's bias and 4 rows' loads; fp32, 2 rows, spills
 * 12-36 bytes in its bias cases, not measured on a GPU). */
#define TILE_MIN_BLOCKS 4
template <typename T, typename TIN, int IL, int FL>
__global__ void __launch_bounds__(TILE_WARPS * 32, (FL & FL_FAST) ? TILE_MIN_BLOCKS : 1)
    glu_bwd_tile_kernel(const glu_args a) {
    enum { N = LANE_COLS, R = TILE_ROWS(T) };
    static_assert(FASTGLU_SLAB_ROWS % (R * TILE_WARPS) == 0,
                  "a warp's rows in flight must not run past its slab");
    /* the bias-gradient sums of each warp: [gate, up][column k of the lane][lane] */
    __shared__ float sdb[TILE_WARPS][2][N][32];
    /* the dweights sums of the slab's rows: [row][lane] (FL_DW, or the general kernel) */
    __shared__ float sdw[((FL & FL_DW) || !(FL & FL_FAST)) ? FASTGLU_SLAB_ROWS * SDW_STRIDE : 1];
    static_assert(TILE_WARPS * 32 == 2 * FASTGLU_SLAB_ROWS,
                  "tile_dweights_rows: two threads a row");
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t ntc = (a.F + FASTGLU_TILE_COLS - 1) / FASTGLU_TILE_COLS;
    const int64_t ntr = (a.tokens + FASTGLU_SLAB_ROWS - 1) / FASTGLU_SLAB_ROWS;
    const int want_db = (FL & FL_FAST) ? (FL & FL_DB) != 0 : a.ws_dbias != NULL;
    const int want_dw = (FL & FL_FAST) ? (FL & FL_DW) != 0 : a.ws_dw != NULL;
    grid_dependents_may_launch(); /* the reduction waits for this grid's end anyway */
    const uint64_t pol = l2_evict_last_policy();
    for (int64_t tile = blockIdx.x; tile < ntr * ntc; tile += gridDim.x) {
        const int64_t slab = tile / ntc, tc = tile % ntc;
        const int64_t j0 = tc * FASTGLU_TILE_COLS + (int64_t)lane * N;
        /* the specialised kernels run only where F is a multiple of N: a lane's columns are all in or all out */
        const int ncols = j0 >= a.F ? 0 : (int)(a.F - j0 < N ? a.F - j0 : N);
        float dbg[N], dbu[N]; /* the lane's bias-gradient sums over its rows of the tile */
#pragma unroll
        for (int k = 0; k < N; ++k) dbg[k] = dbu[k] = 0.0f;
        if (FL & FL_FAST) {
            /* R rows of the warp (r, r + W, ..., r + (R - 1) W) loaded before any of their math, so
             * that each warp has R rows in flight (rows are disjoint, in place too); the sums still
             * take the rows in order. The bias of the lane's columns is read once per tile. */
            bias_words<T, IL, N> bw;
            if (ncols) bw = bias_load_fast<T, IL, FL, N>(a, j0);
            for (int r = warp; r < FASTGLU_SLAB_ROWS; r += R * TILE_WARPS) {
                const int64_t tb = slab * FASTGLU_SLAB_ROWS + r;
                if (tb >= a.tokens) break; /* uniform over the warp, as every row test below */
                bwd_words<T, TIN, IL, N> in[R];
                float w[R];
#pragma unroll
                for (int i = 0; i < R; ++i) {
                    const int64_t t = tb + i * TILE_WARPS;
                    if (i == 0 || t < a.tokens) {
                        w[i] = token_weight<FL>(a, t);
                        if (ncols) in[i] = bwd_load_fast<T, TIN, IL, N>(a, t, j0);
                    }
                }
#pragma unroll
                for (int i = 0; i < R; ++i) {
                    const int64_t t = tb + i * TILE_WARPS;
                    if (i == 0 || t < a.tokens) {
                        const float p = ncols ? bwd_chunk_fast<T, TIN, IL, FL, N, 1>(
                                                    a, t, j0, w[i], in[i], bw, dbg, dbu)
                                              : 0.0f;
                        if (want_dw) sdw[(t - slab * FASTGLU_SLAB_ROWS) * SDW_STRIDE + lane] = p;
                    }
                }
            }
        } else {
            for (int r = warp; r < FASTGLU_SLAB_ROWS; r += TILE_WARPS) {
                const int64_t t = slab * FASTGLU_SLAB_ROWS + r;
                if (t >= a.tokens) break; /* uniform over the warp */
                const float part = bwd_chunk_generic<T, TIN, IL, N>(
                    a, t, j0, ncols, token_weight<FL>(a, t), dbg, dbu);
                if (want_dw) sdw[r * SDW_STRIDE + lane] = part;
            }
        }
        if (want_db) {
#pragma unroll
            for (int k = 0; k < N; ++k)
                sdb[warp][0][k][lane] = dbg[k], sdb[warp][1][k][lane] = dbu[k];
        }
        if (want_db || want_dw) __syncthreads(); /* the tile's sums are all in shared memory */
        if (want_dw) tile_dweights_rows(a, sdw, slab, tc, pol);
        if (want_db) {
            /* thread c sums columns c, c + 32 W, ... of the tile over the warps in order, for gate and up */
            for (int c = threadIdx.x; c < FASTGLU_TILE_COLS; c += TILE_WARPS * 32) {
                const int64_t j = tc * FASTGLU_TILE_COLS + c;
                if (j < a.F) {
                    float sg = 0.0f, su = 0.0f;
#pragma unroll
                    for (int q = 0; q < TILE_WARPS; ++q)
                        sg += sdb[q][0][c % N][c / N], su += sdb[q][1][c % N][c / N];
                    store_partial(&a.ws_dbias[slab * 2 * a.F + j], sg, pol, a.ws_keep);
                    store_partial(&a.ws_dbias[slab * 2 * a.F + a.F + j], su, pol, a.ws_keep);
                }
            }
        }
        if (want_db || want_dw) __syncthreads(); /* sdb and sdw are reused by the next tile */
    }
}

/* dbias[c] = the sum over slabs, dweights[t] = the sum over column tiles, in a fixed order: a
 * block takes 32 consecutive outputs (one per lane); warp g of the block sums the partials
 * q = g, g + RED_GROUPS, ... in order, then warp 0 adds the RED_GROUPS warps' sums in order. Blocks
 * [0, nb_db) do dbias, the next nb_dw do dweights; a warp's load is 32 consecutive floats (one
 * 128-byte line where aligned); the order never depends on the grid. After the block's barrier
 * (every partial it read has been added) it discards those lines. Launched as a programmatic
 * dependent of the kernel that wrote the partials where its code has grid_dependency_wait compiled
 * in (device_info): its blocks may start while that kernel's last blocks run, and wait for its
 * results first. */
#define RED_GROUPS (GLU_THREADS / 32)
template <typename T, int IL>
__global__ void __launch_bounds__(GLU_THREADS)
    glu_reduce_kernel(const float *ws_dbias, int64_t nslabs, void *dbias, const float *ws_dw,
                      int64_t ntiles, void *dweights, int w_dtype, int64_t tokens, int64_t F) {
    __shared__ float part[RED_GROUPS][32];
    grid_dependency_wait(); /* launched as the tile kernel's programmatic dependent: its partials */
    const int lane = threadIdx.x & 31, g = threadIdx.x >> 5;
    const int64_t nb_db = dbias ? (2 * F + 31) / 32 : 0, nb_dw = dweights ? (tokens + 31) / 32 : 0;
    for (int64_t b = blockIdx.x; b < nb_db + nb_dw; b += gridDim.x) { /* uniform over the block */
        const int is_db = b < nb_db;
        const float *ws = is_db ? ws_dbias : ws_dw;
        const int64_t n = is_db ? 2 * F : tokens, nq = is_db ? nslabs : ntiles;
        const int64_t i = (is_db ? b : b - nb_db) * 32 + lane;
        float s = 0.0f;
        if (i < n) {
#pragma unroll 4
            for (int64_t q = g; q < nq; q += RED_GROUPS) s += ws[q * n + i];
        }
        part[g][lane] = s;
        __syncthreads(); /* every partial this block reads has been added (s stored above) */
        const int64_t i0 = i - lane;
        if (i0 + 32 <= n) { /* the 32 outputs all exist: the block alone reads their lines; drop
                             * them (group g's rows q = g + 8 (lane + 32 k), the 128-byte-aligned ones) */
            for (int64_t q = g + (int64_t)RED_GROUPS * lane; q < nq;
                 q += (int64_t)RED_GROUPS * 32) {
                const float *line = ws + q * n + i0;
                if (((uintptr_t)line & 127) == 0) discard_line(line);
            }
        }
        if (g == 0 && i < n) {
            float r = 0.0f;
#pragma unroll
            for (int k = 0; k < RED_GROUPS; ++k) r += part[k][lane];
            if (is_db) {
                /* partials are in [gate F | up F] order; the bias has the operands' layout */
                const int64_t o = !IL ? i : i < F ? 2 * i : 2 * (i - F) + 1;
                from_f32(&((T *)dbias)[o], r);
            } else {
                store_weight(dweights, w_dtype, i, r);
            }
        }
        __syncthreads(); /* part is reused by the next block step */
    }
}

/* ---- launchers ------------------------------------------------------------------------------- */

/* Flat decomposition: tokens x ceil(F / E) chunks; 0 if the count overflows. */
static int plan_flat(glu_args *a, size_t esize) {
    const int64_t e = (int64_t)(16 / esize);
    const uint64_t nvec = (uint64_t)((a->F + e - 1) / e);
    if (nvec != 0 && (uint64_t)a->tokens > UINT64_MAX / 2 / nvec) return 0;
    a->chunks = (uint64_t)a->tokens * nvec;
    a->nvec = make_fastdiv(nvec, a->chunks);
    return 1;
}

/* Access widths: a chunk of n columns of an operand of `es`-byte elements (2n when interleaved)
 * starts at a multiple of its own size within the row. */
static void set_widths(glu_args *a, int il, size_t es, size_t in_es, int chunk_cols,
                       int has_up_out) {
    const int in_bytes = chunk_cols * (int)in_es * (il ? 2 : 1);
    const int out_bytes = chunk_cols * (int)es * (il && has_up_out ? 2 : 1);
    const int cap_in = in_bytes < 16 ? in_bytes : 16, cap_out = out_bytes < 16 ? out_bytes : 16;
    const int cap_es =
        chunk_cols * (int)es * (il ? 2 : 1) < 16 ? chunk_cols * (int)es * (il ? 2 : 1) : 16;
    a->w_gate = access_width_cap(a->gate, a->gate_rs, a->tokens, in_es, cap_in);
    a->w_up = il ? 0 : access_width_cap(a->up, a->up_rs, a->tokens, in_es, cap_in);
    a->w_out = access_width_cap(a->out, a->out_rs, a->tokens, es, cap_out);
    a->w_out2 = a->out2 ? access_width_cap(a->out2, a->out2_rs, a->tokens, es, cap_out) : 0;
    a->w_dy = (a->dy && a->dy_cs == 1)
                  ? access_width_cap(a->dy, a->dy_rs, a->tokens, es,
                                     chunk_cols * (int)es < 16 ? chunk_cols * (int)es : 16)
                  : 0;
    a->w_bias_g = a->bias ? access_width_cap(a->bias, 0, 1, es, cap_es) : 0;
    a->w_bias_u = (a->bias && !il)
                      ? access_width_cap((const char *)a->bias + a->F * es, 0, 1, es, cap_es)
                      : 0;
}

/* fastglu_debug_set_generic_kernels: 1 = the general path everywhere (tests compare the two). */
static int debug_generic = 0;
extern "C" void fastglu_debug_set_generic_kernels(int on) { debug_generic = on != 0; }

/* 1 when every access to a chunk of C columns is full-width (16 bytes, or the whole chunk when it
 * is smaller): F a multiple of C and the widths set_widths found are the full ones. in_es: the
 * stored operands' element size; fwd: the forward (its output has the gate's width; the fp8 copy). */
static int full_width(int bytes) { return bytes < 16 ? bytes : 16; }
static int chunks_full_width(const glu_args *a, int il, size_t es, size_t in_es, int C, int fwd) {
    const int in_b = full_width(C * (int)in_es * (il ? 2 : 1));
    const int t_b = full_width(C * (int)es * (il ? 2 : 1)), o_b = full_width(C * (int)es);
    if (debug_generic || a->F % C != 0) return 0;
    if (a->w_gate != in_b || (!il && a->w_up != in_b)) return 0;
    if (a->bias && (a->w_bias_g != t_b || (!il && a->w_bias_u != t_b))) return 0;
    if (fwd) {
        if (a->w_out != o_b) return 0;
        if (a->fp8 &&
            (a->w_fp8_g != full_width(C * (il ? 2 : 1)) || (!il && a->w_fp8_u != full_width(C))))
            return 0;
        return 1;
    }
    if (a->w_out != t_b || (!il && a->w_out2 != t_b)) return 0;
    return a->dy_mode == DY_CHUNK && a->w_dy == o_b;
}

/* Kernel tables: [dtype: fp32, fp16, bf16][stored operands: T, fp8][layout: SPLIT, INTERLEAVED]
 * [math mode][case]; case 0 is the general kernel (the same for every math mode). */
static int dtype_index(fastglu_dtype d) {
    return d == FASTGLU_DTYPE_FP32 ? 0 : d == FASTGLU_DTYPE_FP16 ? 1 : 2;
}
typedef void (*glu_kernel)(glu_args);
/* The math modes compiled per dtype, in MM_* order: fp32 (which LLM training rarely runs the
 * activation in) keeps MM_ANY for every mode, a quarter of the kernels. */
#define MODES(T, CASES, ...)                                                                       \
    {CASES(T, __VA_ARGS__, MM_ANY), CASES(T, __VA_ARGS__, sizeof(T) == 4 ? MM_ANY : MM_K),         \
     CASES(T, __VA_ARGS__, sizeof(T) == 4 ? MM_ANY : MM_KCLAMP),                                   \
     CASES(T, __VA_ARGS__, sizeof(T) == 4 ? MM_ANY : MM_GELU)}

/* forward cases: general; specialised: index 1 + bias + 2 weights + 4 fp8 copy */
#define FWD_CASE(T, IL, MM, F) glu_fwd_kernel<T, IL, FL_FAST | FL_MM(MM) | (F)>
#define FWD_CASES(T, IL, MM)                                                                       \
    {glu_fwd_kernel<T, IL, 0>,                                                                     \
     FWD_CASE(T, IL, MM, 0),                                                                       \
     FWD_CASE(T, IL, MM, FL_BIAS),                                                                 \
     FWD_CASE(T, IL, MM, FL_W),                                                                    \
     FWD_CASE(T, IL, MM, FL_BIAS | FL_W),                                                          \
     FWD_CASE(T, IL, MM, FL_FP8),                                                                  \
     FWD_CASE(T, IL, MM, FL_BIAS | FL_FP8),                                                        \
     FWD_CASE(T, IL, MM, FL_W | FL_FP8),                                                           \
     FWD_CASE(T, IL, MM, FL_BIAS | FL_W | FL_FP8)}
#define FWD_TYPE(T) {MODES(T, FWD_CASES, 0), MODES(T, FWD_CASES, 1)}
static const glu_kernel fwd_kernels[3][2][4][9] = {FWD_TYPE(float), FWD_TYPE(__half),
                                                   FWD_TYPE(__nv_bfloat16)};
#undef FWD_TYPE
#undef FWD_CASE
#undef FWD_CASES

/* flat backward: general; specialised: index 1 + bias + 2 weights; 5: weights + dweights (16-bit) */
#define BWD_CASE(T, TIN, IL, MM, F) glu_bwd_kernel<T, TIN, IL, FL_FAST | FL_MM(MM) | (F)>
#define BWD_CASES(T, TIN, IL, MM)                                                                  \
    {glu_bwd_kernel<T, TIN, IL, 0>,                                                                \
     BWD_CASE(T, TIN, IL, MM, 0),                                                                  \
     BWD_CASE(T, TIN, IL, MM, FL_BIAS),                                                            \
     BWD_CASE(T, TIN, IL, MM, FL_W),                                                               \
     BWD_CASE(T, TIN, IL, MM, FL_BIAS | FL_W),                                                     \
     sizeof(T) == 2 ? BWD_CASE(T, TIN, IL, MM, FL_W | FL_DW) : NULL}                               \
    /* fp32: never chosen (a launch error if it were) */
#define BWD_TYPE(T)                                                                                \
    {                                                                                              \
        {MODES(T, BWD_CASES, T, 0), MODES(T, BWD_CASES, T, 1)}, {                                  \
            MODES(T, BWD_CASES, fp8e4m3, 0), MODES(T, BWD_CASES, fp8e4m3, 1)                       \
        }                                                                                          \
    }
static const glu_kernel bwd_kernels[3][2][2][4][6] = {BWD_TYPE(float), BWD_TYPE(__half),
                                                      BWD_TYPE(__nv_bfloat16)};
#undef BWD_TYPE
#undef BWD_CASE
#undef BWD_CASES

/* backward with reductions: general; specialised: bias + dbias, weights + dweights, both */
#define TILE_F_DB (FL_BIAS | FL_DB)
#define TILE_F_DW (FL_W | FL_DW)
#define TILE_CASE(T, TIN, IL, MM, F) glu_bwd_tile_kernel<T, TIN, IL, FL_FAST | FL_MM(MM) | (F)>
#define TILE_CASES(T, TIN, IL, MM)                                                                 \
    {glu_bwd_tile_kernel<T, TIN, IL, 0>, TILE_CASE(T, TIN, IL, MM, TILE_F_DB),                     \
     TILE_CASE(T, TIN, IL, MM, TILE_F_DW), TILE_CASE(T, TIN, IL, MM, TILE_F_DB | TILE_F_DW)}
#define TILE_TYPE(T)                                                                               \
    {                                                                                              \
        {MODES(T, TILE_CASES, T, 0), MODES(T, TILE_CASES, T, 1)}, {                                \
            MODES(T, TILE_CASES, fp8e4m3, 0), MODES(T, TILE_CASES, fp8e4m3, 1)                     \
        }                                                                                          \
    }
static const glu_kernel tile_kernels[3][2][2][4][4] = {TILE_TYPE(float), TILE_TYPE(__half),
                                                       TILE_TYPE(__nv_bfloat16)};
#undef TILE_TYPE
#undef TILE_CASE
#undef TILE_CASES
#undef TILE_F_DB
#undef TILE_F_DW
#undef MODES

#define REDUCE_KERNEL(T) {glu_reduce_kernel<T, 0>, glu_reduce_kernel<T, 1>}
typedef void (*reduce_kernel)(const float *, int64_t, void *, const float *, int64_t, void *, int,
                              int64_t, int64_t);
static const reduce_kernel reduce_kernels[3][2] = {REDUCE_KERNEL(float), REDUCE_KERNEL(__half),
                                                   REDUCE_KERNEL(__nv_bfloat16)};
#undef REDUCE_KERNEL

/* What the launchers ask of the current device, cached per device ordinal (queried once):
 *   l2_bytes    the L2 cache's size (the partials are stored evict-last where they take <= half);
 *   pdl[d][il]  1 when reduce_kernels[d][il] runs code compiled for sm_90 or later (its
 *               griddepcontrol.wait is in it; a build for an older architecture, JIT-compiled here,
 *               has none): only then is the reduction a programmatic dependent. */
#define DEV_CACHE 64
typedef struct dev_info {
    int known;
    int64_t l2_bytes;
    signed char pdl[3][2];
} dev_info;
static dev_info dev_cache[DEV_CACHE];

static const dev_info *device_info(void) {
    static const dev_info none = {1, 0, {{0, 0}, {0, 0}, {0, 0}}};
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= DEV_CACHE) return &none;
    dev_info *di = &dev_cache[dev];
    if (!__atomic_load_n(
            &di->known,
            __ATOMIC_ACQUIRE)) { /* two threads may both fill it in, with the same values */
        /* a failed query's error is cleared unless another was pending already (not ours to take) */
        const int clear = cudaPeekAtLastError() == cudaSuccess;
        int l2 = 0;
        if (cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev) != cudaSuccess) {
            l2 = 0;
            if (clear) (void)cudaGetLastError();
        }
        di->l2_bytes = l2;
        for (int d = 0; d < 3; ++d)
            for (int il = 0; il < 2; ++il) {
                struct cudaFuncAttributes fa;
                const cudaError_t e =
                    cudaFuncGetAttributes(&fa, (const void *)reduce_kernels[d][il]);
                di->pdl[d][il] = e == cudaSuccess && fa.ptxVersion >= 90;
                if (e != cudaSuccess && clear) (void)cudaGetLastError();
            }
        __atomic_store_n(&di->known, 1, __ATOMIC_RELEASE);
    }
    return di;
}

static fastglu_status fwd_entry(const fastglu_glu_params *params, const void *gate,
                                int64_t gate_row_stride, const void *up, int64_t up_row_stride,
                                const void *bias, const void *weights, fastglu_dtype weights_dtype,
                                int64_t weights_stride, void *output, int64_t output_row_stride,
                                void *saved_fp8, int64_t saved_fp8_row_stride, int64_t tokens,
                                int64_t ffn_hidden_size, fastglu_dtype dtype, void *stream) {
    static const char fn[] = "fastglu_glu_fwd_cuda";
    int empty;
    fastglu_status st =
        fastglu_check_glu_fwd(fn, params, gate, gate_row_stride, up, up_row_stride, bias, weights,
                              weights_dtype, weights_stride, output, output_row_stride, saved_fp8,
                              saved_fp8_row_stride, tokens, ffn_hidden_size, dtype, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    if (!debug_generic && swiglu_fwd_case(params, bias, weights, saved_fp8)) {
        launch_plan p;
        if (!plan_launch(tokens, ffn_hidden_size, fastglu_dtype_size(dtype), FASTGLU_THREADS, &p))
            return too_large(fn);
        return launch_status(fn, LAUNCH_FOR_DTYPE(dtype, launch_fwd, &p, (cudaStream_t)stream, gate,
                                                  gate_row_stride, up, up_row_stride, output,
                                                  output_row_stride, tokens, ffn_hidden_size));
    }
    glu_args a;
    memset(&a, 0, sizeof a);
    a.m = make_math(params, dtype, saved_fp8 != NULL);
    const int il = params->layout == FASTGLU_LAYOUT_INTERLEAVED;
    a.gate = gate, a.gate_rs = gate_row_stride, a.up = il ? NULL : up, a.up_rs = up_row_stride;
    a.bias = bias, a.weights = weights, a.w_stride = weights_stride, a.w_dtype = (int)weights_dtype;
    a.out = output, a.out_rs = output_row_stride;
    a.tokens = tokens, a.F = ffn_hidden_size;
    const size_t es = fastglu_dtype_size(dtype);
    const int e = (int)(16 / es);
    if (!plan_flat(&a, es))
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE, "%s: tokens * F is too large", fn);
    set_widths(&a, il, es, es, e, 0);
    if (saved_fp8) {
        /* a chunk's fp8 copy: E bytes of gate and E of up (SPLIT), or 2E interleaved bytes, at a
         * multiple of its own size within the row */
        const int cap = il ? 2 * e : e;
        a.fp8 = (unsigned char *)saved_fp8, a.fp8_rs = saved_fp8_row_stride;
        a.w_fp8_g = access_width_cap(saved_fp8, saved_fp8_row_stride, tokens, 1, cap);
        a.w_fp8_u = access_width_cap((char *)saved_fp8 + ffn_hidden_size, saved_fp8_row_stride,
                                     tokens, 1, cap);
    }
    int c = 0; /* the general kernel */
    if (chunks_full_width(&a, il, es, es, e, 1))
        c = 1 + (bias ? 1 : 0) + (weights ? 2 : 0) + (saved_fp8 ? 4 : 0);
    const dim3 grid(grid_size((a.chunks + GLU_THREADS - 1) / GLU_THREADS)), block(GLU_THREADS);
    void *args[] = {&a};
    return launch_status(
        fn,
        cudaLaunchKernel((const void *)fwd_kernels[dtype_index(dtype)][il][math_mode_of(params)][c],
                         grid, block, args, 0, (cudaStream_t)stream));
}

static fastglu_status bwd_entry(const fastglu_glu_params *params, const void *dy,
                                int64_t dy_row_stride, int64_t dy_col_stride, const void *gate,
                                int64_t gate_row_stride, const void *up, int64_t up_row_stride,
                                fastglu_dtype input_dtype, const float *input_scale_inv,
                                int64_t input_scale_stride, int input_scale_1x128, const void *bias,
                                const void *weights, fastglu_dtype weights_dtype,
                                int64_t weights_stride, void *d_gate, int64_t d_gate_row_stride,
                                void *d_up, int64_t d_up_row_stride, void *dbias, void *dweights,
                                void *workspace, size_t workspace_bytes, int64_t tokens,
                                int64_t ffn_hidden_size, fastglu_dtype dtype, void *stream) {
    static const char fn[] = "fastglu_glu_bwd_cuda";
    int empty;
    fastglu_status st = fastglu_check_glu_bwd(
        fn, params, dy, dy_row_stride, dy_col_stride, gate, gate_row_stride, up, up_row_stride,
        input_dtype, input_scale_inv, input_scale_stride, input_scale_1x128, bias, weights,
        weights_dtype, weights_stride, d_gate, d_gate_row_stride, d_up, d_up_row_stride, dbias,
        dweights, workspace, workspace_bytes, tokens, ffn_hidden_size, dtype, &empty);
    if (st != FASTGLU_SUCCESS) return st;
    cudaStream_t cs = (cudaStream_t)stream;
    const size_t es = fastglu_dtype_size(dtype);
    if (empty) { /* sums over nothing are zero */
        cudaError_t err = cudaSuccess;
        if (dbias && ffn_hidden_size > 0)
            err = cudaMemsetAsync(dbias, 0, 2 * ffn_hidden_size * es, cs);
        if (err == cudaSuccess && dweights && tokens > 0)
            err = cudaMemsetAsync(dweights, 0, tokens * fastglu_dtype_size(weights_dtype), cs);
        return launch_status(fn, err);
    }
    if (!debug_generic &&
        swiglu_bwd_case(params, input_dtype, dtype, bias, weights, dbias, dweights)) {
        launch_plan p;
        if (!plan_launch(tokens, ffn_hidden_size, es, FASTGLU_THREADS, &p)) return too_large(fn);
        return launch_status(fn, LAUNCH_FOR_DTYPE(dtype, launch_bwd, &p, cs, dy, dy_row_stride,
                                                  dy_col_stride, gate, gate_row_stride, up,
                                                  up_row_stride, d_gate, d_gate_row_stride, d_up,
                                                  d_up_row_stride, tokens, ffn_hidden_size));
    }
    glu_args a;
    memset(&a, 0, sizeof a);
    a.m = make_math(params, dtype, 0);
    const int il = params->layout == FASTGLU_LAYOUT_INTERLEAVED;
    const int fp8 = input_dtype == FASTGLU_DTYPE_FP8_E4M3;
    a.gate = gate, a.gate_rs = gate_row_stride, a.up = il ? NULL : up, a.up_rs = up_row_stride;
    a.scale_inv = fp8 ? input_scale_inv : NULL, a.scale_stride = input_scale_stride;
    a.scale_1x128 = input_scale_1x128;
    a.bias = bias, a.weights = weights, a.w_stride = weights_stride, a.w_dtype = (int)weights_dtype;
    a.dy = dy, a.dy_rs = dy_row_stride, a.dy_cs = dy_col_stride;
    a.dy_mode =
        ((dy_col_stride == 0 || ffn_hidden_size == 1) && (dy_row_stride == 0 || tokens == 1))
            ? DY_SCALAR
        : dy_col_stride == 1 ? DY_CHUNK
                             : DY_STRIDED;
    a.out = d_gate, a.out_rs = d_gate_row_stride;
    a.out2 = il ? NULL : d_up, a.out2_rs = d_up_row_stride;
    a.tokens = tokens, a.F = ffn_hidden_size;
    const size_t in_es = fp8 ? 1 : es;
    const int d = dtype_index(dtype);
    void *args[] = {&a};
    const int mm = math_mode_of(params);
    const fastglu_glu_workspace_layout ws =
        fastglu_glu_workspace(tokens, ffn_hidden_size, dbias != NULL, dweights != NULL);
    a.ws_dbias = dbias ? (float *)((char *)workspace + ws.dbias_offset) : NULL;
    a.ws_dw = dweights ? (float *)((char *)workspace + ws.dweights_offset) : NULL;
    const dev_info *di = device_info();
    a.ws_keep = (int64_t)ws.total <= di->l2_bytes / 2;
    /* the flat kernel: without reductions, or with dweights alone where it can sum them (see it) */
    int flat = 0, c = 0;
    if (!dbias && (!dweights || (!bias && es == 2 && ffn_hidden_size % FASTGLU_TILE_COLS == 0))) {
        const int e = (int)(16 / es);
        if (!plan_flat(&a, es))
            return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE, "%s: tokens * F is too large",
                                     fn);
        set_widths(&a, il, es, in_es, e, 1);
        const int full = chunks_full_width(&a, il, es, in_es, e, 0);
        flat = !dweights || full;
        c = !full ? 0 : dweights ? 5 : 1 + (bias ? 1 : 0) + (weights ? 2 : 0);
    }
    const int64_t ntr = (tokens + FASTGLU_SLAB_ROWS - 1) / FASTGLU_SLAB_ROWS;
    const int64_t ntc = (ffn_hidden_size + FASTGLU_TILE_COLS - 1) / FASTGLU_TILE_COLS;
    if (flat) {
        const dim3 grid(grid_size((a.chunks + GLU_THREADS - 1) / GLU_THREADS)), block(GLU_THREADS);
        const cudaError_t err = cudaLaunchKernel((const void *)bwd_kernels[d][fp8][il][mm][c], grid,
                                                 block, args, 0, cs);
        if (!dweights || err != cudaSuccess) return launch_status(fn, err);
    } else { /* with reductions: the tile kernel into the workspace */
        set_widths(&a, il, es, in_es, LANE_COLS, 1);
        /* specialised: every given bias / weights has its gradient asked for */
        if ((!bias || dbias) && (!weights || dweights) &&
            chunks_full_width(&a, il, es, in_es, LANE_COLS, 0))
            c = dbias && dweights ? 3 : dbias ? 1 : 2;
        const dim3 tgrid(grid_size((uint64_t)ntr * (uint64_t)ntc)), tblock(TILE_WARPS * 32);
        const cudaError_t err = cudaLaunchKernel((const void *)tile_kernels[d][fp8][il][mm][c],
                                                 tgrid, tblock, args, 0, cs);
        if (err != cudaSuccess) return launch_status(fn, err);
    }
    /* then the partials' reduction */
    const float *wsb = a.ws_dbias, *wsw = a.ws_dw;
    int64_t nslabs = ntr, ntiles = ntc, T_ = tokens, F_ = ffn_hidden_size;
    int wdt = (int)weights_dtype;
    const uint64_t rblocks =
        (dbias ? (uint64_t)(2 * F_ + 31) / 32 : 0) + (dweights ? (uint64_t)(T_ + 31) / 32 : 0);
    const dim3 rgrid(grid_size(rblocks)), rblock(GLU_THREADS);
    void *rargs[] = {&wsb, &nslabs, &dbias, &wsw, &ntiles, &dweights, &wdt, &T_, &F_};
    /* a programmatic dependent of the kernel above where its code waits for it (device_info) */
    cudaLaunchAttribute pdl;
    memset(&pdl, 0, sizeof pdl);
    pdl.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    pdl.val.programmaticStreamSerializationAllowed = di->pdl[d][il];
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDim = rgrid, cfg.blockDim = rblock, cfg.dynamicSmemBytes = 0, cfg.stream = cs;
    cfg.attrs = &pdl, cfg.numAttrs = 1;
    return launch_status(fn, cudaLaunchKernelExC(&cfg, (const void *)reduce_kernels[d][il], rargs));
}

extern "C" fastglu_status fastglu_glu_fwd_cuda(FASTGLU_GLU_FWD_ARGS, void *stream) {
    const fastglu_status st =
        fastglu_check_glu_fwd_descriptors("fastglu_glu_fwd_cuda", operands, &output, &saved_fp8);
    if (st != FASTGLU_SUCCESS) return st;
    return fwd_entry(params,
                     FASTGLU_GLU_FWD_FIELDS(operands, output, saved_fp8, tokens, ffn_hidden_size),
                     stream);
}

extern "C" fastglu_status fastglu_glu_bwd_cuda(FASTGLU_GLU_BWD_ARGS, void *stream) {
    const fastglu_status st =
        fastglu_check_glu_bwd_descriptors("fastglu_glu_bwd_cuda", &dy, operands, grads);
    if (st != FASTGLU_SUCCESS) return st;
    return bwd_entry(params,
                     FASTGLU_GLU_BWD_FIELDS(dy, dy_col_stride, operands, grads, workspace, tokens,
                                            ffn_hidden_size),
                     stream);
}
