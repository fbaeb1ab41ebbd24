/*
 * fuzz_fp8_store.c — a libFuzzer harness for fastglu_glu_fwd_fp8_store_blockwise_cpu (the GLU's
 * forward and the blockwise FP8 copy of its operands in one call; its validation covers
 * fastglu_glu_fp8_store_blockwise_*'s too); build with clang -fsanitize=fuzzer,address,undefined
 * (see tests/fuzz/run.sh).
 *
 * Each input picks the operands' dtype (invalid ones included), the layout (split as two tensors
 * or as one [T, 2F] row, interleaved; an invalid code), the activation, clamp_value (none, small,
 * 7, +inf, 500, NaN), T and F (0 .. 200, block boundaries often), a bias and per-token weights or
 * not, every tensor's row stride (zero, too small, exact, padded), element offsets, misaligned and
 * NULL pointers, the outputs' dtypes, the copy's codes as two tensors or the halves of one row, and
 * aliasing (y over an operand, codes over the bias or over y, the scales over the weights). Every
 * buffer is its own allocation, exactly as large as its description, so AddressSanitizer sees any
 * access outside what the call was given; outputs start as a sentinel. Then:
 *  - a call that fails must leave every buffer byte-identical;
 *  - a call the harness knows to be illegal (an output over an input or another output) that
 *    succeeds on a non-empty problem aborts;
 *  - a call that succeeds must leave its inputs unchanged and every output buffer, padding
 *    included, byte-identical to what fastglu_glu_fwd_cpu and then
 *    fastglu_glu_fp8_store_blockwise_cpu write into copies of the outputs (the two calls it
 *    fuses; each tested against its own float64 reference elsewhere).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"

static long n_ok, n_err;

/* a tensor of rows x cols elements of size es: its own allocation (an offset before it, the
 * stride's padding), filled with values of dtype dt or the output sentinel */
static void arg_make(reader *r, arg *a, int64_t rows, int64_t cols, int dt, int output,
                     uint64_t *g) {
    a->rs = pick_stride(r, cols);
    a->off = (int64_t)(next(r) % 3);
    const int misalign = next(r) % 48 == 0;
    buf_make(&a->b, a->off + span(rows, cols, a->rs, 1), esize(dt));
    for (int64_t e = 0; e < a->b.n; ++e) {
        if (output) {
            memset(a->b.p + e * a->b.es, 0xa5, a->b.es);
            continue;
        }
        *g = *g * 6364136223846793005ull + 1442695040888963407ull;
        const unsigned k = (unsigned)(*g >> 56), m = (unsigned)(*g >> 40) & 0xffff;
        const double base = ((double)(int)(m % 200) - 100.0) / 16.0;
        store(dt, a->b.p, e,
              k % 64 == 0   ? NAN
              : k % 64 == 1 ? INFINITY
              : k % 64 == 2 ? 0.0
              : k % 64 == 3 ? base * 1e-30
                            : base);
    }
    a->b.p[a->b.n * a->b.es] = 0x5a;
    a->ptr = next(r) % 64 == 0 ? NULL : a->b.p + a->off * a->b.es + misalign;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reader rd = {data, size}, *r = &rd;
    const unsigned dsel = next(r) % 16;
    const int dt = dsel < 14 ? (int)(dsel % 3) : dsel == 14 ? FASTGLU_DTYPE_FP8_E4M3 : 9;
    int il, two; /* split: gate and up as two tensors (else one [T, 2F] row) */
    fastglu_glu_params p = pick_glu_params(r, &il, &two);
    const int64_t T = pick_dim(r), F = pick_dim(r);
    const int64_t W = 2 * F, nb = il ? (W + 127) / 128 : 2 * ((F + 127) / 128);
    uint64_t g = next(r) | (uint64_t)next(r) << 8 | (uint64_t)next(r) << 16;
    const int vdt = valid_dtype(dt) ? dt : FASTGLU_DTYPE_BF16;

    /* inputs: x (one [T, 2F] row or gate [T, F]), up [T, F] (two), bias [2F], weights [T] */
    arg x, up, bias, w, y, g8, u8, sc;
    memset(&x, 0, sizeof x), memset(&up, 0, sizeof up), memset(&bias, 0, sizeof bias);
    memset(&w, 0, sizeof w), memset(&u8, 0, sizeof u8);
    arg_make(r, &x, T, two ? F : W, dt, 0, &g);
    if (two) arg_make(r, &up, T, F, dt, 0, &g);
    const int has_bias = next(r) % 3 == 0, has_w = next(r) % 3 == 0;
    const int wdt = next(r) % 2 ? FASTGLU_DTYPE_FP32 : FASTGLU_DTYPE_BF16;
    if (has_bias) arg_make(r, &bias, 1, W, dt, 0, &g), bias.rs = 1;
    if (has_w) arg_make(r, &w, T, 1, wdt, 0, &g);
    /* outputs: y [T, F], the codes (two tensors, or the halves of one [T, 2F] row), scale_inv */
    const int ydt = next(r) % 32 == 0 ? (vdt == 0 ? 1 : 0) : vdt;
    arg_make(r, &y, T, F, ydt, 1, &g);
    const int codes_two = two && next(r) % 2;
    arg_make(r, &g8, T, codes_two ? F : W, FASTGLU_DTYPE_FP8_E4M3, 1, &g);
    if (codes_two) arg_make(r, &u8, T, F, FASTGLU_DTYPE_FP8_E4M3, 1, &g);
    const int sdt = next(r) % 32 == 0 ? FASTGLU_DTYPE_BF16 : FASTGLU_DTYPE_FP32;
    arg_make(r, &sc, T, nb, sdt, 1, &g);
    void *u8_ptr = il ? NULL : codes_two ? u8.ptr : g8.ptr ? (uint8_t *)g8.ptr + F : NULL;
    const int64_t u8_rs = codes_two ? u8.rs : g8.rs;
    if (next(r) % 64 == 0) u8_ptr = il ? g8.ptr : NULL; /* up's codes given / missing */
    /* aliasing */
    int illegal = 0;
    const unsigned al = next(r) % 16;
    if (al == 0 && y.ptr && x.ptr) {
        y.ptr = x.ptr, illegal = 1;
    } else if (al == 1 && g8.ptr && has_bias && bias.ptr) {
        g8.ptr = bias.ptr, illegal = 1;
    } else if (al == 2 && sc.ptr && has_w && w.ptr) {
        sc.ptr = w.ptr, illegal = 1;
    } else if (al == 3 && g8.ptr && y.ptr) {
        g8.ptr = y.ptr, illegal = 1;
    }

    fastglu_glu_operands o;
    memset(&o, 0, sizeof o);
    const size_t es = esize(dt);
    o.gate = (fastglu_tensor){x.ptr, (fastglu_dtype)dt, x.rs};
    o.up = (fastglu_tensor){two            ? up.ptr
                            : il || !x.ptr ? NULL
                                           : (unsigned char *)x.ptr + F * es,
                            (fastglu_dtype)dt, two ? up.rs : x.rs};
    o.bias = (fastglu_tensor){has_bias ? bias.ptr : NULL, (fastglu_dtype)dt, 1};
    o.weights = (fastglu_tensor){has_w ? w.ptr : NULL, (fastglu_dtype)wdt, w.rs};
    o.scale_inv = (fastglu_tensor){NULL, FASTGLU_DTYPE_FP32, 0};
    const fastglu_tensor yt = {y.ptr, (fastglu_dtype)ydt, y.rs},
                         g8t = {g8.ptr, FASTGLU_DTYPE_FP8_E4M3, g8.rs},
                         u8t = {u8_ptr, FASTGLU_DTYPE_FP8_E4M3, u8_rs},
                         st = {sc.ptr, (fastglu_dtype)sdt, sc.rs};
    arg *all[] = {&x, &up, &bias, &w, &y, &g8, &u8, &sc};
    for (int k = 0; k < 8; ++k)
        if (all[k]->b.p) buf_snap(&all[k]->b);

    const fastglu_status s =
        fastglu_glu_fwd_fp8_store_blockwise_cpu(&p, &o, yt, g8t, u8t, st, T, F);
    if (s != FASTGLU_SUCCESS) {
        for (int k = 0; k < 8; ++k) check_unchanged(&all[k]->b);
        n_err++;
        goto done;
    }
    if (illegal && T > 0 && F > 0) abort();
    n_ok++;
    for (int k = 0; k < 4; ++k) check_unchanged(&all[k]->b); /* the inputs */
    {
        /* the two calls on copies of the outputs as they were */
        unsigned char *cy = malloc(y.b.n * y.b.es + 1), *cg = malloc(g8.b.n + 1),
                      *cu = malloc(u8.b.n + 1), *cs = malloc(sc.b.n * sc.b.es + 1);
        memcpy(cy, y.b.before, y.b.n * y.b.es + 1), memcpy(cg, g8.b.before, g8.b.n + 1);
        if (u8.b.p) memcpy(cu, u8.b.before, u8.b.n + 1);
        memcpy(cs, sc.b.before, sc.b.n * sc.b.es + 1);
        const fastglu_tensor none = {NULL, FASTGLU_DTYPE_FP8_E4M3, 0};
        const fastglu_tensor y2 = {moved(&y, cy, y.ptr), (fastglu_dtype)ydt, y.rs},
                             g2 = {moved(&g8, cg, g8.ptr), FASTGLU_DTYPE_FP8_E4M3, g8.rs},
                             u2 = {codes_two ? moved(&u8, cu, u8_ptr) : moved(&g8, cg, u8_ptr),
                                   FASTGLU_DTYPE_FP8_E4M3, u8_rs},
                             s2 = {moved(&sc, cs, sc.ptr), (fastglu_dtype)sdt, sc.rs};
        if (fastglu_glu_fwd_cpu(&p, &o, y2, none, T, F) != FASTGLU_SUCCESS) abort();
        if (fastglu_glu_fp8_store_blockwise_cpu(&p, o.gate, o.up, g2, u2, s2, T, F) !=
            FASTGLU_SUCCESS)
            abort();
        if (memcmp(cy, y.b.p, y.b.n * y.b.es + 1) || memcmp(cg, g8.b.p, g8.b.n + 1) ||
            (u8.b.p && memcmp(cu, u8.b.p, u8.b.n + 1)) || memcmp(cs, sc.b.p, sc.b.n * sc.b.es + 1))
            abort();
        free(cy), free(cg), free(cu), free(cs);
    }
done:
    for (int k = 0; k < 8; ++k) buf_free(&all[k]->b);
    return 0;
}

#ifdef FASTGLU_FUZZ_STANDALONE
int main(int argc, char **argv) {
    static uint8_t input[4096];
    const long runs =
        fuzz_standalone("fuzz_fp8_store_standalone", argc, argv, input, sizeof input, 64);
    printf("fuzz_fp8_store_standalone: %ld inputs, no failure (%ld computed, %ld rejected)\n", runs,
           n_ok, n_err);
    return 0;
}
#endif
