"""Open systems and Doppler broadening for ``nl.MaxwellBloch``.

With ``decay=``, ``dephasing=`` or ``doppler=`` the atoms are density
matrices :math:`\\rho` obeying the Lindblad master equation in the units of
eq. 4 of source 004 (docs/models/mbloch.md, "Open systems"):

.. math::

    \\dot\\rho = i[H_D, \\rho]
      + \\sum_c \\Gamma_c\\big(\\rho_{ff}\\,|t\\rangle\\langle t|
      - \\tfrac12\\{|f\\rangle\\langle f|, \\rho\\}\\big)
      - \\sum_{i\\ne j}\\gamma_{ij}\\rho_{ij}|i\\rangle\\langle j|,

with :math:`H_D` the Hermitian matrix of eq. 4 (:math:`\\dot\\psi = iH_D\\psi`),
channels c from level f to level t at rate :math:`\\Gamma_c`, and
:math:`\\gamma_{ij}` the pure dephasing of each coherence.  This module checks
those arguments, samples the velocity classes of :class:`Doppler` and hands
the open system to the solver (:func:`attach`).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Tuple

import numpy as np

from ..common import checks as _validate
from ..reference.mbloch import gaussian_line

__all__ = ["Doppler", "doppler_width", "check_decay", "check_dephasing", "level_factors",
           "expand_atoms", "density_from_amplitudes", "attach"]

_KB = 1.380649e-23          # J/K
_AMU = 1.66053906660e-27    # kg


def doppler_width(temperature: float, mass: float, wavelength: float, time_unit: float) -> float:
    """The standard deviation :math:`\\sigma_D = k\\sqrt{k_B T/M}` of the
    Doppler shift :math:`kv` of a Maxwell-Boltzmann gas, in the model's
    frequency unit (1 / `time_unit`).

    Parameters
    ----------
    temperature : float
        Kelvin (> 0).
    mass : float
        Atomic mass M in atomic mass units (e.g. 86.909 for 87Rb).
    wavelength : float
        Metres (k = 2 pi / wavelength).
    time_unit : float
        Seconds of the model's time unit.

    Returns
    -------
    float
    """
    T = _validate.real("temperature", temperature, positive=True)
    M = _validate.real("mass", mass, positive=True)
    lam = _validate.real("wavelength", wavelength, positive=True)
    tu = _validate.real("time_unit", time_unit, positive=True)
    return (2 * math.pi / lam) * math.sqrt(_KB * T / (M * _AMU)) * tu


@dataclass(frozen=True)
class Doppler:
    """Doppler broadening: velocity classes with Maxwell-Boltzmann weights
    and a Doppler factor per field mode.

    A class of Doppler shift :math:`\\delta = kv` detunes the transitions of
    mode l as an atom of ``line`` detuning :math:`f_l\\delta` would be
    (``factors[l - l_min]`` = :math:`f_l`: +1 co-propagating, -1
    counter-propagating, any real factor, e.g. a ratio of wave numbers; as
    ``factor_doppler_shift`` of the package maxwellbloch).  The classes sample
    a Gaussian of standard deviation ``width`` (or the one of `temperature`,
    `mass`, `wavelength`, `time_unit`: :func:`doppler_width`) by the midpoint
    rule on ``[-span, span]`` widths (:func:`nlsepy.mbloch.gaussian_line`).
    Every atom of the ``line`` is given every class (weights multiplied).

    Parameters
    ----------
    factors : sequence of float
        One factor per mode ``l_min .. l_max``.
    width : float, optional
        :math:`\\sigma_D` in the model's frequency unit.
    temperature, mass, wavelength, time_unit : float, optional
        Instead of `width` (kelvin, atomic mass units, metres, seconds).
    n_classes : int
        Velocity classes (default 32).
    span : float
        Half-span of the sampled shifts, in widths (default 4).
    """

    factors: Sequence[float]
    width: Optional[float] = None
    temperature: Optional[float] = None
    mass: Optional[float] = None
    wavelength: Optional[float] = None
    time_unit: Optional[float] = None
    n_classes: int = 32
    span: float = 4.0

    def sigma(self) -> float:
        """:math:`\\sigma_D` in the model's frequency unit."""
        gas = (self.temperature, self.mass, self.wavelength, self.time_unit)
        if self.width is not None:
            if any(v is not None for v in gas):
                raise ValueError("doppler: give width or (temperature, mass, wavelength, "
                                 "time_unit), not both")
            return _validate.real("doppler width", self.width, positive=True)
        if any(v is None for v in gas):
            raise ValueError(f"doppler: give width, or temperature, mass, wavelength and "
                             f"time_unit together, got {gas!r}")
        return doppler_width(*gas)

    def classes(self) -> Tuple[np.ndarray, np.ndarray]:
        """The classes' Doppler shifts and weights, shape ``(n_classes,)`` each."""
        n = _validate.count("doppler n_classes", self.n_classes, 1)
        span = _validate.real("doppler span", self.span, positive=True)
        return gaussian_line(n, self.sigma(), span)


def as_doppler(doppler: Any) -> Optional[Doppler]:
    """`doppler` as a :class:`Doppler` (a dict of its fields is taken too)."""
    if doppler is None or isinstance(doppler, Doppler):
        return doppler
    if isinstance(doppler, dict):
        try:
            return Doppler(**doppler)
        except TypeError as exc:
            raise ValueError(f"doppler: {exc}") from None
    raise TypeError(f"doppler must be nl.mbloch.Doppler or a dict of its fields, "
                    f"got {type(doppler).__name__}")


def check_decay(decay: Any, n_levels: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`decay` (``[(Gamma, from, to[, branching]), ...]``) as arrays
    ``(from, to, rate)``, rate = Gamma x branching; ValueError naming the
    channel and the value that is wrong."""
    if decay is None:
        decay = []
    if not isinstance(decay, (list, tuple)):
        raise TypeError(f"decay must be a list of (Gamma, from, to[, branching]), got "
                        f"{type(decay).__name__}")
    src, dst, rate = [], [], []
    for c, ch in enumerate(decay):
        if not isinstance(ch, (list, tuple)) or len(ch) not in (3, 4):
            raise ValueError(f"decay[{c}] must be (Gamma, from, to[, branching]), got {ch!r}")
        g = _validate.real(f"decay[{c}] rate Gamma", ch[0])
        if g < 0:
            raise ValueError(f"decay[{c}]: the rate Gamma must be >= 0, got {g!r}")
        b = 1.0 if len(ch) == 3 else _validate.real(f"decay[{c}] branching", ch[3])
        if not 0 <= b <= 1:
            raise ValueError(f"decay[{c}]: the branching must be in [0, 1], got {b!r}")
        for name, lev in (("from", ch[1]), ("to", ch[2])):
            if isinstance(lev, bool) or not isinstance(lev, (int, np.integer)):
                raise ValueError(f"decay[{c}]: {name} level must be an integer, got {lev!r}")
            if not 0 <= lev < n_levels:
                raise ValueError(f"decay[{c}]: {name} level {int(lev)} does not exist (levels "
                                 f"0..{n_levels - 1}: ground 0.., then excited)")
        if ch[1] == ch[2]:
            raise ValueError(f"decay[{c}]: from and to are the same level {int(ch[1])}")
        src.append(int(ch[1]))
        dst.append(int(ch[2]))
        rate.append(g * b)
    return (np.array(src, np.int32), np.array(dst, np.int32), np.array(rate, np.float64))


def check_dephasing(dephasing: Any, n_levels: int) -> Optional[np.ndarray]:
    """`dephasing` as the symmetric matrix :math:`\\gamma_{ij}` of the
    coherences (zero diagonal): given per level (shape ``(n,)``,
    :math:`\\gamma_{ij} = \\gamma_i + \\gamma_j`) or per coherence (shape
    ``(n, n)``, symmetric, the diagonal ignored)."""
    if dephasing is None:
        return None
    g = np.asarray(dephasing)
    if g.dtype.kind not in "fiu" or g.dtype == bool:
        raise TypeError(f"dephasing must be a real array, got dtype {g.dtype}")
    g = g.astype(np.float64)
    if not np.all(np.isfinite(g)) or np.any(g < 0):
        q = int(np.argmax(~np.isfinite(g.ravel()) | (g.ravel() < 0)))
        at = tuple(int(i) for i in np.unravel_index(q, g.shape))
        raise ValueError(f"dephasing rates must be finite and >= 0, got {float(g.ravel()[q])!r} "
                         f"at index {at}")
    if g.shape == (n_levels,):
        g = g[:, None] + g[None, :]
    elif g.shape == (n_levels, n_levels):
        if not np.array_equal(g, g.T):
            i, j = np.argwhere(g != g.T)[0]
            raise ValueError(f"dephasing per coherence must be symmetric: [{i}, {j}] = "
                             f"{float(g[i, j])!r}, [{j}, {i}] = {float(g[j, i])!r}")
        g = g.copy()
    else:
        raise ValueError(f"dephasing must have shape ({n_levels},) (per level) or "
                         f"({n_levels}, {n_levels}) (per coherence), got {g.shape}")
    np.fill_diagonal(g, 0.0)
    return g


def level_factors(factors: Any, modes: Tuple[int, int], F: np.ndarray) -> np.ndarray:
    """Per level c_i such that every coupled pair (ground m, excited n, mode
    l = n - m, F[m, n] != 0) has :math:`c_m - c_{n_g+n} = f_l`: a class of
    shift :math:`\\delta` shifts level i by :math:`c_i\\delta`.  ValueError
    when the factors are inconsistent around a loop of couplings."""
    n_g, n_e = F.shape
    nf = modes[1] - modes[0] + 1
    f = np.asarray(factors, dtype=np.float64).ravel()
    if f.shape != (nf,) or not np.all(np.isfinite(f)):
        raise ValueError(f"doppler factors must be {nf} finite numbers (one per mode "
                         f"{modes[0]}..{modes[1]}), got {factors!r}")
    n = n_g + n_e
    adj: list = [[] for _ in range(n)]
    for m in range(n_g):
        for e in range(n_e):
            l = e - m
            if modes[0] <= l <= modes[1] and F[m, e] != 0:
                d = f[l - modes[0]]
                adj[m].append((n_g + e, -d, l))
                adj[n_g + e].append((m, d, l))
    c = np.full(n, np.nan)
    for root in range(n):
        if not np.isnan(c[root]):
            continue
        c[root] = 0.0
        todo = deque([root])
        while todo:
            i = todo.popleft()
            for j, d, l in adj[i]:
                if np.isnan(c[j]):
                    c[j] = c[i] + d
                    todo.append(j)
                elif abs(c[j] - (c[i] + d)) > 1e-12 * (1 + abs(c[j])):
                    raise ValueError(f"doppler factors {[float(x) for x in f]} are inconsistent: levels {i} "
                                     f"and {j} (mode {l}) are joined by paths whose Doppler "
                                     f"shifts differ")
    return c


def expand_atoms(det: np.ndarray, w: np.ndarray, doppler: Doppler, modes: Tuple[int, int],
                 F: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every atom of the line times every velocity class (line atom major):
    detunings, weights and the level shifts ``(N, n_levels)``."""
    c = level_factors(doppler.factors, modes, F)
    dv, wv = doppler.classes()
    det2 = np.repeat(det, dv.size)
    w2 = (w[:, None] * wv[None, :]).ravel()
    shift = np.tile(dv, det.size)[:, None] * c[None, :]
    return det2, w2, shift


def density_from_amplitudes(psi: np.ndarray) -> np.ndarray:
    """:math:`\\rho_{ij} = \\psi_i\\psi_j^*` for every atom, ``(N, n, n)``."""
    return psi[:, :, None] * psi[:, None, :].conj()


def attach(solver: Any, mb: Any) -> None:
    """Make `solver` (over this process's atoms ``mb.local_slice``) solve
    the open system of `mb`."""
    own = mb.local_slice
    src, dst, rate = mb._decay
    shift = None if mb._shifts is None else np.ascontiguousarray(mb._shifts[own])
    solver.set_open(src, dst, rate, mb._dephasing, shift,
                    density_from_amplitudes(mb._initial_state[own]))


def open_bytes(n_levels: int, n_t: int, n_modes: int, n_atoms: int, threads: int,
               populations: bool) -> int:
    """Host bytes the CPU density-matrix march adds to a solver."""
    n2 = n_levels * n_levels
    per_thread = 16 * n_t * n_modes + (16 * n_t * n2 if populations else 0) + \
        8 * (10 * n2 * 16 + 16 * n_levels) + 1024
    return 16 * n2 * n_atoms + 8 * n_levels * n_atoms + 16 * n_t * n2 + threads * per_thread
