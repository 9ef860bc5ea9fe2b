"""Axisymmetric Laplace solver of magnet design (``nl.CoaxialMagnet``).

The magnetostatic boundary-value problem of Madhubhashini's thesis (source
002, chapters 1-2): the scalar potential Phi (B = -mu0 grad Phi) between a
cylindrical magnet (radius r0, half-height z0) and a superconducting outer
cylinder (r1, z1) solves

    d2Phi/dr2 + (1/r) dPhi/dr + d2Phi/dz2 = 0                       (eq. 2.15)

with dPhi/dz = -B/mu0 on the magnet's cap, dPhi/dr = 0 on its side, on the
axis and on the outer cylinder, dPhi/dz = 0 on the outer cap and Phi = 0 on
the mid-plane outside the magnet (Table 1.1), discretised by the five-point
rows of Table 2.1.  The jump of Phi across the magnet's surface is the
stream function of the surface current that makes the field; equally spaced
contours of it give the winding (eq. 1.34).
"""

from __future__ import annotations

import math
import re
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..common import backend as _backend
from ..common import checks as _validate
from ..common import guard as _guard
from ..common.errors import BlowUpError
from ..common.params import Param, Replaceable, Sealed
from ..common.results import Results
from . import memory as _memory
from . import plot as _plot
from . import post

#: permeability of free space used throughout (4 pi 1e-7 H/m)
MU0 = 4e-7 * math.pi

#: solver names and the C core's codes
METHODS = {"jacobi": 0, "gauss-seidel": 1, "sor": 2, "rbsor": 3, "multigrid": 4, "mg-cg": 5}
#: methods with a relaxation factor
_RELAXED = ("sor", "rbsor")

class ConvergenceWarning(RuntimeWarning):
    """An iterative solve stopped at ``max_iter`` above its tolerance."""


def _later(exc: BlowUpError, done: int) -> BlowUpError:
    """`exc` of a call that started after `done` iterations, its iteration
    counted from the start of the solve."""
    msg = str(exc)
    m = re.search(r"at iteration (\d+)", msg)
    step = None
    if m:
        step = done + int(m.group(1))
        msg = msg[:m.start(1)] + str(step) + msg[m.end(1):]
    return BlowUpError(msg, step=step)


@dataclass
class MagnetSolution:
    """Result of :meth:`CoaxialMagnet.solve`.

    Attributes
    ----------
    phi : numpy.ndarray
        Phi on the ``(nr, nz)`` grid (``r = i dr``, ``z = j dz``), NaN inside
        the magnet.
    iterations : int
        Iterations taken.
    residual : float
        Final ``||r|| / ||f||`` (eq. 2.50).
    converged : bool
        Whether `residual` fell below the tolerance.
    history : numpy.ndarray
        ``||r|| / ||f||`` after each iteration.
    seconds : float
        Wall time of the solve call (with the multigrid hierarchy's setup).
    solve_seconds : float
        Time of the iterations alone, as the backend measured it (CUDA
        events on the device).
    method : str
        Solver used.
    omega : float or None
        Relaxation factor (SOR and red-black SOR).
    magnet : CoaxialMagnet
        The problem solved.
    interrupted : bool
        True for the partial result of a solve stopped by Ctrl-C
        (:attr:`CoaxialMagnet.partial_solution`): Phi, `iterations`,
        `history` and `residual` are those of the iterations done.
    """

    phi: np.ndarray
    iterations: int
    residual: float
    converged: bool
    history: np.ndarray
    seconds: float
    solve_seconds: float
    method: str
    omega: Optional[float]
    magnet: "CoaxialMagnet" = field(repr=False)
    interrupted: bool = False

    @property
    def updates_per_second(self) -> float:
        """Node updates per second (unknowns x iterations / seconds)."""
        return self.magnet.unknowns * self.iterations / max(self.solve_seconds, 1e-300)

    def _geom(self) -> Tuple[np.ndarray, float, float, float, float]:
        m = self.magnet
        return self.phi, m.dr, m.dz, m.r0, m.z0

    def delta_phi(self) -> Dict[str, Any]:
        """The jump of Phi across the magnet's side and cap (eq. 6.3, Figs 6.5, 6.6).

        Returns
        -------
        dict
            See :func:`nlsepy.magnet.post.delta_phi`: ``z``, ``side``
            (along the side), ``r``, ``cap`` (along the cap) and the
            surface path ``s``, ``path``.
        """
        return post.delta_phi(*self._geom(), B=self.magnet.B)

    def winding(self, n_turns: int) -> "post.Winding":
        """Wire positions of `n_turns` wires on the upper half: equally spaced
        levels of Delta Phi along the side and the cap (eqs. 1.34, 6.6)."""
        return post.winding(*self._geom(), n_turns, B=self.magnet.B)

    def field_inside(self, n_turns: int, z: Any = None, r: Any = None,
                     reference: str = "target") -> Dict[str, Any]:
        """Field of the `n_turns`-wire winding inside the magnet (eqs. 6.7, 6.8)
        and its normalized difference from B (Figs 6.15, 6.16)."""
        return post.field_inside(*self._geom(), self.magnet.B, n_turns, z=z, r=r,
                                        reference=reference)

    def homogeneity(self, n_turns: int, z_range: float = 0.2, reference: str = "target") -> float:
        """Largest ``|Bz - B| / |B|`` on the axis over ``|z| <= z_range`` for
        the `n_turns`-wire winding (Fig. 6.16: the middle 40 cm)."""
        return post.homogeneity(*self._geom(), self.magnet.B, n_turns, z_range=z_range,
                                       reference=reference)

    def plot(self, n_turns: Optional[int] = 10, **kwargs: Any) -> Any:
        """Phi over (r, z) with contour lines and the wires, and the winding
        (Delta Phi along the surface with its levels); needs matplotlib
        (``pip install 'nlsepy[plot]'``).

        Parameters
        ----------
        n_turns : int or None, optional
            Wires of the winding on the upper half; None draws none.
        **kwargs
            ``fig``, ``ax`` (Phi only, into this Axes), ``path`` (save),
            ``dpi``, ``levels``, ``full``, ``title``: see
            :func:`nlsepy.plot.magnet`.

        Returns
        -------
        matplotlib.figure.Figure
        """
        return _plot.magnet(self, n_turns=n_turns, **kwargs)


class CoaxialMagnet(Results, Sealed, Replaceable):
    """The magnet-design Laplace problem of source 002 on an r-z grid.

    Solvers: geometric multigrid (alone or preconditioning BiCGSTAB) and the
    source's Jacobi, Gauss-Seidel, SOR and red-black SOR with its optimal
    omega (Appendix A); results give Phi, the potential jump across the
    magnet, the winding, the field of the winding and its homogeneity.

    Parameters
    ----------
    r0, z0 : float
        Radius and half-height of the magnet (m).
    r1, z1 : float
        Radius and half-height of the outer cylinder (m), ``r0 < r1``,
        ``z0 < z1``.
    h : float or (float, float)
        Mesh spacing, or ``(dr, dz)``; every length must be a whole number
        of spacings (the magnet's edges lie on grid lines).
    B : float, optional
        Target field along z inside the magnet (T), default 1e-3.
    dtype : {numpy.float64, numpy.float32}, optional
        Precision of Phi and of the arithmetic.
    backend : {"auto", "cpu", "cuda"}, optional
        Where to solve: the CPU (C, OpenMP) or the GPU (every method; the
        row-order sweeps of ``"gauss-seidel"`` and ``"sor"`` run one
        anti-diagonal at a time there).  ``"auto"`` picks CUDA when
        ``nl.backends("CoaxialMagnet")`` lists it.

    Examples
    --------
    >>> import nlsepy as nl
    >>> mag = nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.0, 0.05, B=1e-3)
    >>> sol = mag.solve("rbsor", tol=1e-8)
    >>> sol.converged, sol.phi.shape
    (True, (21, 21))
    """

    _MODEL = "CoaxialMagnet"
    #: what makes the result that plot() and save() use
    _RESULT_CALL = "solve()"
    _RESULT_TYPE = MagnetSolution
    _SEALED_ADVICE = "mag.replace(...) makes a new magnet"
    _VAR = "mag"
    _FIXED_WHY = "the solver and its solutions are built for the value given at construction"
    #: what the refusal of a parameter advises where ``mag.replace(name=...)`` does not fit
    _HINTS = {"dr": "mag.replace(h=(dr, dz))", "dz": "mag.replace(h=(dr, dz))",
              "nr": "mag.replace(r1=..., h=...)", "nz": "mag.replace(z1=..., h=...)",
              "i0": "mag.replace(r0=..., h=...)", "j0": "mag.replace(z0=..., h=...)"}

    # the parameter table: the solver and its solutions are built for these values
    r0 = Param("Radius of the magnet (m).")
    z0 = Param("Half-height of the magnet (m).")
    r1 = Param("Radius of the outer cylinder (m).")
    z1 = Param("Half-height of the outer cylinder (m).")
    dr = Param("Radial spacing (m).")
    dz = Param("Axial spacing (m).")
    B = Param("Target field along z inside the magnet (T).")
    dtype = Param("Precision of Phi (numpy.float64 or numpy.float32).")
    backend = Param('Where the solves run ("cpu" or "cuda").')
    nr = Param("Nodes along r, ``r1 / dr + 1``.")
    nz = Param("Nodes along z, ``z1 / dz + 1``.")
    i0 = Param("The magnet's side in nodes, ``r0 / dr``.")
    j0 = Param("The magnet's cap in nodes, ``z0 / dz``.")

    def __init__(self, r0: float, z0: float, r1: float, z1: float,
                 h: Union[float, Sequence[float]], B: float = 1e-3, dtype: Any = np.float64,
                 backend: str = "auto") -> None:
        self._r0 = _validate.real("r0", r0, positive=True)
        self._z0 = _validate.real("z0", z0, positive=True)
        self._r1 = _validate.real("r1", r1, positive=True)
        self._z1 = _validate.real("z1", z1, positive=True)
        if np.ndim(h) == 0:
            self._dr = self._dz = _validate.real("h", h, positive=True)
        else:
            hh = tuple(h)
            if len(hh) != 2:
                raise ValueError(f"h must be a spacing or (dr, dz), got {h!r}")
            self._dr = _validate.real("dr", hh[0], positive=True)
            self._dz = _validate.real("dz", hh[1], positive=True)
        self._B = _validate.real("B", B)
        dt = np.dtype(dtype)
        if dt not in (np.dtype(np.float64), np.dtype(np.float32)):
            raise TypeError(f"dtype must be float64 or float32, got {dtype!r}")
        self._dtype = dt.type
        self._backend = _backend.resolve(backend, "CoaxialMagnet")
        _core = _backend.core()
        self._core = _backend.module(self.backend)
        self._args = (self.r0, self.z0, self.r1, self.z1, self.dr, self.dz, self.B,
                      _core.COMPLEX64 if dt == np.float32 else _core.COMPLEX128)
        self._core.magnet_omega_estimate(*self._args)  # the checks of the solver, no allocation
        self._nr = int(round(self.r1 / self.dr)) + 1
        self._nz = int(round(self.z1 / self.dz)) + 1
        self._i0 = int(round(self.r0 / self.dr))
        self._j0 = int(round(self.z0 / self.dz))
        self._solver: Any = None
        self._fresh = False   # _solver untouched since its creation
        self._partial: Optional[MagnetSolution] = None
        dev, host = self._memory(None, True, 0)
        self._require(dev, host, "CoaxialMagnet")
        self._solver = self._core.Magnet(*self._args)
        self._fresh = True

    def _replace_args(self) -> Dict[str, Any]:
        """The constructor's arguments that make this magnet again."""
        return dict(r0=self.r0, z0=self.z0, r1=self.r1, z1=self.z1, h=(self.dr, self.dz),
                    B=self.B, dtype=self.dtype, backend=self.backend)

    def replace(self, **changes: Any) -> "CoaxialMagnet":
        """A new magnet with some parameters changed, the others this one's.

        The new magnet is made afresh (its own solver, no solve done); this
        one and its solutions are left as they are.

        Parameters
        ----------
        **changes
            Any argument of the constructor (``r0, z0, r1, z1, h, B, dtype,
            backend``), or ``dr`` and ``dz`` (one spacing, the other kept)
            in place of ``h``.

        Returns
        -------
        CoaxialMagnet

        Raises
        ------
        TypeError
            A name that replace does not take, or ``h`` together with ``dr``
            or ``dz``.
        ValueError
            A value the constructor refuses (e.g. a length that is not a
            whole number of spacings).

        Examples
        --------
        >>> import nlsepy as nl
        >>> nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.0, 0.05).replace(B=2e-3).B
        0.002
        >>> nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.0, 0.05).replace(dz=0.025).shape
        (21, 41)
        """
        names = set(self._replace_args()) | {"dr", "dz"}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise TypeError(f"replace() takes {sorted(names)}, got {unknown}")
        if "dr" in changes or "dz" in changes:
            if "h" in changes:
                raise TypeError("replace() takes h or dr/dz, not both")
            changes["h"] = (changes.pop("dr", self.dr), changes.pop("dz", self.dz))
        return super().replace(**changes)

    @property
    def partial_solution(self) -> Optional[MagnetSolution]:
        """The partial result of the latest :meth:`solve` when Ctrl-C (or a
        lack of memory for its history) stopped it, else None.

        Its Phi, `iterations`, `history` and `residual` are those of the
        iterations done, ``interrupted`` is True.  A solve always starts
        afresh from `phi0` unless ``resume=True``:
        ``mag.solve(method, resume=True)`` continues the interrupted solve
        itself (mg-cg's Krylov iteration included), giving what one
        uninterrupted solve gives, bit for bit; ``mag.solve(method,
        phi0=part.phi)`` starts a new solve from the interrupted potential
        (for every method but mg-cg the same iterations again).
        """
        return self._partial

    # ------------------------------------------------------------ memory
    def _memory(self, method: Optional[str], new_solver: bool, inputs: int) -> Tuple[int, int]:
        """Bytes a solve takes (:func:`nlsepy.magnet.memory.solve_bytes`)."""
        return _memory.solve_bytes(self, method, new_solver, inputs)

    def _require(self, dev: int, host: int, what: str) -> None:
        _memory.require(self, dev, host, what)

    # ------------------------------------------------------------ geometry
    @property
    def shape(self) -> Tuple[int, int]:
        """Grid shape ``(nr, nz)``."""
        return self.nr, self.nz

    @property
    def unknowns(self) -> int:
        """Number of unknown nodes (the grid less the magnet and the mid-plane outside it)."""
        return self.nr * self.nz - self.i0 * self.j0 - (self.nr - self.i0)

    @property
    def r(self) -> np.ndarray:
        """Radial coordinates ``i dr``."""
        return np.arange(self.nr) * self.dr

    @property
    def z(self) -> np.ndarray:
        """Axial coordinates ``j dz``."""
        return np.arange(self.nz) * self.dz

    def omega_estimate(self) -> float:
        """The source's optimal SOR factor: eq. 2.44 with rho of eq. A.1
        (the rectangle three times the circumscribing one)."""
        return float(self._core.magnet_omega_estimate(*self._args))

    # ------------------------------------------------------------ solving
    def solve(self, method: str = "multigrid", tol: float = 0.5e-6, max_iter: int = 1_000_000,
              omega: Optional[float] = None, phi0: Optional[np.ndarray] = None,
              boundary_values: Union[None, np.ndarray, Callable] = None,
              warn: bool = True, resume: bool = False) -> MagnetSolution:
        """Solve the problem iteratively.

        Parameters
        ----------
        method : {"multigrid", "mg-cg", "rbsor", "sor", "gauss-seidel", "jacobi"}, optional
            ``"multigrid"`` (default): V(2,2) cycles with red-black
            Gauss-Seidel smoothing and Galerkin coarse operators (one
            iteration = one cycle); ``"mg-cg"``: BiCGSTAB preconditioned by
            one V-cycle (the rows of Table 2.1 are not symmetric, so plain
            conjugate gradients does not apply); the source's iterations
            (section 2.2): Jacobi, Gauss-Seidel and SOR in the row order of
            Algorithm 1 (serial), red-black SOR as Algorithm 2 (parallel).
        tol : float, optional
            Stop when ``||r|| / ||f|| < tol`` (eq. 2.50).
        max_iter : int, optional
            Iteration limit; reaching it gives ``converged = False`` and a
            :class:`ConvergenceWarning`.
        omega : float, optional
            Relaxation factor in (0, 2) for "sor" and "rbsor" (default:
            :meth:`omega_estimate`).
        phi0 : numpy.ndarray, optional
            Initial guess on the grid (default: 0; a previous solution's
            ``phi`` restarts from it).
        boundary_values : numpy.ndarray or callable, optional
            Replace Table 1.1's conditions on the outer cylinder, the
            magnet's surface and the mid-plane by these Dirichlet values (an
            ``(nr, nz)`` array, or ``f(r, z)`` evaluated on the grid); the
            axis keeps its symmetry row (eq. 2.28) and the interior rows are
            unchanged.  For checks against exact solutions of eq. 2.15 and for
            imposed potentials; ``||f||`` of the stopping rule is then that of
            the boundary data seen by the unknowns.
        warn : bool, optional
            Warn when the solve does not converge.
        resume : bool, optional
            Continue the interrupted solve of :attr:`partial_solution` (same
            `method` and `omega`, no `phi0` or `boundary_values`) where it
            stopped; `max_iter` counts its iterations too, and the result is
            that of one uninterrupted solve, bit for bit.

        Returns
        -------
        MagnetSolution

        Raises
        ------
        KeyboardInterrupt
            On Ctrl-C, within about a tenth of a second of iterations (one
            iteration when an iteration takes longer).  The iterations done
            are kept in :attr:`partial_solution`; ``resume=True`` goes on.
        MemoryError
            Before anything is allocated, when the solver's state, the
            method's work arrays (Jacobi's second copy, the multigrid
            hierarchy, mg-cg's Krylov vectors) and the Phi returned do not
            fit; during the solve when the residual history no longer fits
            (the iterations done are then kept in :attr:`partial_solution`).
        nlsepy.BlowUpError
            When the iteration diverges (``step``: the iteration).

        Notes
        -----
        The iterations run in calls of the C solver of about a tenth of a
        second each (the first of one iteration), which give the same
        iterates, residuals and history as one call; mg-cg's BiCGSTAB
        vectors and scalars stay in the C solver between its calls.  The
        history grows with the iterations done, never to `max_iter`.
        """
        if not isinstance(method, str) or method not in METHODS:
            raise ValueError(f"method must be one of {sorted(METHODS)}, got {method!r}")
        tol = _validate.real("tol", tol, positive=True)
        max_iter = _validate.count("max_iter", max_iter, 1)
        part = self._partial if resume else None
        if resume:
            self._check_resume(part, method, omega, phi0, boundary_values)
            if omega is None:
                omega = part.omega
        if method in _RELAXED:
            omega = self.omega_estimate() if omega is None else _validate.real("omega", omega)
            if not 0 < omega < 2:
                raise ValueError(f"omega must be in (0, 2), got {omega!r}")
        elif omega is not None:
            raise ValueError(f"omega applies to 'sor' and 'rbsor', not to {method!r}")
        self._partial = None
        if part is not None:
            return self._run(self._solver, method, omega, tol, max_iter, warn, part)
        nn = self.nr * self.nz
        inputs = 0
        if boundary_values is not None:
            inputs += 8 * nn + (16 * nn if callable(boundary_values) else 0)
        if phi0 is not None:
            inputs += 16 * nn
        new = not self._fresh
        if new:  # the previous solve's solver: its Phi was returned
            self._solver = None
        dev, host = self._memory(method, new, inputs)
        self._require(dev, host, f"CoaxialMagnet.solve({method!r})")
        bv = arr = None
        if boundary_values is not None:
            if callable(boundary_values):
                rr, zz = np.meshgrid(self.r, self.z, indexing="ij")
                bv = np.asarray(boundary_values(rr, zz), dtype=np.float64)
                del rr, zz
            else:
                bv = np.asarray(boundary_values, dtype=np.float64)
            if bv.shape != self.shape:
                raise ValueError(f"boundary_values must have shape {self.shape}, got {bv.shape}")
        if phi0 is not None:
            arr = np.asarray(phi0, dtype=np.float64)
            if arr.shape != self.shape:
                raise ValueError(f"phi0 must have shape {self.shape}, got {arr.shape}")
            arr = np.nan_to_num(arr)
        if new:
            self._solver = self._core.Magnet(*self._args)
        solver, self._fresh = self._solver, False
        if bv is not None:
            solver.set_dirichlet(bv)
            del bv
        if arr is not None:
            solver.set_phi(arr)
            del arr
        return self._run(solver, method, omega, tol, max_iter, warn, None)

    def _check_resume(self, part: Optional[MagnetSolution], method: str, omega: Optional[float],
                      phi0: Any, boundary_values: Any) -> None:
        """The checks of ``solve(..., resume=True)``."""
        if part is None:
            raise ValueError("resume=True continues an interrupted solve, but partial_solution "
                             "is None (no solve was interrupted, or a later one ran)")
        if method != part.method:
            raise ValueError(f"resume=True continues the interrupted {part.method!r} solve, "
                             f"not {method!r}")
        if omega is not None and omega != part.omega:
            raise ValueError(f"resume=True continues with the interrupted solve's omega = "
                             f"{part.omega!r}, got omega = {omega!r}")
        if phi0 is not None or boundary_values is not None:
            raise ValueError("resume=True takes neither phi0 nor boundary_values: the "
                             "interrupted solve's Phi and boundary data are kept")

    def _run(self, solver: Any, method: str, omega: Optional[float], tol: float, max_iter: int,
             warn: bool, part: Optional[MagnetSolution]) -> MagnetSolution:
        """Iterate `solver` in chunks, from the start or (`part`) from the
        interrupted solve whose state it holds."""
        code, w = METHODS[method], 1.0 if omega is None else omega
        hist: List[np.ndarray] = []
        book = {"it": 0, "res": math.nan, "conv": False, "sec": 0.0}
        before = 0.0
        if part is not None:
            hist.append(part.history)
            book.update(it=part.iterations, res=part.residual, sec=part.solve_seconds)
            before = part.seconds

        def work(k: int) -> bool:
            # the history as one array at the end: room for all of it
            done = book["it"]
            _memory.require_history(8 * (done + k), f"the residual history of CoaxialMagnet."
                                    f"solve({method!r}) at {done + k} iterations (max_iter = "
                                    f"{max_iter})")
            try:
                it, res, conv, h = solver.solve(code, w, tol, k)
            except BlowUpError as exc:
                raise _later(exc, done) from None
            hist.append(h)
            book["it"] = done + int(it)
            book["res"], book["conv"] = float(res), bool(conv)
            book["sec"] += float(solver.last_solve_seconds())
            return not (conv or it < k)  # converged, or mg-cg broke down

        t0 = time.perf_counter() - before
        try:
            _guard.chunked(max_iter - book["it"], work, first=1)
        except (KeyboardInterrupt, MemoryError):
            try:
                self._partial = self._solution(solver, hist, book, time.perf_counter() - t0,
                                               method, omega, interrupted=True)
            except MemoryError:
                pass
            raise
        seconds = time.perf_counter() - t0
        if not book["conv"] and warn:
            warnings.warn(f"{method} stopped after max_iter = {max_iter} iterations at "
                          f"||r||/||f|| = {book['res']:.3g} > tol = {tol:g}", ConvergenceWarning,
                          stacklevel=3)
        return self._keep(self._solution(solver, hist, book, seconds, method, omega))

    def _solution(self, solver: Any, hist: List[np.ndarray], book: Dict[str, Any],
                  seconds: float, method: str, omega: Optional[float],
                  interrupted: bool = False) -> MagnetSolution:
        history = np.concatenate(hist) if hist else np.empty(0)
        return MagnetSolution(solver.get_phi(), int(book["it"]), float(book["res"]),
                              bool(book["conv"]), history, seconds, book["sec"], method, omega,
                              self, interrupted)

    def convergence_study(self, sizes: Sequence[float] = (), spacings: Sequence[float] = (),
                          method: str = "multigrid", tol: float = 0.5e-6,
                          n_points: int = 101) -> Dict[str, Any]:
        """Repeat the solve while enlarging the outer cylinder and refining the
        mesh, as source 002 chapter 6 does, and report how Delta Phi converges.

        Parameters
        ----------
        sizes : sequence of float, optional
            Outer sizes ``r1 = z1`` to try at this magnet's spacing (Figs
            6.9, 6.10); each a whole number of spacings.
        spacings : sequence of float, optional
            Spacings to try at this problem's outer size (Figs 6.7, 6.8).
        method, tol : optional
            Solver and tolerance of every solve.
        n_points : int, optional
            Delta Phi is compared on this many points along the side (z in
            [0, z0]) and the cap (r in [0, r0]), by linear interpolation.

        Returns
        -------
        dict
            ``"size"`` and ``"spacing"``: lists of rows, one per solve, with
            the parameter, the iterations, and ``side``/``cap`` (Delta Phi on
            the common points) and ``change``: the largest change of Delta Phi
            from the previous row relative to its largest value (None for the
            first row).  ``"z"``, ``"r"``: the common points.
        """
        n_points = _validate.count("n_points", n_points, 2)
        zc = np.linspace(0.0, self.z0, n_points)
        rc = np.linspace(0.0, self.r0, n_points)

        def run(r1: float, z1: float, h: float) -> Dict[str, Any]:
            mag = CoaxialMagnet(self.r0, self.z0, r1, z1, h, B=self.B, dtype=self.dtype,
                                backend=self.backend)
            sol = mag.solve(method, tol=tol)
            d = sol.delta_phi()
            return {"iterations": sol.iterations, "converged": sol.converged,
                    "side": np.interp(zc, d["z"], d["side"]),
                    "cap": np.interp(rc, d["r"], d["cap"])}

        def series(params: Sequence[float], make: Callable[[float], Tuple[float, float, float]],
                   key: str) -> List[Dict[str, Any]]:
            rows: List[Dict[str, Any]] = []
            for v in params:
                row = {key: float(v), **run(*make(float(v)))}
                if rows:
                    prev = rows[-1]
                    scale = max(np.abs(prev["side"]).max(), np.abs(prev["cap"]).max())
                    row["change"] = float(max(np.abs(row["side"] - prev["side"]).max(),
                                              np.abs(row["cap"] - prev["cap"]).max()) / scale)
                else:
                    row["change"] = None
                rows.append(row)
            return rows

        return {"size": series(sizes, lambda L: (L, L, self.dr), "size"),
                "spacing": series(spacings, lambda h: (self.r1, self.z1, h), "spacing"),
                "z": zc, "r": rc}

    def __repr__(self) -> str:
        return (f"CoaxialMagnet(r0={self.r0:g}, z0={self.z0:g}, r1={self.r1:g}, z1={self.z1:g}, "
                f"dr={self.dr:g}, dz={self.dz:g}, B={self.B:g}, grid={self.nr}x{self.nz}, "
                f"dtype={np.dtype(self.dtype).name}, backend={self.backend!r})")
