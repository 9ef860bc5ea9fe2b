"""nl.DipolarGPE under hostile use: Ctrl-C, parameters assigned after
construction, checkpoints, memory.

Ctrl-C: a stepping call runs in blocks of ``block_steps`` whole steps, each
one C call booked (t, step counters) before the next, with SIGINT held as a
flag and raised between blocks (nlsepy.common.guard).  The blocks start at each
call's first step, so an interrupted call continued with the remaining
steps takes the same C calls as the uninterrupted one: the results agree
bit for bit.  SIGINT comes from a timer thread, as a user's Ctrl-C would.
"""

import os
import signal
import threading
import time
import zipfile

import numpy as np
import pytest

import nlsepy as nl
from nlsepy.common import files as _files
from nlsepy.common import guard as _guard
from nlsepy.dipolar import solver as dsolver

from _helpers import LATENCY_BOUND, sigint_during  # noqa: E402

CPU = dict(backend="cpu")


def interrupted(call, after=0.4):
    """Run `call` (which must outlast `after` seconds), send SIGINT after
    `after` s: KeyboardInterrupt at the first block boundary after the
    signal, the blocks planned at CHUNK_SECONDS each (sigint_during checks
    the mechanism), and Python's handler back."""
    late = sigint_during(call, after)
    assert late < LATENCY_BOUND, f"returned {late:.2f} s after SIGINT"


def gpe_1d(**kw):
    args = dict(g=5.0, gdd=3.0, trap=(1.0, 2.0, 2.0), geometry="1d-x", **CPU)
    args.update(kw)
    return nl.DipolarGPE((64,), 0.2, 0.002, **args)


def beam(axis="y", beam_axis=None):
    return nl.Obstacle(V0=4.0, sigma=0.8, velocity=0.6, start=-1.0, t_move=0.5, t_off=0.3,
                       move_axis=axis, beam_axis=beam_axis)


def gpe_2d(**kw):
    args = dict(g=10.0, gdd=4.0, trap=(1.0, 1.0, 3.0), geometry="2d-xy", obstacle=beam(), **CPU)
    args.update(kw)
    return nl.DipolarGPE((16, 16), 0.4, 0.004, **args)


# --------------------------------------------------------------------------
# Ctrl-C
# --------------------------------------------------------------------------

def test_imaginary_time_stops_within_a_second_and_continues_bit_identically():
    a = gpe_1d()
    interrupted(lambda: a.imaginary_time(10 ** 9))
    k = a.steps["imaginary"]
    assert 0 < k < 10 ** 9 and a.t == 0.0
    assert k % a.block_steps == 0  # whole blocks only
    b = gpe_1d()
    b.imaginary_time(k)
    assert np.array_equal(a.psi, b.psi)  # psi agrees with the counters
    m = 2 * a.block_steps + 17
    a.imaginary_time(m)  # going on from the interrupt ...
    c = gpe_1d()
    c.imaginary_time(k + m)  # ... is the uninterrupted call
    assert np.array_equal(a.psi, c.psi)
    assert a.steps == c.steps == {"imaginary": k + m, "real": 0}


def test_real_time_with_obstacle_stops_and_t_agrees_with_psi():
    a = gpe_2d()
    a.imaginary_time(50)
    interrupted(lambda: a.real_time(10 ** 9))
    k = a.steps["real"]
    assert 0 < k and k % a.block_steps == 0
    assert a.t == k * a.dt  # the clock of the steps done, not 0
    m = a.block_steps + 5
    a.real_time(m)
    c = gpe_2d()
    c.imaginary_time(50)
    c.real_time(k + m)
    assert np.array_equal(a.psi, c.psi)  # the moving beam saw the same clock
    assert a.t == c.t and a.steps == c.steps


def test_run_interrupted_keeps_t_and_steps_together():
    a = gpe_1d()
    t_end = 1e6
    n, dt = nl.runner.plan_steps(0.0, t_end, a.dt)
    interrupted(lambda: a.run(t_end, frames=2))
    k = a.steps["real"]
    assert 0 < k < n
    assert a.t == k * dt
    b = gpe_1d()
    b.dt = dt
    b.real_time(k)
    assert np.array_equal(a.psi, b.psi)
    a.real_time(10)  # continuable
    assert a.steps["real"] == k + 10


def test_frames_of_an_interrupted_call_are_those_taken():
    a = gpe_1d()
    first = a.psi
    interrupted(lambda: a.imaginary_time(10 ** 9, frames=4))
    assert len(a.frames) == 1 and a.frames.t[0] == 0.0
    assert np.array_equal(a.frames.psi[0], first)


def test_interrupted_ramp_leaves_full_couplings():
    a = gpe_1d()
    interrupted(lambda: a.imaginary_time(10 ** 9, ramp=True))
    assert (a.g, a.gdd) == (5.0, 3.0)
    b = gpe_1d(psi0=a.psi)
    a.imaginary_time(20)
    b.imaginary_time(20)
    assert np.array_equal(a.psi, b.psi)


def test_splitting_real_time_into_calls_changes_nothing():
    """Without an obstacle the real-time kernels carry nothing from one
    step to the next but the state: blocks are free."""
    a, b = gpe_1d(), gpe_1d()
    a.real_time(1000)
    for n in (1, 10, 333, 656):
        b.real_time(n)
    assert np.array_equal(a.psi, b.psi)


def test_block_steps_depend_on_the_grid_only():
    a = gpe_1d()
    before = nl.get_num_threads()
    nl.set_num_threads(1)
    try:
        one = a.block_steps
    finally:
        nl.set_num_threads(before)
    assert one == a.block_steps >= 1
    big = nl.DipolarGPE((32, 32, 32), 0.3, 0.01, gdd=1.0, **CPU)
    assert big.block_steps < a.block_steps


def test_blowup_in_a_later_block_leaves_a_consistent_solver(monkeypatch):
    monkeypatch.setattr(dsolver, "BLOCK_SECONDS", 1e-9)  # one step per block
    kw = dict(g=-1000.0, trap=(1, 1, 1), **CPU)
    a = nl.DipolarGPE((12, 12, 12), 0.5, 0.02, **kw)
    assert a.block_steps == 1
    with pytest.raises(nl.BlowUpError) as ei:
        a.imaginary_time(300)
    k = a.steps["imaginary"]
    assert k >= 1 and ei.value.step == k + 1
    b = nl.DipolarGPE((12, 12, 12), 0.5, 0.02, **kw)
    b.imaginary_time(k)
    assert np.array_equal(a.psi, b.psi)
    t, psi = ei.value.last_good
    assert t == a.t and np.array_equal(psi, a.psi)


@pytest.mark.cuda
def test_cuda_stepping_stops_within_a_second():
    if "cuda" not in nl.backends("DipolarGPE"):
        pytest.skip("needs the CUDA backend and a GPU")
    kw = dict(g=50.0, gdd=10.0, cutoff=4.0, trap=(1.0, 1.0, 1.0), obstacle=beam("y", "x"),
              backend="cuda")
    a = nl.DipolarGPE((32, 32, 32), 0.3, 0.005, **kw)
    interrupted(lambda: a.imaginary_time(10 ** 9))
    ki = a.steps["imaginary"]
    assert ki > 0 and ki % a.block_steps == 0
    interrupted(lambda: a.real_time(10 ** 9))
    k = a.steps["real"]
    assert k > 0 and a.t == k * a.dt
    a.real_time(7)
    b = nl.DipolarGPE((32, 32, 32), 0.3, 0.005, **kw)
    b.imaginary_time(ki)
    b.real_time(k + 7)
    assert np.array_equal(a.psi, b.psi) and a.t == b.t


# --------------------------------------------------------------------------
# the solver owns its inputs; parameters are read-only or applied
# --------------------------------------------------------------------------

def test_V_and_psi0_are_copied():
    V = np.zeros((16, 16))
    psi0 = gpe_2d().psi
    a = gpe_2d(V=V, psi0=psi0)
    V[:] = 50.0  # the caller's arrays change later ...
    psi0[:] = 0.0
    assert not np.any(a.V) and np.any(a.psi)
    got = a.V
    got[:] = 7.0  # ... and so does the copy handed out
    assert not np.any(a.V)
    b = gpe_2d()
    a.real_time(30)
    b.real_time(30)
    assert np.array_equal(a.psi, b.psi)  # the dynamics never saw the edits
    W = np.ones((16, 16))
    a.V = W
    W[:] = 3.0
    assert np.array_equal(a.V, np.ones((16, 16)))


@pytest.mark.parametrize("name,value", [
    ("option", 7), ("trap", (float("nan"),) * 3), ("spacing", 0.1), ("geometry", "3d"),
    ("shape", (8, 8)), ("cutoff", 2.0), ("dtype", np.complex64), ("backend", "cuda"),
    ("axes", ("x",)), ("fft_effort", "patient"), ("t", 5.0), ("steps", {}),
    ("frames", None), ("reduction", (1, 1)), ("g_eff", 1.0),
])
def test_fixed_parameters_refuse_assignment(name, value):
    a = gpe_2d()
    a.imaginary_time(20)
    before = a.observables()
    with pytest.raises(AttributeError, match=name):
        setattr(a, name, value)
    assert a.observables() == before  # nothing changed, mu included


def test_option_assignment_explains_how_to_change_it(tmp_path):
    a = gpe_2d()
    with pytest.raises(AttributeError, match=r"DipolarGPE\(\.\.\., option=\.\.\.\)"):
        a.option = 7
    with pytest.raises(AttributeError, match="load"):
        a.trap = (float("nan"),) * 3
    a.save(tmp_path / "s.npz")  # the file stays loadable
    b = nl.DipolarGPE.load(tmp_path / "s.npz", trap=(1.0, 1.0, 2.0))
    assert b.trap == (1.0, 1.0, 2.0) and b.option == 2


def test_unknown_attributes_are_refused():
    a = gpe_2d()
    with pytest.raises(AttributeError, match="settable"):
        a.gamma = 2.0
    with pytest.raises(AttributeError):
        a.imaginary_time = None


@pytest.mark.parametrize("name,value,match", [
    ("g", float("nan"), "g must be finite"), ("gdd", float("inf"), "gdd"),
    ("dt", 0.0, "dt"), ("dt", float("nan"), "dt"), ("V", np.full((16, 16), np.nan), "non-finite"),
    ("V", np.zeros((4, 4)), "shape"), ("obstacle", "beam", "Obstacle"),
    ("psi", np.zeros((16, 16)), "zero"),
])
def test_settable_parameters_are_checked(name, value, match):
    a = gpe_2d()
    a.imaginary_time(10)
    before = (a.g, a.gdd, a.dt, a.V, a.obstacle)
    with pytest.raises((ValueError, TypeError), match=match):
        setattr(a, name, value)
        a.real_time(1)
    assert (a.g, a.gdd, a.dt) == before[:3] and a.obstacle == before[4]


def test_settable_parameters_are_applied():
    a, b = gpe_2d(), gpe_2d(g=20.0, gdd=2.0, obstacle=beam("x"), V=np.ones((16, 16)))
    a.g, a.gdd, a.obstacle, a.V = 20.0, 2.0, beam("x"), np.ones((16, 16))
    a.imaginary_time(40)
    b.imaginary_time(40)
    a.dt = 0.002
    b.dt = 0.002
    a.real_time(40)
    b.real_time(40)
    assert np.array_equal(a.psi, b.psi) and a.t == b.t == 40 * 0.002
    assert np.array_equal(a.potential(), b.potential())


# --------------------------------------------------------------------------
# checkpoints
# --------------------------------------------------------------------------

def run_on(gpe):
    gpe.imaginary_time(60)
    gpe.real_time(45)
    gpe.run(gpe.t + 0.07, frames=2)  # the runner's dt differs from gpe.dt
    return gpe


def test_save_load_continue_is_bit_identical(tmp_path):
    V = 0.05 * np.random.default_rng(4).random((16, 16))
    a = run_on(gpe_2d(V=V, option=1, dtype=np.complex64, fft_effort="estimate"))
    p = tmp_path / "a.npz"
    a.save(p)
    b = nl.DipolarGPE.load(p, **CPU)
    assert b.steps == a.steps and b.t == a.t
    assert b.obstacle == a.obstacle and np.array_equal(b.V, a.V)
    assert (b.option, b.dtype, b.trap, b.spacing, b.g, b.gdd, b.dt) == \
        (a.option, a.dtype, a.trap, a.spacing, a.g, a.gdd, a.dt)
    assert np.array_equal(b.psi, a.psi)
    for gpe in (a, b):
        gpe.real_time(70)
        gpe.run(gpe.t + 0.05, frames=1)
    assert np.array_equal(b.psi, a.psi)
    assert b.t == a.t and b.steps == a.steps


def test_save_load_3d_real_state_and_cutoff(tmp_path):
    kw = dict(g=40.0, gdd=8.0, cutoff=3.0, trap=(1.0, 1.2, 1.5),
              obstacle=beam("y", "x"), **CPU)
    a = nl.DipolarGPE((12, 12, 16), 0.5, 0.01, **kw)
    a.imaginary_time(30)
    assert a.is_real
    a.save(tmp_path / "c.npz")
    # the CPU's bits afterwards: load takes "auto", the GPU where there is one
    b = nl.DipolarGPE.load(tmp_path / "c.npz", **CPU)
    assert b.is_real and b.cutoff == 3.0 and b.obstacle == a.obstacle
    a.imaginary_time(25)
    b.imaginary_time(25)
    assert np.array_equal(a.psi, b.psi)
    with np.load(tmp_path / "c.npz") as d:  # what nl.dbec reads as INPUT
        assert d["psi"].shape == (12, 12, 16)


def test_load_overrides(tmp_path):
    a = gpe_2d()
    a.real_time(10)
    a.save(tmp_path / "o.npz")
    b = nl.DipolarGPE.load(tmp_path / "o.npz", "cpu", dt=0.001, obstacle=None, g=0.0)
    assert b.dt == 0.001 and b.obstacle is None and b.g == 0.0
    assert b.t == a.t and b.steps == a.steps
    with pytest.raises(ValueError, match="o.npz"):
        nl.DipolarGPE.load(tmp_path / "o.npz", dt=-1.0)


def _fields(path):
    with np.load(path) as d:
        return {k: d[k] for k in d.files if not k.startswith("_")}


def _rewrite(src, dst, model="DipolarGPE", **changes):
    f = _fields(src)
    f.update(changes)
    for k in [k for k, v in changes.items() if v is None]:
        del f[k]
    _files.save_checkpoint(dst, model, **f)


@pytest.fixture
def good(tmp_path):
    a = gpe_2d()
    a.real_time(5)
    p = tmp_path / "good.npz"
    a.save(p)
    return p


@pytest.mark.parametrize("case,match", [
    ("empty", "empty"),
    ("truncated", "not an nlsepy checkpoint|truncated|damaged"),
    ("garbage", "not an nlsepy checkpoint"),
    ("untagged", "no format tag"),
    ("nlse", "checkpoint of NLSE, not of DipolarGPE"),
    ("t_inf", "'t' is not finite"),
    ("t_nan", "'t' is not finite"),
    ("psi_nan", "'psi' contains non-finite"),
    ("psi_shape", "shape"),
    ("option", "option must be 1 or 2"),
    ("missing", "lacks the entry 'g'"),
    ("geometry", "geometry"),
    ("steps", "steps_real"),
    ("obstacle", "obstacle"),
])
def test_bad_checkpoints_name_the_file(good, tmp_path, case, match):
    p = tmp_path / f"{case}.npz"
    raw = good.read_bytes()
    if case == "empty":
        p.write_bytes(b"")
    elif case == "truncated":
        p.write_bytes(raw[: len(raw) // 2])
    elif case == "garbage":
        p.write_bytes(os.urandom(3000))
    elif case == "untagged":
        np.savez(p, **{k: v for k, v in _fields(good).items()})
    elif case == "nlse":
        _rewrite(good, p, model="NLSE")
    elif case == "t_inf":
        _rewrite(good, p, t=np.inf)
    elif case == "t_nan":
        _rewrite(good, p, t=np.nan)
    elif case == "psi_nan":
        psi = _fields(good)["psi"].copy()
        psi.flat[3] = np.nan
        _rewrite(good, p, psi=psi)
    elif case == "psi_shape":
        _rewrite(good, p, psi=np.ones((4, 4), complex))
    elif case == "option":
        _rewrite(good, p, option=7)
    elif case == "missing":
        _rewrite(good, p, g=None)
    elif case == "geometry":
        _rewrite(good, p, geometry="4d")
    elif case == "steps":
        _rewrite(good, p, steps_real=-3)
    elif case == "obstacle":
        _rewrite(good, p, obstacle=np.array([np.nan, 1, 0, 0, 1, 0.0]))
    with pytest.raises(ValueError, match=match) as ei:
        nl.DipolarGPE.load(p)
    assert str(p) in str(ei.value)


def test_an_nlse_file_is_refused(tmp_path):
    p = tmp_path / "nlse.npz"
    nl.NLSE(np.ones(32, complex), 0.1, backend="cpu").save(p)
    with pytest.raises(ValueError, match="nlse.npz"):
        nl.DipolarGPE.load(p)
    with pytest.raises(FileNotFoundError):
        nl.DipolarGPE.load(tmp_path / "none.npz")
    with pytest.raises(ValueError, match="folder"):
        nl.DipolarGPE.load(tmp_path)


def test_save_is_atomic_and_tagged(good):
    assert zipfile.is_zipfile(good)
    with np.load(good) as d:
        assert str(d["_format"]) == "nlsepy-checkpoint" and str(d["_model"]) == "DipolarGPE"
    assert not [f for f in os.listdir(good.parent) if f.endswith(".tmp")]


# --------------------------------------------------------------------------
# memory
# --------------------------------------------------------------------------

@pytest.fixture
def host_24g(monkeypatch):
    monkeypatch.setattr(_guard, "host_memory_available", lambda: 24 << 30)


@pytest.mark.parametrize("shape,geometry,kw", [
    ((1024,) * 3, "3d", dict(gdd=1.0)),
    ((1024,) * 3, "3d", dict()),
    ((2 ** 30,), "1d-x", dict(gdd=1.0)),
    ((2 ** 30,), "1d-z", dict(dtype=np.complex64)),
    ((2 ** 15, 2 ** 15), "2d-xy", dict(gdd=1.0)),
    ((2 ** 15, 2 ** 15), "2d-xz", dict()),
])
def test_too_large_grids_are_refused_at_once(host_24g, shape, geometry, kw):
    t0 = time.perf_counter()
    with pytest.raises(MemoryError) as ei:
        nl.DipolarGPE(shape, 0.01, 0.001, trap=(1, 1, 1), geometry=geometry, **CPU, **kw)
    assert time.perf_counter() - t0 < 1.0
    msg = str(ei.value)
    assert str(shape) in msg and geometry in msg and "GiB" in msg and "24.0 GiB" in msg
    assert "state and its backup" in msg


def test_huge_grid_message_is_sane():
    with pytest.raises(MemoryError, match=r"DipolarGPE\(shape=\(100000, 100000, 100000\).* PiB"):
        nl.DipolarGPE((10 ** 5,) * 3, 0.1, 0.01, **CPU)


def test_memory_count_matches_the_c_core():
    for shape, geo, gdd in (((16, 12, 10), "3d", 1.0), ((24, 20), "2d-xz", 0.0),
                            ((64,), "1d-x", 2.0)):
        a = nl.DipolarGPE(shape, 0.3, 0.01, gdd=gdd, geometry=geo, trap=(1, 1, 1),
                          V=np.zeros(shape), **CPU)
        a.real_time(1)  # the backup exists from the first step on
        parts = dsolver.memory_parts(shape, a.dtype, gdd != 0, "cpu", nl.get_num_threads(),
                                     potential=True)["solver"]
        not_in_c = ("per-axis tables", "FFTW plans", "Crank-Nicolson work")  # small, uncounted
        ours = sum(v for k, v in parts.items() if k not in not_in_c)
        assert ours == a.memory_bytes


def test_frames_and_late_buffers_are_checked(monkeypatch):
    a = nl.DipolarGPE((32, 32), 0.3, 0.01, trap=(1, 1, 1), geometry="2d-xy", **CPU)
    monkeypatch.setattr(_guard, "host_memory_available", lambda: 4_000)
    with pytest.raises(MemoryError, match="frames"):
        a.imaginary_time(100, frames=50)
    with pytest.raises(MemoryError, match="dipolar"):
        a.gdd = 1.0
    assert a.gdd == 0.0 and a.steps["imaginary"] == 0
    with pytest.raises(MemoryError, match="potential"):
        a.V = np.zeros((32, 32))
    assert a.V is None


def test_cuda_memory_refusal_is_a_memory_and_backend_error(monkeypatch):
    """The device check runs before the CUDA module is touched (checked here
    without a GPU: the backend's name and free memory are stood in)."""
    monkeypatch.setattr(dsolver._backend, "resolve", lambda backend, model: "cuda")
    monkeypatch.setattr(_guard, "device_memory_available", lambda: 1 << 29)
    with pytest.raises(dsolver.DeviceMemoryError, match="device memory") as ei:
        nl.DipolarGPE((256, 256, 256), 0.1, 0.01, gdd=1.0, trap=(1, 1, 1))
    assert isinstance(ei.value, MemoryError) and isinstance(ei.value, nl.BackendError)
    assert "(256, 256, 256)" in str(ei.value) and "cuFFT work areas" in str(ei.value)
    parts = dsolver.memory_parts((256,) * 3, np.complex128, True, "cuda")
    per_point = sum(parts["solver"].values()) / 256 ** 3
    assert 44 <= per_point < 70  # state, backup, density, kernel (44 B) + cuFFT work
