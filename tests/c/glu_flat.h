/* glu_flat.h — the family's calls with every descriptor field as its own argument (the order of
 * src/internal.h's FASTGLU_GLU_*_FIELDS), for the tests written against operands one by one: each
 * builds the descriptors (operands of `dtype`, or input_dtype in the backward) and calls
 * fastglu_glu_{fwd,bwd}_{cpu,cuda}. Header-only. */
#ifndef FASTGLU_TESTS_GLU_FLAT_H
#define FASTGLU_TESTS_GLU_FLAT_H

#include <stdint.h>
#include <string.h>

#include "fastglu.h"

static inline fastglu_tensor glu_flat_tensor(const void *data, fastglu_dtype dtype, int64_t rs) {
    fastglu_tensor t;
    t.data = (void *)(uintptr_t)data, t.dtype = dtype, t.row_stride = rs;
    return t;
}

static inline fastglu_glu_operands
glu_flat_operands(const void *gate, int64_t gate_rs, const void *up, int64_t up_rs,
                  fastglu_dtype in_dtype, const float *scale_inv, int64_t scale_stride,
                  int scale_1x128, const void *bias, fastglu_dtype dtype, const void *weights,
                  fastglu_dtype wdt, int64_t w_stride) {
    fastglu_glu_operands o;
    memset(&o, 0, sizeof o);
    o.gate = glu_flat_tensor(gate, in_dtype, gate_rs);
    o.up = glu_flat_tensor(up, in_dtype, up_rs);
    o.bias = glu_flat_tensor(bias, dtype, 1);
    o.weights = glu_flat_tensor(weights, wdt, w_stride);
    o.scale_inv = glu_flat_tensor(scale_inv, FASTGLU_DTYPE_FP32, scale_stride);
    o.scale_1x128 = scale_1x128;
    return o;
}

#define GLU_FLAT_FWD_PARAMS                                                                        \
    const fastglu_glu_params *params, const void *gate, int64_t gate_rs, const void *up,           \
        int64_t up_rs, const void *bias, const void *weights, fastglu_dtype wdt, int64_t w_stride, \
        void *output, int64_t output_rs, void *saved_fp8, int64_t saved_fp8_rs, int64_t tokens,    \
        int64_t F, fastglu_dtype dtype
#define GLU_FLAT_FWD_BODY                                                                          \
    const fastglu_glu_operands o = glu_flat_operands(gate, gate_rs, up, up_rs, dtype, NULL, 0, 0,  \
                                                     bias, dtype, weights, wdt, w_stride);         \
    const fastglu_tensor out = glu_flat_tensor(output, dtype, output_rs);                          \
    const fastglu_tensor s8 = glu_flat_tensor(saved_fp8, FASTGLU_DTYPE_FP8_E4M3, saved_fp8_rs);

static inline fastglu_status glu_fwd_cpu_flat(GLU_FLAT_FWD_PARAMS) {
    GLU_FLAT_FWD_BODY
    return fastglu_glu_fwd_cpu(params, &o, out, s8, tokens, F);
}
static inline fastglu_status glu_fwd_cuda_flat(GLU_FLAT_FWD_PARAMS, void *stream) {
    GLU_FLAT_FWD_BODY
    return fastglu_glu_fwd_cuda(params, &o, out, s8, tokens, F, stream);
}

#define GLU_FLAT_BWD_PARAMS                                                                        \
    const fastglu_glu_params *params, const void *dy, int64_t dy_rs, int64_t dy_cs,                \
        const void *gate, int64_t gate_rs, const void *up, int64_t up_rs, fastglu_dtype in_dtype,  \
        const float *scale_inv, int64_t scale_stride, int scale_1x128, const void *bias,           \
        const void *weights, fastglu_dtype wdt, int64_t w_stride, void *d_gate, int64_t d_gate_rs, \
        void *d_up, int64_t d_up_rs, void *dbias, void *dweights, void *workspace,                 \
        size_t workspace_bytes, int64_t tokens, int64_t F, fastglu_dtype dtype
#define GLU_FLAT_BWD_BODY                                                                          \
    const fastglu_glu_operands o =                                                                 \
        glu_flat_operands(gate, gate_rs, up, up_rs, in_dtype, scale_inv, scale_stride,             \
                          scale_1x128, bias, dtype, weights, wdt, w_stride);                       \
    fastglu_glu_grads g;                                                                           \
    g.d_gate = glu_flat_tensor(d_gate, dtype, d_gate_rs);                                          \
    g.d_up = glu_flat_tensor(d_up, dtype, d_up_rs);                                                \
    g.dbias = glu_flat_tensor(dbias, dtype, 1);                                                    \
    g.dweights = glu_flat_tensor(dweights, wdt, 1);                                                \
    fastglu_workspace ws;                                                                          \
    ws.data = workspace, ws.bytes = workspace_bytes;                                               \
    const fastglu_tensor d = glu_flat_tensor(dy, dtype, dy_rs);

static inline fastglu_status glu_bwd_cpu_flat(GLU_FLAT_BWD_PARAMS) {
    GLU_FLAT_BWD_BODY
    return fastglu_glu_bwd_cpu(params, d, dy_cs, &o, &g, ws, tokens, F);
}
static inline fastglu_status glu_bwd_cuda_flat(GLU_FLAT_BWD_PARAMS, void *stream) {
    GLU_FLAT_BWD_BODY
    return fastglu_glu_bwd_cuda(params, d, dy_cs, &o, &g, ws, tokens, F, stream);
}

#endif /* FASTGLU_TESTS_GLU_FLAT_H */
