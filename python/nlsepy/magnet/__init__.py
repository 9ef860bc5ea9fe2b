"""The axisymmetric Laplace problem of magnet design (stem ``magnet``).

``nl.CoaxialMagnet`` solves for the scalar potential between a cylindrical
magnet and an outer cylinder (source 002: Jacobi, Gauss-Seidel, SOR,
red-black SOR as published; multigrid and mg-cg beyond it); the
post-processing turns a solution into the potential jump, the winding and
the field of the wires.

Modules
-------
solver   ``CoaxialMagnet``, ``MagnetSolution``, ``ConvergenceWarning``
memory   what the solver, each method and a solve take (checked before
         allocation)
post     potential jump, winding, loop fields, homogeneity, plot
plot     the figure of a solution
"""

from __future__ import annotations

from . import post
from .post import (MU0, Winding, cap_field, delta_phi, field_inside, homogeneity, loop_field,
                   phi_inside, winding)
from .solver import CoaxialMagnet, ConvergenceWarning, MagnetSolution

__all__ = ["CoaxialMagnet", "MagnetSolution", "ConvergenceWarning", "post", "MU0", "Winding",
           "phi_inside", "cap_field", "delta_phi", "winding", "loop_field", "field_inside",
           "homogeneity"]
