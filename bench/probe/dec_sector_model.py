"""A model of the L2 sectors the lean rows (``k_rows``) read for the
neighbours of a work unit of 256 cells in complex64, for a DEC block's own
cell order and for the z, y, x order of the cells (the order before
``nlsepy.dec.grids._row_order``): the distinct 32-byte sectors of the
neighbours in other rows of blocks a unit reads, a cell (``rows``); the same
for every neighbour outside the unit's own cells, those of its own row too
(``all``); and the sectors of the other rows summed over the warps' load
instructions, as if L1 kept nothing between them (``per load``).  Measured
on an H100 the L2 sectors of the gathers fall between the first two and the
last (bench/RESULTS.md).  ``pass w`` counts the sectors of every load of
a unit (its own ψ(n) and ψ(n−1) included) as an L1 that keeps only what the
warp touched in its last w passes of 32 cells would read them from L2, a
cell (82.0 M cells at the benchmark size): with w = 2 it gives 66.0 M and
79.5 M sectors a step on A15 and C15 in their row order, where Nsight
Compute measured 65.8 M and 79.4 M (bench/RESULTS.md).  ``--perms DIR`` adds the relabelling
``DIR/<grid>.npz`` of ``dec_anneal_order.py``.

Usage: ``python3 bench/probe/dec_sector_model.py [--grids a15,c15,z] [--perms DIR]``
"""
from __future__ import annotations

import argparse

import numpy as np

import os

from dec_order_probe import by_zyx, relabel
from nlsepy.dec import grids as G

NX = 40  # blocks in the model's row
U = 256  # cells a unit


def units(b, esz=8):
    """Each unit of the model's row (away from its ends): the sectors of
    its cells' neighbours (U x K), whether each neighbour lies in another row
    of blocks, and the sectors of its cells' own values (U)."""
    C = b.cells
    K = len(b.nbr_row) // C
    nb = b.nbr_cell.reshape(C, K)
    of = b.nbr_offset.reshape(C, K, 3)
    base = (5 * 16 + 5) * NX * C
    for q0 in range(3 * C, NX * C - 4 * C - U, U):
        q = np.arange(q0, q0 + U)
        bx = q // C
        o = of[q - bx * C]
        addr = ((((o[..., 2] + 5) * 16 + o[..., 1] + 5) * NX + bx[:, None] + o[..., 0]) * C
                + nb[q - bx * C]) * esz // 32
        yield addr, (o[..., 1] != 0) | (o[..., 2] != 0), (base + q) * esz // 32


def sectors(b, esz=8):
    """(rows, all, per load) sectors a cell, as the module says."""
    rows = alls = loads = n = 0
    for addr, other, own in units(b, esz):
        rows += len(np.unique(addr[other]))
        alls += len(np.setdiff1d(addr, own))
        for w in range(U // 32):
            for k in range(addr.shape[1]):
                s = addr[32 * w:32 * w + 32, k][other[32 * w:32 * w + 32, k]]
                loads += len(np.unique(s))
        n += U
    return rows / n, alls / n, loads / n


def pass_sectors(b, w, esz=8):
    """Sectors a cell read from L2 when L1 keeps the warp's last w passes."""
    tot = n = 0
    for addr, _, own in units(b, esz):
        kept = []
        for p in range(U // 32):
            sl = slice(32 * p, 32 * p + 32)
            mine = set(own[sl].tolist())
            now = set(addr[sl].ravel().tolist()) | mine
            seen = set().union(*kept[len(kept) - (w - 1):]) if w > 1 and kept else set()
            tot += len(now - seen) + len(mine)  # + psi(n-1), never kept
            kept.append(now)
        n += U
    return tot / n


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--grids", default="a15,c15,z")
    p.add_argument("--perms", default="", help="folder of <grid>.npz relabellings")
    a = p.parse_args()
    for g in a.grids.split(","):
        b = G.block(g)
        blocks = [("own", b), ("zyx", by_zyx(b))]
        f = os.path.join(a.perms, g + ".npz") if a.perms else ""
        if f and os.path.exists(f):
            z = np.load(f)
            blocks.append(("perm", relabel(b, z["pos"], z["nb"], z["of"])))
        for name, blk in blocks:
            r, al, ld = sectors(blk)
            ps = "  ".join(f"pass {w} {pass_sectors(blk, w):.3f}" for w in (1, 2, 3))
            print(f"{g:4s} {name}: rows {r:.3f}  all {al:.3f}  per load {ld:.3f}  {ps} sectors a cell",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
