/*
 * gemm_reference.c — the linear layers' test driver (see gemm_reference.h).
 *
 * Inputs: x ~ U(-1, 1), w ~ U(-1, 1) / sqrt(H) (so that h is of order 1 and the activations work in
 * their curved range), bias ~ U(-0.5, 0.5), per-token weights ~ U(0.1, 1), all rounded to their
 * dtype; the float64 reference reads the rounded values. h is checked against its float64 value;
 * y against the formulas of include/fastglu.h ("The gated-linear-unit family") in float64 applied
 * to the stored h, since y is defined from h rounded to the dtype (and a reference from the
 * unrounded h would charge y with h's rounding, amplified where u + o cancels).
 */
#include "gemm_reference.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "convert.h"

static uint64_t rng_state = 1;

static uint64_t next_u64(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform(double lo, double hi) {
    return lo + (hi - lo) * (double)(next_u64() >> 11) * (1.0 / 9007199254740992.0);
}

void gemm_seed(const char *name) {
    const char *env = getenv("FASTGLU_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ (uint64_t)clock();
    rng_state = seed;
    printf("%s: seed %llu (set FASTGLU_TEST_SEED to repeat)\n", name, (unsigned long long)seed);
}

/* ---- element access on host copies ---------------------------------------------------------- */

static size_t esize(fastglu_dtype dt) { return fastglu_dtype_size(dt); }

/* v rounded to dt, stored at p[i]; returns the rounded value */
static float put(fastglu_dtype dt, void *p, int64_t i, double v) {
    switch (dt) {
    case FASTGLU_DTYPE_FP32: ((float *)p)[i] = (float)v; return (float)v;
    case FASTGLU_DTYPE_FP16:
        ((uint16_t *)p)[i] = f32_to_fp16((float)v);
        return fp16_to_f32(((uint16_t *)p)[i]);
    case FASTGLU_DTYPE_BF16:
        ((uint16_t *)p)[i] = f32_to_bf16((float)v);
        return bf16_to_f32(((uint16_t *)p)[i]);
    default: return NAN;
    }
}

static double get(fastglu_dtype dt, const void *p, int64_t i) {
    switch (dt) {
    case FASTGLU_DTYPE_FP32: return ((const float *)p)[i];
    case FASTGLU_DTYPE_FP16: return fp16_to_f32(((const uint16_t *)p)[i]);
    case FASTGLU_DTYPE_BF16: return bf16_to_f32(((const uint16_t *)p)[i]);
    default: return NAN;
    }
}

static const char *dtype_name(fastglu_dtype dt) {
    return dt == FASTGLU_DTYPE_FP32 ? "fp32" : dt == FASTGLU_DTYPE_FP16 ? "fp16" : "bf16";
}

/* ---- buffers: a host copy and the backend's copy --------------------------------------------- */

typedef struct buf {
    unsigned char *host;
    void *dev;
    size_t bytes;
} buf;

static buf buf_new(const gemm_backend *b, size_t bytes) {
    buf r;
    r.bytes = bytes ? bytes : 1;
    r.host = (unsigned char *)malloc(r.bytes);
    r.dev = b->alloc(r.bytes);
    if (!r.host || !r.dev) {
        fprintf(stderr, "out of memory (%zu bytes)\n", r.bytes);
        exit(1);
    }
    memset(r.host, 0xff, r.bytes); /* the sentinel: NaN in fp32, fp16 and bf16 */
    return r;
}
static void buf_up(const gemm_backend *b, buf *r) { b->upload(r->dev, r->host, r->bytes); }
static void buf_down(const gemm_backend *b, buf *r) { b->download(r->host, r->dev, r->bytes); }
static void buf_free(const gemm_backend *b, buf *r) {
    b->release(r->dev);
    free(r->host);
}
static void *at(const buf *r, size_t byte_offset) { return (char *)r->dev + byte_offset; }

/* ---- the reference ---------------------------------------------------------------------------- */

typedef struct variant {
    const char *name;
    int glu;
    fastglu_activation act;
    fastglu_layout layout;
    int bias;
    int weights; /* 0: none; else the weights dtype + 1 */
    int64_t wstride;
    float clamp, offset, gm, dm;
} variant;

static const variant VARIANTS[] = {
    {"linear", 0, FASTGLU_ACT_SILU, FASTGLU_LAYOUT_SPLIT, 0, 0, 0, 0, 0, 1, 1},
    {"linear+bias", 0, FASTGLU_ACT_SILU, FASTGLU_LAYOUT_SPLIT, 1, 0, 0, 0, 0, 1, 1},
    {"silu", 1, FASTGLU_ACT_SILU, FASTGLU_LAYOUT_SPLIT, 0, 0, 0, 0, 0, 1, 1},
    {"silu+bias", 1, FASTGLU_ACT_SILU, FASTGLU_LAYOUT_SPLIT, 1, 0, 0, 0, 0, 1, 1},
    {"gelu_tanh+bias+weights(fp32)", 1, FASTGLU_ACT_GELU_TANH, FASTGLU_LAYOUT_SPLIT, 1,
     1 + FASTGLU_DTYPE_FP32, 1, 0, 0, 1, 1},
    {"quick_gelu+interleaved+bias+weights(bf16)+clamp+offset", 1, FASTGLU_ACT_QUICK_GELU,
     FASTGLU_LAYOUT_INTERLEAVED, 1, 1 + FASTGLU_DTYPE_BF16, 1, 0.4f, 1.0f, 1, 1},
    {"silu+interleaved+clamp+multipliers+weights(fp16,stride 3)", 1, FASTGLU_ACT_SILU,
     FASTGLU_LAYOUT_INTERLEAVED, 0, 1 + FASTGLU_DTYPE_FP16, 3, 0.3f, 0, 1.5f, 0.5f},
    {"silu+bias+clamp+offset+weights(fp32,stride 2)", 1, FASTGLU_ACT_SILU, FASTGLU_LAYOUT_SPLIT, 1,
     1 + FASTGLU_DTYPE_FP32, 2, 0.5f, -0.5f, 1, 1},
    {"gelu_tanh+interleaved+clamp+offset+multipliers", 1, FASTGLU_ACT_GELU_TANH,
     FASTGLU_LAYOUT_INTERLEAVED, 0, 0, 0, 0.5f, 0.25f, 0.75f, 2.0f},
};
#define N_VARIANTS ((int)(sizeof VARIANTS / sizeof VARIANTS[0]))

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

static double act(fastglu_activation a, double z) {
    switch (a) {
    case FASTGLU_ACT_SILU: return z * sigmoid(z);
    case FASTGLU_ACT_GELU_TANH:
        return 0.5 * z * (1.0 + tanh(0.79788456 * z * (1.0 + 0.044715 * z * z)));
    case FASTGLU_ACT_QUICK_GELU: return z * sigmoid(1.702 * z);
    }
    return NAN;
}

/* y from raw operands g, u (h's values, bias included) and the token's weight */
static double glu_ref(const variant *v, double g, double u, double w) {
    if (v->clamp > 0) {
        const double c = v->clamp;
        g = g > c ? c : g;
        u = u > c ? c : (u < -c ? -c : u);
    }
    return (double)v->dm * w * act(v->act, (double)v->gm * g) * (u + (double)v->offset);
}

/* ---- one case ---------------------------------------------------------------------------------- */

static fastglu_tensor tensor(void *data, fastglu_dtype dt, int64_t rs) {
    fastglu_tensor t;
    t.data = data, t.dtype = dt, t.row_stride = rs;
    return t;
}

static fastglu_glu_params params_of(const variant *v) {
    fastglu_glu_params p = fastglu_glu_params_default(v->act);
    p.layout = v->layout;
    p.clamp_value = v->clamp, p.glu_linear_offset = v->offset;
    p.gate_multiplier = v->gm, p.down_multiplier = v->dm;
    return p;
}

static double tolerance(fastglu_dtype dt) {
    return dt == FASTGLU_DTYPE_BF16 ? 1e-2 : dt == FASTGLU_DTYPE_FP16 ? 1e-3 : 1e-5;
}

/* The spacing of dtype's subnormal numbers: an output that lands below the normal range is rounded
 * to a multiple of it, an absolute error no relative bound covers (an fp16 d_gate of -7.25e-6 is
 * stored to within 3e-8, 0.4 % of itself). */
static double subnormal_step(fastglu_dtype dt) {
    return dt == FASTGLU_DTYPE_BF16   ? ldexp(1.0, -133)
           : dt == FASTGLU_DTYPE_FP16 ? ldexp(1.0, -24)
                                      : ldexp(1.0, -149);
}

/* v rounded to dt as the library rounds an fp32 value (through fp32) */
static double rounded(fastglu_dtype dt, double v) {
    uint32_t tmp;
    return put(dt, &tmp, 0, v);
}

/* ||got - ref|| <= tolerance ||ref|| + sqrt(count) * subnormal step, from the sums of squares e
 * (of the errors) and n (of the reference) over count elements. */
static int within(double e, double n, double count, fastglu_dtype dt) {
    return sqrt(e) <= tolerance(dt) * sqrt(n) + sqrt(count) * subnormal_step(dt);
}

/* The same with acc2 more: the square of the error dY may carry, times the output's derivative in
 * dY (dY = dO @ w2 at T = 1, F = 1: a relative bound on dY alone is unbounded where the sum
 * cancels); for dh also the fp32 evaluation of the activation's derivative where that cancels
 * (dglu_ref.dg_eval). The library reads dY as its fp32 sum, within K 2^-24 sum |products| of the
 * exact one, rounded to dtype; the reference takes the exact sum rounded to dtype, and dY's error
 * is how far the rounding spreads over that interval (0 where both ends round alike: the
 * contract's own rounding is not charged as error). */
static int within_acc(double e, double n, double acc2, double count, fastglu_dtype dt) {
    return sqrt(e) <= tolerance(dt) * sqrt(n) + sqrt(acc2) + sqrt(count) * subnormal_step(dt);
}

/* An output [rows, width] of row stride rs at element offset off in r->host (downloaded): every
 * padding byte (before off, row tails, past the last row) still the sentinel; every element of the
 * region not NaN (written). Returns the number of failures. */
static int check_padding(const buf *r, int64_t off, int64_t rows, int64_t width, int64_t rs,
                         size_t es, const char *what) {
    int64_t bad_pad = 0, unwritten = 0;
    const int64_t total = (int64_t)(r->bytes / es);
    for (int64_t i = 0; i < total; ++i) {
        const int64_t e = i - off;
        const int inside = e >= 0 && e / rs < rows && e % rs < width;
        const unsigned char *p = r->host + i * es;
        int sentinel = 1;
        for (size_t k = 0; k < es; ++k) sentinel &= p[k] == 0xff;
        if (inside) {
            unwritten += sentinel; /* a NaN no finite input produces */
        } else {
            bad_pad += !sentinel;
        }
    }
    if (bad_pad || unwritten) {
        printf("  FAIL %s: %lld padding elements touched, %lld elements not written\n", what,
               (long long)bad_pad, (long long)unwritten);
        return 1;
    }
    return 0;
}

static int run_case(const gemm_backend *b, const variant *v, gemm_shape s, fastglu_dtype dt,
                    int odd) {
    const int64_t T = s.T, H = s.H, F = s.F, NW = v->glu ? 2 * F : F;
    const size_t es = esize(dt);
    const int64_t off = odd ? 1 : 0; /* elements: every base pointer one element off */
    const int64_t x_rs = H + (odd ? 3 : 0), w_rs = H + (odd ? 5 : 0);
    /* odd: every pointer and stride misaligned (the general kernel); else strides that keep the
     * alignment the sm_90a kernel needs (multiples of 8 where the widths are), with a gap between
     * rows for the padding check: the calls with and without h then run the same kernel */
    const int64_t h_rs = NW + (odd ? 7 : 8), y_rs = F + (odd ? 2 : 8);
    const fastglu_dtype wdt = v->weights ? (fastglu_dtype)(v->weights - 1) : FASTGLU_DTYPE_FP32;
    const int64_t wst = v->weights ? v->wstride : 0;
    int failed = 0;
    char label[256];
    snprintf(label, sizeof label, "%s %s %s T=%lld H=%lld F=%lld%s", b->name, v->name,
             dtype_name(dt), (long long)T, (long long)H, (long long)F, odd ? " (odd strides)" : "");

    buf x = buf_new(b, (size_t)(off + T * x_rs + 1) * es);
    buf w = buf_new(b, (size_t)(off + NW * w_rs + 1) * es);
    buf bias = buf_new(b, (size_t)(off + NW + 1) * es);
    buf wt = buf_new(b, (size_t)(off + T * (wst ? wst : 1) + 1) * esize(wdt));
    buf h = buf_new(b, (size_t)(off + T * h_rs + 1) * es);
    buf y = buf_new(b, (size_t)(off + T * y_rs + 1) * es);
    buf y2 = buf_new(b, (size_t)(off + T * y_rs + 1) * es);
    float *xf = (float *)malloc((size_t)(T * H + 1) * sizeof(float));
    float *wf = (float *)malloc((size_t)(NW * H + 1) * sizeof(float));
    double *bf = (double *)calloc((size_t)NW + 1, sizeof(double));
    double *wtf = (double *)malloc((size_t)T * sizeof(double) + 8);
    const double wscale = H > 0 ? 1.0 / sqrt((double)H) : 1.0;
    for (int64_t t = 0; t < T; ++t)
        for (int64_t k = 0; k < H; ++k)
            xf[t * H + k] = put(dt, x.host, off + t * x_rs + k, uniform(-1, 1));
    for (int64_t c = 0; c < NW; ++c)
        for (int64_t k = 0; k < H; ++k)
            wf[c * H + k] = put(dt, w.host, off + c * w_rs + k, uniform(-1, 1) * wscale);
    if (v->bias)
        for (int64_t c = 0; c < NW; ++c) bf[c] = put(dt, bias.host, off + c, uniform(-0.5, 0.5));
    for (int64_t t = 0; t < T; ++t)
        wtf[t] = v->weights ? put(wdt, wt.host, off + t * wst, uniform(0.1, 1.0)) : 1.0;
    buf_up(b, &x), buf_up(b, &w), buf_up(b, &bias), buf_up(b, &wt), buf_up(b, &h), buf_up(b, &y),
        buf_up(b, &y2);

    const fastglu_tensor tx = tensor(at(&x, off * es), dt, x_rs),
                         tw = tensor(at(&w, off * es), dt, w_rs);
    const fastglu_tensor tb = tensor(v->bias ? at(&bias, off * es) : NULL, dt, 1);
    const fastglu_tensor twt = tensor(v->weights ? at(&wt, off * esize(wdt)) : NULL, wdt, wst);
    const fastglu_tensor th = tensor(at(&h, off * es), dt, h_rs),
                         ty = tensor(at(&y, off * es), dt, y_rs);
    const fastglu_tensor ty2 = tensor(at(&y2, off * es), dt, y_rs), none = tensor(NULL, dt, 0);
    const fastglu_glu_params p = params_of(v);
    fastglu_status st;
    if (v->glu)
        st = b->linear_glu(&p, tx, tw, tb, twt, th, ty, T, H, F);
    else
        st = b->linear(tx, tw, tb, th, T, H, F);
    if (st != FASTGLU_SUCCESS) {
        printf("  FAIL %s: status %d: %s\n", label, (int)st, fastglu_last_error_message());
        failed++;
        goto done;
    }
    b->sync();
    if (v->glu) { /* the same call without h: y2 */
        st = b->linear_glu(&p, tx, tw, tb, twt, none, ty2, T, H, F);
        b->sync();
        if (st != FASTGLU_SUCCESS) {
            printf("  FAIL %s (h not stored): status %d: %s\n", label, (int)st,
                   fastglu_last_error_message());
            failed++;
            goto done;
        }
    }
    buf_down(b, &h);
    failed += check_padding(&h, off, T, NW, h_rs, es, v->glu ? "h" : "out");
    if (v->glu && b->glu_fwd == NULL) {
        buf_down(b, &y), buf_down(b, &y2);
        failed += check_padding(&y, off, T, F, y_rs, es, "y");
        if (memcmp(y.host, y2.host, y.bytes) != 0) {
            printf("  FAIL %s: y without h stored differs from y with h stored\n", label);
            failed++;
        }
    } else if (v->glu) {
        buf_down(b, &y), buf_down(b, &y2);
        failed += check_padding(&y, off, T, F, y_rs, es, "y");
        if (memcmp(y.host, y2.host, y.bytes) != 0) {
            printf("  FAIL %s: y without h stored differs from y with h stored\n", label);
            failed++;
        }
        /* y bitwise equal to the standalone forward on the stored h */
        memset(y2.host, 0xff, y2.bytes);
        buf_up(b, &y2);
        const int il = v->layout == FASTGLU_LAYOUT_INTERLEAVED;
        st = b->glu_fwd(&p, th.data, h_rs, il ? NULL : (char *)th.data + F * es, h_rs, NULL,
                        twt.data, wdt, wst, ty2.data, y_rs, NULL, 0, T, F, dt);
        b->sync();
        buf_down(b, &y2);
        if (st != FASTGLU_SUCCESS || memcmp(y.host, y2.host, y.bytes) != 0) {
            printf("  FAIL %s: y differs from fastglu_glu_fwd on the stored h (status %d)\n", label,
                   (int)st);
            failed++;
        }
    }

    { /* against the float64 reference, on every row or a sample */
        const int sample = (double)T * (double)NW * (double)H > 268435456.0;
        const int64_t n_rows = sample ? 48 : T;
        double eh = 0, nh = 0, ah = 0, ey = 0, ny = 0;
        double *href = (double *)malloc((size_t)(NW + 1) * sizeof(double));
        for (int64_t r = 0; r < n_rows; ++r) {
            const int64_t t = !sample  ? r
                              : r == 0 ? 0
                              : r == 1 ? T - 1
                                       : (int64_t)(next_u64() % (uint64_t)T);
            for (int64_t c = 0; c < NW; ++c) {
                double acc = 0, acc_abs = fabs(bf[c]);
                const float *xr = xf + t * H, *wr = wf + c * H;
                for (int64_t k = 0; k < H; ++k)
                    acc += (double)xr[k] * (double)wr[k],
                        acc_abs += fabs((double)xr[k] * (double)wr[k]);
                href[c] = acc + bf[c];
                const double got = get(dt, h.host, off + t * h_rs + c);
                eh += (got - href[c]) * (got - href[c]), nh += href[c] * href[c];
                /* the fp32 accumulation bound of K + 1 terms, (H + 1) 2^-24 sum |terms|: where the
                 * sum cancels (T = 1, H = 8 in fp32) no bound relative to h alone holds */
                const double a = (double)(H + 1) * 0x1p-24 * acc_abs;
                ah += a * a;
            }
            if (v->glu)
                for (int64_t j = 0; j < F; ++j) {
                    const int il = v->layout == FASTGLU_LAYOUT_INTERLEAVED;
                    /* from the stored h, as the contract says (its own error is checked above) */
                    const int64_t hg = off + t * h_rs + (il ? 2 * j : j), hu = hg + (il ? 1 : F);
                    const double g = get(dt, h.host, hg), u = get(dt, h.host, hu);
                    const double ref = glu_ref(v, g, u, wtf[t]);
                    const double got = get(dt, y.host, off + t * y_rs + j);
                    ey += (got - ref) * (got - ref), ny += ref * ref;
                }
        }
        free(href);
        const double tol = tolerance(dt);
        const double rh = nh > 0 ? sqrt(eh / nh) : sqrt(eh), ry = ny > 0 ? sqrt(ey / ny) : sqrt(ey);
        if (!within_acc(eh, nh, ah, (double)n_rows * (double)NW, dt) ||
            !within(ey, ny, (double)n_rows * (double)F, dt)) {
            printf("  FAIL %s: relative error h %.3g, y %.3g (tolerance %.0e)\n", label, rh, ry,
                   tol);
            failed++;
        }
    }
done:
    if (failed == 0 && getenv("GEMM_VERBOSE")) printf("  ok %s\n", label);
    buf_free(b, &x), buf_free(b, &w), buf_free(b, &bias), buf_free(b, &wt), buf_free(b, &h),
        buf_free(b, &y), buf_free(b, &y2);
    free(xf), free(wf), free(bf), free(wtf);
    return failed;
}

int run_gemm_suite(const gemm_backend *b, const gemm_shape *shapes, int n_shapes, int dtype_mask,
                   unsigned variants_mask) {
    static const fastglu_dtype dts[3] = {FASTGLU_DTYPE_FP32, FASTGLU_DTYPE_FP16,
                                         FASTGLU_DTYPE_BF16};
    int failed = 0, cases = 0;
    for (int s = 0; s < n_shapes; ++s)
        for (int d = 0; d < 3; ++d) {
            if (!(dtype_mask & (1 << d))) continue;
            for (int v = 0; v < N_VARIANTS; ++v) {
                if (!(variants_mask & (1u << v))) continue;
                failed += run_case(b, &VARIANTS[v], shapes[s], dts[d], (cases++) & 1);
            }
        }
    printf("%s: gemm suite: %d cases, %d failed\n", b->name, cases, failed);
    return failed;
}

/* ---- bad input ---------------------------------------------------------------------------------- */

typedef struct err_env {
    const gemm_backend *b;
    buf all; /* one buffer: x, w1, bias, weights, h, y at fixed offsets */
    unsigned char *before;
} err_env;

static int expect_error(err_env *e, const char *what, fastglu_status got, fastglu_status want,
                        const char *needle) {
    int failed = 0;
    const char *msg = fastglu_last_error_message();
    if (got != want || strstr(msg, needle) == NULL) {
        printf("  FAIL %s: status %d (want %d), message \"%s\" (want \"%s\")\n", what, (int)got,
               (int)want, msg, needle);
        failed++;
    }
    e->b->sync();
    buf_down(e->b, &e->all);
    if (memcmp(e->all.host, e->before, e->all.bytes) != 0) {
        printf("  FAIL %s: memory changed\n", what);
        failed++;
    }
    return failed;
}

int run_gemm_errors(const gemm_backend *b) {
    const int64_t T = 4, H = 8, F = 6;
    const fastglu_dtype dt = FASTGLU_DTYPE_BF16;
    const size_t es = 2;
    /* element offsets of each operand in the one buffer */
    const int64_t ox = 0, ow = ox + T * H, ob = ow + 2 * F * H, owt = ob + 2 * F, oh = owt + T * 2,
                  oy = oh + T * 2 * F, total = oy + T * F;
    err_env e;
    e.b = b;
    e.all = buf_new(b, (size_t)total * es);
    for (int64_t i = 0; i < total; ++i) put(dt, e.all.host, i, uniform(-1, 1));
    e.before = (unsigned char *)malloc(e.all.bytes);
    memcpy(e.before, e.all.host, e.all.bytes);
    buf_up(b, &e.all);
    char *base = (char *)e.all.dev;
    const fastglu_tensor x = tensor(base + ox * es, dt, H), w1 = tensor(base + ow * es, dt, H),
                         bias = tensor(base + ob * es, dt, 1),
                         wts = tensor(base + owt * es, FASTGLU_DTYPE_BF16, 2),
                         h = tensor(base + oh * es, dt, 2 * F), y = tensor(base + oy * es, dt, F),
                         none = tensor(NULL, dt, 0);
    const fastglu_glu_params p = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    fastglu_tensor t, t2;
    int failed = 0;

    /* the valid call succeeds (then the buffer is restored) */
    if (b->linear_glu(&p, x, w1, bias, wts, h, y, T, H, F) != FASTGLU_SUCCESS) {
        printf("  FAIL valid call: %s\n", fastglu_last_error_message());
        failed++;
    }
    b->sync();
    buf_up(b, &e.all);

    t = w1, t.dtype = FASTGLU_DTYPE_FP16;
    failed +=
        expect_error(&e, "w1 fp16 with x bf16", b->linear_glu(&p, x, t, bias, wts, h, y, T, H, F),
                     FASTGLU_ERROR_UNSUPPORTED_DTYPE, "w1.dtype 1 differs from x.dtype 2");
    t = x, t.dtype = FASTGLU_DTYPE_FP8_E4M3;
    failed += expect_error(&e, "x fp8", b->linear_glu(&p, t, w1, bias, wts, h, y, T, H, F),
                           FASTGLU_ERROR_UNSUPPORTED_DTYPE, "x.dtype 3");
    t = y, t.dtype = FASTGLU_DTYPE_FP32;
    failed += expect_error(&e, "y fp32", b->linear_glu(&p, x, w1, bias, wts, h, t, T, H, F),
                           FASTGLU_ERROR_UNSUPPORTED_DTYPE, "y.dtype 0 differs");
    t = wts, t.dtype = (fastglu_dtype)9;
    failed += expect_error(&e, "weights dtype 9", b->linear_glu(&p, x, w1, bias, t, h, y, T, H, F),
                           FASTGLU_ERROR_UNSUPPORTED_DTYPE, "weights.dtype 9");
    t = x, t.data = base + 1;
    failed += expect_error(&e, "misaligned x", b->linear_glu(&p, t, w1, bias, wts, h, y, T, H, F),
                           FASTGLU_ERROR_INVALID_VALUE, "x = ");
    t = y, t.data = (char *)y.data + 1;
    failed += expect_error(&e, "misaligned y", b->linear_glu(&p, x, w1, bias, wts, h, t, T, H, F),
                           FASTGLU_ERROR_INVALID_VALUE, "is not aligned");
    t = x, t.data = NULL;
    failed += expect_error(&e, "x NULL", b->linear_glu(&p, t, w1, bias, wts, h, y, T, H, F),
                           FASTGLU_ERROR_INVALID_VALUE, "x is NULL");
    t = y, t.data = x.data;
    failed += expect_error(&e, "y aliasing x", b->linear_glu(&p, x, w1, bias, wts, h, t, T, H, F),
                           FASTGLU_ERROR_INVALID_VALUE, "y overlaps x");
    t = h, t.data = (char *)w1.data + 2 * es;
    failed +=
        expect_error(&e, "h overlapping w1", b->linear_glu(&p, x, w1, bias, wts, t, y, T, H, F),
                     FASTGLU_ERROR_INVALID_VALUE, "h overlaps w1");
    t = y, t.data = (char *)h.data + 3 * es;
    failed +=
        expect_error(&e, "y overlapping h", b->linear_glu(&p, x, w1, bias, wts, h, t, T, H, F),
                     FASTGLU_ERROR_INVALID_VALUE, "y overlaps h");
    t = y, t.data = bias.data;
    failed +=
        expect_error(&e, "y aliasing bias", b->linear_glu(&p, x, w1, bias, wts, h, t, T, H, F),
                     FASTGLU_ERROR_INVALID_VALUE, "y overlaps bias");
    t = h, t.data = wts.data;
    failed +=
        expect_error(&e, "h aliasing weights", b->linear_glu(&p, x, w1, bias, wts, t, y, T, H, F),
                     FASTGLU_ERROR_INVALID_VALUE, "h overlaps weights");
    t = y, t.row_stride = F - 1;
    failed +=
        expect_error(&e, "y rows overlapping", b->linear_glu(&p, x, w1, bias, wts, h, t, T, H, F),
                     FASTGLU_ERROR_INVALID_VALUE, "y");
    t = bias, t.row_stride = 2;
    failed += expect_error(&e, "bias strided", b->linear_glu(&p, x, w1, t, wts, h, y, T, H, F),
                           FASTGLU_ERROR_INVALID_VALUE, "bias.row_stride = 2");
    failed += expect_error(&e, "tokens -1", b->linear_glu(&p, x, w1, bias, wts, h, y, -1, H, F),
                           FASTGLU_ERROR_INVALID_VALUE, "tokens = -1");
    failed += expect_error(&e, "hidden -2", b->linear_glu(&p, x, w1, bias, wts, h, y, T, -2, F),
                           FASTGLU_ERROR_INVALID_VALUE, "hidden = -2");
    failed += expect_error(&e, "F -3", b->linear_glu(&p, x, w1, bias, wts, h, y, T, H, -3),
                           FASTGLU_ERROR_INVALID_VALUE, "ffn_hidden_size = -3");
    failed += expect_error(&e, "params NULL", b->linear_glu(NULL, x, w1, bias, wts, h, y, T, H, F),
                           FASTGLU_ERROR_INVALID_VALUE, "params is NULL");
    fastglu_glu_params q = p;
    q.activation = (fastglu_activation)7;
    failed += expect_error(&e, "activation 7", b->linear_glu(&q, x, w1, bias, wts, h, y, T, H, F),
                           FASTGLU_ERROR_INVALID_VALUE, "params->activation = 7");
    q = p, q.gate_multiplier = NAN;
    failed +=
        expect_error(&e, "gate_multiplier NaN", b->linear_glu(&q, x, w1, bias, wts, h, y, T, H, F),
                     FASTGLU_ERROR_INVALID_VALUE, "gate_multiplier");
    /* the plain linear */
    t = h, t.data = (char *)w1.data + es, t.row_stride = F;
    failed += expect_error(&e, "linear: out overlapping w", b->linear(x, w1, bias, t, T, H, F),
                           FASTGLU_ERROR_INVALID_VALUE, "out overlaps w");
    t2 = w1, t2.dtype = FASTGLU_DTYPE_FP32;
    failed += expect_error(&e, "linear: w fp32 with x bf16", b->linear(x, t2, bias, h, T, H, F),
                           FASTGLU_ERROR_UNSUPPORTED_DTYPE, "w.dtype 0 differs");
    failed += expect_error(&e, "linear: in_features -1", b->linear(x, w1, none, h, T, -1, F),
                           FASTGLU_ERROR_INVALID_VALUE, "in_features = -1");
    /* empty problems: legal, nothing touched, pointers not looked at */
    failed +=
        expect_error(&e, "tokens 0", b->linear_glu(&p, none, none, none, none, none, none, 0, H, F),
                     FASTGLU_SUCCESS, "");
    failed +=
        expect_error(&e, "F 0", b->linear_glu(&p, none, none, none, none, none, none, T, H, 0),
                     FASTGLU_SUCCESS, "");
    printf("%s: gemm errors: %d failed\n", b->name, failed);
    buf_free(b, &e.all);
    free(e.before);
    return failed;
}

/* ---- determinism ------------------------------------------------------------------------------- */

int run_gemm_determinism(const gemm_backend *b, const gemm_shape *shapes, int n_shapes,
                         void (*set_config)(int k), int n_configs) {
    int failed = 0;
    const variant *v = &VARIANTS[5]; /* interleaved, bias, weights, clamp, offset */
    const fastglu_dtype dt = FASTGLU_DTYPE_BF16;
    for (int s = 0; s < n_shapes; ++s) {
        const int64_t T = shapes[s].T, H = shapes[s].H, F = shapes[s].F;
        const size_t es = 2;
        buf x = buf_new(b, (size_t)(T * H) * es), w = buf_new(b, (size_t)(2 * F * H) * es);
        buf bias = buf_new(b, (size_t)(2 * F) * es), wt = buf_new(b, (size_t)T * 2);
        buf h = buf_new(b, (size_t)(T * 2 * F) * es), y = buf_new(b, (size_t)(T * F) * es);
        unsigned char *h0 = (unsigned char *)malloc(h.bytes),
                      *y0 = (unsigned char *)malloc(y.bytes);
        const double ws = 1.0 / sqrt((double)H);
        for (int64_t i = 0; i < T * H; ++i) put(dt, x.host, i, uniform(-1, 1));
        for (int64_t i = 0; i < 2 * F * H; ++i) put(dt, w.host, i, uniform(-1, 1) * ws);
        for (int64_t i = 0; i < 2 * F; ++i) put(dt, bias.host, i, uniform(-0.5, 0.5));
        for (int64_t i = 0; i < T; ++i) put(dt, wt.host, i, uniform(0.1, 1));
        buf_up(b, &x), buf_up(b, &w), buf_up(b, &bias), buf_up(b, &wt);
        const fastglu_glu_params p = params_of(v);
        for (int k = 0; k < (set_config ? n_configs : 1); ++k)
            for (int rep = 0; rep < 2; ++rep) {
                if (set_config) set_config(k);
                memset(h.host, 0xff, h.bytes), memset(y.host, 0xff, y.bytes);
                buf_up(b, &h), buf_up(b, &y);
                fastglu_status st = b->linear_glu(
                    &p, tensor(x.dev, dt, H), tensor(w.dev, dt, H), tensor(bias.dev, dt, 1),
                    tensor(wt.dev, dt, 1), tensor(h.dev, dt, 2 * F), tensor(y.dev, dt, F), T, H, F);
                b->sync();
                buf_down(b, &h), buf_down(b, &y);
                if (st != FASTGLU_SUCCESS) {
                    printf("  FAIL determinism: %s\n", fastglu_last_error_message());
                    failed++;
                } else if (rep == 0) { /* each configuration against its own first run */
                    memcpy(h0, h.host, h.bytes), memcpy(y0, y.host, y.bytes);
                } else if (memcmp(h0, h.host, h.bytes) || memcmp(y0, y.host, y.bytes)) {
                    printf("  FAIL determinism T=%lld H=%lld F=%lld: config %d run %d differs\n",
                           (long long)T, (long long)H, (long long)F, k, rep);
                    failed++;
                }
            }
        if (set_config) set_config(0);
        buf_free(b, &x), buf_free(b, &w), buf_free(b, &bias), buf_free(b, &wt), buf_free(b, &h),
            buf_free(b, &y);
        free(h0), free(y0);
    }
    printf("%s: gemm determinism: %d failed\n", b->name, failed);
    return failed;
}

/* ---- fc2 dgrad + dGLU ---------------------------------------------------------------------------- */

/* act'(z) in float64 (include/fastglu.h) */
static double act_grad(fastglu_activation a, double z) {
    switch (a) {
    case FASTGLU_ACT_SILU: {
        const double s = sigmoid(z);
        return s * (1.0 + z * (1.0 - s));
    }
    case FASTGLU_ACT_GELU_TANH: {
        const double th = tanh(0.79788456 * z * (1.0 + 0.044715 * z * z));
        return 0.5 * z * (1.0 - th * th) * (0.79788456 + 0.1070322243 * z * z) + 0.5 * (1.0 + th);
    }
    case FASTGLU_ACT_QUICK_GELU: {
        const double s = sigmoid(1.702 * z);
        return s * (1.0 + 1.702 * z * (1.0 - s));
    }
    }
    return NAN;
}

/* The sum of the magnitudes of act_grad's terms: an fp32 evaluation of the derivative errs by a few
 * 2^-24 of it, not of the derivative, which cancels to 0 where z (1 - s) = -1 (SiLU at z = -1.28) */
static double act_grad_terms(fastglu_activation a, double z) {
    switch (a) {
    case FASTGLU_ACT_SILU: {
        const double s = sigmoid(z);
        return s * (1.0 + fabs(z) * (1.0 - s));
    }
    case FASTGLU_ACT_GELU_TANH: {
        const double th = tanh(0.79788456 * z * (1.0 + 0.044715 * z * z));
        return 0.5 * fabs(z) * (1.0 - th * th) * (0.79788456 + 0.1070322243 * z * z) +
               0.5 * (1.0 + th);
    }
    case FASTGLU_ACT_QUICK_GELU: {
        const double s = sigmoid(1.702 * z);
        return s * (1.0 + 1.702 * fabs(z) * (1.0 - s));
    }
    }
    return NAN;
}

typedef struct dglu_ref {
    double dg, du, y, dw;
    double dg_eval; /* the error bound of dg from the fp32 evaluation of act_grad: 8 2^-24 of its
                       terms' magnitudes, times dg's other factors */
} dglu_ref;

/* the family's backward of dy at raw operands g, u (no bias), weight w; c: the bound in dtype */
static dglu_ref dglu_ref_of(const variant *v, double c, double g, double u, double w, double dy) {
    dglu_ref r;
    double a = g, vv = u;
    if (c > 0) {
        a = a > c ? c : a;
        vv = vv > c ? c : (vv < -c ? -c : vv);
    }
    vv += (double)v->offset;
    const double z = (double)v->gm * a, A = act(v->act, z), dA = act_grad(v->act, z);
    const double e = (double)v->dm * w * dy;
    r.dg = (c <= 0 || g <= c) ? e * vv * dA * (double)v->gm : 0.0;
    r.dg_eval = (c <= 0 || g <= c)
                    ? fabs(e * vv * (double)v->gm) * 8.0 * 0x1p-24 * act_grad_terms(v->act, z)
                    : 0.0;
    r.du = (c <= 0 || (u >= -c && u <= c)) ? e * A : 0.0;
    r.y = (double)v->dm * w * A * vv;
    r.dw = (double)v->dm * A * vv * dy;
    return r;
}

/* after a dgrad call: waits for it, then 1 if it succeeded, else 0 with a FAIL line for the case
 * (label) and the call (what: "" or " (...)") */
static int dglu_call_ok(const gemm_backend *b, fastglu_status st, const char *label,
                        const char *what) {
    b->sync();
    if (st == FASTGLU_SUCCESS) return 1;
    printf("  FAIL %s%s: status %d: %s\n", label, what, (int)st, fastglu_last_error_message());
    return 0;
}

static int run_dglu_case(const gemm_backend *b, const variant *v, gemm_shape s, fastglu_dtype dt,
                         int odd) {
    const int64_t T = s.T, H = s.H, F = s.F;
    const size_t es = esize(dt);
    const int64_t off = odd ? 1 : 0;
    const int64_t do_rs = H + (odd ? 3 : 8), w_rs = F + (odd ? 5 : 8);
    const int64_t h_rs = 2 * F + (odd ? 7 : 8), dh_rs = 2 * F + (odd ? 3 : 8),
                  y_rs = F + (odd ? 2 : 8);
    const fastglu_dtype wdt = v->weights ? (fastglu_dtype)(v->weights - 1) : FASTGLU_DTYPE_FP32;
    const int64_t wst = v->weights ? v->wstride : 0, dws = odd ? 2 : 1;
    const int il = v->layout == FASTGLU_LAYOUT_INTERLEAVED;
    int failed = 0;
    char label[256];
    snprintf(label, sizeof label, "%s dglu %s %s T=%lld H=%lld F=%lld%s", b->name, v->name,
             dtype_name(dt), (long long)T, (long long)H, (long long)F, odd ? " (odd strides)" : "");

    buf d_o = buf_new(b, (size_t)(off + T * do_rs + 1) * es);
    buf w2 = buf_new(b, (size_t)(off + H * w_rs + 1) * es);
    buf h = buf_new(b, (size_t)(off + T * h_rs + 1) * es);
    buf wt = buf_new(b, (size_t)(off + T * (wst ? wst : 1) + 1) * esize(wdt));
    buf dh = buf_new(b, (size_t)(off + T * dh_rs + 1) * es);
    buf dh2 = buf_new(b, (size_t)(off + T * dh_rs + 1) * es);
    buf y = buf_new(b, (size_t)(off + T * y_rs + 1) * es);
    buf y2 = buf_new(b, (size_t)(off + T * y_rs + 1) * es);
    buf dw = buf_new(b, (size_t)(off + T * dws + 1) * esize(wdt));
    /* the in-place call's h (a copy of h, its gradient written over it), y and dweights */
    buf hh = buf_new(b, (size_t)(off + T * h_rs + 1) * es);
    buf y3 = buf_new(b, (size_t)(off + T * y_rs + 1) * es);
    buf dw3 = buf_new(b, (size_t)(off + T * dws + 1) * esize(wdt));
    double *dof = (double *)malloc((size_t)(T * H + 1) * sizeof(double));
    double *wf = (double *)malloc((size_t)(H * F + 1) * sizeof(double));
    double *wtf = (double *)malloc((size_t)(T + 1) * sizeof(double));
    for (int64_t t = 0; t < T; ++t)
        for (int64_t k = 0; k < H; ++k)
            dof[t * H + k] = put(dt, d_o.host, off + t * do_rs + k, uniform(-1, 1));
    const double wscale = H > 0 ? 1.0 / sqrt((double)H) : 1.0;
    for (int64_t k = 0; k < H; ++k)
        for (int64_t j = 0; j < F; ++j)
            wf[k * F + j] = put(dt, w2.host, off + k * w_rs + j, uniform(-1, 1) * wscale);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < 2 * F; ++c) put(dt, h.host, off + t * h_rs + c, uniform(-1.5, 1.5));
    for (int64_t t = 0; t < T; ++t)
        wtf[t] = v->weights ? put(wdt, wt.host, off + t * wst, uniform(0.1, 1.0)) : 1.0;
    memcpy(hh.host, h.host, h.bytes);
    buf_up(b, &d_o), buf_up(b, &w2), buf_up(b, &h), buf_up(b, &wt), buf_up(b, &dh), buf_up(b, &dh2),
        buf_up(b, &y), buf_up(b, &y2), buf_up(b, &dw), buf_up(b, &hh), buf_up(b, &y3),
        buf_up(b, &dw3);

    const fastglu_tensor tdo = tensor(at(&d_o, off * es), dt, do_rs),
                         tw = tensor(at(&w2, off * es), dt, w_rs);
    const fastglu_tensor th = tensor(at(&h, off * es), dt, h_rs);
    const fastglu_tensor twt = tensor(v->weights ? at(&wt, off * esize(wdt)) : NULL, wdt, wst);
    const fastglu_tensor tdh = tensor(at(&dh, off * es), dt, dh_rs),
                         tdh2 = tensor(at(&dh2, off * es), dt, dh_rs);
    const fastglu_tensor ty = tensor(at(&y, off * es), dt, y_rs);
    /* dweights wherever there are weights (on CUDA the aligned cases take the sm_90a kernel's
     * row-owner path, whose dh must be the bits of the call without dweights below) */
    const int want_dw = v->weights != 0;
    const fastglu_tensor tdw = tensor(want_dw ? at(&dw, off * esize(wdt)) : NULL, wdt, dws);
    const fastglu_tensor none = tensor(NULL, dt, 0), none_w = tensor(NULL, wdt, 0);
    const fastglu_glu_params p = params_of(v);
    float cbuf[1];
    const double c = v->clamp > 0 ? put(dt, cbuf, 0, v->clamp) : 0.0; /* the bound in dtype */
    fastglu_status st = b->linear_dglu(&p, tdo, tw, th, twt, tdh, ty, tdw, T, H, F);
    if (!dglu_call_ok(b, st, label, "")) {
        failed++;
        goto done;
    }
    st = b->linear_dglu(&p, tdo, tw, th, twt, tdh2, none, none_w, T, H, F);
    if (!dglu_call_ok(b, st, label, " (no y, no dweights)")) {
        failed++;
        goto done;
    }
    /* dh written over h (the same pointer and row stride): the bits of the call above */
    {
        const fastglu_tensor thh = tensor(at(&hh, off * es), dt, h_rs),
                             ty3 = tensor(at(&y3, off * es), dt, y_rs),
                             tdw3 = tensor(want_dw ? at(&dw3, off * esize(wdt)) : NULL, wdt, dws);
        st = b->linear_dglu(&p, tdo, tw, thh, twt, thh, ty3, tdw3, T, H, F);
        if (!dglu_call_ok(b, st, label, " (dh over h)")) {
            failed++;
            goto done;
        }
    }
    buf_down(b, &dh), buf_down(b, &dh2), buf_down(b, &y), buf_down(b, &dw), buf_down(b, &hh),
        buf_down(b, &y3), buf_down(b, &dw3);
    {
        int64_t bad = 0;
        for (int64_t t = 0; t < T; ++t)
            bad += memcmp(hh.host + (size_t)(off + t * h_rs) * es,
                          dh.host + (size_t)(off + t * dh_rs) * es, (size_t)(2 * F) * es) != 0;
        if (bad || memcmp(y3.host, y.host, y.bytes) != 0 ||
            (want_dw && memcmp(dw3.host, dw.host, dw.bytes) != 0)) {
            printf("  FAIL %s: dh written over h (%lld rows), or its y / dweights, differ from "
                   "the call with dh apart\n",
                   label, (long long)bad);
            failed++;
        }
        failed += check_padding(&hh, off, T, 2 * F, h_rs, es, "h (dh over it)");
    }
    failed += check_padding(&dh, off, T, 2 * F, dh_rs, es, "dh");
    failed += check_padding(&y, off, T, F, y_rs, es, "y");
    if (want_dw) failed += check_padding(&dw, off, T, 1, dws, esize(wdt), "dweights");
    if (memcmp(dh.host, dh2.host, dh.bytes) != 0) {
        printf("  FAIL %s: dh without y and dweights differs from dh with them\n", label);
        failed++;
    }
    if (b->glu_fwd != NULL && F > 0) { /* y: the forward's value for this h, bit for bit */
        memset(y2.host, 0xff, y2.bytes);
        buf_up(b, &y2);
        st = b->glu_fwd(&p, th.data, h_rs, il ? NULL : (char *)th.data + F * es, h_rs, NULL,
                        twt.data, wdt, wst, at(&y2, off * es), y_rs, NULL, 0, T, F, dt);
        b->sync();
        buf_down(b, &y2);
        if (st != FASTGLU_SUCCESS || memcmp(y.host, y2.host, y.bytes) != 0) {
            printf("  FAIL %s: y differs from fastglu_glu_fwd on h (status %d)\n", label, (int)st);
            failed++;
        }
    }
    {
        double e_dh = 0, n_dh = 0, e_y = 0, n_y = 0, e_dw = 0, n_dw = 0, a_dh = 0, a_dw = 0;
        const int sample = (double)T * (double)F * (double)H > 268435456.0;
        const int64_t n_rows = sample ? 48 : T;
        for (int64_t r = 0; r < n_rows; ++r) {
            const int64_t t = !sample  ? r
                              : r == 0 ? 0
                              : r == 1 ? T - 1
                                       : (int64_t)(next_u64() % (uint64_t)T);
            double dwr = 0, dw_acc = 0;
            for (int64_t j = 0; j < F; ++j) {
                double dy = 0, dy_abs = 0;
                for (int64_t k = 0; k < H; ++k)
                    dy += dof[t * H + k] * wf[k * F + j],
                        dy_abs += fabs(dof[t * H + k] * wf[k * F + j]);
                const int64_t gi = il ? 2 * j : j, ui = il ? 2 * j + 1 : F + j;
                const double g = get(dt, h.host, off + t * h_rs + gi),
                             u = get(dt, h.host, off + t * h_rs + ui);
                /* dY as the contract defines it (rounded to dtype) and its error (within_acc) */
                const double acc = (double)H * 0x1p-24 * dy_abs;
                const double dy_r = rounded(dt, dy),
                             dy_err = rounded(dt, dy + acc) - rounded(dt, dy - acc);
                const dglu_ref ref = dglu_ref_of(v, c, g, u, wtf[t], dy_r);
                /* the outputs per unit dY (each is linear in dY) */
                const dglu_ref unit = dglu_ref_of(v, c, g, u, wtf[t], 1.0);
                a_dh += (unit.dg * unit.dg + unit.du * unit.du) * dy_err * dy_err +
                        ref.dg_eval * ref.dg_eval;
                dw_acc += fabs(unit.dw) * dy_err;
                const double gg = get(dt, dh.host, off + t * dh_rs + gi),
                             gu = get(dt, dh.host, off + t * dh_rs + ui);
                const double gy = get(dt, y.host, off + t * y_rs + j);
                e_dh += (gg - ref.dg) * (gg - ref.dg) + (gu - ref.du) * (gu - ref.du);
                n_dh += ref.dg * ref.dg + ref.du * ref.du;
                e_y += (gy - ref.y) * (gy - ref.y), n_y += ref.y * ref.y;
                dwr += ref.dw;
            }
            if (want_dw) {
                const double got = get(wdt, dw.host, off + t * dws);
                e_dw += (got - dwr) * (got - dwr), n_dw += dwr * dwr, a_dw += dw_acc * dw_acc;
            }
        }
        const double tol = tolerance(dt), tolw = tolerance(wdt) > tol ? tolerance(wdt) : tol;
        const double rdh = n_dh > 0 ? sqrt(e_dh / n_dh) : sqrt(e_dh),
                     ry = n_y > 0 ? sqrt(e_y / n_y) : sqrt(e_y);
        const double rdw = n_dw > 0 ? sqrt(e_dw / n_dw) : sqrt(e_dw);
        const fastglu_dtype dwt = tolerance(wdt) > tol ? wdt : dt;
        if (!within_acc(e_dh, n_dh, a_dh, 2.0 * (double)n_rows * (double)F, dt) ||
            !within(e_y, n_y, (double)n_rows * (double)F, dt) ||
            !within_acc(e_dw, n_dw, a_dw, (double)n_rows, dwt)) {
            printf(
                "  FAIL %s: relative error dh %.3g, y %.3g, dweights %.3g (tolerance %.0e, %.0e)\n",
                label, rdh, ry, rdw, tol, tolw);
            failed++;
        }
    }
done:
    if (failed == 0 && getenv("GEMM_VERBOSE")) printf("  ok %s\n", label);
    buf_free(b, &d_o), buf_free(b, &w2), buf_free(b, &h), buf_free(b, &wt), buf_free(b, &dh),
        buf_free(b, &dh2), buf_free(b, &y), buf_free(b, &y2), buf_free(b, &dw), buf_free(b, &hh),
        buf_free(b, &y3), buf_free(b, &dw3);
    free(dof), free(wf), free(wtf);
    return failed;
}

int run_dglu_suite(const gemm_backend *b, const gemm_shape *shapes, int n_shapes, int dtype_mask,
                   unsigned variants_mask) {
    static const fastglu_dtype dts[3] = {FASTGLU_DTYPE_FP32, FASTGLU_DTYPE_FP16,
                                         FASTGLU_DTYPE_BF16};
    int failed = 0, cases = 0;
    for (int s = 0; s < n_shapes; ++s)
        for (int d = 0; d < 3; ++d) {
            if (!(dtype_mask & (1 << d))) continue;
            for (int v = 0; v < N_VARIANTS; ++v) {
                if (!VARIANTS[v].glu || !(variants_mask & (1u << v))) continue;
                failed += run_dglu_case(b, &VARIANTS[v], shapes[s], dts[d], (cases++) & 1);
            }
        }
    printf("%s: dglu suite: %d cases, %d failed\n", b->name, cases, failed);
    return failed;
}

int run_dglu_errors(const gemm_backend *b) {
    const int64_t T = 4, H = 8, F = 6;
    const fastglu_dtype dt = FASTGLU_DTYPE_BF16;
    const size_t es = 2;
    const int64_t odo = 0, ow = odo + T * H, oh = ow + H * F, owt = oh + T * 2 * F, odh = owt + T,
                  oy = odh + T * 2 * F, odw = oy + T * F, total = odw + T;
    err_env e;
    e.b = b;
    e.all = buf_new(b, (size_t)total * es);
    for (int64_t i = 0; i < total; ++i) put(dt, e.all.host, i, uniform(-1, 1));
    e.before = (unsigned char *)malloc(e.all.bytes);
    memcpy(e.before, e.all.host, e.all.bytes);
    buf_up(b, &e.all);
    char *base = (char *)e.all.dev;
    const fastglu_tensor d_o = tensor(base + odo * es, dt, H), w2 = tensor(base + ow * es, dt, F),
                         h = tensor(base + oh * es, dt, 2 * F),
                         wts = tensor(base + owt * es, FASTGLU_DTYPE_BF16, 1),
                         dh = tensor(base + odh * es, dt, 2 * F), y = tensor(base + oy * es, dt, F),
                         dw = tensor(base + odw * es, FASTGLU_DTYPE_BF16, 1),
                         none = tensor(NULL, dt, 0);
    const fastglu_glu_params p = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    fastglu_tensor t;
    int failed = 0;
#define DGLU(P, A, B, C, D, E, G, I, TT, HH, FF) b->linear_dglu(P, A, B, C, D, E, G, I, TT, HH, FF)
    if (DGLU(&p, d_o, w2, h, wts, dh, y, dw, T, H, F) != FASTGLU_SUCCESS) {
        printf("  FAIL valid dglu call: %s\n", fastglu_last_error_message());
        failed++;
    }
    b->sync();
    buf_up(b, &e.all);
    t = w2, t.dtype = FASTGLU_DTYPE_FP16;
    failed += expect_error(
        &e, "dglu: w2 fp16 with d_out bf16", DGLU(&p, d_o, t, h, wts, dh, y, dw, T, H, F),
        FASTGLU_ERROR_UNSUPPORTED_DTYPE, "w2.dtype 1 differs from d_out.dtype 2");
    t = h, t.dtype = FASTGLU_DTYPE_FP32;
    failed += expect_error(&e, "dglu: h fp32", DGLU(&p, d_o, w2, t, wts, dh, y, dw, T, H, F),
                           FASTGLU_ERROR_UNSUPPORTED_DTYPE, "h.dtype 0 differs");
    t = d_o, t.dtype = FASTGLU_DTYPE_FP8_E4M3;
    failed += expect_error(&e, "dglu: d_out fp8", DGLU(&p, t, w2, h, wts, dh, y, dw, T, H, F),
                           FASTGLU_ERROR_UNSUPPORTED_DTYPE, "d_out.dtype 3");
    t = dw, t.dtype = FASTGLU_DTYPE_FP32;
    failed += expect_error(
        &e, "dglu: dweights fp32 with weights bf16", DGLU(&p, d_o, w2, h, wts, dh, y, t, T, H, F),
        FASTGLU_ERROR_UNSUPPORTED_DTYPE, "dweights.dtype 0 differs from weights.dtype 2");
    failed += expect_error(&e, "dglu: dweights without weights",
                           DGLU(&p, d_o, w2, h, none, dh, y, dw, T, H, F),
                           FASTGLU_ERROR_INVALID_VALUE, "dweights is given without weights");
    t = dh, t.data = (char *)dh.data + 1;
    failed += expect_error(&e, "dglu: misaligned dh", DGLU(&p, d_o, w2, h, wts, t, y, dw, T, H, F),
                           FASTGLU_ERROR_INVALID_VALUE, "dh = ");
    t = w2, t.data = (char *)w2.data + 1;
    failed += expect_error(&e, "dglu: misaligned w2", DGLU(&p, d_o, t, h, wts, dh, y, dw, T, H, F),
                           FASTGLU_ERROR_INVALID_VALUE, "w2 = ");
    t = h, t.data = NULL;
    failed += expect_error(&e, "dglu: h NULL", DGLU(&p, d_o, w2, t, wts, dh, y, dw, T, H, F),
                           FASTGLU_ERROR_INVALID_VALUE, "h is NULL");
    t = dh, t.data = NULL;
    failed += expect_error(&e, "dglu: dh NULL", DGLU(&p, d_o, w2, h, wts, t, y, dw, T, H, F),
                           FASTGLU_ERROR_INVALID_VALUE, "dh is NULL");
    t = dh, t.data = h.data, t.row_stride = 2 * F + 2; /* over h, but not h's rows */
    failed += expect_error(&e, "dglu: dh aliasing h with another row stride",
                           DGLU(&p, d_o, w2, h, wts, t, y, dw, T - 1, H, F),
                           FASTGLU_ERROR_INVALID_VALUE, "dh overlaps h");
    t = dh, t.data = (char *)h.data + 2 * es; /* h's row stride, two elements on */
    failed += expect_error(&e, "dglu: dh shifted over h",
                           DGLU(&p, d_o, w2, h, wts, t, y, dw, T - 1, H, F),
                           FASTGLU_ERROR_INVALID_VALUE, "dh overlaps h");
    t = y, t.data = (char *)dh.data + 4 * es;
    failed +=
        expect_error(&e, "dglu: y overlapping dh", DGLU(&p, d_o, w2, h, wts, dh, t, dw, T, H, F),
                     FASTGLU_ERROR_INVALID_VALUE, "y overlaps dh");
    t = dh, t.data = (char *)w2.data + 2 * es;
    failed +=
        expect_error(&e, "dglu: dh overlapping w2", DGLU(&p, d_o, w2, h, wts, t, y, dw, T, H, F),
                     FASTGLU_ERROR_INVALID_VALUE, "dh overlaps w2");
    t = dw, t.data = wts.data;
    failed += expect_error(&e, "dglu: dweights aliasing weights",
                           DGLU(&p, d_o, w2, h, wts, dh, y, t, T, H, F),
                           FASTGLU_ERROR_INVALID_VALUE, "dweights overlaps weights");
    t = dw, t.row_stride = 0;
    failed +=
        expect_error(&e, "dglu: dweights stride 0", DGLU(&p, d_o, w2, h, wts, dh, y, t, T, H, F),
                     FASTGLU_ERROR_INVALID_VALUE, "dweights row stride 0");
    t = dh, t.row_stride = 2 * F - 1;
    failed +=
        expect_error(&e, "dglu: dh rows overlapping", DGLU(&p, d_o, w2, h, wts, t, y, dw, T, H, F),
                     FASTGLU_ERROR_INVALID_VALUE, "dh row stride");
    t = w2, t.row_stride = -1;
    failed +=
        expect_error(&e, "dglu: w2 negative stride", DGLU(&p, d_o, t, h, wts, dh, y, dw, T, H, F),
                     FASTGLU_ERROR_INVALID_VALUE, "w2 has a negative stride");
    failed += expect_error(&e, "dglu: tokens -1", DGLU(&p, d_o, w2, h, wts, dh, y, dw, -1, H, F),
                           FASTGLU_ERROR_INVALID_VALUE, "tokens = -1");
    failed += expect_error(&e, "dglu: hidden -2", DGLU(&p, d_o, w2, h, wts, dh, y, dw, T, -2, F),
                           FASTGLU_ERROR_INVALID_VALUE, "hidden = -2");
    failed += expect_error(&e, "dglu: F -3", DGLU(&p, d_o, w2, h, wts, dh, y, dw, T, H, -3),
                           FASTGLU_ERROR_INVALID_VALUE, "ffn_hidden_size = -3");
    failed += expect_error(&e, "dglu: params NULL", DGLU(NULL, d_o, w2, h, wts, dh, y, dw, T, H, F),
                           FASTGLU_ERROR_INVALID_VALUE, "params is NULL");
    fastglu_glu_params q = p;
    q.layout = (fastglu_layout)5;
    failed += expect_error(&e, "dglu: layout 5", DGLU(&q, d_o, w2, h, wts, dh, y, dw, T, H, F),
                           FASTGLU_ERROR_INVALID_VALUE, "layout");
    failed += expect_error(&e, "dglu: tokens 0",
                           DGLU(&p, none, none, none, none, none, none, none, 0, H, F),
                           FASTGLU_SUCCESS, "");
    failed += expect_error(&e, "dglu: F 0 without dweights",
                           DGLU(&p, none, none, none, none, none, none, none, T, H, 0),
                           FASTGLU_SUCCESS, "");
#undef DGLU
    printf("%s: dglu errors: %d failed\n", b->name, failed);
    buf_free(b, &e.all);
    free(e.before);
    return failed;
}

int run_dglu_determinism(const gemm_backend *b, const gemm_shape *shapes, int n_shapes,
                         void (*set_config)(int k), int n_configs) {
    int failed = 0;
    const variant *v = &VARIANTS[7]; /* SPLIT, weights, clamp, offset */
    const fastglu_dtype dt = FASTGLU_DTYPE_BF16;
    const size_t es = 2;
    for (int s = 0; s < n_shapes; ++s) {
        const int64_t T = shapes[s].T, H = shapes[s].H, F = shapes[s].F;
        buf d_o = buf_new(b, (size_t)(T * H) * es), w2 = buf_new(b, (size_t)(H * F) * es);
        buf h = buf_new(b, (size_t)(T * 2 * F) * es), wt = buf_new(b, (size_t)T * 2);
        buf dh = buf_new(b, (size_t)(T * 2 * F) * es), y = buf_new(b, (size_t)(T * F) * es);
        buf dw = buf_new(b, (size_t)T * 2);
        unsigned char *dh0 = (unsigned char *)malloc(dh.bytes),
                      *y0 = (unsigned char *)malloc(y.bytes),
                      *dw0 = (unsigned char *)malloc(dw.bytes);
        const double ws = H > 0 ? 1.0 / sqrt((double)H) : 1.0;
        for (int64_t i = 0; i < T * H; ++i) put(dt, d_o.host, i, uniform(-1, 1));
        for (int64_t i = 0; i < H * F; ++i) put(dt, w2.host, i, uniform(-1, 1) * ws);
        for (int64_t i = 0; i < T * 2 * F; ++i) put(dt, h.host, i, uniform(-1.5, 1.5));
        for (int64_t i = 0; i < T; ++i) put(dt, wt.host, i, uniform(0.1, 1));
        buf_up(b, &d_o), buf_up(b, &w2), buf_up(b, &h), buf_up(b, &wt);
        const fastglu_glu_params p = params_of(v);
        /* configuration k (the kernel of the configuration), without and with dweights */
        for (int k = 0; k < 2 * (set_config ? n_configs : 1); ++k)
            for (int rep = 0; rep < 2; ++rep) {
                if (set_config) set_config(k / 2);
                memset(dh.host, 0xff, dh.bytes), memset(y.host, 0xff, y.bytes),
                    memset(dw.host, 0xff, dw.bytes);
                buf_up(b, &dh), buf_up(b, &y), buf_up(b, &dw);
                fastglu_status st = b->linear_dglu(
                    &p, tensor(d_o.dev, dt, H), tensor(w2.dev, dt, F), tensor(h.dev, dt, 2 * F),
                    tensor(wt.dev, dt, 1), tensor(dh.dev, dt, 2 * F), tensor(y.dev, dt, F),
                    tensor(k % 2 ? dw.dev : NULL, dt, 1), T, H, F);
                b->sync();
                buf_down(b, &dh), buf_down(b, &y), buf_down(b, &dw);
                if (st != FASTGLU_SUCCESS) {
                    printf("  FAIL dglu determinism: %s\n", fastglu_last_error_message());
                    failed++;
                } else if (rep == 0) {
                    memcpy(dh0, dh.host, dh.bytes), memcpy(y0, y.host, y.bytes),
                        memcpy(dw0, dw.host, dw.bytes);
                } else if (memcmp(dh0, dh.host, dh.bytes) || memcmp(y0, y.host, y.bytes) ||
                           memcmp(dw0, dw.host, dw.bytes)) {
                    printf(
                        "  FAIL dglu determinism T=%lld H=%lld F=%lld: config %d run %d differs\n",
                        (long long)T, (long long)H, (long long)F, k, rep);
                    failed++;
                }
            }
        if (set_config) set_config(0);
        buf_free(b, &d_o), buf_free(b, &w2), buf_free(b, &h), buf_free(b, &wt), buf_free(b, &dh),
            buf_free(b, &y), buf_free(b, &dw);
        free(dh0), free(y0), free(dw0);
    }
    printf("%s: dglu determinism: %d failed\n", b->name, failed);
    return failed;
}
