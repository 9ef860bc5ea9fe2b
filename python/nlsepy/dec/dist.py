"""One rank's z slab of a distributed ``DecGPE`` (source 001, section 4.2).

The unknowns are ordered with the layers of blocks along z slowest, so a
z slab is one contiguous range.  Each rank owns the layers of its slab
(``_dist.Layout`` over the ``(nz, layer)`` view of the state) and holds one
halo layer on each side that has a neighbour (both sides for periodic
boundaries): the source's two-slice overlap between consecutive devices.
The eq. 8 operator reaches one layer of blocks, so one halo layer covers a
leapfrog step (eq. 12) or an imaginary-time step; the halos are refreshed
from the neighbours after every step: on GPU ranks of one node device to
device, in real time by the handle itself (``nlse_dec_slab_connect``: each
step's edge layers computed first and copied into the neighbours' halo
layers, mapped by CUDA IPC, while the interior layers compute; the next
step waits on the device for its halos), after other steps through
mailboxes (``_dist.IpcHalo``: each rank's edge layers copied into its
device mailboxes, the neighbours' mailboxes copied into the halo layers),
otherwise through host memory (in real time by the handle, through the
table's non-blocking swap, the edge layers staged in pinned memory while the
interior layers compute; after other steps the same swap, started and
finished at once).  On CPU
ranks the C handle swaps the halos of its leapfrog steps itself (the
swap of the reduction table, non-blocking MPI): it computes its first and
last own layers, sends them, and computes the interior while they travel
(source 001, section 4.2).  All move the same bytes, so the results are
the same bits.

The rank's extended slab is one single-process C handle (on a GPU rank,
made on the rank's own GPU, which ``DecGPE`` selects first) with
``set_slab``: the kernels compute the own layers only, with the trap at
the global layers, so the own part of every step is what the whole-grid
solver computes, bit for bit.  With the reduction table of ``set_comm``
the imaginary-time norm is summed over every rank's own layers in rank
order, and every rank keeps or drops the same step on a blow-up.  The
RK4 step that starts the leapfrog is taken stage by stage
(``combine``), the halos of the stage states refreshed between stages.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from ..common import dist as _dist

__all__ = ["SlabDec", "HALO_LAYERS", "comm_info"]

#: halo layers of blocks on each side: the reach of eq. 8 in one step
HALO_LAYERS = 1


class SlabDec:
    """One rank's part of a distributed DecGPE, with the interface of the
    extension's ``Dec`` handle (state arguments and results are the rank's
    own layers; every method that moves halos is collective).

    Parameters
    ----------
    make : callable
        ``make(layers)`` builds the single-process handle of `layers` layers
        of blocks along z.
    layout : nlsepy.common.dist.Layout
        The slabs of the ``(nz, cells per layer)`` view of the state.
    periodic : bool
        Periodic boundaries (the first and last ranks are neighbours).
    dt : float
        The handle's time step (for the RK4 start).
    device : module, optional
        On GPU ranks, nlsepy's CUDA extension (``device_alloc``, ``ipc_*``):
        the halos then go device to device when every rank is on one node
        (:class:`nlsepy.common.dist.IpcHalo`; ``NLSEPY_HALO=host`` keeps them on
        the host path).  None: through host memory.
    """

    def __init__(self, make: Callable[[int], Any], layout: _dist.Layout, periodic: bool,
                 dt: float, device: Any = None) -> None:
        self.layout, self.periodic, self.dt = layout, periodic, float(dt)
        self.comm = layout.comm
        self.lo = self._lower_halo(layout.rank)
        self.hi = HALO_LAYERS if layout.size > 1 and (periodic or layout.rank < layout.size - 1) \
            else 0
        self.count, self.plane = layout.count, int(layout.shape[1])
        self.layers = self.count + self.lo + self.hi
        self.own = slice(self.lo * self.plane, (self.lo + self.count) * self.plane)
        self.h = make(self.layers)
        self.h.set_slab(layout.start - self.lo, self.lo, self.count)
        self.capsule: Any = None
        self.seconds = 0.0  # the kernels' time of the last step() or imaginary()
        # seconds since the last reset: the handle's steps (kernels and the
        # agreed blow-up check, so waiting for the slowest rank too) and the
        # halo exchanges after them
        self.timings: Dict[str, float] = {"step": 0.0, "exchange": 0.0, "steps": 0}
        self.device = device
        self.ipc: Any = None  # the device-to-device exchange, set up at the first one
        self.ipc_why = ""     # why not, when not
        self._put: Any = None
        self._get: Any = None
        self.link = False      # real-time steps overlapped with device-to-device halos
        self.link_why = ""     # why not, on GPU ranks, when not
        self._mapped: List[int] = []  # the neighbours' buffers mapped for the link

    def _lower_halo(self, rank: int) -> int:
        """Halo layers below the own layers of `rank`'s slab."""
        many = self.layout.size > 1
        return HALO_LAYERS if many and (self.periodic or rank > 0) else 0

    @property
    def halo(self) -> str:
        """How the halo layers move: "cuda-ipc" (device to device) or "host"."""
        return "cuda-ipc" if self.ipc else "host"

    def connect(self) -> None:
        """Hand the handle the reduction table over the communicator
        (collective: it duplicates the communicator)."""
        self.capsule = _dist.capsule(self.comm)
        self.h.set_comm(self.capsule)

    # ---------------------------------------------------------------- halos
    def _swap(self, lower: np.ndarray, upper: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        recv_lo, recv_hi = np.empty_like(lower), np.empty_like(upper)
        _dist.halo_exchange(self.capsule, self.layout, lower, upper, recv_lo, recv_hi,
                            self.periodic)
        return recv_lo, recv_hi

    def _open_ipc(self) -> None:
        """Set up the device-to-device exchange (collective) and the two
        copies it calls, made once: no Python objects are made per step."""
        nbytes = self.h.get_layers(0, HALO_LAYERS).nbytes  # the halo's bytes, once
        halo = _dist.IpcHalo(self.comm, self.device, nbytes, bool(self.lo), bool(self.hi))
        self.ipc = halo if halo.open() else False
        self.ipc_why = halo.why
        if not self.ipc:
            return
        h, k = self.h, HALO_LAYERS
        edge = (self.lo, self.lo + self.count - k)            # my first and last own layers
        into = {"lower": 0, "upper": self.lo + self.count}    # the halo layers
        layers_to, layers_from = h.layers_to, h.layers_from

        def put(side: int, address: int) -> None:
            layers_to(edge[side], k, address)

        def get(which: str, address: int) -> None:
            layers_from(into[which], k, address)

        self._put, self._get = put, get
        self._open_link()

    def _open_link(self) -> None:
        """Connect the handle to its neighbours' state buffers and arrival
        words (collective), so that its real-time steps send their edge
        layers device to device while the interior layers compute
        (``nlse_dec_slab_connect``).  Where any rank cannot, none does
        (:attr:`link_why` says why): the steps then go one a call with a
        halo exchange after each."""
        if not hasattr(self.h, "slab_buffers"):  # the CPU handle overlaps its own swaps
            return
        comm, rank, size = self.comm, self.layout.rank, self.layout.size
        why, mine = "", None
        try:
            mine = tuple(self.device.ipc_handle(a) for a in self.h.slab_buffers())
        except Exception as exc:  # noqa: BLE001 - any rank's failure is agreed below
            why = f"rank {rank}: {exc}"
        everyone = comm.allgather(mine)
        sides: Dict[str, Any] = {"lower": None, "upper": None}
        if not why and all(e is not None for e in everyone):
            opened: Dict[int, Tuple[int, ...]] = {}
            try:
                for side, on, r in (("lower", self.lo, (rank - 1) % size),
                                    ("upper", self.hi, (rank + 1) % size)):
                    if on:
                        if r not in opened:  # the same rank on both sides: mapped once
                            opened[r] = tuple(self.device.ipc_open(h) for h in everyone[r])
                            self._mapped.extend(opened[r])
                        sides[side] = opened[r]
                r = (rank - 1) % size  # its upper halo follows its own layers
                lower_layer = self._lower_halo(r) + int(self.layout.counts[r])
                self.h.slab_connect(sides["lower"], lower_layer, sides["upper"], 0)
            except Exception as exc:  # noqa: BLE001
                why = f"rank {rank}: {exc}"
        elif not why:
            why = "another rank could not share its state buffers"
        whys = [w for w in comm.allgather(why) if w]
        if whys:
            self.link_why = whys[0]
            self._close_link()
        else:
            self.link = True
        comm.Barrier()  # every rank connected (its arrival words zeroed) before any step

    def _close_link(self) -> None:
        try:
            self.h.slab_connect(None, 0, None, 0)
        except Exception:  # noqa: BLE001 - at exit the context may be gone
            pass
        for a in self._mapped:
            try:
                self.device.ipc_close(a)
            except Exception:  # noqa: BLE001
                pass
        self._mapped, self.link = [], False

    def close(self) -> None:
        """Drop the link's mappings of the neighbours' buffers."""
        if self._mapped:
            self._close_link()

    def __del__(self) -> None:
        self.close()

    def exchange(self, settle: bool = True) -> None:
        """Refresh the halo layers of the handle's state from the neighbours
        (collective).  `settle`: see :meth:`nlsepy.common.dist.IpcHalo.swap`
        (False only where every rank passes a collective before the next
        exchange or the end of the call: the next step's agreed check)."""
        if self.layout.size == 1:
            return
        if self.ipc is None:  # GPU ranks on one node: device to device?
            if self.device is None:
                self.ipc = False
            else:
                self._open_ipc()
        if self.ipc:
            self.ipc.swap(self._put, self._get, settle)
            return
        lo, n = self.lo, self.count
        recv_lo, recv_hi = self._swap(self.h.get_layers(lo, 1), self.h.get_layers(lo + n - 1, 1))
        if self.lo:
            self.h.set_layers(0, 1, recv_lo)
        if self.hi:
            self.h.set_layers(lo + n, 1, recv_hi)

    def _exchange_array(self, x: np.ndarray) -> None:
        """Refresh the halo layers of an extended-slab array in place."""
        if self.layout.size == 1:
            return
        v = x.reshape(self.layers, self.plane)
        lo, n = self.lo, self.count
        recv_lo, recv_hi = self._swap(v[lo].copy(), v[lo + n - 1].copy())
        if self.lo:
            v[0] = recv_lo
        if self.hi:
            v[lo + n] = recv_hi

    def _extended(self, own: np.ndarray, dtype: Any) -> np.ndarray:
        out = np.zeros(self.layers * self.plane, dtype)
        out[self.own] = own
        return out

    # ---------------------------------------------------------------- state
    def set_state(self, psi: np.ndarray, psi_prev: Optional[np.ndarray] = None) -> None:
        """The own layers of psi(t) (and psi(t - dt)); collective (halos).
        The halos of psi(t - dt) are never read: a step reads psi(t - dt)
        only where it writes psi(t + dt)."""
        prev = None if psi_prev is None else self._extended(psi_prev, psi_prev.dtype)
        self.h.set_state(self._extended(psi, psi.dtype), prev)
        self.exchange()

    def get_state(self) -> np.ndarray:
        return self.h.get_layers(self.lo, self.count)

    def get_prev(self) -> Optional[np.ndarray]:
        prev = self.h.get_prev()
        return None if prev is None else prev[self.own].copy()

    def set_potential(self, V: Optional[np.ndarray]) -> None:
        """The own layers' potential (the halo layers are never read)."""
        self.h.set_potential(None if V is None else self._extended(V, V.dtype))

    def set_dt(self, dt: float) -> None:
        self.h.set_dt(dt)
        self.dt = float(dt)

    # ------------------------------------------------------------- stepping
    def _rk4_start(self) -> bool:
        """The classic RK4 step that starts the leapfrog, with the stages of
        nlse_dec_step's start, the halos of each stage state refreshed
        before it is read; True when it blew up on any rank (the state is
        then untouched)."""
        from mpi4py import MPI
        dt, c = self.dt, self.h.combine
        psi = self.h.get_state()
        acc, b1 = c(psi, psi, 0.0, -dt / 6)
        ya, b2 = c(psi, psi, 0.0, -dt / 2)
        self._exchange_array(ya)
        acc, b3 = c(acc, ya, 0.0, -dt / 3)
        yb, b4 = c(psi, ya, 0.0, -dt / 2)
        self._exchange_array(yb)
        acc, b5 = c(acc, yb, 0.0, -dt / 3)
        ya, b6 = c(psi, yb, 0.0, -dt)
        self._exchange_array(ya)
        acc, b7 = c(acc, ya, 0.0, -dt / 6)
        if self.comm.allreduce(b1 or b2 or b3 or b4 or b5 or b6 or b7, op=MPI.LOR):
            return True
        self.h.set_state(acc, psi)
        self.exchange()
        return False

    def _settled(self) -> None:
        """Every rank has completed a collective (the step's agreed check)."""
        if self.ipc:
            self.ipc.settled()

    def step(self, n: int) -> Tuple[int, bool]:
        """`n` leapfrog steps; stops on every rank at the first step that
        blew up on any.

        CPU ranks: one C call, which swaps the new state's halo layers
        after each step itself, with non-blocking MPI overlapped with the
        interior layers (the handle's ``last_wait_seconds`` is the part the
        interior did not hide).  GPU ranks with the link (one node, CUDA
        IPC): the same, the halos sent device to device as the steps go and
        ``last_wait_seconds`` the time the edges waited for them; GPU ranks
        staging through the host: the same as CPU ranks, the edge layers
        through pinned memory.  Imaginary time on GPU ranks: one step per
        C call with the halo exchange after each.  On the mailbox path an
        exchange
        followed by another step leaves out its closing barrier: that step's
        agreed blow-up check (an ``MPI_Allgather`` every rank enters after
        its halo copies) proves the neighbours done with this rank's
        mailboxes.  The last exchange of the call keeps it."""
        self.seconds = 0.0
        clock, tm = time.perf_counter, self.timings
        if n > 0 and (self.device is None or self.link or self.ipc is False):
            first = 0
            if not self.h.has_prev():
                if self._rk4_start():
                    return 0, True
                first = 1
            if first == n:
                return n, False
            t0 = clock()
            done, blew = self.h.step(n - first)  # halos swapped in C, overlapped
            self._settled()  # the call's agreed blow-up check is a collective
            wait = self.h.last_wait_seconds()
            tm["step"] += clock() - t0 - wait
            tm["exchange"] += wait
            tm["steps"] += done
            self.seconds = self.h.last_seconds() - wait
            return first + done, blew
        for q in range(n):
            if not self.h.has_prev():
                if self._rk4_start():
                    return q, True
                continue
            t0 = clock()
            _, blew = self.h.step(1)  # the blow-up check is agreed in C
            self._settled()
            t1 = clock()
            tm["step"] += t1 - t0
            self.seconds += self.h.last_seconds()
            if blew:
                return q, True
            self.exchange(settle=q == n - 1)
            tm["exchange"] += clock() - t1
            tm["steps"] += 1
        return n, False

    def imaginary(self, n: int, norm: float) -> Tuple[int, bool]:
        """`n` normalised imaginary-time steps (the norm summed over every
        rank in C: the collective that settles the exchange before it, as
        in :meth:`step`), the halos refreshed after each."""
        self.seconds = 0.0
        for q in range(n):
            _, blew = self.h.imaginary(1, norm)
            self._settled()
            self.seconds += self.h.last_seconds()
            if blew:
                return q, True
            self.exchange(settle=q == n - 1)
        return n, False

    # ---------------------------------------------------------- observables
    def observe(self) -> Tuple[float, float]:
        """Global (norm, energy): the own layers' sums added in rank order."""
        norm, energy = _dist.ordered_sum(self.capsule, self.h.observe())
        return float(norm), float(energy)

    def apply(self, psi: np.ndarray) -> np.ndarray:
        """H(psi) psi on the own layers of a distributed state (collective)."""
        ext = self._extended(psi, psi.dtype)
        self._exchange_array(ext)
        return self.h.apply(ext)[self.own].copy()

    def bytes_per_cell_step(self) -> float:
        return self.h.bytes_per_cell_step()

    def last_seconds(self) -> float:
        return self.seconds

    def kernel(self) -> str:
        return self.h.kernel()


def _exchange_words(sim: Any, sol: SlabDec) -> str:
    """How the halo layers of a distributed DecGPE move, in words."""
    if sol.ipc and sol.link:
        words = "device to device through CUDA IPC (one node), one layer of blocks per side " \
                "after each real-time step: the edge layers computed first and copied into " \
                "the neighbours' halos on a stream of their own while the interior layers " \
                "compute, the next step waiting on the device for the halos (one host " \
                "synchronisation a call); after an imaginary-time step, through mailboxes"
    elif sol.ipc:
        words = "device to device through CUDA IPC (one node), one layer of blocks per side, " \
                "once per step" + (f" (not overlapped: {sol.link_why})" if sol.link_why else "")
    elif sim.backend == "cuda":
        words = "MPI_Isend/MPI_Irecv of one layer of blocks per side after each real-time " \
                "step, staged through pinned host memory: the edge layers computed first and " \
                "sent while the interior layers compute (the same swap, not overlapped, after " \
                "an imaginary-time step)"
    else:
        words = "MPI_Isend/MPI_Irecv of one layer of blocks per side after each leapfrog " \
                "step, overlapped with the step's interior layers (the same swap, not " \
                "overlapped, after an imaginary-time step)"
    return words + (f"; no CUDA IPC: {sol.ipc_why}" if sol.ipc_why else "")


def comm_info(sim: Any) -> Dict[str, Any]:
    """How a distributed DecGPE is laid out and communicates."""
    lay, sol = sim._layout, sim._solver
    assert lay is not None
    info = _dist.info(sim._comm)
    return {"ranks": lay.size, "rank": lay.rank, "axis": "z (layers of blocks)",
            "layers": (lay.start, lay.count), "counts": lay.counts.tolist(),
            "cells": (sim._own.start, sim._n_own), "halo_layers": HALO_LAYERS,
            "halo": sol.halo,
            "exchange": _exchange_words(sim, sol),
            "reduction": "rank-ordered sum (MPI_Allgather)", "mpi": info["library"],
            "cuda_aware_mpi": info["cuda_aware"],
            "device": sim._device if sim.backend == "cuda" else None}
