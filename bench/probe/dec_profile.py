"""Profile target: leapfrog steps of nl.DecGPE on the GPU (run under ncu/nsys).

    python bench/probe/dec_profile.py [grid] [blocks] [dtype] [steps]
"""
import sys

import numpy as np

import nlsepy as nl

grid = sys.argv[1] if len(sys.argv) > 1 else "bcc"
nb = int(sys.argv[2]) if len(sys.argv) > 2 else 189
dtype = np.dtype(sys.argv[3] if len(sys.argv) > 3 else "complex128").type
steps = int(sys.argv[4]) if len(sys.argv) > 4 else 20
edge = np.asarray(nl.dec.block(grid).edge) * nb
sim = nl.DecGPE(grid, blocks=nb, spacing=12.0 / edge.max(), g=300.0, trap=1.0, dtype=dtype,
                backend="cuda")
z = np.zeros(sim.size, dtype)
z[::7] = 1e-3
sim.set_state(z, z)
sim.step(steps)  # warm-up: the first launch loads the module
t = []
for _ in range(5):
    sim.step(steps)
    t.append(sim.last_step_seconds() / steps)
sec = sorted(t)[2]
print(grid, sim.size, sec * 1e3, "ms/step (median of 5)", sim.bytes_per_step() / sec / 1e9, "GB/s")
