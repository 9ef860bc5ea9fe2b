"""Stationary vortex states of the 3D Gross-Pitaevskii equation (source 001, section 5).

The DEC GPE runs start from a stationary vortex of the dimensionless
equation ``i ∂t Ψ = [−½∇² + V + g|Ψ|²] Ψ`` in the trap
``V = ½(x² + y² + λ² z²)``, normalised to ``∫|Ψ|² d³r = 1``:

    Ψ(r, t) = f(ρ, z) exp(iκφ − iμt)                                  (eq. 14)

with ``f ≥ 0`` real and

    [½(κ²/ρ² − ∂ρ² − (1/ρ)∂ρ − ∂z²) + V(ρ, z) + g f²] f = μ f,
    2π ∫∫ f² ρ dρ dz = 1.

:func:`vortex_state` solves eq. 14 on a uniform ``(ρ, z)`` grid of spacing
``h``: cell-centred in ρ, ``ρ_k = (k + ½) h``, so that the axis is a cell face
and no axis condition is needed (the flux ``ρ ∂ρ f`` vanishes there), and
vertex-centred in ``z ≥ 0``, ``z_j = j h``, with ``f`` even in ``z``; ``f = 0``
one cell beyond the last row and column.  The operator is the finite-volume
form of ``−½∇²`` in cylindrical coordinates, second order in ``h`` and
self-adjoint in the quadrature ``2π Σ ρ_k h w_j`` (``w_0 = h``, ``w_j = 2h``
for the mirrored ``±z_j``).

The nonlinear eigenproblem is relaxed by a normalised gradient flow
(imaginary time, backward Euler with ``g f²`` lagged, so that each step is a
positive M-matrix solve and keeps ``f > 0``, the ground state of the
κ-sector) until its residual is below 5·10⁻², then solved by Newton's method
on ``(f, μ)`` with the norm as the bordering equation, which converges
quadratically to the tolerance.  The default grid follows from the
Thomas-Fermi estimate of μ (with the vortex's centrifugal term): the
classical radius plus a WKB tail long enough for ``f`` to fall below
10⁻⁷ of its maximum at the edge, and ``h`` such that the discretisation
error of μ is about 10⁻⁴ relative and the healing length ``1/√(2μ)`` spans
at least two cells.

The source's cases are ``(λ, g, κ) = (1, 300, 10)`` (its accuracy test) and
``(0.1, 5000, 10)``, ``(0.1, 5000, 20)``; ``κ = 0`` gives the ground state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from numbers import Integral
from typing import Any, Optional, Tuple

import numpy as np

from ..common.checks import real

__all__ = ["VortexState", "vortex_state", "thomas_fermi_mu"]

# WKB decay (in units of e-folds) of the tail between the classical radius
# and the grid's edge: ln(1e7) ≈ 16.1 plus a margin for the prefactors.
_TAIL_EFOLDS = 17.0
# Residual below which the gradient flow hands over to Newton's method, and
# the flow's time step in units of 1/μ (large: close to inverse iteration).
_NEWTON_START = 5e-2
_DT = 10.0


def thomas_fermi_mu(lam: float, g: float, kappa: int) -> float:
    """Thomas-Fermi chemical potential of the κ vortex, normalised to 1.

    The density ``n = (μ − V − κ²/2ρ²)/g`` where positive; for ``κ = 0`` this
    is the closed form ``½(15 g λ / 4π)^{2/5}``, otherwise μ is found by
    bisection of the norm (integrated exactly in z and by the trapezoidal
    rule in ``ρ²``).

    Parameters
    ----------
    lam : float
        Trap anisotropy λ > 0.
    g : float
        Interaction strength g > 0.
    kappa : int
        Winding number κ ≥ 0.

    Returns
    -------
    float
        The Thomas-Fermi μ.
    """
    lam = real("lam", lam, positive=True)
    g = real("g", g, positive=True)
    kappa = _winding(kappa)
    if kappa == 0:
        return 0.5 * (15.0 * g * lam / (4.0 * math.pi)) ** 0.4

    k2 = float(kappa) ** 2

    def norm(mu: float) -> float:
        # ∫ max(a − ½λ²z², 0) dz = (4√2/3) a^{3/2} / λ, a = μ − ½(ρ² + κ²/ρ²);
        # 2π ∫ ρ dρ = π ∫ ds with s = ρ²; a > 0 for s between the roots below.
        d = math.sqrt(max(mu * mu - k2, 0.0))
        s = np.linspace(mu - d, mu + d, 4001)[1:-1]
        if s.size == 0:
            return 0.0
        a = np.maximum(mu - 0.5 * (s + k2 / s), 0.0)
        y = np.concatenate(([0.0], a ** 1.5, [0.0]))
        return (math.pi / g) * (4.0 * math.sqrt(2.0) / 3.0) / lam * float(np.sum(
            0.5 * (y[1:] + y[:-1]))) * (2.0 * d / 4000.0)

    lo, hi = float(kappa), float(kappa) + 1.0
    while norm(hi) < 1.0:
        hi = kappa + 2.0 * (hi - kappa)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if norm(mid) < 1.0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _winding(kappa: Any) -> int:
    if isinstance(kappa, bool) or not isinstance(kappa, (Integral, np.integer)):
        raise TypeError(f"kappa must be an integer, got {kappa!r}")
    if kappa < 0:
        raise ValueError(f"kappa must be >= 0, got {kappa!r}")
    return int(kappa)


def _tail_edge(radius: float, efolds: float, rate: float = 1.0) -> float:
    """The x > radius where ``rate ∫_radius^x sqrt(s² − radius²) ds = efolds``."""

    def tail(x: float) -> float:
        q = math.sqrt(max(x * x - radius * radius, 0.0))
        return 0.5 * rate * (x * q - radius * radius * math.log((x + q) / radius))

    lo, hi = radius, radius + 1.0
    while tail(hi) < efolds:
        hi = radius + 2.0 * (hi - radius)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if tail(mid) < efolds:
            lo = mid
        else:
            hi = mid
    return hi


def _default_grid(lam: float, g: float, kappa: int) -> Tuple[float, float, float, float]:
    """``(mu_estimate, h, rho_max, z_max)`` from the Thomas-Fermi and oscillator limits."""
    mu = kappa + 1.0 + 0.5 * lam  # the g = 0 value, a lower bound
    if g > 0:
        mu = max(mu, thomas_fermi_mu(lam, g, kappa))
    # radial: classical radius of ½ρ² = μ; axial: of ½λ²z² = μ − κ (the
    # centrifugal minimum of ½(ρ² + κ²/ρ²) is κ), never below the zero point
    rho_max = _tail_edge(math.sqrt(2.0 * mu), _TAIL_EFOLDS)
    z_turn = math.sqrt(2.0 * max(mu - kappa, 0.5 * lam)) / lam
    z_max = _tail_edge(z_turn, _TAIL_EFOLDS, lam)
    # the error of μ is ≈ 0.16 h² (oscillator units) at this second order:
    # 1e-4 relative; and two cells per healing length 1/sqrt(2μ)
    h = min(0.025 * math.sqrt(mu), 0.5 / math.sqrt(2.0 * mu))
    return mu, h, rho_max, z_max


class _Grid:
    """The (ρ, z) grid, its quadrature and the linear operator of eq. 14."""

    def __init__(self, lam: float, kappa: int, h: float, nr: int, nz: int) -> None:
        self.lam, self.kappa, self.h, self.nr, self.nz = lam, kappa, h, nr, nz
        self.rho = (np.arange(nr) + 0.5) * h
        self.z = np.arange(nz) * h
        self.wz = np.full(nz, 2.0 * h)  # the nodes ±z_j, and z_0 = 0 once
        self.wz[0] = h
        self.w = 2.0 * math.pi * h * self.rho[:, None] * self.wz[None, :]
        # −½ (1/ρ) ∂ρ(ρ ∂ρ f): fluxes through the faces ρ_k ± h/2 (zero at the axis)
        self.cp = 0.5 * (self.rho + 0.5 * h) / (self.rho * h * h)
        self.cm = 0.5 * (self.rho - 0.5 * h) / (self.rho * h * h)
        # κ²/2ρ² + V, the diagonal
        self.diag = (0.5 * kappa ** 2 / self.rho ** 2)[:, None] + 0.5 * (
            self.rho[:, None] ** 2 + lam * lam * self.z[None, :] ** 2)

    def apply(self, f: np.ndarray) -> np.ndarray:
        """The linear part ``[½(κ²/ρ² − Δ) + V] f`` (numpy only)."""
        h2 = 1.0 / (self.h * self.h)
        out = (self.diag + (self.cp + self.cm)[:, None] + h2) * f
        out[:-1] -= self.cp[:-1, None] * f[1:]
        out[1:] -= self.cm[1:, None] * f[:-1]
        out[:, 1:] -= 0.5 * h2 * f[:, :-1]
        out[:, :-1] -= 0.5 * h2 * f[:, 1:]
        out[:, 0] -= 0.5 * h2 * f[:, 1]  # the mirror image f(−h) = f(h)
        return out

    def matrix(self, sp: Any) -> Any:
        """The same operator as a scipy.sparse CSR matrix (row-major unknowns)."""
        nr, nz = self.nr, self.nz
        h2 = 1.0 / (self.h * self.h)
        idx = np.arange(nr * nz).reshape(nr, nz)
        main = (self.diag + (self.cp + self.cm)[:, None] + h2).ravel()
        rows = [idx.ravel()]
        cols = [idx.ravel()]
        vals = [main]

        def add(r: np.ndarray, c: np.ndarray, v: np.ndarray) -> None:
            rows.append(r.ravel())
            cols.append(c.ravel())
            vals.append(np.broadcast_to(v, r.shape).ravel())

        add(idx[:-1], idx[1:], -self.cp[:-1, None])
        add(idx[1:], idx[:-1], -self.cm[1:, None])
        add(idx[:, 1:], idx[:, :-1], np.full((nr, nz - 1), -0.5 * h2))
        up = np.full((nr, nz - 1), -0.5 * h2)
        up[:, 0] = -h2
        add(idx[:, :-1], idx[:, 1:], up)
        n = nr * nz
        return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                             shape=(n, n))

    def energy(self, f: np.ndarray, g: float) -> float:
        """The GP energy in its gradient form: squared differences across the
        faces ``ρ = (k + 1) h`` and ``z = ±(j + ½) h`` (equal to
        ``Σ w f [L f + (g/2) f³]`` by summation by parts)."""
        h = self.h
        dr = np.diff(np.vstack((f, np.zeros((1, self.nz)))), axis=0) / h
        rho_face = (np.arange(self.nr) + 1.0) * h
        face_r = 2.0 * math.pi * h * rho_face[:, None] * self.wz[None, :]
        dz = np.diff(np.hstack((f, np.zeros((self.nr, 1)))), axis=1) / h
        face_z = 2.0 * math.pi * h * self.rho[:, None] * 2.0 * h
        kinetic = 0.5 * float(np.sum(face_r * dr * dr) + np.sum(face_z * dz * dz))
        return kinetic + float(np.sum(self.w * (self.diag + 0.5 * g * f * f) * f * f))


@dataclass(frozen=True, eq=False)
class VortexState:
    """A stationary vortex ``Ψ = f(ρ, z) exp(iκφ − iμt)`` of the 3D GPE (eq. 14).

    Built by :func:`vortex_state`.  The profile is given on the grid
    ``rho × z`` (``z ≥ 0``; ``f`` is even in z) and vanishes at
    ``rho_edge`` and ``z_edge``.

    Attributes
    ----------
    lam : float
        Trap anisotropy λ (``V = ½(x² + y² + λ² z²)``).
    g : float
        Interaction strength.
    kappa : int
        Winding number κ.
    mu : float
        Chemical potential μ.
    rho : numpy.ndarray
        Radial nodes ``(k + ½) h``, shape ``(nr,)``.
    z : numpy.ndarray
        Axial nodes ``j h ≥ 0``, shape ``(nz,)``.
    f : numpy.ndarray
        The profile ``f(rho[k], z[j])``, shape ``(nr, nz)``, ``≥ 0``.
    h : float
        Grid spacing.
    iterations : int
        Relaxation steps taken (gradient flow and Newton together).
    """

    lam: float
    g: float
    kappa: int
    mu: float
    rho: np.ndarray = field(repr=False)
    z: np.ndarray = field(repr=False)
    f: np.ndarray = field(repr=False)
    h: float = 0.0
    iterations: int = 0
    _spline: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        rho = np.array(self.rho, dtype=np.float64)
        z = np.array(self.z, dtype=np.float64)
        f = np.array(self.f, dtype=np.float64)
        if rho.ndim != 1 or z.ndim != 1 or f.shape != (rho.size, z.size):
            raise ValueError(f"f must have shape (len(rho), len(z)) = ({rho.size}, {z.size}), "
                             f"got {f.shape}")
        if rho.size < 2 or z.size < 2:
            raise ValueError("the grid needs at least 2 nodes in rho and in z")
        h = float(self.h) if self.h else float(rho[1] - rho[0])
        if not (h > 0 and np.allclose(rho, (np.arange(rho.size) + 0.5) * h, rtol=0, atol=1e-9 * h)
                and np.allclose(z, np.arange(z.size) * h, rtol=0, atol=1e-9 * h)):
            raise ValueError("the grid must be rho = (k + 1/2) h, z = j h (as vortex_state "
                             f"builds it), h={h!r}")
        for name, value in (("rho", rho), ("z", z), ("f", f)):
            value.setflags(write=False)
            object.__setattr__(self, name, value)
        object.__setattr__(self, "h", h)

    # ----------------------------------------------------------------- grid
    @property
    def rho_edge(self) -> float:
        """Radius where ``f = 0`` is imposed (one cell beyond ``rho[-1]``)."""
        return float(self.rho[-1] + self.h)

    @property
    def z_edge(self) -> float:
        """``|z|`` where ``f = 0`` is imposed (one cell beyond ``z[-1]``)."""
        return float(self.z[-1] + self.h)

    def _grid(self) -> _Grid:
        return _Grid(self.lam, self.kappa, self.h, self.rho.size, self.z.size)

    def weights(self) -> np.ndarray:
        """Quadrature weights of the grid for integrals over all space.

        ``∫ F d³r ≈ Σ weights() · F(rho, z)`` for F axially symmetric and even
        in z: ``2π ρ_k h w_j`` with ``w_0 = h`` and ``w_j = 2h`` (the nodes
        ``±z_j``).

        Returns
        -------
        numpy.ndarray
            Shape ``(len(rho), len(z))``.
        """
        return self._grid().w

    # ------------------------------------------------------------ evaluation
    def _interpolant(self) -> Any:
        if self._spline is None:
            try:
                from scipy.interpolate import RectBivariateSpline
            except ImportError as exc:  # pragma: no cover - scipy is a test dependency
                raise ImportError("VortexState interpolation needs scipy: "
                                  "pip install scipy") from exc
            parity = -1.0 if self.kappa % 2 else 1.0
            r_ext = np.concatenate(([-self.rho_edge], -self.rho[::-1], self.rho, [self.rho_edge]))
            z_ext = np.concatenate(([-self.z_edge], -self.z[:0:-1], self.z, [self.z_edge]))
            fz = np.hstack((self.f[:, :0:-1], self.f))
            zero = np.zeros((1, fz.shape[1]))
            f_ext = np.vstack((zero, parity * fz[::-1], fz, zero))
            side = np.zeros((f_ext.shape[0], 1))
            f_ext = np.hstack((side, f_ext, side))
            object.__setattr__(self, "_spline",
                               RectBivariateSpline(r_ext, z_ext, f_ext, kx=3, ky=3, s=0))
        return self._spline

    def f_at(self, rho: Any, z: Any) -> np.ndarray:
        """The profile f at arbitrary points, by bicubic interpolation.

        The interpolant is built once on the grid extended by the symmetries
        (f even in z; ``f(−ρ) = (−1)^κ f(ρ)``, the smooth continuation through
        the axis) and the zero boundary.  Below the first node (``ρ < h/2``)
        and ``κ ≥ 2`` it follows the axis law ``f ∝ ρ^κ``; ``f = 0`` outside
        the grid; negative overshoots of the cubic are clipped to 0.

        Parameters
        ----------
        rho, z : array_like
            Cylindrical coordinates (broadcast together; ``|rho|``, ``|z|``
            are used).

        Returns
        -------
        numpy.ndarray
            f at the points, of the broadcast shape.
        """
        r, zz = np.broadcast_arrays(np.abs(np.asarray(rho, dtype=np.float64)),
                                    np.abs(np.asarray(z, dtype=np.float64)))
        shape = r.shape
        r = r.ravel()
        zz = zz.ravel()
        out = np.zeros(r.shape)
        inside = (r < self.rho_edge) & (zz < self.z_edge)
        if np.any(inside):
            spl = self._interpolant()
            ri, zi = r[inside], zz[inside]
            r0 = float(self.rho[0])
            near = ri < r0 if self.kappa >= 2 else np.zeros(ri.shape, dtype=bool)
            val = spl.ev(np.where(near, r0, ri), zi)
            if np.any(near):
                val[near] *= (ri[near] / r0) ** self.kappa
            out[inside] = np.maximum(val, 0.0)
        return out.reshape(shape)

    def __call__(self, positions: Any, t: float = 0.0) -> np.ndarray:
        """Ψ at Cartesian points: ``f(ρ, z) exp(iκφ − iμt)``.

        Parameters
        ----------
        positions : array_like
            Points ``(..., 3)`` (x, y, z about the trap centre), e.g. ``(n, 3)``.
        t : float, optional
            Time.

        Returns
        -------
        numpy.ndarray
            complex128 of shape ``positions.shape[:-1]``.
        """
        p = _positions(positions)
        t = real("t", t)
        x, y, z = p[..., 0], p[..., 1], p[..., 2]
        amp = self.f_at(np.hypot(x, y), z)
        return amp * np.exp(1j * (self.kappa * np.arctan2(y, x) - self.mu * t))

    def potential(self, positions: Any) -> np.ndarray:
        """The trap ``½(x² + y² + λ² z²)`` at Cartesian points.

        Parameters
        ----------
        positions : array_like
            Points ``(..., 3)``.

        Returns
        -------
        numpy.ndarray
            float64 of shape ``positions.shape[:-1]``.
        """
        p = _positions(positions)
        return 0.5 * (p[..., 0] ** 2 + p[..., 1] ** 2 + self.lam ** 2 * p[..., 2] ** 2)

    # ------------------------------------------------------------ diagnostics
    def cuboid(self, eps: float = 1e-5) -> Tuple[np.ndarray, np.ndarray]:
        """The computational domain of eq. 15: the smallest cuboid about the
        centre outside of which ``|Ψ| ≤ eps max|Ψ|``.

        The half-widths are the largest ρ (for x and y) and the largest
        ``|z|`` where ``f > eps max f``, located between the last grid node
        above the threshold and the next one by log-linear interpolation of
        the profile's envelope (``max_z f`` resp. ``max_ρ f``).  Where the
        threshold is not reached on the grid the half-width is the grid's
        edge.

        Parameters
        ----------
        eps : float, optional
            Relative threshold, ``0 < eps < 1`` (source: 1e-5).

        Returns
        -------
        lo, hi : numpy.ndarray
            Corners ``(−a, −a, −c)`` and ``(a, a, c)``.
        """
        eps = real("eps", eps, positive=True)
        if eps >= 1:
            raise ValueError(f"eps must be < 1, got {eps!r}")
        thr = eps * float(self.f.max())
        a = _crossing(self.rho, self.f.max(axis=1), thr, self.h)
        c = _crossing(self.z, self.f.max(axis=0), thr, self.h)
        hi = np.array([a, a, c])
        return -hi, hi

    def norm(self) -> float:
        """``∫|Ψ|² d³r`` on the grid (1 for a converged state)."""
        return float(np.sum(self.weights() * self.f ** 2))

    def energy(self) -> float:
        """The GP energy ``∫ [½|∇Ψ|² + V|Ψ|² + (g/2)|Ψ|⁴] d³r`` on the grid.

        Evaluated from differences of f across the grid's faces (the
        centrifugal ``κ²f²/2ρ²`` included in ``|∇Ψ|²``); for the solution
        ``μ = E + (g/2) ∫|Ψ|⁴``.

        Returns
        -------
        float
            E.
        """
        return self._grid().energy(self.f, self.g)

    def residual(self) -> float:
        """Relative residual of eq. 14 on the grid.

        ``‖[L + g f² − μ] f‖ / ‖μ f‖`` in the grid's quadrature, L the
        discrete ``½(κ²/ρ² − Δ) + V``.

        Returns
        -------
        float
            The residual.
        """
        grid = self._grid()
        r = grid.apply(self.f) + (self.g * self.f ** 2 - self.mu) * self.f
        return float(np.sqrt(np.sum(grid.w * r * r) / np.sum(grid.w * (self.mu * self.f) ** 2)))


def _positions(positions: Any) -> np.ndarray:
    p = np.asarray(positions, dtype=np.float64)
    if p.ndim == 0 or p.shape[-1] != 3:
        raise ValueError(f"positions must have shape (..., 3), got {p.shape}")
    return p


def _crossing(x: np.ndarray, env: np.ndarray, thr: float, h: float) -> float:
    above = np.nonzero(env > thr)[0]
    if above.size == 0:
        return float(x[0])
    k = int(above[-1])
    if k + 1 >= x.size:
        return float(x[-1] + h)  # the grid's edge
    a, b = float(env[k]), float(env[k + 1])
    if b > 0:
        frac = (math.log(a) - math.log(thr)) / (math.log(a) - math.log(b))
    else:
        frac = (a - thr) / a
    return float(x[k] + h * frac)


def _newton_step(sp: Any, spla: Any, A: Any, fv: np.ndarray, b: np.ndarray, F: np.ndarray,
                 c: float) -> np.ndarray:
    """``(δf, δμ)`` of ``A δf − f δμ = −F``, ``b·δf = −c``.

    By block elimination with one sparse LU of A (two right-hand sides); A is
    positive definite at the solution for g > 0 and nearly singular (its
    null vector f) for g = 0, where the bordering still fixes the step as in
    inverse iteration.  An exactly singular A, or a non-finite step, falls
    back to the sparse LU of the bordered matrix.
    """
    try:
        x = spla.splu(A).solve(np.column_stack((F, fv)))
        dmu = (float(b @ x[:, 0]) - c) / float(b @ x[:, 1])
        step = np.concatenate((-x[:, 0] + dmu * x[:, 1], [dmu]))
        if np.all(np.isfinite(step)):
            return step
    except (RuntimeError, ZeroDivisionError):
        pass
    J = sp.bmat([[A, sp.csr_matrix(-fv[:, None])], [sp.csr_matrix(b[None, :]), None]],
                format="csc")
    return spla.spsolve(J, -np.concatenate((F, [c])))


def vortex_state(lam: float = 1.0, g: float = 300.0, kappa: int = 10, *,
                 h: Optional[float] = None, rho_max: Optional[float] = None,
                 z_max: Optional[float] = None, tol: float = 1e-10,
                 max_iter: int = 500) -> VortexState:
    """Solve eq. 14 for the stationary vortex of winding κ (source 001, section 5).

    Parameters
    ----------
    lam : float, optional
        Trap anisotropy λ > 0 (``V = ½(x² + y² + λ² z²)``).
    g : float, optional
        Interaction strength g ≥ 0 (0: the linear oscillator).
    kappa : int, optional
        Winding number κ ≥ 0 (0: the ground state).
    h : float, optional
        Grid spacing in ρ and z.  Default: from the Thomas-Fermi μ, for a
        relative error of μ of about 1e-4 and at least two cells per healing
        length.
    rho_max, z_max : float, optional
        Extent of the grid: ``f = 0`` is imposed at ``rho_edge ≥ rho_max``
        and ``z_edge ≥ z_max`` (the first node beyond them).  Default:
        the classical radius plus a WKB tail of 17 e-folds, so that f at the
        edge is below 1e-7 of its maximum.
    tol : float, optional
        Relative residual of eq. 14 to reach (see :meth:`VortexState.residual`).
    max_iter : int, optional
        Most relaxation steps (gradient flow and Newton together).

    Returns
    -------
    VortexState
        The converged state.

    Raises
    ------
    ImportError
        Without scipy.
    RuntimeError
        If the residual does not fall below `tol` within `max_iter` steps.

    Examples
    --------
    >>> from nlsepy.dec.vortex import vortex_state
    >>> s = vortex_state(1.0, 300.0, 10)      # the source's accuracy test
    >>> lo, hi = s.cuboid(1e-5)               # the domain of eq. 15
    >>> psi = s([[3.0, 1.0, 0.5]], t=0.0)     # Ψ at a point
    """
    lam = real("lam", lam, positive=True)
    g = real("g", g, nonneg=True)
    kappa = _winding(kappa)
    tol = real("tol", tol, positive=True)
    if isinstance(max_iter, bool) or not isinstance(max_iter, (Integral, np.integer)) \
            or max_iter < 1:
        raise ValueError(f"max_iter must be an integer >= 1, got {max_iter!r}")
    mu_est, h0, r0, z0 = _default_grid(lam, g, kappa)
    h = h0 if h is None else real("h", h, positive=True)
    rho_max = r0 if rho_max is None else real("rho_max", rho_max, positive=True)
    z_max = z0 if z_max is None else real("z_max", z_max, positive=True)
    nr = int(math.ceil(rho_max / h - 1e-9))
    nz = int(math.ceil(z_max / h - 1e-9))
    if nr < 4 or nz < 4:
        raise ValueError(f"h={h!r} is too coarse for rho_max={rho_max!r}, z_max={z_max!r}: "
                         f"at least 4 cells are needed in each direction")
    try:
        import scipy.sparse as sp
        import scipy.sparse.linalg as spla
    except ImportError as exc:
        raise ImportError("vortex_state needs scipy: pip install scipy") from exc

    grid = _Grid(lam, kappa, h, nr, nz)
    w = grid.w
    n = nr * nz
    L = grid.matrix(sp)

    def normalise(f: np.ndarray) -> np.ndarray:
        return f / math.sqrt(float(np.sum(w * f * f)))

    def residual(f: np.ndarray, mu: float) -> float:
        r = grid.apply(f) + (g * f * f - mu) * f
        return math.sqrt(float(np.sum(w * r * r)) / float(np.sum(w * f * f))) / abs(mu)

    def rayleigh(f: np.ndarray) -> float:
        return float(np.sum(w * f * (grid.apply(f) + g * f ** 3)) / np.sum(w * f * f))

    # start: the oscillator's κ state, or the Thomas-Fermi profile when g dominates
    R, Z = grid.rho[:, None], grid.z[None, :]
    logf = kappa * np.log(R) - 0.5 * (R * R + lam * Z * Z)
    f = normalise(np.exp(logf - logf.max()))
    if g > 0 and mu_est > kappa + 1.0 + 0.5 * lam:
        f_tf = np.sqrt(np.maximum(mu_est - grid.diag, 0.0) / g)
        if np.any(f_tf > 0):
            f = normalise(normalise(f_tf) + 1e-3 * f)
    mu = rayleigh(f)
    res = residual(f, mu)

    it = 0
    eye = sp.identity(n, format="csr")
    dt = _DT / mu_est
    wf_scale = w.ravel() / float(w.max())
    newton_start = _NEWTON_START
    while res > tol and it < max_iter:
        it += 1
        fv = f.ravel()
        if res > newton_start:
            # normalised gradient flow: (1 + dt [L + g f_n²]) f* = f_n, f_{n+1} = f*/‖f*‖
            A = (eye + dt * (L + sp.diags(g * fv * fv))).tocsc()
            f = normalise(spla.splu(A).solve(fv).reshape(nr, nz))
            mu = rayleigh(f)
            res = residual(f, mu)
            continue
        # Newton on (f, μ): [L + 3g f² − μ] δf − f δμ = −F,
        # (w f)·δf = −½(‖f‖² − 1)
        F = (grid.apply(f) + (g * f * f - mu) * f).ravel()
        c = 0.5 * (float(np.sum(w * f * f)) - 1.0) / float(w.max())
        b = wf_scale * fv
        A = (L + sp.diags(3.0 * g * fv * fv - mu)).tocsc()
        step = _newton_step(sp, spla, A, fv, b, F, c)
        for damp in (1.0, 0.5, 0.25):
            f_new = f + damp * step[:n].reshape(nr, nz)
            mu_new = mu + damp * step[n]
            res_new = residual(f_new, mu_new)
            if res_new < res:
                f, mu, res = f_new, mu_new, res_new
                break
        else:
            if res < 1e-9:
                raise RuntimeError(f"vortex_state: the residual stagnates at {res:.3e}, the "
                                   f"rounding level of this grid, above tol={tol:.1e}")
            # not in Newton's basin yet: more gradient flow first
            newton_start = 0.1 * res
    if res > tol:
        raise RuntimeError(f"vortex_state did not converge in max_iter={max_iter} steps: "
                           f"residual {res:.3e} > tol={tol:.1e}")
    f = normalise(np.abs(f))
    mu = rayleigh(f)
    return VortexState(lam=lam, g=g, kappa=kappa, mu=mu, rho=grid.rho, z=grid.z, f=f, h=h,
                       iterations=it)
