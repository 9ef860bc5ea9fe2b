"""Figures of MaxwellBloch (``nl.plot.mbloch``; needs matplotlib, see :mod:`nlsepy.plot`)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from ..common.plot import finish, movie_path, panels, require, write_movie, PathLike


_MB_Z = "z (units of 1/β)"
_MB_T = "t (retarded, dimensionless)"


def _mb_modes(res: Any, modes: Optional[Sequence[int]], I: np.ndarray) -> List[int]:
    if modes is None:
        modes = [int(l) for q, l in enumerate(res.modes) if I[:, :, q].max() > 0]
        return modes or [int(res.modes[0])]
    out = []
    for l in modes:
        if not int(res.modes[0]) <= int(l) <= int(res.modes[-1]):
            raise ValueError(f"modes: l={l!r} is not in the mode set "
                             f"{res.modes[0]}..{res.modes[-1]}")
        out.append(int(l))
    return out


def _mb_map(a: Any, res: Any, I: np.ndarray, l: int, kw: Dict[str, Any]) -> None:
    q = l - int(res.modes[0])
    if res.z.size > 1:
        kw = {"shading": "nearest", "cmap": "viridis", "vmin": 0.0, **kw}
        m = a.pcolormesh(res.t, res.z, I[:, :, q], **kw)
        a.figure.colorbar(m, ax=a, label=f"|ε_{l}|²")
        a.set_ylabel(_MB_Z)
    else:
        a.plot(res.t, I[0, :, q])
        a.set_ylabel(f"|ε_{l}|² at z = {res.z[0]:g}")
    a.set_xlabel(_MB_T)
    a.set_title(f"mode l = {l}")


def _mb_populations(a: Any, res: Any) -> None:
    pops, zp = res.populations, res.z_populations
    for k in range(pops.shape[2]):
        (ln,) = a.plot(res.t, pops[-1, :, k], label=f"level {k}")
        if pops.shape[0] > 1:
            a.plot(res.t, pops[0, :, k], ls="--", lw=0.8, color=ln.get_color())
    a.set_xlabel(_MB_T)
    a.set_ylabel("population")
    a.set_title(f"populations at z = {zp[-1]:.3g}"
                + (f" (dashed: z = {zp[0]:.3g})" if pops.shape[0] > 1 else ""))
    if pops.shape[2] <= 8:
        a.legend(fontsize="small", title="ground levels first", title_fontsize="small")


def mbloch(res: Any, modes: Optional[Sequence[int]] = None, fig: Any = None, ax: Any = None,
           path: Optional[PathLike] = None, dpi: float = 100,
           title: Optional[str] = None, **kwargs: Any) -> Any:
    """A MaxwellBlochResult: the intensity of each mode over (t, z) and the populations.

    One panel per mode, ``|eps_l(z, t)|^2`` over the retarded time and z
    (a line when the fields were kept at one z only), and one with the
    level populations against t at the last kept z (dashed: the first),
    when the run kept them.

    Parameters
    ----------
    res : nlsepy.MaxwellBlochResult
        The result.
    modes : sequence of int, optional
        Modes to draw (default: those that carry intensity somewhere).
    fig : matplotlib.figure.Figure, optional
        An empty figure to draw in (default a new one).
    ax : matplotlib.axes.Axes or sequence of them, optional
        Draw only the modes' maps, one Axes per mode.
    path : path-like, optional
        Also save the figure there.
    dpi : float, optional
        Resolution of the saved file.
    title : str, optional
        Figure title.
    **kwargs
        Passed to ``Axes.pcolormesh`` for the maps (e.g. ``cmap="magma"``).

    Returns
    -------
    matplotlib.figure.Figure
    """
    require()
    I = res.fields.real ** 2 + res.fields.imag ** 2
    modes = _mb_modes(res, modes, I)
    if ax is not None:
        axes = list(np.atleast_1d(np.asarray(ax, dtype=object)))
        if len(axes) != len(modes):
            raise ValueError(f"ax must hold one Axes per mode ({len(modes)}), got {len(axes)}")
        for a, l in zip(axes, modes):
            _mb_map(a, res, I, l, kwargs)
        return finish(axes[0].figure, path, dpi)
    pops = res.populations is not None
    fig, axes = panels(fig, len(modes) + pops, ncols=3)
    for a, l in zip(axes, modes):
        _mb_map(a, res, I, l, kwargs)
    if pops:
        _mb_populations(axes[-1], res)
    if title is not None:
        fig.suptitle(title)
    return finish(fig, path, dpi)


def animate_mbloch(res: Any, path: PathLike, modes: Optional[Sequence[int]] = None,
                   fps: float = 10, dpi: float = 100) -> str:
    """Write an animation of the pulses along z: ``|eps_l(t)|^2`` at each kept z.

    Parameters
    ----------
    res : nlsepy.MaxwellBlochResult
        A result with the fields at two or more z (``full_map=True`` keeps
        every z step).
    path : path-like
        ``*.gif``, ``*.mp4`` (needs ffmpeg) or no suffix (MP4 when ffmpeg is
        found, else GIF); written whole or not at all.
    modes : sequence of int, optional
        Modes to draw (default: those that carry intensity somewhere).
    fps : float, optional
        Frames per second.
    dpi : float, optional
        Resolution.

    Returns
    -------
    str
        The path written.

    Raises
    ------
    RuntimeError
        An ``.mp4`` path without ffmpeg on PATH.
    ValueError
        Fields at one z only, or a bad path, `modes` or `fps`.
    """
    require()
    movie_path(path)
    if res.z.size < 2:
        raise ValueError(f"the result holds the fields at {res.z.size} z only; run with "
                         f"full_map=True or a smaller save_every to animate along z")
    I = res.fields.real ** 2 + res.fields.imag ** 2
    modes = _mb_modes(res, modes, I)
    fig, (ax,) = panels(None, 1, size=(6.0, 3.4))
    qs = [l - int(res.modes[0]) for l in modes]
    lines = [ax.plot(res.t, I[0, :, q], label=f"l = {l}")[0] for q, l in zip(qs, modes)]
    top = float(I[:, :, qs].max())
    ax.set_xlim(float(res.t[0]), float(res.t[-1]))
    ax.set_ylim(0.0, 1.05 * top if top > 0 else 1.0)
    ax.set_xlabel(_MB_T)
    ax.set_ylabel("|ε_l|²")
    ax.legend(fontsize="small")
    head = ax.set_title("")

    def update(j: int) -> None:
        for line, q in zip(lines, qs):
            line.set_ydata(I[j, :, q])
        head.set_text(f"z = {res.z[j]:.4g} (units of 1/β)")
    return write_movie(fig, update, res.z.size, path, fps, dpi)
