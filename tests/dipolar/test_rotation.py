"""The rotating frame of nl.DipolarGPE (-Omega L_z): exact states of the
isotropic harmonic trap, the mirror symmetry, the refusals, and the
scheme's convergence order.

Units: the 2D isotropic trap (gamma = nu = 1) without interactions has the
ground state exp(-r^2/2) (mu = 1) and the centred unit vortex
(x + iy) exp(-r^2/2) (mu = 2 at Omega = 0); both are eigenstates of L_z, so
in the rotating frame mu = 1 and mu = 2 - Omega, lz = 0 and 1, in either
rescaling option.  In 3D (lambda = 1) add 1/2.
"""

import numpy as np
import pytest

import nlsepy as nl

H = 0.2


def grid(n, h=H):
    x = (np.arange(n) - n // 2) * h
    return np.meshgrid(x, x, indexing="ij")


def vortex2d(n, h=H, charge=1):
    X, Y = grid(n, h)
    z = X + 1j * np.sign(charge) * Y
    return z ** abs(charge) * np.exp(-(X ** 2 + Y ** 2) / 2)


def gpe2d(n=48, h=H, dt=0.005, omega=0.5, option=2, dtype=np.complex128, **kw):
    return nl.DipolarGPE((n, n), h, dt, geometry="2d-xy", trap=(1, 1, 1), option=option,
                         backend="cpu", omega=omega, dtype=dtype, **kw)


def normalised(o):
    return o["mu"] / o["norm"], o["energy"] / o["norm"], o["lz"] / o["norm"]


@pytest.mark.parametrize("option", [1, 2])
def test_vortex_is_stationary_in_the_rotating_frame(option):
    """(x + iy) e^{-r^2/2}: mu = 2 - Omega and lz = 1 as given and after imaginary
    time (t = 5: the grid's own vortex; the l = 0 ground state, mu = 1, which
    the asymmetric grid seeds at 1e-5, grows only by e^{(1 - Omega) t}); then
    real time keeps it (the density to the splitting error, O(dt))."""
    om = 0.5
    gpe = gpe2d(omega=om, option=option, dt=0.0025)
    gpe.psi = vortex2d(48)
    mu, en, lz = normalised(gpe.observables())
    assert abs(lz - 1) < 2e-3 and abs(mu - (2 - om)) < 5e-3
    assert abs(en - mu) < 1e-12  # g = 0
    gpe.imaginary_time(2000)
    mu, _, lz = normalised(gpe.observables())
    assert abs(mu - (2 - om)) < 1e-3 and abs(lz - 1) < 5e-4
    d0 = np.abs(gpe.psi) ** 2
    gpe.real_time(400)  # t = 1
    mu1, _, lz1 = normalised(gpe.observables())
    assert abs(mu1 - mu) < 2e-4 and abs(lz1 - lz) < 2e-5
    assert np.max(np.abs(np.abs(gpe.psi) ** 2 - d0)) < 1.5e-2 * d0.max()


@pytest.mark.parametrize("option", [1, 2])
def test_ground_state_of_a_rotating_trap(option):
    """g = 0, Omega below the trap frequency: the Omega = 0 Gaussian, mu = 1, lz = 0."""
    X, Y = grid(48)
    gpe = gpe2d(omega=0.6, option=option)
    gpe.psi = np.exp(-(X ** 2 + 2 * Y ** 2) / 3) * (1 + 0.2 * X + 0.1j * Y)
    gpe.imaginary_time(3000)
    mu, _, lz = normalised(gpe.observables())
    assert abs(mu - 1) < 2e-3
    assert abs(lz) < 1e-5  # the start's l = +-1 part decays as e^{-(1 -+ Omega) t}


def test_second_order_in_h():
    """The rotating vortex found by imaginary time against the exact one: the
    density's error falls 4x with h/2 (second order); lz's, a Rayleigh-like
    quotient of the five-point derivative, at least as fast."""
    om, L = 0.5, 9.6
    err_d, err_lz = [], []
    for n in (32, 64):
        h = L / n
        gpe = gpe2d(n=n, h=h, dt=0.002, omega=om)
        exact = vortex2d(n, h)
        gpe.psi = exact
        gpe.imaginary_time(2500)  # t = 5, as above
        exact /= np.sqrt(np.sum(np.abs(exact) ** 2) * h * h)
        err_d.append(np.max(np.abs(np.abs(gpe.psi) ** 2 - np.abs(exact) ** 2)))
        err_lz.append(abs(normalised(gpe.observables())[2] - 1))
    order = np.log2(err_d[0] / err_d[1])
    assert 1.7 < order < 2.6, (err_d, order)
    assert np.log2(err_lz[0] / err_lz[1]) > 1.8, err_lz


def test_mirror_image():
    """conj(psi) with -Omega is the mirror of psi with Omega, to rounding (imaginary
    time: the scheme's tables are exact conjugates)."""
    X, Y = grid(40)
    psi0 = np.exp(-(X ** 2 + Y ** 2) / 2) * ((X - 0.3) + 1j * (Y + 0.2)) * (1 + 0.1 * X * Y)
    a = gpe2d(n=40, omega=0.7, g=30.0)
    b = gpe2d(n=40, omega=-0.7, g=30.0)
    a.psi, b.psi = psi0, np.conj(psi0)
    a.imaginary_time(300)
    b.imaginary_time(300)
    oa, ob = a.observables(), b.observables()
    assert oa["lz"] > 0.1
    assert abs(oa["lz"] + ob["lz"]) < 1e-12 * abs(oa["lz"])
    assert abs(oa["mu"] - ob["mu"]) < 1e-12 * abs(oa["mu"])
    np.testing.assert_allclose(b.psi, np.conj(a.psi), rtol=0, atol=1e-13)


def test_omega_zero_is_the_plain_solver_bit_for_bit():
    X, Y = grid(32)
    psi0 = np.exp(-(X ** 2 + Y ** 2) / 2) * (1 + 0.3j * X)
    a = gpe2d(n=32, omega=0.0, g=20.0)
    b = gpe2d(n=32, omega=0.4, g=20.0)
    b.omega = 0.0
    for s in (a, b):
        s.psi = psi0
        s.imaginary_time(50)
        s.real_time(50)
    assert np.array_equal(a.psi, b.psi)


def test_3d_vortex_line():
    """3D, lambda = 1: the vortex line along z, mu = 5/2 - Omega, lz = 1, stationary."""
    n, h, om = 32, 0.3, 0.4
    x = (np.arange(n) - n // 2) * h
    X, Y, Z = np.meshgrid(x, x, x, indexing="ij")
    gpe = nl.DipolarGPE((n, n, n), h, 0.005, trap=(1, 1, 1), backend="cpu", omega=om)
    gpe.psi = (X + 1j * Y) * np.exp(-(X ** 2 + Y ** 2 + Z ** 2) / 2)
    mu, _, lz = normalised(gpe.observables())
    assert abs(lz - 1) < 1e-2 and abs(mu - (2.5 - om)) < 3e-2
    gpe.real_time(100)
    mu1, _, lz1 = normalised(gpe.observables())
    assert abs(lz1 - 1) < 1e-2 and abs(mu1 - (2.5 - om)) < 3e-2


def test_float_agrees_with_double():
    X, Y = grid(32)
    psi0 = vortex2d(32) * (1 + 0.1 * X)
    out = []
    for dt in (np.complex64, np.complex128):
        gpe = gpe2d(n=32, omega=0.5, g=10.0, dtype=dt)
        gpe.psi = psi0
        gpe.imaginary_time(100).real_time(100)
        out.append(gpe.observables())
    assert abs(out[0]["lz"] - out[1]["lz"]) < 1e-4
    assert abs(out[0]["mu"] - out[1]["mu"]) < 1e-4 * abs(out[1]["mu"])


def test_omega_settable_between_calls_and_saved(tmp_path):
    gpe = gpe2d(n=32, omega=0.0, g=10.0)
    for om in (0.1, 0.2, 0.3):  # a ramp
        gpe.omega = om
        gpe.imaginary_time(20)
    assert gpe.omega == 0.3
    path = tmp_path / "rot.npz"
    gpe.save(path)
    back = nl.DipolarGPE.load(path, backend="cpu")
    assert back.omega == 0.3
    np.testing.assert_array_equal(back.psi, gpe.psi)
    gpe.imaginary_time(10)
    back.imaginary_time(10)
    np.testing.assert_array_equal(back.psi, gpe.psi)


def test_refusals():
    gpe = gpe2d(n=32, omega=0.5)
    gpe.omega = 1.0  # allowed: real time has no bound
    with pytest.raises(ValueError, match=r"min\(gamma, nu\) = 1"):
        gpe.imaginary_time(5)
    gpe.imaginary_time(2, force=True)
    with pytest.raises(ValueError, match="omega"):
        gpe.omega = float("nan")
    with pytest.raises(TypeError, match="omega"):
        gpe.omega = "fast"
    with pytest.raises(ValueError, match="2d-xz"):
        nl.DipolarGPE((16, 16), 0.5, 0.01, geometry="2d-xz", backend="cpu", omega=0.3)
    with pytest.raises(ValueError, match="1d-x"):
        nl.DipolarGPE((16,), 0.5, 0.01, geometry="1d-x", backend="cpu", omega=0.3)
    aniso = nl.DipolarGPE((16, 16), 0.5, 0.01, geometry="2d-xy", trap=(1.0, 0.7, 1.0),
                          backend="cpu", omega=0.75)
    with pytest.raises(ValueError, match="0.7"):
        aniso.imaginary_time(1)


@pytest.mark.skipif("cuda" not in nl.backends("DipolarGPE"), reason="no CUDA backend here")
@pytest.mark.parametrize("geometry", ["2d-xy", "3d"])
@pytest.mark.parametrize("gdd", [0.0, 2.0])
def test_cuda_agrees_with_cpu(geometry, gdd):
    """CPU and CUDA to 1e-10 relative in double: imaginary then real time, rotating."""
    shape = (40, 36) if geometry == "2d-xy" else (24, 20, 16)
    h = 0.3
    x = [(np.arange(n) - n // 2) * h for n in shape]
    C = np.meshgrid(*x, indexing="ij")
    psi0 = np.exp(-0.5 * sum(c ** 2 for c in C)) * ((C[0] - 0.2) + 1j * (C[1] + 0.1))
    out = []
    for backend in ("cpu", "cuda"):
        gpe = nl.DipolarGPE(shape, h, 0.004, g=20.0, gdd=gdd, trap=(1.0, 1.2, 1.5),
                            geometry=geometry, backend=backend, omega=0.6)
        gpe.psi = psi0
        gpe.imaginary_time(150)
        gpe.omega = 0.9
        gpe.real_time(150)
        out.append((gpe.psi, gpe.observables()))
    (pa, oa), (pb, ob) = out
    assert np.max(np.abs(pa - pb)) < 1e-10 * np.max(np.abs(pa))
    for k in ("mu", "energy", "lz", "norm"):
        assert abs(oa[k] - ob[k]) < 1e-10 * max(1.0, abs(oa[k])), k
