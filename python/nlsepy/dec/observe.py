"""What DecGPE measures of its state besides norm and energy: inner products
with other states (the seed's error of section 5.1), the density and the
wave function between the circumcentres (on a regular grid or at any
points), and the vortices of the state resampled on a regular grid."""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import numpy as np

from ..common import dist as _dist
from ..common import vortices as _vortices

__all__ = ["Observables"]



#: the largest distance from the centre along an axis that density_at takes
#: (its squares, summed over three axes, stay finite doubles)
MAX_DISTANCE = 1e150

class Observables:
    """The observables of :class:`nlsepy.DecGPE` (a base of that class: its
    methods use the solver's state, cells and communicator)."""

    def inner(self, other: Any) -> complex:
        """``<other|psi> = sum_i |B_i| conj(other_i) psi_i``.

        Parameters
        ----------
        other : array_like or callable
            A state on this grid, or ``other(positions)``.
        """
        o = self._agree(lambda: self._state_array("other", other))
        v = np.vdot(o * self.volumes, self.psi.astype(np.complex128))
        if self._comm is not None:  # collective: the ranks' parts in rank order
            re, im = _dist.ordered_sum(self._solver.capsule, [v.real, v.imag])
            v = complex(re, im)
        return complex(v)

    def overlap(self, other: Any) -> float:
        """The seed's error ``E(t) = 1 - |<other|psi(t)>|`` (section 5.1).

        Parameters
        ----------
        other : array_like or callable
            The reference state (e.g. the initial vortex), normalised.

        Returns
        -------
        float
        """
        return 1.0 - abs(self.inner(other))

    def rmse(self, reference: Any) -> float:
        """``sqrt(mean_i |reference_i - psi_i|^2)`` (section 5.1).

        Parameters
        ----------
        reference : array_like or callable
            Values per cell, or ``reference(positions, t)`` evaluated at the
            current time (e.g. a stationary state with its phase e^{-i mu t}).
        """
        def local() -> np.ndarray:
            ref = reference(self.positions, self.t) if callable(reference) else reference
            return self._state_array("reference", ref).astype(np.complex128)

        ref = self._agree(local)
        if self._comm is None:
            return float(np.sqrt(np.mean(np.abs(ref - self.psi) ** 2)))
        sq = _dist.ordered_sum(self._solver.capsule, [np.sum(np.abs(ref - self.psi) ** 2)])
        return float(np.sqrt(sq[0] / self._n))

    def density_on_grid(self, shape: Sequence[int] = (64, 64, 64),
                        bounds: Optional[Sequence[Tuple[float, float]]] = None,
                        neighbours: int = 8) -> Tuple[np.ndarray, Tuple[np.ndarray, ...]]:
        """``|psi|^2`` interpolated to a regular grid (for plotting).

        Inverse-distance weighting of the ``neighbours`` nearest circumcentres
        (SciPy's cKDTree); exact at the circumcentres.

        Parameters
        ----------
        shape : (int, int, int) or (int, int)
            Points along x, y (and z).  With two entries the grid is the plane
            ``z = bounds[2][0]`` (default z = 0).
        bounds : sequence of (lo, hi), optional
            Extent per axis (default: the box).
        neighbours : int, optional
            Circumcentres per interpolated point.

        Returns
        -------
        density : ndarray
            Shape `shape`.
        axes : tuple of ndarray
            The grid's coordinates per axis.
        """
        return self._on_grid(shape, bounds, neighbours, density=True)

    def psi_on_grid(self, shape: Sequence[int] = (64, 64, 64),
                    bounds: Optional[Sequence[Tuple[float, float]]] = None,
                    neighbours: int = 8) -> Tuple[np.ndarray, Tuple[np.ndarray, ...]]:
        """The wave function interpolated to a regular grid: a Cartesian
        state for :func:`nlsepy.vortices` and other grid tools.

        The parameters and the interpolation are those of
        :meth:`density_on_grid`, applied to ``psi`` itself (complex128, shape
        `shape`, with the grid's coordinates per axis); its phase winds as the
        state's around any loop longer than the circumcentres' spacing.
        """
        return self._on_grid(shape, bounds, neighbours, density=False)

    def vortices(self, shape: Sequence[int] = (64, 64, 64),
                 bounds: Optional[Sequence[Tuple[float, float]]] = None,
                 threshold: float = _vortices.DEFAULT_THRESHOLD, *,
                 reach: int = _vortices.DEFAULT_REACH, neighbours: int = 8) -> Any:
        """The quantised vortices of the state, on a regular grid.

        :func:`nlsepy.vortices` on :meth:`psi_on_grid`: vortex lines of the
        3D grid (three entries of `shape`), or the point vortices of the
        plane ``z = bounds[2][0]`` (two entries; default z = 0), in the
        solver's coordinates (the trap centre at the origin).  The grid
        should resolve the cores: a spacing of a fraction of the healing
        length, and no finer than the circumcentres' spacing gives.

        Parameters
        ----------
        shape : (int, int, int) or (int, int)
            Points along x, y (and z) of the grid.
        bounds : sequence of (lo, hi), optional
            Extent per axis (default: the box).
        threshold : float, optional
            Density threshold, a fraction of the peak ``max |psi|^2`` on
            the grid (default 1e-3).
        reach : int, optional
            Nodes beyond a plaquette's corners that the density test looks
            at (default 4).
        neighbours : int, optional
            Circumcentres per interpolated point.

        Returns
        -------
        nlsepy.Vortices or nlsepy.VortexLines

        Notes
        -----
        A distributed solver gathers the global state on every rank
        (collective); every rank gets the result.
        """
        psi, axes = self.psi_on_grid(shape, bounds, neighbours)
        if min(len(a) for a in axes) < 2:
            raise ValueError(f"shape must have at least 2 points along each axis for vortices, "
                             f"got {tuple(shape)!r}")
        spacing = []
        for q, a in enumerate(axes):
            step = float(a[1] - a[0])
            if not step > 0:
                raise ValueError(f"bounds[{q}] must have lo < hi for vortices, got "
                                 f"({a[0]!r}, {a[-1]!r})")
            spacing.append(step)
        return _vortices.vortices(psi, spacing, [float(a[0]) for a in axes], threshold,
                                  reach=reach)

    def _on_grid(self, shape: Sequence[int], bounds: Optional[Sequence[Tuple[float, float]]],
                 neighbours: int, density: bool) -> Tuple[np.ndarray, Tuple[np.ndarray, ...]]:
        """``|psi|^2`` (`density`) or ``psi`` on the regular grid of
        :meth:`density_on_grid`."""
        shape = tuple(int(s) for s in shape)
        if len(shape) not in (2, 3) or min(shape) < 1:
            raise ValueError(f"shape must be 2 or 3 positive integers, got {shape!r}")
        lo = self._origin
        hi = self._origin + np.asarray(self.box)
        if bounds is None:
            bounds = [(lo[q], hi[q]) for q in range(3)]
            if len(shape) == 2:
                bounds[2] = (0.0, 0.0)
        axes = tuple(np.linspace(b[0], b[1], s) for b, s in zip(bounds, shape))
        if len(shape) == 2:
            axes = axes + (np.array([float(bounds[2][0])]),)
        mesh = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)
        out = self._interpolate(mesh, neighbours, density)
        out = out.reshape(shape if len(shape) == 3 else shape + (1,))
        if len(shape) == 2:
            out = out[..., 0]
            axes = axes[:2]
        return out, axes

    def density_at(self, points: Any, neighbours: int = 8) -> np.ndarray:
        """``|psi|^2`` at arbitrary points, interpolated from the circumcentres.

        Inverse-distance weighting (power 2) of the `neighbours` nearest
        circumcentres, found with SciPy's cKDTree (built once per solver).

        Parameters
        ----------
        points : array_like, shape (..., 3)
            Where to evaluate.
        neighbours : int, optional
            Circumcentres per point.

        Returns
        -------
        ndarray, shape (...)

        Notes
        -----
        A distributed solver gathers the global state on every rank
        (collective); every rank gets the result.
        """
        return self._interpolate(points, neighbours, density=True)

    def _interpolate(self, points: Any, neighbours: int, density: bool) -> np.ndarray:
        """``|psi|^2`` (`density`) or ``psi`` at `points` by inverse-distance
        weighting of the `neighbours` nearest circumcentres."""
        def check() -> np.ndarray:
            pts = np.asarray(points, dtype=float)
            if pts.shape[-1:] != (3,):
                raise ValueError(f"points must have shape (..., 3), got {pts.shape}")
            # the nearest-neighbour search squares the distances: farther
            # than this from the centre they overflow and no cell is found
            far = np.abs(pts - np.asarray(self.centre)) if pts.size else np.zeros(1)
            if not np.all(np.isfinite(far)) or far.max() > MAX_DISTANCE:
                bad = pts.reshape(-1, 3)[~np.all(far.reshape(-1, 3) <= MAX_DISTANCE, axis=1)]
                raise ValueError(f"points must be finite and within {MAX_DISTANCE:g} of the "
                                 f"centre {self.centre} along each axis, got {bad[0].tolist()} "
                                 f"(and {len(bad) - 1} more)")
            if self._tree is None:
                try:
                    from scipy.spatial import cKDTree
                except ImportError as exc:  # pragma: no cover
                    raise ImportError("density_at needs scipy: pip install scipy") from exc
                self._tree = cKDTree(self._positions_of(0, self.blocks[2]))
            return pts

        pts = self._agree(check)
        k = min(int(neighbours), self._n)
        flat = pts.reshape(-1, 3)
        d, idx = self._tree.query(flat, k=k)
        d = d.reshape(len(flat), -1)
        idx = idx.reshape(len(flat), -1)
        state = self.gather(root=None)
        values = np.abs(state) ** 2 if density else state.astype(np.complex128)
        w = 1.0 / np.maximum(d, 1e-12 * self.spacing) ** 2
        return ((w * values[idx]).sum(axis=1) / w.sum(axis=1)).reshape(pts.shape[:-1])

    def bytes_per_step(self) -> float:
        """Bytes a leapfrog step moves through memory (traffic model)."""
        return self._solver.bytes_per_cell_step() * self._n

    def last_step_seconds(self) -> float:
        """Seconds the steps of the last stepping call took: :meth:`step`,
        :meth:`imaginary_time` or one frame of :meth:`run`, summed over the
        backend calls it was split into (CUDA events on the GPU, the wall
        clock on the CPU; the bookkeeping between those calls is left out)."""
        return self._last_seconds

    def last_kernel(self) -> str:
        """The backend's kernel form in the last stepping call (for
        benchmarks and tuning): ``"rows"`` on the CPU; on CUDA ``"z
        marching (tiles 8x8, ring of 5 planes, 3 thread blocks an SM,
        chunks of 20 layers)"`` (the default on cubic, FCC and BCC, with
        its tiles of blocks, its ring of planes in shared memory, its
        occupancy, the length of its chunks of layers and, on large grids,
        ``", bands of 8 tile columns"``), ``"rows, units
        by warps, two cells a lane"`` (real time in complex64 on A15, C15
        and Z; with ``", streamed"`` on C15 and Z), ``"rows, units by
        warps, lean"`` (imaginary time in complex64 on A15, C15 and Z; with
        ``", streamed"`` on C15 and Z, and on A15 in complex128),
        ``"rows, units by warps"`` or
        ``"rows, units by thread blocks"`` (``""`` before the first step).
        ``NLSEPY_DEC_KERNEL``, ``NLSEPY_DEC_MARCH_TILE``,
        ``NLSEPY_DEC_MARCH_RING``, ``NLSEPY_DEC_MARCH_BAND`` and
        ``NLSEPY_DEC_MARCH_CHUNKS`` (read when the solver is made) force a
        CUDA form, tiles, ring and order of the marching kernel's units;
        docs/ARCHITECTURE.md describes them."""
        return self._solver.kernel()
