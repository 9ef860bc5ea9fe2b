"""Seconds per DEC leapfrog step by chunk length (CUDA events): is the
per-step time of a long call the kernel's time?  python3 bench/probe/dec_steptime.py [grid] [blocks] [dtype]"""
import sys
import time

import numpy as np

sys.path.insert(0, "bench")
import _common  # noqa: E402,F401  (puts the package on the path like the benchmarks)
from dec import blocks_for, make  # noqa: E402

grid = sys.argv[1] if len(sys.argv) > 1 else "bcc"
b = int(sys.argv[2]) if len(sys.argv) > 2 else 189
dt = np.dtype(sys.argv[3] if len(sys.argv) > 3 else "complex128").type
blocks = (b,) * 3 if grid == "bcc" else blocks_for(grid, 12 * b ** 3)
sim = make(grid, blocks, dt, "cuda", None)
sim.step(20)
for n in (1, 1, 1, 2, 8, 20, 41, 50, 50, 100):
    t0 = time.perf_counter()
    sim.step(n)
    w = time.perf_counter() - t0
    print(f"{grid} {n:4d} steps: events {1e3 * sim.last_step_seconds() / n:.3f} ms/step, "
          f"wall {1e3 * w / n:.3f}", flush=True)
