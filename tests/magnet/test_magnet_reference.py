"""Tests of nlsepy.reference.magnet: the finite-difference rows of source 002
(Table 2.1) against exact axisymmetric harmonic functions, the solvers
against a direct solve, and the omega estimate against Tables A.1 and A.2."""

import math

import numpy as np
import pytest

from nlsepy.reference import magnet as rl


def j0(x):
    """Bessel J0 by its power series (|x| <= 6 here: the terms stay below 1e2)."""
    x = np.asarray(x, dtype=float)
    term = np.ones_like(x)
    s = term.copy()
    for m in range(1, 40):
        term = term * (-(x / 2) ** 2) / (m * m)
        s = s + term
    return s


def test_series_j0_matches_known_values():
    # J0(1), J0(2.404825557695773) (first zero), J0(5)
    vals = j0(np.array([1.0, 2.404825557695773, 5.0]))
    assert vals[0] == pytest.approx(0.7651976865579666, abs=1e-14)
    assert abs(vals[1]) < 1e-14
    assert vals[2] == pytest.approx(-0.1775967713143383, abs=1e-13)


@pytest.mark.parametrize("dr,dz", [(0.1, 0.1), (0.1, 0.05)])
def test_r2_minus_2z2_is_reproduced(dr, dz):
    """Phi = r^2 - 2 z^2 is harmonic and the five-point rows (eq. 2.18, 2.28)
    are exact on it: the discrete solution equals it at every node."""
    g = lambda r, z: r * r - 2 * z * z  # noqa: E731
    st = rl.dirichlet_stencil(1.0, 1.5, dr, dz, g)
    r, z = rl.grid(*st.shape, dr, dz)
    exact = g(r, z)
    phi = rl.solve_dense(st)
    assert np.abs(phi - exact).max() < 1e-11
    assert rl.rel_residual(st, exact) < 1e-13
    res = rl.red_black_sor(st, rl.omega_estimate(1.0, 1.5, dr, dz), tol=1e-10)
    assert res.converged
    assert np.abs(res.phi - exact).max() < 1e-8


def test_bessel_sinh_converges_at_second_order():
    """Phi = J0(k r) sinh(k z) with Dirichlet data: the error falls as h^2."""
    k = 2.0
    g = lambda r, z: j0(k * r) * np.sinh(k * z)  # noqa: E731
    errs = []
    hs = [0.1, 0.05, 0.025]
    for h in hs:
        st = rl.dirichlet_stencil(2.0, 1.0, h, h, g)
        r, z = rl.grid(*st.shape, h, h)
        res = rl.red_black_sor(st, rl.omega_estimate(2.0, 1.0, h), tol=1e-12, max_iter=20000)
        assert res.converged
        errs.append(np.abs(res.phi - g(r, z)).max())
    orders = [math.log(errs[q] / errs[q + 1]) / math.log(2) for q in range(2)]
    assert all(abs(p - 2.0) < 0.2 for p in orders), (errs, orders)


def magnet(h=0.05, r1=1.0, z1=1.0):
    return rl.coaxial_stencil(0.25, 0.5, r1, z1, h, B=1e-3)


def test_magnet_rows_follow_table_2_1():
    st = magnet(0.05)
    g = 1.0
    cap = -2 * g * 1e-3 * 0.05 / rl.MU0
    i0, j0, i1, j1 = 5, 10, 20, 20
    # interior: eq. 2.18 with alpha = 1/(2i)
    assert (st.a[7, 12], st.b[7, 12], st.c[7, 12], st.d[7, 12], st.e[7, 12]) == \
        pytest.approx((1 + 1 / 14, 1 - 1 / 14, g, g, -2 * (1 + g)))
    # boundary 3 (axis), A, B, C, D corners and the cap
    assert (st.a[0, 15], st.c[0, 15], st.d[0, 15], st.e[0, 15]) == pytest.approx((4, g, g, -2 * (2 + g)))
    assert (st.a[0, j1], st.c[0, j1], st.d[0, j1], st.e[0, j1]) == pytest.approx((4, 0, 2 * g, -2 * (2 + g)))
    assert (st.a[i1, j1], st.b[i1, j1], st.c[i1, j1], st.d[i1, j1]) == pytest.approx((0, 2, 0, 2 * g))
    assert (st.a[0, j0], st.c[0, j0], st.d[0, j0], st.f[0, j0]) == pytest.approx((4, 2 * g, 0, cap))
    assert (st.a[i0, j0], st.b[i0, j0], st.c[i0, j0], st.d[i0, j0], st.f[i0, j0]) == \
        pytest.approx((2, 0, 2 * g, 0, cap))
    assert (st.c[3, j0], st.d[3, j0], st.f[3, j0]) == pytest.approx((2 * g, 0, cap))
    # boundary 5 (side), boundary 2 (outer), boundary 1 (top)
    assert (st.a[i0, 4], st.b[i0, 4]) == pytest.approx((2, 0))
    assert (st.a[i1, 7], st.b[i1, 7]) == pytest.approx((0, 2))
    assert (st.c[9, j1], st.d[9, j1]) == pytest.approx((0, 2 * g))
    # boundary 6 and the magnet's interior are not unknowns
    assert not st.active[i0:, 0].any() and not st.active[:i0, :j0].any()
    assert st.active.sum() == 21 * 21 - 5 * 10 - 16


def test_solvers_agree_on_the_magnet_problem():
    st = magnet(0.05)
    exact = rl.solve_dense(st)
    omega = rl.omega_estimate(1.0, 1.0, 0.05)
    sor = rl.red_black_sor(st, omega, tol=1e-10)
    gs = rl.red_black_sor(st, 1.0, tol=1e-10, max_iter=50000)
    jac = rl.jacobi(st, tol=1e-10, max_iter=200000)
    scale = np.nanmax(np.abs(exact))
    for res in (sor, gs, jac):
        assert res.converged
        assert np.nanmax(np.abs(res.phi - exact)) < 1e-7 * scale
        assert np.array_equal(np.isnan(res.phi), np.isnan(exact))
    assert sor.iterations * 5 < gs.iterations < jac.iterations
    # the history is the stopping quantity of eq. 2.50 and ends below tol
    assert sor.history[-1] == sor.residual < 1e-10


def test_cap_condition_and_sign():
    """dPhi/dz = -B/mu0 at the cap (Table 1.1): Phi falls upwards from the cap
    near the axis, and the one-sided slope approaches -B/mu0."""
    h = 0.025
    st = rl.coaxial_stencil(0.25, 0.5, 1.0, 1.0, h, B=1e-3)
    phi = rl.solve_dense(st)
    j0 = 20
    slope = (phi[0, j0 + 1] - phi[0, j0]) / h
    assert slope < 0
    assert slope == pytest.approx(-1e-3 / rl.MU0, rel=0.1)


@pytest.mark.parametrize("n,h,rho,omega", [
    (1.0, 0.01, 0.99994516, 1.97927172), (2.0, 0.01, 0.99998629, 1.98958176),
    (3.0, 0.01, 0.99999390, 1.99303862), (4.0, 0.01, 0.99999657, 1.99477536),
    (1.0, 0.0025, 0.99999657, 1.99477536), (2.0, 0.0025, 0.99999914, 1.99738046),
    (3.0, 0.0025, 0.99999961, 1.99823520), (4.0, 0.0025, 0.99999978, 1.99867422),
])
def test_omega_estimate_reproduces_tables_a1_a2(n, h, rho, omega):
    """Tables A.1 and A.2 print rho of eq. A.1 to 8 decimals (truncated) and
    omega_b of eq. 2.44 computed from that printed rho; the estimate from the
    unrounded rho agrees with the printed omega to three decimals."""
    assert rl.rho_jacobi(n, n, h) == pytest.approx(rho, abs=1.01e-8)
    assert rl.omega_from_rho(rho) == pytest.approx(omega, abs=1e-8)
    assert round(rl.omega_estimate(n, n, h), 3) == round(omega, 3)


@pytest.mark.parametrize("kw,match", [
    (dict(r0=0.5, z0=0.5, r1=0.5, z1=1.0, dr=0.05), "r0 = 0.5 must be smaller than r1"),
    (dict(r0=0.25, z0=1.0, r1=1.0, z1=1.0, dr=0.05), "z0 = 1.0 must be smaller than z1"),
    (dict(r0=0.26, z0=0.5, r1=1.0, z1=1.0, dr=0.05), "r0 = 0.26 must be a whole number"),
    (dict(r0=0.25, z0=0.5, r1=1.0, z1=1.0, dr=-0.05), "dr must be a finite number > 0"),
    (dict(r0=0.25, z0=0.5, r1=1.0, z1=1.0, dr=0.05, B=float("nan")), "B must be finite"),
])
def test_bad_geometry_is_named(kw, match):
    with pytest.raises(ValueError, match=match):
        rl.coaxial_stencil(**kw)
