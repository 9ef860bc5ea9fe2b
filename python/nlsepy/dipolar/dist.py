"""The dipolar GPE over MPI ranks: ``nl.DipolarGPE(..., comm=MPI.COMM_WORLD)``.

The OpenMP/MPI edition of DBEC-GP (Loncar, thesis, chapter 6) on nlsepy's C
core: the 3D grid is cut into slabs of x rows, one per rank, as FFTW's MPI
interface lays out its real-to-complex transform (blocks of ``ceil(nx /
ranks)`` rows); the dipolar term uses FFTW's MPI transforms in transposed
order, the Crank-Nicolson solve along x by substructuring
(each slab solves its own rows, the slabs coupled through their lines' end
values: one halo row each way and an ``MPI_Allgather`` of two values a line;
``NLSEPY_DIPOLAR_XSOLVE=transpose`` takes the thesis's transpose with
``MPI_Alltoallv`` (CPU ranks) or device copies (GPU ranks) to x pencils and
back), and every sum
over the grid (the norm of each step, the observables) adds the ranks' parts
in rank order.  The same rank count gives the same bits on every run;
results agree with one process to rounding.

Every rank runs the same script.  Collective (call on every rank, in the
same order): the constructor, :meth:`load`, stepping, :meth:`run`,
:meth:`observables`, :meth:`dipolar_potential`, reduced :meth:`density`,
:meth:`phase_slice`, :meth:`gather`, :meth:`save` and the setters.  Local:
:attr:`psi` (this rank's slab), :attr:`local_slice`, :attr:`comm_info`,
:meth:`potential`, :meth:`kernel`.  An error on one rank (a NaN in its slab,
a wrong shape, a blow-up, a file it cannot read) raises the same exception
on every rank.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from .. import _backend, _dist, _guard
from .._validate import potential as _potential
from .._validate import real as _real
from ..errors import BlowUpError
from .solver import _FFT_EFFORT, _MODEL, DipolarGPE, Obstacle, memory_parts

__all__ = ["DistributedDipolarGPE"]

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


class _GpuSlab:
    """This rank's slab on its GPU (``_cuda.Dipolar`` made with ``slab=``) with
    the interface of the CPU ranks' ``_mpi.DipolarMPI``: the other ranks'
    buffers are mapped by CUDA IPC (all ranks on one host), the transposes
    are device-to-device copies into them."""

    _opened: Any = ()
    path = ""

    def __init__(self, comm: Any, capsule: Any, args: Tuple[Any, ...], counts: np.ndarray,
                 ycounts: np.ndarray) -> None:
        from .. import _cuda  # type: ignore[attr-defined]
        self._cuda, self._comm = _cuda, comm
        rank = comm.Get_rank()
        self._c = _cuda.Dipolar(*args, slab=(rank, [int(c) for c in counts],
                                             [int(c) for c in ycounts], capsule))
        self._local = (int(counts[rank]), int(np.sum(counts[:rank])), int(ycounts[rank]),
                       int(np.sum(ycounts[:rank])))
        self._opened = []

    def connect(self) -> None:
        """Swap the IPC handles of every rank's buffers and map them; on
        several hosts, with ``NLSEPY_HALO=host`` or where a rank cannot share
        its buffers, stage the transposes through host memory instead
        (collective).  :attr:`path` says which."""
        why, handles = _dist.no_ipc_reason(self._comm), None
        if not why:
            try:
                handles = tuple(self._cuda.ipc_handle(a) for a in self._c.slab_buffers())
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
                    a = self._cuda.ipc_open(h[b])
                    self._opened.append(a)
                    addrs[b * size + r] = a
        self._c.slab_connect(addrs)

    def close(self) -> None:
        for a in self._opened:
            try:
                self._cuda.ipc_close(a)
            except Exception:  # noqa: BLE001 - at exit
                pass
        self._opened = []

    def __del__(self) -> None:
        self.close()

    def local(self) -> Tuple[int, int, int, int]:
        return self._local

    def x_path(self) -> str:
        """How the x solve crosses the slabs: :attr:`path` (the transposes'),
        with ``NLSEPY_DIPOLAR_XSOLVE=transpose``, or ``"substructured over "
        + path`` (the default on two or more ranks)."""
        if os.environ.get("NLSEPY_DIPOLAR_XSOLVE") != "transpose" and \
                self._comm.Get_size() > 1:
            return f"substructured over {self.path}"
        return self.path

    def timings(self) -> Dict[str, float]:
        t = self._c.timings()
        return {"step": t[0], "transpose": t[1], "fft": t[2], "fft_transpose": t[3],
                "reduce": t[4]}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._c, name)


def even_rows(n: int, ranks: int) -> np.ndarray:
    """Rows per rank of an even split of `n` (the first ``n % ranks`` ranks one more)."""
    base, extra = divmod(n, ranks)
    return np.array([base + (1 if r < extra else 0) for r in range(ranks)], dtype=np.int64)


class _Collective:
    """The distributed C solver, its collective methods run under :func:`_agree`."""

    COLLECTIVE = frozenset(("step", "observe", "dipolar_potential", "set_couplings", "set_state",
                            "set_potential", "set_obstacle", "set_dt"))

    def __init__(self, comm: Any, solver: Any) -> None:
        self._comm = comm
        self._c = solver

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._c, name)
        if name not in self.COLLECTIVE:
            return fn
        return lambda *args: _agree(self._comm, lambda: fn(*args))


class DistributedDipolarGPE(DipolarGPE):
    """:class:`~nlsepy.DipolarGPE` with ``comm=``: the 3D grid in x slabs over MPI ranks.

    Made by ``nl.DipolarGPE(..., comm=comm)`` (or :meth:`DipolarGPE.load`
    with ``comm=``); the parameters are those of :class:`DipolarGPE`, the
    same on every rank.  ``psi0`` and ``V`` are the global array (the same
    on every rank), this rank's slab (shape ``(rows, ny, nz)`` of
    :attr:`local_slice`), or the :class:`~nlsepy.Slab` that
    :func:`nlsepy.scatter` returns.

    Notes
    -----
    *Layout.*  Rank r holds the x rows of FFTW's MPI slab (``comm_info
    ["layout"]``; :attr:`local_slice` indexes a global array); every rank
    needs at least 2 rows (the five-point derivatives of the observables
    take two rows from each neighbour).  The layout is not that of
    :func:`nlsepy.scatter` in general: a :class:`~nlsepy.Slab` is moved to
    it (one ``Alltoallv``).

    *What is local.*  :attr:`psi`, :attr:`V`, :meth:`potential`,
    :meth:`dipolar_potential`, :meth:`kernel` and ``density()`` of all
    axes are this rank's x rows; :meth:`observables`, reduced densities and
    :meth:`phase_slice` are of the whole grid, the same on every rank;
    :meth:`gather` collects the state.

    *Checkpoints.*  :meth:`save` writes one ``.npz`` part per rank and an
    index at `path`; :meth:`DipolarGPE.load` reads it with any number of
    ranks, or in one process without ``comm``, and goes on as the saved
    solver would (to the rounding of the sums, which depend on the rank
    count).

    *Ctrl-C.*  The ranks agree between two blocks of steps whether SIGINT
    came to any of them; every rank then stops after the same block and
    raises ``KeyboardInterrupt``, its counters at that block.
    """

    def __init__(self, shape: Sequence[int], spacing: Union[float, Sequence[float]], dt: float,
                 g: float = 0.0, gdd: float = 0.0, trap: Sequence[float] = (1.0, 1.0, 1.0),
                 cutoff: Optional[float] = None, geometry: str = "3d", option: int = 2,
                 V: Optional[Any] = None, obstacle: Optional[Obstacle] = None,
                 psi0: Optional[Any] = None, dtype: Any = np.complex128,
                 dipolar: Optional[bool] = None, fft_effort: str = "estimate",
                 backend: str = "auto", comm: Any = None) -> None:
        if comm is None:
            raise ValueError("the distributed dipolar GPE needs comm= (an mpi4py communicator)")
        comm = _dist.as_comm(comm)
        from mpi4py import MPI
        from .. import _mpi  # type: ignore[attr-defined]
        self._comm = comm
        self._rank, self._size = comm.Get_rank(), comm.Get_size()
        self._pending_sigint = False
        self._timings: Dict[str, float] = {}
        self._same("the constructor's parameters",
                   (shape, spacing, dt, g, gdd, trap, cutoff, geometry, option, dtype, dipolar,
                    fft_effort, backend, V is None, psi0 is None, obstacle))
        code, kscale, use_dd = _dist.agree(comm, lambda: self._setup_distributed(
            shape, spacing, dt, g, gdd, trap, cutoff, geometry, option, dtype, dipolar,
            fft_effort, backend))
        counts, starts = _slab_rows(comm, self._shape, self._backend)
        self._layout = _dist.Layout(comm, self._shape, self._rank, self._size, counts, starts)
        _dist.agree(comm, self._require_two_rows)
        host = comm.Split_type(MPI.COMM_TYPE_SHARED)
        self._node_ranks = host.Get_size()
        host.Free()
        if self._backend == "cuda":
            self._device = _dist.select_gpu(comm)
        _dist.agree(comm, lambda: self._require_slab_memory(use_dd, V is not None,
                                                            psi0 is not None))
        self._capsule = _dist.capsule(comm)
        kin, coef = self._kin_coef()
        core = self._core_dtype()
        args = (code, self._shape, self._spacing, core, self._dt, kin, coef,
                self._g * self._fc, self._gdd * self._fd,
                0.0 if self._cutoff is None else self._cutoff, kscale, int(use_dd),
                _FFT_EFFORT[self._fft_effort])
        if self._backend == "cpu":
            self._solver = _Collective(comm, _agree(comm, lambda: _mpi.DipolarMPI(
                comm, self._capsule, *args)))
        else:
            ycounts = even_rows(self._shape[1], self._size)
            slab = _agree(comm, lambda: _GpuSlab(comm, self._capsule, args, counts, ycounts))
            _dist.agree(comm, slab.connect)
            self._solver = _Collective(comm, slab)
        self._start(use_dd)
        if psi0 is not None:
            self.psi = psi0
        if V is not None:
            self.V = V
        if obstacle is not None:
            self.obstacle = obstacle

    # ------------------------------------------------------------ set-up
    def _setup_distributed(self, *args: Any) -> Tuple[int, float, bool]:
        *params, backend = args
        out = self._setup(*params)
        if self._geometry != "3d":
            raise ValueError(f"comm= runs the 3d geometry; geometry {self._geometry!r} (an "
                             f"effective 2D or 1D grid) runs in one process: leave comm out")
        self._backend = _backend.resolve(backend, _MODEL)
        if self._backend == "cpu":
            from .. import _mpi  # type: ignore[attr-defined]
            if not hasattr(_mpi, "DipolarMPI"):
                raise ImportError("the distributed dipolar GPE on CPU ranks needs FFTW's MPI "
                                  "interface, which this build of nlsepy's MPI layer lacks: "
                                  "install it (Debian: libfftw3-mpi-dev) and reinstall nlsepy "
                                  "from source, or run on GPU ranks (backend='cuda')")
        return out

    def _require_two_rows(self) -> None:
        """ValueError unless every rank's slab holds two x rows or more (the
        five-point x derivative of the observables takes two from each neighbour)."""
        counts, n0 = self._layout.counts, self._shape[0]
        if counts.min() >= 2:
            return
        if self._backend == "cpu":
            fits = [p for p in range(1, self._size + 1) if _fftw_rows(n0, p).min() >= 2]
            how = "FFTW's slabs of ceil(nx / ranks) rows"
        else:
            fits = [p for p in range(1, self._size + 1) if even_rows(n0, p).min() >= 2]
            how = "slabs"
        raise ValueError(
            f"{self._size} ranks split the {n0} x rows of the grid {self._shape} into {how}, "
            f"{counts.tolist()}; the distributed solver needs at least 2 per rank: use "
            f"{max(fits)} ranks or fewer, or a larger nx")

    def _core_dtype(self) -> int:
        from .. import _core  # type: ignore[attr-defined]
        return _core.COMPLEX64 if self._dtype == np.complex64 else _core.COMPLEX128

    def _same(self, what: str, value: Any) -> None:
        """ValueError on every rank unless every rank passed the same `value`."""
        mine = repr(value)
        everyone = self._comm.allgather(mine)
        odd = [r for r, v in enumerate(everyone) if v != everyone[0]]
        if odd:
            raise ValueError(f"{what} must be the same on every rank: rank 0 has "
                             f"{everyone[0][:200]}, rank {odd[0]} has {everyone[odd[0]][:200]}")

    def _slab_shape(self) -> Tuple[int, int, int]:
        n = self._layout.local_shape
        return int(n[0]), int(n[1]), int(n[2])

    def _require_slab_memory(self, use_dd: bool, V: bool, psi0: bool) -> None:
        """MemoryError when the slabs of the ranks on this host (or this rank's
        GPU) do not fit in its memory."""
        ni, n1, n2 = self._slab_shape()
        rs = 4 if self._dtype == np.complex64 else 8
        nj = -(-n1 // self._size)
        if self._backend == "cuda":
            parts = memory_parts((ni, n1, n2), self._dtype, True, "cuda", 1, V, psi0)
            parts["solver"]["x pencils"] = 2 * rs * self._shape[0] * nj * n2
            parts["solver"]["halo rows of the observables"] = 2 * rs * (ni + 4) * n1 * n2
            parts["solver"]["lines' ends"] = 32 * n1 * n2
            if os.environ.get("NLSEPY_DIPOLAR_XSOLVE") != "transpose":
                parts["solver"]["x solve buffers"] = 32 * self._size * n1 * n2 + 2 * rs * n1 * n2
            self._require_memory(parts, ranks=self._size)
            return
        parts = memory_parts((ni, n1, n2), self._dtype, use_dd, "cpu", self._threads(), V, psi0)
        if os.environ.get("NLSEPY_DIPOLAR_XSOLVE") == "transpose":
            parts["solver"]["transpose buffers"] = 2 * rs * (ni * n1 * n2 + self._shape[0] * nj * n2)
        else:  # the substructured x solve: the state lies in the local systems' buffer
            # (counted with the state), its 2 rows more, the top halo row and
            # every rank's line ends (nlse_dipolar_mpi_memory_bytes)
            parts["solver"]["x solve buffers"] = (2 * rs * 3 * n1 * n2
                                                  + 8 * (8 + 4 * self._size) * n1 * n2)
        total = sum(parts["solver"].values()) + sum(parts["host"].values())
        k = self._node_ranks
        _guard.require_memory(
            k * total, f"{self._what()} on {self._size} ranks, {k} of them on this host, each "
                       f"holding a slab of {ni} x rows [{_guard.format_bytes(total)} a rank]")

    def _what(self, **extra: Any) -> str:
        return super()._what(**extra).replace("DipolarGPE(", "DipolarGPE(comm, ", 1)

    # ------------------------------------------------------------ slabs in
    def _rows_of(self, name: str, value: Any, kinds: str) -> np.ndarray:
        """This rank's rows of `value` (collective): a global array, this rank's
        slab, or an :class:`~nlsepy.Slab` (moved to this solver's layout)."""
        lay = self._layout
        is_slab = isinstance(value, _dist.Slab)
        self._same(f"the kind of {name} (a global array, this rank's slab, or an nl.Slab)",
                   "Slab" if is_slab else "array")
        if is_slab:
            return self._from_slab(name, value, kinds)

        def pick() -> np.ndarray:
            arr = np.asarray(value)
            if arr.dtype.kind not in kinds:
                raise TypeError(f"{name} must be a {'real' if kinds == 'f' else 'float or complex'}"
                                f" array, got dtype {arr.dtype}")
            if arr.shape == self._shape:
                return arr[lay.local_slice]
            if arr.shape == lay.local_shape:
                return arr
            raise ValueError(
                f"{name} must have the grid's shape {self._shape} (the same global array on "
                f"every rank) or this rank's slab shape {lay.local_shape} (x rows "
                f"{lay.start}..{lay.start + lay.count - 1}), got {arr.shape}")
        return _dist.agree(self._comm, pick)

    def _from_slab(self, name: str, slab: _dist.Slab, kinds: str) -> np.ndarray:
        """The rows of this rank's layout from the :class:`~nlsepy.Slab` every rank holds."""
        comm, lay = self._comm, self._layout

        def meta() -> Tuple[int, int, str]:
            data = np.asarray(slab.data)
            if tuple(slab.shape) != self._shape:
                raise ValueError(f"{name}: the Slab is of a grid {tuple(slab.shape)}, this "
                                 f"solver's grid is {self._shape}")
            if data.dtype.kind not in kinds:
                raise TypeError(f"{name}: the Slab's data has dtype {data.dtype}")
            if data.ndim != 3 or data.shape[1:] != self._shape[1:]:
                raise ValueError(f"{name}: the Slab's data has shape {data.shape}, expected "
                                 f"(rows,) + {self._shape[1:]}")
            return int(slab.start), int(data.shape[0]), data.dtype.str
        mine = _dist.agree(comm, meta)
        everyone = comm.allgather(mine)
        starts = np.array([e[0] for e in everyone], dtype=np.int64)
        counts = np.array([e[1] for e in everyone], dtype=np.int64)
        order = np.argsort(starts, kind="stable")
        edges = np.concatenate(([0], np.cumsum(counts[order])))
        if not np.array_equal(starts[order], edges[:-1]) or edges[-1] != self._shape[0] or \
                len({e[2] for e in everyone}) != 1:
            got = list(zip(starts.tolist(), counts.tolist()))
            raise ValueError(f"{name}: the ranks' Slabs must tile the {self._shape[0]} x rows of "
                             f"the grid once, with one dtype (got (start, rows) {got})")
        data = np.ascontiguousarray(slab.data)
        return _move_rows(comm, data, starts, counts, lay.starts, lay.counts, self._shape)

    # ------------------------------------------------------------ state
    @property
    def psi(self) -> np.ndarray:
        """A copy of this rank's slab of the state (complex); assigning takes the
        global array, this rank's slab or an :class:`~nlsepy.Slab` (collective)."""
        return self._solver.get_state()

    @psi.setter
    def psi(self, value: Any) -> None:
        arr = self._rows_of("psi", value, "fc")
        from mpi4py import MPI
        real = arr.dtype.kind == "f" or not np.any(arr.imag)
        real = self._comm.allreduce(bool(real), op=MPI.LAND)  # one kind of state on every rank
        rdt = np.float32 if self._dtype == np.complex64 else np.float64
        if real:
            arr = np.ascontiguousarray(arr.real if arr.dtype.kind == "c" else arr, dtype=rdt)
        else:
            arr = np.ascontiguousarray(arr, dtype=self._dtype)
        self._solver.set_state(arr)

    @property
    def V(self) -> Optional[np.ndarray]:
        """A copy of this rank's slab of the static potential (None when absent);
        settable like :attr:`psi` (collective)."""
        return None if self._V is None else self._V.copy()

    @V.setter
    def V(self, value: Any) -> None:
        self._same("whether V is None", value is None)
        if value is None:
            self._solver.set_potential(None)
            self._V = None
            return
        rows = self._rows_of("V", value, "fiu")
        arr = _dist.agree(self._comm, lambda: self._own_slab_potential(rows))
        self._solver.set_potential(arr)
        self._V = arr

    def _own_slab_potential(self, rows: np.ndarray) -> np.ndarray:
        arr = np.array(_potential(rows, self._layout.local_shape, self._dtype), copy=True,
                       order="C")
        if self._V is None:
            _guard.require_memory(arr.nbytes * self._node_ranks, f"{self._what(V=True)} [V]")
        arr.flags.writeable = False
        return arr

    @property
    def obstacle(self) -> Optional[Obstacle]:
        """The moving beam (None when absent); settable (collective)."""
        return self._obstacle

    @obstacle.setter
    def obstacle(self, ob: Optional[Obstacle]) -> None:
        self._same("obstacle", ob)
        if ob is None:
            self._solver.set_obstacle(None)
            self._obstacle = None
            return
        ob, args = _dist.agree(self._comm, lambda: self._obstacle_tuple(ob))
        self._solver.set_obstacle(args)
        self._obstacle = ob

    @property
    def g(self) -> float:
        """Contact coefficient of the 3D equation (settable, collective)."""
        return self._g

    @g.setter
    def g(self, value: float) -> None:
        self._same("g", value)
        v = _dist.agree(self._comm, lambda: _real("g", value))
        self._solver.set_couplings(v * self._fc, self._gdd * self._fd)
        self._g = v

    @property
    def gdd(self) -> float:
        """Dipolar coefficient of the 3D equation (settable, collective; a
        nonzero value on a solver made without the dipolar term makes its FFT
        plans on every rank)."""
        return self._gdd

    @gdd.setter
    def gdd(self, value: float) -> None:
        self._same("gdd", value)

        def check() -> float:
            v = _real("gdd", value)
            if v != 0 and not self._dipolar:
                self._check_even()
                self._require_slab_memory(True, self._V is not None, False)
            return v
        v = _dist.agree(self._comm, check)
        self._solver.set_couplings(self._g * self._fc, v * self._fd)
        if v != 0:
            self._dipolar = True
        self._gdd = v

    @property
    def dt(self) -> float:
        """Time step (settable, collective; the next step uses it)."""
        return self._dt

    @dt.setter
    def dt(self, value: float) -> None:
        self._same("dt", value)
        self._dt = _dist.agree(self._comm, lambda: _real("dt", value, positive=True))

    # ------------------------------------------------------------ layout
    @property
    def comm(self) -> Any:
        """The communicator (read-only)."""
        return self._comm

    @property
    def local_slice(self) -> Tuple[slice, ...]:
        """This rank's part of a global array: ``global_array[gpe.local_slice]``."""
        return self._layout.local_slice

    @property
    def layout(self) -> _dist.Layout:
        """The x slabs of every rank (:class:`nlsepy._dist.Layout`)."""
        return self._layout

    @property
    def comm_info(self) -> Dict[str, Any]:
        """How this run is distributed: ranks, this rank, the layout (x rows per
        rank), the FFT (``"fftw-mpi"``), how the x solve crosses the slabs
        (``"transpose"``: on CPU ranks ``"substructured"``, each slab's own
        systems coupled through their lines' end values, or ``"MPI_Alltoallv"``
        with ``NLSEPY_DIPOLAR_XSOLVE=transpose``; on GPU ranks
        ``"substructured over "`` the path of the lines' ends, or that path
        alone with ``NLSEPY_DIPOLAR_XSOLVE=transpose``) and the MPI library."""
        ni, i0, nj, j0 = self._solver.local()
        info = _dist.info(self._comm)
        gpu = self._backend == "cuda"
        out = {"ranks": self._size, "rank": self._rank, "backend": self._backend,
               "layout": {"axis": "x", "counts": self._layout.counts.tolist(),
                          "starts": self._layout.starts.tolist(),
                          "pencil_y_rows": (int(j0), int(nj))},
               "fft": "cufft-slabs" if gpu else "fftw-mpi",
               "transpose": self._solver.x_path() if gpu else self._solver.x_solve(),
               "mpi": info.get("library", ""), "mpi_standard": info.get("standard", ""),
               "ranks_on_this_host": self._node_ranks}
        if gpu:
            out["device"] = self._device
        return out

    def gather(self, root: Optional[int] = 0) -> Optional[np.ndarray]:
        """The global state on `root` (None on the other ranks), or on every rank
        when `root` is None (collective)."""
        _dist.check_root(self._comm, root)
        return _dist.gather_rows(self._layout, self.psi, root)

    @property
    def last_timings(self) -> Dict[str, float]:
        """Seconds on this rank of the steps of the last stepping call (its last
        chunk when it had frames), summed over its blocks: ``step`` (all),
        ``transpose`` (the x solve's communication: on CPU ranks the halo rows
        and the gathered line ends, or with the transposes MPI_Alltoallv and
        packing; on GPU ranks the copies into the other GPUs and the wait at
        the barrier after them), ``fft`` (the dipolar transforms with their
        own transposes; GPU ranks also give those transposes alone,
        ``fft_transpose``) and ``reduce`` (the norm sums); ``steps`` counts
        the steps."""
        return dict(self._timings)

    @property
    def memory_bytes(self) -> int:
        """Bytes this rank's solver holds (its slab, the transpose buffers, ...)."""
        return int(self._solver.memory_bytes())

    # ------------------------------------------------------------ outputs
    def density(self, keep: Optional[Sequence[str]] = None) -> np.ndarray:
        """|psi|^2 on this rank's slab (`keep` None or every axis), or its
        Simpson integral over the axes not in `keep`: then the whole grid's
        array, the same on every rank (collective)."""
        if keep is None:
            keep = self.axes
        if isinstance(keep, str):
            keep = (keep,)
        mask = 0
        for a in keep:
            if a not in self.axes:
                raise ValueError(f"keep must name axes of {self.axes}, got {a!r}")
            mask |= 1 << self.axes.index(a)
        if mask == 7:
            p = self.psi
            return p.real.astype(np.float64) ** 2 + p.imag.astype(np.float64) ** 2
        part = self._solver.density(mask)
        if mask & 1:
            return _dist.gather_rows(self._layout, part, root=None)
        return _dist.ordered_sum(self._capsule, part.ravel()).reshape(part.shape)

    def phase_slice(self, axis: str, index: Optional[int] = None) -> np.ndarray:
        """arg(psi) on the slice ``axis = index`` of the whole grid, on every rank
        (collective)."""
        if axis not in self.axes:
            raise ValueError(f"axis must be one of {self.axes}, got {axis!r}")
        q = self.axes.index(axis)
        from .._validate import count as _count
        index = self._shape[q] // 2 if index is None else _count("index", index)
        if index >= self._shape[q]:
            raise ValueError(f"index must be 0..{self._shape[q] - 1} on axis {axis!r}, got {index}")
        p = self.psi
        if q == 0:
            lay = self._layout
            owner = int(np.searchsorted(lay.starts, index, side="right") - 1)
            part = np.angle(p[index - lay.start]) if owner == self._rank else None
            return self._comm.bcast(part, root=owner)
        local = np.angle(np.take(p, index, axis=q))
        return _dist.gather_rows(self._layout, np.ascontiguousarray(local), root=None)

    def bytes_per_step(self, mode: str = "real") -> float:
        """Bytes one step moves through this rank's memory (its slab), for `mode`."""
        if mode not in ("imaginary", "real"):
            raise ValueError(f"mode must be 'imaginary' or 'real', got {mode!r}")
        return self._solver.bytes_per_point_step(0 if mode == "imaginary" else 1) * \
            float(np.prod(self._layout.local_shape))

    # ------------------------------------------------------------ stepping
    def _stop_now(self, flag: Any) -> bool:
        """Ctrl-C on any rank stops every rank after the same block."""
        from mpi4py import MPI
        hit = bool(flag.hit) or self._pending_sigint
        self._pending_sigint = False
        stop = bool(self._comm.allreduce(hit, op=MPI.LOR))
        if stop:
            flag.hit = True
        elif flag.hit:  # arrived after the vote: the next one counts it
            flag.hit = False
            self._pending_sigint = True
        return stop

    def _run(self, mode: str, n: int, dt: float, ramp: bool = False,
             on_block: Optional[Callable[[int], Any]] = None) -> None:
        acc = {"step": 0.0, "transpose": 0.0, "fft": 0.0, "reduce": 0.0, "steps": 0}

        def booked(m: int) -> None:
            for k, v in self._solver.timings().items():
                acc[k] = acc.get(k, 0.0) + v
            acc["steps"] += m
            if on_block is not None:
                on_block(m)
        try:
            super()._run(mode, n, dt, ramp, booked)
        finally:
            self._timings = acc

    def _wrap_callback(self, callback: Optional[Callable]) -> Optional[Callable]:
        """The callback on every rank; StopIteration on any rank stops all of
        them, KeyboardInterrupt or an exception on one is raised on all
        (``runner.agreed_callback``)."""
        if callback is None or not callable(callback):
            return callback
        from .. import runner
        return runner.agreed_callback(self._comm, callback)

    def _chunks(self, mode: str, steps: int, frames: Optional[int], callback: Optional[Callable],
                progress: bool, ramp: bool, output: Any = None) -> Any:
        self._same("the stepping call's steps, frames, ramp and output",
                   (mode, steps, frames, ramp, output is None))
        return super()._chunks(mode, steps, frames, callback, bool(progress) and self._rank == 0,
                               ramp, output)

    def _require_frames(self, count: int) -> None:
        rs = 4 if self._dtype == np.complex64 else 8
        nbytes = count * 2 * int(np.prod(self._layout.local_shape)) * rs * self._node_ranks
        _dist.agree(self._comm, lambda: _guard.require_memory(
            nbytes, f"{self._what()} keeping {count} frames of the slabs of {self._node_ranks} "
                    f"ranks on this host [{_guard.format_bytes(nbytes)}]"))

    def run(self, t_end: float, frames: int = 10, callback: Optional[Callable] = None,
            progress: bool = False, checkpoint: Optional[Union[str, os.PathLike]] = None,
            output: Optional[Union[str, os.PathLike]] = None) -> Any:
        """Real-time propagation to `t_end` (collective; see :meth:`DipolarGPE.run`).
        Frames hold this rank's slabs; ``checkpoint`` writes distributed checkpoints;
        ``output``: rank 0 gathers each frame and writes the HDF5 file (h5py
        without MPI)."""
        self._same("run's t_end, frames, checkpoint and output",
                   (t_end, frames, checkpoint is None, output is None))
        return super().run(t_end, frames, callback, bool(progress) and self._rank == 0,
                           checkpoint, output)

    def _blowup(self, mode: str, n: int, before: int, done: int, m: int,
                dt: float) -> BlowUpError:
        exc = super()._blowup(mode, n, before, done, m, dt)
        exc.args = (exc.args[0] + " Every rank stopped there; last_good holds each rank's "
                                  "slab.",) + exc.args[1:]
        return exc

    # ------------------------------------------------------------ checkpoints
    def save(self, path: Union[str, os.PathLike]) -> None:
        """Write a distributed checkpoint (collective): each rank its slab of the
        state (and of ``V``) to ``<stem>.partRRRRofNNNN.npz``, then rank 0 the
        index `path` with the parameters, the clock and the counters, once every
        part is whole.  :meth:`DipolarGPE.load` reads it with any number of
        ranks or in one process."""
        fields = self._checkpoint_fields()
        slabs = {"psi": fields.pop("psi")}
        V = fields.pop("V", None)
        if V is not None:
            slabs["V"] = V
        fields["has_V"] = V is not None
        _dist.save_parts(os.fspath(path), _MODEL, self._layout, slabs, **fields)

    @classmethod
    def _load(cls, spath: str, backend: str, comm: Any, overrides: Dict[str, Any]
              ) -> "DistributedDipolarGPE":
        """:meth:`DipolarGPE.load` with ``comm`` (collective)."""
        comm = _dist.as_comm(comm)
        from .. import _mpi  # type: ignore[attr-defined]

        def read() -> Tuple[Dict[str, Any], Dict[str, Any]]:
            head = _guard.load_checkpoint(spath, _MODEL, {"shape": cls._KEYS["shape"]})
            shape = tuple(int(n) for n in head["shape"])
            if len(shape) != 3:
                raise ValueError(f"{spath}: holds a grid of {len(shape)} axes; comm= runs the "
                                 f"3d geometry")
            rows = None
            if _dist.is_parts_index(spath):
                if _backend.resolve(backend, _MODEL) == "cuda":
                    counts = even_rows(shape[0], comm.Get_size())
                    r = comm.Get_rank()
                    rows = (int(np.sum(counts[:r])), int(counts[r]))
                else:
                    ni, i0 = _mpi.dipolar_slab(comm, shape)
                    rows = (int(i0), int(ni))
            d = cls._read_checkpoint(spath, rows)
            return d, cls._checkpoint_kwargs(spath, d, overrides, rows)
        d, kw = _dist.agree(comm, read)
        try:
            gpe = cls(backend=backend, comm=comm, **kw)
        except (ValueError, TypeError) as exc:
            if overrides:
                raise type(exc)(f"{spath} with {sorted(overrides)} changed: {exc}") from None
            raise ValueError(f"{spath}: holds invalid parameters: {exc}") from None
        gpe._restore_clock(d, overrides)
        return gpe

    def __repr__(self) -> str:
        return super().__repr__()[:-1] + f", ranks={self._size}, rank={self._rank})"


def _slab_rows(comm: Any, shape: Tuple[int, ...], backend: str
               ) -> Tuple[np.ndarray, np.ndarray]:
    """x rows and first rows of every rank: FFTW's MPI slabs on CPU ranks
    (collective: FFTW's answers are gathered), an even split on GPU ranks."""
    if backend == "cuda":
        counts = even_rows(int(shape[0]), comm.Get_size())
        return counts, np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
    from .. import _mpi  # type: ignore[attr-defined]
    rows = comm.allgather(_mpi.dipolar_slab(comm, tuple(shape)))
    counts = np.array([r[0] for r in rows], dtype=np.int64)
    return counts, np.array([r[1] for r in rows], dtype=np.int64)


def _fftw_rows(n0: int, ranks: int) -> np.ndarray:
    """x rows per rank of FFTW's default MPI slabs (blocks of ceil(n0 / ranks)),
    for messages; the layout itself comes from FFTW."""
    block = -(-n0 // ranks)
    starts = np.minimum(np.arange(ranks) * block, n0)
    return np.minimum(starts + block, n0) - starts


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
