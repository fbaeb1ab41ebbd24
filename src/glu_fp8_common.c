/*
 * glu_fp8_common.c — argument validation of fastglu_glu_fwd_fp8_* (both backends give the same
 * messages), the workspace size, and the entry points of builds without CUDA.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "glu_fp8.h"

#define TRY(x)                                                                                     \
    do {                                                                                           \
        fastglu_status st_ = (x);                                                                  \
        if (st_ != FASTGLU_SUCCESS) return st_;                                                    \
    } while (0)

size_t fastglu_glu_fwd_fp8_workspace_bytes(const fastglu_fp8_recipe *recipe) {
    return recipe != NULL && recipe->scaling == FASTGLU_FP8_SCALING_TENSOR ? 16 : 0;
}

/* n fp32 values rounded up to 16 bytes, into *bytes; 0 if that overflows size_t */
static int partial_bytes(uint64_t rows, uint64_t cols, size_t *bytes) {
    if (cols != 0 && rows > (SIZE_MAX / 4 - 15) / cols) return 0;
    *bytes = (size_t)(rows * cols * 4 + 15) / 16 * 16;
    return 1;
}

fastglu_fp8_bwd_workspace fastglu_fp8_bwd_workspace_layout(const fastglu_fp8_recipe *recipe,
                                                           int64_t tokens, int64_t F,
                                                           int want_dbias, int want_dweights) {
    fastglu_fp8_bwd_workspace w = {0, 0, 0, 0, 0};
    size_t off = fastglu_glu_fwd_fp8_workspace_bytes(recipe);
    w.total = off;
    if (tokens <= 0 || F <= 0 || F > INT64_MAX / 4) return w;
    const uint64_t T = (uint64_t)tokens, W = 2 * (uint64_t)F;
    if (want_dbias) {
        if (!partial_bytes((uint64_t)fastglu_fp8_blocks(tokens), W, &w.db_bytes) ||
            off > SIZE_MAX - w.db_bytes)
            goto overflow;
        w.db_offset = off, off += w.db_bytes;
    }
    if (want_dweights) {
        if (!partial_bytes((uint64_t)fastglu_fp8_blocks((int64_t)W), T, &w.dw_bytes) ||
            off > SIZE_MAX - w.dw_bytes)
            goto overflow;
        w.dw_offset = off, off += w.dw_bytes;
    }
    w.total = off;
    return w;
overflow: /* no memory holds it: the validation then refuses any workspace */
    w.total = SIZE_MAX;
    return w;
}

size_t fastglu_glu_bwd_fp8_workspace_bytes(const fastglu_fp8_recipe *recipe, int64_t tokens,
                                           int64_t ffn_hidden_size, int want_dbias,
                                           int want_dweights) {
    return fastglu_fp8_bwd_workspace_layout(recipe, tokens, ffn_hidden_size, want_dbias,
                                            want_dweights)
        .total;
}

/* dbias / dweights of the backward (either may be absent): what holds for any size (the gradient
 * asks for its operand, the dtype, contiguity). */
static fastglu_status check_reduction_descriptors(const char *fn, fastglu_tensor gate,
                                                  fastglu_tensor bias, fastglu_tensor weights,
                                                  const fastglu_tensor *dbias,
                                                  const fastglu_tensor *dweights) {
    if (dbias != NULL && dbias->data != NULL) {
        if (bias.data == NULL)
            return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                     "%s: dbias is given but bias is absent (NULL)", fn);
        if (dbias->dtype != gate.dtype)
            return fastglu_set_error(FASTGLU_ERROR_UNSUPPORTED_DTYPE,
                                     "%s: dbias.dtype = %d differs from gate.dtype = %d", fn,
                                     (int)dbias->dtype, (int)gate.dtype);
        if (dbias->row_stride != 1)
            return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                     "%s: dbias.row_stride = %" PRId64 " must be 1 (contiguous)",
                                     fn, dbias->row_stride);
    }
    if (dweights != NULL && dweights->data != NULL) {
        if (weights.data == NULL)
            return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                     "%s: dweights is given but weights is absent (NULL)", fn);
        if (dweights->dtype != weights.dtype)
            return fastglu_set_error(FASTGLU_ERROR_UNSUPPORTED_DTYPE,
                                     "%s: dweights.dtype = %d differs from weights.dtype = %d", fn,
                                     (int)dweights->dtype, (int)weights.dtype);
        if (dweights->row_stride != 1)
            return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                     "%s: dweights.row_stride = %" PRId64 " must be 1 (contiguous)",
                                     fn, dweights->row_stride);
    }
    return FASTGLU_SUCCESS;
}

/* dbias [2F] and dweights [T] as output regions (those present and non-empty), into o. */
static fastglu_status reduction_regions(const char *fn, fastglu_tensor gate,
                                        const fastglu_tensor *dbias, const fastglu_tensor *dweights,
                                        int64_t tokens, int64_t F, fastglu_region *o, int *n_out) {
    if (dbias != NULL && dbias->data != NULL && F > 0)
        TRY(fastglu_check_tensor(fn, &o[(*n_out)++], "dbias", dbias->data, 1, 2 * F, 0, 1,
                                 fastglu_dtype_size(gate.dtype), 1));
    if (dweights != NULL && dweights->data != NULL && tokens > 0)
        TRY(fastglu_check_tensor(fn, &o[(*n_out)++], "dweights", dweights->data, 1, tokens, 0, 1,
                                 fastglu_dtype_size(dweights->dtype), 1));
    return FASTGLU_SUCCESS;
}

/* A scale tensor of `rows` rows and nb blocks per row in the recipe's layout (ld = row_stride). */
static fastglu_status check_scales(const char *fn, const fastglu_fp8_recipe *r, fastglu_region *rg,
                                   const char *name, fastglu_tensor s, int64_t rows, int64_t nb) {
    if (s.dtype != FASTGLU_DTYPE_FP32)
        return fastglu_set_error(FASTGLU_ERROR_UNSUPPORTED_DTYPE,
                                 "%s: %s.dtype = %d is not FASTGLU_DTYPE_FP32", fn, name,
                                 (int)s.dtype);
    if (r->scaling == FASTGLU_FP8_SCALING_TENSOR)
        return fastglu_check_tensor(fn, rg, name, s.data, 1, 1, 0, 1, 4, 1);
    if (r->scale_layout == FASTGLU_FP8_SCALES_MN_MAJOR) {
        if (nb > 1 && s.row_stride < rows)
            return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                     "%s: %s.row_stride = %" PRId64 " (the leading dimension of "
                                     "MN-major scales) is smaller than its %" PRId64 " rows",
                                     fn, name, s.row_stride, rows);
        return fastglu_check_tensor(fn, rg, name, s.data, nb, rows, s.row_stride, 1, 4, 1);
    }
    return fastglu_check_tensor(fn, rg, name, s.data, rows, nb, s.row_stride, 1, 4, 1);
}

/* Every output region disjoint from every input and from the other outputs. */
static fastglu_status check_outputs_disjoint(const char *fn, const fastglu_region *o, int n_out,
                                             const fastglu_region *in, int n_in) {
    for (int i = 0; i < n_out; ++i) {
        for (int k = 0; k < n_in; ++k) TRY(fastglu_check_disjoint(fn, &o[i], &in[k]));
        for (int k = 0; k < i; ++k) TRY(fastglu_check_disjoint(fn, &o[i], &o[k]));
    }
    return FASTGLU_SUCCESS;
}

static fastglu_status check_fp8_data(const char *fn, fastglu_region *rg, const char *name,
                                     fastglu_tensor d, int64_t rows, int64_t cols) {
    if (d.dtype != FASTGLU_DTYPE_FP8_E4M3)
        return fastglu_set_error(FASTGLU_ERROR_UNSUPPORTED_DTYPE,
                                 "%s: %s.dtype = %d is not FASTGLU_DTYPE_FP8_E4M3", fn, name,
                                 (int)d.dtype);
    return fastglu_check_tensor(fn, rg, name, d.data, rows, cols, d.row_stride, 1, 1, 1);
}

/* The blockwise copy's dtypes (the store's outputs, the saved backward's operands): gate_fp8 and,
 * in the split layout, up_fp8 e4m3; scale_inv fp32. */
static fastglu_status check_copy_dtypes(const char *fn, fastglu_dtype gate, fastglu_dtype up,
                                        fastglu_dtype scale_inv, int interleaved) {
    if (gate != FASTGLU_DTYPE_FP8_E4M3)
        return fastglu_set_error(FASTGLU_ERROR_UNSUPPORTED_DTYPE,
                                 "%s: gate_fp8.dtype = %d is not FASTGLU_DTYPE_FP8_E4M3", fn,
                                 (int)gate);
    if (!interleaved && up != FASTGLU_DTYPE_FP8_E4M3)
        return fastglu_set_error(FASTGLU_ERROR_UNSUPPORTED_DTYPE,
                                 "%s: up_fp8.dtype = %d is not FASTGLU_DTYPE_FP8_E4M3", fn,
                                 (int)up);
    if (scale_inv != FASTGLU_DTYPE_FP32)
        return fastglu_set_error(FASTGLU_ERROR_UNSUPPORTED_DTYPE,
                                 "%s: scale_inv.dtype = %d is not FASTGLU_DTYPE_FP32", fn,
                                 (int)scale_inv);
    return FASTGLU_SUCCESS;
}

/* fastglu_check_glu_fp8, and where the call has work, every region it reads or writes (at most
 * 14) into seen[*n_seen] when seen is not NULL */
static fastglu_status
check_glu_fp8(const char *fn, const fastglu_glu_params *params, const fastglu_fp8_recipe *recipe,
              const fastglu_tensor *dy, fastglu_tensor gate, fastglu_tensor up,
              const fastglu_tensor *scale_inv, fastglu_tensor bias, fastglu_tensor weights,
              fastglu_tensor y, const fastglu_tensor *dbias, const fastglu_tensor *dweights,
              const fastglu_fp8_out *out, int64_t tokens, int64_t F, int need_workspace, int *empty,
              fastglu_region *seen, int *n_seen) {
    fastglu_region in[6], o[8];
    int n_in = 0, n_out = 0;
    float scratch = 0.0f;
    /* the operands' names, and the call's dtype: with the blockwise copy (scale_inv) dy's, gate and
     * up being its codes */
    const char *gname = scale_inv != NULL ? "gate_fp8" : "gate",
               *uname = scale_inv != NULL ? "up_fp8" : "up";
    if (scale_inv != NULL && dy == NULL)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE, "%s: dy is NULL", fn);
    const fastglu_dtype cdt = scale_inv != NULL ? dy->dtype : gate.dtype;
    fastglu_tensor call = gate; /* (a descriptor of the call's dtype, for the sums' checks) */
    call.dtype = cdt;
    if (recipe == NULL)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE, "%s: recipe is NULL", fn);
    if (out == NULL) return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE, "%s: out is NULL", fn);
    if ((int)recipe->scaling < 0 || (int)recipe->scaling > 1)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: recipe->scaling = %d is not FASTGLU_FP8_SCALING_BLOCK_1X128 "
                                 "or _TENSOR",
                                 fn, (int)recipe->scaling);
    if ((int)recipe->scale_layout < 0 || (int)recipe->scale_layout > 1)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: recipe->scale_layout = %d is not FASTGLU_FP8_SCALES_MN_MAJOR "
                                 "or _ROW_MAJOR",
                                 fn, (int)recipe->scale_layout);
    /* params, dtypes, the clamp, up with INTERLEAVED, the operands' alignment: the family's own
     * checks, on one element (the extents follow below; scratch stands for an output) */
    TRY(fastglu_check_shape(fn, tokens, F, empty));
    const int64_t one = *empty ? 0 : 1;
    if (scale_inv != NULL && params != NULL) { /* the copy's own names, before the family's */
        if (!fastglu_is_compute_dtype(cdt))
            return fastglu_set_error(FASTGLU_ERROR_UNSUPPORTED_DTYPE,
                                     "%s: dy.dtype = %d is not FASTGLU_DTYPE_FP32, _FP16 or _BF16 "
                                     "(the call's dtype; the copy's codes are gate_fp8 and up_fp8)",
                                     fn, (int)cdt);
        if (params->layout == FASTGLU_LAYOUT_INTERLEAVED && up.data != NULL)
            return fastglu_set_error(
                FASTGLU_ERROR_INVALID_VALUE,
                "%s: up_fp8.data = %p must be NULL with FASTGLU_LAYOUT_INTERLEAVED (gate_fp8 holds "
                "gate and up interleaved)",
                fn, up.data);
        if (tokens > 0 && F > 0 && gate.data == NULL)
            return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE, "%s: gate_fp8 is NULL", fn);
        if (tokens > 0 && F > 0 && params->layout == FASTGLU_LAYOUT_SPLIT && up.data == NULL)
            return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE, "%s: up_fp8 is NULL", fn);
    }
    /* (the copy's codes have any alignment: stand-ins of the call's dtype for them, NULL kept) */
    float stand_in[2] = {0.0f, 0.0f};
    const void *g1 =
                   scale_inv != NULL && gate.data != NULL ? (const void *)&stand_in[0] : gate.data,
               *u1 = scale_inv != NULL && up.data != NULL ? (const void *)&stand_in[1] : up.data;
    TRY(fastglu_check_glu_fwd(fn, params, g1, 0, u1, 0, bias.data, weights.data, weights.dtype, 0,
                              &scratch, 0, NULL, 0, one, one, cdt, empty));
    TRY(fastglu_check_shape(fn, tokens, F, empty));
    TRY(check_reduction_descriptors(fn, call, bias, weights, dbias, dweights));
    const int il = params->layout == FASTGLU_LAYOUT_INTERLEAVED;
    if (scale_inv != NULL) /* the copy's dtypes, empty problem or not */
        TRY(check_copy_dtypes(fn, gate.dtype, up.dtype, scale_inv->dtype, il));
    const int want_db = dbias != NULL && dbias->data != NULL,
              want_dw = dweights != NULL && dweights->data != NULL;
    if (*empty) { /* only the sums over nothing are written: against each other, and against
                   * the bias and weights that still have elements */
        TRY(reduction_regions(fn, call, dbias, dweights, tokens, F, o, &n_out));
        if (bias.data != NULL && F > 0 && bias.row_stride == 1)
            TRY(fastglu_check_tensor(fn, &in[n_in++], "bias", bias.data, 1, 2 * F, 0, 1,
                                     fastglu_dtype_size(cdt), 0));
        if (weights.data != NULL && tokens > 0)
            TRY(fastglu_check_tensor(fn, &in[n_in++], "weights", weights.data, tokens, 1,
                                     weights.row_stride, 1, fastglu_dtype_size(weights.dtype), 0));
        return check_outputs_disjoint(fn, o, n_out, in, n_in);
    }
    if (scale_inv == NULL && up.data != NULL && up.dtype != gate.dtype)
        return fastglu_set_error(FASTGLU_ERROR_UNSUPPORTED_DTYPE,
                                 "%s: up.dtype = %d differs from gate.dtype = %d", fn,
                                 (int)up.dtype, (int)gate.dtype);
    if (bias.data != NULL && bias.dtype != cdt)
        return fastglu_set_error(FASTGLU_ERROR_UNSUPPORTED_DTYPE,
                                 "%s: bias.dtype = %d differs from %s.dtype = %d", fn,
                                 (int)bias.dtype, scale_inv != NULL ? "dy" : "gate", (int)cdt);
    if (y.data != NULL && y.dtype != cdt)
        return fastglu_set_error(
            FASTGLU_ERROR_UNSUPPORTED_DTYPE, "%s: %s.dtype = %d differs from %s.dtype = %d", fn,
            dy != NULL ? "dh" : "y", (int)y.dtype, scale_inv != NULL ? "dy" : "gate", (int)cdt);
    const size_t es = fastglu_dtype_size(cdt), es_in = scale_inv != NULL ? 1 : es;
    TRY(fastglu_check_tensor(fn, &in[n_in++], gname, gate.data, tokens, il ? 2 * F : F,
                             gate.row_stride, 1, es_in, 0));
    if (!il)
        TRY(fastglu_check_tensor(fn, &in[n_in++], uname, up.data, tokens, F, up.row_stride, 1,
                                 es_in, 0));
    if (scale_inv != NULL)
        TRY(fastglu_check_tensor(fn, &in[n_in++], "scale_inv", scale_inv->data, tokens,
                                 fastglu_glu_scale_blocks(params->layout, F), scale_inv->row_stride,
                                 1, 4, 0));
    if (bias.data != NULL) {
        if (bias.row_stride != 1)
            return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                     "%s: bias.row_stride = %" PRId64 " must be 1 (contiguous)", fn,
                                     bias.row_stride);
        TRY(fastglu_check_tensor(fn, &in[n_in++], "bias", bias.data, 1, 2 * F, 0, 1, es, 0));
    }
    if (weights.data != NULL)
        TRY(fastglu_check_tensor(fn, &in[n_in++], "weights", weights.data, tokens, 1,
                                 weights.row_stride, 1, fastglu_dtype_size(weights.dtype), 0));
    if (dy != NULL) {
        if (dy->dtype != cdt)
            return fastglu_set_error(FASTGLU_ERROR_UNSUPPORTED_DTYPE,
                                     "%s: dy.dtype = %d differs from gate.dtype = %d", fn,
                                     (int)dy->dtype, (int)gate.dtype);
        TRY(fastglu_check_tensor(fn, &in[n_in++], "dy", dy->data, tokens, F, dy->row_stride, 1, es,
                                 0));
    }
    const int64_t W = dy != NULL ? 2 * F : F; /* the outputs' width: y [T, F] or dh [T, 2F] */
    const char *yname = dy != NULL ? "dh" : "y";
    if (y.data != NULL)
        TRY(fastglu_check_tensor(fn, &o[n_out++], yname, y.data, tokens, W, y.row_stride, 1, es,
                                 1));
    TRY(check_fp8_data(fn, &o[n_out++], "out->data", out->data, tokens, W));
    TRY(check_scales(fn, recipe, &o[n_out++], "out->scale", out->scale, tokens,
                     fastglu_fp8_blocks(W)));
    if (out->data_t.data != NULL) {
        TRY(check_fp8_data(fn, &o[n_out++], "out->data_t", out->data_t, W, tokens));
        if (recipe->scaling == FASTGLU_FP8_SCALING_BLOCK_1X128)
            TRY(check_scales(fn, recipe, &o[n_out++], "out->scale_t", out->scale_t, W,
                             fastglu_fp8_blocks(tokens)));
    }
    if ((recipe->scaling == FASTGLU_FP8_SCALING_TENSOR || out->data_t.data == NULL) &&
        out->scale_t.data != NULL)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: out->scale_t = %p must be NULL (%s)", fn, out->scale_t.data,
                                 out->data_t.data == NULL
                                     ? "no column-wise copy"
                                     : "one scale with FASTGLU_FP8_SCALING_TENSOR");
    TRY(reduction_regions(fn, call, dbias, dweights, tokens, F, o, &n_out));
    if (want_db || want_dw || (need_workspace && recipe->scaling == FASTGLU_FP8_SCALING_TENSOR)) {
        const size_t need =
            want_db || want_dw
                ? fastglu_glu_bwd_fp8_workspace_bytes(recipe, tokens, F, want_db, want_dw)
                : fastglu_glu_fwd_fp8_workspace_bytes(recipe);
        if (out->workspace == NULL || out->workspace_bytes < need ||
            (uintptr_t)out->workspace % 16 != 0)
            return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                     "%s: out->workspace = %p of %zu bytes: %s needs %zu bytes, "
                                     "16-byte aligned",
                                     fn, out->workspace, out->workspace_bytes,
                                     want_db || want_dw
                                         ? "dbias / dweights (fastglu_glu_bwd_fp8_workspace_bytes)"
                                         : "FASTGLU_FP8_SCALING_TENSOR",
                                     need);
        if (need > (size_t)INT64_MAX)
            return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                     "%s: the workspace would span more than 2^63 bytes", fn);
        o[n_out].name = "out->workspace";
        o[n_out].begin = (uintptr_t)out->workspace;
        o[n_out].bytes = need;
        o[n_out].rows = 1, o[n_out].row_bytes = 0, o[n_out].width_bytes = (int64_t)need;
        n_out++;
    }
    TRY(check_outputs_disjoint(fn, o, n_out, in, n_in));
    if (seen != NULL) {
        *n_seen = 0;
        for (int i = 0; i < n_in; ++i) seen[(*n_seen)++] = in[i];
        for (int i = 0; i < n_out; ++i) seen[(*n_seen)++] = o[i];
    }
    return FASTGLU_SUCCESS;
}

fastglu_status fastglu_check_glu_fp8(const char *fn, const fastglu_glu_params *params,
                                     const fastglu_fp8_recipe *recipe, const fastglu_tensor *dy,
                                     fastglu_tensor gate, fastglu_tensor up,
                                     const fastglu_tensor *scale_inv, fastglu_tensor bias,
                                     fastglu_tensor weights, fastglu_tensor y,
                                     const fastglu_tensor *dbias, const fastglu_tensor *dweights,
                                     const fastglu_fp8_out *out, int64_t tokens, int64_t F,
                                     int need_workspace, int *empty) {
    return check_glu_fp8(fn, params, recipe, dy, gate, up, scale_inv, bias, weights, y, dbias,
                         dweights, out, tokens, F, need_workspace, empty, NULL, NULL);
}

fastglu_status fastglu_check_quantize_fp8(const char *fn, const fastglu_fp8_recipe *recipe,
                                          fastglu_tensor x, const fastglu_fp8_out *out,
                                          int64_t rows, int64_t cols, int *empty) {
    fastglu_region in, o[4];
    int n_out = 0;
    if (recipe == NULL)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE, "%s: recipe is NULL", fn);
    if (out == NULL) return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE, "%s: out is NULL", fn);
    if (recipe->scaling != FASTGLU_FP8_SCALING_BLOCK_1X128 &&
        recipe->scaling != FASTGLU_FP8_SCALING_BLOCK_128X128)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: recipe->scaling = %d is not FASTGLU_FP8_SCALING_BLOCK_1X128 "
                                 "or _BLOCK_128X128",
                                 fn, (int)recipe->scaling);
    if ((int)recipe->scale_layout < 0 || (int)recipe->scale_layout > 1)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: recipe->scale_layout = %d is not FASTGLU_FP8_SCALES_MN_MAJOR "
                                 "or _ROW_MAJOR",
                                 fn, (int)recipe->scale_layout);
    if (rows < 0 || cols < 0 || rows > INT64_MAX / 2 || cols > INT64_MAX / 2)
        return fastglu_set_error(
            FASTGLU_ERROR_INVALID_VALUE,
            "%s: rows = %" PRId64 ", cols = %" PRId64 " must be >= 0 and < 2^62", fn, rows, cols);
    if (x.dtype != FASTGLU_DTYPE_BF16 && x.dtype != FASTGLU_DTYPE_FP16 &&
        x.dtype != FASTGLU_DTYPE_FP32)
        return fastglu_set_error(FASTGLU_ERROR_UNSUPPORTED_DTYPE,
                                 "%s: x.dtype = %d is not FASTGLU_DTYPE_BF16, FP16 or FP32", fn,
                                 (int)x.dtype);
    if (out->data.data == NULL && out->data_t.data == NULL)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: out->data and out->data_t are both NULL: nothing to write",
                                 fn);
    if (out->data.data == NULL && out->scale.data != NULL)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: out->scale = %p must be NULL without out->data", fn,
                                 out->scale.data);
    if (out->data_t.data == NULL && out->scale_t.data != NULL)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: out->scale_t = %p must be NULL without out->data_t", fn,
                                 out->scale_t.data);
    *empty = rows == 0 || cols == 0;
    if (*empty) return FASTGLU_SUCCESS;
    const int w128 = recipe->scaling == FASTGLU_FP8_SCALING_BLOCK_128X128;
    const int64_t rb = fastglu_fp8_blocks(rows), cb = fastglu_fp8_blocks(cols);
    TRY(fastglu_check_tensor(fn, &in, "x", x.data, rows, cols, x.row_stride, 1,
                             fastglu_dtype_size(x.dtype), 0));
    if (out->data.data != NULL) {
        TRY(check_fp8_data(fn, &o[n_out++], "out->data", out->data, rows, cols));
        TRY(check_scales(fn, recipe, &o[n_out++], "out->scale", out->scale, w128 ? rb : rows, cb));
    }
    if (out->data_t.data != NULL) {
        TRY(check_fp8_data(fn, &o[n_out++], "out->data_t", out->data_t, cols, rows));
        TRY(check_scales(fn, recipe, &o[n_out++], "out->scale_t", out->scale_t, w128 ? cb : cols,
                         rb));
    }
    return check_outputs_disjoint(fn, o, n_out, &in, 1);
}

/* fastglu_check_glu_fp8_store, and where the call has work, the copy's output regions (gate_fp8,
 * up_fp8 unless interleaved, scale_inv) into copy[*n_copy] when copy is not NULL */
static fastglu_status check_glu_fp8_store(const char *fn, const fastglu_glu_params *params,
                                          fastglu_tensor gate, fastglu_tensor up,
                                          fastglu_tensor gate_fp8, fastglu_tensor up_fp8,
                                          fastglu_tensor scale_inv, int64_t tokens, int64_t F,
                                          int *empty, fastglu_region *copy, int *n_copy) {
    fastglu_region in[2], o[3];
    int n_in = 0, n_out = 0;
    float scratch = 0.0f;
    if (params == NULL)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE, "%s: params is NULL", fn);
    if (!fastglu_is_compute_dtype(gate.dtype))
        return fastglu_set_error(FASTGLU_ERROR_UNSUPPORTED_DTYPE,
                                 "%s: gate.dtype = %d is not FASTGLU_DTYPE_FP32, _FP16 or _BF16",
                                 fn, (int)gate.dtype);
    if (fastglu_clamps(params)) { /* +inf cuts nothing: the plain recipe */
        const float c = fastglu_glu_clamp(params, gate.dtype);
        if (c >= 448.0f && isfinite(c))
            return fastglu_set_error(
                FASTGLU_ERROR_INVALID_VALUE,
                "%s: params->clamp_value = %g (%g in the operands' dtype): the "
                "fp8 copy needs a clamp below 448, float8_e4m3fn's largest "
                "value, to mark the elements the clamp cuts",
                fn, (double)params->clamp_value, (double)c);
    }
    /* the other params, the clamp against the dtype, up with INTERLEAVED: the forward's own
     * checks, on one element (the extents follow below) */
    TRY(fastglu_check_shape(fn, tokens, F, empty));
    const int64_t one = *empty ? 0 : 1;
    TRY(fastglu_check_glu_fwd(fn, params, gate.data, 0, up.data, 0, NULL, NULL, gate.dtype, 0,
                              &scratch, 0, NULL, 0, one, one, gate.dtype, empty));
    TRY(fastglu_check_shape(fn, tokens, F, empty));
    const int il = params->layout == FASTGLU_LAYOUT_INTERLEAVED;
    if (il && up_fp8.data != NULL)
        return fastglu_set_error(
            FASTGLU_ERROR_INVALID_VALUE,
            "%s: up_fp8.data = %p must be NULL with FASTGLU_LAYOUT_INTERLEAVED "
            "(gate_fp8 holds gate and up interleaved)",
            fn, up_fp8.data);
    if (!il && up.data != NULL && up.dtype != gate.dtype)
        return fastglu_set_error(FASTGLU_ERROR_UNSUPPORTED_DTYPE,
                                 "%s: up.dtype = %d differs from gate.dtype = %d", fn,
                                 (int)up.dtype, (int)gate.dtype);
    /* the outputs' dtypes, empty problem or not (their pointers only when there is work) */
    TRY(check_copy_dtypes(fn, gate_fp8.dtype, up_fp8.dtype, scale_inv.dtype, il));
    if (*empty) return FASTGLU_SUCCESS;
    const size_t es = fastglu_dtype_size(gate.dtype);
    const int64_t W = il ? 2 * F : F, nb = fastglu_glu_scale_blocks(params->layout, F);
    TRY(fastglu_check_tensor(fn, &in[n_in++], "gate", gate.data, tokens, W, gate.row_stride, 1, es,
                             0));
    TRY(check_fp8_data(fn, &o[n_out++], "gate_fp8", gate_fp8, tokens, W));
    if (!il) {
        TRY(fastglu_check_tensor(fn, &in[n_in++], "up", up.data, tokens, W, up.row_stride, 1, es,
                                 0));
        TRY(check_fp8_data(fn, &o[n_out++], "up_fp8", up_fp8, tokens, W));
    }
    TRY(fastglu_check_tensor(fn, &o[n_out++], "scale_inv", scale_inv.data, tokens, nb,
                             scale_inv.row_stride, 1, 4, 1));
    TRY(check_outputs_disjoint(fn, o, n_out, in, n_in));
    if (copy != NULL) {
        *n_copy = n_out;
        for (int i = 0; i < n_out; ++i) copy[i] = o[i];
    }
    return FASTGLU_SUCCESS;
}

fastglu_status fastglu_check_glu_fp8_store(const char *fn, const fastglu_glu_params *params,
                                           fastglu_tensor gate, fastglu_tensor up,
                                           fastglu_tensor gate_fp8, fastglu_tensor up_fp8,
                                           fastglu_tensor scale_inv, int64_t tokens, int64_t F,
                                           int *empty) {
    return check_glu_fp8_store(fn, params, gate, up, gate_fp8, up_fp8, scale_inv, tokens, F, empty,
                               NULL, NULL);
}

fastglu_status fastglu_check_glu_fwd_fp8_store(const char *fn, const fastglu_glu_params *params,
                                               const fastglu_glu_operands *operands,
                                               fastglu_tensor output, fastglu_tensor gate_fp8,
                                               fastglu_tensor up_fp8, fastglu_tensor scale_inv,
                                               int64_t tokens, int64_t F, int *empty) {
    const fastglu_tensor none = {NULL, FASTGLU_DTYPE_FP8_E4M3, 0};
    fastglu_region out, copy[3], in[2];
    int n = 0, n_in = 0;
    if (operands == NULL)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE, "%s: operands is NULL", fn);
    /* the forward's checks (output against the operands), then the copy's (its outputs against
     * the operands and each other), then output against the copy's outputs */
    TRY(fastglu_check_glu_fwd_descriptors(fn, operands, &output, &none));
    TRY(fastglu_check_glu_fwd(fn, params, FASTGLU_GLU_FWD_FIELDS(operands, output, none, tokens, F),
                              empty));
    TRY(check_glu_fp8_store(fn, params, operands->gate, operands->up, gate_fp8, up_fp8, scale_inv,
                            tokens, F, empty, copy, &n));
    if (*empty) return FASTGLU_SUCCESS;
    TRY(fastglu_check_tensor(fn, &out, "output", output.data, tokens, F, output.row_stride, 1,
                             fastglu_dtype_size(output.dtype), 1));
    /* the forward's other inputs, which the copy's check does not see */
    if (operands->bias.data != NULL)
        TRY(fastglu_check_tensor(fn, &in[n_in++], "bias", operands->bias.data, 1, 2 * F, 2 * F, 1,
                                 fastglu_dtype_size(output.dtype), 0));
    if (operands->weights.data != NULL)
        TRY(fastglu_check_tensor(fn, &in[n_in++], "weights", operands->weights.data, tokens, 1,
                                 operands->weights.row_stride, 1,
                                 fastglu_dtype_size(operands->weights.dtype), 0));
    for (int i = 0; i < n; ++i) {
        TRY(fastglu_check_disjoint(fn, &copy[i], &out));
        for (int k = 0; k < n_in; ++k) TRY(fastglu_check_disjoint(fn, &copy[i], &in[k]));
    }
    return FASTGLU_SUCCESS;
}

fastglu_status fastglu_check_glu_fwd_fp8_copy(
    const char *fn, const fastglu_glu_params *params, const fastglu_fp8_recipe *recipe,
    fastglu_tensor gate, fastglu_tensor up, fastglu_tensor bias, fastglu_tensor weights,
    fastglu_tensor y, const fastglu_fp8_out *out, fastglu_tensor gate_fp8, fastglu_tensor up_fp8,
    fastglu_tensor scale_inv, int64_t tokens, int64_t F, int need_workspace, int *empty) {
    fastglu_region seen[14], copy[3];
    int n_seen = 0, n = 0;
    TRY(check_glu_fp8(fn, params, recipe, NULL, gate, up, NULL, bias, weights, y, NULL, NULL, out,
                      tokens, F, need_workspace, empty, seen, &n_seen));
    TRY(check_glu_fp8_store(fn, params, gate, up, gate_fp8, up_fp8, scale_inv, tokens, F, empty,
                            copy, &n));
    if (*empty) return FASTGLU_SUCCESS;
    for (int i = 0; i < n; ++i)
        for (int k = 0; k < n_seen; ++k) TRY(fastglu_check_disjoint(fn, &copy[i], &seen[k]));
    return FASTGLU_SUCCESS;
}

void fastglu_fp8_zero_sums(fastglu_tensor gate, fastglu_tensor dbias, fastglu_tensor dweights,
                           int64_t tokens, int64_t F) {
    if (dbias.data != NULL && F > 0)
        memset(dbias.data, 0, (size_t)(2 * F) * fastglu_dtype_size(gate.dtype));
    if (dweights.data != NULL && tokens > 0)
        memset(dweights.data, 0, (size_t)tokens * fastglu_dtype_size(dweights.dtype));
}

#ifndef FASTGLU_HAVE_CUDA
/* Without CUDA: the arguments validated as with it; an empty problem succeeds (nothing to do), as
 * the other entry points of builds without CUDA. */
static fastglu_status no_cuda(const char *fn) {
    return fastglu_set_error(FASTGLU_ERROR_NO_CUDA, "%s: the library was built without CUDA", fn);
}

fastglu_status fastglu_glu_fwd_fp8_cuda(const fastglu_glu_params *params,
                                        const fastglu_fp8_recipe *recipe, fastglu_tensor gate,
                                        fastglu_tensor up, fastglu_tensor bias,
                                        fastglu_tensor weights, fastglu_tensor y,
                                        const fastglu_fp8_out *out, int64_t tokens, int64_t F,
                                        void *stream) {
    const char *fn = "fastglu_glu_fwd_fp8_cuda";
    int empty;
    (void)stream;
    TRY(fastglu_check_glu_fp8(fn, params, recipe, NULL, gate, up, NULL, bias, weights, y, NULL,
                              NULL, out, tokens, F, 1, &empty));
    return empty ? FASTGLU_SUCCESS : no_cuda(fn);
}

fastglu_status fastglu_glu_bwd_fp8_cuda(const fastglu_glu_params *params,
                                        const fastglu_fp8_recipe *recipe, fastglu_tensor dy,
                                        fastglu_tensor gate, fastglu_tensor up, fastglu_tensor bias,
                                        fastglu_tensor weights, fastglu_tensor dh,
                                        fastglu_tensor dbias, fastglu_tensor dweights,
                                        const fastglu_fp8_out *out, int64_t tokens, int64_t F,
                                        void *stream) {
    const char *fn = "fastglu_glu_bwd_fp8_cuda";
    int empty;
    (void)stream;
    TRY(fastglu_check_glu_fp8(fn, params, recipe, &dy, gate, up, NULL, bias, weights, dh, &dbias,
                              &dweights, out, tokens, F, 1, &empty));
    if (!empty) return no_cuda(fn);
    /* the sums over nothing, as the CUDA backend writes them (a build without CUDA has no device
     * memory: the pointers it is given are host memory, as fastglu_glu_bwd_cuda's stub takes them) */
    fastglu_fp8_zero_sums(gate, dbias, dweights, tokens, F);
    return FASTGLU_SUCCESS;
}

fastglu_status fastglu_glu_bwd_fp8_saved_blockwise_cuda(
    const fastglu_glu_params *params, const fastglu_fp8_recipe *recipe, fastglu_tensor dy,
    fastglu_tensor gate_fp8, fastglu_tensor up_fp8, fastglu_tensor scale_inv, fastglu_tensor bias,
    fastglu_tensor weights, fastglu_tensor dh, fastglu_tensor dbias, fastglu_tensor dweights,
    const fastglu_fp8_out *out, int64_t tokens, int64_t F, void *stream) {
    const char *fn = "fastglu_glu_bwd_fp8_saved_blockwise_cuda";
    int empty;
    (void)stream;
    TRY(fastglu_check_glu_fp8(fn, params, recipe, &dy, gate_fp8, up_fp8, &scale_inv, bias, weights,
                              dh, &dbias, &dweights, out, tokens, F, 1, &empty));
    if (!empty) return no_cuda(fn);
    fastglu_fp8_zero_sums(dy, dbias, dweights, tokens, F); /* (as fastglu_glu_bwd_fp8_cuda's) */
    return FASTGLU_SUCCESS;
}

fastglu_status fastglu_glu_fp8_store_blockwise_cuda(const fastglu_glu_params *params,
                                                    fastglu_tensor gate, fastglu_tensor up,
                                                    fastglu_tensor gate_fp8, fastglu_tensor up_fp8,
                                                    fastglu_tensor scale_inv, int64_t tokens,
                                                    int64_t F, void *stream) {
    const char *fn = "fastglu_glu_fp8_store_blockwise_cuda";
    int empty;
    (void)stream;
    TRY(fastglu_check_glu_fp8_store(fn, params, gate, up, gate_fp8, up_fp8, scale_inv, tokens, F,
                                    &empty));
    return empty ? FASTGLU_SUCCESS : no_cuda(fn);
}

fastglu_status fastglu_glu_fwd_fp8_copy_blockwise_cuda(
    const fastglu_glu_params *params, const fastglu_fp8_recipe *recipe, fastglu_tensor gate,
    fastglu_tensor up, fastglu_tensor bias, fastglu_tensor weights, fastglu_tensor y,
    const fastglu_fp8_out *out, fastglu_tensor gate_fp8, fastglu_tensor up_fp8,
    fastglu_tensor scale_inv, int64_t tokens, int64_t F, void *stream) {
    const char *fn = "fastglu_glu_fwd_fp8_copy_blockwise_cuda";
    int empty;
    (void)stream;
    TRY(fastglu_check_glu_fwd_fp8_copy(fn, params, recipe, gate, up, bias, weights, y, out,
                                       gate_fp8, up_fp8, scale_inv, tokens, F, 1, &empty));
    return empty ? FASTGLU_SUCCESS : no_cuda(fn);
}
fastglu_status fastglu_glu_fwd_fp8_store_blockwise_cuda(
    const fastglu_glu_params *params, const fastglu_glu_operands *operands, fastglu_tensor output,
    fastglu_tensor gate_fp8, fastglu_tensor up_fp8, fastglu_tensor scale_inv, int64_t tokens,
    int64_t F, void *stream) {
    const char *fn = "fastglu_glu_fwd_fp8_store_blockwise_cuda";
    int empty;
    (void)stream;
    TRY(fastglu_check_glu_fwd_fp8_store(fn, params, operands, output, gate_fp8, up_fp8, scale_inv,
                                        tokens, F, &empty));
    return empty ? FASTGLU_SUCCESS : no_cuda(fn);
}

fastglu_status fastglu_quantize_fp8_cuda(const fastglu_fp8_recipe *recipe, fastglu_tensor x,
                                         const fastglu_fp8_out *out, int64_t rows, int64_t cols,
                                         void *stream) {
    const char *fn = "fastglu_quantize_fp8_cuda";
    int empty;
    (void)stream;
    TRY(fastglu_check_quantize_fp8(fn, recipe, x, out, rows, cols, &empty));
    return empty ? FASTGLU_SUCCESS : no_cuda(fn);
}
#endif
