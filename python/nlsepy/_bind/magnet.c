/*
 * _bind/magnet.c -- binding of the magnet-design Laplace solver (nlsepy/magnet.h),
 * included by _core.c (it shares raise_status there).
 */
#include "nlsepy/magnet.h"

typedef struct {
    PyObject_HEAD
    nlse_magnet *s;
    size_t nr, nz;
} MagnetObject;

static int magnet_ready(MagnetObject *self) { return handle_ready(self->s, 0); }

static int magnet_parse(PyObject *args, PyObject *kw, nlse_magnet_params *p)
{
    static char *kwlist[] = {"r0", "z0", "r1", "z1", "dr", "dz", "B", "dtype", NULL};
    memset(p, 0, sizeof *p);
    return PyArg_ParseTupleAndKeywords(args, kw, "dddddddi", kwlist, &p->r0, &p->z0, &p->r1,
                                       &p->z1, &p->dr, &p->dz, &p->B, &p->dtype);
}

static int magnet_init(MagnetObject *self, PyObject *args, PyObject *kw)
{
    nlse_magnet_params p;
    if (!magnet_parse(args, kw, &p))
        return -1;
    if (self->s) {
        nlse_magnet_destroy(self->s);
        self->s = NULL;
    }
    int st = nlse_magnet_create(&p, &self->s);
    if (st) {
        raise_status(st);
        return -1;
    }
    nlse_magnet_shape(self->s, &self->nr, &self->nz);
    return 0;
}

static void magnet_dealloc(MagnetObject *self)
{
    nlse_magnet_destroy(self->s);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *magnet_get(MagnetObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!magnet_ready(self))
        return NULL;
    npy_intp dims[2] = {(npy_intp)self->nr, (npy_intp)self->nz};
    PyObject *out = PyArray_SimpleNew(2, dims, NPY_FLOAT64);
    if (!out)
        return NULL;
    int st = nlse_magnet_get_phi(self->s, (double *)PyArray_DATA((PyArrayObject *)out));
    if (st) {
        Py_DECREF(out);
        return raise_status(st);
    }
    return out;
}

static PyObject *magnet_set(MagnetObject *self, PyObject *obj)
{
    if (!magnet_ready(self))
        return NULL;
    PyArrayObject *a = (PyArrayObject *)PyArray_FROMANY(obj, NPY_FLOAT64, 2, 2,
                                                        NPY_ARRAY_IN_ARRAY);
    if (!a)
        return NULL;
    if ((size_t)PyArray_DIM(a, 0) != self->nr || (size_t)PyArray_DIM(a, 1) != self->nz) {
        PyErr_Format(PyExc_ValueError, "phi must have shape (%zu, %zu), got (%zd, %zd)", self->nr,
                     self->nz, (Py_ssize_t)PyArray_DIM(a, 0), (Py_ssize_t)PyArray_DIM(a, 1));
        Py_DECREF(a);
        return NULL;
    }
    int st = nlse_magnet_set_phi(self->s, (const double *)PyArray_DATA(a));
    Py_DECREF(a);
    if (st)
        return raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *magnet_dirichlet(MagnetObject *self, PyObject *obj)
{
    if (!magnet_ready(self))
        return NULL;
    if (obj == Py_None) {
        int st = nlse_magnet_set_dirichlet(self->s, NULL);
        if (st)
            return raise_status(st);
        Py_RETURN_NONE;
    }
    PyArrayObject *a = (PyArrayObject *)PyArray_FROMANY(obj, NPY_FLOAT64, 2, 2,
                                                        NPY_ARRAY_IN_ARRAY);
    if (!a)
        return NULL;
    if ((size_t)PyArray_DIM(a, 0) != self->nr || (size_t)PyArray_DIM(a, 1) != self->nz) {
        PyErr_Format(PyExc_ValueError, "boundary values must have shape (%zu, %zu), got (%zd, %zd)",
                     self->nr, self->nz, (Py_ssize_t)PyArray_DIM(a, 0),
                     (Py_ssize_t)PyArray_DIM(a, 1));
        Py_DECREF(a);
        return NULL;
    }
    int st = nlse_magnet_set_dirichlet(self->s, (const double *)PyArray_DATA(a));
    Py_DECREF(a);
    if (st)
        return raise_status(st);
    Py_RETURN_NONE;
}

/* solve(method, omega, tol, max_iter) -> (iterations, rel_residual, converged, history) */
static PyObject *magnet_solve(MagnetObject *self, PyObject *args)
{
    int method;
    double omega, tol;
    long max_iter;
    if (!magnet_ready(self) || !PyArg_ParseTuple(args, "iddl", &method, &omega, &tol, &max_iter))
        return NULL;
    if (max_iter < 1) {
        PyErr_Format(PyExc_ValueError, "max_iter must be >= 1, got %ld", max_iter);
        return NULL;
    }
    npy_intp n = (npy_intp)max_iter;
    PyObject *hist = PyArray_SimpleNew(1, &n, NPY_FLOAT64);
    if (!hist)
        return NULL;
    long it = 0;
    double rel = 0;
    int conv = 0, st;
    Py_BEGIN_ALLOW_THREADS
    st = nlse_magnet_solve(self->s, method, omega, tol, max_iter,
                       (double *)PyArray_DATA((PyArrayObject *)hist), &it, &rel, &conv);
    Py_END_ALLOW_THREADS
    if (st) {
        Py_DECREF(hist);
        return raise_status(st);
    }
    PyObject *h = PySequence_GetSlice(hist, 0, (Py_ssize_t)it);
    Py_DECREF(hist);
    if (!h)
        return NULL;
    return Py_BuildValue("(ldON)", it, rel, conv ? Py_True : Py_False, h);
}

static PyObject *magnet_seconds(MagnetObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!magnet_ready(self))
        return NULL;
    return PyFloat_FromDouble(nlse_magnet_last_solve_seconds(self->s));
}

static PyObject *magnet_residual(MagnetObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!magnet_ready(self))
        return NULL;
    return PyFloat_FromDouble(nlse_magnet_rel_residual(self->s));
}

static PyObject *m_lp_omega(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kw)
{
    nlse_magnet_params p;
    if (!magnet_parse(args, kw, &p))
        return NULL;
    int st = nlse_magnet_check_params(&p);
    if (st)
        return raise_status(st);
    return PyFloat_FromDouble(nlse_magnet_omega_estimate(&p));
}

static PyMethodDef magnet_methods[] = {
    {"get_phi", (PyCFunction)magnet_get, METH_NOARGS, "get_phi() -> Phi (NaN inside the magnet)."},
    {"set_phi", (PyCFunction)magnet_set, METH_O, "set_phi(phi): initial guess."},
    {"set_dirichlet", (PyCFunction)magnet_dirichlet, METH_O,
     "set_dirichlet(values or None): Dirichlet data on every boundary but the axis."},
    {"solve", (PyCFunction)magnet_solve, METH_VARARGS,
     "solve(method, omega, tol, max_iter) -> (iterations, rel_residual, converged, history)."},
    {"last_solve_seconds", (PyCFunction)magnet_seconds, METH_NOARGS,
     "last_solve_seconds() -> seconds of the last solve's iterations (device time on CUDA)."},
    {"rel_residual", (PyCFunction)magnet_residual, METH_NOARGS,
     "rel_residual() -> ||f - A Phi|| / ||f|| of the current Phi."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject MagnetType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "nlsepy." MODULE_NAME ".LP",
    .tp_basicsize = sizeof(MagnetObject),
    .tp_dealloc = (destructor)magnet_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Axisymmetric Laplace solver of magnet design (C core).",
    .tp_methods = magnet_methods,
    .tp_init = (initproc)magnet_init,
    .tp_new = PyType_GenericNew,
};
