/* test_swiglu_cuda.c — the CUDA backend against the float64 reference (tests/c/reference.c), on a
 * non-default stream. Exits 77 (CTest: skipped) when no CUDA device is usable. */
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "reference.h"

static cudaStream_t stream;

static void check(cudaError_t err, const char *what) {
    if (err != cudaSuccess) {
        fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(err));
        exit(1);
    }
}

static void *dev_alloc(size_t n) {
    void *p = NULL;
    check(cudaMalloc(&p, n ? n : 1), "cudaMalloc");
    return p;
}
static void dev_free(void *p) { check(cudaFree(p), "cudaFree"); }
/* Copies on the tests' stream and waits: a plain cudaMemcpy from pageable memory may return before
 * its DMA lands, and the non-blocking stream would not wait for it. */
static void dev_upload(void *dst, const void *src, size_t n) {
    check(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync H2D");
    check(cudaStreamSynchronize(stream), "H2D");
}
static void dev_download(void *dst, const void *src, size_t n) {
    check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync D2H");
    check(cudaStreamSynchronize(stream), "D2H");
}
static void dev_sync(void) { check(cudaStreamSynchronize(stream), "kernel"); }

static fastglu_status fwd(const void *in, int64_t in_rs, void *out, int64_t out_rs, int64_t T,
                          int64_t F, fastglu_dtype dt) {
    return fastglu_swiglu_fwd_cuda(in, in_rs, out, out_rs, T, F, dt, stream);
}
static fastglu_status bwd(const void *dy, int64_t dy_rs, int64_t dy_cs, const void *in,
                          int64_t in_rs, void *din, int64_t din_rs, int64_t T, int64_t F,
                          fastglu_dtype dt) {
    return fastglu_swiglu_bwd_cuda(dy, dy_rs, dy_cs, in, in_rs, din, din_rs, T, F, dt, stream);
}

int main(void) {
    if (!fastglu_cuda_available()) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    struct cudaDeviceProp prop;
    check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    test_backend b = {"cuda", fwd, bwd, dev_alloc, dev_free, dev_upload, dev_download, dev_sync};
    /* FASTGLU_TEST_QUICK (set under compute-sanitizer, where every kernel runs far slower): the
     * suite alone, without the sentinel sweep. */
    int failed = run_swiglu_suite(&b) + (getenv("FASTGLU_TEST_QUICK") ? 0 : run_sentinel_sweep(&b));
    check(cudaStreamDestroy(stream), "cudaStreamDestroy");
    return failed ? 1 : 0;
}
