"""Straightforward NumPy statement of the axisymmetric Laplace problem of magnet design.

The magnetostatic boundary-value problem of Madhubhashini's thesis (source 002,
chapters 1-2): the scalar potential Phi between a cylindrical magnet (radius
r0, half-height z0) and an outer cylinder (r1, z1) satisfies

    d2Phi/dr2 + (1/r) dPhi/dr + d2Phi/dz2 = 0                      (eq. 2.15)

with the boundary conditions of Table 1.1.  This module assembles the finite
difference rows of Table 2.1 as coefficient arrays of the general form

    a Phi[i+1, j] + b Phi[i-1, j] + c Phi[i, j+1] + d Phi[i, j-1] + e Phi[i, j] = f   (eq. 2.38)

(the source's scaling of each row, which its stopping rule ||r|| / ||f|| <
tol, eq. 2.50, depends on), and states Jacobi and red-black SOR (Algorithm 2)
in whole-array expressions, the omega estimate of Appendix A, and a dense
direct solve for small grids.  It is the reference the C and CUDA solvers of
``nl.CoaxialMagnet`` are checked and timed against.

Conventions.  ``Phi[i, j]`` lives at ``r = i dr``, ``z = j dz`` with z
pointing up (the source's Fig. 2.4 numbers j downwards from the top, which is
why its Table 2.1 writes the cap's interior neighbour as ``Phi[i, j-1]``).
The cap condition is Table 1.1's ``dPhi/dz = -B/mu0``: with z up the ghost
value below the cap is ``Phi[i, j+1] + 2 B dz / mu0``, so the cap rows have
``f = -2 gamma B dz / mu0``.  Table 2.1, read with its downward j, carries
the opposite sign (``+2 gamma B dz / mu0``), i.e. it solves for -Phi; the
potential jump, the winding and the field magnitude are the same, the sign of
Phi and of the winding current follow Table 1.1 here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

import numpy as np

#: permeability of free space, 4 pi 1e-7 H/m (exact in the SI before 2019;
#: CODATA 2018 differs by 5.5e-10 relative)
MU0 = 4e-7 * math.pi


@dataclass
class Stencil:
    """Rows of eq. 2.38 on an ``(nr, nz)`` grid.

    Attributes
    ----------
    a, b, c, d, e, f : numpy.ndarray
        Coefficients of Phi[i+1, j], Phi[i-1, j], Phi[i, j+1], Phi[i, j-1],
        Phi[i, j] and the right-hand side; zero where a row has no such term.
    active : numpy.ndarray of bool
        Nodes whose value is unknown.
    fixed : numpy.ndarray
        Values of the Dirichlet nodes (``~active``; NaN inside the magnet).
    dr, dz : float
        Spacings.
    """

    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    d: np.ndarray
    e: np.ndarray
    f: np.ndarray
    active: np.ndarray
    fixed: np.ndarray
    dr: float
    dz: float

    @property
    def shape(self) -> Tuple[int, int]:
        return self.a.shape


def whole_spacings(length: float, h: float, name: str) -> int:
    """Number of spacings h in `length` (>= 1); a clear error when it is not whole."""
    n = length / h
    k = int(round(n))
    if k < 1 or abs(n - k) > 1e-9 * max(1.0, n):
        raise ValueError(f"{name} = {length!r} must be a whole number of mesh spacings "
                         f"({h!r}): the magnet's edges and the outer faces lie on grid lines")
    return k


def _check_positive(**kw: float) -> None:
    for name, v in kw.items():
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise ValueError(f"{name} must be a finite number > 0, got {v!r}")


def _empty(nr: int, nz: int) -> List[np.ndarray]:
    return [np.zeros((nr, nz)) for _ in range(6)]


def _interior(arrs: List[np.ndarray], gamma: float) -> None:
    """Eq. 2.18 times -2(1+gamma) on every node with i >= 1 (overwritten later where needed)."""
    a, b, c, d, e, f = arrs
    nr = a.shape[0]
    i = np.arange(nr, dtype=float)[:, None]
    with np.errstate(divide="ignore"):
        alpha = np.where(i > 0, 1.0 / (2.0 * np.maximum(i, 1.0)), 0.0)
    a[:] = 1.0 + alpha
    b[:] = 1.0 - alpha
    c[:] = gamma
    d[:] = gamma
    e[:] = -2.0 * (1.0 + gamma)
    f[:] = 0.0


def _axis(arrs: List[np.ndarray], gamma: float, rows: slice) -> None:
    """Boundary 3 (eq. 2.28): 4 Phi[1, j] + gamma (Phi[0, j+1] + Phi[0, j-1]) - 2(2+gamma) Phi."""
    a, b, c, d, e, f = arrs
    a[0, rows], b[0, rows] = 4.0, 0.0
    c[0, rows], d[0, rows] = gamma, gamma
    e[0, rows] = -2.0 * (2.0 + gamma)


def coaxial_stencil(r0: float, z0: float, r1: float, z1: float, dr: float,
                    dz: Optional[float] = None, B: float = 1.0) -> Stencil:
    """The rows of Table 2.1 for the magnet problem (boundaries 1-6, corners A-F).

    Parameters
    ----------
    r0, z0 : float
        Radius and half-height of the magnet (m).
    r1, z1 : float
        Radius and half-height of the outer cylinder (m), r0 < r1, z0 < z1.
    dr : float
        Radial spacing (m).
    dz : float, optional
        Axial spacing (default `dr`).
    B : float, optional
        Field along z inside the magnet (T).

    Returns
    -------
    Stencil
        Coefficients on the ``(r1/dr + 1, z1/dz + 1)`` grid; the magnet's
        interior is inactive (NaN in `fixed`), boundary 6 fixed at 0.
    """
    dz = dr if dz is None else dz
    _check_positive(r0=r0, z0=z0, r1=r1, z1=z1, dr=dr, dz=dz)
    if not math.isfinite(B):
        raise ValueError(f"B must be finite, got {B!r}")
    if not r0 < r1:
        raise ValueError(f"r0 = {r0!r} must be smaller than r1 = {r1!r}")
    if not z0 < z1:
        raise ValueError(f"z0 = {z0!r} must be smaller than z1 = {z1!r}")
    i0, i1 = whole_spacings(r0, dr, "r0"), whole_spacings(r1, dr, "r1")
    j0, j1 = whole_spacings(z0, dz, "z0"), whole_spacings(z1, dz, "z1")
    nr, nz = i1 + 1, j1 + 1
    gamma = (dr / dz) ** 2
    cap = -2.0 * gamma * B * dz / MU0          # right-hand side of the cap rows
    arrs = _empty(nr, nz)
    a, b, c, d, e, f = arrs
    _interior(arrs, gamma)
    _axis(arrs, gamma, slice(j0 + 1, j1))        # boundary 3
    # boundary 1 (z = z1): ghost above mirrors the node below (eq. 2.21)
    c[:, j1], d[:, j1] = 0.0, 2.0 * gamma
    # boundary 2 (r = r1): ghost outside mirrors the node inside (eq. 2.23)
    a[i1, :], b[i1, :] = 0.0, 2.0
    # boundary 4 (cap, z = z0, r < r0): ghost below = Phi[i, j0+1] + 2 B dz / mu0 (eq. 2.30)
    c[1:i0, j0], d[1:i0, j0], f[1:i0, j0] = 2.0 * gamma, 0.0, cap
    # boundary 5 (side, r = r0, z < z0): ghost inside mirrors the node outside (eq. 2.32)
    a[i0, 1:j0], b[i0, 1:j0] = 2.0, 0.0
    # corners: A (axis, top), B (outer, top), C (axis, cap), D (cap, side)
    a[0, j1], b[0, j1], c[0, j1], d[0, j1], e[0, j1] = 4.0, 0.0, 0.0, 2.0 * gamma, -2.0 * (2.0 + gamma)
    a[i1, j1], b[i1, j1], c[i1, j1], d[i1, j1] = 0.0, 2.0, 0.0, 2.0 * gamma
    a[0, j0], b[0, j0], c[0, j0], d[0, j0] = 4.0, 0.0, 2.0 * gamma, 0.0
    e[0, j0], f[0, j0] = -2.0 * (2.0 + gamma), cap
    a[i0, j0], b[i0, j0], c[i0, j0], d[i0, j0], f[i0, j0] = 2.0, 0.0, 2.0 * gamma, 0.0, cap
    active = np.ones((nr, nz), dtype=bool)
    fixed = np.zeros((nr, nz))
    active[:i0, :j0] = False                      # inside the magnet
    fixed[:i0, :j0] = np.nan
    active[i0:, 0] = False                        # boundary 6 and corners E, F: Phi = 0
    for arr in arrs:
        arr[~active] = 0.0
    return Stencil(a, b, c, d, e, f, active, fixed, dr, dz)


def dirichlet_stencil(r1: float, z1: float, dr: float, dz: Optional[float],
                      g: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Stencil:
    """Eq. 2.18 inside, the axis rule (eq. 2.28) at r = 0, and Dirichlet data
    ``g(r, z)`` on z = 0, z = z1 and r = r1: the operator of the magnet problem
    on a box, for tests against exact axisymmetric harmonic functions.

    Parameters
    ----------
    r1, z1 : float
        Box size.
    dr : float
        Radial spacing.
    dz : float or None
        Axial spacing (None: `dr`).
    g : callable
        Boundary values ``g(r, z)`` (vectorised).

    Returns
    -------
    Stencil
        The rows; the Dirichlet nodes are fixed at ``g``.
    """
    dz = dr if dz is None else dz
    _check_positive(r1=r1, z1=z1, dr=dr, dz=dz)
    i1, j1 = whole_spacings(r1, dr, "r1"), whole_spacings(z1, dz, "z1")
    nr, nz = i1 + 1, j1 + 1
    gamma = (dr / dz) ** 2
    arrs = _empty(nr, nz)
    _interior(arrs, gamma)
    _axis(arrs, gamma, slice(1, j1))
    active = np.ones((nr, nz), dtype=bool)
    active[:, 0] = active[:, j1] = active[i1, :] = False
    r, z = grid(nr, nz, dr, dz)
    fixed = np.where(active, 0.0, g(r, z))
    for arr in arrs:
        arr[~active] = 0.0
    return Stencil(*arrs, active, fixed, dr, dz)


def grid(nr: int, nz: int, dr: float, dz: float) -> Tuple[np.ndarray, np.ndarray]:
    """Coordinates ``r[i, j] = i dr``, ``z[i, j] = j dz``."""
    return np.meshgrid(np.arange(nr) * dr, np.arange(nz) * dz, indexing="ij")


# ------------------------------------------------------------------ operator

def _shift(p: np.ndarray, di: int, dj: int) -> np.ndarray:
    """``out[i, j] = p[i + di, j + dj]`` with zeros off the grid."""
    out = np.zeros_like(p)
    nr, nz = p.shape
    out[max(0, -di):nr - max(0, di), max(0, -dj):nz - max(0, dj)] = \
        p[max(0, di):nr - max(0, -di), max(0, dj):nz - max(0, -dj)]
    return out


def offdiag(st: Stencil, phi: np.ndarray) -> np.ndarray:
    """``a Phi[i+1] + b Phi[i-1] + c Phi[j+1] + d Phi[j-1]`` at every node."""
    return (st.a * _shift(phi, 1, 0) + st.b * _shift(phi, -1, 0) +
            st.c * _shift(phi, 0, 1) + st.d * _shift(phi, 0, -1))


def start(st: Stencil) -> np.ndarray:
    """Initial guess: 0 at the unknowns, the fixed values elsewhere (0 inside the magnet)."""
    return np.where(st.active, 0.0, np.nan_to_num(st.fixed))


def rhs_norm(st: Stencil) -> float:
    """||f|| of the unknowns, with the known (Dirichlet) neighbours moved into f."""
    known = np.where(st.active, 0.0, np.nan_to_num(st.fixed))
    feff = np.where(st.active, st.f - offdiag(st, known), 0.0)
    return float(np.sqrt(np.sum(feff * feff)))


def residual(st: Stencil, phi: np.ndarray) -> np.ndarray:
    """``f - A Phi`` on the unknowns (eq. 2.46), 0 elsewhere."""
    p = np.where(st.active, phi, np.nan_to_num(st.fixed))
    return np.where(st.active, st.f - offdiag(st, p) - st.e * p, 0.0)


def rel_residual(st: Stencil, phi: np.ndarray) -> float:
    """``||f - A Phi|| / ||f||`` (eq. 2.50)."""
    r = residual(st, phi)
    return float(np.sqrt(np.sum(r * r))) / rhs_norm(st)


def finish(st: Stencil, phi: np.ndarray) -> np.ndarray:
    """Phi with NaN inside the magnet."""
    return np.where(np.isnan(st.fixed), np.nan, phi)


# ------------------------------------------------------------------ solvers

@dataclass
class Result:
    """Outcome of an iterative solve."""

    phi: np.ndarray
    iterations: int
    residual: float
    converged: bool
    history: np.ndarray


def red_black_sor(st: Stencil, omega: float, tol: float = 0.5e-6, max_iter: int = 100000,
                  phi: Optional[np.ndarray] = None) -> Result:
    """Red-black SOR, Algorithm 2: per iteration all red nodes ((i + j) even),
    then all black ones, each by ``Phi += omega r / e`` (eq. 2.56) with the
    residual r taken at the update; stop when the norm of those residuals
    over ||f|| is below `tol` (eq. 2.50).  ``omega = 1`` is Gauss-Seidel in
    red-black order.
    """
    p = start(st) if phi is None else np.where(st.active, phi, np.nan_to_num(st.fixed))
    nr, nz = st.shape
    i, j = np.meshgrid(np.arange(nr), np.arange(nz), indexing="ij")
    colour = [(st.active & ((i + j) % 2 == k)) for k in (0, 1)]
    fn = rhs_norm(st)
    e = np.where(st.active, st.e, 1.0)
    hist = []
    for it in range(1, max_iter + 1):
        ss = 0.0
        for mask in colour:
            r = np.where(mask, st.f - offdiag(st, p) - st.e * p, 0.0)
            p = p + omega * r / e
            ss += float(np.sum(r * r))
        hist.append(math.sqrt(ss) / fn)
        if hist[-1] < tol:
            return Result(finish(st, p), it, hist[-1], True, np.array(hist))
    return Result(finish(st, p), max_iter, hist[-1], False, np.array(hist))


def jacobi(st: Stencil, tol: float = 0.5e-6, max_iter: int = 100000,
           phi: Optional[np.ndarray] = None) -> Result:
    """Jacobi iteration (eq. 2.39) with the relative residual of eq. 2.50."""
    p = start(st) if phi is None else np.where(st.active, phi, np.nan_to_num(st.fixed))
    fn = rhs_norm(st)
    e = np.where(st.active, st.e, 1.0)
    hist = []
    for it in range(1, max_iter + 1):
        r = np.where(st.active, st.f - offdiag(st, p) - st.e * p, 0.0)
        p = p + r / e
        hist.append(float(np.sqrt(np.sum(r * r))) / fn)
        if hist[-1] < tol:
            return Result(finish(st, p), it, hist[-1], True, np.array(hist))
    return Result(finish(st, p), max_iter, hist[-1], False, np.array(hist))


def solve_dense(st: Stencil) -> np.ndarray:
    """The discrete solution by a dense direct solve (grids of a few thousand nodes)."""
    idx = -np.ones(st.shape, dtype=np.int64)
    nodes = np.argwhere(st.active)
    idx[st.active] = np.arange(len(nodes))
    n = len(nodes)
    if n > 6000:
        raise ValueError(f"solve_dense is for small grids: {n} unknowns")
    A = np.zeros((n, n))
    rhs = np.zeros(n)
    known = np.nan_to_num(st.fixed)
    nr, nz = st.shape
    for k, (i, j) in enumerate(nodes):
        A[k, k] = st.e[i, j]
        rhs[k] = st.f[i, j]
        for coef, (ii, jj) in ((st.a, (i + 1, j)), (st.b, (i - 1, j)), (st.c, (i, j + 1)),
                               (st.d, (i, j - 1))):
            w = coef[i, j]
            if w == 0.0:
                continue
            if not (0 <= ii < nr and 0 <= jj < nz):
                raise ValueError(f"row ({i}, {j}) reaches outside the grid")
            if st.active[ii, jj]:
                A[k, idx[ii, jj]] += w
            else:
                rhs[k] -= w * known[ii, jj]
    x = np.linalg.solve(A, rhs)
    phi = known.copy()
    phi[st.active] = x
    return finish(st, phi)


# ------------------------------------------------------------------ omega

def rho_jacobi(width: float, height: float, dr: float, dz: Optional[float] = None,
               scale: float = 3.0) -> float:
    """Eq. A.1: the Jacobi spectral radius of the rectangle `scale` times the
    circumscribing one, ``(cos(pi/(3J)) + (dr/dz)^2 cos(pi/(3L))) / (1 + (dr/dz)^2)``
    with ``J = width/dr``, ``L = height/dz`` (``scale = 1`` is eq. 2.45)."""
    dz = dr if dz is None else dz
    _check_positive(width=width, height=height, dr=dr, dz=dz, scale=scale)
    g = (dr / dz) ** 2
    J, L = width / dr, height / dz
    return (math.cos(math.pi / (scale * J)) + g * math.cos(math.pi / (scale * L))) / (1.0 + g)


def omega_from_rho(rho: float) -> float:
    """Eq. 2.44: ``2 / (1 + sqrt(1 - rho^2))``."""
    return 2.0 / (1.0 + math.sqrt(1.0 - rho * rho))


def omega_estimate(width: float, height: float, dr: float, dz: Optional[float] = None) -> float:
    """Optimal SOR factor of source 002: eq. 2.44 with rho of eq. A.1."""
    return omega_from_rho(rho_jacobi(width, height, dr, dz))
