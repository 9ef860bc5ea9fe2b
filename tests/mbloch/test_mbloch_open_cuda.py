"""CPU / CUDA agreement of open Maxwell-Bloch systems (density matrices,
mbloch_open.cuh).  Skipped without a CUDA device.

Both backends step the same master equation by the same RK4 with the same
coefficients; they differ in the order of the sums (over atoms per thread
on the CPU, per block and then over blocks on the GPU, and inside each
commutator element) and in the GPU's fused multiply-adds, so double
precision agrees to rounding: fields, populations and the ensemble density
matrix within 1e-10 (relative to the fields' peak) after several z steps,
Euler start included.  Systems of two and three levels run on the
register kernel (k_open_reg) and, with NLSEPY_MBLOCH_KERNEL=simt, on the
general one (k_open); the cases cover a two-level line, a Lambda system with decay,
branching, dephasing and counter-propagating Doppler classes (atoms not a
multiple of a block's), a 20-level system (5 + 15 levels, several modes,
one atom a block, each element a thread's), a 24-level system (more
elements than threads), a 60-level system whose matrices do not fit in shared
memory (the global-memory path), and float against the double CPU run
(within 1e-5 of the peak, float's error over a few hundred steps).
"""

import numpy as np
import pytest

import nlsepy as nl
from _helpers import check_z_pipeline_blow_up, check_z_pipeline_steps, cuda_device_properties

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif("cuda" not in nl.backends("MaxwellBloch"),
                                 reason="needs the CUDA backend and a CUDA device")]


def lambda_case(dtype=np.complex128):
    kw = dict(n_g=2, n_e=1, modes=(-1, 0), F=[[1.0], [0.8]], h_t=0.02, n_t=501,
              line=("gaussian", 0.3), n_atoms=7, beta=1.5, dtype=dtype,
              decay=[(1.0, 2, 0, 0.6), (1.0, 2, 1, 0.4)], dephasing=[0.0, 0.05, 0.0],
              doppler=nl.mbloch.Doppler(factors=[-1.0, 1.0], width=0.8, n_classes=9))
    t = 0.02 * np.arange(501)
    e0 = {0: 0.5 * nl.mbloch.sech_pulse(t, 1.0, 4.0, area=1.0),
          -1: 1.5 * nl.mbloch.sech_pulse(t, 3.0, 5.0, area=1.0) + 0.3}
    return kw, e0


def many_levels(n_g, n_e, n_atoms, n_t=201):
    F = nl.mbloch.franck_condon(n_g, n_e, 0.6)
    kw = dict(n_g=n_g, n_e=n_e, modes=(-2, 2), F=F, h_t=0.02, n_t=n_t, kappa_g=0.1,
              kappa_e=0.05, line=("gaussian", 0.5), n_atoms=n_atoms, beta=1.0,
              decay=[(0.3, n_g + q, q % n_g) for q in range(n_e)],
              dephasing=np.linspace(0, 0.2, n_g + n_e))
    t = 0.02 * np.arange(n_t)
    e0 = {0: nl.mbloch.sech_pulse(t, 0.5, 1.5, area=2.0),
          1: 0.5j * nl.mbloch.sech_pulse(t, 0.5, 1.5, area=1.0)}
    return kw, e0


@pytest.fixture(params=["auto", "simt"])
def open_kernel(request, monkeypatch):
    """The register kernel (k_open_reg, n <= 3) or, with
    NLSEPY_MBLOCH_KERNEL=simt, the general one (k_open) for every case."""
    if request.param == "simt":
        monkeypatch.setenv("NLSEPY_MBLOCH_KERNEL", "simt")
    else:
        monkeypatch.delenv("NLSEPY_MBLOCH_KERNEL", raising=False)
    return request.param


def both(kw, e0, n_z=4, **run):
    run = dict(h_z=0.02, n_z=n_z, save_every=2, density=True, **run)
    gpu = nl.MaxwellBloch(**kw, backend="cuda").run(e0, **run)
    cpu = nl.MaxwellBloch(**{**kw, "dtype": np.complex128}, backend="cpu").run(e0, **run)
    return gpu, cpu


def close(gpu, cpu, tol):
    scale = np.abs(cpu.fields).max()
    assert np.abs(gpu.fields - cpu.fields).max() < tol * scale
    assert np.abs(gpu.populations - cpu.populations).max() < tol
    assert np.abs(gpu.density - cpu.density).max() < tol


def test_lambda_doppler_double(open_kernel):
    kw, e0 = lambda_case()
    gpu, cpu = both(kw, e0, n_z=6)
    close(gpu, cpu, 1e-10)
    assert gpu.norm_deviation < 1e-12
    assert np.abs(cpu.fields[-1, :, 1] - cpu.fields[0, :, 1]).max() > 1e-3


def test_twenty_levels_double():
    kw, e0 = many_levels(5, 15, 6)
    gpu, cpu = both(kw, e0)
    close(gpu, cpu, 1e-10)


@pytest.mark.parametrize("dtype, tol", [(np.complex128, 1e-10), (np.complex64, 1e-5)])
def test_twenty_four_levels_loop_over_elements(dtype, tol):
    """24 levels: 300 elements i <= j, more than a block's 224 threads, so
    a thread takes several with a block stride (not one in registers); the
    matrices still fit in shared memory."""
    kw, e0 = many_levels(8, 16, 5, n_t=121)
    gpu, cpu = both({**kw, "dtype": dtype}, e0, n_z=2)
    close(gpu, cpu, tol)


def test_sixty_levels_global_memory_double():
    """60 levels: four 3600-element matrices per atom exceed a block's
    shared memory, so the states live in global memory."""
    kw, e0 = many_levels(30, 30, 3, n_t=81)
    gpu, cpu = both(kw, e0, n_z=2)
    close(gpu, cpu, 1e-10)


def test_float_against_double(open_kernel):
    kw, e0 = lambda_case(np.complex64)
    gpu, cpu = both(kw, e0)
    close(gpu, cpu, 1e-5)


def test_two_level_decay_double(open_kernel):
    """A two-level line with decay and Doppler classes (the register
    kernel's N = 2), 130 atoms: more than one block of 128."""
    kw = dict(h_t=0.02, n_t=401, line=("gaussian", 1.0), n_atoms=13, beta=1.0,
              decay=[(0.5, 1, 0)], dephasing=[0.0, 0.2],
              doppler={"factors": [1.0], "width": 0.5, "n_classes": 10})
    e0 = nl.mbloch.sech_pulse(0.02 * np.arange(401), 1.0, 4.0, area=1.5 * np.pi)
    gpu, cpu = both(kw, e0)
    close(gpu, cpu, 1e-10)


def test_steps_and_callbacks_agree():
    """Several z steps a call (steps) and one a call (callback): the same bits."""
    kw, e0 = lambda_case()
    mb = nl.MaxwellBloch(**kw, backend="cuda")
    a = mb.run(e0, h_z=0.02, n_z=6, save_every=6, populations=False)
    b = mb.run(e0, h_z=0.02, n_z=6, save_every=6, populations=False, callback=lambda s: None)
    assert np.array_equal(a.fields, b.fields)


# ------------------------------------------------------------ the z pipeline
def _solvers(kw, e0, monkeypatch, euler_substeps=11):
    """Two CUDA solvers of the open system kw: the default (several z slices
    a launch where the device holds them) and one z step a launch
    (NLSEPY_MBLOCH_PIPE=1)."""
    from nlsepy.mbloch import propagate

    def make():
        mb = nl.MaxwellBloch(**kw, backend="cuda")
        eps0 = propagate.check_run(mb, e0, 0.02, 1, 1, False, False, euler_substeps, None,
                                   None)[4]
        return propagate.make_solver(mb, eps0, 0.02, euler_substeps)

    s = make()
    monkeypatch.setenv("NLSEPY_MBLOCH_PIPE", "1")
    r = make()
    monkeypatch.delenv("NLSEPY_MBLOCH_PIPE")
    assert r.pipeline() == 1
    dev = cuda_device_properties()
    # the slices of a launch are the resident groups of the kernel's blocks
    # (a cooperative launch): every case here has fewer blocks a slice than
    # a device has multiprocessors, so a device with cooperative launch
    # holds at least two (open_pipe of cuda/mbloch/mbloch.cu)
    if dev["cooperative"]:
        assert s.pipeline() >= 2, (dev, s.pipeline())
    else:
        assert s.pipeline() == 1
        pytest.skip(f"no cooperative launch on this device: one z step a launch ({dev})")
    return s, r


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_z_pipeline_gives_the_bits_of_single_steps(open_kernel, dtype, monkeypatch):
    """Several z slices a launch (slice j + 1 follows slice j along the
    time grid, its fields made from slice j's partials four rows at a time)
    against one z step a launch, register and general kernels: the same bits
    for the fields, the polarisation, the trace monitor, and the ensemble
    density matrix after; through an Euler start of 11 substeps, launches
    shorter and longer than the pipeline, and a time grid (501 rows) that
    the chunks do not divide."""
    kw, e0 = lambda_case(dtype)
    s, r = _solvers(kw, e0, monkeypatch)
    check_z_pipeline_steps(s, r, [1, 3, s.pipeline() + 2, 1, 2])
    assert np.abs(s.get_fields()).max() > 0.1
    s.atoms(True)
    r.atoms(True)
    assert np.array_equal(s.get_density(), r.get_density())


def test_z_pipeline_twenty_levels(monkeypatch):
    """The general kernel with several atoms' blocks a slice (20 levels, 40
    atoms): the bits of one z step a launch."""
    kw, e0 = many_levels(5, 15, 40, n_t=121)
    s, r = _solvers(kw, e0, monkeypatch, euler_substeps=3)
    check_z_pipeline_steps(s, r, [s.pipeline() + 3])


def test_z_pipeline_blow_up_names_the_step_and_keeps_the_fields(open_kernel, monkeypatch):
    """A blow-up inside a launch of several z slices is reported at the z
    step where one z step a launch reports it, with the same fields kept."""
    kw, e0 = lambda_case()
    kw["beta"] = 1e305
    s, r = _solvers(kw, e0, monkeypatch)
    check_z_pipeline_blow_up(s, r)


def test_run_with_the_z_pipeline_matches_one_step_a_launch(monkeypatch):
    """MaxwellBloch.run of an open system takes the z steps between kept
    positions several a launch: the same fields, populations and density
    matrices as one z step a launch."""
    kw, e0 = lambda_case()
    out = []
    for pipe in (None, "1"):
        if pipe:
            monkeypatch.setenv("NLSEPY_MBLOCH_PIPE", pipe)
        mb = nl.MaxwellBloch(**kw, backend="cuda")
        out.append(mb.run(e0, 0.02, 90, save_every=[0.0, 0.5, 1.8], density=True))
    a, b = out
    assert np.array_equal(a.z, b.z) and len(a.z) == 3
    assert np.array_equal(a.fields, b.fields)
    assert np.array_equal(a.populations, b.populations)
    assert np.array_equal(a.density, b.density)
    assert a.norm_deviation == b.norm_deviation
