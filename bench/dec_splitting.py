"""The vortex-splitting experiment of source 001, section 5.1 (Figs. 5a, 6).

The (lambda, g, kappa) = (1, 300, 10) stationary vortex is dynamically
unstable: the numerical error seeds its splitting.  Each grid is scaled to
the same arithmetic per unit of time (``nl.dec.grids.equal_cost_spacing``,
6e9 as in the seed), the domain is the cuboid of eq. 15, the leapfrog starts
from psi(0) and psi(-dt) of the stationary state (as the seed does), and
the run goes on until E(t) = 1 - |<Psi(0)|Psi(t)>| exceeds 0.01 (or
``--t-max``).  At that time the z = 0 cross-section of |psi|^2 is sampled
and its fold counted two ways: the density minima inside the condensate's
core region, and the strongest angular harmonic of the density on the ring
where the core was.

Usage::

    python bench/dec_splitting.py [--grids cubic,bcc,...] [--ops 6e9] [--t-max 150]
                                  [--backend cuda] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

import nlsepy as nl


def fold(sim: "nl.DecGPE", r_core: float, n: int = 161) -> Dict[str, Any]:
    """The fold of |psi|^2 at z = 0 around the former core: on rings of
    radius 0.6 .. 1.4 r_core, the density's strongest angular harmonic m
    (summed over the rings), and the number of density minima along the ring
    where that harmonic is strongest (the ring density kept to harmonics
    1-8 so that grid noise makes no minima)."""
    R = 1.5 * r_core
    phi = np.linspace(0, 2 * np.pi, 360, endpoint=False)
    best, spec_sum = None, np.zeros(8)
    for rr in np.linspace(0.6, 1.4, 9) * r_core:
        pts = np.stack([rr * np.cos(phi), rr * np.sin(phi)], axis=1)
        d = sim.density_at(np.column_stack([pts, np.zeros(len(pts))]))
        c = np.fft.rfft(d - d.mean())
        spec = np.abs(c[1:9])
        spec_sum += spec
        if best is None or spec.max() > best[0]:
            smooth = np.fft.irfft(np.concatenate([[0], c[1:9], np.zeros(len(c) - 9)]), len(d))
            minima = int(np.count_nonzero((smooth < np.roll(smooth, 1)) &
                                          (smooth < np.roll(smooth, -1))))
            best = (spec.max(), float(rr), minima)
    dens, _ = sim.density_on_grid((n, n), bounds=[(-R, R), (-R, R), (0.0, 0.0)])
    return dict(harmonic=int(np.argmax(spec_sum) + 1), minima=best[2], ring_radius=best[1],
                spectrum=[float(v) for v in spec_sum], section=dens.tolist())


def run_grid(grid: str, state: Any, box: np.ndarray, ops: float, t_max: float, every: float,
             backend: str) -> Dict[str, Any]:
    vmax = 0.5 * float(np.sum((box / 2) ** 2))
    h = nl.dec.grids.equal_cost_spacing(grid, box, ops, vmax)
    edge = np.asarray(nl.dec.block(grid).edge) * h
    blocks = tuple(int(b) for b in np.ceil(box / edge))
    sim = nl.DecGPE(grid, blocks=blocks, spacing=h, g=state.g, trap=(1.0, 1.0, state.lam),
                    backend=backend)
    sim.set_state(lambda p: state(p, 0.0), lambda p, t: state(p, t))
    psi0 = sim.psi
    ts, es = [0.0], [sim.overlap(psi0)]
    t0 = time.perf_counter()
    steps = max(1, int(round(every / sim.dt)))
    while sim.t < t_max:
        sim.step(steps)
        ts.append(sim.t)
        es.append(sim.overlap(psi0))
        if es[-1] > 0.01:
            break
    wall = time.perf_counter() - t0
    r_core = float(state.kappa / np.sqrt(2 * state.mu))  # kappa^2 / (2 rho^2) = mu
    out = dict(grid=grid, spacing=h, blocks=blocks, unknowns=sim.size, dt=sim.dt,
               mean_dual=float(nl.dec.block(grid).nbr_dual.mean() * h),
               t_split=float(sim.t) if es[-1] > 0.01 else None, t_end=float(sim.t),
               E_end=float(es[-1]), wall_s=wall, t=[float(v) for v in ts],
               E=[float(v) for v in es])
    out.update(fold(sim, r_core))
    return out


def main(argv: Optional[Sequence[str]] = None) -> List[Dict[str, Any]]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--grids", default=",".join(nl.dec.GRIDS))
    p.add_argument("--ops", type=float, default=6e9)
    p.add_argument("--t-max", type=float, default=150.0)
    p.add_argument("--every", type=float, default=0.25, help="E(t) sampling interval")
    p.add_argument("--backend", default="cuda")
    p.add_argument("--json")
    a = p.parse_args(argv)
    state = nl.examples.vortex_state(1.0, 300.0, 10)
    lo, hi = state.cuboid(1e-5)
    box = hi - lo
    print(f"vortex (1, 300, 10): mu = {state.mu:.6f}, cuboid {box.round(4)}")
    rows = []
    for g in a.grids.split(","):
        r = run_grid(g, state, box, a.ops, a.t_max, a.every, a.backend)
        print(f"{g:6} h={r['spacing']:.4f} unknowns={r['unknowns']:9d} dt={r['dt']:.3e} "
              f"t_split={r['t_split']} E_end={r['E_end']:.3g} minima={r['minima']} "
              f"harmonic={r['harmonic']} wall={r['wall_s']:.1f}s", flush=True)
        rows.append(r)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
