"""The CPU solver's own order of the unknowns (cell by cell inside a row of
blocks, csrc/dec/dec.c) never shows: nlse_dec_combine called through the C
API with the result written over x0 or over x1 gives the bits of the
binding's combine (a fresh result), and the state, psi(t - dt) and layers
come back in the public order of nlsepy/dec.h."""

import ctypes

import numpy as np
import pytest

import nlsepy as nl

BLOCKS = (5, 3, 4)


class Params(ctypes.Structure):
    _fields_ = [("cells", ctypes.c_int), ("rows", ctypes.c_int), ("blocks", ctypes.c_long * 3),
                ("edge", ctypes.c_double * 3), ("origin", ctypes.c_double * 3),
                ("periodic", ctypes.c_int), ("trap", ctypes.c_double * 3), ("g", ctypes.c_double),
                ("dt", ctypes.c_double), ("dtype", ctypes.c_int)]


class Table(ctypes.Structure):
    _fields_ = [(name, ctypes.c_void_p) for name in
                ("row_start", "nbr_cell", "nbr_offset", "weight", "volume", "centre")]


def make(grid, dtype, bc="zero"):
    sim = nl.DecGPE(grid, blocks=BLOCKS, spacing=0.8, g=2.0, trap=(1.0, 0.7, 1.2), bc=bc,
                    dtype=dtype, backend="cpu")
    p = sim.positions
    rng = np.random.default_rng(5)
    psi = (np.exp(-(p ** 2).sum(axis=1) / 3 + 0.4j * p[:, 1])
           + 0.1 * rng.standard_normal(len(p))).astype(dtype)
    return sim, psi


def c_solver(sim):
    """nlse_dec_create through ctypes with the arrays the binding gets."""
    lib = ctypes.CDLL(nl._core.__file__)
    blk, h = sim._block, sim.spacing
    keep = [np.ascontiguousarray(a) for a in (
        sim._row_start.astype(np.int32), blk.nbr_cell.astype(np.int32),
        np.asarray(blk.nbr_offset, dtype=np.int32), np.asarray(sim._weights, dtype=float),
        np.asarray(blk.volumes * h ** 3, dtype=float), np.asarray(blk.centres * h, dtype=float))]
    p = Params(sim.cells_per_block, len(keep[1]), (ctypes.c_long * 3)(*sim.blocks),
               (ctypes.c_double * 3)(*sim._edge), (ctypes.c_double * 3)(*sim._origin),
               1 if sim.bc == "periodic" else 0, (ctypes.c_double * 3)(*sim.trap), sim.g,
               sim.dt, nl._core.COMPLEX64 if sim.dtype == np.complex64 else nl._core.COMPLEX128)
    t = Table(*[a.ctypes.data for a in keep])
    s = ctypes.c_void_p()
    assert lib.nlse_dec_create(ctypes.byref(p), ctypes.byref(t), ctypes.byref(s)) == 0
    return lib, s, keep


@pytest.mark.parametrize("grid", ["fcc", "a15"])
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_combine_in_place_is_the_fresh_result(grid, dtype):
    sim, psi = make(grid, dtype)
    x1 = (psi * 0.9 + 0.05j).astype(dtype)
    want, wbad = sim._solver.combine(psi, x1, 0.0, -0.01)
    assert not wbad
    lib, s, keep = c_solver(sim)
    lib.nlse_dec_combine.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                     ctypes.c_double, ctypes.c_double, ctypes.c_void_p,
                                     ctypes.POINTER(ctypes.c_int)]
    try:
        bad = ctypes.c_int(1)
        for over in ("x0", "x1", "none"):
            a, b = psi.copy(), x1.copy()
            out = a if over == "x0" else b if over == "x1" else np.empty_like(a)
            assert lib.nlse_dec_combine(s, a.ctypes.data, b.ctypes.data, 0.0, -0.01,
                                        out.ctypes.data, ctypes.byref(bad)) == 0
            assert bad.value == 0
            np.testing.assert_array_equal(out, want)
    finally:
        lib.nlse_dec_destroy(s)


@pytest.mark.parametrize("grid", ["bcc", "c15", "z"])
def test_public_order_round_trips(grid):
    sim, psi = make(grid, np.complex128, bc="periodic")
    prev = psi * np.exp(0.02j)
    sim.set_state(psi, prev)
    np.testing.assert_array_equal(sim.psi, psi)
    np.testing.assert_array_equal(sim.psi_prev, prev)
    h = sim._solver
    layer = psi.size // BLOCKS[2]
    np.testing.assert_array_equal(h.get_layers(1, 2), psi[layer:3 * layer])
    new = psi[::-1].copy()
    h.set_layers(2, 1, new[2 * layer:3 * layer])
    np.testing.assert_array_equal(sim.psi[2 * layer:3 * layer], new[2 * layer:3 * layer])
    # H(psi) psi (checked against the sparse reference in test_dec.py) leaves the state
    before = sim.psi
    sim.apply(new)
    np.testing.assert_array_equal(sim.psi, before)


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("grid,nx", [("fcc", 9), ("fcc", 16), ("a15", 13), ("c15", 11),
                                     ("cubic", 21), ("z", 19)])
def test_rows_are_translation_invariant_bit_for_bit(grid, nx, dtype):
    """The CPU row kernels form every block of a row by the same operations,
    in whole vectors, in a vector's remainder formed twice, or next to a
    ghost block (the wrap of a periodic side): with no trap along x, a state
    moved by one block along x on a periodic grid gives H psi and a
    leapfrog run moved by one block, bit for bit; on a zero boundary the
    same for H psi and one step of a state that vanishes on the two blocks
    next to each x side (the ghosts read 0 where the dropped neighbours
    added 0)."""
    for bc in ("periodic", "zero"):
        sim = nl.DecGPE(grid, blocks=(nx, 3, 2), spacing=0.7, g=1.5, trap=(0.0, 0.8, 1.1),
                        bc=bc, dtype=dtype, backend="cpu")
        rng = np.random.default_rng(nx)
        C = sim.cells_per_block
        shape = (2, 3, nx, C)  # the public order: blocks z, y, x, then the cell
        psi = 0.3 * (rng.standard_normal(shape) + 1j * rng.standard_normal(shape))
        if bc == "zero":
            psi[:, :, :2] = 0
            psi[:, :, -2:] = 0
        psi = psi.astype(dtype)

        def moved(a):
            return np.roll(a.reshape(shape), 1, axis=2).ravel()

        np.testing.assert_array_equal(sim.apply(moved(psi)), moved(sim.apply(psi.ravel())))
        runs = []
        for start in (psi.ravel(), moved(psi)):
            sim.set_state(start, start * np.asarray(np.exp(0.01j), dtype=dtype))
            sim.step(4 if bc == "periodic" else 1)
            runs.append(sim.psi)
        assert np.any(runs[0] != psi.ravel())
        np.testing.assert_array_equal(runs[1], moved(runs[0]))


@pytest.mark.parametrize("grid,blocks", [("cubic", (254, 160, 3)), ("bcc", (40, 70, 3))])
def test_tiled_sweep_covers_every_row_once(grid, blocks):
    """On grids whose layer of rows is larger than the CPU sweep's tile (rows
    of blocks in y tiles, each swept layer by layer: 128 + 32 rows on the
    cubic grid, 65 + 5 on BCC, complex128), every row is formed once per
    step from the same operations: with no trap along y a state moved by one
    block along y on a periodic grid gives a leapfrog run moved by one
    block, bit for bit (a row skipped, formed twice in place, or formed at
    a tile's edge from other neighbours would break this); and the
    imaginary-time norm, summed by rows in memory order, gives the same
    bits on one thread and on two."""
    sim = nl.DecGPE(grid, blocks=blocks, spacing=0.7, g=1.5, trap=(0.9, 0.0, 1.1),
                    bc="periodic", dtype=np.complex128, backend="cpu")
    rng = np.random.default_rng(3)
    shape = (blocks[2], blocks[1], blocks[0], sim.cells_per_block)
    psi = 0.3 * (rng.standard_normal(shape) + 1j * rng.standard_normal(shape))

    def moved(a):
        return np.roll(a.reshape(shape), 1, axis=1).ravel()

    runs = []
    for start in (psi.ravel(), moved(psi)):
        sim.set_state(start, start * np.exp(0.01j))
        sim.step(3)
        runs.append(sim.psi)
    assert np.any(runs[0] != psi.ravel())
    np.testing.assert_array_equal(runs[1], moved(runs[0]))
    states = []
    before = nl.get_num_threads()
    try:
        for threads in (1, 2):
            nl.set_num_threads(threads)
            sim.set_state(psi.ravel())
            sim.imaginary_time(3)
            states.append(sim.psi)
    finally:
        nl.set_num_threads(before)
    np.testing.assert_array_equal(states[0], states[1])
