/*
 * glu_math.h — the gated-linear-unit family's per-element math (include/fastglu.h, "The
 * gated-linear-unit family"), one source for the CPU backend (glu_cpu.c) and the CUDA kernels
 * (glu_cuda.cu, glu_swiglu.cuh and the GEMM epilogues, through glu_math.cuh's template wrappers).
 * Written as C11 that also compiles as CUDA C: every function is FASTGLU_HD_INLINE (host and device,
 * force-inlined, under nvcc; static inline in C); the math mode, "a bias is added" and "a weight
 * multiplies" are int arguments, constants at every kernel's call, which the compiler folds as it
 * folds template parameters. Not installed.
 *
 * Host and device run the same fp32 operations in the same order, each rounded on its own: glu_mul,
 * glu_add and glu_sub (__fmul_rn, __fadd_rn, __fsub_rn on the device, which the compiler may not
 * contract or reassociate; the plain operators on the host, built with -ffp-contract=off) and fmaf
 * where the math fuses (correctly rounded on both). The one place the two differ is the sigmoid's 2^x
 * and reciprocal (glu_sigmoid_exp2): the device takes them from the special-function unit
 * (ex2.approx.ftz, rcp.approx.ftz: within a few fp32 ulp, and not reproducible on the host), the
 * host from exp2f and an IEEE division, as include/fastglu.h says. So the host emulation of the
 * kernels (tests/emu, this header compiled for the host) gives the CPU backend's bits exactly, and a
 * GPU gives them up to those few ulp of the sigmoid.
 */
#ifndef FASTGLU_GLU_MATH_H
#define FASTGLU_GLU_MATH_H

#include <math.h>

#include "fp8.h"
#include "internal.h"

#if defined(__CUDACC__)
#include "cuda_common.cuh" /* ex2_ftz, rcp_sigmoid: the device's sigmoid */
#define FASTGLU_HD_INLINE static __host__ __device__ __forceinline__
#else
#define FASTGLU_HD_INLINE static inline
#endif

#ifndef LOG2E
#define LOG2E 1.44269504f
#endif
#define GELU_K (2.0f * 0.79788456f)
#define GELU_KL (-GELU_K * LOG2E)

/* ---- the parameters of a call ---------------------------------------------------------------- */

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
 *   MM_ANY     everything read from glu_math (the general kernels, the CPU backend; multipliers,
 *              GELU with a clamp)
 *   MM_K       act(z) = z sigmoid(k z) (SiLU k = 1, quick-GELU k = 1.702), no clamp, m_g = m_d = 1, o = 0
 *   MM_KCLAMP  the same with the clamp and any o (GPT-OSS's quick-GeGLU, SwiGLU with clamp_value)
 *   MM_GELU    GELU_TANH, no clamp, m_g = m_d = 1, o = 0
 * Absent terms are added as -0 by the general path (x + -0 = x for every x, where x + 0 turns -0 into
 * +0): a zero offset (make_math) and the bias when there is none; the specialised kernels leave
 * them out. */
enum math_mode { MM_ANY = 0, MM_K = 1, MM_KCLAMP = 2, MM_GELU = 3 };

FASTGLU_HD_INLINE int glu_mm_gelu(int mm, const glu_math *m) {
    return mm == MM_ANY ? m->gelu : mm == MM_GELU;
}
FASTGLU_HD_INLINE int glu_mm_clamps(int mm, const glu_math *m) {
    return mm == MM_ANY ? m->clamp : mm == MM_KCLAMP;
}
FASTGLU_HD_INLINE int glu_mm_offset(int mm) { return mm == MM_ANY || mm == MM_KCLAMP; }

/* ---- fp32 operations, each rounded on its own ---------------------------------------------- */

FASTGLU_HD_INLINE float glu_mul(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
FASTGLU_HD_INLINE float glu_add(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
FASTGLU_HD_INLINE float glu_sub(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

/* sigmoid(q) = 1 / (1 + 2^ql), ql = -q log2(e). The device's reciprocal keeps a subnormal result
 * (rcp_sigmoid), as the host's division does and torch's fp32 sigmoid: for q < -87.3 act(z) is then
 * a tiny nonzero, and act(z) * inf = -inf as in torch, where a flushed 0 would give NaN. The
 * device's 2^x flushes a subnormal result, which vanishes against the 1 anyway. */
FASTGLU_HD_INLINE float glu_sigmoid_exp2(float ql) {
#ifdef __CUDA_ARCH__
    return rcp_sigmoid(ex2_ftz(ql)); /* 1 / RN(1 + 2^ql) */
#else
    return 1.0f / (1.0f + exp2f(ql));
#endif
}

/* torch.clamp: NaN stays NaN (fminf / fmaxf would return the bound): the .NaN forms of min / max
 * on the device (sm_80 and later), a test for NaN in front of fminf / fmaxf before, and on the host
 * in front of a comparison (the bound is never a signed zero, so the two agree bit for bit). */
FASTGLU_HD_INLINE float glu_min_nan(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    float r;
    asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
#elif defined(__CUDA_ARCH__)
    return a != a ? a : b != b ? b : fminf(a, b);
#else
    return a != a ? a : b != b ? b : a < b ? a : b; /* (a libm call less than fminf) */
#endif
}
FASTGLU_HD_INLINE float glu_max_nan(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
#elif defined(__CUDA_ARCH__)
    return a != a ? a : b != b ? b : fmaxf(a, b);
#else
    return a != a ? a : b != b ? b : a > b ? a : b;
#endif
}
FASTGLU_HD_INLINE float glu_clamp_gate(float g, float c) { return glu_min_nan(g, c); }
FASTGLU_HD_INLINE float glu_clamp_up(float u, float c) {
    return glu_max_nan(glu_min_nan(u, c), -c);
}

/* ---- the activation ------------------------------------------------------------------------ */

/* act(z) = z s and act'(z) = s + z s (1 - s) q'(z), with s = sigmoid(q(z)): q = k z for SiLU and
 * quick-GELU; for GELU_TANH, 0.5 (1 + tanh x) = sigmoid(2 x) gives q = 2 * 0.79788456 z (1 +
 * 0.044715 z^2) and Megatron's geglu / geglu_back exactly in real arithmetic (its derivative's
 * 0.1070322243 = 3 * 0.044715 * 0.79788456). One formula for the three: no branch, no tanhf. The
 * GELU form is selected, not computed alone, so that k3 * z^3 = NaN at z = inf never reaches SiLU. */
FASTGLU_HD_INLINE void glu_activation(int mm, const glu_math *m, float z, float *a, float *da) {
    const int gelu = glu_mm_gelu(mm, m);
    const float k = mm == MM_GELU ? GELU_K : m->k,
                kl = mm == MM_GELU ? GELU_KL : m->kl; /* make_math's values */
    const float z2 = glu_mul(z, z);
    /* -q log2(e) = kl z (times 1 + 0.044715 z^2 for GELU) */
    const float ql = gelu ? glu_mul(glu_mul(kl, z), fmaf(0.044715f, z2, 1.0f)) : glu_mul(kl, z);
    const float dq = gelu ? glu_mul(k, fmaf(3.0f * 0.044715f, z2, 1.0f)) : k;
    const float s = glu_sigmoid_exp2(ql);
    *a = glu_mul(z, s);
    *da = fmaf(glu_mul(*a, glu_sub(1.0f, s)), dq, s);
}

/* ---- one element ----------------------------------------------------------------------------- */

/* m_g z and m_d x, left out where the math mode has them 1. */
FASTGLU_HD_INLINE float glu_times_gm(int mm, const glu_math *m, float z) {
    return mm == MM_ANY ? glu_mul(m->gm, z) : z;
}
FASTGLU_HD_INLINE float glu_times_dm(int mm, const glu_math *m, float x) {
    return mm == MM_ANY ? glu_mul(m->dm, x) : x;
}

/* a + b, left out where b is known to be -0 (add = 0). */
FASTGLU_HD_INLINE float glu_plus(int add, float a, float b) { return add ? glu_add(a, b) : a; }

/* (m_d w) x, as m_d x where w is known to be 1 (has_w = 0: no weights; m_d 1 = m_d exactly). */
FASTGLU_HD_INLINE float glu_times_dm_w(int mm, int has_w, const glu_math *m, float w, float x) {
    return has_w ? glu_mul(glu_times_dm(mm, m, w), x) : glu_times_dm(mm, m, x);
}

/* One element's forward: m_d * w * act(m_g * a) * (v + o). has_b: a bias is added (the general
 * kernels always add one, -0 for none); has_w: a weight multiplies (w = 1 for none is exact). */
FASTGLU_HD_INLINE float glu_elem_forward(int mm, int has_b, int has_w, const glu_math *m, float g,
                                         float u, float bg, float bu, float w) {
    if (glu_mm_clamps(mm, m)) g = glu_clamp_gate(g, m->c), u = glu_clamp_up(u, m->c);
    float a, da;
    glu_activation(mm, m, glu_times_gm(mm, m, glu_plus(has_b, g, bg)), &a, &da);
    return glu_mul(glu_times_dm_w(mm, has_w, m, w, a),
                   glu_plus(glu_mm_offset(mm), glu_plus(has_b, u, bu), m->offset));
}

/* One element's backward: the gradients of the raw gate and up (clamp masks applied), the
 * unmasked ones (the bias's), and m_d * act * (v + o) * dy (the weight's, before the sum). */
typedef struct glu_grads {
    float dg, du, dbg, dbu, dw;
    float y; /* the forward's value from the same a and v (glu_elem_forward's operations, so its
              * bits): the dGLU epilogue's fc2 input without a second sigmoid; dead code where a
              * caller does not read it */
} glu_grads;

FASTGLU_HD_INLINE glu_grads glu_elem_backward(int mm, int has_b, int has_w, const glu_math *m,
                                              float g, float u, float bg, float bu, float w,
                                              float dy) {
    glu_grads r;
    const int clamp = glu_mm_clamps(mm, m);
    const float gc = clamp ? glu_clamp_gate(g, m->c) : g, uc = clamp ? glu_clamp_up(u, m->c) : u;
    float a, da;
    glu_activation(mm, m, glu_times_gm(mm, m, glu_plus(has_b, gc, bg)), &a, &da);
    const float v = glu_plus(glu_mm_offset(mm), glu_plus(has_b, uc, bu), m->offset),
                e = glu_times_dm_w(mm, has_w, m, w, dy);
    r.dbg = glu_times_gm(mm, m, glu_mul(glu_mul(e, v), da)); /* (e v da) m_g: the same product */
    r.dbu = glu_mul(e, a);
    r.dw = glu_mul(glu_mul(glu_times_dm(mm, m, a), v), dy);
    r.y = glu_mul(glu_times_dm_w(mm, has_w, m, w, a), v);
    /* torch.clamp's gradient: passes where min <= x <= max (so not for NaN) */
    r.dg = (!clamp || g <= m->c) ? r.dbg : 0.0f;
    r.du = (!clamp || (u >= -m->c && u <= m->c)) ? r.dbu : 0.0f;
    return r;
}

/* The value the fp8 copy casts for an operand (up: is_up): the operand itself, or with a clamp the
 * operand moved to the side of the bound the clamp puts it on (src/fp8.h), so that the backward's
 * clamp of the decoded copy cuts exactly the elements the forward's clamp cut. */
FASTGLU_HD_INLINE float glu_fp8_operand(int mm, const glu_math *m, float v, int is_up) {
    if (!glu_mm_clamps(mm, m)) return v;
    return is_up ? fastglu_fp8_up_operand(v, m->c, m->f8lo, m->f8hi)
                 : fastglu_fp8_gate_operand(v, m->c, m->f8lo, m->f8hi);
}

/* ---- the fp8 operands' block scales ------------------------------------------------------- */

/* The block of gate (is_up 0) or up (1) column j in a row of 1 x 128 block scales
 * (fastglu_glu_operands.scale_1x128): SPLIT, gate's ceil(F / 128) blocks then up's; INTERLEAVED,
 * the blocks of the [tokens, 2F] operand, where gate and up of column j share block 2j / 128. */
FASTGLU_HD_INLINE int64_t glu_scale_block(int il, int64_t F, int64_t j, int is_up) {
    return il ? (2 * j) >> 7 : (j >> 7) + (is_up ? (F + 127) >> 7 : 0);
}

/* ---- host side: a call's math --------------------------------------------------------------- */

/* The math mode of the parameters, the one rule of the standalone kernels and the GEMM epilogues:
 * the specialised modes leave out only operations that are identities for these parameters (see
 * math_mode). */
static inline int math_mode_of(const fastglu_glu_params *p) {
    if (p->gate_multiplier != 1.0f || p->down_multiplier != 1.0f) return MM_ANY;
    const int clamps = fastglu_clamps(p), offset = p->glu_linear_offset != 0.0f;
    if (clamps) return p->activation == FASTGLU_ACT_GELU_TANH ? MM_ANY : MM_KCLAMP;
    if (offset) return MM_ANY;
    return p->activation == FASTGLU_ACT_GELU_TANH ? MM_GELU : MM_K;
}

/* The math of a call, from its validated parameters and the operands' dtype: the clamp bound is
 * clamp_value rounded to that dtype, as torch.clamp rounds its bound to the tensor's
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

#endif /* FASTGLU_GLU_MATH_H */
