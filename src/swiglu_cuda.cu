/*
 * swiglu_cuda.cu — SwiGLU forward and backward on the GPU (the CUDA backend), written as C.
 *
 * Math and layout: see include/fastglu.h (Megatron-Core fused_bias_swiglu.py: swiglu, swiglu_back).
 *   forward:  y[t, j]      = silu(x[t, j]) * x[t, F + j]
 *   backward: dx[t, j]     = dy[t, j] * x[t, F + j] * s * (1 + g * (1 - s)),  g = x[t, j], s = sigmoid(g)
 *             dx[t, F + j] = dy[t, j] * g * s
 *
 * Work decomposition: each row is cut into nvec = ceil(F / V) chunks of V = 16 / sizeof(T)
 * elements (16 bytes), and the tokens * nvec chunks are numbered row by row; thread i of the grid
 * takes chunk i (and i + the grid's size, ... when the grid is capped). Row and chunk come from one
 * division by nvec, done as a multiply-shift when the chunk count fits in 32 bits. So every warp is
 * full whatever F is, and no thread idles at the end of a row.
 *
 * A chunk moves 16 bytes of each tensor. Each tensor is read or written with the widest access
 * (16, 8, 4 or 2 bytes) that its alignment allows: the alignment of its base pointer, its row
 * stride, and for the up half the F elements that precede it (an F that is not a multiple of 8
 * leaves the up half only 8-, 4- or 2-byte aligned while the gate stays 16-byte aligned). The
 * access width is uniform over the launch, so the branch that picks it costs no divergence. The
 * last chunk of a row, when F is not a multiple of V, is loaded and stored element by element, its
 * loads all issued before the first use (one memory latency, as for a full chunk), and computed
 * like the others.
 *
 * The forward has two specialisations of that row kernel, picked per launch: where every access is
 * 16 bytes and the grid has a thread per chunk, a straight-line body on 32-bit chunk indices
 * (swiglu_fwd_aligned_kernel); where F is not a multiple of V and the output's rows are contiguous,
 * chunks of the flat output, so that every store is 16 bytes (swiglu_fwd_flat_kernel).
 * bench/PERF_NOTES.md (v4) has what each is measured to gain.
 *
 * The math is the family's SiLU (glu_cuda.cu) operation for operation: the sigmoid from the
 * special-function unit's 2^x and 1 / x (cuda_common.cuh), explicit roundings, so both paths give
 * the same bits (gates below -87.3 aside). (Version 2's IEEE division cost the forward up to 5 % at
 * large F on one H200: bench/PERF_NOTES.md, v3.)
 *
 * dy is read in one of three ways, chosen per launch: like the input (column stride 1), one scalar
 * (both strides 0: the expanded scalar of y.sum().backward()), or element by element with its own
 * strides. All offsets are int64.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <string.h>

#include "cuda_common.cuh"
#include "internal.h"

/* Threads per block, chosen by bench/tune/tune_swiglu.cu on an H200 (bench/PERF_NOTES.md). */
#ifndef FASTGLU_THREADS
#define FASTGLU_THREADS 128
#endif
#define MAX_THREADS 512 /* the largest block the tuner tries; kernels are bounded by it */
/* The forward's register cap, through the minimum resident blocks of MAX_THREADS: 4 x 512 =
 * 2048 threads per SM (<= 32 registers), so that enough loads are in flight. (The backward moves
 * 80 bytes per thread and needs no cap; a cap of 40 made it spill.) */
#define FWD_MIN_BLOCKS 4
#ifndef MAX_BLOCKS /* tests/emu caps it to exercise the grid-stride loop */
#define MAX_BLOCKS 2147483647LL
#endif

/* ---- 16-byte chunks moved with the widest aligned accesses ---------------------------------- */

typedef struct __align__(16) chunk16 {
    uint4 w;
} chunk16;

/* Cache policy of the chunk loads and stores (bench/PERF_NOTES.md): loads through the read-only
 * path (ld.global.nc), plain (ld.global), or streaming (ld.global.cs, evict first); stores plain
 * or streaming (st.global.cs). A template argument, so that the tuner times every policy through
 * the same kernel body; the library uses FASTGLU_LOAD / FASTGLU_STORE. */
enum load_policy { LOAD_NC = 0, LOAD_PLAIN = 1, LOAD_STREAM = 2 };
enum store_policy { STORE_PLAIN = 0, STORE_STREAM = 1 };
#ifndef FASTGLU_LOAD
#define FASTGLU_LOAD LOAD_NC
#endif
#ifndef FASTGLU_STORE
#define FASTGLU_STORE STORE_PLAIN
#endif

#ifndef FASTGLU_HOST_EMULATION
/* ld.global without .nc, whatever the compiler could prove about the pointer. */
static __device__ __forceinline__ uint4 ld_plain(const uint4 *p) {
    uint4 r;
    asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
}
static __device__ __forceinline__ uint2 ld_plain(const uint2 *p) {
    uint2 r;
    asm volatile("ld.global.v2.u32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
    return r;
}
static __device__ __forceinline__ unsigned ld_plain(const unsigned *p) {
    unsigned r;
    asm volatile("ld.global.u32 %0, [%1];" : "=r"(r) : "l"(p));
    return r;
}
static __device__ __forceinline__ unsigned short ld_plain(const unsigned short *p) {
    unsigned short r;
    asm volatile("ld.global.u16 %0, [%1];" : "=h"(r) : "l"(p));
    return r;
}
#else /* tests/emu compiles these kernels as host C++: a plain load there */
template <typename W> static inline W ld_plain(const W *p) { return emu_ld_plain(p); }
#endif

template <int LP, typename W> static __device__ __forceinline__ W ld(const W *p) {
    if (LP == LOAD_NC) return __ldg(p);
    if (LP == LOAD_STREAM) return __ldcs(p);
    return ld_plain(p);
}

/* Reads 16 bytes at p with accesses of `width` bytes (16, 8, 4 or 2; p is width-aligned). */
template <int LP> static __device__ __forceinline__ chunk16 load16(const void *p, int width) {
    chunk16 c;
    if (width == 16) {
        c.w = ld<LP>((const uint4 *)p);
    } else if (width == 8) {
        uint2 a = ld<LP>((const uint2 *)p), b = ld<LP>((const uint2 *)p + 1);
        c.w = make_uint4(a.x, a.y, b.x, b.y);
    } else if (width == 4) {
        const unsigned *q = (const unsigned *)p;
        c.w = make_uint4(ld<LP>(q), ld<LP>(q + 1), ld<LP>(q + 2), ld<LP>(q + 3));
    } else {
        const unsigned short *q = (const unsigned short *)p;
        unsigned short h[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) h[i] = ld<LP>(q + i);
        c.w = make_uint4(h[0] | (unsigned)h[1] << 16, h[2] | (unsigned)h[3] << 16,
                         h[4] | (unsigned)h[5] << 16, h[6] | (unsigned)h[7] << 16);
    }
    return c;
}

template <int SP, typename W> static __device__ __forceinline__ void st(W *p, W v) {
    if (SP == STORE_STREAM)
        __stcs(p, v);
    else
        *p = v;
}

/* Writes 16 bytes at p with accesses of `width` bytes. */
template <int SP> static __device__ __forceinline__ void store16(void *p, chunk16 c, int width) {
    if (width == 16) {
        st<SP>((uint4 *)p, c.w);
    } else if (width == 8) {
        st<SP>((uint2 *)p, make_uint2(c.w.x, c.w.y));
        st<SP>((uint2 *)p + 1, make_uint2(c.w.z, c.w.w));
    } else if (width == 4) {
        unsigned *q = (unsigned *)p;
        st<SP>(q, c.w.x), st<SP>(q + 1, c.w.y), st<SP>(q + 2, c.w.z), st<SP>(q + 3, c.w.w);
    } else {
        unsigned short *q = (unsigned short *)p;
        const unsigned v[4] = {c.w.x, c.w.y, c.w.z, c.w.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            st<SP>(q + 2 * i, (unsigned short)v[i]);
            st<SP>(q + 2 * i + 1, (unsigned short)(v[i] >> 16));
        }
    }
}

/* The V elements of T in a chunk. */
#define ELEMS(T) ((int)(16 / sizeof(T)))

template <typename T> static __device__ __forceinline__ float chunk_get(const chunk16 &c, int i) {
    T v[ELEMS(T)];
    memcpy(v, &c, 16);
    return to_f32(v[i]);
}

/* One element, in the family's operations (glu_cuda.cu's glu_forward / glu_backward for SiLU
 * without bias, weights or clamp), so that both give the same bits (for gates above -87.3:
 * cuda_common.cuh): y = (g s) u; d_gate = (dy u) act'(g) with act'(g) = (g s)(1 - s) + s,
 * d_up = dy (g s). */
static __device__ __forceinline__ float swiglu_elem_fwd(float g, float u) {
    return __fmul_rn(__fmul_rn(g, silu_sigmoid(g)), u);
}
static __device__ __forceinline__ void swiglu_elem_bwd(float g, float u, float d, float *dg,
                                                       float *du) {
    const float s = silu_sigmoid(g), a = __fmul_rn(g, s);
    const float da = __fadd_rn(__fmul_rn(a, __fsub_rn(1.0f, s)), s);
    *dg = __fmul_rn(__fmul_rn(d, u), da);
    *du = __fmul_rn(d, a);
}

/* The forward of one chunk: y = silu(g) * u, element by element (every forward kernel's math). */
template <typename T>
static __device__ __forceinline__ chunk16 swiglu_chunk_fwd(const chunk16 &g, const chunk16 &u) {
    T yv[ELEMS(T)];
#pragma unroll
    for (int k = 0; k < ELEMS(T); ++k)
        from_f32(&yv[k], swiglu_elem_fwd(chunk_get<T>(g, k), chunk_get<T>(u, k)));
    chunk16 r;
    memcpy(&r, yv, 16);
    return r;
}

/* The first n < V elements of a chunk, element by element, every load issued before any use (the
 * row's last, partial chunk); the rest of the chunk is zero. */
template <typename T>
static __device__ __forceinline__ chunk16 load_part(const T *p, int n) {
    T v[ELEMS(T)];
    memset(v, 0, sizeof v);
#pragma unroll
    for (int k = 0; k < ELEMS(T) - 1; ++k)
        if (k < n) v[k] = p[k];
    chunk16 c;
    memcpy(&c, v, 16);
    return c;
}
template <typename T>
static __device__ __forceinline__ void store_part(T *p, const chunk16 &c, int n) {
    T v[ELEMS(T)];
    memcpy(v, &c, 16);
#pragma unroll
    for (int k = 0; k < ELEMS(T) - 1; ++k)
        if (k < n) p[k] = v[k];
}

/* ---- row/chunk from a flat chunk index -------------------------------------------------------- */

/* Access widths (bytes) of the tensors of one launch. */
typedef struct widths {
    int in, up, out, out_up, dy;
} widths;

enum dy_mode { DY_CHUNK = 0, DY_SCALAR = 1, DY_STRIDED = 2 };

/* ---- kernels ------------------------------------------------------------------------------- */

/* Templates on the element type, dy's mode and the cache policy: one body stands for every
 * combination the launchers and the tuner use, where macros would paste the body once each. */

template <typename T, int LP, int SP>
__global__ void __launch_bounds__(MAX_THREADS, FWD_MIN_BLOCKS)
    swiglu_fwd_kernel(const T *__restrict__ input, int64_t in_rs, T *__restrict__ out,
                      int64_t out_rs, int64_t F, uint64_t chunks, fastdiv nvec, widths w) {
    enum { V = ELEMS(T) };
    const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < chunks; i += step) {
        const uint64_t t = fastdiv_div(nvec, i);
        const int64_t col = (int64_t)(i - t * nvec.d) * V;
        const T *gate = input + (int64_t)t * in_rs + col;
        T *y = out + (int64_t)t * out_rs + col;
        const int n = (int)(F - col < V ? F - col : V); /* < V: the row's last, partial chunk */
        chunk16 g, u;
        if (n == V) g = load16<LP>(gate, w.in), u = load16<LP>(gate + F, w.up);
        else g = load_part(gate, n), u = load_part(gate + F, n);
        const chunk16 r = swiglu_chunk_fwd<T>(g, u);
        if (n == V) store16<SP>(y, r, w.out);
        else store_part(y, r, n);
    }
}

/* The forward when every access is 16 bytes (F a multiple of V, the input's both halves and the
 * output 16-byte aligned row by row) and the grid has a thread per chunk (fewer than 2^31 chunks):
 * the row kernel's body without its width branches and grid-stride loop, on 32-bit chunk indices,
 * so that both loads issue back to back after ~30 instructions, as in Inductor's kernel. Measured
 * beside the row kernel (bench/PERF_NOTES.md, v4): forward at F = 2048 -3 %, elsewhere within the
 * benchmark's noise. */
template <typename T, int LP, int SP>
__global__ void __launch_bounds__(MAX_THREADS, FWD_MIN_BLOCKS)
    swiglu_fwd_aligned_kernel(const T *__restrict__ input, int64_t in_rs, T *__restrict__ out,
                              int64_t out_rs, unsigned F, unsigned chunks, unsigned nvec,
                              unsigned magic, unsigned shift) {
    enum { V = ELEMS(T) };
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= chunks) return;
    const unsigned t = (unsigned)(((uint64_t)__umulhi(i, magic) + i) >> shift); /* i / nvec */
    const unsigned col = (i - t * nvec) * V;
    const T *gate = input + (int64_t)t * in_rs + col;
    chunk16 g, u;
    g.w = ld<LP>((const uint4 *)gate);
    u.w = ld<LP>((const uint4 *)(gate + F));
    const chunk16 r = swiglu_chunk_fwd<T>(g, u);
    st<SP>((uint4 *)(out + (int64_t)t * out_rs + col), r.w);
}

/* The forward over a contiguous output when F is not a multiple of V (F > V, more than one row):
 * chunk i is the V consecutive elements of the flat [tokens * F] output starting at i * V, so that
 * every store but the output's last is 16 bytes and every warp writes whole sectors (the row
 * kernel's chunks there end at each row's partial chunk, stored element by element, and the rows
 * start only 8-, 4- or 2-byte aligned). A chunk lies in one row, or, near a row's end, in two: its
 * first n_here elements end row t, the rest start row t + 1 (F > V: never a third row). The reads
 * of a chunk within one row use the widths `w.in` / `w.up`, which the launcher bounds by the
 * alignment of the chunk's column (a multiple of gcd(F, V)); a chunk across two rows is read
 * element by element, every load issued before any use. */
template <typename T, int LP, int SP>
__global__ void __launch_bounds__(MAX_THREADS, FWD_MIN_BLOCKS)
    swiglu_fwd_flat_kernel(const T *__restrict__ input, int64_t in_rs, T *__restrict__ out,
                           int64_t F, uint64_t total, uint64_t chunks, fastdiv rows, widths w) {
    enum { V = ELEMS(T) };
    const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < chunks; i += step) {
        const uint64_t e = i * V;
        const uint64_t t = fastdiv_div(rows, e);
        const int64_t col = (int64_t)(e - t * (uint64_t)F);
        const T *gate = input + (int64_t)t * in_rs + col;
        const int n = (int)(total - e < (uint64_t)V ? total - e : (uint64_t)V); /* < V: the last */
        const int64_t n_here = F - col; /* elements of this chunk in row t, if fewer than n */
        chunk16 g, u;
        if (n_here >= n && n == V) {
            g = load16<LP>(gate, w.in), u = load16<LP>(gate + F, w.up);
        } else {
            T gv[V], uv[V];
            memset(gv, 0, sizeof gv);
            memset(uv, 0, sizeof uv);
            const T *next = gate + (in_rs - F); /* element k >= n_here: next[k] is row t + 1's */
#pragma unroll
            for (int k = 0; k < V; ++k) {
                if (k < n) {
                    const T *p = k < n_here ? gate + k : next + k;
                    gv[k] = p[0], uv[k] = p[F];
                }
            }
            memcpy(&g, gv, 16);
            memcpy(&u, uv, 16);
        }
        const chunk16 r = swiglu_chunk_fwd<T>(g, u);
        T *y = out + e;
        if (n == V) store16<SP>(y, r, w.out);
        else store_part(y, r, n);
    }
}

template <typename T, int DY, int LP, int SP>
__global__ void __launch_bounds__(MAX_THREADS)
    swiglu_bwd_kernel(const T *__restrict__ dy, int64_t dy_rs, int64_t dy_cs, const T *input,
                      int64_t in_rs, T *dinput, int64_t din_rs, int64_t F, uint64_t chunks,
                      fastdiv nvec, widths w) {
    /* input and dinput are not __restrict__: the in-place backward passes the same storage (each
     * thread reads its elements before it writes them, and no element is read twice). */
    enum { V = ELEMS(T) };
    const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
    const float dy_scalar = DY == DY_SCALAR ? to_f32(dy[0]) : 0.0f;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < chunks; i += step) {
        const uint64_t t = fastdiv_div(nvec, i);
        const int64_t col = (int64_t)(i - t * nvec.d) * V;
        const T *gate = input + (int64_t)t * in_rs + col;
        const T *d = dy + (int64_t)t * dy_rs + col * dy_cs;
        T *dgate = dinput + (int64_t)t * din_rs + col;
        const int n = (int)(F - col < V ? F - col : V); /* < V: the row's last, partial chunk */
        chunk16 g, u, dc;
        if (n == V) {
            g = load16<LP>(gate, w.in), u = load16<LP>(gate + F, w.up);
            if (DY == DY_CHUNK) dc = load16<LP>(d, w.dy);
        } else {
            g = load_part(gate, n), u = load_part(gate + F, n);
            if (DY == DY_CHUNK) dc = load_part(d, n);
        }
        T dgv[V], duv[V];
#pragma unroll
        for (int k = 0; k < V; ++k) {
            float dk = DY == DY_CHUNK ? chunk_get<T>(dc, k)
                     : DY == DY_SCALAR ? dy_scalar
                                       : (k < n ? to_f32(d[k * dy_cs]) : 0.0f);
            float a, b;
            swiglu_elem_bwd(chunk_get<T>(g, k), chunk_get<T>(u, k), dk, &a, &b);
            from_f32(&dgv[k], a);
            from_f32(&duv[k], b);
        }
        chunk16 a, b;
        memcpy(&a, dgv, 16);
        memcpy(&b, duv, 16);
        if (n == V) {
            store16<SP>(dgate, a, w.out);
            store16<SP>(dgate + F, b, w.out_up);
        } else {
            store_part(dgate, a, n);
            store_part(dgate + F, b, n);
        }
    }
}

/* ---- launch helpers ----------------------------------------------------------------------- */

typedef struct launch_plan {
    uint64_t chunks;
    fastdiv nvec;
    unsigned blocks, threads;
} launch_plan;

/* Blocks of `threads` for `chunks` chunks, a thread each, capped at MAX_BLOCKS (the kernels then
 * stride over the grid). */
static unsigned grid_blocks(uint64_t chunks, unsigned threads) {
    const uint64_t blocks = (chunks + threads - 1) / threads;
    return (unsigned)(blocks < (uint64_t)MAX_BLOCKS ? blocks : (uint64_t)MAX_BLOCKS);
}

/* Grid for tokens x ceil(F / V) chunks with `threads` per block; 0 if that count overflows. */
static int plan_launch(int64_t tokens, int64_t F, size_t esize, int threads, launch_plan *p) {
    const int64_t v = (int64_t)(16 / esize);
    const uint64_t nvec = (uint64_t)((F + v - 1) / v);
    if (nvec != 0 && (uint64_t)tokens > UINT64_MAX / 2 / nvec) return 0;
    p->chunks = (uint64_t)tokens * nvec;
    p->nvec = make_fastdiv(nvec, p->chunks);
    p->blocks = grid_blocks(p->chunks, (unsigned)threads);
    p->threads = (unsigned)threads;
    return 1;
}

static fastglu_status too_large(const char *fn) {
    return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE, "%s: tokens * F is too large", fn);
}

/* The launchers the API and the tuner share: one kernel launch on `stream`; returns its status. */
template <typename T, int LP = FASTGLU_LOAD, int SP = FASTGLU_STORE>
static cudaError_t launch_fwd(const launch_plan *p, cudaStream_t stream, const void *input,
                              int64_t in_rs, void *out, int64_t out_rs, int64_t tokens, int64_t F) {
    const size_t es = sizeof(T);
    const int64_t V = ELEMS(T);
    widths w;
    w.out_up = w.dy = 0;
    const T *x = (const T *)input;
    T *y = (T *)out;
    if (F % V != 0 && F > V && tokens > 1 && out_rs == F) { /* the flat kernel (see there) */
        /* a chunk's column is a multiple of gcd(F, V) elements: a power of two, as V is */
        int64_t g = 1;
        while (g < V && F % (2 * g) == 0) g *= 2;
        const int cap = (int)(g * (int64_t)es);
        w.in = access_width_cap(input, in_rs, tokens, es, cap);
        w.up = access_width_cap(x + F, in_rs, tokens, es, cap);
        w.out = access_width_cap(out, 0, 1, es, 16);
        uint64_t total = (uint64_t)tokens * (uint64_t)F, chunks = (total + V - 1) / V;
        fastdiv rows = make_fastdiv((uint64_t)F, total + V);
        void *args[] = {&x, &in_rs, &y, &F, &total, &chunks, &rows, &w};
        return cudaLaunchKernel((const void *)swiglu_fwd_flat_kernel<T, LP, SP>,
                                dim3(grid_blocks(chunks, p->threads)), dim3(p->threads), args, 0,
                                stream);
    }
    w.in = access_width(input, in_rs, tokens, es);
    w.up = access_width(x + F, in_rs, tokens, es);
    w.out = access_width(out, out_rs, tokens, es);
    if (F % V == 0 && w.in == 16 && w.up == 16 && w.out == 16 && p->nvec.small &&
        p->chunks < 0x80000000ull && (uint64_t)p->blocks * p->threads >= p->chunks) {
        unsigned f32 = (unsigned)F, chunks32 = (unsigned)p->chunks, nvec32 = (unsigned)p->nvec.d;
        unsigned magic = p->nvec.magic, shift = p->nvec.shift;
        void *args[] = {&x, &in_rs, &y, &out_rs, &f32, &chunks32, &nvec32, &magic, &shift};
        return cudaLaunchKernel((const void *)swiglu_fwd_aligned_kernel<T, LP, SP>,
                                dim3(p->blocks), dim3(p->threads), args, 0, stream);
    }
    uint64_t chunks = p->chunks;
    fastdiv nvec = p->nvec;
    void *args[] = {&x, &in_rs, &y, &out_rs, &F, &chunks, &nvec, &w};
    return cudaLaunchKernel((const void *)swiglu_fwd_kernel<T, LP, SP>, dim3(p->blocks),
                            dim3(p->threads), args, 0, stream);
}

/* dy is one value for every element: both strides 0 (an expanded scalar), or one row of one. */
static int dy_is_scalar(int64_t dy_rs, int64_t dy_cs, int64_t tokens, int64_t F) {
    return (dy_cs == 0 || F == 1) && (dy_rs == 0 || tokens == 1);
}

template <typename T, int LP = FASTGLU_LOAD, int SP = FASTGLU_STORE>
static cudaError_t launch_bwd(const launch_plan *p, cudaStream_t stream, const void *dy,
                              int64_t dy_rs, int64_t dy_cs, const void *input, int64_t in_rs,
                              void *dinput, int64_t din_rs, int64_t tokens, int64_t F) {
    const size_t es = sizeof(T);
    widths w;
    w.in = access_width(input, in_rs, tokens, es);
    w.up = access_width((const T *)input + F, in_rs, tokens, es);
    w.out = access_width(dinput, din_rs, tokens, es);
    w.out_up = access_width((const T *)dinput + F, din_rs, tokens, es);
    w.dy = dy_cs == 1 ? access_width(dy, dy_rs, tokens, es) : 0;
    const T *g = (const T *)dy, *x = (const T *)input;
    T *dx = (T *)dinput;
    uint64_t chunks = p->chunks;
    fastdiv nvec = p->nvec;
    void *args[] = {&g, &dy_rs, &dy_cs, &x, &in_rs, &dx, &din_rs, &F, &chunks, &nvec, &w};
#define BWD_KERNEL(LOADS)                                                                          \
    (dy_is_scalar(dy_rs, dy_cs, tokens, F) ? (const void *)swiglu_bwd_kernel<T, DY_SCALAR, LOADS, SP> \
     : dy_cs == 1                          ? (const void *)swiglu_bwd_kernel<T, DY_CHUNK, LOADS, SP>  \
                                           : (const void *)swiglu_bwd_kernel<T, DY_STRIDED, LOADS, SP>)
    /* In place, the kernel writes the memory it reads, which the read-only (.nc) path does not
     * allow for: plain loads then (equally fast, bench/PERF_NOTES.md). */
    const void *kernel = input == dinput ? BWD_KERNEL(LOAD_PLAIN) : BWD_KERNEL(LP);
#undef BWD_KERNEL
    return cudaLaunchKernel(kernel, dim3(p->blocks), dim3(p->threads), args, 0, stream);
}

/* ---- public entry points ------------------------------------------------------------------ */

/* launcher<T>(...) for the element type T of a (validated) fastglu_dtype. */
#define LAUNCH_FOR_DTYPE(dtype, launcher, ...)                                                     \
    ((dtype) == FASTGLU_DTYPE_FP32   ? launcher<float>(__VA_ARGS__)                                \
     : (dtype) == FASTGLU_DTYPE_FP16 ? launcher<__half>(__VA_ARGS__)                               \
                                     : launcher<__nv_bfloat16>(__VA_ARGS__))

extern "C" int fastglu_cuda_built(void) { return 1; }

extern "C" int fastglu_cuda_available(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no device" so it does not leak into a later call */
        return 0;
    }
    return n > 0;
}

extern "C" fastglu_status fastglu_swiglu_fwd_cuda(const void *input, int64_t input_row_stride,
                                                  void *output, int64_t output_row_stride,
                                                  int64_t tokens, int64_t ffn_hidden_size,
                                                  fastglu_dtype dtype, void *stream) {
    static const char fn[] = "fastglu_swiglu_fwd_cuda";
    int empty;
    fastglu_status st = fastglu_check_swiglu_fwd(fn, input, input_row_stride, output,
                                                 output_row_stride, tokens, ffn_hidden_size, dtype,
                                                 &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    launch_plan p;
    if (!plan_launch(tokens, ffn_hidden_size, fastglu_dtype_size(dtype), FASTGLU_THREADS, &p))
        return too_large(fn);
    cudaStream_t cs = (cudaStream_t)stream;
    const cudaError_t err = LAUNCH_FOR_DTYPE(dtype, launch_fwd, &p, cs, input, input_row_stride,
                                             output, output_row_stride, tokens, ffn_hidden_size);
    return launch_status(fn, err);
}

extern "C" fastglu_status fastglu_swiglu_bwd_cuda(const void *dy, int64_t dy_row_stride,
                                                  int64_t dy_col_stride, const void *input,
                                                  int64_t input_row_stride, void *dinput,
                                                  int64_t dinput_row_stride, int64_t tokens,
                                                  int64_t ffn_hidden_size, fastglu_dtype dtype,
                                                  void *stream) {
    static const char fn[] = "fastglu_swiglu_bwd_cuda";
    int empty;
    fastglu_status st = fastglu_check_swiglu_bwd(fn, dy, dy_row_stride, dy_col_stride, input,
                                                 input_row_stride, dinput, dinput_row_stride,
                                                 tokens, ffn_hidden_size, dtype, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    launch_plan p;
    if (!plan_launch(tokens, ffn_hidden_size, fastglu_dtype_size(dtype), FASTGLU_THREADS, &p))
        return too_large(fn);
    cudaStream_t cs = (cudaStream_t)stream;
    const cudaError_t err =
        LAUNCH_FOR_DTYPE(dtype, launch_bwd, &p, cs, dy, dy_row_stride, dy_col_stride, input,
                         input_row_stride, dinput, dinput_row_stride, tokens, ffn_hidden_size);
    return launch_status(fn, err);
}
