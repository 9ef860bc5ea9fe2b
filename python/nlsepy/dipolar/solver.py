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

Safety (the shared layer :mod:`nlsepy._guard`): long stepping calls run as
blocks of whole steps, each one C call booked on the object (time, step
counters) before the next, with Ctrl-C held as a flag and raised between
blocks; the solver owns copies of its inputs and its parameters are either
read-only or applied on assignment; checkpoints are tagged and checked;
the memory a solver takes is counted before it is allocated.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from numbers import Real
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from .. import _backend, _guard, runner
from .._validate import complex_dtype as _complex_dtype
from .._validate import count as _count
from .._validate import potential as _potential
from .._validate import real as _real
from ..errors import BackendError, BlowUpError

__all__ = ["DipolarGPE", "Obstacle", "GEOMETRIES", "DeviceMemoryError", "memory_parts"]

#: geometry name -> (C code, solver axis names)
GEOMETRIES = {
    "3d": (0, ("x", "y", "z")),
    "2d-xy": (1, ("x", "y")),   # dipoles perpendicular to the plane, eq. 2.11
    "2d-xz": (2, ("x", "z")),   # dipoles in the plane, eq. 2.14
    "1d-x": (3, ("x",)),        # dipoles perpendicular to the axis, eq. 2.16
    "1d-z": (4, ("z",)),        # dipoles along the axis, eq. 2.19
}
_FFT_EFFORT = {"estimate": 0, "measure": 1, "patient": 2}
_MODES = {"imaginary": 0, "real": 1}
_MODEL = "DipolarGPE"

#: seconds one block of steps (one C call) is planned to take at most; the
#: cost model below overestimates on an idle machine, so Ctrl-C acts within
#: about this time even on a loaded one
BLOCK_SECONDS = 0.1

#: pessimistic seconds per step: fixed + per point (+ dipolar FFT: a fixed part,
#: reached from 1024 points on, where threaded transforms start, and a part
#: per point and log2 of the points), per backend
_COST = {"cpu": dict(fixed=20e-6, point=12e-9, fft_fixed=200e-6, fft_point_log2=1.5e-9),
         "cuda": dict(fixed=30e-6, point=0.1e-9, fft_fixed=30e-6, fft_point_log2=0.02e-9)}


class DeviceMemoryError(BackendError, MemoryError):
    """The GPU does not have the device memory a CUDA solver needs (raised
    before anything is allocated; both a ``MemoryError`` and an
    :class:`~nlsepy.BackendError`)."""


def _internal_shape(shape: Sequence[int]) -> Tuple[int, int, int]:
    """The C core's ``(n0, n1, n2)`` of solver axes `shape` (padded with 1s in front)."""
    n = (1,) * (3 - len(shape)) + tuple(int(v) for v in shape)
    return n[0], n[1], n[2]


def memory_parts(shape: Sequence[int], dtype: Any = np.complex128, dipolar: bool = False,
                 backend: str = "cpu", threads: int = 1, potential: bool = False,
                 psi0: bool = False) -> Dict[str, Dict[str, int]]:
    """Bytes a solver of `shape` takes, by buffer, on its backend and on the host.

    Counts what ``csrc/dipolar/dipolar.c`` (CPU) and ``cuda/dipolar/*.cu``
    allocate: the state and the backup of it that a step call keeps, the
    per-axis tables (coordinates, Simpson weights, trap and obstacle factors,
    Crank-Nicolson coefficients for both modes), the per-row partial norms, the
    per-thread sweep buffers (CPU: ``n2 + 2 n2 max(n0, n1) + 64`` values each),
    with the dipolar term the padded density/FFT buffer (``n0 n1 2(n2/2+1)``
    values), the kernel table (``n0 n1 (n2/2+1)``) and the FFT plans' work
    areas (cuFFT: counted as one half spectrum per plan; FFTW: a few lines
    per axis and thread), the user potential, and the Crank-Nicolson
    coefficients' work array (6 doubles per point of the longest axis).  On
    the host besides: the solver's own copy of `V`, the staging copy of an
    initial state and (CUDA) the kernel table before its upload.

    Parameters
    ----------
    shape : sequence of int
        Points per solver axis.
    dtype : {numpy.complex64, numpy.complex128}, optional
        Precision.
    dipolar : bool, optional
        With the dipolar FFT buffers and plans.
    backend : {"cpu", "cuda"}, optional
        Where the solver's buffers live.
    threads : int, optional
        CPU threads (one sweep buffer each).
    potential : bool, optional
        A static potential `V` is set.
    psi0 : bool, optional
        An initial state is given (staged on the host).

    Returns
    -------
    dict
        ``{"solver": {part: bytes}, "host": {part: bytes}}``: the solver's
        buffers (device memory for ``"cuda"``, host memory for ``"cpu"``)
        and what the host holds besides.
    """
    rs = 4 if np.dtype(dtype) == np.complex64 else 8
    n0, n1, n2 = _internal_shape(shape)
    N = n0 * n1 * n2
    nh = n2 // 2 + 1
    solver: Dict[str, int] = {}
    host: Dict[str, int] = {}
    solver["state and its backup"] = 4 * N * rs
    solver["per-axis tables"] = sum(n * (16 + 8 * rs) for n in (n0, n1, n2))
    cn_work = {"Crank-Nicolson work": 6 * 8 * max(n0, n1, n2)}  # made on the host, then freed
    if backend == "cpu":
        solver["per-row norms"] = 2 * 8 * n0 * n1  # the norm's and the moments' partial sums
        solver["sweep buffers"] = max(1, int(threads)) * (n2 + 2 * n2 * max(n0, n1) + 64) * rs
        solver.update(cn_work)
    else:
        solver["block sums"] = 4096 * 12 * 8 + 1024 * 4 * 8  # and the recorded moments' rows
        host.update(cn_work)
        if dipolar:  # the kernel table is computed on the host and uploaded
            host["kernel staging"] = n0 * n1 * nh * (8 + (4 if rs == 4 else 0))
    if dipolar:
        solver["density/FFT buffer"] = n0 * n1 * 2 * nh * rs
        solver["dipolar kernel"] = n0 * n1 * nh * rs
        if backend == "cuda":
            solver["cuFFT work areas"] = 2 * (n0 * n1 * 2 * nh * rs)
        else:
            solver["FFTW plans"] = 64 * (n0 + n1 + n2) * 2 * rs * max(1, int(threads))
    if potential:
        solver["potential V"] = N * rs
        host["owned copy of V"] = N * rs
    if psi0:
        host["initial state"] = 2 * N * rs
    return {"solver": solver, "host": host}


def _describe(parts: Dict[str, int]) -> str:
    """The buffers of `parts` worth naming (from 1 MiB; all of them in a small total)."""
    floor = 1 << 20 if sum(parts.values()) >= 1 << 24 else 1
    return ", ".join(f"{k} {_guard.format_bytes(v)}" for k, v in parts.items() if v >= floor)


def _core():
    from .. import _core as core
    return core


@dataclass(frozen=True)
class Obstacle:
    """A moving repulsive Gaussian beam (Loncar, thesis, eq. 9.1).

    ``V_B = A(t) exp(-2 sum_a (x_a - c_a(t))^2 / sigma^2)`` over the solver
    axes other than `beam_axis`; the centre is 0 except along `move_axis`,
    where ``c(t) = start + velocity min(t, t_move)``; ``A(t) = V0`` until
    `t_move`, then falls linearly to 0 over `t_off`.  Imaginary time sees the
    beam at t = 0.  Units are those of the equation solved (``V0`` adds to
    the Hamiltonian as is).

    Parameters
    ----------
    V0 : float
        Peak height.
    sigma : float
        The 1/e^2 waist (> 0).
    velocity : float, optional
        Speed along `move_axis`.
    start : float, optional
        Centre at t = 0 along `move_axis`.
    t_move : float, optional
        Time the beam stops (default: never).
    t_off : float, optional
        Duration of the linear switch-off after `t_move` (0: at once).
    move_axis : str, optional
        Axis name the beam moves along (default ``"y"``).
    beam_axis : str or None, optional
        Axis the beam propagates along (no dependence on it); default
        ``"x"`` in 3D as in eq. 9.1, none (a round spot) in 2D and 1D.
    """

    V0: float
    sigma: float
    velocity: float = 0.0
    start: float = 0.0
    t_move: float = math.inf
    t_off: float = 0.0
    move_axis: str = "y"
    beam_axis: Optional[str] = "x"


#: attributes set after construction: what they do
_SETTABLE = ("psi", "V", "obstacle", "g", "gdd", "dt")

#: read-only attributes and how to change what they stand for
_FIXED = {
    "t": "t counts the real-time steps taken; it moves only with real_time() and run() "
         "(save() and load() keep it)",
    "steps": "steps counts the steps taken; save() and load() keep it",
    "frames": "frames holds the snapshots of the last call with frames=",
}
_FIXED_DEFAULT = ("{name} is fixed at construction (it sets the solver's grid, tables or "
                  "kernel); make a new solver with the value you want: DipolarGPE(..., "
                  "{name}=...), or DipolarGPE.load(path, {name}=...) from a state written by "
                  "save(). Settable after construction: " + ", ".join(_SETTABLE))


class DipolarGPE:
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
    backend : {"auto", "cpu", "cuda"}, optional
        Where the state lives and the kernels run: ``"cpu"`` (C, OpenMP,
        FFTW), ``"cuda"`` (the GPU, cuFFT; the state stays in device memory
        between calls, ``memory_bytes`` says how much the solver holds) or
        ``"auto"``: the environment variable ``NLSEPY_BACKEND`` when set,
        else CUDA when a device is present, else the CPU.  Both backends run
        the same scheme and agree to 1e-10 relative in double precision.
    comm : mpi4py.MPI.Intracomm or None, optional
        Run over the ranks of this communicator (3D geometry, CPU ranks):
        every rank holds a slab of x rows, ``psi`` is this rank's slab,
        ``gather()`` collects the state, ``local_slice`` and ``comm_info``
        describe the layout (see
        ``nlsepy.dipolar.distributed``).  Needs
        mpi4py and nlsepy's MPI layer; every rank makes the same call.

    Raises
    ------
    MemoryError
        The solver's buffers (counted by :func:`nlsepy.dipolar.memory_parts`) do not fit
        in the host's available memory or, for ``backend="cuda"``, in the
        GPU's free memory (:class:`~nlsepy.dipolar.DeviceMemoryError`); nothing is
        allocated.

    Notes
    -----
    *Parameters.*  ``psi``, ``V``, ``obstacle``, ``g``, ``gdd`` and ``dt``
    may be assigned after construction: the value is checked and the next
    step uses it.  Everything else (``shape``, ``spacing``, ``trap``,
    ``option``, ``geometry``, ``cutoff``, ``dtype``, ``backend``, ...) is
    read-only; assigning it raises ``AttributeError`` (make a new solver, or
    ``DipolarGPE.load(path, trap=...)`` from a saved state).

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

    def __new__(cls, *args: Any, comm: Any = None, **kwargs: Any) -> "DipolarGPE":
        if comm is not None and cls is DipolarGPE:  # the distributed solver (x slabs over ranks)
            from .distributed import DistributedDipolarGPE
            return object.__new__(DistributedDipolarGPE)
        return object.__new__(cls)

    def __init__(self, shape: Sequence[int], spacing: Union[float, Sequence[float]], dt: float,
                 g: float = 0.0, gdd: float = 0.0, trap: Sequence[float] = (1.0, 1.0, 1.0),
                 cutoff: Optional[float] = None, geometry: str = "3d", option: int = 2,
                 V: Optional[Any] = None, obstacle: Optional[Obstacle] = None,
                 psi0: Optional[Any] = None, dtype: Any = np.complex128,
                 dipolar: Optional[bool] = None, fft_effort: str = "estimate",
                 backend: str = "auto", comm: Any = None) -> None:
        code, kscale, use_dd = self._setup(shape, spacing, dt, g, gdd, trap, cutoff, geometry,
                                           option, dtype, dipolar, fft_effort)
        self._backend = _backend.resolve(backend, _MODEL)
        V_arr = None if V is None else self._own_potential(V)
        ob = None if obstacle is None else self._obstacle_tuple(obstacle)
        self._require_memory(memory_parts(self._shape, self._dtype, use_dd, self._backend,
                                          self._threads(), V is not None, psi0 is not None),
                             dipolar=use_dd, V=V is not None)
        core = _core()
        kin, coef = self._kin_coef()
        self._solver = _backend.module(self._backend).Dipolar(
            code, self._shape, self._spacing,
            core.COMPLEX64 if self._dtype == np.complex64 else core.COMPLEX128,
            self._dt, kin, coef, self._g * self._fc, self._gdd * self._fd,
            0.0 if self._cutoff is None else self._cutoff, kscale, int(use_dd),
            _FFT_EFFORT[self._fft_effort])
        self._start(use_dd)
        if psi0 is not None:
            self.psi = psi0
        if V_arr is not None:
            self._solver.set_potential(V_arr)
            self._V = V_arr
        if ob is not None:
            self._solver.set_obstacle(ob[1])
            self._obstacle = ob[0]

    def _kin_coef(self) -> Tuple[float, list]:
        """The C core's kinetic coefficient and trap coefficients per solver axis."""
        kin = 1.0 if self._option == 2 else 0.5
        coef = [(self._option / 2.0) * self._trap["xyz".index(a)] ** 2 for a in self._axes]
        return kin, coef

    def _start(self, use_dd: bool) -> None:
        """Counters and owned inputs of a new solver."""
        self._dipolar = use_dd
        self._t_base, self._k, self._solver_dt = 0.0, 0, self._dt
        self._steps = {"imaginary": 0, "real": 0}
        self._last_seconds = 0.0
        self._V: Optional[np.ndarray] = None
        self._obstacle: Optional[Obstacle] = None
        self._frames: Optional[runner.Frames] = None

    def _setup(self, shape: Any, spacing: Any, dt: Any, g: Any, gdd: Any, trap: Any, cutoff: Any,
               geometry: Any, option: Any, dtype: Any, dipolar: Any, fft_effort: Any
               ) -> Tuple[int, float, bool]:
        """Check and keep the scalar parameters; return the geometry's C code,
        sqrt(2 kappa) and whether the dipolar term is on."""
        if not isinstance(geometry, str) or geometry.lower() not in GEOMETRIES:
            raise ValueError(f"geometry must be one of {sorted(GEOMETRIES)}, got {geometry!r}")
        self._geometry = geometry.lower()
        code, self._axes = GEOMETRIES[self._geometry]
        nd = len(self._axes)
        if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
            shape = (shape,)
        try:
            shape = tuple(np.asarray(shape, dtype=object).ravel().tolist())
        except Exception:  # noqa: BLE001 - anything that is not a sequence
            raise ValueError(f"shape must be a sequence of {nd} integers, got {shape!r}") from None
        if len(shape) != nd:
            raise ValueError(f"shape must have {nd} entries for geometry {self._geometry!r}, "
                             f"got {shape!r}")
        self._shape = tuple(_count(f"shape[{a}]", n, 4) for a, n in enumerate(shape))
        if np.ndim(spacing) == 0:
            spacing = (spacing,) * nd
        spacing = tuple(np.asarray(spacing, dtype=object).ravel().tolist())
        if len(spacing) != nd:
            raise ValueError(f"spacing must be a number or {nd} numbers, got {spacing!r}")
        self._spacing = tuple(_real(f"spacing[{a}]", h, positive=True)
                              for a, h in enumerate(spacing))
        self._dt = _real("dt", dt, positive=True)
        if isinstance(option, bool) or not isinstance(option, (int, np.integer)) \
                or option not in (1, 2):
            raise ValueError(f"option must be 1 or 2, got {option!r}")
        self._option = int(option)
        trap = tuple(trap) if not isinstance(trap, (str, bytes)) else trap
        if len(trap) != 3:
            raise ValueError(f"trap must be (gamma, nu, lambda), got {trap!r}")
        self._trap = tuple(_real(n, v, nonneg=True) for n, v in zip(("gamma", "nu", "lambda"), trap))
        self._g = _real("g", g)
        self._gdd = _real("gdd", gdd)
        self._cutoff = None if cutoff is None else _real("cutoff", cutoff, positive=True)
        self._dtype = _complex_dtype(dtype)
        if not isinstance(fft_effort, str) or fft_effort not in _FFT_EFFORT:
            raise ValueError(f"fft_effort must be one of {sorted(_FFT_EFFORT)}, got {fft_effort!r}")
        self._fft_effort = fft_effort
        self._fc, self._fd, kscale = self._reduction()
        use_dd = (self._gdd != 0) if dipolar is None else bool(dipolar)
        if not use_dd and self._gdd != 0:
            raise ValueError(f"dipolar=False needs gdd = 0, got gdd = {self._gdd!r}")
        if use_dd:
            self._check_even()
        return code, kscale, use_dd

    # ------------------------------------------------------------ attributes
    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_"):
            object.__setattr__(self, name, value)
            return
        attr = getattr(type(self), name, None)
        if isinstance(attr, property) and attr.fset is not None:
            object.__setattr__(self, name, value)
            return
        if isinstance(attr, property):
            raise AttributeError(f"DipolarGPE.{name} cannot be set: " +
                                 _FIXED.get(name, _FIXED_DEFAULT.format(name=name)))
        if attr is not None:  # methods and other class attributes
            raise AttributeError(f"DipolarGPE.{name} cannot be replaced on a solver")
        raise AttributeError(f"DipolarGPE has no attribute {name!r} (a parameter set this way "
                             f"would be ignored); settable: {', '.join(_SETTABLE)}")

    def _threads(self) -> int:
        if self._backend != "cpu":
            return 1
        try:
            return int(_core().get_num_threads())
        except Exception:  # noqa: BLE001 - a build without the query
            return 1

    def _what(self, **extra: Any) -> str:
        desc = (f"DipolarGPE(shape={self._shape}, geometry={self._geometry!r}, "
                f"dtype={self._dtype.name}, backend={self._backend!r}")
        for k, v in extra.items():
            desc += f", {k}={v!r}"
        if self._backend == "cpu":
            desc += f"; {self._threads()} threads"
        return desc + ")"

    def _require_memory(self, parts: Dict[str, Dict[str, int]], **extra: Any) -> None:
        """MemoryError before allocating when `parts` (solver / host bytes) will not fit."""
        solver, host = parts["solver"], parts["host"]
        total_s, total_h = sum(solver.values()), sum(host.values())
        what = f"{self._what(**extra)} [{_describe({**solver, **host})}]"
        if self._backend == "cuda":
            try:
                _guard.require_memory(total_s, what, backend="cuda", host_bytes=total_h)
            except MemoryError as exc:
                if "GPU memory" in str(exc):
                    raise DeviceMemoryError(f"{exc} (device memory of the CUDA backend; "
                                            f"backend='cpu' uses host memory)") from None
                raise
        else:
            _guard.require_memory(total_s + total_h, what)

    def _check_even(self) -> None:
        odd = [a for a, n in enumerate(self._shape) if n % 2]
        if odd:
            raise ValueError(f"shape[{odd[0]}] = {self._shape[odd[0]]} must be even with the "
                             f"dipolar term (x = 0 at index n/2 of a symmetric FFT box)")

    def _own_potential(self, value: Any) -> np.ndarray:
        """A checked, owned, read-only copy of a potential in the solver's precision."""
        arr = np.array(_potential(value, self._shape, self._dtype), copy=True, order="C")
        arr.flags.writeable = False
        return arr

    # ------------------------------------------------------------ reduction
    def _reduction(self) -> Tuple[float, float, float]:
        """Factors turning the 3D g, gdd into the effective ones, and sqrt(2 kappa)."""
        gam, nu, lam = self._trap
        geo = self._geometry
        if geo == "3d":
            return 1.0, 1.0, 0.0
        if geo in ("2d-xy", "2d-xz"):
            kappa = lam if geo == "2d-xy" else nu
            name = "lambda" if geo == "2d-xy" else "nu"
            if kappa <= 0:
                raise ValueError(f"geometry {geo!r} needs a confining trap frequency {name} > 0")
            f = math.sqrt(kappa / (2 * math.pi))
            return f, 4 * math.pi / 3 * f, math.sqrt(2 * kappa)
        pair = (nu, lam) if geo == "1d-x" else (gam, nu)
        names = "nu = lambda" if geo == "1d-x" else "gamma = nu"
        if pair[0] <= 0 or not math.isclose(pair[0], pair[1], rel_tol=1e-12):
            raise ValueError(f"geometry {geo!r} needs an axially symmetric transverse trap "
                             f"({names} > 0), got trap = {self._trap!r}")
        kappa = pair[0]
        return kappa / (2 * math.pi), 2 * kappa / 3, math.sqrt(2 * kappa)

    # ------------------------------------------------------------ properties
    @property
    def geometry(self) -> str:
        """Dimension and dipole orientation (read-only)."""
        return self._geometry

    @property
    def axes(self) -> Tuple[str, ...]:
        """Names of the solver axes (read-only)."""
        return self._axes

    @property
    def shape(self) -> Tuple[int, ...]:
        """Grid shape (solver axes; read-only)."""
        return self._shape

    @property
    def ndim(self) -> int:
        """Number of solver axes."""
        return len(self._shape)

    @property
    def spacing(self) -> Tuple[float, ...]:
        """Grid spacing per solver axis (read-only)."""
        return self._spacing

    @property
    def coords(self) -> Tuple[np.ndarray, ...]:
        """Grid coordinates per solver axis, ``x_i = (i - n/2) h`` (new arrays)."""
        return tuple((np.arange(n) - n // 2) * h for n, h in zip(self._shape, self._spacing))

    @property
    def trap(self) -> Tuple[float, float, float]:
        """Trap frequencies ``(gamma, nu, lambda)`` (read-only)."""
        return self._trap

    @property
    def option(self) -> int:
        """Rescaling of time, 1 or 2 (read-only)."""
        return self._option

    @property
    def cutoff(self) -> Optional[float]:
        """Spherical cutoff of the 3D kernel, or None (read-only)."""
        return self._cutoff

    @property
    def dtype(self) -> np.dtype:
        """Precision of the state (read-only)."""
        return self._dtype

    @property
    def backend(self) -> str:
        """``"cpu"`` or ``"cuda"`` (read-only)."""
        return self._backend

    @property
    def fft_effort(self) -> str:
        """FFTW planning effort the solver was made with (read-only)."""
        return self._fft_effort

    @property
    def frames(self) -> Optional[runner.Frames]:
        """Snapshots of the last :meth:`imaginary_time` / :meth:`real_time` call
        made with ``frames=`` (None otherwise); after an interrupted call, the
        snapshots taken before the interrupt."""
        return self._frames

    @property
    def g(self) -> float:
        """Contact coefficient of the 3D equation (settable; the next step uses it)."""
        return self._g

    @g.setter
    def g(self, value: float) -> None:
        v = _real("g", value)
        self._solver.set_couplings(v * self._fc, self._gdd * self._fd)
        self._g = v

    @property
    def gdd(self) -> float:
        """Dipolar coefficient of the 3D equation (settable; the next step uses it).

        Setting it nonzero on a solver made without the dipolar term
        builds the FFT buffers and plans (memory checked first).
        """
        return self._gdd

    @gdd.setter
    def gdd(self, value: float) -> None:
        v = _real("gdd", value)
        if v != 0 and not self._dipolar:
            self._check_even()
            parts = memory_parts(self._shape, self._dtype, True, self._backend, self._threads())
            base = memory_parts(self._shape, self._dtype, False, self._backend, self._threads())
            extra = {w: {k: b for k, b in parts[w].items() if k not in base[w]}
                     for w in ("solver", "host")}
            self._require_memory(extra, dipolar=True)
        self._solver.set_couplings(self._g * self._fc, v * self._fd)
        if v != 0:
            self._dipolar = True
        self._gdd = v

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
    def psi(self) -> np.ndarray:
        """A copy of the state (complex, the solver's precision); assigning copies in."""
        return self._solver.get_state()

    @psi.setter
    def psi(self, value: Any) -> None:
        arr = np.asarray(value)
        if arr.dtype.kind not in "fc":
            raise TypeError(f"psi must be a float or complex array, got dtype {arr.dtype}")
        if arr.shape != self._shape:
            raise ValueError(f"psi must have shape {self._shape}, got {arr.shape}")
        real = np.float32 if self._dtype == np.complex64 else np.float64
        if arr.dtype.kind == "c" and not np.any(arr.imag):
            arr = arr.real
        arr = np.ascontiguousarray(arr, dtype=real if arr.dtype.kind == "f" else self._dtype)
        self._solver.set_state(arr)

    @property
    def is_real(self) -> bool:
        """True while the state is stored real (imaginary time in real arithmetic)."""
        return bool(self._solver.is_real())

    @property
    def V(self) -> Optional[np.ndarray]:
        """A copy of the static extra potential (None when absent); settable."""
        return None if self._V is None else self._V.copy()

    @V.setter
    def V(self, value: Any) -> None:
        if value is None:
            self._solver.set_potential(None)
            self._V = None
            return
        arr = self._own_potential(value)
        if self._V is None:  # the C core allocates its copy now
            self._require_memory({"solver": {"potential V": arr.nbytes}, "host": {}}, V=True)
        self._solver.set_potential(arr)
        self._V = arr

    @property
    def obstacle(self) -> Optional[Obstacle]:
        """The moving beam (None when absent); settable."""
        return self._obstacle

    @obstacle.setter
    def obstacle(self, ob: Optional[Obstacle]) -> None:
        if ob is None:
            self._solver.set_obstacle(None)
            self._obstacle = None
            return
        ob, args = self._obstacle_tuple(ob)
        self._solver.set_obstacle(args)
        self._obstacle = ob

    def _obstacle_tuple(self, ob: Any) -> Tuple[Obstacle, tuple]:
        """Check `ob` against the geometry; return it and the C arguments."""
        if not isinstance(ob, Obstacle):
            raise TypeError(f"obstacle must be an nlsepy.Obstacle, got {type(ob).__name__}")
        for name in ("V0", "sigma", "velocity", "start"):
            _real(f"obstacle.{name}", getattr(ob, name), positive=(name == "sigma"))
        for name in ("t_move", "t_off"):
            v = getattr(ob, name)
            if isinstance(v, bool) or not isinstance(v, (Real, np.floating, np.integer)) \
                    or math.isnan(v) or v < 0:
                raise ValueError(f"obstacle.{name} must be >= 0 (inf allowed), got {v!r}")
        if not isinstance(ob.move_axis, str) or ob.move_axis not in self._axes:
            raise ValueError(f"obstacle.move_axis must be one of {self._axes}, got "
                             f"{ob.move_axis!r}")
        beam = ob.beam_axis if self.ndim == 3 else None
        if beam is not None and (not isinstance(beam, str) or beam not in self._axes
                                 or beam == ob.move_axis):
            raise ValueError(f"obstacle.beam_axis must be None or an axis of {self._axes} other "
                             f"than move_axis, got {beam!r}")
        return ob, (float(ob.V0), float(ob.sigma), float(ob.velocity), float(ob.start),
                    float(ob.t_move), float(ob.t_off),
                    -1 if beam is None else self._axes.index(beam),
                    self._axes.index(ob.move_axis))

    @property
    def t(self) -> float:
        """Real time (imaginary-time steps leave it unchanged; read-only)."""
        return self._t_base + self._k * self._solver_dt

    @property
    def dt(self) -> float:
        """Time step (settable; the next step uses it)."""
        return self._dt

    @dt.setter
    def dt(self, value: float) -> None:
        self._dt = _real("dt", value, positive=True)

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
        n = int(np.prod(self._shape))
        c = _COST[self._backend]
        sec = c["fixed"] + n * c["point"]
        if self._dipolar and self._gdd != 0:
            sec += c["fft_fixed"] * min(1.0, n / 1024) + n * c["fft_point_log2"] * math.log2(n)
        return int(max(1, min(10 ** 6, BLOCK_SECONDS // sec)))

    # --------------------------------------------------------------- stepping
    def _use_dt(self, dt: float) -> None:
        if dt != self._solver_dt:
            self._t_base, self._k = self.t, 0
            self._solver.set_dt(dt)
            self._solver_dt = dt

    def _run(self, mode: str, n: int, dt: float, ramp: bool = False,
             on_block: Optional[Callable[[int], Any]] = None,
             record: Optional[Tuple[int, int, List[np.ndarray]]] = None) -> None:
        """`n` steps of `dt` in `mode`, in blocks of :attr:`block_steps`, each
        booked before the next; SIGINT raises KeyboardInterrupt between blocks.
        `record` ``(every, phase, rows)``: each block's C call also records
        the moments of the steps whose count ``phase + k`` (k = 1 .. n) is a
        multiple of `every`, appended to `rows` (see :meth:`_steps_recording`)."""
        self._use_dt(dt)
        self._last_seconds = 0.0
        if n == 0:
            return
        code = _MODES[mode]
        g, gdd = self.g_eff, self.gdd_eff
        dg = dgdd = 0.0
        if ramp:
            dg, dgdd = g / n, gdd / n
        block = self.block_steps
        left = [n]

        def step(m: int) -> Tuple[int, bool]:
            if record is None:
                done, blew_up = self._solver.step(code, m, self.t, dg, dgdd)
            else:
                every, phase, rows = record
                done, blew_up, part = self._solver.step_record(
                    code, m, self.t, dg, dgdd, every, (phase + n - left[0]) % every)
                if not blew_up:
                    rows.append(part)
            self._last_seconds += float(self._solver.last_step_seconds())
            return done, blew_up

        def work(k: int, flag: Any) -> None:
            for _ in range(k):
                if self._stop_now(flag) or left[0] <= 0:
                    return
                m = min(block, left[0])
                done, blew_up = step(m)
                if blew_up:  # the C core went back to the start of this block
                    raise self._blowup(mode, n, n - left[0], int(done), m, dt)
                self._steps[mode] += m
                if mode == "real":
                    self._k += m
                left[0] -= m
                if on_block is not None:
                    on_block(m)
            self._stop_now(flag)

        with _guard.deferred_sigint() as flag:
            if ramp:
                self._solver.set_couplings(0.0, 0.0)
            try:
                _guard.chunked(-(-n // block), lambda k: work(k, flag))
            finally:
                if ramp:
                    self._solver.set_couplings(g, gdd)

    def _can_record(self) -> bool:
        """Whether the stepping calls can record moments (:meth:`_steps_recording`)."""
        return hasattr(self._solver, "step_record")

    def _steps_recording(self, mode: str, steps: int, every: int, phase: int = 0,
                         progress: bool = False) -> np.ndarray:
        """`steps` steps of :attr:`dt` in `mode` that record the state's
        moments after the steps whose count ``phase + k`` (k = 1 .. steps) is
        a multiple of `every`, from the pass that ends each step (from what it
        leaves in cache: no further pass through memory).

        Parameters
        ----------
        mode : {"imaginary", "real"}
            The kind of steps.
        steps : int
            Number of steps (>= 0).
        every : int
            Record every that many steps (>= 1).
        phase : int, optional
            Steps counted before the first one (``0 <= phase < every``).
        progress : bool, optional
            tqdm progress bar.

        Returns
        -------
        numpy.ndarray
            float64 rows ``(norm, <x_a^2> of each solver axis)``, one per
            recorded step, in order: the ``norm`` and ``x2`` of
            :meth:`observables` had the call stopped after that step (equal
            to round-off; the same Simpson sums in another order).  In
            imaginary time those of the normalised state (norm 1).
        """
        if mode not in _MODES:
            raise ValueError(f"mode must be 'imaginary' or 'real', got {mode!r}")
        steps = _count("steps", steps)
        every = _count("every", every, 1)
        phase = _count("phase", phase)
        if phase >= every:
            raise ValueError(f"phase must be below every = {every}, got {phase}")
        if not self._can_record():
            raise NotImplementedError(f"{type(self).__name__} does not record moments in its "
                                      f"stepping calls; step and call observables() instead")
        rows: List[np.ndarray] = []
        bar = runner._progress_bar(progress, steps)
        try:
            self._run(mode, steps, self._dt, on_block=None if bar is None else bar.update,
                      record=(every, phase, rows))
        finally:
            if bar is not None:
                bar.close()
        out = np.concatenate(rows) if rows else np.zeros((0, 4))
        return out[:, : 1 + self.ndim]

    def _stop_now(self, flag: Any) -> bool:
        """Whether Ctrl-C came (between two blocks of steps)."""
        return bool(flag.hit)

    def _wrap_callback(self, callback: Optional[Callable]) -> Optional[Callable]:
        """The callback a stepping call or run() makes after each chunk."""
        return callback

    def _blowup(self, mode: str, n: int, before: int, done: int, m: int,
                dt: float) -> BlowUpError:
        bad = self._steps[mode] + done + 1
        t_bad = self.t + (done + 1) * dt if mode == "real" else self.t
        return BlowUpError(
            f"the state became non-finite in {mode}-time step {before + done + 1} of {n} "
            f"(t = {t_bad:g}); the solver went back to the last checked state, after "
            f"{self._steps[mode]} {mode}-time steps (t = {self.t:g}). Check g, gdd and the grid "
            f"(collapse), or reduce dt (now {dt:g}).",
            step=bad, t=t_bad, last_good=(self.t, self.psi))

    def _chunks(self, mode: str, steps: int, frames: Optional[int], callback: Optional[Callable],
                progress: bool, ramp: bool, output: Any = None) -> Optional[runner.Frames]:
        steps = _count("steps", steps)
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be callable, got {type(callback).__name__}")
        callback = self._wrap_callback(callback)
        nchunks = 1 if frames is None else _count("frames", frames, 1)
        if steps and nchunks > steps:
            raise ValueError(f"frames={nchunks} exceeds steps={steps}")
        if ramp and nchunks > 1:
            raise ValueError("ramp=True runs in one chunk; leave frames at None")
        path = None if output is None else runner._check_output(self, output, None)
        out = None
        if frames is not None:
            self._require_frames(nchunks + 1)
            out = runner.Frames(self._frame_grid())
        bar = runner._progress_bar(progress, steps)
        bounds = runner.chunk_bounds(steps, nchunks)
        rec = None
        done = False
        with _guard.deferred_sigint():
            try:
                if out is not None:
                    out.append(self.t, self.psi)
                if path is not None:
                    from .._hdf5 import Recorder
                    rec = Recorder(self, path, time=mode)
                    rec.frame(self._record_at(mode), out._s[-1] if out is not None else self.psi)
                for j in range(nchunks):
                    n = bounds[j + 1] - bounds[j]
                    self._run(mode, n, self._dt, ramp,
                              on_block=None if bar is None else bar.update)
                    if out is not None:
                        out.append(self.t, self.psi)
                    if rec is not None:
                        rec.frame(self._record_at(mode),
                                  out._s[-1] if out is not None else self.psi)
                    if callback is not None:
                        try:
                            callback(self)
                        except StopIteration:
                            break
                done = True
            finally:
                self._frames = out
                if bar is not None:
                    bar.close()
                if rec is not None:
                    runner._close_output(rec, done)
        return out

    def _record_at(self, mode: str) -> Any:
        """A run file's frame coordinate: t in real time, the step count in imaginary time."""
        return self.t if mode == "real" else int(self._steps["imaginary"])

    def _require_frames(self, count: int) -> None:
        """MemoryError when `count` host snapshots of the state will not fit."""
        rs = 4 if self._dtype == np.complex64 else 8
        nbytes = count * 2 * int(np.prod(self._shape)) * rs
        _guard.require_memory(nbytes, f"{self._what()} keeping {count} frames of the state "
                                      f"[{_guard.format_bytes(nbytes)}]")

    def imaginary_time(self, steps: int, frames: Optional[int] = None,
                       callback: Optional[Callable] = None, progress: bool = False,
                       ramp: bool = False, output: Any = None) -> "DipolarGPE":
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
            (DBEC-GP's NSTP stage).
        output : path-like, optional
            Stream the state before the call and after each chunk, with the
            :meth:`observables`, into this HDF5 file (see :meth:`run`); in
            imaginary time the frames' axis is ``step`` (imaginary-time
            steps taken), in real time ``t``.

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
        """
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

    # runner protocol (real time)
    def _plan(self, t_end: float) -> Tuple[int, float]:
        return runner.plan_steps(self.t, t_end, self._dt)

    def _advance(self, n: int, dt: float, t_final: Optional[float] = None) -> None:
        """`n` real-time steps of `dt`, booked block by block; `t_final` (the
        run's end, exact) replaces the summed time only once all `n` are done."""
        self._run("real", n, dt)
        if t_final is not None:
            self._t_base, self._k = float(t_final), 0

    def _snapshot(self) -> np.ndarray:
        return self.psi

    def _frame_grid(self) -> runner.FrameGrid:
        """Axes, coordinates (this rank's rows when distributed) and units of the frames."""
        part = getattr(self, "local_slice", (slice(None),) * self.ndim)
        return runner.FrameGrid(axes=self.axes,
                                coords=tuple(x[s] for x, s in zip(self.coords, part)),
                                length="oscillator lengths", time=f"units of {self.option}/ω",
                                model="DipolarGPE")

    def run(self, t_end: float, frames: int = 10, callback: Optional[Callable] = None,
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
            read back by :func:`nlsepy.open_run`.  Distributed: rank 0
            gathers each frame (``gather``) and writes the file with
            h5py (without MPI).

        Returns
        -------
        Frames
            ``(t, psi)`` snapshots.
        """
        if isinstance(frames, (int, np.integer)) and not isinstance(frames, bool) and frames >= 1:
            self._require_frames(int(frames) + 1)
        if callback is not None and callable(callback):
            callback = self._wrap_callback(callback)
        return runner.run(self, t_end, frames=frames, callback=callback, progress=progress,
                          checkpoint=checkpoint, output=output)

    def _record_header(self) -> Any:
        """What a run file holds besides the frames (distributed: every rank,
        with its rows of V as a slab, nothing gathered)."""
        from .._hdf5 import RunHeader
        V = self._V
        slabs = {} if getattr(self, "_comm", None) is None or V is None else {"V": V}
        ob = self._obstacle
        params: Dict[str, Any] = {
            "shape": self._shape, "spacing": self._spacing, "dt": self._dt, "g": self._g,
            "gdd": self._gdd, "trap": self._trap, "cutoff": self._cutoff,
            "geometry": self._geometry, "axes": self._axes, "option": self._option,
            "dtype": self._dtype.name, "dipolar": self._dipolar, "fft_effort": self._fft_effort,
            "g_eff": self.g_eff, "gdd_eff": self.gdd_eff, "obstacle": ob is not None}
        if not slabs:
            params["V"] = V
        if ob is not None:
            params.update({f"obstacle_{k}": getattr(ob, k) for k in (
                "V0", "sigma", "velocity", "start", "t_move", "t_off", "move_axis",
                "beam_axis")})
        d = self.ndim
        length = "l = sqrt(hbar / (m omega))"
        coords = {a: ((a,), c, length, f"grid position {a}_i = (i - n/2) h_{a}")
                  for a, c in zip(self._axes, self.coords)}
        scalars = ("norm", "norm_sum", "mu", "energy", "mu_dbec", "energy_dbec") + \
            tuple(f"{a}2" for a in self._axes) + ("r_rms", "psi0sq", "steps_imaginary",
                                                  "steps_real")
        energy = "hbar omega"
        var_units = {"t": f"1 / ({self._option} omega)", "step": "",
                     "psi": f"l^(-{d}/2)", "norm": "", "norm_sum": "", "mu": energy,
                     "energy": energy, "mu_dbec": energy, "energy_dbec": energy,
                     "r_rms": "l", "psi0sq": f"l^(-{d})", "steps_imaginary": "",
                     "steps_real": ""}
        var_units.update({f"{a}2": "l^2" for a in self._axes})
        long_names = {"t": "real time (the solver's t = option * omega * t_physical)",
                      "step": "imaginary-time steps taken", "psi": "the state psi",
                      "norm": "norm (Simpson)", "norm_sum": "sum |psi|^2 dV",
                      "mu": "chemical potential", "energy": "energy per atom",
                      "mu_dbec": "chemical potential as DBEC-GP's real-time programs print it",
                      "energy_dbec": "energy as DBEC-GP's real-time programs print it",
                      "r_rms": "root mean square radius", "psi0sq": "|psi|^2 at the centre",
                      "steps_imaginary": "imaginary-time steps since the solver was made",
                      "steps_real": "real-time steps since the solver was made"}
        long_names.update({f"{a}2": f"<{a}^2>" for a in self._axes})
        return RunHeader(
            model=_MODEL, parameters=params, backend=self._backend, slabs=slabs,
            units=(f"trap units of the reference frequency omega: lengths in {length}, "
                   f"energies in hbar omega, time t in 1 / (option omega) with option = "
                   f"{self._option} (nl.units.BEC converts)"),
            coords=coords, dims={"psi": self._axes, **{k: () for k in scalars}},
            var_units=var_units, long_names=long_names)

    def _record_scalars(self) -> Dict[str, Any]:
        """The series a run file keeps per frame: :meth:`observables` and the
        step counters (collective when distributed)."""
        o = self.observables()
        out = {k: float(o[k]) for k in ("norm", "norm_sum", "mu", "energy", "mu_dbec",
                                        "energy_dbec")}
        out.update({f"{a}2": float(v) for a, v in zip(self._axes, o["x2"])})
        out.update(r_rms=float(o["r_rms"]), psi0sq=float(o["psi0sq"]),
                   steps_imaginary=int(self._steps["imaginary"]),
                   steps_real=int(self._steps["real"]))
        return out

    # ------------------------------------------------------------ observables
    def observables(self) -> Dict[str, Any]:
        """Norm, chemical potential, energy, sizes and central density (section 2.4).

        Integrals use the composite Simpson rule and derivatives the
        five-point formula, as DBEC-GP; ``mu`` and ``energy`` are in units of
        the reference frequency (divided by :attr:`option`), the quantities
        DBEC-GP prints.  In 2D and 1D they are those of the effective
        equation (without the transverse zero-point energy).

        Returns
        -------
        dict
            ``norm`` (Simpson), ``norm_sum`` (``sum |psi|^2 dV``, what the
            Crank-Nicolson steps conserve exactly), ``mu``, ``energy``,
            ``x2`` (<x_a^2> per solver axis), ``rms`` (square roots),
            ``r_rms``, ``psi0sq`` (``|psi|^2`` at the grid centre), ``t``, and
            ``mu_dbec``, ``energy_dbec``: the values DBEC-GP's real-time
            programs print, whose kinetic term is that of ``|psi|`` (it
            leaves out the flow energy ``int |psi|^2 |grad phase|^2``; equal
            to ``mu``, ``energy`` for a real state).
        """
        o = self._solver.observe(self.t)
        x2 = tuple(o["x2"][: self.ndim])
        flow = o["kinetic"] - o["kinetic_modulus"]
        return {"norm": o["norm"], "norm_sum": o["norm_sum"], "mu": o["mu"] / self.option,
                "energy": o["energy"] / self.option,
                "mu_dbec": (o["mu"] - flow) / self.option,
                "energy_dbec": (o["energy"] - flow) / self.option, "x2": x2,
                "rms": tuple(math.sqrt(max(v, 0.0)) for v in x2),
                "r_rms": math.sqrt(max(sum(x2), 0.0)), "psi0sq": o["psi0sq"], "t": self.t}

    def density(self, keep: Optional[Sequence[str]] = None) -> np.ndarray:
        """``|psi|^2``, or its integral (Simpson) over the axes not in `keep` (eq. 2.59).

        Parameters
        ----------
        keep : sequence of str or None, optional
            Axis names to keep, e.g. ``("x",)`` for n(x) or ``("x", "y")``
            for n(x, y).  None: the full density.

        Returns
        -------
        numpy.ndarray
            float64 array over the kept axes (in grid order).
        """
        if keep is None:
            keep = self.axes
        if isinstance(keep, str):
            keep = (keep,)
        mask = 0
        for a in keep:
            if a not in self.axes:
                raise ValueError(f"keep must name axes of {self.axes}, got {a!r}")
            mask |= 1 << self.axes.index(a)
        if mask == (1 << self.ndim) - 1:
            p = self.psi
            return (p.real.astype(np.float64) ** 2 + p.imag.astype(np.float64) ** 2)
        return self._solver.density(mask)

    def phase_slice(self, axis: str, index: Optional[int] = None) -> np.ndarray:
        """arg(psi) on the slice ``axis = index`` (default: the centre, x = 0).

        Parameters
        ----------
        axis : str
            Axis name held fixed.
        index : int, optional
            Grid index along `axis` (default ``n // 2``).

        Returns
        -------
        numpy.ndarray
            Phase in (-pi, pi] over the other axes.
        """
        if axis not in self.axes:
            raise ValueError(f"axis must be one of {self.axes}, got {axis!r}")
        q = self.axes.index(axis)
        index = self._shape[q] // 2 if index is None else _count("index", index)
        return self._solver.phase_slice(q, index)

    def plot(self, **kwargs: Any) -> Any:
        """Draw the current state: densities integrated along each axis, the
        phase; needs matplotlib (``pip install 'nlsepy[plot]'``).

        Parameters
        ----------
        **kwargs
            ``fig``, ``ax`` (the integrated densities only), ``path``
            (save), ``dpi``, ``title``: see :func:`nlsepy.plot.dipolar`.

        Returns
        -------
        matplotlib.figure.Figure
        """
        from .. import plot
        return plot.dipolar(self, **kwargs)

    def dipolar_potential(self) -> np.ndarray:
        """``V_dd * |psi|^2`` (the kernel of the geometry, without gdd) on the grid."""
        return self._solver.dipolar_potential()

    def potential(self, t: Optional[float] = None) -> np.ndarray:
        """The total external potential V(r, t) (trap, V, obstacle) in equation units."""
        return self._solver.potential(self.t if t is None else _real("t", t))

    def kernel(self) -> np.ndarray:
        """The dipolar kernel on the real-to-complex frequency grid."""
        return self._solver.kernel()

    def bytes_per_step(self, mode: str = "real") -> float:
        """Bytes one step moves through memory (the backend's traffic model), for `mode`."""
        if mode not in _MODES:
            raise ValueError(f"mode must be 'imaginary' or 'real', got {mode!r}")
        return self._solver.bytes_per_point_step(_MODES[mode]) * float(np.prod(self._shape))

    @property
    def memory_bytes(self) -> int:
        """Bytes of memory the solver holds: device memory on ``backend="cuda"``.

        Counts the state, the backup of the state a step call keeps (to
        restore it on a blow-up), the density/FFT buffer, the kernel, the
        FFT plans' work areas, the user potential and the tables.
        """
        return int(self._solver.memory_bytes())

    @property
    def last_step_seconds(self) -> float:
        """Duration of the steps of the last stepping call, in seconds.

        The sum over the blocks (:attr:`block_steps`, one backend call
        each) of :meth:`real_time`, :meth:`imaginary_time` or one frame of
        :meth:`run`, each measured by the backend: CUDA events around the
        steps on the device, the wall clock on the CPU.  Observables,
        frames and callbacks between blocks are not included.
        """
        return self._last_seconds

    # ------------------------------------------------------------ checkpoints
    _KEYS = {
        "psi": _guard.Key("array", "fc", ndim=(1, 2, 3)),
        "t": _guard.Key("float"),
        "t_base": _guard.Key("float"),
        "t_steps": _guard.Key("int"),
        "t_dt": _guard.Key("float"),
        "steps_imaginary": _guard.Key("int"),
        "steps_real": _guard.Key("int"),
        "shape": _guard.Key("array", "iu", ndim=(1,)),
        "spacing": _guard.Key("array", "f", ndim=(1,)),
        "dt": _guard.Key("float"),
        "g": _guard.Key("float"),
        "gdd": _guard.Key("float"),
        "trap": _guard.Key("array", "f", ndim=(1,)),
        "cutoff": _guard.Key("float", optional=True),
        "geometry": _guard.Key("str", choices=tuple(GEOMETRIES)),
        "option": _guard.Key("int"),
        "dipolar": _guard.Key("bool"),
        "fft_effort": _guard.Key("str", choices=tuple(_FFT_EFFORT)),
        "dtype": _guard.Key("str", choices=("complex64", "complex128")),
        "V": _guard.Key("array", "f", ndim=(1, 2, 3), optional=True),
        "obstacle": _guard.Key("array", "f", ndim=(1,), finite=False, optional=True),
        "obstacle_move_axis": _guard.Key("str", optional=True),
        "obstacle_beam_axis": _guard.Key("str", optional=True),
    }

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Write the state, the parameters and the counters to a checkpoint, whole or not at all.

        Everything :meth:`load` needs to go on exactly as this solver would:
        the state (real while :attr:`is_real`), the time and the step
        counters, every constructor parameter, ``V`` and the obstacle.  The
        file is an ``.npz`` of plain arrays with a format tag, version and
        model name (``nlsepy._guard.save_checkpoint``); its ``psi`` entry
        is the state.

        Parameters
        ----------
        path : path-like
            Destination.
        """
        _guard.save_checkpoint(path, _MODEL, **self._checkpoint_fields())

    def _checkpoint_fields(self) -> Dict[str, Any]:
        """Every entry of a checkpoint of this solver (``psi``, ``V``: what this process holds)."""
        psi = self.psi
        fields: Dict[str, Any] = dict(
            psi=psi.real if self.is_real else psi, t=self.t, t_base=self._t_base,
            t_steps=self._k, t_dt=self._solver_dt, steps_imaginary=self._steps["imaginary"],
            steps_real=self._steps["real"], shape=np.asarray(self._shape, dtype=np.int64),
            spacing=np.asarray(self._spacing, dtype=np.float64), dt=self._dt, g=self._g,
            gdd=self._gdd, trap=np.asarray(self._trap, dtype=np.float64),
            geometry=self._geometry, option=self._option, dipolar=self._dipolar,
            fft_effort=self._fft_effort, dtype=self._dtype.name)
        if self._cutoff is not None:
            fields["cutoff"] = self._cutoff
        if self._V is not None:
            fields["V"] = self._V
        ob = self._obstacle
        if ob is not None:
            fields["obstacle"] = np.array([ob.V0, ob.sigma, ob.velocity, ob.start, ob.t_move,
                                           ob.t_off], dtype=np.float64)
            fields["obstacle_move_axis"] = ob.move_axis
            fields["obstacle_beam_axis"] = "" if ob.beam_axis is None else ob.beam_axis
        return fields

    @classmethod
    def load(cls, path: Union[str, os.PathLike], backend: str = "auto", comm: Any = None,
             **overrides: Any) -> "DipolarGPE":
        """A solver at the state, time and step counts of a file written by :meth:`save`.

        Without overrides the new solver continues exactly as the saved one
        would have (same parameters, ``V``, obstacle, clock and counters).
        A distributed checkpoint (the index file a solver with ``comm=``
        writes, beside its per-rank parts) loads with any number of ranks,
        or in one process without `comm`; a single-process checkpoint loads
        with `comm` too (every rank reads its rows).

        Parameters
        ----------
        path : path-like
            File from :meth:`save`.
        backend : str, optional
            Backend of the new solver.
        comm : mpi4py.MPI.Intracomm, optional
            Load into a distributed solver over these ranks (collective).
        **overrides
            Constructor arguments to change (e.g. ``dt``, ``g``, ``trap``,
            ``obstacle=None``).

        Returns
        -------
        DipolarGPE

        Raises
        ------
        FileNotFoundError
            No such file.
        ValueError
            The file is not a whole DipolarGPE checkpoint (empty, truncated,
            another kind of file, another model's checkpoint), or an entry is
            missing, of the wrong kind, shape or dtype, not finite, or not a
            valid parameter; the message names the file and the problem.
        """
        spath = os.fspath(path)
        if comm is not None:
            from .distributed import DistributedDipolarGPE
            return DistributedDipolarGPE._load(spath, backend, comm, overrides)
        d = cls._read_checkpoint(spath, None)
        return cls._from_checkpoint(spath, d, dict(backend=backend), overrides)

    @classmethod
    def _read_checkpoint(cls, spath: str, rows: Optional[Tuple[int, int]]) -> Dict[str, Any]:
        """The entries of a checkpoint, ``psi`` and ``V`` whole or (distributed
        checkpoints) the global x rows ``rows = (start, count)``."""
        from .. import _dist
        if not _dist.is_parts_index(spath):
            return _guard.load_checkpoint(spath, _MODEL, cls._KEYS)
        keys = {k: v for k, v in cls._KEYS.items() if k not in ("psi", "V")}
        keys["has_V"] = _guard.Key("bool")
        head = _guard.load_checkpoint(spath, _MODEL, {"has_V": keys["has_V"]})
        slab_keys = {"psi": cls._KEYS["psi"]}
        if head["has_V"]:
            slab_keys["V"] = _guard.Key("array", "f", ndim=(1, 2, 3))
        d = _dist.load_parts(spath, _MODEL, keys, slab_keys, rows=rows)
        if tuple(d["global_shape"]) != tuple(int(n) for n in d["shape"]):
            raise ValueError(f"{spath}: the parts' grid {tuple(d['global_shape'])} is not the "
                             f"checkpoint's grid {tuple(int(n) for n in d['shape'])}")
        return d

    @classmethod
    def _checkpoint_kwargs(cls, spath: str, d: Dict[str, Any], overrides: Dict[str, Any],
                           rows: Optional[Tuple[int, int]] = None) -> Dict[str, Any]:
        """Checked constructor arguments from the entries `d` of a checkpoint
        (``psi`` and ``V`` of the global x rows ``rows = (start, count)`` when
        given), with `overrides`."""

        def bad(what: str) -> ValueError:
            return ValueError(f"{spath}: {what}")

        if "psi0" in overrides:
            raise TypeError(f"{spath} with ['psi0'] changed: the state comes from the "
                            f"checkpoint; assign gpe.psi after loading")
        shape = tuple(int(n) for n in d["shape"])
        psi = d["psi"]
        want = shape if rows is None else (rows[1],) + shape[1:]
        if psi.shape != want:
            raise bad(f"entry 'psi' has shape {psi.shape}, the checkpoint's grid is {shape}")
        real = np.float32 if d["dtype"] == "complex64" else np.float64
        if psi.dtype not in (np.dtype(real), np.dtype(d["dtype"])):
            raise bad(f"entry 'psi' has dtype {psi.dtype}, the checkpoint's dtype is {d['dtype']}")
        for name in ("steps_imaginary", "steps_real", "t_steps"):
            if d[name] < 0:
                raise bad(f"entry {name!r} must be >= 0, got {d[name]}")
        if not d["t_dt"] > 0:
            raise bad(f"entry 't_dt' must be > 0, got {d['t_dt']!r}")
        if len(d["trap"]) != 3:
            raise bad(f"entry 'trap' must hold 3 frequencies, got {len(d['trap'])}")
        kw: Dict[str, Any] = dict(
            shape=shape, spacing=tuple(float(h) for h in d["spacing"]), dt=d["dt"], g=d["g"],
            gdd=d["gdd"], trap=tuple(float(v) for v in d["trap"]), cutoff=d.get("cutoff"),
            geometry=d["geometry"], option=d["option"], V=d.get("V"), dtype=d["dtype"],
            dipolar=d["dipolar"], fft_effort=d["fft_effort"])
        if "obstacle" in d:
            v = d["obstacle"]
            if v.shape != (6,) or "obstacle_move_axis" not in d:
                raise bad("entry 'obstacle' must hold (V0, sigma, velocity, start, t_move, t_off) "
                          "with 'obstacle_move_axis' beside it")
            beam = d.get("obstacle_beam_axis", "")
            kw["obstacle"] = Obstacle(*(float(x) for x in v), move_axis=d["obstacle_move_axis"],
                                      beam_axis=beam or None)
        kw.update(overrides)
        kw["psi0"] = psi
        return kw

    @classmethod
    def _from_checkpoint(cls, spath: str, d: Dict[str, Any], extra: Dict[str, Any],
                         overrides: Dict[str, Any]) -> "DipolarGPE":
        """A solver from the entries `d` of a checkpoint, with constructor
        arguments `extra` and `overrides`, at the checkpoint's clock."""
        kw = cls._checkpoint_kwargs(spath, d, overrides)
        try:
            gpe = cls(**extra, **kw)
        except (ValueError, TypeError) as exc:
            if overrides:
                raise type(exc)(f"{spath} with {sorted(overrides)} changed: {exc}") from None
            raise ValueError(f"{spath}: holds invalid parameters: {exc}") from None
        gpe._restore_clock(d, overrides)
        return gpe

    def _restore_clock(self, d: Dict[str, Any], overrides: Dict[str, Any]) -> None:
        """The step counters and the clock of checkpoint entries `d`."""
        gpe, t = self, d["t"]
        gpe._steps = {"imaginary": d["steps_imaginary"], "real": d["steps_real"]}
        clock = d["t_base"] + d["t_steps"] * d["t_dt"]
        if "dt" not in overrides and clock == t:  # the saved clock, bit for bit
            if d["t_dt"] != gpe._solver_dt:
                gpe._solver.set_dt(d["t_dt"])
                gpe._solver_dt = d["t_dt"]
            gpe._t_base, gpe._k = d["t_base"], d["t_steps"]
        else:
            gpe._t_base, gpe._k = t, 0

    def __repr__(self) -> str:
        return (f"DipolarGPE(geometry={self._geometry!r}, shape={self._shape}, dt={self._dt:g}, "
                f"g={self._g:g}, gdd={self._gdd:g}, trap={self._trap}, option={self._option}, "
                f"t={self.t:g}, dtype={self._dtype.name}, backend={self._backend!r})")
