import statistics, time, numpy as np, nlsepy as nl
from nlsepy import _cuda
copy = _cuda.copy_bandwidth(1 << 30, 20)
for shape in ((256,)*3, (4096, 4096)):
  for dtype in (np.complex64, np.complex128):
    psi0 = (np.ones(shape) * np.exp(0.1j)).astype(dtype)
    for scheme in ("cd", "2shoc"):
        sim = nl.NLSE(psi0, 0.5, scheme=scheme, bc="periodic", dtype=dtype, backend="cuda")
        sim.step(50); ts = []
        for _ in range(5):
            t0 = time.perf_counter(); sim.step(200); ts.append((time.perf_counter() - t0) / 200)
        t = statistics.median(ts)
        print(shape, np.dtype(dtype).name, scheme, f"{t*1e3:.3f} ms fraction {sim.bytes_per_step()/t/1e9/copy:.2f}")
