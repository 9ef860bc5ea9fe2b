"""The base of the time-stepping models (``NLSE``, ``DecGPE``, ``DipolarGPE``).

The protocol they share is written here once: the clock (``t`` booked from
the steps taken, free of rounding drift), the time step and its stability
check, :meth:`TimeStepper.step` and :meth:`TimeStepper.run` in short C calls
with Ctrl-C between them and blow-ups told as :class:`BlowUpError`, frames,
progress, callbacks and HDF5 run files (:mod:`nlsepy.common.runner`),
checkpoints (:meth:`TimeStepper.save` and :meth:`TimeStepper.load`, one
file or one part per rank), and what a distributed model adds (``comm``,
``local_slice``, ``gather``, ``last_timings``).

A model supplies, besides its parameter table (:mod:`nlsepy.common.params`):

``_solver``
    its C handle (or the distribution layer's slab of it), with
    ``step(n) -> (done, blew_up)`` and ``set_dt(dt)``;
``max_dt``, ``_bound_text()``, ``_BLOWUP_HINT``
    its stability bound, in numbers and in words (``_check_dt`` refuses a
    larger step unless ``force``; a model without one overrides it), and
    the advice of its blow-up message (``_blowup``);
``_checkpoint()``, ``_from_checkpoint(path, d, backend, comm, overrides)``,
``_KEYS``, ``_OVERRIDES``
    what its checkpoint holds, how a solver is made from one and which
    constructor arguments :meth:`TimeStepper.load` may change;
``_set_state(value)``, ``_set_potential(value)``, ``_comm_details()``
    how it checks and copies a new state and potential (the base owns
    ``psi``, ``V`` and ``comm_info``) and what ``comm_info`` says;
``_record_header()``, ``_record_scalars()``, ``_frame_grid()``
    what its run files and frames hold;
``_REPR``
    the names its ``repr`` shows.

:meth:`TimeStepper.vortices` finds the vortices of a model's state on the
grid its frames describe (``_frame_grid()``: coordinates, periodic axes)
with its ``spacing``.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, Optional, Tuple, Union

import numpy as np

from . import backend as _backend
from . import dist as _dist
from . import files as _files
from . import guard as _guard
from . import hdf5 as _hdf5
from . import runner
from . import vortices as _vortices
from .checks import real
from .errors import BlowUpError
from .params import Parametrised

__all__ = ["TimeStepper", "CLOCK_KEYS"]

#: the clock's entries of a time-stepping model's checkpoint (:meth:`TimeStepper._clock`)
CLOCK_KEYS = {"t": _files.Key("float"), "t_base": _files.Key("float"), "k": _files.Key("int"),
              "solver_dt": _files.Key("float"), "steps": _files.Key("int")}


class TimeStepper(Parametrised):
    """The run protocol of a time-stepping model (see the module's docstring)."""

    #: the checkpoint's entries (name -> :class:`~nlsepy.common.files.Key`)
    _KEYS: Dict[str, _files.Key] = {}
    #: the entries stored by rows in a distributed checkpoint
    _SLABS: Tuple[str, ...] = ("psi", "V")
    #: the attributes ``repr`` shows: ``(label, format)`` or ``(label, format,
    #: attribute)``, the format "r" for repr, "" for str, else a format spec
    _REPR: Tuple[Tuple[str, str], ...] = ()
    #: what ``last_timings`` resets before each step call
    _TIMINGS: Tuple[str, ...] = ("step", "exchange")

    _comm: Any = None
    _solver: Any = None
    _dt: float = 0.0
    _force: bool = False

    # ----------------------------------------------------------------- clock
    def _start_clock(self, dt: float) -> None:
        """A new solver's clock: t = 0, no steps, the handle's step `dt`."""
        self._t_base = 0.0   # time at the last change of step size
        self._k = 0          # steps since then
        self._steps = 0      # steps since the solver was made
        self._solver_dt = dt

    @property
    def t(self) -> float:
        """Current time (that of the state, also after Ctrl-C)."""
        return self._t_base + self._k * self._solver_dt

    @property
    def dt(self) -> float:
        """Time step of :meth:`step` (and the largest :meth:`run` takes);
        assigning checks it against the stability bound."""
        return self._dt

    @dt.setter
    def dt(self, value: float) -> None:
        self._dt = self._agree(lambda: self._check_dt(value, self._force))

    def _check_dt(self, dt: Any, force: bool) -> float:
        """`dt` as a float, checked against the model's stability bound
        (``max_dt``) unless `force`; the message names the bound
        (``_bound_text``)."""
        dt = real("dt", dt, positive=True)
        if dt > self.max_dt and not force:
            raise ValueError(f"dt={dt:g} exceeds {self._bound_text()}; use a smaller dt or "
                             f"pass force=True")
        return dt

    def _bound_text(self) -> str:
        """The stability bound, in words, for the message of a `dt` above it."""
        return f"the stability bound {self.max_dt:g}"

    def _use_dt(self, dt: float) -> None:
        """Give the handle step `dt`, rebasing the clock when it changes."""
        if dt != self._solver_dt:
            self._solver.set_dt(dt)  # first: a refusal leaves the clock as it was
            self._t_base = self.t
            self._k = 0
            self._solver_dt = dt

    def _clock(self) -> Dict[str, Any]:
        """The clock's entries of a checkpoint."""
        return dict(t=self.t, t_base=self._t_base, k=self._k, solver_dt=self._solver_dt,
                    steps=self._steps)

    def _agree(self, fn: Callable[[], Any]) -> Any:
        """``fn()``; distributed, the same error on every rank when it fails on one."""
        return fn() if self._comm is None else _dist.agree(self._comm, fn)

    # -------------------------------------------------------------- stepping
    #: the blow-up message's words for the bound and its last advice
    _BOUND_WORD = "stability bound"
    _BLOWUP_HINT = "check the parameters"

    def _blowup(self, dt: float, where: str = "") -> BlowUpError:
        """The error of a step of `dt` that made the state non-finite (in
        `where`, e.g. "imaginary time"), with the last finite state."""
        t_bad = self.t + dt
        at = f" in {where}" if where else ""
        return BlowUpError(
            f"the state became non-finite{at} at step {self._steps + 1} (t = {t_bad:g}); the "
            f"solver keeps the last finite state at t = {self.t:g}. Reduce dt (now {dt:g}, "
            f"{self._BOUND_WORD} {self.max_dt:g}) or {self._BLOWUP_HINT}.",
            step=self._steps + 1, t=t_bad, last_good=(self.t, self.psi))

    def _book(self, done: int) -> None:
        """Book `done` steps of the last call (a model may count more)."""
        self._k += done
        self._steps += done

    def _advance(self, n: int, dt: float, t_final: Optional[float] = None) -> None:
        """Take `n` steps of `dt` in calls of about 0.1 s, each booked on the
        clock as it returns; after the last, set the time to `t_final` (the
        run's end, free of rounding).  Ctrl-C raises ``KeyboardInterrupt``
        between two calls, leaving the time at the last step taken."""
        self._use_dt(dt)

        def work(k: int) -> None:
            done, blew_up = self._solver.step(int(k))
            self._book(done)
            if blew_up:
                raise self._blowup(dt)

        _guard.chunked(int(n), work, comm=self._comm)
        if t_final is not None:  # reached only when every step was taken
            self._t_base, self._k = float(t_final), 0

    def _plan(self, t_end: float) -> Tuple[int, float]:
        return runner.plan_steps(self.t, t_end, self._dt)

    def _snapshot(self) -> Any:
        return self.psi

    def _snapshot_shape(self) -> Optional[Tuple[int, ...]]:
        """The shape of one snapshot, known without taking one (a run checks
        the memory its frames take from it before any is made), or None:
        then the first snapshot is measured."""
        shape = getattr(self, "shape", None)
        if self._comm is not None or shape is None:
            return None
        return tuple(shape)

    def step(self, n: int = 1) -> Any:
        """Advance `n` steps of size :attr:`dt`.

        Parameters
        ----------
        n : int, optional
            Number of steps (>= 0).

        Returns
        -------
        object
            The solver, for chaining.

        Raises
        ------
        BlowUpError
            If the state becomes non-finite; the last finite state is kept.
        KeyboardInterrupt
            On Ctrl-C, within about 0.1 s: the steps taken until then are
            booked (:attr:`t` and the step counter match :attr:`psi`), and
            ``step(n - taken)`` completes the call bit for bit.
        """
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"n must be an integer >= 0, got {n!r}")
        if self._comm is not None:
            self._solver.timings.update({k: 0.0 for k in self._TIMINGS}, steps=0)
        self._advance(int(n), self._dt)
        return self

    @property
    def last_timings(self) -> Dict[str, float]:
        """A distributed solver's seconds on this rank over the steps of the
        last :meth:`step` call (the steps of :meth:`run` add up): its slab's
        kernels, the halo exchange (and, where the model has one, the wait
        for the slowest rank), and ``steps``.  Empty for one process."""
        return {} if self._comm is None else dict(self._solver.timings)

    def _before_run(self) -> None:
        """Checks a model makes before a run's first step."""

    def run(self, t_end: float, frames: int = 10, callback: Optional[Callable] = None,
            progress: bool = False, checkpoint: Optional[Union[str, os.PathLike]] = None,
            output: Optional[Union[str, os.PathLike]] = None) -> runner.Frames:
        """Advance to `t_end` in `frames` chunks, returning snapshots.

        The run takes the fewest equal steps no larger than :attr:`dt` that
        end exactly at `t_end`; chunk boundaries fall on whole steps, so the
        result does not depend on `frames`.

        Parameters
        ----------
        t_end : float
            Final time (> current time).
        frames : int, optional
            Number of chunks; ``frames + 1`` snapshots are returned.
        callback : callable, optional
            ``callback(sim)`` after each chunk; raise ``StopIteration`` to stop.
        progress : bool, optional
            Show a progress bar (needs tqdm).
        checkpoint : path-like, optional
            Write :meth:`save` to this path after each chunk.
        output : path-like, optional
            Stream the frames into this HDF5 file (``.h5``/``.hdf5``, needs
            h5py: ``pip install 'nlsepy[hdf5]'``) as they are taken: the
            state over time and the model's coordinates, its scalar series
            (norm, energy, steps, ...) and every parameter; flushed after
            each frame, readable after Ctrl-C, read back by
            :func:`nlsepy.open_run`.  Distributed: every rank writes its
            slab to a part file and rank 0 the run file, whose frames are a
            virtual dataset over the parts.

        Returns
        -------
        Frames
            ``(t, psi)`` snapshots, with ``.t`` and ``.psi`` array views.

        Raises
        ------
        MemoryError
            Before any step, when the ``frames + 1`` snapshots do not fit.
        KeyboardInterrupt
            On Ctrl-C, within about 0.1 s.  The run does not return: the
            frames taken so far are the exception's ``frames`` attribute, the
            solver stands at its last step (consistent, and it can go on) and
            the checkpoint file holds the last whole chunk.
        """
        self._before_run()
        return runner.run(self, t_end, frames=frames, callback=callback, progress=progress,
                          checkpoint=checkpoint, output=output)

    def _record_scalars(self) -> Dict[str, Any]:
        """The series a run file keeps per frame (collective when distributed)."""
        norm, energy = self._solver.observe()
        return {"norm": float(norm), "energy": float(energy), "steps": int(self._steps)}

    # ----------------------------------------------------------- checkpoints
    def _checkpoint(self) -> Tuple[Dict[str, np.ndarray], Dict[str, Any]]:
        """``(slabs, scalars)``: the per-point entries of the checkpoint
        (this rank's rows when distributed) and the others."""
        raise NotImplementedError

    def _layout_of(self) -> Any:
        """The distribution layer's layout of this solver's rows."""
        return self._solver.layout

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Write a checkpoint, whole or not at all, in the format the file's
        ending names: ``.npz`` (a NumPy archive) or ``.h5`` / ``.hdf5``
        (HDF5, needs h5py: a run file of one frame, the current state, that
        :func:`nlsepy.open_run` and plain h5py read, with the checkpoint's
        entries in its group ``checkpoint``).

        Either file holds the state, every parameter and the counters (time,
        steps), so that :meth:`load` followed by stepping gives, bit for bit,
        what this solver gives by stepping on.  A distributed solver
        (collective) writes ``.npz`` files only: one part per rank beside
        `path` (``<stem>.partRRRRofNNNN.npz``, its rows) and the index
        `path`, which :meth:`load` reads with any number of ranks or one
        process.  A symbolic link is written through; a destination that is
        not a regular file (a device, a FIFO) is refused.

        Parameters
        ----------
        path : path-like
            Destination file, ending in ``.npz``, ``.h5`` or ``.hdf5``.

        Raises
        ------
        ValueError
            Another ending (the message names the path and the endings
            accepted); a destination that is not a regular file.
        ImportError
            ``.h5`` without h5py.
        """
        kind = self._agree(lambda: _files.save_format(path))
        slabs, scalars = self._checkpoint()
        if self._comm is not None:
            if kind != "npz":
                raise ValueError(f"path = {os.fspath(path)!r}: a distributed solver writes its "
                                 f"checkpoint as .npz parts; name an .npz file")
            _dist.save_parts(os.fspath(path), self._MODEL, self._layout_of(), slabs, **scalars)
            return
        if kind == "npz":
            _files.save_checkpoint(path, self._MODEL, **slabs, **scalars)
            return
        arrays = _files.checkpoint_arrays(self._MODEL, **slabs, **scalars)
        _hdf5.save_state(os.fspath(path), self, self.psi, arrays)

    @classmethod
    def load(cls, path: Union[str, os.PathLike], backend: str = "auto",
             comm: Any = None, **overrides: Any) -> Any:
        """Restart from a checkpoint written by :meth:`save`.

        Parameters
        ----------
        path : path-like
            Checkpoint file.
        backend : {"auto", "cpu", "cuda"}, optional
            Backend of the new solver, chosen as a constructor chooses it:
            ``"auto"`` (the default) takes the GPU where there is one,
            whichever backend wrote the checkpoint (a checkpoint is not
            tied to one: written on a GPU, it loads on a machine without).
            The state, clock and counters are restored bit for bit; the
            steps that follow are the saved solver's bit for bit on its
            backend and agree to rounding on the other, so continuing a
            CPU run bit for bit on a machine with a GPU needs
            ``backend="cpu"``.
        comm : mpi4py communicator, optional
            Load into a solver distributed over `comm` (every rank calls
            this).  Any checkpoint loads with any number of ranks: one
            written by one process, or the index of one written by N ranks
            (its parts lie beside it), with M ranks or by one process.
        **overrides
            Constructor arguments to change (the model's ``_OVERRIDES``,
            e.g. ``fused=False`` or ``a=2.0`` for the NLSE, ``g=`` for the
            DEC GPE).  The state and the clock are the saved ones; with
            ``dt`` the clock goes on from the saved time in steps of the
            new `dt` (a multistep scheme restarts as from a first step).
            ``psi`` and ``V`` are set on the loaded solver.

        Returns
        -------
        object
            A solver at the checkpoint's time, step count and state.

        Raises
        ------
        FileNotFoundError
            No such file.
        ValueError
            The file is not a whole checkpoint of this model (empty,
            truncated, another kind of file or another model's checkpoint)
            or holds a value the solver refuses; the message names the file
            (and the overrides, when one of them is refused).
        TypeError
            An override that is not among the model's ``_OVERRIDES``.
        """
        where = os.fspath(path)
        bad = sorted(set(overrides) - set(cls._OVERRIDES))
        if bad:
            raise TypeError(f"{cls.__name__}.load() cannot change {bad[0]!r}; it changes "
                            f"{', '.join(cls._OVERRIDES)} (psi and V are set on the loaded "
                            f"solver)")
        backend = _backend.resolve(backend, cls._MODEL)  # the caller's argument, not the file's
        if comm is not None:
            comm = _dist.as_comm(comm)
            d = _dist.agree(comm, lambda: cls._read(where, comm))
        else:
            d = cls._read(where, None)
        return cls._from_checkpoint(where, d, backend, comm, overrides)

    #: the constructor arguments that :meth:`load` may change
    _OVERRIDES: Tuple[str, ...] = ()

    @classmethod
    def _from_checkpoint(cls, where: str, d: Dict[str, Any], backend: str, comm: Any,
                         overrides: Dict[str, Any]) -> Any:
        raise NotImplementedError

    @staticmethod
    def _refused(where: str, overrides: Dict[str, Any], exc: Exception) -> Exception:
        """The error of a solver that the checkpoint's arguments, with
        `overrides`, do not make."""
        if overrides:
            return type(exc)(f"{where} with {', '.join(sorted(overrides))} changed: {exc}")
        return ValueError(f"{where}: {exc}")

    @classmethod
    def _read(cls, where: str, comm: Any) -> Dict[str, Any]:
        """The checkpoint's entries, checked; with `comm`, the per-point
        entries of this rank's rows only (from one file or from parts; no
        collective calls)."""
        if _dist.is_parts_index(where):
            scalars = {k: v for k, v in cls._KEYS.items() if k not in cls._SLABS}
            slabs = cls._slab_keys()
            rows = None
            if comm is not None:
                d0 = _dist.load_parts(where, cls._MODEL, scalars, {}, rows=(0, 0))
                rows = cls._rows_of(comm, d0["global_shape"])
            d = _dist.load_parts(where, cls._MODEL, scalars, slabs, rows=rows)
            d["parts"] = True
            return d
        d = _files.load_checkpoint(where, cls._MODEL, cls._KEYS)
        d["parts"] = False
        return d

    @classmethod
    def _slab_keys(cls) -> Dict[str, _files.Key]:
        """How the per-point entries are stored in a distributed checkpoint's parts."""
        return {k: cls._KEYS[k] for k in cls._SLABS}

    @staticmethod
    def _rows_of(comm: Any, shape: Any) -> Tuple[int, int]:
        """This rank's rows ``(start, count)`` of a global array of `shape`."""
        lay = _dist.Layout.of(comm, shape)
        return (lay.start, lay.count)

    def _restore_clock(self, d: Dict[str, Any], overrides: Any = ()) -> None:
        """Set the clock of a solver made from a checkpoint's entries: the
        saved one bit for bit, or, when `overrides` change dt, the saved
        time and step count with the new step."""
        if "dt" in overrides:
            self._t_base, self._k, self._steps = d["t"], 0, d["steps"]
            return
        self._use_dt(d["solver_dt"])
        self._t_base, self._k, self._steps = d["t_base"], d["k"], d["steps"]

    # ---------------------------------------------------- state and potential
    _V: Optional[np.ndarray] = None

    @property
    def psi(self) -> np.ndarray:
        """A copy of the current state (distributed: this rank's part,
        :attr:`local_slice`).  Assigning checks the new state and copies it in
        (distributed, every rank assigns: the global array, this rank's part
        or its :class:`~nlsepy.Slab`)."""
        return self._solver.get_state()

    @psi.setter
    def psi(self, value: Any) -> None:
        self._set_state(value)

    def _set_state(self, value: Any) -> None:
        """Check a new state, copy it and hand it to the solver (a model's hook)."""
        raise NotImplementedError

    @property
    def V(self) -> Optional[np.ndarray]:
        """A copy of the potential (None when absent; distributed: this rank's
        part).  Assigning checks it (and what it does to the stability bound),
        keeps a copy and applies it from the next step; None removes it."""
        return None if self._V is None else self._V.copy()

    @V.setter
    def V(self, value: Any) -> None:
        self._set_potential(value)

    def _set_potential(self, value: Any) -> None:
        """Check a new potential, copy it, apply it and keep it in ``_V`` (a
        model's hook)."""
        raise NotImplementedError

    # ----------------------------------------------------------- distributed
    @property
    def comm(self) -> Any:
        """The communicator of a distributed solver (None for one process)."""
        return self._comm

    @property
    def local_slice(self) -> Any:
        """This rank's part of the global state: ``global_array[sim.local_slice]``
        is what :attr:`psi` holds (the whole grid for one process)."""
        if self._comm is None:
            return tuple(slice(None) for _ in self.shape)
        return self._layout_of().local_slice

    @property
    def comm_info(self) -> Dict[str, Any]:
        """How a distributed solver is laid out and communicates (empty for
        one process): ranks, this rank's part, the halo or the transposes and
        how they travel, the reduction and the MPI library."""
        return {} if self._comm is None else self._comm_details()

    def _comm_details(self) -> Dict[str, Any]:
        """:attr:`comm_info` of a distributed solver (a model's hook)."""
        raise NotImplementedError

    def _gather_rows(self, local: np.ndarray) -> np.ndarray:
        """This rank's part of the state as rows of the layout."""
        return local

    def gather(self, root: Optional[int] = 0) -> Optional[np.ndarray]:
        """The global state from every rank's part (collective).

        Parameters
        ----------
        root : int or None, optional
            The rank that receives it (the others get None), or None for
            every rank.

        Returns
        -------
        numpy.ndarray or None
            The state of the whole grid (:attr:`psi` for one process).
        """
        if self._comm is None:
            return self.psi
        _dist.check_root(self._comm, root)
        out = _dist.gather_rows(self._layout_of(), self._gather_rows(self.psi), root)
        return None if out is None else self._global_state(out)

    def _global_state(self, rows: np.ndarray) -> np.ndarray:
        """The gathered rows as the global state's array."""
        return rows

    # ------------------------------------------------------------- vortices
    def vortices(self, threshold: float = _vortices.DEFAULT_THRESHOLD, *,
                 reach: int = _vortices.DEFAULT_REACH) -> Any:
        """The quantised vortices of the current state, in the solver's coordinates.

        :func:`nlsepy.vortices` on the state with this solver's spacing,
        origin (the coordinates of its frames, e.g. ``DipolarGPE.coords``)
        and periodic axes: point vortices in 2D, vortex lines in 3D.  A
        distributed solver gathers the state (collective; every rank gets
        the result).

        Parameters
        ----------
        threshold : float, optional
            Density threshold, a fraction of the peak ``max |psi|^2``
            (default 1e-3): the outskirts, where the phase is noise, yield
            no vortices.
        reach : int, optional
            Nodes beyond a plaquette's corners that the density test looks
            at (default 4).

        Returns
        -------
        nlsepy.Vortices or nlsepy.VortexLines
            2D: positions ``(n, 2)`` and charges; 3D: the lines.

        Raises
        ------
        ValueError
            A 1D state, or a bad `threshold` or `reach`.
        """
        spacing, origin, periodic = self._vortex_grid()
        return _vortices.vortices(self.gather(root=None), spacing, origin, threshold,
                                  reach=reach, periodic=periodic)

    def _vortex_grid(self) -> Tuple[Tuple[float, ...], Tuple[float, ...], Tuple[bool, ...]]:
        """Spacing, origin and periodic axes of the whole grid (from the
        frames' coordinates, which a distributed solver gives for its rows)."""
        grid = runner.frame_grid(self)
        if grid is None or grid.positions is not None:
            raise ValueError(f"{self._MODEL}: vortices need a state on a Cartesian grid")
        nd = len(grid.coords)
        if nd not in (2, 3):
            raise ValueError(f"{self._MODEL}: vortices need a 2D or 3D state, this one is "
                             f"{nd}D")
        h = tuple(float(v) for v in np.broadcast_to(np.asarray(self.spacing, dtype=float), (nd,)))
        origin = tuple(float(c[0]) - (s.start or 0) * hq
                       for c, s, hq in zip(grid.coords, self.local_slice, h))
        return h, origin, tuple(grid.periodic) if grid.periodic else (False,) * nd

    def __repr__(self) -> str:
        def show(value: Any, spec: str) -> str:
            return repr(value) if spec == "r" else format(value, spec) if spec else str(value)
        return f"{self._MODEL}(" + ", ".join(
            f"{name}={show(getattr(self, attr[0] if attr else name), spec)}"
            for name, spec, *attr in self._REPR) + ")"
