/*
 * glu_common.c — the gated-linear-unit family's backend-independent parts: default parameters,
 * the backward's workspace layout, and argument validation (fastglu_check_glu_fwd / _bwd), shared
 * by the CPU backend (glu_cpu.c), the CUDA backend (glu_cuda.cu) and the CPU-only build's CUDA
 * stubs (cuda_stub.c), so that every backend rejects exactly the same calls with the same message.
 *
 * Validation order (the message names the first problem found):
 *   params (NULL, activation, layout, non-finite offset / multipliers), dtype, weights_dtype (when
 *   weights is given), the clamp in dtype (and below 448 with the fp8 copy), input_dtype and input_scale_inv (backward), tokens and F, the layout's
 *   pointer rules (up / d_up NULL with INTERLEAVED), dbias / dweights without bias / weights; then,
 *   for an empty problem, only the buffers that will be zero-filled (dbias when F > 0, dweights
 *   when tokens > 0) and that they do not overlap bias / weights; otherwise every tensor (NULL,
 *   alignment, strides, span; the forward's optional saved_fp8 copy after its output), the
 *   workspace (size, 16-byte alignment), and every output against every input and every other
 *   output.
 */
#include <inttypes.h>
#include <float.h>
#include <math.h>

#include "convert.h"
#include "internal.h"

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        fastglu_status s_ = (expr);                                                                \
        if (s_ != FASTGLU_SUCCESS) return s_;                                                      \
    } while (0)

fastglu_glu_params fastglu_glu_params_default(fastglu_activation activation) {
    fastglu_glu_params p;
    p.activation = activation;
    p.layout = FASTGLU_LAYOUT_SPLIT;
    p.clamp_value = 0.0f;
    p.glu_linear_offset = 0.0f;
    p.gate_multiplier = 1.0f;
    p.down_multiplier = 1.0f;
    return p;
}

/* ---- workspace ----------------------------------------------------------------------------- */

/* a * b * c bytes, saturating at SIZE_MAX (a, b, c >= 0) */
static size_t mul3_sat(uint64_t a, uint64_t b, uint64_t c) {
    uint64_t ab, abc;
    if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc) ||
        abc > (uint64_t)SIZE_MAX)
        return SIZE_MAX;
    return (size_t)abc;
}

/* x rounded up to a multiple of 16, saturating */
static size_t round16_sat(size_t x) {
    return x > SIZE_MAX - 15 ? SIZE_MAX : (x + 15) & ~(size_t)15;
}

static size_t add_sat(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }

fastglu_glu_workspace_layout fastglu_glu_workspace(int64_t tokens, int64_t ffn_hidden_size,
                                                   int want_dbias, int want_dweights) {
    fastglu_glu_workspace_layout w = {0, 0, 0, 0, 0};
    if (tokens <= 0 || ffn_hidden_size <= 0) return w; /* empty: dbias / dweights are zero-filled */
    const uint64_t T = (uint64_t)tokens, F = (uint64_t)ffn_hidden_size;
    if (want_dbias) {
        const uint64_t slabs = T / FASTGLU_SLAB_ROWS + (T % FASTGLU_SLAB_ROWS != 0);
        w.dbias_offset = 0;
        w.dbias_bytes = mul3_sat(slabs, 2 * F, sizeof(float)); /* F <= INT64_MAX: 2F fits */
    }
    if (want_dweights) {
        const uint64_t tiles = F / FASTGLU_TILE_COLS + (F % FASTGLU_TILE_COLS != 0);
        w.dweights_offset = round16_sat(w.dbias_bytes);
        w.dweights_bytes = mul3_sat(tiles, T, sizeof(float));
        w.total = round16_sat(add_sat(w.dweights_offset, w.dweights_bytes));
    } else {
        w.total = round16_sat(w.dbias_bytes);
    }
    return w;
}

size_t fastglu_glu_bwd_workspace_bytes(int64_t tokens, int64_t ffn_hidden_size, int want_dbias,
                                       int want_dweights) {
    return fastglu_glu_workspace(tokens, ffn_hidden_size, want_dbias, want_dweights).total;
}

/* ---- validation ---------------------------------------------------------------------------- */

static fastglu_status check_params(const char *fn, const fastglu_glu_params *p) {
    if (p == NULL) return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE, "%s: params is NULL", fn);
    const int act = (int)p->activation, layout = (int)p->layout;
    if (act < (int)FASTGLU_ACT_SILU || act > (int)FASTGLU_ACT_QUICK_GELU)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: params->activation = %d is not FASTGLU_ACT_SILU, "
                                 "_GELU_TANH or _QUICK_GELU",
                                 fn, act);
    if (layout < (int)FASTGLU_LAYOUT_SPLIT || layout > (int)FASTGLU_LAYOUT_INTERLEAVED)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: params->layout = %d is not FASTGLU_LAYOUT_SPLIT or "
                                 "_INTERLEAVED",
                                 fn, layout);
    if (!isfinite(p->glu_linear_offset))
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: params->glu_linear_offset = %g is not finite", fn,
                                 (double)p->glu_linear_offset);
    if (!isfinite(p->gate_multiplier))
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: params->gate_multiplier = %g is not finite", fn,
                                 (double)p->gate_multiplier);
    if (!isfinite(p->down_multiplier))
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: params->down_multiplier = %g is not finite", fn,
                                 (double)p->down_multiplier);
    /* clamp_value: > 0 clamps, <= 0 or NaN does not (+Inf clamps nothing but NaNs' gradients, as
     * torch.clamp with an infinite bound); check_clamp checks it against the dtype. */
    return FASTGLU_SUCCESS;
}

/* ---- the clamp in the operands' dtype ------------------------------------------------------- */

float fastglu_glu_clamp(const fastglu_glu_params *p, fastglu_dtype dtype) {
    if (!fastglu_clamps(p)) return 0.0f;
    const float c = p->clamp_value;
    switch (dtype) {
    case FASTGLU_DTYPE_FP16: return fp16_to_f32(f32_to_fp16(c));
    case FASTGLU_DTYPE_BF16: return bf16_to_f32(f32_to_bf16(c));
    default: return c;
    }
}

static const char *dtype_text(fastglu_dtype dtype) {
    return dtype == FASTGLU_DTYPE_FP16   ? "float16"
           : dtype == FASTGLU_DTYPE_BF16 ? "bfloat16"
                                         : "float32";
}

/* The largest finite value of a compute dtype. */
static float dtype_max(fastglu_dtype dtype) {
    return dtype == FASTGLU_DTYPE_FP16   ? 65504.0f
           : dtype == FASTGLU_DTYPE_BF16 ? 0x1.fep127f
                                         : FLT_MAX;
}

/* A clamp the operands' dtype can hold, as torch.clamp needs of its bound: a positive clamp_value
 * must not round to 0 in dtype (it would stop being a clamp), nor a finite one exceed dtype's
 * largest finite value (torch.clamp refuses it: "cannot be converted without overflow"). With the
 * fp8 copy (saved_fp8 != NULL) the bound must be below 448, e4m3fn's largest value, so that the copy
 * can mark the elements the clamp cuts (src/fp8.h). */
static fastglu_status check_clamp(const char *fn, const fastglu_glu_params *p, fastglu_dtype dtype,
                                  int saved_fp8) {
    if (!fastglu_clamps(p)) return FASTGLU_SUCCESS;
    const float c = p->clamp_value, ce = fastglu_glu_clamp(p, dtype);
    if (ce == 0.0f)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: params->clamp_value = %g rounds to 0 in %s, the operands' "
                                 "dtype (a clamp must stay positive; <= 0 means no clamp)",
                                 fn, (double)c, dtype_text(dtype));
    if (isfinite(c) && (!isfinite(ce) || c > dtype_max(dtype)))
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: params->clamp_value = %g is beyond the largest finite %s "
                                 "(torch.clamp refuses such a bound)",
                                 fn, (double)c, dtype_text(dtype));
    if (saved_fp8 && ce >= 448.0f && isfinite(ce)) /* (+inf cuts nothing: the plain cast) */
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: params->clamp_value = %g (%g in %s) with saved_fp8: the fp8 "
                                 "copy needs a clamp below 448, float8_e4m3fn's largest value, to "
                                 "mark the elements the clamp cuts",
                                 fn, (double)c, (double)ce, dtype_text(dtype));
    return FASTGLU_SUCCESS;
}

/* dtype, and weights_dtype when weights are given (it is ignored without them). */
static fastglu_status check_dtypes(const char *fn, fastglu_dtype dtype, const void *weights,
                                   fastglu_dtype weights_dtype) {
    TRY(fastglu_check_compute_dtype(fn, "dtype", dtype));
    if (weights != NULL) TRY(fastglu_check_compute_dtype(fn, "weights_dtype", weights_dtype));
    return FASTGLU_SUCCESS;
}

static fastglu_status check_layout_pointer(const char *fn, const fastglu_glu_params *p,
                                           const char *name, const void *ptr) {
    if (p->layout == FASTGLU_LAYOUT_INTERLEAVED && ptr != NULL)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: %s = %p must be NULL with FASTGLU_LAYOUT_INTERLEAVED (the "
                                 "gate operand holds gate and up interleaved)",
                                 fn, name, ptr);
    return FASTGLU_SUCCESS;
}

/* The [tokens, F] (SPLIT) or [tokens, 2F] (INTERLEAVED) operands gate and up (or d_gate, d_up). */
static fastglu_status check_pair(const char *fn, const fastglu_glu_params *p, fastglu_region *rg,
                                 const char *gname, const void *g, int64_t g_rs, fastglu_region *ru,
                                 const char *uname, const void *u, int64_t u_rs, int64_t tokens,
                                 int64_t F, size_t esize, int is_output, int *have_u) {
    if (p->layout == FASTGLU_LAYOUT_INTERLEAVED) {
        *have_u = 0;
        return fastglu_check_tensor(fn, rg, gname, g, tokens, 2 * F, g_rs, 1, esize, is_output);
    }
    *have_u = 1;
    TRY(fastglu_check_tensor(fn, rg, gname, g, tokens, F, g_rs, 1, esize, is_output));
    return fastglu_check_tensor(fn, ru, uname, u, tokens, F, u_rs, 1, esize, is_output);
}

fastglu_status fastglu_check_glu_fwd(const char *fn, const fastglu_glu_params *params,
                                     const void *gate, int64_t gate_row_stride, const void *up,
                                     int64_t up_row_stride, const void *bias, const void *weights,
                                     fastglu_dtype weights_dtype, int64_t weights_stride,
                                     const void *output, int64_t output_row_stride,
                                     const void *saved_fp8, int64_t saved_fp8_row_stride,
                                     int64_t tokens, int64_t ffn_hidden_size, fastglu_dtype dtype,
                                     int *empty) {
    fastglu_region in[4], out, out8;
    int n_in = 0, have_up;
    TRY(check_params(fn, params));
    TRY(check_dtypes(fn, dtype, weights, weights_dtype));
    TRY(check_clamp(fn, params, dtype, saved_fp8 != NULL));
    TRY(fastglu_check_shape(fn, tokens, ffn_hidden_size, empty));
    TRY(check_layout_pointer(fn, params, "up", up));
    if (*empty) return FASTGLU_SUCCESS;

    const size_t es = fastglu_dtype_size(dtype);
    TRY(check_pair(fn, params, &in[0], "gate", gate, gate_row_stride, &in[1], "up", up,
                   up_row_stride, tokens, ffn_hidden_size, es, 0, &have_up));
    n_in = 1 + have_up;
    if (bias != NULL)
        TRY(fastglu_check_tensor(fn, &in[n_in++], "bias", bias, 1, 2 * ffn_hidden_size, 0, 1, es,
                                 0));
    if (weights != NULL)
        TRY(fastglu_check_tensor(fn, &in[n_in++], "weights", weights, tokens, 1, weights_stride, 1,
                                 fastglu_dtype_size(weights_dtype), 0));
    TRY(fastglu_check_tensor(fn, &out, "output", output, tokens, ffn_hidden_size, output_row_stride,
                             1, es, 1));
    /* the fp8 copy of the operands: [tokens, 2F] bytes (any alignment), written like output */
    if (saved_fp8 != NULL)
        TRY(fastglu_check_tensor(fn, &out8, "saved_fp8", saved_fp8, tokens, 2 * ffn_hidden_size,
                                 saved_fp8_row_stride, 1, 1, 1));
    for (int i = 0; i < n_in; ++i) TRY(fastglu_check_disjoint(fn, &out, &in[i]));
    if (saved_fp8 != NULL) {
        for (int i = 0; i < n_in; ++i) TRY(fastglu_check_disjoint(fn, &out8, &in[i]));
        TRY(fastglu_check_disjoint(fn, &out8, &out));
    }
    return FASTGLU_SUCCESS;
}

/* dbias ([2F], dtype) and dweights ([tokens], weights_dtype) when given and not of zero length. */
static fastglu_status check_reductions(const char *fn, const void *bias, const void *weights,
                                       fastglu_dtype weights_dtype, const void *dbias,
                                       const void *dweights, int64_t tokens, int64_t F, size_t es,
                                       fastglu_region *rdb, fastglu_region *rdw, int *have_db,
                                       int *have_dw) {
    *have_db = dbias != NULL && F > 0;
    *have_dw = dweights != NULL && tokens > 0;
    if (*have_db && bias == NULL)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: dbias = %p is given but bias is NULL (dbias requires bias)",
                                 fn, dbias);
    if (*have_dw && weights == NULL)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: dweights = %p is given but weights is NULL (dweights "
                                 "requires weights)",
                                 fn, dweights);
    if (*have_db) TRY(fastglu_check_tensor(fn, rdb, "dbias", dbias, 1, 2 * F, 0, 1, es, 1));
    if (*have_dw)
        TRY(fastglu_check_tensor(fn, rdw, "dweights", dweights, 1, tokens, 0, 1,
                                 fastglu_dtype_size(weights_dtype), 1));
    return FASTGLU_SUCCESS;
}

fastglu_status fastglu_check_glu_bwd(
    const char *fn, const fastglu_glu_params *params, const void *dy, int64_t dy_row_stride,
    int64_t dy_col_stride, const void *gate, int64_t gate_row_stride, const void *up,
    int64_t up_row_stride, fastglu_dtype input_dtype, const float *input_scale_inv,
    int64_t input_scale_stride, int input_scale_1x128, const void *bias, const void *weights,
    fastglu_dtype weights_dtype, int64_t weights_stride, const void *d_gate,
    int64_t d_gate_row_stride, const void *d_up, int64_t d_up_row_stride, const void *dbias,
    const void *dweights, const void *workspace, size_t workspace_bytes, int64_t tokens,
    int64_t ffn_hidden_size, fastglu_dtype dtype, int *empty) {
    /* inputs: dy, gate, up, input_scale_inv, bias, weights; outputs: d_gate, d_up, dbias,
     * dweights, workspace */
    fastglu_region in[6], out[5];
    int n_in = 0, n_out = 0, have_up, have_dup, have_db, have_dw;
    int is_in_gate, is_in_up = -1;
    const int64_t T = tokens, F = ffn_hidden_size;
    TRY(check_params(fn, params));
    TRY(check_dtypes(fn, dtype, weights, weights_dtype));
    TRY(check_clamp(fn, params, dtype, 0));
    if (input_dtype != dtype && input_dtype != FASTGLU_DTYPE_FP8_E4M3)
        return fastglu_set_error(FASTGLU_ERROR_UNSUPPORTED_DTYPE,
                                 "%s: input_dtype %d is neither dtype (%d) nor "
                                 "FASTGLU_DTYPE_FP8_E4M3",
                                 fn, (int)input_dtype, (int)dtype);
    if (input_scale_inv != NULL && input_dtype != FASTGLU_DTYPE_FP8_E4M3)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: input_scale_inv = %p is given but input_dtype %d is not "
                                 "FASTGLU_DTYPE_FP8_E4M3 (a scale only applies to an fp8 input)",
                                 fn, (const void *)input_scale_inv, (int)input_dtype);
    if (input_scale_1x128 != 0 && input_scale_1x128 != 1)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: scale_1x128 = %d is neither 0 nor 1", fn, input_scale_1x128);
    if (input_scale_1x128 && input_scale_inv == NULL)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: scale_1x128 = 1 but input_scale_inv is NULL (the block "
                                 "scales are needed)",
                                 fn);
    TRY(fastglu_check_shape(fn, T, F, empty));
    TRY(check_layout_pointer(fn, params, "up", up));
    TRY(check_layout_pointer(fn, params, "d_up", d_up));

    const size_t es = fastglu_dtype_size(dtype), in_es = fastglu_dtype_size(input_dtype);
    TRY(check_reductions(fn, bias, weights, weights_dtype, dbias, dweights, T, F, es, &out[2],
                         &out[3], &have_db, &have_dw));
    if (*empty) {
        /* the caller zero-fills dbias ([2F], when F > 0) or dweights ([tokens], when tokens > 0):
         * each must still not overlap the bias / weights it is the gradient of */
        fastglu_region r;
        if (have_db) {
            TRY(fastglu_check_tensor(fn, &r, "bias", bias, 1, 2 * F, 0, 1, es, 0));
            TRY(fastglu_check_disjoint(fn, &out[2], &r));
        }
        if (have_dw) {
            TRY(fastglu_check_tensor(fn, &r, "weights", weights, T, 1, weights_stride, 1,
                                     fastglu_dtype_size(weights_dtype), 0));
            TRY(fastglu_check_disjoint(fn, &out[3], &r));
        }
        return FASTGLU_SUCCESS;
    }

    TRY(fastglu_check_tensor(fn, &in[n_in++], "dy", dy, T, F, dy_row_stride, dy_col_stride, es, 0));
    is_in_gate = n_in;
    TRY(check_pair(fn, params, &in[n_in], "gate", gate, gate_row_stride, &in[n_in + 1], "up", up,
                   up_row_stride, T, F, in_es, 0, &have_up));
    n_in += 1 + have_up;
    if (have_up) is_in_up = is_in_gate + 1;
    if (input_scale_inv != NULL)
        TRY(fastglu_check_tensor(fn, &in[n_in++], "input_scale_inv", input_scale_inv, T,
                                 input_scale_1x128 ? fastglu_glu_scale_blocks(params->layout, F)
                                                   : 1,
                                 input_scale_stride, 1, sizeof(float), 0));
    if (bias != NULL)
        TRY(fastglu_check_tensor(fn, &in[n_in++], "bias", bias, 1, 2 * F, 0, 1, es, 0));
    if (weights != NULL)
        TRY(fastglu_check_tensor(fn, &in[n_in++], "weights", weights, T, 1, weights_stride, 1,
                                 fastglu_dtype_size(weights_dtype), 0));

    TRY(check_pair(fn, params, &out[0], "d_gate", d_gate, d_gate_row_stride, &out[1], "d_up", d_up,
                   d_up_row_stride, T, F, es, 1, &have_dup));

    /* workspace: only the part this call uses; it is written, so it is an output too */
    const fastglu_glu_workspace_layout ws = fastglu_glu_workspace(T, F, have_db, have_dw);
    fastglu_region rws;
    if (ws.total > 0) {
        if (workspace == NULL)
            return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                     "%s: workspace is NULL but this call needs %zu bytes "
                                     "(fastglu_glu_bwd_workspace_bytes)",
                                     fn, ws.total);
        if (workspace_bytes < ws.total)
            return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                     "%s: workspace_bytes = %zu is smaller than the %zu bytes this "
                                     "call needs (fastglu_glu_bwd_workspace_bytes)",
                                     fn, workspace_bytes, ws.total);
        if ((uintptr_t)workspace % 16 != 0)
            return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                     "%s: workspace = %p is not 16-byte aligned", fn, workspace);
        if (ws.total > (size_t)INT64_MAX)
            return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                     "%s: the workspace would span more than 2^63 bytes", fn);
        TRY(fastglu_check_tensor(fn, &rws, "workspace", workspace, 1, (int64_t)ws.total, 0, 1, 1,
                                 1));
    }

    /* the outputs in use, in order: d_gate, d_up, dbias, dweights, workspace */
    fastglu_region outs[5];
    int out_id[5];
    outs[n_out] = out[0], out_id[n_out++] = 0;
    if (have_dup) outs[n_out] = out[1], out_id[n_out++] = 1;
    if (have_db) outs[n_out] = out[2], out_id[n_out++] = 2;
    if (have_dw) outs[n_out] = out[3], out_id[n_out++] = 3;
    if (ws.total > 0) outs[n_out] = rws, out_id[n_out++] = 4;

    /* In place: d_gate is exactly gate (and/or d_up exactly up), same type, same row stride (or a
     * single row): each element is read before its gradient is written over it. */
    const int same_type = input_dtype == dtype;
    const int dgate_in_place =
        same_type && d_gate == gate && (d_gate_row_stride == gate_row_stride || T == 1);
    const int dup_in_place =
        same_type && have_dup && d_up == up && (d_up_row_stride == up_row_stride || T == 1);

    for (int o = 0; o < n_out; ++o) {
        for (int i = 0; i < n_in; ++i) {
            if (out_id[o] == 0 && i == is_in_gate && dgate_in_place) continue;
            if (out_id[o] == 1 && i == is_in_up && dup_in_place) continue;
            TRY(fastglu_check_disjoint(fn, &outs[o], &in[i]));
        }
        for (int p = 0; p < o; ++p) TRY(fastglu_check_disjoint(fn, &outs[o], &outs[p]));
    }
    return FASTGLU_SUCCESS;
}

/* ---- the descriptors ---------------------------------------------------------------------- */

/* FASTGLU_ERROR_UNSUPPORTED_DTYPE unless the present operand t has dtype `want` (named `ref`). */
static fastglu_status same_dtype(const char *fn, const char *name, const fastglu_tensor *t,
                                 fastglu_dtype want, const char *ref) {
    if (t->data == NULL || t->dtype == want) return FASTGLU_SUCCESS;
    return fastglu_set_error(FASTGLU_ERROR_UNSUPPORTED_DTYPE,
                             "%s: %s.dtype = %d differs from %s.dtype = %d", fn, name,
                             (int)t->dtype, ref, (int)want);
}

/* FASTGLU_ERROR_INVALID_VALUE unless the present vector t is contiguous. */
static fastglu_status contiguous(const char *fn, const char *name, const fastglu_tensor *t) {
    if (t->data == NULL || t->row_stride == 1) return FASTGLU_SUCCESS;
    return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                             "%s: %s.row_stride = %" PRId64 " (it must be contiguous: 1)", fn, name,
                             t->row_stride);
}

fastglu_status fastglu_check_glu_fwd_descriptors(const char *fn, const fastglu_glu_operands *o,
                                                 const fastglu_tensor *output,
                                                 const fastglu_tensor *saved_fp8) {
    if (o == NULL)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE, "%s: operands is NULL", fn);
    TRY(same_dtype(fn, "gate", &o->gate, output->dtype, "output"));
    TRY(same_dtype(fn, "up", &o->up, output->dtype, "output"));
    TRY(same_dtype(fn, "bias", &o->bias, output->dtype, "output"));
    TRY(contiguous(fn, "bias", &o->bias));
    if (o->scale_inv.data != NULL || o->scale_1x128 != 0)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: scale_inv is given or scale_1x128 = %d is set (they scale "
                                 "the backward's fp8 operands)",
                                 fn, o->scale_1x128);
    if (saved_fp8->data != NULL && saved_fp8->dtype != FASTGLU_DTYPE_FP8_E4M3)
        return fastglu_set_error(FASTGLU_ERROR_UNSUPPORTED_DTYPE,
                                 "%s: saved_fp8.dtype = %d is not FASTGLU_DTYPE_FP8_E4M3", fn,
                                 (int)saved_fp8->dtype);
    return FASTGLU_SUCCESS;
}

fastglu_status fastglu_check_glu_bwd_descriptors(const char *fn, const fastglu_tensor *dy,
                                                 const fastglu_glu_operands *o,
                                                 const fastglu_glu_grads *g) {
    if (o == NULL)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE, "%s: operands is NULL", fn);
    if (g == NULL) return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE, "%s: grads is NULL", fn);
    TRY(same_dtype(fn, "up", &o->up, o->gate.dtype, "gate"));
    TRY(same_dtype(fn, "bias", &o->bias, dy->dtype, "dy"));
    TRY(contiguous(fn, "bias", &o->bias));
    TRY(same_dtype(fn, "d_gate", &g->d_gate, dy->dtype, "dy"));
    TRY(same_dtype(fn, "d_up", &g->d_up, dy->dtype, "dy"));
    TRY(same_dtype(fn, "dbias", &g->dbias, dy->dtype, "dy"));
    TRY(contiguous(fn, "dbias", &g->dbias));
    if (o->weights.data != NULL)
        TRY(same_dtype(fn, "dweights", &g->dweights, o->weights.dtype, "weights"));
    TRY(contiguous(fn, "dweights", &g->dweights));
    if (o->scale_inv.data != NULL && o->scale_inv.dtype != FASTGLU_DTYPE_FP32)
        return fastglu_set_error(FASTGLU_ERROR_UNSUPPORTED_DTYPE,
                                 "%s: scale_inv.dtype = %d is not FASTGLU_DTYPE_FP32", fn,
                                 (int)o->scale_inv.dtype);
    return FASTGLU_SUCCESS;
}
