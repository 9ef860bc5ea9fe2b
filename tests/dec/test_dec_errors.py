"""nl.DecGPE: bad input gets a clear exception naming the argument; blow-up
raises nl.BlowUpError with the last good state."""

import numpy as np
import pytest

pytest.importorskip("scipy")

import nlsepy as nl  # noqa: E402


def make(**kw):
    args = dict(grid="bcc", blocks=3, spacing=1.0, trap=1.0, backend="cpu")
    args.update(kw)
    return nl.DecGPE(**args)


@pytest.mark.parametrize("kw,exc,words", [
    (dict(grid="hcp"), ValueError, "grid"),
    (dict(grid=3), ValueError, "grid"),
    (dict(blocks=0), ValueError, "blocks"),
    (dict(blocks=(2, 2)), ValueError, "blocks"),
    (dict(blocks=(2, -1, 2)), ValueError, "blocks[1]"),
    (dict(blocks=2.5), TypeError, "blocks"),
    (dict(spacing=-1.0), ValueError, "spacing"),
    (dict(spacing=float("nan")), ValueError, "spacing"),
    (dict(spacing=float("inf")), ValueError, "spacing"),
    (dict(g=float("nan")), ValueError, "g"),
    (dict(trap=(1, 2)), ValueError, "trap"),
    (dict(trap=(1, float("inf"), 1)), ValueError, "trap[1]"),
    (dict(bc="dirichlet"), ValueError, "bc"),
    (dict(dtype=np.float64), TypeError, "dtype"),
    (dict(dt=0.0), ValueError, "dt"),
    (dict(dt=1.0), ValueError, "stability bound"),
    (dict(backend="tpu"), ValueError, "backend"),
    (dict(V=np.zeros(5)), ValueError, "V"),
    (dict(V=lambda x, y, z: x * np.nan), ValueError, "V"),
    (dict(V=np.array(["a"] * 324)), TypeError, "V"),
    (dict(psi0=np.zeros(7)), ValueError, "psi"),
])
def test_bad_arguments(kw, exc, words):
    with pytest.raises(exc) as e:
        make(**kw)
    assert words in str(e.value)


def test_dt_over_bound_with_force():
    sim = make(dt=1.0, force=True)
    assert sim.dt == 1.0 > sim.max_dt


def test_bad_state():
    sim = make()
    n = sim.size
    with pytest.raises(ValueError, match="one value per cell"):
        sim.psi = np.zeros(n + 1)
    with pytest.raises(ValueError, match="one value per cell"):
        sim.psi = np.zeros((n, 1))
    with pytest.raises(TypeError, match="psi must be a float or complex"):
        sim.psi = np.zeros(n, dtype=int)
    with pytest.raises(TypeError, match="psi must be a float or complex"):
        sim.psi = np.array(["x"] * n)
    psi = np.ones(n, complex)
    psi[3] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        sim.psi = psi
    with pytest.raises(ValueError, match="psi_prev"):
        sim.set_state(np.ones(n), np.full(n, np.inf))
    with pytest.raises(ValueError, match="n must be an integer"):
        sim.step(-1)
    with pytest.raises(ValueError, match="steps"):
        sim.imaginary_time(1.5)
    with pytest.raises(ValueError, match="nonzero state"):
        sim.imaginary_time(3)
    with pytest.raises(ValueError, match="norm"):
        sim.psi = np.ones(n)
        sim.imaginary_time(3, norm=-1)


def test_blowup_keeps_last_good_state():
    sim = make(blocks=4, g=10.0, dt=1.0, force=True)
    p = sim.positions
    sim.psi = np.exp(-(p ** 2).sum(axis=1))
    with pytest.raises(nl.BlowUpError) as e:
        sim.step(5000)
    t_good, psi_good = e.value.last_good
    assert np.all(np.isfinite(psi_good))
    assert sim.t == t_good and e.value.step == round(t_good / sim.dt) + 1
    np.testing.assert_array_equal(sim.psi, psi_good)


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_blowup_is_told_at_the_first_non_finite_step(dtype):
    """The steps tell a blow-up by the FP flags of the kernels (csrc/dec/dec.c,
    DEC_FP_FLAGS), not by a pass over the values: leapfrog step by step at
    1.5 times the stability bound, every step that passes gives the finite
    state that nlse_dec_combine (which checks every value) gives from the
    same two states, and the step that raises is the first whose combine has
    a non-finite value, with the state before it kept."""
    bound = make(blocks=(9, 3, 2), g=1.0, dtype=dtype).max_dt
    sim = make(blocks=(9, 3, 2), g=1.0, dt=1.5 * bound, force=True, dtype=dtype)
    p = sim.positions
    sim.psi = np.exp(-(p ** 2).sum(axis=1) / 4).astype(dtype)
    sim.step(1)  # the RK4 start; then psi(t - dt) is kept
    h = sim._solver
    for n in range(5000):
        psi, prev = sim.psi, sim.psi_prev
        want, bad = h.combine(prev, psi, 0.0, -2 * sim.dt)
        try:
            sim.step(1)
        except nl.BlowUpError:
            assert bad and not np.all(np.isfinite(want))
            np.testing.assert_array_equal(sim.psi, psi)
            break
        assert not bad and np.all(np.isfinite(want))
        np.testing.assert_array_equal(sim.psi, want)
    else:
        pytest.fail("no blow-up in 5000 steps")
    assert n > 3


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_imaginary_time_overflow_is_told(dtype):
    """An imaginary-time step whose values overflow (a time step near the
    largest float) raises BlowUpError and keeps the state."""
    sim = make(blocks=(9, 3, 2), dt=float(np.finfo(dtype).max) / 2, force=True, dtype=dtype)
    p = sim.positions
    sim.psi = (10 * np.exp(-(p ** 2).sum(axis=1) / 4)).astype(dtype)
    psi = sim.psi
    want, bad = sim._solver.combine(psi, psi, -sim.dt, 0.0)
    assert bad
    with pytest.raises(nl.BlowUpError):
        sim.imaginary_time(1)
    np.testing.assert_array_equal(sim.psi, psi)
