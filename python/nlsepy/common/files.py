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

import math
import os
import re
import zipfile
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Union

import numpy as np

from .version import __version__

__all__ = ["atomic_write", "atomic_savez", "save_checkpoint", "load_checkpoint", "Key"]


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


def atomic_write(path: Union[str, os.PathLike], write: Callable[[Any], Any],
                 binary: bool = True) -> None:
    """Write a file whole or not at all: `write(fh)` fills a temporary file
    beside `path`, which is flushed to disk and then renamed over `path`.

    The temporary file is removed on any exception, ``KeyboardInterrupt``
    included; those of writers that were killed are removed by the next
    write of the same path."""
    path = os.fspath(path)
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


def save_checkpoint(path: Union[str, os.PathLike], model: str, **fields: Any) -> None:
    """Write a checkpoint of `model` with `fields`, whole or not at all.

    Every field is stored as a NumPy array (strings as unicode arrays); Python
    objects are refused.
    """
    arrays = {"_format": np.array(FORMAT), "_version": np.array(VERSION),
              "_model": np.array(model), "_nlsepy": np.array(__version__)}
    for name, value in fields.items():
        if name.startswith("_"):
            raise ValueError(f"checkpoint field names may not start with '_': {name!r}")
        arr = np.asarray(value)
        if arr.dtype == object:
            raise TypeError(f"checkpoint field {name!r} is not numeric or text: {value!r}")
        arrays[name] = arr
    atomic_savez(path, **arrays)


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
    if not zipfile.is_zipfile(spath):
        raise _bad(spath, "is not an nlsepy checkpoint (not an .npz archive; truncated or "
                          "another kind of file)")
    out: Dict[str, Any] = {}
    try:
        with np.load(spath) as d:  # plain arrays only (NumPy's default)
            names = set(d.files)
            if "_format" not in names:
                raise _bad(spath, "is an .npz archive but not an nlsepy checkpoint (no "
                                  "format tag)")
            tag = d["_format"]
            if tag.dtype.kind != "U" or str(tag) != FORMAT:
                raise _bad(spath, f"has format tag {str(tag)!r}, not {FORMAT!r}")
            version = d["_version"] if "_version" in names else None
            if version is None or version.dtype.kind not in "iu" or version.ndim != 0:
                raise _bad(spath, "has no valid format version")
            if int(version) > VERSION:
                raise _bad(spath, f"is of checkpoint version {int(version)}; this nlsepy "
                                  f"reads up to version {VERSION} (upgrade nlsepy)")
            got = str(d["_model"]) if "_model" in names else "?"
            if got != model:
                raise _bad(spath, f"is a checkpoint of {got}, not of {model}; load it with "
                                  f"nl.{got}.load")
            for name, key in keys.items():
                if name not in names:
                    if key.optional:
                        continue
                    raise _bad(spath, f"lacks the entry {name!r}")
                out[name] = _check_key(spath, name, d[name], key)
    except ValueError as exc:
        if str(exc).startswith(spath):
            raise
        # NumPy's own complaints (object arrays, bad headers)
        raise _bad(spath, f"cannot be read as an nlsepy checkpoint ({_numpy_reason(exc)})") \
            from None
    except (zipfile.BadZipFile, EOFError, OSError, KeyError) as exc:
        raise _bad(spath, f"is damaged or truncated ({type(exc).__name__}: {exc})") from None
    return out


def _numpy_reason(exc: Exception) -> str:
    msg = str(exc)
    if "Object arrays" in msg:
        return "it holds Python objects, which nlsepy never reads"
    return msg.split("\n")[0][:200]
