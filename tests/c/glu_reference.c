/*
 * glu_reference.c — see glu_reference.h.
 *
 * One case = one forward and one backward call on fresh random inputs (never zeros). Every
 * buffer is uploaded from a host image and its pre-call image kept; output buffers are pre-filled
 * with a sentinel (0x7f bytes: a huge finite value or NaN in every dtype), the workspace with 0xff
 * bytes (fp32 NaN: a partial sum the backend forgot to initialize poisons its result). After the
 * calls each output element is compared with a float64 reference computed from the stored inputs
 * (relative norm error <= the dtype's tolerance, and elementwise |got - ref| <= tol (|ref| + rms)),
 * and every byte of every buffer that is not an output element of this call must equal its
 * pre-call image (gaps between strided rows, the elements either side, the inputs).
 *
 * The reference follows include/fastglu.h literally, in double: clamp of the raw operand at
 * clamp_value rounded to the operands' dtype (torch.clamp on a tensor of that dtype: NaN stays
 * NaN), bias, activation of m_g * a, y = m_d w act (v + o); gradients with
 * torch.clamp's mask on the raw operand; dbias = sum over tokens of the unmasked d_a / d_v;
 * dweights = sum over columns. An fp8 operand is decode(byte) * scale_inv rounded to fp32 (the
 * contract's fp32 operand), decoded by a table built from the e4m3fn definition with ldexp.
 *
 * The forward's fp8 copy of its operands (saved_fp8) is compared byte for byte with ref_e4m3: the
 * e4m3fn value nearest to the operand, found by search in that table (ties to the even code,
 * saturating at +-448, NaN kept with its sign): torch's `.to(torch.float8_e4m3fn)` written from its
 * definition, independently of src/fp8.h; with a clamp, of the operand moved to the clamp's side
 * of the bound (ref_fp8_operand, from the table). Its buffer has padded rows, an offset and
 * trailing bytes, all pre-filled with 0x7f (an fp8 NaN, which no finite operand casts to). A
 * backward that reads the copy is checked against torch.clamp's mask of the raw operands.
 */
#include "glu_reference.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "convert.h"

/* ---- random numbers (splitmix64 + Box-Muller) --------------------------------------------- */

static uint64_t rng_state;

static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_uniform(void) { return (rng_next() >> 11) / 9007199254740992.0; } /* [0, 1) */

static double rng_normal(void) {
    double u1 = ((rng_next() >> 11) + 1.0) / 9007199254740994.0;
    double u2 = (rng_next() >> 11) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void glu_seed(const char *name) {
    const char *env = getenv("FASTGLU_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ (uint64_t)clock();
    rng_state = seed;
    printf("%s: seed %llu (set FASTGLU_TEST_SEED to repeat)\n", name, (unsigned long long)seed);
}

/* ---- fp8 e4m3fn, from its definition ------------------------------------------------------ */

static double fp8_table[256];

static void fp8_init(void) {
    for (int b = 0; b < 256; ++b) {
        const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
        double v;
        if (e == 15 && m == 7)
            v = NAN;
        else if (e == 0)
            v = ldexp(m / 8.0, -6); /* subnormal: 2^(1 - 7) * m / 8 */
        else
            v = ldexp(1.0 + m / 8.0, e - 7);
        fp8_table[b] = s ? -v : v;
    }
}

/* x cast to e4m3fn as torch's .to(torch.float8_e4m3fn): the nearest of the finite codes 0x00 ..
 * 0x7e (ascending values) by magnitude, the even code on a tie; 448 for anything at or above it
 * (saturation, +-Inf included); NaN -> 0x7f with x's sign. */
/* Equal codes, or two NaNs: the GPU's fp16 -> fp32 conversion does not keep a NaN's sign
 * (cvt.f32.f16 returns the canonical NaN), so a NaN's copy may be 0x7f or 0xff. */
static int same_e4m3(uint8_t a, uint8_t b) {
    return a == b || ((a & 0x7f) == 0x7f && (b & 0x7f) == 0x7f);
}

static uint8_t ref_e4m3(double x) {
    const uint8_t sign = signbit(x) ? 0x80 : 0x00;
    if (isnan(x)) return sign | 0x7f;
    const double a = fabs(x);
    if (a >= 448.0) return sign | 0x7e;
    int lo = 0, hi = 0x7e; /* fp8_table[lo] <= a < fp8_table[hi] */
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (fp8_table[mid] <= a)
            lo = mid;
        else
            hi = mid;
    }
    const double below = a - fp8_table[lo], above = fp8_table[hi] - a;
    const int k = below < above ? lo : above < below ? hi : (lo % 2 == 0 ? lo : hi);
    return sign | (uint8_t)k;
}

/* ---- typed element access on host images -------------------------------------------------- */

static double load(fastglu_dtype dt, const void *p, int64_t i) {
    switch (dt) {
    case FASTGLU_DTYPE_FP32: return ((const float *)p)[i];
    case FASTGLU_DTYPE_FP16: return fp16_to_f32(((const uint16_t *)p)[i]);
    case FASTGLU_DTYPE_BF16: return bf16_to_f32(((const uint16_t *)p)[i]);
    case FASTGLU_DTYPE_FP8_E4M3: return fp8_table[((const uint8_t *)p)[i]];
    }
    return NAN;
}

static void store(fastglu_dtype dt, void *p, int64_t i, double v) {
    switch (dt) {
    case FASTGLU_DTYPE_FP32: ((float *)p)[i] = (float)v; break;
    case FASTGLU_DTYPE_FP16: ((uint16_t *)p)[i] = f32_to_fp16((float)v); break;
    case FASTGLU_DTYPE_BF16: ((uint16_t *)p)[i] = f32_to_bf16((float)v); break;
    case FASTGLU_DTYPE_FP8_E4M3: break;
    }
}

static const char *dtype_name(fastglu_dtype dt) {
    switch (dt) {
    case FASTGLU_DTYPE_FP32: return "fp32";
    case FASTGLU_DTYPE_FP16: return "fp16";
    case FASTGLU_DTYPE_BF16: return "bf16";
    case FASTGLU_DTYPE_FP8_E4M3: return "fp8";
    }
    return "?";
}

/* The clamp bound of the math: clamp_value rounded to dt (torch.clamp rounds its bound to the
 * tensor's dtype); 0 for no clamp. */
static double ref_clamp(float clamp_value, fastglu_dtype dt) {
    if (!(clamp_value > 0)) return 0.0;
    unsigned char b[4];
    store(dt, b, 0, clamp_value);
    return load(dt, b, 0);
}

/* The value the forward's fp8 copy casts under the clamp c (include/fastglu.h, saved_fp8): with lo
 * the largest e4m3 value <= c and hi the smallest > c (searched in the table), a cut operand becomes
 * +-hi and an uncut one is kept within [-lo, lo] (gate: <= lo); NaN stays NaN. */
static double ref_fp8_operand(double x, int is_up, double c) {
    double lo = 0.0, hi = 448.0;
    for (int k = 0; k <= 0x7e; ++k) {
        if (fp8_table[k] <= c && fp8_table[k] > lo) lo = fp8_table[k];
        if (fp8_table[k] > c && fp8_table[k] < hi) hi = fp8_table[k];
    }
    if (isnan(x)) return x;
    if (x > c) return hi;
    if (is_up && x < -c) return -hi;
    if (x > lo) return lo;
    if (is_up && x < -lo) return -lo;
    return x;
}

static double tolerance(fastglu_dtype dt) {
    return dt == FASTGLU_DTYPE_FP32 ? 1e-5 : dt == FASTGLU_DTYPE_FP16 ? 1e-3 : 1e-2;
}

/* ---- the reference math (include/fastglu.h), in double ------------------------------------ */

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

static double ref_act(fastglu_activation a, double z) {
    switch (a) {
    case FASTGLU_ACT_SILU: return z * sigmoid(z);
    case FASTGLU_ACT_GELU_TANH:
        return 0.5 * z * (1.0 + tanh(0.79788456 * z * (1.0 + 0.044715 * z * z)));
    case FASTGLU_ACT_QUICK_GELU: return z * sigmoid(1.702 * z);
    }
    return NAN;
}

static double ref_dact(fastglu_activation a, double z) {
    switch (a) {
    case FASTGLU_ACT_SILU: {
        double s = sigmoid(z);
        return s * (1.0 + z * (1.0 - s));
    }
    case FASTGLU_ACT_GELU_TANH: {
        double th = tanh(0.79788456 * z * (1.0 + 0.044715 * z * z));
        return 0.5 * z * (1.0 - th * th) * (0.79788456 + 0.1070322243 * z * z) + 0.5 * (1.0 + th);
    }
    case FASTGLU_ACT_QUICK_GELU: {
        double s = sigmoid(1.702 * z);
        return s * (1.0 + 1.702 * z * (1.0 - s));
    }
    }
    return NAN;
}

/* One element of the reference (glu_reference.h's glu_ref_eval). */
glu_ref_point glu_ref_eval(const fastglu_glu_params *p, double g, double u, double bg, double bu,
                           double w, double dy) {
    const int clamp = p->clamp_value > 0;
    const double cv = p->clamp_value, o = p->glu_linear_offset, mg = p->gate_multiplier,
                 md = p->down_multiplier;
    double a = g, v = u;
    if (clamp) {
        a = a > cv ? cv : a;
        v = v > cv ? cv : (v < -cv ? -cv : v);
    }
    const double z_mag = fabs(mg) * (fabs(a) + fabs(bg)), vo_mag = fabs(v) + fabs(bu) + fabs(o);
    a += bg, v += bu;
    const double z = mg * a, act = ref_act(p->activation, z), dact = ref_dact(p->activation, z);
    const double vo = v + o;
    double act_mag, dact_mag;
    switch (p->activation) {
    case FASTGLU_ACT_GELU_TANH: {
        const double th = tanh(0.79788456 * z * (1.0 + 0.044715 * z * z));
        act_mag = 0.5 * fabs(z) * (1.0 + fabs(th));
        dact_mag = 0.5 * fabs(z) * (1.0 + th * th) * (0.79788456 + 0.1070322243 * z * z) +
                   0.5 * (1.0 + fabs(th));
        break;
    }
    default: {
        const double k = p->activation == FASTGLU_ACT_QUICK_GELU ? 1.702 : 1.0, s = sigmoid(k * z);
        act_mag = fabs(z) * s;
        dact_mag = s * (1.0 + k * fabs(z) * (1.0 + s));
        break;
    }
    }
    const double h = 1e-6 * (1.0 + fabs(z));
    const double d2act =
        (ref_dact(p->activation, z + h) - ref_dact(p->activation, z - h)) / (2 * h);
    act_mag += fabs(dact) * z_mag;
    dact_mag += fabs(d2act) * z_mag;
    const double e = md * w * dy;
    glu_ref_point r;
    r.y = md * w * act * vo;
    r.d_a = e * vo * dact * mg;
    r.d_v = e * act;
    r.dw_term = md * act * vo * dy;
    r.y_mag = fabs(md * w) * (act_mag * vo_mag);
    r.d_a_mag = fabs(e * mg) * vo_mag * dact_mag;
    r.d_v_mag = fabs(e) * act_mag;
    r.dw_mag = fabs(md * dy) * act_mag * vo_mag;
    return r;
}

/* ---- device buffers with host images ------------------------------------------------------ */

typedef struct dbuf {
    size_t es;
    int64_t n;              /* elements */
    unsigned char *h;       /* host image: before the call, then what came back */
    unsigned char *before;  /* the image that was uploaded */
    unsigned char *written; /* per element: 1 if this call may write it */
    void *d;
} dbuf;

static void dbuf_init(const glu_backend *b, dbuf *x, size_t es, int64_t n) {
    x->es = es;
    x->n = n;
    x->h = calloc((size_t)n * es + 1, 1);
    x->before = malloc((size_t)n * es + 1);
    x->written = calloc((size_t)n + 1, 1);
    x->d = b->alloc((size_t)n * es);
}

static void dbuf_upload(const glu_backend *b, dbuf *x) {
    memcpy(x->before, x->h, (size_t)x->n * x->es);
    b->upload(x->d, x->h, (size_t)x->n * x->es);
}

static void dbuf_download(const glu_backend *b, dbuf *x) {
    b->download(x->h, x->d, (size_t)x->n * x->es);
}

static void dbuf_free(const glu_backend *b, dbuf *x) {
    if (x->d) b->release(x->d);
    free(x->h), free(x->before), free(x->written);
    memset(x, 0, sizeof *x);
}

/* Marks elements off + t * rs + j * step (t < rows, j < cols) as outputs of this call. */
static void mark(dbuf *x, int64_t off, int64_t rows, int64_t cols, int64_t rs, int64_t step) {
    for (int64_t t = 0; t < rows; ++t)
        for (int64_t j = 0; j < cols; ++j) x->written[off + t * rs + j * step] = 1;
}

/* Bytes of non-output elements that differ from the uploaded image. */
static int64_t damage(const dbuf *x) {
    int64_t bad = 0;
    for (int64_t e = 0; e < x->n; ++e)
        if (!x->written[e] && memcmp(x->h + e * x->es, x->before + e * x->es, x->es) != 0) bad++;
    return bad;
}

/* ---- one case ----------------------------------------------------------------------------- */

enum { W_NONE, W_FP32, W_BF16_S3, W_FP16_S0, W_FP32_S2, W_KINDS };
/* the backward's saved input: the operands themselves; random fp8 bytes (no scale, a per-tensor
 * scale, per-token scales); the forward's own fp8 copy (saved_fp8, no scale); or random fp8 bytes
 * with 1 x 128 block scales (scale_1x128) */
enum { FP8_NONE, FP8_PLAIN, FP8_TENSOR, FP8_TOKEN, FP8_STORED, FP8_BLOCK, FP8_KINDS };

/* FP8_BLOCK: the blocks of a row and the block of gate / up column j (include/fastglu.h,
 * fastglu_glu_operands.scale_1x128) */
static int64_t ref_scale_blocks(int il, int64_t F) {
    return il ? (2 * F + 127) / 128 : 2 * ((F + 127) / 128);
}
static int64_t ref_scale_block(int il, int64_t F, int64_t j, int is_up) {
    return il ? 2 * j / 128 : j / 128 + (is_up ? (F + 127) / 128 : 0);
}
/* operand geometry: 0 contiguous; 1 fc1-style (SPLIT: gate and up halves of one padded row) with
 * dy column stride 2; 2 misaligned offsets and odd pads, dy transposed; 3 input rows broadcast
 * (row stride 0), dy scalar (strides 0, 0); 4 separate padded gate and up, dy row-broadcast */
enum { GEO_KINDS = 5 };

typedef struct glu_case {
    fastglu_glu_params p;
    int bias, weights, fp8, geo, in_place, want_dbias, want_dweights;
    int store8; /* the forward also writes saved_fp8 (always with FP8_STORED), checked bytewise */
    fastglu_dtype dt;
    int64_t T, F;
} glu_case;

static int failures, checks;

static void describe(const glu_case *c, char *s, size_t n) {
    snprintf(s, n,
             "act=%d layout=%s bias=%d weights=%d clamp=%g off=%g mg=%g md=%g fp8=%d store8=%d "
             "geo=%d in_place=%d dbias=%d dweights=%d %s T=%lld F=%lld",
             (int)c->p.activation, c->p.layout ? "interleaved" : "split", c->bias, c->weights,
             (double)c->p.clamp_value, (double)c->p.glu_linear_offset, (double)c->p.gate_multiplier,
             (double)c->p.down_multiplier, c->fp8, c->store8 || c->fp8 == FP8_STORED, c->geo,
             c->in_place, c->want_dbias, c->want_dweights, dtype_name(c->dt), (long long)c->T,
             (long long)c->F);
}

static void fail(const glu_backend *b, const glu_case *c, const char *what, double value) {
    char s[512];
    describe(c, s, sizeof s);
    printf("FAIL %s %s (%g): %s\n", b->name, what, value, s);
    failures++;
}

/* Smallest positive (subnormal) value of dt: a result below it may legitimately round to 0. */
static double underflow(fastglu_dtype dt) {
    return dt == FASTGLU_DTYPE_FP32   ? ldexp(1.0, -149)
           : dt == FASTGLU_DTYPE_FP16 ? ldexp(1.0, -24)
                                      : ldexp(1.0, -133);
}

#define EPS32 5.9604644775390625e-8 /* 2^-24, fp32's unit roundoff */
#define ALLOW 16.0                  /* unit roundoffs allowed per unit of magnitude */

/*
 * Compares n values: the relative norm error, and each element, after allowing each element
 * ALLOW * EPS32 * mag[i] + underflow(dt) of absolute error, where mag[i] is the running-error
 * magnitude of its formula (every sum's addends taken by absolute value; see glu_ref_point). The
 * allowance is about ALLOW * 2^-24 |ref| (far below every tolerance) where the formula does not
 * cancel, and covers fp32's rounding where it does (GeGLU's 1 + tanh for very negative z, a sum
 * of terms of mixed signs).
 */
static void compare(const glu_backend *b, const glu_case *c, const char *what, fastglu_dtype dt,
                    const double *got, const double *ref, const double *mag, int64_t n) {
    double num = 0, den = 0, worst = 0;
    const double floor_ = underflow(dt);
    for (int64_t i = 0; i < n; ++i) {
        double d = fabs(got[i] - ref[i]) - ALLOW * EPS32 * mag[i] - floor_;
        if (d > 0 || d != d) num += d * d;
        den += ref[i] * ref[i];
    }
    const double rms = sqrt(den / (double)(n > 0 ? n : 1)), tol = tolerance(dt);
    double e = den > 0 ? sqrt(num / den) : sqrt(num);
    if (!(num == num)) e = INFINITY;
    checks++;
    if (!(e <= tol) && getenv("GLU_DEBUG"))
        for (int64_t i = 0; i < n && i < 16; ++i)
            printf("  [%lld] got %.9g ref %.9g mag %.3g\n", (long long)i, got[i], ref[i], mag[i]);
    if (!(e <= tol)) {
        char m[96];
        snprintf(m, sizeof m, "%s relative norm error", what);
        fail(b, c, m, e);
        return;
    }
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < n; ++i) {
        double err = fabs(got[i] - ref[i]);
        if (!(err <= tol * (fabs(ref[i]) + rms) + ALLOW * EPS32 * mag[i] + floor_)) {
            if (first < 0) first = i, worst = err;
            bad++;
        }
    }
    checks++;
    if (bad) {
        char m[160];
        snprintf(m, sizeof m, "%s: %lld elements off, first [%lld] got %.9g want %.9g", what,
                 (long long)bad, (long long)first, got[first], ref[first]);
        fail(b, c, m, worst);
    }
}

static uint8_t random_fp8(void) { /* |value| <= 15, all mantissas, subnormals and zeros */
    const unsigned e = (unsigned)(rng_next() % 11), m = (unsigned)(rng_next() % 8);
    return (uint8_t)((rng_next() & 1u) << 7 | e << 3 | m);
}

/* A random operand value (gate or up); with a clamp, 1 in 4 lands exactly on a boundary (g == c,
 * u == +c, u == -c, c in the dtype), just beyond one, or beyond one. */
static double operand_value(float clamp) {
    if (clamp > 0 && rng_next() % 4 == 0) {
        switch (rng_next() % 6) {
        case 0: return clamp; /* rounded to the dtype when stored: the bound itself */
        case 1: return -clamp;
        case 2: return clamp * 1.5;
        case 3: return -clamp * 1.5;
        case 4: return clamp * 1.03; /* just beyond: e4m3 may round it back onto the bound */
        default: return -clamp * 1.03;
        }
    }
    return 2.0 * rng_normal();
}

static uint8_t operand_fp8(float clamp, double scale_inv, int exact_scale) {
    if (clamp > 0 && exact_scale && rng_next() % 4 == 0) {
        /* the byte whose value times scale_inv is +c or -c (c = 1.5, scale_inv a power of two) */
        const double want = (rng_next() & 1) ? clamp / scale_inv : -clamp / scale_inv;
        for (int k = 0; k < 256; ++k)
            if (fp8_table[k] == want) return (uint8_t)k;
    }
    return random_fp8();
}

static void weights_kind(int kind, fastglu_dtype *wdt, int64_t *ws) {
    switch (kind) {
    case W_FP32: *wdt = FASTGLU_DTYPE_FP32, *ws = 1; break;
    case W_BF16_S3: *wdt = FASTGLU_DTYPE_BF16, *ws = 3; break;
    case W_FP16_S0: *wdt = FASTGLU_DTYPE_FP16, *ws = 0; break;
    case W_FP32_S2: *wdt = FASTGLU_DTYPE_FP32, *ws = 2; break;
    default: *wdt = FASTGLU_DTYPE_FP32, *ws = 1; break;
    }
}

static void run_case(const glu_backend *b, const glu_case *c) {
    const fastglu_glu_params *p = &c->p;
    const int64_t T = c->T, F = c->F;
    const fastglu_dtype dt = c->dt;
    const size_t es = fastglu_dtype_size(dt);
    const int il = p->layout == FASTGLU_LAYOUT_INTERLEAVED;
    const int64_t W = il ? 2 * F : F; /* width of the gate operand and of d_gate */
    const int in_place = c->in_place && c->fp8 == FP8_NONE && c->geo != 3;
    const int random8 = c->fp8 != FP8_NONE && c->fp8 != FP8_STORED; /* random fp8 bytes */
    const int store8 = c->store8 || c->fp8 == FP8_STORED;
    const int clamp = p->clamp_value > 0;
    const float cv = p->clamp_value;
    const double ce = ref_clamp(cv, dt); /* the bound in the operands' dtype */
    fastglu_glu_params pr = *p;          /* the reference's params: that bound */
    pr.clamp_value = (float)ce;

    /* ---- geometry ---- */
    int64_t off = 0, pad = 0, opad = 0, dy_rs = F, dy_cs = 1, dy_n = T * F;
    int combined = 0; /* SPLIT: gate and up in one buffer (fc1 layout) */
    switch (c->geo) {
    case 1:
        off = 8, pad = 24, opad = 8, combined = 1, dy_rs = 2 * F, dy_cs = 2, dy_n = T * 2 * F;
        break;
    case 2: off = 3, pad = 5, opad = 1, dy_rs = 1, dy_cs = T, dy_n = T * F; break;
    case 3: off = 1, pad = 0, opad = 2, dy_rs = 0, dy_cs = 0, dy_n = 1; break;
    case 4: off = 2, pad = 6, opad = 3, dy_rs = 0, dy_cs = 1, dy_n = F; break;
    default: combined = (T % 2 == 0); break; /* contiguous fc1 output [T, 2F] on even T */
    }
    if (il) combined = 0;
    /* gate operand buffer G (and U for a separate SPLIT up) */
    const int64_t g_row = il ? 2 * F : (combined ? 2 * F : F);
    const int64_t g_rs = c->geo == 3 && T > 1 ? 0 : g_row + pad;
    const int64_t u_rs = combined ? g_rs : (c->geo == 3 && T > 1 ? 0 : F + pad + (c->geo ? 2 : 0));
    const int64_t g_off = off, u_off = combined ? off + F : off + 1;
    const int64_t g_n = g_off + (T - 1) * g_rs + g_row + 1;
    const int64_t u_n = il || combined ? 0 : u_off + (T - 1) * u_rs + F + 1;

    fastglu_dtype wdt = FASTGLU_DTYPE_FP32;
    int64_t wst = 1;
    weights_kind(c->weights, &wdt, &wst);
    const size_t wes = fastglu_dtype_size(wdt);

    dbuf G = {0}, U = {0}, G8 = {0}, U8 = {0}, BI = {0}, WT = {0}, SC = {0}, DY = {0}, Y = {0},
         DG = {0}, DU = {0}, DB = {0}, DW = {0}, WS = {0}, S8 = {0};
    dbuf_init(b, &G, es, g_n);
    if (u_n) dbuf_init(b, &U, es, u_n);
    for (int64_t i = 0; i < g_n; ++i) store(dt, G.h, i, operand_value(cv));
    for (int64_t i = 0; i < u_n; ++i) store(dt, U.h, i, operand_value(cv));

    /* fp8 saved input: same element geometry, its own random bytes */
    double scale_tensor = 1.0;
    int64_t sc_stride = 0;
    if (random8) {
        dbuf_init(b, &G8, 1, g_n);
        if (u_n) dbuf_init(b, &U8, 1, u_n);
        if (c->fp8 == FP8_TENSOR) scale_tensor = 0.5;
        const int exact = c->fp8 != FP8_TOKEN && c->fp8 != FP8_BLOCK;
        for (int64_t i = 0; i < g_n; ++i) G8.h[i] = operand_fp8(cv, scale_tensor, exact);
        for (int64_t i = 0; i < u_n; ++i) U8.h[i] = operand_fp8(cv, scale_tensor, exact);
        if (c->fp8 == FP8_TENSOR) {
            dbuf_init(b, &SC, 4, 1);
            ((float *)SC.h)[0] = (float)scale_tensor;
        } else if (c->fp8 == FP8_TOKEN || c->fp8 == FP8_BLOCK) {
            const int64_t nb = c->fp8 == FP8_BLOCK ? ref_scale_blocks(il, F) : 1;
            sc_stride = nb + (c->geo % 2);
            dbuf_init(b, &SC, 4, (T - 1) * sc_stride + nb);
            for (int64_t i = 0; i < SC.n; ++i)
                ((float *)SC.h)[i] = (float)(0.5 + 1.5 * rng_uniform());
        }
    }
    if (c->bias) {
        dbuf_init(b, &BI, es, 2 * F + 1);
        for (int64_t i = 0; i < BI.n; ++i) store(dt, BI.h, i, 0.5 * rng_normal());
    }
    if (c->weights) {
        dbuf_init(b, &WT, wes, (T - 1) * wst + 2);
        for (int64_t i = 0; i < WT.n; ++i) store(wdt, WT.h, i, 0.1 + rng_uniform());
    }
    dbuf_init(b, &DY, es, dy_n);
    for (int64_t i = 0; i < dy_n; ++i) store(dt, DY.h, i, rng_normal());

    /* outputs: one element in from their buffer's start, padded rows, sentinel-filled */
    const int64_t y_rs = F + opad;
    dbuf_init(b, &Y, es, 1 + (T - 1) * y_rs + F + 2);
    memset(Y.h, 0x7f, Y.n * es);
    int64_t dg_rs, du_rs, dg_off, du_off;
    dbuf *dgb, *dub;
    if (in_place) {
        dgb = &G, dg_rs = g_rs, dg_off = g_off;
        dub = combined ? &G : &U, du_rs = u_rs, du_off = u_off;
    } else {
        dg_rs = W + opad, dg_off = 1;
        dbuf_init(b, &DG, es, 1 + (T - 1) * dg_rs + W + 2);
        memset(DG.h, 0x7f, DG.n * es);
        dgb = &DG;
        if (!il) {
            du_rs = F + opad + 1, du_off = 2;
            dbuf_init(b, &DU, es, 2 + (T - 1) * du_rs + F + 2);
            memset(DU.h, 0x7f, DU.n * es);
        } else {
            du_rs = 0, du_off = 0;
        }
        dub = &DU;
    }
    const int want_db = c->want_dbias && c->bias, want_dw = c->want_dweights && c->weights;
    if (want_db) {
        dbuf_init(b, &DB, es, 2 * F + 2);
        memset(DB.h, 0x7f, DB.n * es);
    }
    if (want_dw) {
        dbuf_init(b, &DW, wes, T + 2);
        memset(DW.h, 0x7f, DW.n * wes);
    }
    const size_t wsb = fastglu_glu_bwd_workspace_bytes(T, F, want_db, want_dw);
    if (wsb) {
        dbuf_init(b, &WS, 1, (int64_t)wsb);
        memset(WS.h, 0xff, wsb);
    }
    /* the forward's fp8 copy [T, 2F]: an offset and a row pad per geometry (odd ones leave every
     * access width from 16 bytes down to 1), trailing bytes, all pre-filled with 0x7f */
    int64_t s8_off = 0, s8_rs = 2 * F;
    if (store8) {
        static const int64_t offs[GEO_KINDS] = {0, 16, 3, 1, 8}, pads[GEO_KINDS] = {0, 32, 5, 1, 8};
        s8_off = offs[c->geo], s8_rs = 2 * F + pads[c->geo];
        if (c->geo == 3 && T == 1) s8_rs = 0; /* one row: any row stride is legal */
        dbuf_init(b, &S8, 1, s8_off + (T - 1) * s8_rs + 2 * F + 3);
        memset(S8.h, 0x7f, (size_t)S8.n);
    }

    dbuf *all[] = {&G, &U, &G8, &U8, &BI, &WT, &SC, &DY, &Y, &DG, &DU, &DB, &DW, &WS, &S8};
    for (size_t i = 0; i < sizeof all / sizeof *all; ++i)
        if (all[i]->h) dbuf_upload(b, all[i]);

    /* ---- the calls ---- */
    const void *gate = (char *)G.d + g_off * es;
    const void *up = il         ? NULL
                     : combined ? (const void *)((char *)G.d + u_off * es)
                                : (const void *)((char *)U.d + u_off * es);
    const void *gate_in = gate, *up_in = up;
    fastglu_dtype in_dt = dt;
    int64_t g_rs_in = g_rs, u_rs_in = u_rs;
    if (random8) {
        in_dt = FASTGLU_DTYPE_FP8_E4M3;
        gate_in = (char *)G8.d + g_off;
        up_in = il         ? NULL
                : combined ? (const void *)((char *)G8.d + u_off)
                           : (const void *)((char *)U8.d + u_off);
    }
    void *saved8 = store8 ? (char *)S8.d + s8_off : NULL;
    if (c->fp8 == FP8_STORED) { /* the backward reads the forward's copy, as the header says */
        in_dt = FASTGLU_DTYPE_FP8_E4M3;
        gate_in = saved8, up_in = il ? NULL : (const char *)saved8 + F;
        g_rs_in = u_rs_in = s8_rs;
    }
    const void *bias = c->bias ? BI.d : NULL, *weights = c->weights ? WT.d : NULL;
    void *y = (char *)Y.d + es;
    void *d_gate = (char *)dgb->d + dg_off * es;
    void *d_up = il ? NULL : (char *)dub->d + du_off * es;
    fastglu_status st =
        b->fwd(p, gate, g_rs, up, u_rs, bias, weights, wdt, wst, y, y_rs, saved8, s8_rs, T, F, dt);
    b->sync();
    checks++;
    if (st != FASTGLU_SUCCESS) {
        fail(b, c, fastglu_last_error_message(), st);
        goto done;
    }
    st = b->bwd(p, DY.d, dy_rs, dy_cs, gate_in, g_rs_in, up_in, u_rs_in, in_dt, (const float *)SC.d,
                sc_stride, c->fp8 == FP8_BLOCK, bias, weights, wdt, wst, d_gate, dg_rs, d_up, du_rs,
                want_db ? (char *)DB.d + es : NULL, want_dw ? (char *)DW.d + wes : NULL, WS.d, wsb,
                T, F, dt);
    b->sync();
    checks++;
    if (st != FASTGLU_SUCCESS) {
        fail(b, c, fastglu_last_error_message(), st);
        goto done;
    }
    for (size_t i = 0; i < sizeof all / sizeof *all; ++i)
        if (all[i]->h) dbuf_download(b, all[i]);

    /* ---- reference ---- */
    {
        const int64_t n = T * F;
        int64_t s8_bad = 0;
        char s8_msg[200] = "";
        double *buf = calloc((size_t)(9 * n + 6 * F + 3 * T), sizeof(double));
        double *ry = buf, *gy = ry + n, *my = gy + n, *rdg = my + n, *gdg = rdg + n, *mdg = gdg + n;
        double *rdu = mdg + n, *gdu = rdu + n, *mdu = gdu + n;
        double *rdb = mdu + n, *gdb = rdb + 2 * F, *mdb = gdb + 2 * F;
        double *rdw = mdb + 2 * F, *gdw = rdw + T, *mdw = gdw + T;
        const int64_t step = il ? 2 : 1;
        for (int64_t t = 0; t < T; ++t) {
            const double w = c->weights ? load(wdt, WT.before, t * wst) : 1.0;
            const double sinv =
                c->fp8 == FP8_TOKEN ? ((const float *)SC.before)[t * sc_stride] : scale_tensor;
            for (int64_t j = 0; j < F; ++j) {
                const int64_t gi = g_off + t * g_rs + j * step;
                const int64_t ui = il ? gi + 1 : u_off + t * u_rs + j;
                const unsigned char *ub = il || combined ? G.before : U.before;
                const int64_t bgi = il ? 2 * j : j, bui = il ? 2 * j + 1 : F + j;
                const double bg = c->bias ? load(dt, BI.before, bgi) : 0.0;
                const double bu = c->bias ? load(dt, BI.before, bui) : 0.0;
                const double dyv = load(dt, DY.before, t * dy_rs + j * dy_cs);
                /* forward operands */
                glu_ref_point r =
                    glu_ref_eval(&pr, load(dt, G.before, gi), load(dt, ub, ui), bg, bu, w, dyv);
                ry[t * F + j] = r.y, my[t * F + j] = r.y_mag;
                /* backward operands: the same, or the fp8 input as its fp32 operand */
                double g = load(dt, G.before, gi), u = load(dt, ub, ui);
                const double graw = g, uraw = u;
                const uint8_t g8 =
                    ref_e4m3(clamp ? ref_fp8_operand(g, 0, ce) : g); /* the copy's bytes */
                const uint8_t u8w = ref_e4m3(clamp ? ref_fp8_operand(u, 1, ce) : u);
                if (random8) {
                    const unsigned char *u8 = il || combined ? G8.before : U8.before;
                    const int blk = c->fp8 == FP8_BLOCK;
                    const float *srow = blk ? (const float *)SC.before + t * sc_stride : NULL;
                    const double sg = blk ? srow[ref_scale_block(il, F, j, 0)] : sinv;
                    const double su = blk ? srow[ref_scale_block(il, F, j, 1)] : sinv;
                    g = (float)(fp8_table[G8.before[gi]] * sg);
                    u = (float)(fp8_table[u8[ui]] * su);
                } else if (c->fp8 == FP8_STORED) {
                    g = fp8_table[g8], u = fp8_table[u8w];
                }
                if (store8) {
                    const int64_t at = s8_off + t * s8_rs;
                    const int64_t cg = at + (il ? 2 * j : j), cu = at + (il ? 2 * j + 1 : F + j);
                    if (!same_e4m3(S8.h[cg], g8) || !same_e4m3(S8.h[cu], u8w)) {
                        if (s8_bad == 0)
                            snprintf(s8_msg, sizeof s8_msg,
                                     "saved_fp8 (%lld, %lld): gate 0x%02x up 0x%02x, want 0x%02x "
                                     "0x%02x (of %.9g, %.9g)",
                                     (long long)t, (long long)j, S8.h[cg], S8.h[cu], g8, u8w,
                                     load(dt, G.before, gi), load(dt, ub, ui));
                        s8_bad++;
                    }
                }
                r = glu_ref_eval(&pr, g, u, bg, bu, w, dyv);
                /* the mask: of the operand the backward reads, except that a backward reading the
                 * forward's own copy must cut exactly where the forward's clamp did (raw operands) */
                const double gm = c->fp8 == FP8_STORED ? graw : g,
                             um = c->fp8 == FP8_STORED ? uraw : u;
                const int pass_g = !clamp || gm <= ce, pass_u = !clamp || (um >= -ce && um <= ce);
                rdg[t * F + j] = pass_g ? r.d_a : 0.0, mdg[t * F + j] = pass_g ? r.d_a_mag : 0.0;
                rdu[t * F + j] = pass_u ? r.d_v : 0.0, mdu[t * F + j] = pass_u ? r.d_v_mag : 0.0;
                rdb[bgi] += r.d_a, mdb[bgi] += r.d_a_mag;
                rdb[bui] += r.d_v, mdb[bui] += r.d_v_mag;
                rdw[t] += r.dw_term, mdw[t] += r.dw_mag;

                gy[t * F + j] = load(dt, Y.h, 1 + t * y_rs + j);
                gdg[t * F + j] = load(dt, dgb->h, dg_off + t * dg_rs + j * step);
                gdu[t * F + j] = il ? load(dt, dgb->h, dg_off + t * dg_rs + j * 2 + 1)
                                    : load(dt, dub->h, du_off + t * du_rs + j);
            }
        }
        compare(b, c, "forward y", dt, gy, ry, my, n);
        if (store8) {
            checks++;
            if (s8_bad) fail(b, c, s8_msg, (double)s8_bad);
        }
        compare(b, c, "backward d_gate", dt, gdg, rdg, mdg, n);
        compare(b, c, "backward d_up", dt, gdu, rdu, mdu, n);
        if (want_db) {
            for (int64_t i = 0; i < 2 * F; ++i) gdb[i] = load(dt, DB.h, 1 + i);
            compare(b, c, "dbias", dt, gdb, rdb, mdb, 2 * F);
        }
        if (want_dw) {
            for (int64_t t = 0; t < T; ++t) gdw[t] = load(wdt, DW.h, 1 + t);
            compare(b, c, "dweights", wdt, gdw, rdw, mdw, T);
        }
        free(buf);
    }

    /* ---- nothing but the outputs changed ---- */
    mark(&Y, 1, T, F, y_rs, 1);
    mark(dgb, dg_off, T, il ? 2 * F : F, dg_rs, 1);
    if (!il) mark(dub, du_off, T, F, du_rs, 1);
    if (want_db) mark(&DB, 1, 1, 2 * F, 0, 1);
    if (want_dw) mark(&DW, 1, 1, T, 0, 1);
    if (wsb) mark(&WS, 0, 1, (int64_t)wsb, 0, 1);
    if (store8) mark(&S8, s8_off, T, 2 * F, s8_rs, 1);
    {
        static const char *names[] = {"gate buffer", "up buffer", "fp8 gate",  "fp8 up",
                                      "bias",        "weights",   "scale_inv", "dy",
                                      "output",      "d_gate",    "d_up",      "dbias",
                                      "dweights",    "workspace", "saved_fp8"};
        for (size_t i = 0; i < sizeof all / sizeof *all; ++i) {
            if (!all[i]->h) continue;
            int64_t bad = damage(all[i]);
            checks++;
            if (bad) {
                char m[96];
                snprintf(m, sizeof m, "elements changed outside the outputs in %s", names[i]);
                fail(b, c, m, (double)bad);
            }
        }
    }
done:
    for (size_t i = 0; i < sizeof all / sizeof *all; ++i) dbuf_free(b, all[i]);
}

/* ---- suites ------------------------------------------------------------------------------- */

static const fastglu_dtype dtypes[] = {FASTGLU_DTYPE_BF16, FASTGLU_DTYPE_FP16, FASTGLU_DTYPE_FP32};

static fastglu_glu_params make_params(int act, int layout, float clamp, int pset) {
    fastglu_glu_params p = fastglu_glu_params_default((fastglu_activation)act);
    p.layout = (fastglu_layout)layout;
    p.clamp_value = clamp;
    if (pset == 1) p.glu_linear_offset = 1.0f, p.gate_multiplier = 0.8f, p.down_multiplier = 1.5f;
    if (pset == 2) p.glu_linear_offset = -0.5f, p.gate_multiplier = 1.25f, p.down_multiplier = 0.5f;
    if (pset == 3) p.glu_linear_offset = 1.0f; /* GPT-OSS: the offset alone */
    if (pset == 4) p.gate_multiplier = 1.25f;  /* one multiplier alone */
    if (pset == 5) p.down_multiplier = 0.5f;
    return p;
}

static int begin(const char *what, const glu_backend *b) {
    static int seeded;
    if (!seeded) glu_seed(b->name), seeded = 1;
    fp8_init();
    printf("%s %s ...\n", b->name, what);
    fflush(stdout);
    failures = checks = 0;
    return 0;
}

static int end(const char *what, const glu_backend *b) {
    printf("%s %s: %d checks, %d failed\n", b->name, what, checks, failures);
    fflush(stdout);
    return failures;
}

int run_glu_suite(const glu_backend *b) {
    begin("glu suite", b);
    /* 1. the options matrix at two shapes; the geometry and in-place rotate with the case index */
    static const int64_t shapes[][2] = {{65, 257}, {2, 3}};
    static const float clamps[] = {0.0f, 1.5f};
    long k = 0;
    for (size_t s = 0; s < 2; ++s)
        for (size_t d = 0; d < 3; ++d)
            for (int act = 0; act < 3; ++act)
                for (int lay = 0; lay < 2; ++lay)
                    for (int bias = 0; bias < 2; ++bias)
                        for (int wk = 0; wk < W_KINDS; ++wk)
                            for (int ci = 0; ci < 2; ++ci)
                                for (int pset = 0; pset < 2; ++pset)
                                    for (int fp8 = 0; fp8 < FP8_KINDS; ++fp8, ++k) {
                                        glu_case c;
                                        /* 1.5 (an e4m3 value) or 1.1 (in no dtype: rounded) */
                                        c.p = make_params(
                                            act, lay, ci && (k / FP8_KINDS) % 2 ? 1.1f : clamps[ci],
                                            pset);
                                        c.bias = bias, c.weights = wk, c.fp8 = fp8;
                                        c.store8 = (k / 3) % 2 == 0;
                                        c.geo = (int)(k % GEO_KINDS);
                                        c.in_place = (k / GEO_KINDS) % 3 == 1;
                                        c.want_dbias = (k / 7) % 4 != 3;
                                        c.want_dweights = (k / 11) % 4 != 3;
                                        c.dt = dtypes[d];
                                        c.T = shapes[s][0], c.F = shapes[s][1];
                                        run_case(b, &c);
                                    }
    /* 2. the shape sweep: every width x rows x dtype, four variants each, rotating through the
     * options */
    static const int64_t widths[] = {1, 2, 3, 5, 7, 8, 127, 256, 257, 768, 1408, 3420};
    static const int64_t rows[] = {1, 2, 65, 257};
    k = 0;
    for (size_t d = 0; d < 3; ++d)
        for (size_t w = 0; w < sizeof widths / sizeof *widths; ++w)
            for (size_t r = 0; r < sizeof rows / sizeof *rows; ++r)
                for (int v = 0; v < 4; ++v, ++k) {
                    glu_case c;
                    c.p = make_params((int)(k % 3), (int)((k / 3) % 2),
                                      (k / 2) % 3 == 0 ? ((k / 6) % 2 ? 1.1f : 1.5f) : 0.0f,
                                      (int)((k / 5) % 3));
                    c.bias = (k / 4) % 2 == 0;
                    c.weights = (int)(k % W_KINDS);
                    c.fp8 = (int)((k / 7) % FP8_KINDS);
                    c.store8 = v % 2 == 0;
                    c.geo = (int)((k / 2) % GEO_KINDS);
                    c.in_place = v == 3;
                    c.want_dbias = 1, c.want_dweights = 1;
                    c.dt = dtypes[d];
                    c.T = rows[r], c.F = widths[w];
                    run_case(b, &c);
                }
    return end("glu suite", b);
}

int run_glu_sentinel_sweep(const glu_backend *b) {
    begin("glu sentinel sweep", b);
    static const int64_t widths[] = {1, 2, 3, 5, 7, 8, 127, 256, 257, 768, 1408, 3420};
    static const int64_t rows[] = {1, 2, 65, 257};
    for (size_t d = 0; d < 3; ++d)
        for (size_t w = 0; w < sizeof widths / sizeof *widths; ++w)
            for (size_t r = 0; r < sizeof rows / sizeof *rows; ++r)
                for (int lay = 0; lay < 2; ++lay)
                    for (int full = 0; full < 2; ++full) {
                        glu_case c;
                        c.p = make_params(full ? FASTGLU_ACT_QUICK_GELU : FASTGLU_ACT_SILU, lay,
                                          full ? 1.5f : 0.0f, full);
                        c.bias = full, c.weights = full ? W_BF16_S3 : W_NONE;
                        c.fp8 = FP8_NONE, c.geo = full ? 2 : 4, c.in_place = 0;
                        c.store8 = 1; /* the fp8 copy's padded rows are sentinel-checked too */
                        c.want_dbias = c.want_dweights = full;
                        c.dt = dtypes[d];
                        c.T = rows[r], c.F = widths[w];
                        run_case(b, &c);
                    }
    return end("glu sentinel sweep", b);
}

/* ---- determinism -------------------------------------------------------------------------- */

/* One backward into fresh outputs; returns the downloaded d_gate | d_up | dbias | dweights bytes
 * (malloc'd, *n bytes). The inputs come from the host images passed in. */
typedef struct det_inputs {
    fastglu_glu_params p;
    int64_t T, F;
    fastglu_dtype dt, wdt;
    void *x, *dy, *bias, *w; /* device: x [T, 2F] (fc1 layout or interleaved), dy, bias, weights */
    int dw_only;             /* no bias, dweights alone (the CUDA flat kernel's reduction) */
} det_inputs;

static unsigned char *det_run(const glu_backend *b, const det_inputs *in, unsigned char fill,
                              size_t *n) {
    const size_t es = fastglu_dtype_size(in->dt), wes = fastglu_dtype_size(in->wdt);
    const int64_t T = in->T, F = in->F;
    const size_t dx_b = (size_t)(T * 2 * F) * es, db_b = (size_t)(2 * F) * es;
    const size_t dw_b = (size_t)T * wes;
    const size_t wsb = fastglu_glu_bwd_workspace_bytes(T, F, !in->dw_only, 1);
    void *dx = b->alloc(dx_b), *db = b->alloc(db_b), *dw = b->alloc(dw_b), *ws = b->alloc(wsb);
    unsigned char *h = malloc(wsb > dx_b ? wsb : dx_b);
    memset(h, fill, wsb > dx_b ? wsb : dx_b);
    b->upload(ws, h, wsb); /* garbage workspace: its contents must not matter */
    const int il = in->p.layout == FASTGLU_LAYOUT_INTERLEAVED;
    const char *x = in->x;
    fastglu_status st = b->bwd(&in->p, in->dy, F, 1, x, 2 * F, il ? NULL : x + F * es, 2 * F,
                               in->dt, NULL, 0, 0, in->dw_only ? NULL : in->bias, in->w, in->wdt, 1,
                               dx, 2 * F, il ? NULL : (char *)dx + F * es, 2 * F,
                               in->dw_only ? NULL : db, dw, ws, wsb, T, F, in->dt);
    b->sync();
    unsigned char *out = NULL;
    *n = 0;
    if (st != FASTGLU_SUCCESS) {
        printf("FAIL %s determinism: status %d (%s)\n", b->name, st, fastglu_last_error_message());
        failures++;
    } else {
        const size_t db_n = in->dw_only ? 0 : db_b; /* dbias, when asked for */
        *n = dx_b + db_n + dw_b;
        out = malloc(*n);
        b->download(out, dx, dx_b);
        if (db_n) b->download(out + dx_b, db, db_n);
        b->download(out + dx_b + db_n, dw, dw_b);
    }
    b->release(dx), b->release(db), b->release(dw), b->release(ws);
    free(h);
    return out;
}

int run_glu_determinism(const glu_backend *b, void (*set_config)(int k), int n_configs) {
    begin("glu determinism", b);
    /* the last shape: dweights alone, F a multiple of 256 (the CUDA flat kernel sums them) */
    static const int64_t shapes[][2] = {{1, 1},      {65, 257},   {257, 1408},
                                        {300, 3420}, {1000, 129}, {129, 512}};
    const size_t n_shapes = sizeof shapes / sizeof *shapes;
    if (!set_config) n_configs = 1;
    for (size_t s = 0; s < n_shapes; ++s)
        for (int d = 0; d < 3; ++d)
            for (int lay = 0; lay < 2; ++lay) {
                det_inputs in;
                in.dw_only = s == n_shapes - 1;
                in.p = in.dw_only
                           ? make_params(d % 2 ? FASTGLU_ACT_QUICK_GELU : FASTGLU_ACT_SILU, lay,
                                         0.0f, 0)
                           : make_params((int)(s + d) % 3, lay, s % 2 ? 1.5f : 0.0f, (int)(s % 3));
                in.T = shapes[s][0], in.F = shapes[s][1];
                in.dt = dtypes[d];
                in.wdt = d == 1 ? FASTGLU_DTYPE_FP32 : FASTGLU_DTYPE_BF16;
                const size_t es = fastglu_dtype_size(in.dt), wes = fastglu_dtype_size(in.wdt);
                const int64_t T = in.T, F = in.F;
                unsigned char *hx = malloc((size_t)(T * 2 * F) * es);
                unsigned char *hdy = malloc((size_t)(T * F) * es);
                unsigned char *hb = malloc((size_t)(2 * F) * es), *hw = malloc((size_t)T * wes);
                for (int64_t i = 0; i < T * 2 * F; ++i) store(in.dt, hx, i, operand_value(1.5f));
                for (int64_t i = 0; i < T * F; ++i) store(in.dt, hdy, i, rng_normal());
                for (int64_t i = 0; i < 2 * F; ++i) store(in.dt, hb, i, 0.5 * rng_normal());
                for (int64_t i = 0; i < T; ++i) store(in.wdt, hw, i, 0.1 + rng_uniform());
                in.x = b->alloc((size_t)(T * 2 * F) * es), in.dy = b->alloc((size_t)(T * F) * es);
                in.bias = b->alloc((size_t)(2 * F) * es), in.w = b->alloc((size_t)T * wes);
                b->upload(in.x, hx, (size_t)(T * 2 * F) * es);
                b->upload(in.dy, hdy, (size_t)(T * F) * es);
                b->upload(in.bias, hb, (size_t)(2 * F) * es);
                b->upload(in.w, hw, (size_t)T * wes);
                size_t n0 = 0, n1 = 0;
                if (set_config) set_config(0);
                unsigned char *r0 = det_run(b, &in, 0xff, &n0);
                for (int cfg = 0; cfg < n_configs && r0; ++cfg) {
                    if (set_config) set_config(cfg);
                    unsigned char *r1 = det_run(b, &in, (unsigned char)(0x3c + cfg), &n1);
                    checks++;
                    if (r1 && (n1 != n0 || memcmp(r0, r1, n0) != 0)) {
                        printf("FAIL %s determinism: configuration %d differs from the first run "
                               "(T=%lld F=%lld %s layout %d)\n",
                               b->name, cfg, (long long)T, (long long)F, dtype_name(in.dt), lay);
                        failures++;
                    }
                    free(r1);
                }
                if (set_config) set_config(0);
                free(r0);
                b->release(in.x), b->release(in.dy), b->release(in.bias), b->release(in.w);
                free(hx), free(hdy), free(hb), free(hw);
            }
    return end("glu determinism", b);
}

/* ---- fp8 exactness ------------------------------------------------------------------------ */

int run_glu_fp8_exact(const glu_backend *b) {
    begin("glu fp8 decode", b);
    enum { N = 256 };
    const float scales[] = {1.0f, 2.0f, 0.375f};
    for (int si = 0; si < 3; ++si)
        for (int use_scale = 0; use_scale < 2; ++use_scale) {
            if (!use_scale && si > 0) continue;
            uint8_t hg[N], hu[N];
            float hdy[N], hdg[N], hs[1] = {scales[si]};
            for (int i = 0; i < N; ++i) hg[i] = 0, hu[i] = (uint8_t)i, hdy[i] = 1.0f;
            void *g = b->alloc(N), *u = b->alloc(N), *dy = b->alloc(sizeof hdy);
            void *dg = b->alloc(sizeof hdg), *du = b->alloc(sizeof hdg), *sc = b->alloc(4);
            b->upload(g, hg, N), b->upload(u, hu, N), b->upload(dy, hdy, sizeof hdy);
            b->upload(sc, hs, 4);
            /* GELU_TANH: act'(0) = 0.5 (1 + tanh 0) = 0.5 exactly, whatever the tanh */
            fastglu_glu_params p = fastglu_glu_params_default(FASTGLU_ACT_GELU_TANH);
            /* one token of 256 columns */
            fastglu_status st =
                b->bwd(&p, dy, N, 1, g, N, u, N, FASTGLU_DTYPE_FP8_E4M3,
                       use_scale ? (const float *)sc : NULL, 0, 0, NULL, NULL, FASTGLU_DTYPE_FP32,
                       0, dg, N, du, N, NULL, NULL, NULL, 0, 1, N, FASTGLU_DTYPE_FP32);
            b->sync();
            checks++;
            if (st != FASTGLU_SUCCESS) {
                printf("FAIL %s fp8: status %d (%s)\n", b->name, st, fastglu_last_error_message());
                failures++;
            } else {
                b->download(hdg, dg, sizeof hdg);
                int bad = 0;
                for (int i = 0; i < N; ++i) {
                    const double want = 0.5 * fp8_table[i] * (use_scale ? scales[si] : 1.0);
                    if (isnan(want) ? !isnan(hdg[i]) : (double)hdg[i] != want) {
                        if (!bad)
                            printf("FAIL %s fp8 code 0x%02x (scale %g): d_gate %.9g, want %.9g\n",
                                   b->name, i, use_scale ? scales[si] : 1.0, hdg[i], want);
                        bad++;
                    }
                }
                checks++;
                if (bad) failures++;
            }
            b->release(g), b->release(u), b->release(dy), b->release(dg), b->release(du);
            b->release(sc);
        }
    /* and the per-token scale stride: token t reads scale_inv[t * 3] */
    {
        enum { TT = 4, FF = 8 };
        uint8_t hg[TT * FF], hu[TT * FF];
        float hdy[TT * FF], hdg[TT * FF], hs[3 * (TT - 1) + 1];
        for (int i = 0; i < TT * FF; ++i) hg[i] = 0, hu[i] = (uint8_t)(0x30 + i), hdy[i] = 1.0f;
        for (int i = 0; i < 3 * (TT - 1) + 1; ++i) hs[i] = (float)(i + 1);
        void *g = b->alloc(sizeof hg), *u = b->alloc(sizeof hu), *dy = b->alloc(sizeof hdy);
        void *dg = b->alloc(sizeof hdg), *du = b->alloc(sizeof hdg), *sc = b->alloc(sizeof hs);
        b->upload(g, hg, sizeof hg), b->upload(u, hu, sizeof hu), b->upload(dy, hdy, sizeof hdy);
        b->upload(sc, hs, sizeof hs);
        fastglu_glu_params p = fastglu_glu_params_default(FASTGLU_ACT_GELU_TANH);
        fastglu_status st = b->bwd(&p, dy, FF, 1, g, FF, u, FF, FASTGLU_DTYPE_FP8_E4M3, sc, 3, 0,
                                   NULL, NULL, FASTGLU_DTYPE_FP32, 0, dg, FF, du, FF, NULL, NULL,
                                   NULL, 0, TT, FF, FASTGLU_DTYPE_FP32);
        b->sync();
        checks++;
        if (st != FASTGLU_SUCCESS) {
            printf("FAIL %s fp8 per-token: %s\n", b->name, fastglu_last_error_message());
            failures++;
        } else {
            b->download(hdg, dg, sizeof hdg);
            int bad = 0;
            for (int t = 0; t < TT; ++t)
                for (int j = 0; j < FF; ++j)
                    if ((double)hdg[t * FF + j] != 0.5 * fp8_table[hu[t * FF + j]] * hs[3 * t])
                        bad++;
            checks++;
            if (bad) {
                printf("FAIL %s fp8 per-token scale stride: %d elements\n", b->name, bad);
                failures++;
            }
        }
        b->release(g), b->release(u), b->release(dy), b->release(dg), b->release(du);
        b->release(sc);
    }
    return end("glu fp8 decode", b);
}

/* ---- the forward's fp8 copy on every 16-bit pattern ---------------------------------------- */

/* n operand values of dt into h: bf16 / fp16 every bit pattern 0 .. 65535 (n = 65536); fp32 the
 * special values (+-0, +-Inf, quiet and signalling NaNs of both signs, 448 and the saturation
 * boundary 464 with their neighbours, FLT_MAX, normal and subnormal fp32 minima, e4m3's subnormal
 * range and half its smallest step), every tie between neighbouring e4m3 values with its two fp32
 * neighbours (both signs), then random bit patterns. */
static void fp8_store_patterns(fastglu_dtype dt, unsigned char *h, int64_t n) {
    if (dt != FASTGLU_DTYPE_FP32) {
        for (int64_t i = 0; i < n; ++i) ((uint16_t *)h)[i] = (uint16_t)i;
        return;
    }
    static const uint32_t special[] = {0x00000000u,
                                       0x80000000u,
                                       0x7f800000u,
                                       0xff800000u,
                                       0x7fc00000u,
                                       0xffc00000u,
                                       0x7f800001u,
                                       0xff800001u,
                                       0x7fffffffu,
                                       0x43e00000u /* 448 */,
                                       0x43e80000u /* 464 */,
                                       0x43e7ffffu,
                                       0x43e80001u,
                                       0x43dfffffu,
                                       0x43f00000u /* 480 */,
                                       0x7f7fffffu,
                                       0x00800000u,
                                       0x00000001u,
                                       0x807fffffu,
                                       0x3a800000u /* 2^-10 */,
                                       0x3a800001u,
                                       0x3a7fffffu,
                                       0x3b000000u /* 2^-9 */,
                                       0x3c800000u /* 2^-6 */,
                                       0x3c7fffffu,
                                       0xbc800001u};
    const int64_t ns = (int64_t)(sizeof special / sizeof *special);
    float *f = (float *)h;
    int64_t i = 0;
    for (; i < ns && i < n; ++i) memcpy(&f[i], &special[i], 4);
    for (int k = 0; k < 0x7e && i + 6 <= n; ++k) {
        const float mid = (float)((fp8_table[k] + fp8_table[k + 1]) / 2); /* exact in fp32 */
        const float v[3] = {mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY)};
        for (int q = 0; q < 3; ++q) f[i++] = v[q], f[i++] = -v[q];
    }
    for (; i < n; ++i) {
        const uint32_t u = (uint32_t)rng_next();
        memcpy(&f[i], &u, 4);
    }
}

int run_glu_fp8_store_exact(const glu_backend *b) {
    begin("glu fp8 store", b);
    enum { NPAT = 65536 };
    /* (F, saved_fp8 offset, row pad, activation, clamp): whole chunks with wide accesses and a
     * clamp (the copy holds the operands moved to the clamp's side: ref_fp8_operand); every column
     * in a chunk's tail, misaligned */
    static const struct {
        int64_t F, off, pad;
        int act;
        float clamp;
    } cfg[] = {{128, 0, 16, FASTGLU_ACT_SILU, 1.1f}, {5, 3, 3, FASTGLU_ACT_QUICK_GELU, 0.0f}};
    for (int d = 0; d < 3; ++d)
        for (int lay = 0; lay < 2; ++lay)
            for (int ci = 0; ci < 2; ++ci) {
                const fastglu_dtype dt = dtypes[d];
                const size_t es = fastglu_dtype_size(dt);
                const int64_t F = cfg[ci].F, T = (NPAT + 2 * F - 1) / (2 * F);
                const int64_t s8_rs = 2 * F + cfg[ci].pad, s8_off = cfg[ci].off;
                const int64_t nx = T * 2 * F, n8 = s8_off + (T - 1) * s8_rs + 2 * F + 4;
                unsigned char *hx = calloc((size_t)nx, es), *h8 = malloc((size_t)n8);
                unsigned char *want = malloc((size_t)n8), *hb = malloc((size_t)(2 * F) * es);
                fp8_store_patterns(dt, hx, NPAT);
                for (int64_t i = NPAT; i < nx; ++i) memcpy(hx + i * es, hx + (i - NPAT) * es, es);
                for (int64_t i = 0; i < 2 * F; ++i) store(dt, hb, i, 0.25 + 0.5 * rng_uniform());
                memset(h8, 0x7f, (size_t)n8);
                memcpy(want, h8, (size_t)n8);
                const int il8 = lay == FASTGLU_LAYOUT_INTERLEAVED;
                const double ce = ref_clamp(cfg[ci].clamp, dt);
                for (int64_t t = 0; t < T; ++t)
                    for (int64_t j = 0; j < 2 * F; ++j) { /* the copy has the operands' layout */
                        const double v = load(dt, hx, t * 2 * F + j);
                        const int is_up = il8 ? j % 2 == 1 : j >= F;
                        want[s8_off + t * s8_rs + j] =
                            ref_e4m3(ce > 0 ? ref_fp8_operand(v, is_up, ce) : v);
                    }
                void *x = b->alloc((size_t)nx * es), *y = b->alloc((size_t)(T * F) * es);
                void *s8 = b->alloc((size_t)n8), *bias = b->alloc((size_t)(2 * F) * es);
                b->upload(x, hx, (size_t)nx * es), b->upload(s8, h8, (size_t)n8);
                b->upload(bias, hb, (size_t)(2 * F) * es);
                fastglu_glu_params p = make_params(cfg[ci].act, lay, cfg[ci].clamp, 0);
                const int il = lay == FASTGLU_LAYOUT_INTERLEAVED;
                fastglu_status st =
                    b->fwd(&p, x, 2 * F, il ? NULL : (char *)x + F * es, 2 * F, bias, NULL,
                           FASTGLU_DTYPE_FP32, 0, y, F, (char *)s8 + s8_off, s8_rs, T, F, dt);
                b->sync();
                checks++;
                if (st != FASTGLU_SUCCESS) {
                    printf("FAIL %s fp8 store: status %d (%s)\n", b->name, st,
                           fastglu_last_error_message());
                    failures++;
                } else {
                    b->download(h8, s8, (size_t)n8);
                    int64_t bad = 0, first = -1;
                    for (int64_t i = 0; i < n8; ++i)
                        if (!same_e4m3(h8[i], want[i])) bad += 1, first = first < 0 ? i : first;
                    checks++;
                    if (bad) {
                        const int64_t r = first - s8_off, t = r / (s8_rs ? s8_rs : 1);
                        const int64_t j = r - t * s8_rs;
                        const int inside = r >= 0 && t < T && j < 2 * F;
                        printf(
                            "FAIL %s fp8 store %s %s F=%lld: %lld bytes differ, first at byte %lld "
                            "(%s): 0x%02x, want 0x%02x (of %.9g)\n",
                            b->name, dtype_name(dt), il ? "interleaved" : "split", (long long)F,
                            (long long)bad, (long long)first,
                            inside ? "inside [T, 2F]" : "outside [T, 2F]", h8[first], want[first],
                            inside ? load(dt, hx, t * 2 * F + j) : 0.0);
                        failures++;
                    }
                }
                b->release(x), b->release(y), b->release(s8), b->release(bias);
                free(hx), free(h8), free(want), free(hb);
            }
    return end("glu fp8 store", b);
}

/* ---- parameter edges ---------------------------------------------------------------------- */

/* fwd + bwd of a fixed fp32 problem with params p: y [T*F], dx [T*2F], db [2F], dw [T]. */
enum { PT = 70, PF = 300 };
static float pe_x[PT][2 * PF], pe_dy[PT][PF], pe_b[2 * PF], pe_w[PT];

static int pe_run(const glu_backend *b, const fastglu_glu_params *p, float *y, float *dx, float *db,
                  float *dw) {
    const size_t xb = sizeof pe_x, yb = sizeof pe_dy, bb = sizeof pe_b, wb = sizeof pe_w;
    const size_t wsb = fastglu_glu_bwd_workspace_bytes(PT, PF, 1, 1);
    void *x = b->alloc(xb), *dy = b->alloc(yb), *bi = b->alloc(bb), *w = b->alloc(wb);
    void *dy_out = b->alloc(yb), *ddx = b->alloc(xb), *ddb = b->alloc(bb), *ddw = b->alloc(wb);
    void *ws = b->alloc(wsb);
    b->upload(x, pe_x, xb), b->upload(dy, pe_dy, yb), b->upload(bi, pe_b, bb);
    b->upload(w, pe_w, wb);
    const int il = p->layout == FASTGLU_LAYOUT_INTERLEAVED;
    const char *xc = x;
    fastglu_status st =
        b->fwd(p, x, 2 * PF, il ? NULL : xc + PF * 4, 2 * PF, bi, w, FASTGLU_DTYPE_FP32, 1, dy_out,
               PF, NULL, 0, PT, PF, FASTGLU_DTYPE_FP32);
    if (st == FASTGLU_SUCCESS)
        st = b->bwd(p, dy, PF, 1, x, 2 * PF, il ? NULL : xc + PF * 4, 2 * PF, FASTGLU_DTYPE_FP32,
                    NULL, 0, 0, bi, w, FASTGLU_DTYPE_FP32, 1, ddx, 2 * PF,
                    il ? NULL : (char *)ddx + PF * 4, 2 * PF, ddb, ddw, ws, wsb, PT, PF,
                    FASTGLU_DTYPE_FP32);
    b->sync();
    if (st == FASTGLU_SUCCESS) {
        b->download(y, dy_out, yb), b->download(dx, ddx, xb), b->download(db, ddb, bb);
        b->download(dw, ddw, wb);
    } else {
        printf("FAIL %s params: status %d (%s)\n", b->name, st, fastglu_last_error_message());
    }
    b->release(x), b->release(dy), b->release(bi), b->release(w), b->release(dy_out);
    b->release(ddx), b->release(ddb), b->release(ddw), b->release(ws);
    return st == FASTGLU_SUCCESS;
}

int run_glu_param_edges(const glu_backend *b) {
    begin("glu parameter edges", b);
    /* the reference's derivatives against central differences of its activations */
    for (int a = 0; a < 3; ++a)
        for (double z = -8.0; z <= 8.0; z += 0.0625) {
            const double h = 1e-5;
            const double fd =
                (ref_act((fastglu_activation)a, z + h) - ref_act((fastglu_activation)a, z - h)) /
                (2 * h);
            checks++;
            if (!(fabs(fd - ref_dact((fastglu_activation)a, z)) <= 1e-7)) {
                printf("FAIL reference act'(%g) of activation %d: %.12g vs difference %.12g\n", z,
                       a, ref_dact((fastglu_activation)a, z), fd);
                failures++;
            }
        }
    /* default params */
    for (int a = 0; a < 3; ++a) {
        fastglu_glu_params p = fastglu_glu_params_default((fastglu_activation)a);
        checks++;
        if (p.activation != (fastglu_activation)a || p.layout != FASTGLU_LAYOUT_SPLIT ||
            p.clamp_value != 0.0f || p.glu_linear_offset != 0.0f || p.gate_multiplier != 1.0f ||
            p.down_multiplier != 1.0f) {
            printf("FAIL fastglu_glu_params_default(%d)\n", a);
            failures++;
        }
    }
    for (int i = 0; i < PT; ++i) {
        for (int j = 0; j < 2 * PF; ++j) pe_x[i][j] = (float)(2.0 * rng_normal());
        for (int j = 0; j < PF; ++j) pe_dy[i][j] = (float)rng_normal();
        pe_w[i] = (float)(0.1 + rng_uniform());
    }
    for (int j = 0; j < 2 * PF; ++j) pe_b[j] = (float)(0.5 * rng_normal());
    static float y0[PT * PF], dx0[PT * 2 * PF], db0[2 * PF], dw0[PT];
    static float y1[PT * PF], dx1[PT * 2 * PF], db1[2 * PF], dw1[PT];
    for (int a = 0; a < 3; ++a)
        for (int lay = 0; lay < 2; ++lay) {
            fastglu_glu_params p = make_params(a, lay, 0.0f, 1);
            if (!pe_run(b, &p, y0, dx0, db0, dw0)) {
                failures++;
                continue;
            }
            /* clamp <= 0 or NaN: no clamp, bitwise */
            const float none[] = {-1.0f, NAN, -INFINITY, -0.0f};
            for (int k = 0; k < 4; ++k) {
                fastglu_glu_params q = p;
                q.clamp_value = none[k];
                checks++;
                if (!pe_run(b, &q, y1, dx1, db1, dw1) || memcmp(y0, y1, sizeof y0) ||
                    memcmp(dx0, dx1, sizeof dx0) || memcmp(db0, db1, sizeof db0) ||
                    memcmp(dw0, dw1, sizeof dw0)) {
                    printf("FAIL %s clamp_value %g is not 'no clamp' (activation %d layout %d)\n",
                           b->name, (double)none[k], a, lay);
                    failures++;
                }
            }
            /* +Inf clamps nothing (finite inputs) */
            {
                fastglu_glu_params q = p;
                q.clamp_value = INFINITY;
                checks++;
                if (!pe_run(b, &q, y1, dx1, db1, dw1) || memcmp(y0, y1, sizeof y0) ||
                    memcmp(dx0, dx1, sizeof dx0)) {
                    printf("FAIL %s clamp_value +inf changed finite results\n", b->name);
                    failures++;
                }
            }
            /* a clamp above every |operand + 0| still changes nothing in the forward, and a clamp
             * of 0.25 changes it (the test can tell clamps apart) */
            {
                fastglu_glu_params q = p;
                q.clamp_value = 0.25f;
                checks++;
                if (!pe_run(b, &q, y1, dx1, db1, dw1) || !memcmp(y0, y1, sizeof y0)) {
                    printf("FAIL %s clamp_value 0.25 had no effect\n", b->name);
                    failures++;
                }
            }
            /* down_multiplier 2 doubles y, dx, dbias, dweights exactly (fp32, a power of two) */
            {
                fastglu_glu_params q = p;
                q.down_multiplier = p.down_multiplier * 2.0f;
                int bad = !pe_run(b, &q, y1, dx1, db1, dw1);
                for (int i = 0; !bad && i < PT * PF; ++i) bad = y1[i] != 2.0f * y0[i];
                for (int i = 0; !bad && i < PT * 2 * PF; ++i) bad = dx1[i] != 2.0f * dx0[i];
                for (int i = 0; !bad && i < 2 * PF; ++i) bad = db1[i] != 2.0f * db0[i];
                for (int i = 0; !bad && i < PT; ++i) bad = dw1[i] != 2.0f * dw0[i];
                checks++;
                if (bad) {
                    printf("FAIL %s down_multiplier x2 is not an exact x2 (activation %d)\n",
                           b->name, a);
                    failures++;
                }
            }
        }
    return end("glu parameter edges", b);
}

/* ---- the clamp at its edges ---------------------------------------------------------------- */

/* One row of F columns through fwd (writing the fp8 copy when s8 != NULL) and bwd, reading the
 * operands (gate = x[0:F], up = x[F:2F], SPLIT) or the copy: d_gate / d_up into dx (2F, as doubles).
 * Returns the forward's status (then the backward's); *y_untouched: the output kept its sentinel. */
static fastglu_status ce_run(const glu_backend *b, const fastglu_glu_params *p, fastglu_dtype dt,
                             const double *xv, int F, int from_copy, double *dx, int *y_untouched) {
    const size_t es = fastglu_dtype_size(dt);
    unsigned char hx[2 * 8 * 4], hdy[8 * 4], hy[8 * 4], hdx[2 * 8 * 4], h8[2 * 8];
    for (int j = 0; j < 2 * F; ++j) store(dt, hx, j, xv[j]);
    for (int j = 0; j < F; ++j) store(dt, hdy, j, 1.0);
    memset(hy, 0x7f, sizeof hy), memset(hdx, 0x7f, sizeof hdx), memset(h8, 0x7f, sizeof h8);
    void *x = b->alloc(2 * F * es), *dy = b->alloc(F * es), *y = b->alloc(F * es);
    void *d = b->alloc(2 * F * es), *s8 = b->alloc(2 * F);
    b->upload(x, hx, 2 * F * es), b->upload(dy, hdy, F * es), b->upload(y, hy, F * es);
    b->upload(d, hdx, 2 * F * es), b->upload(s8, h8, 2 * F);
    fastglu_status st = b->fwd(p, x, 2 * F, (char *)x + F * es, 2 * F, NULL, NULL,
                               FASTGLU_DTYPE_FP32, 0, y, F, from_copy ? s8 : NULL, 2 * F, 1, F, dt);
    b->sync();
    if (y_untouched) {
        unsigned char got[8 * 4];
        b->download(got, y, F * es);
        *y_untouched = memcmp(got, hy, F * es) == 0;
    }
    if (st == FASTGLU_SUCCESS) {
        const void *g = from_copy ? s8 : x;
        const void *u = from_copy ? (const char *)s8 + F : (const char *)x + F * es;
        st = b->bwd(p, dy, F, 1, g, 2 * F, u, 2 * F, from_copy ? FASTGLU_DTYPE_FP8_E4M3 : dt, NULL,
                    0, 0, NULL, NULL, FASTGLU_DTYPE_FP32, 0, d, 2 * F, (char *)d + F * es, 2 * F,
                    NULL, NULL, NULL, 0, 1, F, dt);
        b->sync();
        b->download(hdx, d, 2 * F * es);
        for (int j = 0; j < 2 * F; ++j) dx[j] = load(dt, hdx, j);
    }
    b->release(x), b->release(dy), b->release(y), b->release(d), b->release(s8);
    return st;
}

int run_glu_clamp_edges(const glu_backend *b) {
    begin("glu clamp edges", b);
    enum { F = 4 };
    double x[2 * F], dx[2 * F];
    /* 1. the bound is clamp_value in the operands' dtype (torch.clamp): with clamp_value 1.1, an
     * operand equal to 1.1 rounded to the dtype passes its gradient, the next value up does not.
     * gate = [c, next above c, c, -c], up = [c, -c, next above c, next below -c] */
    for (int d = 0; d < 3; ++d)
        for (int from_copy = 0; from_copy < 2; ++from_copy) {
            const fastglu_dtype dt = dtypes[d];
            fastglu_glu_params p =
                make_params(FASTGLU_ACT_QUICK_GELU, FASTGLU_LAYOUT_SPLIT, 1.1f, 3);
            const double c = ref_clamp(1.1f, dt);
            unsigned char t[4];
            store(dt, t, 0, c);
            if (dt == FASTGLU_DTYPE_FP32) {
                float f = nextafterf((float)c, INFINITY);
                memcpy(t, &f, 4);
            } else
                ((uint16_t *)t)[0] += 1; /* the next value up in bf16 / fp16 */
            const double above = load(dt, t, 0);
            const double xv[2 * F] = {c, above, c, -c, c, -c, above, -above};
            const int pass[2 * F] = {1, 0, 1, 1, 1, 1, 0, 0};
            memcpy(x, xv, sizeof x);
            const fastglu_status st = ce_run(b, &p, dt, x, F, from_copy, dx, NULL);
            checks++;
            int bad = st != FASTGLU_SUCCESS;
            for (int j = 0; !bad && j < 2 * F; ++j) bad = pass[j] ? !(dx[j] != 0.0) : dx[j] != 0.0;
            if (bad) {
                printf("FAIL %s clamp 1.1 in %s%s: status %d; d_gate %g %g %g %g, d_up %g %g %g %g "
                       "(want nonzero, 0, nonzero, nonzero; nonzero, nonzero, 0, 0)\n",
                       b->name, dtype_name(dt), from_copy ? " (backward from the fp8 copy)" : "",
                       st, dx[0], dx[1], dx[2], dx[3], dx[4], dx[5], dx[6], dx[7]);
                failures++;
            }
        }
    /* 2. the fp8 copy under clamp 7: gates 7.125 and 7.2 are cut (e4m3 rounds both to 7.0 = c), so
     * their gradient is 0 through the copy too; 6.9 with clamp 6.9 passes (e4m3 rounds it to 7.0,
     * beyond the bound); up -7.2 is cut, -6.9 passes */
    for (int d = 0; d < 3; ++d) {
        const fastglu_dtype dt = dtypes[d];
        static const struct {
            float c;
            double g[F], u[F];
            int pg[F], pu[F];
        } cs[] = {
            {7.0f, {7.125, 7.2, 7.0, 1.0}, {-7.2, 7.125, -7.0, 1.0}, {0, 0, 1, 1}, {0, 0, 1, 1}},
            {6.9f, {6.9, 6.95, -6.9, 1.0}, {-6.9, 6.9, -6.95, 1.0}, {1, 0, 1, 1}, {1, 1, 0, 1}}};
        for (int k = 0; k < 2; ++k) {
            fastglu_glu_params p =
                make_params(FASTGLU_ACT_QUICK_GELU, FASTGLU_LAYOUT_SPLIT, cs[k].c, 3);
            for (int j = 0; j < F; ++j) x[j] = cs[k].g[j], x[F + j] = cs[k].u[j];
            const fastglu_status st = ce_run(b, &p, dt, x, F, 1, dx, NULL);
            checks++;
            int bad = st != FASTGLU_SUCCESS;
            for (int j = 0; !bad && j < F; ++j)
                bad = (cs[k].pg[j] ? !(dx[j] != 0.0) : dx[j] != 0.0) ||
                      (cs[k].pu[j] ? !(dx[F + j] != 0.0) : dx[F + j] != 0.0);
            if (bad) {
                printf(
                    "FAIL %s fp8 copy, clamp %g, %s: status %d; d_gate %g %g %g %g, d_up %g %g %g "
                    "%g\n",
                    b->name, (double)cs[k].c, dtype_name(dt), st, dx[0], dx[1], dx[2], dx[3], dx[4],
                    dx[5], dx[6], dx[7]);
                failures++;
            }
        }
    }
    /* 3. clamps the dtype cannot hold: refused (INVALID_VALUE naming clamp_value, output
     * untouched); their neighbours that it can hold run */
    static const struct {
        fastglu_dtype dt;
        float c;
        int fp8, ok;
    } bad_c[] = {
        {FASTGLU_DTYPE_FP16, 1e-10f, 0, 0},
        {FASTGLU_DTYPE_FP16, 6e-8f, 0, 1},
        {FASTGLU_DTYPE_BF16, 1e-45f, 0, 0},
        {FASTGLU_DTYPE_FP32, 1e-45f, 0, 1},
        {FASTGLU_DTYPE_FP16, 70000.0f, 0, 0},
        {FASTGLU_DTYPE_FP16, 65504.0f, 0, 1},
        {FASTGLU_DTYPE_FP16, 65510.0f, 0, 0} /* rounds to 65504, but torch.clamp refuses it */,
        {FASTGLU_DTYPE_BF16, 3.39e38f, 0, 0} /* likewise */,
        {FASTGLU_DTYPE_BF16, 0x1.fep127f, 0, 1},
        {FASTGLU_DTYPE_BF16, 3.4e38f, 0, 0},
        {FASTGLU_DTYPE_FP32, 3.4e38f, 0, 1},
        {FASTGLU_DTYPE_FP32, 448.0f, 1, 0},
        {FASTGLU_DTYPE_FP32, 447.0f, 1, 1},
        {FASTGLU_DTYPE_BF16, 447.0f, 1, 0} /* 448 in bf16 */,
        {FASTGLU_DTYPE_BF16, INFINITY, 1, 1} /* cuts nothing: the plain cast */};
    for (size_t k = 0; k < sizeof bad_c / sizeof *bad_c; ++k) {
        fastglu_glu_params p = make_params(FASTGLU_ACT_SILU, FASTGLU_LAYOUT_SPLIT, bad_c[k].c, 0);
        for (int j = 0; j < 2 * F; ++j) x[j] = 0.5 + j;
        int untouched = 0;
        const fastglu_status st = ce_run(b, &p, bad_c[k].dt, x, F, bad_c[k].fp8, dx, &untouched);
        const char *msg = fastglu_last_error_message();
        checks++;
        if (bad_c[k].ok
                ? st != FASTGLU_SUCCESS
                : st != FASTGLU_ERROR_INVALID_VALUE || !strstr(msg, "clamp_value") || !untouched) {
            printf("FAIL %s clamp_value %g in %s%s: status %d (%s), want %s\n", b->name,
                   (double)bad_c[k].c, dtype_name(bad_c[k].dt),
                   bad_c[k].fp8 ? " with saved_fp8" : "", st, msg,
                   bad_c[k].ok ? "success" : "FASTGLU_ERROR_INVALID_VALUE, output untouched");
            failures++;
        }
        /* the backward refuses the same clamps (without the fp8 copy's bound), before it looks
         * at any pointer (these are host ones) */
        if (!bad_c[k].fp8 && !bad_c[k].ok) {
            const fastglu_status sb = b->bwd(&p, x, 1, 1, x, 2, x, 2, bad_c[k].dt, NULL, 0, 0, NULL,
                                             NULL, FASTGLU_DTYPE_FP32, 0, dx, 2, dx + 1, 2, NULL,
                                             NULL, NULL, 0, 0, 1, bad_c[k].dt);
            checks++;
            if (sb != FASTGLU_ERROR_INVALID_VALUE ||
                !strstr(fastglu_last_error_message(), "clamp_value")) {
                printf("FAIL %s backward, clamp_value %g in %s: status %d (%s)\n", b->name,
                       (double)bad_c[k].c, dtype_name(bad_c[k].dt), sb,
                       fastglu_last_error_message());
                failures++;
            }
        }
    }
    return end("glu clamp edges", b);
}

/* ---- the specialised kernels against the general ones ------------------------------------ */

/* A value for the paths test: mostly normal, some specials (NaN of either sign, +-inf, values
 * beyond the fp8 range, subnormal-sized) so that every branch of the fp8 copy is taken. */
static double paths_value(void) {
    switch (rng_next() % 64) {
    case 0: return NAN;
    case 1: return -NAN;
    case 2: return INFINITY;
    case 3: return -INFINITY;
    case 4: return 470.0;
    case 5: return -1000.0;
    case 6: return 1e-3;
    case 7: return -3e-3;
    case 8: return 0.0;
    case 9: return -0.0;
    case 10: return 1e-40; /* subnormal in fp32 and bf16 */
    case 11: return -3e-39;
    default: return 3.0 * rng_normal();
    }
}

/* One forward and one backward of the given case; every output (prefilled with `fill`, the same
 * for the two paths: a buffer the case does not write compares equal) in one host buffer. fp8_in: the backward reads the forward's fp8 copy (with a per-row scale). */
typedef struct paths_case {
    int64_t T, F;
    fastglu_dtype dt, wdt;
    fastglu_glu_params p;
    int bias, weights, fp8_in, db, dw;
    int fp8_copy; /* the forward writes the fp8 copy (always when fp8_in) */
} paths_case;

static unsigned char *paths_run(const glu_backend *b, const paths_case *c, void *x, void *dy,
                                void *bias, void *w, void *scale, unsigned char fill, size_t *n) {
    const size_t es = fastglu_dtype_size(c->dt), wes = fastglu_dtype_size(c->wdt);
    const int64_t T = c->T, F = c->F;
    const int il = c->p.layout == FASTGLU_LAYOUT_INTERLEAVED;
    const size_t y_b = (size_t)(T * F) * es, s8_b = (size_t)(T * 2 * F),
                 dx_b = (size_t)(T * 2 * F) * es;
    const size_t db_b = (size_t)(2 * F) * es, dw_b = (size_t)T * wes;
    const size_t wsb = fastglu_glu_bwd_workspace_bytes(T, F, c->db, c->dw);
    *n = y_b + s8_b + dx_b + db_b + dw_b;
    unsigned char *h = malloc(*n + wsb);
    memset(h, fill, *n + wsb);
    void *y = b->alloc(y_b), *s8 = b->alloc(s8_b), *dx = b->alloc(dx_b), *db = b->alloc(db_b);
    void *dw = b->alloc(dw_b), *ws = b->alloc(wsb);
    b->upload(y, h, y_b), b->upload(s8, h, s8_b), b->upload(dx, h, dx_b), b->upload(db, h, db_b);
    b->upload(dw, h, dw_b), b->upload(ws, h, wsb);
    const char *xc = x;
    fastglu_status st =
        b->fwd(&c->p, x, 2 * F, il ? NULL : xc + F * es, 2 * F, c->bias ? bias : NULL,
               c->weights ? w : NULL, c->wdt, 1, y, F, c->fp8_copy ? s8 : NULL, 2 * F, T, F, c->dt);
    b->sync();
    if (st == FASTGLU_SUCCESS) {
        const void *g = c->fp8_in ? s8 : x;
        const void *u = il ? NULL : c->fp8_in ? (const char *)s8 + F : xc + F * es;
        st = b->bwd(&c->p, dy, F, 1, g, 2 * F, u, 2 * F, c->fp8_in ? FASTGLU_DTYPE_FP8_E4M3 : c->dt,
                    c->fp8_in ? (const float *)scale : NULL, 1, 0, c->bias ? bias : NULL,
                    c->weights ? w : NULL, c->wdt, 1, dx, 2 * F, il ? NULL : (char *)dx + F * es,
                    2 * F, c->db ? db : NULL, c->dw ? dw : NULL, ws, wsb, T, F, c->dt);
        b->sync();
    }
    unsigned char *out = NULL;
    if (st != FASTGLU_SUCCESS) {
        printf("FAIL %s paths: status %d (%s)\n", b->name, st, fastglu_last_error_message());
        failures++;
    } else {
        out = h;
        b->download(out, y, y_b), b->download(out + y_b, s8, s8_b);
        b->download(out + y_b + s8_b, dx, dx_b), b->download(out + y_b + s8_b + dx_b, db, db_b);
        b->download(out + y_b + s8_b + dx_b + db_b, dw, dw_b);
    }
    if (!out) free(h);
    b->release(y), b->release(s8), b->release(dx), b->release(db), b->release(dw), b->release(ws);
    return out;
}

int run_glu_paths_agree(const glu_backend *b, void (*set_generic)(int on)) {
    begin("glu specialised vs general kernels", b);
    /* whole 16-byte chunks (the specialised kernels' condition); 257 rows: a partial slab; F = 1416:
     * a partial column tile, whole lanes; F = 768: whole column tiles (the flat kernel's dweights) */
    static const int64_t shapes[][2] = {{3, 8}, {65, 256}, {257, 1416}, {129, 768}};
    /* bias, weights, fp8_in, db, dw: every case the launchers specialise, and some they do not */
    static const int cases[][5] = {{0, 0, 0, 0, 0}, {1, 0, 0, 0, 0}, {0, 1, 0, 0, 0},
                                   {0, 1, 1, 0, 0}, {1, 0, 0, 1, 0}, {0, 1, 0, 0, 1},
                                   {1, 1, 0, 1, 1}, {1, 0, 1, 1, 0}, {0, 1, 1, 0, 1},
                                   {1, 1, 0, 1, 0}, {1, 1, 0, 0, 0}};
    /* activation, clamp, parameter set (make_params): every math mode of the CUDA kernels
     * (glu_cuda.cu) and the general one on each side of its boundaries */
    static const int msets[][3] = {{FASTGLU_ACT_SILU, 0, 0},       {FASTGLU_ACT_QUICK_GELU, 0, 0},
                                   {FASTGLU_ACT_SILU, 1, 0},       {FASTGLU_ACT_QUICK_GELU, 1, 3},
                                   {FASTGLU_ACT_GELU_TANH, 0, 0},  {FASTGLU_ACT_GELU_TANH, 1, 0},
                                   {FASTGLU_ACT_QUICK_GELU, 0, 3}, {FASTGLU_ACT_SILU, 1, 1},
                                   {FASTGLU_ACT_GELU_TANH, 0, 2},  {FASTGLU_ACT_SILU, 0, 4},
                                   {FASTGLU_ACT_QUICK_GELU, 1, 5}};
    const int nm = (int)(sizeof msets / sizeof *msets);
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; ++s)
        for (int d = 0; d < 3; ++d)
            for (int lay = 0; lay < 2; ++lay)
                for (size_t k = 0; k < sizeof cases / sizeof *cases; ++k)
                    for (int mi = 0; mi < nm; ++mi) {
                        /* every math set on the small shapes, one per case on the larger ones */
                        if (s >= 2 && mi != (int)((k + (size_t)d + (size_t)lay) % (size_t)nm))
                            continue;
                        paths_case c;
                        c.T = shapes[s][0], c.F = shapes[s][1], c.dt = dtypes[d];
                        c.wdt = (k + s) % 2 ? FASTGLU_DTYPE_FP32 : c.dt;
                        c.p = make_params(msets[mi][0], lay, msets[mi][1] ? 2.3f : 0.0f,
                                          msets[mi][2]);
                        c.bias = cases[k][0], c.weights = cases[k][1], c.fp8_in = cases[k][2];
                        c.db = cases[k][3], c.dw = cases[k][4];
                        c.fp8_copy = c.fp8_in || (k + (size_t)lay + (size_t)mi) % 2 == 0;
                        const int64_t T = c.T, F = c.F;
                        const size_t es = fastglu_dtype_size(c.dt), wes = fastglu_dtype_size(c.wdt);
                        unsigned char *hx = malloc((size_t)(T * 2 * F) * es),
                                      *hdy = malloc((size_t)(T * F) * es);
                        unsigned char *hb = malloc((size_t)(2 * F) * es),
                                      *hw = malloc((size_t)T * wes);
                        float *hs = malloc((size_t)T * sizeof(float));
                        for (int64_t i = 0; i < T * 2 * F; ++i) store(c.dt, hx, i, paths_value());
                        for (int64_t i = 0; i < T * F; ++i) store(c.dt, hdy, i, rng_normal());
                        for (int64_t i = 0; i < 2 * F; ++i) store(c.dt, hb, i, 0.5 * rng_normal());
                        for (int64_t i = 0; i < T; ++i) store(c.wdt, hw, i, 0.1 + rng_uniform());
                        for (int64_t i = 0; i < T; ++i) hs[i] = 0.25f + (float)(i % 5);
                        void *x = b->alloc((size_t)(T * 2 * F) * es),
                             *dy = b->alloc((size_t)(T * F) * es);
                        void *bias = b->alloc((size_t)(2 * F) * es), *w = b->alloc((size_t)T * wes);
                        void *scale = b->alloc((size_t)T * sizeof(float));
                        b->upload(x, hx, (size_t)(T * 2 * F) * es),
                            b->upload(dy, hdy, (size_t)(T * F) * es);
                        b->upload(bias, hb, (size_t)(2 * F) * es),
                            b->upload(w, hw, (size_t)T * wes);
                        b->upload(scale, hs, (size_t)T * sizeof(float));
                        size_t n0 = 0, n1 = 0;
                        set_generic(0);
                        unsigned char *r0 = paths_run(b, &c, x, dy, bias, w, scale, 0x5a, &n0);
                        set_generic(1);
                        unsigned char *r1 = paths_run(b, &c, x, dy, bias, w, scale, 0x5a, &n1);
                        set_generic(0);
                        checks++;
                        if (r0 && r1 && (n0 != n1 || memcmp(r0, r1, n0) != 0)) {
                            size_t i = 0;
                            while (i < n0 && r0[i] == r1[i]) ++i;
                            printf("FAIL %s paths: specialised and general kernels differ at byte "
                                   "%zu of %zu "
                                   "(T=%lld F=%lld %s layout %d case %zu math set %d)\n",
                                   b->name, i, n0, (long long)T, (long long)F, dtype_name(c.dt),
                                   lay, k, mi);
                            failures++;
                        }
                        free(r0), free(r1);
                        b->release(x), b->release(dy), b->release(bias), b->release(w),
                            b->release(scale);
                        free(hx), free(hdy), free(hb), free(hw), free(hs);
                    }
    return end("glu specialised vs general kernels", b);
}

/* ---- SwiGLU's entry points as the family's SiLU case -------------------------------------- */

/* An operand layout of Megatron's fc1 output for the wrappers: padding of the input rows (a column
 * slice of a wider tensor), the input's element offset (misaligns vectors), padding of the output
 * rows (whose gaps must stay untouched), and dy's strides. */
typedef struct sw_layout {
    const char *name;
    int64_t in_pad, in_offset, out_pad;
    int dy_kind; /* 0 contiguous, 1 scalar (strides 0, 0), 2 row-broadcast (0, 1), 3 column stride
                    2, 4 transposed (row stride 1, column stride tokens) */
} sw_layout;

/* An operand: mostly 2 N(0, 1), some saturated (|x| in [8, 100]), and signed zeros at fixed places
 * (an up of -0 keeps its sign through the zero offset). */
static double sw_value(int64_t i) {
    if (i % 61 == 17) return (i / 61) % 2 ? -0.0 : 0.0;
    if (rng_next() % 32 == 0) return (rng_next() & 1 ? -1.0 : 1.0) * (8.0 + 92.0 * rng_uniform());
    return 2.0 * rng_normal();
}

static void sw_fail(const glu_backend *b, const char *what, const sw_layout *l, fastglu_dtype dt,
                    int64_t T, int64_t F, const char *msg, double value) {
    printf("FAIL %s swiglu %s: %s %s T=%lld F=%lld: %s (%g)\n", b->name, what, l->name,
           dtype_name(dt), (long long)T, (long long)F, msg, value);
    failures++;
}

/* The relative norm error, after an allowance per element of half the dtype's smallest subnormal
 * (a result below it rounds to 0 or to that subnormal: a T = 1, F = 1 fp16 product of about 1e-8
 * stored as 0 is a relative error of 1, and correct) or SW_ACT_UNDERFLOW, the larger. The latter
 * is the fp32 math's own: sigmoid(g) = 1 / (1 + e^-g) is 0 once e^-g overflows float32 (g below
 * -88.72; torch's fp32 silu gives 0 there too), where the exact g sigmoid(g) is below 2.7e-37, so
 * y, d_gate and d_up below 2.7e-37 |u| |dy|: 1e-33 covers the values drawn here (|u| <= 100, |dy|
 * under 30). A single such element (T = 1, F = 1, g = -92) otherwise reads a relative error of 1. */
#define SW_ACT_UNDERFLOW 1e-33
static double sw_rel_err(const double *got, const double *ref, int64_t n, fastglu_dtype dt) {
    double num = 0, den = 0;
    const double slack = fmax(0.5 * underflow(dt), SW_ACT_UNDERFLOW);
    for (int64_t i = 0; i < n; ++i) {
        double d = fabs(got[i] - ref[i]);
        d = d > slack ? d - slack : 0.0;
        if (got[i] != got[i] && ref[i] == ref[i]) d = NAN;
        num += d * d, den += ref[i] * ref[i];
    }
    if (!(num == num)) return INFINITY; /* NaN: never passes */
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Elements of rows x cols that differ bytewise: a at a_rs, a_cs against c at c_rs, c_cs. */
static int64_t sw_diff(const unsigned char *a, int64_t a_rs, int64_t a_cs, const unsigned char *c,
                       int64_t c_rs, int64_t c_cs, int64_t rows, int64_t cols, size_t es) {
    int64_t bad = 0;
    for (int64_t t = 0; t < rows; ++t)
        for (int64_t j = 0; j < cols; ++j)
            bad += memcmp(a + (t * a_rs + j * a_cs) * es, c + (t * c_rs + j * c_cs) * es, es) != 0;
    return bad;
}

/* Bytes outside rows x width at row stride rs from element off that differ from the sentinel. */
static int64_t sw_damage(const unsigned char *buf, size_t n, size_t es, int64_t off, int64_t rows,
                         int64_t width, int64_t rs) {
    int64_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
        const int64_t e = (int64_t)(i / es) - off;
        const int inside = e >= 0 && e / rs < rows && e % rs < width;
        if (!inside && buf[i] != 0x7f) bad++;
    }
    return bad;
}

static void *sw_put(const glu_backend *b, const void *h, size_t n) {
    void *d = b->alloc(n);
    b->upload(d, h, n);
    return d;
}
static unsigned char *sw_get(const glu_backend *b, const void *d, size_t n) {
    unsigned char *h = malloc(n);
    b->download(h, d, n);
    return h;
}

/* The backend's family calls with plain operands: no bias, weights, fp8 or reductions. */
static fastglu_status glu_flat_fwd(const glu_backend *b, const fastglu_glu_params *p,
                                   const void *gate, int64_t g_rs, const void *up, int64_t u_rs,
                                   void *y, int64_t y_rs, int64_t T, int64_t F, fastglu_dtype dt) {
    return b->fwd(p, gate, g_rs, up, u_rs, NULL, NULL, dt, 0, y, y_rs, NULL, 0, T, F, dt);
}
static fastglu_status glu_flat_bwd(const glu_backend *b, const fastglu_glu_params *p,
                                   const void *dy, int64_t dy_rs, int64_t dy_cs, const void *gate,
                                   int64_t g_rs, const void *up, int64_t u_rs, void *d_gate,
                                   int64_t dg_rs, void *d_up, int64_t du_rs, int64_t T, int64_t F,
                                   fastglu_dtype dt) {
    return b->bwd(p, dy, dy_rs, dy_cs, gate, g_rs, up, u_rs, dt, NULL, 0, 0, NULL, NULL, dt, 0,
                  d_gate, dg_rs, d_up, du_rs, NULL, NULL, NULL, 0, T, F, dt);
}

/* One case: the wrappers' forward and backward (in place: dinput = input), the float64 reference
 * and the sentinel; with_glu: fastglu_glu_* with the plain SILU parameters on the same inputs, its
 * buffers bitwise equal to the wrappers'; forms: also gate and up as two tensors and interleaved. */
static void sw_case(const glu_backend *b, const glu_swiglu_entry *s, fastglu_dtype dt, int64_t T,
                    int64_t F, const sw_layout *l, int in_place, int with_glu, int forms) {
    const size_t es = fastglu_dtype_size(dt);
    const int64_t W = 2 * F;
    const int64_t in_rs = in_place ? W : W + l->in_pad, in_off = in_place ? 0 : l->in_offset;
    const int64_t out_rs = F + l->out_pad, din_rs = in_place ? W : W + l->out_pad;
    const int64_t in_n = in_off + (T - 1) * in_rs + W;
    const int64_t out_n = (T - 1) * out_rs + F + 3, din_n = (T - 1) * din_rs + W + 3;
    int64_t dy_rs, dy_cs, dy_n;
    switch (in_place ? 0 : l->dy_kind) {
    case 1: dy_rs = 0, dy_cs = 0, dy_n = 1; break;
    case 2: dy_rs = 0, dy_cs = 1, dy_n = F; break;
    case 3: dy_rs = 2 * F, dy_cs = 2, dy_n = T * 2 * F; break;
    case 4: dy_rs = 1, dy_cs = T, dy_n = T * F; break;
    default: dy_rs = F, dy_cs = 1, dy_n = T * F; break;
    }
    const sw_layout inpl = {"in-place", 0, 0, 0, 0};
    if (in_place) l = &inpl;
    const fastglu_glu_params p = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    unsigned char *h_in = malloc(in_n * es), *h_dy = malloc(dy_n * es);
    unsigned char *h_out = malloc(out_n * es), *h_din = malloc(din_n * es);
    double *got = malloc(sizeof(double) * T * W), *ref = malloc(sizeof(double) * T * W);
    for (int64_t i = 0; i < in_n; ++i) store(dt, h_in, i, sw_value(i));
    for (int64_t i = 0; i < dy_n; ++i) store(dt, h_dy, i, rng_normal());
    memset(h_out, 0x7f, out_n * es);
    memset(h_din, 0x7f, din_n * es);
    const unsigned char *x = h_in + in_off * es; /* the operands as uploaded */

    /* the wrappers; outputs start 1 element in, so that a write one element early is caught too */
    void *d_in = sw_put(b, h_in, in_n * es), *d_dy = sw_put(b, h_dy, dy_n * es);
    void *d_out = sw_put(b, h_out, out_n * es),
         *d_din = in_place ? NULL : sw_put(b, h_din, din_n * es);
    char *in0 = (char *)d_in + in_off * es;
    char *din0 = in_place ? in0 : (char *)d_din + es;
    fastglu_status st = s->fwd(in0, in_rs, (char *)d_out + es, out_rs, T, F, dt);
    fastglu_status st2 = s->bwd(d_dy, dy_rs, dy_cs, in0, in_rs, din0, din_rs, T, F, dt);
    b->sync();
    unsigned char *r_out = sw_get(b, d_out, out_n * es);
    unsigned char *r_din = in_place ? sw_get(b, d_in, in_n * es) : sw_get(b, d_din, din_n * es);
    const int64_t rd_off = in_place ? 0 : 1; /* dinput's first element in r_din */
    checks++;
    if (st != FASTGLU_SUCCESS || st2 != FASTGLU_SUCCESS) {
        sw_fail(b, "status", l, dt, T, F, fastglu_last_error_message(), (double)(st ? st : st2));
        goto done;
    }

    /* the float64 reference and the sentinel */
    for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < F; ++j) {
            const double g = load(dt, x, t * in_rs + j), u = load(dt, x, t * in_rs + F + j);
            ref[t * F + j] = g * sigmoid(g) * u;
            got[t * F + j] = load(dt, r_out, 1 + t * out_rs + j);
        }
    double e = sw_rel_err(got, ref, T * F, dt);
    checks++;
    if (!(e <= tolerance(dt))) sw_fail(b, "forward", l, dt, T, F, "relative error", e);
    int64_t bad = sw_damage(r_out, out_n * es, es, 1, T, F, out_rs);
    checks++;
    if (bad) sw_fail(b, "forward", l, dt, T, F, "bytes written outside the output", (double)bad);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < F; ++j) {
            const double g = load(dt, x, t * in_rs + j), u = load(dt, x, t * in_rs + F + j);
            const double d = load(dt, h_dy, t * dy_rs + j * dy_cs), sg = sigmoid(g);
            ref[t * W + j] = d * sg * (1 + g * (1 - sg)) * u;
            ref[t * W + F + j] = d * g * sg;
            got[t * W + j] = load(dt, r_din, rd_off + t * din_rs + j);
            got[t * W + F + j] = load(dt, r_din, rd_off + t * din_rs + F + j);
        }
    e = sw_rel_err(got, ref, T * W, dt);
    checks++;
    if (!(e <= tolerance(dt))) sw_fail(b, "backward", l, dt, T, F, "relative error", e);
    if (!in_place) {
        bad = sw_damage(r_din, din_n * es, es, 1, T, W, din_rs);
        checks++;
        if (bad) sw_fail(b, "backward", l, dt, T, F, "bytes written outside dinput", (double)bad);
    }

    if (with_glu) { /* the family's call on the same operands: the same bits, buffer for buffer */
        void *g_in = sw_put(b, h_in, in_n * es), *g_out = sw_put(b, h_out, out_n * es);
        void *g_din = in_place ? NULL : sw_put(b, h_din, din_n * es);
        char *gi0 = (char *)g_in + in_off * es, *gd0 = in_place ? gi0 : (char *)g_din + es;
        st = glu_flat_fwd(b, &p, gi0, in_rs, gi0 + F * es, in_rs, (char *)g_out + es, out_rs, T, F,
                          dt);
        st2 = glu_flat_bwd(b, &p, d_dy, dy_rs, dy_cs, gi0, in_rs, gi0 + F * es, in_rs, gd0, din_rs,
                           gd0 + F * es, din_rs, T, F, dt);
        b->sync();
        unsigned char *q_out = sw_get(b, g_out, out_n * es);
        unsigned char *q_din = in_place ? sw_get(b, g_in, in_n * es) : sw_get(b, g_din, din_n * es);
        checks += 3;
        if (st != FASTGLU_SUCCESS || st2 != FASTGLU_SUCCESS)
            sw_fail(b, "glu status", l, dt, T, F, fastglu_last_error_message(),
                    (double)(st ? st : st2));
        else {
            if ((bad = sw_diff(r_out, 0, 1, q_out, 0, 1, 1, out_n, es)))
                sw_fail(b, "forward", l, dt, T, F, "elements differ from fastglu_glu_fwd's",
                        (double)bad);
            if ((bad = sw_diff(r_din, 0, 1, q_din, 0, 1, 1, in_place ? in_n : din_n, es)))
                sw_fail(b, "backward", l, dt, T, F, "elements differ from fastglu_glu_bwd's",
                        (double)bad);
        }
        free(q_out), free(q_din);
        b->release(g_in), b->release(g_out);
        if (g_din) b->release(g_din);
    }

    if (forms) { /* gate and up as two [T, F] tensors, and interleaved [T, 2F] */
        unsigned char *h_g = malloc(T * F * es), *h_u = malloc(T * F * es),
                      *h_x = malloc(T * W * es);
        for (int64_t t = 0; t < T; ++t)
            for (int64_t j = 0; j < F; ++j) {
                memcpy(h_g + (t * F + j) * es, x + (t * in_rs + j) * es, es);
                memcpy(h_u + (t * F + j) * es, x + (t * in_rs + F + j) * es, es);
                memcpy(h_x + (t * W + 2 * j) * es, x + (t * in_rs + j) * es, es);
                memcpy(h_x + (t * W + 2 * j + 1) * es, x + (t * in_rs + F + j) * es, es);
            }
        fastglu_glu_params pil = p;
        pil.layout = FASTGLU_LAYOUT_INTERLEAVED;
        unsigned char *h_o = malloc(T * W * es);
        memset(h_o, 0x7f, T * W * es);
        void *dg = sw_put(b, h_g, T * F * es), *du = sw_put(b, h_u, T * F * es);
        void *dx = sw_put(b, h_x, T * W * es);
        void *o1 = sw_put(b, h_o, T * F * es), *o2 = sw_put(b, h_o, T * F * es);
        void *dg1 = sw_put(b, h_o, T * F * es), *du1 = sw_put(b, h_o, T * F * es);
        void *dx2 = sw_put(b, h_o, T * W * es);
        const fastglu_status s1 = glu_flat_fwd(b, &p, dg, F, du, F, o1, F, T, F, dt);
        const fastglu_status s2 = glu_flat_fwd(b, &pil, dx, W, NULL, 0, o2, F, T, F, dt);
        const fastglu_status s3 =
            glu_flat_bwd(b, &p, d_dy, dy_rs, dy_cs, dg, F, du, F, dg1, F, du1, F, T, F, dt);
        const fastglu_status s4 =
            glu_flat_bwd(b, &pil, d_dy, dy_rs, dy_cs, dx, W, NULL, 0, dx2, W, NULL, 0, T, F, dt);
        b->sync();
        unsigned char *a1 = sw_get(b, o1, T * F * es), *a2 = sw_get(b, o2, T * F * es);
        unsigned char *a3 = sw_get(b, dg1, T * F * es), *a4 = sw_get(b, du1, T * F * es);
        unsigned char *a5 = sw_get(b, dx2, T * W * es);
        const unsigned char *ro = r_out + es, *rd = r_din + rd_off * es;
        checks += 2;
        if (s1 || s2 || s3 || s4)
            sw_fail(b, "two tensors / interleaved status", l, dt, T, F,
                    fastglu_last_error_message(), (double)(s1 | s2 | s3 | s4));
        else {
            bad = sw_diff(ro, out_rs, 1, a1, F, 1, T, F, es) +
                  sw_diff(ro, out_rs, 1, a2, F, 1, T, F, es);
            if (bad)
                sw_fail(b, "forward", l, dt, T, F,
                        "elements differ from fastglu_glu_fwd's (two tensors, interleaved)",
                        (double)bad);
            bad = sw_diff(rd, din_rs, 1, a3, F, 1, T, F, es) +
                  sw_diff(rd + F * es, din_rs, 1, a4, F, 1, T, F, es) +
                  sw_diff(rd, din_rs, 1, a5, W, 2, T, F, es) +
                  sw_diff(rd + F * es, din_rs, 1, a5 + es, W, 2, T, F, es);
            if (bad)
                sw_fail(b, "backward", l, dt, T, F,
                        "elements differ from fastglu_glu_bwd's (two tensors, interleaved)",
                        (double)bad);
        }
        void *rel[] = {dg, du, dx, o1, o2, dg1, du1, dx2};
        for (size_t i = 0; i < sizeof rel / sizeof *rel; ++i) b->release(rel[i]);
        free(h_g), free(h_u), free(h_x), free(h_o), free(a1), free(a2), free(a3), free(a4),
            free(a5);
    }

done:
    b->release(d_in), b->release(d_dy), b->release(d_out);
    if (d_din) b->release(d_din);
    free(h_in), free(h_dy), free(h_out), free(h_din), free(got), free(ref), free(r_out),
        free(r_din);
}

int run_glu_swiglu(const glu_backend *b, const glu_swiglu_entry *s) {
    begin("swiglu entry points", b);
    static const int64_t widths[] = {1, 3, 768, 1408, 3420, 5632, 8192};
    static const int64_t rows[] = {1, 257};
    static const sw_layout layouts[] = {
        {"contiguous", 0, 0, 0, 0},
        {"column-slice", 24, 8, 8, 0},    /* rows of a wider tensor, still 16-byte aligned */
        {"misaligned", 5, 3, 1, 3},       /* odd offsets and strides: narrow vectors */
        {"dy-scalar", 0, 0, 0, 1},        /* y.sum().backward() */
        {"dy-row-broadcast", 8, 0, 0, 2}, /* dy expanded over rows */
        {"dy-transposed", 0, 0, 0, 4},    /* dy read column-major */
    };
    for (size_t d = 0; d < 3; ++d)
        for (size_t w = 0; w < sizeof widths / sizeof *widths; ++w)
            for (size_t r = 0; r < sizeof rows / sizeof *rows; ++r) {
                for (size_t l = 0; l < sizeof layouts / sizeof *layouts; ++l)
                    sw_case(b, s, dtypes[d], rows[r], widths[w], &layouts[l], 0, 1, l == 0);
                sw_case(b, s, dtypes[d], rows[r], widths[w], &layouts[0], 1, 1, 0);
            }
    return end("swiglu entry points", b);
}

int run_glu_swiglu_sentinel_sweep(const glu_backend *b, const glu_swiglu_entry *s) {
    begin("swiglu sentinel sweep", b);
    /* widths that break vectorised kernels (odd, prime, just past a power of two, misaligned
     * halves) x row counts from one to past a 4096-row wave */
    static const int64_t widths[] = {1,   2,   3,   5,   7,    8,    127,  256,
                                     257, 320, 640, 768, 1408, 2816, 3420, 5632};
    static const int64_t rows[] = {1, 2, 257, 4097};
    static const sw_layout padded = {"sweep", 0, 0, 3, 0};
    for (size_t d = 0; d < 3; ++d)
        for (size_t w = 0; w < sizeof widths / sizeof *widths; ++w)
            for (size_t r = 0; r < sizeof rows / sizeof *rows; ++r)
                sw_case(b, s, dtypes[d], rows[r], widths[w], &padded, 0, 0, 0);
    return end("swiglu sentinel sweep", b);
}
