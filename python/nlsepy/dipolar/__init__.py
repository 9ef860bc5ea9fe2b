"""The dipolar Gross-Pitaevskii equation (stem ``dipolar``).

``nl.DipolarGPE`` integrates the 3D equation and its effective 2D/1D forms
by split-step Crank-Nicolson with the dipolar term through FFTs (source 003,
the DBEC-GP programs); :mod:`nlsepy.dipolar.dbec` is its front end for
DBEC-GP input files (``nl.dbec.run``, ``python -m nlsepy dbec``).

Modules
-------
solver      ``DipolarGPE``: construction, parameters, state, stepping calls
parameters  the parameters' checks, ``Obstacle``, the 2D/1D reduction
blocks      the stepping in blocks of whole steps (Ctrl-C, chunks, frames)
observe     observables, densities, phases, potentials, run-file contents
checkpoint  the checkpoints' entries, ``load`` and its checks
memory      the memory a solver takes (``memory_parts``), checked beforehand
dist        the distributed handle (x slabs over the ranks of ``comm=``)
plot        its figures (``nl.plot.dipolar``)
dbec        DBEC-GP input files, stages and output files
"""

from __future__ import annotations

from . import dbec
from .solver import GEOMETRIES, DeviceMemoryError, DipolarGPE, Obstacle, memory_parts

__all__ = ["DipolarGPE", "Obstacle", "GEOMETRIES", "DeviceMemoryError", "memory_parts", "dbec"]
