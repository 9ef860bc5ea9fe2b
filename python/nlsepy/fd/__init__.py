"""The NLSE by explicit RK4 and finite differences (``nl.NLSE``): the solver
(:mod:`.solver`), its distributed part (:mod:`.dist`) and, for the frames'
figures, :func:`nlsepy.plot.frames`."""

from .solver import DT_SAFETY, NLSE, stability_bound

__all__ = ["NLSE", "stability_bound", "DT_SAFETY"]
