"""DecGPE's files: the checkpoint's entries and the checks a file's entries
pass (including the order of a block's cells in files of earlier versions),
and what a run file holds besides the frames."""

from __future__ import annotations

import warnings
from typing import Any, Dict, Optional, Sequence

import numpy as np

from ..common.files import Key
from ..common.hdf5 import RunHeader
from ..common.stepper import CLOCK_KEYS
from . import grids as _grids

__all__ = ["KEYS", "check", "run_header"]

#: boundary conditions a checkpoint may name
BCS = ("zero", "periodic")

#: the entries of a DecGPE checkpoint
KEYS = {
    "psi": Key("array", "c", ndim=(1,)),
    "psi_prev": Key("array", "c", ndim=(1,)),
    **CLOCK_KEYS,
    "imaginary_steps": Key("int"),
    "grid": Key("str", choices=tuple(_grids.GRIDS)),
    "blocks": Key("array", "iu", ndim=(1,)), "spacing": Key("float"),
    "g": Key("float"), "trap": Key("array", "fiu", ndim=(1,)),
    "bc": Key("str", choices=BCS), "centre": Key("array", "fiu", ndim=(1,)),
    "dt": Key("float"), "force": Key("bool"),
    "V": Key("array", "fiu", ndim=(1,)),
    # the circumcentres of a block's cells in the order of the stored
    # states (missing in checkpoints of earlier versions)
    "cell_centres": Key("array", "f", ndim=(2,), optional=True),
}


def check(where: str, d: Dict[str, Any], slabs: Sequence[str]) -> Dict[str, Any]:
    """A checkpoint's entries `d`, checked, with the per-cell entries
    `slabs` as flat arrays in this version's order of a block's cells.

    Parameters
    ----------
    where : str
        The file, for the messages.
    d : dict
        The entries as read (``d["parts"]``: from a distributed
        checkpoint's parts, by layers of blocks).
    slabs : sequence of str
        The per-cell entries.

    Returns
    -------
    dict

    Raises
    ------
    ValueError
        An entry that does not fit the others, naming the file.
    """
    layers = None
    if d["parts"]:
        for k in slabs:
            d[k] = d[k].reshape(-1)
        layers = int(d["global_shape"][0])
    layers = None
    if d["parts"]:
        for k in slabs:
            d[k] = d[k].reshape(-1)
        layers = int(d["global_shape"][0])
    if d["psi_prev"].size not in (0, d["psi"].size) or d["psi_prev"].size and \
            d["psi_prev"].dtype != d["psi"].dtype:
        raise ValueError(f"{where}: entry 'psi_prev' does not match 'psi'")
    if d["V"].size not in (0, d["psi"].size):
        raise ValueError(f"{where}: entry 'V' does not match 'psi'")
    for name in ("blocks", "trap", "centre"):
        if d[name].shape != (3,):
            raise ValueError(f"{where}: entry {name!r} must have 3 values, got "
                             f"{d[name].shape}")
    if layers is not None:
        plane = _grids.CELLS_PER_BLOCK.get(d["grid"], 0) * int(np.prod(d["blocks"][:2]))
        if tuple(d["global_shape"]) != (int(d["blocks"][2]), plane):
            raise ValueError(f"{where}: the parts hold {tuple(d['global_shape'])} layers "
                             f"x cells, the grid {d['grid']!r} of blocks "
                             f"{tuple(d['blocks'])} has ({d['blocks'][2]}, {plane})")
    if d["steps"] < 0 or d["k"] < 0 or d["imaginary_steps"] < 0:
        raise ValueError(f"{where}: negative step counters")
    perm = None
    if "cell_centres" in d:
        perm = _cell_order(where, d["grid"], d["cell_centres"])
    elif d["grid"] in _REORDERED:
        warnings.warn(f"{where}: a checkpoint of an earlier version, without the block's "
                      f"circumcentres: its {d['grid']!r} cells are taken in that version's "
                      "order (by z, y, x of the circumcentres, where the machine's rounding "
                      "could order cells of one height); check the state, or write the "
                      "checkpoint anew", RuntimeWarning, stacklevel=4)
        perm = _cell_order(where, d["grid"], _zyx_centres(d["grid"]))
    if perm is not None:  # the same cells, stored in another order
        for name in slabs:
            if d[name].size:
                d[name] = np.ascontiguousarray(
                    d[name].reshape(-1, len(perm))[:, perm]).reshape(-1)
    return d


#: grids whose cells this version orders otherwise than earlier versions
#: without the circumcentres in their checkpoints did (by z, y, x)
_REORDERED = ("a15", "c15", "z")


def _zyx_centres(grid: str) -> np.ndarray:
    """The circumcentres of a `grid` block in the order of earlier versions:
    by z, y, x (rounded to 1e-7)."""
    cen = np.asarray(_grids.block(grid).centres)
    return cen[_grids._zyx_order(cen)]


def _cell_order(where: str, grid: str, stored: np.ndarray) -> Optional[np.ndarray]:
    """Where a checkpoint's block of `grid` lists its cells (circumcentres
    `stored`) in another order than :func:`nlsepy.dec.grids.block`: the
    stored index of each of this version's cells; None when the orders agree.

    Raises
    ------
    ValueError
        `stored` are not the cells of a `grid` block.
    """
    now = np.asarray(_grids.block(grid).centres)
    if stored.shape != now.shape:
        raise ValueError(f"{where}: entry 'cell_centres' has shape {stored.shape}, a {grid!r} "
                         f"block has {now.shape}")
    gap = np.abs(now[:, None, :] - stored[None, :, :]).max(axis=2)
    perm = np.argmin(gap, axis=1)
    if not (np.all(gap[np.arange(len(now)), perm] < 1e-6)
            and len(np.unique(perm)) == len(perm)):
        raise ValueError(f"{where}: entry 'cell_centres' does not list the cells of a {grid!r} "
                         "block")
    return None if np.array_equal(perm, np.arange(len(perm))) else perm


def run_header(sim: Any) -> RunHeader:
    """What a DecGPE's run file holds besides the frames (distributed: every
    rank, with its cells of V as a slab, nothing gathered)."""
    V = sim._V
    slabs = {} if sim._comm is None or V is None else {"V": V}
    params = {"grid": sim.grid, "blocks": sim.blocks, "spacing": sim.spacing,
              "g": sim.g, "trap": sim.trap, "bc": sim.bc, "centre": sim.centre,
              "dt": sim._dt, "max_dt": sim.max_dt, "force": sim._force,
              "dtype": np.dtype(sim.dtype).name, "box": sim.box,
              "cells_per_block": sim.cells_per_block, "size": sim._n}
    if not slabs:
        params["V"] = V
    pos = sim._positions_of(0, sim.blocks[2])
    vol = np.tile(sim._block.volumes * sim.spacing ** 3, int(np.prod(sim.blocks)))
    length = "l = sqrt(hbar / (m omega))"
    coords = {"cell": (("cell",), np.arange(sim._n), "",
                       "cell index ((bz * ny + by) * nx + bx) * cells_per_block + c"),
              "x": (("cell",), pos[:, 0], length, "circumcentre x"),
              "y": (("cell",), pos[:, 1], length, "circumcentre y"),
              "z": (("cell",), pos[:, 2], length, "circumcentre z"),
              "volume": (("cell",), vol, "l^3", "cell volume |B_i|")}
    return RunHeader(
        model="DecGPE", parameters=params, backend=sim.backend, slabs=slabs,
        units=(f"trap units of i dPsi/dt = [-1/2 Lap + V + g |Psi|^2] Psi: lengths in "
               f"{length}, time in 1 / omega, energies in hbar omega"),
        coords=coords, dims={"psi": ("cell",), "norm": (), "energy": (), "steps": ()},
        var_units={"t": "1 / omega", "psi": "l^(-3/2)", "norm": "",
                   "energy": "hbar omega", "steps": ""},
        long_names={"t": "time", "psi": "the state at the circumcentres",
                    "norm": "N = sum_i |B_i| |psi_i|^2",
                    "energy": "E = sum_i |B_i| [conj(psi_i) (K psi)_i + V_i |psi_i|^2 "
                              "+ g/2 |psi_i|^4]",
                    "steps": "real-time steps since the solver was made"})
