"""Tests of nl.CoaxialMagnet (source 002: the axisymmetric Laplace problem of
magnet design): exact harmonic functions, convergence order, agreement of
the solvers with each other and with the NumPy statement of Table 2.1
(nlsepy.reference.magnet), the omega estimate, float vs double, bad input."""

import math
import sys
import warnings

import numpy as np
import pytest

import nlsepy as nl
from nlsepy.reference import magnet as rl

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from test_magnet_reference import j0  # noqa: E402

METHODS = ["jacobi", "gauss-seidel", "sor", "rbsor", "multigrid", "mg-cg"]


@pytest.mark.parametrize("method", METHODS)
def test_r2_minus_2z2_is_reproduced_to_tolerance(method):
    """Phi = r^2 - 2 z^2 is harmonic and exact for the five-point rows: with
    its values on every boundary but the axis, each solver reproduces it to
    the solver tolerance."""
    mag = nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.5, (0.05, 0.05))
    g = lambda r, z: r * r - 2 * z * z  # noqa: E731
    sol = mag.solve(method, tol=1e-11, boundary_values=g)
    assert sol.converged
    rr, zz = np.meshgrid(mag.r, mag.z, indexing="ij")
    exact = np.where(np.isnan(sol.phi), np.nan, g(rr, zz))
    assert np.nanmax(np.abs(sol.phi - exact)) < 1e-8 * np.nanmax(np.abs(exact))


def test_bessel_sinh_converges_at_second_order():
    """Phi = J0(k r) sinh(k z) (harmonic, dPhi/dr = 0 on the axis, Phi = 0 on
    z = 0) with Dirichlet data: the error falls as h^2 (order 2 +- 0.2)."""
    g = lambda r, z: j0(2.0 * r) * np.sinh(2.0 * z)  # noqa: E731
    errs = []
    for h in (0.05, 0.025, 0.0125):
        mag = nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.0, h)
        sol = mag.solve("rbsor", tol=1e-12, boundary_values=g)
        rr, zz = np.meshgrid(mag.r, mag.z, indexing="ij")
        errs.append(np.nanmax(np.abs(sol.phi - g(rr, zz))))
    orders = [math.log2(errs[q] / errs[q + 1]) for q in range(2)]
    assert all(abs(p - 2.0) < 0.2 for p in orders), (errs, orders)


def test_all_solvers_reach_the_discrete_solution():
    """Every solver reaches the direct solution of Table 2.1's system; SOR at
    the estimated omega needs far fewer iterations than Gauss-Seidel."""
    mag = nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.0, 0.05, B=1e-3)
    exact = rl.solve_dense(rl.coaxial_stencil(0.25, 0.5, 1.0, 1.0, 0.05, B=1e-3))
    scale = np.nanmax(np.abs(exact))
    sols = {m: mag.solve(m, tol=1e-10) for m in METHODS}
    for m, sol in sols.items():
        assert sol.converged, m
        assert np.array_equal(np.isnan(sol.phi), np.isnan(exact))
        assert np.nanmax(np.abs(sol.phi - exact)) < 2e-8 * scale, m
    assert sols["sor"].iterations * 10 < sols["gauss-seidel"].iterations
    assert sols["rbsor"].iterations * 10 < sols["gauss-seidel"].iterations
    assert sols["gauss-seidel"].iterations < sols["jacobi"].iterations
    assert sols["multigrid"].iterations < 20


def test_multigrid_cycle_count_is_flat_under_refinement():
    """V-cycles to tol = 0.5e-6 on h, h/2, h/4 differ by at most 30%, and the
    magnet's edges fall between coarse grid lines on the finer grids
    (r0 / h = 5, 10, 20 nodes: odd after one, two and three halvings)."""
    counts = []
    for h in (0.05, 0.025, 0.0125):
        sol = nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.0, h).solve("multigrid", tol=0.5e-6)
        assert sol.converged
        counts.append(sol.iterations)
    assert max(counts) <= 1.3 * min(counts), counts


def test_multigrid_with_dirichlet_data_and_restart():
    g = lambda r, z: r * r - 2 * z * z  # noqa: E731
    mag = nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.5, 0.025)
    sol = mag.solve("multigrid", tol=1e-11, boundary_values=g)
    rr, zz = np.meshgrid(mag.r, mag.z, indexing="ij")
    assert np.nanmax(np.abs(sol.phi - g(rr, zz))) < 1e-8
    plain = mag.solve("multigrid", tol=1e-8)
    assert mag.solve("multigrid", tol=1e-8, phi0=plain.phi).iterations <= 1


def test_rbsor_follows_algorithm_2_step_by_step():
    """The C red-black SOR and the NumPy statement of Algorithm 2 give the same
    residual history (the stopping quantity of eq. 2.50) at every iteration."""
    mag = nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.0, 0.05, B=2e-3, backend="cpu")  # the C code
    omega = mag.omega_estimate()
    sol = mag.solve("rbsor", tol=1e-9, omega=omega)
    ref = rl.red_black_sor(rl.coaxial_stencil(0.25, 0.5, 1.0, 1.0, 0.05, B=2e-3), omega, tol=1e-9)
    assert sol.iterations == ref.iterations
    # same operations in another order: the histories agree to the rounding
    # of the residual sums, ~1e-15 against a first ||r||/||f|| of order 1
    np.testing.assert_allclose(sol.history, ref.history, rtol=1e-10,
                               atol=1e-13 * ref.history.max())
    np.testing.assert_allclose(sol.phi, ref.phi, rtol=1e-12, atol=1e-12 * np.nanmax(np.abs(ref.phi)))


def test_omega_estimate_is_the_sources():
    for n, want in ((1.0, 1.97927172), (2.0, 1.98958176), (4.0, 1.99477536)):
        mag = nl.CoaxialMagnet(0.25, 0.5, n, n, 0.01)
        assert round(mag.omega_estimate(), 3) == round(want, 3)
        assert mag.omega_estimate() == pytest.approx(rl.omega_estimate(n, n, 0.01), rel=1e-15)


def test_float_agrees_with_double():
    """float32 Phi carries a rounding error of ~6e-8 |Phi| per node, which
    puts a floor of a few 1e-5 under ||r||/||f|| on this grid: float solves
    to 1e-4 and then matches double to single precision."""
    a = nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.0, 0.025).solve("rbsor", tol=1e-8)
    b = nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.0, 0.025, dtype=np.float32).solve("rbsor", tol=1e-4)
    assert a.converged and b.converged
    assert np.nanmax(np.abs(a.phi - b.phi)) < 1e-4 * np.nanmax(np.abs(a.phi))


def test_not_converged_is_flagged_and_warned():
    mag = nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.0, 0.05)
    with pytest.warns(nl.ConvergenceWarning, match="max_iter = 5"):
        sol = mag.solve("jacobi", tol=1e-10, max_iter=5)
    assert not sol.converged and sol.iterations == 5 and len(sol.history) == 5
    assert sol.residual == sol.history[-1] > 1e-10
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not mag.solve("jacobi", tol=1e-10, max_iter=5, warn=False).converged


def test_updates_per_second_counts_node_updates():
    """MagnetSolution.updates_per_second: unknowns times iterations over the
    solve's own seconds (the rate bench/magnet.py reports)."""
    mag = nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.0, 0.05, backend="cpu")
    sol = mag.solve("rbsor", tol=1e-6)
    assert sol.solve_seconds > 0 and sol.iterations > 1
    assert sol.updates_per_second == pytest.approx(
        mag.unknowns * sol.iterations / sol.solve_seconds, rel=1e-12)
    again = mag.solve("rbsor", tol=1e-6, max_iter=sol.iterations // 2, warn=False)
    assert again.updates_per_second == pytest.approx(
        mag.unknowns * again.iterations / again.solve_seconds, rel=1e-12)


def test_restart_from_a_previous_solution():
    mag = nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.0, 0.05)
    first = mag.solve("rbsor", tol=1e-6)
    again = mag.solve("rbsor", tol=1e-6, phi0=first.phi)
    assert again.iterations < first.iterations / 5


@pytest.mark.parametrize("kw,exc,match", [
    (dict(r0=0.5, z0=0.5, r1=0.5, z1=1.0, h=0.05), ValueError, "r0 = 0.5 must be smaller than r1"),
    (dict(r0=0.25, z0=1.0, r1=1.0, z1=1.0, h=0.05), ValueError, "z0 = 1 must be smaller than z1"),
    (dict(r0=0.26, z0=0.5, r1=1.0, z1=1.0, h=0.05), ValueError, "r0 = 0.26 must be a whole number"),
    (dict(r0=0.25, z0=0.5, r1=1.0, z1=1.0, h=0.0), ValueError, "h must be finite and > 0"),
    (dict(r0=-0.25, z0=0.5, r1=1.0, z1=1.0, h=0.05), ValueError, "r0 must be finite and > 0"),
    (dict(r0=0.25, z0=0.5, r1=1.0, z1=1.0, h=(0.05,)), ValueError, "h must be a spacing or"),
    (dict(r0=0.25, z0=0.5, r1=1.0, z1=1.0, h=0.05, B=float("inf")), ValueError, "B must be finite"),
    (dict(r0=0.25, z0=0.5, r1=1.0, z1=1.0, h=0.05, dtype=np.int32), TypeError, "dtype must be"),
])
def test_bad_problems_are_named(kw, exc, match):
    with pytest.raises(exc, match=match):
        nl.CoaxialMagnet(**kw)


@pytest.mark.parametrize("kw,match", [
    (dict(method="multigrid-x"), "method must be one of"),
    (dict(method="sor", omega=2.0), r"omega must be in \(0, 2\), got 2.0"),
    (dict(method="rbsor", omega=0.0), r"omega must be in \(0, 2\), got 0.0"),
    (dict(method="jacobi", omega=1.5), "omega applies to 'sor' and 'rbsor'"),
    (dict(tol=0.0), "tol must be finite and > 0"),
    (dict(tol=float("nan")), "tol must be finite and > 0"),
    (dict(max_iter=0), "max_iter must be an integer >= 1"),
    (dict(phi0=np.zeros((3, 3))), r"phi0 must have shape \(21, 21\)"),
    (dict(boundary_values=np.zeros((3, 3))), r"boundary_values must have shape \(21, 21\)"),
])
def test_bad_solve_arguments_are_named(kw, match):
    mag = nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.0, 0.05)
    with pytest.raises(ValueError, match=match):
        mag.solve(**kw)


def test_non_finite_boundary_values_are_rejected():
    mag = nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.0, 0.05)
    bad = np.zeros(mag.shape)
    bad[20, 5] = np.inf
    with pytest.raises(ValueError, match=r"boundary values must be finite, got inf at node \(20, 5\)"):
        mag.solve(boundary_values=bad)


def test_solution_gives_jump_winding_and_field():
    mag = nl.CoaxialMagnet(0.25, 0.5, 2.0, 2.0, 0.025, B=8e-3)
    sol = mag.solve("multigrid", tol=1e-8)
    d = sol.delta_phi()
    assert d["side"][0] == pytest.approx(0.0, abs=1e-9 * np.abs(d["side"]).max())
    assert d["side"][-1] == pytest.approx(d["cap"][-1], rel=1e-12)  # the corner node
    w = sol.winding(10)
    assert len(w.z_side) + len(w.r_cap) == 10
    assert w.current == pytest.approx(w.total_current / 10)
    # more wires: closer to the target field at the centre (Figs 6.15, 6.16)
    e10 = abs(sol.field_inside(10, z=np.array([0.0]))["normalized"][0])
    e40 = abs(sol.field_inside(40, z=np.array([0.0]))["normalized"][0])
    assert e40 < e10
    assert 0 < sol.homogeneity(40) < 0.05


def test_convergence_study_shrinks_the_changes():
    mag = nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.0, 0.05)
    st = mag.convergence_study(sizes=(1.0, 2.0, 3.0), spacings=(0.05, 0.025, 0.0125))
    sz, sp = st["size"], st["spacing"]
    assert [r["size"] for r in sz] == [1.0, 2.0, 3.0] and sz[0]["change"] is None
    assert sz[2]["change"] < sz[1]["change"]
    assert sp[2]["change"] < sp[1]["change"]
    assert all(r["converged"] for r in sz + sp)


def test_plot_draws_phi_and_wires():
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    sol = nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.0, 0.05).solve()
    fig = sol.plot(n_turns=8)
    assert fig.axes[0].collections  # contours and wire markers were drawn


def test_all_solvers_agree_on_the_thesis_geometry():
    """The thesis problem's geometry (r0 = 0.25 m, z0 = 0.5 m, r1 = z1 = 4 m)
    on a coarse mesh: every solver reaches the same Phi."""
    mag = nl.CoaxialMagnet(0.25, 0.5, 4.0, 4.0, 0.125, B=1e-3)
    ref = mag.solve("multigrid", tol=1e-12, max_iter=100)
    scale = np.nanmax(np.abs(ref.phi))
    for method in METHODS:
        sol = mag.solve(method, tol=1e-11, max_iter=2_000_000)
        assert sol.converged, method
        assert np.nanmax(np.abs(sol.phi - ref.phi)) < 1e-8 * scale, method
