/*
 * test_fp8_scale.c — fastglu_div448 (src/fp8_recipe.h), the FP8 recipe's amax / 448, against the
 * division it stands for, for every non-negative float amax: the same bits for each (the recipe's
 * scale is the correctly rounded quotient; the CPU backend and the CUDA kernels both compute it
 * through fastglu_div448). Also counts the amaxes where the product-and-residual route alone would
 * differ (those below its threshold), to show the threshold is needed. About 2^31 cases.
 */
#include <stdio.h>
#include <string.h>

#include "fp8_recipe.h"

int main(void) {
    long differ = 0, route_alone = 0;
    const float c = 1.0f / FASTGLU_E4M3_MAX;
    for (uint32_t u = 0; u <= 0x7f800000u; ++u) {
        float a, want, got, alone;
        memcpy(&a, &u, sizeof a);
        want = a / FASTGLU_E4M3_MAX;
        got = fastglu_div448(a, u);
        if (memcmp(&got, &want, sizeof got)) {
            if (differ++ < 10)
                fprintf(stderr, "FAIL: amax %a: %a, the division gives %a\n", (double)a,
                        (double)got, (double)want);
        }
        if (u < 0x03800000u) {
            const float q = a * c;
            alone = fmaf(fmaf(-FASTGLU_E4M3_MAX, q, a), c, q);
            route_alone += memcmp(&alone, &want, sizeof alone) != 0;
        }
    }
    printf("fastglu_div448: %ld of 2^31 + 1 amaxes differ from the division; below 2^-120 the "
           "product-and-residual route alone would differ for %ld\n",
           differ, route_alone);
    if (!route_alone) fprintf(stderr, "FAIL: the threshold is not shown to be needed\n");
    return differ || !route_alone;
}
