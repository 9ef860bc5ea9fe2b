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
    if (self->s) {
        nlse_fd_destroy(self->s);
        self->s = NULL;
    }
    int st = nlse_fd_create(&p, &self->s);
    if (st) {
        nlsepy_raise(st);
        return -1;
    }
    self->p = p;
    return 0;
}

NLSEPY_DEALLOC(fd_dealloc, FDObject, nlse_fd_destroy)

/* Check that `obj` is an aligned C-contiguous array of the solver's shape
 * with the exact dtype; returns a borrowed array or NULL with an exception. */
static PyArrayObject *check_array(FDObject *self, PyObject *obj, const char *name, int real)
{
    PyArrayObject *a = nlsepy_check_type(obj, name, nlsepy_npy_type(self->p.dtype, real));
    return a ? nlsepy_check_grid(a, name, self->p.ndim, self->p.shape) : NULL;
}

static PyObject *fd_set_state(FDObject *self, PyObject *obj)
{
    if (!NLSEPY_READY(self))
        return NULL;
    PyArrayObject *a = check_array(self, obj, "psi", 0);
    if (!a)
        return NULL;
    int st = nlse_fd_set_state(self->s, PyArray_DATA(a));
    if (st)
        return nlsepy_raise(st);
    Py_RETURN_NONE;
}

static PyObject *fd_set_potential(FDObject *self, PyObject *obj)
{
    if (!NLSEPY_READY(self))
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
        return nlsepy_raise(st);
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
    int tn = nlsepy_npy_type(self->p.dtype, 0);
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
        return nlsepy_raise(st);
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
    if (!NLSEPY_READY(self))
        return NULL;
    return state_array(self, fill_state, 0, 1);
}

static PyObject *fd_snapshot(FDObject *self, PyObject *arg)
{
    if (!NLSEPY_READY(self))
        return NULL;
    long slot = PyLong_AsLong(arg);
    if (slot == -1 && PyErr_Occurred())
        return NULL;
    int st = nlse_fd_snapshot(self->s, (int)slot);
    if (st)
        return nlsepy_raise(st);
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
    if (!NLSEPY_READY(self))
        return NULL;
    double dt = PyFloat_AsDouble(arg);
    if (dt == -1.0 && PyErr_Occurred())
        return NULL;
    int st = nlse_fd_set_dt(self->s, dt);
    if (st)
        return nlsepy_raise(st);
    self->p.dt = dt;
    Py_RETURN_NONE;
}

/* step(n) -> (done, blew_up): blow-up is reported, not raised, so that the
 * Python layer can attach the step and time. */
static PyObject *fd_step(FDObject *self, PyObject *arg)
{
    if (!NLSEPY_READY(self))
        return NULL;
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    long done = 0;
    int st;
    NLSEPY_RUN(self, st, nlse_fd_step(self->s, n, &done));
    if (st && st != NLSE_ERR_BLOWUP)
        return nlsepy_raise(st);
    return Py_BuildValue("lO", done, st == NLSE_ERR_BLOWUP ? Py_True : Py_False);
}

static PyObject *fd_observe(FDObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!NLSEPY_READY(self))
        return NULL;
    double norm = 0, energy = 0;
    int st;
    NLSEPY_RUN(self, st, nlse_fd_observe(self->s, &norm, &energy));
    if (st)
        return nlsepy_raise(st);
    return Py_BuildValue("dd", norm, energy);
}

/* rows first .. first + count - 1 of axis 0 (a slab of a distributed grid) */
static int parse_rows(FDObject *self, PyObject *args, Py_ssize_t *first, Py_ssize_t *count,
                      PyObject **obj)
{
    if (!NLSEPY_READY(self))
        return -1;
    if (obj ? !PyArg_ParseTuple(args, "nnO", first, count, obj)
            : !PyArg_ParseTuple(args, "nn", first, count))
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
    if (parse_rows(self, args, &first, &count, NULL) < 0)
        return NULL;
    double norm = 0, energy = 0;
    int st;
    NLSEPY_RUN(self, st, nlse_fd_observe_rows(self->s, (size_t)first, (size_t)count, &norm,
                                              &energy));
    if (st)
        return nlsepy_raise(st);
    return Py_BuildValue("dd", norm, energy);
}

static PyObject *fd_get_rows(FDObject *self, PyObject *args)
{
    Py_ssize_t first, count;
    PyObject *dest = Py_None;
    if (!NLSEPY_READY(self))
        return NULL;
    if (!PyArg_ParseTuple(args, "nn|O", &first, &count, &dest))
        return NULL;
    PyObject *pair = Py_BuildValue("nn", first, count);
    if (!pair)
        return NULL;
    int bad = parse_rows(self, pair, &first, &count, NULL);
    Py_DECREF(pair);
    if (bad < 0)
        return NULL;
    PyObject *out;
    if (dest != Py_None) { /* the caller's buffer, reused across calls */
        PyArrayObject *a = nlsepy_check_type(dest, "out", nlsepy_npy_type(self->p.dtype, 0));
        size_t shape[3] = {(size_t)count, self->p.shape[1], self->p.shape[2]};
        if (!a || !nlsepy_check_grid(a, "out", self->p.ndim, shape))
            return NULL;
        if (!PyArray_ISWRITEABLE(a)) {
            PyErr_SetString(PyExc_ValueError, "out must be writeable");
            return NULL;
        }
        Py_INCREF(dest);
        out = dest;
    } else {
        npy_intp dims[3];
        dims[0] = (npy_intp)count;
        for (int q = 1; q < self->p.ndim; ++q)
            dims[q] = (npy_intp)self->p.shape[q];
        out = PyArray_SimpleNew(self->p.ndim, dims, nlsepy_npy_type(self->p.dtype, 0));
        if (!out)
            return NULL;
    }
    int st;
    NLSEPY_RUN(self, st, nlse_fd_get_rows(self->s, (size_t)first, (size_t)count,
                                          PyArray_DATA((PyArrayObject *)out)));
    if (st) {
        Py_DECREF(out);
        return nlsepy_raise(st);
    }
    return out;
}

static PyObject *fd_set_rows(FDObject *self, PyObject *args)
{
    Py_ssize_t first, count;
    PyObject *obj;
    if (parse_rows(self, args, &first, &count, &obj) < 0)
        return NULL;
    PyArrayObject *a = nlsepy_check_type(obj, "rows", nlsepy_npy_type(self->p.dtype, 0));
    if (!a)
        return NULL;
    size_t shape[3] = {(size_t)count, self->p.shape[1], self->p.shape[2]};
    if (!nlsepy_check_grid(a, "rows", self->p.ndim, shape))
        return NULL;
    int st;
    NLSEPY_RUN(self, st, nlse_fd_set_rows(self->s, (size_t)first, (size_t)count,
                                          PyArray_DATA(a)));
    if (st)
        return nlsepy_raise(st);
    Py_RETURN_NONE;
}

/* rows to / from an address of the backend's memory (a device buffer) */
static PyObject *rows_addr(FDObject *self, PyObject *args, int to)
{
    Py_ssize_t first, count;
    PyObject *addr;
    if (!NLSEPY_READY(self))
        return NULL;
    if (!PyArg_ParseTuple(args, "nnO", &first, &count, &addr))
        return NULL;
    PyObject *pair = Py_BuildValue("nn", first, count);
    if (!pair)
        return NULL;
    int bad = parse_rows(self, pair, &first, &count, NULL);
    Py_DECREF(pair);
    if (bad < 0)
        return NULL;
    void *ptr;
    if (nlsepy_parse_address(addr, &ptr))
        return NULL;
    int st;
    NLSEPY_RUN(self, st, to ? nlse_fd_rows_to(self->s, (size_t)first, (size_t)count, ptr)
                            : nlse_fd_rows_from(self->s, (size_t)first, (size_t)count, ptr));
    if (st)
        return nlsepy_raise(st);
    Py_RETURN_NONE;
}

static PyObject *fd_rows_to(FDObject *self, PyObject *args) { return rows_addr(self, args, 1); }
static PyObject *fd_rows_from(FDObject *self, PyObject *args) { return rows_addr(self, args, 0); }

static PyObject *fd_undo_step(FDObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!NLSEPY_READY(self))
        return NULL;
    int st = nlse_fd_undo_step(self->s);
    if (st)
        return nlsepy_raise(st);
    Py_RETURN_NONE;
}

static PyObject *fd_bytes(FDObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!NLSEPY_READY(self))
        return NULL;
    return PyFloat_FromDouble(nlse_fd_bytes_per_point_step(self->s));
}

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
     "Bytes the kernels move per grid point and step (model)."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject FDType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = NLSEPY_TYPE_NAME("FD"),
    .tp_basicsize = sizeof(FDObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "FD(shape, spacing, a, s, dt, scheme, bc, dtype): RK4 finite-difference "
              "NLSE solver handle (C API nlse_fd).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)fd_init,
    .tp_dealloc = (destructor)fd_dealloc,
    .tp_methods = fd_methods,
};


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

static PyMethodDef fd_functions[] = {
    {"fd_max_dt", m_fd_max_dt, METH_VARARGS,
     "fd_max_dt(ndim, a, spacing, scheme): linear stability bound (NLSEmagic eqs. 18-19)."},
    {"fd_min_points", m_fd_min_points, METH_VARARGS,
     "fd_min_points(scheme, bc): fewest points per axis."},
    {NULL, NULL, 0, NULL}};

int nlsepy_bind_fd(PyObject *m)
{
    if (nlsepy_add_type(m, &FDType, "FD") < 0 || PyModule_AddFunctions(m, fd_functions) < 0)
        return -1;
    const struct { const char *name; int value; } consts[] = {
        {"CD", NLSE_FD_CD}, {"SHOC", NLSE_FD_2SHOC}, {"BC_DIRICHLET", NLSE_BC_DIRICHLET},
        {"BC_MSD", NLSE_BC_MSD}, {"BC_L0", NLSE_BC_L0}, {"BC_PERIODIC", NLSE_BC_PERIODIC},
        {"BC_ONE_SIDED", NLSE_BC_ONE_SIDED}};
    for (size_t q = 0; q < sizeof consts / sizeof consts[0]; ++q)
        if (PyModule_AddIntConstant(m, consts[q].name, consts[q].value) < 0)
            return -1;
    return 0;
}
