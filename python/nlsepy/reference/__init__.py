"""Plain NumPy statements of each model's scheme (one module per stem).

They are the oracles of the tests and the baselines of the benchmarks:
straightforward array code, no speed tricks, the equations as the sources
state them.

Modules
-------
fd
    ``NLSEReference``: RK4 with CD or 2SHOC differences (NLSEmagic)
dipolar
    ``SplitStepReference``: the split-step Crank-Nicolson scheme of the
    dipolar GPE in NumPy or CuPy (source 003)
magnet
    Table 2.1's rows, Jacobi, red-black SOR, the omega estimate and a
    dense direct solve of the magnet problem (source 002)
mbloch
    the Maxwell-Bloch model and scheme of source 004, line shapes,
    pulses, Franck-Condon factors
dec
    the DEC operator of eq. 8 as a sparse matrix and the leapfrog of
    eq. 12 (source 001)
"""

from __future__ import annotations

from .fd import NLSEReference

__all__ = ["NLSEReference", "fd", "dipolar", "magnet", "mbloch", "dec"]
