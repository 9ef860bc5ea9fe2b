/*
 * _bind/mpi.c -- the optional MPI extension `_mpi`.
 *
 * Built only when CMake finds MPI and mpi4py's C API.
 * It takes communicators from mpi4py (PyMPIComm_Get) and never initialises
 * MPI itself (importing mpi4py.MPI does).  What it gives the C core is the
 * reduction table of nlsepy/common.h (nlse_comm) over a duplicate of the
 * caller's communicator, wrapped in a capsule that the single-process
 * extensions' solvers accept (`set_comm`); the sums add the ranks' parts
 * in rank order, so a run's results do not depend on message timing and are
 * bit-identical across runs with the same number of ranks.  The table's
 * all-to-all carries the transposes and halo rows of the distributed
 * dipolar GPE; its halo swap (started, progressed, finished apart) lets the
 * DEC step overlap its neighbours' layers with the interior, and carries the
 * host-staged halo rows of every slab model (`halo_swap`, from Python).
 */
#include <limits.h>
#include <stdlib.h>

#include "bind.h"
#include <mpi.h>
#include <mpi4py/mpi4py.h>

#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif

/* The MPI_Comm of an mpi4py communicator, or NULL with TypeError (not a
 * communicator) or ValueError (MPI.COMM_NULL). */
static MPI_Comm *nlsepy_mpi_comm(PyObject *obj)
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

typedef struct comm_ctx {
    nlse_comm vt; /* first member: the capsule holds &vt */
    MPI_Comm comm;
    int size;
    double *buf;
    size_t cap;
    MPI_Request req[4]; /* the halo swap in flight (halo_start .. halo_finish) */
    int nreq;
} comm_ctx;

/* Every rank's n doubles side by side in c->buf (rank r at r * n). */
static int gather_all(comm_ctx *c, const double *x, size_t n)
{
    if (n > (size_t)INT_MAX)
        return nlse_fail(NLSE_ERR_VALUE, "a reduction of %zu values exceeds MPI's count", n);
    const size_t need = n * (size_t)c->size;
    if (need > c->cap) {
        double *b = (double *)realloc(c->buf, need * sizeof *b);
        if (!b)
            return nlse_fail(NLSE_ERR_NOMEM, "out of host memory for a reduction (%zu bytes)",
                             need * sizeof *b);
        c->buf = b;
        c->cap = need;
    }
    int rc = MPI_Allgather(x, (int)n, MPI_DOUBLE, c->buf, (int)n, MPI_DOUBLE, c->comm);
    if (rc != MPI_SUCCESS)
        return nlse_fail(NLSE_ERR_BACKEND, "MPI_Allgather failed (error %d)", rc);
    return NLSE_OK;
}

/* x[i] = the ranks' x[i] combined in rank order: combine(combine(x_0, x_1),
 * x_2) ..., the same bits on every rank. */
static int ordered(void *ctx, double *x, size_t n, double (*combine)(double, double))
{
    comm_ctx *c = (comm_ctx *)ctx;
    int st = gather_all(c, x, n);
    if (st)
        return st;
    for (size_t i = 0; i < n; ++i) {
        double m = c->buf[i];
        for (int r = 1; r < c->size; ++r)
            m = combine(m, c->buf[(size_t)r * n + i]);
        x[i] = m;
    }
    return NLSE_OK;
}

static double plus(double s, double v) { return s + v; }

/* NaN wins, so a bad value on one rank is seen by all */
static double nan_max(double m, double v) { return v > m || v != v ? v : m; }

static int ordered_sum(void *ctx, double *x, size_t n) { return ordered(ctx, x, n, plus); }

static int ordered_max(void *ctx, double *x, size_t n) { return ordered(ctx, x, n, nan_max); }

/* MPI_Alltoallv over items of `item` bytes (a contiguous datatype, so the
 * counts stay within int for blocks of many GiB). */
static int alltoallv(void *ctx, size_t item, const void *send, const size_t *scount,
                     const size_t *sdispl, void *recv, const size_t *rcount, const size_t *rdispl)
{
    comm_ctx *c = (comm_ctx *)ctx;
    const int P = c->size;
    if (item == 0 || item > (size_t)INT_MAX)
        return nlse_fail(NLSE_ERR_VALUE, "an all-to-all item of %zu bytes", item);
    int *v = (int *)malloc(4 * (size_t)P * sizeof(int));
    if (!v)
        return nlse_fail(NLSE_ERR_NOMEM, "out of host memory for an all-to-all");
    for (int r = 0; r < P; ++r) {
        const size_t q[4] = {scount[r], sdispl[r], rcount[r], rdispl[r]};
        for (int k = 0; k < 4; ++k) {
            if (q[k] > (size_t)INT_MAX) {
                free(v);
                return nlse_fail(NLSE_ERR_VALUE, "an all-to-all of %zu items of %zu bytes "
                                 "exceeds MPI's counts", q[k], item);
            }
            v[k * P + r] = (int)q[k];
        }
    }
    MPI_Datatype t;
    int rc = MPI_Type_contiguous((int)item, MPI_BYTE, &t);
    if (rc == MPI_SUCCESS)
        rc = MPI_Type_commit(&t);
    if (rc == MPI_SUCCESS) {
        rc = MPI_Alltoallv(send, v, v + P, t, recv, v + 2 * P, v + 3 * P, t, c->comm);
        MPI_Type_free(&t);
    }
    free(v);
    return rc == MPI_SUCCESS ? NLSE_OK
                             : nlse_fail(NLSE_ERR_BACKEND, "MPI_Alltoallv failed (error %d)", rc);
}

/* the halo swap's tags: a layer going to the lower rank, to the upper one
 * (with two ranks and periodic ends both neighbours are the same rank) */
enum { TAG_DOWN = 0x4e4c, TAG_UP = 0x4e4d };

static int halo_start(void *ctx, const void *send_lo, void *recv_lo, const void *send_hi,
                      void *recv_hi, size_t bytes)
{
    comm_ctx *c = (comm_ctx *)ctx;
    if (bytes > (size_t)INT_MAX)
        return nlse_fail(NLSE_ERR_VALUE, "a halo of %zu bytes exceeds MPI's count", bytes);
    if (c->nreq)
        return nlse_fail(NLSE_ERR_VALUE, "halo_start: a halo swap is already in flight");
    int rank, rc = MPI_SUCCESS;
    MPI_Comm_rank(c->comm, &rank);
    const int lo = (rank + c->size - 1) % c->size, hi = (rank + 1) % c->size, n = (int)bytes;
    if (recv_lo)
        rc |= MPI_Irecv(recv_lo, n, MPI_BYTE, lo, TAG_UP, c->comm, &c->req[c->nreq++]);
    if (recv_hi)
        rc |= MPI_Irecv(recv_hi, n, MPI_BYTE, hi, TAG_DOWN, c->comm, &c->req[c->nreq++]);
    if (send_lo)
        rc |= MPI_Isend(send_lo, n, MPI_BYTE, lo, TAG_DOWN, c->comm, &c->req[c->nreq++]);
    if (send_hi)
        rc |= MPI_Isend(send_hi, n, MPI_BYTE, hi, TAG_UP, c->comm, &c->req[c->nreq++]);
    return rc == MPI_SUCCESS ? NLSE_OK
                             : nlse_fail(NLSE_ERR_BACKEND, "MPI_Isend/MPI_Irecv of a halo failed");
}

static int halo_progress(void *ctx)
{
    comm_ctx *c = (comm_ctx *)ctx;
    int done = 0;
    if (c->nreq && MPI_Testall(c->nreq, c->req, &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
        return nlse_fail(NLSE_ERR_BACKEND, "MPI_Testall of a halo swap failed");
    return NLSE_OK;
}

static int halo_finish(void *ctx)
{
    comm_ctx *c = (comm_ctx *)ctx;
    const int n = c->nreq;
    c->nreq = 0;
    if (n && MPI_Waitall(n, c->req, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
        return nlse_fail(NLSE_ERR_BACKEND, "MPI_Waitall of a halo swap failed");
    return NLSE_OK;
}

static void capsule_free(PyObject *cap)
{
    comm_ctx *c = (comm_ctx *)PyCapsule_GetPointer(cap, NLSEPY_COMM_CAPSULE);
    if (!c)
        return;
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin)
        MPI_Comm_free(&c->comm);
    free(c->buf);
    free(c);
}

static PyObject *m_comm_capsule(PyObject *Py_UNUSED(m), PyObject *obj)
{
    MPI_Comm *pc = nlsepy_mpi_comm(obj);
    if (!pc)
        return NULL;
    comm_ctx *c = (comm_ctx *)calloc(1, sizeof *c);
    if (!c)
        return PyErr_NoMemory();
    if (MPI_Comm_dup(*pc, &c->comm) != MPI_SUCCESS) {
        free(c);
        PyErr_SetString(PyExc_RuntimeError, "MPI_Comm_dup failed");
        return NULL;
    }
    MPI_Comm_size(c->comm, &c->size);
    c->vt.ctx = c;
    c->vt.sum = ordered_sum;
    c->vt.max = ordered_max;
    c->vt.alltoallv = alltoallv;
    c->vt.halo_start = halo_start;
    c->vt.halo_progress = halo_progress;
    c->vt.halo_finish = halo_finish;
    PyObject *cap = PyCapsule_New(&c->vt, NLSEPY_COMM_CAPSULE, capsule_free);
    if (!cap) {
        MPI_Comm_free(&c->comm);
        free(c);
    }
    return cap;
}

/* ordered_sum / ordered_max from Python on a float64 vector (a new array) */
static PyObject *reduce_py(PyObject *args, int (*fn)(void *, double *, size_t))
{
    PyObject *cap, *obj;
    if (!PyArg_ParseTuple(args, "OO", &cap, &obj))
        return NULL;
    const nlse_comm *vt = nlsepy_comm_table(cap);
    if (!vt)
        return NULL;
    PyArrayObject *a = (PyArrayObject *)PyArray_FROMANY(obj, NPY_DOUBLE, 0, 0,
                                                        NPY_ARRAY_ENSURECOPY | NPY_ARRAY_CARRAY);
    if (!a)
        return NULL;
    int st;
    Py_BEGIN_ALLOW_THREADS
    st = fn(vt->ctx, (double *)PyArray_DATA(a), (size_t)PyArray_SIZE(a));
    Py_END_ALLOW_THREADS
    if (st) {
        Py_DECREF(a);
        return nlsepy_raise(st);
    }
    return (PyObject *)a;
}

static PyObject *m_ordered_sum(PyObject *Py_UNUSED(m), PyObject *args)
{
    return reduce_py(args, ordered_sum);
}

static PyObject *m_ordered_max(PyObject *Py_UNUSED(m), PyObject *args)
{
    return reduce_py(args, ordered_max);
}

/* One halo buffer of halo_swap: None (no neighbour on that side) or a
 * C-contiguous array of `*bytes` bytes (the first one found sets it),
 * writable when it receives. */
static int halo_buffer(PyObject *obj, int writable, const char *name, void **data,
                       Py_ssize_t *bytes, PyArrayObject **keep)
{
    *data = NULL;
    *keep = NULL;
    if (obj == Py_None)
        return 0;
    if (!PyArray_Check(obj) || !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)obj) ||
        (writable && !PyArray_ISWRITEABLE((PyArrayObject *)obj))) {
        PyErr_Format(PyExc_TypeError, "halo_swap: %s must be None or a C-contiguous%s array",
                     name, writable ? " writable" : "");
        return -1;
    }
    PyArrayObject *a = (PyArrayObject *)obj;
    if (*bytes >= 0 && PyArray_NBYTES(a) != *bytes) {
        PyErr_Format(PyExc_ValueError, "halo_swap: %s has %zd bytes, the others %zd", name,
                     (Py_ssize_t)PyArray_NBYTES(a), *bytes);
        return -1;
    }
    *bytes = PyArray_NBYTES(a);
    *data = PyArray_DATA(a);
    Py_INCREF(a);
    *keep = a;
    return 0;
}

/* halo_swap(capsule, send_lo, recv_lo, send_hi, recv_hi): the table's halo
 * swap, started and finished (send_lo to rank - 1, whose recv_hi takes it;
 * send_hi to rank + 1, into its recv_lo; ranks modulo the size). */
static PyObject *m_halo_swap(PyObject *Py_UNUSED(m), PyObject *args)
{
    PyObject *cap, *obj[4];
    if (!PyArg_ParseTuple(args, "OOOOO", &cap, &obj[0], &obj[1], &obj[2], &obj[3]))
        return NULL;
    const nlse_comm *vt = nlsepy_comm_table(cap);
    if (!vt)
        return NULL;
    static const char *names[4] = {"send_lo", "recv_lo", "send_hi", "recv_hi"};
    void *data[4];
    PyArrayObject *keep[4] = {NULL, NULL, NULL, NULL};
    Py_ssize_t bytes = -1;
    int bad = 0;
    for (int i = 0; i < 4 && !bad; ++i)
        bad = halo_buffer(obj[i], i % 2, names[i], &data[i], &bytes, &keep[i]);
    int st = 0;
    if (!bad && bytes > 0) {
        Py_BEGIN_ALLOW_THREADS
        st = vt->halo_start(vt->ctx, data[0], data[1], data[2], data[3], (size_t)bytes);
        int fin = vt->halo_finish(vt->ctx); /* also after a failed start: nothing left in flight */
        if (!st)
            st = fin;
        Py_END_ALLOW_THREADS
    }
    for (int i = 0; i < 4; ++i)
        Py_XDECREF(keep[i]);
    if (bad)
        return NULL;
    if (st)
        return nlsepy_raise(st);
    Py_RETURN_NONE;
}

/* 1 when the MPI library says it moves device (CUDA) buffers itself, 0 when
 * it says it does not, -1 when it cannot tell. */
static int cuda_aware(void)
{
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    return MPIX_Query_cuda_support() ? 1 : 0;
#elif defined(MPIX_CUDA_AWARE_SUPPORT)
    return 0;
#else
    return -1;
#endif
}

static PyObject *m_info(PyObject *Py_UNUSED(m), PyObject *obj)
{
    MPI_Comm *pc = nlsepy_mpi_comm(obj);
    if (!pc)
        return NULL;
    int rank, size, len, ver, sub, thread;
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    MPI_Comm_rank(*pc, &rank);
    MPI_Comm_size(*pc, &size);
    MPI_Get_library_version(lib, &len);
    MPI_Get_version(&ver, &sub);
    MPI_Query_thread(&thread);
    while (len > 0 && (lib[len - 1] == '\n' || lib[len - 1] == ' ' || lib[len - 1] == '\0'))
        --len;
    int aware = cuda_aware();
    return Py_BuildValue("{s:i,s:i,s:s#,s:s,s:O,s:O}", "rank", rank, "size", size, "library",
                         lib, (Py_ssize_t)len, "standard",
                         ver == 4 ? "MPI-4" : (ver == 3 ? "MPI-3" : "MPI-2 or older"),
                         "cuda_aware", aware < 0 ? Py_None : (aware ? Py_True : Py_False),
                         "thread_multiple", thread >= MPI_THREAD_MULTIPLE ? Py_True : Py_False);
}

static PyMethodDef module_methods[] = {
    {"comm_capsule", m_comm_capsule, METH_O,
     "comm_capsule(comm) -> capsule: the reduction table over a duplicate of an mpi4py "
     "communicator, for a solver's set_comm."},
    {"ordered_sum", m_ordered_sum, METH_VARARGS,
     "ordered_sum(capsule, values) -> float64 array: the sum over the ranks, added in rank "
     "order (the same bits on every rank)."},
    {"ordered_max", m_ordered_max, METH_VARARGS,
     "ordered_max(capsule, values) -> float64 array: the maximum over the ranks (NaN wins)."},
    {"halo_swap", m_halo_swap, METH_VARARGS,
     "halo_swap(capsule, send_lo, recv_lo, send_hi, recv_hi): the halo swap of the table "
     "(send_lo to rank - 1, send_hi to rank + 1, modulo the size; None: no neighbour there)."},
    {"info", m_info, METH_O,
     "info(comm) -> dict: rank, size, the MPI library, whether it is CUDA-aware."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT,
    .m_name = MODULE_NAME,
    .m_doc = "nlsepy MPI layer: the communicator table (rank-ordered sums, all-to-all) "
             "over mpi4py communicators.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC NLSE_CAT(PyInit_, NLSEPY_MODULE)(void)
{
    if (nlsepy_bind_init() < 0)
        return NULL;
    if (import_mpi4py() < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m)
        return NULL;
    return m;
}
