"""Safety of nl.CoaxialMagnet: Ctrl-C during a solve, parameters that cannot
drift from the solver, memory counted before it is taken."""

import time

import numpy as np
import pytest

import nlsepy as nl
from nlsepy.common import guard as _guard
from nlsepy.magnet import post

from _helpers import LATENCY_BOUND, finishes_within, sigint_during

STATIONARY = ["jacobi", "gauss-seidel", "sor", "rbsor", "multigrid"]
GiB = 1 << 30


def small(backend="cpu", **kw):
    return nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.0, 0.05, backend=backend, **kw)


def interrupted_solve(mag, method, after=0.4, **kw):
    """Solve until a SIGINT from a timer thread stops it; return the seconds
    from the signal to the KeyboardInterrupt and the partial solution."""
    delay = sigint_during(lambda: mag.solve(method, tol=1e-300, max_iter=3_000_000, **kw),
                          after, "solve")
    return delay, mag.partial_solution


def check_partial(part, method):
    assert part is not None and part.interrupted and not part.converged
    assert part.method == method
    assert 0 < part.iterations < 3_000_000
    assert part.history.shape == (part.iterations,)
    assert part.residual == part.history[-1]


@pytest.mark.parametrize("method", STATIONARY)
def test_sigint_stops_a_solve_within_a_second_and_keeps_its_iterations(method):
    """SIGINT during solve(method, max_iter=3e6) raises KeyboardInterrupt
    within a second; the partial solution's Phi, iteration count and history
    are those of an uninterrupted solve of that many iterations, bit for bit."""
    mag = small()
    delay, part = interrupted_solve(mag, method)
    assert delay < LATENCY_BOUND
    check_partial(part, method)
    same = mag.solve(method, tol=1e-300, max_iter=part.iterations, warn=False)
    assert same.iterations == part.iterations
    assert np.array_equal(same.history, part.history)
    assert np.array_equal(same.phi, part.phi, equal_nan=True)
    assert mag.partial_solution is None  # the finished solve cleared it


def test_interrupted_jacobi_continues_from_its_potential():
    """A later solve starts afresh from phi0: from the interrupted Phi it
    continues the Jacobi iteration exactly where it stopped."""
    mag = small()
    delay, part = interrupted_solve(mag, "jacobi")
    assert delay < LATENCY_BOUND
    check_partial(part, "jacobi")
    more = mag.solve("jacobi", tol=1e-300, max_iter=500, phi0=part.phi, warn=False)
    whole = mag.solve("jacobi", tol=1e-300, max_iter=part.iterations + 500, warn=False)
    assert np.array_equal(np.concatenate((part.history, more.history)), whole.history)
    assert np.array_equal(more.phi, whole.phi, equal_nan=True)


CUDA = pytest.param("cuda", marks=[
    pytest.mark.cuda, pytest.mark.skipif("cuda" not in nl.backends("CoaxialMagnet"),
                                         reason="needs the CUDA backend and a CUDA device")])


MGCG = nl.magnet.solver.METHODS["mg-cg"]


def calls(solver, sizes, tol=1e-300):
    """mg-cg in C calls of `sizes` iterations: (history, converged, iterations)."""
    hist, conv = [], False
    for k in sizes:
        it, res, conv, h = solver.solve(MGCG, 1.0, tol, k)
        hist.append(h)
        assert it == len(h) and (len(h) == 0 or res == h[-1])
        if conv or it < k:
            break
    h = np.concatenate(hist)
    return h, conv, len(h)


@pytest.mark.parametrize("backend", ["cpu", CUDA])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_mg_cg_in_many_calls_equals_one_call(backend, dtype):
    """The BiCGSTAB iteration stays in the solver between calls: 40
    iterations (the recursive residual falling far below rounding) in calls
    of 1, 1, 2, 3, 5, .. iterations give the residual history and Phi of one
    call, bit for bit, and so does a solve stopping at its tolerance."""
    mag = small(backend, B=2e-3, dtype=dtype)
    for tol, sizes in ((1e-300, (1, 1, 2, 3, 5, 8, 13, 7)), (1e-12, (1, 2, 1, 1, 30))):
        one = mag._core.Magnet(*mag._args)
        h1, c1, n1 = calls(one, (40,), tol)
        many = mag._core.Magnet(*mag._args)
        h2, c2, n2 = calls(many, sizes, tol)
        assert (n1, c1) == (n2, c2) and n1 > 3
        assert np.array_equal(h1, h2)
        assert np.array_equal(one.get_phi(), many.get_phi(), equal_nan=True)
    assert c1 and n1 < 40


@pytest.mark.parametrize("backend", ["cpu", CUDA])
def test_mg_cg_restarts_when_phi_or_the_method_changes(backend):
    """set_phi, restart() and a solve by another method drop the iteration in
    progress: the next mg-cg call begins afresh from the current Phi."""
    mag = small(backend)
    for drop in ("restart", "set_phi", "rbsor"):
        a = mag._core.Magnet(*mag._args)
        a.solve(MGCG, 1.0, 1e-300, 2)
        if drop == "restart":
            a.restart()
        elif drop == "set_phi":
            a.set_phi(a.get_phi())
        else:
            a.solve(nl.magnet.solver.METHODS["rbsor"], 1.5, 1e-300, 1)
        b = mag._core.Magnet(*mag._args)
        b.set_phi(a.get_phi())
        ha, _, _ = calls(a, (3,))
        hb, _, _ = calls(b, (3,))
        assert np.array_equal(ha, hb), drop
        assert np.array_equal(a.get_phi(), b.get_phi(), equal_nan=True), drop


def test_sigint_stops_mg_cg_within_a_second_and_resumes_it():
    """mg-cg on 801 x 801 nodes (tens of ms an iteration; 50 iterations in
    one C call took over a second): SIGINT during solve raises
    KeyboardInterrupt within a second, the partial solution is that of an
    uninterrupted solve of as many iterations, ``resume=True`` finishes it
    as one uninterrupted solve, bit for bit, and a new solve from its Phi
    reaches the uninterrupted answer within the tolerance."""
    mag = nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.0, 0.00125, backend="cpu")  # the CPU's timings
    # mg-cg reaches a zero residual after 78 iterations here, so a fixed delay
    # lands after the end on many cores: the signal goes out after as long as
    # 20 iterations took, about a quarter of the way in on any machine
    start = time.perf_counter()
    mag.solve("mg-cg", tol=1e-300, max_iter=20, warn=False)
    delay, part = interrupted_solve(mag, "mg-cg", after=time.perf_counter() - start)
    assert delay < LATENCY_BOUND
    check_partial(part, "mg-cg")
    n = part.iterations + 3
    done = mag.solve("mg-cg", tol=1e-300, max_iter=n, resume=True, warn=False)
    assert done.iterations == n and not done.interrupted
    assert np.array_equal(done.history[:part.iterations], part.history)
    whole = mag.solve("mg-cg", tol=1e-300, max_iter=n, warn=False)
    assert np.array_equal(done.history, whole.history)
    assert np.array_equal(done.phi, whole.phi, equal_nan=True)
    same = mag.solve("mg-cg", tol=1e-300, max_iter=part.iterations, warn=False)
    assert np.array_equal(same.phi, part.phi, equal_nan=True)
    ref = mag.solve("mg-cg", tol=1e-10)
    again = mag.solve("mg-cg", tol=1e-10, phi0=part.phi)
    assert again.converged and again.residual < 1e-10
    scale = np.nanmax(np.abs(ref.phi))
    np.testing.assert_allclose(again.phi, ref.phi, rtol=0, atol=1e-8 * scale)


@pytest.mark.parametrize("method", ["jacobi", "rbsor", "multigrid"])
def test_resume_finishes_an_interrupted_solve_as_one_solve(method):
    mag = small()
    delay, part = interrupted_solve(mag, method)
    assert delay < LATENCY_BOUND
    n = part.iterations + 50
    done = mag.solve(method, tol=1e-300, max_iter=n, resume=True, warn=False)
    whole = mag.solve(method, tol=1e-300, max_iter=n, warn=False)
    assert done.iterations == whole.iterations == n and done.omega == whole.omega
    assert np.array_equal(done.history, whole.history)
    assert np.array_equal(done.phi, whole.phi, equal_nan=True)


def test_resume_needs_the_interrupted_solve():
    mag = small()
    with pytest.raises(ValueError, match="partial_solution is None"):
        mag.solve("mg-cg", resume=True)
    delay, part = interrupted_solve(mag, "rbsor")
    with pytest.raises(ValueError, match="interrupted 'rbsor' solve, not 'sor'"):
        mag.solve("sor", resume=True)
    with pytest.raises(ValueError, match="omega"):
        mag.solve("rbsor", omega=1.2, resume=True)
    with pytest.raises(ValueError, match="neither phi0 nor boundary_values"):
        mag.solve("rbsor", phi0=part.phi, resume=True)
    assert mag.partial_solution is part  # refused calls keep it
    sol = mag.solve("rbsor", tol=1e-300, max_iter=part.iterations + 1, resume=True, warn=False)
    assert sol.iterations == part.iterations + 1 and mag.partial_solution is None


@pytest.mark.cuda
@pytest.mark.skipif("cuda" not in nl.backends("CoaxialMagnet"),
                    reason="needs the CUDA backend and a CUDA device")
@pytest.mark.parametrize("method", STATIONARY)
def test_sigint_stops_a_cuda_solve(method):
    mag = nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.0, 0.0125, backend="cuda")
    delay, part = interrupted_solve(mag, method, after=0.5)
    assert delay < LATENCY_BOUND
    check_partial(part, method)
    same = mag.solve(method, tol=1e-300, max_iter=part.iterations, warn=False)
    assert np.array_equal(same.history, part.history)
    assert np.array_equal(same.phi, part.phi, equal_nan=True)


def test_chunked_solves_equal_one_call_of_the_c_solver():
    """The chunked iteration gives what one call of the C solver gives."""
    mag = small(B=2e-3)
    for method in STATIONARY:
        sol = mag.solve(method, tol=1e-9, max_iter=100000)
        core = mag._core.Magnet(*mag._args)
        omega = sol.omega if sol.omega is not None else 1.0
        it, res, conv, hist = core.solve(nl.magnet.solver.METHODS[method], omega, 1e-9, 100000)
        assert (sol.iterations, sol.residual, sol.converged) == (it, res, conv), method
        assert np.array_equal(sol.history, hist), method
        assert np.array_equal(sol.phi, core.get_phi(), equal_nan=True), method


def test_history_is_not_preallocated_to_max_iter():
    """max_iter = 1e11 (a 745 GiB history if allocated up front) is only a limit."""
    sol = small().solve("multigrid", max_iter=10**11)
    assert sol.converged and sol.history.shape == (sol.iterations,) and sol.iterations < 20


def test_a_history_that_outgrows_memory_stops_the_solve(monkeypatch):
    mag = small()
    monkeypatch.setattr(_guard, "host_memory_available", lambda: 1 << 20)
    with pytest.raises(MemoryError, match=r"residual history of CoaxialMagnet.solve\('jacobi'\)"
                                          r".*max_iter = 100000000000"):
        mag.solve("jacobi", tol=1e-300, max_iter=10**11)
    part = mag.partial_solution
    assert part.interrupted and part.history.shape == (part.iterations,)
    assert 8 * part.iterations <= 1 << 20


# ----------------------------------------------------------------- parameters

@pytest.mark.parametrize("name", ["r0", "z0", "r1", "z1", "dr", "dz", "B", "dtype", "backend",
                                  "nr", "nz", "i0", "j0"])
def test_every_parameter_is_read_only(name):
    mag = small()
    before = getattr(mag, name)
    with pytest.raises(AttributeError, match=rf"CoaxialMagnet.{name} is read-only.*replace"):
        setattr(mag, name, before)
    with pytest.raises(AttributeError):
        delattr(mag, name)
    assert getattr(mag, name) == before


def test_b_cannot_drift_between_solve_and_winding():
    """mag.B = 2e-3 used to be accepted, the solve using the old B and the
    winding the new one (a total current of 98.17 A instead of 116.77 A)."""
    mag = nl.CoaxialMagnet(0.25, 0.5, 2.0, 2.0, 0.05, B=1e-3)
    with pytest.raises(AttributeError, match=r"mag.replace\(B=...\)"):
        mag.B = 2e-3
    assert mag.B == 1e-3
    one = mag.solve("multigrid", tol=1e-10).winding(20)
    two = mag.replace(B=2e-3).solve("multigrid", tol=1e-10).winding(20)
    assert two.total_current == pytest.approx(2 * one.total_current, rel=1e-8)
    assert np.allclose(two.z_side, one.z_side) and np.allclose(two.r_cap, one.r_cap)


def test_unknown_attributes_are_refused():
    mag = small()
    for name in ("h", "b", "shape", "unknowns", "r"):
        with pytest.raises(AttributeError, match="fixed at construction"):
            setattr(mag, name, 1)


def test_replace_makes_a_new_magnet():
    mag = small(B=2e-3)
    fine = mag.replace(h=0.025)
    assert fine.shape == (41, 41) and fine.B == 2e-3 and mag.shape == (21, 21)
    assert mag.replace(dz=0.025).shape == (21, 41)
    assert mag.replace(dtype=np.float32).dtype is np.float32
    with pytest.raises(TypeError, match="replace"):
        mag.replace(spacing=0.1)
    with pytest.raises(TypeError, match="h or dr/dz"):
        mag.replace(h=0.05, dr=0.05)


def test_solutions_keep_the_parameters_they_were_solved_with():
    mag = small(B=2e-3)
    sol = mag.solve("rbsor", tol=1e-9)
    again = mag.solve("rbsor", tol=1e-9)  # a second solve does not touch the first
    assert np.array_equal(sol.phi, again.phi, equal_nan=True)
    assert sol.delta_phi()["B"] == 2e-3


# ----------------------------------------------------------------- memory

def test_a_30000_squared_grid_is_refused_before_allocating(monkeypatch):
    monkeypatch.setattr(_guard, "host_memory_available", lambda: 8 * GiB)
    with finishes_within(1.0), pytest.raises(
            MemoryError, match=r"CoaxialMagnet on the 30001x30001 grid .*float64\) needs "
                               r"13\.\d GiB.* 8\.0 GiB available; use a coarser grid"):
        nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.0, 1 / 30000, backend="cpu")  # host memory


def test_a_solve_counts_its_method_before_allocating(monkeypatch):
    """The state and the Phi returned fit, the multigrid hierarchy does not:
    the multigrid solve is refused, the magnet stays usable."""
    mag = nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.0, 0.0025, backend="cpu")  # 401 x 401, host memory
    nn = mag.nr * mag.nz
    monkeypatch.setattr(_guard, "host_memory_available", lambda: 20 * nn)
    for method in ("multigrid", "mg-cg"):
        with pytest.raises(MemoryError, match=rf"CoaxialMagnet.solve\('{method}'\) on the "
                                              r"401x401 grid"):
            mag.solve(method)
    sol = mag.solve("rbsor", max_iter=3, warn=False)
    assert sol.iterations == 3
    with pytest.raises(MemoryError, match="jacobi"):  # a new solver and the second copy
        mag.solve("jacobi", max_iter=3, warn=False)


def test_memory_counts_follow_the_solver():
    mag = nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.0, 0.0025, backend="cpu")  # the CPU's buffers
    nn = mag.nr * mag.nz
    plain, _ = mag._memory(None, True, 0)
    assert 16 * nn < plain < 17 * nn  # Phi by colour and the Phi returned
    jac, _ = mag._memory("jacobi", False, 0)
    mg, _ = mag._memory("multigrid", False, 0)
    cg, _ = mag._memory("mg-cg", False, 0)
    assert 8 * nn < jac - 8 * nn < 9 * nn
    assert 17 * nn + 97 * nn / 4 < mg - 8 * nn < 17 * nn + 97 * nn / 2
    colours = 2 * (mag.nr + 2) * (mag.nz // 2 + 2) * 8  # the first Phi of BiCGSTAB
    assert cg - mg == (97 + 64) * nn + colours


def test_winding_of_a_billion_turns_is_refused(monkeypatch):
    sol = small().solve()
    monkeypatch.setattr(_guard, "host_memory_available", lambda: 8 * GiB)
    with finishes_within(1.0):
        with pytest.raises(MemoryError, match=r"winding of n_turns = 1000000000 wires needs "
                                              r"52\.2 GiB.*use fewer turns"):
            sol.winding(10**9)
        with pytest.raises(MemoryError, match="n_turns = 1000000000"):
            sol.field_inside(10**9)


def test_loop_field_in_blocks_equals_one_block(monkeypatch):
    rng = np.random.default_rng(5)
    rad, hgt = rng.uniform(0.2, 0.3, 50), rng.uniform(-0.5, 0.5, 50)
    r, z = rng.uniform(0, 0.19, 300), rng.uniform(-0.4, 0.4, 300)
    br, bz = post.loop_field(rad, hgt, 1.5, r, z)
    for pairs in (1000, 20):  # blocks of points; of points and loops
        monkeypatch.setattr(post, "LOOP_BLOCK_PAIRS", pairs)
        br2, bz2 = post.loop_field(rad, hgt, 1.5, r, z)
        np.testing.assert_allclose(br2, br, rtol=1e-12, atol=1e-12 * np.abs(br).max())
        np.testing.assert_allclose(bz2, bz, rtol=1e-12)


def test_loop_field_refuses_what_does_not_fit(monkeypatch):
    monkeypatch.setattr(_guard, "host_memory_available", lambda: 1 << 20)
    with pytest.raises(MemoryError, match=r"field of 1 loops at 1000000 points"):
        post.loop_field(0.3, 0.0, 1.0, np.zeros(10**6), np.zeros(10**6))
