"""The distributed dipolar GPE under mpirun (the tests proper: ranks_dipolar.py):
2 ranks, and 3 ranks, which FFTW's slabs split unevenly."""

import pathlib

import pytest

RANKS = pathlib.Path(__file__).with_name("ranks_dipolar.py")


@pytest.mark.mpi
@pytest.mark.parametrize("nranks", [2, 3])
def test_dipolar_distributed(mpirun, nranks):
    mpirun(nranks, RANKS, timeout=300)
