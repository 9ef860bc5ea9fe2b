/*
 * _bind/bind.c -- what every model's binding shares (declared in bind.h):
 * NumPy's C API and nlsepy's exception classes set up once, status ->
 * exception or result, the ready check, dtype dispatch, the array checks,
 * new arrays of a grid's shape, the argument parsers, the capsule of a
 * reduction table, adding a type and constants to the module.  The lowest
 * file of the binding: it calls no other.
 */
#define NLSEPY_BIND_MODULE 1 /* NumPy's API table lives here */
#include "bind.h"

static PyObject *exc_blowup = NULL, *exc_backend = NULL;

PyObject *nlsepy_raise(int status)
{
    const char *msg = nlse_last_error();
    PyObject *type;
    switch (status) {
    case NLSE_ERR_VALUE: type = PyExc_ValueError; break;
    case NLSE_ERR_TYPE: type = PyExc_TypeError; break;
    case NLSE_ERR_NOMEM: type = PyExc_MemoryError; break;
    case NLSE_ERR_BLOWUP: type = exc_blowup; break;
    case NLSE_ERR_BACKEND: type = exc_backend; break;
    default: type = PyExc_RuntimeError; break;
    }
    PyErr_SetString(type, (msg && msg[0]) ? msg : "nlsepy: unknown error");
    return NULL;
}

PyObject *nlsepy_none(int status)
{
    if (status)
        return nlsepy_raise(status);
    Py_RETURN_NONE;
}

int nlsepy_init_status(int status)
{
    if (status) {
        nlsepy_raise(status);
        return -1;
    }
    return 0;
}

PyObject *nlsepy_array_result(PyObject *out, int status)
{
    if (status) {
        Py_DECREF(out);
        return nlsepy_raise(status);
    }
    return out;
}

PyObject *nlsepy_steps_result(int status, long done)
{
    if (status && status != NLSE_ERR_BLOWUP)
        return nlsepy_raise(status);
    return Py_BuildValue("lO", done, status == NLSE_ERR_BLOWUP ? Py_True : Py_False);
}

PyObject *nlsepy_pair_result(int status, double a, double b)
{
    return status ? nlsepy_raise(status) : Py_BuildValue("dd", a, b);
}

PyObject *nlsepy_new_array(int ndim, const size_t *shape, int type)
{
    npy_intp dims[NPY_MAXDIMS];
    for (int q = 0; q < ndim; ++q)
        dims[q] = (npy_intp)shape[q];
    return PyArray_SimpleNew(ndim, dims, type);
}

int nlsepy_parse_double(PyObject *arg, double *out)
{
    *out = PyFloat_AsDouble(arg);
    return *out == -1.0 && PyErr_Occurred() ? -1 : 0;
}

int nlsepy_parse_long(PyObject *arg, long *out)
{
    *out = PyLong_AsLong(arg);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

int nlsepy_handle_ready(const void *handle, int busy)
{
    if (!handle) {
        PyErr_SetString(PyExc_RuntimeError, "solver is not initialised");
        return 0;
    }
    if (busy) {
        PyErr_SetString(PyExc_RuntimeError, "solver is in use by another thread");
        return 0;
    }
    return 1;
}

int nlsepy_npy_type(int dtype, int real)
{
    if (dtype == NLSE_COMPLEX64)
        return real ? NPY_FLOAT32 : NPY_COMPLEX64;
    return real ? NPY_FLOAT64 : NPY_COMPLEX128;
}

int nlsepy_parse_triple(PyObject *seq, int n, const char *name, double *outd, size_t *outz)
{
    PyObject *fast = PySequence_Fast(seq, "expected a sequence");
    if (!fast) {
        PyErr_Format(PyExc_TypeError, "%s must be a sequence of %d numbers", name, n);
        return -1;
    }
    if (PySequence_Fast_GET_SIZE(fast) != n) {
        PyErr_Format(PyExc_ValueError, "%s must have %d entries, got %zd", name, n,
                     PySequence_Fast_GET_SIZE(fast));
        Py_DECREF(fast);
        return -1;
    }
    for (int q = 0; q < n; ++q) {
        PyObject *it = PySequence_Fast_GET_ITEM(fast, q);
        if (outd) {
            outd[q] = PyFloat_AsDouble(it);
        } else {
            Py_ssize_t v = PyNumber_AsSsize_t(it, PyExc_OverflowError);
            if (v < 0 && !PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "%s[%d] must be >= 0", name, q);
            outz[q] = (size_t)v;
        }
        if (PyErr_Occurred()) {
            Py_DECREF(fast);
            return -1;
        }
    }
    Py_DECREF(fast);
    return 0;
}

PyArrayObject *nlsepy_check_grid(PyArrayObject *a, const char *name, int ndim,
                                 const size_t *shape)
{
    if (PyArray_NDIM(a) != ndim) {
        PyErr_Format(PyExc_ValueError, "%s must have %d dimensions, got %d", name, ndim,
                     PyArray_NDIM(a));
        return NULL;
    }
    for (int q = 0; q < ndim; ++q) {
        if ((size_t)PyArray_DIM(a, q) != shape[q]) {
            PyErr_Format(PyExc_ValueError, "%s has shape[%d] = %zd, the solver's grid has %zu",
                         name, q, (Py_ssize_t)PyArray_DIM(a, q), shape[q]);
            return NULL;
        }
    }
    if (!PyArray_IS_C_CONTIGUOUS(a) || !PyArray_ISALIGNED(a)) {
        PyErr_Format(PyExc_ValueError, "%s must be C-contiguous and aligned", name);
        return NULL;
    }
    return a;
}

PyArrayObject *nlsepy_check_type(PyObject *obj, const char *name, int want)
{
    if (!PyArray_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be a numpy.ndarray, got %s", name,
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    PyArrayObject *a = (PyArrayObject *)obj;
    if (PyArray_TYPE(a) != want) {
        PyArray_Descr *d = PyArray_DescrFromType(want);
        PyObject *ws = PyObject_Str((PyObject *)d), *gs = PyObject_Str((PyObject *)PyArray_DESCR(a));
        PyErr_Format(PyExc_TypeError, "%s must have dtype %U, got %U", name, ws, gs);
        Py_XDECREF(ws);
        Py_XDECREF(gs);
        Py_DECREF(d);
        return NULL;
    }
    return a;
}

PyArrayObject *nlsepy_check_array(PyObject *obj, const char *name, int want, int ndim,
                                  const size_t *shape)
{
    PyArrayObject *a = nlsepy_check_type(obj, name, want);
    return a ? nlsepy_check_grid(a, name, ndim, shape) : NULL;
}

PyArrayObject *nlsepy_as_array(PyObject *obj, int type)
{
    return (PyArrayObject *)PyArray_FROMANY(obj, type, 0, 0,
                                            NPY_ARRAY_IN_ARRAY | NPY_ARRAY_FORCECAST);
}

const nlse_comm *nlsepy_comm_table(PyObject *capsule)
{
    return (const nlse_comm *)PyCapsule_GetPointer(capsule, NLSEPY_COMM_CAPSULE);
}

int nlsepy_comm_arg(PyObject *arg, const nlse_comm **c)
{
    *c = NULL;
    if (arg == Py_None)
        return 0;
    if (!PyCapsule_IsValid(arg, NLSEPY_COMM_CAPSULE)) {
        PyErr_Format(PyExc_TypeError, "set_comm: expected the capsule \"" NLSEPY_COMM_CAPSULE
                     "\" of nlsepy._mpi.comm_capsule(comm) or None, got %s",
                     Py_TYPE(arg)->tp_name);
        return -1;
    }
    *c = nlsepy_comm_table(arg);
    return *c ? 0 : -1;
}

PyObject *nlsepy_keep_comm(PyObject **keep, PyObject *arg, int status)
{
    if (status)
        return nlsepy_raise(status);
    PyObject *old = *keep;
    if (arg != Py_None)
        Py_INCREF(arg);
    *keep = arg == Py_None ? NULL : arg;
    Py_XDECREF(old);
    Py_RETURN_NONE;
}

int nlsepy_add_type(PyObject *module, PyTypeObject *type, const char *name)
{
    if (PyType_Ready(type) < 0)
        return -1;
    Py_INCREF(type);
    if (PyModule_AddObject(module, name, (PyObject *)type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    return 0;
}

int nlsepy_add_constants(PyObject *module, const nlsepy_constant *c, size_t n)
{
    for (size_t q = 0; q < n; ++q)
        if (PyModule_AddIntConstant(module, c[q].name, c[q].value) < 0)
            return -1;
    return 0;
}

int nlsepy_bind_init(void)
{
    if (_import_array() < 0)
        return -1;
    PyObject *errors = PyImport_ImportModule("nlsepy.common.errors");
    if (!errors)
        return -1;
    exc_blowup = PyObject_GetAttrString(errors, "BlowUpError");
    exc_backend = PyObject_GetAttrString(errors, "BackendError");
    Py_DECREF(errors);
    return exc_blowup && exc_backend ? 0 : -1;
}

int nlsepy_parse_address(PyObject *obj, void **out)
{
    *out = PyLong_AsVoidPtr(obj);
    if (*out)
        return 0;
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "the address is NULL");
    return -1;
}
