/*
 * _C.c — the CPython binding of libfastglu: a thin METH_FASTCALL module that passes integers
 * (pointers, sizes, strides, the stream handle) straight to the C API. It knows nothing of torch;
 * python/fastglu/ops.py extracts those integers from tensors. Chosen over ctypes because a
 * FASTCALL function with integer arguments costs a fraction of a microsecond per call, where
 * ctypes argument conversion costs several.
 *
 * The gated-linear-unit family (glu_fwd, glu_bwd, glu_bwd_workspace_bytes) takes its
 * fastglu_glu_params as six leading arguments (activation and layout codes, four floats);
 * python/fastglu/glu.py builds them from tensors and options.
 *
 * Every function raises with the library's message when the C call fails: ValueError for an
 * invalid argument (e.g. an output overlapping an input), TypeError for a dtype, RuntimeError for
 * CUDA errors. The Python layer rejects most bad tensors before this point.
 */
#define PY_SSIZE_T_CLEAN
/* CPython's limited API, version 3.10 (the first with METH_FASTCALL in it): the module is ABI-stable,
 * one abi3 wheel for every CPython >= 3.10 (pyproject.toml: wheel.py-api = "cp310"). */
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030A0000
#endif
#include <Python.h>
#include <string.h>

#include "fastglu.h"

static int get_i64(PyObject *o, int64_t *out) {
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) return 0;
    *out = (int64_t)v;
    return 1;
}

/* The dtype code must name a fastglu_dtype no greater than max (a wider integer must not wrap onto
 * one): compute types up to BF16; the glu backward's saved input also FP8_E4M3. */
static int get_dtype_upto(PyObject *o, int64_t *out, int64_t max) {
    if (!get_i64(o, out)) return 0;
    if (*out < FASTGLU_DTYPE_FP32 || *out > max) {
        PyErr_Format(PyExc_TypeError, "fastglu: dtype code %lld is not a fastglu_dtype",
                     (long long)*out);
        return 0;
    }
    return 1;
}

static int get_dtype(PyObject *o, int64_t *out) {
    return get_dtype_upto(o, out, FASTGLU_DTYPE_BF16);
}

static int get_f32(PyObject *o, float *out) {
    double v = PyFloat_AsDouble(o);
    if (v == -1.0 && PyErr_Occurred()) return 0;
    *out = (float)v;
    return 1;
}

static int get_size(PyObject *o, size_t *out) {
    size_t v = PyLong_AsSize_t(o);
    if (v == (size_t)-1 && PyErr_Occurred()) return 0;
    *out = v;
    return 1;
}

/* params from (activation, layout, clamp_value, glu_linear_offset, gate_multiplier,
 * down_multiplier); the codes must name enum values (the C call checks the floats). */
static int get_params(PyObject *const *a, fastglu_glu_params *p) {
    int64_t act, layout;
    if (!get_i64(a[0], &act) || !get_i64(a[1], &layout)) return 0;
    if (act < FASTGLU_ACT_SILU || act > FASTGLU_ACT_QUICK_GELU) {
        PyErr_Format(PyExc_ValueError, "fastglu: activation code %lld is not a fastglu_activation",
                     (long long)act);
        return 0;
    }
    if (layout < FASTGLU_LAYOUT_SPLIT || layout > FASTGLU_LAYOUT_INTERLEAVED) {
        PyErr_Format(PyExc_ValueError, "fastglu: layout code %lld is not a fastglu_layout",
                     (long long)layout);
        return 0;
    }
    *p = fastglu_glu_params_default((fastglu_activation)act);
    p->layout = (fastglu_layout)layout;
    return get_f32(a[2], &p->clamp_value) && get_f32(a[3], &p->glu_linear_offset) &&
           get_f32(a[4], &p->gate_multiplier) && get_f32(a[5], &p->down_multiplier);
}

static int get_ptr(PyObject *o, void **out) {
    void *p = PyLong_AsVoidPtr(o);
    if (p == NULL && PyErr_Occurred()) return 0;
    *out = p;
    return 1;
}

/* Invalid arguments raise ValueError, an unsupported dtype TypeError, CUDA trouble RuntimeError. */
static PyObject *status_result(fastglu_status st) {
    if (st == FASTGLU_SUCCESS) Py_RETURN_NONE;
    PyObject *type = st == FASTGLU_ERROR_INVALID_VALUE       ? PyExc_ValueError
                     : st == FASTGLU_ERROR_UNSUPPORTED_DTYPE ? PyExc_TypeError
                                                             : PyExc_RuntimeError;
    PyErr_Format(type, "fastglu: %s (%s)", fastglu_last_error_message(), fastglu_strerror(st));
    return NULL;
}

#define CHECK_NARGS(name, want)                                                                    \
    if (nargs != (want)) {                                                                         \
        PyErr_Format(PyExc_TypeError, name "() takes %d arguments (%zd given)", (want), nargs);    \
        return NULL;                                                                               \
    }

/* swiglu_fwd(on_cuda, dtype, input, input_row_stride, output, output_row_stride, tokens, F,
 *            stream) */
static PyObject *py_swiglu_fwd(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    int64_t on_cuda, dtype, in_rs, out_rs, tokens, F;
    void *in, *out, *stream;
    (void)self;
    CHECK_NARGS("swiglu_fwd", 9);
    if (!get_i64(args[0], &on_cuda) || !get_dtype(args[1], &dtype) || !get_ptr(args[2], &in) ||
        !get_i64(args[3], &in_rs) || !get_ptr(args[4], &out) || !get_i64(args[5], &out_rs) ||
        !get_i64(args[6], &tokens) || !get_i64(args[7], &F) || !get_ptr(args[8], &stream))
        return NULL;
    fastglu_status st;
    if (on_cuda) {
        st = fastglu_swiglu_fwd_cuda(in, in_rs, out, out_rs, tokens, F, (fastglu_dtype)dtype,
                                     stream);
    } else {
        Py_BEGIN_ALLOW_THREADS st =
            fastglu_swiglu_fwd_cpu(in, in_rs, out, out_rs, tokens, F, (fastglu_dtype)dtype);
        Py_END_ALLOW_THREADS
    }
    return status_result(st);
}

/* swiglu_bwd(on_cuda, dtype, dy, dy_row_stride, dy_col_stride, input, input_row_stride, dinput,
 *            dinput_row_stride, tokens, F, stream) */
static PyObject *py_swiglu_bwd(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    int64_t on_cuda, dtype, dy_rs, dy_cs, in_rs, din_rs, tokens, F;
    void *dy, *in, *din, *stream;
    (void)self;
    CHECK_NARGS("swiglu_bwd", 12);
    if (!get_i64(args[0], &on_cuda) || !get_dtype(args[1], &dtype) || !get_ptr(args[2], &dy) ||
        !get_i64(args[3], &dy_rs) || !get_i64(args[4], &dy_cs) || !get_ptr(args[5], &in) ||
        !get_i64(args[6], &in_rs) || !get_ptr(args[7], &din) || !get_i64(args[8], &din_rs) ||
        !get_i64(args[9], &tokens) || !get_i64(args[10], &F) || !get_ptr(args[11], &stream))
        return NULL;
    fastglu_status st;
    if (on_cuda) {
        st = fastglu_swiglu_bwd_cuda(dy, dy_rs, dy_cs, in, in_rs, din, din_rs, tokens, F,
                                     (fastglu_dtype)dtype, stream);
    } else {
        Py_BEGIN_ALLOW_THREADS st = fastglu_swiglu_bwd_cpu(dy, dy_rs, dy_cs, in, in_rs, din, din_rs,
                                                           tokens, F, (fastglu_dtype)dtype);
        Py_END_ALLOW_THREADS
    }
    return status_result(st);
}

/* glu_fwd(on_cuda, activation, layout, clamp_value, glu_linear_offset, gate_multiplier,
 *         down_multiplier, gate, gate_row_stride, up, up_row_stride, bias, weights, weights_dtype,
 *         weights_stride, output, output_row_stride, saved_fp8, saved_fp8_row_stride, tokens, F,
 *         dtype, stream)
 * Pointers as integers, 0 for NULL (up with the interleaved layout; no bias; no weights; no fp8
 * copy of the operands). */
static fastglu_tensor make_tensor(void *data, int64_t dtype, int64_t row_stride) {
    fastglu_tensor t;
    t.data = data, t.dtype = (fastglu_dtype)dtype, t.row_stride = row_stride;
    return t;
}

static PyObject *py_glu_fwd(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    fastglu_glu_params p;
    int64_t on_cuda, g_rs, u_rs, w_dtype, w_stride, out_rs, s8_rs, tokens, F, dtype;
    void *g, *u, *bias, *w, *out, *s8, *stream;
    (void)self;
    CHECK_NARGS("glu_fwd", 23);
    if (!get_i64(args[0], &on_cuda) || !get_params(args + 1, &p) || !get_ptr(args[7], &g) ||
        !get_i64(args[8], &g_rs) || !get_ptr(args[9], &u) || !get_i64(args[10], &u_rs) ||
        !get_ptr(args[11], &bias) || !get_ptr(args[12], &w) || !get_dtype(args[13], &w_dtype) ||
        !get_i64(args[14], &w_stride) || !get_ptr(args[15], &out) || !get_i64(args[16], &out_rs) ||
        !get_ptr(args[17], &s8) || !get_i64(args[18], &s8_rs) || !get_i64(args[19], &tokens) ||
        !get_i64(args[20], &F) || !get_dtype(args[21], &dtype) || !get_ptr(args[22], &stream))
        return NULL;
    const fastglu_dtype dt = (fastglu_dtype)dtype;
    const fastglu_glu_operands o = {make_tensor(g, dt, g_rs),
                                    make_tensor(u, dt, u_rs),
                                    make_tensor(bias, dt, 1),
                                    make_tensor(w, w_dtype, w_stride),
                                    make_tensor(NULL, FASTGLU_DTYPE_FP32, 0),
                                    0};
    const fastglu_tensor output = make_tensor(out, dt, out_rs);
    const fastglu_tensor saved_fp8 = make_tensor(s8, FASTGLU_DTYPE_FP8_E4M3, s8_rs);
    fastglu_status st;
    if (on_cuda) {
        st = fastglu_glu_fwd_cuda(&p, &o, output, saved_fp8, tokens, F, stream);
    } else {
        Py_BEGIN_ALLOW_THREADS st = fastglu_glu_fwd_cpu(&p, &o, output, saved_fp8, tokens, F);
        Py_END_ALLOW_THREADS
    }
    return status_result(st);
}

/* glu_bwd(on_cuda, activation, layout, clamp_value, glu_linear_offset, gate_multiplier,
 *         down_multiplier, dy, dy_row_stride, dy_col_stride, gate, gate_row_stride, up,
 *         up_row_stride, input_dtype, input_scale_inv, input_scale_stride, scale_1x128, bias,
 *         weights, weights_dtype, weights_stride, d_gate, d_gate_row_stride, d_up, d_up_row_stride, dbias,
 *         dweights, workspace, workspace_bytes, tokens, F, dtype, stream) */
static PyObject *py_glu_bwd(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    fastglu_glu_params p;
    int64_t on_cuda, dy_rs, dy_cs, g_rs, u_rs, in_dtype, sc_stride, sc_1x128, w_dtype, w_stride,
        dg_rs, du_rs, tokens, F, dtype;
    void *dy, *g, *u, *scale_inv, *bias, *w, *dg, *du, *dbias, *dw, *ws, *stream;
    size_t ws_bytes;
    (void)self;
    CHECK_NARGS("glu_bwd", 34);
    if (!get_i64(args[0], &on_cuda) || !get_params(args + 1, &p) || !get_ptr(args[7], &dy) ||
        !get_i64(args[8], &dy_rs) || !get_i64(args[9], &dy_cs) || !get_ptr(args[10], &g) ||
        !get_i64(args[11], &g_rs) || !get_ptr(args[12], &u) || !get_i64(args[13], &u_rs) ||
        !get_dtype_upto(args[14], &in_dtype, FASTGLU_DTYPE_FP8_E4M3) ||
        !get_ptr(args[15], &scale_inv) || !get_i64(args[16], &sc_stride) ||
        !get_i64(args[17], &sc_1x128) || !get_ptr(args[18], &bias) || !get_ptr(args[19], &w) ||
        !get_dtype(args[20], &w_dtype) || !get_i64(args[21], &w_stride) ||
        !get_ptr(args[22], &dg) || !get_i64(args[23], &dg_rs) || !get_ptr(args[24], &du) ||
        !get_i64(args[25], &du_rs) || !get_ptr(args[26], &dbias) || !get_ptr(args[27], &dw) ||
        !get_ptr(args[28], &ws) || !get_size(args[29], &ws_bytes) || !get_i64(args[30], &tokens) ||
        !get_i64(args[31], &F) || !get_dtype(args[32], &dtype) || !get_ptr(args[33], &stream))
        return NULL;
    const fastglu_dtype dt = (fastglu_dtype)dtype, in_dt = (fastglu_dtype)in_dtype;
    const fastglu_dtype wdt = (fastglu_dtype)w_dtype;
    const fastglu_glu_operands o = {make_tensor(g, in_dt, g_rs),
                                    make_tensor(u, in_dt, u_rs),
                                    make_tensor(bias, dt, 1),
                                    make_tensor(w, wdt, w_stride),
                                    make_tensor(scale_inv, FASTGLU_DTYPE_FP32, sc_stride),
                                    (int)sc_1x128};
    const fastglu_glu_grads grads = {make_tensor(dg, dt, dg_rs), make_tensor(du, dt, du_rs),
                                     make_tensor(dbias, dt, 1), make_tensor(dw, wdt, 1)};
    const fastglu_tensor dyt = make_tensor(dy, dt, dy_rs);
    const fastglu_workspace workspace = {ws, ws_bytes};
    fastglu_status st;
    if (on_cuda) {
        st = fastglu_glu_bwd_cuda(&p, dyt, dy_cs, &o, &grads, workspace, tokens, F, stream);
    } else {
        Py_BEGIN_ALLOW_THREADS st =
            fastglu_glu_bwd_cpu(&p, dyt, dy_cs, &o, &grads, workspace, tokens, F);
        Py_END_ALLOW_THREADS
    }
    return status_result(st);
}

/* glu_bwd_workspace_bytes(tokens, F, want_dbias, want_dweights) */
static PyObject *py_glu_bwd_workspace_bytes(PyObject *self, PyObject *const *args,
                                            Py_ssize_t nargs) {
    int64_t tokens, F, want_db, want_dw;
    (void)self;
    CHECK_NARGS("glu_bwd_workspace_bytes", 4);
    if (!get_i64(args[0], &tokens) || !get_i64(args[1], &F) || !get_i64(args[2], &want_db) ||
        !get_i64(args[3], &want_dw))
        return NULL;
    return PyLong_FromSize_t(
        fastglu_glu_bwd_workspace_bytes(tokens, F, want_db != 0, want_dw != 0));
}

/* ---- the linear layers (fastglu_linear_*, fastglu_linear_glu_fwd_*) ------------------------- */

/* linear(on_cuda, dtype, x, x_row_stride, w, w_row_stride, bias, out, out_row_stride, tokens,
 *        in_features, out_features, stream) */
static PyObject *py_linear(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    int64_t on_cuda, dtype, x_rs, w_rs, out_rs, tokens, k, n;
    void *x, *w, *bias, *out, *stream;
    (void)self;
    CHECK_NARGS("linear", 13);
    if (!get_i64(args[0], &on_cuda) || !get_dtype(args[1], &dtype) || !get_ptr(args[2], &x) ||
        !get_i64(args[3], &x_rs) || !get_ptr(args[4], &w) || !get_i64(args[5], &w_rs) ||
        !get_ptr(args[6], &bias) || !get_ptr(args[7], &out) || !get_i64(args[8], &out_rs) ||
        !get_i64(args[9], &tokens) || !get_i64(args[10], &k) || !get_i64(args[11], &n) ||
        !get_ptr(args[12], &stream))
        return NULL;
    const fastglu_tensor tx = make_tensor(x, dtype, x_rs), tw = make_tensor(w, dtype, w_rs),
                         tb = make_tensor(bias, dtype, 1), to = make_tensor(out, dtype, out_rs);
    fastglu_status st;
    if (on_cuda) {
        st = fastglu_linear_cuda(tx, tw, tb, to, tokens, k, n, stream);
    } else {
        Py_BEGIN_ALLOW_THREADS st = fastglu_linear_cpu(tx, tw, tb, to, tokens, k, n);
        Py_END_ALLOW_THREADS
    }
    return status_result(st);
}

/* linear_glu_fwd(on_cuda, activation, layout, clamp_value, glu_linear_offset, gate_multiplier,
 *                down_multiplier, dtype, x, x_row_stride, w1, w1_row_stride, bias, weights,
 *                weights_dtype, weights_stride, h, h_row_stride, y, y_row_stride, tokens, hidden,
 *                F, stream) */
static PyObject *py_linear_glu_fwd(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    fastglu_glu_params p;
    int64_t on_cuda, dtype, x_rs, w_rs, w_dtype, w_stride, h_rs, y_rs, tokens, hidden, F;
    void *x, *w1, *bias, *wts, *h, *y, *stream;
    (void)self;
    CHECK_NARGS("linear_glu_fwd", 24);
    if (!get_i64(args[0], &on_cuda) || !get_params(args + 1, &p) || !get_dtype(args[7], &dtype) ||
        !get_ptr(args[8], &x) || !get_i64(args[9], &x_rs) || !get_ptr(args[10], &w1) ||
        !get_i64(args[11], &w_rs) || !get_ptr(args[12], &bias) || !get_ptr(args[13], &wts) ||
        !get_dtype(args[14], &w_dtype) || !get_i64(args[15], &w_stride) || !get_ptr(args[16], &h) ||
        !get_i64(args[17], &h_rs) || !get_ptr(args[18], &y) || !get_i64(args[19], &y_rs) ||
        !get_i64(args[20], &tokens) || !get_i64(args[21], &hidden) || !get_i64(args[22], &F) ||
        !get_ptr(args[23], &stream))
        return NULL;
    const fastglu_tensor tx = make_tensor(x, dtype, x_rs), tw = make_tensor(w1, dtype, w_rs),
                         tb = make_tensor(bias, dtype, 1),
                         twt = make_tensor(wts, w_dtype, w_stride),
                         th = make_tensor(h, dtype, h_rs), ty = make_tensor(y, dtype, y_rs);
    fastglu_status st;
    if (on_cuda) {
        st = fastglu_linear_glu_fwd_cuda(&p, tx, tw, tb, twt, th, ty, tokens, hidden, F, stream);
    } else {
        Py_BEGIN_ALLOW_THREADS st =
            fastglu_linear_glu_fwd_cpu(&p, tx, tw, tb, twt, th, ty, tokens, hidden, F);
        Py_END_ALLOW_THREADS
    }
    return status_result(st);
}

/* linear_dglu_bwd(on_cuda, activation, layout, clamp_value, glu_linear_offset, gate_multiplier,
 *                 down_multiplier, dtype, d_out, d_out_row_stride, w2, w2_row_stride, h,
 *                 h_row_stride, weights, weights_dtype, weights_stride, dh, dh_row_stride, y,
 *                 y_row_stride, dweights, dweights_stride, tokens, hidden, F, stream) */
static PyObject *py_linear_dglu_bwd(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    fastglu_glu_params p;
    int64_t on_cuda, dtype, do_rs, w2_rs, h_rs, w_dtype, w_stride, dh_rs, y_rs, dw_stride, tokens,
        hidden, F;
    void *d_out, *w2, *h, *wts, *dh, *y, *dw, *stream;
    (void)self;
    CHECK_NARGS("linear_dglu_bwd", 27);
    if (!get_i64(args[0], &on_cuda) || !get_params(args + 1, &p) || !get_dtype(args[7], &dtype) ||
        !get_ptr(args[8], &d_out) || !get_i64(args[9], &do_rs) || !get_ptr(args[10], &w2) ||
        !get_i64(args[11], &w2_rs) || !get_ptr(args[12], &h) || !get_i64(args[13], &h_rs) ||
        !get_ptr(args[14], &wts) || !get_dtype(args[15], &w_dtype) ||
        !get_i64(args[16], &w_stride) || !get_ptr(args[17], &dh) || !get_i64(args[18], &dh_rs) ||
        !get_ptr(args[19], &y) || !get_i64(args[20], &y_rs) || !get_ptr(args[21], &dw) ||
        !get_i64(args[22], &dw_stride) || !get_i64(args[23], &tokens) ||
        !get_i64(args[24], &hidden) || !get_i64(args[25], &F) || !get_ptr(args[26], &stream))
        return NULL;
    const fastglu_tensor tdo = make_tensor(d_out, dtype, do_rs),
                         tw2 = make_tensor(w2, dtype, w2_rs), th = make_tensor(h, dtype, h_rs),
                         twt = make_tensor(wts, w_dtype, w_stride),
                         tdh = make_tensor(dh, dtype, dh_rs), ty = make_tensor(y, dtype, y_rs),
                         tdw = make_tensor(dw, w_dtype, dw_stride);
    fastglu_status st;
    if (on_cuda) {
        st = fastglu_linear_dglu_bwd_cuda(&p, tdo, tw2, th, twt, tdh, ty, tdw, tokens, hidden, F,
                                          stream);
    } else {
        Py_BEGIN_ALLOW_THREADS st =
            fastglu_linear_dglu_bwd_cpu(&p, tdo, tw2, th, twt, tdh, ty, tdw, tokens, hidden, F);
        Py_END_ALLOW_THREADS
    }
    return status_result(st);
}

static PyObject *py_set_fp8_saturate(PyObject *self, PyObject *arg) {
    (void)self;
    const int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    fastglu_set_fp8_saturate(on);
    Py_RETURN_NONE;
}

static PyObject *py_fp8_saturate(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return PyBool_FromLong(fastglu_fp8_saturate());
}

static PyObject *py_cuda_available(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return PyBool_FromLong(fastglu_cuda_available());
}

static PyObject *py_cuda_built(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return PyBool_FromLong(fastglu_cuda_built());
}

static PyObject *py_version(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return PyLong_FromLong(fastglu_version());
}

static PyMethodDef methods[] = {
    {"swiglu_fwd", (PyCFunction)(void (*)(void))py_swiglu_fwd, METH_FASTCALL,
     "swiglu_fwd(on_cuda, dtype, input, input_row_stride, output, output_row_stride, tokens, F, "
     "stream): fastglu_swiglu_fwd_{cpu,cuda}; pointers and stream as integers."},
    {"swiglu_bwd", (PyCFunction)(void (*)(void))py_swiglu_bwd, METH_FASTCALL,
     "swiglu_bwd(on_cuda, dtype, dy, dy_row_stride, dy_col_stride, input, input_row_stride, "
     "dinput, dinput_row_stride, tokens, F, stream): fastglu_swiglu_bwd_{cpu,cuda}."},
    {"glu_fwd", (PyCFunction)(void (*)(void))py_glu_fwd, METH_FASTCALL,
     "glu_fwd(on_cuda, activation, layout, clamp_value, glu_linear_offset, gate_multiplier, "
     "down_multiplier, gate, gate_row_stride, up, up_row_stride, bias, weights, weights_dtype, "
     "weights_stride, output, output_row_stride, saved_fp8, saved_fp8_row_stride, tokens, F, "
     "dtype, stream): fastglu_glu_fwd_{cpu,cuda}; pointers as integers, 0 for NULL."},
    {"glu_bwd", (PyCFunction)(void (*)(void))py_glu_bwd, METH_FASTCALL,
     "glu_bwd(on_cuda, activation, layout, clamp_value, glu_linear_offset, gate_multiplier, "
     "down_multiplier, dy, dy_row_stride, dy_col_stride, gate, gate_row_stride, up, up_row_stride, "
     "input_dtype, input_scale_inv, input_scale_stride, scale_1x128, bias, weights, weights_dtype, "
     "weights_stride, d_gate, d_gate_row_stride, d_up, d_up_row_stride, dbias, dweights, "
     "workspace, "
     "workspace_bytes, tokens, F, dtype, stream): fastglu_glu_bwd_{cpu,cuda}."},
    {"glu_bwd_workspace_bytes", (PyCFunction)(void (*)(void))py_glu_bwd_workspace_bytes,
     METH_FASTCALL,
     "glu_bwd_workspace_bytes(tokens, F, want_dbias, want_dweights): "
     "fastglu_glu_bwd_workspace_bytes."},
    {"linear", (PyCFunction)(void (*)(void))py_linear, METH_FASTCALL,
     "linear(on_cuda, dtype, x, x_row_stride, w, w_row_stride, bias, out, out_row_stride, tokens, "
     "in_features, out_features, stream): fastglu_linear_{cpu,cuda}; pointers as integers."},
    {"linear_glu_fwd", (PyCFunction)(void (*)(void))py_linear_glu_fwd, METH_FASTCALL,
     "linear_glu_fwd(on_cuda, activation, layout, clamp_value, glu_linear_offset, "
     "gate_multiplier, down_multiplier, dtype, x, x_row_stride, w1, w1_row_stride, bias, weights, "
     "weights_dtype, weights_stride, h, h_row_stride, y, y_row_stride, tokens, hidden, F, stream): "
     "fastglu_linear_glu_fwd_{cpu,cuda}; h 0 = not stored."},
    {"linear_dglu_bwd", (PyCFunction)(void (*)(void))py_linear_dglu_bwd, METH_FASTCALL,
     "linear_dglu_bwd(on_cuda, activation, layout, clamp_value, glu_linear_offset, "
     "gate_multiplier, down_multiplier, dtype, d_out, d_out_row_stride, w2, w2_row_stride, h, "
     "h_row_stride, weights, weights_dtype, weights_stride, dh, dh_row_stride, y, y_row_stride, "
     "dweights, dweights_stride, tokens, hidden, F, stream): fastglu_linear_dglu_bwd_{cpu,cuda}; "
     "y and dweights 0 = not computed."},
    {"set_fp8_saturate", py_set_fp8_saturate, METH_O,
     "set_fp8_saturate(flag): the fp8 copy's overflow mode (fastglu_set_fp8_saturate)."},
    {"fp8_saturate", py_fp8_saturate, METH_NOARGS,
     "True if the fp8 copy saturates at +-448, False if it gives NaN (fastglu_fp8_saturate)."},
    {"cuda_available", py_cuda_available, METH_NOARGS,
     "True if libfastglu has its CUDA backend and a CUDA device is usable."},
    {"cuda_built", py_cuda_built, METH_NOARGS,
     "True if libfastglu was built with its CUDA backend (a GPU need not be present)."},
    {"version", py_version, METH_NOARGS, "libfastglu's version as MAJOR*10000+MINOR*100+PATCH."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT,
                                    "fastglu._C",
                                    "Binding of the libfastglu C API.",
                                    -1,
                                    methods,
                                    NULL,
                                    NULL,
                                    NULL,
                                    NULL};

static int add_fp8_functions(PyObject *m); /* the FP8-quantised forward, below */

PyMODINIT_FUNC PyInit__C(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (add_fp8_functions(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "DTYPE_FP32", FASTGLU_DTYPE_FP32) < 0 ||
        PyModule_AddIntConstant(m, "DTYPE_FP16", FASTGLU_DTYPE_FP16) < 0 ||
        PyModule_AddIntConstant(m, "DTYPE_BF16", FASTGLU_DTYPE_BF16) < 0 ||
        PyModule_AddIntConstant(m, "DTYPE_FP8_E4M3", FASTGLU_DTYPE_FP8_E4M3) < 0 ||
        PyModule_AddIntConstant(m, "ACT_SILU", FASTGLU_ACT_SILU) < 0 ||
        PyModule_AddIntConstant(m, "ACT_GELU_TANH", FASTGLU_ACT_GELU_TANH) < 0 ||
        PyModule_AddIntConstant(m, "ACT_QUICK_GELU", FASTGLU_ACT_QUICK_GELU) < 0 ||
        PyModule_AddIntConstant(m, "LAYOUT_SPLIT", FASTGLU_LAYOUT_SPLIT) < 0 ||
        PyModule_AddIntConstant(m, "LAYOUT_INTERLEAVED", FASTGLU_LAYOUT_INTERLEAVED) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

/* ---- the activation quantised to FP8 (include/fastglu.h, "The activation quantised to FP8") ---
 *
 * glu_fwd_fp8(on_cuda, activation, layout, clamp_value, glu_linear_offset, gate_multiplier,
 *             down_multiplier, scaling, scale_layout, pow2_scales, dtype, gate, gate_row_stride, up,
 *             up_row_stride, bias, weights, weights_dtype, weights_stride, y, y_row_stride, data,
 *             data_row_stride, scale, scale_ld, data_t, data_t_row_stride, scale_t, scale_t_ld,
 *             workspace, workspace_bytes, tokens, F, stream): fastglu_glu_fwd_fp8_{cpu,cuda};
 * pointers as integers, 0 for NULL. */
/* The 34 arguments of glu_fwd_fp8 from args (see there) and the call; dy NULL: the forward, else
 * the backward with its sums db / dw (data NULL: not asked; dw's dtype is set to the weights'),
 * and with sc (not NULL) the backward from the blockwise copy: gate and up are its codes, dtype
 * the call's. copy (the forward; NULL: none): gate_fp8, up_fp8 and scale_inv of the blockwise
 * copy it also writes. */
static PyObject *glu_fp8_call(PyObject *const *args, const fastglu_tensor *dy, fastglu_tensor db,
                              fastglu_tensor dw, const fastglu_tensor *sc,
                              const fastglu_tensor *copy) {
    int64_t on_cuda, scaling, scale_layout, pow2, dtype, g_rs, u_rs, wdt, w_st, y_rs, d_rs, s_ld,
        dt_rs, st_ld, tokens, F;
    void *gate, *up, *bias, *weights, *y, *d, *s, *dt, *st, *ws, *stream;
    size_t ws_bytes;
    fastglu_glu_params p;
    if (!get_i64(args[0], &on_cuda) || !get_params(args + 1, &p) || !get_i64(args[7], &scaling) ||
        !get_i64(args[8], &scale_layout) || !get_i64(args[9], &pow2) ||
        !get_dtype(args[10], &dtype) || !get_ptr(args[11], &gate) || !get_i64(args[12], &g_rs) ||
        !get_ptr(args[13], &up) || !get_i64(args[14], &u_rs) || !get_ptr(args[15], &bias) ||
        !get_ptr(args[16], &weights) || !get_dtype(args[17], &wdt) || !get_i64(args[18], &w_st) ||
        !get_ptr(args[19], &y) || !get_i64(args[20], &y_rs) || !get_ptr(args[21], &d) ||
        !get_i64(args[22], &d_rs) || !get_ptr(args[23], &s) || !get_i64(args[24], &s_ld) ||
        !get_ptr(args[25], &dt) || !get_i64(args[26], &dt_rs) || !get_ptr(args[27], &st) ||
        !get_i64(args[28], &st_ld) || !get_ptr(args[29], &ws) || !get_size(args[30], &ws_bytes) ||
        !get_i64(args[31], &tokens) || !get_i64(args[32], &F) || !get_ptr(args[33], &stream))
        return NULL;
    if (scaling < 0 || scaling > 1 || scale_layout < 0 || scale_layout > 1) {
        PyErr_Format(PyExc_ValueError, "fastglu: scaling %lld / scale layout %lld is not a code",
                     (long long)scaling, (long long)scale_layout);
        return NULL;
    }
    const fastglu_dtype e = (fastglu_dtype)dtype;
    const fastglu_fp8_recipe r = {(fastglu_fp8_scaling)scaling,
                                  (fastglu_fp8_scale_layout)scale_layout, pow2 != 0};
    const fastglu_dtype ein = sc ? FASTGLU_DTYPE_FP8_E4M3 : e; /* the operands' */
    const fastglu_tensor tg = {gate, ein, g_rs}, tu = {up, ein, u_rs}, tb = {bias, e, 1},
                         tw = {weights, (fastglu_dtype)wdt, w_st}, ty = {y, e, y_rs};
    db.dtype = e, dw.dtype = (fastglu_dtype)wdt;
    fastglu_fp8_out o;
    o.data = (fastglu_tensor){d, FASTGLU_DTYPE_FP8_E4M3, d_rs};
    o.scale = (fastglu_tensor){s, FASTGLU_DTYPE_FP32, s_ld};
    o.data_t = (fastglu_tensor){dt, FASTGLU_DTYPE_FP8_E4M3, dt_rs};
    o.scale_t = (fastglu_tensor){st, FASTGLU_DTYPE_FP32, st_ld};
    o.workspace = ws, o.workspace_bytes = ws_bytes;
    fastglu_status status;
    if (on_cuda) {
        status =
            sc ? fastglu_glu_bwd_fp8_saved_blockwise_cuda(&p, &r, *dy, tg, tu, *sc, tb, tw, ty, db,
                                                          dw, &o, tokens, F, stream)
            : dy ? fastglu_glu_bwd_fp8_cuda(&p, &r, *dy, tg, tu, tb, tw, ty, db, dw, &o, tokens, F,
                                            stream)
            : copy
                ? fastglu_glu_fwd_fp8_copy_blockwise_cuda(&p, &r, tg, tu, tb, tw, ty, &o, copy[0],
                                                          copy[1], copy[2], tokens, F, stream)
                : fastglu_glu_fwd_fp8_cuda(&p, &r, tg, tu, tb, tw, ty, &o, tokens, F, stream);
    } else {
        Py_BEGIN_ALLOW_THREADS status =
            sc   ? fastglu_glu_bwd_fp8_saved_blockwise_cpu(&p, &r, *dy, tg, tu, *sc, tb, tw, ty, db,
                                                           dw, &o, tokens, F)
            : dy ? fastglu_glu_bwd_fp8_cpu(&p, &r, *dy, tg, tu, tb, tw, ty, db, dw, &o, tokens, F)
            : copy ? fastglu_glu_fwd_fp8_copy_blockwise_cpu(&p, &r, tg, tu, tb, tw, ty, &o, copy[0],
                                                            copy[1], copy[2], tokens, F)
                   : fastglu_glu_fwd_fp8_cpu(&p, &r, tg, tu, tb, tw, ty, &o, tokens, F);
        Py_END_ALLOW_THREADS
    }
    return status_result(status);
}

/* glu_fwd_fp8(on_cuda, activation, layout, clamp_value, glu_linear_offset, gate_multiplier,
 *             down_multiplier, scaling, scale_layout, pow2_scales, dtype, gate, gate_row_stride, up,
 *             up_row_stride, bias, weights, weights_dtype, weights_stride, y, y_row_stride, data,
 *             data_row_stride, scale, scale_ld, data_t, data_t_row_stride, scale_t, scale_t_ld,
 *             workspace, workspace_bytes, tokens, F, stream): fastglu_glu_fwd_fp8_{cpu,cuda};
 * pointers as integers, 0 for NULL. */
static PyObject *py_glu_fwd_fp8(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    CHECK_NARGS("glu_fwd_fp8", 34);
    const fastglu_tensor none = {NULL, FASTGLU_DTYPE_FP32, 1};
    return glu_fp8_call(args, NULL, none, none, NULL, NULL);
}

/* glu_fwd_fp8_copy_blockwise(gate_fp8, gate_fp8_row_stride, up_fp8, up_fp8_row_stride, scale_inv,
 * scale_inv_row_stride, <glu_fwd_fp8's 34 arguments>): fastglu_glu_fwd_fp8_copy_blockwise_{cpu,
 * cuda}; the copy's codes (row strides in bytes; up_fp8 0 with the interleaved layout) and its
 * fp32 scales [tokens, blocks]. */
static PyObject *py_glu_fwd_fp8_copy_blockwise(PyObject *self, PyObject *const *args,
                                               Py_ssize_t nargs) {
    int64_t g8_rs, u8_rs, s_rs;
    void *g8, *u8, *sc;
    (void)self;
    CHECK_NARGS("glu_fwd_fp8_copy_blockwise", 40);
    if (!get_ptr(args[0], &g8) || !get_i64(args[1], &g8_rs) || !get_ptr(args[2], &u8) ||
        !get_i64(args[3], &u8_rs) || !get_ptr(args[4], &sc) || !get_i64(args[5], &s_rs))
        return NULL;
    const fastglu_tensor none = {NULL, FASTGLU_DTYPE_FP32, 1};
    const fastglu_tensor copy[3] = {{g8, FASTGLU_DTYPE_FP8_E4M3, g8_rs},
                                    {u8, FASTGLU_DTYPE_FP8_E4M3, u8_rs},
                                    {sc, FASTGLU_DTYPE_FP32, s_rs}};
    return glu_fp8_call(args + 6, NULL, none, none, NULL, copy);
}

/* glu_bwd_fp8(dy, dy_row_stride, dbias, dweights, <glu_fwd_fp8's 34 arguments, y standing for
 * dh>): fastglu_glu_bwd_fp8_{cpu,cuda}; dy in the operands' dtype; dbias [2F] in it, dweights [T]
 * in the weights' (contiguous; 0: not asked; the workspace then sized by
 * glu_bwd_fp8_workspace_bytes). */
static PyObject *py_glu_bwd_fp8(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    int64_t dtype, dy_rs;
    void *dy, *db, *dw;
    (void)self;
    CHECK_NARGS("glu_bwd_fp8", 38);
    if (!get_ptr(args[0], &dy) || !get_i64(args[1], &dy_rs) || !get_ptr(args[2], &db) ||
        !get_ptr(args[3], &dw) || !get_dtype(args[14], &dtype))
        return NULL;
    const fastglu_tensor tdy = {dy, (fastglu_dtype)dtype, dy_rs};
    const fastglu_tensor tdb = {db, (fastglu_dtype)dtype, 1}, tdw = {dw, FASTGLU_DTYPE_FP32, 1};
    return glu_fp8_call(args + 4, &tdy, tdb, tdw, NULL, NULL);
}

/* glu_bwd_fp8_saved_blockwise(scale_inv, scale_inv_row_stride, <glu_bwd_fp8's 38 arguments>):
 * fastglu_glu_bwd_fp8_saved_blockwise_{cpu,cuda}; gate and up (pointers and row strides in
 * bytes) the blockwise copy's codes, dtype the call's (dy's), scale_inv fp32 [tokens, blocks]. */
static PyObject *py_glu_bwd_fp8_saved_blockwise(PyObject *self, PyObject *const *args,
                                                Py_ssize_t nargs) {
    int64_t dtype, dy_rs, sc_rs;
    void *sc, *dy, *db, *dw;
    (void)self;
    CHECK_NARGS("glu_bwd_fp8_saved_blockwise", 40);
    if (!get_ptr(args[0], &sc) || !get_i64(args[1], &sc_rs) || !get_ptr(args[2], &dy) ||
        !get_i64(args[3], &dy_rs) || !get_ptr(args[4], &db) || !get_ptr(args[5], &dw) ||
        !get_dtype(args[16], &dtype))
        return NULL;
    const fastglu_tensor tsc = {sc, FASTGLU_DTYPE_FP32, sc_rs};
    const fastglu_tensor tdy = {dy, (fastglu_dtype)dtype, dy_rs};
    const fastglu_tensor tdb = {db, (fastglu_dtype)dtype, 1}, tdw = {dw, FASTGLU_DTYPE_FP32, 1};
    return glu_fp8_call(args + 6, &tdy, tdb, tdw, &tsc, NULL);
}

/* glu_bwd_fp8_workspace_bytes(scaling, tokens, F, want_dbias, want_dweights):
 * fastglu_glu_bwd_fp8_workspace_bytes. */
static PyObject *py_glu_bwd_fp8_workspace_bytes(PyObject *self, PyObject *const *args,
                                                Py_ssize_t nargs) {
    int64_t scaling, tokens, F, db, dw;
    (void)self;
    CHECK_NARGS("glu_bwd_fp8_workspace_bytes", 5);
    if (!get_i64(args[0], &scaling) || !get_i64(args[1], &tokens) || !get_i64(args[2], &F) ||
        !get_i64(args[3], &db) || !get_i64(args[4], &dw))
        return NULL;
    const fastglu_fp8_recipe r = {(fastglu_fp8_scaling)scaling, FASTGLU_FP8_SCALES_MN_MAJOR, 0};
    return PyLong_FromSize_t(fastglu_glu_bwd_fp8_workspace_bytes(&r, tokens, F, db != 0, dw != 0));
}

/* quantize_fp8(on_cuda, scaling, scale_layout, pow2_scales, dtype, x, x_row_stride, data,
 *              data_row_stride, scale, scale_ld, data_t, data_t_row_stride, scale_t, scale_t_ld,
 *              rows, cols, stream): fastglu_quantize_fp8_{cpu,cuda}; pointers as integers, 0 for
 * NULL. */
static PyObject *py_quantize_fp8(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    int64_t on_cuda, scaling, scale_layout, pow2, dtype, x_rs, d_rs, s_ld, dt_rs, st_ld, rows, cols;
    void *x, *d, *s, *dt, *st, *stream;
    (void)self;
    CHECK_NARGS("quantize_fp8", 18);
    if (!get_i64(args[0], &on_cuda) || !get_i64(args[1], &scaling) ||
        !get_i64(args[2], &scale_layout) || !get_i64(args[3], &pow2) ||
        !get_dtype(args[4], &dtype) || !get_ptr(args[5], &x) || !get_i64(args[6], &x_rs) ||
        !get_ptr(args[7], &d) || !get_i64(args[8], &d_rs) || !get_ptr(args[9], &s) ||
        !get_i64(args[10], &s_ld) || !get_ptr(args[11], &dt) || !get_i64(args[12], &dt_rs) ||
        !get_ptr(args[13], &st) || !get_i64(args[14], &st_ld) || !get_i64(args[15], &rows) ||
        !get_i64(args[16], &cols) || !get_ptr(args[17], &stream))
        return NULL;
    if (scaling < 0 || scaling > 2 || scale_layout < 0 || scale_layout > 1) {
        PyErr_Format(PyExc_ValueError, "fastglu: scaling %lld / scale layout %lld is not a code",
                     (long long)scaling, (long long)scale_layout);
        return NULL;
    }
    const fastglu_fp8_recipe r = {(fastglu_fp8_scaling)scaling,
                                  (fastglu_fp8_scale_layout)scale_layout, pow2 != 0};
    const fastglu_tensor tx = {x, (fastglu_dtype)dtype, x_rs};
    fastglu_fp8_out o;
    memset(&o, 0, sizeof o);
    o.data = (fastglu_tensor){d, FASTGLU_DTYPE_FP8_E4M3, d_rs};
    o.scale = (fastglu_tensor){s, FASTGLU_DTYPE_FP32, s_ld};
    o.data_t = (fastglu_tensor){dt, FASTGLU_DTYPE_FP8_E4M3, dt_rs};
    o.scale_t = (fastglu_tensor){st, FASTGLU_DTYPE_FP32, st_ld};
    fastglu_status status;
    if (on_cuda) {
        status = fastglu_quantize_fp8_cuda(&r, tx, &o, rows, cols, stream);
    } else {
        Py_BEGIN_ALLOW_THREADS status = fastglu_quantize_fp8_cpu(&r, tx, &o, rows, cols);
        Py_END_ALLOW_THREADS
    }
    return status_result(status);
}

/* glu_fp8_store_blockwise(on_cuda, <params: 6>, dtype, gate, gate_row_stride, up, up_row_stride,
 *                         gate_fp8, gate_fp8_row_stride, up_fp8, up_fp8_row_stride, scale_inv,
 *                         scale_inv_row_stride, tokens, F, stream):
 * fastglu_glu_fp8_store_blockwise_{cpu,cuda}; 0 for NULL. */
static PyObject *py_glu_fp8_store_blockwise(PyObject *self, PyObject *const *args,
                                            Py_ssize_t nargs) {
    int64_t on_cuda, dtype, g_rs, u_rs, g8_rs, u8_rs, s_rs, tokens, F;
    void *g, *u, *g8, *u8, *sc, *stream;
    fastglu_glu_params p;
    (void)self;
    CHECK_NARGS("glu_fp8_store_blockwise", 21);
    if (!get_i64(args[0], &on_cuda) || !get_params(args + 1, &p) || !get_dtype(args[7], &dtype) ||
        !get_ptr(args[8], &g) || !get_i64(args[9], &g_rs) || !get_ptr(args[10], &u) ||
        !get_i64(args[11], &u_rs) || !get_ptr(args[12], &g8) || !get_i64(args[13], &g8_rs) ||
        !get_ptr(args[14], &u8) || !get_i64(args[15], &u8_rs) || !get_ptr(args[16], &sc) ||
        !get_i64(args[17], &s_rs) || !get_i64(args[18], &tokens) || !get_i64(args[19], &F) ||
        !get_ptr(args[20], &stream))
        return NULL;
    const fastglu_tensor tg = {g, (fastglu_dtype)dtype, g_rs}, tu = {u, (fastglu_dtype)dtype, u_rs},
                         tg8 = {g8, FASTGLU_DTYPE_FP8_E4M3, g8_rs},
                         tu8 = {u8, FASTGLU_DTYPE_FP8_E4M3, u8_rs},
                         ts = {sc, FASTGLU_DTYPE_FP32, s_rs};
    fastglu_status status;
    if (on_cuda) {
        status = fastglu_glu_fp8_store_blockwise_cuda(&p, tg, tu, tg8, tu8, ts, tokens, F, stream);
    } else {
        Py_BEGIN_ALLOW_THREADS status =
            fastglu_glu_fp8_store_blockwise_cpu(&p, tg, tu, tg8, tu8, ts, tokens, F);
        Py_END_ALLOW_THREADS
    }
    return status_result(status);
}

/* glu_fwd_fp8_store_blockwise(on_cuda, <params: 6>, gate, gate_row_stride, up, up_row_stride,
 *                             bias, weights, weights_dtype, weights_stride, output,
 *                             output_row_stride, gate_fp8, gate_fp8_row_stride, up_fp8,
 *                             up_fp8_row_stride, scale_inv, scale_inv_row_stride, tokens, F, dtype,
 *                             stream): fastglu_glu_fwd_fp8_store_blockwise_{cpu,cuda}; 0 for NULL. */
static PyObject *py_glu_fwd_fp8_store_blockwise(PyObject *self, PyObject *const *args,
                                                Py_ssize_t nargs) {
    fastglu_glu_params p;
    int64_t on_cuda, g_rs, u_rs, w_dtype, w_stride, out_rs, g8_rs, u8_rs, s_rs, tokens, F, dtype;
    void *g, *u, *bias, *w, *out, *g8, *u8, *sc, *stream;
    (void)self;
    CHECK_NARGS("glu_fwd_fp8_store_blockwise", 27);
    if (!get_i64(args[0], &on_cuda) || !get_params(args + 1, &p) || !get_ptr(args[7], &g) ||
        !get_i64(args[8], &g_rs) || !get_ptr(args[9], &u) || !get_i64(args[10], &u_rs) ||
        !get_ptr(args[11], &bias) || !get_ptr(args[12], &w) || !get_dtype(args[13], &w_dtype) ||
        !get_i64(args[14], &w_stride) || !get_ptr(args[15], &out) || !get_i64(args[16], &out_rs) ||
        !get_ptr(args[17], &g8) || !get_i64(args[18], &g8_rs) || !get_ptr(args[19], &u8) ||
        !get_i64(args[20], &u8_rs) || !get_ptr(args[21], &sc) || !get_i64(args[22], &s_rs) ||
        !get_i64(args[23], &tokens) || !get_i64(args[24], &F) || !get_dtype(args[25], &dtype) ||
        !get_ptr(args[26], &stream))
        return NULL;
    const fastglu_dtype dt = (fastglu_dtype)dtype;
    const fastglu_glu_operands o = {make_tensor(g, dt, g_rs),
                                    make_tensor(u, dt, u_rs),
                                    make_tensor(bias, dt, 1),
                                    make_tensor(w, w_dtype, w_stride),
                                    make_tensor(NULL, FASTGLU_DTYPE_FP32, 0),
                                    0};
    const fastglu_tensor output = make_tensor(out, dt, out_rs),
                         tg8 = make_tensor(g8, FASTGLU_DTYPE_FP8_E4M3, g8_rs),
                         tu8 = make_tensor(u8, FASTGLU_DTYPE_FP8_E4M3, u8_rs),
                         ts = make_tensor(sc, FASTGLU_DTYPE_FP32, s_rs);
    fastglu_status st;
    if (on_cuda) {
        st = fastglu_glu_fwd_fp8_store_blockwise_cuda(&p, &o, output, tg8, tu8, ts, tokens, F,
                                                      stream);
    } else {
        Py_BEGIN_ALLOW_THREADS st =
            fastglu_glu_fwd_fp8_store_blockwise_cpu(&p, &o, output, tg8, tu8, ts, tokens, F);
        Py_END_ALLOW_THREADS
    }
    return status_result(st);
}

static PyMethodDef fp8_methods[] = {
    {"glu_fwd_fp8", (PyCFunction)(void (*)(void))py_glu_fwd_fp8, METH_FASTCALL,
     "glu_fwd_fp8(on_cuda, activation, layout, clamp_value, glu_linear_offset, gate_multiplier, "
     "down_multiplier, scaling, scale_layout, pow2_scales, dtype, gate, gate_row_stride, up, "
     "up_row_stride, bias, weights, weights_dtype, weights_stride, y, y_row_stride, data, "
     "data_row_stride, scale, scale_ld, data_t, data_t_row_stride, scale_t, scale_t_ld, workspace, "
     "workspace_bytes, tokens, F, stream): fastglu_glu_fwd_fp8_{cpu,cuda}; 0 for NULL."},
    {"glu_fwd_fp8_copy_blockwise", (PyCFunction)(void (*)(void))py_glu_fwd_fp8_copy_blockwise,
     METH_FASTCALL,
     "glu_fwd_fp8_copy_blockwise(gate_fp8, gate_fp8_row_stride, up_fp8, up_fp8_row_stride, "
     "scale_inv, scale_inv_row_stride, <glu_fwd_fp8's arguments>): "
     "fastglu_glu_fwd_fp8_copy_blockwise_{cpu,cuda}."},
    {"glu_bwd_fp8", (PyCFunction)(void (*)(void))py_glu_bwd_fp8, METH_FASTCALL,
     "glu_bwd_fp8(dy, dy_row_stride, dbias, dweights, <glu_fwd_fp8's arguments, y standing for "
     "dh>): fastglu_glu_bwd_fp8_{cpu,cuda}."},
    {"glu_bwd_fp8_saved_blockwise", (PyCFunction)(void (*)(void))py_glu_bwd_fp8_saved_blockwise,
     METH_FASTCALL,
     "glu_bwd_fp8_saved_blockwise(scale_inv, scale_inv_row_stride, <glu_bwd_fp8's arguments, gate "
     "and up the blockwise copy's codes, dtype dy's>): "
     "fastglu_glu_bwd_fp8_saved_blockwise_{cpu,cuda}."},
    {"quantize_fp8", (PyCFunction)(void (*)(void))py_quantize_fp8, METH_FASTCALL,
     "quantize_fp8(on_cuda, scaling, scale_layout, pow2_scales, dtype, x, x_row_stride, data, "
     "data_row_stride, scale, scale_ld, data_t, data_t_row_stride, scale_t, scale_t_ld, rows, "
     "cols, stream): fastglu_quantize_fp8_{cpu,cuda}; 0 for NULL."},
    {"glu_fp8_store_blockwise", (PyCFunction)(void (*)(void))py_glu_fp8_store_blockwise,
     METH_FASTCALL,
     "glu_fp8_store_blockwise(on_cuda, activation, layout, clamp_value, glu_linear_offset, "
     "gate_multiplier, down_multiplier, dtype, gate, gate_row_stride, up, up_row_stride, gate_fp8, "
     "gate_fp8_row_stride, up_fp8, up_fp8_row_stride, scale_inv, scale_inv_row_stride, tokens, F, "
     "stream): fastglu_glu_fp8_store_blockwise_{cpu,cuda}; 0 for NULL."},
    {"glu_fwd_fp8_store_blockwise", (PyCFunction)(void (*)(void))py_glu_fwd_fp8_store_blockwise,
     METH_FASTCALL,
     "glu_fwd_fp8_store_blockwise(on_cuda, activation, layout, clamp_value, glu_linear_offset, "
     "gate_multiplier, down_multiplier, gate, gate_row_stride, up, up_row_stride, bias, weights, "
     "weights_dtype, weights_stride, output, output_row_stride, gate_fp8, gate_fp8_row_stride, "
     "up_fp8, up_fp8_row_stride, scale_inv, scale_inv_row_stride, tokens, F, dtype, stream): "
     "fastglu_glu_fwd_fp8_store_blockwise_{cpu,cuda}; 0 for NULL."},
    {"glu_bwd_fp8_workspace_bytes", (PyCFunction)(void (*)(void))py_glu_bwd_fp8_workspace_bytes,
     METH_FASTCALL,
     "glu_bwd_fp8_workspace_bytes(scaling, tokens, F, want_dbias, want_dweights): "
     "fastglu_glu_bwd_fp8_workspace_bytes."},
    {NULL, NULL, 0, NULL}};

static int add_fp8_functions(PyObject *m) {
    if (PyModule_AddFunctions(m, fp8_methods) < 0) return -1;
    if (PyModule_AddIntConstant(m, "FP8_SCALING_BLOCK_1X128", FASTGLU_FP8_SCALING_BLOCK_1X128) <
            0 ||
        PyModule_AddIntConstant(m, "FP8_SCALING_TENSOR", FASTGLU_FP8_SCALING_TENSOR) < 0 ||
        PyModule_AddIntConstant(m, "FP8_SCALING_BLOCK_128X128", FASTGLU_FP8_SCALING_BLOCK_128X128) <
            0 ||
        PyModule_AddIntConstant(m, "FP8_SCALES_MN_MAJOR", FASTGLU_FP8_SCALES_MN_MAJOR) < 0 ||
        PyModule_AddIntConstant(m, "FP8_SCALES_ROW_MAJOR", FASTGLU_FP8_SCALES_ROW_MAJOR) < 0)
        return -1;
    return PyModule_AddIntConstant(
        m, "FP8_WORKSPACE_BYTES_TENSOR",
        (long)fastglu_glu_fwd_fp8_workspace_bytes(
            &(fastglu_fp8_recipe){FASTGLU_FP8_SCALING_TENSOR, FASTGLU_FP8_SCALES_MN_MAJOR, 0}));
}
