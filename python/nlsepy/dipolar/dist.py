"""The dipolar GPE over MPI ranks: ``nl.DipolarGPE(..., comm=MPI.COMM_WORLD)``.

The OpenMP/MPI edition of DBEC-GP (Loncar, thesis, chapter 6) on nlsepy's C
core: the 3D grid is cut into slabs of x rows, one per rank (an even split);
the dipolar term transforms each slab's rows in 2D, moves the spectrum to x
pencils (an all-to-all) and transforms along x; the Crank-Nicolson solve
along x is by substructuring (each slab solves its own rows, the slabs
coupled through their lines' end values: one halo row each way and two
values a line from every rank; ``NLSEPY_DIPOLAR_XSOLVE=transpose`` takes
the thesis's transpose to x pencils and back instead), and every sum over
the grid (the norm of each step, the observables) adds the ranks' parts in
rank order.  The same rank count gives the same bits on every run; results
agree with one process to rounding.

:class:`SlabDipolar` is the handle of a ``DipolarGPE`` made with ``comm=``
(or loaded with it): this rank's slab, the slab plan of the one C solver
(``Dipolar`` made with ``slab=``, :class:`_Slab`) on the CPU or on the
rank's GPU, every message through the MPI layer's communicator table, with
the interface of the single-process handle, its collective calls agreed
over the ranks.

Every rank runs the same script, with the same parameters.  ``psi0`` and
``V`` are the global array (the same on every rank), this rank's slab
(shape ``(rows, ny, nz)`` of ``local_slice``), or the
:class:`~nlsepy.Slab` that :func:`nlsepy.scatter` returns.  Collective
(call on every rank, in the same order): the constructor, ``load``,
stepping, ``run``, ``observables``, ``dipolar_potential``, reduced
``density``, ``phase_slice``, ``gather``, ``save`` and the setters.
Local: ``psi`` (this rank's slab), ``local_slice``, ``comm_info``,
``potential``, ``kernel``.  An error on one rank (a NaN in its slab, a
wrong shape, a blow-up, a file it cannot read) raises the same exception
on every rank.

*Layout.*  Rank r holds the x rows of an even split (``comm_info
["layout"]``; ``local_slice`` indexes a global array; the first ``nx %
ranks`` ranks one row more); every rank needs at least 2 rows (the five-point derivatives of
the observables take two rows from each neighbour).  The layout is not
that of :func:`nlsepy.scatter` in general: a :class:`~nlsepy.Slab` is
moved to it (one ``Alltoallv``).

*What is local.*  ``psi``, ``V``, ``potential``, ``dipolar_potential``,
``kernel`` and ``density()`` of all axes are this rank's x rows;
``observables``, reduced densities and ``phase_slice`` are of the whole
grid, the same on every rank; ``gather`` collects the state.

*Checkpoints.*  ``save`` writes one ``.npz`` part per rank and an index at
the path; ``DipolarGPE.load`` reads it with any number of ranks, or in one
process without ``comm``, and goes on as the saved solver would (to the
rounding of the sums, which depend on the rank count).

*Ctrl-C.*  The ranks agree between two blocks of steps whether SIGINT came
to any of them; every rank then stops after the same block and raises
``KeyboardInterrupt``, its counters at that block.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from ..common import backend as _backend
from ..common import dist as _dist
from ..common import guard as _guard
from ..common import tuning as _tuning
from ..common.checks import potential as _potential
from .memory import memory_parts, require, solver_what, threads
from .parameters import MODEL

__all__ = ["SlabDipolar", "same", "require_distributed"]

#: message prefix of a collective C call stopped because another rank failed
#: (NLSE_DIPOLAR_PEER of nlsepy/dipolar.h)
_PEER = "nlsepy-peer:"


def _agree(comm: Any, fn: Callable[[], Any]) -> Any:
    """``_dist.agree`` around a call of the distributed C solver: a rank the
    solver stopped because another rank failed leaves the report to that rank."""
    def run() -> Any:
        try:
            return fn()
        except RuntimeError as exc:
            if str(exc).startswith(_PEER):
                return None  # the failing rank's own error is raised everywhere
            raise
    return _dist.agree(comm, run)


def same(comm: Any, what: str, value: Any) -> None:
    """ValueError on every rank unless every rank passed the same `value`."""
    mine = repr(value)
    everyone = comm.allgather(mine)
    odd = [r for r, v in enumerate(everyone) if v != everyone[0]]
    if odd:
        raise ValueError(f"{what} must be the same on every rank: rank 0 has "
                         f"{everyone[0][:200]}, rank {odd[0]} has {everyone[odd[0]][:200]}")


def require_distributed(geometry: str, backend: str) -> str:
    """What ``comm=`` needs besides the parameters (and the MPI layer, which
    ``nl.as_comm`` checks): the 3d geometry; the backend resolved."""
    if geometry != "3d":
        raise ValueError(f"comm= runs the 3d geometry; geometry {geometry!r} (an "
                         f"effective 2D or 1D grid) runs in one process: leave comm out")
    return _backend.resolve(backend, MODEL)


class SlabDipolar:
    """This rank's part of a distributed ``DipolarGPE``: its slab of x rows in
    the C solver's slab plan, with the interface of the single-process
    handle (collective methods agreed over the ranks: an error on one rank
    is raised on all), and what the distribution adds (the layout, the
    inputs' rows, the reductions of densities and phases, the vote on
    Ctrl-C, the timings of the steps).

    Made collectively from the solver `owner` (its checked parameters and
    ``_c_args``); `V` and `psi0` say whether a potential and a state will
    be given (for the memory count).
    """

    #: the C solver's methods that every rank calls together
    COLLECTIVE = frozenset(("step", "observe", "dipolar_potential", "set_couplings", "set_state",
                            "set_potential", "set_obstacle", "set_dt", "set_rotation",
                            "set_lhy"))

    def __init__(self, owner: Any, V: bool, psi0: bool) -> None:
        from mpi4py import MPI
        comm = self.comm = owner.comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.backend = owner.backend
        self.pending_sigint = False  # a SIGINT that came after the last vote
        #: seconds on this rank of the steps of the last stepping call
        self.timings: Dict[str, float] = {}
        self.layout = _dist.Layout.of(comm, owner.shape)
        counts = self.layout.counts
        # the x solve, read once as the C handle reads it: transposes only where
        # every rank asks for them (the highest choice of any rank wins)
        mine = _tuning.current("dipolar")["dipolar_xsolve"] == "transpose"
        self.transpose = bool(comm.allreduce(int(mine), op=MPI.MIN))
        _dist.agree(comm, self._require_two_rows)
        host = comm.Split_type(MPI.COMM_TYPE_SHARED)
        self.node_ranks = host.Get_size()
        host.Free()
        self.device: Optional[int] = None
        if self.backend == "cuda":
            self.device = _dist.select_gpu(comm)
        _dist.agree(comm, lambda: self.require_memory(owner, owner._dipolar, V, psi0))
        self.capsule = _dist.capsule(comm)
        args, ycounts = owner._c_args, _dist.split(int(owner.shape[1]), self.size)[0]
        slab = _agree(comm, lambda: _Slab(comm, self.capsule, args, counts, ycounts,
                                          self.backend))
        _dist.agree(comm, slab.connect)
        self._c = slab

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        fn = getattr(self._c, name)
        if name not in self.COLLECTIVE:
            return fn
        return lambda *args: _agree(self.comm, lambda: fn(*args))

    def _require_two_rows(self) -> None:
        """ValueError unless every rank's slab holds two x rows or more (the
        five-point x derivative of the observables takes two from each neighbour)."""
        counts, shape = self.layout.counts, self.layout.shape
        n0 = shape[0]
        if counts.min() >= 2:
            return
        raise ValueError(
            f"{self.size} ranks split the {n0} x rows of the grid {shape} into slabs "
            f"{counts.tolist()}; the distributed solver needs at least 2 per rank: use "
            f"{max(1, n0 // 2)} ranks or fewer, or a larger nx")

    def require_memory(self, owner: Any, use_dd: bool, V: bool, psi0: bool) -> None:
        """MemoryError when the slabs of the ranks on this host (or this rank's
        GPU) do not fit in its memory (`use_dd`, `V`, `psi0`: with the
        dipolar term, a potential, an initial state)."""
        ni, n1, n2 = (int(n) for n in self.layout.local_shape)
        dtype, shape, size = owner.dtype, self.layout.shape, self.size
        rs = 4 if dtype == np.complex64 else 8
        nj = -(-n1 // size)
        transpose = self.transpose
        if self.backend == "cuda":
            parts = memory_parts((ni, n1, n2), dtype, True, "cuda", 1, V, psi0)
            parts["solver"]["x pencils"] = 2 * rs * shape[0] * nj * n2
            parts["solver"]["halo rows of the observables"] = 2 * rs * (ni + 4) * n1 * n2
            parts["solver"]["lines' ends"] = 32 * n1 * n2
            if not transpose:
                parts["solver"]["x solve buffers"] = 32 * size * n1 * n2 + 2 * rs * n1 * n2
            require(owner, parts, ranks=size)
            return
        parts = memory_parts((ni, n1, n2), dtype, use_dd, "cpu", threads("cpu"), V, psi0)
        if transpose:
            parts["solver"]["transpose buffers"] = 2 * rs * (ni * n1 * n2 + shape[0] * nj * n2)
        else:  # the substructured x solve: the state lies in the local systems' buffer
            # (counted with the state), its 2 rows more, the top halo row and
            # every rank's line ends (dipolar_slab_memory)
            parts["solver"]["x solve buffers"] = (2 * rs * 3 * n1 * n2
                                                  + 8 * (8 + 4 * size) * n1 * n2)
        if use_dd:  # the spectrum's x pencils and their packing buffer
            nh = n2 // 2 + 1
            parts["solver"]["spectrum pencils"] = 2 * rs * (shape[0] * nj * nh + ni * n1 * nh)
        total = sum(parts["solver"].values()) + sum(parts["host"].values())
        k = self.node_ranks
        _guard.require_memory(
            k * total, f"{solver_what(owner)} on {size} ranks, {k} of them on this host, each "
                       f"holding a slab of {ni} x rows [{_guard.format_bytes(total)} a rank]")

    # ------------------------------------------------------------ inputs
    def rows_of(self, name: str, value: Any, kinds: str) -> np.ndarray:
        """This rank's rows of `value` (collective): a global array, this rank's
        slab, or an :class:`~nlsepy.Slab` (moved to this solver's layout)."""
        lay = self.layout
        shape = lay.shape
        is_slab = isinstance(value, _dist.Slab)
        same(self.comm, f"the kind of {name} (a global array, this rank's slab, or an nl.Slab)",
             "Slab" if is_slab else "array")
        if is_slab:
            return self._from_slab(name, value, kinds)

        def pick() -> np.ndarray:
            arr = np.asarray(value)
            if arr.dtype.kind not in kinds:
                raise TypeError(f"{name} must be a {'real' if kinds == 'f' else 'float or complex'}"
                                f" array, got dtype {arr.dtype}")
            if arr.shape == shape:
                return arr[lay.local_slice]
            if arr.shape == lay.local_shape:
                return arr
            raise ValueError(
                f"{name} must have the grid's shape {shape} (the same global array on "
                f"every rank) or this rank's slab shape {lay.local_shape} (x rows "
                f"{lay.start}..{lay.start + lay.count - 1}), got {arr.shape}")
        return _dist.agree(self.comm, pick)

    def _from_slab(self, name: str, slab: _dist.Slab, kinds: str) -> np.ndarray:
        """The rows of this rank's layout from the :class:`~nlsepy.Slab` every rank holds."""
        comm, lay = self.comm, self.layout
        shape = lay.shape

        def meta() -> Tuple[int, int, str]:
            data = np.asarray(slab.data)
            if tuple(slab.shape) != shape:
                raise ValueError(f"{name}: the Slab is of a grid {tuple(slab.shape)}, this "
                                 f"solver's grid is {shape}")
            if data.dtype.kind not in kinds:
                raise TypeError(f"{name}: the Slab's data has dtype {data.dtype}")
            if data.ndim != 3 or data.shape[1:] != shape[1:]:
                raise ValueError(f"{name}: the Slab's data has shape {data.shape}, expected "
                                 f"(rows,) + {shape[1:]}")
            return int(slab.start), int(data.shape[0]), data.dtype.str
        mine = _dist.agree(comm, meta)
        everyone = comm.allgather(mine)
        starts = np.array([e[0] for e in everyone], dtype=np.int64)
        counts = np.array([e[1] for e in everyone], dtype=np.int64)
        order = np.argsort(starts, kind="stable")
        edges = np.concatenate(([0], np.cumsum(counts[order])))
        if not np.array_equal(starts[order], edges[:-1]) or edges[-1] != shape[0] or \
                len({e[2] for e in everyone}) != 1:
            got = list(zip(starts.tolist(), counts.tolist()))
            raise ValueError(f"{name}: the ranks' Slabs must tile the {shape[0]} x rows of "
                             f"the grid once, with one dtype (got (start, rows) {got})")
        data = np.ascontiguousarray(slab.data)
        return _move_rows(comm, data, starts, counts, lay.starts, lay.counts, shape)

    def everywhere(self, flag: bool) -> bool:
        """Whether `flag` holds on every rank (collective)."""
        from mpi4py import MPI
        return bool(self.comm.allreduce(bool(flag), op=MPI.LAND))

    def own_potential(self, owner: Any, rows: np.ndarray, first: bool) -> np.ndarray:
        """A checked, owned, read-only copy of this rank's rows of a potential
        (the memory of this host's ranks' copies checked when it is the
        `first` potential)."""
        arr = np.array(_potential(rows, self.layout.local_shape, owner.dtype), copy=True,
                       order="C")
        if first:
            _guard.require_memory(arr.nbytes * self.node_ranks,
                                  f"{solver_what(owner, V=True)} [V]")
        arr.flags.writeable = False
        return arr

    # ------------------------------------------------------------ stepping
    def vote(self, flag: Any) -> bool:
        """Whether Ctrl-C came to any rank (collective): every rank then stops
        after the same block of steps."""
        from mpi4py import MPI
        hit = bool(flag.hit) or self.pending_sigint
        self.pending_sigint = False
        stop = bool(self.comm.allreduce(hit, op=MPI.LOR))
        if stop:
            flag.hit = True
        elif flag.hit:  # arrived after the vote: the next one counts it
            flag.hit = False
            self.pending_sigint = True
        return stop

    def restart_timings(self) -> None:
        """Zero :attr:`timings` at the start of a stepping call (or chunk)."""
        self.timings = {"step": 0.0, "transpose": 0.0, "fft": 0.0, "reduce": 0.0, "steps": 0}

    def book(self, steps: int) -> None:
        """Add the C solver's seconds of the last block of `steps` steps to :attr:`timings`."""
        for k, v in self._c.timings().items():
            self.timings[k] = self.timings.get(k, 0.0) + v
        self.timings["steps"] += steps

    # ------------------------------------------------------------ outputs
    def density(self, mask: int) -> np.ndarray:
        """The density integrated over the axes not in `mask`, of the whole
        grid on every rank (collective)."""
        part = self._c.density(mask)
        if mask & 1:
            return _dist.gather_rows(self.layout, part, root=None)
        return _dist.ordered_sum(self.capsule, part.ravel()).reshape(part.shape)

    def phase_slice(self, q: int, index: int) -> np.ndarray:
        """arg(psi) on the slice ``index`` of axis `q` of the whole grid, on
        every rank (collective)."""
        shape, lay = self.layout.shape, self.layout
        if index >= shape[q]:
            raise ValueError(f"index must be 0..{shape[q] - 1} on axis {'xyz'[q]!r}, got {index}")
        p = self._c.get_state()
        if q == 0:
            owner = int(np.searchsorted(lay.starts, index, side="right") - 1)
            part = np.angle(p[index - lay.start]) if owner == self.rank else None
            return self.comm.bcast(part, root=owner)
        local = np.angle(np.take(p, index, axis=q))
        return _dist.gather_rows(lay, np.ascontiguousarray(local), root=None)

    def info(self) -> Dict[str, Any]:
        """How this run is distributed (``DipolarGPE.comm_info``)."""
        ni, i0, nj, j0 = self._c.local()
        info = _dist.info(self.comm)
        gpu = self.backend == "cuda"
        out = {"ranks": self.size, "rank": self.rank, "backend": self.backend,
               "layout": {"axis": "x", "counts": self.layout.counts.tolist(),
                          "starts": self.layout.starts.tolist(),
                          "pencil_y_rows": (int(j0), int(nj))},
               "fft": "cufft-slabs" if gpu else "fftw-slabs",
               "transpose": self._c.x_path(self.transpose),
               "mpi": info.get("library", ""), "mpi_standard": info.get("standard", ""),
               "ranks_on_this_host": self.node_ranks}
        if gpu:
            out["device"] = self.device
        return out


class _Slab:
    """This rank's slab: the C solver ``Dipolar`` of the backend's extension
    made with ``slab=`` (its slab plan), every message through the MPI
    layer's communicator table.  On GPU ranks the transposes copy into the
    other ranks' device buffers, mapped by CUDA IPC (all ranks on one host),
    or go through host memory (:meth:`connect`)."""

    _opened: Any = ()
    path = "MPI_Alltoallv"

    def __init__(self, comm: Any, capsule: Any, args: Tuple[Any, ...], counts: np.ndarray,
                 ycounts: np.ndarray, backend: str) -> None:
        ext = _backend.module(backend)
        self._ext, self._comm, self._gpu = ext, comm, backend == "cuda"
        rank = comm.Get_rank()
        self._c = ext.Dipolar(*args, slab=(rank, [int(c) for c in counts],
                                           [int(c) for c in ycounts], capsule))
        self._local = (int(counts[rank]), int(np.sum(counts[:rank])), int(ycounts[rank]),
                       int(np.sum(ycounts[:rank])))
        self._opened = []

    def connect(self) -> None:
        """GPU ranks: swap the IPC handles of every rank's buffers and map them;
        on several hosts, with ``NLSEPY_HALO=host`` or where a rank cannot
        share its buffers, stage the transposes through host memory instead
        (collective).  :attr:`path` says which.  CPU ranks: nothing to do."""
        if not self._gpu:
            return
        why, handles = _dist.no_ipc_reason(self._comm), None
        if not why:
            try:
                handles = tuple(self._ext.ipc_handle(a) for a in self._c.slab_buffers())
            except Exception as exc:  # noqa: BLE001 - any rank's failure: every rank stages
                why = str(exc)
        everyone = self._comm.allgather((handles, why))
        bad = [(r, w) for r, (h, w) in enumerate(everyone) if h is None]
        if bad:
            self.path = f"host-staged MPI_Alltoallv (rank {bad[0][0]}: {bad[0][1]})"
            self._c.slab_stage()
            return
        self.path = "cuda-ipc"
        mine = self._c.slab_buffers()
        rank, size = self._comm.Get_rank(), self._comm.Get_size()
        addrs = [0] * (len(mine) * size)
        for r, (h, _) in enumerate(everyone):
            for b in range(len(mine)):
                if r == rank:
                    addrs[b * size + r] = mine[b]
                else:
                    a = self._ext.ipc_open(h[b])
                    self._opened.append(a)
                    addrs[b * size + r] = a
        self._c.slab_connect(addrs)

    def close(self) -> None:
        for a in self._opened:
            try:
                self._ext.ipc_close(a)
            except Exception:  # noqa: BLE001 - at exit
                pass
        self._opened = []

    def __del__(self) -> None:
        self.close()

    def local(self) -> Tuple[int, int, int, int]:
        return self._local

    def x_path(self, transpose: bool) -> str:
        """How the x solve crosses the slabs: by `transpose` (every rank asked for
        ``NLSEPY_DIPOLAR_XSOLVE=transpose`` when the handle was made),
        :attr:`path` (the transposes'); else substructured (on GPU ranks:
        ``"substructured over " + path`` on two or more ranks)."""
        if transpose:
            return self.path
        if not self._gpu:
            return "substructured"
        return f"substructured over {self.path}" if self._comm.Get_size() > 1 else self.path

    def timings(self) -> Dict[str, float]:
        t = self._c.timings()
        return {"step": t[0], "transpose": t[1], "fft": t[2], "fft_transpose": t[3],
                "reduce": t[4]}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._c, name)


def _move_rows(comm: Any, data: np.ndarray, src_starts: np.ndarray, src_counts: np.ndarray,
               dst_starts: np.ndarray, dst_counts: np.ndarray, shape: Tuple[int, ...]
               ) -> np.ndarray:
    """Rows of axis 0 from one slab layout (this rank: `data`) to another (collective)."""
    rank = comm.Get_rank()
    plane = int(np.prod(shape[1:]))
    s0, sc = int(src_starts[rank]), int(src_counts[rank])
    d0, dc = int(dst_starts[rank]), int(dst_counts[rank])

    def overlap(a0: int, an: int, b0: int, bn: int) -> Tuple[int, int]:
        lo, hi = max(a0, b0), min(a0 + an, b0 + bn)
        return lo, max(0, hi - lo)
    send = [overlap(s0, sc, int(b0), int(bn)) for b0, bn in zip(dst_starts, dst_counts)]
    recv = [overlap(int(a0), int(an), d0, dc) for a0, an in zip(src_starts, src_counts)]
    out = np.empty((dc,) + tuple(shape[1:]), dtype=data.dtype)
    mt = _dist._mpi_type(data)
    comm.Alltoallv([data, ([n * plane for _, n in send], [(lo - s0) * plane if n else 0
                                                             for lo, n in send]), mt],
                   [out, ([n * plane for _, n in recv], [(lo - d0) * plane if n else 0
                                                        for lo, n in recv]), mt])
    return out
