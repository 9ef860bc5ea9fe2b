"""Straightforward NumPy implementations of nlsepy's schemes.

Whole-array expressions (``roll`` and fancy indexing), no kernels: an
independent statement of each scheme used to cross-check the C and CUDA
backends in the tests and as the baseline of the benchmarks.  The classes
take NumPy arrays, or CuPy arrays to run the same expressions on a GPU.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

__all__ = ["NLSEReference"]


class NLSEReference:
    """RK4 + CD/2SHOC for the NLSE in NumPy (same scheme as :class:`nlsepy.NLSE`).

    Parameters
    ----------
    psi0 : numpy.ndarray
        Complex initial state (its dtype sets the precision).
    spacing : sequence of float
        Spacing per axis.
    a, s : float
        Coefficients.
    V : numpy.ndarray or None
        Static potential.
    scheme : {"cd", "2shoc"}
        Laplacian.
    bc : {"dirichlet", "msd", "l0", "periodic", "one-sided"}
        Boundary condition.
    dt : float
        Time step.
    xp : module, optional
        Array namespace: ``numpy`` (default) or ``cupy``.
    """

    def __init__(self, psi0: np.ndarray, spacing: Sequence[float], a: float, s: float,
                 V: Optional[np.ndarray], scheme: str, bc: str, dt: float,
                 xp: Any = np) -> None:
        self.xp = xp
        self.psi = xp.array(psi0)
        real = self.psi.real.dtype.type
        self.nd = self.psi.ndim
        self.ih2 = [real(1.0 / (h * h)) for h in spacing]
        self.h2 = [real(h * h) for h in spacing]
        self.a, self.s, self.dt = real(a), real(s), real(dt)
        self.V = None if V is None else xp.asarray(V, dtype=real)
        self.scheme, self.bc = scheme, bc
        if bc != "periodic":
            edge = xp.zeros(self.psi.shape, bool)
            for ax, n in enumerate(self.psi.shape):
                sl = [slice(None)] * self.nd
                sl[ax] = [0, n - 1]
                edge[tuple(sl)] = True
            self.edge = edge
            self.inward = xp.ix_(*[xp.clip(xp.arange(n), 1, n - 2) for n in self.psi.shape])

    def _N(self, u: np.ndarray) -> np.ndarray:
        n = self.s * (u.real ** 2 + u.imag ** 2)
        return n if self.V is None else n - self.V

    def _lap2(self, u: np.ndarray) -> np.ndarray:
        roll = self.xp.roll
        out = self.xp.zeros_like(u)
        for ax in range(self.nd):
            out += self.ih2[ax] * (roll(u, 1, ax) + roll(u, -1, ax) - 2 * u)
        return out

    def _one_sided(self, u: np.ndarray) -> np.ndarray:
        w = self.xp.asarray([2.0, -5.0, 4.0, -1.0])
        lo = (w * u[:4]).sum() * self.ih2[0]
        hi = (w * u[::-1][:4]).sum() * self.ih2[0]
        return lo, hi

    def _lap(self, u: np.ndarray) -> np.ndarray:
        D = self._lap2(u)
        if self.scheme == "cd":
            return D
        if self.bc != "periodic":
            e = self.edge
            if self.bc == "dirichlet":
                D[e] = (-self._N(u) * u / self.a)[e]
            elif self.bc == "l0":
                D[e] = 0
            elif self.bc == "msd":
                q = self.inward
                f = (D[q] / u[q]).real + (self._N(u)[q] - self._N(u)) / self.a
                D[e] = (f * u)[e]
            elif self.bc == "one-sided":
                D[0], D[-1] = self._one_sided(u)
        roll = self.xp.roll
        L = D.copy()
        for ax in range(self.nd):
            L -= (roll(D, 1, ax) + roll(D, -1, ax) - 2 * D) / 12
        for i in range(self.nd):
            for j in range(i + 1, self.nd):
                c = (self.ih2[i] + self.ih2[j]) / 12
                diag = sum(roll(roll(u, si, i), sj, j) for si in (1, -1) for sj in (1, -1))
                edge = roll(u, 1, i) + roll(u, -1, i) + roll(u, 1, j) + roll(u, -1, j)
                L += c * (diag - 2 * edge + 4 * u)
        return L

    def F(self, u: np.ndarray) -> np.ndarray:
        """Time derivative with the boundary condition applied."""
        F = 1j * (self.a * self._lap(u) + self._N(u) * u)
        if self.bc == "periodic":
            return F
        e = self.edge
        if self.bc == "dirichlet":
            F[e] = 0
        elif self.bc == "l0":
            F[e] = (1j * self._N(u) * u)[e]
        elif self.bc == "msd":
            q = self.inward
            F[e] = (1j * (F[q] / u[q]).imag * u)[e]
        elif self.bc == "one-sided":
            lo, hi = self._one_sided(u)
            N = self._N(u)
            F[0] = 1j * (self.a * lo + N[0] * u[0])
            F[-1] = 1j * (self.a * hi + N[-1] * u[-1])
        return F

    def step(self, n: int = 1) -> None:
        """Advance `n` classic RK4 steps (NLSEmagic eq. 3)."""
        dt = self.dt
        for _ in range(n):
            u = self.psi
            k1 = self.F(u)
            k2 = self.F(u + (dt / 2) * k1)
            k3 = self.F(u + (dt / 2) * k2)
            k4 = self.F(u + dt * k3)
            self.psi = u + (dt / 6) * (k1 + 2 * k2 + 2 * k3 + k4)
