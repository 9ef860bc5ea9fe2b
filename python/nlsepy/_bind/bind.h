/*
 * _bind/bind.h -- what every model's binding shares (the only C code with
 * Python.h is under python/nlsepy/_bind/).  Each model has one file,
 * _bind/<stem>.c, that defines its solver type over its C API
 * (csrc/include/nlsepy/<stem>.h) and registers it with nlsepy_bind_<stem>();
 * bind.c defines what is declared here; module.c makes the module (`_core`
 * over the CPU implementations, or `_cuda` over the CUDA ones: the same
 * sources compiled twice).  Calls go module.c -> <stem>.c -> bind.c.
 *
 * Written once here: the solver object's head (C handle, parameters, busy
 * flag), the ready check, running a C call with the GIL released while the
 * object is marked busy, status -> exception, dtype dispatch and the array
 * checks, adding a type to the module.
 */
#ifndef NLSEPY_BIND_H
#define NLSEPY_BIND_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL nlsepy_ARRAY_API
#ifndef NLSEPY_BIND_MODULE
#define NO_IMPORT_ARRAY /* the API table is defined in bind.c */
#endif
#include <numpy/arrayobject.h>

#include <stddef.h>
#include <string.h>

#include "nlsepy/common.h"

#ifndef NLSEPY_MODULE
#define NLSEPY_MODULE _core
#endif
#define NLSE_STR_(x) #x
#define NLSE_STR(x) NLSE_STR_(x)
#define NLSE_CAT_(a, b) a##b
#define NLSE_CAT(a, b) NLSE_CAT_(a, b)
#define MODULE_NAME NLSE_STR(NLSEPY_MODULE)
/* the qualified name of a solver type of this module */
#define NLSEPY_TYPE_NAME(name) "nlsepy." MODULE_NAME "." name

/* The head of every solver object: the C handle `s`, the parameters it was
 * created with `p`, and `busy`, set while a C call runs without the GIL. */
#define NLSEPY_SOLVER_HEAD(handle_t, params_t) \
    PyObject_HEAD                              \
    handle_t *s;                               \
    params_t p;                                \
    int busy;

/* 1 when the object's handle can be used now, else 0 with RuntimeError set
 * (not created yet, or busy in a C call on another thread). */
int nlsepy_handle_ready(const void *handle, int busy);
#define NLSEPY_READY(self) nlsepy_handle_ready((self)->s, (self)->busy)

/* status = call, with the GIL released and the object marked busy. */
#define NLSEPY_RUN(self, status, call) \
    do {                               \
        (self)->busy = 1;              \
        Py_BEGIN_ALLOW_THREADS         \
        (status) = (call);             \
        Py_END_ALLOW_THREADS           \
        (self)->busy = 0;              \
    } while (0)

/* tp_dealloc of a solver type: destroy the handle, free the object. */
#define NLSEPY_DEALLOC(fname, object_t, destroy)       \
    static void fname(object_t *self)                  \
    {                                                  \
        destroy(self->s);                              \
        Py_TYPE(self)->tp_free((PyObject *)self);      \
    }

/* NumPy's C API and nlsepy.errors' classes, once per module: 0 or -1 with
 * an exception. */
int nlsepy_bind_init(void);

/* Raise the exception of a C status (NLSE_ERR_VALUE -> ValueError, TYPE ->
 * TypeError, NOMEM -> MemoryError, BLOWUP -> nlsepy.BlowUpError, BACKEND ->
 * nlsepy.BackendError, else RuntimeError) with nlse_last_error()'s message;
 * returns NULL. */
PyObject *nlsepy_raise(int status);

/* Dtype dispatch: the NumPy type of a solver's arrays for its NLSE dtype
 * (NLSE_COMPLEX64 or NLSE_COMPLEX128): complex, or real of the same
 * precision when `real`. */
int nlsepy_npy_type(int dtype, int real);

/* `seq` as `n` doubles (outd) or sizes >= 0 (outz); -1 with an exception
 * naming `name` otherwise. */
int nlsepy_parse_triple(PyObject *seq, int n, const char *name, double *outd, size_t *outz);

/* A non-NULL memory address from a Python int into *out: 0, or -1 with
 * ValueError (NULL) or the conversion's exception. */
int nlsepy_parse_address(PyObject *obj, void **out);

/* `a` has `ndim` dimensions of `shape` and is aligned and C-contiguous:
 * returns `a`, or NULL with ValueError naming `name`. */
PyArrayObject *nlsepy_check_grid(PyArrayObject *a, const char *name, int ndim,
                                 const size_t *shape);

/* `obj` is a numpy.ndarray of exactly the NumPy type `want`: returns it
 * (borrowed), or NULL with TypeError naming `name`, the wanted and the
 * given dtype. */
PyArrayObject *nlsepy_check_type(PyObject *obj, const char *name, int want);

/* Add a solver type to the module under `name`: 0, or -1 with an exception. */
int nlsepy_add_type(PyObject *module, PyTypeObject *type, const char *name);

/* The models' registrations (_bind/<stem>.c): add the type, its constants
 * and module functions; 0, or -1 with an exception. */
int nlsepy_bind_fd(PyObject *module);
int nlsepy_bind_dipolar(PyObject *module);
int nlsepy_bind_magnet(PyObject *module);
int nlsepy_bind_mbloch(PyObject *module);
int nlsepy_bind_dec(PyObject *module);

#endif /* NLSEPY_BIND_H */
