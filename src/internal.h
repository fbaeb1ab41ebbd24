/*
 * internal.h — helpers shared by the CPU and CUDA backends (not installed).
 *
 * Argument validation lives here, in C, so that both backends reject exactly the same inputs with
 * exactly the same messages, before touching any memory.
 */
#ifndef FASTGLU_INTERNAL_H
#define FASTGLU_INTERNAL_H

#include "fastglu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Records `status` and a printf-style message for fastglu_last_error_message(); returns status.
 * Every failing path of the API goes through it; nothing clears the message (errno-like). */
fastglu_status fastglu_set_error(fastglu_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/*
 * Validate the forward's arguments. Returns FASTGLU_SUCCESS when the call is legal; *empty is set
 * to 1 when there is no work (tokens == 0 or F == 0), in which case the pointers are not used.
 */
fastglu_status fastglu_check_swiglu_fwd(const char *fn, const void *input, int64_t input_row_stride,
                                        const void *output, int64_t output_row_stride,
                                        int64_t tokens, int64_t ffn_hidden_size,
                                        fastglu_dtype dtype, int *empty);

/* Validate the backward's arguments; as fastglu_check_swiglu_fwd. */
fastglu_status fastglu_check_swiglu_bwd(const char *fn, const void *dy, int64_t dy_row_stride,
                                        int64_t dy_col_stride, const void *input,
                                        int64_t input_row_stride, const void *dinput,
                                        int64_t dinput_row_stride, int64_t tokens,
                                        int64_t ffn_hidden_size, fastglu_dtype dtype, int *empty);

/* ---- validation building blocks (common.c), shared by the swiglu and glu checks ------------- */

/* 1 for FASTGLU_DTYPE_FP32, _FP16, _BF16 (the types arithmetic results are stored in), else 0. */
int fastglu_is_compute_dtype(fastglu_dtype dtype);

/* FASTGLU_ERROR_UNSUPPORTED_DTYPE naming `name` unless dtype is a compute dtype (fp8 included:
 * it is only ever a saved input). */
fastglu_status fastglu_check_compute_dtype(const char *fn, const char *name, fastglu_dtype dtype);

/* tokens >= 0, 0 <= ffn_hidden_size <= INT64_MAX / 4; *empty = (tokens == 0 || F == 0). */
fastglu_status fastglu_check_shape(const char *fn, int64_t tokens, int64_t ffn_hidden_size,
                                   int *empty);

/* A strided [rows, cols] region: its bounding byte range [begin, begin + bytes) and, when its
 * columns are contiguous (col_stride 1) or it has one column, its rows as byte intervals
 * [begin + i * row_bytes, begin + i * row_bytes + width_bytes), i < rows. */
typedef struct fastglu_region {
    const char *name;
    uintptr_t begin;
    uint64_t bytes;
    int64_t rows, row_bytes, width_bytes; /* width_bytes 0: columns not contiguous */
} fastglu_region;

/*
 * One tensor of `rows` x `cols` (both >= 1) elements of esize bytes: non-NULL, element-aligned,
 * strides >= 0, span representable; an output's rows must not overlap each other (row_stride >=
 * cols when rows > 1). Fills *r (named `name`) for the overlap tests.
 */
fastglu_status fastglu_check_tensor(const char *fn, fastglu_region *r, const char *name,
                                    const void *ptr, int64_t rows, int64_t cols, int64_t row_stride,
                                    int64_t col_stride, size_t esize, int is_output);

/* Whether two regions share a byte (exact for row intervals of one common row stride; otherwise
 * by bounding ranges, which may refuse a legal interleaving but never accept an overlap). */
int fastglu_regions_overlap(const fastglu_region *x, const fastglu_region *y);

/* FASTGLU_ERROR_INVALID_VALUE "fn: <out> overlaps <in>" when they share a byte. */
fastglu_status fastglu_check_disjoint(const char *fn, const fastglu_region *out,
                                      const fastglu_region *in);

/* ---- the gated-linear-unit family (fastglu_glu_*) --------------------------------------------
 *
 * Backward reductions (dbias over tokens, dweights over columns) use a fixed tiling so that their
 * fp32 summation order never depends on the launch configuration or the backend's threads:
 *   - tokens are cut into slabs of FASTGLU_SLAB_ROWS rows; a slab's per-column partial sum of d_a /
 *     d_v is formed in a fixed order (see src/glu_cuda.cu; src/glu_cpu.c follows the same order,
 *     so that both backends add the same terms the same way); dbias = the slabs' partials added
 *     in a fixed order (8 interleaved in-order sums, then those 8 in order).
 *   - columns j < F are cut into tiles of FASTGLU_TILE_COLS; dweights[t] = the tiles' partials
 *     added likewise.
 * Workspace (fastglu_glu_bwd_workspace_bytes), fp32, each part starting 16-byte aligned:
 *   [0, A)        dbias partials  [ceil(tokens / SLAB_ROWS)][2F]          (if want_dbias)
 *   [A, A + B)    dweights partials [ceil(F / TILE_COLS)][tokens]         (if want_dweights)
 */
#define FASTGLU_SLAB_ROWS 64
#define FASTGLU_TILE_COLS 256

/* Byte offsets of the two workspace parts (0 when a part is absent) and the total. */
typedef struct fastglu_glu_workspace_layout {
    size_t dbias_offset, dbias_bytes, dweights_offset, dweights_bytes, total;
} fastglu_glu_workspace_layout;
fastglu_glu_workspace_layout fastglu_glu_workspace(int64_t tokens, int64_t ffn_hidden_size,
                                                   int want_dbias, int want_dweights);

/* The CUDA reduction's order of n partials p[0], p[stride], ...: 8 interleaved in-order sums from
 * +0 (sum g takes partials g, g + 8, ...), then those 8 in order from +0 (glu_cuda.cu's
 * glu_reduce_kernel, glu_fp8_cuda.cu's fp8_reduce_kernel). The CPU backends' copy of that order. */
static inline float fastglu_reduce_partials(const float *p, int64_t n, int64_t stride) {
    float r = 0.0f;
    for (int g = 0; g < 8; ++g) {
        float sum = 0.0f;
        for (int64_t i = g; i < n; i += 8) sum += p[i * stride];
        r += sum;
    }
    return r;
}

/* The backward's block-scaled fp8 operands (fastglu_glu_operands.scale_1x128): the 1 x 128 blocks
 * of a row, 2 ceil(F / 128) with SPLIT (gate's, then up's), ceil(2F / 128) with INTERLEAVED. */
static inline int64_t fastglu_glu_scale_blocks(fastglu_layout layout, int64_t F) {
    return layout == FASTGLU_LAYOUT_INTERLEAVED ? (2 * F + 127) / 128 : 2 * ((F + 127) / 128);
}

/*
 * Validate fastglu_glu_fwd_* arguments (same parameters as the API, plus the function name for the
 * message). saved_fp8 (optional) is checked like an output of [tokens, 2F] one-byte elements, and
 * against every input and the output. On success *empty is 1 when tokens == 0 or F == 0 (nothing
 * to compute; the pointers are then not checked).
 */
fastglu_status fastglu_check_glu_fwd(const char *fn, const fastglu_glu_params *params,
                                     const void *gate, int64_t gate_row_stride, const void *up,
                                     int64_t up_row_stride, const void *bias, const void *weights,
                                     fastglu_dtype weights_dtype, int64_t weights_stride,
                                     const void *output, int64_t output_row_stride,
                                     const void *saved_fp8, int64_t saved_fp8_row_stride,
                                     int64_t tokens, int64_t ffn_hidden_size, fastglu_dtype dtype,
                                     int *empty);

/*
 * Validate fastglu_glu_bwd_* arguments. On success *empty is 1 when tokens == 0 or F == 0; then the
 * caller still zero-fills dbias ([2F], when F > 0) and dweights ([tokens], when tokens > 0), whose
 * pointers have been validated for exactly that.
 */
fastglu_status fastglu_check_glu_bwd(
    const char *fn, const fastglu_glu_params *params, const void *dy, int64_t dy_row_stride,
    int64_t dy_col_stride, const void *gate, int64_t gate_row_stride, const void *up,
    int64_t up_row_stride, fastglu_dtype input_dtype, const float *input_scale_inv,
    int64_t input_scale_stride, int input_scale_1x128, const void *bias, const void *weights,
    fastglu_dtype weights_dtype, int64_t weights_stride, const void *d_gate,
    int64_t d_gate_row_stride, const void *d_up, int64_t d_up_row_stride, const void *dbias,
    const void *dweights, const void *workspace, size_t workspace_bytes, int64_t tokens,
    int64_t ffn_hidden_size, fastglu_dtype dtype, int *empty);

/*
 * The checks that concern the descriptors themselves (fastglu_glu_fwd_* / _bwd_*): the structs
 * given, the dtypes of the present operands agreeing (gate, up, bias, output / dy, d_gate, d_up,
 * dbias one dtype; dweights the weights'; saved_fp8 fp8; scale_inv fp32 and, in the forward,
 * absent), bias, dbias and dweights contiguous. The rest (sizes, strides, pointers, overlaps)
 * is fastglu_check_glu_fwd / _bwd's, on the descriptors' fields.
 */
fastglu_status fastglu_check_glu_fwd_descriptors(const char *fn, const fastglu_glu_operands *o,
                                                 const fastglu_tensor *output,
                                                 const fastglu_tensor *saved_fp8);
fastglu_status fastglu_check_glu_bwd_descriptors(const char *fn, const fastglu_tensor *dy,
                                                 const fastglu_glu_operands *o,
                                                 const fastglu_glu_grads *g);

/* The descriptors' fields in the order of the backends' flat entry points (fastglu_check_glu_fwd /
 * _bwd's arguments after params), tokens and F included: the forward's dtype is output's, the
 * backward's dy's. */
#define FASTGLU_GLU_FWD_FIELDS(o, output, saved_fp8, tokens, F)                                    \
    (o)->gate.data, (o)->gate.row_stride, (o)->up.data, (o)->up.row_stride, (o)->bias.data,        \
        (o)->weights.data, (o)->weights.dtype, (o)->weights.row_stride, (output).data,             \
        (output).row_stride, (saved_fp8).data, (saved_fp8).row_stride, (tokens), (F),              \
        (output).dtype
#define FASTGLU_GLU_BWD_FIELDS(dy, dy_col_stride, o, g, workspace, tokens, F)                      \
    (dy).data, (dy).row_stride, (dy_col_stride), (o)->gate.data, (o)->gate.row_stride,             \
        (o)->up.data, (o)->up.row_stride, (o)->gate.dtype, (const float *)(o)->scale_inv.data,     \
        (o)->scale_inv.row_stride, (o)->scale_1x128, (o)->bias.data, (o)->weights.data,            \
        (o)->weights.dtype, (o)->weights.row_stride, (g)->d_gate.data, (g)->d_gate.row_stride,     \
        (g)->d_up.data, (g)->d_up.row_stride, (g)->dbias.data, (g)->dweights.data,                 \
        (workspace).data, (workspace).bytes, (tokens), (F), (dy).dtype

/* 1 when params asks for a clamp (clamp_value > 0; NaN and <= 0 do not). */
static inline int fastglu_clamps(const fastglu_glu_params *p) { return p->clamp_value > 0.0f; }

/* The clamp bound the math uses: clamp_value rounded to dtype (round to nearest even), as
 * torch.clamp rounds its bound to the tensor's dtype; 0 when params asks for no clamp. The
 * validation (fastglu_check_glu_fwd / _bwd) has refused the values it would turn into 0 or a
 * finite value into infinity, so a clamp is > 0 here. */
float fastglu_glu_clamp(const fastglu_glu_params *p, fastglu_dtype dtype);

#ifdef __cplusplus
}
#endif

#endif /* FASTGLU_INTERNAL_H */
