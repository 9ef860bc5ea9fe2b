"""Where the time of a GPU frame goes: fetch, get_state, a chunk of steps, and
run() with 1 and 100 frames (3D 256^3, CD)."""
import time

import numpy as np

import nlsepy as nl

for dtype in (np.complex64, np.complex128):
    psi0 = np.ones((256, 256, 256), dtype) * np.exp(0.1j)
    sim = nl.NLSE(psi0, 0.5, scheme="cd", bc="periodic", dtype=dtype, backend="cuda")
    sim.step(20)
    t0 = time.perf_counter(); sim.step(20); chunk = time.perf_counter() - t0
    t0 = time.perf_counter(); sim.psi; gs = time.perf_counter() - t0
    t0 = time.perf_counter(); sim.psi; gs2 = time.perf_counter() - t0
    sim._solver.snapshot(0)
    t0 = time.perf_counter(); sim._solver.fetch(0); fe = time.perf_counter() - t0
    t0 = time.perf_counter(); np.empty_like(psi0).fill(0); touch = time.perf_counter() - t0
    print(f"{np.dtype(dtype).name}: 20 steps {chunk*1e3:.1f} ms, get_state {gs*1e3:.1f}/{gs2*1e3:.1f} ms, "
          f"fetch {fe*1e3:.1f} ms, numpy alloc+fill {touch*1e3:.1f} ms, threads {nl.get_num_threads()}")
    for frames in (1, 100):
        t0 = time.perf_counter(); sim.run(sim.t + 2000 * sim.dt, frames=frames)
        print(f"   run 2000 steps, {frames} frames: {time.perf_counter()-t0:.3f} s")
