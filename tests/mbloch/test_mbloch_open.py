"""Open Maxwell-Bloch systems (``decay=``, ``dephasing=``, ``doppler=``):
the density-matrix path against closed forms of linear optics, the pure
state path, and its own conservation laws.

Conventions (docs/models/mbloch.md, "Open systems"): d rho/dt = i[H, rho]
+ Lindblad terms, H of eq. 4 (an atom of detuning Delta has its ground level
at +Delta), d eps/dz = i beta sum_D w_D F rho_{b a}.  For a weak field
component e^{-i nu t} a two-level atom with decay Gamma (e -> g) answers
with rho_eg = eps / (2 (Delta - nu - i Gamma/2)), so each frequency
propagates as exp(i beta z chi(nu)),

    chi(nu) = sum_D w_D / (2 (Delta_D - nu - i Gamma/2)),

i.e. chi = -1 / (2 (nu + i Gamma/2)) on resonance: the Lorentzian
1/(nu + i Gamma/2); a Gaussian line of width sigma gives the Faddeeva form
chi = i sqrt(pi) w((nu + i Gamma/2) / (sigma sqrt 2)) / (2 sigma sqrt 2).
A resonant CW field falls as exp(-beta z / Gamma) = exp(-OD / 2) in
amplitude, OD = 2 beta L / Gamma the optical depth (intensity e^{-OD}).
The spectra are measured from one run with a short weak pulse as
chi(nu) = ln(eps~(L, nu) / eps~(0, nu)) / (i beta L), eps~ the discrete
Fourier transform on the e^{-i nu t} convention.

Error budget: the z march is AB2 (error ~ (5/12) |beta chi|^3 h_z^2 L,
below 1e-5 here), the time step a trapezoidal rule in the drive (relative
error ~ (nu h_t)^2 / 12, below 2e-4 over the compared band), the response
decays as e^{-Gamma t / 2} within the window (e^{-20} or less).  The
physics tests run on every backend of the build (the suite's ``backend``
fixture: the CUDA kernels too where a GPU is present).
"""

import numpy as np
import pytest

import nlsepy as nl
from nlsepy.reference import mbloch as rm


def spectrum(out, beta, L):
    """chi(nu) and nu from the first and last fields of a one-mode run."""
    e0, eL = out.fields[0, :, 0], out.fields[-1, :, 0]
    n, h = e0.size, out.h_t
    nu = 2 * np.pi * np.fft.fftfreq(n, d=h)
    # sum_k eps(t_k) e^{+i nu t_k}: the amplitude of e^{-i nu t}
    H = np.fft.ifft(eL) / np.fft.ifft(e0)
    return np.fft.fftshift(nu), np.fft.fftshift(np.log(H) / (1j * beta * L))


def weak_probe(t, width=0.5, delay=5.0):
    return 1e-3 * nl.mbloch.gaussian_pulse(t, width, delay, area=1.0)


# ----------------------------------------------------------- Beer-Lambert

def test_beer_lambert_with_decay(backend):
    """A weak resonant CW probe (smooth turn-on) through a two-level medium
    with decay Gamma: amplitude exp(-OD/2), OD = 2 beta L / Gamma = 2
    (the steady state of the RK4 map is the exact one; AB2 error ~1e-5)."""
    gam, beta, L = 1.0, 1.0, 1.0
    mb = nl.MaxwellBloch(h_t=0.02, n_t=2001, line=("single", 0.0), beta=beta,
                         decay=[(gam, 1, 0)], backend=backend)
    e0 = 1e-4 * 0.5 * (1 + np.tanh((mb.t - 5.0) / 1.0))
    out = mb.run(e0, h_z=0.005, n_z=200, save_every=200)
    od = 2 * beta * L / gam
    ratio = out.fields[-1, -1, 0] / out.fields[0, -1, 0]
    assert abs(ratio - np.exp(-od / 2)) < 1e-4 * np.exp(-od / 2)
    assert out.norm_deviation < 1e-13


def test_lorentzian_spectrum(backend):
    """Absorption and dispersion of a homogeneous line with decay: chi(nu) =
    -1 / (2 (nu + i Gamma/2)) within 1e-3 of the peak |chi(0)| = 1/Gamma
    over |nu| <= 4 Gamma, detuned line too."""
    gam, beta, L = 1.0, 1.0, 0.5
    for det in (0.0, 0.7):
        mb = nl.MaxwellBloch(h_t=0.01, n_t=8001, line=("single", det), beta=beta,
                             decay=[(gam, 1, 0)], backend=backend)
        out = mb.run(weak_probe(mb.t), h_z=0.005, n_z=100, save_every=100)
        nu, chi = spectrum(out, beta, L)
        band = np.abs(nu) <= 4 * gam
        expect = 1 / (2 * (det - nu[band] - 0.5j * gam))
        err = np.abs(chi[band] - expect)
        assert err.max() < 1e-3 / gam
        # both parts are tested: absorption (Im) and dispersion (Re)
        assert np.abs(chi[band].imag - expect.imag).max() < 1e-3 / gam
        assert np.abs(chi[band].real - expect.real).max() < 1e-3 / gam


@pytest.mark.parametrize("how", ["line", "doppler"])
def test_voigt_spectrum(backend, how):
    """A Gaussian line (or Doppler classes of the same width) and decay:
    chi = i sqrt(pi) w(z) / (2 sigma sqrt 2), z = (nu + i Gamma/2) /
    (sigma sqrt 2): absorption Re w and dispersion Im w, within 1e-3 of the
    peak, |nu| <= 4 sigma.  The midpoint rule of 200 atoms on +-5 sigma
    errs by e^{-2 pi (Gamma/2) / dDelta} and the span by e^{-12.5}."""
    special = pytest.importorskip("scipy.special")
    gam, sigma, beta, L = 1.0, 1.0, 1.0, 0.5
    kw = dict(h_t=0.01, n_t=8001, beta=beta, decay=[(gam, 1, 0)], backend=backend)
    if how == "line":
        mb = nl.MaxwellBloch(line=("gaussian", sigma, 5.0), n_atoms=200, **kw)
    else:
        mb = nl.MaxwellBloch(line=("single", 0.0), doppler=nl.mbloch.Doppler(
            factors=[1.0], width=sigma, n_classes=200, span=5.0), **kw)
    out = mb.run(weak_probe(mb.t), h_z=0.025, n_z=20, save_every=20)
    nu, chi = spectrum(out, beta, L)
    band = np.abs(nu) <= 4 * sigma
    z = (nu[band] + 0.5j * gam) / (sigma * np.sqrt(2))
    expect = 1j * np.sqrt(np.pi) * special.wofz(z) / (2 * sigma * np.sqrt(2))
    peak = np.abs(expect).max()
    assert np.abs(chi[band].imag - expect.imag).max() < 1e-3 * peak
    assert np.abs(chi[band].real - expect.real).max() < 1e-3 * peak


def test_doppler_factor_one_is_a_line(backend):
    """Doppler classes with factor +1 on a two-level atom are the Gaussian
    line of the same width: the same fields to rounding (the shift sits on
    the excited level instead of the ground one; only the commutator's
    differences E_i - E_j enter)."""
    kw = dict(h_t=0.02, n_t=501, decay=[(0.3, 1, 0)], backend=backend)
    a = nl.MaxwellBloch(line=("gaussian", 1.0, 4.0), n_atoms=24, **kw)
    b = nl.MaxwellBloch(line=("single", 0.0), doppler={"factors": [1], "width": 1.0,
                                                        "n_classes": 24, "span": 4.0}, **kw)
    assert np.allclose(b.detunings, 0) and b.level_shifts.shape == (24, 2)
    e0 = nl.mbloch.sech_pulse(a.t, 1.0, 5.0, area=np.pi)
    ra, rb = a.run(e0, h_z=0.05, n_z=4), b.run(e0, h_z=0.05, n_z=4)
    assert np.abs(ra.fields - rb.fields).max() < 1e-12 * np.abs(ra.fields).max()


# ----------------------------------------------------------- closed systems

def test_density_matrix_agrees_with_amplitudes(backend):
    """decay=[] (Gamma = 0): a multi-level, multi-mode ensemble as density
    matrices and as amplitudes.  RK4 on rho and on psi differ by their
    degree-5 terms, (||H|| h_t)^5 / 60 per step ~ 1e-14 here (||H|| < 4,
    h_t = 0.004), so the fields agree to 1e-10 of their peak."""
    F = nl.mbloch.franck_condon(3, 3, 0.8)
    kw = dict(n_g=3, n_e=3, modes=(-1, 1), F=F, h_t=0.004, n_t=1501, kappa_g=0.2,
              kappa_e=-0.1, delta=0.05, line=("gaussian", 0.7), n_atoms=11, beta=1.5,
              backend=backend)
    rng = np.random.default_rng(2)
    psi = rng.normal(size=(11, 6)) + 1j * rng.normal(size=(11, 6))
    psi /= np.linalg.norm(psi, axis=1)[:, None]
    pure = nl.MaxwellBloch(**kw, initial_state=psi)
    dens = nl.MaxwellBloch(**kw, initial_state=psi, decay=[])
    assert dens.is_open and not pure.is_open
    t = pure.t
    e0 = {0: nl.mbloch.sech_pulse(t, 0.6, 2.5, area=2.0),
          1: 0.4j * nl.mbloch.sech_pulse(t, 0.6, 2.5, area=1.0)}
    a = pure.run(e0, h_z=0.02, n_z=5)
    b = dens.run(e0, h_z=0.02, n_z=5, density=True)
    assert np.abs(a.fields - b.fields).max() < 1e-10 * np.abs(a.fields).max()
    assert np.abs(a.populations - b.populations).max() < 1e-10
    assert np.allclose(np.einsum("ztii->zti", b.density).real, b.populations, atol=0, rtol=0)
    assert np.abs(a.fields[-1, :, 2]).max() > 1e-3  # the coupling made the third mode


@pytest.mark.parametrize("theta0", [0.6, 2 * np.pi])
def test_area_theorem_density_matrix(backend, theta0):
    """Gamma = 0 in the density-matrix path on a Gaussian line: a weak
    area follows tan(theta/2) = tan(theta0/2) e^{-alpha z/2} (alpha = pi
    beta g(0)), a 2 pi sech keeps its area, within 0.02 rad (the
    reference test's tolerance: finite line sampling and time window)."""
    sigma, beta, L = 1.0, 1.0, 2.0
    mb = nl.MaxwellBloch(h_t=0.05, n_t=601, line=("gaussian", sigma), n_atoms=256,
                         beta=beta, decay=[], backend=backend)
    e0 = nl.mbloch.sech_pulse(mb.t, 1.0, 8.0, area=theta0)
    out = mb.run(e0, h_z=0.05, n_z=int(L / 0.05), save_every=20)
    alpha = rm.absorption_coefficient(beta, 1 / (sigma * np.sqrt(2 * np.pi)))
    theta = out.areas()[:, 0].real
    assert np.abs(theta - rm.area_theorem(theta0, alpha * out.z)).max() < 0.02
    assert out.norm_deviation < 1e-12


def test_trace_and_positivity(backend):
    """A strongly driven three-level ladder with decay, branching and
    dephasing: the trace stays 1 to rounding (every RK4 stage is
    trace-free), the populations in [0, 1], the ensemble density matrix
    Hermitian and positive (eigenvalues >= -1e-12)."""
    F = np.array([[1.0, 0.7], [0.5, 1.0]])
    mb = nl.MaxwellBloch(n_g=2, n_e=2, modes=(-1, 1), F=F, h_t=0.01, n_t=1201,
                         line=("lorentzian", 0.5), n_atoms=16, beta=2.0, backend=backend,
                         decay=[(1.0, 2, 0, 0.6), (1.0, 2, 1, 0.4), (0.5, 3, 1), (0.2, 1, 0)],
                         dephasing=[0.0, 0.1, 0.3, 0.0])
    t = mb.t
    out = mb.run({0: nl.mbloch.sech_pulse(t, 0.8, 3.0, area=3 * np.pi),
                  1: nl.mbloch.sech_pulse(t, 0.8, 4.0, area=2 * np.pi)}, h_z=0.02, n_z=5,
                 density=True)
    assert out.norm_deviation < 1e-12
    w = mb.weights.sum()
    p = out.populations / w
    assert p.min() > -1e-12 and p.max() < 1 + 1e-12
    assert np.abs(p.sum(axis=2) - 1).max() < 1e-12
    rho = out.density / w
    assert np.abs(rho - np.conj(np.swapaxes(rho, 2, 3))).max() < 1e-14
    assert np.linalg.eigvalsh(rho).min() > -1e-12
    assert p[-1, -1, 0] > 0.5  # the decay brought population back to the ground level


def test_single_precision(backend):
    """complex64: the density matrices in float agree with double to float
    accuracy (fields within 1e-5 of their peak)."""
    kw = dict(h_t=0.02, n_t=801, line=("gaussian", 1.0), n_atoms=40, decay=[(0.5, 1, 0)],
              dephasing=[0.0, 0.1], backend=backend)
    e0 = nl.mbloch.sech_pulse(np.arange(801) * 0.02, 1.0, 5.0, area=1.5 * np.pi)
    a = nl.MaxwellBloch(**kw).run(e0, h_z=0.05, n_z=4)
    b = nl.MaxwellBloch(**kw, dtype=np.complex64).run(e0, h_z=0.05, n_z=4)
    scale = np.abs(a.fields).max()
    assert np.abs(a.fields - b.fields).max() < 1e-5 * scale
    assert np.abs(a.populations - b.populations).max() < 1e-5


# ----------------------------------------------------------- EIT

def test_eit_window_and_group_delay(backend):
    """Lambda system (g0 = 0, g1 = 1, e = 2; mode 0 the probe g0-e, mode -1
    the coupling g1-e), decay Gamma from e to g0 and g1 (branching 1/2),
    gamma_21 = 0, a resonant coupling Omega_c = 0.1 Gamma, a weak broadband
    probe.  Definitions: OD = 2 beta L / Gamma (the two-level resonant
    amplitude exp(-OD/2) without coupling); the window's width is the full
    width of the absorption -ln|eps~(L)/eps~(0)| at half its maximum
    (reached at nu = +-Omega_c / 2, linear interpolation between the
    transform's points 2 pi / (n_t h_t) apart); the group delay
    d arg(eps~(L)/eps~(0)) / d nu at nu = 0.  For Omega_c << Gamma they are Omega_c^2 / Gamma
    (exactly (sqrt(Gamma^2/4 + Omega_c^2) - Gamma/2): 1 % below at
    Omega_c = 0.1 Gamma) and OD Gamma / Omega_c^2; both to 2 %."""
    gam, omc, beta, L = 1.0, 0.1, 1.0, 0.5
    n_t, h_t = 40000, 0.2                     # window 8000 >> 1 / (Omega_c^2 / Gamma)
    mb = nl.MaxwellBloch(n_g=2, n_e=1, modes=(-1, 0), F=[[1.0], [1.0]], h_t=h_t, n_t=n_t,
                         line=("single", 0.0), beta=beta, backend=backend,
                         decay=[(gam, 2, 0, 0.5), (gam, 2, 1, 0.5)])
    probe = 1e-4 * nl.mbloch.gaussian_pulse(mb.t, 2.0, 40.0, area=1.0)
    out = mb.run({0: probe, -1: np.full(n_t, omc)}, h_z=0.025, n_z=int(L / 0.025),
                 save_every=1000, populations=False)
    e0, eL = out.fields[0, :, 1], out.fields[-1, :, 1]
    nu = np.fft.fftshift(2 * np.pi * np.fft.fftfreq(n_t, d=h_t))
    near = np.abs(nu) < omc                   # the probe's spectrum is broad there
    H = np.fft.fftshift(np.fft.ifft(eL))[near] / np.fft.fftshift(np.fft.ifft(e0))[near]
    nu = nu[near]
    absorb = -np.log(np.abs(H))
    od = 2 * beta * L / gam
    # width: half of the maximum absorption, on either side of nu = 0
    a, x = absorb, nu
    half = 0.5 * a.max()
    right = x >= 0
    xr, ar = x[right], a[right]
    q = np.argmax(ar >= half)
    nu_r = np.interp(half, ar[q - 1:q + 1], xr[q - 1:q + 1])
    xl, al = -x[~right][::-1], a[~right][::-1]
    q = np.argmax(al >= half)
    nu_l = np.interp(half, al[q - 1:q + 1], xl[q - 1:q + 1])
    width = nu_r + nu_l
    assert width == pytest.approx(omc ** 2 / gam, rel=0.02)
    assert a.max() == pytest.approx(od / 2, rel=0.01)    # the two-level peak, beta L / Gamma
    # the phase slope from the transforms at nu = +-d (sums over the grid;
    # the phase's cubic term, ~4 Gamma^2 d^2 / Omega_c^4 relative, is 4e-4)
    d = 1e-4
    tr = [np.sum(eL * np.exp(1j * v * mb.t)) / np.sum(e0 * np.exp(1j * v * mb.t))
          for v in (-d, d)]
    delay = (np.angle(tr[1]) - np.angle(tr[0])) / (2 * d)
    assert delay == pytest.approx(od * gam / omc ** 2, rel=0.02)


# ----------------------------------------------------------- input

def test_level_factors_and_counter_propagation():
    """Doppler level shifts of a Lambda system: co-propagating fields leave
    the two-photon (g0-g1) resonance Doppler-free, counter-propagating
    ones shift it by 2 delta; a loop of couplings with inconsistent
    factors is refused."""
    from nlsepy.mbloch.lindblad import level_factors
    F = np.array([[1.0], [1.0]])
    co = level_factors([1.0, 1.0], (-1, 0), F)
    counter = level_factors([-1.0, 1.0], (-1, 0), F)  # modes -1 (coupling), 0 (probe)
    assert co[0] - co[2] == 1 and co[1] - co[2] == 1 and co[0] == co[1]
    assert counter[0] - counter[2] == 1 and counter[1] - counter[2] == -1
    assert counter[0] - counter[1] == 2
    with pytest.raises(ValueError, match="inconsistent"):
        level_factors([1.0, 2.0, 5.0], (-1, 1), np.ones((2, 2)))
    # factors linear in l are consistent around the same loop
    c = level_factors([1.0, 2.0, 3.0], (-1, 1), np.ones((2, 2)))
    assert c[0] - c[2] == 2 and c[0] - c[3] == 3 and c[1] - c[2] == 1 and c[1] - c[3] == 2


@pytest.mark.parametrize("kw, exc, match", [
    (dict(decay=[(-1.0, 1, 0)]), ValueError, r"decay\[0\]: the rate Gamma must be >= 0, got -1"),
    (dict(decay=[(1.0, 1, 0), (1.0, 5, 0)]), ValueError,
     r"decay\[1\]: from level 5 does not exist \(levels 0..1"),
    (dict(decay=[(1.0, 1, 2)]), ValueError, r"decay\[0\]: to level 2 does not exist"),
    (dict(decay=[(1.0, 1, 1)]), ValueError, "same level 1"),
    (dict(decay=[(1.0, 1, 0, 1.5)]), ValueError, r"branching must be in \[0, 1\], got 1.5"),
    (dict(decay=[(1.0, 1.5, 0)]), ValueError, "from level must be an integer, got 1.5"),
    (dict(decay=[(1.0, 1)]), ValueError, r"decay\[0\] must be \(Gamma, from, to"),
    (dict(decay=(1.0, 1, 0)), ValueError, r"decay\[0\] must be"),
    (dict(dephasing=[0.1, -0.2]), ValueError, "dephasing rates must be finite and >= 0, got -0.2"),
    (dict(dephasing=[[0, 0.1], [0.2, 0]]), ValueError, "must be symmetric"),
    (dict(dephasing=[0.1, 0.2, 0.3]), ValueError, r"shape \(2,\) \(per level\)"),
    (dict(doppler={"factors": [1, 1], "width": 1.0}), ValueError, "one per mode"),
    (dict(doppler={"factors": [1]}), ValueError, "give width, or temperature"),
    (dict(doppler={"factors": [1], "width": -1.0}), ValueError, "doppler width"),
    (dict(doppler={"factors": [1], "width": 1.0, "speed": 2}), ValueError, "speed"),
    (dict(doppler=3), TypeError, "doppler must be nl.mbloch.Doppler"),
])
def test_bad_open_input(kw, exc, match):
    with pytest.raises(exc, match=match):
        nl.MaxwellBloch(h_t=0.1, n_t=10, line=("single", 0.0), backend="cpu", **kw)


def test_core_refuses_bad_open_tables():
    """The C API checks the tables itself (for callers other than Python)."""
    from nlsepy import _core
    s = _core.Mbloch(1, 1, 0, 0, np.ones((1, 1)), np.zeros(2), np.ones(2),
                     np.array([[1, 0], [1, 0]], complex), np.zeros((10, 1), complex),
                     0.1, 0.1, 1.0, 0.0, 0.0, 0.0, 2, _core.COMPLEX128)
    rho0 = np.zeros((2, 2, 2), complex)
    rho0[:, 0, 0] = 1
    i32 = lambda *v: np.array(v, np.int32)  # noqa: E731
    with pytest.raises(ValueError, match=r"decay\[0\]: the rate must be finite and >= 0"):
        s.set_open(i32(1), i32(0), np.array([-1.0]), None, None, rho0)
    with pytest.raises(ValueError, match=r"decay\[0\]: to level 7 does not exist"):
        s.set_open(i32(1), i32(7), np.array([1.0]), None, None, rho0)
    with pytest.raises(ValueError, match="get_density.*not open"):
        s.get_density()
    s.set_open(i32(1), i32(0), np.array([1.0]), None, None, rho0)
    with pytest.raises(ValueError, match="once, before the first step"):
        s.set_open(i32(1), i32(0), np.array([1.0]), None, None, rho0)


def test_doppler_from_a_temperature():
    """sigma_D = k sqrt(k_B T / M): 87Rb at 300 K on 780 nm has an r.m.s.
    speed of 169.4 m/s along the beam, sigma_D = 2 pi x 217.1 MHz, here in
    units of 1 / (1 ns)."""
    sig = nl.mbloch.doppler_width(300.0, 86.909, 780.24e-9, 1e-9)
    assert sig == pytest.approx(2 * np.pi * 0.2171, rel=1e-3)
    d = nl.mbloch.Doppler(factors=[1], temperature=300.0, mass=86.909, wavelength=780.24e-9,
                          time_unit=1e-9, n_classes=8)
    assert d.sigma() == sig
    mb = nl.MaxwellBloch(h_t=0.1, n_t=10, line=("gaussian", 0.1), n_atoms=3, doppler=d,
                         decay=[(0.04, 1, 0)], backend="cpu")
    assert mb.n_atoms == 24 and mb.is_open
    assert mb.replace(beta=2.0).n_atoms == 24  # the line is kept before the classes


def test_atom_solve_matches_numpy_reference(backend):
    """One atom solve of the C solver against the NumPy statement of the
    master equation (nlsepy.reference.mbloch_open): several modes, level
    spacings, Doppler shifts (factors linear in l, as loops of couplings
    need), decay with branching into several levels,
    dephasing per coherence and mixed-in coherent initial states; the
    polarisation and the ensemble density matrix within 1e-12 (the same
    RK4, sums in another order)."""
    from nlsepy.reference.mbloch_open import lindblad_atoms
    F = nl.mbloch.franck_condon(2, 3, 0.9)
    rng = np.random.default_rng(5)
    psi = rng.normal(size=(6, 5)) + 1j * rng.normal(size=(6, 5))
    psi /= np.linalg.norm(psi, axis=1)[:, None]
    deph = rng.uniform(0, 0.3, (5, 5))
    deph = deph + deph.T
    decay = [(0.7, 2, 0, 0.5), (0.7, 2, 1, 0.5), (0.4, 4, 1), (0.2, 3, 0), (0.1, 1, 0)]
    mb = nl.MaxwellBloch(2, 3, (-1, 2), F, h_t=0.02, n_t=301, kappa_g=0.2, kappa_e=-0.3,
                         delta=0.05, line=("gaussian", 0.6), n_atoms=3, beta=1.3,
                         initial_state=psi, decay=decay,
                         dephasing=deph, backend=backend,
                         doppler=nl.mbloch.Doppler(factors=[1.5, 1.0, 0.5, 0.0], width=0.7,
                                                   n_classes=2))
    t = mb.t
    e0 = np.stack([0.3 * nl.mbloch.sech_pulse(t, 0.5, 2.0, area=1.0),
                   nl.mbloch.sech_pulse(t, 0.5, 2.5, area=2.5),
                   0.5j * nl.mbloch.sech_pulse(t, 0.5, 3.0, area=1.0),
                   0.2 * nl.mbloch.gaussian_pulse(t, 1.0, 3.0, area=1.0)], axis=1)
    from nlsepy.mbloch import propagate, lindblad
    solver = propagate.make_solver(mb, mb.input_fields(e0), 0.01, 1)
    solver.atoms(True)
    n = mb.n_levels
    E = np.zeros((mb.n_atoms, n))
    E[:, :2] = np.arange(2) * (0.2 - 0.05) + mb.detunings[:, None]
    E[:, 2:] = np.arange(3) * (-0.3 - 0.05)
    E += mb.level_shifts
    P, rho, dev = lindblad_atoms(F, (-1, 2), E, mb.weights,
                                 lindblad.density_from_amplitudes(mb.initial_state), e0, 0.02, 1.3,
                                 [(0.35, 2, 0), (0.35, 2, 1), (0.4, 4, 1), (0.2, 3, 0), (0.1, 1, 0)],
                                 mb.dephasing)
    assert np.abs(solver.get_polarisation() - P).max() < 1e-12 * np.abs(P).max()
    assert np.abs(solver.get_density() - rho).max() < 1e-12
    assert np.abs(rho).max() > 0.1 and np.abs(P).max() > 0.1


def test_run_file_records_the_open_system(tmp_path):
    """The HDF5 run file's parameters hold the channels (rate, from, to),
    the dephasing matrix, the Doppler classes and the level shifts."""
    pytest.importorskip("h5py")
    mb = nl.MaxwellBloch(h_t=0.05, n_t=101, line=("gaussian", 1.0), n_atoms=4, backend="cpu",
                         decay=[(0.5, 1, 0, 0.5)], dephasing=[0.0, 0.1],
                         doppler={"factors": [1], "width": 0.5, "n_classes": 3})
    mb.run(nl.mbloch.sech_pulse(mb.t, 1.0, 2.0, area=1.0), h_z=0.1, n_z=2,
           output=tmp_path / "open.h5")
    p = nl.open_run(tmp_path / "open.h5").attrs["parameters"]
    assert np.array_equal(p["decay"], [[0.25, 1, 0]])
    assert np.array_equal(p["dephasing"], [[0, 0.1], [0.1, 0]])
    assert "n_classes=3" in p["doppler"] and p["level_shifts"].shape == (12, 2)


def test_memory_is_refused_up_front():
    """The density matrices are counted before anything is allocated:
    100000 atoms of 3001 levels (16 n^2 bytes each, 14 TB) are refused at
    construction, naming the atoms and the levels."""
    F = np.ones((1, 3000))
    with pytest.raises(MemoryError, match=r"n_atoms = 100000 \(n_g \+ n_e = 3001 levels"):
        nl.MaxwellBloch(1, 3000, (0, 2999), F, h_t=0.1, n_t=100, line=("gaussian", 1.0),
                        n_atoms=100000, decay=[(1.0, 1, 0)], backend="cpu")
