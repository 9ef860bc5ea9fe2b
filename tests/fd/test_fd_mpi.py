"""nl.NLSE(..., comm=): the rank-side tests of tests/fd/ranks_fd.py under
mpirun on 2 and 3 ranks, and what one process sees without MPI."""

import os
import sys

import numpy as np
import pytest

import nlsepy as nl

from _helpers import rank_tests  # noqa: E402

RANKS = os.path.join(os.path.dirname(__file__), "ranks_fd.py")


test_distributed_nlse, test_distributed_nlse_gpu = rank_tests(RANKS)


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
