"""Straightforward NumPy statement of the Maxwell-Bloch model and scheme of source 004.

Demeter, "Solving the Maxwell-Bloch equations for resonant nonlinear optics
using GPUs" (source 004), sections 2-3.  Atoms with ``N_g`` ground levels
:math:`a_m` and ``N_e`` excited levels :math:`b_n`, an inhomogeneously
broadened ensemble sampled by ``N_Delta`` atoms of detuning :math:`\\Delta_D`
and weight :math:`w_D \\approx g(\\Delta_D)\\,d\\Delta`, and field modes
:math:`\\varepsilon_l`, :math:`l \\in \\{l_{min}, \\dots, l_{max}\\}`, in
retarded time :math:`t = t' - z/c`.

Units (docs/physics.md section 5).  Fields are measured in Rabi-frequency units,
:math:`\\varepsilon_l \\to d_{eg}\\varepsilon_l/\\hbar`, so the coupling of
eq. 4 reads :math:`\\tfrac12 \\varepsilon_l`, and eqs. 2 and 6 combine into
the form of algorithm 1, lines 5 and 10,

.. math::

    \\partial_z \\varepsilon_l = i P_l, \\qquad
    P_l = \\beta \\sum_{D,m} w_D\\, F_{m,m+l}\\, a^{D*}_m b^D_{m+l},

with :math:`\\beta = \\mathcal{N} d_{eg}^2 k_0 / (\\epsilon_0 \\epsilon \\hbar)`
(the source's :math:`\\beta = \\mathcal{N} d_{eg} k_0/\\epsilon_0\\epsilon`
times :math:`d_{eg}/\\hbar`).  Time is in any unit; detunings and level
energies are angular frequencies in its inverse; z in the unit of
:math:`1/\\beta`.  For a two-level line of shape g the small-signal absorption
coefficient of the pulse area is :math:`\\alpha = \\pi \\beta g(0)`
(:func:`absorption_coefficient`), and the McCall-Hahn area theorem reads
:math:`\\partial_z\\theta = -(\\alpha/2)\\sin\\theta` with
:math:`\\theta = \\int \\varepsilon\\, dt`.

The Bloch part is eq. 4 (``F`` indexed ``F[m, n]``: ground m, excited n, as in
eqs. 4 and 6),

.. math::

    \\partial_t a_m = i(m(\\kappa_g - \\delta) + \\Delta) a_m
        + \\tfrac{i}{2} \\sum_l \\varepsilon_l^* F_{m,m+l} b_{m+l}, \\qquad
    \\partial_t b_n = i n(\\kappa_e - \\delta) b_n
        + \\tfrac{i}{2} \\sum_l \\varepsilon_l F_{n-l,n} a_{n-l},

i.e. :math:`\\partial_t\\psi = i(E_D\\psi + K(z, t)\\psi)` with the diagonal
:math:`E_D` (eq. 5's :math:`-\\hat H_A`) and the Hermitian off-diagonal blocks
:math:`K = [[0, C^\\dagger], [C, 0]]`, :math:`C_{nm} = \\tfrac12
\\varepsilon_{n-m} F_{m,n}` (eq. 5's :math:`-\\hat H_I`).

The scheme is algorithm 1 with the RK4 of algorithm 2: per z point, every
atom is stepped over the time grid by RK4 whose midpoint stages use the mean
:math:`\\tfrac12(\\hat H_{k-1} + \\hat H_k)`, vectorised over atoms (one Python
loop over time steps, as the method is a time march); the polarisation is the
weighted reduction over atoms (line 5, with the conjugate of eq. 6); the
fields are advanced by Adams-Bashforth 2 (line 10).  The first step
:math:`z_0 \\to z_1` is made by ``euler_substeps`` explicit Euler steps of
:math:`h_z/\\text{euler\\_substeps}` (the "first-order Euler method with a
smaller spatial step" of section 3), the atoms being solved at each sub-step.
The norm monitor is :math:`\\max_{z,t,D} ||\\psi|^2 - 1|`.

It is the reference that the C/CUDA implementation ``nl.MaxwellBloch`` is
checked and timed against.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

__all__ = [
    "MaxwellBlochModel", "MaxwellBlochResult", "solve", "time_grid",
    "gaussian_line", "lorentzian_line", "single_line", "absorption_coefficient",
    "sech_pulse", "gaussian_pulse", "franck_condon", "area_theorem",
]


# --------------------------------------------------------------------- helpers

def time_grid(h_t: float, n_t: int) -> np.ndarray:
    """The time grid :math:`t_k = k h_t`, ``k = 0 .. n_t - 1`` (section 3).

    Parameters
    ----------
    h_t : float
        Time step, > 0.
    n_t : int
        Number of grid points, >= 2.

    Returns
    -------
    numpy.ndarray
        Shape ``(n_t,)``.
    """
    h_t = _positive(h_t, "h_t")
    if int(n_t) != n_t or n_t < 2:
        raise ValueError(f"n_t must be an integer >= 2, got {n_t!r}")
    return h_t * np.arange(int(n_t), dtype=float)


def _positive(x: float, name: str) -> float:
    x = float(x)
    if not (math.isfinite(x) and x > 0):
        raise ValueError(f"{name} must be finite and > 0, got {x!r}")
    return x


def _line(n: int, span: float, density) -> Tuple[np.ndarray, np.ndarray]:
    if int(n) != n or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    n = int(n)
    d = 2.0 * span / n
    det = -span + d * (np.arange(n) + 0.5)
    return det, density(det) * d


def gaussian_line(n: int, sigma: float, span: float = 5.0) -> Tuple[np.ndarray, np.ndarray]:
    """Gaussian line :math:`g(\\Delta) = e^{-\\Delta^2/2\\sigma^2}/(\\sigma\\sqrt{2\\pi})`
    sampled by ``n`` atoms.

    Midpoint rule on :math:`[-\\text{span}\\,\\sigma, \\text{span}\\,\\sigma]`:
    :math:`\\Delta_D = -L + (D + \\tfrac12) d\\Delta`, :math:`w_D = g(\\Delta_D) d\\Delta`
    (not renormalised; the weights sum to the part of the line in the span).
    The discrete ensemble rephases after :math:`2\\pi/d\\Delta`; keep the time
    window shorter than that.

    Parameters
    ----------
    n : int
        Number of atoms N_Delta.
    sigma : float
        Standard deviation of the line (angular frequency), > 0.
    span : float
        Half-width of the sampled interval in units of ``sigma``.

    Returns
    -------
    detunings, weights : numpy.ndarray
        Shape ``(n,)`` each.
    """
    sigma = _positive(sigma, "sigma")
    span = _positive(span, "span")
    return _line(n, span * sigma,
                 lambda x: np.exp(-0.5 * (x / sigma) ** 2) / (sigma * math.sqrt(2 * math.pi)))


def lorentzian_line(n: int, gamma: float, span: float = 20.0) -> Tuple[np.ndarray, np.ndarray]:
    """Lorentzian line :math:`g(\\Delta) = (\\gamma/\\pi)/(\\Delta^2 + \\gamma^2)`
    (``gamma`` the half width at half maximum) sampled by ``n`` atoms on
    :math:`[-\\text{span}\\,\\gamma, \\text{span}\\,\\gamma]`, as :func:`gaussian_line`.

    Parameters
    ----------
    n : int
        Number of atoms.
    gamma : float
        Half width at half maximum, > 0.
    span : float
        Half-width of the sampled interval in units of ``gamma``.

    Returns
    -------
    detunings, weights : numpy.ndarray
    """
    gamma = _positive(gamma, "gamma")
    span = _positive(span, "span")
    return _line(n, span * gamma, lambda x: (gamma / math.pi) / (x * x + gamma * gamma))


def single_line(detuning: float = 0.0) -> Tuple[np.ndarray, np.ndarray]:
    """A homogeneous ensemble: one atom of weight 1 at ``detuning``."""
    return np.array([float(detuning)]), np.array([1.0])


def absorption_coefficient(beta: float, g0: float) -> float:
    """Small-signal area absorption coefficient :math:`\\alpha = \\pi\\beta g(0)`
    of a two-level line (F = 1) in this module's units.

    From eq. 4 to first order, :math:`b = \\tfrac{i}{2}\\int^t \\varepsilon
    e^{i\\Delta t'}dt'`, so :math:`\\partial_z\\theta = \\int dt\\, iP =
    -\\tfrac{\\beta}{2}\\theta\\int g(\\Delta)\\int_0^\\infty e^{-i\\Delta\\tau}
    d\\tau\\, d\\Delta = -\\tfrac{\\pi\\beta g(0)}{2}\\theta` for a symmetric g.
    """
    return math.pi * float(beta) * float(g0)


def area_theorem(theta0, alpha_z):
    """Closed-form McCall-Hahn area: :math:`\\tan(\\theta/2) = \\tan(\\theta_0/2)
    e^{-\\alpha z/2}`, on the branch continuous in z (``theta`` stays in the
    same interval :math:`(2k\\pi - \\pi, 2k\\pi + \\pi)` as ``theta0``)."""
    theta0 = np.asarray(theta0, dtype=float)
    k = np.round(theta0 / (2 * np.pi))
    r = theta0 - 2 * np.pi * k
    return 2 * np.pi * k + 2 * np.arctan(np.tan(r / 2) * np.exp(-np.asarray(alpha_z) / 2))


def _pulse(t, shape, width, delay, area, amplitude, norm):
    t = np.asarray(t, dtype=float)
    width = _positive(width, "width")
    if (area is None) == (amplitude is None):
        raise ValueError("give exactly one of area or amplitude")
    amp = float(area) / (norm * width) if area is not None else float(amplitude)
    if not math.isfinite(amp):
        raise ValueError("area/amplitude must be finite")
    return amp * shape((t - float(delay)) / width)


def sech_pulse(t, width: float, delay: float, *, area: Optional[float] = None,
               amplitude: Optional[float] = None) -> np.ndarray:
    """:math:`\\varepsilon(0, t) = A\\,\\mathrm{sech}((t - t_0)/\\tau)`, area :math:`\\pi A\\tau`.

    Parameters
    ----------
    t : array_like
        Time grid.
    width : float
        :math:`\\tau` > 0.
    delay : float
        :math:`t_0`.
    area, amplitude : float
        Exactly one: the pulse area :math:`\\int\\varepsilon dt` or the peak :math:`A`.
        (A 2pi sech pulse has :math:`A = 2/\\tau`.)
    """
    return _pulse(t, lambda x: 1.0 / np.cosh(x), width, delay, area, amplitude, math.pi)


def gaussian_pulse(t, width: float, delay: float, *, area: Optional[float] = None,
                   amplitude: Optional[float] = None) -> np.ndarray:
    """:math:`\\varepsilon(0, t) = A e^{-(t-t_0)^2/2\\tau^2}`, area :math:`A\\tau\\sqrt{2\\pi}`.

    Parameters as :func:`sech_pulse`.
    """
    return _pulse(t, lambda x: np.exp(-0.5 * x * x), width, delay, area, amplitude,
                  math.sqrt(2 * math.pi))


def franck_condon(n_g: int, n_e: int, displacement: float) -> np.ndarray:
    """Overlaps :math:`F_{m,n} = \\langle g, m | e, n\\rangle` of two harmonic
    oscillators of equal frequency, the excited one displaced by ``displacement``
    (in units of the oscillator length; Huang-Rhys factor :math:`S = d^2/2`).

    With :math:`|e, n\\rangle = D(\\lambda)|n\\rangle`, :math:`\\lambda = d/\\sqrt2`,
    the identities :math:`aD = D(a + \\lambda)` and :math:`a^\\dagger D =
    D(a^\\dagger + \\lambda)` give :math:`F_{m,0} = e^{-\\lambda^2/2}
    \\lambda^m/\\sqrt{m!}` and :math:`\\sqrt{n+1} F_{m,n+1} = \\sqrt{m}F_{m-1,n}
    - \\lambda F_{m,n}`.  Hence :math:`|F_{m,0}|^2 = e^{-S}S^m/m!` and
    :math:`F_{m,n} = \\sqrt{n!/m!}\\,\\lambda^{m-n}e^{-S/2}L_n^{(m-n)}(S)` for m >= n.
    These are the amplitude factors of eqs. 4 and 6 (squared, the usual
    Franck-Condon factors).

    Parameters
    ----------
    n_g, n_e : int
        Numbers of ground and excited vibrational levels, >= 1.
    displacement : float
        Dimensionless displacement d.

    Returns
    -------
    numpy.ndarray
        Shape ``(n_g, n_e)``, real.
    """
    for v, name in ((n_g, "n_g"), (n_e, "n_e")):
        if int(v) != v or v < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
    n_g, n_e = int(n_g), int(n_e)
    lam = float(displacement) / math.sqrt(2.0)
    if not math.isfinite(lam):
        raise ValueError("displacement must be finite")
    m_max = n_g + n_e  # the recursion in n needs rows up to m + n
    F = np.zeros((m_max, n_e))
    m = np.arange(m_max)
    logfact = np.array([math.lgamma(k + 1.0) for k in m])
    with np.errstate(divide="ignore"):
        F[:, 0] = np.where(m == 0, 1.0, np.exp(m * np.log(abs(lam)) - 0.5 * logfact)
                           * np.sign(lam) ** m if lam != 0 else (m == 0)) * math.exp(-lam * lam / 2)
    sq = np.sqrt(m)
    for n in range(n_e - 1):
        shifted = np.concatenate(([0.0], F[:-1, n]))
        F[:, n + 1] = (sq * shifted - lam * F[:, n]) / math.sqrt(n + 1)
    return F[:n_g].copy()


# ----------------------------------------------------------------------- model

@dataclass
class MaxwellBlochModel:
    """The Maxwell-Bloch medium of source 004, section 2.

    Parameters
    ----------
    n_g, n_e : int
        Numbers of ground and excited levels.
    modes : (int, int)
        ``(l_min, l_max)``; mode l couples ground m to excited m + l.
    F : array_like
        Real coupling matrix of shape ``(n_g, n_e)``, ``F[m, n]`` between
        ground m and excited n (eqs. 4, 6).
    detunings, weights : array_like
        :math:`\\Delta_D` and :math:`w_D` of the ``N_Delta`` atoms (weights >= 0).
    beta : float
        Coupling constant (module docstring).
    kappa_g, kappa_e, delta : float
        Level spacings of the ground and excited manifolds and mode spacing;
        diagonal energies :math:`m(\\kappa_g - \\delta) + \\Delta` and
        :math:`n(\\kappa_e - \\delta)` (eq. 4).
    initial_state : array_like, optional
        Shape ``(n_g + n_e,)`` (same for all atoms) or ``(N_Delta, n_g + n_e)``;
        default all atoms in ground level 0.
    """

    n_g: int
    n_e: int
    modes: Tuple[int, int]
    F: np.ndarray
    detunings: np.ndarray
    weights: np.ndarray
    beta: float
    kappa_g: float = 0.0
    kappa_e: float = 0.0
    delta: float = 0.0
    initial_state: Optional[np.ndarray] = None

    def __post_init__(self) -> None:
        for v, name in ((self.n_g, "n_g"), (self.n_e, "n_e")):
            if int(v) != v or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        self.n_g, self.n_e = int(self.n_g), int(self.n_e)
        try:
            l_min, l_max = (int(x) for x in self.modes)
        except (TypeError, ValueError):
            raise ValueError(f"modes must be (l_min, l_max), got {self.modes!r}") from None
        if l_max < l_min:
            raise ValueError(f"modes is an empty mode set: l_max={l_max} < l_min={l_min}")
        self.modes = (l_min, l_max)
        F = np.asarray(self.F)
        if F.shape != (self.n_g, self.n_e):
            raise ValueError(f"F must have shape (n_g, n_e) = {(self.n_g, self.n_e)}, got {F.shape}")
        if np.iscomplexobj(F):
            if np.any(F.imag != 0):
                raise ValueError("F must be real (eq. 4 uses F unconjugated in both lines)")
            F = F.real
        F = F.astype(float)
        if not np.all(np.isfinite(F)):
            raise ValueError("F must be finite")
        self.F = F
        det = np.asarray(self.detunings, dtype=float).reshape(-1)
        w = np.asarray(self.weights, dtype=float).reshape(-1)
        if det.size < 1:
            raise ValueError("detunings must hold at least one atom")
        if w.shape != det.shape:
            raise ValueError(f"weights must have the shape of detunings {det.shape}, got {w.shape}")
        if not (np.all(np.isfinite(det))):
            raise ValueError("detunings must be finite")
        if not (np.all(np.isfinite(w)) and np.all(w >= 0)):
            raise ValueError("weights must be finite and >= 0")
        self.detunings, self.weights = det, w
        for v, name in ((self.beta, "beta"), (self.kappa_g, "kappa_g"),
                        (self.kappa_e, "kappa_e"), (self.delta, "delta")):
            if not math.isfinite(float(v)):
                raise ValueError(f"{name} must be finite, got {v!r}")
        self.beta = float(self.beta)
        n_lev = self.n_g + self.n_e
        if self.initial_state is None:
            psi0 = np.zeros((det.size, n_lev), dtype=complex)
            psi0[:, 0] = 1.0
        else:
            psi0 = np.asarray(self.initial_state, dtype=complex)
            if psi0.shape == (n_lev,):
                psi0 = np.broadcast_to(psi0, (det.size, n_lev)).copy()
            if psi0.shape != (det.size, n_lev):
                raise ValueError(f"initial_state must have shape ({n_lev},) or "
                                 f"({det.size}, {n_lev}), got {psi0.shape}")
            if not np.all(np.isfinite(psi0)):
                raise ValueError("initial_state must be finite")
        self.initial_state = psi0

    @property
    def n_modes(self) -> int:
        """N_F = l_max - l_min + 1."""
        return self.modes[1] - self.modes[0] + 1

    @property
    def n_atoms(self) -> int:
        """N_Delta."""
        return self.detunings.size

    def energies(self) -> np.ndarray:
        """Diagonal of eq. 4, :math:`E_D` of shape ``(N_Delta, n_g + n_e)``:
        :math:`m(\\kappa_g-\\delta) + \\Delta_D` then :math:`n(\\kappa_e-\\delta)`."""
        eg = np.arange(self.n_g) * (self.kappa_g - self.delta) + self.detunings[:, None]
        ee = np.broadcast_to(np.arange(self.n_e) * (self.kappa_e - self.delta),
                             (self.n_atoms, self.n_e))
        return np.concatenate([eg, ee], axis=1)

    def mode_index(self) -> Tuple[np.ndarray, np.ndarray]:
        """``(idx, mask)`` of shape ``(n_e, n_g)``: mode ``l = n - m`` as index
        ``l - l_min`` into the field array, and whether it is in the mode set."""
        n = np.arange(self.n_e)[:, None]
        m = np.arange(self.n_g)[None, :]
        l = n - m
        mask = (l >= self.modes[0]) & (l <= self.modes[1])
        return np.where(mask, l - self.modes[0], 0), mask

    def coupling(self, fields: np.ndarray) -> np.ndarray:
        """:math:`K = [[0, C^T], [C^*, 0]]` acting on row vectors, for fields of
        shape ``(..., N_F)``; :math:`C_{nm} = \\tfrac12\\varepsilon_{n-m}F_{m,n}`.

        Returns shape ``(..., n_g + n_e, n_g + n_e)`` so that
        :math:`\\partial_t\\psi = i(E\\psi + \\psi K)` row-wise is eq. 4.
        """
        idx, mask = self.mode_index()
        C = 0.5 * fields[..., idx] * np.where(mask, self.F.T, 0.0)      # (..., n_e, n_g)
        ng = self.n_g
        K = np.zeros(fields.shape[:-1] + (ng + self.n_e,) * 2, dtype=C.dtype)
        K[..., :ng, ng:] = np.swapaxes(C, -1, -2)          # (psi K)_n = sum_m a_m C_nm
        K[..., ng:, :ng] = C.conj()                         # (psi K)_m = sum_n b_n C*_nm
        return K

    def polarisation_matrix(self) -> np.ndarray:
        """``Q[l, m, n] = F[m, n]`` where ``n - m = l``, else 0: shape ``(N_F, n_g, n_e)``,
        so that :math:`P_l = \\beta\\sum_{mn} Q_{lmn} S_{mn}` with
        :math:`S_{mn} = \\sum_D w_D a^{D*}_m b^D_n` (algorithm 1, line 5; eq. 6)."""
        l = np.arange(self.modes[0], self.modes[1] + 1)[:, None, None]
        m = np.arange(self.n_g)[None, :, None]
        n = np.arange(self.n_e)[None, None, :]
        return np.where(n - m == l, self.F[None], 0.0)


@dataclass
class MaxwellBlochResult:
    """Output of :func:`solve`.

    Attributes
    ----------
    z : numpy.ndarray
        Saved positions, shape ``(n_save,)``.
    t : numpy.ndarray
        Time grid, shape ``(N_t,)``.
    fields : numpy.ndarray
        :math:`\\varepsilon_l(z, t)`, shape ``(n_save, N_t, N_F)``.
    populations : numpy.ndarray
        :math:`\\sum_D w_D|\\psi^D_i(z, t)|^2`, shape ``(n_save, N_t, n_g + n_e)``.
    norm_deviation : float
        :math:`\\max_{z,t,D}||\\psi|^2 - 1|` over every solved atom (Euler sub-steps included).
    runtime : float
        Wall time of the solve in seconds.
    """

    z: np.ndarray
    t: np.ndarray
    fields: np.ndarray
    populations: np.ndarray
    norm_deviation: float
    runtime: float


# ---------------------------------------------------------------------- scheme

def _atoms(model: MaxwellBlochModel, E: np.ndarray, psi0: np.ndarray, fields: np.ndarray,
           h_t: float, Q: np.ndarray, want_pop: bool, cdt) -> Tuple[np.ndarray, float, Optional[np.ndarray]]:
    """Algorithm 1, lines 2-7 at one z: RK4 (algorithm 2) over the time grid
    for all atoms; returns the polarisations ``(N_t, N_F)``, the norm deviation
    and, if asked, the populations ``(N_t, n_lev)``."""
    n_t = fields.shape[0]
    K = model.coupling(fields.astype(cdt))                     # (N_t, n_lev, n_lev)
    Kmid = 0.5 * (K[1:] + K[:-1])
    ih = cdt(1j * h_t)
    w = model.weights.astype(cdt)
    ng = model.n_g
    S = np.empty((n_t, ng, model.n_e), dtype=cdt)
    pop = np.empty((n_t, E.shape[1])) if want_pop else None
    dev = np.empty(n_t)
    psi = psi0.astype(cdt)

    def record(k: int, psi: np.ndarray) -> None:
        p2 = psi.real ** 2 + psi.imag ** 2
        dev[k] = np.abs(p2.sum(axis=1) - 1.0).max()
        S[k] = (w[:, None] * psi[:, :ng].conj()).T @ psi[:, ng:]
        if want_pop:
            pop[k] = model.weights @ p2

    record(0, psi)
    half = cdt(0.5)
    for k in range(1, n_t):
        k1 = ih * (E * psi + psi @ K[k - 1])
        k2 = ih * (E * (psi + half * k1) + (psi + half * k1) @ Kmid[k - 1])
        k3 = ih * (E * (psi + half * k2) + (psi + half * k2) @ Kmid[k - 1])
        y = psi + k3
        k4 = ih * (E * y + y @ K[k])
        psi = psi + (k1 + 2 * k2 + 2 * k3 + k4) / 6
        record(k, psi)
    P = model.beta * np.einsum("lmn,kmn->kl", Q, S)
    return P, float(dev.max()), pop


def solve(model: MaxwellBlochModel, fields0, h_t: float, h_z: float, n_z: int,
          save_every: int = 1, euler_substeps: int = 8,
          dtype: str = "complex128") -> MaxwellBlochResult:
    """Solve eqs. 2, 4, 6 by algorithms 1-2 on ``z_j = j h_z``, ``j = 0..n_z``.

    Parameters
    ----------
    model : MaxwellBlochModel
        The medium.
    fields0 : array_like
        Input fields :math:`\\varepsilon_l(0, t_k)`, shape ``(N_t, N_F)`` (or
        ``(N_t,)`` when N_F = 1), on the grid :math:`t_k = k h_t`.
    h_t, h_z : float
        Time and space steps, > 0.
    n_z : int
        Number of z steps (z_max = n_z h_z), >= 1.
    save_every : int
        Save fields and populations at every ``save_every``-th z point (and the last).
    euler_substeps : int
        Number of Euler sub-steps of the start-up step z_0 -> z_1 (>= 1).
    dtype : {"complex128", "complex64"}
        Working precision (the source compares float and double).

    Returns
    -------
    MaxwellBlochResult
    """
    t0 = time.perf_counter()
    if not isinstance(model, MaxwellBlochModel):
        raise ValueError("model must be a MaxwellBlochModel")
    h_t = _positive(h_t, "h_t")
    h_z = _positive(h_z, "h_z")
    for v, name, lo in ((n_z, "n_z", 1), (save_every, "save_every", 1),
                        (euler_substeps, "euler_substeps", 1)):
        if int(v) != v or v < lo:
            raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
    n_z, save_every, euler_substeps = int(n_z), int(save_every), int(euler_substeps)
    if dtype not in ("complex128", "complex64"):
        raise ValueError(f"dtype must be 'complex128' or 'complex64', got {dtype!r}")
    cdt = np.complex128 if dtype == "complex128" else np.complex64
    eps = np.asarray(fields0)
    if eps.ndim == 1 and model.n_modes == 1:
        eps = eps[:, None]
    if eps.ndim != 2 or eps.shape[1] != model.n_modes or eps.shape[0] < 2:
        raise ValueError(f"fields0 must have shape (N_t >= 2, N_F={model.n_modes}), got {eps.shape}")
    if not np.all(np.isfinite(eps)):
        raise ValueError("fields0 must be finite")
    eps = eps.astype(cdt)
    n_t = eps.shape[0]
    t = h_t * np.arange(n_t)
    E = model.energies().astype(cdt)
    Q = model.polarisation_matrix().astype(cdt)
    psi0 = model.initial_state

    save = sorted(set(range(0, n_z + 1, save_every)) | {n_z})
    zs, fs, ps = [], [], []
    dev = 0.0

    def keep(j, field, pop):
        if j in save:
            zs.append(j * h_z)
            fs.append(field.copy())
            ps.append(pop)

    # start-up: Euler with h_z / euler_substeps from z_0 to z_1
    hs = cdt(1j * h_z / euler_substeps)
    P_prev = None
    for s in range(euler_substeps):
        P, d, pop = _atoms(model, E, psi0, eps, h_t, Q, s == 0 and 0 in save, cdt)
        dev = max(dev, d)
        if s == 0:
            keep(0, eps, pop)
            P_prev = P
        eps = eps + hs * P
    # Adams-Bashforth 2 (algorithm 1, line 10) from z_1
    h = cdt(1j * h_z)
    for j in range(1, n_z + 1):
        P, d, pop = _atoms(model, E, psi0, eps, h_t, Q, j in save, cdt)
        dev = max(dev, d)
        keep(j, eps, pop)
        if j < n_z:
            eps = eps + h * (cdt(1.5) * P - cdt(0.5) * P_prev)
            P_prev = P
    return MaxwellBlochResult(np.array(zs), t, np.array(fs), np.array(ps), dev,
                              time.perf_counter() - t0)
