"""Tiny CUDA runs of every model, for compute-sanitizer (memcheck, racecheck).

    compute-sanitizer --tool memcheck --error-exitcode 9 python bench/cuda_sanitize.py --model dec
    bash bench/cuda_sanitize.sh            # every model under memcheck and racecheck

Each run is small (a few steps or iterations on a small grid) so that the
instrumented kernels finish in seconds, and goes through every kernel
family of the model's CUDA backend (both precisions, the model's variants).
"""

import argparse
import os
import warnings

import numpy as np

import nlsepy as nl


def fd() -> None:
    for dtype in (np.complex64, np.complex128):
        for ndim, n in ((1, 64), (2, 24), (3, 12)):
            for scheme in ("cd", "2shoc"):
                for bc in ("periodic", "msd"):
                    psi0 = np.ones((n,) * ndim, complex) * 0.5
                    sim = nl.NLSE(psi0, 0.2, scheme=scheme, bc=bc, dtype=dtype, backend="cuda")
                    sim.step(3)
                    sim.run(sim.t + 2 * sim.dt, frames=2)
                    sim.norm(), sim.energy()
        # the streamed fused step long enough to march in its steady part (3D
        # 2SHOC: two passes, on pairs of points along an even contiguous axis
        # in complex64, on points along an odd one)
        for scheme, shape in (("cd", (48, 20, 36)), ("2shoc", (48, 20, 36)),
                              ("2shoc", (48, 20, 35))):
            for V in (None, np.linspace(0.0, 0.3, np.prod(shape)).reshape(shape)):
                psi0 = np.ones(shape, complex) * 0.5
                sim = nl.NLSE(psi0, 0.2, V=V, scheme=scheme, bc="periodic", dtype=dtype,
                              backend="cuda", fused=True)
                sim.step(2)


def dipolar() -> None:
    cases = [("3d", (12, 10, 8), 0.5), ("2d-xy", (16, 12), 0.4), ("2d-xz", (12, 40), 0.1), ("1d-x", (64,), 0.2)]
    for dtype in (np.complex64, np.complex128):
        for geo, shape, h in cases:
            gpe = nl.DipolarGPE(shape, h, 0.005, g=20.0, gdd=5.0, geometry=geo, dtype=dtype,
                                backend="cuda")
            gpe.imaginary_time(2)
            x = gpe.coords[0].reshape((-1,) + (1,) * (gpe.ndim - 1))
            gpe.psi = gpe.psi * np.exp(0.5j * x)
            gpe.real_time(2)
            gpe.observables()


def magnet() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for dtype in (np.float32, np.float64):
            mag = nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.5, 0.125, dtype=dtype, backend="cuda")
            for method in ("jacobi", "gauss-seidel", "sor", "rbsor", "multigrid", "mg-cg"):
                mag.solve(method, max_iter=20, tol=1e-12)


def mbloch() -> None:
    for dtype in (np.complex64, np.complex128):
        for n_g, n_e in ((1, 1), (2, 3)):
            F = None if n_g == n_e == 1 else nl.mbloch.franck_condon(n_g, n_e, 0.5)
            mb = nl.MaxwellBloch(n_g, n_e, F=F, h_t=0.05, n_t=64, n_atoms=64, dtype=dtype,
                                 backend="cuda")
            f0 = np.zeros((64, mb.n_modes), complex)
            f0[16:32] = 0.3
            mb.run(f0, 0.01, 4)


def dec() -> None:
    # the marching grids also with rings of 4 and 6 planes forced (chunks of
    # 7 layers, longer than the planes copied ahead), BCC on 3 x 2 tiles in
    # bands of 2 tile columns and chunks of 3 layers, C15 also in the lean
    # rows and the plain loop
    small, wide = (3, 3, 7), (20, 9, 7)
    runs = [(g, {}, small) for g in ("cubic", "fcc", "bcc", "a15", "c15")]
    runs += [(g, {"NLSEPY_DEC_MARCH_RING": r}, small) for g in ("cubic", "fcc") for r in ("4", "6")]
    runs += [("bcc", {"NLSEPY_DEC_MARCH_BAND": "2", "NLSEPY_DEC_MARCH_CHUNKS": "3"}, wide)]
    runs += [("c15", {"NLSEPY_DEC_KERNEL": k}, small) for k in ("23", "0")]
    for dtype in (np.complex64, np.complex128):
        for grid, env, blocks in runs:
            for bc in ("zero", "periodic"):
                os.environ.update(env)
                try:
                    sim = nl.DecGPE(grid, blocks, trap=1.0, g=2.0, bc=bc, dtype=dtype,
                                    backend="cuda")
                finally:
                    for key in env:
                        os.environ.pop(key, None)
                sim.psi = np.exp(-0.2 * (sim.positions ** 2).sum(1))
                sim.imaginary_time(2)
                sim.step(3)
                sim.psi_prev, sim.norm(), sim.energy(), sim.apply(sim.psi)


MODELS = {"fd": fd, "dipolar": dipolar, "magnet": magnet, "mbloch": mbloch, "dec": dec}

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="all", choices=["all", *MODELS])
    args = ap.parse_args()
    for name, fn in MODELS.items():
        if args.model in ("all", name):
            fn()
            print(f"{name}: done", flush=True)
