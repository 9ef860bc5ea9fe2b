"""The amplitude path of nl.MaxwellBloch bit for bit between two builds.

``python bench/mbloch_bits.py save FILE`` runs a two-level and a
multi-level, multi-mode case (CPU, complex128 and complex64: fields and
populations) and saves the arrays; ``python bench/mbloch_bits.py compare
FILE`` runs them again with the build imported and checks every array with
``==`` (not a tolerance).  Used when the density-matrix path of open
systems was added beside the amplitude path: run ``save`` with the build
before a change and ``compare`` with the build after it, on one machine
(the CPU kernels are compiled per instruction set, so the bits are those of
one machine).
"""

import sys

import numpy as np

import nlsepy as nl


def runs() -> dict:
    out = {}
    for dt in (np.complex128, np.complex64):
        name = np.dtype(dt).name
        mb = nl.MaxwellBloch(h_t=0.05, n_t=301, line=("gaussian", 1.0), n_atoms=37, dtype=dt,
                             backend="cpu")
        r = mb.run(nl.mbloch.sech_pulse(mb.t, 1.0, 6.0, area=2 * np.pi), h_z=0.1, n_z=6,
                   save_every=2)
        out[f"two_{name}_f"], out[f"two_{name}_p"] = r.fields, r.populations
        F = nl.mbloch.franck_condon(4, 5, 0.7)
        mb = nl.MaxwellBloch(4, 5, (-2, 2), F, h_t=0.04, n_t=200, kappa_g=0.3, kappa_e=0.2,
                             delta=0.1, line=("lorentzian", 0.5), n_atoms=29, dtype=dt,
                             backend="cpu")
        r = mb.run({0: nl.mbloch.gaussian_pulse(mb.t, 1.0, 3.0, area=3.0),
                    1: 0.3 * nl.mbloch.gaussian_pulse(mb.t, 1.0, 3.0, area=1.0)},
                   h_z=0.05, n_z=5)
        out[f"multi_{name}_f"], out[f"multi_{name}_p"] = r.fields, r.populations
    return out


def main() -> int:
    if len(sys.argv) != 3 or sys.argv[1] not in ("save", "compare"):
        print(__doc__)
        return 2
    got = runs()
    if sys.argv[1] == "save":
        np.savez(sys.argv[2], **got)
        print(f"saved {len(got)} arrays to {sys.argv[2]}")
        return 0
    ref = np.load(sys.argv[2])
    bad = [k for k in ref.files if not np.array_equal(ref[k], got[k])]
    for k in ref.files:
        print(f"{k:22s} {ref[k].shape}  {'same bits' if k not in bad else 'DIFFERENT'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
