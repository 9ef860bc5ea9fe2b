"""Benchmark of open Maxwell-Bloch systems (density matrices: decay,
dephasing, Doppler classes; docs/models/mbloch.md, "Open systems").

Two cases, each with a 2048-point time grid and 1000 z steps by default:

* ``lambda``: a Lambda system (g0, g1, e; probe g0-e in mode 0, a
  counter-propagating coupling g1-e in mode -1), decay from e to both
  ground levels, ground-state dephasing, 1024 Doppler velocity classes.
* ``d2``: the 87Rb D2 line's F = 2 (5 sublevels) to F' = 1, 2, 3
  (3 + 5 + 7 = 15 sublevels) in pi light, with the couplings of
  ``nl.mbloch.hyperfine`` (12 transitions m_F -> m_F; the excited sublevels
  ordered by m_F', so the couplings lie in a band of modes, every mode
  carrying the same field), decay from every excited sublevel
  in the ratios of its squared couplings, 256 Doppler classes.

Flop model of one atom step (what the CPU kernels execute; a complex
multiply-add counts 8, as in bench/mbloch.py): per RK4 stage the product
M = V y of the coupling band with the density matrix (2 K n complex
multiply-adds, K band entries), then the elements i <= j of the Hermitian
k = i ((E_i - E_j) y + M - M^dagger) - damping + feeds (18 flops each,
8 more for the mirror element's combination, 4 per population feed):
16 K n + 9 n (n + 1) + 4 n (n - 1) + 4 n_decay per stage, four stages; the
polarisation adds 4 K and the trace n.  K counts the band's entries (zeros
of F inside the band included, as the kernels visit them).  The CUDA kernel
sums both band rows for each element i <= j instead of forming M (16 K
(n + 1) per stage, 1/n more).

Bytes model of one z step (global memory; the matrices stay in a block's
shared memory or a thread's cache for the whole time grid): every block
reads the fields (16 N_F bytes a time step) and writes its partial
polarisation (2 x itemsize x N_F), the reduction reads every partial and
writes P (16 N_F); the initial states and shifts are read once a z step.
The kernels are compute bound (a few flops per byte would be memory bound;
here thousands are), so the table reports the fraction of the FP64 (FP32)
peak, and the achieved bytes against the copy bandwidth measured in the
same run for completeness.  ``--numpy-z-steps`` times the NumPy statement
of the same atom solve (nlsepy.reference.mbloch_open) beside it.

Usage::

    python bench/mbloch_open.py [--cases lambda,d2] [--backends cpu,cuda]
        [--dtypes float64,float32] [--nt 2048] [--z-steps 1000]
        [--lambda-classes 1024] [--d2-classes 256] [--json PATH]

On 16 host cores the 1000 z steps of the CPU run take minutes; ``--z-steps``
shortens them (the rates are per atom step), or ``--cpu-z-steps`` the CPU's
alone.  The speed-up is the ratio of the seconds a z step (each run's
whole time, Euler start and solver set-up included, over its z steps).
The CPU takes its z steps one after the other at a constant cost each,
while CUDA runs several z steps a launch (the z pipeline), which pays only
when there are many: compare CUDA at the full count.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

import nlsepy as nl
from nlsepy.reference import mbloch as ref
from nlsepy.reference.mbloch_open import lindblad_atoms

from _common import copy_bandwidth, machine_info, report

COLUMNS = [("case", "case", "{}"), ("backend", "backend", "{}"), ("dtype", "dtype", "{}"),
           ("atoms", "atoms", "{}"), ("z_steps", "z steps", "{}"), ("slices", "z slices a launch", "{}"),
           ("seconds", "s (run)", "{:.3f}"),
           ("per_step_ms", "ms per z step", "{:.2f}"), ("atom_steps", "atom steps/s", "{:.3e}"),
           ("gflops", "GFLOP/s", "{:.1f}"), ("peak", "fraction of FP peak", "{:.3f}"),
           ("gbps", "GB/s", "{:.2f}"), ("copy", "fraction of copy bw", "{:.4f}"),
           ("speedup", "speedup over CPU", "{:.1f}"), ("trace_dev", "max |Tr rho - 1|", "{:.1e}")]


def parse(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", default="lambda,d2")
    p.add_argument("--backends", default="cpu,cuda")
    p.add_argument("--dtypes", default="float64,float32")
    p.add_argument("--nt", type=int, default=2048)
    p.add_argument("--z-steps", type=int, default=1000)
    p.add_argument("--cpu-z-steps", type=int, default=None,
                   help="z steps of the CPU runs (default: --z-steps); the speed-up is then "
                        "the ratio of the seconds a z step")
    p.add_argument("--lambda-classes", type=int, default=1024)
    p.add_argument("--d2-classes", type=int, default=256)
    p.add_argument("--numpy-z-steps", type=int, default=1,
                   help="atom solves of the NumPy reference timed beside (0: skip)")
    p.add_argument("--json", default=None, metavar="PATH")
    return p.parse_args(argv)


def lambda_case(a: argparse.Namespace) -> Dict[str, Any]:
    """The Lambda system with 1024 velocity classes."""
    h_t = 0.05
    t = ref.time_grid(h_t, a.nt)
    model = dict(n_g=2, n_e=1, modes=(-1, 0), F=np.array([[1.0], [1.0]]), h_t=h_t, n_t=a.nt,
                 line=("single", 0.0), beta=1.0, decay=[(1.0, 2, 0, 0.5), (1.0, 2, 1, 0.5)],
                 dephasing=[0.0, 0.001, 0.0],
                 doppler=nl.mbloch.Doppler(factors=[-1.0, 1.0], width=2.0,
                                           n_classes=a.lambda_classes))
    fields = {0: 0.05 * ref.gaussian_pulse(t, 5.0, 30.0, area=1.0), -1: np.full(a.nt, 1.0 + 0j)}
    return dict(model=model, fields0=fields, h_z=0.002)


def d2_case(a: argparse.Namespace) -> Dict[str, Any]:
    """The 87Rb D2 line's F = 2 -> F' = 1, 2, 3 in pi light: 5 + 15 sublevels
    with the couplings of :func:`nlsepy.mbloch.hyperfine`; each excited
    sublevel decays (rate 1) into the ground sublevels it couples to, in
    the ratios of the squared couplings."""
    hf = nl.mbloch.hyperfine("87Rb", "D2", F=2, F_prime=(1, 2, 3), polarisation="pi")
    kw = hf.model_kwargs()
    # the excited sublevels ordered by m_F' (then F'), so that the pi couplings lie in a narrow
    # band of modes n - m (hyperfine()'s F'-blocks would spread them over a wider band)
    order = sorted(range(len(hf.excited)), key=lambda n: (hf.excited[n][1], hf.excited[n][0]))
    F, n_g = np.asarray(kw["F"], dtype=float)[:, order], kw["n_g"]
    m_idx, n_idx = np.nonzero(F)
    lo, hi = int((n_idx - m_idx).min()), int((n_idx - m_idx).max())
    kw.update(F=F, modes=(lo, hi))
    h_t = 0.02
    t = ref.time_grid(h_t, a.nt)
    decay = [(1.0, n_g + n, m, F[m, n] ** 2 / (F[:, n] ** 2).sum())
             for n in range(F.shape[1]) for m in range(n_g) if F[m, n] != 0]
    model = dict(kw, h_t=h_t, n_t=a.nt, kappa_e=0.0, line=("single", 0.0), beta=1.0,
                 decay=decay, initial_state=np.r_[np.ones(n_g) / np.sqrt(n_g), np.zeros(F.shape[1])],
                 doppler=nl.mbloch.Doppler(factors=[1.0] * (hi - lo + 1), width=1.0,
                                           n_classes=a.d2_classes))
    pulse = ref.sech_pulse(t, 1.0, 8.0, area=2 * np.pi)
    return dict(model=model, fields0={l: pulse for l in range(lo, hi + 1)}, h_z=0.002)


def counts(mb: Any) -> Dict[str, float]:
    """Flops per atom step and bytes per z step of the models above."""
    n, K, nd = mb.n_levels, mb.couplings, int(mb._decay[0].size)
    flops = 4 * (16 * K * n + 9 * n * (n + 1) + 4 * n * (n - 1) + 4 * nd) + 4 * K + n
    return dict(flops=flops, n=n, K=K)


def bytes_per_z_step(mb: Any, backend: str) -> float:
    item = np.dtype(mb.dtype).itemsize // 2
    nf, nt = mb.n_modes, mb.n_t
    blocks = (-(-mb.n_atoms // max(1, 256 // mb.n_levels ** 2)) if backend == "cuda"
              else nl.get_num_threads())
    states = mb.n_atoms * (2 * item * mb.n_levels ** 2 + item * (mb.n_levels + 2))
    return blocks * nt * nf * (16 + 2 * item) + blocks * nt * nf * 2 * item + 16 * nt * nf + states


def run_one(case: str, kw: Dict[str, Any], backend: str, dtype: str, z_steps: int) -> Dict[str, Any]:
    mb = nl.MaxwellBloch(**kw["model"], backend=backend,
                         dtype=np.complex128 if dtype == "float64" else np.complex64)
    out = mb.run(kw["fields0"], h_z=kw["h_z"], n_z=z_steps, save_every=z_steps,
                 populations=False, euler_substeps=1)
    from nlsepy.mbloch import propagate  # the run's solver again, for its z slices a launch
    eps0 = propagate.check_run(mb, kw["fields0"], kw["h_z"], 1, 1, False, False, 1, None, None)[4]
    slices = propagate.make_solver(mb, eps0, kw["h_z"], 1).pipeline()
    return dict(mb=mb, seconds=out.seconds, kernel=out.kernel_seconds, trace_dev=out.norm_deviation,
                fields=out.fields[-1], slices=slices)


def numpy_solve(mb: Any, kw: Dict[str, Any]) -> float:
    """Seconds of one atom solve of the NumPy reference (all atoms)."""
    n, ng = mb.n_levels, mb.n_g
    E = np.zeros((mb.n_atoms, n))
    E[:, :ng] = mb.detunings[:, None] + np.arange(ng) * (mb.kappa_g - mb.delta)
    E[:, ng:] = np.arange(n - ng) * (mb.kappa_e - mb.delta)
    if mb.level_shifts is not None:
        E += mb.level_shifts
    src, dst, rate = mb._decay
    psi = mb.initial_state
    rho0 = psi[:, :, None] * psi[:, None, :].conj()
    t0 = time.perf_counter()
    lindblad_atoms(mb.F, mb.modes, E, mb.weights, rho0, mb.input_fields(kw["fields0"]), mb.h_t,
                   mb.beta, list(zip(rate, src, dst)), mb.dephasing)
    return time.perf_counter() - t0


def gpu_peak() -> Dict[str, Optional[float]]:
    from mbloch import gpu_peak as peak  # bench/mbloch.py's FP64 / FP32 lanes x clock
    return peak()


def main(argv: Optional[Sequence[str]] = None) -> List[Dict[str, Any]]:
    a = parse(argv)
    threads = os.cpu_count() or 1
    nl.set_num_threads(threads)
    info = machine_info(a.backends, threads=threads)
    print("nlsepy MaxwellBloch open systems benchmark")
    for k, v in info.items():
        print(f"  {k:20s} {v}")
    host_copy = copy_bandwidth(threads)
    dev_copy = None
    peak = {"fp64": None, "fp32": None}
    if "cuda" in a.backends.split(",") and "cuda" in nl.backends("MaxwellBloch"):
        from nlsepy import _cuda
        dev_copy = _cuda.copy_bandwidth(1 << 30, 20) * 1e9
        peak = gpu_peak()
    print(f"copy bandwidth: host {host_copy / 1e9:.1f} GB/s"
          + (f", device {dev_copy / 1e9:.1f} GB/s" if dev_copy else ""), flush=True)
    rows: List[Dict[str, Any]] = []
    for case in a.cases.split(","):
        kw = {"lambda": lambda_case, "d2": d2_case}[case](a)
        for dtype in a.dtypes.split(","):
            res: Dict[str, Dict[str, Any]] = {}
            for backend in a.backends.split(","):
                if backend not in nl.backends("MaxwellBloch"):
                    print(f"skip {backend}: not available")
                    continue
                nz = a.cpu_z_steps if backend == "cpu" and a.cpu_z_steps else a.z_steps
                r = res[backend] = run_one(case, kw, backend, dtype, nz)
                r["z_steps"] = nz
                mb, c = r["mb"], counts(r["mb"])
                solves = nz + 1
                atom_steps = mb.n_atoms * (mb.n_t - 1) * solves / r["seconds"]
                gfl = atom_steps * c["flops"] / 1e9
                bw = bytes_per_z_step(mb, backend) * solves / r["seconds"]
                pk = peak["fp64" if dtype == "float64" else "fp32"] if backend == "cuda" else None
                copy = dev_copy if backend == "cuda" else host_copy
                row = dict(case=case, backend=backend, dtype=dtype, atoms=mb.n_atoms,
                           z_steps=nz, slices=r["slices"], seconds=r["seconds"],
                           per_step_ms=1e3 * r["seconds"] / nz, atom_steps=atom_steps,
                           gflops=gfl, peak=gfl * 1e9 / pk if pk else None, gbps=bw / 1e9,
                           copy=bw / copy if copy else None, speedup=None,
                           trace_dev=r["trace_dev"], flops_per_atom_step=c["flops"],
                           couplings=c["K"], levels=c["n"])
                rows.append(row)
                print(f"{case} {backend} {dtype}: n = {c['n']}, K = {c['K']}, {c['flops']} flops "
                      f"per atom step, {mb.n_atoms} atoms: {r['seconds']:.3f} s, "
                      f"{atom_steps:.3e} atom steps/s, {gfl:.1f} GFLOP/s", flush=True)
            if "cpu" in res and "cuda" in res:
                cu, nz = res["cuda"], res["cpu"]["z_steps"]
                if cu["z_steps"] != nz:  # the fields compared at the CPU's last z
                    cu = run_one(case, kw, "cuda", dtype, nz)
                d = np.abs(res["cpu"]["fields"] - cu["fields"]).max() / \
                    np.abs(res["cpu"]["fields"]).max()
                sp = (res["cpu"]["seconds"] / nz) / (res["cuda"]["seconds"] / res["cuda"]["z_steps"])
                for row in rows:
                    if (row["case"], row["backend"], row["dtype"]) == (case, "cuda", dtype):
                        row["speedup"] = sp
                print(f"{case} {dtype}: CPU/CUDA fields agree to {d:.2e}; speedup {sp:.1f}x",
                      flush=True)
        if a.numpy_z_steps > 0 and "cpu" in a.backends.split(","):
            mb = nl.MaxwellBloch(**kw["model"], backend="cpu")
            sec = numpy_solve(mb, kw)
            rate = mb.n_atoms * (mb.n_t - 1) / sec
            rows.append(dict(case=case, backend="numpy", dtype="float64", atoms=mb.n_atoms,
                             z_steps=1, seconds=sec, per_step_ms=1e3 * sec, atom_steps=rate,
                             gflops=rate * counts(mb)["flops"] / 1e9))
            print(f"{case} numpy reference: {sec:.2f} s for one atom solve, {rate:.3e} atom "
                  f"steps/s", flush=True)
    return report(rows, COLUMNS, a.json, {"header": info, "peak": peak, "host_copy": host_copy,
                                          "device_copy": dev_copy})


if __name__ == "__main__":
    main()
