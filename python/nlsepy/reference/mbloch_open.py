"""Straightforward NumPy statement of one atom solve of an open
Maxwell-Bloch system: the Lindblad master equation of every atom
(docs/models/mbloch.md, "Open systems"; :mod:`nlsepy.mbloch.lindblad`)

.. math::

    \\dot\\rho = i[E_D + K(t), \\rho]
      + \\sum_c \\Gamma_c\\big(\\rho_{ff}|t\\rangle\\langle t|
      - \\tfrac12\\{|f\\rangle\\langle f|, \\rho\\}\\big)
      - \\sum_{i\\ne j}\\gamma_{ij}\\rho_{ij}|i\\rangle\\langle j|,

with the diagonal :math:`E_D` and the coupling :math:`K(t)` of eq. 4 of
source 004 (:mod:`nlsepy.reference.mbloch`), stepped over the time grid by
the RK4 of algorithm 2 (the midpoint stages at the mean coupling of
:math:`t_{k-1}` and :math:`t_k`), dense matrices vectorised over the atoms;
the polarisation of eq. 6 as :math:`P_l = \\beta\\sum_D w_D \\sum_m F_{m,m+l}
\\rho^D_{b_{m+l} a_m}`.  It is the reference that the C and CUDA open
solvers are checked and timed against.
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np

__all__ = ["coupling", "lindblad_atoms"]


def coupling(eps: np.ndarray, F: np.ndarray, modes: Tuple[int, int]) -> np.ndarray:
    """The Hermitian coupling K of eq. 4 at one time: ``K[m, n_g + n] =
    F[m, n] conj(eps_{n-m}) / 2`` and its conjugate transpose, for n - m in
    the mode set; ``eps`` of shape ``(N_F,)``."""
    n_g, n_e = F.shape
    K = np.zeros((n_g + n_e, n_g + n_e), complex)
    for m in range(n_g):
        for n in range(n_e):
            l = n - m
            if modes[0] <= l <= modes[1]:
                K[n_g + n, m] = 0.5 * F[m, n] * eps[l - modes[0]]
                K[m, n_g + n] = np.conj(K[n_g + n, m])
    return K


def lindblad_atoms(F: np.ndarray, modes: Tuple[int, int], energies: np.ndarray,
                   weights: np.ndarray, rho0: np.ndarray, fields: np.ndarray, h_t: float,
                   beta: float, decay: Sequence[Tuple[float, int, int]] = (),
                   dephasing: Optional[np.ndarray] = None
                   ) -> Tuple[np.ndarray, np.ndarray, float]:
    """Every atom over the time grid at `fields`.

    Parameters
    ----------
    F : numpy.ndarray
        ``(n_g, n_e)`` coupling matrix.
    modes : (int, int)
        ``(l_min, l_max)``.
    energies : numpy.ndarray
        ``(N, n)``: each atom's diagonal of eq. 4 (level shifts included).
    weights : numpy.ndarray
        ``(N,)``.
    rho0 : numpy.ndarray
        ``(N, n, n)`` initial density matrices.
    fields : numpy.ndarray
        ``(n_t, N_F)``.
    h_t, beta : float
        Time step and the coupling constant of eq. 2.
    decay : sequence of (rate, from, to)
        Decay channels.
    dephasing : numpy.ndarray, optional
        ``(n, n)`` symmetric rates of the coherences.

    Returns
    -------
    P : numpy.ndarray
        ``(n_t, N_F)`` polarisation of eq. 6.
    rho : numpy.ndarray
        ``(n_t, n, n)``: :math:`\\sum_D w_D\\rho_D(t_k)`.
    trace_deviation : float
        :math:`\\max |\\mathrm{Tr}\\rho - 1|`.
    """
    n = energies.shape[1]
    out = np.zeros(n)
    for g, f, _ in decay:
        out[f] += g
    damp = 0.5 * (out[:, None] + out[None, :]) + (0 if dephasing is None else dephasing)
    np.fill_diagonal(damp, out)
    dE = energies[:, :, None] - energies[:, None, :]

    def deriv(r: np.ndarray, K: np.ndarray) -> np.ndarray:
        d = 1j * (dE * r + K @ r - r @ K) - damp * r
        for g, f, t in decay:
            d[:, t, t] += g * r[:, f, f]
        return d

    n_g = F.shape[0]
    pairs = [(l - modes[0], n_g + m + l, m, F[m, m + l]) for l in range(modes[0], modes[1] + 1)
             for m in range(n_g) if 0 <= m + l < F.shape[1]]

    def record(r: np.ndarray, k: int) -> None:
        rw = np.einsum("d,dij->ij", weights, r)
        rho[k] = rw
        for L, e, m, f in pairs:
            P[k, L] += beta * f * rw[e, m]

    n_t = fields.shape[0]
    P = np.zeros(fields.shape, complex)
    rho = np.zeros((n_t, n, n), complex)
    r = rho0.astype(complex).copy()
    record(r, 0)
    dev = float(np.abs(np.trace(r, axis1=1, axis2=2).real - 1).max())
    Kp = coupling(fields[0], F, modes)
    for k in range(1, n_t):
        Kk = coupling(fields[k], F, modes)
        Km = 0.5 * (Kp + Kk)
        k1 = h_t * deriv(r, Kp)
        k2 = h_t * deriv(r + 0.5 * k1, Km)
        k3 = h_t * deriv(r + 0.5 * k2, Km)
        k4 = h_t * deriv(r + k3, Kk)
        r = r + (k1 + 2 * k2 + 2 * k3 + k4) / 6
        record(r, k)
        dev = max(dev, float(np.abs(np.trace(r, axis1=1, axis2=2).real - 1).max()))
        Kp = Kk
    return P, rho, dev
