"""The checkpoints of ``nl.DipolarGPE``: what they hold, and their entries
checked and turned into constructor arguments.

A checkpoint is an ``.npz`` of plain arrays with the format tag, version and
model name of :func:`nlsepy.common.files.save_checkpoint`; its ``psi``
entry is the state (real while the solver's state is real), which
``nl.dbec`` also reads as an initial state.  A distributed solver writes
one part per rank (its x rows of ``psi`` and ``V``) and an index with the
other entries and ``has_V`` (:func:`nlsepy.common.dist.save_parts`).
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Tuple, Union

import numpy as np

from ..common import dist as _dist
from ..common import files as _files
from .parameters import FFT_EFFORT, GEOMETRIES, MODEL, Obstacle

__all__ = ["KEYS", "Checkpoints", "entries", "read", "arguments", "checkpoint_rows"]

#: the entries of a checkpoint (name -> :class:`~nlsepy.common.files.Key`)
KEYS = {
    "psi": _files.Key("array", "fc", ndim=(1, 2, 3)),
    "t": _files.Key("float"),
    "t_base": _files.Key("float"),
    "t_steps": _files.Key("int"),
    "t_dt": _files.Key("float"),
    "steps_imaginary": _files.Key("int"),
    "steps_real": _files.Key("int"),
    "shape": _files.Key("array", "iu", ndim=(1,)),
    "spacing": _files.Key("array", "f", ndim=(1,)),
    "dt": _files.Key("float"),
    "g": _files.Key("float"),
    "gdd": _files.Key("float"),
    "trap": _files.Key("array", "f", ndim=(1,)),
    "cutoff": _files.Key("float", optional=True),
    "omega": _files.Key("float", optional=True),
    "gqf": _files.Key("float", optional=True),
    "geometry": _files.Key("str", choices=tuple(GEOMETRIES)),
    "option": _files.Key("int"),
    "dipolar": _files.Key("bool"),
    "fft_effort": _files.Key("str", choices=tuple(FFT_EFFORT)),
    "dtype": _files.Key("str", choices=("complex64", "complex128")),
    "V": _files.Key("array", "f", ndim=(1, 2, 3), optional=True),
    "obstacle": _files.Key("array", "f", ndim=(1,), finite=False, optional=True),
    "obstacle_move_axis": _files.Key("str", optional=True),
    "obstacle_beam_axis": _files.Key("str", optional=True),
}


def entries(gpe: Any) -> Tuple[Dict[str, np.ndarray], Dict[str, Any]]:
    """``(slabs, scalars)``: the entries of a checkpoint of `gpe`, ``psi`` and
    ``V`` (what this process holds) apart from the others; a distributed
    solver's index says whether parts hold ``V`` (``has_V``)."""
    psi = gpe.psi
    slabs = {"psi": psi.real if gpe.is_real else psi}
    clock = gpe._clock()  # t, t_base, k, solver_dt, steps
    steps = clock["steps"]
    scalars: Dict[str, Any] = dict(
        t=clock["t"], t_base=clock["t_base"], t_steps=clock["k"], t_dt=clock["solver_dt"],
        steps_imaginary=steps["imaginary"], steps_real=steps["real"],
        shape=np.asarray(gpe.shape, dtype=np.int64),
        spacing=np.asarray(gpe.spacing, dtype=np.float64), dt=gpe.dt, g=gpe.g, gdd=gpe.gdd,
        trap=np.asarray(gpe.trap, dtype=np.float64), geometry=gpe.geometry, option=gpe.option,
        dipolar=gpe._dipolar, fft_effort=gpe.fft_effort, dtype=gpe.dtype.name)
    if gpe.cutoff is not None:
        scalars["cutoff"] = gpe.cutoff
    if gpe.omega != 0:
        scalars["omega"] = gpe.omega
    if gpe.gqf != 0:
        scalars["gqf"] = gpe.gqf
    V = gpe._V
    if V is not None:
        slabs["V"] = V
    if gpe.comm is not None:
        scalars["has_V"] = V is not None
    ob = gpe.obstacle
    if ob is not None:
        scalars["obstacle"] = np.array([ob.V0, ob.sigma, ob.velocity, ob.start, ob.t_move,
                                        ob.t_off], dtype=np.float64)
        scalars["obstacle_move_axis"] = ob.move_axis
        scalars["obstacle_beam_axis"] = "" if ob.beam_axis is None else ob.beam_axis
    return slabs, scalars


def read(where: str, rows: Optional[Tuple[int, int]]) -> Dict[str, Any]:
    """The entries of a checkpoint, ``psi`` and ``V`` whole or (distributed
    checkpoints) the global x rows ``rows = (start, count)``."""
    if not _dist.is_parts_index(where):
        return _files.load_checkpoint(where, MODEL, KEYS)
    keys = {k: v for k, v in KEYS.items() if k not in ("psi", "V")}
    keys["has_V"] = _files.Key("bool")
    head = _files.load_checkpoint(where, MODEL, {"has_V": keys["has_V"]})
    slab_keys = {"psi": KEYS["psi"]}
    if head["has_V"]:
        slab_keys["V"] = _files.Key("array", "f", ndim=(1, 2, 3))
    d = _dist.load_parts(where, MODEL, keys, slab_keys, rows=rows)
    if tuple(d["global_shape"]) != tuple(int(n) for n in d["shape"]):
        raise ValueError(f"{where}: the parts' grid {tuple(d['global_shape'])} is not the "
                         f"checkpoint's grid {tuple(int(n) for n in d['shape'])}")
    return d


def arguments(where: str, d: Dict[str, Any], overrides: Dict[str, Any],
              rows: Optional[Tuple[int, int]] = None) -> Dict[str, Any]:
    """Checked constructor arguments from the entries `d` of a checkpoint
    (``psi`` and ``V`` of the global x rows ``rows = (start, count)`` when
    given), with `overrides`."""

    def bad(what: str) -> ValueError:
        return ValueError(f"{where}: {what}")

    if "psi0" in overrides:
        raise TypeError(f"{where} with ['psi0'] changed: the state comes from the "
                        f"checkpoint; assign gpe.psi after loading")
    shape = tuple(int(n) for n in d["shape"])
    psi = d["psi"]
    want = shape if rows is None else (rows[1],) + shape[1:]
    if psi.shape != want:
        raise bad(f"entry 'psi' has shape {psi.shape}, the checkpoint's grid is {shape}")
    real = np.float32 if d["dtype"] == "complex64" else np.float64
    if psi.dtype not in (np.dtype(real), np.dtype(d["dtype"])):
        raise bad(f"entry 'psi' has dtype {psi.dtype}, the checkpoint's dtype is {d['dtype']}")
    for name in ("steps_imaginary", "steps_real", "t_steps"):
        if d[name] < 0:
            raise bad(f"entry {name!r} must be >= 0, got {d[name]}")
    if not d["t_dt"] > 0:
        raise bad(f"entry 't_dt' must be > 0, got {d['t_dt']!r}")
    if len(d["trap"]) != 3:
        raise bad(f"entry 'trap' must hold 3 frequencies, got {len(d['trap'])}")
    kw: Dict[str, Any] = dict(
        shape=shape, spacing=tuple(float(h) for h in d["spacing"]), dt=d["dt"], g=d["g"],
        gdd=d["gdd"], trap=tuple(float(v) for v in d["trap"]), cutoff=d.get("cutoff"),
        geometry=d["geometry"], option=d["option"], V=d.get("V"), dtype=d["dtype"],
        dipolar=d["dipolar"], fft_effort=d["fft_effort"], omega=d.get("omega", 0.0),
        gqf=d.get("gqf", 0.0))
    if "obstacle" in d:
        v = d["obstacle"]
        if v.shape != (6,) or "obstacle_move_axis" not in d:
            raise bad("entry 'obstacle' must hold (V0, sigma, velocity, start, t_move, t_off) "
                      "with 'obstacle_move_axis' beside it")
        beam = d.get("obstacle_beam_axis", "")
        kw["obstacle"] = Obstacle(*(float(x) for x in v), move_axis=d["obstacle_move_axis"],
                                  beam_axis=beam or None)
    kw.update(overrides)
    kw["psi0"] = psi
    return kw


def checkpoint_rows(where: str, comm: Any) -> Optional[Tuple[int, int]]:
    """The global x rows ``(start, count)`` this rank reads from a distributed
    checkpoint's parts (None for a single-process file: every rank reads it
    whole); ValueError unless the checkpoint holds a 3D grid."""
    head = _files.load_checkpoint(where, MODEL, {"shape": KEYS["shape"]})
    shape = tuple(int(n) for n in head["shape"])
    if len(shape) != 3:
        raise ValueError(f"{where}: holds a grid of {len(shape)} axes; comm= runs the "
                         f"3d geometry")
    if not _dist.is_parts_index(where):
        return None
    counts = _dist.split(int(shape[0]), comm.Get_size())[0]
    r = comm.Get_rank()
    return (int(np.sum(counts[:r])), int(counts[r]))


class Checkpoints:
    """The checkpoint side of :class:`nlsepy.DipolarGPE` (a base class of it,
    beside :class:`~nlsepy.common.stepper.TimeStepper`, whose ``save``
    writes what :meth:`_checkpoint` gives): :meth:`load` with constructor
    arguments changed, its reading and checks, and the clock restored."""

    #: the checkpoint's entries
    _KEYS = KEYS

    def _checkpoint(self) -> Tuple[Dict[str, np.ndarray], Dict[str, Any]]:
        return entries(self)

    @classmethod
    def load(cls, path: Union[str, os.PathLike], backend: str = "auto", comm: Any = None,
             **overrides: Any) -> Any:
        """A solver at the state, time and step counts of a file written by :meth:`save`.

        Without overrides the new solver continues exactly as the saved one
        would have (same parameters, ``V``, obstacle, clock and counters).
        A distributed checkpoint (the index file a solver with ``comm=``
        writes, beside its per-rank parts) loads with any number of ranks,
        or in one process without `comm`; a single-process checkpoint loads
        with `comm` too (every rank reads its rows).

        Parameters
        ----------
        path : path-like
            File from :meth:`save`.
        backend : {"auto", "cpu", "cuda"}, optional
            Backend of the new solver, chosen as the constructor chooses it
            (``"auto"`` takes the GPU where there is one), whichever backend
            wrote the file. The state, clock and counters are restored bit
            for bit; the steps that follow match the saved solver's bit for
            bit on its backend and to rounding on the other, so continuing a
            CPU run bit for bit on a machine with a GPU needs ``backend="cpu"``.
        comm : mpi4py.MPI.Intracomm, optional
            Load into a distributed solver over these ranks (collective).
        **overrides
            Constructor arguments to change (e.g. ``dt``, ``g``, ``trap``,
            ``obstacle=None``).

        Returns
        -------
        DipolarGPE

        Raises
        ------
        FileNotFoundError
            No such file.
        ValueError
            The file is not a whole DipolarGPE checkpoint (empty, truncated,
            another kind of file, another model's checkpoint), or an entry is
            missing, of the wrong kind, shape or dtype, not finite, or not a
            valid parameter; the message names the file and the problem.
        """
        where = os.fspath(path)
        if comm is None:
            d = cls._read(where, None, backend, overrides)
        else:
            comm = _dist.as_comm(comm)
            d = _dist.agree(comm, lambda: cls._read(where, comm, backend, overrides))
        return cls._from_checkpoint(where, d, backend, comm, overrides)

    @classmethod
    def _read(cls, where: str, comm: Any, backend: str = "auto",
              overrides: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """The checkpoint's entries (with `comm`: ``psi`` and ``V`` of this
        rank's rows of a distributed one), checked, and the constructor's
        arguments they give with `overrides` (``"arguments"``)."""
        rows = None if comm is None else checkpoint_rows(where, comm)
        d = read(where, rows)
        d["arguments"] = arguments(where, d, overrides or {}, rows)
        return d

    @classmethod
    def _from_checkpoint(cls, where: str, d: Dict[str, Any], backend: str, comm: Any,
                         overrides: Optional[Dict[str, Any]] = None) -> Any:
        try:
            gpe = cls(backend=backend, comm=comm, **d["arguments"])
        except (ValueError, TypeError) as exc:
            if overrides:
                raise cls._refused(where, overrides, exc) from None
            raise ValueError(f"{where}: holds invalid parameters: {exc}") from None
        gpe._restore_clock(d, overrides or {})
        return gpe

    def _restore_clock(self, d: Dict[str, Any], overrides: Any = ()) -> None:
        """The step counters and the clock of checkpoint entries `d`: the saved
        clock bit for bit, unless `overrides` change dt or the entries disagree."""
        self._steps = {"imaginary": d["steps_imaginary"], "real": d["steps_real"]}
        if "dt" not in overrides and d["t_base"] + d["t_steps"] * d["t_dt"] == d["t"]:
            self._use_dt(d["t_dt"])
            self._t_base, self._k = d["t_base"], d["t_steps"]
        else:
            self._t_base, self._k = d["t"], 0

