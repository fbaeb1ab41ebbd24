/* tests/emu/gemm_emu.cpp — the CUDA general GEMM kernel of src/gemm_cuda.cu compiled as host C++
 * (tests/emu/shim stands in for the CUDA headers) and run block by block, each block's 256 threads
 * as coroutines that switch at __syncthreads() (tests/emu/emu_threads.h), so that the
 * shared-memory tiles, the barriers and every index are exercised on machines without a GPU (CI).
 * The entry points fastglu_linear_cuda / fastglu_linear_glu_fwd_cuda / fastglu_linear_dglu_bwd_cuda
 * (its gemm_dglu_kernel) run through it against the float64 reference of tests/c/gemm_reference.c
 * (host memory stands in for device memory). Built with FASTGLU_HAVE_GEMM_SM90 and linked with
 * tests/emu/sm90_emu.cpp (test_gemm_sm90_emulation), the entry points take the sm_90a kernel where
 * it applies, emulated there, and main runs its own shapes and forced choices. */
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

#ifdef FASTGLU_HAVE_GEMM_SM90
extern "C" int sm90_emu_report(const char *const *required, int n_required);
extern "C" long sm90_emu_launches(void);
static void set_path(int k) { fastglu_debug_set_gemm_fallback(k == 1); }
/* gemm_sm90.cu's development hooks (FASTGLU_GEMM_DEV_HOOKS): the launch's choices forced */
extern "C" void fastglu_gemm_sm90_set_tma_store(int on);
extern "C" void fastglu_gemm_sm90_set_math_mode(int mm);
extern "C" void fastglu_gemm_sm90_set_bn(int bn);
extern "C" void fastglu_gemm_sm90_set_bm(int bm);
#endif

int main(void) {
    /* no fastglu_glu_fwd to compare y with bit for bit: the GPU's math runs here with host
     * stand-ins for its special-function unit */
    gemm_backend b = {"cuda general kernel, host emulation",
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
#ifdef FASTGLU_HAVE_GEMM_SM90
    /* with the sm_90a kernel (tests/emu/sm90_emu.cpp): shapes it takes (K and F multiples of 8)
     * beside ones it leaves to the general kernel; tiles of 128 tokens and 256 columns (128 gate
     * and 128 up columns with the GLU), k-blocks of 64: partial row and column tiles, one and
     * several k-blocks, more tiles than the emulated grid's 3 blocks (the persistent order, the
     * ring of stages wrapping, the deferred GLU and dGLU epilogues carried from tile to tile: at
     * H = 576, nine k-blocks, their eight steps run in the next tile's first eight k-blocks; at
     * H = 1216, nineteen, one every two k-blocks, GEMM_DEFER_EVERY) */
    static const gemm_shape sm90_shapes[] = {{1, 8, 8},  {130, 72, 136},  {300, 200, 264},
                                             {3, 64, 5}, {130, 576, 136}, {130, 1216, 136}};
    static const gemm_shape sm90_dglu[] = {
        {1, 8, 8}, {130, 72, 136}, {257, 136, 520}, {130, 576, 264}, {130, 1216, 264}};
    gemm_seed("test_gemm_sm90_emulation");
    b.name = "sm_90a kernel, host emulation";
    int failed = run_gemm_suite(&b, sm90_shapes, 6, 6, ~0u);
    const long plain = sm90_emu_launches();
    failed += run_dglu_suite(&b, sm90_dglu, 5, 6, ~0u);
    failed += run_gemm_determinism(&b, sm90_shapes + 1, 1, set_path, 2);
    failed += run_dglu_determinism(&b, sm90_dglu + 1, 1, set_path, 2);
    /* the choices the suites' shapes do not reach: every output from registers and the general
     * math mode (MM_ANY) in every epilogue, at one and nine k-blocks; the plain GEMM's 128 x 256
     * and 192 x 192 (three consumer warpgroups) tiles */
    b.name = "sm_90a kernel, host emulation (outputs from registers, MM_ANY)";
    fastglu_gemm_sm90_set_tma_store(0);
    fastglu_gemm_sm90_set_math_mode(0);
    const gemm_shape regs[] = {sm90_shapes[1], sm90_shapes[4]};
    failed += run_gemm_suite(&b, regs, 2, 4, ~0u);
    failed += run_dglu_suite(&b, sm90_dglu + 1, 1, 4, ~0u);
    fastglu_gemm_sm90_set_tma_store(1);
    failed += run_gemm_suite(&b, regs, 1, 2, ~0u);
    failed += run_dglu_suite(&b, sm90_dglu + 1, 1, 2, ~0u);
    fastglu_gemm_sm90_set_math_mode(-1);
    for (int k = 0; k < 2; k++) {
        b.name = k ? "sm_90a kernel, host emulation (192 x 192 tiles)"
                   : "sm_90a kernel, host emulation (128 x 256 tiles)";
        fastglu_gemm_sm90_set_bn(k ? 0 : 256);
        fastglu_gemm_sm90_set_bm(k ? 192 : 0);
        failed += run_gemm_suite(&b, sm90_shapes + 2, 1, 6, 3u);
    }
    fastglu_gemm_sm90_set_bn(0);
    fastglu_gemm_sm90_set_bm(0);
    static const char *const required[] = {"plain TS 128x256",       "plain TS 128x192",
                                           "plain TS 192x192",       "plain registers 128x192",
                                           "GLU split TS MM_K",      "GLU split TS MM_KCLAMP",
                                           "GLU split TS MM_GELU",   "GLU split TS MM_ANY",
                                           "GLU split registers",    "GLU interleaved registers",
                                           "dGLU TS MM_K",           "dGLU TS MM_ANY",
                                           "dGLU registers",         "dGLU dweights TS",
                                           "dGLU dweights registers"};
    failed += sm90_emu_report(required, (int)(sizeof required / sizeof required[0]));
    printf("%ld launches of the general kernel, %ld blocks emulated, %ld barriers\n", launches,
           emu_blocks_run, emu_barriers);
    if (plain == 0 || sm90_emu_launches() == plain) {
        printf("FAIL: the sm_90a kernel was not run (GEMM %ld, dGLU %ld launches)\n", plain,
               sm90_emu_launches() - plain);
        failed++;
    }
    return failed ? 1 : 0;
#else
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
#endif
}
