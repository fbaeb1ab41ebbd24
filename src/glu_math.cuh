/*
 * glu_math.cuh — the gated-linear-unit family's per-element math on the GPU (include/fastglu.h,
 * "The gated-linear-unit family"), shared by the standalone kernels (glu_cuda.cu) and the GEMM
 * epilogues (gemm_sm90.cu) so that both give the same bits. Written as C with templates on the
 * math mode; every operation rounds explicitly. Not installed.
 */
#ifndef FASTGLU_GLU_MATH_CUH
#define FASTGLU_GLU_MATH_CUH

#include "cuda_common.cuh"
#include "fp8.h"

/* ---- the math (include/fastglu.h) ---------------------------------------------------------- */

typedef struct glu_math {
    int gelu;    /* 1: GELU_TANH's argument k z (1 + 0.044715 z^2); 0: k z */
    int clamp;   /* 1: clamp at c */
    int fp8_sat; /* the fp8 copy's overflow mode (fastglu_set_fp8_saturate) */
    float k;     /* SILU 1, QUICK_GELU 1.702, GELU_TANH 2 * 0.79788456 */
    float kl;    /* -k log2(e): sigmoid(k x) = 1 / (1 + 2^(kl x)) */
    float c; /* the clamp bound: clamp_value rounded to the operands' dtype (fastglu_glu_clamp) */
    float f8lo, f8hi; /* with a clamp and the fp8 copy: the e4m3 values next to c (src/fp8.h) */
    float offset, gm, dm;
} glu_math;

/* Math modes: which of the parameters a kernel reads at run time. The specialised kernels are
 * compiled for the common sets of parameters, where the general path's operations on them are exact
 * identities (x 1) or never taken (the clamp, the GELU form), so that leaving them out changes no bit:
 *   MM_ANY     everything read from glu_math (the general kernels; multipliers, GELU with a clamp)
 *   MM_K       act(z) = z sigmoid(k z) (SiLU k = 1, quick-GELU k = 1.702), no clamp, m_g = m_d = 1, o = 0
 *   MM_KCLAMP  the same with the clamp and any o (GPT-OSS's quick-GeGLU, SwiGLU with clamp_value)
 *   MM_GELU    GELU_TANH, no clamp, m_g = m_d = 1, o = 0
 * Absent terms are added as -0 by the general path (x + -0 = x for every x, where x + 0 turns -0 into
 * +0): a zero offset (make_math) and the bias when there is none; the specialised kernels leave
 * them out. */
enum math_mode { MM_ANY = 0, MM_K = 1, MM_KCLAMP = 2, MM_GELU = 3 };
#define GELU_K (2.0f * 0.79788456f)
#define GELU_KL (-GELU_K * LOG2E)
#define MM_GELU_FORM(MM) ((MM) == MM_ANY ? m.gelu : (MM) == MM_GELU)
#define MM_CLAMPS(MM) ((MM) == MM_ANY ? m.clamp : (MM) == MM_KCLAMP)
#define MM_OFFSET(MM) ((MM) == MM_ANY || (MM) == MM_KCLAMP)

/* act(z) = z s and act'(z) = s + z s (1 - s) q'(z), with s = sigmoid(q(z)): q = k z for SiLU and
 * quick-GELU; for GELU_TANH, 0.5 (1 + tanh x) = sigmoid(2 x) gives q = 2 * 0.79788456 z (1 +
 * 0.044715 z^2) and Megatron's geglu / geglu_back exactly in real arithmetic (its derivative's
 * 0.1070322243 = 3 * 0.044715 * 0.79788456). One formula for the three: no branch, no tanhf. The
 * GELU form is selected, not computed alone, so that k3 * z^3 = NaN at z = inf never reaches SiLU. */
template <int MM>
static __device__ __forceinline__ void activation(const glu_math &m, float z, float *a, float *da) {
    const int gelu = MM_GELU_FORM(MM);
    const float k = MM == MM_GELU ? GELU_K : m.k,
                kl = MM == MM_GELU ? GELU_KL : m.kl; /* make_math's values */
    const float z2 = __fmul_rn(z, z);
    /* -q log2(e) = kl z (times 1 + 0.044715 z^2 for GELU) */
    const float ql =
        gelu ? __fmul_rn(__fmul_rn(kl, z), fmaf(0.044715f, z2, 1.0f)) : __fmul_rn(kl, z);
    const float dq = gelu ? __fmul_rn(k, fmaf(3.0f * 0.044715f, z2, 1.0f)) : k;
    /* the reciprocal keeps a subnormal result (rcp_sigmoid), as torch's fp32 sigmoid does (and the
     * CPU backend's division): for q < -87.3 act(z) is then a tiny nonzero, and act(z) * inf = -inf
     * as in torch, where a flushed 0 would give NaN */
    const float s = rcp_sigmoid(__fadd_rn(1.0f, ex2_ftz(ql)));
    *a = __fmul_rn(z, s);
    *da = fmaf(__fmul_rn(*a, __fsub_rn(1.0f, s)), dq, s);
}

/* The per-element math is written with explicit roundings (__fmul_rn, __fadd_rn, fmaf), which the
 * compiler may not contract or reassociate: every kernel that inlines it, specialised or general,
 * gives the same bits. */

/* torch.clamp: NaN stays NaN (fminf / fmaxf would return the bound): the .NaN forms of min / max
 * (sm_80 and later; before, a test for NaN in front of fminf / fmaxf). */
static __device__ __forceinline__ float min_nan(float a, float b) {
#if __CUDA_ARCH__ >= 800
    float r;
    asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
#else
    return a != a ? a : b != b ? b : fminf(a, b);
#endif
}
static __device__ __forceinline__ float max_nan(float a, float b) {
#if __CUDA_ARCH__ >= 800
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
#else
    return a != a ? a : b != b ? b : fmaxf(a, b);
#endif
}
static __device__ __forceinline__ float clamp_gate(float g, float c) { return min_nan(g, c); }
static __device__ __forceinline__ float clamp_up(float u, float c) {
    return max_nan(min_nan(u, c), -c);
}

/* The helpers below are templates on the mode and the case so that the kernels' compile-time
 * flags remove the code, not a runtime branch (a macro would spell the mode at every call). */

/* m_g z and m_d x, left out where the math mode has them 1. */
template <int MM> static __device__ __forceinline__ float times_gm(const glu_math &m, float z) {
    return MM == MM_ANY ? __fmul_rn(m.gm, z) : z;
}
template <int MM> static __device__ __forceinline__ float times_dm(const glu_math &m, float x) {
    return MM == MM_ANY ? __fmul_rn(m.dm, x) : x;
}

/* a + b, left out where b is known to be -0 (B = 0). */
template <int B> static __device__ __forceinline__ float plus(float a, float b) {
    return B ? __fadd_rn(a, b) : a;
}

/* (m_d w) x, as m_d x where w is known to be 1 (W = 0: no weights; m_d 1 = m_d exactly). */
template <int MM, int W>
static __device__ __forceinline__ float times_dm_w(const glu_math &m, float w, float x) {
    return W ? __fmul_rn(times_dm<MM>(m, w), x) : times_dm<MM>(m, x);
}

/* One element's forward: m_d * w * act(m_g * a) * (v + o). B: a bias is added (the general path
 * always adds one, -0 for none). */
template <int MM, int B, int W>
static __device__ __forceinline__ float glu_forward(const glu_math &m, float g, float u, float bg,
                                                    float bu, float w) {
    if (MM_CLAMPS(MM)) g = clamp_gate(g, m.c), u = clamp_up(u, m.c);
    float a, da;
    activation<MM>(m, times_gm<MM>(m, plus<B>(g, bg)), &a, &da);
    return __fmul_rn(times_dm_w<MM, W>(m, w, a), plus<MM_OFFSET(MM)>(plus<B>(u, bu), m.offset));
}

/* One element's backward: the gradients of the raw gate and up (clamp masks applied), the
 * unmasked ones (the bias's), and m_d * act * (v + o) * dy (the weight's, before the sum). */
typedef struct glu_grads {
    float dg, du, dbg, dbu, dw;
} glu_grads;

template <int MM, int B, int W>
static __device__ __forceinline__ glu_grads glu_backward(const glu_math &m, float g, float u,
                                                         float bg, float bu, float w, float dy) {
    glu_grads r;
    const int clamp = MM_CLAMPS(MM);
    const float gc = clamp ? clamp_gate(g, m.c) : g, uc = clamp ? clamp_up(u, m.c) : u;
    float a, da;
    activation<MM>(m, times_gm<MM>(m, plus<B>(gc, bg)), &a, &da);
    const float v = plus<MM_OFFSET(MM)>(plus<B>(uc, bu), m.offset), e = times_dm_w<MM, W>(m, w, dy);
    r.dbg = times_gm<MM>(m, __fmul_rn(__fmul_rn(e, v), da)); /* (e v da) m_g: the same product */
    r.dbu = __fmul_rn(e, a);
    r.dw = __fmul_rn(__fmul_rn(times_dm<MM>(m, a), v), dy);
    /* torch.clamp's gradient: passes where min <= x <= max (so not for NaN) */
    r.dg = (!clamp || g <= m.c) ? r.dbg : 0.0f;
    r.du = (!clamp || (u >= -m.c && u <= m.c)) ? r.dbu : 0.0f;
    return r;
}

/* The value the fp8 copy casts for an operand (up: is_up): the operand itself, or with a clamp the
 * operand moved to the side of the bound the clamp puts it on (src/fp8.h), so that the backward's
 * clamp of the decoded copy cuts exactly the elements the forward's clamp cut. */
template <int MM>
static __device__ __forceinline__ float fp8_operand(const glu_math &m, float v, int is_up) {
    if (!MM_CLAMPS(MM)) return v;
    return is_up ? fastglu_fp8_up_operand(v, m.c, m.f8lo, m.f8hi)
                 : fastglu_fp8_gate_operand(v, m.c, m.f8lo, m.f8hi);
}

/* The math mode of the parameters (host side), the one rule of the standalone kernels and the GEMM
 * epilogues: the specialised modes leave out only operations that are identities for these
 * parameters (see math_mode). */
static inline int math_mode_of(const fastglu_glu_params *p) {
    if (p->gate_multiplier != 1.0f || p->down_multiplier != 1.0f) return MM_ANY;
    const int clamps = fastglu_clamps(p), offset = p->glu_linear_offset != 0.0f;
    if (clamps) return p->activation == FASTGLU_ACT_GELU_TANH ? MM_ANY : MM_KCLAMP;
    if (offset) return MM_ANY;
    return p->activation == FASTGLU_ACT_GELU_TANH ? MM_GELU : MM_K;
}

/* The math of a call (host side), from its validated parameters and the operands' dtype: the clamp
 * bound is clamp_value rounded to that dtype, as torch.clamp rounds its bound to the tensor's
 * (fastglu_glu_clamp); fp8_copy: the call writes the fp8 copy (then c < 448 or c = +inf, validated). */
static inline glu_math make_math(const fastglu_glu_params *p, fastglu_dtype dtype, int fp8_copy) {
    glu_math m;
    m.gelu = p->activation == FASTGLU_ACT_GELU_TANH;
    m.k = p->activation == FASTGLU_ACT_GELU_TANH    ? GELU_K
          : p->activation == FASTGLU_ACT_QUICK_GELU ? 1.702f
                                                    : 1.0f;
    m.kl = -m.k * LOG2E; /* GELU_KL for GELU_TANH: the same float operations */
    m.clamp = fastglu_clamps(p);
    m.c = fastglu_glu_clamp(p, dtype);
    m.f8lo = m.f8hi = 0.0f;
    if (m.clamp && fp8_copy) fastglu_e4m3_clamp_bounds(m.c, &m.f8lo, &m.f8hi);
    m.offset = p->glu_linear_offset == 0.0f ? -0.0f : p->glu_linear_offset; /* see math_mode */
    m.gm = p->gate_multiplier, m.dm = p->down_multiplier;
    m.fp8_sat = fastglu_fp8_saturate();
    return m;
}

#endif /* FASTGLU_GLU_MATH_CUH */
