"""Crystal-structure grids of the DEC GPE: the periodic block and its operator.

Source 001 (Kivioja, Mönkölä, Rossi, CPC 278 (2022) 108427), sections 2-3:
the unknowns of the GPE live at the circumcentres of the 3-cells of a
Delaunay cell complex whose vertices are the points of a crystal; the
Laplacian is ``⋆3 d2 ⋆2⁻¹ d2ᵀ`` with the diagonal (circumcentric) Hodge
stars, so that on cell ``i``::

    (L ψ)_i = (1/|B_i|) Σ_j (|F_ij| / |E*_ij|) (ψ_j − ψ_i)          (eq. 8)

with ``|B_i|`` the cell's volume, ``F_ij`` the face it shares with its
neighbour ``j`` and ``|E*_ij|`` the distance between the two circumcentres.

The whole grid repeats one *block* (source 001's replicable structure): a
cube of edge 1 for the cubic crystal systems and the tetrahedrally
close-packed A15 and C15, and a ``1 × √3 × 1`` box for the hexagonal Z
structure.  :func:`block` builds the complex of one periodic block from the
crystal's points with SciPy's Qhull Delaunay triangulation of the block and
its neighbours, merges the Delaunay tetrahedra that share a circumsphere
(the cube of the simple cubic lattice, the octahedra of FCC) into one cell,
and returns per cell its circumcentre, volume, and its neighbours as (local
index, block offset, ``|F|``, ``|E*|``).  Blocks are cached: a grid of any
size costs only the tiling.

Points per block (fractions of the block's edges):

- cubic: the simple cubic lattice (1 point);
- FCC: corners and face centres (4); BCC: corner and body centre (2);
- A15 (Cr3Si, Pm-3n): 2a at 0 and (½, ½, ½), 6c at (¼, 0, ½) and the like (8);
- C15 (MgCu2 Laves, Fd-3m): the diamond sites 8a and the 16d tetrahedra (24);
- Z (Frank-Kasper Z phase, hexagonal): a triangular net in the planes
  z = 0 and ½ and eight points between them (14 in the ``1 × √3 × 1`` box).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Dict, Tuple

import numpy as np

GRIDS = ("cubic", "fcc", "bcc", "a15", "c15", "z")

# Cells per block as the authors' implementation has them (source 001).
CELLS_PER_BLOCK = {"cubic": 1, "fcc": 12, "bcc": 12, "a15": 46, "c15": 136, "z": 80}

# Blocks of more cells than this (A15, C15, Z) take the order of the row
# kernels (_row_order); the others keep z, y, x.
ROW_ORDER_CELLS = 12


def _fcc_translate(base):
    t = np.array([[0, 0, 0], [0, .5, .5], [.5, 0, .5], [.5, .5, 0]])
    return (np.asarray(base, float)[:, None, :] + t[None, :, :]).reshape(-1, 3)


def crystal_points(grid: str) -> Tuple[np.ndarray, np.ndarray]:
    """The crystal's points in one block and the block's edge lengths.

    Parameters
    ----------
    grid : str
        One of ``"cubic"``, ``"fcc"``, ``"bcc"``, ``"a15"``, ``"c15"``, ``"z"``.

    Returns
    -------
    points : ndarray, shape (n, 3)
        Cartesian positions in ``[0, edge)`` for a lattice constant of 1.
    edge : ndarray, shape (3,)
        The block's edge lengths: ``(1, 1, 1)``, or ``(1, √3, 1)`` for ``"z"``.
    """
    g = _grid_name(grid)
    edge = np.array([1.0, math.sqrt(3.0), 1.0]) if g == "z" else np.ones(3)
    if g == "cubic":
        f = [[0, 0, 0]]
    elif g == "fcc":
        f = _fcc_translate([[0, 0, 0]])
    elif g == "bcc":
        f = [[0, 0, 0], [.5, .5, .5]]
    elif g == "a15":
        f = [[0, 0, 0], [.5, .5, .5],
             [.25, 0, .5], [.75, 0, .5], [.5, .25, 0], [.5, .75, 0], [0, .5, .25], [0, .5, .75]]
    elif g == "c15":
        mg = [[0, 0, 0], [.25, .25, .25]]
        cu = [[.625, .625, .625], [.625, .875, .875], [.875, .625, .875], [.875, .875, .625]]
        f = _fcc_translate(mg + cu)
    else:  # z: fractions of the 1 x sqrt(3) x 1 box
        f = [[0, 0, 0], [.5, .5, 0], [0, 0, .5], [.5, .5, .5],
             [.25, .25, .75], [.25, .75, .75], [.75, .25, .75], [.75, .75, .75],
             [.5, 1 / 6, .25], [.5, 5 / 6, .25],
             [0, .5, .75], [0, 1 / 3, .25], [0, 2 / 3, .25], [.5, 0, .75]]
    frac = np.mod(np.asarray(f, float), 1.0)
    return frac * edge, edge


def _grid_name(grid) -> str:
    if not isinstance(grid, str) or grid.lower() not in GRIDS:
        raise ValueError(f"grid must be one of {GRIDS}, got {grid!r}")
    return grid.lower()


@dataclass(frozen=True)
class Block:
    """The DEC complex of one periodic block (lattice constant 1).

    Attributes
    ----------
    grid : str
        The crystal.
    edge : ndarray, shape (3,)
        The block's edge lengths.
    points : ndarray, shape (p, 3)
        The crystal's points in the block (the primal vertices).
    centres : ndarray, shape (m, 3)
        Circumcentres of the block's 3-cells (the unknowns), in ``[0, edge)``.
        On cubic, FCC and BCC sorted by z, then y, then x; on A15, C15 and Z
        in the order of the row kernels (``_row_order``).  The keys are
        the circumcentres rounded to 1e-7 of the lattice constant, so that
        the order is the same on every platform.
    volumes : ndarray, shape (m,)
        Cell volumes ``|B_i|``.
    nbr_cell, nbr_offset, nbr_area, nbr_dual : ndarray
        The neighbours of all cells, row ``k`` belonging to cell ``nbr_row[k]``:
        the neighbour's local index, the offset of its block (ints, shape
        (K, 3)), the shared face's area ``|F_ij|`` and the circumcentres'
        distance ``|E*_ij|``.
    nbr_row : ndarray, shape (K,)
        The cell each neighbour row belongs to (non-decreasing).
    """

    grid: str
    edge: np.ndarray
    points: np.ndarray
    centres: np.ndarray
    volumes: np.ndarray
    nbr_row: np.ndarray
    nbr_cell: np.ndarray
    nbr_offset: np.ndarray
    nbr_area: np.ndarray
    nbr_dual: np.ndarray

    @property
    def cells(self) -> int:
        """Cells (unknowns) per block."""
        return len(self.centres)

    def weights(self) -> np.ndarray:
        """``|F_ij| / (|E*_ij| |B_i|)`` of every neighbour row (eq. 8)."""
        return self.nbr_area / (self.nbr_dual * self.volumes[self.nbr_row])

    def diagonal(self) -> np.ndarray:
        """``Σ_j |F_ij| / (|E*_ij| |B_i|)`` per cell: minus the Laplacian's diagonal."""
        return np.bincount(self.nbr_row, weights=self.weights(), minlength=self.cells)


def _circumcentres(P: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Circumcentres and radii of tetrahedra P (shape (n, 4, 3))."""
    a = P[:, 1:] - P[:, :1]                                   # (n, 3, 3)
    rhs = 0.5 * np.einsum("nij,nij->ni", a, a)
    c = np.linalg.solve(a, rhs[..., None])[..., 0] + P[:, 0]
    return c, np.linalg.norm(c - P[:, 0], axis=1)


@functools.lru_cache(maxsize=None)
def block(grid: str) -> Block:
    """The DEC complex of one periodic block of `grid` (cached): a grid name
    as for :func:`crystal_points`.

    Returns
    -------
    Block
        Cells, circumcentres, volumes and neighbour tables for a lattice
        constant of 1 (scale lengths by ``h``, areas by ``h²``, volumes by
        ``h³``).

    Raises
    ------
    ImportError
        Without SciPy (``pip install scipy``), whose Qhull does the
        triangulation.
    """
    g = _grid_name(grid)
    try:
        from scipy.spatial import Delaunay
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("the DEC grids need SciPy's Delaunay triangulation: "
                          "pip install scipy (or nlsepy[scipy])") from e
    from scipy.spatial import cKDTree
    pts, edge = crystal_points(g)
    # blocks -1..2 along each axis around the central block 0: every cell of
    # the central block and every neighbour of such a cell is complete, and
    # far from the cloud's hull
    r = (-1, 0, 1, 2)
    shifts = np.array([[i, j, k] for k in r for j in r for i in r])
    cloud = (pts[None, :, :] + (shifts * edge)[:, None, :]).reshape(-1, 3)
    P = cloud[Delaunay(cloud).simplices]
    # Qhull triangulates cospherical points (a cube, an octahedron) into
    # tetrahedra, some of them flat: keep the solid ones, whose circumcentres
    # name the cells; tetrahedra with one circumcentre are one cell
    vol = np.abs(np.einsum("ni,ni->n", P[:, 1] - P[:, 0],
                           np.cross(P[:, 2] - P[:, 0], P[:, 3] - P[:, 0]))) / 6.0
    solid = vol > 1e-9
    P, vol = P[solid], vol[solid]
    cen, rad = _circumcentres(P)
    tol = 1e-7
    key = np.round(cen / tol).astype(np.int64)
    _, cell_of_tet, counts = np.unique(key, axis=0, return_inverse=True, return_counts=True)
    cell_of_tet = cell_of_tet.ravel()
    ncell = len(counts)
    ccen = np.zeros((ncell, 3))
    np.add.at(ccen, cell_of_tet, cen)
    ccen /= counts[:, None]
    crad = np.zeros(ncell)
    crad[cell_of_tet] = rad
    cvol = np.bincount(cell_of_tet, weights=vol, minlength=ncell)
    # the cells of the central block [0, edge) (a small shift makes the
    # half-open test robust to circumcentres on the block's faces) and the
    # cells near it, with their vertices: the points on their circumsphere
    eps = 1e-7
    inside = np.all((ccen + eps >= 0) & (ccen + eps < edge), axis=1)
    near = np.all((ccen > -0.75 * edge) & (ccen < 1.75 * edge), axis=1)
    tree = cKDTree(cloud)
    verts = {c: frozenset(tree.query_ball_point(ccen[c], crad[c] + 1e-6))
             for c in np.nonzero(near)[0]}
    cells_of_point: Dict[int, list] = {}
    for c, vs in verts.items():
        for v in vs:
            cells_of_point.setdefault(v, []).append(c)
    # neighbours share a face: three or more points, a planar polygon
    inside_idx = np.nonzero(inside)[0]
    # sorted by the circumcentres rounded to tol: cells at one height (up to
    # rounding) are sorted by y and x on every platform, not by the noise of
    # the circumcentres' last bits
    ikey = np.round(ccen[inside_idx] / tol).astype(np.int64)
    order = _zyx_order(ccen[inside_idx], tol)
    inside_idx = inside_idx[order]
    lkey = {tuple(k): i for i, k in enumerate(ikey[order])}
    rows, cells, offs, areas, duals = [], [], [], [], []
    for i, c in enumerate(inside_idx):
        shared: Dict[int, int] = {}
        for v in verts[c]:
            for o in cells_of_point[v]:
                if o != c:
                    shared[o] = shared.get(o, 0) + 1
        for o in sorted(o for o, n in shared.items() if n >= 3):
            face = cloud[sorted(verts[c] & verts[o])]
            off = np.floor((ccen[o] + eps) / edge).astype(np.int64)
            img = tuple(np.round((ccen[o] - off * edge) / tol).astype(np.int64))
            if img not in lkey:
                raise RuntimeError(f"{g}: a neighbour's periodic image is not a cell of the block")
            rows.append(i)
            cells.append(lkey[img])
            offs.append(off)
            areas.append(_polygon_area(face))
            duals.append(float(np.linalg.norm(ccen[o] - ccen[c])))
    blk = Block(grid=g, edge=edge, points=pts, centres=ccen[inside_idx],
                volumes=cvol[inside_idx], nbr_row=np.array(rows), nbr_cell=np.array(cells),
                nbr_offset=np.array(offs).reshape(-1, 3), nbr_area=np.array(areas),
                nbr_dual=np.array(duals))
    _check_closed(blk)
    if blk.cells > ROW_ORDER_CELLS:
        blk = _row_order(blk, tol)
    for name in ("edge", "points", "centres", "volumes", "nbr_row", "nbr_cell", "nbr_offset",
                 "nbr_area", "nbr_dual"):
        getattr(blk, name).setflags(write=False)  # the block is cached: no caller may alter it
    return blk


def _zyx_order(centres: np.ndarray, tol: float = 1e-7) -> np.ndarray:
    """The indices that sort circumcentres by z, then y, then x, each
    rounded to `tol` (the cell order of cubic, FCC and BCC, and of every
    grid in earlier versions)."""
    key = np.round(np.asarray(centres) / tol).astype(np.int64)
    return np.lexsort((key[:, 0], key[:, 1], key[:, 2]))


def _row_order(blk: Block, tol: float) -> Block:
    """`blk` with its cells and each cell's neighbours in the order of the row
    kernels (blocks of more than ``ROW_ORDER_CELLS`` cells: A15, C15, Z).

    The unknowns of a row of blocks (fixed y and z) lie one after the other,
    so a warp's loads of the neighbours in the rows y ± 1 and z ± 1 are
    gathers.  The cells with neighbours in other rows come first, sorted by
    the angle in the (y, z) plane of the mean direction of those neighbours'
    rows, the sequence starting after the widest gap between those angles,
    so that the cells each neighbouring row reads (and the cells that read
    it) form one run of the block; among equal angles by x, then z, y.  The
    cells whose neighbours all lie in their own row follow, by x, then z, y,
    so that their neighbours in the blocks before and after lie near them.
    A cell's neighbours in other rows take its first slots (by the same
    angle), the others follow by index distance.
    """
    C = blk.cells
    of = blk.nbr_offset
    cross = np.any(of[:, 1:] != 0, axis=1)
    D = np.zeros((C, 3, 3), bool)  # the rows (dy, dz) each cell's neighbours lie in
    D[blk.nbr_row[cross], of[cross, 1] + 1, of[cross, 2] + 1] = True
    d = np.arange(-1, 2)
    my = (D * d[None, :, None]).sum(axis=(1, 2))
    mz = (D * d[None, None, :]).sum(axis=(1, 2))
    face = D.any(axis=(1, 2))

    def angle(y, z):  # degrees in [0, 360), rounded: the same on every platform
        return np.round(np.degrees(np.arctan2(z, y)) % 360.0, 6)

    a = angle(my, mz)
    u = np.unique(a[face])
    cut = u[(int(np.argmax(np.diff(np.r_[u, u[0] + 360.0]))) + 1) % len(u)]
    key = np.where(face, (a - cut) % 360.0, 1e9)
    cen = np.round(blk.centres / tol).astype(np.int64)
    order = np.lexsort((cen[:, 1], cen[:, 2], cen[:, 0], key))
    pos = np.empty(C, np.int64)
    pos[order] = np.arange(C)
    # the neighbour rows of the new cells in their new slots
    dist = np.abs(((of[:, 2] * 4 + of[:, 1]) * 4 + of[:, 0]) * C
                  + pos[blk.nbr_cell] - pos[blk.nbr_row])
    slot = np.where(cross, (angle(of[:, 1], of[:, 2]) - cut) % 360.0, 1e9)
    rows = np.lexsort((dist, slot, pos[blk.nbr_row]))
    return Block(grid=blk.grid, edge=blk.edge, points=blk.points, centres=blk.centres[order],
                 volumes=blk.volumes[order], nbr_row=pos[blk.nbr_row[rows]],
                 nbr_cell=pos[blk.nbr_cell[rows]], nbr_offset=of[rows],
                 nbr_area=blk.nbr_area[rows], nbr_dual=blk.nbr_dual[rows])


def _check_closed(blk: Block) -> None:
    """Every face is seen from both sides (i -> (j, s) and j -> (i, -s), same
    area), and the cells fill the block: a missing neighbour cannot pass."""
    fwd = {(int(i), int(j), tuple(o)): a for i, j, o, a in
           zip(blk.nbr_row, blk.nbr_cell, blk.nbr_offset, blk.nbr_area)}
    for (i, j, o), a in fwd.items():
        back = fwd.get((j, i, tuple(-np.array(o))))
        if back is None or abs(back - a) > 1e-9:
            raise RuntimeError(f"{blk.grid}: the face between cells {i} and {j} (block offset "
                               f"{o}) is not seen from both sides")
    if abs(blk.volumes.sum() - float(np.prod(blk.edge))) > 1e-9:
        raise RuntimeError(f"{blk.grid}: the cells do not fill the block")


def _polygon_area(Q: np.ndarray) -> float:
    """Area of the planar convex polygon with vertices Q (any order)."""
    c = Q.mean(axis=0)
    d = Q - c
    _, _, vt = np.linalg.svd(d)
    u, w = d @ vt[0], d @ vt[1]
    o = np.argsort(np.arctan2(w, u))
    u, w = u[o], w[o]
    return 0.5 * abs(float(np.dot(u, np.roll(w, -1)) - np.dot(w, np.roll(u, -1))))


def bloch_symbol(blk: Block, kappa) -> np.ndarray:
    """The Laplacian of eq. 8 on Bloch waves of wave vector `kappa`.

    On the infinite periodic grid a Bloch wave is ``ψ = u_l e^{iκ·r}`` with
    one amplitude ``u_l`` per cell of the block; the Laplacian maps it to
    another Bloch wave, ``u -> S(κ) u``.  For a smooth plane wave the
    eigenvalue of ``S`` nearest 0 is ``-|κ|²`` up to the discretisation error
    (``κ`` in units of the inverse lattice constant); the other eigenvalues
    are the grid's optical branches.  ``S`` is self-adjoint in the inner
    product weighted by the cell volumes.

    Parameters
    ----------
    blk : Block
        A block (lattice constant 1).
    kappa : array_like, shape (3,)
        The wave vector times the lattice constant.

    Returns
    -------
    ndarray, shape (cells, cells), complex
        ``S(κ)``.
    """
    kappa = np.asarray(kappa, float)
    m = blk.cells
    c = blk.centres
    r_j = c[blk.nbr_cell] + blk.nbr_offset * blk.edge
    S = np.zeros((m, m), complex)
    np.add.at(S, (blk.nbr_row, blk.nbr_cell),
              blk.weights() * np.exp(1j * ((r_j - c[blk.nbr_row]) @ kappa)))
    S[np.arange(m), np.arange(m)] -= blk.diagonal()
    return S


def plane_wave_eigenvalue(blk: Block, kappa) -> float:
    """The eigenvalue of :func:`bloch_symbol` nearest 0 (``≈ -|κ|²``)."""
    S = bloch_symbol(blk, kappa)
    v = np.sqrt(blk.volumes)
    H = v[:, None] * S / v[None, :]          # self-adjoint form
    ev = np.linalg.eigvalsh(0.5 * (H + H.conj().T))
    return float(ev[np.argmin(np.abs(ev))])


def operations_per_time(grid: str, spacing: float, box, vmax: float = 0.0) -> float:
    """Arithmetic per unit of time of the leapfrog on a box (section 5.1).

    ``sum_i #J^i / dt`` with ``#J^i`` the faces of cell i plus one (the
    nonzeros of row i of eq. 12's matrix) and ``dt = 1 / (2 max_i M_ii)``,
    the bound of eq. 11, ``M_ii`` the Laplacian's diagonal plus the largest
    potential ``vmax``.  Blocks are counted fractionally (``box / edge``), so
    the count is smooth in the spacing.

    Parameters
    ----------
    grid : str
        The crystal.
    spacing : float
        Lattice constant h.
    box : sequence of 3 floats
        The domain's lengths.
    vmax : float, optional
        The potential's largest value on the domain.

    Returns
    -------
    float
    """
    blk = block(grid)
    edge = np.asarray(blk.edge) * spacing
    cells = blk.cells * np.prod(np.asarray(box, float) / edge)
    per_row = np.bincount(blk.nbr_row).mean() + 1
    dt = 1.0 / (2.0 * (0.5 * blk.diagonal().max() / spacing ** 2 + vmax))
    return float(cells * per_row / dt)


def equal_cost_spacing(grid: str, box, operations: float = 6e9, vmax: float = 0.0) -> float:
    """The lattice constant at which :func:`operations_per_time` equals
    `operations` (section 5.1's scaling behind Table 1: 6e9 there).

    Parameters
    ----------
    grid : str
        The crystal.
    box : sequence of 3 floats
        The domain's lengths.
    operations : float, optional
        Arithmetic per unit of time.
    vmax : float, optional
        The potential's largest value on the domain.

    Returns
    -------
    float
    """
    lo, hi = np.log(1e-4), np.log(1e3)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if operations_per_time(grid, float(np.exp(mid)), box, vmax) > operations:
            lo = mid
        else:
            hi = mid
    return float(np.exp(0.5 * (lo + hi)))
