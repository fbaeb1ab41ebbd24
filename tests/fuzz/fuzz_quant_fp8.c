/*
 * fuzz_quant_fp8.c — a libFuzzer harness for fastglu_quantize_fp8_cpu (a plain [rows, cols]
 * operand quantised to float8_e4m3fn: 1 x 128 blocks with the transposed copy's 128 x 1 blocks, or
 * 128 x 128 blocks with the transposed codes); build with clang -fsanitize=fuzzer,address,undefined
 * (see tests/fuzz/run.sh).
 *
 * Each input picks the recipe (scaling, scale layout, power-of-two scales; invalid codes
 * included), x's dtype (fp8 and unknown ones included), rows and cols (0 .. 300: partial blocks,
 * several block rows), x's row stride (zero, too small: rows that overlap are legal for an input,
 * padded), which copies are written (none, data, data_t, both; a scale without its data), every
 * output's row stride and its scales' leading dimension (too small, exact, padded), the dtypes of
 * the outputs, NULL and misaligned pointers, element offsets, and aliasing (an output inside x, or
 * two outputs in one allocation, overlapping or not). x holds ordinary values and sometimes zero
 * blocks, tiny values (fp32's subnormal scales), huge ones, +-inf and NaN. Every buffer is its own
 * allocation, exactly as large as the strides and offsets it is described with, so
 * AddressSanitizer catches any access outside what the call was given; outputs are pre-filled with
 * a sentinel. Then:
 *  - a call that fails must leave every buffer byte-identical;
 *  - a call that succeeds must write, bit for bit, the recipe of include/fastglu.h as this harness
 *    computes it from the header's text (the amax of each block over the raw values, the scale
 *    amax / 448 in fp32 with its special cases, each code the e4m3fn cast of the fp32 quotient,
 *    searched in the table of e4m3fn values; in a NaN block any NaN code and scale), at the places
 *    the layout gives, leave every other byte of every buffer alone, and leave x unchanged.
 * A call the harness knows to be illegal (an output overlapping x or another output) that succeeds
 * on a non-empty problem aborts.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"

#define MAX_DIM 300

static long n_ok, n_err;

/* A value of x from the generator g (seeded by the input: an input's bytes run out long before a
 * 300 x 300 operand's values): mostly ordinary, sometimes what the recipe treats apart. */
static double pick_value(uint64_t *g, int tiny_block) {
    *g = *g * 6364136223846793005ull + 1442695040888963407ull;
    const unsigned k = (unsigned)(*g >> 56), m = (unsigned)(*g >> 40) & 0xffff;
    const double base = ((double)(int)(m % 200) - 100.0) / 16.0;
    if (tiny_block) return base * 1e-42; /* fp32: amax / 448 underflows */
    switch (k % 64) {
    case 0: return NAN;
    case 1: return INFINITY;
    case 2: return -INFINITY;
    case 3: return 0.0;
    case 4: return -0.0;
    case 5: return base * 1e4;
    case 6: return base * 1e-6;
    default: return base;
    }
}

/* The scale of a block of amax a (NaN if the block holds one), as include/fastglu.h states it. */
static float ref_scale(float a, int pow2) {
    if (isnan(a)) return NAN;
    if (a == 0.0f) return 1.0f;
    float s = a / 448.0f;
    if (s == 0.0f) s = FLT_TRUE_MIN;
    if (pow2 && isfinite(s)) {
        int e;
        const float m = frexpf(s, &e); /* s = m 2^e, m in [0.5, 1) */
        if (m != 0.5f) s = ldexpf(1.0f, e);
    }
    return s;
}

static uint8_t ref_code(float v, float s) { return ref_e4m3((double)(v / s)); }

static int same_scale(float got, float want) {
    if (isnan(want)) return isnan(got);
    return memcmp(&got, &want, sizeof got) == 0;
}

static int same_code(uint8_t got, uint8_t want) {
    if ((want & 0x7f) == 0x7f) return (got & 0x7f) == 0x7f; /* NaN: sign unspecified */
    return got == want;
}

/* One output operand of the call: its buffer, pointer, row stride, dtype. */
typedef struct slot {
    buf b;
    int64_t off, rs;
    int dt, misalign, want;
    void *ptr;
} slot;

static void slot_free(slot *s) { buf_free(&s->b); }

/* scale (i, b) of a scale tensor at ld in the layout */
static int64_t scale_at(int layout, int64_t ld, int64_t i, int64_t b) {
    return layout == FASTGLU_FP8_SCALES_MN_MAJOR ? b * ld + i : i * ld + b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reader rd = {data, size}, *r = &rd;
    fastglu_fp8_recipe recipe;
    const unsigned sc = next(r) % 8;
    recipe.scaling = sc < 4   ? FASTGLU_FP8_SCALING_BLOCK_1X128
                     : sc < 7 ? FASTGLU_FP8_SCALING_BLOCK_128X128
                              : (fastglu_fp8_scaling)(next(r) % 2 ? 1 : 7); /* invalid */
    const unsigned sl = next(r) % 8;
    recipe.scale_layout = sl < 7 ? (fastglu_fp8_scale_layout)(sl % 2) : (fastglu_fp8_scale_layout)2;
    recipe.pow2_scales = (int)(next(r) % 2);
    const int w128 = recipe.scaling == FASTGLU_FP8_SCALING_BLOCK_128X128;
    const unsigned dsel = next(r) % 16;
    const int xdt = dsel < 14 ? (int)(dsel % 3) : dsel == 14 ? FASTGLU_DTYPE_FP8_E4M3 : 9;
    int64_t rows = next(r) % 16 == 0 ? 0 : 1 + (int64_t)((next(r) | next(r) << 8) % MAX_DIM);
    int64_t cols = next(r) % 16 == 0 ? 0 : 1 + (int64_t)((next(r) | next(r) << 8) % MAX_DIM);
    if (next(r) % 4 == 0) rows = 1 + (int64_t)(next(r) % 3) * 128 - (int64_t)(next(r) % 2);
    if (next(r) % 4 == 0) cols = 1 + (int64_t)(next(r) % 3) * 128 - (int64_t)(next(r) % 2);
    if (rows < 0) rows = 0;
    if (cols < 0) cols = 0;
    const int64_t rb = (rows + 127) / 128, cb = (cols + 127) / 128;

    /* x */
    slot x;
    memset(&x, 0, sizeof x);
    x.rs = pick_stride(r, cols);
    x.off = (int64_t)(next(r) % 3);
    x.misalign = next(r) % 32 == 0;
    buf_make(&x.b, x.off + span(rows, cols, x.rs, 1), esize(xdt));
    {
        /* the values: specials in 1 of 64 (or none), a few 128-element bands of tiny values
         * (fp32's subnormal scales) */
        uint64_t g = next(r) | (uint64_t)next(r) << 8 | (uint64_t)next(r) << 16;
        const int tiny = xdt == FASTGLU_DTYPE_FP32 && next(r) % 4 == 0, plain = next(r) % 2;
        for (int64_t e = 0; e < x.b.n; ++e) {
            const double v = pick_value(&g, tiny && (e / 128) % 2);
            store(xdt, x.b.p, e, plain && !isfinite(v) ? 1.5 : v);
        }
        if (next(r) % 4 == 0) /* a zero block row */
            for (int64_t e = 0; e < x.b.n && e < 128; ++e) store(xdt, x.b.p, e, 0.0);
    }
    x.b.p[x.b.n * x.b.es] = 0x5a;
    x.ptr = next(r) % 64 == 0 ? NULL : x.b.p + x.off * x.b.es + x.misalign;

    /* the outputs: data, scale, data_t, scale_t */
    const unsigned which = next(r) % 8;
    const int want_d = which != 0 && which != 4, want_t = which >= 3;
    slot o[4];
    memset(o, 0, sizeof o);
    const int64_t orows[4] = {rows, w128 ? rb : rows, cols, w128 ? cb : cols};
    const int64_t ocols[4] = {cols, cb, rows, rb};
    for (int k = 0; k < 4; ++k) {
        slot *s = &o[k];
        const int is_scale = k % 2;
        s->want = k < 2 ? want_d : want_t;
        if (is_scale && next(r) % 32 == 0)
            s->want = !s->want; /* a scale without its data, or none */
        s->dt = is_scale ? (next(r) % 32 == 0 ? FASTGLU_DTYPE_BF16 : FASTGLU_DTYPE_FP32)
                         : (next(r) % 32 == 0 ? FASTGLU_DTYPE_BF16 : FASTGLU_DTYPE_FP8_E4M3);
        /* the natural leading dimension, then sometimes too small, zero or padded */
        const int mn = is_scale && recipe.scale_layout == FASTGLU_FP8_SCALES_MN_MAJOR;
        const int64_t prow = mn ? ocols[k] : orows[k], pcol = mn ? orows[k] : ocols[k];
        s->rs = pick_stride(r, pcol);
        s->off = (int64_t)(next(r) % 3);
        s->misalign = is_scale && next(r) % 32 == 0; /* (codes: any byte is aligned) */
        if (!s->want) continue;
        const size_t es = is_scale ? 4 : 1;
        buf_make(&s->b, s->off + span(prow, pcol, s->rs, 1), es);
        for (int64_t e = 0; e < s->b.n * (int64_t)es + 1; ++e) s->b.p[e] = 0xa5;
        s->ptr = s->b.n > 0 ? s->b.p + s->off * es + s->misalign : s->b.p;
        if (next(r) % 64 == 0) s->ptr = NULL;
    }
    /* aliasing: an output inside x, or inside another output's allocation */
    int illegal = 0;
    const unsigned al = next(r) % 16;
    if (al == 0 && o[0].want && x.ptr && o[0].ptr) {
        o[0].ptr = x.ptr, illegal = 1; /* the codes over x's first element */
    } else if (al == 1 && o[0].want && o[2].want && o[0].ptr && o[2].ptr && o[0].b.n > 0) {
        o[2].ptr = o[0].ptr, illegal = 1;
    } else if (al == 2 && o[1].want && o[3].want && o[1].ptr && o[3].ptr && o[1].b.n > 0) {
        o[3].ptr = o[1].ptr, illegal = 1;
    }

    fastglu_tensor xt = {x.ptr, (fastglu_dtype)xdt, x.rs};
    fastglu_fp8_out out;
    memset(&out, 0, sizeof out);
    fastglu_tensor *ot[4] = {&out.data, &out.scale, &out.data_t, &out.scale_t};
    for (int k = 0; k < 4; ++k) {
        ot[k]->data = o[k].want ? o[k].ptr : NULL;
        ot[k]->dtype = (fastglu_dtype)o[k].dt;
        ot[k]->row_stride = o[k].rs;
    }
    buf_snap(&x.b);
    for (int k = 0; k < 4; ++k)
        if (o[k].want) buf_snap(&o[k].b);

    const fastglu_status st = fastglu_quantize_fp8_cpu(&recipe, xt, &out, rows, cols);
    check_unchanged(&x.b);
    if (st != FASTGLU_SUCCESS) {
        for (int k = 0; k < 4; ++k)
            if (o[k].want) check_unchanged(&o[k].b);
        n_err++;
        goto done;
    }
    if (illegal && rows > 0 && cols > 0) abort();
    n_ok++;
    if (rows == 0 || cols == 0) {
        for (int k = 0; k < 4; ++k)
            if (o[k].want) check_unchanged(&o[k].b);
        goto done;
    }
    /* a success: the call's arguments were legal, so the layout below is what it wrote */
    {
        const int layout = recipe.scale_layout;
        float *xv = malloc((size_t)(rows * cols) * sizeof(float));
        for (int64_t i = 0; i < rows; ++i)
            for (int64_t j = 0; j < cols; ++j)
                xv[i * cols + j] = (float)load(xdt, (const unsigned char *)x.ptr, i * x.rs + j);
        /* data and its scales: blocks along x's rows (1 x 128) or 128 x 128 */
        for (int pass = 0; pass < 2; ++pass) {
            slot *d = &o[2 * pass], *s = &o[2 * pass + 1];
            if (!d->want || !d->ptr) continue; /* (a NULL data: that copy not asked) */
            const int64_t R = pass ? cols : rows, C = pass ? rows : cols; /* the copy's shape */
            const uint8_t *dp = (const uint8_t *)d->ptr;
            const float *sp = (const float *)s->ptr;
            const int64_t d0 = (int64_t)(dp - d->b.p), s0 = ((const unsigned char *)sp - s->b.p);
            if (s0 % 4) abort(); /* a legal call: its scales aligned */
            mark(&d->b, d0, R, C, d->rs);
            const int64_t bh = w128 ? 128 : 1; /* block height in the copy */
            for (int64_t i0 = 0; i0 < R; i0 += bh)
                for (int64_t c0 = 0; c0 < C; c0 += 128) {
                    float a = 0.0f;
                    int nan = 0;
                    for (int64_t i = i0; i < i0 + bh && i < R; ++i)
                        for (int64_t c = c0; c < c0 + 128 && c < C; ++c) {
                            const float v = pass ? xv[c * cols + i] : xv[i * cols + c];
                            if (isnan(v))
                                nan = 1;
                            else if (fabsf(v) > a)
                                a = fabsf(v);
                        }
                    const float want_s = ref_scale(nan ? NAN : a, recipe.pow2_scales);
                    const int64_t si = w128 ? i0 / 128 : i0, sb = c0 / 128;
                    const int64_t se = s0 / 4 + scale_at(layout, s->rs, si, sb);
                    mark(&s->b, se, 1, 1, 1);
                    float got_s;
                    memcpy(&got_s, s->b.p + se * 4, 4);
                    if (!same_scale(got_s, want_s)) abort();
                    for (int64_t i = i0; i < i0 + bh && i < R; ++i)
                        for (int64_t c = c0; c < c0 + 128 && c < C; ++c) {
                            const float v = pass ? xv[c * cols + i] : xv[i * cols + c];
                            const uint8_t want = nan ? 0x7f : ref_code(v, want_s);
                            if (!same_code(dp[i * d->rs + c], want)) abort();
                        }
                }
        }
        free(xv);
        for (int k = 0; k < 4; ++k)
            if (o[k].want) check_unmarked(&o[k].b);
    }
done:
    buf_free(&x.b);
    for (int k = 0; k < 4; ++k) slot_free(&o[k]);
    return 0;
}

#ifdef FASTGLU_FUZZ_STANDALONE
int main(int argc, char **argv) {
    static uint8_t input[8192];
    const long runs =
        fuzz_standalone("fuzz_quant_fp8_standalone", argc, argv, input, sizeof input, 64);
    printf("fuzz_quant_fp8_standalone: %ld inputs, no failure (%ld computed, %ld rejected)\n", runs,
           n_ok, n_err);
    return 0;
}
#endif
