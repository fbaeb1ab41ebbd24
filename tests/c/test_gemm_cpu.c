/* test_gemm_cpu.c — the linear layers' CPU backend (fastglu_linear_cpu,
 * fastglu_linear_glu_fwd_cpu) against the float64 reference of tests/c/gemm_reference.c: every
 * variant and dtype at small odd shapes (T = 1, 3, 5, 257; F = 1, 3, 130, 1408; H = 0, 1, 8, 37),
 * two variants at H = 2880, bad input, determinism. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_reference.h"

static void *host_alloc(size_t n) { return malloc(n ? n : 1); }
static void host_copy(void *dst, const void *src, size_t n) {
    if (n) memcpy(dst, src, n);
}
static void host_sync(void) {}

int main(void) {
    const gemm_backend b = {"cpu", fastglu_linear_cpu, fastglu_linear_glu_fwd_cpu,
                            fastglu_glu_fwd_cpu, host_alloc, free, host_copy, host_copy, host_sync};
    static const gemm_shape small[] = {{1, 8, 1}, {3, 8, 3}, {5, 37, 130}, {2, 1, 4}, {3, 0, 5},
                                       {257, 8, 1408}};
    static const gemm_shape wide[] = {{1, 2880, 1408}, {3, 2880, 3}};
    gemm_seed("test_gemm_cpu");
    int failed = run_gemm_suite(&b, small, 6, 7, ~0u);
    /* at H = 2880: the plain linear with bias and the interleaved variant with everything */
    failed += run_gemm_suite(&b, wide, 2, 7, (1u << 1) | (1u << 5));
    failed += run_gemm_errors(&b);
    failed += run_gemm_determinism(&b, small + 2, 1, NULL, 0);
    return failed ? 1 : 0;
}
