/* test_mlp_cpu.c — fastglu_mlp_fwd_cpu (fc1 + GLU, then fc2): fp32 against a float64 reference on
 * fresh random inputs at odd shapes (T = 1, 3, 257; H = 1, 5, 37; F = 1, 3, 130), with and without
 * biases, per-token weights and h; bf16 bitwise against its two GEMMs called one after the other;
 * bad input (every output left as its sentinel, the message naming the GEMM and the argument); an
 * out overlapping h refused; in a build without CUDA, fastglu_mlp_fwd_cuda's validation and
 * FASTGLU_ERROR_NO_CUDA.
 *
 * Tolerance (fp32): h and out are fp32 sums of H and F products, y one fp32 evaluation of the
 * activation (a few ulp): |out - ref| <= 2^-24 (8 + 2 (H + F)) * (|y| |w2|^T + |bias2|) with |y|
 * from the reference's magnitudes plus the propagated error of h, bounded here by the same
 * expression over |x| |w1|^T; checked element-wise against 1e-5 times the magnitude scale. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fastglu.h"

static uint64_t rng;
static double uniform(void) { /* xorshift64*, [-1, 1) */
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return (double)((rng * 2685821657736338717ull) >> 11) / 4503599627370496.0 - 1.0;
}
static float *randn(int64_t n, double scale) {
    float *p = malloc((size_t)(n ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; ++i) p[i] = (float)(scale * (uniform() + uniform() + uniform()));
    return p;
}
static double silu(double z) { return z / (1.0 + exp(-z)); }

static int check_fp32(int64_t T, int64_t H, int64_t F, int bias, int weights, int store_h) {
    float *x = randn(T * H, 1.0), *w1 = randn(2 * F * H, 1.0 / sqrt((double)H)),
          *w2 = randn(H * F, 1.0 / sqrt((double)F)), *b1 = randn(2 * F, 0.5), *b2 = randn(H, 0.5),
          *wt = randn(T, 1.0);
    float *h = malloc((size_t)(T * 2 * F) * sizeof(float)),
          *y = malloc((size_t)(T * F) * sizeof(float)),
          *out = malloc((size_t)(T * H) * sizeof(float));
    for (int64_t i = 0; i < T * H; ++i) out[i] = NAN; /* sentinel */
    const fastglu_dtype f32 = FASTGLU_DTYPE_FP32;
    const fastglu_tensor none = {NULL, f32, 0};
    const fastglu_glu_params p = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    fastglu_status st = fastglu_mlp_fwd_cpu(
        &p, (fastglu_tensor){x, f32, H}, (fastglu_tensor){w1, f32, H},
        bias ? (fastglu_tensor){b1, f32, 1} : none, weights ? (fastglu_tensor){wt, f32, 1} : none,
        (fastglu_tensor){w2, f32, F}, bias ? (fastglu_tensor){b2, f32, 1} : none,
        store_h ? (fastglu_tensor){h, f32, 2 * F} : none, (fastglu_tensor){y, f32, F},
        (fastglu_tensor){out, f32, H}, T, H, F);
    int bad = st != FASTGLU_SUCCESS;
    double *yr = malloc((size_t)(F ? F : 1) * sizeof(double)),
           *ym = malloc((size_t)(F ? F : 1) * sizeof(double));
    for (int64_t t = 0; t < T && !bad; ++t) {
        for (int64_t j = 0; j < F; ++j) {
            double g = bias ? b1[j] : 0, u = bias ? b1[F + j] : 0, gm = fabs(g), um = fabs(u);
            for (int64_t k = 0; k < H; ++k) {
                g += (double)x[t * H + k] * w1[j * H + k],
                    gm += fabs((double)x[t * H + k] * w1[j * H + k]);
                u += (double)x[t * H + k] * w1[(F + j) * H + k],
                    um += fabs((double)x[t * H + k] * w1[(F + j) * H + k]);
            }
            const double s = weights ? wt[t] : 1.0;
            yr[j] = silu(g) * u * s;
            /* |d y / d g| <= 1.1 |u|, |d y / d u| = |silu(g)| <= |g| + 0.3: y's magnitude with h's error */
            ym[j] =
                fabs(s) * ((fabs(silu(g)) + 1e-3) * (fabs(u) + um) + 1.1 * fabs(u) * gm + gm * um);
            if (store_h && (fabs(h[t * 2 * F + j] - g) > 1e-5 * gm + 1e-30 ||
                            fabs(h[t * 2 * F + F + j] - u) > 1e-5 * um + 1e-30))
                bad = 1;
        }
        for (int64_t c = 0; c < H; ++c) {
            double o = bias ? b2[c] : 0, om = bias ? fabs(b2[c]) : 0;
            for (int64_t j = 0; j < F; ++j)
                o += yr[j] * w2[c * F + j], om += ym[j] * fabs(w2[c * F + j]);
            if (!(fabs(out[t * H + c] - o) <= 1e-5 * om + 1e-30)) bad = 1;
        }
    }
    printf("mlp_fwd_cpu fp32 T=%lld H=%lld F=%lld bias=%d weights=%d h=%d: %s\n", (long long)T,
           (long long)H, (long long)F, bias, weights, store_h, bad ? "FAILED" : "ok");
    free(x), free(w1), free(w2), free(b1), free(b2), free(wt), free(h), free(y), free(out),
        free(yr), free(ym);
    return bad;
}

static uint16_t *bf16s(int64_t n, double scale) {
    float *f = randn(n, scale);
    uint16_t *b = malloc((size_t)(n ? n : 1) * 2);
    for (int64_t i = 0; i < n; ++i) {
        uint32_t u;
        memcpy(&u, &f[i], 4);
        b[i] = (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
    }
    free(f);
    return b;
}

/* bf16 with everything: bitwise the two GEMMs called in turn. */
static int check_composition(int64_t T, int64_t H, int64_t F) {
    const fastglu_dtype bf = FASTGLU_DTYPE_BF16;
    uint16_t *x = bf16s(T * H, 1.0), *w1 = bf16s(2 * F * H, 0.2), *w2 = bf16s(H * F, 0.2),
             *b1 = bf16s(2 * F, 0.5), *b2 = bf16s(H, 0.5), *wt = bf16s(T, 1.0);
    uint16_t *h[2], *y[2], *out[2];
    for (int i = 0; i < 2; ++i) {
        h[i] = calloc((size_t)(T * 2 * F), 2), y[i] = calloc((size_t)(T * F), 2),
        out[i] = calloc((size_t)(T * H), 2);
    }
    fastglu_glu_params p = fastglu_glu_params_default(FASTGLU_ACT_QUICK_GELU);
    p.clamp_value = 1.5f, p.glu_linear_offset = 1.0f;
    const fastglu_tensor tx = {x, bf, H}, tw1 = {w1, bf, H}, tb1 = {b1, bf, 1}, twt = {wt, bf, 1},
                         tw2 = {w2, bf, F}, tb2 = {b2, bf, 1};
    int bad = fastglu_mlp_fwd_cpu(&p, tx, tw1, tb1, twt, tw2, tb2,
                                  (fastglu_tensor){h[0], bf, 2 * F}, (fastglu_tensor){y[0], bf, F},
                                  (fastglu_tensor){out[0], bf, H}, T, H, F) != 0;
    bad |= fastglu_linear_glu_fwd_cpu(&p, tx, tw1, tb1, twt, (fastglu_tensor){h[1], bf, 2 * F},
                                      (fastglu_tensor){y[1], bf, F}, T, H, F) != 0;
    bad |= fastglu_linear_cpu((fastglu_tensor){y[1], bf, F}, tw2, tb2,
                              (fastglu_tensor){out[1], bf, H}, T, F, H) != 0;
    bad |= memcmp(h[0], h[1], (size_t)(T * 2 * F) * 2) || memcmp(y[0], y[1], (size_t)(T * F) * 2) ||
           memcmp(out[0], out[1], (size_t)(T * H) * 2);
    int nonzero = 0;
    for (int64_t i = 0; i < T * H; ++i) nonzero |= out[0][i] != 0;
    bad |= !nonzero;
    printf("mlp_fwd_cpu bf16 T=%lld H=%lld F=%lld = fc1 + fc2 bitwise: %s\n", (long long)T,
           (long long)H, (long long)F, bad ? "FAILED" : "ok");
    free(x), free(w1), free(w2), free(b1), free(b2), free(wt);
    for (int i = 0; i < 2; ++i) free(h[i]), free(y[i]), free(out[i]);
    return bad;
}

static int expect_error(const char *what, fastglu_status st, const char *needle, const float *outs,
                        int n) {
    int bad = st != FASTGLU_ERROR_INVALID_VALUE && st != FASTGLU_ERROR_UNSUPPORTED_DTYPE &&
              st != FASTGLU_ERROR_NO_CUDA;
    bad |= strstr(fastglu_last_error_message(), needle) == NULL;
    for (int i = 0; i < n; ++i) bad |= outs[i] != -7.0f;
    printf("mlp_fwd bad input, %s: %s (%s)\n", what, bad ? "FAILED" : "ok",
           fastglu_last_error_message());
    return bad;
}

static int check_errors(void) {
    enum { T = 3, H = 4, F = 2 };
    float x[T * H], w1[2 * F * H], w2[H * F], b2[H], buf[T * 2 * F + T * F + T * H];
    float *h = buf, *y = buf + T * 2 * F, *out = y + T * F;
    const int n = T * 2 * F + T * F + T * H;
    for (int i = 0; i < T * H; ++i) x[i] = 1.0f;
    for (int i = 0; i < 2 * F * H; ++i) w1[i] = 0.5f;
    for (int i = 0; i < H * F; ++i) w2[i] = 0.25f;
    const fastglu_dtype f32 = FASTGLU_DTYPE_FP32;
    const fastglu_tensor none = {NULL, f32, 0}, tx = {x, f32, H}, tw1 = {w1, f32, H},
                         tw2 = {w2, f32, F}, th = {h, f32, 2 * F}, ty = {y, f32, F},
                         to = {out, f32, H};
    const fastglu_glu_params p = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    int bad = 0;
#define RESET()                                                                                    \
    for (int i = 0; i < n; ++i) buf[i] = -7.0f
    RESET();
    bad += expect_error("w2 row stride",
                        fastglu_mlp_fwd_cpu(&p, tx, tw1, none, none, (fastglu_tensor){w2, f32, -1},
                                            none, th, ty, to, T, H, F),
                        "(fc2: x = y, w = w2, bias = bias2): w has a negative stride", buf, n);
    RESET();
    bad += expect_error("out of another dtype",
                        fastglu_mlp_fwd_cpu(&p, tx, tw1, none, none, tw2, none, th, ty,
                                            (fastglu_tensor){out, FASTGLU_DTYPE_BF16, H}, T, H, F),
                        "(fc2", buf, n);
    RESET();
    bad += expect_error(
        "y absent", fastglu_mlp_fwd_cpu(&p, tx, tw1, none, none, tw2, none, th, none, to, T, H, F),
        "(fc1)", buf, n);
    RESET();
    bad += expect_error("out overlapping h",
                        fastglu_mlp_fwd_cpu(&p, tx, tw1, none, none, tw2, none, th, ty,
                                            (fastglu_tensor){h, f32, H}, T, H, F),
                        "out overlaps h", buf, n);
    RESET();
    bad += expect_error("h overlapping w2",
                        fastglu_mlp_fwd_cpu(&p, tx, tw1, none, none, (fastglu_tensor){h, f32, F},
                                            (fastglu_tensor){b2, f32, 1}, th, ty, to, T, H, F),
                        "(fc1): h overlaps w2", buf, n);
    RESET();
    bad +=
        expect_error("negative tokens",
                     fastglu_mlp_fwd_cpu(&p, tx, tw1, none, none, tw2, none, th, ty, to, -1, H, F),
                     "tokens = -1", buf, n);
    if (!fastglu_cuda_built()) {
        RESET();
        bad += expect_error(
            "no CUDA",
            fastglu_mlp_fwd_cuda(&p, tx, tw1, none, none, tw2, none, th, ty, to, T, H, F, NULL),
            "built without the CUDA backend", buf, n);
        RESET();
        bad += expect_error(
            "no CUDA, bad input first",
            fastglu_mlp_fwd_cuda(&p, tx, tw1, none, none, tw2, none, th, ty, to, -1, H, F, NULL),
            "fastglu_mlp_fwd_cuda (fc1): tokens = -1", buf, n);
    }
    /* F = 0: out = bias2 (fc2 over an empty sum), fc1 does nothing */
    for (int i = 0; i < H; ++i) b2[i] = (float)i + 0.5f;
    RESET();
    int bad_empty = fastglu_mlp_fwd_cpu(&p, tx, tw1, none, none, tw2, (fastglu_tensor){b2, f32, 1},
                                        th, ty, to, T, H, 0) != 0;
    for (int t = 0; t < T; ++t)
        for (int c = 0; c < H; ++c) bad_empty += out[t * H + c] != b2[c];
    printf("mlp_fwd F = 0 gives out = bias2: %s\n", bad_empty ? "FAILED" : "ok");
    return bad + bad_empty;
}

int main(void) {
    rng = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull | 1;
    printf("seed %llu\n", (unsigned long long)rng);
    static const int64_t shapes[][3] = {{1, 1, 1}, {3, 5, 3}, {257, 37, 130}, {5, 37, 1}};
    int failed = 0;
    for (int s = 0; s < 4; ++s)
        for (int v = 0; v < 8; ++v)
            failed += check_fp32(shapes[s][0], shapes[s][1], shapes[s][2], v & 1, (v >> 1) & 1,
                                 (v >> 2) & 1);
    failed += check_composition(3, 37, 130);
    failed += check_composition(257, 8, 3);
    failed += check_errors();
    printf("%d failed\n", failed);
    return failed ? 1 : 0;
}
