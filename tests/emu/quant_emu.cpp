/* tests/emu/quant_emu.cpp — the kernels of src/quant_fp8_cuda.cu (fastglu_quantize_fp8_cuda,
 * fastglu_glu_fp8_store_blockwise_cuda and fastglu_glu_fwd_fp8_store_blockwise_cuda, the last two's
 * grids capped to 2 row groups so that they stride)
 * compiled as host C++ (tests/emu/shim stands in for the CUDA headers) and run block by block, each
 * block's 256 threads as coroutines switching at __syncthreads() and at every warp shuffle
 * (tests/emu/emu_threads.h), on host memory. Every output buffer, its padding included (sentinel
 * bytes), is compared bit for bit with fastglu_quantize_fp8_cpu's on the same input: every dtype,
 * both block shapes, both scale layouts, power-of-two scales, the row-wise copy, the transposed
 * copy and both; partial tiles, a single element, dense, 16-byte-padded and odd row strides (the
 * 16-byte and element paths); blocks of zeros, NaN, +-inf, subnormals and values near the top of
 * each dtype. UBSan checks the alignment of every vector access. */
#include <cfloat>
#include <cstdio>
#include <cstring>
#include <vector>

#define FASTGLU_HOST_EMULATION 1
#define FASTGLU_HAVE_CUDA 1
#define __shared__
#include "cuda_runtime.h"
#include "emu_threads.h"
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int64_t min(int64_t a, int64_t b) { return a < b ? a : b; }
#include "cuda_bf16.h"
#include "cuda_fp16.h"

alignas(16) unsigned char smem_raw[228 * 1024]; /* the block's dynamic shared memory */

#include "convert.h"
#define STORE_MAX_ROW_BLOCKS 2 /* the blockwise store's grid strides over its rows */
#include "quant_fp8_cuda.cu"

static emu_body body;
template <typename E, int W, int R, int C> static void run_k(void **args) {
    quant_fp8_kernel<E, W, R, C>(*(const quant_args *)args[0]);
}
template <typename E, int W, int R, int C> static int try_k(const void *f) {
    if (f != (const void *)quant_fp8_kernel<E, W, R, C>) return 0;
    body = run_k<E, W, R, C>;
    return 1;
}
template <typename E> static void run_store(void **args) {
    glu_fp8_store_kernel<E>(*(const store_args *)args[0]);
}
template <typename E> static int try_store(const void *f) {
    if (f != (const void *)glu_fp8_store_kernel<E>) return 0;
    body = run_store<E>;
    return 1;
}
static long fused_launches; /* glu_fwd_store_kernel's */
template <typename E> static void run_fused(void **args) {
    glu_fwd_store_kernel<E>(*(const fwd_store_args *)args[0]);
}
template <typename E> static int try_fused(const void *f) {
    if (f != (const void *)glu_fwd_store_kernel<E>) return 0;
    body = run_fused<E>;
    fused_launches++;
    return 1;
}
template <typename E> static int find_e(const void *f) {
    return try_k<E, 0, 1, 0>(f) || try_k<E, 0, 0, 1>(f) || try_k<E, 0, 1, 1>(f) ||
           try_k<E, 1, 1, 0>(f) || try_k<E, 1, 0, 1>(f) || try_k<E, 1, 1, 1>(f) ||
           try_store<E>(f) || try_fused<E>(f);
}
/* The forward of src/glu_cuda.cu, which fastglu_glu_fwd_fp8_store_blockwise_cuda calls for
 * INTERLEAVED, is not in this program (test_cuda_emulation emulates it): the CPU backend's stands
 * in, on the same host memory. */
extern "C" fastglu_status fastglu_glu_fwd_cuda(FASTGLU_GLU_FWD_ARGS, void *) {
    return fastglu_glu_fwd_cpu(params, operands, output, saved_fp8, tokens, ffn_hidden_size);
}
static size_t smem_bytes;
static void junk_smem(void) { memset(smem_raw, 0x5a, smem_bytes); }
static long launches;
cudaError_t cudaLaunchKernel(const void *f, dim3 grid, dim3 block, void **args, size_t smem,
                             cudaStream_t) {
    if (!(find_e<float>(f) || find_e<__half>(f) || find_e<__nv_bfloat16>(f)))
        return cudaErrorInvalidValue;
    if (smem > sizeof smem_raw) return cudaErrorInvalidValue;
    launches++;
    smem_bytes = smem;
    emu_run_blocks(body, args, grid, block, junk_smem);
    return cudaSuccess;
}
cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *, const void *, void **) {
    return cudaErrorInvalidValue;
}

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static double urand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}
static void put(fastglu_dtype dt, void *base, int64_t i, float v) {
    if (dt == FASTGLU_DTYPE_FP32)
        ((float *)base)[i] = v;
    else
        ((uint16_t *)base)[i] = dt == FASTGLU_DTYPE_BF16 ? f32_to_bf16(v) : f32_to_fp16(v);
}

static int failures, cases;
#define FAIL(...)                                                                                  \
    do {                                                                                           \
        if (failures++ < 20) {                                                                     \
            fprintf(stderr, "FAIL: ");                                                             \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
        }                                                                                          \
    } while (0)

enum { DENSE = 0, PADDED = 1, ODD = 2 };

struct bufs {
    std::vector<unsigned char> d, dt;
    std::vector<float> s, st;
};

/* one case: x [R, C] of dtype dt, the recipe, which copies, the row strides' kind */
static void run_case(fastglu_dtype dt, int w128, int mn, int pow2, int row, int col, int64_t R,
                     int64_t C, int strides) {
    const size_t es = fastglu_dtype_size(dt);
    const int64_t pad = strides == DENSE ? 0 : strides == PADDED ? 16 : 1;
    const int64_t x_rs = C + (strides == PADDED ? 8 : pad), d_rs = C + pad, dt_rs = R + pad;
    /* x: one allocation, 16-byte aligned, filled with values of every kind; the row padding and
     * the 8 floats past the end poison (0x7f bytes: fp32 and bf16 3.4e38, fp16 NaN), which a read
     * outside x would carry into a scale */
    std::vector<float> xs((size_t)(R * x_rs + 8));
    memset(xs.data(), 0x7f, xs.size() * sizeof(float));
    void *x = xs.data();
    const int kind = (int)(urand() * 4);
    for (int64_t i = 0; i < R; ++i)
        for (int64_t j = 0; j < C; ++j) {
            double u = urand();
            float v = (float)((urand() - 0.5) * 8.0);
            if (kind == 1) v *= 1e-30f;                         /* fp32 subnormal scales */
            if (kind == 2 && (i / 128 + j / 128) % 2) v = 0.0f; /* blocks of zeros */
            if (kind == 3 && u < 0.002) v = u < 0.001 ? NAN : (u < 0.0015 ? INFINITY : -INFINITY);
            if (u > 0.999) v = dt == FASTGLU_DTYPE_FP16 ? 65504.0f : 3.0e38f;
            if (u > 0.998 && u <= 0.999) v = 1e-7f;
            put(dt, x, i * x_rs + j, v);
        }
    const int64_t rb = fastglu_fp8_blocks(R), cb = fastglu_fp8_blocks(C);
    const int64_t s_rows = w128 ? rb : R, s_nb = cb, st_rows = w128 ? cb : C, st_nb = rb;
    const int64_t s_ld = mn ? s_rows + 3 : s_nb + 1, st_ld = mn ? st_rows + 3 : st_nb + 1;
    const size_t s_n = (size_t)(mn ? s_nb * s_ld : s_rows * s_ld),
                 st_n = (size_t)(mn ? st_nb * st_ld : st_rows * st_ld);
    bufs b[2];
    for (int k = 0; k < 2; ++k) {
        b[k].d.assign(row ? (size_t)(R * d_rs + 16) : 0, 0xa5);
        b[k].dt.assign(col ? (size_t)(C * dt_rs + 16) : 0, 0xa5);
        b[k].s.assign(row ? s_n : 0, -12345.0f);
        b[k].st.assign(col ? st_n : 0, -12345.0f);
        fastglu_fp8_recipe r = {
            w128 ? FASTGLU_FP8_SCALING_BLOCK_128X128 : FASTGLU_FP8_SCALING_BLOCK_1X128,
            mn ? FASTGLU_FP8_SCALES_MN_MAJOR : FASTGLU_FP8_SCALES_ROW_MAJOR, pow2};
        fastglu_fp8_out o;
        memset(&o, 0, sizeof o);
        o.data = {row ? b[k].d.data() : NULL, FASTGLU_DTYPE_FP8_E4M3, d_rs};
        o.scale = {row ? b[k].s.data() : NULL, FASTGLU_DTYPE_FP32, s_ld};
        o.data_t = {col ? b[k].dt.data() : NULL, FASTGLU_DTYPE_FP8_E4M3, dt_rs};
        o.scale_t = {col ? b[k].st.data() : NULL, FASTGLU_DTYPE_FP32, st_ld};
        const fastglu_tensor xt = {x, dt, x_rs};
        const fastglu_status st = k == 0 ? fastglu_quantize_fp8_cuda(&r, xt, &o, R, C, NULL)
                                         : fastglu_quantize_fp8_cpu(&r, xt, &o, R, C);
        if (st != FASTGLU_SUCCESS) {
            FAIL("dt %d w128 %d R %lld C %lld: status %d (%s)", (int)dt, w128, (long long)R,
                 (long long)C, (int)st, fastglu_last_error_message());
            return;
        }
    }
    cases++;
    const char *what = "";
    if (b[0].d != b[1].d) what = "data";
    if (b[0].s.size() && memcmp(b[0].s.data(), b[1].s.data(), b[0].s.size() * 4)) what = "scale";
    if (b[0].dt != b[1].dt) what = "data_t";
    if (b[0].st.size() && memcmp(b[0].st.data(), b[1].st.data(), b[0].st.size() * 4))
        what = "scale_t";
    if (*what)
        FAIL("%s differs from the CPU backend: dtype %d w128 %d mn %d pow2 %d row %d col %d R %lld "
             "C %lld strides %d kind %d",
             what, (int)dt, w128, mn, pow2, row, col, (long long)R, (long long)C, strides, kind);
}

/* fastglu_glu_fp8_store_blockwise_*: the operands [T, W] (W = F, or 2F interleaved; SPLIT: gate
 * and up), values of every kind as above; a clamp or not; row strides dense, 16-byte padded or odd
 * (the vector and element paths). Codes (their row padding and the bytes after them sentinel) and
 * scales compared bit for bit with the CPU backend's. */
static void run_store_case(fastglu_dtype dt, int il, int64_t T, int64_t F, float clamp, int strides,
                           int halves, int sat) {
    const int64_t W = il ? 2 * F : F, parts = il ? 1 : 2;
    const int64_t pad = strides == DENSE ? 0 : strides == PADDED ? 16 : 1;
    /* halves (SPLIT): gate's and up's codes as the two halves of one [T, 2F] row */
    const int64_t x_rs = W + (strides == PADDED ? 8 : pad), d_rs = (halves ? 2 * W : W) + pad;
    const int64_t nb = parts * fastglu_fp8_blocks(W), s_rs = nb + pad;
    std::vector<float> xs[2];
    const int kind = (int)(urand() * 4);
    for (int k = 0; k < parts; ++k) {
        xs[k].assign((size_t)(T * x_rs + 8), 0.0f);
        memset(xs[k].data(), 0x7f, xs[k].size() * sizeof(float));
        for (int64_t i = 0; i < T; ++i)
            for (int64_t j = 0; j < W; ++j) {
                double u = urand();
                float v = (float)((urand() - 0.5) * 16.0);
                if (kind == 1) v *= 1e-37f;                        /* subnormal and tiny amaxes */
                if (kind == 2 && (i + j / 128) % 3 == 0) v = 0.0f; /* blocks of zeros */
                if (kind == 3 && u < 0.004)
                    v = u < 0.002 ? NAN : (u < 0.003 ? INFINITY : -INFINITY);
                if (u > 0.999) v = dt == FASTGLU_DTYPE_FP16 ? 65504.0f : 3.0e38f;
                if (u > 0.997 && u <= 0.999) v = clamp > 0 ? clamp * (u > 0.998 ? 1 : -1) : 1e-7f;
                put(dt, xs[k].data(), i * x_rs + j, v);
            }
    }
    std::vector<unsigned char> d[2][2];
    std::vector<float> sc[2];
    for (int b = 0; b < 2; ++b) {
        for (int k = 0; k < 2; ++k) d[b][k].assign((size_t)(T * d_rs + 16), 0xa5);
        sc[b].assign((size_t)(T * s_rs + 4), -12345.0f);
        fastglu_glu_params p = fastglu_glu_params_default(FASTGLU_ACT_SILU);
        p.layout = il ? FASTGLU_LAYOUT_INTERLEAVED : FASTGLU_LAYOUT_SPLIT;
        p.clamp_value = clamp;
        const fastglu_tensor g = {xs[0].data(), dt, x_rs}, u = {il ? NULL : xs[1].data(), dt, x_rs},
                             g8 = {d[b][0].data(), FASTGLU_DTYPE_FP8_E4M3, d_rs},
                             u8 = {il       ? NULL
                                   : halves ? d[b][0].data() + F
                                            : d[b][1].data(),
                                   FASTGLU_DTYPE_FP8_E4M3, d_rs},
                             s = {sc[b].data(), FASTGLU_DTYPE_FP32, s_rs};
        fastglu_set_fp8_saturate(sat);
        const fastglu_status st =
            b == 0 ? fastglu_glu_fp8_store_blockwise_cuda(&p, g, u, g8, u8, s, T, F, NULL)
                   : fastglu_glu_fp8_store_blockwise_cpu(&p, g, u, g8, u8, s, T, F);
        if (st != FASTGLU_SUCCESS) {
            FAIL("store dt %d il %d T %lld F %lld: status %d (%s)", (int)dt, il, (long long)T,
                 (long long)F, (int)st, fastglu_last_error_message());
            return;
        }
    }
    cases++;
    const char *what = "";
    if (d[0][0] != d[1][0] || d[0][1] != d[1][1]) what = "codes";
    if (memcmp(sc[0].data(), sc[1].data(), sc[0].size() * 4)) what = "scale_inv";
    if (*what)
        FAIL("store: %s differ from the CPU backend: dtype %d il %d T %lld F %lld clamp %g "
             "strides %d halves %d sat %d kind %d",
             what, (int)dt, il, (long long)T, (long long)F, (double)clamp, strides, halves, sat,
             kind);
    fastglu_set_fp8_saturate(1);
}

/* fastglu_glu_fwd_fp8_store_blockwise_*: y [T, F] and the copy, the CUDA entry (one kernel with
 * SPLIT) against the CPU backend's (fastglu_glu_fwd_cpu, then the copy): the store case's values,
 * an activation, a bias [2F] and per-token weights or not, y's rows dense, padded or odd (its 16-byte
 * and element paths). y, codes and scales with their padding compared bit for bit. */
static void run_fused_case(fastglu_dtype dt, int il, int64_t T, int64_t F, float clamp, int strides,
                           int act, int bias, int weights) {
    const int64_t W = il ? 2 * F : F, parts = il ? 1 : 2;
    const int64_t pad = strides == DENSE ? 0 : strides == PADDED ? 16 : 1;
    const int64_t x_rs = W + (strides == PADDED ? 8 : pad), d_rs = W + pad;
    const int64_t y_rs = F + (strides == PADDED ? 8 : pad);
    const int64_t nb = parts * fastglu_fp8_blocks(W), s_rs = nb + pad;
    const size_t es = fastglu_dtype_size(dt);
    std::vector<float> xs[2], bs(2 * F + 8), ws(T + 8);
    for (int k = 0; k < parts; ++k) {
        xs[k].assign((size_t)(T * x_rs + 8), 0.0f);
        memset(xs[k].data(), 0x7f, xs[k].size() * sizeof(float));
        for (int64_t i = 0; i < T; ++i)
            for (int64_t j = 0; j < W; ++j) {
                const double u = urand();
                float v = (float)((urand() - 0.5) * 16.0);
                if (u < 0.002) v = u < 0.001 ? NAN : INFINITY;
                if (u > 0.998) v = clamp > 0 ? clamp * (u > 0.999 ? 1 : -1) : 0.0f;
                put(dt, xs[k].data(), i * x_rs + j, v);
            }
    }
    for (int64_t j = 0; j < 2 * F; ++j) put(dt, bs.data(), j, (float)(urand() - 0.5));
    for (int64_t t = 0; t < T; ++t) ws[t] = (float)urand() + 0.25f;
    std::vector<unsigned char> d[2][2];
    std::vector<float> sc[2], ys[2];
    for (int b = 0; b < 2; ++b) {
        for (int k = 0; k < 2; ++k) d[b][k].assign((size_t)(T * d_rs + 16), 0xa5);
        sc[b].assign((size_t)(T * s_rs + 4), -12345.0f);
        ys[b].assign((size_t)((T * y_rs * es + 64) / 4), -777.0f);
        static const fastglu_activation acts[] = {FASTGLU_ACT_SILU, FASTGLU_ACT_GELU_TANH,
                                                  FASTGLU_ACT_QUICK_GELU};
        fastglu_glu_params p = fastglu_glu_params_default(acts[act]);
        p.layout = il ? FASTGLU_LAYOUT_INTERLEAVED : FASTGLU_LAYOUT_SPLIT;
        p.clamp_value = clamp;
        if (act == 2) p.glu_linear_offset = 1.0f;
        if (act == 1) p.gate_multiplier = 0.5f, p.down_multiplier = 2.0f;
        fastglu_glu_operands o;
        memset(&o, 0, sizeof o);
        o.gate = {xs[0].data(), dt, x_rs};
        o.up = {il ? NULL : xs[1].data(), dt, x_rs};
        o.bias = {bias ? bs.data() : NULL, dt, 1};
        o.weights = {weights ? ws.data() : NULL, FASTGLU_DTYPE_FP32, 1};
        o.scale_inv = {NULL, FASTGLU_DTYPE_FP32, 0};
        const fastglu_tensor y = {ys[b].data(), dt, y_rs},
                             g8 = {d[b][0].data(), FASTGLU_DTYPE_FP8_E4M3, d_rs},
                             u8 = {il ? NULL : d[b][1].data(), FASTGLU_DTYPE_FP8_E4M3, d_rs},
                             s = {sc[b].data(), FASTGLU_DTYPE_FP32, s_rs};
        const fastglu_status st =
            b == 0 ? fastglu_glu_fwd_fp8_store_blockwise_cuda(&p, &o, y, g8, u8, s, T, F, NULL)
                   : fastglu_glu_fwd_fp8_store_blockwise_cpu(&p, &o, y, g8, u8, s, T, F);
        if (st != FASTGLU_SUCCESS) {
            FAIL("fused dt %d il %d T %lld F %lld: status %d (%s)", (int)dt, il, (long long)T,
                 (long long)F, (int)st, fastglu_last_error_message());
            return;
        }
    }
    cases++;
    const char *what = "";
    if (memcmp(ys[0].data(), ys[1].data(), ys[0].size() * 4)) what = "y";
    if (d[0][0] != d[1][0] || d[0][1] != d[1][1]) what = "codes";
    if (memcmp(sc[0].data(), sc[1].data(), sc[0].size() * 4)) what = "scale_inv";
    if (*what)
        FAIL("fused: %s differ from the CPU backend: dtype %d il %d T %lld F %lld clamp %g "
             "strides %d act %d bias %d weights %d",
             what, (int)dt, il, (long long)T, (long long)F, (double)clamp, strides, act, bias,
             weights);
}

int main(void) {
    fastglu_set_fp8_saturate(1);
    static const int64_t shapes[][2] = {{1, 1},     {3, 5},    {130, 136},
                                        {129, 260}, {17, 256}, {256, 8}};
    static const fastglu_dtype dts[] = {FASTGLU_DTYPE_BF16, FASTGLU_DTYPE_FP16, FASTGLU_DTYPE_FP32};
    for (int w128 = 0; w128 < 2; ++w128)
        for (int di = 0; di < 3; ++di)
            for (int si = 0; si < 6; ++si)
                for (int strides = DENSE; strides <= ODD; ++strides)
                    for (int outs = 1; outs <= 3; ++outs) {
                        const int mn = (si + outs) % 2, pow2 = (si + strides + w128) % 3 == 0;
                        run_case(dts[di], w128, mn, pow2, outs & 1, outs >> 1, shapes[si][0],
                                 shapes[si][1], strides);
                    }
    static const int64_t store_shapes[][2] = {{1, 1},    {3, 5},   {2, 128},
                                              {37, 200}, {3, 264}, {13, 8}};
    static const float clamps[] = {0.0f, 7.0f, 0.3f, INFINITY};
    for (int di = 0; di < 3; ++di)
        for (int il = 0; il < 2; ++il)
            for (int si = 0; si < 6; ++si)
                for (int strides = DENSE; strides <= ODD; ++strides)
                    run_store_case(dts[di], il, store_shapes[si][0], store_shapes[si][1],
                                   clamps[(si + strides + il) % 4], strides,
                                   !il && (si + strides) % 2, (si + strides + di) % 2);
    const long fused_before = fused_launches;
    for (int di = 0; di < 3; ++di)
        for (int il = 0; il < 2; ++il)
            for (int si = 0; si < 6; ++si)
                for (int strides = DENSE; strides <= ODD; ++strides) {
                    const int k = si + strides + di;
                    run_fused_case(dts[di], il, store_shapes[si][0], store_shapes[si][1],
                                   clamps[(k + il) % 4], strides, k % 3, k % 2, (k / 2) % 2);
                }
    if (fused_launches - fused_before != 3 * 6 * 3) /* SPLIT: one fused kernel a case */
        FAIL("the fused kernel ran %ld times, expected %d", fused_launches - fused_before,
             3 * 6 * 3);
    printf("quant_fp8 kernel emulation: %d cases, %ld launches (%ld of the fused forward), %d "
           "failures\n",
           cases, launches, fused_launches, failures);
    return failures ? 1 : 0;
}
