/*
 * fuzz_swiglu.c — a libFuzzer harness for the C API's CPU entry points (build with clang
 * -fsanitize=fuzzer,address,undefined; see tests/fuzz/run.sh).
 *
 * Each input picks a dtype (invalid ones included), tokens, F, row strides (too small, zero,
 * padded), dy's two strides (zero, transposed, padded), element offsets of every pointer (0..7:
 * misaligned vectors, and misaligned elements), NULL pointers, and aliasing (the output placed
 * inside the input, or the backward in place). Every buffer is its own allocation, exactly as large
 * as the strides and offsets it is described with, so AddressSanitizer catches any read or write
 * outside what the call was given; outputs are pre-filled with a sentinel. Then:
 *  - a call that fails must leave every output buffer byte-identical;
 *  - a call that succeeds must match a float64 reference (by dtype's tolerance, elementwise with
 *    an absolute floor) on every output element, and leave the gaps between output rows intact.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "convert.h"
#include "fastglu.h"
#include "fuzz_common.h"

#define MAX_TOKENS 40
#define MAX_F 300

static double load(fastglu_dtype dt, const void *p, int64_t i) {
    if (dt == FASTGLU_DTYPE_FP32) return ((const float *)p)[i];
    if (dt == FASTGLU_DTYPE_FP16) return fp16_to_f32(((const uint16_t *)p)[i]);
    return bf16_to_f32(((const uint16_t *)p)[i]);
}

static void store(fastglu_dtype dt, void *p, int64_t i, double v) {
    if (dt == FASTGLU_DTYPE_FP32)
        ((float *)p)[i] = (float)v;
    else if (dt == FASTGLU_DTYPE_FP16)
        ((uint16_t *)p)[i] = f32_to_fp16((float)v);
    else
        ((uint16_t *)p)[i] = f32_to_bf16((float)v);
}

/* A stride: derived from the natural one `base`, sometimes zero or too small. */
static int64_t pick_stride(reader *r, int64_t base) {
    switch (next(r) % 6) {
    case 0: return base;
    case 1: return base + (int64_t)(next(r) % 9);
    case 2: return 0;
    case 3: return base > 0 ? base - 1 : 0;
    case 4: return base * 2 + 1;
    default: return base + 8;
    }
}

static int close_enough(fastglu_dtype dt, double got, double want) {
    const double rel = dt == FASTGLU_DTYPE_FP32 ? 1e-5 : dt == FASTGLU_DTYPE_FP16 ? 2e-3 : 1.6e-2;
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return got == want;
    return fabs(got - want) <= rel * fabs(want) + rel; /* an absolute floor for values near 0 */
}

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

/* What the inputs exercised (printed by the standalone driver). */
static long n_fwd_ok, n_fwd_err, n_bwd_ok, n_bwd_err, n_in_place_ok;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reader r = {data, size};
    const unsigned dsel = next(&r) % 4;
    const fastglu_dtype dt = (fastglu_dtype)dsel; /* 3 is invalid */
    const size_t es = dsel == 0 ? 4 : 2;
    const int64_t T =
        (int64_t)(next(&r) % (MAX_TOKENS + 1)) - (next(&r) % 16 == 0); /* -1 sometimes */
    const int64_t F = (int64_t)((next(&r) | next(&r) << 8) % (MAX_F + 1)) - (next(&r) % 16 == 0);
    const int64_t W = 2 * F;
    const int64_t in_rs = pick_stride(&r, W), out_rs = pick_stride(&r, F),
                  din_rs = pick_stride(&r, W);
    int64_t dy_rs, dy_cs;
    switch (next(&r) % 4) {
    case 0: dy_rs = F, dy_cs = 1; break;
    case 1: dy_rs = 0, dy_cs = 0; break;
    case 2: dy_rs = 1, dy_cs = T > 0 ? T : 1; break;
    default: dy_rs = pick_stride(&r, F), dy_cs = next(&r) % 3; break;
    }
    const unsigned off_in = next(&r) % 8, off_out = next(&r) % 8, off_dy = next(&r) % 8,
                   off_din = next(&r) % 8, byte_off = next(&r) % 8 == 0; /* misaligned element */
    const unsigned flags = next(&r);
    const int null_in = flags % 29 == 1, alias_out = flags % 7 == 2, in_place = flags % 5 == 3;

    const int64_t n_in = off_in + span(T, W, in_rs, 1), n_out = off_out + span(T, F, out_rs, 1);
    const int64_t n_dy = off_dy + span(T, F, dy_rs, dy_cs), n_din = off_din + span(T, W, din_rs, 1);
    unsigned char *in = malloc(n_in * es + 1), *out = malloc(n_out * es + 1);
    unsigned char *dy = malloc(n_dy * es + 1), *din = malloc(n_din * es + 1);
    unsigned char *out0 = malloc(n_out * es + 1), *din0 = malloc(n_din * es + 1);
    for (int64_t i = 0; i < n_in; ++i)
        store(dsel ? dt : FASTGLU_DTYPE_FP32, in, i, ((int)next(&r) - 128) / 24.0);
    for (int64_t i = 0; i < n_dy; ++i)
        store(dsel ? dt : FASTGLU_DTYPE_FP32, dy, i, ((int)next(&r) - 128) / 32.0);
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
    fastglu_status st = fastglu_swiglu_fwd_cpu(x, in_rs, y, out_rs, T, F, dt);
    if (st == FASTGLU_SUCCESS && T > 0 && F > 0)
        n_fwd_ok++;
    else if (st != FASTGLU_SUCCESS)
        n_fwd_err++;
    if (st != FASTGLU_SUCCESS || alias_out) {
        /* a failure, or an accepted alias (which would be a bug: out overlaps the input), must
         * have left everything alone; the input must be unchanged too */
        if (memcmp(out, out0, n_out * es + 1) != 0 || memcmp(in, in_copy, n_in * es + 1) != 0) {
            if (st == FASTGLU_SUCCESS) abort(); /* accepted an overlapping output and wrote it */
            abort();                            /* failed, but wrote */
        }
        if (alias_out && st == FASTGLU_SUCCESS && T > 0 && F > 0) abort();
    } else if (T > 0 && F > 0) {
        for (int64_t t = 0; t < T; ++t)
            for (int64_t j = 0; j < F; ++j) {
                double gt = load(dt, xin, t * in_rs + j), up = load(dt, xin, t * in_rs + F + j);
                double want = gt * sigmoid(gt) * up;
                double got = load(dt, out + off_out * es, t * out_rs + j);
                if (!close_enough(dt, got, want)) abort();
            }
        /* gaps between rows (and the bytes before and after) keep the sentinel */
        for (int64_t e = 0; e < n_out; ++e) {
            int64_t rel = e - off_out;
            int inside = rel >= 0 && (T == 1 ? rel < F : rel / out_rs < T && rel % out_rs < F);
            if (!inside && memcmp(out + e * es, out0 + e * es, es) != 0) abort();
        }
    }

    /* backward */
    memcpy(din0, din, n_din * es + 1);
    unsigned char *in_before = malloc(n_in * es + 1);
    memcpy(in_before, in, n_in * es + 1);
    st = fastglu_swiglu_bwd_cpu(g, dy_rs, dy_cs, x, in_rs, dx, din_rs, T, F, dt);
    if (st == FASTGLU_SUCCESS && T > 0 && F > 0)
        n_bwd_ok++, n_in_place_ok += in_place;
    else if (st != FASTGLU_SUCCESS)
        n_bwd_err++;
    if (st != FASTGLU_SUCCESS) {
        if (memcmp(din, din0, n_din * es + 1) != 0 || memcmp(in, in_before, n_in * es + 1) != 0)
            abort();
    } else if (T > 0 && F > 0) {
        const unsigned char *res = in_place ? in + off_in * es : din + off_din * es;
        for (int64_t t = 0; t < T; ++t)
            for (int64_t j = 0; j < F; ++j) {
                double gt = load(dt, in_before + off_in * es, t * in_rs + j);
                double up = load(dt, in_before + off_in * es, t * in_rs + F + j);
                double d = load(dt, dy + off_dy * es, t * dy_rs + j * dy_cs), s = sigmoid(gt);
                if (!close_enough(dt, load(dt, res, t * din_rs + j),
                                  d * s * (1 + gt * (1 - s)) * up))
                    abort();
                if (!close_enough(dt, load(dt, res, t * din_rs + F + j), d * gt * s)) abort();
            }
    }
    free(in), free(out), free(dy), free(din), free(out0), free(din0), free(in_copy),
        free(in_before);
    return 0;
}

#ifdef FASTGLU_FUZZ_STANDALONE
/* Without libFuzzer (gcc): random inputs for a bounded time, under the same sanitizers.
 *   fuzz_swiglu_standalone SECONDS [SEED] */
#include <stdio.h>

int main(int argc, char **argv) {
    uint8_t buf[4096];
    const long runs = fuzz_standalone("fuzz_swiglu_standalone", argc, argv, buf, sizeof buf, 16);
    printf("fuzz_swiglu_standalone: %ld inputs, no failure (forward: %ld computed, %ld rejected; "
           "backward: %ld computed, %ld of them in place, %ld rejected)\n",
           runs, n_fwd_ok, n_fwd_err, n_bwd_ok, n_in_place_ok, n_bwd_err);
    return 0;
}
#endif
