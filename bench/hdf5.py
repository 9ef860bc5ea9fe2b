"""Benchmark of run files: ``NLSE.run(..., output="run.h5")`` against no output.

The budget: streaming the frames into HDF5 must not slow a CPU run with 100
frames of a 128^3 complex128 state by more than 5 % against the same run
without output.  This script times ``sim.run(t_end, frames=100)`` of
:class:`nlsepy.NLSE` (2SHOC, periodic, the default ``dt``) on the CPU

* without ``output`` (the baseline: the run keeps its 101 frames in memory
  either way),
* with ``output=`` and the shipped settings (:data:`nlsepy.common.hdf5.COMPRESSION`),
* the same without the scalar series (``norm``, ``energy``: what computing
  them per frame costs),
* the same with the frames left to the page cache (``SYNC_BYTES = 0``)
  instead of put on the disk and dropped from the cache by the writer
  thread (:data:`nlsepy.common.hdf5.SYNC_BYTES`),
* and, for the choice of filter, with the frames compressed by HDF5's lzf
  filter and by gzip level 1 (``--modes``),

each from the same initial state (a smooth condensate with a density dip and
a phase gradient), the repetitions interleaved (A B C D, A B C D, ...) so a
drift of the shared machine's load touches every mode alike.  A run's time
includes everything ``run`` does: the steps, the frames, and with output the
file's creation, the observables per frame (``norm``, ``energy``: one pass
over the grid in C), the writes, the flush after each frame and the close.
Each file is removed right after its run (so its pages never need writing
back to disk).

Reported: the median of the repetitions (seconds per run), all of them, the
median of the process's CPU seconds (user + system, all its threads) over a
run, the
overhead ``median(mode) / median(no output) - 1`` in percent, the paired
overhead (the median over repetitions of ``run / the no-output run of the
same repetition - 1``, less sensitive to a drift of the machine), the extra
milliseconds per frame, and the file's size against the raw bytes of the
frames.

Usage
-----
::

    python bench/hdf5.py [--n 128] [--frames 100] [--steps-per-frame 10]
                         [--repeats 3] [--modes none,h5,nosync,frames,lzf,gzip]
                         [--dir DIR]
                         [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import tempfile
import time
from typing import Any, Dict, List

import numpy as np

import _common
import nlsepy as nl
from nlsepy.common import hdf5 as _hdf5

# mode: (write a file, compression, scalar series, SYNC_BYTES: None as shipped)
MODES = {"none": (False, None, True, None), "h5": (True, "default", True, None),
         "nosync": (True, "default", True, 0), "frames": (True, "default", False, None),
         "lzf": (True, "lzf", True, None), "gzip": (True, "gzip", True, None)}
LABEL = {"none": "no output", "h5": "output= (shipped)",
         "nosync": "output=, left to the page cache", "frames": "output=, no series",
         "lzf": "output=, lzf", "gzip": "output=, gzip 1"}


def initial_state(n: int, h: float) -> np.ndarray:
    """A smooth background with a Gaussian dip and a phase gradient."""
    x = h * (np.arange(n) - n / 2)
    X, Y, Z = np.meshgrid(x, x, x, indexing="ij", sparse=True)
    r2 = X ** 2 + Y ** 2 + Z ** 2
    return (1.0 - 0.5 * np.exp(-r2 / 8.0)) * np.exp(1j * 2 * np.pi / (n * h) * X)


def one_run(psi0: np.ndarray, h: float, frames: int, steps: int, mode: str,
            folder: str) -> Dict[str, Any]:
    """Seconds of one run in `mode` and the size of its file."""
    write, compression, series, sync = MODES[mode]
    sim = nl.NLSE(psi0, h, a=1.0, s=-1.0, bc="periodic", scheme="2shoc", backend="cpu")
    t_end = frames * steps * sim.dt
    path = os.path.join(folder, "run.h5")
    saved = _hdf5.COMPRESSION, _hdf5.RECORD_SCALARS, _hdf5.SYNC_BYTES
    if write and compression != "default":
        _hdf5.COMPRESSION = compression
    _hdf5.RECORD_SCALARS = series
    if sync is not None:
        _hdf5.SYNC_BYTES = sync
    try:
        c0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        out = sim.run(t_end, frames=frames, output=path if write else None)
        seconds = time.perf_counter() - t0
        c1 = resource.getrusage(resource.RUSAGE_SELF)
    finally:
        _hdf5.COMPRESSION, _hdf5.RECORD_SCALARS, _hdf5.SYNC_BYTES = saved
    size = os.path.getsize(path) if write else 0
    if write:
        os.remove(path)
    raw = len(out) * out[0][1].nbytes
    cpu = (c1.ru_utime - c0.ru_utime) + (c1.ru_stime - c0.ru_stime)
    return {"seconds": seconds, "cpu_seconds": cpu, "file_bytes": size, "raw_bytes": raw,
            "steps": sim._steps, "loadavg_after": _common.loadavg()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=128, help="points per axis (3D grid)")
    ap.add_argument("--frames", type=int, default=100)
    ap.add_argument("--steps-per-frame", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--modes", default="none,h5,nosync,frames,lzf,gzip",
                    help="comma-separated: none, h5 (shipped), nosync, frames (no series), "
                         "lzf, gzip")
    ap.add_argument("--dir", default=None, help="folder of the run files (default: a "
                                                "temporary folder)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    modes = _common.mode_list(ap, args.modes, sorted(MODES))
    info = _common.machine_info("cpu", threads=nl.get_num_threads(),
                                shipped_compression=_hdf5.COMPRESSION,
                                shipped_sync_bytes=_hdf5.SYNC_BYTES)
    import h5py
    info.update(h5py=h5py.__version__, hdf5=h5py.version.hdf5_version)
    print(json.dumps(info, indent=1, default=str))
    h = 0.25
    psi0 = initial_state(args.n, h)
    folder = args.dir or tempfile.mkdtemp(prefix="nlsepy-h5bench-")
    results: Dict[str, List[Dict[str, Any]]] = {m: [] for m in modes}
    try:
        one_run(psi0, h, 2, 2, "h5", folder)  # warm-up: imports, page cache, FFT-free
        for rep in range(args.repeats):
            for m in modes:
                r = one_run(psi0, h, args.frames, args.steps_per_frame, m, folder)
                results[m].append(r)
                print(f"rep {rep} {m:6s} {r['seconds']:8.2f} s  cpu {r['cpu_seconds']:8.2f} s  "
                      f"file {r['file_bytes'] / 2 ** 20:8.1f} MiB  load {r['loadavg_after']}",
                      flush=True)
    finally:
        if args.dir is None:
            shutil.rmtree(folder, ignore_errors=True)
    base = statistics.median(r["seconds"] for r in results["none"])
    rows = []
    for m in modes:
        cost = _common.overheads(results[m], results["none"])
        r0 = results[m][0]
        rows.append({
            "mode": LABEL[m], "median": cost["median"],
            "all": " ".join(f"{r['seconds']:.2f}" for r in results[m]),
            "cpu": statistics.median(r["cpu_seconds"] for r in results[m]),
            "overhead": cost["overhead"], "paired": cost["paired"],
            "per_frame": 1e3 * (cost["median"] - base) / (args.frames + 1),
            "size": r0["file_bytes"] / 2 ** 20 if r0["file_bytes"] else None,
            "ratio": r0["file_bytes"] / r0["raw_bytes"] if r0["file_bytes"] else None})
    steps = results["none"][0]["steps"]
    print(f"\nNLSE 2SHOC periodic, {args.n}^3 complex128, {args.frames} frames, "
          f"{args.steps_per_frame} steps per frame ({steps} steps), cpu, "
          f"{nl.get_num_threads()} thread(s), median of {args.repeats}; "
          f"baseline {base:.2f} s = {1e3 * base / steps:.1f} ms/step\n")
    print(_common.format_table(rows, [
        ("mode", "mode", "{}"), ("median", "s/run (median)", "{:.2f}"),
        ("all", "runs (s)", "{}"), ("cpu", "process cpu s (median)", "{:.1f}"),
        ("overhead", "overhead %", "{:+.1f}"),
        ("paired", "paired %", "{:+.1f}"),
        ("per_frame", "ms/frame extra", "{:+.1f}"), ("size", "file MiB", "{:.0f}"),
        ("ratio", "file / raw frames", "{:.3f}")], missing="-"))
    _common.write_json(args.json, {"info": info, "results": results, "rows": rows}, default=str)


if __name__ == "__main__":
    main()
