/*
 * ab_swiglu.c — A/B of two libfastglu builds' SwiGLU (fastglu_swiglu_fwd_cuda /
 * fastglu_swiglu_bwd_cuda, whose signatures every version shares) in one process: both libraries
 * are dlopen'ed, and each (mode, F) is timed on both in rotating rounds (round r starts with
 * library r % 2), so that clocks and the machine's state fall on both alike. bf16, tokens = 8192
 * (the seed shape's S * B), the 13 widths of `python -m fastglu.bench`'s sweep by default. Modes:
 * fwd (forward), bwd (dy [T, F]), bwd_scalar (dy an expanded scalar: strides 0, as
 * y.sum().backward()). Each launch is timed alone with CUDA events after a 256 MiB memset that
 * flushes the L2; a library's value in a round is the median of `iters` launches. Also checks that
 * both libraries write the same bits.
 *
 *   cc -O2 bench/tune/ab_swiglu.c -I$CUDA/include -L$CUDA/lib64 -lcudart -ldl -o ab_swiglu
 *   ./ab_swiglu LIB_A LIB_B [rounds] [iters] [F ...]
 *
 * Prints per (mode, F): each library's median over rounds (ms), its spread over the rounds
 * ((max - min) / median), and B / A. scripts/ab_swiglu.sh builds the two libraries and runs it.
 */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fastglu.h"

typedef fastglu_status (*fwd_fn)(const void *, int64_t, void *, int64_t, int64_t, int64_t,
                                 fastglu_dtype, void *);
typedef fastglu_status (*bwd_fn)(const void *, int64_t, int64_t, const void *, int64_t, void *,
                                 int64_t, int64_t, int64_t, fastglu_dtype, void *);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

typedef struct lib {
    const char *path;
    fwd_fn fwd;
    bwd_fn bwd;
} lib;

static void load(lib *l, const char *path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        exit(1);
    }
    l->path = path;
    l->fwd = (fwd_fn)dlsym(h, "fastglu_swiglu_fwd_cuda");
    l->bwd = (bwd_fn)dlsym(h, "fastglu_swiglu_bwd_cuda");
    if (!l->fwd || !l->bwd) {
        fprintf(stderr, "%s: no fastglu_swiglu_*_cuda\n", path);
        exit(1);
    }
}

enum { MODES = 3 };
static const char *mode_names[MODES] = {"fwd", "bwd", "bwd_scalar"};

typedef struct bufs {
    void *x, *y, *dy, *dx, *flush;
    int64_t T, F;
} bufs;

static void run(const lib *l, const bufs *b, int mode) {
    const int64_t T = b->T, F = b->F;
    fastglu_status st;
    if (mode == 0)
        st = l->fwd(b->x, 2 * F, b->y, F, T, F, FASTGLU_DTYPE_BF16, NULL);
    else if (mode == 1)
        st = l->bwd(b->dy, F, 1, b->x, 2 * F, b->dx, 2 * F, T, F, FASTGLU_DTYPE_BF16, NULL);
    else
        st = l->bwd(b->dy, 0, 0, b->x, 2 * F, b->dx, 2 * F, T, F, FASTGLU_DTYPE_BF16, NULL);
    if (st != FASTGLU_SUCCESS) {
        fprintf(stderr, "%s: status %d\n", l->path, (int)st);
        exit(1);
    }
}

static int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}
static float median(float *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_float);
    return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}

#define FLUSH_BYTES (256u << 20)

static float time_one(const lib *l, const bufs *b, int mode, int iters, cudaEvent_t e0,
                      cudaEvent_t e1) {
    float *t = (float *)malloc(sizeof(float) * (size_t)iters);
    for (int i = 0; i < 3; ++i) run(l, b, mode); /* warm-up */
    for (int i = 0; i < iters; ++i) {
        CHECK(cudaMemsetAsync(b->flush, i & 0xff, FLUSH_BYTES, 0));
        CHECK(cudaEventRecord(e0, 0));
        run(l, b, mode);
        CHECK(cudaEventRecord(e1, 0));
        CHECK(cudaEventSynchronize(e1));
        CHECK(cudaEventElapsedTime(&t[i], e0, e1));
    }
    const float m = median(t, iters);
    free(t);
    return m;
}

/* 1 when both libraries write the same bytes for this mode. */
static int same_bits(const lib *a, const lib *b, const bufs *bf, int mode) {
    const size_t n = (size_t)bf->T * (size_t)(mode == 0 ? bf->F : 2 * bf->F) * 2;
    void *out = mode == 0 ? bf->y : bf->dx;
    unsigned char *ha = (unsigned char *)malloc(n), *hb = (unsigned char *)malloc(n);
    CHECK(cudaMemset(out, 0x7f, n));
    run(a, bf, mode);
    CHECK(cudaMemcpy(ha, out, n, cudaMemcpyDeviceToHost));
    CHECK(cudaMemset(out, 0x7f, n));
    run(b, bf, mode);
    CHECK(cudaMemcpy(hb, out, n, cudaMemcpyDeviceToHost));
    const int same = memcmp(ha, hb, n) == 0;
    free(ha), free(hb);
    return same;
}

/* Random bf16 values in about [-8, 8). */
static void fill(void *d, size_t n, uint64_t seed) {
    uint16_t *h = (uint16_t *)malloc(n * 2);
    for (size_t i = 0; i < n; ++i) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        const float v = (float)((seed >> 40) & 0xffff) / 4096.0f - 8.0f;
        uint32_t u;
        memcpy(&u, &v, 4);
        h[i] = (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
    }
    CHECK(cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice));
    free(h);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s LIB_A LIB_B [rounds] [iters] [F ...]\n", argv[0]);
        return 2;
    }
    lib libs[2];
    load(&libs[0], argv[1]);
    load(&libs[1], argv[2]);
    const int rounds = argc > 3 ? atoi(argv[3]) : 5, iters = argc > 4 ? atoi(argv[4]) : 30;
    static const int64_t sweep[] = {1024, 1408,  2048,  3420,  3584,  4096, 5632,
                                    8192, 11008, 14336, 16384, 28672, 32768};
    int64_t widths[64];
    int nw = 0;
    for (int i = 5; i < argc && nw < 64; ++i) widths[nw++] = atoll(argv[i]);
    if (nw == 0) {
        nw = (int)(sizeof sweep / sizeof sweep[0]);
        memcpy(widths, sweep, sizeof sweep);
    }
    const int64_t T = 8192;
    int64_t fmax = 0;
    for (int i = 0; i < nw; ++i) fmax = widths[i] > fmax ? widths[i] : fmax;
    bufs b;
    b.T = T;
    CHECK(cudaMalloc(&b.x, (size_t)(T * 2 * fmax * 2)));
    CHECK(cudaMalloc(&b.y, (size_t)(T * fmax * 2)));
    CHECK(cudaMalloc(&b.dy, (size_t)(T * fmax * 2)));
    CHECK(cudaMalloc(&b.dx, (size_t)(T * 2 * fmax * 2)));
    CHECK(cudaMalloc(&b.flush, FLUSH_BYTES));
    fill(b.x, (size_t)(T * 2 * fmax), 0x9E3779B97F4A7C15ull);
    fill(b.dy, (size_t)(T * fmax), 0xD1B54A32D192ED03ull);
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    float *ms = (float *)calloc((size_t)(MODES * nw * 2 * rounds), sizeof(float));
#define MS(m, w, l, r) ms[(((size_t)(m) * nw + (w)) * 2 + (l)) * rounds + (r)]
    int all_same = 1;
    for (int w = 0; w < nw; ++w) {
        b.F = widths[w];
        for (int m = 0; m < MODES; ++m) {
            const int same = same_bits(&libs[0], &libs[1], &b, m);
            all_same &= same;
            if (!same) printf("bits differ: %s F = %lld\n", mode_names[m], (long long)b.F);
        }
    }
    printf("A = %s\nB = %s\nbits: %s\n", argv[1], argv[2],
           all_same ? "the same for every cell" : "DIFFER (above)");
    for (int r = 0; r < rounds; ++r)
        for (int w = 0; w < nw; ++w) {
            b.F = widths[w];
            for (int m = 0; m < MODES; ++m)
                for (int k = 0; k < 2; ++k) {
                    const int l = (k + r) % 2; /* round r starts with library r % 2 */
                    MS(m, w, l, r) = time_one(&libs[l], &b, m, iters, e0, e1);
                }
        }
    printf(
        "bf16, tokens %lld, %d rounds x %d launches (median of the launches per round; median and "
        "spread (max - min) / median over the rounds)\n",
        (long long)T, rounds, iters);
    printf("%-10s %6s %10s %7s %10s %7s %7s\n", "mode", "F", "A ms", "spread", "B ms", "spread",
           "B/A");
    for (int m = 0; m < MODES; ++m)
        for (int w = 0; w < nw; ++w) {
            float med[2], spread[2];
            for (int l = 0; l < 2; ++l) {
                float v[64], lo = 1e30f, hi = 0.0f;
                for (int r = 0; r < rounds && r < 64; ++r) {
                    v[r] = MS(m, w, l, r);
                    lo = v[r] < lo ? v[r] : lo, hi = v[r] > hi ? v[r] : hi;
                }
                med[l] = median(v, rounds < 64 ? rounds : 64);
                spread[l] = (hi - lo) / med[l];
            }
            printf("%-10s %6lld %10.4f %6.2f%% %10.4f %6.2f%% %7.4f\n", mode_names[m],
                   (long long)widths[w], med[0], 100 * spread[0], med[1], 100 * spread[1],
                   med[1] / med[0]);
        }
    return all_same ? 0 : 1;
}
