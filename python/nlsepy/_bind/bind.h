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
 * object is marked busy, status -> exception or result, dtype dispatch and
 * the array checks, new arrays of a grid's shape, the argument parsers, the
 * reduction table of a distributed run (its capsule), the methods several
 * solver types have in the same form (getters, actions, set_dt, step(n),
 * observe()), the type object, adding a type and its constants to the
 * module.
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

/* tp_dealloc of a solver type that keeps a Python object its handle points
 * into (the capsule of a reduction table): the handle first, then `keep`. */
#define NLSEPY_DEALLOC_KEEP(fname, object_t, destroy, keep) \
    static void fname(object_t *self)                       \
    {                                                       \
        destroy(self->s);                                   \
        Py_CLEAR(self->keep);                               \
        Py_TYPE(self)->tp_free((PyObject *)self);           \
    }

/* Before tp_init makes a handle again: the old one destroyed, s = NULL. */
#define NLSEPY_DROP(self, destroy)        \
    do {                                  \
        if ((self)->s) {                  \
            destroy((self)->s);           \
            (self)->s = NULL;             \
        }                                 \
    } while (0)

/* A method with no argument that returns make(get(self->s)) once the
 * handle is ready (a number or flag of the solver). */
#define NLSEPY_GETTER(fname, object_t, make, get)                       \
    static PyObject *fname(object_t *self, PyObject *Py_UNUSED(ignored)) \
    {                                                                   \
        if (!NLSEPY_READY(self))                                        \
            return NULL;                                                \
        return make(get(self->s));                                      \
    }

/* A method with no argument that runs set(self->s) (with the GIL held) and
 * returns None or raises its status. */
#define NLSEPY_ACTION(fname, object_t, set) NLSEPY_GETTER(fname, object_t, nlsepy_none, set)

/* step(n) -> (done, blew_up): step(self->s, n, &done) with the GIL released
 * (nlsepy_steps_result).  Its method-table entry: NLSEPY_STEP_METHOD, with
 * `what` the model's steps in words. */
#define NLSEPY_STEP(fname, object_t, step)                           \
    static PyObject *fname(object_t *self, PyObject *arg)            \
    {                                                                \
        long n, done = 0;                                            \
        int st;                                                      \
        if (!NLSEPY_READY(self) || nlsepy_parse_long(arg, &n))       \
            return NULL;                                             \
        NLSEPY_RUN(self, st, step(self->s, n, &done));               \
        return nlsepy_steps_result(st, done);                        \
    }

/* observe() -> (norm, energy): observe(self->s, &norm, &energy) with the
 * GIL released.  Its method-table entry: NLSEPY_OBSERVE_METHOD. */
#define NLSEPY_OBSERVE(fname, object_t, observe)                              \
    static PyObject *fname(object_t *self, PyObject *Py_UNUSED(ignored))      \
    {                                                                         \
        double norm = 0, energy = 0;                                          \
        int st;                                                               \
        if (!NLSEPY_READY(self))                                              \
            return NULL;                                                      \
        NLSEPY_RUN(self, st, observe(self->s, &norm, &energy));               \
        return nlsepy_pair_result(st, norm, energy);                          \
    }

/* set_dt(dt): set(self->s, dt), the object's p.dt following on success.
 * Its method-table entry: NLSEPY_SET_DT_METHOD. */
#define NLSEPY_SET_DT(fname, object_t, set)                        \
    static PyObject *fname(object_t *self, PyObject *arg)          \
    {                                                              \
        double dt;                                                 \
        if (!NLSEPY_READY(self) || nlsepy_parse_double(arg, &dt))  \
            return NULL;                                           \
        const int st = set(self->s, dt);                           \
        if (!st)                                                   \
            self->p.dt = dt;                                       \
        return nlsepy_none(st);                                    \
    }

/* A setter of one number with no copy kept on the object: set(self->s, v)
 * on the solver's thread guard (NLSEPY_RUN). */
#define NLSEPY_SET_DOUBLE(fname, object_t, set)                   \
    static PyObject *fname(object_t *self, PyObject *arg)         \
    {                                                             \
        double v;                                                 \
        int st;                                                   \
        if (!NLSEPY_READY(self) || nlsepy_parse_double(arg, &v))  \
            return NULL;                                          \
        NLSEPY_RUN(self, st, set(self->s, v));                    \
        return nlsepy_none(st);                                   \
    }

/* set_comm(capsule or None): the solver becomes one part of a distributed
 * run over the capsule's table (None: the whole system again): set(self->s,
 * table), the object keeping the capsule in self->comm (nlsepy_keep_comm).
 * Its method-table entry: NLSEPY_SET_COMM_METHOD, with `what` what the
 * processes share. */
#define NLSEPY_SET_COMM(fname, object_t, set)                                  \
    static PyObject *fname(object_t *self, PyObject *arg)                      \
    {                                                                          \
        const nlse_comm *c;                                                    \
        if (!NLSEPY_READY(self) || nlsepy_comm_arg(arg, &c))                   \
            return NULL;                                                       \
        return nlsepy_keep_comm(&self->comm, arg, set(self->s, c));            \
    }

/* The method-table entries of the methods above: their names, calling
 * conventions and docstrings, written once for every solver type. */
#define NLSEPY_STEP_METHOD(fname, what) \
    {"step", (PyCFunction)(fname), METH_O, "step(n) -> (done, blew_up): " what}
#define NLSEPY_OBSERVE_METHOD(fname) \
    {"observe", (PyCFunction)(fname), METH_NOARGS, "observe() -> (norm, energy)."}
#define NLSEPY_SET_DT_METHOD(fname) \
    {"set_dt", (PyCFunction)(fname), METH_O, "set_dt(dt): change the time step."}
#define NLSEPY_SET_COMM_METHOD(fname, what)                                             \
    {"set_comm", (PyCFunction)(fname), METH_O,                                         \
     "set_comm(capsule or None): one part of a distributed run (" what "), or the whole " \
     "system."}

/* The type object of a solver: its name in this module, the object's
 * size, tp_init, tp_dealloc, the methods and the docstring. */
#define NLSEPY_SOLVER_TYPE(var, name, object_t, init, dealloc, methods, doc) \
    static PyTypeObject var = {                                             \
        PyVarObject_HEAD_INIT(NULL, 0)                                      \
        .tp_name = NLSEPY_TYPE_NAME(name),                                  \
        .tp_basicsize = sizeof(object_t),                                   \
        .tp_dealloc = (destructor)(dealloc),                                \
        .tp_flags = Py_TPFLAGS_DEFAULT,                                     \
        .tp_doc = doc,                                                      \
        .tp_methods = methods,                                              \
        .tp_init = (initproc)(init),                                        \
        .tp_new = PyType_GenericNew,                                        \
    }

/* NumPy's C API and nlsepy.common.errors' classes, once per module: 0 or -1 with
 * an exception. */
int nlsepy_bind_init(void);

/* Raise the exception of a C status (NLSE_ERR_VALUE -> ValueError, TYPE ->
 * TypeError, NOMEM -> MemoryError, BLOWUP -> nlsepy.BlowUpError, BACKEND ->
 * nlsepy.BackendError, else RuntimeError) with nlse_last_error()'s message;
 * returns NULL. */
PyObject *nlsepy_raise(int status);

/* None for status 0, else NULL with the status's exception. */
PyObject *nlsepy_none(int status);

/* The end of a tp_init that made the handle with status `status`: 0, or -1
 * with the status's exception. */
int nlsepy_init_status(int status);

/* `out` (a new reference) for status 0, else NULL with the status's
 * exception and `out` released. */
PyObject *nlsepy_array_result(PyObject *out, int status);

/* The result of a run of steps, (done, blew_up): a blow-up is reported, not
 * raised, so that the Python layer can attach the step and time; any other
 * failing status raises. */
PyObject *nlsepy_steps_result(int status, long done);

/* The tuple (a, b) of two floats for status 0 (a solver's pair of
 * observables), else NULL with the status's exception. */
PyObject *nlsepy_pair_result(int status, double a, double b);

/* A new C-ordered array of `ndim` dimensions of `shape` and NumPy type
 * `type`, or NULL with an exception. */
PyObject *nlsepy_new_array(int ndim, const size_t *shape, int type);

/* A Python number as a double or a long: 0, or -1 with the conversion's
 * exception. */
int nlsepy_parse_double(PyObject *arg, double *out);
int nlsepy_parse_long(PyObject *arg, long *out);

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

/* nlsepy_check_type, then nlsepy_check_grid: `obj` is an aligned
 * C-contiguous numpy.ndarray of the NumPy type `want` with `ndim`
 * dimensions of `shape`; borrowed, or NULL with TypeError or ValueError. */
PyArrayObject *nlsepy_check_array(PyObject *obj, const char *name, int want, int ndim,
                                  const size_t *shape);

/* `obj` as an aligned C-contiguous array of NumPy type `type` (converted,
 * and cast when needed): a new reference, or NULL with an exception. */
PyArrayObject *nlsepy_as_array(PyObject *obj, int type);

/* The reduction table of a distributed run (nlsepy/common.h) crosses from
 * the `_mpi` extension to the solvers in a capsule of this name. */
#define NLSEPY_COMM_CAPSULE "nlsepy.nlse_comm"

/* The table held by a capsule of NLSEPY_COMM_CAPSULE, or NULL with an
 * exception. */
const nlse_comm *nlsepy_comm_table(PyObject *capsule);

/* The argument of a solver's set_comm: the table of a capsule, or NULL for
 * None, in *c; 0, or -1 with TypeError for anything else. */
int nlsepy_comm_arg(PyObject *arg, const nlse_comm **c);

/* The end of a solver's set_comm(arg): for status 0, *keep holds arg (NULL
 * for None; the capsule the handle now points into) and the old one is
 * released, and None is returned; else NULL with the status's exception. */
PyObject *nlsepy_keep_comm(PyObject **keep, PyObject *arg, int status);

/* Add a solver type to the module under `name`: 0, or -1 with an exception. */
int nlsepy_add_type(PyObject *module, PyTypeObject *type, const char *name);

/* An int constant of a model's module: its name and value. */
typedef struct nlsepy_constant {
    const char *name;
    int value;
} nlsepy_constant;

/* Add `n` int constants to the module: 0, or -1 with an exception. */
int nlsepy_add_constants(PyObject *module, const nlsepy_constant *c, size_t n);

/* The models' registrations (_bind/<stem>.c): add the type, its constants
 * and module functions; 0, or -1 with an exception. */
int nlsepy_bind_fd(PyObject *module);
int nlsepy_bind_dipolar(PyObject *module);
int nlsepy_bind_magnet(PyObject *module);
int nlsepy_bind_mbloch(PyObject *module);
int nlsepy_bind_dec(PyObject *module);

#endif /* NLSEPY_BIND_H */
