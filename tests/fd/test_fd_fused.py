"""The fused RK4 step (``nl.NLSE(..., fused=True)``, one pass over the grid
per step) against the staged one (four passes, the reference).

On the CPU the fused step runs the staged kernels' point formulas in the
same order on overlapped tiles, so after 100 steps the states are equal bit
for bit, for every boundary condition, scheme, dimension and dtype, on
shapes thinner than a box's halo, shapes that are not multiples of the tile
(several tiles per axis) and the thinnest grids the stencils take (3 points
on an axis; the 1-point axis of a "1 x N" grid is refused by the
constructor).  A wrong halo depth, region or tile offset changes points at
tile edges by O(dt), far above one ulp.  On CUDA the fused kernel (1D, 2D)
sums in another order than the staged kernels: 1e-13 relative in double
and 3e-6 in single after 100 steps (states of size O(1) whose dynamics
amplify a rounding change by far less than 100 in that time).
"""

import itertools

import numpy as np
import pytest

import nlsepy as nl

BCS = ("dirichlet", "msd", "l0", "periodic", "one-sided")

# thin, odd and tile-unaligned shapes (CPU tiles: 1D 4096; closed edges
# 2D 64 x 512, 3D 16 x 16 x 256 (CD), 32 x 32 x 64 (2SHOC); periodic, the
# streamed boxes, chunks of up to 256 planes (3D; 128 in 2D) times 64 x 256
# (3D) or 2048 (2D) points across: (140, 70, 300) has several tiles across,
# (301, 9, 40) several chunks along axis 0, the last a part chunk of odd
# length, so that the streamed step's last iteration takes fewer planes than
# the four a stage takes at a time, as in (3, 7, 5) and (37, 35, 70))
SHAPES = {1: [(5,), (61,), (9001,)], 2: [(3, 41), (41, 3), (67, 530), (133, 2100)],
          3: [(3, 7, 5), (37, 35, 70), (20, 3, 131), (36, 66, 258), (301, 9, 40),
              (140, 70, 300)]}
#: the largest 3D grid on the CPU (two minutes in all on 2 cores): `make
#: test-all`.  (36, 66, 258) already cuts every axis into several tiles with
#: a part tile at the end in each form of csrc/fd/fd.c's fused_tile (3D CD
#: 16 x 16 x 256, 2SHOC 32 x 32 x 64, periodic 256 x 64 x 256 narrowed to
#: as many tiles as the threads want)
SLOW_CPU = {(140, 70, 300)}


def state(shape, dtype, seed=3, noise=0.05, kx=0.7):
    """O(1) everywhere (MSD is well posed), a phase gradient `kx`, a
    random part (`noise`), a potential."""
    rng = np.random.default_rng(seed)
    axes = np.meshgrid(*[np.linspace(-2, 2, n) for n in shape], indexing="ij")
    psi = (1 + 0.3 * np.exp(-sum(x ** 2 for x in axes))) * np.exp(1j * kx * axes[0])
    psi = psi + noise * (rng.standard_normal(shape) + 1j * rng.standard_normal(shape))
    V = 0.2 * sum(x ** 2 for x in axes)
    return psi.astype(dtype), V


def pair(shape, scheme, bc, dtype, backend="cpu", steps=100, noise=0.05, kx=0.7, spacing=0.3,
         potential=True):
    psi, V = state(shape, dtype, noise=noise, kx=kx)
    V = V if potential else None
    out = []
    for fused in (False, True):
        sim = nl.NLSE(psi, spacing, s=-1.0, V=V, scheme=scheme, bc=bc, dtype=dtype,
                      backend=backend, fused=fused)
        try:  # one-sided and MSD edges of this non-uniform background grow
            sim.step(steps)  # boundary modes: a blow-up is compared too
        except nl.BlowUpError:
            assert bc in ("one-sided", "msd")
        out.append(sim)
    return out


CPU_CASES = [pytest.param(shape, bc, marks=pytest.mark.slow) if shape in SLOW_CPU else (shape, bc)
             for nd, shapes in SHAPES.items() for shape in shapes
             for bc in BCS if bc != "one-sided" or nd == 1]


@pytest.mark.parametrize("shape,bc", CPU_CASES)
@pytest.mark.parametrize("scheme", ["cd", "2shoc"])
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_fused_equals_staged_on_the_cpu(shape, bc, scheme, dtype):
    staged, fused = pair(shape, scheme, bc, dtype, steps=100 if np.prod(shape) < 5e4 else 20)
    assert staged.last_kernel == "staged" and fused.last_kernel == "fused"
    assert np.isfinite(staged.psi).all() and staged._steps > 2
    np.testing.assert_array_equal(fused.psi, staged.psi)
    assert fused.t == staged.t and fused._steps == staged._steps


def test_auto_and_the_kernel_names():
    psi, _ = state((20, 24), np.complex128)
    sim = nl.NLSE(psi, 0.3, scheme="cd", bc="periodic", backend="cpu")
    assert sim.last_kernel is None
    sim.step(1)
    assert sim.last_kernel == "fused"  # the CPU's choice: the fused step
    for bad in ("yes", 1, None, 2.0):
        with pytest.raises(ValueError, match="fused must be True, False or 'auto'"):
            nl.NLSE(psi, 0.3, fused=bad, backend="cpu")


def test_traffic_model_of_both_forms():
    """Fused: Psi^n read over the tile's box, Psi^{n+1} written (about 2
    complex values per point for a large tile); staged: 16 (CD)."""
    psi, _ = state((64, 1024), np.complex128)
    sim = nl.NLSE(psi, 0.3, scheme="cd", bc="periodic", backend="cpu")
    n = psi.size
    assert sim.bytes_per_step(fused=False) == 16 * 16 * n
    tile = sim._solver.fused_tile()
    assert len(tile) == 2 and all(0 < t <= m for t, m in zip(tile, psi.shape))
    box = np.prod([t + 8 for t in tile]) / np.prod(tile)  # CD: H = 4 points on each side
    assert sim.bytes_per_step(fused=True) == pytest.approx(16 * (box + 1) * n)


@pytest.mark.parametrize("bc, values", [("periodic", 16), ("dirichlet", 28)])
def test_traffic_model_of_2shoc(bc, values):
    """2SHOC on a periodic grid composes its two steps into one sweep a
    stage (no D array): the traffic of CD; closed grids keep the two steps,
    12 values more (a D write and read and a second input read a stage)."""
    psi, _ = state((40, 48), np.complex128)
    sim = nl.NLSE(psi, 0.3, scheme="2shoc", bc=bc, backend="cpu")
    assert sim.bytes_per_step(fused=False) == values * 16 * psi.size


@pytest.mark.parametrize("fused", [False, True])
def test_blow_up_keeps_the_last_good_state(fused):
    """A dt far above the bound: BlowUpError at the same step with the same
    last finite state in both forms."""
    psi, _ = state((24, 30), np.complex128)
    kw = dict(s=1.0, scheme="2shoc", bc="periodic", dt=0.2, force=True, backend="cpu")
    ref = nl.NLSE(psi, 0.3, fused=False, **kw)
    with pytest.raises(nl.BlowUpError) as r:
        ref.step(10 ** 4)
    sim = nl.NLSE(psi, 0.3, fused=fused, **kw)
    with pytest.raises(nl.BlowUpError) as e:
        sim.step(10 ** 4)
    assert e.value.step == r.value.step and sim.t == ref.t
    assert np.isfinite(sim.psi).all()
    np.testing.assert_array_equal(sim.psi, ref.psi)


def test_ctrl_c_stops_between_fused_calls():
    """SIGINT during fused steps: booked at a chunk boundary, then going on
    equals one uninterrupted call (test_fd_hardening's mechanism)."""
    from test_fd_hardening import interrupt, make
    sim = make("cpu", fused=True)
    interrupt(lambda: sim.step(10 ** 9))
    k = sim._steps
    assert sim.last_kernel == "fused" and 0 < k < 10 ** 9
    sim.step(13)
    ref = make("cpu", fused=False)
    ref.step(k + 13)
    assert np.array_equal(sim.psi, ref.psi) and sim.t == ref.t


# --------------------------------------------------------------------- CUDA
CUDA_CASES = [(shape, bc) for nd, shapes in SHAPES.items() for shape in shapes
              for bc in BCS if (bc != "one-sided" or nd == 1) and (nd < 3 or bc == "periodic")]


def cuda_form(shape, bc, scheme, dtype):
    """The form `fused=True` runs on CUDA: the streamed kernel on periodic
    2D and 3D grids (3D 2SHOC in two passes of two stages), the box kernel
    in 1D and on closed 2D grids, staged otherwise."""
    if len(shape) == 3 and bc != "periodic":
        return "staged"
    return "fused"


@pytest.mark.cuda
@pytest.mark.parametrize("shape,bc", CUDA_CASES)
@pytest.mark.parametrize("scheme", ["cd", "2shoc"])
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_cuda_fused_matches_staged(shape, bc, scheme, dtype):
    """The smooth state (no random part, and no phase gradient at one-sided
    ends: the noisy state grows boundary modes under MSD and one-sided ends,
    which amplify rounding differences far beyond the tolerance): fused
    against staged on the GPU, and against the CPU in double to
    test_fd_cuda.py's 1e-12.  One-sided ends grow boundary modes even so
    (the 5-point grid blows up after 14 steps): 10 steps there.  Periodic 2D
    and 3D grids run the streamed kernel: these shapes cut the planes into
    several boxes with a part box at the end, and axis 0 into several
    chunks (at least 16 planes each in CD, 32 in 2SHOC), or are thinner than
    a box's halo (3 points, wrapped)."""
    kx, n = (0.0, 10) if bc == "one-sided" else (0.7, 100)
    if len(shape) == 3 and np.prod(shape) > 5e5:
        n = 20
    staged, fused = pair(shape, scheme, bc, dtype, backend="cuda", steps=n, noise=0.0, kx=kx)
    assert staged.last_kernel == "staged" and fused.last_kernel == cuda_form(shape, bc, scheme,
                                                                             dtype)
    assert staged._steps == fused._steps == n
    ref = staged.psi
    tol = 1e-13 if dtype == np.complex128 else 3e-6
    scale = np.abs(ref).max()
    assert np.abs(fused.psi - ref).max() <= tol * scale
    if dtype == np.complex128:
        cpu, _ = pair(shape, scheme, bc, dtype, steps=n, noise=0.0, kx=kx)
        assert np.abs(fused.psi - cpu.psi).max() <= 1e-12 * scale


@pytest.mark.cuda
@pytest.mark.parametrize("shape", [(67, 530), (37, 35, 70), (36, 66, 258)])
@pytest.mark.parametrize("scheme", ["cd", "2shoc"])
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_cuda_fused_without_a_potential(shape, scheme, dtype):
    """V = None: the streamed kernel's march without a potential is its own
    code (no V queue, no V loads), against the staged stages as above."""
    staged, fused = pair(shape, scheme, "periodic", dtype, backend="cuda", steps=40, noise=0.0,
                         potential=False)
    assert fused.last_kernel == cuda_form(shape, "periodic", scheme, dtype)
    ref = staged.psi
    tol = 1e-13 if dtype == np.complex128 else 3e-6
    assert np.abs(fused.psi - ref).max() <= tol * np.abs(ref).max()


@pytest.mark.cuda
@pytest.mark.parametrize("shape,scheme,dtype", [
    ((24, 64, 64), "cd", np.complex128),
    ((24, 64, 64), "2shoc", np.complex128),  # the passes on points
    ((24, 64, 65), "2shoc", np.complex64),  # on points (odd contiguous axis)
    ((24, 64, 64), "2shoc", np.complex64)])  # on pairs
def test_cuda_streamed_tile_and_traffic(shape, scheme, dtype):
    """The streamed kernel's tile is its box (40 points across, 17-25 rows)
    less a halo of 4 on each side, whatever threads a block has (the 2SHOC
    passes on points: a thread a point of their first stage), and the
    traffic model reads the box from it (3D 2SHOC: the first pass reads
    Psi^n over the box and writes two arrays over the tile, the second reads
    its input over the box, Psi^n over the box less 2 and acc over the
    tile, and writes Psi^{n+1})."""
    psi, _ = state(shape, dtype)
    sim = nl.NLSE(psi, 0.3, bc="periodic", scheme=scheme, dtype=dtype, fused=True,
                  backend="cuda")
    sim.step(1)
    assert sim.last_kernel == "fused"
    t = np.array(sim._solver.fused_tile())
    assert len(t) == 3 and 0 < t[0] <= shape[0] and 9 <= t[1] <= 17 and t[2] == 32
    c = np.dtype(dtype).itemsize
    box, mid = np.prod(t + 8) / np.prod(t), np.prod(t + 4) / np.prod(t)
    values = box + 1 if scheme == "cd" else 2 * box + mid + 4
    assert sim.bytes_per_step(fused=True) == pytest.approx(c * values * psi.size)


@pytest.mark.parametrize("shape", [(37, 40), (20, 22, 26)])
@pytest.mark.parametrize("scheme", ["cd", "2shoc"])
def test_fused_with_a_spacing_per_axis(backend, shape, scheme):
    """Each axis its own spacing (an axis' 1/h^2 applied to another one
    would go unseen with one spacing): fused against staged, bit for bit on
    the CPU, to rounding on CUDA and to 1e-12 of the CPU there."""
    h = (0.3, 0.26, 0.34)[:len(shape)]
    staged, fused = pair(shape, scheme, "periodic", np.complex128, backend=backend, steps=50,
                         noise=0.0, spacing=h)
    assert staged.last_kernel == "staged"
    ref = staged.psi
    scale = np.abs(ref).max()
    if backend == "cpu":
        assert fused.last_kernel == "fused"
        np.testing.assert_array_equal(fused.psi, ref)
        return
    assert fused.last_kernel == cuda_form(shape, "periodic", scheme, np.complex128)
    assert np.abs(fused.psi - ref).max() <= 1e-13 * scale
    cpu, _ = pair(shape, scheme, "periodic", np.complex128, steps=50, noise=0.0, spacing=h)
    assert np.abs(fused.psi - cpu.psi).max() <= 1e-12 * scale


@pytest.mark.cuda
@pytest.mark.parametrize("shape,scheme", [((24, 30), "2shoc"), ((20, 22, 26), "cd"),
                                          ((20, 22, 26), "2shoc")])
def test_cuda_fused_blow_up(shape, scheme):
    """A blow-up in the fused kernels (the streamed one on these periodic
    grids; 3D 2SHOC's two passes, whose second flags it) names the CPU's
    step and keeps the last finite state."""
    psi, _ = state(shape, np.complex128)
    kw = dict(s=1.0, scheme=scheme, bc="periodic", dt=0.2, force=True)
    ref = nl.NLSE(psi, 0.3, fused=False, backend="cpu", **kw)
    with pytest.raises(nl.BlowUpError) as r:
        ref.step(10 ** 4)
    sim = nl.NLSE(psi, 0.3, fused=True, backend="cuda", **kw)
    with pytest.raises(nl.BlowUpError) as e:
        sim.step(10 ** 4)
    assert sim.last_kernel == "fused"
    assert e.value.step == r.value.step and np.isfinite(sim.psi).all()


@pytest.mark.cuda
def test_cuda_fallbacks_and_auto():
    """3D closed grids run staged whatever is asked; "auto" takes the
    streamed kernel wherever it runs (periodic 2D and 3D grids, with a
    potential or without, on pairs and on points: a contiguous axis of odd
    length), the staged stages elsewhere; giving or dropping a potential
    keeps its choice."""
    psi3, V3 = state((8, 9, 10), np.complex128)
    for scheme in ("cd", "2shoc"):
        sim = nl.NLSE(psi3, 0.3, bc="dirichlet", scheme=scheme, fused=True, backend="cuda")
        sim.step(2)
        assert sim.last_kernel == "staged"
    for shape, bc, scheme, dtype, form in (
            ((8, 9, 10), "periodic", "cd", np.complex64, "fused"),
            ((8, 9, 10), "periodic", "cd", np.complex128, "fused"),
            ((8, 9, 10), "periodic", "2shoc", np.complex64, "fused"),
            ((8, 9, 10), "periodic", "2shoc", np.complex128, "fused"),
            ((12, 14), "periodic", "2shoc", np.complex128, "fused"),
            ((12, 14), "periodic", "cd", np.complex64, "fused"),
            ((12, 14), "dirichlet", "cd", np.complex128, "staged"),
            ((40,), "periodic", "cd", np.complex128, "staged")):
        psi, _ = state(shape, dtype)
        sim = nl.NLSE(psi, 0.3, bc=bc, scheme=scheme, dtype=dtype, backend="cuda")
        sim.step(2)
        assert sim.last_kernel == form, (shape, bc, scheme, dtype)
    psi_odd, V_odd = state((8, 9, 11), np.complex128)
    for (psi, V), dtype in itertools.product(((psi3, V3), (psi_odd, V_odd)),
                                             (np.complex64, np.complex128)):
        sim = nl.NLSE(psi, 0.3, V=V, bc="periodic", scheme="2shoc", dtype=dtype,
                      backend="cuda")
        sim.step(2)
        assert sim.last_kernel == "fused", (psi.shape, dtype)
        sim.V = None
        sim.step(2)
        assert sim.last_kernel == "fused", (psi.shape, dtype)
