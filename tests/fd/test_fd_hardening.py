"""nl.NLSE and the shared runner under hostile use: Ctrl-C in step() and run()
(state, time and step counter stay consistent; going on is bit-identical),
parameters that cannot drift from the solver, checkpoints that round-trip
everything and loaders that refuse what is not one, memory counted before it
is taken."""

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import nlsepy as nl
from nlsepy.common import files as _files
from nlsepy.common import guard as _guard
from nlsepy import runner

from _helpers import LATENCY_BOUND, check_interrupt_mechanism, chunk_log


def sigint_after(seconds):
    """Send SIGINT to this process from a timer thread after `seconds`; the
    timer's ``fired`` list receives the moment it was sent."""
    fired = []

    def fire():
        fired.append(time.perf_counter())
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(seconds, fire)
    timer.fired = fired
    timer.start()
    return timer


def state2d(n=64, dtype=complex):
    x = 0.2 * (np.arange(n) - n / 2)
    X, Y = np.meshgrid(x, x, indexing="ij")
    psi = (1 + 0.3 * np.exp(-(X ** 2 + Y ** 2) / 2)) * np.exp(0.3j * X)
    return psi.astype(dtype), 0.2


def make(backend="cpu", **kw):
    psi0, h = state2d()
    return nl.NLSE(psi0, h, s=-1.0, backend=backend, **kw)


def interrupt(call, after=0.4, mechanism=True):
    """Run `call()` with SIGINT delivered `after` seconds in; return the
    KeyboardInterrupt and the seconds from the signal to the return.  The
    chunks the call made are checked: planned at CHUNK_SECONDS each, the
    flag seen at the first boundary after the signal
    (check_interrupt_mechanism); the seconds only against LATENCY_BOUND."""
    with chunk_log() as calls:
        timer = sigint_after(after)
        try:
            with pytest.raises(KeyboardInterrupt) as info:
                call()
            caught = time.perf_counter()
        finally:
            timer.cancel()
            timer.join()
    assert timer.fired, "the call ended before the signal"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    if mechanism:
        check_interrupt_mechanism(calls, timer.fired[0], caught)
    late = caught - timer.fired[0]
    assert late < LATENCY_BOUND
    return info.value, late


# ------------------------------------------------------------------- Ctrl-C
def test_step_sigint_books_the_steps_and_continues_bit_identical(backend):
    """SIGINT in step(): at the first chunk boundary after it, t and the
    step count match psi (they were 0 while psi was the advanced state),
    and going on equals an uninterrupted call of the same number of steps."""
    sim = make(backend)
    interrupt(lambda: sim.step(10 ** 9))
    k = sim._steps
    assert 0 < k < 10 ** 9
    assert sim.t == k * sim.dt
    sim.step(37)
    ref = make(backend)
    ref.step(k + 37)  # one uninterrupted call
    assert np.array_equal(sim.psi, ref.psi)
    assert sim.t == ref.t and sim._steps == ref._steps


@pytest.mark.parametrize("frames", [1, 2])
def test_run_sigint_is_consistent_and_keeps_the_frames(backend, frames):
    """SIGINT in run(1e6): at the first chunk boundary after it; the time is
    that of the steps taken (the end-time snapping of the last chunk is not
    applied), the frames taken travel on the exception, and the solver
    goes on."""
    sim = make(backend)
    nsteps, dt_run = sim._plan(1e6)
    exc, _ = interrupt(lambda: sim.run(1e6, frames=frames))
    k = sim._steps
    assert 0 < k < nsteps
    assert sim.t == k * dt_run and sim.t < 1e6
    assert len(exc.frames) == 1 and exc.frames.t[0] == 0.0
    assert np.array_equal(exc.frames.psi[0], make(backend).psi)
    ref = make(backend)
    ref.dt = dt_run
    ref.step(k)
    assert np.array_equal(sim.psi, ref.psi) and sim.t == ref.t
    out = sim.run(sim.t + 10 * sim.dt, frames=2)  # goes on
    assert len(out) == 3 and sim.t == out.t[-1]


def test_run_sigint_keeps_the_last_checkpoint_and_no_temporary_file(tmp_path):
    """An interrupted checkpointed run leaves a loadable checkpoint equal to
    a state the run passed through, and nothing else in the folder."""
    psi0 = np.exp(0.3j * np.linspace(-10, 10, 256)) * (1 + 0.1j)
    sim = nl.NLSE(psi0, 0.08, s=-1.0, bc="periodic")
    path = tmp_path / "ck.npz"
    timers = []

    def start_clock(model):  # after the first checkpoint is on disk
        if not timers:
            timers.append(sigint_after(0.3))

    try:
        with chunk_log() as calls:
            with pytest.raises(KeyboardInterrupt) as info:
                sim.run(2000 * 25 * sim.dt, frames=2000, checkpoint=path, callback=start_clock)
        caught = time.perf_counter()
        # every frame is one chunked call of 25 steps: the interrupt came at
        # the first boundary after the signal
        check_interrupt_mechanism(calls, timers[0].fired[0], caught)
        assert caught - timers[0].fired[0] < LATENCY_BOUND
    finally:
        for tm in timers:
            tm.cancel()
            tm.join()
    frames = info.value.frames
    assert len(frames) >= 2
    assert sorted(os.listdir(tmp_path)) == ["ck.npz"]
    back = nl.NLSE.load(path)
    hits = [j for j, (t, psi) in enumerate(frames) if t == back.t]
    assert len(hits) == 1 and hits[0] >= 1
    assert np.array_equal(back.psi, frames[hits[0]][1])
    assert back._steps == 25 * hits[0]


class SlowModel:
    """The runner's protocol, with an `_advance` that is one uncut call of
    0.3 s per chunk (as a model whose kernel cannot be split)."""

    def __init__(self):
        self.t, self.steps, self.state = 0.0, 0, np.zeros(4)

    def _plan(self, t_end):
        return runner.plan_steps(self.t, t_end, 0.1)

    def _advance(self, n, dt, t_final=None):
        time.sleep(0.3)  # SIGINT meanwhile must wait for the booking below
        self.state = self.state + n
        self.steps += n
        self.t = t_final if t_final is not None else self.t + n * dt

    def _snapshot(self):
        return self.state.copy()


def test_runner_books_an_uncut_chunk_before_the_interrupt():
    """The SIGINT lands during an uncut 0.3 s call: that chunk is booked
    (state, steps, time and its frame) before the interrupt is raised, and
    no further chunk starts (SlowModel's _advance is not guard.chunked's
    work, so the booking itself is the mechanism checked here)."""
    model = SlowModel()
    exc, late = interrupt(lambda: runner.run(model, 100.0, frames=10), after=0.45,
                          mechanism=False)
    chunks = model.steps // 100  # whole chunks only (two, unless the timer is late)
    assert 1 <= chunks < 10 and model.steps == 100 * chunks
    assert np.all(model.state == model.steps) and model.t == pytest.approx(0.1 * model.steps)
    # every booked chunk has its frame
    assert list(exc.frames.t) == pytest.approx([10.0 * j for j in range(chunks + 1)])
    assert [f[0] for f in exc.frames.psi] == [100 * j for j in range(chunks + 1)]


def test_sigint_handler_is_put_back_after_normal_calls():
    sim = make()
    sim.step(3)
    sim.run(sim.t + 4 * sim.dt, frames=2)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.cuda
@pytest.mark.skipif("cuda" not in nl.backends("NLSE"), reason="needs the CUDA backend")
@pytest.mark.parametrize("call", ["step", "run"])
def test_cuda_sigint(call):
    """On the GPU: step() and run() return at the first chunk boundary after
    SIGINT, consistent, and going on is bit-identical to an uninterrupted
    call."""
    x = np.linspace(-6, 6, 128)
    X, Y, Z = np.meshgrid(x, x, x, indexing="ij")
    psi0 = (1 + 0.3 * np.exp(-(X ** 2 + Y ** 2 + Z ** 2))) * np.exp(0.2j * X)
    h = x[1] - x[0]
    sim = nl.NLSE(psi0, h, s=-1.0, backend="cuda")
    if call == "step":
        _, late = interrupt(lambda: sim.step(10 ** 9), after=0.5)
        dt = sim.dt
    else:
        nsteps, dt = sim._plan(1e6)
        exc, late = interrupt(lambda: sim.run(1e6, frames=2), after=0.5)
        assert len(exc.frames) == 1
    k = sim._steps
    assert 0 < k and sim.t == k * dt
    sim._advance(20, dt)
    ref = nl.NLSE(psi0, h, s=-1.0, backend="cuda")
    ref._advance(k + 20, dt)
    assert np.array_equal(sim.psi, ref.psi) and sim.t == ref.t


# ---------------------------------------------------------------- ownership
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_V_is_copied_and_read_only(dtype):
    """Editing the caller's V after construction changed sim.V and save()
    but not the dynamics: the solver now owns a copy."""
    psi0, h = state2d(dtype=dtype)
    real = np.float32 if dtype == np.complex64 else np.float64
    V = np.ascontiguousarray(0.1 * np.abs(psi0), dtype=real)  # taken as is
    V0 = V.copy()
    sim = nl.NLSE(psi0, h, V=V)
    V[:] = 99.0
    assert np.array_equal(sim.V, V0)
    assert not sim._V.flags.writeable
    got = sim.V
    got[:] = 5.0  # a copy
    assert np.array_equal(sim.V, V0)
    sim.step(5)
    ref = nl.NLSE(psi0, h, V=V0)
    ref.step(5)
    assert np.array_equal(sim.psi, ref.psi)


def test_V_assignment_is_checked_and_applied():
    psi0, h = state2d()
    V1 = 0.05 * np.ones(psi0.shape)
    sim = nl.NLSE(psi0, h)
    sim.step(3)
    sim.V = V1
    V1[:] = 7.0
    sim.step(4)
    ref = nl.NLSE(psi0, h)
    ref.step(3)
    ref.V = 0.05 * np.ones(psi0.shape)
    ref.step(4)
    assert np.array_equal(sim.psi, ref.psi)
    bad = np.zeros(psi0.shape)
    bad[1, 1] = np.nan
    with pytest.raises(ValueError, match="V contains non-finite"):
        sim.V = bad
    assert np.all(sim.V == 0.05)


@pytest.mark.parametrize("name,value", [
    ("a", np.nan), ("a", 2.0), ("s", 1.0), ("spacing", (0.1, 0.1)), ("scheme", "cd"),
    ("bc", "periodic"), ("dtype", np.complex64), ("backend", "cpu"), ("max_dt", 1.0),
])
def test_parameters_are_read_only(name, value):
    """sim.a = nan was accepted (stepping went on, save() wrote a file load()
    rejected); sim.s and the others were ignored."""
    sim = make()
    before = getattr(sim, name)
    with pytest.raises(AttributeError, match=rf"NLSE\.{name} cannot be changed.*new solver"):
        setattr(sim, name, value)
    with pytest.raises(AttributeError, match="cannot be changed"):
        delattr(sim, name)
    assert getattr(sim, name) == before


def test_save_load_round_trips_everything_and_continues_bit_identical(tmp_path):
    """Every parameter and counter survives save/load, also mid-run (the
    run's step size differs from dt), and both go on identically."""
    x = np.linspace(-4, 4, 30)
    X, Y = np.meshgrid(x, 0.9 * np.linspace(-4, 4, 26), indexing="ij")
    psi0 = ((1 + 0.2 * np.exp(-X ** 2 - Y ** 2)) * np.exp(0.4j * Y)).astype(np.complex64)
    V = (0.02 * X ** 2).astype(np.float32)
    h = (x[1] - x[0], 0.9 * (x[1] - x[0]))
    dt = 0.5 * nl.stability_bound(h, 2, 0.7, "cd")
    sim = nl.NLSE(psi0, h, a=0.7, s=0.3, V=V, scheme="cd", bc="l0", dt=dt, force=True)
    sim.run(0.37, frames=3)
    sim.step(5)
    sim.run(0.61, frames=2)  # leaves the solver on the run's step size
    assert sim._solver_dt != sim.dt
    path = tmp_path / "ck.npz"
    sim.save(path)
    back = nl.NLSE.load(path)
    for name in ("a", "s", "spacing", "scheme", "bc", "dtype", "backend", "max_dt", "dt",
                 "t", "shape", "_steps", "_k", "_t_base", "_solver_dt", "_force"):
        assert getattr(back, name) == getattr(sim, name), name
    assert np.array_equal(back.V, sim.V) and back.V.dtype == np.float32
    assert np.array_equal(back.psi, sim.psi)
    for s in (sim, back):
        s.run(0.8, frames=2)
        s.step(3)
    assert np.array_equal(back.psi, sim.psi)
    assert back.t == sim.t and back._steps == sim._steps


# ------------------------------------------------------------------ loaders
def good_fields(tmp_path):
    path = tmp_path / "good.npz"
    psi0, h = state2d(16)
    sim = nl.NLSE(psi0, h, V=np.zeros(psi0.shape))
    sim.step(3)
    sim.save(path)
    with np.load(path) as d:
        return {k: d[k] for k in d.files if not k.startswith("_")}


def bad_file(tmp_path, case):
    p = tmp_path / f"{case}.npz"
    if case == "empty":
        p.write_bytes(b"")
    elif case == "garbage":
        p.write_bytes(b"not a checkpoint at all " * 20)
    elif case == "truncated":
        nl.NLSE(*state2d(16)).save(p)
        p.write_bytes(p.read_bytes()[:500])
    elif case == "objects":
        np.savez(p, psi=np.array([{"a": 1}], dtype=object))
    elif case == "tagged-objects":
        np.savez(p, _format=np.array(_files.FORMAT), _version=np.array(_files.VERSION),
                 _model=np.array("NLSE"), psi=np.array([{"a": 1}], dtype=object))
    elif case == "untagged":
        np.savez(p, **good_fields(tmp_path))
    elif case == "other-model":
        _files.save_checkpoint(p, "DipolarGPE", **good_fields(tmp_path))
    else:
        fields = good_fields(tmp_path)
        key, value = {
            "t-inf": ("t", np.inf), "t-nan": ("t", np.nan), "dt-nan": ("dt", np.nan),
            "a-negative": ("a", -1.0), "steps-negative": ("steps", -4),
            "k-above-steps": ("k", 10 ** 6), "t-mismatch": ("t", 123.0),
            "psi-real": ("psi", np.ones((16, 16))), "psi-4d": ("psi", np.ones((2,) * 4, complex)),
            "psi-nan": ("psi", np.full((16, 16), np.nan, complex)),
            "V-shape": ("V", np.zeros((16, 15))), "V-complex": ("V", np.zeros((16, 16), complex)),
            "spacing-length": ("spacing", np.array([0.2, 0.2, 0.2])),
            "scheme": ("scheme", "rk8"), "bc": ("bc", "neumann"), "force": ("force", 1.5),
            "solver-dt-zero": ("solver_dt", 0.0),
        }[case]
        fields[key] = value
        if case == "k-above-steps":
            fields["t_base"] = fields["t"] - fields["k"] * fields["solver_dt"]
        _files.save_checkpoint(p, "NLSE", **fields)
    return p


@pytest.mark.parametrize("case", [
    "empty", "garbage", "truncated", "objects", "tagged-objects", "untagged", "other-model", "t-inf", "t-nan",
    "dt-nan", "a-negative", "steps-negative", "k-above-steps", "t-mismatch", "psi-real",
    "psi-4d", "psi-nan", "V-shape", "V-complex", "spacing-length", "scheme", "bc", "force",
    "solver-dt-zero"])
def test_load_refuses_with_the_file_named(tmp_path, case):
    """Empty -> EOFError, truncated -> BadZipFile, garbage -> advice to load
    unsafely, a foreign checkpoint -> KeyError, t = inf loaded: now one
    ValueError naming the file and the problem."""
    p = bad_file(tmp_path, case)
    with pytest.raises(ValueError) as info:
        nl.NLSE.load(p)
    msg = str(info.value)
    assert str(p) in msg
    assert "allow_" not in msg and "unsafe" not in msg.lower()
    if case == "other-model":
        assert "DipolarGPE" in msg
    if case.startswith("t-") and case != "t-mismatch":
        assert "'t'" in msg and "not finite" in msg


def test_load_missing_file_and_bad_backend(tmp_path):
    with pytest.raises(FileNotFoundError):
        nl.NLSE.load(tmp_path / "none.npz")
    path = tmp_path / "ck.npz"
    make().save(path)
    with pytest.raises(ValueError, match="^backend must be one of"):
        nl.NLSE.load(path, backend="gpu")


# ------------------------------------------------------- checkpoint writing
def test_atomic_write_interrupted_keeps_the_old_file(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"old")

    def write(fh):
        fh.write(b"half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        runner.atomic_write(path, write)
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["f.bin"]


def test_temporary_files_of_killed_writers_are_removed(tmp_path):
    """A writer killed outright cannot clean up (the issue found
    .ck.npz.<pid>.tmp files); the next write of that path removes them."""
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = int(proc.stdout)
    stale = tmp_path / f".ck.npz.{dead}.tmp"
    stale.write_bytes(b"partial")
    alive = tmp_path / f".ck.npz.{os.getppid()}.tmp"  # a running process's
    alive.write_bytes(b"in progress")
    other = tmp_path / f".other.npz.{dead}.tmp"
    other.write_bytes(b"not ours")
    make().save(tmp_path / "ck.npz")
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["ck.npz", alive.name, other.name])


# ------------------------------------------------------------------- memory
def test_memory_is_checked_before_the_solver_is_made(monkeypatch):
    psi0, h = state2d(48)
    monkeypatch.setattr(_guard, "host_memory_available", lambda: 100_000)
    # host memory, so the CPU backend (a GPU's solver is checked against the device)
    with pytest.raises(MemoryError, match=r"NLSE on a grid of shape \(48, 48\).* needs "
                                          r"[0-9.]+ KiB of memory"):
        nl.NLSE(psi0, h, V=np.zeros(psi0.shape), backend="cpu")
    monkeypatch.setattr(_guard, "host_memory_available", lambda: 10 ** 12)
    nl.NLSE(psi0, h, backend="cpu")


def test_run_counts_its_frames_before_stepping(monkeypatch):
    sim = make()
    state = sim.psi.nbytes
    monkeypatch.setattr(_guard, "host_memory_available", lambda: 10 * state)
    with pytest.raises(MemoryError, match=r"NLSE\.run\(frames=100\), keeping 101 snapshots "
                                          r"of shape \(64, 64\)"):
        sim.run(1.0, frames=100)
    assert sim.t == 0.0 and sim._steps == 0
    out = sim.run(0.1, frames=5)
    assert len(out) == 6
