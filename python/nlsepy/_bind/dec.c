/*
 * _bind/dec.c -- binding of the DEC GPE solver on crystal grids (C API
 * nlsepy/dec.h, source 001): the `Dec` type.  The block table arrives
 * from nlsepy.dec (built there from the crystal's Delaunay complex).
 * A handle may be one z slab of a distributed grid (section 4.2):
 * `set_slab`, the layers in and out for the halo exchange (as arrays, or
 * to and from an address of the backend's memory), `combine` for
 * the RK4 start, and `set_comm`, which takes the reduction table from the
 * capsule the MPI extension makes (this module links no MPI).
 */
#include "bind.h"
#include "nlsepy/dec.h"

typedef struct {
    NLSEPY_SOLVER_HEAD(nlse_dec, nlse_dec_params)
    size_t n;
    PyObject *comm; /* the capsule of the table the solver uses (kept alive) */
} DecObject;

/* `obj` as a C-contiguous array of `type` with `count` elements in all:
 * new reference or NULL with ValueError naming `name`. */
static PyArrayObject *dec_array(PyObject *obj, const char *name, int type, npy_intp count)
{
    PyArrayObject *a = nlsepy_as_array(obj, type);
    if (!a)
        return NULL;
    if (PyArray_SIZE(a) != count) {
        PyErr_Format(PyExc_ValueError, "%s must have %zd elements, got %zd", name,
                     (Py_ssize_t)count, (Py_ssize_t)PyArray_SIZE(a));
        Py_DECREF(a);
        return NULL;
    }
    return a;
}

static int parse_blocks(PyObject *seq, long *out)
{
    size_t z[3];
    if (nlsepy_parse_triple(seq, 3, "blocks", NULL, z))
        return -1;
    for (int q = 0; q < 3; ++q)
        out[q] = (long)z[q];
    return 0;
}

static int dec_init(DecObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"blocks", "edge", "origin", "trap", "periodic", "g", "dt", "dtype",
                             "row_start", "nbr_cell", "nbr_offset", "weight", "volume",
                             "centre", NULL};
    PyObject *oblk, *oedge, *oorig, *otrap, *ors, *onc, *ono, *ow, *ov, *oc;
    nlse_dec_params p;
    memset(&p, 0, sizeof p);
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOiddiOOOOOO", kwlist, &oblk, &oedge, &oorig,
                                     &otrap, &p.periodic, &p.g, &p.dt, &p.dtype, &ors, &onc, &ono,
                                     &ow, &ov, &oc))
        return -1;
    if (parse_blocks(oblk, p.blocks) || nlsepy_parse_triple(oedge, 3, "edge", p.edge, NULL) ||
        nlsepy_parse_triple(oorig, 3, "origin", p.origin, NULL) ||
        nlsepy_parse_triple(otrap, 3, "trap", p.trap, NULL))
        return -1;
    PyArrayObject *a[6] = {NULL};
    int st = -1;
    PyArrayObject *vol = (PyArrayObject *)PyArray_FROMANY(ov, NPY_FLOAT64, 1, 1,
                                                          NPY_ARRAY_IN_ARRAY | NPY_ARRAY_FORCECAST);
    PyArrayObject *w = (PyArrayObject *)PyArray_FROMANY(ow, NPY_FLOAT64, 1, 1,
                                                        NPY_ARRAY_IN_ARRAY | NPY_ARRAY_FORCECAST);
    if (!vol || !w)
        goto done;
    p.cells = (int)PyArray_SIZE(vol);
    p.rows = (int)PyArray_SIZE(w);
    if (!(a[0] = dec_array(ors, "row_start", NPY_INT32, p.cells + 1)) ||
        !(a[1] = dec_array(onc, "nbr_cell", NPY_INT32, p.rows)) ||
        !(a[2] = dec_array(ono, "nbr_offset", NPY_INT32, 3 * (npy_intp)p.rows)) ||
        !(a[3] = dec_array(oc, "centre", NPY_FLOAT64, 3 * (npy_intp)p.cells)))
        goto done;
    nlse_dec_table t = {PyArray_DATA(a[0]), PyArray_DATA(a[1]), PyArray_DATA(a[2]),
                        PyArray_DATA(w), PyArray_DATA(vol), PyArray_DATA(a[3])};
    NLSEPY_DROP(self, nlse_dec_destroy);
    Py_CLEAR(self->comm);
    int cst;
    Py_BEGIN_ALLOW_THREADS
    cst = nlse_dec_create(&p, &t, &self->s);
    Py_END_ALLOW_THREADS
    if (cst) {
        nlsepy_raise(cst);
        goto done;
    }
    self->p = p;
    self->n = nlse_dec_size(&p);
    st = 0;
done:
    Py_XDECREF(vol);
    Py_XDECREF(w);
    for (int q = 0; q < 6; ++q)
        Py_XDECREF(a[q]);
    return st;
}

/* the solver first: it holds a pointer into the capsule */
NLSEPY_DEALLOC_KEEP(dec_dealloc, DecObject, nlse_dec_destroy, comm)

/* `obj`: an aligned C-contiguous 1-d array of n values of the solver's
 * (complex, or real when `real`) type; borrowed, or NULL. */
static PyArrayObject *state_arg(DecObject *self, PyObject *obj, const char *name, int real)
{
    return nlsepy_check_array(obj, name, nlsepy_npy_type(self->p.dtype, real), 1, &self->n);
}

static PyObject *new_state(DecObject *self)
{
    return nlsepy_new_array(1, &self->n, nlsepy_npy_type(self->p.dtype, 0));
}

static PyObject *dec_set_state(DecObject *self, PyObject *args)
{
    PyObject *opsi, *oprev = Py_None;
    if (!NLSEPY_READY(self) || !PyArg_ParseTuple(args, "O|O", &opsi, &oprev))
        return NULL;
    PyArrayObject *a = state_arg(self, opsi, "psi", 0), *b = NULL;
    if (!a)
        return NULL;
    if (oprev != Py_None && !(b = state_arg(self, oprev, "psi_prev", 0)))
        return NULL;
    int st;
    NLSEPY_RUN(self, st, nlse_dec_set_state(self->s, PyArray_DATA(a), b ? PyArray_DATA(b) : NULL));
    return nlsepy_none(st);
}

static PyObject *dec_get_state(DecObject *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *out = NLSEPY_READY(self) ? new_state(self) : NULL;
    if (!out)
        return NULL;
    int st;
    NLSEPY_RUN(self, st, nlse_dec_get_state(self->s, PyArray_DATA((PyArrayObject *)out)));
    return nlsepy_array_result(out, st);
}

static PyObject *dec_get_prev(DecObject *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *out = NLSEPY_READY(self) ? new_state(self) : NULL;
    if (!out)
        return NULL;
    int st, have = 0;
    NLSEPY_RUN(self, st, nlse_dec_get_prev(self->s, PyArray_DATA((PyArrayObject *)out), &have));
    if (!(out = nlsepy_array_result(out, st)) || have)
        return out;
    Py_DECREF(out);
    Py_RETURN_NONE;
}

static PyObject *dec_set_potential(DecObject *self, PyObject *obj)
{
    if (!NLSEPY_READY(self))
        return NULL;
    PyArrayObject *a = NULL;
    if (obj != Py_None && !(a = state_arg(self, obj, "V", 1)))
        return NULL;
    int st;
    NLSEPY_RUN(self, st, nlse_dec_set_potential(self->s, a ? PyArray_DATA(a) : NULL));
    return nlsepy_none(st);
}

NLSEPY_SET_DT(dec_set_dt, DecObject, nlse_dec_set_dt)

NLSEPY_STEP(dec_step, DecObject, nlse_dec_step)

/* imaginary(n, norm) -> (done, blew_up) */
static PyObject *dec_imaginary(DecObject *self, PyObject *args)
{
    long n, done = 0;
    double norm;
    if (!NLSEPY_READY(self) || !PyArg_ParseTuple(args, "ld", &n, &norm))
        return NULL;
    int st;
    NLSEPY_RUN(self, st, nlse_dec_imaginary(self->s, n, norm, &done));
    return nlsepy_steps_result(st, done);
}

NLSEPY_OBSERVE(dec_observe, DecObject, nlse_dec_observe)

static PyObject *dec_apply(DecObject *self, PyObject *obj)
{
    if (!NLSEPY_READY(self))
        return NULL;
    PyArrayObject *a = state_arg(self, obj, "psi", 0);
    if (!a)
        return NULL;
    PyObject *out = new_state(self);
    if (!out)
        return NULL;
    int st;
    NLSEPY_RUN(self, st, nlse_dec_apply(self->s, PyArray_DATA(a),
                                        PyArray_DATA((PyArrayObject *)out)));
    return nlsepy_array_result(out, st);
}

/* set_slab(z_offset, first, count): one z slab of a distributed grid */
static PyObject *dec_set_slab(DecObject *self, PyObject *args)
{
    long zoff, first, count;
    if (!NLSEPY_READY(self) || !PyArg_ParseTuple(args, "lll", &zoff, &first, &count))
        return NULL;
    int st;
    NLSEPY_RUN(self, st, nlse_dec_set_slab(self->s, zoff, first, count));
    return nlsepy_none(st);
}

/* values per layer of blocks along z */
static npy_intp layer_size(const DecObject *self)
{
    return (npy_intp)self->p.cells * (npy_intp)self->p.blocks[0] * (npy_intp)self->p.blocks[1];
}

static PyObject *dec_get_layers(DecObject *self, PyObject *args)
{
    long first, count;
    if (!NLSEPY_READY(self) || !PyArg_ParseTuple(args, "ll", &first, &count))
        return NULL;
    if (first < 0 || count < 1 || count > self->p.blocks[2] - first) {
        PyErr_Format(PyExc_ValueError, "layers %ld .. %ld are not inside the %ld layers of "
                     "blocks along z", first, first + count - 1, self->p.blocks[2]);
        return NULL;
    }
    npy_intp dims[1] = {(npy_intp)count * layer_size(self)};
    PyObject *out = PyArray_SimpleNew(1, dims, nlsepy_npy_type(self->p.dtype, 0));
    if (!out)
        return NULL;
    int st;
    NLSEPY_RUN(self, st, nlse_dec_get_layers(self->s, first, count,
                                             PyArray_DATA((PyArrayObject *)out)));
    return nlsepy_array_result(out, st);
}

static PyObject *dec_set_layers(DecObject *self, PyObject *args)
{
    long first, count;
    PyObject *obj;
    if (!NLSEPY_READY(self) || !PyArg_ParseTuple(args, "llO", &first, &count, &obj))
        return NULL;
    PyArrayObject *a = nlsepy_check_type(obj, "layers", nlsepy_npy_type(self->p.dtype, 0));
    if (!a)
        return NULL;
    if (count < 1) {
        PyErr_Format(PyExc_ValueError, "layers: count must be >= 1, got %ld", count);
        return NULL;
    }
    const size_t shape[1] = {(size_t)count * (size_t)layer_size(self)};
    if (!nlsepy_check_grid(a, "layers", 1, shape))
        return NULL;
    int st;
    NLSEPY_RUN(self, st, nlse_dec_set_layers(self->s, first, count, PyArray_DATA(a)));
    return nlsepy_none(st);
}

/* layers_to / layers_from(first, count, address): the layers to or from
 * memory of the backend at an address (a device buffer for CUDA, e.g. a
 * peer's mapped by CUDA IPC; host memory for the CPU) */
static PyObject *layers_addr(DecObject *self, PyObject *args, int to)
{
    long first, count;
    PyObject *addr;
    if (!NLSEPY_READY(self) || !PyArg_ParseTuple(args, "llO", &first, &count, &addr))
        return NULL;
    void *ptr;
    if (nlsepy_parse_address(addr, &ptr))
        return NULL;
    int st;
    NLSEPY_RUN(self, st, to ? nlse_dec_layers_to(self->s, first, count, ptr)
                            : nlse_dec_layers_from(self->s, first, count, ptr));
    return nlsepy_none(st);
}

static PyObject *dec_layers_to(DecObject *self, PyObject *args)
{
    return layers_addr(self, args, 1);
}

static PyObject *dec_layers_from(DecObject *self, PyObject *args)
{
    return layers_addr(self, args, 0);
}

#ifdef NLSEPY_WITH_CUDA
/* slab_buffers() -> (buffer 0, buffer 1, arrival words): device addresses */
static PyObject *dec_slab_buffers(DecObject *self, PyObject *Py_UNUSED(ignored))
{
    void *b[NLSE_DEC_SLAB_BUFFERS];
    if (!NLSEPY_READY(self))
        return NULL;
    int st;
    NLSEPY_RUN(self, st, nlse_dec_slab_buffers(self->s, b));
    if (st)
        return nlsepy_raise(st);
    return Py_BuildValue("KKK", (unsigned long long)(uintptr_t)b[0],
                         (unsigned long long)(uintptr_t)b[1], (unsigned long long)(uintptr_t)b[2]);
}

/* A neighbour's three addresses, or None (no neighbour on that side). */
static int neighbour_addresses(PyObject *obj, void *out[NLSE_DEC_SLAB_BUFFERS], int *have)
{
    *have = obj != Py_None;
    if (!*have)
        return 0;
    PyObject *f = PySequence_Fast(obj, "a neighbour's addresses must be a sequence or None");
    if (!f)
        return -1;
    int rc = 0;
    if (PySequence_Fast_GET_SIZE(f) != NLSE_DEC_SLAB_BUFFERS) {
        PyErr_Format(PyExc_ValueError, "a neighbour has %d addresses, got %zd",
                     NLSE_DEC_SLAB_BUFFERS, PySequence_Fast_GET_SIZE(f));
        rc = -1;
    }
    for (int q = 0; !rc && q < NLSE_DEC_SLAB_BUFFERS; ++q)
        rc = nlsepy_parse_address(PySequence_Fast_GET_ITEM(f, q), &out[q]);
    Py_DECREF(f);
    return rc;
}

/* slab_connect(lower, lower_layer, upper, upper_layer): see nlse_dec_slab_connect */
static PyObject *dec_slab_connect(DecObject *self, PyObject *args)
{
    PyObject *lo, *up;
    long llo, lup;
    void *a[NLSE_DEC_SLAB_BUFFERS], *b[NLSE_DEC_SLAB_BUFFERS];
    int hl, hu;
    if (!NLSEPY_READY(self) || !PyArg_ParseTuple(args, "OlOl", &lo, &llo, &up, &lup) ||
        neighbour_addresses(lo, a, &hl) || neighbour_addresses(up, b, &hu))
        return NULL;
    int st;
    NLSEPY_RUN(self, st, nlse_dec_slab_connect(self->s, hl ? a : NULL, llo, hu ? b : NULL, lup));
    return nlsepy_none(st);
}
#endif

NLSEPY_SET_COMM(dec_set_comm, DecObject, nlse_dec_set_comm)

NLSEPY_GETTER(dec_has_prev, DecObject, PyBool_FromLong, nlse_dec_has_prev)

/* combine(x0, x1, cre, cim) -> (out, bad): out = x0 + (cre + i cim) H(x1) x1 */
static PyObject *dec_combine(DecObject *self, PyObject *args)
{
    PyObject *o0, *o1;
    double cre, cim;
    if (!NLSEPY_READY(self) || !PyArg_ParseTuple(args, "OOdd", &o0, &o1, &cre, &cim))
        return NULL;
    PyArrayObject *a = state_arg(self, o0, "x0", 0), *b = a ? state_arg(self, o1, "x1", 0) : NULL;
    if (!b)
        return NULL;
    PyObject *out = new_state(self);
    if (!out)
        return NULL;
    int st, bad = 0;
    NLSEPY_RUN(self, st, nlse_dec_combine(self->s, PyArray_DATA(a), PyArray_DATA(b), cre, cim,
                                          PyArray_DATA((PyArrayObject *)out), &bad));
    if (!nlsepy_array_result(out, st))
        return NULL;
    return Py_BuildValue("NO", out, bad ? Py_True : Py_False);
}

NLSEPY_GETTER(dec_bytes, DecObject, PyFloat_FromDouble, nlse_dec_bytes_per_cell_step)
NLSEPY_GETTER(dec_seconds, DecObject, PyFloat_FromDouble, nlse_dec_last_seconds)
NLSEPY_GETTER(dec_wait_seconds, DecObject, PyFloat_FromDouble, nlse_dec_last_wait_seconds)
NLSEPY_GETTER(dec_kernel, DecObject, PyUnicode_FromString, nlse_dec_kernel)

static PyMethodDef dec_methods[] = {
    {"set_state", (PyCFunction)dec_set_state, METH_VARARGS,
     "set_state(psi, psi_prev=None): psi(0) and optionally psi(-dt)."},
    {"get_state", (PyCFunction)dec_get_state, METH_NOARGS, "get_state() -> new array."},
    {"get_prev", (PyCFunction)dec_get_prev, METH_NOARGS,
     "get_prev() -> psi(t - dt) as a new array, or None before the leapfrog has one."},
    {"set_potential", (PyCFunction)dec_set_potential, METH_O,
     "set_potential(V or None): per-cell potential added to the trap."},
    NLSEPY_SET_DT_METHOD(dec_set_dt),
    NLSEPY_STEP_METHOD(dec_step, "n leapfrog steps (the first by RK4 without psi(-dt))."),
    {"imaginary", (PyCFunction)dec_imaginary, METH_VARARGS,
     "imaginary(n, norm) -> (done, blew_up): normalised imaginary-time Euler steps."},
    NLSEPY_OBSERVE_METHOD(dec_observe),
    {"apply", (PyCFunction)dec_apply, METH_O, "apply(psi) -> H(psi) psi."},
    {"set_slab", (PyCFunction)dec_set_slab, METH_VARARGS,
     "set_slab(z_offset, first, count): the handle is one z slab of a larger grid (own layers "
     "first .. first+count-1, layer 0 the global layer z_offset)."},
    {"get_layers", (PyCFunction)dec_get_layers, METH_VARARGS,
     "get_layers(first, count) -> new 1-d array of those layers of the state."},
    {"set_layers", (PyCFunction)dec_set_layers, METH_VARARGS,
     "set_layers(first, count, values): copy layers into the state."},
    {"layers_to", (PyCFunction)dec_layers_to, METH_VARARGS,
     "layers_to(first, count, address): copy those layers of the state to the backend's "
     "memory at address (device memory for CUDA)."},
    {"layers_from", (PyCFunction)dec_layers_from, METH_VARARGS,
     "layers_from(first, count, address): copy layers from the backend's memory at address "
     "into the state (values not checked)."},
#ifdef NLSEPY_WITH_CUDA
    {"slab_buffers", (PyCFunction)dec_slab_buffers, METH_NOARGS,
     "slab_buffers() -> device addresses shared with the neighbours (the state's two buffers, "
     "the arrival words)."},
    {"slab_connect", (PyCFunction)dec_slab_connect, METH_VARARGS,
     "slab_connect(lower, lower_layer, upper, upper_layer): the neighbours' slab_buffers "
     "(mapped; None: no neighbour) and the layers their halos are at; steps then exchange "
     "halos device to device, overlapped."},
#endif
    NLSEPY_SET_COMM_METHOD(dec_set_comm, "the imaginary-time norm and the blow-up checks "
                                         "agreed over the processes"),
    {"has_prev", (PyCFunction)dec_has_prev, METH_NOARGS,
     "has_prev() -> whether the next real-time step continues the leapfrog."},
    {"combine", (PyCFunction)dec_combine, METH_VARARGS,
     "combine(x0, x1, cre, cim) -> (out, bad): out = x0 + (cre + i cim) H(x1) x1 on the own "
     "layers (the RK4 start's stages)."},
    {"bytes_per_cell_step", (PyCFunction)dec_bytes, METH_NOARGS,
     "Bytes a leapfrog step moves per unknown (model)."},
    {"last_seconds", (PyCFunction)dec_seconds, METH_NOARGS,
     "Seconds the last step() or imaginary() took."},
    {"last_wait_seconds", (PyCFunction)dec_wait_seconds, METH_NOARGS,
     "Of those, the seconds spent waiting for the halo swaps that step() did itself "
     "(the part its interior layers did not hide)."},
    {"kernel", (PyCFunction)dec_kernel, METH_NOARGS,
     "kernel() -> the kernel form of the last application of H ('' before the first)."},
    {NULL, NULL, 0, NULL}};

NLSEPY_SOLVER_TYPE(DecType, "Dec", DecObject, dec_init, dec_dealloc, dec_methods,
                   "Dec(blocks, edge, origin, trap, periodic, g, dt, dtype, row_start, nbr_cell, "
                   "nbr_offset, weight, volume, centre): DEC GPE solver handle (C API nlse_dec).");

int nlsepy_bind_dec(PyObject *m)
{
    return nlsepy_add_type(m, &DecType, "Dec");
}
