"""Straightforward NumPy/SciPy statement of the DEC GPE of source 001.

Kivioja, Mönkölä, Rossi (source 001), eqs. 8 and 12: the operator::

    (H psi)_i = 1/(2|B_i|) sum_j |F_ij|/|E*_ij| (psi_i - psi_j) + (V_i + g|psi_i|^2) psi_i

assembled as a sparse matrix over the whole tiled grid (every block, every
face; the neighbours outside the cuboid dropped for ``bc="zero"``, wrapped
for ``bc="periodic"``), and the leapfrog step ``psi(n+1) = psi(n-1) -
2 i dt H psi(n)``.  It reads the geometry of a :class:`nlsepy.DecGPE` (its
block table, blocks, spacing, trap and potential) and never its kernels.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["laplacian_matrix", "hamiltonian_apply", "leapfrog"]


def laplacian_matrix(sim: Any) -> Any:
    """The kinetic operator ``K = -1/2 L`` of eq. 8 on `sim`'s grid (CSR).

    Parameters
    ----------
    sim : nlsepy.DecGPE
        The grid (blocks, spacing, boundary).

    Returns
    -------
    scipy.sparse.csr_matrix
        Shape ``(sim.size, sim.size)``.
    """
    from scipy import sparse
    blk = sim.block
    C = blk.cells
    nx, ny, nz = sim.blocks
    n = np.array([nx, ny, nz])
    w = 0.5 * blk.nbr_area / (blk.nbr_dual * blk.volumes[blk.nbr_row]) / sim.spacing ** 2
    bz, by, bx = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    b = np.stack([bx.ravel(), by.ravel(), bz.ravel()], axis=1)          # (nb, 3)
    nbk = b[:, None, :] + blk.nbr_offset[None, :, :]                     # (nb, K, 3)
    outside = np.any((nbk < 0) | (nbk >= n), axis=2)
    nbk = nbk % n
    i = (np.arange(len(b))[:, None] * C + blk.nbr_row[None, :])
    j = ((nbk[..., 2] * ny + nbk[..., 1]) * nx + nbk[..., 0]) * C + blk.nbr_cell[None, :]
    ww = np.broadcast_to(w, i.shape)
    keep = ~outside if sim.bc == "zero" else np.ones_like(outside)
    N = sim.size
    off = sparse.csr_matrix((-ww[keep], (i[keep], j[keep])), shape=(N, N))
    diag = np.bincount(i.ravel(), weights=ww.ravel(), minlength=N)
    return (off + sparse.diags(diag)).tocsr()


def potential(sim: Any) -> np.ndarray:
    """Trap plus potential array at every circumcentre."""
    p = sim.positions
    V = 0.5 * (np.asarray(sim.trap) ** 2 * p ** 2).sum(axis=1)
    if sim.V is not None:
        V = V + sim.V
    return V


def hamiltonian_apply(sim: Any, psi: np.ndarray) -> np.ndarray:
    """``H(psi) psi`` of eq. 8 in complex128."""
    psi = np.asarray(psi, dtype=np.complex128)
    return laplacian_matrix(sim) @ psi + (potential(sim) + sim.g * np.abs(psi) ** 2) * psi


def leapfrog(sim: Any, psi_prev: np.ndarray, psi: np.ndarray, steps: int, dt: float) -> np.ndarray:
    """`steps` leapfrog steps of eq. 12 from ``(psi(-dt), psi(0))``; returns ``psi(steps dt)``."""
    K = laplacian_matrix(sim)
    V = potential(sim)
    a = np.asarray(psi_prev, dtype=np.complex128)
    b = np.asarray(psi, dtype=np.complex128)
    for _ in range(steps):
        a, b = b, a - 2j * dt * (K @ b + (V + sim.g * np.abs(b) ** 2) * b)
    return b
