/*
 * glu_fp8_cuda.cu — fastglu_glu_fwd_fp8_cuda: the family's forward quantised to float8_e4m3fn with
 * the recipe of include/fastglu.h ("The activation quantised to FP8"), in the pass that computes it.
 *
 * One block of 256 threads (8 warps) per tile of 128 tokens x 128 columns: one row-wise block wide
 * (1 x 128) and one column-wise block tall (128 x 1). The kernels are memory-bound, so the layout
 * is chosen for the bytes in flight (an H200 needs some 40 KB per SM):
 *
 * Row phase. The columns of the tile come in 16 chunks of 8 (16 bytes of a 2-byte dtype). In the
 * 2-byte forward a lane holds two chunks of a row, l and l + 8 (lane l = 0..7 of a quarter-warp:
 * columns 8 l .. 8 l + 7 and 64 + 8 l .., so that a warp's load of a chunk reads 128 contiguous
 * bytes of each of its four rows), so a 1 x 128 block is a quarter-warp and its amax an 8-lane max;
 * elsewhere (fp32, the backward's three operands) a lane holds one chunk and a half-warp a row. Per
 * step the block takes 32 (16) rows; each thread issues the loads of U steps (2; 4 for the 2-byte
 * dtypes with one chunk) before it computes any of them. Per row: y (glu_math.cuh's glu_forward,
 * the general path's operations, so y is fastglu_glu_fwd_cuda's y bit for bit), rounded to dtype
 * two elements an instruction and stored when asked (16-byte stores); the row's amax over the bits
 * of |y| (fp8_recipe.h; for the 2-byte dtypes over their own |bits|, two an instruction, whose
 * order is that of fp32's); its scale; 8 codes in one 8-byte store per chunk. The addresses of a
 * thread's rows advance by a step's stride (the forward); the general path reads its bias columns
 * once.
 *
 * The kernels are bound by the instructions they issue, not by the bytes (Nsight Compute): the
 * per-element work, the per-row scale, and the instruction cache where cold paths are unrolled
 * into the hot loop. Hence: plain SwiGLU / quick-GeGLU without bias or weights has its own kernels
 * (FAST: no multipliers, offset, clamp, bias or weight in the code; the same bits, as those
 * operations are exact no-ops there), and with a bias or per-token weights the general kernels
 * without the multipliers, offset and clamp (math mode MM_K); the element-by-element path is a
 * loop that computes each element twice (for the amax, then for the code), not unrolled copies
 * per step; the recipe's division sits in a function out of line.
 *
 * That vector path needs SPLIT operands whose rows start on 16 bytes (base and row stride), y
 * likewise, the codes' rows on 8 bytes, and for the backward F % 8 == 0 (a chunk of dh then lies
 * in d_gate or in d_up) and a bias that starts on 16 bytes (the kernels with the sums read it 16
 * bytes a row); the host decides once per launch (fp8_args.vec). Otherwise, and for a
 * chunk that passes the tile's last column, the lane loads and computes its elements one by one
 * (the same math: the same bits), in a loop; a chunk wholly past it is left out.
 *
 * Column-wise copy. The row phase also puts the rounded y in a shared tile (2-byte dtypes: rows of
 * 136 elements on 16 bytes, 16-byte stores, the rows past the last token zeroed; fp32: rows of 130,
 * 8-byte stores). After a barrier each column's 128 x 1 block is read back transposed: for the
 * 2-byte dtypes a warp takes 8 columns at a time with ldmatrix.trans, which leaves a lane 8
 * consecutive tokens of one column in 4 registers, so that the column's amax is a max over the
 * lane's words and 4 lanes, and its 8 codes go to y_t's row in one 8-byte store; for fp32 a
 * half-warp takes a column (a 16-lane amax) and its codes go through a second shared tile laid
 * out as y_t's rows, written out after another barrier with 16-byte stores (colwise<>). Either
 * way the transposition happens inside the kernel.
 *
 * The codes without a division per element (quantise8, quantise2): the recipe's code is the e4m3
 * cast of the fp32 quotient y / scale, correctly rounded. Per block, the correctly rounded
 * reciprocal r of the scale (__frcp_rn); per element, q = RN(y r), its
 * remainder s q - y (exact by an FMA) and the corrected quotient RN(q - r (s q - y)), which is
 * y / s correctly rounded (Markstein's theorem; exact midpoints of e4m3 included, which bf16 data
 * hits often: a bf16 y over a scale amax / 448 of a bf16 amax lands on one in some 3 % of 8-element
 * chunks), then the hardware's cvt, two elements an instruction. Blocks with a scale outside
 * [2^-90, 2^119) (an amax under 2^-81 or over 2^127.8, inf, NaN) take the recipe's own division:
 * the same bits in every case, no data-dependent branch inside a block.
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
 * their launch order interleaves them (split_tile), so that the second read comes from L2. Where
 * F is a multiple of 128 and the 16-byte path applies (fp32: without the column-wise copy)
 * glu_fp8_bwd_pair_kernel takes the backward instead: one block for both tiles, each operand read
 * once and each element's math evaluated once. Where F % 128 == 64 (F = 2880), with the 16-byte
 * path, a 2-byte dtype, FAST, 1 x 128 blocks and no sums, glu_fp8_bwd_shift_kernel takes it: its
 * blocks read each operand column once or twice and evaluate each gradient where it is needed.
 *
 * The backward's dbias / dweights (RED = 1: separate instantiations, so that the kernels without
 * them keep their code; FAST never has them, as they need bias / weights; a block of one tile, a
 * half-warp a row). Each tile writes its partial sums to the workspace in a fixed order, then
 * fp8_reduce_kernel adds the tiles' partials (fp32 throughout; the order never depends on the grid
 * or the scheduling):
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
#include "fp8_tile.cuh"
#include "glu_fp8.h"
#include "glu_math.cuh"

/* Without the column-wise copy a block takes ROW_TILES tiles of a column, one above the other: a
 * thread's per-tile work (its columns, masks, addresses, the general path's bias) is shared by
 * that many more rows, and its loads run on into the next tile's rows. The kernels with the
 * backward's sums (R: RED_IN) take one tile a block, as their partials are per 128-row tile. The
 * kernel and its launch take the block's rows from BLOCK_ROWS. */
#define ROW_TILES 2
#define RED_IN(MODE, BWD, FAST, RED) ((RED) && (BWD) && !(FAST) && (MODE) != MODE_AMAX)
#define BLOCK_ROWS(COLWISE, R) ((COLWISE) || (R) ? TILE : TILE * ROW_TILES)

enum { MODE_BLOCK = 0, MODE_AMAX = 1, MODE_TENSOR = 2 };

typedef struct fp8_args {
    glu_math m;
    const void *gate, *up, *bias, *weights, *dy;
    int64_t g_rs, u_rs, w_stride, step, bias_up; /* step: 1 SPLIT, 2 INTERLEAVED */
    int w_dtype, mn_major, pow2;
    int vec;     /* the row phase's 16-byte path (see the header) */
    int t_width; /* the widest access (16 bytes at most) on which y_t's rows start */
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
    const float *sc;        /* H8: the blockwise copy's scales [T][sc_rs], gate's block b at b, */
    int64_t sc_rs, nbu;     /* up's at nbu + b (SPLIT; INTERLEAVED: glu_scale_block's) */
    unsigned char *cg, *cu; /* H8 in the forward: the copy it writes, gate's and up's codes */
    int64_t cg_rs, cu_rs;   /* [T][F] (rows on 8 bytes), */
    float *cs;              /* and their scales, laid out as sc's */
} fp8_args;

/* The backward's operands from the blockwise copy (H8, fastglu_glu_bwd_fp8_saved_blockwise_cuda):
 * a chunk is 8 codes (one 8-byte load) and the scale_inv of their 1 x 128 block (a chunk's 8
 * columns lie in one block: the 16-byte path has F % 8 == 0). An element decodes as glu_cuda.cu's
 * block-scaled fp8 operands do (the exact e4m3 value, times the scale, rounded once), so that dh is
 * fastglu_glu_bwd_cuda's from the same copy. opnd<E, H8>::t is the register type of an operand
 * chunk. */
typedef struct h8_chunk {
    uint2 c;
    float s;
} h8_chunk;
static __device__ __forceinline__ float e4m3_value(unsigned code) {
    return __half2float(__half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)code, __NV_E4M3)));
}
static __device__ __forceinline__ float vget(const h8_chunk &v, int i) {
    return __fmul_rn(e4m3_value(((i < 4 ? v.c.x : v.c.y) >> (8 * (i & 3))) & 0xffu), v.s);
}
static __device__ __forceinline__ void ld_h8(h8_chunk &v, const void *codes, float s) {
    v.c = __ldg((const uint2 *)codes), v.s = s;
}
template <typename E, int H8> struct opnd {
    typedef vec8<E> t;
};
template <typename E> struct opnd<E, 1> {
    typedef h8_chunk t;
};
/* One operand element (column j of gate, or of up: is_up) of row t from the copy (H8). */
static __device__ __forceinline__ float h8_element(const fp8_args &a, const void *base, int64_t rs,
                                                   int64_t t, int64_t j, int is_up) {
    const float s = a.sc[t * a.sc_rs + glu_scale_block(a.step == 2, a.F, j, is_up)];
    return __fmul_rn(e4m3_value(((const unsigned char *)base)[t * rs + j * a.step]), s);
}

/* The blockwise copy's codes of a block without a scale (fp8_recipe.h: all zeros, a subnormal
 * amax, inf or NaN in it): the plain cast in saved_fp8's overflow mode; out of line (cold). */
template <typename E> static __device__ __noinline__ uint2 cast8(const vec8<E> v, int sat) {
    unsigned w[2] = {0u, 0u};
#pragma unroll
    for (int e = 0; e < 8; ++e)
        w[e >> 2] |= (unsigned)fastglu_f32_to_e4m3(vget(v, e), sat) << (8 * (e & 3));
    return make_uint2(w[0], w[1]);
}

/* Per dtype and direction: the 8-column chunks a lane holds (2 in the 2-byte forward: a lane's
 * share of the per-row work, the amax's shuffles, the scale and its store, halves), the lanes that
 * cover a row of the tile and the rows a step of the block takes; the shared tile's row pitch in
 * elements (fp32: 8-byte row starts, 2 l + const words apart for tokens l = 0..15, so a half-warp's
 * column read hits 16 distinct banks, the other half-warp's column the other 16; 2-byte dtypes:
 * rows on 16 bytes for ldmatrix, their chunks swizzled by fp8_tile.cuh's tile_col so that the 8
 * rows of one of its matrices fall in distinct banks) and the column-wise copy's
 * shared bytes (the tile, and for fp32 the transposed codes' tile); the row steps whose
 * loads a thread issues before computing any (unroll: 128 bytes of loads in flight per thread in
 * the forward, 96 in the backward); the blocks per SM the registers are held to (3: <= 80
 * registers, 4: <= 64; the backward fits 64 with its 2 steps; RED, the backward's sums with 8 more
 * accumulators: 3 for 2-byte types and 2 for fp32, which spills at 3, its column-wise shared tiles
 * allowing only 2 blocks anyway; the general 2-byte backward takes 3, glu_fp8_kernel's launch
 * bounds); whether a thread's row addresses advance by pointers (inc: the forward; the backward's
 * 64 registers leave its loads' and codes' addresses recomputed per row). */
template <typename E, int BWD, int RED = 0> struct geom {
    enum {
        nch = sizeof(E) == 2 && !BWD ? 2 : 1,
        lpr = TILE / (8 * nch),
        rows = THREADS / lpr,
        pitch = sizeof(E) == 4 ? TILE + 2 : TILE + 8,
        tile_bytes = TILE * pitch * (int)sizeof(E),
        cw_bytes = tile_bytes + (sizeof(E) == 4 ? TILE * CT_PITCH : 0),
        unroll = sizeof(E) == 4 || BWD || nch == 2 ? 2 : 4,
        min_blocks = RED                     ? (sizeof(E) == 4 ? 2 : 3)
                     : BWD && sizeof(E) != 4 ? 4
                                             : 3,
        inc = !BWD
    };
};
/* RED's shared memory: the 8 warps' dbias sums of the tile's columns, after the column-wise tiles */
#define RED_BYTES (WARPS * TILE * (int)sizeof(float))

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
template <typename E, int BWD, int H8 = 0>
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
    const float g =
        H8 ? h8_element(a, a.gate, a.g_rs, t, j, 0) : to_f32(gate[t * a.g_rs + j * a.step]);
    const float u = H8 ? h8_element(a, a.up, a.u_rs, t, j, 1) : to_f32(up[t * a.u_rs + j * a.step]);
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
template <typename E, int BWD, int H8 = 0>
static __device__ __forceinline__ float element(const fp8_args &a, int64_t t, int64_t col,
                                                float w) {
    int is_up;
    const glu_grads gr = element_grads<E, BWD, H8>(a, t, col, w, &is_up);
    return !BWD ? gr.y : is_up ? gr.du : gr.dg;
}

/* The column-wise copy of a tile the row phase left in shared memory (tile: the rounded y or dh of
 * the tile's rows 0 .. nt - 1 and columns 0 .. nj - 1 of the quantised operand, from column j0 and
 * token t0, row pitch P elements; after a barrier): each column's 128 x 1 block, its amax, its
 * scale (row tile blockIdx.x of scale_t) and its codes, y_t's rows j0 .. j0 + nj - 1 (the header's
 * "Column-wise copy").
 *
 * 2-byte dtypes: fp8_tile.cuh's transposed_codes16 (ldmatrix.trans, 8 consecutive tokens of a
 * column a lane; the rows past nt zero, so that they raise no amax). */
template <typename E, int MODE, int P> struct colwise {
    static __device__ __forceinline__ void tile(const fp8_args &a, const E *tile, unsigned char *,
                                                int64_t j0, int nj, int64_t t0, int nt,
                                                const fp8_divisor &td) {
        transposed_codes16<E, MODE == MODE_BLOCK, P>(t_out_of(a, j0, t0), tile, nj, nt, td);
    }
};
/* fp32: a half-warp per column, 8 columns each (2 apart in the two half-warps of a warp, so that
 * the reads of a warp fall in 32 distinct banks), lane l its tokens l, l + 16, .., l + 112: the
 * column's amax (a 16-lane max, both half-warps taking the shuffles), its scale, and its codes into
 * a second shared tile ct laid out as y_t's rows; after another barrier the block writes that tile
 * out along y_t's rows with 16-byte stores. */
template <int MODE, int P> struct colwise<float, MODE, P> {
    static __device__ __forceinline__ void tile(const fp8_args &a, const float *tile,
                                                unsigned char *ct, int64_t j0, int nj, int64_t t0,
                                                int nt, const fp8_divisor &td) {
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, half = lane >> 4;
        const int l16 = lane & 15;
#pragma unroll 1
        for (int p = 0; p < 8; ++p) {
            const int cl = 16 * warp + 2 * p + half;
            const int live = cl < nj; /* uniform across the half-warp; both take the shuffles */
            float v[8];
            unsigned am = 0;
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                const int r = l16 + 16 * i;
                v[i] = 0.0f;
                if (live && r < nt)
                    v[i] = *tile_at<P>(tile, r, cl), am = max(am, fastglu_abs_bits(v[i]));
            }
            fp8_divisor d = td;
            if (MODE == MODE_BLOCK) {
                const float s = fastglu_fp8_scale(group_max<16>(am), a.pow2);
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
        write_transposed(a.dt, a.dt_rs, a.t_width == 16, ct, j0, nj, t0, nt); /* y_t's rows */
    }
};

/* FAST: the common case's kernels (math mode MM_K: plain SwiGLU or quick-GeGLU; no bias, no
 * weights), the multipliers, offset, clamp, bias and weight left out at compile time: the same
 * bits, as those operations are exact no-ops there (x + -0, 1 x). Otherwise the general kernels
 * (the bias columns held in registers, the weights, the backward's sums) in math mode GM: MM_K
 * where the math is plain SwiGLU / quick-GeGLU and only a bias or per-token weights made the call
 * general, MM_ANY for the rest (math_mode_of; the same bits either way, as MM_K leaves out only
 * identities). The host picks both once per launch (glu_fp8). The general 2-byte backward is held
 * to 3 blocks an SM (80 registers): at 64, its bias and the general math beside two row steps'
 * loads spilled. */
template <typename E, int MODE, int COLWISE, int BWD, int FAST, int RED = 0, int GM = MM_ANY,
          int H8 = 0>
__global__ void __launch_bounds__(THREADS, H8 && !BWD ? 2
                                           : BWD && !FAST && sizeof(E) == 2
                                               ? 3
                                               : geom<E, BWD, RED>::min_blocks)
    glu_fp8_kernel(const fp8_args a) {
    enum {
        /* H8: the backward reads its operands from the blockwise copy (HR); the forward writes
         * the copy (CP: 1 x 128 blocks, the SPLIT layout, whole 8-column chunks, no clamp) */
        HR = H8 && BWD,
        CP = H8 && !BWD && MODE == MODE_BLOCK,
        /* RED: the backward's sums, in the kernels that write codes (not MODE_AMAX's first pass) */
        R = RED_IN(MODE, BWD, FAST, RED),
        P = geom<E, BWD>::pitch,
        /* the general 2-byte forward (bias, weights, the general math) takes one row step at a
         * time: its hoisted bias and the general math's temporaries do not fit 80 registers
         * beside two steps' loads (ptxas spilled 76 bytes, and the spills cost more than the
         * loads in flight gain) */
        U = !FAST && !BWD && sizeof(E) == 2 ? 1 : geom<E, BWD>::unroll,
        NCH = geom<E, BWD>::nch,
        LPR = geom<E, BWD>::lpr,
        SR = geom<E, BWD>::rows,
        INC = geom<E, BWD>::inc,
        NR = BLOCK_ROWS(COLWISE, R), /* the block's rows */
        MM = FAST ? MM_K : GM,
        /* the general path's bias columns: held in registers (HB: the forward, and the 2-byte
         * backward without the sums), else read per row, 16 bytes at a time (BV: the 2-byte
         * backward with the sums, whose 8 accumulators leave no room to hold them: ptxas spilled)
         * or by elements (fp32's backward, whose 96 bytes of operands a row fill the registers) */
        HB = !FAST && (!BWD || (sizeof(E) == 2 && !R)),
        BV = !FAST && BWD && sizeof(E) == 2 && R
    };
    /* R's sums: a row of the tile is a half-warp's (dbias's per-thread rows, half_warp_sum) */
    static_assert(!R || (NCH == 1 && LPR == 16 && SR == 2 * WARPS), "RED: a half-warp a row");
    extern __shared__ __align__(16) unsigned char smem_raw[];
    E *tile = (E *)smem_raw;                                 /* y [128][P], COLWISE */
    unsigned char *ct = smem_raw + geom<E, BWD>::tile_bytes; /* fp32's codes [128][CT_PITCH] */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, half = lane >> 4;
    const int lr = lane % LPR, rw = (32 / LPR) * warp + lane / LPR; /* lane in its row, row */
    const int64_t by = BWD && a.step == 1 ? split_tile(blockIdx.y, gridDim.y, a.F) : blockIdx.y;
    const int64_t t0 = (int64_t)blockIdx.x * NR, j0 = by * TILE;
    const int nt = (int)min((int64_t)NR, a.T - t0), nj = (int)min((int64_t)TILE, a.W - j0);
    const E *gate = (const E *)a.gate, *up = (const E *)a.up, *dy = (const E *)a.dy;
    float ts = 0.0f;
    if (MODE == MODE_TENSOR) {
        ts = fastglu_fp8_scale(*(volatile unsigned *)a.amax, a.pow2);
        if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) a.s[0] = ts;
    }
    const fp8_divisor td = make_divisor(ts);
    /* chunk k of the lane: the tile's columns c(k) .. c(k) + 7, c(k) = 8 (lr + LPR k) (a warp's
     * loads of a chunk are 128 contiguous bytes of each of its rows); by the vector path (vmask)
     * where it lies in the tile, by elements (emask) where it straddles the tile's last column
     * or the operands are not aligned for it */
    unsigned vmask = 0, emask = 0;
    int64_t jv[NCH]; /* vector path (SPLIT): the operands' column of the chunk's first element */
    int up_half[NCH];
#pragma unroll
    for (int k = 0; k < NCH; ++k) {
        const int c = 8 * (lr + LPR * k);
        if (c < nj) {
            if (a.vec && c + 8 <= nj)
                vmask |= 1u << k;
            else
                emask |= 1u << k;
        }
        jv[k] = j0 + c, up_half[k] = 0;
        if (BWD && jv[k] >= a.F) jv[k] -= a.F, up_half[k] = 1;
    }
    /* the general path's bias of the lane's columns, the same for every row: read once (no bias:
     * -0, as the general path adds it) */
    vec8<E> bgv[NCH], buv[NCH];
    if (HB) {
#pragma unroll
        for (int k = 0; k < NCH; ++k) {
            E bge[8], bue[8];
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                from_f32(&bge[e], -0.0f), from_f32(&bue[e], -0.0f);
                if (a.bias && (vmask >> k & 1)) {
                    bge[e] = ((const E *)a.bias)[jv[k] + e];
                    bue[e] = ((const E *)a.bias)[jv[k] + e + a.bias_up];
                }
            }
            bgv[k] = pack8(bge), buv[k] = pack8(bue);
        }
    }
    /* the thread's first row (t0 + rw): the addresses of its operands (chunk 0), codes, y and
     * row-wise scale, advanced a step (SR rows) at a time */
    const int64_t t1 = t0 + rw;
    const E *gp = INC ? gate + t1 * a.g_rs + jv[0] : NULL,
            *upp = INC ? up + t1 * a.u_rs + jv[0] : NULL;
    const E *dyp = BWD ? dy + t1 * a.dy_rs + jv[0] : NULL;
    unsigned char *dp = a.d + t1 * a.d_rs + j0 + 8 * lr;
    E *yp = MODE != MODE_TENSOR && a.y ? (E *)a.y + t1 * a.y_rs + j0 + 8 * lr : NULL;
    float *sp = MODE == MODE_BLOCK ? scale_at(a.s, a.s_ld, a.mn_major, t1, by) : NULL;
    const int64_t g_st = SR * a.g_rs, u_st = SR * a.u_rs, dy_st = SR * a.dy_rs, d_st = SR * a.d_rs,
                  y_st = SR * a.y_rs, s_st = SR * (a.mn_major ? 1 : a.s_ld);
    unsigned tile_max = 0;
    /* R: this thread's dbias sums of its 8 columns over its rows; the tile's dweights partials
     * (a tile with d_gate columns, asked for) */
    float cb[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) cb[e] = 0.0f;
    const int want_dw = R && a.wsw && by < a.nwt;
    const int nsteps = (nt + SR - 1) / SR;
    for (int s0 = 0; s0 < nsteps; s0 += U) {
        /* the loads of U steps, before any of them is used (the stores below could alias the
         * operands as far as the compiler knows: it would not move a load above them) */
        typename opnd<E, HR>::t rg[U][NCH], ru[U][NCH];
        vec8<E> rd[U][NCH];
#pragma unroll
        for (int q = 0; q < U; ++q) {
            if ((s0 + q) * SR + rw < nt) {
                const int64_t t = t0 + (s0 + q) * SR + rw;
                const E *dyr = INC ? dyp + q * dy_st : dy + t * a.dy_rs + jv[0];
#pragma unroll
                for (int k = 0; k < NCH; ++k) {
                    if (!(vmask >> k & 1)) continue;
                    /* chunk k's offset from chunk 0: a constant in the forward */
                    const int64_t o = BWD ? jv[k] - jv[0] : 8 * LPR * k;
                    if constexpr (HR) {
                        const float *sr = a.sc + t * a.sc_rs;
                        const int64_t b = jv[k] >> 7;
                        ld_h8(rg[q][k], (const unsigned char *)a.gate + t * a.g_rs + jv[k], sr[b]);
                        ld_h8(ru[q][k], (const unsigned char *)a.up + t * a.u_rs + jv[k],
                              sr[a.nbu + b]);
                    } else {
                        const E *g = INC ? gp + q * g_st : gate + t * a.g_rs + jv[0];
                        const E *u = INC ? upp + q * u_st : up + t * a.u_rs + jv[0];
                        ld8(rg[q][k], g + o);
                        ld8(ru[q][k], u + o);
                    }
                    if (BWD) ld8(rd[q][k], dyr + o);
                }
            }
        }
        if (INC) gp += U * g_st, upp += U * u_st;
        if (BWD) dyp += U * dy_st;
#pragma unroll
        for (int q = 0; q < U; ++q) {
            if (s0 + q >= nsteps) break; /* uniform across the block */
            const int r = (s0 + q) * SR + rw;
            const int valid = r < nt; /* uniform across the row's lanes */
            const int64_t t = t0 + r;
            vec8<E> yv[NCH];
            unsigned am = 0, amg = 0, amu = 0; /* CP: the lane's max |gate|, |up| bits */
            float dwp = 0.0f; /* R: the lane's dweights sum over its d_gate columns of this row */
            if (valid) {
                const float w = !FAST && a.weights
                                    ? load_token_weight(a.weights, a.w_dtype, t * a.w_stride)
                                    : 1.0f;
                unsigned pm = 0; /* the vector path's amax, as round8 keeps it */
                if (HB) opaque(bgv), opaque(buv);
#pragma unroll
                for (int k = 0; k < NCH; ++k) {
                    if (!(vmask >> k & 1)) continue;
                    float v[8];
                    vec8<E> brg, bru; /* BV: the chunk's bias columns (the 16-byte path includes
                                       * the bias's alignment in the backward) */
                    if (BV && a.bias) {
                        const E *bp = (const E *)a.bias + jv[k];
                        ld8(brg, bp), ld8(bru, bp + a.bias_up);
                    }
#pragma unroll
                    for (int e = 0; e < 8; ++e) {
                        float bg = -0.0f, bu = -0.0f;
                        if (HB) {
                            bg = vget(bgv[k], e), bu = vget(buv[k], e);
                        } else if (BV && a.bias) {
                            bg = vget(brg, e), bu = vget(bru, e);
                        } else if (!FAST && a.bias) {
                            bg = to_f32(((const E *)a.bias)[jv[k] + e]);
                            bu = to_f32(((const E *)a.bias)[jv[k] + e + a.bias_up]);
                        }
                        if (BWD) {
                            const glu_grads gr = glu_backward<MM, !FAST, !FAST>(
                                a.m, vget(rg[q][k], e), vget(ru[q][k], e), bg, bu, w,
                                vget(rd[q][k], e));
                            v[e] = up_half[k] ? gr.du : gr.dg;
                            if (R) {
                                cb[e] = __fadd_rn(cb[e], up_half[k] ? gr.dbu : gr.dbg);
                                if (!up_half[k]) dwp = __fadd_rn(dwp, gr.dw);
                            }
                        } else {
                            v[e] = glu_forward<MM, !FAST, !FAST>(a.m, vget(rg[q][k], e),
                                                                 vget(ru[q][k], e), bg, bu, w);
                        }
                    }
                    round8(yv[k], pm, v);
                    if (MODE != MODE_TENSOR && a.y)
                        st8((INC ? yp + q * y_st : (E *)a.y + t * a.y_rs + j0 + 8 * lr) +
                                8 * LPR * k,
                            yv[k]);
                    if (COLWISE) st8_tile(tile_at<P>(tile, r, 8 * (lr + LPR * k)), yv[k]);
                }
                am = amax_bits(pm, (const E *)NULL);
                if constexpr (CP) {
#pragma unroll
                    for (int k = 0; k < NCH; ++k)
                        if (vmask >> k & 1)
                            amg = max(amg, chunk_amax(rg[q][k])),
                            amu = max(amu, chunk_amax(ru[q][k]));
                }
                if (emask) {
                    /* element by element, a loop (cold: ragged chunks, unaligned operands); the
                     * codes below compute each element again (the same bits) */
#pragma unroll 1
                    for (int k = 0; k < NCH; ++k) {
                        if (!(emask >> k & 1)) continue;
                        const int c = 8 * (lr + LPR * k);
#pragma unroll 1
                        for (int e = 0; e < 8 && c + e < nj; ++e) {
                            E ve;
                            if (R) {
                                int is_up;
                                const glu_grads gr =
                                    element_grads<E, BWD, HR>(a, t, j0 + c + e, w, &is_up);
                                from_f32(&ve, is_up ? gr.du : gr.dg);
                                const float db = is_up ? gr.dbu : gr.dbg;
#pragma unroll
                                for (int i = 0; i < 8; ++i) /* cb[e] kept in registers */
                                    if (i == e) cb[i] = __fadd_rn(cb[i], db);
                                if (!is_up) dwp = __fadd_rn(dwp, gr.dw);
                            } else {
                                from_f32(&ve, element<E, BWD, HR>(a, t, j0 + c + e, w));
                            }
                            am = max(am, fastglu_abs_bits(to_f32(ve)));
                            if (MODE != MODE_TENSOR && a.y)
                                ((E *)a.y)[t * a.y_rs + j0 + c + e] = ve;
                            if (COLWISE) *tile_at<P>(tile, r, c + e) = ve;
                        }
                    }
                }
            }
            if (MODE == MODE_AMAX) {
                tile_max = max(tile_max, am);
                continue;
            }
            if (want_dw) { /* every lane takes the shuffles; the row's partial from its lane 0 */
                const float sw = half_warp_sum(dwp);
                if (valid && lr == 0) a.wsw[by * a.T + t] = sw;
            }
            fp8_divisor d = td;
            if (MODE == MODE_BLOCK) {
                const float s = fastglu_fp8_scale(group_max<LPR>(am), a.pow2);
                if (valid && lr == 0) sp[q * s_st] = s;
                d = make_divisor(s);
            }
            if constexpr (CP) { /* the copy's two blocks of the row: gate's and up's columns */
                amg = group_max<LPR>(amg), amu = group_max<LPR>(amu);
                if (valid) {
                    const float sg = fastglu_fp8_store_scale(amg, 0),
                                su = fastglu_fp8_store_scale(amu, 0);
                    if (lr == 0) {
                        float *cs = a.cs + t * a.sc_rs;
                        cs[by] = sg, cs[a.nbu + by] = su;
                    }
                    const int scg = fastglu_fp8_store_scaled(amg),
                              scu = fastglu_fp8_store_scaled(amu);
                    const fp8_divisor dg = make_divisor(sg), du = make_divisor(su);
#pragma unroll
                    for (int k = 0; k < NCH; ++k)
                        if (vmask >> k & 1) {
                            *(uint2 *)(a.cg + t * a.cg_rs + jv[k]) =
                                scg ? quantise8(dg, rg[q][k]) : cast8(rg[q][k], a.m.fp8_sat);
                            *(uint2 *)(a.cu + t * a.cu_rs + jv[k]) =
                                scu ? quantise8(du, ru[q][k]) : cast8(ru[q][k], a.m.fp8_sat);
                        }
                }
            }
            if (!valid) continue;
            unsigned char *drow = INC ? dp + q * d_st : a.d + t * a.d_rs + j0 + 8 * lr;
#pragma unroll
            for (int k = 0; k < NCH; ++k)
                if (vmask >> k & 1) *(uint2 *)(drow + 8 * LPR * k) = quantise8(d, yv[k]);
            if (emask) {
                const float w =
                    a.weights ? load_token_weight(a.weights, a.w_dtype, t * a.w_stride) : 1.0f;
#pragma unroll 1
                for (int k = 0; k < NCH; ++k) {
                    if (!(emask >> k & 1)) continue;
                    const int c = 8 * (lr + LPR * k);
#pragma unroll 1
                    for (int e = 0; e < 8 && c + e < nj; ++e) {
                        E ve;
                        from_f32(&ve, element<E, BWD, HR>(a, t, j0 + c + e, w));
                        a.d[t * a.d_rs + j0 + c + e] = fastglu_fp8_quantise(to_f32(ve), d.s);
                    }
                }
            }
        }
        dp += U * d_st;
        if (MODE != MODE_TENSOR && a.y) yp += U * y_st;
        if (MODE == MODE_BLOCK) sp += U * s_st;
    }
    if (MODE == MODE_AMAX) {
        tile_max = group_max<32>(tile_max);
        if (lane == 0) atomicMax(a.amax, tile_max);
        return;
    }
    if (R && a.wsb) { /* uniform: the tile's dbias partials, the 8 warps' sums added in order */
        float *red = (float *)(smem_raw + (COLWISE ? geom<E, BWD>::cw_bytes : 0));
#pragma unroll
        for (int e = 0; e < 8; ++e)
            cb[e] = __fadd_rn(cb[e], __shfl_xor_sync(0xffffffffu, cb[e], 16));
        if (half == 0)
#pragma unroll
            for (int e = 0; e < 8; ++e) red[warp * TILE + 8 * lr + e] = cb[e];
        __syncthreads();
        if (threadIdx.x < nj) {
            float sb = red[threadIdx.x];
#pragma unroll
            for (int w = 1; w < WARPS; ++w) sb = __fadd_rn(sb, red[w * TILE + threadIdx.x]);
            a.wsb[(int64_t)blockIdx.x * a.W + j0 + threadIdx.x] = sb;
        }
    }
    if (!COLWISE) return;
    if (sizeof(E) == 2 && nt < TILE) zero_rows16<E, P>(tile, nt); /* for the column amaxes */
    __syncthreads();
    colwise<E, MODE, P>::tile(a, tile, ct, j0, nj, t0, nt, td);
}

/* The backward's paired tiles (SPLIT, F a multiple of 128, the 16-byte path; the column-wise copy
 * for the 2-byte dtypes): a block takes the operand columns j0 .. j0 + 127 of gate, up and dy and
 * writes both dh tiles made from them, d_gate's (dh columns j0 ..) and d_up's (F + j0 ..), each
 * element's two gradients from one read of its three operands and one evaluation of the math, where
 * the split tiles read the operands twice (the second time from L2) and evaluate both gradients to
 * keep one. F % 128 == 0 keeps d_up's 1 x 128 blocks on the same lanes as d_gate's. Lane l of a
 * half-warp holds the operand columns 8 l .. 8 l + 7 of its row; the block takes 256 rows (128
 * with the column-wise copy or the sums), 16 a step, and issues the loads of two steps before
 * computing either. With the column-wise copy both tiles go to shared memory (2 x 34 KB: three
 * blocks an SM) and colwise<> transposes each after the row phase. The same values, roundings,
 * amaxes, scales and codes as glu_fp8_kernel's backward (the same functions, element by
 * element). */
template <typename E, int MODE, int FAST, int RED, int COLWISE = 0, int GM = MM_ANY, int H8 = 0>
__global__ void __launch_bounds__(THREADS, (sizeof(E) == 2 && FAST && !COLWISE ? 4
                                            : sizeof(E) == 4 && RED            ? 2
                                                                               : 3))
    glu_fp8_bwd_pair_kernel(const fp8_args a) {
    /* U: the row steps whose loads a thread issues before computing any (one for fp32, whose 96
     * bytes of operands a row fill the registers, and with the sums' 17 accumulators); blocks per
     * SM: 4 (64 registers) for the FAST 2-byte kernels without the column-wise copy, 2 for fp32
     * with the sums, else 3 (80: the general math, its bias columns, fp32; the column-wise copy's
     * 68 KB of shared tiles allow three anyway); R: the backward's sums (RED, in the kernels that
     * write codes), one 128-row tile a block as the split tiles' (their partials are per 128-row
     * tile), in the split tiles' orders (the header's "dbias / dweights"): the same partials bit
     * for bit */
    enum {
        R = RED && !FAST && MODE != MODE_AMAX,
        U = sizeof(E) == 4 || R ? 1 : 2,
        SR = THREADS / 16,
        NR = R || COLWISE ? TILE : 2 * TILE,
        MM = FAST ? MM_K : GM,
        P = geom<E, 1>::pitch
    };
    static_assert(!COLWISE || (sizeof(E) == 2 && MODE != MODE_AMAX), "COLWISE: 2-byte codes");
    extern __shared__ __align__(16) unsigned char smem_raw[];
    E *tile_g = (E *)smem_raw, *tile_u = tile_g + TILE * P; /* COLWISE: d_gate's, d_up's [128][P] */
    const int lane = threadIdx.x & 31, lr = lane & 15, rw = threadIdx.x >> 4;
    const int64_t t0 = (int64_t)blockIdx.x * NR, j = (int64_t)blockIdx.y * TILE + 8 * lr;
    const int64_t bgk = blockIdx.y, buk = a.F / TILE + blockIdx.y; /* the two blocks' indices */
    const int nt = (int)min((int64_t)NR, a.T - t0);
    const E *gate = (const E *)a.gate, *up = (const E *)a.up, *dy = (const E *)a.dy;
    float ts = 0.0f;
    if (MODE == MODE_TENSOR) {
        ts = fastglu_fp8_scale(*(volatile unsigned *)a.amax, a.pow2);
        if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) a.s[0] = ts;
    }
    const fp8_divisor td = make_divisor(ts);
    /* the general path's bias of the lane's columns, packed (no bias: -0, as the general path
     * adds it) */
    vec8<E> bgv[1], buv[1];
    if (!FAST) {
        E bge[8], bue[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            from_f32(&bge[e], -0.0f), from_f32(&bue[e], -0.0f);
            if (a.bias) {
                bge[e] = ((const E *)a.bias)[j + e];
                bue[e] = ((const E *)a.bias)[j + e + a.bias_up];
            }
        }
        bgv[0] = pack8(bge), buv[0] = pack8(bue);
    }
    unsigned tile_max = 0;
    /* R: this thread's dbias sums of its 8 d_gate and 8 d_up columns over its rows */
    float cbg[8], cbu[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) cbg[e] = cbu[e] = 0.0f;
    const int want_dw = R && a.wsw && (int64_t)blockIdx.y < a.nwt;
    const int nsteps = (nt + SR - 1) / SR;
    for (int s0 = 0; s0 < nsteps; s0 += U) {
        typename opnd<E, H8>::t rg[U], ru[U];
        vec8<E> rd[U];
#pragma unroll
        for (int q = 0; q < U; ++q) {
            const int64_t t = t0 + (s0 + q) * SR + rw;
            if ((s0 + q) * SR + rw < nt) {
                if constexpr (H8) { /* (F % 128 == 0: the operands' blocks are dh's, bgk and buk) */
                    const float *sr = a.sc + t * a.sc_rs;
                    ld_h8(rg[q], (const unsigned char *)a.gate + t * a.g_rs + j, sr[bgk]);
                    ld_h8(ru[q], (const unsigned char *)a.up + t * a.u_rs + j, sr[buk]);
                } else {
                    ld8(rg[q], gate + t * a.g_rs + j);
                    ld8(ru[q], up + t * a.u_rs + j);
                }
                ld8(rd[q], dy + t * a.dy_rs + j);
            }
        }
#pragma unroll
        for (int q = 0; q < U; ++q) {
            if (s0 + q >= nsteps) break; /* uniform across the block */
            const int r = (s0 + q) * SR + rw;
            const int valid = r < nt; /* uniform across the row's lanes */
            const int64_t t = t0 + r;
            vec8<E> dg, du;
            unsigned pg = 0, pu = 0;
            float dwp = 0.0f; /* R: the lane's dweights sum over its d_gate columns of this row */
            if (valid) {
                const float w = !FAST && a.weights
                                    ? load_token_weight(a.weights, a.w_dtype, t * a.w_stride)
                                    : 1.0f;
                float vg[8], vu[8];
                if (!FAST) opaque(bgv), opaque(buv);
#pragma unroll
                for (int e = 0; e < 8; ++e) {
                    const float bg = FAST ? -0.0f : vget(bgv[0], e);
                    const float bu = FAST ? -0.0f : vget(buv[0], e);
                    const glu_grads gr = glu_backward<MM, !FAST, !FAST>(
                        a.m, vget(rg[q], e), vget(ru[q], e), bg, bu, w, vget(rd[q], e));
                    vg[e] = gr.dg, vu[e] = gr.du;
                    if (R) {
                        cbg[e] = __fadd_rn(cbg[e], gr.dbg), cbu[e] = __fadd_rn(cbu[e], gr.dbu);
                        dwp = __fadd_rn(dwp, gr.dw);
                    }
                }
                round8(dg, pg, vg);
                round8(du, pu, vu);
                if (COLWISE) {
                    st8_tile(tile_at<P>(tile_g, r, 8 * lr), dg);
                    st8_tile(tile_at<P>(tile_u, r, 8 * lr), du);
                }
                if (MODE != MODE_TENSOR && a.y) {
                    E *yr = (E *)a.y + t * a.y_rs + j;
                    st8(yr, dg);
                    st8(yr + a.F, du);
                }
            }
            if (MODE == MODE_AMAX) {
                tile_max = max(tile_max,
                               max(amax_bits(pg, (const E *)NULL), amax_bits(pu, (const E *)NULL)));
                continue;
            }
            if (want_dw) { /* every lane takes the shuffles; the row's partial from its lane 0 */
                const float sw = half_warp_sum(dwp);
                if (valid && lr == 0) a.wsw[(int64_t)blockIdx.y * a.T + t] = sw;
            }
            fp8_divisor dgd = td, dud = td;
            if (MODE == MODE_BLOCK) {
                /* the two blocks' amaxes over the row's 16 lanes; then lanes 0-7 of the row derive
                 * d_gate's scale and reciprocal and lanes 8-15 d_up's, in the same instructions,
                 * and each lane takes the other half's by a shuffle (a warp's instructions for one
                 * scale, not two); lanes 0 and 8 store them */
                unsigned ag, au;
                if (sizeof(E) == 2) { /* both 16-bit maxima in one word: one 16-lane max */
                    const unsigned both = group_max_u16x2<16>(max(pg & 0xffffu, pg >> 16) |
                                                              max(pu & 0xffffu, pu >> 16) << 16);
                    ag = amax_bits(both & 0xffffu, (const E *)NULL);
                    au = amax_bits(both >> 16, (const E *)NULL);
                } else {
                    ag = group_max<16>(amax_bits(pg, (const E *)NULL));
                    au = group_max<16>(amax_bits(pu, (const E *)NULL));
                }
                const int mine_up = lr >= 8;
                const float sm = fastglu_fp8_scale(mine_up ? au : ag, a.pow2);
                const float rm = rcp_rn(sm);
                if (valid && (lr & 7) == 0)
                    *scale_at(a.s, a.s_ld, a.mn_major, t, mine_up ? buk : bgk) = sm;
                const float so = __shfl_xor_sync(0xffffffffu, sm, 8);
                const float ro = __shfl_xor_sync(0xffffffffu, rm, 8);
                dgd = mine_up ? divisor_of(so, ro) : divisor_of(sm, rm);
                dud = mine_up ? divisor_of(sm, rm) : divisor_of(so, ro);
            }
            if (!valid) continue;
            unsigned char *drow = a.d + t * a.d_rs + j;
            *(uint2 *)drow = quantise8(dgd, dg);
            *(uint2 *)(drow + a.F) = quantise8(dud, du);
        }
    }
    if (MODE == MODE_AMAX) {
        tile_max = group_max<32>(tile_max);
        if (lane == 0) atomicMax(a.amax, tile_max);
    }
    if (R && a.wsb) { /* the tile's dbias partials of both tiles, the 8 warps' sums in order */
        /* [2][WARPS][TILE]: d_gate's, then d_up's */
        float *red = (float *)(smem_raw + (COLWISE ? 2 * geom<E, 1>::tile_bytes : 0));
        const int warp = threadIdx.x >> 5;
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            cbg[e] = __fadd_rn(cbg[e], __shfl_xor_sync(0xffffffffu, cbg[e], 16));
            cbu[e] = __fadd_rn(cbu[e], __shfl_xor_sync(0xffffffffu, cbu[e], 16));
        }
        if ((lane >> 4) == 0)
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                red[warp * TILE + 8 * lr + e] = cbg[e];
                red[(WARPS + warp) * TILE + 8 * lr + e] = cbu[e];
            }
        __syncthreads();
        const int c = threadIdx.x & (TILE - 1), hu = threadIdx.x >> 7; /* column, d_up's half */
        const float *rc = red + hu * WARPS * TILE + c;
        float sb = rc[0];
#pragma unroll
        for (int w = 1; w < WARPS; ++w) sb = __fadd_rn(sb, rc[w * TILE]);
        a.wsb[(int64_t)blockIdx.x * a.W + hu * a.F + (int64_t)blockIdx.y * TILE + c] = sb;
    }
    if (!COLWISE) return;
    if (nt < TILE) /* the rows past the last token: zero for the column amaxes */
        zero_rows16<E, P>(tile_g, nt), zero_rows16<E, P>(tile_u, nt);
    __syncthreads();
    colwise<E, MODE, P>::tile(a, tile_g, NULL, (int64_t)blockIdx.y * TILE, TILE, t0, nt, td);
    colwise<E, MODE, P>::tile(a, tile_u, NULL, a.F + (int64_t)blockIdx.y * TILE, TILE, t0, nt, td);
}

/* The backward's shifted pairs (F % 128 == 64, SPLIT, the 16-byte path, the 2-byte dtypes; FAST,
 * 1 x 128 blocks, no sums): there d_up's 1 x 128 blocks of dh start 64 operand columns before
 * d_gate's (dh column F + j, F = 128 q + 64), so that a block of d_gate and a block of d_up never
 * cover the same operand columns and the paired tiles do not apply. Block m takes the operand
 * columns 128 m - 64 .. 128 m + 127 as three chunks of 8 a lane (8 lanes a row: chunk k of lane l
 * at 128 m - 64 + 64 k + 8 l) and writes d_up's block of operand columns 128 m - 64 .. 128 m + 63
 * (chunks 0 and 1: dh block q + m) and d_gate's of 128 m .. 128 m + 127 (chunks 1 and 2: dh block
 * m): each operand column is read by one or two blocks (the split tiles: two), each element's
 * math evaluated once or twice for the gradient it is needed for (the split tiles: twice, both
 * gradients). Block 0 has no d_up block (its columns before 0), block q none of d_gate (past F);
 * block q + 1 takes the one dh block that holds both, dh block q: d_gate's columns 128 q .. F - 1
 * (its chunk 2) and d_up's 0 .. 63 (its chunk 0) under one scale. The row's two amaxes in one
 * 8-lane max of packed 16-bit maxima; lanes 0-3 derive d_gate's scale, 4-7 d_up's, in the same
 * instructions. The block takes 256 rows (128 with the column-wise copy: both blocks in shared
 * memory, transposed after the row phase by colwise<>, as the paired tiles). The same values,
 * roundings, amaxes, scales and codes as glu_fp8_kernel's backward. One launch: dh block q left
 * to a launch of the split tiles after this kernel costs more than the rest (its 32-64 blocks run
 * after the others). H8: gate and up from the blockwise copy (fastglu_glu_bwd_fp8_saved_blockwise_
 * cuda), a chunk 8 codes and its block's scale (ld_h8): chunk k's block is b[k] / 128 (chunk 0 of
 * block m lies in operand block m - 1, chunks 1 and 2 in block m; in block q + 1 chunk 0 in block
 * 0 and chunk 2 in block q). */
template <typename E, int COLWISE, int H8 = 0>
__global__ void __launch_bounds__(THREADS, COLWISE ? 2 : 3)
    glu_fp8_bwd_shift_kernel(const fp8_args a) {
    /* U: the row steps whose loads a thread issues before computing any: 2 with the column-wise
     * copy (128 registers, two blocks an SM), 1 without (80, three) */
    enum { SR = THREADS / 8, NR = COLWISE ? TILE : 2 * TILE, P = geom<E, 1>::pitch };
    enum { U = COLWISE ? 2 : 1 };
    extern __shared__ __align__(16) unsigned char smem_raw[];
    E *tile_g = (E *)smem_raw, *tile_u = tile_g + TILE * P; /* COLWISE: d_gate's, d_up's [128][P] */
    const int lane = threadIdx.x & 31, lr = lane & 7, rw = threadIdx.x >> 3;
    const int64_t m = blockIdx.y, q = a.F / TILE; /* q: the dh block of both */
    /* the lane's chunks: their first operand column (b[k]) and whether the block takes them;
     * block q + 1 takes dh block q: d_gate's columns 128 q .. F - 1 (chunk 2) and d_up's 0 .. 63
     * (chunk 0), one 1 x 128 block whose amax, scale and codes are the "gate" side's */
    const int mixed = m == q + 1;
    const int do_up = m > 0 && !mixed, do_gate = m < q; /* the two blocks' scales, uniform */
    /* 32-bit column offsets (shift_ok: F < 2^29): with 64-bit selects of them, ptxas (CUDA 13.0)
     * spills one in fp16's kernel under a predicate it has overwritten with a carry, and most
     * blocks then read their third chunk from an offset never stored */
    const int b0 = mixed ? 8 * lr : TILE * (int)m - 64 + 8 * lr, b1 = b0 + 64,
              b2 = mixed ? TILE * (int)q + 8 * lr : b0 + 128;
    const int k0 = m > 0, k1 = !mixed, k2 = m < q || mixed;
    const int64_t t0 = (int64_t)blockIdx.x * NR;
    const int nt = (int)min((int64_t)NR, a.T - t0);
    const E *gate = (const E *)a.gate, *up = (const E *)a.up, *dy = (const E *)a.dy;
    const int nsteps = (nt + SR - 1) / SR;
    /* COLWISE: where the chunks' gradients go in the shared tiles (mixed: both in d_gate's) */
    E *tu0 = mixed ? tile_g : tile_u;
    const int cg1 = 8 * lr, cg2 = (mixed ? 0 : 64) + 8 * lr, cu0 = (mixed ? 64 : 0) + 8 * lr,
              cu1 = 64 + 8 * lr;
#pragma unroll 1
    for (int s0 = 0; s0 < nsteps; s0 += U) {
        typename opnd<E, H8>::t rg[U][3], ru[U][3];
        vec8<E> rd[U][3];
#pragma unroll
        for (int qq = 0; qq < U; ++qq) {
            const int r = (s0 + qq) * SR + rw;
            if (r < nt) {
                const int64_t t = t0 + r;
                const E *d = dy + t * a.dy_rs;
                if constexpr (H8) {
                    const unsigned char *g = (const unsigned char *)a.gate + t * a.g_rs,
                                        *u = (const unsigned char *)a.up + t * a.u_rs;
                    const float *sg = a.sc + t * a.sc_rs, *su = sg + a.nbu;
                    if (k0) {
                        ld_h8(rg[qq][0], g + b0, sg[b0 >> 7]),
                            ld_h8(ru[qq][0], u + b0, su[b0 >> 7]);
                        ld8(rd[qq][0], d + b0);
                    }
                    if (k1) {
                        ld_h8(rg[qq][1], g + b1, sg[b1 >> 7]),
                            ld_h8(ru[qq][1], u + b1, su[b1 >> 7]);
                        ld8(rd[qq][1], d + b1);
                    }
                    if (k2) {
                        ld_h8(rg[qq][2], g + b2, sg[b2 >> 7]),
                            ld_h8(ru[qq][2], u + b2, su[b2 >> 7]);
                        ld8(rd[qq][2], d + b2);
                    }
                } else {
                    const E *g = gate + t * a.g_rs, *u = up + t * a.u_rs;
                    if (k0) ld8(rg[qq][0], g + b0), ld8(ru[qq][0], u + b0), ld8(rd[qq][0], d + b0);
                    if (k1) ld8(rg[qq][1], g + b1), ld8(ru[qq][1], u + b1), ld8(rd[qq][1], d + b1);
                    if (k2) ld8(rg[qq][2], g + b2), ld8(ru[qq][2], u + b2), ld8(rd[qq][2], d + b2);
                }
            }
        }
#pragma unroll
        for (int qq = 0; qq < U; ++qq) {
            if (s0 + qq >= nsteps) break; /* uniform across the block */
            const int r = (s0 + qq) * SR + rw;
            const int valid = r < nt; /* uniform across the row's lanes */
            const int64_t t = t0 + r;
            vec8<E> du0, du1, dg1, dg2;
            unsigned pg = 0, pu = 0;
            if (valid) {
                float v[8];
                if (k0) {
#pragma unroll
                    for (int e = 0; e < 8; ++e)
                        v[e] = glu_backward<MM_K, 0, 0>(a.m, vget(rg[qq][0], e), vget(ru[qq][0], e),
                                                        -0.0f, -0.0f, 1.0f, vget(rd[qq][0], e))
                                   .du;
                    if (mixed)
                        round8(du0, pg, v);
                    else
                        round8(du0, pu, v);
                }
                if (k1) {
                    float w[8];
#pragma unroll
                    for (int e = 0; e < 8; ++e) {
                        const glu_grads g1 =
                            glu_backward<MM_K, 0, 0>(a.m, vget(rg[qq][1], e), vget(ru[qq][1], e),
                                                     -0.0f, -0.0f, 1.0f, vget(rd[qq][1], e));
                        v[e] = g1.du, w[e] = g1.dg;
                    }
                    if (do_up) round8(du1, pu, v);
                    if (do_gate) round8(dg1, pg, w);
                }
                if (k2) {
#pragma unroll
                    for (int e = 0; e < 8; ++e)
                        v[e] = glu_backward<MM_K, 0, 0>(a.m, vget(rg[qq][2], e), vget(ru[qq][2], e),
                                                        -0.0f, -0.0f, 1.0f, vget(rd[qq][2], e))
                                   .dg;
                    round8(dg2, pg, v);
                }
                if (COLWISE) {
                    if (do_gate) st8_tile(tile_at<P>(tile_g, r, cg1), dg1);
                    if (k2) st8_tile(tile_at<P>(tile_g, r, cg2), dg2);
                    if (k0) st8_tile(tile_at<P>(tu0, r, cu0), du0);
                    if (do_up) st8_tile(tile_at<P>(tile_u, r, cu1), du1);
                }
                if (a.y) {
                    E *yr = (E *)a.y + t * a.y_rs;
                    if (do_gate) st8(yr + b1, dg1);
                    if (k2) st8(yr + b2, dg2);
                    if (k0) st8(yr + a.F + b0, du0);
                    if (do_up) st8(yr + a.F + b1, du1);
                }
            }
            /* the two blocks' amaxes over the row's 8 lanes, both 16-bit maxima in one word; lanes
             * 0-3 derive d_gate's scale and reciprocal (mixed: the one block's), 4-7 d_up's, each
             * lane takes the other's by a shuffle; lanes 0 and 4 store them */
            const unsigned both =
                group_max_u16x2<8>(max(pg & 0xffffu, pg >> 16) | max(pu & 0xffffu, pu >> 16) << 16);
            const unsigned ag = amax_bits(both & 0xffffu, (const E *)NULL);
            const unsigned au = amax_bits(both >> 16, (const E *)NULL);
            const int mine_up = lr >= 4;
            const float sm = fastglu_fp8_scale(mine_up ? au : ag, a.pow2);
            const float rm = rcp_rn(sm);
            if (valid && (lr & 3) == 0 && (mine_up ? do_up : do_gate || mixed))
                *scale_at(a.s, a.s_ld, a.mn_major, t, mine_up ? q + m : m - mixed) = sm;
            const float so = __shfl_xor_sync(0xffffffffu, sm, 4);
            const float ro = __shfl_xor_sync(0xffffffffu, rm, 4);
            if (!valid) continue;
            const fp8_divisor dgd = mine_up ? divisor_of(so, ro) : divisor_of(sm, rm);
            const fp8_divisor dud = mixed ? dgd : mine_up ? divisor_of(sm, rm) : divisor_of(so, ro);
            unsigned char *drow = a.d + t * a.d_rs;
            if (do_gate) *(uint2 *)(drow + b1) = quantise8(dgd, dg1);
            if (k2) *(uint2 *)(drow + b2) = quantise8(dgd, dg2);
            if (k0) *(uint2 *)(drow + a.F + b0) = quantise8(dud, du0);
            if (do_up) *(uint2 *)(drow + a.F + b1) = quantise8(dud, du1);
        }
    }
    if (!COLWISE) return;
    if (nt < TILE) /* the rows past the last token: zero for the column amaxes */
        zero_rows16<E, P>(tile_g, nt), zero_rows16<E, P>(tile_u, nt);
    __syncthreads();
    const fp8_divisor td = make_divisor(0.0f); /* (MODE_BLOCK: each column derives its own) */
    if (do_gate || mixed)
        colwise<E, MODE_BLOCK, P>::tile(a, tile_g, NULL, TILE * (m - mixed), TILE, t0, nt, td);
    if (do_up)
        colwise<E, MODE_BLOCK, P>::tile(a, tile_u, NULL, a.F + TILE * m - 64, TILE, t0, nt, td);
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

template <typename E, int MODE, int COLWISE, int BWD, int FAST, int RED, int GM, int H8>
static cudaError_t launch(const fp8_args &a, cudaStream_t s) {
    const void *kern = (const void *)glu_fp8_kernel<E, MODE, COLWISE, BWD, FAST, RED, GM, H8>;
    const size_t smem =
        (COLWISE ? geom<E, BWD>::cw_bytes : 0) + (RED_IN(MODE, BWD, FAST, RED) ? RED_BYTES : 0);
    if (smem > 48 * 1024) { /* the column-wise tiles: the opt-in, on the current device */
        const cudaError_t err =
            cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (err != cudaSuccess) return err;
    }
    const int64_t nr = BLOCK_ROWS(COLWISE, RED_IN(MODE, BWD, FAST, RED));
    const dim3 grid((unsigned)((a.T + nr - 1) / nr), (unsigned)((a.W + TILE - 1) / TILE));
    void *args[] = {(void *)&a};
    return cudaLaunchKernel(kern, grid, dim3(THREADS), args, smem, s);
}

/* RED: the backward's sums (the MODE_AMAX pass has none: its kernel is RED = 0's), then their
 * reduction */
template <typename E, int MODE, int FAST, int RED, int COLWISE, int GM, int H8>
static cudaError_t launch_pair(const fp8_args &a, cudaStream_t s) {
    const void *kern = (const void *)glu_fp8_bwd_pair_kernel<E, MODE, FAST, RED, COLWISE, GM, H8>;
    const int r = RED && !FAST && MODE != MODE_AMAX;
    const size_t smem = (COLWISE ? 2 * geom<E, 1>::tile_bytes : 0) + (r ? 2 * RED_BYTES : 0);
    if (smem > 48 * 1024) { /* the column-wise tiles: the opt-in, on the current device */
        const cudaError_t err =
            cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (err != cudaSuccess) return err;
    }
    const int64_t nr = r || COLWISE ? TILE : 2 * TILE;
    const dim3 grid((unsigned)((a.T + nr - 1) / nr), (unsigned)(a.F / TILE));
    void *args[] = {(void *)&a};
    return cudaLaunchKernel(kern, grid, dim3(THREADS), args, smem, s);
}

/* The backward's shifted pairs (glu_fp8_bwd_shift_kernel): F / 128 + 2 column blocks */
template <typename E, int COLWISE, int H8>
static cudaError_t launch_shift(const fp8_args &a, cudaStream_t s) {
    const void *kern = (const void *)glu_fp8_bwd_shift_kernel<E, COLWISE, H8>;
    const size_t smem = COLWISE ? 2 * geom<E, 1>::tile_bytes : 0;
    if (smem > 48 * 1024) { /* the column-wise tiles: the opt-in, on the current device */
        const cudaError_t err =
            cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (err != cudaSuccess) return err;
    }
    const int64_t nr = COLWISE ? TILE : 2 * TILE;
    const dim3 grid((unsigned)((a.T + nr - 1) / nr), (unsigned)(a.F / TILE + 2));
    void *args[] = {(void *)&a};
    return cudaLaunchKernel(kern, grid, dim3(THREADS), args, smem, s);
}

/* fastglu_debug_set_fp8_saved_shift: the backward from the blockwise copy (H8) where F % 128 ==
 * 64 on the shifted pairs (1, the default: the faster, bench/PERF_NOTES.md) or on the split tiles
 * (0); the tests run both */
static int saved_shift = 1;
extern "C" void fastglu_debug_set_fp8_saved_shift(int on) { saved_shift = on != 0; }

/* Where the shifted pairs apply: SPLIT with the 16-byte path, F % 128 == 64 past one tile (and
 * below 2^29: the kernel's column offsets are 32-bit); the caller checks the 2-byte dtypes, FAST,
 * 1 x 128 blocks and no sums */
static int shift_ok(const fp8_args &a) {
    return a.step == 1 && a.vec && a.F % TILE == 64 && a.F > TILE && a.F < (int64_t)1 << 29;
}

/* The backward's paired tiles where they apply (glu_fp8_bwd_pair_kernel's conditions); with the
 * column-wise copy for the 2-byte dtypes (fp32's two tiles and their codes' tiles would leave one
 * block an SM). */
static int pair_ok(const fp8_args &a, int colwise, size_t es) {
    return (!colwise || es == 2) && a.step == 1 && a.vec && a.F % TILE == 0;
}

template <typename E, int BWD, int FAST, int RED, int GM, int H8>
static cudaError_t run(const fp8_args &a, int tensor, int colwise, cudaStream_t s) {
    cudaError_t err = cudaSuccess;
    if constexpr (BWD && FAST && !RED && sizeof(E) == 2)
        if (!tensor && shift_ok(a) && (!H8 || saved_shift)) /* (2-byte dtypes) */
            return colwise ? launch_shift<E, 1, H8>(a, s) : launch_shift<E, 0, H8>(a, s);
    if (BWD && pair_ok(a, colwise, sizeof(E))) {
        enum { CW = sizeof(E) == 2 }; /* the column-wise copy's kernels exist for 2-byte dtypes */
        if (!tensor) {
            err = colwise ? launch_pair<E, MODE_BLOCK, FAST, RED, CW, GM, H8>(a, s)
                          : launch_pair<E, MODE_BLOCK, FAST, RED, 0, GM, H8>(a, s);
        } else {
            err = cudaMemsetAsync(a.amax, 0, sizeof(unsigned), s);
            if (err == cudaSuccess) err = launch_pair<E, MODE_AMAX, FAST, 0, 0, GM, H8>(a, s);
            if (err == cudaSuccess)
                err = colwise ? launch_pair<E, MODE_TENSOR, FAST, RED, CW, GM, H8>(a, s)
                              : launch_pair<E, MODE_TENSOR, FAST, RED, 0, GM, H8>(a, s);
        }
    } else if (!tensor) {
        err = colwise ? launch<E, MODE_BLOCK, 1, BWD, FAST, RED, GM, H8>(a, s)
                      : launch<E, MODE_BLOCK, 0, BWD, FAST, RED, GM, H8>(a, s);
    } else {
        err = cudaMemsetAsync(a.amax, 0, sizeof(unsigned), s);
        if (err == cudaSuccess) err = launch<E, MODE_AMAX, 0, BWD, FAST, 0, GM, H8>(a, s);
        if (err == cudaSuccess)
            err = colwise ? launch<E, MODE_TENSOR, 1, BWD, FAST, RED, GM, H8>(a, s)
                          : launch<E, MODE_TENSOR, 0, BWD, FAST, RED, GM, H8>(a, s);
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

/* the forward writing the blockwise copy (H8): 1 x 128 blocks, no sums (the host's choice) */
template <typename E, int FAST, int GM>
static cudaError_t run_copy(const fp8_args &a, int colwise, cudaStream_t s) {
    return colwise ? launch<E, MODE_BLOCK, 1, 0, FAST, 0, GM, 1>(a, s)
                   : launch<E, MODE_BLOCK, 0, 0, FAST, 0, GM, 1>(a, s);
}

template <typename E, int BWD, int H8>
static cudaError_t run_fast(const fp8_args &a, int fast, int red, int tensor, int colwise,
                            cudaStream_t s) {
    if constexpr (!BWD && H8) {
        if (fast == 1) return run_copy<E, 1, MM_K>(a, colwise, s);
        return fast == 2 ? run_copy<E, 0, MM_K>(a, colwise, s)
                         : run_copy<E, 0, MM_ANY>(a, colwise, s);
    } else {
        if (fast == 1) return run<E, BWD, 1, 0, MM_K, H8>(a, tensor, colwise, s);
        /* RED only in the backward (BWD as RED: the forward's red is 0) */
        if (fast == 2)
            return red ? run<E, BWD, 0, BWD, MM_K, H8>(a, tensor, colwise, s)
                       : run<E, BWD, 0, 0, MM_K, H8>(a, tensor, colwise, s);
        return red ? run<E, BWD, 0, BWD, MM_ANY, H8>(a, tensor, colwise, s)
                   : run<E, BWD, 0, 0, MM_ANY, H8>(a, tensor, colwise, s);
    }
}

/* h8: the backward's operands from the blockwise copy (a.sc); the forward writes it (a.cg, a.cu,
 * a.cs) */
template <int BWD>
static cudaError_t run_dtype(const fp8_args &a, fastglu_dtype dt, int fast, int red, int tensor,
                             int colwise, int h8, cudaStream_t s) {
    if (h8) {
        switch (dt) {
        case FASTGLU_DTYPE_FP32: return run_fast<float, BWD, 1>(a, fast, red, tensor, colwise, s);
        case FASTGLU_DTYPE_FP16: return run_fast<__half, BWD, 1>(a, fast, red, tensor, colwise, s);
        default: return run_fast<__nv_bfloat16, BWD, 1>(a, fast, red, tensor, colwise, s);
        }
    }
    switch (dt) {
    case FASTGLU_DTYPE_FP32: return run_fast<float, BWD, 0>(a, fast, red, tensor, colwise, s);
    case FASTGLU_DTYPE_FP16: return run_fast<__half, BWD, 0>(a, fast, red, tensor, colwise, s);
    default: return run_fast<__nv_bfloat16, BWD, 0>(a, fast, red, tensor, colwise, s);
    }
}

/* The entry points: validate, fill the kernel's arguments, launch. dy NULL: the forward.
 * scale_inv (the backward): gate and up are the blockwise copy's codes with these scales. copy
 * (the forward; NULL: none): gate_fp8, up_fp8 and scale_inv of the blockwise copy it also writes
 * (fastglu_glu_fwd_fp8_copy_blockwise_cuda). */
static fastglu_status glu_fp8(const char *fn, const fastglu_glu_params *params,
                              const fastglu_fp8_recipe *recipe, const fastglu_tensor *dy,
                              fastglu_tensor gate, fastglu_tensor up,
                              const fastglu_tensor *scale_inv, fastglu_tensor bias,
                              fastglu_tensor weights, fastglu_tensor y, const fastglu_tensor *dbias,
                              const fastglu_tensor *dweights, const fastglu_fp8_out *out,
                              int64_t tokens, int64_t F, void *stream, const fastglu_tensor *copy) {
    int empty;
    fastglu_status st =
        copy ? fastglu_check_glu_fwd_fp8_copy(fn, params, recipe, gate, up, bias, weights, y, out,
                                              copy[0], copy[1], copy[2], tokens, F, 1, &empty)
             : fastglu_check_glu_fp8(fn, params, recipe, dy, gate, up, scale_inv, bias, weights, y,
                                     dbias, dweights, out, tokens, F, 1, &empty);
    if (st != FASTGLU_SUCCESS) return st;
    const fastglu_dtype cdt = scale_inv ? dy->dtype : gate.dtype; /* the call's dtype */
    cudaStream_t s = (cudaStream_t)stream;
    void *db = dbias ? dbias->data : NULL, *dw = dweights ? dweights->data : NULL;
    if (empty) { /* the sums over nothing */
        cudaError_t err = cudaSuccess;
        if (db && F > 0) err = cudaMemsetAsync(db, 0, (size_t)(2 * F) * fastglu_dtype_size(cdt), s);
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
    const size_t es = fastglu_dtype_size(cdt), es_in = scale_inv ? 1 : es;
    fp8_args a;
    a.m = make_math(params, cdt, 0);
    a.gate = gate.data, a.g_rs = gate.row_stride;
    a.up = il ? (const void *)((const char *)gate.data + es_in) : up.data;
    a.sc = scale_inv ? (const float *)scale_inv->data : NULL;
    a.sc_rs = scale_inv ? scale_inv->row_stride : 0;
    a.nbu = il ? 0 : fastglu_fp8_blocks(F);
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
    /* (the copy's codes: 8-byte loads, rows on 8 bytes) */
    const int in_width = scale_inv ? 8 : 16;
    a.vec = !il && (!dy || F % 8 == 0) &&
            access_width_cap(gate.data, a.g_rs, tokens, es_in, in_width) == in_width &&
            access_width_cap(a.up, a.u_rs, tokens, es_in, in_width) == in_width &&
            (!dy || access_width(a.dy, a.dy_rs, tokens, es) == 16) &&
            (!dy || !a.bias || access_width(a.bias, 0, 1, es) == 16) &&
            (!a.y || access_width(a.y, a.y_rs, tokens, es) == 16) &&
            access_width_cap(a.d, a.d_rs, tokens, 1, 8) == 8;
    a.t_width = a.dt ? access_width_cap(a.dt, a.dt_rs, W, 1, 16) : 0;
    const fastglu_fp8_bwd_workspace ws =
        fastglu_fp8_bwd_workspace_layout(recipe, tokens, F, db != NULL, dw != NULL);
    a.dbias = db, a.dweights = dw;
    a.wsb = db ? (float *)((char *)out->workspace + ws.db_offset) : NULL;
    a.wsw = dw ? (float *)((char *)out->workspace + ws.dw_offset) : NULL;
    a.nwt = fastglu_fp8_dw_tiles(il, F);
    if (dw) a.w_dtype = (int)dweights->dtype;
    const int tensor = recipe->scaling == FASTGLU_FP8_SCALING_TENSOR, colwise = a.dt != NULL;
    /* 1: FAST; 2: the general kernels in math mode MM_K (plain SwiGLU or quick-GeGLU with a bias or
     * per-token weights); 0: the general kernels in MM_ANY */
    const int fast = math_mode_of(params) != MM_K ? 0 : !a.bias && !a.weights ? 1 : 2;
    const int red = db != NULL || dw != NULL;
    /* the copy in this kernel (its lanes hold whole 8-column chunks of gate and up: F % 8 == 0,
     * the 16-byte path; the codes' rows on 8 bytes), else the copy's own kernel after it */
    const int fused_copy = copy && !il && !tensor && !fastglu_clamps(params) && a.vec &&
                           F % 8 == 0 &&
                           access_width_cap(copy[0].data, copy[0].row_stride, tokens, 1, 8) == 8 &&
                           access_width_cap(copy[1].data, copy[1].row_stride, tokens, 1, 8) == 8;
    a.cg = a.cu = NULL, a.cs = NULL, a.cg_rs = a.cu_rs = 0;
    if (fused_copy) {
        a.cg = (unsigned char *)copy[0].data, a.cg_rs = copy[0].row_stride;
        a.cu = (unsigned char *)copy[1].data, a.cu_rs = copy[1].row_stride;
        a.cs = (float *)copy[2].data, a.sc_rs = copy[2].row_stride;
    }
    const int h8 = scale_inv != NULL || fused_copy;
    const cudaError_t err = dy ? run_dtype<1>(a, cdt, fast, red, tensor, colwise, h8, s)
                               : run_dtype<0>(a, cdt, fast, 0, tensor, colwise, h8, s);
    if (err != cudaSuccess || !copy || fused_copy) return launch_status(fn, err);
    return fastglu_glu_fp8_store_blockwise_cuda(params, gate, up, copy[0], copy[1], copy[2], tokens,
                                                F, stream);
}

extern "C" fastglu_status fastglu_glu_fwd_fp8_copy_blockwise_cuda(
    const fastglu_glu_params *params, const fastglu_fp8_recipe *recipe, fastglu_tensor gate,
    fastglu_tensor up, fastglu_tensor bias, fastglu_tensor weights, fastglu_tensor y,
    const fastglu_fp8_out *out, fastglu_tensor gate_fp8, fastglu_tensor up_fp8,
    fastglu_tensor scale_inv, int64_t tokens, int64_t F, void *stream) {
    const fastglu_tensor copy[3] = {gate_fp8, up_fp8, scale_inv};
    return glu_fp8("fastglu_glu_fwd_fp8_copy_blockwise_cuda", params, recipe, NULL, gate, up, NULL,
                   bias, weights, y, NULL, NULL, out, tokens, F, stream, copy);
}

extern "C" fastglu_status fastglu_glu_fwd_fp8_cuda(const fastglu_glu_params *params,
                                                   const fastglu_fp8_recipe *recipe,
                                                   fastglu_tensor gate, fastglu_tensor up,
                                                   fastglu_tensor bias, fastglu_tensor weights,
                                                   fastglu_tensor y, const fastglu_fp8_out *out,
                                                   int64_t tokens, int64_t F, void *stream) {
    return glu_fp8("fastglu_glu_fwd_fp8_cuda", params, recipe, NULL, gate, up, NULL, bias, weights,
                   y, NULL, NULL, out, tokens, F, stream, NULL);
}

extern "C" fastglu_status
fastglu_glu_bwd_fp8_cuda(const fastglu_glu_params *params, const fastglu_fp8_recipe *recipe,
                         fastglu_tensor dy, fastglu_tensor gate, fastglu_tensor up,
                         fastglu_tensor bias, fastglu_tensor weights, fastglu_tensor dh,
                         fastglu_tensor dbias, fastglu_tensor dweights, const fastglu_fp8_out *out,
                         int64_t tokens, int64_t F, void *stream) {
    return glu_fp8("fastglu_glu_bwd_fp8_cuda", params, recipe, &dy, gate, up, NULL, bias, weights,
                   dh, &dbias, &dweights, out, tokens, F, stream, NULL);
}

extern "C" fastglu_status fastglu_glu_bwd_fp8_saved_blockwise_cuda(
    const fastglu_glu_params *params, const fastglu_fp8_recipe *recipe, fastglu_tensor dy,
    fastglu_tensor gate_fp8, fastglu_tensor up_fp8, fastglu_tensor scale_inv, fastglu_tensor bias,
    fastglu_tensor weights, fastglu_tensor dh, fastglu_tensor dbias, fastglu_tensor dweights,
    const fastglu_fp8_out *out, int64_t tokens, int64_t F, void *stream) {
    return glu_fp8("fastglu_glu_bwd_fp8_saved_blockwise_cuda", params, recipe, &dy, gate_fp8,
                   up_fp8, &scale_inv, bias, weights, dh, &dbias, &dweights, out, tokens, F, stream,
                   NULL);
}
