"""The chunked run protocol every time-dependent model shares; public as
:mod:`nlsepy.runner`, whose docstring describes it."""

from __future__ import annotations

import math
import os
from concurrent.futures import Future
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import dist as _dist
from . import files as _files
from . import guard as _guard
from . import hdf5 as _hdf5
from . import plot
from . import vortices as _vortices
from .framegrid import FrameGrid

__all__ = ["Frames", "FrameGrid", "run"]


class Frames(Sequence):
    """Snapshots ``(t, state)`` of a run, in time order.

    Behaves as a list of ``(t, state)`` tuples; ``frames.t`` is the array of
    times and ``frames.psi`` stacks the states along a new first axis.  A
    state may arrive as a ``concurrent.futures.Future`` (a frame still on its
    way from a device); it is waited for on first access.  ``frames.grid``
    (a :class:`FrameGrid`, or None) says where the values lie; :meth:`plot`
    and :meth:`animate` draw them; :meth:`vortices` follows the vortices
    of 2D and 3D states through the frames.
    """

    def __init__(self, grid: Optional[FrameGrid] = None) -> None:
        self._t: List[float] = []
        self._s: List[Any] = []
        self.grid = grid

    def append(self, t: float, state: Any) -> None:
        self._t.append(float(t))
        self._s.append(state)

    def _resolve(self) -> None:
        self._s = [s.result() if isinstance(s, Future) else s for s in self._s]

    def __len__(self) -> int:
        return len(self._t)

    def __getitem__(self, i):  # type: ignore[override]
        self._resolve()
        if isinstance(i, slice):
            out = Frames(self.grid)
            for t, s in zip(self._t[i], self._s[i]):
                out.append(t, s)
            return out
        return (self._t[i], self._s[i])

    def __iter__(self) -> Iterator[Tuple[float, Any]]:
        self._resolve()
        return iter(zip(self._t, self._s))

    @property
    def t(self) -> np.ndarray:
        """Times of the frames."""
        return np.asarray(self._t)

    @property
    def psi(self) -> np.ndarray:
        """States stacked along a new first axis, shape ``(len(frames),) + grid``."""
        self._resolve()
        return np.stack(self._s)

    def plot(self, **kwargs: Any) -> Any:
        """Draw the frames (needs matplotlib: ``pip install 'nlsepy[plot]'``).

        1D: space-time maps of ``|psi|^2`` and of the phase; 2D: density and
        phase of one frame; 3D: the densities integrated along z, y and x
        and the phase on the central z slice; cells: the slice of cells
        nearest the domain's centre.  Axes are labelled in the model's units.

        Parameters
        ----------
        **kwargs
            ``index``, ``view``, ``fig``, ``ax``, ``path``, ``dpi``,
            ``title``, ``vortices``: see :func:`nlsepy.plot.frames`.

        Returns
        -------
        matplotlib.figure.Figure
        """
        return plot.frames(self, **kwargs)

    def animate(self, path: Union[str, os.PathLike], **kwargs: Any) -> str:
        """Write an animation of the frames: MP4 when ffmpeg is on PATH, else GIF.

        Parameters
        ----------
        path : path-like
            ``*.gif`` (Pillow), ``*.mp4`` (ffmpeg) or no suffix (MP4 when
            ffmpeg is found, else GIF).  Written whole or not at all.
        **kwargs
            ``fps``, ``dpi``, ``view``, ``vortices``: see :func:`nlsepy.plot.animate_frames`.

        Returns
        -------
        str
            The path written.
        """
        return plot.animate_frames(self, path, **kwargs)

    def vortices(self, threshold: float = _vortices.DEFAULT_THRESHOLD,
                 max_jump: Optional[float] = None, *, reach: int = _vortices.DEFAULT_REACH,
                 spacing: Any = None, origin: Any = None,
                 periodic: Any = None) -> "_vortices.VortexTracks":
        """The vortices of every frame, with ids that follow each vortex.

        :func:`nlsepy.vortices` on each state (2D: point vortices, 3D:
        vortex lines), in the coordinates of ``frames.grid``; then
        nearest-neighbour matching from frame to frame: pairs of equal
        charge are matched in order of distance up to `max_jump`, each
        vortex once, and a vortex left unmatched (one that appears) gets a
        new id.  Lines are matched by their centroids.  The frames of a
        distributed run hold this rank's rows: their vortices are found
        there.

        Parameters
        ----------
        threshold : float, optional
            Density threshold, a fraction of each frame's peak ``max |psi|^2``
            (default 1e-3).
        max_jump : float, optional
            The largest distance a vortex may move between consecutive
            frames and keep its id (default 10 grid spacings).
        reach : int, optional
            Nodes beyond a plaquette's corners that the density test looks
            at (default 4).
        spacing, origin, periodic : optional
            The grid, when ``frames.grid`` does not give it (frames made by
            hand): see :func:`nlsepy.vortices`.  By default the spacing and
            origin come from the grid's coordinates (grid indices without
            a grid) and the periodic axes from the grid.

        Returns
        -------
        nlsepy.VortexTracks
            One :class:`~nlsepy.Vortices` (2D) or
            :class:`~nlsepy.VortexLines` (3D) per frame,
            with ``ids``; ``track(id)`` gives one vortex's path.

        Raises
        ------
        ValueError
            Frames of cells (DecGPE: use :meth:`nlsepy.DecGPE.vortices` on
            the solver), of 1D states, or a bad argument.

        Examples
        --------
        >>> frames = sim.run(10.0, frames=20)            # a 2D NLSE with vortices
        >>> tracks = frames.vortices()
        >>> tracks[-1].positions, tracks[-1].ids         # the last frame's vortices
        >>> path = tracks.track(0)["position"]           # vortex 0 through the frames
        """
        if not self._t:
            return _vortices.VortexTracks([], np.zeros(0), 1.0)
        self._resolve()
        shape = np.shape(self._s[0])
        g = self.grid
        if g is not None and g.positions is not None:
            raise ValueError("frames of cells (DecGPE) have no Cartesian grid: use the solver's "
                             "vortices(), which resamples the state on one")
        nd = len(shape)
        if nd not in (2, 3):
            raise ValueError(f"vortices need 2D or 3D states, these frames hold shape {shape}")
        fits = g is not None and tuple(len(c) for c in g.coords) == tuple(shape)
        if spacing is None:
            spacing = tuple(float(c[1] - c[0]) if len(c) > 1 else 1.0 for c in g.coords) \
                if fits else 1.0
        if origin is None:
            origin = tuple(float(c[0]) for c in g.coords) if fits else 0.0
        if periodic is None:
            periodic = tuple(g.periodic) if fits and g.periodic else False
        found = [_vortices.vortices(s, spacing, origin, threshold, reach=reach,
                                    periodic=periodic) for s in self._s]
        h = np.broadcast_to(np.asarray(spacing, dtype=float), (nd,))
        jump = _vortices.DEFAULT_JUMP * float(h.max()) if max_jump is None else max_jump
        per = np.broadcast_to(np.asarray(periodic, dtype=bool), (nd,))
        box = np.where(per, np.asarray(shape) * h, 0.0)
        return _vortices.track(found, self._t, jump, box)

    def __repr__(self) -> str:
        if not self._t:
            return "Frames([])"
        return f"Frames({len(self)} frames, t = {self._t[0]:g} .. {self._t[-1]:g})"


def progress_bar(enabled: bool, total: int):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError as exc:  # optional dependency
        raise ImportError("progress=True needs tqdm: pip install 'nlsepy[progress]'") from exc
    return tqdm(total=total, unit="step")


def plan_steps(t: float, t_end: float, dt: float) -> Tuple[int, float]:
    """The fewest equal steps no larger than `dt` that go from `t` to `t_end`."""
    span = t_end - t
    n = max(1, math.ceil(span / dt - 1e-9))
    return n, span / n


def chunk_bounds(nsteps: int, frames: int) -> List[int]:
    """Step indices that end each of `frames` nearly equal chunks of `nsteps`."""
    return [chunk_bound(j, nsteps, frames) for j in range(frames + 1)]


def chunk_bound(j: int, nsteps: int, frames: int) -> int:
    """The step index that ends chunk `j` of `frames` nearly equal chunks of
    `nsteps` (0 for ``j = 0``): :func:`chunk_bounds` one at a time, so a run
    holds no list of them."""
    return (j * nsteps) // frames


#: bytes a kept snapshot costs besides its values (the array object, its
#: entries in the frame lists, its time)
FRAME_OVERHEAD = 256


def run(model: Any, t_end: float, frames: int = 10,
        callback: Optional[Callable[[Any], Any]] = None, progress: bool = False,
        checkpoint: Optional[Union[str, os.PathLike]] = None,
        output: Optional[Union[str, os.PathLike]] = None) -> Frames:
    """Advance `model` to `t_end` in `frames` chunks and collect snapshots.

    Parameters
    ----------
    model : object
        A solver with the methods listed in this module's docstring.
    t_end : float
        Final time; must be later than ``model.t``.
    frames : int, optional
        Number of chunks; the result holds ``frames + 1`` snapshots (the
        initial state and one after each chunk).
    callback : callable, optional
        Called as ``callback(model)`` after each chunk; raising
        ``StopIteration`` ends the run after that chunk.  A distributed
        model's ranks agree on it (``agreed_callback``).
    progress : bool, optional
        Show a tqdm progress bar (needs the optional ``tqdm`` package).
    checkpoint : path-like, optional
        After each chunk, write ``model.save(checkpoint)`` (atomically).
    output : path-like, optional
        Stream the frames and the model's scalar series into this HDF5 file
        (``.h5`` or ``.hdf5``, replaced if it exists; needs h5py, the
        ``hdf5`` extra): see ``nlsepy.common.hdf5`` for the layout and
        :func:`nlsepy.open_run` to read it.  A distributed model: each rank
        writes its slabs to its part file beside it, rank 0 the file itself
        (series, attributes, virtual datasets over the parts); nothing is
        gathered.

    Returns
    -------
    Frames
        Snapshots ``(t, state)``.

    Raises
    ------
    MemoryError
        Before any step, when the ``frames + 1`` snapshots do not fit in the
        host's available memory.
    KeyboardInterrupt
        On Ctrl-C, once the model has booked the steps it took (within a
        chunk for a model that cuts its ``_advance`` into short calls, else
        at the end of the chunk).  The model is consistent and can go on;
        the frames taken so far are the exception's ``frames`` attribute;
        the checkpoint file, when given, holds the last complete chunk;
        the output file, when given, holds the frames taken so far.
    """
    if isinstance(t_end, (bool, str, bytes)):  # float() would take True, "2.5", b"2.5"
        raise TypeError(f"t_end must be a real number, got {t_end!r}")
    t_end = float(t_end)
    if not np.isfinite(t_end) or t_end <= model.t:
        raise ValueError(f"t_end must be finite and later than the current time "
                         f"t = {model.t!r}, got t_end = {t_end!r}")
    if isinstance(frames, bool) or not isinstance(frames, (int, np.integer)) or frames < 1:
        raise ValueError(f"frames must be an integer >= 1, got {frames!r}")
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable, got {type(callback).__name__}")
    if checkpoint is not None:  # its format, from its ending, before any step
        _files.save_format(checkpoint, "checkpoint")
    path = None if output is None else check_output(model, output, checkpoint)
    comm = getattr(model, "comm", None)
    if comm is not None:
        callback = agreed_callback(comm, callback)
    nsteps, dt = model._plan(t_end)
    frames = int(frames)
    if frames > nsteps:
        raise ValueError(f"frames={frames} exceeds the {nsteps} time steps to t_end={t_end:g}; "
                         f"ask for at most {nsteps} frames or a later t_end")
    _require_frames(model, _state_size(model), frames)  # arithmetic only, before any snapshot

    def advance(n: int, last: bool, tick: Callable[[int], Any]) -> None:
        model._advance(n, dt, t_end if last else None)
        tick(n)

    out = Frames(frame_grid(model))
    chunk_loop(model, nsteps, frames, advance, out,
               first_check=lambda first: _require_frames(model, first, frames),
               recorder=None if path is None else (lambda: _hdf5.Recorder(model, path)),
               callback=callback, progress=progress, checkpoint=checkpoint)
    return out


def chunk_loop(model: Any, nsteps: int, nchunks: int,
               advance: Callable[[int, bool, Callable[[int], Any]], Any], out: Optional[Frames],
               snapshot: Optional[Callable[[], Any]] = None,
               coord: Optional[Callable[[], Any]] = None,
               first_check: Optional[Callable[[Any], Any]] = None,
               recorder: Optional[Callable[[], Any]] = None,
               callback: Optional[Callable[[Any], Any]] = None, progress: bool = False,
               checkpoint: Optional[Union[str, os.PathLike]] = None) -> None:
    """The loop of every stepping call that takes frames (:func:`run`, the
    dipolar model's ``imaginary_time`` and ``real_time``).

    `nsteps` steps in `nchunks` chunks whose bounds fall on whole steps
    (:func:`chunk_bound`), each taken by ``advance(n, last, tick)`` (`tick`
    moves the progress bar by the steps it books).  Before the first chunk
    and after each: a snapshot (``snapshot()``, default ``model._snapshot``)
    appended to `out` at ``model.t`` when `out` is given, and a frame of
    the run file ``recorder()`` makes, at ``coord()`` (default ``model.t``);
    then ``model.save(checkpoint)`` and ``callback(model)`` (StopIteration
    ends the loop).  SIGINT is held while a chunk is booked and its frame
    taken.  On Ctrl-C the frames taken so far are the exception's
    ``frames``; the run file is closed, marked complete only when every
    chunk ran.  `first_check(first)` sees the first snapshot (a memory
    check of the frames still to come).
    """
    snapshot = snapshot or model._snapshot
    coord = coord or (lambda: model.t)
    bar = rec = None
    done = False
    try:
        first = snapshot() if (out is not None or recorder is not None) else None
        if isinstance(first, Future):
            first = first.result()
        if out is not None:
            out.append(model.t, first)
        if first_check is not None:
            first_check(first)
        if recorder is not None:
            with _guard.deferred_sigint():
                rec = recorder()
                rec.frame(coord(), first)
        bar = progress_bar(progress, nsteps)
        tick = (lambda m: None) if bar is None else bar.update
        for j in range(nchunks):
            n = chunk_bound(j + 1, nsteps, nchunks) - chunk_bound(j, nsteps, nchunks)
            # SIGINT is held until the chunk is booked and its frame taken
            # (and written to the output file)
            with _guard.deferred_sigint():
                advance(n, j == nchunks - 1, tick)
                if out is not None or rec is not None:
                    state = snapshot()
                    if out is not None:
                        out.append(model.t, state)
                    if rec is not None:
                        rec.frame(coord(), state)
            if checkpoint is not None:
                model.save(checkpoint)
            if callback is not None:
                try:
                    callback(model)
                except StopIteration:
                    break
        done = True
    except KeyboardInterrupt as exc:
        if out is not None:
            try:
                out._resolve()
            except Exception:  # a frame that cannot be fetched stays a Future
                pass
        exc.frames = out  # type: ignore[attr-defined]
        raise
    finally:
        if bar is not None:
            bar.close()
        if rec is not None:
            close_output(rec, done)
    if out is not None:
        out._resolve()


def agreed_callback(comm: Any, callback: Optional[Callable[[Any], Any]]
                    ) -> Optional[Callable[[Any], Any]]:
    """A distributed model's callback, agreed by its ranks after each call.

    Every rank calls `callback`, then one ``allgather`` compares what the
    calls did: an exception on any rank is raised on every rank (the lowest
    failing rank's, as ``_dist.agree`` raises it), else ``KeyboardInterrupt``
    on any rank (a Ctrl-C that reached one rank in its callback) is raised on
    every rank, else ``StopIteration`` on any rank ends the run on every
    rank.  So the ranks leave the run together and their collective calls
    (the next chunk's, or the closing of a run file) stay paired.

    Parameters
    ----------
    comm : mpi4py communicator
    callback : callable or None
        Returned as it is when None or already agreed.

    Returns
    -------
    callable or None
    """
    if callback is None or getattr(callback, "_agreed", False):
        return callback

    def agreed(model: Any) -> Any:
        outcome: Tuple[str, str, str] = ("", "", "")
        error: Optional[BaseException] = None
        try:
            callback(model)
        except StopIteration:
            outcome = ("stop", "", "")
        except KeyboardInterrupt:
            outcome = ("interrupt", "", "")
        except Exception as exc:
            error, outcome = exc, ("error", type(exc).__name__, str(exc))
        everyone = comm.allgather(outcome)
        for rank, (what, kind, message) in enumerate(everyone):
            if what == "error":
                cls = _dist._EXCEPTIONS.get(kind, RuntimeError)
                text = message if kind in _dist._EXCEPTIONS else f"{kind}: {message}"
                raise cls(f"rank {rank}: the callback raised {text}") from error
        if any(what == "interrupt" for what, _, _ in everyone):
            raise KeyboardInterrupt if outcome[0] == "interrupt" else \
                KeyboardInterrupt("interrupted on another rank")
        if any(what == "stop" for what, _, _ in everyone):
            raise StopIteration
    agreed._agreed = True  # type: ignore[attr-defined]
    return agreed


def frame_grid(model: Any) -> Optional[FrameGrid]:
    """The model's :class:`FrameGrid` (``model._frame_grid()``), or None."""
    make = getattr(model, "_frame_grid", None)
    return None if make is None else make()


def check_output(model: Any, output: Any, checkpoint: Any) -> str:
    """The output path checked before the run starts (on rank 0 of a
    distributed model, the error raised on every rank)."""

    def check() -> str:
        path = _hdf5.check_output(output)
        if checkpoint is not None and os.path.abspath(os.fspath(checkpoint)) == path:
            raise ValueError(f"output and checkpoint name the same file {path!r}")
        return path

    comm = getattr(model, "comm", None)
    if comm is None:
        return check()
    return _dist.agree(comm, check, only=0) or os.path.abspath(os.fspath(output))


def close_output(rec: Any, complete: bool) -> None:
    """Close a run file, marked complete when the run returns; on the way
    out of an exception a failure to close does not replace it."""
    if complete:
        rec.close(True)
        return
    try:
        rec.close(False)
    except Exception:  # the exception under way says more
        pass


def _state_size(model: Any) -> Any:
    """What one snapshot of `model` will hold, from its shape and dtype
    (``shape``, ``dtype`` and ``nbytes``, with no array made), or None when
    the model does not say (its first snapshot is then measured)."""
    shape = getattr(model, "_snapshot_shape", None)
    shape = shape() if callable(shape) else None
    dtype = getattr(model, "dtype", None)
    if shape is None or dtype is None:
        return None
    try:
        dtype = np.dtype(dtype)
        shape = tuple(int(n) for n in shape)
    except (TypeError, ValueError):
        return None
    return _Size(shape, dtype, dtype.itemsize * math.prod(shape))


class _Size:
    """The shape, dtype and bytes of a snapshot still to be taken."""

    def __init__(self, shape: Tuple[int, ...], dtype: np.dtype, nbytes: int) -> None:
        self.shape, self.dtype, self.nbytes = shape, dtype, nbytes


def _require_frames(model: Any, state: Any, frames: int) -> None:
    """Raise MemoryError before the first step when the `frames` snapshots
    still to come (of the size of `state`, each with
    :data:`FRAME_OVERHEAD`) do not fit in host memory."""
    nbytes = getattr(state, "nbytes", None)
    if not nbytes:
        return
    shape = getattr(state, "shape", "?")
    dtype = getattr(state, "dtype", "?")
    _guard.require_memory(
        frames * (int(nbytes) + FRAME_OVERHEAD),
        f"{type(model).__name__}.run(frames={frames}), keeping {frames + 1} snapshots of shape "
        f"{shape} ({dtype}, {_guard.format_bytes(nbytes)} each),")
