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
    """The CPU rank-side tests (any rank-side skip is this test's skip)."""
    mpirun(nranks, RANKS, "-m", "not cuda")


@pytest.mark.mpi
@pytest.mark.cuda
@pytest.mark.parametrize("nranks", [2, 3])
def test_distributed_dec_gpe_gpu(mpirun, nranks):
    """The rank-side tests marked cuda: GPU ranks against one GPU."""
    mpirun(nranks, RANKS, "-m", "cuda")
