/*
 * gemm_cuda.cu — the linear layers on the GPU (fastglu_linear_cuda, fastglu_linear_glu_fwd_cuda),
 * written as C: validation (gemm_common.c), then the sm_90a TMA + wgmma kernel (gemm_sm90.cu,
 * src/gemm_internal.h) where it takes the problem, else the general kernel below.
 *
 * The general kernel: any shape, stride, alignment (to the element) and dtype (fp32 too), any GPU
 * the library is built for. A block of 256 threads computes a tile of 64 tokens x 64 output
 * columns; with the GLU epilogue, the matching 64 gate and 64 up columns of h (w1 rows j and F + j
 * in the SPLIT layout, 2j and 2j + 1 interleaved), so that y is computed in the block and h need
 * not be stored. x and w are staged through shared memory as fp32 in slices of 16 values of k;
 * each thread holds 4 x 4 accumulators (twice with the GLU) and adds k = 0, 1, ..., K-1 in order
 * with fp32 fused multiply-adds: bitwise deterministic, whatever the grid. The epilogue adds the
 * bias in fp32, rounds h to dtype (stored if asked), and computes y from the rounded values with
 * the family's per-element math (glu_math.cuh, the general path's glu_forward<MM_ANY, 1, 1> with
 * the bias -0 and the weight 1 when absent), so y is bitwise what fastglu_glu_fwd_cuda gives for h.
 *
 * fc2 dgrad + dGLU (gemm_dglu_kernel): the same tiling over dY[M, F] = dO[M, K] @ w2[K, F] (w2's
 * rows are k: its slice is read along F, coalesced), one accumulator set; the epilogue reads the
 * tile's gate and up from h, runs the family's backward (glu_backward<MM_ANY, 0, 1>: no bias, the
 * weight 1 when absent) on dY rounded to T, stores d_gate / d_up in h's layout and y
 * (glu_forward<MM_ANY, 0, 1>, the same operations as the forward's epilogue). dweights: each
 * block then takes every column tile of its 64 tokens in order (grid of one column), each thread
 * adds its columns' terms in order, and the 16 threads of a token are added in order: a fixed
 * tree whatever the grid.
 */
#include <string.h>

#include "gemm_common.h"
#include "glu_math.cuh"

enum { BM = 64, BN = 64, BK = 16, THREADS = 256, RM = BM / 16, RN = BN / 16 };

typedef struct gemm_args {
    const void *x, *w, *bias, *weights;
    int64_t x_rs, w_rs, weights_stride;
    int weights_dtype, il;
    void *h, *y;
    int64_t h_rs, y_rs;
    int64_t M, N, K, n_tiles;
    glu_math m;
} gemm_args;

/* w's row for output column n: the gate's (or the plain GEMM's), and the up's */
template <int GLU>
static __device__ __forceinline__ int64_t row_gate(const gemm_args &a, int64_t n) {
    return GLU && a.il ? 2 * n : n;
}
static __device__ __forceinline__ int64_t row_up(const gemm_args &a, int64_t n) {
    return a.il ? 2 * n + 1 : a.N + n;
}

template <typename T, int GLU>
__global__ void __launch_bounds__(THREADS) gemm_general_kernel(const gemm_args a) {
    __shared__ float xs[BK][BM + 1];
    __shared__ float wg[BK][BN + 1];
    __shared__ float wu[GLU ? BK : 1][GLU ? BN + 1 : 1];
    const T *X = (const T *)a.x, *W = (const T *)a.w;
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int64_t m0 = (int64_t)blockIdx.x * BM;

    for (int64_t tile = blockIdx.y; tile < a.n_tiles; tile += gridDim.y) {
        const int64_t n0 = tile * BN;
        float ag[RM][RN], au[RM][RN];
#pragma unroll
        for (int i = 0; i < RM; ++i)
#pragma unroll
            for (int j = 0; j < RN; ++j) ag[i][j] = 0.0f, au[i][j] = 0.0f;

        for (int64_t k0 = 0; k0 < a.K; k0 += BK) {
#pragma unroll
            for (int r = 0; r < BM * BK / THREADS; ++r) {
                const int e = threadIdx.x + THREADS * r, mm = e / BK, kk = e % BK;
                const int64_t gm = m0 + mm, gk = k0 + kk;
                xs[kk][mm] = gm < a.M && gk < a.K ? to_f32(X[gm * a.x_rs + gk]) : 0.0f;
            }
#pragma unroll
            for (int r = 0; r < BN * BK / THREADS; ++r) {
                const int e = threadIdx.x + THREADS * r, nn = e / BK, kk = e % BK;
                const int64_t gn = n0 + nn, gk = k0 + kk;
                const int in = gn < a.N && gk < a.K;
                wg[kk][nn] = in ? to_f32(W[row_gate<GLU>(a, gn) * a.w_rs + gk]) : 0.0f;
                if (GLU) wu[kk][nn] = in ? to_f32(W[row_up(a, gn) * a.w_rs + gk]) : 0.0f;
            }
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < BK; ++kk) {
                float xv[RM], gv[RN], uv[RN];
#pragma unroll
                for (int i = 0; i < RM; ++i) xv[i] = xs[kk][ty + 16 * i];
#pragma unroll
                for (int j = 0; j < RN; ++j) {
                    gv[j] = wg[kk][tx + 16 * j];
                    if (GLU) uv[j] = wu[kk][tx + 16 * j];
                }
#pragma unroll
                for (int i = 0; i < RM; ++i)
#pragma unroll
                    for (int j = 0; j < RN; ++j) {
                        ag[i][j] = fmaf(xv[i], gv[j], ag[i][j]);
                        if (GLU) au[i][j] = fmaf(xv[i], uv[j], au[i][j]);
                    }
            }
            __syncthreads();
        }

        /* epilogue: bias, h rounded to T, y from the rounded h */
#pragma unroll
        for (int i = 0; i < RM; ++i) {
            const int64_t gm = m0 + ty + 16 * i;
            if (gm >= a.M) continue;
            const float wt = GLU && a.weights ? load_token_weight(a.weights, a.weights_dtype,
                                                                  gm * a.weights_stride)
                                              : 1.0f;
#pragma unroll
            for (int j = 0; j < RN; ++j) {
                const int64_t gn = n0 + tx + 16 * j;
                if (gn >= a.N) continue;
                const int64_t rg = row_gate<GLU>(a, gn);
                float g = ag[i][j];
                if (a.bias) g = __fadd_rn(g, to_f32(((const T *)a.bias)[rg]));
                T hg;
                from_f32(&hg, g);
                if (!GLU) {
                    ((T *)a.h)[gm * a.h_rs + gn] = hg;
                    continue;
                }
                const int64_t ru = row_up(a, gn);
                float u = au[i][j];
                if (a.bias) u = __fadd_rn(u, to_f32(((const T *)a.bias)[ru]));
                T hu, yv;
                from_f32(&hu, u);
                if (a.h) {
                    T *hrow = (T *)a.h + gm * a.h_rs;
                    hrow[rg] = hg, hrow[ru] = hu;
                }
                from_f32(&yv,
                         glu_forward<MM_ANY, 1, 1>(a.m, to_f32(hg), to_f32(hu), -0.0f, -0.0f, wt));
                ((T *)a.y)[gm * a.y_rs + gn] = yv;
            }
        }
    }
}

typedef struct dglu_args {
    const void *x, *w, *h, *weights;
    int64_t x_rs, w_rs, h_rs, weights_stride;
    int weights_dtype, il;
    void *dh, *y, *dweights;
    int64_t dh_rs, y_rs, dweights_stride;
    int64_t M, N, K, n_tiles;
    glu_math m;
} dglu_args;

template <typename T>
__global__ void __launch_bounds__(THREADS) gemm_dglu_kernel(const dglu_args a) {
    __shared__ float xs[BK][BM + 1];
    __shared__ float ws[BK][BN + 1];
    __shared__ float red[BM][17];
    const T *X = (const T *)a.x, *W = (const T *)a.w, *Hs = (const T *)a.h;
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int64_t m0 = (int64_t)blockIdx.x * BM;
    const int64_t step = a.il ? 2 : 1, up_off = a.il ? 1 : a.N;
    float wt[RM], dwp[RM];
#pragma unroll
    for (int i = 0; i < RM; ++i) {
        const int64_t gm = m0 + ty + 16 * i;
        wt[i] = a.weights && gm < a.M
                    ? load_token_weight(a.weights, a.weights_dtype, gm * a.weights_stride)
                    : 1.0f;
        dwp[i] = 0.0f;
    }

    for (int64_t tile = blockIdx.y; tile < a.n_tiles; tile += gridDim.y) {
        const int64_t n0 = tile * BN;
        float acc[RM][RN];
#pragma unroll
        for (int i = 0; i < RM; ++i)
#pragma unroll
            for (int j = 0; j < RN; ++j) acc[i][j] = 0.0f;

        for (int64_t k0 = 0; k0 < a.K; k0 += BK) {
#pragma unroll
            for (int r = 0; r < BM * BK / THREADS; ++r) {
                const int e = threadIdx.x + THREADS * r, mm = e / BK, kk = e % BK;
                const int64_t gm = m0 + mm, gk = k0 + kk;
                xs[kk][mm] = gm < a.M && gk < a.K ? to_f32(X[gm * a.x_rs + gk]) : 0.0f;
            }
#pragma unroll
            for (int r = 0; r < BN * BK / THREADS; ++r) { /* along w2's rows: coalesced */
                const int e = threadIdx.x + THREADS * r, nn = e % BN, kk = e / BN;
                const int64_t gn = n0 + nn, gk = k0 + kk;
                ws[kk][nn] = gn < a.N && gk < a.K ? to_f32(W[gk * a.w_rs + gn]) : 0.0f;
            }
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < BK; ++kk) {
                float xv[RM], wv[RN];
#pragma unroll
                for (int i = 0; i < RM; ++i) xv[i] = xs[kk][ty + 16 * i];
#pragma unroll
                for (int j = 0; j < RN; ++j) wv[j] = ws[kk][tx + 16 * j];
#pragma unroll
                for (int i = 0; i < RM; ++i)
#pragma unroll
                    for (int j = 0; j < RN; ++j) acc[i][j] = fmaf(xv[i], wv[j], acc[i][j]);
            }
            __syncthreads();
        }

        /* epilogue: h's gate and up, the backward on dY rounded to T, dh, y, the dweights terms */
#pragma unroll
        for (int i = 0; i < RM; ++i) {
            const int64_t gm = m0 + ty + 16 * i;
            if (gm >= a.M) continue;
#pragma unroll
            for (int j = 0; j < RN; ++j) {
                const int64_t gn = n0 + tx + 16 * j;
                if (gn >= a.N) continue;
                const int64_t hi = gm * a.h_rs + gn * step, di = gm * a.dh_rs + gn * step;
                const float g = to_f32(Hs[hi]), u = to_f32(Hs[hi + up_off]);
                T dy; /* dY rounded to T, as a separate GEMM's output */
                from_f32(&dy, acc[i][j]);
                const glu_grads r =
                    glu_backward<MM_ANY, 0, 1>(a.m, g, u, 0.0f, 0.0f, wt[i], to_f32(dy));
                T dg, du;
                from_f32(&dg, r.dg);
                from_f32(&du, r.du);
                ((T *)a.dh)[di] = dg;
                ((T *)a.dh)[di + up_off] = du;
                if (a.y) {
                    T yv;
                    from_f32(&yv, glu_forward<MM_ANY, 0, 1>(a.m, g, u, 0.0f, 0.0f, wt[i]));
                    ((T *)a.y)[gm * a.y_rs + gn] = yv;
                }
                dwp[i] = __fadd_rn(dwp[i], r.dw);
            }
        }
    }
    if (a.dweights) { /* the launch gave this block every column tile (gridDim.y == 1) */
#pragma unroll
        for (int i = 0; i < RM; ++i) red[ty + 16 * i][tx] = dwp[i];
        __syncthreads();
        if (threadIdx.x < BM && m0 + threadIdx.x < a.M) {
            float sum = 0.0f;
            for (int k = 0; k < 16; ++k) sum = __fadd_rn(sum, red[threadIdx.x][k]);
            const int64_t gm = m0 + threadIdx.x, o = gm * a.dweights_stride;
            if (a.weights_dtype == FASTGLU_DTYPE_FP32)
                ((float *)a.dweights)[o] = sum;
            else if (a.weights_dtype == FASTGLU_DTYPE_FP16)
                from_f32((__half *)a.dweights + o, sum);
            else
                from_f32((__nv_bfloat16 *)a.dweights + o, sum);
        }
    }
}

/* fastglu_debug_set_gemm_fallback: 1 = the general kernel everywhere (tests compare the two). */
static int debug_fallback = 0;
extern "C" void fastglu_debug_set_gemm_fallback(int on) { debug_fallback = on != 0; }

template <typename T, int GLU>
static cudaError_t launch_general(const gemm_args &a, cudaStream_t s) {
    const dim3 grid((unsigned)((a.M + BM - 1) / BM),
                    (unsigned)(a.n_tiles < 65535 ? a.n_tiles : 65535));
    void *args[] = {(void *)&a};
    return cudaLaunchKernel((const void *)gemm_general_kernel<T, GLU>, grid, dim3(THREADS), args, 0,
                            s);
}

template <typename T> static cudaError_t launch_dglu(const dglu_args &a, cudaStream_t s) {
    const unsigned gy =
        a.dweights ? 1u : (unsigned)(a.n_tiles < 65535 ? (a.n_tiles > 0 ? a.n_tiles : 1) : 65535);
    const dim3 grid((unsigned)((a.M + BM - 1) / BM), gy);
    void *args[] = {(void *)&a};
    return cudaLaunchKernel((const void *)gemm_dglu_kernel<T>, grid, dim3(THREADS), args, 0, s);
}

static fastglu_status run_dglu(const char *fn, const fastglu_gemm_problem *p, void *stream) {
    const cudaStream_t s = (cudaStream_t)stream;
#ifdef FASTGLU_HAVE_GEMM_SM90
    if (!debug_fallback && p->K > 0 && p->dtype != FASTGLU_DTYPE_FP32) {
        int dev;
        if (cudaGetDevice(&dev) == cudaSuccess && fastglu_gemm_sm90_supported(p, dev))
            return fastglu_gemm_sm90_launch(p, stream);
    }
#endif
    if ((p->M + BM - 1) / BM > 2147483647)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: tokens = %lld is too large for the grid", fn,
                                 (long long)p->M);
    dglu_args a;
    a.x = p->x, a.w = p->w, a.h = p->h, a.weights = p->weights;
    a.x_rs = p->x_row_stride, a.w_rs = p->w_row_stride, a.h_rs = p->h_row_stride;
    a.weights_stride = p->weights_stride, a.weights_dtype = (int)p->weights_dtype;
    a.il = p->glu->layout == FASTGLU_LAYOUT_INTERLEAVED;
    a.dh = p->dh, a.y = p->y, a.dweights = p->dweights;
    a.dh_rs = p->dh_row_stride, a.y_rs = p->y_row_stride, a.dweights_stride = p->dweights_stride;
    a.M = p->M, a.N = p->N, a.K = p->K, a.n_tiles = (p->N + BN - 1) / BN;
    a.m = make_math(p->glu, p->dtype, 0);
    cudaError_t err;
    switch (p->dtype) {
    case FASTGLU_DTYPE_FP32: err = launch_dglu<float>(a, s); break;
    case FASTGLU_DTYPE_FP16: err = launch_dglu<__half>(a, s); break;
    default: err = launch_dglu<__nv_bfloat16>(a, s); break;
    }
    return launch_status(fn, err);
}

static fastglu_status run(const char *fn, const fastglu_gemm_problem *p, void *stream) {
    const cudaStream_t s = (cudaStream_t)stream;
#ifdef FASTGLU_HAVE_GEMM_SM90
    if (!debug_fallback && p->K > 0 && p->dtype != FASTGLU_DTYPE_FP32) {
        int dev;
        if (cudaGetDevice(&dev) == cudaSuccess && fastglu_gemm_sm90_supported(p, dev))
            return fastglu_gemm_sm90_launch(p, stream);
    }
#else
    (void)debug_fallback;
#endif
    if ((p->M + BM - 1) / BM > 2147483647)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: tokens = %lld is too large for the grid", fn,
                                 (long long)p->M);
    gemm_args a;
    a.x = p->x, a.w = p->w, a.bias = p->bias, a.weights = p->weights;
    a.x_rs = p->x_row_stride, a.w_rs = p->w_row_stride, a.weights_stride = p->weights_stride;
    a.weights_dtype = (int)p->weights_dtype;
    a.il = p->glu && p->glu->layout == FASTGLU_LAYOUT_INTERLEAVED;
    a.h = p->h, a.h_rs = p->h_row_stride, a.y = p->y, a.y_rs = p->y_row_stride;
    a.M = p->M, a.N = p->N, a.K = p->K, a.n_tiles = (p->N + BN - 1) / BN;
    if (p->glu)
        a.m = make_math(p->glu, p->dtype, 0);
    else
        memset(&a.m, 0, sizeof a.m);
    cudaError_t err;
    const int glu = p->glu != NULL;
    switch (p->dtype) {
    case FASTGLU_DTYPE_FP32:
        err = glu ? launch_general<float, 1>(a, s) : launch_general<float, 0>(a, s);
        break;
    case FASTGLU_DTYPE_FP16:
        err = glu ? launch_general<__half, 1>(a, s) : launch_general<__half, 0>(a, s);
        break;
    default:
        err = glu ? launch_general<__nv_bfloat16, 1>(a, s) : launch_general<__nv_bfloat16, 0>(a, s);
        break;
    }
    return launch_status(fn, err);
}

extern "C" fastglu_status fastglu_linear_cuda(fastglu_tensor x, fastglu_tensor w,
                                              fastglu_tensor bias, fastglu_tensor out,
                                              int64_t tokens, int64_t in_features,
                                              int64_t out_features, void *stream) {
    static const char fn[] = "fastglu_linear_cuda";
    const fastglu_tensor none = {NULL, FASTGLU_DTYPE_FP32, 0};
    int empty;
    fastglu_status st = fastglu_check_linear(fn, 0, NULL, x, w, bias, none, out, none, tokens,
                                             in_features, out_features, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    const fastglu_gemm_problem p = fastglu_gemm_make_problem(NULL, x, w, bias, none, out, none,
                                                             tokens, in_features, out_features);
    return run(fn, &p, stream);
}

extern "C" fastglu_status fastglu_linear_glu_fwd_cuda(const fastglu_glu_params *params,
                                                      fastglu_tensor x, fastglu_tensor w1,
                                                      fastglu_tensor bias, fastglu_tensor weights,
                                                      fastglu_tensor h, fastglu_tensor y,
                                                      int64_t tokens, int64_t hidden,
                                                      int64_t ffn_hidden_size, void *stream) {
    static const char fn[] = "fastglu_linear_glu_fwd_cuda";
    int empty;
    fastglu_status st = fastglu_check_linear(fn, 1, params, x, w1, bias, weights, h, y, tokens,
                                             hidden, ffn_hidden_size, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    const fastglu_gemm_problem p = fastglu_gemm_make_problem(params, x, w1, bias, weights, h, y,
                                                             tokens, hidden, ffn_hidden_size);
    return run(fn, &p, stream);
}

extern "C" fastglu_status fastglu_linear_dglu_bwd_cuda(
    const fastglu_glu_params *params, fastglu_tensor d_out, fastglu_tensor w2, fastglu_tensor h,
    fastglu_tensor weights, fastglu_tensor dh, fastglu_tensor y, fastglu_tensor dweights,
    int64_t tokens, int64_t hidden, int64_t ffn_hidden_size, void *stream) {
    static const char fn[] = "fastglu_linear_dglu_bwd_cuda";
    int empty;
    fastglu_status st =
        fastglu_check_linear_dglu(fn, params, d_out, w2, h, weights, dh, y, dweights, tokens,
                                  hidden, ffn_hidden_size, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    const fastglu_gemm_problem p = fastglu_gemm_make_dglu_problem(
        params, d_out, w2, h, weights, dh, y, dweights, tokens, hidden, ffn_hidden_size);
    return run_dglu(fn, &p, stream);
}
