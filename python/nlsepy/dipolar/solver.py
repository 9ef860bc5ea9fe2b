"""The dipolar Gross-Pitaevskii equation by split-step Crank-Nicolson (``nl.DipolarGPE``).

Solves, in 3D or in the effective 2D and 1D forms (Loncar, thesis, section
2.2; the DBEC-GP programs),

    i dPsi/dt = [-k Lap + V(r, t) + g |Psi|^2 + gdd (V_dd * |Psi|^2)] Psi,

with ``k = 1`` and ``V = gamma^2 x^2 + nu^2 y^2 + lambda^2 z^2`` in the
rescaling of eq. 2.9 (``option=2``, DBEC-GP OPTION 2) or ``k = 1/2`` and
``V = (gamma^2 x^2 + ...)/2`` in the standard one (``option=1``).  Dipoles
point along z.  Each step applies the non-derivative part exactly and one
Crank-Nicolson solve per axis (section 2.3); imaginary time renormalises
every step.  The state stays in C between calls.

The model is a :class:`~nlsepy.common.stepper.TimeStepper` (clock, time
step, ``run``, checkpoints, ``comm`` and ``gather`` shared with the other
models) with its own stepping in blocks of whole steps
(:mod:`nlsepy.dipolar.blocks`); its C handle is the single-process solver
or, with ``comm=``, this rank's slab of the distributed one
(:class:`nlsepy.dipolar.dist.SlabDipolar`).  Beside it: the parameters'
checks and the beam (:mod:`.parameters`), the memory count
(:mod:`.memory`), the checkpoints' entries (:mod:`.checkpoint`) and the
observables and run files (:mod:`.observe`).

Safety (the shared layer :mod:`nlsepy.common.guard`): long stepping calls run as
blocks of whole steps, each one C call booked on the object (time, step
counters) before the next, with Ctrl-C held as a flag and raised between
blocks; the solver owns copies of its inputs and its parameters are either
read-only or applied on assignment; checkpoints are tagged and checked;
the memory a solver takes is counted before it is allocated.
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from ..common import backend as _backend
from ..common import dist as _dist
from ..common import runner
from ..common.checks import real as _real
from ..common.params import Param
from ..common.stepper import TimeStepper
from . import memory as _memory
from .blocks import Blocks
from .checkpoint import Checkpoints
from .dist import SlabDipolar, require_distributed, same
from .memory import DeviceMemoryError, memory_parts
from .observe import Observables
from .parameters import (GEOMETRIES, MODEL, SETTABLE, Obstacle, c_args, check, check_even,
                         check_free_start, check_gqf, check_omega, check_rotating_ground,
                         obstacle_args, owned_potential, refusal, state_array)

__all__ = ["DipolarGPE", "Obstacle", "GEOMETRIES", "DeviceMemoryError", "memory_parts"]

#: seconds one block of steps (one C call) is planned to take at most; the
#: cost model below overestimates on an idle machine, so Ctrl-C acts within
#: about this time even on a loaded one
BLOCK_SECONDS = 0.1

#: pessimistic seconds per step: fixed + per point (+ dipolar FFT: a fixed part,
#: reached from 1024 points on, where threaded transforms start, and a part
#: per point and log2 of the points), per backend
_COST = {"cpu": dict(fixed=20e-6, point=12e-9, fft_fixed=200e-6, fft_point_log2=1.5e-9),
         "cuda": dict(fixed=30e-6, point=0.1e-9, fft_fixed=30e-6, fft_point_log2=0.02e-9)}


def _block_steps(shape: Tuple[int, ...], backend: str, fft: bool) -> int:
    """Steps of one block from the cost model (`fft`: the dipolar term is on)."""
    n = int(np.prod(shape))
    c = _COST[backend]
    sec = c["fixed"] + n * c["point"]
    if fft:
        sec += c["fft_fixed"] * min(1.0, n / 1024) + n * c["fft_point_log2"] * math.log2(n)
    return int(max(1, min(10 ** 6, BLOCK_SECONDS // sec)))


def _live(gpe: Any, name: str, value: Any) -> float:
    """A new omega or gqf checked and given to the handle (the equation's
    -w L_z with w = option Omega; its gqf reduced in 2D and 1D)."""
    if name == "omega":
        w = gpe._agree(lambda: check_omega(value, gpe._geometry))
        gpe._solver.set_rotation(gpe._option * w)
        return w
    q = gpe._agree(lambda: check_gqf(value))
    gpe._solver.set_lhy(q * gpe._fq)
    return q


def _set_attribute(gpe: Any, name: str, value: Any) -> None:
    """DipolarGPE's ``__setattr__``: private names and parameters (which
    refuse, or check and apply) are set; anything else is refused."""
    if name.startswith("_"):
        object.__setattr__(gpe, name, value)
        return
    attr = getattr(type(gpe), name, None)
    if isinstance(attr, Param) or isinstance(attr, property) and attr.fset is not None:
        object.__setattr__(gpe, name, value)  # a Param refuses or checks and applies
        return
    if isinstance(attr, property):
        raise AttributeError(refusal(name))
    if attr is not None:  # methods and other class attributes
        raise AttributeError(f"DipolarGPE.{name} cannot be replaced on a solver")
    raise AttributeError(f"DipolarGPE has no attribute {name!r} (a parameter set this way "
                         f"would be ignored); settable: {', '.join(SETTABLE)}")


def _coupling(gpe: Any, name: str, value: Any) -> float:
    """`value` of g or gdd checked; a first nonzero gdd needs the dipolar
    term's buffers and plans, whose memory is checked now."""
    v = _real(name, value)
    if name == "gdd" and v != 0 and not gpe._dipolar:
        check_even(gpe._shape)
        if gpe._comm is None:
            _memory.require_dipolar(gpe)
        else:
            gpe._solver.require_memory(gpe, True, gpe._V is not None, False)
    return v


class DipolarGPE(Observables, Blocks, Checkpoints, TimeStepper):
    """Dipolar Gross-Pitaevskii equation, split-step Crank-Nicolson (DBEC-GP scheme).

    Arrays have the shape of the solver axes: ``(nx, ny, nz)`` in 3D,
    ``(nx, ny)`` for ``"2d-xy"``, ``(nx, nz)`` for ``"2d-xz"``, ``(nx,)`` or
    ``(nz,)`` in 1D; grid points are ``x_i = (i - n/2) h``.  ψ = 0 on the box
    faces.

    Parameters
    ----------
    shape : sequence of int
        Points per solver axis (>= 4; even when the dipolar term is on).
    spacing : float or sequence of float
        Grid spacing, one value or one per axis.
    dt : float
        Time step, used by real and imaginary time.
    g, gdd : float, optional
        Contact and dipolar coefficients of the *3D* equation in the chosen
        rescaling (DBEC-GP: ``g = OPTION * 4 pi a_s N / l``, ``gdd = OPTION *
        3 a_dd N / l``).  In 2D and 1D they are reduced with the confining
        frequencies (attributes :attr:`g_eff`, :attr:`gdd_eff`).
    trap : (float, float, float), optional
        Trap frequencies ``(gamma, nu, lambda)`` along x, y, z in units of
        the reference frequency.  In 2D and 1D the confining ones set the
        reduction: lambda for ``"2d-xy"``, nu for ``"2d-xz"``, nu = lambda
        for ``"1d-x"``, gamma = nu for ``"1d-z"``.
    cutoff : float or None, optional
        3D: radius R of the spherical cutoff of V_dd (DBEC-GP's CUTOFF); None
        for the untruncated kernel.
    geometry : {"3d", "2d-xy", "2d-xz", "1d-x", "1d-z"}, optional
        Dimension and dipole orientation (dipoles along z).
    option : {1, 2}, optional
        Rescaling of time: 2 is eq. 2.9 (kinetic ``-Lap``), 1 the standard
        form (kinetic ``-Lap/2``).  Energies are reported in units of the
        reference frequency in both (divided by `option`).
    V : array_like or None, optional
        Static extra potential on the grid (units of the equation); the
        solver keeps its own copy.
    obstacle : Obstacle or None, optional
        Moving Gaussian beam.
    psi0 : array_like or None, optional
        Initial state; default the normalised Gaussian of the trap (the
        DBEC-GP start for imaginary time).  A real state runs imaginary time
        in real arithmetic.  Copied into the solver.
    dtype : {numpy.complex64, numpy.complex128}, optional
        Precision.
    dipolar : bool or None, optional
        Keep the dipolar step (FFT plans, buffers).  Default: only when
        ``gdd != 0``; without it a step does no FFT at all.
    fft_effort : {"estimate", "measure", "patient"}, optional
        FFTW planning effort (plans are made once, at construction; the
        CUDA backend's cuFFT plans have no such choice).  "measure" and
        "patient" choose among algorithms by timing them, so two solvers
        may round differently; "estimate" is reproducible.
    omega : float, optional
        Rotation frequency Omega about z, in units of the reference
        frequency (geometries "3d" and "2d-xy"; default 0): the equation
        gains ``-Omega L_z psi``, ``L_z = -i (x d/dy - y d/dx)``, and is
        solved in the rotating frame (settable between calls, e.g. a ramp).
    gqf : float, optional
        The Lee-Huang-Yang coefficient (quantum fluctuations; >= 0, default
        0): the equation gains ``gqf |psi|^3 psi`` (the 3D coefficient in
        the rescaling of `option`, like `g`: ``nl.units.BEC(...).gqf``;
        reduced in 2D and 1D over the transverse Gaussian, :attr:`gqf_eff`).
        It stabilises self-bound droplets; settable.
    backend : {"auto", "cpu", "cuda"}, optional
        Where the state lives and the kernels run: ``"cpu"`` (C, OpenMP,
        FFTW), ``"cuda"`` (the GPU, cuFFT; the state stays in device memory
        between calls, ``memory_bytes`` says how much the solver holds) or
        ``"auto"``: the environment variable ``NLSEPY_BACKEND`` when set,
        else CUDA when a device is present, else the CPU.  Both backends run
        the same scheme and agree to 1e-10 relative in double precision.
    comm : mpi4py.MPI.Intracomm or None, optional
        Run over the ranks of this communicator (3D geometry): every rank
        holds a slab of x rows, ``psi`` is this rank's slab, ``psi0`` and
        ``V`` are the global array, this rank's slab or the
        :class:`~nlsepy.Slab` of :func:`nlsepy.scatter`, :meth:`gather`
        collects the state, :attr:`local_slice`, :attr:`layout` and
        :attr:`comm_info` describe the layout, and every method that
        touches the whole grid is collective (see
        ``nlsepy.dipolar.dist``).  Needs mpi4py and nlsepy's MPI layer;
        every rank makes the same call.

    Attributes
    ----------
    t : float
        Real time (imaginary-time steps leave it unchanged; read-only).

    Raises
    ------
    MemoryError
        The solver's buffers (counted by :func:`nlsepy.dipolar.memory_parts`) do not fit
        in the host's available memory or, for ``backend="cuda"``, in the
        GPU's free memory (:class:`~nlsepy.dipolar.DeviceMemoryError`); nothing is
        allocated.

    Notes
    -----
    *Parameters.*  ``psi``, ``V``, ``obstacle``, ``g``, ``gdd``, ``dt``,
    ``omega`` and ``gqf`` may be assigned after construction: the value is
    checked and the next step uses it.  Everything else (``shape``,
    ``spacing``, ``trap``, ``option``, ``geometry``, ``cutoff``, ``dtype``,
    ``backend``, ...) is read-only; assigning it raises ``AttributeError``
    (make a new solver, or ``DipolarGPE.load(path, trap=...)``).

    *Ctrl-C.*  A stepping call runs in blocks of :attr:`block_steps` whole
    steps (one C call each, planned to take at most about
    ``BLOCK_SECONDS`` = 0.1 s); each block is booked (:attr:`t`,
    :attr:`steps`) before the next starts, and SIGINT raises
    ``KeyboardInterrupt`` between blocks.  The solver is then at the state,
    time and step counts of the last whole block and can go on: calling
    again with the remaining steps gives the result of the uninterrupted
    call bit for bit.  The blocks start at the first step of each call, so
    the arithmetic depends on the calls made, never on timing.  In real
    time without an obstacle, splitting a run into calls changes nothing;
    in imaginary time every call ends with an exact renormalisation of the
    state (the kernels otherwise fold step n's normalisation into step
    n+1), and with an obstacle each call restarts the obstacle's clock from
    :attr:`t`, so results of runs longer than one block differ from a single
    C call at the rounding level.  An interrupted ``ramp=True`` call is not
    resumed: the couplings are back at ``g``, ``gdd``.

    Examples
    --------
    >>> import nlsepy as nl
    >>> gpe = nl.DipolarGPE((48,), 0.25, 0.005, trap=(1.0, 1.0, 1.0), geometry="1d-x")
    >>> round(gpe.imaginary_time(2000).observables()["mu"], 3)
    0.5
    """

    _MODEL = MODEL
    _TIMINGS = ("step", "transpose", "fft", "reduce")
    _REPR = (("geometry", "r"), ("shape", ""), ("dt", "g"), ("g", "g"), ("gdd", "g"),
             ("trap", ""), ("option", ""), ("t", "g"), ("dtype", ""), ("backend", "r"))

    # the parameter table: these set up the solver's grid, tables or kernel ...
    geometry = Param("Dimension and dipole orientation (read-only).")
    axes = Param("Names of the solver axes (read-only).")
    shape = Param("Grid shape (solver axes; read-only).")
    spacing = Param("Grid spacing per solver axis (read-only).")
    trap = Param("Trap frequencies ``(gamma, nu, lambda)`` (read-only).")
    option = Param("Rescaling of time, 1 or 2 (read-only).")
    cutoff = Param("Spherical cutoff of the 3D kernel, or None (read-only).")
    dtype = Param("Precision of the state (read-only).")
    backend = Param('``"cpu"`` or ``"cuda"`` (read-only).')
    fft_effort = Param("FFTW planning effort the solver was made with (read-only).")
    # ... and these go to the live handle (distributed: the same on every rank)
    g = Param("Contact coefficient of the 3D equation (settable; the next step uses it).",
              rebuild=False)
    gdd = Param("""Dipolar coefficient of the 3D equation (settable; the next step uses it).

        Setting it nonzero on a solver made without the dipolar term
        builds the FFT buffers and plans (memory checked first).
        """, rebuild=False)
    omega = Param("Rotation frequency about z (settable; the next step uses it).",
                  rebuild=False)
    gqf = Param("Lee-Huang-Yang coefficient (3D; settable; the next step uses it).",
                rebuild=False)

    def __init__(self, shape: Sequence[int], spacing: Union[float, Sequence[float]], dt: float,
                 g: float = 0.0, gdd: float = 0.0, trap: Sequence[float] = (1.0, 1.0, 1.0),
                 cutoff: Optional[float] = None, geometry: str = "3d", option: int = 2,
                 V: Optional[Any] = None, obstacle: Optional[Obstacle] = None,
                 psi0: Optional[Any] = None, dtype: Any = np.complex128,
                 dipolar: Optional[bool] = None, fft_effort: str = "estimate",
                 backend: str = "auto", comm: Any = None, omega: float = 0.0,
                 gqf: float = 0.0) -> None:
        params = (shape, spacing, dt, g, gdd, trap, cutoff, geometry, option, dtype, dipolar,
                  fft_effort, gqf)
        self._comm = None if comm is None else _dist.as_comm(comm)
        if self._comm is not None:  # this rank's slab of x rows: every rank the same call
            self._same("the constructor's parameters",
                       params + (backend, V is None, psi0 is None, obstacle))
            self._agree(lambda: self._setup(params, backend))
            self._solver = SlabDipolar(self, V is not None, psi0 is not None)
            if psi0 is not None:
                self.psi = psi0
            if V is not None:
                self.V = V
            if obstacle is not None:
                self.obstacle = obstacle
            self.omega, self.gqf = omega, gqf
            return
        self._setup(params, backend)
        V_arr = None if V is None else owned_potential(V, self._shape, self._dtype)
        ob = None if obstacle is None else obstacle_args(obstacle, self._axes)
        _memory.require(self, memory_parts(self._shape, self._dtype, self._dipolar,
                                           self._backend, _memory.threads(self._backend),
                                           V is not None, psi0 is not None),
                        dipolar=self._dipolar, V=V is not None)
        self._solver = _backend.module(self._backend).Dipolar(*self._c_args)
        if psi0 is not None:
            self.psi = psi0
        if V_arr is not None:
            self._solver.set_potential(V_arr)
            self._V = V_arr
        if ob is not None:
            self._solver.set_obstacle(ob)
            self._obstacle = obstacle
        self.omega, self.gqf = omega, gqf

    def _setup(self, params: Tuple[Any, ...], backend: str) -> None:
        """Check and keep the parameters (``_<name>``), the backend and the C
        core's constructor arguments; start the clock and counters (no
        collective call)."""
        p = check(*params)
        for name, value in p.items():
            setattr(self, "_" + name, value)
        self._backend = _backend.resolve(backend, MODEL) if self._comm is None else \
            require_distributed(self._geometry, backend)
        self._c_args = c_args(p)
        self._start_clock(self._dt)
        self._steps = {"imaginary": 0, "real": 0}
        self._last_seconds = 0.0
        self._V: Optional[np.ndarray] = None
        self._obstacle: Optional[Obstacle] = None
        self._frames: Optional[runner.Frames] = None
        self._omega, self._gqf, self._default_start = 0.0, 0.0, True

    # ------------------------------------------------------------ attributes
    def _refuse(self, name: str, value: Any) -> str:
        return refusal(name)

    def __setattr__(self, name: str, value: Any) -> None:
        _set_attribute(self, name, value)

    def _set_param(self, name: str, value: Any) -> None:
        """A new g, gdd, omega or gqf (distributed: the same on every rank), checked,
        to the handle."""
        self._same(name, value)
        if name in ("omega", "gqf"):
            return super()._set_param(name, _live(self, name, value))
        v = self._agree(lambda: _coupling(self, name, value))
        g, gdd = (v, self._gdd) if name == "g" else (self._g, v)
        self._solver.set_couplings(g * self._fc, gdd * self._fd)
        self._dipolar = self._dipolar or gdd != 0
        super()._set_param(name, v)

    def _same(self, what: str, value: Any) -> None:
        """Distributed: ValueError on every rank unless every rank passed the same `value`."""
        if self._comm is not None:
            same(self._comm, what, value)

    @property
    def frames(self) -> Optional[runner.Frames]:
        """Snapshots of the last :meth:`imaginary_time` / :meth:`real_time` call
        made with ``frames=`` (None otherwise); after an interrupted call, the
        snapshots taken before the interrupt."""
        return self._frames

    @property
    def reduction(self) -> Tuple[float, float]:
        """Factors (contact, dipolar) from the 3D couplings to the solved equation's.

        ``(1, 1)`` in 3D; ``sqrt(k/2pi)`` and ``(4pi/3) sqrt(k/2pi)`` in 2D,
        ``k/2pi`` and ``2k/3`` in 1D, with k the confining frequency.
        """
        return self._fc, self._fd

    @property
    def g_eff(self) -> float:
        """Contact coefficient of the equation solved (reduced in 2D/1D)."""
        return self._g * self._fc

    @property
    def gdd_eff(self) -> float:
        """Dipolar coefficient of the equation solved (reduced in 2D/1D)."""
        return self._gdd * self._fd

    @property
    def gqf_eff(self) -> float:
        """Lee-Huang-Yang coefficient of the equation solved (reduced in 2D/1D)."""
        return self._gqf * self._fq

    def _set_state(self, value: Any) -> None:
        if self._comm is None:
            arr = state_array(value, self._shape)
        else:
            arr = self._solver.rows_of("psi", value, "fc")
        real = arr.dtype.kind == "f" or not np.any(arr.imag)
        if self._comm is not None:  # one kind of state on every rank
            real = self._solver.everywhere(real)
        rdt = np.float32 if self._dtype == np.complex64 else np.float64
        self._solver.set_state(np.ascontiguousarray(arr.real if real else arr,
                                                    dtype=rdt if real else self._dtype))
        self._default_start = False

    @property
    def is_real(self) -> bool:
        """True while the state is stored real (imaginary time in real arithmetic)."""
        return bool(self._solver.is_real())

    def _set_potential(self, value: Any) -> None:
        self._same("whether V is None", value is None)
        if value is None:
            arr = None
        elif self._comm is not None:
            rows = self._solver.rows_of("V", value, "fiu")
            arr = self._agree(lambda: self._solver.own_potential(self, rows, self._V is None))
        else:
            arr = owned_potential(value, self._shape, self._dtype)
            if self._V is None:  # the C core allocates its copy now
                _memory.require(self, {"solver": {"potential V": arr.nbytes}, "host": {}},
                                V=True)
        self._solver.set_potential(arr)
        self._V = arr

    @property
    def obstacle(self) -> Optional[Obstacle]:
        """The moving beam (None when absent); settable (distributed: collective)."""
        return self._obstacle

    @obstacle.setter
    def obstacle(self, ob: Optional[Obstacle]) -> None:
        self._same("obstacle", ob)
        args = None if ob is None else self._agree(lambda: obstacle_args(ob, self._axes))
        self._solver.set_obstacle(args)
        self._obstacle = ob

    @property
    def dt(self) -> float:
        """Time step of real and imaginary time (settable; the next step uses it)."""
        return self._dt

    @dt.setter
    def dt(self, value: float) -> None:
        self._same("dt", value)
        self._dt = self._agree(lambda: self._check_dt(value, False))

    def _check_dt(self, dt: Any, force: bool) -> float:
        return _real("dt", dt, positive=True)

    @property
    def steps(self) -> Dict[str, int]:
        """Steps taken so far, ``{"imaginary": n, "real": m}`` (a copy)."""
        return dict(self._steps)

    @property
    def block_steps(self) -> int:
        """Steps of one block (one C call) of a long stepping call.

        From a pessimistic cost model of the grid on the backend (points,
        the dipolar FFTs), planned to take at most ``BLOCK_SECONDS`` (0.1 s);
        the same on every machine and thread count, so results do not
        depend on timing.
        """
        return _block_steps(self._shape, self._backend, self._dipolar and self._gdd != 0)

    # --------------------------------------------------------------- stepping
    def imaginary_time(self, steps: int, frames: Optional[int] = None,
                       callback: Optional[Callable] = None, progress: bool = False,
                       ramp: bool = False, output: Any = None,
                       force: bool = False) -> "DipolarGPE":
        """Propagate `steps` steps in imaginary time (renormalised every step).

        Parameters
        ----------
        steps : int
            Number of steps (>= 0).
        frames : int or None, optional
            Split the run into this many chunks and keep the states after
            each in :attr:`frames` (the :class:`~nlsepy.runner.Frames` of
            the last call).
        callback : callable, optional
            ``callback(gpe)`` after each chunk; ``StopIteration`` stops.
        progress : bool, optional
            tqdm progress bar.
        ramp : bool, optional
            Grow g and gdd linearly from 0 to their values over the steps
            (DBEC-GP's NSTP stage; gqf stays at its value).
        output : path-like, optional
            Stream the state before the call and after each chunk, with the
            :meth:`observables`, into this HDF5 file (see :meth:`run`); in
            imaginary time the frames' axis is ``step`` (imaginary-time
            steps taken), in real time ``t``.
        force : bool, optional
            Run even with ``|omega| >=`` min(gamma, nu), where the rotating
            frame has no ground state (refused otherwise: ValueError).

        Returns
        -------
        DipolarGPE
            ``self``.

        Raises
        ------
        KeyboardInterrupt
            On Ctrl-C, between two blocks of steps; :attr:`steps` counts the
            steps done (see the class notes).
        BlowUpError
            The state became non-finite; the solver is at the start of the
            block that failed.
        ValueError
            A trap frequency of a solver axis is 0 (free space) and the
            state is still the default start (pass ``psi0``).
        """
        if self._default_start:
            check_free_start(self._trap, self._axes)
        if not force:
            check_rotating_ground(self._omega, self._trap)
        self._chunks("imaginary", steps, frames, callback, progress, ramp, output)
        return self

    def real_time(self, steps: int, frames: Optional[int] = None,
                  callback: Optional[Callable] = None, progress: bool = False,
                  ramp: bool = False, output: Any = None) -> "DipolarGPE":
        """Propagate `steps` steps of :attr:`dt` in real time.

        Parameters and exceptions are those of :meth:`imaginary_time`;
        after Ctrl-C, :attr:`t` and :attr:`steps` count the steps done.

        Returns
        -------
        DipolarGPE
            ``self``.
        """
        self._chunks("real", steps, frames, callback, progress, ramp, output)
        return self

    def run(self, t_end: float, frames: int = 10, callback: Optional[Any] = None,
            progress: bool = False, checkpoint: Optional[Union[str, os.PathLike]] = None,
            output: Optional[Union[str, os.PathLike]] = None) -> runner.Frames:
        """Real-time propagation to `t_end` in `frames` chunks (the shared runner).

        Parameters
        ----------
        t_end : float
            Final time (> :attr:`t`).
        frames : int, optional
            Number of chunks; ``frames + 1`` snapshots are returned.
        callback : callable, optional
            ``callback(gpe)`` after each chunk; raise ``StopIteration`` to stop.
        progress : bool, optional
            tqdm progress bar.
        checkpoint : path-like, optional
            Write :meth:`save` after each chunk.
        output : path-like, optional
            Stream the frames into this HDF5 file (``.h5``/``.hdf5``, needs
            h5py: ``pip install 'nlsepy[hdf5]'``) as they are taken: ``psi``
            over ``t`` and the solver axes (coordinates :attr:`coords`), the
            :meth:`observables` per frame (``norm``, ``norm_sum``, ``mu``,
            ``energy``, ``mu_dbec``, ``energy_dbec``, ``x2`` ... per axis,
            ``r_rms``, ``psi0sq``) and the step counters, every parameter
            and the units; flushed after each frame, readable after Ctrl-C,
            read back by :func:`nlsepy.open_run`.  Distributed (collective):
            the frames hold this rank's slabs, ``checkpoint`` writes
            distributed checkpoints, and every rank writes its slabs to a
            part file beside ``output``, whose frames are virtual datasets
            over the parts.

        Returns
        -------
        Frames
            ``(t, psi)`` snapshots.
        """
        self._same("run's t_end, frames, checkpoint and output",
                   (t_end, frames, checkpoint is None, output is None))
        if isinstance(frames, (int, np.integer)) and not isinstance(frames, bool) and frames >= 1:
            self._require_frames(int(frames) + 1)
        return super().run(t_end, frames, callback, bool(progress) and self._rank0(), checkpoint,
                           output)

    # ------------------------------------------------------------ distributed
    @property
    def layout(self) -> Optional[_dist.Layout]:
        """The x slabs of every rank (``nlsepy.common.dist.Layout``; None for
        one process)."""
        return None if self._comm is None else self._solver.layout

    def _comm_details(self) -> Dict[str, Any]:
        return self._solver.info()  # SlabDipolar.info: the x rows, the FFT, the x solve

    def __repr__(self) -> str:
        text = super().__repr__()
        if self._comm is None:
            return text
        return text[:-1] + f", ranks={self._comm.Get_size()}, rank={self._comm.Get_rank()})"
