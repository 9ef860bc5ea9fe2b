"""Runs the benchmark problem of bench/mbloch.py for a few z steps (for ncu)."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import nlsepy as nl  # noqa: E402
import mbloch  # noqa: E402

a = mbloch.parse(["--z-steps", "7"])
kw = mbloch.problem(a)
dt = np.complex64 if os.environ.get("MB_DTYPE", "float32") == "float32" else np.complex128
mb = nl.MaxwellBloch(**kw["model"], dtype=dt, backend="cuda")
r = mb.run(kw["fields0"], h_z=kw["h_z"], n_z=int(os.environ.get("MB_NZ", "7")), save_every=7,
           populations=False, euler_substeps=1)
print("seconds", r.seconds)
