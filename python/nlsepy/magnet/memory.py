"""The memory accounting of ``nl.CoaxialMagnet``: what its solver, each
method's work arrays and a solve's results take, checked before anything
is allocated (``MemoryError`` naming the size, the grid and what to
change)."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import numpy as np

from ..common.guard import require_memory

__all__ = ["hierarchy", "solve_bytes", "require", "require_history"]

#: bytes of one row descriptor of Table 2.1 (4 ints and 5 doubles, magnet_row)
_ROW_BYTES = 56
#: unknowns at which the multigrid stops coarsening (MAGNET_MG_COARSEST)
_MG_COARSEST = 400
#: bytes per node of a multigrid level: 9-point operator, mask, b, e, r
_LEVEL_BYTES = 9 * 8 + 1 + 3 * 8


def hierarchy(nr: int, nz: int, unknowns: int) -> Tuple[int, int]:
    """Nodes of the multigrid's coarse levels together, and of the coarsest
    (magnet_level_count, magnet_coarse_dim), for an ``(nr, nz)`` grid of
    `unknowns` unknowns."""
    cnt = unknowns
    nodes: List[int] = []
    while cnt > _MG_COARSEST and nr > 3 and nz > 3:
        nr, nz = nr // 2 + 1, nz // 2 + 1
        cnt = nr * nz
        nodes.append(cnt)
    if not nodes:
        nodes.append((nr // 2 + 1) * (nz // 2 + 1))
    return sum(nodes), nodes[-1]


def solve_bytes(mag: Any, method: Optional[str], new_solver: bool,
                inputs: int) -> Tuple[int, int]:
    """Bytes a solve of `mag` takes: ``(backend bytes, other host bytes)``
    (on the CPU the first is host memory and the second 0).

    `method` None: the solver's state and the Phi a solve returns;
    `new_solver`: a solver is created; `inputs`: bytes of the arrays the
    caller's arguments become (phi0, boundary values).
    """
    nn = mag.nr * mag.nz
    rs = np.dtype(mag.dtype).itemsize
    colours = 2 * (mag.nr + 2) * (mag.nz // 2 + 2) * rs  # Phi by colour, with halos
    dev = colours + mag.nr * (_ROW_BYTES + 8) if new_solver else 0
    host = 8 * nn + inputs  # the Phi returned
    cuda = mag.backend == "cuda"
    if cuda:
        host += mag.nr * _ROW_BYTES + colours  # row table and staging on the host
    if method == "jacobi":
        dev += colours  # the second copy
    if method in ("multigrid", "mg-cg"):
        levels, last = hierarchy(mag.nr, mag.nz, mag.unknowns)
        dense = 8 * last * last  # the coarsest level's dense LU (or inverse)
        dev += 17 * nn + _LEVEL_BYTES * levels + dense + 8 * last
        if cuda:
            host += 2 * dense + (_LEVEL_BYTES + 4) * last
        if method == "mg-cg":  # explicit fine operator, Krylov vectors, first Phi
            dev += (_LEVEL_BYTES + 8 * 8) * nn + colours
    if not cuda:
        return dev + host, 0
    return dev, host


def require(mag: Any, dev: int, host: int, what: str) -> None:
    """MemoryError when `dev` bytes on the magnet's backend (and `host`
    bytes of host memory besides) do not fit; the message names the grid."""
    where = (f"{what} on the {mag.nr}x{mag.nz} grid (r1 = {mag.r1:g}, z1 = {mag.z1:g}, "
             f"dr = {mag.dr:g}, dz = {mag.dz:g}, {np.dtype(mag.dtype).name})")
    require_memory(dev, where, advice="use a coarser grid, float32 or a method with less "
                   "memory (rbsor)", backend=mag.backend, host_bytes=host)


def require_history(nbytes: int, what: str) -> None:
    """MemoryError when the residual history of a solve outgrows the host."""
    require_memory(nbytes, what, advice="use a smaller max_iter or a faster method (multigrid)")
