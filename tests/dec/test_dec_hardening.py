"""nl.DecGPE stays safe: Ctrl-C leaves a consistent, continuable solver; the
solver owns its inputs; checkpoints round-trip bit-identically and bad
files are refused; memory is checked before it is taken."""

import os
import signal
import time

import numpy as np
import pytest

pytest.importorskip("scipy")

import nlsepy as nl  # noqa: E402
from nlsepy.common import files as _files  # noqa: E402
from nlsepy.common import guard as _guard  # noqa: E402

from _helpers import LATENCY_BOUND, check_interrupt_mechanism, chunk_log, sigint_during  # noqa: E402


def make(backend="cpu", **kw):
    args = dict(grid="bcc", blocks=4, spacing=1.0, trap=1.0, g=5.0, backend=backend)
    args.update(kw)
    sim = nl.DecGPE(**args)
    x = sim.positions
    sim.psi = np.exp(-0.3 * (x ** 2).sum(1)) * (x[:, 0] + 1j * x[:, 1] + 0.5)
    return sim


def _interrupted(call, after=0.4):
    """Run `call`, SIGINT `after` seconds in: the KeyboardInterrupt comes at
    the first chunk boundary after the signal, the chunks planned at
    CHUNK_SECONDS each (check_interrupt_mechanism), and within
    LATENCY_BOUND seconds."""
    assert sigint_during(call, after) < LATENCY_BOUND


def _sigint_consistent(backend):
    big = nl.DecGPE("bcc", blocks=24, trap=1.0, backend=backend)  # 166k unknowns
    big.psi = np.exp(-0.05 * (big.positions ** 2).sum(1))
    _interrupted(lambda: big.step(10 ** 9))
    n = big.steps
    assert 0 < n < 10 ** 9
    assert big.t == pytest.approx(n * big.dt, rel=1e-12)
    # the interrupted solver is where an uninterrupted one gets in n steps
    ref = nl.DecGPE("bcc", blocks=24, trap=1.0, backend=backend)
    ref.psi = np.exp(-0.05 * (ref.positions ** 2).sum(1))
    ref.step(n)
    assert np.array_equal(big.psi, ref.psi)
    big.step(3)
    ref.step(3)
    assert np.array_equal(big.psi, ref.psi) and big.steps == n + 3
    # imaginary time and run()
    _interrupted(lambda: big.imaginary_time(10 ** 9))
    assert big.imaginary_steps > 0 and big.norm() == pytest.approx(1.0, rel=1e-9)
    t0 = big.t
    _interrupted(lambda: big.run(t0 + 1e6 * big.dt, frames=2))
    assert big.t == pytest.approx(t0 + (big.steps - n - 3) * big.dt, rel=1e-9)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_sigint_returns_quickly_and_leaves_a_consistent_solver():
    _sigint_consistent("cpu")


@pytest.mark.cuda
def test_sigint_cuda():
    _sigint_consistent("cuda")


def test_interrupted_checkpointed_run_keeps_the_last_checkpoint(tmp_path):
    def start():
        s = nl.DecGPE("bcc", blocks=10, trap=1.0, backend="cpu")
        s.psi = np.exp(-0.05 * (s.positions ** 2).sum(1))
        return s

    sim = start()
    ck = tmp_path / "ck.npz"
    sent = []

    def interrupt_once_on_disk(_sim):
        # a checkpoint every 100 steps; the signal comes at the first frame
        # that finds one on disk, however loaded the machine
        if not sent and ck.exists():
            sent.append(time.perf_counter())
            os.kill(os.getpid(), signal.SIGINT)

    with chunk_log() as calls:
        with pytest.raises(KeyboardInterrupt):
            sim.run(1e5 * sim.dt, frames=1000, checkpoint=ck, callback=interrupt_once_on_disk)
    caught = time.perf_counter()
    assert sent
    check_interrupt_mechanism(calls, sent[0], caught)  # at the next chunk boundary
    assert caught - sent[0] < LATENCY_BOUND
    assert sorted(os.listdir(tmp_path)) == ["ck.npz"]  # no temporary file left
    back = nl.DecGPE.load(ck, backend="cpu")
    # a whole state the run went through: what an uninterrupted solver has
    # after the checkpoint's number of steps
    assert 0 < back.steps <= sim.steps
    ref = start()

    def stop_there(s):
        if s.steps >= back.steps:
            raise StopIteration

    ref.run(1e5 * ref.dt, frames=1000, callback=stop_there)
    assert ref.steps == back.steps and ref.t == back.t
    assert np.array_equal(ref.psi, back.psi) and np.array_equal(ref.psi_prev, back.psi_prev)


def test_the_solver_owns_its_inputs():
    V = np.zeros(4 ** 3 * 12)
    sim = make(V=V)
    V[:] = 1e3  # the caller's array changes later: the solver does not see it
    assert np.all(sim.V == 0)
    v = sim.V
    v[0] = 1.0  # a copy: the solver's potential stays
    assert sim.V[0] == 0.0
    for name, value in [("g", float("nan")), ("trap", (float("nan"),) * 3), ("grid", "fcc"),
                        ("spacing", 0.5), ("blocks", 5), ("bc", "periodic"), ("dtype", None),
                        ("backend", "cuda"), ("centre", (1, 1, 1)), ("box", (1, 1, 1))]:
        with pytest.raises(AttributeError, match=f"DecGPE.{name} is fixed"):
            setattr(sim, name, value)
    with pytest.raises(AttributeError):
        sim.max_dt = 1.0
    with pytest.raises(ValueError, match="dt"):
        sim.dt = float("nan")


def test_assigning_V_applies_it():
    a, b = make(dt=0.01), make(dt=0.01)
    V = 0.1 * a.positions[:, 2]
    a.V = V
    b2 = make(V=V, dt=0.01)
    a.step(20)
    b2.step(20)
    b.step(20)
    assert np.array_equal(a.psi, b2.psi) and not np.array_equal(a.psi, b.psi)
    with pytest.raises(ValueError, match="stability bound"):
        a.V = 1e6 * np.ones(a.size)  # dt would exceed the new bound
    assert np.array_equal(a.V, b2.V)  # unchanged after the refusal
    a.V = None
    assert a.V is None


@pytest.mark.parametrize("grid", ["bcc", "a15"])
def test_save_load_continue_is_bit_identical(tmp_path, grid):
    V = 0.05 * np.arange(4 ** 3 * nl.DecGPE(grid, blocks=1).cells_per_block) % 0.3
    a = make(grid=grid, V=V, dt=0.005)
    a.imaginary_time(5)
    a.step(7)
    a.save(tmp_path / "a.npz")
    b = nl.DecGPE.load(tmp_path / "a.npz", backend="cpu")
    for attr in ("grid", "blocks", "spacing", "g", "trap", "bc", "centre", "dtype", "dt",
                 "steps", "imaginary_steps", "t", "max_dt"):
        assert getattr(a, attr) == getattr(b, attr), attr
    assert np.array_equal(a.V, b.V) and np.array_equal(a.psi_prev, b.psi_prev)
    a.step(11)
    b.step(11)
    assert np.array_equal(a.psi, b.psi) and a.t == b.t and a.steps == b.steps == 18


def test_save_before_the_first_step_restarts_by_rk4(tmp_path):
    a = make()
    assert a.psi_prev is None
    a.save(tmp_path / "a.npz")
    b = nl.DecGPE.load(tmp_path / "a.npz", backend="cpu")
    assert b.psi_prev is None
    a.step(5)
    b.step(5)
    assert np.array_equal(a.psi, b.psi)


@pytest.mark.parametrize("case", ["empty", "truncated", "garbage", "objects", "nlse",
                                  "t_inf", "t_nan", "psi_nan", "bad_grid", "no_psi"])
def test_load_refuses_bad_files(tmp_path, case):
    p = tmp_path / "x.npz"
    good = make()
    good.save(p)
    if case == "empty":
        p.write_bytes(b"")
    elif case == "truncated":
        p.write_bytes(p.read_bytes()[:200])
    elif case == "garbage":
        p.write_bytes(os.urandom(300))
    elif case == "objects":
        np.savez(p, psi=np.array([{}], dtype=object))
    elif case == "nlse":
        nl.NLSE(np.ones(32, complex), 0.1, bc="periodic", backend="cpu").save(p)
    else:
        with np.load(p) as d:
            fields = {k: d[k] for k in d.files if not k.startswith("_")}
        if case == "t_inf":
            fields["t"] = np.inf
        elif case == "t_nan":
            fields["t"] = np.nan
        elif case == "psi_nan":
            fields["psi"] = fields["psi"].copy()
            fields["psi"][3] = np.nan
        elif case == "bad_grid":
            fields["grid"] = "hcp"
        elif case == "no_psi":
            del fields["psi"]
        _files.save_checkpoint(p, "DecGPE", **fields)
    with pytest.raises(ValueError) as info:
        nl.DecGPE.load(p, backend="cpu")
    assert str(p) in str(info.value)


def test_memory_is_checked_before_it_is_taken(monkeypatch):
    """The refusal comes before anything is allocated: the C handle is
    never asked for (the binding's constructor is replaced by one that
    fails the test)."""
    from nlsepy import _core
    real = _core.Dec
    monkeypatch.setattr(_guard, "host_memory_available", lambda: 10 ** 8)

    def never(*args, **kw):
        raise AssertionError("the C handle was made before the memory check refused")
    monkeypatch.setattr(_core, "Dec", never)
    # four states and the potential, each row with two ghost blocks (302/300),
    # and the host copy: 324e6 (72 * 302 / 300 + 16) bytes
    with pytest.raises(MemoryError, match=r"DecGPE\(grid='bcc', blocks=\(300, 300, 300\), "
                                          r"dtype=complex128\) with 324000000 unknowns "
                                          r"needs 26.7 GiB"):
        nl.DecGPE("bcc", blocks=300, backend="cpu")
    monkeypatch.setattr(_core, "Dec", real)
    nl.DecGPE("bcc", blocks=4, backend="cpu")  # small grids still fit


@pytest.mark.parametrize("kw, argument", [
    (dict(spacing=1e200, trap=1.0), "spacing"),      # OverflowError before
    (dict(spacing=1e-200), "spacing"),               # "dt ... got 0.0" before, no dt given
    (dict(spacing=1e200), "spacing"),
    (dict(spacing=1e90, trap=1e80), "spacing"),      # the trap's potential overflows
    (dict(centre=(1e200, 0.0, 0.0), trap=1.0), "centre"),
    (dict(centre=(1e308, 0.0, 0.0), spacing=1e10), "centre"),
    (dict(trap=1e200), "trap"),
])
def test_extreme_scales_are_value_errors_naming_the_argument(kw, argument):
    with pytest.raises(ValueError) as exc:
        nl.DecGPE("bcc", 2, backend="cpu", **kw)
    assert argument in str(exc.value)
    assert "dt must be" not in str(exc.value)


def test_extreme_but_finite_scales_still_step():
    """The ends of the accepted spacings make solvers that step."""
    for h in (1e-100, 1e100):
        sim = nl.DecGPE("bcc", 2, spacing=h, backend="cpu")
        sim.psi = np.ones(sim.size)
        sim.step(2)
        assert np.all(np.isfinite(sim.psi)) and 0 < sim.dt <= sim.max_dt


def test_density_at_far_points_is_a_value_error_naming_points():
    pytest.importorskip("scipy")
    sim = nl.DecGPE("bcc", 2, trap=1.0, backend="cpu")
    sim.psi = np.exp(-np.sum(sim.positions ** 2, axis=1)).astype(complex)
    near = sim.density_at(np.array([[0.1, 0.0, 0.0], [1e140, 0.0, 0.0]]))
    assert np.all(np.isfinite(near))
    for far in ([1e156, 0.0, 0.0], [0.0, -1e200, 0.0], [np.nan, 0.0, 0.0],
                [np.inf, 0.0, 0.0]):
        with pytest.raises(ValueError, match="points") as exc:
            sim.density_at(np.array([[0.0, 0.0, 0.0], far]))
        assert "IndexError" not in str(exc.value)
