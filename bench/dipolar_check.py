"""Small CUDA split-step runs for compute-sanitizer and quick CPU/CUDA comparisons.

    compute-sanitizer --tool memcheck python bench/dipolar_check.py

Prints the largest relative difference of the state between the backends
after a few steps, per geometry, state kind and mode.
"""

import numpy as np

import nlsepy as nl

CASES = [("3d", (32, 24, 20), 0.4, (0.5, 1.0, 1.5)), ("2d-xy", (48, 40), 0.3, (0.5, 1.0, 1.5)),
         ("2d-xz", (40, 600), 0.05, (0.5, 1.0, 1.5)), ("1d-x", (4096,), 0.01, (0.5, 2.0, 2.0))]


def run(backend, geo, shape, h, trap, kind):
    gpe = nl.DipolarGPE(shape, h, 0.005, g=50.0, gdd=5.0, trap=trap, geometry=geo,
                        cutoff=5.0 if geo == "3d" else None, backend=backend)
    if kind != "real-state":
        x = gpe.coords[0].reshape((-1,) + (1,) * (gpe.ndim - 1))
        gpe.psi = gpe.psi * np.exp(0.5j * x)
    if kind == "real-time":
        gpe.real_time(3)
    else:
        gpe.imaginary_time(3)
    return gpe.psi


for geo, shape, h, trap in CASES:
    for kind in ("real-state", "complex-state", "real-time"):
        a = run("cpu", geo, shape, h, trap, kind)
        b = run("cuda", geo, shape, h, trap, kind)
        print(f"{geo:6s} {kind:14s} max |cuda - cpu| / max |cpu| = "
              f"{np.abs(a - b).max() / np.abs(a).max():.3e}", flush=True)
