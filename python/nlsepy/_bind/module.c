/*
 * _core.c -- the CPython/NumPy binding of the nlsepy C API (the only C file
 * that includes Python.h).  It checks arrays (type, dtype, shape, layout),
 * releases the GIL around the kernels and turns status codes into Python
 * exceptions: ValueError, TypeError, MemoryError, nlsepy.BlowUpError,
 * nlsepy.BackendError, RuntimeError.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include "nlsepy/common.h"
#include "nlsepy/fd.h"
#ifdef NLSEPY_WITH_CUDA
#include "nlsepy/device.h"
#endif
#define NLSEPY_WITH_DIPOLAR 1 /* the split-step solver: csrc/dipolar/dipolar.c and cuda/dipolar/dipolar.cu */

/* The same source builds `_core` (CPU) and, with NLSEPY_MODULE=_cuda and
 * NLSEPY_WITH_CUDA, the CUDA extension `_cuda` over the CUDA implementation
 * of the C API. */
#ifndef NLSEPY_MODULE
#define NLSEPY_MODULE _core
#endif
#define NLSE_STR_(x) #x
#define NLSE_STR(x) NLSE_STR_(x)
#define NLSE_CAT_(a, b) a##b
#define NLSE_CAT(a, b) NLSE_CAT_(a, b)
#define MODULE_NAME NLSE_STR(NLSEPY_MODULE)

/* ------------------------------------------------------------------ */
/* errors                                                             */
/* ------------------------------------------------------------------ */

static PyObject *exc_blowup = NULL, *exc_backend = NULL;

static PyObject *raise_status(int st)
{
    const char *msg = nlse_last_error();
    PyObject *type;
    switch (st) {
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

/* ------------------------------------------------------------------ */
/* the FD solver object                                               */
/* ------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    nlse_fd *s;
    nlse_fd_params p;
    int busy; /* set while the GIL is released inside a kernel */
} FDObject;

/* 1 when a binding's solver handle can be used now, else 0 with an exception
 * set (not created yet, or busy in a kernel on another thread). */
static int handle_ready(const void *handle, int busy)
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

static int fd_ready(FDObject *self) { return handle_ready(self->s, self->busy); }

static int parse_triple(PyObject *seq, int ndim, const char *name, double *outd, size_t *outz)
{
    PyObject *fast = PySequence_Fast(seq, "expected a sequence");
    if (!fast) {
        PyErr_Format(PyExc_TypeError, "%s must be a sequence of %d numbers", name, ndim);
        return -1;
    }
    if (PySequence_Fast_GET_SIZE(fast) != ndim) {
        PyErr_Format(PyExc_ValueError, "%s must have %d entries, got %zd", name, ndim,
                     PySequence_Fast_GET_SIZE(fast));
        Py_DECREF(fast);
        return -1;
    }
    for (int q = 0; q < ndim; ++q) {
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

static int fd_init(FDObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"shape", "spacing", "a", "s", "dt", "scheme", "bc", "dtype", NULL};
    PyObject *shape, *spacing;
    nlse_fd_params p;
    memset(&p, 0, sizeof p);
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOdddiii", kwlist, &shape, &spacing, &p.a,
                                     &p.s, &p.dt, &p.scheme, &p.bc, &p.dtype))
        return -1;
    Py_ssize_t nd = PySequence_Size(shape);
    if (nd < 1 || nd > 3) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "shape must have 1, 2 or 3 entries, got %zd", nd);
        return -1;
    }
    p.ndim = (int)nd;
    if (parse_triple(shape, p.ndim, "shape", NULL, p.shape) ||
        parse_triple(spacing, p.ndim, "spacing", p.spacing, NULL))
        return -1;
    if (self->s) {
        nlse_fd_destroy(self->s);
        self->s = NULL;
    }
    int st = nlse_fd_create(&p, &self->s);
    if (st) {
        raise_status(st);
        return -1;
    }
    self->p = p;
    return 0;
}

static void fd_dealloc(FDObject *self)
{
    nlse_fd_destroy(self->s);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* `a` has the grid's `ndim` and `shape` and is aligned and C-contiguous;
 * returns `a` or NULL with an exception (shared by every solver type). */
static PyArrayObject *check_grid(PyArrayObject *a, const char *name, int ndim, const size_t *shape)
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

/* Check that `obj` is an aligned C-contiguous array of the solver's shape
 * with the exact dtype; returns a borrowed array or NULL with an exception. */
static PyArrayObject *check_array(FDObject *self, PyObject *obj, const char *name, int real)
{
    int want;
    if (!PyArray_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be a numpy.ndarray, got %s", name,
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    PyArrayObject *a = (PyArrayObject *)obj;
    if (self->p.dtype == NLSE_COMPLEX64)
        want = real ? NPY_FLOAT32 : NPY_COMPLEX64;
    else
        want = real ? NPY_FLOAT64 : NPY_COMPLEX128;
    if (PyArray_TYPE(a) != want) {
        PyArray_Descr *d = PyArray_DescrFromType(want);
        PyObject *ws = PyObject_Str((PyObject *)d), *gs = PyObject_Str((PyObject *)PyArray_DESCR(a));
        PyErr_Format(PyExc_TypeError, "%s must have dtype %U, got %U", name, ws, gs);
        Py_XDECREF(ws);
        Py_XDECREF(gs);
        Py_DECREF(d);
        return NULL;
    }
    return check_grid(a, name, self->p.ndim, self->p.shape);
}

static PyObject *fd_set_state(FDObject *self, PyObject *obj)
{
    if (!fd_ready(self))
        return NULL;
    PyArrayObject *a = check_array(self, obj, "psi", 0);
    if (!a)
        return NULL;
    int st = nlse_fd_set_state(self->s, PyArray_DATA(a));
    if (st)
        return raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *fd_set_potential(FDObject *self, PyObject *obj)
{
    if (!fd_ready(self))
        return NULL;
    int st;
    if (obj == Py_None) {
        st = nlse_fd_set_potential(self->s, NULL);
    } else {
        PyArrayObject *a = check_array(self, obj, "V", 1);
        if (!a)
            return NULL;
        st = nlse_fd_set_potential(self->s, PyArray_DATA(a));
    }
    if (st)
        return raise_status(st);
    Py_RETURN_NONE;
}

/* A new array of the solver's shape and dtype, filled by `fill(s, arg, data)`
 * with the GIL released.  `busy` marks calls that must not overlap step(). */
static PyObject *state_array(FDObject *self, int (*fill)(nlse_fd *, int, void *), int arg,
                             int busy)
{
    npy_intp dims[3];
    for (int q = 0; q < self->p.ndim; ++q)
        dims[q] = (npy_intp)self->p.shape[q];
    int tn = self->p.dtype == NLSE_COMPLEX64 ? NPY_COMPLEX64 : NPY_COMPLEX128;
    PyObject *out = PyArray_SimpleNew(self->p.ndim, dims, tn);
    if (!out)
        return NULL;
    int st;
    void *data = PyArray_DATA((PyArrayObject *)out);
    if (busy)
        self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    st = fill(self->s, arg, data);
    Py_END_ALLOW_THREADS
    if (busy)
        self->busy = 0;
    if (st) {
        Py_DECREF(out);
        return raise_status(st);
    }
    return out;
}

static int fill_state(nlse_fd *s, int unused, void *data)
{
    (void)unused;
    return nlse_fd_get_state(s, data);
}

static PyObject *fd_get_state(FDObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!fd_ready(self))
        return NULL;
    return state_array(self, fill_state, 0, 1);
}

static PyObject *fd_snapshot(FDObject *self, PyObject *arg)
{
    if (!fd_ready(self))
        return NULL;
    long slot = PyLong_AsLong(arg);
    if (slot == -1 && PyErr_Occurred())
        return NULL;
    int st = nlse_fd_snapshot(self->s, (int)slot);
    if (st)
        return raise_status(st);
    Py_RETURN_NONE;
}

/* fetch(slot) -> new array; may run on another thread while step() runs. */
static PyObject *fd_fetch(FDObject *self, PyObject *arg)
{
    if (!self->s) {
        PyErr_SetString(PyExc_RuntimeError, "solver is not initialised");
        return NULL;
    }
    long slot = PyLong_AsLong(arg);
    if (slot == -1 && PyErr_Occurred())
        return NULL;
    if (slot < 0 || slot > 1)
        return PyErr_Format(PyExc_ValueError, "fetch: slot must be 0 or 1, got %ld", slot);
    return state_array(self, nlse_fd_fetch, (int)slot, 0);
}

static PyObject *fd_set_dt(FDObject *self, PyObject *arg)
{
    if (!fd_ready(self))
        return NULL;
    double dt = PyFloat_AsDouble(arg);
    if (dt == -1.0 && PyErr_Occurred())
        return NULL;
    int st = nlse_fd_set_dt(self->s, dt);
    if (st)
        return raise_status(st);
    self->p.dt = dt;
    Py_RETURN_NONE;
}

/* step(n) -> (done, blew_up): blow-up is reported, not raised, so that the
 * Python layer can attach the step and time. */
static PyObject *fd_step(FDObject *self, PyObject *arg)
{
    if (!fd_ready(self))
        return NULL;
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    long done = 0;
    int st;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    st = nlse_fd_step(self->s, n, &done);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (st && st != NLSE_ERR_BLOWUP)
        return raise_status(st);
    return Py_BuildValue("lO", done, st == NLSE_ERR_BLOWUP ? Py_True : Py_False);
}

static PyObject *fd_observe(FDObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!fd_ready(self))
        return NULL;
    double norm = 0, energy = 0;
    int st;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    st = nlse_fd_observe(self->s, &norm, &energy);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (st)
        return raise_status(st);
    return Py_BuildValue("dd", norm, energy);
}

static PyObject *fd_bytes(FDObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!fd_ready(self))
        return NULL;
    return PyFloat_FromDouble(nlse_fd_bytes_per_point_step(self->s));
}

#ifdef NLSEPY_WITH_DIPOLAR
#include "_bind/dipolar.c"
#endif
#define NLSEPY_WITH_MAGNET 1 /* the Laplace solver of magnet design: csrc/magnet/magnet.c, cuda/magnet/magnet.cu */
#include "_bind/magnet.c"
#include "_bind/mbloch.c" /* the Maxwell-Bloch solver of source 004: csrc/mbloch/mbloch.c, cuda/mbloch/mbloch.cu */

static PyMethodDef fd_methods[] = {
    {"set_state", (PyCFunction)fd_set_state, METH_O, "set_state(psi): copy psi into the solver."},
    {"get_state", (PyCFunction)fd_get_state, METH_NOARGS, "get_state() -> new array."},
    {"set_potential", (PyCFunction)fd_set_potential, METH_O,
     "set_potential(V or None): static real potential."},
    {"set_dt", (PyCFunction)fd_set_dt, METH_O, "set_dt(dt): change the time step."},
    {"snapshot", (PyCFunction)fd_snapshot, METH_O,
     "snapshot(slot): copy the state into frame slot 0 or 1 (in stream order)."},
    {"fetch", (PyCFunction)fd_fetch, METH_O,
     "fetch(slot) -> new array holding the slot; may overlap step() on another thread."},
    {"step", (PyCFunction)fd_step, METH_O,
     "step(n) -> (done, blew_up): advance n RK4 steps."},
    {"observe", (PyCFunction)fd_observe, METH_NOARGS, "observe() -> (norm, energy)."},
    {"bytes_per_point_step", (PyCFunction)fd_bytes, METH_NOARGS,
     "Bytes the kernels move per grid point and step (model)."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject FDType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "nlsepy." MODULE_NAME ".FD",
    .tp_basicsize = sizeof(FDObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "FD(shape, spacing, a, s, dt, scheme, bc, dtype): RK4 finite-difference "
              "NLSE solver handle (C API nlse_fd).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)fd_init,
    .tp_dealloc = (destructor)fd_dealloc,
    .tp_methods = fd_methods,
};

/* ------------------------------------------------------------------ */
/* module functions                                                   */
/* ------------------------------------------------------------------ */

static PyObject *m_set_num_threads(PyObject *Py_UNUSED(m), PyObject *arg)
{
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 1 || n > 65536)
        return PyErr_Format(PyExc_ValueError, "num_threads must be in [1, 65536], got %ld", n);
    int st = nlse_set_num_threads((int)n);
    if (st)
        return raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *m_get_num_threads(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    return PyLong_FromLong(nlse_get_num_threads());
}

static PyObject *m_have_openmp(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    return PyBool_FromLong(nlse_have_openmp());
}

static PyObject *m_fd_max_dt(PyObject *Py_UNUSED(m), PyObject *args)
{
    PyObject *spacing;
    nlse_fd_params p;
    memset(&p, 0, sizeof p);
    if (!PyArg_ParseTuple(args, "idOi", &p.ndim, &p.a, &spacing, &p.scheme))
        return NULL;
    if (p.ndim < 1 || p.ndim > 3)
        return PyErr_Format(PyExc_ValueError, "ndim must be 1, 2 or 3, got %d", p.ndim);
    if (parse_triple(spacing, p.ndim, "spacing", p.spacing, NULL))
        return NULL;
    return PyFloat_FromDouble(nlse_fd_max_dt(&p));
}

static PyObject *m_fd_min_points(PyObject *Py_UNUSED(m), PyObject *args)
{
    int scheme, bc;
    if (!PyArg_ParseTuple(args, "ii", &scheme, &bc))
        return NULL;
    return PyLong_FromSize_t(nlse_fd_min_points(scheme, bc));
}

#ifdef NLSEPY_WITH_CUDA
static PyObject *m_device_count(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    int n = 0;
    nlse_cuda_device_count(&n);
    return PyLong_FromLong(n);
}

static PyObject *m_device_name(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    char buf[256];
    int st = nlse_cuda_device_name(buf, (int)sizeof buf);
    if (st)
        return raise_status(st);
    return PyUnicode_FromString(buf);
}

static PyObject *m_copy_bandwidth(PyObject *Py_UNUSED(m), PyObject *args)
{
    Py_ssize_t bytes;
    int reps = 20, st;
    double gbps = 0;
    if (!PyArg_ParseTuple(args, "n|i", &bytes, &reps))
        return NULL;
    if (bytes <= 0)
        return PyErr_Format(PyExc_ValueError, "bytes must be > 0, got %zd", bytes);
    Py_BEGIN_ALLOW_THREADS
    st = nlse_cuda_copy_bandwidth((size_t)bytes, reps, &gbps);
    Py_END_ALLOW_THREADS
    if (st)
        return raise_status(st);
    return PyFloat_FromDouble(gbps);
}
#endif

static PyMethodDef module_methods[] = {
#ifdef NLSEPY_WITH_CUDA
    {"device_count", m_device_count, METH_NOARGS, "Number of CUDA devices."},
    {"device_name", m_device_name, METH_NOARGS, "Name of the current CUDA device."},
    {"copy_bandwidth", m_copy_bandwidth, METH_VARARGS,
     "copy_bandwidth(bytes, reps=20) -> GB/s of device-to-device copies (read + write)."},
#endif
#ifdef NLSEPY_WITH_MAGNET
    {"magnet_omega_estimate", (PyCFunction)(void (*)(void))m_lp_omega, METH_VARARGS | METH_KEYWORDS,
     "magnet_omega_estimate(r0, z0, r1, z1, dr, dz, B, dtype) -> omega of eqs. 2.44 and A.1."},
#endif
    {"set_num_threads", m_set_num_threads, METH_O, "Set the OpenMP thread count."},
    {"get_num_threads", m_get_num_threads, METH_NOARGS, "OpenMP threads in use."},
    {"have_openmp", m_have_openmp, METH_NOARGS, "True when built with OpenMP."},
    {"fd_max_dt", m_fd_max_dt, METH_VARARGS,
     "fd_max_dt(ndim, a, spacing, scheme): linear stability bound (NLSEmagic eqs. 18-19)."},
    {"fd_min_points", m_fd_min_points, METH_VARARGS,
     "fd_min_points(scheme, bc): fewest points per axis."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT,
    .m_name = MODULE_NAME,
#ifdef NLSEPY_WITH_CUDA
    .m_doc = "nlsepy CUDA backend.",
#else
    .m_doc = "nlsepy CPU backend (C99 + OpenMP).",
#endif
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC NLSE_CAT(PyInit_, NLSEPY_MODULE)(void)
{
    import_array();
    PyObject *errors = PyImport_ImportModule("nlsepy.errors");
    if (!errors)
        return NULL;
    exc_blowup = PyObject_GetAttrString(errors, "BlowUpError");
    exc_backend = PyObject_GetAttrString(errors, "BackendError");
    Py_DECREF(errors);
    if (!exc_blowup || !exc_backend)
        return NULL;
    if (PyType_Ready(&FDType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m)
        return NULL;
    Py_INCREF(&FDType);
    if (PyModule_AddObject(m, "FD", (PyObject *)&FDType) < 0) {
        Py_DECREF(&FDType);
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "CD", NLSE_FD_CD);
    PyModule_AddIntConstant(m, "SHOC", NLSE_FD_2SHOC);
    PyModule_AddIntConstant(m, "BC_DIRICHLET", NLSE_BC_DIRICHLET);
    PyModule_AddIntConstant(m, "BC_MSD", NLSE_BC_MSD);
    PyModule_AddIntConstant(m, "BC_L0", NLSE_BC_L0);
    PyModule_AddIntConstant(m, "BC_PERIODIC", NLSE_BC_PERIODIC);
    PyModule_AddIntConstant(m, "BC_ONE_SIDED", NLSE_BC_ONE_SIDED);
#ifdef NLSEPY_WITH_DIPOLAR
    if (PyType_Ready(&DipolarType) < 0)
        return NULL;
    Py_INCREF(&DipolarType);
    if (PyModule_AddObject(m, "SS", (PyObject *)&DipolarType) < 0) {
        Py_DECREF(&DipolarType);
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "DIPOLAR_IMAG", NLSE_DIPOLAR_IMAG);
    PyModule_AddIntConstant(m, "DIPOLAR_REAL", NLSE_DIPOLAR_REAL);
#endif
#ifdef NLSEPY_WITH_MAGNET
    if (PyType_Ready(&MagnetType) < 0)
        return NULL;
    Py_INCREF(&MagnetType);
    if (PyModule_AddObject(m, "LP", (PyObject *)&MagnetType) < 0) {
        Py_DECREF(&MagnetType);
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "MAGNET_JACOBI", NLSE_MAGNET_JACOBI);
    PyModule_AddIntConstant(m, "MAGNET_GAUSS_SEIDEL", NLSE_MAGNET_GAUSS_SEIDEL);
    PyModule_AddIntConstant(m, "MAGNET_SOR", NLSE_MAGNET_SOR);
    PyModule_AddIntConstant(m, "MAGNET_RBSOR", NLSE_MAGNET_RBSOR);
    PyModule_AddIntConstant(m, "MAGNET_MULTIGRID", NLSE_MAGNET_MULTIGRID);
    PyModule_AddIntConstant(m, "MAGNET_MGCG", NLSE_MAGNET_MGCG);
#endif
    if (PyType_Ready(&MblochType) < 0)
        return NULL;
    Py_INCREF(&MblochType);
    if (PyModule_AddObject(m, "MB", (PyObject *)&MblochType) < 0) {
        Py_DECREF(&MblochType);
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "COMPLEX64", NLSE_COMPLEX64);
    PyModule_AddIntConstant(m, "COMPLEX128", NLSE_COMPLEX128);
    /* models this extension implements */
    PyModule_AddObject(m, "MODELS", Py_BuildValue("(ssss)", "NLSE", "DipolarGPE", "CoaxialMagnet", "MaxwellBloch"));
    return m;
}
