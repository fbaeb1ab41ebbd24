/*
 * _C.c — the CPython binding of libfastglu: a thin METH_FASTCALL module that passes integers
 * (pointers, sizes, strides, the stream handle) straight to the C API. It knows nothing of torch;
 * python/fastglu/ops.py extracts those integers from tensors. Chosen over ctypes because a
 * FASTCALL function with integer arguments costs a fraction of a microsecond per call, where
 * ctypes argument conversion costs several.
 *
 * Every function raises with the library's message when the C call fails: ValueError for an
 * invalid argument (e.g. an output overlapping an input), TypeError for a dtype, RuntimeError for
 * CUDA errors. The Python layer rejects most bad tensors before this point.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "fastglu.h"

static int get_i64(PyObject *o, int64_t *out) {
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) return 0;
    *out = (int64_t)v;
    return 1;
}

/* The dtype code must name a fastglu_dtype (a wider integer must not wrap onto one). */
static int get_dtype(PyObject *o, int64_t *out) {
    if (!get_i64(o, out)) return 0;
    if (*out < FASTGLU_DTYPE_FP32 || *out > FASTGLU_DTYPE_BF16) {
        PyErr_Format(PyExc_TypeError, "fastglu: dtype code %lld is not a fastglu_dtype", (long long)*out);
        return 0;
    }
    return 1;
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
        PyErr_Format(PyExc_TypeError, name "() takes %d arguments (%zd given)", (want), nargs);   \
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
        Py_BEGIN_ALLOW_THREADS
        st = fastglu_swiglu_fwd_cpu(in, in_rs, out, out_rs, tokens, F, (fastglu_dtype)dtype);
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
        Py_BEGIN_ALLOW_THREADS
        st = fastglu_swiglu_bwd_cpu(dy, dy_rs, dy_cs, in, in_rs, din, din_rs, tokens, F,
                                    (fastglu_dtype)dtype);
        Py_END_ALLOW_THREADS
    }
    return status_result(st);
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
    {"cuda_available", py_cuda_available, METH_NOARGS,
     "True if libfastglu has its CUDA backend and a CUDA device is usable."},
    {"cuda_built", py_cuda_built, METH_NOARGS,
     "True if libfastglu was built with its CUDA backend (a GPU need not be present)."},
    {"version", py_version, METH_NOARGS, "libfastglu's version as MAJOR*10000+MINOR*100+PATCH."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "fastglu._C",
                                    "Binding of the libfastglu C API.", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__C(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "DTYPE_FP32", FASTGLU_DTYPE_FP32) < 0 ||
        PyModule_AddIntConstant(m, "DTYPE_FP16", FASTGLU_DTYPE_FP16) < 0 ||
        PyModule_AddIntConstant(m, "DTYPE_BF16", FASTGLU_DTYPE_BF16) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
