"""nlsepy.reference.dipolar: the batched tridiagonal solve against the Thomas recursion.

NumPy only (``scipy.linalg.solve_banded``); the CuPy branch (cuSPARSE
``gtsv2``) shares everything but the library call and needs a GPU.
"""

import sys
import types

import numpy as np
import pytest

from nlsepy.reference.dipolar import SplitStepReference

try:  # the batched NumPy solve uses SciPy, an optional extra
    import scipy.linalg  # noqa: F401
    HAVE_SCIPY = True
except ImportError:
    HAVE_SCIPY = False
needs_scipy = pytest.mark.skipif(not HAVE_SCIPY, reason="tridiag='batched' on NumPy needs SciPy")

SHAPE = (16, 12, 10)
H = (0.45, 0.5, 0.55)
DT = 0.005


def _rel(a, b):
    """max |a - b| / max |b|."""
    a, b = np.asarray(a), np.asarray(b)
    return float(np.abs(a - b).max() / np.abs(b).max())


def _pair(imaginary, dtype, gdd, shape=SHAPE, spacing=H):
    """The same model twice, once per `tridiag`, from one wide Gaussian.

    The Gaussian is wide enough that the state is far from zero on every
    face of the box, so the first step exercises the boundary rows.
    """
    kw = dict(kin=1.0, trap=(0.25, 1.0, 2.25), g=50.0, gdd=gdd, cutoff=2.0 if gdd else 0.0,
              imaginary=imaginary, dtype=dtype)
    a = SplitStepReference(shape, spacing, DT, tridiag="thomas", **kw)
    b = SplitStepReference(shape, spacing, DT, tridiag="batched", **kw)
    x = [(np.arange(n) - n // 2) * h for n, h in zip(shape, spacing)]
    X, Y, Z = np.meshgrid(*x, indexing="ij")
    psi = np.exp(-(X ** 2 + Y ** 2 + Z ** 2) / 40.0)
    if not imaginary:
        psi = psi * np.exp(0.3j * X - 0.2j * Y * Z)
    psi = psi.astype(a.psi.dtype)
    a.psi = psi.copy()
    b.psi = psi.copy()
    return a, b


def test_bad_tridiag_raises():
    for bad in ("Thomas", "cusparse", "", None, 1):
        with pytest.raises(ValueError, match="tridiag"):
            SplitStepReference(SHAPE, H, DT, tridiag=bad)


def test_default_is_thomas():
    assert SplitStepReference(SHAPE, H, DT).tridiag == "thomas"


@needs_scipy
@pytest.mark.parametrize("imaginary", [False, True])
@pytest.mark.parametrize("gdd", [0.0, 40.0])
@pytest.mark.parametrize("dtype,tol", [(np.complex128, 1e-12), (np.complex64, 1e-5)])
def test_batched_matches_thomas(imaginary, gdd, dtype, tol):
    a, b = _pair(imaginary, dtype, gdd)
    edge = np.abs(np.asarray(a.psi)[-1]).max() / np.abs(np.asarray(a.psi)).max()
    assert edge > 0.1  # the boundary rows see nonzero old values
    assert b.psi.dtype == a.psi.dtype
    a.step(1)
    b.step(1)
    assert b.psi.dtype == a.psi.dtype
    assert _rel(b.psi, a.psi) < tol, "first step"
    a.step(4)
    b.step(4)
    assert _rel(b.psi, a.psi) < tol, "five steps"


@needs_scipy
@pytest.mark.parametrize("imaginary", [False, True])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_one_axis_from_random_state(imaginary, axis):
    """One solve along each axis from a state that is nonzero everywhere."""
    a, b = _pair(imaginary, np.complex128, 0.0)
    rng = np.random.default_rng(7 + axis)
    psi = rng.standard_normal(SHAPE) + 1.5
    if not imaginary:
        psi = psi + 1j * rng.standard_normal(SHAPE)
    a.psi = psi.astype(a.psi.dtype)
    b.psi = a.psi.copy()
    a._crank_nicolson(axis)
    b._crank_nicolson(axis)
    assert _rel(b.psi, a.psi) < 1e-12

    # The upper boundary's old value enters the solve: zeroing it first
    # changes the result well beyond round-off, so the check above sees it.
    c, _ = _pair(imaginary, np.complex128, 0.0)
    c.psi = psi.astype(c.psi.dtype)
    np.moveaxis(c.psi, axis, 0)[-1] = 0
    c._crank_nicolson(axis)
    assert _rel(c.psi, a.psi) > 1e-6


@needs_scipy
@pytest.mark.parametrize("imaginary", [False, True])
def test_batched_solves_the_stated_system(imaginary):
    """Against a dense solve of the system the batched docstring states."""
    _, b = _pair(imaginary, np.complex128, 0.0)
    rng = np.random.default_rng(3)
    psi = rng.standard_normal(SHAPE) + 1.0
    if not imaginary:
        psi = psi + 1j * rng.standard_normal(SHAPE)
    b.psi = psi.astype(b.psi.dtype)
    axis, n, h = 1, SHAPE[1], H[1]
    A, A0, A0r = b._cn_constants(h)
    b._crank_nicolson(axis)

    p = np.moveaxis(psi, axis, 0)
    rhs = A0r * p[1:-1] - A * (p[2:] + p[:-2])
    rhs[-1] -= A * p[-1]
    k = n - 2
    M = np.diag(np.full(k, A0)) + np.diag(np.full(k - 1, A), 1) + np.diag(np.full(k - 1, A), -1)
    x = np.linalg.solve(M, rhs.reshape(k, -1)).reshape(rhs.shape)
    want = np.zeros_like(np.moveaxis(np.asarray(b.psi), axis, 0))
    want[1:-1] = x
    assert _rel(np.moveaxis(b.psi, axis, 0), want) < 1e-12


@needs_scipy
@pytest.mark.parametrize("shape", [(3, 4, 5), (5, 3, 4)])
def test_smallest_axes(shape):
    """Axes of 3 points (one unknown) and 4 points (two unknowns)."""
    for imaginary in (False, True):
        a, b = _pair(imaginary, np.complex128, 0.0, shape=shape, spacing=(0.5, 0.5, 0.5))
        a.step(2)
        b.step(2)
        assert _rel(b.psi, a.psi) < 1e-12


def test_batched_without_scipy_raises(monkeypatch):
    monkeypatch.setitem(sys.modules, "scipy.linalg", None)
    with pytest.raises(ImportError, match="scipy"):
        SplitStepReference(SHAPE, H, DT, tridiag="batched")
    SplitStepReference(SHAPE, H, DT, tridiag="thomas")  # needs no SciPy solver


def _fake_xp():
    """A stand-in for ``cupy``: NumPy's functions under another module object."""
    return types.SimpleNamespace(**{k: getattr(np, k) for k in dir(np) if not k.startswith("__")})


def _set_modules(monkeypatch, modules):
    """Put `modules` into ``sys.modules`` for the test, in their order.

    Parameters
    ----------
    monkeypatch : pytest.MonkeyPatch
        The test's fixture (it restores ``sys.modules`` afterwards).
    modules : dict
        Module name: module object, or None for "not importable".
    """
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)


def test_cupy_without_cusparse_raises(monkeypatch):
    _set_modules(monkeypatch, dict.fromkeys(["cupyx", "cupyx.cusparse", "cupyx.scipy",
                                             "cupyx.scipy.fft"]))
    with pytest.raises(ImportError, match="cupyx.cusparse"):
        SplitStepReference(SHAPE, H, DT, xp=_fake_xp(), tridiag="batched")


def test_cupy_without_gtsv2_raises(monkeypatch):
    cupyx = types.ModuleType("cupyx")
    cupyx.cusparse = types.ModuleType("cupyx.cusparse")  # no gtsv2 in it
    _set_modules(monkeypatch, {"cupyx": cupyx, "cupyx.cusparse": cupyx.cusparse,
                               "cupyx.scipy": None, "cupyx.scipy.fft": None, "cupy": None,
                               "cupy_backends": None})
    with pytest.raises(RuntimeError, match="gtsv2"):
        SplitStepReference(SHAPE, H, DT, xp=_fake_xp(), tridiag="batched")


def test_cupy_needs_five_points():
    with pytest.raises(ValueError, match="5 points"):
        SplitStepReference((16, 4, 10), H, DT, xp=_fake_xp(), tridiag="batched")
