"""nl.NLSE on the CUDA backend against the CPU backend: the same numbers
(double to 1e-12 after 1000 steps), chunking bit for bit, blow-up inside a
graph, the 2SHOC tile edges, frame slots and device memory errors."""

import numpy as np
import pytest

import nlsepy as nl


PARITY = [(nd, bc) for nd in (1, 2, 3)
          for bc in ("dirichlet", "msd", "l0", "periodic", "one-sided")
          if bc != "one-sided" or nd == 1]


def smooth_state(ndim):
    """A smooth state on a background (no zeros, so MSD is well posed), with
    per-axis spacing and a potential.  1000 steps span t = 3 (1D), 8 (2D) and
    18 (3D): long enough to exercise everything, short enough that the
    dynamics amplify a one-ulp perturbation by less than 100x."""
    shape = {1: (160,), 2: (40, 36), 3: (20, 18, 16)}[ndim]
    h = {1: (0.1,), 2: (0.2, 0.25), 3: (0.3, 0.35, 0.4)}[ndim]
    axes = np.meshgrid(*[hq * (np.arange(n) - n / 2) for n, hq in zip(shape, h)],
                       indexing="ij")
    r2 = sum(X ** 2 for X in axes)
    psi = (1 + 0.4 * np.exp(-r2 / 3)) * np.exp(0.5j * axes[0] - 0.2j * axes[-1])
    V = 0.1 * np.cos(axes[0]) ** 2
    return psi, h, V


@pytest.mark.cuda
@pytest.mark.parametrize("ndim,bc", PARITY)
@pytest.mark.parametrize("scheme", ["cd", "2shoc"])
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_cpu_cuda_agree(ndim, bc, scheme, dtype):
    """CPU and CUDA agree after 1000 steps: complex128 to 1e-12 relative (no
    FMA contraction on the GPU, but sums in another order in places),
    complex64 to single-precision accuracy."""
    psi0, h, V = smooth_state(ndim)
    s, dt = -1.0, None
    if bc == "one-sided":
        # a one-sided end imposes no condition and lets boundary modes grow
        # (the nonlinear run blows up within 100 steps on both backends, and
        # the linear one amplifies a one-ulp change 10^4-fold by t = 8); the
        # linear problem without V over t = 1 amplifies it less than 10^3-fold
        s, V = 0.0, None
        dt = 0.1 * nl.stability_bound(h, ndim, 0.7, scheme)
    runs = []
    for b in ("cpu", "cuda"):
        sim = nl.NLSE(psi0, h, a=0.7, s=s, V=V, scheme=scheme, bc=bc, dtype=dtype, dt=dt,
                      backend=b)
        sim.step(1000)
        runs.append((sim.psi, sim.norm(), sim.energy()))
    (pc, nc, ec), (pg, ng, eg) = runs
    scale = np.abs(pc).max()
    if dtype == np.complex128:
        assert np.abs(pc - pg).max() < 1e-12 * scale
        assert ng == pytest.approx(nc, rel=1e-12) and eg == pytest.approx(ec, rel=1e-12)
    else:
        # "single-precision accuracy": the two float runs differ by no more
        # than twice the float run's own error against double (and by at most
        # 2 n eps32 where the dynamics do not amplify round-off)
        sim = nl.NLSE(psi0, h, a=0.7, s=s, V=V, scheme=scheme, bc=bc, dt=dt,
                      dtype=np.complex128, backend="cpu")
        sim.step(1000)
        err32 = np.abs(pc - sim.psi).max()
        tol = max(2 * err32, 2 * 1000 * np.finfo(np.float32).eps * scale)
        assert np.abs(pc - pg).max() < tol
        assert ng == pytest.approx(nc, rel=tol / scale) and eg == pytest.approx(ec, rel=tol / scale)


@pytest.mark.cuda
@pytest.mark.parametrize("scheme", ["cd", "2shoc"])
def test_cuda_chunks_bit_identical(scheme):
    """However the steps are split (graph replays of 16 steps, odd remainders
    that swap the buffers' roles, frames), the GPU ends bit-identical."""
    psi0, h, V = smooth_state(3)
    ends = []
    for frames in (1, 7):
        sim = nl.NLSE(psi0, h, scheme=scheme, bc="msd", backend="cuda")
        out = sim.run(sim.dt * 70, frames=frames)
        ends.append(sim.psi)
        assert np.array_equal(out.psi[-1], sim.psi)  # frames come back from the device
    assert np.array_equal(ends[0], ends[1])
    # intermediate frames (two device slots in flight) are the right states:
    # frame 3 of 7 is step 30, frame 30 of a run that keeps every step
    every = nl.NLSE(psi0, h, scheme=scheme, bc="msd", backend="cuda")
    fine = every.run(every.dt * 70, frames=70)
    assert fine.t[30] == out.t[3] and np.array_equal(out.psi[3], fine.psi[30])
    split = []
    for parts in ((70,), (13, 57), (1, 16, 3, 33, 17)):
        sim = nl.NLSE(psi0, h, scheme=scheme, bc="msd", backend="cuda")
        for n in parts:
            sim.step(n)
        split.append(sim.psi)
    assert all(np.array_equal(split[0], x) for x in split[1:])


@pytest.mark.cuda
def test_cuda_blowup_in_graph_and_tail():
    """A blow-up inside a graph-replayed run or in its remainder keeps the last
    finite state and reports the exact step, as on the CPU."""
    psi0, h, p = nl.examples.bright_soliton(length=20.0, h=0.1, omega=4.0)
    bound = nl.stability_bound(h, 1, 1.0, "cd")
    steps = {}
    for b in ("cpu", "cuda"):
        sim = nl.NLSE(psi0, h, a=1.0, s=1.0, scheme="cd", bc="periodic", backend=b,
                      dt=3 * bound, force=True)
        with pytest.raises(nl.BlowUpError) as info:
            sim.step(10000)
        steps[b] = (info.value.step, sim.psi)
        assert np.all(np.isfinite(sim.psi))
    assert steps["cpu"][0] == steps["cuda"][0]
    # the last finite states agree to the accuracy of a growing instability
    assert np.abs(steps["cpu"][1] - steps["cuda"][1]).max() < 1e-6 * np.abs(
        steps["cpu"][1]).max()


@pytest.mark.cuda
@pytest.mark.parametrize("bc", ["periodic", "msd", "dirichlet"])
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_cuda_2shoc_tile_edges(bc, dtype):
    """The GPU kernels work in 32 x 8 tiles (complex64 2SHOC: two points per
    thread on even lines); grids that are not multiples of the tile, smaller
    than it, with odd and even lines, agree with the CPU (25 steps: double to
    1e-12, single to 100 eps32)."""
    tol = 1e-12 if dtype == np.complex128 else 100 * np.finfo(np.float32).eps
    for shape in ((37, 11, 45), (37, 11, 46), (5, 3, 7), (5, 3, 8), (70, 9, 34), (33, 66)):
        axes = np.meshgrid(*[0.3 * np.arange(n) for n in shape], indexing="ij")
        psi0 = (1 + 0.2 * np.cos(axes[0]) * np.sin(axes[-2] + axes[-1])) * np.exp(0.3j * axes[-1])
        runs = [nl.NLSE(psi0, 0.3, scheme="2shoc", bc=bc, dtype=dtype, backend=b).step(25).psi
                for b in ("cpu", "cuda")]
        assert np.abs(runs[0] - runs[1]).max() < tol * np.abs(runs[0]).max(), shape


def test_snapshot_fetch(backend):
    """The frame slots hold the state at the time of the snapshot."""
    psi0, h, V = smooth_state(2)
    sim = nl.NLSE(psi0, h, backend=backend)
    sim.step(3)
    before = sim.psi
    sim._solver.snapshot(1)
    sim.step(5)
    assert np.array_equal(sim._solver.fetch(1), before)
    with pytest.raises(ValueError, match="slot"):
        sim._solver.snapshot(2)


@pytest.mark.cuda
def test_cuda_out_of_memory_is_backend_error():
    """A grid larger than the device: BackendError, and the device stays usable."""
    from nlsepy import _cuda
    with pytest.raises(nl.BackendError, match="out of device memory"):
        _cuda.FD((4096, 4096, 2048), (0.1,) * 3, 1.0, -1.0, 1e-4, _cuda.CD,
                 _cuda.BC_PERIODIC, _cuda.COMPLEX128)
    psi0, h, V = smooth_state(2)
    sim = nl.NLSE(psi0, h, backend="cuda").step(20)
    assert np.all(np.isfinite(sim.psi))
