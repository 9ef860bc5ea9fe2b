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
plus one halo layer per neighbour (:mod:`nlsepy.dec.dist`).
"""

from __future__ import annotations

import math
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from ..common import backend as _backend
from ..common import dist as _dist
from ..common import files as _files
from ..common import guard as _guard
from ..common import runner
from ..common.checks import complex_dtype as _complex_dtype
from ..common.checks import real as _real
from ..common.errors import BlowUpError
from ..common.params import Param
from ..common.stepper import TimeStepper
from . import grids as _grids
from . import plot as _plot
from . import files as _files_dec
from .files import BCS as _BCS
from .dist import SlabDec, comm_info
from .geometry import Cells
from .observe import Observables

__all__ = ["DecGPE", "DT_SAFETY"]

#: fraction of the stability bound of eq. 11 used when dt is not given
DT_SAFETY = 0.8

#: the spacings a grid may have: its cell volumes (h^3) and the Laplacian's
#: weights (1/h^2) stay finite, normal doubles
SPACING_RANGE = (1e-100, 1e100)



def _spacing(value: Any) -> float:
    """The grid spacing, checked: positive and in :data:`SPACING_RANGE`."""
    h = _real("spacing", value, positive=True)
    if not SPACING_RANGE[0] <= h <= SPACING_RANGE[1]:
        raise ValueError(f"spacing must lie between {SPACING_RANGE[0]:g} and "
                         f"{SPACING_RANGE[1]:g} (the cell volumes h^3 and the Laplacian's "
                         f"weights 1/h^2 must be finite doubles), got {value!r}")
    return h


def _checked_bound(bound: float, spacing: float, centre: Any, trap: Any) -> float:
    """The stability bound of eq. 11, refused when the trap's potential over
    the domain is beyond double range (the bound is then 0 and no time step
    could be made)."""
    if math.isfinite(bound) and bound > 0:
        return bound
    raise ValueError(f"spacing = {spacing!r} and centre = {centre!r} with trap = {trap!r} make "
                     f"the trap's potential over the domain exceed the range of doubles (the "
                     f"stability bound of eq. 11 is {bound!r}); use a smaller spacing, a centre "
                     f"nearer the trap's or a weaker trap")


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


class DecGPE(Cells, Observables, TimeStepper):
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
        one value per cell.  Assigning :attr:`V` later takes the same forms
        (or None) and is refused when :attr:`dt` would exceed the bound of
        eq. 11, unless ``force``.
    bc : {"zero", "periodic"}, optional
        ``Psi = 0`` outside the cuboid (section 5) or periodic.
    centre : (float, float, float), optional
        The domain's centre (the trap sits at the origin).
    dt : float, optional
        Time step; default ``DT_SAFETY`` times the bound of eq. 11,
        ``1 / (2 max_i M_ii)`` with ``M_ii`` the diagonal of the linear
        operator (Laplacian and potential); a larger one raises unless `force`.
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

    _MODEL = "DecGPE"
    #: the per-cell entries, stored by layers of blocks in a distributed checkpoint
    _SLABS = ("psi", "psi_prev", "V")
    _REPR = (("grid", "r"), ("blocks", ""), ("spacing", "g"), ("cells", "", "size"), ("g", "g"),
             ("bc", "r"), ("dt", "g"), ("t", "g"), ("dtype", ""), ("backend", "r"))

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
            self._max_dt = self._bound()
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
        # collective: the largest over the ranks
        self._max_dt = self._bound()
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
        self._spacing = _spacing(spacing)
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
        if not np.all(np.isfinite(self._origin)):
            raise ValueError(f"centre = {centre!r} with spacing = {spacing!r} puts the domain "
                             f"beyond the range of doubles")
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

    def _bound(self) -> float:
        return _checked_bound(self._stability_bound(), self.spacing, self.centre, self.trap)

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
        self._start_clock(self._dt)
        self._imaginary_steps = 0
        self._last_seconds = 0.0
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
    grid = Param("The crystal grid's name.")
    spacing = Param("The lattice constant h.")
    g = Param("The nonlinearity.")
    trap = Param("Trap frequencies (wx, wy, wz).")
    bc = Param("Boundary: 'zero' or 'periodic'.")
    centre = Param("The domain's centre.")
    dtype = Param("Precision of state and arithmetic.")
    backend = Param("'cpu' or 'cuda'.")
    box = Param("The cuboid's edge lengths.")
    blocks = Param("Blocks along x, y, z.")

    def _refuse(self, name: str, value: Any) -> str:
        return (f"DecGPE.{name} is fixed when the solver is made; make a new solver, e.g. "
                f"nl.DecGPE(..., {name}={value!r}, psi0=sim.psi)")

    @property
    def max_dt(self) -> float:
        """The bound of eq. 11 for this grid and potential."""
        return self._max_dt

    # ------------------------------------------------------------- geometry
    def _bound_text(self) -> str:
        return (f"the stability bound {self.max_dt:g} of eq. 11 (1 / (2 max M_ii)) for "
                f"grid={self.grid!r} at spacing {self.spacing:g}")

    # ---------------------------------------------------------------- state
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

    def _set_state(self, value: Any) -> None:
        self.set_state(value)

    @property
    def psi_prev(self) -> Optional[np.ndarray]:
        """A copy of ``psi(t - dt)``, or None when the next real-time step
        starts by RK4."""
        return self._solver.get_prev()

    def _set_potential(self, value: Any) -> None:
        """An array, a callable ``V(x, y, z)`` or None; a potential under which
        :attr:`dt` exceeds the bound of eq. 11 is refused unless ``force``."""
        new = self._agree(lambda: None if value is None else self._potential_array(value))
        old = self._V
        self._V = new  # the bound is computed from self._V
        try:
            bound = self._stability_bound()  # collective when distributed
            if self._dt > bound and not self._force:
                raise ValueError(f"with this V the stability bound of eq. 11 is {bound:g}, "
                                 f"below dt={self._dt:g}; lower dt first or make the solver "
                                 f"with force=True")
            # the C layer may still refuse it (a step under way in another
            # thread, a value that overflows complex64): then nothing changes
            self._solver.set_potential(new)
        except BaseException:
            self._V = old
            raise
        self._max_dt = bound

    # -------------------------------------------------------------- stepping
    _BOUND_WORD = "bound"
    _BLOWUP_HINT = "check g and the potential"

    def _blowup(self, dt: float, where: str = "real time") -> BlowUpError:
        return super()._blowup(dt, where)

    def _advance(self, n: int, dt: float, t_final: Optional[float] = None) -> None:
        """`n` leapfrog steps of `dt` (the protocol's short calls), with the
        seconds the kernels took (:attr:`last_step_seconds`)."""
        self._last_seconds = 0.0
        super()._advance(n, dt, t_final)

    def _book(self, done: int) -> None:
        self._last_seconds += self._solver.last_seconds()
        super()._book(done)

    def _frame_grid(self) -> runner.FrameGrid:
        """The cells of the frames (this rank's when distributed) and their units."""
        trapped = any(self.trap)
        pos = self.positions
        return runner.FrameGrid(axes=("cell",), coords=(np.arange(len(pos)),),
                                length="oscillator lengths" if trapped else "dimensionless",
                                time="units of 1/ω" if trapped else "dimensionless",
                                model=f"DecGPE ({self.grid})", positions=pos,
                                centre=tuple(self.centre))

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
                raise self._blowup(self._dt, "imaginary time")

        _guard.chunked(int(steps), work, comm=self._comm)
        return self

    def _record_header(self) -> Any:
        return _files_dec.run_header(self)

    # ----------------------------------------------------------- observables
    def norm(self) -> float:
        """``N = sum_i |B_i| |psi_i|^2``."""
        return self._solver.observe()[0]

    def energy(self) -> float:
        """``E = sum_i |B_i| [conj(psi_i) (K psi)_i + V_i |psi_i|^2 + g/2 |psi_i|^4]``,
        ``K`` the kinetic part of eq. 8 (``1/2 sum |F|/|E*| |psi_i - psi_j|^2``
        over faces)."""
        return self._solver.observe()[1]

    def apply(self, psi: Any) -> np.ndarray:
        """``H(psi) psi`` of eq. 8 (the solver's state is not touched; this
        rank's part of a distributed state, collective)."""
        return self._solver.apply(self._agree(lambda: self._state_array("psi", psi)))

    # -------------------------------------------------------------- plotting
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
        return _plot.dec(self, z=z, **kwargs)

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
            ``vortices=True`` (or a dict of :meth:`vortices`' options) marks
            the plane's vortices; the rest goes to ``imshow``.

        Returns
        -------
        matplotlib.image.AxesImage
        """
        return _plot.plot_slice(self, z, ax, shape, **kwargs)

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

    def _checkpoint(self) -> Tuple[Dict[str, np.ndarray], Dict[str, Any]]:
        """Everything the solver depends on: the parameters, the extra
        potential, the clock, ``psi(t)`` and ``psi(t - dt)`` when the leapfrog
        has it (so that a restart gives the same bits), and the circumcentres
        of a block's cells in the order of the stored states (so that
        :meth:`load` puts the cells of a checkpoint written with another
        order of them, an earlier version's, into its own).  Distributed:
        the per-cell entries by this rank's layers of blocks."""
        prev = self.psi_prev
        slabs = {"psi": self.psi, "psi_prev": np.zeros(0, self.dtype) if prev is None else prev,
                 "V": np.zeros(0) if self._V is None else self._V}
        if self._comm is not None:
            layers = self._layers[1]
            slabs = {k: v.reshape(layers, -1) if v.size else v for k, v in slabs.items()}
        return slabs, dict(
            self._clock(), imaginary_steps=self._imaginary_steps, grid=self.grid,
            blocks=np.asarray(self.blocks), spacing=self.spacing, g=self.g,
            trap=np.asarray(self.trap), bc=self.bc, centre=np.asarray(self.centre),
            dt=self._dt, force=self._force, cell_centres=np.asarray(self._block.centres))

    def _layout_of(self) -> Any:
        return self._layout

    _KEYS = _files_dec.KEYS

    @classmethod
    def _read(cls, where: str, comm: Any) -> Dict[str, Any]:
        """The checkpoint's entries, checked (``nlsepy.dec.files.check``)."""
        return _files_dec.check(where, super()._read(where, comm), cls._SLABS)

    _OVERRIDES = ("g", "trap", "bc", "centre", "dt", "force")

    @classmethod
    def _from_checkpoint(cls, where: str, d: Dict[str, Any], backend: str,
                         comm: Any, overrides: Dict[str, Any]) -> "DecGPE":
        args = dict(g=d["g"], trap=tuple(d["trap"]), bc=d["bc"], centre=tuple(d["centre"]),
                    dt=d["dt"], force=d["force"])
        args.update(overrides)
        new_dt = "dt" in overrides  # then the saved psi_prev belongs to another step
        try:
            sim = cls(d["grid"], tuple(int(b) for b in d["blocks"]), d["spacing"],
                      V=d["V"] if d["V"].size else None, dtype=d["psi"].dtype,
                      backend=backend, comm=comm, **args)
            if not new_dt:
                if d["solver_dt"] <= 0 or (d["solver_dt"] > sim.max_dt and not sim._force):
                    raise ValueError(f"solver_dt={d['solver_dt']!r} is not in "
                                     f"(0, {sim.max_dt:g}]")
                sim._use_dt(d["solver_dt"])  # before psi_prev: a new dt restarts by RK4
            prev = d["psi_prev"] if d["psi_prev"].size and not new_dt else None
            sim.set_state(d["psi"], prev)
        except (ValueError, TypeError) as exc:
            if overrides:
                raise cls._refused(where, overrides, exc) from None
            raise ValueError(f"{where}: the checkpoint's parameters are not valid: {exc}") \
                from None
        sim._restore_clock(d, overrides)
        sim._imaginary_steps = d["imaginary_steps"]
        return sim

    @classmethod
    def _slab_keys(cls) -> Dict[str, _files.Key]:
        return {k: _files.Key("array", cls._KEYS[k].dtypes, ndim=(1, 2)) for k in cls._SLABS}

    # ------------------------------------------------------------ distributed
    @property
    def local_slice(self) -> slice:
        """This rank's cells of the global state: ``global_psi[sim.local_slice]``
        is what :attr:`psi` holds (everything for one process)."""
        return self._own

    def _comm_details(self) -> Dict[str, Any]:
        return comm_info(self)

    def _gather_rows(self, local: np.ndarray) -> np.ndarray:
        return local.reshape(self._layers[1], -1)

    def _global_state(self, rows: np.ndarray) -> np.ndarray:
        return rows.reshape(-1)
