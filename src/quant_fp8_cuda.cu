/*
 * quant_fp8_cuda.cu — fastglu_quantize_fp8_cuda: a plain operand [rows, cols] (fc1's input x,
 * fc2's output gradient dO, a weight) quantised to float8_e4m3fn with the recipe of
 * include/fastglu.h, the row-wise copy and the transposed copy in one pass. The codes and scales
 * are those of the GLU's FP8 kernels (fp8_tile.cuh, fp8_recipe.h; glu_fp8_cuda.cu's header derives
 * the division-free codes), so quant_fp8_cpu.c's bits.
 *
 * One block of 256 threads (8 warps) per 128 x 128 tile of x. A lane holds one 8-element chunk
 * (16 bytes of a 2-byte dtype) of a row: lane l of a half-warp columns 8 l .. 8 l + 7, so a
 * half-warp covers a row of the tile and a warp two; the block's 16 half-warps take rows rho, rho +
 * 16, .. (rho = 2 warp + half), 8 rows a thread, whose loads are all issued before any is used
 * (U rows at a time: 8 for the 2-byte dtypes, 128 bytes in flight a thread; 4 for fp32).
 *
 *   1 x 128   row-wise: a row's block is a half-warp's, its amax a 16-lane max over the bits of
 *             |x|, its scale, 8 codes a lane in one 8-byte store, the scale by lane 0. Transposed
 *             copy: the chunks also go to a shared tile (rows of 136 2-byte elements on 16
 *             bytes, or 130 fp32); after a barrier (column_phase) the 2-byte dtypes are read back
 *             transposed by ldmatrix.trans, a lane holding 8 consecutive rows of one column: each
 *             column's amax (a max over the lane's words and 4 lanes), its scale, and its codes
 *             straight to data_t in 8-byte stores (fp8_tile.cuh's transposed_codes16); fp32 takes
 *             a column a half-warp, its codes through a second shared tile laid out as data_t's
 *             rows, written out after another barrier with 16-byte stores.
 *   128 x 128 one amax for the tile (a warp max, then the 8 warps' through shared memory), one
 *             scale; the row-wise codes from registers, the transposed codes from x's shared tile
 *             as above under the one scale.
 *
 * The kernels are bound by the instructions they issue (Nsight Compute), so whole tiles on the
 * vector path (FULL) take code without bounds checks, their addresses advanced 16 rows at a time.
 * The vector path needs x's rows on 16 bytes (base and row stride) and data's on 8; otherwise, and
 * for a chunk that passes the last column, a lane loads and stores its elements one by one (the
 * same values: the same bits).
 */
#include "fp8_tile.cuh"
#include "glu_fp8.h"
#include "glu_math.cuh"

typedef struct quant_args {
    const void *x;
    int64_t x_rs;
    unsigned char *d, *dt; /* row-wise and transposed codes, NULL: not asked */
    int64_t d_rs, dt_rs;
    float *s, *st;
    int64_t s_ld, st_ld;
    int64_t R, C;
    int mn_major, pow2;
    int vec;     /* x's rows on 16 bytes, data's on 8 (or no data) */
    int t_width; /* the widest access (16 bytes at most) on which data_t's rows start */
} quant_args;

/* Per dtype: the shared tile's row pitch in elements (glu_fp8_cuda.cu's geom: fp32's column reads
 * of a half-warp hit 16 distinct banks; the 2-byte dtypes' rows on 16 bytes for ldmatrix, their
 * chunks swizzled by fp8_tile.cuh's tile_col), the column pass's shared bytes (x's tile, and
 * fp32's codes' tile) and the rows whose loads a thread issues at once. */
template <typename E> struct qgeom {
    enum {
        pitch = sizeof(E) == 4 ? TILE + 2 : TILE + 8,
        tile_bytes = TILE * pitch * (int)sizeof(E),
        col_bytes = tile_bytes + (sizeof(E) == 4 ? TILE * CT_PITCH : 0),
        unroll = sizeof(E) == 4 ? 4 : 8,
        /* blocks per SM the registers are held to: 3 (<= 80 registers); fp32's 128 x 128 tile keeps
         * its 64 words of x in registers across the block's amax: 2 (<= 128), no spills (the 2-byte
         * 1 x 128 kernel with both copies: quant_min_blocks) */
        min_blocks = sizeof(E) == 4 ? 2 : 3
    };
};

/* element e of chunk v set to x's bits (the chunk's words zero before: +0 elsewhere) */
template <typename E> static __device__ __forceinline__ void vset(vec8<E> &v, int e, E x) {
    if (sizeof(E) == 4)
        v.w[e] = ebits(x);
    else
        v.w[e >> 1] |= ebits(x) << (16 * (e & 1));
}

/* Whether the chunk at column j lies whole inside x (n == 8 below), asked of j and C rather than
 * of n: ptxas (CUDA 13.0) compiles `n == 8` on n = max(min(nj - c, 8), 0) into the min's
 * predicate output with the sense reversed, so that kernels would take a partial chunk 8 elements
 * wide wherever the vector path is open (one row; rows on 16 bytes without the row-wise codes),
 * into fp32's 128 x 128 amax and a one-row x's codes, and whole chunks one element at a time
 * (bench/tune/sass_counts.py's MNMX_pred column counts such instructions: none in the library). */
static __device__ __forceinline__ int whole_chunk(const quant_args &a, int64_t j) {
    return a.vec && j + 8 <= a.C;
}

/* the chunk of row t from column j (n = its elements inside x, 1 .. 8) */
template <typename E>
static __device__ __forceinline__ void load_chunk(const quant_args &a, vec8<E> &v, int64_t t,
                                                  int64_t j, int n) {
    const E *p = (const E *)a.x + t * a.x_rs + j;
    if (whole_chunk(a, j)) {
        ld8(v, p);
        return;
    }
#pragma unroll
    for (int k = 0; k < 2 * (int)sizeof(E); ++k) v.w[k] = 0;
    /* unrolled: the chunk's words indexed by constants stay in registers */
#pragma unroll
    for (int e = 0; e < 8; ++e)
        if (e < n) vset(v, e, p[e]);
}

static __device__ __forceinline__ void store_codes(const quant_args &a, uint2 q, int64_t t,
                                                   int64_t j, int n) {
    unsigned char *p = a.d + t * a.d_rs + j;
    if (whole_chunk(a, j)) {
        *(uint2 *)p = q;
        return;
    }
#pragma unroll
    for (int e = 0; e < 8; ++e)
        if (e < n) p[e] = (unsigned char)((e < 4 ? q.x : q.y) >> (8 * (e & 3)));
}

/* The transposed codes of the tile x's rows left in shared memory (tile: rows 0 .. nt - 1,
 * columns 0 .. nj - 1, row pitch P elements; after a barrier). OWN: each column is its own 1 x 128
 * block of data_t (its amax, scale and divisor; the scale at row tile blockIdx.x of scale_t); else
 * every code under the block's divisor d (128 x 128). The 2-byte dtypes: fp8_tile.cuh's
 * transposed_codes16 (ldmatrix.trans; rows past nt zero where OWN), straight to data_t. fp32: a
 * half-warp takes a column, lane l its rows l, l + 16, .. (the row pitch makes the 16 lanes' reads
 * hit 16 distinct banks, the two half-warps a column apart the other 16), the codes into ct as
 * data_t's rows, written out after another barrier. FULL: a whole tile (nt = nj = 128), its bounds
 * checks left out. */
template <typename E, int OWN, int FULL> struct column_phase {
    static __device__ __forceinline__ void run(const quant_args &a, const E *tile, unsigned char *,
                                               int64_t j0, int nj, int64_t t0, int nt,
                                               const fp8_divisor &d) {
        transposed_codes16<E, OWN, qgeom<E>::pitch>(t_out_of(a, j0, t0), tile, FULL ? TILE : nj,
                                                    FULL ? TILE : nt, d);
    }
};
template <int OWN, int FULL> struct column_phase<float, OWN, FULL> {
    static __device__ __forceinline__ void run(const quant_args &a, const float *tile,
                                               unsigned char *ct, int64_t j0, int nj, int64_t t0,
                                               int nt, const fp8_divisor &d) {
        enum { P = qgeom<float>::pitch };
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, half = lane >> 4;
        const int lr = lane & 15;
        /* the 16 half-warps take 128 columns, 8 each */
#pragma unroll 1
        for (int p = 0; p < 8; ++p) {
            const int cl = 2 * warp + half + 16 * p;
            const int live = FULL || cl < nj; /* uniform across the half-warp */
            float x0[8];
            unsigned am = 0;
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                const int r = lr + 16 * i;
                x0[i] = 0.0f;
                if (live && (FULL || r < nt))
                    x0[i] = *tile_at<P>(tile, r, cl), am = max(am, fastglu_abs_bits(x0[i]));
            }
            fp8_divisor d0 = d;
            if (OWN) { /* both half-warps take the shuffles */
                const float s0 = fastglu_fp8_scale(group_max<16>(am), a.pow2);
                if (live && lr == 0) *scale_at(a.st, a.st_ld, a.mn_major, j0 + cl, blockIdx.x) = s0;
                d0 = make_divisor(s0);
            }
            if (!live) continue;
#pragma unroll
            for (int i = 0; i < 8; i += 2) {
                const unsigned c0 = quantise2(d0, x0[i], x0[i + 1]);
                unsigned char *dst = ct + cl * CT_PITCH + lr + 16 * i;
                if (FULL || lr + 16 * i < nt) dst[0] = (unsigned char)c0;
                if (FULL || lr + 16 * (i + 1) < nt) dst[16] = (unsigned char)(c0 >> 8);
            }
        }
        __syncthreads();
        write_transposed(a.dt, a.dt_rs, a.t_width == 16, ct, j0, nj, t0, nt);
    }
};

/* A thread's rows rho, rho + 16, .. (rho = 2 warp + half) of the tile and its chunk's columns
 * c .. c + 7 (c = 8 l, l its lane in the half-warp); FULL: the addresses of its chunk in x and in
 * data and of its row's scale, advanced by 16 rows at a time (no 64-bit product per row). */
typedef struct thread_rows {
    int rho, lr, c, n;
    int64_t xstep, dstep, sstep;
} thread_rows;

static __device__ __forceinline__ thread_rows rows_of(const quant_args &a, int nj) {
    thread_rows w;
    const int lane = threadIdx.x & 31;
    w.lr = lane & 15, w.rho = 2 * (threadIdx.x >> 5) + (lane >> 4);
    w.c = 8 * w.lr, w.n = max(0, min(8, nj - w.c));
    w.xstep = 16 * a.x_rs, w.dstep = 16 * a.d_rs, w.sstep = a.mn_major ? 16 : 16 * a.s_ld;
    return w;
}

/* The thread's chunk of the tile's row r (its address px): FULL, a 16-byte load; else the guarded
 * path (+0 outside x) */
template <typename E, int FULL>
static __device__ __forceinline__ void load_row(const quant_args &a, const thread_rows &w,
                                                vec8<E> &v, const E *px, int r, int64_t t0,
                                                int64_t j0, int nt) {
    if (FULL) {
        ld8(v, px);
    } else {
#pragma unroll
        for (int i = 0; i < 2 * (int)sizeof(E); ++i) v.w[i] = 0;
        if (r < nt && w.n > 0) load_chunk(a, v, t0 + r, j0 + w.c, w.n);
    }
}

/* The 128 x 128 tile (t0, j0) of nt x nj elements as one block (W128): one amax (a warp max, then
 * the 8 warps' through shared memory), one scale; the row-wise codes from registers, the
 * transposed codes from x's tile in shared memory (column_phase under the block's divisor).
 * FULL: a whole tile on the vector path (nt = nj = 128, a.vec), its bounds checks left out. */
template <typename E, int ROW, int COL, int FULL>
static __device__ __forceinline__ void tile_128x128(const quant_args &a, unsigned char *smem,
                                                    int64_t t0, int64_t j0, int nt, int nj) {
    enum { NK = TILE / (2 * WARPS), P = qgeom<E>::pitch };
    E *tile = (E *)smem;                             /* COL: x's tile [128][P] */
    unsigned char *ct = smem + qgeom<E>::tile_bytes; /* COL: the codes [128][CT_PITCH] */
    unsigned *warp_amax = (unsigned *)(smem + (COL ? qgeom<E>::col_bytes : 0));
    const thread_rows w = rows_of(a, nj);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    vec8<E> v[NK];
    unsigned am = 0;
    const E *px = (const E *)a.x + (t0 + w.rho) * a.x_rs + j0 + w.c;
#pragma unroll
    for (int k = 0; k < NK; ++k, px += w.xstep)
        load_row<E, FULL>(a, w, v[k], px, w.rho + 16 * k, t0, j0, nt);
#pragma unroll
    for (int k = 0; k < NK; ++k) {
        am = max(am, chunk_amax(v[k]));
        const int r = w.rho + 16 * k;
        if (COL && (FULL || r < nt)) st8_tile(tile_at<P>(tile, r, w.c), v[k]);
    }
    am = group_max<32>(am);
    if (lane == 0) warp_amax[warp] = am;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < WARPS; ++i) am = max(am, warp_amax[i]);
    const float s = fastglu_fp8_scale(am, a.pow2);
    if (threadIdx.x == 0) {
        if (ROW) *scale_at(a.s, a.s_ld, a.mn_major, blockIdx.x, blockIdx.y) = s;
        if (COL) *scale_at(a.st, a.st_ld, a.mn_major, blockIdx.y, blockIdx.x) = s;
    }
    const fp8_divisor d = make_divisor(s);
    if (ROW) {
        unsigned char *pd = a.d + (t0 + w.rho) * a.d_rs + j0 + w.c;
#pragma unroll
        for (int k = 0; k < NK; ++k, pd += w.dstep) {
            const int r = w.rho + 16 * k;
            const uint2 q = quantise8(d, v[k]);
            if (FULL)
                *(uint2 *)pd = q;
            else if (r < nt && w.n > 0)
                store_codes(a, q, t0 + r, j0 + w.c, w.n);
        }
    }
    if (COL) column_phase<E, 0, FULL>::run(a, tile, ct, j0, nj, t0, nt, d);
}

/* The tile's 1 x 128 blocks: ROW the row-wise copy, COL the transposed copy; FULL as above */
template <typename E, int ROW, int COL, int FULL>
static __device__ __forceinline__ void tile_1x128(const quant_args &a, unsigned char *smem,
                                                  int64_t t0, int64_t j0, int nt, int nj) {
    enum { P = qgeom<E>::pitch, U = qgeom<E>::unroll, NK = TILE / (2 * WARPS) };
    E *tile = (E *)smem;                             /* COL: x's tile [128][P] */
    unsigned char *ct = smem + qgeom<E>::tile_bytes; /* COL: the codes [128][CT_PITCH] */
    const thread_rows w = rows_of(a, nj);
    const E *px = (const E *)a.x + (t0 + w.rho) * a.x_rs + j0 + w.c;
    unsigned char *pd = ROW ? a.d + (t0 + w.rho) * a.d_rs + j0 + w.c : NULL;
    float *ps = ROW ? scale_at(a.s, a.s_ld, a.mn_major, t0 + w.rho, blockIdx.y) : NULL;
#pragma unroll 1
    for (int k0 = 0; k0 < NK; k0 += U) {
        vec8<E> v[U];
#pragma unroll
        for (int k = 0; k < U; ++k, px += w.xstep)
            load_row<E, FULL>(a, w, v[k], px, w.rho + 16 * (k0 + k), t0, j0, nt);
#pragma unroll
        for (int k = 0; k < U; ++k) {
            const int r = w.rho + 16 * (k0 + k);
            if (COL && (FULL || r < nt)) st8_tile(tile_at<P>(tile, r, w.c), v[k]);
            if (ROW) {
                /* every lane takes the shuffles; rows past the tile have amax 0 */
                const float sc = fastglu_fp8_scale(group_max<16>(chunk_amax(v[k])), a.pow2);
                if (FULL) {
                    if (w.lr == 0) *ps = sc;
                    *(uint2 *)pd = quantise8(make_divisor(sc), v[k]);
                } else if (r < nt) {
                    if (w.lr == 0) *ps = sc;
                    if (w.n > 0)
                        store_codes(a, quantise8(make_divisor(sc), v[k]), t0 + r, j0 + w.c, w.n);
                }
                pd += w.dstep, ps += w.sstep;
            }
        }
    }
    if (!COL) return;
    if (sizeof(E) == 2 && !FULL && nt < TILE) zero_rows16<E, P>(tile, nt); /* the column amaxes */
    __syncthreads();
    column_phase<E, 1, FULL>::run(a, tile, ct, j0, nj, t0, nt, make_divisor(0.0f));
}

/* Blocks per SM for the launch bounds: qgeom's, but 4 (<= 64 registers, no spills; 4 x 35 KB of
 * shared tiles) for the 2-byte 1 x 128 kernel with both copies (x and x^T, dO and dO^T in the FP8
 * MLP block), whose row phase and column phase take turns in a block: more blocks an SM keep more
 * loads in flight (0.95x its time at 3 blocks; the kernels with one copy or 128 x 128 blocks the
 * same within the spread at 4, so they stay at 3). */
template <typename E, int W128, int ROW, int COL> static constexpr int quant_min_blocks(void) {
    return sizeof(E) == 2 && !W128 && ROW && COL ? 4 : qgeom<E>::min_blocks;
}

/* W128: 128 x 128 blocks; else 1 x 128. Whole tiles on the vector path take the FULL code. */
template <typename E, int W128, int ROW, int COL>
__global__ void __launch_bounds__(THREADS, quant_min_blocks<E, W128, ROW, COL>())
    quant_fp8_kernel(const quant_args a) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const int64_t t0 = (int64_t)blockIdx.x * TILE, j0 = (int64_t)blockIdx.y * TILE;
    const int nt = (int)min((int64_t)TILE, a.R - t0), nj = (int)min((int64_t)TILE, a.C - j0);
    const int full = a.vec && nt == TILE && nj == TILE;
    if (W128) {
        if (full)
            tile_128x128<E, ROW, COL, 1>(a, smem_raw, t0, j0, nt, nj);
        else
            tile_128x128<E, ROW, COL, 0>(a, smem_raw, t0, j0, nt, nj);
    } else {
        if (full)
            tile_1x128<E, ROW, COL, 1>(a, smem_raw, t0, j0, nt, nj);
        else
            tile_1x128<E, ROW, COL, 0>(a, smem_raw, t0, j0, nt, nj);
    }
}

/* the kernel's dynamic shared memory */
template <typename E, int W128, int COL> static size_t quant_smem(void) {
    return (COL ? qgeom<E>::col_bytes : 0) + (W128 ? WARPS * sizeof(unsigned) : 0);
}

template <typename E, int W128, int ROW, int COL>
static cudaError_t quant_launch(const quant_args &a, cudaStream_t s) {
    const void *kern = (const void *)quant_fp8_kernel<E, W128, ROW, COL>;
    const size_t smem = quant_smem<E, W128, COL>();
    if (smem > 48 * 1024) { /* fp32's tiles: the opt-in, on the current device */
        const cudaError_t err =
            cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (err != cudaSuccess) return err;
    }
    const dim3 grid((unsigned)((a.R + TILE - 1) / TILE), (unsigned)((a.C + TILE - 1) / TILE));
    void *args[] = {(void *)&a};
    return cudaLaunchKernel(kern, grid, dim3(THREADS), args, smem, s);
}

template <typename E> static cudaError_t quant_run(const quant_args &a, int w128, cudaStream_t s) {
    const int row = a.d != NULL, col = a.dt != NULL;
    if (w128) {
        if (row && col) return quant_launch<E, 1, 1, 1>(a, s);
        return row ? quant_launch<E, 1, 1, 0>(a, s) : quant_launch<E, 1, 0, 1>(a, s);
    }
    if (row && col) return quant_launch<E, 0, 1, 1>(a, s);
    return row ? quant_launch<E, 0, 1, 0>(a, s) : quant_launch<E, 0, 0, 1>(a, s);
}

extern "C" fastglu_status fastglu_quantize_fp8_cuda(const fastglu_fp8_recipe *recipe,
                                                    fastglu_tensor x, const fastglu_fp8_out *out,
                                                    int64_t rows, int64_t cols, void *stream) {
    const char *fn = "fastglu_quantize_fp8_cuda";
    int empty;
    fastglu_status st = fastglu_check_quantize_fp8(fn, recipe, x, out, rows, cols, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    if (fastglu_fp8_blocks(cols) > 65535 || fastglu_fp8_blocks(rows) > 0x7fffffff)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: rows = %lld, cols = %lld: more 128 x 128 tiles than the CUDA "
                                 "grid holds",
                                 fn, (long long)rows, (long long)cols);
    quant_args a;
    const size_t es = fastglu_dtype_size(x.dtype);
    a.x = x.data, a.x_rs = x.row_stride;
    a.d = (unsigned char *)out->data.data, a.d_rs = out->data.row_stride;
    a.dt = (unsigned char *)out->data_t.data, a.dt_rs = out->data_t.row_stride;
    a.s = (float *)out->scale.data, a.s_ld = out->scale.row_stride;
    a.st = (float *)out->scale_t.data, a.st_ld = out->scale_t.row_stride;
    a.R = rows, a.C = cols;
    a.mn_major = recipe->scale_layout == FASTGLU_FP8_SCALES_MN_MAJOR;
    a.pow2 = recipe->pow2_scales != 0;
    a.vec = access_width(x.data, x.row_stride, rows, es) == 16 &&
            (!a.d || access_width_cap(a.d, a.d_rs, rows, 1, 8) == 8);
    a.t_width = a.dt ? access_width_cap(a.dt, a.dt_rs, cols, 1, 16) : 0;
    const int w128 = recipe->scaling == FASTGLU_FP8_SCALING_BLOCK_128X128;
    cudaStream_t s = (cudaStream_t)stream;
    cudaError_t err;
    switch (x.dtype) {
    case FASTGLU_DTYPE_FP32: err = quant_run<float>(a, w128, s); break;
    case FASTGLU_DTYPE_FP16: err = quant_run<__half>(a, w128, s); break;
    default: err = quant_run<__nv_bfloat16>(a, w128, s); break;
    }
    return launch_status(fn, err);
}

/* ---- fastglu_glu_fp8_store_blockwise_cuda ---------------------------------------------------
 * The forward's operands saved as e4m3 codes with one scale per 1 x 128 block of each operand's
 * row (include/fastglu.h; fp8_recipe.h's recipe, quant_fp8_cpu.c's bits). A half-warp takes a
 * block, lane l its columns 8 l .. 8 l + 7: the block's amax a 16-lane max, the scale, under a
 * clamp the block's bounds, then 8 codes a lane in one 8-byte store and the scale by lane 0. The
 * grid's x covers a row's blocks (gate's, then up's; a warp two consecutive ones), its y the rows,
 * STORE_ROWS at a time: a thread issues the loads of its chunk in those rows before it uses any
 * (64 bytes in flight a thread for the 2-byte dtypes), and strides over the row groups. Scaled
 * blocks without a clamp take the quantiser's division-free codes (quantise8, whose saturating
 * cast equals fp8.h's cast in either mode there: |x / s| stays under 464); the rest the element
 * rule and fp8.h's cast in saved_fp8's saturate mode. */
#define STORE_ROWS 4 /* 2 and 8 (which spills) take 2-7 % longer on the H200 (bf16, T = 8192) */
#ifndef STORE_MAX_ROW_BLOCKS /* the grid's y at most (the host emulation lowers it to stride) */
#define STORE_MAX_ROW_BLOCKS 65535
#endif

typedef struct store_args {
    const void *src[2]; /* gate, up (SPLIT) or the interleaved operand */
    int64_t src_rs[2];
    unsigned char *dst[2];
    int64_t dst_rs[2];
    float *s;
    int64_t s_rs;
    int64_t T, W, nbp; /* W: an operand's row width (F, or 2F interleaved); nbp its blocks */
    int parts, il, clamp, sat;
    float c;
    int vin, vout; /* every operand's rows on 16 bytes; every code row on 8 */
} store_args;

/* x / s correctly rounded (the host emulation: the host's division) */
static __device__ __forceinline__ float div_rn(float x, float s) {
#ifdef __CUDA_ARCH__
    return __fdiv_rn(x, s);
#else
    return x / s;
#endif
}

/* one block's 8 codes of this lane under its scale s (scaled: the recipe's quotient) */
template <typename E>
static __device__ __forceinline__ uint2 store_codes8(const store_args &a, const vec8<E> &v, float s,
                                                     int scaled, int part) {
    if (scaled && !a.clamp) return quantise8(make_divisor(s), v);
    float lo = 0.0f, hi = 0.0f;
    if (a.clamp) fastglu_fp8_store_bounds(s, a.c, &lo, &hi);
    const fp8_divisor d = make_divisor(s);
    unsigned w[2] = {0u, 0u};
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        const float x = vget(v, e);
        float y = x;
        if (scaled) y = d.exact ? div_rn(x, s) : quotient(d, x);
        if (a.clamp) y = fastglu_fp8_store_value(x, y, a.il ? (e & 1) : part, a.c, lo, hi);
        w[e >> 2] |= (unsigned)fastglu_f32_to_e4m3(y, a.sat) << (8 * (e & 3));
    }
    return make_uint2(w[0], w[1]);
}

/* This lane's 8 elements of a row at p: one 16-byte load where the chunk is whole and the rows
 * are on 16 bytes (vec), else the first n one by one and the rest zero (so that they raise no
 * amax); a row past the last token (!live) all zero. */
template <typename E>
static __device__ __forceinline__ void load_chunk8(vec8<E> &v, const E *p, int vec, int live,
                                                   int n) {
    if (vec && live) {
        ld8(v, p);
        return;
    }
#pragma unroll
    for (int k = 0; k < 2 * (int)sizeof(E); ++k) v.w[k] = 0;
#pragma unroll
    for (int e = 0; e < 8; ++e)
        if (live && e < n) vset(v, e, p[e]);
}

/* This lane's 8 codes q at o: one 8-byte store where the chunk is whole and the code rows are on 8
 * bytes, else the first n one by one. */
static __device__ __forceinline__ void store_chunk_codes(const store_args &c, unsigned char *o,
                                                         uint2 q, int whole, int n) {
    if (c.vout && whole) {
        *(uint2 *)o = q;
    } else {
#pragma unroll
        for (int e = 0; e < 8; ++e)
            if (e < n) o[e] = (unsigned char)((e < 4 ? q.x : q.y) >> (8 * (e & 3)));
    }
}

/* 4 blocks an SM for the 2-byte dtypes (64 registers), 3 for fp32, whose rows of 8 words take
 * twice the registers (at 64, ptxas spilled) */
template <typename E>
__global__ void __launch_bounds__(THREADS, sizeof(E) == 4 ? 3 : 4)
    glu_fp8_store_kernel(const store_args a) {
    enum { R = STORE_ROWS };
    const int lane = threadIdx.x & 31, l = lane & 15;
    /* this half-warp's block of a row: gate's blocks 0 .. nbp - 1, then up's */
    const int64_t b = 2 * ((int64_t)blockIdx.x * (THREADS / 32) + (threadIdx.x >> 5)) + (lane >> 4);
    const int on = b < a.parts * a.nbp; /* the loop below stays uniform: both half-warps shuffle */
    const int part = on && b >= a.nbp;
    const int64_t j = TILE * (b - part * a.nbp) + 8 * l;
    const int64_t rem = on ? a.W - j : 0;
    const int n = rem >= 8 ? 8 : rem > 0 ? (int)rem : 0;
    /* whole chunk: asked of j and W, not n == 8 (quant_fp8_cuda.cu's whole_chunk) */
    const int whole = on && j + 8 <= a.W;
    /* pointers formed only inside the operands: a lane past a row's end keeps the row's start */
    const E *src = (const E *)a.src[part] + (n ? j : 0);
    unsigned char *dst = a.dst[part] + (n ? j : 0);
    for (int64_t t0 = (int64_t)blockIdx.y * R; t0 < a.T; t0 += (int64_t)gridDim.y * R) {
        vec8<E> v[R];
#pragma unroll
        for (int r = 0; r < R; ++r)
            load_chunk8(v[r], src + (t0 + r) * a.src_rs[part], a.vin && whole, t0 + r < a.T, n);
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int64_t t = t0 + r;
            const unsigned am = group_max<16>(chunk_amax(v[r]));
            if (!on || t >= a.T) continue;
            const float s = fastglu_fp8_store_scale(am, a.clamp);
            store_chunk_codes(a, dst + t * a.dst_rs[part],
                              store_codes8(a, v[r], s, fastglu_fp8_store_scaled(am), part), whole,
                              n);
            if (l == 0) a.s[t * a.s_rs + b] = s;
        }
    }
}

/* The copy's arguments from checked ones (both entry points). */
static store_args store_setup(const fastglu_glu_params *params, fastglu_tensor gate,
                              fastglu_tensor up, fastglu_tensor gate_fp8, fastglu_tensor up_fp8,
                              fastglu_tensor scale_inv, int64_t tokens, int64_t F) {
    store_args a;
    const size_t es = fastglu_dtype_size(gate.dtype);
    a.il = params->layout == FASTGLU_LAYOUT_INTERLEAVED;
    a.parts = a.il ? 1 : 2;
    a.T = tokens, a.W = a.il ? 2 * F : F, a.nbp = fastglu_fp8_blocks(a.W);
    a.src[0] = gate.data, a.src_rs[0] = gate.row_stride;
    a.dst[0] = (unsigned char *)gate_fp8.data, a.dst_rs[0] = gate_fp8.row_stride;
    a.src[1] = a.il ? gate.data : up.data, a.src_rs[1] = a.il ? gate.row_stride : up.row_stride;
    a.dst[1] = a.il ? a.dst[0] : (unsigned char *)up_fp8.data;
    a.dst_rs[1] = a.il ? a.dst_rs[0] : up_fp8.row_stride;
    a.s = (float *)scale_inv.data, a.s_rs = scale_inv.row_stride;
    a.c = fastglu_glu_clamp(params, gate.dtype);
    a.clamp = a.c > 0.0f && !isinf(a.c); /* +inf cuts nothing: the plain recipe */
    a.sat = fastglu_fp8_saturate();
    a.vin = a.vout = 1;
    for (int k = 0; k < a.parts; ++k) {
        a.vin &= access_width(a.src[k], a.src_rs[k], tokens, es) == 16;
        a.vout &= access_width_cap(a.dst[k], a.dst_rs[k], tokens, 1, 8) == 8;
    }
    return a;
}

/* The grid of a kernel with a half-warp per block of a row (blocks of them a row): x a row's
 * blocks, two a warp; y the rows, rows a block, strided beyond STORE_MAX_ROW_BLOCKS. */
static fastglu_status store_grid(const char *fn, int64_t blocks, int64_t rows, int64_t tokens,
                                 int64_t F, dim3 *grid) {
    const int64_t pairs = (blocks + 1) / 2, warps = THREADS / 32;
    const int64_t gx = (pairs + warps - 1) / warps;
    if (gx > 0x7fffffff)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: F = %lld: more blocks of a row than the CUDA grid holds", fn,
                                 (long long)F);
    *grid = dim3((unsigned)gx,
                 (unsigned)min((tokens + rows - 1) / rows, (int64_t)STORE_MAX_ROW_BLOCKS));
    return FASTGLU_SUCCESS;
}

extern "C" fastglu_status
fastglu_glu_fp8_store_blockwise_cuda(const fastglu_glu_params *params, fastglu_tensor gate,
                                     fastglu_tensor up, fastglu_tensor gate_fp8,
                                     fastglu_tensor up_fp8, fastglu_tensor scale_inv,
                                     int64_t tokens, int64_t F, void *stream) {
    const char *fn = "fastglu_glu_fp8_store_blockwise_cuda";
    int empty;
    fastglu_status st = fastglu_check_glu_fp8_store(fn, params, gate, up, gate_fp8, up_fp8,
                                                    scale_inv, tokens, F, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    const store_args a = store_setup(params, gate, up, gate_fp8, up_fp8, scale_inv, tokens, F);
    dim3 grid;
    st = store_grid(fn, a.parts * a.nbp, STORE_ROWS, tokens, F, &grid);
    if (st != FASTGLU_SUCCESS) return st;
    void *args[] = {(void *)&a};
    const void *kern;
    switch (gate.dtype) {
    case FASTGLU_DTYPE_FP32: kern = (const void *)glu_fp8_store_kernel<float>; break;
    case FASTGLU_DTYPE_FP16: kern = (const void *)glu_fp8_store_kernel<__half>; break;
    default: kern = (const void *)glu_fp8_store_kernel<__nv_bfloat16>; break;
    }
    return launch_status(
        fn, cudaLaunchKernel(kern, grid, dim3(THREADS), args, 0, (cudaStream_t)stream));
}

/* ---- fastglu_glu_fwd_fp8_store_blockwise_cuda -----------------------------------------------
 * The forward and the blockwise copy in one pass (SPLIT): a half-warp takes column block b of a
 * row, gate's and up's (lane l columns 128 b + 8 l .. + 7 of both): y's 8 elements from the
 * general path's per-element math (glu_math.cuh's glu_forward with a bias, -0 for none, and a
 * weight, 1 for none: fastglu_glu_fwd_cuda's bits), rounded two an instruction and stored 16
 * bytes a lane; then both blocks' amaxes (two 16-lane maxes), scales and codes as
 * glu_fp8_store_kernel's (store_codes8), gate's scale at b and up's at nb / 2 + b of scale_inv's
 * row, by lane 0. The grid as that kernel's: x a row's blocks (a warp two), y the rows,
 * FWD_STORE_ROWS at a time, their loads issued before any is used. The bias of the lane's
 * columns is read once, before the rows. */
#define FWD_STORE_ROWS 2

typedef struct fwd_store_args {
    store_args c; /* the copy: src / dst [0] gate, [1] up; W = F; nbp = ceil(F / 128) */
    glu_math m;
    const void *bias, *weights; /* bias [2F] (gate's, then up's), or NULL; weights [T], or NULL */
    int w_dtype;
    int64_t w_stride;
    void *y;
    int64_t y_rs;
    int vy; /* y's rows on 16 bytes */
} fwd_store_args;

/* 3 blocks an SM for the 2-byte dtypes (80 registers: two rows of gate and up, the lane's 16 bias
 * values), 2 for fp32 */
template <typename E>
__global__ void __launch_bounds__(THREADS, sizeof(E) == 4 ? 2 : 3)
    glu_fwd_store_kernel(const fwd_store_args a) {
    enum { R = FWD_STORE_ROWS };
    const store_args &c = a.c;
    const int lane = threadIdx.x & 31, l = lane & 15;
    const int64_t b = 2 * ((int64_t)blockIdx.x * (THREADS / 32) + (threadIdx.x >> 5)) + (lane >> 4);
    const int on = b < c.nbp; /* the loop below stays uniform: both half-warps shuffle */
    const int64_t j = TILE * b + 8 * l;
    const int64_t rem = on ? c.W - j : 0;
    const int n = rem >= 8 ? 8 : rem > 0 ? (int)rem : 0;
    const int whole = on && j + 8 <= c.W;
    /* pointers formed only inside the operands: a lane past a row's end keeps the row's start */
    const E *g_src = (const E *)c.src[0] + (n ? j : 0), *u_src = (const E *)c.src[1] + (n ? j : 0);
    unsigned char *g_dst = c.dst[0] + (n ? j : 0), *u_dst = c.dst[1] + (n ? j : 0);
    E *y_dst = (E *)a.y + (n ? j : 0);
    float bg[8], bu[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        bg[e] = bu[e] = -0.0f; /* no bias: -0, as the general path adds it */
        if (a.bias && e < n) {
            bg[e] = to_f32(((const E *)a.bias)[j + e]);
            bu[e] = to_f32(((const E *)a.bias)[c.W + j + e]);
        }
    }
    for (int64_t t0 = (int64_t)blockIdx.y * R; t0 < c.T; t0 += (int64_t)gridDim.y * R) {
        vec8<E> g[R], u[R];
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int live = t0 + r < c.T;
            load_chunk8(g[r], g_src + (t0 + r) * c.src_rs[0], c.vin && whole, live, n);
            load_chunk8(u[r], u_src + (t0 + r) * c.src_rs[1], c.vin && whole, live, n);
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int64_t t = t0 + r;
            const unsigned amg = group_max<16>(chunk_amax(g[r]));
            const unsigned amu = group_max<16>(chunk_amax(u[r]));
            if (!on || t >= c.T) continue;
            const float w =
                a.weights ? load_token_weight(a.weights, a.w_dtype, t * a.w_stride) : 1.0f;
            float yv[8];
#pragma unroll
            for (int e = 0; e < 8; ++e)
                yv[e] =
                    glu_forward<MM_ANY, 1, 1>(a.m, vget(g[r], e), vget(u[r], e), bg[e], bu[e], w);
            E *yo = y_dst + t * a.y_rs;
            if (a.vy && whole) {
                vec8<E> yr;
                unsigned am = 0;
                round8(yr, am, yv);
                st8(yo, yr);
            } else {
#pragma unroll
                for (int e = 0; e < 8; ++e)
                    if (e < n) from_f32(yo + e, yv[e]);
            }
            const float sg = fastglu_fp8_store_scale(amg, c.clamp);
            const float su = fastglu_fp8_store_scale(amu, c.clamp);
            store_chunk_codes(c, g_dst + t * c.dst_rs[0],
                              store_codes8(c, g[r], sg, fastglu_fp8_store_scaled(amg), 0), whole,
                              n);
            store_chunk_codes(c, u_dst + t * c.dst_rs[1],
                              store_codes8(c, u[r], su, fastglu_fp8_store_scaled(amu), 1), whole,
                              n);
            if (l == 0) {
                float *srow = c.s + t * c.s_rs;
                srow[b] = sg;
                srow[c.nbp + b] = su;
            }
        }
    }
}

extern "C" fastglu_status fastglu_glu_fwd_fp8_store_blockwise_cuda(
    const fastglu_glu_params *params, const fastglu_glu_operands *operands, fastglu_tensor output,
    fastglu_tensor gate_fp8, fastglu_tensor up_fp8, fastglu_tensor scale_inv, int64_t tokens,
    int64_t F, void *stream) {
    const char *fn = "fastglu_glu_fwd_fp8_store_blockwise_cuda";
    int empty;
    fastglu_status st = fastglu_check_glu_fwd_fp8_store(fn, params, operands, output, gate_fp8,
                                                        up_fp8, scale_inv, tokens, F, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    const fastglu_tensor gate = operands->gate, up = operands->up;
    if (params->layout == FASTGLU_LAYOUT_INTERLEAVED) { /* the two calls' kernels */
        const fastglu_tensor none = {NULL, FASTGLU_DTYPE_FP8_E4M3, 0};
        st = fastglu_glu_fwd_cuda(params, operands, output, none, tokens, F, stream);
        if (st != FASTGLU_SUCCESS) return st;
        return fastglu_glu_fp8_store_blockwise_cuda(params, gate, up, gate_fp8, up_fp8, scale_inv,
                                                    tokens, F, stream);
    }
    fwd_store_args a;
    a.c = store_setup(params, gate, up, gate_fp8, up_fp8, scale_inv, tokens, F);
    const size_t es = fastglu_dtype_size(gate.dtype);
    a.m = make_math(params, gate.dtype, 0);
    a.bias = operands->bias.data;
    a.weights = operands->weights.data, a.w_dtype = (int)operands->weights.dtype;
    a.w_stride = operands->weights.row_stride;
    a.y = output.data, a.y_rs = output.row_stride;
    a.vy = access_width(output.data, output.row_stride, tokens, es) == 16;
    dim3 grid;
    st = store_grid(fn, a.c.nbp, FWD_STORE_ROWS, tokens, F, &grid);
    if (st != FASTGLU_SUCCESS) return st;
    void *args[] = {(void *)&a};
    const void *kern;
    switch (gate.dtype) {
    case FASTGLU_DTYPE_FP32: kern = (const void *)glu_fwd_store_kernel<float>; break;
    case FASTGLU_DTYPE_FP16: kern = (const void *)glu_fwd_store_kernel<__half>; break;
    default: kern = (const void *)glu_fwd_store_kernel<__nv_bfloat16>; break;
    }
    return launch_status(
        fn, cudaLaunchKernel(kern, grid, dim3(THREADS), args, 0, (cudaStream_t)stream));
}
