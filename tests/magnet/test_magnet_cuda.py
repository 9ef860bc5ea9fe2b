"""CPU / CUDA agreement of nl.CoaxialMagnet (skipped without a CUDA device, and
while the CUDA extension does not list the model in its MODELS).

The CUDA backend runs the rows of Table 2.1 on the same colour-reordered
layout with the same update formula; red-black SOR, Jacobi and the
row-order Gauss-Seidel and SOR (swept one anti-diagonal at a time, which
reproduces the row order exactly) follow the CPU iteration for iteration
(the residual sums differ in order only), and
the multigrid and mg-cg use the same hierarchy (the same Galerkin product,
evaluated on the device) with four-colour Gauss-Seidel on the coarse levels
(and on the explicit fine level of mg-cg's preconditioner) instead of the
CPU's red-black order, so they converge to the same discrete solution in a
similar number of iterations.
"""

import numpy as np
import pytest

import nlsepy as nl

pytestmark = pytest.mark.skipif("cuda" not in nl.backends("CoaxialMagnet"),
                                reason="needs the CUDA backend and a CUDA device")


def pair(h=0.025, **kw):
    return [nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.0, h, backend=b, **kw) for b in ("cpu", "cuda")]


@pytest.mark.parametrize("method", ["rbsor", "jacobi", "gauss-seidel", "sor"])
def test_iterations_match_the_cpu(method):
    a, b = pair(0.05)
    sa = a.solve(method, tol=1e-10, max_iter=100000)
    sb = b.solve(method, tol=1e-10, max_iter=100000)
    assert sa.converged and sb.converged
    assert sa.iterations == sb.iterations
    np.testing.assert_allclose(sb.history, sa.history, rtol=1e-9, atol=1e-13 * sa.history.max())
    scale = np.nanmax(np.abs(sa.phi))
    assert np.array_equal(np.isnan(sa.phi), np.isnan(sb.phi))
    assert np.nanmax(np.abs(sa.phi - sb.phi)) < 1e-10 * scale


def check_same_solution(method, spread):
    """`method` on the CPU and on the device reaches the same solution.

    At h = 0.0125 and tol = 1e-11 both converge, within `spread` iterations
    of each other, to Phi within 1e-10 of its largest value.

    Parameters
    ----------
    method : str
        The solver method.
    spread : int
        The largest difference of the iteration counts.
    """
    a, b = pair(0.0125)
    sa = a.solve(method, tol=1e-11, max_iter=100)
    sb = b.solve(method, tol=1e-11, max_iter=100)
    assert sa.converged and sb.converged
    assert abs(sa.iterations - sb.iterations) <= spread
    scale = np.nanmax(np.abs(sa.phi))
    assert np.nanmax(np.abs(sa.phi - sb.phi)) < 1e-10 * scale


def test_multigrid_reaches_the_same_solution():
    check_same_solution("multigrid", spread=3)


def test_cycle_count_is_flat_on_the_device():
    counts = [nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.0, h, backend="cuda")
              .solve("multigrid", tol=0.5e-6, max_iter=50).iterations
              for h in (0.025, 0.0125, 0.00625)]
    assert max(counts) <= 1.3 * min(counts), counts


def test_dirichlet_data_on_the_device():
    g = lambda r, z: r * r - 2 * z * z  # noqa: E731
    mag = nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.5, 0.025, backend="cuda")
    for method in ("rbsor", "multigrid", "mg-cg"):
        sol = mag.solve(method, tol=1e-11, boundary_values=g, max_iter=100000)
        rr, zz = np.meshgrid(mag.r, mag.z, indexing="ij")
        assert np.nanmax(np.abs(sol.phi - g(rr, zz))) < 1e-8, method


def test_float_on_the_device():
    a = nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.0, 0.025, backend="cpu").solve("rbsor", tol=1e-8)
    b = nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.0, 0.025, dtype=np.float32,
                         backend="cuda").solve("rbsor", tol=1e-4)
    assert b.converged
    assert np.nanmax(np.abs(a.phi - b.phi)) < 1e-4 * np.nanmax(np.abs(a.phi))


def test_mgcg_reaches_the_same_solution():
    """BiCGSTAB preconditioned by a V-cycle, on the device: the CPU's solution
    to 1e-10 in a similar number of iterations (the device's V-cycle smooths
    in four colours, the CPU's in two)."""
    check_same_solution("mg-cg", spread=2)


