"""Pieces every benchmark in bench/ shares: the run header (machine, build,
commit, load), the host copy bandwidth, a CuPy probe, the Markdown table.

The scripts run as ``python bench/<name>.py``, so this folder is on
``sys.path`` and ``import _common`` finds this module.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

import nlsepy as nl

COPY_BYTES = 256 * 2 ** 20


def run_cmd(cmd: Sequence[str]) -> Optional[str]:
    """Output of `cmd` (stripped), or None when it fails."""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10,
                             cwd=os.path.dirname(os.path.abspath(__file__)))
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def loadavg() -> Optional[Tuple[float, float, float]]:
    """1, 5 and 15 minute load averages (None where unavailable)."""
    try:
        return tuple(round(x, 2) for x in os.getloadavg())  # type: ignore[return-value]
    except OSError:
        return None


def cpu_model() -> str:
    """CPU model name from ``/proc/cpuinfo`` (or :func:`platform.processor`).

    Returns
    -------
    str
        The first ``model name`` line's value.
    """
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_info(backend: str, **extra: Any) -> Dict[str, Any]:
    """What the figures depend on: date, commit, CPU, build, command line.

    Parameters
    ----------
    backend : str
        The backend benchmarked.
    **extra
        Further header fields (listed after the backend).

    Returns
    -------
    dict
        Header fields.
    """
    dirty = run_cmd(["git", "status", "--porcelain", "--untracked-files=no"])
    info = {
        "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "git_head": run_cmd(["git", "rev-parse", "--short", "HEAD"]),
        "git_worktree_dirty": None if dirty is None else bool(dirty),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "nlsepy": nl.__version__,
        "nlsepy_path": os.path.dirname(nl.__file__),
        "build_info": nl.build_info(),
        "backend": backend,
    }
    info.update(extra)
    info["command"] = " ".join([os.path.basename(sys.executable)] + sys.argv)
    info["loadavg_at_start"] = loadavg()
    return info


def copy_bandwidth(threads: int, nbytes: int = COPY_BYTES, repeats: int = 7) -> float:
    """Host copy bandwidth in bytes/s: median of ``np.copyto(dst, src)``.

    Counts bytes read plus bytes written (``2 * nbytes`` per copy), no
    write-allocate.  With ``threads > 1`` each Python thread copies one
    contiguous slice (NumPy releases the GIL while copying).

    Parameters
    ----------
    threads : int
        Number of threads copying.
    nbytes : int, optional
        Size of the source array in bytes (float64).
    repeats : int, optional
        Number of timed copies.

    Returns
    -------
    float
        Bytes per second.
    """
    n = nbytes // 8
    src = np.full(n, 1.5)
    dst = np.empty_like(src)
    edges = np.linspace(0, n, threads + 1).astype(int)
    pairs = [(dst[lo:hi], src[lo:hi]) for lo, hi in zip(edges[:-1], edges[1:])]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        def copy() -> None:
            if threads == 1:
                np.copyto(dst, src)
            else:
                list(pool.map(lambda p: np.copyto(*p), pairs))
        copy()  # first touch of dst
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            copy()
            times.append(time.perf_counter() - t0)
    return 2 * n * 8 / statistics.median(times)


def cupy_or_none() -> Any:
    """The ``cupy`` module when importable with a usable device, else None."""
    try:
        import cupy
        cupy.zeros(1)
        return cupy
    except Exception:  # not installed, or no usable device
        return None


def format_table(rows: List[Dict[str, Any]], columns: Sequence[Tuple[str, str, str]],
                 missing: str = "") -> str:
    """The rows as a Markdown table.

    Parameters
    ----------
    rows : list of dict
        Result rows.
    columns : sequence of (key, heading, format)
        Which fields to show, in order.
    missing : str, optional
        Cell text where a row's value is absent or None.

    Returns
    -------
    str
        The table.
    """
    cells = [[(missing if r.get(key) is None else fmt.format(r[key])) for key, _, fmt in columns]
             for r in rows]
    heads = [head for _, head, _ in columns]
    widths = [max([len(h)] + [len(c[j]) for c in cells]) for j, h in enumerate(heads)]

    def line(vals: Sequence[str]) -> str:
        return "| " + " | ".join(v.rjust(w) for v, w in zip(vals, widths)) + " |"

    sep = "|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|"
    return "\n".join([line(heads), sep] + [line(c) for c in cells])
