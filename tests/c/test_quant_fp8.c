/* test_quant_fp8.c — fastglu_quantize_fp8_* (a plain operand quantised to float8_e4m3fn: 1 x 128
 * blocks with the transposed copy's 128 x 1 blocks, or 128 x 128 blocks; include/fastglu.h) against
 * a float64 implementation of the recipe: every scale bit for bit, every code within one e4m3 step
 * of x / scale in float64 (the library divides in fp32), NaN / inf blocks as the recipe says, the
 * transposed copy's codes those of the block the recipe gives them, and every byte around the
 * outputs (row and scale padding) left as the sentinel. Fresh random inputs each run
 * (FASTGLU_TEST_SEED replays a printed seed), every dtype, both block shapes and scale layouts,
 * power-of-two scales, the row-wise copy, the transposed copy and both, rows 1, 3, 257, 8193 and
 * cols 1, 3, 1408, 2880, 3420, 5632, dense, 16-byte-padded and odd row strides (the CUDA kernel's
 * 16-byte and element paths). Bad input: an error status and no byte written.
 *
 * Built twice: test_quant_fp8_cpu, and with FP8_TEST_CUDA test_quant_fp8_cuda (device memory, a
 * non-default stream, x followed by poison and every output by the sentinel in the same
 * allocation, so that a read or write past their ends shows; its outputs also bit for bit against
 * the CPU backend's; exits 77, CTest's skip, without a usable GPU). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "convert.h"
#include "fastglu.h"

#include "fp8_test_util.h"

static int cases;
static int margin_writes; /* bytes written past an output's end (CUDA: quantize's margins) */

#define SENT8 0xa5
#define SENT_SCALE -12345.0f

/* ---- the recipe in float64 ------------------------------------------------------------------ */

/* the scale of a block of amax a (NaN if the block holds one): amax / 448 rounded once to fp32
 * (448 = 7 * 2^6: the float64 quotient of an fp32 by 7 never lies within 2^-53 of an fp32
 * midpoint, so rounding it again to fp32 is the correctly rounded fp32 quotient), 1 for 0, 2^-149
 * where it underflows to 0, rounded up to a power of two with pow2 */
static float ref_scale(double a, int pow2) {
    if (isnan(a)) return NAN;
    if (a == 0) return 1.0f;
    if (isinf(a)) return INFINITY;
    float s = (float)(a / 448.0);
    if (s == 0) s = 0x1p-149f;
    if (pow2 && isfinite(s)) {
        int e;
        const double f = frexp((double)s, &e); /* s = f 2^e, f in [0.5, 1) */
        if (f != 0.5) s = (float)ldexp(1.0, e);
    }
    return s;
}

static int same_float(float a, float b) {
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

/* the code q of x under scale s: NaN for a NaN block or an infinite x under an infinite scale, +-0
 * for a finite x under an infinite scale, else within one e4m3 step of x / s (saturated at 448) */
static int code_ok(double x, float s, unsigned char q) {
    const double v = e4m3_value(q);
    if (isnan(s) || isnan(x)) return isnan(v);
    if (isinf(s)) return isinf(x) ? isnan(v) : v == 0;
    if (isnan(v)) return 0;
    double t = x / (double)s;
    if (t > 448) t = 448;
    if (t < -448) t = -448;
    const double a = fabs(t) < 0x1p-6 ? 0x1p-6 : fabs(t);
    const double step = ldexp(1.0, (int)floor(log2(a)) - 3); /* e4m3's spacing at |t| */
    return fabs(v - t) <= step;
}

/* n bytes of codes equal, a NaN code (S.1111.111) equal to either NaN: the recipe leaves a NaN's
 * sign unspecified (the CPU backend keeps the quotient's, the GPU's conversion gives +NaN) */
static int same_codes(const unsigned char *a, const unsigned char *b, size_t n) {
    for (size_t i = 0; i < n; ++i)
        if (a[i] != b[i] && !((a[i] & 0x7f) == 0x7f && (b[i] & 0x7f) == 0x7f)) return 0;
    return 1;
}

/* n scales bit for bit, NaN equal to any NaN (a NaN block's scale is NaN: the GPU's division
 * gives its canonical NaN, the host's keeps the operand's payload) */
static int same_scales(const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; ++i)
        if (!same_float(a[i], b[i])) return 0;
    return 1;
}

/* ---- one case ---------------------------------------------------------------------------------- */

typedef struct host_out {
    unsigned char *d, *dt;
    float *s, *st;
    size_t d_n, dt_n, s_n, st_n;
} host_out;

enum { DENSE = 0, PADDED = 1, ODD = 2 };

static void alloc_out(host_out *h, int row, int col, size_t d_n, size_t dt_n, size_t s_n,
                      size_t st_n) {
    h->d_n = row ? d_n : 0, h->dt_n = col ? dt_n : 0, h->s_n = row ? s_n : 0,
    h->st_n = col ? st_n : 0;
    h->d = malloc(h->d_n + 1), h->dt = malloc(h->dt_n + 1);
    h->s = malloc(4 * h->s_n + 4), h->st = malloc(4 * h->st_n + 4);
    memset(h->d, SENT8, h->d_n), memset(h->dt, SENT8, h->dt_n);
    for (size_t i = 0; i < h->s_n; ++i) h->s[i] = SENT_SCALE;
    for (size_t i = 0; i < h->st_n; ++i) h->st[i] = SENT_SCALE;
}
static void free_out(host_out *h) { free(h->d), free(h->dt), free(h->s), free(h->st); }

/* runs the backend on x (host memory) into h; returns the status */
static fastglu_status quantize(int cuda, const fastglu_fp8_recipe *r, fastglu_tensor x,
                               size_t x_bytes, host_out *h, int64_t d_rs, int64_t dt_rs,
                               int64_t s_ld, int64_t st_ld, int64_t R, int64_t C) {
    fastglu_fp8_out o;
    memset(&o, 0, sizeof o);
    o.data = (fastglu_tensor){h->d_n ? h->d : NULL, FASTGLU_DTYPE_FP8_E4M3, d_rs};
    o.scale = (fastglu_tensor){h->s_n ? h->s : NULL, FASTGLU_DTYPE_FP32, s_ld};
    o.data_t = (fastglu_tensor){h->dt_n ? h->dt : NULL, FASTGLU_DTYPE_FP8_E4M3, dt_rs};
    o.scale_t = (fastglu_tensor){h->st_n ? h->st : NULL, FASTGLU_DTYPE_FP32, st_ld};
    if (!cuda) return fastglu_quantize_fp8_cpu(r, x, &o, R, C);
#ifdef FP8_TEST_CUDA
    /* Past the end of x and of every output, MARGIN bytes: x's poison (0x7f bytes: fp32 and bf16
     * 3.4e38, fp16 NaN), which a read past x would carry into a scale; the outputs' sentinel, which
     * a write past them would change (margin_writes) */
    enum { MARGIN = 256 };
    void *dx, *dd = NULL, *ddt = NULL, *ds = NULL, *dst = NULL;
    check_cuda(cudaMalloc(&dx, x_bytes + MARGIN), "cudaMalloc");
    check_cuda(cudaMemcpy(dx, x.data, x_bytes, cudaMemcpyHostToDevice), "H2D");
    check_cuda(cudaMemset((char *)dx + x_bytes, 0x7f, MARGIN), "memset");
    void **dev[4] = {&dd, &ddt, &ds, &dst};
    void *host[4] = {h->d, h->dt, h->s, h->st};
    const size_t n[4] = {h->d_n, h->dt_n, 4 * h->s_n, 4 * h->st_n};
    for (int k = 0; k < 4; ++k)
        if (n[k]) {
            check_cuda(cudaMalloc(dev[k], n[k] + MARGIN), "cudaMalloc");
            check_cuda(cudaMemcpy(*dev[k], host[k], n[k], cudaMemcpyHostToDevice), "H2D");
            check_cuda(cudaMemset((char *)*dev[k] + n[k], SENT8, MARGIN), "memset");
        }
    /* the copies and memsets above run on the legacy default stream, which the non-blocking
     * stream of the kernel does not wait for */
    check_cuda(cudaDeviceSynchronize(), "uploads");
    fastglu_fp8_out od = o;
    od.data.data = dd, od.data_t.data = ddt, od.scale.data = ds, od.scale_t.data = dst;
    fastglu_tensor xd = x;
    xd.data = dx;
    const fastglu_status st = fastglu_quantize_fp8_cuda(r, xd, &od, R, C, stream);
    check_cuda(cudaStreamSynchronize(stream), "the kernel");
    unsigned char margin[MARGIN];
    for (int k = 0; k < 4; ++k)
        if (n[k]) {
            check_cuda(cudaMemcpy(host[k], *dev[k], n[k], cudaMemcpyDeviceToHost), "D2H");
            check_cuda(cudaMemcpy(margin, (char *)*dev[k] + n[k], MARGIN, cudaMemcpyDeviceToHost),
                       "D2H");
            for (int i = 0; i < MARGIN; ++i) margin_writes += margin[i] != SENT8;
            cudaFree(*dev[k]);
        }
    cudaFree(dx);
    return st;
#else
    (void)x_bytes;
    return FASTGLU_ERROR_NO_CUDA;
#endif
}

static float *scale_at(float *s, int mn, int64_t ld, int64_t i, int64_t b) {
    return mn ? s + b * ld + i : s + i * ld + b;
}

static void run_case(fastglu_dtype dt, int w128, int mn, int pow2, int row, int col, int64_t R,
                     int64_t C, int strides, int specials) {
    const size_t es = fastglu_dtype_size(dt);
    const int64_t pad = strides == DENSE ? 0 : strides == PADDED ? 16 : 1;
    const int64_t x_rs = C + (strides == PADDED ? 8 : pad), d_rs = C + pad, dt_rs = R + pad;
    const size_t x_bytes = (size_t)(R * x_rs) * es;
    void *x = malloc(x_bytes);
    memset(x, 0x7f, x_bytes); /* the row padding poison, as the bytes past x (quantize) */
    const double mag = ldexp(1.0, (int)(urand() * 20) - 10);
    for (int64_t i = 0; i < R; ++i)
        for (int64_t j = 0; j < C; ++j) {
            const double u = urand();
            float v = (float)((2 * urand() - 1) * mag);
            if (specials) {
                if ((i / 128 + j / 128) % 3 == 1) v = 0.0f; /* all-zero blocks */
                if (u < 0.0005)
                    v = NAN;
                else if (u < 0.001)
                    v = u < 0.00075 ? INFINITY : -INFINITY;
                else if (u > 0.999)
                    v = dt == FASTGLU_DTYPE_FP16 ? 65504.0f : 3.0e38f;
                else if (u > 0.998)
                    v = (float)(mag * 1e-6);
            }
            put(dt, x, i * x_rs + j, v);
        }
    const int64_t rb = (R + 127) / 128, cb = (C + 127) / 128;
    const int64_t s_rows = w128 ? rb : R, st_rows = w128 ? cb : C;
    const int64_t s_ld = mn ? s_rows + 3 : cb + 1, st_ld = mn ? st_rows + 3 : rb + 1;
    const size_t s_n = (size_t)(mn ? cb * s_ld : s_rows * s_ld);
    const size_t st_n = (size_t)(mn ? rb * st_ld : st_rows * st_ld);
    const fastglu_fp8_recipe r = {
        w128 ? FASTGLU_FP8_SCALING_BLOCK_128X128 : FASTGLU_FP8_SCALING_BLOCK_1X128,
        mn ? FASTGLU_FP8_SCALES_MN_MAJOR : FASTGLU_FP8_SCALES_ROW_MAJOR, pow2};
    const fastglu_tensor xt = {x, dt, x_rs};
    host_out h;
    alloc_out(&h, row, col, (size_t)(R * d_rs), (size_t)(C * dt_rs), s_n, st_n);
#ifdef FP8_TEST_CUDA
    const int cuda = 1;
#else
    const int cuda = 0;
#endif
    margin_writes = 0;
    fastglu_status st = quantize(cuda, &r, xt, x_bytes, &h, d_rs, dt_rs, s_ld, st_ld, R, C);
    char what[200];
    snprintf(what, sizeof what,
             "dtype %d %s %s pow2 %d row %d col %d R %lld C %lld strides %d specials %d", (int)dt,
             w128 ? "128x128" : "1x128", mn ? "mn_major" : "row_major", pow2, row, col,
             (long long)R, (long long)C, strides, specials);
    if (st != FASTGLU_SUCCESS) {
        FAIL("%s: status %d (%s)", what, (int)st, fastglu_last_error_message());
        free(x), free_out(&h);
        return;
    }
    cases++;
    /* every block's scale and codes against the float64 recipe */
    int bad_scale = 0, bad_code = 0;
    if (w128) {
        for (int64_t bi = 0; bi < rb; ++bi)
            for (int64_t bj = 0; bj < cb; ++bj) {
                double a = 0;
                for (int64_t i = 128 * bi; i < R && i < 128 * bi + 128; ++i)
                    for (int64_t j = 128 * bj; j < C && j < 128 * bj + 128; ++j) {
                        const double v = fabs(get(dt, x, i * x_rs + j));
                        if (isnan(v))
                            a = NAN;
                        else if (v > a)
                            a = v;
                    }
                const float s = ref_scale(a, pow2);
                if (row && !same_float(*scale_at(h.s, mn, s_ld, bi, bj), s)) bad_scale++;
                if (col && !same_float(*scale_at(h.st, mn, st_ld, bj, bi), s)) bad_scale++;
                for (int64_t i = 128 * bi; i < R && i < 128 * bi + 128; ++i)
                    for (int64_t j = 128 * bj; j < C && j < 128 * bj + 128; ++j) {
                        const double v = get(dt, x, i * x_rs + j);
                        if (row && !code_ok(v, s, h.d[i * d_rs + j])) bad_code++;
                        if (col && !code_ok(v, s, h.dt[j * dt_rs + i])) bad_code++;
                        if (row && col && h.d[i * d_rs + j] != h.dt[j * dt_rs + i]) bad_code++;
                    }
            }
    } else {
        if (row)
            for (int64_t i = 0; i < R; ++i)
                for (int64_t b = 0; b < cb; ++b) {
                    double a = 0;
                    for (int64_t j = 128 * b; j < C && j < 128 * b + 128; ++j) {
                        const double v = fabs(get(dt, x, i * x_rs + j));
                        if (isnan(v))
                            a = NAN;
                        else if (v > a)
                            a = v;
                    }
                    const float s = ref_scale(a, pow2);
                    if (!same_float(*scale_at(h.s, mn, s_ld, i, b), s)) bad_scale++;
                    for (int64_t j = 128 * b; j < C && j < 128 * b + 128; ++j)
                        if (!code_ok(get(dt, x, i * x_rs + j), s, h.d[i * d_rs + j])) bad_code++;
                }
        if (col)
            for (int64_t j = 0; j < C; ++j)
                for (int64_t b = 0; b < rb; ++b) {
                    double a = 0;
                    for (int64_t i = 128 * b; i < R && i < 128 * b + 128; ++i) {
                        const double v = fabs(get(dt, x, i * x_rs + j));
                        if (isnan(v))
                            a = NAN;
                        else if (v > a)
                            a = v;
                    }
                    const float s = ref_scale(a, pow2);
                    if (!same_float(*scale_at(h.st, mn, st_ld, j, b), s)) bad_scale++;
                    for (int64_t i = 128 * b; i < R && i < 128 * b + 128; ++i)
                        if (!code_ok(get(dt, x, i * x_rs + j), s, h.dt[j * dt_rs + i])) bad_code++;
                }
    }
    /* the padding: every byte outside the outputs' elements still the sentinel */
    int bad_pad = 0;
    for (int64_t i = 0; i < (row ? R : 0); ++i)
        for (int64_t j = C; j < d_rs && i * d_rs + j < (int64_t)h.d_n; ++j)
            bad_pad += h.d[i * d_rs + j] != SENT8;
    for (int64_t j = 0; j < (col ? C : 0); ++j)
        for (int64_t i = R; i < dt_rs && j * dt_rs + i < (int64_t)h.dt_n; ++i)
            bad_pad += h.dt[j * dt_rs + i] != SENT8;
    for (size_t k = 0; k < h.s_n; ++k) {
        const int64_t in = (int64_t)k % s_ld; /* the position in its row of ld floats */
        const int used = mn ? in < s_rows : in < cb;
        if (!used) bad_pad += h.s[k] != SENT_SCALE;
    }
    for (size_t k = 0; k < h.st_n; ++k) {
        const int64_t in = (int64_t)k % st_ld;
        const int used = mn ? in < st_rows : in < rb;
        if (!used) bad_pad += h.st[k] != SENT_SCALE;
    }
    if (bad_scale || bad_code || bad_pad || margin_writes)
        FAIL("%s: %d scales, %d codes off the recipe, %d padding bytes written, %d bytes past the "
             "outputs",
             what, bad_scale, bad_code, bad_pad, margin_writes);
#ifdef FP8_TEST_CUDA
    /* the CPU backend's bits */
    host_out c;
    alloc_out(&c, row, col, h.d_n, h.dt_n, h.s_n, h.st_n);
    st = quantize(0, &r, xt, x_bytes, &c, d_rs, dt_rs, s_ld, st_ld, R, C);
    if (st != FASTGLU_SUCCESS || !same_codes(c.d, h.d, h.d_n) || !same_codes(c.dt, h.dt, h.dt_n) ||
        !same_scales(c.s, h.s, h.s_n) || !same_scales(c.st, h.st, h.st_n))
        FAIL("%s: the CUDA backend's bits differ from the CPU backend's", what);
    free_out(&c);
#endif
    free(x), free_out(&h);
}

/* ---- bad input ------------------------------------------------------------------------------- */

static void expect_error(const char *what, fastglu_status want, const fastglu_fp8_recipe *r,
                         fastglu_tensor x, const fastglu_fp8_out *o, int64_t R, int64_t C,
                         const unsigned char *d, size_t n) {
    fastglu_status st;
#ifdef FP8_TEST_CUDA
    st = fastglu_quantize_fp8_cuda(r, x, o, R, C, stream); /* refused before any device access */
#else
    st = fastglu_quantize_fp8_cpu(r, x, o, R, C);
#endif
    if (st != want)
        FAIL("%s: status %d, expected %d", what, (int)st, (int)want);
    else if (!*fastglu_last_error_message())
        FAIL("%s: no message", what);
    for (size_t i = 0; i < n; ++i)
        if (d[i] != SENT8) {
            FAIL("%s: a refused call wrote data", what);
            break;
        }
}

static void bad_inputs(void) {
    /* host pointers: every call below is refused by the validation, before any access */
    static uint16_t x[64 * 64];
    static _Alignas(16) unsigned char d[64 * 64 + 64];
    static float s[128];
    for (int i = 0; i < 64 * 64; ++i) x[i] = f32_to_bf16((float)i);
    memset(d, SENT8, sizeof d);
    const fastglu_fp8_recipe ok = {FASTGLU_FP8_SCALING_BLOCK_1X128, FASTGLU_FP8_SCALES_ROW_MAJOR,
                                   0};
    const fastglu_tensor xt = {x, FASTGLU_DTYPE_BF16, 64};
    fastglu_fp8_out o;
    memset(&o, 0, sizeof o);
    o.data = (fastglu_tensor){d, FASTGLU_DTYPE_FP8_E4M3, 64};
    o.scale = (fastglu_tensor){s, FASTGLU_DTYPE_FP32, 1};
    const size_t n = sizeof d;
    expect_error("NULL recipe", FASTGLU_ERROR_INVALID_VALUE, NULL, xt, &o, 64, 64, d, n);
    expect_error("NULL out", FASTGLU_ERROR_INVALID_VALUE, &ok, xt, NULL, 64, 64, d, n);
    fastglu_fp8_recipe r = ok;
    r.scaling = FASTGLU_FP8_SCALING_TENSOR;
    expect_error("per-tensor scaling", FASTGLU_ERROR_INVALID_VALUE, &r, xt, &o, 64, 64, d, n);
    r = ok, r.scale_layout = (fastglu_fp8_scale_layout)5;
    expect_error("scale layout 5", FASTGLU_ERROR_INVALID_VALUE, &r, xt, &o, 64, 64, d, n);
    expect_error("negative rows", FASTGLU_ERROR_INVALID_VALUE, &ok, xt, &o, -1, 64, d, n);
    expect_error("rows = 2^63 - 1", FASTGLU_ERROR_INVALID_VALUE, &ok, xt, &o, INT64_MAX, 1, d, n);
    expect_error("cols = 2^62", FASTGLU_ERROR_INVALID_VALUE, &ok, xt, &o, 1, INT64_MAX / 2 + 1, d,
                 n);
    fastglu_tensor xb = xt;
    xb.dtype = FASTGLU_DTYPE_FP8_E4M3;
    expect_error("fp8 input", FASTGLU_ERROR_UNSUPPORTED_DTYPE, &ok, xb, &o, 64, 64, d, n);
    xb = xt, xb.data = NULL;
    expect_error("NULL x", FASTGLU_ERROR_INVALID_VALUE, &ok, xb, &o, 64, 64, d, n);
    xb = xt, xb.row_stride = -64;
    expect_error("negative x stride", FASTGLU_ERROR_INVALID_VALUE, &ok, xb, &o, 64, 64, d, n);
    fastglu_fp8_out ob = o;
    ob.data.data = NULL, ob.scale.data = NULL;
    expect_error("no output", FASTGLU_ERROR_INVALID_VALUE, &ok, xt, &ob, 64, 64, d, n);
    ob = o, ob.scale.data = NULL;
    expect_error("data without scale", FASTGLU_ERROR_INVALID_VALUE, &ok, xt, &ob, 64, 64, d, n);
    ob = o, ob.data.data = NULL;
    expect_error("scale without data", FASTGLU_ERROR_INVALID_VALUE, &ok, xt, &ob, 64, 64, d, n);
    ob = o, ob.data.row_stride = 63;
    expect_error("data rows overlapping", FASTGLU_ERROR_INVALID_VALUE, &ok, xt, &ob, 64, 64, d, n);
    ob = o, ob.data.dtype = FASTGLU_DTYPE_BF16;
    expect_error("bf16 data", FASTGLU_ERROR_UNSUPPORTED_DTYPE, &ok, xt, &ob, 64, 64, d, n);
    ob = o, ob.scale.data = d + 128; /* the scales inside data's third row */
    expect_error("scale overlapping data", FASTGLU_ERROR_INVALID_VALUE, &ok, xt, &ob, 64, 64, d, n);
    ob = o, ob.data.data = (unsigned char *)x + 8; /* the codes over x */
    expect_error("data overlapping x", FASTGLU_ERROR_INVALID_VALUE, &ok, xt, &ob, 64, 64, d, n);
    ob = o, ob.data_t = (fastglu_tensor){d, FASTGLU_DTYPE_FP8_E4M3, 64};
    ob.scale_t = (fastglu_tensor){s + 64, FASTGLU_DTYPE_FP32, 1};
    expect_error("data_t over data", FASTGLU_ERROR_INVALID_VALUE, &ok, xt, &ob, 64, 64, d, n);
    ob = o, ob.data_t = (fastglu_tensor){d, FASTGLU_DTYPE_FP8_E4M3, 64};
    ob.data.data = NULL, ob.scale.data = NULL;
    expect_error("data_t without scale_t", FASTGLU_ERROR_INVALID_VALUE, &ok, xt, &ob, 64, 64, d, n);
}

int main(void) {
#ifdef FP8_TEST_CUDA
    if (!fastglu_cuda_available()) {
        printf("no usable CUDA device: skipped\n");
        return 77;
    }
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
#endif
    seed_rng();
    fastglu_set_fp8_saturate(1);
    static const fastglu_dtype dts[] = {FASTGLU_DTYPE_BF16, FASTGLU_DTYPE_FP16, FASTGLU_DTYPE_FP32};
    static const int64_t Rs[] = {1, 3, 257}, Cs[] = {1, 3, 1408, 2880, 3420, 5632};
    int k = 0;
    for (int w128 = 0; w128 < 2; ++w128)
        for (int di = 0; di < 3; ++di)
            for (int ri = 0; ri < 3; ++ri)
                for (int ci = 0; ci < 6; ++ci, ++k) {
                    const int outs = 1 + k % 3, strides = (k / 3) % 3;
                    run_case(dts[di], w128, k % 2, (k / 5) % 2, outs & 1, outs >> 1, Rs[ri], Cs[ci],
                             strides, (k / 7) % 2);
                }
    /* tokens 8193 (a last tile of one row), both copies, every dtype */
    for (int di = 0; di < 3; ++di)
        for (int w128 = 0; w128 < 2; ++w128) {
            run_case(dts[di], w128, 1, 0, 1, 1, 8193, 136, DENSE, 0);
            run_case(dts[di], w128, 0, 1, 1, 1, 8193, 3, ODD, 1);
        }
    /* the 16-byte paths at a realistic width: x contiguous and 16-byte-padded rows */
    run_case(FASTGLU_DTYPE_BF16, 0, 1, 0, 1, 1, 1024, 4096, DENSE, 0);
    run_case(FASTGLU_DTYPE_BF16, 0, 1, 0, 1, 1, 1000, 2880, PADDED, 1);
    run_case(FASTGLU_DTYPE_BF16, 1, 0, 0, 1, 1, 1024, 4096, DENSE, 0);
    bad_inputs();
    printf("quantize_fp8 (%s): %d cases, %d failures\n",
#ifdef FP8_TEST_CUDA
           "cuda",
#else
           "cpu",
#endif
           cases, failures);
    return failures ? 1 : 0;
}
