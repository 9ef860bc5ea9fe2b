"""What the Lee-Huang-Yang term (gqf |psi|^3 psi) adds to a 3D real-time step of
nl.DipolarGPE: one solver, with the dipolar term, stepped alternately at
gqf = 0 and gqf != 0, per backend and precision.

Counted first: the term is one more pointwise power, |psi|^3 = d sqrt(d)
with d = |psi|^2, two multiplications and an addition in the pass that
applies the non-derivative factor (CPU: nonlin_row's call of
dipolar_lhy.c; CUDA: H1 in k_zreg / k_zline), and no further pass through
memory: the bytes a step moves are unchanged (``bytes_per_step``), so the
term should cost a few percent of the pass that is bound by its sincos.

The two settings are timed on the same solver (the same buffers, FFT plans
and memory placement), alternating: each round takes one call of
``--steps`` steps at gqf = 0 and one at gqf != 0, in turn first, after one
warm-up call of each; a call's time per step is ``gpe.last_step_seconds``
divided by the steps (CUDA events on the device, the wall clock on the
CPU).  The table gives the medians over ``--repeats`` rounds and the
median of the rounds' ratios (robust to load that drifts between rounds).

    python bench/dipolar_lhy.py --backend cuda --size 256
    python bench/dipolar_lhy.py --backend cpu --size 256 --steps 3 --repeats 7
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

import nlsepy as nl


def time_case(n: int, backend: str, dtype: Any, gqf: float, steps: int,
              repeats: int, mode: str) -> Tuple[float, float, float]:
    """Median seconds per step of an n^3 grid at gqf = 0 and at `gqf`, and the
    median ratio of the rounds (each round times both, in turn first)."""
    gpe = nl.DipolarGPE((n, n, n), 16.0 / n, 0.001, g=50.0, gdd=20.0, trap=(1, 1, 1),
                        backend=backend, dtype=dtype)
    advance = gpe.real_time if mode == "real" else gpe.imaginary_time
    gpe.imaginary_time(2)
    for q in (0.0, gqf):  # warm-up (real time makes the state complex at its first step)
        gpe.gqf = q
        advance(steps)
    t0, t1, ratio = [], [], []
    for r in range(repeats):
        got = {}
        for q in ((0.0, gqf) if r % 2 == 0 else (gqf, 0.0)):
            gpe.gqf = q
            advance(steps)
            got[q] = gpe.last_step_seconds / steps
        t0.append(got[0.0])
        t1.append(got[gqf])
        ratio.append(got[gqf] / got[0.0])
    return statistics.median(t0), statistics.median(t1), statistics.median(ratio)


def main(argv: Optional[Sequence[str]] = None) -> List[Dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="cuda", choices=("cpu", "cuda"))
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--gqf", type=float, default=40.0)
    ap.add_argument("--mode", default="real", choices=("real", "imaginary"))
    args = ap.parse_args(argv)
    rows = []
    print(f"| grid | dtype | backend | mode | ms/step gqf=0 | ms/step gqf={args.gqf:g} | added "
          f"(median of rounds) |")
    print("|---|---|---|---|---:|---:|---:|")
    for dtype in (np.complex64, np.complex128):
        t0, t1, ratio = time_case(args.size, args.backend, dtype, args.gqf, args.steps,
                                  args.repeats, args.mode)
        row = dict(size=args.size, dtype=np.dtype(dtype).name, backend=args.backend,
                   mode=args.mode, plain_ms=1e3 * t0, lhy_ms=1e3 * t1, added=ratio - 1)
        rows.append(row)
        print(f"| {args.size}^3 | {row['dtype']} | {args.backend} | {args.mode} | "
              f"{row['plain_ms']:.3f} | {row['lhy_ms']:.3f} | {100 * row['added']:+.1f} % |")
    return rows


if __name__ == "__main__":
    main()
