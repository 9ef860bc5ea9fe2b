"""Figures of NLSE (``nl.plot.nlse``; needs matplotlib, see :mod:`nlsepy.plot`).

A run's frames are drawn by :func:`nlsepy.plot.frames` (``frames.plot()``);
this module draws a solver's current state the same way.
"""

from __future__ import annotations

from typing import Any

from ..common.plot import frames
from ..common.runner import Frames

__all__ = ["nlse"]


def nlse(sim: Any, **kwargs: Any) -> Any:
    """An NLSE's current state: ``|psi|^2`` against x in 1D; density and
    phase in 2D; in 3D the densities integrated along each axis (or the
    central slices, ``view="slice"``) and the phase on the central z slice.

    Lengths and time are the equation's (dimensionless).  A distributed
    solver's plot is collective (every rank calls it) and shows the whole
    grid.

    Parameters
    ----------
    sim : nlsepy.NLSE
        The solver.
    **kwargs
        ``view``, ``fig``, ``ax``, ``path``, ``dpi``, ``title``, ``vortices``: see
        :func:`nlsepy.plot.frames`.

    Returns
    -------
    matplotlib.figure.Figure
    """
    one = Frames(sim._frame_grid(whole=True))
    one.append(sim.t, sim.gather(root=None))
    return frames(one, **kwargs)
