/*
 * _bind/dipolar_methods.h -- the methods of the dipolar GPE solver types
 * that the single-process binding (`Dipolar`, _bind/dipolar.c, in `_core`
 * and `_cuda`) and the distributed one (`DipolarMPI`, _bind/dipolar_mpi.c,
 * in `_mpi`) share, written once over the calls their C APIs have in
 * common (nlsepy/dipolar.h, csrc/dipolar/dipolar_mpi.h): the state in and
 * out, dt, couplings, potential, obstacle, steps, observables, the float64
 * grids (dipolar potential, potential, density, kernel), the memory and
 * traffic figures, and the method table entries DIPOLAR_METHODS.
 *
 * A template, as the kernels' *.inc: each of those files includes it once
 * (its functions are static there) after defining
 *   DIPOLAR_OBJECT        the object type (NLSEPY_SOLVER_HEAD(handle,
 *                         nlse_dipolar_params) first);
 *   DIPOLAR_API(name)     the C API's function `name` (nlse_dipolar_<name>
 *                         or nlse_dipolar_mpi_<name>);
 *   DIPOLAR_DENSITY       the C API's density of the handle's part of the grid;
 *   DIPOLAR_NDIM(self), DIPOLAR_SHAPE(self)
 *                         the dimensions and the shape (size_t[3]) of the
 *                         handle's grid (a rank's slab of a distributed one);
 *   DIPOLAR_COPY(self, st, call)
 *                         how an array is copied into the handle: with the
 *                         GIL held (st = call), or released (NLSEPY_RUN);
 * and the functions
 *   static void dtype_error(const char *name, int single, int allow_complex)
 *                         TypeError for an array of neither accepted dtype;
 *   static PyObject *dipolar_last_seconds(DIPOLAR_OBJECT *, PyObject *)
 *                         the seconds of the last step() call's steps.
 */
#ifndef NLSEPY_DIPOLAR_METHODS_H
#define NLSEPY_DIPOLAR_METHODS_H

/* An aligned C-contiguous array of the grid's shape: complex (allow_complex)
 * or real in the solver's precision; *is_complex says which.  Borrowed, or
 * NULL with an exception. */
static PyArrayObject *dipolar_array(DIPOLAR_OBJECT *self, PyObject *obj, const char *name,
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
    return nlsepy_check_grid(a, name, DIPOLAR_NDIM(self), DIPOLAR_SHAPE(self));
}

static PyObject *dipolar_set_state(DIPOLAR_OBJECT *self, PyObject *obj)
{
    int cplx = 0, st;
    PyArrayObject *a = NLSEPY_READY(self) ? dipolar_array(self, obj, "psi", 1, &cplx) : NULL;
    if (!a)
        return NULL;
    DIPOLAR_COPY(self, st, DIPOLAR_API(set_state)(self->s, PyArray_DATA(a), cplx));
    return nlsepy_none(st);
}

static PyObject *dipolar_get_state(DIPOLAR_OBJECT *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *out = NLSEPY_READY(self) ? nlsepy_new_array(DIPOLAR_NDIM(self), DIPOLAR_SHAPE(self),
                                                          nlsepy_npy_type(self->p.dtype, 0))
                                       : NULL;
    if (!out)
        return NULL;
    int st;
    NLSEPY_RUN(self, st, DIPOLAR_API(get_state)(self->s, PyArray_DATA((PyArrayObject *)out)));
    return nlsepy_array_result(out, st);
}

NLSEPY_GETTER(dipolar_is_real, DIPOLAR_OBJECT, PyBool_FromLong, DIPOLAR_API(state_is_real))
NLSEPY_GETTER(dipolar_memory, DIPOLAR_OBJECT, PyLong_FromSize_t, DIPOLAR_API(memory_bytes))
NLSEPY_SET_DT(dipolar_set_dt, DIPOLAR_OBJECT, DIPOLAR_API(set_dt))

static PyObject *dipolar_set_couplings(DIPOLAR_OBJECT *self, PyObject *args)
{
    double g, gdd;
    int st;
    if (!NLSEPY_READY(self) || !PyArg_ParseTuple(args, "dd", &g, &gdd))
        return NULL;
    NLSEPY_RUN(self, st, DIPOLAR_API(set_couplings)(self->s, g, gdd));
    if (!st) {
        self->p.g = g;
        self->p.gdd = gdd;
    }
    return nlsepy_none(st);
}

static PyObject *dipolar_set_potential(DIPOLAR_OBJECT *self, PyObject *obj)
{
    int st, cplx = 0;
    if (!NLSEPY_READY(self))
        return NULL;
    if (obj == Py_None)
        return nlsepy_none(DIPOLAR_API(set_potential)(self->s, NULL));
    PyArrayObject *a = dipolar_array(self, obj, "V", 0, &cplx);
    if (!a)
        return NULL;
    DIPOLAR_COPY(self, st, DIPOLAR_API(set_potential)(self->s, PyArray_DATA(a)));
    return nlsepy_none(st);
}

static PyObject *dipolar_set_obstacle(DIPOLAR_OBJECT *self, PyObject *obj)
{
    nlse_dipolar_obstacle o;
    if (!NLSEPY_READY(self))
        return NULL;
    if (obj == Py_None)
        return nlsepy_none(DIPOLAR_API(set_obstacle)(self->s, NULL));
    if (!PyArg_ParseTuple(obj, "ddddddii", &o.V0, &o.sigma, &o.velocity, &o.start, &o.t_move,
                          &o.t_off, &o.beam_axis, &o.move_axis))
        return NULL;
    return nlsepy_none(DIPOLAR_API(set_obstacle)(self->s, &o));
}

/* step(mode, n, t0, dg, dgdd) -> (done, blew_up) */
static PyObject *dipolar_step(DIPOLAR_OBJECT *self, PyObject *args)
{
    int mode, st;
    long n, done = 0;
    double t0, dg, dgdd;
    if (!NLSEPY_READY(self) || !PyArg_ParseTuple(args, "ilddd", &mode, &n, &t0, &dg, &dgdd))
        return NULL;
    NLSEPY_RUN(self, st, DIPOLAR_API(step)(self->s, mode, n, t0, dg, dgdd, &done));
    return nlsepy_steps_result(st, done);
}

static PyObject *dipolar_observe(DIPOLAR_OBJECT *self, PyObject *arg)
{
    double t;
    if (!NLSEPY_READY(self) || nlsepy_parse_double(arg, &t))
        return NULL;
    nlse_dipolar_obs o;
    int st;
    NLSEPY_RUN(self, st, DIPOLAR_API(observe)(self->s, t, &o));
    if (st)
        return nlsepy_raise(st);
    return Py_BuildValue("{s:d,s:d,s:d,s:d,s:d,s:d,s:(ddd),s:d}", "norm", o.norm, "norm_sum",
                         o.norm_sum, "mu", o.mu, "energy", o.energy, "kinetic", o.kinetic,
                         "kinetic_modulus", o.kinetic_modulus, "x2", o.x2[0], o.x2[1], o.x2[2],
                         "psi0sq", o.psi0sq);
}

/* A new float64 array of `nd` dimensions of `shape` filled by
 * fill(self, data, a, b, t) with the GIL released. */
static PyObject *dipolar_doubles(DIPOLAR_OBJECT *self, int nd, const size_t *shape,
                                 int (*fill)(DIPOLAR_OBJECT *, double *, long, long, double),
                                 long a, long b, double t)
{
    PyObject *out = nlsepy_new_array(nd, shape, NPY_FLOAT64);
    if (!out)
        return NULL;
    int st;
    NLSEPY_RUN(self, st, fill(self, (double *)PyArray_DATA((PyArrayObject *)out), a, b, t));
    return nlsepy_array_result(out, st);
}

static int fill_dd(DIPOLAR_OBJECT *self, double *o, long a, long b, double t)
{
    return DIPOLAR_API(dd_potential)(self->s, o);
}
static int fill_pot(DIPOLAR_OBJECT *self, double *o, long a, long b, double t)
{
    return DIPOLAR_API(potential)(self->s, t, o);
}
static int fill_den(DIPOLAR_OBJECT *self, double *o, long a, long b, double t)
{
    return DIPOLAR_DENSITY(self->s, (int)a, o);
}
static int fill_kernel(DIPOLAR_OBJECT *self, double *o, long a, long b, double t)
{
    return DIPOLAR_API(kernel)(self->s, o);
}

static PyObject *dipolar_dd_potential(DIPOLAR_OBJECT *self, PyObject *Py_UNUSED(ignored))
{
    if (!NLSEPY_READY(self))
        return NULL;
    return dipolar_doubles(self, DIPOLAR_NDIM(self), DIPOLAR_SHAPE(self), fill_dd, 0, 0, 0.0);
}

static PyObject *dipolar_potential(DIPOLAR_OBJECT *self, PyObject *arg)
{
    double t;
    if (!NLSEPY_READY(self) || nlsepy_parse_double(arg, &t))
        return NULL;
    return dipolar_doubles(self, DIPOLAR_NDIM(self), DIPOLAR_SHAPE(self), fill_pot, 0, 0, t);
}

/* density(keep_mask): |psi|^2 integrated over the axes not kept (the
 * handle's part: a slab's x rows when x is kept) */
static PyObject *dipolar_density(DIPOLAR_OBJECT *self, PyObject *arg)
{
    size_t dims[3];
    int nd = 0;
    long keep;
    if (!NLSEPY_READY(self) || nlsepy_parse_long(arg, &keep))
        return NULL;
    const int ndim = DIPOLAR_NDIM(self);
    if (keep < 0 || keep >= (1L << ndim))
        return PyErr_Format(PyExc_ValueError, "keep mask must be 0..%ld, got %ld",
                            (1L << ndim) - 1, keep);
    for (int q = 0; q < ndim; ++q)
        if ((keep >> q) & 1)
            dims[nd++] = DIPOLAR_SHAPE(self)[q];
    return dipolar_doubles(self, nd, dims, fill_den, keep, 0, 0.0);
}

/* kernel(): the dipolar kernel on the r2c grid (the last axis n/2 + 1) */
static PyObject *dipolar_kernel(DIPOLAR_OBJECT *self, PyObject *Py_UNUSED(ignored))
{
    size_t dims[3];
    if (!NLSEPY_READY(self))
        return NULL;
    const int ndim = DIPOLAR_NDIM(self);
    memcpy(dims, DIPOLAR_SHAPE(self), (size_t)ndim * sizeof dims[0]);
    dims[ndim - 1] = dims[ndim - 1] / 2 + 1;
    return dipolar_doubles(self, ndim, dims, fill_kernel, 0, 0, 0.0);
}

static PyObject *dipolar_bytes(DIPOLAR_OBJECT *self, PyObject *arg)
{
    long mode;
    if (!NLSEPY_READY(self) || nlsepy_parse_long(arg, &mode))
        return NULL;
    return PyFloat_FromDouble(DIPOLAR_API(bytes_per_point_step)(self->s, (int)mode));
}

/* The entries of the method table the two types share. */
#define DIPOLAR_METHODS                                                                        \
    {"set_state", (PyCFunction)dipolar_set_state, METH_O,                                      \
     "set_state(psi): the state (distributed: this rank's slab), real or complex."},           \
    {"get_state", (PyCFunction)dipolar_get_state, METH_NOARGS,                                 \
     "get_state() -> the state (distributed: this rank's slab), complex."},                    \
    {"is_real", (PyCFunction)dipolar_is_real, METH_NOARGS,                                     \
     "True when the state is stored real."},                                                    \
    {"set_dt", (PyCFunction)dipolar_set_dt, METH_O, "set_dt(dt)."},                            \
    {"set_couplings", (PyCFunction)dipolar_set_couplings, METH_VARARGS,                        \
     "set_couplings(g, gdd) (distributed: collective when it makes the FFT plans)."},          \
    {"set_potential", (PyCFunction)dipolar_set_potential, METH_O,                              \
     "set_potential(U or None) (distributed: this rank's slab)."},                             \
    {"set_obstacle", (PyCFunction)dipolar_set_obstacle, METH_O,                                \
     "set_obstacle((V0, sigma, velocity, start, t_move, t_off, beam_axis, move_axis) or "      \
     "None)."},                                                                                 \
    {"step", (PyCFunction)dipolar_step, METH_VARARGS,                                          \
     "step(mode, n, t0, dg, dgdd) -> (done, blew_up) (distributed: collective)."},             \
    {"observe", (PyCFunction)dipolar_observe, METH_O,                                          \
     "observe(t) -> dict of raw observables of the whole grid (distributed: collective)."},    \
    {"dipolar_potential", (PyCFunction)dipolar_dd_potential, METH_NOARGS,                      \
     "dipolar_potential() -> V_dd * |psi|^2 (float64; distributed: the slab, collective)."},   \
    {"potential", (PyCFunction)dipolar_potential, METH_O,                                      \
     "potential(t) -> V(r, t) (float64; distributed: this rank's slab)."},                     \
    {"density", (PyCFunction)dipolar_density, METH_O,                                          \
     "density(keep_mask) -> |psi|^2 integrated over the other axes (distributed: this "        \
     "rank's part)."},                                                                          \
    {"kernel", (PyCFunction)dipolar_kernel, METH_NOARGS,                                       \
     "kernel() -> the dipolar kernel on the r2c grid (distributed: this rank's x rows)."},     \
    {"memory_bytes", (PyCFunction)dipolar_memory, METH_NOARGS,                                 \
     "memory_bytes() -> bytes the solver holds (device memory for CUDA)."},                    \
    {"last_step_seconds", (PyCFunction)dipolar_last_seconds, METH_NOARGS,                      \
     "last_step_seconds() -> duration of the last step() call's steps."},                      \
    {"bytes_per_point_step", (PyCFunction)dipolar_bytes, METH_O,                               \
     "bytes_per_point_step(mode) -> memory traffic model."}

#endif /* NLSEPY_DIPOLAR_METHODS_H */
