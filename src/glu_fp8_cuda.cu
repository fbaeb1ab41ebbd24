/*
 * glu_fp8_cuda.cu — fastglu_glu_fwd_fp8_cuda: the family's forward quantised to float8_e4m3fn with
 * the recipe of include/fastglu.h ("The activation quantised to FP8"), in the pass that computes it.
 *
 * One block of 256 threads (8 warps) per tile of 128 tokens x 128 columns: one row-wise block wide
 * (1 x 128) and one column-wise block tall (128 x 1). Each warp takes rows of the tile; lane l
 * holds columns l, l + 32, l + 64, l + 96 (each access of a warp is 32 consecutive elements: loads
 * of gate / up, stores of y and of the fp8 bytes, coalesced). Per row: y (glu_math.cuh's
 * glu_forward, the general path's operations, so y is fastglu_glu_fwd_cuda's y bit for bit),
 * rounded to dtype, stored when asked; the row's amax by a warp max over the bits of |y|
 * (fp8_recipe.h); its scale; the codes. For the column-wise copy the rounded y also goes to shared
 * memory (row pitch an odd number of words: the column reads below are free of bank conflicts);
 * after a barrier each warp takes columns of the tile, lane l tokens l, l + 32, l + 64, l + 96:
 * the column's amax, its scale, and the codes written along y_t's row (32 consecutive bytes per
 * store): the transposition happens in shared memory, in the same kernel.
 *
 * FASTGLU_FP8_SCALING_TENSOR: a 4-byte memset of the workspace, a first kernel (MODE_AMAX) that
 * computes y (stores it when asked) and folds its tile's amax into the workspace with one
 * atomicMax per block (the max over the bits is exact and order-free: deterministic), and a second
 * (MODE_TENSOR) that reads the amax, derives the scale (block (0, 0) stores it), recomputes y from
 * the operands and writes the codes with that scale.
 *
 * fastglu_glu_bwd_fp8_cuda (BWD = 1): the same tiles over dh [T, 2F] in h's layout; lane l's column
 * maps to an operand column j and to d_gate or d_up; each element's gradient from gate, up and dy
 * (glu_math.cuh's glu_backward, the general path's: fastglu_glu_bwd_cuda's values bit for bit).
 */
#include "fp8_recipe.h"
#include "glu_fp8.h"
#include "glu_math.cuh"

#define TILE FASTGLU_FP8_BLOCK
#define THREADS 256
#define WARPS (THREADS / 32)
#define PER_LANE (TILE / 32)
#define ROWS 2 /* rows of a warp in flight at once */

enum { MODE_BLOCK = 0, MODE_AMAX = 1, MODE_TENSOR = 2 };

typedef struct fp8_args {
    glu_math m;
    const void *gate, *up, *bias, *weights, *dy;
    int64_t g_rs, u_rs, w_stride, step, bias_up; /* step: 1 SPLIT, 2 INTERLEAVED */
    int w_dtype, mn_major, pow2;
    void *y;
    int64_t y_rs;
    unsigned char *d, *dt;
    int64_t d_rs, dt_rs;
    float *s, *st;
    int64_t s_ld, st_ld;
    unsigned *amax;
    int64_t dy_rs;
    int64_t T, F, W; /* W: the quantised operand's width, F (y) or 2F (dh) */
} fp8_args;

static __device__ __forceinline__ float load_w(const void *w, int dtype, int64_t i) {
    switch (dtype) {
    case FASTGLU_DTYPE_FP16: return __half2float(((const __half *)w)[i]);
    case FASTGLU_DTYPE_BF16: return __bfloat162float(((const __nv_bfloat16 *)w)[i]);
    default: return ((const float *)w)[i];
    }
}

static __device__ __forceinline__ float *scale_at(float *s, int64_t ld, int mn, int64_t i,
                                                  int64_t b) {
    return mn ? s + b * ld + i : s + i * ld + b;
}

static __device__ __forceinline__ unsigned warp_max(unsigned v) {
#if __CUDA_ARCH__ >= 800
    return __reduce_max_sync(0xffffffffu, v);
#else
    for (int o = 16; o; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
#endif
}

/* Shared-memory row pitch in elements: an odd number of 32-bit words. */
template <typename E> struct pitch {
    enum { value = sizeof(E) == 4 ? TILE + 1 : TILE + 2 };
};

template <typename E, int MODE, int COLWISE, int BWD>
__global__ void __launch_bounds__(THREADS, 4) glu_fp8_kernel(const fp8_args a) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    E(*tile)[pitch<E>::value] = (E(*)[pitch<E>::value])smem_raw;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t t0 = (int64_t)blockIdx.x * TILE, j0 = (int64_t)blockIdx.y * TILE;
    const int nt = (int)min((int64_t)TILE, a.T - t0), nj = (int)min((int64_t)TILE, a.W - j0);
    const E *gate = (const E *)a.gate, *up = (const E *)a.up;
    float ts = 0.0f;
    if (MODE == MODE_TENSOR) {
        ts = fastglu_fp8_scale(*(volatile unsigned *)a.amax, a.pow2);
        if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) a.s[0] = ts;
    }
    /* lane's columns: the operands' column jc[k] and, for dh, whether it is d_up's (h's layout) */
    float bg[PER_LANE], bu[PER_LANE];
    int64_t jc[PER_LANE];
    int is_up[PER_LANE];
#pragma unroll
    for (int k = 0; k < PER_LANE; ++k) {
        const int64_t col = j0 + lane + 32 * k;
        is_up[k] = BWD ? (a.step == 2 ? (int)(col & 1) : col >= a.F) : 0;
        jc[k] = BWD ? (a.step == 2 ? col >> 1 : (is_up[k] ? col - a.F : col)) : col;
        bg[k] = bu[k] = -0.0f; /* no bias: -0, as the general path adds it */
        if (a.bias && lane + 32 * k < nj) {
            bg[k] = to_f32(((const E *)a.bias)[jc[k] * a.step]);
            bu[k] = to_f32(((const E *)a.bias)[jc[k] * a.step + a.bias_up]);
        }
    }
    unsigned tile_max = 0;
    /* ROWS rows per warp and step, every operand of them loaded before any store (the stores of y
     * and of the tile could alias the operands as far as the compiler knows, so it would not move a
     * load above them): 2 x ROWS x PER_LANE loads in flight per lane */
    for (int r0 = warp; r0 < nt; r0 += WARPS * ROWS) {
        float g[ROWS][PER_LANE], u[ROWS][PER_LANE], d[ROWS][PER_LANE], w[ROWS];
#pragma unroll
        for (int q = 0; q < ROWS; ++q) {
            const int r = r0 + q * WARPS;
            const int64_t t = t0 + r;
            w[q] = 1.0f;
            if (r < nt && a.weights) w[q] = load_w(a.weights, a.w_dtype, t * a.w_stride);
#pragma unroll
            for (int k = 0; k < PER_LANE; ++k) {
                const int c = lane + 32 * k;
                g[q][k] = u[q][k] = d[q][k] = 0.0f;
                if (r < nt && c < nj) {
                    const int64_t j = jc[k];
                    g[q][k] = to_f32(gate[t * a.g_rs + j * a.step]);
                    u[q][k] = to_f32(up[t * a.u_rs + j * a.step]);
                    if (BWD) d[q][k] = to_f32(((const E *)a.dy)[t * a.dy_rs + j]);
                }
            }
        }
#pragma unroll
        for (int q = 0; q < ROWS; ++q) {
            const int r = r0 + q * WARPS;
            if (r >= nt) break; /* uniform across the warp */
            const int64_t t = t0 + r;
            float yv[PER_LANE];
            unsigned am = 0;
#pragma unroll
            for (int k = 0; k < PER_LANE; ++k) {
                const int c = lane + 32 * k;
                yv[k] = 0.0f;
                if (c < nj) {
                    E e;
                    if (BWD) {
                        const glu_grads gr = glu_backward<MM_ANY, 1, 1>(
                            a.m, g[q][k], u[q][k], bg[k], bu[k], w[q], d[q][k]);
                        from_f32(&e, is_up[k] ? gr.du : gr.dg);
                    } else {
                        from_f32(&e, glu_forward<MM_ANY, 1, 1>(a.m, g[q][k], u[q][k], bg[k], bu[k],
                                                               w[q]));
                    }
                    if (MODE != MODE_TENSOR && a.y) ((E *)a.y)[t * a.y_rs + j0 + c] = e;
                    if (COLWISE) tile[r][c] = e;
                    yv[k] = to_f32(e); /* the value quantised: y rounded to dtype */
                    am = max(am, fastglu_abs_bits(yv[k]));
                }
            }
            if (MODE == MODE_AMAX) {
                tile_max = max(tile_max, am);
                continue;
            }
            float s = ts;
            if (MODE == MODE_BLOCK) {
                s = fastglu_fp8_scale(warp_max(am), a.pow2);
                if (lane == 0) *scale_at(a.s, a.s_ld, a.mn_major, t, blockIdx.y) = s;
            }
            unsigned char *drow = a.d + t * a.d_rs + j0;
#pragma unroll
            for (int k = 0; k < PER_LANE; ++k)
                if (lane + 32 * k < nj) drow[lane + 32 * k] = fastglu_fp8_quantise(yv[k], s);
        }
    }
    if (MODE == MODE_AMAX) {
        tile_max = warp_max(tile_max);
        if (lane == 0) atomicMax(a.amax, tile_max);
        return;
    }
    if (!COLWISE) return;
    __syncthreads();
    for (int c = warp; c < nj; c += WARPS) {
        float v[PER_LANE];
        unsigned am = 0;
#pragma unroll
        for (int i = 0; i < PER_LANE; ++i) {
            const int r = lane + 32 * i;
            v[i] = r < nt ? to_f32(tile[r][c]) : 0.0f;
            if (r < nt) am = max(am, fastglu_abs_bits(v[i]));
        }
        float s = ts;
        if (MODE == MODE_BLOCK) {
            s = fastglu_fp8_scale(warp_max(am), a.pow2);
            if (lane == 0) *scale_at(a.st, a.st_ld, a.mn_major, j0 + c, blockIdx.x) = s;
        }
        unsigned char *drow = a.dt + (j0 + c) * a.dt_rs + t0;
#pragma unroll
        for (int i = 0; i < PER_LANE; ++i)
            if (lane + 32 * i < nt) drow[lane + 32 * i] = fastglu_fp8_quantise(v[i], s);
    }
}

template <typename E, int MODE, int COLWISE, int BWD>
static cudaError_t launch(const fp8_args &a, cudaStream_t s) {
    const void *kern = (const void *)glu_fp8_kernel<E, MODE, COLWISE, BWD>;
    const size_t smem = COLWISE ? sizeof(E) * TILE * pitch<E>::value : 0;
    if (smem > 48 * 1024) { /* fp32 with the column-wise copy: the opt-in, on the current device */
        const cudaError_t err =
            cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (err != cudaSuccess) return err;
    }
    const dim3 grid((unsigned)((a.T + TILE - 1) / TILE), (unsigned)((a.W + TILE - 1) / TILE));
    void *args[] = {(void *)&a};
    return cudaLaunchKernel(kern, grid, dim3(THREADS), args, smem, s);
}

template <typename E, int BWD>
static cudaError_t run(const fp8_args &a, int tensor, int colwise, cudaStream_t s) {
    if (!tensor)
        return colwise ? launch<E, MODE_BLOCK, 1, BWD>(a, s) : launch<E, MODE_BLOCK, 0, BWD>(a, s);
    cudaError_t err = cudaMemsetAsync(a.amax, 0, sizeof(unsigned), s);
    if (err == cudaSuccess) err = launch<E, MODE_AMAX, 0, BWD>(a, s);
    if (err == cudaSuccess)
        err = colwise ? launch<E, MODE_TENSOR, 1, BWD>(a, s) : launch<E, MODE_TENSOR, 0, BWD>(a, s);
    return err;
}

template <int BWD>
static cudaError_t run_dtype(const fp8_args &a, fastglu_dtype dt, int tensor, int colwise,
                             cudaStream_t s) {
    switch (dt) {
    case FASTGLU_DTYPE_FP32: return run<float, BWD>(a, tensor, colwise, s);
    case FASTGLU_DTYPE_FP16: return run<__half, BWD>(a, tensor, colwise, s);
    default: return run<__nv_bfloat16, BWD>(a, tensor, colwise, s);
    }
}

/* Both entry points: validate, fill the kernel's arguments, launch. dy NULL: the forward. */
static fastglu_status glu_fp8(const char *fn, const fastglu_glu_params *params,
                              const fastglu_fp8_recipe *recipe, const fastglu_tensor *dy,
                              fastglu_tensor gate, fastglu_tensor up, fastglu_tensor bias,
                              fastglu_tensor weights, fastglu_tensor y, const fastglu_fp8_out *out,
                              int64_t tokens, int64_t F, void *stream) {
    int empty;
    fastglu_status st = fastglu_check_glu_fp8(fn, params, recipe, dy, gate, up, bias, weights, y,
                                              out, tokens, F, 1, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    const int64_t W = dy ? 2 * F : F;
    if (fastglu_fp8_blocks(W) > 65535 || fastglu_fp8_blocks(tokens) > 0x7fffffff)
        return fastglu_set_error(FASTGLU_ERROR_INVALID_VALUE,
                                 "%s: tokens = %lld, ffn_hidden_size = %lld: more 128 x 128 tiles "
                                 "than the CUDA grid holds",
                                 fn, (long long)tokens, (long long)F);
    const int il = params->layout == FASTGLU_LAYOUT_INTERLEAVED;
    const size_t es = fastglu_dtype_size(gate.dtype);
    fp8_args a;
    a.m = make_math(params, gate.dtype, 0);
    a.gate = gate.data, a.g_rs = gate.row_stride;
    a.up = il ? (const void *)((const char *)gate.data + es) : up.data;
    a.u_rs = il ? gate.row_stride : up.row_stride;
    a.step = il ? 2 : 1, a.bias_up = il ? 1 : F;
    a.bias = bias.data, a.weights = weights.data, a.w_stride = weights.row_stride;
    a.w_dtype = (int)weights.dtype;
    a.dy = dy ? dy->data : NULL, a.dy_rs = dy ? dy->row_stride : 0;
    a.mn_major = recipe->scale_layout == FASTGLU_FP8_SCALES_MN_MAJOR,
    a.pow2 = recipe->pow2_scales != 0;
    a.y = y.data, a.y_rs = y.row_stride;
    a.d = (unsigned char *)out->data.data, a.d_rs = out->data.row_stride;
    a.dt = (unsigned char *)out->data_t.data, a.dt_rs = out->data_t.row_stride;
    a.s = (float *)out->scale.data, a.s_ld = out->scale.row_stride;
    a.st = (float *)out->scale_t.data, a.st_ld = out->scale_t.row_stride;
    a.amax = (unsigned *)out->workspace;
    a.T = tokens, a.F = F, a.W = W;
    const int tensor = recipe->scaling == FASTGLU_FP8_SCALING_TENSOR, colwise = a.dt != NULL;
    cudaStream_t s = (cudaStream_t)stream;
    const cudaError_t err = dy ? run_dtype<1>(a, gate.dtype, tensor, colwise, s)
                               : run_dtype<0>(a, gate.dtype, tensor, colwise, s);
    return launch_status(fn, err);
}

extern "C" fastglu_status fastglu_glu_fwd_fp8_cuda(const fastglu_glu_params *params,
                                                   const fastglu_fp8_recipe *recipe,
                                                   fastglu_tensor gate, fastglu_tensor up,
                                                   fastglu_tensor bias, fastglu_tensor weights,
                                                   fastglu_tensor y, const fastglu_fp8_out *out,
                                                   int64_t tokens, int64_t F, void *stream) {
    return glu_fp8("fastglu_glu_fwd_fp8_cuda", params, recipe, NULL, gate, up, bias, weights, y,
                   out, tokens, F, stream);
}

extern "C" fastglu_status
fastglu_glu_bwd_fp8_cuda(const fastglu_glu_params *params, const fastglu_fp8_recipe *recipe,
                         fastglu_tensor dy, fastglu_tensor gate, fastglu_tensor up,
                         fastglu_tensor bias, fastglu_tensor weights, fastglu_tensor dh,
                         const fastglu_fp8_out *out, int64_t tokens, int64_t F, void *stream) {
    return glu_fp8("fastglu_glu_bwd_fp8_cuda", params, recipe, &dy, gate, up, bias, weights, dh,
                   out, tokens, F, stream);
}
