"""The Lee-Huang-Yang term of nl.DipolarGPE (gqf |psi|^3 psi): the factor Q5
and the coefficient of nl.units, the step against the NumPy statement of the
scheme, the energy parts and their bookkeeping, the reduction to 2D and 1D,
the refusals, the virial theorem of a trapped ground state and the
saturated density of a self-bound contact droplet (docs/models/dipolar.md,
"The Lee-Huang-Yang term").

Units: DipolarGPE's couplings are those of the equation (g, gdd, gqf carry
the factor option); mu and the energy parts are reported divided by option.
"""

import math

import numpy as np
import pytest

import nlsepy as nl
from _helpers import dipolar_against_reference
from nlsepy.reference.dipolar import SplitStepReference, simpson_weights

PARTS = ("e_kin", "e_trap", "e_contact", "e_dd", "e_qf", "e_rot")
CUDA = "cuda" in nl.backends("DipolarGPE")


def weights(gpe):
    """The Simpson weights of the grid as one array."""
    w = [simpson_weights(n, h) for n, h in zip(gpe.shape, gpe.spacing)]
    out = w[0]
    for wa in w[1:]:
        out = np.multiply.outer(out, wa)
    return out


def gaussian(gpe, widths, phase=0.0, seed=None, noise=0.0):
    """A normalised Gaussian of the given widths on the grid of `gpe`, with a
    phase gradient along the first axis and, with `noise`, a random part."""
    C = np.meshgrid(*gpe.coords, indexing="ij")
    psi = np.exp(-0.5 * sum((c / w) ** 2 for c, w in zip(C, widths))).astype(complex)
    if noise:
        rng = np.random.default_rng(seed)
        psi *= 1 + noise * rng.standard_normal(psi.shape)
    psi *= np.exp(1j * phase * C[0])
    return psi / math.sqrt(np.sum(weights(gpe) * np.abs(psi) ** 2))


# --------------------------------------------------------------------------
# Q5 and the coefficient of nl.units
# --------------------------------------------------------------------------

def q5_quadrature(eps, n=200):
    """Re int_0^1 (1 - eps + 3 eps u^2)^(5/2) du by Gauss-Legendre, with u - u0 =
    (1 - u0) s^2 past the zero u0 of the base (eps > 1), so the integrand is
    smooth in s."""
    u0 = math.sqrt((eps - 1) / (3 * eps)) if eps > 1 else 0.0
    s, w = np.polynomial.legendre.leggauss(n)
    s = 0.5 * (s + 1)
    u = u0 + (1 - u0) * s ** 2
    f = np.maximum(1 - eps + 3 * eps * u ** 2, 0.0) ** 2.5
    return float(np.sum(0.5 * w * f * 2 * (1 - u0) * s))


def test_q5_known_values_and_quadrature():
    assert nl.units.q5(0) == 1.0
    assert nl.units.q5(1) == pytest.approx(3 ** 2.5 / 6, rel=1e-15)
    assert nl.units.q5(0.5) == pytest.approx(1.38993, abs=5e-6)   # docs/physics tables
    assert nl.units.q5(1.3) == pytest.approx(3.71641, abs=5e-6)
    for eps in (1e-12, 1e-6, 0.1, 0.5, 0.999999, 1.0, 1.000001, 1.3, 1.45, 2.0, 5.0, 40.0):
        assert nl.units.q5(eps) == pytest.approx(q5_quadrature(eps), rel=1e-13), eps
    with pytest.raises(ValueError, match="eps"):
        nl.units.q5(-0.1)


@pytest.mark.parametrize("option", [1, 2])
def test_units_give_gqf(option):
    """gqf = option (128 sqrt(pi)/3) N^(3/2) (a_s/l)^(5/2) Q5(a_dd/a_s)."""
    dy = nl.units.BEC("164Dy", a_s=90, n_atoms=20_000, trap_hz=(45, 45, 133), option=option)
    a0 = dy.constants["a0"]
    want = option * 128 * math.sqrt(math.pi) / 3 * 20_000 ** 1.5 * (90 * a0 / dy.length) ** 2.5 \
        * nl.units.q5(dy.a_dd / 90)
    assert dy.gqf == pytest.approx(want, rel=1e-13)
    assert dy.gqf0 * option == dy.gqf and dy.eps_dd == pytest.approx(dy.a_dd / 90)
    assert dy.q5 == nl.units.q5(dy.eps_dd)
    kw = dy.dipolar_kwargs(lhy=True)
    assert kw["gqf"] == dy.gqf and "gqf" not in dy.dipolar_kwargs()
    assert "gqf" in dy.summary()
    # a_s -> 0 with dipoles: (a_s)^(5/2) Q5(a_dd/a_s) stays finite
    near = dy.replace(a_s=1e-7).gqf
    assert dy.replace(a_s=0).gqf == pytest.approx(near, rel=1e-6) and near > 0
    assert nl.units.lhy_gqf0(90, dy.a_dd, 20_000, dy.length, a0) == pytest.approx(dy.gqf0)


def test_units_refuse_lhy_with_attractive_contact():
    bec = nl.units.BEC("87Rb", a_s=-5, n_atoms=1000, length=1e-6)
    assert bec.gqf is None
    with pytest.raises(ValueError, match="a_s"):
        bec.dipolar_kwargs(lhy=True)


# --------------------------------------------------------------------------
# the step
# --------------------------------------------------------------------------

@pytest.mark.parametrize("imaginary", [False, True])
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_matches_numpy_reference(imaginary, dtype):
    """The C steps with gqf against nlsepy.reference.dipolar (libm's sqrt, exp,
    sin, cos and NumPy's FFT): round-off in double, its precision in single."""
    shape, h, trap = (24, 20, 16), 0.3, (0.5, 1.0, 1.5)
    _, b, start, err = dipolar_against_reference(shape, h, trap, imaginary, dtype,
                                                 g=300.0, gdd=40.0, gqf=150.0)
    assert err < (1e-12 if dtype == np.complex128 else 1e-5), err
    # the term acts: without it the state is elsewhere
    plain = SplitStepReference(shape, (h,) * 3, 0.005, kin=1.0, trap=[w * w for w in trap],
                               cutoff=3.0, imaginary=imaginary, dtype=dtype, g=300.0, gdd=40.0)
    plain.psi = start
    plain.step(20)
    assert np.abs(np.asarray(plain.psi) - b).max() / np.abs(b).max() > 100 * max(err, 1e-7)


def test_gqf_zero_runs_the_plain_steps():
    """A solver whose gqf went to 5 and back to 0 steps bit for bit as one that
    never had the term (the kernels skip it at 0)."""
    kw = dict(g=40.0, gdd=8.0, cutoff=3.0, trap=(0.5, 1.0, 1.5), backend="cpu")
    a = nl.DipolarGPE((20, 16, 12), 0.4, 0.01, **kw)
    b = nl.DipolarGPE((20, 16, 12), 0.4, 0.01, gqf=5.0, **kw)
    b.gqf = 0.0
    for gpe in (a, b):
        gpe.imaginary_time(30)
        gpe.real_time(30)
    assert a.psi.tobytes() == b.psi.tobytes()
    oa, ob = a.observables(), b.observables()
    assert all(oa[k] == ob[k] for k in ("mu", "energy", "norm")) and ob["e_qf"] == 0.0


# --------------------------------------------------------------------------
# the energy parts
# --------------------------------------------------------------------------

GEOMS = {
    "3d": dict(shape=(24, 20, 16), h=0.4, trap=(0.7, 1.0, 1.3), cutoff=4.0),
    "2d-xy": dict(shape=(40, 36), h=0.3, trap=(0.7, 1.0, 3.0)),
    "2d-xz": dict(shape=(40, 36), h=0.3, trap=(0.7, 3.0, 1.0)),
    "1d-x": dict(shape=(128,), h=0.1, trap=(0.7, 3.0, 3.0)),
    "1d-z": dict(shape=(128,), h=0.1, trap=(3.0, 3.0, 0.7)),
}


@pytest.mark.parametrize("option", [1, 2])
@pytest.mark.parametrize("geometry", list(GEOMS))
def test_energy_parts_add_up(geometry, option):
    """energy = sum of the parts, mu = T + U + 2G + 2D + (5/2)Q (+ e_rot), to
    rounding; e_trap, e_contact and e_qf against NumPy's Simpson sums."""
    c = GEOMS[geometry]
    omega = 0.3 if geometry in ("3d", "2d-xy") else 0.0
    gpe = nl.DipolarGPE(c["shape"], c["h"], 0.005, g=30.0, gdd=9.0, gqf=20.0, trap=c["trap"],
                        cutoff=c.get("cutoff"), geometry=geometry, option=option, omega=omega,
                        backend="cpu")
    gpe.psi = gaussian(gpe, (1.2,) * gpe.ndim, phase=0.6, seed=1, noise=0.05)
    o = gpe.observables()
    assert o["energy"] == pytest.approx(sum(o[k] for k in PARTS), rel=1e-13, abs=1e-13)
    mu = o["e_kin"] + o["e_trap"] + 2 * o["e_contact"] + 2 * o["e_dd"] + 2.5 * o["e_qf"] \
        + o["e_rot"]
    assert o["mu"] == pytest.approx(mu, rel=1e-13, abs=1e-13)
    assert (o["e_rot"] != 0) == (omega != 0) and o["e_rot"] == -omega * o["lz"]
    n, w = np.abs(gpe.psi) ** 2, weights(gpe)
    assert o["e_qf"] == pytest.approx(0.4 * gpe.gqf_eff * np.sum(w * n ** 2.5) / option, rel=1e-12)
    assert o["e_contact"] == pytest.approx(0.5 * gpe.g_eff * np.sum(w * n * n) / option, rel=1e-12)
    assert o["e_trap"] == pytest.approx(np.sum(w * gpe.potential() * n) / option, rel=1e-12)
    assert o["e_dd"] != 0 and o["e_qf"] > 0


@pytest.mark.parametrize("geometry", ["2d-xy", "2d-xz", "1d-x", "1d-z"])
def test_reduced_coefficient_integrates_the_transverse_gaussian(geometry):
    """The 2D/1D coefficient is the 3D one times int |G|^5 per confined axis
    (G the transverse ground state; sqrt(2/5) (kappa/pi)^(3/4) each), not the
    3D one: the 3D energy of phi G equals the reduced energy of phi."""
    kappa, gqf = 9.0, 50.0
    red = nl.DipolarGPE((40, 36) if geometry[0] == "2" else (64,), 0.3, 0.01, gqf=gqf,
                        geometry=geometry, backend="cpu",
                        trap={"2d-xy": (1, 1, kappa), "2d-xz": (1, kappa, 1),
                              "1d-x": (1, kappa, kappa), "1d-z": (kappa, kappa, 1)}[geometry])
    confined = 3 - red.ndim
    assert red.gqf_eff == pytest.approx(gqf * (math.sqrt(0.4) * (kappa / math.pi) ** 0.75)
                                        ** confined, rel=1e-14)
    phi = gaussian(red, (1.1,) * red.ndim)
    red.psi = phi
    # the 3D grid: the reduced axes as they are, 48 points of 0.04 on each
    # confined one (to 2.9 widths of G, so its norm is whole to 4e-5)
    kept = {"2d-xy": "xy", "2d-xz": "xz", "1d-x": "x", "1d-z": "z"}[geometry]
    shape = tuple(red.shape[kept.index(a)] if a in kept else 48 for a in "xyz")
    spacing = tuple(0.3 if a in kept else 0.04 for a in "xyz")
    full = nl.DipolarGPE(shape, spacing, 0.01, gqf=gqf, backend="cpu")
    C = np.meshgrid(*full.coords, indexing="ij")
    G = np.ones(shape)
    for q, a in enumerate("xyz"):
        if a not in kept:
            G = G * np.exp(-kappa * C[q] ** 2 / 2)
    psi = np.expand_dims(phi, tuple(q for q, a in enumerate("xyz") if a not in kept)) * G
    full.psi = psi / math.sqrt(np.sum(weights(full) * np.abs(psi) ** 2))
    # to the Simpson sums along the confined axes (the contact factor would be 11 % off)
    assert full.observables()["e_qf"] == pytest.approx(red.observables()["e_qf"], rel=1e-3)


# --------------------------------------------------------------------------
# the virial theorem and the self-bound contact droplet
# --------------------------------------------------------------------------

def trapped_ground_state(L, h, c=0.02, t=8.0):
    """The ground state of the isotropic trap (option 1) with contact, dipoles
    (eps_dd = 4 pi gdd / (3 g) = 1.7, the untruncated kernel) and the LHY term
    that stabilises them, by imaginary time to t with dt = c h^2 (the
    splitting's O(dt) bias, of the other sign, then falls as h^2 too); the
    virial residual 2T - 2U + 3(G + D) + (9/2)Q and the observables."""
    n = int(round(L / h))
    gpe = nl.DipolarGPE((n, n, n), h, c * h * h, g=40.0, gdd=16.0, gqf=60.0, trap=(1, 1, 1),
                        option=1, backend="cpu")
    gpe.imaginary_time(int(round(t / gpe.dt)))
    o = gpe.observables()
    return 2 * o["e_kin"] - 2 * o["e_trap"] + 3 * (o["e_contact"] + o["e_dd"]) + 4.5 * o["e_qf"], o


def test_virial_of_a_trapped_ground_state():
    """One grid (the slow test below takes two): the residual is small against
    the terms (about 7 in all) and every part is present."""
    r, o = trapped_ground_state(14.4, 0.45, c=0.08, t=6.0)
    assert abs(r) < 0.03, r
    assert o["e_dd"] < -0.3 and o["e_qf"] > 0.1 and o["e_contact"] > 0.5


@pytest.mark.slow
def test_virial_residual_falls_as_h_squared():
    """At h = 0.4 and 0.3 in a box of 19.2 (48^3, 64^3 points): the residual
    falls by (0.4/0.3)^2 = 1.78 (second order; measured 1.72), from 0.027 to
    0.015 against terms of about 7.  Coarser grids (h = 0.6) leave the
    Simpson sums' error, and smaller boxes the FFT's periodic images of the
    dipolar term (a floor falling as 1/L^3), in the way."""
    r1, _ = trapped_ground_state(19.2, 0.4)
    r2, _ = trapped_ground_state(19.2, 0.3)
    assert 0 < r2 < 0.02 and 1.5 < r1 / r2 < 2.1, (r1, r2)


def contact_droplet(N, h=0.6, dt=0.05, t=50.0):
    """A self-bound droplet of N atoms in free space (option 1, gdd = 0): g =
    -N, gqf = N^(3/2) (the couplings of N atoms at fixed lengths), so the
    saturated density is n0 = 25 g^2 / (36 gqf^2) = 25 / (36 N) and mu tends
    to g n0 / 6 = -25/216 as N grows; the start: a Gaussian of 0.6 times the
    flat-top radius, in a box of that radius plus 4.5 healing lengths."""
    n0 = 25 / 36
    R = (3 * N / (4 * math.pi * n0)) ** (1 / 3)
    n = int(math.ceil(2 * (R + 4.5 * 2.08) / h))
    n += n % 2
    x = (np.arange(n) - n // 2) * h
    X, Y, Z = np.meshgrid(x, x, x, indexing="ij", sparse=True)
    psi0 = np.exp(-(X ** 2 + Y ** 2 + Z ** 2) / (2 * (0.6 * R) ** 2))
    gpe = nl.DipolarGPE((n, n, n), h, dt, g=-float(N), gqf=float(N) ** 1.5, trap=(0, 0, 0),
                        option=1, backend="cpu", psi0=psi0)
    gpe.imaginary_time(int(round(t / dt)))
    return gpe.observables()


def test_contact_droplet_is_self_bound():
    """1000 atoms: bound (mu < 0), the free-space virial 2T + 3G + (9/2)Q = 0
    to the discretisation error, a peak density above the saturated one (the
    surface tension compresses a small droplet) and mu above g n0 / 6."""
    o = contact_droplet(1000)
    virial = 2 * o["e_kin"] + 3 * o["e_contact"] + 4.5 * o["e_qf"]
    assert abs(virial) < 3e-3 * abs(o["e_contact"]), (virial, o["e_contact"])
    assert -25 / 216 < o["mu"] < -0.07 and o["e_trap"] == 0 and o["e_dd"] == 0
    assert 1.0 < 1000 * o["psi0sq"] / (25 / 36) < 1.25


@pytest.mark.slow
def test_contact_droplets_saturate():
    """N = 1000 ... 10000: mu approaches g n0 / 6 as N^(-1/3) (the surface
    energy): (mu - g n0/6) N^(1/3) stays within 10 % of one value, and a fit
    mu_inf + a N^(-1/3) + b N^(-2/3) gives mu_inf = g n0 / 6 to 2 %; the peak
    density falls towards n0 (flat top) from above."""
    Ns = np.array([1000, 2000, 4000, 10000])
    obs = [contact_droplet(int(N)) for N in Ns]
    mu = np.array([o["mu"] for o in obs])
    peak = np.array([N * o["psi0sq"] for N, o in zip(Ns, obs)]) / (25 / 36)
    mu_inf = -25 / 216
    x = Ns ** (-1 / 3)
    scaled = (mu - mu_inf) / x
    assert np.all(scaled > 0) and np.ptp(scaled) < 0.1 * scaled.mean(), scaled
    fit = np.polyfit(x, mu, 2)
    assert fit[-1] == pytest.approx(mu_inf, rel=0.02), fit
    assert np.all(np.diff(peak) < 0) and 1.0 < peak[-1] < 1.1, peak


# --------------------------------------------------------------------------
# parameters, refusals, checkpoints
# --------------------------------------------------------------------------

def test_bad_gqf_is_refused():
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match=r"gqf must be finite and >= 0, got"):
            nl.DipolarGPE((16,), 0.5, 0.01, geometry="1d-x", gqf=bad, trap=(1, 2, 2))
    gpe = nl.DipolarGPE((16, 16, 16), 0.5, 0.01, gqf=1.0, backend="cpu")
    with pytest.raises(ValueError, match="gqf"):
        gpe.gqf = -0.5
    with pytest.raises(TypeError, match="gqf"):
        gpe.gqf = "1"
    assert gpe.gqf == 1.0
    with pytest.raises(ValueError, match="gqf"):  # the C core refuses by itself too
        gpe._solver.set_lhy(-1.0)


def test_free_space_needs_an_explicit_start():
    """A zero trap frequency: imaginary time refuses the default start, with the
    trap and psi0 named; an explicit start (psi0 or psi) runs."""
    kw = dict(g=-8.0, gqf=6.0, trap=(0.0, 0.0, 0.0), backend="cpu")
    gpe = nl.DipolarGPE((16, 16, 16), 0.5, 0.01, **kw)
    with pytest.raises(ValueError, match=r"trap = \(0\.0, 0\.0, 0\.0\).*psi0"):
        gpe.imaginary_time(1)
    gpe.real_time(1)  # real time from the default (unit-width) start is allowed
    psi0 = gaussian(gpe, (1.5, 1.5, 1.5))
    nl.DipolarGPE((16, 16, 16), 0.5, 0.01, psi0=psi0, **kw).imaginary_time(2)
    gpe.psi = psi0
    gpe.imaginary_time(2)
    # a reduced geometry's own axes only: a free confined axis is its own error
    nl.DipolarGPE((32,), 0.3, 0.01, geometry="1d-x", trap=(0.5, 2.0, 2.0),
                  backend="cpu").imaginary_time(1)
    with pytest.raises(ValueError, match="gamma = 0"):
        nl.DipolarGPE((32,), 0.3, 0.01, geometry="1d-x", trap=(0.0, 2.0, 2.0),
                      backend="cpu").imaginary_time(1)


def test_checkpoint_keeps_gqf(tmp_path):
    gpe = nl.DipolarGPE((16, 12, 12), 0.5, 0.01, g=10.0, gqf=3.5, trap=(1, 1, 1), backend="cpu")
    gpe.imaginary_time(5)
    gpe.save(tmp_path / "c.npz")
    back = nl.DipolarGPE.load(tmp_path / "c.npz", backend="cpu")
    assert back.gqf == 3.5
    for s in (gpe, back):
        s.real_time(5)
    assert back.psi.tobytes() == gpe.psi.tobytes()
    assert nl.DipolarGPE.load(tmp_path / "c.npz", backend="cpu", gqf=0.0).gqf == 0.0


DBEC_INPUT = {"OPTION": 2, "NATOMS": 20000, "AHO": 1.17e-6, "AS": 90.0, "ADD": 130.8,
              "CUTOFF": 4.0, "NX": 16, "NY": 16, "NZ": 12, "DX": 0.3, "DY": 0.3, "DZ": 0.3,
              "DT": 0.002, "GAMMA": 1.0, "NU": 1.0, "LAMBDA": 2.96, "NSTP": 0, "NPAS": 3,
              "NRUN": 2, "OUTPUT": "imag3d-out"}


def test_dbec_keys(tmp_path):
    """QF = 1 takes the coefficient from AS, ADD, NATOMS, AHO (nl.units); GQF
    gives it (times OPTION, as G0); both, or QF other than 0 and 1, are errors
    naming the key."""
    from nlsepy.dipolar import dbec

    def run(**keys):
        items = dict(DBEC_INPUT, **keys)
        path = tmp_path / "imag3d-input"
        path.write_text("".join(f"   {k} = {v}\n" for k, v in items.items()))
        return dbec.run(path, backend="cpu", out_dir=tmp_path)

    bec = nl.units.BEC(mass=163.9291819, a_s=90.0, a_dd=130.8, n_atoms=20000, length=1.17e-6)
    res = run(QF=1)
    assert res.gpe.gqf == pytest.approx(2 * nl.units.lhy_gqf0(90.0, 130.8, 20000, 1.17e-6,
                                                               dbec.BOHR_RADIUS), rel=1e-14)
    assert res.gpe.gqf == pytest.approx(bec.gqf, rel=1e-8)  # the CODATA sets' a0
    assert "GQF_3D" in (tmp_path / "imag3d-out.txt").read_text()
    assert run(GQF=12.5).gpe.gqf == 25.0
    assert run(QF=0).gpe.gqf == 0.0 and run().gpe.gqf == 0.0
    for keys, match in ((dict(QF=2), "QF must be 0 or 1"), (dict(QF=1, GQF=1.0), "GQF or QF"),
                        (dict(GQF=-1.0), "GQF must be >= 0"),
                        (dict(QF=1.5), "QF must be an integer")):
        with pytest.raises(dbec.InputError, match=match):
            run(**keys)


# --------------------------------------------------------------------------
# the CUDA backend (skipped without a GPU)
# --------------------------------------------------------------------------

GEOMS_CUDA = dict(GEOMS, **{"1d-x-1024": dict(shape=(1024,), h=0.0125, trap=(0.7, 3.0, 3.0)),
                             "1d-x-2048": dict(shape=(2048,), h=0.00625, trap=(0.7, 3.0, 3.0))})


@pytest.mark.skipif(not CUDA, reason="needs the CUDA backend and a CUDA device")
@pytest.mark.parametrize("geometry", list(GEOMS_CUDA))
@pytest.mark.parametrize("mode", ["imaginary", "real"])
def test_cuda_agrees_with_cpu(geometry, mode):
    """CPU and CUDA to 1e-10 relative in double after 500 steps, gqf != 0 (H1 in
    the contiguous-axis kernel k_zreg; 1D lines of 1024 and 2048 points take
    k_zline and k_h1)."""
    c = GEOMS_CUDA[geometry]
    out = []
    for backend in ("cpu", "cuda"):
        gpe = nl.DipolarGPE(c["shape"], c["h"], 0.005, g=30.0, gdd=9.0, gqf=25.0,
                            trap=c["trap"], cutoff=c.get("cutoff"),
                            geometry="-".join(geometry.split("-")[:2]), backend=backend)
        if mode == "real":
            gpe.imaginary_time(100)
            gpe.psi = gpe.psi * np.exp(0.8j * np.meshgrid(*gpe.coords, indexing="ij")[0])
            gpe.real_time(500)
        else:
            gpe.imaginary_time(500)
        out.append((gpe.psi, gpe.observables()))
    (pa, oa), (pb, ob) = out
    assert np.abs(pa - pb).max() <= 1e-9 * np.abs(pa).max()
    for k in ("norm", "mu", "energy") + PARTS:
        assert ob[k] == pytest.approx(oa[k], rel=1e-10, abs=1e-13), k
