/* test_glu_cpu.c — the gated-linear-unit family's CPU backend (fastglu_glu_*_cpu) against the
 * float64 reference of tests/c/glu_reference.c, with SwiGLU's entry points (fastglu_swiglu_*_cpu)
 * as its SiLU case.
 *
 *   test_glu_cpu                 the suite (options matrix and shape sweep)
 *   test_glu_cpu --sweep         the sentinel sweep
 *   test_glu_cpu --determinism   bitwise-identical reductions run to run (workspace garbage varied)
 *   test_glu_cpu --edges         fp8 decoding of all 256 codes, the forward's fp8 copy on every
 *                                bf16 / fp16 bit pattern and fp32 specials, clamp / multiplier
 *                                edge cases, the clamp in the dtype and through the fp8 copy; the
 *                                host bf16 / fp16 conversions against their definitions
 *   test_glu_cpu --swiglu        fastglu_swiglu_*_cpu: the family's bits (and with gate and up as
 *                                two tensors, interleaved), the float64 reference, the sentinel
 *   test_glu_cpu --swiglu-sweep  fastglu_swiglu_*_cpu's sentinel sweep
 * (each a CTest of its own). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert.h"
#include "glu_flat.h"
#include "glu_reference.h"

static void *host_alloc(size_t n) { return malloc(n ? n : 1); }
static void host_copy(void *dst, const void *src, size_t n) {
    if (n) memcpy(dst, src, n);
}
static void host_sync(void) {}

/* Every fp16 and bf16 bit pattern survives a round trip through fp32 (NaNs stay NaN), and fp32
 * values halfway between two fp16 neighbours round to the even one. */
static int check_conversions(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; ++h) {
        float f16 = fp16_to_f32((uint16_t)h), b16 = bf16_to_f32((uint16_t)h);
        if (isnan(f16) ? !isnan(fp16_to_f32(f32_to_fp16(f16))) : f32_to_fp16(f16) != h) bad++;
        if (isnan(b16) ? !isnan(bf16_to_f32(f32_to_bf16(b16))) : f32_to_bf16(b16) != h) bad++;
    }
    /* 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even gives 1.0 (0x3c00). */
    if (f32_to_fp16(1.0f + 0.00048828125f) != 0x3c00) bad++;
    if (f32_to_fp16(1.0f + 3 * 0.00048828125f) != 0x3c02) bad++;
    if (f32_to_fp16(65520.0f) != 0x7c00 || f32_to_fp16(65519.0f) != 0x7bff) bad++;
    if (f32_to_fp16(2.9802322387695312e-08f) != 0x0000) bad++; /* 2^-25: ties to even -> 0 */
    if (f32_to_fp16(8.940696716308594e-08f) != 0x0002) bad++;  /* 1.5 * 2^-24 -> 2^-23 */
    printf("conversions: %d failed\n", bad);
    return bad;
}

int main(int argc, char **argv) {
    const glu_backend b = {"cpu", glu_fwd_cpu_flat, glu_bwd_cpu_flat, host_alloc,
                           free,  host_copy,        host_copy,        host_sync};
    const glu_swiglu_entry sw = {fastglu_swiglu_fwd_cpu, fastglu_swiglu_bwd_cpu};
    const char *mode = argc > 1 ? argv[1] : "";
    int failed;
    if (strcmp(mode, "--sweep") == 0)
        failed = run_glu_sentinel_sweep(&b);
    else if (strcmp(mode, "--determinism") == 0)
        failed = run_glu_determinism(&b, NULL, 1);
    else if (strcmp(mode, "--edges") == 0)
        failed = run_glu_fp8_exact(&b) + run_glu_fp8_store_exact(&b) + run_glu_param_edges(&b) +
                 run_glu_clamp_edges(&b) + check_conversions();
    else if (strcmp(mode, "--swiglu") == 0)
        failed = run_glu_swiglu(&b, &sw);
    else if (strcmp(mode, "--swiglu-sweep") == 0)
        failed = run_glu_swiglu_sentinel_sweep(&b, &sw);
    else
        failed = run_glu_suite(&b);
    return failed ? 1 : 0;
}
