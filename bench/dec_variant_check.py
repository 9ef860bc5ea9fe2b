"""Agreement of the CUDA DEC kernel forms at benchmark sizes.

Steps the problem of ``bench/dec.py`` (each grid at the unknowns of BCC
``--blocks``^3 x 12) with the default kernel form and with each form named
in ``--variants`` (``NLSEPY_DEC_KERNEL``, read when a solver is made; a
variant ``18:8x6`` also sets ``NLSEPY_DEC_MARCH_TILE=8x6``, ``21:8x6:5`` also
``NLSEPY_DEC_MARCH_RING=5``, ``21::5`` the ring alone, ``23:::4``
``NLSEPY_DEC_BLOCKS_PER_SM=4`` and ``24::::4`` ``NLSEPY_DEC_TILE_MIB=4``), from
the same state, and prints the largest difference of the states after
``--steps`` leapfrog steps relative to the largest modulus, and the norms.
With ``--time R`` it then times every form, the default one included,
in turns (R rounds of ``--steps`` steps each, the forms interleaved so
that drifts of the clock or the memory hit all alike) and prints each
form's median milliseconds a step and fraction of the copy bandwidth
measured in the same run (48 B an unknown in complex128, 24 in complex64).

Usage
-----
::

    python bench/dec_variant_check.py [--variants 10,11] [--blocks 96]
        [--grids cubic,fcc,bcc] [--dtypes complex128,complex64] [--steps 20]
        [--time 5]
"""

from __future__ import annotations

import argparse
import os
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

import _common  # noqa: F401  (puts the package on the path like the other benchmarks)
from dec import blocks_for, make


KEYS = ("NLSEPY_DEC_KERNEL", "NLSEPY_DEC_MARCH_TILE", "NLSEPY_DEC_MARCH_RING",
        "NLSEPY_DEC_BLOCKS_PER_SM", "NLSEPY_DEC_TILE_MIB")


def gpu_copy() -> float:
    """The GPU's copy bandwidth (GB/s, 1 GiB, median of 20), printed with the
    device's name as the first line of a run."""
    from nlsepy import _cuda
    copy = _cuda.copy_bandwidth(1 << 30, 20)
    print(f"device: {_cuda.device_name()}  copy bandwidth {copy:.0f} GB/s", flush=True)
    return copy


def times_in_turns(sims: Dict[str, Any], steps: int, rounds: int, nbytes: float, copy: float,
                   digits: int = 2) -> str:
    """Each solver of `sims` stepped `rounds` times `steps` steps, the solvers
    in turns (so that drifts of the clock or the memory hit all alike): its
    median milliseconds a step and the fraction of `copy` (GB/s) that
    `nbytes` a step make, as ``"name: 1.234 ms 0.85"`` joined by two spaces."""
    times: Dict[str, List[float]] = {k: [] for k in sims}
    for _ in range(rounds):
        for k, sim in sims.items():
            sim.step(steps)
            times[k].append(sim.last_step_seconds() / steps)
    return "  ".join(
        f"{k}: {1e3 * np.median(t):.3f} ms {nbytes / np.median(t) / 1e9 / copy:.{digits}f}"
        for k, t in times.items())


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--variants", default="0,6,8")
    p.add_argument("--blocks", type=int, default=96)
    p.add_argument("--grids", default="cubic,fcc,bcc,a15")
    p.add_argument("--dtypes", default="complex128,complex64")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--time", type=int, default=0, metavar="ROUNDS")
    a = p.parse_args(argv)
    copy = gpu_copy() if a.time else None
    dof = 12 * a.blocks ** 3
    for dt_name in a.dtypes.split(","):
        dtype = np.dtype(dt_name).type
        for grid in a.grids.split(","):
            blocks = (a.blocks,) * 3 if grid == "bcc" else blocks_for(grid, dof)
            for key in KEYS:
                os.environ.pop(key, None)
            ref = make(grid, blocks, dtype, "cuda", None)
            psi0 = ref.psi
            ref.step(a.steps)
            print(f"{grid:6} {dt_name:10} default: {ref.last_kernel()}", flush=True)
            r = ref.psi
            scale = float(np.abs(r).max())
            sims = {"default": ref}
            for v in a.variants.split(","):
                for key, value in zip(KEYS, v.split(":")):
                    os.environ[key] = value
                sim = make(grid, blocks, dtype, "cuda", psi0)
                sim.step(a.steps)
                d = float(np.abs(sim.psi - r).max()) / scale
                print(f"{grid:6} {dt_name:10} variant {v:>2} ({sim.last_kernel()}): "
                      f"max |diff| / max |psi| = {d:.2e}, "
                      f"norm {sim.norm():.15g} (default {ref.norm():.15g})", flush=True)
                if a.time:
                    sims[v] = sim
                else:
                    del sim
                for key in KEYS:
                    os.environ.pop(key, None)
            if a.time:
                nbytes = (48 if dtype is np.complex128 else 24) * ref.size
                print(f"{grid:6} {dt_name:10} "
                      + times_in_turns(sims, a.steps, a.time, nbytes, copy), flush=True)
            del sims, ref
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
