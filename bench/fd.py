"""Benchmark of ``nl.NLSE``: explicit RK4 with the CD or 2SHOC Laplacian.

Times ``sim.step(k)`` for ``i dPsi/dt + a Lap Psi - V Psi + s|Psi|^2 Psi = 0``
in 1D, 2D and 3D, with both schemes, in single (complex64) and double
(complex128) precision, periodic boundaries and no potential, for each thread
count asked for, and compares with

* the machine's copy bandwidth, measured in the same run with ``np.copyto``
  on a 256 MiB float64 array (bytes read + bytes written; the copy runs on as
  many Python threads as the kernel row uses, each copying one slice -- NumPy
  releases the GIL while copying), and
* the straightforward NumPy implementation of the same scheme,
  :class:`nlsepy.reference.NLSEReference`, timed for the largest thread count
  only (NumPy's element-wise operations run on one thread).

Traffic model
-------------
The achieved bandwidth is ``sim.bytes_per_step() / (seconds per step)``, with
the bytes taken from the solver (``FD.bytes_per_point_step()`` times the
number of points); nothing here hard-codes them.  The model counts each array
element the kernels read or write once per pass over the grid, assuming the
stencil neighbours of a point come from cache, and it counts no
write-allocate traffic (neither does the copy bandwidth).  Per RK4 step each
grid point moves

* CD: 16 complex values.  Stage 1 reads ``Psi^n`` and writes the accumulator
  and the next stage's input (3); stages 2 and 3 read the input, ``Psi^n``
  and the accumulator and write the accumulator and the next input (5 each);
  stage 4 reads the input and the accumulator and writes the accumulator,
  which becomes ``Psi^{n+1}`` (3).
* 2SHOC on the periodic grids here: the same 16.  Its two steps compose
  into a 5-point form per axis, one sweep a stage as CD (on the CPU, closed
  grids run the two steps: 12 more, the intermediate array ``D`` written and
  read and the stage input read a second time, 3 per stage).
* with a potential, one real value more per stage (not exercised here).

That is 16 x 8 = 128 B (complex64) or 256 B (complex128) per point-step.

The fused step (``fused=True``: the four stages of a tile in one pass) reads
``Psi^n`` over each tile's box (the tile widened by ``H = 4 R`` points per
side, ``R`` = 1 for CD, 2 for 2SHOC with periodic boundaries) and writes
``Psi^{n+1}`` over the tile: ``(box/tile + 1)`` complex values per
point-step (``FD.fused_bytes_per_point_step()``), and it evaluates the
stages on regions larger than the tile by ``(3 - q) R`` per side: the
recompute factor ``w`` (point-stage evaluations over ``4 x points``).  On
CUDA, 3D 2SHOC (halo 8 over four stages) runs two passes of two stages
(``H = 2 R``): the first reads ``Psi^n`` over the box and writes the
accumulator and the third stage's input over the tile, the second reads that
input over the box, ``Psi^n`` over the box less ``R`` and the accumulator,
and writes ``Psi^{n+1}``: ``2 box/tile + mid/tile + 4`` values.  Its
flops per point-step are ``w`` times the staged ones (``flops_model``).  The
fused form's bound is the larger of its traffic over the copy bandwidth and,
given ``--peak-gflops``, its flops over that peak; ``fraction of bound`` is
that time over the measured one.  Both forms are timed in the same run, in
alternating repetitions, and their speed-up is taken there.  The fraction of copy bandwidth is
``(bytes_per_step / time) / copy_bandwidth``: close to 1 means the step runs
at memory speed under the model; the 2D/3D stencils' neighbour reuse is not
always served by cache, so the true traffic can exceed the model.

Usage
-----
::

    python bench/fd.py [--quick] [--threads 1,2] [--backend cpu] [--json PATH]
    python bench/fd.py --forms [--sizes 256^3,4096^2] [--backend cuda] [--peak-gflops G]

Default sizes: 1D ``2**20``, 2D ``1024 x 1024``, 3D ``128^3``; ``--quick``
uses about 4x fewer points (``2**18``, ``512 x 512``, ``80^3``).  ``--forms``
times the staged and the fused step side by side (default sizes: ``256^3``
on the CPU; ``4096^2``, ``256^3``, ``512^3`` on CUDA), both precisions and
schemes, periodic boundaries.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from functools import partial
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

import nlsepy as nl
from nlsepy.reference import NLSEReference

from _common import (COPY_COLUMNS, arg_parser, copy_bandwidth, cupy_or_none, event_seconds,
                     machine_info, print_header, print_load, print_noisy, print_table,
                     write_json)

#: grid per dimension, full and ``--quick``
SIZES: Dict[bool, Dict[int, Tuple[int, ...]]] = {
    False: {1: (2 ** 20,), 2: (1024, 1024), 3: (128, 128, 128)},
    True: {1: (2 ** 18,), 2: (512, 512), 3: (80, 80, 80)},
}
SCHEMES: Tuple[str, ...] = ("cd", "2shoc")
DTYPES: Tuple[type, ...] = (np.complex64, np.complex128)
SPACING = 0.1
A, S = 1.0, -1.0
#: max/min of the repetitions above which a row is listed as noisy
NOISY = 1.3


# --------------------------------------------------------------------- setup
def make_state(shape: Tuple[int, ...], dtype: type, seed: int = 0) -> np.ndarray:
    """A smooth, random-ish, nowhere-zero periodic state of modulus about 1.

    ``(1 + 0.01 * complex noise) * exp(i k.x)`` with a small wave vector that
    fits the periodic box, so the arithmetic sees ordinary numbers.

    Parameters
    ----------
    shape : tuple of int
        Grid shape.
    dtype : type
        ``numpy.complex64`` or ``numpy.complex128``.
    seed : int, optional
        Seed of the noise.

    Returns
    -------
    numpy.ndarray
        C-contiguous array of `dtype`.
    """
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    axes = np.meshgrid(*[np.arange(n) / n for n in shape], indexing="ij", sparse=True)
    phase = sum(2 * np.pi * (q + 1) * x for q, x in enumerate(axes))
    return np.ascontiguousarray((1.0 + 0.01 * noise) * np.exp(1j * phase), dtype=dtype)


# ------------------------------------------------------------------- timing
def time_steps(step: Callable[[int], Any], target: float, repeats: int
               ) -> Tuple[float, int, List[float]]:
    """Median seconds per step of ``step(k)``, with `k` chosen from a trial.

    One warm-up step, one timed trial step to pick ``k`` so that a repetition
    lasts about `target` seconds, then `repeats` timed calls of ``step(k)``.

    Parameters
    ----------
    step : callable
        ``step(k)`` advances `k` steps.
    target : float
        Wanted seconds per repetition.
    repeats : int
        Number of timed repetitions.

    Returns
    -------
    seconds : float
        Median seconds per step.
    k : int
        Steps per repetition.
    times : list of float
        Seconds per step of every repetition.
    """
    step(1)  # warm-up
    t0 = time.perf_counter()
    step(1)
    trial = time.perf_counter() - t0
    k = max(1, int(round(target / max(trial, 1e-9))))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step(k)
        times.append((time.perf_counter() - t0) / k)
    return statistics.median(times), k, times


def time_reference(psi0: np.ndarray, sim: "nl.NLSE", repeats: int) -> Tuple[float, float]:
    """Median seconds of ``NLSEReference.step(1)``, and its difference to nlsepy.

    Parameters
    ----------
    psi0 : numpy.ndarray
        Initial state (its dtype sets the reference's precision).
    sim : nlsepy.NLSE
        Solver of the same case (for ``dt``, spacing and coefficients).
    repeats : int
        Number of timed single steps.

    Returns
    -------
    seconds : float
        Median seconds per step.
    rel_diff : float
        ``max |psi_numpy - psi_nlsepy| / max |psi_numpy|`` after `repeats`
        steps from `psi0` (a check that both did the same work).
    """
    ref = NLSEReference(psi0, sim.spacing, sim.a, sim.s, None, sim.scheme, sim.bc, sim.dt)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        ref.step(1)
        times.append(time.perf_counter() - t0)
    check = nl.NLSE(psi0, sim.spacing, a=sim.a, s=sim.s, scheme=sim.scheme, bc=sim.bc,
                    dt=sim.dt, dtype=sim.dtype, backend=sim.backend).step(repeats)
    diff = float(np.max(np.abs(ref.psi - check.psi)) / np.max(np.abs(ref.psi)))
    return statistics.median(times), diff


def add_reference(row: Dict[str, Any], sec: float, timed: Optional[Tuple[float, float]],
                  name: str, digits: int) -> str:
    """Put the reference's time into the row's NumPy columns.

    Parameters
    ----------
    row : dict
        Result row; ``numpy_ms_per_step``, ``speedup_vs_numpy`` and
        ``numpy_rel_diff`` are set (None where the reference did not run).
    sec : float
        nlsepy's seconds per step.
    timed : (float, float) or None
        The reference's seconds per step and its relative difference to
        nlsepy, or None.
    name : str
        The reference's name in the progress line ("NumPy", "CuPy").
    digits : int
        Decimals of its ms/step there.

    Returns
    -------
    str
        The end of the row's progress line ("" without a reference).
    """
    if timed is None:
        row.update(numpy_ms_per_step=None, speedup_vs_numpy=None, numpy_rel_diff=None)
        return ""
    rsec, diff = timed
    row.update(numpy_ms_per_step=1e3 * rsec, speedup_vs_numpy=rsec / sec, numpy_rel_diff=diff)
    return f", {name} {1e3 * rsec:.{digits}f} ms/step ({rsec / sec:.1f}x, rel. diff {diff:.1e})"


# ------------------------------------------------------ staged against fused
def flops_model(scheme: str, ndim: int) -> float:
    """Floating-point operations of one staged RK4 step at an interior point
    of a periodic grid (the grids here).

    Per stage: the Laplacian, ``N = s|x|^2 - V`` (4), ``F = i(aL + N x)`` (7)
    and the updates of the accumulator and the next input (8; stage 4 only
    the accumulator, 4).  CD: ``10 d - 2`` for the Laplacian (each axis
    ``ih2 (a + b - 2c)`` per component, the axes summed).  2SHOC: the two
    steps composed into the 5-point form per axis (``18 d - 2``), on both
    backends (closed grids run the two steps on the CPU: D, ``10 d - 2``,
    plus the compact step, ``8 d + 4`` plus 24 per axis pair).

    Parameters
    ----------
    scheme : {"cd", "2shoc"}
    ndim : int

    Returns
    -------
    float
        Flops per point-step.
    """
    d = ndim
    lap = 10 * d - 2 if scheme == "cd" else 18 * d - 2
    return 4 * (lap + 4 + 7 + 8) - 4


def recompute_factor(shape: Tuple[int, ...], tile: Tuple[int, ...], reach: int,
                     periodic: bool = True, passes: int = 1) -> float:
    """Point-stage evaluations of the fused step over ``4 x points``: in each
    of `passes` passes of ``m = 4 / passes`` stages, stage q (0..m-1) runs on
    the tile widened by ``(m - 1 - q) reach`` per side."""
    m = 4 // passes
    work = 0.0
    for q in range(m):
        w = 1.0
        for n, t in zip(shape, tile):
            side = t + 2 * (m - 1 - q) * reach
            w *= (side if periodic or side < n else n) / t
        work += w * passes
    return work / 4


def time_forms(make: Callable[[bool], Any], target: float, repeats: int
               ) -> Dict[bool, Tuple[float, int, List[float], Any]]:
    """Median seconds per step of the staged (False) and fused (True) forms,
    timed in alternating repetitions of ``step(k)`` (k from a trial of each)."""
    sims = {f: make(f) for f in (False, True)}
    ks = {}
    for f, sim in sims.items():
        sim.step(1)
        t0 = time.perf_counter()
        sim.step(1)
        ks[f] = max(1, int(round(target / max(time.perf_counter() - t0, 1e-9))))
    times: Dict[bool, List[float]] = {False: [], True: []}
    for _ in range(repeats):
        for f, sim in sims.items():
            t0 = time.perf_counter()
            sim.step(ks[f])
            times[f].append((time.perf_counter() - t0) / ks[f])
    return {f: (statistics.median(times[f]), ks[f], times[f], sims[f]) for f in sims}


FORM_COLUMNS: Tuple[Tuple[str, str, str], ...] = (
    ("dim", "dim", "{}"), ("grid", "grid", "{}"), ("dtype", "dtype", "{}"),
    ("scheme", "scheme", "{}"), ("threads", "threads", "{}"),
    ("staged_ms", "staged ms/step", "{:.3f}"), ("fused_ms", "fused ms/step", "{:.3f}"),
    ("fused_kernel", "fused ran", "{}"), ("speedup", "fused/staged", "{:.2f}x"),
    ("staged_bytes", "staged B/pt-step", "{:.0f}"), ("fused_bytes", "fused B/pt-step", "{:.1f}"),
    ("recompute", "recompute", "{:.2f}"), ("fused_gflops", "fused GFLOP/s", "{:.1f}"),
    ("staged_fraction_copy", "staged frac. copy", "{:.2f}"),
    ("fused_bound", "fused bound", "{}"), ("fused_fraction_bound", "fused frac. of bound", "{:.2f}"),
)


def parse_sizes(text: str) -> List[Tuple[int, ...]]:
    """``"256^3,4096^2,1000x300"`` -> grid shapes."""
    out = []
    for item in text.split(","):
        item = item.strip()
        if "^" in item:
            n, d = item.split("^")
            out.append((int(n),) * int(d))
        else:
            out.append(tuple(int(v) for v in item.split("x")))
    return out


def main_forms(args: argparse.Namespace) -> List[Dict[str, Any]]:
    """Staged against fused, side by side in one run (``--forms``).

    Parameters
    ----------
    args : argparse.Namespace
        Parsed options.

    Returns
    -------
    list of dict
        A row per grid, precision, scheme (and thread count on the CPU).
    """
    t_start = time.perf_counter()
    cuda = args.backend == "cuda"
    info = machine_info(args.backend)
    print_header("nlsepy FD benchmark: staged against fused RK4 steps", info)
    if cuda:
        from nlsepy import _cuda
        info["device"] = _cuda.device_name()
        copy_of = {"gpu": _cuda.copy_bandwidth(1 << 30, 20) * 1e9}
        threads: List[Any] = ["gpu"]
    else:
        threads = args.thread_list
        copy_of = {t: copy_bandwidth(t) for t in threads}
    for t, bw in copy_of.items():
        print(f"copy bandwidth ({t}): {bw / 1e9:.2f} GB/s (read + write)", flush=True)
    sizes = (parse_sizes(args.sizes) if args.sizes else
             [(4096, 4096), (256,) * 3, (512,) * 3] if cuda else [(256,) * 3])
    from nlsepy import _core
    rows: List[Dict[str, Any]] = []
    for shape in sizes:
        grid = "x".join(map(str, shape))
        npts = int(np.prod(shape))
        for dtype in DTYPES:
            psi0 = make_state(shape, dtype)
            for scheme in SCHEMES:
                for t in threads:
                    if t != "gpu":
                        nl.set_num_threads(t)

                    def make(fused: bool) -> Any:
                        return nl.NLSE(psi0, SPACING, a=A, s=S, scheme=scheme, bc="periodic",
                                       dtype=dtype, backend=args.backend, fused=fused)

                    res = time_forms(make, 0.3 if cuda else 1.0, args.repeats)
                    (ts, _, rs, staged), (tf, _, rf, fused) = res[False], res[True]
                    tile = fused._solver.fused_tile()
                    reach = _core.fd_reach(0 if scheme == "cd" else 1, 3)
                    # CUDA runs 3D 2SHOC as two passes of two stages
                    passes = 2 if cuda and scheme == "2shoc" and len(shape) == 3 else 1
                    w = recompute_factor(shape, tile, reach, passes=passes) if tile else 1.0
                    sb = staged._solver.bytes_per_point_step()
                    fb = (fused._solver.fused_bytes_per_point_step()
                          if fused.last_kernel == "fused" else sb)
                    flops = flops_model(scheme, len(shape))
                    fflops = flops * (w if fused.last_kernel == "fused" else 1.0)
                    t_mem = fb * npts / copy_of[t]
                    t_cmp = fflops * npts / (args.peak_gflops * 1e9) if args.peak_gflops else 0.0
                    row = {
                        "dim": len(shape), "grid": grid, "points": npts,
                        "dtype": np.dtype(dtype).name, "scheme": scheme, "threads": t,
                        "staged_ms": 1e3 * ts, "fused_ms": 1e3 * tf,
                        "staged_ms_reps": [1e3 * x for x in rs],
                        "fused_ms_reps": [1e3 * x for x in rf],
                        "fused_kernel": fused.last_kernel, "tile": list(tile),
                        "speedup": ts / tf, "staged_bytes": sb, "fused_bytes": fb,
                        "recompute": w, "flops_staged": flops, "flops_fused": fflops,
                        "fused_gflops": fflops * npts / tf / 1e9,
                        "copy_gbps": copy_of[t] / 1e9,
                        "staged_fraction_copy": sb * npts / ts / copy_of[t],
                        "fused_bound": "compute" if t_cmp > t_mem else "memory",
                        "fused_fraction_bound": max(t_mem, t_cmp) / tf,
                    }
                    rows.append(row)
                    print(f"{grid} {row['dtype']} {scheme:5s} {t}: staged {1e3 * ts:.3f} ms, "
                          f"fused {1e3 * tf:.3f} ms ({fused.last_kernel}), "
                          f"{ts / tf:.2f}x; fused {fb:.1f} B/pt-step, recompute {w:.2f}, "
                          f"{row['fused_fraction_bound']:.2f} of its {row['fused_bound']} bound",
                          flush=True)
                    del res, staged, fused
    print_table(rows, FORM_COLUMNS, "ms/step: median over alternating repetitions of "
                "step(k)/k of the two forms; B/pt-step: the traffic models "
                "(FD.bytes_per_point_step, FD.fused_bytes_per_point_step); recompute: fused "
                "point-stage evaluations over 4 x points; bound: fused traffic / copy bandwidth "
                "or, with --peak-gflops, fused flops / peak, whichever is longer.")
    print(f"total time {time.perf_counter() - t_start:.0f} s")
    write_json(args.json, {"header": info, "rows": rows})
    return rows


# -------------------------------------------------------------------- report
COLUMNS: Tuple[Tuple[str, str, str], ...] = (
    # (key, heading, format)
    ("dim", "dim", "{}"),
    ("grid", "grid", "{}"),
    ("dtype", "dtype", "{}"),
    ("scheme", "scheme", "{}"),
    ("threads", "threads", "{}"),
    ("ms_per_step", "ms/step", "{:.3f}"),
    ("mpoint_steps_per_s", "Mpoint-steps/s", "{:.1f}"),
    ("bytes_per_point_step", "bytes/point-step (model)", "{:.0f}"),
    *COPY_COLUMNS,
    ("numpy_ms_per_step", "NumPy ms/step", "{:.1f}"),
    ("speedup_vs_numpy", "speed-up vs NumPy", "{:.1f}x"),
)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """The command line: sizes, thread counts, backend, repetitions.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments (default ``sys.argv[1:]``), e.g. ``["--quick", "--threads", "1,4"]``.

    Returns
    -------
    argparse.Namespace
        The options, ``thread_list`` (the thread counts, sorted) added.
    """
    p = arg_parser(__doc__)
    p.add_argument("--quick", action="store_true", help="about 4x fewer points")
    p.add_argument("--threads", default=f"1,{os.cpu_count() or 1}",
                   help="comma-separated thread counts (default: 1,os.cpu_count())")
    p.add_argument("--backend", default="cpu", choices=("auto", "cpu", "cuda"))
    p.add_argument("--repeats", type=int, default=5, help="timed repetitions (>= 5)")
    p.add_argument("--json", metavar="PATH", help="also write header and rows as JSON")
    p.add_argument("--forms", action="store_true",
                   help="time the staged and the fused step side by side")
    p.add_argument("--sizes", help="grids for --forms, e.g. 256^3,4096^2")
    p.add_argument("--peak-gflops", type=float, default=None,
                   help="the device's peak GFLOP/s in the row's precision (--forms' "
                        "compute bound)")
    args = p.parse_args(argv)
    try:
        threads = sorted({int(t) for t in args.threads.split(",") if t.strip()})
    except ValueError:
        p.error(f"--threads must be comma-separated integers, got {args.threads!r}")
    if not threads or threads[0] < 1:
        p.error(f"--threads needs integers >= 1, got {args.threads!r}")
    if args.repeats < 5:
        p.error("--repeats must be >= 5")
    args.thread_list = threads
    return args


def main(argv: Optional[Sequence[str]] = None) -> List[Dict[str, Any]]:
    """Run the benchmark (:func:`main_cuda` with ``--backend cuda``), print
    the header and the table.

    Parameters
    ----------
    argv : sequence of str, optional
        Command-line arguments (default ``sys.argv[1:]``), e.g. ``["--quick"]``.

    Returns
    -------
    list of dict
        A row per dimension, precision, scheme and thread count.
    """
    args = parse_args(argv)
    if args.forms:
        return main_forms(args)
    if args.backend == "cuda":
        return main_cuda(args)
    t_start = time.perf_counter()
    info = machine_info(args.backend)
    info["threads"] = args.thread_list
    print_header("nlsepy FD (RK4 + CD/2SHOC) benchmark", info)
    target = 0.2 if args.quick else 0.3
    threads_max = max(args.thread_list)

    copy_bw: Dict[int, float] = {}
    for t in args.thread_list:
        copy_bw[t] = copy_bandwidth(t)
        print(f"copy bandwidth, np.copyto 256 MiB float64 on {t} thread(s): "
              f"{copy_bw[t] / 1e9:.2f} GB/s (read + write)", flush=True)

    rows: List[Dict[str, Any]] = []
    for ndim, shape in SIZES[args.quick].items():
        npts = int(np.prod(shape))
        grid = "x".join(map(str, shape))
        for dtype in DTYPES:
            psi0 = make_state(shape, dtype)
            for scheme in SCHEMES:
                for t in args.thread_list:
                    nl.set_num_threads(t)
                    sim = nl.NLSE(psi0, SPACING, a=A, s=S, V=None, scheme=scheme,
                                  bc="periodic", dtype=dtype, backend=args.backend)
                    sec, k, times = time_steps(sim.step, target, args.repeats)
                    bps = sim.bytes_per_step()
                    row: Dict[str, Any] = {
                        "dim": ndim, "grid": grid, "points": npts,
                        "dtype": np.dtype(dtype).name, "scheme": scheme, "threads": t,
                        "threads_reported": nl.get_num_threads(),
                        "steps_per_rep": k, "repeats": args.repeats,
                        "ms_per_step_reps": [1e3 * x for x in times],
                        "rep_spread": max(times) / min(times),
                        "ms_per_step": 1e3 * sec,
                        "mpoint_steps_per_s": npts / sec / 1e6,
                        "bytes_per_point_step": sim._solver.bytes_per_point_step(),
                        "bytes_per_step": bps,
                        "gbps": bps / sec / 1e9,
                        "copy_gbps": copy_bw[t] / 1e9,
                        "copy_threads": t,
                        "fraction_of_copy": bps / sec / copy_bw[t],
                    }
                    # NumPy runs on one thread: timed once, beside the largest count
                    timed = time_reference(psi0, sim, 3) if t == threads_max else None
                    extra = add_reference(row, sec, timed, "NumPy", 1)
                    rows.append(row)
                    print(f"{ndim}D {grid} {row['dtype']} {scheme:5s} {t} thr: "
                          f"{row['ms_per_step']:.3f} ms/step (k={k}), {row['gbps']:.2f} GB/s"
                          f"{extra}", flush=True)

    print_table(rows, COLUMNS, "ms/step: median over repetitions of sim.step(k)/k after one "
                "warm-up step; GB/s: sim.bytes_per_step()/time (traffic model, no "
                "write-allocate); copy GB/s: np.copyto of 256 MiB float64, read + write bytes, on "
                "as many Python threads as the row's threads; NumPy: "
                "nlsepy.reference.NLSEReference.step(1), median of 3, max thread count rows only "
                "(NumPy itself is single-threaded).")
    print_noisy(rows, NOISY, lambda r: (f"{r['dim']}D {r['grid']} {r['dtype']} {r['scheme']} "
                                        f"{r['threads']} thr"), "ms_per_step_reps", "ms/step")
    print_load(info)
    print(f"total time {time.perf_counter() - t_start:.0f} s")
    write_json(args.json, {"header": info, "rows": rows})
    return rows


# ---------------------------------------------------------------------- CUDA
CUDA_SIZES = {1: (1 << 24,), 2: (4096, 4096), 3: (256, 256, 256)}
CUDA_SMALL = (64, 64, 64)
CHUNK_STEPS = 2000


def time_cupy_reference(cp: Any, psi0: np.ndarray, sim: "nl.NLSE", steps: int = 3
                        ) -> Tuple[float, float]:
    """Median seconds per step of the CuPy statement of the scheme (CUDA events),
    and its relative difference to nlsepy after `steps` steps."""
    ref = NLSEReference(cp.asarray(psi0), sim.spacing, sim.a, sim.s, None, sim.scheme,
                        sim.bc, sim.dt, xp=cp)
    ref.step(1)  # warm-up (kernel compilation)
    ref = NLSEReference(cp.asarray(psi0), sim.spacing, sim.a, sim.s, None, sim.scheme,
                        sim.bc, sim.dt, xp=cp)
    times = []
    for _ in range(steps):
        times.append(event_seconds(cp, partial(ref.step, 1)))
    check = nl.NLSE(psi0, sim.spacing, a=sim.a, s=sim.s, scheme=sim.scheme, bc=sim.bc,
                    dt=sim.dt, dtype=sim.dtype, backend="cuda").step(steps)
    got = cp.asnumpy(ref.psi)
    diff = float(np.max(np.abs(got - check.psi)) / np.max(np.abs(got)))
    del ref
    cp.get_default_memory_pool().free_all_blocks()
    return statistics.median(times), diff


def main_cuda(args: argparse.Namespace) -> List[Dict[str, Any]]:
    """GPU benchmark: bandwidth fractions, CuPy ratio, chunking overhead, and
    the NLSEmagic Table 3 problem.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed options (``--quick`` shrinks the 3D case to 128^3).

    Returns
    -------
    list of dict
        The result rows.
    """
    from nlsepy import _cuda
    t_start = time.perf_counter()
    info = machine_info(args.backend)
    info["device"] = _cuda.device_name()
    print_header("nlsepy FD (RK4 + CD/2SHOC) benchmark, CUDA backend", info)
    copy = _cuda.copy_bandwidth(1 << 30, 20) * 1e9
    print(f"device copy bandwidth (cudaMemcpy D2D 1 GiB, read + write, median of 20): "
          f"{copy / 1e9:.0f} GB/s", flush=True)
    cp = cupy_or_none()
    sizes = dict(CUDA_SIZES)
    if args.quick:
        sizes = {1: (1 << 22,), 2: (2048, 2048), 3: (128, 128, 128)}
    cases = [(nd, shp) for nd, shp in sizes.items()] + [(3, CUDA_SMALL)]
    rows: List[Dict[str, Any]] = []
    for ndim, shape in cases:
        npts = int(np.prod(shape))
        grid = "x".join(map(str, shape))
        for dtype in DTYPES:
            psi0 = make_state(shape, dtype)
            for scheme in SCHEMES:
                sim = nl.NLSE(psi0, SPACING, a=A, s=S, scheme=scheme, bc="periodic",
                              dtype=dtype, backend="cuda")
                sec, k, times = time_steps(sim.step, 0.3, args.repeats)
                bps = sim.bytes_per_step()
                c = np.dtype(dtype).itemsize  # bytes per complex value
                row: Dict[str, Any] = {
                    "dim": ndim, "grid": grid, "points": npts,
                    "dtype": np.dtype(dtype).name, "scheme": scheme, "threads": "gpu",
                    "steps_per_rep": k, "ms_per_step": 1e3 * sec,
                    "ms_per_step_reps": [1e3 * x for x in times],
                    "rep_spread": max(times) / min(times),
                    "mpoint_steps_per_s": npts / sec / 1e6,
                    "bytes_per_point_step": sim._solver.bytes_per_point_step(),
                    "bytes_per_step": bps, "gbps": bps / sec / 1e9,
                    "copy_gbps": copy / 1e9, "fraction_of_copy": bps / sec / copy,
                    # minimal traffic: 16 complex values per point-step for both
                    # schemes (2SHOC's D never needs to leave the chip)
                    "min_bytes_per_point_step": 16 * c,
                    "fraction_minimal": 16 * c * npts / sec / copy,
                }
                # the CuPy statement on the main 3D grid only
                timed = (time_cupy_reference(cp, psi0, sim)
                         if cp is not None and ndim == 3 and shape != CUDA_SMALL else None)
                extra = add_reference(row, sec, timed, "CuPy", 2)
                rows.append(row)
                print(f"{ndim}D {grid} {row['dtype']} {scheme:5s}: {row['ms_per_step']:.3f} "
                      f"ms/step (k={k}), {row['gbps']:.0f} GB/s = "
                      f"{row['fraction_of_copy']:.2f} of copy; minimal-traffic fraction "
                      f"{row['fraction_minimal']:.2f}{extra}", flush=True)
                del sim

    print("\nchunking overhead (3D, CD, 2000 steps, run() with 1 vs 100 frames, median of 3):")
    chunk_rows = []
    for dtype in DTYPES:
        shape = sizes[3]
        psi0 = make_state(shape, dtype)
        out = {}
        for frames in (1, 100):
            sim = nl.NLSE(psi0, SPACING, a=A, s=S, scheme="cd", bc="periodic", dtype=dtype,
                          backend="cuda")
            sim.step(1)
            reps = []
            for _ in range(3):  # the first run also pays for the host memory's first touch
                t0 = time.perf_counter()
                res = sim.run(sim.t + CHUNK_STEPS * sim.dt, frames=frames)
                reps.append(time.perf_counter() - t0)
                del res
            out[frames] = statistics.median(reps)
            print(f"    {frames:3d} frames: " + ", ".join(f"{r:.3f}" for r in reps) + " s")
            del sim
        ratio = out[100] / out[1]
        chunk_rows.append({"dtype": np.dtype(dtype).name, "t1": out[1], "t100": out[100],
                           "ratio": ratio})
        print(f"  {np.dtype(dtype).name}: 1 frame {out[1]:.3f} s, 100 frames {out[100]:.3f} s, "
              f"ratio {ratio:.3f}", flush=True)

    print("\nNLSEmagic Table 3 problem: 3D RK4+CD single precision, N = 149^3, vortex ring "
          "(d = 5, h = 3/2), MSD, t = 50, k = 0.005 (the source: 82 s on a GTX 580):")
    ring, h, p = nl.examples.vortex_ring(length=148 * 1.5, h=1.5, d=5.0, dtype=np.complex64)
    sim = nl.NLSE(ring, h, a=p["a"], s=p["s"], scheme="cd", bc="msd", dt=0.005,
                  dtype=np.complex64, backend="cuda")
    t0 = time.perf_counter()
    sim.run(50.0, frames=5)
    table3 = time.perf_counter() - t0
    print(f"  grid {ring.shape}, {int(round(50 / 0.005))} steps, 5 frames: {table3:.2f} s "
          f"({82.0 / table3:.0f}x faster than the source's GTX 580 time)", flush=True)

    print_table(rows, COLUMNS, "ms/step: median of sim.step(k)/k (each call ends with a device "
                "synchronisation); GB/s: sim.bytes_per_step()/time under the kernels' traffic "
                "model (16 complex values per point-step for CD and 2SHOC alike: no D array on "
                "the GPU); copy: cudaMemcpy device-to-device, read + write; NumPy columns: the "
                "CuPy statement of the same scheme (nlsepy.reference.NLSEReference with "
                "xp=cupy), CUDA events, median of 3 steps.")
    print(f"total time {time.perf_counter() - t_start:.0f} s")
    write_json(args.json, {"header": info, "copy_gbps": copy / 1e9, "rows": rows,
                           "chunking": chunk_rows, "table3_seconds": table3})
    return rows


if __name__ == "__main__":
    main()
