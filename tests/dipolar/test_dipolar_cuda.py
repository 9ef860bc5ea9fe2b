"""CPU / CUDA agreement of nl.DipolarGPE (split-step Crank-Nicolson).

The two backends run the same scheme with the same tables (ss_params.c);
they differ in the order of floating-point operations only: the CUDA
backend solves the contiguous axis with warp-parallel scans, sums the
Simpson norm in another order and uses the device's exp/sincos.  After 500
steps the observables agree to 1e-10 relative in double precision.  In
single precision both backends carry their own rounding error, which
grows over the steps (about 2e-5 in the norm after 500 real-time steps):
the CUDA float run must be as close to the double-precision result as the
CPU float run is (within a factor 3, or 1e-5 relative).  Skipped where no
CUDA device is present (the rest of the suite runs every test on every
backend).
"""

import numpy as np
import pytest

import nlsepy as nl

BACKENDS = ("cpu", "cuda")
pytestmark = pytest.mark.skipif("cuda" not in nl.backends("DipolarGPE"),
                                reason="needs the CUDA backend and a CUDA device")

CASES = {
    "3d": dict(shape=(32, 24, 20), h=0.4, trap=(0.5, 1.0, 1.5)),
    "2d-xy": dict(shape=(48, 40), h=0.3, trap=(0.5, 1.0, 1.5)),
    "2d-xz": dict(shape=(48, 40), h=0.3, trap=(0.5, 1.0, 1.5)),
    "1d-x": dict(shape=(256,), h=0.1, trap=(0.5, 2.0, 2.0)),
    "1d-z": dict(shape=(256,), h=0.1, trap=(2.0, 2.0, 0.5)),
}
KEYS = ("norm", "norm_sum", "mu", "energy", "mu_dbec", "energy_dbec", "psi0sq")


def pair(geometry, dtype, dipoles, **kw):
    c = CASES[geometry]
    args = dict(g=200.0 if geometry == "3d" else 20.0, gdd=30.0 if dipoles else 0.0,
                cutoff=5.0 if geometry == "3d" else None, trap=c["trap"],
                geometry=geometry, dtype=dtype)
    args.update(kw)
    return [nl.DipolarGPE(c["shape"], c["h"], 0.005, backend=b, **args) for b in BACKENDS]


def moving(gpe, k=0.8):
    x = gpe.coords[0].reshape((-1,) + (1,) * (gpe.ndim - 1))
    return gpe.psi * np.exp(1j * k * x)


def values(gpe):
    o = gpe.observables()
    return np.array([o[k] for k in KEYS] + list(o["x2"]))


def compare_single(ref, a, b):
    """a (CPU) and b (CUDA) in float against ref in double."""
    r = values(ref)
    ea = np.abs(values(a) - r) / np.abs(r)
    eb = np.abs(values(b) - r) / np.abs(r)
    assert np.all(eb <= np.maximum(3 * ea, 1e-5)), (KEYS, ea, eb)
    pr = ref.psi
    scale = np.abs(pr).max()
    da = np.abs(a.psi - pr).max() / scale
    db = np.abs(b.psi - pr).max() / scale
    assert db <= max(3 * da, 1e-5), (da, db)


def compare(a, b, tol):
    oa, ob = a.observables(), b.observables()
    for key in KEYS:
        assert ob[key] == pytest.approx(oa[key], rel=tol, abs=tol * 1e-3), key
    for u, v in zip(oa["x2"], ob["x2"]):
        assert v == pytest.approx(u, rel=tol)
    pa, pb = a.psi, b.psi
    scale = np.abs(pa).max()
    assert np.abs(pa - pb).max() <= tol * 10 * scale


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64], ids=["c128", "c64"])
@pytest.mark.parametrize("dipoles", [True, False], ids=["dd", "nodd"])
@pytest.mark.parametrize("mode", ["imaginary", "real"])
@pytest.mark.parametrize("geometry", list(CASES))
def test_cpu_and_cuda_agree_after_500_steps(geometry, mode, dipoles, dtype):
    a, b = pair(geometry, dtype, dipoles)
    runs = [a, b]
    if dtype == np.complex64:
        runs.append(pair(geometry, np.complex128, dipoles)[0])
    for gpe in runs:
        if mode == "real":
            gpe.imaginary_time(100)
            gpe.psi = moving(gpe).astype(gpe.dtype)
            gpe.real_time(500)
        else:
            gpe.imaginary_time(500)
            assert gpe.is_real
    if dtype == np.complex128:
        compare(a, b, 1e-10)
    else:
        compare_single(runs[2], a, b)


@pytest.mark.parametrize("geometry", ["3d", "2d-xz", "1d-x"])
def test_agree_with_obstacle_potential_and_ramp(geometry):
    axes = {"3d": ("y", "x"), "2d-xz": ("x", None), "1d-x": ("x", None)}[geometry]
    ob = nl.Obstacle(V0=5.0, sigma=1.0, velocity=0.4, start=-2.0, t_move=1.0, t_off=0.5,
                     move_axis=axes[0], beam_axis=axes[1])
    a, b = pair(geometry, np.complex128, True, obstacle=ob)
    rng = np.random.default_rng(3)
    U = 0.1 * rng.standard_normal(CASES[geometry]["shape"])
    for gpe in (a, b):
        gpe.V = U
        gpe.imaginary_time(200, ramp=True)
        gpe.psi = moving(gpe, 0.3)
        gpe.real_time(300)
    compare(a, b, 1e-10)
    for keep in range(1 << a.ndim):
        axes = tuple(ax for q, ax in enumerate(a.axes) if keep >> q & 1)
        np.testing.assert_allclose(b.density(axes), a.density(axes), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(b.potential(a.t), a.potential(a.t), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(b.dipolar_potential(), a.dipolar_potential(), rtol=1e-9, atol=1e-11)


def test_complex_state_in_imaginary_time_agrees():
    a, b = pair("3d", np.complex128, True)
    for gpe in (a, b):
        gpe.psi = moving(gpe, 0.5)
        gpe.imaginary_time(300)
    compare(a, b, 1e-10)


def test_out_of_device_memory_is_a_backend_error():
    with pytest.raises(nl.BackendError, match="device memory"):
        nl.DipolarGPE((4096, 4096, 4096), 0.1, 0.01, trap=(1, 1, 1), backend="cuda",
                      dipolar=True)


def test_memory_per_point_is_reported():
    gpe = nl.DipolarGPE((64, 64, 64), 0.2, 0.01, gdd=1.0, cutoff=5.0, trap=(1, 1, 1),
                        backend="cuda")
    per_point = gpe.memory_bytes / 64 ** 3
    # state + backup (2 x 16) + density/FFT buffer (8) + kernel (4) + cuFFT work
    assert 44 <= per_point < 120


@pytest.mark.parametrize("n", [1024, 4096])
@pytest.mark.parametrize("mode", ["imaginary", "real"])
def test_long_contiguous_lines_agree(n, mode):
    """Lines longer than 512 points take the shared-memory solve (1024) or
    the one-thread-per-line solve (4096) instead of the register one."""
    kw = dict(g=20.0, gdd=3.0, trap=(0.5, 2.0, 2.0), geometry="1d-x")
    a, b = [nl.DipolarGPE((n,), 25.6 / n, 0.002, backend=be, **kw) for be in BACKENDS]
    for gpe in (a, b):
        gpe.imaginary_time(200)
        if mode == "real":
            gpe.psi = moving(gpe)
            gpe.real_time(200)
    compare(a, b, 1e-10)


@pytest.mark.parametrize("mode", ["imaginary", "real"])
@pytest.mark.parametrize("geometry", list(CASES) + ["1d-long"])
def test_recorded_moments_agree_with_observables_and_the_cpu(geometry, mode):
    """The moments a CUDA stepping call records (the last solve's partial
    sums, k_norm) are the CUDA observables' norm and <x_a^2> to round-off,
    and the CPU's rows to 1e-9; recording leaves the state as plain
    stepping leaves it.  "1d-long": 4096 points, the one-thread-per-line
    solve ends the step."""
    kw = {}
    if geometry == "1d-long":
        geometry, kw = "1d-x", dict(shape=(4096,), h=25.6 / 4096)
    c = dict(CASES[geometry], **kw)
    runs = [nl.DipolarGPE(c["shape"], c["h"], 0.005, g=20.0, gdd=3.0, trap=c["trap"],
                          geometry=geometry, cutoff=5.0 if geometry == "3d" else None,
                          backend=b) for b in ("cpu", "cuda", "cuda")]
    for gpe in runs:
        gpe.imaginary_time(50)
        if mode == "real":
            gpe.psi = moving(gpe)
    cpu, cuda, plain = runs
    # 1100 rows: more than the device holds (1024) before the host collects them
    rows_cpu = cpu._steps_recording(mode, 1100, 1)
    rows = cuda._steps_recording(mode, 1100, 1)
    assert rows.shape == rows_cpu.shape == (1100, 1 + cuda.ndim)
    assert np.abs(rows / rows_cpu - 1).max() < 1e-9
    (plain.real_time if mode == "real" else plain.imaginary_time)(1100)
    assert np.array_equal(plain.psi, cuda.psi)
    o = cuda.observables()
    last = np.array([o["norm"], *o["x2"]])
    assert np.abs(rows[-1] / last - 1).max() < 1e-12
    if mode == "imaginary":
        assert np.all(rows[:, 0] == 1.0)
    # a phase and a stride: the rows of the steps whose count is a multiple of 7
    a = cuda._steps_recording(mode, 30, 7, phase=5)
    b = cpu._steps_recording(mode, 30, 7, phase=5)
    assert a.shape == b.shape == (5, 1 + cuda.ndim) and np.abs(a / b - 1).max() < 1e-9
