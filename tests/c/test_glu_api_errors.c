/* test_glu_api_errors.c — bad input to the gated-linear-unit family (fastglu_glu_*): every
 * validation rule gives its status and a message naming the argument and its value, and leaves
 * every buffer (outputs, workspace and inputs) byte-identical; legal edge cases (empty problems,
 * in place, NULL workspace when none is needed, ignored arguments) succeed. Each case runs on the
 * CPU entry points and on the CUDA ones (whose validation is the same code and runs before any
 * device access); see docs/bad_inputs.md. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fastglu.h"
#include "glu_flat.h"

static int failures;

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("FAIL line %d: ", __LINE__);                                                    \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

enum { T = 4, F = 8 };

/* Every buffer a call may touch, in one block so that one snapshot covers them all. */
static struct arena {
    _Alignas(16) float x[T][2 * F]; /* gate | up (fc1 layout), or interleaved */
    _Alignas(16) float up2[T][F];   /* a separate up */
    _Alignas(16) float dy[T][F];
    _Alignas(16) float bias[2 * F];
    _Alignas(16) float w[T];
    _Alignas(16) float scale[2 * T]; /* per token, or two 1 x 128 blocks a row (F = 8) */
    _Alignas(16) unsigned char x8[T][2 * F];
    _Alignas(16) float y[T][F];
    _Alignas(16) unsigned char s8[T][2 * F + 4]; /* the forward's fp8 copy (saved_fp8) */
    _Alignas(16) float dx[T][2 * F];
    _Alignas(16) float dup2[T][F];
    _Alignas(16) float dbias[2 * F];
    _Alignas(16) float dw[T];
    _Alignas(16) unsigned char ws[4096];
} A;
static struct arena snapshot;

static void poison(void) {
    for (int i = 0; i < T; ++i) {
        for (int j = 0; j < 2 * F; ++j) A.x[i][j] = 0.25f * (float)(i - j) + 0.5f;
        for (int j = 0; j < 2 * F; ++j) A.x8[i][j] = (unsigned char)(0x30 + j);
        for (int j = 0; j < F; ++j) A.up2[i][j] = 0.5f - 0.125f * (float)j;
        for (int j = 0; j < F; ++j) A.dy[i][j] = 1.0f + (float)j;
        A.w[i] = 0.5f + (float)i;
        A.scale[i] = A.scale[T + i] = 2.0f;
    }
    for (int j = 0; j < 2 * F; ++j) A.bias[j] = 0.1f * (float)j;
    memset(A.y, 0x7f, sizeof A.y);
    memset(A.s8, 0x7f, sizeof A.s8);
    memset(A.dx, 0x7f, sizeof A.dx);
    memset(A.dup2, 0x7f, sizeof A.dup2);
    memset(A.dbias, 0x7f, sizeof A.dbias);
    memset(A.dw, 0x7f, sizeof A.dw);
    memset(A.ws, 0x5a, sizeof A.ws);
    memcpy(&snapshot, &A, sizeof A);
}

static int untouched(void) { return memcmp(&snapshot, &A, sizeof A) == 0; }

/* All the arguments of one call, forward and backward; defaults are a legal SPLIT call (fc1
 * layout: up = gate + F) with bias, weights, dbias and dweights. */
typedef struct call {
    fastglu_glu_params params;
    const fastglu_glu_params *pp;
    const void *dy;
    int64_t dy_rs, dy_cs;
    const void *gate;
    int64_t gate_rs;
    const void *up;
    int64_t up_rs;
    fastglu_dtype input_dtype;
    const float *scale;
    int64_t scale_stride;
    int scale_1x128;
    const void *bias, *weights;
    fastglu_dtype weights_dtype;
    int64_t weights_stride;
    void *output;
    int64_t output_rs;
    void *saved8; /* saved_fp8: NULL by default */
    int64_t saved8_rs;
    void *d_gate;
    int64_t d_gate_rs;
    void *d_up;
    int64_t d_up_rs;
    void *dbias, *dweights, *workspace;
    size_t workspace_bytes;
    int64_t tokens, F;
    fastglu_dtype dtype;
} call;

static call legal(void) {
    call c;
    memset(&c, 0, sizeof c);
    c.params = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    c.pp = NULL; /* NULL: &c.params */
    c.dy = A.dy, c.dy_rs = F, c.dy_cs = 1;
    c.gate = A.x, c.gate_rs = 2 * F, c.up = &A.x[0][F], c.up_rs = 2 * F;
    c.input_dtype = FASTGLU_DTYPE_FP32;
    c.bias = A.bias, c.weights = A.w, c.weights_dtype = FASTGLU_DTYPE_FP32, c.weights_stride = 1;
    c.output = A.y, c.output_rs = F;
    c.d_gate = A.dx, c.d_gate_rs = 2 * F, c.d_up = &A.dx[0][F], c.d_up_rs = 2 * F;
    c.dbias = A.dbias, c.dweights = A.dw, c.workspace = A.ws, c.workspace_bytes = sizeof A.ws;
    c.tokens = T, c.F = F, c.dtype = FASTGLU_DTYPE_FP32;
    return c;
}

static call interleaved(void) {
    call c = legal();
    c.params.layout = FASTGLU_LAYOUT_INTERLEAVED;
    c.up = NULL, c.d_up = NULL;
    return c;
}

static fastglu_status run_fwd(const call *c, int cuda) {
    const fastglu_glu_params *p = c->pp ? c->pp : &c->params;
    if (c->pp == (const fastglu_glu_params *)1) p = NULL;
    return cuda ? glu_fwd_cuda_flat(p, c->gate, c->gate_rs, c->up, c->up_rs, c->bias, c->weights,
                                    c->weights_dtype, c->weights_stride, c->output, c->output_rs,
                                    c->saved8, c->saved8_rs, c->tokens, c->F, c->dtype, NULL)
                : glu_fwd_cpu_flat(p, c->gate, c->gate_rs, c->up, c->up_rs, c->bias, c->weights,
                                   c->weights_dtype, c->weights_stride, c->output, c->output_rs,
                                   c->saved8, c->saved8_rs, c->tokens, c->F, c->dtype);
}

static fastglu_status run_bwd(const call *c, int cuda) {
    const fastglu_glu_params *p = c->pp ? c->pp : &c->params;
    if (c->pp == (const fastglu_glu_params *)1) p = NULL;
    return cuda ? glu_bwd_cuda_flat(p, c->dy, c->dy_rs, c->dy_cs, c->gate, c->gate_rs, c->up,
                                    c->up_rs, c->input_dtype, c->scale, c->scale_stride,
                                    c->scale_1x128, c->bias, c->weights, c->weights_dtype,
                                    c->weights_stride, c->d_gate, c->d_gate_rs, c->d_up, c->d_up_rs,
                                    c->dbias, c->dweights, c->workspace, c->workspace_bytes,
                                    c->tokens, c->F, c->dtype, NULL)
                : glu_bwd_cpu_flat(p, c->dy, c->dy_rs, c->dy_cs, c->gate, c->gate_rs, c->up,
                                   c->up_rs, c->input_dtype, c->scale, c->scale_stride,
                                   c->scale_1x128, c->bias, c->weights, c->weights_dtype,
                                   c->weights_stride, c->d_gate, c->d_gate_rs, c->d_up, c->d_up_rs,
                                   c->dbias, c->dweights, c->workspace, c->workspace_bytes,
                                   c->tokens, c->F, c->dtype);
}

enum { FWD = 1, BWD = 2, BOTH = 3 };

/* One rejected call (forward, backward or both) on both backends. */
static void reject(int line, int which, fastglu_status want, const char *needle, const call *c) {
    for (int dir = FWD; dir <= BWD; dir <<= 1) {
        if (!(which & dir)) continue;
        for (int cuda = 0; cuda < 2; ++cuda) {
            poison();
            fastglu_status st = dir == FWD ? run_fwd(c, cuda) : run_bwd(c, cuda);
            const char *msg = fastglu_last_error_message();
            const char *what = dir == FWD ? "fwd" : "bwd";
            EXPECT(st == want, "case at line %d (%s %s): status %d, want %d (%s)", line, what,
                   cuda ? "cuda" : "cpu", st, want, msg);
            EXPECT(strstr(msg, needle) != NULL, "case at line %d (%s %s): message '%s' lacks '%s'",
                   line, what, cuda ? "cuda" : "cpu", msg, needle);
            EXPECT(strstr(msg, cuda ? "_cuda" : "_cpu") != NULL,
                   "case at line %d: message '%s' does not name the function", line, msg);
            EXPECT(untouched(), "case at line %d (%s %s): a buffer changed", line, what,
                   cuda ? "cuda" : "cpu");
        }
    }
}

/* One legal call on the CPU backend (and, when no device is usable, the CUDA entry point must
 * say FASTGLU_ERROR_NO_CUDA and touch nothing). */
static void accept(int line, int which, const call *c) {
    for (int dir = FWD; dir <= BWD; dir <<= 1) {
        if (!(which & dir)) continue;
        poison();
        char before[512]; /* a success leaves the last failure's message as it is (errno-like) */
        snprintf(before, sizeof before, "%s", fastglu_last_error_message());
        fastglu_status st = dir == FWD ? run_fwd(c, 0) : run_bwd(c, 0);
        EXPECT(st == FASTGLU_SUCCESS, "legal case at line %d (%s) refused: %s", line,
               dir == FWD ? "fwd" : "bwd", fastglu_last_error_message());
        EXPECT(strcmp(fastglu_last_error_message(), before) == 0,
               "line %d: a success changed the message '%s'", line, before);
        if (!fastglu_cuda_available()) {
            poison();
            st = dir == FWD ? run_fwd(c, 1) : run_bwd(c, 1);
            EXPECT(st == FASTGLU_ERROR_NO_CUDA, "legal case at line %d (%s cuda): status %d (%s)",
                   line, dir == FWD ? "fwd" : "bwd", st, fastglu_last_error_message());
            EXPECT(untouched(), "legal case at line %d: the CUDA call without a device wrote",
                   line);
        }
    }
}

/* A call built from descriptors directly (the descriptor rules: structs given, dtypes agreeing,
 * contiguous vectors), rejected on both backends with nothing written. */
static void check_rejected(int line, fastglu_status st, int cuda, fastglu_status want,
                           const char *needle) {
    const char *msg = fastglu_last_error_message();
    EXPECT(st == want, "descriptor case at line %d (%s): status %d, want %d (%s)", line,
           cuda ? "cuda" : "cpu", st, want, msg);
    EXPECT(strstr(msg, needle) != NULL && strstr(msg, cuda ? "_cuda" : "_cpu") != NULL,
           "descriptor case at line %d: message '%s' lacks '%s'", line, msg, needle);
    EXPECT(untouched(), "descriptor case at line %d (%s): a buffer changed", line,
           cuda ? "cuda" : "cpu");
}
static void desc_fwd(int line, fastglu_status want, const char *needle,
                     const fastglu_glu_operands *o, fastglu_tensor out, fastglu_tensor s8) {
    const fastglu_glu_params p = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    for (int cuda = 0; cuda < 2; ++cuda) {
        poison();
        const fastglu_status st = cuda ? fastglu_glu_fwd_cuda(&p, o, out, s8, T, F, NULL)
                                       : fastglu_glu_fwd_cpu(&p, o, out, s8, T, F);
        check_rejected(line, st, cuda, want, needle);
    }
}
static void desc_bwd(int line, fastglu_status want, const char *needle,
                     const fastglu_glu_operands *o, const fastglu_glu_grads *g) {
    const fastglu_glu_params p = fastglu_glu_params_default(FASTGLU_ACT_SILU);
    const fastglu_tensor dy = glu_flat_tensor(A.dy, FASTGLU_DTYPE_FP32, F);
    fastglu_workspace ws;
    ws.data = A.ws, ws.bytes = sizeof A.ws;
    for (int cuda = 0; cuda < 2; ++cuda) {
        poison();
        const fastglu_status st = cuda ? fastglu_glu_bwd_cuda(&p, dy, 1, o, g, ws, T, F, NULL)
                                       : fastglu_glu_bwd_cpu(&p, dy, 1, o, g, ws, T, F);
        check_rejected(line, st, cuda, want, needle);
    }
}

#define REJECT(which, want, needle, c) reject(__LINE__, which, want, needle, &(c))
#define ACCEPT(which, c) accept(__LINE__, which, &(c))

int main(void) {
    const fastglu_status INV = FASTGLU_ERROR_INVALID_VALUE, DT = FASTGLU_ERROR_UNSUPPORTED_DTYPE;
    call c;
    poison();

    /* ---- params ---- */
    c = legal(), c.pp = (const fastglu_glu_params *)1;
    REJECT(BOTH, INV, "params is NULL", c);
    c = legal(), c.params.activation = (fastglu_activation)3;
    REJECT(BOTH, INV, "params->activation = 3", c);
    c = legal(), c.params.activation = (fastglu_activation)-1;
    REJECT(BOTH, INV, "params->activation = -1", c);
    c = legal(), c.params.layout = (fastglu_layout)2;
    REJECT(BOTH, INV, "params->layout = 2", c);
    c = legal(), c.params.glu_linear_offset = NAN;
    REJECT(BOTH, INV, "params->glu_linear_offset = nan", c);
    c = legal(), c.params.glu_linear_offset = -INFINITY;
    REJECT(BOTH, INV, "params->glu_linear_offset = -inf", c);
    c = legal(), c.params.gate_multiplier = INFINITY;
    REJECT(BOTH, INV, "params->gate_multiplier = inf", c);
    c = legal(), c.params.down_multiplier = NAN;
    REJECT(BOTH, INV, "params->down_multiplier = nan", c);
    /* params are checked even for an empty problem */
    c = legal(), c.params.gate_multiplier = NAN, c.tokens = 0;
    REJECT(BOTH, INV, "params->gate_multiplier = nan", c);

    /* ---- dtypes ---- */
    c = legal(), c.dtype = (fastglu_dtype)7, c.input_dtype = (fastglu_dtype)7;
    REJECT(BOTH, DT, "dtype 7 is not", c);
    c = legal(), c.dtype = FASTGLU_DTYPE_FP8_E4M3, c.input_dtype = FASTGLU_DTYPE_FP8_E4M3;
    REJECT(BOTH, DT, "dtype 3 (FASTGLU_DTYPE_FP8_E4M3) is not", c);
    c = legal(), c.weights_dtype = FASTGLU_DTYPE_FP8_E4M3;
    REJECT(BOTH, DT, "weights_dtype 3 (FASTGLU_DTYPE_FP8_E4M3)", c);
    c = legal(), c.weights_dtype = (fastglu_dtype)-2;
    REJECT(BOTH, DT, "weights_dtype -2", c);
    c = legal(), c.input_dtype = FASTGLU_DTYPE_BF16;
    REJECT(BWD, DT, "input_dtype 2 is neither dtype (0)", c);
    c = legal(), c.input_dtype = (fastglu_dtype)9;
    REJECT(BWD, DT, "input_dtype 9", c);
    c = legal(), c.scale = A.scale;
    REJECT(BWD, INV, "input_scale_inv = ", c);
    /* the swiglu functions refuse fp8 too */
    {
        poison();
        fastglu_status st =
            fastglu_swiglu_fwd_cpu(A.x, 2 * F, A.y, F, T, F, FASTGLU_DTYPE_FP8_E4M3);
        EXPECT(st == DT && strstr(fastglu_last_error_message(), "FASTGLU_DTYPE_FP8_E4M3"),
               "swiglu with fp8: status %d (%s)", st, fastglu_last_error_message());
        st = fastglu_swiglu_bwd_cuda(A.dy, F, 1, A.x, 2 * F, A.dx, 2 * F, T, F,
                                     FASTGLU_DTYPE_FP8_E4M3, NULL);
        EXPECT(st == DT, "swiglu cuda with fp8: status %d", st);
        EXPECT(untouched(), "swiglu with fp8 wrote");
        EXPECT(fastglu_dtype_size(FASTGLU_DTYPE_FP8_E4M3) == 1, "dtype_size(fp8)");
        EXPECT(fastglu_dtype_size((fastglu_dtype)4) == 0, "dtype_size(4)");
    }

    /* ---- sizes ---- */
    c = legal(), c.tokens = -1;
    REJECT(BOTH, INV, "tokens = -1 is negative", c);
    c = legal(), c.F = -3;
    REJECT(BOTH, INV, "ffn_hidden_size = -3 is negative", c);

    /* ---- layout pointer rules ---- */
    c = interleaved(), c.up = A.up2;
    REJECT(BOTH, INV, "up = ", c);
    REJECT(BOTH, INV, "must be NULL with FASTGLU_LAYOUT_INTERLEAVED", c);
    c = interleaved(), c.d_up = A.dup2;
    REJECT(BWD, INV, "d_up = ", c);
    c = interleaved(), c.up = A.up2, c.tokens = 0; /* even when empty */
    REJECT(BOTH, INV, "must be NULL", c);
    c = legal(), c.up = NULL;
    REJECT(BOTH, INV, "up is NULL", c);
    c = legal(), c.d_up = NULL;
    REJECT(BWD, INV, "d_up is NULL", c);

    /* ---- NULL, stride, alignment, span ---- */
    c = legal(), c.gate = NULL;
    REJECT(BOTH, INV, "gate is NULL", c);
    c = legal(), c.output = NULL;
    REJECT(FWD, INV, "output is NULL", c);
    c = legal(), c.dy = NULL;
    REJECT(BWD, INV, "dy is NULL", c);
    c = legal(), c.d_gate = NULL;
    REJECT(BWD, INV, "d_gate is NULL", c);
    c = legal(), c.gate_rs = -1;
    REJECT(BOTH, INV, "gate has a negative stride (row -1", c);
    c = legal(), c.up_rs = -2 * F;
    REJECT(BOTH, INV, "up has a negative stride", c);
    c = legal(), c.weights_stride = -1;
    REJECT(BOTH, INV, "weights has a negative stride", c);
    c = legal(), c.dy_cs = -1;
    REJECT(BWD, INV, "dy has a negative stride", c);
    c = legal(), c.gate = (const char *)A.x + 2;
    REJECT(BOTH, INV, "not aligned to its 4-byte element", c);
    c = legal(), c.bias = (const char *)A.bias + 1;
    REJECT(BOTH, INV, "bias = ", c);
    c = legal(), c.weights_dtype = FASTGLU_DTYPE_BF16, c.weights = (const char *)A.w + 1;
    c.dweights = NULL;
    REJECT(BOTH, INV, "weights = ", c);
    c = legal(), c.output_rs = F - 1;
    REJECT(FWD, INV, "output row stride 7 is smaller than its row of 8", c);
    c = legal(), c.d_gate_rs = 0;
    REJECT(BWD, INV, "d_gate row stride 0", c);
    c = legal(), c.gate_rs = INT64_MAX / 2;
    REJECT(BOTH, INV, "gate spans more than 2^63 bytes", c);
    c = legal(), c.weights_stride = INT64_MAX / 2;
    REJECT(BOTH, INV, "weights spans more than", c);

    /* ---- fp8 input ---- */
    c = legal(), c.input_dtype = FASTGLU_DTYPE_FP8_E4M3, c.gate = A.x8, c.up = &A.x8[0][F];
    c.scale = A.scale, c.scale_stride = -1;
    REJECT(BWD, INV, "input_scale_inv has a negative stride", c);
    c.scale = (const float *)((const char *)A.scale + 2), c.scale_stride = 1;
    REJECT(BWD, INV, "input_scale_inv = ", c);
    c.scale = A.scale, c.d_gate = A.x8; /* in place is only for input_dtype == dtype */
    REJECT(BWD, INV, "d_gate overlaps gate", c);
    c = legal(), c.input_dtype = FASTGLU_DTYPE_FP8_E4M3, c.gate = A.x8, c.up = &A.x8[0][F];
    c.scale = A.scale, c.scale_stride = 1;
    ACCEPT(BWD, c);
    c.scale_stride = 0, c.scale = NULL;
    ACCEPT(BWD, c);
    /* 1 x 128 block scales: two a row (gate's block, up's block) */
    c = legal(), c.input_dtype = FASTGLU_DTYPE_FP8_E4M3, c.gate = A.x8, c.up = &A.x8[0][F];
    c.scale = A.scale, c.scale_stride = 2, c.scale_1x128 = 1;
    ACCEPT(BWD, c);
    c.scale_1x128 = 2;
    REJECT(BWD, INV, "scale_1x128 = 2 is neither 0 nor 1", c);
    c.scale_1x128 = 1, c.scale = NULL;
    REJECT(BWD, INV, "scale_1x128 = 1 but input_scale_inv is NULL", c);
    c.scale = A.scale, c.scale_stride = -2;
    REJECT(BWD, INV, "input_scale_inv has a negative stride", c);

    /* ---- dbias / dweights ---- */
    c = legal(), c.bias = NULL;
    REJECT(BWD, INV, "dbias requires bias", c);
    c = legal(), c.weights = NULL;
    REJECT(BWD, INV, "dweights requires weights", c);
    c = legal(), c.bias = NULL, c.tokens = 0; /* dbias would be zero-filled: still checked */
    REJECT(BWD, INV, "dbias requires bias", c);
    c = legal(), c.dbias = (char *)A.dbias + 2;
    REJECT(BWD, INV, "dbias = ", c);
    c = legal(), c.dbias = (char *)A.dbias + 2, c.tokens = 0;
    REJECT(BWD, INV, "dbias = ", c);
    c = legal(), c.dweights = (char *)A.dw + 1, c.F = 0;
    REJECT(BWD, INV, "dweights = ", c);
    c = legal(), c.dbias = (void *)A.bias, c.tokens = 0; /* zero-filling would clobber bias */
    REJECT(BWD, INV, "dbias overlaps bias", c);
    c = legal(), c.dweights = (void *)&A.w[1], c.F = 0;
    REJECT(BWD, INV, "dweights overlaps weights", c);

    /* ---- workspace ---- */
    {
        const size_t need = fastglu_glu_bwd_workspace_bytes(T, F, 1, 1);
        EXPECT(need > 0 && need <= sizeof A.ws && need % 16 == 0, "workspace bytes %zu", need);
        c = legal(), c.workspace = NULL;
        REJECT(BWD, INV, "workspace is NULL", c);
        c = legal(), c.workspace_bytes = need - 1;
        REJECT(BWD, INV, "workspace_bytes = ", c);
        REJECT(BWD, INV, "is smaller than the", c);
        c = legal(), c.workspace = A.ws + 8;
        REJECT(BWD, INV, "is not 16-byte aligned", c);
        c = legal(), c.workspace = A.dx, c.workspace_bytes = sizeof A.dx;
        REJECT(BWD, INV, "workspace overlaps d_gate", c);
        c = legal(), c.workspace = (void *)A.dy, c.workspace_bytes = sizeof A.dy;
        REJECT(BWD, INV, "workspace overlaps dy", c);
        /* exactly enough is enough, more is fine, and none is needed without reductions */
        c = legal(), c.workspace_bytes = need;
        ACCEPT(BWD, c);
        c = legal(), c.dbias = NULL, c.dweights = NULL, c.workspace = NULL, c.workspace_bytes = 0;
        EXPECT(fastglu_glu_bwd_workspace_bytes(T, F, 0, 0) == 0, "no reductions, no workspace");
        ACCEPT(BWD, c);
        c = legal(), c.dweights = NULL;
        c.workspace_bytes = fastglu_glu_bwd_workspace_bytes(T, F, 1, 0);
        ACCEPT(BWD, c);
        /* the layout of src/internal.h: ceil(T/64) slabs of 2F floats, then (16-byte aligned)
         * ceil(F/256) tiles of T floats */
        EXPECT(fastglu_glu_bwd_workspace_bytes(65, 257, 1, 0) == 2 * 514 * 4, "dbias part");
        EXPECT(fastglu_glu_bwd_workspace_bytes(65, 257, 0, 1) == 528, "dweights part");
        EXPECT(fastglu_glu_bwd_workspace_bytes(65, 257, 1, 1) == 2 * 514 * 4 + 528, "both");
        EXPECT(fastglu_glu_bwd_workspace_bytes(0, 257, 1, 1) == 0, "T = 0");
        EXPECT(fastglu_glu_bwd_workspace_bytes(65, 0, 1, 1) == 0, "F = 0");
        EXPECT(fastglu_glu_bwd_workspace_bytes(-1, 5, 1, 1) == 0, "T < 0");
    }

    /* ---- overlaps: every output against every input and every other output ---- */
    c = legal(), c.output = &A.x[0][1], c.output_rs = 2 * F;
    REJECT(FWD, INV, "output overlaps gate", c);
    c = legal(), c.output = &A.x[0][F], c.output_rs = 2 * F;
    REJECT(FWD, INV, "output overlaps up", c);
    c = legal(), c.output = A.bias, c.tokens = 1;
    REJECT(FWD, INV, "output overlaps bias", c);
    c = legal(), c.output = A.dx, c.weights = &A.dx[1][0];
    REJECT(FWD, INV, "output overlaps weights", c);
    c = legal(), c.d_gate = (void *)A.dy, c.d_gate_rs = F;
    REJECT(BWD, INV, "d_gate overlaps dy", c);
    c = legal(), c.d_gate = &A.x[0][F];
    REJECT(BWD, INV, "d_gate overlaps up", c);
    c = legal(), c.d_up = A.x;
    REJECT(BWD, INV, "d_up overlaps gate", c);
    c = legal(), c.d_up = &A.dx[0][1];
    REJECT(BWD, INV, "d_up overlaps d_gate", c);
    c = legal(), c.d_gate = A.x, c.d_gate_rs = 2 * F + 1, c.d_up = A.dup2, c.d_up_rs = F;
    REJECT(BWD, INV, "d_gate overlaps gate", c); /* "in place" with another row stride */
    c = legal(), c.dbias = (void *)A.bias;
    REJECT(BWD, INV, "dbias overlaps bias", c);
    c = legal(), c.dbias = &A.dx[1][0];
    REJECT(BWD, INV, "dbias overlaps d_gate", c);
    c = legal(), c.dweights = (void *)A.w;
    REJECT(BWD, INV, "dweights overlaps weights", c);
    c = legal(), c.dweights = &A.dbias[3];
    REJECT(BWD, INV, "dweights overlaps dbias", c);
    c = legal(), c.dweights = &A.dx[1][2];
    REJECT(BWD, INV, "dweights overlaps d_gate", c);
    c = legal(), c.input_dtype = FASTGLU_DTYPE_FP8_E4M3, c.gate = A.x8, c.up = &A.x8[0][F];
    c.scale = (const float *)A.dw, c.scale_stride = 1;
    REJECT(BWD, INV, "dweights overlaps input_scale_inv", c);
    c = interleaved(), c.dbias = (void *)A.dy;
    REJECT(BWD, INV, "dbias overlaps dy", c);
    c = interleaved(), c.d_gate = &A.x[1][0];
    REJECT(BWD, INV, "d_gate overlaps gate", c);

    /* ---- the forward's fp8 copy (saved_fp8): [T, 2F] bytes, any alignment, an output ---- */
    c = legal(), c.saved8 = A.s8, c.saved8_rs = 2 * F - 1;
    REJECT(FWD, INV, "saved_fp8 row stride 15 is smaller than its row of 16", c);
    c = legal(), c.saved8 = A.s8, c.saved8_rs = -1;
    REJECT(FWD, INV, "saved_fp8 has a negative stride (row -1", c);
    c = legal(), c.saved8 = A.s8, c.saved8_rs = INT64_MAX / 2;
    REJECT(FWD, INV, "saved_fp8 spans more than 2^63 bytes", c);
    c = legal(), c.saved8 = A.x, c.saved8_rs = 2 * F;
    REJECT(FWD, INV, "saved_fp8 overlaps gate", c);
    /* rows of 2F bytes inside the up halves of x's rows (same row stride: the exact test) */
    c = legal(), c.saved8 = &A.x[0][F], c.saved8_rs = (int64_t)sizeof A.x[0];
    REJECT(FWD, INV, "saved_fp8 overlaps up", c);
    c = legal(), c.saved8 = (char *)&A.x[0][2 * F] - 1, c.saved8_rs = 2 * F, c.tokens = 1;
    REJECT(FWD, INV, "saved_fp8 overlaps up", c); /* its first byte is up's last */
    c = legal(), c.saved8 = (void *)A.bias, c.saved8_rs = 2 * F;
    REJECT(FWD, INV, "saved_fp8 overlaps bias", c);
    c = legal(), c.saved8 = (void *)A.w, c.saved8_rs = 0, c.tokens = 1;
    REJECT(FWD, INV, "saved_fp8 overlaps weights", c);
    c = legal(), c.saved8 = A.y, c.saved8_rs = 2 * F;
    REJECT(FWD, INV, "saved_fp8 overlaps output", c);
    c = legal(), c.saved8 = (char *)A.s8 + 5, c.saved8_rs = 2 * F + 4, c.output = A.s8;
    c.output_rs = F;
    REJECT(FWD, INV, "saved_fp8 overlaps output", c);
    c = interleaved(), c.saved8 = &A.x[1][3], c.saved8_rs = 2 * F;
    REJECT(FWD, INV, "saved_fp8 overlaps gate", c);
    c = legal(), c.up = A.up2, c.up_rs = F, c.saved8 = &A.up2[2][1], c.saved8_rs = 2 * F;
    REJECT(FWD, INV, "saved_fp8 overlaps up", c); /* two tensors */
    /* legal: any alignment and row stride >= 2F; one row with any row stride; every layout */
    c = legal(), c.saved8 = A.s8, c.saved8_rs = 2 * F;
    ACCEPT(FWD, c);
    c = legal(), c.saved8 = (char *)A.s8 + 1, c.saved8_rs = 2 * F + 3;
    ACCEPT(FWD, c);
    c = legal(), c.saved8 = (char *)A.s8 + 3, c.saved8_rs = 0, c.tokens = 1;
    ACCEPT(FWD, c);
    c = interleaved(), c.saved8 = (char *)A.s8 + 2, c.saved8_rs = 2 * F + 1;
    ACCEPT(FWD, c);
    c = legal(), c.up = A.up2, c.up_rs = F, c.saved8 = A.s8, c.saved8_rs = 2 * F + 4;
    ACCEPT(FWD, c);
    /* the copy's rows in the gaps between gate's rows (x's up halves, unused with a separate up):
     * no shared byte, by the exact test for regions of one row stride */
    c = legal(), c.up = A.up2, c.up_rs = F, c.gate = A.x, c.gate_rs = 2 * F;
    c.saved8 = &A.x[0][F], c.saved8_rs = (int64_t)sizeof A.x[0];
    ACCEPT(FWD, c);
    /* the backward reads the copy as its fp8 input: gate = saved_fp8, up = saved_fp8 + F */
    {
        poison();
        c = legal(), c.saved8 = A.s8, c.saved8_rs = 2 * F + 4;
        EXPECT(run_fwd(&c, 0) == FASTGLU_SUCCESS, "fwd with saved_fp8: %s",
               fastglu_last_error_message());
        int written = 1;
        for (int t = 0; t < T; ++t) {
            for (int j = 0; j < 2 * F; ++j) written &= A.s8[t][j] != 0x7f;
            for (int j = 2 * F; j < 2 * F + 4; ++j) written &= A.s8[t][j] == 0x7f; /* the pad */
        }
        EXPECT(written, "fwd with saved_fp8: the copy is not exactly the [T, 2F] region");
        call d = legal();
        d.input_dtype = FASTGLU_DTYPE_FP8_E4M3, d.gate = A.s8, d.up = &A.s8[0][F];
        d.gate_rs = d.up_rs = 2 * F + 4;
        EXPECT(run_bwd(&d, 0) == FASTGLU_SUCCESS, "bwd from saved_fp8: %s",
               fastglu_last_error_message());
    }

    /* ---- legal layouts ---- */
    c = legal();
    ACCEPT(BOTH, c);
    c = interleaved();
    ACCEPT(BOTH, c);
    c = legal(), c.up = A.up2, c.up_rs = F, c.d_up = A.dup2, c.d_up_rs = F; /* two tensors */
    ACCEPT(BOTH, c);
    c = legal(), c.d_gate = A.x, c.d_up = &A.x[0][F]; /* the in-place backward */
    ACCEPT(BWD, c);
    c = interleaved(), c.d_gate = A.x; /* in place, interleaved */
    ACCEPT(BWD, c);
    c = legal(), c.d_gate = A.x, c.d_gate_rs = 99, c.d_up = &A.x[0][F], c.d_up_rs = 7;
    c.tokens = 1; /* in place with one row: the row strides do not matter */
    ACCEPT(BWD, c);
    c = legal(), c.gate_rs = 0, c.up_rs = 0, c.weights_stride = 0, c.dy_rs = 0, c.dy_cs = 0;
    ACCEPT(BOTH, c); /* broadcast inputs */
    c = legal(), c.weights = NULL, c.dweights = NULL, c.weights_dtype = (fastglu_dtype)99;
    c.weights_stride = -5; /* weights_dtype and weights_stride are ignored without weights */
    ACCEPT(BOTH, c);
    c = interleaved(), c.up_rs = -7, c.d_up_rs = -7; /* ignored with INTERLEAVED */
    ACCEPT(BOTH, c);
    c = legal(), c.params.clamp_value = NAN; /* no clamp */
    ACCEPT(BOTH, c);
    c = legal(), c.params.clamp_value = INFINITY;
    ACCEPT(BOTH, c);
    c = legal(), c.params.clamp_value = -3.0f, c.params.glu_linear_offset = 1.0f;
    c.params.gate_multiplier = -2.0f, c.params.down_multiplier = 0.0f;
    ACCEPT(BOTH, c);
    /* x holds [d_gate | gate] rows: neither shares a byte with the other (exact row test) */
    c = legal(), c.up = A.up2, c.up_rs = F, c.gate = &A.x[0][F], c.d_gate = A.x, c.d_up = A.dup2;
    c.d_up_rs = F;
    ACCEPT(BWD, c);

    /* ---- empty problems ---- */
    {
        /* forward: nothing read or written, NULL pointers allowed */
        c = legal(), c.tokens = 0, c.gate = NULL, c.up = NULL, c.output = NULL;
        c.saved8 = A.x, c.saved8_rs = -1; /* like output: not used, not checked */
        poison();
        EXPECT(run_fwd(&c, 0) == FASTGLU_SUCCESS && untouched(), "T = 0 fwd: %s",
               fastglu_last_error_message());
        EXPECT(run_fwd(&c, 1) == FASTGLU_SUCCESS && untouched(), "T = 0 fwd cuda: %s",
               fastglu_last_error_message());
        /* backward, T = 0: dbias [2F] is zero-filled, nothing else written */
        c = legal(), c.tokens = 0, c.gate = NULL, c.up = NULL, c.dy = NULL, c.d_gate = NULL;
        c.d_up = NULL, c.workspace = NULL, c.workspace_bytes = 0;
        for (int cuda = 0; cuda < 2; ++cuda) {
            if (cuda && fastglu_cuda_built()) continue; /* host buffers: the stub only */
            poison();
            fastglu_status st = run_bwd(&c, cuda);
            EXPECT(st == FASTGLU_SUCCESS, "T = 0 bwd (%d): %s", cuda, fastglu_last_error_message());
            int zero = 1;
            for (int j = 0; j < 2 * F; ++j) zero &= A.dbias[j] == 0.0f && !signbit(A.dbias[j]);
            EXPECT(zero, "T = 0: dbias not zero-filled (%d)", cuda);
            memset(A.dbias, 0x7f, sizeof A.dbias);
            EXPECT(untouched(), "T = 0 bwd wrote beyond dbias (%d)", cuda);
        }
        /* backward, F = 0: dweights [T] is zero-filled */
        c = legal(), c.F = 0, c.gate = NULL, c.up = NULL, c.dy = NULL, c.d_gate = NULL;
        c.d_up = NULL, c.bias = NULL, c.workspace = NULL, c.workspace_bytes = 0;
        c.weights_dtype = FASTGLU_DTYPE_BF16;
        for (int cuda = 0; cuda < 2; ++cuda) {
            if (cuda && fastglu_cuda_built()) continue;
            poison();
            fastglu_status st = run_bwd(&c, cuda);
            EXPECT(st == FASTGLU_SUCCESS, "F = 0 bwd (%d): %s", cuda, fastglu_last_error_message());
            const unsigned char *b = (const unsigned char *)A.dw;
            int zero = 1;
            for (size_t i = 0; i < T * 2; ++i) zero &= b[i] == 0; /* T bf16 zeros */
            EXPECT(zero, "F = 0: dweights not zero-filled (%d)", cuda);
            memset(A.dw, 0x7f, T * 2);
            EXPECT(untouched(), "F = 0 bwd wrote beyond T bf16 dweights (%d)", cuda);
        }
        /* both zero: nothing at all */
        c = legal(), c.F = 0, c.tokens = 0;
        poison();
        EXPECT(run_bwd(&c, 0) == FASTGLU_SUCCESS && untouched(), "T = F = 0 bwd");
    }

    /* ---- the descriptors ---- */
    {
        const fastglu_dtype f32 = FASTGLU_DTYPE_FP32, bf16 = FASTGLU_DTYPE_BF16;
        const fastglu_glu_operands legal_o = glu_flat_operands(
            A.x, 2 * F, &A.x[0][F], 2 * F, f32, NULL, 0, 0, A.bias, f32, A.w, f32, 1);
        const fastglu_tensor out = glu_flat_tensor(A.y, f32, F);
        const fastglu_tensor s8 = glu_flat_tensor(A.s8, FASTGLU_DTYPE_FP8_E4M3, 2 * F + 4);
        fastglu_glu_grads legal_g;
        legal_g.d_gate = glu_flat_tensor(A.dx, f32, 2 * F);
        legal_g.d_up = glu_flat_tensor(&A.dx[0][F], f32, 2 * F);
        legal_g.dbias = glu_flat_tensor(A.dbias, f32, 1);
        legal_g.dweights = glu_flat_tensor(A.dw, f32, 1);
        fastglu_glu_operands o;
        fastglu_glu_grads g;
        desc_fwd(__LINE__, INV, "operands is NULL", NULL, out, s8);
        o = legal_o, o.up.dtype = bf16;
        desc_fwd(__LINE__, DT, "up.dtype = 2 differs from output.dtype = 0", &o, out, s8);
        o = legal_o, o.gate.dtype = bf16;
        desc_fwd(__LINE__, DT, "gate.dtype = 2 differs from output.dtype = 0", &o, out, s8);
        o = legal_o, o.bias.dtype = bf16;
        desc_fwd(__LINE__, DT, "bias.dtype = 2", &o, out, s8);
        o = legal_o, o.bias.row_stride = 2;
        desc_fwd(__LINE__, INV, "bias.row_stride = 2", &o, out, s8);
        o = legal_o, o.scale_inv = glu_flat_tensor(A.scale, f32, 1);
        desc_fwd(__LINE__, INV, "scale_inv is given", &o, out, s8);
        o = legal_o, o.scale_1x128 = 1;
        desc_fwd(__LINE__, INV, "scale_1x128 = 1 is set", &o, out, s8);
        desc_fwd(__LINE__, DT, "saved_fp8.dtype = 0", &legal_o, out,
                 glu_flat_tensor(A.s8, f32, 2 * F));

        desc_bwd(__LINE__, INV, "operands is NULL", NULL, &legal_g);
        desc_bwd(__LINE__, INV, "grads is NULL", &legal_o, NULL);
        o = legal_o, o.up.dtype = bf16;
        desc_bwd(__LINE__, DT, "up.dtype = 2 differs from gate.dtype = 0", &o, &legal_g);
        o = legal_o, o.bias.dtype = bf16;
        desc_bwd(__LINE__, DT, "bias.dtype = 2 differs from dy.dtype = 0", &o, &legal_g);
        g = legal_g, g.d_up.dtype = bf16;
        desc_bwd(__LINE__, DT, "d_up.dtype = 2 differs from dy.dtype = 0", &legal_o, &g);
        g = legal_g, g.dbias.row_stride = 2;
        desc_bwd(__LINE__, INV, "dbias.row_stride = 2", &legal_o, &g);
        g = legal_g, g.dweights.dtype = bf16;
        desc_bwd(__LINE__, DT, "dweights.dtype = 2 differs from weights.dtype = 0", &legal_o, &g);
        g = legal_g, g.dweights.row_stride = 0;
        desc_bwd(__LINE__, INV, "dweights.row_stride = 0", &legal_o, &g);
        o = legal_o, o.gate.dtype = o.up.dtype = FASTGLU_DTYPE_FP8_E4M3;
        o.gate.data = A.x8, o.up.data = &A.x8[0][F];
        o.scale_inv = glu_flat_tensor(A.scale, FASTGLU_DTYPE_FP16, 1);
        desc_bwd(__LINE__, DT, "scale_inv.dtype = 1", &o, &legal_g);
    }

    /* ---- the hook exists and is harmless ---- */
    fastglu_debug_set_max_blocks(3);
    fastglu_debug_set_max_blocks(0);

    printf("glu api errors: %d failed\n", failures);
    return failures ? 1 : 0;
}
