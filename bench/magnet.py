"""Benchmark of ``nl.CoaxialMagnet``: the magnet problem of source 002 at the thesis size.

The thesis problem (r0 = 0.25 m, z0 = 0.5 m, r1 = z1 = 4 m, h = 0.001 m:
4001 x 4001 nodes, tol = 0.5e-6, double; its Table 5.3b: 30888 red-black
SOR iterations, 66.8 s of kernel time on a Tesla P100, about 7.4e9 updates
per second at best), solved by red-black SOR at the estimated omega and by
multigrid in the same run.

Bytes model of one red-black SOR iteration, per unknown: each node is read
and written once by its own colour's half-sweep and read once as a
neighbour by the other colour's (the other three neighbour reads hit the
cache): 3 values, 24 B in double, 12 B in float.  The fraction printed is
that traffic over the time, divided by the copy bandwidth measured in the
same run (device-to-device cudaMemcpy on the GPU, np.copyto on the CPU).

On the CPU a full red-black SOR solve at 4001^2 takes hours on two cores:
``--rbsor-iterations N`` (default 200 on the CPU) times N iterations and
projects the time of the full count from the rate (marked as a projection).

Usage::

    python bench/magnet.py [--backend cpu|cuda] [--h 0.001] [--dtype float64]
                            [--rbsor-iterations N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

import nlsepy as nl

from _common import copy_bandwidth, format_table, machine_info

THESIS_ITERATIONS = 30888   #: red-black SOR iterations of the thesis at 4001^2 (Table 5.3b)
THESIS_SECONDS = 66.8       #: its kernel time on a Tesla P100

COLUMNS = (("solver", "solver", "{}"), ("grid", "grid", "{}"), ("dtype", "dtype", "{}"),
           ("iterations", "iterations", "{}"), ("converged", "converged", "{}"),
           ("residual", "||r||/||f||", "{:.2e}"), ("seconds", "s (iterations)", "{:.3f}"),
           ("wall", "s (with setup)", "{:.3f}"), ("updates_per_s", "updates/s", "{:.3e}"),
           ("gbps", "GB/s (model)", "{:.1f}"), ("fraction", "fraction of copy", "{:.2f}"),
           ("note", "note", "{}"))


def parse(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--h", type=float, default=0.001, help="mesh spacing (m), default 0.001")
    p.add_argument("--size", type=float, default=4.0, help="r1 = z1 (m), default 4")
    p.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    p.add_argument("--tol", type=float, default=0.5e-6)
    p.add_argument("--rbsor-iterations", type=int, default=None,
                   help="cap on red-black SOR iterations (default: none on cuda, 200 on cpu)")
    p.add_argument("--json", metavar="PATH")
    return p.parse_args(argv)


def device_copy(backend: str) -> float:
    if backend == "cuda":
        from nlsepy import _cuda
        return _cuda.copy_bandwidth(256 << 20, 20) * 1e9
    return copy_bandwidth(nl.get_num_threads(), repeats=5)


def main(argv: Optional[Sequence[str]] = None) -> List[Dict[str, Any]]:
    a = parse(argv)
    info = machine_info(a.backend, threads=nl.get_num_threads())
    print("nlsepy CoaxialMagnet benchmark (source 002, the thesis problem)")
    for k, v in info.items():
        print(f"  {k:20s} {v}")
    dt = np.dtype(a.dtype).type
    mag = nl.CoaxialMagnet(0.25, 0.5, a.size, a.size, a.h, B=1e-3, dtype=dt, backend=a.backend)
    bw = device_copy(a.backend)
    print(f"grid {mag.nr} x {mag.nz}, {mag.unknowns} unknowns, omega = {mag.omega_estimate():.8f}; "
          f"copy bandwidth {bw / 1e9:.1f} GB/s (read + write)", flush=True)
    grid = f"{mag.nr}x{mag.nz}"
    vb = np.dtype(a.dtype).itemsize
    rows = []
    cap = a.rbsor_iterations if a.rbsor_iterations is not None else (
        None if a.backend == "cuda" else 200)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nl.ConvergenceWarning)
        t0 = time.perf_counter()
        rb = mag.solve("rbsor", tol=a.tol, max_iter=cap or 10_000_000)
        wall = time.perf_counter() - t0
    ups = rb.updates_per_second
    gbps = 3 * vb * mag.unknowns * rb.iterations / rb.solve_seconds / 1e9
    thesis = (mag.nr, mag.nz) == (4001, 4001)
    if not rb.converged:
        per = rb.solve_seconds / rb.iterations
        note = f"{rb.iterations} iterations timed, not converged"
        if thesis:
            note += (f"; projected {per * THESIS_ITERATIONS:.0f} s for the thesis's "
                     f"{THESIS_ITERATIONS} (a projection, not a run)")
    else:
        note = (f"thesis: {THESIS_ITERATIONS} iterations, {THESIS_SECONDS} s on a P100"
                if thesis else "")
    rows.append(dict(solver="rbsor", grid=grid, dtype=a.dtype, iterations=rb.iterations,
                     converged=rb.converged, residual=rb.residual, seconds=rb.solve_seconds,
                     wall=wall, updates_per_s=ups, gbps=gbps, fraction=gbps * 1e9 / bw, note=note))
    print(f"rbsor: {rb.iterations} iterations, {rb.solve_seconds:.3f} s, {ups:.3e} updates/s, "
          f"{gbps:.1f} GB/s = {gbps * 1e9 / bw:.2f} of copy; {note}", flush=True)
    def timed(method: str, note: str) -> Any:
        t0 = time.perf_counter()
        sol = mag.solve(method, tol=a.tol, max_iter=200)
        wall = time.perf_counter() - t0
        rows.append(dict(solver=method, grid=grid, dtype=a.dtype, iterations=sol.iterations,
                         converged=sol.converged, residual=sol.residual, seconds=sol.solve_seconds,
                         wall=wall, updates_per_s=None, gbps=None, fraction=None, note=note))
        print(f"{method}: {sol.iterations} iterations, {sol.solve_seconds:.3f} s (iterations), "
              f"{sol.seconds:.3f} s (solve call, with building the hierarchy), "
              f"{wall:.3f} s wall (with creating the solver and returning Phi)", flush=True)
        return sol

    mg = timed("multigrid", "V(2,2) cycles; wall time includes building the hierarchy")
    timed("mg-cg", "BiCGSTAB, one V(2,2) cycle per preconditioning (two per iteration)")
    diff = np.nanmax(np.abs(mg.phi - rb.phi)) / np.nanmax(np.abs(mg.phi)) if rb.converged else math.nan
    if rb.converged:
        print(f"max |Phi_mg - Phi_rbsor| / max |Phi| = {diff:.2e}")
    print()
    print(format_table(rows, COLUMNS, missing="n/a"))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"header": info, "copy_gbps": bw / 1e9, "rows": rows, "mg_vs_rbsor": diff}, f,
                      indent=1)
    return rows


if __name__ == "__main__":
    main()
