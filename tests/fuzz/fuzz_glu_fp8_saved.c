/*
 * fuzz_glu_fp8_saved.c — a libFuzzer harness for fastglu_glu_bwd_fp8_saved_blockwise_cpu (the FP8
 * GLU backward reading its operands from their blockwise FP8 copy; its validation is
 * fastglu_glu_bwd_fp8_*'s with the copy's codes and scales); build with clang
 * -fsanitize=fuzzer,address,undefined (see tests/fuzz/run.sh).
 *
 * Each input picks the call's dtype (invalid ones included), the layout (split with the codes as two
 * tensors or as the halves of one [T, 2F] row, interleaved, an invalid code), the activation,
 * clamp_value, offset and gate multiplier, T and F (0 .. 200, block boundaries often), the recipe
 * (1 x 128 blocks or per-tensor, invalid codes, both scale layouts, power-of-two scales), the
 * column-wise copy and dh or not, a bias and per-token weights and their gradients or not (a
 * gradient without its operand too), the codes (every byte, NaN included) and the scales (normal,
 * zero, inf, NaN, negative), every tensor's row stride (zero, too small, exact, padded), offsets,
 * misaligned and NULL pointers, the workspace (exact, short, NULL, misaligned), and aliasing (an
 * output over the codes, the scales, dy or the bias; two outputs over each other). Every buffer is
 * its own allocation, exactly as large as its description; outputs start as a sentinel. Then:
 *  - a call that fails must leave every buffer byte-identical;
 *  - a call the harness knows to be illegal that succeeds on a non-empty problem aborts;
 *  - a call that succeeds must leave its inputs unchanged; dh, the codes and the scales, padding
 *    included, must be byte-identical (NaNs' signs and payloads aside) to the two passes it
 *    replaces run into copies:
 *    fastglu_glu_bwd_cpu decoding the copy (scale_1x128) into dh, then the recipe (src/
 *    fp8_recipe.h) on that dh; with the fp32 dtype, where the decoded operands are fp32 values,
 *    dbias and dweights byte-identical to fastglu_glu_bwd_fp8_cpu's on the decoded operands (the
 *    same summation order); otherwise dbias and dweights written within [2F] and [T] only.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_recipe.h"
#include "fuzz_common.h"

static long n_ok, n_err;

/* a [rows, cols] tensor of es-byte elements: its own allocation (an offset before it, the
 * stride's padding); kind 0: values of dtype dt, 1: the output sentinel, 2: random codes, 3: scales */
static void arg_make(reader *r, arg *a, int64_t rows, int64_t cols, int dt, int kind, uint64_t *g) {
    a->rs = pick_stride(r, cols);
    a->off = (int64_t)(next(r) % 3);
    const int misalign = next(r) % 48 == 0;
    buf_make(&a->b, a->off + span(rows, cols, a->rs, 1), esize(dt));
    for (int64_t e = 0; e < a->b.n; ++e) {
        *g = *g * 6364136223846793005ull + 1442695040888963407ull;
        const unsigned k = (unsigned)(*g >> 56), m = (unsigned)(*g >> 40) & 0xffff;
        if (kind == 1) {
            memset(a->b.p + e * a->b.es, 0xa5, a->b.es);
        } else if (kind == 2) {
            a->b.p[e] = (unsigned char)m;
        } else if (kind == 3) {
            const float s = k % 64 == 0   ? 0.0f
                            : k % 64 == 1 ? INFINITY
                            : k % 64 == 2 ? NAN
                            : k % 64 == 3 ? -0.5f
                                          : (float)(m % 1000 + 1) * 1e-3f;
            if (dt == FASTGLU_DTYPE_FP32)
                memcpy(a->b.p + e * 4, &s, 4);
            else
                store(dt, a->b.p, e, s);
        } else {
            const double base = ((double)(int)(m % 200) - 100.0) / 16.0;
            store(dt, a->b.p, e, k % 64 == 0 ? NAN : k % 64 == 1 ? INFINITY : base);
        }
    }
    a->b.p[a->b.n * a->b.es] = 0x5a;
    a->ptr = next(r) % 64 == 0 ? NULL : a->b.p + a->off * a->b.es + misalign;
}

/* a copy of a's buffer as it was before the call */
static unsigned char *before_copy(const arg *a) {
    const size_t n = (size_t)a->b.n * a->b.es + 1;
    unsigned char *c = malloc(n);
    memcpy(c, a->b.before, n);
    return c;
}

static uint32_t umax(uint32_t a, uint32_t b) { return a > b ? a : b; }

/* element e of a buffer of dtype dt is a NaN */
static int nan_at(int dt, const unsigned char *p, int64_t e) {
    if (dt == FASTGLU_DTYPE_FP8_E4M3) return (p[e] & 0x7f) == 0x7f;
    if (dt == FASTGLU_DTYPE_FP32) {
        float f;
        memcpy(&f, p + 4 * e, 4);
        return isnan(f);
    }
    uint16_t h;
    memcpy(&h, p + 2 * e, 2);
    return (h & 0x7fff) > (dt == FASTGLU_DTYPE_BF16 ? 0x7f80 : 0x7c00);
}

/* a's bytes equal to want's (the spare byte included), but for NaNs, whose sign and payload IEEE
 * leaves to the order of the operations (two NaN operands), which the two paths need not share */
static int same_but_nans(const arg *a, const unsigned char *want, int dt) {
    if (!a->b.p) return 1;
    for (int64_t e = 0; e < a->b.n; ++e)
        if (memcmp(a->b.p + e * a->b.es, want + e * a->b.es, a->b.es) &&
            !(nan_at(dt, a->b.p, e) && nan_at(dt, want, e)))
            return 0;
    return a->b.p[a->b.n * a->b.es] == want[a->b.n * a->b.es];
}

static float *scale_at(float *s, int tensor, int mn, int64_t ld, int64_t i, int64_t b) {
    return tensor ? s : mn ? s + b * ld + i : s + i * ld + b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reader rd = {data, size}, *r = &rd;
    const unsigned dsel = next(r) % 16;
    const int dt = dsel < 14 ? (int)(dsel % 3) : dsel == 14 ? FASTGLU_DTYPE_FP8_E4M3 : 9;
    int il, two; /* split: the codes as two tensors (else one [T, 2F] row) */
    fastglu_glu_params p = pick_glu_params(r, &il, &two);
    if (next(r) % 8 == 0) p.gate_multiplier = 1.25f;
    const unsigned ssel = next(r) % 16;
    fastglu_fp8_recipe rc = {ssel < 10   ? FASTGLU_FP8_SCALING_BLOCK_1X128
                             : ssel < 15 ? FASTGLU_FP8_SCALING_TENSOR
                                         : (fastglu_fp8_scaling)(next(r) % 2 ? 2 : 7),
                             next(r) % 2 ? FASTGLU_FP8_SCALES_MN_MAJOR
                                         : FASTGLU_FP8_SCALES_ROW_MAJOR,
                             (int)(next(r) % 4 == 0)};
    const int tensor = rc.scaling == FASTGLU_FP8_SCALING_TENSOR;
    const int mn = rc.scale_layout == FASTGLU_FP8_SCALES_MN_MAJOR;
    const int64_t T = pick_dim(r), F = pick_dim(r);
    const int64_t W = 2 * F, nbs = il ? (W + 127) / 128 : 2 * ((F + 127) / 128);
    const int64_t nb = (W + 127) / 128, nbt = (T + 127) / 128;
    uint64_t g = next(r) | (uint64_t)next(r) << 8 | (uint64_t)next(r) << 16;
    const int vdt = valid_dtype(dt) ? dt : FASTGLU_DTYPE_BF16;
    const size_t es = esize(dt);

    /* inputs: dy [T, F], the codes (one [T, 2F] row or two [T, F]), scales [T, nbs] fp32, bias
     * [2F], weights [T] */
    arg dy, c8, u8, sc, bias, w;
    memset(&u8, 0, sizeof u8), memset(&bias, 0, sizeof bias), memset(&w, 0, sizeof w);
    arg_make(r, &dy, T, F, dt, 0, &g);
    arg_make(r, &c8, T, two ? F : W, FASTGLU_DTYPE_FP8_E4M3, 2, &g);
    if (two) arg_make(r, &u8, T, F, FASTGLU_DTYPE_FP8_E4M3, 2, &g);
    const int sdt = next(r) % 32 == 0 ? FASTGLU_DTYPE_BF16 : FASTGLU_DTYPE_FP32;
    arg_make(r, &sc, T, nbs, sdt, 3, &g);
    const int has_bias = next(r) % 3 == 0, has_w = next(r) % 3 == 0;
    const int wdt = next(r) % 2 ? FASTGLU_DTYPE_FP32 : FASTGLU_DTYPE_BF16;
    if (has_bias) arg_make(r, &bias, 1, W, dt, 0, &g), bias.rs = 1;
    if (has_w) arg_make(r, &w, T, 1, wdt, 0, &g);
    void *u8_ptr = il ? NULL : two ? u8.ptr : c8.ptr ? (uint8_t *)c8.ptr + F : NULL;
    const int64_t u8_rs = two ? u8.rs : c8.rs;
    if (next(r) % 64 == 0) u8_ptr = il ? c8.ptr : NULL; /* up's codes given / missing */
    /* the codes' dtype: the call's is refused */
    const int gdt = next(r) % 64 == 0 ? vdt : FASTGLU_DTYPE_FP8_E4M3;

    /* outputs: dh [T, 2F], data [T, 2F] and its scales, data_t [2F, T] and its scales, dbias [2F],
     * dweights [T], the workspace */
    arg dh, d, s, dtr, st, db, dw, ws;
    memset(&dh, 0, sizeof dh), memset(&dtr, 0, sizeof dtr), memset(&st, 0, sizeof st);
    memset(&db, 0, sizeof db), memset(&dw, 0, sizeof dw), memset(&ws, 0, sizeof ws);
    const int want_dh = next(r) % 3 == 0, colwise = next(r) % 2;
    const int ddt = next(r) % 32 == 0 ? (vdt == 0 ? 1 : 0) : vdt;
    if (want_dh) arg_make(r, &dh, T, W, ddt, 1, &g);
    arg_make(r, &d, T, W, FASTGLU_DTYPE_FP8_E4M3, 1, &g);
    if (tensor)
        arg_make(r, &s, 1, 1, FASTGLU_DTYPE_FP32, 1, &g);
    else if (mn)
        arg_make(r, &s, nb, T, FASTGLU_DTYPE_FP32, 1, &g);
    else
        arg_make(r, &s, T, nb, FASTGLU_DTYPE_FP32, 1, &g);
    if (colwise) {
        arg_make(r, &dtr, W, T, FASTGLU_DTYPE_FP8_E4M3, 1, &g);
        if (!tensor || next(r) % 32 == 0) { /* scale_t with per-tensor scaling: refused */
            if (mn)
                arg_make(r, &st, nbt, W, FASTGLU_DTYPE_FP32, 1, &g);
            else
                arg_make(r, &st, W, nbt, FASTGLU_DTYPE_FP32, 1, &g);
        }
    }
    const int want_db = (has_bias || next(r) % 32 == 0) && next(r) % 2;
    const int want_dw = (has_w || next(r) % 32 == 0) && next(r) % 2;
    if (want_db) arg_make(r, &db, 1, W, vdt, 1, &g), db.rs = 1;
    if (want_dw) arg_make(r, &dw, 1, T, wdt, 1, &g), dw.rs = 1;
    const size_t need = fastglu_glu_bwd_fp8_workspace_bytes(&rc, T, F, want_db, want_dw);
    const unsigned wsel = next(r) % 16;
    const size_t ws_bytes = wsel == 0 ? 0 : wsel == 1 && need >= 16 ? need - 16 : need + 16;
    buf_make(&ws.b, (int64_t)ws_bytes, 1);
    memset(ws.b.p, 0x77, ws_bytes + 1);
    ws.ptr = wsel == 0 ? NULL : wsel == 2 ? ws.b.p + 4 : ws.b.p;
    /* aliasing */
    int illegal = 0;
    const unsigned al = next(r) % 24;
    if (al == 0 && d.ptr && c8.ptr) {
        d.ptr = c8.ptr, illegal = 1;
    } else if (al == 1 && s.ptr && sc.ptr) {
        s.ptr = sc.ptr, illegal = 1;
    } else if (al == 2 && want_dh && dh.ptr && dy.ptr) {
        dh.ptr = dy.ptr, illegal = 1;
    } else if (al == 3 && colwise && dtr.ptr && sc.ptr) {
        dtr.ptr = sc.ptr, illegal = 1;
    } else if (al == 4 && want_db && db.ptr && has_bias && bias.ptr) {
        db.ptr = bias.ptr, illegal = 1;
    } else if (al == 5 && colwise && dtr.ptr && d.ptr) {
        dtr.ptr = d.ptr, illegal = 1;
    } else if (al == 6 && ws.ptr && u8_ptr && ((want_db && db.ptr) || (want_dw && dw.ptr))) {
        /* (the CPU backend uses the workspace for the sums' partials only) */
        ws.ptr = u8_ptr, illegal = 1;
    }

    const fastglu_tensor dyt = {dy.ptr, (fastglu_dtype)dt, dy.rs},
                         g8t = {c8.ptr, (fastglu_dtype)gdt, c8.rs},
                         u8t = {u8_ptr, (fastglu_dtype)gdt, u8_rs},
                         sct = {sc.ptr, (fastglu_dtype)sdt, sc.rs},
                         bt = {has_bias ? bias.ptr : NULL, (fastglu_dtype)dt, 1},
                         wt = {has_w ? w.ptr : NULL, (fastglu_dtype)wdt, w.rs},
                         dht = {want_dh ? dh.ptr : NULL, (fastglu_dtype)ddt, dh.rs},
                         dbt = {want_db ? db.ptr : NULL, (fastglu_dtype)vdt, 1},
                         dwt = {want_dw ? dw.ptr : NULL, (fastglu_dtype)wdt, 1};
    fastglu_fp8_out out;
    memset(&out, 0, sizeof out);
    out.data = (fastglu_tensor){d.ptr, FASTGLU_DTYPE_FP8_E4M3, d.rs};
    out.scale = (fastglu_tensor){s.ptr, FASTGLU_DTYPE_FP32, s.rs};
    out.data_t = (fastglu_tensor){colwise ? dtr.ptr : NULL, FASTGLU_DTYPE_FP8_E4M3, dtr.rs};
    out.scale_t = (fastglu_tensor){st.b.p ? st.ptr : NULL, FASTGLU_DTYPE_FP32, st.rs};
    out.workspace = ws.ptr, out.workspace_bytes = ws_bytes;
    arg *all[] = {&dy, &c8, &u8, &sc, &bias, &w, &dh, &d, &s, &dtr, &st, &db, &dw, &ws};
    enum { N_ALL = 14, N_IN = 6 };
    for (int k = 0; k < N_ALL; ++k)
        if (all[k]->b.p) buf_snap(&all[k]->b);

    const fastglu_status status = fastglu_glu_bwd_fp8_saved_blockwise_cpu(
        &p, &rc, dyt, g8t, u8t, sct, bt, wt, dht, dbt, dwt, &out, T, F);
    if (status != FASTGLU_SUCCESS) {
        for (int k = 0; k < N_ALL; ++k) check_unchanged(&all[k]->b);
        n_err++;
        goto done;
    }
    if (illegal && T > 0 && F > 0) abort();
    n_ok++;
    for (int k = 0; k < N_IN; ++k) check_unchanged(&all[k]->b);
    /* what the call was asked for: a NULL pointer is an absent optional output */
    const int has_dh = dht.data != NULL, has_t = out.data_t.data != NULL;
    const int has_db = dbt.data != NULL, has_dw = dwt.data != NULL;
    if (T == 0 || F == 0) { /* only the sums over nothing */
        for (int k = 6; k < 11; ++k) check_unchanged(&all[k]->b);
        goto done;
    }
    {
        /* pass 1: dh [T, 2F] (dense) decoded from the copy by fastglu_glu_bwd_cpu */
        unsigned char *ref = malloc((size_t)(T * W) * es);
        fastglu_glu_operands o;
        memset(&o, 0, sizeof o);
        o.gate = g8t, o.up = u8t, o.scale_inv = sct, o.scale_1x128 = 1;
        o.bias = bt, o.weights = wt;
        fastglu_glu_grads gr;
        memset(&gr, 0, sizeof gr);
        gr.d_gate = (fastglu_tensor){ref, (fastglu_dtype)dt, W};
        gr.d_up = (fastglu_tensor){il ? NULL : ref + F * es, (fastglu_dtype)dt, W};
        const fastglu_workspace none_ws = {NULL, 0};
        if (fastglu_glu_bwd_cpu(&p, dyt, 1, &o, &gr, none_ws, T, F) != FASTGLU_SUCCESS) abort();
        unsigned char *edh = has_dh ? before_copy(&dh) : NULL, *ed = before_copy(&d);
        unsigned char *es_ = before_copy(&s), *edt = has_t ? before_copy(&dtr) : NULL;
        unsigned char *est = st.b.p ? before_copy(&st) : NULL;
        for (int64_t t = 0; has_dh && t < T; ++t)
            memcpy((unsigned char *)moved(&dh, edh, dh.ptr) + (size_t)(t * dh.rs) * es,
                   ref + (size_t)(t * W) * es, (size_t)W * es);
        /* pass 2: the recipe on it (src/fp8_recipe.h) */
        uint32_t tam = 0;
        for (int64_t i = 0; i < T * W; ++i)
            tam = umax(tam, fastglu_abs_bits((float)load(dt, ref, i)));
        const float ts = fastglu_fp8_scale(tam, rc.pow2_scales);
        float *sp = moved(&s, es_, s.ptr);
        if (tensor) *sp = ts;
        unsigned char *dp = moved(&d, ed, d.ptr);
        for (int64_t t = 0; t < T; ++t)
            for (int64_t b = 0; b < nb; ++b) {
                const int64_t n = W - 128 * b < 128 ? W - 128 * b : 128;
                uint32_t am = 0;
                for (int64_t j = 0; j < n; ++j)
                    am = umax(am, fastglu_abs_bits((float)load(dt, ref, t * W + 128 * b + j)));
                const float sb = tensor ? ts : fastglu_fp8_scale(am, rc.pow2_scales);
                if (!tensor) *scale_at(sp, 0, mn, s.rs, t, b) = sb;
                for (int64_t j = 0; j < n; ++j)
                    dp[t * d.rs + 128 * b + j] =
                        fastglu_fp8_quantise((float)load(dt, ref, t * W + 128 * b + j), sb);
            }
        if (has_t) {
            unsigned char *tp = moved(&dtr, edt, dtr.ptr);
            float *stp = est ? moved(&st, est, st.ptr) : NULL;
            for (int64_t k = 0; k < W; ++k)
                for (int64_t b = 0; b < nbt; ++b) {
                    const int64_t n = T - 128 * b < 128 ? T - 128 * b : 128;
                    uint32_t am = 0;
                    for (int64_t i = 0; i < n; ++i)
                        am =
                            umax(am, fastglu_abs_bits((float)load(dt, ref, (128 * b + i) * W + k)));
                    const float sb = tensor ? ts : fastglu_fp8_scale(am, rc.pow2_scales);
                    if (!tensor) *scale_at(stp, 0, mn, st.rs, k, b) = sb;
                    for (int64_t i = 0; i < n; ++i)
                        tp[k * dtr.rs + 128 * b + i] =
                            fastglu_fp8_quantise((float)load(dt, ref, (128 * b + i) * W + k), sb);
                }
        }
        if ((edh && !same_but_nans(&dh, edh, dt)) ||
            !same_but_nans(&d, ed, FASTGLU_DTYPE_FP8_E4M3) ||
            !same_but_nans(&s, es_, FASTGLU_DTYPE_FP32) ||
            (edt && !same_but_nans(&dtr, edt, FASTGLU_DTYPE_FP8_E4M3)) ||
            (est && !same_but_nans(&st, est, FASTGLU_DTYPE_FP32)))
            abort();
        free(edh), free(ed), free(es_), free(edt), free(est);
        /* the sums: fp32, byte-identical to fastglu_glu_bwd_fp8_cpu on the decoded operands (fp32
         * values); otherwise written within [2F] / [T] only */
        if ((has_db || has_dw) && dt == FASTGLU_DTYPE_FP32) {
            float *hd = malloc((size_t)(T * W) * 4);
            for (int64_t t = 0; t < T; ++t)
                for (int64_t k = 0; k < W; ++k) {
                    const int up = il ? (int)(k & 1) : k >= F;
                    const int64_t j = il ? k >> 1 : up ? k - F : k;
                    const unsigned char code =
                        il ? ((const unsigned char *)c8.ptr)[t * c8.rs + k]
                           : ((const unsigned char *)(up ? u8_ptr
                                                         : c8.ptr))[t * (up ? u8_rs : c8.rs) + j];
                    const int64_t b = il ? k >> 7 : (j >> 7) + (up ? (F + 127) >> 7 : 0);
                    hd[t * W + k] =
                        fastglu_e4m3_to_f32(code) * ((const float *)sc.ptr)[t * sc.rs + b];
                }
            unsigned char *edb = has_db ? before_copy(&db) : NULL;
            unsigned char *edw = has_dw ? before_copy(&dw) : NULL;
            unsigned char *wsc = malloc(need ? need : 1), *x8 = malloc((size_t)(T * W)),
                          *xs = malloc((size_t)(T * nb) * 4 + 4);
            fastglu_fp8_out o2;
            memset(&o2, 0, sizeof o2);
            o2.data = (fastglu_tensor){x8, FASTGLU_DTYPE_FP8_E4M3, W};
            o2.scale = (fastglu_tensor){xs, FASTGLU_DTYPE_FP32, tensor ? 1 : nb};
            fastglu_fp8_recipe r2 = rc;
            r2.scale_layout = FASTGLU_FP8_SCALES_ROW_MAJOR;
            o2.workspace = wsc, o2.workspace_bytes = need;
            const fastglu_tensor hg = {hd, FASTGLU_DTYPE_FP32, W},
                                 hu = {il ? NULL : hd + F, FASTGLU_DTYPE_FP32, W},
                                 db2 = {has_db ? moved(&db, edb, db.ptr) : NULL, FASTGLU_DTYPE_FP32,
                                        1},
                                 dw2 = {has_dw ? moved(&dw, edw, dw.ptr) : NULL, (fastglu_dtype)wdt,
                                        1},
                                 none = {NULL, FASTGLU_DTYPE_FP32, 0};
            if (fastglu_glu_bwd_fp8_cpu(&p, &r2, dyt, hg, hu, bt, wt, none, db2, dw2, &o2, T, F) !=
                FASTGLU_SUCCESS)
                abort();
            if ((edb && !same_but_nans(&db, edb, dt)) || (edw && !same_but_nans(&dw, edw, wdt)))
                abort();
            free(hd), free(edb), free(edw), free(wsc), free(x8), free(xs);
        } else {
            if (has_db) mark(&db.b, db.off, 1, W, W);
            if (has_dw) mark(&dw.b, dw.off, 1, T, T);
            check_unmarked(&db.b), check_unmarked(&dw.b);
        }
        free(ref);
    }
done:
    for (int k = 0; k < N_ALL; ++k) buf_free(&all[k]->b);
    return 0;
}

#ifdef FASTGLU_FUZZ_STANDALONE
int main(int argc, char **argv) {
    static uint8_t input[4096];
    const long runs =
        fuzz_standalone("fuzz_glu_fp8_saved_standalone", argc, argv, input, sizeof input, 80);
    printf("fuzz_glu_fp8_saved_standalone: %ld inputs, no failure (%ld computed, %ld rejected)\n",
           runs, n_ok, n_err);
    return 0;
}
#endif
