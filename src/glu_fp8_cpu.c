/*
 * glu_fp8_cpu.c — fastglu_glu_fwd_fp8_cpu: the family's forward quantised to float8_e4m3fn with
 * the recipe of include/fastglu.h ("The activation quantised to FP8"), on host memory.
 *
 * The problem is cut into tiles of 128 tokens x 128 columns, one row-wise block wide and one
 * column-wise block tall: a tile's y is computed once into an fp32 array on the stack (already
 * rounded to dtype: the value fastglu_glu_fwd_cpu stores), then each row's block and each column's
 * block is quantised from it. FASTGLU_FP8_SCALING_TENSOR takes two passes over the tiles: the
 * amax, then the quantisation with the one scale. No memory is allocated.
 *
 * The per-element math is glu_math.h's, as glu_cpu.c's forward and backward (fp32,
 * -ffp-contract=off): the test compares the quantised outputs with the quantisation of
 * fastglu_glu_fwd_cpu's y (fastglu_glu_bwd_cpu's d_gate / d_up), scales bit for bit.
 * fastglu_glu_bwd_fp8_cpu: the same tiles over dh [T, 2F] (h's layout), each element's gradient
 * from its gate, up and dy. With dbias / dweights, each tile's partial sums go to the workspace in
 * the CUDA kernel's order (tile_dh below; glu_fp8_cuda.cu describes the threads it follows), and
 * the partials are added over the tiles in its reduction's order (fastglu_reduce_partials), so
 * that the two backends' sums agree bit for bit where their elements do.
 */
#include <math.h>
#include <string.h>

#include "convert.h"
#include "cpu_elements.h"
#include "fp8_recipe.h"
#include "glu_fp8.h"
#include "glu_math.h"

#define TILE FASTGLU_FP8_BLOCK

/* The value quantised: x rounded to dtype (and widened back). */
static void round_row(fastglu_dtype dt, float *x, int n) {
    if (dt == FASTGLU_DTYPE_BF16)
        for (int k = 0; k < n; ++k) x[k] = bf16_to_f32(f32_to_bf16(x[k]));
    else if (dt == FASTGLU_DTYPE_FP16)
        for (int k = 0; k < n; ++k) x[k] = fp16_to_f32(f32_to_fp16(x[k]));
}

typedef struct fwd_args {
    const fastglu_glu_params *p;
    const fastglu_fp8_recipe *r;
    const fastglu_tensor *dy; /* NULL: the forward; else the backward (y is then dh) */
    fastglu_tensor gate, up, bias, weights, y, dbias, dweights;
    float *wsb, *wsw; /* the backward's dbias / dweights partials (workspace), NULL: not asked */
    const float *sc;  /* the blockwise copy's scales (the operands its codes), NULL: dtype's */
    int64_t sc_rs;
    const fastglu_fp8_out *out;
    int64_t T, F, W; /* W: the quantised operand's width, F (y) or 2F (dh) */
    fastglu_dtype dt;
} fwd_args;

/* The sum of 16 lanes' values in the order of the CUDA kernel's half-warp butterfly (xor 8, 4, 2,
 * 1: each step adds a lane's value and its partner's, the same sum in both lanes). */
static float butterfly16(const float *lanes) {
    float v[16], nv[16];
    memcpy(v, lanes, sizeof v);
    for (int o = 8; o; o >>= 1) {
        for (int l = 0; l < 16; ++l) nv[l] = v[l] + v[l ^ o];
        memcpy(v, nv, sizeof v);
    }
    return v[0];
}

/* Operand element idx of row t (column j of gate, or of up: is_up) in the call's dtype, or decoded
 * from the blockwise copy: code * scale_inv of its block (fp32, as glu_cpu.c decodes it). */
static float operand(const fwd_args *A, const void *base, int64_t idx, int64_t t, int64_t j,
                     int is_up) {
    if (A->sc == NULL) return load_one(A->dt, base, idx);
    const float s = A->sc[t * A->sc_rs + glu_scale_block(A->p->layout == FASTGLU_LAYOUT_INTERLEAVED,
                                                         A->F, j, is_up)];
    return fastglu_e4m3_to_f32(((const unsigned char *)base)[idx]) * s;
}

/* dh of tile rows [t0, t0 + nt), dh columns [c0, c0 + nc) into tile[i][k] (glu_cpu.c's backward
 * operation for operation), stored in dtype when asked, then rounded to dtype. reduce: the tile's
 * dbias / dweights partials into the workspace, in the order of glu_fp8_cuda.cu's threads: the
 * tile's thread rho (0..15) takes rows rho, rho + 16, ..., lane l of it columns 8 l .. 8 l + 7;
 *   dbias: per column, thread rho's rows summed in order from +0 (pb[rho]); threads 2w and 2w + 1
 *          added (a shuffle), then w = 0 .. 7 in order from w = 0;
 *   dweights (tiles with d_gate columns): per row, each lane's d_gate columns in order from +0,
 *          the 16 lanes as butterfly16. */
static void tile_dh(const fwd_args *A, int64_t t0, int nt, int64_t c0, int nc, int store,
                    int reduce, float tile[TILE][TILE]) {
    const fastglu_glu_params *p = A->p;
    const int il = p->layout == FASTGLU_LAYOUT_INTERLEAVED, has_b = A->bias.data != NULL,
              has_w = A->weights.data != NULL;
    const int64_t F = A->F, step = il ? 2 : 1, uoff = il ? 1 : 0, bup = il ? 1 : F;
    const void *ub = il ? A->gate.data : A->up.data;
    const int64_t urs = il ? A->gate.row_stride : A->up.row_stride;
    const glu_math m = make_math(p, A->dt, 0);
    const int rb = reduce && A->wsb != NULL, rw = reduce && A->wsw != NULL && (il || c0 < F);
    float pb[16][TILE]; /* dbias: the 16 threads' column sums */
    if (rb)
        for (int r = 0; r < 16; ++r)
            for (int k = 0; k < nc; ++k) pb[r][k] = 0.0f;
    for (int i = 0; i < nt; ++i) {
        const int64_t t = t0 + i;
        const float w =
            has_w ? load_one(A->weights.dtype, A->weights.data, t * A->weights.row_stride) : 1.0f;
        float lane_dw[16] = {0.0f}; /* dweights: the 16 lanes' sums over their d_gate columns */
        for (int k = 0; k < nc; ++k) {
            const int64_t col = c0 + k;
            const int is_up = il ? (int)(col & 1) : col >= F;
            const int64_t j = il ? col >> 1 : (is_up ? col - F : col);
            const float g = operand(A, A->gate.data, t * A->gate.row_stride + j * step, t, j, 0);
            const float u = operand(A, ub, t * urs + uoff + j * step, t, j, 1);
            const float d = load_one(A->dt, A->dy->data, t * A->dy->row_stride + j);
            const float bg = has_b ? load_one(A->dt, A->bias.data, j * step) : 0.0f;
            const float bu = has_b ? load_one(A->dt, A->bias.data, j * step + bup) : 0.0f;
            const glu_grads r = glu_elem_backward(MM_ANY, has_b, has_w, &m, g, u, bg, bu, w, d);
            tile[i][k] = is_up ? r.du : r.dg;
            if (rb) pb[i % 16][k] += is_up ? r.dbu : r.dbg;
            if (rw && !is_up) lane_dw[k / 8] += r.dw;
        }
        if (rw) A->wsw[(c0 / TILE) * A->T + t] = butterfly16(lane_dw);
        if (store) store_f32(A->dt, A->y.data, t * A->y.row_stride + c0, 1, nc, tile[i]);
        round_row(A->dt, tile[i], nc);
    }
    if (rb)
        for (int k = 0; k < nc; ++k) {
            float s = pb[0][k] + pb[1][k];
            for (int wp = 1; wp < 8; ++wp) s += pb[2 * wp][k] + pb[2 * wp + 1][k];
            A->wsb[(t0 / TILE) * A->W + c0 + k] = s;
        }
}

/* dbias and dweights from the tiles' partials, in the CUDA reduction's order. */
static void reduce_sums(const fwd_args *A) {
    float v[TILE];
    if (A->wsb) {
        const int64_t n = fastglu_fp8_blocks(A->T);
        for (int64_t c0 = 0; c0 < A->W; c0 += TILE) {
            const int nc = (int)(A->W - c0 < TILE ? A->W - c0 : TILE);
            for (int k = 0; k < nc; ++k) v[k] = fastglu_reduce_partials(A->wsb + c0 + k, n, A->W);
            store_f32(A->dt, A->dbias.data, c0, 1, nc, v);
        }
    }
    if (A->wsw) {
        const int64_t n = fastglu_fp8_dw_tiles(A->p->layout == FASTGLU_LAYOUT_INTERLEAVED, A->F);
        for (int64_t t0 = 0; t0 < A->T; t0 += TILE) {
            const int nt = (int)(A->T - t0 < TILE ? A->T - t0 : TILE);
            for (int i = 0; i < nt; ++i) v[i] = fastglu_reduce_partials(A->wsw + t0 + i, n, A->T);
            store_f32(A->dweights.dtype, A->dweights.data, t0, 1, nt, v);
        }
    }
}

/* y of tile rows [t0, t0 + nt), columns [j0, j0 + nj) into tile[i][k], rounded to dtype; y itself
 * stored when asked (store: 1). */
static void tile_y(const fwd_args *A, int64_t t0, int nt, int64_t j0, int nj, int store,
                   float tile[TILE][TILE]) {
    const fastglu_glu_params *p = A->p;
    const int il = p->layout == FASTGLU_LAYOUT_INTERLEAVED, has_b = A->bias.data != NULL,
              has_w = A->weights.data != NULL;
    const int64_t step = il ? 2 : 1, uoff = il ? 1 : 0, bup = il ? 1 : A->F;
    const void *ub = il ? A->gate.data : A->up.data;
    const int64_t urs = il ? A->gate.row_stride : A->up.row_stride;
    const glu_math m = make_math(p, A->dt, 0);
    float g[TILE], u[TILE], bg[TILE], bu[TILE];
    if (has_b) {
        load_f32(A->dt, A->bias.data, j0 * step, step, nj, 1.0f, bg);
        load_f32(A->dt, A->bias.data, j0 * step + bup, step, nj, 1.0f, bu);
    }
    for (int i = 0; i < nt; ++i) {
        const int64_t t = t0 + i;
        const float w =
            has_w ? load_one(A->weights.dtype, A->weights.data, t * A->weights.row_stride) : 1.0f;
        load_f32(A->dt, A->gate.data, t * A->gate.row_stride + j0 * step, step, nj, 1.0f, g);
        load_f32(A->dt, ub, t * urs + uoff + j0 * step, step, nj, 1.0f, u);
        for (int k = 0; k < nj; ++k)
            tile[i][k] = glu_elem_forward(MM_ANY, has_b, has_w, &m, g[k], u[k],
                                          has_b ? bg[k] : 0.0f, has_b ? bu[k] : 0.0f, w);
        if (store) store_f32(A->dt, A->y.data, t * A->y.row_stride + j0, 1, nj, tile[i]);
        round_row(A->dt, tile[i], nj);
    }
}

/* Address of scale(i, b) in a scale tensor of the recipe's layout. */
static float *scale_at(const fwd_args *A, fastglu_tensor s, int64_t i, int64_t b) {
    float *base = (float *)s.data;
    if (A->r->scaling == FASTGLU_FP8_SCALING_TENSOR) return base;
    return A->r->scale_layout == FASTGLU_FP8_SCALES_MN_MAJOR ? base + b * s.row_stride + i
                                                             : base + i * s.row_stride + b;
}

static uint32_t max_bits(uint32_t a, uint32_t b) { return a > b ? a : b; }

/* Quantises one tile: row-wise (and column-wise) blocks with their own scales, or every element
 * with the per-tensor scale ts (tensor: 1). */
static void tile_quantise(const fwd_args *A, int64_t t0, int nt, int64_t j0, int nj, int tensor,
                          float ts, float tile[TILE][TILE]) {
    const fastglu_fp8_out *o = A->out;
    const int pow2 = A->r->pow2_scales;
    for (int i = 0; i < nt; ++i) {
        uint32_t amax = 0;
        for (int k = 0; k < nj; ++k) amax = max_bits(amax, fastglu_abs_bits(tile[i][k]));
        const float s = tensor ? ts : fastglu_fp8_scale(amax, pow2);
        unsigned char *d = (unsigned char *)o->data.data + (t0 + i) * o->data.row_stride + j0;
        for (int k = 0; k < nj; ++k) d[k] = fastglu_fp8_quantise(tile[i][k], s);
        if (!tensor) *scale_at(A, o->scale, t0 + i, j0 / TILE) = s;
    }
    if (o->data_t.data == NULL) return;
    for (int k = 0; k < nj; ++k) {
        uint32_t amax = 0;
        for (int i = 0; i < nt; ++i) amax = max_bits(amax, fastglu_abs_bits(tile[i][k]));
        const float s = tensor ? ts : fastglu_fp8_scale(amax, pow2);
        unsigned char *d = (unsigned char *)o->data_t.data + (j0 + k) * o->data_t.row_stride + t0;
        for (int i = 0; i < nt; ++i) d[i] = fastglu_fp8_quantise(tile[i][k], s);
        if (!tensor) *scale_at(A, o->scale_t, j0 + k, t0 / TILE) = s;
    }
}

/* The tiles of the quantised operand ([T, W]): y or dh per tile, then its blocks. */
static void run(const fwd_args *A) {
    const int64_t T = A->T, W = A->W;
    float tile[TILE][TILE]; /* 64 KiB of stack */
    const int tensor = A->r->scaling == FASTGLU_FP8_SCALING_TENSOR, want = A->y.data != NULL;
    float ts = 0.0f;
    if (tensor) { /* pass 1: the amax of the tensor (and y / dh) */
        uint32_t amax = 0;
        for (int64_t t0 = 0; t0 < T; t0 += TILE)
            for (int64_t j0 = 0; j0 < W; j0 += TILE) {
                const int nt = (int)(T - t0 < TILE ? T - t0 : TILE);
                const int nj = (int)(W - j0 < TILE ? W - j0 : TILE);
                if (A->dy)
                    tile_dh(A, t0, nt, j0, nj, want, 0, tile);
                else
                    tile_y(A, t0, nt, j0, nj, want, tile);
                for (int i = 0; i < nt; ++i)
                    for (int k = 0; k < nj; ++k)
                        amax = max_bits(amax, fastglu_abs_bits(tile[i][k]));
            }
        ts = fastglu_fp8_scale(amax, A->r->pow2_scales);
    }
    for (int64_t t0 = 0; t0 < T; t0 += TILE)
        for (int64_t j0 = 0; j0 < W; j0 += TILE) {
            const int nt = (int)(T - t0 < TILE ? T - t0 : TILE);
            const int nj = (int)(W - j0 < TILE ? W - j0 : TILE);
            if (A->dy)
                tile_dh(A, t0, nt, j0, nj, !tensor && want, 1, tile);
            else
                tile_y(A, t0, nt, j0, nj, !tensor && want, tile);
            tile_quantise(A, t0, nt, j0, nj, tensor, ts, tile);
        }
    if (tensor) *(float *)A->out->scale.data = ts;
    if (A->dy) reduce_sums(A);
}

static fwd_args make_args(const fastglu_glu_params *params, const fastglu_fp8_recipe *recipe,
                          const fastglu_tensor *dy, fastglu_tensor gate, fastglu_tensor up,
                          const fastglu_tensor *scale_inv, fastglu_tensor bias,
                          fastglu_tensor weights, fastglu_tensor y, const fastglu_tensor *dbias,
                          const fastglu_tensor *dweights, const fastglu_fp8_out *out,
                          int64_t tokens, int64_t F) {
    fwd_args A;
    A.p = params, A.r = recipe, A.dy = dy, A.gate = gate, A.up = up, A.bias = bias;
    A.weights = weights, A.y = y, A.out = out, A.T = tokens, A.F = F, A.W = dy ? 2 * F : F;
    A.dt = scale_inv ? dy->dtype : gate.dtype;
    A.sc = scale_inv ? (const float *)scale_inv->data : NULL;
    A.sc_rs = scale_inv ? scale_inv->row_stride : 0;
    const fastglu_tensor none = {NULL, FASTGLU_DTYPE_FP32, 0};
    A.dbias = dbias ? *dbias : none, A.dweights = dweights ? *dweights : none;
    const fastglu_fp8_bwd_workspace ws = fastglu_fp8_bwd_workspace_layout(
        recipe, tokens, F, A.dbias.data != NULL, A.dweights.data != NULL);
    A.wsb = A.dbias.data ? (float *)((char *)out->workspace + ws.db_offset) : NULL;
    A.wsw = A.dweights.data ? (float *)((char *)out->workspace + ws.dw_offset) : NULL;
    return A;
}

fastglu_status fastglu_glu_fwd_fp8_cpu(const fastglu_glu_params *params,
                                       const fastglu_fp8_recipe *recipe, fastglu_tensor gate,
                                       fastglu_tensor up, fastglu_tensor bias,
                                       fastglu_tensor weights, fastglu_tensor y,
                                       const fastglu_fp8_out *out, int64_t tokens, int64_t F) {
    int empty;
    fastglu_status st =
        fastglu_check_glu_fp8("fastglu_glu_fwd_fp8_cpu", params, recipe, NULL, gate, up, NULL, bias,
                              weights, y, NULL, NULL, out, tokens, F, 0, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    const fwd_args A = make_args(params, recipe, NULL, gate, up, NULL, bias, weights, y, NULL, NULL,
                                 out, tokens, F);
    run(&A);
    return FASTGLU_SUCCESS;
}

/* fastglu_glu_bwd_fp8_cpu, and with scale_inv the copy's backward */
static fastglu_status
bwd_fp8(const char *fn, const fastglu_glu_params *params, const fastglu_fp8_recipe *recipe,
        fastglu_tensor dy, fastglu_tensor gate, fastglu_tensor up, const fastglu_tensor *scale_inv,
        fastglu_tensor bias, fastglu_tensor weights, fastglu_tensor dh, fastglu_tensor dbias,
        fastglu_tensor dweights, const fastglu_fp8_out *out, int64_t tokens, int64_t F) {
    int empty;
    fastglu_status st =
        fastglu_check_glu_fp8(fn, params, recipe, &dy, gate, up, scale_inv, bias, weights, dh,
                              &dbias, &dweights, out, tokens, F, 0, &empty);
    if (st != FASTGLU_SUCCESS) return st;
    if (empty) {
        fastglu_fp8_zero_sums(dy, dbias, dweights, tokens, F);
        return FASTGLU_SUCCESS;
    }
    const fwd_args A = make_args(params, recipe, &dy, gate, up, scale_inv, bias, weights, dh,
                                 &dbias, &dweights, out, tokens, F);
    run(&A);
    return FASTGLU_SUCCESS;
}

fastglu_status fastglu_glu_bwd_fp8_cpu(const fastglu_glu_params *params,
                                       const fastglu_fp8_recipe *recipe, fastglu_tensor dy,
                                       fastglu_tensor gate, fastglu_tensor up, fastglu_tensor bias,
                                       fastglu_tensor weights, fastglu_tensor dh,
                                       fastglu_tensor dbias, fastglu_tensor dweights,
                                       const fastglu_fp8_out *out, int64_t tokens, int64_t F) {
    return bwd_fp8("fastglu_glu_bwd_fp8_cpu", params, recipe, dy, gate, up, NULL, bias, weights, dh,
                   dbias, dweights, out, tokens, F);
}

fastglu_status fastglu_glu_bwd_fp8_saved_blockwise_cpu(
    const fastglu_glu_params *params, const fastglu_fp8_recipe *recipe, fastglu_tensor dy,
    fastglu_tensor gate_fp8, fastglu_tensor up_fp8, fastglu_tensor scale_inv, fastglu_tensor bias,
    fastglu_tensor weights, fastglu_tensor dh, fastglu_tensor dbias, fastglu_tensor dweights,
    const fastglu_fp8_out *out, int64_t tokens, int64_t F) {
    return bwd_fp8("fastglu_glu_bwd_fp8_saved_blockwise_cpu", params, recipe, dy, gate_fp8, up_fp8,
                   &scale_inv, bias, weights, dh, dbias, dweights, out, tokens, F);
}
