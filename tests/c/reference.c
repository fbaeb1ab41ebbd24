/*
 * reference.c — see reference.h.
 *
 * Each case draws fresh random inputs (the seed comes from the clock and is printed, or from
 * FASTGLU_TEST_SEED), fills every output buffer — including the gaps between rows of a strided
 * output and the elements either side of it — with a sentinel, runs the backend, and checks
 * (a) the relative norm error against a float64 reference computed from the stored inputs and
 * (b) that every byte outside the output rows still holds the sentinel.
 */
#include "reference.h"

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

static double rng_normal(void) {
    double u1 = ((rng_next() >> 11) + 1.0) / 9007199254740994.0;
    double u2 = (rng_next() >> 11) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* ---- typed element access on host buffers ------------------------------------------------- */

static double load(fastglu_dtype dt, const void *p, int64_t i) {
    switch (dt) {
    case FASTGLU_DTYPE_FP32: return ((const float *)p)[i];
    case FASTGLU_DTYPE_FP16: return fp16_to_f32(((const uint16_t *)p)[i]);
    case FASTGLU_DTYPE_BF16: return bf16_to_f32(((const uint16_t *)p)[i]);
    }
    return NAN;
}

static void store(fastglu_dtype dt, void *p, int64_t i, double v) {
    switch (dt) {
    case FASTGLU_DTYPE_FP32: ((float *)p)[i] = (float)v; break;
    case FASTGLU_DTYPE_FP16: ((uint16_t *)p)[i] = f32_to_fp16((float)v); break;
    case FASTGLU_DTYPE_BF16: ((uint16_t *)p)[i] = f32_to_bf16((float)v); break;
    }
}

static const char *dtype_name(fastglu_dtype dt) {
    return dt == FASTGLU_DTYPE_FP32 ? "fp32" : dt == FASTGLU_DTYPE_FP16 ? "fp16" : "bf16";
}

/* Relative-norm tolerance by dtype (the project's standard). */
static double tolerance(fastglu_dtype dt) {
    return dt == FASTGLU_DTYPE_FP32 ? 1e-5 : dt == FASTGLU_DTYPE_FP16 ? 1e-3 : 1e-2;
}

#define SENTINEL_BYTE 0x7f /* 0x7f7f... is a huge finite value in every dtype */

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

/* ---- one case ------------------------------------------------------------------------------ */

typedef struct layout {
    const char *name;
    int64_t in_pad;    /* extra elements per input row (a column slice of a wider tensor) */
    int64_t in_offset; /* element offset of the input's first element (misaligns vectors) */
    int64_t out_pad;   /* extra elements per output row; the gaps must stay untouched */
    int dy_kind;       /* 0 contiguous, 1 scalar (strides 0, 0), 2 row-broadcast (0, 1),
                            3 column stride 2, 4 transposed (row stride 1, column stride tokens) */
} layout;

static int failures;
static int checks;

static void report(const test_backend *b, const char *what, const layout *l, fastglu_dtype dt,
                   int64_t T, int64_t F, const char *msg, double value) {
    printf("FAIL %s %s: %s %s T=%lld F=%lld: %s (%g)\n", b->name, what, l->name, dtype_name(dt),
           (long long)T, (long long)F, msg, value);
    failures++;
}

static double rel_err(const double *out, const double *ref, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; ++i) {
        double d = out[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    if (!(num == num)) return INFINITY; /* NaN: never passes */
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Bytes of `buf` (n bytes) outside the rows [rows, width] at row stride `rs` from element offset
 * `off` that differ from the sentinel. */
static int64_t sentinel_damage(const unsigned char *buf, size_t n, size_t esize, int64_t off,
                               int64_t rows, int64_t width, int64_t rs) {
    int64_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
        int64_t e = (int64_t)(i / esize) - off;
        int inside = e >= 0 && e / rs < rows && e % rs < width;
        if (!inside && buf[i] != SENTINEL_BYTE) bad++;
    }
    return bad;
}

static void run_case(const test_backend *b, fastglu_dtype dt, int64_t T, int64_t F,
                     const layout *l) {
    const size_t es = fastglu_dtype_size(dt);
    const int64_t W = 2 * F;
    const int64_t in_rs = W + l->in_pad, out_rs = F + l->out_pad, din_rs = W + l->out_pad;
    const int64_t in_n = l->in_offset + (T - 1) * in_rs + W;
    const int64_t out_n = (T - 1) * out_rs + F + 3, din_n = (T - 1) * din_rs + W + 3;
    int64_t dy_rs, dy_cs, dy_n;
    switch (l->dy_kind) {
    case 1: dy_rs = 0, dy_cs = 0, dy_n = 1; break;
    case 2: dy_rs = 0, dy_cs = 1, dy_n = F; break;
    case 3: dy_rs = 2 * F, dy_cs = 2, dy_n = T * 2 * F; break;
    case 4: dy_rs = 1, dy_cs = T, dy_n = T * F; break;
    default: dy_rs = F, dy_cs = 1, dy_n = T * F; break;
    }

    unsigned char *h_in = malloc(in_n * es), *h_dy = malloc(dy_n * es);
    unsigned char *h_out = malloc(out_n * es), *h_din = malloc(din_n * es);
    double *got = malloc(sizeof(double) * T * W), *ref = malloc(sizeof(double) * T * W);
    for (int64_t i = 0; i < in_n; ++i) store(dt, h_in, i, 2.0 * rng_normal());
    for (int64_t i = 0; i < dy_n; ++i) store(dt, h_dy, i, rng_normal());
    memset(h_out, SENTINEL_BYTE, out_n * es);
    memset(h_din, SENTINEL_BYTE, din_n * es);

    void *d_in = b->alloc(in_n * es), *d_dy = b->alloc(dy_n * es);
    void *d_out = b->alloc(out_n * es), *d_din = b->alloc(din_n * es);
    b->upload(d_in, h_in, in_n * es);
    b->upload(d_dy, h_dy, dy_n * es);
    b->upload(d_out, h_out, out_n * es);
    b->upload(d_din, h_din, din_n * es);
    /* Outputs start 1 element in, so that a write one element early is caught too. */
    char *out0 = (char *)d_out + es, *din0 = (char *)d_din + es;
    const char *in0 = (const char *)d_in + l->in_offset * es;

    fastglu_status st = b->fwd(in0, in_rs, out0, out_rs, T, F, dt);
    fastglu_status st2 = b->bwd(d_dy, dy_rs, dy_cs, in0, in_rs, din0, din_rs, T, F, dt);
    b->sync();
    checks++;
    if (st != FASTGLU_SUCCESS || st2 != FASTGLU_SUCCESS) {
        report(b, "status", l, dt, T, F, fastglu_last_error_message(), (double)(st ? st : st2));
        goto done;
    }
    b->download(h_out, d_out, out_n * es);
    b->download(h_din, d_din, din_n * es);

    /* forward */
    for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < F; ++j) {
            const int64_t r = l->in_offset + t * in_rs;
            double g = load(dt, h_in, r + j), u = load(dt, h_in, r + F + j);
            ref[t * F + j] = g * sigmoid(g) * u;
            got[t * F + j] = load(dt, h_out, 1 + t * out_rs + j);
        }
    double e = rel_err(got, ref, T * F);
    checks++;
    if (!(e <= tolerance(dt))) report(b, "forward", l, dt, T, F, "relative error", e);
    int64_t bad = sentinel_damage(h_out, out_n * es, es, 1, T, F, out_rs);
    checks++;
    if (bad) report(b, "forward", l, dt, T, F, "bytes written outside the output", (double)bad);

    /* backward */
    for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < F; ++j) {
            const int64_t r = l->in_offset + t * in_rs;
            double g = load(dt, h_in, r + j), u = load(dt, h_in, r + F + j);
            double d = load(dt, h_dy, t * dy_rs + j * dy_cs), s = sigmoid(g);
            ref[t * W + j] = d * s * (1 + g * (1 - s)) * u;
            ref[t * W + F + j] = d * g * s;
            got[t * W + j] = load(dt, h_din, 1 + t * din_rs + j);
            got[t * W + F + j] = load(dt, h_din, 1 + t * din_rs + F + j);
        }
    e = rel_err(got, ref, T * W);
    checks++;
    if (!(e <= tolerance(dt))) report(b, "backward", l, dt, T, F, "relative error", e);
    bad = sentinel_damage(h_din, din_n * es, es, 1, T, W, din_rs);
    checks++;
    if (bad) report(b, "backward", l, dt, T, F, "bytes written outside dinput", (double)bad);

done:
    b->release(d_in), b->release(d_dy), b->release(d_out), b->release(d_din);
    free(h_in), free(h_dy), free(h_out), free(h_din), free(got), free(ref);
}

/* In-place backward: dinput is the input's own storage. */
static void run_inplace_case(const test_backend *b, fastglu_dtype dt, int64_t T, int64_t F) {
    const size_t es = fastglu_dtype_size(dt);
    const int64_t W = 2 * F;
    static const layout l = {"in-place", 0, 0, 0, 0};
    unsigned char *h_in = malloc(T * W * es), *h_dy = malloc(T * F * es),
                  *h_out = malloc(T * W * es);
    double *got = malloc(sizeof(double) * T * W), *ref = malloc(sizeof(double) * T * W);
    for (int64_t i = 0; i < T * W; ++i) store(dt, h_in, i, 2.0 * rng_normal());
    for (int64_t i = 0; i < T * F; ++i) store(dt, h_dy, i, rng_normal());
    void *d_in = b->alloc(T * W * es), *d_dy = b->alloc(T * F * es);
    b->upload(d_in, h_in, T * W * es);
    b->upload(d_dy, h_dy, T * F * es);
    fastglu_status st = b->bwd(d_dy, F, 1, d_in, W, d_in, W, T, F, dt);
    b->sync();
    checks++;
    if (st != FASTGLU_SUCCESS) {
        report(b, "status", &l, dt, T, F, fastglu_last_error_message(), (double)st);
    } else {
        b->download(h_out, d_in, T * W * es);
        for (int64_t t = 0; t < T; ++t)
            for (int64_t j = 0; j < F; ++j) {
                double g = load(dt, h_in, t * W + j), u = load(dt, h_in, t * W + F + j);
                double d = load(dt, h_dy, t * F + j), s = sigmoid(g);
                ref[t * W + j] = d * s * (1 + g * (1 - s)) * u;
                ref[t * W + F + j] = d * g * s;
                got[t * W + j] = load(dt, h_out, t * W + j);
                got[t * W + F + j] = load(dt, h_out, t * W + F + j);
            }
        double e = rel_err(got, ref, T * W);
        checks++;
        if (!(e <= tolerance(dt))) report(b, "backward", &l, dt, T, F, "relative error", e);
    }
    b->release(d_in), b->release(d_dy);
    free(h_in), free(h_dy), free(h_out), free(got), free(ref);
}

static void seed_rng(const char *name) {
    const char *env = getenv("FASTGLU_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ (uint64_t)clock();
    rng_state = seed;
    printf("%s: seed %llu (set FASTGLU_TEST_SEED to repeat)\n", name, (unsigned long long)seed);
}

int run_sentinel_sweep(const test_backend *b) {
    /* Widths that break vectorized kernels (odd, prime, just past a power of two, misaligned
     * halves) x row counts from one to past a 4096-row wave, every dtype: every output element
     * written, nothing outside the outputs (the gaps of padded rows included) touched. */
    static const int64_t widths[] = {1,   2,   3,   5,   7,    8,    127,  256,
                                     257, 320, 640, 768, 1408, 2816, 3420, 5632};
    static const int64_t rows[] = {1, 2, 257, 4097};
    static const fastglu_dtype dtypes[] = {FASTGLU_DTYPE_BF16, FASTGLU_DTYPE_FP16,
                                           FASTGLU_DTYPE_FP32};
    static const layout padded = {"sweep", 0, 0, 3, 0};
    seed_rng(b->name);
    failures = checks = 0;
    for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; ++d)
        for (size_t w = 0; w < sizeof widths / sizeof *widths; ++w)
            for (size_t r = 0; r < sizeof rows / sizeof *rows; ++r)
                run_case(b, dtypes[d], rows[r], widths[w], &padded);
    printf("%s sentinel sweep: %d checks, %d failed\n", b->name, checks, failures);
    return failures;
}

int run_swiglu_suite(const test_backend *b) {
    static const int64_t widths[] = {1, 3, 768, 1408, 3420, 5632, 8192};
    static const int64_t rows[] = {1, 257};
    static const fastglu_dtype dtypes[] = {FASTGLU_DTYPE_BF16, FASTGLU_DTYPE_FP16,
                                           FASTGLU_DTYPE_FP32};
    static const layout layouts[] = {
        {"contiguous", 0, 0, 0, 0},
        {"column-slice", 24, 8, 8, 0},    /* rows of a wider tensor, still 16-byte aligned */
        {"misaligned", 5, 3, 1, 3},       /* odd offsets and strides: narrow vectors */
        {"dy-scalar", 0, 0, 0, 1},        /* y.sum().backward() */
        {"dy-row-broadcast", 8, 0, 0, 2}, /* dy expanded over rows */
        {"dy-transposed", 0, 0, 0, 4},    /* dy read column-major */
    };
    seed_rng(b->name);
    failures = checks = 0;
    for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; ++d)
        for (size_t w = 0; w < sizeof widths / sizeof *widths; ++w)
            for (size_t r = 0; r < sizeof rows / sizeof *rows; ++r) {
                for (size_t l = 0; l < sizeof layouts / sizeof *layouts; ++l)
                    run_case(b, dtypes[d], rows[r], widths[w], &layouts[l]);
                run_inplace_case(b, dtypes[d], rows[r], widths[w]);
            }
    printf("%s: %d checks, %d failed\n", b->name, checks, failures);
    return failures;
}
