/* test_glu_cuda.c — the gated-linear-unit family's CUDA backend (fastglu_glu_*_cuda) against the
 * float64 reference of tests/c/glu_reference.c (the same suite as the CPU backend's), on a
 * non-default stream; the fp8 decoder on all 256 codes; the forward's fp8 copy on every bf16 / fp16
 * bit pattern; parameter edge cases; the clamp's edges (its bound in the dtype, the fp8 copy under a
 * clamp, refused clamps); and determinism:
 * bitwise-identical d_gate, d_up, dbias and dweights run to run and across launch configurations
 * (fastglu_debug_set_max_blocks(0), (1), (7), and the general kernels in place of the specialised
 * ones); the specialised kernels bitwise against the general ones on every case. Exits 77 (CTest: skipped) when no CUDA device is
 * usable.
 *
 * SwiGLU's entry points (fastglu_swiglu_*_cuda) are tested as the family's SiLU case (--swiglu).
 *
 *   test_glu_cuda            the family (FASTGLU_TEST_QUICK set: without the sentinel sweep)
 *   test_glu_cuda --swiglu   fastglu_swiglu_*_cuda: the family's bits (and with gate and up as two
 *                            tensors, interleaved), the float64 reference, the sentinel, and the
 *                            wrappers' sentinel sweep (FASTGLU_TEST_QUICK set: without the sweep)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "glu_reference.h"
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
/* Copies on the tests' stream and waits: a plain cudaMemcpy from pageable memory may return before
 * its DMA lands, and the non-blocking stream would not wait for it. */
static void dev_upload(void *dst, const void *src, size_t n) {
    if (!n) return;
    check(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync H2D");
    check(cudaStreamSynchronize(stream), "H2D");
}
static void dev_download(void *dst, const void *src, size_t n) {
    if (!n) return;
    check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync D2H");
    check(cudaStreamSynchronize(stream), "D2H");
}
static void dev_sync(void) { check(cudaStreamSynchronize(stream), "kernel"); }

static fastglu_status fwd(const fastglu_glu_params *p, const void *gate, int64_t gate_rs,
                          const void *up, int64_t up_rs, const void *bias, const void *weights,
                          fastglu_dtype wdt, int64_t ws, void *out, int64_t out_rs, void *saved_fp8,
                          int64_t saved_fp8_rs, int64_t T, int64_t F, fastglu_dtype dt) {
    return glu_fwd_cuda_flat(p, gate, gate_rs, up, up_rs, bias, weights, wdt, ws, out, out_rs,
                             saved_fp8, saved_fp8_rs, T, F, dt, stream);
}

static fastglu_status bwd(const fastglu_glu_params *p, const void *dy, int64_t dy_rs, int64_t dy_cs,
                          const void *gate, int64_t gate_rs, const void *up, int64_t up_rs,
                          fastglu_dtype in_dt, const float *scale, int64_t scale_stride,
                          int scale_1x128, const void *bias, const void *weights, fastglu_dtype wdt,
                          int64_t wst, void *d_gate, int64_t d_gate_rs, void *d_up, int64_t d_up_rs,
                          void *dbias, void *dweights, void *workspace, size_t workspace_bytes,
                          int64_t T, int64_t F, fastglu_dtype dt) {
    return glu_bwd_cuda_flat(p, dy, dy_rs, dy_cs, gate, gate_rs, up, up_rs, in_dt, scale,
                             scale_stride, scale_1x128, bias, weights, wdt, wst, d_gate, d_gate_rs,
                             d_up, d_up_rs, dbias, dweights, workspace, workspace_bytes, T, F, dt,
                             stream);
}

/* launch configurations for the determinism check: the default grid, one block, seven blocks, and
 * the general kernels where the specialised ones would run */
static void set_grid(int k) {
    static const int64_t caps[] = {0, 1, 7, 0};
    fastglu_debug_set_max_blocks(caps[k]);
    fastglu_debug_set_generic_kernels(k == 3);
}
static void set_generic(int on) { fastglu_debug_set_generic_kernels(on); }

static fastglu_status swiglu_fwd(const void *in, int64_t in_rs, void *out, int64_t out_rs,
                                 int64_t T, int64_t F, fastglu_dtype dt) {
    return fastglu_swiglu_fwd_cuda(in, in_rs, out, out_rs, T, F, dt, stream);
}
static fastglu_status swiglu_bwd(const void *dy, int64_t dy_rs, int64_t dy_cs, const void *in,
                                 int64_t in_rs, void *din, int64_t din_rs, int64_t T, int64_t F,
                                 fastglu_dtype dt) {
    return fastglu_swiglu_bwd_cuda(dy, dy_rs, dy_cs, in, in_rs, din, din_rs, T, F, dt, stream);
}

int main(int argc, char **argv) {
    if (!fastglu_cuda_available()) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    struct cudaDeviceProp prop;
    check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    const glu_backend b = {"cuda",   fwd,        bwd,          dev_alloc,
                           dev_free, dev_upload, dev_download, dev_sync};
    const int quick = getenv("FASTGLU_TEST_QUICK") != NULL;
    int failed;
    if (argc > 1 && strcmp(argv[1], "--swiglu") == 0) {
        const glu_swiglu_entry sw = {swiglu_fwd, swiglu_bwd};
        failed = run_glu_swiglu(&b, &sw) + (quick ? 0 : run_glu_swiglu_sentinel_sweep(&b, &sw));
        check(cudaStreamDestroy(stream), "cudaStreamDestroy");
        return failed ? 1 : 0;
    }
    failed = run_glu_fp8_exact(&b) + run_glu_fp8_store_exact(&b) + run_glu_param_edges(&b) +
             run_glu_clamp_edges(&b) + run_glu_determinism(&b, set_grid, 4) +
             run_glu_paths_agree(&b, set_generic) + run_glu_suite(&b);
    if (!quick) failed += run_glu_sentinel_sweep(&b);
    fastglu_debug_set_max_blocks(0);
    check(cudaStreamDestroy(stream), "cudaStreamDestroy");
    return failed ? 1 : 0;
}
