"""The CUDA DEC leapfrog step on BCC grids of several sizes (zero state).

Each argument ``DTYPE:BLOCKS[:KEY=VALUE+KEY=VALUE]`` makes a BCC grid of
BLOCKS^3 blocks in DTYPE with the environment variables given set while the
solver is made (``NLSEPY_DEC_KERNEL``, ``NLSEPY_DEC_MARCH_TILE``, ...), and
prints its median milliseconds a step (10 steps, 3 repetitions, CUDA events),
the fraction of the GPU's copy bandwidth measured first, and the kernel form.
Run from the repository root on a GPU machine with the CUDA build on the path:

    python3 bench/probe/dec_size_scan.py complex64:189 complex64:563 \
        complex128:452:NLSEPY_DEC_MARCH_TILE=8x8
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import _common  # noqa: F401,E402  (the package on the path like the benchmarks)
from dec import make, time_gpu  # noqa: E402


def main(specs: list) -> None:
    """Time every grid of `specs` (see the module's docstring)."""
    from nlsepy import _cuda
    copy = _cuda.copy_bandwidth(1 << 30, 20)
    print(f"device: {_cuda.device_name()}  copy bandwidth {copy:.0f} GB/s", flush=True)
    for spec in specs:
        dt, b, env = (spec.split(":") + [""])[:3]
        pairs = [e.split("=", 1) for e in env.split("+") if e]
        for k, v in pairs:
            os.environ[k] = v
        try:
            sim = make("bcc", (int(b),) * 3, np.dtype(dt).type, "cuda", False)
        finally:
            for k, _ in pairs:
                del os.environ[k]
        sec = time_gpu(sim, 10, 3)
        frac = sim.bytes_per_step() / sec / 1e9 / copy
        print(f"{dt:10} {b:>4} {env or '-':40} {sim.size:11d} {sec * 1e3:9.3f} ms {frac:6.3f}  "
              f"{sim.last_kernel()}", flush=True)
        del sim


if __name__ == "__main__":
    main(sys.argv[1:])
