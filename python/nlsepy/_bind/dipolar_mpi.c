/*
 * _bind/dipolar_mpi.c -- binding of the distributed dipolar GPE solver
 * (csrc/dipolar/dipolar_mpi.h: x slabs over the ranks of an mpi4py
 * communicator, FFTW's MPI transforms, transposes for the x solve; Loncar,
 * thesis, chapter 6) in the `_mpi` extension: the `DipolarMPI` type, with
 * the methods of `_core.Dipolar` on the local slab, and `dipolar_slab`.
 */
#include "bind.h"
#include <mpi.h>
#include <mpi4py/mpi4py.h>
#include "dipolar_mpi.h"

#define CAPSULE_NAME "nlsepy.nlse_comm"

typedef struct {
    NLSEPY_SOLVER_HEAD(nlse_dipolar_mpi, nlse_dipolar_params)
    PyObject *capsule; /* keeps the reduction table alive */
    size_t local[3];   /* slab shape */
    size_t i0;
} DipolarMPIObject;

static MPI_Comm *comm_of(PyObject *obj)
{
    MPI_Comm *pc = PyMPIComm_Get(obj);
    if (!pc)
        return NULL;
    if (*pc == MPI_COMM_NULL) {
        PyErr_SetString(PyExc_ValueError, "comm is MPI.COMM_NULL: pass a valid communicator");
        return NULL;
    }
    return pc;
}

static int dmpi_init(DipolarMPIObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"comm", "capsule", "geometry", "shape", "spacing", "dtype", "dt",
                             "kin", "trap", "g", "gdd", "cutoff", "kscale", "dipolar",
                             "fft_effort", NULL};
    PyObject *comm, *cap, *shape, *spacing, *trap;
    nlse_dipolar_params p;
    memset(&p, 0, sizeof p);
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOiOOiddOddddii", kwlist, &comm, &cap,
                                     &p.geometry, &shape, &spacing, &p.dtype, &p.dt, &p.kin,
                                     &trap, &p.g, &p.gdd, &p.cutoff, &p.kscale, &p.dipolar,
                                     &p.fft_effort))
        return -1;
    MPI_Comm *pc = comm_of(comm);
    if (!pc)
        return -1;
    nlse_comm *red = (nlse_comm *)PyCapsule_GetPointer(cap, CAPSULE_NAME);
    if (!red)
        return -1;
    if (p.geometry != NLSE_DIPOLAR_3D) {
        PyErr_Format(PyExc_ValueError, "the distributed solver runs the 3d geometry only");
        return -1;
    }
    if (nlsepy_parse_triple(shape, 3, "shape", NULL, p.shape) ||
        nlsepy_parse_triple(spacing, 3, "spacing", p.spacing, NULL) ||
        nlsepy_parse_triple(trap, 3, "trap", p.trap, NULL))
        return -1;
    if (self->s) {
        nlse_dipolar_mpi_destroy(self->s);
        self->s = NULL;
    }
    MPI_Comm c = *pc;
    int st;
    NLSEPY_RUN(self, st, nlse_dipolar_mpi_create(&p, c, red, &self->s));
    if (st) {
        nlsepy_raise(st);
        return -1;
    }
    Py_INCREF(cap);
    Py_XSETREF(self->capsule, cap);
    self->p = p;
    size_t nj, j0;
    nlse_dipolar_mpi_local(self->s, &self->local[0], &self->i0, &nj, &j0);
    self->local[1] = p.shape[1];
    self->local[2] = p.shape[2];
    return 0;
}

static void dmpi_dealloc(DipolarMPIObject *self)
{
    nlse_dipolar_mpi_destroy(self->s);
    Py_XDECREF(self->capsule);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* An aligned C-contiguous array of the slab's shape: complex (allow_complex)
 * or real in the solver's precision; *is_complex says which. */
static PyArrayObject *slab_array(DipolarMPIObject *self, PyObject *obj, const char *name,
                                 int allow_complex, int *is_complex)
{
    if (!PyArray_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be a numpy.ndarray, got %s", name,
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    PyArrayObject *a = (PyArrayObject *)obj;
    int tr = nlsepy_npy_type(self->p.dtype, 1), tc = nlsepy_npy_type(self->p.dtype, 0);
    int t = PyArray_TYPE(a);
    if (t == tc && allow_complex) {
        *is_complex = 1;
    } else if (t == tr) {
        *is_complex = 0;
    } else {
        PyErr_Format(PyExc_TypeError, "%s must have the solver's precision (%s)", name,
                     self->p.dtype == NLSE_COMPLEX64 ? "float32/complex64" : "float64/complex128");
        return NULL;
    }
    return nlsepy_check_grid(a, name, 3, self->local);
}

static PyObject *status(int st)
{
    if (st)
        return nlsepy_raise(st);
    Py_RETURN_NONE;
}

static PyObject *dmpi_set_state(DipolarMPIObject *self, PyObject *obj)
{
    int cplx = 0, st;
    if (!NLSEPY_READY(self))
        return NULL;
    PyArrayObject *a = slab_array(self, obj, "psi", 1, &cplx);
    if (!a)
        return NULL;
    NLSEPY_RUN(self, st, nlse_dipolar_mpi_set_state(self->s, PyArray_DATA(a), cplx));
    return status(st);
}

static PyObject *slab_doubles(DipolarMPIObject *self, int nd, const npy_intp *dims)
{
    return PyArray_SimpleNew(nd, (npy_intp *)dims, NPY_FLOAT64);
}

static PyObject *dmpi_get_state(DipolarMPIObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!NLSEPY_READY(self))
        return NULL;
    npy_intp dims[3] = {(npy_intp)self->local[0], (npy_intp)self->local[1],
                        (npy_intp)self->local[2]};
    PyObject *out = PyArray_SimpleNew(3, dims, nlsepy_npy_type(self->p.dtype, 0));
    if (!out)
        return NULL;
    int st;
    NLSEPY_RUN(self, st, nlse_dipolar_mpi_get_state(self->s, PyArray_DATA((PyArrayObject *)out)));
    if (st) {
        Py_DECREF(out);
        return nlsepy_raise(st);
    }
    return out;
}

static PyObject *dmpi_is_real(DipolarMPIObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!NLSEPY_READY(self))
        return NULL;
    return PyBool_FromLong(nlse_dipolar_mpi_state_is_real(self->s));
}

static PyObject *dmpi_set_dt(DipolarMPIObject *self, PyObject *arg)
{
    if (!NLSEPY_READY(self))
        return NULL;
    double dt = PyFloat_AsDouble(arg);
    if (dt == -1.0 && PyErr_Occurred())
        return NULL;
    int st = nlse_dipolar_mpi_set_dt(self->s, dt);
    if (!st)
        self->p.dt = dt;
    return status(st);
}

static PyObject *dmpi_set_couplings(DipolarMPIObject *self, PyObject *args)
{
    double g, gdd;
    int st;
    if (!NLSEPY_READY(self) || !PyArg_ParseTuple(args, "dd", &g, &gdd))
        return NULL;
    NLSEPY_RUN(self, st, nlse_dipolar_mpi_set_couplings(self->s, g, gdd));
    return status(st);
}

static PyObject *dmpi_set_potential(DipolarMPIObject *self, PyObject *obj)
{
    int st, cplx = 0;
    if (!NLSEPY_READY(self))
        return NULL;
    if (obj == Py_None) {
        st = nlse_dipolar_mpi_set_potential(self->s, NULL);
    } else {
        PyArrayObject *a = slab_array(self, obj, "V", 0, &cplx);
        if (!a)
            return NULL;
        NLSEPY_RUN(self, st, nlse_dipolar_mpi_set_potential(self->s, PyArray_DATA(a)));
    }
    return status(st);
}

static PyObject *dmpi_set_obstacle(DipolarMPIObject *self, PyObject *obj)
{
    int st;
    if (!NLSEPY_READY(self))
        return NULL;
    if (obj == Py_None) {
        st = nlse_dipolar_mpi_set_obstacle(self->s, NULL);
    } else {
        nlse_dipolar_obstacle o;
        if (!PyArg_ParseTuple(obj, "ddddddii", &o.V0, &o.sigma, &o.velocity, &o.start, &o.t_move,
                              &o.t_off, &o.beam_axis, &o.move_axis))
            return NULL;
        st = nlse_dipolar_mpi_set_obstacle(self->s, &o);
    }
    return status(st);
}

/* step(mode, n, t0, dg, dgdd) -> (done, blew_up) */
static PyObject *dmpi_step(DipolarMPIObject *self, PyObject *args)
{
    int mode, st;
    long n, done = 0;
    double t0, dg, dgdd;
    if (!NLSEPY_READY(self) || !PyArg_ParseTuple(args, "ilddd", &mode, &n, &t0, &dg, &dgdd))
        return NULL;
    NLSEPY_RUN(self, st, nlse_dipolar_mpi_step(self->s, mode, n, t0, dg, dgdd, &done));
    if (st && st != NLSE_ERR_BLOWUP)
        return nlsepy_raise(st);
    return Py_BuildValue("lO", done, st == NLSE_ERR_BLOWUP ? Py_True : Py_False);
}

static PyObject *dmpi_observe(DipolarMPIObject *self, PyObject *arg)
{
    if (!NLSEPY_READY(self))
        return NULL;
    double t = PyFloat_AsDouble(arg);
    if (t == -1.0 && PyErr_Occurred())
        return NULL;
    nlse_dipolar_obs o;
    int st;
    NLSEPY_RUN(self, st, nlse_dipolar_mpi_observe(self->s, t, &o));
    if (st)
        return nlsepy_raise(st);
    return Py_BuildValue("{s:d,s:d,s:d,s:d,s:d,s:d,s:(ddd),s:d}", "norm", o.norm, "norm_sum",
                         o.norm_sum, "mu", o.mu, "energy", o.energy, "kinetic", o.kinetic,
                         "kinetic_modulus", o.kinetic_modulus, "x2", o.x2[0], o.x2[1], o.x2[2],
                         "psi0sq", o.psi0sq);
}

/* A new float64 array of `dims` filled by fill(self, data, a, t). */
static PyObject *filled(DipolarMPIObject *self, int nd, const npy_intp *dims,
                        int (*fill)(DipolarMPIObject *, double *, long, double), long a, double t)
{
    PyObject *out = slab_doubles(self, nd, dims);
    if (!out)
        return NULL;
    int st;
    NLSEPY_RUN(self, st, fill(self, (double *)PyArray_DATA((PyArrayObject *)out), a, t));
    if (st) {
        Py_DECREF(out);
        return nlsepy_raise(st);
    }
    return out;
}

static int fill_dd(DipolarMPIObject *self, double *o, long a, double t)
{
    return nlse_dipolar_mpi_dd_potential(self->s, o);
}
static int fill_pot(DipolarMPIObject *self, double *o, long a, double t)
{
    return nlse_dipolar_mpi_potential(self->s, t, o);
}
static int fill_den(DipolarMPIObject *self, double *o, long a, double t)
{
    return nlse_dipolar_mpi_density_part(self->s, (int)a, o);
}
static int fill_kernel(DipolarMPIObject *self, double *o, long a, double t)
{
    return nlse_dipolar_mpi_kernel(self->s, o);
}

static void slab_dims(DipolarMPIObject *self, npy_intp *dims)
{
    for (int q = 0; q < 3; ++q)
        dims[q] = (npy_intp)self->local[q];
}

static PyObject *dmpi_dd_potential(DipolarMPIObject *self, PyObject *Py_UNUSED(ignored))
{
    npy_intp dims[3];
    if (!NLSEPY_READY(self))
        return NULL;
    slab_dims(self, dims);
    return filled(self, 3, dims, fill_dd, 0, 0.0);
}

static PyObject *dmpi_potential(DipolarMPIObject *self, PyObject *arg)
{
    npy_intp dims[3];
    if (!NLSEPY_READY(self))
        return NULL;
    double t = PyFloat_AsDouble(arg);
    if (t == -1.0 && PyErr_Occurred())
        return NULL;
    slab_dims(self, dims);
    return filled(self, 3, dims, fill_pot, 0, t);
}

/* density(keep_mask) -> this slab's part (x rows local when x is kept) */
static PyObject *dmpi_density(DipolarMPIObject *self, PyObject *arg)
{
    npy_intp dims[3];
    int nd = 0;
    if (!NLSEPY_READY(self))
        return NULL;
    long keep = PyLong_AsLong(arg);
    if (keep == -1 && PyErr_Occurred())
        return NULL;
    if (keep < 0 || keep > 7)
        return PyErr_Format(PyExc_ValueError, "keep mask must be 0..7, got %ld", keep);
    for (int q = 0; q < 3; ++q)
        if ((keep >> q) & 1)
            dims[nd++] = (npy_intp)self->local[q];
    return filled(self, nd, dims, fill_den, keep, 0.0);
}

static PyObject *dmpi_kernel(DipolarMPIObject *self, PyObject *Py_UNUSED(ignored))
{
    npy_intp dims[3];
    if (!NLSEPY_READY(self))
        return NULL;
    slab_dims(self, dims);
    dims[2] = dims[2] / 2 + 1;
    return filled(self, 3, dims, fill_kernel, 0, 0.0);
}

static PyObject *dmpi_bytes(DipolarMPIObject *self, PyObject *arg)
{
    if (!NLSEPY_READY(self))
        return NULL;
    long mode = PyLong_AsLong(arg);
    if (mode == -1 && PyErr_Occurred())
        return NULL;
    return PyFloat_FromDouble(nlse_dipolar_mpi_bytes_per_point_step(self->s, (int)mode));
}

static PyObject *dmpi_memory(DipolarMPIObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!NLSEPY_READY(self))
        return NULL;
    return PyLong_FromSize_t(nlse_dipolar_mpi_memory_bytes(self->s));
}

static PyObject *dmpi_last_seconds(DipolarMPIObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!NLSEPY_READY(self))
        return NULL;
    double tm[4];
    nlse_dipolar_mpi_timings(self->s, tm);
    return PyFloat_FromDouble(tm[0]);
}

static PyObject *dmpi_timings(DipolarMPIObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!NLSEPY_READY(self))
        return NULL;
    double tm[4];
    nlse_dipolar_mpi_timings(self->s, tm);
    return Py_BuildValue("{s:d,s:d,s:d,s:d}", "step", tm[0], "transpose", tm[1], "fft", tm[2],
                         "reduce", tm[3]);
}

/* x_solve() -> "MPI_Alltoallv" or "substructured" */
static PyObject *dmpi_x_solve(DipolarMPIObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!NLSEPY_READY(self))
        return NULL;
    return PyUnicode_FromString(nlse_dipolar_mpi_x_solve(self->s) ==
                                        NLSE_DIPOLAR_XSOLVE_SUBSTRUCTURE
                                    ? "substructured"
                                    : "MPI_Alltoallv");
}

/* local() -> (ni, i0, nj, j0): the x slab and the y rows of the x pencils */
static PyObject *dmpi_local(DipolarMPIObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!NLSEPY_READY(self))
        return NULL;
    size_t ni, i0, nj, j0;
    nlse_dipolar_mpi_local(self->s, &ni, &i0, &nj, &j0);
    return Py_BuildValue("nnnn", (Py_ssize_t)ni, (Py_ssize_t)i0, (Py_ssize_t)nj, (Py_ssize_t)j0);
}

static PyMethodDef dmpi_methods[] = {
    {"set_state", (PyCFunction)dmpi_set_state, METH_O,
     "set_state(psi): the slab, real or complex."},
    {"get_state", (PyCFunction)dmpi_get_state, METH_NOARGS, "get_state() -> the slab (complex)."},
    {"is_real", (PyCFunction)dmpi_is_real, METH_NOARGS, "True when the state is stored real."},
    {"set_dt", (PyCFunction)dmpi_set_dt, METH_O, "set_dt(dt)."},
    {"set_couplings", (PyCFunction)dmpi_set_couplings, METH_VARARGS,
     "set_couplings(g, gdd) (collective when it makes the FFT plans)."},
    {"set_potential", (PyCFunction)dmpi_set_potential, METH_O, "set_potential(slab or None)."},
    {"set_obstacle", (PyCFunction)dmpi_set_obstacle, METH_O,
     "set_obstacle((V0, sigma, velocity, start, t_move, t_off, beam_axis, move_axis) or None)."},
    {"step", (PyCFunction)dmpi_step, METH_VARARGS,
     "step(mode, n, t0, dg, dgdd) -> (done, blew_up); collective."},
    {"observe", (PyCFunction)dmpi_observe, METH_O,
     "observe(t) -> dict of raw observables of the whole grid; collective."},
    {"dipolar_potential", (PyCFunction)dmpi_dd_potential, METH_NOARGS,
     "dipolar_potential() -> V_dd * |psi|^2 on the slab (float64); collective."},
    {"potential", (PyCFunction)dmpi_potential, METH_O, "potential(t) -> V(r, t) on the slab."},
    {"density", (PyCFunction)dmpi_density, METH_O,
     "density(keep_mask) -> this slab's part of the integrated density."},
    {"kernel", (PyCFunction)dmpi_kernel, METH_NOARGS,
     "kernel() -> the dipolar kernel on the slab's x rows of the r2c grid."},
    {"memory_bytes", (PyCFunction)dmpi_memory, METH_NOARGS, "memory_bytes() -> bytes held."},
    {"last_step_seconds", (PyCFunction)dmpi_last_seconds, METH_NOARGS,
     "last_step_seconds() -> duration of the last step() call's steps."},
    {"timings", (PyCFunction)dmpi_timings, METH_NOARGS,
     "timings() -> seconds of the last step() call: step, transpose, fft, reduce."},
    {"bytes_per_point_step", (PyCFunction)dmpi_bytes, METH_O,
     "bytes_per_point_step(mode) -> memory traffic model."},
    {"x_solve", (PyCFunction)dmpi_x_solve, METH_NOARGS,
     "x_solve() -> how the x solve crosses the slabs: \"MPI_Alltoallv\" (transposes) or "
     "\"substructured\" (NLSEPY_DIPOLAR_XSOLVE)."},
    {"local", (PyCFunction)dmpi_local, METH_NOARGS,
     "local() -> (ni, i0, nj, j0): x slab and y rows of the x pencils."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject DipolarMPIType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = NLSEPY_TYPE_NAME("DipolarMPI"),
    .tp_basicsize = sizeof(DipolarMPIObject),
    .tp_dealloc = (destructor)dmpi_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Split-step Crank-Nicolson solver of the 3D dipolar GPE over MPI ranks (x slabs).",
    .tp_methods = dmpi_methods,
    .tp_init = (initproc)dmpi_init,
    .tp_new = PyType_GenericNew,
};

/* dipolar_slab(comm, (nx, ny, nz)) -> (ni, i0): FFTW's x slab of this rank */
static PyObject *m_dipolar_slab(PyObject *Py_UNUSED(m), PyObject *args)
{
    PyObject *comm, *shape;
    size_t sh[3], ni, i0;
    if (!PyArg_ParseTuple(args, "OO", &comm, &shape))
        return NULL;
    MPI_Comm *pc = comm_of(comm);
    if (!pc || nlsepy_parse_triple(shape, 3, "shape", NULL, sh))
        return NULL;
    nlse_dipolar_mpi_slab(*pc, sh, &ni, &i0);
    return Py_BuildValue("nn", (Py_ssize_t)ni, (Py_ssize_t)i0);
}

static PyMethodDef dmpi_functions[] = {
    {"dipolar_slab", m_dipolar_slab, METH_VARARGS,
     "dipolar_slab(comm, shape) -> (rows, first row): FFTW's x slab of this rank."},
    {NULL, NULL, 0, NULL}};

int nlsepy_bind_dipolar_mpi(PyObject *m)
{
    if (import_mpi4py() < 0) /* mpi4py's C API is per file */
        return -1;
    if (nlsepy_add_type(m, &DipolarMPIType, "DipolarMPI") < 0 ||
        PyModule_AddFunctions(m, dmpi_functions) < 0 ||
        PyModule_AddStringConstant(m, "DIPOLAR_PEER", NLSE_DIPOLAR_MPI_PEER) < 0)
        return -1;
    return 0;
}
