"""Runs on disk: frames and time series streamed into one HDF5 file.

A model's ``run(..., output="run.h5")`` writes, as the run goes, one HDF5
file through h5py (the ``hdf5`` extra) and :func:`open_run` reads it back as
an ``xarray.Dataset`` (or, without xarray, a dict of NumPy arrays).

Layout
    ``/psi``            the frames, shape ``(frames,) + grid``: one chunk per
                        frame (split along the grid's first axis only where a
                        frame exceeds :data:`MAX_CHUNK_BYTES`), written
                        uncompressed by default (:data:`COMPRESSION`; see
                        bench/RESULTS.md for the measurement behind it).
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
    folder, h5py installed); nothing is created for a bad argument.  The
    file is created once the run's first frame is taken and the header is
    written whole or the file is removed.  Each frame is handed, with
    SIGINT held (:func:`nlsepy._guard.deferred_sigint`), to a writer thread
    of the file, which appends it and flushes the file after it (frames of
    :data:`SYNC_BYTES` and more it also puts on the disk and drops from the
    page cache); the run goes on meanwhile (at most :data:`QUEUE_FRAMES`
    frames ahead).  When a
    run ends, Ctrl-C and errors included, the frames it took are written
    and the file closed before ``run`` returns or raises; a killed process
    leaves the file as of its last flush.  Either way the frames written
    are readable with plain h5py, and :func:`open_run` reads such a file,
    trimming every series to the length of its coordinate.
"""

from __future__ import annotations

import datetime
import os
import queue
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

__all__ = ["RunHeader", "RunFile", "check_output", "open_run", "require_h5py",
           "EXTENSIONS", "COMPRESSION"]

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
        A wrong extension, or the path names a folder.
    FileNotFoundError
        The folder does not exist.
    PermissionError
        The folder or the existing file cannot be written.
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
    path = os.path.abspath(path)
    if os.path.isdir(path):
        raise ValueError(f"{what} = {path!r} is a folder, not a file")
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{what} = {output!r}: the folder {folder!r} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(f"{what} = {output!r}: cannot write in the folder {folder!r}")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise PermissionError(f"{what} = {output!r}: the existing file cannot be replaced")
    require_h5py()
    return path


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
    """

    model: str
    parameters: Dict[str, Any]
    units: str
    coords: Dict[str, Tuple[Tuple[str, ...], np.ndarray, str, str]]
    dims: Dict[str, Tuple[str, ...]]
    var_units: Dict[str, str] = field(default_factory=dict)
    long_names: Dict[str, str] = field(default_factory=dict)
    backend: str = "cpu"


def _version() -> str:
    try:
        from . import __version__
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
                 compression: Any = "default") -> None:
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
        self._ds: Dict[str, Any] = {}  # growing datasets by name, with their raw flag
        self._h5 = h5py
        self._f: Any = h5py.File(path, "w")
        try:
            self._write_header(time)
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
        f = self._f
        n = self._counts.get(dim, 0)
        for name, v in data.items():
            arr = np.asarray(v)
            if name not in self._ds:
                ds = self._create(dim, name, arr)
                # a whole frame in one unfiltered chunk is written as it is
                # (no conversion buffer; several times faster than ds[n] = arr)
                raw = bool(arr.ndim) and self.compression is None and \
                    ds.chunks == (1,) + arr.shape
                self._ds[name] = (ds, raw, ds.dtype)
            ds, raw, dtype = self._ds[name]
            ds.resize(n + 1, axis=0)
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
        ds[n] = value
        self._counts[dim] = n + 1
        f.flush()
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
        from ._guard import deferred_sigint
        with deferred_sigint() as flag:
            try:
                if self._thread is not None:
                    self._queue.put(None)
                    self._thread.join()
                    self._thread = None
                if complete:
                    self._raise()
                    self._f.attrs["complete"] = True
            finally:
                f, self._f = self._f, None
                f.close()
                if not complete:
                    flag.hit = False

    def __enter__(self) -> "RunFile":
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        self.close(complete=kind is None)


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
    with f:
        if f.attrs.get("format") != "nlsepy run" and _text(f.attrs.get("format")) != "nlsepy run":
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
        for name, ds in f.items():
            if name not in info:
                continue
            dims = info[name]["dims"]
            if dims and dims[0] in growing and ds.maxshape[0] is None:
                n = min(growing[dims[0]], ds.shape[0])  # whole entries only
                info[name]["data"] = _take(ds, n, frames)
            else:
                info[name]["data"] = ds[()]
    return {"attrs": attrs, "vars": info}


def open_run(path: Union[str, os.PathLike], frames: Any = None) -> Any:
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
    xarray.Dataset or dict
        With xarray installed: a Dataset with the frames (``psi`` over
        ``t`` and the grid axes ``x``, ``y``, ``z``; over ``t`` and
        ``cell`` for DecGPE, with the circumcentres as coordinates ``x``,
        ``y``, ``z`` along ``cell``), the scalar series over ``t`` and the
        coordinates; ``attrs`` holds the file's attributes and a dict
        ``parameters``.  Without xarray: a dict of NumPy arrays (every
        dataset by name) and ``"attrs"``, the same attributes plus
        ``"dims"``, each array's axis names.

    Raises
    ------
    ImportError
        h5py is not installed.
    FileNotFoundError
        No such file.
    ValueError
        Not an HDF5 file written by nlsepy.

    Examples
    --------
    >>> run = nl.open_run("run.h5")                        # doctest: +SKIP
    >>> run.psi.sel(t=2.0, method="nearest")               # doctest: +SKIP
    """
    if isinstance(frames, (int, np.integer)) and not isinstance(frames, bool):
        frames = [int(frames)]
    d = _read(path, frames)
    try:
        import xarray as xr
    except ImportError:
        xr = None
    info, attrs = d["vars"], d["attrs"]
    if xr is None:
        out: Dict[str, Any] = {name: v["data"] for name, v in info.items()}
        attrs = dict(attrs)
        attrs["dims"] = {name: v["dims"] for name, v in info.items()}
        attrs["units_of"] = {name: v["attrs"].get("units", "") for name, v in info.items()}
        out["attrs"] = attrs
        return out
    coords: Dict[str, Any] = {}
    data_vars: Dict[str, Any] = {}
    for name, v in info.items():
        dims = v["dims"] or tuple(f"{name}_{q}" for q in range(np.ndim(v["data"])))
        item = (dims, v["data"], v["attrs"])
        if v["coordinate"]:
            coords[name] = item
        else:
            data_vars[name] = item
    return xr.Dataset(data_vars=data_vars, coords=coords, attrs=attrs)


class Recorder:
    """A model's run streamed into a :class:`RunFile`.

    The model provides ``_record_header()`` (a :class:`RunHeader`; called
    on every rank of a distributed model, it may gather) and
    ``_record_scalars()`` (a dict of the scalar series at the current
    state, collective for a distributed model).  A distributed model
    (``model.comm`` not None) is gathered on rank 0 (``model.gather(0)``)
    at every frame and rank 0 alone writes, with h5py without MPI; an error
    there is raised on every rank.

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
        header = model._record_header()
        if self.comm is None:
            self.file: Optional[RunFile] = RunFile(path, header, time)
        else:
            from . import _dist
            self.file = _dist.agree(self.comm, lambda: RunFile(path, header, time), only=0)

    def frame(self, at: Any, state: Any) -> None:
        """Append the frame `state` (this process's, or this rank's slab) at
        `at` (the time ``t``, or the imaginary-time step count), with the
        model's scalar series now."""
        scalars = self.model._record_scalars() if RECORD_SCALARS else {}
        if self.comm is None:
            assert self.file is not None
            self.file.append(self.dim, at, {"psi": state, **scalars})
            return
        from . import _dist
        whole = self.model.gather(0)
        _dist.agree(self.comm, lambda: self.file.append(self.dim, at,
                                                        {"psi": whole, **scalars}), only=0)

    def close(self, complete: bool) -> None:
        """Close the file (marked ``complete`` when `complete`)."""
        rf, self.file = self.file, None
        if self.comm is None:
            if rf is not None:
                rf.close(complete)
            return
        from . import _dist
        _dist.agree(self.comm, lambda: rf.close(complete) if rf is not None else None, only=0)
