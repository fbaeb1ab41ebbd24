/* test_swiglu_cpu.c — the CPU backend against the float64 reference (tests/c/reference.c), plus
 * the host bf16/fp16 conversions against their definitions. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert.h"
#include "reference.h"

static void *host_alloc(size_t n) { return malloc(n ? n : 1); }
static void host_copy(void *dst, const void *src, size_t n) { memcpy(dst, src, n); }
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

/* test_swiglu_cpu            the suite and the conversions
 * test_swiglu_cpu --sweep    the sentinel sweep (a CTest of its own) */
int main(int argc, char **argv) {
    test_backend b = {"cpu",
                      fastglu_swiglu_fwd_cpu,
                      fastglu_swiglu_bwd_cpu,
                      host_alloc,
                      free,
                      host_copy,
                      host_copy,
                      host_sync};
    if (argc > 1 && strcmp(argv[1], "--sweep") == 0) return run_sentinel_sweep(&b) ? 1 : 0;
    int failed = check_conversions() + run_swiglu_suite(&b);
    return failed ? 1 : 0;
}
