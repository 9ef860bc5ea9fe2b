"""The stationary vortex of the 3D GPE (source 001 section 5, eqs. 14-15): the
oscillator ground state exactly, second-order convergence of mu, the source's
(lam, g, kappa) = (1, 300, 10) state (norm, residual, the chemical potential's
energy relation, the vortex core, the eq. 15 cuboid, the phase winding) and
the argument checks."""

import math
import sys

import numpy as np
import pytest

pytest.importorskip("scipy", reason="vortex_state solves eq. 14 with scipy.sparse")

from nlsepy import examples  # noqa: E402
from nlsepy.dec import vortex  # noqa: E402
from nlsepy.dec.vortex import VortexState, thomas_fermi_mu, vortex_state  # noqa: E402


@pytest.fixture(scope="module")
def accuracy_state():
    """The source's accuracy-test state at the default resolution."""
    return vortex_state(1.0, 300.0, 10)


def quartic(s):
    return float(np.sum(s.weights() * s.f ** 4))


def extrapolated_mu(s):
    """Richardson's extrapolation of mu from the state `s` (spacing h) and
    the same problem at h/2 on the same extent: (4 mu(h/2) - mu(h)) / 3,
    mu converging at second order in h (test_second_order_convergence_in_h)."""
    half = vortex_state(s.lam, s.g, s.kappa, h=0.5 * s.h, rho_max=s.rho_edge, z_max=s.z_edge)
    return (4 * half.mu - s.mu) / 3


#: mu of the (lam, g, kappa) = (1, 300, 10) and (0.1, 5000, 10) states
#: extrapolated from the default h and h/2 (extrapolated_mu), to 7 digits:
#: derived in test_accuracy_state_converged and in the slow
#: test_anisotropic_trap_state_extrapolated
MU_EXTRAPOLATED = {(1.0, 300.0, 10): 13.44948, (0.1, 5000.0, 10): 14.17455}


# ----------------------------------------------------------- the oscillator
@pytest.mark.parametrize("lam", [1.0, 0.5])
def test_ground_state_of_the_oscillator(lam):
    s = vortex_state(lam, 0.0, 0)
    assert s.mu == pytest.approx(1.0 + 0.5 * lam, rel=2e-4)
    assert s.norm() == pytest.approx(1.0, abs=1e-12)
    assert s.residual() < 1e-10
    R, Z = np.meshgrid(s.rho, s.z, indexing="ij")
    exact = math.pi ** -0.75 * lam ** 0.25 * np.exp(-0.5 * (R ** 2 + lam * Z ** 2))
    assert np.abs(s.f - exact).max() < 2e-4 * exact.max()
    # the interpolant between the nodes, through the axis and at negative z
    r = np.array([0.0, 0.01, 0.7, 1.33, 2.9])
    z = np.array([0.0, -0.4, 1.1, -2.05, 0.3])
    ex = math.pi ** -0.75 * lam ** 0.25 * np.exp(-0.5 * (r ** 2 + lam * z ** 2))
    assert np.allclose(s.f_at(r, z), ex, rtol=0, atol=3e-4 * ex.max())
    # linear: E = mu, and the eq. 15 half-widths follow exp(-r^2/2) = eps
    assert s.energy() == pytest.approx(s.mu, rel=1e-12)
    lo, hi = s.cuboid(1e-5)
    half = math.sqrt(2 * math.log(1e5))
    assert hi == pytest.approx([half, half, half / math.sqrt(lam)], rel=2e-3)
    assert np.array_equal(lo, -hi)


def test_oscillator_vortex_mu():
    # g = 0: mu = kappa + 1 + lam/2
    s = vortex_state(1.0, 0.0, 3, h=0.05)
    assert s.mu == pytest.approx(4.5, rel=2e-4)
    assert s.f_at(0.0, 0.0) == 0.0


def test_second_order_convergence_in_h():
    mus = [vortex_state(1.0, 50.0, 1, h=h, rho_max=7.0, z_max=7.0).mu for h in (0.2, 0.1, 0.05)]
    order = math.log2((mus[0] - mus[1]) / (mus[1] - mus[2]))
    assert abs(order - 2.0) < 0.3
    # and the default resolution is within its 1e-4 of the extrapolated mu
    extrapolated = (4 * mus[2] - mus[1]) / 3
    assert vortex_state(1.0, 50.0, 1).mu == pytest.approx(extrapolated, rel=1e-4)


def test_operator_is_the_sparse_matrix_and_self_adjoint():
    sp = pytest.importorskip("scipy.sparse")
    grid = vortex._Grid(0.7, 2, 0.1, 9, 7)
    L = grid.matrix(sp)
    f = np.random.default_rng(1).standard_normal((9, 7))
    assert np.allclose(L @ f.ravel(), grid.apply(f).ravel(), rtol=1e-14, atol=1e-12)
    WL = sp.diags(grid.w.ravel()) @ L
    assert abs(WL - WL.T).max() < 1e-12 * abs(WL).max()


# ------------------------------------------------------- the (1, 300, 10) state
def test_accuracy_state_converged(accuracy_state):
    s = accuracy_state
    assert (s.lam, s.g, s.kappa) == (1.0, 300.0, 10)
    assert s.norm() == pytest.approx(1.0, abs=1e-12)
    assert s.residual() < 1e-10
    assert np.all(s.f >= 0)
    # mu = E + (g/2) int |Psi|^4, E from the gradient form
    assert s.mu == pytest.approx(s.energy() + 0.5 * s.g * quartic(s), rel=1e-6)
    # the Thomas-Fermi estimate is below; Richardson's extrapolation from h
    # and h/2 is 13.44948, and the default resolution is within 1e-4 of it
    # (measured 2.4e-5)
    assert thomas_fermi_mu(1.0, 300.0, 10) < s.mu
    assert extrapolated_mu(s) == pytest.approx(MU_EXTRAPOLATED[1.0, 300.0, 10], abs=5e-6)
    assert s.mu == pytest.approx(MU_EXTRAPOLATED[1.0, 300.0, 10], rel=1e-4)
    # the edge of the grid is in the tail: f < 1e-7 max f there
    assert s.f[-1].max() < 1e-7 * s.f.max() and s.f[:, -1].max() < 1e-7 * s.f.max()


def test_accuracy_state_has_a_vortex_core(accuracy_state):
    s = accuracy_state
    z = np.linspace(-3, 3, 13)
    assert np.all(s.f_at(0.0, z) == 0.0)
    # f ~ rho^kappa near the axis, a ring of density about rho ~ sqrt(kappa)
    r = np.array([0.01, 0.02])
    v = s.f_at(r, 0.0)
    assert v[1] / v[0] == pytest.approx(2.0 ** 10, rel=1e-9)
    k, j = np.unravel_index(np.argmax(s.f), s.f.shape)
    assert j == 0 and 2.5 < s.rho[k] < 4.5
    # even in z; the interpolant reproduces the nodes
    assert s.f_at(2.7, -1.3) == s.f_at(2.7, 1.3)
    R, Z = np.meshgrid(s.rho, s.z, indexing="ij")
    assert np.allclose(s.f_at(R, Z), s.f, rtol=0, atol=1e-14)
    assert s.f_at(s.rho_edge + 0.1, 0.0) == 0.0 and s.f_at(3.0, s.z_edge + 0.1) == 0.0


def test_accuracy_state_cuboid(accuracy_state):
    s = accuracy_state
    eps = 1e-5
    lo, hi = s.cuboid(eps)
    assert np.array_equal(lo, -hi) and hi[0] == hi[1]
    a, c = hi[0], hi[2]
    assert a < s.rho_edge and c < s.z_edge
    # it holds the bulk: the norm outside is below eps^2 of the whole, ...
    W = s.weights()
    inside = (s.rho[:, None] <= a) & (s.z[None, :] <= c)
    assert np.sum((W * s.f ** 2)[~inside]) < 1e-8
    # ... |Psi| <= eps max|Psi| outside, and it is the smallest such cuboid
    thr = eps * s.f.max()
    assert s.f[s.rho > a].max() <= thr and s.f[:, s.z > c].max() <= thr
    assert s.f[s.rho > a - s.h].max() > thr and s.f[:, s.z > c - s.h].max() > thr
    assert 6.5 < a < 8.5 and 4.5 < c < 6.5
    # a smaller eps widens it
    assert np.all(s.cuboid(1e-7)[1] > hi)


def test_accuracy_state_wave_function(accuracy_state):
    s = accuracy_state
    # the phase winds by 2 pi kappa around the axis
    phi = np.linspace(0.0, 2 * np.pi, 401)
    ring = np.stack([3.2 * np.cos(phi), 3.2 * np.sin(phi), np.full_like(phi, 0.4)], axis=-1)
    psi = s(ring)
    assert psi.dtype == np.complex128 and psi.shape == (401,)
    winding = np.sum(np.angle(psi[1:] / psi[:-1])) / (2 * np.pi)
    assert winding == pytest.approx(10.0, abs=1e-9)
    assert np.allclose(np.abs(psi), s.f_at(3.2, 0.4), rtol=1e-12)
    # Psi(t) = Psi(0) exp(-i mu t); grids of any shape (..., 3)
    assert np.allclose(s(ring, t=0.3), psi * np.exp(-0.3j * s.mu))
    x = np.linspace(-4, 4, 5)
    P = np.stack(np.meshgrid(x, x, [0.5], indexing="ij"), axis=-1)
    assert s(P).shape == (5, 5, 1)
    assert np.allclose(s.potential(P), 0.5 * (P[..., 0] ** 2 + P[..., 1] ** 2 + P[..., 2] ** 2))
    assert s.potential([[1.0, 2.0, 3.0]]) == pytest.approx([0.5 * 14.0])


def test_anisotropic_trap_state():
    # source 001, Fig. 4: lam = 0.1, g = 5000, kappa = 10
    s = vortex_state(0.1, 5000.0, 10)
    assert s.norm() == pytest.approx(1.0, abs=1e-12)
    assert s.residual() < 1e-10
    assert s.mu == pytest.approx(s.energy() + 0.5 * s.g * quartic(s), rel=1e-6)
    # within 1e-4 of the extrapolated mu (measured 1.8e-5), which
    # test_anisotropic_trap_state_extrapolated derives
    assert s.mu == pytest.approx(MU_EXTRAPOLATED[0.1, 5000.0, 10], rel=1e-4)
    lo, hi = s.cuboid()
    assert hi[2] > 3 * hi[0]  # a cigar along z
    assert s.potential([[0.0, 0.0, 10.0]]) == pytest.approx([0.5])


@pytest.mark.slow
def test_anisotropic_trap_state_extrapolated():
    """MU_EXTRAPOLATED of the Fig. 4 state: Richardson's extrapolation from
    the default h and h/2 (15 s on 2 cores)."""
    s = vortex_state(0.1, 5000.0, 10)
    assert extrapolated_mu(s) == pytest.approx(MU_EXTRAPOLATED[0.1, 5000.0, 10], abs=5e-6)


@pytest.mark.slow
def test_anisotropic_trap_kappa_20():
    s = vortex_state(0.1, 5000.0, 20)
    assert s.residual() < 1e-10
    assert s.mu == pytest.approx(s.energy() + 0.5 * s.g * quartic(s), rel=1e-6)
    assert s.f_at(0.0, 0.0) == 0.0
    s2 = vortex_state(0.1, 5000.0, 20, h=0.5 * s.h)
    assert s.mu == pytest.approx(s2.mu, rel=1e-4)


def test_examples_forward():
    a = examples.vortex_state(1.0, 50.0, 1, h=0.2)
    b = vortex_state(1.0, 50.0, 1, h=0.2)
    assert isinstance(a, VortexState) and a.mu == b.mu
    assert "vortex_state" in examples.__all__


def test_constructor_checks_the_grid(accuracy_state):
    s = accuracy_state
    again = VortexState(s.lam, s.g, s.kappa, s.mu, s.rho, s.z, s.f)
    assert again.h == pytest.approx(s.h) and again.residual() == pytest.approx(s.residual())
    with pytest.raises(ValueError, match="shape"):
        VortexState(s.lam, s.g, s.kappa, s.mu, s.rho, s.z, s.f[:-1])
    with pytest.raises(ValueError, match="grid"):
        VortexState(s.lam, s.g, s.kappa, s.mu, s.rho + 0.01, s.z, s.f)


# ------------------------------------------------------------- bad arguments
@pytest.mark.parametrize("kwargs, exc, name", [
    (dict(lam=0.0), ValueError, "lam"),
    (dict(lam=-1.0), ValueError, "lam"),
    (dict(lam=float("inf")), ValueError, "lam"),
    (dict(lam=float("nan")), ValueError, "lam"),
    (dict(lam="1"), TypeError, "lam"),
    (dict(g=-1.0), ValueError, "g"),
    (dict(g=float("inf")), ValueError, "g"),
    (dict(kappa=1.5), TypeError, "kappa"),
    (dict(kappa=True), TypeError, "kappa"),
    (dict(kappa=-1), ValueError, "kappa"),
    (dict(h=0.0), ValueError, "h"),
    (dict(h=-0.1), ValueError, "h"),
    (dict(h=5.0), ValueError, "h"),
    (dict(rho_max=-1.0), ValueError, "rho_max"),
    (dict(tol=0.0), ValueError, "tol"),
    (dict(max_iter=0), ValueError, "max_iter"),
])
def test_bad_arguments(kwargs, exc, name):
    with pytest.raises(exc, match=name):
        vortex_state(**kwargs)


def test_bad_evaluation_arguments():
    s = vortex_state(1.0, 10.0, 1, h=0.25)
    with pytest.raises(ValueError, match="positions"):
        s(np.zeros((4, 2)))
    with pytest.raises(ValueError, match="positions"):
        s.potential(1.0)
    for eps in (0.0, 1.0, -1e-5):
        with pytest.raises(ValueError, match="eps"):
            s.cuboid(eps)


def test_unconverged_raises():
    with pytest.raises(RuntimeError, match="converge"):
        vortex_state(1.0, 300.0, 10, h=0.2, max_iter=1)


def test_needs_scipy(monkeypatch):
    monkeypatch.setitem(sys.modules, "scipy.sparse", None)
    with pytest.raises(ImportError, match="vortex_state needs scipy: pip install scipy"):
        vortex_state(1.0, 0.0, 0, h=0.25)
