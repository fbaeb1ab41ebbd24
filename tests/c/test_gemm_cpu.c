/* test_gemm_cpu.c — the linear layers' CPU backend (fastglu_linear_cpu,
 * fastglu_linear_glu_fwd_cpu) against the float64 reference of tests/c/gemm_reference.c: every
 * variant and dtype at small odd shapes (T = 1, 3, 5, 257; F = 1, 3, 130, 1408; H = 0, 1, 8, 37),
 * two variants at H = 2880, bad input, determinism; fc2 dgrad + dGLU (fastglu_linear_dglu_bwd_cpu)
 * likewise (T = 1, 3, 257; F = 0, 1, 3, 1408; H = 0, 1, 7, 37, 33); in a build without CUDA, the CUDA
 * entry points' validation and FASTGLU_ERROR_NO_CUDA. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_reference.h"
#include "glu_flat.h"

static void *host_alloc(size_t n) { return malloc(n ? n : 1); }
static void host_copy(void *dst, const void *src, size_t n) {
    if (n) memcpy(dst, src, n);
}
static void host_sync(void) {}

/* A build without the CUDA backend: its CUDA entry points validate as the real ones (same
 * messages), succeed on an empty problem and return FASTGLU_ERROR_NO_CUDA otherwise. */
static int cuda_stubs(void) {
    uint16_t x[4 * 8], w[6 * 8], h[4 * 6], y[4 * 3];
    const fastglu_tensor tx = {x, FASTGLU_DTYPE_BF16, 8}, tw = {w, FASTGLU_DTYPE_BF16, 8},
                         th = {h, FASTGLU_DTYPE_BF16, 6}, ty = {y, FASTGLU_DTYPE_BF16, 3},
                         none = {NULL, FASTGLU_DTYPE_BF16, 0};
    const fastglu_glu_params p = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    int failed = 0;
    failed += fastglu_linear_glu_fwd_cuda(&p, tx, tw, none, none, th, ty, 4, 8, 3, NULL) !=
              FASTGLU_ERROR_NO_CUDA;
    failed += fastglu_linear_cuda(tx, tw, none, th, 4, 8, 6, NULL) != FASTGLU_ERROR_NO_CUDA;
    failed += fastglu_linear_glu_fwd_cuda(&p, tx, tw, none, none, th, ty, 0, 8, 3, NULL) !=
              FASTGLU_SUCCESS;
    failed +=
        fastglu_linear_glu_fwd_cuda(&p, tx, tw, none, none, th, ty, -1, 8, 3, NULL) !=
            FASTGLU_ERROR_INVALID_VALUE ||
        strstr(fastglu_last_error_message(), "fastglu_linear_glu_fwd_cuda: tokens = -1") == NULL;
    /* dglu: d_out [4, 8], w2 [8, 3], h [4, 6], dh [4, 6], y [4, 3] */
    uint16_t dh[4 * 6];
    const fastglu_tensor tw2 = {w, FASTGLU_DTYPE_BF16, 3}, tdh = {dh, FASTGLU_DTYPE_BF16, 6};
    failed += fastglu_linear_dglu_bwd_cuda(&p, tx, tw2, th, none, tdh, ty, none, 4, 8, 3, NULL) !=
              FASTGLU_ERROR_NO_CUDA;
    failed +=
        fastglu_linear_dglu_bwd_cuda(&p, tx, tw2, th, none, tdh, ty, none, 4, -1, 3, NULL) !=
            FASTGLU_ERROR_INVALID_VALUE ||
        strstr(fastglu_last_error_message(), "fastglu_linear_dglu_bwd_cuda: hidden = -1") == NULL;
    printf("cpu: CUDA entry points without CUDA: %d failed\n", failed);
    return failed;
}

int main(void) {
    gemm_backend b = {"cpu",
                      fastglu_linear_cpu,
                      fastglu_linear_glu_fwd_cpu,
                      glu_fwd_cpu_flat,
                      host_alloc,
                      free,
                      host_copy,
                      host_copy,
                      host_sync};
    static const gemm_shape small[] = {{1, 8, 1}, {3, 8, 3}, {5, 37, 130},
                                       {2, 1, 4}, {3, 0, 5}, {257, 8, 1408}};
    static const gemm_shape wide[] = {{1, 2880, 1408}, {3, 2880, 3}};
    static const gemm_shape dglu_shapes[] = {{1, 7, 1}, {3, 37, 3}, {257, 33, 1408},
                                             {3, 0, 5}, {3, 5, 0},  {2, 1, 130}};
    b.linear_dglu = fastglu_linear_dglu_bwd_cpu;
    gemm_seed("test_gemm_cpu");
    int failed = run_gemm_suite(&b, small, 6, 7, ~0u);
    /* at H = 2880: the plain linear with bias and the interleaved variant with everything */
    failed += run_gemm_suite(&b, wide, 2, 7, (1u << 1) | (1u << 5));
    failed += run_gemm_errors(&b);
    failed += run_gemm_determinism(&b, small + 2, 1, NULL, 0);
    failed += run_dglu_suite(&b, dglu_shapes, 6, 7, ~0u);
    failed += run_dglu_errors(&b);
    failed += run_dglu_determinism(&b, dglu_shapes + 2, 1, NULL, 0);
    if (!fastglu_cuda_built()) failed += cuda_stubs();
    return failed ? 1 : 0;
}
