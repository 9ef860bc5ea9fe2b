"""The GPE by discrete exterior calculus on crystal grids (stem ``dec``, source 001).

Modules
-------
grids   the crystal point sets, the periodic block's Delaunay complex
        (cells, circumcentres, volumes, faces, dual edges) and the Laplacian
        of eq. 8 on it
"""

from __future__ import annotations

from . import grids
from .grids import CELLS_PER_BLOCK, GRIDS, Block, block, crystal_points

__all__ = ["grids", "GRIDS", "CELLS_PER_BLOCK", "Block", "block", "crystal_points"]
