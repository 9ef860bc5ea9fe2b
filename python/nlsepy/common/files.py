"""Files written whole or not at all, and the checkpoint format every model shares.

Atomic writes
    :func:`atomic_write` fills a temporary file beside the target, flushes
    it to disk and renames it over the target; on any exception (Ctrl-C
    included) the temporary file is removed, and those of writers that were
    killed are removed by the next write of the same path.

Checkpoints
    :func:`save_checkpoint` writes an ``.npz`` of plain arrays, whole or
    not at all, with a format tag, a version and the model's name;
    :func:`load_checkpoint` checks all of them and every key's kind, shape,
    dtype and finiteness, and raises ``ValueError`` naming the file and the
    problem.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import stat
import zipfile
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Sequence, Union

import numpy as np
from numpy.lib import format as _npy

from .version import __version__

__all__ = ["atomic_write", "atomic_path", "atomic_savez", "save_checkpoint", "load_checkpoint",
           "checkpoint_arrays", "check_npz", "check_target", "save_format", "Key", "SUFFIXES"]

#: the file name endings :func:`save_format` knows, and the format of each
SUFFIXES = {".npz": "npz", ".h5": "hdf5", ".hdf5": "hdf5"}


def _temp_name(path: str, pid: int) -> str:
    directory, base = os.path.split(os.path.abspath(path))
    return os.path.join(directory, f".{base}.{pid}.tmp")


def _remove_stale_temps(path: str) -> None:
    """Remove temporary files of `path` left by processes that no longer run
    (a writer killed by SIGKILL or SIGTERM cannot clean up after itself)."""
    directory, base = os.path.split(os.path.abspath(path))
    pattern = re.compile(r"\." + re.escape(base) + r"\.(\d+)\.tmp\Z")
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        m = pattern.match(name)
        if not m:
            continue
        pid = int(m.group(1))
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
            continue  # that writer still runs
        except ProcessLookupError:
            pass
        except (PermissionError, OverflowError, OSError):
            continue
        try:
            os.remove(os.path.join(directory, name))
        except OSError:
            pass


_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISDIR, "a folder"))


def check_target(path: str, what: str = "path") -> str:
    """The file a write of `path` replaces: `path` itself, or the file a
    symbolic link points to (a write goes through the link and leaves it a
    link); refused when that is not a regular file.

    Parameters
    ----------
    path : str
        The destination.
    what : str, optional
        The argument's name, for the message.

    Returns
    -------
    str
        The path to write (the link's target, made absolute, for a link).

    Raises
    ------
    ValueError
        The destination exists and is a device, a FIFO, a socket or a
        folder (replacing it by a regular file, as root can, would destroy
        it), naming it and what it is.
    """
    target = os.path.realpath(path) if os.path.islink(path) else path
    try:
        mode = os.stat(target).st_mode
    except OSError:  # nothing there yet (or a dangling link): a new file
        return target
    if stat.S_ISREG(mode):
        return target
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    via = f" (the target of the link {path!r})" if target != path else ""
    raise ValueError(f"{what} = {target!r}{via} is {kind}, not a regular file; nlsepy writes "
                     f"only regular files")


def atomic_write(path: Union[str, os.PathLike], write: Callable[[Any], Any],
                 binary: bool = True) -> None:
    """Write a file whole or not at all: `write(fh)` fills a temporary file
    beside `path`, which is flushed to disk and then renamed over `path`.

    A symbolic link is written through (its target is replaced and the link
    stays); a destination that is not a regular file (a device, a FIFO, a
    socket, a folder) is refused with ValueError (``check_target``).

    The temporary file is removed on any exception, ``KeyboardInterrupt``
    included; those of writers that were killed are removed by the next
    write of the same path."""
    path = check_target(os.fspath(path))
    _remove_stale_temps(path)
    tmp = _temp_name(path, os.getpid())
    try:
        with open(tmp, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


@contextlib.contextmanager
def atomic_path(path: Union[str, os.PathLike]) -> Iterator[str]:
    """The name of a temporary file beside `path` for a writer that opens
    files by name (h5py): when the block ends the file is put on the disk
    and renamed over `path`; on any exception it is removed.  The
    destination is checked as :func:`atomic_write` checks it."""
    path = check_target(os.fspath(path))
    _remove_stale_temps(path)
    tmp = _temp_name(path, os.getpid())
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def save_format(path: Union[str, os.PathLike], what: str = "path") -> str:
    """The format a model's ``save`` writes to `path`, from its ending:
    ``"npz"`` or ``"hdf5"`` (:data:`SUFFIXES`).

    Raises
    ------
    TypeError
        `path` is not a path.
    ValueError
        Any other ending, naming the path and the endings accepted.
    """
    if isinstance(path, (bytes, bytearray)) or not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{what} must be a path (str or os.PathLike), got "
                        f"{type(path).__name__}: {path!r}")
    spath = os.fspath(path)
    if not isinstance(spath, str) or not spath.strip() or "\0" in spath:
        raise ValueError(f"{what} must name a file, got {spath!r}")
    suffix = os.path.splitext(spath)[1].lower()
    if suffix not in SUFFIXES:
        raise ValueError(f"{what} = {spath!r}: the format is chosen by the file's ending, one "
                         f"of {', '.join(SUFFIXES)} (.npz: NumPy archive; .h5 or .hdf5: HDF5, "
                         f"read by nl.open_run and h5py)")
    return SUFFIXES[suffix]


def atomic_savez(path: Union[str, os.PathLike], **arrays: Any) -> None:
    """Write an ``.npz`` file whole or not at all (see :func:`atomic_write`)."""
    atomic_write(path, lambda fh: np.savez(fh, **arrays))


# -------------------------------------------------------------- checkpoints
FORMAT = "nlsepy-checkpoint"
VERSION = 1


@dataclass(frozen=True)
class Key:
    """What one entry of a checkpoint must be.

    Parameters
    ----------
    kind : {"float", "int", "bool", "str", "array"}
        Scalar kinds are 0-d arrays in the file.
    dtypes : str
        Allowed ``dtype.kind`` letters of an array (e.g. ``"fc"``).
    ndim : sequence of int, optional
        Allowed numbers of dimensions of an array.
    finite : bool
        Numbers must be finite (NaN and Inf rejected).
    optional : bool
        The key may be missing.
    choices : sequence of str, optional
        Allowed values of a string.
    """

    kind: str
    dtypes: str = "fc"
    ndim: Optional[Sequence[int]] = None
    finite: bool = True
    optional: bool = False
    choices: Optional[Sequence[str]] = None


def checkpoint_arrays(model: str, **fields: Any) -> Dict[str, np.ndarray]:
    """The arrays of a checkpoint of `model` with `fields`: the format tag,
    version and model's name, then every field as a NumPy array (strings as
    unicode arrays); Python objects are refused."""
    arrays = {"_format": np.array(FORMAT), "_version": np.array(VERSION),
              "_model": np.array(model), "_nlsepy": np.array(__version__)}
    for name, value in fields.items():
        if name.startswith("_"):
            raise ValueError(f"checkpoint field names may not start with '_': {name!r}")
        arr = np.asarray(value)
        if arr.dtype == object:
            raise TypeError(f"checkpoint field {name!r} is not numeric or text: {value!r}")
        arrays[name] = arr
    return arrays


def save_checkpoint(path: Union[str, os.PathLike], model: str, **fields: Any) -> None:
    """Write a checkpoint of `model` with `fields` as an ``.npz``, whole or
    not at all (:func:`checkpoint_arrays`)."""
    atomic_savez(path, **checkpoint_arrays(model, **fields))


def _bad(path: str, what: str) -> ValueError:
    return ValueError(f"{path}: {what}")


def _check_key(path: str, name: str, arr: np.ndarray, key: Key) -> Any:
    if key.kind == "str":
        if arr.dtype.kind != "U" or arr.ndim != 0:
            raise _bad(path, f"entry {name!r} must be a string, got dtype {arr.dtype} "
                             f"shape {arr.shape}")
        value = str(arr)
        if key.choices is not None and value not in key.choices:
            raise _bad(path, f"entry {name!r} must be one of {tuple(key.choices)}, "
                             f"got {value!r}")
        return value
    if key.kind in ("float", "int", "bool"):
        kinds = {"float": "fiu", "int": "iu", "bool": "b"}[key.kind]
        if arr.ndim != 0 or arr.dtype.kind not in kinds:
            raise _bad(path, f"entry {name!r} must be a scalar {key.kind}, got dtype "
                             f"{arr.dtype} shape {arr.shape}")
        if key.kind == "bool":
            return bool(arr)
        if key.kind == "int":
            return int(arr)
        v = float(arr)
        if key.finite and not math.isfinite(v):
            raise _bad(path, f"entry {name!r} is not finite: {v!r}")
        return v
    if key.kind != "array":
        raise ValueError(f"unknown checkpoint key kind {key.kind!r}")
    if arr.dtype.kind not in key.dtypes:
        raise _bad(path, f"entry {name!r} has dtype {arr.dtype}, expected a kind in "
                         f"{key.dtypes!r}")
    if key.ndim is not None and arr.ndim not in tuple(key.ndim):
        raise _bad(path, f"entry {name!r} has {arr.ndim} dimensions, expected "
                         f"{' or '.join(map(str, key.ndim))}")
    if key.finite and arr.dtype.kind in "fc" and not np.all(np.isfinite(arr)):
        raise _bad(path, f"entry {name!r} contains non-finite values (NaN or Inf)")
    return arr


def load_checkpoint(path: Union[str, os.PathLike], model: str,
                    keys: Mapping[str, Key]) -> Dict[str, Any]:
    """Read and check a checkpoint written by :func:`save_checkpoint`.

    Returns
    -------
    dict
        The entries of `keys` found in the file (scalars as Python numbers,
        strings as ``str``, arrays as arrays).

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        The file is not a whole nlsepy checkpoint of `model` of a version
        this nlsepy reads, or an entry is missing, of the wrong kind, shape
        or dtype, or not finite.  The message names the file.
    """
    spath = os.fspath(path)
    if not os.path.exists(spath):
        raise FileNotFoundError(f"no such checkpoint file: {spath!r}")
    if os.path.isdir(spath):
        raise _bad(spath, "is a folder, not a checkpoint file")
    if os.path.getsize(spath) == 0:
        raise _bad(spath, "is empty, not an nlsepy checkpoint")
    if SUFFIXES.get(os.path.splitext(spath)[1].lower()) == "hdf5":
        return _load_hdf5(spath, model, keys)
    if not zipfile.is_zipfile(spath):
        raise _bad(spath, "is not an nlsepy checkpoint (not an .npz archive; truncated or "
                          "another kind of file)")
    check_npz(spath)
    try:
        with np.load(spath) as d:  # plain arrays only (NumPy's default)
            out = _entries(spath, model, keys, set(d.files), d.__getitem__, "an .npz archive")
    except ValueError as exc:
        if str(exc).startswith(spath):
            raise
        # NumPy's own complaints (object arrays, bad headers)
        raise _bad(spath, f"cannot be read as an nlsepy checkpoint ({_numpy_reason(exc)})") \
            from None
    except (zipfile.BadZipFile, EOFError, OSError, KeyError, NotImplementedError,
            MemoryError) as exc:
        raise _bad(spath, f"is damaged or truncated ({type(exc).__name__}: {exc})") from None
    return out


def _entries(spath: str, model: str, keys: Mapping[str, Key], names: set,
             entry: Callable[[str], np.ndarray], what: str) -> Dict[str, Any]:
    """The checked entries of a checkpoint whose entry names are `names` and
    whose arrays ``entry(name)`` gives (an ``.npz`` archive or the group of
    an HDF5 file, `what`): its format tag, version and model first."""
    if "_format" not in names:
        raise _bad(spath, f"is {what} but not an nlsepy checkpoint (no format tag)")
    tag = entry("_format")
    if tag.dtype.kind != "U" or str(tag) != FORMAT:
        raise _bad(spath, f"has format tag {str(tag)!r}, not {FORMAT!r}")
    version = entry("_version") if "_version" in names else None
    if version is None or version.dtype.kind not in "iu" or version.ndim != 0:
        raise _bad(spath, "has no valid format version")
    if int(version) > VERSION:
        raise _bad(spath, f"is of checkpoint version {int(version)}; this nlsepy "
                          f"reads up to version {VERSION} (upgrade nlsepy)")
    got = str(entry("_model")) if "_model" in names else "?"
    if got != model:
        raise _bad(spath, f"is a checkpoint of {got}, not of {model}; load it with "
                          f"nl.{got}.load")
    out: Dict[str, Any] = {}
    for name, key in keys.items():
        if name not in names:
            if key.optional:
                continue
            raise _bad(spath, f"lacks the entry {name!r}")
        out[name] = _check_key(spath, name, entry(name), key)
    return out


#: the group of an HDF5 file written by a model's ``save`` that holds the
#: checkpoint's arrays (the file's other datasets are those of a run file)
HDF5_GROUP = "checkpoint"


def _load_hdf5(spath: str, model: str, keys: Mapping[str, Key]) -> Dict[str, Any]:
    """:func:`load_checkpoint` of an HDF5 file written by a model's ``save``:
    the arrays of its group :data:`HDF5_GROUP`, checked as those of an
    ``.npz``."""
    try:
        import h5py
    except ImportError as exc:  # optional dependency
        raise ImportError(f"reading the HDF5 checkpoint {spath!r} needs h5py: pip install "
                          f"'nlsepy[hdf5]'") from exc
    try:
        with h5py.File(spath, "r") as f:
            group = f.get(HDF5_GROUP)
            if not isinstance(group, h5py.Group):
                raise _bad(spath, "is an HDF5 file but not an nlsepy checkpoint (no group "
                                  f"{HDF5_GROUP!r}; a run file is read with nl.open_run)")

            def entry(name: str) -> np.ndarray:
                ds = group[name]
                if h5py.check_string_dtype(ds.dtype) is not None:
                    text = ds.asstr()[()]
                    return np.array(text if isinstance(text, str) else list(text))
                return np.asarray(ds[()])

            out = _entries(spath, model, keys, set(group.keys()), entry,
                           f"an HDF5 file (group {HDF5_GROUP!r})")
    except ValueError as exc:
        if str(exc).startswith(spath):
            raise
        raise _bad(spath, f"cannot be read as an nlsepy checkpoint ({exc})") from None
    except (OSError, KeyError, RuntimeError, TypeError, MemoryError) as exc:
        raise _bad(spath, f"is damaged or not an HDF5 file ({type(exc).__name__}: "
                          f"{' '.join(str(exc).split())[:200]})") from None
    return out


def check_npz(path: Union[str, os.PathLike]) -> None:
    """Check an ``.npz`` archive's directory and the header of every array in
    it before any array is read.

    Each ``.npy`` entry must open (a damaged directory makes :mod:`zipfile`
    raise ``NotImplementedError`` or ``BadZipFile``), have a header NumPy
    reads, and hold exactly the bytes its shape and dtype declare: an entry
    whose header was edited to an absurd shape is refused here instead of
    NumPy trying to allocate it.

    Parameters
    ----------
    path : path-like
        The archive.

    Raises
    ------
    ValueError
        Naming the file and the entry at fault.
    """
    spath = os.fspath(path)
    try:
        with zipfile.ZipFile(spath) as z:
            for info in z.infolist():
                if not info.filename.endswith(".npy"):
                    continue
                name = info.filename[:-4]
                with z.open(info) as fh:
                    version = _npy.read_magic(fh)
                    if version == (1, 0):
                        shape, _, dtype = _npy.read_array_header_1_0(fh)
                    elif version in ((2, 0), (3, 0)):
                        shape, _, dtype = _npy.read_array_header_2_0(fh)
                    else:
                        raise _bad(spath, f"entry {name!r} has an unknown .npy format version "
                                          f"{version}")
                    header = fh.tell()
                if dtype.hasobject:
                    continue  # refused by np.load's own check (allow_pickle=False)
                need = dtype.itemsize * math.prod(int(n) for n in shape)
                have = info.file_size - header
                if need != have:
                    raise _bad(spath, f"entry {name!r} declares shape {tuple(shape)} of {dtype} "
                                      f"({need} bytes) but the archive holds {have} bytes for "
                                      f"it (damaged or edited)")
    except ValueError as exc:
        if str(exc).startswith(spath):
            raise
        raise _bad(spath, f"is damaged (an array header NumPy cannot read: "
                          f"{_numpy_reason(exc)})") from None
    except (zipfile.BadZipFile, EOFError, OSError, KeyError, NotImplementedError, RuntimeError,
            MemoryError, TypeError) as exc:
        raise _bad(spath, f"is damaged or truncated ({type(exc).__name__}: {exc})") from None


def _numpy_reason(exc: Exception) -> str:
    msg = str(exc)
    if "Object arrays" in msg:
        return "it holds Python objects, which nlsepy never reads"
    return msg.split("\n")[0][:200]
