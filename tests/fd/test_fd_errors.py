"""Bad input gets a clear exception that names the argument (never a crash,
a hang or silent garbage)."""

import numpy as np
import pytest

import nlsepy as nl


def good(**over):
    psi0, h, p = nl.examples.dark_soliton(length=10.0, h=0.1)
    kw = dict(psi0=psi0, spacing=h, a=1.0, s=-1.0)
    kw.update(over)
    return kw


def make(**over):
    kw = good(**over)
    return nl.NLSE(kw.pop("psi0"), kw.pop("spacing"), **kw)


@pytest.mark.parametrize("psi0,exc,words", [
    (np.ones(20, dtype=np.int64), TypeError, "psi0"),
    (np.array(["a"] * 20), TypeError, "psi0"),
    (np.ones(20, dtype=bool), TypeError, "psi0"),
    (np.ones((4, 4, 4, 4), dtype=complex), ValueError, "ndim=4"),
    (np.complex128(1.0), ValueError, "ndim=0"),
])
def test_bad_psi0(psi0, exc, words):
    with pytest.raises(exc, match=words):
        make(psi0=psi0)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nonfinite_psi0(bad):
    psi0 = good()["psi0"].copy()
    psi0[5] = bad
    with pytest.raises(ValueError, match="psi0 contains non-finite"):
        make(psi0=psi0)


def test_nonfinite_psi_setter():
    sim = make()
    psi = sim.psi
    psi[3] = np.nan
    with pytest.raises(ValueError, match="psi contains non-finite"):
        sim.psi = psi


@pytest.mark.parametrize("dtype", [np.float64, np.complex256 if hasattr(np, "complex256")
                                   else "c32", "int32", "nonsense"])
def test_bad_dtype(dtype):
    with pytest.raises(TypeError, match="dtype"):
        make(dtype=dtype)


def test_V_shape_and_values():
    n = good()["psi0"].size
    with pytest.raises(ValueError, match=r"V must have the shape"):
        make(V=np.zeros(n + 1))
    with pytest.raises(ValueError, match=r"V must have the shape"):
        make(V=np.zeros((n, 1)))
    V = np.zeros(n)
    V[2] = np.nan
    with pytest.raises(ValueError, match="V contains non-finite"):
        make(V=V)
    with pytest.raises(TypeError, match="V must be a real array"):
        make(V=np.zeros(n, dtype=complex))


@pytest.mark.parametrize("a", [0.0, -1.0, np.nan, np.inf])
def test_bad_a(a):
    with pytest.raises(ValueError, match=r"^a must be finite and > 0"):
        make(a=a)


def test_bad_s():
    with pytest.raises(ValueError, match=r"^s must be finite"):
        make(s=np.nan)
    with pytest.raises(TypeError, match=r"^s must be a real number"):
        make(s="big")


def test_unknown_scheme_and_bc():
    with pytest.raises(ValueError, match="unknown scheme 'rk8'"):
        make(scheme="rk8")
    with pytest.raises(ValueError, match="unknown bc 'neumann'"):
        make(bc="neumann")
    with pytest.raises(TypeError, match="bc must be a string"):
        make(bc=3)


def test_one_sided_only_1d():
    psi = np.ones((10, 10), complex)
    with pytest.raises(ValueError, match="one-sided.*only available in 1D"):
        nl.NLSE(psi, 0.1, bc="one-sided")
    nl.NLSE(np.ones(10, complex), 0.1, bc="one-sided")  # fine in 1D


@pytest.mark.parametrize("scheme", ["cd", "2shoc"])
def test_dt_above_bound(scheme):
    bound = nl.stability_bound(0.1, 1, 1.0, scheme)
    with pytest.raises(ValueError, match=r"dt=.*exceeds the linear stability bound"):
        make(scheme=scheme, dt=1.01 * bound)
    sim = make(scheme=scheme, dt=1.01 * bound, force=True)
    assert sim.dt == 1.01 * bound
    ok = make(scheme=scheme)
    assert ok.dt == pytest.approx(0.8 * bound)
    with pytest.raises(ValueError, match="exceeds the linear stability bound"):
        ok.dt = 2 * bound
    for bad in (0.0, -1e-3, np.nan):
        with pytest.raises(ValueError, match=r"^dt must be finite and > 0"):
            make(dt=bad)


def test_stability_bound_values():
    """Eqs. 18-19 and the source's quoted numbers for h = 0.01 in 1D."""
    assert nl.stability_bound(0.01, 1, 1.0, "cd") == pytest.approx(0.01 ** 2 / np.sqrt(2))
    assert nl.stability_bound(0.01, 1, 1.0, "2shoc") == pytest.approx(
        0.75 * 0.01 ** 2 / np.sqrt(2))
    # the linear bounds quoted in section 4 of the source, 0.0070711 (CD) and
    # 0.0053033 (2SHOC), are those of h = 0.1 (its text says 0.01, but only
    # h = 0.1 gives these numbers and admits its k = 0.005)
    assert round(nl.stability_bound(0.1, 1, 1.0, "cd"), 7) == 0.0070711
    assert round(nl.stability_bound(0.1, 1, 1.0, "2shoc"), 7) == 0.0053033
    assert nl.stability_bound(0.5, 3, 2.0, "cd") == pytest.approx(0.25 / (3 * np.sqrt(2) * 2))
    # per-axis spacing: the smallest spacing rules
    assert nl.stability_bound((0.5, 0.2), 2, 1.0, "cd") == pytest.approx(
        0.04 / (2 * np.sqrt(2)))


@pytest.mark.parametrize("spacing,words", [
    (0.0, "spacing must be finite and > 0"),
    (-0.1, "spacing must be finite and > 0"),
    (np.nan, "spacing must be finite and > 0"),
    ((0.1, 0.1), r"spacing must be a number or 1 numbers"),
])
def test_bad_spacing_1d(spacing, words):
    with pytest.raises(ValueError, match=words):
        make(spacing=spacing)


def test_bad_spacing_per_axis():
    with pytest.raises(ValueError, match=r"spacing\[1\] must be finite and > 0"):
        nl.NLSE(np.ones((8, 8), complex), (0.1, -0.2))


@pytest.mark.parametrize("shape,scheme,bc", [
    ((2,), "cd", "msd"), ((5, 2), "cd", "periodic"), ((8, 8, 2), "2shoc", "l0"),
    ((3,), "cd", "one-sided"), ((3,), "2shoc", "one-sided"),
])
def test_grid_too_small(shape, scheme, bc):
    with pytest.raises(ValueError, match="grid too small for the stencil"):
        nl.NLSE(np.ones(shape, complex), 0.1, scheme=scheme, bc=bc)


def test_run_and_step_arguments():
    sim = make()
    with pytest.raises(ValueError, match="t_end must be finite and later"):
        sim.run(0.0)
    with pytest.raises(ValueError, match="t_end must be finite and later"):
        sim.run(np.nan)
    with pytest.raises(ValueError, match="frames must be an integer >= 1"):
        sim.run(1.0, frames=0)
    with pytest.raises(ValueError, match="frames must be an integer >= 1"):
        sim.run(1.0, frames=2.5)
    with pytest.raises(ValueError, match="frames=1000 exceeds the"):
        sim.run(sim.dt * 10, frames=1000)
    with pytest.raises(TypeError, match="callback must be callable"):
        sim.run(1.0, callback=3)
    with pytest.raises(ValueError, match="n must be an integer >= 0"):
        sim.step(-1)
    with pytest.raises(ValueError, match="n must be an integer >= 0"):
        sim.step(1.5)
    assert sim.t == 0.0  # nothing ran


def test_psi_setter_shape():
    sim = make()
    with pytest.raises(ValueError, match="psi must have shape"):
        sim.psi = np.ones(3, complex)


def test_backend_names():
    with pytest.raises(ValueError, match="backend must be one of"):
        make(backend="gpu")


def test_blowup_is_reported_not_crashed():
    """Overflow to Inf is caught and reported with the step number."""
    psi0 = np.full(16, 1e150, dtype=complex)
    sim = nl.NLSE(psi0, 0.1, s=1.0, bc="periodic")
    with pytest.raises(nl.BlowUpError, match="non-finite at step 1 "):
        sim.step(3)
    assert sim.t == 0.0 and np.array_equal(sim.psi, psi0)


def test_set_num_threads_errors():
    with pytest.raises(ValueError, match="num_threads"):
        nl.set_num_threads(0)
    with pytest.raises(TypeError, match="n must be an int"):
        nl.set_num_threads(1.5)
