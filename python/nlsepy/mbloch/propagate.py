"""The z loop of :meth:`nlsepy.MaxwellBloch.run` and its bookkeeping.

A run checks its arguments (:func:`check_run`), makes its solver
(:func:`make_solver`) and hands both to a :class:`ZMarch`, which takes the
z steps in calls of the solver, keeps the fields and populations of the
saved positions (:class:`Saved`), streams them into the run file
(:func:`record_file`), calls the callback and stops between two calls on
Ctrl-C (:func:`nlsepy.common.guard.deferred_sigint`) with the partial
result of the z reached.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from ..common import checks as _validate
from ..common import dist as _dist
from ..common import guard as _guard
from ..common.errors import BlowUpError
from ..common.hdf5 import RunFile, RunHeader
from ..common.hdf5 import check_output as _check_output
from ..common.runner import progress_bar
from .checks import real_array
from .memory import require_run
from .lindblad import attach
from .result import MaxwellBlochResult

__all__ = ["Saved", "RunState", "saved_positions", "check_run", "make_solver", "record_file",
           "ZMarch"]


class Saved:
    """The z indices where a run keeps its output, without listing them:
    every `every`-th and the last, or the given `indices`; :meth:`end_at`
    adds the index where a callback ended the run."""

    def __init__(self, n_z: int, every: int = 0, indices: Optional[np.ndarray] = None) -> None:
        self.n_z, self.every = n_z, every
        self.indices = np.zeros(0, np.int64) if indices is None else indices
        self.extra: set = set()

    def count(self) -> int:
        """How many indices there are."""
        if self.every:
            return self.n_z // self.every + 1 + (self.n_z % self.every != 0)
        return int(self.indices.size)

    def __contains__(self, j: int) -> bool:
        if j in self.extra:
            return True
        if self.every:
            return j % self.every == 0 or j == self.n_z
        q = int(np.searchsorted(self.indices, j))
        return q < self.indices.size and int(self.indices[q]) == j

    def end_at(self, j: int) -> None:
        """Keep the output at `j` too (the run ends there)."""
        self.extra.add(j)

    def next_stop(self, j: int, full_map: bool) -> int:
        """The first index after `j` where something is kept, or the last."""
        if full_map:
            return j + 1
        if self.every:
            return min((j // self.every + 1) * self.every, self.n_z)
        q = int(np.searchsorted(self.indices, j, side="right"))
        return min(int(self.indices[q]), self.n_z) if q < self.indices.size else self.n_z


@dataclass
class RunState:
    """What a run's callback sees after each z step."""

    j: int
    z: float
    norm_deviation: float
    _solver: Any = field(repr=False)

    @property
    def fields(self) -> np.ndarray:
        """:math:`\\varepsilon_l(z_j, t)`, shape ``(n_t, N_F)``."""
        return self._solver.get_fields()

    @property
    def polarisation(self) -> np.ndarray:
        """The polarisation of the last atom solve, shape ``(n_t, N_F)``."""
        return self._solver.get_polarisation()


def saved_positions(save_every: Any, h_z: float, n_z: int) -> Saved:
    """The z indices `save_every` names: every k-th (an integer) or these z
    positions (each a grid point ``j h_z``)."""
    if np.ndim(save_every) == 0:
        k = _validate.count("save_every", save_every, 1)
        return Saved(n_z, every=k)
    z = real_array("save_every (z positions)", save_every)
    if z.ndim != 1 or z.size < 1:
        raise ValueError(f"save_every must be an integer or a 1-d array of z positions, "
                         f"got shape {z.shape}")
    j = np.rint(z / h_z).astype(np.int64)
    off = np.abs(j * h_z - z) > 1e-9 * max(1.0, n_z * h_z)
    if np.any(off) or np.any(j < 0) or np.any(j > n_z):
        q = int(np.argmax(off | (j < 0) | (j > n_z)))
        raise ValueError(f"save_every: z = {z[q]!r} is not a point z_j = j h_z of the grid "
                         f"0 .. {n_z * h_z:g} (h_z = {h_z:g})")
    return Saved(n_z, indices=np.unique(j))


def check_run(mb: Any, fields0: Any, h_z: Any, n_z: Any, save_every: Any, full_map: bool,
              populations: bool, euler_substeps: Any, callback: Any,
              output: Any) -> Tuple[float, int, int, Saved, np.ndarray, Optional[str]]:
    """The checked arguments of ``mb.run``: ``(h_z, n_z, euler_substeps,
    saved, fields0, output path)``; MemoryError when the run does not fit."""
    h = _validate.real("h_z", h_z, positive=True)
    n = _validate.count("n_z", n_z, 1)
    subs = _validate.count("euler_substeps", euler_substeps, 1)
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable, got {type(callback).__name__}")
    sv = saved_positions(save_every, h, n)
    n_fld = n + 1 if full_map else sv.count()
    n_pop = sv.count() if populations else 0
    require_run(mb, n_fld, n_pop, full_map)
    path = None if output is None else _check_output(output)
    return h, n, subs, sv, mb.input_fields(fields0), path


def make_solver(mb: Any, fields0: np.ndarray, h_z: float, euler_substeps: int) -> Any:
    """The C (or CUDA) solver of a run of `mb` over this process's atoms,
    joined to the ranks' reduction when distributed."""
    core, own = mb._core, mb.local_slice
    sv = core.Mbloch(mb.n_g, mb.n_e, mb.modes[0], mb.modes[1], mb._F,
                     mb._detunings[own], mb._weights[own], mb._initial_state[own], fields0,
                     mb.h_t, h_z, mb.beta, mb.kappa_g, mb.kappa_e, mb.delta, euler_substeps,
                     core.COMPLEX64 if mb.dtype == np.complex64 else core.COMPLEX128)
    if mb._capsule is not None:
        sv.set_comm(mb._capsule)
    if mb.is_open:
        attach(sv, mb)
    return sv


def record_file(mb: Any, path: str, run_args: Dict[str, Any]) -> RunFile:
    """The run file of ``mb.run`` with its header (see its ``output``)."""
    params: Dict[str, Any] = {
        "n_g": mb.n_g, "n_e": mb.n_e, "modes": mb.modes, "F": mb._F,
        "h_t": mb.h_t, "n_t": mb.n_t, "kappa_g": mb.kappa_g, "kappa_e": mb.kappa_e,
        "delta": mb.delta, "beta": mb.beta, "dtype": np.dtype(mb.dtype).name,
        "n_atoms": mb.n_atoms, "initial_state": mb._initial_state}
    if mb.is_open:  # the open system: channels (rate, from, to), dephasing, Doppler classes
        src, dst, rate = mb._decay
        params["decay"] = np.stack([rate, src, dst], axis=1).reshape(-1, 3)
        if mb._dephasing is not None:
            params["dephasing"] = mb._dephasing
        if mb._doppler is not None:
            params["doppler"] = repr(mb._doppler)
            params["level_shifts"] = mb._shifts
    params.update(run_args)
    levels = [f"ground {m}" for m in range(mb.n_g)] + \
        [f"excited {n}" for n in range(mb.n_e)]
    coords = {
        "t": (("t",), mb.t, "time unit of the equations", "retarded time t_k = k h_t"),
        "mode": (("mode",), mb.mode_numbers, "", "mode number l"),
        "level": (("level",), np.arange(mb.n_levels), "",
                  "level: " + ", ".join(levels)),
        "atom": (("atom",), np.arange(mb.n_atoms), "", "atom D sampling the line"),
        "detuning": (("atom",), mb._detunings, "frequency unit (1 / time unit)",
                     "detuning Delta_D"),
        "weight": (("atom",), mb._weights, "", "weight w_D")}
    header = RunHeader(
        model="MaxwellBloch", parameters=params, backend=mb.backend,
        units=("dimensionless units of the equations (source 004; "
               "nlsepy.reference.mbloch): fields in Rabi-frequency units, t the "
               "retarded time, frequencies (kappa, delta, detunings) in 1 / (time unit), "
               "z in the units of d eps / dz = i P with P = beta sum w F a* b"),
        coords=coords,
        dims={"fields": ("t", "mode"), "norm_deviation": (),
              "populations": ("t", "level")},
        var_units={"z": "length unit of the equations", "z_populations":
                   "length unit of the equations", "fields": "Rabi frequency",
                   "norm_deviation": "", "populations": ""},
        long_names={"z": "position of the kept fields",
                    "z_populations": "position of the kept populations",
                    "fields": "eps_l(z, t)",
                    "norm_deviation": "max ||psi|^2 - 1| over the atoms so far",
                    "populations": "sum_D w_D |psi^D_i(z, t)|^2"})
    return RunFile(path, header, time="retarded (frames along z)")


class ZMarch:
    """One run's z loop: the solver's calls, what is kept of them, the run
    file, the callback and Ctrl-C.

    Distributed (``mb.comm``), every rank makes the same calls and the same
    collective calls in the same order: an error on one rank is raised on
    every rank, a callback's ``StopIteration`` or Ctrl-C on any rank stops
    every rank after the same z step, and rank 0 writes the run file.
    """

    def __init__(self, mb: Any, solver: Any, h_z: float, n_z: int, saved: Saved,
                 full_map: bool, populations: bool, euler_substeps: int,
                 callback: Optional[Callable[[Any], Any]], path: Optional[str],
                 t_start: float, density: bool = False) -> None:
        self.mb, self.solver, self.comm = mb, solver, mb.comm
        self.density = bool(density) and populations
        self.dens: List[np.ndarray] = []    # ensemble density matrices kept (open models)
        self.h_z, self.n_z, self.saved = h_z, n_z, saved
        self.full_map, self.populations = bool(full_map), bool(populations)
        self.euler_substeps, self.callback, self.path = euler_substeps, callback, path
        self.t_start = t_start
        self.zf: List[float] = []            # positions and fields kept
        self.fl: List[np.ndarray] = []
        self.zp: List[float] = []            # positions and populations kept
        self.pops: List[np.ndarray] = []
        self.kernel = 0.0                    # seconds in the solver's steps
        self.per_step = 0.0                  # device seconds of one z step
        self.rec: Any = None
        #: the result of the z reached when Ctrl-C stopped the run
        self.partial: Optional[MaxwellBlochResult] = None

    # --------------------------------------------------------- collectives
    def on_root(self, fn: Callable[[], Any]) -> Any:
        """``fn()`` in one process; distributed, on rank 0 only, its error
        raised on every rank."""
        return fn() if self.comm is None else _dist.agree(self.comm, fn, only=0)

    def anywhere(self, *flags: bool) -> Tuple[bool, ...]:
        """The flags or'ed over the ranks (one collective)."""
        if self.comm is None:
            return tuple(bool(f) for f in flags)
        bits = sum(int(bool(f)) << q for q, f in enumerate(flags))
        from mpi4py import MPI
        bits = self.comm.allreduce(bits, op=MPI.BOR)
        return tuple(bool(bits >> q & 1) for q in range(len(flags)))

    # --------------------------------------------------------- what is kept
    def keep_fld(self, j: int) -> bool:
        """Whether the fields of z index `j` are kept."""
        return j <= self.n_z if self.full_map else j in self.saved

    def keep_pop(self, j: int) -> bool:
        """Whether the populations of z index `j` are kept."""
        return self.populations and j in self.saved

    def open_record(self, run_args: Dict[str, Any]) -> None:
        """Start the run file (rank 0 writes it)."""
        self.rec = self.on_root(lambda: record_file(self.mb, self.path, run_args))

    def record(self, dim: str, z: float, data: Dict[str, Any]) -> None:
        """Append `data` at position `z` of `dim` to the run file."""
        if self.rec is not None:  # rank 0 (or the one process) writes
            self.rec.append(dim, z, data)

    def keep(self, j: int, fields: Optional[np.ndarray] = None) -> None:
        """Keep what position `j` asks for (`fields`: those taken before the
        solver stepped past it)."""
        h_z, solver = self.h_z, self.solver
        if self.keep_fld(j):
            self.zf.append(j * h_z)
            self.fl.append(solver.get_fields() if fields is None else fields)
            if self.path is not None:
                nd = float(solver.norm_deviation())
                self.on_root(lambda: self.record("z", j * h_z, {"fields": self.fl[-1],
                                                               "norm_deviation": nd}))
        if self.keep_pop(j):
            self.zp.append(j * h_z)
            self.pops.append(solver.get_populations())
            if self.density:
                self.dens.append(solver.get_density())
            if self.path is not None:
                self.on_root(lambda: self.record("z_populations", j * h_z,
                                                 {"populations": self.pops[-1]}))

    def result(self, interrupted: bool = False) -> MaxwellBlochResult:
        """What the run kept (interrupted: ending with the fields at the z reached)."""
        mb, solver, h_z = self.mb, self.solver, self.h_z
        z, f = self.zf, self.fl
        j = int(solver.z_index())
        if interrupted and not (self.zf and self.zf[-1] == j * h_z):  # end at the z reached
            z, f = self.zf + [j * h_z], self.fl + [solver.get_fields()]
        return MaxwellBlochResult(
            z=np.array(z), t=mb.t, modes=mb.mode_numbers, fields=np.array(f),
            z_populations=np.array(self.zp),
            populations=np.array(self.pops) if self.populations else None,
            density=np.array(self.dens) if self.density else None,
            norm_deviation=float(solver.norm_deviation()),
            seconds=time.perf_counter() - self.t_start, kernel_seconds=self.kernel, h_z=h_z,
            interrupted=interrupted)

    # --------------------------------------------------------- stepping
    def solve(self, j: int, step: bool, n: int = 0) -> None:
        """The atoms at z_j, then (step) the fields to z_{j+1}; n >= 1: to
        z_{j+n} without populations, in launches of the z pipeline of the
        CUDA tensor-core and open-system kernels.  Distributed: the same error on every rank
        (the fields are the same everywhere)."""
        solver, h_z = self.solver, self.h_z
        try:
            if not step:
                self.mb._agree(lambda: solver.atoms(self.keep_pop(j)))
            elif n == 0:
                self.mb._agree(lambda: solver.step(self.keep_pop(j)))
            else:
                self.mb._agree(lambda: solver.steps(n))
        except BlowUpError as exc:
            jf = solver.z_index()  # the fields of z_jf are kept
            raise BlowUpError(
                f"{exc} (MaxwellBloch: at z index {jf}, z = {jf * h_z:g}; reduce "
                f"h_z = {h_z:g} or h_t = {self.mb.h_t:g}, or check the parameters)",
                step=jf + 1, t=(jf + 1) * h_z,
                last_good=(jf * h_z, solver.get_fields())) from None
        self.kernel += solver.last_seconds()
        # seconds of device time a z step (the Euler start: a substep)
        self.per_step = solver.last_seconds() / max(n, 1 if j > 0 else self.euler_substeps)

    def call_back(self, j: int) -> bool:
        """The callback after z step j; True when it ended the run
        (distributed: when it did so on any rank; an error on one rank is
        raised on all)."""
        comm, solver, callback = self.comm, self.solver, self.callback

        def one() -> bool:
            try:
                callback(RunState(j, j * self.h_z, solver.norm_deviation(), solver))
            except StopIteration:
                return True
            except Exception as exc:  # distributed: as an error agree() passes on
                if comm is None or isinstance(exc, (ValueError, TypeError, RuntimeError,
                                                    MemoryError, OSError)):
                    raise
                raise RuntimeError(f"the callback raised {type(exc).__name__}: {exc}") \
                    from exc
            return False
        return bool(self.mb._agree(one))

    def march(self, progress: bool) -> MaxwellBlochResult:
        """Take the z steps and return what the run kept.

        The z steps one call takes: up to the next z index where something
        is kept (the Euler start goes alone), and about half a second of
        device time (at least the solver's z slices; the Hopper kernel pays
        its start and drain once a call), so that Ctrl-C and the progress
        bar act every half second or launch; the solver splits a call into
        launches itself.  Ctrl-C is held while a call runs
        (:func:`~nlsepy.common.guard.deferred_sigint`) and acts between
        calls, the output consistent; :attr:`partial` then holds what the
        run reached.  Distributed: one z step a call (the solver reduces
        over the ranks after each), and Ctrl-C on any rank stops every rank
        after the same z step.
        """
        comm, solver, saved, callback = self.comm, self.solver, self.saved, self.callback
        n_z = self.n_z
        pipe = solver.pipeline() if comm is None else 1
        bar = None
        if progress and (comm is None or comm.Get_rank() == 0):
            bar = progress_bar(True, n_z)
        with _guard.deferred_sigint() as flag:
            hit = False
            ok = False
            try:
                j = 0
                while j < n_z and not hit:
                    fields_j = solver.get_fields() if self.keep_fld(j) else None
                    n = 0
                    if pipe > 1 and not self.keep_pop(j):
                        n = 1
                        if j > 0 and callback is None:
                            n = max(pipe, int(0.5 / self.per_step) if self.per_step > 0
                                    else pipe)
                            n = min(n, saved.next_stop(j, self.full_map) - j)
                    self.solve(j, step=True, n=n)
                    self.keep(j, fields_j)
                    if bar is not None:
                        bar.update(max(n, 1))
                    j += max(n, 1)
                    ended = callback is not None and self.call_back(j)  # after one z step
                    hit, ended = self.anywhere(flag.hit, ended)
                    if ended:  # the run ends at z_j, a saved point
                        n_z = self.n_z = j
                        saved.end_at(n_z)
                        break
                if not hit:
                    self.solve(n_z, step=False)  # populations and the norm monitor at the last z
                    self.keep(n_z)
                    hit = self.anywhere(flag.hit)[0]  # Ctrl-C during that solve
                ok = not hit
            finally:
                if bar is not None:
                    bar.close()
                if self.path is not None:  # marked complete when the run returns
                    try:
                        self.on_root(lambda: self.rec.close(ok) if self.rec is not None
                                     else None)
                    except Exception:
                        if ok:
                            raise  # else the exception under way says more
            if hit:
                self.partial = self.result(interrupted=True)
                if not flag.hit:  # Ctrl-C reached another rank only
                    raise KeyboardInterrupt
                flag.raise_now()
        return self.result()
