/*
 * fuzz_glu.c — a libFuzzer harness for the gated-linear-unit family's CPU entry points
 * (fastglu_glu_fwd_cpu, fastglu_glu_bwd_cpu) and SwiGLU's (fastglu_swiglu_*_cpu, the family's SiLU
 * case); build with clang -fsanitize=fuzzer,address,undefined (see tests/fuzz/run.sh). The input's
 * first byte picks the family's harness (3 in 4) or SwiGLU's (swiglu_input, below).
 *
 * Each input picks the activation and layout (invalid ones included), clamp (0, boundary values,
 * NaN, negative, +Inf), offset and multipliers (sometimes NaN / Inf), dtype (fp8 and unknown ones
 * included), bias, weights (dtype, stride, fp8 and unknown dtypes), the saved input's dtype (dtype,
 * fp8 with no / per-tensor / per-token / 1 x 128 block scales, or a wrong one), tokens, F, every row stride (too
 * small, zero, padded), dy's strides, element offsets of every pointer, misaligned pointers, NULL
 * pointers, dbias / dweights (with and without bias / weights), the workspace (exact, larger,
 * too small, NULL, misaligned), the forward's fp8 copy (saved_fp8: none, padded or exact rows, too
 * small a row stride, any byte offset, on gate, on up, on output), and aliasing (output inside gate,
 * the in-place backward, dbias on bias, dweights on weights, d_gate on dy, the workspace on d_gate).
 * Every buffer is its own
 * allocation, exactly as large as the strides and offsets it is described with, so
 * AddressSanitizer catches any access outside what the call was given; outputs are pre-filled with
 * a sentinel. Then:
 *  - a call that fails must leave every buffer byte-identical;
 *  - a call that succeeds must match a float64 reference (tolerance by dtype, an absolute floor,
 *    and fp32's rounding where the formula cancels) on every output element, hold in saved_fp8
 *    exactly the e4m3fn cast of each raw operand (nearest, ties to even, saturating at 448, NaN
 *    kept: searched in the table of e4m3fn values, independently of src/fp8.h; with a clamp, of the
 *    operand moved to the clamp's side of the bound first), zero-fill dbias /
 *    dweights when the problem is empty, and leave every other byte of every buffer alone.
 * A call the harness knows to be illegal (an output overlapping an input other than in place)
 * that succeeds on a non-empty problem aborts.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "convert.h"
#include "fastglu.h"
#include "../c/glu_flat.h"
#include "fuzz_common.h"

#define MAX_TOKENS 40
#define MAX_F 300

/* ---- the fp8 copy ------------------------------------------------------------------------- */

/* The value the fp8 copy casts under the clamp c (include/fastglu.h, saved_fp8): with lo / hi the
 * e4m3fn values either side of c (lo <= c < hi), a cut operand becomes +-hi, an uncut one stays
 * within [-lo, lo] (gate: <= lo); no clamp, or c = +inf: the operand. The clamps drawn here are
 * values of every dtype. */
static double copy_operand(double x, int is_up, float clamp) {
    if (!(clamp > 0) || isinf(clamp) || isnan(x)) return x;
    const double c = clamp;
    double lo = 0.0, hi = 448.0;
    for (int k = 0; k <= 0x7e; ++k) {
        const double v = fp8_value((uint8_t)k);
        if (v <= c && v > lo) lo = v;
        if (v > c && v < hi) hi = v;
    }
    if (x > c) return hi;
    if (is_up && x < -c) return -hi;
    if (x > lo) return lo;
    if (is_up && x < -lo) return -lo;
    return x;
}

/* ---- the reference ----------------------------------------------------------------------- */

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

static void act_ref(int a, double z, double *act, double *dact, double *act_mag, double *dact_mag) {
    if (a == FASTGLU_ACT_GELU_TANH) {
        const double th = tanh(0.79788456 * z * (1.0 + 0.044715 * z * z));
        *act = 0.5 * z * (1.0 + th);
        *dact = 0.5 * z * (1.0 - th * th) * (0.79788456 + 0.1070322243 * z * z) + 0.5 * (1.0 + th);
        *act_mag = 0.5 * fabs(z) * (1.0 + fabs(th));
        *dact_mag = 0.5 * fabs(z) * (1.0 + th * th) * (0.79788456 + 0.1070322243 * z * z) +
                    0.5 * (1.0 + fabs(th));
    } else {
        const double k = a == FASTGLU_ACT_QUICK_GELU ? 1.702 : 1.0, s = sigmoid(k * z);
        *act = z * s;
        *dact = s * (1.0 + k * z * (1.0 - s));
        *act_mag = fabs(z) * s;
        *dact_mag = s * (1.0 + k * fabs(z) * (1.0 + s));
    }
}

typedef struct refv {
    double y, da, dv, dw, y_mag, da_mag, dv_mag, dw_mag;
} refv;

static refv ref_eval(const fastglu_glu_params *p, double g, double u, double bg, double bu,
                     double w, double dy) {
    const int clamp = p->clamp_value > 0;
    const double c = p->clamp_value, o = p->glu_linear_offset, mg = p->gate_multiplier,
                 md = p->down_multiplier;
    double a = g, v = u;
    if (clamp) {
        a = a > c ? c : a;
        v = v > c ? c : (v < -c ? -c : v);
    }
    const double z_mag = fabs(mg) * (fabs(a) + fabs(bg)), vo_mag = fabs(v) + fabs(bu) + fabs(o);
    a += bg, v += bu;
    const double z = mg * a, vo = v + o;
    double act, dact, am, dm, a2, d2, am2, dm2;
    act_ref(p->activation, z, &act, &dact, &am, &dm);
    const double h = 1e-6 * (1.0 + fabs(z));
    act_ref(p->activation, z + h, &a2, &d2, &am2, &dm2);
    double d2act = d2;
    act_ref(p->activation, z - h, &a2, &d2, &am2, &dm2);
    d2act = (d2act - d2) / (2 * h);
    am += fabs(dact) * z_mag;
    dm += fabs(d2act) * z_mag;
    const double e = md * w * dy;
    refv r = {md * w * act * vo,  e * vo * dact * mg,         e * act,
              md * act * vo * dy, fabs(md * w) * am * vo_mag, fabs(e * mg) * vo_mag * dm,
              fabs(e) * am,       fabs(md * dy) * am * vo_mag};
    return r;
}

static int close_enough(int dt, double got, double want, double mag) {
    const double rel = dt == FASTGLU_DTYPE_FP32 ? 1e-5 : dt == FASTGLU_DTYPE_FP16 ? 2e-3 : 1.6e-2;
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return got == want;
    return fabs(got - want) <= rel * fabs(want) + rel + 64 * 5.96e-8 * mag;
}

/* ---- the harness ------------------------------------------------------------------------- */

static long n_fwd_ok, n_fwd_err, n_bwd_ok, n_bwd_err, n_in_place_ok, n_fp8_ok, n_red_ok,
    n_fp8_store_ok;

static const float clamps[] = {0.0f, 1.5f, 0.5f, 3.0f, NAN, -1.0f, INFINITY, 1.5f};
static const float offsets[] = {0.0f, 1.0f, -0.5f, 0.0f, 1.0f, 0.25f, NAN, INFINITY};
static const float gmuls[] = {1.0f, 0.8f, 1.702f, -1.0f, 1.0f, 2.0f, 1.0f, -INFINITY};
static const float dmuls[] = {1.0f, 1.5f, 0.5f, 1.0f, -2.0f, 1.0f, 0.0f, NAN};

/* ---- SwiGLU's entry points ---------------------------------------------------------------- */

/* fastglu_swiglu_{fwd,bwd}_cpu on Megatron's fc1 output. The input picks a dtype (an invalid one
 * included), tokens, F, row strides (too small, zero, padded), dy's two strides (zero, transposed,
 * padded), element offsets of every pointer (0..7: misaligned vectors, and misaligned elements),
 * NULL pointers, and aliasing (the output placed inside the input, or the backward in place); every
 * buffer exactly its extent, outputs pre-filled with a sentinel. Then:
 *  - a call that fails must leave every output buffer, and the input, byte-identical;
 *  - a call that succeeds must match a float64 reference on every output element, leave the gaps
 *    between output rows intact, and equal bit for bit what fastglu_glu_*_cpu with the plain SILU
 *    parameters writes for the same operands (gate = input, up = input + F). */
static long n_sw_fwd_ok, n_sw_fwd_err, n_sw_bwd_ok, n_sw_bwd_err, n_sw_in_place_ok;

static int swiglu_input(reader *r) {
    const unsigned dsel = next(r) % 4;
    const int dt = dsel < 3 ? (int)dsel : 5; /* 5 is invalid */
    const size_t es = esize(dt);
    const int sdt = dsel < 3 ? dt : FASTGLU_DTYPE_BF16; /* how the values are stored */
    const int64_t T = (int64_t)(next(r) % (MAX_TOKENS + 1)) - (next(r) % 16 == 0);
    const int64_t F = (int64_t)((next(r) | next(r) << 8) % (MAX_F + 1)) - (next(r) % 16 == 0);
    const int64_t W = 2 * F;
    const int64_t in_rs = pick_stride(r, W), out_rs = pick_stride(r, F), din_rs = pick_stride(r, W);
    int64_t dy_rs, dy_cs;
    switch (next(r) % 4) {
    case 0: dy_rs = F, dy_cs = 1; break;
    case 1: dy_rs = 0, dy_cs = 0; break;
    case 2: dy_rs = 1, dy_cs = T > 0 ? T : 1; break;
    default: dy_rs = pick_stride(r, F), dy_cs = next(r) % 3; break;
    }
    const unsigned off_in = next(r) % 8, off_out = next(r) % 8, off_dy = next(r) % 8,
                   off_din = next(r) % 8, byte_off = next(r) % 8 == 0; /* misaligned element */
    const unsigned flags = next(r);
    const int null_in = flags % 29 == 1, alias_out = flags % 7 == 2, in_place = flags % 5 == 3;
    const fastglu_glu_params silu = fastglu_glu_params_default(FASTGLU_ACT_SILU);

    const int64_t n_in = off_in + span(T, W, in_rs, 1), n_out = off_out + span(T, F, out_rs, 1);
    const int64_t n_dy = off_dy + span(T, F, dy_rs, dy_cs), n_din = off_din + span(T, W, din_rs, 1);
    unsigned char *in = malloc(n_in * es + 1), *out = malloc(n_out * es + 1);
    unsigned char *dy = malloc(n_dy * es + 1), *din = malloc(n_din * es + 1);
    unsigned char *out0 = malloc(n_out * es + 1), *din0 = malloc(n_din * es + 1);
    unsigned char *fam = malloc((n_in > n_din ? n_in : n_din) * es + (n_out * es) + 1);
    for (int64_t i = 0; i < n_in; ++i) store(sdt, in, i, ((int)next(r) - 128) / 24.0);
    for (int64_t i = 0; i < n_dy; ++i) store(sdt, dy, i, ((int)next(r) - 128) / 32.0);
    memset(out, 0x7f, n_out * es + 1);
    memset(din, 0x7f, n_din * es + 1);

    const void *x = null_in ? NULL : (const void *)(in + off_in * es + byte_off);
    void *y = alias_out ? (void *)(in + off_in * es) : (void *)(out + off_out * es);
    const void *g = dy + off_dy * es;
    void *dx = in_place ? (void *)(in + off_in * es) : (void *)(din + off_din * es);
    /* the in-place backward reads what it overwrites: keep the original input for the reference */
    unsigned char *in_copy = malloc(n_in * es + 1);
    memcpy(in_copy, in, n_in * es + 1);
    const unsigned char *xin = in_copy + off_in * es; /* reference reads go here */

    /* forward */
    memcpy(out0, out, n_out * es + 1);
    fastglu_status st = fastglu_swiglu_fwd_cpu(x, in_rs, y, out_rs, T, F, (fastglu_dtype)dt);
    if (st == FASTGLU_SUCCESS && T > 0 && F > 0)
        n_sw_fwd_ok++;
    else if (st != FASTGLU_SUCCESS)
        n_sw_fwd_err++;
    if (st != FASTGLU_SUCCESS || alias_out) {
        /* a failure, or an accepted alias (which would be a bug: out overlaps the input), must
         * have left everything alone; the input must be unchanged too */
        if (memcmp(out, out0, n_out * es + 1) != 0 || memcmp(in, in_copy, n_in * es + 1) != 0)
            abort();
        if (alias_out && st == FASTGLU_SUCCESS && T > 0 && F > 0) abort();
    } else if (T > 0 && F > 0) {
        for (int64_t t = 0; t < T; ++t)
            for (int64_t j = 0; j < F; ++j) {
                const double gt = load(dt, xin, t * in_rs + j),
                             up = load(dt, xin, t * in_rs + F + j);
                const double got = load(dt, out + off_out * es, t * out_rs + j);
                if (!close_enough(dt, got, gt * sigmoid(gt) * up, 0.0)) abort();
            }
        /* gaps between rows (and the bytes before and after) keep the sentinel */
        for (int64_t e = 0; e < n_out; ++e) {
            const int64_t rel = e - off_out;
            const int inside =
                rel >= 0 && (T == 1 ? rel < F : rel / out_rs < T && rel % out_rs < F);
            if (!inside && memcmp(out + e * es, out0 + e * es, es) != 0) abort();
        }
        /* the family's call on the same operands writes the same bytes */
        memcpy(fam, out0, n_out * es + 1);
        if (glu_fwd_cpu_flat(&silu, x, in_rs, (const char *)x + F * es, in_rs, NULL, NULL,
                             (fastglu_dtype)dt, 0, fam + off_out * es, out_rs, NULL, 0, T, F,
                             (fastglu_dtype)dt) != FASTGLU_SUCCESS ||
            memcmp(fam, out, n_out * es + 1) != 0)
            abort();
    }

    /* backward */
    memcpy(din0, din, n_din * es + 1);
    unsigned char *in_before = malloc(n_in * es + 1);
    memcpy(in_before, in, n_in * es + 1);
    st = fastglu_swiglu_bwd_cpu(g, dy_rs, dy_cs, x, in_rs, dx, din_rs, T, F, (fastglu_dtype)dt);
    if (st == FASTGLU_SUCCESS && T > 0 && F > 0)
        n_sw_bwd_ok++, n_sw_in_place_ok += in_place;
    else if (st != FASTGLU_SUCCESS)
        n_sw_bwd_err++;
    if (st != FASTGLU_SUCCESS) {
        if (memcmp(din, din0, n_din * es + 1) != 0 || memcmp(in, in_before, n_in * es + 1) != 0)
            abort();
    } else if (T > 0 && F > 0) {
        const unsigned char *res = in_place ? in + off_in * es : din + off_din * es;
        for (int64_t t = 0; t < T; ++t)
            for (int64_t j = 0; j < F; ++j) {
                const double gt = load(dt, in_before + off_in * es, t * in_rs + j);
                const double up = load(dt, in_before + off_in * es, t * in_rs + F + j);
                const double d = load(dt, dy + off_dy * es, t * dy_rs + j * dy_cs),
                             sg = sigmoid(gt);
                if (!close_enough(dt, load(dt, res, t * din_rs + j),
                                  d * sg * (1 + gt * (1 - sg)) * up, 0.0))
                    abort();
                if (!close_enough(dt, load(dt, res, t * din_rs + F + j), d * gt * sg, 0.0)) abort();
            }
        /* the family's call on the same operands (in place: on a copy of the input) */
        const int64_t n_res = in_place ? n_in : n_din;
        const unsigned char *res_buf = in_place ? in : din;
        memcpy(fam, in_place ? in_before : din0, n_res * es + 1);
        const unsigned char *fx =
            in_place ? fam + off_in * es + byte_off : (const unsigned char *)x;
        unsigned char *fd = in_place ? fam + off_in * es : fam + off_din * es;
        if (glu_bwd_cpu_flat(&silu, g, dy_rs, dy_cs, fx, in_rs, fx + F * es, in_rs,
                             (fastglu_dtype)dt, NULL, 0, 0, NULL, NULL, (fastglu_dtype)dt, 0, fd,
                             din_rs, fd + F * es, din_rs, NULL, NULL, NULL, 0, T, F,
                             (fastglu_dtype)dt) != FASTGLU_SUCCESS ||
            memcmp(fam, res_buf, n_res * es + 1) != 0)
            abort();
    }
    free(in), free(out), free(dy), free(din), free(out0), free(din0), free(in_copy),
        free(in_before), free(fam);
    return 0;
}

/* ---- the family ---------------------------------------------------------------------------- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reader r = {data, size};
    if (next(&r) % 4 == 0) return swiglu_input(&r);
    /* ---- the call's shape ---- */
    const unsigned dsel = next(&r) % 8;
    const int dt = dsel < 6 ? (int)(dsel % 3) : dsel == 6 ? 3 : 5; /* 3 (fp8) and 5: invalid */
    const size_t es = esize(dt);
    fastglu_glu_params p = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    const unsigned asel = next(&r);
    p.activation = (fastglu_activation)(asel % 32 == 31 ? 3 : (int)(asel % 3));
    const unsigned lsel = next(&r);
    p.layout = (fastglu_layout)(lsel % 32 == 31 ? 2 : (int)(lsel % 2));
    const unsigned psel = next(&r) | next(&r) << 8;
    p.clamp_value = clamps[psel % 8];
    p.glu_linear_offset =
        (psel >> 3) % 16 < 14 ? offsets[(psel >> 3) % 6] : offsets[6 + (psel >> 3) % 2];
    p.gate_multiplier = (psel >> 7) % 16 < 15 ? gmuls[(psel >> 7) % 7] : gmuls[7];
    p.down_multiplier = (psel >> 11) % 16 < 15 ? dmuls[(psel >> 11) % 7] : dmuls[7];
    const int il = p.layout == FASTGLU_LAYOUT_INTERLEAVED;
    const int64_t T = (int64_t)(next(&r) % (MAX_TOKENS + 1)) - (next(&r) % 32 == 0);
    const int64_t F = (int64_t)((next(&r) | next(&r) << 8) % (MAX_F + 1)) - (next(&r) % 32 == 0);
    const int64_t W = il ? 2 * F : F;
    const int64_t g_rs = pick_stride(&r, W), u_rs = pick_stride(&r, F), y_rs = pick_stride(&r, F);
    const int64_t dg_rs = pick_stride(&r, W), du_rs = pick_stride(&r, F);
    int64_t dy_rs, dy_cs;
    switch (next(&r) % 4) {
    case 0: dy_rs = F, dy_cs = 1; break;
    case 1: dy_rs = 0, dy_cs = 0; break;
    case 2: dy_rs = 1, dy_cs = T > 0 ? T : 1; break;
    default: dy_rs = pick_stride(&r, F), dy_cs = next(&r) % 3; break;
    }
    /* bias, weights, the saved input, reductions, workspace */
    const unsigned f1 = next(&r), f2 = next(&r), f3 = next(&r), f4 = next(&r);
    const int has_bias = f1 % 2;
    static const int wdts[] = {-1, 0, 2, 1, 0, 3, 6, 2}; /* -1: none; 3 (fp8), 6: invalid */
    const int wdt = wdts[(f1 >> 1) % 8];
    const int64_t w_st = (f1 >> 4) % 8 == 7 ? -1 : (int64_t)((f1 >> 4) % 4);
    /* the saved input: 0-3 dtype, 4 fp8, 5 fp8 per-tensor scale, 6 fp8 per-token, 7 wrong */
    const int in_kind = f2 % 8;
    const int in_dt = in_kind < 4 ? dt : in_kind < 7 ? 3 : (dt + 1) % 3;
    /* fp8 per-token: a per-token stride, or (scale_1x128) one scale per 1 x 128 block */
    const int blk = in_kind == 6 && (f2 >> 7) % 2;
    const int64_t nb = blk ? (il ? (2 * F + 127) / 128 : 2 * ((F + 127) / 128)) : 1;
    const int64_t sc_st =
        in_kind == 6 ? ((f2 >> 3) % 8 == 7 ? -1 : nb + (int64_t)((f2 >> 3) % 2)) : 0;
    const int scale_wrongly = in_kind < 4 && (f2 >> 3) % 16 == 5; /* a scale with no fp8 */
    const int want_db = (f3 % 4) != 0, want_dw = (f3 >> 2) % 4 != 0;
    const int ws_kind = (f3 >> 4) % 8; /* 0-3 exact, 4 larger, 5 too small, 6 NULL, 7 misaligned */
    const int null_gate = f4 % 41 == 1, null_up = f4 % 37 == 2, up_il = f4 % 31 == 3;
    const int alias = (f4 >> 2) % 16; /* 1 output in gate, 2-4 in place, 5 dbias on bias,
                                         6 dweights on weights, 7 d_gate on dy, 8 ws on d_gate */
    const int byte_off = next(&r) % 16 == 0;
    unsigned off[12];
    for (int i = 0; i < 12; ++i) off[i] = next(&r) % 8;
    /* saved_fp8: 0-2 none, 3-5 its own buffer with a picked row stride, 6 exact rows at a byte
     * offset (off[11] bytes), 7 on gate, 8 on up (or gate), 9 on output */
    const unsigned s8_kind = next(&r) % 10;
    const int64_t s8_rs = s8_kind == 6 ? 2 * F : pick_stride(&r, 2 * F);

    /* ---- buffers, each exactly its extent ---- */
    const size_t in_es = esize(in_dt), w_es = wdt >= 0 ? esize(wdt) : 4;
    buf G = {0}, U = {0}, G8 = {0}, U8 = {0}, B = {0}, Wt = {0}, S = {0}, DY = {0}, Y = {0},
        DG = {0}, DU = {0}, DB = {0}, DW = {0}, WS = {0}, S8 = {0};
    buf_make(&G, off[0] + span(T, W, g_rs, 1), es);
    if (!il) buf_make(&U, off[1] + span(T, F, u_rs, 1), es);
    if (in_dt != dt) {
        buf_make(&G8, off[0] + span(T, W, g_rs, 1), in_es);
        if (!il) buf_make(&U8, off[1] + span(T, F, u_rs, 1), in_es);
    }
    if (has_bias) buf_make(&B, off[2] + (F > 0 ? 2 * F : 0), es);
    if (wdt >= 0) buf_make(&Wt, off[3] + span(T, 1, w_st, 1), w_es);
    if (sc_st != 0 || in_kind == 5 || scale_wrongly)
        buf_make(&S, off[4] + span(T, nb > 0 ? nb : 1, sc_st, 1), 4);
    buf_make(&DY, off[5] + span(T, F, dy_rs, dy_cs), es);
    buf_make(&Y, off[6] + span(T, F, y_rs, 1), es);
    buf_make(&DG, off[7] + span(T, W, dg_rs, 1), es);
    if (!il || up_il) buf_make(&DU, off[8] + span(T, F, du_rs, 1), es);
    if (want_db) buf_make(&DB, off[9] + (F > 0 ? 2 * F : 0), es);
    if (want_dw) buf_make(&DW, off[10] + (T > 0 ? T : 0), w_es);
    if (s8_kind >= 3 && s8_kind <= 6) buf_make(&S8, off[11] + span(T, 2 * F, s8_rs, 1), 1);
    const int64_t Fn = F > 0 ? F : 0;
    const size_t need = fastglu_glu_bwd_workspace_bytes(T, F, want_db && F > 0, want_dw && T > 0);
    size_t ws_bytes = need;
    if (ws_kind == 4) ws_bytes = need + 64;
    if (ws_kind == 5) ws_bytes = need > 0 ? need - 1 - (f3 >> 7) * 15 : 0;
    /* the workspace: 16-byte aligned storage (the misaligned kind offsets it) */
    WS.n = (int64_t)ws_bytes + 16, WS.es = 1;
    WS.p = aligned_alloc(16, ((size_t)WS.n + 16) & ~(size_t)15);
    WS.before = malloc((size_t)WS.n + 1);
    WS.mask = calloc((size_t)WS.n + 1, 1);

    /* ---- values ---- */
    const float c = p.clamp_value > 0 && isfinite(p.clamp_value) ? p.clamp_value : 1.0f;
    for (int64_t i = 0; i < G.n; ++i) {
        const unsigned v = next(&r);
        store(dt, G.p, i, v == 0 ? c : v == 1 ? -c : v == 2 ? NAN : ((int)v - 128) / 24.0);
    }
    for (int64_t i = 0; i < U.n; ++i) {
        const unsigned v = next(&r);
        store(dt, U.p, i, v == 0 ? c : v == 1 ? -c : ((int)v - 128) / 24.0);
    }
    buf *ins8[2] = {&G8, &U8};
    for (int k = 0; k < 2; ++k)
        for (int64_t i = 0; i < ins8[k]->n; ++i) {
            const unsigned v = next(&r);
            if (in_dt == 3) /* |value| <= 15 except the NaN codes */
                ins8[k]->p[i] = (v & 0x7f) == 0x7f
                                    ? (uint8_t)v
                                    : (uint8_t)((v & 0x87) | ((v >> 3 & 15) % 11) << 3);
            else
                store(in_dt, ins8[k]->p, i, ((int)v - 128) / 24.0);
        }
    for (int64_t i = 0; i < B.n; ++i) store(dt, B.p, i, ((int)next(&r) - 128) / 64.0);
    for (int64_t i = 0; i < Wt.n; ++i) store(wdt, Wt.p, i, next(&r) / 128.0);
    for (int64_t i = 0; i < S.n; ++i) ((float *)S.p)[i] = 0.25f + (float)next(&r) / 128.0f;
    for (int64_t i = 0; i < DY.n; ++i) store(dt, DY.p, i, ((int)next(&r) - 128) / 32.0);
    buf *outs[] = {&Y, &DG, &DU, &DB, &DW, &S8};
    for (size_t k = 0; k < sizeof outs / sizeof *outs; ++k)
        if (outs[k]->p) memset(outs[k]->p, 0x7f, (size_t)outs[k]->n * outs[k]->es + 1);
    memset(WS.p, 0xff, (size_t)WS.n + 1);
    buf *all[] = {&G, &U, &G8, &U8, &B, &Wt, &S, &DY, &Y, &DG, &DU, &DB, &DW, &WS, &S8};
    for (size_t k = 0; k < sizeof all / sizeof *all; ++k)
        if (all[k]->p) buf_snap(all[k]);

    /* ---- pointers ---- */
    const void *gate = null_gate ? NULL : G.p + off[0] * es + byte_off;
    const void *up = il        ? (up_il ? (const void *)U.p : NULL)
                     : null_up ? NULL
                               : (const void *)(U.p + off[1] * es);
    if (il && up_il && !U.p) up = G.p; /* any non-NULL pointer */
    const void *gate_in = gate, *up_in = up;
    if (in_dt != dt) { /* (byte_off misaligns only a gate of dtype) */
        gate_in = null_gate ? NULL : G8.p + off[0] * in_es;
        up_in = il ? up : null_up ? NULL : (const void *)(U8.p + off[1] * in_es);
    }
    const void *bias = has_bias ? B.p + off[2] * es : NULL;
    const void *weights = wdt >= 0 ? Wt.p + off[3] * w_es : NULL;
    const float *scale = S.p ? (const float *)(S.p + off[4] * 4) : NULL;
    const void *dy = DY.p + off[5] * es;
    void *y = Y.p + off[6] * es;
    void *d_gate = DG.p + off[7] * es;
    void *d_up = DU.p ? (void *)(DU.p + off[8] * es) : NULL;
    void *dbias = want_db ? (void *)(DB.p + off[9] * es) : NULL;
    void *dweights = want_dw ? (void *)(DW.p + off[10] * w_es) : NULL;
    void *workspace = ws_kind == 6 ? NULL : WS.p + (ws_kind == 7 ? 4 : 0);
    int64_t d_gate_rs = dg_rs, d_up_rs = du_rs;
    /* aliasing */
    int illegal_alias = 0, in_place = 0;
    void *saved8 = S8.p ? (void *)(S8.p + off[11]) : NULL;
    if (s8_kind == 7 && gate) saved8 = (void *)gate, illegal_alias = 1;
    if (s8_kind == 8 && (il ? gate : up)) saved8 = (void *)(il ? gate : up), illegal_alias = 1;
    if (s8_kind == 9) saved8 = y, illegal_alias = 1;
    if (alias == 1 && gate && G.n > 0) y = (void *)gate, illegal_alias = 1;
    if (alias >= 2 && alias <= 4 && gate_in && (il || up_in)) {
        d_gate = (void *)gate_in, d_gate_rs = g_rs; /* the in-place backward */
        if (!il) d_up = (void *)up_in, d_up_rs = u_rs;
        in_place = 1;
    }
    if (alias == 5 && bias && dbias) dbias = (void *)bias, illegal_alias = 2;
    if (alias == 6 && weights && dweights) dweights = (void *)weights, illegal_alias = 2;
    if (alias == 7) d_gate = (void *)dy, d_gate_rs = dy_rs, illegal_alias = 2;
    if (alias == 8 && workspace && need > 0) workspace = d_gate, illegal_alias = 2;
    /* where the gradients land: their own buffers, or the inputs' (in place) */
    buf *dgb = in_place ? (in_dt != dt ? &G8 : &G) : &DG;
    buf *dub = in_place ? (in_dt != dt ? &U8 : &U) : &DU;
    const int64_t dg_off = in_place ? off[0] : off[7], du_off = in_place ? off[1] : off[8];

    /* ---- forward ---- */
    fastglu_status st = glu_fwd_cpu_flat(&p, gate, g_rs, up, u_rs, bias, weights,
                                         (fastglu_dtype)(wdt >= 0 ? wdt : 0), w_st, y, y_rs, saved8,
                                         s8_rs, T, F, (fastglu_dtype)dt);
    const int nonempty = T > 0 && F > 0;
    if (st != FASTGLU_SUCCESS) {
        n_fwd_err++;
        for (size_t k = 0; k < sizeof all / sizeof *all; ++k) check_unchanged(all[k]);
    } else if (!nonempty) {
        for (size_t k = 0; k < sizeof all / sizeof *all; ++k) check_unchanged(all[k]);
    } else {
        if (illegal_alias == 1) abort(); /* an output overlapping an input was accepted */
        n_fwd_ok++;
        if (!valid_dtype(dt) || byte_off || !gate) abort();
        for (int64_t t = 0; t < T; ++t) {
            const double w = weights ? load(wdt, weights, t * w_st) : 1.0;
            for (int64_t j = 0; j < F; ++j) {
                const int64_t gi = t * g_rs + (il ? 2 * j : j);
                const double g = load(dt, gate, gi);
                const double u = il ? load(dt, gate, gi + 1) : load(dt, up, t * u_rs + j);
                const double bg = bias ? load(dt, bias, il ? 2 * j : j) : 0.0;
                const double bu = bias ? load(dt, bias, il ? 2 * j + 1 : F + j) : 0.0;
                const refv rv = ref_eval(&p, g, u, bg, bu, w, 0.0);
                if (!close_enough(dt, load(dt, y, t * y_rs + j), rv.y, rv.y_mag)) abort();
                if (saved8) { /* the operands' fp8 copy, in their layout */
                    const uint8_t *row = (const uint8_t *)saved8 + t * s8_rs;
                    if (row[il ? 2 * j : j] != ref_e4m3(copy_operand(g, 0, p.clamp_value))) abort();
                    if (row[il ? 2 * j + 1 : F + j] != ref_e4m3(copy_operand(u, 1, p.clamp_value)))
                        abort();
                }
            }
        }
        mark(&Y, off[6], T, F, y_rs);
        if (saved8) {
            if (!S8.p) abort(); /* an aliased copy was accepted */
            mark(&S8, off[11], T, 2 * F, s8_rs);
            n_fp8_store_ok++;
        }
        for (size_t k = 0; k < sizeof all / sizeof *all; ++k) check_unmarked(all[k]);
        memset(Y.mask, 0, (size_t)Y.n);
        if (S8.p) memset(S8.mask, 0, (size_t)S8.n);
    }
    /* the backward starts from the same images */
    for (size_t k = 0; k < sizeof all / sizeof *all; ++k)
        if (all[k]->p) memcpy(all[k]->p, all[k]->before, (size_t)all[k]->n * all[k]->es + 1);

    /* ---- backward ---- */
    st = glu_bwd_cpu_flat(&p, dy, dy_rs, dy_cs, gate_in, g_rs, up_in, u_rs, (fastglu_dtype)in_dt,
                          scale, sc_st, blk, bias, weights, (fastglu_dtype)(wdt >= 0 ? wdt : 0),
                          w_st, d_gate, d_gate_rs, d_up, d_up_rs, dbias, dweights, workspace,
                          ws_bytes, T, F, (fastglu_dtype)dt);
    if (st != FASTGLU_SUCCESS) {
        n_bwd_err++;
        for (size_t k = 0; k < sizeof all / sizeof *all; ++k) check_unchanged(all[k]);
    } else if (!nonempty) {
        /* only the zero-filled reductions */
        if (dbias && F > 0) {
            for (int64_t i = 0; i < 2 * F; ++i)
                if (load(dt, dbias, i) != 0.0 || signbit(load(dt, dbias, i))) abort();
            mark(&DB, off[9], 1, 2 * F, 0);
        }
        if (dweights && T > 0) {
            for (int64_t i = 0; i < T; ++i)
                if (load(wdt, dweights, i) != 0.0) abort();
            mark(&DW, off[10], 1, T, 0);
        }
        for (size_t k = 0; k < sizeof all / sizeof *all; ++k) check_unmarked(all[k]);
    } else {
        if (illegal_alias == 2) abort();
        if (!valid_dtype(dt) || (byte_off && in_dt == dt) || !gate_in) abort();
        if (ws_kind >= 5 && need > 0) abort(); /* a missing, short or misaligned workspace */
        n_bwd_ok++, n_in_place_ok += in_place, n_fp8_ok += in_dt == 3;
        n_red_ok += (dbias != NULL) + (dweights != NULL);
        const unsigned char *gimg = (in_dt != dt ? G8.before : G.before) + off[0] * in_es;
        const unsigned char *uimg =
            il ? gimg : (in_dt != dt ? U8.before : U.before) + off[1] * in_es;
        double *db = calloc((size_t)(4 * Fn), sizeof(double)), *dbm = db + 2 * Fn;
        const int clamp = p.clamp_value > 0;
        for (int64_t t = 0; t < T; ++t) {
            const double w = weights ? load(wdt, weights, t * w_st) : 1.0;
            const float *srow = in_dt == 3 && scale ? scale + t * sc_st : NULL;
            double dw = 0, dwm = 0;
            for (int64_t j = 0; j < F; ++j) {
                const int64_t gi = t * g_rs + (il ? 2 * j : j);
                double g = load(in_dt, gimg, gi);
                double u = il ? load(in_dt, gimg, gi + 1) : load(in_dt, uimg, t * u_rs + j);
                /* the decoding scales: the row's one, or the blocks of gate and up column j */
                const int64_t bg_blk = !blk ? 0 : il ? 2 * j / 128 : j / 128;
                const int64_t bu_blk = !blk || il ? bg_blk : (F + 127) / 128 + j / 128;
                const double sg = srow ? srow[bg_blk] : 1.0, su = srow ? srow[bu_blk] : 1.0;
                if (in_dt == 3) g = (float)(g * sg), u = (float)(u * su);
                const int64_t bgi = il ? 2 * j : j, bui = il ? 2 * j + 1 : F + j;
                const double bg = bias ? load(dt, bias, bgi) : 0.0;
                const double bu = bias ? load(dt, bias, bui) : 0.0;
                const double d = load(dt, dy, t * dy_rs + j * dy_cs);
                const refv rv = ref_eval(&p, g, u, bg, bu, w, d);
                const int pg = !clamp || g <= p.clamp_value;
                const int pu = !clamp || (u >= -p.clamp_value && u <= p.clamp_value);
                const unsigned char *dgp = dgb->p + dg_off * es;
                const unsigned char *dup = il ? dgp : dub->p + du_off * es;
                const double got_g = load(dt, dgp, t * d_gate_rs + (il ? 2 * j : j));
                const double got_u =
                    il ? load(dt, dgp, t * d_gate_rs + 2 * j + 1) : load(dt, dup, t * d_up_rs + j);
                if (!close_enough(dt, got_g, pg ? rv.da : 0.0, pg ? rv.da_mag : 0.0)) abort();
                if (!close_enough(dt, got_u, pu ? rv.dv : 0.0, pu ? rv.dv_mag : 0.0)) abort();
                db[bgi] += rv.da, dbm[bgi] += rv.da_mag;
                db[bui] += rv.dv, dbm[bui] += rv.dv_mag;
                dw += rv.dw, dwm += rv.dw_mag;
            }
            if (dweights && !close_enough(wdt, load(wdt, dweights, t), dw, dwm)) abort();
        }
        if (dbias)
            for (int64_t i = 0; i < 2 * F; ++i)
                if (!close_enough(dt, load(dt, dbias, i), db[i], dbm[i])) abort();
        free(db);
        mark(dgb, dg_off, T, W, d_gate_rs);
        if (!il) mark(dub, du_off, T, F, d_up_rs);
        if (dbias) mark(&DB, off[9], 1, 2 * F, 0);
        if (dweights) mark(&DW, off[10], 1, T, 0);
        if (need) mark(&WS, 0, 1, WS.n, 0); /* scratch */
        for (size_t k = 0; k < sizeof all / sizeof *all; ++k) check_unmarked(all[k]);
    }
    for (size_t k = 0; k < sizeof all / sizeof *all; ++k) buf_free(all[k]);
    return 0;
}

#ifdef FASTGLU_FUZZ_STANDALONE
/* Without libFuzzer (gcc): random inputs for a bounded time, under the same sanitizers.
 *   fuzz_glu_standalone SECONDS [SEED] */
#include <stdio.h>

int main(int argc, char **argv) {
    static uint8_t buf_[16384];
    const long runs = fuzz_standalone("fuzz_glu_standalone", argc, argv, buf_, sizeof buf_, 32);
    printf("fuzz_glu_standalone: %ld inputs, no failure (forward: %ld computed (%ld with an fp8 "
           "copy), %ld rejected; backward: %ld computed (%ld in place, %ld from fp8, %ld "
           "reductions), %ld rejected)\n",
           runs, n_fwd_ok, n_fp8_store_ok, n_fwd_err, n_bwd_ok, n_in_place_ok, n_fp8_ok, n_red_ok,
           n_bwd_err);
    printf("fuzz_glu_standalone: swiglu entry points: forward: %ld computed, %ld rejected; "
           "backward: %ld computed, %ld of them in place, %ld rejected\n",
           n_sw_fwd_ok, n_sw_fwd_err, n_sw_bwd_ok, n_sw_in_place_ok, n_sw_bwd_err);
    return 0;
}
#endif
