"""What every model shares to stay safe: Ctrl-C, checkpoints, memory.

Interrupts
    A C call runs with the GIL released and cannot see Ctrl-C; Python raises
    ``KeyboardInterrupt`` only when the call returns, which may be after the
    object's counters were meant to change.  :func:`chunked` splits a long
    piece of work (steps, iterations) into calls of about
    :data:`CHUNK_SECONDS` each, takes SIGINT while it runs as a flag, lets
    the model book each chunk (time, counters) and raises
    ``KeyboardInterrupt`` between chunks: the object is consistent and can
    go on.  A call of a single unit longer than a second cannot be cut.

Checkpoints
    :func:`save_checkpoint` writes an ``.npz`` of plain arrays, whole or
    not at all, with a format tag, a version and the model's name;
    :func:`load_checkpoint` checks all of them and every key's kind, shape,
    dtype and finiteness, and raises ``ValueError`` naming the file and the
    problem.

Memory
    :func:`require_memory` compares the bytes a model is about to take with
    what the host (or the GPU) has free and raises ``MemoryError`` naming
    the size and the parameters behind it.
"""

from __future__ import annotations

import math
import os
import signal
import threading
import time
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

__all__ = ["chunked", "deferred_sigint", "save_checkpoint", "load_checkpoint", "Key",
           "require_memory", "host_memory_available", "format_bytes"]

#: seconds of work one C call takes at most (after the first calls, which
#: measure the speed): Ctrl-C acts within about this time
CHUNK_SECONDS = 0.1


# --------------------------------------------------------------- interrupts
class _SigintFlag:
    """A SIGINT handler that only records the signal."""

    def __init__(self) -> None:
        self.hit = False
        self.previous: Any = signal.default_int_handler
        self.installed = False

    def __call__(self, signum: int, frame: Any) -> None:
        self.hit = True

    def restore(self) -> None:
        """Put the previous handler back (once)."""
        if self.installed:
            signal.signal(signal.SIGINT, self.previous)
            self.installed = False

    def raise_now(self) -> None:
        """Restore the previous handler and give it the recorded signal
        (``KeyboardInterrupt`` under Python's default handler)."""
        self.hit = False
        self.restore()
        prev = self.previous
        if prev == signal.SIG_IGN:
            return
        if callable(prev) and prev is not signal.default_int_handler:
            prev(signal.SIGINT, None)
            return
        raise KeyboardInterrupt


_depth = threading.local()


@contextmanager
def deferred_sigint() -> Iterator[_SigintFlag]:
    """Hold SIGINT back while the block runs: the handler records it, and
    ``flag.raise_now()`` (or leaving the block normally) delivers it.

    Off the main thread, or inside another such block, nothing is installed
    (signals reach the main thread only); an inner block shares the outer
    block's flag."""
    outer = getattr(_depth, "n", 0)
    if outer > 0:  # the outer block's flag, delivered there
        _depth.n = outer + 1
        try:
            yield _depth.flag
        finally:
            _depth.n = outer
        return
    flag = _SigintFlag()
    _depth.flag = flag
    if threading.current_thread() is threading.main_thread():
        try:
            flag.previous = signal.signal(signal.SIGINT, flag)
            flag.installed = True
        except (ValueError, OSError):  # e.g. an embedded interpreter
            flag.installed = False
    _depth.n = outer + 1
    try:
        yield flag
    finally:
        _depth.n = outer
        # the flag is read after the previous handler is back: a signal
        # that lands between a read and the restore would be lost (it sets
        # the flag after the read, and nothing reads it again)
        flag.restore()
        hit = flag.hit
    if hit:
        flag.raise_now()


def chunked(total: int, work: Callable[[int], Any], first: int = 1,
            seconds: Optional[float] = None, comm: Any = None) -> None:
    """Do `total` units of `work` in calls of about `seconds` each.

    Parameters
    ----------
    total : int
        Units (steps, iterations) to do.
    work : callable
        ``work(k)`` does ``k`` units and books them on the model (time,
        counters); it may return ``False`` to end early (converged).
    first : int, optional
        Units of the first call (later calls are sized from the measured
        speed).
    seconds : float, optional
        Target length of one call (default :data:`CHUNK_SECONDS`).
    comm : mpi4py communicator, optional
        For a model distributed over the ranks of `comm`: every rank makes
        the same calls (rank 0 sizes them), stops early only when all agree
        and raises ``KeyboardInterrupt`` together when any rank was
        interrupted, so the ranks' collective calls stay paired.

    Raises
    ------
    KeyboardInterrupt
        Between two calls after a SIGINT; every call made was booked.
    """
    target = CHUNK_SECONDS if seconds is None else float(seconds)
    done, k = 0, max(1, int(first))
    with deferred_sigint() as flag:
        while done < total:
            k = min(k, total - done)
            t0 = time.perf_counter()
            more = work(k)
            elapsed = time.perf_counter() - t0
            done += k
            # the next call: the units that take `target`, growing at most 8x
            per = elapsed / k
            k = int(min(8 * k, target / per)) if per > 0 else 8 * k
            k = max(1, k)
            hit = flag.hit
            if comm is not None:
                hit, go_on = comm.allreduce((bool(hit), more is not False), op=_OR_AND)
                k = comm.bcast(k, root=0)
                more = None if go_on else False
            if hit:
                if not flag.hit:  # another rank was interrupted
                    raise KeyboardInterrupt("interrupted on another rank")
                flag.raise_now()
            if more is False:
                return


def _OR_AND(a: Tuple[bool, bool], b: Tuple[bool, bool]) -> Tuple[bool, bool]:
    """(any interrupted, all want to go on) of two ranks' flags."""
    return (a[0] or b[0], a[1] and b[1])


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
    from .runner import atomic_savez
    from . import __version__
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


# ------------------------------------------------------------------- memory
def format_bytes(n: float) -> str:
    """`n` bytes as a short human-readable string (binary units)."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"  # pragma: no cover


def host_memory_available() -> int:
    """Bytes of host memory a new allocation can take now: the kernel's
    ``MemAvailable`` (Linux), bounded by a cgroup memory limit, else the
    free physical pages."""
    avail = None
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    if avail is None:
        try:
            avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return 1 << 62  # unknown: do not refuse
    for limit_file, usage_file in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            with open(limit_file, encoding="ascii") as fh:
                raw = fh.read().strip()
            if raw == "max":
                break
            with open(usage_file, encoding="ascii") as fh:
                used = int(fh.read().strip())
            avail = min(avail, max(0, int(raw) - used))
            break
        except (OSError, ValueError):
            continue
    return int(avail)


def device_memory_available() -> Optional[int]:
    """Free bytes of the current CUDA device, or None when unknown."""
    try:
        from . import _cuda  # type: ignore[attr-defined]
        return int(_cuda.mem_info()[0])
    except Exception:
        return None


def require_memory(nbytes: float, what: str, backend: str = "cpu",
                   host_bytes: float = 0.0) -> None:
    """Raise MemoryError when `nbytes` will not fit.

    Parameters
    ----------
    nbytes : float
        Bytes the model will take on its backend (device memory for
        ``"cuda"``, host memory for ``"cpu"``).
    what : str
        The model and the parameters behind the size, for the message.
    backend : {"cpu", "cuda"}
        Where `nbytes` is taken.
    host_bytes : float, optional
        Host bytes a CUDA model takes besides (staging, frames).
    """
    if backend == "cuda":
        free = device_memory_available()
        if free is not None and nbytes > free:
            raise MemoryError(f"{what} needs {format_bytes(nbytes)} of GPU memory, the GPU has "
                              f"{format_bytes(free)} free; use a smaller grid or "
                              f"complex64")
        nbytes = host_bytes
    if nbytes <= 0:
        return
    avail = host_memory_available()
    if nbytes > avail:
        raise MemoryError(f"{what} needs {format_bytes(nbytes)} of memory, this machine has "
                          f"{format_bytes(avail)} available; use a smaller grid or complex64")
