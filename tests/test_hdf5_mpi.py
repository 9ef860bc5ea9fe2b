"""Distributed run files: the rank-side tests of tests/ranks_hdf5.py under
mpirun on 2 and 3 ranks, and a distributed run killed mid-run (SIGKILL to
every rank): its run file reads the frames whole in every part."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

h5py = pytest.importorskip("h5py")

import nlsepy as nl  # noqa: E402

RANKS = os.path.join(os.path.dirname(__file__), "ranks_hdf5.py")


@pytest.mark.mpi
@pytest.mark.parametrize("nranks", [2, 3])
def test_distributed_run_files(mpirun, nranks):
    mpirun(nranks, RANKS)


_KILLED = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    from mpi4py import MPI
    import nlsepy as nl
    comm = MPI.COMM_WORLD
    x = 0.3 * (np.arange(25) - 12)
    psi = np.exp(-x[:, None] ** 2 - x[None, :16] ** 2) + 0j
    sim = nl.NLSE(psi, 0.3, bc="periodic", backend="cpu", comm=comm)

    def tell(model):
        time.sleep(0.5)  # every part flushes its frame before the next is taken
        tell.seen += 1
        if tell.seen == 3:
            time.sleep(1.0)  # the run file has its entries by now
            # a file per rank (two ranks' lines on mpirun's stdout can interleave)
            name = f"{sys.argv[1]}.pid{comm.Get_rank()}"
            with open(name + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.replace(name + ".tmp", name)
            time.sleep(120)
    tell.seen = 0
    sim.run(100 * sim.dt, frames=10, output=sys.argv[1], callback=tell)
""")


@pytest.mark.mpi
def test_killed_distributed_run_leaves_a_readable_file(mpirun, tmp_path):
    """SIGKILL to both ranks a second after the fourth frame: the run file
    opens with plain h5py; its /t counts the frames whole in every part
    (three or four: a frame's time reaches the run file once every part
    has flushed it), and open_run reads those, equal to one process's."""
    path = str(tmp_path / "killed.h5")
    script = tmp_path / "killed.py"
    script.write_text(_KILLED)
    env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_MCA_rmaps_base_oversubscribe="1")
    proc = subprocess.Popen(["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", "2",
                             sys.executable, str(script), path], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)
    pids = []
    try:
        names = [f"{path}.pid{r}" for r in range(2)]
        deadline = time.monotonic() + 120
        while not all(os.path.exists(n) for n in names):
            assert proc.poll() is None, f"the run ended ({proc.returncode}) before both ranks stopped"
            assert time.monotonic() < deadline, "the ranks did not reach the fourth frame in 120 s"
            time.sleep(0.05)
        for n in names:
            with open(n) as f:
                pids.append(int(f.read()))
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    x = 0.3 * (np.arange(25) - 12)
    psi = np.exp(-x[:, None] ** 2 - x[None, :16] ** 2) + 0j
    ref = nl.NLSE(psi, 0.3, bc="periodic", backend="cpu")
    def stop(model):
        stop.seen += 1
        if stop.seen == 3:
            raise StopIteration
    stop.seen = 0
    frames = ref.run(100 * ref.dt, frames=10, callback=stop)  # the killed run's first four
    with h5py.File(path, "r") as f:
        n = f["t"].shape[0]
        assert n in (3, 4) and not f.attrs["complete"]
        assert f["psi"].shape[0] == 4  # every part flushed four frames
        assert np.array_equal(f["psi"][:4], frames.psi)
        assert np.array_equal(f["t"][:], frames.t[:n])
    run = nl.open_run(path)
    assert np.asarray(run["t"]).shape == (n,)
    assert np.array_equal(np.asarray(run["psi"]), frames.psi[:n])
