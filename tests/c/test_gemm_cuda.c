/* test_gemm_cuda.c — the linear layers' CUDA backend (fastglu_linear_cuda,
 * fastglu_linear_glu_fwd_cuda) against the float64 reference of tests/c/gemm_reference.c, on a
 * non-default stream, twice: with the kernel the library picks (the sm_90a TMA + wgmma kernel where
 * it takes the problem) and with the general kernel forced (fastglu_debug_set_gemm_fallback).
 * Each: every variant and dtype at small odd shapes, the odd shapes (T = 1, 3, 8193;
 * F = 1408, 2880, 5632; H = 2880; rows sampled for the reference where large), aligned shapes the
 * sm_90 kernel takes, bad input; determinism run to run under both kernels. fc2 dgrad + dGLU
 * (fastglu_linear_dglu_bwd_cuda) the same way: the variants at odd shapes, the shapes,
 * aligned shapes the sm_90a kernel takes (SPLIT, no dweights; INTERLEAVED and dweights run the
 * general kernel), bad input, determinism under both kernels. Exits 77 (CTest:
 * skipped) when no CUDA device is usable. FASTGLU_TEST_QUICK set: without T = 8193.
 * FASTGLU_TEST_SANITIZE set (for compute-sanitizer, which runs kernels 10-100x slower): the small
 * suites, one aligned shape per operation for the sm_90a kernels, bad input and determinism at
 * T = 3 only. */
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "gemm_reference.h"
#include "glu_flat.h"

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
static void dev_upload(void *dst, const void *src, size_t n) {
    check(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream), "H2D");
    check(cudaStreamSynchronize(stream), "H2D");
}
static void dev_download(void *dst, const void *src, size_t n) {
    check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, stream), "D2H");
    check(cudaStreamSynchronize(stream), "D2H");
}
static void dev_sync(void) { check(cudaStreamSynchronize(stream), "kernel"); }

static fastglu_status linear(fastglu_tensor x, fastglu_tensor w, fastglu_tensor b, fastglu_tensor o,
                             int64_t T, int64_t K, int64_t N) {
    return fastglu_linear_cuda(x, w, b, o, T, K, N, stream);
}
static fastglu_status linear_glu(const fastglu_glu_params *p, fastglu_tensor x, fastglu_tensor w1,
                                 fastglu_tensor b, fastglu_tensor wt, fastglu_tensor h,
                                 fastglu_tensor y, int64_t T, int64_t H, int64_t F) {
    return fastglu_linear_glu_fwd_cuda(p, x, w1, b, wt, h, y, T, H, F, stream);
}
static fastglu_status glu_fwd(const fastglu_glu_params *p, const void *gate, int64_t gate_rs,
                              const void *up, int64_t up_rs, const void *bias, const void *weights,
                              fastglu_dtype wdt, int64_t ws, void *out, int64_t out_rs,
                              void *saved_fp8, int64_t saved_fp8_rs, int64_t T, int64_t F,
                              fastglu_dtype dt) {
    return glu_fwd_cuda_flat(p, gate, gate_rs, up, up_rs, bias, weights, wdt, ws, out, out_rs,
                             saved_fp8, saved_fp8_rs, T, F, dt, stream);
}

static fastglu_status linear_dglu(const fastglu_glu_params *p, fastglu_tensor d_out,
                                  fastglu_tensor w2, fastglu_tensor h, fastglu_tensor wt,
                                  fastglu_tensor dh, fastglu_tensor y, fastglu_tensor dw, int64_t T,
                                  int64_t H, int64_t F) {
    return fastglu_linear_dglu_bwd_cuda(p, d_out, w2, h, wt, dh, y, dw, T, H, F, stream);
}

static void set_path(int k) { fastglu_debug_set_gemm_fallback(k == 1); }

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* each suite's line reaches a log even if the run is cut */
    if (!fastglu_cuda_available()) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    struct cudaDeviceProp prop;
    check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    gemm_backend b = {"cuda",   linear,     linear_glu,   glu_fwd,  dev_alloc,
                      dev_free, dev_upload, dev_download, dev_sync, linear_dglu};
    static const gemm_shape dglu_small[] = {{1, 7, 1}, {3, 37, 3}, {257, 33, 1408},
                                            {3, 0, 5}, {3, 5, 0},  {67, 136, 200}};
    static const gemm_shape dglu_odd[] = {{1, 2880, 1408}, {3, 2880, 2880}, {8193, 2880, 5632}};
    static const gemm_shape dglu_aligned[] = {
        {256, 512, 384}, {1024, 4096, 1408}, {136, 2880, 264}};
    static const gemm_shape small[] = {{1, 8, 1}, {3, 8, 3},      {5, 37, 130},  {2, 1, 4},
                                       {3, 0, 5}, {257, 8, 1408}, {67, 136, 200}};
    static const gemm_shape odd[] = {{1, 2880, 1408}, {3, 2880, 2880}, {8193, 2880, 5632}};
    static const gemm_shape aligned[] = {{256, 512, 384}, {1024, 4096, 1408}};
    const int sanitize = getenv("FASTGLU_TEST_SANITIZE") != NULL;
    const int n_odd = sanitize ? 0 : getenv("FASTGLU_TEST_QUICK") ? 2 : 3;
    const int n_aligned = sanitize ? 1 : 2, n_dglu_aligned = sanitize ? 1 : 3;
    gemm_seed("test_gemm_cuda");
    int failed = 0;
    for (int path = 0; path < 2; ++path) {
        set_path(path);
        b.name = path ? "cuda (general kernel)" : "cuda (kernel of choice)";
        failed += run_gemm_suite(&b, small, 7, 7, ~0u);
        /* the shapes: the plain linear with bias, SwiGLU with bias, the interleaved
         * variant with everything; bf16 and fp16 */
        failed += run_gemm_suite(&b, odd, n_odd, 6, (1u << 1) | (1u << 3) | (1u << 5));
        failed += run_gemm_suite(&b, aligned, n_aligned, 6, ~0u);
        failed += run_gemm_errors(&b);
        failed += run_dglu_suite(&b, dglu_small, 6, 7, ~0u);
        /* SwiGLU, GELU_TANH with weights, the interleaved variant with everything; bf16, fp16 */
        failed += run_dglu_suite(&b, dglu_odd, n_odd, 6, (1u << 2) | (1u << 4) | (1u << 5));
        failed += run_dglu_suite(&b, dglu_aligned + (sanitize ? 2 : 0), n_dglu_aligned, 6, ~0u);
        failed += run_dglu_errors(&b);
    }
    set_path(0);
    b.name = "cuda";
    const int n_det = sanitize ? 1 : n_odd - 1; /* from (3, 2880, 2880) */
    failed += run_gemm_determinism(&b, odd + 1, n_det, set_path, 2);
    failed += run_dglu_determinism(&b, dglu_odd + 1, n_det, set_path, 2);
    check(cudaStreamDestroy(stream), "cudaStreamDestroy");
    return failed ? 1 : 0;
}
