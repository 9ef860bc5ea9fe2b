/*
 * _bind/fd.c -- binding of the NLSE RK4 finite-difference solver (C API
 * nlsepy/fd.h, NLSEmagic's scheme): the `FD` type, its constants and the
 * module functions fd_max_dt (eqs. 18-19) and fd_min_points.
 */
#include "bind.h"
#include "nlsepy/fd.h"

typedef struct {
    NLSEPY_SOLVER_HEAD(nlse_fd, nlse_fd_params)
} FDObject;

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
    if (nlsepy_parse_triple(shape, p.ndim, "shape", NULL, p.shape) ||
        nlsepy_parse_triple(spacing, p.ndim, "spacing", p.spacing, NULL))
        return -1;
    NLSEPY_DROP(self, nlse_fd_destroy);
    if (nlsepy_init_status(nlse_fd_create(&p, &self->s)))
        return -1;
    self->p = p;
    return 0;
}

NLSEPY_DEALLOC(fd_dealloc, FDObject, nlse_fd_destroy)

/* Check that `obj` is an aligned C-contiguous array of the solver's shape
 * with the exact dtype; returns a borrowed array or NULL with an exception. */
static PyArrayObject *check_array(FDObject *self, PyObject *obj, const char *name, int real)
{
    return nlsepy_check_array(obj, name, nlsepy_npy_type(self->p.dtype, real), self->p.ndim,
                              self->p.shape);
}

static PyObject *fd_set_state(FDObject *self, PyObject *obj)
{
    PyArrayObject *a = NLSEPY_READY(self) ? check_array(self, obj, "psi", 0) : NULL;
    return a ? nlsepy_none(nlse_fd_set_state(self->s, PyArray_DATA(a))) : NULL;
}

static PyObject *fd_set_potential(FDObject *self, PyObject *obj)
{
    if (!NLSEPY_READY(self))
        return NULL;
    if (obj == Py_None)
        return nlsepy_none(nlse_fd_set_potential(self->s, NULL));
    PyArrayObject *a = check_array(self, obj, "V", 1);
    return a ? nlsepy_none(nlse_fd_set_potential(self->s, PyArray_DATA(a))) : NULL;
}

/* A new array of the solver's shape and dtype, filled by `fill(s, arg, data)`
 * with the GIL released.  `busy` marks calls that must not overlap step(). */
static PyObject *state_array(FDObject *self, int (*fill)(nlse_fd *, int, void *), int arg,
                             int busy)
{
    PyObject *out = nlsepy_new_array(self->p.ndim, self->p.shape,
                                     nlsepy_npy_type(self->p.dtype, 0));
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
    return nlsepy_array_result(out, st);
}

static int fill_state(nlse_fd *s, int unused, void *data)
{
    (void)unused;
    return nlse_fd_get_state(s, data);
}

static PyObject *fd_get_state(FDObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!NLSEPY_READY(self))
        return NULL;
    return state_array(self, fill_state, 0, 1);
}

static PyObject *fd_snapshot(FDObject *self, PyObject *arg)
{
    long slot;
    if (!NLSEPY_READY(self) || nlsepy_parse_long(arg, &slot))
        return NULL;
    return nlsepy_none(nlse_fd_snapshot(self->s, (int)slot));
}

/* fetch(slot) -> new array; may run on another thread while step() runs. */
static PyObject *fd_fetch(FDObject *self, PyObject *arg)
{
    if (!self->s) {
        PyErr_SetString(PyExc_RuntimeError, "solver is not initialised");
        return NULL;
    }
    long slot;
    if (nlsepy_parse_long(arg, &slot))
        return NULL;
    if (slot < 0 || slot > 1)
        return PyErr_Format(PyExc_ValueError, "fetch: slot must be 0 or 1, got %ld", slot);
    return state_array(self, nlse_fd_fetch, (int)slot, 0);
}

NLSEPY_SET_DT(fd_set_dt, FDObject, nlse_fd_set_dt)

NLSEPY_STEP(fd_step, FDObject, nlse_fd_step)
NLSEPY_OBSERVE(fd_observe, FDObject, nlse_fd_observe)

/* A method's arguments by `format` ("nn" and what follows: first, count,
 * then *obj): rows first .. first + count - 1 of axis 0 (a slab of a
 * distributed grid).  0, or -1 with an exception. */
static int parse_rows(FDObject *self, PyObject *args, const char *format, Py_ssize_t *first,
                      Py_ssize_t *count, PyObject **obj)
{
    if (!NLSEPY_READY(self) || !PyArg_ParseTuple(args, format, first, count, obj))
        return -1;
    if (*first < 0 || *count < 0 || (size_t)*first > self->p.shape[0] ||
        (size_t)*count > self->p.shape[0] - (size_t)*first) {
        PyErr_Format(PyExc_ValueError, "rows %zd .. %zd are outside axis 0 of %zu points",
                     *first, *first + *count, self->p.shape[0]);
        return -1;
    }
    return 0;
}

static PyObject *fd_observe_rows(FDObject *self, PyObject *args)
{
    Py_ssize_t first, count;
    if (parse_rows(self, args, "nn", &first, &count, NULL) < 0)
        return NULL;
    double norm = 0, energy = 0;
    int st;
    NLSEPY_RUN(self, st, nlse_fd_observe_rows(self->s, (size_t)first, (size_t)count, &norm,
                                              &energy));
    return nlsepy_pair_result(st, norm, energy);
}

/* `obj` as `count` rows of the state (the other axes whole) */
static PyArrayObject *rows_arg(FDObject *self, PyObject *obj, const char *name, Py_ssize_t count)
{
    const size_t shape[3] = {(size_t)count, self->p.shape[1], self->p.shape[2]};
    return nlsepy_check_array(obj, name, nlsepy_npy_type(self->p.dtype, 0), self->p.ndim, shape);
}

/* get_rows' array: the caller's buffer `dest`, reused across calls, or a
 * new one (None); a new reference, or NULL */
static PyObject *rows_out(FDObject *self, PyObject *dest, Py_ssize_t count)
{
    if (dest == Py_None) {
        size_t shape[3] = {(size_t)count, self->p.shape[1], self->p.shape[2]};
        return nlsepy_new_array(self->p.ndim, shape, nlsepy_npy_type(self->p.dtype, 0));
    }
    PyArrayObject *a = rows_arg(self, dest, "out", count);
    if (!a)
        return NULL;
    if (!PyArray_ISWRITEABLE(a)) {
        PyErr_SetString(PyExc_ValueError, "out must be writeable");
        return NULL;
    }
    Py_INCREF(dest);
    return dest;
}

static PyObject *fd_get_rows(FDObject *self, PyObject *args)
{
    Py_ssize_t first, count;
    PyObject *dest = Py_None;
    if (parse_rows(self, args, "nn|O", &first, &count, &dest) < 0)
        return NULL;
    PyObject *out = rows_out(self, dest, count);
    if (!out)
        return NULL;
    int st;
    NLSEPY_RUN(self, st, nlse_fd_get_rows(self->s, (size_t)first, (size_t)count,
                                          PyArray_DATA((PyArrayObject *)out)));
    return nlsepy_array_result(out, st);
}

static PyObject *fd_set_rows(FDObject *self, PyObject *args)
{
    Py_ssize_t first, count;
    PyObject *obj;
    if (parse_rows(self, args, "nnO", &first, &count, &obj) < 0)
        return NULL;
    PyArrayObject *a = rows_arg(self, obj, "rows", count);
    if (!a)
        return NULL;
    int st;
    NLSEPY_RUN(self, st, nlse_fd_set_rows(self->s, (size_t)first, (size_t)count,
                                          PyArray_DATA(a)));
    return nlsepy_none(st);
}

/* rows to / from an address of the backend's memory (a device buffer) */
static PyObject *rows_addr(FDObject *self, PyObject *args, int to)
{
    Py_ssize_t first, count;
    PyObject *addr;
    void *ptr;
    if (parse_rows(self, args, "nnO", &first, &count, &addr) < 0 ||
        nlsepy_parse_address(addr, &ptr))
        return NULL;
    int st;
    NLSEPY_RUN(self, st, to ? nlse_fd_rows_to(self->s, (size_t)first, (size_t)count, ptr)
                            : nlse_fd_rows_from(self->s, (size_t)first, (size_t)count, ptr));
    return nlsepy_none(st);
}

static PyObject *fd_rows_to(FDObject *self, PyObject *args) { return rows_addr(self, args, 1); }
static PyObject *fd_rows_from(FDObject *self, PyObject *args) { return rows_addr(self, args, 0); }

NLSEPY_ACTION(fd_undo_step, FDObject, nlse_fd_undo_step)
NLSEPY_GETTER(fd_bytes, FDObject, PyFloat_FromDouble, nlse_fd_bytes_per_point_step)
NLSEPY_GETTER(fd_fused_bytes, FDObject, PyFloat_FromDouble, nlse_fd_fused_bytes_per_point_step)
NLSEPY_GETTER(fd_last_kernel, FDObject, PyLong_FromLong, nlse_fd_last_kernel)

static PyObject *fd_fused_tile(FDObject *self, PyObject *Py_UNUSED(ignored))
{
    size_t t[3] = {0, 0, 0};
    if (!NLSEPY_READY(self))
        return NULL;
    if (!nlse_fd_fused_tile(self->s, t))
        return PyTuple_New(0);
    PyObject *out = PyTuple_New(self->p.ndim);
    for (int a = 0; out && a < self->p.ndim; ++a)
        PyTuple_SET_ITEM(out, a, PyLong_FromSize_t(t[a]));
    return out;
}

static PyObject *fd_set_kernel(FDObject *self, PyObject *obj)
{
    long k = PyLong_AsLong(obj);
    if (k == -1 && PyErr_Occurred())
        return NULL;
    return NLSEPY_READY(self) ? nlsepy_none(nlse_fd_set_kernel(self->s, (int)k)) : NULL;
}

static PyMethodDef fd_methods[] = {
    {"set_state", (PyCFunction)fd_set_state, METH_O, "set_state(psi): copy psi into the solver."},
    {"get_state", (PyCFunction)fd_get_state, METH_NOARGS, "get_state() -> new array."},
    {"set_potential", (PyCFunction)fd_set_potential, METH_O,
     "set_potential(V or None): static real potential."},
    NLSEPY_SET_DT_METHOD(fd_set_dt),
    {"snapshot", (PyCFunction)fd_snapshot, METH_O,
     "snapshot(slot): copy the state into frame slot 0 or 1 (in stream order)."},
    {"fetch", (PyCFunction)fd_fetch, METH_O,
     "fetch(slot) -> new array holding the slot; may overlap step() on another thread."},
    NLSEPY_STEP_METHOD(fd_step, "advance n RK4 steps."),
    NLSEPY_OBSERVE_METHOD(fd_observe),
    {"observe_rows", (PyCFunction)fd_observe_rows, METH_VARARGS,
     "observe_rows(first, count) -> (norm, energy) of rows first .. first+count-1 of axis 0."},
    {"rows_to", (PyCFunction)fd_rows_to, METH_VARARGS,
     "rows_to(first, count, address): copy rows to the backend's memory at address."},
    {"rows_from", (PyCFunction)fd_rows_from, METH_VARARGS,
     "rows_from(first, count, address): copy rows from the backend's memory at address."},
    {"undo_step", (PyCFunction)fd_undo_step, METH_NOARGS,
     "undo_step(): back to the state before the last step taken."},
    {"get_rows", (PyCFunction)fd_get_rows, METH_VARARGS,
     "get_rows(first, count, out=None) -> those rows of axis 0 of the state (in out when "
     "given)."},
    {"set_rows", (PyCFunction)fd_set_rows, METH_VARARGS,
     "set_rows(first, count, rows): copy rows into axis 0 of the state."},
    {"bytes_per_point_step", (PyCFunction)fd_bytes, METH_NOARGS,
     "Bytes the staged kernels move per grid point and step (model)."},
    {"fused_bytes_per_point_step", (PyCFunction)fd_fused_bytes, METH_NOARGS,
     "Bytes the fused step moves per grid point and step (model)."},
    {"fused_tile", (PyCFunction)fd_fused_tile, METH_NOARGS,
     "fused_tile() -> the fused step's tile, points per axis (() without a fused step)."},
    {"set_kernel", (PyCFunction)fd_set_kernel, METH_O,
     "set_kernel(k): run the next steps staged (0), fused (1) or as the backend chooses (2)."},
    {"last_kernel", (PyCFunction)fd_last_kernel, METH_NOARGS,
     "last_kernel() -> kernel of the last step: 0 staged, 1 fused, -1 none yet."},
    {NULL, NULL, 0, NULL}};

NLSEPY_SOLVER_TYPE(FDType, "FD", FDObject, fd_init, fd_dealloc, fd_methods,
                   "FD(shape, spacing, a, s, dt, scheme, bc, dtype): RK4 finite-difference "
                   "NLSE solver handle (C API nlse_fd).");

static PyObject *m_fd_max_dt(PyObject *Py_UNUSED(m), PyObject *args)
{
    PyObject *spacing;
    nlse_fd_params p;
    memset(&p, 0, sizeof p);
    if (!PyArg_ParseTuple(args, "idOi", &p.ndim, &p.a, &spacing, &p.scheme))
        return NULL;
    if (p.ndim < 1 || p.ndim > 3)
        return PyErr_Format(PyExc_ValueError, "ndim must be 1, 2 or 3, got %d", p.ndim);
    if (nlsepy_parse_triple(spacing, p.ndim, "spacing", p.spacing, NULL))
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

static PyObject *m_fd_reach(PyObject *Py_UNUSED(m), PyObject *args)
{
    int scheme, bc;
    if (!PyArg_ParseTuple(args, "ii", &scheme, &bc))
        return NULL;
    return PyLong_FromLong(nlse_fd_reach(scheme, bc));
}

static PyMethodDef fd_functions[] = {
    {"fd_reach", m_fd_reach, METH_VARARGS,
     "fd_reach(scheme, bc): points along an axis that F at one point reads (one fused "
     "stage's halo)."},
    {"fd_max_dt", m_fd_max_dt, METH_VARARGS,
     "fd_max_dt(ndim, a, spacing, scheme): linear stability bound (NLSEmagic eqs. 18-19)."},
    {"fd_min_points", m_fd_min_points, METH_VARARGS,
     "fd_min_points(scheme, bc): fewest points per axis."},
    {NULL, NULL, 0, NULL}};

int nlsepy_bind_fd(PyObject *m)
{
    if (nlsepy_add_type(m, &FDType, "FD") < 0 || PyModule_AddFunctions(m, fd_functions) < 0)
        return -1;
    const nlsepy_constant consts[] = {
        {"CD", NLSE_FD_CD}, {"SHOC", NLSE_FD_2SHOC}, {"BC_DIRICHLET", NLSE_BC_DIRICHLET},
        {"BC_MSD", NLSE_BC_MSD}, {"BC_L0", NLSE_BC_L0}, {"BC_PERIODIC", NLSE_BC_PERIODIC},
        {"BC_ONE_SIDED", NLSE_BC_ONE_SIDED}, {"KERNEL_STAGED", NLSE_FD_STAGED},
        {"KERNEL_FUSED", NLSE_FD_FUSED}, {"KERNEL_AUTO", NLSE_FD_AUTO}};
    return nlsepy_add_constants(m, consts, sizeof consts / sizeof consts[0]);
}
