"""nl.NLSE(..., comm=): the rank-side tests of tests/fd/ranks_fd.py under
mpirun on 2 and 3 ranks, and what one process sees without MPI."""

import os
import sys

import numpy as np
import pytest

import nlsepy as nl

RANKS = os.path.join(os.path.dirname(__file__), "ranks_fd.py")


@pytest.mark.mpi
@pytest.mark.parametrize("nranks", [2, 3])
def test_distributed_nlse(mpirun, nranks):
    """The CPU rank-side tests (any rank-side skip is this test's skip)."""
    mpirun(nranks, RANKS, "-m", "not cuda")


@pytest.mark.mpi
@pytest.mark.cuda
@pytest.mark.parametrize("nranks", [2, 3])
def test_distributed_nlse_gpu(mpirun, nranks):
    """The rank-side tests marked cuda: GPU ranks against one GPU."""
    mpirun(nranks, RANKS, "-m", "cuda")


def test_comm_without_mpi4py_names_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # as if not installed
    with pytest.raises(ImportError, match="pip install mpi4py"):
        nl.NLSE(np.ones((16, 16), complex), 0.1, comm=object())


def test_comm_without_the_mpi_layer_names_what_to_install(monkeypatch):
    pytest.importorskip("mpi4py")
    from nlsepy import _build_config
    monkeypatch.setattr(_build_config, "mpi", False)
    with pytest.raises(ImportError, match="libopenmpi-dev"):
        nl.NLSE(np.ones((16, 16), complex), 0.1, comm=object())


def test_comm_must_be_a_communicator():
    pytest.importorskip("mpi4py")
    from nlsepy import _build_config
    if not _build_config.mpi:
        pytest.skip("nlsepy was built without its MPI layer")
    with pytest.raises(TypeError, match="intracommunicator"):
        nl.NLSE(np.ones((16, 16), complex), 0.1, comm="world")


def test_slab_needs_comm():
    slab = nl.Slab(np.ones((4, 16), complex), 0, (16, 16))
    with pytest.raises(ValueError, match="pass comm="):
        nl.NLSE(slab, 0.1)
