/*
 * fastglu.h — gated-linear-unit activations (SwiGLU) for LLM training, C API.
 *
 * Plain C11; also compiles as C++. No CUDA header is needed to include it: streams are passed as
 * `void *` and mean `cudaStream_t` (NULL = the legacy default stream).
 *
 * Layout (Megatron-Core "fc1 output" layout): the input holds, for each of `tokens` rows, the gate
 * and the up projection concatenated on the last dimension:
 *
 *     input  [tokens, 2F]   gate = input[:, 0:F],  up = input[:, F:2F]
 *     output [tokens, F]    F = ffn_hidden_size (the per-rank width under tensor parallelism)
 *
 * Math (Megatron-Core megatron/core/fusions/fused_bias_swiglu.py: `swiglu`, `swiglu_back`):
 *
 *     forward:   y      = silu(gate) * up,          silu(x) = x * sigmoid(x)
 *     backward:  d_gate = dy * up * sigmoid(gate) * (1 + gate * (1 - sigmoid(gate)))
 *                d_up   = dy * silu(gate)
 *
 * All arithmetic is in fp32; values are rounded to the tensor's element type only when stored.
 * sigmoid(x) = 1 / (1 + 2^(-log2(e) x)); the CUDA backend takes 2^x and 1/x from the GPU's
 * special-function unit (approximations within a few fp32 ulp), the CPU backend from exp2f and a
 * division, in the same order of operations. This holds for SwiGLU and for every activation of the
 * gated-linear-unit family below (GELU_TANH's tanh taken as 0.5 (1 + tanh x) = sigmoid(2 x)). The
 * reciprocal keeps subnormal results on both backends. fastglu_swiglu_*_{cpu,cuda} are
 * fastglu_glu_*_{cpu,cuda} with the plain SILU parameters and up = input + F: the same code, the
 * same bits.
 *
 * Strides and sizes are counted in elements (not bytes) and are 64-bit. A "row stride" is the
 * distance between the first elements of consecutive rows; within a row, input and output elements
 * are contiguous (column stride 1). The upstream gradient dy may have any row and column strides,
 * including 0 (an expanded scalar, as `y.sum().backward()` produces); it is read in place.
 *
 * Every function validates its arguments first; on an error it returns a status other than
 * FASTGLU_SUCCESS, writes nothing, and launches nothing. `fastglu_last_error_message()` then gives
 * a sentence naming the offending argument (thread-local), until the next failed call on the same
 * thread: like errno, a successful call leaves it as it is, so test the status, not the message.
 * tokens == 0 or F == 0 is legal: nothing is read, written or launched.
 *
 * CUDA functions are asynchronous with respect to the host: they enqueue one kernel on `stream`
 * and return; they never synchronize and never allocate.
 */
#ifndef FASTGLU_H
#define FASTGLU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FASTGLU_VERSION_MAJOR 0
#define FASTGLU_VERSION_MINOR 6
#define FASTGLU_VERSION_PATCH 0

#if defined(_WIN32)
#define FASTGLU_API __declspec(dllexport)
#else
#define FASTGLU_API __attribute__((visibility("default")))
#endif

/* Status codes. */
typedef enum fastglu_status {
    FASTGLU_SUCCESS = 0,
    FASTGLU_ERROR_INVALID_VALUE = 1,     /* a NULL pointer, negative size, bad stride, aliasing  */
    FASTGLU_ERROR_UNSUPPORTED_DTYPE = 2, /* dtype is not one of fastglu_dtype                  */
    FASTGLU_ERROR_NO_CUDA = 3, /* library built without CUDA, or no usable device/driver */
    FASTGLU_ERROR_CUDA = 4     /* the CUDA runtime reported an error (launch failure)   */
} fastglu_status;

/* Element types of input, output, dinput and dy (all four share one type). */
typedef enum fastglu_dtype {
    FASTGLU_DTYPE_FP32 = 0,    /* IEEE binary32                                              */
    FASTGLU_DTYPE_FP16 = 1,    /* IEEE binary16                                              */
    FASTGLU_DTYPE_BF16 = 2,    /* bfloat16 (8-bit exponent, 7-bit mantissa)                  */
    FASTGLU_DTYPE_FP8_E4M3 = 3 /* float8 e4m3fn (torch.float8_e4m3fn); only as the saved input
                                  of fastglu_glu_bwd_* (the operands' dtype), which fastglu_glu_fwd_*
                                  can write (saved_fp8); never as a compute type */
} fastglu_dtype;

/* A static, human-readable name of a status code ("success", "invalid value", ...). */
FASTGLU_API const char *fastglu_strerror(fastglu_status status);

/* The message of the last failed call on this thread ("" if none has failed); a successful call
 * does not change it. */
FASTGLU_API const char *fastglu_last_error_message(void);

/* Library version as MAJOR*10000 + MINOR*100 + PATCH. */
FASTGLU_API int fastglu_version(void);

/* Size in bytes of one element of dtype, or 0 for an unknown dtype. */
FASTGLU_API size_t fastglu_dtype_size(fastglu_dtype dtype);

/* 1 if the library was built with the CUDA backend (whether or not a GPU is present), else 0. */
FASTGLU_API int fastglu_cuda_built(void);

/* 1 if the library was built with the CUDA backend and a CUDA device is usable, else 0. */
FASTGLU_API int fastglu_cuda_available(void);

/* ---------------------------------------------------------------------------------------------
 * SwiGLU forward.
 *
 *   input            [tokens, 2 * ffn_hidden_size], row stride input_row_stride (any >= 0: rows
 *                    may overlap, e.g. 0 for one row broadcast to every token; it is only read)
 *   output           [tokens, ffn_hidden_size],     row stride output_row_stride (>= F if tokens > 1)
 *   tokens           number of rows (S * B for a [S, B, 2F] input), >= 0
 *   ffn_hidden_size  F, >= 0
 *   dtype            element type of input and output
 *   stream           (CUDA only) cudaStream_t to launch on
 *
 * output must not overlap input.
 * Errors: FASTGLU_ERROR_INVALID_VALUE, FASTGLU_ERROR_UNSUPPORTED_DTYPE, FASTGLU_ERROR_NO_CUDA,
 *         FASTGLU_ERROR_CUDA.
 * ------------------------------------------------------------------------------------------- */
FASTGLU_API fastglu_status fastglu_swiglu_fwd_cuda(const void *input, int64_t input_row_stride,
                                                   void *output, int64_t output_row_stride,
                                                   int64_t tokens, int64_t ffn_hidden_size,
                                                   fastglu_dtype dtype, void *stream);

FASTGLU_API fastglu_status fastglu_swiglu_fwd_cpu(const void *input, int64_t input_row_stride,
                                                  void *output, int64_t output_row_stride,
                                                  int64_t tokens, int64_t ffn_hidden_size,
                                                  fastglu_dtype dtype);

/* ---------------------------------------------------------------------------------------------
 * SwiGLU backward (dgrad of the input).
 *
 *   dy               [tokens, F] upstream gradient; element (t, j) at dy[t * dy_row_stride +
 *                    j * dy_col_stride]; any strides >= 0 (0 = broadcast), read in place
 *   input            [tokens, 2F] the forward input (gate | up), row stride input_row_stride
 *   dinput           [tokens, 2F] output: d_gate in columns [0, F), d_up in [F, 2F),
 *                    row stride dinput_row_stride (>= 2F if tokens > 1)
 *   tokens, ffn_hidden_size, dtype, stream: as in the forward
 *
 * dinput must not overlap dy. It may be exactly the input (dinput == input and
 * dinput_row_stride == input_row_stride): the in-place backward, where each element of the input is
 * read before its gradient is written over it; any other overlap with input is an error.
 * Errors: as the forward.
 * ------------------------------------------------------------------------------------------- */
FASTGLU_API fastglu_status fastglu_swiglu_bwd_cuda(const void *dy, int64_t dy_row_stride,
                                                   int64_t dy_col_stride, const void *input,
                                                   int64_t input_row_stride, void *dinput,
                                                   int64_t dinput_row_stride, int64_t tokens,
                                                   int64_t ffn_hidden_size, fastglu_dtype dtype,
                                                   void *stream);

FASTGLU_API fastglu_status fastglu_swiglu_bwd_cpu(const void *dy, int64_t dy_row_stride,
                                                  int64_t dy_col_stride, const void *input,
                                                  int64_t input_row_stride, void *dinput,
                                                  int64_t dinput_row_stride, int64_t tokens,
                                                  int64_t ffn_hidden_size, fastglu_dtype dtype);

/* =============================================================================================
 * The gated-linear-unit family (Megatron-Core's fused activations, Liger's SwiGLU options).
 *
 * Sources of the formulas: Megatron-Core megatron/core/fusions/fused_bias_swiglu.py (swiglu,
 * swiglu_back, weighted_swiglu, weighted_swiglu_back), fused_bias_geglu.py (geglu, geglu_back,
 * quick_gelu, quick_geglu, quick_geglu_back, weighted_bias_quick_geglu_impl and its clamp),
 * Liger-Kernel's SwiGLU (gate_multiplier inside the activation, down_multiplier on the output).
 *
 * For token t and column j < F (F = ffn_hidden_size), with the raw operands g = gate[t, j],
 * u = up[t, j], the bias b = [b_gate | b_up] of 2F values, the per-token weight w[t] (1 without
 * weights), clamp value c, offset o = glu_linear_offset, multipliers m_g, m_d:
 *
 *   clamp (only when c > 0):   g' = min(g, c),  u' = min(max(u, -c), c)      (else g' = g, u' = u)
 *   bias:                      a = g' + b_gate[j],  v = u' + b_up[j]          (bias 0 without one)
 *   activation of z = m_g * a:
 *     SILU        act(z) = z * sigmoid(z)                                      act'(z) = s (1 + z (1 - s)), s = sigmoid(z)
 *     GELU_TANH   act(z) = 0.5 z (1 + tanh(k z (1 + 0.044715 z^2))), k = 0.79788456
 *                 act'(z) = 0.5 z (1 - th^2)(0.79788456 + 0.1070322243 z^2) + 0.5 (1 + th)
 *     QUICK_GELU  act(z) = z * sigmoid(1.702 z)                               act'(z) = s (1 + 1.702 z (1 - s))
 *   forward:    y[t, j] = m_d * w[t] * act(z) * (v + o)
 *   backward, with e = m_d * w[t] * dy[t, j]:
 *     d_a = e * (v + o) * act'(z) * m_g        d_v = e * act(z)
 *     dbias[j] = sum_t d_a,  dbias[F + j] = sum_t d_v          (the bias enters after the clamp)
 *     d_gate[t, j] = d_a if (c <= 0 or g <= c) else 0
 *     d_up[t, j]   = d_v if (c <= 0 or -c <= u <= c) else 0    (as torch.clamp's gradient)
 *     dweights[t]  = sum_j m_d * act(z) * (v + o) * dy[t, j]
 *
 * The clamp is applied to the raw operand, before the bias, as in Megatron's
 * weighted_bias_quick_geglu_impl (the only Megatron function with both); a NaN operand stays NaN
 * (torch.clamp) and its gradient is 0. clamp_value <= 0 or NaN means no clamp (Megatron 0.19
 * clamps for any value that is not None; 0 would zero the output). c is clamp_value rounded to the
 * operands' dtype (round to nearest even), as torch.clamp rounds its bound to the tensor's dtype:
 * clamp_value 1.1f clamps bf16 operands at 1.1015625, and a gate equal to that passes its gradient.
 * Forward and backward, every entry point and backend, use that c. A positive clamp_value that
 * rounds to 0 in dtype, or a finite one beyond dtype's largest finite value (which torch.clamp
 * refuses), is FASTGLU_ERROR_INVALID_VALUE.
 *
 * Layouts:
 *   FASTGLU_LAYOUT_SPLIT        gate and up are two [tokens, F] operands, each with its own pointer
 *                               and row stride (Megatron's fc1 output passes up = gate + F with the
 *                               same row stride; HF's gate_proj / up_proj outputs pass two tensors).
 *                               bias (if any) is [2F]: b_gate = bias[0:F], b_up = bias[F:2F].
 *                               The gradients are written the same way: d_gate / d_up pointers.
 *   FASTGLU_LAYOUT_INTERLEAVED  one [tokens, 2F] operand x: gate[t, j] = x[t, 2j], up[t, j] =
 *                               x[t, 2j + 1] (GPT-OSS checkpoints). Pass x as `gate`, `up` absent
 *                               (data NULL); bias [2F] is interleaved the same way; d_gate is the
 *                               [tokens, 2F] gradient, d_up absent.
 *
 * Element types: gate, up, bias, output, dy, d_gate, d_up and dbias share one dtype, the call's
 * (FP32, FP16 or BF16); weights and dweights share theirs (FP32, FP16 or BF16; Megatron passes fp32
 * probs with bf16 activations). The backward may read saved operands stored as
 * FASTGLU_DTYPE_FP8_E4M3, decoded as fp8 * scale_inv; the forward can write that fp8 copy itself
 * (saved_fp8) in the pass that computes its output. All arithmetic is fp32; dbias and dweights
 * accumulate in fp32 in a fixed order, the same on both backends, so results are bitwise
 * reproducible run to run and independent of the launch configuration.
 * ========================================================================================== */

typedef enum fastglu_activation {
    FASTGLU_ACT_SILU = 0,      /* SwiGLU                                     */
    FASTGLU_ACT_GELU_TANH = 1, /* GeGLU with Megatron's tanh approximation   */
    FASTGLU_ACT_QUICK_GELU = 2 /* quick-GeGLU: z * sigmoid(1.702 z)          */
} fastglu_activation;

typedef enum fastglu_layout {
    FASTGLU_LAYOUT_SPLIT = 0,      /* gate, up: two [tokens, F] operands        */
    FASTGLU_LAYOUT_INTERLEAVED = 1 /* one [tokens, 2F] operand, gate at even columns */
} fastglu_layout;

/* What the activation computes (see above). fastglu_glu_params_default() gives the plain
 * activation: no clamp (0), offset 0, both multipliers 1, SPLIT layout. */
typedef struct fastglu_glu_params {
    fastglu_activation activation;
    fastglu_layout layout;
    float clamp_value;       /* c: > 0 clamps (at c rounded to dtype); <= 0 or NaN: no clamp */
    float glu_linear_offset; /* o: added to up after clamp and bias             */
    float gate_multiplier;   /* m_g: scales the activation's argument (Liger)   */
    float down_multiplier;   /* m_d: scales the output (Liger)                  */
} fastglu_glu_params;

FASTGLU_API fastglu_glu_params fastglu_glu_params_default(fastglu_activation activation);

/* ---------------------------------------------------------------------------------------------
 * Operand descriptors.
 *
 * The family's functions take their 2D operands as fastglu_tensor descriptors (pointer, dtype, row
 * stride; columns contiguous), gathered in two structs: the forward's operands, which the backward
 * reads again (fastglu_glu_operands), and the backward's gradients (fastglu_glu_grads). An optional
 * operand is absent when its data is NULL (its other fields are then ignored).
 * ------------------------------------------------------------------------------------------- */

typedef struct fastglu_tensor {
    void *data; /* NULL: absent (optional operands only)                          */
    fastglu_dtype dtype;
    int64_t row_stride; /* elements between rows (matrix) or consecutive elements (vector) */
} fastglu_tensor;

/* The forward's operands (F = ffn_hidden_size). Inputs are only read. */
typedef struct fastglu_glu_operands {
    fastglu_tensor gate;      /* SPLIT: [tokens, F]; INTERLEAVED: [tokens, 2F] (gate and up
                                 interleaved). dtype: the call's dtype (the backward also takes
                                 FASTGLU_DTYPE_FP8_E4M3, Megatron's fp8_input_store, e.g. the
                                 forward's saved_fp8 copy). Row stride >= 0 (rows may overlap). */
    fastglu_tensor up;        /* SPLIT: [tokens, F], gate's dtype; INTERLEAVED: absent          */
    fastglu_tensor bias;      /* absent, or [2F] of the call's dtype, contiguous (row_stride 1)
                                 (layout: see Layouts)                                          */
    fastglu_tensor weights;   /* absent, or [tokens] per-token weights (MoE probs), FP32, FP16 or
                                 BF16: element t at data[t * row_stride] (row_stride >= 0)      */
    fastglu_tensor scale_inv; /* backward with fp8 operands only (else absent): absent (scale 1),
                                 or FP32 values, element t at data[t * row_stride] (0: one
                                 per-tensor value, 1: one per token); the operand is fp8 * value */
    int scale_1x128;          /* 0: scale_inv as above. 1: one scale_inv per 1 x 128 block of each
                                 row (DeepSeek-V3's cached SwiGLU input): [tokens, nb], element
                                 (t, b) at data[t * row_stride + b], nb = 2 ceil(F / 128) with
                                 SPLIT (gate's blocks, then up's: for F a multiple of 128, the
                                 blocks of the [tokens, 2F] row) and ceil(2F / 128) with
                                 INTERLEAVED (the blocks of the [tokens, 2F] operand); gate[t, j]
                                 decodes with block j / 128, up[t, j] with ceil(F / 128) + j / 128
                                 (SPLIT); x[t, c] with c / 128 (INTERLEAVED). Needs scale_inv;
                                 row_stride >= 0, rows may overlap (0: one row of block scales
                                 for every token), as the other inputs' rows may. */
} fastglu_glu_operands;

/* The backward's outputs. */
typedef struct fastglu_glu_grads {
    fastglu_tensor d_gate; /* the operands' layout: SPLIT [tokens, F]; INTERLEAVED [tokens, 2F]  */
    fastglu_tensor d_up;   /* SPLIT: [tokens, F]; INTERLEAVED: absent                            */
    fastglu_tensor dbias;  /* absent, or [2F] contiguous (row_stride 1): the bias gradient summed
                                over tokens (requires bias), the bias's layout                    */
    fastglu_tensor dweights; /* absent, or [tokens] contiguous (row_stride 1), the weights' dtype
                                (requires weights)                                                */
} fastglu_glu_grads;

/* Scratch memory of the backward: device (CUDA) or host (CPU) memory, 16-byte aligned. */
typedef struct fastglu_workspace {
    void *data;
    size_t bytes;
} fastglu_workspace;

/* ---------------------------------------------------------------------------------------------
 * Gated activation, forward.
 *
 *   params           activation, layout, clamp, offset, multipliers (not NULL)
 *   operands         gate, up, bias, weights (not NULL; scale_inv must be absent). gate's dtype
 *                    is the call's dtype (FP32, FP16 or BF16); up and bias have it too.
 *   output           [tokens, F] of the call's dtype, row stride >= F if tokens > 1
 *   saved_fp8        absent, or the fp8 copy of the operands for the backward (Megatron's
 *                    fp8_input_store): [tokens, 2F] bytes of float8_e4m3fn (dtype
 *                    FASTGLU_DTYPE_FP8_E4M3), row stride in bytes (= elements; >= 2F if
 *                    tokens > 1), column stride 1, any alignment. Each row receives that token's
 *                    operands as stored (before the bias; for the clamp, see below), in the
 *                    operands' layout:
 *                      SPLIT        gate[t, j] at column j, up[t, j] at column F + j (also when
 *                                   gate and up are two tensors: the copy is one [tokens, 2F] row)
 *                      INTERLEAVED  gate[t, j] at column 2j, up[t, j] at 2j + 1 (as the input)
 *                    The cast is PyTorch's `x.to(torch.float8_e4m3fn)`: the exact value rounded to
 *                    the nearest e4m3fn value, ties to even; magnitudes that round above 448 and
 *                    +-Inf saturate to +-448; NaN stays NaN (sign kept: 0x7f / 0xff); -0 stays -0;
 *                    magnitudes up to 2^-10 (half the smallest subnormal 2^-9; the tie goes to
 *                    the even 0) round to +-0.
 *                    With a clamp (c, in dtype), each operand is first moved to the side of the
 *                    bound the clamp puts it on, so that the backward, which clamps and masks the
 *                    decoded copy as any saved input, cuts exactly the elements the forward's clamp
 *                    cut (e4m3 would round a gate of 7.2 onto a bound of 7, or 6.9 beyond a bound
 *                    of 6.9): with lo the largest e4m3fn value <= c and hi the smallest > c, a cut
 *                    operand (gate > c; up > c or up < -c) is stored as +-hi, which the backward
 *                    clamps back to +-c; an uncut one as the cast of min(gate, lo), or of up
 *                    clamped to [-lo, lo]: its own cast, except where that would land beyond the
 *                    bound (then lo, its neighbour on the bound's side). NaN stays NaN. A finite c
 *                    >= 448 (nothing in e4m3fn lies beyond it) is FASTGLU_ERROR_INVALID_VALUE;
 *                    c = +inf cuts nothing and gets the plain cast.
 *                    The backward then reads it as its operands: gate = {saved_fp8,
 *                    FASTGLU_DTYPE_FP8_E4M3, row stride} (scale_inv absent), and for SPLIT up =
 *                    {saved_fp8 + F, FASTGLU_DTYPE_FP8_E4M3, the same row stride}.
 *                    Written in the same pass as output (no second read of the input).
 *   tokens           number of rows, >= 0
 *   ffn_hidden_size  F, >= 0
 *   stream           (CUDA only) cudaStream_t
 *
 * output and saved_fp8 must not overlap any input or each other. Errors:
 * FASTGLU_ERROR_INVALID_VALUE (NULL, negative size or stride, a saved_fp8 row stride < 2F, overlap,
 * up given with INTERLEAVED, a bias not contiguous, scale_inv given, bad params, a clamp dtype
 * cannot hold or, with saved_fp8, a finite clamp >= 448), FASTGLU_ERROR_UNSUPPORTED_DTYPE (a dtype
 * outside the set, or operands whose dtypes disagree), FASTGLU_ERROR_NO_CUDA, FASTGLU_ERROR_CUDA.
 * One kernel launch; no allocation, no synchronization.
 * ------------------------------------------------------------------------------------------- */
#define FASTGLU_GLU_FWD_ARGS                                                                       \
    const fastglu_glu_params *params, const fastglu_glu_operands *operands, fastglu_tensor output, \
        fastglu_tensor saved_fp8, int64_t tokens, int64_t ffn_hidden_size

FASTGLU_API fastglu_status fastglu_glu_fwd_cpu(FASTGLU_GLU_FWD_ARGS);
FASTGLU_API fastglu_status fastglu_glu_fwd_cuda(FASTGLU_GLU_FWD_ARGS, void *stream);

/* ---------------------------------------------------------------------------------------------
 * Gated activation, backward (dgrad of gate and up; bias and weight gradients reduced).
 *
 *   params           as the forward
 *   dy               [tokens, F] upstream gradient; its dtype is the call's dtype (FP32, FP16 or
 *                    BF16): element (t, j) at dy.data[t * dy.row_stride + j * dy_col_stride]; any
 *                    strides >= 0 (0 = broadcast), read in place
 *   operands         the forward's (not NULL): gate and up stored as dy's dtype or as
 *                    FASTGLU_DTYPE_FP8_E4M3 (then scale_inv may scale them); bias and weights as
 *                    in the forward
 *   grads            (not NULL) d_gate, d_up of dy's dtype with the operands' layout; in place
 *                    is legal: d_gate.data == gate.data and d_up.data == up.data with equal row
 *                    strides (operands of dy's dtype); any other overlap with an input is an
 *                    error. dbias (dy's dtype) and dweights (the weights' dtype), when present.
 *   workspace        at least fastglu_glu_bwd_workspace_bytes(...) bytes (device memory for
 *                    CUDA, host memory for the CPU), 16-byte aligned; data may be NULL when that
 *                    size is 0 (no dbias and no dweights). Its contents on entry do not matter
 *                    and are undefined on return (CUDA: the reduction drops the partials it has
 *                    read from the L2 cache without writing them back to memory).
 *   tokens, ffn_hidden_size, stream: as the forward
 *
 * tokens == 0 or F == 0: nothing is read; dbias (when F > 0) and dweights (when tokens > 0) are
 * set to zero, the sums over nothing (their pointers are validated); nothing else is written.
 * CUDA: without dbias and dweights one kernel; with either, one kernel plus one short reduction
 * kernel over the workspace (where built for sm_90 or later, a programmatic dependent launch: it
 * may start while the first kernel finishes, and waits for its results). Errors: as the forward.
 * ------------------------------------------------------------------------------------------- */
FASTGLU_API size_t fastglu_glu_bwd_workspace_bytes(int64_t tokens, int64_t ffn_hidden_size,
                                                   int want_dbias, int want_dweights);

#define FASTGLU_GLU_BWD_ARGS                                                                       \
    const fastglu_glu_params *params, fastglu_tensor dy, int64_t dy_col_stride,                    \
        const fastglu_glu_operands *operands, const fastglu_glu_grads *grads,                      \
        fastglu_workspace workspace, int64_t tokens, int64_t ffn_hidden_size

FASTGLU_API fastglu_status fastglu_glu_bwd_cpu(FASTGLU_GLU_BWD_ARGS);
FASTGLU_API fastglu_status fastglu_glu_bwd_cuda(FASTGLU_GLU_BWD_ARGS, void *stream);

/* =============================================================================================
 * Linear layers: fc1 GEMM with the gated activation in its epilogue (and the plain GEMM).
 *
 * One operand is described by a fastglu_tensor: a row-major matrix with column stride 1 (element
 * (i, j) at data[i * row_stride + j]), or a vector (element i at data[i * row_stride]). data NULL
 * means absent, for the optional operands (bias, weights, h). Inputs are only read. Sizes and
 * strides are in elements and 64-bit.
 *
 *   fastglu_linear_*:        out[tokens, out_features] = x[tokens, in_features]
 *                                                        @ w[out_features, in_features]^T (+ bias)
 *                            (torch.nn.functional.linear)
 *   fastglu_linear_glu_fwd_*: with F = ffn_hidden_size,
 *                            h[tokens, 2F] = x[tokens, hidden] @ w1[2F, hidden]^T (+ bias[2F])
 *                            y[tokens, F]  = glu(h): the family's forward (above) with params'
 *                            activation, layout, clamp, offset and multipliers, and the optional
 *                            per-token weights, applied to h as its raw operand (gate | up for
 *                            FASTGLU_LAYOUT_SPLIT: gate = h[:, 0:F] from w1 rows [0, F), up =
 *                            h[:, F:2F]; FASTGLU_LAYOUT_INTERLEAVED: gate = h[:, 2j], up =
 *                            h[:, 2j + 1], w1's rows interleaved the same way).
 *
 * Arithmetic: products summed in fp32; the bias is added in fp32 to the sum, which is then rounded
 * to dtype: that is h (stored if h.data is not NULL). y is computed from h rounded to dtype, so y
 * equals what fastglu_glu_fwd_* (on the same backend, bias NULL) gives for that h, bit for bit, and
 * the clamp acts on h (bias included) as the standalone forward's clamp acts on its raw operands.
 * The CPU backend sums k = 0, 1, ..., K-1 in order with separate multiplies and adds; the CUDA
 * backend in a fixed order of its own (fused multiply-adds). Both are bitwise deterministic run to
 * run; the two backends (and the CUDA backend's two kernels) agree to rounding, not bit for bit.
 *
 * dtypes: x, w, bias, h / out, y share one dtype: FASTGLU_DTYPE_BF16 or _FP16 on both backends,
 * FASTGLU_DTYPE_FP32 too (CPU; CUDA through its general kernel). weights: FP32, FP16 or BF16.
 *
 * Validation (both backends, same messages naming the argument): params as fastglu_glu_fwd_*;
 * dtypes; sizes >= 0; x [tokens, in_features] and w [out_features, in_features] with row strides
 * >= 0; bias contiguous (row_stride 1); weights of any stride >= 0; outputs with row_stride >= their
 * width (when more than one row); every pointer aligned to its element; no output overlapping an
 * input or another output. tokens == 0 or out_features (F) == 0 is legal and does nothing (the
 * pointers are then not checked); in_features (hidden) == 0 gives h = bias (or 0) and x, w are not
 * read. On an error nothing is written and nothing launched.
 *
 * CUDA: no allocation, no synchronization; one kernel on `stream`: on compute capability 9.0 a
 * TMA + wgmma kernel where the operands allow it (bf16 / fp16; K and N multiples of 8; x and w
 * 16-byte aligned with row strides multiples of 8; h 4-byte aligned with an even row stride; y
 * likewise with SPLIT, 2-byte aligned with INTERLEAVED), else a general tiled kernel (any shape,
 * alignment, layout and GPU the library is built for). Each kernel is bitwise deterministic; the
 * two sum in different orders, so calls whose operands pick different kernels (h given or not,
 * other strides) agree to rounding. Errors: FASTGLU_ERROR_INVALID_VALUE,
 * FASTGLU_ERROR_UNSUPPORTED_DTYPE, FASTGLU_ERROR_NO_CUDA,
 * FASTGLU_ERROR_CUDA.
 * ========================================================================================== */

/* fastglu_tensor: see "Operand descriptors" above. */

FASTGLU_API fastglu_status fastglu_linear_cuda(fastglu_tensor x, fastglu_tensor w,
                                               fastglu_tensor bias, fastglu_tensor out,
                                               int64_t tokens, int64_t in_features,
                                               int64_t out_features, void *stream);

FASTGLU_API fastglu_status fastglu_linear_cpu(fastglu_tensor x, fastglu_tensor w,
                                              fastglu_tensor bias, fastglu_tensor out,
                                              int64_t tokens, int64_t in_features,
                                              int64_t out_features);

/* params: activation, layout, clamp_value, glu_linear_offset, gate_multiplier, down_multiplier
 * (not NULL). x [tokens, hidden], w1 [2F, hidden], bias NULL or [2F], weights NULL or [tokens]
 * (element t at weights.data[t * weights.row_stride]), h NULL or [tokens, 2F], y [tokens, F]. */
FASTGLU_API fastglu_status fastglu_linear_glu_fwd_cuda(const fastglu_glu_params *params,
                                                       fastglu_tensor x, fastglu_tensor w1,
                                                       fastglu_tensor bias, fastglu_tensor weights,
                                                       fastglu_tensor h, fastglu_tensor y,
                                                       int64_t tokens, int64_t hidden,
                                                       int64_t ffn_hidden_size, void *stream);

FASTGLU_API fastglu_status fastglu_linear_glu_fwd_cpu(const fastglu_glu_params *params,
                                                      fastglu_tensor x, fastglu_tensor w1,
                                                      fastglu_tensor bias, fastglu_tensor weights,
                                                      fastglu_tensor h, fastglu_tensor y,
                                                      int64_t tokens, int64_t hidden,
                                                      int64_t ffn_hidden_size);

/* ---------------------------------------------------------------------------------------------
 * fc2 dgrad with the gated activation's backward in its epilogue (dGLU), so that the forward keeps
 * h only (not y). With F = ffn_hidden_size, H = hidden:
 *
 *   dY[tokens, F]  = dO[tokens, H] @ w2[H, F]     (w2 is fc2's weight as F.linear holds it:
 *                                                  fc2 out = y @ w2^T, so w2 has H rows of F)
 *   dh[tokens, 2F] = the family's backward (above) of dY with respect to h, the forward's raw
 *                    operand: d_gate / d_up in h's layout (SPLIT: d_gate = dh[:, 0:F], d_up =
 *                    dh[:, F:2F]; INTERLEAVED: d_gate = dh[:, 2j], d_up = dh[:, 2j + 1])
 *   y[tokens, F]   = glu(h), recomputed (optional): fc2's input, which its weight gradient needs;
 *                    the per-token weights included, as fastglu_linear_glu_fwd_* writes it
 *   dweights[tokens] = sum_j m_d * act(z) * (v + o) * dY[t, j] (optional, requires weights)
 *
 * h is fc1's output as fastglu_linear_glu_fwd_* stores it, fc1's bias already inside, so the math
 * is the family's with no bias: fc1's bias gradient is dh summed over tokens, which the caller
 * takes (dh.sum(0)); fc1's dgrad (dh @ w1) and both weight gradients are plain GEMMs (cuBLAS).
 *
 * Arithmetic: dY is summed in fp32 (the CPU: k = 0, 1, ..., H-1 in order, separate multiplies and
 * adds; CUDA: fused multiply-adds in a fixed order of its own) and rounded to dtype before the
 * epilogue reads it, as a separate GEMM's output would be before fastglu_glu_bwd_* read it: on the
 * CPU dh and y are then fastglu_glu_bwd_cpu's bits on that dY. dh and y are rounded
 * to dtype when stored; y is the value fastglu_linear_glu_fwd_* computes from the same h (same
 * operations). dweights[t] adds its F terms in fp32 in a fixed order (the CPU: j in order; CUDA:
 * the general kernel's fixed tree), bitwise reproducible run to run, rounded to weights' dtype.
 *
 *   params     as fastglu_linear_glu_fwd_* (not NULL)
 *   d_out      dO [tokens, hidden]
 *   w2         [hidden, F], row stride >= 0 (only read)
 *   h          [tokens, 2F], the saved pre-activation, params->layout's layout
 *   weights    NULL or [tokens] per-token weights (element t at data[t * row_stride]), FP32 / FP16
 *              / BF16
 *   dh         [tokens, 2F] output, h's layout
 *   y          NULL or [tokens, F] output
 *   dweights   NULL or [tokens] output of weights' dtype (requires weights; row_stride >= 1)
 *
 * dtypes: d_out, w2, h, dh, y share one dtype (BF16, FP16; FP32 too, CUDA through the general
 * kernel). Validation as fastglu_linear_glu_fwd_*: no output overlaps an input or another output,
 * but dh may be h itself (the same data pointer and row stride): dh is then written over h, each
 * element after it was read (the memory of one [tokens, 2F] buffer less). tokens == 0 does
 * nothing; F == 0 writes dweights (if given) as zeros, the sums over nothing, and nothing else;
 * hidden == 0 gives dY = 0 (d_out, w2 not read).
 * CUDA: one kernel on `stream`, no allocation, no synchronization: on compute capability 9.0 the
 * TMA + wgmma kernel where it takes the problem (bf16 / fp16; H and F multiples of 8; d_out and w2
 * 16-byte aligned with row strides multiples of 8; SPLIT; h, dh and y 4-byte aligned with even row
 * strides; with dweights, each block takes all F columns of its 128 tokens), else the general
 * tiled kernel (any shape, layout, alignment; with dweights, each block takes all F columns of its
 * 64 tokens). dweights is deterministic either way. Errors: FASTGLU_ERROR_INVALID_VALUE,
 * FASTGLU_ERROR_UNSUPPORTED_DTYPE, FASTGLU_ERROR_NO_CUDA, FASTGLU_ERROR_CUDA.
 * ------------------------------------------------------------------------------------------- */
FASTGLU_API fastglu_status fastglu_linear_dglu_bwd_cuda(
    const fastglu_glu_params *params, fastglu_tensor d_out, fastglu_tensor w2, fastglu_tensor h,
    fastglu_tensor weights, fastglu_tensor dh, fastglu_tensor y, fastglu_tensor dweights,
    int64_t tokens, int64_t hidden, int64_t ffn_hidden_size, void *stream);

FASTGLU_API fastglu_status fastglu_linear_dglu_bwd_cpu(const fastglu_glu_params *params,
                                                       fastglu_tensor d_out, fastglu_tensor w2,
                                                       fastglu_tensor h, fastglu_tensor weights,
                                                       fastglu_tensor dh, fastglu_tensor y,
                                                       fastglu_tensor dweights, int64_t tokens,
                                                       int64_t hidden, int64_t ffn_hidden_size);

/* The gated MLP block's forward: fc1 + GLU (fastglu_linear_glu_fwd_*, y into the caller's buffer,
 * h stored unless h.data is NULL), then out[tokens, hidden] = y @ w2[hidden, F]^T (+ bias2[hidden])
 * (fastglu_linear_*). Each GEMM's contract and arithmetic as above; both are validated before either
 * runs, and out must not overlap anything else of the call nor h / y overlap w2 / bias2; messages
 * name the GEMM ("(fc1)", "(fc2: x = y, w = w2, bias = bias2)"). On an error nothing is written and
 * nothing launched. CUDA: two launches on `stream`, no allocation, no synchronization. The backward
 * (PyTorch: fastglu.mlp) is the GLU backward on h with four GEMMs; docs/mlp.md. */
FASTGLU_API fastglu_status fastglu_mlp_fwd_cuda(const fastglu_glu_params *params, fastglu_tensor x,
                                                fastglu_tensor w1, fastglu_tensor bias1,
                                                fastglu_tensor weights, fastglu_tensor w2,
                                                fastglu_tensor bias2, fastglu_tensor h,
                                                fastglu_tensor y, fastglu_tensor out,
                                                int64_t tokens, int64_t hidden,
                                                int64_t ffn_hidden_size, void *stream);

FASTGLU_API fastglu_status fastglu_mlp_fwd_cpu(const fastglu_glu_params *params, fastglu_tensor x,
                                               fastglu_tensor w1, fastglu_tensor bias1,
                                               fastglu_tensor weights, fastglu_tensor w2,
                                               fastglu_tensor bias2, fastglu_tensor h,
                                               fastglu_tensor y, fastglu_tensor out, int64_t tokens,
                                               int64_t hidden, int64_t ffn_hidden_size);

/* Testing hook: 1 makes fastglu_linear*_cuda use the general tiled kernel even where the sm_90
 * kernel would take the problem; 0 (the default) restores the choice. Not thread-safe. */
FASTGLU_API void fastglu_debug_set_gemm_fallback(int on);

/* Overflow of the fp8 copy (saved_fp8): 1 (the default) saturates, |x| >= 464 and +-inf become
 * +-448 (PyTorch >= 2.12's float8_e4m3fn cast); 0 makes them NaN (PyTorch <= 2.11's). NaN stays NaN
 * either way. Process-wide; set it once before launching (the Python package sets it at import to
 * what the installed torch does). fastglu_fp8_saturate() returns the current mode. */
FASTGLU_API void fastglu_set_fp8_saturate(int saturate);
FASTGLU_API int fastglu_fp8_saturate(void);

/* Testing hook: caps the grid of every later launch of the family's kernels (fastglu_glu_*_cuda
 * and fastglu_swiglu_*_cuda: the plain-SwiGLU kernels, the general and specialised flat and tile
 * kernels, the reduction) at max_blocks blocks (0 restores the default), to show that results do
 * not depend on the launch configuration; the kernels then stride over the grid. The GEMMs
 * (fastglu_linear*_cuda; fastglu_debug_set_gemm_fallback picks their kernel) and the FP8 kernels
 * (fastglu_glu_*_fp8_cuda: one block per 128 x 128 tile, no grid-stride loop) keep their grids.
 * Not thread-safe. */
FASTGLU_API void fastglu_debug_set_max_blocks(int64_t max_blocks);

/* Testing hook: 1 makes fastglu_glu_*_cuda and fastglu_swiglu_*_cuda use the family's general
 * kernels (any alignment, features read at run time) where they would pick a specialised one (the
 * plain-SwiGLU kernels, the specialised flat and tile kernels); 0 (the default) restores the
 * choice. Results are bitwise the same either way (tests/c/test_glu_cuda.c shows it). Not
 * thread-safe. */
FASTGLU_API void fastglu_debug_set_generic_kernels(int on);

/* Testing hook: 1 (the default) makes fastglu_glu_bwd_fp8_saved_blockwise_cuda take the
 * backward's shifted pairs where F % 128 == 64 (2-byte dtypes, plain SwiGLU / quick-GeGLU without
 * bias or weights, 1 x 128 blocks, no sums), as fastglu_glu_bwd_fp8_cuda does there; 0 keeps its
 * split tiles there. The same bits either way (tests/c/test_glu_fp8.c runs both). Not
 * thread-safe. */
FASTGLU_API void fastglu_debug_set_fp8_saved_shift(int on);

/* =============================================================================================
 * The activation quantised to FP8 for the next GEMM (fc2), in the pass that computes it.
 *
 * Recipe (DeepSeek-V3's fine-grained scaling, as torch._scaled_mm's BlockWise1x128 reads it):
 *   y       the family's forward (above) rounded to dtype: the value fastglu_glu_fwd_* stores, bit
 *           for bit on the same backend; that is what is quantised (so the fused path equals the
 *           unfused one: the bf16 activation, then its quantisation).
 *   blocks  FASTGLU_FP8_SCALING_BLOCK_1X128: row-wise, 1 x 128 blocks along the channels: block
 *           (t, b) holds y[t, 128 b .. 128 b + 127] (the last block of a row may be shorter);
 *           column-wise (the copy for the weight gradient, y transposed), 128 x 1 blocks along the
 *           tokens: block (j, b) holds y[128 b .. 128 b + 127, j]. FASTGLU_FP8_SCALING_TENSOR: one
 *           block, the whole [tokens, F] tensor (current scaling), for both copies.
 *   amax    the largest |y| over the block; NaN if the block holds a NaN.
 *   scale   amax / 448 in fp32 (round to nearest even; 448 = float8_e4m3fn's largest value), with:
 *           amax == 0: scale = 1; a quotient that underflows to 0 (amax < 2^-149 * 224, possible
 *           for fp32 y only): scale = 2^-149; pow2_scales: the quotient rounded up to a power of
 *           two (Transformer Engine's force_pow_2_scales; finite quotients only). A block holding
 *           +-inf and no NaN gets scale +inf; one holding a NaN gets a NaN scale. The GEMM
 *           multiplies by it: y ~ data * scale (torch._scaled_mm's scale_a / scale_b).
 *   data    float8_e4m3fn cast of y / scale (fp32 division, then round to nearest even,
 *           saturating at +-448, src/fp8.h), so |data| <= 448; in a block with an infinite scale
 *           finite elements become +-0 and infinite ones NaN; in a NaN block every element is NaN
 *           (sign unspecified).
 *
 * Scale layouts (fastglu_fp8_scale_layout), for a quantised [rows, cols] operand with nb =
 * ceil(cols / 128) blocks per row and scale(i, b) the scale of row i's block b, scale.row_stride =
 * ld the leading dimension:
 *   FASTGLU_FP8_SCALES_MN_MAJOR   scale(i, b) at scale.data[b * ld + i], ld >= rows: what
 *                                 torch._scaled_mm takes for BlockWise1x128 (a [rows, nb] tensor of
 *                                 strides (1, rows): aten/src/ATen/native/cuda/ScaledBlas.cpp,
 *                                 is_blockwise_1x128_scaling; cuBLAS's VEC128_32F scale mode). For
 *                                 the column-wise copy as _scaled_mm's mat2 (the weight gradient
 *                                 dW2 = dY^T y: mat2 = y_t.t()), scale_b = scale_t viewed as
 *                                 [nb, F] row-major, also ld = F.
 *   FASTGLU_FP8_SCALES_ROW_MAJOR  scale(i, b) at scale.data[i * ld + b], ld >= nb.
 * With FASTGLU_FP8_SCALING_TENSOR the scale is one fp32 value at scale.data[0] (both copies).
 *
 * Outputs (fastglu_fp8_out), tokens = T, F = ffn_hidden_size:
 *   data      y_fp8 [T, F] float8_e4m3fn (dtype FASTGLU_DTYPE_FP8_E4M3), row stride >= F
 *   scale     its scales (rows T, nb = ceil(F / 128))
 *   data_t    NULL or the column-wise copy y_t [F, T] (y_t[j, t] = the quantised y[t, j]),
 *             row stride >= T: written by the same kernel (transposed in shared memory)
 *   scale_t   its scales (rows F, nb = ceil(T / 128)); BLOCK_1X128 only (NULL with TENSOR)
 *   workspace CUDA with FASTGLU_FP8_SCALING_TENSOR: device memory of at least
 *             fastglu_glu_fwd_fp8_workspace_bytes(recipe) bytes (the amax); else may be NULL
 * and the optional y [T, F] in dtype (y.data NULL: not written), as fastglu_glu_fwd_*'s output.
 *
 * Inputs: gate, up, bias, weights as fastglu_glu_fwd_* (gate.dtype is the operands' dtype and
 * bias's; up.data NULL with INTERLEAVED; bias.data NULL or [2F] contiguous; weights.data NULL or
 * [T] with element t at weights.data[t * weights.row_stride], weights.dtype FP32, FP16 or BF16).
 *
 * Passes: BLOCK_1X128 reads the operands once and writes every output (one kernel). TENSOR needs
 * the amax of the whole tensor before any element can be quantised: two kernels, the first reading
 * the operands for the amax (and writing y when asked), the second reading them again to quantise
 * (plus a 4-byte memset of the workspace before them); that is the fewest passes without storing y
 * at full precision. The CPU backend follows the same recipe bit for bit (tiles of 128 x 128).
 * Errors and validation as fastglu_glu_fwd_* (every output checked against every input and each
 * other); no allocation, no synchronization.
 * ========================================================================================== */

typedef enum fastglu_fp8_scaling {
    FASTGLU_FP8_SCALING_BLOCK_1X128 = 0,  /* 1 x 128 row-wise, 128 x 1 column-wise blocks */
    FASTGLU_FP8_SCALING_TENSOR = 1,       /* one scale for the tensor (current scaling)   */
    FASTGLU_FP8_SCALING_BLOCK_128X128 = 2 /* 128 x 128 blocks (weights): fastglu_quantize_fp8_*
                                             only */
} fastglu_fp8_scaling;

typedef enum fastglu_fp8_scale_layout {
    FASTGLU_FP8_SCALES_MN_MAJOR = 0, /* scale(i, b) at [b * ld + i]: torch._scaled_mm's */
    FASTGLU_FP8_SCALES_ROW_MAJOR = 1 /* scale(i, b) at [i * ld + b]                     */
} fastglu_fp8_scale_layout;

typedef struct fastglu_fp8_recipe {
    fastglu_fp8_scaling scaling;
    fastglu_fp8_scale_layout scale_layout;
    int pow2_scales; /* 1: scales rounded up to powers of two */
} fastglu_fp8_recipe;

typedef struct fastglu_fp8_out {
    fastglu_tensor data, scale; /* row-wise y_fp8 [T, F] and its scales */
    fastglu_tensor data_t,
        scale_t; /* column-wise y_t [F, T] and its scales (data_t.data NULL: none) */
    void *workspace;
    size_t workspace_bytes;
} fastglu_fp8_out;

FASTGLU_API size_t fastglu_glu_fwd_fp8_workspace_bytes(const fastglu_fp8_recipe *recipe);

FASTGLU_API fastglu_status fastglu_glu_fwd_fp8_cuda(
    const fastglu_glu_params *params, const fastglu_fp8_recipe *recipe, fastglu_tensor gate,
    fastglu_tensor up, fastglu_tensor bias, fastglu_tensor weights, fastglu_tensor y,
    const fastglu_fp8_out *out, int64_t tokens, int64_t ffn_hidden_size, void *stream);

FASTGLU_API fastglu_status fastglu_glu_fwd_fp8_cpu(const fastglu_glu_params *params,
                                                   const fastglu_fp8_recipe *recipe,
                                                   fastglu_tensor gate, fastglu_tensor up,
                                                   fastglu_tensor bias, fastglu_tensor weights,
                                                   fastglu_tensor y, const fastglu_fp8_out *out,
                                                   int64_t tokens, int64_t ffn_hidden_size);

/* ---------------------------------------------------------------------------------------------
 * Backward: dh quantised for fc1's dgrad (row-wise) and weight gradient (column-wise), with the
 * bias and weight gradients reduced in the same pass.
 *
 *   dy       [T, F] upstream gradient (fc2's dgrad), dtype, row stride dy.row_stride, column
 *            stride 1
 *   gate, up, bias, weights: the forward's operands, as fastglu_glu_fwd_fp8_*
 *   dh       NULL, or [T, 2F] in dtype: the gradient of h itself (row stride dh.row_stride)
 *   dbias    absent (data NULL), or [2F] in dtype, contiguous (row_stride 1), h's layout (SPLIT:
 *            the gate's in [0, F), the up's in [F, 2F); INTERLEAVED: 2j and 2j + 1): the bias
 *            gradient summed over the tokens, the unmasked d_a / d_v of the family's backward, as
 *            fastglu_glu_bwd_*'s dbias. Requires bias.
 *   dweights absent, or [T] in the weights' dtype, contiguous (row_stride 1): dweights[t] =
 *            sum_j m_d act(z) (v + o) dy[t, j], as fastglu_glu_bwd_*'s. Requires weights.
 *   out      the quantised dh with the recipe above, dh being one [T, 2F] operand in h's layout
 *            (SPLIT: d_gate in columns [0, F), d_up in [F, 2F); INTERLEAVED: d_gate[t, j] at 2j,
 *            d_up at 2j + 1), its values those fastglu_glu_bwd_* writes (rounded to dtype, bit for
 *            bit on the same backend, but for a NaN's sign and payload, which IEEE leaves to the
 *            order of the operations where two operands are NaN): data [T, 2F] with 1 x 128
 *            blocks along the 2F columns (scale: rows T, ceil(2F / 128) blocks); data_t [2F, T]
 *            (dh transposed, 128 x 1 blocks along the tokens; scale_t: rows 2F, ceil(T / 128)
 *            blocks). workspace: with dbias or
 *            dweights, on both backends (device memory for CUDA, host memory for the CPU), at
 *            least fastglu_glu_bwd_fp8_workspace_bytes(recipe, T, F, want_dbias, want_dweights)
 *            bytes, 16-byte aligned; contents on entry do not matter, undefined on return.
 *            Without them, as the forward (CUDA with FASTGLU_FP8_SCALING_TENSOR only).
 *
 * The sums (fp32, a fixed order, the same on both backends: bitwise reproducible run to run, and
 * the CPU backend's bits equal the host emulation of the CUDA kernel's): each 128 x 128 tile of dh
 * (tokens t0 .. t0 + 127, dh columns c0 .. c0 + 127) forms
 *   dbias partial[t0 / 128][c]: per column, 16 sums s_rho from +0, each over the tile's rows
 *     rho, rho + 16, ... (rho = 0 .. 15) in order; then p_w = s_2w + s_2w+1 (w = 0 .. 7) and
 *     (..((p_0 + p_1) + p_2) + ..) + p_7;
 *   dweights partial[c0 / 128][t] (tiles holding d_gate columns only: each operand column j counts
 *     once): per row, 16 sums from +0, sum l over the d_gate columns among c0 + 8 l .. c0 + 8 l + 7
 *     in order (l = 0 .. 15), added in the order of a butterfly (xor 8, 4, 2, 1);
 * and the partials are added over the tiles in fastglu_glu_bwd_*'s order (8 interleaved in-order
 * sums from +0, then those 8 in order from +0). The order differs from fastglu_glu_bwd_*'s (another
 * tiling): the two agree to fp32 rounding, not bit for bit. On a GPU the terms differ from the CPU
 * backend's by the sigmoid's few ulp, as dh's elements do; the order is the same.
 *
 * tokens == 0 or F == 0: nothing is read; dbias (when F > 0) and dweights (when tokens > 0) are
 * set to zero, the sums over nothing, and nothing else is written. One kernel (BLOCK_1X128), two
 * for TENSOR, as the forward, plus with dbias or dweights one short reduction kernel over the
 * workspace; the tiles cover 128 columns of dh, so with SPLIT the operands are read once for
 * d_gate's columns and once for d_up's. Validation as the forward: every output (dbias, dweights
 * and the workspace's part in use included) is checked against every input and each other.
 * ------------------------------------------------------------------------------------------- */
FASTGLU_API size_t fastglu_glu_bwd_fp8_workspace_bytes(const fastglu_fp8_recipe *recipe,
                                                       int64_t tokens, int64_t ffn_hidden_size,
                                                       int want_dbias, int want_dweights);

FASTGLU_API fastglu_status fastglu_glu_bwd_fp8_cuda(
    const fastglu_glu_params *params, const fastglu_fp8_recipe *recipe, fastglu_tensor dy,
    fastglu_tensor gate, fastglu_tensor up, fastglu_tensor bias, fastglu_tensor weights,
    fastglu_tensor dh, fastglu_tensor dbias, fastglu_tensor dweights, const fastglu_fp8_out *out,
    int64_t tokens, int64_t ffn_hidden_size, void *stream);

FASTGLU_API fastglu_status fastglu_glu_bwd_fp8_cpu(
    const fastglu_glu_params *params, const fastglu_fp8_recipe *recipe, fastglu_tensor dy,
    fastglu_tensor gate, fastglu_tensor up, fastglu_tensor bias, fastglu_tensor weights,
    fastglu_tensor dh, fastglu_tensor dbias, fastglu_tensor dweights, const fastglu_fp8_out *out,
    int64_t tokens, int64_t ffn_hidden_size);

/* ---------------------------------------------------------------------------------------------
 * The recipe's quantisation of a plain operand: the other GEMM operands of an FP8 MLP block (fc1's
 * input x and fc2's output gradient dO in 1 x 128 blocks, the weights in 128 x 128 blocks), with
 * the same amax, scale and code as the GLU's above (bit for bit), row-wise and transposed copies
 * written in one pass.
 *
 *   x        [rows, cols] in FASTGLU_DTYPE_BF16, FP16 or FP32, row stride x.row_stride >= 0
 *            (column stride 1; rows may overlap, e.g. a broadcast row); rows, cols < 2^62
 *   recipe   scaling FASTGLU_FP8_SCALING_BLOCK_1X128 or FASTGLU_FP8_SCALING_BLOCK_128X128
 *            (FASTGLU_FP8_SCALING_TENSOR: FASTGLU_ERROR_INVALID_VALUE); scale_layout and
 *            pow2_scales as above
 *   out      data    NULL, or the row-wise copy [rows, cols] e4m3 (row stride >= cols)
 *            scale   its scales: BLOCK_1X128 rows `rows`, ceil(cols / 128) blocks (block (i, b)
 *                    holds x[i, 128 b ..]); BLOCK_128X128 rows ceil(rows / 128), ceil(cols / 128)
 *                    blocks (block (i, b) holds x[128 i .., 128 b ..]), in the recipe's layout
 *            data_t  NULL, or the transposed copy [cols, rows] (data_t[j, i] is x[i, j]'s code;
 *                    row stride >= rows): BLOCK_1X128 quantises it in 1 x 128 blocks along its own
 *                    rows (x's 128 x 1 blocks along the rows: the weight gradient's operand);
 *                    BLOCK_128X128 holds the row-wise codes transposed (a 128 x 128 block's scale
 *                    does not change under transposition: the transposed weight of a dgrad)
 *            scale_t its scales, given with data_t: BLOCK_1X128 rows `cols`, ceil(rows / 128)
 *                    blocks; BLOCK_128X128 rows ceil(cols / 128), ceil(rows / 128) blocks, the
 *                    scales of `scale` transposed
 *            at least one of data and data_t; workspace unused (may be NULL)
 * torch._scaled_mm's layouts: 1 x 128 scales MN-major with ld = rows; 128 x 128 scales row-major
 * with ld = ceil(blocks / 4) * 4 (the padding cuBLAS reads).
 *
 * One kernel on CUDA (a block per 128 x 128 tile of x; the transposition in shared memory), no
 * allocation, no synchronisation. rows == 0 or cols == 0: nothing is written. The outputs must not
 * overlap x or each other. Errors: FASTGLU_ERROR_INVALID_VALUE (NULL, sizes, strides, overlap, the
 * scaling, no output), FASTGLU_ERROR_UNSUPPORTED_DTYPE; nothing is written on an error.
 * ------------------------------------------------------------------------------------------- */
FASTGLU_API fastglu_status fastglu_quantize_fp8_cuda(const fastglu_fp8_recipe *recipe,
                                                     fastglu_tensor x, const fastglu_fp8_out *out,
                                                     int64_t rows, int64_t cols, void *stream);

FASTGLU_API fastglu_status fastglu_quantize_fp8_cpu(const fastglu_fp8_recipe *recipe,
                                                    fastglu_tensor x, const fastglu_fp8_out *out,
                                                    int64_t rows, int64_t cols);

/* ---------------------------------------------------------------------------------------------
 * The forward's operands saved in FP8 with one scale per 1 x 128 block (PyTorch:
 * fp8_input_store="blockwise"; DeepSeek-V3's cache of the SwiGLU input), for the backward's
 * block-scaled operands (fastglu_glu_operands.scale_1x128).
 *
 *   params     layout and clamp_value (the other fields are checked as the forward checks them,
 *              and not used)
 *   gate, up   the forward's operands: SPLIT gate [tokens, F] and up [tokens, F]; INTERLEAVED
 *              gate [tokens, 2F] and up absent (data NULL). FP32, FP16 or BF16, one dtype; row
 *              strides >= 0 (rows may overlap), columns contiguous
 *   gate_fp8   their codes, FASTGLU_DTYPE_FP8_E4M3, gate's and up's shapes, row strides in bytes
 *   up_fp8     (>= the width if tokens > 1), any alignment; SPLIT: e.g. the two halves of one
 *              [tokens, 2F] row, as the backward reads saved_fp8
 *   scale_inv  FP32 [tokens, nb], element (t, b) at data[t * row_stride + b] (row stride >= nb if
 *              tokens > 1), nb = 2 ceil(F / 128) with SPLIT (gate's blocks, then up's) and
 *              ceil(2F / 128) with INTERLEAVED (the blocks of the [tokens, 2F] operand):
 *              scale_1x128's layout. The backward decodes an operand as code * scale_inv.
 * Recipe per block (block b of an operand's row: its columns 128 b .. 128 b + 127, the last one
 * shorter): amax = max |x| over the block (NaN if it holds a NaN). A block whose amax is a normal
 * fp32 number (2^-126 <= amax < inf) gets scale_inv = amax / 448 correctly rounded and codes =
 * the cast of x / scale_inv (fp32 division correctly rounded, then the e4m3fn cast): the bits
 * fastglu_quantize_fp8_* gives for that block. Any other block (zeros, a subnormal amax, a NaN or
 * an infinity in it) gets scale_inv = 1 and the plain cast, as saved_fp8 has it
 * (fastglu_set_fp8_saturate), so a NaN or inf stays in its own element.
 * With a clamp (c = clamp_value in the operands' dtype; a finite c >= 448 is refused, +inf cuts
 * nothing) the copy marks the elements the clamp cuts as saved_fp8 does, with the block's
 * decoding: in a scaled block scale_inv is raised by one ulp where RN(448 scale_inv) < amax; lo is
 * the largest non-negative e4m3 value whose decoding RN(lo scale_inv) is <= c and hi the next
 * one; a cut gate (x > c) is stored as hi, an uncut one as min(x / scale_inv, lo); a cut up as
 * +-hi, an uncut one as x / scale_inv clamped to [-lo, lo]; then cast.
 *
 * One kernel on CUDA (a half-warp per block, every operand read once), no allocation, no
 * synchronisation. tokens == 0 or F == 0: nothing is written (the dtypes are checked, the pointers
 * are not). The outputs must not overlap the inputs or each other. Errors:
 * FASTGLU_ERROR_INVALID_VALUE (NULL, sizes, strides, overlap, up given with INTERLEAVED or missing
 * with SPLIT, the clamp, more blocks in a row than the CUDA grid holds),
 * FASTGLU_ERROR_UNSUPPORTED_DTYPE, FASTGLU_ERROR_NO_CUDA (no device, or a build without CUDA),
 * FASTGLU_ERROR_CUDA (the launch failed); nothing is written on an error.
 * ------------------------------------------------------------------------------------------- */
FASTGLU_API fastglu_status fastglu_glu_fp8_store_blockwise_cuda(
    const fastglu_glu_params *params, fastglu_tensor gate, fastglu_tensor up,
    fastglu_tensor gate_fp8, fastglu_tensor up_fp8, fastglu_tensor scale_inv, int64_t tokens,
    int64_t ffn_hidden_size, void *stream);

FASTGLU_API fastglu_status fastglu_glu_fp8_store_blockwise_cpu(
    const fastglu_glu_params *params, fastglu_tensor gate, fastglu_tensor up,
    fastglu_tensor gate_fp8, fastglu_tensor up_fp8, fastglu_tensor scale_inv, int64_t tokens,
    int64_t ffn_hidden_size);

/* ---------------------------------------------------------------------------------------------
 * The forward and the blockwise copy of its operands in one pass (fp8_input_store="blockwise"):
 * fastglu_glu_fwd_*'s output and fastglu_glu_fp8_store_blockwise_*'s codes and scales, each
 * operand read once.
 *
 *   params, operands, output   as fastglu_glu_fwd_* (operands->scale_inv absent, no saved_fp8)
 *   gate_fp8, up_fp8,          as fastglu_glu_fp8_store_blockwise_* for operands->gate and
 *   scale_inv                  operands->up (SPLIT: up_fp8 [tokens, F]; INTERLEAVED: up_fp8
 *                              absent, gate_fp8 [tokens, 2F])
 *   tokens, ffn_hidden_size, stream (CUDA only)
 * The results are the bits of fastglu_glu_fwd_* (saved_fp8 absent) and then
 * fastglu_glu_fp8_store_blockwise_* on the same backend and operands. output must not overlap the
 * copy's outputs (nor they the inputs, nor each other). Every argument of both is checked before
 * anything is written; errors are theirs (FASTGLU_ERROR_INVALID_VALUE, _UNSUPPORTED_DTYPE,
 * _NO_CUDA, _CUDA). On CUDA with SPLIT one kernel: a half-warp takes a 1 x 128 block of gate and
 * the same columns of up in a row (lane l their columns 8 l .. 8 l + 7): y's 8 elements, both
 * blocks' amaxes, scales and codes; INTERLEAVED runs the two calls' kernels one after the other.
 * No allocation, no synchronisation. tokens == 0 or F == 0: nothing is written.
 * ------------------------------------------------------------------------------------------- */
FASTGLU_API fastglu_status fastglu_glu_fwd_fp8_store_blockwise_cuda(
    const fastglu_glu_params *params, const fastglu_glu_operands *operands, fastglu_tensor output,
    fastglu_tensor gate_fp8, fastglu_tensor up_fp8, fastglu_tensor scale_inv, int64_t tokens,
    int64_t ffn_hidden_size, void *stream);

FASTGLU_API fastglu_status fastglu_glu_fwd_fp8_store_blockwise_cpu(
    const fastglu_glu_params *params, const fastglu_glu_operands *operands, fastglu_tensor output,
    fastglu_tensor gate_fp8, fastglu_tensor up_fp8, fastglu_tensor scale_inv, int64_t tokens,
    int64_t ffn_hidden_size);

/* ---------------------------------------------------------------------------------------------
 * The forward quantised to FP8 and the blockwise copy of its operands in one pass
 * (fp8_input_store="blockwise" in an FP8 MLP block): fastglu_glu_fwd_fp8_*'s outputs and
 * fastglu_glu_fp8_store_blockwise_*'s codes and scales, each operand read once.
 *
 *   params, recipe, gate, up, bias, weights, y, out   as fastglu_glu_fwd_fp8_*
 *   gate_fp8, up_fp8, scale_inv                        as fastglu_glu_fp8_store_blockwise_* for
 *                                                      gate and up
 *   tokens, ffn_hidden_size, stream (CUDA only)
 * The results are the bits of fastglu_glu_fwd_fp8_* and then fastglu_glu_fp8_store_blockwise_* on
 * the same backend and operands. Every argument of both is checked before anything is written, and
 * the copy's outputs against the forward's (no overlap); errors are theirs
 * (FASTGLU_ERROR_INVALID_VALUE, _UNSUPPORTED_DTYPE, _NO_CUDA, _CUDA). On CUDA one kernel where
 * recipe->scaling is FASTGLU_FP8_SCALING_BLOCK_1X128, the layout SPLIT, F % 8 == 0, no clamp, and
 * the operands' rows start on 16 bytes (base and row stride), y's too, and the rows of out->data
 * and of the copy's codes on 8: fastglu_glu_fwd_fp8_cuda's kernel, whose lanes also quantise the
 * gate and up chunks they hold (a 1 x 128 block of each per row); elsewhere the two calls' kernels
 * one after the other. No allocation, no synchronisation. tokens == 0 or F == 0: nothing is
 * written.
 * ------------------------------------------------------------------------------------------- */
FASTGLU_API fastglu_status fastglu_glu_fwd_fp8_copy_blockwise_cuda(
    const fastglu_glu_params *params, const fastglu_fp8_recipe *recipe, fastglu_tensor gate,
    fastglu_tensor up, fastglu_tensor bias, fastglu_tensor weights, fastglu_tensor y,
    const fastglu_fp8_out *out, fastglu_tensor gate_fp8, fastglu_tensor up_fp8,
    fastglu_tensor scale_inv, int64_t tokens, int64_t ffn_hidden_size, void *stream);

FASTGLU_API fastglu_status fastglu_glu_fwd_fp8_copy_blockwise_cpu(
    const fastglu_glu_params *params, const fastglu_fp8_recipe *recipe, fastglu_tensor gate,
    fastglu_tensor up, fastglu_tensor bias, fastglu_tensor weights, fastglu_tensor y,
    const fastglu_fp8_out *out, fastglu_tensor gate_fp8, fastglu_tensor up_fp8,
    fastglu_tensor scale_inv, int64_t tokens, int64_t ffn_hidden_size);

/* ---------------------------------------------------------------------------------------------
 * The backward quantised to FP8 (fastglu_glu_bwd_fp8_*) reading the forward's operands from their
 * blockwise FP8 copy (fastglu_glu_fp8_store_blockwise_* or fastglu_glu_fwd_fp8_store_blockwise_*),
 * in one pass: dy and the codes read once, dh quantised row-wise and column-wise, dbias and
 * dweights reduced, where decoding the copy first (fastglu_glu_bwd_* with scale_1x128) and then
 * quantising dh (fastglu_quantize_fp8_*) writes dh and reads it back.
 *
 *   params, recipe, dy, bias, weights, dh, dbias, dweights, out, tokens, ffn_hidden_size, stream
 *              as fastglu_glu_bwd_fp8_*; the call's dtype (FP32, FP16 or BF16) is dy's, which
 *              bias, dh and dbias share
 *   gate_fp8   the copy's codes, FASTGLU_DTYPE_FP8_E4M3, as fastglu_glu_fp8_store_blockwise_*
 *   up_fp8     writes them: SPLIT gate_fp8 and up_fp8 [tokens, F]; INTERLEAVED gate_fp8
 *              [tokens, 2F] and up_fp8 absent. Row strides in bytes >= 0 (rows may overlap),
 *              any alignment
 *   scale_inv  FP32 [tokens, nb] in scale_1x128's layout (nb = 2 ceil(F / 128) with SPLIT,
 *              ceil(2F / 128) with INTERLEAVED; element (t, b) at data[t * row_stride + b],
 *              row stride >= 0)
 * Each operand element is decoded as code * scale_inv of its block (fp32, correctly rounded),
 * exactly as fastglu_glu_bwd_* decodes a block-scaled fp8 operand, so that dh's values are those
 * fastglu_glu_bwd_* writes from the copy (rounded to dtype, bit for bit on the same backend; a
 * NaN's sign and payload aside, as for fastglu_glu_bwd_fp8_*), and
 * out holds their quantisation with the recipe (as fastglu_quantize_fp8_* of that dh would, bit for
 * bit); the sums are fastglu_glu_bwd_fp8_*'s (its order). On CUDA the kernels are
 * fastglu_glu_bwd_fp8_cuda's with 8-byte code loads (the 16-byte path also needs the codes' rows
 * on 8 bytes). Validation as fastglu_glu_bwd_fp8_* (every output against every input, the scales
 * included); nothing is written on an error; tokens == 0 or F == 0 as there.
 * ------------------------------------------------------------------------------------------- */
FASTGLU_API fastglu_status fastglu_glu_bwd_fp8_saved_blockwise_cuda(
    const fastglu_glu_params *params, const fastglu_fp8_recipe *recipe, fastglu_tensor dy,
    fastglu_tensor gate_fp8, fastglu_tensor up_fp8, fastglu_tensor scale_inv, fastglu_tensor bias,
    fastglu_tensor weights, fastglu_tensor dh, fastglu_tensor dbias, fastglu_tensor dweights,
    const fastglu_fp8_out *out, int64_t tokens, int64_t ffn_hidden_size, void *stream);

FASTGLU_API fastglu_status fastglu_glu_bwd_fp8_saved_blockwise_cpu(
    const fastglu_glu_params *params, const fastglu_fp8_recipe *recipe, fastglu_tensor dy,
    fastglu_tensor gate_fp8, fastglu_tensor up_fp8, fastglu_tensor scale_inv, fastglu_tensor bias,
    fastglu_tensor weights, fastglu_tensor dh, fastglu_tensor dbias, fastglu_tensor dweights,
    const fastglu_fp8_out *out, int64_t tokens, int64_t ffn_hidden_size);

#ifdef __cplusplus
}
#endif

#endif /* FASTGLU_H */
