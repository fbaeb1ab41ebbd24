/* mlp_example.c — the gated MLP block's forward through the C API on the CPU backend:
 * out = (silu(x w_gate^T) * (x w_up^T)) w2^T for 4 tokens, hidden 8, F 16, fp32.
 *   cc -I include examples/mlp/mlp_example.c -L build/cpu -lfastglu -o mlp_example */
#include <stdio.h>

#include "fastglu.h"

enum { T = 4, H = 8, F = 16 };

int main(void) {
    static float x[T * H], w1[2 * F * H], w2[H * F], h[T * 2 * F], y[T * F], out[T * H];
    for (int i = 0; i < T * H; ++i) x[i] = (float)(i % 7) / 7.0f - 0.5f;
    for (int i = 0; i < 2 * F * H; ++i) w1[i] = (float)(i % 11) / 11.0f - 0.5f;
    for (int i = 0; i < H * F; ++i) w2[i] = (float)(i % 5) / 5.0f - 0.4f;
    const fastglu_dtype f32 = FASTGLU_DTYPE_FP32;
    const fastglu_tensor none = {NULL, f32, 0};
    const fastglu_glu_params params = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    fastglu_status st =
        fastglu_mlp_fwd_cpu(&params, (fastglu_tensor){x, f32, H}, (fastglu_tensor){w1, f32, H},
                            none, none, (fastglu_tensor){w2, f32, F}, none,
                            (fastglu_tensor){h, f32, 2 * F} /* kept for a backward */,
                            (fastglu_tensor){y, f32, F}, (fastglu_tensor){out, f32, H}, T, H, F);
    if (st != FASTGLU_SUCCESS) {
        fprintf(stderr, "%s\n", fastglu_last_error_message());
        return 1;
    }
    printf("out[0, :4] = %.5f %.5f %.5f %.5f\n", out[0], out[1], out[2], out[3]);
    return 0;
}
