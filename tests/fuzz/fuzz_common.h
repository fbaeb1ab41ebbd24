/*
 * fuzz_common.h — what the libFuzzer harnesses (fuzz_glu.c, fuzz_quant_fp8.c, fuzz_fp8_store.c,
 * fuzz_glu_fp8_saved.c) share: the byte reader that turns an input into choices, the span of a
 * strided region, typed element access, the e4m3fn reference cast, the buffers (each its own
 * allocation, a snapshot, the elements a call may write) and their checks, the FP8 copy's
 * harnesses' dimensions and tensor arguments, and the driver of a build without libFuzzer
 * (FASTGLU_FUZZ_STANDALONE: random inputs for a bounded time).
 */
#ifndef FASTGLU_FUZZ_COMMON_H
#define FASTGLU_FUZZ_COMMON_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "convert.h"
#include "fastglu.h"

typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader;

/* The input's next byte, or 0 once it is used up. */
static unsigned next(reader *r) {
    if (r->n == 0) return 0;
    r->n--;
    return *r->p++;
}

/* Elements spanned by [rows, cols] with strides (rs, cs), or 0 for an empty or negative one. */
static int64_t span(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
    if (rows <= 0 || cols <= 0 || rs < 0 || cs < 0) return 0;
    return (rows - 1) * rs + (cols - 1) * cs + 1;
}

/* ---- typed access ----------------------------------------------------------------------- */

static inline double fp8_value(uint8_t b) {
    const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
    double v = (e == 15 && m == 7) ? NAN
               : e == 0            ? ldexp(m / 8.0, -6)
                                   : ldexp(1.0 + m / 8.0, e - 7);
    return s ? -v : v;
}

/* x cast to e4m3fn as torch's .to(torch.float8_e4m3fn): the nearest finite code by magnitude (codes
 * 0x00 .. 0x7e ascend), the even one on a tie, 448 at or above it; NaN -> 0x7f with x's sign. */
static inline uint8_t ref_e4m3(double x) {
    const uint8_t sign = signbit(x) ? 0x80 : 0x00;
    if (isnan(x)) return sign | 0x7f;
    const double a = fabs(x);
    if (a >= 448.0) return sign | 0x7e;
    int lo = 0, hi = 0x7e; /* value(lo) <= a < value(hi) */
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (fp8_value((uint8_t)mid) <= a)
            lo = mid;
        else
            hi = mid;
    }
    const double below = a - fp8_value((uint8_t)lo), above = fp8_value((uint8_t)hi) - a;
    return sign | (uint8_t)(below < above ? lo : above < below ? hi : (lo % 2 == 0 ? lo : hi));
}

static inline int valid_dtype(int dt) { return dt >= 0 && dt <= 2; }

static inline double load(int dt, const void *p, int64_t i) {
    switch (dt) {
    case FASTGLU_DTYPE_FP32: return ((const float *)p)[i];
    case FASTGLU_DTYPE_FP16: return fp16_to_f32(((const uint16_t *)p)[i]);
    case FASTGLU_DTYPE_BF16: return bf16_to_f32(((const uint16_t *)p)[i]);
    case FASTGLU_DTYPE_FP8_E4M3: return fp8_value(((const uint8_t *)p)[i]);
    }
    return NAN;
}

static inline void store(int dt, void *p, int64_t i, double v) {
    switch (dt) {
    case FASTGLU_DTYPE_FP32: ((float *)p)[i] = (float)v; break;
    case FASTGLU_DTYPE_FP16: ((uint16_t *)p)[i] = f32_to_fp16((float)v); break;
    case FASTGLU_DTYPE_BF16: ((uint16_t *)p)[i] = f32_to_bf16((float)v); break;
    case FASTGLU_DTYPE_FP8_E4M3:
        ((uint8_t *)p)[i] = (uint8_t)(fabs(v) < 1e6 ? (int)(v * 8) : 0x7f);
        break;
    default:
        ((uint16_t *)p)[i] = (uint16_t)(fabs(v) < 1e6 ? (int)(v * 64) : 1);
        break; /* any bits */
    }
}

/* bytes per element as the harness lays buffers out (an invalid dtype: 2) */
static inline size_t esize(int dt) { return dt == 0 ? 4 : dt == 3 ? 1 : 2; }

/* ---- buffers ----------------------------------------------------------------------------- */

typedef struct buf {
    unsigned char *p, *before, *mask; /* mask: 1 per element this call may write */
    int64_t n;                        /* elements */
    size_t es;
} buf;

static inline void buf_make(buf *b, int64_t n, size_t es) {
    b->n = n > 0 ? n : 0;
    b->es = es;
    b->p = malloc((size_t)b->n * es + 1);
    b->before = malloc((size_t)b->n * es + 1);
    b->mask = calloc((size_t)b->n + 1, 1);
}

static inline void buf_snap(buf *b) { memcpy(b->before, b->p, (size_t)b->n * b->es + 1); }

static inline void buf_free(buf *b) {
    free(b->p), free(b->before), free(b->mask);
    memset(b, 0, sizeof *b);
}

static inline void mark(buf *b, int64_t off, int64_t rows, int64_t cols, int64_t rs) {
    for (int64_t t = 0; t < rows; ++t)
        for (int64_t j = 0; j < cols; ++j) {
            const int64_t e = off + t * rs + j;
            if (e < 0 || e >= b->n) abort(); /* the harness's own geometry is wrong */
            b->mask[e] = 1;
        }
}

/* every byte outside the marked elements (and the spare byte) unchanged */
static inline void check_unmarked(const buf *b) {
    if (!b->p) return;
    for (int64_t e = 0; e < b->n; ++e)
        if (!b->mask[e] && memcmp(b->p + e * b->es, b->before + e * b->es, b->es) != 0) abort();
    if (b->p[b->n * b->es] != b->before[b->n * b->es]) abort();
}

static inline void check_unchanged(const buf *b) {
    if (b->p && memcmp(b->p, b->before, (size_t)b->n * b->es + 1) != 0) abort();
}

/* A stride: derived from the natural one `base`, sometimes zero or too small. */
static inline int64_t pick_stride(reader *r, int64_t base) {
    switch (next(r) % 7) {
    case 0:
    case 6: return base;
    case 1: return base + (int64_t)(next(r) % 9);
    case 2: return 0;
    case 3: return base > 0 ? base - 1 : 0;
    case 4: return base * 2 + 1;
    default: return base + 8;
    }
}

/* ---- the FP8 copy's harnesses (fuzz_fp8_store.c, fuzz_glu_fp8_saved.c) -------------------- */

/* A dimension of 0 .. 200, block boundaries (127, 128, 129, 255, 256, 257) often. */
static inline int64_t pick_dim(reader *r) {
    if (next(r) % 16 == 0) return 0;
    if (next(r) % 3 == 0) return 128 * (int64_t)(next(r) % 2 + 1) + (int64_t)(next(r) % 3) - 1;
    return 1 + (int64_t)(next(r) % 200);
}

/* The family's params with a layout (*il: interleaved; *two: split with two tensors, else one
 * [T, 2F] row; an invalid code sometimes), an activation (an invalid one sometimes), a clamp (none,
 * small, 7, +inf, 500, NaN) and sometimes an offset. */
static inline fastglu_glu_params pick_glu_params(reader *r, int *il, int *two) {
    const unsigned lsel = next(r) % 16;
    const int bad_layout = lsel == 15;
    *il = lsel >= 10 && lsel < 15;
    *two = !*il && lsel % 2;
    fastglu_glu_params p = fastglu_glu_params_default((fastglu_activation)(next(r) % 3));
    if (next(r) % 32 == 0) p.activation = (fastglu_activation)7;
    p.layout = bad_layout ? (fastglu_layout)5
               : *il      ? FASTGLU_LAYOUT_INTERLEAVED
                          : FASTGLU_LAYOUT_SPLIT;
    static const float clamps[] = {0.0f, 0.0f, 0.0f, 7.0f, 0.3f, INFINITY, 500.0f, NAN};
    p.clamp_value = clamps[next(r) % 8];
    if (next(r) % 8 == 0) p.glu_linear_offset = 1.0f;
    return p;
}

/* A tensor given to the call: its buffer (each its own allocation: an offset before it, the
 * stride's padding), the element offset, the row stride and the pointer passed. */
typedef struct arg {
    buf b;
    int64_t off, rs;
    void *ptr;
} arg;

/* p in a's buffer, moved to the same place in copy */
static inline void *moved(const arg *a, const unsigned char *copy, const void *p) {
    return p ? (void *)(copy + ((const unsigned char *)p - a->b.p)) : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifdef FASTGLU_FUZZ_STANDALONE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Runs the harness on random inputs of min_len .. cap - 1 bytes (a 64-bit LCG from the seed, argv[2]
 * or the time) for argv[1] seconds (default 10); prints the seed first; returns the inputs run. */
static long fuzz_standalone(const char *name, int argc, char **argv, uint8_t *buf, size_t cap,
                            size_t min_len) {
    const double seconds = argc > 1 ? atof(argv[1]) : 10.0;
    uint64_t s = argc > 2 ? strtoull(argv[2], NULL, 0) : (uint64_t)time(NULL);
    printf("%s: %.0f s, seed %llu\n", name, seconds, (unsigned long long)s);
    const clock_t end = clock() + (clock_t)(seconds * CLOCKS_PER_SEC);
    long runs = 0;
    while (clock() < end) {
        size_t n = min_len + (size_t)(s >> 33) % (cap - min_len);
        for (size_t i = 0; i < n; ++i) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            buf[i] = (uint8_t)(s >> 56);
        }
        LLVMFuzzerTestOneInput(buf, n);
        runs++;
    }
    return runs;
}
#endif

#endif /* FASTGLU_FUZZ_COMMON_H */
