"""A relabelling of a DEC block's cells and of each cell's neighbour slots
that lowers the cache lines a warp's neighbour loads touch in the lean rows
(``k_rows``), found by simulated annealing on a model of those loads.

The model: a row of NX blocks in complex64 (8 bytes a value), work units of
256 cells, each warp instruction loading neighbour slot k of 32 consecutive
cells; the cost is the number of distinct 128-byte lines per 32 cells,
summed over the slots, for the blocks away from the row's ends.  Starts from
the block's own order with each cell's neighbours sorted by index distance,
then swaps two cells or permutes one cell's slots (Metropolis, a falling
temperature).  With ``--own-slots`` it starts from the block's own order
and slots (those of ``nlsepy.dec.grids._row_order``) instead; with
``--sectors W`` the cost adds W times the distinct 32-byte sectors outside a
unit of 256 cells that the unit's neighbour loads read, per 32 cells (the
``all`` column of ``dec_sector_model.py``), so that fewer lines are not
bought with more L2 sectors.  Writes ``<out>/<grid>.npz`` with ``pos``
(cell -> new place) and ``nb``, ``of`` (each cell's neighbours and their
block offsets in the new slot order, old labels), which
``dec_order_probe.py --perms <out>`` times.  Only for blocks whose cells all
have four neighbours (A15, C15, Z).

Usage: ``python3 bench/probe/dec_anneal_order.py GRID [--iters 200000] [--out DIR]
[--own-slots] [--sectors 3] [--temp 0.06]``
"""
from __future__ import annotations

import argparse
import os

import numpy as np

from nlsepy.dec.grids import block

NX = NY = 40
U = 256  # cells a work unit


def neighbours(nb, of, pos, q, C):
    """The index of neighbour slot k of each cell q in the model's grid, for
    each k (K arrays of q's shape), under the relabelling pos, nb, of."""
    inv = np.empty(C, int)
    inv[pos] = np.arange(C)
    cn = q % C
    co = inv[cn]
    for k in range(nb.shape[1]):
        o = of[co, k]
        yield q + ((o[..., 2] * NY + o[..., 1]) * NX + o[..., 0]) * C + pos[nb[co, k]] - cn


def cost(nb, of, pos, q, C):
    """Lines per 32 cells of the neighbour loads of the windows q."""
    tot = 0
    for j in neighbours(nb, of, pos, q, C):
        a = np.sort(((10 ** 7 + j) * 8) // 128, axis=1)
        tot += int((np.diff(a, axis=1) != 0).sum()) + a.shape[0]
    return tot / q.size * 32


def unit_sectors(nb, of, pos, units, C):
    """Distinct 32-byte sectors outside each unit that its neighbour loads
    read, a cell (complex64)."""
    a = np.concatenate(list(neighbours(nb, of, pos, units, C)), axis=1)
    own = (a >= units[:, :1]) & (a <= units[:, -1:])
    s = np.sort(np.where(own, -1, ((10 ** 7 + a) * 8) // 32), axis=1)
    return int(((np.diff(s, axis=1) != 0) & (s[:, 1:] >= 0)).sum()) / units.size


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("grid")
    p.add_argument("--iters", type=int, default=200000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", default="perms")
    p.add_argument("--own-slots", action="store_true",
                   help="start from the block's own order and neighbour slots")
    p.add_argument("--sectors", type=float, default=0.0, metavar="W",
                   help="weight of the unit's sectors outside it in the cost")
    p.add_argument("--temp", type=float, default=0.03,
                   help="the starting temperature (it falls linearly to 1 %% of it)")
    a = p.parse_args()
    b = block(a.grid)
    C = b.cells
    start = np.searchsorted(b.nbr_row, np.arange(C + 1))
    if not np.all(np.diff(start) == 4):
        raise SystemExit(f"{a.grid}: cells of other than 4 neighbours")
    nb = b.nbr_cell.reshape(C, 4).copy()
    of = b.nbr_offset.reshape(C, 4, 3).copy()
    if not a.own_slots:
        d = ((of[..., 2] * NY + of[..., 1]) * NX + of[..., 0]) * C + nb - np.arange(C)[:, None]
        s = np.argsort(d, axis=1, kind="stable")
        nb, of = np.take_along_axis(nb, s, 1), np.take_along_axis(of, s[..., None], 1)
    row = NX * C
    q = [np.arange(q0 + t, q0 + t + 32) for q0 in range(0, row, 256) for t in range(0, 256, 32)
         if q0 + t + 32 <= min(q0 + 256, row) and (q0 + t) // C >= 2 and (q0 + t + 31) // C <= NX - 3]
    q = np.array(q)
    units = np.array([np.arange(q0, q0 + U) for q0 in range(3 * C, NX * C - 4 * C - U, U)])

    def total(nb, of, pos):
        c = cost(nb, of, pos, q, C)
        return c + 32 * a.sectors * unit_sectors(nb, of, pos, units, C) if a.sectors else c

    pos = np.arange(C)
    cur = total(nb, of, pos)
    print(f"{a.grid}: {cost(nb, of, pos, q, C):.2f} lines per 32 cells, "
          f"{unit_sectors(nb, of, pos, units, C):.3f} sectors outside a unit a cell at the start",
          flush=True)
    best, keep = cur, (pos.copy(), nb.copy(), of.copy())
    rng = np.random.default_rng(a.seed)
    for it in range(a.iters):
        T = a.temp * (1 - it / a.iters) + 0.01 * a.temp
        if rng.random() < 0.5:
            i, j = rng.integers(C, size=2)
            p2 = pos.copy()
            p2[i], p2[j] = pos[j], pos[i]
            new = total(nb, of, p2)
            if new <= cur or rng.random() < np.exp((cur - new) / T):
                pos, cur = p2, new
        else:
            c, s = rng.integers(C), rng.permutation(4)
            nb2, of2 = nb.copy(), of.copy()
            nb2[c], of2[c] = nb[c, s], of[c, s]
            new = total(nb2, of2, pos)
            if new <= cur or rng.random() < np.exp((cur - new) / T):
                nb, of, cur = nb2, of2, new
        if cur < best:
            best, keep = cur, (pos.copy(), nb.copy(), of.copy())
    print(f"{a.grid}: {cost(keep[1], keep[2], keep[0], q, C):.2f} lines per 32 cells, "
          f"{unit_sectors(keep[1], keep[2], keep[0], units, C):.3f} sectors outside a unit a cell "
          f"after {a.iters} steps", flush=True)
    os.makedirs(a.out, exist_ok=True)
    np.savez(os.path.join(a.out, a.grid + ".npz"), pos=keep[0], nb=keep[1], of=keep[2])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
