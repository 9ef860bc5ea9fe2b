"""nl.DecGPE(..., comm=) under mpirun: the rank-side tests of
tests/dec/ranks_dec.py on 2 and 3 ranks (7 layers of blocks along z, which
neither divides).  Skipped where MPI, mpi4py or nlsepy's MPI layer is
missing."""

import os

import pytest

RANKS = os.path.join(os.path.dirname(__file__), "ranks_dec.py")


@pytest.mark.mpi
@pytest.mark.parametrize("nranks", [2, 3])
def test_distributed_dec_gpe(mpirun, nranks):
    mpirun(nranks, RANKS)
