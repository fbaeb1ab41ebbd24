/* test_glu_cpu.c — the gated-linear-unit family's CPU backend (fastglu_glu_*_cpu) against the
 * float64 reference of tests/c/glu_reference.c.
 *
 *   test_glu_cpu                 the suite (options matrix and shape sweep)
 *   test_glu_cpu --sweep         the sentinel sweep
 *   test_glu_cpu --determinism   bitwise-identical reductions run to run (workspace garbage varied)
 *   test_glu_cpu --edges         fp8 decoding of all 256 codes, the forward's fp8 copy on every
 *                                bf16 / fp16 bit pattern and fp32 specials, clamp / multiplier
 *                                edge cases, the clamp in the dtype and through the fp8 copy
 * (each a CTest of its own). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "glu_reference.h"
#include "glu_flat.h"

static void *host_alloc(size_t n) { return malloc(n ? n : 1); }
static void host_copy(void *dst, const void *src, size_t n) {
    if (n) memcpy(dst, src, n);
}
static void host_sync(void) {}

int main(int argc, char **argv) {
    const glu_backend b = {"cpu", glu_fwd_cpu_flat, glu_bwd_cpu_flat, host_alloc,
                           free,  host_copy,        host_copy,        host_sync};
    const char *mode = argc > 1 ? argv[1] : "";
    int failed;
    if (strcmp(mode, "--sweep") == 0)
        failed = run_glu_sentinel_sweep(&b);
    else if (strcmp(mode, "--determinism") == 0)
        failed = run_glu_determinism(&b, NULL, 1);
    else if (strcmp(mode, "--edges") == 0)
        failed = run_glu_fp8_exact(&b) + run_glu_fp8_store_exact(&b) + run_glu_param_edges(&b) +
                 run_glu_clamp_edges(&b);
    else
        failed = run_glu_suite(&b);
    return failed ? 1 : 0;
}
