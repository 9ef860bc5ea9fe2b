"""Straightforward array-language statement of the split-step Crank-Nicolson scheme.

This module is the plain NumPy (or CuPy) statement of the scheme of Loncar's
thesis, section 2.3, for the dipolar Gross-Pitaevskii equation in 3D,

.. math::

    i \\partial_t \\psi = [-k \\nabla^2 + V + g|\\psi|^2 + g_{dd} \\Phi] \\psi,
    \\qquad V = c_x x^2 + c_y y^2 + c_z z^2,

one time step being

1. the dipolar potential :math:`\\Phi = \\mathcal{F}^{-1}[\\tilde K(k)\\,
   \\mathcal{F}(|\\psi|^2)]` by real-to-complex FFTs (eq. 2.37), with the
   kernel of a spherical cutoff :math:`R`;
2. the non-derivative part applied exactly (eq. 2.24; ``exp(-dt H1)`` in
   imaginary time, eq. 2.41);
3. one Crank-Nicolson tridiagonal solve per axis with :math:`\\psi = 0` at
   both ends (eqs. 2.27-2.34);
4. in imaginary time, renormalisation to a unit Simpson norm (eq. 2.42).

It is used to check and to benchmark the C solver (``nlsepy._core.SS``):
whole-array expressions, one loop over the positions along an axis in the
tridiagonal solve, no kernels.  The array module is chosen by argument
(``numpy`` or ``cupy``), so the same expressions run on a GPU.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence, Tuple

import numpy as np

__all__ = ["SplitStepReference", "dipolar_kernel", "simpson_weights"]


def _fft_module(xp: Any) -> Tuple[Any, bool]:
    """FFT module for array module `xp` and whether it takes ``workers=``.

    Parameters
    ----------
    xp : module
        ``numpy`` or ``cupy``.

    Returns
    -------
    fft : module
        ``scipy.fft`` (NumPy, when SciPy is importable), else ``numpy.fft``;
        ``cupyx.scipy.fft`` (or ``cupy.fft``) for CuPy.
    takes_workers : bool
        True for ``scipy.fft``.
    """
    if xp is np:
        try:
            import scipy.fft as sfft
            return sfft, True
        except ImportError:
            return np.fft, False
    try:
        import cupyx.scipy.fft as cfft
        return cfft, False
    except ImportError:
        return xp.fft, False


def simpson_weights(n: int, h: float) -> np.ndarray:
    """Composite Simpson weights of one axis.

    ``w[0] = w[n-1] = h/3`` and ``w[i] = (2 + 2 (i % 2)) h / 3`` otherwise.

    Parameters
    ----------
    n : int
        Number of points.
    h : float
        Spacing.

    Returns
    -------
    numpy.ndarray
        float64 weights of length `n`.
    """
    i = np.arange(n)
    w = (2.0 + 2.0 * (i % 2)) * h / 3.0
    w[0] = w[-1] = h / 3.0
    return w


def _cutoff_bracket(x: np.ndarray) -> np.ndarray:
    """``1 + 3 cos(x)/x^2 - 3 sin(x)/x^3``, by its series for ``x < 0.5``.

    Parameters
    ----------
    x : numpy.ndarray
        Non-negative float64 arguments ``k R``.

    Returns
    -------
    numpy.ndarray
        The bracket of the cut-off dipolar kernel.
    """
    small = x < 0.5
    xs = np.where(small, x, 1.0)
    xl = np.where(small, 1.0, x)
    series = np.zeros_like(x)
    for m in range(2, 12):
        series += (-1) ** m * 2 * m * xs ** (2 * m - 2) / math.factorial(2 * m + 1)
    series *= 3.0
    closed = 1.0 + 3.0 * np.cos(xl) / xl ** 2 - 3.0 * np.sin(xl) / xl ** 3
    return np.where(small, series, closed)


def dipolar_kernel(shape: Sequence[int], spacing: Sequence[float], cutoff: float) -> np.ndarray:
    """Fourier-space dipolar kernel on the r2c grid, dipoles along the last axis.

    ``K(k) = (4 pi / 3) (3 kz^2 / k^2 - 1) [1 + 3 cos(kR)/(kR)^2 - 3 sin(kR)/(kR)^3]``,
    ``K(0) = 0``; without the bracket when ``cutoff <= 0``.

    Parameters
    ----------
    shape : sequence of int
        Grid shape ``(nx, ny, nz)``.
    spacing : sequence of float
        Spacing per axis.
    cutoff : float
        Cutoff radius ``R`` (``<= 0``: none).

    Returns
    -------
    numpy.ndarray
        float64 array of shape ``(nx, ny, nz // 2 + 1)``.
    """
    nx, ny, nz = shape
    hx, hy, hz = spacing
    kx = 2 * np.pi * np.fft.fftfreq(nx, hx)
    ky = 2 * np.pi * np.fft.fftfreq(ny, hy)
    kz = 2 * np.pi * np.fft.rfftfreq(nz, hz)
    KX, KY, KZ = np.meshgrid(kx, ky, kz, indexing="ij", sparse=True)
    k2 = KX ** 2 + KY ** 2 + KZ ** 2
    zero = k2 == 0
    k2safe = np.where(zero, 1.0, k2)
    K = (4 * np.pi / 3) * (3 * KZ ** 2 / k2safe - 1.0)
    if cutoff > 0:
        K = K * _cutoff_bracket(np.sqrt(k2) * cutoff)
    K = np.where(zero, 0.0, K)
    return np.ascontiguousarray(np.broadcast_to(K, (nx, ny, nz // 2 + 1)))


class SplitStepReference:
    """Split-step Crank-Nicolson for the 3D dipolar GPE, in whole-array expressions.

    Parameters
    ----------
    shape : sequence of int
        Grid shape ``(nx, ny, nz)``; coordinates ``x_i = (i - nx // 2) hx``.
    spacing : sequence of float
        Spacing ``(hx, hy, hz)``.
    dt : float
        Time step.
    kin : float, optional
        Coefficient ``k`` of ``-Lap``.
    trap : sequence of float, optional
        Trap coefficients ``(cx, cy, cz)``: ``V = cx x^2 + cy y^2 + cz z^2``.
    g, gdd : float, optional
        Contact and dipolar coefficients.
    cutoff : float, optional
        Spherical cutoff ``R`` of the dipolar kernel (``<= 0``: none).
    imaginary : bool, optional
        Imaginary-time propagation with a real state, renormalised every step.
    dtype : numpy dtype, optional
        Precision: ``complex128``/``float64`` or ``complex64``/``float32``.
        The state is real in imaginary time and complex in real time.
    xp : module, optional
        Array module, ``numpy`` (default) or ``cupy``.
    workers : int, optional
        Threads of ``scipy.fft`` (NumPy only; ignored otherwise).

    Attributes
    ----------
    psi : array
        The state, an `xp` array of shape `shape`.
    """

    def __init__(self, shape: Sequence[int], spacing: Sequence[float], dt: float,
                 kin: float = 1.0, trap: Sequence[float] = (0.25, 1.0, 2.25),
                 g: float = 0.0, gdd: float = 0.0, cutoff: float = 0.0,
                 imaginary: bool = False, dtype: Any = np.complex128, xp: Any = np,
                 workers: Optional[int] = None) -> None:
        self.xp = xp
        self.shape = tuple(int(n) for n in shape)
        self.spacing = tuple(float(h) for h in spacing)
        if len(self.shape) != 3 or len(self.spacing) != 3 or len(trap) != 3:
            raise ValueError("shape, spacing and trap need three entries (3D)")
        if min(self.shape) < 3:
            raise ValueError("every axis needs at least 3 points")
        self.dt, self.kin = float(dt), float(kin)
        self.trap = tuple(float(c) for c in trap)
        self.g, self.gdd, self.cutoff = float(g), float(gdd), float(cutoff)
        self.imaginary = bool(imaginary)
        real = np.zeros(1, dtype=dtype).real.dtype
        self.real_dtype = real
        self.dtype = real if self.imaginary else np.result_type(real, np.complex64)
        self.fft, self._fft_workers = _fft_module(xp)
        self.workers = workers

        x = [(np.arange(n) - n // 2) * h for n, h in zip(self.shape, self.spacing)]
        X, Y, Z = np.meshgrid(*x, indexing="ij", sparse=True)
        cx, cy, cz = self.trap
        self.V = xp.asarray(cx * X ** 2 + cy * Y ** 2 + cz * Z ** 2, dtype=real)

        self.K = None
        if self.gdd != 0:
            self.K = xp.asarray(dipolar_kernel(self.shape, self.spacing, self.cutoff),
                                dtype=real)

        w = [simpson_weights(n, h) for n, h in zip(self.shape, self.spacing)]
        self.weights = [xp.asarray(wa, dtype=real) for wa in w]

        self.coef = [self._cn_coefficients(n, h) for n, h in zip(self.shape, self.spacing)]

        psi = np.ones(1)
        for xa, ca in zip((X, Y, Z), self.trap):
            wa = math.sqrt(ca / self.kin)
            psi = psi * (wa / math.pi) ** 0.25 * np.exp(-wa * xa ** 2 / 2)
        self.psi = xp.asarray(np.ascontiguousarray(psi, dtype=self.dtype))

    # ------------------------------------------------------------ pieces
    def _cn_coefficients(self, n: int, h: float) -> Tuple[Any, Any, Any, list, list]:
        """Crank-Nicolson constants and recursion coefficients of one axis.

        Parameters
        ----------
        n : int
            Points along the axis.
        h : float
            Spacing.

        Returns
        -------
        A, A0r : scalar
            Off-diagonal and right-hand-side diagonal constants (Python
            scalars rounded to the state's precision).
        alpha, gamma : list of scalar
            Recursion coefficients (eqs. 2.31-2.33), Python scalars.
        """
        r = self.dt * self.kin / (h * h)
        if self.imaginary:
            A, A0, A0r = -r / 2, 1 + r, 1 - r
        else:
            A, A0, A0r = -0.5j * r, 1 + 1j * r, 1 - 1j * r
        kind = float if self.imaginary else complex
        alpha = np.zeros(n, dtype=kind)
        gamma = np.zeros(n, dtype=kind)
        gamma[n - 2] = -1.0 / A0
        for i in range(n - 2, 0, -1):
            alpha[i - 1] = A * gamma[i]
            gamma[i - 1] = -1.0 / (A0 + A * alpha[i - 1])
        dt = self.dtype

        def cast(v: Any) -> Any:
            return np.asarray(v).astype(dt).item()

        return (cast(A), cast(A0r), [cast(a) for a in alpha], [cast(gm) for gm in gamma])

    def density(self) -> Any:
        """``|psi|^2`` in the state's real precision.

        Returns
        -------
        array
            Real `xp` array of the grid's shape.
        """
        if self.imaginary:
            return self.psi * self.psi
        return self.psi.real ** 2 + self.psi.imag ** 2

    def dipolar_potential(self, dens: Any) -> Any:
        """``Phi = irfftn(K * rfftn(dens))`` (eq. 2.37).

        Parameters
        ----------
        dens : array
            Density ``|psi|^2``.

        Returns
        -------
        array
            Real array of the grid's shape.
        """
        kw = {"workers": self.workers} if self._fft_workers else {}
        spec = self.fft.rfftn(dens, axes=(0, 1, 2), **kw)
        spec *= self.K
        return self.fft.irfftn(spec, s=self.shape, axes=(0, 1, 2), **kw).astype(self.real_dtype, copy=False)

    def _nonlinear(self) -> None:
        """Apply ``exp(-i dt H1)`` (real time) or ``exp(-dt H1)`` (imaginary time)."""
        dens = self.density()
        H = self.V + self.g * dens
        if self.K is not None:
            H += self.gdd * self.dipolar_potential(dens)
        if self.imaginary:
            self.psi *= self.xp.exp(-self.dt * H)
        else:
            self.psi *= self.xp.exp(-1j * self.dt * H)

    def _crank_nicolson(self, axis: int) -> None:
        """One Crank-Nicolson solve along `axis` with ``psi = 0`` at both ends.

        Parameters
        ----------
        axis : int
            The axis (0, 1 or 2).
        """
        A, A0r, alpha, gamma = self.coef[axis]
        p = self.xp.moveaxis(self.psi, axis, 0)  # a view: writes go to self.psi
        n = p.shape[0]
        beta = self.xp.empty((n - 1,) + p.shape[1:], dtype=p.dtype)
        beta[n - 2] = p[n - 1]
        for i in range(n - 2, 0, -1):
            c = A0r * p[i] - A * (p[i + 1] + p[i - 1])
            beta[i - 1] = gamma[i] * (A * beta[i] - c)
        p[0] = 0
        for i in range(n - 2):
            p[i + 1] = alpha[i] * p[i] + beta[i]
        p[n - 1] = 0

    # ------------------------------------------------------------- public
    def norm(self) -> float:
        """Simpson integral of ``|psi|^2``.

        Returns
        -------
        float
            ``sum w_x w_y w_z |psi|^2``.
        """
        wx, wy, wz = self.weights
        return float(((self.density() @ wz) @ wy) @ wx)

    def step(self, n: int = 1) -> "SplitStepReference":
        """Advance `n` time steps.

        Parameters
        ----------
        n : int, optional
            Number of steps.

        Returns
        -------
        SplitStepReference
            ``self``.
        """
        for _ in range(int(n)):
            self._nonlinear()
            for axis in range(3):
                self._crank_nicolson(axis)
            if self.imaginary:
                self.psi *= self.real_dtype.type(1.0 / math.sqrt(self.norm()))
        return self
