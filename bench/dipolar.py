"""Benchmark of ``nl.DipolarGPE``: split-step Crank-Nicolson for the dipolar GPE.

Times one iteration (time step) of the 3D dipolar Gross-Pitaevskii solver,
``gpe.imaginary_time(n)`` (real state) and ``gpe.real_time(n)`` (complex
state), on the DBEC-GP test problem in its OPTION 2 rescaling (``-Lap``,
trap ``gamma^2 x^2 + nu^2 y^2 + lambda^2 z^2``):

* trap frequencies ``(gamma, nu, lambda) = (0.5, 1, 1.5)``;
* ``g = 2 * 4 pi * a * N / l`` with ``a = 100 a0``, ``N = 5000``, ``l = 1 um``;
* ``gdd = 2 * 3 * add * N / l`` with ``add = 132.7 a0``;
* dipolar cutoff ``R = 10``, ``dt = 0.005``;
* grids ``128 x 96 x 80`` (spacing 0.2), ``256^3`` (spacing 0.1) and
  ``512^3`` (spacing 0.05, ``--sizes huge``).

The solver's time per iteration is ``gpe.last_step_seconds`` of each timed
call: CUDA events around the steps with ``--backend cuda``, the wall clock
inside the C call on the CPU.  ``gpe.memory_bytes`` (device memory with
``--backend cuda``) is printed per grid point.

Each case is compared with

* the machine's copy bandwidth, measured in the same run: ``np.copyto`` of a
  256 MiB float64 array (bytes read + bytes written, no write-allocate),
  median of 5, on as many Python threads as ``--threads`` (each copies one
  slice; NumPy releases the GIL while copying); with ``--backend cuda`` the
  device-to-device copy instead; and
* the straightforward array-language statement of the same scheme,
  :class:`nlsepy.reference.dipolar.SplitStepReference` (NumPy with ``scipy.fft``
  on ``--threads`` workers, or CuPy with ``--backend cuda``), run in the same
  process for fewer steps.

Traffic model
-------------
The achieved bandwidth is ``gpe.bytes_per_step(mode) / (seconds per
iteration)``, with the bytes taken from the solver's own model (bytes each
pass of the step moves through main memory per grid point, times the number
of points); nothing here hard-codes them.  The fraction of copy bandwidth is
that figure over the copy bandwidth: close to 1 means the step runs at
memory speed under the model.  The FFTs of the dipolar term are counted as
passes over the data in the model, not as what FFTW actually moves.

Usage
-----
::

    python bench/dipolar.py [--sizes small,large] [--dtype complex128]
                              [--backend cpu] [--threads N] [--steps 10]
                              [--ref-steps 3] [--json PATH]
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import statistics
import time
from functools import partial
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

import nlsepy as nl
from nlsepy.reference.dipolar import SplitStepReference

from _common import (COPY_BYTES, COPY_COLUMNS, arg_parser, copy_bandwidth, cupy_or_none,
                     event_seconds, machine_info, print_header, print_load,
                     print_noisy, report)

# ----------------------------------------------------------------- problem
A0 = 5.29177210903e-11       #: Bohr radius (m)
LENGTH = 1e-6                #: length unit l (m)
NATOMS = 5000
G = 2 * 4 * math.pi * 100 * NATOMS * A0 / LENGTH
GDD = 2 * 3 * 132.7 * NATOMS * A0 / LENGTH
FREQ = (0.5, 1.0, 1.5)       #: trap frequencies (gamma, nu, lambda)
KIN = 1.0                    #: OPTION 2: -Lap
TRAP = tuple(f * f for f in FREQ)  #: OPTION 2 trap coefficients of x^2, y^2, z^2
CUTOFF = 10.0
DT = 0.005

#: named grids: (shape, spacing)
SIZES: Dict[str, Tuple[Tuple[int, int, int], float]] = {
    "small": ((128, 96, 80), 0.2),
    "large": ((256, 256, 256), 0.1),
    "huge": ((512, 512, 512), 0.05),
}
MODES: Tuple[str, ...] = ("imaginary", "real")
REPEATS = 3
#: peak memory of the reference, in state-sized (complex) arrays
REF_ARRAYS = 8
#: max/min of the repetitions above which a row is listed as noisy
NOISY = 1.3


# --------------------------------------------------------------------- setup
def _mem_available() -> Optional[int]:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes (None where unavailable)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


# ------------------------------------------------------------------- timing
def device_copy_bandwidth(cp: Any, nbytes: int = COPY_BYTES, repeats: int = 5
                          ) -> Tuple[float, str]:
    """Device-to-device copy bandwidth in bytes/s (read + write), and how it was taken.

    ``nlsepy._cuda.copy_bandwidth`` when the extension has it, else
    ``cupy.copyto`` timed with CUDA events.

    Parameters
    ----------
    cp : module or None
        ``cupy``, or None.
    nbytes : int, optional
        Bytes per copy.
    repeats : int, optional
        Number of timed copies.

    Returns
    -------
    bandwidth : float
        Bytes per second (NaN when neither way is available).
    how : str
        Description of the measurement.
    """
    try:
        from nlsepy import _cuda
        return (_cuda.copy_bandwidth(nbytes, repeats) * 1e9,
                f"cudaMemcpy D2D {nbytes >> 20} MiB, median of {repeats}")
    except Exception:
        pass
    if cp is None:
        return float("nan"), "unavailable"
    src = cp.full(nbytes // 8, 1.5)
    dst = cp.empty_like(src)
    cp.copyto(dst, src)
    times = []
    for _ in range(repeats):
        times.append(event_seconds(cp, partial(cp.copyto, dst, src)))
    del src, dst
    cp.get_default_memory_pool().free_all_blocks()
    return 2 * nbytes / statistics.median(times), \
        f"cupy.copyto {nbytes >> 20} MiB, median of {repeats}"


def time_solver(advance: Callable[[int], Any], steps: int, warmup: int = 2,
                repeats: int = REPEATS, clock: Optional[Callable[[], float]] = None
                ) -> Tuple[float, List[float]]:
    """Median seconds per iteration of ``advance(steps)``.

    Parameters
    ----------
    advance : callable
        ``advance(k)`` takes `k` steps (and returns when they are done).
    clock : callable, optional
        Seconds the last ``advance`` took as the solver measured them
        (``gpe.last_step_seconds``); None: the host clock around the call.
    steps : int
        Steps per timed repetition.
    warmup : int, optional
        Untimed steps first.
    repeats : int, optional
        Number of timed repetitions.

    Returns
    -------
    seconds : float
        Median seconds per iteration.
    times : list of float
        Seconds per iteration of every repetition.
    """
    advance(warmup)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        advance(steps)
        wall = time.perf_counter() - t0
        times.append((clock() if clock is not None else wall) / steps)
    return statistics.median(times), times


def time_reference(shape: Tuple[int, int, int], h: float, mode: str, dtype: Any,
                   steps: int, xp: Any, workers: int) -> float:
    """Median seconds per step of :class:`SplitStepReference` (after one warm-up step).

    Parameters
    ----------
    shape : tuple of int
        Grid.
    h : float
        Spacing (all axes).
    mode : {"imaginary", "real"}
        Propagation.
    dtype : numpy dtype
        Precision.
    steps : int
        Timed single steps.
    xp : module
        ``numpy`` or ``cupy`` (timed with CUDA events).
    workers : int
        ``scipy.fft`` workers (NumPy only).

    Returns
    -------
    float
        Median seconds per step.
    """
    ref = SplitStepReference(shape, (h, h, h), DT, kin=KIN, trap=TRAP, g=G, gdd=GDD,
                             cutoff=CUTOFF, imaginary=(mode == "imaginary"), dtype=dtype,
                             xp=xp, workers=workers)
    try:
        ref.step(1)  # warm-up (plans, kernel compilation, first touch)
        times = []
        for _ in range(steps):
            if xp is np:
                t0 = time.perf_counter()
                ref.step(1)
                times.append(time.perf_counter() - t0)
            else:
                times.append(event_seconds(xp, partial(ref.step, 1)))
        return statistics.median(times)
    finally:
        del ref
        gc.collect()
        if xp is not np:
            xp.get_default_memory_pool().free_all_blocks()


def reference_fits(shape: Tuple[int, int, int], dtype: Any, xp: Any, limit: float
                   ) -> Tuple[bool, str]:
    """Whether the reference's estimated peak memory fits.

    Parameters
    ----------
    shape : tuple of int
        Grid.
    dtype : numpy dtype
        Precision (complex).
    xp : module
        ``numpy`` or ``cupy``.
    limit : float
        Bytes allowed (``--ref-mem-gb``).

    Returns
    -------
    fits : bool
        True when the estimate is below the limit and the free memory.
    why : str
        Reason when it does not fit.
    """
    need = REF_ARRAYS * int(np.prod(shape)) * np.dtype(dtype).itemsize
    if xp is np:
        free = _mem_available()
    else:
        free = xp.cuda.Device().mem_info[0]
    if need > limit:
        return False, f"estimate {need / 1e9:.1f} GB > --ref-mem-gb"
    if free is not None and need > 0.8 * free:
        return False, f"estimate {need / 1e9:.1f} GB > 80% of free {free / 1e9:.1f} GB"
    return True, ""


# -------------------------------------------------------------------- report
COLUMNS: Tuple[Tuple[str, str, str], ...] = (
    # (key, heading, format)
    ("grid", "grid", "{}"),
    ("mode", "mode", "{}"),
    ("dtype", "dtype", "{}"),
    ("threads", "threads", "{}"),
    ("ms_per_iter", "ms/iter", "{:.2f}"),
    ("ns_per_point", "ns/point", "{:.2f}"),
    ("mbytes_per_step", "MB/step (model)", "{:.1f}"),
    ("mem_bytes_per_point", "memory B/point", "{:.1f}"),
    *COPY_COLUMNS,
    ("ref_ms_per_iter", "reference ms/iter", "{:.1f}"),
    ("ref_over_c", "reference / C", "{:.2f}x"),
)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """The command line: grids, precision, backend, steps, the reference.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments (default ``sys.argv[1:]``), e.g. ``["--sizes", "small"]``.

    Returns
    -------
    argparse.Namespace
        The options, ``grids`` (a (shape, spacing) pair per grid named in
        ``--sizes``) added.
    """
    p = arg_parser(__doc__)
    p.add_argument("--sizes", default="small,large",
                   help="comma-separated grids: small (128x96x80, h=0.2), large (256^3, "
                        "h=0.1), huge (512^3, h=0.05) or NXxNYxNZ (h=0.2); default: small,large")
    p.add_argument("--dtype", default="complex128", choices=("complex128", "complex64"))
    p.add_argument("--backend", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                   help="OpenMP threads of the solver, scipy.fft workers and copy threads "
                        "(default: os.cpu_count())")
    p.add_argument("--steps", type=int, default=10,
                   help="steps per timed repetition of the solver (default 10)")
    p.add_argument("--ref-steps", type=int, default=3,
                   help="timed single steps of the reference (default 3)")
    p.add_argument("--ref-mem-gb", type=float, default=12.0,
                   help="skip the reference when its estimated memory exceeds this")
    p.add_argument("--no-reference", action="store_true", help="do not run the reference")
    p.add_argument("--json", metavar="PATH", help="also write header and rows as JSON")
    args = p.parse_args(argv)
    grids = []
    for item in (s.strip() for s in args.sizes.split(",")):
        if not item:
            continue
        if item in SIZES:
            grids.append(SIZES[item])
            continue
        try:
            shape = tuple(int(v) for v in item.lower().split("x"))
        except ValueError:
            shape = ()
        if len(shape) != 3 or min(shape) < 4:
            p.error(f"--sizes: {item!r} is neither small, large, huge nor NXxNYxNZ")
        grids.append((shape, 0.2))
    if not grids:
        p.error("--sizes names no grid")
    if args.threads < 1 or args.steps < 1 or args.ref_steps < 1:
        p.error("--threads, --steps and --ref-steps must be >= 1")
    args.grids = grids
    return args


def main(argv: Optional[Sequence[str]] = None) -> List[Dict[str, Any]]:
    """Time the solver and its reference on each grid, in imaginary and in
    real time; print the header, a line per row and the table.

    Parameters
    ----------
    argv : sequence of str, optional
        Command-line arguments (default ``sys.argv[1:]``), e.g.
        ``["--sizes", "96x96x96", "--steps", "5"]``.

    Returns
    -------
    list of dict
        A row per grid and mode (None in the columns of what did not run).
    """
    args = parse_args(argv)
    t_start = time.perf_counter()
    dtype = np.dtype(args.dtype).type
    info = machine_info(args.backend, threads=args.threads)
    print_header("nlsepy split-step Crank-Nicolson (dipolar GPE, 3D) benchmark", info)
    print(f"  problem: OPTION 2, trap frequencies {FREQ}, g = {G:.4f}, gdd = {GDD:.4f}, "
          f"cutoff R = {CUTOFF}, dt = {DT}")
    if args.backend == "cpu":
        nl.set_num_threads(args.threads)

    cp = cupy_or_none() if args.backend == "cuda" else None
    if args.backend == "cuda":
        copy_bw, how = device_copy_bandwidth(cp)
        ref_xp = cp
        ref_name = "CuPy" if cp is not None else None
    else:
        copy_bw = copy_bandwidth(args.threads, repeats=5)
        how = f"np.copyto 256 MiB float64 on {args.threads} thread(s), median of 5"
        ref_xp = np
        ref_name = "NumPy"
    print(f"copy bandwidth ({how}): {copy_bw / 1e9:.2f} GB/s (read + write)", flush=True)
    info["copy_gbps"] = copy_bw / 1e9
    info["copy_how"] = how

    rows: List[Dict[str, Any]] = []
    for shape, h in args.grids:
        npts = int(np.prod(shape))
        grid = "x".join(map(str, shape))
        try:
            gpe = nl.DipolarGPE(shape, (h, h, h), DT, g=G, gdd=GDD, trap=FREQ, cutoff=CUTOFF,
                                geometry="3d", option=2, dtype=dtype, backend=args.backend,
                                fft_effort="measure")
        except (MemoryError, nl.BackendError) as exc:
            gpe = None
            print(f"{grid}: the solver does not fit in memory ({exc})", flush=True)
        for mode in MODES:
            row: Dict[str, Any] = {
                "grid": grid, "points": npts, "spacing": h, "mode": mode,
                "dtype": np.dtype(dtype).name,
                "threads": args.threads if args.backend == "cpu" else "gpu",
                "steps": args.steps, "repeats": REPEATS,
                "ms_per_iter": None, "ns_per_point": None, "mbytes_per_step": None,
                "gbps": None, "copy_gbps": copy_bw / 1e9, "fraction_of_copy": None,
                "ref_ms_per_iter": None, "ref_over_c": None, "ref_note": None,
                "ms_per_iter_reps": None, "rep_spread": None, "mem_bytes_per_point": None,
            }
            if gpe is not None:
                advance = gpe.imaginary_time if mode == "imaginary" else gpe.real_time
                sec, times = time_solver(advance, args.steps,
                                         clock=lambda: gpe.last_step_seconds)
                bps = float(gpe.bytes_per_step(mode))
                row["mem_bytes_per_point"] = gpe.memory_bytes / npts
                row.update(ms_per_iter=1e3 * sec, ns_per_point=1e9 * sec / npts,
                           mbytes_per_step=bps / 1e6, gbps=bps / sec / 1e9,
                           fraction_of_copy=bps / sec / copy_bw, bytes_per_step=bps,
                           ms_per_iter_reps=[1e3 * t for t in times],
                           rep_spread=max(times) / min(times))
            if args.no_reference:
                row["ref_note"] = "not run (--no-reference)"
            elif ref_xp is None:
                row["ref_note"] = "CuPy not importable"
            else:
                fits, why = reference_fits(shape, dtype, ref_xp, args.ref_mem_gb * 1e9)
                if not fits:
                    row["ref_note"] = why
                else:
                    try:
                        rsec = time_reference(shape, h, mode, dtype, args.ref_steps, ref_xp,
                                              args.threads)
                        row["ref_ms_per_iter"] = 1e3 * rsec
                        if row["ms_per_iter"] is not None:
                            row["ref_over_c"] = 1e3 * rsec / row["ms_per_iter"]
                    except MemoryError as exc:  # includes cupy's OutOfMemoryError
                        row["ref_note"] = f"out of memory ({type(exc).__name__})"
                        gc.collect()
            rows.append(row)
            c_part = ("solver n/a" if row["ms_per_iter"] is None else
                      f"{row['ms_per_iter']:.2f} ms/iter, {row['ns_per_point']:.2f} ns/point, "
                      f"{row['gbps']:.2f} GB/s = {row['fraction_of_copy']:.2f} of copy, "
                      f"holds {row['mem_bytes_per_point']:.1f} B/point "
                      f"({row['mem_bytes_per_point'] * npts / 2**30:.2f} GiB)")
            r_part = (f"{ref_name} reference n/a ({row['ref_note']})"
                      if row["ref_ms_per_iter"] is None else
                      f"{ref_name} reference {row['ref_ms_per_iter']:.1f} ms/iter"
                      + ("" if row["ref_over_c"] is None else f" ({row['ref_over_c']:.2f}x)"))
            print(f"{grid} {mode:9s} {row['dtype']}: {c_part}; {r_part}", flush=True)
        gpe = None  # free the solver before the next grid
        gc.collect()

    print()
    print(f"ms/iter: median of {REPEATS} timed calls of imaginary_time/real_time({args.steps}) "
          f"per step (gpe.last_step_seconds: CUDA events on the device, the wall clock "
          f"of the C call on the CPU), after 2 warm-up steps (real time continues from the imaginary-time "
          f"state, complex); ns/point = time per iteration / grid points; MB/step and "
          f"GB/s: gpe.bytes_per_step(mode) (the solver's traffic model) and that over the "
          f"time; copy GB/s: {how}, read + write; reference: "
          f"nlsepy.reference.dipolar.SplitStepReference ({ref_name}), median of {args.ref_steps} "
          f"single steps after one warm-up step; reference / C = reference time / solver "
          f"time.")
    print_noisy(rows, NOISY, lambda r: f"{r['grid']} {r['mode']}", "ms_per_iter_reps", "ms/iter")
    print_load(info, ", and OpenMP steps slow down far more than NumPy's")
    print(f"total time {time.perf_counter() - t_start:.0f} s")
    return report(rows, COLUMNS, args.json, {"header": info})


if __name__ == "__main__":
    main()
