"""Pieces every benchmark in bench/ shares: the command line's parser, the
run header (machine, build, commit, load), the host copy bandwidth, a CuPy
probe, the Markdown table, the report of noisy repetitions and of the load,
the JSON record, and the modes against a baseline of the overhead benchmarks.

The scripts run as ``python bench/<name>.py``, so this folder is on
``sys.path`` and ``import _common`` finds this module.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

import nlsepy as nl

COPY_BYTES = 256 * 2 ** 20
#: the columns (key, heading, format) of the achieved bandwidth against the copy bandwidth
COPY_COLUMNS: Tuple[Tuple[str, str, str], ...] = (
    ("gbps", "GB/s achieved", "{:.2f}"),
    ("copy_gbps", "copy GB/s", "{:.2f}"),
    ("fraction_of_copy", "fraction of copy bw", "{:.2f}"),
)


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


def event_seconds(cp: Any, call: Callable[[], Any]) -> float:
    """Seconds of ``call()`` on the device, between two CUDA events.

    Parameters
    ----------
    cp : module
        ``cupy``.
    call : callable
        What is timed (no arguments); it queues work on the current stream.

    Returns
    -------
    float
        Elapsed device time in seconds.
    """
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    e0.record()
    call()
    e1.record()
    e1.synchronize()
    return cp.cuda.get_elapsed_time(e0, e1) * 1e-3


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


def arg_parser(doc: str) -> argparse.ArgumentParser:
    """The parser of a benchmark's command line.

    Parameters
    ----------
    doc : str
        The script's docstring: its first paragraph is the description,
        and ``--help`` keeps the paragraph's line breaks.

    Returns
    -------
    argparse.ArgumentParser
        A parser without arguments yet.
    """
    return argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                   formatter_class=argparse.RawDescriptionHelpFormatter)


def print_header(title: str, info: Dict[str, Any]) -> None:
    """Print the benchmark's title and the header fields, one a line.

    Parameters
    ----------
    title : str
        First line.
    info : dict
        Header fields (:func:`machine_info`).
    """
    print(title)
    for key, val in info.items():
        print(f"  {key:20s} {val}")


def print_table(rows: List[Dict[str, Any]], columns: Sequence[Tuple[str, str, str]],
                legend: str) -> None:
    """Print the rows as a Markdown table between blank lines, then its legend.

    Parameters
    ----------
    rows : list of dict
        Result rows.
    columns : sequence of (key, heading, format)
        Which fields to show (:func:`format_table`).
    legend : str
        What the columns measure and how.
    """
    print()
    print(format_table(rows, columns))
    print()
    print(legend)


def print_noisy(rows: List[Dict[str, Any]], limit: float, label: Callable[[Dict[str, Any]], str],
                reps: str, unit: str) -> None:
    """List the rows whose repetitions differ by more than `limit` (max/min).

    Such a spread is a sign of a disturbed machine.  Rows without a
    ``rep_spread`` (None: not timed) are left out.

    Parameters
    ----------
    rows : list of dict
        Result rows, each with ``rep_spread`` (max/min of its repetitions).
    limit : float
        Largest spread that is not listed.
    label : callable
        ``label(row)``: the row's name at the start of its line.
    reps : str
        Key of the row's per-repetition times.
    unit : str
        Unit of those times.
    """
    noisy = [r for r in rows if r["rep_spread"] is not None and r["rep_spread"] > limit]
    if noisy:
        print(f"repetitions differing by more than {limit:.1f}x (max/min), a sign of a "
              f"disturbed machine:")
        for r in noisy:
            print(f"  {label(r)}: " + " ".join(f"{x:.2f}" for x in r[reps]) + f" {unit}")


def print_load(info: Dict[str, Any], note: str = "") -> None:
    """Record the load average at the end in `info` and print it beside the start's.

    Parameters
    ----------
    info : dict
        Header fields (:func:`machine_info`); ``loadavg_at_end`` is added.
    note : str, optional
        Appended to the explanation (after "... means other work shared
        the CPUs").
    """
    info["loadavg_at_end"] = loadavg()
    print(f"load average at start {info['loadavg_at_start']}, at end {info['loadavg_at_end']} "
          f"(1/5/15 min; a 1-minute load well above the thread count means other work shared "
          f"the CPUs{note})")


def write_json(path: Optional[str], record: Dict[str, Any], default: Any = None) -> None:
    """Write the run's record as JSON (indented by 1) where a path was given.

    Parameters
    ----------
    path : str or None
        The ``--json`` option: the file, or None to write nothing.
    record : dict
        Header, rows and whatever else the benchmark keeps.
    default : callable, optional
        :func:`json.dump`'s conversion of values JSON has no type for.
    """
    if path:
        with open(path, "w") as f:
            json.dump(record, f, indent=1, default=default)


def report(rows: List[Dict[str, Any]], columns: Sequence[Tuple[str, str, str]],
           path: Optional[str], record: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Print the run's table (missing values as n/a) after a blank line and
    write `record` with the rows as JSON where `path` is given.

    Parameters
    ----------
    rows, columns
        As for :func:`format_table`.
    path : str or None
        The ``--json`` option.
    record : dict
        Header and whatever else the benchmark keeps beside ``rows``.

    Returns
    -------
    list of dict
        `rows`, so that a benchmark's ``main`` can end with this call.
    """
    print()
    print(format_table(rows, columns, missing="n/a"))
    write_json(path, {**record, "rows": rows}, default=str)
    return rows


def mode_list(parser: argparse.ArgumentParser, text: str, known: Sequence[str]) -> List[str]:
    """The modes of a ``--modes`` option, the baseline ``none`` first.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        Reports an unknown mode (and exits).
    text : str
        Comma-separated modes.
    known : sequence of str
        The modes the benchmark has.

    Returns
    -------
    list of str
        The modes in the order given, ``none`` put first where missing.
    """
    modes = [m.strip() for m in text.split(",") if m.strip()]
    for m in modes:
        if m not in known:
            parser.error(f"unknown mode {m!r}; choose among {list(known)}")
    if "none" not in modes:
        modes.insert(0, "none")
    return modes


def overheads(runs: List[Dict[str, Any]], base: List[Dict[str, Any]]) -> Dict[str, float]:
    """Median time of a mode's runs and its overhead over the baseline's.

    Parameters
    ----------
    runs, base : list of dict
        The mode's and the baseline's runs (repetition by repetition, each
        with ``seconds``).

    Returns
    -------
    dict
        ``median`` (s), ``overhead`` (% of the baseline's median) and
        ``paired`` (median of the repetitions' ratios to the baseline run
        next to them, in %: less sensitive to a drifting machine).
    """
    med = statistics.median(r["seconds"] for r in runs)
    return {"median": med,
            "overhead": 100.0 * (med / statistics.median(b["seconds"] for b in base) - 1.0),
            "paired": 100.0 * (statistics.median(
                r["seconds"] / b["seconds"] for r, b in zip(runs, base)) - 1.0)}
