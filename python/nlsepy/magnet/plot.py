"""Figures of CoaxialMagnet (``nl.plot.magnet``; needs matplotlib, see :mod:`nlsepy.plot`)."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import post
from ..common.plot import finish, panels, require, PathLike


def magnet(sol: Any, n_turns: Optional[int] = 10, fig: Any = None, ax: Any = None,
           path: Optional[PathLike] = None, dpi: float = 100, levels: Any = 20,
           full: bool = False, title: Optional[str] = None) -> Any:
    """A MagnetSolution: Phi over (r, z) and the winding.

    Left: Phi (A) filled with contour lines, the magnet's outline and the
    wires of an `n_turns` winding (:func:`nlsepy.magnet.post.plot`).
    Right: the jump Delta Phi along the magnet's surface (side up, then the
    cap inwards), the equally spaced levels of the winding and where its
    wires sit (:meth:`~nlsepy.MagnetSolution.winding`).

    Parameters
    ----------
    sol : nlsepy.MagnetSolution
        The solution.
    n_turns : int or None, optional
        Wires on the upper half; None draws no winding.
    fig : matplotlib.figure.Figure, optional
        An empty figure to draw in (default a new one).
    ax : matplotlib.axes.Axes, optional
        Draw only Phi into this Axes.
    path : path-like, optional
        Also save the figure there.
    dpi : float, optional
        Resolution of the saved file.
    levels : int or array_like, optional
        Contour levels of Phi.
    full : bool, optional
        Draw the whole (r, z) section (mirrored), not the quadrant solved.
    title : str, optional
        Figure title (default the method and the residual).

    Returns
    -------
    matplotlib.figure.Figure
    """
    require()
    w = None if n_turns is None else sol.winding(n_turns)
    if ax is not None:
        post.plot(*sol._geom(), winding=w, ax=ax, levels=levels, full=full, filled=True)
        return finish(ax.figure, path, dpi)
    fig, (a0, a1) = panels(fig, 2)
    post.plot(*sol._geom(), winding=w, ax=a0, levels=levels, full=full, filled=True)
    d = sol.delta_phi()
    m = sol.magnet
    a1.plot(d["s"], d["path"], "k-", lw=1.2, label="ΔΦ on the surface")
    a1.axvline(m.z0, color="0.6", lw=0.8, ls=":", label="corner (side | cap)")
    if w is not None:
        s_side = w.z_side
        s_cap = w.z0 + (w.r0 - w.r_cap)
        n_side = s_side.size
        a1.hlines(w.levels, 0.0, np.concatenate((s_side, s_cap)), colors="0.8", lw=0.6)
        a1.plot(s_side, w.levels[:n_side], "o", color="tab:orange", ms=4, label="side wires")
        a1.plot(s_cap, w.levels[n_side:], "o", color="tab:green", ms=4, label="cap wires")
        a1.set_title(f"winding: {w.n_turns} wires × {w.current:.3g} A")
    else:
        a1.set_title("ΔΦ along the surface")
    a1.set_xlabel("s along the surface: side up, cap inwards (m)")
    a1.set_ylabel("ΔΦ (A)")
    a1.legend(fontsize="small", loc="lower right")
    state = "interrupted" if sol.interrupted else ("converged" if sol.converged
                                                   else "not converged")
    fig.suptitle(title if title is not None else
                 f"CoaxialMagnet, {sol.method}: {state}, residual {sol.residual:.2g}")
    return finish(fig, path, dpi)
