/*
 * swiglu_v1.cuh — version 1 of src/swiglu_cuda.cu (commit 'Tuning harness over the library's
 * kernels'), kept so that bench/tune/tune_swiglu.cu can time it beside the current kernels in the
 * same process (bench/PERF_NOTES.md). Its public entry points are left out; it is included inside
 * a namespace. Not built into the library.
 *
 * swiglu_cuda.cu v1 — SwiGLU forward and backward on the GPU (the CUDA backend), written as C.
 *
 * Math and layout: see include/fastglu.h (Megatron-Core fused_bias_swiglu.py: swiglu, swiglu_back).
 *   forward:  y[t, j]      = silu(x[t, j]) * x[t, F + j]
 *   backward: dx[t, j]     = dy[t, j] * x[t, F + j] * s * (1 + g * (1 - s)),  g = x[t, j], s = sigmoid(g)
 *             dx[t, F + j] = dy[t, j] * g * s
 *
 * Work decomposition: one thread owns V consecutive columns j .. j+V-1 of one row; it loads the
 * V gate and V up elements as two packed vectors (16 bytes each when alignment allows), computes
 * in fp32, and stores one (forward) or two (backward) packed vectors. A block is 256 threads
 * shaped (bx, by): bx threads across the row's F/V vectors (a power of two <= 256) and by rows;
 * the grid covers the row in x and strides over rows in y. V is the widest of 16/8/4/2/1 elements
 * for which every pointer, every row stride and F are multiples (the second half of a row starts
 * F elements in, so an odd F forces V = 1). All offsets are int64.
 *
 * dy is read in one of three ways, chosen per launch: packed like the input (column stride 1,
 * aligned), one scalar (both strides 0: the expanded scalar of y.sum().backward()), or element by
 * element with its own strides.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <string.h>

#include "internal.h"

#define MAX_THREADS 512 /* the largest block a tuning may choose; kernels are bounded by it */
#define MAX_GRID_Y 65535

/* The launch configuration: threads per block, rows per thread, cache policy. The library's
 * defaults below were chosen by bench/tune/tune_swiglu.cu on an H200 (bench/PERF_NOTES.md). */
#ifndef FASTGLU_THREADS
#define FASTGLU_THREADS 256
#endif
#ifndef FASTGLU_FWD_ROWS
#define FASTGLU_FWD_ROWS 1
#endif
#ifndef FASTGLU_FWD_HINT
#define FASTGLU_FWD_HINT HINT_DEFAULT
#endif
#ifndef FASTGLU_BWD_ROWS
#define FASTGLU_BWD_ROWS 1
#endif
#ifndef FASTGLU_BWD_HINT
#define FASTGLU_BWD_HINT HINT_DEFAULT
#endif

/* (to_f32 and from_f32 are the current file's, identical to version 1's.) Version 1's sigmoid, which
 * the library's kernels no longer use (v3 computes it from 2^x and 1 / x, cuda_common.cuh): */
static __device__ __forceinline__ float sigmoid_f32(float x) { return 1.0f / (1.0f + __expf(-x)); }

/* V elements of T, aligned to their size so that one load/store instruction moves them.
 * A template: one definition serves 3 dtypes x 4 widths, which a macro would repeat 12 times. */
template <typename T, int V> struct __align__(sizeof(T) * V) pack {
    T v[V];
};

/* The integer word of a pack's size, for the cache-hinted load/store intrinsics. */
template <int BYTES> struct word_of;
template <> struct word_of<16> {
    typedef uint4 type;
};
template <> struct word_of<8> {
    typedef uint2 type;
};
template <> struct word_of<4> {
    typedef unsigned int type;
};
template <> struct word_of<2> {
    typedef unsigned short type;
};

/* Cache policy of global loads and stores: default (loads through the read-only path),
 * streaming (ld.cs/st.cs: evict first), or L2 only (ld.cg/st.cg). */
enum cache_hint { HINT_DEFAULT = 0, HINT_STREAM = 1, HINT_L2ONLY = 2 };

template <int HINT, typename T, int V>
static __device__ __forceinline__ pack<T, V> load_pack(const T *p) {
    typedef typename word_of<sizeof(T) * V>::type W;
    W w = HINT == HINT_STREAM   ? __ldcs((const W *)p)
          : HINT == HINT_L2ONLY ? __ldcg((const W *)p)
                                : __ldg((const W *)p);
    pack<T, V> r;
    memcpy(&r, &w, sizeof r);
    return r;
}

template <int HINT, typename T, int V>
static __device__ __forceinline__ void store_pack(T *p, const pack<T, V> &v) {
    typedef typename word_of<sizeof(T) * V>::type W;
    W w;
    memcpy(&w, &v, sizeof w);
    if (HINT == HINT_STREAM)
        __stcs((W *)p, w);
    else if (HINT == HINT_L2ONLY)
        __stcg((W *)p, w);
    else
        *(W *)p = w;
}

enum dy_mode { DY_PACKED = 0, DY_SCALAR = 1, DY_STRIDED = 2 };

/* ---- kernels ------------------------------------------------------------------------------- */

/* Each thread: columns [col, col + V) of ROWS rows spaced blockDim.y apart; all loads of the ROWS
 * rows are issued before the first use. */
template <typename T, int V, int ROWS, int HINT>
__global__ void __launch_bounds__(MAX_THREADS)
    swiglu_fwd_kernel(const T *__restrict__ input, int64_t in_rs, T *__restrict__ out,
                      int64_t out_rs, int64_t tokens, int64_t F) {
    typedef pack<T, V> P;
    const int64_t col = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (col >= F) return;
    const int64_t rows_per_block = (int64_t)blockDim.y * ROWS;
    const int64_t step = (int64_t)gridDim.y * rows_per_block;
    for (int64_t t0 = (int64_t)blockIdx.y * rows_per_block + threadIdx.y; t0 < tokens; t0 += step) {
        P g[ROWS], u[ROWS];
#pragma unroll
        for (int k = 0; k < ROWS; ++k) {
            const int64_t t = t0 + (int64_t)k * blockDim.y;
            if (t < tokens) {
                const T *gate = input + t * in_rs + col;
                g[k] = load_pack<HINT, T, V>(gate);
                u[k] = load_pack<HINT, T, V>(gate + F);
            }
        }
#pragma unroll
        for (int k = 0; k < ROWS; ++k) {
            const int64_t t = t0 + (int64_t)k * blockDim.y;
            if (t < tokens) {
                P y;
#pragma unroll
                for (int i = 0; i < V; ++i) {
                    float gf = to_f32(g[k].v[i]);
                    from_f32(&y.v[i], gf * sigmoid_f32(gf) * to_f32(u[k].v[i]));
                }
                store_pack<HINT>(out + t * out_rs + col, y);
            }
        }
    }
}

template <typename T, int V, int DY, int ROWS, int HINT>
__global__ void __launch_bounds__(MAX_THREADS)
    swiglu_bwd_kernel(const T *__restrict__ dy, int64_t dy_rs, int64_t dy_cs, const T *input,
                      int64_t in_rs, T *dinput, int64_t din_rs, int64_t tokens, int64_t F) {
    /* input and dinput are not __restrict__: the in-place backward passes the same storage (each
     * thread reads its elements before it writes them, and no element is read twice). */
    typedef pack<T, V> P;
    const int64_t col = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (col >= F) return;
    const int64_t rows_per_block = (int64_t)blockDim.y * ROWS;
    const int64_t step = (int64_t)gridDim.y * rows_per_block;
    const float dy_scalar = DY == DY_SCALAR ? to_f32(dy[0]) : 0.0f;
    for (int64_t t0 = (int64_t)blockIdx.y * rows_per_block + threadIdx.y; t0 < tokens; t0 += step) {
        P g[ROWS], u[ROWS];
        float d[ROWS][V];
#pragma unroll
        for (int k = 0; k < ROWS; ++k) {
            const int64_t t = t0 + (int64_t)k * blockDim.y;
            if (t < tokens) {
                const T *gate = input + t * in_rs + col;
                g[k] = load_pack<HINT, T, V>(gate);
                u[k] = load_pack<HINT, T, V>(gate + F);
                if (DY == DY_PACKED) {
                    P dp = load_pack<HINT, T, V>(dy + t * dy_rs + col);
#pragma unroll
                    for (int i = 0; i < V; ++i) d[k][i] = to_f32(dp.v[i]);
                } else if (DY == DY_SCALAR) {
#pragma unroll
                    for (int i = 0; i < V; ++i) d[k][i] = dy_scalar;
                } else {
                    const T *dr = dy + t * dy_rs + col * dy_cs;
#pragma unroll
                    for (int i = 0; i < V; ++i) d[k][i] = to_f32(dr[i * dy_cs]);
                }
            }
        }
#pragma unroll
        for (int k = 0; k < ROWS; ++k) {
            const int64_t t = t0 + (int64_t)k * blockDim.y;
            if (t < tokens) {
                P dg, du;
#pragma unroll
                for (int i = 0; i < V; ++i) {
                    float gf = to_f32(g[k].v[i]), uf = to_f32(u[k].v[i]);
                    float s = sigmoid_f32(gf);
                    from_f32(&dg.v[i], d[k][i] * s * (1.0f + gf * (1.0f - s)) * uf);
                    from_f32(&du.v[i], d[k][i] * gf * s);
                }
                T *dgate = dinput + t * din_rs + col;
                store_pack<HINT>(dgate, dg);
                store_pack<HINT>(dgate + F, du);
            }
        }
    }
}

/* ---- launch helpers ----------------------------------------------------------------------- */

/* Widest vector (elements) such that 16 bytes >= V*esize and every address and element count in
 * `addr_or` / `count_or` (bitwise ORs of all of them) is a multiple of V elements. */
static int pick_vector_width(size_t esize, uintptr_t addr_or, int64_t count_or) {
    int v = (int)(16 / esize);
    while (v > 1 && ((addr_or % (v * esize)) != 0 || (count_or % v) != 0)) v /= 2;
    return v;
}

typedef struct launch_shape {
    dim3 grid, block;
} launch_shape;

/* Block and grid for a [tokens, F] launch with V-wide vectors, `threads` per block and `rows` rows
 * per thread; returns 0 if F needs more than 2^31 - 1 blocks across (F > 2^39 elements). */
static int shape_for(int64_t tokens, int64_t F, int v, int threads, int rows, launch_shape *out) {
    launch_shape s;
    int64_t nvec = F / v;
    unsigned bx = 1;
    while (bx < (unsigned)threads && (int64_t)bx < nvec) bx *= 2;
    unsigned by = threads / bx;
    int64_t gy = (tokens + (int64_t)by * rows - 1) / ((int64_t)by * rows);
    int64_t gx = (nvec + bx - 1) / bx;
    if (gx > INT32_MAX) return 0;
    s.block = dim3(bx, by, 1);
    s.grid = dim3((unsigned)gx, (unsigned)(gy < MAX_GRID_Y ? gy : MAX_GRID_Y), 1);
    *out = s;
    return 1;
}

static fastglu_status too_wide(const char *fn, int64_t F) {
    return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                             "%s: ffn_hidden_size = %lld is too large for one launch", fn,
                             (long long)F);
}

static fastglu_status check_launch(const char *fn) {
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        return fastglu_set_error(FASTGLU_ERROR_CUDA, "%s: kernel launch failed: %s", fn,
                                 cudaGetErrorString(err));
    return FASTGLU_SUCCESS;
}

/* V clipped to 16 bytes: the launchers' switch lists every width, the pick never exceeds 16 bytes. */
#define WIDTH(T, V) (sizeof(T) * (V) <= 16 ? (V) : (int)(16 / sizeof(T)))

template <typename T>
static void launch_fwd(int v, launch_shape s, cudaStream_t stream, const void *input, int64_t in_rs,
                       void *out, int64_t out_rs, int64_t tokens, int64_t F) {
#define FWD_CASE(V)                                                                                \
    case V:                                                                                        \
        swiglu_fwd_kernel<T, WIDTH(T, V), FASTGLU_FWD_ROWS, FASTGLU_FWD_HINT>                      \
            <<<s.grid, s.block, 0, stream>>>((const T *)input, in_rs, (T *)out, out_rs, tokens,    \
                                             F);                                                   \
        break;
    switch (v) {
        FWD_CASE(8)
        FWD_CASE(4)
        FWD_CASE(2)
        FWD_CASE(1)
    }
#undef FWD_CASE
}

template <typename T, int DY>
static void launch_bwd_mode(int v, launch_shape s, cudaStream_t stream, const void *dy,
                            int64_t dy_rs, int64_t dy_cs, const void *input, int64_t in_rs,
                            void *dinput, int64_t din_rs, int64_t tokens, int64_t F) {
#define BWD_CASE(V)                                                                                \
    case V:                                                                                        \
        swiglu_bwd_kernel<T, WIDTH(T, V), DY, FASTGLU_BWD_ROWS, FASTGLU_BWD_HINT>                  \
            <<<s.grid, s.block, 0, stream>>>((const T *)dy, dy_rs, dy_cs, (const T *)input, in_rs, \
                                             (T *)dinput, din_rs, tokens, F);                      \
        break;
    switch (v) {
        BWD_CASE(8)
        BWD_CASE(4)
        BWD_CASE(2)
        BWD_CASE(1)
    }
#undef BWD_CASE
}

template <typename T>
static void launch_bwd(int v, int mode, launch_shape s, cudaStream_t stream, const void *dy,
                       int64_t dy_rs, int64_t dy_cs, const void *input, int64_t in_rs, void *dinput,
                       int64_t din_rs, int64_t tokens, int64_t F) {
    if (mode == DY_PACKED)
        launch_bwd_mode<T, DY_PACKED>(v, s, stream, dy, dy_rs, dy_cs, input, in_rs, dinput, din_rs,
                                      tokens, F);
    else if (mode == DY_SCALAR)
        launch_bwd_mode<T, DY_SCALAR>(v, s, stream, dy, dy_rs, dy_cs, input, in_rs, dinput, din_rs,
                                      tokens, F);
    else
        launch_bwd_mode<T, DY_STRIDED>(v, s, stream, dy, dy_rs, dy_cs, input, in_rs, dinput, din_rs,
                                       tokens, F);
}
