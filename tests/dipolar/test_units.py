"""Tests of nl.units (physical units of the dipolar GPE).

References: the DBEC-GP summary of Loncar's thesis, listing 3.11 (N = 5000,
a_s = 100 a0, ADD = 132.7 a0, AHO = 1 um -> G_3D = 332.4918, GD_3D =
105.33272, OPTION = 2); the thesis' harmonic-oscillator lengths of chapter 9
(reference frequency omega_x); the package's own DBEC-GP reader; dipolar
lengths quoted in the literature; exact relations (h, k_B exact in the SI);
and DipolarGPE runs whose chemical potential and phase rotation are known in
physical units.
"""

import math
import pathlib
import sys

import numpy as np
import pytest

import nlsepy as nl
from nlsepy import units
from nlsepy.dipolar import dbec

ROOT = pathlib.Path(__file__).resolve().parents[2]

# exact in the SI since 2019
H = 6.62607015e-34
K_B = 1.380649e-23


def sample(**kw):
    """The condensate of the thesis' listing 3.11 (a 164Dy-like BEC)."""
    args = dict(a_s=100, a_dd=132.7, n_atoms=5000, length=1e-6, trap=(0.5, 1.0, 1.5))
    args.update(kw)
    return units.BEC("164Dy", **args)


# ------------------------------------------------------------ DBEC-GP sample
def test_dbec_gp_sample_printed_values():
    """G0 = 4 pi AS N a0 / AHO and GDD0 = 3 ADD N a0 / AHO to the digits the
    DBEC-GP summary prints (332.4918, 105.33272; 332.49, 105.33 in words)."""
    b = sample()
    assert round(b.g0, 4) == 332.4918
    assert round(b.gdd0, 5) == 105.33272
    assert round(b.g0, 2) == 332.49 and round(b.gdd0, 2) == 105.33
    # OPTION = 2 (the sample's): the equation carries par * G0, par * GDD0
    assert b.option == 2
    assert b.g == pytest.approx(2 * 332.4918, abs=1e-4)
    assert b.gdd == pytest.approx(2 * 105.33272, abs=1e-5)
    assert b.trap == (0.5, 1.0, 1.5)
    assert b.length == 1e-6
    one = sample(option=1)
    assert (one.g, one.gdd) == (one.g0, one.gdd0) == (b.g0, b.gdd0)


def test_dbec_gp_takes_no_mass():
    """DBEC-GP takes AHO and no mass: G0, GDD0 do not depend on the species
    (the mass sets only the time and energy units, omega = hbar / (m AHO^2))."""
    dy = sample()
    cr = units.BEC("52Cr", a_s=100, a_dd=132.7, n_atoms=5000, length=1e-6, trap=(0.5, 1, 1.5))
    by_mass = units.BEC(mass=10.0, a_s=100, a_dd=132.7, n_atoms=5000, length=1e-6)
    assert dy.g0 == cr.g0 == by_mass.g0
    assert dy.gdd0 == cr.gdd0 == by_mass.gdd0
    hbar = dy.constants["hbar"]
    assert dy.omega == pytest.approx(hbar / (dy.mass_kg * 1e-12), rel=1e-14)
    assert cr.omega / dy.omega == pytest.approx(dy.mass_kg / cr.mass_kg, rel=1e-14)
    # 164Dy at AHO = 1 um: omega = 2 pi x 61.66 Hz, the trap (0.5, 1, 1.5) of it
    assert dy.frequency_hz == pytest.approx(61.658, abs=1e-3)
    assert dy.trap_hz == pytest.approx((0.5 * 61.658, 61.658, 1.5 * 61.658), abs=2e-3)


def test_matches_the_dbec_reader():
    """The package's DBEC-GP reader computes the same G0, GDD0 from the example
    input file of the sample (to the CODATA revision of a0: 1e-9)."""
    cfg = dbec.read_input(ROOT / "examples" / "dbec" / "imag3d-input")
    g0, gdd0 = dbec._couplings(cfg)
    b = units.BEC("164Dy", a_s=cfg["AS"], a_dd=cfg["ADD"], n_atoms=cfg["NATOMS"],
                  length=cfg["AHO"], trap=(cfg["GAMMA"], cfg["NU"], cfg["LAMBDA"]),
                  option=cfg["OPTION"])
    assert b.g0 == pytest.approx(g0, rel=1e-9)
    assert b.gdd0 == pytest.approx(gdd0, rel=1e-9)
    kw = b.dipolar_kwargs()
    # what dbec._build hands DipolarGPE
    assert kw["g"] == pytest.approx(cfg["OPTION"] * g0, rel=1e-9)
    assert kw["gdd"] == pytest.approx(cfg["OPTION"] * gdd0, rel=1e-9)
    assert kw["trap"] == (cfg["GAMMA"], cfg["NU"], cfg["LAMBDA"])
    assert kw["option"] == cfg["OPTION"]


# ------------------------------------------------------------ trap frequencies
def test_trap_hz_ratios_and_length():
    """Trap ratios omega_a / omega_x and l = sqrt(hbar / (m omega_x)) (DBEC-GP's
    and the thesis' reference: the x trap frequency)."""
    b = units.BEC("164Dy", a_s=90, n_atoms=20_000, trap_hz=(45, 45, 133))
    c = b.constants
    m = 163.9291819 * c["u"]
    omega = 2 * math.pi * 45
    assert b.reference == "x"
    assert b.omega == pytest.approx(omega, rel=1e-15)
    assert b.length == pytest.approx(math.sqrt(c["hbar"] / (m * omega)), rel=1e-14)
    assert b.trap == pytest.approx((1.0, 1.0, 133 / 45), rel=1e-15)
    assert b.trap_hz == (45.0, 45.0, 133.0)
    assert b.g == pytest.approx(2 * 4 * math.pi * 90 * 20_000 * c["a0"] / b.length, rel=1e-14)
    assert b.gdd == pytest.approx(2 * 3 * b.a_dd * 20_000 * c["a0"] / b.length, rel=1e-14)
    # other references
    z = b.replace(reference="z")
    assert z.trap == pytest.approx((45 / 133, 45 / 133, 1.0), rel=1e-15)
    assert z.length == pytest.approx(b.length * math.sqrt(45 / 133), rel=1e-14)
    geo = b.replace(reference="geometric")
    fbar = (45 * 45 * 133) ** (1 / 3)
    assert geo.frequency_hz == pytest.approx(fbar, rel=1e-14)
    assert math.prod(geo.trap) == pytest.approx(1.0, rel=1e-14)
    fixed = b.replace(reference=100.0)
    assert fixed.trap == pytest.approx((0.45, 0.45, 1.33), rel=1e-15)
    assert fixed.reference == "100 Hz"


def test_thesis_oscillator_lengths():
    """Loncar's thesis, chapter 9: omega = omega_x = 2 pi x 9 Hz gives l =
    2.617 um for dysprosium (164Dy; printed digits) and l = 6.98777 um for
    23Na (agrees to 3e-4: the thesis' mass or constants differ slightly)."""
    dy = units.BEC("164Dy", a_s=100, n_atoms=8e4, trap_hz=(9, 9, 400))
    assert round(dy.length_um(1.0), 3) == 2.617
    assert dy.trap == pytest.approx((1.0, 1.0, 400 / 9))
    na = units.BEC("23Na", a_s=51.9, n_atoms=3.2e6, trap_hz=(9, 9, 400))
    assert na.length_um(1.0) == pytest.approx(6.98777, rel=3e-4)
    assert na.a_dd == 0.0 and na.gdd == 0.0


def test_length_gives_trap_hz():
    b = sample()
    assert b.reference == "length"
    assert b.trap_hz == pytest.approx(tuple(r * b.frequency_hz for r in (0.5, 1.0, 1.5)),
                                      rel=1e-15)
    assert units.BEC("87Rb", a_s=100, n_atoms=1e5, length=1e-6).trap == (1.0, 1.0, 1.0)


# ------------------------------------------------------------ dipolar lengths
@pytest.mark.parametrize("species, mu, expected, rel, source", [
    # Dy: a_dd = 131 a0 for 164Dy (Ferrier-Barbut et al., PRL 116, 215301 (2016));
    # 129.2 a0 for 162Dy (Boettcher et al., PRX 9, 011051 (2019)).  Tolerance 1 %.
    ("164Dy", None, 131.0, 0.01, "Ferrier-Barbut 2016"),
    ("162Dy", None, 129.2, 0.01, "Boettcher 2019"),
    # 52Cr: a_dd ~ 15 a0 (Lahaye et al., Rep. Prog. Phys. 72, 126401 (2009)).
    # Tolerance 2 % (the value is quoted to two digits).
    ("52Cr", None, 15.0, 0.02, "Lahaye 2009"),
    # 168Er: 66.6 a0 with 7 mu_B (Aikawa et al., PRL 108, 210401 (2012));
    # 6.98 mu_B (the table's default) gives 0.6 % less.  Tolerance 1 %.
    ("168Er", 7.0, 66.6, 0.005, "Aikawa 2012"),
    ("168Er", None, 66.6, 0.01, "Aikawa 2012"),
    # 87Rb with 1 mu_B: 0.7 a0 (Lahaye et al. 2009, table 1).  Tolerance 2 %.
    ("87Rb", 1.0, 0.7, 0.02, "Lahaye 2009"),
])
def test_dipolar_length_literature(species, mu, expected, rel, source):
    b = units.BEC(species, a_s=100, n_atoms=1000, trap_hz=(50, 50, 50), mu=mu)
    assert b.a_dd == pytest.approx(expected, rel=rel), source
    assert b.mu == (mu if mu is not None else units.SPECIES[species][1])


def test_dipolar_length_formula():
    """a_dd = mu0 mu^2 m / (12 pi hbar^2) (eq. 2.6), written out here, and its
    mu^2 m scaling; a_dd= overrides the moment."""
    c = units.constants()
    m = 163.9291819 * c["u"]
    direct = c["mu_0"] * (9.93 * c["mu_B"]) ** 2 * m / (12 * math.pi * c["hbar"] ** 2) / c["a0"]
    b = units.BEC("164Dy", a_s=100, n_atoms=1, length=1e-6)
    assert b.a_dd == pytest.approx(direct, rel=1e-14)
    assert units.dipolar_length(9.93, m) == pytest.approx(direct, rel=1e-14)
    assert b.replace(mu=2 * 9.93).a_dd == pytest.approx(4 * direct, rel=1e-14)
    assert b.replace(a_dd=132.7).a_dd == 132.7 and b.replace(a_dd=132.7).mu is None
    assert b.replace(mu=0).gdd == 0.0


# ------------------------------------------------------------ masses
def test_mass_keywords():
    c = units.constants()
    by_species = units.BEC("87Rb", a_s=100, n_atoms=1e5, trap_hz=(10, 10, 10))
    by_u = units.BEC(mass=86.9091805, a_s=100, n_atoms=1e5, trap_hz=(10, 10, 10))
    by_kg = units.BEC(mass_kg=86.9091805 * c["u"], a_s=100, n_atoms=1e5, trap_hz=(10, 10, 10))
    for b in (by_u, by_kg):
        assert b.mass_u == pytest.approx(by_species.mass_u, rel=1e-14)
        assert b.mass_kg == pytest.approx(by_species.mass_kg, rel=1e-14)
        assert b.length == pytest.approx(by_species.length, rel=1e-14)
    assert by_species.mass_u == 86.9091805
    for name in ("Dy164", "dy-164", " 164dy ", "DY164"):
        assert units.BEC(name, a_s=1, n_atoms=1, length=1e-6).species == "164Dy"


# ------------------------------------------------------------ converters
def test_converter_round_trips():
    b = units.BEC("164Dy", a_s=90, n_atoms=20_000, trap_hz=(45, 45, 133))
    x = np.linspace(-8, 8, 17)
    assert np.allclose(b.to_length(b.length_um(x)), x, rtol=1e-15, atol=0)
    assert np.allclose(b.length_m(x), x * b.length, rtol=1e-15, atol=0)
    assert np.allclose(b.to_time(b.time_ms(x)), x, rtol=1e-15, atol=0)
    assert np.allclose(b.time_s(x), 1e-3 * b.time_ms(x), rtol=1e-15, atol=0)
    for unit, fn in (("nK", b.energy_nK), ("Hz", b.energy_hz), ("J", b.energy_J)):
        assert np.allclose(b.to_energy(fn(x), unit), x, rtol=1e-14, atol=0)
    assert b.mu_nK is not None and b.mu_nK(2.5) == b.energy_nK(2.5)
    assert isinstance(b.length_um(1), float) and isinstance(b.time_ms(np.float32(1)), float)
    assert b.length_um([1, 2]).shape == (2,)
    # exact relations: one unit of energy is h f_ref = h f_ref / k_B kelvin
    assert b.energy_hz(1.0) == pytest.approx(45.0, rel=1e-15)
    assert b.energy_nK(1.0) == pytest.approx(H * 45 / K_B * 1e9, rel=1e-12)
    assert b.energy_J(1.0) == pytest.approx(H * 45, rel=1e-12)
    # time: the solver's t is option * omega * t_phys (DBEC-GP prints DT * par)
    assert b.time_s(1.0) == pytest.approx(2 / (2 * math.pi * 45), rel=1e-15)
    assert b.replace(option=1).time_s(1.0) == pytest.approx(1 / (2 * math.pi * 45), rel=1e-15)
    # a potential enters the option-2 equation twice as large (DBEC-GP's obstacle V0)
    assert b.to_potential(2.0, "Hz") == pytest.approx(2 * 2.0 / 45, rel=1e-14)
    assert b.replace(option=1).to_potential(2.0, "Hz") == pytest.approx(2.0 / 45, rel=1e-14)
    assert b.to_potential(b.energy_nK(3.0)) == pytest.approx(6.0, rel=1e-14)


def test_converter_bad_input():
    b = sample()
    with pytest.raises(ValueError, match="unit must be one of"):
        b.to_energy(1.0, "eV")
    with pytest.raises(TypeError, match="x must be a real number"):
        b.length_um("3")
    with pytest.raises(TypeError, match="t must be real"):
        b.time_ms(1j)


# ------------------------------------------------------------ the solver
def test_dipolar_kwargs_run_imaginary_time():
    """A DipolarGPE made from dipolar_kwargs() runs (3D, dipoles, small grid,
    CPU): the couplings arrive, the state stays normalised, mu converts."""
    b = units.BEC("164Dy", a_s=90, n_atoms=2000, trap_hz=(45, 45, 133))
    kw = b.dipolar_kwargs()
    assert set(kw) == {"g", "gdd", "trap", "option"}
    gpe = nl.DipolarGPE((16, 16, 16), 0.5, 0.01, cutoff=4.0, backend="cpu", **kw)
    assert (gpe.g, gpe.gdd, gpe.trap, gpe.option) == (b.g, b.gdd, b.trap, b.option)
    gpe.imaginary_time(20)
    o = gpe.observables()
    assert o["norm"] == pytest.approx(1.0, rel=1e-12)   # imaginary time: Simpson norm 1
    mu0 = sum(b.trap) / 2  # non-interacting value
    assert math.isfinite(o["mu"]) and o["mu"] > mu0
    assert b.mu_nK(o["mu"]) > b.mu_nK(mu0) == pytest.approx(0.5 * H * (45 + 45 + 133) / K_B * 1e9)
    assert 0 < b.length_um(o["r_rms"]) < b.length_um(8.0)


@pytest.mark.parametrize("option", [1, 2])
def test_units_of_a_run(option):
    """Non-interacting gas along z (geometry "1d-z", trap (45, 45, 133) Hz):
    the ground state has mu = h f_z / 2 = 66.5 Hz, and in real time it turns
    its phase by 2 pi mu t (mu in Hz, t in s) for either option."""
    b = units.BEC("164Dy", a_s=0, mu=0, n_atoms=1000, trap_hz=(45, 45, 133), option=option)
    lam = b.trap[2]
    gpe = nl.DipolarGPE((256,), 0.05, 0.002, geometry="1d-z", backend="cpu",
                        **b.dipolar_kwargs())
    gpe.imaginary_time(3000)
    mu = gpe.observables()["mu"]
    assert b.energy_hz(mu) == pytest.approx(66.5, rel=1e-3)
    assert mu == pytest.approx(lam / 2, rel=1e-3)
    i0 = gpe.shape[0] // 2
    p0 = gpe.psi[i0]
    gpe.dt = b.to_time(0.01)              # 10 us steps
    gpe.real_time(100)                     # 1 ms
    assert b.time_ms(gpe.t) == pytest.approx(1.0, rel=1e-12)
    turned = -np.angle(gpe.psi[i0] / p0)
    expected = 2 * math.pi * b.energy_hz(mu) * b.time_s(gpe.t)
    expected = (expected + math.pi) % (2 * math.pi) - math.pi
    assert turned == pytest.approx(expected, abs=2e-3)


# ------------------------------------------------------------ constants
def test_constants_scipy_and_builtin(monkeypatch):
    """scipy.constants when SciPy is installed, else the built-in CODATA 2018
    table; the two agree to 1e-8 (CODATA 2018 vs 2022 differ by < 2e-9)."""
    pytest.importorskip("scipy")
    have = dict(units.constants())
    assert have["source"].startswith("scipy.constants")
    monkeypatch.setitem(sys.modules, "scipy", None)
    monkeypatch.setitem(sys.modules, "scipy.constants", None)
    units.constants.cache_clear()
    try:
        built = units.constants()
        assert built["source"] == "CODATA 2018 (built in)"
        assert built["a0"] == dbec.BOHR_RADIUS
        for k in ("h", "hbar", "k_B", "mu_0", "mu_B", "a0", "u"):
            assert built[k] == pytest.approx(have[k], rel=1e-8), k
        b = sample()
        assert b.constants["source"] == "CODATA 2018 (built in)"
        assert round(b.g0, 4) == 332.4918 and round(b.gdd0, 5) == 105.33272
    finally:
        units.constants.cache_clear()


# ------------------------------------------------------------ bad input
@pytest.mark.parametrize("kwargs, message", [
    (dict(n_atoms=-5), r"n_atoms must be finite and > 0, got -5"),
    (dict(n_atoms=0), r"n_atoms must be finite and > 0, got 0"),
    (dict(a_s=float("nan")), r"a_s \(Bohr radii\) must be finite, got nan"),
    (dict(a_dd=float("inf")), r"a_dd \(Bohr radii\) must be finite, got inf"),
    (dict(species="7Dy"), r"species '7Dy' is not known \(known: 7Li, 23Na"),
    (dict(species="unobtainium"), r"species 'unobtainium' is not known"),
    (dict(species=164), r"species must be a string such as '164Dy'"),
    (dict(trap_hz=(45, 45, 133)), r"exactly one of trap_hz .* and length .*got trap_hz = "
                                  r"\(45, 45, 133\), length = 1e-06"),
    (dict(length=None), r"exactly one of trap_hz .* and length .*got trap_hz = None, "
                        r"length = None"),
    (dict(length=1.0), r"length is the unit of length in metres .* got 1.0"),
    (dict(length=-1e-6), r"length \(m\) must be finite and > 0, got -1e-06"),
    (dict(mu=9.93), r"a_dd \(Bohr radii\) or mu \(Bohr magnetons\), not both; got "
                    r"a_dd = 132.7, mu = 9.93"),
    (dict(mass=163.9), r"exactly one of species, mass .* got species and mass"),
    (dict(species=None), r"exactly one of species, mass .* got none"),
    (dict(option=3), r"option must be 1 or 2 \(DBEC-GP's OPTION\), got 3"),
    (dict(reference="y"), r"reference goes with trap_hz=.*got reference = 'y'"),
    (dict(trap=(1, 2)), r"trap must be three numbers \(x, y, z\), got \(1, 2\)"),
    (dict(trap=(1, -2, 1)), r"trap\[1\] \(y\) must be finite and >= 0, got -2"),
])
def test_bad_input(kwargs, message):
    args = dict(species="164Dy", a_s=100, a_dd=132.7, n_atoms=5000, length=1e-6,
                trap=(0.5, 1.0, 1.5))
    args.update(kwargs)
    species = args.pop("species")
    with pytest.raises(ValueError, match=message):
        units.BEC(species, **args)


@pytest.mark.parametrize("kwargs, message", [
    (dict(trap_hz=(45, -45, 133)), r"trap_hz\[1\] \(y\) \(Hz\) must be finite and >= 0, got -45"),
    (dict(trap_hz=(45, 45)), r"trap_hz must be three numbers"),
    (dict(trap_hz="45 45 133"), r"trap_hz must be three numbers"),
    (dict(trap_hz=(0, 45, 133)), r"reference = 'x' picks trap_hz\[0\] = 0.0, which must be > 0"),
    (dict(trap_hz=(0, 45, 133), reference="geometric"), r"'geometric' needs three trap"),
    (dict(reference="w"), r"reference must be 'x', 'y', 'z', 'geometric' or a frequency"),
    (dict(reference=-3.0), r"reference \(Hz\) must be finite and > 0, got -3.0"),
    (dict(trap=(1, 1, 1)), r"trap \(ratios\) goes with length=.*got trap = \(1, 1, 1\)"),
    (dict(mass=1.6e-25, species=None), r"mass is in atomic mass units \(u\), got 1.6e-25"),
    (dict(mass_kg=163.9, species=None), r"mass_kg = 163.9 is .* u, not the mass of an atom"),
    (dict(mu=-1.0), r"mu \(Bohr magnetons\) must be finite and >= 0, got -1.0"),
])
def test_bad_trap_and_mass(kwargs, message):
    args = dict(species="164Dy", a_s=90, n_atoms=20_000, trap_hz=(45, 45, 133))
    args.update(kwargs)
    species = args.pop("species")
    with pytest.raises(ValueError, match=message):
        units.BEC(species, **args)


def test_not_numbers_and_frozen():
    with pytest.raises(TypeError, match=r"a_s \(Bohr radii\) must be a real number, got '90'"):
        units.BEC("164Dy", a_s="90", n_atoms=1, length=1e-6)
    with pytest.raises(TypeError, match="n_atoms must be a real number, got True"):
        units.BEC("164Dy", a_s=90, n_atoms=True, length=1e-6)
    b = sample()
    with pytest.raises(AttributeError, match=r"BEC.g cannot be set.*replace\(g=...\)"):
        b.g = 3.0
    with pytest.raises(ValueError, match="replace.. takes the constructor's arguments"):
        b.replace(g=3.0)
    assert b.replace(n_atoms=10_000).g0 == pytest.approx(2 * b.g0, rel=1e-14)
    assert b.replace(trap_hz=(45, 45, 133)).reference == "x"
    text = b.summary()
    assert "G0 = 332.4918" in text and "GDD0 = 105.3327" in text
    assert "BEC('164Dy'" in repr(b)


@pytest.mark.parametrize("kwargs, argument", [
    (dict(a_s=1e307), "a_s = 1e+307"),                    # g = inf
    (dict(a_dd=1e308), "a_dd = 1e+308"),                  # gdd = inf
    (dict(n_atoms=0.001), "n_atoms"),                     # not a number of atoms
    (dict(n_atoms=0.5), "n_atoms"),
    (dict(trap_hz=(1e-300, 1e-300, 1e-300)), "trap_hz"),  # the unit of length overflows
    (dict(trap_hz=(1e-300, 1e-300, 1e-300), reference="geometric"), "trap_hz"),
    (dict(trap_hz=(1e300, 45, 133)), "trap_hz"),
    (dict(species=None, mass=1e6), "mass = 1000000.0 u"),  # mass_kg refuses the same mass
])
def test_extreme_values_are_value_errors_naming_the_argument(kwargs, argument):
    """Values that gave an infinite coupling, a fraction of an atom, a
    ZeroDivisionError or a mass refused through mass_kg: each a ValueError
    naming the argument."""
    args = dict(species="164Dy", a_s=90, n_atoms=20_000, trap_hz=(45, 45, 133))
    args.update(kwargs)
    species = args.pop("species")
    with pytest.raises(ValueError) as exc:
        units.BEC(species, **args)
    assert argument in str(exc.value)
    if "mass" in kwargs:  # the same mass through mass_kg is refused alike
        with pytest.raises(ValueError, match="mass_kg"):
            units.BEC(a_s=90, n_atoms=20_000, trap_hz=(45, 45, 133),
                      mass_kg=kwargs["mass"] * units.constants()["u"])


def test_the_edges_of_the_ranges_are_accepted():
    """One atom, 1e4 u, and the largest a_s whose coupling is finite."""
    one = units.BEC(a_s=90, n_atoms=1, mass=1e4, trap_hz=(45, 45, 133))
    assert one.n_atoms == 1 and one.mass_u == 1e4 and math.isfinite(one.g)
    big = units.BEC("164Dy", a_s=1e290, n_atoms=20_000, trap_hz=(45, 45, 133))
    assert math.isfinite(big.g) and big.g > 0
