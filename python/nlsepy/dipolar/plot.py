"""Figures of DipolarGPE (``nl.plot.dipolar``; needs matplotlib, see :mod:`nlsepy.plot`)."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ..common.plot import axis_label, density_of, finish, fmt_time, image, panels, phase_of, require, PathLike
from ..common.plot import vortex_options, overlay_vortices
from ..common.vortices import vortices as _vortices


def dipolar(gpe: Any, fig: Any = None, ax: Any = None, path: Optional[PathLike] = None,
            dpi: float = 100, title: Optional[str] = None, vortices: Any = False) -> Any:
    """A DipolarGPE's current state: densities, phase and integrated densities.

    * 3D: ``n(x, y)`` and ``n(x, z)`` (``|psi|^2`` integrated along the third
      axis), the phase on the central y slice, and ``n(x)``, ``n(y)``,
      ``n(z)`` (:meth:`~nlsepy.DipolarGPE.density` with ``keep``);
    * 2D: density, phase, and the density integrated along each axis;
    * 1D: density and phase.

    Lengths are in oscillator lengths.  A distributed solver's plot is
    collective (every rank calls it) and shows the whole grid.

    Parameters
    ----------
    gpe : nlsepy.DipolarGPE
        The solver.
    fig : matplotlib.figure.Figure, optional
        An empty figure to draw in (default a new one).
    ax : matplotlib.axes.Axes, optional
        Draw only the integrated densities (1D: the density) into this Axes.
    path : path-like, optional
        Also save the figure there.
    dpi : float, optional
        Resolution of the saved file.
    title : str, optional
        Figure title (default the geometry and the time).
    vortices : bool or dict, optional
        Mark the vortices (:meth:`~nlsepy.DipolarGPE.vortices`): 2D the
        point vortices on density and phase; 3D the lines projected on
        ``n(x, y)`` and ``n(x, z)`` and the point vortices of the phase's
        slice (one process).  A dict passes ``threshold`` and ``reach``.

    Returns
    -------
    matplotlib.figure.Figure
    """
    require()
    marks = vortex_options(vortices)
    if marks is not None and gpe.ndim == 1:
        raise ValueError("vortices=: a 1D state has no vortices")
    grid = gpe._frame_grid()
    names, co, unit = gpe.axes, gpe.coords, grid.length
    nd = gpe.ndim
    one = getattr(gpe, "comm", None) is None
    head = title if title is not None else \
        f"DipolarGPE ({gpe.geometry})   {fmt_time(gpe.t, grid.time)}"

    def lines(a: Any) -> None:
        if nd == 1:
            a.plot(co[0], gpe.density(), label="|ψ|²")
        else:
            for q, name in enumerate(names):
                a.plot(co[q], gpe.density((name,)), label=f"n({name})")
        a.set_xlabel(axis_label("position", unit) if nd > 1 else axis_label(names[0], unit))
        a.set_ylabel("integrated density" if nd > 1 else "|ψ|²")
        a.legend(fontsize="small")
        a.set_title("integrated densities" if nd > 1 else "density")

    if ax is not None:
        lines(ax)
        return finish(ax.figure, path, dpi)
    if nd == 1:
        fig, (a0, a1) = panels(fig, 2)
        lines(a0)
        psi = gpe.psi
        a1.plot(co[0], phase_of(psi), color="tab:purple")
        a1.set_ylim(-np.pi * 1.05, np.pi * 1.05)
        a1.set_yticks([-np.pi, 0.0, np.pi], ["−π", "0", "π"])
        a1.set_xlabel(axis_label(names[0], unit))
        a1.set_ylabel("phase arg ψ")
        a1.set_title("phase")
    elif nd == 2:
        fig, (a0, a1, a2) = panels(fig, 3)
        psi = gpe.psi
        d = density_of(psi)
        image(a0, d, co[0], co[1], names, unit, "|ψ|²")
        a0.set_title("density |ψ|²")
        image(a1, phase_of(psi, d), co[0], co[1], names, unit, "", phase=True)
        a1.set_title("phase")
        lines(a2)
        if marks is not None:
            found = gpe.vortices(**marks)
            for a in (a0, a1):
                overlay_vortices(a, found)
    else:
        fig, axes = panels(fig, 4, ncols=2)
        for a, (p, q) in zip(axes, ((0, 1), (0, 2))):
            other = names[3 - p - q]
            image(a, gpe.density((names[p], names[q])), co[p], co[q], (names[p], names[q]),
                   unit, f"n({names[p]}, {names[q]})")
            a.set_title(f"∫|ψ|² d{other}")
        ky = gpe.shape[1] // 2
        # one process: masked where the density is negligible; distributed: the
        # whole slice from every rank (collective)
        ph = phase_of(gpe.psi[:, ky, :]) if one else gpe.phase_slice(names[1])
        image(axes[2], ph, co[0], co[2], (names[0], names[2]), unit, "", phase=True)
        axes[2].set_title(f"phase at {names[1]} = {co[1][ky]:.3g}")
        lines(axes[3])
        if marks is not None:
            found = gpe.vortices(**marks)
            for a, plane in zip(axes[:2], ((0, 1), (0, 2))):
                overlay_vortices(a, found, plane)
            if one:
                h = gpe.spacing
                overlay_vortices(axes[2], _vortices(gpe.psi[:, ky, :], (h[0], h[2]),
                                                    (co[0][0], co[2][0]), **marks))
    fig.suptitle(head)
    return finish(fig, path, dpi)
