"""A property-based battery of hostile input over every public constructor
and method (hypothesis, an optional test dependency).

Each example draws every argument either from values a user would pass or
from hostile ones (NaN, Inf, zero, negatives, huge numbers, wrong types,
wrong shapes), calls the public API, and accepts only success or a clear
exception: TypeError, ValueError, MemoryError (refused before allocating),
nl.BackendError, and nl.BlowUpError where a step may blow up.  A call that
gets a hostile value must refuse it, unless the value is listed as one that
argument accepts (``arg(..., accept=...)``, each with its reason); a success
on any other hostile value fails the test.  After an exception the object
must still work.  Under ``make sanitize`` the same battery runs against the
C core built with AddressSanitizer and UBSan.
"""

import inspect
import math
import time
import types

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import nlsepy as nl  # noqa: E402

#: what a clear refusal may be
CLEAR = (TypeError, ValueError, MemoryError, nl.BackendError)

SETTINGS = dict(max_examples=60, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck),
                phases=[Phase.explicit, Phase.generate])  # no shrinking: bounded time

HOSTILE = st.sampled_from([
    float("nan"), float("inf"), -float("inf"), 0, -1, -0.5, 10 ** 30, 1e300, -1e300, True, None,
    "x", "", b"1", [1.0, 2.0], (1, 2, 3, 4), {}, np.float32("nan"), np.int64(-3), 1j,
    np.zeros(3), np.zeros((2, 2)), object(), 2 ** 63, np.array([np.nan]),
])


#: hostile values for amounts of work (steps, iterations, end times): huge
#: finite amounts are a legitimate request for a long run (Ctrl-C ends it),
#: not drawn here
HOSTILE_COUNT = HOSTILE.filter(
    lambda v: not (isinstance(v, (int, float)) and math.isfinite(v) and v > 10 ** 6))


# The hostile values an argument is meant to accept: those its contract
# (nlsepy.common.checks: real, positive, count) lets through.  Every other
# hostile value must be refused.
def REAL(v):
    """A finite real number (not a bool): couplings, potentials, B, detunings."""
    return (isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
            and math.isfinite(v))


def POSITIVE(v):
    """A finite real number > 0: spacings, steps, tolerances, lengths."""
    return REAL(v) and v > 0


def WHOLE(minimum):
    """An integer (not a bool) >= `minimum`: counts of steps, frames, atoms."""
    return lambda v: (isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                      and v >= minimum)


def POINT(v):
    """One point (x, y, z): an array of shape (3,), as (n, 3) has n points."""
    return isinstance(v, np.ndarray) and v.shape == (3,)


def _same(a, b):
    """`a` is `b` as a value: the same type and equal (NaN equal to NaN); an
    array only itself."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a is b
    try:
        return bool(a == b) or bool(a != a and b != b)
    except (TypeError, ValueError):
        return a is b


def _accepted(value, accept):
    """`value` is one of `accept`: a value (_same) or a predicate of it."""
    return any(a(value) if isinstance(a, types.FunctionType) else _same(value, a)
               for a in accept)


def arg(valid, count=False, accept=()):
    """A valid value (from a strategy or a list) or a hostile one, drawn as
    ``(value, refused)``: `refused` when the value is hostile and not one of
    `accept`, the hostile values this argument is meant to take (values,
    or predicates of the value)."""
    listed = () if isinstance(valid, st.SearchStrategy) else tuple(valid)
    good = valid if isinstance(valid, st.SearchStrategy) else st.sampled_from(valid)
    good = good.map(lambda v: (v, False))
    bad = (HOSTILE_COUNT if count else HOSTILE).map(
        lambda v: (v, not _accepted(v, tuple(accept) + listed)))
    return st.one_of(good, good, bad)


def valid(values):
    """Only valid values, drawn as arg() draws them."""
    return st.sampled_from(values).map(lambda v: (v, False))


def battery(**args):
    """``settings(**SETTINGS)`` and ``given(**args)`` for a test whose
    arguments arg() draws: the test receives the values, and first
    `refused`, the names of the arguments whose value it must see refused."""
    def decorate(fn):
        def test(**drawn):
            refused = frozenset(k for k, (_, bad) in drawn.items() if bad)
            return fn(refused, **{k: v for k, (v, _) in drawn.items()})
        test.__signature__ = inspect.Signature(
            [inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY) for k in args])
        for name in ("__name__", "__qualname__", "__doc__", "__module__"):
            setattr(test, name, getattr(fn, name))
        return settings(**SETTINGS)(given(**args)(test))
    return decorate


def call(fn, *args, allowed=CLEAR, refuse=(), **kw):
    """Call fn; success or an allowed exception with a message. Anything
    else (KeyError, ZeroDivisionError, OverflowError, IndexError, a crash)
    fails the test, and so does a success when `refuse` names an argument
    whose hostile value the call must refuse. Returns the result or the
    exception."""
    t0 = time.perf_counter()
    try:
        out = fn(*args, **kw)
    except allowed as exc:
        assert str(exc).strip(), f"{type(exc).__name__} without a message"
        out = exc
    assert time.perf_counter() - t0 < 60, "a hostile call ran for a minute"
    if refuse and not isinstance(out, BaseException):
        raise AssertionError(f"{getattr(fn, '__qualname__', fn)} accepted the hostile "
                             f"{sorted(refuse)}: args {args!r}, {kw!r}")
    return out


def finite(x):
    return isinstance(x, float) and math.isfinite(x)


def _is(value, marker):
    """`value` is the string `marker` the battery stands for an array with."""
    return isinstance(value, str) and value == marker


# ------------------------------------------------------------------ NLSE
@battery(n=arg([16, 24]), ndim=valid([1, 2]), spacing=arg([0.1, 0.5], accept=[POSITIVE]),
         a=arg([1.0, 0.5], accept=[POSITIVE]), s=arg([-1.0, 1.0], accept=[REAL]),
         scheme=arg(["cd", "2shoc"]), bc=arg(["periodic", "msd", "dirichlet"]),
         dt=arg([None, 1e-3], accept=[POSITIVE]),
         dtype=arg([None, np.complex64, np.complex128]), backend=arg(["cpu"]))
def test_nlse_constructor(refused, n, ndim, spacing, a, s, scheme, bc, dt, dtype, backend):
    shape = (n,) * ndim if isinstance(n, int) and 0 < n < 64 else n
    try:
        psi0 = np.ones(shape, complex)
    except (TypeError, ValueError, MemoryError, OverflowError):
        psi0 = n
    sim = call(nl.NLSE, psi0, spacing, a=a, s=s, scheme=scheme, bc=bc, dt=dt, dtype=dtype,
               backend=backend, refuse=refused)
    if isinstance(sim, nl.NLSE):
        call(sim.step, 2, allowed=CLEAR + (nl.BlowUpError,))


@battery(n=arg([0, 3], True, accept=[WHOLE(0)]), t_end=arg([0.01, 0.02], True),
         frames=arg([1, 2], accept=[WHOLE(1)]), V=arg([None, "ones"]), psi=arg(["ones"]),
         dt=arg([1e-3], accept=[POSITIVE]))
def test_nlse_methods(refused, n, t_end, frames, V, psi, dt):
    sim = nl.NLSE(np.ones(16, complex), 0.1, bc="periodic", backend="cpu")
    call(sim.step, n, allowed=CLEAR + (nl.BlowUpError,), refuse=refused & {"n"})
    call(setattr, sim, "V", np.ones(16) if isinstance(V, str) and V == "ones" else V,
         refuse=refused & {"V"})
    call(setattr, sim, "psi", np.ones(16) if isinstance(psi, str) and psi == "ones" else psi,
         refuse=refused & {"psi"})
    call(setattr, sim, "dt", dt, refuse=refused & {"dt"})
    call(sim.run, sim.t + t_end if finite(t_end) else t_end, frames=frames,
         allowed=CLEAR + (nl.BlowUpError,), refuse=refused & {"t_end", "frames"})
    assert finite(sim.t) and np.all(np.isfinite(sim.psi))
    call(sim.step, 1, allowed=(nl.BlowUpError,))  # still works (or reports)


# ------------------------------------------------------------ DipolarGPE
@battery(n=arg([8, 12]), spacing=arg([0.4], accept=[POSITIVE]),
         dt=arg([1e-3], accept=[POSITIVE]), g=arg([0.0, 5.0], accept=[REAL]),
         gdd=arg([0.0, 2.0], accept=[REAL]), trap=arg([(1.0, 1.0, 1.0), (1.0, 2.0, 0.5)]),
         geometry=arg(["3d", "2d", "1d"]), option=arg([1, 2]),
         dtype=arg([np.complex128, np.complex64]), backend=arg(["cpu"]))
def test_dipolar_constructor(refused, n, spacing, dt, g, gdd, trap, geometry, option, dtype,
                             backend):
    nd = {"3d": 3, "2d": 2, "1d": 1}.get(geometry, 3) if isinstance(geometry, str) else 3
    shape = (n,) * nd if isinstance(n, int) and not isinstance(n, bool) else n
    gpe = call(nl.DipolarGPE, shape, spacing, dt, g=g, gdd=gdd, trap=trap, geometry=geometry,
               option=option, dtype=dtype, backend=backend, refuse=refused)
    if isinstance(gpe, nl.DipolarGPE):
        call(gpe.imaginary_time, 2, allowed=CLEAR + (nl.BlowUpError,))


@battery(steps=arg([0, 2], True, accept=[WHOLE(0)]), frames=arg([None, 1], accept=[WHOLE(1)]),
         t_end=arg([0.004], True), psi=arg(["ones"]))
def test_dipolar_methods(refused, steps, frames, t_end, psi):
    gpe = nl.DipolarGPE((8, 8, 8), 0.5, 1e-3, g=2.0, gdd=1.0, backend="cpu")
    call(gpe.imaginary_time, steps, frames=frames, allowed=CLEAR + (nl.BlowUpError,),
         refuse=refused & {"steps", "frames"})
    call(setattr, gpe, "psi", np.ones((8, 8, 8)) if _is(psi, "ones") else psi,
         refuse=refused & {"psi"})
    call(gpe.run, gpe.t + t_end if finite(t_end) else t_end, allowed=CLEAR + (nl.BlowUpError,),
         refuse=refused & {"t_end"})
    assert finite(gpe.t)
    call(gpe.imaginary_time, 1, allowed=(nl.BlowUpError,))  # still works (or reports)


# ---------------------------------------------------------- CoaxialMagnet
@battery(r0=arg([0.25], accept=[POSITIVE]), z0=arg([0.5], accept=[POSITIVE]),
         r1=arg([1.0], accept=[POSITIVE]), z1=arg([1.5], accept=[POSITIVE]),
         h=arg([0.25, 0.125], accept=[POSITIVE]), B=arg([1e-3], accept=[REAL]),
         dtype=arg([np.float64, np.float32]), backend=arg(["cpu"]),
         method=arg(["jacobi", "sor", "red-black", "multigrid"]),
         tol=arg([1e-4], accept=[POSITIVE]), max_iter=arg([50, 2000], True, accept=[WHOLE(1)]))
def test_magnet_constructor_and_solve(refused, r0, z0, r1, z1, h, B, dtype, backend, method,
                                      tol, max_iter):
    made = refused & {"r0", "z0", "r1", "z1", "h", "B", "dtype", "backend"}
    mag = call(nl.CoaxialMagnet, r0, z0, r1, z1, h, B=B, dtype=dtype, backend=backend,
               refuse=made)
    if isinstance(mag, nl.CoaxialMagnet):
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sol = call(mag.solve, method, tol=tol, max_iter=max_iter,
                       refuse=refused & {"method", "tol", "max_iter"})
        if isinstance(sol, nl.MagnetSolution):
            call(sol.winding, max_iter, refuse=refused & {"max_iter"})
            call(sol.homogeneity, tol, refuse=refused & {"tol"})


# ----------------------------------------------------------- MaxwellBloch
@battery(n_e=arg([1, 2], accept=[WHOLE(1)]), h_t=arg([0.05], accept=[POSITIVE]),
         n_t=arg([64], accept=[WHOLE(2)]), n_atoms=arg([8, 16], accept=[WHOLE(1)]),
         beta=arg([1.0], accept=[REAL]), delta=arg([0.0, 0.5], accept=[REAL]),
         dtype=arg([np.complex128, np.complex64]), backend=arg(["cpu"]),
         h_z=arg([0.01], accept=[POSITIVE]), n_z=arg([2, 3], True, accept=[WHOLE(1)]),
         save_every=arg([1], accept=[WHOLE(1)]))
def test_mbloch_constructor_and_run(refused, n_e, h_t, n_t, n_atoms, beta, delta, dtype, backend,
                                    h_z, n_z, save_every):
    made = refused & {"n_e", "h_t", "n_t", "n_atoms", "beta", "delta", "dtype", "backend"}
    mb = call(nl.MaxwellBloch, 1, n_e, h_t=h_t, n_t=n_t, n_atoms=n_atoms, beta=beta,
              delta=delta, dtype=dtype, backend=backend, refuse=made)
    if isinstance(mb, nl.MaxwellBloch):
        nt = mb.n_t if hasattr(mb, "n_t") else 64
        f0 = np.zeros((mb.n_modes, nt), complex)
        f0[:, nt // 4: nt // 2] = 0.5
        call(mb.run, f0, h_z, n_z, save_every=save_every, allowed=CLEAR + (nl.BlowUpError,),
             refuse=refused & {"h_z", "n_z", "save_every"})


# ----------------------------------------------------------------- DecGPE
@battery(grid=arg(["cubic", "bcc", "a15"]), blocks=arg([2, (2, 3, 2)]),
         spacing=arg([1.0], accept=[POSITIVE]), g=arg([0.0, 3.0], accept=[REAL]),
         trap=arg([1.0, (1.0, 0.5, 2.0)]), bc=arg(["zero", "periodic"]),
         dt=arg([None, 1e-3], accept=[POSITIVE]), dtype=arg([np.complex128, np.complex64]),
         backend=arg(["cpu"]))
def test_dec_constructor(refused, grid, blocks, spacing, g, trap, bc, dt, dtype, backend):
    pytest.importorskip("scipy")
    sim = call(nl.DecGPE, grid, blocks, spacing, g=g, trap=trap, bc=bc, dt=dt, dtype=dtype,
               backend=backend, refuse=refused)
    if isinstance(sim, nl.DecGPE):
        sim.psi = np.ones(sim.size)
        call(sim.step, 2, allowed=CLEAR + (nl.BlowUpError,))


@battery(n=arg([0, 3], True, accept=[WHOLE(0)]), steps=arg([0, 2], True, accept=[WHOLE(0)]),
         norm=arg([None, 2.0], accept=[POSITIVE]), t_end=arg([0.01], True),
         frames=arg([1, 2], accept=[WHOLE(1)]),
         # a number: a uniform potential, broadcast to every cell
         V=arg([None, "zeros"], accept=[REAL]), psi=arg(["ones"]),
         points=arg([np.zeros((2, 3))], accept=[POINT]), shape=arg([(4, 4), (3, 3, 3)]))
def test_dec_methods(refused, n, steps, norm, t_end, frames, V, psi, points, shape):
    pytest.importorskip("scipy")
    sim = nl.DecGPE("bcc", 2, trap=1.0, g=1.0, backend="cpu")
    sim.psi = np.ones(sim.size)
    call(sim.step, n, allowed=CLEAR + (nl.BlowUpError,), refuse=refused & {"n"})
    call(sim.imaginary_time, steps, norm=norm, allowed=CLEAR + (nl.BlowUpError,),
         refuse=refused & {"steps", "norm"})
    call(setattr, sim, "V", np.zeros(sim.size) if _is(V, "zeros") else V,
         refuse=refused & {"V"})
    call(setattr, sim, "psi", np.ones(sim.size) if _is(psi, "ones") else psi,
         refuse=refused & {"psi"})
    call(sim.run, sim.t + t_end if finite(t_end) else t_end, frames=frames,
         allowed=CLEAR + (nl.BlowUpError,), refuse=refused & {"t_end", "frames"})
    call(sim.density_at, points, refuse=refused & {"points"})
    call(sim.density_on_grid, shape, refuse=refused & {"shape"})
    call(sim.apply, np.ones(sim.size) if _is(psi, "ones") else psi, refuse=refused & {"psi"})
    assert finite(sim.t)
    call(sim.step, 1, allowed=(nl.BlowUpError,))  # still works (or reports)


# ----------------------------------------------------------------- helpers
@battery(n=arg([1, 2], accept=[lambda v: WHOLE(1)(v) and v <= nl.max_threads()]))
def test_set_num_threads(refused, n):
    before = nl.get_num_threads()
    try:
        call(nl.set_num_threads, n, refuse=refused)
        nl.NLSE(np.ones(16, complex), 0.1, bc="periodic", backend="cpu").step(2)
    finally:
        nl.set_num_threads(before)


# ===================================================== the review's defects
# Each test below is one defect of the hostile-input review (issue 45):
# what went wrong, and that it is now refused clearly or handled.
import errno  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import textwrap  # noqa: E402
import tracemalloc  # noqa: E402
import zipfile  # noqa: E402

from nlsepy.common import files as _files  # noqa: E402

ENV = dict(os.environ, OMP_NUM_THREADS="1")
ENV.pop("NLSEPY_TRACEBACK", None)


def h5py_or_skip():
    return pytest.importorskip("h5py", reason="run files need h5py (the 'hdf5' extra)")


def nlse1d(n=64, dtype=np.complex128):
    x = np.linspace(-3, 3, n)
    return nl.NLSE((np.exp(-x ** 2) * np.exp(0.5j * x)).astype(dtype), 0.1, bc="periodic",
                   dtype=dtype, backend="cpu")


# 1 -------------------------------------------------------------------------
_SECOND_RUN = textwrap.dedent("""
    import sys, numpy as np, nlsepy as nl
    sim = nl.NLSE(np.ones(64, complex), 0.1, bc="periodic", backend="cpu")
    try:
        sim.run(10 * sim.dt, frames=2, output=sys.argv[1])
    except OSError as exc:
        print(f"refused errno={exc.errno}: {exc}")
        sys.exit(3)
""")


def test_second_run_on_the_same_output_is_refused_without_touching_it(tmp_path):
    """A run writing run.h5; another run, in this process and in another
    one, asks for run.h5: both are refused with EBUSY naming the file, the
    file's bytes stay as they were, the first run ends normally and its
    file holds all its frames."""
    h5py_or_skip()
    path = tmp_path / "run.h5"
    sim, other = nlse1d(), nlse1d()
    seen = {}

    def second_runs(_):
        if seen:
            return
        # the first run's writer thread may still be appending: the file
        # only grows, in place (a truncation would shrink it)
        before = os.stat(path)
        with pytest.raises(OSError) as exc:
            other.run(other.t + 10 * other.dt, frames=2, output=path)
        seen["here"] = (exc.value.errno, str(exc.value))
        r = subprocess.run([sys.executable, "-c", _SECOND_RUN, str(path)], capture_output=True,
                           text=True, timeout=120, env=ENV)
        seen["process"] = (r.returncode, r.stdout + r.stderr)
        after = os.stat(path)
        seen["same"] = after.st_ino == before.st_ino and after.st_size >= before.st_size

    frames = sim.run(sim.t + 50 * sim.dt, frames=5, output=path, callback=second_runs)
    assert seen["here"][0] == errno.EBUSY and str(path) in seen["here"][1]
    assert seen["process"][0] == 3 and f"errno={errno.EBUSY}" in seen["process"][1], seen
    assert seen["same"]
    assert other.t == 0.0  # the refused run took no step
    run = nl.open_run(path)
    assert np.array_equal(run.psi, frames.psi) and np.array_equal(run.t, frames.t)
    assert run.attrs["complete"] is True


# 2 -------------------------------------------------------------------------
_LIMITED = textwrap.dedent("""
    import resource, signal, sys, numpy as np, nlsepy as nl
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of the signal
    x = np.linspace(-3, 3, 4096)
    sim = nl.NLSE(np.exp(-x ** 2).astype(complex), 0.1, bc="periodic", backend="cpu")
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), resource.RLIM_INFINITY))
    try:
        sim.run(60 * sim.dt, frames=30, output=sys.argv[1])
    except OSError as exc:
        print(f"errno={exc.errno}")
        sys.exit(3)
""")


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "win32", reason="POSIX limits")
def test_file_size_limit_mid_run_keeps_the_frames_written(tmp_path):
    """Under RLIMIT_FSIZE the run stops with EFBIG, and the file opens with
    the frames written before, equal to those of the same run unlimited."""
    h5py_or_skip()
    path = tmp_path / "big.h5"
    r = subprocess.run([sys.executable, "-c", _LIMITED, str(path), str(1 << 20)],
                       capture_output=True, text=True, timeout=120, env=ENV)
    assert r.returncode == 3 and f"errno={errno.EFBIG}" in r.stdout, r.stdout + r.stderr
    assert os.path.getsize(path) <= 1 << 20
    run = nl.open_run(path)
    n = len(run.t)
    assert 2 <= n < 31 and run.psi.shape[0] == n and run.attrs["complete"] is False
    x = np.linspace(-3, 3, 4096)
    sim = nl.NLSE(np.exp(-x ** 2).astype(complex), 0.1, bc="periodic", backend="cpu")
    ref = sim.run(60 * sim.dt, frames=30)
    assert np.array_equal(run.t, ref.t[:n]) and np.array_equal(run.psi, ref.psi[:n])


# 3 -------------------------------------------------------------------------
def test_a_frame_without_its_time_is_not_read(tmp_path):
    """A file whose first frame was cut off before its time was written (a
    full disk): no frame, not one of zeros."""
    h5py = h5py_or_skip()
    path = tmp_path / "cut.h5"
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "nlsepy run"
        f.attrs["model"] = "NLSE"
        x = f.create_dataset("x", data=np.arange(8.0))
        x.attrs["dims"] = "x"
        x.attrs["coordinate"] = True
        psi = f.create_dataset("psi", shape=(1, 8), maxshape=(None, 8), dtype=complex,
                               chunks=(1, 8))
        psi.attrs["dims"] = "t,x"
    run = nl.open_run(path)
    assert run.psi.shape == (0, 8) and "t" not in run


def test_full_disk_at_the_first_frame_leaves_no_frame(tmp_path, monkeypatch):
    """ENOSPC while the first frame's time is written: the run raises it and
    the file reads with no frame."""
    h5py = h5py_or_skip()
    real = h5py.Group.create_dataset

    def full(self, name, *args, **kw):
        if name == "t":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, name, *args, **kw)

    monkeypatch.setattr(h5py.Group, "create_dataset", full)
    sim = nlse1d()
    with pytest.raises(OSError) as exc:
        sim.run(10 * sim.dt, frames=2, output=tmp_path / "run.h5")
    assert exc.value.errno == errno.ENOSPC
    monkeypatch.undo()
    run = nl.open_run(tmp_path / "run.h5")
    assert run.psi.shape[0] == 0 and np.all(run.psi == 0)


# 4 -------------------------------------------------------------------------
class _Refusing:
    """A C handle that refuses one call (as the binding does while the
    solver is busy in another thread), everything else passed through."""

    def __init__(self, inner, name):
        self._inner, self._name = inner, name

    def __getattr__(self, name):
        if name == self._name:
            def refuse(*args, **kw):
                raise RuntimeError("the solver is busy in another thread")
            return refuse
        return getattr(self._inner, name)


def _dec():
    sim = nl.DecGPE("bcc", 3, trap=1.0, g=1.0, backend="cpu")
    sim.psi = np.exp(-np.sum(sim.positions ** 2, axis=1)).astype(complex)
    return sim


def _dipolar():
    return nl.DipolarGPE((8, 8, 8), 0.5, 0.01, g=5.0, gdd=1.0, trap=(1, 1, 1), backend="cpu")


@pytest.mark.parametrize("make, name, value, call_name", [
    (_dec, "V", "ones", "set_potential"),
    (nlse1d, "V", "ones", "set_potential"),
    (_dipolar, "V", "ones", "set_potential"),
    (_dipolar, "g", 7.0, "set_couplings"),
    (_dipolar, "gdd", 0.5, "set_couplings"),
], ids=["dec-V", "nlse-V", "dipolar-V", "dipolar-g", "dipolar-gdd"])
def test_a_setting_the_c_layer_refuses_changes_nothing(tmp_path, make, name, value, call_name):
    """When the C layer refuses an assignment, the model reports, steps and
    saves what it had before (DecGPE.V kept the refused array)."""
    sim = make()
    before = getattr(sim, name)
    before = before.copy() if isinstance(before, np.ndarray) else before
    bound = getattr(sim, "max_dt", None)
    ref = make()
    if isinstance(value, str):
        value = np.ones(np.shape(sim.psi), float)
    sim._solver = _Refusing(sim._solver, call_name)
    with pytest.raises(RuntimeError, match="busy"):
        setattr(sim, name, value)
    sim._solver = sim._solver._inner
    after = getattr(sim, name)
    if before is None:
        assert after is None
    else:
        assert np.array_equal(after, before)
    assert getattr(sim, "max_dt", None) == bound
    sim.save(tmp_path / "ck.npz")
    got = getattr(type(sim).load(tmp_path / "ck.npz", backend="cpu"), name)
    assert (got is None and before is None) or np.array_equal(got, before)
    stepper = getattr(sim, "real_time", None) or sim.step
    stepper(2)
    (getattr(ref, "real_time", None) or ref.step)(2)
    assert np.array_equal(sim.psi, ref.psi)


def test_a_step_size_the_c_layer_refuses_leaves_the_clock():
    """A new dt reaches the handle at the next step; refused there, the
    clock (t, the handle's step) is as before and stepping on is exact."""
    sim, ref = nlse1d(), nlse1d()
    sim.step(2)
    ref.step(2)
    t0, dt0 = sim.t, sim._solver_dt
    sim.dt = ref.dt = sim.dt / 2
    sim._solver = _Refusing(sim._solver, "set_dt")
    with pytest.raises(RuntimeError, match="busy"):
        sim.step(1)
    sim._solver = sim._solver._inner
    assert sim.t == t0 and sim._solver_dt == dt0
    sim.step(3)
    ref.step(3)
    assert sim.t == ref.t and np.array_equal(sim.psi, ref.psi)


# 5 -------------------------------------------------------------------------
def test_save_writes_through_a_link_and_refuses_devices_and_fifos(tmp_path):
    sim = nlse1d()
    target = tmp_path / "real.npz"
    link = tmp_path / "link.npz"
    os.symlink(target, link)
    sim.save(link)
    assert os.path.islink(link) and os.path.isfile(target)
    assert np.array_equal(nl.NLSE.load(link).psi, sim.psi)
    fifo = tmp_path / "pipe.npz"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="FIFO") as exc:
        sim.save(fifo)
    assert str(fifo) in str(exc.value)
    assert os.path.exists(fifo) and not os.path.isfile(fifo)
    via = tmp_path / "via.h5"
    os.symlink(fifo, via)
    with pytest.raises(ValueError, match=r"the target of the link.*FIFO"):
        sim.save(via)
    # the check itself, on device nodes (nothing is written here)
    for dev in ("/dev/null", "/dev/zero"):
        if os.path.exists(dev):
            with pytest.raises(ValueError, match="character device") as exc:
                _files.check_target(dev)
            assert dev in str(exc.value)
    assert os.path.isdir(tmp_path)
    with pytest.raises(ValueError, match="a folder"):
        _files.check_target(str(tmp_path))


def test_run_output_refuses_a_fifo(tmp_path):
    h5py_or_skip()
    fifo = tmp_path / "pipe.h5"
    os.mkfifo(fifo)
    sim = nlse1d()
    with pytest.raises(ValueError, match="FIFO"):
        sim.run(4 * sim.dt, frames=2, output=fifo)
    assert sim.t == 0.0


# 6 -------------------------------------------------------------------------
def test_absurd_frame_counts_are_refused_from_arithmetic():
    """frames = 10**8 of a 4096-point state (6.6 TB of snapshots):
    MemoryError at once, with no list of chunk bounds or frames built
    first (10**8 frames took 57 s before the refusal)."""
    sim = nlse1d(4096)
    tracemalloc.start()
    try:
        t0 = time.perf_counter()
        with pytest.raises(MemoryError, match="frames=100000000"):
            sim.run(sim.t + 2 * 10 ** 8 * sim.dt, frames=10 ** 8)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, f"{peak} bytes allocated before the refusal"
    assert time.perf_counter() - t0 < 30
    assert sim.t == 0.0


# 7 -------------------------------------------------------------------------
def _damage_version(path):
    """Make the zip directory claim a version no reader extracts."""
    data = bytearray(open(path, "rb").read())
    at = data.rfind(b"PK\x01\x02")  # the last central-directory entry
    data[at + 6:at + 8] = (99).to_bytes(2, "little")  # version needed: 9.9
    open(path, "wb").write(bytes(data))


def _absurd_shape(path, entry):
    """Rewrite the archive with the header of `entry` edited to a huge shape
    (a whole archive, its checksums right: only the shape lies)."""
    with zipfile.ZipFile(path) as z:
        members = {name: z.read(name) for name in z.namelist()}
    npy = members[entry + ".npy"]
    head = npy.index(b"'shape': (")
    end = npy.index(b")", head) + 1
    huge = b"'shape': (10000000000000,)"
    pad = npy.index(b"}", end) + 1
    grow = len(huge) - (end - head)
    assert npy[pad:pad + grow].strip() == b""  # the header keeps its length
    members[entry + ".npy"] = npy[:head] + huge + npy[end:pad] + npy[pad + grow:]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, data in members.items():
            z.writestr(name, data)


def test_damaged_checkpoint_directory_is_a_value_error_naming_the_file(tmp_path):
    sim = nlse1d()
    path = tmp_path / "ck.npz"
    sim.save(path)
    _damage_version(path)
    with pytest.raises(ValueError) as exc:
        nl.NLSE.load(path)
    assert str(path) in str(exc.value)


def test_edited_array_size_is_a_value_error_naming_the_file(tmp_path):
    sim = nlse1d()
    path = tmp_path / "ck.npz"
    sim.save(path)
    _absurd_shape(path, "psi")
    with pytest.raises(ValueError, match="declares shape") as exc:
        nl.NLSE.load(path)
    assert str(path) in str(exc.value)


def test_cli_exit_2_for_a_damaged_checkpoint(tmp_path):
    """dbec with INPUT a checkpoint whose zip directory is damaged: one line
    naming the file, exit 2."""
    gpe = nl.DipolarGPE((32,), 0.25, 0.01, geometry="1d-z", backend="cpu")
    gpe.save(tmp_path / "state.npz")
    _damage_version(tmp_path / "state.npz")
    (tmp_path / "real1d-z-input").write_text(
        "OPTION = 2\nNATOMS = 100\nAHO = 1.e-6\nAS = 10.\nADD = 0.\nNZ = 32\nDZ = 0.25\n"
        "DT = 0.01\nGAMMA = 1.\nNU = 1.\nLAMBDA = 1.\nNSTP = 0\nNPAS = 2\nNRUN = 2\n"
        "INPUT = state.npz\n")
    r = subprocess.run([sys.executable, "-m", "nlsepy", "dbec", "real1d-z-input"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120, env=ENV)
    assert r.returncode == 2, r.stderr
    assert "state.npz" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.splitlines()) == 1


# 8 -------------------------------------------------------------------------
def test_open_run_on_damaged_files_names_the_file(tmp_path):
    """Bytes flipped anywhere in a run file: open_run reads it (where the
    damage missed what it reads) or raises ValueError naming the file,
    never a raw KeyError or OSError of h5py."""
    h5py_or_skip()
    sim = nlse1d(32)
    good = tmp_path / "good.h5"
    sim.run(6 * sim.dt, frames=3, output=good)
    data = open(good, "rb").read()
    refused = 0
    for k, at in enumerate(np.linspace(0, len(data) - 8, 48).astype(int)):
        bad = tmp_path / f"bad{k}.h5"
        damaged = bytearray(data)
        damaged[at:at + 8] = bytes(b ^ 0xFF for b in damaged[at:at + 8])
        open(bad, "wb").write(bytes(damaged))
        try:
            nl.open_run(bad)
        except ValueError as exc:
            assert str(bad) in str(exc), exc
            refused += 1
    assert refused > 0


# 9 -------------------------------------------------------------------------
@pytest.mark.parametrize("frames", [2.5, np.float64(1.9), [True, False], np.array([0.0, 1.0]),
                                    "0", slice(0.5, 2), {0: 1}, [[0, 1]]])
def test_open_run_frames_must_be_integers(tmp_path, frames):
    h5py_or_skip()
    sim = nlse1d(16)
    sim.run(4 * sim.dt, frames=2, output=tmp_path / "run.h5")
    with pytest.raises(TypeError, match="frames"):
        nl.open_run(tmp_path / "run.h5", frames=frames)
    run = nl.open_run(tmp_path / "run.h5", frames=[np.int64(2), 0])
    assert run.psi.shape[0] == 2


# 13 ------------------------------------------------------------------------
def test_a_flipped_byte_in_a_frame_is_detected(tmp_path):
    """The frame datasets carry HDF5's Fletcher32 checksum: a byte changed
    inside a frame's stored chunk makes open_run raise ValueError naming
    the file, instead of returning a wrong state."""
    h5py = h5py_or_skip()
    sim = nlse1d(256)
    path = tmp_path / "run.h5"
    frames = sim.run(6 * sim.dt, frames=3, output=path)
    with h5py.File(path, "r") as f:
        assert f["psi"].fletcher32
        info = f["psi"].id.get_chunk_info(2)  # the third frame's chunk
        offset, size = info.byte_offset, info.size
    assert size == frames.psi[2].nbytes + 4  # the values and the checksum
    assert np.array_equal(nl.open_run(path).psi, frames.psi)
    data = bytearray(open(path, "rb").read())
    data[offset + size // 3] ^= 0x01
    open(path, "wb").write(bytes(data))
    with pytest.raises(ValueError) as exc:
        nl.open_run(path)
    assert str(path) in str(exc.value)
    # the frames before it are still read one by one
    assert np.array_equal(nl.open_run(path, frames=[0, 1]).psi, frames.psi[:2])


# ------------------------------------------------------------------ vortices
@settings(**SETTINGS)
@given(psi=arg(["pair", "ring", "huge", "tiny"]), spacing=arg([0.1, (0.1, 0.2)]),
       origin=arg([None, 0.0, (1.0, -1.0)]), threshold=arg([1e-3, 0.0, 0.5]),
       reach=arg([0, 4]), periodic=arg([False, True, (True, False)]))
def test_vortices(psi, spacing, origin, threshold, reach, periodic):
    x = np.linspace(-2, 2, 24)
    X, Y = np.meshgrid(x, x, indexing="ij")
    fields = {"pair": (X - 0.53 + 1j * (Y - 0.1)) * (X + 0.61 - 1j * (Y + 0.2)),
              "huge": 1e300 * (X - 0.53 + 1j * Y), "tiny": 1e-300 * (X - 0.53 + 1j * Y)}
    if isinstance(psi, str) and psi == "ring":
        Z = np.meshgrid(x, x, x, indexing="ij")
        psi = (np.hypot(Z[0], Z[1]) - 1.1) + 1j * (Z[2] - 0.07)
    elif isinstance(psi, str) and psi in fields:
        psi = fields[psi]
    out = call(nl.vortices, psi, spacing, origin, threshold, reach=reach, periodic=periodic)
    if isinstance(out, nl.Vortices):
        assert np.all(np.isfinite(out.positions))
    elif isinstance(out, nl.VortexLines):
        assert all(np.all(np.isfinite(line.points)) for line in out)
