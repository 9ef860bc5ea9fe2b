"""Figures of DecGPE (``nl.plot.dec``; needs matplotlib, see :mod:`nlsepy.plot`)."""

from __future__ import annotations

from typing import Any, Optional, Tuple

import numpy as np

from ..common.checks import real as _real
from ..common.plot import axis_label, finish, overlay_vortices, require, view_cells, PathLike
from ..common.plot import vortex_options


def dec(sim: Any, z: Optional[float] = None, width: Optional[float] = None, fig: Any = None,
        ax: Any = None, path: Optional[PathLike] = None, dpi: float = 100,
        title: Optional[str] = None) -> Any:
    """A DecGPE's current state on a slice of cells: density and phase.

    The values live at the circumcentres (:attr:`~nlsepy.DecGPE.positions`);
    the slice is the plane of circumcentres nearest ``z`` (default the
    domain's centre), or the slab ``|z_i - z| <= width / 2``, drawn as a
    scatter plot over (x, y) coloured by ``|psi|^2`` and by the phase.  A
    distributed solver draws this rank's cells.

    Parameters
    ----------
    sim : nlsepy.DecGPE
        The solver.
    z : float, optional
        Height of the slice (default the centre's).
    width : float, optional
        Thickness of a slab of cells instead of one plane.
    fig : matplotlib.figure.Figure, optional
        An empty figure to draw in (default a new one).
    ax : matplotlib.axes.Axes, optional
        Draw only the density into this Axes.
    path : path-like, optional
        Also save the figure there.
    dpi : float, optional
        Resolution of the saved file.
    title : str, optional
        Figure title (default the grid and the time).

    Returns
    -------
    matplotlib.figure.Figure

    See Also
    --------
    nlsepy.DecGPE.plot_slice : the density interpolated to a regular grid.
    """
    require()
    grid = sim._frame_grid()
    v = view_cells(fig, ax, sim.psi[None], np.array([sim.t]), grid, [0], title, z, width)
    v.update(0)
    return finish(v.fig, path, dpi)


def plot_slice(sim: Any, z: float = 0.0, ax: Any = None, shape: Tuple[int, int] = (200, 200),
               **kwargs: Any) -> Any:
    """The figure of :meth:`nlsepy.DecGPE.plot_slice` (`sim` is the solver; the
    method's docstring gives the other arguments): ``|psi|^2`` interpolated on
    the plane ``z`` (needs matplotlib and scipy), with its point vortices
    marked when ``vortices=`` asks."""
    marks = vortex_options(kwargs.pop("vortices", False))
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover
        raise ImportError("plot_slice needs matplotlib: pip install matplotlib") from exc
    z = _real("z", z)
    lo = sim._origin
    hi = sim._origin + np.asarray(sim.box)
    dens, (x, y) = sim.density_on_grid(shape, bounds=[(lo[0], hi[0]), (lo[1], hi[1]),
                                                       (z, z)])
    if ax is None:
        _, ax = plt.subplots()
    kwargs.setdefault("cmap", "viridis")
    im = ax.imshow(dens.T, origin="lower", extent=(x[0], x[-1], y[0], y[-1]), **kwargs)
    unit = sim._frame_grid().length
    ax.set_xlabel(axis_label("x", unit))
    ax.set_ylabel(axis_label("y", unit))
    ax.set_title(f"|ψ|² at z = {z:g}, t = {sim.t:g} ({sim.grid})")
    if marks is not None:
        overlay_vortices(ax, sim.vortices(shape, bounds=[(lo[0], hi[0]), (lo[1], hi[1]), (z, z)],
                                          **marks))
    return im
