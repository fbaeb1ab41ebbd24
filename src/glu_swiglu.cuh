/*
 * glu_swiglu.cuh — the gated-linear-unit family's kernels for plain SwiGLU (included by glu_cuda.cu,
 * which tests/emu compiles as host C++; also by bench/tune, which compiles them apart): SiLU with
 * no bias, weights, clamp, offset or multipliers (math mode MM_K with k = 1), the SPLIT layout,
 * operands of the compute dtype, no fp8 copy and no reductions. fastglu_glu_*_cuda route that case
 * here (swiglu_fwd_case / swiglu_bwd_case), and fastglu_swiglu_*_cuda are that case with
 * up = gate + F.
 *   forward:  y[t, j]      = silu(g) * u,  g = gate[t, j], u = up[t, j]
 *   backward: d_gate[t, j] = dy[t, j] * u * s * (1 + g * (1 - s)),  s = sigmoid(g)
 *             d_up[t, j]   = dy[t, j] * g * s
 * The per-element math is the family's (glu_math.cuh: glu_forward / glu_backward in mode MM_K with
 * k = 1), so these kernels give the general kernels' bits.
 *
 * Work decomposition: each row is cut into nvec = ceil(F / V) chunks of V = 16 / sizeof(T)
 * elements (16 bytes), and the tokens * nvec chunks are numbered row by row; thread i of the grid
 * takes chunk i (and i + the grid's size, ... when the grid is capped). Row and chunk come from one
 * division by nvec, done as a multiply-shift when the chunk count fits in 32 bits. So every warp is
 * full whatever F is, and no thread idles at the end of a row.
 *
 * A chunk moves 16 bytes of each tensor. Each tensor is read or written with the widest access
 * (16, 8, 4 or 2 bytes) that its alignment allows: the alignment of its base pointer and its row
 * stride (Megatron's up = gate + F with an F that is not a multiple of 8 leaves up only 8-, 4- or
 * 2-byte aligned while the gate stays 16-byte aligned). The access width is uniform over the
 * launch, so the branch that picks it costs no divergence. The last chunk of a row, when F is not
 * a multiple of V, is loaded and stored element by element, its loads all issued before the first
 * use (one memory latency, as for a full chunk), and computed like the others.
 *
 * The forward has two specialisations of that row kernel, picked per launch: where every access is
 * 16 bytes and the grid has a thread per chunk, a straight-line body on 32-bit chunk indices
 * (swiglu_fwd_aligned_kernel); where F is not a multiple of V and the output's rows are contiguous,
 * chunks of the flat output, so that every store is 16 bytes (swiglu_fwd_flat_kernel).
 * bench/PERF_NOTES.md (v4) has what each is measured to gain. 128 threads per block, the
 * forward held to <= 32 registers.
 *
 * dy is read in one of three ways, chosen per launch: like the operands (column stride 1), one
 * scalar (both strides 0: the expanded scalar of y.sum().backward()), or element by element with
 * its own strides. All offsets are int64.
 *
 * The includer defines `debug_max_blocks` (fastglu_debug_set_max_blocks: 0 = no cap) first.
 */
#ifndef FASTGLU_GLU_SWIGLU_CUH
#define FASTGLU_GLU_SWIGLU_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <string.h>

#include "cuda_common.cuh"
#include "glu_math.cuh"
#include "internal.h"

/* Threads per block, chosen by bench/tune/tune_swiglu.cu on an H200 (bench/PERF_NOTES.md). */
#ifndef FASTGLU_THREADS
#define FASTGLU_THREADS 128
#endif
#define SWIGLU_MAX_THREADS 512 /* the largest block the tuner tries; kernels are bounded by it */
/* The forward's register cap, through the minimum resident blocks of SWIGLU_MAX_THREADS: 4 x 512 =
 * 2048 threads per SM (<= 32 registers), so that enough loads are in flight. (The backward moves
 * 80 bytes per thread and needs no cap; a cap of 40 made it spill.) */
#define SWIGLU_FWD_MIN_BLOCKS 4
#ifndef MAX_BLOCKS /* an includer's own cap (tests cap grids with fastglu_debug_set_max_blocks) */
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
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
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

/* One element: the family's math (glu_math.cuh) in mode MM_K for SiLU (k = 1), without bias,
 * weights or clamp: the general kernels' operations, so the same bits. */
static __device__ __forceinline__ glu_math swiglu_math(void) {
    glu_math m;
    memset(&m, 0, sizeof m);
    m.k = 1.0f, m.kl = -LOG2E, m.offset = -0.0f, m.gm = m.dm = 1.0f; /* make_math's SILU values */
    return m;
}
static __device__ __forceinline__ float swiglu_elem_fwd(float g, float u) {
    return glu_forward<MM_K, 0, 0>(swiglu_math(), g, u, 0.0f, 0.0f, 1.0f);
}
static __device__ __forceinline__ void swiglu_elem_bwd(float g, float u, float d, float *dg,
                                                       float *du) {
    const glu_grads q = glu_backward<MM_K, 0, 0>(swiglu_math(), g, u, 0.0f, 0.0f, 1.0f, d);
    *dg = q.dg, *du = q.du;
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
template <typename T> static __device__ __forceinline__ chunk16 load_part(const T *p, int n) {
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
__global__ void __launch_bounds__(SWIGLU_MAX_THREADS, SWIGLU_FWD_MIN_BLOCKS)
    swiglu_fwd_kernel(const T *__restrict__ gate_p, int64_t gate_rs, const T *__restrict__ up_p,
                      int64_t up_rs, T *__restrict__ out, int64_t out_rs, int64_t F,
                      uint64_t chunks, fastdiv nvec, widths w) {
    enum { V = ELEMS(T) };
    const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < chunks; i += step) {
        const uint64_t t = fastdiv_div(nvec, i);
        const int64_t col = (int64_t)(i - t * nvec.d) * V;
        const T *gate = gate_p + (int64_t)t * gate_rs + col, *up = up_p + (int64_t)t * up_rs + col;
        T *y = out + (int64_t)t * out_rs + col;
        const int n = (int)(F - col < V ? F - col : V); /* < V: the row's last, partial chunk */
        chunk16 g, u;
        if (n == V)
            g = load16<LP>(gate, w.in), u = load16<LP>(up, w.up);
        else
            g = load_part(gate, n), u = load_part(up, n);
        const chunk16 r = swiglu_chunk_fwd<T>(g, u);
        if (n == V)
            store16<SP>(y, r, w.out);
        else
            store_part(y, r, n);
    }
}

/* The forward when every access is 16 bytes (F a multiple of V, gate, up and the output 16-byte
 * aligned row by row) and the grid has a thread per chunk (fewer than 2^31 chunks):
 * the row kernel's body without its width branches and grid-stride loop, on 32-bit chunk indices,
 * so that both loads issue back to back after ~30 instructions, as in Inductor's kernel. Measured
 * beside the row kernel (bench/PERF_NOTES.md, v4): forward at F = 2048 -3 %, elsewhere within the
 * benchmark's noise. */
template <typename T, int LP, int SP>
__global__ void __launch_bounds__(SWIGLU_MAX_THREADS, SWIGLU_FWD_MIN_BLOCKS)
    swiglu_fwd_aligned_kernel(const T *__restrict__ gate_p, int64_t gate_rs,
                              const T *__restrict__ up_p, int64_t up_rs, T *__restrict__ out,
                              int64_t out_rs, unsigned chunks, unsigned nvec, unsigned magic,
                              unsigned shift) {
    enum { V = ELEMS(T) };
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= chunks) return;
    const unsigned t = (unsigned)(((uint64_t)__umulhi(i, magic) + i) >> shift); /* i / nvec */
    const unsigned col = (i - t * nvec) * V;
    chunk16 g, u;
    g.w = ld<LP>((const uint4 *)(gate_p + (int64_t)t * gate_rs + col));
    u.w = ld<LP>((const uint4 *)(up_p + (int64_t)t * up_rs + col));
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
__global__ void __launch_bounds__(SWIGLU_MAX_THREADS, SWIGLU_FWD_MIN_BLOCKS)
    swiglu_fwd_flat_kernel(const T *__restrict__ gate_p, int64_t gate_rs,
                           const T *__restrict__ up_p, int64_t up_rs, T *__restrict__ out,
                           int64_t F, uint64_t total, uint64_t chunks, fastdiv rows, widths w) {
    enum { V = ELEMS(T) };
    const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < chunks; i += step) {
        const uint64_t e = i * V;
        const uint64_t t = fastdiv_div(rows, e);
        const int64_t col = (int64_t)(e - t * (uint64_t)F);
        const T *gate = gate_p + (int64_t)t * gate_rs + col, *up = up_p + (int64_t)t * up_rs + col;
        const int n = (int)(total - e < (uint64_t)V ? total - e : (uint64_t)V); /* < V: the last */
        const int64_t n_here = F - col; /* elements of this chunk in row t, if fewer than n */
        chunk16 g, u;
        if (n_here >= n && n == V) {
            g = load16<LP>(gate, w.in), u = load16<LP>(up, w.up);
        } else {
            T gv[V], uv[V];
            memset(gv, 0, sizeof gv);
            memset(uv, 0, sizeof uv);
            /* element k >= n_here: gnext[k], unext[k] are row t + 1's */
            const T *gnext = gate + (gate_rs - F), *unext = up + (up_rs - F);
#pragma unroll
            for (int k = 0; k < V; ++k) {
                if (k < n) {
                    const int here = k < n_here;
                    gv[k] = here ? gate[k] : gnext[k], uv[k] = here ? up[k] : unext[k];
                }
            }
            memcpy(&g, gv, 16);
            memcpy(&u, uv, 16);
        }
        const chunk16 r = swiglu_chunk_fwd<T>(g, u);
        T *y = out + e;
        if (n == V)
            store16<SP>(y, r, w.out);
        else
            store_part(y, r, n);
    }
}

template <typename T, int DY, int LP, int SP>
__global__ void __launch_bounds__(SWIGLU_MAX_THREADS)
    swiglu_bwd_kernel(const T *__restrict__ dy, int64_t dy_rs, int64_t dy_cs, const T *gate_p,
                      int64_t gate_rs, const T *up_p, int64_t up_rs, T *dgate_p, int64_t dg_rs,
                      T *dup_p, int64_t du_rs, int64_t F, uint64_t chunks, fastdiv nvec, widths w) {
    /* the operands and their gradients are not __restrict__: the in-place backward passes the same
     * storage (each thread reads its elements before it writes them, and no element is read twice). */
    enum { V = ELEMS(T) };
    const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
    const float dy_scalar = DY == DY_SCALAR ? to_f32(dy[0]) : 0.0f;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < chunks; i += step) {
        const uint64_t t = fastdiv_div(nvec, i);
        const int64_t col = (int64_t)(i - t * nvec.d) * V;
        const T *gate = gate_p + (int64_t)t * gate_rs + col, *up = up_p + (int64_t)t * up_rs + col;
        const T *d = dy + (int64_t)t * dy_rs + col * dy_cs;
        T *dgate = dgate_p + (int64_t)t * dg_rs + col, *dup = dup_p + (int64_t)t * du_rs + col;
        const int n = (int)(F - col < V ? F - col : V); /* < V: the row's last, partial chunk */
        chunk16 g, u, dc;
        if (n == V) {
            g = load16<LP>(gate, w.in), u = load16<LP>(up, w.up);
            if (DY == DY_CHUNK) dc = load16<LP>(d, w.dy);
        } else {
            g = load_part(gate, n), u = load_part(up, n);
            if (DY == DY_CHUNK) dc = load_part(d, n);
        }
        T dgv[V], duv[V];
#pragma unroll
        for (int k = 0; k < V; ++k) {
            float dk = DY == DY_CHUNK    ? chunk_get<T>(dc, k)
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
            store16<SP>(dup, b, w.out_up);
        } else {
            store_part(dgate, a, n);
            store_part(dup, b, n);
        }
    }
}

/* ---- launch helpers ----------------------------------------------------------------------- */

typedef struct launch_plan {
    uint64_t chunks;
    fastdiv nvec;
    unsigned blocks, threads;
} launch_plan;

/* Blocks of `threads` for `chunks` chunks, a thread each, capped at MAX_BLOCKS and at
 * fastglu_debug_set_max_blocks's cap (the kernels then stride over the grid). */
static unsigned grid_blocks(uint64_t chunks, unsigned threads) {
    uint64_t cap = (uint64_t)MAX_BLOCKS;
    if (debug_max_blocks > 0 && (uint64_t)debug_max_blocks < cap) cap = (uint64_t)debug_max_blocks;
    const uint64_t blocks = (chunks + threads - 1) / threads;
    return (unsigned)(blocks < cap ? blocks : cap);
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

/* The launchers the family's entry points and the tuner share: one kernel launch on `stream`;
 * returns its status. gate, up: [tokens, F] with row strides gate_rs, up_rs (Megatron's fc1
 * output: up = gate + F, the same row stride). */
template <typename T, int LP = FASTGLU_LOAD, int SP = FASTGLU_STORE>
static cudaError_t launch_fwd(const launch_plan *p, cudaStream_t stream, const void *gate,
                              int64_t gate_rs, const void *up, int64_t up_rs, void *out,
                              int64_t out_rs, int64_t tokens, int64_t F) {
    const size_t es = sizeof(T);
    const int64_t V = ELEMS(T);
    widths w;
    w.out_up = w.dy = 0;
    const T *g = (const T *)gate, *u = (const T *)up;
    T *y = (T *)out;
    if (F % V != 0 && F > V && tokens > 1 && out_rs == F) { /* the flat kernel (see there) */
        /* a chunk's column is a multiple of gcd(F, V) elements: a power of two, as V is */
        int64_t c = 1;
        while (c < V && F % (2 * c) == 0) c *= 2;
        const int cap = (int)(c * (int64_t)es);
        w.in = access_width_cap(gate, gate_rs, tokens, es, cap);
        w.up = access_width_cap(up, up_rs, tokens, es, cap);
        w.out = access_width_cap(out, 0, 1, es, 16);
        uint64_t total = (uint64_t)tokens * (uint64_t)F, chunks = (total + V - 1) / V;
        fastdiv rows = make_fastdiv((uint64_t)F, total + V);
        void *args[] = {&g, &gate_rs, &u, &up_rs, &y, &F, &total, &chunks, &rows, &w};
        return cudaLaunchKernel((const void *)swiglu_fwd_flat_kernel<T, LP, SP>,
                                dim3(grid_blocks(chunks, p->threads)), dim3(p->threads), args, 0,
                                stream);
    }
    w.in = access_width(gate, gate_rs, tokens, es);
    w.up = access_width(up, up_rs, tokens, es);
    w.out = access_width(out, out_rs, tokens, es);
    if (F % V == 0 && w.in == 16 && w.up == 16 && w.out == 16 && p->nvec.small &&
        p->chunks < 0x80000000ull && (uint64_t)p->blocks * p->threads >= p->chunks) {
        unsigned chunks32 = (unsigned)p->chunks, nvec32 = (unsigned)p->nvec.d;
        unsigned magic = p->nvec.magic, shift = p->nvec.shift;
        void *args[] = {&g, &gate_rs, &u, &up_rs, &y, &out_rs, &chunks32, &nvec32, &magic, &shift};
        return cudaLaunchKernel((const void *)swiglu_fwd_aligned_kernel<T, LP, SP>, dim3(p->blocks),
                                dim3(p->threads), args, 0, stream);
    }
    uint64_t chunks = p->chunks;
    fastdiv nvec = p->nvec;
    void *args[] = {&g, &gate_rs, &u, &up_rs, &y, &out_rs, &F, &chunks, &nvec, &w};
    return cudaLaunchKernel((const void *)swiglu_fwd_kernel<T, LP, SP>, dim3(p->blocks),
                            dim3(p->threads), args, 0, stream);
}

/* dy is one value for every element: both strides 0 (an expanded scalar), or one row of one. */
static int dy_is_scalar(int64_t dy_rs, int64_t dy_cs, int64_t tokens, int64_t F) {
    return (dy_cs == 0 || F == 1) && (dy_rs == 0 || tokens == 1);
}

template <typename T, int LP = FASTGLU_LOAD, int SP = FASTGLU_STORE>
static cudaError_t launch_bwd(const launch_plan *p, cudaStream_t stream, const void *dy,
                              int64_t dy_rs, int64_t dy_cs, const void *gate, int64_t gate_rs,
                              const void *up, int64_t up_rs, void *d_gate, int64_t dg_rs,
                              void *d_up, int64_t du_rs, int64_t tokens, int64_t F) {
    const size_t es = sizeof(T);
    widths w;
    w.in = access_width(gate, gate_rs, tokens, es);
    w.up = access_width(up, up_rs, tokens, es);
    w.out = access_width(d_gate, dg_rs, tokens, es);
    w.out_up = access_width(d_up, du_rs, tokens, es);
    w.dy = dy_cs == 1 ? access_width(dy, dy_rs, tokens, es) : 0;
    const T *d = (const T *)dy, *g = (const T *)gate, *u = (const T *)up;
    T *dg = (T *)d_gate, *du = (T *)d_up;
    uint64_t chunks = p->chunks;
    fastdiv nvec = p->nvec;
    void *args[] = {&d,     &dy_rs, &dy_cs, &g, &gate_rs, &u,    &up_rs, &dg,
                    &dg_rs, &du,    &du_rs, &F, &chunks,  &nvec, &w};
#define BWD_KERNEL(LOADS)                                                                          \
    (dy_is_scalar(dy_rs, dy_cs, tokens, F)                                                         \
         ? (const void *)swiglu_bwd_kernel<T, DY_SCALAR, LOADS, SP>                                \
     : dy_cs == 1 ? (const void *)swiglu_bwd_kernel<T, DY_CHUNK, LOADS, SP>                        \
                  : (const void *)swiglu_bwd_kernel<T, DY_STRIDED, LOADS, SP>)
    /* In place, the kernel writes the memory it reads, which the read-only (.nc) path does not
     * allow for: plain loads then (equally fast, bench/PERF_NOTES.md). */
    const void *kernel = (gate == d_gate || up == d_up) ? BWD_KERNEL(LOAD_PLAIN) : BWD_KERNEL(LP);
#undef BWD_KERNEL
    return cudaLaunchKernel(kernel, dim3(p->blocks), dim3(p->threads), args, 0, stream);
}

/* launcher<T>(...) for the element type T of a (validated) compute fastglu_dtype. */
#define LAUNCH_FOR_DTYPE(dtype, launcher, ...)                                                     \
    ((dtype) == FASTGLU_DTYPE_FP32   ? launcher<float>(__VA_ARGS__)                                \
     : (dtype) == FASTGLU_DTYPE_FP16 ? launcher<__half>(__VA_ARGS__)                               \
                                     : launcher<__nv_bfloat16>(__VA_ARGS__))

/* ---- the case these kernels take ---------------------------------------------------------- */

/* 1 when a validated fastglu_glu_*_cuda call is plain SwiGLU (see the top): SiLU in math mode MM_K,
 * SPLIT, no bias, weights or fp8 copy; the backward also: operands of the compute dtype, no dbias
 * or dweights. */
static inline int swiglu_fwd_case(const fastglu_glu_params *params, const void *bias,
                                  const void *weights, const void *saved_fp8) {
    return params->activation == FASTGLU_ACT_SILU && params->layout == FASTGLU_LAYOUT_SPLIT &&
           math_mode_of(params) == MM_K && !bias && !weights && !saved_fp8;
}
static inline int swiglu_bwd_case(const fastglu_glu_params *params, fastglu_dtype input_dtype,
                                  fastglu_dtype dtype, const void *bias, const void *weights,
                                  const void *dbias, const void *dweights) {
    return swiglu_fwd_case(params, bias, weights, NULL) && input_dtype == dtype && !dbias &&
           !dweights;
}

#endif /* FASTGLU_GLU_SWIGLU_CUH */
