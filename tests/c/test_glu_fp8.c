/* test_glu_fp8.c — fastglu_glu_fwd_fp8_* (the activation quantised to float8_e4m3fn, include/
 * fastglu.h "The activation quantised to FP8") against a float64 implementation of the recipe
 * applied to the backend's own y (fastglu_glu_fwd_* in dtype, which the recipe quantises): scales
 * bit for bit, data within one e4m3 step (the reference divides in float64, the library in fp32)
 * and equal to the library's fp32 arithmetic run on the host (fp8_recipe.h), the fused y bit for bit, every byte around the outputs (row and scale padding) left as the
 * sentinel. Every variant of the family (activations, bias, per-token weights, clamp, offset,
 * multipliers, INTERLEAVED), F = 1, 3, 1408, 2880, 3420, 5632, T = 1, 257, 8193, padded, contiguous
 * and 16-byte-aligned strided rows (the CUDA kernel's element and 16-byte paths), both scale
 * layouts, power-of-two scales, per-tensor scaling, NaN / inf / all-zero blocks, fresh random
 * inputs each run.
 *
 * The backward (fastglu_glu_bwd_fp8_*) likewise: dh [T, 2F] in h's layout against the
 * quantisation of fastglu_glu_bwd_*'s d_gate / d_up; with bias / weights (every recipe but the
 * third, which leaves them out), its dbias / dweights against a float64 reference of the sums and
 * against fastglu_glu_bwd_*'s, within a tolerance that grows with the number of terms, with the
 * bytes around them untouched, and a second run over other workspace garbage bit for bit; the
 * empty problem's zero sums.
 *
 * The backward from the blockwise copy (fastglu_glu_bwd_fp8_saved_blockwise_*): the copy made by
 * fastglu_glu_fp8_store_blockwise_cpu from the same random operands, its codes' rows padded (odd,
 * dense, 16 more bytes); dh against the quantisation of fastglu_glu_bwd_*'s from that copy
 * (scale_1x128), the sums against float64 on the decoded copy and against fastglu_glu_bwd_*'s.
 *
 * Built twice: test_glu_fp8_cpu, and with FP8_TEST_CUDA test_glu_fp8_cuda (device memory, a
 * non-default stream; exits 77, CTest's skip, without a usable GPU).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "convert.h"
#include "fastglu.h"
#include "fp8_recipe.h"
#include "glu_flat.h"
#include "glu_reference.h"

#include "fp8_test_util.h"

#ifdef FP8_TEST_CUDA
/* device memory of n bytes and 256 more, every byte 0x7f (fp32 and bf16 3.4e38, fp16 NaN) until
 * written: an input's elements past its end are poison, which a read outside the operands would
 * carry into an amax and a scale */
static void *dmem(size_t n) {
    void *p;
    check_cuda(cudaMalloc(&p, n + 256), "cudaMalloc");
    check_cuda(cudaMemset(p, 0x7f, n + 256), "cudaMemset");
    /* cudaMemset runs on the legacy default stream, which the test's non-blocking stream does not
     * wait for: done before anything on that stream writes the buffer */
    check_cuda(cudaDeviceSynchronize(), "cudaMemset");
    return p;
}
static void up_(void *d, const void *h, size_t n) {
    check_cuda(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, stream), "H2D");
    check_cuda(cudaStreamSynchronize(stream), "H2D");
}
static void down_(void *h, const void *d, size_t n) {
    check_cuda(cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost, stream), "D2H");
    check_cuda(cudaStreamSynchronize(stream), "D2H");
}
#define BACKEND "cuda"
#else
#define BACKEND "cpu"
#endif

static int64_t codes_total, codes_inexact; /* one e4m3 step off the float64 rounding */

/* ---- the recipe in float64 ------------------------------------------------------------------ */

/* The nearest e4m3fn code to x (ties to the even code), saturating at 448; NaN -> 0x7f. */
static int e4m3_nearest(double x) {
    if (isnan(x)) return 0x7f;
    const int sign = signbit(x) ? 0x80 : 0;
    const double a = fabs(x);
    int lo = 0, hi = 0x7e; /* codes 0 .. 0x7e are increasing: the last one <= a, by bisection */
    if (a >= 448.0) return sign | 0x7e;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (e4m3_value(mid) <= a)
            lo = mid;
        else
            hi = mid - 1;
    }
    const double dl = a - e4m3_value(lo), dh = e4m3_value(lo + 1) - a;
    const int best = dl < dh || (dl == dh && (lo & 1) == 0) ? lo : lo + 1;
    return sign | best;
}

static double ref_scale(double amax, int pow2) {
    if (isnan(amax)) return NAN;
    if (amax == 0.0) return 1.0;
    float s = (float)(amax / 448.0); /* double then float: the correctly rounded fp32 quotient */
    if (s == 0.0f) s = ldexpf(1.0f, -149);
    if (pow2 && isfinite(s)) {
        int e;
        const double m = frexp(s, &e);
        if (m != 0.5) s = (float)ldexp(1.0, e);
    }
    return s;
}

/* One block of n values (y[k * stride]): checks its scale and codes. */
static void check_block(const char *what, const float *y, int64_t stride, int64_t n, float scale,
                        const unsigned char *codes, int64_t code_stride, int pow2,
                        double tensor_amax, int64_t *inexact) {
    double amax = 0.0;
    for (int64_t k = 0; k < n; ++k) {
        const double a = fabs((double)y[k * stride]);
        if (isnan(a))
            amax = NAN;
        else if (!isnan(amax) && a > amax)
            amax = a;
    }
    if (!isnan(tensor_amax) && tensor_amax >= 0) amax = tensor_amax; /* per-tensor scaling */
    if (tensor_amax != tensor_amax) amax = NAN;
    const double s = ref_scale(amax, pow2);
    if (!(isnan(s) ? isnan(scale) : (double)scale == s)) {
        FAIL("%s: scale %.9g, expected %.9g (amax %.9g)", what, (double)scale, s, amax);
        return;
    }
    for (int64_t k = 0; k < n; ++k) {
        const int got = codes[k * code_stride];
        const double q = (double)y[k * stride] / s;
        if (isnan(q)) {
            if ((got & 0x7f) != 0x7f)
                FAIL("%s[%lld]: code 0x%02x, expected NaN", what, (long long)k, got);
            continue;
        }
        /* the library's arithmetic (fp32 division, src/fp8_recipe.h) on the host: bit for bit */
        const int lib = fastglu_fp8_quantise(y[k * stride], scale);
        if (got != lib)
            FAIL("%s[%lld]: code 0x%02x, the fp32 recipe gives 0x%02x (y %.9g / scale %.9g)", what,
                 (long long)k, got, lib, (double)y[k * stride], s);
        const int want = e4m3_nearest(q);
        if (got == want) continue;
        ++*inexact;
        const int gm = got & 0x7f, wm = want & 0x7f;
        if (gm == 0x7f || ((gm != 0 || wm != 0) && (((got ^ want) & 0x80) || abs(gm - wm) > 1)))
            FAIL("%s[%lld]: code 0x%02x, expected 0x%02x (y %.9g / scale %.9g)", what, (long long)k,
                 got, want, (double)y[k * stride], s);
    }
}

/* ---- one case ------------------------------------------------------------------------------- */

typedef struct variant {
    const char *name;
    fastglu_activation act;
    fastglu_layout layout;
    int bias, weights;
    float clamp, offset, gm, dm;
} variant;

static const variant variants[] = {
    {"swiglu", FASTGLU_ACT_SILU, FASTGLU_LAYOUT_SPLIT, 0, 0, 0, 0, 1, 1},
    {"geglu", FASTGLU_ACT_GELU_TANH, FASTGLU_LAYOUT_SPLIT, 0, 0, 0, 0, 1, 1},
    {"quick_geglu", FASTGLU_ACT_QUICK_GELU, FASTGLU_LAYOUT_SPLIT, 0, 0, 0, 0, 1, 1},
    {"swiglu_bias", FASTGLU_ACT_SILU, FASTGLU_LAYOUT_SPLIT, 1, 0, 0, 0, 1, 1},
    {"weighted_swiglu", FASTGLU_ACT_SILU, FASTGLU_LAYOUT_SPLIT, 0, 1, 0, 0, 1, 1},
    {"gpt_oss", FASTGLU_ACT_QUICK_GELU, FASTGLU_LAYOUT_INTERLEAVED, 1, 1, 7.0f, 1.0f, 1, 1},
    {"geglu_clamp_offset", FASTGLU_ACT_GELU_TANH, FASTGLU_LAYOUT_SPLIT, 1, 1, 2.5f, 0.5f, 1, 1},
    {"liger_multipliers", FASTGLU_ACT_SILU, FASTGLU_LAYOUT_INTERLEAVED, 0, 0, 0, 0, 1.25f, 0.75f},
};

typedef struct config {
    fastglu_fp8_scaling scaling;
    fastglu_fp8_scale_layout layout;
    int pow2, colwise, with_y;
} config;

static const config configs[] = {
    {FASTGLU_FP8_SCALING_BLOCK_1X128, FASTGLU_FP8_SCALES_MN_MAJOR, 0, 1, 1},
    {FASTGLU_FP8_SCALING_BLOCK_1X128, FASTGLU_FP8_SCALES_ROW_MAJOR, 1, 1, 0},
    {FASTGLU_FP8_SCALING_BLOCK_1X128, FASTGLU_FP8_SCALES_MN_MAJOR, 0, 0, 0},
    {FASTGLU_FP8_SCALING_TENSOR, FASTGLU_FP8_SCALES_MN_MAJOR, 0, 1, 1},
    {FASTGLU_FP8_SCALING_TENSOR, FASTGLU_FP8_SCALES_MN_MAJOR, 1, 0, 0},
};

#define SENT8 0xa5
static const float SENT32 = -1234.5f;

static size_t esize(fastglu_dtype dt) { return fastglu_dtype_size(dt); }

/* ---- the backward's sums in float64 ---------------------------------------------------------- */

/* dbias [2F] (h's layout) and dweights [T] of the family's backward in float64 (glu_reference.h's
 * glu_ref_eval, the family's C tests' reference), with each sum's running-error magnitude (mb, mw:
 * the sum of its terms' magnitudes) for the tolerance. */
static void ref_sums(const fastglu_glu_params *p, fastglu_dtype dt, fastglu_dtype hdt,
                     const unsigned char *h, int64_t in_rs, const unsigned char *bias,
                     const float *w, int has_b, int has_w, const unsigned char *dy, int64_t dy_rs,
                     int64_t T, int64_t F, double *db, double *mb, double *dw, double *mw) {
    const int il = p->layout == FASTGLU_LAYOUT_INTERLEAVED;
    fastglu_glu_params pr = *p; /* the reference's params: the bound rounded to dtype */
    if (p->clamp_value > 0.0f) {
        unsigned char buf[4];
        put(dt, buf, 0, p->clamp_value);
        pr.clamp_value = get(dt, buf, 0);
    }
    for (int64_t k = 0; k < 2 * F; ++k) db[k] = mb[k] = 0.0;
    for (int64_t t = 0; t < T; ++t) {
        dw[t] = mw[t] = 0.0;
        for (int64_t j = 0; j < F; ++j) {
            const int64_t ig = il ? 2 * j : j, iu = il ? 2 * j + 1 : F + j;
            const double g = get(hdt, h, t * in_rs + ig), u = get(hdt, h, t * in_rs + iu);
            const double bg = has_b ? get(dt, bias, ig) : 0.0, bu = has_b ? get(dt, bias, iu) : 0.0;
            const glu_ref_point r =
                glu_ref_eval(&pr, g, u, bg, bu, has_w ? w[t] : 1.0, get(dt, dy, t * dy_rs + j));
            db[ig] += r.d_a, mb[ig] += r.d_a_mag;
            db[iu] += r.d_v, mb[iu] += r.d_v_mag;
            dw[t] += r.dw_term, mw[t] += r.dw_mag;
        }
    }
}

/* A sum of n terms computed in fp32 and rounded to a dtype of unit roundoff u_out: within
 * u_out |ref| + (16 + n) 2^-23 mag (mag: the sum of the terms' magnitudes; per-term fp32 rounding
 * and the sigmoid's few ulp, then one rounding per addition). NaN / inf must match. */
static int sum_close(double got, double ref, double mag, int64_t n, double u_out) {
    if (isnan(ref)) return isnan(got);
    if (isinf(ref)) return got == ref;
    return fabs(got - ref) <= u_out * fabs(ref) + (16.0 + (double)n) * 0x1p-23 * mag;
}

static double unit_roundoff(fastglu_dtype dt) {
    return dt == FASTGLU_DTYPE_BF16 ? 0x1p-8 : dt == FASTGLU_DTYPE_FP16 ? 0x1p-11 : 0x1p-24;
}

/* Row strides of the operands and outputs. STRIDES_ODD: every row padded by an odd number of
 * elements (no 16-byte rows: the CUDA kernel's element-by-element path); STRIDES_DENSE: contiguous
 * tensors (torch's; the 16-byte path wherever F % 8 == 0); STRIDES_VIEW: rows padded by 16 bytes
 * or more (strided views whose rows stay 16-byte aligned: the 16-byte path, y_t's 16-byte
 * stores). */
enum { STRIDES_ODD = 0, STRIDES_DENSE = 1, STRIDES_VIEW = 2 };

/* specials: 1 plants a NaN, an inf and an all-zero row (T >= 3). bwd: 0 the forward, 1 the
 * backward, BWD_SAVED the backward from the operands' blockwise copy. */
enum { BWD_SAVED = 2 };
static void run_case_strides(const variant *v, const config *c, fastglu_dtype dt, int64_t T,
                             int64_t F, int specials, int bwd, int strides) {
    char what[256];
    const int h8 = bwd == BWD_SAVED;
    snprintf(what, sizeof what,
             "%s %s %s dt=%d T=%lld F=%lld scaling=%d layout=%d pow2=%d colwise=%d y=%d "
             "specials=%d strides=%d",
             BACKEND,
             h8    ? "bwd-saved"
             : bwd ? "bwd"
                   : "fwd",
             v->name, (int)dt, (long long)T, (long long)F, (int)c->scaling, (int)c->layout, c->pow2,
             c->colwise, c->with_y, specials, strides);
    const int64_t X = bwd ? 2 * F : F; /* the quantised operand's width: y [T, F] or dh [T, 2F] */
    const size_t es = esize(dt);
    const int64_t pad16 = 16 / (int64_t)es; /* 16 bytes of elements */
    const int il = v->layout == FASTGLU_LAYOUT_INTERLEAVED;
    const int64_t nb = (X + 127) / 128, nbt = (T + 127) / 128;
    int64_t dy_rs = F + 1, in_rs = 2 * F + 3, d_rs = X + 5, dt_rs = T + 7, y_rs = X + 2;
    if (strides == STRIDES_DENSE) dy_rs = F, in_rs = 2 * F, d_rs = X, dt_rs = T, y_rs = X;
    if (strides == STRIDES_VIEW)
        dy_rs = F + pad16, in_rs = 2 * F + 2 * pad16, d_rs = X + 32,
        dt_rs = (T + 15) / 16 * 16 + 16, y_rs = X + pad16;
    const int tensor = c->scaling == FASTGLU_FP8_SCALING_TENSOR;
    const int mn = c->layout == FASTGLU_FP8_SCALES_MN_MAJOR;
    /* scale tensors with padding: MN-major ld = rows + 2, row-major ld = nb + 1 */
    const int64_t s_ld = tensor ? 0
                         : mn   ? T + 2
                                : nb + 1,
                  st_ld = tensor ? 0
                          : mn   ? X + 2
                                 : nbt + 1;
    const int64_t s_n = tensor ? 2
                        : mn   ? nb * s_ld
                               : T * s_ld,
                  st_n = tensor ? 0
                         : mn   ? nbt * st_ld
                                : X * st_ld;

    unsigned char *h = malloc((size_t)(T * in_rs) * es), *bias = malloc((size_t)(2 * F) * es);
    float *w = malloc((size_t)T * sizeof(float));
    unsigned char *dyh = malloc((size_t)(T * dy_rs) * es);
    for (int64_t i = 0; i < T * dy_rs; ++i) put(dt, dyh, i, (float)(urand() * 2.0 - 1.0));
    for (int64_t i = 0; i < T * in_rs; ++i) put(dt, h, i, (float)(urand() * 8.0 - 4.0));
    for (int64_t i = 0; i < 2 * F; ++i) put(dt, bias, i, (float)(urand() * 2.0 - 1.0));
    for (int64_t i = 0; i < T; ++i) w[i] = (float)urand();
    if (specials && T >= 3 && F >= 2) {
        put(dt, h, 0, NAN);                             /* row 0: gate NaN -> y NaN */
        put(dt, h, in_rs + (il ? 3 : F + 1), INFINITY); /* row 1: up inf */
        for (int64_t j = 0; j < F; ++j) put(dt, h, 2 * in_rs + (il ? 2 * j + 1 : F + j), 0.0f);
    }
    fastglu_glu_params p = fastglu_glu_params_default(v->act);
    p.layout = v->layout, p.clamp_value = v->clamp, p.glu_linear_offset = v->offset;
    p.gate_multiplier = v->gm, p.down_multiplier = v->dm;
    /* the blockwise copy (h8): codes [T][in8_rs] in h's layout, scales [T][sc_rs], and the
     * decoded operands in fp32 [T][2F] (code * scale, fp32: the float64 sums' operands) */
    const int64_t nbs = il ? (2 * F + 127) / 128 : 2 * ((F + 127) / 128);
    const int64_t in8_rs = strides == STRIDES_ODD     ? 2 * F + 3
                           : strides == STRIDES_DENSE ? 2 * F
                                                      : 2 * F + 16,
                  sc_rs = strides == STRIDES_DENSE ? nbs : nbs + 3;
    const size_t c8_bytes = h8 ? (size_t)(T * in8_rs) : 1,
                 sc_bytes = h8 ? (size_t)(T * sc_rs) * 4 : 4;
    unsigned char *c8 = malloc(c8_bytes);
    float *sc = malloc(sc_bytes), *hd = malloc(h8 ? (size_t)(T * 2 * F) * 4 : 4);
    if (h8) {
        memset(c8, SENT8, c8_bytes);
        const fastglu_tensor g = {h, dt, in_rs}, u = {il ? NULL : h + F * es, dt, in_rs};
        const fastglu_tensor g8 = {c8, FASTGLU_DTYPE_FP8_E4M3, in8_rs},
                             u8 = {il ? NULL : c8 + F, FASTGLU_DTYPE_FP8_E4M3, in8_rs},
                             s8 = {sc, FASTGLU_DTYPE_FP32, sc_rs};
        if (fastglu_glu_fp8_store_blockwise_cpu(&p, g, u, g8, u8, s8, T, F) != FASTGLU_SUCCESS)
            FAIL("%s: the copy: %s", what, fastglu_last_error_message());
        for (int64_t t = 0; t < T; ++t)
            for (int64_t k = 0; k < 2 * F; ++k) { /* column k of h's layout */
                const int64_t j = il ? k / 2 : k % F, is_up = il ? k % 2 : k >= F;
                const int64_t b = il ? k / 128 : j / 128 + (is_up ? (F + 127) / 128 : 0);
                hd[t * 2 * F + k] = (float)e4m3_value(c8[t * in8_rs + k]) * sc[t * sc_rs + b];
            }
    }

    const size_t h_bytes = (size_t)(T * in_rs) * es, y_bytes = (size_t)(T * y_rs) * es;
    const size_t d_bytes = (size_t)(T * d_rs), dt_bytes = (size_t)(X * dt_rs);
    unsigned char *yref = malloc(y_bytes), *yfused = malloc(y_bytes), *d = malloc(d_bytes),
                  *dtr = malloc(dt_bytes ? dt_bytes : 1);
    float *s = malloc((size_t)s_n * 4), *st = malloc((size_t)(st_n ? st_n : 1) * 4);
    memset(yfused, SENT8, y_bytes), memset(d, SENT8, d_bytes), memset(dtr, SENT8, dt_bytes);
    for (int64_t i = 0; i < s_n; ++i) s[i] = SENT32;
    for (int64_t i = 0; i < st_n; ++i) st[i] = SENT32;

    /* the backward's sums: with bias / weights, except under the third recipe (bias and weights
     * without their gradients); dbias / dweights padded by 8 sentinel elements each side */
    const int sums = bwd && (v->bias || v->weights) && c != &configs[2];
    const int want_db = sums && v->bias, want_dw = sums && v->weights;
    const fastglu_fp8_recipe r = {c->scaling, c->layout, c->pow2};
    const size_t fws = fastglu_glu_bwd_fp8_workspace_bytes(&r, T, F, want_db, want_dw);
    const size_t rws = fastglu_glu_bwd_workspace_bytes(T, F, want_db, want_dw);
    const size_t ws_bytes = sums ? fws : 64, db_bytes = (size_t)(2 * F + 16) * es,
                 dw_bytes = (size_t)(T + 16) * 4;
    unsigned char *dbh = malloc(db_bytes), *dbr = malloc(db_bytes);
    float *dwh = malloc(dw_bytes), *dwr = malloc(dw_bytes);
    memset(dbh, SENT8, db_bytes), memset(dbr, SENT8, db_bytes);
    for (int64_t i = 0; i < T + 16; ++i) dwh[i] = dwr[i] = SENT32;
    void *C8 = c8, *SC = sc;
    void *H = h, *B = bias, *W = w, *Y = yfused, *D = d, *DT = dtr, *S = s, *ST = st, *YR = yref,
         *WS = sums ? malloc(ws_bytes) : NULL, *DY = dyh, *DB = dbh, *DW = dwh, *DBR = dbr,
         *DWR = dwr, *RWS = rws ? malloc(rws) : NULL;
#ifdef FP8_TEST_CUDA
    H = dmem(h_bytes), B = dmem((size_t)(2 * F) * es), W = dmem((size_t)T * 4), Y = dmem(y_bytes);
    D = dmem(d_bytes), DT = dmem(dt_bytes), S = dmem((size_t)s_n * 4),
    ST = dmem((size_t)(st_n ? st_n : 1) * 4);
    free(WS), free(RWS);
    YR = dmem(y_bytes), WS = dmem(ws_bytes), DY = dmem((size_t)(T * dy_rs) * es);
    DB = dmem(db_bytes), DW = dmem(dw_bytes), DBR = dmem(db_bytes), DWR = dmem(dw_bytes);
    RWS = rws ? dmem(rws) : NULL;
    up_(DB, dbh, db_bytes), up_(DW, dwh, dw_bytes), up_(DBR, dbr, db_bytes);
    up_(DWR, dwr, dw_bytes);
    up_(DY, dyh, (size_t)(T * dy_rs) * es);
    up_(H, h, h_bytes), up_(B, bias, (size_t)(2 * F) * es), up_(W, w, (size_t)T * 4);
    up_(Y, yfused, y_bytes), up_(D, d, d_bytes), up_(DT, dtr, dt_bytes), up_(S, s, (size_t)s_n * 4);
    if (st_n) up_(ST, st, (size_t)st_n * 4);
    C8 = dmem(c8_bytes), SC = dmem(sc_bytes);
    up_(C8, c8, c8_bytes), up_(SC, sc, sc_bytes);
#endif
    const fastglu_tensor g8t = {C8, FASTGLU_DTYPE_FP8_E4M3, in8_rs},
                         u8t = {il ? NULL : (char *)C8 + F, FASTGLU_DTYPE_FP8_E4M3, in8_rs},
                         sct = {SC, FASTGLU_DTYPE_FP32, sc_rs};
    fastglu_tensor gate = {H, dt, in_rs}, upt = {il ? NULL : (char *)H + F * es, dt, in_rs};
    fastglu_tensor bt = {v->bias ? B : NULL, dt, 1},
                   wt = {v->weights ? W : NULL, FASTGLU_DTYPE_FP32, 1};
    fastglu_tensor yt = {c->with_y ? Y : NULL, dt, y_rs}, dyt = {DY, dt, dy_rs};
    fastglu_fp8_out out;
    memset(&out, 0, sizeof out);
    out.data = (fastglu_tensor){D, FASTGLU_DTYPE_FP8_E4M3, d_rs};
    out.scale = (fastglu_tensor){S, FASTGLU_DTYPE_FP32, s_ld};
    if (c->colwise) {
        out.data_t = (fastglu_tensor){DT, FASTGLU_DTYPE_FP8_E4M3, dt_rs};
        if (!tensor) out.scale_t = (fastglu_tensor){ST, FASTGLU_DTYPE_FP32, st_ld};
    }
    out.workspace = WS, out.workspace_bytes = WS ? ws_bytes : 0;
    fastglu_tensor dbt = {want_db ? (char *)DB + 8 * es : NULL, dt, 1},
                   dwt = {want_dw ? (float *)DW + 8 : NULL, FASTGLU_DTYPE_FP32, 1};
    void *dbr_p = want_db ? (char *)DBR + 8 * es : NULL, *dwr_p = want_dw ? (float *)DWR + 8 : NULL;
    fastglu_status st_ref, st_f;
#ifdef FP8_TEST_CUDA
    if (h8) {
        st_ref = glu_bwd_cuda_flat(&p, DY, dy_rs, 1, g8t.data, in8_rs, u8t.data, in8_rs,
                                   FASTGLU_DTYPE_FP8_E4M3, SC, sc_rs, 1, bt.data, wt.data,
                                   FASTGLU_DTYPE_FP32, 1, YR, y_rs, il ? NULL : (char *)YR + F * es,
                                   y_rs, dbr_p, dwr_p, RWS, rws, T, F, dt, stream);
        st_f = fastglu_glu_bwd_fp8_saved_blockwise_cuda(&p, &r, dyt, g8t, u8t, sct, bt, wt, yt, dbt,
                                                        dwt, &out, T, F, stream);
    } else if (bwd) {
        st_ref = glu_bwd_cuda_flat(&p, DY, dy_rs, 1, gate.data, in_rs, upt.data, in_rs, dt, NULL, 0,
                                   0, bt.data, wt.data, FASTGLU_DTYPE_FP32, 1, YR, y_rs,
                                   il ? NULL : (char *)YR + F * es, y_rs, dbr_p, dwr_p, RWS, rws, T,
                                   F, dt, stream);
        st_f = fastglu_glu_bwd_fp8_cuda(&p, &r, dyt, gate, upt, bt, wt, yt, dbt, dwt, &out, T, F,
                                        stream);
    } else {
        st_ref = glu_fwd_cuda_flat(&p, gate.data, in_rs, upt.data, in_rs, bt.data, wt.data,
                                   FASTGLU_DTYPE_FP32, 1, YR, y_rs, NULL, 0, T, F, dt, stream);
        st_f = fastglu_glu_fwd_fp8_cuda(&p, &r, gate, upt, bt, wt, yt, &out, T, F, stream);
    }
    check_cuda(cudaStreamSynchronize(stream), "kernel");
    down_(yref, YR, y_bytes), down_(yfused, Y, y_bytes), down_(d, D, d_bytes);
    down_(dtr, DT, dt_bytes), down_(s, S, (size_t)s_n * 4);
    if (st_n) down_(st, ST, (size_t)st_n * 4);
    down_(dbh, DB, db_bytes), down_(dwh, DW, dw_bytes), down_(dbr, DBR, db_bytes);
    down_(dwr, DWR, dw_bytes);
#else
    if (h8) {
        st_ref = glu_bwd_cpu_flat(&p, DY, dy_rs, 1, g8t.data, in8_rs, u8t.data, in8_rs,
                                  FASTGLU_DTYPE_FP8_E4M3, SC, sc_rs, 1, bt.data, wt.data,
                                  FASTGLU_DTYPE_FP32, 1, YR, y_rs, il ? NULL : (char *)YR + F * es,
                                  y_rs, dbr_p, dwr_p, RWS, rws, T, F, dt);
        st_f = fastglu_glu_bwd_fp8_saved_blockwise_cpu(&p, &r, dyt, g8t, u8t, sct, bt, wt, yt, dbt,
                                                       dwt, &out, T, F);
    } else if (bwd) {
        st_ref = glu_bwd_cpu_flat(&p, DY, dy_rs, 1, gate.data, in_rs, upt.data, in_rs, dt, NULL, 0,
                                  0, bt.data, wt.data, FASTGLU_DTYPE_FP32, 1, YR, y_rs,
                                  il ? NULL : (char *)YR + F * es, y_rs, dbr_p, dwr_p, RWS, rws, T,
                                  F, dt);
        st_f = fastglu_glu_bwd_fp8_cpu(&p, &r, dyt, gate, upt, bt, wt, yt, dbt, dwt, &out, T, F);
    } else {
        st_ref = glu_fwd_cpu_flat(&p, gate.data, in_rs, upt.data, in_rs, bt.data, wt.data,
                                  FASTGLU_DTYPE_FP32, 1, YR, y_rs, NULL, 0, T, F, dt);
        st_f = fastglu_glu_fwd_fp8_cpu(&p, &r, gate, upt, bt, wt, yt, &out, T, F);
    }
#endif
    if (st_ref != FASTGLU_SUCCESS || st_f != FASTGLU_SUCCESS) {
        FAIL("%s: status %d / %d: %s", what, (int)st_ref, (int)st_f, fastglu_last_error_message());
        goto done;
    }
    if (sums) { /* run to run: the sums again over a workspace of other garbage, bit for bit */
        unsigned char *db1 = malloc(db_bytes);
        float *dw1 = malloc(dw_bytes);
        memcpy(db1, dbh, db_bytes), memcpy(dw1, dwh, dw_bytes);
#ifdef FP8_TEST_CUDA
        check_cuda(cudaMemsetAsync(WS, 0x5a, ws_bytes, stream), "memset");
        st_f = h8 ? fastglu_glu_bwd_fp8_saved_blockwise_cuda(&p, &r, dyt, g8t, u8t, sct, bt, wt, yt,
                                                             dbt, dwt, &out, T, F, stream)
                  : fastglu_glu_bwd_fp8_cuda(&p, &r, dyt, gate, upt, bt, wt, yt, dbt, dwt, &out, T,
                                             F, stream);
        check_cuda(cudaStreamSynchronize(stream), "kernel");
        down_(dbh, DB, db_bytes), down_(dwh, DW, dw_bytes);
#else
        memset(WS, 0x5a, ws_bytes);
        st_f =
            h8 ? fastglu_glu_bwd_fp8_saved_blockwise_cpu(&p, &r, dyt, g8t, u8t, sct, bt, wt, yt,
                                                         dbt, dwt, &out, T, F)
               : fastglu_glu_bwd_fp8_cpu(&p, &r, dyt, gate, upt, bt, wt, yt, dbt, dwt, &out, T, F);
#endif
        if (st_f != FASTGLU_SUCCESS || memcmp(db1, dbh, db_bytes) || memcmp(dw1, dwh, dw_bytes))
            FAIL("%s: the sums of a second run differ (status %d)", what, (int)st_f);
        free(db1), free(dw1);
    }
    if (sums) { /* dbias / dweights: float64 and fastglu_glu_bwd_*'s, the padding untouched */
        double *rdb = malloc((size_t)(2 * F) * 8), *rmb = malloc((size_t)(2 * F) * 8),
               *rdw = malloc((size_t)T * 8), *rmw = malloc((size_t)T * 8);
        if (h8)
            ref_sums(&p, dt, FASTGLU_DTYPE_FP32, (const unsigned char *)hd, 2 * F, bias, w, v->bias,
                     v->weights, dyh, dy_rs, T, F, rdb, rmb, rdw, rmw);
        else
            ref_sums(&p, dt, dt, h, in_rs, bias, w, v->bias, v->weights, dyh, dy_rs, T, F, rdb, rmb,
                     rdw, rmw);
        /* against float64 within one ulp of the dtype (2 u), not half: a sum of one term (T = 1)
         * is that term as the family's fp32 math computes it, rounded once, and a term within a
         * few fp32 ulps of a rounding midpoint of the dtype may round to the other neighbour
         * (gpt_oss, bf16: one case in some hundred runs); fastglu_glu_bwd's sums as well */
        const double ub = unit_roundoff(dt);
        for (int64_t k = 0; want_db && k < 2 * F; ++k) {
            const double got = get(dt, dbh, 8 + k), lib = get(dt, dbr, 8 + k);
            if (!sum_close(got, rdb[k], rmb[k], T, 2 * ub) ||
                !sum_close(got, lib, rmb[k], T, 2 * ub)) {
                FAIL("%s: dbias[%lld] = %.9g, float64 %.9g, fastglu_glu_bwd's %.9g (magnitude "
                     "%.3g)",
                     what, (long long)k, got, rdb[k], lib, rmb[k]);
                break;
            }
        }
        for (int64_t t = 0; want_dw && t < T; ++t) {
            const double got = dwh[8 + t], lib = dwr[8 + t];
            if (!sum_close(got, rdw[t], rmw[t], F, 0x1p-24) ||
                !sum_close(got, lib, rmw[t], F, 0x1p-23)) {
                FAIL("%s: dweights[%lld] = %.9g, float64 %.9g, fastglu_glu_bwd's %.9g (magnitude "
                     "%.3g)",
                     what, (long long)t, got, rdw[t], lib, rmw[t]);
                break;
            }
        }
        for (size_t i = 0; i < db_bytes; ++i)
            if ((i < 8 * es || i >= (size_t)(8 + 2 * F) * es || !want_db) && dbh[i] != SENT8) {
                FAIL("%s: dbias byte %zu written outside [2F]", what, i);
                break;
            }
        for (int64_t i = 0; i < T + 16; ++i)
            if ((i < 8 || i >= 8 + T || !want_dw) && dwh[i] != SENT32) {
                FAIL("%s: dweights element %lld written outside [T]", what, (long long)i);
                break;
            }
        free(rdb), free(rmb), free(rdw), free(rmw);
    }
    /* y as the recipe quantises it */
    float *yv = malloc((size_t)(T * X) * sizeof(float));
    for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < X; ++j) yv[t * X + j] = get(dt, yref, t * y_rs + j);
    if (c->with_y) {
        for (int64_t t = 0; t < T; ++t)
            if (memcmp(yfused + (size_t)(t * y_rs) * es, yref + (size_t)(t * y_rs) * es,
                       (size_t)X * es)) {
                FAIL("%s: fused y (dh) row %lld differs from fastglu_glu_fwd's (bwd's)", what,
                     (long long)t);
                break;
            }
    }
    for (size_t i = 0; i < y_bytes; ++i) { /* padding of y (or all of it when not asked) */
        const int64_t t = (int64_t)(i / es) / y_rs, j = (int64_t)(i / es) % y_rs;
        if ((!c->with_y || j >= X) && yfused[i] != SENT8 && t < T) {
            FAIL("%s: y byte %zu written", what, i);
            break;
        }
    }
    double tamax = -1.0;
    if (tensor) {
        tamax = 0.0;
        for (int64_t i = 0; i < T * X; ++i) {
            const double a = fabs((double)yv[i]);
            if (isnan(a)) {
                tamax = NAN;
                break;
            }
            if (a > tamax) tamax = a;
        }
    }
    int64_t inexact = 0, total = 0;
    char bw[400];
    for (int64_t t = 0; t < T; ++t)
        for (int64_t b = 0; b < nb; ++b) {
            const int64_t n = X - 128 * b < 128 ? X - 128 * b : 128;
            const float sc = tensor ? s[0] : mn ? s[b * s_ld + t] : s[t * s_ld + b];
            snprintf(bw, sizeof bw, "%s row %lld block %lld", what, (long long)t, (long long)b);
            check_block(bw, yv + t * X + 128 * b, 1, n, sc, d + t * d_rs + 128 * b, 1, c->pow2,
                        tamax, &inexact);
            total += n;
        }
    if (c->colwise)
        for (int64_t j = 0; j < X; ++j)
            for (int64_t b = 0; b < nbt; ++b) {
                const int64_t n = T - 128 * b < 128 ? T - 128 * b : 128;
                const float sc = tensor ? s[0] : mn ? st[b * st_ld + j] : st[j * st_ld + b];
                snprintf(bw, sizeof bw, "%s column %lld block %lld", what, (long long)j,
                         (long long)b);
                check_block(bw, yv + 128 * b * X + j, X, n, sc, dtr + j * dt_rs + 128 * b, 1,
                            c->pow2, tamax, &inexact);
                total += n;
            }
    codes_total += total, codes_inexact += inexact;
    /* sentinels: data padding, the column-wise copy when not asked, scale padding */
    for (int64_t t = 0; t < T; ++t)
        for (int64_t j = X; j < d_rs; ++j)
            if (d[t * d_rs + j] != SENT8) {
                FAIL("%s: data padding (%lld, %lld) written", what, (long long)t, (long long)j);
                t = T;
                break;
            }
    for (int64_t j = 0; j < X; ++j)
        for (int64_t t = c->colwise ? T : 0; t < dt_rs; ++t)
            if (dtr[j * dt_rs + t] != SENT8) {
                FAIL("%s: data_t byte (%lld, %lld) written", what, (long long)j, (long long)t);
                j = X;
                break;
            }
    for (int64_t i = tensor ? 1 : 0; i < s_n; ++i) {
        const int64_t row = mn ? i % (s_ld ? s_ld : 1) : i / (s_ld ? s_ld : 1),
                      col = mn ? i / (s_ld ? s_ld : 1) : i % (s_ld ? s_ld : 1);
        const int pad = !tensor && (mn ? row >= T : col >= nb);
        if ((pad || tensor) && s[i] != SENT32) {
            FAIL("%s: scale padding %lld written", what, (long long)i);
            break;
        }
    }
    for (int64_t i = 0; i < st_n; ++i) {
        const int64_t row = mn ? i % st_ld : i / st_ld, col = mn ? i / st_ld : i % st_ld;
        const int pad = !c->colwise || (mn ? row >= X : col >= nbt);
        if (pad && st[i] != SENT32) {
            FAIL("%s: scale_t padding %lld written", what, (long long)i);
            break;
        }
    }
    free(yv);
done:
#ifdef FP8_TEST_CUDA
    cudaFree(H), cudaFree(B), cudaFree(W), cudaFree(Y), cudaFree(D), cudaFree(DT), cudaFree(S);
    cudaFree(ST), cudaFree(YR), cudaFree(WS), cudaFree(DY), cudaFree(DB), cudaFree(DW);
    cudaFree(DBR), cudaFree(DWR), cudaFree(RWS), cudaFree(C8), cudaFree(SC);
#else
    free(WS), free(RWS);
#endif
    free(h), free(bias), free(w), free(yref), free(yfused), free(d), free(dtr), free(s), free(st),
        free(dyh), free(dbh), free(dbr), free(dwh), free(dwr), free(c8), free(sc), free(hd);
}

static void run_case(const variant *v, const config *c, fastglu_dtype dt, int64_t T, int64_t F,
                     int specials, int bwd) {
    run_case_strides(v, c, dt, T, F, specials, bwd, STRIDES_ODD);
}

/* The backward's dbias / dweights arguments: each refused with a status and a message naming it,
 * nothing written (the outputs keep their sentinels); the empty problem's zero sums. Host memory:
 * the CPU backend (and the CUDA build's, through the same validation). */
static void bad_sums(void) {
    enum { T = 4, F = 8 };
    uint16_t h[T * 2 * F], dyb[T * F], b[2 * F], db[2 * F + 8], bigdb[64];
    float w[T], dw[T + 8], s[T];
    _Alignas(16) unsigned char d[T * 2 * F];
    _Alignas(16) unsigned char ws[4096];
    for (int i = 0; i < T * 2 * F; ++i) h[i] = f32_to_bf16((float)(urand() * 2 - 1));
    for (int i = 0; i < T * F; ++i) dyb[i] = f32_to_bf16((float)(urand() * 2 - 1));
    for (int i = 0; i < 2 * F; ++i) b[i] = f32_to_bf16((float)(urand() - 0.5));
    for (int i = 0; i < T; ++i) w[i] = (float)urand();
    fastglu_glu_params p = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    fastglu_fp8_recipe r = {FASTGLU_FP8_SCALING_BLOCK_1X128, FASTGLU_FP8_SCALES_ROW_MAJOR, 0};
    const fastglu_dtype bf = FASTGLU_DTYPE_BF16;
    fastglu_tensor g = {h, bf, 2 * F}, u = {h + F, bf, 2 * F}, dy = {dyb, bf, F}, bt = {b, bf, 1},
                   wt = {w, FASTGLU_DTYPE_FP32, 1}, none = {NULL, bf, 0};
    fastglu_fp8_out out;
    memset(&out, 0, sizeof out);
    out.data = (fastglu_tensor){d, FASTGLU_DTYPE_FP8_E4M3, 2 * F};
    out.scale = (fastglu_tensor){s, FASTGLU_DTYPE_FP32, 1};
    const size_t need = fastglu_glu_bwd_fp8_workspace_bytes(&r, T, F, 1, 1);
    if (need == 0 || need > sizeof ws) FAIL("workspace bytes %zu", need);
    out.workspace = ws, out.workspace_bytes = need;
    struct {
        const char *what, *name;
        fastglu_status want;
        fastglu_tensor bias, weights, dbias, dweights;
        size_t ws_bytes;
    } cases[] = {
        {"dbias without bias",
         "bias",
         FASTGLU_ERROR_INVALID_VALUE,
         none,
         wt,
         {db, bf, 1},
         none,
         need},
        {"dweights without weights",
         "weights",
         FASTGLU_ERROR_INVALID_VALUE,
         bt,
         none,
         none,
         {dw, FASTGLU_DTYPE_FP32, 1},
         need},
        {"dbias of another dtype",
         "dbias.dtype",
         FASTGLU_ERROR_UNSUPPORTED_DTYPE,
         bt,
         wt,
         {db, FASTGLU_DTYPE_FP16, 1},
         none,
         need},
        {"dweights of another dtype",
         "dweights.dtype",
         FASTGLU_ERROR_UNSUPPORTED_DTYPE,
         bt,
         wt,
         none,
         {dw, FASTGLU_DTYPE_BF16, 1},
         need},
        {"strided dbias",
         "dbias.row_stride",
         FASTGLU_ERROR_INVALID_VALUE,
         bt,
         wt,
         {db, bf, 2},
         none,
         need},
        {"strided dweights",
         "dweights.row_stride",
         FASTGLU_ERROR_INVALID_VALUE,
         bt,
         wt,
         none,
         {dw, FASTGLU_DTYPE_FP32, 2},
         need},
        {"dbias overlapping bias",
         "overlaps",
         FASTGLU_ERROR_INVALID_VALUE,
         bt,
         wt,
         {b, bf, 1},
         none,
         need},
        {"dweights overlapping weights",
         "overlaps",
         FASTGLU_ERROR_INVALID_VALUE,
         bt,
         wt,
         none,
         {w, FASTGLU_DTYPE_FP32, 1},
         need},
        {"dbias overlapping dweights",
         "overlaps",
         FASTGLU_ERROR_INVALID_VALUE,
         bt,
         wt,
         {dw, bf, 1},
         {dw, FASTGLU_DTYPE_FP32, 1},
         need},
        {"dbias overlapping the workspace",
         "overlaps",
         FASTGLU_ERROR_INVALID_VALUE,
         bt,
         wt,
         {ws + 32, bf, 1},
         none,
         need},
        {"a workspace too small",
         "workspace",
         FASTGLU_ERROR_INVALID_VALUE,
         bt,
         wt,
         {db, bf, 1},
         {dw, FASTGLU_DTYPE_FP32, 1},
         need - 1},
        {"dbias overlapping dh's codes",
         "overlaps",
         FASTGLU_ERROR_INVALID_VALUE,
         bt,
         wt,
         {d, bf, 1},
         none,
         need},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; ++k) {
        memset(db, SENT8, sizeof db), memset(d, SENT8, sizeof d),
            memset(bigdb, SENT8, sizeof bigdb);
        for (int i = 0; i < T + 8; ++i) dw[i] = SENT32;
        out.workspace_bytes = cases[k].ws_bytes;
        const fastglu_status st =
            fastglu_glu_bwd_fp8_cpu(&p, &r, dy, g, u, cases[k].bias, cases[k].weights, none,
                                    cases[k].dbias, cases[k].dweights, &out, T, F);
        if (st != cases[k].want || !strstr(fastglu_last_error_message(), cases[k].name))
            FAIL("%s: status %d, \"%s\" (wanted %d naming %s)", cases[k].what, (int)st,
                 fastglu_last_error_message(), (int)cases[k].want, cases[k].name);
        int touched = 0;
        for (size_t i = 0; i < sizeof db; ++i) touched |= ((unsigned char *)db)[i] != SENT8;
        for (size_t i = 0; i < sizeof d; ++i) touched |= d[i] != SENT8;
        for (int i = 0; i < T + 8; ++i) touched |= dw[i] != SENT32;
        if (touched) FAIL("%s: a refused call wrote an output", cases[k].what);
    }
    out.workspace_bytes = need;
    /* the valid call, and the empty problems: zero sums over nothing, nothing else written */
    fastglu_tensor dbt = {db, bf, 1}, dwt = {dw, FASTGLU_DTYPE_FP32, 1};
    fastglu_status st =
        fastglu_glu_bwd_fp8_cpu(&p, &r, dy, g, u, bt, wt, none, dbt, dwt, &out, T, F);
    if (st != FASTGLU_SUCCESS) FAIL("valid sums refused: %s", fastglu_last_error_message());
    memset(db, SENT8, sizeof db), memset(d, SENT8, sizeof d);
    for (int i = 0; i < T + 8; ++i) dw[i] = SENT32;
    st = fastglu_glu_bwd_fp8_cpu(&p, &r, dy, g, u, bt, wt, none, dbt, dwt, &out, 0, F);
    if (st != FASTGLU_SUCCESS) FAIL("T = 0 refused: %s", fastglu_last_error_message());
    for (int i = 0; i < 2 * F + 8; ++i)
        if (db[i] != (i < 2 * F ? 0 : (SENT8 << 8 | SENT8))) {
            FAIL("T = 0: dbias[%d] = 0x%04x", i, db[i]);
            break;
        }
    if (dw[0] != SENT32) FAIL("T = 0: dweights written");
    memset(db, SENT8, sizeof db);
    st = fastglu_glu_bwd_fp8_cpu(&p, &r, dy, g, u, bt, wt, none, dbt, dwt, &out, T, 0);
    if (st != FASTGLU_SUCCESS) FAIL("F = 0 refused: %s", fastglu_last_error_message());
    for (int i = 0; i < T + 8; ++i)
        if (dw[i] != (i < T ? 0.0f : SENT32)) {
            FAIL("F = 0: dweights[%d] = %g", i, (double)dw[i]);
            break;
        }
    if (db[0] != (SENT8 << 8 | SENT8)) FAIL("F = 0: dbias written");
    for (size_t i = 0; i < sizeof d; ++i)
        if (d[i] != SENT8) {
            FAIL("an empty problem wrote data");
            break;
        }
}

/* Bad arguments: a status, a message, nothing written. */
/* fastglu_glu_bwd_fp8_saved_blockwise_cpu's own arguments (the copy's codes and scales): each
 * refused with a status and a message naming it, nothing written; codes at an odd address taken. */
static void bad_saved(void) {
    enum { T = 4, F = 8 };
    _Alignas(16) unsigned char c8[T * 2 * F + 1], d[T * 2 * F], dt[2 * F * T];
    uint16_t dyb[T * F];
    float sc[T * 2], s[T], st[2 * F];
    for (int i = 0; i < T * 2 * F + 1; ++i) c8[i] = (unsigned char)(urand() * 126);
    for (int i = 0; i < T * F; ++i) dyb[i] = f32_to_bf16((float)(urand() * 2 - 1));
    for (int i = 0; i < T * 2; ++i) sc[i] = 0.01f;
    fastglu_glu_params p = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    fastglu_fp8_recipe r = {FASTGLU_FP8_SCALING_BLOCK_1X128, FASTGLU_FP8_SCALES_ROW_MAJOR, 0};
    const fastglu_dtype e4 = FASTGLU_DTYPE_FP8_E4M3, bf = FASTGLU_DTYPE_BF16;
    fastglu_tensor g = {c8 + 1, e4, 2 * F}, u = {c8 + 1 + F, e4, 2 * F}, dy = {dyb, bf, F},
                   sct = {sc, FASTGLU_DTYPE_FP32, 2}, none = {NULL, bf, 0};
    fastglu_fp8_out out;
    memset(&out, 0, sizeof out);
    out.data = (fastglu_tensor){d, e4, 2 * F};
    out.scale = (fastglu_tensor){s, FASTGLU_DTYPE_FP32, 1};
    out.data_t = (fastglu_tensor){dt, e4, T};
    out.scale_t = (fastglu_tensor){st, FASTGLU_DTYPE_FP32, 1};
    fastglu_status rc = fastglu_glu_bwd_fp8_saved_blockwise_cpu(&p, &r, dy, g, u, sct, none, none,
                                                                none, none, none, &out, T, F);
    if (rc != FASTGLU_SUCCESS) FAIL("valid saved call refused: %s", fastglu_last_error_message());
    memset(d, SENT8, sizeof d), memset(dt, SENT8, sizeof dt);
    struct {
        const char *what, *needle;
        fastglu_status want;
        fastglu_tensor g, u, sc, dy;
    } cases[] = {
        {"codes in bf16",
         "gate_fp8.dtype",
         FASTGLU_ERROR_UNSUPPORTED_DTYPE,
         {c8 + 1, bf, 2 * F},
         u,
         sct,
         dy},
        {"up codes in bf16",
         "up_fp8.dtype",
         FASTGLU_ERROR_UNSUPPORTED_DTYPE,
         g,
         {c8 + 1 + F, bf, 2 * F},
         sct,
         dy},
        {"scales in bf16",
         "scale_inv.dtype",
         FASTGLU_ERROR_UNSUPPORTED_DTYPE,
         g,
         u,
         {sc, bf, 2},
         dy},
        {"no scales",
         "scale_inv",
         FASTGLU_ERROR_INVALID_VALUE,
         g,
         u,
         {NULL, FASTGLU_DTYPE_FP32, 2},
         dy},
        {"a negative scales' row stride",
         "scale_inv",
         FASTGLU_ERROR_INVALID_VALUE,
         g,
         u,
         {sc, FASTGLU_DTYPE_FP32, -2},
         dy},
        {"scales over the codes' output",
         "overlaps",
         FASTGLU_ERROR_INVALID_VALUE,
         g,
         u,
         {d, FASTGLU_DTYPE_FP32, 2},
         dy},
        {"codes over the transposed output",
         "overlaps",
         FASTGLU_ERROR_INVALID_VALUE,
         {dt, e4, 2 * F},
         u,
         sct,
         dy},
        {"no up with SPLIT",
         "up_fp8 is NULL",
         FASTGLU_ERROR_INVALID_VALUE,
         g,
         {NULL, e4, 2 * F},
         sct,
         dy},
        {"no gate", "gate_fp8 is NULL", FASTGLU_ERROR_INVALID_VALUE, {NULL, e4, 2 * F}, u, sct, dy},
        {"dy in fp8", "dy.dtype", FASTGLU_ERROR_UNSUPPORTED_DTYPE, g, u, sct, {dyb, e4, F}},
        {"dy of no dtype",
         "dy.dtype",
         FASTGLU_ERROR_UNSUPPORTED_DTYPE,
         g,
         u,
         sct,
         {dyb, (fastglu_dtype)7, F}},
        {"no dy", "dy", FASTGLU_ERROR_INVALID_VALUE, g, u, sct, {NULL, bf, F}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; ++k) {
        rc = fastglu_glu_bwd_fp8_saved_blockwise_cpu(&p, &r, cases[k].dy, cases[k].g, cases[k].u,
                                                     cases[k].sc, none, none, none, none, none,
                                                     &out, T, F);
        if (rc != cases[k].want || !strstr(fastglu_last_error_message(), cases[k].needle))
            FAIL("saved backward, %s: status %d, %s", cases[k].what, (int)rc,
                 fastglu_last_error_message());
    }
    for (size_t i = 0; i < sizeof d; ++i)
        if (d[i] != SENT8 || dt[i] != SENT8) {
            FAIL("a refused saved backward wrote its codes");
            break;
        }
    /* up_fp8 given with INTERLEAVED (gate_fp8 holds both): named with the pointer passed */
    fastglu_glu_params pi = p;
    pi.layout = FASTGLU_LAYOUT_INTERLEAVED;
    rc = fastglu_glu_bwd_fp8_saved_blockwise_cpu(&pi, &r, dy, g, u, sct, none, none, none, none,
                                                 none, &out, T, F);
    char want[64];
    snprintf(want, sizeof want, "up_fp8.data = %p", u.data);
    if (rc != FASTGLU_ERROR_INVALID_VALUE || !strstr(fastglu_last_error_message(), want))
        FAIL("saved backward, up_fp8 with INTERLEAVED: status %d, %s", (int)rc,
             fastglu_last_error_message());
    /* the empty problem writes dbias (zeros): refused over the bias, which it would overwrite */
    uint16_t bias[2 * F];
    for (int i = 0; i < 2 * F; ++i) bias[i] = f32_to_bf16(1.5f);
    const fastglu_tensor bt = {bias, bf, 1}, dbt = {bias, bf, 1};
    rc = fastglu_glu_bwd_fp8_saved_blockwise_cpu(&p, &r, dy, g, u, sct, bt, none, none, dbt, none,
                                                 &out, 0, F);
    if (rc != FASTGLU_ERROR_INVALID_VALUE || !strstr(fastglu_last_error_message(), "overlaps") ||
        bias[0] != f32_to_bf16(1.5f))
        FAIL("empty saved backward with dbias over bias: status %d, %s", (int)rc,
             fastglu_last_error_message());
}

static void bad_inputs(void) {
    unsigned char h[64 * 2 * 2], d[64];
    float s[4];
    fastglu_glu_params p = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    fastglu_fp8_recipe r = {FASTGLU_FP8_SCALING_BLOCK_1X128, FASTGLU_FP8_SCALES_MN_MAJOR, 0};
    fastglu_fp8_out out;
    memset(&out, 0, sizeof out);
    memset(d, SENT8, sizeof d);
    out.data = (fastglu_tensor){d, FASTGLU_DTYPE_FP8_E4M3, 8};
    out.scale = (fastglu_tensor){s, FASTGLU_DTYPE_FP32, 4};
    fastglu_tensor g = {h, FASTGLU_DTYPE_BF16, 16}, u = {h + 16, FASTGLU_DTYPE_BF16, 16},
                   none = {NULL, FASTGLU_DTYPE_BF16, 0};
    fastglu_status st = fastglu_glu_fwd_fp8_cpu(&p, &r, g, u, none, none, none, &out, 4, 8);
    if (st != FASTGLU_SUCCESS) FAIL("valid call refused: %s", fastglu_last_error_message());
    memset(d, SENT8, sizeof d);
    out.data.dtype = FASTGLU_DTYPE_BF16;
    st = fastglu_glu_fwd_fp8_cpu(&p, &r, g, u, none, none, none, &out, 4, 8);
    if (st != FASTGLU_ERROR_UNSUPPORTED_DTYPE || !strstr(fastglu_last_error_message(), "out->data"))
        FAIL("wrong data dtype: %d %s", (int)st, fastglu_last_error_message());
    out.data.dtype = FASTGLU_DTYPE_FP8_E4M3;
    out.scale.row_stride = 3; /* MN-major leading dimension < tokens (4), with 1 block: legal */
    st = fastglu_glu_fwd_fp8_cpu(&p, &r, g, u, none, none, none, &out, 4, 8);
    if (st != FASTGLU_SUCCESS)
        FAIL("one block per row with ld 3 refused: %s", fastglu_last_error_message());
    memset(d, SENT8, sizeof d);
    out.scale.data = d; /* scales overlapping the data */
    st = fastglu_glu_fwd_fp8_cpu(&p, &r, g, u, none, none, none, &out, 4, 8);
    if (st != FASTGLU_ERROR_INVALID_VALUE || !strstr(fastglu_last_error_message(), "overlaps"))
        FAIL("overlap accepted: %d %s", (int)st, fastglu_last_error_message());
    out.scale.data = s;
    r.scaling = (fastglu_fp8_scaling)7;
    st = fastglu_glu_fwd_fp8_cpu(&p, &r, g, u, none, none, none, &out, 4, 8);
    if (st != FASTGLU_ERROR_INVALID_VALUE ||
        !strstr(fastglu_last_error_message(), "recipe->scaling"))
        FAIL("bad scaling accepted: %d %s", (int)st, fastglu_last_error_message());
    r.scaling = FASTGLU_FP8_SCALING_TENSOR;
    out.scale_t = (fastglu_tensor){s + 2, FASTGLU_DTYPE_FP32, 1};
    st = fastglu_glu_fwd_fp8_cpu(&p, &r, g, u, none, none, none, &out, 4, 8);
    if (st != FASTGLU_ERROR_INVALID_VALUE || !strstr(fastglu_last_error_message(), "scale_t"))
        FAIL("scale_t without data_t accepted: %d %s", (int)st, fastglu_last_error_message());
    r.scaling = FASTGLU_FP8_SCALING_BLOCK_1X128;
    out.scale_t = (fastglu_tensor){NULL, FASTGLU_DTYPE_FP32, 0};
    out.data.row_stride = 16; /* dh [4, 16] */
    st = fastglu_glu_bwd_fp8_cpu(&p, &r, none, g, u, none, none, none, none, none, &out, 4, 8);
    if (st != FASTGLU_ERROR_INVALID_VALUE || !strstr(fastglu_last_error_message(), "dy"))
        FAIL("backward without dy accepted: %d %s", (int)st, fastglu_last_error_message());
    fastglu_tensor dy = {h, FASTGLU_DTYPE_FP16, 8};
    st = fastglu_glu_bwd_fp8_cpu(&p, &r, dy, g, u, none, none, none, none, none, &out, 4, 8);
    if (st != FASTGLU_ERROR_UNSUPPORTED_DTYPE || !strstr(fastglu_last_error_message(), "dy.dtype"))
        FAIL("backward with a dy of another dtype accepted: %d %s", (int)st,
             fastglu_last_error_message());
    bad_sums();
    bad_saved();
    for (size_t i = 0; i < sizeof d; ++i)
        if (d[i] != SENT8) {
            FAIL("a refused call wrote data");
            break;
        }
}

int main(void) {
#ifdef FP8_TEST_CUDA
    if (!fastglu_cuda_available()) {
        printf("no usable CUDA device: skipped\n");
        return 77;
    }
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
#endif
    seed_rng(); /* fresh inputs every run; FASTGLU_TEST_SEED replays a printed seed */
    fastglu_set_fp8_saturate(1);
    static const int64_t Fs[] = {1, 3, 1408, 2880}, Ts[] = {1, 257};
    const int nv = (int)(sizeof variants / sizeof *variants),
              nc = (int)(sizeof configs / sizeof *configs);
    for (int vi = 0; vi < nv; ++vi)
        for (int ci = 0; ci < nc; ++ci)
            for (int fi = 0; fi < 4; ++fi)
                for (int ti = 0; ti < 2; ++ti) {
                    /* the large shapes with every variant under the first two recipes, all
                     * recipes on the plain SwiGLU */
                    if (Fs[fi] >= 1408 && Ts[ti] > 1 && ci >= 2 && vi != 0) continue;
                    run_case(&variants[vi], &configs[ci], FASTGLU_DTYPE_BF16, Ts[ti], Fs[fi], 0, 0);
                    run_case(&variants[vi], &configs[ci], FASTGLU_DTYPE_BF16, Ts[ti], Fs[fi], 0, 1);
                }
    static const fastglu_dtype dts[] = {FASTGLU_DTYPE_BF16, FASTGLU_DTYPE_FP16, FASTGLU_DTYPE_FP32};
    for (int k = 0; k < 3; ++k)
        for (int ci = 0; ci < nc; ++ci) {
            for (int bwd = 0; bwd < 2; ++bwd) {
                run_case(&variants[0], &configs[ci], dts[k], 257, 300, 1, bwd);
                run_case(&variants[3], &configs[ci], dts[k], 130, 129, 0, bwd);
            }
        }
    /* the CUDA kernel's 16-byte path: contiguous tensors and 16-byte-aligned strided views; the
     * issue's shapes (F = 3420: Megatron's up = gate + F is only 8-byte aligned, the element
     * path), a last tile of 2 tokens (T = 130) and of one (T = 8193). Sized for the host's float64
     * check (about 10^8 codes). */
    static const int64_t Fv[] = {1, 3, 1408, 2880, 3420, 5632};
    static const int cv[] = {0, 3}; /* block (MN-major, y, column-wise); tensor (the same) */
    for (int strides = STRIDES_DENSE; strides <= STRIDES_VIEW; ++strides) {
        for (int fi = 0; fi < 6; ++fi)
            for (int bwd = 0; bwd < 2; ++bwd) {
                for (int k = 0; k < 2; ++k) {
                    run_case_strides(&variants[0], &configs[cv[k]], FASTGLU_DTYPE_BF16, 1, Fv[fi],
                                     0, bwd, strides);
                    run_case_strides(&variants[0], &configs[cv[k]], FASTGLU_DTYPE_BF16, 130, Fv[fi],
                                     1, bwd, strides);
                }
                if (Fv[fi] != 3 && Fv[fi] != 1408 && Fv[fi] != 2880) continue;
                for (int vi = 1; vi < nv; ++vi)
                    run_case_strides(&variants[vi], &configs[Fv[fi] == 3 ? 1 : 0],
                                     FASTGLU_DTYPE_BF16, 130, Fv[fi], 0, bwd, strides);
                for (int k = 1; k < 3; ++k) {
                    run_case_strides(&variants[0], &configs[2], dts[k], 130, Fv[fi], 1, bwd,
                                     strides);
                    run_case_strides(&variants[3], &configs[3], dts[k], 130, Fv[fi], 0, bwd,
                                     strides);
                }
            }
        for (int bwd = 0; bwd < 2; ++bwd)
            for (int k = 0; k < 2; ++k) {
                run_case_strides(&variants[0], &configs[cv[k]], FASTGLU_DTYPE_BF16, 8193, 3, 0, bwd,
                                 strides);
                run_case_strides(&variants[0], &configs[cv[k]], FASTGLU_DTYPE_BF16, 8193, 136, 0,
                                 bwd, strides);
            }
    }
    /* the backward from the blockwise copy: every variant under the first two recipes, all recipes
     * on the plain SwiGLU and SwiGLU with a bias, each dtype, F = 1, 3, 1408, 2880 (the paired
     * tiles at 1408; at 2880 the shifted pairs where they apply, else the split tiles), T = 1,
     * 257, 130 (a last tile of 2), odd / dense /
     * view strides (the CUDA kernel's element and 8-byte paths), NaN / inf / zero rows */
    for (int vi = 0; vi < nv; ++vi)
        for (int ci = 0; ci < nc; ++ci) {
            if (ci >= 2 && vi != 0 && vi != 3) continue;
            for (int fi = 0; fi < 4; ++fi)
                run_case_strides(&variants[vi], &configs[ci], FASTGLU_DTYPE_BF16,
                                 Fs[fi] >= 1408 ? 130 : 257, Fs[fi], fi == 1, BWD_SAVED,
                                 (vi + ci + fi) % 3);
        }
    for (int k = 0; k < 3; ++k)
        for (int strides = STRIDES_ODD; strides <= STRIDES_VIEW; ++strides) {
            run_case_strides(&variants[0], &configs[0], dts[k], 130, 1408, 1, BWD_SAVED, strides);
            run_case_strides(&variants[4], &configs[3], dts[k], 1, 256, 0, BWD_SAVED, strides);
            run_case_strides(&variants[2], &configs[strides == STRIDES_VIEW ? 2 : 0], dts[k], 130,
                             2880, 0, BWD_SAVED, strides);
        }
#ifdef FP8_TEST_CUDA
    /* F % 128 == 64 on the split tiles (fastglu_debug_set_fp8_saved_shift(0); the default, the
     * shifted pairs, ran above): the FAST activations, 2-byte dtypes, T = 1, 130, 257 (partial
     * blocks of 128 and 256 rows), the column-wise copy or not, both scale layouts, dense and view
     * rows of the copy (odd rows take the split tiles' element path), F = 2880 and 192 */
    fastglu_debug_set_fp8_saved_shift(0);
    for (int k = 0; k < 2; ++k)
        for (int ci = 0; ci < 3; ++ci)
            for (int strides = STRIDES_DENSE; strides <= STRIDES_VIEW; ++strides) {
                run_case_strides(&variants[k == 0 ? 0 : 2], &configs[ci], dts[k], ci == 2 ? 1 : 130,
                                 2880, 0, BWD_SAVED, strides);
                run_case_strides(&variants[2 - 2 * k], &configs[ci], dts[k], 257, 192, 0, BWD_SAVED,
                                 strides);
            }
    fastglu_debug_set_fp8_saved_shift(1);
#endif
    bad_inputs();
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("test_glu_fp8_%s: all passed (%lld of %lld codes one e4m3 step from the float64 "
           "rounding: fp32 division)\n",
           BACKEND, (long long)codes_inexact, (long long)codes_total);
    return 0;
}
