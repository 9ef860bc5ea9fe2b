"""Where DecGPE's unknowns sit and what each cell holds: the circumcentres
and volumes of this rank's cells, arrays given per cell or as functions of
the position, the potential on the cells, the stability bound of eq. 11 and
the memory a grid takes."""

from __future__ import annotations

from typing import Any, Optional, Tuple

import numpy as np

from ..common import guard as _guard
from . import grids as _grids
from .dist import HALO_LAYERS

__all__ = ["Cells"]


class Cells:
    """The cells of :class:`nlsepy.DecGPE` (a base of that class)."""

    def _check_memory(self) -> None:
        """Refuse at once when the state will not fit (MemoryError naming the
        size): two states of the leapfrog, two more for the RK4 start, the
        potential, and a host copy for each read of the state."""
        n = _grids.CELLS_PER_BLOCK[self._grid] * int(np.prod(self._blocks))
        item = np.dtype(self._dtype).itemsize
        what = (f"DecGPE(grid={self._grid!r}, blocks={self._blocks}, "
                f"dtype={np.dtype(self._dtype).name}) with {n} unknowns")
        if self._layout is not None:  # this rank's slab and its halo layers
            lay = self._layout
            layers = lay.count + 2 * HALO_LAYERS * (lay.size > 1)
            n = self._plane * layers
            what += (f", this rank's layers {lay.start} .. {lay.start + lay.count - 1} and "
                     f"halos ({n} unknowns)")
        state = 4 * n * item + n * item // 2
        if self._backend == "cuda":
            _guard.require_memory(state, what, "cuda", host_bytes=2 * n * item)
        else:
            # the CPU kernels' states carry a ghost block at both ends of
            # every row of blocks along x
            nx = self._blocks[0]
            _guard.require_memory(state * (nx + 2) // nx + n * item, what)

    @property
    def cells_per_block(self) -> int:
        """Unknowns per block (1, 12, 12, 46, 136, 80 by grid)."""
        return self._block.cells

    @property
    def size(self) -> int:
        """Number of unknowns (of the whole grid)."""
        return self._n

    @property
    def block(self) -> "_grids.Block":
        """The periodic block's complex (lattice constant 1)."""
        return self._block

    def _positions_of(self, z0: int, z1: int) -> np.ndarray:
        """Circumcentres of the cells of the layers z0 .. z1 - 1 of blocks."""
        nx, ny, _ = self.blocks
        e = self._edge
        bz, by, bx = np.meshgrid(np.arange(z0, z1), np.arange(ny), np.arange(nx), indexing="ij")
        corner = self._origin + np.stack([bx * e[0], by * e[1], bz * e[2]], axis=-1)
        pos = corner[:, :, :, None, :] + self._block.centres * self.spacing
        return pos.reshape(-1, 3)

    @property
    def positions(self) -> np.ndarray:
        """Circumcentres of all cells, shape ``(size, 3)``, in the state's order
        (of this rank's cells, ``local_slice``, when distributed)."""
        z0, count = self._layers
        return self._positions_of(z0, z0 + count)

    @property
    def volumes(self) -> np.ndarray:
        """Cell volumes ``|B_i|``, shape ``(size,)`` (read-only; this rank's cells
        when distributed)."""
        if self._volumes is None:
            blocks = self.blocks[0] * self.blocks[1] * self._layers[1]
            v = np.tile(self._block.volumes * self.spacing ** 3, blocks)
            v.setflags(write=False)
            self._volumes = v
        return self._volumes

    @property
    def _n_own(self) -> int:
        return self._own.stop - self._own.start

    def _cells(self, name: str, arr: np.ndarray) -> np.ndarray:
        """This rank's values of a per-cell array: the global array (sliced)
        or the rank's part as it is."""
        if arr.shape == (self._n,):
            return arr[self._own]
        if self._comm is not None and arr.shape == (self._n_own,):
            return arr
        if self._comm is None:
            raise ValueError(f"{name} must be 1-d with one value per cell ({self._n} = "
                             f"{self.cells_per_block} x {self.blocks}), got shape {arr.shape}")
        z0, count = self._layers
        raise ValueError(f"{name} must be 1-d with one value per cell ({self._n} = "
                         f"{self.cells_per_block} x {self.blocks}) or this rank's part "
                         f"({self._n_own} values, layers {z0} .. {z0 + count - 1} of blocks "
                         f"along z), got shape {arr.shape}")

    def _potential_array(self, V: Any) -> np.ndarray:
        if callable(V):
            p = self.positions
            V = V(p[:, 0], p[:, 1], p[:, 2])
        arr = np.asarray(V)
        if arr.dtype.kind not in "fiu" or arr.dtype == bool:
            raise TypeError(f"V must be real (a real array or a callable returning one), got "
                            f"dtype {arr.dtype}")
        n = self._n_own
        arr = np.broadcast_to(arr, (n,)) if arr.ndim == 0 else arr.reshape(-1) \
            if arr.size in (self._n, n) else arr
        if arr.shape not in ((n,), (self._n,)):
            raise ValueError(f"V must have one value per cell ({self._n}"
                             + (f", or this rank's {n}" if self._comm is not None else "")
                             + f"), got shape {np.shape(V)}")
        arr = arr[self._own] if arr.shape == (self._n,) else arr
        if not np.all(np.isfinite(arr)):
            raise ValueError("V contains non-finite values (NaN or Inf)")
        out = np.array(arr, dtype=np.float32 if self.dtype == np.complex64 else np.float64,
                       order="C", copy=True)  # owned: the caller's array may change
        out.setflags(write=False)
        return out

    def _trap_max_per_cell(self) -> np.ndarray:
        """max over blocks of the trap at each cell of the block, shape (C,)."""
        out = np.zeros(self.cells_per_block)
        cen = self._block.centres * self.spacing
        # beyond double range the bound becomes 0, which the solver refuses
        # naming spacing and centre (DecGPE._checked_bound)
        with np.errstate(over="ignore", invalid="ignore"):
            for q in range(3):
                ends = self._origin[q] + np.array([0, self.blocks[q] - 1]) * self._edge[q]
                x = ends[:, None] + cen[None, :, q]
                out += 0.5 * np.float64(self.trap[q]) ** 2 * np.max(x ** 2, axis=0)
        return out

    def _stability_bound(self) -> float:
        """``1 / (2 max_i M_ii)`` of eq. 11 (Laplacian diagonal plus potential,
        the potential's magnitude where it is negative)."""
        if self._V is None:
            m = np.max(self._diag + self._trap_max_per_cell())
        else:
            p = self.positions
            vt = 0.5 * (np.asarray(self.trap) ** 2 * p ** 2).sum(axis=1)
            # |V|: a negative potential shifts the spectrum down as far
            m = np.max(np.tile(self._diag, len(p) // self.cells_per_block) + np.abs(vt + self._V))
        if self._comm is not None:  # collective: the largest over every rank's cells
            from mpi4py import MPI
            m = self._comm.allreduce(float(m), op=MPI.MAX)
        return float(1.0 / (2.0 * max(m, 1e-300)))

    def _state_array(self, name: str, value: Any, t: float = 0.0) -> np.ndarray:
        """This rank's values (all of them for one process) of a state
        given as an array or a callable of the positions."""
        if callable(value):
            value = value(self.positions, t) if name == "psi_prev" else value(self.positions)
        arr = np.asarray(value)
        if arr.dtype.kind not in "fc":
            raise TypeError(f"{name} must be a float or complex array, got dtype {arr.dtype}")
        arr = self._cells(name, arr)
        if not np.all(np.isfinite(arr)):
            where = "" if self._comm is None else \
                f" in this rank's layers {self._layers[0]} .. {sum(self._layers) - 1}"
            raise ValueError(f"{name} contains non-finite values (NaN or Inf){where}")
        return np.ascontiguousarray(arr, dtype=self.dtype)

    def _local_states(self, psi: Any, psi_prev: Any) -> Tuple[np.ndarray, Optional[np.ndarray]]:
        a = self._state_array("psi", psi)
        b = None if psi_prev is None else self._state_array("psi_prev", psi_prev, -self._dt)
        return a, b
