"""The GPE by discrete exterior calculus on crystal grids (stem ``dec``, source 001).

Modules
-------
grids   the crystal point sets, the periodic block's Delaunay complex
        (cells, circumcentres, volumes, faces, dual edges) and the Laplacian
        of eq. 8 on it
solver  ``DecGPE``: the solver (C and CUDA kernels behind one class)
plot    its figures (``nl.plot.dec``)
dist    its distributed part: one rank's slab of block layers
vortex  the stationary vortex state of eq. 14 and the cuboid of eq. 15
"""

from __future__ import annotations

from . import grids
from .grids import CELLS_PER_BLOCK, GRIDS, Block, block, crystal_points
from .solver import DecGPE
from .vortex import VortexState, vortex_state

__all__ = ["DecGPE", "VortexState", "vortex_state", "grids", "GRIDS", "CELLS_PER_BLOCK", "Block", "block", "crystal_points"]
