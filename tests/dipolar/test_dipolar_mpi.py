"""The distributed dipolar GPE under mpirun (the tests proper: ranks_dipolar.py):
2 ranks, and 3 ranks, which split the x rows unevenly; CPU ranks, and GPU
ranks where a GPU is present (every rank on its own GPU, or sharing one)."""

import pathlib

import os

import pytest

RANKS = pathlib.Path(__file__).with_name("ranks_dipolar.py")


def run_one_and_three(args, one, many):
    """``python ARGS --out ONE`` in one process, then under ``mpirun -n 3``
    with ``--out MANY``; returns the mpirun process (checked to succeed)."""
    import subprocess
    import sys
    env = dict(os.environ, OMP_NUM_THREADS="1")
    subprocess.run([sys.executable, *args, "--out", str(one)], check=True, env=env,
                   capture_output=True, timeout=300)
    proc = subprocess.run(["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", "3",
                           sys.executable, *args, "--out", str(many)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.mark.mpi
@pytest.mark.parametrize("xsolve", ["transpose", "substructure"])
@pytest.mark.parametrize("nranks", [2, 3])
def test_dipolar_distributed(mpirun, nranks, xsolve, monkeypatch):
    """CPU ranks against one process (1e-12), the x solve by transposes to x
    pencils or by substructuring (NLSEPY_DIPOLAR_XSOLVE)."""
    monkeypatch.setenv("NLSEPY_RANKS_BACKEND", "cpu")
    monkeypatch.setenv("NLSEPY_DIPOLAR_XSOLVE", xsolve)
    mpirun(nranks, RANKS, timeout=300)


@pytest.mark.mpi
@pytest.mark.cuda
@pytest.mark.parametrize("xsolve", ["transpose", "substructure"])
@pytest.mark.parametrize("halo", ["ipc", "host"])
@pytest.mark.parametrize("nranks", [2, 3])
def test_dipolar_distributed_gpu(mpirun, nranks, halo, xsolve, monkeypatch):
    """GPU ranks against one GPU (1e-12), the transposes (or the
    substructured x solve's rows and ends) through CUDA IPC or staged
    through host memory (the path of ranks on several hosts)."""
    import nlsepy as nl
    if "cuda" not in nl.backends("DipolarGPE"):
        pytest.skip("no CUDA device")
    monkeypatch.setenv("NLSEPY_RANKS_BACKEND", "cuda")
    monkeypatch.setenv("NLSEPY_DIPOLAR_XSOLVE", xsolve)
    monkeypatch.setenv("NLSEPY_HALO", "host" if halo == "host" else "")
    mpirun(nranks, RANKS, timeout=300)


@pytest.mark.mpi
def test_dbec_cli_under_mpirun_writes_the_files_of_one_process(mpirun, tmp_path):
    """``mpirun -n 3 python -m nlsepy dbec imag3d-input`` (the 3D program on 3
    ranks, 26 x rows which 3 does not divide) writes the same files as one
    process: the same names, the text files identical, the binary files
    (the full-grid NAME.bin written by MPI I/O, the sections) within 1e-14;
    no temporary file is left."""
    import numpy as np
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    src = os.path.join(root, "examples", "dbec", "imag3d-input")
    sets = ["NX=26", "NY=20", "NZ=16", "DX=0.8", "DY=0.8", "DZ=0.8", "DT=0.01", "NPAS=20",
            "NRUN=20", "NSTPOUT=imag3d-s", "NRUNOUT=imag3d-den", "OUTSTPX=2"]
    args = ["-m", "nlsepy", "dbec", src, "--backend", "cpu"]
    for kv in sets:
        args += ["--set", kv]
    one, many = tmp_path / "one", tmp_path / "many"
    proc = run_one_and_three(args, one, many)
    assert proc.stdout.count("wrote ") == 1  # rank 0 reports
    names = sorted(p.name for p in one.iterdir())
    assert sorted(p.name for p in many.iterdir() if not p.name.startswith(".")) == names
    hidden = [p.name for p in many.iterdir() if p.name.startswith(".")]
    assert all(".part" in h for h in hidden) and len(hidden) == 3  # PSIOUT's parts
    for name in names:
        a, b = one / name, many / name
        if name.endswith(".bin"):
            x, y = np.fromfile(a), np.fromfile(b)
            assert x.shape == y.shape and np.abs(x - y).max() <= 1e-14 * np.abs(x).max(), name
        elif name == "imag3d-out.txt":
            keep = [ln for ln in a.read_text().splitlines() if "Time:" not in ln]
            assert keep == [ln for ln in b.read_text().splitlines() if "Time:" not in ln]
        elif name.endswith(".txt"):
            assert a.read_text() == b.read_text(), name
    import nlsepy as nl
    x = nl.DipolarGPE.load(str(one / "imag3d-psi.npz"), backend="cpu")
    y = nl.DipolarGPE.load(str(many / "imag3d-psi.npz"), backend="cpu")
    assert np.abs(x.psi - y.psi).max() <= 1e-13 * np.abs(x.psi).max()


@pytest.mark.mpi
def test_dbec_real_time_dynaout_under_mpirun_is_that_of_one_process(mpirun, tmp_path):
    """A real-time run with DYNAOUT on 3 ranks (the distributed solver takes
    a stepping call per row and the integrated densities) writes the
    DYNAOUT file of one process (whose stepping calls record the moments)."""
    import numpy as np

    import nlsepy as nl
    from _helpers import write_real3d_input
    src = tmp_path / "real3d-input"
    write_real3d_input(src, (26, 20, 16), outstpt=2)
    den = np.abs(nl.DipolarGPE((26, 20, 16), 0.6, 0.01, trap=(0.5, 1.0, 1.5),
                               backend="cpu").psi) ** 2
    one, many = tmp_path / "one", tmp_path / "many"
    for d in (one, many):
        d.mkdir()
        den.astype("<f8").tofile(d / "imag3d-den.bin")
    args = ["-m", "nlsepy", "dbec", str(src), "--backend", "cpu"]
    run_one_and_three(args, one, many)
    dyna = (one / "real3d-dyna.txt").read_text()
    assert len(dyna.splitlines()) == 9  # after iterations 1, 3, ..., 17
    assert (many / "real3d-dyna.txt").read_text() == dyna
