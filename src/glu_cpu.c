/*
 * glu_cpu.c — the gated-linear-unit family (fastglu_glu_fwd_cpu / fastglu_glu_bwd_cpu) on host
 * memory: the CPU backend.
 *
 * Math: the block "The gated-linear-unit family" in include/fastglu.h (Megatron-Core
 * fused_bias_swiglu.py / fused_bias_geglu.py, Liger-Kernel's multipliers). Every operand is widened
 * to fp32 (an fp8 e4m3fn saved input is decoded exactly and multiplied by its fp32 scale_inv), all
 * arithmetic is fp32, and results are rounded to their storage type (round-to-nearest-even) only
 * when stored. The clamp bound is clamp_value rounded to the operands' dtype (fastglu_glu_clamp).
 *
 * Each row is processed in chunks of FASTGLU_TILE_COLS columns: a chunk's operands are loaded into
 * fp32 arrays on the stack, computed, and its results stored; the forward's optional fp8 copy of
 * the operands (saved_fp8) is cast from those loaded values (src/fp8.h, torch's rounding; with a
 * clamp, moved to the clamp's side of the bound first) in the same pass. In the in-place backward
 * (d_gate == gate, d_up == up) a chunk is wholly read before any of it is written, so every element
 * is read before its gradient overwrites it.
 *
 * Reductions: the CUDA kernels' fixed fp32 order (src/internal.h, src/glu_cuda.cu), so that the two
 * backends' dbias and dweights are the same sums of the same terms:
 *   dbias     per slab of FASTGLU_SLAB_ROWS rows and column, the rows as the kernels' 4 warps take
 *             them (warp w: rows w, w + 4, ... summed from +0), the slab's partial +0 + warp 0 +
 *             ... + warp 3, kept in the workspace; then the slabs' partials in the reduction's
 *             order (fastglu_reduce_partials: 8 interleaved sums, then those 8).
 *   dweights  per tile of FASTGLU_TILE_COLS columns and row, the terms m_d * act(z) * (v + o) * dy
 *             as the kernels' 32 lanes add them (tile_dweights: 8 columns a lane, then a
 *             butterfly), kept in the workspace; then the tiles' partials as dbias's slabs.
 * A row's chunk is still loaded, computed and stored once; the rows of a slab are visited in warp
 * order instead of row order.
 * No memory is allocated: the stack holds one chunk, the workspace the partials.
 */
#include <math.h>
#include <string.h>

#include "convert.h"
#include "cpu_elements.h"
#include "fp8.h"
#include "glu_math.h"
#include "internal.h"

#define CHUNK FASTGLU_TILE_COLS

/* Element loads and stores: cpu_elements.h. */

/* ---- the math ------------------------------------------------------------------------------
 *
 * src/glu_math.h, the CUDA kernels' own per-element math (glu_elem_forward, glu_elem_backward,
 * glu_fp8_operand, make_math) in its general mode (MM_ANY), compiled for the host: the same fp32
 * operations in the same order, each rounded on its own (-ffp-contract=off; fmaf where the kernels
 * fuse), and the sigmoid from exp2f and a division where the GPU takes 2^x and 1 / x from its
 * special-function unit (the division keeps a subnormal sigmoid, as the GPU's reciprocal does).
 * fastglu_swiglu_*_cpu is this code with the plain SILU parameters (src/swiglu.c); a zero offset is
 * added as -0 (make_math), as the CUDA kernels add it, so an up of -0 stays -0. */

/* ---- operand addressing -------------------------------------------------------------------- */

/* Where the chunk of columns [j0, j0 + n) of row t lives, per layout: element index of the first
 * gate and up value and the element stride between columns (SPLIT 1, INTERLEAVED 2). */
typedef struct operands {
    const void *g, *u; /* bases (INTERLEAVED: u == g) */
    int64_t g_rs, u_rs, g_off, u_off, step;
} operands;

static operands make_operands(fastglu_layout layout, const void *gate, int64_t gate_rs,
                              const void *up, int64_t up_rs) {
    operands o;
    if (layout == FASTGLU_LAYOUT_INTERLEAVED) {
        o.g = o.u = gate;
        o.g_rs = o.u_rs = gate_rs;
        o.g_off = 0, o.u_off = 1, o.step = 2;
    } else {
        o.g = gate, o.u = up;
        o.g_rs = gate_rs, o.u_rs = up_rs;
        o.g_off = o.u_off = 0, o.step = 1;
    }
    return o;
}

/* Index, in the [2F] bias (and dbias) vector, of gate column j (and up column j: + bias_up). */
static inline int64_t bias_gate_index(fastglu_layout layout, int64_t j) {
    return layout == FASTGLU_LAYOUT_INTERLEAVED ? 2 * j : j;
}

/* ---- forward ------------------------------------------------------------------------------- */

/* saved_fp8 (or NULL): the fp8 copy of the operands, [T, 2F] bytes of row stride saved_rs, in the
 * operands' layout (SPLIT: gate | up; INTERLEAVED: pairs), cast as torch's .to(float8_e4m3fn)
 * (src/fp8.h); with a clamp, each operand first moved to the bound's side the clamp puts it on
 * (fastglu_fp8_gate_operand / _up_operand). */
static void glu_fwd(const fastglu_glu_params *p, const void *gate, int64_t gate_rs, const void *up,
                    int64_t up_rs, const void *bias, const void *weights,
                    fastglu_dtype weights_dtype, int64_t weights_stride, void *output,
                    int64_t output_rs, unsigned char *saved_fp8, int64_t saved_rs, int64_t T,
                    int64_t F, fastglu_dtype dt) {
    const operands o = make_operands(p->layout, gate, gate_rs, up, up_rs);
    const int il = p->layout == FASTGLU_LAYOUT_INTERLEAVED, has_b = bias != NULL;
    const glu_math m = make_math(p, dt, saved_fp8 != NULL);
    const int64_t bstep = o.step, bup = p->layout == FASTGLU_LAYOUT_INTERLEAVED ? 1 : F;
    float g[CHUNK], u[CHUNK], bg[CHUNK], bu[CHUNK], y[CHUNK], g8[CHUNK], u8[CHUNK];
    for (int64_t t = 0; t < T; ++t) {
        const float w = weights ? load_one(weights_dtype, weights, t * weights_stride) : 1.0f;
        for (int64_t j0 = 0; j0 < F; j0 += CHUNK) {
            const int n = (int)(F - j0 < CHUNK ? F - j0 : CHUNK);
            load_f32(dt, o.g, t * o.g_rs + o.g_off + j0 * o.step, o.step, n, 1.0f, g);
            load_f32(dt, o.u, t * o.u_rs + o.u_off + j0 * o.step, o.step, n, 1.0f, u);
            if (saved_fp8) { /* the operands before bias; with a clamp, on the clamp's side */
                unsigned char *row = saved_fp8 + t * saved_rs;
                for (int k = 0; k < n; ++k) {
                    g8[k] = glu_fp8_operand(MM_ANY, &m, g[k], 0);
                    u8[k] = glu_fp8_operand(MM_ANY, &m, u[k], 1);
                }
                if (il) {
                    for (int k = 0; k < n; ++k) {
                        row[2 * (j0 + k)] = fastglu_f32_to_e4m3(g8[k], m.fp8_sat);
                        row[2 * (j0 + k) + 1] = fastglu_f32_to_e4m3(u8[k], m.fp8_sat);
                    }
                } else {
                    for (int k = 0; k < n; ++k) row[j0 + k] = fastglu_f32_to_e4m3(g8[k], m.fp8_sat);
                    for (int k = 0; k < n; ++k)
                        row[F + j0 + k] = fastglu_f32_to_e4m3(u8[k], m.fp8_sat);
                }
            }
            if (bias) {
                const int64_t b0 = bias_gate_index(p->layout, j0);
                load_f32(dt, bias, b0, bstep, n, 1.0f, bg);
                load_f32(dt, bias, b0 + bup, bstep, n, 1.0f, bu);
            }
            for (int k = 0; k < n; ++k) /* (w = 1 without weights: m_d 1 = m_d exactly) */
                y[k] = glu_elem_forward(MM_ANY, has_b, 1, &m, g[k], u[k], has_b ? bg[k] : 0.0f,
                                        has_b ? bu[k] : 0.0f, w);
            store_f32(dt, output, t * output_rs + j0, 1, n, y);
        }
    }
}

/* ---- backward ------------------------------------------------------------------------------ */

typedef struct bwd_args {
    const fastglu_glu_params *p;
    const void *dy;
    int64_t dy_rs, dy_cs;
    operands in, out; /* the operands (input_dtype) and their gradients (dtype) */
    fastglu_dtype input_dtype;
    const float *scale_inv;
    int64_t scale_stride;
    int scale_1x128; /* scale_inv per 1 x 128 block (fastglu_glu_operands.scale_1x128) */
    const void *bias, *weights;
    fastglu_dtype weights_dtype;
    int64_t weights_stride;
    void *dbias, *dweights;
    float *ws_dbias, *ws_dweights; /* [slabs][2F], [tiles][T] */
    int64_t T, F;
    fastglu_dtype dt;
} bwd_args;

/* The CUDA kernels' order of a tile's dweights terms (glu_cuda.cu, tile_dweights): lane l of 32
 * adds columns 8 l .. 8 l + 7 of the tile from +0, then the lanes are added by the butterfly
 * (xor 16, 8, 4, 2, 1; lane 0's value). n <= CHUNK terms; the missing ones are no terms. */
static float tile_dweights(const float *dw, int n) {
    float v[32];
    for (int l = 0; l < 32; ++l) {
        v[l] = 0.0f;
        for (int k = 8 * l; k < 8 * l + 8 && k < n; ++k) v[l] += dw[k];
    }
    for (int o = 16; o > 0; o >>= 1) {
        float nv[32];
        for (int l = 0; l < 32; ++l) nv[l] = v[l] + v[l ^ o];
        memcpy(v, nv, sizeof v);
    }
    return v[0];
}

static void glu_bwd(const bwd_args *A) {
    const fastglu_glu_params *p = A->p;
    const int64_t T = A->T, F = A->F;
    const int has_b = A->bias != NULL;
    const glu_math m = make_math(p, A->dt, 0);
    const int64_t step = A->in.step, bup = p->layout == FASTGLU_LAYOUT_INTERLEAVED ? 1 : F;
    const int64_t tiles = (F + CHUNK - 1) / CHUNK;
    float g[CHUNK], u[CHUNK], d[CHUNK], bg[CHUNK], bu[CHUNK], dg[CHUNK], du[CHUNK];
    float sg[CHUNK], su[CHUNK], ag[CHUNK], au[CHUNK], dw[CHUNK];

    for (int64_t t0 = 0; t0 < T; t0 += FASTGLU_SLAB_ROWS) {
        float *slab = A->ws_dbias ? A->ws_dbias + (t0 / FASTGLU_SLAB_ROWS) * 2 * F : NULL;
        const int64_t t1 = t0 + FASTGLU_SLAB_ROWS < T ? t0 + FASTGLU_SLAB_ROWS : T;
        for (int64_t j0 = 0, tile = 0; j0 < F; j0 += CHUNK, ++tile) {
            const int n = (int)(F - j0 < CHUNK ? F - j0 : CHUNK);
            const int64_t b0 = bias_gate_index(p->layout, j0);
            if (A->bias) {
                load_f32(A->dt, A->bias, b0, step, n, 1.0f, bg);
                load_f32(A->dt, A->bias, b0 + bup, step, n, 1.0f, bu);
            }
            for (int k = 0; k < n; ++k) sg[k] = su[k] = 0.0f;
            /* the slab's rows as the kernels' 4 warps take them: warp w rows t0 + w, t0 + w + 4,
             * ..., each warp's sums from +0, the slab's partial +0 + warp 0 + ... + warp 3 */
            for (int wp = 0; wp < 4; ++wp) {
                for (int k = 0; k < n; ++k) ag[k] = au[k] = 0.0f;
                for (int64_t t = t0 + wp; t < t1; t += 4) {
                    const float w =
                        A->weights ? load_one(A->weights_dtype, A->weights, t * A->weights_stride)
                                   : 1.0f;
                    const float *srow = A->scale_inv ? A->scale_inv + t * A->scale_stride : NULL;
                    /* one scale for the row (fp8 * it in load_f32), or 1 there and the block's
                     * after: the same one fp32 multiply per element */
                    const float sinv = srow && !A->scale_1x128 ? srow[0] : 1.0f;
                    load_f32(A->input_dtype, A->in.g, t * A->in.g_rs + A->in.g_off + j0 * step,
                             step, n, sinv, g);
                    load_f32(A->input_dtype, A->in.u, t * A->in.u_rs + A->in.u_off + j0 * step,
                             step, n, sinv, u);
                    if (srow && A->scale_1x128)
                        for (int k = 0; k < n; ++k) {
                            g[k] *= srow[glu_scale_block(step == 2, F, j0 + k, 0)];
                            u[k] *= srow[glu_scale_block(step == 2, F, j0 + k, 1)];
                        }
                    load_f32(A->dt, A->dy, t * A->dy_rs + j0 * A->dy_cs, A->dy_cs, n, 1.0f, d);
                    for (int k = 0; k < n; ++k) {
                        const glu_grads q =
                            glu_elem_backward(MM_ANY, has_b, 1, &m, g[k], u[k],
                                              has_b ? bg[k] : 0.0f, has_b ? bu[k] : 0.0f, w, d[k]);
                        dg[k] = q.dg, du[k] = q.du, dw[k] = q.dw;
                        ag[k] += q.dbg, au[k] += q.dbu;
                    }
                    store_f32(A->dt, (void *)A->out.g, t * A->out.g_rs + A->out.g_off + j0 * step,
                              step, n, dg);
                    store_f32(A->dt, (void *)A->out.u, t * A->out.u_rs + A->out.u_off + j0 * step,
                              step, n, du);
                    if (A->ws_dweights) A->ws_dweights[tile * T + t] = tile_dweights(dw, n);
                }
                for (int k = 0; k < n; ++k) sg[k] += ag[k], su[k] += au[k];
            }
            if (slab)
                for (int k = 0; k < n; ++k) {
                    slab[b0 + k * step] = sg[k];
                    slab[b0 + bup + k * step] = su[k];
                }
        }
    }

    if (A->ws_dbias) { /* per column, the slabs' partials in the reduction's order */
        const int64_t slabs = (T + FASTGLU_SLAB_ROWS - 1) / FASTGLU_SLAB_ROWS;
        for (int64_t c0 = 0; c0 < 2 * F; c0 += CHUNK) {
            const int n = (int)(2 * F - c0 < CHUNK ? 2 * F - c0 : CHUNK);
            for (int k = 0; k < n; ++k)
                dg[k] = fastglu_reduce_partials(A->ws_dbias + c0 + k, slabs, 2 * F);
            store_f32(A->dt, A->dbias, c0, 1, n, dg);
        }
    }
    if (A->ws_dweights) { /* per token, the tiles' partials likewise */
        for (int64_t t0 = 0; t0 < T; t0 += CHUNK) {
            const int n = (int)(T - t0 < CHUNK ? T - t0 : CHUNK);
            for (int k = 0; k < n; ++k)
                dg[k] = fastglu_reduce_partials(A->ws_dweights + t0 + k, tiles, T);
            store_f32(A->weights_dtype, A->dweights, t0, 1, n, dg);
        }
    }
}

/* ---- public entry points ------------------------------------------------------------------ */

static fastglu_status fwd_entry(const fastglu_glu_params *params, const void *gate,
                                int64_t gate_row_stride, const void *up, int64_t up_row_stride,
                                const void *bias, const void *weights, fastglu_dtype weights_dtype,
                                int64_t weights_stride, void *output, int64_t output_row_stride,
                                void *saved_fp8, int64_t saved_fp8_row_stride, int64_t tokens,
                                int64_t ffn_hidden_size, fastglu_dtype dtype) {
    int empty;
    fastglu_status st = fastglu_check_glu_fwd(
        "fastglu_glu_fwd_cpu", params, gate, gate_row_stride, up, up_row_stride, bias, weights,
        weights_dtype, weights_stride, output, output_row_stride, saved_fp8, saved_fp8_row_stride,
        tokens, ffn_hidden_size, dtype, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    glu_fwd(params, gate, gate_row_stride, up, up_row_stride, bias, weights, weights_dtype,
            weights_stride, output, output_row_stride, (unsigned char *)saved_fp8,
            saved_fp8_row_stride, tokens, ffn_hidden_size, dtype);
    return FASTGLU_SUCCESS;
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
                                int64_t ffn_hidden_size, fastglu_dtype dtype) {
    int empty;
    fastglu_status st = fastglu_check_glu_bwd(
        "fastglu_glu_bwd_cpu", params, dy, dy_row_stride, dy_col_stride, gate, gate_row_stride, up,
        up_row_stride, input_dtype, input_scale_inv, input_scale_stride, input_scale_1x128, bias,
        weights, weights_dtype, weights_stride, d_gate, d_gate_row_stride, d_up, d_up_row_stride,
        dbias, dweights, workspace, workspace_bytes, tokens, ffn_hidden_size, dtype, &empty);
    if (st != FASTGLU_SUCCESS) return st;
    const int want_db = dbias != NULL && ffn_hidden_size > 0;
    const int want_dw = dweights != NULL && tokens > 0;
    if (empty) { /* the sum over no tokens (or no columns) is zero; +0 is all-zero bits */
        if (want_db) memset(dbias, 0, (size_t)(2 * ffn_hidden_size) * fastglu_dtype_size(dtype));
        if (want_dw) memset(dweights, 0, (size_t)tokens * fastglu_dtype_size(weights_dtype));
        return FASTGLU_SUCCESS;
    }
    const fastglu_glu_workspace_layout ws =
        fastglu_glu_workspace(tokens, ffn_hidden_size, want_db, want_dw);
    bwd_args A;
    A.p = params;
    A.dy = dy, A.dy_rs = dy_row_stride, A.dy_cs = dy_col_stride;
    A.in = make_operands(params->layout, gate, gate_row_stride, up, up_row_stride);
    A.out = make_operands(params->layout, d_gate, d_gate_row_stride, d_up, d_up_row_stride);
    A.input_dtype = input_dtype;
    A.scale_inv = input_scale_inv, A.scale_stride = input_scale_stride;
    A.scale_1x128 = input_scale_1x128;
    A.bias = bias, A.weights = weights;
    A.weights_dtype = weights_dtype, A.weights_stride = weights_stride;
    A.dbias = dbias, A.dweights = dweights;
    A.ws_dbias = want_db ? (float *)((char *)workspace + ws.dbias_offset) : NULL;
    A.ws_dweights = want_dw ? (float *)((char *)workspace + ws.dweights_offset) : NULL;
    A.T = tokens, A.F = ffn_hidden_size;
    A.dt = dtype;
    glu_bwd(&A);
    return FASTGLU_SUCCESS;
}

fastglu_status fastglu_glu_fwd_cpu(FASTGLU_GLU_FWD_ARGS) {
    const fastglu_status st =
        fastglu_check_glu_fwd_descriptors("fastglu_glu_fwd_cpu", operands, &output, &saved_fp8);
    if (st != FASTGLU_SUCCESS) return st;
    return fwd_entry(params,
                     FASTGLU_GLU_FWD_FIELDS(operands, output, saved_fp8, tokens, ffn_hidden_size));
}

fastglu_status fastglu_glu_bwd_cpu(FASTGLU_GLU_BWD_ARGS) {
    const fastglu_status st =
        fastglu_check_glu_bwd_descriptors("fastglu_glu_bwd_cpu", &dy, operands, grads);
    if (st != FASTGLU_SUCCESS) return st;
    return bwd_entry(params, FASTGLU_GLU_BWD_FIELDS(dy, dy_col_stride, operands, grads, workspace,
                                                    tokens, ffn_hidden_size));
}
