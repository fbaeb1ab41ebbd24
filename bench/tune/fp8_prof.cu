/*
 * fp8_prof.cu — times fastglu_glu_{fwd,bwd}_fp8_cuda's kernels from C (CUDA events around 30
 * back-to-back calls after 3 warm-up calls; no Python in the loop, so small shapes are not
 * host-bound), or launches each case once for Nsight Compute ("prof"). bf16, T = 8192, SPLIT
 * layout, SiLU; the cases: forward / backward, block / tensor scaling, the column-wise copy, a
 * bias (the general kernels), the backward's sums (a bias and fp32 per-token weights, dbias and
 * dweights), both with clamp_value = 7 (the general math, not plain SwiGLU's), the backward
 * from h's blockwise copy (random codes and scales) with and without the column-wise copy, also on
 * the shifted pairs (fastglu_debug_set_fp8_saved_shift, F % 128 == 64). Prints each case's time and its floor: the bytes read and written, scales included (the per-tensor cases
 * read the operands twice: two passes), over the bandwidth of a 1 GiB device-to-device copy
 * measured in the same process (bytes read and written over the median of 10 copies).
 *
 * Built against the sources (an A/B builds one binary per version of src/glu_fp8_cuda.cu):
 *   nvcc -O3 -arch=sm_90 -DFASTGLU_HAVE_CUDA=1 -Iinclude -Isrc -o fp8_prof bench/tune/fp8_prof.cu \
 *        src/glu_fp8_cuda.cu src/glu_fp8_common.c src/common.c src/glu_common.c
 *   ./fp8_prof [F ...] [prof]      (F: 8192 by default; one line per F and case:
 *   "F | case | ms | floor ms | copy TB/s")
 */
#include <cuda_runtime.h>
#include <cuda_bf16.h>
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

/* bytes read and written per second by a 1 GiB device-to-device copy: the median of 10 */
static double copy_bandwidth(void) {
    const size_t n = (size_t)1 << 30;
    void *a, *b;
    float ms[10];
    cudaEvent_t e0, e1;
    if (cudaMalloc(&a, n) != cudaSuccess || cudaMalloc(&b, n) != cudaSuccess) return 0.0;
    cudaMemset(a, 1, n);
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice);
    for (int i = 0; i < 10; ++i) {
        cudaEventRecord(e0);
        cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, 0);
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        cudaEventElapsedTime(&ms[i], e0, e1);
    }
    qsort(ms, 10, sizeof ms[0], cmp_float);
    cudaFree(a);
    cudaFree(b);
    return 2.0 * (double)n / (0.5e-3 * (double)(ms[4] + ms[5]));
}

/* the inputs of every width: the first T * 2 F elements of hx */
static void run_width(int64_t F, int prof, double bw, const __nv_bfloat16 *hx) {
    const int64_t T = 8192;
    const int64_t nbT = (T + 127) / 128, W = 2 * F, nbW = (W + 127) / 128;
    size_t xb = T * 2 * F * 2;
    void *x, *dy, *d, *dt, *s, *st, *ws;
    cudaMalloc(&x, xb);
    cudaMemcpy(x, hx, xb, cudaMemcpyHostToDevice);
    cudaMalloc(&dy, T * F * 2);
    cudaMemcpy(dy, hx, T * F * 2, cudaMemcpyHostToDevice);
    cudaMalloc(&d, T * W);
    cudaMalloc(&dt, T * W);
    cudaMalloc(&s, T * nbW * 4);
    cudaMalloc(&st, W * nbT * 4);
    /* the workspace of the largest case: the backward's sums' partials */
    fastglu_fp8_recipe rb = {FASTGLU_FP8_SCALING_BLOCK_1X128, FASTGLU_FP8_SCALES_ROW_MAJOR, 0};
    const size_t ws_bytes = 256 + fastglu_glu_bwd_fp8_workspace_bytes(&rb, T, F, 1, 1);
    cudaMalloc(&ws, ws_bytes);
    void *db, *dw, *wt;
    cudaMalloc(&db, 2 * F * 2);
    cudaMalloc(&dw, T * 4);
    cudaMalloc(&wt, T * 4);
    {
        float *hw = (float *)malloc(T * 4);
        for (int64_t i = 0; i < T; ++i) hw[i] = 0.25f + (float)(i % 7) * 0.125f;
        cudaMemcpy(wt, hw, T * 4, cudaMemcpyHostToDevice);
        free(hw);
    }
    fastglu_glu_params p = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    fastglu_tensor gate = {x, FASTGLU_DTYPE_BF16, 2 * F},
                   up = {(char *)x + F * 2, FASTGLU_DTYPE_BF16, 2 * F};
    fastglu_tensor none = {NULL, FASTGLU_DTYPE_BF16, 0}, tdy = {dy, FASTGLU_DTYPE_BF16, F};
    struct {
        const char *name;
        int bwd, tensor, col, bias, sums, clamp, saved; /* saved 2: on the shifted pairs */
    } cases[] = {{"fwd block", 0, 0, 0, 0, 0},
                 {"fwd block+colwise", 0, 0, 1, 0, 0},
                 {"fwd tensor", 0, 1, 0, 0, 0},
                 {"bwd block", 1, 0, 0, 0, 0},
                 {"bwd block+colwise", 1, 0, 1, 0, 0},
                 {"bwd tensor", 1, 1, 0, 0, 0},
                 {"fwd block bias", 0, 0, 0, 1, 0},
                 {"bwd block bias", 1, 0, 0, 1, 0},
                 {"bwd block sums", 1, 0, 0, 1, 1},
                 {"fwd bias clamp", 0, 0, 0, 1, 0, 1},
                 {"bwd sums clamp", 1, 0, 0, 1, 1, 1},
                 {"bwd saved", 1, 0, 0, 0, 0, 0, 1},
                 {"bwd saved+colwise", 1, 0, 1, 0, 0, 0, 1},
                 {"bwd saved shift", 1, 0, 0, 0, 0, 0, 2},
                 {"bwd saved shift+cw", 1, 0, 1, 0, 0, 0, 2}};
    /* saved: the backward from h's blockwise copy (fastglu_glu_bwd_fp8_saved_blockwise_cuda):
     * random e4m3 codes (no NaN) [T, 2F], gate's then up's columns, and 1 x 128 scales in
     * [0.01, 0.02) [T, 2 ceil(F / 128)] */
    const int64_t nbF = (F + 127) / 128;
    void *c8, *sc8;
    cudaMalloc(&c8, T * 2 * F);
    cudaMalloc(&sc8, T * 2 * nbF * 4);
    {
        unsigned char *hc = (unsigned char *)malloc(T * 2 * F);
        float *hs = (float *)malloc(T * 2 * nbF * 4);
        uint64_t rng = 0x2545F4914F6CDD1Dull;
        for (int64_t i = 0; i < T * 2 * F; ++i) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            const unsigned char b = (unsigned char)(rng >> 56);
            hc[i] = (b & 0x7f) == 0x7f ? (unsigned char)(b - 1) : b;
        }
        for (int64_t i = 0; i < T * 2 * nbF; ++i) hs[i] = 0.01f + 0.01f * (float)(i % 97) / 97.0f;
        cudaMemcpy(c8, hc, T * 2 * F, cudaMemcpyHostToDevice);
        cudaMemcpy(sc8, hs, T * 2 * nbF * 4, cudaMemcpyHostToDevice);
        free(hc), free(hs);
    }
    const fastglu_tensor g8 = {c8, FASTGLU_DTYPE_FP8_E4M3, 2 * F},
                         u8 = {(char *)c8 + F, FASTGLU_DTYPE_FP8_E4M3, 2 * F},
                         s8 = {sc8, FASTGLU_DTYPE_FP32, 2 * nbF};
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    void *bb;
    cudaMalloc(&bb, 2 * F * 2);
    cudaMemcpy(bb, hx, 2 * F * 2, cudaMemcpyHostToDevice);
    fastglu_tensor bias = {bb, FASTGLU_DTYPE_BF16, 1};
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); ++c) {
        /* clamp: the general kernels' math mode MM_ANY (the other cases with a bias: MM_K) */
        p.clamp_value = cases[c].clamp ? 7.0f : 0.0f;
        fastglu_tensor bt = cases[c].bias ? bias : none;
        fastglu_fp8_recipe r = {cases[c].tensor ? FASTGLU_FP8_SCALING_TENSOR
                                                : FASTGLU_FP8_SCALING_BLOCK_1X128,
                                FASTGLU_FP8_SCALES_ROW_MAJOR, 0};
        const int64_t X = cases[c].bwd ? W : F, nbX = (X + 127) / 128;
        fastglu_fp8_out o;
        o.data = (fastglu_tensor){d, FASTGLU_DTYPE_FP8_E4M3, X};
        o.scale = (fastglu_tensor){s, FASTGLU_DTYPE_FP32, cases[c].tensor ? 0 : nbX};
        o.data_t = (fastglu_tensor){cases[c].col ? dt : NULL, FASTGLU_DTYPE_FP8_E4M3, T};
        o.scale_t =
            (fastglu_tensor){cases[c].col && !cases[c].tensor ? st : NULL, FASTGLU_DTYPE_FP32, nbT};
        o.workspace = ws, o.workspace_bytes = ws_bytes;
        /* sums: a bias and fp32 per-token weights, dbias and dweights */
        const int sm = cases[c].sums;
        fastglu_tensor twt = {sm ? wt : NULL, FASTGLU_DTYPE_FP32, 1},
                       tdb = {sm ? db : NULL, FASTGLU_DTYPE_BF16, 1},
                       tdw = {sm ? dw : NULL, FASTGLU_DTYPE_FP32, 1};
        /* the shifted pairs where F % 128 == 64 (fastglu_debug_set_fp8_saved_shift); elsewhere the
         * same kernels as "bwd saved" */
        fastglu_debug_set_fp8_saved_shift(cases[c].saved == 2);
        const int iters = prof ? 1 : 30;
        for (int it = 0; it < (prof ? 1 : 3) + iters; ++it) {
            if (it == (prof ? 1 : 3)) cudaEventRecord(e0);
            if (cases[c].saved)
                CK(fastglu_glu_bwd_fp8_saved_blockwise_cuda(&p, &r, tdy, g8, u8, s8, bt, twt, none,
                                                            tdb, tdw, &o, T, F, 0));
            else if (cases[c].bwd)
                CK(fastglu_glu_bwd_fp8_cuda(&p, &r, tdy, gate, up, bt, twt, none, tdb, tdw, &o, T,
                                            F, 0));
            else
                CK(fastglu_glu_fwd_fp8_cuda(&p, &r, gate, up, bt, none, none, &o, T, F, 0));
        }
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        double bytes = (cases[c].bwd ? 3.0 : 2.0) * T * F * 2 * (cases[c].tensor ? 2 : 1) +
                       (double)T * X * (cases[c].col ? 2 : 1);
        if (cases[c].saved) /* gate and up one byte an element (not two), and their scales */
            bytes += -2.0 * T * F + 4.0 * (double)(T * 2 * nbF);
        if (cases[c].tensor)
            bytes += 4.0;
        else
            bytes += 4.0 * (double)(T * nbX + (cases[c].col ? X * nbT : 0));
        printf("F %lld | %-18s | %8.4f ms | floor %8.4f ms | copy %.3f TB/s\n", (long long)F,
               cases[c].name, ms / iters, 1e3 * bytes / bw, bw * 1e-12);
    }
    cudaFree(x), cudaFree(dy), cudaFree(d), cudaFree(dt), cudaFree(s), cudaFree(st), cudaFree(ws);
    cudaFree(db), cudaFree(dw), cudaFree(wt);
    cudaFree(bb), cudaFree(c8), cudaFree(sc8);
}

int main(int argc, char **argv) {
    int prof = 0, nf = 0;
    int64_t Fs[16];
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "prof"))
            prof = 1;
        else if (nf < 16)
            Fs[nf++] = atoll(argv[i]);
    }
    if (!nf) Fs[nf++] = 8192;
    const double bw = prof ? 4.2e12 : copy_bandwidth();
    int64_t fmax = 0;
    for (int i = 0; i < nf; ++i) fmax = Fs[i] > fmax ? Fs[i] : fmax;
    const int64_t n = 8192 * 2 * fmax;
    __nv_bfloat16 *hx = (__nv_bfloat16 *)malloc((size_t)n * 2);
    uint64_t rng = 0x9E3779B97F4A7C15ull; /* xorshift: values (k - 1000) / 250, k in 0..2000 */
    for (int64_t i = 0; i < n; ++i) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        hx[i] = __float2bfloat16((float)((int)((rng >> 33) % 2001) - 1000) / 250.0f);
    }
    for (int i = 0; i < nf; ++i) run_width(Fs[i], prof, bw, hx);
    free(hx);
    printf("cuda: %s\n", cudaGetErrorString(cudaDeviceSynchronize()));
    return 0;
}
