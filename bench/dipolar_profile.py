"""Per-kernel view of a few split-step iterations on the GPU (run under ncu).

    ncu --clock-control none --csv --metrics gpu__time_duration.sum,\\
        dram__bytes_read.sum,dram__bytes_write.sum python bench/dipolar_profile.py [N] [dtype]

Makes the benchmark's 3D problem on an N^3 grid (default 256), takes 3
imaginary-time and 3 real-time steps; ncu lists each kernel's duration and
DRAM traffic, to compare with the traffic model of cuda/dipolar/dipolar.cu.
"""

import sys

import numpy as np

import nlsepy as nl

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from dipolar import CUTOFF, DT, FREQ, G, GDD  # noqa: E402

n = int(sys.argv[1]) if len(sys.argv) > 1 else 256
dtype = np.dtype(sys.argv[2] if len(sys.argv) > 2 else "complex128").type
gpe = nl.DipolarGPE((n, n, n), 25.6 / n, DT, g=G, gdd=GDD, trap=FREQ, cutoff=CUTOFF,
                    dtype=dtype, backend="cuda")
gpe.imaginary_time(3)
gpe.real_time(3)
print(f"{n}^3 {np.dtype(dtype).name}: model {gpe.bytes_per_step('real') / 1e6:.1f} MB per "
      f"real-time step, last call {1e3 * gpe.last_step_seconds / 3:.3f} ms per step")
