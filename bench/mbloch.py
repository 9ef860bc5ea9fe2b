"""Benchmark of the Maxwell-Bloch solver: source 004's third test problem.

N_F = 19 modes (l = -9 .. 9), N_v = 32 vibrational levels in each manifold
(n_g = n_e = 32, Franck-Condon couplings of displaced oscillators), an
inhomogeneously broadened ensemble of N_Delta = 1024 atoms, a 2000-point
time grid and 100 z steps (algorithm 1; the first step is the Euler start
with ``--euler-substeps`` atom solves).  The CPU backend runs on every core
of the machine (``nl.set_num_threads(os.cpu_count())``) and the CUDA
backend beside it in the same process, in double and in float; source 004
reached 10x (double) and 20x (float) over 8 CPU threads with a GTX 580.

Flop model of one RK4 atom step (what the kernels execute, counting a
complex multiply-add as 8 flops, a real-by-complex product as 2):
per stage the band of eq. 4 is applied twice (C to the ground amplitudes,
C^dagger to the excited ones), 2 K complex multiply-adds with K nonzero
couplings, plus 12 flops per level (diagonal term, the factor i h, the next
stage vector and the RK4 sum), i.e. 16 K + 12 N per stage for N levels;
4 stages and the final update with the norm (10 N) give 64 K + 58 N;
the polarisation of eq. 6 adds 8 K.  For the test problem K = 518,
N = 64: 41 008 flops per atom step.  The forming of the coupling
coefficients (once per time step for a block of atoms) is not counted.

The GPU's peak is the number of SMs x FP64 (FP32) lanes per SM x 2 x the
maximum SM clock (64 and 128 lanes per SM on sm_90, 32 and 64 on sm_80).
Where both halves of the level set have at most 32 levels the CUDA backend
runs its tensor-core kernel (docs/ARCHITECTURE.md): it multiplies dense
16-level tiles (L = 32 here), 4 stages x 2 halves x L^2 complex
multiply-adds plus L^2 for the polarisation, 73 728 tensor-core flops per
atom step for the test problem.  In double they run on the FP64 tensor
cores, whose peak is twice the FP64 lanes' on sm_80 and sm_90; in float
each real product is three TF32 products (split operands), 221 184 flops
per atom step, against the dense TF32 peak (1024 flops per clock per SM on
sm_80, 2048 on sm_90; the mma.sync instructions used reach a part of it on
sm_90).  The "fraction of tensor peak" column reports that fraction.

Usage::

    python bench/mbloch.py [--backends cpu,cuda] [--dtypes float64,float32]
                           [--atoms 1024] [--nt 2000] [--z-steps 100] [--repeat 1]
                           [--json PATH]
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

import nlsepy as nl
from nlsepy.reference import mbloch as ref

from _common import cupy_or_none, machine_info, report, run_cmd

COLUMNS = [("backend", "backend", "{}"), ("dtype", "dtype", "{}"), ("threads", "CPU threads", "{}"),
           ("z_steps", "z steps", "{}"), ("seconds", "s (run)", "{:.3f}"),
           ("per_step_ms", "ms per z step", "{:.2f}"),
           ("atom_steps", "atom steps/s", "{:.3e}"), ("gflops", "GFLOP/s", "{:.1f}"),
           ("peak", "fraction of GPU peak", "{:.3f}"), ("speedup", "speedup over CPU", "{:.1f}"),
           ("tc_peak", "fraction of tensor peak", "{:.3f}"),
           ("norm_dev", "max ||psi|^2-1|", "{:.1e}")]


def parse(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backends", default="cpu,cuda")
    p.add_argument("--dtypes", default="float64,float32")
    p.add_argument("--atoms", type=int, default=1024)
    p.add_argument("--levels", type=int, default=32, help="N_v = n_g = n_e")
    p.add_argument("--modes", type=int, default=19, help="N_F (odd: l = -(N_F-1)/2 ..)")
    p.add_argument("--nt", type=int, default=2000)
    p.add_argument("--z-steps", type=int, default=100)
    p.add_argument("--euler-substeps", type=int, default=8)
    p.add_argument("--repeat", type=int, default=1,
                   help="runs per backend and dtype; the table shows the median (the CPU runs of "
                        "one machine move by 10-30%% between runs)")
    p.add_argument("--numpy-z-steps", type=int, default=1,
                   help="z steps of the NumPy reference (nlsepy.reference.mbloch) timed beside; 0: skip")
    p.add_argument("--json", default=None, metavar="PATH")
    return p.parse_args(argv)


def problem(a: argparse.Namespace) -> Dict[str, Any]:
    """The test problem: constructor arguments of nl.MaxwellBloch and the input fields."""
    nv, nf = a.levels, a.modes
    lmax = (nf - 1) // 2
    h_t = 0.01
    t = ref.time_grid(h_t, a.nt)
    fields = np.zeros((a.nt, nf), complex)
    fields[:, lmax] = ref.sech_pulse(t, 0.5, 5.0, area=2 * np.pi)      # l = 0
    for q in range(nf):
        if q != lmax:
            fields[:, q] = ref.sech_pulse(t, 0.5, 5.0, amplitude=0.02 / (1 + abs(q - lmax)))
    model = dict(n_g=nv, n_e=nv, modes=(-lmax, nf - 1 - lmax), F=ref.franck_condon(nv, nv, 1.5),
                 h_t=h_t, n_t=a.nt, kappa_g=1.0, kappa_e=0.95, delta=1.0,
                 line=ref.gaussian_line(a.atoms, 2.0), beta=1.0)
    return dict(model=model, fields0=fields, h_z=0.01)


def couplings(kw: Dict[str, Any]) -> int:
    m = kw["model"]
    n = np.arange(m["n_e"])[:, None] - np.arange(m["n_g"])[None, :]
    return int(((n >= m["modes"][0]) & (n <= m["modes"][1])).sum())


def flops_per_atom_step(kw: Dict[str, Any]) -> int:
    K, N = couplings(kw), kw["model"]["n_g"] + kw["model"]["n_e"]
    return 64 * K + 58 * N + 8 * K


def tc_flops_per_atom_step(kw: Dict[str, Any]) -> Optional[int]:
    """Tensor-core flops of one atom step of the CUDA tensor-core kernel
    (dense 16-level tiles), or None where it does not run."""
    n = max(kw["model"]["n_g"], kw["model"]["n_e"])
    if n > 32:
        return None
    L = 16 * ((n + 15) // 16)
    return 4 * 2 * L * L * 8 + L * L * 8


def gpu_peak() -> Dict[str, Optional[float]]:
    """FP64 and FP32 peak in flop/s from the SM count, the arch and the max clock."""
    cp = cupy_or_none()
    out: Dict[str, Optional[float]] = {"fp64": None, "fp32": None, "fp64_tc": None, "tf32_tc": None,
                                       "sms": None, "mhz": None}
    if cp is None:
        return out
    dev = cp.cuda.Device(0)
    sms = dev.attributes["MultiProcessorCount"]
    cc = dev.compute_capability
    smi = run_cmd(["nvidia-smi", "--query-gpu=clocks.max.sm", "--format=csv,noheader,nounits"])
    mhz = float(smi.split()[0]) if smi else None
    lanes = {"80": (32, 64), "90": (64, 128)}.get(cc)
    out.update(sms=sms, mhz=mhz)
    if lanes and mhz:
        out["fp64"] = sms * lanes[0] * 2 * mhz * 1e6
        out["fp32"] = sms * lanes[1] * 2 * mhz * 1e6
        out["fp64_tc"] = 2 * out["fp64"]
        out["tf32_tc"] = sms * {"80": 1024, "90": 2048}[cc] * mhz * 1e6
    return out


def tensor_fraction(atom_steps: float, tcf: Optional[int], dtype: str,
                    peak: Dict[str, Optional[float]]) -> Optional[float]:
    """The tensor-core kernel's rate over its tensor peak: FP64 in double,
    TF32 with three products per real product in float (NLSEPY_MBLOCH_KERNEL=tc64
    runs float in FP64 too; simt: no tensor cores)."""
    kern = os.environ.get("NLSEPY_MBLOCH_KERNEL", "tc")
    if not tcf or kern == "simt":
        return None
    if dtype == "float64" or kern == "tc64":
        return atom_steps * tcf / peak["fp64_tc"] if peak["fp64_tc"] else None
    return atom_steps * 3 * tcf / peak["tf32_tc"] if peak["tf32_tc"] else None


def pipeline_depth(mb: Any, kw: Dict[str, Any], euler_substeps: int) -> int:
    """z steps one launch of the solver's kernel holds (1 on the CPU)."""
    core = mb._core
    s = core.Mbloch(mb.n_g, mb.n_e, mb.modes[0], mb.modes[1], mb.F, mb.detunings, mb.weights,
                mb.initial_state, np.ascontiguousarray(kw["fields0"], dtype=complex), mb.h_t, kw["h_z"],
                mb.beta, mb.kappa_g, mb.kappa_e, mb.delta, euler_substeps,
                core.COMPLEX64 if mb.dtype == np.complex64 else core.COMPLEX128)
    return int(s.pipeline())


def run_one(backend: str, dtype: str, kw: Dict[str, Any], z_steps: int,
            euler_substeps: int, repeat: int = 1) -> Dict[str, Any]:
    """`repeat` runs of the problem; seconds and solver seconds are the
    medians, every run's seconds kept in ``all_seconds``."""
    mb = nl.MaxwellBloch(**kw["model"], dtype=np.complex128 if dtype == "float64" else np.complex64,
                         backend=backend)
    runs = [mb.run(kw["fields0"], h_z=kw["h_z"], n_z=z_steps, save_every=z_steps, populations=False,
                   euler_substeps=euler_substeps) for _ in range(max(1, repeat))]
    out = runs[-1]
    return dict(pipeline=pipeline_depth(mb, kw, euler_substeps),
                seconds=float(np.median([r.seconds for r in runs])),
                kernel=float(np.median([r.kernel_seconds for r in runs])),
                all_seconds=[r.seconds for r in runs], norm_dev=out.norm_deviation,
                fields=out.fields[-1])


def run_numpy(kw: Dict[str, Any], z_steps: int) -> Dict[str, Any]:
    """The straightforward NumPy statement of the same scheme (vectorised over atoms)."""
    m = kw["model"]
    det, w = m["line"]
    model = ref.MaxwellBlochModel(m["n_g"], m["n_e"], m["modes"], m["F"], det, w, m["beta"],
                                  m["kappa_g"], m["kappa_e"], m["delta"])
    t0 = time.perf_counter()
    r = ref.solve(model, kw["fields0"], m["h_t"], kw["h_z"], z_steps, euler_substeps=1)
    return dict(seconds=time.perf_counter() - t0, solves=z_steps + 1, norm_dev=r.norm_deviation)


def main(argv: Optional[Sequence[str]] = None) -> List[Dict[str, Any]]:
    a = parse(argv)
    threads = os.cpu_count() or 1
    nl.set_num_threads(threads)
    kw = problem(a)
    fl = flops_per_atom_step(kw)
    tcf = tc_flops_per_atom_step(kw)
    peak = gpu_peak()
    info = machine_info(",".join(a.backends.split(",")), threads=threads)
    print("nlsepy MaxwellBloch benchmark (source 004, third test problem)")
    for k, v in info.items():
        print(f"  {k:20s} {v}")
    tf = {k: "n/a" if peak[k] is None else f"{peak[k] / 1e12:.2f}" for k in ("fp64", "fp32")}
    print(f"N_F = {a.modes}, n_g = n_e = {a.levels}, {couplings(kw)} couplings, N_Delta = {a.atoms}, "
          f"N_t = {a.nt}, {a.z_steps} z steps; {fl} flops per atom step; GPU peak FP64 "
          f"{tf['fp64']} TFLOP/s, FP32 {tf['fp32']} TFLOP/s ({peak['sms']} SMs, {peak['mhz']} MHz); "
          f"tensor-core kernel: {tcf} flops per atom step",
          flush=True)
    # atom solves: euler_substeps for the Euler start, one per later z step,
    # one at the last z (its populations and the norm monitor)
    solves = a.z_steps + a.euler_substeps
    rows: List[Dict[str, Any]] = []
    results: Dict[Any, Dict[str, Any]] = {}
    for dtype in a.dtypes.split(","):
        for backend in a.backends.split(","):
            if backend not in nl.backends("MaxwellBloch"):
                print(f"skip {backend}: not available")
                continue
            r = run_one(backend, dtype, kw, a.z_steps, a.euler_substeps, a.repeat)
            results[(backend, dtype)] = r
            atom_steps = a.atoms * (a.nt - 1) * solves / r["seconds"]
            gfl = atom_steps * fl / 1e9
            pk = peak["fp64" if dtype == "float64" else "fp32"]
            row = dict(backend=backend, dtype=dtype, threads=threads if backend == "cpu" else "",
                       z_steps=a.z_steps, seconds=r["seconds"], per_step_ms=1e3 * r["seconds"] / a.z_steps,
                       atom_steps=atom_steps, gflops=gfl,
                       peak=(gfl * 1e9 / pk) if (backend == "cuda" and pk) else None,
                       speedup=None, norm_dev=r["norm_dev"], kernel=r["kernel"], pipeline=r["pipeline"],
                       all_seconds=r["all_seconds"],
                       tc_peak=tensor_fraction(atom_steps, tcf, dtype, peak) if backend == "cuda" else None)
            rows.append(row)
            print(f"{backend} {dtype}: {r['seconds']:.3f} s ({r['kernel']:.3f} s in the solver), "
                  f"{1e3 * r['seconds'] / a.z_steps:.2f} ms per z step, "
                  f"{atom_steps:.3e} atom steps/s, {gfl:.1f} GFLOP/s, {r['pipeline']} z step(s) a launch"
                  + (f"; median of {len(r['all_seconds'])} runs: "
                     + ", ".join(f"{x:.3f}" for x in r["all_seconds"]) if a.repeat > 1 else ""),
                  flush=True)
        if ("cpu", dtype) in results and ("cuda", dtype) in results:
            c, g = results[("cpu", dtype)], results[("cuda", dtype)]
            for row in rows:
                if row["backend"] == "cuda" and row["dtype"] == dtype:
                    row["speedup"] = c["seconds"] / g["seconds"]
            d = np.abs(c["fields"] - g["fields"]).max() / np.abs(c["fields"]).max()
            print(f"{dtype}: CPU/CUDA fields agree to {d:.2e} (max abs diff / max abs) at z = "
                  f"{a.z_steps * kw['h_z']:g}; speedup {c['seconds'] / g['seconds']:.1f}x", flush=True)
    if a.numpy_z_steps > 0:
        r = run_numpy(kw, a.numpy_z_steps)
        atom_steps = a.atoms * (a.nt - 1) * r["solves"] / r["seconds"]
        rows.append(dict(backend="numpy", dtype="float64", threads=threads, z_steps=a.numpy_z_steps,
                         seconds=r["seconds"], per_step_ms=1e3 * r["seconds"] / a.numpy_z_steps,
                         atom_steps=atom_steps, gflops=atom_steps * fl / 1e9, peak=None,
                         speedup=None, norm_dev=r["norm_dev"]))
        print(f"numpy reference: {r['seconds']:.2f} s for {a.numpy_z_steps} z step(s) "
              f"({r['solves']} atom solves), {atom_steps:.3e} atom steps/s", flush=True)
        for row in rows:
            if row["backend"] != "numpy" and row["dtype"] == "float64":
                print(f"  {row['backend']} float64 is {row['atom_steps'] / atom_steps:.1f}x the NumPy "
                      f"reference")
    return report(rows, COLUMNS, a.json, {"header": info, "peak": peak, "flops_per_atom_step": fl,
                                          "tc_flops_per_atom_step": tcf})


if __name__ == "__main__":
    main()
