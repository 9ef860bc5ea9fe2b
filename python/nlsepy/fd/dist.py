"""The distributed part of the NLSE: one rank's slab of rows of axis 0, with
halos as deep as one RK4 step's stencil reaches (``nl.NLSE(..., comm=)``)."""

from __future__ import annotations

import time
from typing import Any, Dict, Optional, Tuple

import numpy as np

from ..common import dist as _dist
from ..common import guard as _guard

__all__ = ["SlabFD", "grid_arrays", "halo_rows", "local_rows", "same_everywhere"]


def grid_arrays(scheme: str, backend: str, periodic: bool) -> int:
    """Grid-sized complex arrays a solver allocates: Psi, acc, ta, tb (RK4,
    csrc/fd/fd.c and cuda/fd/fd.cu), plus D for the two-step 2SHOC on the
    CPU (closed boundaries; periodic grids compose the two steps)."""
    return 5 if (scheme == "2shoc" and backend != "cuda" and not periodic) else 4


def halo_rows(scheme: str) -> int:
    """Rows of halo a slab needs for one RK4 step: the stencil's reach (1 for
    CD, 2 for 2SHOC) for each of the four stages."""
    return 4 * (1 if scheme == "cd" else 2)


def local_rows(arr: np.ndarray, slab: Optional[_dist.Slab], layout: _dist.Layout,
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


def same_everywhere(comm: Any, values: Dict[str, Any]) -> None:
    """Every rank was given the same parameters (else the same ValueError on
    every rank, naming the first rank and parameter that differ from rank 0)."""
    everyone = comm.allgather(values)
    for rank, theirs in enumerate(everyone):
        for name, value in values.items():
            if theirs[name] != everyone[0][name]:
                raise ValueError(f"rank {rank} was given {name} = {theirs[name]!r}, rank 0 "
                                 f"{everyone[0][name]!r}: every rank must pass the same "
                                 f"parameters")


class SlabFD:
    """One rank's part of a distributed NLSE, with the interface of the
    extension's ``FD`` handle.

    The rank holds its rows of axis 0 plus `depth` halo rows on each side
    that has a neighbour (both sides for periodic boundaries), in one
    single-process handle over the extended slab.  One RK4 step reaches
    `depth` rows, so after each step the owned rows are exactly what the
    whole-grid solver gives (the same arithmetic, point by point), and the
    halos are refreshed from the neighbours (the table's halo swap) before the
    next.  The slab's own edges are stepped with the global boundary
    condition, which only affects the halo rows, overwritten each step.
    Observables sum the owned rows only, reduced in rank order.
    """

    def __init__(self, module: Any, layout: _dist.Layout, depth: int, periodic: bool,
                 args: Tuple[Any, ...], owner: Any) -> None:
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
        # halo exchange (device-host copies and the table's halo swap)
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
        arrays = grid_arrays(owner.scheme, owner.backend, self.periodic)
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
            _dist.halo_exchange(self.capsule, self.layout, np.ascontiguousarray(owned[:d]),
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
        _dist.halo_exchange(self.capsule, self.layout, lower, upper, recv_lo, recv_hi,
                            self.periodic)
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

    def fused_bytes_per_point_step(self) -> float:
        return self.h.fused_bytes_per_point_step()

    def set_kernel(self, kernel: int) -> None:
        self.h.set_kernel(kernel)

    def last_kernel(self) -> int:
        return self.h.last_kernel()
