"""Speed of the CUDA DEC step under another order of a cell's neighbours
(the same complex, the neighbour sums in another order).

For each grid and dtype, steps the problem of bench/dec.py with the block's
own neighbour order, with each cell's neighbours sorted by index distance
(``delta``) and with the cells by z, y, x (``zyx``), prints the largest
difference of the states and times them interleaved (median ms a step,
fraction of the copy bandwidth).
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import _common  # noqa: F401,E402
from dec import blocks_for, make  # noqa: E402
from dec_variant_check import gpu_copy, times_in_turns  # noqa: E402
from nlsepy.dec import grids as G  # noqa: E402
from nlsepy.dec import solver as S  # noqa: E402

ORIG = G.block


def by_offset(b):
    """Block b with each cell's neighbours sorted by their block's offset
    (z, then y, then x) and then their cell: by index distance."""
    o = np.lexsort((b.nbr_cell, b.nbr_offset[:, 0], b.nbr_offset[:, 1], b.nbr_offset[:, 2],
                    b.nbr_row))
    return G.Block(grid=b.grid, edge=b.edge, points=b.points, centres=b.centres,
                   volumes=b.volumes, nbr_row=b.nbr_row[o], nbr_cell=b.nbr_cell[o],
                   nbr_offset=b.nbr_offset[o], nbr_area=b.nbr_area[o], nbr_dual=b.nbr_dual[o])


def by_zyx(b):
    """Block b with its cells sorted by their circumcentres' z, y, x (rounded
    to 1e-7; the order before the row kernels' order) and each cell's
    neighbours by index distance."""
    order = G._zyx_order(b.centres)
    pos = np.empty(b.cells, np.int64)
    pos[order] = np.arange(b.cells)
    of = b.nbr_offset
    d = ((of[:, 2] * 4 + of[:, 1]) * 4 + of[:, 0]) * b.cells + pos[b.nbr_cell] - pos[b.nbr_row]
    o = np.lexsort((np.abs(d), pos[b.nbr_row]))
    return G.Block(grid=b.grid, edge=b.edge, points=b.points, centres=b.centres[order],
                   volumes=b.volumes[order], nbr_row=pos[b.nbr_row[o]], nbr_cell=pos[b.nbr_cell[o]],
                   nbr_offset=of[o], nbr_area=b.nbr_area[o], nbr_dual=b.nbr_dual[o])


def relabel(b, pos, nb, of):
    """Block b with cell c moved to pos[c] and the neighbours of cell c in
    the slot order nb[c], of[c] (neighbour cell and block offset, b's labels;
    blocks of one neighbour count)."""
    C = b.cells
    inv = np.empty(C, int)
    inv[pos] = np.arange(C)
    start = np.searchsorted(b.nbr_row, np.arange(C + 1))
    rows = []
    for j in range(C):
        o = inv[j]
        for t in range(nb.shape[1]):
            k = [k for k in range(start[o], start[o + 1])
                 if b.nbr_cell[k] == nb[o, t] and np.all(b.nbr_offset[k] == of[o, t])]
            if len(k) != 1:
                raise ValueError(f"{b.grid}: the permutation does not fit this build's block")
            rows.append(k[0])
    rows = np.array(rows)
    return G.Block(grid=b.grid, edge=b.edge, points=b.points, centres=b.centres[inv],
                   volumes=b.volumes[inv], nbr_row=np.repeat(np.arange(C), nb.shape[1]),
                   nbr_cell=pos[b.nbr_cell[rows]], nbr_offset=b.nbr_offset[rows],
                   nbr_area=b.nbr_area[rows], nbr_dual=b.nbr_dual[rows])


PERMS = None  # a folder of <grid>.npz (pos, nb, of): a relabelling to time too


def orders(grid):
    b = ORIG(grid)
    out = {"own": b, "delta": by_offset(b), "zyx": by_zyx(b)}
    f = os.path.join(PERMS, grid + ".npz") if PERMS else ""
    if f and os.path.exists(f):
        z = np.load(f)
        out["perm"] = relabel(b, z["pos"], z["nb"], z["of"])
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--grids", default="cubic,fcc,bcc,a15,c15,z")
    p.add_argument("--dtypes", default="complex64,complex128")
    p.add_argument("--blocks", type=int, default=189)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--time", type=int, default=3)
    p.add_argument("--backend", default="cuda")
    p.add_argument("--only", default="", help="comma-separated order names (default: all)")
    p.add_argument("--perms", default="", help="folder of <grid>.npz relabellings")
    a = p.parse_args()
    global PERMS
    PERMS = a.perms or None
    copy = gpu_copy() if a.backend == "cuda" else 1.0
    dof = 12 * a.blocks ** 3
    for dt_name in a.dtypes.split(","):
        dtype = np.dtype(dt_name).type
        for grid in a.grids.split(","):
            blocks = blocks_for(grid, dof)
            sims, ref = {}, None
            b0 = ORIG(grid)
            for name, blk in orders(grid).items():
                if a.only and name not in a.only.split(","):
                    continue
                G.block = S._grids.block = lambda g, blk=blk: blk
                sim = make(grid, blocks, dtype, a.backend, None)
                G.block = S._grids.block = ORIG
                sim.step(a.steps)
                if ref is None:
                    ref = sim
                    print(f"{grid} {dt_name} own form: {sim.last_kernel()}", flush=True)
                else:  # compared block by block in the own order
                    pa = sim.psi.reshape(-1, blk.cells)
                    if name == "zyx":
                        pa = pa[:, np.argsort(G._zyx_order(b0.centres))]
                    elif name == "perm":
                        pa = pa[:, np.load(os.path.join(PERMS, grid + ".npz"))["pos"]]
                    d = float(np.abs(pa.reshape(-1) - ref.psi).max() / np.abs(ref.psi).max())
                    print(f"{grid} {dt_name} {name}: max|diff|/max|psi| {d:.2e}", flush=True)
                sims[name] = sim
            if a.time:
                nbytes = (48 if dtype is np.complex128 else 24) * ref.size
                print(f"{grid} {dt_name} "
                      + times_in_turns(sims, a.steps, a.time, nbytes, copy, digits=3), flush=True)
            del sims, ref
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
