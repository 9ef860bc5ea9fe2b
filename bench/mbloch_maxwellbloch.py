"""The Lambda benchmark of bench/mbloch_open.py side by side with the Python
package ``maxwellbloch`` (now published as ``clerq``; the name
``maxwellbloch`` imports it), on one ``maxwellbloch`` JSON input that both
read.

The problem: a Lambda system (levels 0, 2 ground, 1 excited), a weak
Gaussian probe on 0-1, a strong square coupling field on 1-2 that
counter-propagates (``factor_doppler_shift = -1``), decay from 1 to both
ground levels (rate 1, branching 1/2 each), Doppler classes of width 2 on
an even grid over [-6, 6] that holds 0 (so ``maxwellbloch`` adds no class),
``--nt`` time points, ``--z-steps`` z steps, interaction strength 10 on
both fields.  nlsepy reads the file through ``python -m nlsepy mbloch``'s
mapping (docs/models/mbloch.md, "From maxwellbloch"), which takes the field
equation of maxwellbloch 0.11, dOmega/dz = i N g rho; clerq 0.15 (what
``pip install maxwellbloch`` gives now) doubled it, so its run gets the
strengths halved: the same physics in both.

``maxwellbloch`` solves each class with a QuTiP master-equation solve over
the time grid, one per class and z step, so its time is linear in classes x
z steps (checked on two sizes here); a run of the full size takes hours,
so it runs at ``--mb-classes`` x ``--mb-z-steps`` and its rate per class
and z step is extrapolated (``--mb-full`` runs it whole).  Both solve the
small size, and their probe transmission (output pulse area over input
area) is compared; nlsepy also runs the full size on each backend asked.

    python bench/mbloch_maxwellbloch.py [--classes 1025] [--z-steps 1000]
        [--nt 2048] [--mb-classes 9] [--mb-z-steps 40] [--backends cpu,cuda]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

import nlsepy as nl
from nlsepy.mbloch.config import build_model, read_config

from _common import format_table, machine_info, write_json

COLUMNS = [("tool", "tool", "{}"), ("backend", "backend", "{}"), ("classes", "classes", "{}"),
           ("z_steps", "z steps", "{}"), ("seconds", "s", "{:.3f}"),
           ("per_class_z", "s per class and z step", "{:.3e}"),
           ("transmission", "probe area out/in", "{:.6f}")]


def problem(classes: int, z_steps: int, nt: int) -> Dict[str, Any]:
    """The maxwellbloch JSON input of the Lambda problem."""
    if classes < 3 or classes % 2 == 0:
        raise ValueError(f"classes = {classes}: an odd count of at least 3 (an even grid holding 0)")
    half = 1 / np.sqrt(2)
    return {
        "atom": {
            "num_states": 3,
            "decays": [{"channels": [[0, 1], [2, 1]], "rate": 1.0, "factors": [half, half]}],
            "fields": [
                {"coupled_levels": [[0, 1]], "label": "probe", "rabi_freq": 1.0e-3,
                 "rabi_freq_t_func": "gaussian",
                 "rabi_freq_t_args": {"ampl": 1.0, "centre": 0.0, "fwhm": 1.0}},
                {"coupled_levels": [[1, 2]], "label": "coupling", "detuning_positive": False,
                 "rabi_freq": 2.0, "factor_doppler_shift": -1.0, "rabi_freq_t_func": "square",
                 "rabi_freq_t_args": {"ampl": 1.0, "on": -3.0, "off": 11.0}},
            ],
        },
        "t_min": -2.0, "t_max": 10.0, "t_steps": nt - 1,
        "z_min": 0.0, "z_max": 1.0, "z_steps": z_steps, "z_steps_inner": 1,
        "interaction_strengths": [10.0, 10.0],
        "velocity_classes": {"thermal_delta_min": -6.0, "thermal_delta_max": 6.0,
                             "thermal_delta_steps": classes - 1, "thermal_width": 2.0},
        "savefile": "lambda_side_by_side",
    }


def write(folder: str, name: str, data: Dict[str, Any]) -> str:
    path = os.path.join(folder, name + ".json")
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
    return path


def run_nlsepy(path: str, backend: str, classes: int, z_steps: int) -> Dict[str, Any]:
    plan = read_config(path)
    mb = build_model(plan, backend)
    res = mb.run(plan.fields, **plan.run)
    probe = [int(k) for k, v in plan.labels.items() if v == "probe"]
    i = [int(m) for m in res.modes].index(probe[0])
    areas = res.areas()[:, i].real  # the file's field scale cancels in the ratio
    return dict(tool="nlsepy", backend=backend, classes=classes, z_steps=z_steps,
                seconds=res.seconds, per_class_z=res.seconds / (classes * z_steps),
                transmission=areas[-1] / areas[0])


def coupling_factor() -> float:
    """The factor of maxwellbloch's field equation over nlsepy's reading of
    the file: 2 from clerq 0.15 on (dOmega/dz = 2 i N g rho, its Bloch
    coupling Omega/2), 1 before (maxwellbloch 0.11: i N g rho), which
    nlsepy's mapping follows."""
    try:
        import clerq
    except ImportError:
        return 1.0
    major_minor = tuple(int(x) for x in clerq.__version__.split(".")[:2])
    return 2.0 if major_minor >= (0, 15) else 1.0


def run_maxwellbloch(data: Dict[str, Any], classes: int, z_steps: int) -> Dict[str, Any]:
    from maxwellbloch import mb_solve  # optional: pip install maxwellbloch
    data = dict(data, interaction_strengths=[g / coupling_factor()
                                             for g in data["interaction_strengths"]])
    with tempfile.TemporaryDirectory() as out:
        cwd = os.getcwd()
        os.chdir(out)  # it saves its solution beside the working folder
        try:
            mbs = mb_solve.MBSolve().from_json_str(json.dumps(data))
            t0 = time.perf_counter()
            solve = getattr(mbs, "solve", None) or mbs.mbsolve
            omegas, _ = solve(recalc=True)
            seconds = time.perf_counter() - t0
        finally:
            os.chdir(cwd)
    t = np.asarray(mbs.tlist)
    area = [np.trapezoid(np.asarray(omegas[0][k]).real, t) for k in (0, -1)]
    return dict(tool="maxwellbloch", backend="cpu (QuTiP)", classes=classes, z_steps=z_steps,
                seconds=seconds, per_class_z=seconds / (classes * z_steps),
                transmission=area[1] / area[0])


def parse(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--classes", type=int, default=1025)
    p.add_argument("--z-steps", type=int, default=1000)
    p.add_argument("--nt", type=int, default=2048)
    p.add_argument("--mb-classes", type=int, default=9)
    p.add_argument("--mb-z-steps", type=int, default=40)
    p.add_argument("--mb-full", action="store_true", help="run maxwellbloch at the full size too")
    p.add_argument("--backends", default="cpu")
    p.add_argument("--json", default=None, metavar="PATH")
    return p.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> List[Dict[str, Any]]:
    a = parse(argv)
    backends = [b for b in a.backends.split(",") if b in nl.backends("MaxwellBloch")]
    print("Lambda system, nlsepy and maxwellbloch on one maxwellbloch JSON input")
    info = machine_info(",".join(backends), threads=nl.get_num_threads())
    for k, v in info.items():
        print(f"  {k:20s} {v}")
    try:
        import maxwellbloch  # noqa: F401
        have_mb = True
    except ImportError:
        have_mb = False
        print("maxwellbloch is not installed (pip install maxwellbloch): nlsepy rows only")
    rows: List[Dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as folder:
        small = problem(a.mb_classes, a.mb_z_steps, a.nt)
        full = problem(a.classes, a.z_steps, a.nt)
        small_path, full_path = write(folder, "small", small), write(folder, "full", full)
        if have_mb:
            half = problem(a.mb_classes, max(1, a.mb_z_steps // 2), a.nt)
            rows.append(run_maxwellbloch(half, a.mb_classes, max(1, a.mb_z_steps // 2)))
            rows.append(run_maxwellbloch(small, a.mb_classes, a.mb_z_steps))
        for b in backends:
            rows.append(run_nlsepy(small_path, b, a.mb_classes, a.mb_z_steps))
        if have_mb and a.mb_full:
            rows.append(run_maxwellbloch(full, a.classes, a.z_steps))
        for b in backends:
            rows.append(run_nlsepy(full_path, b, a.classes, a.z_steps))
    print(format_table(rows, COLUMNS))
    mb_rows = [r for r in rows if r["tool"] == "maxwellbloch"]
    if mb_rows:
        rate = mb_rows[-1]["per_class_z"]
        est = rate * a.classes * a.z_steps
        print(f"maxwellbloch at the full size ({a.classes} classes x {a.z_steps} z steps), from its "
              f"rate: {est:.0f} s ({est / 3600:.1f} h)")
        for r in rows:
            if r["tool"] == "nlsepy" and r["classes"] == a.classes:
                print(f"  nlsepy {r['backend']}: {r['seconds']:.1f} s, {est / r['seconds']:.0f}x faster")
        same = [r for r in rows if r["tool"] == "nlsepy" and r["classes"] == a.mb_classes]
        for r in same:
            d = abs(r["transmission"] - mb_rows[-1]["transmission"])
            print(f"  probe transmission at the small size: nlsepy {r['backend']} "
                  f"{r['transmission']:.6f}, maxwellbloch {mb_rows[-1]['transmission']:.6f} "
                  f"(difference {d:.1e})")
    write_json(a.json, {"header": info, "rows": rows})
    return rows


if __name__ == "__main__":
    main()
