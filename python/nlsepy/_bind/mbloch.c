/*
 * _bind/mbloch.c -- binding of the Maxwell-Bloch solver (C API
 * nlsepy/mbloch.h, source 004): the `Mbloch` type.  Arrays cross as
 * float64 / complex128 whatever the working precision; the sizes n_atoms and
 * n_t are those of the arrays given.  `set_comm` takes the reduction table
 * of a distributed run from the capsule the MPI extension makes (this
 * module links no MPI: it only hands the table's functions to the solver).
 */
#include <limits.h>

#include "bind.h"
#include "nlsepy/mbloch.h"

typedef struct {
    NLSEPY_SOLVER_HEAD(nlse_mbloch, nlse_mbloch_params)
    PyObject *comm; /* the capsule of the table the solver uses (kept alive) */
} MblochObject;

/* `obj` as an aligned C-contiguous array of `type` with `ndim` dimensions;
 * dims[q] >= 0 must match, dims[q] < 0 is filled in.  New reference or NULL. */
static PyArrayObject *mbloch_array(PyObject *obj, const char *name, int type, int ndim, npy_intp *dims)
{
    PyArrayObject *a = nlsepy_as_array(obj, type);
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

static int mbloch_init(MblochObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"n_g", "n_e", "l_min", "l_max", "F", "detunings", "weights",
                             "initial_state", "fields0", "h_t", "h_z", "beta", "kappa_g",
                             "kappa_e", "delta", "euler_substeps", "dtype", NULL};
    PyObject *oF, *odet, *ow, *opsi, *ofld;
    nlse_mbloch_params p;
    memset(&p, 0, sizeof p);
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iiiiOOOOOddddddii", kwlist, &p.n_g, &p.n_e,
                                     &p.l_min, &p.l_max, &oF, &odet, &ow, &opsi, &ofld, &p.h_t,
                                     &p.h_z, &p.beta, &p.kappa_g, &p.kappa_e, &p.delta,
                                     &p.euler_substeps, &p.dtype))
        return -1;
    if (p.n_g < 1 || p.n_e < 1 || p.l_max < p.l_min) {
        p.n_atoms = p.n_t = 2; /* let the C checks name the culprit */
        nlsepy_raise(nlse_mbloch_check_params(&p));
        return -1;
    }
    npy_intp dF[2] = {p.n_g, p.n_e}, dd[1] = {-1}, dw[1] = {-1};
    npy_intp dpsi[2] = {-1, p.n_g + p.n_e}, dfld[2] = {-1, p.l_max - p.l_min + 1};
    PyArrayObject *aF = NULL, *adet = NULL, *aw = NULL, *apsi = NULL, *afld = NULL;
    int ret = -1;
    if (!(aF = mbloch_array(oF, "F", NPY_FLOAT64, 2, dF)) ||
        !(adet = mbloch_array(odet, "detunings", NPY_FLOAT64, 1, dd)))
        goto done;
    dw[0] = dpsi[0] = dd[0]; /* one entry per atom */
    if (!(aw = mbloch_array(ow, "weights", NPY_FLOAT64, 1, dw)) ||
        !(apsi = mbloch_array(opsi, "initial_state", NPY_COMPLEX128, 2, dpsi)) ||
        !(afld = mbloch_array(ofld, "fields0", NPY_COMPLEX128, 2, dfld)))
        goto done;
    if (dd[0] > INT_MAX || dfld[0] > INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "n_atoms and n_t must be below 2**31");
        goto done;
    }
    p.n_atoms = (int)dd[0];
    p.n_t = (int)dfld[0];
    NLSEPY_DROP(self, nlse_mbloch_destroy);
    Py_CLEAR(self->comm);
    int st = nlse_mbloch_create(&p, (const double *)PyArray_DATA(aF),
                            (const double *)PyArray_DATA(adet), (const double *)PyArray_DATA(aw),
                            (const double *)PyArray_DATA(apsi), (const double *)PyArray_DATA(afld),
                            &self->s);
    if (st) {
        nlsepy_raise(st);
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

/* the solver first: it holds a pointer into the capsule */
NLSEPY_DEALLOC_KEEP(mbloch_dealloc, MblochObject, nlse_mbloch_destroy, comm)

NLSEPY_SET_COMM(mbloch_set_comm, MblochObject, nlse_mbloch_set_comm)

/* atoms(want_pop) / step(want_pop): the kernels with the GIL released;
 * a blow-up raises nlsepy.BlowUpError (the fields of the last z are kept). */
static PyObject *mbloch_call(MblochObject *self, int (*fn)(nlse_mbloch *, int), int arg)
{
    int st;
    NLSEPY_RUN(self, st, fn(self->s, arg));
    return nlsepy_none(st);
}

static PyObject *mbloch_run(MblochObject *self, PyObject *arg, int (*fn)(nlse_mbloch *, int))
{
    if (!NLSEPY_READY(self))
        return NULL;
    const int want = PyObject_IsTrue(arg);
    if (want < 0)
        return NULL;
    return mbloch_call(self, fn, want);
}

static PyObject *mbloch_atoms(MblochObject *self, PyObject *arg) { return mbloch_run(self, arg, nlse_mbloch_atoms); }
static PyObject *mbloch_step(MblochObject *self, PyObject *arg) { return mbloch_run(self, arg, nlse_mbloch_step); }

/* steps(n): n z steps without populations (several a launch where the
 * backend can), the GIL released */
static PyObject *mbloch_steps(MblochObject *self, PyObject *arg)
{
    long n;
    if (!NLSEPY_READY(self) || nlsepy_parse_long(arg, &n))
        return NULL;
    if (n < 0 || n > INT_MAX) {
        PyErr_Format(PyExc_ValueError, "steps: n = %ld must be in [0, %d]", n, INT_MAX);
        return NULL;
    }
    return mbloch_call(self, nlse_mbloch_steps, (int)n);
}

/* set_open(decay_from, decay_to, decay_rate, dephasing, shift, rho0): the
 * atoms as density matrices (nlse_mbloch_set_open); dephasing (n, n) and
 * shift (n_atoms, n) may be None. */
static PyObject *mbloch_set_open(MblochObject *self, PyObject *args)
{
    PyObject *of, *ot, *orate, *ogam, *oshift, *orho;
    if (!NLSEPY_READY(self) || !PyArg_ParseTuple(args, "OOOOOO", &of, &ot, &orate, &ogam, &oshift, &orho))
        return NULL;
    const npy_intp n = self->p.n_g + self->p.n_e;
    npy_intp dc[1] = {-1}, dt[1] = {-1}, dr[1] = {-1}, dg[2] = {n, n}, ds[2] = {self->p.n_atoms, n};
    npy_intp d0[3] = {self->p.n_atoms, n, n};
    PyArrayObject *af = NULL, *at = NULL, *ar = NULL, *ag = NULL, *ash = NULL, *a0 = NULL;
    PyObject *ret = NULL;
    if (!(af = mbloch_array(of, "decay_from", NPY_INT32, 1, dc)))
        goto done;
    dt[0] = dr[0] = dc[0];
    if (!(at = mbloch_array(ot, "decay_to", NPY_INT32, 1, dt)) ||
        !(ar = mbloch_array(orate, "decay_rate", NPY_FLOAT64, 1, dr)) ||
        (ogam != Py_None && !(ag = mbloch_array(ogam, "dephasing", NPY_FLOAT64, 2, dg))) ||
        (oshift != Py_None && !(ash = mbloch_array(oshift, "shift", NPY_FLOAT64, 2, ds))) ||
        !(a0 = mbloch_array(orho, "rho0", NPY_COMPLEX128, 3, d0)))
        goto done;
    if (dc[0] > INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "too many decay channels");
        goto done;
    }
    nlse_mbloch_open o;
    o.n_decay = (int)dc[0];
    o.decay_from = (const int *)PyArray_DATA(af);
    o.decay_to = (const int *)PyArray_DATA(at);
    o.decay_rate = (const double *)PyArray_DATA(ar);
    o.gam = ag ? (const double *)PyArray_DATA(ag) : NULL;
    o.shift = ash ? (const double *)PyArray_DATA(ash) : NULL;
    o.rho0 = (const double *)PyArray_DATA(a0);
    const int st = nlse_mbloch_set_open(self->s, &o);
    if (st)
        nlsepy_raise(st);
    else
        ret = Py_NewRef(Py_None);
done:
    Py_XDECREF(af);
    Py_XDECREF(at);
    Py_XDECREF(ar);
    Py_XDECREF(ag);
    Py_XDECREF(ash);
    Py_XDECREF(a0);
    return ret;
}

/* get_density() -> (n_t, n, n) complex128, the ensemble density matrix */
static PyObject *mbloch_density(MblochObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!NLSEPY_READY(self))
        return NULL;
    const npy_intp n = self->p.n_g + self->p.n_e;
    npy_intp dims[3] = {self->p.n_t, n, n};
    PyObject *out = PyArray_SimpleNew(3, dims, NPY_COMPLEX128);
    if (!out)
        return NULL;
    return nlsepy_array_result(out, nlse_mbloch_get_density(self->s, (double *)PyArray_DATA((PyArrayObject *)out)));
}

NLSEPY_GETTER(mbloch_pipeline, MblochObject, PyLong_FromLong, nlse_mbloch_pipeline)

/* A new (n_t, cols) array of `type` filled by `get`. */
static PyObject *mbloch_get(MblochObject *self, int (*get)(const nlse_mbloch *, double *), int cols, int type)
{
    if (!NLSEPY_READY(self))
        return NULL;
    npy_intp dims[2] = {self->p.n_t, cols};
    PyObject *out = PyArray_SimpleNew(2, dims, type);
    if (!out)
        return NULL;
    return nlsepy_array_result(out, get(self->s, (double *)PyArray_DATA((PyArrayObject *)out)));
}

static PyObject *mbloch_fields(MblochObject *self, PyObject *Py_UNUSED(ignored))
{
    return mbloch_get(self, nlse_mbloch_get_fields, self->p.l_max - self->p.l_min + 1, NPY_COMPLEX128);
}

static PyObject *mbloch_polarisation(MblochObject *self, PyObject *Py_UNUSED(ignored))
{
    return mbloch_get(self, nlse_mbloch_get_polarisation, self->p.l_max - self->p.l_min + 1,
                  NPY_COMPLEX128);
}

static PyObject *mbloch_populations(MblochObject *self, PyObject *Py_UNUSED(ignored))
{
    return mbloch_get(self, nlse_mbloch_get_populations, self->p.n_g + self->p.n_e, NPY_FLOAT64);
}

NLSEPY_GETTER(mbloch_z_index, MblochObject, PyLong_FromLong, nlse_mbloch_z_index)
NLSEPY_GETTER(mbloch_norm_dev, MblochObject, PyFloat_FromDouble, nlse_mbloch_norm_deviation)
NLSEPY_GETTER(mbloch_seconds, MblochObject, PyFloat_FromDouble, nlse_mbloch_last_seconds)

static PyObject *mbloch_couplings(MblochObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!NLSEPY_READY(self))
        return NULL;
    return PyLong_FromLong(nlse_mbloch_couplings(&self->p));
}

static PyMethodDef mbloch_methods[] = {
    {"atoms", (PyCFunction)mbloch_atoms, METH_O,
     "atoms(want_pop): solve every atom at the current z (polarisation, populations)."},
    {"step", (PyCFunction)mbloch_step, METH_O,
     "step(want_pop): one z step (atoms at z_j, then AB2 or the Euler start)."},
    {"steps", (PyCFunction)mbloch_steps, METH_O,
     "steps(n): n z steps without populations, the fields of n step(False) calls."},
    NLSEPY_SET_COMM_METHOD(mbloch_set_comm, "this solver's atoms; the polarisation summed over "
                                            "the processes once per atom solve"),
    {"pipeline", (PyCFunction)mbloch_pipeline, METH_NOARGS,
     "pipeline() -> z steps one launch can hold (1: one a launch)."},
    {"get_fields", (PyCFunction)mbloch_fields, METH_NOARGS, "get_fields() -> (n_t, N_F) complex128."},
    {"get_polarisation", (PyCFunction)mbloch_polarisation, METH_NOARGS,
     "get_polarisation() -> (n_t, N_F) complex128 of the last atom solve."},
    {"get_populations", (PyCFunction)mbloch_populations, METH_NOARGS,
     "get_populations() -> (n_t, n_g + n_e) float64 of the last solve that asked for them."},
    {"set_open", (PyCFunction)mbloch_set_open, METH_VARARGS,
     "set_open(decay_from, decay_to, decay_rate, dephasing, shift, rho0): density-matrix atoms."},
    {"get_density", (PyCFunction)mbloch_density, METH_NOARGS,
     "get_density() -> (n_t, n, n) complex128, sum_D w_D rho_D of the last solve with populations."},
    {"z_index", (PyCFunction)mbloch_z_index, METH_NOARGS, "z_index() -> j of the current fields."},
    {"norm_deviation", (PyCFunction)mbloch_norm_dev, METH_NOARGS,
     "norm_deviation() -> max | |psi|^2 - 1 | over every atom solve so far."},
    {"last_seconds", (PyCFunction)mbloch_seconds, METH_NOARGS,
     "last_seconds() -> seconds of the last step or atom solve (device time on CUDA)."},
    {"couplings", (PyCFunction)mbloch_couplings, METH_NOARGS,
     "couplings() -> nonzero (m, n) pairs of the coupling."},
    {NULL, NULL, 0, NULL},
};

NLSEPY_SOLVER_TYPE(MblochType, "Mbloch", MblochObject, mbloch_init, mbloch_dealloc,
                   mbloch_methods,
                   "Mbloch(n_g, n_e, l_min, l_max, F, detunings, weights, initial_state, fields0, "
                   "h_t, h_z, beta, kappa_g, kappa_e, delta, euler_substeps, dtype): Maxwell-Bloch "
                   "solver handle (C API nlse_mbloch).");

int nlsepy_bind_mbloch(PyObject *m)
{
    return nlsepy_add_type(m, &MblochType, "Mbloch");
}
