"""The NLSE by explicit RK4 and finite differences (``nl.NLSE``).

Solves ``i dPsi/dt + a Lap(Psi) - V Psi + s |Psi|^2 Psi = 0`` in 1, 2 or 3
dimensions with classic RK4 in time and the second-order central difference
(CD) or two-step fourth-order compact (2SHOC) Laplacian (Caplan, NLSEmagic,
sections 3.1-3.4).
"""

from __future__ import annotations

import math
import os
import time
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from . import _backend, _dist, _guard, runner
from ._validate import Fixed
from ._validate import complex_dtype as _complex_dtype
from ._validate import potential as _potential
from ._validate import real as _check_real
from .errors import BlowUpError

__all__ = ["NLSE", "stability_bound"]

_SCHEMES = {"cd": 0, "2shoc": 1}
_BCS = {"dirichlet": 0, "msd": 1, "l0": 2, "periodic": 3, "one-sided": 4}
_BC_ALIASES = {"one_sided": "one-sided", "1s": "one-sided", "d": "dirichlet"}

#: fraction of the linear stability bound used when dt is not given
DT_SAFETY = 0.8

#: pinned host blocks the CUDA backend stages frames through (2 x 32 MiB)
_CUDA_STAGING_BYTES = 2 * (32 << 20)


def _refuse(name: str, value: Any) -> str:
    """How to change a fixed NLSE parameter (the message of its AttributeError)."""
    keys = ("a", "s", "scheme", "bc", "backend") + (("dtype",) if name == "dtype" else ())
    args = ["sim.psi", "<new spacing>" if name == "spacing" else "sim.spacing"]
    args += [f"{k}=<new>" if k == name else f"{k}=sim.{k}" for k in keys]
    call = f"nl.NLSE({', '.join(args + ['V=sim.V'])})"
    if name == "max_dt":
        how = f"it follows from a, spacing and scheme; make a new solver with others: {call}"
    else:
        how = f"make a new solver from the current state: {call}"
    return (f"NLSE.{name} cannot be changed: the solver's kernels, work arrays and stability "
            f"bound were set up with it; {how}")


def _Fixed(doc: str) -> Fixed:
    return Fixed(doc, _refuse, table="_fixed")


def _grid_arrays(scheme: str, backend: str) -> int:
    """Grid-sized complex arrays a solver allocates: Psi, acc, ta, tb (RK4,
    csrc/fd/fd.c and cuda/fd/fd.cu), plus D for 2SHOC on the CPU."""
    return 5 if (scheme == "2shoc" and backend != "cuda") else 4


def _core():
    from . import _core as core
    return core


def _spacing(spacing: Union[float, Sequence[float]], ndim: int) -> Tuple[float, ...]:
    if np.ndim(spacing) == 0:
        h = (spacing,) * ndim
    else:
        h = tuple(np.asarray(spacing).ravel().tolist())
        if len(h) != ndim:
            raise ValueError(f"spacing must be a number or {ndim} numbers (one per axis), "
                             f"got {len(h)}: {spacing!r}")
    return tuple(_check_real(f"spacing[{q}]" if ndim > 1 else "spacing", v, positive=True)
                 for q, v in enumerate(h))


def _name(kind: str, value: Any, table: dict, aliases: dict = {}) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{kind} must be a string, one of {sorted(table)}, got {value!r}")
    key = aliases.get(value.lower(), value.lower())
    if key not in table:
        raise ValueError(f"unknown {kind} {value!r}; choose one of {sorted(table)}")
    return key


def stability_bound(spacing: Union[float, Sequence[float]], ndim: int, a: float = 1.0,
                    scheme: str = "2shoc") -> float:
    """Linear stability bound of RK4 + CD or 2SHOC (NLSEmagic eqs. 18-19).

    ``k < h^2 / (d sqrt(2) a)`` for CD and 3/4 of that for 2SHOC, with ``h``
    the smallest spacing and ``d`` the number of dimensions.

    Parameters
    ----------
    spacing : float or sequence of float
        Grid spacing, one value or one per axis.
    ndim : int
        Number of dimensions (1, 2 or 3).
    a : float, optional
        Dispersion coefficient.
    scheme : {"cd", "2shoc"}, optional
        Spatial scheme.

    Returns
    -------
    float
        The largest linearly stable time step.

    Examples
    --------
    >>> round(stability_bound(0.1, 1, 1.0, "cd"), 7)
    0.0070711
    """
    if ndim not in (1, 2, 3):
        raise ValueError(f"ndim must be 1, 2 or 3, got {ndim!r}")
    h = _spacing(spacing, ndim)
    a = _check_real("a", a, positive=True)
    return _core().fd_max_dt(ndim, a, h, _SCHEMES[_name("scheme", scheme, _SCHEMES)])


def _halo_rows(scheme: str) -> int:
    """Rows of halo a slab needs for one RK4 step: the stencil's reach (1 for
    CD, 2 for the two sweeps of 2SHOC) for each of the four stages."""
    return 4 * (1 if scheme == "cd" else 2)


def _local_rows(arr: np.ndarray, slab: Optional[_dist.Slab], layout: _dist.Layout,
                name: str) -> np.ndarray:
    """This rank's rows of a global array, or the data of its Slab."""
    if slab is None:
        if arr.shape != layout.shape:
            raise ValueError(f"{name} must have the grid's shape {layout.shape} on every rank "
                             f"(or be this rank's nl.Slab from nl.scatter), got {arr.shape}")
        return arr[layout.local_slice]
    if slab.start != layout.start or tuple(slab.data.shape) != layout.local_shape:
        raise ValueError(f"{name}: this rank's slab holds rows {slab.start} .. "
                         f"{slab.start + slab.data.shape[0] - 1} of shape "
                         f"{tuple(slab.data.shape)}, the layout gives rows {layout.start} .. "
                         f"{layout.start + layout.count - 1} of shape {layout.local_shape}: "
                         f"make it with nl.scatter over the same communicator")
    return arr


def _same_everywhere(comm: Any, values: Dict[str, Any]) -> None:
    """Every rank was given the same parameters (else the same ValueError on
    every rank, naming the first rank and parameter that differ from rank 0)."""
    everyone = comm.allgather(values)
    for rank, theirs in enumerate(everyone):
        for name, value in values.items():
            if theirs[name] != everyone[0][name]:
                raise ValueError(f"rank {rank} was given {name} = {theirs[name]!r}, rank 0 "
                                 f"{everyone[0][name]!r}: every rank must pass the same "
                                 f"parameters")


class _SlabFD:
    """One rank's part of a distributed NLSE, with the interface of the
    extension's ``FD`` handle.

    The rank holds its rows of axis 0 plus `depth` halo rows on each side
    that has a neighbour (both sides for periodic boundaries), in one
    single-process handle over the extended slab.  One RK4 step reaches
    `depth` rows, so after each step the owned rows are exactly what the
    whole-grid solver gives (the same arithmetic, point by point), and the
    halos are refreshed from the neighbours (``MPI_Sendrecv``) before the
    next.  The slab's own edges are stepped with the global boundary
    condition, which only affects the halo rows, overwritten each step.
    Observables sum the owned rows only, reduced in rank order.
    """

    def __init__(self, module: Any, layout: _dist.Layout, depth: int, periodic: bool,
                 args: Tuple[Any, ...], owner: "NLSE") -> None:
        self.layout, self.depth, self.periodic = layout, depth, periodic
        self.comm = layout.comm
        many = layout.size > 1
        self.lo = depth if many and (periodic or layout.rank > 0) else 0
        self.hi = depth if many and (periodic or layout.rank < layout.size - 1) else 0
        self.count = layout.count
        self.module, self.args, self.owner = module, args, owner
        self.h: Any = None
        self.capsule: Any = None
        # seconds of the steps since the last reset: the slab's own step
        # (compute), the blow-up vote (waiting for the slowest rank), the
        # halo exchange (device-host copies and MPI_Sendrecv)
        self.timings = {"step": 0.0, "wait": 0.0, "exchange": 0.0, "steps": 0}
        self.buffers: Optional[list] = None
        self.dtype = owner.dtype
        self.pin = module if owner.backend == "cuda" else None
        self.ipc: Any = None     # the device-to-device exchange, set up at the first one
        self.ipc_why = ""        # why not, when not
        self.V_ext: Optional[np.ndarray] = None  # the potential with its halo rows

    def __del__(self) -> None:
        # unlock the staging buffers before they are freed
        if getattr(self, "pin", None) is not None and getattr(self, "buffers", None):
            for b in self.buffers:
                try:
                    self.pin.host_unregister(b)
                except Exception:  # the context may be gone at exit
                    pass

    def create(self, capsule: Any) -> None:
        """Allocate the slab's handle (no collective call)."""
        layout, owner = self.layout, self.owner
        shape = (self.count + self.lo + self.hi,) + layout.shape[1:]
        state = int(np.prod(shape)) * owner.dtype.itemsize
        arrays = _grid_arrays(owner.scheme, owner.backend)
        what = (f"this rank's slab of the NLSE grid {layout.shape} (rows {layout.start} .. "
                f"{layout.start + layout.count - 1} and {self.lo + self.hi} halo rows, "
                f"{owner.dtype.name}, backend={owner.backend!r}), {arrays} state arrays,")
        if owner.backend == "cuda":
            _guard.require_memory(arrays * state, what, backend="cuda", host_bytes=2 * state)
        else:
            _guard.require_memory((arrays + 2) * state, what)
        self.h = self.module.FD(shape, *self.args)
        self.capsule = capsule
        self.owner = None  # no cycle with the model

    # the collective part of construction
    def start(self, psi: np.ndarray, V: Optional[np.ndarray]) -> None:
        self.set_potential(V)
        self.set_state(psi)

    def _halo_of(self, owned: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """The rows below and above `owned` from the neighbours (collective)."""
        d = self.depth
        below = np.zeros((self.lo,) + owned.shape[1:], owned.dtype)
        above = np.zeros((self.hi,) + owned.shape[1:], owned.dtype)
        if self.layout.size > 1:
            recv_lo = np.empty((d,) + owned.shape[1:], owned.dtype)
            recv_hi = np.empty_like(recv_lo)
            _dist.halo_exchange(self.comm, np.ascontiguousarray(owned[:d]),
                                np.ascontiguousarray(owned[-d:]), recv_lo, recv_hi,
                                self.periodic)
            if self.lo:
                below = recv_lo
            if self.hi:
                above = recv_hi
        return below, above

    def exchange(self) -> None:
        """Refresh the halo rows of the state from the neighbours."""
        if self.layout.size == 1:
            return
        d, lo, n = self.depth, self.lo, self.count
        if self.ipc is None and self.pin is not None:  # GPU ranks: device to device?
            row = int(np.prod(self.layout.shape[1:])) * self.dtype.itemsize
            halo = _dist.IpcHalo(self.comm, self.pin, d * row, bool(lo), bool(self.hi))
            self.ipc = halo if halo.open() else False
            self.ipc_why = halo.why
        if self.ipc:  # my edge rows out, the neighbours' in
            self.ipc.swap(lambda side, a: self.h.rows_to(lo if side == 0 else lo + n - d, d, a),
                          lambda which, a: self.h.rows_from(0, lo, a) if which == "lower"
                          else self.h.rows_from(lo + n, self.hi, a))
            return
        if self.buffers is None:  # four halo-sized host buffers, reused
            shape = (d,) + self.layout.shape[1:]
            self.buffers = [np.empty(shape, self.dtype) for _ in range(4)]
            if self.pin is not None:  # page-locked: the device copies run at bus speed
                for b in self.buffers:
                    self.pin.host_register(b)
        lower, upper, recv_lo, recv_hi = self.buffers
        self.h.get_rows(lo, d, lower)
        self.h.get_rows(lo + n - d, d, upper)
        _dist.halo_exchange(self.comm, lower, upper, recv_lo, recv_hi, self.periodic)
        if lo:
            self.h.set_rows(0, lo, recv_lo)
        if self.hi:
            self.h.set_rows(lo + n, self.hi, recv_hi)

    def set_state(self, psi: np.ndarray) -> None:
        # (finite: checked by the caller; set_rows takes the rows as they are)
        self.h.set_rows(self.lo, self.count, psi)
        self.exchange()

    def get_state(self) -> np.ndarray:
        return self.h.get_rows(self.lo, self.count)

    def set_potential(self, V: Optional[np.ndarray]) -> None:
        if V is None:
            self.h.set_potential(None)
            return
        below, above = self._halo_of(V)
        self.V_ext = np.ascontiguousarray(np.concatenate([below, V, above], axis=0))
        self.h.set_potential(self.V_ext)

    def set_dt(self, dt: float) -> None:
        self.h.set_dt(dt)

    def step(self, n: int) -> Tuple[int, bool]:
        """`n` steps, each followed by the halo exchange; at the first step
        that blew up on any rank every rank drops it (the blown-up part keeps
        its last finite state, the others undo the step), so all stand at
        the same step."""
        from mpi4py import MPI
        clock, tm = time.perf_counter, self.timings
        for q in range(n):
            t0 = clock()
            _, blew = self.h.step(1)
            t1 = clock()
            bad = self.comm.allreduce(bool(blew), op=MPI.LOR)
            t2 = clock()
            tm["step"] += t1 - t0
            tm["wait"] += t2 - t1
            if bad:
                if not blew:  # this part's step was good: drop it like the others
                    self.h.undo_step()
                return q, True
            self.exchange()
            tm["exchange"] += clock() - t2
            tm["steps"] += 1
        return n, False

    def observe(self) -> Tuple[float, float]:
        part = self.h.observe_rows(self.lo, self.count)
        norm, energy = _dist.ordered_sum(self.capsule, part)
        return float(norm), float(energy)

    def bytes_per_point_step(self) -> float:
        return self.h.bytes_per_point_step()


class NLSE:
    """Nonlinear Schrödinger equation by RK4 and finite differences.

    Solves ``i dPsi/dt + a Lap(Psi) - V Psi + s |Psi|^2 Psi = 0`` on a
    uniform grid in 1, 2 or 3 dimensions (arrays of shape ``(nx,)``,
    ``(nx, ny)`` or ``(nx, ny, nz)``, the last axis contiguous).

    Parameters
    ----------
    psi0 : array_like
        Initial state, real or complex, 1-3 dimensional.
    spacing : float or sequence of float
        Grid spacing ``h``, one value or one per axis.
    a : float, optional
        Dispersion coefficient (> 0).
    s : float, optional
        Nonlinearity: ``s < 0`` defocusing (dark solitons), ``s > 0`` focusing.
    V : array_like or None, optional
        Static real potential with the shape of `psi0`.
    scheme : {"cd", "2shoc"}, optional
        Laplacian: second-order central differences or the fourth-order
        two-step compact scheme.
    bc : {"dirichlet", "msd", "l0", "periodic", "one-sided"}, optional
        Boundary condition on every face: fixed value (eq. 11), fixed modulus
        squared (eq. 14), zero Laplacian (eq. 16), periodic, or one-sided
        differences (1D only).  For non-periodic conditions the first and last
        point of every axis are boundary points.
    dt : float, optional
        Time step.  Default: 0.8 of the linear stability bound
        (:func:`stability_bound`).  A larger value raises unless `force`.
    dtype : {numpy.complex64, numpy.complex128}, optional
        Precision of state and arithmetic.  Default: complex64 for float32 or
        complex64 input, complex128 otherwise.
    force : bool, optional
        Accept a `dt` above the linear stability bound.
    backend : {"auto", "cpu", "cuda"}, optional
        Where the state lives and the kernels run.
    comm : mpi4py communicator, optional
        Distribute the grid over the ranks of `comm` (run the script under
        ``mpirun``): each rank holds a slab of rows of axis 0 (the slowest),
        `psi0` and `V` being the global arrays on every rank or each rank's
        :class:`nlsepy.Slab` from :func:`nlsepy.scatter`.  :attr:`psi` is then
        the local slab (:attr:`local_slice`), :meth:`gather` assembles the
        global state, observables are global, and every method is
        collective (every rank calls it).  Needs mpi4py and nlsepy's MPI
        layer (see the README).

    Attributes
    ----------
    a, s, spacing, scheme, bc, dtype, backend, max_dt
        Fixed when the solver is made (read-only; assigning raises
        ``AttributeError``): make a new solver to change them.
    V : numpy.ndarray or None
        A copy of the potential; assigning checks the new one, copies it and
        applies it from the next step.
    dt : float
        Time step; assigning checks it against :attr:`max_dt`.
    t : float
        Current time; always that of the state (also after Ctrl-C).

    Notes
    -----
    :meth:`step` and :meth:`run` work in calls of about 0.1 s: Ctrl-C raises
    ``KeyboardInterrupt`` within about that time, with :attr:`t`, the step
    counter and :attr:`psi` consistent, and the solver can go on (continuing
    gives, bit for bit, what an uninterrupted call gives).  The memory the
    solver takes is checked before it is allocated (``MemoryError``).

    Examples
    --------
    >>> import nlsepy as nl
    >>> psi0, h, p = nl.examples.dark_soliton(length=20.0, h=0.05)
    >>> sim = nl.NLSE(psi0, h, a=p["a"], s=p["s"], scheme="2shoc", bc="msd")
    >>> frames = sim.run(1.0, frames=4)
    >>> len(frames)
    5
    """

    a = _Fixed("Dispersion coefficient (read-only).")
    s = _Fixed("Nonlinearity coefficient (read-only).")
    spacing = _Fixed("Grid spacing per axis (read-only).")
    scheme = _Fixed("Spatial scheme, 'cd' or '2shoc' (read-only).")
    bc = _Fixed("Boundary condition (read-only).")
    dtype = _Fixed("Complex dtype of the state (read-only).")
    backend = _Fixed("Backend, 'cpu' or 'cuda' (read-only).")
    max_dt = _Fixed("Linear stability bound of the time step (read-only).")

    def __init__(self, psi0: Any, spacing: Union[float, Sequence[float]], a: float = 1.0,
                 s: float = -1.0, V: Optional[Any] = None, scheme: str = "2shoc",
                 bc: str = "msd", dt: Optional[float] = None, dtype: Any = None,
                 force: bool = False, backend: str = "auto", comm: Any = None) -> None:
        self._comm = None if comm is None else _dist.as_comm(comm)
        if self._comm is None:
            self._setup(psi0, spacing, a, s, V, scheme, bc, dt, dtype, force, backend)
            return
        # every rank checks its part; one rank's bad input is every rank's
        # error (the collective calls come before and after, never inside)
        capsule = _dist.capsule(self._comm)
        local = _dist.agree(self._comm, lambda: self._setup(
            psi0, spacing, a, s, V, scheme, bc, dt, dtype, force, backend))
        _same_everywhere(self._comm, {
            "the grid's shape": self._shape, "spacing": self.spacing, "a": self.a, "s": self.s,
            "scheme": self.scheme, "bc": self.bc, "dt": self._dt, "dtype": str(self.dtype),
            "backend": self.backend, "force": self._force, "V given": local[1] is not None})
        if self.backend == "cuda":
            self._device = _dist.select_gpu(self._comm)
        _dist.agree(self._comm, lambda: self._solver.create(capsule))
        self._solver.start(*local)  # the halos of psi and V
        if local[1] is not None:
            local[1].flags.writeable = False
        self._V = local[1]

    def _setup(self, psi0: Any, spacing: Any, a: Any, s: Any, V: Any, scheme: Any, bc: Any,
               dt: Any, dtype: Any, force: Any, backend: Any) -> Any:
        slab = psi0 if isinstance(psi0, _dist.Slab) else None
        if slab is not None and self._comm is None:
            raise ValueError("psi0 is an nl.Slab (one rank's part of a distributed array): "
                             "pass comm= as well")
        arr = np.asarray(slab.data if slab is not None else psi0)
        if arr.dtype.kind not in "fc" or arr.dtype.itemsize > 16:
            raise TypeError(f"psi0 must be a float or complex array (float32/64, "
                            f"complex64/128), got dtype {arr.dtype}")
        if arr.ndim not in (1, 2, 3):
            raise ValueError(f"psi0 must be 1-, 2- or 3-dimensional, got ndim={arr.ndim} "
                             f"(shape {arr.shape})")
        if dtype is None:
            dtype = np.complex64 if arr.dtype in (np.float32, np.complex64) else np.complex128
        dtype = _complex_dtype(dtype)
        fixed: Dict[str, Any] = {}
        self._fixed = fixed
        fixed["scheme"] = _name("scheme", scheme, _SCHEMES)
        fixed["bc"] = _name("bc", bc, _BCS, _BC_ALIASES)
        if self.bc == "one-sided" and arr.ndim != 1:
            raise ValueError(f"bc='one-sided' is only available in 1D, psi0 has ndim={arr.ndim}")
        fixed["a"] = _check_real("a", a, positive=True)
        fixed["s"] = _check_real("s", s)
        fixed["spacing"] = _spacing(spacing, arr.ndim)
        fixed["dtype"] = dtype
        self._shape = tuple(int(n) for n in (slab.shape if slab is not None else arr.shape))
        core = _core()
        nmin = core.fd_min_points(_SCHEMES[self.scheme], _BCS[self.bc])
        for q, n in enumerate(self._shape):
            if n < nmin:
                raise ValueError(f"grid too small for the stencil: psi0 has {n} points on axis "
                                 f"{q}, scheme={self.scheme!r} with bc={self.bc!r} needs at "
                                 f"least {nmin}")
        fixed["backend"] = _backend.resolve(backend, "NLSE")
        fixed["max_dt"] = stability_bound(self.spacing, arr.ndim, self.a, self.scheme)
        self._dt = self._check_dt(DT_SAFETY * self.max_dt if dt is None else dt, force)
        self._force = bool(force)
        self._solver_dt = self._dt
        self._t_base = 0.0   # time at the last change of step size
        self._k = 0          # steps since then
        self._steps = 0      # steps since creation
        self._slots_ready = False      # CUDA frame slots allocated
        self._fetcher = None           # worker bringing GPU frames to the host
        self._pending = [None, None]   # frames in flight, per device slot
        self._slot = 0
        self._V: Optional[np.ndarray] = None
        code = core.COMPLEX64 if dtype == np.complex64 else core.COMPLEX128
        if self._comm is not None:
            return self._setup_slab(arr, slab, V, code)
        if not np.all(np.isfinite(arr)):
            raise ValueError("psi0 contains non-finite values (NaN or Inf)")
        self._require_memory(V is not None)
        self._solver = _backend.module(self.backend).FD(
            self._shape, self.spacing, self.a, self.s, self._dt, _SCHEMES[self.scheme],
            _BCS[self.bc], code)
        self._solver.set_state(np.ascontiguousarray(arr, dtype=dtype))
        self.V = V
        return None

    def _setup_slab(self, arr: np.ndarray, slab: Optional[_dist.Slab], V: Any,
                    code: int) -> Tuple[np.ndarray, Optional[np.ndarray]]:
        """This rank's part of a distributed solver (no collective calls):
        the slab handle with its halos, the local state and potential."""
        layout = _dist.Layout.of(self._comm, self._shape)
        local = _local_rows(arr, slab, layout, "psi0")
        if not np.all(np.isfinite(local)):
            raise ValueError(f"psi0 contains non-finite values (NaN or Inf) in rows "
                             f"{layout.start} .. {layout.start + layout.count - 1}")
        v_local = None
        if V is not None:
            v_slab = V if isinstance(V, _dist.Slab) else None
            v_arr = np.asarray(v_slab.data if v_slab is not None else V)
            if v_slab is not None and v_slab.shape != self._shape:
                raise ValueError(f"V must have the grid's shape {self._shape}, got a slab of "
                                 f"{v_slab.shape}")
            if v_slab is None and v_arr.shape != self._shape:
                raise ValueError(f"V must have the grid's shape {self._shape}, got {v_arr.shape}")
            v_local = _potential(_local_rows(v_arr, v_slab, layout, "V"), layout.local_shape,
                                 self.dtype).copy()
        depth = _halo_rows(self.scheme)
        if layout.size > 1:
            layout.require_rows(depth, f"the {self.scheme.upper()} stencil over one RK4 step "
                                       f"(a halo of {depth} rows)")
        self._solver = _SlabFD(_backend.module(self.backend), layout, depth, self.bc == "periodic",
                               (self.spacing, self.a, self.s, self._dt, _SCHEMES[self.scheme],
                                _BCS[self.bc], code), self)
        return np.ascontiguousarray(local, dtype=self.dtype), v_local

    # ------------------------------------------------------------------ state
    @property
    def shape(self) -> Tuple[int, ...]:
        """Grid shape."""
        return self._shape

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.spacing)

    def _state_bytes(self) -> int:
        return int(math.prod(self._shape)) * self.dtype.itemsize

    def _what(self) -> str:
        return (f"NLSE on a grid of shape {self._shape} ({self.dtype.name}, "
                f"scheme={self.scheme!r}, backend={self.backend!r})")

    def _require_memory(self, with_V: bool) -> None:
        """Check that the solver's arrays fit before any is allocated: the
        RK4 work arrays, the potential (the solver's copy and ours) and one
        state-sized staging copy on the host."""
        state = self._state_bytes()
        v = state // 2 if with_V else 0
        arrays = _grid_arrays(self.scheme, self.backend)
        what = f"{self._what()}, {arrays} state arrays{' and V' if with_V else ''},"
        if self.backend == "cuda":
            _guard.require_memory(arrays * state + v, what, backend="cuda",
                                  host_bytes=state + v)
        else:
            _guard.require_memory(arrays * state + 2 * v + state, what)

    @property
    def psi(self) -> np.ndarray:
        """A copy of the current state."""
        return self._solver.get_state()

    @psi.setter
    def psi(self, value: Any) -> None:
        if self._comm is not None:  # collective: every rank assigns
            local = _dist.agree(self._comm, lambda: self._local_state(value))
            self._solver.set_state(local)
            return
        arr = np.asarray(value)
        if arr.dtype.kind not in "fc":
            raise TypeError(f"psi must be a float or complex array, got dtype {arr.dtype}")
        if arr.shape != self._shape:
            raise ValueError(f"psi must have shape {self._shape}, got {arr.shape}")
        self._solver.set_state(np.ascontiguousarray(arr, dtype=self.dtype))

    def _local_state(self, value: Any) -> np.ndarray:
        """This rank's rows of a new state: the global array, this rank's
        slab (``local_shape``) or its nl.Slab."""
        lay = self._solver.layout
        slab = value if isinstance(value, _dist.Slab) else None
        arr = np.asarray(slab.data if slab is not None else value)
        if arr.dtype.kind not in "fc":
            raise TypeError(f"psi must be a float or complex array, got dtype {arr.dtype}")
        if slab is None and arr.shape == lay.local_shape and arr.shape != lay.shape:
            local = arr
        else:
            local = _local_rows(arr, slab, lay, "psi")
        if not np.all(np.isfinite(local)):
            raise ValueError("psi contains non-finite values (NaN or Inf)")
        return np.ascontiguousarray(local, dtype=self.dtype)

    @property
    def V(self) -> Optional[np.ndarray]:
        """The static potential (None for V = 0)."""
        return None if self._V is None else self._V.copy()

    @V.setter
    def V(self, value: Any) -> None:
        if self._comm is not None:  # collective: every rank assigns the global V
            def local() -> Optional[np.ndarray]:
                if value is None:
                    return None
                v_slab = value if isinstance(value, _dist.Slab) else None
                arr = np.asarray(v_slab.data if v_slab is not None else value)
                rows = _local_rows(arr, v_slab, self._solver.layout, "V")
                return _potential(rows, self._solver.layout.local_shape, self.dtype).copy()
            v = _dist.agree(self._comm, local)
            self._solver.set_potential(v)
            if v is not None:
                v.flags.writeable = False
            self._V = v
            return
        if value is None:
            self._solver.set_potential(None)
            self._V = None
            return
        arr = _potential(value, self._shape, self.dtype)
        if arr is value or arr.base is not None:  # the caller's memory: own a copy
            arr = arr.copy()
        arr.flags.writeable = False
        self._solver.set_potential(arr)
        self._V = arr

    @property
    def t(self) -> float:
        """Current time."""
        return self._t_base + self._k * self._solver_dt

    @property
    def dt(self) -> float:
        """Time step used by :meth:`step` (and the largest used by :meth:`run`)."""
        return self._dt

    @dt.setter
    def dt(self, value: float) -> None:
        self._dt = self._check_dt(value, self._force)

    def _check_dt(self, dt: Any, force: bool) -> float:
        dt = _check_real("dt", dt, positive=True)
        if dt > self.max_dt and not force:
            raise ValueError(f"dt={dt:g} exceeds the linear stability bound {self.max_dt:g} "
                             f"of RK4+{self.scheme.upper()} (NLSEmagic eqs. 18-19); use a "
                             f"smaller dt or pass force=True")
        return dt

    # --------------------------------------------------------------- stepping
    def _use_dt(self, dt: float) -> None:
        if dt != self._solver_dt:
            self._t_base = self.t
            self._k = 0
            self._solver.set_dt(dt)
            self._solver_dt = dt

    def _advance(self, n: int, dt: float, t_final: Optional[float] = None) -> None:
        """Take `n` steps of `dt` in calls of about 0.1 s, each booked on
        ``t`` and the step counter as it returns; after the last, set the time
        to `t_final` (the run's end, free of rounding).  Ctrl-C raises
        ``KeyboardInterrupt`` between two calls, leaving the time at the last
        step taken (never at `t_final`)."""
        self._use_dt(dt)

        def work(k: int) -> None:
            done, blew_up = self._solver.step(int(k))
            self._k += done
            self._steps += done
            if blew_up:
                t_bad = self.t + dt
                raise BlowUpError(
                    f"the state became non-finite at step {self._steps + 1} (t = {t_bad:g}); "
                    f"the solver keeps the last finite state at t = {self.t:g}. Reduce dt "
                    f"(now {dt:g}, stability bound {self.max_dt:g}) or check the parameters.",
                    step=self._steps + 1, t=t_bad, last_good=(self.t, self.psi))

        _guard.chunked(int(n), work, comm=self._comm)
        if t_final is not None:  # reached only when every step was taken
            self._t_base, self._k = float(t_final), 0

    def _plan(self, t_end: float) -> Tuple[int, float]:
        return runner.plan_steps(self.t, t_end, self._dt)

    def _frame_grid(self) -> runner.FrameGrid:
        """Coordinates of the frames: centred on the box as
        :func:`nlsepy.examples.grid` lays them out (this rank's rows when
        distributed)."""
        shift = [n / 2 if self.bc == "periodic" else (n - 1) / 2 for n in self._shape]
        coords = tuple((np.arange(n) - c) * h for n, c, h in zip(self._shape, shift, self.spacing))
        return runner.FrameGrid(axes=("x", "y", "z")[:self.ndim],
                                coords=tuple(x[s] for x, s in zip(coords, self.local_slice)),
                                length="dimensionless", time="dimensionless", model="NLSE")

    def _snapshot(self) -> Any:
        if self.backend != "cuda" or self._comm is not None:
            return self.psi
        # GPU: copy the state into one of two device slots in stream order and
        # bring it to the host on a worker thread while the next chunk runs
        if self._fetcher is None:
            from concurrent.futures import ThreadPoolExecutor
            self._fetcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nlsepy-frames")
        slot = self._slot
        if self._pending[slot] is not None:
            self._pending[slot].result()  # the slot's previous frame has landed
        self._solver.snapshot(slot)
        self._slots_ready = True
        self._pending[slot] = self._fetcher.submit(self._solver.fetch, slot)
        self._slot ^= 1
        return self._pending[slot]

    @property
    def last_timings(self) -> Dict[str, float]:
        """A distributed solver's seconds on this rank over the steps of the
        last :meth:`step` or :meth:`run` call: ``step`` (its slab's kernels),
        ``wait`` (the blow-up vote: waiting for the slowest rank),
        ``exchange`` (the halo rows: device-host copies and MPI_Sendrecv)
        and ``steps``.  Empty for one process."""
        return {} if self._comm is None else dict(self._solver.timings)

    def step(self, n: int = 1) -> "NLSE":
        """Advance `n` RK4 steps of size :attr:`dt`.

        Parameters
        ----------
        n : int, optional
            Number of steps (>= 0).

        Returns
        -------
        NLSE
            ``self``, for chaining.

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
            self._solver.timings.update(step=0.0, wait=0.0, exchange=0.0, steps=0)
        self._advance(int(n), self._dt)
        return self

    def run(self, t_end: float, frames: int = 10, callback: Optional[Callable] = None,
            progress: bool = False, checkpoint: Optional[Union[str, os.PathLike]] = None,
            output: Optional[Union[str, os.PathLike]] = None) -> runner.Frames:
        """Advance to `t_end` in `frames` chunks, returning snapshots.

        The run takes the fewest equal steps no larger than :attr:`dt` that end
        exactly at `t_end`; chunk boundaries fall on whole steps, so the result
        does not depend on `frames`.

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
            h5py: ``pip install 'nlsepy[hdf5]'``) as they are taken:
            ``psi`` over ``(t, x[, y[, z]])``, the series ``norm``,
            ``energy`` and ``steps``, the coordinates ``x_i = i h`` and every
            parameter; flushed after each frame, readable after Ctrl-C, read
            back by :func:`nlsepy.open_run`.  Distributed: rank 0 gathers
            each frame (:meth:`gather`) and writes the file with h5py
            (without MPI).

        Returns
        -------
        Frames
            ``(t, psi)`` snapshots, with ``.t`` and ``.psi`` array views.

        Raises
        ------
        MemoryError
            Before any step, when the ``frames + 1`` snapshots (or, on CUDA,
            the two device frame slots) do not fit.
        KeyboardInterrupt
            On Ctrl-C, within about 0.1 s.  The run does not return: the
            frames taken so far are the exception's ``frames`` attribute, the
            solver stands at its last step (consistent, and it can go on) and
            the checkpoint file holds the last whole chunk.
        """
        if self.backend == "cuda" and not self._slots_ready:
            state = self._state_bytes()
            _guard.require_memory(2 * state, f"{self._what()}, 2 device frame slots,",
                                  backend="cuda", host_bytes=_CUDA_STAGING_BYTES)
        return runner.run(self, t_end, frames=frames, callback=callback, progress=progress,
                          checkpoint=checkpoint, output=output)

    def _record_header(self) -> Any:
        """What a run file holds besides the frames (distributed: every rank,
        with its rows of V as a slab, nothing gathered)."""
        from ._hdf5 import RunHeader
        axes = ("x", "y", "z")[: self.ndim]
        V = self._V
        slabs = {} if self._comm is None or V is None else {"V": V}
        params = {"a": self.a, "s": self.s, "spacing": self.spacing, "scheme": self.scheme,
                  "bc": self.bc, "dt": self._dt, "max_dt": self.max_dt, "force": self._force,
                  "dtype": self.dtype.name, "shape": self._shape}
        if not slabs:
            params["V"] = V
        coords = {ax: ((ax,), np.arange(n) * h, "length unit of the equation",
                       f"grid position {ax}_i = i h_{ax} from the first point")
                  for ax, n, h in zip(axes, self._shape, self.spacing)}
        return RunHeader(
            model="NLSE", parameters=params, backend=self.backend, slabs=slabs,
            units=("dimensionless: those of i dPsi/dt + a Lap Psi - V Psi + s |Psi|^2 Psi = 0 "
                   "(t, x and Psi as the equation is written)"),
            coords=coords, dims={"psi": axes, "norm": (), "energy": (), "steps": ()},
            var_units={"t": "time unit of the equation", "psi": "", "norm": "",
                       "energy": "", "steps": ""},
            long_names={"t": "time", "psi": "the state Psi",
                        "norm": "N = sum |Psi|^2 dV",
                        "energy": "H = sum [a |grad Psi|^2 + V |Psi|^2 - (s/2) |Psi|^4] dV",
                        "steps": "RK4 steps since the solver was made"})

    def _record_scalars(self) -> Dict[str, Any]:
        """The series a run file keeps per frame (collective when distributed)."""
        norm, energy = self._solver.observe()
        return {"norm": float(norm), "energy": float(energy), "steps": int(self._steps)}

    # ------------------------------------------------------------ observables
    def norm(self) -> float:
        """``N = sum |Psi|^2 dV`` (the discrete L2 norm squared)."""
        return self._solver.observe()[0]

    def energy(self) -> float:
        """``H = sum [a |grad Psi|^2 + V |Psi|^2 - (s/2) |Psi|^4] dV``.

        With periodic boundaries the kinetic part is ``-a Re<Psi, L Psi>`` with
        the scheme's own Laplacian ``L``, the quantity the semi-discrete system
        conserves; otherwise forward differences over the grid's links.
        """
        return self._solver.observe()[1]

    def bytes_per_step(self) -> float:
        """Bytes the CPU kernels move through memory per step (traffic model)."""
        return self._solver.bytes_per_point_step() * int(np.prod(self._shape))

    # ------------------------------------------------------------ checkpoints
    def save(self, path: Union[str, os.PathLike]) -> None:
        """Write a checkpoint (``.npz``), whole or not at all.

        The file holds the state, every parameter and the counters (time,
        steps), so that :meth:`load` followed by stepping gives, bit for bit,
        what this solver gives by stepping on.

        Parameters
        ----------
        path : path-like
            Destination file.
        """
        real = np.float32 if self.dtype == np.complex64 else np.float64
        V = self._V if self._V is not None else np.zeros(0, real)
        scalars = dict(t=self.t, steps=self._steps, t_base=self._t_base, k=self._k,
                       solver_dt=self._solver_dt, spacing=np.asarray(self.spacing), a=self.a,
                       s=self.s, dt=self._dt, scheme=self.scheme, bc=self.bc, force=self._force)
        if self._comm is not None:
            _dist.save_parts(os.fspath(path), "NLSE", self._solver.layout,
                             {"psi": self.psi, "V": V}, **scalars)
            return
        _guard.save_checkpoint(path, "NLSE", psi=self.psi, V=V, **scalars)

    _KEYS = {
        "psi": _guard.Key("array", "c", ndim=(1, 2, 3)),
        "t": _guard.Key("float"), "steps": _guard.Key("int"),
        "t_base": _guard.Key("float"), "k": _guard.Key("int"),
        "solver_dt": _guard.Key("float"),
        "spacing": _guard.Key("array", "f", ndim=(1,)),
        "a": _guard.Key("float"), "s": _guard.Key("float"), "dt": _guard.Key("float"),
        "scheme": _guard.Key("str", choices=tuple(_SCHEMES)),
        "bc": _guard.Key("str", choices=tuple(_BCS)),
        "force": _guard.Key("bool"),
        "V": _guard.Key("array", "f", ndim=(1, 2, 3)),
    }

    @classmethod
    def load(cls, path: Union[str, os.PathLike], backend: str = "auto",
             comm: Any = None) -> "NLSE":
        """Restart from a checkpoint written by :meth:`save`.

        Parameters
        ----------
        path : path-like
            Checkpoint file.
        backend : {"auto", "cpu", "cuda"}, optional
            Backend of the new solver.
        comm : mpi4py communicator, optional
            Load into a solver distributed over `comm` (every rank calls
            this).  Any checkpoint loads with any number of ranks: one
            written by one process, or the index of one written by N ranks
            (its parts lie beside it), with M ranks or by one process.

        Returns
        -------
        NLSE
            A solver at the checkpoint's time, step count and state.

        Raises
        ------
        FileNotFoundError
            No such file.
        ValueError
            The file is not a whole NLSE checkpoint (empty, truncated, another
            kind of file or another model's checkpoint) or holds a value the
            solver refuses (non-finite time, wrong shape or dtype, unknown
            scheme or boundary condition); the message names the file.
        """
        spath = os.fspath(path)
        backend = _backend.resolve(backend, "NLSE")  # the caller's argument, not the file's
        if comm is not None:
            comm = _dist.as_comm(comm)
            d = _dist.agree(comm, lambda: cls._read(spath, comm))
        else:
            d = cls._read(spath, None)

        def bad(what: str) -> ValueError:
            return ValueError(f"{spath}: {what}")

        for name in ("steps", "k"):
            if d[name] < 0:
                raise bad(f"entry {name!r} must be >= 0, got {d[name]}")
        if d["k"] > d["steps"]:
            raise bad(f"entry 'k' ({d['k']}) exceeds 'steps' ({d['steps']})")
        if d["solver_dt"] <= 0:
            raise bad(f"entry 'solver_dt' must be > 0, got {d['solver_dt']!r}")
        t = d["t_base"] + d["k"] * d["solver_dt"]
        if t != d["t"]:
            raise bad(f"entry 't' = {d['t']!r} does not match t_base + k * solver_dt = {t!r}")
        V = d["V"] if d["V"] is not None and d["V"].size else None
        psi = d["psi"]
        if comm is not None:
            shape = d["global_shape"]
            start = _dist.Layout.of(comm, shape).start
            psi = _dist.Slab(psi, start, shape)
            V = None if V is None else _dist.Slab(V, start, shape)
        try:
            sim = cls(psi, tuple(d["spacing"].tolist()), a=d["a"], s=d["s"], V=V,
                      scheme=d["scheme"], bc=d["bc"], dt=d["dt"], dtype=d["psi"].dtype,
                      force=d["force"], backend=backend, comm=comm)
        except (TypeError, ValueError) as exc:
            raise bad(str(exc)) from None
        if not sim._force and d["solver_dt"] > sim.max_dt * (1 + 1e-6):
            raise bad(f"entry 'solver_dt' = {d['solver_dt']:g} exceeds the stability bound "
                      f"{sim.max_dt:g} of the saved parameters")
        sim._use_dt(d["solver_dt"])
        sim._t_base, sim._k, sim._steps = d["t_base"], d["k"], d["steps"]
        return sim

    @classmethod
    def _read(cls, spath: str, comm: Any) -> Dict[str, Any]:
        """The checkpoint's entries; with `comm`, the state and potential
        rows of this rank only (from a single file or from parts)."""
        slabs = {"psi": cls._KEYS["psi"], "V": cls._KEYS["V"]}
        scalars = {k: v for k, v in cls._KEYS.items() if k not in slabs}
        if _dist.is_parts_index(spath):
            rows = None
            if comm is not None:
                d0 = _dist.load_parts(spath, "NLSE", scalars, {}, rows=(0, 0))
                lay = _dist.Layout.of(comm, d0["global_shape"])
                rows = (lay.start, lay.count)
            return _dist.load_parts(spath, "NLSE", scalars, slabs, rows=rows)
        d = _guard.load_checkpoint(spath, "NLSE", cls._KEYS)
        d["global_shape"] = tuple(d["psi"].shape)
        if comm is not None:
            sl = _dist.Layout.of(comm, d["psi"].shape).local_slice
            d["psi"] = d["psi"][sl]
            if d["V"].size:
                if d["V"].shape != d["global_shape"]:
                    raise ValueError(f"{spath}: entry 'V' has shape {d['V'].shape}, the state "
                                     f"{d['global_shape']}")
                d["V"] = d["V"][sl]
        return d

    # ------------------------------------------------------------ distributed
    @property
    def comm(self) -> Any:
        """The communicator of a distributed solver (None for one process)."""
        return self._comm

    @property
    def local_slice(self) -> Tuple[slice, ...]:
        """This rank's part of the global grid: ``global_array[sim.local_slice]``
        is what :attr:`psi` holds (the whole grid for one process)."""
        if self._comm is None:
            return tuple(slice(None) for _ in self._shape)
        return self._solver.layout.local_slice

    @property
    def comm_info(self) -> Dict[str, Any]:
        """How a distributed solver is laid out and communicates (empty for
        one process)."""
        if self._comm is None:
            return {}
        sol = self._solver
        lay = sol.layout
        info = _dist.info(self._comm)
        return {"ranks": lay.size, "rank": lay.rank, "axis": 0,
                "rows": (lay.start, lay.count), "counts": lay.counts.tolist(),
                "halo_rows": sol.depth,
                "exchange": ("device to device through CUDA IPC (one node), once per step"
                             if sol.ipc else "MPI_Sendrecv of host buffers, once per step" +
                             (" (device rows staged through pinned host memory)"
                              if self.backend == "cuda" else "")) +
                            (f"; no CUDA IPC: {sol.ipc_why}" if sol.ipc_why else ""),
                "reduction": "rank-ordered sum (MPI_Allgather)", "mpi": info["library"],
                "cuda_aware_mpi": info["cuda_aware"]}

    def gather(self, root: Optional[int] = 0) -> Optional[np.ndarray]:
        """The global state from every rank's slab (collective).

        Parameters
        ----------
        root : int or None, optional
            The rank that receives it (the others get None), or None for
            every rank.

        Returns
        -------
        numpy.ndarray or None
        """
        if self._comm is None:
            return self.psi
        _dist.check_root(self._comm, root)
        return _dist.gather_rows(self._solver.layout, self.psi, root)

    def __repr__(self) -> str:
        return (f"NLSE(shape={self._shape}, scheme={self.scheme!r}, bc={self.bc!r}, "
                f"a={self.a:g}, s={self.s:g}, dt={self._dt:g}, t={self.t:g}, "
                f"dtype={self.dtype.name}, backend={self.backend!r})")
