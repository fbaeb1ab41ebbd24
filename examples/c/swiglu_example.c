/*
 * swiglu_example.c — SwiGLU forward and backward through fastglu's C API on the CPU backend.
 *
 * A [tokens, 2F] bf16 input (gate | up), y = silu(gate) * up, then the input gradient for
 * dy = 1 (the gradient of y.sum()), checked against the formulas in double precision; then the
 * same forward through the family's entry point (fastglu_glu_fwd_cpu: operands as descriptors),
 * which gives the same bits.
 *
 *   cmake -S examples/c -B build/example -DCMAKE_PREFIX_PATH=<fastglu install prefix>
 *   cmake --build build/example && build/example/swiglu_example
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <fastglu.h>

enum { TOKENS = 4, F = 6 };

/* bf16 is the top half of an fp32; round to nearest even when storing. */
static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static double from_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

int main(void) {
    uint16_t input[TOKENS][2 * F], y[TOKENS][F], dinput[TOKENS][2 * F];
    const uint16_t one = to_bf16(1.0f); /* dy: one value read with strides 0, 0 */
    for (int t = 0; t < TOKENS; ++t)
        for (int j = 0; j < 2 * F; ++j) input[t][j] = to_bf16((float)sin(1.0 + 7 * t + j) * 3.0f);

    fastglu_status st = fastglu_swiglu_fwd_cpu(input, 2 * F, y, F, TOKENS, F, FASTGLU_DTYPE_BF16);
    if (st == FASTGLU_SUCCESS)
        st = fastglu_swiglu_bwd_cpu(&one, 0, 0, input, 2 * F, dinput, 2 * F, TOKENS, F,
                                    FASTGLU_DTYPE_BF16);
    if (st != FASTGLU_SUCCESS) {
        fprintf(stderr, "fastglu: %s (%s)\n", fastglu_last_error_message(), fastglu_strerror(st));
        return 1;
    }

    /* The family's call: SiLU, gate and up as two [tokens, F] descriptors into the same rows. */
    uint16_t y_glu[TOKENS][F];
    const fastglu_glu_params p = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    fastglu_glu_operands o;
    memset(&o, 0, sizeof o); /* bias, weights, scale_inv absent (data NULL) */
    o.gate = (fastglu_tensor){&input[0][0], FASTGLU_DTYPE_BF16, 2 * F};
    o.up = (fastglu_tensor){&input[0][F], FASTGLU_DTYPE_BF16, 2 * F};
    const fastglu_tensor out = {y_glu, FASTGLU_DTYPE_BF16, F};
    const fastglu_tensor no_fp8_copy = {NULL, FASTGLU_DTYPE_FP8_E4M3, 0};
    st = fastglu_glu_fwd_cpu(&p, &o, out, no_fp8_copy, TOKENS, F);
    if (st != FASTGLU_SUCCESS || memcmp(y_glu, y, sizeof y) != 0) {
        fprintf(stderr, "fastglu_glu_fwd_cpu: %s\n",
                st != FASTGLU_SUCCESS ? fastglu_last_error_message() : "bits differ from swiglu");
        return 1;
    }

    double worst = 0;
    for (int t = 0; t < TOKENS; ++t)
        for (int j = 0; j < F; ++j) {
            double g = from_bf16(input[t][j]), u = from_bf16(input[t][F + j]);
            double s = 1 / (1 + exp(-g));
            double want[3] = {g * s * u, s * (1 + g * (1 - s)) * u, g * s};
            double got[3] = {from_bf16(y[t][j]), from_bf16(dinput[t][j]),
                             from_bf16(dinput[t][F + j])};
            for (int k = 0; k < 3; ++k) {
                double err = fabs(got[k] - want[k]) / (fabs(want[k]) + 1e-3);
                worst = err > worst ? err : worst;
            }
        }
    int v = fastglu_version();
    printf("fastglu %d.%d.%d, CUDA backend built: %s; %d tokens x F=%d bf16: worst relative error "
           "%.2e\n",
           v / 10000, v / 100 % 100, v % 100, fastglu_cuda_built() ? "yes" : "no", TOKENS, F,
           worst);
    return worst < 1e-2 ? 0 : 1;
}
