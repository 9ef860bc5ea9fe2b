"""What every model shares to stay safe: Ctrl-C and memory.

Interrupts
    A C call runs with the GIL released and cannot see Ctrl-C; Python raises
    ``KeyboardInterrupt`` only when the call returns, which may be after the
    object's counters were meant to change.  :func:`chunked` splits a long
    piece of work (steps, iterations) into calls of about
    :data:`CHUNK_SECONDS` each, takes SIGINT while it runs as a flag, lets
    the model book each chunk (time, counters) and raises
    ``KeyboardInterrupt`` between chunks: the object is consistent and can
    go on.  A call of a single unit longer than a second cannot be cut.

Checkpoints are in :mod:`nlsepy.common.files`.

Memory
    :func:`require_memory` compares the bytes a model is about to take with
    what the host (or the GPU) has free and raises ``MemoryError`` naming
    the size and the parameters behind it.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional, Tuple

from . import backend as _backend

__all__ = ["chunked", "deferred_sigint", "require_memory", "host_memory_available",
           "format_bytes"]

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
        return int(_backend.cuda().mem_info()[0])
    except Exception:
        return None


def require_memory(nbytes: float, what: str, backend: str = "cpu",
                   host_bytes: float = 0.0,
                   advice: str = "use a smaller grid or complex64") -> None:
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
    advice : str, optional
        What to do instead, the message's last words (a model whose size
        comes from other parameters than a grid gives its own).
    """
    if backend == "cuda":
        free = device_memory_available()
        if free is not None and nbytes > free:
            raise MemoryError(f"{what} needs {format_bytes(nbytes)} of GPU memory, the GPU has "
                              f"{format_bytes(free)} free; {advice}")
        nbytes = host_bytes
    if nbytes <= 0:
        return
    avail = host_memory_available()
    if nbytes > avail:
        raise MemoryError(f"{what} needs {format_bytes(nbytes)} of memory, this machine has "
                          f"{format_bytes(avail)} available; {advice}")
