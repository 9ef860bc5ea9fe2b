/*
 * _bind/magnet.c -- binding of the magnet-design Laplace solver (C API
 * nlsepy/magnet.h, Madhubhashini's thesis): the `Magnet` type, its method
 * constants MAGNET_* and the module function magnet_omega_estimate (eqs.
 * 2.44 and A.1).
 */
#include "bind.h"
#include "nlsepy/magnet.h"

typedef struct {
    NLSEPY_SOLVER_HEAD(nlse_magnet, nlse_magnet_params)
    size_t nr, nz;
} MagnetObject;

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
        nlsepy_raise(st);
        return -1;
    }
    nlse_magnet_shape(self->s, &self->nr, &self->nz);
    self->p = p;
    return 0;
}

NLSEPY_DEALLOC(magnet_dealloc, MagnetObject, nlse_magnet_destroy)

static PyObject *magnet_get(MagnetObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!NLSEPY_READY(self))
        return NULL;
    npy_intp dims[2] = {(npy_intp)self->nr, (npy_intp)self->nz};
    PyObject *out = PyArray_SimpleNew(2, dims, NPY_FLOAT64);
    if (!out)
        return NULL;
    int st = nlse_magnet_get_phi(self->s, (double *)PyArray_DATA((PyArrayObject *)out));
    if (st) {
        Py_DECREF(out);
        return nlsepy_raise(st);
    }
    return out;
}

static PyObject *magnet_set(MagnetObject *self, PyObject *obj)
{
    if (!NLSEPY_READY(self))
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
        return nlsepy_raise(st);
    Py_RETURN_NONE;
}

static PyObject *magnet_dirichlet(MagnetObject *self, PyObject *obj)
{
    if (!NLSEPY_READY(self))
        return NULL;
    if (obj == Py_None) {
        int st = nlse_magnet_set_dirichlet(self->s, NULL);
        if (st)
            return nlsepy_raise(st);
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
        return nlsepy_raise(st);
    Py_RETURN_NONE;
}

/* solve(method, omega, tol, max_iter) -> (iterations, rel_residual, converged, history) */
static PyObject *magnet_solve(MagnetObject *self, PyObject *args)
{
    int method;
    double omega, tol;
    long max_iter;
    if (!NLSEPY_READY(self) || !PyArg_ParseTuple(args, "iddl", &method, &omega, &tol, &max_iter))
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
    NLSEPY_RUN(self, st, nlse_magnet_solve(self->s, method, omega, tol, max_iter,
                                           (double *)PyArray_DATA((PyArrayObject *)hist), &it,
                                           &rel, &conv));
    if (st) {
        Py_DECREF(hist);
        return nlsepy_raise(st);
    }
    PyObject *h = PySequence_GetSlice(hist, 0, (Py_ssize_t)it);
    Py_DECREF(hist);
    if (!h)
        return NULL;
    return Py_BuildValue("(ldON)", it, rel, conv ? Py_True : Py_False, h);
}

static PyObject *magnet_restart(MagnetObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!NLSEPY_READY(self))
        return NULL;
    int st = nlse_magnet_restart(self->s);
    if (st)
        return nlsepy_raise(st);
    Py_RETURN_NONE;
}

static PyObject *magnet_seconds(MagnetObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!NLSEPY_READY(self))
        return NULL;
    return PyFloat_FromDouble(nlse_magnet_last_solve_seconds(self->s));
}

static PyObject *magnet_residual(MagnetObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!NLSEPY_READY(self))
        return NULL;
    return PyFloat_FromDouble(nlse_magnet_rel_residual(self->s));
}

static PyObject *m_magnet_omega(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kw)
{
    nlse_magnet_params p;
    if (!magnet_parse(args, kw, &p))
        return NULL;
    int st = nlse_magnet_check_params(&p);
    if (st)
        return nlsepy_raise(st);
    return PyFloat_FromDouble(nlse_magnet_omega_estimate(&p));
}

static PyMethodDef magnet_methods[] = {
    {"get_phi", (PyCFunction)magnet_get, METH_NOARGS, "get_phi() -> Phi (NaN inside the magnet)."},
    {"set_phi", (PyCFunction)magnet_set, METH_O, "set_phi(phi): initial guess."},
    {"set_dirichlet", (PyCFunction)magnet_dirichlet, METH_O,
     "set_dirichlet(values or None): Dirichlet data on every boundary but the axis."},
    {"solve", (PyCFunction)magnet_solve, METH_VARARGS,
     "solve(method, omega, tol, max_iter) -> (iterations, rel_residual, converged, history)."},
    {"restart", (PyCFunction)magnet_restart, METH_NOARGS,
     "restart(): drop the mg-cg iteration in progress (the next mg-cg solve begins from Phi)."},
    {"last_solve_seconds", (PyCFunction)magnet_seconds, METH_NOARGS,
     "last_solve_seconds() -> seconds of the last solve's iterations (device time on CUDA)."},
    {"rel_residual", (PyCFunction)magnet_residual, METH_NOARGS,
     "rel_residual() -> ||f - A Phi|| / ||f|| of the current Phi."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject MagnetType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = NLSEPY_TYPE_NAME("Magnet"),
    .tp_basicsize = sizeof(MagnetObject),
    .tp_dealloc = (destructor)magnet_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Axisymmetric Laplace solver of magnet design (C core).",
    .tp_methods = magnet_methods,
    .tp_init = (initproc)magnet_init,
    .tp_new = PyType_GenericNew,
};

static PyMethodDef magnet_functions[] = {
    {"magnet_omega_estimate", (PyCFunction)(void (*)(void))m_magnet_omega,
     METH_VARARGS | METH_KEYWORDS,
     "magnet_omega_estimate(r0, z0, r1, z1, dr, dz, B, dtype) -> omega of eqs. 2.44 and A.1."},
    {NULL, NULL, 0, NULL}};

int nlsepy_bind_magnet(PyObject *m)
{
    if (nlsepy_add_type(m, &MagnetType, "Magnet") < 0 ||
        PyModule_AddFunctions(m, magnet_functions) < 0)
        return -1;
    const struct { const char *name; int value; } consts[] = {
        {"MAGNET_JACOBI", NLSE_MAGNET_JACOBI}, {"MAGNET_GAUSS_SEIDEL", NLSE_MAGNET_GAUSS_SEIDEL},
        {"MAGNET_SOR", NLSE_MAGNET_SOR}, {"MAGNET_RBSOR", NLSE_MAGNET_RBSOR},
        {"MAGNET_MULTIGRID", NLSE_MAGNET_MULTIGRID}, {"MAGNET_MGCG", NLSE_MAGNET_MGCG}};
    for (size_t q = 0; q < sizeof consts / sizeof consts[0]; ++q)
        if (PyModule_AddIntConstant(m, consts[q].name, consts[q].value) < 0)
            return -1;
    return 0;
}
