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

It is used to check and to benchmark the C solver (``nlsepy._core.Dipolar``):
whole-array expressions, one loop over the positions along an axis in the
tridiagonal solve, no kernels.  The array module is chosen by argument
(``numpy`` or ``cupy``), so the same expressions run on a GPU.  The
tridiagonal solve can instead be handed to a library batched solver
(``tridiag="batched"``: LAPACK ``gtsv`` through ``scipy.linalg.solve_banded``,
or cuSPARSE ``gtsv2`` on CuPy), one call per axis.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional, Sequence, Tuple

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


TRIDIAG_CHOICES = ("thomas", "batched")

# One tridiagonal system of the batched solve: ``(dl, d, du, ab)``, the lower,
# main and upper diagonals as 1-D arrays of the interior length ``k`` (``dl[0]``
# and ``du[k-1]`` zero, cuSPARSE's convention) and the same matrix in LAPACK
# band storage of shape ``(3, k)`` (NumPy only, else None).
TridiagMatrix = Tuple[Any, Any, Any, Any]
# ``solve(matrix, B) -> X``: B of shape (k, m), Fortran-ordered, may be overwritten.
TridiagSolver = Callable[[TridiagMatrix, Any], Any]


def _numpy_batched_solver() -> TridiagSolver:
    """``scipy.linalg.solve_banded`` as a batched tridiagonal solver.

    Returns
    -------
    callable
        ``solve(matrix, B)``: the solution ``X`` of ``T X = B`` for the
        tridiagonal ``T`` of `matrix` and all ``m`` columns of ``B`` (shape
        ``(k, m)``), by LAPACK ``?gtsv``; ``B`` may be overwritten.

    Raises
    ------
    ImportError
        If SciPy (``scipy.linalg.solve_banded``) cannot be imported.
    """
    try:
        from scipy.linalg import solve_banded
    except ImportError as exc:
        raise ImportError("tridiag='batched' with xp=numpy needs scipy.linalg.solve_banded, "
                          f"and SciPy could not be imported ({exc})") from exc

    def solve(matrix: TridiagMatrix, B: Any) -> Any:
        ab = matrix[3]
        return solve_banded((1, 1), ab, B, overwrite_b=True, check_finite=False)

    return solve


def _cupy_batched_solver() -> TridiagSolver:
    """cuSPARSE ``gtsv2`` (through CuPy) as a batched tridiagonal solver.

    ``cupyx.cusparse.gtsv2(dl, d, du, B)`` is used where this CuPy has it;
    otherwise CuPy's binding of the C functions, ``<t>gtsv2_bufferSizeExt``
    and ``<t>gtsv2`` of ``cupy_backends.cuda.libs.cusparse`` (``t`` one of
    ``s, d, c, z``), on the handle of ``cupy.cuda.device.get_cusparse_handle``.

    Returns
    -------
    callable
        ``solve(matrix, B)``: the solution ``X`` of ``T X = B`` for all
        columns of the Fortran-ordered ``B`` of shape ``(k, m)``, which is
        overwritten with it (``k >= 3``, cuSPARSE's bound).

    Raises
    ------
    ImportError
        If ``cupyx.cusparse`` cannot be imported.
    RuntimeError
        If neither ``cupyx.cusparse.gtsv2`` nor the ``gtsv2`` binding of
        ``cupy_backends.cuda.libs.cusparse`` is there.
    """
    try:
        import cupyx.cusparse as cusparse
    except ImportError as exc:
        raise ImportError("tridiag='batched' with xp=cupy needs cupyx.cusparse (cuSPARSE), "
                          f"which could not be imported ({exc})") from exc

    gtsv2 = getattr(cusparse, "gtsv2", None)
    if gtsv2 is not None:
        def solve(matrix: TridiagMatrix, B: Any) -> Any:
            dl, d, du, _ = matrix
            X = gtsv2(dl, d, du, B)
            return B if X is None else X

        return solve

    try:
        import cupy
        from cupy.cuda import device
        from cupy_backends.cuda.libs import cusparse as lib
    except ImportError as exc:
        raise RuntimeError("tridiag='batched' with xp=cupy needs cuSPARSE gtsv2: this CuPy has "
                           "no cupyx.cusparse.gtsv2, and its low-level binding "
                           f"cupy_backends.cuda.libs.cusparse could not be imported ({exc})") from exc
    missing = [t + name for t in "sdcz" for name in ("gtsv2", "gtsv2_bufferSizeExt")
               if not hasattr(lib, t + name)]
    if missing:
        raise RuntimeError("tridiag='batched' with xp=cupy needs cuSPARSE gtsv2: this CuPy has "
                           "neither cupyx.cusparse.gtsv2 nor cupy_backends.cuda.libs.cusparse."
                           + ", ".join(missing))
    prefix = {"f": "s", "d": "d", "F": "c", "D": "z"}

    def solve(matrix: TridiagMatrix, B: Any) -> Any:
        dl, d, du, _ = matrix
        k, m = B.shape
        if not B.flags.f_contiguous or B.dtype != d.dtype:
            raise ValueError("gtsv2 needs a Fortran-ordered B of the matrix's dtype")
        t = prefix[B.dtype.char]
        handle = device.get_cusparse_handle()
        args = (handle, k, m, dl.data.ptr, d.data.ptr, du.data.ptr, B.data.ptr, k)
        size_of = getattr(lib, t + "gtsv2_bufferSizeExt")
        try:
            size = int(size_of(*args))
        except TypeError:  # older CuPy: the size is written through a size_t pointer
            out = np.zeros(1, dtype=np.uintp)
            size_of(*args, out.ctypes.data)
            size = int(out[0])
        work = cupy.empty(max(size, 1), dtype=cupy.int8)  # pool blocks: 512-byte aligned
        getattr(lib, t + "gtsv2")(*args, work.data.ptr)
        return B

    return solve


def _batched_solver(xp: Any) -> TridiagSolver:
    """The batched tridiagonal solver of array module `xp`.

    Parameters
    ----------
    xp : module
        ``numpy`` (SciPy's ``solve_banded``) or ``cupy`` (cuSPARSE ``gtsv2``).

    Returns
    -------
    callable
        ``solve(matrix, B)``, see :func:`_numpy_batched_solver` and
        :func:`_cupy_batched_solver`.
    """
    return _numpy_batched_solver() if xp is np else _cupy_batched_solver()


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
    gqf : float, optional
        Lee-Huang-Yang coefficient: ``gqf |psi|^3`` joins the potential.
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
    tridiag : {"thomas", "batched"}, optional
        How the Crank-Nicolson tridiagonal systems are solved.  ``"thomas"``
        (default): the recursion of eqs. 2.31-2.33, a Python loop over the
        points of the axis, each step vectorised over all lines.
        ``"batched"``: the right-hand sides of all lines in whole-array
        expressions, then one library call per axis for the interior
        unknowns, whose matrix (diagonal ``A0``, off-diagonals ``A``) is the
        same for every line: ``scipy.linalg.solve_banded`` (LAPACK ``?gtsv``)
        with NumPy, cuSPARSE ``gtsv2`` with CuPy (every axis then needs at
        least 5 points).  Both give the same result up to rounding.

    Attributes
    ----------
    psi : array
        The state, an `xp` array of shape `shape`.

    Raises
    ------
    ValueError
        For a bad `tridiag`, shape, spacing or trap.
    ImportError, RuntimeError
        If ``tridiag="batched"`` and the library solver of `xp` is missing
        (SciPy for NumPy; ``cupyx.cusparse`` or its ``gtsv2`` for CuPy).
    """

    def __init__(self, shape: Sequence[int], spacing: Sequence[float], dt: float,
                 kin: float = 1.0, trap: Sequence[float] = (0.25, 1.0, 2.25),
                 g: float = 0.0, gdd: float = 0.0, cutoff: float = 0.0,
                 imaginary: bool = False, dtype: Any = np.complex128, xp: Any = np,
                 workers: Optional[int] = None, tridiag: str = "thomas",
                 gqf: float = 0.0) -> None:
        if not isinstance(tridiag, str) or tridiag not in TRIDIAG_CHOICES:
            raise ValueError(f"tridiag must be one of {TRIDIAG_CHOICES}, got {tridiag!r}")
        self.tridiag = tridiag
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
        self.gqf = float(gqf)
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

        self._solve_batched: Optional[TridiagSolver] = None
        self._tridiag_matrices: list = []
        if tridiag == "batched":
            if xp is not np and min(self.shape) < 5:
                raise ValueError("tridiag='batched' with CuPy needs at least 5 points per axis "
                                 "(cuSPARSE gtsv2 solves systems of 3 unknowns or more)")
            self._solve_batched = _batched_solver(xp)
            self._tridiag_matrices = [self._cn_matrix(n, h)
                                      for n, h in zip(self.shape, self.spacing)]

        psi = np.ones(1)
        for xa, ca in zip((X, Y, Z), self.trap):
            wa = math.sqrt(ca / self.kin)
            psi = psi * (wa / math.pi) ** 0.25 * np.exp(-wa * xa ** 2 / 2)
        self.psi = xp.asarray(np.ascontiguousarray(psi, dtype=self.dtype))

    # ------------------------------------------------------------ pieces
    def _cn_constants(self, h: float) -> Tuple[Any, Any, Any]:
        """Crank-Nicolson constants of one axis, unrounded.

        The implicit side is ``A x_{i-1} + A0 x_i + A x_{i+1}``, the explicit
        side ``A0r psi_i - A (psi_{i+1} + psi_{i-1})``.

        Parameters
        ----------
        h : float
            Spacing.

        Returns
        -------
        A, A0, A0r : float or complex
            Python scalars (real in imaginary time, complex in real time).
        """
        r = self.dt * self.kin / (h * h)
        if self.imaginary:
            return -r / 2, 1 + r, 1 - r
        return -0.5j * r, 1 + 1j * r, 1 - 1j * r

    def _cn_coefficients(self, n: int, h: float) -> Tuple[Any, Any, list, list]:
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
        A, A0, A0r = self._cn_constants(h)
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

    def _cn_matrix(self, n: int, h: float) -> TridiagMatrix:
        """The implicit Crank-Nicolson matrix of one axis's interior points.

        The unknowns are ``x_1 .. x_{n-2}``; the matrix has ``A0`` on the
        diagonal and ``A`` on both off-diagonals, in the state's precision.

        Parameters
        ----------
        n : int
            Points along the axis (``n - 2`` unknowns).
        h : float
            Spacing.

        Returns
        -------
        dl, d, du : array
            `xp` arrays of length ``n - 2``: lower, main and upper diagonal,
            ``dl[0] = du[-1] = 0`` (cuSPARSE ``gtsv2``'s layout).
        ab : numpy.ndarray or None
            With NumPy, the matrix in LAPACK band storage for
            ``scipy.linalg.solve_banded((1, 1), ab, B)``: shape ``(3, n - 2)``,
            ``ab[0, 1:]`` the upper and ``ab[2, :-1]`` the lower diagonal;
            None otherwise.
        """
        A, A0, _ = self._cn_constants(h)
        k = n - 2
        off = np.full(k, A, dtype=self.dtype)
        diag = np.full(k, A0, dtype=self.dtype)
        dl, du = off.copy(), off.copy()
        dl[0] = 0
        du[-1] = 0
        ab = None
        if self.xp is np:
            ab = np.zeros((3, k), dtype=self.dtype)
            ab[0, 1:] = off[1:]
            ab[1] = diag
            ab[2, :-1] = off[:-1]
        xp = self.xp
        return xp.asarray(dl), xp.asarray(diag), xp.asarray(du), ab

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
        if self.gqf != 0:
            H += self.gqf * (dens * self.xp.sqrt(dens))
        if self.imaginary:
            self.psi *= self.xp.exp(-self.dt * H)
        else:
            self.psi *= self.xp.exp(-1j * self.dt * H)

    def _crank_nicolson(self, axis: int) -> None:
        """One Crank-Nicolson solve along `axis` with ``psi = 0`` at both ends.

        By the Thomas recursion or the batched library solver, as `tridiag`
        chose.

        Parameters
        ----------
        axis : int
            The axis (0, 1 or 2).
        """
        if self._solve_batched is not None:
            self._crank_nicolson_batched(axis)
        else:
            self._crank_nicolson_thomas(axis)

    def _crank_nicolson_thomas(self, axis: int) -> None:
        """Crank-Nicolson solve along `axis` by the recursion of eqs. 2.31-2.33.

        A Python loop over the points of the axis, each step vectorised over
        all lines.  The backward sweep starts from ``beta[n-2] = psi[n-1]``
        (the old last value) and the forward one from ``psi[0] = 0``; both
        ends are zero afterwards.

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

    def _crank_nicolson_batched(self, axis: int) -> None:
        """Crank-Nicolson solve along `axis`, all lines in one library call.

        The same system as :meth:`_crank_nicolson_thomas`, which reads as
        follows: for the interior ``i = 1 .. n-2``,
        ``A x_{i-1} + A0 x_i + A x_{i+1} = c_i`` with
        ``c_i = A0r psi_i - A (psi_{i+1} + psi_{i-1})`` (the old state),
        ``x_0 = 0`` at the lower end (the forward sweep starts from
        ``psi[0] = 0``) and ``x_{n-1} = psi[n-1]``, the *old* last value, at
        the upper end (the backward sweep starts from ``beta[n-2] = psi[n-1]``
        with ``alpha[n-2] = 0``).  So the last interior row's right-hand side
        is ``c_{n-2} - A psi[n-1]`` and the first row's is ``c_1``; both ends
        are set to zero afterwards.

        The right-hand sides are built in whole-array expressions with the
        solve axis last, as the rows of a C-ordered ``(lines, n-2)`` array,
        whose transpose is the Fortran-ordered ``(n-2, lines)`` ``B`` that
        ``gtsv2`` and LAPACK ``?gtsv`` take without a copy.  Only the library
        call differs between NumPy and CuPy.

        Parameters
        ----------
        axis : int
            The axis (0, 1 or 2).
        """
        xp = self.xp
        A, A0r = self.coef[axis][:2]
        p = xp.moveaxis(self.psi, axis, -1)  # a view: writes go to self.psi
        n = p.shape[-1]
        lines = p.shape[:-1]
        k = n - 2
        rhs = xp.empty(lines + (k,), dtype=p.dtype)
        xp.subtract(A0r * p[..., 1:n - 1], A * (p[..., 2:] + p[..., :n - 2]), out=rhs)
        rhs[..., k - 1] -= A * p[..., n - 1]
        B = rhs.reshape(-1, k).T  # (n-2, lines), Fortran-ordered view of rhs
        X = self._solve_batched(self._tridiag_matrices[axis], B)
        p[..., 1:n - 1] = X.T.reshape(lines + (k,))
        p[..., 0] = 0
        p[..., n - 1] = 0

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
