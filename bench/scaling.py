"""Strong and weak scaling of the distributed models under MPI.

One command gives the tables; it launches ``mpirun -n N`` for each rank
count itself (``--launch`` names the launcher), each run timing the step of
one model on one grid, and fits the parallel fractions of source 001:

- strong scaling (a fixed grid): time per step T(N), speed-up T(1)/T(N),
  parallel efficiency T(1)/(N T(N)) and Amdahl's p_t, the least-squares fit
  of T(N) = T(1) ((1 - p_t) + p_t / N);
- weak scaling (``--weak``: the grid's first axis grows with N, so each rank
  keeps the same slab): Gustafson's p_w, the fit of the scaled speed-up
  S(N) = N T(1) / T(N) = (1 - p_w) + p_w N.

Each run reports, per step, the median over ``--repeats`` timed blocks of
``--steps`` steps (wall clock between two barriers on the CPU; on the GPU
the block ends with a device synchronisation), where the time goes
(transposes, FFTs, reductions, halo exchanges:
``last_timings``) and the fraction of the step spent in communication that
is not hidden behind computation (``EXPOSED``).

Examples
--------
CPU, the 2-core machine (one thread per rank)::

    python bench/scaling.py --model dipolar --shape 256 --ranks 1,2 --backend cpu
    python bench/scaling.py --model fd --shape 256 --ranks 1,2 --backend cpu

An N-GPU machine (one rank per GPU; the strong tables at 512^3 and 1024^3
and the weak table at 512^3 per GPU)::

    python bench/scaling.py --model fd --shape 512,1024 --ranks 1,2,4,8 --backend cuda
    python bench/scaling.py --model fd --shape 512 --ranks 1,2,4,8 --backend cuda --weak

Two ranks sharing one GPU (the host-staged path's overhead)::

    python bench/scaling.py --model fd --shape 512 --ranks 1,2 --backend cuda --share-gpu
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


# ---------------------------------------------------------------- one run
def _make(model: str, shape: Tuple[int, ...], backend: str, dtype: Any, comm: Any) -> Tuple[Any, Any]:
    """A solver of `model` on `shape` and the function that takes n steps."""
    import nlsepy as nl
    if model == "fd":
        from nlsepy.common import dist as _dist
        h = 0.05
        lay = _dist.Layout.of(comm, shape)  # each rank builds its own rows only
        x0 = (np.arange(lay.start, lay.start + lay.count) - shape[0] / 2) * h
        axes = [x0] + [(np.arange(n) - n / 2) * h for n in shape[1:]]
        grids = np.meshgrid(*axes, indexing="ij", sparse=True)
        local = np.exp(-sum(x ** 2 for x in grids) / 4).astype(dtype)
        sim = nl.NLSE(nl.Slab(local, lay.start, shape), h, s=-1.0, scheme="2shoc",
                      bc="periodic", backend=backend, dtype=dtype, comm=comm)
        return sim, lambda n: sim.step(n)
    if model == "dipolar":
        gpe = nl.DipolarGPE(shape, 0.1, 0.002, g=10.0, gdd=5.0, cutoff=5.0, backend=backend,
                            dtype=dtype, comm=comm)
        return gpe, lambda n: gpe.real_time(n)
    if model == "dec":
        # source 001's test: BCC blocks (12 unknowns each), here a Gaussian in a trap
        sim = nl.DecGPE("bcc", blocks=shape, spacing=0.25, g=10.0, trap=(1.0, 1.0, 1.0),
                        psi0=lambda p: np.exp(-(p * p).sum(axis=1) / 8.0),
                        backend=backend, dtype=dtype, comm=comm)
        return sim, lambda n: sim.step(n)
    raise ValueError(f"unknown model {model!r}")


def _sync(backend: str) -> None:
    if backend == "cuda":
        try:
            import cupy
            cupy.cuda.Device().synchronize()
        except ImportError:  # the solver's own calls return after the device
            pass


def worker(args: argparse.Namespace) -> None:
    """Time `args.steps` steps `args.repeats` times on every rank of
    COMM_WORLD; rank 0 prints one JSON line."""
    from mpi4py import MPI
    import nlsepy as nl
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if args.backend == "cuda":
        from nlsepy import _cuda
        ndev = _cuda.device_count()
        local = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK",
                                   os.environ.get("SLURM_LOCALID", rank)))
        os.environ.setdefault("NLSEPY_CUDA_DEVICE", str(0 if args.share_gpu else local % ndev))
    nl.set_num_threads(args.threads)
    shape = tuple(args.grid)
    if args.weak:  # the split axis grows with the ranks (z blocks for the DEC model)
        q = 2 if args.model == "dec" else 0
        shape = shape[:q] + (shape[q] * size,) + shape[q + 1:]
    dtype = np.complex64 if args.dtype == "complex64" else np.complex128
    # one GPU: the dipolar GPE's single-device solver is the baseline (not a
    # distributed run of one rank)
    single = args.model == "dipolar" and args.backend == "cuda" and size == 1
    solver, step = _make(args.model, shape, args.backend, dtype, None if single else comm)
    step(args.steps)  # warm-up (plans, first touch)
    times = []
    parts: Dict[str, List[float]] = {}
    for _ in range(args.repeats):
        _sync(args.backend)
        comm.Barrier()
        t0 = time.perf_counter()
        step(args.steps)
        _sync(args.backend)
        comm.Barrier()
        times.append((time.perf_counter() - t0) / args.steps)
        timing = getattr(solver, "last_timings", None)
        if isinstance(timing, dict):
            n = max(1, int(timing.get("steps", args.steps)))
            for k, v in timing.items():
                if k != "steps":
                    parts.setdefault(k, []).append(v / n)
    # per part: the slowest rank's median
    share = {k: comm.allreduce(statistics.median(v), op=MPI.MAX) for k, v in parts.items()}
    # the state's observables after all the steps (the same steps for every rank
    # count: a check that the distributed run gives the one-rank answer)
    check = {}
    if args.model == "dipolar":
        o = solver.observables()
        check = {k: float(o[k]) for k in ("norm", "mu", "energy")}
    else:  # collective on every rank
        check = {"norm": float(solver.norm()), "energy": float(solver.energy())}
    if rank == 0:
        print("SCALING " + json.dumps({
            "model": args.model, "ranks": size, "shape": list(shape), "backend": args.backend,
            "dtype": args.dtype, "threads": args.threads, "per_step_s": statistics.median(times),
            "single_device_solver": single,
            "all_s": times, "parts_s": share, "check": check,
            "comm": {k: v for k, v in getattr(solver, "comm_info", {}).items()
                     if isinstance(v, (int, float, str, bool, list, tuple))}}), flush=True)


# ---------------------------------------------------------------- the tables
def fit_amdahl(n: Sequence[int], t: Sequence[float]) -> float:
    """p_t of T(N) = T1 ((1 - p) + p / N), least squares with T1 measured."""
    n, t = np.asarray(n, float), np.asarray(t, float)
    t1 = t[n == 1][0]
    x = (1.0 / n - 1.0) * t1          # T - T1 = p (T1/N - T1)
    return float(np.dot(x, t - t1) / np.dot(x, x)) if np.dot(x, x) > 0 else float("nan")


def fit_gustafson(n: Sequence[int], t: Sequence[float]) -> float:
    """p_w of S(N) = N T1 / T(N) = (1 - p) + p N, least squares."""
    n, t = np.asarray(n, float), np.asarray(t, float)
    t1 = t[n == 1][0]
    s = n * t1 / t
    x = n - 1.0
    return float(np.dot(x, s - 1.0) / np.dot(x, x)) if np.dot(x, x) > 0 else float("nan")


def launch(args: argparse.Namespace, nranks: int, grid: Sequence[int]) -> Dict[str, Any]:
    cmd = list(args.launch.split()) + ["-n", str(nranks), sys.executable,
                                       os.path.abspath(__file__), "--worker"]
    cmd += ["--model", args.model, "--grid", ",".join(map(str, grid)), "--backend",
            args.backend, "--dtype", args.dtype, "--steps", str(args.steps), "--repeats",
            str(args.repeats), "--threads", str(args.threads)]
    if args.weak:
        cmd.append("--weak")
    if args.share_gpu:
        cmd.append("--share-gpu")
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
    for line in proc.stdout.splitlines():
        if line.startswith("SCALING "):
            return json.loads(line[len("SCALING "):])
    raise RuntimeError(f"{' '.join(cmd)} gave no result (exit {proc.returncode}):\n"
                       f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


#: the parts of ``last_timings`` that are communication left exposed (not
#: hidden behind computation): the FD slabs' halo exchange and the wait for
#: the slowest rank, the DEC halo swap (on CPU ranks only its part that the
#: interior layers did not hide), the dipolar transposes (all-to-all and
#: their barriers) and reductions
EXPOSED = {"fd": ("wait", "exchange"), "dec": ("exchange",),
           "dipolar": ("transpose", "fft_transpose", "reduce")}


def exposed_fraction(row: Dict[str, Any]) -> float:
    """The fraction of a run's step spent in communication that is not
    hidden (0 for one process; the slowest rank's median of each part)."""
    parts = row.get("parts_s") or {}
    comm = sum(parts.get(k, 0.0) for k in EXPOSED.get(row.get("model", ""), ()))
    return comm / row["per_step_s"] if row["per_step_s"] > 0 else float("nan")


def table(rows: List[Dict[str, Any]], weak: bool) -> str:
    n = [r["ranks"] for r in rows]
    t = [r["per_step_s"] for r in rows]
    t1 = t[n.index(1)] if 1 in n else None
    head = "| ranks | grid | ms/step | " + ("scaled speed-up | " if weak else "speed-up | ") + \
        "efficiency | exposed communication (fraction of the step) | " + \
        "where the time goes (ms/step, slowest rank) |"
    out = [head, "|" + "---|" * 7]
    for r in rows:
        tt = r["per_step_s"]
        if t1 is None:
            sp = eff = float("nan")
        elif weak:
            sp, eff = r["ranks"] * t1 / tt, t1 / tt
        else:
            sp, eff = t1 / tt, t1 / (r["ranks"] * tt)
        parts = ", ".join(f"{k} {1e3 * v:.1f}" for k, v in sorted(r["parts_s"].items()))
        out.append(f"| {r['ranks']} | {'x'.join(map(str, r['shape']))} | {1e3 * tt:.2f} | "
                   f"{sp:.2f} | {eff:.2f} | {exposed_fraction(r):.3f} | {parts or '-'} |")
    if any(r.get("single_device_solver") for r in rows):
        out.append("\n1 rank: the single-GPU solver (no comm), the baseline of the speed-ups.")
    ref = next((r.get("check") for r in rows if r["ranks"] == 1), None)
    if ref and not weak:
        dev = {r["ranks"]: max(abs(r["check"][k] - ref[k]) / max(abs(ref[k]), 1e-300)
                               for k in ref) for r in rows if r.get("check")}
        out.append(f"\nlargest relative difference of {', '.join(ref)} from 1 rank after the "
                   "same steps: " + ", ".join(f"{n} ranks {d:.1e}" for n, d in sorted(dev.items())))
    if t1 is not None and len(rows) > 1:
        if weak:
            out.append(f"\nGustafson p_w = {fit_gustafson(n, t):.3f}")
        else:
            out.append(f"\nAmdahl p_t = {fit_amdahl(n, t):.3f}")
    return "\n".join(out)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=("fd", "dipolar", "dec"), default="dipolar")
    p.add_argument("--shape", default="256",
                   help="grid edge(s) for cubic grids, comma-separated (a table each), or one "
                        "grid as AxBxC (e.g. DEC blocks 87x87x302)")
    p.add_argument("--grid", help=argparse.SUPPRESS)
    p.add_argument("--ranks", default="1,2", help="rank counts, comma-separated")
    p.add_argument("--backend", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--dtype", choices=("complex64", "complex128"), default="complex128")
    p.add_argument("--steps", type=int, default=5, help="steps per timed block")
    p.add_argument("--repeats", type=int, default=5, help="timed blocks (the median is kept)")
    p.add_argument("--threads", type=int, default=1, help="OpenMP threads per rank")
    p.add_argument("--weak", action="store_true",
                   help="weak scaling: the first axis grows with the rank count")
    p.add_argument("--share-gpu", action="store_true", help="every rank on GPU 0")
    p.add_argument("--launch", default="mpirun --allow-run-as-root --oversubscribe",
                   help="the MPI launcher (without -n)")
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--json", help="also write the rows to this file")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        args.grid = [int(x) for x in args.grid.split(",")]
        worker(args)
        return 0
    ranks = [int(x) for x in args.ranks.split(",")]
    all_rows = []
    grids = ([[int(x) for x in args.shape.split("x")]] if "x" in args.shape else
             [[int(e)] * 3 for e in args.shape.split(",")])
    for grid in grids:
        rows = []
        for n in ranks:
            try:
                rows.append(launch(args, n, grid))
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                print(f"\n{n} ranks on {'x'.join(map(str, grid))}: no result: {str(exc)[-1500:]}")
        if not rows:
            continue
        kind = "weak" if args.weak else "strong"
        print(f"\n### {args.model}, {kind} scaling, {args.backend}, {args.dtype}, "
              f"{'x'.join(map(str, grid))}{' per rank' if args.weak else ''}, "
              f"{args.threads} thread(s) per rank\n")
        print(table(rows, args.weak))
        all_rows += rows
    if args.json:
        with open(args.json, "w") as f:
            json.dump(all_rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
