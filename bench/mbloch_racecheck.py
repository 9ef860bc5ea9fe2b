"""Small float Maxwell-Bloch runs on the CUDA backend, for racecheck of the
float tensor-core kernel k_atoms_tcf built with each form of its stage
barrier (cuda/mbloch/mbloch_tcf.cuh; bench/mbloch_racecheck.sh builds them).

    python bench/mbloch_racecheck.py run --out RESULT.npz
    python bench/mbloch_racecheck.py compare A.npz B.npz [C.npz ...]
    python bench/mbloch_racecheck.py sites RACECHECK.log

``run`` does the float runs of bench/cuda_sanitize.py (one level pair, and
two ground with three excited levels; 64 atoms, 64 time points, 4 z steps)
on the mma.sync float kernel (``NLSEPY_MBLOCH_KERNEL=tcf``) and saves the
fields, populations and norm deviations.  ``compare`` prints, for each file
after the first, the largest difference of every array from the first file
and whether all of them are the same bits; it exits 0 when they are, 1 when
they differ, 2 when a file is missing or of other runs.  ``sites`` lists
the races of a racecheck log by the source lines of their two accesses
(with -lineinfo), most hazards first.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections import Counter
from typing import Dict, List, Tuple

import numpy as np

CASES = ((1, 1), (2, 3))  # (n_g, n_e), as bench/cuda_sanitize.py


def run(out: str) -> int:
    """The float runs on the CUDA backend; their results into `out`."""
    os.environ.setdefault("NLSEPY_MBLOCH_KERNEL", "tcf")  # read when a solver is made
    import nlsepy as nl
    if "cuda" not in nl.backends("MaxwellBloch"):
        print("the CUDA backend of MaxwellBloch is not available (no CUDA build or no device): "
              f"nl.backends('MaxwellBloch') = {nl.backends('MaxwellBloch')}", file=sys.stderr)
        return 2
    arrays: Dict[str, np.ndarray] = {}
    for n_g, n_e in CASES:
        F = None if n_g == n_e == 1 else nl.mbloch.franck_condon(n_g, n_e, 0.5)
        mb = nl.MaxwellBloch(n_g, n_e, F=F, h_t=0.05, n_t=64, n_atoms=64, dtype=np.complex64,
                             backend="cuda")
        f0 = np.zeros((64, mb.n_modes), complex)
        f0[16:32] = 0.3
        res = mb.run(f0, 0.01, 4)
        key = f"g{n_g}e{n_e}"
        arrays[f"{key}_fields"] = res.fields
        if res.populations is not None:
            arrays[f"{key}_populations"] = res.populations
        arrays[f"{key}_norm_deviation"] = np.array(res.norm_deviation)
        print(f"{key}: fields {res.fields.shape}, |fields| max {np.abs(res.fields).max():.6g}, "
              f"norm deviation {res.norm_deviation:.3g}", flush=True)
    tmp = out + ".tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, out)
    return 0


def compare(paths: List[str]) -> int:
    """Differences of every file from the first; 0: same bits, 1: not."""
    for p in paths:
        if not os.path.isfile(p):
            print(f"{p}: no such file", file=sys.stderr)
            return 2
    with np.load(paths[0]) as d:
        base = {k: d[k] for k in d.files}
    same_all = True
    for p in paths[1:]:
        with np.load(p) as d:
            other = {k: d[k] for k in d.files}
        if set(other) != set(base):
            print(f"{p}: holds {sorted(other)}, {paths[0]} holds {sorted(base)}", file=sys.stderr)
            return 2
        worst, same = 0.0, True
        for k in sorted(base):
            a, b = base[k], other[k]
            if a.shape != b.shape:
                print(f"{p}: {k} has shape {b.shape}, {paths[0]} {a.shape}", file=sys.stderr)
                return 2
            diff = float(np.max(np.abs(a - b))) if a.size else 0.0
            bits = a.tobytes() == b.tobytes()
            same &= bits
            worst = max(worst, diff)
            print(f"  {os.path.basename(p)} {k}: max |diff| {diff:.3g}{'' if bits else ' (bits differ)'}")
        print(f"{os.path.basename(p)} vs {os.path.basename(paths[0])}: max |diff| {worst:.3g}, "
              f"{'same bits' if same else 'bits differ'}")
        same_all &= same
    return 0 if same_all else 1


#: one access of a racecheck report: kind, then (after the function and
#: offset, on this line or the next) "in FILE:LINE"; the hazards of the pair
_ACCESS = re.compile(r"(Read|Write) access at\s+.*?\s+in\s+(\S+?):(\d+)"
                     r"(?:(?:(?!access at).)*?\[(\d+) hazards?\])?")


def _reports(text: str) -> List[Tuple[str, List[Tuple[str, int]]]]:
    """The race reports of a racecheck log: (severity, [(site, hazards)]),
    the first site the one the others race with."""
    lines = [re.sub(r"^=+\s?", "", ln).strip() for ln in text.splitlines()]
    out: List[Tuple[str, List[Tuple[str, int]]]] = []
    cur: List[str] = []
    sev = ""

    def close() -> None:
        if cur:
            sites = [(f"{m.group(1)} {os.path.basename(m.group(2))}:{m.group(3)}",
                      int(m.group(4) or 0)) for m in _ACCESS.finditer(" ".join(cur))]
            if sites:
                out.append((sev, sites))

    for ln in lines:
        m = re.match(r"(\w+): Race reported between", ln)
        if m:
            close()
            cur, sev = [ln], m.group(1)
        elif cur and ln and not ln.startswith(("RACECHECK SUMMARY", "Program hit", "Saved host")):
            cur.append(ln)
        else:
            close()
            cur = []
    close()
    return out


def sites(path: str) -> int:
    """Print the races of a racecheck log by source lines, most hazards first."""
    if not os.path.exists(path):
        print(f"{path}: no such file", file=sys.stderr)
        return 2
    with open(path, errors="replace") as fh:
        reports = _reports(fh.read())
    pairs: Counter = Counter()
    for sev, ss in reports:
        first = ss[0][0]
        for site, n in ss[1:]:
            pairs[(sev, first, site)] += max(n, 1)
    for (sev, a, b), n in pairs.most_common():
        print(f"{n:10d}  {sev:8s} {a:28s} <-> {b}")
    if not pairs:
        print("no race reports")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="the float runs; results into --out")
    r.add_argument("--out", required=True)
    c = sub.add_parser("compare", help="differences of result files from the first")
    c.add_argument("files", nargs="+")
    t = sub.add_parser("sites", help="the races of a racecheck log by source lines")
    t.add_argument("log")
    args = ap.parse_args()
    if args.cmd == "run":
        return run(args.out)
    if args.cmd == "sites":
        return sites(args.log)
    return compare(args.files)


if __name__ == "__main__":
    sys.exit(main())
