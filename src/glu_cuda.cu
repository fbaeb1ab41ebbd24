/*
 * glu_cuda.cu — the gated-linear-unit family on the GPU (fastglu_glu_fwd_cuda, fastglu_glu_bwd_cuda),
 * written as C. Math, layouts and dtypes: include/fastglu.h ("The gated-linear-unit family"; sources:
 * Megatron-Core fused_bias_swiglu.py / fused_bias_geglu.py, Liger-Kernel's SwiGLU multipliers).
 *
 * Three kernels:
 *   glu_fwd_kernel   forward; flat: each thread takes chunks of E = 16 / sizeof(T) output columns of
 *                    one row (tokens * ceil(F / E) chunks numbered row by row, as swiglu_cuda.cu).
 *   glu_bwd_kernel   backward without reductions (no dbias, no dweights); flat, like the forward.
 *   glu_bwd_tile_kernel + glu_reduce_kernel
 *                    backward with dbias and/or dweights. A block of 8 warps takes a tile of
 *                    FASTGLU_SLAB_ROWS (64) rows x FASTGLU_TILE_COLS (256) columns: lane l of warp w
 *                    owns columns 8l .. 8l + 7 of the tile and rows w, w + 8, ..., w + 56 of the slab.
 *                    Fixed summation order, whatever the grid:
 *                      dweights: per row, each lane sums its 8 columns in order, then the warp's
 *                      lanes by a butterfly (xor 16, 8, 4, 2, 1); the tile's value goes to
 *                      workspace[tile_col][row]; glu_reduce_kernel adds the tiles in order.
 *                      dbias: each lane sums its rows in order (w, w + 8, ...), the block adds the
 *                      8 warps in order through shared memory; the slab's value goes to
 *                      workspace[slab][column]; glu_reduce_kernel adds the slabs in order.
 *                    So results are bitwise identical run to run and for any grid size.
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

#define GLU_THREADS 256 /* flat kernels: threads per block; the tile kernel: 8 warps */
#define TILE_WARPS 8
#define LANE_COLS 8 /* columns per lane in the tile kernel: FASTGLU_TILE_COLS = 32 * LANE_COLS */
#if FASTGLU_TILE_COLS != 32 * LANE_COLS || FASTGLU_SLAB_ROWS % TILE_WARPS != 0
#error "tile shape mismatch with internal.h"
#endif

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

/* ---- element types ---------------------------------------------------------------------------- */

typedef struct fp8e4m3 { /* storage of torch.float8_e4m3fn */
    unsigned char bits;
} fp8e4m3;

static __device__ __forceinline__ float to_f32(fp8e4m3 x) { /* exact */
    return __half2float(__half(__nv_cvt_fp8_to_halfraw(x.bits, __NV_E4M3)));
}

/* weights / dweights: a runtime dtype (fp32 probs with bf16 activations is Megatron's case). */
static __device__ __forceinline__ float load_weight(const void *w, int dtype, int64_t i) {
    if (dtype == FASTGLU_DTYPE_FP32) return ((const float *)w)[i];
    if (dtype == FASTGLU_DTYPE_BF16) return to_f32(((const __nv_bfloat16 *)w)[i]);
    return to_f32(((const __half *)w)[i]);
}
static __device__ __forceinline__ void store_weight(void *w, int dtype, int64_t i, float v) {
    if (dtype == FASTGLU_DTYPE_FP32) ((float *)w)[i] = v;
    else if (dtype == FASTGLU_DTYPE_BF16) from_f32(&((__nv_bfloat16 *)w)[i], v);
    else from_f32(&((__half *)w)[i], v);
}

/* ---- NB contiguous bytes moved with accesses of `width` bytes (width | NB, address aligned) ---- */

template <int NB> struct raw_bytes { /* NB >= 4, a multiple of 4 */
    uint32_t w[NB / 4];
};

template <int NB>
static __device__ __forceinline__ raw_bytes<NB> load_raw(const void *p, int width) {
    raw_bytes<NB> r;
    if (width >= 16 && NB % 16 == 0) {
#pragma unroll
        for (int i = 0; i < NB / 16; ++i) {
            uint4 v = ((const uint4 *)p)[i];
            r.w[4 * i] = v.x, r.w[4 * i + 1] = v.y, r.w[4 * i + 2] = v.z, r.w[4 * i + 3] = v.w;
        }
    } else if (width >= 8 && NB % 8 == 0) {
#pragma unroll
        for (int i = 0; i < NB / 8; ++i) {
            uint2 v = ((const uint2 *)p)[i];
            r.w[2 * i] = v.x, r.w[2 * i + 1] = v.y;
        }
    } else if (width >= 4) {
#pragma unroll
        for (int i = 0; i < NB / 4; ++i) r.w[i] = ((const uint32_t *)p)[i];
    } else if (width == 2) {
#pragma unroll
        for (int i = 0; i < NB / 4; ++i)
            r.w[i] = ((const uint16_t *)p)[2 * i] | (uint32_t)((const uint16_t *)p)[2 * i + 1] << 16;
    } else {
        const unsigned char *b = (const unsigned char *)p;
#pragma unroll
        for (int i = 0; i < NB / 4; ++i)
            r.w[i] = b[4 * i] | (uint32_t)b[4 * i + 1] << 8 | (uint32_t)b[4 * i + 2] << 16 |
                     (uint32_t)b[4 * i + 3] << 24;
    }
    return r;
}

template <int NB>
static __device__ __forceinline__ void store_raw(void *p, const raw_bytes<NB> &r, int width) {
    if (width >= 16 && NB % 16 == 0) {
#pragma unroll
        for (int i = 0; i < NB / 16; ++i)
            ((uint4 *)p)[i] = make_uint4(r.w[4 * i], r.w[4 * i + 1], r.w[4 * i + 2], r.w[4 * i + 3]);
    } else if (width >= 8 && NB % 8 == 0) {
#pragma unroll
        for (int i = 0; i < NB / 8; ++i) ((uint2 *)p)[i] = make_uint2(r.w[2 * i], r.w[2 * i + 1]);
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
        for (int i = 0; i < NB; ++i) ((unsigned char *)p)[i] = (unsigned char)(r.w[i / 4] >> (8 * (i % 4)));
    }
}

/* N elements of S at p, as floats. */
template <typename S, int N>
static __device__ __forceinline__ void load_elems(const S *p, int width, float (&out)[N]) {
    raw_bytes<N * (int)sizeof(S)> r = load_raw<N * (int)sizeof(S)>(p, width);
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
    raw_bytes<N * (int)sizeof(T)> r;
    memcpy(&r, v, sizeof v);
    store_raw<N * (int)sizeof(T)>(p, r, width);
}

/* ---- the math (include/fastglu.h) ---------------------------------------------------------- */

typedef struct glu_math {
    int act;       /* fastglu_activation */
    int clamp;     /* 1: clamp at c */
    int fp8_sat;   /* the fp8 copy's overflow mode (fastglu_set_fp8_saturate) */
    float c, offset, gm, dm;
} glu_math;

/* act(z) and act'(z). */
static __device__ __forceinline__ void activation(int act, float z, float *a, float *da) {
    if (act == FASTGLU_ACT_GELU_TANH) { /* Megatron's geglu / geglu_back constants */
        const float th = tanhf(0.79788456f * z * (1.0f + 0.044715f * z * z));
        *a = z * 0.5f * (1.0f + th);
        *da = 0.5f * z * ((1.0f - th * th) * (0.79788456f + 0.1070322243f * z * z)) +
              0.5f * (1.0f + th);
    } else {
        const float k = act == FASTGLU_ACT_QUICK_GELU ? 1.702f : 1.0f;
        const float s = sigmoid_f32(k * z);
        *a = z * s;
        *da = s * (1.0f + k * z * (1.0f - s));
    }
}

/* One element's forward: m_d * w * act(m_g * a) * (v + o). */
static __device__ __forceinline__ float glu_forward(const glu_math &m, float g, float u, float bg,
                                                    float bu, float w) {
    if (m.clamp) g = fminf(g, m.c), u = fminf(fmaxf(u, -m.c), m.c);
    float a, da;
    activation(m.act, m.gm * (g + bg), &a, &da);
    return m.dm * w * a * (u + bu + m.offset);
}

/* One element's backward: the gradients of the raw gate and up (clamp masks applied), the
 * unmasked ones (the bias's), and m_d * act * (v + o) * dy (the weight's, before the sum). */
typedef struct glu_grads {
    float dg, du, dbg, dbu, dw;
} glu_grads;

static __device__ __forceinline__ glu_grads glu_backward(const glu_math &m, float g, float u, float bg,
                                                         float bu, float w, float dy) {
    glu_grads r;
    float gc = g, uc = u;
    if (m.clamp) gc = fminf(g, m.c), uc = fminf(fmaxf(u, -m.c), m.c);
    float a, da;
    activation(m.act, m.gm * (gc + bg), &a, &da);
    const float v = uc + bu + m.offset, e = m.dm * w * dy;
    r.dbg = e * v * da * m.gm;
    r.dbu = e * a;
    r.dw = m.dm * a * v * dy;
    /* torch.clamp's gradient: passes where min <= x <= max (so not for NaN) */
    r.dg = (!m.clamp || g <= m.c) ? r.dbg : 0.0f;
    r.du = (!m.clamp || (u >= -m.c && u <= m.c)) ? r.dbu : 0.0f;
    return r;
}

/* ---- launch arguments ------------------------------------------------------------------------ */

enum dy_mode { DY_CHUNK = 0, DY_SCALAR = 1, DY_STRIDED = 2 };

typedef struct glu_args {
    glu_math m;
    const void *gate, *up; /* up: SPLIT only */
    int64_t gate_rs, up_rs;
    const float *scale_inv; /* fp8 input only, or NULL */
    int64_t scale_stride;
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
    int64_t tokens, F;
    uint64_t chunks;
    fastdiv nvec;
    /* access widths in bytes */
    int w_gate, w_up, w_out, w_out2, w_dy, w_bias_g, w_bias_u, w_fp8_g, w_fp8_u;
} glu_args;

/* The fp8 copy of N operand columns from j0 (forward, fp8_input_store): gate and up as stored
 * (before clamp and bias), in the operands' layout: SPLIT [gate F | up F], INTERLEAVED pairs. */
template <int IL, int N>
static __device__ __forceinline__ void store_fp8(const glu_args &a, int64_t t, int64_t j0,
                                                 const float (&g)[N], const float (&u)[N]) {
    unsigned char *row = a.fp8 + t * a.fp8_rs;
    unsigned char b[2 * N];
#pragma unroll
    for (int k = 0; k < N; ++k) {
        if (IL) b[2 * k] = fastglu_f32_to_e4m3(g[k], a.m.fp8_sat), b[2 * k + 1] = fastglu_f32_to_e4m3(u[k], a.m.fp8_sat);
        else b[k] = fastglu_f32_to_e4m3(g[k], a.m.fp8_sat), b[N + k] = fastglu_f32_to_e4m3(u[k], a.m.fp8_sat);
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
        const float s = a.scale_inv[t * a.scale_stride];
#pragma unroll
        for (int k = 0; k < N; ++k) g[k] *= s, u[k] *= s;
    }
}

template <typename T, int IL, int N>
static __device__ __forceinline__ void load_bias(const glu_args &a, int64_t j0, float (&bg)[N],
                                                 float (&bu)[N]) {
    if (!a.bias) {
#pragma unroll
        for (int k = 0; k < N; ++k) bg[k] = bu[k] = 0.0f;
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
        const float s = a.scale_inv[t * a.scale_stride];
        *g *= s, *u *= s;
    }
}
template <typename T, int IL>
static __device__ __forceinline__ void load_bias1(const glu_args &a, int64_t j, float *bg, float *bu) {
    const T *b = (const T *)a.bias;
    *bg = b ? to_f32(IL ? b[2 * j] : b[j]) : 0.0f;
    *bu = b ? to_f32(IL ? b[2 * j + 1] : b[a.F + j]) : 0.0f;
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
static __device__ __forceinline__ void store_grad1(const glu_args &a, int64_t t, int64_t j, float dg,
                                                   float du) {
    T *row = (T *)a.out + t * a.out_rs;
    if (IL) {
        from_f32(&row[2 * j], dg), from_f32(&row[2 * j + 1], du);
    } else {
        from_f32(&row[j], dg), from_f32(&((T *)a.out2)[t * a.out2_rs + j], du);
    }
}

/* ---- kernels ------------------------------------------------------------------------------- */

/* Templates on the element type T, the stored operand type TIN and the layout: one body for the
 * 3 x 2 x 2 combinations, where macros would paste it once each. */

template <typename T, int IL>
__global__ void __launch_bounds__(GLU_THREADS) glu_fwd_kernel(const glu_args a) {
    enum { E = 16 / sizeof(T) };
    const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.chunks; i += step) {
        const uint64_t t = fastdiv_div(a.nvec, i);
        const int64_t j0 = (int64_t)(i - t * a.nvec.d) * E;
        const float w = a.weights ? load_weight(a.weights, a.w_dtype, (int64_t)t * a.w_stride) : 1.0f;
        T *y = (T *)a.out + (int64_t)t * a.out_rs + j0;
        if (j0 + E <= a.F) {
            float g[E], u[E], bg[E], bu[E], r[E];
            load_operands<T, IL, E>(a, (int64_t)t, j0, g, u);
            if (a.fp8) store_fp8<IL, E>(a, (int64_t)t, j0, g, u);
            load_bias<T, IL, E>(a, j0, bg, bu);
#pragma unroll
            for (int k = 0; k < E; ++k) r[k] = glu_forward(a.m, g[k], u[k], bg[k], bu[k], w);
            store_elems<T, E>(y, a.w_out, r);
        } else {
            for (int64_t j = j0; j < a.F; ++j) {
                float g, u, bg, bu;
                load_operand1<T, IL>(a, (int64_t)t, j, &g, &u);
                if (a.fp8) {
                    unsigned char *row = a.fp8 + (int64_t)t * a.fp8_rs;
                    row[IL ? 2 * j : j] = fastglu_f32_to_e4m3(g, a.m.fp8_sat);
                    row[IL ? 2 * j + 1 : a.F + j] = fastglu_f32_to_e4m3(u, a.m.fp8_sat);
                }
                load_bias1<T, IL>(a, j, &bg, &bu);
                from_f32(&y[j - j0], glu_forward(a.m, g, u, bg, bu, w));
            }
        }
    }
}

template <typename T, typename TIN, int IL>
__global__ void __launch_bounds__(GLU_THREADS) glu_bwd_kernel(const glu_args a) {
    enum { E = 16 / sizeof(T) };
    const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.chunks; i += step) {
        const int64_t t = (int64_t)fastdiv_div(a.nvec, i);
        const int64_t j0 = (int64_t)(i - (uint64_t)t * a.nvec.d) * E;
        const float w = a.weights ? load_weight(a.weights, a.w_dtype, t * a.w_stride) : 1.0f;
        if (j0 + E <= a.F) {
            float g[E], u[E], bg[E], bu[E], d[E], dg[E], du[E];
            load_operands<TIN, IL, E>(a, t, j0, g, u);
            load_bias<T, IL, E>(a, j0, bg, bu);
            load_dy<T, E>(a, t, j0, d);
#pragma unroll
            for (int k = 0; k < E; ++k) {
                glu_grads r = glu_backward(a.m, g[k], u[k], bg[k], bu[k], w, d[k]);
                dg[k] = r.dg, du[k] = r.du;
            }
            store_grads<T, IL, E>(a, t, j0, dg, du);
        } else {
            for (int64_t j = j0; j < a.F; ++j) {
                float g, u, bg, bu;
                load_operand1<TIN, IL>(a, t, j, &g, &u);
                load_bias1<T, IL>(a, j, &bg, &bu);
                const T *dp = (const T *)a.dy + t * a.dy_rs + j * a.dy_cs;
                glu_grads r = glu_backward(a.m, g, u, bg, bu, w, to_f32(*dp));
                store_grad1<T, IL>(a, t, j, r.dg, r.du);
            }
        }
    }
}

/* Backward with reductions: one tile (64 rows x 256 columns) per block iteration; see the top. */
template <typename T, typename TIN, int IL>
__global__ void __launch_bounds__(TILE_WARPS * 32) glu_bwd_tile_kernel(const glu_args a) {
    enum { N = LANE_COLS };
    __shared__ float sdb[TILE_WARPS][2][FASTGLU_TILE_COLS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t ntc = (a.F + FASTGLU_TILE_COLS - 1) / FASTGLU_TILE_COLS;
    const int64_t ntr = (a.tokens + FASTGLU_SLAB_ROWS - 1) / FASTGLU_SLAB_ROWS;
    const int want_db = a.ws_dbias != NULL, want_dw = a.ws_dw != NULL;
    for (int64_t tile = blockIdx.x; tile < ntr * ntc; tile += gridDim.x) {
        const int64_t slab = tile / ntc, tc = tile % ntc;
        const int64_t j0 = tc * FASTGLU_TILE_COLS + (int64_t)lane * N;
        const int ncols = j0 >= a.F ? 0 : (int)(a.F - j0 < N ? a.F - j0 : N);
        float dbg[N], dbu[N];
#pragma unroll
        for (int k = 0; k < N; ++k) dbg[k] = dbu[k] = 0.0f;
        for (int r = warp; r < FASTGLU_SLAB_ROWS; r += TILE_WARPS) {
            const int64_t t = slab * FASTGLU_SLAB_ROWS + r;
            if (t >= a.tokens) break; /* uniform over the warp */
            const float w = a.weights ? load_weight(a.weights, a.w_dtype, t * a.w_stride) : 1.0f;
            float part = 0.0f;
            if (ncols == N) {
                float g[N], u[N], bg[N], bu[N], d[N], dg[N], du[N];
                load_operands<TIN, IL, N>(a, t, j0, g, u);
                load_bias<T, IL, N>(a, j0, bg, bu);
                load_dy<T, N>(a, t, j0, d);
#pragma unroll
                for (int k = 0; k < N; ++k) {
                    glu_grads q = glu_backward(a.m, g[k], u[k], bg[k], bu[k], w, d[k]);
                    dg[k] = q.dg, du[k] = q.du;
                    dbg[k] += q.dbg, dbu[k] += q.dbu;
                    part += q.dw;
                }
                store_grads<T, IL, N>(a, t, j0, dg, du);
            } else {
#pragma unroll
                for (int k = 0; k < N; ++k) {
                    if (k < ncols) {
                        const int64_t j = j0 + k;
                        float g, u, bg, bu;
                        load_operand1<TIN, IL>(a, t, j, &g, &u);
                        load_bias1<T, IL>(a, j, &bg, &bu);
                        const T *dp = (const T *)a.dy + t * a.dy_rs + j * a.dy_cs;
                        glu_grads q = glu_backward(a.m, g, u, bg, bu, w, to_f32(*dp));
                        store_grad1<T, IL>(a, t, j, q.dg, q.du);
                        dbg[k] += q.dbg, dbu[k] += q.dbu;
                        part += q.dw;
                    }
                }
            }
            if (want_dw) {
#pragma unroll
                for (int o = 16; o > 0; o >>= 1) part += __shfl_xor_sync(0xffffffffu, part, o);
                if (lane == 0) a.ws_dw[tc * a.tokens + t] = part;
            }
        }
        if (want_db) {
#pragma unroll
            for (int k = 0; k < N; ++k) {
                sdb[warp][0][lane * N + k] = dbg[k];
                sdb[warp][1][lane * N + k] = dbu[k];
            }
            __syncthreads();
            /* thread c < 256 sums column c of the tile over the warps in order, for gate and up */
            const int c = threadIdx.x;
            const int64_t j = tc * FASTGLU_TILE_COLS + c;
            if (c < FASTGLU_TILE_COLS && j < a.F) {
                float sg = 0.0f, su = 0.0f;
#pragma unroll
                for (int q = 0; q < TILE_WARPS; ++q) sg += sdb[q][0][c], su += sdb[q][1][c];
                a.ws_dbias[slab * 2 * a.F + j] = sg;
                a.ws_dbias[slab * 2 * a.F + a.F + j] = su;
            }
            __syncthreads(); /* sdb is reused by the next tile */
        }
    }
}

/* dbias[c] = sum over slabs in order; dweights[t] = sum over column tiles in order. */
template <typename T, int IL>
__global__ void __launch_bounds__(GLU_THREADS)
    glu_reduce_kernel(const float *ws_dbias, int64_t nslabs, void *dbias, const float *ws_dw,
                      int64_t ntiles, void *dweights, int w_dtype, int64_t tokens, int64_t F) {
    const int64_t n = 2 * F > tokens ? 2 * F : tokens;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        if (dbias && i < 2 * F) {
            float s = 0.0f;
            for (int64_t q = 0; q < nslabs; ++q) s += ws_dbias[q * 2 * F + i];
            /* partials are in [gate F | up F] order; the bias has the operands' layout */
            const int64_t o = !IL ? i : i < F ? 2 * i : 2 * (i - F) + 1;
            from_f32(&((T *)dbias)[o], s);
        }
        if (dweights && i < tokens) {
            float s = 0.0f;
            for (int64_t q = 0; q < ntiles; ++q) s += ws_dw[q * tokens + i];
            store_weight(dweights, w_dtype, i, s);
        }
    }
}

/* ---- launchers ------------------------------------------------------------------------------- */

static glu_math make_math(const fastglu_glu_params *p) {
    glu_math m;
    m.act = (int)p->activation;
    m.clamp = fastglu_clamps(p);
    m.c = p->clamp_value, m.offset = p->glu_linear_offset;
    m.gm = p->gate_multiplier, m.dm = p->down_multiplier;
    m.fp8_sat = fastglu_fp8_saturate();
    return m;
}

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
static void set_widths(glu_args *a, int il, size_t es, size_t in_es, int chunk_cols, int has_up_out) {
    const int in_bytes = chunk_cols * (int)in_es * (il ? 2 : 1);
    const int out_bytes = chunk_cols * (int)es * (il && has_up_out ? 2 : 1);
    const int cap_in = in_bytes < 16 ? in_bytes : 16, cap_out = out_bytes < 16 ? out_bytes : 16;
    const int cap_es = chunk_cols * (int)es * (il ? 2 : 1) < 16 ? chunk_cols * (int)es * (il ? 2 : 1) : 16;
    a->w_gate = access_width_cap(a->gate, a->gate_rs, a->tokens, in_es, cap_in);
    a->w_up = il ? 0 : access_width_cap(a->up, a->up_rs, a->tokens, in_es, cap_in);
    a->w_out = access_width_cap(a->out, a->out_rs, a->tokens, es, cap_out);
    a->w_out2 = a->out2 ? access_width_cap(a->out2, a->out2_rs, a->tokens, es, cap_out) : 0;
    a->w_dy = (a->dy && a->dy_cs == 1)
                  ? access_width_cap(a->dy, a->dy_rs, a->tokens, es, chunk_cols * (int)es < 16 ? chunk_cols * (int)es : 16)
                  : 0;
    a->w_bias_g = a->bias ? access_width_cap(a->bias, 0, 1, es, cap_es) : 0;
    a->w_bias_u = (a->bias && !il) ? access_width_cap((const char *)a->bias + a->F * es, 0, 1, es, cap_es) : 0;
}

#define FOR_T(dtype, MACRO)                                                                        \
    ((dtype) == FASTGLU_DTYPE_FP32 ? MACRO(float) : (dtype) == FASTGLU_DTYPE_FP16 ? MACRO(__half)  \
                                                                                  : MACRO(__nv_bfloat16))

extern "C" fastglu_status fastglu_glu_fwd_cuda(
    const fastglu_glu_params *params, const void *gate, int64_t gate_row_stride, const void *up,
    int64_t up_row_stride, const void *bias, const void *weights, fastglu_dtype weights_dtype,
    int64_t weights_stride, void *output, int64_t output_row_stride, void *saved_fp8,
    int64_t saved_fp8_row_stride, int64_t tokens, int64_t ffn_hidden_size, fastglu_dtype dtype,
    void *stream) {
    static const char fn[] = "fastglu_glu_fwd_cuda";
    int empty;
    fastglu_status st = fastglu_check_glu_fwd(fn, params, gate, gate_row_stride, up, up_row_stride,
                                              bias, weights, weights_dtype, weights_stride, output,
                                              output_row_stride, saved_fp8, saved_fp8_row_stride,
                                              tokens, ffn_hidden_size, dtype, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    glu_args a;
    memset(&a, 0, sizeof a);
    a.m = make_math(params);
    const int il = params->layout == FASTGLU_LAYOUT_INTERLEAVED;
    a.gate = gate, a.gate_rs = gate_row_stride, a.up = il ? NULL : up, a.up_rs = up_row_stride;
    a.bias = bias, a.weights = weights, a.w_stride = weights_stride, a.w_dtype = (int)weights_dtype;
    a.out = output, a.out_rs = output_row_stride;
    a.tokens = tokens, a.F = ffn_hidden_size;
    const size_t es = fastglu_dtype_size(dtype);
    if (!plan_flat(&a, es))
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE, "%s: tokens * F is too large", fn);
    set_widths(&a, il, es, es, (int)(16 / es), 0);
    if (saved_fp8) {
        /* a chunk's fp8 copy: E bytes of gate and E of up (SPLIT), or 2E interleaved bytes, at a
         * multiple of its own size within the row */
        const int e = (int)(16 / es), cap = il ? 2 * e : e;
        a.fp8 = (unsigned char *)saved_fp8, a.fp8_rs = saved_fp8_row_stride;
        a.w_fp8_g = access_width_cap(saved_fp8, saved_fp8_row_stride, tokens, 1, cap);
        a.w_fp8_u = access_width_cap((char *)saved_fp8 + ffn_hidden_size, saved_fp8_row_stride,
                                     tokens, 1, cap);
    }
    const dim3 grid(grid_size((a.chunks + GLU_THREADS - 1) / GLU_THREADS)), block(GLU_THREADS);
    void *args[] = {&a};
#define FWD_KERNEL(T) (il ? (const void *)glu_fwd_kernel<T, 1> : (const void *)glu_fwd_kernel<T, 0>)
    const void *kernel = FOR_T(dtype, FWD_KERNEL);
#undef FWD_KERNEL
    return launch_status(fn, cudaLaunchKernel(kernel, grid, block, args, 0, (cudaStream_t)stream));
}

extern "C" fastglu_status fastglu_glu_bwd_cuda(
    const fastglu_glu_params *params, const void *dy, int64_t dy_row_stride, int64_t dy_col_stride,
    const void *gate, int64_t gate_row_stride, const void *up, int64_t up_row_stride,
    fastglu_dtype input_dtype, const float *input_scale_inv, int64_t input_scale_stride,
    const void *bias, const void *weights, fastglu_dtype weights_dtype, int64_t weights_stride,
    void *d_gate, int64_t d_gate_row_stride, void *d_up, int64_t d_up_row_stride, void *dbias,
    void *dweights, void *workspace, size_t workspace_bytes, int64_t tokens,
    int64_t ffn_hidden_size, fastglu_dtype dtype, void *stream) {
    static const char fn[] = "fastglu_glu_bwd_cuda";
    int empty;
    fastglu_status st = fastglu_check_glu_bwd(
        fn, params, dy, dy_row_stride, dy_col_stride, gate, gate_row_stride, up, up_row_stride,
        input_dtype, input_scale_inv, input_scale_stride, bias, weights, weights_dtype,
        weights_stride, d_gate, d_gate_row_stride, d_up, d_up_row_stride, dbias, dweights, workspace,
        workspace_bytes, tokens, ffn_hidden_size, dtype, &empty);
    if (st != FASTGLU_SUCCESS) return st;
    cudaStream_t cs = (cudaStream_t)stream;
    const size_t es = fastglu_dtype_size(dtype);
    if (empty) { /* sums over nothing are zero */
        cudaError_t err = cudaSuccess;
        if (dbias && ffn_hidden_size > 0) err = cudaMemsetAsync(dbias, 0, 2 * ffn_hidden_size * es, cs);
        if (err == cudaSuccess && dweights && tokens > 0)
            err = cudaMemsetAsync(dweights, 0, tokens * fastglu_dtype_size(weights_dtype), cs);
        return launch_status(fn, err);
    }
    glu_args a;
    memset(&a, 0, sizeof a);
    a.m = make_math(params);
    const int il = params->layout == FASTGLU_LAYOUT_INTERLEAVED;
    const int fp8 = input_dtype == FASTGLU_DTYPE_FP8_E4M3;
    a.gate = gate, a.gate_rs = gate_row_stride, a.up = il ? NULL : up, a.up_rs = up_row_stride;
    a.scale_inv = fp8 ? input_scale_inv : NULL, a.scale_stride = input_scale_stride;
    a.bias = bias, a.weights = weights, a.w_stride = weights_stride, a.w_dtype = (int)weights_dtype;
    a.dy = dy, a.dy_rs = dy_row_stride, a.dy_cs = dy_col_stride;
    a.dy_mode = ((dy_col_stride == 0 || ffn_hidden_size == 1) && (dy_row_stride == 0 || tokens == 1))
                    ? DY_SCALAR
                : dy_col_stride == 1 ? DY_CHUNK
                                     : DY_STRIDED;
    a.out = d_gate, a.out_rs = d_gate_row_stride;
    a.out2 = il ? NULL : d_up, a.out2_rs = d_up_row_stride;
    a.tokens = tokens, a.F = ffn_hidden_size;
    const size_t in_es = fp8 ? 1 : es;
    void *args[] = {&a};
    if (!dbias && !dweights) {
        if (!plan_flat(&a, es))
            return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE, "%s: tokens * F is too large", fn);
        set_widths(&a, il, es, in_es, (int)(16 / es), 1);
        const dim3 grid(grid_size((a.chunks + GLU_THREADS - 1) / GLU_THREADS)), block(GLU_THREADS);
#define BWD_KERNEL(T)                                                                              \
    (fp8 ? (il ? (const void *)glu_bwd_kernel<T, fp8e4m3, 1> : (const void *)glu_bwd_kernel<T, fp8e4m3, 0>) \
         : (il ? (const void *)glu_bwd_kernel<T, T, 1> : (const void *)glu_bwd_kernel<T, T, 0>))
        const void *kernel = FOR_T(dtype, BWD_KERNEL);
#undef BWD_KERNEL
        return launch_status(fn, cudaLaunchKernel(kernel, grid, block, args, 0, cs));
    }
    /* with reductions: the tile kernel into the workspace, then the reduction */
    const fastglu_glu_workspace_layout ws =
        fastglu_glu_workspace(tokens, ffn_hidden_size, dbias != NULL, dweights != NULL);
    a.ws_dbias = dbias ? (float *)((char *)workspace + ws.dbias_offset) : NULL;
    a.ws_dw = dweights ? (float *)((char *)workspace + ws.dweights_offset) : NULL;
    set_widths(&a, il, es, in_es, LANE_COLS, 1);
    const int64_t ntr = (tokens + FASTGLU_SLAB_ROWS - 1) / FASTGLU_SLAB_ROWS;
    const int64_t ntc = (ffn_hidden_size + FASTGLU_TILE_COLS - 1) / FASTGLU_TILE_COLS;
    const dim3 tgrid(grid_size((uint64_t)ntr * (uint64_t)ntc)), tblock(TILE_WARPS * 32);
#define TILE_KERNEL(T)                                                                             \
    (fp8 ? (il ? (const void *)glu_bwd_tile_kernel<T, fp8e4m3, 1> : (const void *)glu_bwd_tile_kernel<T, fp8e4m3, 0>) \
         : (il ? (const void *)glu_bwd_tile_kernel<T, T, 1> : (const void *)glu_bwd_tile_kernel<T, T, 0>))
    const void *tkernel = FOR_T(dtype, TILE_KERNEL);
#undef TILE_KERNEL
    cudaError_t err = cudaLaunchKernel(tkernel, tgrid, tblock, args, 0, cs);
    if (err != cudaSuccess) return launch_status(fn, err);
    const float *wsb = a.ws_dbias, *wsw = a.ws_dw;
    int64_t nslabs = ntr, ntiles = ntc, T_ = tokens, F_ = ffn_hidden_size;
    int wdt = (int)weights_dtype;
    const int64_t n = 2 * F_ > T_ ? 2 * F_ : T_;
    const dim3 rgrid(grid_size((uint64_t)(n + GLU_THREADS - 1) / GLU_THREADS)), rblock(GLU_THREADS);
    void *rargs[] = {&wsb, &nslabs, &dbias, &wsw, &ntiles, &dweights, &wdt, &T_, &F_};
#define REDUCE_KERNEL(T) (il ? (const void *)glu_reduce_kernel<T, 1> : (const void *)glu_reduce_kernel<T, 0>)
    const void *rkernel = FOR_T(dtype, REDUCE_KERNEL);
#undef REDUCE_KERNEL
    return launch_status(fn, cudaLaunchKernel(rkernel, rgrid, rblock, rargs, 0, cs));
}
