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
 * The per-element math is glu_cpu.c's forward operation for operation (fp32, -ffp-contract=off):
 * the test compares the quantised output with the quantisation of fastglu_glu_fwd_cpu's y, scales
 * bit for bit.
 */
#include <math.h>
#include <string.h>

#include "convert.h"
#include "cpu_elements.h"
#include "fp8_recipe.h"
#include "glu_fp8.h"

#define TILE FASTGLU_FP8_BLOCK
#define LOG2E 1.44269504f
#define GELU_K (2.0f * 0.79788456f)

/* glu_cpu.c's activation: z * sigmoid(q(z)), sigmoid(q) = 1 / (1 + 2^(-log2(e) q)). */
static inline float act_fwd(fastglu_activation act, float z) {
    const int gelu = act == FASTGLU_ACT_GELU_TANH;
    const float k = gelu ? GELU_K : act == FASTGLU_ACT_QUICK_GELU ? 1.702f : 1.0f;
    const float kl = -k * LOG2E;
    const float z2 = z * z;
    const float ql = gelu ? (kl * z) * fmaf(0.044715f, z2, 1.0f) : kl * z;
    return z * (1.0f / (1.0f + exp2f(ql)));
}

typedef struct fwd_args {
    const fastglu_glu_params *p;
    const fastglu_fp8_recipe *r;
    fastglu_tensor gate, up, bias, weights, y;
    const fastglu_fp8_out *out;
    int64_t T, F;
    fastglu_dtype dt;
} fwd_args;

/* y of tile rows [t0, t0 + nt), columns [j0, j0 + nj) into tile[i][k], rounded to dtype; y itself
 * stored when asked (store: 1). */
static void tile_y(const fwd_args *A, int64_t t0, int nt, int64_t j0, int nj, int store,
                   float tile[TILE][TILE]) {
    const fastglu_glu_params *p = A->p;
    const int il = p->layout == FASTGLU_LAYOUT_INTERLEAVED, clamp = fastglu_clamps(p);
    const int64_t step = il ? 2 : 1, uoff = il ? 1 : 0, bup = il ? 1 : A->F;
    const void *ub = il ? A->gate.data : A->up.data;
    const int64_t urs = il ? A->gate.row_stride : A->up.row_stride;
    const float c = fastglu_glu_clamp(p, A->dt), mg = p->gate_multiplier;
    const float off = p->glu_linear_offset == 0.0f ? -0.0f : p->glu_linear_offset;
    float g[TILE], u[TILE], bg[TILE], bu[TILE];
    if (A->bias.data) {
        load_f32(A->dt, A->bias.data, j0 * step, step, nj, 1.0f, bg);
        load_f32(A->dt, A->bias.data, j0 * step + bup, step, nj, 1.0f, bu);
    }
    for (int i = 0; i < nt; ++i) {
        const int64_t t = t0 + i;
        const float w = A->weights.data
                            ? load_one(A->weights.dtype, A->weights.data, t * A->weights.row_stride)
                            : 1.0f;
        const float scale = p->down_multiplier * w;
        load_f32(A->dt, A->gate.data, t * A->gate.row_stride + j0 * step, step, nj, 1.0f, g);
        load_f32(A->dt, ub, t * urs + uoff + j0 * step, step, nj, 1.0f, u);
        for (int k = 0; k < nj; ++k) {
            float a = g[k], v = u[k];
            if (clamp) {
                a = a > c ? c : a;
                v = v > c ? c : (v < -c ? -c : v);
            }
            if (A->bias.data) a += bg[k], v += bu[k];
            tile[i][k] = scale * act_fwd(p->activation, mg * a) * (v + off);
        }
        if (store) store_f32(A->dt, A->y.data, t * A->y.row_stride + j0, 1, nj, tile[i]);
        /* the value quantised: y rounded to dtype */
        if (A->dt != FASTGLU_DTYPE_FP32) {
            uint16_t h[TILE];
            for (int k = 0; k < nj; ++k)
                h[k] = A->dt == FASTGLU_DTYPE_BF16 ? f32_to_bf16(tile[i][k]) : f32_to_fp16(tile[i][k]);
            for (int k = 0; k < nj; ++k)
                tile[i][k] = A->dt == FASTGLU_DTYPE_BF16 ? bf16_to_f32(h[k]) : fp16_to_f32(h[k]);
        }
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

fastglu_status fastglu_glu_fwd_fp8_cpu(const fastglu_glu_params *params,
                                       const fastglu_fp8_recipe *recipe, fastglu_tensor gate,
                                       fastglu_tensor up, fastglu_tensor bias,
                                       fastglu_tensor weights, fastglu_tensor y,
                                       const fastglu_fp8_out *out, int64_t tokens, int64_t F) {
    int empty;
    fastglu_status st = fastglu_check_glu_fwd_fp8("fastglu_glu_fwd_fp8_cpu", params, recipe, gate,
                                                  up, bias, weights, y, out, tokens, F, 0, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    fwd_args A;
    A.p = params, A.r = recipe, A.gate = gate, A.up = up, A.bias = bias, A.weights = weights;
    A.y = y, A.out = out, A.T = tokens, A.F = F, A.dt = gate.dtype;
    float tile[TILE][TILE]; /* 64 KiB of stack */
    const int tensor = recipe->scaling == FASTGLU_FP8_SCALING_TENSOR;
    float ts = 0.0f;
    if (tensor) { /* pass 1: the amax of the tensor (and y) */
        uint32_t amax = 0;
        for (int64_t t0 = 0; t0 < tokens; t0 += TILE)
            for (int64_t j0 = 0; j0 < F; j0 += TILE) {
                const int nt = (int)(tokens - t0 < TILE ? tokens - t0 : TILE);
                const int nj = (int)(F - j0 < TILE ? F - j0 : TILE);
                tile_y(&A, t0, nt, j0, nj, y.data != NULL, tile);
                for (int i = 0; i < nt; ++i)
                    for (int k = 0; k < nj; ++k) amax = max_bits(amax, fastglu_abs_bits(tile[i][k]));
            }
        ts = fastglu_fp8_scale(amax, recipe->pow2_scales);
    }
    for (int64_t t0 = 0; t0 < tokens; t0 += TILE)
        for (int64_t j0 = 0; j0 < F; j0 += TILE) {
            const int nt = (int)(tokens - t0 < TILE ? tokens - t0 : TILE);
            const int nj = (int)(F - j0 < TILE ? F - j0 : TILE);
            tile_y(&A, t0, nt, j0, nj, !tensor && y.data != NULL, tile);
            tile_quantise(&A, t0, nt, j0, nj, tensor, ts, tile);
        }
    if (tensor) *(float *)out->scale.data = ts;
    return FASTGLU_SUCCESS;
}
