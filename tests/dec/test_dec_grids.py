"""The crystal grids of the DEC GPE (source 001 sections 2-3): the periodic
block's complex has the authors' number of cells, fills the block, and its
Laplacian (eq. 8) is consistent at second order on plane waves in every
direction on all six grids."""

import math

import numpy as np
import pytest

pytest.importorskip("scipy", reason="the DEC grids are built with scipy.spatial.Delaunay")

from nlsepy.dec import grids  # noqa: E402

# source 001 / the authors' implementation: dual 0-cells per replicable structure
PUBLISHED_CELLS = {"cubic": 1, "fcc": 12, "bcc": 12, "a15": 46, "c15": 136, "z": 80}


@pytest.mark.parametrize("grid", grids.GRIDS)
def test_cells_per_block(grid):
    blk = grids.block(grid)
    assert blk.cells == PUBLISHED_CELLS[grid]
    assert len(blk.points) == {"cubic": 1, "fcc": 4, "bcc": 2, "a15": 8, "c15": 24, "z": 14}[grid]
    # the cells tile the block and their circumcentres lie in it
    assert blk.volumes.sum() == pytest.approx(float(np.prod(blk.edge)), rel=1e-12)
    assert np.all(blk.centres >= -1e-9) and np.all(blk.centres < blk.edge)
    assert np.all(blk.volumes > 0) and np.all(blk.nbr_area > 0) and np.all(blk.nbr_dual > 0)


@pytest.mark.parametrize("grid", [g for g in grids.GRIDS
                                  if grids.CELLS_PER_BLOCK[g] <= grids.ROW_ORDER_CELLS])
def test_cell_order_is_the_rounded_circumcentres(grid):
    """Cubic, FCC and BCC: cells sorted by z, y, x of the circumcentres
    rounded to 1e-7, so that the float noise of the circumcentres (which
    differs between platforms) cannot decide the order of the unknowns."""
    k = np.round(grids.block(grid).centres / 1e-7).astype(np.int64)
    order = np.lexsort((k[:, 0], k[:, 1], k[:, 2]))
    np.testing.assert_array_equal(order, np.arange(len(k)))
    assert len(np.unique(k, axis=0)) == len(k)  # no two cells share a key


def _runs(a):
    """Runs of consecutive integers in the sorted array a."""
    return 1 + int(np.count_nonzero(np.diff(a) != 1))


@pytest.mark.parametrize("grid", [g for g in grids.GRIDS
                                  if grids.CELLS_PER_BLOCK[g] > grids.ROW_ORDER_CELLS])
def test_row_order(grid):
    """A15, C15, Z: the cells with neighbours in other rows of blocks come
    first, and the cells each neighbouring row (y ± 1, z ± 1) reads form one
    run of the block, as do the cells that read it (at most three on C15,
    whose eight directions overlap all round); the other cells follow by x,
    z, y of the rounded circumcentres; a cell's neighbours in other rows take
    its first slots."""
    blk = grids.block(grid)
    C, of = blk.cells, blk.nbr_offset
    cross = np.any(of[:, 1:] != 0, axis=1)
    face = np.unique(blk.nbr_row[cross])
    np.testing.assert_array_equal(face, np.arange(len(face)))
    most = 3 if grid == "c15" else 1
    for d in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        m = (of[:, 1] == d[0]) & (of[:, 2] == d[1])
        assert m.any()
        assert _runs(np.unique(blk.nbr_row[m])) <= most, d
        assert _runs(np.unique(blk.nbr_cell[m])) <= most, d
    k = np.round(blk.centres[len(face):] / 1e-7).astype(np.int64)
    np.testing.assert_array_equal(np.lexsort((k[:, 1], k[:, 2], k[:, 0])), np.arange(len(k)))
    assert len(np.unique(np.round(blk.centres / 1e-7), axis=0)) == C
    start = np.searchsorted(blk.nbr_row, np.arange(C + 1))
    for c in range(C):
        x = cross[start[c]:start[c + 1]]
        assert not np.any(x[1:] & ~x[:-1]), c  # no neighbour in another row after one in this


@pytest.mark.parametrize("grid", grids.GRIDS)
def test_operator_is_self_adjoint_and_annihilates_constants(grid):
    blk = grids.block(grid)
    S = grids.bloch_symbol(blk, np.zeros(3))
    assert np.abs(S.sum(axis=1)).max() <= 1e-12 * blk.diagonal().max()
    # |B_i| S_ij = |F_ij| / |E*_ij| is symmetric
    W = blk.volumes[:, None] * S
    assert np.abs(W - W.T).max() <= 1e-12 * blk.diagonal().max() * blk.volumes.max()


def test_known_dual_edges():
    """Cubic: neighbours a apart across 6 unit faces; BCC: the circumcentres of
    its tetrahedra are a sqrt(2)/4 apart; FCC: tetrahedron to octahedron centres
    a sqrt(3)/4 apart."""
    cub = grids.block("cubic")
    assert len(cub.nbr_row) == 6 and np.allclose(cub.nbr_dual, 1) and np.allclose(cub.nbr_area, 1)
    assert np.allclose(grids.block("bcc").nbr_dual, math.sqrt(2) / 4)
    assert np.allclose(grids.block("fcc").nbr_dual, math.sqrt(3) / 4)


DIRECTIONS = [(1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 1), (1, 2, 3), (-2, 1, 0.5)]


@pytest.mark.parametrize("grid", grids.GRIDS)
def test_plane_wave_second_order(grid):
    """The Laplacian of a plane wave e^{ik.r}, |k| = 1, on grids of spacing h:
    the Bloch eigenvalue tends to -|k|^2 with an error falling as h^2."""
    blk = grids.block(grid)
    hs = (0.1, 0.05, 0.025)
    for d in DIRECTIONS:
        k = np.asarray(d, float) / np.linalg.norm(d)
        err = [abs(grids.plane_wave_eigenvalue(blk, k * h) / h ** 2 + 1.0) for h in hs]
        orders = np.log2(np.array(err[:-1]) / np.array(err[1:]))
        assert np.all(np.abs(orders - 2) < 0.3), (grid, d, err, orders)
        assert err[-1] < 1e-4


def test_bad_grid_name():
    with pytest.raises(ValueError, match="grid must be one of .* got 'hcp'"):
        grids.block("hcp")
    with pytest.raises(ValueError, match="grid must be one of"):
        grids.crystal_points(3)


def test_blocks_are_cached():
    assert grids.block("c15") is grids.block("C15".lower())


def test_cached_block_is_read_only():
    blk = grids.block("bcc")
    with pytest.raises(ValueError):
        blk.edge[0] = 2.0
    with pytest.raises(ValueError):
        blk.nbr_dual *= 2
