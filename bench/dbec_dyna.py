"""Benchmark of the DYNAOUT rows of a real-time DBEC-GP run (``nl.dbec``).

The budget: writing a DYNAOUT row every iteration (``OUTSTPT = 1``) must not
slow a real-time run of the 3D program on its 128 x 96 x 80 grid by more
than 2 % against the same run without DYNAOUT.  This script times the
stepping of a run's stage, ``nlsepy.dipolar.dbec._stage`` (what
``nl.dbec.run`` calls for NPAS and NRUN), on the solver of
``examples/dbec/real3d-input`` (the DBEC-GP test problem in OPTION 2: trap
(0.5, 1, 1.5), a = 100 a0, add = 132.7 a0, N = 5000, l = 1 um, cutoff 10,
dt = 0.005, spacing 0.2), complex128, on the CPU (default) or the GPU
(``--backend cuda``),

* ``none``: no DYNAOUT (the run's steps only);
* ``rows``: a row every ``--every`` iterations, the moments (Simpson norm and
  <x_a^2>) recorded by the stepping call itself at the end of the steps;
* ``rows-percall``: the same rows from one stepping call per row followed by
  the rms sizes from the integrated 1D densities (three further passes over
  the grid): the path of the distributed solver, and of every run before
  the stepping call recorded the moments;

each from the same initial state (the trap's Gaussian with a phase
gradient, a complex state), the repetitions interleaved (A B C, A B C, ...)
so a drift of the shared machine's load touches every mode alike.

Reported: the median of the repetitions (seconds per stage), all of them,
the overhead ``median(mode) / median(none) - 1`` in percent and the paired
overhead (the median over repetitions of ``mode / none of the same
repetition - 1``).

Usage
-----
::

    OMP_NUM_THREADS=1 python bench/dbec_dyna.py [--steps 60] [--every 1]
        [--repeats 7] [--modes none,rows,rows-percall] [--shape 128,96,80]
        [--backend cpu|cuda] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from typing import Any, Dict, List, Optional

import numpy as np

import _common
import nlsepy as nl
from nlsepy.dipolar import dbec

MODES = ("none", "rows", "rows-percall")
LABEL = {"none": "no DYNAOUT", "rows": "DYNAOUT (moments from the stepping call)",
         "rows-percall": "DYNAOUT (a call per row, then 1D densities)"}


def make_solver(shape: tuple, backend: str = "cpu") -> nl.DipolarGPE:
    """The solver of examples/dbec/real3d-input (OPTION 2) on `shape`."""
    n_atoms, aho = 5000, 1e-6
    g = 2 * 4 * math.pi * 100.0 * n_atoms * dbec.BOHR_RADIUS / aho
    gdd = 2 * 3 * 132.7 * n_atoms * dbec.BOHR_RADIUS / aho
    gpe = nl.DipolarGPE(shape, 0.2, 0.005, g=g, gdd=gdd, trap=(0.5, 1.0, 1.5), cutoff=10.0,
                        backend=backend)
    x = gpe.coords[0][:, None, None]
    gpe.psi = gpe.psi * np.exp(0.3j * x)  # a complex state, as in real time
    return gpe


def one_run(gpe: nl.DipolarGPE, psi0: np.ndarray, steps: int, every: int,
            mode: str) -> Dict[str, Any]:
    """Time one stage of `steps` real-time steps from `psi0` in `mode`."""
    gpe.psi = psi0
    lines: Optional[List[str]] = None if mode == "none" else []
    t0 = time.perf_counter()
    dbec._stage(gpe, "real", steps, 0, every, gpe.dt, gpe.option, lines,
                per_call=mode == "rows-percall")
    sec = time.perf_counter() - t0
    return {"seconds": sec, "rows": 0 if lines is None else len(lines),
            "last": None if not lines else lines[-1].strip(), "loadavg_after": _common.loadavg()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=60, help="real-time steps per stage")
    ap.add_argument("--every", type=int, default=1, help="OUTSTPT: a row every that many steps")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--shape", default="128,96,80")
    ap.add_argument("--modes", default=",".join(MODES),
                    help="comma-separated: " + ", ".join(MODES))
    ap.add_argument("--backend", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    modes = _common.mode_list(ap, args.modes, MODES)
    shape = tuple(int(v) for v in args.shape.split(","))
    info = _common.machine_info(args.backend, threads=nl.get_num_threads())
    print(json.dumps(info, indent=1, default=str))
    gpe = make_solver(shape, args.backend)
    psi0 = gpe.psi
    for m in modes:  # warm-up: caches, the backup buffer, the state made complex
        one_run(gpe, psi0, 2, 1, m)
    results: Dict[str, List[Dict[str, Any]]] = {m: [] for m in modes}
    for rep in range(args.repeats):
        for m in modes:
            r = one_run(gpe, psi0, args.steps, args.every, m)
            results[m].append(r)
            print(f"rep {rep} {m:13s} {r['seconds']:8.3f} s  rows {r['rows']:4d}  "
                  f"load {r['loadavg_after']}", flush=True)
    lasts = {m: results[m][-1]["last"] for m in modes if m != "none"}
    for m, last in lasts.items():
        print(f"last row, {m}: {last}")
    base = statistics.median(r["seconds"] for r in results["none"])
    rows = []
    for m in modes:
        cost = _common.overheads(results[m], results["none"])
        rows.append({
            "mode": LABEL[m], "median": cost["median"],
            "all": " ".join(f"{r['seconds']:.3f}" for r in results[m]),
            "per_step": 1e3 * cost["median"] / args.steps,
            "overhead": cost["overhead"], "paired": cost["paired"]})
    print(f"\nDBEC-GP real3d, {'x'.join(map(str, shape))} complex128, {args.steps} real-time "
          f"steps, OUTSTPT = {args.every}, {args.backend}, {nl.get_num_threads()} thread(s), median of "
          f"{args.repeats}; baseline {base:.3f} s = {1e3 * base / args.steps:.2f} ms/step\n")
    print(_common.format_table(rows, [
        ("mode", "mode", "{}"), ("median", "s/stage (median)", "{:.3f}"),
        ("per_step", "ms/step", "{:.2f}"), ("all", "runs (s)", "{}"),
        ("overhead", "overhead %", "{:+.1f}"), ("paired", "paired %", "{:+.1f}")]))
    _common.write_json(args.json, {"info": info, "args": vars(args), "results": results},
                       default=str)


if __name__ == "__main__":
    main()
