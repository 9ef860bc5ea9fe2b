"""The dipolar Gross-Pitaevskii equation (stem ``dipolar``).

``nl.DipolarGPE`` integrates the 3D equation and its effective 2D/1D forms
by split-step Crank-Nicolson with the dipolar term through FFTs (source 003,
the DBEC-GP programs); :mod:`nlsepy.dipolar.dbec` is its front end for
DBEC-GP input files (``nl.dbec.run``, ``python -m nlsepy dbec``).

Modules
-------
solver   ``DipolarGPE``, ``Obstacle``: validation, backends, runs, checkpoints,
         the memory a solver takes (``memory_parts``)
dbec     DBEC-GP input files, stages and output files
"""

from __future__ import annotations

from . import dbec
from .solver import GEOMETRIES, DeviceMemoryError, DipolarGPE, Obstacle, memory_parts

__all__ = ["DipolarGPE", "Obstacle", "GEOMETRIES", "DeviceMemoryError", "memory_parts", "dbec"]
