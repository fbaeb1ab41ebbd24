/*
 * glu_math.cuh — the gated-linear-unit family's per-element math for the CUDA kernels: the shared C
 * of glu_math.h (the CPU backend's too), with template wrappers that keep the kernels' compile-time
 * math mode, bias and weight flags as template parameters: the kernels (glu_cuda.cu, glu_swiglu.cuh)
 * and the GEMM epilogues (gemm_cuda.cu, gemm_sm90.cu, glu_fp8_cuda.cu) call these, and each passes
 * its parameters on as constants that the compiler folds. Not installed.
 */
#ifndef FASTGLU_GLU_MATH_CUH
#define FASTGLU_GLU_MATH_CUH

#include "cuda_common.cuh"
#include "fp8.h"
#include "glu_math.h"

/* A per-token weight (MoE probs) or its gradient's element i, of a runtime dtype: FP32, BF16 or
 * FP16 (Megatron passes fp32 probs with bf16 activations). The one loader of the kernels' weights. */
static __device__ __forceinline__ float load_token_weight(const void *w, int dtype, int64_t i) {
    if (dtype == FASTGLU_DTYPE_FP32) return ((const float *)w)[i];
    if (dtype == FASTGLU_DTYPE_BF16) return to_f32(((const __nv_bfloat16 *)w)[i]);
    return to_f32(((const __half *)w)[i]);
}

/* The math mode's switches as the kernels spell them (m: the glu_math in scope). */
#define MM_GELU_FORM(MM) ((MM) == MM_ANY ? m.gelu : (MM) == MM_GELU)
#define MM_CLAMPS(MM) ((MM) == MM_ANY ? m.clamp : (MM) == MM_KCLAMP)
#define MM_OFFSET(MM) ((MM) == MM_ANY || (MM) == MM_KCLAMP)

/* act(z) and act'(z): glu_activation. */
template <int MM>
static __device__ __forceinline__ void activation(const glu_math &m, float z, float *a, float *da) {
    glu_activation(MM, &m, z, a, da);
}

/* torch.clamp's min / max (NaN stays NaN) and the clamps of gate and up: glu_math.h. */
static __device__ __forceinline__ float min_nan(float a, float b) { return glu_min_nan(a, b); }
static __device__ __forceinline__ float max_nan(float a, float b) { return glu_max_nan(a, b); }
static __device__ __forceinline__ float clamp_gate(float g, float c) {
    return glu_clamp_gate(g, c);
}
static __device__ __forceinline__ float clamp_up(float u, float c) { return glu_clamp_up(u, c); }

/* m_g z and m_d x, left out where the math mode has them 1. */
template <int MM> static __device__ __forceinline__ float times_gm(const glu_math &m, float z) {
    return glu_times_gm(MM, &m, z);
}
template <int MM> static __device__ __forceinline__ float times_dm(const glu_math &m, float x) {
    return glu_times_dm(MM, &m, x);
}

/* a + b, left out where b is known to be -0 (B = 0). */
template <int B> static __device__ __forceinline__ float plus(float a, float b) {
    return glu_plus(B, a, b);
}

/* (m_d w) x, as m_d x where w is known to be 1 (W = 0: no weights). */
template <int MM, int W>
static __device__ __forceinline__ float times_dm_w(const glu_math &m, float w, float x) {
    return glu_times_dm_w(MM, W, &m, w, x);
}

/* One element's forward (glu_elem_forward). B: a bias is added (the general path always adds one,
 * -0 for none); W: a weight multiplies. */
template <int MM, int B, int W>
static __device__ __forceinline__ float glu_forward(const glu_math &m, float g, float u, float bg,
                                                    float bu, float w) {
    return glu_elem_forward(MM, B, W, &m, g, u, bg, bu, w);
}

/* One element's backward (glu_elem_backward). */
template <int MM, int B, int W>
static __device__ __forceinline__ glu_grads glu_backward(const glu_math &m, float g, float u,
                                                         float bg, float bu, float w, float dy) {
    return glu_elem_backward(MM, B, W, &m, g, u, bg, bu, w, dy);
}

/* The value the fp8 copy casts for an operand (glu_fp8_operand). */
template <int MM>
static __device__ __forceinline__ float fp8_operand(const glu_math &m, float v, int is_up) {
    return glu_fp8_operand(MM, &m, v, is_up);
}

#endif /* FASTGLU_GLU_MATH_CUH */
