"""Shared fixtures: every model test runs on each backend this build offers."""

import signal

import numpy as np
import pytest

import nlsepy as nl


def pytest_configure(config):
    # A suite started in the background by a non-interactive shell inherits
    # SIGINT ignored, and nlsepy then (rightly) ignores it too; the Ctrl-C
    # tests send SIGINT to the process and would run on for ever.  Give the
    # suite Python's usual handler, as a terminal session has it.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config, items):
    have_cuda = "cuda" in nl.backends()
    skip = pytest.mark.skip(reason="needs the CUDA backend and a GPU")
    for item in items:
        if "cuda" in item.keywords and not have_cuda:
            item.add_marker(skip)


@pytest.fixture(params=nl.backends())
def backend(request):
    """Each backend of this build and machine ("cpu", and "cuda" with a GPU)."""
    return request.param


@pytest.fixture
def rng():
    return np.random.default_rng(20260521)


# ------------------------------------------------------------------ MPI
def _mpi_missing():
    """Why the MPI tests cannot run here ("" when they can)."""
    import shutil
    from nlsepy import _build_config
    if not shutil.which("mpirun"):
        return "no mpirun (Debian: openmpi-bin)"
    if not getattr(_build_config, "mpi", False):
        return "nlsepy was built without its MPI layer (needs libopenmpi-dev, mpi4py)"
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return "no mpi4py"
    return ""


@pytest.fixture
def mpirun():
    """Run a rank-side pytest file under ``mpirun -n N``: ``mpirun(N, path)``.

    The rank-side files (``tests/<stem>/ranks_<stem>.py``) hold the
    distributed tests proper; every rank runs them, each test calling the
    collectives in the same order.  Returns the finished process (its
    output on failure is in the assertion message).
    """
    import os
    import subprocess
    import sys
    why = _mpi_missing()
    if why:
        pytest.skip(why)

    def run(nranks: int, path: str, *args: str, timeout: float = 900):
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", str(nranks),
               sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
               str(path), *args]
        env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_MCA_rmaps_base_oversubscribe="1",
                   PYTHONUNBUFFERED="1")
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired as exc:
            out = (exc.stdout or b"")
            raise AssertionError(f"{' '.join(cmd)} did not finish in {timeout} s (a hang in a "
                                 f"collective?):\n{out[-4000:] if isinstance(out, str) else out.decode(errors='replace')[-4000:]}")
        assert proc.returncode == 0, (f"{' '.join(cmd)} exited with {proc.returncode}:\n"
                                      f"{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}")
        return proc
    return run
