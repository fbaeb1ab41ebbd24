/* tests/emu/gemm_emu.cpp — the CUDA general GEMM kernel of src/gemm_cuda.cu compiled as host C++
 * (tests/emu/shim stands in for the CUDA headers) and run block by block, each block's 256 threads
 * as coroutines that switch at __syncthreads() (tests/emu/emu_threads.h), so that the
 * shared-memory tiles, the barriers and every index are exercised on machines without a GPU (CI).
 * The entry points fastglu_linear_cuda / fastglu_linear_glu_fwd_cuda / fastglu_linear_dglu_bwd_cuda
 * (its gemm_dglu_kernel) run through it against the float64 reference of tests/c/gemm_reference.c
 * (host memory stands in for device memory). */
#include <vector>

#define FASTGLU_HOST_EMULATION 1
#define __shared__ static
#include "cuda_runtime.h"
#include "emu_threads.h"

#include "gemm_cuda.cu"

extern "C" {
#include "gemm_reference.h"
}

/* ---- the kernels' launches: each block's threads as coroutines (emu_threads.h) --------------- */

template <typename T, int GLU> static void run_kernel(void **args) {
    gemm_general_kernel<T, GLU>(*(const gemm_args *)args[0]);
}
template <typename T> static void run_dglu_kernel(void **args) {
    gemm_dglu_kernel<T>(*(const dglu_args *)args[0]);
}

static long launches;
cudaError_t cudaLaunchKernel(const void *f, dim3 grid, dim3 block, void **args, size_t,
                             cudaStream_t) {
    emu_body body;
    if (f == (const void *)gemm_general_kernel<float, 0>)
        body = run_kernel<float, 0>;
    else if (f == (const void *)gemm_general_kernel<float, 1>)
        body = run_kernel<float, 1>;
    else if (f == (const void *)gemm_general_kernel<__half, 0>)
        body = run_kernel<__half, 0>;
    else if (f == (const void *)gemm_general_kernel<__half, 1>)
        body = run_kernel<__half, 1>;
    else if (f == (const void *)gemm_general_kernel<__nv_bfloat16, 0>)
        body = run_kernel<__nv_bfloat16, 0>;
    else if (f == (const void *)gemm_general_kernel<__nv_bfloat16, 1>)
        body = run_kernel<__nv_bfloat16, 1>;
    else if (f == (const void *)gemm_dglu_kernel<float>)
        body = run_dglu_kernel<float>;
    else if (f == (const void *)gemm_dglu_kernel<__half>)
        body = run_dglu_kernel<__half>;
    else if (f == (const void *)gemm_dglu_kernel<__nv_bfloat16>)
        body = run_dglu_kernel<__nv_bfloat16>;
    else
        return cudaErrorInvalidValue;
    launches++;
    emu_run_blocks(body, args, grid, block, NULL);
    return cudaSuccess;
}
cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *, const void *, void **) {
    return cudaErrorInvalidValue; /* not used by gemm_cuda.cu */
}

static fastglu_status linear(fastglu_tensor x, fastglu_tensor w, fastglu_tensor b, fastglu_tensor o,
                             int64_t T, int64_t K, int64_t N) {
    return fastglu_linear_cuda(x, w, b, o, T, K, N, NULL);
}
static fastglu_status linear_glu(const fastglu_glu_params *p, fastglu_tensor x, fastglu_tensor w1,
                                 fastglu_tensor b, fastglu_tensor wt, fastglu_tensor h,
                                 fastglu_tensor y, int64_t T, int64_t H, int64_t F) {
    return fastglu_linear_glu_fwd_cuda(p, x, w1, b, wt, h, y, T, H, F, NULL);
}
static fastglu_status linear_dglu(const fastglu_glu_params *p, fastglu_tensor d_out,
                                  fastglu_tensor w2, fastglu_tensor h, fastglu_tensor wt,
                                  fastglu_tensor dh, fastglu_tensor y, fastglu_tensor dw, int64_t T,
                                  int64_t H, int64_t F) {
    return fastglu_linear_dglu_bwd_cuda(p, d_out, w2, h, wt, dh, y, dw, T, H, F, NULL);
}
static void *host_alloc(size_t n) { return malloc(n ? n : 1); }
static void host_copy(void *dst, const void *src, size_t n) {
    if (n) memcpy(dst, src, n);
}
static void host_sync(void) {}

int main(void) {
    /* no fastglu_glu_fwd to compare y with bit for bit: the GPU's math runs here with host
     * stand-ins for its special-function unit */
    const gemm_backend b = {"cuda general kernel, host emulation",
                            linear,
                            linear_glu,
                            NULL,
                            host_alloc,
                            free,
                            host_copy,
                            host_copy,
                            host_sync,
                            linear_dglu};
    /* tiles cut at 64 tokens, 64 columns and 16 values of k: shapes on both sides of each */
    static const gemm_shape shapes[] = {
        {1, 8, 1}, {3, 17, 3}, {65, 37, 70}, {2, 0, 5}, {70, 33, 129}};
    gemm_seed("test_gemm_emulation");
    int failed = run_gemm_suite(&b, shapes, 5, 7, ~0u);
    failed += run_gemm_errors(&b);
    /* fc2 dgrad + dGLU: tiles of 64 tokens, 64 columns of F, 16 values of k; F = 0 with dweights */
    static const gemm_shape dglu_shapes[] = {{1, 8, 1}, {3, 17, 3},    {65, 37, 70},
                                             {2, 0, 5}, {70, 33, 129}, {3, 5, 0}};
    failed += run_dglu_suite(&b, dglu_shapes, 6, 7, ~0u);
    failed += run_dglu_errors(&b);
    failed += run_dglu_determinism(&b, dglu_shapes + 4, 1, NULL, 0);
    printf("%ld launches, %ld blocks emulated, %ld barriers\n", launches, emu_blocks_run,
           emu_barriers);
    return failed || launches == 0 ? 1 : 0;
}
