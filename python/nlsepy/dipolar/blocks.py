"""How a ``DipolarGPE`` steps: in blocks of whole steps, one C call each.

A stepping call runs as blocks of :attr:`~nlsepy.DipolarGPE.block_steps`
steps, each booked on the solver (time, step counters) before the next,
with SIGINT held as a flag and raised between blocks
(:mod:`nlsepy.common.guard`); a distributed solver's ranks vote after
every block, so that they stop after the same one.  :class:`Blocks` holds
this machinery (a base class of :class:`nlsepy.DipolarGPE`): the blocks
(``_run``), the chunks of :meth:`~nlsepy.DipolarGPE.imaginary_time` and
:meth:`~nlsepy.DipolarGPE.real_time` with their frames, progress bar,
callback and run file (the loop of :func:`nlsepy.common.runner.chunk_loop`,
the one :meth:`~nlsepy.DipolarGPE.run` takes too), the runner's ``_advance`` and
the recording of moments in the stepping calls.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

import numpy as np

from ..common import dist as _dist
from ..common import guard as _guard
from ..common import runner
from ..common.checks import count as _count
from ..common.errors import BlowUpError
from ..common.hdf5 import Recorder
from .memory import require_frames, solver_what
from .parameters import MODES

__all__ = ["Blocks"]


class Blocks:
    """The block machinery of :class:`nlsepy.DipolarGPE` (see the module's docstring)."""

    def _run(self, mode: str, n: int, dt: float, ramp: bool = False,
             on_block: Optional[Callable[[int], Any]] = None,
             record: Optional[Tuple[int, int, List[np.ndarray]]] = None) -> None:
        """`n` steps of `dt` in `mode`, in blocks of :attr:`block_steps`, each
        booked before the next; SIGINT raises KeyboardInterrupt between blocks.
        `record` ``(every, phase, rows)``: each block's C call also records
        the moments of the steps whose count ``phase + k`` (k = 1 .. n) is a
        multiple of `every`, appended to `rows` (see :meth:`_steps_recording`).
        Distributed, the handle's ``timings`` sum the blocks' seconds."""
        self._use_dt(dt)
        self._last_seconds = 0.0
        slab = self._comm is not None
        if slab:
            self._solver.restart_timings()
        if n == 0:
            return
        code = MODES[mode]
        g, gdd = self.g_eff, self.gdd_eff
        dg = dgdd = 0.0
        if ramp:
            dg, dgdd = g / n, gdd / n
        block = self.block_steps
        left = [n]

        def step(m: int) -> Tuple[int, bool]:
            if record is None:
                done, blew_up = self._solver.step(code, m, self.t, dg, dgdd)
            else:
                every, phase, rows = record
                done, blew_up, part = self._solver.step_record(
                    code, m, self.t, dg, dgdd, every, (phase + n - left[0]) % every)
                if not blew_up:
                    rows.append(part)
            self._last_seconds += float(self._solver.last_step_seconds())
            return done, blew_up

        def work(k: int, flag: Any) -> None:
            for _ in range(k):
                if self._stop_now(flag) or left[0] <= 0:
                    return
                m = min(block, left[0])
                done, blew_up = step(m)
                if blew_up:  # the C core went back to the start of this block
                    raise self._blown_up(mode, n, n - left[0], int(done), dt)
                self._steps[mode] += m
                if mode == "real":
                    self._k += m
                left[0] -= m
                if slab:
                    self._solver.book(m)
                if on_block is not None:
                    on_block(m)
            self._stop_now(flag)

        with _guard.deferred_sigint() as flag:
            if ramp:
                self._solver.set_couplings(0.0, 0.0)
            try:
                # distributed, rank 0 sizes the calls: every rank votes as often
                _guard.chunked(-(-n // block), lambda k: work(k, flag), comm=self._comm)
            finally:
                if ramp:
                    self._solver.set_couplings(g, gdd)

    def _rank0(self) -> bool:
        """Whether this process reports (progress bars): one process, or rank 0."""
        return self._comm is None or self._comm.Get_rank() == 0

    def _stop_now(self, flag: Any) -> bool:
        """Whether Ctrl-C came (between two blocks of steps); distributed, on any
        rank (every rank then stops after the same block)."""
        return bool(flag.hit) if self._comm is None else self._solver.vote(flag)

    def _can_record(self) -> bool:
        """Whether the stepping calls can record moments (:meth:`_steps_recording`):
        a single-process handle that has them (a slab's moments are its own
        rows' only, so a distributed solver takes a stepping call per row)."""
        return self._comm is None and hasattr(self._solver, "step_record")

    def _steps_recording(self, mode: str, steps: int, every: int, phase: int = 0,
                         progress: bool = False) -> np.ndarray:
        """`steps` steps of :attr:`dt` in `mode` that record the state's
        moments after the steps whose count ``phase + k`` (k = 1 .. steps) is
        a multiple of `every`, from the pass that ends each step (from what it
        leaves in cache: no further pass through memory).

        Parameters
        ----------
        mode : {"imaginary", "real"}
            The kind of steps.
        steps : int
            Number of steps (>= 0).
        every : int
            Record every that many steps (>= 1).
        phase : int, optional
            Steps counted before the first one (``0 <= phase < every``).
        progress : bool, optional
            tqdm progress bar.

        Returns
        -------
        numpy.ndarray
            float64 rows ``(norm, <x_a^2> of each solver axis)``, one per
            recorded step, in order: the ``norm`` and ``x2`` of
            :meth:`observables` had the call stopped after that step (equal
            to round-off; the same Simpson sums in another order).  In
            imaginary time those of the normalised state (norm 1).
        """
        if mode not in MODES:
            raise ValueError(f"mode must be 'imaginary' or 'real', got {mode!r}")
        steps = _count("steps", steps)
        every = _count("every", every, 1)
        phase = _count("phase", phase)
        if phase >= every:
            raise ValueError(f"phase must be below every = {every}, got {phase}")
        if not self._can_record():
            raise NotImplementedError(f"{type(self).__name__} does not record moments in its "
                                      f"stepping calls; step and call observables() instead")
        rows: List[np.ndarray] = []
        bar = runner.progress_bar(progress, steps)
        try:
            self._run(mode, steps, self._dt, on_block=None if bar is None else bar.update,
                      record=(every, phase, rows))
        finally:
            if bar is not None:
                bar.close()
        out = np.concatenate(rows) if rows else np.zeros((0, 4))
        return out[:, : 1 + self.ndim]

    def _blown_up(self, mode: str, n: int, before: int, done: int, dt: float) -> BlowUpError:
        """The BlowUpError of step ``done + 1`` of a block that started after
        `before` of the call's `n` steps in `mode`."""
        bad = self._steps[mode] + done + 1
        t_bad = self.t + (done + 1) * dt if mode == "real" else self.t
        ranks = "" if self._comm is None else \
            " Every rank stopped there; last_good holds each rank's slab."
        return BlowUpError(
            f"the state became non-finite in {mode}-time step {before + done + 1} of {n} "
            f"(t = {t_bad:g}); the solver went back to the last checked state, after "
            f"{self._steps[mode]} {mode}-time steps (t = {self.t:g}). Check g, gdd and the grid "
            f"(collapse), or reduce dt (now {dt:g})." + ranks,
            step=bad, t=t_bad, last_good=(self.t, self.psi))

    def _advance(self, n: int, dt: float, t_final: Optional[float] = None) -> None:
        """`n` real-time steps of `dt`, booked block by block; `t_final` (the
        run's end, exact) replaces the summed time only once all `n` are done
        (the runner's protocol)."""
        self._run("real", n, dt)
        if t_final is not None:
            self._t_base, self._k = float(t_final), 0

    def _chunks(self, mode: str, steps: int, frames: Optional[int], callback: Optional[Callable],
                progress: bool, ramp: bool, output: Any = None) -> Optional[runner.Frames]:
        """:meth:`imaginary_time` or :meth:`real_time` (`mode`): `steps` steps in
        `frames` chunks, with frames, callback, progress bar and run file."""
        self._same("the stepping call's steps, frames, ramp and output",
                   (mode, steps, frames, ramp, output is None))
        progress = bool(progress) and self._rank0()
        steps = _count("steps", steps)
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be callable, got {type(callback).__name__}")
        if callback is not None and self._comm is not None:
            callback = runner.agreed_callback(self._comm, callback)
        nchunks = 1 if frames is None else _count("frames", frames, 1)
        if steps and nchunks > steps:
            raise ValueError(f"frames={nchunks} exceeds steps={steps}")
        if ramp and nchunks > 1:
            raise ValueError("ramp=True runs in one chunk; leave frames at None")
        path = None if output is None else runner.check_output(self, output, None)
        out = None
        if frames is not None:
            self._require_frames(nchunks + 1)
            out = runner.Frames(self._frame_grid())

        def advance(n: int, last: bool, tick: Callable[[int], Any]) -> None:
            self._run(mode, n, self._dt, ramp, on_block=tick)

        try:
            runner.chunk_loop(self, steps, nchunks, advance, out, snapshot=lambda: self.psi,
                              coord=lambda: self._record_at(mode),
                              recorder=None if path is None else
                              (lambda: Recorder(self, path, time=mode)),
                              callback=callback, progress=progress)
        finally:
            self._frames = out
        return out

    def _record_at(self, mode: str) -> Any:
        """A run file's frame coordinate: t in real time, the step count in imaginary time."""
        return self.t if mode == "real" else int(self._steps["imaginary"])

    def _require_frames(self, count: int) -> None:
        """MemoryError when `count` host snapshots of the state will not fit
        (distributed: those of the slabs of this host's ranks, on every rank)."""
        if self._comm is None:
            require_frames(self, count)
            return
        slab = self._solver
        rs = 4 if self.dtype == np.complex64 else 8
        nbytes = count * 2 * int(np.prod(slab.layout.local_shape)) * rs * slab.node_ranks
        _dist.agree(self._comm, lambda: _guard.require_memory(
            nbytes, f"{solver_what(self)} keeping {count} frames of the slabs of "
                    f"{slab.node_ranks} ranks on this host [{_guard.format_bytes(nbytes)}]"))
