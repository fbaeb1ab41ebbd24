/* test_fp8_store.c — fastglu_glu_fp8_store_blockwise_* (the forward's operands saved as
 * float8_e4m3fn with one scale per 1 x 128 block: PyTorch's fp8_input_store="blockwise";
 * include/fastglu.h) against a float64 implementation of the recipe: every scale and every code bit
 * for bit (the recipe is exact: fp32 quotients correctly rounded, then the e4m3fn cast), with and
 * without a clamp, in both saturate modes, on blocks of zeros, NaN, +-inf, tiny amaxes, amaxes on
 * and below the scaled blocks' boundary (2^-126) and values on the clamp's bound, and every byte
 * around the outputs (row padding, scale padding, a margin after each) left as the sentinel. Fresh
 * random inputs each run (FASTGLU_TEST_SEED replays a printed seed), every dtype, SPLIT as two
 * tensors and as the two halves of one [tokens, 2F] copy, INTERLEAVED, tokens 1, 3, 257 (and 8193
 * twice, unless FASTGLU_TEST_QUICK is set), F = 1, 3, 128, 200, 1408, 2880, 3420, 5632, dense,
 * 16-byte padded and odd row strides (the CUDA kernel's vector and element paths). Two thirds of
 * the cases go through fastglu_glu_fwd_fp8_store_blockwise_* (the forward and the copy in one
 * pass), whose y is compared bit for bit with fastglu_glu_fwd_*'s (with and without a bias and
 * per-token weights) and with SwiGLU in float64. Bad input: an error status and no byte written;
 * empty problems succeed and write nothing.
 *
 * Built twice: test_fp8_store_cpu, and with FP8_TEST_CUDA test_fp8_store_cuda (device memory, a
 * non-default stream, the operands followed by poison; exits 77, CTest's skip, without a usable
 * GPU). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "convert.h"
#include "fastglu.h"

#include "fp8_test_util.h"

static int cases;
static long blocks_subnormal, blocks_at_boundary; /* amax in (0, 2^-126) / exactly 2^-126 */

#define SENT8 0xa5
#define SENT_SCALE -12345.0f
#define MARGIN 16 /* sentinel bytes (or scales) after each output */

/* ---- the recipe in float64 ------------------------------------------------------------------ */

/* PyTorch's cast of v to float8_e4m3fn: nearest, ties to even; above 464 (and +-inf) 448 when sat,
 * else NaN; NaN stays NaN. From the format's spacing: 2^-9 below 2^-6, 2^(e - 3) in [2^e, 2^e+1). */
static unsigned char ref_e4m3(double v, int sat) {
    const unsigned char sign = signbit(v) ? 0x80 : 0;
    if (isnan(v)) return sign | 0x7f;
    const double a = fabs(v);
    if (a > 464 || (sat && a >= 464)) return sign | (sat ? 0x7e : 0x7f);
    int e;
    frexp(a, &e); /* a in [2^(e-1), 2^e) */
    const double q = a < 0x1p-6 ? 0x1p-9 : ldexp(1.0, e - 4);
    const double r = nearbyint(a / q) * q; /* a / q exact; nearbyint: ties to even */
    if (r < 0x1p-6) return sign | (unsigned char)(r / 0x1p-9);
    frexp(r, &e);
    return sign | (unsigned char)(((e - 1 + 7) << 3) | (int)((r / ldexp(1.0, e - 1) - 1) * 8));
}

/* the block scale: amax / 448 rounded once to fp32 (448 = 7 * 2^6: the float64 quotient of an
 * fp32 by 7 never lies within 2^-53 of an fp32 midpoint, so it rounds correctly) where amax is a
 * normal fp32 number, else 1; with a clamp raised one ulp where fp32(448 s) < amax */
static float ref_scale(double amax, int clamp) {
    if (!(amax >= 0x1p-126 && amax <= 0x1.fffffep127)) return 1.0f; /* NaN included */
    float s = (float)(amax / 448.0);
    if (clamp && (float)(448.0 * s) < amax) s = nextafterf(s, INFINITY);
    return s;
}

/* the clamp's bounds in the codes' domain: lo the largest non-negative e4m3 value whose decoding
 * fp32(value * s) is <= c, hi the next (448 at the top) */
static void ref_bounds(float s, double c, double *lo, double *hi) {
    int k = 0;
    for (int m = 1; m <= 126; ++m)
        if ((float)(e4m3_value((unsigned char)m) * s) <= c) k = m;
    *lo = e4m3_value((unsigned char)k);
    *hi = e4m3_value((unsigned char)(k < 126 ? k + 1 : 126));
}

static double round_to(fastglu_dtype dt, float v) {
    float b[1];
    put(dt, b, 0, v);
    return get(dt, b, 0);
}

/* ---- one case --------------------------------------------------------------------------------- */

enum { DENSE = 0, PADDED = 1, ODD = 2 };
enum { TWO = 0, HALVES = 1, INTERLEAVED = 2 }; /* SPLIT as two tensors / one [T, 2F] copy */

static fastglu_status store(fastglu_glu_params *p, fastglu_tensor g, fastglu_tensor u,
                            fastglu_tensor g8, fastglu_tensor u8, fastglu_tensor s, int64_t T,
                            int64_t F) {
#ifdef FP8_TEST_CUDA
    const fastglu_status st =
        fastglu_glu_fp8_store_blockwise_cuda(p, g, u, g8, u8, s, T, F, stream);
    check_cuda(cudaStreamSynchronize(stream), "sync");
    return st;
#else
    return fastglu_glu_fp8_store_blockwise_cpu(p, g, u, g8, u8, s, T, F);
#endif
}

/* fastglu_glu_fwd_fp8_store_blockwise_* (the forward and the copy in one pass) and, for its y, the
 * forward alone (fastglu_glu_fwd_*) on the same backend */
static fastglu_status fused(fastglu_glu_params *p, const fastglu_glu_operands *o, fastglu_tensor y,
                            fastglu_tensor g8, fastglu_tensor u8, fastglu_tensor s, int64_t T,
                            int64_t F) {
#ifdef FP8_TEST_CUDA
    const fastglu_status st =
        fastglu_glu_fwd_fp8_store_blockwise_cuda(p, o, y, g8, u8, s, T, F, stream);
    check_cuda(cudaStreamSynchronize(stream), "sync");
    return st;
#else
    return fastglu_glu_fwd_fp8_store_blockwise_cpu(p, o, y, g8, u8, s, T, F);
#endif
}
static fastglu_status forward(fastglu_glu_params *p, const fastglu_glu_operands *o,
                              fastglu_tensor y, int64_t T, int64_t F) {
    const fastglu_tensor none = {NULL, FASTGLU_DTYPE_FP8_E4M3, 0};
#ifdef FP8_TEST_CUDA
    const fastglu_status st = fastglu_glu_fwd_cuda(p, o, y, none, T, F, stream);
    check_cuda(cudaStreamSynchronize(stream), "sync");
    return st;
#else
    return fastglu_glu_fwd_cpu(p, o, y, none, T, F);
#endif
}

static void *dev_alloc(size_t n) {
#ifdef FP8_TEST_CUDA
    void *p;
    check_cuda(cudaMalloc(&p, n), "cudaMalloc");
    return p;
#else
    return malloc(n);
#endif
}
static void dev_free(void *p) {
#ifdef FP8_TEST_CUDA
    check_cuda(cudaFree(p), "cudaFree");
#else
    free(p);
#endif
}
static void to_dev(void *d, const void *h, size_t n) {
#ifdef FP8_TEST_CUDA
    check_cuda(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice), "to device");
    /* the copy's DMA may still run when cudaMemcpy returns, on the legacy default stream, which
     * the test's non-blocking stream does not wait for */
    check_cuda(cudaDeviceSynchronize(), "to device");
#else
    memcpy(d, h, n);
#endif
}
static void to_host(void *h, const void *d, size_t n) {
#ifdef FP8_TEST_CUDA
    check_cuda(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost), "to host");
#else
    memcpy(h, d, n);
#endif
}

/* with_y: through fastglu_glu_fwd_fp8_store_blockwise_* (1: no bias or weights, the float64
 * SwiGLU checked too; 2: a bias and per-token weights), y then compared bit for bit with the
 * forward's alone and every byte around it left as the sentinel; 0: the copy alone */
static void run_case(fastglu_dtype dt, int layout, int64_t T, int64_t F, float clamp_value,
                     int strides, int sat, int with_y) {
    const int il = layout == INTERLEAVED, parts = il ? 1 : 2;
    const int64_t W = il ? 2 * F : F, nbp = (W + 127) / 128, nb = parts * nbp;
    const size_t es = fastglu_dtype_size(dt);
    const int64_t pad = strides == DENSE ? 0 : strides == PADDED ? 16 : 1;
    const int64_t x_rs = W + (strides == PADDED ? 8 : pad);
    /* codes: HALVES writes gate and up into one row of 2F (+ pad) */
    const int64_t d_rs = (layout == HALVES ? 2 * F : W) + pad, s_rs = nb + pad;
    const size_t x_n = (size_t)(T * x_rs) * es + 16, d_n = (size_t)(T * d_rs) + MARGIN,
                 s_n = (size_t)(T * s_rs + MARGIN);
    void *hx[2] = {NULL, NULL};
    const int kind = (int)(urand() * 6);
    /* kind 5: blocks whose amax sits on the scaled / unscaled boundary (2^-126, the normal fp32
     * numbers) or below it, one element each at the amax, the rest under it */
    static const float edges[] = {0x1p-126f, 0x1.fffffcp-127f, 0x1p-127f,
                                  0x1p-149f, 0x1p-120f,        0x1.000002p-126f};
    const double c = round_to(dt, clamp_value);
    for (int k = 0; k < parts; ++k) {
        hx[k] = malloc(x_n);
        memset(hx[k], 0x7f, x_n); /* padding and the bytes after x: poison */
        for (int64_t i = 0; i < T; ++i)
            for (int64_t j = 0; j < W; ++j) {
                const double u = urand();
                float v = (float)((urand() - 0.5) * 16.0);
                if (kind == 1) v *= 1e-37f;                        /* tiny and subnormal amaxes */
                if (kind == 2 && (i + j / 128) % 3 == 0) v = 0.0f; /* blocks of zeros */
                if (kind == 3 && u < 0.003) v = u < 0.001 ? NAN : u < 0.002 ? INFINITY : -INFINITY;
                if (kind == 4)
                    v *= (float)ldexp(1.0, (int)(j / 128 % 7) * 9 - 27); /* block ranges */
                if (kind == 5) { /* the block's amax: the element at (37 i) mod its width */
                    const float e = edges[(i + j / 128) % 6];
                    const int64_t j0 = j / 128 * 128, nblk = W - j0 < 128 ? W - j0 : 128;
                    v = j - j0 == (i * 37) % nblk ? (u < 0.5 ? e : -e)
                                                  : (float)(e * (urand() - 0.5));
                }
                if (u > 0.998) v = dt == FASTGLU_DTYPE_FP16 ? 65504.0f : 3.0e38f;
                if (clamp_value > 0 && u > 0.99 && u <= 0.998) /* on and around the bound */
                    v = (float)(c * (u > 0.994 ? 1 : -1) * (u > 0.996 || u < 0.992 ? 1 : 1.01));
                put(dt, hx[k], i * x_rs + j, v);
            }
    }
    void *dx[2] = {NULL, NULL};
    for (int k = 0; k < parts; ++k) dx[k] = dev_alloc(x_n), to_dev(dx[k], hx[k], x_n);
    const int outs = layout == TWO ? 2 : 1;
    unsigned char *hd[2] = {NULL, NULL}, *dd[2] = {NULL, NULL};
    for (int k = 0; k < outs; ++k) {
        hd[k] = malloc(d_n);
        memset(hd[k], SENT8, d_n);
        dd[k] = dev_alloc(d_n), to_dev(dd[k], hd[k], d_n);
    }
    float *hs = malloc(s_n * 4), *ds = dev_alloc(s_n * 4);
    for (size_t i = 0; i < s_n; ++i) hs[i] = SENT_SCALE;
    to_dev(ds, hs, s_n * 4);
    fastglu_glu_params p = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    p.layout = il ? FASTGLU_LAYOUT_INTERLEAVED : FASTGLU_LAYOUT_SPLIT;
    p.clamp_value = clamp_value;
    const fastglu_tensor g = {dx[0], dt, x_rs}, u = {il ? NULL : dx[1], dt, x_rs},
                         g8 = {dd[0], FASTGLU_DTYPE_FP8_E4M3, d_rs},
                         u8 = {il              ? NULL
                               : layout == TWO ? dd[1]
                                               : dd[0] + F,
                               FASTGLU_DTYPE_FP8_E4M3, d_rs},
                         s = {ds, FASTGLU_DTYPE_FP32, s_rs};
    fastglu_set_fp8_saturate(sat);
    /* with_y: y [T, F] in a row stride of F + pad, the operands' bias [2F] and weights [T] */
    const int64_t y_rs = F + pad;
    const size_t y_n = (size_t)(T * y_rs) * es + MARGIN;
    unsigned char *hy = NULL, *hy2 = NULL;
    void *dy = NULL, *dy2 = NULL, *db = NULL, *dw = NULL;
    fastglu_glu_operands o;
    memset(&o, 0, sizeof o);
    o.gate = g, o.up = u;
    o.bias.dtype = dt, o.weights.dtype = FASTGLU_DTYPE_FP32, o.scale_inv.dtype = FASTGLU_DTYPE_FP32;
    if (with_y) {
        hy = malloc(y_n), hy2 = malloc(y_n);
        memset(hy, SENT8, y_n);
        dy = dev_alloc(y_n), dy2 = dev_alloc(y_n);
        to_dev(dy, hy, y_n), to_dev(dy2, hy, y_n);
        if (with_y == 2) {
            void *hb = malloc((size_t)(2 * F) * es);
            float *hw = malloc((size_t)T * 4);
            for (int64_t j = 0; j < 2 * F; ++j) put(dt, hb, j, (float)(urand() - 0.5));
            for (int64_t t = 0; t < T; ++t) hw[t] = (float)urand() + 0.25f;
            db = dev_alloc((size_t)(2 * F) * es), dw = dev_alloc((size_t)T * 4);
            to_dev(db, hb, (size_t)(2 * F) * es), to_dev(dw, hw, (size_t)T * 4);
            free(hb), free(hw);
            o.bias = (fastglu_tensor){db, dt, 1};
            o.weights = (fastglu_tensor){dw, FASTGLU_DTYPE_FP32, 1};
        }
    }
    const fastglu_tensor yt = {dy, dt, y_rs}, yt2 = {dy2, dt, y_rs};
    const fastglu_status st =
        with_y ? fused(&p, &o, yt, g8, u8, s, T, F) : store(&p, g, u, g8, u8, s, T, F);
    if (st != FASTGLU_SUCCESS) {
        FAIL("dtype %d layout %d T %lld F %lld: status %d (%s)", (int)dt, layout, (long long)T,
             (long long)F, (int)st, fastglu_last_error_message());
        goto done;
    }
    for (int k = 0; k < outs; ++k) to_host(hd[k], dd[k], d_n);
    to_host(hs, ds, s_n * 4);
    cases++;
    if (with_y) { /* y: the forward's own bits (its padding and margin untouched), and float64 */
        const fastglu_status st2 = forward(&p, &o, yt2, T, F);
        to_host(hy, dy, y_n), to_host(hy2, dy2, y_n);
        if (st2 != FASTGLU_SUCCESS)
            FAIL("forward alone: status %d (%s)", (int)st2, fastglu_last_error_message());
        else if (memcmp(hy, hy2, y_n))
            FAIL("y differs from fastglu_glu_fwd's: dtype %d layout %d T %lld F %lld clamp %g "
                 "with_y %d",
                 (int)dt, layout, (long long)T, (long long)F, c, with_y);
        /* SwiGLU in float64 on finite operands of ordinary size (kinds 0, 2, 3: the tiny and
         * scaled blocks' products leave fp32's and fp16's range), the dtype's tolerance */
        if (with_y == 1 && (kind == 0 || kind == 2 || kind == 3)) {
            double num = 0, den = 0;
            for (int64_t t = 0; t < T; ++t)
                for (int64_t j = 0; j < F; ++j) {
                    double gv =
                        il ? get(dt, hx[0], t * x_rs + 2 * j) : get(dt, hx[0], t * x_rs + j);
                    double uv =
                        il ? get(dt, hx[0], t * x_rs + 2 * j + 1) : get(dt, hx[1], t * x_rs + j);
                    if (!isfinite(gv) || !isfinite(uv) || fabs(gv) > 1e4 || fabs(uv) > 1e4)
                        continue;
                    if (clamp_value > 0) {
                        gv = gv > c ? c : gv;
                        uv = uv > c ? c : uv < -c ? -c : uv;
                    }
                    const double want = gv / (1.0 + exp(-gv)) * uv;
                    const double got = get(dt, hy, t * y_rs + j);
                    num += (got - want) * (got - want), den += want * want;
                }
            const double tol = dt == FASTGLU_DTYPE_BF16   ? 1e-2
                               : dt == FASTGLU_DTYPE_FP16 ? 1e-3
                                                          : 1e-5;
            if (den > 0 && sqrt(num / den) > tol)
                FAIL("y against float64 SwiGLU: relative error %.3g > %g (dtype %d F %lld)",
                     sqrt(num / den), tol, (int)dt, (long long)F);
        }
    }
    {
        const int clamp = c > 0 && !isinf(c);
        long bad_codes = 0, bad_scales = 0, bad_sent = 0;
        /* every byte not written stays the sentinel: mark the written ones */
        unsigned char *mark[2] = {calloc(d_n, 1), calloc(d_n, 1)};
        char *smark = calloc(s_n, 1);
        for (int64_t t = 0; t < T; ++t)
            for (int part = 0; part < parts; ++part)
                for (int64_t b = 0; b < nbp; ++b) {
                    const int64_t j0 = 128 * b, n = W - j0 < 128 ? W - j0 : 128;
                    double amax = 0;
                    for (int64_t k = 0; k < n; ++k) {
                        const double v = fabs(get(dt, hx[part], t * x_rs + j0 + k));
                        if (isnan(v) || v > amax) amax = isnan(v) ? NAN : v;
                        if (isnan(amax)) break;
                    }
                    const int scaled = amax >= 0x1p-126 && amax <= 0x1.fffffep127;
                    blocks_subnormal += amax > 0 && amax < 0x1p-126;
                    blocks_at_boundary += amax == 0x1p-126;
                    const float sw = ref_scale(amax, clamp);
                    const float sg = hs[t * s_rs + part * nbp + b];
                    smark[t * s_rs + part * nbp + b] = 1;
                    if (memcmp(&sw, &sg, 4) && bad_scales++ < 3)
                        FAIL("scale (t %lld, part %d, block %lld): %a, want %a (amax %a)",
                             (long long)t, part, (long long)b, (double)sg, (double)sw, amax);
                    double lo = 0, hi = 0;
                    if (clamp) ref_bounds(sw, c, &lo, &hi);
                    const int o = layout == TWO ? part : 0;
                    const int64_t col0 = layout == HALVES ? part * F : 0;
                    for (int64_t k = 0; k < n; ++k) {
                        const double x = get(dt, hx[part], t * x_rs + j0 + k);
                        double y = scaled ? (double)(float)(x / sw) : x;
                        if (clamp) {
                            const int up = il ? (int)(k & 1) : part;
                            if (up)
                                y = x > c ? hi : x < -c ? -hi : y > lo ? lo : y < -lo ? -lo : y;
                            else
                                y = x > c ? hi : y > lo ? lo : y;
                        }
                        const unsigned char want = ref_e4m3(y, sat);
                        const size_t at = (size_t)(t * d_rs + col0 + j0 + k);
                        const unsigned char got = hd[o][at];
                        mark[o][at] = 1;
                        const int both_nan = (want & 0x7f) == 0x7f && (got & 0x7f) == 0x7f;
                        if (got != want && !both_nan && bad_codes++ < 3)
                            FAIL("code (t %lld, part %d, col %lld): 0x%02x, want 0x%02x (x %a, "
                                 "scale %a, dtype %d, clamp %g, sat %d)",
                                 (long long)t, part, (long long)(j0 + k), got, want, x, (double)sw,
                                 (int)dt, c, sat);
                    }
                }
        for (int k = 0; k < outs; ++k)
            for (size_t i = 0; i < d_n; ++i)
                if (!mark[k][i] && hd[k][i] != SENT8) bad_sent++;
        for (size_t i = 0; i < s_n; ++i)
            if (!smark[i] && hs[i] != SENT_SCALE) bad_sent++;
        if (bad_sent) FAIL("%ld bytes or scales written outside the outputs", bad_sent);
        if (bad_codes || bad_scales || bad_sent)
            FAIL("case: dtype %d layout %d T %lld F %lld clamp %g strides %d kind %d sat %d: %ld "
                 "codes, %ld scales wrong",
                 (int)dt, layout, (long long)T, (long long)F, c, strides, kind, sat, bad_codes,
                 bad_scales);
        free(mark[0]), free(mark[1]), free(smark);
    }
done:
    free(hy), free(hy2);
    if (dy) dev_free(dy), dev_free(dy2);
    if (db) dev_free(db), dev_free(dw);
    for (int k = 0; k < parts; ++k) free(hx[k]), dev_free(dx[k]);
    for (int k = 0; k < outs; ++k) free(hd[k]), dev_free(dd[k]);
    free(hs), dev_free(ds);
}

/* ---- bad input -------------------------------------------------------------------------------- */

static void bad_inputs(void) {
    enum { T = 4, F = 64 };
    uint16_t hx[2][T * F];
    for (int i = 0; i < T * F; ++i) hx[0][i] = hx[1][i] = f32_to_bf16((float)(i % 13) - 6.0f);
    void *x[2] = {dev_alloc(sizeof hx[0]), dev_alloc(sizeof hx[1])};
    to_dev(x[0], hx[0], sizeof hx[0]), to_dev(x[1], hx[1], sizeof hx[1]);
    unsigned char *d = dev_alloc(T * 2 * F);
    float *s = dev_alloc(T * 2 * 4);
    unsigned char hd[T * 2 * F];
    float hs[T * 2];
    memset(hd, SENT8, sizeof hd);
    for (int i = 0; i < T * 2; ++i) hs[i] = SENT_SCALE;
    fastglu_glu_params p = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    const fastglu_tensor g = {x[0], FASTGLU_DTYPE_BF16, F}, u = {x[1], FASTGLU_DTYPE_BF16, F},
                         g8 = {d, FASTGLU_DTYPE_FP8_E4M3, 2 * F},
                         u8 = {d + F, FASTGLU_DTYPE_FP8_E4M3, 2 * F},
                         sc = {s, FASTGLU_DTYPE_FP32, 2};
#define EXPECT(what, want, P, G, U, G8, U8, S, TT, FF)                                             \
    do {                                                                                           \
        to_dev(d, hd, sizeof hd), to_dev(s, hs, sizeof hs);                                        \
        const fastglu_status st_ = store(P, G, U, G8, U8, S, TT, FF);                              \
        unsigned char ad[sizeof hd];                                                               \
        float as[T * 2];                                                                           \
        to_host(ad, d, sizeof ad), to_host(as, s, sizeof as);                                      \
        cases++;                                                                                   \
        if (st_ != (want)) FAIL("%s: status %d, want %d", what, (int)st_, (int)(want));            \
        if (memcmp(ad, hd, sizeof ad) || memcmp(as, hs, sizeof as))                                \
            FAIL("%s: an output was written", what);                                               \
        if (strlen(fastglu_last_error_message()) == 0) FAIL("%s: no message", what);               \
    } while (0)
    fastglu_tensor t;
    fastglu_glu_params q;
    EXPECT("NULL params", FASTGLU_ERROR_INVALID_VALUE, NULL, g, u, g8, u8, sc, T, F);
    q = p, q.layout = (fastglu_layout)7;
    EXPECT("layout 7", FASTGLU_ERROR_INVALID_VALUE, &q, g, u, g8, u8, sc, T, F);
    q = p, q.clamp_value = 448.0f;
    EXPECT("clamp 448", FASTGLU_ERROR_INVALID_VALUE, &q, g, u, g8, u8, sc, T, F);
    EXPECT("negative tokens", FASTGLU_ERROR_INVALID_VALUE, &p, g, u, g8, u8, sc, -1, F);
    EXPECT("negative F", FASTGLU_ERROR_INVALID_VALUE, &p, g, u, g8, u8, sc, T, -3);
    t = g, t.dtype = FASTGLU_DTYPE_FP8_E4M3;
    EXPECT("fp8 gate", FASTGLU_ERROR_UNSUPPORTED_DTYPE, &p, t, u, g8, u8, sc, T, F);
    t = u, t.dtype = FASTGLU_DTYPE_FP16;
    EXPECT("fp16 up, bf16 gate", FASTGLU_ERROR_UNSUPPORTED_DTYPE, &p, g, t, g8, u8, sc, T, F);
    t = u, t.data = NULL;
    EXPECT("SPLIT without up", FASTGLU_ERROR_INVALID_VALUE, &p, g, t, g8, u8, sc, T, F);
    q = p, q.layout = FASTGLU_LAYOUT_INTERLEAVED;
    EXPECT("INTERLEAVED with up", FASTGLU_ERROR_INVALID_VALUE, &q, g, u, g8, u8, sc, T, F / 2);
    t = u, t.data = NULL;
    EXPECT("INTERLEAVED with up_fp8", FASTGLU_ERROR_INVALID_VALUE, &q, g, t, g8, u8, sc, T, F / 2);
    t = g8, t.dtype = FASTGLU_DTYPE_BF16;
    EXPECT("bf16 codes", FASTGLU_ERROR_UNSUPPORTED_DTYPE, &p, g, u, t, u8, sc, T, F);
    t = sc, t.dtype = FASTGLU_DTYPE_BF16;
    EXPECT("bf16 scales", FASTGLU_ERROR_UNSUPPORTED_DTYPE, &p, g, u, g8, u8, t, T, F);
    t = sc, t.row_stride = 1; /* rows of 2 scales overlapping */
    EXPECT("scale rows overlapping", FASTGLU_ERROR_INVALID_VALUE, &p, g, u, g8, u8, t, T, F);
    t = g8, t.row_stride = F - 1;
    EXPECT("code rows overlapping", FASTGLU_ERROR_INVALID_VALUE, &p, g, u, t, u8, sc, T, F);
    t = u8, t.data = d + F - 8; /* up's codes over gate's */
    EXPECT("up_fp8 over gate_fp8", FASTGLU_ERROR_INVALID_VALUE, &p, g, u, g8, t, sc, T, F);
    t = g8, t.data = (unsigned char *)x[0] + 8; /* codes over the input */
    EXPECT("gate_fp8 over gate", FASTGLU_ERROR_INVALID_VALUE, &p, g, u, t, u8, sc, T, F);
    t = sc, t.data = d + 2 * F; /* scales over the codes' second row */
    EXPECT("scale_inv over the codes", FASTGLU_ERROR_INVALID_VALUE, &p, g, u, g8, u8, t, T, F);
    t = g, t.row_stride = -F;
    EXPECT("negative gate stride", FASTGLU_ERROR_INVALID_VALUE, &p, t, u, g8, u8, sc, T, F);
    t = g, t.data = (char *)x[0] + 1;
    EXPECT("misaligned gate", FASTGLU_ERROR_INVALID_VALUE, &p, t, u, g8, u8, sc, T, F);
    t = u8, t.data = x[1]; /* up's codes over up */
    EXPECT("up_fp8 over up", FASTGLU_ERROR_INVALID_VALUE, &p, g, u, g8, t, sc, T, F);
    t = sc, t.data = x[0]; /* the scales over gate */
    EXPECT("scale_inv over gate", FASTGLU_ERROR_INVALID_VALUE, &p, g, u, g8, u8, t, T, F);
    t = sc, t.data = (char *)s + 2;
    EXPECT("misaligned scale_inv", FASTGLU_ERROR_INVALID_VALUE, &p, g, u, g8, u8, t, T, F);
    t = g8, t.data = NULL;
    EXPECT("NULL gate_fp8", FASTGLU_ERROR_INVALID_VALUE, &p, g, u, t, u8, sc, T, F);
    t = sc, t.data = NULL;
    EXPECT("NULL scale_inv", FASTGLU_ERROR_INVALID_VALUE, &p, g, u, g8, u8, t, T, F);
    t = u8, t.dtype = FASTGLU_DTYPE_BF16; /* an empty problem checks the dtypes too */
    EXPECT("bf16 up codes, no tokens", FASTGLU_ERROR_UNSUPPORTED_DTYPE, &p, g, u, g8, t, sc, 0, F);
#undef EXPECT
    /* empty problems succeed and write nothing, NULL pointers included */
    to_dev(d, hd, sizeof hd), to_dev(s, hs, sizeof hs);
    const fastglu_tensor ng = {NULL, FASTGLU_DTYPE_BF16, F}, nu = {NULL, FASTGLU_DTYPE_BF16, F},
                         ng8 = {NULL, FASTGLU_DTYPE_FP8_E4M3, 2 * F},
                         nu8 = {NULL, FASTGLU_DTYPE_FP8_E4M3, 2 * F},
                         ns = {NULL, FASTGLU_DTYPE_FP32, 2};
    if (store(&p, g, u, g8, u8, sc, 0, F) != FASTGLU_SUCCESS ||
        store(&p, g, u, g8, u8, sc, T, 0) != FASTGLU_SUCCESS ||
        store(&p, ng, nu, ng8, nu8, ns, 0, F) != FASTGLU_SUCCESS ||
        store(&p, ng, nu, ng8, nu8, ns, T, 0) != FASTGLU_SUCCESS)
        FAIL("empty problems: %s", fastglu_last_error_message());
    {
        unsigned char ad[sizeof hd];
        float as[T * 2];
        to_host(ad, d, sizeof ad), to_host(as, s, sizeof as);
        cases++;
        if (memcmp(ad, hd, sizeof ad) || memcmp(as, hs, sizeof as))
            FAIL("empty problems: an output was written");
    }
    dev_free(x[0]), dev_free(x[1]), dev_free(d), dev_free(s);
}

/* fastglu_glu_fwd_fp8_store_blockwise_*: the forward's and the copy's errors, and output against
 * the copy's outputs; nothing written (y, codes, scales) */
static void bad_fused_inputs(void) {
    enum { T = 4, F = 64 };
    uint16_t hx[2][T * F], hy[T * F];
    for (int i = 0; i < T * F; ++i) hx[0][i] = hx[1][i] = f32_to_bf16((float)(i % 13) - 6.0f);
    for (int i = 0; i < T * F; ++i) hy[i] = 0x5a5a;
    void *x[2] = {dev_alloc(sizeof hx[0]), dev_alloc(sizeof hx[1])}, *y = dev_alloc(sizeof hy);
    to_dev(x[0], hx[0], sizeof hx[0]), to_dev(x[1], hx[1], sizeof hx[1]);
    unsigned char *d = dev_alloc(T * 2 * F);
    float *s = dev_alloc(T * 2 * 4);
    unsigned char hd[T * 2 * F];
    float hs[T * 2];
    memset(hd, SENT8, sizeof hd);
    for (int i = 0; i < T * 2; ++i) hs[i] = SENT_SCALE;
    fastglu_glu_params p = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    fastglu_glu_operands o;
    memset(&o, 0, sizeof o);
    o.gate = (fastglu_tensor){x[0], FASTGLU_DTYPE_BF16, F};
    o.up = (fastglu_tensor){x[1], FASTGLU_DTYPE_BF16, F};
    o.bias.dtype = FASTGLU_DTYPE_BF16, o.weights.dtype = FASTGLU_DTYPE_FP32;
    o.scale_inv.dtype = FASTGLU_DTYPE_FP32;
    const fastglu_tensor yt = {y, FASTGLU_DTYPE_BF16, F}, g8 = {d, FASTGLU_DTYPE_FP8_E4M3, 2 * F},
                         u8 = {d + F, FASTGLU_DTYPE_FP8_E4M3, 2 * F},
                         sc = {s, FASTGLU_DTYPE_FP32, 2};
#define EXPECT(what, want, P, O, Y, G8, U8, S)                                                     \
    do {                                                                                           \
        to_dev(d, hd, sizeof hd), to_dev(s, hs, sizeof hs), to_dev(y, hy, sizeof hy);              \
        const fastglu_status st_ = fused(P, O, Y, G8, U8, S, T, F);                                \
        unsigned char ad[sizeof hd];                                                               \
        float as[T * 2];                                                                           \
        uint16_t ay[T * F];                                                                        \
        to_host(ad, d, sizeof ad), to_host(as, s, sizeof as), to_host(ay, y, sizeof ay);           \
        cases++;                                                                                   \
        if (st_ != (want)) FAIL("%s: status %d, want %d", what, (int)st_, (int)(want));            \
        if (memcmp(ad, hd, sizeof ad) || memcmp(as, hs, sizeof as) || memcmp(ay, hy, sizeof ay))   \
            FAIL("%s: an output was written", what);                                               \
        if (strlen(fastglu_last_error_message()) == 0) FAIL("%s: no message", what);               \
    } while (0)
    fastglu_tensor t;
    fastglu_glu_operands q = o;
    fastglu_glu_params pq = p;
    EXPECT("fused: NULL operands", FASTGLU_ERROR_INVALID_VALUE, &p, NULL, yt, g8, u8, sc);
    EXPECT("fused: NULL params", FASTGLU_ERROR_INVALID_VALUE, NULL, &o, yt, g8, u8, sc);
    pq.clamp_value = 448.0f;
    EXPECT("fused: clamp 448", FASTGLU_ERROR_INVALID_VALUE, &pq, &o, yt, g8, u8, sc);
    t = yt, t.data = d + 2 * F; /* y over the codes' second row */
    EXPECT("fused: y over the codes", FASTGLU_ERROR_INVALID_VALUE, &p, &o, t, g8, u8, sc);
    t = yt, t.data = s;
    EXPECT("fused: y over scale_inv", FASTGLU_ERROR_INVALID_VALUE, &p, &o, t, g8, u8, sc);
    t = yt, t.data = x[1];
    EXPECT("fused: y over up", FASTGLU_ERROR_INVALID_VALUE, &p, &o, t, g8, u8, sc);
    t = g8, t.data = y; /* the codes over y */
    EXPECT("fused: gate_fp8 over y", FASTGLU_ERROR_INVALID_VALUE, &p, &o, yt, t, u8, sc);
    t = yt, t.dtype = FASTGLU_DTYPE_FP16;
    EXPECT("fused: fp16 y, bf16 operands", FASTGLU_ERROR_UNSUPPORTED_DTYPE, &p, &o, t, g8, u8, sc);
    t = yt, t.data = NULL;
    EXPECT("fused: NULL y", FASTGLU_ERROR_INVALID_VALUE, &p, &o, t, g8, u8, sc);
    t = sc, t.data = NULL;
    EXPECT("fused: NULL scale_inv", FASTGLU_ERROR_INVALID_VALUE, &p, &o, yt, g8, u8, t);
    q = o, q.scale_inv.data = s;
    EXPECT("fused: operands->scale_inv", FASTGLU_ERROR_INVALID_VALUE, &p, &q, yt, g8, u8, sc);
    q = o, q.up.data = NULL;
    EXPECT("fused: SPLIT without up", FASTGLU_ERROR_INVALID_VALUE, &p, &q, yt, g8, u8, sc);
    /* the copy's outputs over the forward's bias or weights */
    q = o,
    q.bias = (fastglu_tensor){d, FASTGLU_DTYPE_BF16, 1}; /* bias [2F]: the codes' first row */
    EXPECT("fused: codes over bias", FASTGLU_ERROR_INVALID_VALUE, &p, &q, yt, g8, u8, sc);
    q = o, q.weights = (fastglu_tensor){s, FASTGLU_DTYPE_FP32, 2}; /* weights over the scales */
    EXPECT("fused: scale_inv over weights", FASTGLU_ERROR_INVALID_VALUE, &p, &q, yt, g8, u8, sc);
#undef EXPECT
    dev_free(x[0]), dev_free(x[1]), dev_free(y), dev_free(d), dev_free(s);
}

/* fastglu_glu_fwd_fp8_copy_blockwise_* (the FP8 forward and the copy in one pass) against
 * fastglu_glu_fwd_fp8_* and then fastglu_glu_fp8_store_blockwise_* on the same backend: every output
 * buffer bit for bit, their padding and a margin after each left as the sentinel. h is one
 * [T, 2F] buffer (gate | up) with row stride in_rs; the codes one [T, 2F] buffer. */
static fastglu_status fwd_fp8(fastglu_glu_params *p, const fastglu_fp8_recipe *r, fastglu_tensor g,
                              fastglu_tensor u, fastglu_tensor b, fastglu_tensor w,
                              fastglu_tensor y, const fastglu_fp8_out *o, fastglu_tensor *copy,
                              int64_t T, int64_t F) {
    fastglu_status st;
#ifdef FP8_TEST_CUDA
    st = copy ? fastglu_glu_fwd_fp8_copy_blockwise_cuda(p, r, g, u, b, w, y, o, copy[0], copy[1],
                                                        copy[2], T, F, stream)
              : fastglu_glu_fwd_fp8_cuda(p, r, g, u, b, w, y, o, T, F, stream);
    check_cuda(cudaStreamSynchronize(stream), "sync");
#else
    st = copy ? fastglu_glu_fwd_fp8_copy_blockwise_cpu(p, r, g, u, b, w, y, o, copy[0], copy[1],
                                                       copy[2], T, F)
              : fastglu_glu_fwd_fp8_cpu(p, r, g, u, b, w, y, o, T, F);
#endif
    return st;
}

enum { CP_Y, CP_D, CP_S, CP_DT, CP_ST, CP_C, CP_CS, CP_N }; /* the outputs, in one buffer each */

static void copy_case(fastglu_dtype dt, int il, int64_t T, int64_t F, int colwise, int bias,
                      int weights, float clamp, int tensor, int pad) {
    char what[200];
    snprintf(what, sizeof what,
             "fwd_fp8_copy dt=%d il=%d T=%lld F=%lld colwise=%d bias=%d w=%d clamp=%g tensor=%d "
             "pad=%d",
             (int)dt, il, (long long)T, (long long)F, colwise, bias, weights, (double)clamp, tensor,
             pad);
    cases++;
    const size_t es = fastglu_dtype_size(dt);
    const int64_t in_rs = 2 * F + pad, y_rs = F + pad, d_rs = F + 8 * pad, dt_rs = T + 8 * pad,
                  c_rs = 2 * F + 8 * pad, nb = (F + 127) / 128, nbt = (T + 127) / 128,
                  nbs = il ? (2 * F + 127) / 128 : 2 * nb, cs_rs = nbs + pad;
    /* the outputs' sizes in bytes (MARGIN more each for the sentinel after them) */
    const size_t sz[CP_N] = {
        (size_t)(T * y_rs) * es, (size_t)(T * d_rs),    tensor ? 4 : (size_t)(T * nb) * 4,
        (size_t)(F * dt_rs),     (size_t)(F * nbt) * 4, (size_t)(T * c_rs),
        (size_t)(T * cs_rs) * 4};
    unsigned char *hx = malloc((size_t)(T * in_rs) * es), *hb = malloc((size_t)(2 * F) * es);
    float *hw = malloc((size_t)T * 4);
    for (int64_t i = 0; i < T * in_rs; ++i) put(dt, hx, i, (float)(urand() * 8.0 - 4.0));
    if (T >= 3) /* a row of zeros and one of tiny values: blocks without a scale */
        for (int64_t j = 0; j < 2 * F; ++j)
            put(dt, hx, in_rs + j, 0.0f), put(dt, hx, 2 * in_rs + j, 1e-39f);
    for (int64_t i = 0; i < 2 * F; ++i) put(dt, hb, i, (float)(urand() * 2.0 - 1.0));
    for (int64_t i = 0; i < T; ++i) hw[i] = (float)urand();
    void *x = dev_alloc((size_t)(T * in_rs) * es), *b = dev_alloc((size_t)(2 * F) * es),
         *w = dev_alloc((size_t)T * 4), *ws = dev_alloc(64);
    to_dev(x, hx, (size_t)(T * in_rs) * es), to_dev(b, hb, (size_t)(2 * F) * es);
    to_dev(w, hw, (size_t)T * 4);
    unsigned char *out[2][CP_N], *host[2][CP_N];
    for (int k = 0; k < 2; ++k)
        for (int i = 0; i < CP_N; ++i) {
            const size_t n = sz[i] + MARGIN * 4;
            host[k][i] = malloc(n);
            memset(host[k][i], SENT8, n);
            out[k][i] = dev_alloc(n);
            to_dev(out[k][i], host[k][i], n);
        }
    fastglu_glu_params p = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    p.layout = il ? FASTGLU_LAYOUT_INTERLEAVED : FASTGLU_LAYOUT_SPLIT, p.clamp_value = clamp;
    const fastglu_fp8_recipe r = {tensor ? FASTGLU_FP8_SCALING_TENSOR
                                         : FASTGLU_FP8_SCALING_BLOCK_1X128,
                                  FASTGLU_FP8_SCALES_ROW_MAJOR, 0};
    const fastglu_tensor g = {x, dt, in_rs},
                         u = {il ? NULL : (char *)x + (size_t)F * es, dt, in_rs},
                         bt = {bias ? b : NULL, dt, 1},
                         wt = {weights ? w : NULL, FASTGLU_DTYPE_FP32, 1};
    for (int k = 0; k < 2; ++k) { /* 0: the one call; 1: the two calls */
        fastglu_fp8_out o;
        memset(&o, 0, sizeof o);
        o.data = (fastglu_tensor){out[k][CP_D], FASTGLU_DTYPE_FP8_E4M3, d_rs};
        o.scale = (fastglu_tensor){out[k][CP_S], FASTGLU_DTYPE_FP32, tensor ? 1 : nb};
        if (colwise) {
            o.data_t = (fastglu_tensor){out[k][CP_DT], FASTGLU_DTYPE_FP8_E4M3, dt_rs};
            if (!tensor) o.scale_t = (fastglu_tensor){out[k][CP_ST], FASTGLU_DTYPE_FP32, nbt};
        }
        o.workspace = ws, o.workspace_bytes = 64;
        fastglu_tensor copy[3] = {{out[k][CP_C], FASTGLU_DTYPE_FP8_E4M3, c_rs},
                                  {il ? NULL : out[k][CP_C] + F, FASTGLU_DTYPE_FP8_E4M3, c_rs},
                                  {out[k][CP_CS], FASTGLU_DTYPE_FP32, cs_rs}};
        const fastglu_tensor yt = {out[k][CP_Y], dt, y_rs};
        fastglu_status st = fwd_fp8(&p, &r, g, u, bt, wt, yt, &o, k ? NULL : copy, T, F);
        if (st == FASTGLU_SUCCESS && k) st = store(&p, g, u, copy[0], copy[1], copy[2], T, F);
        if (st != FASTGLU_SUCCESS) {
            FAIL("%s (%s): status %d: %s", what, k ? "two calls" : "one call", (int)st,
                 fastglu_last_error_message());
            break;
        }
        for (int i = 0; i < CP_N; ++i) to_host(host[k][i], out[k][i], sz[i] + MARGIN * 4);
    }
    static const char *const names[CP_N] = {"y",       "data",      "scale",    "data_t",
                                            "scale_t", "the codes", "scale_inv"};
    for (int i = 0; i < CP_N; ++i)
        if (memcmp(host[0][i], host[1][i], sz[i] + MARGIN * 4)) {
            FAIL("%s: %s differs from the two calls'", what, names[i]);
            break;
        }
    for (int k = 0; k < 2; ++k)
        for (int i = 0; i < CP_N; ++i) free(host[k][i]), dev_free(out[k][i]);
    free(hx), free(hb), free(hw);
    dev_free(x), dev_free(b), dev_free(w), dev_free(ws);
}

/* fastglu_glu_fwd_fp8_copy_blockwise_*'s errors: the forward's, the copy's, and the copy's outputs
 * over the forward's outputs; no output written */
static void bad_copy_inputs(void) {
    enum { T = 4, F = 64 };
    uint16_t hx[T * 2 * F];
    for (int i = 0; i < T * 2 * F; ++i) hx[i] = f32_to_bf16((float)(i % 13) - 6.0f);
    void *x = dev_alloc(sizeof hx);
    to_dev(x, hx, sizeof hx);
    enum { N = 4096 };
    unsigned char hbuf[N], abuf[N];
    memset(hbuf, SENT8, N);
    unsigned char *buf =
        dev_alloc(N); /* every output in one buffer, apart unless a case moves one */
    fastglu_glu_params p = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    const fastglu_fp8_recipe r = {FASTGLU_FP8_SCALING_BLOCK_1X128, FASTGLU_FP8_SCALES_ROW_MAJOR, 0};
    const fastglu_tensor g = {x, FASTGLU_DTYPE_BF16, 2 * F},
                         u = {(char *)x + 2 * F, FASTGLU_DTYPE_BF16, 2 * F},
                         none = {NULL, FASTGLU_DTYPE_BF16, 1},
                         yt = {buf, FASTGLU_DTYPE_BF16, F}; /* [0, 512) */
    fastglu_fp8_out o;
    memset(&o, 0, sizeof o);
    o.data = (fastglu_tensor){buf + 512, FASTGLU_DTYPE_FP8_E4M3, F};    /* [512, 768) */
    o.scale = (fastglu_tensor){buf + 1024, FASTGLU_DTYPE_FP32, 1};      /* [1024, 1040) */
    fastglu_tensor c[3] = {{buf + 2048, FASTGLU_DTYPE_FP8_E4M3, 2 * F}, /* [2048, 2560) */
                           {buf + 2048 + F, FASTGLU_DTYPE_FP8_E4M3, 2 * F},
                           {buf + 3072, FASTGLU_DTYPE_FP32, 2}}; /* [3072, 3104) */
#define EXPECT(what, want, P, R, Y, O, C)                                                          \
    do {                                                                                           \
        to_dev(buf, hbuf, N);                                                                      \
        const fastglu_status st_ = fwd_fp8(P, R, g, u, none, none, Y, O, C, T, F);                 \
        to_host(abuf, buf, N);                                                                     \
        cases++;                                                                                   \
        if (st_ != (want)) FAIL("%s: status %d, want %d", what, (int)st_, (int)(want));            \
        if (memcmp(abuf, hbuf, N)) FAIL("%s: an output was written", what);                        \
        if (strlen(fastglu_last_error_message()) == 0) FAIL("%s: no message", what);               \
    } while (0)
    fastglu_tensor cc[3];
    fastglu_fp8_out oo = o;
    fastglu_glu_params pq = p;
    EXPECT("copy: NULL recipe", FASTGLU_ERROR_INVALID_VALUE, &p, NULL, yt, &o, c);
    pq.clamp_value = 448.0f; /* the copy's refusal: a clamp it cannot mark */
    EXPECT("copy: clamp 448", FASTGLU_ERROR_INVALID_VALUE, &pq, &r, yt, &o, c);
    memcpy(cc, c, sizeof cc), cc[0].data = buf + 512; /* the codes over data */
    EXPECT("copy: gate_fp8 over data", FASTGLU_ERROR_INVALID_VALUE, &p, &r, yt, &o, cc);
    memcpy(cc, c, sizeof cc), cc[2].data = buf + 1024; /* scale_inv over the scales */
    EXPECT("copy: scale_inv over scale", FASTGLU_ERROR_INVALID_VALUE, &p, &r, yt, &o, cc);
    memcpy(cc, c, sizeof cc), cc[1].data = buf + 100; /* up_fp8 over y */
    EXPECT("copy: up_fp8 over y", FASTGLU_ERROR_INVALID_VALUE, &p, &r, yt, &o, cc);
    memcpy(cc, c, sizeof cc), cc[0].dtype = FASTGLU_DTYPE_BF16;
    EXPECT("copy: bf16 codes", FASTGLU_ERROR_UNSUPPORTED_DTYPE, &p, &r, yt, &o, cc);
    oo = o, oo.data.data = buf + 3072; /* data over scale_inv */
    EXPECT("copy: data over scale_inv", FASTGLU_ERROR_INVALID_VALUE, &p, &r, yt, &oo, c);
    memcpy(cc, c, sizeof cc), cc[0].data = x; /* the codes over gate */
    EXPECT("copy: gate_fp8 over gate", FASTGLU_ERROR_INVALID_VALUE, &p, &r, yt, &o, cc);
#undef EXPECT
    dev_free(x), dev_free(buf);
}

int main(void) {
#ifdef FP8_TEST_CUDA
    int n = 0;
    if (!fastglu_cuda_available() || cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("no usable CUDA device: skipped\n");
        return 77;
    }
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
#endif
    const uint64_t seed0 = seed_rng();
    static const fastglu_dtype dts[] = {FASTGLU_DTYPE_BF16, FASTGLU_DTYPE_FP16, FASTGLU_DTYPE_FP32};
    static const int64_t Ts[] = {1, 3, 257};
    static const int64_t Fs[] = {1, 3, 128, 200, 1408, 2880, 3420, 5632};
    static const float clamps[] = {0.0f, 7.0f, 0.3f, INFINITY};
    int i = 0;
    for (int di = 0; di < 3; ++di)
        for (int layout = TWO; layout <= INTERLEAVED; ++layout)
            for (int ti = 0; ti < 3; ++ti)
                for (int fi = 0; fi < 8; ++fi, ++i) {
                    if (Ts[ti] == 257 && Fs[fi] > 1408 && (i % 3)) continue; /* a third of them */
                    /* every F meets every clamp (over layout and T) and both saturate modes */
                    run_case(dts[di], layout, Ts[ti], Fs[fi], clamps[(fi + ti + layout) % 4],
                             (fi + layout) % 3, (fi + di + ti) % 2, (fi + ti + di) % 3);
                }
    if (!getenv("FASTGLU_TEST_QUICK")) { /* the long shapes (FASTGLU_TEST_QUICK: without them) */
        run_case(FASTGLU_DTYPE_BF16, HALVES, 8193, 5632, 0.0f, DENSE, 1, 1);
        run_case(FASTGLU_DTYPE_BF16, INTERLEAVED, 8193, 1408, 7.0f, PADDED, 1, 0);
    }
    /* the FP8 forward with the copy: the one kernel (SPLIT, F % 8 == 0, 1 x 128, no clamp, rows
     * on 16 bytes) and the two calls' kernels elsewhere, against the two calls */
    static const int64_t Fc[] = {3, 136, 1408, 2880}, Tc[] = {1, 257, 300};
    for (int di = 0; di < 3; ++di)
        for (int fi = 0; fi < 4; ++fi)
            for (int ti = 0; ti < 3; ++ti) {
                const int v = (di + fi + ti) % 4;
                copy_case(dts[di], 0, Tc[ti], Fc[fi], ti != 1, v == 1, v == 2, 0.0f, 0,
                          v == 3 ? 3 : 8);
            }
    copy_case(FASTGLU_DTYPE_BF16, 1, 257, 136, 1, 1, 1, 0.0f, 0, 8); /* interleaved */
    copy_case(FASTGLU_DTYPE_BF16, 0, 257, 136, 1, 0, 0, 7.0f, 0, 8); /* a clamp */
    copy_case(FASTGLU_DTYPE_FP16, 0, 257, 136, 1, 0, 1, 0.0f, 1, 8); /* per-tensor */
    fastglu_set_fp8_saturate(0);
    copy_case(FASTGLU_DTYPE_FP32, 0, 300, 256, 0, 1, 0, 0.0f, 0, 0);
    fastglu_set_fp8_saturate(1);
    bad_inputs();
    bad_fused_inputs();
    bad_copy_inputs();
    printf("blocks with a subnormal amax: %ld, with amax 2^-126: %ld\n", blocks_subnormal,
           blocks_at_boundary);
    if (!blocks_subnormal || !blocks_at_boundary) FAIL("no block on or below 2^-126 was made");
    printf("fp8 blockwise store (%s): %d cases, %d failures (seed %llu)\n",
#ifdef FP8_TEST_CUDA
           "cuda",
#else
           "cpu",
#endif
           cases, failures, (unsigned long long)seed0);
#ifdef FP8_TEST_CUDA
    check_cuda(cudaStreamDestroy(stream), "stream");
#endif
    return failures ? 1 : 0;
}
