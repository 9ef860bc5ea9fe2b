"""The result of :meth:`nlsepy.MaxwellBloch.run` (``nl.MaxwellBlochResult``):
the fields and populations kept along z, and the pulse areas, energies and
figures computed from them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np

from . import plot as _plot

__all__ = ["MaxwellBlochResult"]


@dataclass
class MaxwellBlochResult:
    """Output of :meth:`MaxwellBloch.run`.

    Attributes
    ----------
    z : numpy.ndarray
        Positions of `fields`, shape ``(n_save,)`` (every ``z_j`` with
        ``full_map=True``).
    t : numpy.ndarray
        Time grid, shape ``(n_t,)``.
    modes : numpy.ndarray
        The mode numbers ``l_min .. l_max``.
    fields : numpy.ndarray
        :math:`\\varepsilon_l(z, t)`, complex128 of shape ``(n_save, n_t, N_F)``.
    z_populations : numpy.ndarray
        Positions of `populations` (the requested z).
    populations : numpy.ndarray or None
        :math:`\\sum_D w_D|\\psi^D_i(z, t)|^2`, shape ``(len(z_populations),
        n_t, n_g + n_e)`` (ground levels first), or None when not asked for.
    norm_deviation : float
        :math:`\\max ||\\psi|^2 - 1|` over every atom, time and atom solve of
        the run (Euler sub-steps included): the accuracy monitor of section 3.
    seconds : float
        Wall time of the run.
    kernel_seconds : float
        Time spent in the backend's steps (CUDA events on the device).
    h_z : float
        The z step.
    density : numpy.ndarray or None
        Open models run with ``density=True``: the ensemble density matrix
        :math:`\\sum_D w_D\\rho^D_{ij}(z, t)` at `z_populations`, complex128
        of shape ``(len(z_populations), n_t, n, n)`` (its diagonal is
        `populations`); else None.
    interrupted : bool
        True for the partial result of a run stopped by Ctrl-C
        (:attr:`MaxwellBloch.partial_result`): it ends with the fields at
        the z reached.
    """

    z: np.ndarray
    t: np.ndarray
    modes: np.ndarray
    fields: np.ndarray
    z_populations: np.ndarray
    populations: Optional[np.ndarray]
    norm_deviation: float
    seconds: float
    kernel_seconds: float
    h_z: float
    interrupted: bool = False
    density: Optional[np.ndarray] = None

    @property
    def h_t(self) -> float:
        """The time step."""
        return float(self.t[1] - self.t[0])

    def _integral(self, f: np.ndarray) -> np.ndarray:
        # trapezoidal rule over the time grid, axis 1 of (n_save, n_t, N_F)
        return self.h_t * (f.sum(axis=1) - 0.5 * (f[:, 0] + f[:, -1]))

    def areas(self) -> np.ndarray:
        """Pulse areas :math:`\\theta_l(z) = \\int\\varepsilon_l(z, t)\\,dt`
        (trapezoidal rule), complex of shape ``(n_save, N_F)``; real for real
        input pulses on a symmetric line."""
        return self._integral(self.fields)

    def energies(self) -> np.ndarray:
        """Pulse energies :math:`\\int|\\varepsilon_l(z, t)|^2 dt` per mode,
        shape ``(n_save, N_F)``."""
        return self._integral(self.fields.real ** 2 + self.fields.imag ** 2)

    def field(self, l: int) -> np.ndarray:
        """:math:`\\varepsilon_l(z, t)` of mode ``l``, shape ``(n_save, n_t)``."""
        idx = int(l) - int(self.modes[0])
        if not 0 <= idx < self.modes.size:
            raise ValueError(f"mode l={l!r} is not in the mode set {self.modes[0]}..{self.modes[-1]}")
        return self.fields[:, :, idx]

    def plot(self, modes: Optional[Sequence[int]] = None, **kwargs: Any) -> Any:
        """Maps of :math:`|\\varepsilon_l(z, t)|^2` over (t, z), one panel per
        mode, and the level populations against t; needs matplotlib
        (``pip install 'nlsepy[plot]'``).

        Parameters
        ----------
        modes : sequence of int, optional
            Modes to draw (default: those that carry intensity somewhere).
        **kwargs
            ``fig``, ``ax`` (the maps only, one Axes per mode), ``path``
            (save), ``dpi``, ``title``, and keywords of
            ``Axes.pcolormesh`` (e.g. ``cmap``): see :func:`nlsepy.plot.mbloch`.

        Returns
        -------
        matplotlib.figure.Figure
        """
        return _plot.mbloch(self, modes=modes, **kwargs)

    def animate(self, path: Any, **kwargs: Any) -> str:
        """Write an animation of the pulses along z (MP4 when ffmpeg is on
        PATH, else GIF; ``*.gif`` always GIF).

        Parameters
        ----------
        path : path-like
            ``*.gif``, ``*.mp4`` or no suffix; written whole or not at all.
        **kwargs
            ``modes``, ``fps``, ``dpi``: see :func:`nlsepy.plot.animate_mbloch`.

        Returns
        -------
        str
            The path written.
        """
        return _plot.animate_mbloch(self, path, **kwargs)
