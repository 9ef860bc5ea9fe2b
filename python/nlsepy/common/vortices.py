"""Quantised vortices of a complex field on a Cartesian grid.

One finder for every model (``nl.vortices``; the solvers' ``vortices()``
methods and ``Frames.vortices`` call it): point vortices of a 2D field and
vortex lines of a 3D field, located from the phase winding around the
grid's plaquettes, placed below the grid's resolution by a local fit, and
tracked across frames.

*Winding.* The phase ``θ = arg ψ`` is taken at every node and its
difference along every grid edge is wrapped into ``[−π, π)`` once, so that
the two plaquettes sharing an edge see the same difference with opposite
signs.  The circulation of a plaquette, the sum of its four edge
differences taken counter-clockwise, is then ``2π w`` with ``w`` an exact
integer, and the windings of any set of plaquettes add up to the winding
around its boundary (the discrete Stokes theorem holds exactly), so charge
is never lost or created by rounding.

*Resolution.* Four phase samples resolve at most one quantum: an edge
next to the core of a ``|q| ≥ 2`` vortex can change phase by more than π,
and its difference then aliases, handing one quantum to the neighbouring
plaquette.  A doubly charged core therefore shows as winding 1 in two
plaquettes that share an edge or a corner.  In 2D, plaquettes of the same
sign that touch (edge or corner) are merged into one vortex whose charge is
their sum; so a ``±2`` core is one vortex of charge ``±2``, and two
same-sign vortices closer than about one cell, which the grid cannot tell
from one doubly charged core, are reported as one.  In 3D a doubly charged
line is traced as two unit lines through neighbouring cells; two lines of
one direction that stay within 1.5 cells of each other all along are
merged into one line of their summed charge, its points found again for
that charge (and the faces it does not cross left out).

*Position.* The field on the 4 × 4 nodes around the plaquette(s) that
carry the winding is interpolated by the tensor-product cubic through them
(error O(h⁴)), and Gauss-Newton finds the core: the zero of the
interpolant for ``|q| = 1``, the common zero of its ``(|q|−1)``-th
derivatives along x and along y for a multiply charged core, where the
field is a power of a linear form ``(a x + b y)^{|q|}`` (a multiple zero).
It is kept within half a cell of those plaquettes.  Where Gauss-Newton
fails, the minimum of a least-squares quadratic fitted to ``|ψ|^{2/|q|}``
(a quadratic form about such a core) is taken.  A 3D line's points are its
piercings of plaquettes, each found in the plaquette's plane.

*Density threshold.* The phase of a nearly empty region is noise, and it
winds at random.  A plaquette counts only where some node within `reach`
nodes of its corners (default 4) has density ``|ψ|² ≥ threshold ·
max|ψ|²``: the core's own density hole (narrower than `reach` cells) does
not hide it, the outskirts are left out.  In 2D a vortex counts when one of
its merged plaquettes does.

*Lines.* In 3D each piercing of charge ``w`` is ``|w|`` quanta of flux
through a face, from the cell behind it to the cell in front (along the
face's normal for ``w > 0``).  The flux into a cell equals the flux out
(exactly), so the piercings chain up into lines through the cells; a cell
crossed by two lines pairs them by nearest piercings.  Lines end on the
grid's boundary and where the density threshold cuts them; the rest are
closed loops (rings).

*Coordinates.* Node ``i`` along axis ``a`` lies at ``origin[a] + i
spacing[a]``.  The default origin centres the grid on 0: ``−(n−1) h / 2`` along a bounded axis
(``nl.examples.grid``; ``nl.NLSE`` with ``bc="msd"`` or ``"dirichlet"``), and
``−n h / 2`` along a periodic one (``nl.examples.grid(periodic=True)``;
``nl.NLSE`` with ``bc="periodic"``).  ``nl.DipolarGPE`` puts node ``i`` at
``(i − n//2) h``; its :meth:`~nlsepy.DipolarGPE.vortices` passes that origin,
as every solver's ``vortices()`` passes its own grid.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any, Deque, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from .checks import real

__all__ = ["vortices", "Vortices", "VortexLine", "VortexLines", "VortexTracks", "track",
           "DEFAULT_THRESHOLD", "DEFAULT_REACH", "DEFAULT_JUMP"]

#: default density threshold, a fraction of the peak density ``max |psi|^2``
DEFAULT_THRESHOLD = 1e-3
#: default reach (nodes) of the density test beyond a plaquette's corners
DEFAULT_REACH = 4
#: default largest move between frames that keeps a vortex's id, in spacings
DEFAULT_JUMP = 10.0

_TWO_PI = 2.0 * math.pi


# ------------------------------------------------------------------ results
@dataclass(frozen=True, eq=False)
class Vortices:
    """Point vortices of a 2D field (what :func:`vortices` finds in 2D).

    Attributes
    ----------
    positions : numpy.ndarray
        Core positions, shape ``(n, 2)``: column ``a`` is the coordinate
        along array axis ``a`` (x, y), in the grid's coordinates.
    charges : numpy.ndarray
        Integer charges, shape ``(n,)``: ``+1`` where the phase increases by
        2π counter-clockwise in the (axis 0, axis 1) plane, as for
        ``x + iy``.
    ids : numpy.ndarray
        Labels, shape ``(n,)``: ``0 .. n−1`` for one field; stable across
        frames in what :meth:`nlsepy.runner.Frames.vortices` returns.
    t : float or None
        The frame's time (None for one field).
    """

    positions: np.ndarray
    charges: np.ndarray
    ids: np.ndarray = field(default=None)  # type: ignore[assignment]
    t: Optional[float] = None

    def __post_init__(self) -> None:
        pos = np.asarray(self.positions, dtype=np.float64).reshape(-1, 2)
        q = np.asarray(self.charges, dtype=np.int64).reshape(-1)
        ids = np.arange(len(q)) if self.ids is None else \
            np.asarray(self.ids, dtype=np.int64).reshape(-1)
        if len(pos) != len(q) or len(ids) != len(q):
            raise ValueError(f"positions, charges and ids must have one row per vortex, got "
                             f"{len(pos)}, {len(q)} and {len(ids)}")
        for name, value in (("positions", pos), ("charges", q), ("ids", ids)):
            value.setflags(write=False)
            object.__setattr__(self, name, value)

    def __len__(self) -> int:
        return len(self.charges)

    @property
    def net_charge(self) -> int:
        """The sum of the charges."""
        return int(self.charges.sum())

    def _anchors(self) -> np.ndarray:
        return self.positions

    def _keys(self) -> np.ndarray:
        return self.charges

    def _with_ids(self, ids: np.ndarray, t: Optional[float]) -> "Vortices":
        return replace(self, ids=ids, t=t)

    def __repr__(self) -> str:
        pos = int(np.sum(self.charges > 0))
        return (f"Vortices({len(self)}: {pos} positive, {len(self) - pos} negative, "
                f"net charge {self.net_charge})")


@dataclass(frozen=True, eq=False)
class VortexLine:
    """One vortex line of a 3D field.

    Attributes
    ----------
    points : numpy.ndarray
        Its piercings of the grid's plaquettes in order along the line,
        shape ``(k, 3)``, in the grid's coordinates.  The points run along
        the line's direction: the phase winds by ``+2π charge`` around it by
        the right-hand rule.  A closed line does not repeat its first point.
        On a periodic axis the points are unwrapped (continuous), so they
        may leave the box.
    charge : int
        Quanta of circulation, ``≥ 1`` (the direction carries the sign).
    closed : bool
        A loop (a ring); else the line ends on the grid's boundary or where
        the density falls below the threshold.
    id : int
        Label: the line's index for one field; stable across frames in what
        :meth:`nlsepy.runner.Frames.vortices` returns.
    box : tuple of float or None
        Per axis the length of the periodic box (0 along a bounded axis);
        None on a bounded grid.  A closed line that winds around the box
        closes through the nearest image of its first point.
    """

    points: np.ndarray
    charge: int
    closed: bool
    id: int = 0
    box: Optional[Tuple[float, ...]] = None

    def __post_init__(self) -> None:
        pts = np.asarray(self.points, dtype=np.float64).reshape(-1, 3)
        pts.setflags(write=False)
        object.__setattr__(self, "points", pts)
        object.__setattr__(self, "charge", int(self.charge))
        object.__setattr__(self, "closed", bool(self.closed))
        object.__setattr__(self, "id", int(self.id))
        if self.box is not None:
            object.__setattr__(self, "box", tuple(float(v) for v in self.box))

    def _path(self) -> np.ndarray:
        """The points, and for a closed line the first again (its nearest
        image to the last on a periodic grid)."""
        if not self.closed or len(self.points) == 0:
            return self.points
        first = self.points[0]
        if self.box is not None:
            L = np.asarray(self.box)
            d = first - self.points[-1]
            first = first - np.where(L > 0, L * np.round(d / np.where(L > 0, L, 1.0)), 0.0)
        return np.vstack((self.points, first))

    @property
    def length(self) -> float:
        """Length of the polyline (of the loop, when closed)."""
        return float(np.linalg.norm(np.diff(self._path(), axis=0), axis=1).sum())

    @property
    def centroid(self) -> np.ndarray:
        """Centre of the line: the mean over its length (of its points, for
        a single point)."""
        path = self._path()
        seg = np.linalg.norm(np.diff(path, axis=0), axis=1)
        if len(path) < 2 or seg.sum() == 0:
            return self.points.mean(axis=0)
        mid = 0.5 * (path[1:] + path[:-1])
        return (seg[:, None] * mid).sum(axis=0) / seg.sum()

    def __len__(self) -> int:
        return len(self.points)

    def __repr__(self) -> str:
        kind = "closed" if self.closed else "open"
        return (f"VortexLine({kind}, charge {self.charge}, {len(self.points)} points, "
                f"length {self.length:.4g})")


@dataclass(frozen=True, eq=False)
class VortexLines(Sequence):
    """The vortex lines of a 3D field (what :func:`vortices` finds in 3D):
    a sequence of :class:`VortexLine`.

    Attributes
    ----------
    lines : tuple of VortexLine
        The lines.
    t : float or None
        The frame's time (None for one field).
    """

    lines: Tuple[VortexLine, ...]
    t: Optional[float] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "lines", tuple(self.lines))

    def __len__(self) -> int:
        return len(self.lines)

    def __getitem__(self, i):  # type: ignore[override]
        return self.lines[i]

    def __iter__(self) -> Iterator[VortexLine]:
        return iter(self.lines)

    @property
    def ids(self) -> np.ndarray:
        """The lines' labels."""
        return np.array([ln.id for ln in self.lines], dtype=np.int64)

    @property
    def charges(self) -> np.ndarray:
        """The lines' charges."""
        return np.array([ln.charge for ln in self.lines], dtype=np.int64)

    @property
    def closed(self) -> np.ndarray:
        """Which lines are loops."""
        return np.array([ln.closed for ln in self.lines], dtype=bool)

    @property
    def centroids(self) -> np.ndarray:
        """The lines' centres, shape ``(n, 3)`` (:attr:`VortexLine.centroid`)."""
        return np.array([ln.centroid for ln in self.lines]).reshape(-1, 3)

    def _anchors(self) -> np.ndarray:
        return self.centroids

    def _keys(self) -> np.ndarray:
        return self.charges

    def _with_ids(self, ids: np.ndarray, t: Optional[float]) -> "VortexLines":
        return VortexLines(tuple(replace(ln, id=int(i)) for ln, i in zip(self.lines, ids)), t)

    def __repr__(self) -> str:
        rings = int(self.closed.sum())
        return f"VortexLines({len(self)}: {rings} closed, {len(self) - rings} open)"


Found = Union[Vortices, VortexLines]


# ------------------------------------------------------------------- checks
def _field(psi: Any) -> np.ndarray:
    arr = np.asarray(psi)
    if arr.dtype.kind != "c":
        raise TypeError(f"psi must be a complex array (the wave function), got dtype "
                        f"{arr.dtype}")
    if arr.ndim not in (2, 3):
        raise ValueError(f"psi must be a 2D or 3D array (vortices are points in 2D and lines "
                         f"in 3D), got shape {arr.shape}")
    if min(arr.shape) < 2:
        raise ValueError(f"psi must have at least 2 points along each axis, got shape "
                         f"{arr.shape}")
    bad = ~np.isfinite(arr)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"psi must be finite, got {arr[where]!r} at index {where} "
                         f"({int(bad.sum())} non-finite values)")
    return arr


def _per_axis(name: str, value: Any, nd: int, positive: bool = False) -> Tuple[float, ...]:
    if np.ndim(value) == 0:
        return (real(name, value, positive=positive),) * nd
    vals = list(np.asarray(value, dtype=object).ravel())
    if len(vals) != nd:
        raise ValueError(f"{name} must be a number or {nd} numbers (one per axis), got "
                         f"{len(vals)}: {value!r}")
    return tuple(real(f"{name}[{q}]", v, positive=positive) for q, v in enumerate(vals))


def _flags(value: Any, nd: int) -> Tuple[bool, ...]:
    vals = [value] * nd if np.ndim(value) == 0 else list(np.asarray(value, dtype=object).ravel())
    if len(vals) != nd or not all(isinstance(v, (bool, np.bool_)) for v in vals):
        raise ValueError(f"periodic must be a bool or {nd} bools (one per axis), got {value!r}")
    return tuple(bool(v) for v in vals)


def _threshold(value: Any) -> float:
    thr = real("threshold", value, nonneg=True)
    if thr >= 1:
        raise ValueError(f"threshold must be in [0, 1) (a fraction of the peak density "
                         f"max |psi|^2), got {value!r}")
    return thr


def _reach(value: Any) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
            or value < 0:
        raise ValueError(f"reach must be an integer >= 0 (nodes), got {value!r}")
    return int(value)


# --------------------------------------------------------------- the finder
def vortices(psi: Any, spacing: Union[float, Sequence[float]],
             origin: Union[None, float, Sequence[float]] = None,
             threshold: float = DEFAULT_THRESHOLD, *, reach: int = DEFAULT_REACH,
             periodic: Union[bool, Sequence[bool]] = False) -> Found:
    """Find the quantised vortices of a complex field on a Cartesian grid.

    2D: point vortices (core positions and integer charges); 3D: vortex
    lines (polylines with a charge; rings are closed).  The phase winding
    is counted around every plaquette of the grid, the core is placed below
    the grid's resolution by a local fit, and regions of negligible density
    are left out (see :mod:`nlsepy.common.vortices` for the method).

    Parameters
    ----------
    psi : array_like
        The field, complex, 2D ``(nx, ny)`` or 3D ``(nx, ny, nz)``: any
        Cartesian state (``NLSE.psi``, ``DipolarGPE.psi``, a frame, a DecGPE
        state resampled by :meth:`~nlsepy.DecGPE.psi_on_grid`).
    spacing : float or sequence of float
        Grid spacing, one value or one per axis (> 0).
    origin : float or sequence of float, optional
        Coordinates of node ``psi[0, 0(, 0)]``.  Default: the grid centred on
        0, ``−(n−1) h / 2`` along a bounded axis and ``−n h / 2`` along a
        periodic one (the layout of ``nl.examples.grid`` and of ``nl.NLSE``;
        ``nl.DipolarGPE``'s grid, ``(i − n//2) h``, differs: use its
        :meth:`~nlsepy.DipolarGPE.vortices`, which passes its origin).
    threshold : float, optional
        Density threshold as a fraction of the peak ``max |psi|^2``, in
        ``[0, 1)`` (default 1e-3): a plaquette counts only where some node
        within `reach` nodes of its corners reaches it, so the phase noise
        of the outskirts yields no vortices.  0 counts every plaquette.
    reach : int, optional
        Nodes beyond a plaquette's corners that the density test looks at
        (default 4), so that a core's own density hole does not hide it.
    periodic : bool or sequence of bool, optional
        Axes on which the grid wraps around (the plaquettes across the
        boundary count too, positions are taken modulo the box).

    Returns
    -------
    Vortices
        2D: ``positions (n, 2)``, ``charges (n,)``, ``ids``.
    VortexLines
        3D: a sequence of :class:`VortexLine` (``points (k, 3)``,
        ``charge``, ``closed``).

    Raises
    ------
    TypeError
        `psi` is not complex, or a spacing, origin or threshold is not a
        number.
    ValueError
        `psi` is not 2D or 3D, has fewer than 2 points along an axis or
        non-finite values; a spacing is not > 0; an origin is not finite;
        `threshold` is outside ``[0, 1)``; `reach` is not an integer >= 0.

    Notes
    -----
    Four phase samples resolve one quantum: a ``|q| ≥ 2`` core spreads its
    winding over touching plaquettes, which the 2D finder merges into one
    vortex of the summed charge (two same-sign vortices closer than about a
    cell are reported as one); in 3D the two unit lines of a doubly
    charged line, which run within a cell of each other, are merged into
    one line of charge 2.

    Examples
    --------
    >>> import numpy as np
    >>> import nlsepy as nl
    >>> x = np.linspace(-4, 4, 81)
    >>> X, Y = np.meshgrid(x, x, indexing="ij")
    >>> psi = ((X - 0.53) + 1j * (Y + 1.07)) * np.exp(-(X**2 + Y**2) / 4)
    >>> v = nl.vortices(psi, spacing=0.1)           # origin -4: the centred grid
    >>> v.charges, v.positions.round(3)
    (array([1]), array([[ 0.53, -1.07]]))
    """
    arr = _field(psi)
    nd = arr.ndim
    h = np.array(_per_axis("spacing", spacing, nd, positive=True))
    per = _flags(periodic, nd)
    if origin is None:
        org = np.array([-(n if p else n - 1) * hq / 2 for n, hq, p in zip(arr.shape, h, per)])
    else:
        org = np.array(_per_axis("origin", origin, nd))
    thr = _threshold(threshold)
    reach = _reach(reach)
    top = float(max(np.abs(arr.real).max(), np.abs(arr.imag).max()))
    if top > 1e150 or 0 < top < 1e-150:   # |psi|^2 and the fits' products stay finite
        arr = arr.astype(np.complex128) / top
    dens = arr.real.astype(np.float64) ** 2 + arr.imag.astype(np.float64) ** 2
    windings = _windings(arr, dens, thr, reach, per)
    if nd == 2:
        return _points(arr, dens, windings[0], windings[1], h, org, per)
    return _lines(arr, dens, windings, h, org, per)


def _fwd(a: np.ndarray, ax: int, periodic: bool) -> np.ndarray:
    """The values one node on along `ax` (wrapping around when periodic)."""
    if periodic:
        return np.roll(a, -1, axis=ax)
    return a[(slice(None),) * ax + (slice(1, None),)]


def _trim(a: np.ndarray, ax: int, periodic: bool) -> np.ndarray:
    """The values that have a node after them along `ax`."""
    if periodic:
        return a
    return a[(slice(None),) * ax + (slice(None, -1),)]


def _dilate(mask: np.ndarray, reach: int, per: Sequence[bool]) -> np.ndarray:
    """Nodes within `reach` nodes (per axis) of a True node."""
    out = mask
    for ax in range(mask.ndim):
        src, out = out, out.copy()
        n = src.shape[ax]
        for s in range(1, min(reach, n - 1 if not per[ax] else n) + 1):
            if per[ax]:
                out |= np.roll(src, s, axis=ax) | np.roll(src, -s, axis=ax)
            else:
                lo = (slice(None),) * ax + (slice(None, -s),)
                hi = (slice(None),) * ax + (slice(s, None),)
                out[hi] |= src[lo]
                out[lo] |= src[hi]
    return out


def _windings(psi: np.ndarray, dens: np.ndarray, thr: float, reach: int,
              per: Sequence[bool]) -> List[np.ndarray]:
    """Integer windings of the plaquettes (lower-corner indexed), zero where
    the density test fails: 3D three arrays, by the plaquettes' normal axis
    (0, 1, 2), each loop taken counter-clockwise about +normal; 2D the
    windings (also kept next to a plaquette that passes) and the test."""
    nd = psi.ndim
    phase = np.angle(psi)
    edges = []
    for a in range(nd):
        d = _fwd(phase, a, per[a]) - _trim(phase, a, per[a])
        edges.append(np.remainder(d + math.pi, _TWO_PI) - math.pi)   # in [-pi, pi)
    del phase
    top = float(dens.max())
    valid = _dilate(dens >= thr * top, reach, per) if top > 0 else np.zeros(dens.shape, bool)
    planes = [(0, 1)] if nd == 2 else [(1, 2), (2, 0), (0, 1)]
    out = []
    for a, b in planes:
        ea, eb = edges[a], edges[b]
        circ = (_trim(ea, b, per[b]) + _fwd(eb, a, per[a])
                - _fwd(ea, b, per[b]) - _trim(eb, a, per[a]))
        w = np.rint(circ / _TWO_PI).astype(np.int8)
        del circ
        va = _trim(valid, a, per[a]) | _fwd(valid, a, per[a])
        vab = _trim(va, b, per[b]) | _fwd(va, b, per[b])
        if nd == 2:
            # a plaquette that fails the test still counts next to one that
            # passes: the two halves of a |q| >= 2 core (see _points)
            w[~(vab | _dilate(vab & (w != 0), 1, per))] = 0
            out.append(w)
            out.append(vab)
        else:
            w[~vab] = 0
            out.append(w)
    return out


def _stencil(centre: np.ndarray, n: int, periodic: bool) -> Tuple[np.ndarray, np.ndarray]:
    """The (up to) 4 nodes along an axis nearest each `centre` (node units):
    their indices into the array and their coordinates (unwrapped)."""
    k = min(4, n)
    start = np.floor(centre - 1.0).astype(np.int64)
    if not periodic:
        start = np.clip(start, 0, n - k)
    idx = start[:, None] + np.arange(k)
    return (idx % n if periodic else idx), idx.astype(np.float64)


def _falling(t: np.ndarray, k: int, order: int) -> np.ndarray:
    """``d^order/dt^order t^p`` for p = 0 .. k-1, shape (m, k)."""
    powers = np.ones((len(t), k))
    for p in range(1, k):
        powers[:, p] = powers[:, p - 1] * t
    out = np.zeros((len(t), k))
    for p in range(order, k):
        out[:, p] = math.perm(p, order) * powers[:, p - order]
    return out


def _fit(psi: np.ndarray, dens: np.ndarray, fixed: np.ndarray, plane: Tuple[int, int],
         centre: np.ndarray, charge: np.ndarray, lo: np.ndarray, hi: np.ndarray,
         per: Sequence[bool], status: bool = False) -> Any:
    """The cores in the plane of axes `plane`, in node units (unwrapped on
    periodic axes), kept within half a cell of ``[lo, hi]``, the plaquettes
    that carry the winding (a core close to an edge may lie just across it:
    the winding sees the field at the corners only); `centre` (m, 2) is
    their centre, `fixed` (m, ndim) gives the other axes' node.

    The field on the 4 x 4 nodes nearest `centre` is interpolated by the
    tensor-product cubic P(u, v) through them (exact for cubics, error
    O(h^4)), and Gauss-Newton finds the common zero of its ``(|q|-1)``-th
    derivatives along u and along v: the core of a ``|q| = 1`` vortex (a
    simple zero of P), and of a ``|q|`` one whose field there is a power of a
    linear form, ``(a u + b v)^|q|`` (a multiple zero).  Least-squares steps
    reach a point of the zero set also where it is a line (a vortex line in
    the plane of the plaquette).  Where this fails, the minimum of a
    least-squares quadratic fitted to ``|psi|^(2/|q|)`` (quadratic about any
    such core) is taken.  With `status`, also which cores converged.
    """
    m = len(centre)
    if m == 0:
        return (np.zeros((0, 2)), np.zeros(0, bool)) if status else np.zeros((0, 2))
    index: List[Any] = [fixed[:, ax][:, None, None] for ax in range(psi.ndim)]
    coord = []
    for k, ax in enumerate(plane):
        at, where = _stencil(centre[:, k], psi.shape[ax], per[ax])
        index[ax] = at[:, :, None] if k == 0 else at[:, None, :]
        coord.append(where - centre[:, k, None])
    vals = psi[tuple(index)].astype(np.complex128)             # (m, ku, kv)
    tu, tv = coord
    ku, kv = tu.shape[1], tv.shape[1]
    # P(u, v) = sum_pr K[p, r] u^p v^r (Lagrange bases in monomials)
    cu = np.linalg.inv(tu[:, :, None] ** np.arange(ku))         # (m, p, j)
    cv = np.linalg.inv(tv[:, :, None] ** np.arange(kv))
    K = cu @ vals @ np.swapaxes(cv, 1, 2)
    order = np.abs(charge).astype(np.int64) - 1
    lo, hi = lo - 0.5, hi + 0.5
    box_lo, box_hi = lo - centre, hi - centre
    u = np.zeros(m)
    v = np.zeros(m)
    good = order + 1 < min(ku, kv)     # the derivative is still linear in u and v at least

    def deriv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``d^(a+b) P / du^a dv^b`` at (u, v), per core."""
        out = np.empty(m, np.complex128)
        for da, db in set(zip(a.tolist(), b.tolist())):
            sel = (a == da) & (b == db)
            out[sel] = np.einsum("mp,mpr,mr->m", _falling(u[sel], ku, da), K[sel],
                                 _falling(v[sel], kv, db))
        return out

    def system() -> Tuple[np.ndarray, np.ndarray]:
        """Gauss-Newton's residuals (the real and imaginary parts of the
        (|q|-1)-th derivatives along u and along v: P twice for |q| = 1)
        and their Jacobian, shapes (m, 4) and (m, 4, 2)."""
        zero = np.zeros_like(order)
        du, dv = deriv(order, zero), deriv(zero, order)
        rows = [(du, deriv(order + 1, zero), deriv(order, zero + 1)),
                (dv, deriv(zero + 1, order), deriv(zero, order + 1))]
        F = np.stack([f for d, _, _ in rows for f in (d.real, d.imag)], axis=1)
        J = np.stack([np.stack((ju.real, jv.real), axis=1) for _, ju, jv in rows]
                     + [np.stack((ju.imag, jv.imag), axis=1) for _, ju, jv in rows], axis=1)
        return F, J[:, [0, 2, 1, 3]]

    def gauss_newton(F: np.ndarray, J: np.ndarray) -> np.ndarray:
        """The least-squares step ``-J^+ F`` (the shortest one where J has
        rank 1: a zero set that is a line), zero where not finite."""
        a11 = np.einsum("mi,mi->m", J[:, :, 0], J[:, :, 0])
        a12 = np.einsum("mi,mi->m", J[:, :, 0], J[:, :, 1])
        a22 = np.einsum("mi,mi->m", J[:, :, 1], J[:, :, 1])
        b1 = np.einsum("mi,mi->m", J[:, :, 0], F)
        b2 = np.einsum("mi,mi->m", J[:, :, 1], F)
        det = a11 * a22 - a12 * a12
        trace = a11 + a22
        full = det > 1e-8 * trace * trace
        det = np.where(full, det, 1.0)
        trace = np.where(trace > 0, trace, 1.0)
        du = np.where(full, (a12 * b2 - a22 * b1) / det, -b1 / trace)
        dv = np.where(full, (a12 * b1 - a11 * b2) / det, -b2 / trace)
        step = np.column_stack((du, dv))
        return np.where(np.isfinite(step), step, 0.0)

    with np.errstate(all="ignore"):
        for _ in range(12):
            step = gauss_newton(*system())
            u = np.clip(u + step[:, 0], box_lo[:, 0], box_hi[:, 0])
            v = np.clip(v + step[:, 1], box_lo[:, 1], box_hi[:, 1])
        # converged: a step of nothing, inside the box, where the two
        # derivatives vanish together to within a twentieth of a cell
        F, J = system()
        step = gauss_newton(F, J)
        good &= np.all(np.isfinite(F), axis=1) & np.all(np.isfinite(J), axis=(1, 2)) & (
            np.hypot(step[:, 0], step[:, 1]) < 1e-6) & (
            np.linalg.norm(F, axis=1) <= 0.05 * np.sqrt(np.einsum("mij,mij->m", J, J)))
    out = centre + np.column_stack((u, v))
    if not good.all():
        bad = ~good
        out[bad] = _quadratic_min(dens, fixed[bad], plane, centre[bad], charge[bad],
                                  lo[bad], hi[bad], per)
    return (out, good) if status else out


def _quadratic_min(dens: np.ndarray, fixed: np.ndarray, plane: Tuple[int, int],
                   centre: np.ndarray, charge: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                   per: Sequence[bool]) -> np.ndarray:
    """The minimum of a least-squares quadratic fitted to ``dens^(1/|q|)``
    on the (up to) 4 x 4 nodes nearest `centre`, kept inside ``[lo, hi]``
    (the centre where the fit has no minimum)."""
    m = len(centre)
    index: List[Any] = [fixed[:, ax][:, None, None] for ax in range(dens.ndim)]
    coord = []
    for k, ax in enumerate(plane):
        at, where = _stencil(centre[:, k], dens.shape[ax], per[ax])
        index[ax] = at[:, :, None] if k == 0 else at[:, None, :]
        coord.append(where - centre[:, k, None])
    vals = dens[tuple(index)] ** (1.0 / np.abs(charge))[:, None, None]
    u, v = np.broadcast_arrays(coord[0][:, :, None], coord[1][:, None, :])
    A = np.stack((np.ones_like(u), u, v, u * u, u * v, v * v), axis=-1).reshape(m, -1, 6)
    scale = np.maximum(vals.reshape(m, -1).max(axis=1), 1e-300)
    c = np.einsum("mij,mj->mi", np.linalg.pinv(A), vals.reshape(m, -1) / scale[:, None])
    b1, b2, c11, c12, c22 = c[:, 1], c[:, 2], c[:, 3], c[:, 4], c[:, 5]
    det = 4.0 * c11 * c22 - c12 * c12
    ok = (c11 > 0) & (det > 1e-9 * (c11 * c11 + c22 * c22 + c12 * c12))
    det = np.where(ok, det, 1.0)
    du = np.where(ok, (c12 * b2 - 2.0 * c22 * b1) / det, 0.0)
    dv = np.where(ok, (c12 * b1 - 2.0 * c11 * b2) / det, 0.0)
    return np.clip(centre + np.column_stack((du, dv)), lo, hi)


def _to_coords(nodes: np.ndarray, h: np.ndarray, org: np.ndarray, shape: Sequence[int],
               per: Sequence[bool]) -> np.ndarray:
    """Node units -> the grid's coordinates (periodic axes wrapped into the box)."""
    nodes = np.array(nodes, dtype=np.float64)
    for ax, p in enumerate(per):
        if p:
            nodes[:, ax] %= shape[ax]
    return org + nodes * h


# ----------------------------------------------------------------------- 2D
def _clusters(cells: np.ndarray, w: np.ndarray, shape: Tuple[int, ...],
              per: Sequence[bool]) -> List[List[int]]:
    """Groups of plaquettes with windings of one sign that share an edge or
    a corner (union-find over the plaquettes that wind)."""
    parent = list(range(len(cells)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    where = {tuple(c): k for k, c in enumerate(cells.tolist())}
    for k, (i, j) in enumerate(cells.tolist()):
        for di, dj in ((1, -1), (1, 0), (1, 1), (0, 1)):
            ni, nj = i + di, j + dj
            if per[0]:
                ni %= shape[0]
            if per[1]:
                nj %= shape[1]
            other = where.get((ni, nj))
            if other is not None and other != k and np.sign(w[other]) == np.sign(w[k]):
                parent[root(other)] = root(k)
    groups: Dict[int, List[int]] = {}
    for k in range(len(cells)):
        groups.setdefault(root(k), []).append(k)
    return list(groups.values())


def _points(psi: np.ndarray, dens: np.ndarray, w: np.ndarray, valid: np.ndarray,
            h: np.ndarray, org: np.ndarray, per: Sequence[bool]) -> Vortices:
    """Point vortices: the touching plaquettes of one sign merged, a group
    kept when one of its plaquettes passes the density test."""
    cells = np.argwhere(w != 0)
    wk = w[tuple(cells.T)].astype(np.int64)
    passed = valid[tuple(cells.T)]
    groups = [g for g in _clusters(cells, wk, w.shape, per) if passed[g].any()]
    if not groups:
        return Vortices(np.zeros((0, 2)), np.zeros(0, np.int64))
    m = len(groups)
    charge = np.empty(m, np.int64)
    centre = np.empty((m, 2))
    lo = np.empty((m, 2))
    hi = np.empty((m, 2))
    for g, members in enumerate(groups):
        c = cells[members].astype(np.float64)
        for ax in range(2):  # unwrap a group that straddles a periodic boundary
            if per[ax]:
                n = w.shape[ax]
                c[:, ax] -= n * np.round((c[:, ax] - c[0, ax]) / n)
        charge[g] = wk[members].sum()
        centre[g] = c.mean(axis=0) + 0.5
        lo[g] = c.min(axis=0)
        hi[g] = c.max(axis=0) + 1.0
    nodes = _fit(psi, dens, np.zeros((m, 2), np.int64), (0, 1), centre, charge, lo, hi, per)
    pos = _to_coords(nodes, h, org, dens.shape, per)
    order = np.lexsort((pos[:, 1], pos[:, 0]))
    return Vortices(pos[order], charge[order])


# ----------------------------------------------------------------------- 3D
def _lines(psi: np.ndarray, dens: np.ndarray, windings: List[np.ndarray], h: np.ndarray,
           org: np.ndarray, per: Sequence[bool]) -> VortexLines:
    """Vortex lines: each winding plaquette a piercing, fitted in its plane,
    and the piercings chained through the cells (:func:`_trace`)."""
    shape = dens.shape
    ncell = tuple(n if p else n - 1 for n, p in zip(shape, per))
    tails, heads, caps, points, faces = [], [], [], [], []
    for normal, w in enumerate(windings):
        cells = np.argwhere(w != 0)
        if len(cells) == 0:
            continue
        faces.append(np.column_stack((np.full(len(cells), normal), cells)))
        wk = w[tuple(cells.T)].astype(np.int64)
        a, b = [ax for ax in range(3) if ax != normal]
        centre = cells[:, [a, b]] + 0.5
        inplane = _fit(psi, dens, cells, (a, b), centre, wk, centre - 0.5, centre + 0.5, per)
        nodes = cells.astype(np.float64)
        nodes[:, a], nodes[:, b] = inplane[:, 0], inplane[:, 1]
        points.append(_to_coords(nodes, h, org, shape, per))
        # the cells behind and in front of each face along its normal
        behind, front = cells.copy(), cells.copy()
        behind[:, normal] -= 1
        inside_b = np.ones(len(cells), bool)
        inside_f = np.ones(len(cells), bool)
        if per[normal]:
            behind[:, normal] %= shape[normal]
        else:
            inside_b = behind[:, normal] >= 0
            inside_f = front[:, normal] < ncell[normal]
        ib = np.where(inside_b, np.ravel_multi_index(tuple(np.maximum(behind, 0).T), ncell,
                                                     mode="clip"), -1)
        jf = np.where(inside_f, np.ravel_multi_index(tuple(front.T), ncell, mode="clip"), -1)
        pos = wk > 0
        tails.append(np.where(pos, ib, jf))
        heads.append(np.where(pos, jf, ib))
        caps.append(np.abs(wk))
    if not caps:
        return VortexLines(())
    tail = np.concatenate(tails)
    head = np.concatenate(heads)
    cap = np.concatenate(caps)
    pts = np.concatenate(points)
    # a face on the grid's boundary leads out of the grid: a cell of its own
    out = np.flatnonzero(tail < 0)
    tail[out] = -1 - 2 * out
    out = np.flatnonzero(head < 0)
    head[out] = -2 - 2 * out
    box = np.array([n * hq if p else 0.0 for n, hq, p in zip(shape, h, per)])
    lines = _trace(tail, head, cap, pts, box)
    lines = _merge(lines, np.concatenate(faces), psi, dens, h, org, per, box)
    wraps = tuple(box.tolist()) if any(per) else None
    return VortexLines(tuple(VortexLine(p, c, closed, k, wraps)
                             for k, (_, p, c, closed) in enumerate(lines)))


Line = Tuple[List[int], np.ndarray, int, bool]


def _unwrap(points: np.ndarray, box: np.ndarray) -> np.ndarray:
    """Points of a line made continuous across a periodic box."""
    if not (box > 0).any() or len(points) < 2:
        return points
    L = np.where(box > 0, box, 1.0)
    step = np.diff(points, axis=0)
    step -= np.where(box > 0, L * np.round(step / L), 0.0)
    return points[0] + np.vstack((np.zeros(3), np.cumsum(step, axis=0)))


def _merge(lines: List[Line], faces: np.ndarray, psi: np.ndarray, dens: np.ndarray,
           h: np.ndarray, org: np.ndarray, per: Sequence[bool], box: np.ndarray) -> List[Line]:
    """One line of charge ``c1 + c2`` for two lines that run side by side in
    the same direction, every point of each within 1.5 cells of the other
    (the two halves of a doubly charged line that the plaquettes split, see
    the module's notes); its points are found again for the total charge,
    in the planes of the piercings of the one with fewer points."""
    if len(lines) < 2:
        return lines
    tol = 1.5 * float(h.max())
    L = np.where(box > 0, box, 1.0)

    def apart(d: np.ndarray) -> np.ndarray:
        return d - np.where(box > 0, L * np.round(d / L), 0.0)

    def tangents(p: np.ndarray, closed: bool) -> np.ndarray:
        if len(p) < 2:
            return np.zeros_like(p)
        if closed:
            return apart(np.roll(p, -1, axis=0) - np.roll(p, 1, axis=0))
        return np.gradient(p, axis=0)

    cent = np.array([p.mean(axis=0) for _, p, _, _ in lines])
    parent = list(range(len(lines)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(lines)):
        near = np.flatnonzero(np.linalg.norm(apart(cent[i + 1:] - cent[i]), axis=1) <= 2 * tol)
        for j in (i + 1 + near).tolist():
            (_, pi, _, ci), (_, pj, _, cj) = lines[i], lines[j]
            if ci != cj or not 0.5 <= len(pi) / len(pj) <= 2.0:
                continue
            d = np.linalg.norm(apart(pi[:, None, :] - pj[None, :, :]), axis=-1)
            if d.min(axis=1).max() > tol or d.min(axis=0).max() > tol:
                continue
            ti, tj = tangents(pi, ci), tangents(pj, cj)
            if np.einsum("ij,ij->i", ti, tj[d.argmin(axis=1)]).sum() > 0:
                parent[root(j)] = root(i)
    groups: Dict[int, List[int]] = {}
    for k in range(len(lines)):
        groups.setdefault(root(k), []).append(k)
    out: List[Line] = []
    for members in groups.values():
        if len(members) == 1:
            out.append(lines[members[0]])
            continue
        edges, _, _, closed = min((lines[k] for k in members), key=lambda ln: len(ln[1]))
        charge = sum(lines[k][2] for k in members)
        pts = np.empty((len(edges), 3))
        found = np.zeros(len(edges), bool)
        for normal in range(3):
            sel = np.flatnonzero(faces[edges, 0] == normal)
            if not sel.size:
                continue
            cells = faces[np.asarray(edges)[sel], 1:]
            a, b = [ax for ax in range(3) if ax != normal]
            centre = cells[:, [a, b]] + 0.5
            inplane, found[sel] = _fit(psi, dens, cells, (a, b), centre,
                                       np.full(len(sel), charge), centre - 0.5, centre + 0.5,
                                       per, status=True)
            nodes = cells.astype(np.float64)
            nodes[:, a], nodes[:, b] = inplane[:, 0], inplane[:, 1]
            pts[sel] = _to_coords(nodes, h, org, dens.shape, per)
        # a face the split halves stepped through, which the line itself
        # does not cross, has no core of the total charge: left out
        keep = found if found.sum() >= 2 else np.ones(len(edges), bool)
        out.append(([e for e, k in zip(edges, keep) if k], _unwrap(pts[keep], box), charge,
                    closed))
    return out


def _trace(tail: np.ndarray, head: np.ndarray, cap: np.ndarray, pts: np.ndarray,
           box: np.ndarray) -> List["Line"]:
    """Chain the piercings (flux `cap` from cell `tail` to cell `head`) into
    lines: first from the cells with more flux out than in (the boundary,
    the cut by the threshold, a change of charge), then the loops."""
    rem = cap.astype(np.int64).tolist()
    tail_l, head_l = tail.tolist(), head.tolist()
    pts_l = [tuple(p) for p in pts.tolist()]
    box_l = box.tolist()
    outs: Dict[int, List[int]] = {}
    out_rem: Dict[int, int] = {}
    in_rem: Dict[int, int] = {}
    for e, (tl, hd, c) in enumerate(zip(tail_l, head_l, rem)):
        outs.setdefault(tl, []).append(e)
        out_rem[tl] = out_rem.get(tl, 0) + c
        in_rem[hd] = in_rem.get(hd, 0) + c
    work: Deque[int] = deque()  # edges that may start an open line

    def near(p: Tuple[float, ...], ref: Tuple[float, ...]) -> Tuple[float, ...]:
        """`p` moved by whole boxes next to `ref` (minimum image)."""
        return tuple(a - L * round((a - r) / L) if L > 0 else a
                     for a, r, L in zip(p, ref, box_l))

    def take(e: int, c: int) -> None:
        rem[e] -= c
        out_rem[tail_l[e]] -= c
        in_rem[head_l[e]] = in_rem.get(head_l[e], 0) - c

    def follow(e0: int, c: int, loop: bool) -> Line:
        take(e0, c)
        line = [pts_l[e0]]
        edges = [e0]
        cell = head_l[e0]
        while True:
            if loop and cell == tail_l[e0]:
                return edges, np.array(line), c, True
            here = line[-1]
            best, dist, spot = -1, math.inf, here
            for e in outs.get(cell, ()):
                if rem[e] >= c:
                    q = near(pts_l[e], here)
                    d = sum((a - b) ** 2 for a, b in zip(q, here))
                    if d < dist:
                        best, dist, spot = e, d, q
            if best < 0:
                work.extend(outs.get(cell, ()))  # the end may now start lines
                return edges, np.array(line), c, False
            take(best, c)
            line.append(spot)
            edges.append(best)
            cell = head_l[best]

    lines: List[Line] = []
    while sum(rem) > 0:
        work.extend(range(len(rem)))
        while work:
            e = work.popleft()
            tl = tail_l[e]
            while rem[e] > 0 and out_rem[tl] > in_rem.get(tl, 0):
                lines.append(follow(e, min(rem[e], out_rem[tl] - in_rem.get(tl, 0)), False))
        for e in range(len(rem)):
            while rem[e] > 0 and out_rem[tail_l[e]] <= in_rem.get(tail_l[e], 0):
                lines.append(follow(e, rem[e], True))
    return lines


# ----------------------------------------------------------------- tracking
class VortexTracks(Sequence):
    """Vortices of a run's frames with ids that follow each vortex (what
    :meth:`nlsepy.runner.Frames.vortices` returns): a sequence of
    :class:`Vortices` (2D) or :class:`VortexLines` (3D), one per frame.

    Attributes
    ----------
    t : numpy.ndarray
        The frames' times.
    max_jump : float
        The largest move between frames that kept an id.
    """

    def __init__(self, frames: Sequence[Found], t: np.ndarray, max_jump: float) -> None:
        self._frames = tuple(frames)
        self.t = np.asarray(t, dtype=np.float64)
        self.max_jump = float(max_jump)

    def __len__(self) -> int:
        return len(self._frames)

    def __getitem__(self, i):  # type: ignore[override]
        return self._frames[i]

    @property
    def ids(self) -> np.ndarray:
        """Every id that occurs, ascending."""
        found = [np.asarray(f.ids) for f in self._frames]
        return np.unique(np.concatenate(found)) if found else np.zeros(0, np.int64)

    def track(self, id: int) -> Dict[str, np.ndarray]:
        """The path of vortex `id` through the frames where it is found.

        Parameters
        ----------
        id : int
            One of :attr:`ids`.

        Returns
        -------
        dict
            ``frame`` (indices), ``t``, ``position`` (``(k, 2)`` points, or
            the lines' centroids ``(k, 3)``) and ``charge`` (per frame).
        """
        frame, pos, charge = [], [], []
        for k, f in enumerate(self._frames):
            hit = np.flatnonzero(np.asarray(f.ids) == id)
            if hit.size:
                frame.append(k)
                pos.append(f._anchors()[hit[0]])
                charge.append(int(f._keys()[hit[0]]))
        if not frame:
            raise ValueError(f"id must be one of the tracked ids {self.ids.tolist()}, "
                             f"got {id!r}")
        frame_a = np.array(frame)
        return {"frame": frame_a, "t": self.t[frame_a], "position": np.array(pos),
                "charge": np.array(charge)}

    def __repr__(self) -> str:
        return f"VortexTracks({len(self)} frames, {len(self.ids)} ids)"


def track(found: Sequence[Found], t: Sequence[float], max_jump: float,
          box: Optional[Sequence[float]] = None) -> VortexTracks:
    """Give the vortices of consecutive frames ids that follow each vortex.

    Nearest-neighbour matching, frame to frame: the pairs (a vortex of the
    last frame, one of this frame) of equal charge are taken in order of
    distance, each vortex at most once, up to `max_jump`; a vortex of this
    frame left unmatched gets a new id.  Points match by position, lines
    by centroid (:attr:`VortexLine.centroid`).

    Parameters
    ----------
    found : sequence of Vortices or VortexLines
        Each frame's vortices, in time order.
    t : sequence of float
        The frames' times.
    max_jump : float
        The largest distance between a vortex's positions in consecutive
        frames (> 0).
    box : sequence of float, optional
        Per axis, the box's length where it is periodic (distances by the
        nearest image), else 0.

    Returns
    -------
    VortexTracks
    """
    max_jump = real("max_jump", max_jump, positive=True)
    out: List[Found] = []
    prev_pos = prev_key = prev_ids = None
    next_id = 0
    for f, tk in zip(found, t):
        pos, key = f._anchors(), f._keys()
        ids = np.full(len(key), -1, np.int64)
        if prev_pos is not None and len(prev_pos) and len(pos):
            d = pos[:, None, :] - prev_pos[None, :, :]
            if box is not None:
                L = np.asarray(box, dtype=np.float64)
                per = L > 0
                d = np.where(per, d - np.where(per, L, 1.0) * np.round(d / np.where(per, L, 1.0)),
                             d)
            dist = np.sqrt((d * d).sum(axis=-1))
            dist[key[:, None] != prev_key[None, :]] = np.inf
            taken = np.zeros(len(prev_pos), bool)
            for flat in np.argsort(dist, axis=None, kind="stable"):
                i, j = divmod(int(flat), len(prev_pos))
                if dist[i, j] > max_jump:
                    break
                if ids[i] < 0 and not taken[j]:
                    ids[i] = prev_ids[j]
                    taken[j] = True
        new = ids < 0
        ids[new] = np.arange(next_id, next_id + int(new.sum()))
        next_id += int(new.sum())
        out.append(f._with_ids(ids, float(tk)))
        prev_pos, prev_key, prev_ids = pos, key, ids
    return VortexTracks(out, np.asarray(list(t), dtype=np.float64), max_jump)
