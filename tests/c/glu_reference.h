/*
 * glu_reference.h — the C test driver of the gated-linear-unit family (fastglu_glu_*), shared by
 * the CPU and CUDA tests: random inputs, a float64 reference written from the formulas in
 * include/fastglu.h, outputs pre-filled with a sentinel, and suites that run one backend over
 * activations, layouts, clamp, offset, multipliers, bias, weights, fp8 saved inputs (random, or the
 * forward's own fp8 copy, which is checked byte for byte), dtypes,
 * widths, row counts, strided and in-place operands. FASTGLU_TEST_SEED=N repeats a run;
 * GLU_DEBUG=1 prints the first values of a failing comparison.
 */
#ifndef FASTGLU_TEST_GLU_REFERENCE_H
#define FASTGLU_TEST_GLU_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

#include "fastglu.h"

/* A backend under test: its two entry points (the stream, if any, bound by the wrapper) and how
 * to move bytes to and from its memory. */
typedef struct glu_backend {
    const char *name;
    fastglu_status (*fwd)(const fastglu_glu_params *params, const void *gate, int64_t gate_rs,
                          const void *up, int64_t up_rs, const void *bias, const void *weights,
                          fastglu_dtype weights_dtype, int64_t weights_stride, void *output,
                          int64_t output_rs, void *saved_fp8, int64_t saved_fp8_rs, int64_t tokens,
                          int64_t F, fastglu_dtype dtype);
    fastglu_status (*bwd)(const fastglu_glu_params *params, const void *dy, int64_t dy_rs,
                          int64_t dy_cs, const void *gate, int64_t gate_rs, const void *up,
                          int64_t up_rs, fastglu_dtype input_dtype, const float *input_scale_inv,
                          int64_t input_scale_stride, int scale_1x128, const void *bias,
                          const void *weights, fastglu_dtype weights_dtype, int64_t weights_stride,
                          void *d_gate, int64_t d_gate_rs, void *d_up, int64_t d_up_rs, void *dbias,
                          void *dweights, void *workspace, size_t workspace_bytes, int64_t tokens,
                          int64_t F, fastglu_dtype dtype);
    void *(*alloc)(size_t bytes);
    void (*release)(void *p);
    void (*upload)(void *dst, const void *src, size_t bytes);   /* host -> backend */
    void (*download)(void *dst, const void *src, size_t bytes); /* backend -> host */
    void (*sync)(void);                                         /* wait for the last call */
} glu_backend;

/* One element of the float64 reference (the formulas of include/fastglu.h): from the operands g, u
 * (their values), the bias values, the weight w, the upstream gradient dy and the params (a clamp
 * at p->clamp_value as given: callers pass the bound rounded to the dtype, as the kernels take it;
 * NaN passes the clamp, as torch.clamp's), the forward y, the gradients d_a, d_v (before the
 * clamp's mask), the dweights term, and each one's running-error magnitude: the same expression
 * with every addend by its absolute value (1 - s -> 1 + s, 1 + tanh -> 1 + |tanh|, v + o ->
 * |v| + |o|, ...), plus the error that rounding the argument z (magnitude |m_g| (|g'| + |b_g|))
 * carries through the activation's derivative. */
typedef struct glu_ref_point {
    double y, d_a, d_v, dw_term;
    double y_mag, d_a_mag, d_v_mag, dw_mag;
} glu_ref_point;
glu_ref_point glu_ref_eval(const fastglu_glu_params *p, double g, double u, double bg, double bu,
                           double w, double dy);

/* Seeds the generator from FASTGLU_TEST_SEED or the clock and prints the seed. */
void glu_seed(const char *name);

/* The options matrix (every activation x layout x bias x weights kind x clamp x offset/multipliers
 * x fp8 input kind x dtype, at T = 65, F = 257 and T = 2, F = 3, rotating strided / in-place /
 * dy layouts) and the shape sweep (F in {1, 2, 3, 5, 7, 8, 127, 256, 257, 768, 1408, 3420} x
 * tokens in {1, 2, 65, 257} x dtype, four variants each). Returns the number of failed checks. */
int run_glu_suite(const glu_backend *b);

/* The sentinel sweep: the same widths and row counts, every dtype, both layouts, the plain
 * activation and the one with everything (bias, weights, dbias, dweights, clamp), outputs in padded
 * rows pre-filled with a sentinel: every output element written, no other byte touched. */
int run_glu_sentinel_sweep(const glu_backend *b);

/* Determinism: the backward twice on the same inputs with differently garbage-filled workspaces
 * gives bitwise-identical d_gate, d_up, dbias and dweights (several shapes and variants). With
 * set_config (may be NULL), also across configurations 0..n_configs-1 (e.g. launch grids):
 * set_config(k) is called before each run. */
int run_glu_determinism(const glu_backend *b, void (*set_config)(int k), int n_configs);

/* The fp8 e4m3fn decoder against its definition, through the backward: every one of the 256 codes
 * as `up`, with gate 0, dy 1, GELU_TANH: d_gate = 0.5 * decode(code) * scale_inv exactly (fp32). */
int run_glu_fp8_exact(const glu_backend *b);

/* The forward's fp8 copy (saved_fp8) byte for byte against the cast's definition (torch's
 * .to(torch.float8_e4m3fn): nearest, ties to even, saturating at +-448, NaN kept): every bf16 and
 * every fp16 bit pattern, and fp32 specials, ties and random bit patterns, in both layouts, at
 * F = 128 (whole chunks, with a clamp the copy must ignore) and F = 5 (chunk tails, a misaligned
 * copy); the bytes around the [tokens, 2F] region of its padded rows stay untouched. */
int run_glu_fp8_store_exact(const glu_backend *b);

/* Parameter edge cases through the backend: clamp NaN / negative / 0 give bitwise the unclamped
 * result; offset and multipliers scale as the formulas say; the reference's derivatives agree
 * with central differences of its activations. */
int run_glu_param_edges(const glu_backend *b);

/* The clamp at its edges: the bound is clamp_value rounded to the operands' dtype (torch.clamp):
 * an operand equal to 1.1 in bf16 / fp16 / fp32 passes its gradient, the next value up does not,
 * with the operands or the forward's fp8 copy as the saved input; through the fp8 copy, gates 7.125
 * and 7.2 under clamp 7 are cut (e4m3 rounds them onto the bound) and 6.9 under clamp 6.9 is not
 * (e4m3 rounds it beyond); a clamp that rounds to 0 or past the dtype's range, or one >= 448 with
 * the fp8 copy, is FASTGLU_ERROR_INVALID_VALUE with the output untouched. */
int run_glu_clamp_edges(const glu_backend *b);

/* The CUDA backend's specialised kernels (full-width accesses, features fixed at compile time)
 * against its general ones (set_generic(1): fastglu_debug_set_generic_kernels) on the same inputs,
 * specials included: the forward's output and fp8 copy, d_gate / d_up, dbias and dweights must be
 * bitwise identical, for every dtype, layout and bias / weights / fp8 / reduction case. */
int run_glu_paths_agree(const glu_backend *b, void (*set_generic)(int on));

/* SwiGLU's entry points of one backend (fastglu_swiglu_{fwd,bwd}_*, src/swiglu.c: the family's call
 * with the plain SILU parameters on Megatron's fc1 output; the stream, if any, bound by the
 * wrapper). */
typedef struct glu_swiglu_entry {
    fastglu_status (*fwd)(const void *input, int64_t input_row_stride, void *output,
                          int64_t output_row_stride, int64_t tokens, int64_t F,
                          fastglu_dtype dtype);
    fastglu_status (*bwd)(const void *dy, int64_t dy_row_stride, int64_t dy_col_stride,
                          const void *input, int64_t input_row_stride, void *dinput,
                          int64_t dinput_row_stride, int64_t tokens, int64_t F,
                          fastglu_dtype dtype);
} glu_swiglu_entry;

/* SwiGLU's entry points as the family's SiLU case: each case (F in {1, 3, 768, 1408, 3420, 5632,
 * 8192} x tokens in {1, 257} x dtype x operand layouts: contiguous, a column slice of a wider
 * tensor, misaligned offsets and odd strides, dy scalar / row-broadcast / transposed / column
 * stride 2, and the in-place backward) runs the wrappers and fastglu_glu_* with the plain SILU
 * parameters on the same fresh random inputs (signed zeros and saturated values among them): the
 * wrappers' output and dinput must equal the family's bit for bit over the whole sentinel-filled
 * buffer, match the float64 reference (relative norm error by dtype), and leave every byte outside
 * the output rows alone. In the contiguous layout the family is also run with gate and up as two
 * tensors and interleaved, and must give the same bits. Returns the number of failed checks. */
int run_glu_swiglu(const glu_backend *b, const glu_swiglu_entry *s);

/* SwiGLU's sentinel sweep through the wrappers: F in {1, 2, 3, 5, 7, 8, 127, 256, 257, 320, 640,
 * 768, 1408, 2816, 3420, 5632} x tokens in {1, 2, 257, 4097} x every dtype, outputs in padded rows
 * pre-filled with a sentinel: every output element written (float64 reference), no other byte
 * touched. Returns the number of failed checks. */
int run_glu_swiglu_sentinel_sweep(const glu_backend *b, const glu_swiglu_entry *s);

#endif
