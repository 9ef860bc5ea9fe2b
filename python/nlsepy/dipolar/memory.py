"""The memory a ``DipolarGPE`` takes, counted before anything is allocated.

:func:`memory_parts` counts, buffer by buffer, what the C core and the CUDA
backend allocate for a grid; :func:`require` turns such a count into a
``MemoryError`` (:class:`DeviceMemoryError` for the GPU's memory) that names
the solver and its largest buffers.
"""

from __future__ import annotations

from typing import Any, Dict, Sequence, Tuple

import numpy as np

from ..common import backend as _backend
from ..common import guard as _guard
from ..common.errors import BackendError

__all__ = ["DeviceMemoryError", "memory_parts", "require", "require_dipolar", "require_frames",
           "solver_what", "threads"]


class DeviceMemoryError(BackendError, MemoryError):
    """The GPU does not have the device memory a CUDA solver needs (raised
    before anything is allocated; both a ``MemoryError`` and an
    :class:`~nlsepy.BackendError`)."""


def _internal_shape(shape: Sequence[int]) -> Tuple[int, int, int]:
    """The C core's ``(n0, n1, n2)`` of solver axes `shape` (padded with 1s in front)."""
    n = (1,) * (3 - len(shape)) + tuple(int(v) for v in shape)
    return n[0], n[1], n[2]


def memory_parts(shape: Sequence[int], dtype: Any = np.complex128, dipolar: bool = False,
                 backend: str = "cpu", threads: int = 1, potential: bool = False,
                 psi0: bool = False) -> Dict[str, Dict[str, int]]:
    """Bytes a solver of `shape` takes, by buffer, on its backend and on the host.

    Counts what ``csrc/dipolar/dipolar.c`` (CPU) and ``cuda/dipolar/*.cu``
    allocate: the state and the backup of it that a step call keeps, the
    per-axis tables (coordinates, Simpson weights, trap and obstacle factors,
    Crank-Nicolson coefficients for both modes), the per-row partial norms, the
    per-thread sweep buffers (CPU: ``n2 + 2 n2 max(n0, n1) + 64`` values each),
    with the dipolar term the padded density/FFT buffer (``n0 n1 2(n2/2+1)``
    values), the kernel table (``n0 n1 (n2/2+1)``) and the FFT plans' work
    areas (cuFFT: counted as one half spectrum per plan; FFTW: a few lines
    per axis and thread), the user potential, and the Crank-Nicolson
    coefficients' work array (6 doubles per point of the longest axis).  On
    the host besides: the solver's own copy of `V`, the staging copy of an
    initial state and (CUDA) the kernel table before its upload.

    Parameters
    ----------
    shape : sequence of int
        Points per solver axis.
    dtype : {numpy.complex64, numpy.complex128}, optional
        Precision.
    dipolar : bool, optional
        With the dipolar FFT buffers and plans.
    backend : {"cpu", "cuda"}, optional
        Where the solver's buffers live.
    threads : int, optional
        CPU threads (one sweep buffer each).
    potential : bool, optional
        A static potential `V` is set.
    psi0 : bool, optional
        An initial state is given (staged on the host).

    Returns
    -------
    dict
        ``{"solver": {part: bytes}, "host": {part: bytes}}``: the solver's
        buffers (device memory for ``"cuda"``, host memory for ``"cpu"``)
        and what the host holds besides.
    """
    rs = 4 if np.dtype(dtype) == np.complex64 else 8
    n0, n1, n2 = _internal_shape(shape)
    N = n0 * n1 * n2
    nh = n2 // 2 + 1
    solver: Dict[str, int] = {}
    host: Dict[str, int] = {}
    solver["state and its backup"] = 4 * N * rs
    solver["per-axis tables"] = sum(n * (16 + 8 * rs) for n in (n0, n1, n2))
    cn_work = {"Crank-Nicolson work": 6 * 8 * max(n0, n1, n2)}  # made on the host, then freed
    if backend == "cpu":
        solver["per-row norms"] = 2 * 8 * n0 * n1  # the norm's and the moments' partial sums
        solver["sweep buffers"] = max(1, int(threads)) * (n2 + 2 * n2 * max(n0, n1) + 64) * rs
        solver.update(cn_work)
    else:
        solver["block sums"] = 4096 * 12 * 8 + 1024 * 4 * 8  # and the recorded moments' rows
        host.update(cn_work)
        if dipolar:  # the kernel table is computed on the host and uploaded
            host["kernel staging"] = n0 * n1 * nh * (8 + (4 if rs == 4 else 0))
    if dipolar:
        solver["density/FFT buffer"] = n0 * n1 * 2 * nh * rs
        solver["dipolar kernel"] = n0 * n1 * nh * rs
        if backend == "cuda":
            solver["cuFFT work areas"] = 2 * (n0 * n1 * 2 * nh * rs)
        else:
            solver["FFTW plans"] = 64 * (n0 + n1 + n2) * 2 * rs * max(1, int(threads))
    if potential:
        solver["potential V"] = N * rs
        host["owned copy of V"] = N * rs
    if psi0:
        host["initial state"] = 2 * N * rs
    return {"solver": solver, "host": host}


def _describe(parts: Dict[str, int]) -> str:
    """The buffers of `parts` worth naming (from 1 MiB; all of them in a small total)."""
    floor = 1 << 20 if sum(parts.values()) >= 1 << 24 else 1
    return ", ".join(f"{k} {_guard.format_bytes(v)}" for k, v in parts.items() if v >= floor)


def threads(backend: str) -> int:
    """The CPU threads a solver on `backend` sweeps with (1 on a GPU)."""
    if backend != "cpu":
        return 1
    try:
        return int(_backend.core().get_num_threads())
    except Exception:  # noqa: BLE001 - a build without the query
        return 1


def solver_what(gpe: Any, **extra: Any) -> str:
    """The solver `gpe` in a memory message: grid, geometry, precision, backend
    (``comm`` when distributed), `extra` and the CPU threads."""
    dist = "comm, " if gpe.comm is not None else ""
    desc = (f"DipolarGPE({dist}shape={gpe.shape}, geometry={gpe.geometry!r}, "
            f"dtype={gpe.dtype.name}, backend={gpe.backend!r}")
    for k, v in extra.items():
        desc += f", {k}={v!r}"
    if gpe.backend == "cpu":
        desc += f"; {threads(gpe.backend)} threads"
    return desc + ")"


def require(gpe: Any, parts: Dict[str, Dict[str, int]], **extra: Any) -> None:
    """MemoryError before allocating when `parts` (solver / host bytes of
    :func:`memory_parts`) will not fit beside what `gpe`'s backend holds."""
    solver, host = parts["solver"], parts["host"]
    total_s, total_h = sum(solver.values()), sum(host.values())
    what = f"{solver_what(gpe, **extra)} [{_describe({**solver, **host})}]"
    if gpe.backend == "cuda":
        try:
            _guard.require_memory(total_s, what, backend="cuda", host_bytes=total_h)
        except MemoryError as exc:
            if "GPU memory" in str(exc):
                raise DeviceMemoryError(f"{exc} (device memory of the CUDA backend; "
                                        f"backend='cpu' uses host memory)") from None
            raise
    else:
        _guard.require_memory(total_s + total_h, what)


def require_dipolar(gpe: Any) -> None:
    """MemoryError unless the dipolar term's buffers and plans, added to a
    single-process solver made without them, fit."""
    n = threads(gpe.backend)
    parts = memory_parts(gpe.shape, gpe.dtype, True, gpe.backend, n)
    base = memory_parts(gpe.shape, gpe.dtype, False, gpe.backend, n)
    require(gpe, {w: {k: b for k, b in parts[w].items() if k not in base[w]}
                  for w in ("solver", "host")}, dipolar=True)


def require_frames(gpe: Any, count: int) -> None:
    """MemoryError when `count` host snapshots of a single-process state will not fit."""
    rs = 4 if gpe.dtype == np.complex64 else 8
    nbytes = count * 2 * int(np.prod(gpe.shape)) * rs
    _guard.require_memory(nbytes, f"{solver_what(gpe)} keeping {count} frames of the state "
                                  f"[{_guard.format_bytes(nbytes)}]")
