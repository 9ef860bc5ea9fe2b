"""What every distributed model shares: the communicator, the slab layout
along the slowest axis, agreement on errors, halo exchange, gather/scatter
and checkpoints in parts.

MPI is optional.  Nothing here imports mpi4py until a model is given
``comm=``; then :func:`as_comm` checks that mpi4py and nlsepy's own MPI
extension (``nlsepy._mpi``, built when MPI and mpi4py were present at build
time) are there, and says what to install otherwise.

Layout: a global array of ``n`` rows along axis 0 is split into contiguous
slabs, rank ``r`` holding rows ``start[r] .. start[r] + count[r]``; the
first ``n % size`` ranks hold one row more.  Every collective here is
called by every rank of the communicator in the same order.
"""

from __future__ import annotations

import os
import secrets
import zipfile
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

import numpy as np

from .. import _build_config
from . import backend, errors
from .files import Key, load_checkpoint, save_checkpoint

__all__ = ["as_comm", "Layout", "Slab", "scatter", "agree", "halo_exchange", "gather_rows",
           "save_parts", "load_parts"]

_INSTALL = ("install MPI and mpi4py (Debian: apt-get install libopenmpi-dev openmpi-bin; "
            "then pip install mpi4py) and reinstall nlsepy from source so that its MPI "
            "extension is built")

T = TypeVar("T")


def _mpi_ext():
    """nlsepy's MPI extension, or ImportError saying what to install."""
    if not getattr(_build_config, "mpi", False):
        raise ImportError("comm= needs nlsepy's MPI layer, which this build does not have: "
                          + _INSTALL)
    try:
        _mpi = backend.mpi()
    except ImportError as exc:
        raise ImportError(f"comm= needs nlsepy's MPI layer, which failed to import ({exc}): "
                          + _INSTALL) from None
    return _mpi


def as_comm(comm: Any) -> Any:
    """Check that `comm` is an mpi4py intracommunicator usable here.

    Raises
    ------
    ImportError
        mpi4py or nlsepy's MPI extension is missing (the message says what
        to install).
    TypeError
        `comm` is not an mpi4py communicator.
    """
    try:
        from mpi4py import MPI
    except ImportError:
        raise ImportError("comm= needs mpi4py, which is not installed: " + _INSTALL) from None
    _mpi_ext()
    if not isinstance(comm, MPI.Intracomm):
        raise TypeError(f"comm must be an mpi4py intracommunicator such as MPI.COMM_WORLD, "
                        f"got {type(comm).__name__}: {comm!r}")
    if comm == MPI.COMM_NULL:
        raise ValueError("comm is MPI.COMM_NULL: pass a valid communicator")
    return comm


def split(n: int, size: int) -> Tuple[np.ndarray, np.ndarray]:
    """Rows per rank and first rows of `n` rows over `size` ranks."""
    counts = np.full(size, n // size, dtype=np.int64)
    counts[: n % size] += 1
    starts = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
    return counts, starts


@dataclass(frozen=True)
class Layout:
    """The slabs of a global grid over the ranks of a communicator.

    Attributes
    ----------
    comm : mpi4py.MPI.Intracomm
    shape : tuple of int
        Global shape; slabs split axis 0.
    rank, size : int
    counts, starts : numpy.ndarray
        Rows held and first row, per rank.
    """

    comm: Any
    shape: Tuple[int, ...]
    rank: int
    size: int
    counts: np.ndarray
    starts: np.ndarray

    @classmethod
    def of(cls, comm: Any, shape: Sequence[int]) -> "Layout":
        counts, starts = split(int(shape[0]), comm.Get_size())
        return cls(comm, tuple(int(n) for n in shape), comm.Get_rank(), comm.Get_size(),
                   counts, starts)

    @property
    def start(self) -> int:
        return int(self.starts[self.rank])

    @property
    def count(self) -> int:
        return int(self.counts[self.rank])

    @property
    def local_slice(self) -> Tuple[slice, ...]:
        """This rank's part of a global array: ``global_array[local_slice]``."""
        return (slice(self.start, self.start + self.count),) + (slice(None),) * (
            len(self.shape) - 1)

    @property
    def local_shape(self) -> Tuple[int, ...]:
        return (self.count,) + self.shape[1:]

    def require_rows(self, rows: int, why: str) -> None:
        """Every rank holds at least `rows` rows (else a ValueError on every rank)."""
        least = int(self.counts.min())
        if least < rows:
            raise ValueError(
                f"{self.size} ranks split the {self.shape[0]} rows of axis 0 of the grid "
                f"{self.shape} into slabs of {least} rows, but {why} needs at least {rows} "
                f"per rank: use at most {max(1, self.shape[0] // rows)} ranks")


@dataclass(frozen=True)
class Slab:
    """One rank's part of a distributed array (what :func:`scatter` returns).

    Pass it where a model takes the global initial state to give each rank
    only its part.

    Attributes
    ----------
    data : numpy.ndarray
        The local rows.
    start : int
        Global index of the first local row along axis 0.
    shape : tuple of int
        Global shape.
    """

    data: np.ndarray
    start: int
    shape: Tuple[int, ...]


def scatter(array: Optional[np.ndarray], comm: Any, root: int = 0) -> Slab:
    """Split a global array held by `root` into the slabs along axis 0.

    Parameters
    ----------
    array : numpy.ndarray or None
        The global array on `root` (ignored on the other ranks).
    comm : mpi4py.MPI.Intracomm
        The communicator; every rank calls this.
    root : int, optional
        The rank that holds `array`.

    Returns
    -------
    Slab
        This rank's rows, as every model with ``comm=`` lays them out.

    Examples
    --------
    >>> from mpi4py import MPI                       # doctest: +SKIP
    >>> part = nl.scatter(psi0 if MPI.COMM_WORLD.rank == 0 else None, MPI.COMM_WORLD)
    >>> sim = nl.NLSE(part, spacing=0.1, comm=MPI.COMM_WORLD)  # doctest: +SKIP
    """
    comm = as_comm(comm)
    if not isinstance(root, (int, np.integer)) or not 0 <= root < comm.Get_size():
        raise ValueError(f"root must be a rank in [0, {comm.Get_size() - 1}], got {root!r}")

    def header() -> Tuple[Tuple[int, ...], str]:
        a = np.asarray(array)
        if a.ndim < 1 or a.dtype.kind not in "fc" or a.size == 0:
            raise ValueError(f"scatter: array must be a non-empty real or complex array, got "
                             f"dtype {a.dtype} shape {a.shape}")
        return tuple(a.shape), a.dtype.str

    head = agree(comm, header, only=root)
    shape, dt = comm.bcast(head, root=root)
    lay = Layout.of(comm, shape)
    plane = int(np.prod(shape[1:], dtype=np.int64))
    local = np.empty(lay.local_shape, dtype=np.dtype(dt))
    send = None
    if comm.Get_rank() == root:
        a = np.ascontiguousarray(array, dtype=np.dtype(dt))
        send = [a, (lay.counts * plane).tolist(), (lay.starts * plane).tolist(), _mpi_type(a)]
    comm.Scatterv(send, [local, _mpi_type(local)], root=root)
    return Slab(local, lay.start, shape)


def _mpi_type(a: np.ndarray) -> Any:
    from mpi4py import MPI
    return {"c8": MPI.C_FLOAT_COMPLEX, "c16": MPI.C_DOUBLE_COMPLEX, "f4": MPI.FLOAT,
            "f8": MPI.DOUBLE}[a.dtype.kind + str(a.dtype.itemsize)]


def agree(comm: Any, fn: Callable[[], T], only: Optional[int] = None) -> T:
    """Run ``fn()`` on every rank (or on rank `only`); if it raised anywhere,
    raise the same exception on every rank.

    The error of the lowest failing rank is raised everywhere, its message
    prefixed with the rank when the communicator has several, so a bad input
    on one rank is a clear error on all of them rather than a hang of the
    others in the next collective call.
    """
    result: Any = None
    failure: Tuple[str, str] = ("", "")
    if only is None or comm.Get_rank() == only:
        try:
            result = fn()
        except (ValueError, TypeError, MemoryError, FileNotFoundError, OSError, RuntimeError,
                ImportError, errors.BlowUpError, errors.BackendError) as exc:
            failure = (type(exc).__name__, str(exc))
    everyone = comm.allgather(failure)
    for rank, (kind, message) in enumerate(everyone):
        if kind:
            cls = _EXCEPTIONS.get(kind, RuntimeError)
            prefix = f"rank {rank}: " if comm.Get_size() > 1 else ""
            raise cls(prefix + message)
    return result


_EXCEPTIONS: Dict[str, type] = {
    "ValueError": ValueError, "TypeError": TypeError, "MemoryError": MemoryError,
    "FileNotFoundError": FileNotFoundError, "OSError": OSError, "RuntimeError": RuntimeError,
    "ImportError": ImportError, "BlowUpError": errors.BlowUpError,
    "BackendError": errors.BackendError,
}


def halo_exchange(table: Any, layout: "Layout", lower: np.ndarray, upper: np.ndarray,
                  recv_lower: np.ndarray, recv_upper: np.ndarray, periodic: bool) -> None:
    """Swap boundary rows with the neighbouring ranks through the communicator
    table (`table`: :func:`capsule` of the layout's communicator).

    `lower` (this rank's first owned rows) goes to the rank below, whose
    `recv_upper` receives them; `upper` (the last owned rows) goes to the
    rank above, into its `recv_lower`.  Without `periodic` the first and last
    ranks have no neighbour on their outer side (their receive buffers are
    left as they are).  The four arrays are C-contiguous and of one size.
    """
    below = periodic or layout.rank > 0
    above = periodic or layout.rank < layout.size - 1
    _mpi_ext().halo_swap(table, lower if below else None, recv_lower if below else None,
                         upper if above else None, recv_upper if above else None)


def gather_rows(layout: Layout, local: np.ndarray, root: Optional[int] = 0) -> Optional[np.ndarray]:
    """The global array from every rank's slab: on `root` (None elsewhere), or
    on every rank when `root` is None."""
    comm = layout.comm
    local = np.ascontiguousarray(local)
    shape = layout.shape if local.ndim == len(layout.shape) else (layout.shape[0],) + local.shape[1:]
    plane = int(np.prod(shape[1:], dtype=np.int64))
    counts, displs = (layout.counts * plane).tolist(), (layout.starts * plane).tolist()
    if root is None:
        out = np.empty(shape, local.dtype)
        comm.Allgatherv([local, _mpi_type(local)], [out, counts, displs, _mpi_type(out)])
        return out
    out = np.empty(shape, local.dtype) if comm.Get_rank() == root else None
    comm.Gatherv([local, _mpi_type(local)],
                 [out, counts, displs, _mpi_type(local)] if out is not None else None, root=root)
    return out


def select_gpu(comm: Any) -> int:
    """Give this rank its own GPU: the rank's index among the ranks of its
    node, modulo the node's device count (``cudaSetDevice(local_rank)``).
    ``NLSEPY_CUDA_DEVICE`` set in the environment picks the device instead
    (e.g. several ranks sharing one GPU).  Collective.  Returns the device."""
    from mpi4py import MPI
    _cuda = backend.cuda()
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    local = node.Get_rank()
    node.Free()
    forced = os.environ.get("NLSEPY_CUDA_DEVICE", "").strip()
    ndev = _cuda.device_count()
    device = int(forced) if forced else local % max(1, ndev)
    _cuda.set_device(device)
    return device


def no_ipc_reason(comm: Any) -> str:
    """Why the ranks of `comm` do not share device buffers by CUDA IPC:
    ``NLSEPY_HALO=host`` is set, or the ranks are on several nodes; "" when
    they may (collective unless ``NLSEPY_HALO=host``, which every rank sees)."""
    from mpi4py import MPI
    if os.environ.get("NLSEPY_HALO", "").strip().lower() == "host":
        return "NLSEPY_HALO=host"
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    one_node = node.Get_size() == comm.Get_size()
    node.Free()
    return "" if one_node else "the ranks are on several nodes"


class IpcHalo:
    """Halo rows exchanged device to device between the GPU ranks of one node.

    Each rank owns two device mailboxes (its first and its last owned rows,
    ``nbytes`` each), shares them by CUDA IPC handles swapped once, and maps
    the neighbours' ones: the rank below's last rows feed this rank's lower
    halo, the rank above's first rows its upper halo (peer copies over
    NVLink or PCIe, no host memory, no CUDA-aware MPI).

    Parameters
    ----------
    comm : mpi4py communicator
    cuda : module
        nlsepy's CUDA extension (``device_alloc``, ``ipc_*``).
    nbytes : int
        Bytes of one side's halo.
    lower, upper : bool
        This rank has a neighbour below / above.
    """

    def __init__(self, comm: Any, cuda: Any, nbytes: int, lower: bool, upper: bool) -> None:
        self.comm, self.cuda, self.nbytes = comm, cuda, int(nbytes)
        self.lower, self.upper = lower, upper
        self.mail: List[int] = []
        self.peers: Dict[str, int] = {}
        self.why = ""
        # a neighbour may still be reading this rank's mailboxes: the last
        # swap left out its closing barrier and no collective has passed since
        self.unsettled = False

    def open(self) -> bool:
        """Set up the mailboxes (collective).  False, with :attr:`why`, when
        the ranks span several nodes, ``NLSEPY_HALO=host`` is set or a rank
        cannot share device memory: then the caller stages through the host."""
        self.why = no_ipc_reason(self.comm)
        if self.why:
            return False
        rank, size = self.comm.Get_rank(), self.comm.Get_size()
        why, handles = "", None
        try:
            self.mail = [self.cuda.device_alloc(self.nbytes) for _ in range(2)]
            handles = tuple(self.cuda.ipc_handle(m) for m in self.mail)
        except Exception as exc:
            why = f"rank {rank}: {exc}"
        everyone = self.comm.allgather(handles)
        if all(h is not None for h in everyone):
            try:
                if self.lower:
                    self.peers["lower"] = self.cuda.ipc_open(everyone[(rank - 1) % size][1])
                if self.upper:
                    self.peers["upper"] = self.cuda.ipc_open(everyone[(rank + 1) % size][0])
            except Exception as exc:
                why = f"rank {rank}: {exc}"
        elif not why:
            why = "another rank could not share its device buffers"
        whys = [w for w in self.comm.allgather(why) if w]
        if whys:
            self.why = whys[0]
            self.close()
            return False
        return True

    def swap(self, put: Callable[[int, int], None], get: Callable[[str, int], None],
             settle: bool = True) -> None:
        """``put(side, address)`` copies this rank's first (side 0) and last
        (side 1) owned rows to its mailboxes; ``get(which, address)`` copies
        a neighbour's mailbox ("lower" or "upper") into the halo.  Both
        return when their copies are complete.

        The closing barrier (every neighbour has read this rank's mailboxes
        before they are written again or freed) is left out with
        ``settle=False``: the caller then calls :meth:`settled` after a
        collective that every rank completes (each rank enters it after its
        reads, so completing it on this rank proves them done), e.g. the
        agreed blow-up check of the next step.  A swap that finds no such
        collective since the last one takes the barrier first, so the
        mailboxes are never written while a neighbour reads them.
        """
        if self.unsettled:
            self.comm.Barrier()
        put(0, self.mail[0])
        put(1, self.mail[1])
        self.comm.Barrier()
        for which, addr in self.peers.items():
            get(which, addr)
        if settle:
            self.comm.Barrier()  # read before anyone writes its mailbox again
        self.unsettled = not settle

    def settled(self) -> None:
        """Every rank has completed a collective since the last swap (so it
        has finished reading the mailboxes)."""
        self.unsettled = False

    def close(self) -> None:
        for addr in self.peers.values():
            self.cuda.ipc_close(addr)
        for addr in self.mail:
            self.cuda.device_free(addr)
        self.peers, self.mail = {}, []

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # the context may be gone at exit
            pass


def check_root(comm: Any, root: Optional[int]) -> None:
    if root is None:
        return
    if not isinstance(root, (int, np.integer)) or isinstance(root, bool) or \
            not 0 <= root < comm.Get_size():
        raise ValueError(f"root must be a rank in [0, {comm.Get_size() - 1}] or None (every "
                         f"rank), got {root!r}")


def ordered_sum(comm_capsule: Any, values: Sequence[float]) -> np.ndarray:
    """Sum over the ranks of each value, added in rank order (same bits on
    every rank, whatever the message timing)."""
    return _mpi_ext().ordered_sum(comm_capsule, np.asarray(values, dtype=np.float64))


def ordered_max(comm_capsule: Any, values: Sequence[float]) -> np.ndarray:
    """Maximum over the ranks of each value (NaN wins)."""
    return _mpi_ext().ordered_max(comm_capsule, np.asarray(values, dtype=np.float64))


def capsule(comm: Any) -> Any:
    """The reduction table over a duplicate of `comm`, for the C solvers."""
    return _mpi_ext().comm_capsule(comm)


def info(comm: Any) -> Dict[str, Any]:
    """Rank, size and the MPI library behind `comm`."""
    return dict(_mpi_ext().info(comm))


# ---------------------------------------------------------------- checkpoints
def part_name(path: str, rank: int, size: int) -> str:
    """The file of rank `rank`'s part of the distributed checkpoint `path`."""
    base = os.path.basename(path)
    stem = base[:-4] if base.endswith(".npz") else base
    return os.path.join(os.path.dirname(path), f"{stem}.part{rank:04d}of{size:04d}.npz")


def save_parts(path: str, model: str, layout: Layout, slabs: Dict[str, np.ndarray],
               **scalars: Any) -> None:
    """Write a distributed checkpoint: every rank its slabs (one ``.npz``
    each), then rank 0 the index `path` (an ordinary nlsepy checkpoint of
    `model` with the scalars, the global shape and the parts' names and
    rows).  The index appears only once every part is complete, so the
    checkpoint is whole or absent.  Index and parts carry the save's
    fingerprint (a random token drawn by rank 0), so that parts left by
    another save (one interrupted before its index was written) are refused.
    Any number of ranks (or one process) loads it back with :func:`load_parts`.
    """
    path = os.fspath(path)
    comm = layout.comm
    part = part_name(path, layout.rank, layout.size)
    token = np.array(comm.bcast(secrets.token_hex(16) if layout.rank == 0 else None, root=0))
    agree(comm, lambda: save_checkpoint(
        part, model + ".part", rows=np.array([layout.start, layout.count]), fingerprint=token,
        **slabs))
    names = [os.path.basename(part_name(path, r, layout.size)) for r in range(layout.size)]
    rows = np.stack([layout.starts, layout.counts], axis=1)

    def index() -> None:
        save_checkpoint(path, model, distributed=True, parts=np.array(names),
                        part_rows=rows, global_shape=np.array(layout.shape), fingerprint=token,
                        **scalars)
    agree(comm, index, only=0)


def is_parts_index(path: str) -> bool:
    """Whether `path` is the index of a distributed checkpoint."""
    try:
        if not zipfile.is_zipfile(path):
            return False
        with np.load(path) as d:
            return "distributed" in d.files and "parts" in d.files
    except (OSError, ValueError, NotImplementedError):  # damaged: load_checkpoint says how
        return False


def load_parts(path: str, model: str, keys: Dict[str, Any], slab_keys: Dict[str, Any],
               rows: Optional[Tuple[int, int]] = None) -> Dict[str, Any]:
    """Read a distributed checkpoint: the scalars of `keys` from the index and,
    for each name of `slab_keys`, the global rows ``rows = (start, count)``
    (all rows when None) stitched from the parts."""
    path = os.fspath(path)
    idx_keys = dict(keys)
    idx_keys.update(distributed=Key("bool"), parts=Key("array", "U", ndim=(1,)),
                    part_rows=Key("array", "iu", ndim=(2,)),
                    global_shape=Key("array", "iu", ndim=(1,)),
                    fingerprint=Key("str", optional=True))  # absent before fingerprints
    d = load_checkpoint(path, model, idx_keys)
    token = d.pop("fingerprint", None)
    shape = tuple(int(n) for n in d["global_shape"])
    prow = d["part_rows"]
    if prow.shape != (len(d["parts"]), 2) or int(prow[:, 1].sum()) != shape[0]:
        raise ValueError(f"{path}: the parts' rows do not cover the {shape[0]} rows of the grid")
    start, count = (0, shape[0]) if rows is None else rows
    pieces: Dict[str, List[np.ndarray]] = {k: [] for k in slab_keys}
    folder = os.path.dirname(path)
    for name, (p0, pn) in zip(d["parts"], prow.tolist()):
        lo, hi = max(start, p0), min(start + count, p0 + pn)
        if lo >= hi:
            continue
        if os.path.basename(str(name)) != str(name):
            raise ValueError(f"{path}: part name {str(name)!r} is not a plain file name")
        pkeys = dict(slab_keys)
        pkeys.update(rows=Key("array", "iu", ndim=(1,)), fingerprint=Key("str", optional=True))
        part = load_checkpoint(os.path.join(folder, str(name)), model + ".part", pkeys)
        if part.get("fingerprint") != token:
            raise ValueError(f"{path}: part {name} belongs to another save (fingerprint "
                             f"{part.get('fingerprint')!r}, the index has {token!r}): a save "
                             f"that stopped before writing its index left it")
        if part["rows"].tolist() != [p0, pn]:
            raise ValueError(f"{path}: part {name} holds rows {part['rows'].tolist()}, the "
                             f"index says {[p0, pn]}")
        for k in slab_keys:
            arr = part[k]
            if arr.size == 0:
                pieces[k].append(arr)
                continue
            if arr.shape[0] != pn:
                raise ValueError(f"{path}: part {name} entry {k!r} has {arr.shape[0]} rows, "
                                 f"expected {pn}")
            pieces[k].append(arr[lo - p0:hi - p0])
    out = {k: v for k, v in d.items()}
    out["global_shape"] = shape
    for k, v in pieces.items():
        nonempty = [a for a in v if a.size]
        out[k] = np.concatenate(nonempty, axis=0) if nonempty else (v[0] if v else None)
    return out
