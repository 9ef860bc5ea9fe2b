/*
 * _bind/dipolar.c -- binding of the dipolar GPE solver (split-step
 * Crank-Nicolson with the FFT dipolar term; C API nlsepy/dipolar.h): the
 * `Dipolar` type and its constants DIPOLAR_IMAG, DIPOLAR_REAL.  Made with
 * `slab=`, it is one rank's x rows of a distributed run (the slab plan of
 * the same C handle: csrc/dipolar/dipolar_slab.c on CPU ranks,
 * cuda/dipolar/dipolar_dist.cu on GPU ranks); the arrays in and out are
 * then the slab's.
 */
#include "bind.h"
#include <stdint.h>
#include "nlsepy/dipolar.h"

typedef struct {
    NLSEPY_SOLVER_HEAD(nlse_dipolar, nlse_dipolar_params)
    int ndim;
    size_t row0;     /* a slab: its first x row (p.shape[0] is its row count) */
    PyObject *keep;  /* a slab: the rank-sum capsule it calls              */
} DipolarObject;

static void dtype_error(const char *name, int single, int allow_complex)
{
    PyErr_Format(PyExc_TypeError, "%s must have dtype %s%s", name, single ? "float32" : "float64",
                 allow_complex ? (single ? " or complex64" : " or complex128") : "");
}

NLSEPY_GETTER(dipolar_last_seconds, DipolarObject, PyFloat_FromDouble,
              nlse_dipolar_last_step_seconds)


/* An aligned C-contiguous array of the grid's shape: complex (allow_complex)
 * or real in the solver's precision; *is_complex says which.  Borrowed, or
 * NULL with an exception. */
static PyArrayObject *dipolar_array(DipolarObject *self, PyObject *obj, const char *name,
                                    int allow_complex, int *is_complex)
{
    if (!PyArray_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be a numpy.ndarray, got %s", name,
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    PyArrayObject *a = (PyArrayObject *)obj;
    const int t = PyArray_TYPE(a);
    if (t == nlsepy_npy_type(self->p.dtype, 0) && allow_complex) {
        *is_complex = 1;
    } else if (t == nlsepy_npy_type(self->p.dtype, 1)) {
        *is_complex = 0;
    } else {
        dtype_error(name, self->p.dtype == NLSE_COMPLEX64, allow_complex);
        return NULL;
    }
    return nlsepy_check_grid(a, name, self->ndim, self->p.shape);
}

static PyObject *dipolar_set_state(DipolarObject *self, PyObject *obj)
{
    int cplx = 0, st;
    PyArrayObject *a = NLSEPY_READY(self) ? dipolar_array(self, obj, "psi", 1, &cplx) : NULL;
    if (!a)
        return NULL;
    st = nlse_dipolar_set_state(self->s, PyArray_DATA(a), cplx);
    return nlsepy_none(st);
}

static PyObject *dipolar_get_state(DipolarObject *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *out = NLSEPY_READY(self) ? nlsepy_new_array(self->ndim, self->p.shape,
                                                          nlsepy_npy_type(self->p.dtype, 0))
                                       : NULL;
    if (!out)
        return NULL;
    int st;
    NLSEPY_RUN(self, st, nlse_dipolar_get_state(self->s, PyArray_DATA((PyArrayObject *)out)));
    return nlsepy_array_result(out, st);
}

NLSEPY_GETTER(dipolar_is_real, DipolarObject, PyBool_FromLong, nlse_dipolar_state_is_real)
NLSEPY_GETTER(dipolar_memory, DipolarObject, PyLong_FromSize_t, nlse_dipolar_memory_bytes)
NLSEPY_SET_DT(dipolar_set_dt, DipolarObject, nlse_dipolar_set_dt)

static PyObject *dipolar_set_couplings(DipolarObject *self, PyObject *args)
{
    double g, gdd;
    int st;
    if (!NLSEPY_READY(self) || !PyArg_ParseTuple(args, "dd", &g, &gdd))
        return NULL;
    NLSEPY_RUN(self, st, nlse_dipolar_set_couplings(self->s, g, gdd));
    if (!st) {
        self->p.g = g;
        self->p.gdd = gdd;
    }
    return nlsepy_none(st);
}

NLSEPY_SET_DOUBLE(dipolar_set_rotation, DipolarObject, nlse_dipolar_set_rotation)
NLSEPY_SET_DOUBLE(dipolar_set_lhy, DipolarObject, nlse_dipolar_set_lhy)

static PyObject *dipolar_set_potential(DipolarObject *self, PyObject *obj)
{
    int st, cplx = 0;
    if (!NLSEPY_READY(self))
        return NULL;
    if (obj == Py_None)
        return nlsepy_none(nlse_dipolar_set_potential(self->s, NULL));
    PyArrayObject *a = dipolar_array(self, obj, "V", 0, &cplx);
    if (!a)
        return NULL;
    st = nlse_dipolar_set_potential(self->s, PyArray_DATA(a));
    return nlsepy_none(st);
}

static PyObject *dipolar_set_obstacle(DipolarObject *self, PyObject *obj)
{
    nlse_dipolar_obstacle o;
    if (!NLSEPY_READY(self))
        return NULL;
    if (obj == Py_None)
        return nlsepy_none(nlse_dipolar_set_obstacle(self->s, NULL));
    if (!PyArg_ParseTuple(obj, "ddddddii", &o.V0, &o.sigma, &o.velocity, &o.start, &o.t_move,
                          &o.t_off, &o.beam_axis, &o.move_axis))
        return NULL;
    return nlsepy_none(nlse_dipolar_set_obstacle(self->s, &o));
}

/* step(mode, n, t0, dg, dgdd) -> (done, blew_up) */
static PyObject *dipolar_step(DipolarObject *self, PyObject *args)
{
    int mode, st;
    long n, done = 0;
    double t0, dg, dgdd;
    if (!NLSEPY_READY(self) || !PyArg_ParseTuple(args, "ilddd", &mode, &n, &t0, &dg, &dgdd))
        return NULL;
    NLSEPY_RUN(self, st, nlse_dipolar_step(self->s, mode, n, t0, dg, dgdd, &done));
    return nlsepy_steps_result(st, done);
}

static PyObject *dipolar_observe(DipolarObject *self, PyObject *arg)
{
    double t;
    if (!NLSEPY_READY(self) || nlsepy_parse_double(arg, &t))
        return NULL;
    nlse_dipolar_obs o;
    int st;
    NLSEPY_RUN(self, st, nlse_dipolar_observe(self->s, t, &o));
    if (st)
        return nlsepy_raise(st);
    return Py_BuildValue("{s:d,s:d,s:d,s:d,s:d,s:d,s:(ddd),s:d,s:d,s:d,s:d,s:d,s:d}", "norm",
                         o.norm, "norm_sum", o.norm_sum, "mu", o.mu, "energy", o.energy,
                         "kinetic", o.kinetic, "kinetic_modulus", o.kinetic_modulus, "x2",
                         o.x2[0], o.x2[1], o.x2[2], "psi0sq", o.psi0sq, "lz", o.lz, "potential",
                         o.potential, "contact", o.contact, "dipolar", o.dipolar, "lhy", o.lhy);
}

/* A new float64 array of `nd` dimensions of `shape` filled by
 * fill(self, data, a, b, t) with the GIL released. */
static PyObject *dipolar_doubles(DipolarObject *self, int nd, const size_t *shape,
                                 int (*fill)(DipolarObject *, double *, long, long, double),
                                 long a, long b, double t)
{
    PyObject *out = nlsepy_new_array(nd, shape, NPY_FLOAT64);
    if (!out)
        return NULL;
    int st;
    NLSEPY_RUN(self, st, fill(self, (double *)PyArray_DATA((PyArrayObject *)out), a, b, t));
    return nlsepy_array_result(out, st);
}

static int fill_dd(DipolarObject *self, double *o, long a, long b, double t)
{
    return nlse_dipolar_dd_potential(self->s, o);
}
static int fill_pot(DipolarObject *self, double *o, long a, long b, double t)
{
    return nlse_dipolar_potential(self->s, t, o);
}
static int fill_den(DipolarObject *self, double *o, long a, long b, double t)
{
    return nlse_dipolar_density(self->s, (int)a, o);
}
static int fill_kernel(DipolarObject *self, double *o, long a, long b, double t)
{
    return nlse_dipolar_kernel(self->s, o);
}

static PyObject *dipolar_dd_potential(DipolarObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!NLSEPY_READY(self))
        return NULL;
    return dipolar_doubles(self, self->ndim, self->p.shape, fill_dd, 0, 0, 0.0);
}

static PyObject *dipolar_potential(DipolarObject *self, PyObject *arg)
{
    double t;
    if (!NLSEPY_READY(self) || nlsepy_parse_double(arg, &t))
        return NULL;
    return dipolar_doubles(self, self->ndim, self->p.shape, fill_pot, 0, 0, t);
}

/* density(keep_mask): |psi|^2 integrated over the axes not kept (the
 * handle's part: a slab's x rows when x is kept) */
static PyObject *dipolar_density(DipolarObject *self, PyObject *arg)
{
    size_t dims[3];
    int nd = 0;
    long keep;
    if (!NLSEPY_READY(self) || nlsepy_parse_long(arg, &keep))
        return NULL;
    const int ndim = self->ndim;
    if (keep < 0 || keep >= (1L << ndim))
        return PyErr_Format(PyExc_ValueError, "keep mask must be 0..%ld, got %ld",
                            (1L << ndim) - 1, keep);
    for (int q = 0; q < ndim; ++q)
        if ((keep >> q) & 1)
            dims[nd++] = self->p.shape[q];
    return dipolar_doubles(self, nd, dims, fill_den, keep, 0, 0.0);
}

/* kernel(): the dipolar kernel on the r2c grid (the last axis n/2 + 1) */
static PyObject *dipolar_kernel(DipolarObject *self, PyObject *Py_UNUSED(ignored))
{
    size_t dims[3];
    if (!NLSEPY_READY(self))
        return NULL;
    const int ndim = self->ndim;
    memcpy(dims, self->p.shape, (size_t)ndim * sizeof dims[0]);
    dims[ndim - 1] = dims[ndim - 1] / 2 + 1;
    return dipolar_doubles(self, ndim, dims, fill_kernel, 0, 0, 0.0);
}

static PyObject *dipolar_bytes(DipolarObject *self, PyObject *arg)
{
    long mode;
    if (!NLSEPY_READY(self) || nlsepy_parse_long(arg, &mode))
        return NULL;
    return PyFloat_FromDouble(nlse_dipolar_bytes_per_point_step(self->s, (int)mode));
}

/* n sizes from a sequence of ints (each >= 0) into out. */
static int parse_sizes(PyObject *seq, const char *name, size_t **out, int *n)
{
    PyObject *f = PySequence_Fast(seq, "slab counts must be a sequence of ints");
    if (!f)
        return -1;
    Py_ssize_t m = PySequence_Fast_GET_SIZE(f);
    *out = (size_t *)calloc(m ? (size_t)m : 1, sizeof(size_t));
    if (!*out) {
        Py_DECREF(f);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t q = 0; q < m; ++q) {
        long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(f, q));
        if (v < 0) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "%s must be counts >= 0, got %lld", name, v);
            Py_DECREF(f);
            return -1;
        }
        (*out)[q] = (size_t)v;
    }
    *n = (int)m;
    Py_DECREF(f);
    return 0;
}

/* slab = (rank, xcounts, ycounts, capsule): a slab of a distributed run. */
static int create_slab(DipolarObject *self, const nlse_dipolar_params *p, PyObject *slab)
{
    int rank, nx = 0, ny = 0, st;
    PyObject *xs, *ys, *cap;
    size_t *xc = NULL, *yc = NULL;
    if (!PyArg_ParseTuple(slab, "iOOO", &rank, &xs, &ys, &cap))
        return -1;
    const nlse_comm *comm = nlsepy_comm_table(cap);
    if (!comm)
        return -1;
    if (parse_sizes(xs, "xcounts", &xc, &nx) || parse_sizes(ys, "ycounts", &yc, &ny))
        goto fail;
    if (nx != ny || nx < 1) {
        PyErr_Format(PyExc_ValueError, "xcounts and ycounts must have one count per rank, got %d "
                     "and %d", nx, ny);
        goto fail;
    }
    NLSEPY_RUN(self, st, nlse_dipolar_slab_create(p, rank, nx, xc, yc, comm, &self->s));
    if (st) {
        nlsepy_raise(st);
        goto fail;
    }
    self->row0 = 0;
    for (int r = 0; r < rank; ++r)
        self->row0 += xc[r];
    self->p = *p;
    self->p.shape[0] = xc[rank];
    Py_INCREF(cap);
    self->keep = cap;
    free(xc);
    free(yc);
    return 0;
fail:
    free(xc);
    free(yc);
    return -1;
}

static int dipolar_init(DipolarObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"geometry", "shape", "spacing", "dtype", "dt", "kin", "trap", "g",
                             "gdd", "cutoff", "kscale", "dipolar", "fft_effort", "slab", NULL};
    PyObject *shape, *spacing, *trap, *slab = Py_None;
    nlse_dipolar_params p;
    memset(&p, 0, sizeof p);
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iOOiddOddddii|O", kwlist, &p.geometry, &shape,
                                     &spacing, &p.dtype, &p.dt, &p.kin, &trap, &p.g, &p.gdd,
                                     &p.cutoff, &p.kscale, &p.dipolar, &p.fft_effort, &slab))
        return -1;
    int nd = nlse_dipolar_ndim(p.geometry);
    if (!nd) {
        PyErr_Format(PyExc_ValueError, "geometry must be 0-4, got %d", p.geometry);
        return -1;
    }
    if (nlsepy_parse_triple(shape, nd, "shape", NULL, p.shape) ||
        nlsepy_parse_triple(spacing, nd, "spacing", p.spacing, NULL) ||
        nlsepy_parse_triple(trap, nd, "trap", p.trap, NULL))
        return -1;
    NLSEPY_DROP(self, nlse_dipolar_destroy);
    Py_CLEAR(self->keep);
    self->ndim = nd;
    if (slab != Py_None)
        return create_slab(self, &p, slab);
    self->row0 = 0;
    int st;
    NLSEPY_RUN(self, st, nlse_dipolar_create(&p, &self->s));
    if (nlsepy_init_status(st))
        return -1;
    self->p = p;
    self->ndim = nd;
    return 0;
}

NLSEPY_DEALLOC_KEEP(dipolar_dealloc, DipolarObject, nlse_dipolar_destroy, keep)

/* step_record(mode, n, t0, dg, dgdd, every, phase) -> (done, blew_up, rows): rows a
 * float64 array (count, NLSE_DIPOLAR_MOMENTS) of the recorded steps' norm and
 * <x_a^2>; after a blow-up only the rows of the steps before it are kept. */
static PyObject *dipolar_step_record(DipolarObject *self, PyObject *args)
{
    int mode;
    long n, done = 0;
    double t0, dg, dgdd;
    nlse_dipolar_record rec;
    if (!NLSEPY_READY(self) || !PyArg_ParseTuple(args, "ildddll", &mode, &n, &t0, &dg, &dgdd,
                                                 &rec.every, &rec.phase))
        return NULL;
    if (rec.every < 1)
        return PyErr_Format(PyExc_ValueError, "every must be >= 1, got %ld", rec.every);
    if (rec.phase < 0 || rec.phase >= rec.every)
        return PyErr_Format(PyExc_ValueError, "phase must be 0..%ld, got %ld", rec.every - 1,
                            rec.phase);
    if (n < 0)
        return PyErr_Format(PyExc_ValueError, "steps must be >= 0, got %ld", n);
    const size_t shape[2] = {(size_t)nlse_dipolar_record_rows(&rec, n), NLSE_DIPOLAR_MOMENTS};
    PyObject *out = nlsepy_new_array(2, shape, NPY_FLOAT64);
    if (!out)
        return NULL;
    rec.out = (double *)PyArray_DATA((PyArrayObject *)out);
    int st;
    NLSEPY_RUN(self, st, nlse_dipolar_step_record(self->s, mode, n, t0, dg, dgdd, &rec, &done));
    if (st != NLSE_ERR_BLOWUP && !nlsepy_array_result(out, st))
        return NULL;
    if (st == NLSE_ERR_BLOWUP) { /* the rows of the steps before the failing one */
        PyObject *part = PySequence_GetSlice(out, 0, nlse_dipolar_record_rows(&rec, done));
        Py_DECREF(out);
        if (!part)
            return NULL;
        out = part;
    }
    return Py_BuildValue("lON", done, st == NLSE_ERR_BLOWUP ? Py_True : Py_False, out);
}

static int fill_phase(DipolarObject *self, double *o, long a, long b, double t)
{
    return nlse_dipolar_phase_slice(self->s, (int)a, b, o);
}

static PyObject *dipolar_phase_slice(DipolarObject *self, PyObject *args)
{
    size_t dims[3];
    int nd = 0, axis;
    long index;
    if (!NLSEPY_READY(self) || !PyArg_ParseTuple(args, "il", &axis, &index))
        return NULL;
    if (axis < 0 || axis >= self->ndim)
        return PyErr_Format(PyExc_ValueError, "axis must be 0..%d, got %d", self->ndim - 1, axis);
    if (index < 0 || (size_t)index >= self->p.shape[axis])
        return PyErr_Format(PyExc_ValueError, "index must be 0..%zu on axis %d, got %ld",
                            self->p.shape[axis] - 1, axis, index);
    for (int q = 0; q < self->ndim; ++q)
        if (q != axis)
            dims[nd++] = self->p.shape[q];
    if (axis == 0 && self->ndim == 3)
        index += (long)self->row0; /* a slab's C handle takes the grid's x row */
    return dipolar_doubles(self, nd, dims, fill_phase, axis, index, 0.0);
}

#ifdef NLSEPY_WITH_CUDA
static PyObject *dipolar_slab_buffers(DipolarObject *self, PyObject *Py_UNUSED(ignored))
{
    void *b[NLSE_DIPOLAR_SLAB_BUFFERS];
    if (!NLSEPY_READY(self))
        return NULL;
    int st = nlse_dipolar_slab_buffers(self->s, b);
    if (st)
        return nlsepy_raise(st);
    PyObject *out = PyTuple_New(NLSE_DIPOLAR_SLAB_BUFFERS);
    for (int q = 0; out && q < NLSE_DIPOLAR_SLAB_BUFFERS; ++q) {
        PyObject *v = PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)b[q]);
        if (!v) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, q, v);
    }
    return out;
}

static PyObject *dipolar_slab_connect(DipolarObject *self, PyObject *arg)
{
    if (!NLSEPY_READY(self))
        return NULL;
    PyObject *f = PySequence_Fast(arg, "connect takes a sequence of device addresses");
    if (!f)
        return NULL;
    Py_ssize_t m = PySequence_Fast_GET_SIZE(f);
    void **a = (void **)calloc(m ? (size_t)m : 1, sizeof(void *));
    if (!a) {
        Py_DECREF(f);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t q = 0; q < m; ++q) {
        unsigned long long v = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(f, q));
        if (PyErr_Occurred()) {
            free(a);
            Py_DECREF(f);
            return NULL;
        }
        a[q] = (void *)(uintptr_t)v;
    }
    Py_DECREF(f);
    int st = nlse_dipolar_slab_connect(self->s, a);
    free(a);
    return nlsepy_none(st);
}

NLSEPY_ACTION(dipolar_slab_stage, DipolarObject, nlse_dipolar_slab_stage)
#endif

static PyObject *dipolar_slab_timings(DipolarObject *self, PyObject *Py_UNUSED(ignored))
{
    double t[5];
    if (!NLSEPY_READY(self))
        return NULL;
    int st = nlse_dipolar_slab_timings(self->s, t);
    if (st)
        return nlsepy_raise(st);
    return Py_BuildValue("(ddddd)", t[0], t[1], t[2], t[3], t[4]);
}

static PyMethodDef dipolar_methods[] = {
#ifdef NLSEPY_WITH_CUDA
    {"slab_buffers", (PyCFunction)dipolar_slab_buffers, METH_NOARGS,
     "slab_buffers() -> device addresses of the pencils, the state, the density and the lines' "
     "ends of a slab."},
    {"slab_connect", (PyCFunction)dipolar_slab_connect, METH_O,
     "slab_connect(addresses): buffer b of rank r at addresses[b * ranks + r]."},
    {"slab_stage", (PyCFunction)dipolar_slab_stage, METH_NOARGS,
     "slab_stage(): transposes through host memory and MPI instead of CUDA IPC."},
#endif
    {"timings", (PyCFunction)dipolar_slab_timings, METH_NOARGS,
     "timings() -> a slab's seconds of the last step call: all, x transposes, dipolar FFTs, "
     "their transposes, sums."},
    {"set_state", (PyCFunction)dipolar_set_state, METH_O,
     "set_state(psi): the state, real or complex."},
    {"get_state", (PyCFunction)dipolar_get_state, METH_NOARGS,
     "get_state() -> the state, complex."},
    {"is_real", (PyCFunction)dipolar_is_real, METH_NOARGS,
     "True when the state is stored real."},
    NLSEPY_SET_DT_METHOD(dipolar_set_dt),
    {"set_rotation", (PyCFunction)dipolar_set_rotation, METH_O,
     "set_rotation(w): adds -w L_z to the equation (its own units; 0: none)."},
    {"set_lhy", (PyCFunction)dipolar_set_lhy, METH_O,
     "set_lhy(q): adds q |psi|^3 psi to the equation (its own units, >= 0; 0: none)."},
    {"set_couplings", (PyCFunction)dipolar_set_couplings, METH_VARARGS,
     "set_couplings(g, gdd) (a slab: collective when it makes the FFT plans)."},
    {"set_potential", (PyCFunction)dipolar_set_potential, METH_O,
     "set_potential(U or None)."},
    {"set_obstacle", (PyCFunction)dipolar_set_obstacle, METH_O,
     "set_obstacle((V0, sigma, velocity, start, t_move, t_off, beam_axis, move_axis) or "
     "None)."},
    {"step", (PyCFunction)dipolar_step, METH_VARARGS,
     "step(mode, n, t0, dg, dgdd) -> (done, blew_up)."},
    {"observe", (PyCFunction)dipolar_observe, METH_O,
     "observe(t) -> dict of raw observables of the whole grid."},
    {"dipolar_potential", (PyCFunction)dipolar_dd_potential, METH_NOARGS,
     "dipolar_potential() -> V_dd * |psi|^2 (float64; distributed: the slab, collective)."},
    {"potential", (PyCFunction)dipolar_potential, METH_O,
     "potential(t) -> V(r, t) (float64; distributed: this rank's slab)."},
    {"density", (PyCFunction)dipolar_density, METH_O,
     "density(keep_mask) -> |psi|^2 integrated over the other axes (a slab: this "
     "rank's part)."},
    {"kernel", (PyCFunction)dipolar_kernel, METH_NOARGS,
     "kernel() -> the dipolar kernel on the r2c grid (a slab: this rank's x rows)."},
    {"memory_bytes", (PyCFunction)dipolar_memory, METH_NOARGS,
     "memory_bytes() -> bytes the solver holds (device memory for CUDA)."},
    {"last_step_seconds", (PyCFunction)dipolar_last_seconds, METH_NOARGS,
     "last_step_seconds() -> duration of the last step() call's steps."},
    {"bytes_per_point_step", (PyCFunction)dipolar_bytes, METH_O,
     "bytes_per_point_step(mode) -> memory traffic model."},
    {"step_record", (PyCFunction)dipolar_step_record, METH_VARARGS,
     "step_record(mode, n, t0, dg, dgdd, every, phase) -> (done, blew_up, rows): step(), "
     "and the norm and <x_a^2> of the states after the steps whose count (phase + k + 1) is "
     "a multiple of every."},
    {"phase_slice", (PyCFunction)dipolar_phase_slice, METH_VARARGS,
     "phase_slice(axis, index) -> arg(psi) on the slice."},
    {NULL, NULL, 0, NULL}};

NLSEPY_SOLVER_TYPE(DipolarType, "Dipolar", DipolarObject, dipolar_init, dipolar_dealloc,
                   dipolar_methods, "Split-step Crank-Nicolson solver of the dipolar GPE (C core).");

int nlsepy_bind_dipolar(PyObject *m)
{
    if (nlsepy_add_type(m, &DipolarType, "Dipolar") < 0 ||
        PyModule_AddStringConstant(m, "DIPOLAR_PEER", NLSE_DIPOLAR_PEER) < 0 ||
        PyModule_AddIntConstant(m, "DIPOLAR_IMAG", NLSE_DIPOLAR_IMAG) < 0 ||
        PyModule_AddIntConstant(m, "DIPOLAR_REAL", NLSE_DIPOLAR_REAL) < 0)
        return -1;
    return 0;
}
