/*
 * _core_mb.c -- binding of the Maxwell-Bloch solver (nlsepy/mbloch.h, source
 * 004), included by _core.c (it shares raise_status there).  Arrays cross as
 * float64 / complex128 whatever the working precision; the sizes n_atoms and
 * n_t are those of the arrays given.
 */
#include <limits.h>

#include "nlsepy/mbloch.h"

typedef struct {
    PyObject_HEAD
    nlse_mb *s;
    nlse_mb_params p;
    int busy; /* set while the GIL is released inside a kernel */
} MBObject;

static int mb_ready(MBObject *self) { return handle_ready(self->s, self->busy); }

/* `obj` as an aligned C-contiguous array of `type` with `ndim` dimensions;
 * dims[q] >= 0 must match, dims[q] < 0 is filled in.  New reference or NULL. */
static PyArrayObject *mb_array(PyObject *obj, const char *name, int type, int ndim, npy_intp *dims)
{
    PyArrayObject *a = (PyArrayObject *)PyArray_FROMANY(obj, type, 0, 0,
                                                        NPY_ARRAY_IN_ARRAY | NPY_ARRAY_FORCECAST);
    if (!a)
        return NULL;
    if (PyArray_NDIM(a) != ndim) {
        PyErr_Format(PyExc_ValueError, "%s must have %d dimensions, got %d", name, ndim,
                     PyArray_NDIM(a));
        Py_DECREF(a);
        return NULL;
    }
    for (int q = 0; q < ndim; ++q) {
        if (dims[q] < 0) {
            dims[q] = PyArray_DIM(a, q);
        } else if (PyArray_DIM(a, q) != dims[q]) {
            PyErr_Format(PyExc_ValueError, "%s has shape[%d] = %zd, expected %zd", name, q,
                         (Py_ssize_t)PyArray_DIM(a, q), (Py_ssize_t)dims[q]);
            Py_DECREF(a);
            return NULL;
        }
    }
    return a;
}

static int mb_init(MBObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"n_g", "n_e", "l_min", "l_max", "F", "detunings", "weights",
                             "initial_state", "fields0", "h_t", "h_z", "beta", "kappa_g",
                             "kappa_e", "delta", "euler_substeps", "dtype", NULL};
    PyObject *oF, *odet, *ow, *opsi, *ofld;
    nlse_mb_params p;
    memset(&p, 0, sizeof p);
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iiiiOOOOOddddddii", kwlist, &p.n_g, &p.n_e,
                                     &p.l_min, &p.l_max, &oF, &odet, &ow, &opsi, &ofld, &p.h_t,
                                     &p.h_z, &p.beta, &p.kappa_g, &p.kappa_e, &p.delta,
                                     &p.euler_substeps, &p.dtype))
        return -1;
    if (p.n_g < 1 || p.n_e < 1 || p.l_max < p.l_min) {
        p.n_atoms = p.n_t = 2; /* let the C checks name the culprit */
        raise_status(nlse_mb_check_params(&p));
        return -1;
    }
    npy_intp dF[2] = {p.n_g, p.n_e}, dd[1] = {-1}, dw[1] = {-1};
    npy_intp dpsi[2] = {-1, p.n_g + p.n_e}, dfld[2] = {-1, p.l_max - p.l_min + 1};
    PyArrayObject *aF = NULL, *adet = NULL, *aw = NULL, *apsi = NULL, *afld = NULL;
    int ret = -1;
    if (!(aF = mb_array(oF, "F", NPY_FLOAT64, 2, dF)) ||
        !(adet = mb_array(odet, "detunings", NPY_FLOAT64, 1, dd)))
        goto done;
    dw[0] = dpsi[0] = dd[0]; /* one entry per atom */
    if (!(aw = mb_array(ow, "weights", NPY_FLOAT64, 1, dw)) ||
        !(apsi = mb_array(opsi, "initial_state", NPY_COMPLEX128, 2, dpsi)) ||
        !(afld = mb_array(ofld, "fields0", NPY_COMPLEX128, 2, dfld)))
        goto done;
    if (dd[0] > INT_MAX || dfld[0] > INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "n_atoms and n_t must be below 2**31");
        goto done;
    }
    p.n_atoms = (int)dd[0];
    p.n_t = (int)dfld[0];
    if (self->s) {
        nlse_mb_destroy(self->s);
        self->s = NULL;
    }
    int st = nlse_mb_create(&p, (const double *)PyArray_DATA(aF),
                            (const double *)PyArray_DATA(adet), (const double *)PyArray_DATA(aw),
                            (const double *)PyArray_DATA(apsi), (const double *)PyArray_DATA(afld),
                            &self->s);
    if (st) {
        raise_status(st);
        goto done;
    }
    self->p = p;
    ret = 0;
done:
    Py_XDECREF(aF);
    Py_XDECREF(adet);
    Py_XDECREF(aw);
    Py_XDECREF(apsi);
    Py_XDECREF(afld);
    return ret;
}

static void mb_dealloc(MBObject *self)
{
    nlse_mb_destroy(self->s);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* atoms(want_pop) / step(want_pop): the kernels with the GIL released;
 * a blow-up raises nlsepy.BlowUpError (the fields of the last z are kept). */
static PyObject *mb_call(MBObject *self, int (*fn)(nlse_mb *, int), int arg)
{
    int st;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    st = fn(self->s, arg);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (st)
        return raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *mb_run(MBObject *self, PyObject *arg, int (*fn)(nlse_mb *, int))
{
    if (!mb_ready(self))
        return NULL;
    const int want = PyObject_IsTrue(arg);
    if (want < 0)
        return NULL;
    return mb_call(self, fn, want);
}

static PyObject *mb_atoms(MBObject *self, PyObject *arg) { return mb_run(self, arg, nlse_mb_atoms); }
static PyObject *mb_step(MBObject *self, PyObject *arg) { return mb_run(self, arg, nlse_mb_step); }

/* steps(n): n z steps without populations (several a launch where the
 * backend can), the GIL released */
static PyObject *mb_steps(MBObject *self, PyObject *arg)
{
    if (!mb_ready(self))
        return NULL;
    const long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 0 || n > INT_MAX) {
        PyErr_Format(PyExc_ValueError, "steps: n = %ld must be in [0, %d]", n, INT_MAX);
        return NULL;
    }
    return mb_call(self, nlse_mb_steps, (int)n);
}

static PyObject *mb_pipeline(MBObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!mb_ready(self))
        return NULL;
    return PyLong_FromLong(nlse_mb_pipeline(self->s));
}

/* A new (n_t, cols) array of `type` filled by `get`. */
static PyObject *mb_get(MBObject *self, int (*get)(const nlse_mb *, double *), int cols, int type)
{
    if (!mb_ready(self))
        return NULL;
    npy_intp dims[2] = {self->p.n_t, cols};
    PyObject *out = PyArray_SimpleNew(2, dims, type);
    if (!out)
        return NULL;
    int st = get(self->s, (double *)PyArray_DATA((PyArrayObject *)out));
    if (st) {
        Py_DECREF(out);
        return raise_status(st);
    }
    return out;
}

static PyObject *mb_fields(MBObject *self, PyObject *Py_UNUSED(ignored))
{
    return mb_get(self, nlse_mb_get_fields, self->p.l_max - self->p.l_min + 1, NPY_COMPLEX128);
}

static PyObject *mb_polarisation(MBObject *self, PyObject *Py_UNUSED(ignored))
{
    return mb_get(self, nlse_mb_get_polarisation, self->p.l_max - self->p.l_min + 1,
                  NPY_COMPLEX128);
}

static PyObject *mb_populations(MBObject *self, PyObject *Py_UNUSED(ignored))
{
    return mb_get(self, nlse_mb_get_populations, self->p.n_g + self->p.n_e, NPY_FLOAT64);
}

static PyObject *mb_z_index(MBObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!mb_ready(self))
        return NULL;
    return PyLong_FromLong(nlse_mb_z_index(self->s));
}

static PyObject *mb_norm_dev(MBObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!mb_ready(self))
        return NULL;
    return PyFloat_FromDouble(nlse_mb_norm_deviation(self->s));
}

static PyObject *mb_seconds(MBObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!mb_ready(self))
        return NULL;
    return PyFloat_FromDouble(nlse_mb_last_seconds(self->s));
}

static PyObject *mb_couplings(MBObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!mb_ready(self))
        return NULL;
    return PyLong_FromLong(nlse_mb_couplings(&self->p));
}

static PyMethodDef mb_methods[] = {
    {"atoms", (PyCFunction)mb_atoms, METH_O,
     "atoms(want_pop): solve every atom at the current z (polarisation, populations)."},
    {"step", (PyCFunction)mb_step, METH_O,
     "step(want_pop): one z step (atoms at z_j, then AB2 or the Euler start)."},
    {"steps", (PyCFunction)mb_steps, METH_O,
     "steps(n): n z steps without populations, the fields of n step(False) calls."},
    {"pipeline", (PyCFunction)mb_pipeline, METH_NOARGS,
     "pipeline() -> z steps one launch can hold (1: one a launch)."},
    {"get_fields", (PyCFunction)mb_fields, METH_NOARGS, "get_fields() -> (n_t, N_F) complex128."},
    {"get_polarisation", (PyCFunction)mb_polarisation, METH_NOARGS,
     "get_polarisation() -> (n_t, N_F) complex128 of the last atom solve."},
    {"get_populations", (PyCFunction)mb_populations, METH_NOARGS,
     "get_populations() -> (n_t, n_g + n_e) float64 of the last solve that asked for them."},
    {"z_index", (PyCFunction)mb_z_index, METH_NOARGS, "z_index() -> j of the current fields."},
    {"norm_deviation", (PyCFunction)mb_norm_dev, METH_NOARGS,
     "norm_deviation() -> max | |psi|^2 - 1 | over every atom solve so far."},
    {"last_seconds", (PyCFunction)mb_seconds, METH_NOARGS,
     "last_seconds() -> seconds of the last step or atom solve (device time on CUDA)."},
    {"couplings", (PyCFunction)mb_couplings, METH_NOARGS,
     "couplings() -> nonzero (m, n) pairs of the coupling."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject MBType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "nlsepy." MODULE_NAME ".MB",
    .tp_basicsize = sizeof(MBObject),
    .tp_dealloc = (destructor)mb_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "MB(n_g, n_e, l_min, l_max, F, detunings, weights, initial_state, fields0, h_t, "
              "h_z, beta, kappa_g, kappa_e, delta, euler_substeps, dtype): Maxwell-Bloch solver "
              "handle (C API nlse_mb).",
    .tp_methods = mb_methods,
    .tp_init = (initproc)mb_init,
    .tp_new = PyType_GenericNew,
};
