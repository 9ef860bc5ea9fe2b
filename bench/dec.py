"""Benchmark of ``nl.DecGPE``: the leapfrog step of the DEC GPE (source 001).

Times ``sim.step(k)`` on each crystal grid, CUDA (CUDA events, the
solver's own timer) and CPU (all cores and one core), and compares with the
copy bandwidth measured in the same run.

Traffic model
-------------
A leapfrog step (eq. 12) reads ``psi(n)`` once -- the neighbours' reads of
it are assumed to hit cache -- and reads and overwrites ``psi(n-1)`` in
place: 3 complex values per unknown, 48 B in complex128 and 24 B in
complex64, the seed's minimum (section 4.1).  The trap is computed from the
circumcentre, so no potential array is read.  ``bytes_per_step`` comes from
the solver (``Dec.bytes_per_cell_step()``); nothing here hard-codes it.  The
fraction of copy bandwidth is ``(bytes_per_step / seconds) / copy``, with
the copy bandwidth (bytes read + written) of ``cudaMemcpy`` device to device
on the GPU (``nlsepy._cuda.copy_bandwidth``) and of ``np.copyto`` split over
as many threads as the kernels use on the CPU.

On the CPU the copy is measured again right before each timing of the
kernel (``--cpu-repeats`` pairs, at least 3): on a shared machine the copy
bandwidth drifts within a run (a 2-core VM's moved between 10 and 30 GB/s
in one run), so each timing is set against the copy of its own moment.  A
CPU row prints the median time, the median of the pairs' copy bandwidths
and the median of the pairs' fractions (``cpu{t}_copy`` and
``cpu{t}_fraction`` in the JSON, with every pair in ``cpu{t}_pairs``).

Sizes
-----
``--blocks`` sets the BCC grid (default 189, the seed's Fig. 7 point of
189^3 x 12 unknowns); the other grids take the block count that gives the
same number of unknowns.  ``--largest`` adds, for each grid of ``--grids``,
the largest grid that fits (the CUDA backend takes fewer than 2^31 unknowns;
with ``psi(-dt)`` given, two state arrays), run on a zero state.

Usage
-----
::

    python bench/dec.py [--backend cuda|cpu] [--blocks 189] [--grids bcc,cubic,...]
                        [--dtypes complex128,complex64] [--largest] [--cpu-threads 1,16]
                        [--cpu-repeats 5] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

import nlsepy as nl

GRIDS = ("cubic", "fcc", "bcc", "a15", "c15", "z")


def cube(grid: str, b: int) -> tuple:
    """The blocks of a cubic box b blocks wide: b x b x b, and on Z (whose
    block is sqrt(3) long in y) b x b/sqrt(3) x b."""
    return (b, max(2, round(b / np.sqrt(3))), b) if grid == "z" else (b, b, b)


def blocks_for(grid: str, dof: float) -> tuple:
    """Blocks per axis giving about `dof` unknowns (a cube: `cube`)."""
    c = nl.dec.CELLS_PER_BLOCK[grid]
    scale = np.sqrt(3) if grid == "z" else 1.0
    return cube(grid, max(2, round((dof / c * scale) ** (1 / 3))))


def largest_blocks(grid: str, dtype: Any, free: int) -> tuple:
    """The largest blocks of `grid` (a cube: `cube`) that the CUDA backend
    takes (fewer than 2^31 unknowns) and whose memory fits in 95 % of
    `free` bytes: DecGPE's own estimate of two leapfrog states, two for an
    RK4 start and half a state for V, 4.5 values an unknown."""
    c = nl.dec.CELLS_PER_BLOCK[grid]
    per = 4.5 * np.dtype(dtype).itemsize * c
    scale = np.sqrt(3) if grid == "z" else 1.0
    b = int(((2 ** 31 - 1) / c * scale) ** (1 / 3)) + 2
    while True:
        blocks = cube(grid, b)
        n = int(np.prod(blocks))
        if n * c < 2 ** 31 and n * per <= 0.95 * free:
            return blocks
        b -= 1


def make(grid: str, blocks: tuple, dtype: Any, backend: str, psi: Optional[np.ndarray]
         ) -> "nl.DecGPE":
    """The grid in a box of 12 trap units (g = 300, isotropic trap) with
    psi(0) = psi(-dt) = `psi` (None: build a vortex-like state; False: zero)."""
    edge = np.asarray(nl.dec.block(grid).edge) * np.asarray(blocks)
    sim = nl.DecGPE(grid, blocks=blocks, spacing=12.0 / edge.max(), g=300.0, trap=(1, 1, 1),
                    dtype=dtype, backend=backend)
    if psi is None:
        p = sim.positions
        psi = np.exp(-(p ** 2).sum(axis=1) / 8) * (p[:, 0] + 1j * p[:, 1]) ** 2
        del p
        psi = (psi / np.sqrt(np.sum(np.abs(psi) ** 2 * sim.volumes))).astype(dtype)
    elif psi is False:
        psi = np.zeros(sim.size, dtype)
    sim.set_state(psi, psi)
    return sim


def time_gpu(sim: "nl.DecGPE", steps: int, repeats: int) -> float:
    """Median seconds per step over `repeats` calls of `steps` (CUDA events)."""
    sim.step(steps)  # warm-up
    t = []
    for _ in range(repeats):
        sim.step(steps)
        t.append(sim.last_step_seconds() / steps)
    return statistics.median(t)


def time_cpu_pairs(sim: "nl.DecGPE", threads: int, steps: int,
                   repeats: int) -> List[Dict[str, float]]:
    """`repeats` pairs of the copy bandwidth on `threads` threads (median of
    3) and, right after it, seconds per step of `steps` steps."""
    sim.step(1)
    pairs = []
    for _ in range(repeats):
        copy = cpu_copy_bandwidth(threads, repeats=3)
        t0 = time.perf_counter()
        sim.step(steps)
        sec = (time.perf_counter() - t0) / steps
        pairs.append(dict(copy=copy, seconds=sec,
                          fraction=sim.bytes_per_step() / sec / 1e9 / copy))
    return pairs


def cpu_copy_bandwidth(threads: int, nbytes: int = 1 << 28, repeats: int = 5) -> float:
    """GB/s (read + write) of np.copyto over `threads` Python threads."""
    a = np.ones(nbytes // 8)
    b = np.empty_like(a)
    parts = np.array_split(np.arange(a.size), threads)
    sl = [slice(p[0], p[-1] + 1) for p in parts]

    def one(s: slice) -> None:
        np.copyto(b[s], a[s])

    best = []
    for _ in range(repeats):
        th = [threading.Thread(target=one, args=(s,)) for s in sl]
        t0 = time.perf_counter()
        for x in th:
            x.start()
        for x in th:
            x.join()
        best.append(2 * nbytes / (time.perf_counter() - t0) / 1e9)
    return statistics.median(best)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="cuda", choices=("cpu", "cuda"))
    p.add_argument("--blocks", type=int, default=189, help="BCC blocks per axis")
    p.add_argument("--grids", default=",".join(GRIDS))
    p.add_argument("--dtypes", default="complex128,complex64")
    p.add_argument("--cpu-threads", default=f"{os.cpu_count() or 1},1",
                   help="thread counts of the CPU rows (speed-up reference)")
    p.add_argument("--cpu-steps", type=int, default=3)
    p.add_argument("--cpu-repeats", type=int, default=5,
                   help="pairs of copy and kernel timings per CPU row (at least 3)")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--largest", action="store_true")
    p.add_argument("--json", metavar="PATH")
    return p.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> List[Dict[str, Any]]:
    args = parse_args(argv)
    rows: List[Dict[str, Any]] = []
    dof = 12 * args.blocks ** 3
    gpu = args.backend == "cuda"
    copy = None
    if gpu:
        from nlsepy import _cuda
        copy = _cuda.copy_bandwidth(1 << 30, 20)
        print(f"device: {_cuda.device_name()}  copy bandwidth {copy:.0f} GB/s (1 GiB, median of 20)")
    threads = [int(t) for t in args.cpu_threads.split(",") if t]
    cpu_copy = {t: cpu_copy_bandwidth(t) for t in threads}
    print("cpu copy bandwidth at the start: "
          + ", ".join(f"{t} threads {b:.1f} GB/s" for t, b in cpu_copy.items()))
    hdr = (f"{'grid':6} {'dtype':10} {'blocks':>15} {'unknowns':>11} {'B/dof':>6} "
           f"{'backend':>8} {'ms/step':>9} {'GB/s':>7} {'frac':>5}")
    print(hdr)
    for dt_name in args.dtypes.split(","):
        dtype = np.dtype(dt_name).type
        for grid in args.grids.split(","):
            blocks = (args.blocks,) * 3 if grid == "bcc" else blocks_for(grid, dof)
            sim = make(grid, blocks, dtype, args.backend, None)
            psi0 = sim.psi
            row: Dict[str, Any] = dict(grid=grid, dtype=dt_name, blocks=blocks, unknowns=sim.size,
                                       bytes_per_dof=sim.bytes_per_step() / sim.size)
            if gpu:
                sec = time_gpu(sim, args.steps, args.repeats)
                row.update(backend="cuda", seconds=sec, gbps=sim.bytes_per_step() / sec / 1e9,
                           copy=copy, kernel=sim.last_kernel())
                row["fraction"] = row["gbps"] / copy
            else:
                sec = None
            print(f"{grid:6} {dt_name:10} {str(blocks):>15} {sim.size:11d} "
                  f"{row['bytes_per_dof']:6.0f} {'cuda' if gpu else '':>8} "
                  f"{(sec or 0) * 1e3:9.3f} {row.get('gbps', 0):7.0f} {row.get('fraction', 0):5.2f}",
                  flush=True)
            del sim
            for t in threads:
                nl.set_num_threads(t)
                cs = make(grid, blocks, dtype, "cpu", psi0)
                pairs = time_cpu_pairs(cs, t, args.cpu_steps, max(3, args.cpu_repeats))
                csec = statistics.median(p["seconds"] for p in pairs)
                ccopy = statistics.median(p["copy"] for p in pairs)
                frac = statistics.median(p["fraction"] for p in pairs)
                gb = cs.bytes_per_step() / csec / 1e9
                row[f"cpu{t}_seconds"] = csec
                row[f"cpu{t}_copy"] = ccopy
                row[f"cpu{t}_fraction"] = frac
                row[f"cpu{t}_pairs"] = pairs
                if sec:
                    row[f"speedup_vs_cpu{t}"] = csec / sec
                print(f"{'':6} {'':10} {'':>15} {'':>11} {'':>6} {'cpu' + str(t):>8} "
                      f"{csec * 1e3:9.1f} {gb:7.1f} {frac:5.2f}   (copy {ccopy:.1f} GB/s; "
                      f"pairs {min(p['fraction'] for p in pairs):.2f}-"
                      f"{max(p['fraction'] for p in pairs):.2f})"
                      + (f"   GPU speed-up {csec / sec:.0f}x" if sec else ""), flush=True)
                del cs
            nl.set_num_threads(os.cpu_count() or 1)
            del psi0
            rows.append(row)
    if gpu and args.largest:
        for dt_name in args.dtypes.split(","):
            dtype = np.dtype(dt_name).type
            for grid in args.grids.split(","):
                blocks = largest_blocks(grid, dtype, _cuda_free())
                sim = make(grid, blocks, dtype, "cuda", False)
                sec = time_gpu(sim, 10, args.repeats)
                row = dict(grid=grid, dtype=dt_name, blocks=blocks, unknowns=sim.size,
                           bytes_per_dof=sim.bytes_per_step() / sim.size, backend="cuda",
                           seconds=sec, gbps=sim.bytes_per_step() / sec / 1e9, copy=copy,
                           largest=True, kernel=sim.last_kernel())
                row["fraction"] = row["gbps"] / copy
                print(f"{grid:6} {dt_name:10} {str(blocks):>15} {sim.size:11d} "
                      f"{row['bytes_per_dof']:6.0f} {'cuda':>8} {sec * 1e3:9.3f} "
                      f"{row['gbps']:7.0f} {row['fraction']:5.2f}  (largest, zero state)",
                      flush=True)
                rows.append(row)
                del sim
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1, default=str)
    return rows


def _cuda_free() -> int:
    try:
        import cupy
        return int(cupy.cuda.runtime.memGetInfo()[0])
    except Exception:
        return 70 * 2 ** 30


if __name__ == "__main__":
    main()
