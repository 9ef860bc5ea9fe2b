"""A relabelling of a DEC block's cells and of each cell's neighbour slots
that lowers the cache lines a warp's neighbour loads touch in the lean rows
(``k_rows``), found by simulated annealing on a model of those loads.

The model: a row of NX blocks in complex64 (8 bytes a value), work units of
256 cells, each warp instruction loading neighbour slot k of 32 consecutive
cells; the cost is the number of distinct 128-byte lines per 32 cells,
summed over the slots, for the blocks away from the row's ends.  Starts from
the block's own order with each cell's neighbours sorted by index distance,
then swaps two cells or permutes one cell's slots (Metropolis, a falling
temperature).  Writes ``<out>/<grid>.npz`` with ``pos`` (cell -> new place)
and ``nb``, ``of`` (each cell's neighbours and their block offsets in the new
slot order, old labels), which ``dec_order_probe.py --perms <out>`` times.
Only for blocks whose cells all have four neighbours (A15, C15, Z).

Usage: ``python3 bench/probe/dec_anneal_order.py GRID [--iters 200000] [--out DIR]``
"""
from __future__ import annotations

import argparse
import os

import numpy as np

from nlsepy.dec.grids import block

NX = NY = 40


def cost(nb, of, pos, q, C):
    """Lines per 32 cells of the neighbour loads of the windows q."""
    inv = np.empty(C, int)
    inv[pos] = np.arange(C)
    bx = q // C
    cn = q - bx * C
    co = inv[cn]
    tot = 0
    for k in range(nb.shape[1]):
        o = of[co, k]
        delta = ((o[..., 2] * NY + o[..., 1]) * NX + o[..., 0]) * C + pos[nb[co, k]] - cn
        a = np.sort(((10 ** 7 + q + delta) * 8) // 128, axis=1)
        tot += int((np.diff(a, axis=1) != 0).sum()) + a.shape[0]
    return tot / q.size * 32


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("grid")
    p.add_argument("--iters", type=int, default=200000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", default="perms")
    a = p.parse_args()
    b = block(a.grid)
    C = b.cells
    start = np.searchsorted(b.nbr_row, np.arange(C + 1))
    if not np.all(np.diff(start) == 4):
        raise SystemExit(f"{a.grid}: cells of other than 4 neighbours")
    nb = b.nbr_cell.reshape(C, 4).copy()
    of = b.nbr_offset.reshape(C, 4, 3).copy()
    d = ((of[..., 2] * NY + of[..., 1]) * NX + of[..., 0]) * C + nb - np.arange(C)[:, None]
    s = np.argsort(d, axis=1, kind="stable")
    nb, of = np.take_along_axis(nb, s, 1), np.take_along_axis(of, s[..., None], 1)
    row = NX * C
    q = [np.arange(q0 + t, q0 + t + 32) for q0 in range(0, row, 256) for t in range(0, 256, 32)
         if q0 + t + 32 <= min(q0 + 256, row) and (q0 + t) // C >= 2 and (q0 + t + 31) // C <= NX - 3]
    q = np.array(q)
    pos = np.arange(C)
    cur = cost(nb, of, pos, q, C)
    print(f"{a.grid}: {cur:.2f} lines per 32 cells at the start", flush=True)
    best, keep = cur, (pos.copy(), nb.copy(), of.copy())
    rng = np.random.default_rng(a.seed)
    for it in range(a.iters):
        T = 0.03 * (1 - it / a.iters) + 0.0003
        if rng.random() < 0.5:
            i, j = rng.integers(C, size=2)
            p2 = pos.copy()
            p2[i], p2[j] = pos[j], pos[i]
            new = cost(nb, of, p2, q, C)
            if new <= cur or rng.random() < np.exp((cur - new) / T):
                pos, cur = p2, new
        else:
            c, s = rng.integers(C), rng.permutation(4)
            nb2, of2 = nb.copy(), of.copy()
            nb2[c], of2[c] = nb[c, s], of[c, s]
            new = cost(nb2, of2, pos, q, C)
            if new <= cur or rng.random() < np.exp((cur - new) / T):
                nb, of, cur = nb2, of2, new
        if cur < best:
            best, keep = cur, (pos.copy(), nb.copy(), of.copy())
    print(f"{a.grid}: {best:.2f} lines per 32 cells after {a.iters} steps", flush=True)
    os.makedirs(a.out, exist_ok=True)
    np.savez(os.path.join(a.out, a.grid + ".npz"), pos=keep[0], nb=keep[1], of=keep[2])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
