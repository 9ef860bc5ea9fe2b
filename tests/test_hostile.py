"""A property-based battery of hostile input over every public constructor
and method (hypothesis, an optional test dependency).

Each example draws every argument either from values a user would pass or
from hostile ones (NaN, Inf, zero, negatives, huge numbers, wrong types,
wrong shapes), calls the public API, and accepts only success or a clear
exception: TypeError, ValueError, MemoryError (refused before allocating),
nl.BackendError, and nl.BlowUpError where a step may blow up.  After an
exception the object must still work.  Under ``make sanitize`` the same
battery runs against the C core built with AddressSanitizer and UBSan.
"""

import math
import time

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


def arg(valid, count=False):
    """A valid value (from a strategy or a list) or a hostile one."""
    good = valid if isinstance(valid, st.SearchStrategy) else st.sampled_from(valid)
    return st.one_of(good, good, HOSTILE_COUNT if count else HOSTILE)


def call(fn, *args, allowed=CLEAR, **kw):
    """Call fn; success or an allowed exception with a message. Anything
    else (KeyError, ZeroDivisionError, OverflowError, IndexError, a crash)
    fails the test. Returns the result or the exception."""
    t0 = time.perf_counter()
    try:
        out = fn(*args, **kw)
    except allowed as exc:
        assert str(exc).strip(), f"{type(exc).__name__} without a message"
        out = exc
    assert time.perf_counter() - t0 < 60, "a hostile call ran for a minute"
    return out


def finite(x):
    return isinstance(x, float) and math.isfinite(x)


# ------------------------------------------------------------------ NLSE
@settings(**SETTINGS)
@given(n=arg([16, 24]), ndim=st.sampled_from([1, 2]), spacing=arg([0.1, 0.5]),
       a=arg([1.0, 0.5]), s=arg([-1.0, 1.0]), scheme=arg(["cd", "2shoc"]),
       bc=arg(["periodic", "msd", "dirichlet"]), dt=arg([None, 1e-3]),
       dtype=arg([None, np.complex64, np.complex128]), backend=arg(["cpu"]))
def test_nlse_constructor(n, ndim, spacing, a, s, scheme, bc, dt, dtype, backend):
    shape = (n,) * ndim if isinstance(n, int) and 0 < n < 64 else n
    try:
        psi0 = np.ones(shape, complex)
    except (TypeError, ValueError, MemoryError, OverflowError):
        psi0 = n
    sim = call(nl.NLSE, psi0, spacing, a=a, s=s, scheme=scheme, bc=bc, dt=dt, dtype=dtype,
               backend=backend)
    if isinstance(sim, nl.NLSE):
        call(sim.step, 2, allowed=CLEAR + (nl.BlowUpError,))


@settings(**SETTINGS)
@given(n=arg([0, 3], True), t_end=arg([0.01, 0.02], True), frames=arg([1, 2]), V=arg([None, "ones"]),
       psi=arg(["ones"]), dt=arg([1e-3]))
def test_nlse_methods(n, t_end, frames, V, psi, dt):
    sim = nl.NLSE(np.ones(16, complex), 0.1, bc="periodic", backend="cpu")
    call(sim.step, n, allowed=CLEAR + (nl.BlowUpError,))
    call(setattr, sim, "V", np.ones(16) if isinstance(V, str) and V == "ones" else V)
    call(setattr, sim, "psi", np.ones(16) if isinstance(psi, str) and psi == "ones" else psi)
    call(setattr, sim, "dt", dt)
    call(sim.run, sim.t + t_end if finite(t_end) else t_end, frames=frames,
         allowed=CLEAR + (nl.BlowUpError,))
    assert finite(sim.t) and np.all(np.isfinite(sim.psi))
    call(sim.step, 1, allowed=(nl.BlowUpError,))  # still works (or reports)


# ------------------------------------------------------------ DipolarGPE
@settings(**SETTINGS)
@given(n=arg([8, 12]), spacing=arg([0.4]), dt=arg([1e-3]), g=arg([0.0, 5.0]),
       gdd=arg([0.0, 2.0]), trap=arg([(1.0, 1.0, 1.0), (1.0, 2.0, 0.5)]),
       geometry=arg(["3d", "2d", "1d"]), option=arg([1, 2]),
       dtype=arg([np.complex128, np.complex64]), backend=arg(["cpu"]))
def test_dipolar_constructor(n, spacing, dt, g, gdd, trap, geometry, option, dtype, backend):
    nd = {"3d": 3, "2d": 2, "1d": 1}.get(geometry, 3) if isinstance(geometry, str) else 3
    shape = (n,) * nd if isinstance(n, int) and not isinstance(n, bool) else n
    gpe = call(nl.DipolarGPE, shape, spacing, dt, g=g, gdd=gdd, trap=trap, geometry=geometry,
               option=option, dtype=dtype, backend=backend)
    if isinstance(gpe, nl.DipolarGPE):
        call(gpe.imaginary_time, 2, allowed=CLEAR + (nl.BlowUpError,))


@settings(**SETTINGS)
@given(steps=arg([0, 2], True), frames=arg([None, 1]), t_end=arg([0.004], True), psi=arg(["ones"]))
def test_dipolar_methods(steps, frames, t_end, psi):
    gpe = nl.DipolarGPE((8, 8, 8), 0.5, 1e-3, g=2.0, gdd=1.0, backend="cpu")
    call(gpe.imaginary_time, steps, frames=frames, allowed=CLEAR + (nl.BlowUpError,))
    call(setattr, gpe, "psi", np.ones((8, 8, 8)) if isinstance(psi, str) else psi)
    call(gpe.run, gpe.t + t_end if finite(t_end) else t_end, allowed=CLEAR + (nl.BlowUpError,))
    assert finite(gpe.t)
    call(gpe.imaginary_time, 1, allowed=(nl.BlowUpError,))  # still works (or reports)


# ---------------------------------------------------------- CoaxialMagnet
@settings(**SETTINGS)
@given(r0=arg([0.25]), z0=arg([0.5]), r1=arg([1.0]), z1=arg([1.5]), h=arg([0.25, 0.125]),
       B=arg([1e-3]), dtype=arg([np.float64, np.float32]), backend=arg(["cpu"]),
       method=arg(["jacobi", "sor", "red-black", "multigrid"]), tol=arg([1e-4]),
       max_iter=arg([50, 2000], True))
def test_magnet_constructor_and_solve(r0, z0, r1, z1, h, B, dtype, backend, method, tol,
                                      max_iter):
    mag = call(nl.CoaxialMagnet, r0, z0, r1, z1, h, B=B, dtype=dtype, backend=backend)
    if isinstance(mag, nl.CoaxialMagnet):
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sol = call(mag.solve, method, tol=tol, max_iter=max_iter)
        if isinstance(sol, nl.MagnetSolution):
            call(sol.winding, max_iter)
            call(sol.homogeneity, tol)


# ----------------------------------------------------------- MaxwellBloch
@settings(**SETTINGS)
@given(n_e=arg([1, 2]), h_t=arg([0.05]), n_t=arg([64]), n_atoms=arg([8, 16]),
       beta=arg([1.0]), delta=arg([0.0, 0.5]), dtype=arg([np.complex128, np.complex64]),
       backend=arg(["cpu"]), h_z=arg([0.01]), n_z=arg([2, 3], True), save_every=arg([1]))
def test_mbloch_constructor_and_run(n_e, h_t, n_t, n_atoms, beta, delta, dtype, backend, h_z,
                                    n_z, save_every):
    mb = call(nl.MaxwellBloch, 1, n_e, h_t=h_t, n_t=n_t, n_atoms=n_atoms, beta=beta,
              delta=delta, dtype=dtype, backend=backend)
    if isinstance(mb, nl.MaxwellBloch):
        nt = mb.n_t if hasattr(mb, "n_t") else 64
        f0 = np.zeros((mb.n_modes, nt), complex)
        f0[:, nt // 4: nt // 2] = 0.5
        call(mb.run, f0, h_z, n_z, save_every=save_every, allowed=CLEAR + (nl.BlowUpError,))


# ----------------------------------------------------------------- DecGPE
@settings(**SETTINGS)
@given(grid=arg(["cubic", "bcc", "a15"]), blocks=arg([2, (2, 3, 2)]), spacing=arg([1.0]),
       g=arg([0.0, 3.0]), trap=arg([1.0, (1.0, 0.5, 2.0)]), bc=arg(["zero", "periodic"]),
       dt=arg([None, 1e-3]), dtype=arg([np.complex128, np.complex64]), backend=arg(["cpu"]))
def test_dec_constructor(grid, blocks, spacing, g, trap, bc, dt, dtype, backend):
    pytest.importorskip("scipy")
    sim = call(nl.DecGPE, grid, blocks, spacing, g=g, trap=trap, bc=bc, dt=dt, dtype=dtype,
               backend=backend)
    if isinstance(sim, nl.DecGPE):
        sim.psi = np.ones(sim.size)
        call(sim.step, 2, allowed=CLEAR + (nl.BlowUpError,))


@settings(**SETTINGS)
@given(n=arg([0, 3], True), steps=arg([0, 2], True), norm=arg([None, 2.0]), t_end=arg([0.01], True),
       frames=arg([1, 2]), V=arg([None, "zeros"]), psi=arg(["ones"]),
       points=arg([np.zeros((2, 3))]), shape=arg([(4, 4), (3, 3, 3)]))
def test_dec_methods(n, steps, norm, t_end, frames, V, psi, points, shape):
    pytest.importorskip("scipy")
    sim = nl.DecGPE("bcc", 2, trap=1.0, g=1.0, backend="cpu")
    sim.psi = np.ones(sim.size)
    call(sim.step, n, allowed=CLEAR + (nl.BlowUpError,))
    call(sim.imaginary_time, steps, norm=norm, allowed=CLEAR + (nl.BlowUpError,))
    call(setattr, sim, "V", np.zeros(sim.size) if isinstance(V, str) else V)
    call(setattr, sim, "psi", np.ones(sim.size) if isinstance(psi, str) else psi)
    call(sim.run, sim.t + t_end if finite(t_end) else t_end, frames=frames,
         allowed=CLEAR + (nl.BlowUpError,))
    call(sim.density_at, points)
    call(sim.density_on_grid, shape)
    call(sim.apply, psi if not isinstance(psi, str) else np.ones(sim.size))
    assert finite(sim.t)
    call(sim.step, 1, allowed=(nl.BlowUpError,))  # still works (or reports)


# ----------------------------------------------------------------- helpers
@settings(**SETTINGS)
@given(n=arg([1, 2]))
def test_set_num_threads(n):
    before = nl.get_num_threads()
    try:
        call(nl.set_num_threads, n)
        nl.NLSE(np.ones(16, complex), 0.1, bc="periodic", backend="cpu").step(2)
    finally:
        nl.set_num_threads(before)
