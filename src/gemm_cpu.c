/*
 * gemm_cpu.c — the linear layers on host memory (fastglu_linear_cpu, fastglu_linear_glu_fwd_cpu):
 * the CPU reference, plain loops for any shape and stride.
 *
 * h[t, c] = round(((((+0 + x[t,0] w[c,0]) + x[t,1] w[c,1]) + ...) + x[t,K-1] w[c,K-1]) + bias[c]):
 * each product and each sum rounded to fp32 on its own (the library is built with
 * -ffp-contract=off), k in order, the bias last; round() is the conversion to dtype
 * (round-to-nearest-even). The work is cut into chunks (KC values of k, up to 2 * CHUNK columns)
 * only to convert x and w once per chunk into fp32 arrays on the stack; the order of the sums
 * stays k = 0, 1, ..., K-1 for every element. No memory is allocated.
 *
 * y: each chunk of up to CHUNK columns of y takes its gate and up columns of h (rounded to dtype,
 * as stored), and the family's CPU forward (fastglu_glu_fwd_cpu, bias NULL, tokens 1) computes y
 * from them: y is by construction what fastglu_glu_fwd_cpu gives for the stored h.
 *
 * fc2 dgrad + dGLU (fastglu_linear_dglu_bwd_cpu): per row t and chunk of CHUNK columns j, dY[t, j] =
 * ((+0 + dO[t,0] w2[0,j]) + dO[t,1] w2[1,j]) + ... in fp32, k in order, rounded to dtype; then the
 * family's backward of each (gate, up) of h with no bias through glu_math.h (glu_cpu.c's math, the
 * same fp32 operations in the same order), y as the forward writes it, and dweights[t] summed over
 * j in order.
 */
#include <math.h>
#include <string.h>

#include "cpu_elements.h"
#include "gemm_common.h"
#include "glu_math.h"

#define CHUNK 128 /* columns of y per chunk (2 * CHUNK columns of h) */
#define KC 256    /* values of k per chunk */

typedef struct gemm_cpu {
    const fastglu_gemm_problem *p;
    int64_t NW; /* rows of w, columns of h */
} gemm_cpu;

/* Row t of h at the n columns col(i) = c0 + i * cstep (i < n, n <= 2 * CHUNK), rounded to dtype,
 * into dst[i * dstep] (dst's element type is dtype). */
static void h_columns(const gemm_cpu *g, int64_t t, int64_t c0, int64_t cstep, int n, void *dst,
                      int64_t dstep) {
    const fastglu_gemm_problem *p = g->p;
    float acc[2 * CHUNK], xk[KC], wk[KC];
    for (int i = 0; i < n; ++i) acc[i] = 0.0f;
    for (int64_t k0 = 0; k0 < p->K; k0 += KC) {
        const int kn = (int)(p->K - k0 < KC ? p->K - k0 : KC);
        load_f32(p->dtype, p->x, t * p->x_row_stride + k0, 1, kn, 1.0f, xk);
        for (int i = 0; i < n; ++i) {
            load_f32(p->dtype, p->w, (c0 + i * cstep) * p->w_row_stride + k0, 1, kn, 1.0f, wk);
            float a = acc[i];
            for (int k = 0; k < kn; ++k) a += xk[k] * wk[k];
            acc[i] = a;
        }
    }
    for (int i = 0; i < n; ++i) {
        float v = acc[i];
        if (p->bias) v += load_one(p->dtype, p->bias, c0 + i * cstep);
        store_f32(p->dtype, dst, i * dstep, 1, 1, &v);
    }
}

static void linear_cpu(const fastglu_gemm_problem *p) {
    const gemm_cpu g = {p, p->N};
    const size_t es = fastglu_dtype_size(p->dtype);
    for (int64_t t = 0; t < p->M; ++t)
        for (int64_t c0 = 0; c0 < p->N; c0 += 2 * CHUNK) {
            const int n = (int)(p->N - c0 < 2 * CHUNK ? p->N - c0 : 2 * CHUNK);
            h_columns(&g, t, c0, 1, n, (char *)p->h + (t * p->h_row_stride + c0) * es, 1);
        }
}

static fastglu_status linear_glu_cpu(const fastglu_gemm_problem *p) {
    const gemm_cpu g = {p, 2 * p->N};
    const fastglu_glu_params *prm = p->glu;
    const int il = prm->layout == FASTGLU_LAYOUT_INTERLEAVED;
    const int64_t F = p->N;
    const size_t es = fastglu_dtype_size(p->dtype);
    const size_t wes = p->weights ? fastglu_dtype_size(p->weights_dtype) : 0;
    float buf[2 * CHUNK]; /* the chunk's h: gate | up (SPLIT, up at CHUNK) or interleaved pairs */
    char *hb = (char *)buf;
    for (int64_t t = 0; t < p->M; ++t) {
        for (int64_t j0 = 0; j0 < F; j0 += CHUNK) {
            const int n = (int)(F - j0 < CHUNK ? F - j0 : CHUNK);
            const void *up;
            if (il) {
                h_columns(&g, t, 2 * j0, 1, 2 * n, hb, 1);
                up = NULL;
            } else {
                h_columns(&g, t, j0, 1, n, hb, 1);
                h_columns(&g, t, F + j0, 1, n, hb + CHUNK * es, 1);
                up = hb + CHUNK * es;
            }
            if (p->h) {
                char *hrow = (char *)p->h + t * p->h_row_stride * es;
                if (il) {
                    memcpy(hrow + 2 * j0 * es, hb, 2 * (size_t)n * es);
                } else {
                    memcpy(hrow + j0 * es, hb, (size_t)n * es);
                    memcpy(hrow + (F + j0) * es, hb + CHUNK * es, (size_t)n * es);
                }
            }
            const void *w =
                p->weights ? (const char *)p->weights + t * p->weights_stride * wes : NULL;
            void *yrow = (char *)p->y + (t * p->y_row_stride + j0) * es;
            fastglu_glu_operands o;
            memset(&o, 0, sizeof o);
            o.gate.data = hb, o.gate.dtype = p->dtype;
            o.up.data = (void *)(uintptr_t)up, o.up.dtype = p->dtype;
            o.weights.data = (void *)(uintptr_t)w, o.weights.dtype = p->weights_dtype;
            const fastglu_tensor yt = {yrow, p->dtype, 0},
                                 no_fp8 = {NULL, FASTGLU_DTYPE_FP8_E4M3, 0};
            const fastglu_status st = fastglu_glu_fwd_cpu(prm, &o, yt, no_fp8, 1, n);
            if (st != FASTGLU_SUCCESS) return st; /* not reached: the call was validated */
        }
    }
    return FASTGLU_SUCCESS;
}

/* ---- fc2 dgrad + dGLU ---------------------------------------------------------------------- */

/* dY = dO @ w2 per row in CHUNK columns (fp32, k in order, rounded to dtype), then glu_math.h's
 * backward per element: glu_cpu.c's operations, so dh and y are fastglu_glu_bwd_cpu's bits on
 * these dY. */
static void linear_dglu_cpu(const fastglu_gemm_problem *p) {
    const fastglu_glu_params *prm = p->glu;
    const int il = prm->layout == FASTGLU_LAYOUT_INTERLEAVED, has_w = p->weights != NULL;
    const int64_t F = p->N, step = il ? 2 : 1, up_off = il ? 1 : F;
    const glu_math m = make_math(prm, p->dtype, 0);
    float acc[CHUNK], wk[CHUNK], g[CHUNK], u[CHUNK], dg[CHUNK], du[CHUNK], y[CHUNK];
    for (int64_t t = 0; t < p->M; ++t) {
        const float w =
            has_w ? load_one(p->weights_dtype, p->weights, t * p->weights_stride) : 1.0f;
        float dw = 0.0f;
        for (int64_t j0 = 0; j0 < F; j0 += CHUNK) {
            const int n = (int)(F - j0 < CHUNK ? F - j0 : CHUNK);
            for (int i = 0; i < n; ++i) acc[i] = 0.0f;
            for (int64_t k = 0; k < p->K; ++k) {
                const float xk = load_one(p->dtype, p->x, t * p->x_row_stride + k);
                load_f32(p->dtype, p->w, k * p->w_row_stride + j0, 1, n, 1.0f, wk);
                for (int i = 0; i < n; ++i) acc[i] += xk * wk[i];
            }
            /* dY rounded to dtype, as a separate GEMM's output (the unfused path) */
            unsigned char rounded[CHUNK * sizeof(float)];
            store_f32(p->dtype, rounded, 0, 1, n, acc);
            load_f32(p->dtype, rounded, 0, 1, n, 1.0f, acc);
            const int64_t hb = t * p->h_row_stride + j0 * step;
            load_f32(p->dtype, p->h, hb, step, n, 1.0f, g);
            load_f32(p->dtype, p->h, hb + up_off, step, n, 1.0f, u);
            for (int i = 0; i < n; ++i) {
                const glu_grads r =
                    glu_elem_backward(MM_ANY, 0, has_w, &m, g[i], u[i], 0.0f, 0.0f, w, acc[i]);
                dg[i] = r.dg, du[i] = r.du, y[i] = r.y;
                dw += r.dw;
            }
            const int64_t db = t * p->dh_row_stride + j0 * step;
            store_f32(p->dtype, p->dh, db, step, n, dg);
            store_f32(p->dtype, p->dh, db + up_off, step, n, du);
            if (p->y) store_f32(p->dtype, p->y, t * p->y_row_stride + j0, 1, n, y);
        }
        if (p->dweights)
            store_f32(p->weights_dtype, p->dweights, t * p->dweights_stride, 1, 1, &dw);
    }
}

fastglu_status fastglu_linear_dglu_bwd_cpu(const fastglu_glu_params *params, fastglu_tensor d_out,
                                           fastglu_tensor w2, fastglu_tensor h,
                                           fastglu_tensor weights, fastglu_tensor dh,
                                           fastglu_tensor y, fastglu_tensor dweights,
                                           int64_t tokens, int64_t hidden,
                                           int64_t ffn_hidden_size) {
    int empty;
    fastglu_status st =
        fastglu_check_linear_dglu("fastglu_linear_dglu_bwd_cpu", params, d_out, w2, h, weights, dh,
                                  y, dweights, tokens, hidden, ffn_hidden_size, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    const fastglu_gemm_problem p = fastglu_gemm_make_dglu_problem(
        params, d_out, w2, h, weights, dh, y, dweights, tokens, hidden, ffn_hidden_size);
    linear_dglu_cpu(&p);
    return FASTGLU_SUCCESS;
}

fastglu_status fastglu_linear_cpu(fastglu_tensor x, fastglu_tensor w, fastglu_tensor bias,
                                  fastglu_tensor out, int64_t tokens, int64_t in_features,
                                  int64_t out_features) {
    const fastglu_tensor none = {NULL, FASTGLU_DTYPE_FP32, 0};
    int empty;
    fastglu_status st = fastglu_check_linear("fastglu_linear_cpu", 0, NULL, x, w, bias, none, out,
                                             none, tokens, in_features, out_features, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    const fastglu_gemm_problem p = fastglu_gemm_make_problem(NULL, x, w, bias, none, out, none,
                                                             tokens, in_features, out_features);
    linear_cpu(&p);
    return FASTGLU_SUCCESS;
}

fastglu_status fastglu_linear_glu_fwd_cpu(const fastglu_glu_params *params, fastglu_tensor x,
                                          fastglu_tensor w1, fastglu_tensor bias,
                                          fastglu_tensor weights, fastglu_tensor h,
                                          fastglu_tensor y, int64_t tokens, int64_t hidden,
                                          int64_t ffn_hidden_size) {
    int empty;
    fastglu_status st =
        fastglu_check_linear("fastglu_linear_glu_fwd_cpu", 1, params, x, w1, bias, weights, h, y,
                             tokens, hidden, ffn_hidden_size, &empty);
    if (st != FASTGLU_SUCCESS || empty) return st;
    const fastglu_gemm_problem p = fastglu_gemm_make_problem(params, x, w1, bias, weights, h, y,
                                                             tokens, hidden, ffn_hidden_size);
    return linear_glu_cpu(&p);
}
