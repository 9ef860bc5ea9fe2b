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
    NLSEPY_DROP(self, nlse_magnet_destroy);
    if (nlsepy_init_status(nlse_magnet_create(&p, &self->s)))
        return -1;
    nlse_magnet_shape(self->s, &self->nr, &self->nz);
    self->p = p;
    return 0;
}

NLSEPY_DEALLOC(magnet_dealloc, MagnetObject, nlse_magnet_destroy)

static PyObject *magnet_get(MagnetObject *self, PyObject *Py_UNUSED(ignored))
{
    const size_t shape[2] = {self->nr, self->nz};
    PyObject *out = NLSEPY_READY(self) ? nlsepy_new_array(2, shape, NPY_FLOAT64) : NULL;
    if (!out)
        return NULL;
    return nlsepy_array_result(
        out, nlse_magnet_get_phi(self->s, (double *)PyArray_DATA((PyArrayObject *)out)));
}

/* set(s, values) of a float64 (nr, nz) array `obj` (converted when needed;
 * ValueError naming `what` for another shape) */
static PyObject *set_grid(MagnetObject *self, PyObject *obj, const char *what,
                          int (*set)(nlse_magnet *, const double *))
{
    PyArrayObject *a = (PyArrayObject *)PyArray_FROMANY(obj, NPY_FLOAT64, 2, 2,
                                                        NPY_ARRAY_IN_ARRAY);
    if (!a)
        return NULL;
    if ((size_t)PyArray_DIM(a, 0) != self->nr || (size_t)PyArray_DIM(a, 1) != self->nz) {
        PyErr_Format(PyExc_ValueError, "%s must have shape (%zu, %zu), got (%zd, %zd)", what,
                     self->nr, self->nz, (Py_ssize_t)PyArray_DIM(a, 0),
                     (Py_ssize_t)PyArray_DIM(a, 1));
        Py_DECREF(a);
        return NULL;
    }
    int st = set(self->s, (const double *)PyArray_DATA(a));
    Py_DECREF(a);
    return nlsepy_none(st);
}

static PyObject *magnet_set(MagnetObject *self, PyObject *obj)
{
    return NLSEPY_READY(self) ? set_grid(self, obj, "phi", nlse_magnet_set_phi) : NULL;
}

static PyObject *magnet_dirichlet(MagnetObject *self, PyObject *obj)
{
    if (!NLSEPY_READY(self))
        return NULL;
    if (obj == Py_None)
        return nlsepy_none(nlse_magnet_set_dirichlet(self->s, NULL));
    return set_grid(self, obj, "boundary values", nlse_magnet_set_dirichlet);
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
    if (!nlsepy_array_result(hist, st))
        return NULL;
    PyObject *h = PySequence_GetSlice(hist, 0, (Py_ssize_t)it);
    Py_DECREF(hist);
    if (!h)
        return NULL;
    return Py_BuildValue("(ldON)", it, rel, conv ? Py_True : Py_False, h);
}

NLSEPY_ACTION(magnet_restart, MagnetObject, nlse_magnet_restart)
NLSEPY_GETTER(magnet_seconds, MagnetObject, PyFloat_FromDouble, nlse_magnet_last_solve_seconds)
NLSEPY_GETTER(magnet_residual, MagnetObject, PyFloat_FromDouble, nlse_magnet_rel_residual)

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

NLSEPY_SOLVER_TYPE(MagnetType, "Magnet", MagnetObject, magnet_init, magnet_dealloc,
                   magnet_methods, "Axisymmetric Laplace solver of magnet design (C core).");

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
    const nlsepy_constant consts[] = {
        {"MAGNET_JACOBI", NLSE_MAGNET_JACOBI}, {"MAGNET_GAUSS_SEIDEL", NLSE_MAGNET_GAUSS_SEIDEL},
        {"MAGNET_SOR", NLSE_MAGNET_SOR}, {"MAGNET_RBSOR", NLSE_MAGNET_RBSOR},
        {"MAGNET_MULTIGRID", NLSE_MAGNET_MULTIGRID}, {"MAGNET_MGCG", NLSE_MAGNET_MGCG}};
    return nlsepy_add_constants(m, consts, sizeof consts / sizeof consts[0]);
}
