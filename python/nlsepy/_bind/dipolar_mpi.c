/*
 * _bind/dipolar_mpi.c -- binding of the distributed dipolar GPE solver
 * (csrc/dipolar/dipolar_mpi.h: x slabs over the ranks of an mpi4py
 * communicator, FFTW's MPI transforms, transposes for the x solve; Loncar,
 * thesis, chapter 6) in the `_mpi` extension: the `DipolarMPI` type, with
 * the methods of `_core.Dipolar` on the local slab (written once in
 * _bind/dipolar_methods.h), and `dipolar_slab`.
 */
#include "bind_mpi.h"
#include "dipolar_mpi.h"

typedef struct {
    NLSEPY_SOLVER_HEAD(nlse_dipolar_mpi, nlse_dipolar_params)
    PyObject *capsule; /* keeps the reduction table alive */
    size_t local[3];   /* slab shape */
    size_t i0;
} DipolarMPIObject;

/* the methods shared with `Dipolar` (_bind/dipolar_methods.h) on the slab;
 * arrays are copied in with the GIL released */
#define DIPOLAR_OBJECT DipolarMPIObject
#define DIPOLAR_API(name) NLSE_CAT(nlse_dipolar_mpi_, name)
#define DIPOLAR_DENSITY nlse_dipolar_mpi_density_part
#define DIPOLAR_NDIM(self) 3
#define DIPOLAR_SHAPE(self) ((self)->local)
#define DIPOLAR_COPY(self, st, call) NLSEPY_RUN(self, st, call)

static void dtype_error(const char *name, int single, int allow_complex)
{
    PyErr_Format(PyExc_TypeError, "%s must have the solver's precision (%s)", name,
                 single ? "float32/complex64" : "float64/complex128");
}

static PyObject *dipolar_last_seconds(DipolarMPIObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!NLSEPY_READY(self))
        return NULL;
    double tm[4];
    nlse_dipolar_mpi_timings(self->s, tm);
    return PyFloat_FromDouble(tm[0]);
}

#include "dipolar_methods.h"

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
    MPI_Comm *pc = nlsepy_mpi_comm(comm);
    if (!pc)
        return -1;
    const nlse_comm *red = nlsepy_comm_table(cap);
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
    NLSEPY_DROP(self, nlse_dipolar_mpi_destroy);
    MPI_Comm c = *pc;
    int st;
    NLSEPY_RUN(self, st, nlse_dipolar_mpi_create(&p, c, red, &self->s));
    if (nlsepy_init_status(st))
        return -1;
    Py_INCREF(cap);
    Py_XSETREF(self->capsule, cap);
    self->p = p;
    size_t nj, j0;
    nlse_dipolar_mpi_local(self->s, &self->local[0], &self->i0, &nj, &j0);
    self->local[1] = p.shape[1];
    self->local[2] = p.shape[2];
    return 0;
}

NLSEPY_DEALLOC_KEEP(dmpi_dealloc, DipolarMPIObject, nlse_dipolar_mpi_destroy, capsule)

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
    DIPOLAR_METHODS,
    {"timings", (PyCFunction)dmpi_timings, METH_NOARGS,
     "timings() -> seconds of the last step() call: step, transpose, fft, reduce."},
    {"x_solve", (PyCFunction)dmpi_x_solve, METH_NOARGS,
     "x_solve() -> how the x solve crosses the slabs: \"MPI_Alltoallv\" (transposes) or "
     "\"substructured\" (NLSEPY_DIPOLAR_XSOLVE)."},
    {"local", (PyCFunction)dmpi_local, METH_NOARGS,
     "local() -> (ni, i0, nj, j0): x slab and y rows of the x pencils."},
    {NULL, NULL, 0, NULL}};

NLSEPY_SOLVER_TYPE(DipolarMPIType, "DipolarMPI", DipolarMPIObject, dmpi_init, dmpi_dealloc,
                   dmpi_methods,
                   "Split-step Crank-Nicolson solver of the 3D dipolar GPE over MPI ranks (x "
                   "slabs).");

/* dipolar_slab(comm, (nx, ny, nz)) -> (ni, i0): FFTW's x slab of this rank */
static PyObject *m_dipolar_slab(PyObject *Py_UNUSED(m), PyObject *args)
{
    PyObject *comm, *shape;
    size_t sh[3], ni, i0;
    if (!PyArg_ParseTuple(args, "OO", &comm, &shape))
        return NULL;
    MPI_Comm *pc = nlsepy_mpi_comm(comm);
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
