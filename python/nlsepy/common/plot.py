"""Plots and animations of every model's results (``nl.plot``; needs matplotlib).

Each function draws with matplotlib's object-oriented API on a
:class:`matplotlib.figure.Figure` it makes (or on the empty ``fig`` or the
``ax`` it is given) and returns that Figure.  pyplot is never imported: no
window opens, no global state changes and any backend works, Agg included.
In Jupyter the returned Figure shows as the cell's value; in a script pass
``path=`` to save it (PNG, or the format the suffix names, written whole or
not at all), or draw into a pyplot figure with ``fig=plt.figure()``.
matplotlib is imported on first use: ``pip install 'nlsepy[plot]'``.

The models' classes call these functions from thin methods:

=============================  ============================================
``frames.plot()``              :func:`frames`: what ``NLSE.run``,
                               ``DipolarGPE.run`` and ``DecGPE.run`` return
``frames.animate(path)``       :func:`animate_frames`
``gpe.plot()``                 :func:`dipolar`: a DipolarGPE's current state
``sim.plot()``                 :func:`dec`: a DecGPE's current state
``solution.plot()``            :func:`magnet`: a MagnetSolution
``result.plot()``              :func:`mbloch`: a MaxwellBlochResult
``result.animate(path)``       :func:`animate_mbloch`: the fields along z
=============================  ============================================

Axes are labelled in the model's units: the NLSE's dimensionless x and t,
the GPEs' oscillator lengths and trap times (``units of 2/ω`` for
DipolarGPE's ``option=2``: see :mod:`nlsepy.units`), metres and amperes for
the magnet, the retarded time and ``z`` in units of ``1/beta`` for
Maxwell-Bloch.  Phases use the cyclic colormap ``"twilight"`` and are left
blank where the density is below 1e-6 of its maximum.

Animations (:func:`animate_frames`, :func:`animate_mbloch`) are MP4 through
matplotlib's ``FFMpegWriter`` when ffmpeg is on PATH, else GIF through
``PillowWriter``; a path ending ``.gif`` is always GIF.
"""

from __future__ import annotations

import os
import shutil
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import runner

__all__ = ["frames", "animate_frames", "dipolar", "dec", "magnet", "mbloch", "animate_mbloch",
           "save"]

#: inches per panel (width, height); 100 dpi gives 400 x 340 pixels a panel
PANEL = (4.0, 3.4)
#: phase is left blank where |psi|^2 is below this fraction of its maximum
PHASE_FLOOR = 1e-6
_EXTRA = "pip install 'nlsepy[plot]'"
_VIEWS = ("integrated", "slice")
PathLike = Union[str, "os.PathLike[str]"]


# ------------------------------------------------------------------ helpers
def _require() -> Any:
    """matplotlib, or ImportError naming the extra that installs it."""
    try:
        import matplotlib
        import matplotlib.figure  # noqa: F401
    except ImportError:
        raise ImportError(f"plots need matplotlib: {_EXTRA} (the 'plot' extra installs "
                          f"matplotlib)") from None
    return matplotlib


def _panels(fig: Any, n: int, ncols: Optional[int] = None,
            size: Tuple[float, float] = PANEL) -> Tuple[Any, List[Any]]:
    """`n` Axes in a row (or rows of `ncols`) of `fig`, a new Figure when None."""
    _require()
    from matplotlib.figure import Figure
    ncols = min(n, ncols or n)
    nrows = -(-n // ncols)
    if fig is None:
        fig = Figure(figsize=(size[0] * ncols, size[1] * nrows), layout="constrained")
    elif not isinstance(fig, Figure):
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    elif fig.axes:
        raise ValueError(f"fig must be an empty Figure, got one with {len(fig.axes)} Axes; "
                         f"pass ax= to draw the main panel into an Axes of your own")
    axes = list(fig.subplots(nrows, ncols, squeeze=False).ravel())
    for extra in axes[n:]:
        extra.remove()
    return fig, axes[:n]


def save(fig: Any, path: PathLike, dpi: float = 100) -> None:
    """Write `fig` to `path` whole or not at all (a temporary file, then a rename).

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure.
    path : path-like
        Output file; its suffix names the format (``.png``, ``.pdf``,
        ``.svg``...; PNG without a suffix).
    dpi : float, optional
        Resolution: a figure of ``w x h`` inches is ``w dpi x h dpi`` pixels.

    Raises
    ------
    ValueError
        The suffix names a format matplotlib cannot write.
    """
    path = os.fspath(path)
    fmt = os.path.splitext(path)[1][1:].lower() or "png"
    supported = fig.canvas.get_supported_filetypes()
    if fmt not in supported:
        raise ValueError(f"path {path!r}: matplotlib cannot write {fmt!r} files; use one of "
                         f"{sorted(supported)}")
    runner.atomic_write(path, lambda fh: fig.savefig(fh, format=fmt, dpi=dpi))


def _finish(fig: Any, path: Optional[PathLike], dpi: float) -> Any:
    if path is not None:
        save(fig, path, dpi)
    return fig


def _label(name: str, unit: str) -> str:
    return f"{name} ({unit})" if unit else name


def _step(c: np.ndarray) -> float:
    return float(c[1] - c[0]) if len(c) > 1 else 1.0


def _extent(x: np.ndarray, y: np.ndarray) -> Tuple[float, float, float, float]:
    hx, hy = 0.5 * _step(x), 0.5 * _step(y)
    return (float(x[0]) - hx, float(x[-1]) + hx, float(y[0]) - hy, float(y[-1]) + hy)


def _aspect(x: np.ndarray, y: np.ndarray) -> str:
    ex = _extent(x, y)
    ratio = (ex[3] - ex[2]) / max(ex[1] - ex[0], 1e-300)
    return "equal" if 0.2 <= ratio <= 5.0 else "auto"


def _density(psi: np.ndarray) -> np.ndarray:
    return psi.real.astype(np.float64) ** 2 + psi.imag.astype(np.float64) ** 2


def _phase(psi: np.ndarray, dens: Optional[np.ndarray] = None) -> np.ndarray:
    """arg(psi), masked where the density is below PHASE_FLOOR of its maximum."""
    dens = _density(psi) if dens is None else dens
    top = float(dens.max()) if dens.size else 0.0
    return np.ma.masked_where(dens <= PHASE_FLOOR * top, np.angle(psi))


def _phase_bar(fig: Any, mappable: Any, ax: Any) -> None:
    cb = fig.colorbar(mappable, ax=ax, label="phase arg ψ")
    cb.set_ticks([-np.pi, 0.0, np.pi])
    cb.set_ticklabels(["−π", "0", "π"])


def _image(ax: Any, values: np.ndarray, x: np.ndarray, y: np.ndarray, names: Sequence[str],
           unit: str, label: str, vmax: Optional[float] = None, phase: bool = False) -> Any:
    """``values[ix, iy]`` over (x, y) with a colorbar; returns the AxesImage."""
    kw = dict(cmap="twilight", vmin=-np.pi, vmax=np.pi) if phase else \
        dict(cmap="viridis", vmin=0.0, vmax=vmax)
    im = ax.imshow(np.ma.asarray(values).T, origin="lower", extent=_extent(x, y),
                   aspect=_aspect(x, y), interpolation="nearest", **kw)
    ax.set_xlabel(_label(names[0], unit))
    ax.set_ylabel(_label(names[1], unit))
    if phase:
        _phase_bar(ax.figure, im, ax)
    else:
        ax.figure.colorbar(im, ax=ax, label=label)
    return im


def _fmt_t(t: float, unit: str) -> str:
    return f"t = {t:.4g}" + (f" ({unit})" if unit and unit != "dimensionless" else "")


def _index(index: Any, n: int) -> int:
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)) \
            or not -n <= index < n:
        raise ValueError(f"index must be an integer in [{-n}, {n - 1}] (a frame), got {index!r}")
    return int(index) % n


def _frozen_layout(fig: Any) -> None:
    """Lay the figure out once, then keep it (frames of a movie do not jitter)."""
    if hasattr(fig, "draw_without_rendering") and hasattr(fig, "set_layout_engine"):
        fig.draw_without_rendering()
        fig.set_layout_engine("none")


# ------------------------------------------------------------------ frames
def _grid_of(fr: Any, psi: np.ndarray) -> runner.FrameGrid:
    """The frames' grid, or grid indices when it is missing or does not fit."""
    g = getattr(fr, "grid", None)
    shape = psi.shape[1:]
    if g is not None:
        if g.positions is not None and len(shape) == 1 and len(g.positions) == shape[0]:
            return g
        if g.positions is None and tuple(len(c) for c in g.coords) == shape:
            return g
    if not 1 <= len(shape) <= 3:
        raise ValueError(f"frames: states must be 1-3 dimensional arrays, got shape {shape}")
    return runner.FrameGrid(axes=("x", "y", "z")[:len(shape)],
                            coords=tuple(np.arange(n, dtype=float) for n in shape))


def _times(t: np.ndarray, grid: runner.FrameGrid) -> Tuple[np.ndarray, str]:
    """The frames' times and their label; the frame number when the times do
    not increase (imaginary-time frames all carry the same t)."""
    if len(t) > 1 and np.all(np.diff(t) > 0):
        return t, _label("t", grid.time)
    return np.arange(len(t), dtype=float), "frame"


class _View:
    """Panels showing one frame at a time: ``update(i)`` draws frame i."""

    def __init__(self, fig: Any, update: Callable[[int], None]) -> None:
        self.fig, self.update = fig, update


def _title(fig: Any, grid: runner.FrameGrid, title: Optional[str]) -> Callable[[float], None]:
    text = fig.suptitle("")
    head = title if title is not None else grid.model

    def set_time(t: float) -> None:
        text.set_text(f"{head}   {_fmt_t(t, grid.time)}".strip())
    return set_time


def _view_line(fig: Any, psi: np.ndarray, t: np.ndarray, grid: runner.FrameGrid,
               limits: Sequence[int], title: Optional[str]) -> _View:
    """1D: |psi|^2 against x."""
    fig, (ax,) = _panels(fig, 1, size=(6.0, 3.4))
    x = grid.coords[0]
    top = max(float(_density(psi[i]).max()) for i in limits)
    (line,) = ax.plot(x, _density(psi[limits[0]]), lw=1.5)
    ax.set_xlim(float(x[0]), float(x[-1]))
    ax.set_ylim(0.0, 1.05 * top if top > 0 else 1.0)
    ax.set_xlabel(_label(grid.axes[0], grid.length))
    ax.set_ylabel("|ψ|²")
    set_time = _title(fig, grid, title)

    def update(i: int) -> None:
        line.set_ydata(_density(psi[i]))
        set_time(t[i])
    return _View(fig, update)


def _view_2d(fig: Any, psi: np.ndarray, t: np.ndarray, grid: runner.FrameGrid,
             limits: Sequence[int], title: Optional[str]) -> _View:
    """2D: density and phase side by side."""
    fig, (a0, a1) = _panels(fig, 2)
    x, y = grid.coords
    top = max(float(_density(psi[i]).max()) for i in limits)
    d = _density(psi[limits[0]])
    im0 = _image(a0, d, x, y, grid.axes, grid.length, "|ψ|²", vmax=top)
    im1 = _image(a1, _phase(psi[limits[0]], d), x, y, grid.axes, grid.length, "", phase=True)
    a0.set_title("density |ψ|²")
    a1.set_title("phase")
    set_time = _title(fig, grid, title)

    def update(i: int) -> None:
        d = _density(psi[i])
        im0.set_data(d.T)
        im1.set_data(_phase(psi[i], d).T)
        set_time(t[i])
    return _View(fig, update)


def _planes_3d(d: np.ndarray, grid: runner.FrameGrid, view: str) -> List[np.ndarray]:
    """The three planes of a 3D density: integrated along the third axis or
    the central slices (xy, xz, yz)."""
    if view == "integrated":
        h = [_step(c) for c in grid.coords]
        return [d.sum(axis=2) * h[2], d.sum(axis=1) * h[1], d.sum(axis=0) * h[0]]
    c = [n // 2 for n in d.shape]
    return [d[:, :, c[2]], d[:, c[1], :], d[c[0], :, :]]


def _view_3d(fig: Any, psi: np.ndarray, t: np.ndarray, grid: runner.FrameGrid,
             limits: Sequence[int], title: Optional[str], view: str) -> _View:
    """3D: the planes xy, xz, yz of the density and the phase of the central z slice."""
    fig, axes = _panels(fig, 4, ncols=2)
    names, co = grid.axes, grid.coords
    pairs = ((0, 1), (0, 2), (1, 2))
    tops = np.max([[float(p.max()) for p in _planes_3d(_density(psi[i]), grid, view)]
                   for i in limits], axis=0)
    first = psi[limits[0]]
    planes = _planes_3d(_density(first), grid, view)
    ims = []
    for q, ((a, b), ax) in enumerate(zip(pairs, axes)):
        other = 3 - a - b
        if view == "integrated":
            what = f"∫|ψ|² d{names[other]}"
        else:
            where = co[other][len(co[other]) // 2]
            what = f"|ψ|² at {names[other]} = {where:.3g}"
        ims.append(_image(ax, planes[q], co[a], co[b], (names[a], names[b]), grid.length, what,
                          vmax=tops[q]))
        ax.set_title(what)
    kz = len(co[2]) // 2
    ph = _image(axes[3], _phase(first[:, :, kz]), co[0], co[1], names[:2], grid.length, "",
                phase=True)
    axes[3].set_title(f"phase at {names[2]} = {co[2][kz]:.3g}")
    set_time = _title(fig, grid, title)

    def update(i: int) -> None:
        for im, p in zip(ims, _planes_3d(_density(psi[i]), grid, view)):
            im.set_data(p.T)
        ph.set_data(_phase(psi[i][:, :, kz]).T)
        set_time(t[i])
    return _View(fig, update)


def _cell_slice(positions: np.ndarray, centre: Optional[Sequence[float]], z: Optional[float],
                width: Optional[float]) -> Tuple[np.ndarray, str]:
    """Cells of the plane of circumcentres nearest `z` (default the domain's
    centre), or of the slab ``|z_i - z| <= width / 2``; and a title for it."""
    pz = positions[:, 2]
    if z is None:
        z = float(centre[2]) if centre is not None else 0.5 * float(pz.min() + pz.max())
    z = float(z)
    if width is None:
        level = float(pz[np.argmin(np.abs(pz - z))])
        tol = 1e-9 * max(float(pz.max() - pz.min()), 1.0)
        return np.abs(pz - level) <= tol, f"cells at z = {level:.3g}"
    width = float(width)
    if not width > 0:
        raise ValueError(f"width must be > 0, got {width!r}")
    sel = np.abs(pz - z) <= 0.5 * width
    if not sel.any():
        raise ValueError(f"no cell within width / 2 = {0.5 * width:g} of z = {z:g} (the cells "
                         f"span z = {pz.min():g} .. {pz.max():g})")
    return sel, f"cells with |z - {z:.3g}| ≤ {0.5 * width:.3g}"


def _marker_size(px: np.ndarray, py: np.ndarray) -> float:
    """Scatter marker area (points²): the median distance between nearest
    neighbours of the slice (SciPy's cKDTree; else the mean spacing) at the
    scale of an equal-aspect panel."""
    pts = np.column_stack((px, py))
    sx, sy = float(np.ptp(px)) or 1.0, float(np.ptp(py)) or 1.0
    gap = np.sqrt(sx * sy / max(len(px), 1))
    if len(pts) > 1:
        try:
            from scipy.spatial import cKDTree
            dist = cKDTree(pts).query(pts, k=2)[0][:, 1]
            gap = float(np.median(dist[dist > 0])) if np.any(dist > 0) else gap
        except ImportError:
            pass
    side = 0.9 * 72 * 0.6 * PANEL[0] * gap / max(sx + gap, sy + gap)
    return float(np.clip(side ** 2, 1.0, 400.0))


def _view_cells(fig: Any, ax: Any, psi: np.ndarray, t: np.ndarray, grid: runner.FrameGrid,
                limits: Sequence[int], title: Optional[str], z: Optional[float],
                width: Optional[float]) -> _View:
    """Cells (DEC): density and phase on a slice of cells, as scatter plots."""
    sel, where = _cell_slice(grid.positions, grid.centre, z, width)
    if ax is not None:
        fig, axes = ax.figure, [ax]
    else:
        fig, axes = _panels(fig, 2)
    px, py = grid.positions[sel, 0], grid.positions[sel, 1]
    size = _marker_size(px, py)
    top = max(float(_density(psi[i][sel]).max()) for i in limits)
    first = psi[limits[0]][sel]
    sc = [axes[0].scatter(px, py, c=_density(first), s=size, cmap="viridis", vmin=0.0,
                          vmax=top if top > 0 else None, linewidths=0)]
    axes[0].figure.colorbar(sc[0], ax=axes[0], label="|ψ|²")
    axes[0].set_title(f"density, {where}")
    if len(axes) > 1:
        sc.append(axes[1].scatter(px, py, c=_phase(first), s=size, cmap="twilight",
                                  vmin=-np.pi, vmax=np.pi, linewidths=0))
        _phase_bar(fig, sc[1], axes[1])
        axes[1].set_title("phase")
    for a in axes:
        a.set_aspect("equal")
        a.set_xlabel(_label("x", grid.length))
        a.set_ylabel(_label("y", grid.length))
    set_time = _title(fig, grid, title) if ax is None else (lambda t_: None)

    def update(i: int) -> None:
        vals = psi[i][sel]
        sc[0].set_array(_density(vals))
        if len(sc) > 1:
            sc[1].set_array(_phase(vals))
        set_time(t[i])
    return _View(fig, update)


def _check_view(view: str) -> None:
    if view not in _VIEWS:
        raise ValueError(f"view must be one of {_VIEWS}, got {view!r}")


def frames(fr: "runner.Frames", index: int = -1, view: str = "integrated", fig: Any = None,
           ax: Any = None, path: Optional[PathLike] = None, dpi: float = 100,
           title: Optional[str] = None, z: Optional[float] = None,
           width: Optional[float] = None) -> Any:
    """Draw the frames of a run.

    * 1D: space-time maps of ``|psi|^2`` and of the phase (x across, t up);
    * 2D: density and phase of frame `index`, side by side;
    * 3D: the density of frame `index` integrated along z, y and x (or its
      central slices, ``view="slice"``) and the phase on the central z slice;
    * cells (DecGPE): density and phase of frame `index` on the plane of
      cells nearest the domain's centre (see :func:`dec`).

    Parameters
    ----------
    fr : nlsepy.Frames
        What ``run`` returned (its ``grid`` gives coordinates and units;
        without one, axes are grid indices).
    index : int, optional
        The frame drawn in 2D, 3D and for cells (default the last).
    view : {"integrated", "slice"}, optional
        3D: integrated densities or central slices.
    fig : matplotlib.figure.Figure, optional
        An empty figure to draw in (default a new one).
    ax : matplotlib.axes.Axes, optional
        Draw only the main panel (the density) into this Axes.
    path : path-like, optional
        Also save the figure there (PNG unless the suffix says otherwise).
    dpi : float, optional
        Resolution of the saved file.
    title : str, optional
        Figure title (default the model's name and the frame's time).
    z, width : float, optional
        Cells: height of the slice and its thickness (see :func:`dec`).

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ImportError
        matplotlib is not installed (``pip install 'nlsepy[plot]'``).
    ValueError
        No frames, a bad `index` or `view`, or a `fig` that is not empty.
    """
    _require()
    _check_view(view)
    if len(fr) == 0:
        raise ValueError("frames: nothing to plot (no frames)")
    psi = fr.psi
    grid = _grid_of(fr, psi)
    i = _index(index, len(fr))
    t = fr.t
    if grid.positions is not None:
        v = _view_cells(fig, ax, psi, t, grid, [i], title, z, width)
        v.update(i)
        return _finish(v.fig, path, dpi)
    ndim = psi.ndim - 1
    if ndim == 1:
        return _finish(_spacetime(fig, ax, psi, t, grid, title), path, dpi)
    if ax is not None:
        d = _density(psi[i])
        names, co = grid.axes, grid.coords
        what = "|ψ|²"
        if ndim == 3:
            d = _planes_3d(d, grid, view)[0]
            what = (f"∫|ψ|² d{names[2]}" if view == "integrated"
                    else f"|ψ|² at {names[2]} = {co[2][len(co[2]) // 2]:.3g}")
        _image(ax, d, co[0], co[1], names, grid.length, what)
        ax.set_title(f"{what}, {_fmt_t(t[i], grid.time)}")
        return _finish(ax.figure, path, dpi)
    v = (_view_2d(fig, psi, t, grid, [i], title) if ndim == 2
         else _view_3d(fig, psi, t, grid, [i], title, view))
    v.update(i)
    return _finish(v.fig, path, dpi)


def _spacetime(fig: Any, ax: Any, psi: np.ndarray, t: np.ndarray, grid: runner.FrameGrid,
               title: Optional[str]) -> Any:
    """1D: maps of |psi|^2 and of the phase over (x, t)."""
    if ax is not None:
        fig, axes = ax.figure, [ax]
    else:
        fig, axes = _panels(fig, 2)
    x = grid.coords[0]
    tt, tlabel = _times(t, grid)
    dens = _density(psi)
    m = axes[0].pcolormesh(x, tt, dens, shading="nearest", cmap="viridis", vmin=0.0)
    fig.colorbar(m, ax=axes[0], label="|ψ|²")
    axes[0].set_title("density |ψ|²")
    if len(axes) > 1:
        m = axes[1].pcolormesh(x, tt, _phase(psi, dens), shading="nearest", cmap="twilight",
                               vmin=-np.pi, vmax=np.pi)
        _phase_bar(fig, m, axes[1])
        axes[1].set_title("phase")
    for a in axes:
        a.set_xlabel(_label(grid.axes[0], grid.length))
        a.set_ylabel(tlabel)
    if ax is None and (title or grid.model):
        fig.suptitle(title if title is not None else grid.model)
    return fig


def _movie_path(path: PathLike) -> Tuple[str, str]:
    """The file to write and its kind, "gif" or "mp4"."""
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext not in ("", ".gif", ".mp4"):
        raise ValueError(f"path must end in .gif or .mp4 (or have no suffix: MP4 when ffmpeg "
                         f"is found, else GIF), got {path!r}")
    if ext == ".gif":
        return path, "gif"
    mpl = _require()
    ffmpeg = shutil.which(mpl.rcParams["animation.ffmpeg_path"])
    if ext == ".mp4" and ffmpeg is None:
        raise RuntimeError(f"writing {path!r} (MP4) needs ffmpeg, which is not on PATH: "
                           f"install ffmpeg (e.g. apt install ffmpeg, conda install ffmpeg, "
                           f"brew install ffmpeg) or give a path ending in .gif")
    if ext == "":
        return (path + ".mp4", "mp4") if ffmpeg else (path + ".gif", "gif")
    return path, "mp4"


def _write_movie(fig: Any, update: Callable[[int], None], n: int, path: PathLike, fps: float,
                 dpi: float) -> str:
    """Draw frames ``update(0 .. n-1)`` into `path`: a temporary file beside it,
    renamed over it once complete (nothing is left on failure)."""
    path, kind = _movie_path(path)
    if not (isinstance(fps, (int, float, np.integer, np.floating)) and fps > 0):
        raise ValueError(f"fps must be a number > 0, got {fps!r}")
    from matplotlib import animation
    writer = animation.PillowWriter(fps=fps) if kind == "gif" else animation.FFMpegWriter(fps=fps)
    directory, base = os.path.split(os.path.abspath(path))
    tmp = os.path.join(directory, f".{base}.{os.getpid()}.tmp.{kind}")
    _frozen_layout(fig)
    done = False
    try:
        writer.setup(fig, tmp, dpi)
        try:
            for i in range(n):
                update(i)
                writer.grab_frame()
            done = True
        finally:
            if done:
                writer.finish()
            else:
                _abandon(writer)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def _abandon(writer: Any) -> None:
    """Stop a movie writer that failed part way (an ffmpeg process is killed;
    Pillow keeps its frames in memory and has nothing to stop)."""
    proc = getattr(writer, "_proc", None)
    if proc is not None:
        try:
            proc.kill()
            proc.communicate()
        except OSError:
            pass


def animate_frames(fr: "runner.Frames", path: PathLike, fps: float = 10, dpi: float = 100,
                   view: str = "integrated", title: Optional[str] = None) -> str:
    """Write an animation of a run's frames, one movie frame per snapshot.

    1D: ``|psi|^2`` against x; 2D: density and phase; 3D: the integrated
    densities (or central slices, ``view="slice"``) and the phase of the
    central z slice; cells: the slice of cells nearest the centre.  Colour
    and y limits are fixed over the run.

    Parameters
    ----------
    fr : nlsepy.Frames
        What ``run`` returned.
    path : path-like
        ``*.gif``: GIF through Pillow; ``*.mp4``: MP4 through ffmpeg (which
        must be on PATH); no suffix: MP4 when ffmpeg is found, else GIF (the
        suffix is added).  Written whole or not at all.
    fps : float, optional
        Frames per second.
    dpi : float, optional
        Resolution (pixels per inch of the figure).
    view : {"integrated", "slice"}, optional
        3D: integrated densities or central slices.
    title : str, optional
        Title before the time (default the model's name).

    Returns
    -------
    str
        The path written.

    Raises
    ------
    RuntimeError
        An ``.mp4`` path without ffmpeg on PATH.
    ValueError
        No frames, another suffix, or a bad `fps` or `view`.
    """
    _require()
    _check_view(view)
    _movie_path(path)  # a bad path fails before anything is drawn
    if len(fr) == 0:
        raise ValueError("frames: nothing to animate (no frames)")
    psi = fr.psi
    grid = _grid_of(fr, psi)
    t = fr.t
    every = range(len(fr))
    if grid.positions is not None:
        v = _view_cells(None, None, psi, t, grid, every, title, None, None)
    elif psi.ndim == 2:
        v = _view_line(None, psi, t, grid, every, title)
    elif psi.ndim == 3:
        v = _view_2d(None, psi, t, grid, every, title)
    else:
        v = _view_3d(None, psi, t, grid, every, title, view)
    return _write_movie(v.fig, v.update, len(fr), path, fps, dpi)


# ------------------------------------------------------------------ dipolar
def dipolar(gpe: Any, fig: Any = None, ax: Any = None, path: Optional[PathLike] = None,
            dpi: float = 100, title: Optional[str] = None) -> Any:
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

    Returns
    -------
    matplotlib.figure.Figure
    """
    _require()
    grid = gpe._frame_grid()
    names, co, unit = gpe.axes, gpe.coords, grid.length
    nd = gpe.ndim
    one = getattr(gpe, "comm", None) is None
    head = title if title is not None else \
        f"DipolarGPE ({gpe.geometry})   {_fmt_t(gpe.t, grid.time)}"

    def lines(a: Any) -> None:
        if nd == 1:
            a.plot(co[0], gpe.density(), label="|ψ|²")
        else:
            for q, name in enumerate(names):
                a.plot(co[q], gpe.density((name,)), label=f"n({name})")
        a.set_xlabel(_label("position", unit) if nd > 1 else _label(names[0], unit))
        a.set_ylabel("integrated density" if nd > 1 else "|ψ|²")
        a.legend(fontsize="small")
        a.set_title("integrated densities" if nd > 1 else "density")

    if ax is not None:
        lines(ax)
        return _finish(ax.figure, path, dpi)
    if nd == 1:
        fig, (a0, a1) = _panels(fig, 2)
        lines(a0)
        psi = gpe.psi
        a1.plot(co[0], _phase(psi), color="tab:purple")
        a1.set_ylim(-np.pi * 1.05, np.pi * 1.05)
        a1.set_yticks([-np.pi, 0.0, np.pi], ["−π", "0", "π"])
        a1.set_xlabel(_label(names[0], unit))
        a1.set_ylabel("phase arg ψ")
        a1.set_title("phase")
    elif nd == 2:
        fig, (a0, a1, a2) = _panels(fig, 3)
        psi = gpe.psi
        d = _density(psi)
        _image(a0, d, co[0], co[1], names, unit, "|ψ|²")
        a0.set_title("density |ψ|²")
        _image(a1, _phase(psi, d), co[0], co[1], names, unit, "", phase=True)
        a1.set_title("phase")
        lines(a2)
    else:
        fig, axes = _panels(fig, 4, ncols=2)
        for a, (p, q) in zip(axes, ((0, 1), (0, 2))):
            other = names[3 - p - q]
            _image(a, gpe.density((names[p], names[q])), co[p], co[q], (names[p], names[q]),
                   unit, f"n({names[p]}, {names[q]})")
            a.set_title(f"∫|ψ|² d{other}")
        ky = gpe.shape[1] // 2
        # one process: masked where the density is negligible; distributed: the
        # whole slice from every rank (collective)
        ph = _phase(gpe.psi[:, ky, :]) if one else gpe.phase_slice(names[1])
        _image(axes[2], ph, co[0], co[2], (names[0], names[2]), unit, "", phase=True)
        axes[2].set_title(f"phase at {names[1]} = {co[1][ky]:.3g}")
        lines(axes[3])
    fig.suptitle(head)
    return _finish(fig, path, dpi)


# ------------------------------------------------------------------ DEC
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
    _require()
    grid = sim._frame_grid()
    v = _view_cells(fig, ax, sim.psi[None], np.array([sim.t]), grid, [0], title, z, width)
    v.update(0)
    return _finish(v.fig, path, dpi)


# ------------------------------------------------------------------ magnet
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
    _require()
    from .magnet import post
    w = None if n_turns is None else sol.winding(n_turns)
    if ax is not None:
        post.plot(*sol._geom(), winding=w, ax=ax, levels=levels, full=full, filled=True)
        return _finish(ax.figure, path, dpi)
    fig, (a0, a1) = _panels(fig, 2)
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
    return _finish(fig, path, dpi)


# ------------------------------------------------------------------ Maxwell-Bloch
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
    _require()
    I = res.fields.real ** 2 + res.fields.imag ** 2
    modes = _mb_modes(res, modes, I)
    if ax is not None:
        axes = list(np.atleast_1d(np.asarray(ax, dtype=object)))
        if len(axes) != len(modes):
            raise ValueError(f"ax must hold one Axes per mode ({len(modes)}), got {len(axes)}")
        for a, l in zip(axes, modes):
            _mb_map(a, res, I, l, kwargs)
        return _finish(axes[0].figure, path, dpi)
    pops = res.populations is not None
    fig, axes = _panels(fig, len(modes) + pops, ncols=3)
    for a, l in zip(axes, modes):
        _mb_map(a, res, I, l, kwargs)
    if pops:
        _mb_populations(axes[-1], res)
    if title is not None:
        fig.suptitle(title)
    return _finish(fig, path, dpi)


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
    _require()
    _movie_path(path)
    if res.z.size < 2:
        raise ValueError(f"the result holds the fields at {res.z.size} z only; run with "
                         f"full_map=True or a smaller save_every to animate along z")
    I = res.fields.real ** 2 + res.fields.imag ** 2
    modes = _mb_modes(res, modes, I)
    fig, (ax,) = _panels(None, 1, size=(6.0, 3.4))
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
    return _write_movie(fig, update, res.z.size, path, fps, dpi)
