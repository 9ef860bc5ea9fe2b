"""Figure helpers every model uses, and the figures of a run's frames.

Each function draws with matplotlib's object-oriented API on a
:class:`matplotlib.figure.Figure` it makes (or on the empty ``fig`` or the
``ax`` it is given) and returns that Figure; pyplot is never imported.
matplotlib is imported on first use (:func:`require`).  The models' own
figures are in ``nlsepy/<stem>/plot.py``; :mod:`nlsepy.plot` gathers them
all under one public name.
"""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import vortices as _vortices
from .files import atomic_write
from .framegrid import FrameGrid

if TYPE_CHECKING:
    from .runner import Frames

__all__ = ["frames", "animate_frames", "save", "overlay_vortices"]

#: inches per panel (width, height); 100 dpi gives 400 x 340 pixels a panel
PANEL = (4.0, 3.4)
#: phase is left blank where |psi|^2 is below this fraction of its maximum
PHASE_FLOOR = 1e-6
_EXTRA = "pip install 'nlsepy[plot]'"
_VIEWS = ("integrated", "slice")
PathLike = Union[str, "os.PathLike[str]"]


# ------------------------------------------------------------------ helpers
def require() -> Any:
    """matplotlib, or ImportError naming the extra that installs it."""
    try:
        import matplotlib
        import matplotlib.figure  # noqa: F401
    except ImportError:
        raise ImportError(f"plots need matplotlib: {_EXTRA} (the 'plot' extra installs "
                          f"matplotlib)") from None
    return matplotlib


def panels(fig: Any, n: int, ncols: Optional[int] = None,
            size: Tuple[float, float] = PANEL) -> Tuple[Any, List[Any]]:
    """`n` Axes in a row (or rows of `ncols`) of `fig`, a new Figure when None."""
    require()
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
    atomic_write(path, lambda fh: fig.savefig(fh, format=fmt, dpi=dpi))


def finish(fig: Any, path: Optional[PathLike], dpi: float) -> Any:
    if path is not None:
        save(fig, path, dpi)
    return fig


def axis_label(name: str, unit: str) -> str:
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


def density_of(psi: np.ndarray) -> np.ndarray:
    return psi.real.astype(np.float64) ** 2 + psi.imag.astype(np.float64) ** 2


def phase_of(psi: np.ndarray, dens: Optional[np.ndarray] = None) -> np.ndarray:
    """arg(psi), masked where the density is below PHASE_FLOOR of its maximum."""
    dens = density_of(psi) if dens is None else dens
    top = float(dens.max()) if dens.size else 0.0
    return np.ma.masked_where(dens <= PHASE_FLOOR * top, np.angle(psi))


def _phase_bar(fig: Any, mappable: Any, ax: Any) -> None:
    cb = fig.colorbar(mappable, ax=ax, label="phase arg ψ")
    cb.set_ticks([-np.pi, 0.0, np.pi])
    cb.set_ticklabels(["−π", "0", "π"])


def image(ax: Any, values: np.ndarray, x: np.ndarray, y: np.ndarray, names: Sequence[str],
           unit: str, label: str, vmax: Optional[float] = None, phase: bool = False) -> Any:
    """``values[ix, iy]`` over (x, y) with a colorbar; returns the AxesImage."""
    kw = dict(cmap="twilight", vmin=-np.pi, vmax=np.pi) if phase else \
        dict(cmap="viridis", vmin=0.0, vmax=vmax)
    im = ax.imshow(np.ma.asarray(values).T, origin="lower", extent=_extent(x, y),
                   aspect=_aspect(x, y), interpolation="nearest", **kw)
    ax.set_xlabel(axis_label(names[0], unit))
    ax.set_ylabel(axis_label(names[1], unit))
    if phase:
        _phase_bar(ax.figure, im, ax)
    else:
        ax.figure.colorbar(im, ax=ax, label=label)
    return im


def fmt_time(t: float, unit: str) -> str:
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
def _grid_of(fr: Any, psi: np.ndarray) -> FrameGrid:
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
    return FrameGrid(axes=("x", "y", "z")[:len(shape)],
                            coords=tuple(np.arange(n, dtype=float) for n in shape))


def _times(t: np.ndarray, grid: FrameGrid) -> Tuple[np.ndarray, str]:
    """The frames' times and their label; the frame number when the times do
    not increase (imaginary-time frames all carry the same t)."""
    if len(t) > 1 and np.all(np.diff(t) > 0):
        return t, axis_label("t", grid.time)
    return np.arange(len(t), dtype=float), "frame"


class _View:
    """Panels showing one frame at a time: ``update(i)`` draws frame i;
    ``axes`` are the image panels."""

    def __init__(self, fig: Any, update: Callable[[int], None],
                 axes: Sequence[Any] = ()) -> None:
        self.fig, self.update, self.axes = fig, update, list(axes)


def _title(fig: Any, grid: FrameGrid, title: Optional[str]) -> Callable[[float], None]:
    text = fig.suptitle("")
    head = title if title is not None else grid.model

    def set_time(t: float) -> None:
        text.set_text(f"{head}   {fmt_time(t, grid.time)}".strip())
    return set_time


def _view_line(fig: Any, psi: np.ndarray, t: np.ndarray, grid: FrameGrid,
               limits: Sequence[int], title: Optional[str]) -> _View:
    """1D: |psi|^2 against x."""
    fig, (ax,) = panels(fig, 1, size=(6.0, 3.4))
    x = grid.coords[0]
    top = max(float(density_of(psi[i]).max()) for i in limits)
    (line,) = ax.plot(x, density_of(psi[limits[0]]), lw=1.5)
    ax.set_xlim(float(x[0]), float(x[-1]))
    ax.set_ylim(0.0, 1.05 * top if top > 0 else 1.0)
    ax.set_xlabel(axis_label(grid.axes[0], grid.length))
    ax.set_ylabel("|ψ|²")
    set_time = _title(fig, grid, title)

    def update(i: int) -> None:
        line.set_ydata(density_of(psi[i]))
        set_time(t[i])
    return _View(fig, update)


def _view_2d(fig: Any, psi: np.ndarray, t: np.ndarray, grid: FrameGrid,
             limits: Sequence[int], title: Optional[str]) -> _View:
    """2D: density and phase side by side."""
    fig, (a0, a1) = panels(fig, 2)
    x, y = grid.coords
    top = max(float(density_of(psi[i]).max()) for i in limits)
    d = density_of(psi[limits[0]])
    im0 = image(a0, d, x, y, grid.axes, grid.length, "|ψ|²", vmax=top)
    im1 = image(a1, phase_of(psi[limits[0]], d), x, y, grid.axes, grid.length, "", phase=True)
    a0.set_title("density |ψ|²")
    a1.set_title("phase")
    set_time = _title(fig, grid, title)

    def update(i: int) -> None:
        d = density_of(psi[i])
        im0.set_data(d.T)
        im1.set_data(phase_of(psi[i], d).T)
        set_time(t[i])
    return _View(fig, update, [a0, a1])


def _planes_3d(d: np.ndarray, grid: FrameGrid, view: str) -> List[np.ndarray]:
    """The three planes of a 3D density: integrated along the third axis or
    the central slices (xy, xz, yz)."""
    if view == "integrated":
        h = [_step(c) for c in grid.coords]
        return [d.sum(axis=2) * h[2], d.sum(axis=1) * h[1], d.sum(axis=0) * h[0]]
    c = [n // 2 for n in d.shape]
    return [d[:, :, c[2]], d[:, c[1], :], d[c[0], :, :]]


def _view_3d(fig: Any, psi: np.ndarray, t: np.ndarray, grid: FrameGrid,
             limits: Sequence[int], title: Optional[str], view: str) -> _View:
    """3D: the planes xy, xz, yz of the density and the phase of the central z slice."""
    fig, axes = panels(fig, 4, ncols=2)
    names, co = grid.axes, grid.coords
    pairs = ((0, 1), (0, 2), (1, 2))
    tops = np.max([[float(p.max()) for p in _planes_3d(density_of(psi[i]), grid, view)]
                   for i in limits], axis=0)
    first = psi[limits[0]]
    planes = _planes_3d(density_of(first), grid, view)
    ims = []
    for q, ((a, b), ax) in enumerate(zip(pairs, axes)):
        other = 3 - a - b
        if view == "integrated":
            what = f"∫|ψ|² d{names[other]}"
        else:
            where = co[other][len(co[other]) // 2]
            what = f"|ψ|² at {names[other]} = {where:.3g}"
        ims.append(image(ax, planes[q], co[a], co[b], (names[a], names[b]), grid.length, what,
                          vmax=tops[q]))
        ax.set_title(what)
    kz = len(co[2]) // 2
    ph = image(axes[3], phase_of(first[:, :, kz]), co[0], co[1], names[:2], grid.length, "",
                phase=True)
    axes[3].set_title(f"phase at {names[2]} = {co[2][kz]:.3g}")
    set_time = _title(fig, grid, title)

    def update(i: int) -> None:
        for im, p in zip(ims, _planes_3d(density_of(psi[i]), grid, view)):
            im.set_data(p.T)
        ph.set_data(phase_of(psi[i][:, :, kz]).T)
        set_time(t[i])
    return _View(fig, update, axes)


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


def view_cells(fig: Any, ax: Any, psi: np.ndarray, t: np.ndarray, grid: FrameGrid,
                limits: Sequence[int], title: Optional[str], z: Optional[float],
                width: Optional[float]) -> _View:
    """Cells (DEC): density and phase on a slice of cells, as scatter plots."""
    sel, where = _cell_slice(grid.positions, grid.centre, z, width)
    if ax is not None:
        fig, axes = ax.figure, [ax]
    else:
        fig, axes = panels(fig, 2)
    px, py = grid.positions[sel, 0], grid.positions[sel, 1]
    size = _marker_size(px, py)
    top = max(float(density_of(psi[i][sel]).max()) for i in limits)
    first = psi[limits[0]][sel]
    sc = [axes[0].scatter(px, py, c=density_of(first), s=size, cmap="viridis", vmin=0.0,
                          vmax=top if top > 0 else None, linewidths=0)]
    axes[0].figure.colorbar(sc[0], ax=axes[0], label="|ψ|²")
    axes[0].set_title(f"density, {where}")
    if len(axes) > 1:
        sc.append(axes[1].scatter(px, py, c=phase_of(first), s=size, cmap="twilight",
                                  vmin=-np.pi, vmax=np.pi, linewidths=0))
        _phase_bar(fig, sc[1], axes[1])
        axes[1].set_title("phase")
    for a in axes:
        a.set_aspect("equal")
        a.set_xlabel(axis_label("x", grid.length))
        a.set_ylabel(axis_label("y", grid.length))
    set_time = _title(fig, grid, title) if ax is None else (lambda t_: None)

    def update(i: int) -> None:
        vals = psi[i][sel]
        sc[0].set_array(density_of(vals))
        if len(sc) > 1:
            sc[1].set_array(phase_of(vals))
        set_time(t[i])
    return _View(fig, update)


# ----------------------------------------------------------------- vortices
#: how point vortices are marked, by the sign of their charge: colour,
#: marker, legend label (the marker's area grows with |charge|)
VORTEX_MARKS = {1: ("#e41a1c", "o", "vortex (+)"), -1: ("#00b7ff", "s", "antivortex (−)")}
#: colour of vortex lines
VORTEX_LINE = "white"


def overlay_vortices(ax: Any, found: Any, plane: Tuple[int, int] = (0, 1),
                     size: float = 30.0) -> List[Any]:
    """Mark vortices on a panel drawn over the grid's coordinates.

    Point vortices (:class:`nlsepy.Vortices`): positive charges as red
    circles, negative as blue squares, the area growing with ``|charge|``,
    each with a white edge so that it shows on the density and on the
    phase.  Vortex lines (:class:`nlsepy.VortexLines`): each line projected
    onto the panel's plane, closed lines closed.  The panel's limits are
    kept.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The panel (an image over the plane's coordinates).
    found : nlsepy.Vortices or nlsepy.VortexLines
        What :func:`nlsepy.vortices` returned.
    plane : (int, int), optional
        The axes of the lines' points along the panel's x and y (3D);
        point vortices are drawn over their two coordinates.
    size : float, optional
        Marker area (points²) of a unit charge.

    Returns
    -------
    list
        The artists drawn (remove them to clear the marks).
    """
    xlim, ylim = ax.get_xlim(), ax.get_ylim()
    out: List[Any] = []
    if isinstance(found, _vortices.Vortices):
        for sign, (colour, marker, label) in VORTEX_MARKS.items():
            sel = np.sign(found.charges) == sign
            if sel.any():
                out.append(ax.scatter(found.positions[sel, 0], found.positions[sel, 1],
                                      s=size * np.abs(found.charges[sel]), c=colour,
                                      marker=marker, edgecolors="white", linewidths=0.8,
                                      label=label, zorder=3))
    elif isinstance(found, _vortices.VortexLines):
        a, b = plane
        for line in found:
            p = line._path()
            out.extend(ax.plot(p[:, a], p[:, b], color=VORTEX_LINE, lw=1.2, zorder=3))
    else:
        raise TypeError(f"found must be what nlsepy.vortices returns (Vortices or "
                        f"VortexLines), got {type(found).__name__}")
    ax.set_xlim(xlim)
    ax.set_ylim(ylim)
    return out


def vortex_options(option: Any) -> Optional[dict]:
    """The finder's keyword arguments of ``vortices=`` (None: no marks)."""
    if option is None or option is False:
        return None
    if option is True:
        return {}
    if isinstance(option, dict) and set(option) <= {"threshold", "reach"}:
        return dict(option)
    raise ValueError(f"vortices must be True, False or a dict of the finder's threshold and "
                     f"reach, got {option!r}")


def _grid_steps(grid: FrameGrid,
                axes: Sequence[int]) -> Tuple[List[float], List[float], List[bool]]:
    """Spacing, origin and periodic flags of the grid's `axes`."""
    per = grid.periodic or (False,) * len(grid.coords)
    return ([_step(grid.coords[a]) for a in axes], [float(grid.coords[a][0]) for a in axes],
            [bool(per[a]) for a in axes])


def _vortex_layer(v: _View, psi: np.ndarray, grid: FrameGrid, view: str,
                  options: dict) -> Callable[[int], None]:
    """Marks of frame i's vortices on the panels of a 2D or 3D view: 2D the
    point vortices on density and phase; 3D the lines projected on the
    integrated densities (the point vortices of each slice with
    ``view="slice"``) and the point vortices of the phase's z slice."""
    drawn: List[Any] = []
    nd = psi.ndim - 1

    def points(state: np.ndarray, axes: Tuple[int, int]) -> Any:
        h, o, p = _grid_steps(grid, axes)
        return _vortices.vortices(state, h, o, periodic=p, **options)

    def update(i: int) -> None:
        for artist in drawn:
            artist.remove()
        drawn.clear()
        state = psi[i]
        if nd == 2:
            found = points(state, (0, 1))
            for ax in v.axes:
                drawn.extend(overlay_vortices(ax, found))
            return
        pairs = ((0, 1), (0, 2), (1, 2))
        if view == "integrated":
            h, o, p = _grid_steps(grid, (0, 1, 2))
            lines = _vortices.vortices(state, h, o, periodic=p, **options)
            for ax, plane in zip(v.axes[:3], pairs):
                drawn.extend(overlay_vortices(ax, lines, plane))
        else:
            c = [n // 2 for n in state.shape]
            cuts = (state[:, :, c[2]], state[:, c[1], :], state[c[0], :, :])
            for ax, plane, cut in zip(v.axes[:3], pairs, cuts):
                drawn.extend(overlay_vortices(ax, points(cut, plane)))
        if len(v.axes) > 3:
            kz = state.shape[2] // 2
            drawn.extend(overlay_vortices(v.axes[3], points(state[:, :, kz], (0, 1))))
    return update


def _check_view(view: str) -> None:
    if view not in _VIEWS:
        raise ValueError(f"view must be one of {_VIEWS}, got {view!r}")


def frames(fr: "Frames", index: int = -1, view: str = "integrated", fig: Any = None,
           ax: Any = None, path: Optional[PathLike] = None, dpi: float = 100,
           title: Optional[str] = None, z: Optional[float] = None,
           width: Optional[float] = None, vortices: Any = False) -> Any:
    """Draw the frames of a run.

    * 1D: space-time maps of ``|psi|^2`` and of the phase (x across, t up);
      ``|psi|^2`` against x for a single frame;
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
    vortices : bool or dict, optional
        Mark the frame's vortices (:func:`nlsepy.vortices`, 2D and 3D):
        point vortices on density and phase (positive red circles,
        negative blue squares); in 3D the lines projected on the
        integrated densities (the slices' point vortices with
        ``view="slice"``) and the point vortices of the phase's slice.  A
        dict passes ``threshold`` and ``reach`` to the finder.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ImportError
        matplotlib is not installed (``pip install 'nlsepy[plot]'``).
    ValueError
        No frames, a bad `index`, `view` or `vortices`, or a `fig` that is
        not empty.
    """
    require()
    _check_view(view)
    marks = vortex_options(vortices)
    if len(fr) == 0:
        raise ValueError("frames: nothing to plot (no frames)")
    psi = fr.psi
    grid = _grid_of(fr, psi)
    i = _index(index, len(fr))
    t = fr.t
    if grid.positions is not None:
        if marks is not None:
            raise ValueError("vortices=: frames of cells have no Cartesian grid; mark the "
                             "vortices of DecGPE.vortices() with nlsepy.plot.overlay_vortices")
        v = view_cells(fig, ax, psi, t, grid, [i], title, z, width)
        v.update(i)
        return finish(v.fig, path, dpi)
    ndim = psi.ndim - 1
    if marks is not None and ndim == 1:
        raise ValueError("vortices=: 1D states have no vortices")
    if ndim == 1 and len(fr) == 1 and ax is None:  # one state: |psi|^2 against x
        v = _view_line(fig, psi, t, grid, [0], title)
        v.update(0)
        return finish(v.fig, path, dpi)
    if ndim == 1:
        return finish(_spacetime(fig, ax, psi, t, grid, title), path, dpi)
    if ax is not None:
        d = density_of(psi[i])
        names, co = grid.axes, grid.coords
        what = "|ψ|²"
        if ndim == 3:
            d = _planes_3d(d, grid, view)[0]
            what = (f"∫|ψ|² d{names[2]}" if view == "integrated"
                    else f"|ψ|² at {names[2]} = {co[2][len(co[2]) // 2]:.3g}")
        image(ax, d, co[0], co[1], names, grid.length, what)
        ax.set_title(f"{what}, {fmt_time(t[i], grid.time)}")
        if marks is not None:
            _vortex_layer(_View(ax.figure, lambda k: None, [ax]), psi[:, :, :, co[2].size // 2]
                          if ndim == 3 and view == "slice" else psi, grid, view, marks)(i)
        return finish(ax.figure, path, dpi)
    v = (_view_2d(fig, psi, t, grid, [i], title) if ndim == 2
         else _view_3d(fig, psi, t, grid, [i], title, view))
    v.update(i)
    if marks is not None:
        _vortex_layer(v, psi, grid, view, marks)(i)
    return finish(v.fig, path, dpi)


def _spacetime(fig: Any, ax: Any, psi: np.ndarray, t: np.ndarray, grid: FrameGrid,
               title: Optional[str]) -> Any:
    """1D: maps of |psi|^2 and of the phase over (x, t)."""
    if ax is not None:
        fig, axes = ax.figure, [ax]
    else:
        fig, axes = panels(fig, 2)
    x = grid.coords[0]
    tt, tlabel = _times(t, grid)
    dens = density_of(psi)
    m = axes[0].pcolormesh(x, tt, dens, shading="nearest", cmap="viridis", vmin=0.0)
    fig.colorbar(m, ax=axes[0], label="|ψ|²")
    axes[0].set_title("density |ψ|²")
    if len(axes) > 1:
        m = axes[1].pcolormesh(x, tt, phase_of(psi, dens), shading="nearest", cmap="twilight",
                               vmin=-np.pi, vmax=np.pi)
        _phase_bar(fig, m, axes[1])
        axes[1].set_title("phase")
    for a in axes:
        a.set_xlabel(axis_label(grid.axes[0], grid.length))
        a.set_ylabel(tlabel)
    if ax is None and (title or grid.model):
        fig.suptitle(title if title is not None else grid.model)
    return fig


def movie_path(path: PathLike) -> Tuple[str, str]:
    """The file to write and its kind, "gif" or "mp4"."""
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext not in ("", ".gif", ".mp4"):
        raise ValueError(f"path must end in .gif or .mp4 (or have no suffix: MP4 when ffmpeg "
                         f"is found, else GIF), got {path!r}")
    if ext == ".gif":
        return path, "gif"
    mpl = require()
    ffmpeg = shutil.which(mpl.rcParams["animation.ffmpeg_path"])
    if ext == ".mp4" and ffmpeg is None:
        raise RuntimeError(f"writing {path!r} (MP4) needs ffmpeg, which is not on PATH: "
                           f"install ffmpeg (e.g. apt install ffmpeg, conda install ffmpeg, "
                           f"brew install ffmpeg) or give a path ending in .gif")
    if ext == "":
        return (path + ".mp4", "mp4") if ffmpeg else (path + ".gif", "gif")
    return path, "mp4"


def write_movie(fig: Any, update: Callable[[int], None], n: int, path: PathLike, fps: float,
                 dpi: float) -> str:
    """Draw frames ``update(0 .. n-1)`` into `path`: a temporary file beside it,
    renamed over it once complete (nothing is left on failure)."""
    path, kind = movie_path(path)
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


def animate_frames(fr: "Frames", path: PathLike, fps: float = 10, dpi: float = 100,
                   view: str = "integrated", title: Optional[str] = None,
                   vortices: Any = False) -> str:
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
    vortices : bool or dict, optional
        Mark each frame's vortices, as :func:`frames` does (2D and 3D).

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
    require()
    _check_view(view)
    marks = vortex_options(vortices)
    movie_path(path)  # a bad path fails before anything is drawn
    if len(fr) == 0:
        raise ValueError("frames: nothing to animate (no frames)")
    psi = fr.psi
    grid = _grid_of(fr, psi)
    t = fr.t
    every = range(len(fr))
    if grid.positions is not None:
        v = view_cells(None, None, psi, t, grid, every, title, None, None)
    elif psi.ndim == 2:
        v = _view_line(None, psi, t, grid, every, title)
    elif psi.ndim == 3:
        v = _view_2d(None, psi, t, grid, every, title)
    else:
        v = _view_3d(None, psi, t, grid, every, title, view)
    update = v.update
    if marks is not None:
        if grid.positions is not None or psi.ndim == 2:
            raise ValueError("vortices=: only frames of 2D and 3D grids have vortices to mark")
        layer = _vortex_layer(v, psi, grid, view, marks)

        def update(i: int) -> None:
            v.update(i)
            layer(i)
    return write_movie(v.fig, update, len(fr), path, fps, dpi)
