/*
 * quant_prof.cu — times fastglu_quantize_fp8_cuda's kernel from C (CUDA events around 30
 * back-to-back calls after 3 warm-up calls), or launches each case once for Nsight Compute
 * ("prof"). bf16 inputs, the FP8 MLP block's operands: x [T, H] 1 x 128 with and without the
 * transposed copy, the transposed copy alone, a weight [R, C] 128 x 128 row-wise and transposed.
 * Prints each case's time and its floor: the bytes read and written, scales included, over the
 * bandwidth of a 1 GiB device-to-device copy measured in the same process (the median of 10).
 *
 * Built against the sources (an A/B builds one binary per version of src/quant_fp8_cuda.cu):
 *   nvcc -O3 -arch=sm_90 -DFASTGLU_HAVE_CUDA=1 -Iinclude -Isrc -o quant_prof \
 *        bench/tune/quant_prof.cu src/quant_fp8_cuda.cu src/glu_fp8_common.c src/common.c \
 *        src/glu_common.c
 *   ./quant_prof [prof]     one line per case: "case | ms | floor ms | x floor"
 */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fastglu.h"

#define CK(x)                                                                                      \
    do {                                                                                           \
        fastglu_status s_ = (x);                                                                   \
        if (s_) {                                                                                  \
            printf("status %d: %s\n", (int)s_, fastglu_last_error_message());                      \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static double copy_bandwidth(void) {
    const size_t n = (size_t)1 << 30;
    void *a, *b;
    cudaMalloc(&a, n), cudaMalloc(&b, n);
    cudaMemset(a, 1, n);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    float t[10];
    for (int i = 0; i < 10; ++i) {
        cudaEventRecord(e0);
        cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice);
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        cudaEventElapsedTime(&t[i], e0, e1);
    }
    qsort(t, 10, sizeof *t, cmp_float);
    cudaFree(a), cudaFree(b);
    return 2.0 * n / ((t[4] + t[5]) / 2 * 1e-3);
}

typedef struct qcase {
    const char *name;
    int64_t R, C;
    int w128, row, col;
} qcase;

int main(int argc, char **argv) {
    const int prof = argc > 1 && !strcmp(argv[1], "prof");
    const qcase cases[] = {
        {"x 8192x4096 row+col", 8192, 4096, 0, 1, 1},
        {"x 8192x4096 row", 8192, 4096, 0, 1, 0},
        {"x 8192x4096 col", 8192, 4096, 0, 0, 1},
        {"x 16384x2880 row+col", 16384, 2880, 0, 1, 1},
        {"w 16384x4096 row", 16384, 4096, 1, 1, 0},
        {"w 16384x4096 col", 16384, 4096, 1, 0, 1},
        {"w 4096x8192 col", 4096, 8192, 1, 0, 1},
        {"w 5760x2880 col", 5760, 2880, 1, 0, 1},
    };
    const double bw = prof ? 0 : copy_bandwidth();
    if (!prof) printf("copy bandwidth %.0f GB/s\n", bw / 1e9);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    for (size_t k = 0; k < sizeof cases / sizeof *cases; ++k) {
        const qcase c = cases[k];
        const int64_t rb = (c.R + 127) / 128, cb = (c.C + 127) / 128;
        void *x, *d = NULL, *dt = NULL, *s = NULL, *st = NULL;
        cudaMalloc(&x, (size_t)(c.R * c.C) * 2);
        {
            const size_t n = (size_t)(c.R * c.C);
            __nv_bfloat16 *h = (__nv_bfloat16 *)malloc(n * 2);
            for (size_t i = 0; i < n; ++i)
                h[i] = __float2bfloat16((float)((rand() % 2001) - 1000) / 250.0f);
            cudaMemcpy(x, h, n * 2, cudaMemcpyHostToDevice);
            free(h);
        }
        const int64_t s_rows = c.w128 ? rb : c.R, st_rows = c.w128 ? cb : c.C;
        if (c.row) cudaMalloc(&d, (size_t)(c.R * c.C)), cudaMalloc(&s, (size_t)(s_rows * cb) * 4);
        if (c.col)
            cudaMalloc(&dt, (size_t)(c.R * c.C)), cudaMalloc(&st, (size_t)(st_rows * rb) * 4);
        const fastglu_fp8_recipe r = {
            c.w128 ? FASTGLU_FP8_SCALING_BLOCK_128X128 : FASTGLU_FP8_SCALING_BLOCK_1X128,
            c.w128 ? FASTGLU_FP8_SCALES_ROW_MAJOR : FASTGLU_FP8_SCALES_MN_MAJOR, 0};
        fastglu_fp8_out o;
        memset(&o, 0, sizeof o);
        o.data = (fastglu_tensor){d, FASTGLU_DTYPE_FP8_E4M3, c.C};
        o.scale = (fastglu_tensor){s, FASTGLU_DTYPE_FP32, c.w128 ? cb : c.R};
        o.data_t = (fastglu_tensor){dt, FASTGLU_DTYPE_FP8_E4M3, c.R};
        o.scale_t = (fastglu_tensor){st, FASTGLU_DTYPE_FP32, c.w128 ? rb : c.C};
        const fastglu_tensor xt = {x, FASTGLU_DTYPE_BF16, c.C};
        if (prof) {
            CK(fastglu_quantize_fp8_cuda(&r, xt, &o, c.R, c.C, NULL));
            cudaDeviceSynchronize();
        } else {
            for (int i = 0; i < 3; ++i) CK(fastglu_quantize_fp8_cuda(&r, xt, &o, c.R, c.C, NULL));
            cudaEventRecord(e0);
            for (int i = 0; i < 30; ++i) CK(fastglu_quantize_fp8_cuda(&r, xt, &o, c.R, c.C, NULL));
            cudaEventRecord(e1);
            cudaEventSynchronize(e1);
            float ms;
            cudaEventElapsedTime(&ms, e0, e1);
            ms /= 30;
            const int copies = c.row + c.col;
            const double scales =
                c.w128 ? (double)copies * rb * cb
                       : (c.row ? (double)c.R * cb : 0) + (c.col ? (double)c.C * rb : 0);
            const double bytes = (double)c.R * c.C * (2 + copies) + 4 * scales;
            const double floor_ms = bytes / bw * 1e3;
            printf("%s | %.4f | %.4f | %.3f\n", c.name, ms, floor_ms, ms / floor_ms);
        }
        cudaFree(x), cudaFree(d), cudaFree(dt), cudaFree(s), cudaFree(st);
    }
    printf("cuda: %s\n", cudaGetErrorString(cudaDeviceSynchronize()));
    return 0;
}
