"""Where the values of a run's states lie: the axes, coordinates and units that
a model gives to its frames so that plots can label them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

__all__ = ["FrameGrid"]


@dataclass(frozen=True)
class FrameGrid:
    """Where the values of a run's states lie, and in which units.

    A model gives it to the :class:`Frames` of its runs (``_frame_grid()``)
    so that plots can label their axes; it is not needed to step.

    Attributes
    ----------
    axes : tuple of str
        Names of the state's array axes, e.g. ``("x",)`` or ``("x", "y",
        "z")``; ``("cell",)`` for a state of scattered cells.
    coords : tuple of numpy.ndarray
        Coordinates along each array axis (for cells, the cell index).
    length : str
        Unit of the coordinates, as an axis label names it (e.g.
        ``"dimensionless"``, ``"oscillator lengths"``).
    time : str
        Unit of the frames' times.
    model : str
        The model's name.
    positions : numpy.ndarray or None
        Positions ``(n, 3)`` of the cells of a state of scattered cells.
    centre : tuple of float or None
        Centre of the domain (where plots of cells cut their slice).
    periodic : tuple of bool or None
        Per array axis, whether the grid wraps around (None: no axis does).
    """

    axes: Tuple[str, ...]
    coords: Tuple[np.ndarray, ...]
    length: str = "grid index"
    time: str = ""
    model: str = ""
    positions: Optional[np.ndarray] = None
    centre: Optional[Tuple[float, ...]] = None
    periodic: Optional[Tuple[bool, ...]] = None
