/* tests/emu/fp8_emu.cpp — the FP8 kernels of src/glu_fp8_cuda.cu compiled as host C++
 * (tests/emu/shim stands in for the CUDA headers) and run block by block, each block's 256 threads
 * as coroutines that switch at __syncthreads() and at every warp shuffle (each waits at a barrier
 * of the threads in its mask, so a half-warp's shuffles pair only with its own lanes;
 * tests/emu/emu_threads.h). The
 * entry points fastglu_glu_fwd_fp8_cuda / fastglu_glu_bwd_fp8_cuda run on host memory; their codes
 * and scales are compared bit for bit with the recipe (src/fp8_recipe.h) applied on the host to the
 * y (dh) the same kernel wrote, whole buffers with their padding (sentinels), and the codes of a run
 * without y with those of the run with it. Contiguous, 16-byte-aligned and odd row strides reach
 * the kernel's 16-byte and element-by-element paths; UBSan checks the alignment of every vector
 * access and the shim counts misaligned loads. */
#include <cfloat>
#include <vector>

#define FASTGLU_HOST_EMULATION 1
#define FASTGLU_HAVE_CUDA 1
#define __shared__
#include "cuda_runtime.h"
#include "emu_threads.h"
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline int64_t min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline unsigned atomicMax(unsigned *p, unsigned v) {
    const unsigned old = *p;
    if (v > old) *p = v;
    return old;
}
#include "cuda_bf16.h"
#include "cuda_fp16.h"

alignas(16) unsigned char smem_raw[228 * 1024]; /* the block's dynamic shared memory */

#include "glu_fp8_cuda.cu"

/* ---- the kernels' launches: each block's threads as coroutines (emu_threads.h) --------------- */

static emu_body body;
static long red_launches, reduce_launches; /* kernels with the backward's sums; their reduction */
/* the general kernels in math mode MM_K (plain SwiGLU / quick-GeGLU with a bias or weights) and in
 * MM_ANY (the rest) */
static long gk_launches, gany_launches;
/* the backward's kernels reading the blockwise copy (H8: split and paired tiles); the forward's
 * writing it (cp) */
static long h8_launches, h8_pair_launches, cp_launches;
template <typename E, int MODE, int COLWISE, int BWD, int FAST, int RED, int GM, int H8>
static void run_k(void **args) {
    glu_fp8_kernel<E, MODE, COLWISE, BWD, FAST, RED, GM, H8>(*(const fp8_args *)args[0]);
}
template <typename E, int MODE, int COLWISE, int BWD, int FAST, int RED, int GM, int H8>
static int try_k_h8(const void *f) {
    if (f != (const void *)glu_fp8_kernel<E, MODE, COLWISE, BWD, FAST, RED, GM, H8>) return 0;
    body = run_k<E, MODE, COLWISE, BWD, FAST, RED, GM, H8>;
    red_launches += RED;
    gk_launches += !FAST && GM == MM_K, gany_launches += !FAST && GM == MM_ANY;
    h8_launches += H8 && BWD, cp_launches += H8 && !BWD;
    return 1;
}
template <typename E, int MODE, int COLWISE, int BWD, int FAST, int RED, int GM>
static int try_k(const void *f) {
    if constexpr (BWD || (MODE == MODE_BLOCK && !RED))
        if (try_k_h8<E, MODE, COLWISE, BWD, FAST, RED, GM, 1>(f)) return 1;
    return try_k_h8<E, MODE, COLWISE, BWD, FAST, RED, GM, 0>(f);
}
template <typename E, int BWD, int FAST, int RED, int GM> static int find_mode(const void *f) {
    return try_k<E, MODE_BLOCK, 0, BWD, FAST, RED, GM>(f) ||
           try_k<E, MODE_BLOCK, 1, BWD, FAST, RED, GM>(f) ||
           try_k<E, MODE_AMAX, 0, BWD, FAST, RED, GM>(f) ||
           try_k<E, MODE_TENSOR, 0, BWD, FAST, RED, GM>(f) ||
           try_k<E, MODE_TENSOR, 1, BWD, FAST, RED, GM>(f);
}
/* FAST's kernels (math mode MM_K), the general ones in MM_ANY and in MM_K */
template <typename E, int BWD, int FAST, int RED> static int find_fast(const void *f) {
    if (FAST) return find_mode<E, BWD, FAST, RED, MM_K>(f);
    return find_mode<E, BWD, FAST, RED, MM_ANY>(f) || find_mode<E, BWD, FAST, RED, MM_K>(f);
}
/* the backward's paired tiles (glu_fp8_bwd_pair_kernel) */
static long pair_launches;
static long pair_red_launches;
static long pair_colwise_launches;
template <typename E, int MODE, int FAST, int RED, int CW, int GM, int H8>
static void run_pair(void **args) {
    glu_fp8_bwd_pair_kernel<E, MODE, FAST, RED, CW, GM, H8>(*(const fp8_args *)args[0]);
}
template <typename E, int MODE, int FAST, int RED, int CW, int GM, int H8>
static int try_pair_h8(const void *f) {
    if (f != (const void *)glu_fp8_bwd_pair_kernel<E, MODE, FAST, RED, CW, GM, H8>) return 0;
    body = run_pair<E, MODE, FAST, RED, CW, GM, H8>;
    gk_launches += !FAST && GM == MM_K, gany_launches += !FAST && GM == MM_ANY;
    h8_pair_launches += H8;
    return 1;
}
template <typename E, int MODE, int FAST, int RED, int CW, int GM>
static int try_pair_gm(const void *f) {
    return try_pair_h8<E, MODE, FAST, RED, CW, GM, 0>(f) ||
           try_pair_h8<E, MODE, FAST, RED, CW, GM, 1>(f);
}
template <typename E, int MODE, int FAST, int RED, int CW = 0> static int try_pair(const void *f) {
    if (!(FAST ? try_pair_gm<E, MODE, FAST, RED, CW, MM_K>(f)
               : try_pair_gm<E, MODE, FAST, RED, CW, MM_ANY>(f) ||
                     try_pair_gm<E, MODE, FAST, RED, CW, MM_K>(f)))
        return 0;
    pair_launches++;
    pair_red_launches += RED;
    pair_colwise_launches += CW;
    return 1;
}
template <typename E, int FAST, int RED> static int find_pair(const void *f) {
    if (try_pair<E, MODE_BLOCK, FAST, RED>(f) || try_pair<E, MODE_AMAX, FAST, RED>(f) ||
        try_pair<E, MODE_TENSOR, FAST, RED>(f))
        return 1;
    if constexpr (sizeof(E) == 2) /* the column-wise copy on paired tiles: 2-byte dtypes */
        return try_pair<E, MODE_BLOCK, FAST, RED, 1>(f) ||
               try_pair<E, MODE_TENSOR, FAST, RED, 1>(f);
    return 0;
}
/* the backward's shifted pairs (glu_fp8_bwd_shift_kernel: 2-byte dtypes; H8: from the blockwise
 * copy, unless fastglu_debug_set_fp8_saved_shift(0)) */
static long shift_launches, shift_colwise_launches, shift_h8_launches;
template <typename E, int CW, int H8> static void run_shift(void **args) {
    glu_fp8_bwd_shift_kernel<E, CW, H8>(*(const fp8_args *)args[0]);
}
template <typename E, int CW, int H8> static int try_shift(const void *f) {
    if (f != (const void *)glu_fp8_bwd_shift_kernel<E, CW, H8>) return 0;
    body = run_shift<E, CW, H8>;
    shift_launches++, shift_colwise_launches += CW, shift_h8_launches += H8;
    return 1;
}
template <typename E> static int find_shift(const void *f) {
    if constexpr (sizeof(E) == 2)
        return try_shift<E, 0, 0>(f) || try_shift<E, 1, 0>(f) || try_shift<E, 0, 1>(f) ||
               try_shift<E, 1, 1>(f);
    return 0;
}
template <typename E> static void run_reduce(void **args) {
    fp8_reduce_kernel<E>(*(const fp8_red_args *)args[0]);
}
template <typename E, int BWD> static int find_e(const void *f) {
    if (BWD && f == (const void *)fp8_reduce_kernel<E>) {
        body = run_reduce<E>;
        reduce_launches++;
        return 1;
    }
    return find_fast<E, BWD, 0, 0>(f) || find_fast<E, BWD, 1, 0>(f) ||
           (BWD && (find_fast<E, BWD, 0, 1>(f) || find_shift<E>(f) || find_pair<E, 0, 0>(f) ||
                    find_pair<E, 1, 0>(f) || find_pair<E, 0, 1>(f) || find_pair<E, 1, 1>(f)));
}

static size_t smem_bytes;
static void junk_smem(void) {
    memset(smem_raw, 0x5a, smem_bytes);
} /* shared memory starts as junk */

static long launches;
cudaError_t cudaLaunchKernel(const void *f, dim3 grid, dim3 block, void **args, size_t smem,
                             cudaStream_t) {
    if (!(find_e<float, 0>(f) || find_e<__half, 0>(f) || find_e<__nv_bfloat16, 0>(f) ||
          find_e<float, 1>(f) || find_e<__half, 1>(f) || find_e<__nv_bfloat16, 1>(f)))
        return cudaErrorInvalidValue;
    if (smem > sizeof smem_raw) return cudaErrorInvalidValue;
    launches++;
    smem_bytes = smem;
    emu_run_blocks(body, args, grid, block, junk_smem);
    return cudaSuccess;
}
cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *, const void *, void **) {
    return cudaErrorInvalidValue; /* not used by glu_fp8_cuda.cu */
}
/* The copy's own kernel (quant_fp8_cuda.cu, emulated in quant_emu.cpp) after the forward's, where
 * the forward's kernel does not write the copy: here its CPU twin, the same bits. */
static long copy_fallbacks;
extern "C" fastglu_status
fastglu_glu_fp8_store_blockwise_cuda(const fastglu_glu_params *params, fastglu_tensor gate,
                                     fastglu_tensor up, fastglu_tensor gate_fp8,
                                     fastglu_tensor up_fp8, fastglu_tensor scale_inv,
                                     int64_t tokens, int64_t F, void *) {
    copy_fallbacks++;
    return fastglu_glu_fp8_store_blockwise_cpu(params, gate, up, gate_fp8, up_fp8, scale_inv,
                                               tokens, F);
}

/* ---- the check ------------------------------------------------------------------------------- */

static uint64_t rng = 0x9E3779B97F4A7C15ull;
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
static float get(fastglu_dtype dt, const void *base, int64_t i) {
    if (dt == FASTGLU_DTYPE_FP32) return ((const float *)base)[i];
    const uint16_t h = ((const uint16_t *)base)[i];
    return dt == FASTGLU_DTYPE_BF16 ? bf16_to_f32(h) : fp16_to_f32(h);
}

static int failures;
#define FAIL(...)                                                                                  \
    do {                                                                                           \
        if (failures++ < 20) {                                                                     \
            fprintf(stderr, "FAIL: ");                                                             \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
        }                                                                                          \
    } while (0)

enum { ODD = 0, DENSE = 1, VIEW = 2 };

struct outs {
    std::vector<unsigned char> y, d, dt, ws, db;
    std::vector<float> s, st, dw;
};

/* The parameters besides the activation and the clamp (run_case's tweak): each takes the call off
 * the FAST kernels (glu_fp8), as bias and weights do. */
enum { PLAIN = 0, GATE_MULT = 1, DOWN_MULT = 2, OFFSET = 3 };

/* One case: the kernel with y, then without; the recipe on the host from the kernel's y. */
/* h8 (the backward): the operands from a blockwise copy (fastglu_glu_bwd_fp8_saved_blockwise_*):
 * random codes (NaN left out: the CPU backend's decoding drops its sign) and random scales; dh
 * is then also compared with fastglu_glu_bwd_cpu's from the same copy (scale_1x128). */
static void run_case(fastglu_activation act, int il, int bias, int weights, float clamp,
                     fastglu_dtype dt, int64_t T, int64_t F, int bwd, int tensor, int mn, int pow2,
                     int colwise, int strides, int tweak = PLAIN, int sums = 0, int h8 = 0) {
    char what[240];
    snprintf(what, sizeof what,
             "%s act=%d il=%d bias=%d w=%d clamp=%g dt=%d T=%lld F=%lld tensor=%d mn=%d pow2=%d "
             "colwise=%d strides=%d tweak=%d sums=%d h8=%d",
             bwd ? "bwd" : "fwd", (int)act, il, bias, weights, (double)clamp, (int)dt, (long long)T,
             (long long)F, tensor, mn, pow2, colwise, strides, tweak, sums, h8);
    /* sums: the backward's dbias (with bias) and dweights (with weights) */
    const int want_db = bwd && sums && bias, want_dw = bwd && sums && weights;
    const size_t es = fastglu_dtype_size(dt);
    const int64_t X = bwd ? 2 * F : F, p16 = 16 / (int64_t)es;
    int64_t in_rs = 2 * F + 3, dy_rs = F + 1, y_rs = X + 2, d_rs = X + 5, dt_rs = T + 7;
    if (strides == DENSE) in_rs = 2 * F, dy_rs = F, y_rs = X, d_rs = X, dt_rs = T;
    if (strides == VIEW)
        in_rs = 2 * F + 2 * p16, dy_rs = F + p16, y_rs = X + p16, d_rs = X + 16,
        dt_rs = (T + 15) / 16 * 16 + 16;
    const int64_t nb = (X + 127) / 128, nbt = (T + 127) / 128;
    const int64_t s_ld = tensor ? 0
                         : mn   ? T + 1
                                : nb + 1,
                  st_ld = tensor ? 0
                          : mn   ? X + 1
                                 : nbt + 1;
    const int64_t s_n = tensor ? 2 : mn ? nb * s_ld : T * s_ld;
    const int64_t st_n = tensor || !colwise ? 1 : mn ? nbt * st_ld : X * st_ld;
    /* 16-byte aligned host buffers: the alignment the kernel sees is the strides' */
    std::vector<uint4> hbuf((size_t)(T * in_rs) * es / 16 + 2),
        dybuf((size_t)(T * dy_rs) * es / 16 + 2), bbuf((size_t)(2 * F) * es / 16 + 2);
    unsigned char *h = (unsigned char *)hbuf.data(), *dy = (unsigned char *)dybuf.data(),
                  *b = (unsigned char *)bbuf.data();
    std::vector<float> w((size_t)T);
    for (int64_t i = 0; i < T * in_rs; ++i) put(dt, h, i, (float)(urand() * 8.0 - 4.0));
    for (int64_t i = 0; i < T * dy_rs; ++i) put(dt, dy, i, (float)(urand() * 2.0 - 1.0));
    for (int64_t i = 0; i < 2 * F; ++i) put(dt, b, i, (float)(urand() * 2.0 - 1.0));
    for (int64_t i = 0; i < T; ++i) w[(size_t)i] = (float)urand();
    if (T >= 3) /* an all-zero row of the operands */
        for (int64_t j = 0; j < 2 * F; ++j) put(dt, h, 2 * in_rs + j, 0.0f);
    /* the copy: codes [T][in8_rs] bytes (SPLIT: gate's then up's columns), scales [T][sc_rs] */
    const int64_t nbs = il ? (2 * F + 127) / 128 : 2 * ((F + 127) / 128);
    const int64_t in8_rs = strides == ODD ? 2 * F + 3 : strides == DENSE ? 2 * F : 2 * F + 16;
    const int64_t sc_rs = strides == ODD ? nbs + 1 : strides == DENSE ? nbs : nbs + 4;
    std::vector<uint4> h8buf(h8 ? (size_t)(T * in8_rs) / 16 + 2 : 1);
    std::vector<float> h8s(h8 ? (size_t)(T * sc_rs) : 1);
    unsigned char *c8 = (unsigned char *)h8buf.data();
    for (int64_t i = 0; h8 && i < T * in8_rs; ++i) {
        const unsigned char b = (unsigned char)(urand() * 256.0);
        c8[i] = (b & 0x7f) == 0x7f ? (unsigned char)(b - 1) : b;
    }
    for (int64_t i = 0; h8 && i < T * sc_rs; ++i)
        h8s[(size_t)i] = i % 7 == 3 ? 1.0f : (float)((0.5 + urand()) * 0.02);
    const fastglu_tensor sct = {h8s.data(), FASTGLU_DTYPE_FP32, sc_rs};
    fastglu_tensor g8t = {c8, FASTGLU_DTYPE_FP8_E4M3, in8_rs},
                   u8t = {il ? NULL : c8 + F, FASTGLU_DTYPE_FP8_E4M3, in8_rs};
    fastglu_glu_params p = fastglu_glu_params_default(act);
    p.layout = il ? FASTGLU_LAYOUT_INTERLEAVED : FASTGLU_LAYOUT_SPLIT, p.clamp_value = clamp;
    if (tweak == GATE_MULT) p.gate_multiplier = 0.75f;
    if (tweak == DOWN_MULT) p.down_multiplier = 1.5f;
    if (tweak == OFFSET) p.glu_linear_offset = 1.0f;
    fastglu_fp8_recipe r = {tensor ? FASTGLU_FP8_SCALING_TENSOR : FASTGLU_FP8_SCALING_BLOCK_1X128,
                            mn ? FASTGLU_FP8_SCALES_MN_MAJOR : FASTGLU_FP8_SCALES_ROW_MAJOR, pow2};
    const size_t ws_bytes = 64 + fastglu_glu_bwd_fp8_workspace_bytes(&r, T, F, want_db, want_dw);
    outs o[2];
    for (int with_y = 1; with_y >= 0; --with_y) {
        outs &u = o[with_y];
        u.y.assign((size_t)(T * y_rs) * es + 32, 0xa5);
        u.d.assign((size_t)(T * d_rs) + 32, 0xa5);
        u.dt.assign((size_t)(X * dt_rs) + 32, 0xa5);
        u.s.assign((size_t)s_n, -1234.5f), u.st.assign((size_t)st_n, -1234.5f);
        u.ws.assign(ws_bytes, 0x77);
        u.db.assign((size_t)(2 * F + 16) * es, 0xa5), u.dw.assign((size_t)T + 16, -1234.5f);
        /* 16-byte aligned starts: vector<unsigned char> storage is malloc'd (16-byte aligned) */
        fastglu_tensor gate = {h, dt, in_rs}, upt = {il ? NULL : h + F * es, dt, in_rs};
        fastglu_tensor bt = {bias ? b : NULL, dt, 1},
                       wt = {weights ? w.data() : NULL, FASTGLU_DTYPE_FP32, 1};
        fastglu_tensor yt = {with_y ? u.y.data() : NULL, dt, y_rs}, dyt = {dy, dt, dy_rs};
        fastglu_fp8_out out;
        memset(&out, 0, sizeof out);
        out.data = (fastglu_tensor){u.d.data(), FASTGLU_DTYPE_FP8_E4M3, d_rs};
        out.scale = (fastglu_tensor){u.s.data(), FASTGLU_DTYPE_FP32, s_ld};
        if (colwise) {
            out.data_t = (fastglu_tensor){u.dt.data(), FASTGLU_DTYPE_FP8_E4M3, dt_rs};
            if (!tensor) out.scale_t = (fastglu_tensor){u.st.data(), FASTGLU_DTYPE_FP32, st_ld};
        }
        out.workspace = u.ws.data(), out.workspace_bytes = ws_bytes;
        const fastglu_tensor dbt = {want_db ? u.db.data() + 8 * es : NULL, dt, 1},
                             dwt = {want_dw ? u.dw.data() + 8 : NULL, FASTGLU_DTYPE_FP32, 1};
        const fastglu_status st =
            h8    ? fastglu_glu_bwd_fp8_saved_blockwise_cuda(&p, &r, dyt, g8t, u8t, sct, bt, wt, yt,
                                                             dbt, dwt, &out, T, F, NULL)
            : bwd ? fastglu_glu_bwd_fp8_cuda(&p, &r, dyt, gate, upt, bt, wt, yt, dbt, dwt, &out, T,
                                             F, NULL)
                  : fastglu_glu_fwd_fp8_cuda(&p, &r, gate, upt, bt, wt, yt, &out, T, F, NULL);
        if (st != FASTGLU_SUCCESS) {
            FAIL("%s: status %d: %s", what, (int)st, fastglu_last_error_message());
            return;
        }
    }
    /* the kernel's y (dh) against the CPU backend's: the same per-element math (the shim's
     * special-function stand-ins are the CPU backend's) */
    {
        std::vector<unsigned char> yc(o[1].y.size(), 0xa5), dc((size_t)(T * d_rs) + 32),
            dbc(o[1].db.size(), 0xa5), wsc(ws_bytes, 0x33);
        std::vector<float> sc((size_t)s_n), stc((size_t)st_n), dwc(o[1].dw.size(), -1234.5f);
        fastglu_tensor gate = {h, dt, in_rs}, upt = {il ? NULL : h + F * es, dt, in_rs};
        fastglu_tensor bt = {bias ? b : NULL, dt, 1},
                       wt = {weights ? w.data() : NULL, FASTGLU_DTYPE_FP32, 1};
        fastglu_tensor yt = {yc.data(), dt, y_rs}, dyt = {dy, dt, dy_rs};
        fastglu_fp8_out out;
        memset(&out, 0, sizeof out);
        out.data = (fastglu_tensor){dc.data(), FASTGLU_DTYPE_FP8_E4M3, d_rs};
        out.scale = (fastglu_tensor){sc.data(), FASTGLU_DTYPE_FP32, s_ld};
        out.workspace = wsc.data(), out.workspace_bytes = ws_bytes;
        const fastglu_tensor dbt = {want_db ? dbc.data() + 8 * es : NULL, dt, 1},
                             dwt = {want_dw ? dwc.data() + 8 : NULL, FASTGLU_DTYPE_FP32, 1};
        const fastglu_status st =
            h8 ? fastglu_glu_bwd_fp8_saved_blockwise_cpu(&p, &r, dyt, g8t, u8t, sct, bt, wt, yt,
                                                         dbt, dwt, &out, T, F)
            : bwd
                ? fastglu_glu_bwd_fp8_cpu(&p, &r, dyt, gate, upt, bt, wt, yt, dbt, dwt, &out, T, F)
                : fastglu_glu_fwd_fp8_cpu(&p, &r, gate, upt, bt, wt, yt, &out, T, F);
        if (st != FASTGLU_SUCCESS) FAIL("%s: CPU status %d", what, (int)st);
        if (memcmp(yc.data(), o[1].y.data(), yc.size()))
            FAIL("%s: the kernel's y (dh) differs from the CPU backend's", what);
        if (h8) { /* dh as fastglu_glu_bwd_cpu decodes the copy (scale_1x128), bit for bit */
            std::vector<unsigned char> ds(o[1].y.size(), 0xa5);
            fastglu_glu_operands ops;
            memset(&ops, 0, sizeof ops);
            ops.gate = g8t, ops.up = u8t, ops.bias = bt, ops.weights = wt;
            ops.scale_inv = sct, ops.scale_1x128 = 1;
            fastglu_glu_grads gr;
            memset(&gr, 0, sizeof gr);
            gr.d_gate = (fastglu_tensor){ds.data(), dt, y_rs};
            gr.d_up = (fastglu_tensor){il ? NULL : ds.data() + F * es, dt, y_rs};
            const fastglu_workspace nows = {NULL, 0};
            if (fastglu_glu_bwd_cpu(&p, dyt, 1, &ops, &gr, nows, T, F) != FASTGLU_SUCCESS)
                FAIL("%s: fastglu_glu_bwd_cpu: %s", what, fastglu_last_error_message());
            for (int64_t t = 0; t < T; ++t)
                if (memcmp(ds.data() + (size_t)(t * y_rs) * es, yc.data() + (size_t)(t * y_rs) * es,
                           (size_t)(2 * F) * es)) {
                    FAIL("%s: dh row %lld differs from fastglu_glu_bwd_cpu's from the copy", what,
                         (long long)t);
                    break;
                }
        }
        /* the sums bit for bit (both runs of the kernel), the padding untouched */
        for (int with_y = 1; with_y >= 0; --with_y) {
            if (memcmp(dbc.data(), o[with_y].db.data(), dbc.size()))
                FAIL("%s: the kernel's dbias differs from the CPU backend's (run %d)", what,
                     with_y);
            if (memcmp(dwc.data(), o[with_y].dw.data(), dwc.size() * 4))
                FAIL("%s: the kernel's dweights differ from the CPU backend's (run %d)", what,
                     with_y);
        }
        int written = 0;
        for (int64_t k = 0; want_db && k < 2 * F; ++k)
            written |= dbc[(size_t)((8 + k) * (int64_t)es)] != 0xa5 ||
                       dbc[(size_t)((8 + k) * (int64_t)es + (int64_t)es - 1)] != 0xa5;
        for (int64_t t = 0; want_dw && t < T; ++t) written |= dwc[(size_t)(8 + t)] != -1234.5f;
        if ((want_db || want_dw) && !written) FAIL("%s: no sum written", what);
    }
    /* the recipe on the kernel's own y, into sentinel-filled buffers like the kernel's */
    std::vector<float> yv((size_t)(T * X));
    for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < X; ++j)
            yv[(size_t)(t * X + j)] = get(dt, o[1].y.data(), t * y_rs + j);
    outs e;
    e.d.assign(o[1].d.size(), 0xa5), e.dt.assign(o[1].dt.size(), 0xa5);
    e.s.assign((size_t)s_n, -1234.5f), e.st.assign((size_t)st_n, -1234.5f);
    uint32_t tam = 0;
    for (size_t i = 0; i < yv.size(); ++i) tam = max(tam, fastglu_abs_bits(yv[i]));
    const float ts = fastglu_fp8_scale(tam, pow2);
    if (tensor) e.s[0] = ts;
    for (int64_t t = 0; t < T; ++t)
        for (int64_t k = 0; k < nb; ++k) {
            uint32_t am = 0;
            const int64_t n = X - 128 * k < 128 ? X - 128 * k : 128;
            for (int64_t j = 0; j < n; ++j)
                am = max(am, fastglu_abs_bits(yv[(size_t)(t * X + 128 * k + j)]));
            const float s = tensor ? ts : fastglu_fp8_scale(am, pow2);
            if (!tensor) e.s[(size_t)(mn ? k * s_ld + t : t * s_ld + k)] = s;
            for (int64_t j = 0; j < n; ++j)
                e.d[(size_t)(t * d_rs + 128 * k + j)] =
                    fastglu_fp8_quantise(yv[(size_t)(t * X + 128 * k + j)], s);
        }
    if (colwise)
        for (int64_t j = 0; j < X; ++j)
            for (int64_t k = 0; k < nbt; ++k) {
                uint32_t am = 0;
                const int64_t n = T - 128 * k < 128 ? T - 128 * k : 128;
                for (int64_t i = 0; i < n; ++i)
                    am = max(am, fastglu_abs_bits(yv[(size_t)((128 * k + i) * X + j)]));
                const float s = tensor ? ts : fastglu_fp8_scale(am, pow2);
                if (!tensor) e.st[(size_t)(mn ? k * st_ld + j : j * st_ld + k)] = s;
                for (int64_t i = 0; i < n; ++i)
                    e.dt[(size_t)(j * dt_rs + 128 * k + i)] =
                        fastglu_fp8_quantise(yv[(size_t)((128 * k + i) * X + j)], s);
            }
    for (int with_y = 1; with_y >= 0; --with_y) {
        const outs &u = o[with_y];
        const char *run = with_y ? "with y" : "without y";
        if (memcmp(u.d.data(), e.d.data(), e.d.size()))
            FAIL("%s (%s): data differs from the recipe on the kernel's y", what, run);
        if (memcmp(u.dt.data(), e.dt.data(), e.dt.size()))
            FAIL("%s (%s): data_t differs from the recipe on the kernel's y", what, run);
        if (memcmp(u.s.data(), e.s.data(), e.s.size() * 4))
            FAIL("%s (%s): scales differ from the recipe on the kernel's y", what, run);
        if (memcmp(u.st.data(), e.st.data(), e.st.size() * 4))
            FAIL("%s (%s): scale_t differs from the recipe on the kernel's y", what, run);
    }
    for (size_t i = 0; i < o[0].y.size(); ++i)
        if (o[0].y[i] != 0xa5) {
            FAIL("%s: y written without y", what);
            break;
        }
}

/* ---- the FP8 forward with the blockwise copy (fastglu_glu_fwd_fp8_copy_blockwise_cuda) ------------
 * The emulated entry point against fastglu_glu_fwd_fp8_copy_blockwise_cpu (the FP8 forward, then
 * the copy): every output buffer bit for bit, with its padding and a margin of sentinels. Rows of
 * zeros, of tiny values (blocks without a scale: the plain cast) and one with an inf (bf16, fp32: a
 * block of the copy with an inf keeps it as the cast's; y's block then has an infinite scale) take
 * the copy's cold paths. */
static void run_copy_case(fastglu_activation act, int bias, int weights, int tweak,
                          fastglu_dtype dt, int64_t T, int64_t F, int colwise, int strides,
                          float clamp = 0.0f, int il = 0) {
    char what[200];
    snprintf(what, sizeof what,
             "fwd copy act=%d bias=%d w=%d tweak=%d dt=%d T=%lld F=%lld colwise=%d strides=%d "
             "clamp=%g il=%d",
             (int)act, bias, weights, tweak, (int)dt, (long long)T, (long long)F, colwise, strides,
             (double)clamp, il);
    const size_t es = fastglu_dtype_size(dt);
    const int64_t p16 = 16 / (int64_t)es;
    int64_t in_rs = 2 * F + 3, y_rs = F + 2, d_rs = F + 5, dt_rs = T + 7, c_rs = 2 * F + 3;
    if (strides == DENSE) in_rs = 2 * F, y_rs = F, d_rs = F, dt_rs = T, c_rs = 2 * F;
    if (strides == VIEW)
        in_rs = 2 * F + 2 * p16, y_rs = F + p16, d_rs = F + 16, dt_rs = (T + 15) / 16 * 16 + 16,
        c_rs = 2 * F + 8;
    const int64_t nb = (F + 127) / 128, nbt = (T + 127) / 128,
                  nbs = il ? (2 * F + 127) / 128 : 2 * nb, cs_rs = nbs + 1;
    std::vector<uint4> hbuf((size_t)(T * in_rs) * es / 16 + 2), bbuf((size_t)(2 * F) * es / 16 + 2);
    unsigned char *h = (unsigned char *)hbuf.data(), *b = (unsigned char *)bbuf.data();
    std::vector<float> w((size_t)T);
    for (int64_t i = 0; i < T * in_rs; ++i) put(dt, h, i, (float)(urand() * 8.0 - 4.0));
    for (int64_t i = 0; i < 2 * F; ++i) put(dt, b, i, (float)(urand() * 2.0 - 1.0));
    for (int64_t i = 0; i < T; ++i) w[(size_t)i] = (float)urand();
    if (T >= 4)
        for (int64_t j = 0; j < 2 * F; ++j)
            put(dt, h, in_rs + j, 0.0f), put(dt, h, 2 * in_rs + j, 1e-39f);
    if (T >= 4 && dt != FASTGLU_DTYPE_FP16) put(dt, h, 3 * in_rs + F / 2, INFINITY);
    fastglu_glu_params p = fastglu_glu_params_default(act);
    p.layout = il ? FASTGLU_LAYOUT_INTERLEAVED : FASTGLU_LAYOUT_SPLIT, p.clamp_value = clamp;
    if (tweak == GATE_MULT) p.gate_multiplier = 0.75f;
    if (tweak == OFFSET) p.glu_linear_offset = 1.0f;
    const fastglu_fp8_recipe r = {FASTGLU_FP8_SCALING_BLOCK_1X128, FASTGLU_FP8_SCALES_MN_MAJOR, 0};
    const int64_t s_ld = T + 1, st_ld = F + 1;
    std::vector<unsigned char> y[2], d[2], dtb[2], c[2];
    std::vector<float> sc[2], st[2], cs[2];
    const long fused0 = cp_launches, fall0 = copy_fallbacks;
    for (int k = 0; k < 2; ++k) { /* 0: the emulated kernels; 1: the CPU backend */
        y[k].assign((size_t)(T * y_rs) * es + 64, 0xa5), d[k].assign((size_t)(T * d_rs) + 64, 0xa5);
        dtb[k].assign((size_t)(F * dt_rs) + 64, 0xa5), c[k].assign((size_t)(T * c_rs) + 64, 0xa5);
        sc[k].assign((size_t)(nb * s_ld) + 16, -1234.5f),
            st[k].assign((size_t)(nbt * st_ld) + 16, -1234.5f);
        cs[k].assign((size_t)(T * cs_rs) + 16, -1234.5f);
        const fastglu_tensor gate = {h, dt, in_rs}, upt = {il ? NULL : h + F * es, dt, in_rs},
                             bt = {bias ? b : NULL, dt, 1},
                             wt = {weights ? w.data() : NULL, FASTGLU_DTYPE_FP32, 1},
                             yt = {y[k].data(), dt, y_rs};
        fastglu_fp8_out out;
        memset(&out, 0, sizeof out);
        out.data = (fastglu_tensor){d[k].data(), FASTGLU_DTYPE_FP8_E4M3, d_rs};
        out.scale = (fastglu_tensor){sc[k].data(), FASTGLU_DTYPE_FP32, s_ld};
        if (colwise) {
            out.data_t = (fastglu_tensor){dtb[k].data(), FASTGLU_DTYPE_FP8_E4M3, dt_rs};
            out.scale_t = (fastglu_tensor){st[k].data(), FASTGLU_DTYPE_FP32, st_ld};
        }
        const fastglu_tensor g8 = {c[k].data(), FASTGLU_DTYPE_FP8_E4M3, c_rs},
                             u8 = {il ? NULL : c[k].data() + F, FASTGLU_DTYPE_FP8_E4M3, c_rs},
                             s8 = {cs[k].data(), FASTGLU_DTYPE_FP32, cs_rs};
        const fastglu_status stt =
            k ? fastglu_glu_fwd_fp8_copy_blockwise_cpu(&p, &r, gate, upt, bt, wt, yt, &out, g8, u8,
                                                       s8, T, F)
              : fastglu_glu_fwd_fp8_copy_blockwise_cuda(&p, &r, gate, upt, bt, wt, yt, &out, g8, u8,
                                                        s8, T, F, NULL);
        if (stt != FASTGLU_SUCCESS) {
            FAIL("%s (%s): status %d: %s", what, k ? "cpu" : "emulated", (int)stt,
                 fastglu_last_error_message());
            return;
        }
    }
    if (y[0] != y[1]) FAIL("%s: y differs from the CPU backend's", what);
    if (d[0] != d[1] || sc[0] != sc[1])
        FAIL("%s: data / scale differ from the CPU backend's", what);
    if (dtb[0] != dtb[1] || st[0] != st[1])
        FAIL("%s: data_t / scale_t differ from the CPU backend's", what);
    if (c[0] != c[1]) FAIL("%s: the copy's codes differ from the CPU backend's", what);
    if (cs[0] != cs[1]) FAIL("%s: the copy's scales differ from the CPU backend's", what);
    /* the one kernel exactly where the contract says */
    const int want_fused = !il && clamp == 0.0f && F % 8 == 0 && strides != ODD;
    if ((cp_launches > fused0) != want_fused || (copy_fallbacks > fall0) == want_fused)
        FAIL("%s: the copy %s the forward's kernel", what, want_fused ? "not in" : "in");
}

/* ---- the reciprocal route of the codes (quantise2, quantise8) --------------------------------- */

/* quantise2 and quantise8 against the recipe's division (fastglu_fp8_quantise), code for code,
 * where the two could part: quotients at and up to 64 ulps around every rounding midpoint of e4m3
 * (between neighbouring codes, 2^-10 below the first subnormal, 464 where the cast saturates), both
 * signs, under scales of every kind: random normal ones, powers of two, amax / 448 of random
 * amaxes (fp32 and bf16), the route's ends and the scales it leaves to the division (under 2^-90,
 * subnormal, at and above 2^119, inf, NaN); +-0; quantise8 with that quotient in one of its 8
 * places, by turns. It also counts the elements whose code the plain reciprocal product would
 * have got wrong (the correction's work) and the scales sent to the division: both must occur, or
 * the test shows nothing. */
static void check_quantise2(void) {
    /* the route's ends (2^-90, 2^119) and their neighbours outside it, subnormal scales, scales
     * whose reciprocal is subnormal (above 2^126) */
    std::vector<float> scales = {0x1p-126f,
                                 nextafterf(0x1p125f, 0.0f),
                                 0x1p125f,
                                 0x1p126f,
                                 nextafterf(0x1p-126f, 0.0f),
                                 0x1p-127f,
                                 nextafterf(0x1p126f, INFINITY),
                                 0x1p127f,
                                 FLT_MAX,
                                 0x1p-149f,
                                 1e-40f,
                                 INFINITY,
                                 NAN,
                                 1.0f,
                                 0x1p-20f,
                                 3.0f / 448.0f,
                                 0x1p-90f,
                                 nextafterf(0x1p-90f, 0.0f),
                                 0x1p119f,
                                 nextafterf(0x1p119f, 0.0f),
                                 0x1p-100f,
                                 0x1.8p-120f};
    for (int i = 0; i < 60; ++i) {
        scales.push_back((float)ldexp(1.0 + urand(), (int)(urand() * 200) - 100));
        scales.push_back((float)(ldexp(1.0 + urand(), (int)(urand() * 40) - 20)) / 448.0f);
        scales.push_back(
            fastglu_fp8_scale(fastglu_abs_bits((float)ldexp(1.0 + urand(), i - 30)), i & 1));
        /* a bf16 amax: the case whose quotients land on e4m3 midpoints exactly */
        scales.push_back(fastglu_fp8_scale(
            fastglu_abs_bits((float)ldexp(1.0 + urand(), i - 30)) & 0xffff0000u, 0));
    }
    std::vector<double> mids = {0.0, 0x1p-10, 464.0};
    for (int c = 0; c < 0x7e; ++c)
        mids.push_back(0.5 * ((double)fastglu_e4m3_to_f32((unsigned char)c) +
                              (double)fastglu_e4m3_to_f32((unsigned char)(c + 1))));
    long n = 0, divided = 0, product_wrong = 0;
    for (size_t i = 0; i < scales.size(); ++i) {
        /* each scale with its correctly rounded reciprocal, as make_divisor takes it (__frcp_rn) */
        const float s = scales[i], r = 1.0f / s;
        const fp8_divisor d = divisor_of(s, r);
        divided += d.exact;
        for (double m : mids)
            for (int sign = -1; sign <= 1; sign += 2)
                for (int k : {-64, -24, -9, -4, -3, -2, -1, 0, 1, 2, 3, 4, 9, 24, 64}) {
                    float y = (float)(sign * m * (double)s);
                    for (int j = 0; j < (k < 0 ? -k : k); ++j)
                        y = nextafterf(y, k < 0 ? -INFINITY : INFINITY);
                    const float other = (float)((2.0 * urand() - 1.0) * 448.0 * (double)s);
                    const unsigned want =
                        fastglu_fp8_quantise(y, s) | (unsigned)fastglu_fp8_quantise(other, s) << 8;
                    const unsigned got = quantise2(d, y, other);
                    ++n;
                    if (got != want)
                        FAIL("quantise2: y %.9g (%a), scale %.9g (%a): codes 0x%04x, the division "
                             "gives 0x%04x",
                             (double)y, (double)y, (double)s, (double)s, got, want);
                    /* quantise8 with y in each position of the chunk, the other 7 random */
                    vec8<float> c8;
                    unsigned w8[2] = {0, 0};
                    for (int e = 0; e < 8; ++e) {
                        const float v =
                            e == n % 8 ? y : (float)((2.0 * urand() - 1.0) * 448.0 * (double)s);
                        c8.w[e] = __float_as_uint(v);
                        w8[e / 4] |= (unsigned)fastglu_fp8_quantise(v, s) << 8 * (e % 4);
                    }
                    const uint2 got8 = quantise8(d, c8);
                    if (got8.x != w8[0] || got8.y != w8[1])
                        FAIL(
                            "quantise8: y %.9g (%a) at %ld, scale %.9g (%a): codes 0x%08x%08x, the "
                            "division gives 0x%08x%08x",
                            (double)y, (double)y, n % 8, (double)s, (double)s, got8.y, got8.x,
                            w8[1], w8[0]);
                    if (d.exact) continue;
                    product_wrong += fastglu_f32_to_e4m3(y * r, 1) != (want & 0xffu);
                }
    }
    printf("quantise2: %ld pairs at e4m3 midpoints, %ld scales sent to the division, %ld elements "
           "whose plain reciprocal product casts to another code\n",
           n, divided, product_wrong);
    if (!divided || !product_wrong)
        FAIL("quantise2: no scale reached the division, or no product needed the correction");
}

int main(void) {
    fastglu_set_fp8_saturate(1);
    check_quantise2();
    /* F = 3: one ragged lane; 136: a ragged tile, F % 8 == 0 (the backward's 16-byte path; its tile
     * order with a d_gate tile more than d_up's); 260: F % 8 != 0. T = 130: a last tile of 2
     * tokens; 17: one tile. */
    static const int64_t Fs[] = {3, 136, 260};
    for (int strides = ODD; strides <= VIEW; ++strides)
        for (int fi = 0; fi < 3; ++fi)
            for (int bwd = 0; bwd < 2; ++bwd) {
                const int64_t F = Fs[fi];
                run_case(FASTGLU_ACT_SILU, 0, 0, 0, 0, FASTGLU_DTYPE_BF16, 130, F, bwd, 0, 1, 0, 1,
                         strides);
                run_case(FASTGLU_ACT_SILU, 0, 0, 0, 0, FASTGLU_DTYPE_BF16, 17, F, bwd, 1, 1, 0, 1,
                         strides);
                if (F != 136 || strides == VIEW) continue;
                run_case(FASTGLU_ACT_QUICK_GELU, 1, 1, 1, 7.0f, FASTGLU_DTYPE_BF16, 130, F, bwd, 0,
                         1, 0, 1, strides);
                run_case(FASTGLU_ACT_GELU_TANH, 0, 1, 1, 2.5f, FASTGLU_DTYPE_FP16, 17, F, bwd, 0, 0,
                         1, 1, strides);
                run_case(FASTGLU_ACT_SILU, 0, 0, 1, 0, FASTGLU_DTYPE_FP32, 130, F, bwd, 1, 0, 0, 0,
                         strides);
            }
    /* the FAST kernels' choice (glu_fp8: math mode MM_K, no bias, no weights): each parameter that
     * excludes them on its own, with the rest as FAST's; quick-GELU's FAST kernels */
    for (int bwd = 0; bwd < 2; ++bwd) {
        run_case(FASTGLU_ACT_QUICK_GELU, 0, 0, 0, 0, FASTGLU_DTYPE_BF16, 17, 136, bwd, 0, 0, 0, 1,
                 DENSE);
        run_case(FASTGLU_ACT_SILU, 0, 1, 0, 0, FASTGLU_DTYPE_BF16, 17, 136, bwd, 0, 0, 0, 1, DENSE);
        run_case(FASTGLU_ACT_SILU, 0, 0, 0, 1.5f, FASTGLU_DTYPE_BF16, 17, 136, bwd, 0, 0, 0, 1,
                 DENSE);
        run_case(FASTGLU_ACT_GELU_TANH, 0, 0, 0, 0, FASTGLU_DTYPE_BF16, 17, 136, bwd, 0, 0, 0, 1,
                 DENSE);
        for (int tweak = GATE_MULT; tweak <= OFFSET; ++tweak)
            run_case(FASTGLU_ACT_SILU, 0, 0, 0, 0, FASTGLU_DTYPE_BF16, 17, 136, bwd, 0, 0, 0, 1,
                     DENSE, tweak);
    }
    /* F = 256: the backward's tile order pairs d_gate's and d_up's tiles exactly (split_tile) */
    run_case(FASTGLU_ACT_SILU, 0, 1, 1, 0, FASTGLU_DTYPE_BF16, 17, 256, 1, 0, 1, 0, 1, DENSE);
    /* the backward's dbias / dweights (RED kernels and their reduction) against the CPU backend bit
     * for bit: both layouts, odd F, F not a multiple of 128 or of 8 (the element path; a tile
     * straddling d_gate and d_up), F % 8 == 0 (the 16-byte path), tokens 1, 257, both recipes, the
     * column-wise copy or not, each gradient alone and both */
    {
        static const int64_t Fr[] = {3, 136, 200, 1408}, Tr[] = {1, 257};
        for (int il = 0; il < 2; ++il)
            for (int fi = 0; fi < 4; ++fi)
                for (int ti = 0; ti < 2; ++ti) {
                    const int64_t F = Fr[fi], T = Tr[ti];
                    if (F == 1408 && T == 257 && il) continue; /* the host's time */
                    run_case(FASTGLU_ACT_SILU, il, 1, 1, 0, FASTGLU_DTYPE_BF16, T, F, 1, 0, 1, 0, 1,
                             DENSE, PLAIN, 1);
                    run_case(FASTGLU_ACT_QUICK_GELU, il, 1, 1, 7.0f, FASTGLU_DTYPE_BF16, T, F, 1, 1,
                             0, 0, ti, ODD, OFFSET, 1);
                }
        run_case(FASTGLU_ACT_SILU, 0, 1, 0, 0, FASTGLU_DTYPE_FP16, 257, 136, 1, 0, 1, 0, 0, VIEW,
                 PLAIN, 1);
        run_case(FASTGLU_ACT_GELU_TANH, 0, 0, 1, 0, FASTGLU_DTYPE_FP32, 257, 200, 1, 0, 0, 1, 1,
                 DENSE, DOWN_MULT, 1);
        run_case(FASTGLU_ACT_SILU, 1, 1, 1, 0, FASTGLU_DTYPE_FP32, 130, 3, 1, 1, 1, 0, 1, ODD,
                 GATE_MULT, 1);
    }
    /* F % 128 == 64 (the backward's shifted pairs, and the split tiles of the dh tile they leave):
     * both 2-byte dtypes, T = 1, 257, 300 (partial row tiles of 128 and 256 rows), the column-wise
     * copy or not, both scale layouts, dense rows and views, the two FAST activations; with a
     * bias, per-token weights or per-tensor scaling the split tiles */
    for (int fi = 0; fi < 2; ++fi) {
        static const int64_t Fs[] = {192, 320}, Ts[] = {1, 257, 300};
        for (int ti = 0; ti < 3; ++ti)
            for (int cw = 0; cw < 2; ++cw) {
                run_case(FASTGLU_ACT_SILU, 0, 0, 0, 0, FASTGLU_DTYPE_BF16, Ts[ti], Fs[fi], 1, 0, cw,
                         0, cw, DENSE);
                run_case(FASTGLU_ACT_QUICK_GELU, 0, 0, 0, 0, FASTGLU_DTYPE_FP16, Ts[ti], Fs[fi], 1,
                         0, 1 - cw, 1, cw, VIEW);
            }
        run_case(FASTGLU_ACT_SILU, 0, 1, 0, 0, FASTGLU_DTYPE_BF16, 257, Fs[fi], 1, 0, 1, 0, 1,
                 DENSE);
        run_case(FASTGLU_ACT_SILU, 0, 0, 0, 0, FASTGLU_DTYPE_BF16, 257, Fs[fi], 1, 1, 1, 0, 1,
                 DENSE);
    }
    /* the FP8 forward with the blockwise copy: FAST, a bias, weights, the general math (a gate
     * multiplier, an offset, GELU), both 2-byte dtypes and fp32, ragged tiles (F = 136, 200), F %
     * 128 == 64 (320), the column-wise copy or not, T = 1, 4 (the cold rows), 130; then what
     * takes the two kernels (odd strides, F % 8 != 0, a clamp, interleaved) */
    for (int cw = 0; cw < 2; ++cw) {
        run_copy_case(FASTGLU_ACT_SILU, 0, 0, PLAIN, FASTGLU_DTYPE_BF16, 130, 136, cw, DENSE);
        run_copy_case(FASTGLU_ACT_SILU, 0, 0, PLAIN, FASTGLU_DTYPE_BF16, 4, 320, cw, VIEW);
        run_copy_case(FASTGLU_ACT_QUICK_GELU, 1, 0, PLAIN, FASTGLU_DTYPE_FP16, 130, 200, cw, VIEW);
        run_copy_case(FASTGLU_ACT_SILU, 0, 1, PLAIN, FASTGLU_DTYPE_BF16, 4, 136, cw, DENSE);
        run_copy_case(FASTGLU_ACT_GELU_TANH, 1, 1, GATE_MULT, FASTGLU_DTYPE_FP32, 130, 136, cw,
                      DENSE);
        run_copy_case(FASTGLU_ACT_SILU, 0, 0, OFFSET, FASTGLU_DTYPE_FP16, 1, 256, cw, VIEW);
        run_copy_case(FASTGLU_ACT_SILU, 0, 0, PLAIN, FASTGLU_DTYPE_FP32, 4, 320, cw, VIEW);
    }
    run_copy_case(FASTGLU_ACT_SILU, 0, 0, PLAIN, FASTGLU_DTYPE_BF16, 130, 136, 1, ODD);
    run_copy_case(FASTGLU_ACT_SILU, 0, 0, PLAIN, FASTGLU_DTYPE_BF16, 17, 260, 1, DENSE);
    run_copy_case(FASTGLU_ACT_SILU, 1, 0, PLAIN, FASTGLU_DTYPE_BF16, 17, 136, 1, DENSE, 7.0f);
    run_copy_case(FASTGLU_ACT_SILU, 0, 0, PLAIN, FASTGLU_DTYPE_BF16, 17, 136, 1, DENSE, 0.0f, 1);
    if (!cp_launches || !copy_fallbacks)
        FAIL("the forward with the copy: no fused launch or no fallback was emulated");
    if (!shift_launches || !shift_colwise_launches)
        FAIL("the backward's shifted pairs were not emulated with and without the column-wise "
             "copy");
    /* T = 300 without the column-wise copy: blocks of several 128-row tiles (ROW_TILES), a last
     * block of a part of one; the backward's sums there (their kernels take one tile a block, as
     * their partials are per 128-row tile), both layouts, the 16-byte and element paths */
    for (int bwd = 0; bwd < 2; ++bwd)
        for (int tensor = 0; tensor < 2; ++tensor) {
            run_case(FASTGLU_ACT_SILU, 0, bwd, 0, 0, FASTGLU_DTYPE_BF16, 300, 136, bwd, tensor, 0,
                     0, 0, ODD);
            if (bwd)
                run_case(FASTGLU_ACT_SILU, tensor, 1, 1, 0, FASTGLU_DTYPE_BF16, 300, 136, 1, tensor,
                         0, 0, 0, tensor ? ODD : DENSE, PLAIN, 1);
        }
    /* F a multiple of 128 with the 16-byte path, no sums: the backward's paired tiles
     * (glu_fp8_bwd_pair_kernel; with the column-wise copy fp32 takes the split tiles); both recipes and
     * scale layouts, FAST and the general math (bias, weights, clamp, offset, down multiplier), each
     * dtype, a last block of part of its rows (T = 300, 257, 130) or of one row (T = 1); F = 128:
     * one tile pair */
    for (int colwise = 0; colwise < 2; ++colwise)
        for (int tensor = 0; tensor < 2; ++tensor) {
            run_case(FASTGLU_ACT_SILU, 0, 0, 0, 0, FASTGLU_DTYPE_BF16, 300, 256, 1, tensor, 0, 0,
                     colwise, DENSE);
            run_case(FASTGLU_ACT_SILU, 0, 0, 0, 0, FASTGLU_DTYPE_BF16, 1, 384, 1, tensor, 1, 1,
                     colwise, VIEW);
            run_case(FASTGLU_ACT_QUICK_GELU, 0, 1, 1, 7.0f, FASTGLU_DTYPE_BF16, 300, 256, 1, tensor,
                     1, 0, colwise, VIEW, OFFSET);
            run_case(FASTGLU_ACT_GELU_TANH, 0, 1, 0, 2.5f, FASTGLU_DTYPE_FP16, 257, 256, 1, tensor,
                     0, 1, colwise, DENSE);
            run_case(FASTGLU_ACT_SILU, 0, 0, 1, 0, FASTGLU_DTYPE_FP32, 130, 128, 1, tensor, 0, 0,
                     colwise, VIEW, DOWN_MULT);
        }
    /* the backward's sums on paired tiles (F a multiple of 128, the 16-byte path, no column-wise
     * copy) against the CPU backend bit for bit: both recipes, dbias alone, dweights alone, both;
     * tokens 1, 130, 257; bf16, fp16, fp32 */
    for (int tensor = 0; tensor < 2; ++tensor) {
        run_case(FASTGLU_ACT_SILU, 0, 1, 1, 0, FASTGLU_DTYPE_BF16, 257, 256, 1, tensor, 0, 0, 0,
                 DENSE, PLAIN, 1);
        run_case(FASTGLU_ACT_QUICK_GELU, 0, 1, 0, 7.0f, FASTGLU_DTYPE_BF16, 1, 384, 1, tensor, 1, 1,
                 0, VIEW, OFFSET, 1);
        run_case(FASTGLU_ACT_GELU_TANH, 0, 0, 1, 0, FASTGLU_DTYPE_FP16, 130, 128, 1, tensor, 0, 0,
                 0, DENSE, DOWN_MULT, 1);
        run_case(FASTGLU_ACT_SILU, 0, 1, 1, 2.5f, FASTGLU_DTYPE_FP32, 130, 256, 1, tensor, 0, 0, 0,
                 VIEW, GATE_MULT, 1);
    }
    /* the sums and the column-wise copy together on paired tiles: bf16, tokens 130 and 1 */
    for (int tensor = 0; tensor < 2; ++tensor) {
        run_case(FASTGLU_ACT_SILU, 0, 1, 1, 0, FASTGLU_DTYPE_BF16, 130, 256, 1, tensor, 0, 0, 1,
                 DENSE, PLAIN, 1);
        run_case(FASTGLU_ACT_QUICK_GELU, 0, 1, 1, 7.0f, FASTGLU_DTYPE_FP16, 1, 128, 1, tensor, 1, 1,
                 1, VIEW, OFFSET, 1);
    }
    /* the backward from the blockwise copy (H8): the split tiles (F = 136, 200, 3: the 16-byte and
     * element paths; INTERLEAVED), the paired tiles (F = 256, 128), F % 128 == 64 (192: the split
     * tiles, the default there); FAST and the general math, the sums, both recipes, the
     * column-wise copy or not, each dtype, odd / dense / view strides */
    {
        const long h8_before = h8_launches, pair_before = h8_pair_launches;
        for (int strides = ODD; strides <= VIEW; ++strides) {
            run_case(FASTGLU_ACT_SILU, 0, 0, 0, 0, FASTGLU_DTYPE_BF16, 130, 136, 1, 0, 1, 0, 1,
                     strides, PLAIN, 0, 1);
            run_case(FASTGLU_ACT_SILU, 0, 0, 0, 0, FASTGLU_DTYPE_BF16, 300, 256, 1, 0, 0, 0, 1,
                     strides, PLAIN, 0, 1);
            run_case(FASTGLU_ACT_SILU, 0, 0, 0, 0, FASTGLU_DTYPE_FP16, 257, 192, 1, 0, 1, 0, 1,
                     strides, PLAIN, 0, 1);
        }
        run_case(FASTGLU_ACT_QUICK_GELU, 1, 1, 1, 7.0f, FASTGLU_DTYPE_BF16, 130, 136, 1, 0, 1, 0, 1,
                 DENSE, OFFSET, 1, 1);
        run_case(FASTGLU_ACT_GELU_TANH, 0, 1, 1, 2.5f, FASTGLU_DTYPE_FP16, 17, 200, 1, 1, 0, 1, 1,
                 ODD, PLAIN, 1, 1);
        run_case(FASTGLU_ACT_SILU, 0, 1, 1, 0, FASTGLU_DTYPE_BF16, 257, 256, 1, 0, 1, 0, 0, DENSE,
                 PLAIN, 1, 1);
        run_case(FASTGLU_ACT_SILU, 0, 0, 0, 0, FASTGLU_DTYPE_BF16, 130, 128, 1, 1, 0, 1, 1, VIEW,
                 PLAIN, 0, 1);
        run_case(FASTGLU_ACT_SILU, 0, 0, 1, 0, FASTGLU_DTYPE_FP32, 130, 128, 1, 0, 1, 0, 1, DENSE,
                 DOWN_MULT, 1, 1);
        run_case(FASTGLU_ACT_SILU, 0, 0, 0, 0, FASTGLU_DTYPE_FP32, 17, 3, 1, 0, 1, 0, 1, ODD, PLAIN,
                 0, 1);
        if (h8_launches == h8_before || h8_pair_launches == pair_before)
            FAIL("the backward from the blockwise copy was not emulated on split and paired tiles");
    }
    /* the backward from the blockwise copy on the shifted pairs (F % 128 == 64, FAST, 1 x 128
     * blocks, no sums): both 2-byte dtypes, F = 192 (block 1 is the mixed dh block's, block 2 has
     * no d_gate block), 320, 2880; T = 1, 257, 300 (partial blocks of 128 and 256 rows); the
     * column-wise copy or not; both scale layouts; odd / dense / view rows of the copy (odd: the
     * split tiles' element path, which the shifted pairs do not take); the two FAST activations.
     * Each against the recipe on its own dh, and dh against fastglu_glu_bwd_cpu's decoding of the
     * same copy (run_case), which the split tiles' dh equals bit for bit */
    {
        const long before = shift_h8_launches;
        static const int64_t Fs[] = {192, 320}, Ts[] = {1, 257, 300};
        for (int fi = 0; fi < 2; ++fi)
            for (int ti = 0; ti < 3; ++ti)
                for (int cw = 0; cw < 2; ++cw) {
                    run_case(FASTGLU_ACT_SILU, 0, 0, 0, 0, FASTGLU_DTYPE_BF16, Ts[ti], Fs[fi], 1, 0,
                             cw, 0, cw, ti == 1 ? VIEW : DENSE, PLAIN, 0, 1);
                    run_case(FASTGLU_ACT_QUICK_GELU, 0, 0, 0, 0, FASTGLU_DTYPE_FP16, Ts[ti], Fs[fi],
                             1, 0, 1 - cw, 1, cw, ti == 2 ? ODD : VIEW, PLAIN, 0, 1);
                }
        run_case(FASTGLU_ACT_SILU, 0, 0, 0, 0, FASTGLU_DTYPE_BF16, 130, 2880, 1, 0, 0, 0, 1, DENSE,
                 PLAIN, 0, 1);
        if (shift_h8_launches - before < 16)
            FAIL("the backward from the blockwise copy was not emulated on the shifted pairs");
        /* fastglu_debug_set_fp8_saved_shift(0): the split tiles there, the same checks */
        fastglu_debug_set_fp8_saved_shift(0);
        const long off = shift_h8_launches;
        for (int cw = 0; cw < 2; ++cw) {
            run_case(FASTGLU_ACT_SILU, 0, 0, 0, 0, FASTGLU_DTYPE_BF16, 130, 2880, 1, 0, cw, 0, cw,
                     DENSE, PLAIN, 0, 1);
            run_case(FASTGLU_ACT_QUICK_GELU, 0, 0, 0, 0, FASTGLU_DTYPE_FP16, 257, 192, 1, 0, cw, 1,
                     cw, VIEW, PLAIN, 0, 1);
        }
        fastglu_debug_set_fp8_saved_shift(1);
        if (shift_h8_launches != off)
            FAIL("fastglu_debug_set_fp8_saved_shift(0) left the shifted pairs on");
    }
    if (!pair_red_launches) FAIL("the backward's sums on paired tiles were not emulated");
    if (!pair_colwise_launches) FAIL("the column-wise copy on paired tiles was not emulated");
    printf("%ld launches (%ld with the backward's sums, %ld reductions, %ld of paired tiles), %ld "
           "blocks emulated, %ld barriers, %ld shuffles; %ld misaligned loads\n",
           launches, red_launches, reduce_launches, pair_launches, emu_blocks_run, emu_barriers,
           emu_shuffles, emu_misaligned);
    printf("%ld launches of the general kernels in math mode MM_K, %ld in MM_ANY, %ld of shifted "
           "pairs, %ld from the blockwise copy (%ld of paired tiles, %ld of shifted pairs)\n",
           gk_launches, gany_launches, shift_launches,
           h8_launches + h8_pair_launches + shift_h8_launches, h8_pair_launches, shift_h8_launches);
    printf("the forward with the blockwise copy: %ld launches writing it, %ld calls taking the "
           "copy's own kernel\n",
           cp_launches, copy_fallbacks);
    if (!gk_launches || !gany_launches) FAIL("a math mode of the general kernels was not emulated");
    if (pair_launches < 30) FAIL("the backward's paired tiles were not emulated in every case");
    if (emu_misaligned) FAIL("misaligned loads");
    if (!red_launches || !reduce_launches) FAIL("the backward's sums were not emulated");
    if (failures) fprintf(stderr, "%d failures\n", failures);
    return failures || launches == 0 ? 1 : 0;
}
