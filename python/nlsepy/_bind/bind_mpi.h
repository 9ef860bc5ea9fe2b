/*
 * _bind/bind_mpi.h -- what the files of the `_mpi` extension share
 * (_bind/mpi.c, the module and its reductions; _bind/dipolar_mpi.c, the
 * distributed dipolar GPE): the MPI communicator of an mpi4py object, and
 * the registration of the distributed dipolar GPE.  mpi4py's C API is per
 * file (each file calls import_mpi4py()), so the lookup is a static inline
 * function of each file that includes this header.
 */
#ifndef NLSEPY_BIND_MPI_H
#define NLSEPY_BIND_MPI_H

#include "bind.h"
#include <mpi.h>
#include <mpi4py/mpi4py.h>

/* The MPI_Comm of an mpi4py communicator, or NULL with TypeError (not a
 * communicator) or ValueError (MPI.COMM_NULL). */
static inline MPI_Comm *nlsepy_mpi_comm(PyObject *obj)
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

/* The distributed dipolar GPE (_bind/dipolar_mpi.c): adds its type, its
 * function and constant; 0, or -1 with an exception. */
int nlsepy_bind_dipolar_mpi(PyObject *module);

#endif /* NLSEPY_BIND_MPI_H */
