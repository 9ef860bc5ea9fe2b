"""Initial states of the NLSEmagic test problems (Caplan, section 4).

Each builder returns ``(psi0, spacing, params)``: the state on its grid, the
grid spacing, and a dict with the equation's coefficients (``a``, ``s``), the
suggested boundary condition ``bc``, the coordinates (``x``; ``y``, ``z`` in
2D/3D) and, where the solution is known in closed form, ``exact(t)`` giving
it on the same grid.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from .dec.vortex import vortex_state as _vortex_state

__all__ = ["dark_soliton", "bright_soliton", "dark_vortex", "vortex_ring", "plane_wave", "grid",
           "vortex_state"]

Example = Tuple[np.ndarray, Any, Dict[str, Any]]


def grid(length: float, h: float, periodic: bool = False) -> np.ndarray:
    """Points ``-length/2 .. length/2`` with spacing `h`.

    With ``periodic=True`` the right end is left out (it is the left end).

    Parameters
    ----------
    length : float
        Domain length; must be a whole multiple of `h`.
    h : float
        Spacing.
    periodic : bool, optional
        Leave out the right end point.

    Returns
    -------
    numpy.ndarray
        Coordinates.
    """
    n = int(round(length / h))
    if n < 2 or abs(n * h - length) > 1e-9 * length:
        raise ValueError(f"length={length!r} must be a whole multiple (>= 2) of h={h!r}")
    x = -0.5 * length + h * np.arange(n + (0 if periodic else 1))
    return x


def _dark_profile(r: np.ndarray, a: float, s: float, omega: float) -> np.ndarray:
    return np.sqrt(abs(omega / s)) * np.tanh(np.sqrt(abs(omega) / (2 * a)) * r)


def dark_soliton(length: float = 40.0, h: float = 0.1, a: float = 1.0, s: float = -1.0,
                 c: float = 0.5, omega: float = -1.0, x0: float = 0.0,
                 dtype: Any = np.complex128) -> Example:
    """Co-moving dark soliton, NLSEmagic eq. 20 (s < 0).

    ``Psi = sqrt|omega/s| tanh(sqrt(|omega|/2a) (x - x0 - c t))
    exp(i[(c/2a) x + (omega - c^2/4a) t])``.  The defaults are the source's
    parameters (s = -1, a = 1, c = 0.5, omega = -1) with MSD boundaries and
    h = 0.1: the source's text says h = 0.01, but its quoted stability bounds
    (0.0070711, 0.0053033) and its step k = 0.005 belong to h = 0.1.

    Parameters
    ----------
    length, h : float
        Domain ``[-length/2, length/2]`` and spacing.
    a, s, c, omega, x0 : float
        Dispersion, nonlinearity (< 0), velocity, frequency, start position.
    dtype : numpy dtype, optional
        complex64 or complex128.

    Returns
    -------
    psi0, h, params
        State, spacing and parameters (with ``exact(t)``).
    """
    if s >= 0:
        raise ValueError(f"a dark soliton needs s < 0, got s={s!r}")
    x = grid(length, h)

    def exact(t: float) -> np.ndarray:
        u = _dark_profile(x - x0 - c * t, a, s, omega)
        return (u * np.exp(1j * ((c / (2 * a)) * x + (omega - c * c / (4 * a)) * t))
                ).astype(dtype)

    params = dict(a=a, s=s, c=c, omega=omega, x0=x0, x=x, bc="msd", exact=exact)
    return exact(0.0), h, params


def bright_soliton(length: float = 50.0, h: float = 0.05, a: float = 1.0, s: float = 1.0,
                   c: float = 0.0, omega: float = 1.0, x0: float = 0.0,
                   periodic: bool = True, dtype: Any = np.complex128) -> Example:
    """Bright soliton (s > 0).

    ``Psi = sqrt(2 omega/s) sech(sqrt(omega/a) (x - x0 - c t))
    exp(i[(c/2a) x + (omega - c^2/4a) t])``.  With periodic boundaries the
    phase factor is periodic only when ``c length / (2a)`` is a multiple of
    2 pi; the soliton's tails must be negligible at the box edge.

    Parameters
    ----------
    length, h : float
        Domain and spacing.
    a, s, c, omega, x0 : float
        Dispersion, nonlinearity (> 0), velocity, frequency (> 0), position.
    periodic : bool, optional
        Periodic grid (right end left out) and ``bc="periodic"``; otherwise
        both ends and ``bc="dirichlet"``.
    dtype : numpy dtype, optional
        complex64 or complex128.

    Returns
    -------
    psi0, h, params
        State, spacing and parameters (with ``exact(t)``).
    """
    if s <= 0 or omega <= 0:
        raise ValueError(f"a bright soliton needs s > 0 and omega > 0, got s={s!r}, "
                         f"omega={omega!r}")
    x = grid(length, h, periodic)

    def exact(t: float) -> np.ndarray:
        xi = x - x0 - c * t
        if periodic:  # the periodic image nearest the box
            xi = (xi + 0.5 * length) % length - 0.5 * length
        u = np.sqrt(2 * omega / s) / np.cosh(np.sqrt(omega / a) * xi)
        return (u * np.exp(1j * ((c / (2 * a)) * x + (omega - c * c / (4 * a)) * t))
                ).astype(dtype)

    params = dict(a=a, s=s, c=c, omega=omega, x0=x0, x=x,
                  bc="periodic" if periodic else "dirichlet", exact=exact)
    return exact(0.0), h, params


def dark_vortex(length: float = 40.0, h: float = 0.25, a: float = 1.0, s: float = -1.0,
                omega: float = -1.0, m: int = 1, dtype: Any = np.complex128) -> Example:
    """Approximate dark vortex, NLSEmagic eq. 21, centred in a square box.

    ``Psi = f(r) exp(i m theta)`` with the source's approximation of the
    radial profile by the 1D dark soliton, ``f(r) = sqrt|omega/s|
    tanh(sqrt(|omega|/2a) r)`` (raised to the power ``|m|`` so that the core
    vanishes as ``r^|m|``).  The time factor is ``exp(i omega t)``.

    Parameters
    ----------
    length, h : float
        Box ``[-length/2, length/2]^2`` and spacing (source: h = 0.25).
    a, s, omega : float
        Coefficients (s < 0).
    m : int, optional
        Topological charge.
    dtype : numpy dtype, optional
        complex64 or complex128.

    Returns
    -------
    psi0, h, params
        State, spacing and parameters (``bc="msd"``).
    """
    if s >= 0:
        raise ValueError(f"a dark vortex needs s < 0, got s={s!r}")
    x = grid(length, h)
    X, Y = np.meshgrid(x, x, indexing="ij")
    r = np.hypot(X, Y)
    f = _dark_profile(r, a, s, omega) / np.sqrt(abs(omega / s))
    psi = np.sqrt(abs(omega / s)) * f ** abs(int(m)) * np.exp(1j * m * np.arctan2(Y, X))
    params = dict(a=a, s=s, omega=omega, m=m, x=x, y=x, bc="msd")
    return psi.astype(dtype), h, params


def vortex_ring(length: float = 45.0, h: float = 1.5, d: float = 5.0, a: float = 1.0,
                s: float = -1.0, omega: float = -1.0, c: Optional[float] = None,
                dtype: Any = np.complex128) -> Example:
    """Approximate dark vortex ring of radius `d`, NLSEmagic eq. 22.

    ``Psi = g(r, z) exp(i c z / 2a)`` in cylindrical coordinates about the z
    axis (the last array axis).  ``g`` is the 2D vortex of :func:`dark_vortex`
    placed at ``(r, z) = (d, 0)`` of the r-z half plane, multiplied by its
    mirror image of opposite charge at ``r = -d`` so that the state is smooth
    on the axis.  The back-flow ``c`` defaults to the asymptotic ring velocity
    ``(a/d)(ln(8d/xi) - 0.615)``, ``xi = sqrt(a/|omega|)``, which makes the ring
    nearly stationary.

    Parameters
    ----------
    length, h : float
        Cube ``[-length/2, length/2]^3`` and spacing (source: h = 3/2).
    d : float
        Ring radius (source: 5).
    c : float, optional
        Back-flow velocity.
    a, s, omega, dtype
        As for :func:`dark_vortex`, which also gives the return values.
    """
    if s >= 0:
        raise ValueError(f"a vortex ring needs s < 0, got s={s!r}")
    if c is None:
        xi = np.sqrt(a / abs(omega))
        c = (a / d) * (np.log(8 * d / xi) - 0.615)
    x = grid(length, h)
    X, Y, Z = np.meshgrid(x, x, x, indexing="ij")
    r = np.hypot(X, Y)
    amp = np.sqrt(abs(omega / s))
    f1 = _dark_profile(np.hypot(r - d, Z), a, s, omega) / amp
    f2 = _dark_profile(np.hypot(r + d, Z), a, s, omega) / amp
    phase = np.arctan2(Z, r - d) - np.arctan2(Z, r + d)
    psi = amp * f1 * f2 * np.exp(1j * (phase + c * Z / (2 * a)))
    params = dict(a=a, s=s, omega=omega, d=d, c=float(c), x=x, y=x, z=x, bc="msd")
    return psi.astype(dtype), h, params


def plane_wave(shape: Tuple[int, ...], h: Any, modes: Tuple[int, ...], a: float = 1.0,
               V0: float = 0.0, dtype: Any = np.complex128) -> Example:
    """Plane wave ``exp(i (k.x - (a|k|^2 + V0) t))`` on a periodic box.

    ``k_q = 2 pi modes[q] / (shape[q] h_q)``; with ``s = 0`` and a constant
    potential ``V0`` this is an exact solution of the linear equation.

    Parameters
    ----------
    shape : tuple of int
        Grid shape (periodic, no repeated end point).
    h : float or tuple of float
        Spacing per axis.
    modes : tuple of int
        Wave numbers in units of the box's fundamental mode.
    a, V0 : float
        Dispersion and constant potential.
    dtype : numpy dtype, optional
        complex64 or complex128.

    Returns
    -------
    psi0, spacing, params
        State, per-axis spacing and parameters (with ``exact(t)`` and ``k``).
    """
    nd = len(shape)
    hs = tuple(np.broadcast_to(np.asarray(h, dtype=float), (nd,)).tolist())
    ks = [2 * np.pi * m / (n * hq) for m, n, hq in zip(modes, shape, hs)]
    axes = np.meshgrid(*[hq * np.arange(n) for n, hq in zip(shape, hs)], indexing="ij")
    kx = sum(k * X for k, X in zip(ks, axes))
    k2 = sum(k * k for k in ks)

    def exact(t: float) -> np.ndarray:
        return np.exp(1j * (kx - (a * k2 + V0) * t)).astype(dtype)

    params = dict(a=a, s=0.0, k=tuple(ks), bc="periodic", exact=exact)
    return exact(0.0), hs, params


def vortex_state(lam: float = 1.0, g: float = 300.0, kappa: int = 10, **kwargs: Any) -> Any:
    """Stationary vortex of the trapped 3D GPE, the initial state of the DEC
    GPE runs (Kivioja et al., section 5, eq. 14).

    ``Psi = f(rho, z) exp(i kappa phi - i mu t)`` in the trap
    ``V = (x^2 + y^2 + lam^2 z^2)/2`` with ``int |Psi|^2 = 1``; forwards to
    :func:`nlsepy.dec.vortex.vortex_state` (needs scipy).

    Parameters
    ----------
    lam, g : float
        Trap anisotropy (> 0) and interaction strength (>= 0).
    kappa : int
        Winding number (0: the ground state).
    **kwargs
        ``h``, ``rho_max``, ``z_max``, ``tol``, ``max_iter`` of
        :func:`nlsepy.dec.vortex.vortex_state`.

    Returns
    -------
    nlsepy.dec.vortex.VortexState
        The state: ``mu``, the profile ``f`` on its ``(rho, z)`` grid, and
        ``state(positions, t)`` for Psi at Cartesian points.

    Examples
    --------
    >>> import numpy as np
    >>> from nlsepy import examples
    >>> s = examples.vortex_state(1.0, 300.0, 10)   # the source's accuracy test
    >>> lo, hi = s.cuboid(1e-5)                     # its domain, eq. 15
    >>> x = np.linspace(lo[0], hi[0], 64)
    >>> X, Y, Z = np.meshgrid(x, x, [0.0], indexing="ij")
    >>> psi = s(np.stack([X, Y, Z], axis=-1))       # complex, shape (64, 64, 1)
    """
    return _vortex_state(lam, g, kappa, **kwargs)
