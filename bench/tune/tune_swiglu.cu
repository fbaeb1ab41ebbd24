/*
 * tune_swiglu.cu — times the library's own SwiGLU kernels (src/glu_swiglu.cuh, included, not
 * copied) through the library's own launchers with 128 and 256 threads per block and five cache
 * policies (loads: read-only path / plain / streaming; stores: plain / streaming), beside version 1
 * of the kernels, to choose FASTGLU_THREADS, FASTGLU_LOAD and FASTGLU_STORE. bf16, [T, 2F] input,
 * any F (the F list on the command line).
 *
 *   nvcc -O3 -gencode=arch=compute_90,code=sm_90 -Iinclude -Isrc bench/tune/tune_swiglu.cu \
 *        src/common.c -o tune_swiglu && ./tune_swiglu [T] [F ...]
 *
 * Timing: CUDA events around each launch, the L2 flushed (a 512 MiB memset) before each, 40 runs
 * after 5 warm-ups, median. Bytes: forward 3TF, backward with a packed dy 5TF, backward with a
 * scalar dy (y.sum().backward()) 4TF elements; floor = bytes / the copy bandwidth measured here.
 * Before each direction it also times a device-to-device copy of the same bytes (read + written),
 * whose ratio to the floor is the fixed cost (launch, ramp-up, tail) that any single pass pays at
 * that size. Prints one line per (direction, configuration) and writes nothing else.
 */
static int64_t debug_max_blocks = 0; /* glu_swiglu.cuh's grid cap: none */
#include "../../src/glu_swiglu.cuh"

namespace v1 { /* the previous kernels, timed beside the current ones */
#include "swiglu_v1.cuh"
}

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

typedef __nv_bfloat16 bf16;

typedef struct problem {
    const bf16 *x, *dy;
    bf16 *y, *dx;
    int64_t T, F;
} problem;

/* The three launches the library makes, through its own launchers, under a cache policy. */
template <int LP, int SP> static void run_fwd(const launch_plan *lp, const problem *p) {
    launch_fwd<bf16, LP, SP>(lp, 0, p->x, 2 * p->F, p->x + p->F, 2 * p->F, p->y, p->F, p->T, p->F);
}
template <int LP, int SP> static void run_bwd_dy(const launch_plan *lp, const problem *p) {
    launch_bwd<bf16, LP, SP>(lp, 0, p->dy, p->F, 1, p->x, 2 * p->F, p->x + p->F, 2 * p->F, p->dx,
                             2 * p->F, p->dx + p->F, 2 * p->F, p->T, p->F);
}
template <int LP, int SP> static void run_bwd_scalar(const launch_plan *lp, const problem *p) {
    launch_bwd<bf16, LP, SP>(lp, 0, p->dy, 0, 0, p->x, 2 * p->F, p->x + p->F, 2 * p->F, p->dx,
                             2 * p->F, p->dx + p->F, 2 * p->F, p->T, p->F);
}

typedef void (*run_fn)(const launch_plan *, const problem *);

typedef struct variant {
    const char *dir;
    int elems_per_tf; /* bytes moved = elems_per_tf * T * F * 2 */
    run_fn fn[5];     /* per cache policy, in the order of policy_name */
} variant;

static const char *policy_name[5] = {"nc/plain", "plain/plain", "cs/plain", "nc/cs", "cs/cs"};
#define POLICIES(FN)                                                                               \
    {FN<LOAD_NC, STORE_PLAIN>, FN<LOAD_PLAIN, STORE_PLAIN>, FN<LOAD_STREAM, STORE_PLAIN>,          \
     FN<LOAD_NC, STORE_STREAM>, FN<LOAD_STREAM, STORE_STREAM>}

static const variant variants[] = {{"fwd", 3, POLICIES(run_fwd)},
                                   {"bwd_dy", 5, POLICIES(run_bwd_dy)},
                                   {"bwd_scalar_dy", 4, POLICIES(run_bwd_scalar)}};

/* Version 1 through its own launch plan (2D grid, vector width from the common alignment). */
static void run_v1(const problem *p, int dir) {
    int64_t counts = p->F | 2 * p->F;
    int v = v1::pick_vector_width(sizeof(bf16),
                                  (uintptr_t)p->x | (uintptr_t)p->y | (uintptr_t)p->dx, counts);
    v1::launch_shape s;
    v1::shape_for(p->T, p->F, v, 256, 1, &s);
    if (dir == 0)
        v1::launch_fwd<bf16>(v, s, 0, p->x, 2 * p->F, p->y, p->F, p->T, p->F);
    else
        v1::launch_bwd<bf16>(v, dir == 1 ? v1::DY_PACKED : v1::DY_SCALAR, s, 0, p->dy,
                             dir == 1 ? p->F : 0, dir == 1 ? 1 : 0, p->x, 2 * p->F, p->dx, 2 * p->F,
                             p->T, p->F);
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static void *flush_buf;
static const size_t flush_bytes = (size_t)512 << 20;

/* Median ms of `launch` over 40 runs, L2 flushed before each. */
template <typename L> static float time_median(L launch) {
    enum { WARM = 5, RUNS = 40 };
    cudaEvent_t a[RUNS], b[RUNS];
    float ms[RUNS];
    for (int i = 0; i < RUNS; ++i) {
        CHECK(cudaEventCreate(&a[i]));
        CHECK(cudaEventCreate(&b[i]));
    }
    for (int i = 0; i < WARM; ++i) launch();
    for (int i = 0; i < RUNS; ++i) {
        CHECK(cudaMemsetAsync(flush_buf, i, flush_bytes));
        CHECK(cudaEventRecord(a[i]));
        launch();
        CHECK(cudaEventRecord(b[i]));
    }
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < RUNS; ++i) {
        CHECK(cudaEventElapsedTime(&ms[i], a[i], b[i]));
        CHECK(cudaEventDestroy(a[i]));
        CHECK(cudaEventDestroy(b[i]));
    }
    qsort(ms, RUNS, sizeof *ms, cmp_float);
    return ms[RUNS / 2];
}

int main(int argc, char **argv) {
    int64_t T = argc > 1 ? atoll(argv[1]) : 8192;
    int64_t Fs[16] = {8192};
    int nF = 1;
    if (argc > 2)
        for (nF = 0; nF < 16 && nF + 2 < argc; ++nF) Fs[nF] = atoll(argv[nF + 2]);
    int64_t Fmax = 0;
    for (int i = 0; i < nF; ++i) Fmax = Fs[i] > Fmax ? Fs[i] : Fmax;

    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    problem p;
    CHECK(cudaMalloc((void **)&p.x, T * 2 * Fmax * sizeof(bf16)));
    CHECK(cudaMalloc((void **)&p.dy, T * Fmax * sizeof(bf16)));
    CHECK(cudaMalloc((void **)&p.y, T * Fmax * sizeof(bf16)));
    CHECK(cudaMalloc((void **)&p.dx, T * 2 * Fmax * sizeof(bf16)));
    CHECK(cudaMalloc(&flush_buf, flush_bytes));
    void *copy_src, *copy_dst; /* room for the largest same-bytes copy: 5TF bytes each way */
    CHECK(cudaMalloc(&copy_src, 5 * T * Fmax * sizeof(bf16) / 2));
    CHECK(cudaMalloc(&copy_dst, 5 * T * Fmax * sizeof(bf16) / 2));
    CHECK(cudaMemset(copy_src, 1, 5 * T * Fmax * sizeof(bf16) / 2));
    CHECK(cudaMemset((void *)p.x, 0x3c, T * 2 * Fmax * sizeof(bf16))); /* ~0.01: finite, nonzero */
    CHECK(cudaMemset((void *)p.dy, 0x3c, T * Fmax * sizeof(bf16)));

    /* copy bandwidth: bytes read + written over the median of a large device-to-device copy */
    size_t cbytes = T * 2 * Fmax * sizeof(bf16);
    float cms =
        time_median([&] { CHECK(cudaMemcpyAsync(p.dx, p.x, cbytes, cudaMemcpyDeviceToDevice)); });
    double copy_tbps = 2.0 * cbytes / (cms * 1e-3) / 1e12;
    printf("device %s, %d SMs; copy %.3f TB/s over %.0f MB\n", prop.name, prop.multiProcessorCount,
           copy_tbps, cbytes / 1e6);
    printf("%-15s %6s %7s %12s %10s %8s %8s\n", "direction", "F", "threads", "load/store",
           "median_us", "TB/s", "x_floor");

    static const int threads[] = {128, 256};
    for (int f = 0; f < nF; ++f) {
        p.F = Fs[f];
        p.T = T;
        for (size_t v = 0; v < sizeof variants / sizeof *variants; ++v) {
            const double bytes = (double)variants[v].elems_per_tf * T * p.F * sizeof(bf16);
            const double floor_ms = bytes / (copy_tbps * 1e12) * 1e3;
            {
                /* A device-to-device copy moving the same bytes (read + written) as this direction:
                 * what a single pass over this many bytes costs, fixed overheads included. */
                size_t half = (size_t)(bytes / 2);
                float ms = time_median([&] {
                    CHECK(cudaMemcpyAsync(copy_dst, copy_src, half, cudaMemcpyDeviceToDevice));
                });
                printf("%-15s %6lld %7s %12s %10.2f %8.3f %8.3f\n", "copy_same_bytes",
                       (long long)p.F, "-", "-", ms * 1e3, bytes / (ms * 1e-3) / 1e12,
                       ms / floor_ms);
            }
            {
                const int dir = (int)v;
                float ms = time_median([&] { run_v1(&p, dir); });
                printf("%-15s %6lld %7s %12s %10.2f %8.3f %8.3f\n", variants[v].dir, (long long)p.F,
                       "256", "v1", ms * 1e3, bytes / (ms * 1e-3) / 1e12, ms / floor_ms);
            }
            for (int ti = 0; ti < 2; ++ti)
                for (int pol = 0; pol < 5; ++pol) {
                    launch_plan lp;
                    if (!plan_launch(T, p.F, sizeof(bf16), threads[ti], &lp)) continue;
                    const run_fn fn = variants[v].fn[pol];
                    float ms = time_median([&] { fn(&lp, &p); });
                    printf("%-15s %6lld %7d %12s %10.2f %8.3f %8.3f\n", variants[v].dir,
                           (long long)p.F, threads[ti], policy_name[pol], ms * 1e3,
                           bytes / (ms * 1e-3) / 1e12, ms / floor_ms);
                }
        }
    }
    return 0;
}
