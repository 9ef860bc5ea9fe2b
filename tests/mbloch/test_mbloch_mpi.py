"""nl.MaxwellBloch(..., comm=) under mpirun: the rank-side tests of
tests/mbloch/ranks_mbloch.py on 2 and 3 ranks (13 atoms, which neither
divides).  Skipped where MPI, mpi4py or nlsepy's MPI layer is missing."""

import os

import pytest

RANKS = os.path.join(os.path.dirname(__file__), "ranks_mbloch.py")


@pytest.mark.mpi
@pytest.mark.parametrize("nranks", [2, 3])
def test_distributed_maxwell_bloch(mpirun, nranks):
    """The CPU rank-side tests (any rank-side skip is this test's skip)."""
    mpirun(nranks, RANKS, "-m", "not cuda")


@pytest.mark.mpi
@pytest.mark.cuda
@pytest.mark.parametrize("nranks", [2, 3])
def test_distributed_maxwell_bloch_gpu(mpirun, nranks):
    """The rank-side tests marked cuda: GPU ranks against one GPU."""
    mpirun(nranks, RANKS, "-m", "cuda")
