/* test_cpu_paths_agree.c — the CPU backend's two SwiGLU paths give the same bits: fastglu_swiglu_*_cpu
 * and fastglu_glu_*_cpu with the plain SILU parameters (no bias, weights, clamp, offset or
 * multipliers), forward and backward, fp32 / bf16 / fp16, on fresh random inputs. Both compute the
 * sigmoid as include/fastglu.h says (1 / (1 + exp2f(-log2(e) x)), in the CUDA kernels' order of
 * operations), so nothing may differ. The glu path is run with gate and up as views of one
 * [tokens, 2F] input (Megatron's layout), as two separate tensors, and interleaved.
 *
 * Seed: FASTGLU_TEST_SEED (printed on every run). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "convert.h"
#include "fastglu.h"
#include "glu_flat.h"

static int failures;
static uint64_t rng_state;

static uint64_t next_u64(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

/* A nonzero value: mostly N(0, 3)-like magnitudes (the sigmoid's curved part), some up to +-100
 * (saturated), a few down to 1e-3. */
static float rand_value(void) {
    const uint64_t r = next_u64();
    const double u = (double)(r >> 11) * (1.0 / 9007199254740992.0); /* [0, 1) */
    const double sign = (r & 1) ? -1.0 : 1.0;
    const unsigned kind = (unsigned)((r >> 1) & 15);
    double mag = kind < 12 ? 8.0 * u : kind < 14 ? 100.0 * u : 1e-3 * (1.0 + u);
    if (mag < 1e-3) mag = 1e-3 * (1.0 + u);
    return (float)(sign * mag);
}

static size_t esize(fastglu_dtype dt) { return dt == FASTGLU_DTYPE_FP32 ? 4 : 2; }

static void put(fastglu_dtype dt, void *base, size_t i, float v) {
    if (dt == FASTGLU_DTYPE_FP32) {
        ((float *)base)[i] = v;
    } else {
        const uint16_t h = dt == FASTGLU_DTYPE_FP16 ? f32_to_fp16(v) : f32_to_bf16(v);
        ((uint16_t *)base)[i] = h;
    }
}

static void fill_random(fastglu_dtype dt, void *base, size_t n) {
    for (size_t i = 0; i < n; ++i) put(dt, base, i, rand_value());
}

/* The element (bytes) i of a buffer. */
static const unsigned char *elem(const void *base, size_t i, size_t es) {
    return (const unsigned char *)base + i * es;
}

/* Compare n elements of a (row stride ars) with b (row stride brs) over rows x cols, bitwise. */
static int compare(const char *what, const char *dtn, const void *a, const void *b, int64_t rows,
                   int64_t cols, int64_t ars, int64_t brs, int64_t bcs, size_t es) {
    long diff = 0;
    for (int64_t t = 0; t < rows; ++t)
        for (int64_t j = 0; j < cols; ++j) {
            const unsigned char *x = elem(a, (size_t)(t * ars + j), es);
            const unsigned char *y = elem(b, (size_t)(t * brs + j * bcs), es);
            if (memcmp(x, y, es) != 0) {
                if (diff < 3) {
                    uint32_t ux = 0, uy = 0;
                    memcpy(&ux, x, es), memcpy(&uy, y, es);
                    printf("FAIL %s %s: [%lld, %lld] swiglu 0x%x, glu 0x%x\n", what, dtn,
                           (long long)t, (long long)j, ux, uy);
                }
                ++diff;
            }
        }
    if (diff) {
        printf("FAIL %s %s: %ld of %lld elements differ\n", what, dtn, diff,
               (long long)(rows * cols));
        ++failures;
    }
    return diff == 0;
}

static void check_status(fastglu_status st, const char *what) {
    if (st != FASTGLU_SUCCESS) {
        printf("FAIL %s: status %d (%s)\n", what, (int)st, fastglu_last_error_message());
        ++failures;
    }
}

static void run(fastglu_dtype dt, const char *dtn, int64_t T, int64_t F) {
    const size_t es = esize(dt), n_in = (size_t)(T * 2 * F), n_out = (size_t)(T * F);
    unsigned char *x = malloc(n_in * es), *xi = malloc(n_in * es), *gate = malloc(n_out * es),
                  *up = malloc(n_out * es), *dy = malloc(n_out * es);
    unsigned char *y_sw = malloc(n_out * es), *y_glu = malloc(n_out * es);
    unsigned char *dx_sw = malloc(n_in * es), *dx_glu = malloc(n_in * es), *dg = malloc(n_out * es),
                  *du = malloc(n_out * es);
    const fastglu_glu_params p = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    fastglu_glu_params pil = p;
    pil.layout = FASTGLU_LAYOUT_INTERLEAVED;
    fill_random(dt, x, n_in);
    fill_random(dt, dy, n_out);
    /* a few signed zeros among the operands: an up of -0 keeps its sign through a zero offset */
    for (size_t i = 0; i < n_in; i += 61) put(dt, x, i, (i / 61) % 2 ? -0.0f : 0.0f);
    /* the same operands as two tensors, and interleaved */
    for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < F; ++j) {
            memcpy(gate + (t * F + j) * es, x + (t * 2 * F + j) * es, es);
            memcpy(up + (t * F + j) * es, x + (t * 2 * F + F + j) * es, es);
            memcpy(xi + (t * 2 * F + 2 * j) * es, x + (t * 2 * F + j) * es, es);
            memcpy(xi + (t * 2 * F + 2 * j + 1) * es, x + (t * 2 * F + F + j) * es, es);
        }
    char what[96];

    /* forward */
    memset(y_sw, 0x5a, n_out * es);
    check_status(fastglu_swiglu_fwd_cpu(x, 2 * F, y_sw, F, T, F, dt), "swiglu fwd");
    for (int form = 0; form < 3; ++form) {
        memset(y_glu, 0xa5, n_out * es);
        fastglu_status st = form == 0   ? glu_fwd_cpu_flat(&p, x, 2 * F, x + F * es, 2 * F, NULL,
                                                           NULL, dt, 0, y_glu, F, NULL, 0, T, F, dt)
                            : form == 1 ? glu_fwd_cpu_flat(&p, gate, F, up, F, NULL, NULL, dt, 0,
                                                           y_glu, F, NULL, 0, T, F, dt)
                                        : glu_fwd_cpu_flat(&pil, xi, 2 * F, NULL, 0, NULL, NULL, dt,
                                                           0, y_glu, F, NULL, 0, T, F, dt);
        snprintf(what, sizeof what, "forward (%s) T=%lld F=%lld",
                 form == 0   ? "one input"
                 : form == 1 ? "two tensors"
                             : "interleaved",
                 (long long)T, (long long)F);
        check_status(st, what);
        compare(what, dtn, y_sw, y_glu, T, F, F, F, 1, es);
    }

    /* backward */
    memset(dx_sw, 0x5a, n_in * es);
    check_status(fastglu_swiglu_bwd_cpu(dy, F, 1, x, 2 * F, dx_sw, 2 * F, T, F, dt), "swiglu bwd");
    for (int form = 0; form < 3; ++form) {
        memset(dx_glu, 0xa5, n_in * es);
        memset(dg, 0xa5, n_out * es);
        memset(du, 0xa5, n_out * es);
        fastglu_status st;
        snprintf(what, sizeof what, "backward (%s) T=%lld F=%lld",
                 form == 0   ? "one input"
                 : form == 1 ? "two tensors"
                             : "interleaved",
                 (long long)T, (long long)F);
        if (form == 0) {
            st = glu_bwd_cpu_flat(&p, dy, F, 1, x, 2 * F, x + F * es, 2 * F, dt, NULL, 0, NULL,
                                  NULL, dt, 0, dx_glu, 2 * F, dx_glu + F * es, 2 * F, NULL, NULL,
                                  NULL, 0, T, F, dt);
            check_status(st, what);
            compare(what, dtn, dx_sw, dx_glu, T, 2 * F, 2 * F, 2 * F, 1, es);
        } else if (form == 1) {
            st = glu_bwd_cpu_flat(&p, dy, F, 1, gate, F, up, F, dt, NULL, 0, NULL, NULL, dt, 0, dg,
                                  F, du, F, NULL, NULL, NULL, 0, T, F, dt);
            check_status(st, what);
            compare(what, dtn, dx_sw, dg, T, F, 2 * F, F, 1, es);          /* d_gate */
            compare(what, dtn, dx_sw + F * es, du, T, F, 2 * F, F, 1, es); /* d_up */
        } else {
            st = glu_bwd_cpu_flat(&pil, dy, F, 1, xi, 2 * F, NULL, 0, dt, NULL, 0, NULL, NULL, dt,
                                  0, dx_glu, 2 * F, NULL, 0, NULL, NULL, NULL, 0, T, F, dt);
            check_status(st, what);
            compare(what, dtn, dx_sw, dx_glu, T, F, 2 * F, 2 * F, 2, es); /* even: d_gate */
            compare(what, dtn, dx_sw + F * es, dx_glu + es, T, F, 2 * F, 2 * F, 2, es); /* odd */
        }
    }
    free(x), free(xi), free(gate), free(up), free(dy), free(y_sw), free(y_glu), free(dx_sw);
    free(dx_glu), free(dg), free(du);
}

int main(void) {
    const char *env = getenv("FASTGLU_TEST_SEED");
    const uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ (uint64_t)clock();
    rng_state = seed ? seed : 1;
    printf("cpu_paths_agree: seed %llu (set FASTGLU_TEST_SEED to repeat)\n",
           (unsigned long long)seed);
    static const fastglu_dtype dts[] = {FASTGLU_DTYPE_FP32, FASTGLU_DTYPE_BF16, FASTGLU_DTYPE_FP16};
    static const char *names[] = {"fp32", "bf16", "fp16"};
    static const int64_t shapes[][2] = {{128, 128}, {7, 1000}, {1, 1}, {33, 3}};
    for (int d = 0; d < 3; ++d)
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; ++s)
            run(dts[d], names[d], shapes[s][0], shapes[s][1]);
    if (failures)
        printf("%d failures\n", failures);
    else
        printf("cpu_paths_agree: swiglu and glu (SILU) paths agree bitwise\n");
    return failures ? 1 : 0;
}
