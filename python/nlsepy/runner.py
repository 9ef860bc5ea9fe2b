"""The chunked runner shared by every time-dependent model.

A run from the current time to ``t_end`` is cut into ``frames`` chunks of
whole time steps.  After each chunk the runner stores a snapshot, calls the
user's callback (``StopIteration`` ends the run cleanly), updates an optional
tqdm progress bar and writes an optional checkpoint.  The model does the
stepping; the runner never touches grid points.

A model used with :func:`run` provides

``t``
    current time (float),
``_plan(t_end)``
    ``(nsteps, dt)``: equal steps that land on ``t_end``,
``_advance(n, dt, t_final)``
    take ``n`` steps of size ``dt`` and book them on ``t`` and the model's
    counters; after the last step set the time to ``t_final`` when it is
    not None (may raise BlowUpError),
``_snapshot()``
    a copy of the state for a frame (or a Future of one),
``save(path)``
    write a checkpoint (only when ``checkpoint`` is given),
``_record_header()``, ``_record_scalars()``
    what a run file holds besides the frames (only when ``output`` is
    given; ``nlsepy.common.hdf5.Recorder``).

Run files
    With ``output="run.h5"`` each frame and the model's scalar series
    (norm, energy, ...) are appended to an HDF5 file as they are taken
    (``nlsepy.common.hdf5``, h5py); the path is checked before anything runs,
    the file is created with the first frame and flushed after each, and
    :func:`nlsepy.open_run` reads it back, also after an interrupt.  A
    distributed model's ranks each write their slabs to a part file and
    rank 0 the run file, whose frames are a virtual dataset over the parts;
    its callback is agreed over the ranks (``agreed_callback``).

Ctrl-C
    Each chunk runs with SIGINT held as a flag (``nlsepy.common.guard.deferred_sigint``,
    shared with a model that cuts its own ``_advance`` into short calls through
    ``nlsepy.common.guard.chunked``): ``KeyboardInterrupt`` is raised once the
    model has booked what it did, so its time and counters match its state.
    The run then does not return; the frames taken so far travel on the
    exception as its ``frames`` attribute.  Checkpoints are written whole or
    not at all, so the file keeps the last complete chunk and no temporary
    file is left.

Memory
    Before the first step the ``frames + 1`` snapshots a run keeps are
    counted against the host's available memory (``MemoryError``).
"""

from __future__ import annotations

from .common.files import atomic_savez, atomic_write
from .common.framegrid import FrameGrid
from .common.runner import Frames, agreed_callback, chunk_bounds, plan_steps, run

__all__ = ["Frames", "FrameGrid", "run", "plan_steps", "chunk_bounds", "agreed_callback",
           "atomic_write", "atomic_savez"]
