"""What the rotating frame (-Omega L_z) adds to a 3D real-time step of
nl.DipolarGPE: the same grid stepped at omega = 0 and at omega != 0, with the
dipolar term, per backend and precision.

Counted first: at omega = 0 the x and y sweeps read the symmetric
off-diagonal A and one gamma table a point; rotating, each line reads its own
am, ap (two complex values a line) and alpha, gamma rows (n complex values
each, shared by the line's lanes), and the right-hand side takes two
complex products where one sufficed.  The state's traffic (the dominant
bytes) is unchanged, so the rotation should cost little beyond the extra
arithmetic of the two sweeps.

Each case takes ``--repeats`` timed calls of ``--steps`` steps after one
warm-up call; a call's time per step is ``gpe.last_step_seconds`` divided
by the steps (CUDA events on the device, the wall clock on the CPU), and
the table gives the median.

    python bench/dipolar_rotation.py --backend cuda --size 256
    python bench/dipolar_rotation.py --backend cpu --size 256 --steps 3
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

import nlsepy as nl


def time_case(n: int, backend: str, dtype: Any, omega: float, steps: int,
              repeats: int) -> float:
    """Median seconds per real-time step of an n^3 grid rotating at `omega`."""
    gpe = nl.DipolarGPE((n, n, n), 16.0 / n, 0.001, g=50.0, gdd=20.0, trap=(1, 1, 1),
                        backend=backend, dtype=dtype, omega=omega)
    gpe.imaginary_time(2)  # a complex state on both sides
    gpe.real_time(steps)   # warm-up
    times = []
    for _ in range(repeats):
        gpe.real_time(steps)
        times.append(gpe.last_step_seconds / steps)
    return statistics.median(times)


def main(argv: Optional[Sequence[str]] = None) -> List[Dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="cuda", choices=("cpu", "cuda"))
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--omega", type=float, default=0.5)
    args = ap.parse_args(argv)
    rows = []
    print(f"| grid | dtype | backend | ms/step omega=0 | ms/step omega={args.omega:g} | added |")
    print("|---|---|---|---:|---:|---:|")
    for dtype in (np.complex64, np.complex128):
        t0 = time_case(args.size, args.backend, dtype, 0.0, args.steps, args.repeats)
        t1 = time_case(args.size, args.backend, dtype, args.omega, args.steps, args.repeats)
        row = dict(size=args.size, dtype=np.dtype(dtype).name, backend=args.backend,
                   plain_ms=1e3 * t0, rot_ms=1e3 * t1, added=t1 / t0 - 1)
        rows.append(row)
        print(f"| {args.size}^3 | {row['dtype']} | {args.backend} | {row['plain_ms']:.3f} | "
              f"{row['rot_ms']:.3f} | {100 * row['added']:+.1f} % |")
    return rows


if __name__ == "__main__":
    main()
