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


def _rank_reports(folder, nranks, missing_ok=False):
    """The rank-side pytest outcomes read from each rank's JUnit file.

    Returns ``{test id: (outcome, detail)}`` over the ranks: "failed" where
    any rank failed or errored (the first such rank's message), else
    "skipped" where any rank skipped (its reason), else "passed".  A rank
    without a report fails the test unless `missing_ok` (a run that
    already failed).
    """
    import os
    import xml.etree.ElementTree as ET
    results = {}
    rank_of = {"failed": 2, "skipped": 1, "passed": 0}
    for rank in range(nranks):
        path = os.path.join(folder, f"rank-{rank}.xml")
        if missing_ok and not os.path.isfile(path):
            continue
        assert os.path.isfile(path), f"rank {rank} wrote no test report ({path})"
        for case in ET.parse(path).getroot().iter("testcase"):
            name = f"{case.get('classname', '')}::{case.get('name', '')}"
            outcome, detail = "passed", ""
            for tag, kind in (("failure", "failed"), ("error", "failed"), ("skipped", "skipped")):
                el = case.find(tag)
                if el is not None:
                    outcome = kind
                    detail = f"rank {rank}: {el.get('message', '')}"
                    break
            if name not in results or rank_of[outcome] > rank_of[results[name][0]]:
                results[name] = (outcome, detail)
    return results


@pytest.fixture
def mpirun():
    """Run a rank-side pytest file under ``mpirun -n N``: ``mpirun(N, path)``.

    The rank-side files (``tests/<stem>/ranks_<stem>.py``) hold the
    distributed tests proper; every rank runs them, each test calling the
    collectives in the same order.  Every rank writes a JUnit report
    (``rank-<r>.xml``, the rank from Open MPI's ``OMPI_COMM_WORLD_RANK``),
    and the outcome comes from the reports, not from the exit status
    alone: a rank-side failure or error fails the test, a rank-side skip
    (a missing package, a missing GPU) skips it, naming the rank-side
    tests and reasons, and a run that reports no test fails.  Returns the
    finished process (its output on failure is in the assertion message).
    """
    import os
    import subprocess
    import sys
    import tempfile
    why = _mpi_missing()
    if why:
        pytest.skip(why)

    def run(nranks: int, path: str, *args: str, timeout: float = 900):
        with tempfile.TemporaryDirectory(prefix="nlsepy-ranks-") as reports:
            # pytest expands $VARIABLES in the --junitxml path: one file a rank
            junit = os.path.join(reports, "rank-${OMPI_COMM_WORLD_RANK}.xml")
            cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", str(nranks),
                   sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
                   f"--junitxml={junit}", str(path), *args]
            env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_MCA_rmaps_base_oversubscribe="1",
                       PYTHONUNBUFFERED="1")
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                      env=env)
            except subprocess.TimeoutExpired as exc:
                out = (exc.stdout or b"")
                raise AssertionError(f"{' '.join(cmd)} did not finish in {timeout} s (a hang in a "
                                     f"collective?):\n{out[-4000:] if isinstance(out, str) else out.decode(errors='replace')[-4000:]}")
            where = f"{' '.join(cmd)}:\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}"
            results = _rank_reports(reports, nranks, missing_ok=proc.returncode != 0)
        failed = {k: d for k, (o, d) in results.items() if o == "failed"}
        assert proc.returncode == 0 and not failed, (
            f"exited with {proc.returncode}, rank-side failures {failed or '(none reported)'}: "
            f"{where}")
        assert results, f"no rank-side test ran: {where}"
        skipped = {k: d for k, (o, d) in results.items() if o == "skipped"}
        if skipped:
            pytest.skip(f"{len(skipped)} of {len(results)} rank-side tests skipped under "
                        f"mpirun -n {nranks}: " + "; ".join(f"{k} ({d})" for k, d in skipped.items()))
        return proc
    return run
