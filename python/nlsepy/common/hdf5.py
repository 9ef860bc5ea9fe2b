"""Runs on disk: frames and time series streamed into one HDF5 file.

A model's ``run(..., output="run.h5")`` writes, as the run goes, one HDF5
file through h5py (the ``hdf5`` extra) and :func:`open_run` reads it back as
an ``xarray.Dataset`` (or, without xarray, a dict of NumPy arrays).

Layout
    ``/psi``            the frames, shape ``(frames,) + grid``: one chunk per
                        frame (split along the grid's first axis only where a
                        frame exceeds :data:`MAX_CHUNK_BYTES`), written
                        uncompressed by default (:data:`COMPRESSION`; see
                        bench/RESULTS.md for the measurement behind it),
                        each chunk with its Fletcher32 checksum
                        (:data:`FLETCHER32`): a changed byte is an error
                        when read, not a wrong state.
    ``/t``              the frames' times, written *last* for each frame:
                        its length is the number of whole frames.
    ``/norm`` ...       one dataset per scalar time series (the model's
                        observables at each frame).
    ``/x``, ``/y`` ...  grid coordinates (HDF5 dimension scales attached to
                        the axes of ``/psi``).
    ``/parameters``     every parameter of the model: numbers, strings and
                        short tuples as attributes of the group, arrays as
                        datasets in it.
    root attributes     ``model``, ``units`` (the model's unit system),
                        ``nlsepy_version``, ``backend``, ``date`` (UTC,
                        ISO 8601), ``time`` (``"real"`` or ``"imaginary"``),
                        ``complete`` (False until the run returns).
    Every dataset carries ``dims`` (its axis names, a comma-separated
    string), ``units`` and ``long_name`` attributes.

Whole or consistent
    The output path is checked before the run starts (type, extension,
    folder, a regular file or a link to one, h5py installed, no other
    writer holding HDF5's lock on it: HDF5 would truncate the file before
    failing on the lock); nothing is created or changed for a bad argument.
    Before each frame the writer checks this process's file-size limit
    (``RLIMIT_FSIZE``) and stops with ``EFBIG`` while the file still holds
    the frames before it (a write cut short by the limit would leave HDF5's
    metadata pointing past the end of the file).  The
    file is created once the run's first frame is taken and the header is
    written whole or the file is removed.  Each frame is handed, with
    SIGINT held (:func:`nlsepy.common.guard.deferred_sigint`), to a writer thread
    of the file, which appends it and flushes the file after it (frames of
    :data:`SYNC_BYTES` and more it also puts on the disk and drops from the
    page cache); the run goes on meanwhile (at most :data:`QUEUE_FRAMES`
    frames ahead).  When a
    run ends, Ctrl-C and errors included, the frames it took are written
    and the file closed before ``run`` returns or raises; a killed process
    leaves the file as of its last flush.  Either way the frames written
    are readable with plain h5py, and :func:`open_run` reads such a file,
    trimming every series to the length of its coordinate.

Distributed runs (``comm=``)
    Nothing is gathered (:class:`Recorder`).  Each rank streams its slab of
    every frame (its rows of axis 0) into its own part file beside the run
    file, ``<stem>.partRRRRofNNNN.h5`` (a :class:`RunFile` with its writer
    thread, flushed per frame; ``/psi`` of shape ``(frames, rows, ...)``,
    its ``/t`` and, under ``/slabs``, its rows of whole-grid parameters such
    as ``V``; root attribute ``format`` ``"nlsepy run part"``).  Rank 0
    writes the run file itself: the header, the series and ``/t`` as above,
    root attributes ``ranks`` and ``layout``, the group ``/parts``
    (``files``, the part names; ``rows``, each part's first row and rows),
    and ``/psi`` and ``/parameters/V`` as HDF5 virtual datasets mapping the
    parts' slabs into the global arrays, with relative file names (HDF5
    looks beside the run file first, so the folder can move).  ``/psi``
    has an unlimited first axis mapped onto the parts' unlimited first
    axes: it grows as they do, with no rewriting of the run file, and plain
    h5py reads it as one array.  A frame's time and series reach the run
    file once every part has flushed that frame, so ``/t`` still counts the
    whole frames (``/psi`` may read one more, with the fill value, 0, where
    a part had not flushed it).  :func:`open_run` also checks the parts: a
    missing one is an error (HDF5 would read zeros), and the frames are
    those whole in every part.  Replacing a run file removes the part files
    it named.  h5py without MPI suffices.
"""

from __future__ import annotations

import datetime
import errno
import os
import queue
import re
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import dist as _dist
from .files import HDF5_GROUP, atomic_path, check_target
from .guard import deferred_sigint
from .version import __version__

try:  # POSIX: the file-size limit a writer checks before each frame, and file locks
    import fcntl
    import resource
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]
    resource = None  # type: ignore[assignment]

__all__ = ["RunHeader", "RunFile", "Run", "check_output", "check_target", "open_run",
           "save_state", "save_arrays", "require_h5py", "EXTENSIONS", "COMPRESSION",
           "FLETCHER32"]

#: file name endings :func:`check_output` accepts
EXTENSIONS = (".h5", ".hdf5")

#: the filter of the frame datasets: None (uncompressed, each frame written
#: as one raw chunk), "lzf" or "gzip" (HDF5's filter pipeline, level
#: :data:`GZIP_LEVEL`).  None is the default: on double-precision states lzf
#: keeps 67 % and gzip level 1 53 % of the bytes, at 20 and 70 times the
#: time of writing the frame as one raw chunk, and a 128^3 run costs twice
#: and four times as much with them (bench/hdf5.py, bench/RESULTS.md).
COMPRESSION: Optional[str] = None
GZIP_LEVEL = 1

#: HDF5's Fletcher32 checksum filter on the frame datasets: each chunk (a
#: frame) is stored with its checksum, and HDF5 refuses to read a chunk
#: whose bytes no longer match it (a flipped bit on the disk is an error,
#: not a wrong state).  The frames then go through HDF5's filter pipeline
#: instead of being written as raw chunks (bench/hdf5.py measures the cost).
FLETCHER32 = True

#: bytes a frame's write may add to the file besides the frame's values (the
#: series, the chunk index, the metadata flushed after it and at the close):
#: the room a writer leaves under a file-size limit (RLIMIT_FSIZE)
FRAME_SLACK = 256 << 10

#: largest chunk of a frame dataset (HDF5 refuses chunks of 4 GiB and more)
MAX_CHUNK_BYTES = 1 << 30

#: elements per chunk of a scalar time series
SERIES_CHUNK = 256

#: entries a run may be ahead of the writer thread before it waits for it
QUEUE_FRAMES = 2

#: frames of at least this many bytes are put on the disk (``fdatasync``) and
#: dropped from the page cache (``POSIX_FADV_DONTNEED``) by the writer thread
#: after their flush (0: never).  A 128^3 complex128 run writing 32 MiB a
#: frame is then slowed about half as much as when the kernel writes the
#: pages back and reclaims them later on the cores that step (bench/RESULTS.md);
#: smaller frames are left to the page cache (one disk round trip each would
#: cost more than it saves).
SYNC_BYTES = 8 << 20

#: record the model's scalar series (``_record_scalars``) with every frame;
#: False writes the frames alone (bench/hdf5.py measures what they cost)
RECORD_SCALARS = True

_INSTALL = "pip install 'nlsepy[hdf5]'"


def require_h5py() -> Any:
    """The h5py module, or ImportError naming the extra that installs it."""
    try:
        import h5py
    except ImportError as exc:
        raise ImportError(f"writing or reading a run file needs h5py: {_INSTALL} (the 'hdf5' "
                          f"extra installs h5py)") from exc
    return h5py


def check_output(output: Any, what: str = "output") -> str:
    """Check an output path before a run starts; return it as an absolute path.

    Parameters
    ----------
    output : str or os.PathLike
        The HDF5 file to write (``.h5`` or ``.hdf5``); an existing file is
        replaced when the run starts.
    what : str, optional
        The argument's name, for the messages.

    Returns
    -------
    str

    Raises
    ------
    TypeError
        `output` is not a path.
    ValueError
        A wrong extension, or the path names a folder, a device, a FIFO or
        a socket (a link is followed to its target).
    FileNotFoundError
        The folder does not exist.
    PermissionError
        The folder or the existing file cannot be written.
    OSError
        ``errno.EBUSY``: another run or program holds the file open (HDF5's
        lock); the file is left as it is.
    ImportError
        h5py is not installed.
    """
    if isinstance(output, (bytes, bytearray)) or not isinstance(output, (str, os.PathLike)):
        raise TypeError(f"{what} must be a path (str or os.PathLike) of an HDF5 file, "
                        f"got {type(output).__name__}: {output!r}")
    path = os.fspath(output)
    if not isinstance(path, str):
        raise TypeError(f"{what} must be a text path, got {path!r}")
    if not path.strip() or "\0" in path:
        raise ValueError(f"{what} must name an HDF5 file, got {path!r}")
    if not path.lower().endswith(EXTENSIONS):
        raise ValueError(f"{what} = {path!r} must name an HDF5 file ending in "
                         f"{' or '.join(EXTENSIONS)} (checkpoints stay .npz: checkpoint=)")
    path = check_target(os.path.abspath(path), what)
    if os.path.isdir(path):
        raise ValueError(f"{what} = {path!r} is a folder, not a file")
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{what} = {output!r}: the folder {folder!r} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(f"{what} = {output!r}: cannot write in the folder {folder!r}")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise PermissionError(f"{what} = {output!r}: the existing file cannot be replaced")
    refuse_in_use(path, what)
    require_h5py()
    return path


def refuse_in_use(path: str, what: str = "output") -> None:
    """Raise when another writer holds the HDF5 file `path` open (HDF5's
    lock), before anything opens it for writing: HDF5 would truncate it
    first and fail on the lock after, leaving that run's file unreadable.

    Raises
    ------
    OSError
        ``errno.EBUSY``, naming the file.
    """
    if fcntl is None:
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return  # no such file (or unreadable: the open for writing says why)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OSError(errno.EBUSY, f"{what} = {path!r} is held open by another run or "
                                       f"program (HDF5's lock); it is left as it is: choose "
                                       f"another file, or wait for that run to end", path) \
                from None
        except OSError:
            return  # a file system without locks: as HDF5 itself then does
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@dataclass
class RunHeader:
    """What a model tells its run file besides the frames.

    Attributes
    ----------
    model : str
        The class name.
    parameters : dict
        Every parameter: numbers, strings, bools, None, tuples, arrays.
    units : str
        The model's unit system in a sentence (root attribute ``units``).
    coords : dict
        Static coordinates: name -> ``(dims, array, units, long_name)``.
    dims : dict
        Per-frame variables: name -> the axis names of one frame (``()``
        for a scalar series).
    var_units : dict
        Per-frame variables and growing coordinates: name -> units.
    long_names : dict
        Per-frame variables and growing coordinates: name -> description.
    backend : str
        ``"cpu"`` or ``"cuda"``.
    slabs : dict
        A distributed model's parameters that are whole-grid arrays (the
        potential ``V``): name -> this rank's rows of it (axis 0 split as
        the frames are).  Each rank writes its rows to its part file and the
        main file maps them into ``/parameters/<name>``; none is gathered.
    """

    model: str
    parameters: Dict[str, Any]
    units: str
    coords: Dict[str, Tuple[Tuple[str, ...], np.ndarray, str, str]]
    dims: Dict[str, Tuple[str, ...]]
    var_units: Dict[str, str] = field(default_factory=dict)
    long_names: Dict[str, str] = field(default_factory=dict)
    backend: str = "cpu"
    slabs: Dict[str, np.ndarray] = field(default_factory=dict)


def _version() -> str:
    try:
        return str(__version__)
    except ImportError:  # during the package's own import
        return "unknown"


def _attr_value(value: Any) -> Any:
    """A value HDF5 can hold as an attribute, or None (store as a dataset)."""
    if value is None:
        return "None"
    if isinstance(value, (bool, np.bool_)):
        return np.bool_(value)
    if isinstance(value, (int, float, complex, str, np.number)):
        return value
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return np.dtype(value).name
    if isinstance(value, (tuple, list)):
        if all(isinstance(v, str) for v in value):
            return np.array(value, dtype=object) if value else np.zeros(0)
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError):
            return str(value)
        if arr.dtype.kind in "biufc" and arr.size <= 64:
            return arr
        return None if arr.dtype.kind in "biufc" else str(value)
    if isinstance(value, np.ndarray):
        return value if value.ndim <= 1 and value.size <= 64 else None
    return str(value)


class RunFile:
    """One run's HDF5 file, appended frame by frame (see the module notes).

    Parameters
    ----------
    path : str
        Checked by :func:`check_output`; replaced if it exists.
    header : RunHeader
        What the model tells besides the frames.
    time : {"real", "imaginary"}, optional
        The kind of run (root attribute ``time``).
    compression : str or None, optional
        Filter of the frame datasets (default :data:`COMPRESSION`).
    attrs : mapping, optional
        More root attributes (written after the standard ones, which they
        may replace: a part file's ``format``).

    Notes
    -----
    The entries are written by one thread of their own, in order, while the
    run goes on: the time a write waits for the disk (the kernel holds a
    writer back once enough of its pages are waiting to reach the disk) is
    not taken from the steps.  A frame may be a
    ``concurrent.futures.Future`` (a state on its way from a device): that
    thread waits for it.  The arrays handed in must not change afterwards
    (the runner's frames are copies it keeps).
    """

    def __init__(self, path: str, header: RunHeader, time: str = "real",
                 compression: Any = "default", attrs: Optional[Mapping[str, Any]] = None) -> None:
        h5py = require_h5py()
        self.path = path
        self.header = header
        self.compression = COMPRESSION if compression == "default" else compression
        if self.compression not in (None, "lzf", "gzip"):
            raise ValueError(f"compression must be None, 'lzf' or 'gzip', got "
                             f"{self.compression!r}")
        self._queue: "queue.Queue[Any]" = queue.Queue(maxsize=QUEUE_FRAMES)
        self._thread: Optional[threading.Thread] = None
        self._error: Optional[BaseException] = None
        self._failed = False
        self._counts: Dict[str, int] = {}
        self._flushed: Dict[str, int] = {}  # entries along each axis whole on the file
        self._ds: Dict[str, Any] = {}  # growing datasets by name, with their raw flag
        self._virtual: List[Any] = []  # growing virtual datasets and their axis names
        self._h5 = h5py
        refuse_in_use(path, "the run file")  # HDF5 truncates before it locks
        self._f: Any = h5py.File(path, "w")
        try:
            self._write_header(time)
            for key, value in (attrs or {}).items():
                self._f.attrs[key] = value
            self._f.flush()
        except BaseException:
            self._f.close()
            self._f = None
            try:
                os.remove(path)
            except OSError:
                pass
            raise

    # ------------------------------------------------------------- header
    def _write_header(self, time: str) -> None:
        f, hd = self._f, self.header
        f.attrs["model"] = hd.model
        f.attrs["units"] = hd.units
        f.attrs["nlsepy_version"] = _version()
        f.attrs["backend"] = hd.backend
        f.attrs["date"] = datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds")
        f.attrs["time"] = time
        f.attrs["complete"] = False
        f.attrs["format"] = "nlsepy run"
        group = f.create_group("parameters")
        for name, value in hd.parameters.items():
            attr = _attr_value(value)
            if attr is None:
                group.create_dataset(name, data=np.asarray(value))
            else:
                group.attrs[name] = attr
        for name, (dims, arr, units, long_name) in hd.coords.items():
            ds = f.create_dataset(name, data=np.asarray(arr))
            self._label(ds, dims, units, long_name, coordinate=True)
            if len(dims) == 1 and dims[0] == name:
                ds.make_scale(name)
        if hd.slabs:
            slabs = f.create_group("slabs")
            for name, arr in hd.slabs.items():
                slabs.create_dataset(name, data=np.ascontiguousarray(arr))

    @staticmethod
    def _label(ds: Any, dims: Sequence[str], units: str, long_name: str,
               coordinate: bool = False) -> None:
        ds.attrs["dims"] = ",".join(dims)
        ds.attrs["units"] = units
        ds.attrs["long_name"] = long_name
        if coordinate:
            ds.attrs["coordinate"] = True

    def _chunks(self, shape: Tuple[int, ...], itemsize: int) -> Tuple[int, ...]:
        """One frame per chunk; split along the frame's first axis when larger
        than :data:`MAX_CHUNK_BYTES`."""
        if not shape:
            return (SERIES_CHUNK,)
        nbytes = int(np.prod(shape)) * itemsize
        if nbytes <= MAX_CHUNK_BYTES:
            return (1,) + shape
        row = max(1, nbytes // shape[0])
        rows = max(1, MAX_CHUNK_BYTES // row)
        return (1, min(rows, shape[0])) + shape[1:]

    def _create(self, dim: str, name: str, value: np.ndarray) -> Any:
        """The growing dataset `name` along `dim` for entries like `value`."""
        hd, f = self.header, self._f
        shape = tuple(value.shape)
        chunks = self._chunks(shape, value.dtype.itemsize)
        opts: Dict[str, Any] = {}
        if shape and self.compression is not None:
            opts["compression"] = self.compression
            if self.compression == "gzip":
                opts["compression_opts"] = GZIP_LEVEL
        if shape and FLETCHER32:
            opts["fletcher32"] = True
        ds = f.create_dataset(name, shape=(0,) + shape, maxshape=(None,) + shape,
                              dtype=value.dtype, chunks=chunks, **opts)
        dims = (dim,) + tuple(hd.dims.get(name, ()))[: len(shape)]
        if len(dims) != 1 + len(shape):
            dims = (dim,) + tuple(f"{name}_{q}" for q in range(len(shape)))
        self._label(ds, dims, hd.var_units.get(name, ""), hd.long_names.get(name, name))
        for q, d in enumerate(dims):
            if d in f and d != name and f[d].is_scale:
                ds.dims[q].attach_scale(f[d])
        return ds

    # ------------------------------------------------------------- virtual
    def add_virtual(self, name: str, dtype: Any, shape: Tuple[int, ...],
                    sources: Sequence[Tuple[str, str, int, int]],
                    dim: Optional[str] = None, group: str = "/") -> Any:
        """A virtual dataset `name` (in `group`) of global shape `shape`
        whose rows along the first axis of `shape` come from other files.

        Parameters
        ----------
        name : str
        dtype : numpy.dtype
        shape : tuple of int
            One entry's global shape (a frame's; the whole array's for a
            static one).
        sources : sequence of (file, dataset, start, count)
            Rows ``start .. start + count`` of axis 0 of `shape` are the
            dataset `dataset` of `file`, a name relative to this file's
            folder (HDF5 looks there first, so the files can move
            together).  Sources of no rows are left out.
        dim : str, optional
            Growing along this frame axis: the dataset's first axis is
            unlimited and maps the sources' unlimited first axes, so it
            grows as they do (HDF5 reads the extent from the sources when
            the dataset's dataspace is asked for, the fill value beyond a
            source's end).  The dimension scales are attached by
            :meth:`close`: attaching reads the dataspace, so HDF5 would open
            the sources, which their writers hold locked until they close
            them.  None: a static array.
        group : str, optional

        Notes
        -----
        Call before the first :meth:`append` (the writer thread uses the
        file afterwards).
        """
        h5py = self._h5
        h5s, h5p, h5d, h5t = h5py.h5s, h5py.h5p, h5py.h5d, h5py.h5t
        unlim = h5s.UNLIMITED
        shape = tuple(int(n) for n in shape)
        rest = shape[1:]
        ones = (1,) * (len(shape) + 1)
        dcpl = h5p.create(h5p.DATASET_CREATE)
        for fname, dname, start, count in sources:
            if count <= 0:
                continue
            if dim is not None:
                vspace = h5s.create_simple((0,) + shape, (unlim,) + shape)
                vspace.select_hyperslab((0, start) + (0,) * len(rest), (unlim,) + ones[1:],
                                        ones, (1, count) + rest)
                sspace = h5s.create_simple((0, count) + rest, (unlim, count) + rest)
                sspace.select_hyperslab((0,) * len(ones), (unlim,) + ones[1:], ones,
                                        (1, count) + rest)
            else:
                vspace = h5s.create_simple(shape)
                vspace.select_hyperslab((start,) + (0,) * len(rest), ones[1:], None,
                                        (count,) + rest)
                sspace = h5s.create_simple((count,) + rest)
                sspace.select_all()
            dcpl.set_virtual(vspace, fname.encode(), dname.encode(), sspace)
        space = h5s.create_simple(shape, shape) if dim is None else \
            h5s.create_simple((0,) + shape, (unlim,) + shape)
        parent = self._f.require_group(group)
        tid = h5t.py_create(np.dtype(dtype), logical=1)
        h5d.create(parent.id, name.encode(), tid, space, dcpl=dcpl)
        ds = parent[name]
        if dim is None:
            return ds
        hd, f = self.header, self._f
        dims = (dim,) + tuple(hd.dims.get(name, ()))[: len(shape)]
        if len(dims) != 1 + len(shape):
            dims = (dim,) + tuple(f"{name}_{q}" for q in range(len(shape)))
        self._label(ds, dims, hd.var_units.get(name, ""), hd.long_names.get(name, name))
        self._virtual.append((ds, dims))
        f.flush()
        return ds

    def add_parts(self, names: Sequence[str], rows: np.ndarray) -> None:
        """Name a distributed run's part files (group ``/parts``: ``files``,
        their names relative to this file, and ``rows``, each part's first
        row and rows).  Call before the first :meth:`append`."""
        group = self._f.create_group("parts")
        group.create_dataset("files", data=np.array(list(names), dtype=object),
                             dtype=self._h5.string_dtype())
        group.create_dataset("rows", data=np.asarray(rows, dtype=np.int64)).attrs["columns"] = \
            "first row, rows"
        self._f.flush()

    def written(self, dim: str) -> int:
        """Entries along `dim` whole on the file (flushed); the writer
        thread raises it after each flush."""
        return self._flushed.get(dim, 0)

    def discard(self) -> None:
        """Close the file without waiting for queued entries and remove it
        (a run whose files could not all be made)."""
        if self._thread is not None:
            self._failed = True  # the writer drops what is queued
            self._queue.put(None)
            self._thread.join()
            self._thread = None
        if self._f is not None:
            f, self._f = self._f, None
            f.close()
        try:
            os.remove(self.path)
        except OSError:
            pass

    # ------------------------------------------------------------- frames
    def append(self, dim: str, value: Any, data: Mapping[str, Any]) -> None:
        """Queue one entry along `dim` (its coordinate `value`) for every
        dataset of `data`; the writer thread appends it, the coordinate
        last, and flushes the file.

        Returns at once unless :data:`QUEUE_FRAMES` entries are still
        waiting (then it waits for the writer: a disk slower than the run
        slows the run).  An error of the writer thread (a full disk, ...) is
        raised here, at the next call, or by :meth:`close`.
        """
        self._raise()
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="nlsepy-runfile",
                                            daemon=True)
            self._thread.start()
        self._queue.put((dim, value, dict(data)))

    def _raise(self) -> None:
        if self._error is not None:
            exc, self._error = self._error, None
            self._failed = True
            raise exc
        if self._failed:
            raise RuntimeError(f"{self.path}: an earlier write failed; the file holds the "
                               f"entries written before it")

    def _work(self) -> None:
        """The writer thread: write the queued entries in order, each
        followed by a flush (h5py releases the GIL while HDF5 writes)."""
        while True:
            item = self._queue.get()
            if item is None:
                return
            if self._error is not None or self._failed:
                continue  # drop what follows a failed write
            dim, value, data = item
            try:
                data = {k: v.result() if isinstance(v, Future) else v for k, v in data.items()}
                self._write(dim, value, data)
            except BaseException as exc:  # handed to the run's thread
                self._error = exc

    def _write(self, dim: str, value: Any, data: Mapping[str, Any]) -> None:
        """Append one entry; on a failure, the datasets grown for it are
        shrunk back, so the file closes with the entries written before."""
        n = self._counts.get(dim, 0)
        self._room(data)
        grown: List[Any] = []
        try:
            self._append(dim, value, data, n, grown)
        except BaseException:
            for ds in grown:
                try:
                    ds.resize(n, axis=0)
                except Exception:  # the failure under way says more
                    pass
            raise

    def _room(self, data: Mapping[str, Any]) -> None:
        """Raise ``OSError(EFBIG)`` before writing an entry that would take
        the file past this process's file-size limit (``RLIMIT_FSIZE``):
        a write cut short there leaves HDF5's metadata pointing past the
        end of the file, which then never opens again."""
        if resource is None:
            return
        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        if limit == resource.RLIM_INFINITY or limit < 0:
            return
        need = sum(int(np.asarray(v).nbytes) for v in data.values()) + FRAME_SLACK
        size = int(self._f.id.get_filesize())
        if size + need > limit:
            raise OSError(errno.EFBIG, f"{self.path}: the next frame would take the file past "
                                       f"this process's file-size limit ({limit} bytes, now "
                                       f"{size}); the file holds the frames written before it",
                          self.path)

    def _append(self, dim: str, value: Any, data: Mapping[str, Any], n: int,
                grown: List[Any]) -> None:
        f = self._f
        for name, v in data.items():
            arr = np.asarray(v)
            if name not in self._ds:
                ds = self._create(dim, name, arr)
                # a whole frame in one unfiltered chunk is written as it is
                # (no conversion buffer; several times faster than ds[n] = arr)
                raw = bool(arr.ndim) and self.compression is None and not ds.fletcher32 and \
                    ds.chunks == (1,) + arr.shape
                self._ds[name] = (ds, raw, ds.dtype)
            ds, raw, dtype = self._ds[name]
            ds.resize(n + 1, axis=0)
            grown.append(ds)
            if raw and arr.dtype == dtype and arr.shape == ds.shape[1:]:
                ds.id.write_direct_chunk((n,) + (0,) * arr.ndim,
                                         np.ascontiguousarray(arr).data)
            else:
                ds[n] = arr
        if dim not in self._ds:
            kind = np.int64 if isinstance(value, (int, np.integer)) else np.float64
            ds = f.create_dataset(dim, shape=(0,), maxshape=(None,), dtype=kind,
                                  chunks=(SERIES_CHUNK,))
            self._label(ds, (dim,), self.header.var_units.get(dim, ""),
                        self.header.long_names.get(dim, dim), coordinate=True)
            ds.make_scale(dim)
            for name in data:
                self._ds[name][0].dims[0].attach_scale(ds)
            self._ds[dim] = (ds, False, ds.dtype)
        ds = self._ds[dim][0]
        ds.resize(n + 1, axis=0)
        grown.append(ds)
        ds[n] = value
        self._counts[dim] = n + 1
        f.flush()
        self._flushed[dim] = n + 1
        if SYNC_BYTES and self._big(data):
            self._sync()

    @staticmethod
    def _big(data: Mapping[str, Any]) -> bool:
        return sum(getattr(v, "nbytes", 0) for v in data.values()) >= SYNC_BYTES

    def _sync(self) -> None:
        """Put the file's pages on the disk and drop them from the page cache
        (the writer thread waits for the disk; the run does not)."""
        try:
            fd = self._f.id.get_vfd_handle()
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        except (AttributeError, OSError, ValueError):  # not a plain file, or no such calls
            pass

    def close(self, complete: bool = True) -> None:
        """Wait for the queued entries to be written, mark the file
        ``complete`` (when `complete`) and close it.

        Ctrl-C while the last entries are written is held until the file is
        closed, then raised when `complete` (dropped otherwise: the run is
        already on its way out of an exception)."""
        if self._f is None:
            return
        with deferred_sigint() as flag:
            try:
                if self._thread is not None:
                    self._queue.put(None)
                    self._thread.join()
                    self._thread = None
                if complete:
                    self._raise()
                self._attach_virtual()
                if complete:
                    self._f.attrs["complete"] = True
            finally:
                f, self._f = self._f, None
                f.close()
                if not complete:
                    flag.hit = False

    def _attach_virtual(self) -> None:
        """Attach the coordinates' scales to the growing virtual datasets
        (their sources closed by now).  Labels only: a source HDF5 cannot
        open here leaves the dataset without them (its ``dims`` attribute
        names the axes all the same)."""
        f, virtual, self._virtual = self._f, self._virtual, []
        for ds, dims in virtual:
            try:
                for q, d in enumerate(dims):
                    if d in f and f[d].is_scale:
                        ds.dims[q].attach_scale(f[d])
            except (OSError, RuntimeError, ValueError, KeyError):
                pass

    def __enter__(self) -> "RunFile":
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        self.close(complete=kind is None)


# ------------------------------------------------------------------ saving
def _store(group: Any, arrays: Mapping[str, Any], h5py: Any) -> None:
    """`arrays` as datasets of `group` (text as UTF-8 strings)."""
    for name, value in arrays.items():
        arr = np.asarray(value)
        if arr.dtype.kind == "U":
            group.create_dataset(name, data=arr.astype(object), dtype=h5py.string_dtype())
        else:
            group.create_dataset(name, data=arr)


def save_state(path: str, model: Any, state: Any, arrays: Mapping[str, Any]) -> None:
    """Write a model's state as an HDF5 file, whole or not at all: a run
    file of one frame (`state` at ``model.t``, the model's series,
    parameters and coordinates, read back by :func:`open_run` and plain
    h5py) whose group ``checkpoint`` holds `arrays`, the checkpoint's
    entries as the ``.npz`` holds them (read back, bit for bit, by the
    model's ``load``).

    Parameters
    ----------
    path : str
        The destination (``.h5`` or ``.hdf5``).
    model : object
        A model with ``_record_header()`` and ``_record_scalars()``.
    state : numpy.ndarray
        The frame.
    arrays : mapping
        The checkpoint's entries (:func:`nlsepy.common.files.checkpoint_arrays`).
    """
    h5py = require_h5py()
    header = model._record_header()
    scalars = model._record_scalars() if RECORD_SCALARS else {}
    with atomic_path(path) as tmp:
        rf = RunFile(tmp, header, "real")
        try:
            rf.append("t", float(model.t), {"psi": np.asarray(state), **scalars})
        finally:
            rf.close(True)
        with h5py.File(tmp, "a") as f:
            _store(f.create_group(HDF5_GROUP), arrays, h5py)


def save_arrays(path: str, model: str, arrays: Mapping[str, Any],
                attrs: Mapping[str, Any]) -> None:
    """Write named arrays as an HDF5 file, whole or not at all: a run file
    with no frames (root attributes ``format`` ``"nlsepy run"``, ``model``
    and `attrs`; the arrays as datasets, parameters under ``/parameters``),
    read back by :func:`open_run` and plain h5py.

    Parameters
    ----------
    path : str
        The destination (``.h5`` or ``.hdf5``).
    model : str
        The model's name.
    arrays : mapping
        name -> array; a name ``parameters/<p>`` goes to the group.
    attrs : mapping
        More root attributes (numbers, strings).
    """
    h5py = require_h5py()
    with atomic_path(path) as tmp:
        with h5py.File(tmp, "w") as f:
            f.attrs["format"] = "nlsepy run"
            f.attrs["model"] = model
            f.attrs["nlsepy_version"] = _version()
            f.attrs["date"] = datetime.datetime.now(datetime.timezone.utc).isoformat(
                timespec="seconds")
            f.attrs["complete"] = True
            for key, value in attrs.items():
                f.attrs[key] = _attr_value(value)
            params = f.create_group("parameters")
            _store(params, {k.split("/", 1)[1]: v for k, v in arrays.items()
                            if k.startswith("parameters/")}, h5py)
            _store(f, {k: v for k, v in arrays.items() if not k.startswith("parameters/")},
                   h5py)


# ------------------------------------------------------------------ reading
def _text(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, np.ndarray) and v.dtype.kind == "O":
        return [_text(x) for x in v.tolist()]
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, np.generic):
        return v.item()
    return v


def _take(ds: Any, n: int, sel: Any) -> np.ndarray:
    """Entries `sel` (None, a slice or indices) of the first `n` of `ds`,
    reading only those."""
    if sel is None:
        return ds[:n]
    if isinstance(sel, slice):
        start, stop, step = sel.indices(n)
        if step > 0:
            return ds[start:stop:step]
        idx = np.arange(start, stop, step)
    else:
        try:
            idx = np.arange(n)[np.asarray(sel, dtype=np.int64)]
        except IndexError:
            raise IndexError(f"frames={sel!r} selects beyond the {n} frames in the file") from None
    if idx.size == 0:
        return ds[:0]
    uniq, inverse = np.unique(idx, return_inverse=True)
    return ds[uniq.tolist()][inverse]


def _whole_in_parts(path: str, f: Any, h5py: Any, growing: Mapping[str, int]) -> Dict[str, int]:
    """For a distributed run file: the entries along each growing axis whole
    in every part file (HDF5 would read a missing part as its fill value:
    a missing or unreadable part is an error here)."""
    names = _part_names(path, f)
    folder = os.path.dirname(os.path.abspath(path))
    least: Dict[str, int] = {}
    for name in names:
        where = os.path.join(folder, name)
        if not os.path.exists(where):
            raise FileNotFoundError(f"{path}: its part file {name!r} is missing (a distributed "
                                    f"run's part files stay beside its main file: move or "
                                    f"copy them together)")
        try:
            with h5py.File(where, "r") as part:
                for dim in growing:
                    n = part[dim].shape[0] if dim in part else 0
                    least[dim] = min(least.get(dim, n), n)
        except OSError as exc:
            raise ValueError(f"{path}: its part file {name!r} cannot be read ({exc})") from None
    return least


def _read(path: Union[str, os.PathLike], frames: Any) -> Dict[str, Any]:
    """Every dataset of a run file with its dims and attributes."""
    h5py = require_h5py()
    spath = os.fspath(path)
    if not os.path.exists(spath):
        raise FileNotFoundError(f"no run file {spath!r}")
    try:
        f = h5py.File(spath, "r")
    except OSError as exc:
        raise ValueError(f"{spath}: not a readable HDF5 file ({exc})") from None
    try:
        with f:
            return _read_open(spath, f, h5py, frames)
    except (ValueError, FileNotFoundError) as exc:
        if spath in str(exc):
            raise
        raise ValueError(f"{spath}: damaged run file ({type(exc).__name__}: {exc})") from None
    except (KeyError, OSError, RuntimeError, TypeError, AttributeError) as exc:
        # HDF5's own complaints (a missing object, a bad checksum, a chunk
        # that cannot be read) say nothing of the file
        what = " ".join(str(exc).split())[:300]
        raise ValueError(f"{spath}: damaged run file ({type(exc).__name__}: {what})") from None


def _read_open(spath: str, f: Any, h5py: Any, frames: Any) -> Dict[str, Any]:
    """:func:`_read` of the open file `f`."""
    kind = _text(f.attrs.get("format"))
    if kind == PART_FORMAT:
        main = os.path.join(os.path.dirname(spath), str(_text(f.attrs.get("main_file"))))
        raise ValueError(f"{spath}: one rank's part of the distributed run file {main!r}; "
                         f"open that file")
    if kind != "nlsepy run":
        raise ValueError(f"{spath}: not an nlsepy run file (no 'format' attribute "
                         f"'nlsepy run')")
    attrs = {k: _text(v) for k, v in f.attrs.items()}
    params: Dict[str, Any] = {}
    if "parameters" in f:
        g = f["parameters"]
        for k, v in g.attrs.items():
            v = _text(v)
            params[k] = None if isinstance(v, str) and v == "None" else v
        params.update({k: g[k][()] for k in g})
    attrs["parameters"] = params
    info: Dict[str, Dict[str, Any]] = {}
    growing = {}
    for name, ds in f.items():
        if not isinstance(ds, h5py.Dataset):
            continue
        dims = tuple(d for d in _text(ds.attrs.get("dims", "")).split(",") if d)
        info[name] = {"dims": dims, "coordinate": bool(ds.attrs.get("coordinate", False)),
                      "attrs": {k: _text(v) for k, v in ds.attrs.items()
                                if k not in ("dims", "coordinate", "DIMENSION_LIST",
                                             "REFERENCE_LIST", "CLASS", "NAME")}}
        if ds.maxshape and ds.maxshape[0] is None and info[name]["coordinate"]:
            growing[name] = ds.shape[0]
    for dim, n in _whole_in_parts(spath, f, h5py, growing).items():
        growing[dim] = min(growing[dim], n)
    for name, ds in f.items():
        if name not in info:
            continue
        dims = info[name]["dims"]
        if ds.maxshape and ds.maxshape[0] is None and not info[name]["coordinate"]:
            # a per-frame variable counts the entries of its coordinate,
            # written last: none when the first entry never got one
            n = min(growing.get(dims[0], 0) if dims else 0, ds.shape[0])
            info[name]["data"] = _take(ds, n, frames)
        elif dims and dims[0] in growing and ds.maxshape[0] is None:
            n = min(growing[dims[0]], ds.shape[0])  # whole entries only
            info[name]["data"] = _take(ds, n, frames)
        else:
            info[name]["data"] = ds[()]
    return {"attrs": attrs, "vars": info}


class Run(dict):
    """A run file's contents as :func:`nlsepy.open_run` returns them, with or
    without xarray: a dict of NumPy arrays (every dataset by name) and
    ``"attrs"``, whose entries are also attributes (``run.psi``, ``run.t``,
    ``run.attrs``).

    Attributes
    ----------
    attrs : dict
        The file's attributes, a dict ``parameters`` (every parameter of the
        model), ``dims`` (each array's axis names) and ``units_of`` (each
        array's units).
    dims : dict
        ``attrs["dims"]``.
    coords : tuple of str
        The names of the coordinates (``t``, ``x``, ...); the other arrays
        are the frames and the series over them.
    """

    def __init__(self, data: Mapping[str, Any], attrs: Mapping[str, Any],
                 variables: Mapping[str, Dict[str, Any]]) -> None:
        super().__init__(data)
        self["attrs"] = dict(attrs)
        self._variables = dict(variables)

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"this run has no {name!r}; it has "
                                 f"{', '.join(sorted(k for k in self if k != 'attrs'))} and "
                                 f"attrs") from None

    def __dir__(self) -> List[str]:
        return sorted(set(super().__dir__()) | {k for k in self if k.isidentifier()})

    @property
    def attrs(self) -> Dict[str, Any]:
        """The file's attributes (see the class's docstring)."""
        return self["attrs"]

    @property
    def dims(self) -> Dict[str, Tuple[str, ...]]:
        """Each array's axis names."""
        return self["attrs"]["dims"]

    @property
    def coords(self) -> Tuple[str, ...]:
        """The names of the coordinate arrays."""
        return tuple(n for n, v in self._variables.items() if v["coordinate"])

    def to_xarray(self) -> Any:
        """The same contents as an ``xarray.Dataset`` (needs xarray:
        ``pip install xarray``): the frames (``psi`` over ``t`` and the
        grid axes ``x``, ``y``, ``z``; over ``t`` and ``cell`` for DecGPE,
        with the circumcentres as coordinates ``x``, ``y``, ``z`` along
        ``cell``), the scalar series over ``t`` and the coordinates, each
        with its ``units`` and ``long_name``; ``attrs`` the file's
        attributes and ``parameters``.

        Returns
        -------
        xarray.Dataset
        """
        try:
            import xarray as xr
        except ImportError as exc:  # optional dependency
            raise ImportError("Run.to_xarray() needs xarray: pip install xarray") from exc
        coords: Dict[str, Any] = {}
        data_vars: Dict[str, Any] = {}
        for name, v in self._variables.items():
            data = self[name]
            dims = v["dims"] or tuple(f"{name}_{q}" for q in range(np.ndim(data)))
            item = (dims, data, v["attrs"])
            if v["coordinate"]:
                coords[name] = item
            else:
                data_vars[name] = item
        attrs = {k: v for k, v in self.attrs.items() if k not in ("dims", "units_of")}
        return xr.Dataset(data_vars=data_vars, coords=coords, attrs=attrs)

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k} {np.shape(v)}" for k, v in self.items() if k != "attrs")
        return f"Run({self.attrs.get('model', '?')}: {shapes})"


def _check_frames(frames: Any) -> Any:
    """`frames` of :func:`open_run` as None, a slice or a list of ints;
    TypeError for anything that is not one (a float would be truncated, a
    list of bools read as 0 and 1)."""
    def whole(v: Any) -> bool:
        return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))

    if frames is None:
        return None
    if whole(frames):
        return [int(frames)]
    if isinstance(frames, slice):
        for part in ("start", "stop", "step"):
            v = getattr(frames, part)
            if v is not None and not whole(v):
                raise TypeError(f"frames: the slice's {part} must be an integer or None, got "
                                f"{v!r}")
        if frames.step == 0:
            raise ValueError("frames: the slice's step must not be 0")
        return frames
    if isinstance(frames, (str, bytes, Mapping)) or not hasattr(frames, "__len__"):
        raise TypeError(f"frames must be an integer, a slice or a sequence of integers, got "
                        f"{type(frames).__name__}: {frames!r}")
    arr = np.asarray(frames)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu") or \
            (arr.size == 0 and arr.dtype.kind not in "iuf"):
        raise TypeError(f"frames must be a sequence of integers (not floats or bools), got "
                        f"{frames!r}")
    return [int(v) for v in arr.tolist()]


def open_run(path: Union[str, os.PathLike], frames: Any = None) -> Run:
    """Read a run file written by ``run(..., output=path)``.

    Parameters
    ----------
    path : path-like
        The HDF5 file; a file of an interrupted run (Ctrl-C, or a process
        killed mid-run) is read up to its last whole frame.
    frames : int, slice or sequence of int, optional
        Which frames (entries along the growing axis: ``t``, or ``z`` for
        Maxwell-Bloch) to read; default all.  The frames are read into
        memory.

    Returns
    -------
    Run
        The same object with or without xarray: a dict of NumPy arrays
        (every dataset by name: ``psi``, of shape ``(frames,) + grid``,
        the coordinates ``t``, ``x``, ..., the scalar series ``norm``,
        ``energy``, ...) and ``"attrs"`` (the file's attributes, a dict
        ``parameters``, and ``dims``, each array's axis names), each also
        an attribute (``run.psi``, ``run.attrs``).
        ``run.to_xarray()`` gives them as an ``xarray.Dataset`` (needs
        xarray).

    Raises
    ------
    ImportError
        h5py is not installed.
    FileNotFoundError
        No such file.
    TypeError
        `frames` is not an integer, a slice or a sequence of integers.
    ValueError
        Not an HDF5 file written by nlsepy, or a damaged one (the message
        names the file); a frame whose checksum does not match its bytes.

    Examples
    --------
    >>> run = nl.open_run("run.h5")                        # doctest: +SKIP
    >>> run.psi.shape, run.t[-1]                           # doctest: +SKIP
    >>> run.to_xarray().psi.sel(t=2.0, method="nearest")   # doctest: +SKIP
    """
    frames = _check_frames(frames)
    d = _read(path, frames)
    info, attrs = d["vars"], dict(d["attrs"])
    attrs["dims"] = {name: v["dims"] for name, v in info.items()}
    attrs["units_of"] = {name: v["attrs"].get("units", "") for name, v in info.items()}
    return Run({name: v.pop("data") for name, v in info.items()}, attrs, info)


# ------------------------------------------------------- distributed runs
#: root attribute ``format`` of a part file
PART_FORMAT = "nlsepy run part"

#: root attribute ``layout`` of a distributed run's main file
LAYOUT = ("slabs of axis 0: rank r holds rows parts/rows[r] = (first, count) of every "
          "per-frame field and of the arrays under /parameters, in its part file "
          "parts/files[r]; the main file maps them (HDF5 virtual datasets)")

_PART = re.compile(r"\.part\d{4,}of\d{4,}")


def part_name(path: str, rank: int, size: int) -> str:
    """Rank `rank`'s part file of the distributed run file `path`, beside it:
    ``<stem>.partRRRRofNNNN<ext>``."""
    folder, base = os.path.split(path)
    stem, ext = os.path.splitext(base)
    return os.path.join(folder, f"{stem}.part{rank:04d}of{size:04d}{ext}")


def _part_names(path: str, f: Any) -> List[str]:
    """The part files a distributed run file names (plain names of the
    form :func:`part_name` gives; anything else is refused)."""
    if "parts" not in f or "files" not in f["parts"]:
        return []
    names = _text(f["parts"]["files"][()])
    names = [names] if isinstance(names, str) else list(names)
    stem, ext = os.path.splitext(os.path.basename(path))
    for name in names:
        ok = isinstance(name, str) and os.path.basename(name) == name
        base, end = os.path.splitext(name) if ok else ("", "")
        if not (ok and end == ext and base.startswith(stem)
                and _PART.fullmatch(base[len(stem):])):
            raise ValueError(f"{path}: part file name {name!r} is not one a run writes "
                             f"({stem}.partRRRRofNNNN{ext})")
    return names


def remove_parts(path: str) -> None:
    """Remove the part files of the distributed run file `path`, if it is
    one: the run that replaces it leaves none of them behind."""
    if not os.path.exists(path):
        return
    h5py = require_h5py()
    try:
        with h5py.File(path, "r") as f:
            names = _part_names(path, f)
    except (OSError, KeyError, ValueError):
        return
    folder = os.path.dirname(path)
    for name in names:
        try:
            os.remove(os.path.join(folder, name))
        except OSError:
            pass


class Recorder:
    """A model's run streamed into a :class:`RunFile`.

    The model provides ``_record_header()`` (a :class:`RunHeader`; called
    on every rank of a distributed model) and ``_record_scalars()`` (a dict
    of the scalar series at the current state, collective for a distributed
    model).

    A distributed model (``model.comm`` not None) gives each frame as its
    rank's slab (rows of axis 0, in rank order) and nothing is gathered:
    every rank streams its slabs into its own part file
    (:func:`part_name`, a :class:`RunFile` with its writer thread; root
    attribute ``format`` :data:`PART_FORMAT`), and rank 0 writes the main
    file: the header, the scalar series, the frame coordinate, and for the
    frames and the header's ``slabs`` HDF5 virtual datasets over the parts
    (growing with them).  Rank 0 appends a frame's time and series only once
    every rank has flushed that frame's slab (the ranks' counts travel with
    the next frame, or the close), so the length of the main file's frame
    coordinate counts frames whole in every part.  Every step is agreed
    (``_dist.agree``): an error on one rank is raised on all.  h5py without
    MPI suffices.

    Parameters
    ----------
    model : object
        The solver.
    path : str
        Checked by :func:`check_output`.
    time : {"real", "imaginary"}, optional
        The kind of run.
    """

    def __init__(self, model: Any, path: str, time: str = "real") -> None:
        self.model = model
        self.dim = "t" if time == "real" else "step"
        self.comm = getattr(model, "comm", None)
        self.file: Optional[RunFile] = None
        self.part: Optional[RunFile] = None
        header = model._record_header()
        if self.comm is None:
            remove_parts(path)
            self.file = RunFile(path, header, time)
        else:
            self._open_parts(path, header, time)

    # ------------------------------------------------------- distributed
    def _open_parts(self, path: str, header: RunHeader, time: str) -> None:
        """Every rank its part file, then rank 0 the main file (a failure
        anywhere removes what was made, on every rank)."""
        comm = self.comm
        rank, size = comm.Get_rank(), comm.Get_size()
        self.names = [os.path.basename(part_name(path, r, size)) for r in range(size)]
        self.pending: List[Tuple[Any, Dict[str, Any]]] = []  # rank 0: not yet in the main file
        self.committed = 0  # rank 0: frames handed to the main file
        self.laid_out = False
        _dist.agree(comm, lambda: remove_parts(path), only=0)
        slabs = {k: np.ascontiguousarray(v) for k, v in header.slabs.items()}
        kinds = comm.allgather({k: (tuple(v.shape), v.dtype.str) for k, v in slabs.items()})
        own = ("psi", self.dim)
        part_header = RunHeader(
            model=header.model, parameters={}, units=header.units, coords={},
            dims={"psi": tuple(header.dims.get("psi", ()))}, backend=header.backend,
            var_units={k: v for k, v in header.var_units.items() if k in own},
            long_names={k: v for k, v in header.long_names.items() if k in own}, slabs=slabs)
        attrs = {"format": PART_FORMAT, "main_file": os.path.basename(path), "rank": rank,
                 "ranks": size}

        def make_part() -> None:
            where = os.path.join(os.path.dirname(path), self.names[rank])
            try:
                self.part = RunFile(where, part_header, time, attrs=attrs)
            except OSError as exc:  # IsADirectoryError and the like: one kind on every rank
                raise OSError(f"cannot write the part file {where!r} of the run file "
                              f"{path!r}: {exc}") from None

        def make_main() -> None:
            params = {k: v for k, v in header.parameters.items() if k not in slabs}
            main = RunFile(path, replace(header, parameters=params, slabs={}), time,
                           attrs={"ranks": size, "layout": LAYOUT})
            try:
                for name in slabs:
                    shape, dtype, sources, _ = self._rows(name, [k[name] for k in kinds],
                                                          f"slabs/{name}")
                    main.add_virtual(name, dtype, shape, sources, group="parameters")
            except BaseException:
                main.discard()
                raise
            self.file = main

        try:
            _dist.agree(comm, make_part)
            _dist.agree(comm, make_main, only=0)
        except BaseException:
            if self.part is not None:
                self.part.discard()
                self.part = None
            raise

    def _rows(self, name: str, kinds: Sequence[Tuple[Tuple[int, ...], str]],
              dataset: str, starts: Optional[Sequence[Optional[int]]] = None
              ) -> Tuple[Tuple[int, ...], np.dtype, List[Tuple[str, str, int, int]], np.ndarray]:
        """The global shape, dtype, sources and rows ``(first, count)`` per
        rank of `name` from every rank's (shape, dtype) of its rows;
        `starts`, the first rows the model says each rank holds, must follow
        from the rows in rank order."""
        shapes = [tuple(k[0]) for k in kinds]
        dtypes = {k[1] for k in kinds}
        if len(dtypes) != 1 or any(not s or s[1:] != shapes[0][1:] for s in shapes):
            raise ValueError(f"the ranks' parts of {name!r} do not stack along axis 0: shapes "
                             f"{shapes}, dtypes {sorted(dtypes)}")
        counts = [s[0] for s in shapes]
        first = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(int).tolist()
        if starts is not None and any(s is not None and s != f for s, f in zip(starts, first)):
            raise RuntimeError(f"the ranks' parts of {name!r} are not in rank order: the model "
                               f"says they start at rows {list(starts)}, their sizes {counts} "
                               f"give {first}")
        rows = np.stack([first, counts], axis=1).astype(np.int64)
        shape = (int(sum(counts)),) + shapes[0][1:]
        sources = [(f, dataset, s, c) for f, s, c in zip(self.names, first, counts)]
        return shape, np.dtype(dtypes.pop()), sources, rows

    def _first_row(self) -> Optional[int]:
        """The first global row of this rank's frames, as the model says
        (``local_slice``), or None."""
        sl = getattr(self.model, "local_slice", None)
        if isinstance(sl, tuple):
            sl = sl[0] if sl else None
        return (sl.start or 0) if isinstance(sl, slice) else None

    def _lay_out(self, state: Any) -> None:
        """At the first frame: the frames' virtual dataset in the main file."""
        kind = (tuple(np.shape(state)), np.dtype(state.dtype).str, self._first_row())
        everyone = self.comm.allgather(kind)

        def virtual() -> None:
            assert self.file is not None
            shape, dtype, sources, rows = self._rows("psi", everyone, "psi",
                                                     [k[2] for k in everyone])
            self.file.add_virtual("psi", dtype, shape, sources, dim=self.dim)
            self.file.add_parts(self.names, rows)

        _dist.agree(self.comm, virtual, only=0)
        self.laid_out = True

    def _commit(self, main: RunFile, whole: int) -> None:
        """Rank 0: hand the main file the pending frames' times and series,
        up to `whole` frames in all."""
        while self.pending and self.committed < whole:
            at, scalars = self.pending.pop(0)
            main.append(self.dim, at, scalars)
            self.committed += 1

    def _frame_parts(self, at: Any, state: Any, scalars: Dict[str, Any]) -> None:
        comm = self.comm
        if isinstance(state, Future):
            state = state.result()
        state = np.asarray(state)
        if not self.laid_out:
            self._lay_out(state)
        part = self.part
        assert part is not None
        data = {"psi": state} if state.shape[0] else {}
        _dist.agree(comm, lambda: part.append(self.dim, at, data))
        if comm.Get_rank() == 0:
            self.pending.append((at, scalars))
        whole = min(comm.allgather(part.written(self.dim)))
        _dist.agree(comm, lambda: self._commit(self.file, whole) if self.file else None, only=0)

    def _close_parts(self, main: Optional[RunFile], part: Optional[RunFile],
                     complete: bool) -> None:
        comm = self.comm
        errors: List[BaseException] = []
        try:
            _dist.agree(comm, lambda: part.close(complete) if part is not None else None)
        except Exception as exc:
            errors.append(exc)
            complete = False
        whole = min(comm.allgather(part.written(self.dim) if part is not None else 0))

        def finish() -> None:
            if main is None:
                return
            try:
                self._commit(main, whole)
            finally:
                main.close(complete)
        try:
            _dist.agree(comm, finish, only=0)
        except Exception as exc:
            errors.append(exc)
        if errors:
            raise errors[0]

    # ------------------------------------------------------------- both
    def frame(self, at: Any, state: Any) -> None:
        """Append the frame `state` (this process's, or this rank's slab) at
        `at` (the time ``t``, or the imaginary-time step count), with the
        model's scalar series now."""
        scalars = self.model._record_scalars() if RECORD_SCALARS else {}
        if self.comm is None:
            assert self.file is not None
            self.file.append(self.dim, at, {"psi": state, **scalars})
            return
        self._frame_parts(at, state, scalars)

    def close(self, complete: bool) -> None:
        """Close the file (marked ``complete`` when `complete`); distributed,
        every rank its part, then rank 0 the main file with the series of
        the frames whole in every part."""
        rf, self.file = self.file, None
        if self.comm is None:
            if rf is not None:
                rf.close(complete)
            return
        part, self.part = self.part, None
        with deferred_sigint() as flag:  # the ranks' collectives stay paired
            try:
                self._close_parts(rf, part, complete)
            finally:
                if not complete:
                    flag.hit = False
