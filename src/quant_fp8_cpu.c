/*
 * quant_fp8_cpu.c — fastglu_quantize_fp8_cpu: a plain [rows, cols] operand quantised to
 * float8_e4m3fn with the recipe of include/fastglu.h ("The activation quantised to FP8"; the
 * operand's own section: 1 x 128 blocks with the transposed copy, or 128 x 128 blocks), on host
 * memory. The reference of the CUDA kernel (quant_fp8_cuda.cu): the same amax over the bits of
 * |x|, the same scale and the same code per element (fp8_recipe.h), so the two give the same bits.
 *
 * A tile of 128 x 128 elements at a time, widened to fp32 on the stack (exact for every dtype):
 * its row-wise blocks, its column-wise blocks (the transposed copy) or its one 128 x 128 block.
 * No memory is allocated.
 */
#include <string.h>

#include "convert.h"
#include "fp8_recipe.h"
#include "glu_fp8.h"

#define TILE FASTGLU_FP8_BLOCK

static float load(fastglu_dtype dt, const void *x, int64_t i) {
    switch (dt) {
    case FASTGLU_DTYPE_BF16: return bf16_to_f32(((const uint16_t *)x)[i]);
    case FASTGLU_DTYPE_FP16: return fp16_to_f32(((const uint16_t *)x)[i]);
    default: return ((const float *)x)[i];
    }
}

static float *scale_at(const fastglu_tensor *s, int mn, int64_t i, int64_t b) {
    return (float *)s->data + (mn ? b * s->row_stride + i : i * s->row_stride + b);
}

fastglu_status fastglu_quantize_fp8_cpu(const fastglu_fp8_recipe *recipe, fastglu_tensor x,
                                        const fastglu_fp8_out *out, int64_t rows, int64_t cols) {
    const char *fn = "fastglu_quantize_fp8_cpu";
    int empty;
    fastglu_status st = fastglu_check_quantize_fp8(fn, recipe, x, out, rows, cols, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    static _Thread_local float v[TILE][TILE]; /* 64 KB: off the stack of small threads */
    const int w128 = recipe->scaling == FASTGLU_FP8_SCALING_BLOCK_128X128;
    const int mn = recipe->scale_layout == FASTGLU_FP8_SCALES_MN_MAJOR, pow2 = recipe->pow2_scales;
    unsigned char *d = (unsigned char *)out->data.data, *dt = (unsigned char *)out->data_t.data;
    const int64_t d_rs = out->data.row_stride, dt_rs = out->data_t.row_stride;
    for (int64_t i0 = 0; i0 < rows; i0 += TILE) {
        const int nr = (int)(rows - i0 < TILE ? rows - i0 : TILE);
        for (int64_t j0 = 0; j0 < cols; j0 += TILE) {
            const int nc = (int)(cols - j0 < TILE ? cols - j0 : TILE);
            for (int r = 0; r < nr; ++r)
                for (int c = 0; c < nc; ++c)
                    v[r][c] = load(x.dtype, x.data, (i0 + r) * x.row_stride + j0 + c);
            if (w128) { /* one block: every code of the tile under one scale */
                uint32_t am = 0;
                for (int r = 0; r < nr; ++r)
                    for (int c = 0; c < nc; ++c) {
                        const uint32_t b = fastglu_abs_bits(v[r][c]);
                        if (b > am) am = b;
                    }
                const float s = fastglu_fp8_scale(am, pow2);
                if (d) *scale_at(&out->scale, mn, i0 / TILE, j0 / TILE) = s;
                if (dt) *scale_at(&out->scale_t, mn, j0 / TILE, i0 / TILE) = s;
                for (int r = 0; r < nr; ++r)
                    for (int c = 0; c < nc; ++c) {
                        const unsigned char q = fastglu_fp8_quantise(v[r][c], s);
                        if (d) d[(i0 + r) * d_rs + j0 + c] = q;
                        if (dt) dt[(j0 + c) * dt_rs + i0 + r] = q;
                    }
                continue;
            }
            if (d) /* row-wise: block (i0 + r, j0 / 128) */
                for (int r = 0; r < nr; ++r) {
                    uint32_t am = 0;
                    for (int c = 0; c < nc; ++c) {
                        const uint32_t b = fastglu_abs_bits(v[r][c]);
                        if (b > am) am = b;
                    }
                    const float s = fastglu_fp8_scale(am, pow2);
                    *scale_at(&out->scale, mn, i0 + r, j0 / TILE) = s;
                    for (int c = 0; c < nc; ++c)
                        d[(i0 + r) * d_rs + j0 + c] = fastglu_fp8_quantise(v[r][c], s);
                }
            if (dt) /* column-wise: block (j0 + c, i0 / 128) of the transposed copy */
                for (int c = 0; c < nc; ++c) {
                    uint32_t am = 0;
                    for (int r = 0; r < nr; ++r) {
                        const uint32_t b = fastglu_abs_bits(v[r][c]);
                        if (b > am) am = b;
                    }
                    const float s = fastglu_fp8_scale(am, pow2);
                    *scale_at(&out->scale_t, mn, j0 + c, i0 / TILE) = s;
                    for (int r = 0; r < nr; ++r)
                        dt[(j0 + c) * dt_rs + i0 + r] = fastglu_fp8_quantise(v[r][c], s);
                }
        }
    }
    return FASTGLU_SUCCESS;
}

/* fastglu_glu_fp8_store_blockwise_cpu: the forward's operands saved as e4m3 codes with one scale
 * per 1 x 128 block of each operand's row (include/fastglu.h; the recipe in fp8_recipe.h), a block
 * at a time: its values widened to fp32, their amax, the scale, the clamp's bounds, the codes. */
fastglu_status fastglu_glu_fp8_store_blockwise_cpu(const fastglu_glu_params *params,
                                                   fastglu_tensor gate, fastglu_tensor up,
                                                   fastglu_tensor gate_fp8, fastglu_tensor up_fp8,
                                                   fastglu_tensor scale_inv, int64_t tokens,
                                                   int64_t F) {
    const char *fn = "fastglu_glu_fp8_store_blockwise_cpu";
    int empty;
    fastglu_status st = fastglu_check_glu_fp8_store(fn, params, gate, up, gate_fp8, up_fp8,
                                                    scale_inv, tokens, F, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    const int il = params->layout == FASTGLU_LAYOUT_INTERLEAVED, sat = fastglu_fp8_saturate();
    const float c = fastglu_glu_clamp(params, gate.dtype);
    const int clamp = c > 0.0f && !isinf(c); /* +inf cuts nothing: the plain recipe */
    const int64_t W = il ? 2 * F : F, nbp = fastglu_fp8_blocks(W);
    const fastglu_tensor src[2] = {gate, up}, dst[2] = {gate_fp8, up_fp8};
    float v[TILE];
    for (int64_t t = 0; t < tokens; ++t)
        for (int part = 0; part < (il ? 1 : 2); ++part)
            for (int64_t b = 0; b < nbp; ++b) {
                const int64_t j0 = TILE * b;
                const int n = (int)(W - j0 < TILE ? W - j0 : TILE);
                uint32_t am = 0;
                for (int k = 0; k < n; ++k) {
                    v[k] = load(gate.dtype, src[part].data, t * src[part].row_stride + j0 + k);
                    const uint32_t bits = fastglu_abs_bits(v[k]);
                    if (bits > am) am = bits;
                }
                const int scaled = fastglu_fp8_store_scaled(am);
                const float s = fastglu_fp8_store_scale(am, clamp);
                float lo = 0.0f, hi = 0.0f;
                if (clamp) fastglu_fp8_store_bounds(s, c, &lo, &hi);
                unsigned char *d = (unsigned char *)dst[part].data + t * dst[part].row_stride + j0;
                for (int k = 0; k < n; ++k) {
                    float q = scaled ? v[k] / s : v[k];
                    if (clamp)
                        q = fastglu_fp8_store_value(v[k], q, il ? (int)(k & 1) : part, c, lo, hi);
                    d[k] = fastglu_f32_to_e4m3(q, sat);
                }
                ((float *)scale_inv.data)[t * scale_inv.row_stride + part * nbp + b] = s;
            }
    return FASTGLU_SUCCESS;
}

/* fastglu_glu_fwd_fp8_store_blockwise_cpu: the forward, then the copy (every argument of both
 * checked first): fastglu_glu_fwd_cpu's and fastglu_glu_fp8_store_blockwise_cpu's bits. */
fastglu_status
fastglu_glu_fwd_fp8_store_blockwise_cpu(const fastglu_glu_params *params,
                                        const fastglu_glu_operands *operands, fastglu_tensor output,
                                        fastglu_tensor gate_fp8, fastglu_tensor up_fp8,
                                        fastglu_tensor scale_inv, int64_t tokens, int64_t F) {
    const fastglu_tensor none = {NULL, FASTGLU_DTYPE_FP8_E4M3, 0};
    int empty;
    fastglu_status st =
        fastglu_check_glu_fwd_fp8_store("fastglu_glu_fwd_fp8_store_blockwise_cpu", params, operands,
                                        output, gate_fp8, up_fp8, scale_inv, tokens, F, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    st = fastglu_glu_fwd_cpu(params, operands, output, none, tokens, F);
    if (st != FASTGLU_SUCCESS) return st;
    return fastglu_glu_fp8_store_blockwise_cpu(params, operands->gate, operands->up, gate_fp8,
                                               up_fp8, scale_inv, tokens, F);
}

/* fastglu_glu_fwd_fp8_copy_blockwise_cpu: the FP8 forward, then the copy (every argument of both
 * checked first): fastglu_glu_fwd_fp8_cpu's and fastglu_glu_fp8_store_blockwise_cpu's bits. */
fastglu_status fastglu_glu_fwd_fp8_copy_blockwise_cpu(
    const fastglu_glu_params *params, const fastglu_fp8_recipe *recipe, fastglu_tensor gate,
    fastglu_tensor up, fastglu_tensor bias, fastglu_tensor weights, fastglu_tensor y,
    const fastglu_fp8_out *out, fastglu_tensor gate_fp8, fastglu_tensor up_fp8,
    fastglu_tensor scale_inv, int64_t tokens, int64_t F) {
    int empty;
    fastglu_status st = fastglu_check_glu_fwd_fp8_copy(
        "fastglu_glu_fwd_fp8_copy_blockwise_cpu", params, recipe, gate, up, bias, weights, y, out,
        gate_fp8, up_fp8, scale_inv, tokens, F, 0, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    st = fastglu_glu_fwd_fp8_cpu(params, recipe, gate, up, bias, weights, y, out, tokens, F);
    if (st != FASTGLU_SUCCESS) return st;
    return fastglu_glu_fp8_store_blockwise_cpu(params, gate, up, gate_fp8, up_fp8, scale_inv,
                                               tokens, F);
}
