"""The chunked runner shared by every time-dependent model.

A run from the current time to ``t_end`` is cut into ``frames`` chunks of
whole time steps.  After each chunk the runner stores a snapshot, calls the
user's callback (``StopIteration`` ends the run cleanly), updates an optional
tqdm progress bar and writes an optional checkpoint.  The model does the
stepping; the runner never touches grid points.

A model used with :func:`run` provides

``t``                 current time (float),
``_plan(t_end)``      ``(nsteps, dt)``: equal steps that land on ``t_end``,
``_advance(n, dt)``   take ``n`` steps of size ``dt`` (may raise BlowUpError),
``_snapshot()``       a copy of the state for a frame (or a Future of one),
``save(path)``        write a checkpoint (only when ``checkpoint`` is given).
"""

from __future__ import annotations

import math
import os
from concurrent.futures import Future
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

__all__ = ["Frames", "run"]


class Frames(Sequence):
    """Snapshots ``(t, state)`` of a run, in time order.

    Behaves as a list of ``(t, state)`` tuples; ``frames.t`` is the array of
    times and ``frames.psi`` stacks the states along a new first axis.  A
    state may arrive as a ``concurrent.futures.Future`` (a frame still on its
    way from a device); it is waited for on first access.
    """

    def __init__(self) -> None:
        self._t: List[float] = []
        self._s: List[Any] = []

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
            out = Frames()
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

    def __repr__(self) -> str:
        if not self._t:
            return "Frames([])"
        return f"Frames({len(self)} frames, t = {self._t[0]:g} .. {self._t[-1]:g})"


def _progress_bar(enabled: bool, total: int):
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
    return [(j * nsteps) // frames for j in range(frames + 1)]


def run(model: Any, t_end: float, frames: int = 10,
        callback: Optional[Callable[[Any], Any]] = None, progress: bool = False,
        checkpoint: Optional[Union[str, os.PathLike]] = None) -> Frames:
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
        ``StopIteration`` ends the run after that chunk.
    progress : bool, optional
        Show a tqdm progress bar (needs the optional ``tqdm`` package).
    checkpoint : path-like, optional
        After each chunk, write ``model.save(checkpoint)`` (atomically).

    Returns
    -------
    Frames
        Snapshots ``(t, state)``.
    """
    t_end = float(t_end)
    if not np.isfinite(t_end) or t_end <= model.t:
        raise ValueError(f"t_end must be finite and later than the current time "
                         f"t = {model.t!r}, got t_end = {t_end!r}")
    if isinstance(frames, bool) or not isinstance(frames, (int, np.integer)) or frames < 1:
        raise ValueError(f"frames must be an integer >= 1, got {frames!r}")
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable, got {type(callback).__name__}")
    nsteps, dt = model._plan(t_end)
    frames = int(frames)
    if frames > nsteps:
        raise ValueError(f"frames={frames} exceeds the {nsteps} time steps to t_end={t_end:g}; "
                         f"ask for at most {nsteps} frames or a later t_end")
    bounds = chunk_bounds(nsteps, frames)
    out = Frames()
    out.append(model.t, model._snapshot())
    bar = _progress_bar(progress, nsteps)
    try:
        for j in range(frames):
            n = bounds[j + 1] - bounds[j]
            model._advance(n, dt, t_end if j == frames - 1 else None)
            out.append(model.t, model._snapshot())
            if bar is not None:
                bar.update(n)
            if checkpoint is not None:
                model.save(checkpoint)
            if callback is not None:
                try:
                    callback(model)
                except StopIteration:
                    break
    finally:
        if bar is not None:
            bar.close()
    out._resolve()
    return out


def atomic_write(path: Union[str, os.PathLike], write: Callable[[Any], Any],
                 binary: bool = True) -> None:
    """Write a file whole or not at all: `write(fh)` fills a temporary file
    beside `path`, which is flushed to disk and then renamed over `path`."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def atomic_savez(path: Union[str, os.PathLike], **arrays: Any) -> None:
    """Write an ``.npz`` file whole or not at all (see :func:`atomic_write`)."""
    atomic_write(path, lambda fh: np.savez(fh, **arrays))
