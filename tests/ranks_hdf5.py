"""Rank side of the distributed run-file tests (run by tests/test_hdf5_mpi.py
under ``mpirun -n 2`` and ``-n 3``; every rank runs every test, so each
calls the collectives in the same order).

- ``run(..., output=)`` of a distributed NLSE (3D and 2D grids whose first
  axis the rank counts do not divide), DipolarGPE (real and imaginary time,
  CPU ranks; 22 x-rows: 8 + 7 + 7 on 3 ranks) and DecGPE:
  each rank writes its part file, rank 0 the run file; read with plain h5py,
  the run file's ``psi`` (a virtual dataset over the parts) equals the
  single-process run file's frames bit for bit (imaginary time: within
  1e-12, the norm's rank-ordered sum), its coordinates and counters equal
  them exactly, its float series within 1e-12 (and the last entry equals
  the distributed model's own observables bit for bit), ``/parameters/V``
  (a virtual dataset too) equals V; each rank's rows equal the frames it
  kept.  Neither ``gather`` nor ``_dist.gather_rows`` is called while
  recording: no rank holds a whole frame.
- An interrupted run: KeyboardInterrupt from a callback on one rank, SIGINT
  on one rank (the runner's callback; the dipolar block vote).  Every rank
  raises KeyboardInterrupt; the run file, marked incomplete, reads the
  frames taken so far with plain h5py and with ``nl.open_run`` (dict, and
  xarray when installed).
- The folder moved (read from another working directory), a missing part
  (open_run refuses; plain h5py would read zeros), a part opened by
  mistake, a run file replaced by a single-process run (its parts
  removed), a part that cannot be created on one rank (the same error on
  every rank, nothing left behind).
"""

import contextlib
import os
import shutil
import signal
import sys

import numpy as np
import pytest
from mpi4py import MPI

import nlsepy as nl
from nlsepy.common import dist as _dist

h5py = pytest.importorskip("h5py")

COMM = MPI.COMM_WORLD
RANK, SIZE = COMM.Get_rank(), COMM.Get_size()
TOL = 1e-12


def everywhere(ok, what=""):
    """Assert on every rank that `ok` holds on every rank."""
    oks = COMM.allgather(bool(ok))
    assert all(oks), f"{what}: fails on ranks {[r for r, v in enumerate(oks) if not v]}"


def on_root(check):
    """``check()`` on rank 0 (a list of failure messages), asserted on every rank."""
    bad = []
    if RANK == 0:
        try:
            bad = list(check())
        except Exception as exc:  # reported on every rank, not a hang
            bad = [f"{type(exc).__name__}: {exc}"]
    bad = COMM.bcast(bad, root=0)
    assert not bad, "; ".join(bad)


def shared(tmp_path):
    """Rank 0's temporary folder, on every rank."""
    return COMM.bcast(str(tmp_path), root=0)


@contextlib.contextmanager
def counted_gathers(model):
    """Count the calls of ``model.gather`` and ``_dist.gather_rows`` (still
    made, so a call would not leave the ranks unpaired)."""
    calls = []
    rows, gather = _dist.gather_rows, type(model).gather

    def rows_spy(*a, **k):
        calls.append("gather_rows")
        return rows(*a, **k)

    def gather_spy(self, *a, **k):
        calls.append("gather")
        return gather(self, *a, **k)
    _dist.gather_rows = rows_spy
    type(model).gather = gather_spy
    try:
        yield calls
    finally:
        _dist.gather_rows = rows
        type(model).gather = gather


def first_rows(model):
    sl = model.local_slice
    return sl[0] if isinstance(sl, tuple) else sl


def compare(path, ref_path, model, kept, exact=True, coords=("t",), counters=()):
    """The run file `path` against the single-process run file `ref_path`
    (rank 0) and against the frames this rank kept (every rank)."""
    def check():
        bad = []
        with h5py.File(path, "r") as a, h5py.File(ref_path, "r") as b:
            if not a["psi"].is_virtual:
                bad.append("psi is not a virtual dataset")
            files = [s.file_name for s in a["psi"].virtual_sources()]
            names = [os.path.basename(nl.common.hdf5.part_name(path, r, SIZE)) for r in range(SIZE)]
            if files != names:
                bad.append(f"virtual sources {files}, expected the relative names {names}")
            if int(a.attrs["ranks"]) != SIZE or "slabs of axis 0" not in a.attrs["layout"]:
                bad.append("ranks / layout attributes")
            for key in ("model", "units", "nlsepy_version", "backend", "time", "complete"):
                if a.attrs[key] != b.attrs[key]:
                    bad.append(f"attribute {key}: {a.attrs[key]!r} != {b.attrs[key]!r}")
            pa, pb = a["psi"][:], b["psi"][:]
            if pa.shape != pb.shape or pa.dtype != pb.dtype:
                bad.append(f"psi {pa.shape} {pa.dtype} != {pb.shape} {pb.dtype}")
            elif exact and not np.array_equal(pa, pb):
                bad.append(f"psi differs (max {np.max(np.abs(pa - pb)):.3g})")
            elif not exact and np.max(np.abs(pa - pb)) > TOL * np.max(np.abs(pb)):
                bad.append(f"psi differs by {np.max(np.abs(pa - pb)):.3g}")
            for name in b:
                if name in ("psi", "parameters") or not isinstance(b[name], h5py.Dataset):
                    continue
                va, vb = a[name][()], b[name][()]
                if name in coords + counters or vb.dtype.kind in "iu" or vb.ndim > 1 or \
                        name in ("x", "y", "z", "cell", "volume"):
                    ok = np.array_equal(va, vb)
                else:
                    ok = va.shape == vb.shape and np.allclose(va, vb, rtol=TOL, atol=0)
                if not ok:
                    bad.append(f"series {name} differs")
            if "V" in b["parameters"]:
                if not np.array_equal(a["parameters/V"][()], b["parameters/V"][()]):
                    bad.append("parameters/V differs")
                if not a["parameters/V"].is_virtual:
                    bad.append("parameters/V is not a virtual dataset")
        return bad
    on_root(check)
    last = model._record_scalars()
    with h5py.File(path, "r") as f:  # every rank reads the closed run file
        own = f["psi"][(slice(None), first_rows(model))]
        same = np.array_equal(own, np.stack([s for _, s in kept]))
        series = all(f[k][-1] == v for k, v in last.items())
        part = os.path.exists(nl.common.hdf5.part_name(path, RANK, SIZE))
    everywhere(same, "this rank's rows of the run file are the frames it kept")
    everywhere(series, "the last series entries are the distributed model's observables")
    everywhere(part, "this rank's part file")


# --------------------------------------------------------------- models
def nlse_state(shape):
    axes = np.meshgrid(*[np.linspace(-3, 3, n) for n in shape], indexing="ij")
    r2 = sum((0.7 + 0.2 * q) * x ** 2 for q, x in enumerate(axes))
    rng = np.random.default_rng(5)
    psi = np.exp(-r2 / 2 + 1j * (0.8 * axes[0] - 0.3 * axes[-1])) + 0.4
    psi = psi + 0.01 * (rng.standard_normal(shape) + 1j * rng.standard_normal(shape))
    return psi.astype(np.complex128), 0.5 * r2


def nlse(shape, comm, scheme="2shoc", bc="periodic"):
    psi, V = nlse_state(shape)
    return nl.NLSE(psi, 6.0 / (shape[0] - 1), s=-1.0, V=V, scheme=scheme, bc=bc,
                   backend="cpu", comm=comm)


DIPOLAR_SHAPE = (22, 16, 12)  # x = 0 at index n/2: even; x rows 11 + 11, 8 + 7 + 7
DIPOLAR = dict(shape=DIPOLAR_SHAPE, spacing=(0.45, 0.5, 0.6), dt=0.004, g=4.0, gdd=3.0,
               trap=(1.0, 1.3, 0.8), cutoff=3.5, backend="cpu")


def dipolar(comm):
    rng = np.random.default_rng(3)
    x = [(np.arange(n) - n // 2) * h for n, h in zip(DIPOLAR_SHAPE, DIPOLAR["spacing"])]
    X, Y, Z = np.meshgrid(*x, indexing="ij")
    psi = np.exp(-0.5 * (X ** 2 + 1.3 * Y ** 2 + 0.8 * Z ** 2))
    psi = psi * (1 + 0.1 * rng.standard_normal(DIPOLAR_SHAPE)) * np.exp(0.4j * X)
    V = 0.2 * np.cos(np.arange(np.prod(DIPOLAR_SHAPE)).reshape(DIPOLAR_SHAPE) * 0.01)
    return nl.DipolarGPE(psi0=psi, V=V, comm=comm, **DIPOLAR)


def dec(comm):
    kw = dict(blocks=(3, 4, 7), spacing=0.9, g=3.0, trap=(1.0, 0.8, 1.3), bc="zero",
              V=lambda x, y, z: 0.3 * np.cos(x) * np.sin(y + z), backend="cpu")
    ref = nl.DecGPE("bcc", **kw)
    p = ref.positions
    psi0 = np.exp(-(0.6 * p[:, 0] ** 2 + 0.4 * p[:, 1] ** 2 + 0.5 * p[:, 2] ** 2) / 2
                  + 0.7j * p[:, 0]) + 0.2
    if comm is None:
        ref.psi = psi0
        return ref
    return nl.DecGPE("bcc", psi0=psi0, comm=comm, **kw)


def reference(make, path, run):
    """Rank 0 alone: the single-process run file."""
    if RANK == 0:
        run(make(None), path)
    COMM.Barrier()


# ------------------------------------------------------------ round trips
@pytest.mark.parametrize("shape", [(25, 12, 10), (31, 16)])
def test_nlse_run_file_equals_single_process(tmp_path, shape):
    d = shared(tmp_path)
    path, ref = os.path.join(d, "run.h5"), os.path.join(d, "ref.h5")
    reference(lambda c: nlse(shape, c), ref,
              lambda m, p: m.run(20 * m.dt, frames=5, output=p))
    sim = nlse(shape, COMM)
    with counted_gathers(sim) as calls:
        frames = sim.run(20 * sim.dt, frames=5, output=path)
    everywhere(not calls, f"gathers while recording: {calls}")
    compare(path, ref, sim, frames, counters=("steps",))
    with h5py.File(nl.common.hdf5.part_name(path, RANK, SIZE), "r") as part:
        ok = part.attrs["format"] == "nlsepy run part" and bool(part.attrs["complete"]) and \
            part["psi"].shape == (6,) + sim.psi.shape and part["t"].shape == (6,) and \
            np.array_equal(part["slabs/V"][()], sim.V)
    everywhere(ok, "the part file")


def test_dipolar_run_files_equal_single_process(tmp_path):
    d = shared(tmp_path)
    real, imag = os.path.join(d, "real.h5"), os.path.join(d, "imag.h5")
    rreal, rimag = os.path.join(d, "ref_real.h5"), os.path.join(d, "ref_imag.h5")

    def both(m, _):
        m.real_time(12, frames=4, output=rreal)
        m.imaginary_time(12, frames=3, output=rimag)
    reference(dipolar, None, both)
    gpe = dipolar(COMM)
    with counted_gathers(gpe) as calls:
        gpe.real_time(12, frames=4, output=real)
        kept = gpe.frames
    everywhere(not calls, f"gathers while recording: {calls}")
    # the x solve by substructuring rounds otherwise than one process: 1e-12
    compare(real, rreal, gpe, kept, exact=False, counters=("steps_real", "steps_imaginary"))
    with counted_gathers(gpe) as calls:
        gpe.imaginary_time(12, frames=3, output=imag)
        kept = gpe.frames
    everywhere(not calls, f"gathers while recording: {calls}")
    compare(imag, rimag, gpe, kept, exact=False, coords=("step",),
            counters=("steps_real", "steps_imaginary"))


def test_dec_run_file_equals_single_process(tmp_path):
    d = shared(tmp_path)
    path, ref = os.path.join(d, "dec.h5"), os.path.join(d, "ref.h5")
    reference(dec, ref, lambda m, p: m.run(10 * m.dt, frames=5, output=p))
    sim = dec(COMM)
    with counted_gathers(sim) as calls:
        frames = sim.run(10 * sim.dt, frames=5, output=path)
    everywhere(not calls, f"gathers while recording: {calls}")
    compare(path, ref, sim, frames, counters=("steps",))


# ------------------------------------------------------------ interrupts
def check_interrupted(path, ref, n, kept, exact=True):
    """The run file of an interrupted run: `n` frames, the first `n` of the
    reference's (bit for bit, or to TOL of its largest value), incomplete,
    readable by plain h5py and nl.open_run."""
    def check():
        bad = []
        with h5py.File(path, "r") as f, h5py.File(ref, "r") as r:
            if bool(f.attrs["complete"]):
                bad.append("marked complete")
            if f["t"].shape != (n,) or f["psi"].shape[0] != n:
                bad.append(f"t {f['t'].shape}, psi {f['psi'].shape}: expected {n} frames")
            elif exact and not np.array_equal(f["psi"][:], r["psi"][:n]):
                bad.append("frames differ from the reference's")
            elif not exact and np.max(np.abs(f["psi"][:] - r["psi"][:n])) > \
                    TOL * np.max(np.abs(r["psi"][:n])):
                bad.append("frames differ from the reference's by more than the tolerance")
            if not np.array_equal(f["t"][:], r["t"][:n]):
                bad.append("times differ")
        saved = sys.modules.get("xarray")
        sys.modules["xarray"] = None  # as if not installed: the same Run
        try:
            run = nl.open_run(path)
        finally:
            if saved is None:
                del sys.modules["xarray"]
            else:
                sys.modules["xarray"] = saved
        if run["psi"].shape[0] != n or run["attrs"]["complete"] is not False or \
                run["attrs"]["dims"]["psi"][0] != "t":
            bad.append(f"open_run (dict): psi {run['psi'].shape}")
        try:
            import xarray  # noqa: F401
        except ImportError:
            return bad
        ds = nl.open_run(path).to_xarray()
        if ds["psi"].shape[0] != n or ds["psi"].dims[0] != "t" or ds.sizes["t"] != n:
            bad.append(f"open_run (xarray): psi {ds['psi'].shape}")
        return bad
    on_root(check)
    everywhere(len(kept) == n, f"frames the exception carries: {len(kept)} != {n}")


def test_keyboard_interrupt_from_a_callback_on_one_rank(tmp_path):
    d = shared(tmp_path)
    path, ref = os.path.join(d, "cut.h5"), os.path.join(d, "ref.h5")
    shape = (25, 12, 10)
    reference(lambda c: nlse(shape, c), ref, lambda m, p: m.run(20 * m.dt, frames=10, output=p))
    sim = nlse(shape, COMM)
    seen = []

    def stop(model):
        seen.append(model.t)
        if RANK == SIZE - 1 and len(seen) == 3:
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt) as info:
        sim.run(20 * sim.dt, frames=10, output=path, callback=stop)
    check_interrupted(path, ref, 4, info.value.frames)
    everywhere(sim._steps == 6, "every rank stopped after the same chunk")
    with h5py.File(nl.common.hdf5.part_name(path, RANK, SIZE), "r") as part:
        ok = not part.attrs["complete"] and part["t"].shape == (4,)
    everywhere(ok, "the part file of an interrupted run")


def test_sigint_on_one_rank(tmp_path):
    d = shared(tmp_path)
    path, ref = os.path.join(d, "sigint.h5"), os.path.join(d, "ref.h5")
    shape = (31, 16)
    reference(lambda c: nlse(shape, c), ref, lambda m, p: m.run(20 * m.dt, frames=10, output=p))
    sim = nlse(shape, COMM)
    calls = []

    def hit(model):
        calls.append(1)
        if RANK == 0 and len(calls) == 2:
            signal.raise_signal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt) as info:
        sim.run(20 * sim.dt, frames=10, output=path, callback=hit)
    check_interrupted(path, ref, 3, info.value.frames)


def test_sigint_on_one_rank_dipolar(tmp_path):
    d = shared(tmp_path)
    path, ref = os.path.join(d, "dsigint.h5"), os.path.join(d, "ref.h5")
    reference(dipolar, ref, lambda m, p: m.real_time(8, frames=4, output=p))
    gpe = dipolar(COMM)

    def hit(_):
        if RANK == 0 and gpe.steps["real"] == 2:
            signal.raise_signal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        gpe.real_time(8, frames=4, callback=hit, output=path)
    everywhere(gpe.steps["real"] == 2, f"steps at the interrupt ({gpe.steps})")
    check_interrupted(path, ref, 2, gpe.frames, exact=False)  # the substructured x solve


# ---------------------------------------------------------- files on disk
def test_moved_folder_missing_part_and_part_opened(tmp_path):
    d = shared(tmp_path)
    src = os.path.join(d, "src")
    if RANK == 0:
        os.makedirs(src)
    COMM.Barrier()
    sim = nlse((25, 12, 10), COMM)
    sim.run(8 * sim.dt, frames=4, output=os.path.join(src, "run.h5"))
    whole = sim.gather(root=0)

    def check():
        bad = []
        moved = os.path.join(d, "elsewhere", "moved")
        os.makedirs(os.path.dirname(moved))
        shutil.move(src, moved)
        here = os.getcwd()
        os.chdir(os.path.dirname(d))
        try:
            with h5py.File(os.path.join(moved, "run.h5"), "r") as f:
                if not np.array_equal(f["psi"][-1], whole):
                    bad.append("the moved file's last frame (plain h5py)")
            run = nl.open_run(os.path.join(moved, "run.h5"))
            if not np.array_equal(np.asarray(run["psi"])[-1], whole):
                bad.append("the moved file's last frame (open_run)")
        finally:
            os.chdir(here)
        part = nl.common.hdf5.part_name(os.path.join(moved, "run.h5"), SIZE - 1, SIZE)
        try:
            nl.open_run(part)
            bad.append("open_run read a part file")
        except ValueError as exc:
            if "part of the distributed run file" not in str(exc):
                bad.append(f"part opened: {exc}")
        os.remove(part)
        try:
            nl.open_run(os.path.join(moved, "run.h5"))
            bad.append("open_run read a run file with a part missing")
        except FileNotFoundError as exc:
            if os.path.basename(part) not in str(exc):
                bad.append(f"missing part: {exc}")
        return bad
    on_root(check)


def test_single_process_run_replaces_a_distributed_file(tmp_path):
    d = shared(tmp_path)
    path = os.path.join(d, "run.h5")
    sim = nlse((31, 16), COMM)
    sim.run(4 * sim.dt, frames=2, output=path)
    everywhere(os.path.exists(nl.common.hdf5.part_name(path, RANK, SIZE)), "part written")
    COMM.Barrier()
    if RANK == 0:
        one = nlse((31, 16), None)
        one.run(4 * one.dt, frames=2, output=path)
    COMM.Barrier()
    left = [n for n in os.listdir(d) if ".part" in n]
    everywhere(not left, f"parts left behind: {left}")

    def check():
        with h5py.File(path, "r") as f:
            return [] if not f["psi"].is_virtual and "parts" not in f else ["still parted"]
    on_root(check)


def test_a_part_that_cannot_be_made_fails_every_rank(tmp_path):
    d = shared(tmp_path)
    path = os.path.join(d, "bad.h5")
    if RANK == 0:  # a folder where the last rank's part file goes
        os.makedirs(nl.common.hdf5.part_name(path, SIZE - 1, SIZE))
    COMM.Barrier()
    sim = nlse((31, 16), COMM)
    with pytest.raises(OSError, match=f"rank {SIZE - 1}"):
        sim.run(4 * sim.dt, frames=2, output=path)
    COMM.Barrier()
    left = sorted(n for n in os.listdir(d) if os.path.isfile(os.path.join(d, n)))
    everywhere(not left, f"files left behind: {left}")
    sim.step(2)  # the collectives are still paired
    everywhere(np.isfinite(sim.norm()), "usable after the error")
