"""``nl.DecGPE``: the GPE by discrete exterior calculus on crystal grids.

Kivioja, Mönkölä and Rossi (source 001) integrate the dimensionless GPE

    i dPsi/dt = [-1/2 Lap + V + g |Psi|^2] Psi                      (eq. 2)

with the unknowns at the circumcentres of the 3-cells of a crystal's
Delaunay complex, the Laplacian ``*3 d2 *2^-1 d2^T`` of eq. 8 with the
circumcentric Hodge stars, and the central difference (leapfrog) in time,
eq. 12.  The complex of one periodic block comes from :mod:`nlsepy.dec.grids`;
the domain is ``blocks`` copies of it, with ``Psi = 0`` outside (section 5)
or periodic.

Order of the unknowns: cell ``c`` of block ``(bx, by, bz)`` is
``i = ((bz * ny + by) * nx + bx) * cells_per_block + c`` (z slowest: a z slab
of blocks is one contiguous range, the domain split of section 4.2); within
a block the cells are those of :attr:`Block.centres` (by z, y, x on cubic,
FCC and BCC; on A15, C15 and Z the cells next to other rows of blocks first,
see ``nlsepy.dec.grids._row_order``).

Under MPI (``comm=``) each rank holds a z slab of whole layers of blocks
plus one halo layer per neighbour (:mod:`nlsepy.dec.slab`).
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from .. import _backend, _dist, _guard, runner
from .._validate import Fixed
from .._validate import complex_dtype as _complex_dtype
from .._validate import real as _real
from ..errors import BlowUpError
from . import grids as _grids
from .slab import HALO_LAYERS, SlabDec

__all__ = ["DecGPE", "DT_SAFETY"]

#: fraction of the stability bound of eq. 11 used when dt is not given
DT_SAFETY = 0.8

_BCS = ("zero", "periodic")


def _blocks(value: Any) -> Tuple[int, int, int]:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = (value,) * 3
    try:
        b = tuple(value)
    except TypeError:
        raise TypeError(f"blocks must be an integer or three integers, got {value!r}") from None
    if len(b) != 3:
        raise ValueError(f"blocks must be an integer or three integers (nx, ny, nz), got {value!r}")
    for q, v in enumerate(b):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"blocks[{q}] must be an integer >= 1, got {v!r} (blocks={value!r})")
    return tuple(int(v) for v in b)  # type: ignore[return-value]


def _triple(name: str, value: Any, nonneg: bool = False) -> Tuple[float, float, float]:
    if np.ndim(value) == 0:
        value = (value,) * 3
    v = tuple(value)
    if len(v) != 3:
        raise ValueError(f"{name} must be a number or three numbers, got {value!r}")
    return tuple(_real(f"{name}[{q}]", x, nonneg=nonneg) for q, x in enumerate(v))  # type: ignore


def _agreed_backend(comm: Any, backend: str) -> str:
    """The backend every rank of `comm` resolves `backend` to (collective):
    an error, or ranks that resolve it differently (a GPU seen by some
    only), raise the same exception on every rank."""
    name = _dist.agree(comm, lambda: _backend.resolve(backend, "DecGPE"))
    names = comm.allgather(name)
    if len(set(names)) > 1:
        raise ValueError(f"DecGPE(comm=...): backend={backend!r} resolves to "
                         f"{sorted(set(names))} on different ranks (by rank: {names}); "
                         f"pass backend='cpu' or 'cuda'")
    return name


def _halo_device(backend: str) -> Any:
    """The module whose device buffers carry a distributed solver's halo
    layers between the GPU ranks of one node (``device_alloc``, ``ipc_*``:
    nlsepy's CUDA extension), or None: the halos go through host memory."""
    return _backend.module("cuda") if backend == "cuda" else None


class DecGPE:
    """The 3D GPE by discrete exterior calculus on a crystal grid.

    Solves ``i dPsi/dt = [-1/2 Lap + V + g |Psi|^2] Psi`` (source 001, eq. 2)
    with one unknown per 3-cell of the crystal complex (at its
    circumcentre), the DEC Laplacian of eq. 8 and the leapfrog of eq. 12 in
    real time; imaginary time by a normalised explicit Euler step for
    ground states.

    Parameters
    ----------
    grid : {"cubic", "fcc", "bcc", "a15", "c15", "z"}, optional
        The crystal (section 2).  Cells per block: 1, 12, 12, 46, 136, 80.
    blocks : int or (int, int, int), optional
        Blocks along x, y, z (each >= 1).
    spacing : float, optional
        The lattice constant ``h``: a block is ``h`` wide along each axis
        (``(h, sqrt(3) h, h)`` for the hexagonal Z block).
    g : float, optional
        Nonlinearity.
    trap : float or (float, float, float), optional
        Trap frequencies: ``V += 1/2 (wx^2 x^2 + wy^2 y^2 + wz^2 z^2)`` at each
        circumcentre, computed in the kernels (no potential array).
    V : callable or array_like, optional
        An extra potential: ``V(x, y, z)`` evaluated at the circumcentres, or
        one value per cell.
    bc : {"zero", "periodic"}, optional
        ``Psi = 0`` outside the cuboid (section 5) or periodic.
    centre : (float, float, float), optional
        The domain's centre (the trap sits at the origin).
    dt : float, optional
        Time step; default ``DT_SAFETY`` times the bound of eq. 11,
        ``1 / (2 max_i M_ii)`` with ``M_ii`` the diagonal of the linear
        operator (Laplacian and potential).  A larger value raises unless
        `force`.
    dtype : {numpy.complex128, numpy.complex64}, optional
        Precision of the state and arithmetic.
    psi0 : array_like or callable, optional
        Initial state: one value per cell, or ``psi0(positions)`` (e.g. a
        :class:`~nlsepy.dec.vortex.VortexState`).  Default zero.
    psi_prev : array_like or callable, optional
        ``psi(-dt)``, as the seed starts its leapfrog; without it the first
        real-time step is one classic RK4 step.  A callable is called as
        ``psi_prev(positions, -dt)``.
    force : bool, optional
        Accept a `dt` above the bound.
    backend : {"auto", "cpu", "cuda"}, optional
        Where the state lives and the kernels run.
    comm : mpi4py communicator, optional
        Distribute the grid over the ranks of `comm` (run the script under
        ``mpirun``): each rank holds a slab of whole layers of blocks along
        z (the slowest axis of the state, source 001 section 4.2), the
        first ``nz % size`` ranks one layer more.  `psi0`, `psi_prev` and
        `V` are the global arrays on every rank, this rank's part
        (:attr:`local_slice`), or callables, which are evaluated at this
        rank's cells.  :attr:`psi`, :attr:`positions` and :attr:`volumes`
        are then the rank's part, :meth:`gather` assembles the global
        state, the observables are global, and every method is collective
        (every rank calls it).  The result is the single-process one: the
        rank's part of each real-time step bit for bit, the imaginary-time
        normalisation up to the rounding of the global sum.  With
        ``backend="cuda"`` each rank takes its own GPU (the rank's index on
        its node modulo the node's GPUs; ``NLSEPY_CUDA_DEVICE`` picks one
        instead); when every rank is on one node the halo layers go device
        to device through CUDA IPC, otherwise (or with ``NLSEPY_HALO=host``)
        they are staged through host memory, with the same results
        (:attr:`comm_info` ``["halo"]`` says which).  Needs mpi4py and
        nlsepy's MPI layer (see the README).

    Examples
    --------
    >>> import numpy as np, nlsepy as nl
    >>> sim = nl.DecGPE("bcc", blocks=8, spacing=1.0, trap=1.0)
    >>> r2 = (sim.positions ** 2).sum(axis=1)
    >>> sim.psi = np.exp(-r2 / 2)
    >>> _ = sim.imaginary_time(200)
    >>> round(sim.norm(), 6)
    1.0
    """

    def __init__(self, grid: str = "bcc", blocks: Union[int, Sequence[int]] = (16, 16, 16),
                 spacing: float = 1.0, g: float = 0.0,
                 trap: Union[None, float, Sequence[float]] = None, V: Any = None,
                 bc: str = "zero", centre: Sequence[float] = (0.0, 0.0, 0.0),
                 dt: Optional[float] = None, dtype: Any = np.complex128, psi0: Any = None,
                 psi_prev: Any = None, force: bool = False, backend: str = "auto",
                 comm: Any = None) -> None:
        self._comm = None if comm is None else _dist.as_comm(comm)
        if psi0 is None and psi_prev is not None:
            raise ValueError("psi_prev needs psi0")
        if self._comm is None:
            self._params(grid, blocks, spacing, g, trap, V, bc, centre, dtype, force, backend)
            self._max_dt = self._stability_bound()
            self._make_solver(dt)
            if psi0 is not None:
                self.set_state(psi0, psi_prev)
            return
        # one GPU per rank of a node, current before the memory check and the handle
        if _agreed_backend(self._comm, backend) == "cuda":
            self._device = _dist.select_gpu(self._comm)
        # every rank checks its part; one rank's bad input is every rank's error
        _dist.agree(self._comm, lambda: self._params(grid, blocks, spacing, g, trap, V, bc,
                                                     centre, dtype, force, backend))
        self._max_dt = self._stability_bound()  # collective: the largest over the ranks
        states = _dist.agree(self._comm, lambda: self._make_solver(dt, psi0, psi_prev))
        self._solver.connect()  # collective: the reduction table
        self._solver.set_potential(self._V)
        self._solver.set_state(*states)  # collective: the halos

    def _params(self, grid: Any, blocks: Any, spacing: Any, g: Any, trap: Any, V: Any, bc: Any,
                centre: Any, dtype: Any, force: Any, backend: Any) -> None:
        """The parameters, the block's complex, this rank's layers and its
        potential (no collective calls)."""
        self._grid = _grids._grid_name(grid)
        self._blocks = _blocks(blocks)
        self._spacing = _real("spacing", spacing, positive=True)
        self._g = _real("g", g)
        self._trap = (0.0, 0.0, 0.0) if trap is None else _triple("trap", trap)
        if not isinstance(bc, str) or bc.lower() not in _BCS:
            raise ValueError(f"bc must be one of {_BCS}, got {bc!r}")
        self._bc = bc.lower()
        self._dtype = _complex_dtype(dtype)
        self._force = bool(force)
        self._centre = _triple("centre", centre)
        self._backend = _backend.resolve(backend, "DecGPE")
        self._layout: Optional[_dist.Layout] = None
        self._layers = (0, self._blocks[2])  # the own layers of blocks along z
        self._plane = _grids.CELLS_PER_BLOCK[self._grid] * self._blocks[0] * self._blocks[1]
        if self._comm is not None:
            lay = self._layout = _dist.Layout.of(self._comm, (self._blocks[2], self._plane))
            if lay.size > self._blocks[2]:
                raise ValueError(f"{lay.size} ranks cannot split the {self._blocks[2]} layers "
                                 f"of blocks along z (blocks={self._blocks}): each rank needs "
                                 f"at least one; use at most {self._blocks[2]} ranks")
            self._layers = (lay.start, lay.count)
        self._own = slice(self._layers[0] * self._plane, sum(self._layers) * self._plane)
        self._check_memory()
        self._block = _grids.block(self.grid)
        blk = self._block
        h = self.spacing
        self._edge = np.asarray(blk.edge, float) * h
        self._box = tuple(float(x) for x in self._edge * np.asarray(self.blocks))
        self._origin = np.asarray(self.centre) - 0.5 * np.asarray(self.box)
        C = blk.cells
        self._n = C * int(np.prod(self.blocks))
        # the block table with the spacing applied: w = |F| / (2 |E*| |B|)
        self._weights = 0.5 * blk.weights() / h ** 2
        self._diag = np.bincount(blk.nbr_row, weights=self._weights, minlength=C)
        self._row_start = np.concatenate(
            [[0], np.cumsum(np.bincount(blk.nbr_row, minlength=C))]).astype(np.int32)
        self._V: Optional[np.ndarray] = None
        self._tree: Any = None  # cKDTree of the circumcentres (density_at)
        self._volumes: Optional[np.ndarray] = None
        if V is not None:
            self._V = self._potential_array(V)

    def _handle(self, layers: int) -> Any:
        """The C handle of the grid with `layers` layers of blocks along z."""
        blk, h = self._block, self.spacing
        core = _backend.module("cpu")
        return _backend.module(self.backend).Dec(
            self.blocks[:2] + (layers,), tuple(self._edge), tuple(self._origin), self.trap,
            1 if self.bc == "periodic" else 0, self.g, self._dt,
            core.COMPLEX64 if self.dtype == np.complex64 else core.COMPLEX128,
            self._row_start, blk.nbr_cell.astype(np.int32),
            np.ascontiguousarray(blk.nbr_offset, dtype=np.int32), self._weights,
            blk.volumes * h ** 3, np.ascontiguousarray(blk.centres * h))

    def _make_solver(self, dt: Any, psi0: Any = None, psi_prev: Any = None) -> Any:
        """The time step and the solver; for a distributed solver (no
        collective calls) also this rank's initial state, returned."""
        self._dt = self._check_dt(DT_SAFETY * self.max_dt if dt is None else dt, self._force)
        self._t_base = 0.0
        self._k = 0
        self._steps = 0
        self._imaginary_steps = 0
        self._last_seconds = 0.0
        self._solver_dt = self._dt
        if self._comm is None:
            self._solver = self._handle(self.blocks[2])
            if self._V is not None:
                self._solver.set_potential(self._V)
            return None
        assert self._layout is not None
        self._solver = SlabDec(self._handle, self._layout, self.bc == "periodic", self._dt,
                               device=_halo_device(self._backend))
        if psi0 is None:
            return np.zeros(self._own.stop - self._own.start, self.dtype), None
        return self._local_states(psi0, psi_prev)

    # ------------------------------------------------------- the parameters
    # Fixed at construction (the C solver is built from them): read-only; a
    # different grid, g, trap, ... is a new solver.
    def _fixed(doc: str) -> Fixed:  # type: ignore[misc]
        def refuse(name: str, value: Any) -> str:
            return (f"DecGPE.{name} is fixed when the solver is made; make a new solver, e.g. "
                    f"nl.DecGPE(..., {name}={value!r}, psi0=sim.psi)")
        return Fixed(doc, refuse)

    grid = _fixed("The crystal grid's name.")
    spacing = _fixed("The lattice constant h.")
    g = _fixed("The nonlinearity.")
    trap = _fixed("Trap frequencies (wx, wy, wz).")
    bc = _fixed("Boundary: 'zero' or 'periodic'.")
    centre = _fixed("The domain's centre.")
    dtype = _fixed("Precision of state and arithmetic.")
    backend = _fixed("'cpu' or 'cuda'.")
    box = _fixed("The cuboid's edge lengths.")
    blocks = _fixed("Blocks along x, y, z.")
    del _fixed

    @property
    def max_dt(self) -> float:
        """The bound of eq. 11 for this grid and potential."""
        return self._max_dt

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

    # ------------------------------------------------------------- geometry
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
        for q in range(3):
            ends = self._origin[q] + np.array([0, self.blocks[q] - 1]) * self._edge[q]
            x = ends[:, None] + cen[None, :, q]
            out += 0.5 * self.trap[q] ** 2 * np.max(x ** 2, axis=0)
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

    def _check_dt(self, dt: Any, force: bool) -> float:
        dt = _real("dt", dt, positive=True)
        if dt > self.max_dt and not force:
            raise ValueError(f"dt={dt:g} exceeds the stability bound {self.max_dt:g} of eq. 11 "
                             f"(1 / (2 max M_ii)) for grid={self.grid!r} at spacing "
                             f"{self.spacing:g}; use a smaller dt or pass force=True")
        return dt

    # ---------------------------------------------------------------- state
    def _agree(self, fn: Callable[[], Any]) -> Any:
        """``fn()``; when distributed, on every rank with one rank's error
        raised on all (collective)."""
        return fn() if self._comm is None else _dist.agree(self._comm, fn)

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

    def set_state(self, psi: Any, psi_prev: Any = None) -> None:
        """Set ``psi(t)`` and optionally ``psi(t - dt)`` (else the next real-time
        step is one RK4 step).

        Parameters
        ----------
        psi : array_like or callable
            One value per cell, or ``psi(positions)``.  When distributed
            (collective): the global array, this rank's part, or a callable
            evaluated at this rank's cells.
        psi_prev : array_like or callable, optional
            One value per cell, or ``psi_prev(positions, -dt)``.
        """
        a, b = self._agree(lambda: self._local_states(psi, psi_prev))
        self._solver.set_state(a, b)

    @property
    def psi(self) -> np.ndarray:
        """A copy of the current state (1-d, one value per cell; this rank's
        cells, :attr:`local_slice`, when distributed)."""
        return self._solver.get_state()

    @psi.setter
    def psi(self, value: Any) -> None:
        self.set_state(value)

    @property
    def psi_prev(self) -> Optional[np.ndarray]:
        """A copy of ``psi(t - dt)``, or None when the next real-time step
        starts by RK4."""
        return self._solver.get_prev()

    @property
    def V(self) -> Optional[np.ndarray]:
        """The extra potential array (None when only the trap acts).

        Assigning (an array, a callable ``V(x, y, z)`` or None) checks it,
        recomputes the bound of eq. 11 and applies it from the next step; a
        potential under which :attr:`dt` exceeds the bound is refused unless
        the solver was made with ``force=True``."""
        return None if self._V is None else self._V.copy()

    @V.setter
    def V(self, value: Any) -> None:
        new = self._agree(lambda: None if value is None else self._potential_array(value))
        old = self._V
        self._V = new
        bound = self._stability_bound()  # collective when distributed
        if self._dt > bound and not self._force:
            self._V = old
            raise ValueError(f"with this V the stability bound of eq. 11 is {bound:g}, below "
                             f"dt={self._dt:g}; lower dt first or make the solver with "
                             f"force=True")
        self._solver.set_potential(new)
        self._max_dt = bound

    @property
    def t(self) -> float:
        """Current time."""
        return self._t_base + self._k * self._solver_dt

    @property
    def dt(self) -> float:
        """Time step."""
        return self._dt

    @dt.setter
    def dt(self, value: float) -> None:
        self._dt = self._agree(lambda: self._check_dt(value, self._force))

    # -------------------------------------------------------------- stepping
    def _use_dt(self, dt: float) -> None:
        if dt != self._solver_dt:
            self._t_base = self.t
            self._k = 0
            self._solver.set_dt(dt)
            self._solver_dt = dt

    def _blowup(self, kind: str, dt: float) -> BlowUpError:
        t_bad = self.t + dt
        return BlowUpError(
            f"the state became non-finite in {kind} at step {self._steps + 1} (t = {t_bad:g}); "
            f"the solver keeps the last finite state at t = {self.t:g}. Reduce dt (now {dt:g}, "
            f"bound {self.max_dt:g}) or check g and the potential.",
            step=self._steps + 1, t=t_bad, last_good=(self.t, self.psi))

    def _advance(self, n: int, dt: float, t_final: Optional[float] = None) -> None:
        """`n` leapfrog steps of `dt` in calls of about 0.1 s, each booked on
        the time and counters before the next (Ctrl-C acts between calls);
        `t_final` snaps the time when all `n` were taken."""
        self._use_dt(dt)
        self._last_seconds = 0.0

        def work(k: int) -> None:
            done, blew_up = self._solver.step(int(k))
            self._last_seconds += self._solver.last_seconds()
            self._k += done
            self._steps += done
            if blew_up:
                raise self._blowup("real time", dt)

        _guard.chunked(int(n), work, comm=self._comm)
        if t_final is not None:
            self._t_base, self._k = float(t_final), 0

    def _plan(self, t_end: float) -> Tuple[int, float]:
        return runner.plan_steps(self.t, t_end, self._dt)

    def _snapshot(self) -> np.ndarray:
        return self.psi

    def _frame_grid(self) -> runner.FrameGrid:
        """The cells of the frames (this rank's when distributed) and their units."""
        trapped = any(self.trap)
        pos = self.positions
        return runner.FrameGrid(axes=("cell",), coords=(np.arange(len(pos)),),
                                length="oscillator lengths" if trapped else "dimensionless",
                                time="units of 1/ω" if trapped else "dimensionless",
                                model=f"DecGPE ({self.grid})", positions=pos,
                                centre=tuple(self.centre))

    def step(self, n: int = 1) -> "DecGPE":
        """Advance `n` leapfrog steps of :attr:`dt` (eq. 12).

        Parameters
        ----------
        n : int, optional
            Steps (>= 0).  Without ``psi(-dt)`` the first is one RK4 step.

        Returns
        -------
        DecGPE
            ``self``.

        Raises
        ------
        BlowUpError
            When the state becomes non-finite; the last finite state is kept.
        """
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"n must be an integer >= 0, got {n!r}")
        if self._comm is not None:
            self._solver.timings.update(step=0.0, exchange=0.0, steps=0)
        self._advance(int(n), self._dt)
        return self

    @property
    def last_timings(self) -> Dict[str, float]:
        """A distributed solver's seconds on this rank over the leapfrog
        steps of the last :meth:`step` call (the steps of :meth:`run` add
        up): ``step`` (the slab's kernels and the agreed blow-up check, so
        the wait for the slowest rank too), ``exchange`` (the halo layers)
        and ``steps``.  Empty for one process."""
        return {} if self._comm is None else dict(self._solver.timings)

    def imaginary_time(self, steps: int, norm: Optional[float] = None) -> "DecGPE":
        """Relax towards the ground state by normalised imaginary-time steps.

        Each step is ``psi <- psi - dt H(psi) psi`` (explicit Euler in
        imaginary time with the real-time operator) followed by
        ``psi <- psi sqrt(norm / N(psi))``.  Its fixed point is the lowest
        eigenvector of the discrete H (for g = 0 exactly the discrete ground
        state, whatever dt below the bound); the time does not advance.

        Parameters
        ----------
        steps : int
            Number of steps (>= 0).
        norm : float, optional
            The norm to keep (default: 1).

        Returns
        -------
        DecGPE
            ``self``.
        """
        if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
            raise ValueError(f"steps must be an integer >= 0, got {steps!r}")
        norm = 1.0 if norm is None else _real("norm", norm, positive=True)
        self._use_dt(self._dt)
        if self.norm() == 0.0:
            raise ValueError("imaginary_time needs a nonzero state: set psi first")

        self._last_seconds = 0.0

        def work(k: int) -> None:
            done, blew_up = self._solver.imaginary(int(k), norm)
            self._last_seconds += self._solver.last_seconds()
            self._imaginary_steps += done
            if blew_up:
                raise self._blowup("imaginary time", self._dt)

        _guard.chunked(int(steps), work, comm=self._comm)
        return self

    def run(self, t_end: float, frames: int = 10, callback: Optional[Callable] = None,
            progress: bool = False, checkpoint: Optional[Union[str, os.PathLike]] = None,
            output: Optional[Union[str, os.PathLike]] = None) -> runner.Frames:
        """Advance to `t_end` in `frames` chunks, returning snapshots.

        Parameters
        ----------
        t_end : float
            Final time (> current time).
        frames : int, optional
            Chunks; ``frames + 1`` snapshots are returned.
        callback : callable, optional
            ``callback(sim)`` after each chunk; raise ``StopIteration`` to stop.
        progress : bool, optional
            Show a progress bar (needs tqdm).
        checkpoint : path-like, optional
            Write :meth:`save` to this path after each chunk.
        output : path-like, optional
            Stream the frames into this HDF5 file (``.h5``/``.hdf5``, needs
            h5py: ``pip install 'nlsepy[hdf5]'``) as they are taken: ``psi``
            over ``(t, cell)`` with the circumcentres ``x``, ``y``, ``z``
            and the cell volumes as coordinates along ``cell``, the series
            ``norm``, ``energy`` and ``steps``, every parameter; flushed
            after each frame, readable after Ctrl-C, read back by
            :func:`nlsepy.open_run`.  Distributed: rank 0 gathers each
            frame (:meth:`gather`) and writes the file with h5py (without
            MPI).

        Returns
        -------
        Frames
            ``(t, psi)`` snapshots.
        """
        return runner.run(self, t_end, frames=frames, callback=callback, progress=progress,
                          checkpoint=checkpoint, output=output)

    def _record_header(self) -> Any:
        """What a run file holds besides the frames (distributed: every rank,
        with its cells of V as a slab, nothing gathered)."""
        from .._hdf5 import RunHeader
        V = self._V
        slabs = {} if self._comm is None or V is None else {"V": V}
        params = {"grid": self.grid, "blocks": self.blocks, "spacing": self.spacing,
                  "g": self.g, "trap": self.trap, "bc": self.bc, "centre": self.centre,
                  "dt": self._dt, "max_dt": self.max_dt, "force": self._force,
                  "dtype": np.dtype(self.dtype).name, "box": self.box,
                  "cells_per_block": self.cells_per_block, "size": self._n}
        if not slabs:
            params["V"] = V
        pos = self._positions_of(0, self.blocks[2])
        vol = np.tile(self._block.volumes * self.spacing ** 3, int(np.prod(self.blocks)))
        length = "l = sqrt(hbar / (m omega))"
        coords = {"cell": (("cell",), np.arange(self._n), "",
                           "cell index ((bz * ny + by) * nx + bx) * cells_per_block + c"),
                  "x": (("cell",), pos[:, 0], length, "circumcentre x"),
                  "y": (("cell",), pos[:, 1], length, "circumcentre y"),
                  "z": (("cell",), pos[:, 2], length, "circumcentre z"),
                  "volume": (("cell",), vol, "l^3", "cell volume |B_i|")}
        return RunHeader(
            model="DecGPE", parameters=params, backend=self.backend, slabs=slabs,
            units=(f"trap units of i dPsi/dt = [-1/2 Lap + V + g |Psi|^2] Psi: lengths in "
                   f"{length}, time in 1 / omega, energies in hbar omega"),
            coords=coords, dims={"psi": ("cell",), "norm": (), "energy": (), "steps": ()},
            var_units={"t": "1 / omega", "psi": "l^(-3/2)", "norm": "",
                       "energy": "hbar omega", "steps": ""},
            long_names={"t": "time", "psi": "the state at the circumcentres",
                        "norm": "N = sum_i |B_i| |psi_i|^2",
                        "energy": "E = sum_i |B_i| [conj(psi_i) (K psi)_i + V_i |psi_i|^2 "
                                  "+ g/2 |psi_i|^4]",
                        "steps": "real-time steps since the solver was made"})

    def _record_scalars(self) -> Dict[str, Any]:
        """The series a run file keeps per frame (collective when distributed)."""
        norm, energy = self._solver.observe()
        return {"norm": float(norm), "energy": float(energy), "steps": int(self._steps)}

    # ----------------------------------------------------------- observables
    def norm(self) -> float:
        """``N = sum_i |B_i| |psi_i|^2``."""
        return self._solver.observe()[0]

    def energy(self) -> float:
        """``E = sum_i |B_i| [conj(psi_i) (K psi)_i + V_i |psi_i|^2 + g/2 |psi_i|^4]``,
        ``K`` the kinetic part of eq. 8 (``1/2 sum |F|/|E*| |psi_i - psi_j|^2``
        over faces)."""
        return self._solver.observe()[1]

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

    def apply(self, psi: Any) -> np.ndarray:
        """``H(psi) psi`` of eq. 8 (the solver's state is not touched; this
        rank's part of a distributed state, collective)."""
        return self._solver.apply(self._agree(lambda: self._state_array("psi", psi)))

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

    # -------------------------------------------------------------- plotting
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
        out = self.density_at(mesh, neighbours)
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
        def check() -> np.ndarray:
            pts = np.asarray(points, dtype=float)
            if pts.shape[-1:] != (3,):
                raise ValueError(f"points must have shape (..., 3), got {pts.shape}")
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
        dens = np.abs(self.gather(root=None)) ** 2
        w = 1.0 / np.maximum(d, 1e-12 * self.spacing) ** 2
        return ((w * dens[idx]).sum(axis=1) / w.sum(axis=1)).reshape(pts.shape[:-1])

    def plot(self, z: Optional[float] = None, **kwargs: Any) -> Any:
        """Draw density and phase on the slice of cells nearest `z` (default
        the domain's centre), scatter plots over (x, y); needs matplotlib
        (``pip install 'nlsepy[plot]'``).

        Parameters
        ----------
        z : float, optional
            Height of the slice.
        **kwargs
            ``width`` (a slab of cells), ``fig``, ``ax`` (the density only),
            ``path`` (save), ``dpi``, ``title``: see :func:`nlsepy.plot.dec`.

        Returns
        -------
        matplotlib.figure.Figure
        """
        from .. import plot
        return plot.dec(self, z=z, **kwargs)

    def plot_slice(self, z: float = 0.0, ax: Any = None, shape: Tuple[int, int] = (200, 200),
                   **kwargs: Any) -> Any:
        """Plot ``|psi|^2`` on the plane ``z`` (needs matplotlib and scipy).

        Parameters
        ----------
        z : float, optional
            Height of the cross-section.
        ax : matplotlib Axes, optional
            Where to draw (default: a new figure).
        shape : (int, int), optional
            Interpolation grid.
        **kwargs
            Passed to ``imshow``.

        Returns
        -------
        matplotlib.image.AxesImage
        """
        try:
            import matplotlib.pyplot as plt
        except ImportError as exc:  # pragma: no cover
            raise ImportError("plot_slice needs matplotlib: pip install matplotlib") from exc
        z = _real("z", z)
        lo = self._origin
        hi = self._origin + np.asarray(self.box)
        dens, (x, y) = self.density_on_grid(shape, bounds=[(lo[0], hi[0]), (lo[1], hi[1]),
                                                           (z, z)])
        if ax is None:
            _, ax = plt.subplots()
        kwargs.setdefault("cmap", "viridis")
        im = ax.imshow(dens.T, origin="lower", extent=(x[0], x[-1], y[0], y[-1]), **kwargs)
        ax.set_xlabel("x")
        ax.set_ylabel("y")
        ax.set_title(f"|psi|^2 at z = {z:g}, t = {self.t:g} ({self.grid})")
        return im

    # ----------------------------------------------------------- checkpoints
    @property
    def steps(self) -> int:
        """Real-time steps taken since the solver was made (or the checkpoint's
        solver was)."""
        return self._steps

    @property
    def imaginary_steps(self) -> int:
        """Imaginary-time steps taken since the solver was made."""
        return self._imaginary_steps

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Write a checkpoint (``.npz``), whole or not at all.

        Everything the solver depends on is stored: the parameters, the
        extra potential, the time and the counters, ``psi(t)`` and
        ``psi(t - dt)`` when the leapfrog has it, so that :meth:`load` and
        stepping on gives the same bits as stepping on without the restart;
        and the circumcentres of a block's cells in the order of the stored
        states, so that :meth:`load` puts the cells of a checkpoint written
        with another order of them (an earlier version's) into its own.

        A distributed solver (collective) writes one part per rank beside
        `path` (``<stem>.partRRRRofNNNN.npz``, its layers of blocks) and the
        index `path`, which :meth:`load` reads with any number of ranks or
        one process.

        Parameters
        ----------
        path : path-like
            Destination file.
        """
        prev = self.psi_prev
        none = np.zeros(0, self.dtype)
        scalars = dict(
            t=self.t, t_base=self._t_base, k=self._k, solver_dt=self._solver_dt,
            steps=self._steps, imaginary_steps=self._imaginary_steps, grid=self.grid,
            blocks=np.asarray(self.blocks), spacing=self.spacing, g=self.g,
            trap=np.asarray(self.trap), bc=self.bc, centre=np.asarray(self.centre),
            dt=self._dt, force=self._force, cell_centres=np.asarray(self._block.centres))
        if self._comm is not None:
            assert self._layout is not None
            layers = self._layers[1]
            slabs = {"psi": self.psi.reshape(layers, -1),
                     "psi_prev": none if prev is None else prev.reshape(layers, -1),
                     "V": np.zeros(0) if self._V is None else self._V.reshape(layers, -1)}
            _dist.save_parts(os.fspath(path), "DecGPE", self._layout, slabs, **scalars)
            return
        _guard.save_checkpoint(
            path, "DecGPE", psi=self.psi, psi_prev=prev if prev is not None else none,
            V=self._V if self._V is not None else np.zeros(0), **scalars)

    _KEYS = {
        "psi": _guard.Key("array", "c", ndim=(1,)),
        "psi_prev": _guard.Key("array", "c", ndim=(1,)),
        "t": _guard.Key("float"), "t_base": _guard.Key("float"), "k": _guard.Key("int"),
        "solver_dt": _guard.Key("float"), "steps": _guard.Key("int"),
        "imaginary_steps": _guard.Key("int"),
        "grid": _guard.Key("str", choices=tuple(_grids.GRIDS)),
        "blocks": _guard.Key("array", "iu", ndim=(1,)), "spacing": _guard.Key("float"),
        "g": _guard.Key("float"), "trap": _guard.Key("array", "fiu", ndim=(1,)),
        "bc": _guard.Key("str", choices=_BCS), "centre": _guard.Key("array", "fiu", ndim=(1,)),
        "dt": _guard.Key("float"), "force": _guard.Key("bool"),
        "V": _guard.Key("array", "fiu", ndim=(1,)),
        # the circumcentres of a block's cells in the order of the stored
        # states (missing in checkpoints of earlier versions)
        "cell_centres": _guard.Key("array", "f", ndim=(2,), optional=True),
    }

    #: the per-cell entries, stored by layers of blocks in a distributed checkpoint
    _SLABS = ("psi", "psi_prev", "V")

    @classmethod
    def load(cls, path: Union[str, os.PathLike], backend: str = "auto",
             comm: Any = None) -> "DecGPE":
        """Restart from a checkpoint written by :meth:`save`.

        Parameters
        ----------
        path : path-like
            Checkpoint file.
        backend : {"auto", "cpu", "cuda"}, optional
            Backend of the new solver.
        comm : mpi4py communicator, optional
            Load into a solver distributed over `comm` (every rank calls
            this).  Any checkpoint loads with any number of ranks: one
            written by one process, or the index of one written by N ranks
            (its parts lie beside it), with M ranks or by one process.

        Raises
        ------
        ValueError
            The file is not a whole DecGPE checkpoint (the message names the
            file and what is wrong).
        """
        where = os.fspath(path)
        if comm is not None:
            comm = _dist.as_comm(comm)
            d = _dist.agree(comm, lambda: cls._read(where, comm))
        else:
            d = cls._read(where, None)
        try:
            sim = cls(d["grid"], tuple(int(b) for b in d["blocks"]), d["spacing"], g=d["g"],
                      trap=tuple(d["trap"]), V=d["V"] if d["V"].size else None, bc=d["bc"],
                      centre=tuple(d["centre"]), dt=d["dt"], dtype=d["psi"].dtype,
                      force=d["force"], backend=backend, comm=comm)
            if d["solver_dt"] <= 0 or (d["solver_dt"] > sim.max_dt and not d["force"]):
                raise ValueError(f"solver_dt={d['solver_dt']!r} is not in (0, {sim.max_dt:g}]")
            sim._use_dt(d["solver_dt"])  # before psi_prev: a new dt restarts by RK4
            sim.set_state(d["psi"], d["psi_prev"] if d["psi_prev"].size else None)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{where}: the checkpoint's parameters are not valid: {exc}") \
                from None
        sim._t_base, sim._k = d["t_base"], d["k"]
        sim._steps, sim._imaginary_steps = d["steps"], d["imaginary_steps"]
        return sim

    @classmethod
    def _read(cls, where: str, comm: Any) -> Dict[str, Any]:
        """The checkpoint's entries, checked; with `comm`, the per-cell
        entries of this rank's layers only when the checkpoint is in parts
        (no collective calls)."""
        if _dist.is_parts_index(where):
            scalars = {k: v for k, v in cls._KEYS.items() if k not in cls._SLABS}
            slabs = {k: _guard.Key("array", cls._KEYS[k].dtypes, ndim=(1, 2))
                     for k in cls._SLABS}
            rows = None
            if comm is not None:
                d0 = _dist.load_parts(where, "DecGPE", scalars, {}, rows=(0, 0))
                lay = _dist.Layout.of(comm, d0["global_shape"])
                rows = (lay.start, lay.count)
            d = _dist.load_parts(where, "DecGPE", scalars, slabs, rows=rows)
            for k in cls._SLABS:
                d[k] = d[k].reshape(-1)
            layers = int(d["global_shape"][0])
        else:
            d = _guard.load_checkpoint(where, "DecGPE", cls._KEYS)
            layers = None
        if d["psi_prev"].size not in (0, d["psi"].size) or d["psi_prev"].size and \
                d["psi_prev"].dtype != d["psi"].dtype:
            raise ValueError(f"{where}: entry 'psi_prev' does not match 'psi'")
        if d["V"].size not in (0, d["psi"].size):
            raise ValueError(f"{where}: entry 'V' does not match 'psi'")
        for name in ("blocks", "trap", "centre"):
            if d[name].shape != (3,):
                raise ValueError(f"{where}: entry {name!r} must have 3 values, got "
                                 f"{d[name].shape}")
        if layers is not None:
            plane = _grids.CELLS_PER_BLOCK.get(d["grid"], 0) * int(np.prod(d["blocks"][:2]))
            if tuple(d["global_shape"]) != (int(d["blocks"][2]), plane):
                raise ValueError(f"{where}: the parts hold {tuple(d['global_shape'])} layers "
                                 f"x cells, the grid {d['grid']!r} of blocks "
                                 f"{tuple(d['blocks'])} has ({d['blocks'][2]}, {plane})")
        if d["steps"] < 0 or d["k"] < 0 or d["imaginary_steps"] < 0:
            raise ValueError(f"{where}: negative step counters")
        perm = None
        if "cell_centres" in d:
            perm = _cell_order(where, d["grid"], d["cell_centres"])
        elif d["grid"] in _REORDERED:
            warnings.warn(f"{where}: a checkpoint of an earlier version, without the block's "
                          f"circumcentres: its {d['grid']!r} cells are taken in that version's "
                          "order (by z, y, x of the circumcentres, where the machine's rounding "
                          "could order cells of one height); check the state, or write the "
                          "checkpoint anew", RuntimeWarning, stacklevel=3)
            perm = _cell_order(where, d["grid"], _zyx_centres(d["grid"]))
        if perm is not None:  # the same cells, stored in another order
            for name in cls._SLABS:
                if d[name].size:
                    d[name] = np.ascontiguousarray(
                        d[name].reshape(-1, len(perm))[:, perm]).reshape(-1)
        return d

    # ------------------------------------------------------------ distributed
    @property
    def comm(self) -> Any:
        """The communicator of a distributed solver (None for one process)."""
        return self._comm

    @property
    def local_slice(self) -> slice:
        """This rank's cells of the global state: ``global_psi[sim.local_slice]``
        is what :attr:`psi` holds (everything for one process)."""
        return self._own

    @property
    def comm_info(self) -> Dict[str, Any]:
        """How a distributed solver is laid out and communicates (empty for
        one process)."""
        if self._comm is None:
            return {}
        lay, sol = self._layout, self._solver
        assert lay is not None
        info = _dist.info(self._comm)
        return {"ranks": lay.size, "rank": lay.rank, "axis": "z (layers of blocks)",
                "layers": (lay.start, lay.count), "counts": lay.counts.tolist(),
                "cells": (self._own.start, self._n_own), "halo_layers": HALO_LAYERS,
                "halo": sol.halo,
                "exchange": ("device to device through CUDA IPC (one node), one layer of "
                             "blocks per side, once per step" if sol.ipc else
                             "MPI_Sendrecv of one layer of blocks per side, once per step" +
                             (" (device layers staged through the host)"
                              if self.backend == "cuda" else "")) +
                            (f"; no CUDA IPC: {sol.ipc_why}" if sol.ipc_why else ""),
                "reduction": "rank-ordered sum (MPI_Allgather)", "mpi": info["library"],
                "cuda_aware_mpi": info["cuda_aware"],
                "device": self._device if self.backend == "cuda" else None}

    def gather(self, root: Optional[int] = 0) -> Optional[np.ndarray]:
        """The global state from every rank's part (collective).

        Parameters
        ----------
        root : int or None, optional
            The rank that receives it (the others get None), or None for
            every rank.

        Returns
        -------
        numpy.ndarray or None
        """
        if self._comm is None:
            return self.psi
        _dist.check_root(self._comm, root)
        assert self._layout is not None
        out = _dist.gather_rows(self._layout, self.psi.reshape(self._layers[1], -1), root)
        return None if out is None else out.reshape(-1)

    def __repr__(self) -> str:
        return (f"DecGPE(grid={self.grid!r}, blocks={self.blocks}, spacing={self.spacing:g}, "
                f"cells={self._n}, g={self.g:g}, bc={self.bc!r}, dt={self._dt:g}, "
                f"t={self.t:g}, dtype={self.dtype.name}, backend={self.backend!r})")


#: grids whose cells this version orders otherwise than earlier versions
#: without the circumcentres in their checkpoints did (by z, y, x)
_REORDERED = ("a15", "c15", "z")


def _zyx_centres(grid: str) -> np.ndarray:
    """The circumcentres of a `grid` block in the order of earlier versions:
    by z, y, x (rounded to 1e-7)."""
    cen = np.asarray(_grids.block(grid).centres)
    return cen[_grids._zyx_order(cen)]


def _cell_order(where: str, grid: str, stored: np.ndarray) -> Optional[np.ndarray]:
    """Where a checkpoint's block of `grid` lists its cells (circumcentres
    `stored`) in another order than :func:`nlsepy.dec.grids.block`: the
    stored index of each of this version's cells; None when the orders agree.

    Raises
    ------
    ValueError
        `stored` are not the cells of a `grid` block.
    """
    now = np.asarray(_grids.block(grid).centres)
    if stored.shape != now.shape:
        raise ValueError(f"{where}: entry 'cell_centres' has shape {stored.shape}, a {grid!r} "
                         f"block has {now.shape}")
    gap = np.abs(now[:, None, :] - stored[None, :, :]).max(axis=2)
    perm = np.argmin(gap, axis=1)
    if not (np.all(gap[np.arange(len(now)), perm] < 1e-6)
            and len(np.unique(perm)) == len(perm)):
        raise ValueError(f"{where}: entry 'cell_centres' does not list the cells of a {grid!r} "
                         "block")
    return None if np.array_equal(perm, np.arange(len(perm))) else perm
