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
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from numbers import Real
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from .. import _backend, runner
from .._validate import complex_dtype as _complex_dtype
from .._validate import count as _count
from .._validate import potential as _potential
from .._validate import real as _real
from ..errors import BlowUpError

__all__ = ["DipolarGPE", "Obstacle", "GEOMETRIES"]

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
        Static extra potential on the grid (units of the equation).
    obstacle : Obstacle or None, optional
        Moving Gaussian beam.
    psi0 : array_like or None, optional
        Initial state; default the normalised Gaussian of the trap (the
        DBEC-GP start for imaginary time).  A real state runs imaginary time
        in real arithmetic.
    dtype : {numpy.complex64, numpy.complex128}, optional
        Precision.
    dipolar : bool or None, optional
        Keep the dipolar step (FFT plans, buffers).  Default: only when
        ``gdd != 0``; without it a step does no FFT at all.
    fft_effort : {"estimate", "measure", "patient"}, optional
        FFTW planning effort (plans are made once, at construction; the
        CUDA backend's cuFFT plans have no such choice).
    backend : {"auto", "cpu", "cuda"}, optional
        Where the state lives and the kernels run: ``"cpu"`` (C, OpenMP,
        FFTW), ``"cuda"`` (the GPU, cuFFT; the state stays in device memory
        between calls, ``memory_bytes`` says how much the solver holds) or
        ``"auto"``: the environment variable ``NLSEPY_BACKEND`` when set,
        else CUDA when a device is present, else the CPU.  Both backends run
        the same scheme and agree to 1e-10 relative in double precision.

    Examples
    --------
    >>> import nlsepy as nl
    >>> gpe = nl.DipolarGPE((48,), 0.25, 0.005, trap=(1.0, 1.0, 1.0), geometry="1d-x")
    >>> round(gpe.imaginary_time(2000).observables()["mu"], 3)
    0.5
    """

    def __init__(self, shape: Sequence[int], spacing: Union[float, Sequence[float]], dt: float,
                 g: float = 0.0, gdd: float = 0.0, trap: Sequence[float] = (1.0, 1.0, 1.0),
                 cutoff: Optional[float] = None, geometry: str = "3d", option: int = 2,
                 V: Optional[Any] = None, obstacle: Optional[Obstacle] = None,
                 psi0: Optional[Any] = None, dtype: Any = np.complex128,
                 dipolar: Optional[bool] = None, fft_effort: str = "estimate",
                 backend: str = "auto") -> None:
        if not isinstance(geometry, str) or geometry.lower() not in GEOMETRIES:
            raise ValueError(f"geometry must be one of {sorted(GEOMETRIES)}, got {geometry!r}")
        self.geometry = geometry.lower()
        code, self.axes = GEOMETRIES[self.geometry]
        nd = len(self.axes)
        shape = tuple(np.atleast_1d(np.asarray(shape)).tolist()) if not isinstance(shape, int) \
            else (shape,)
        if len(shape) != nd:
            raise ValueError(f"shape must have {nd} entries for geometry {self.geometry!r}, "
                             f"got {shape!r}")
        self._shape = tuple(_count(f"shape[{a}]", n, 4) for a, n in enumerate(shape))
        if np.ndim(spacing) == 0:
            spacing = (spacing,) * nd
        spacing = tuple(np.asarray(spacing, dtype=object).ravel().tolist())
        if len(spacing) != nd:
            raise ValueError(f"spacing must be a number or {nd} numbers, got {spacing!r}")
        self.spacing = tuple(_real(f"spacing[{a}]", h, positive=True) for a, h in enumerate(spacing))
        self._dt = _real("dt", dt, positive=True)
        if option not in (1, 2) or isinstance(option, bool):
            raise ValueError(f"option must be 1 or 2, got {option!r}")
        self.option = int(option)
        trap = tuple(trap) if not isinstance(trap, (str, bytes)) else trap
        if len(trap) != 3:
            raise ValueError(f"trap must be (gamma, nu, lambda), got {trap!r}")
        self.trap = tuple(_real(n, v, nonneg=True) for n, v in zip(("gamma", "nu", "lambda"), trap))
        self._g = _real("g", g)
        self._gdd = _real("gdd", gdd)
        self.cutoff = None if cutoff is None else _real("cutoff", cutoff, positive=True)
        dtype = _complex_dtype(dtype)
        self.dtype = dtype
        if not isinstance(fft_effort, str) or fft_effort not in _FFT_EFFORT:
            raise ValueError(f"fft_effort must be one of {sorted(_FFT_EFFORT)}, got {fft_effort!r}")
        self._fc, self._fd, kscale = self._reduction()
        use_dd = (self._gdd != 0) if dipolar is None else bool(dipolar)
        if not use_dd and self._gdd != 0:
            raise ValueError(f"dipolar=False needs gdd = 0, got gdd = {self._gdd!r}")
        if use_dd:
            odd = [a for a, n in enumerate(self._shape) if n % 2]
            if odd:
                raise ValueError(f"shape[{odd[0]}] = {self._shape[odd[0]]} must be even with the "
                                 f"dipolar term (x = 0 at index n/2 of a symmetric FFT box)")
        self.backend = _backend.resolve(backend, "DipolarGPE")
        core = _core()
        kin = 1.0 if self.option == 2 else 0.5
        coef = [(self.option / 2.0) * self.trap["xyz".index(a)] ** 2 for a in self.axes]
        self._solver = _backend.module(self.backend).Dipolar(
            code, self._shape, self.spacing, core.COMPLEX64 if dtype == np.complex64 else core.COMPLEX128,
            self._dt, kin, coef, self._g * self._fc, self._gdd * self._fd,
            0.0 if self.cutoff is None else self.cutoff, kscale, int(use_dd), _FFT_EFFORT[fft_effort])
        self._dipolar = use_dd
        self._t_base, self._k, self._solver_dt = 0.0, 0, self._dt
        self._steps = {"imaginary": 0, "real": 0}
        self._V = None
        self._obstacle = None
        self.frames: Optional[runner.Frames] = None
        if psi0 is not None:
            self.psi = psi0
        if V is not None:
            self.V = V
        if obstacle is not None:
            self.obstacle = obstacle

    # ------------------------------------------------------------ reduction
    def _reduction(self) -> Tuple[float, float, float]:
        """Factors turning the 3D g, gdd into the effective ones, and sqrt(2 kappa)."""
        gam, nu, lam = self.trap
        geo = self.geometry
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
                             f"({names} > 0), got trap = {self.trap!r}")
        kappa = pair[0]
        return kappa / (2 * math.pi), 2 * kappa / 3, math.sqrt(2 * kappa)

    # ------------------------------------------------------------ properties
    @property
    def shape(self) -> Tuple[int, ...]:
        """Grid shape (solver axes)."""
        return self._shape

    @property
    def ndim(self) -> int:
        """Number of solver axes."""
        return len(self._shape)

    @property
    def coords(self) -> Tuple[np.ndarray, ...]:
        """Grid coordinates per solver axis, ``x_i = (i - n/2) h``."""
        return tuple((np.arange(n) - n // 2) * h for n, h in zip(self._shape, self.spacing))

    @property
    def g(self) -> float:
        """Contact coefficient of the 3D equation."""
        return self._g

    @g.setter
    def g(self, value: float) -> None:
        self._g = _real("g", value)
        self._solver.set_couplings(self._g * self._fc, self._gdd * self._fd)

    @property
    def gdd(self) -> float:
        """Dipolar coefficient of the 3D equation."""
        return self._gdd

    @gdd.setter
    def gdd(self, value: float) -> None:
        v = _real("gdd", value)
        if v != 0 and not self._dipolar:
            odd = [a for a, n in enumerate(self._shape) if n % 2]
            if odd:
                raise ValueError(f"shape[{odd[0]}] = {self._shape[odd[0]]} must be even with "
                                 f"the dipolar term")
            self._dipolar = True
        self._gdd = v
        self._solver.set_couplings(self._g * self._fc, self._gdd * self._fd)

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
        """A copy of the state (complex, the solver's precision)."""
        return self._solver.get_state()

    @psi.setter
    def psi(self, value: Any) -> None:
        arr = np.asarray(value)
        if arr.dtype.kind not in "fc":
            raise TypeError(f"psi must be a float or complex array, got dtype {arr.dtype}")
        if arr.shape != self._shape:
            raise ValueError(f"psi must have shape {self._shape}, got {arr.shape}")
        real = np.float32 if self.dtype == np.complex64 else np.float64
        if arr.dtype.kind == "c" and not np.any(arr.imag):
            arr = arr.real
        arr = np.ascontiguousarray(arr, dtype=real if arr.dtype.kind == "f" else self.dtype)
        self._solver.set_state(arr)

    @property
    def is_real(self) -> bool:
        """True while the state is stored real (imaginary time in real arithmetic)."""
        return bool(self._solver.is_real())

    @property
    def V(self) -> Optional[np.ndarray]:
        """The static extra potential (None when absent)."""
        return None if self._V is None else self._V.copy()

    @V.setter
    def V(self, value: Any) -> None:
        if value is None:
            self._solver.set_potential(None)
            self._V = None
            return
        arr = _potential(value, self._shape, self.dtype)
        self._solver.set_potential(arr)
        self._V = arr

    @property
    def obstacle(self) -> Optional[Obstacle]:
        """The moving beam (None when absent)."""
        return self._obstacle

    @obstacle.setter
    def obstacle(self, ob: Optional[Obstacle]) -> None:
        if ob is None:
            self._solver.set_obstacle(None)
            self._obstacle = None
            return
        if not isinstance(ob, Obstacle):
            raise TypeError(f"obstacle must be an nlsepy.Obstacle, got {type(ob).__name__}")
        for name in ("V0", "sigma", "velocity", "start"):
            _real(f"obstacle.{name}", getattr(ob, name), positive=(name == "sigma"))
        for name in ("t_move", "t_off"):
            v = getattr(ob, name)
            if isinstance(v, bool) or not isinstance(v, (Real, np.floating)) or math.isnan(v) or v < 0:
                raise ValueError(f"obstacle.{name} must be >= 0 (inf allowed), got {v!r}")
        if ob.move_axis not in self.axes:
            raise ValueError(f"obstacle.move_axis must be one of {self.axes}, got {ob.move_axis!r}")
        beam = ob.beam_axis if self.ndim == 3 else None
        if beam is not None and (beam not in self.axes or beam == ob.move_axis):
            raise ValueError(f"obstacle.beam_axis must be None or an axis of {self.axes} other "
                             f"than move_axis, got {beam!r}")
        self._solver.set_obstacle((float(ob.V0), float(ob.sigma), float(ob.velocity),
                                   float(ob.start), float(ob.t_move), float(ob.t_off),
                                   -1 if beam is None else self.axes.index(beam),
                                   self.axes.index(ob.move_axis)))
        self._obstacle = ob

    @property
    def t(self) -> float:
        """Real time (imaginary-time steps leave it unchanged)."""
        return self._t_base + self._k * self._solver_dt

    @property
    def dt(self) -> float:
        """Time step."""
        return self._dt

    @dt.setter
    def dt(self, value: float) -> None:
        self._dt = _real("dt", value, positive=True)

    @property
    def steps(self) -> Dict[str, int]:
        """Steps taken so far, ``{"imaginary": n, "real": m}``."""
        return dict(self._steps)

    # --------------------------------------------------------------- stepping
    def _use_dt(self, dt: float) -> None:
        if dt != self._solver_dt:
            self._t_base, self._k = self.t, 0
            self._solver.set_dt(dt)
            self._solver_dt = dt

    def _run(self, mode: str, n: int, dt: float, ramp: bool = False) -> None:
        self._use_dt(dt)
        if n == 0:
            return
        g, gdd = self.g_eff, self.gdd_eff
        dg = dgdd = 0.0
        if ramp:
            self._solver.set_couplings(0.0, 0.0)
            dg, dgdd = g / n, gdd / n
        t0 = self.t
        done, blew_up = self._solver.step(_MODES[mode], int(n), t0, dg, dgdd)
        if ramp or blew_up:
            self._solver.set_couplings(g, gdd)
        self._steps[mode] += done
        if mode == "real":
            self._k += done
        if blew_up:
            raise BlowUpError(
                f"the state became non-finite in {mode}-time step {done + 1} of {n} "
                f"(t = {self.t:g}); the solver restored the state at the start of the call. "
                f"Check g, gdd and the grid (collapse), or reduce dt (now {dt:g}).",
                step=self._steps[mode] + 1, t=self.t, last_good=(self.t, self.psi))

    def _chunks(self, mode: str, steps: int, frames: Optional[int], callback: Optional[Callable],
                progress: bool, ramp: bool) -> Optional[runner.Frames]:
        steps = _count("steps", steps)
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be callable, got {type(callback).__name__}")
        nchunks = 1 if frames is None else _count("frames", frames, 1)
        if steps and nchunks > steps:
            raise ValueError(f"frames={nchunks} exceeds steps={steps}")
        if ramp and nchunks > 1:
            raise ValueError("ramp=True runs in one chunk; leave frames at None")
        out = None
        if frames is not None:
            out = runner.Frames()
            out.append(self.t, self.psi)
        bar = runner._progress_bar(progress, steps)
        bounds = runner.chunk_bounds(steps, nchunks)
        try:
            for j in range(nchunks):
                n = bounds[j + 1] - bounds[j]
                self._run(mode, n, self._dt, ramp)
                if out is not None:
                    out.append(self.t, self.psi)
                if bar is not None:
                    bar.update(n)
                if callback is not None:
                    try:
                        callback(self)
                    except StopIteration:
                        break
        finally:
            if bar is not None:
                bar.close()
        return out

    def imaginary_time(self, steps: int, frames: Optional[int] = None,
                       callback: Optional[Callable] = None, progress: bool = False,
                       ramp: bool = False) -> "DipolarGPE":
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

        Returns
        -------
        DipolarGPE
            ``self``.
        """
        self.frames = self._chunks("imaginary", steps, frames, callback, progress, ramp)
        return self

    def real_time(self, steps: int, frames: Optional[int] = None,
                  callback: Optional[Callable] = None, progress: bool = False,
                  ramp: bool = False) -> "DipolarGPE":
        """Propagate `steps` steps of :attr:`dt` in real time.

        Parameters are those of :meth:`imaginary_time`.

        Returns
        -------
        DipolarGPE
            ``self``.
        """
        self.frames = self._chunks("real", steps, frames, callback, progress, ramp)
        return self

    # runner protocol (real time)
    def _plan(self, t_end: float) -> Tuple[int, float]:
        return runner.plan_steps(self.t, t_end, self._dt)

    def _advance(self, n: int, dt: float, t_final: Optional[float] = None) -> None:
        self._run("real", n, dt)
        if t_final is not None:
            self._t_base, self._k = float(t_final), 0

    def _snapshot(self) -> np.ndarray:
        return self.psi

    def run(self, t_end: float, frames: int = 10, callback: Optional[Callable] = None,
            progress: bool = False, checkpoint: Optional[Union[str, os.PathLike]] = None
            ) -> runner.Frames:
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

        Returns
        -------
        Frames
            ``(t, psi)`` snapshots.
        """
        return runner.run(self, t_end, frames=frames, callback=callback, progress=progress,
                          checkpoint=checkpoint)

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
            ``norm`` (Simpson), ``norm_sum`` (sum |psi|^2 dV, what the
            Crank-Nicolson steps conserve exactly), ``mu``, ``energy``,
            ``x2`` (<x_a^2> per solver axis), ``rms`` (square roots),
            ``r_rms``, ``psi0sq`` (|psi|^2 at the grid centre), ``t``, and
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
        """|psi|^2, or its integral (Simpson) over the axes not in `keep` (eq. 2.59).

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

        Measured by the backend: CUDA events around the steps on the
        device, the wall clock on the CPU.  Observables, frames and
        callbacks between chunks are not included.
        """
        return float(self._solver.last_step_seconds())

    # ------------------------------------------------------------ checkpoints
    def _params(self) -> Dict[str, Any]:
        return dict(shape=self._shape, spacing=self.spacing, dt=self._dt, g=self._g,
                    gdd=self._gdd, trap=self.trap, cutoff=self.cutoff, geometry=self.geometry,
                    option=self.option, dtype=self.dtype, dipolar=self._dipolar)

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Write the state and parameters to an ``.npz`` file, whole or not at all.

        Parameters
        ----------
        path : path-like
            Destination.
        """
        p = self._params()
        psi = self.psi
        runner.atomic_savez(
            path, psi=psi.real if self.is_real else psi, t=self.t, shape=np.asarray(p["shape"]),
            spacing=np.asarray(p["spacing"]), dt=p["dt"], g=p["g"], gdd=p["gdd"],
            trap=np.asarray(p["trap"]), cutoff=-1.0 if p["cutoff"] is None else p["cutoff"],
            geometry=p["geometry"], option=p["option"], dipolar=p["dipolar"],
            V=self._V if self._V is not None else np.zeros(0))

    @classmethod
    def load(cls, path: Union[str, os.PathLike], backend: str = "auto", **overrides: Any
             ) -> "DipolarGPE":
        """A solver at the state and time of a file written by :meth:`save`.

        Parameters
        ----------
        path : path-like
            File from :meth:`save`.
        backend : str, optional
            Backend of the new solver.
        **overrides
            Constructor arguments to change (e.g. ``dt``, ``g``).

        Returns
        -------
        DipolarGPE
        """
        with np.load(path, allow_pickle=False) as d:
            psi = d["psi"]
            kw = dict(shape=tuple(int(n) for n in d["shape"]), spacing=tuple(d["spacing"]),
                      dt=float(d["dt"]), g=float(d["g"]), gdd=float(d["gdd"]),
                      trap=tuple(float(v) for v in d["trap"]),
                      cutoff=None if float(d["cutoff"]) < 0 else float(d["cutoff"]),
                      geometry=str(d["geometry"]), option=int(d["option"]),
                      V=d["V"] if d["V"].size else None,
                      dtype=np.complex64 if psi.dtype in (np.float32, np.complex64) else np.complex128,
                      dipolar=bool(d["dipolar"]))
            t = float(d["t"])
        kw.update(overrides)
        gpe = cls(psi0=psi, backend=backend, **kw)
        gpe._t_base = t
        return gpe

    def __repr__(self) -> str:
        return (f"DipolarGPE(geometry={self.geometry!r}, shape={self._shape}, dt={self._dt:g}, "
                f"g={self._g:g}, gdd={self._gdd:g}, trap={self.trap}, option={self.option}, "
                f"t={self.t:g}, dtype={self.dtype.name}, backend={self.backend!r})")
