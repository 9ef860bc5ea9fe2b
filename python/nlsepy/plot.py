"""Plots and animations of every model's results (``nl.plot``; needs matplotlib).

Each function draws with matplotlib's object-oriented API on a
:class:`matplotlib.figure.Figure` it makes (or on the empty ``fig`` or the
``ax`` it is given) and returns that Figure.  pyplot is never imported: no
window opens, no global state changes and any backend works, Agg included.
In Jupyter the returned Figure shows as the cell's value; in a script pass
``path=`` to save it (PNG, or the format the suffix names, written whole or
not at all), or draw into a pyplot figure with ``fig=plt.figure()``.
matplotlib is imported on first use: ``pip install 'nlsepy[plot]'``.

The models' classes call these functions from thin methods:

=============================  ============================================
``frames.plot()``              :func:`frames`: what ``NLSE.run``,
                               ``DipolarGPE.run`` and ``DecGPE.run`` return
``frames.animate(path)``       :func:`animate_frames`
``sim.plot()``                 :func:`nlse`: an NLSE's current state
``gpe.plot()``                 :func:`dipolar`: a DipolarGPE's current state
``sim.plot()``                 :func:`dec`: a DecGPE's current state
``solution.plot()``            :func:`magnet`: a MagnetSolution
``result.plot()``              :func:`mbloch`: a MaxwellBlochResult
``result.animate(path)``       :func:`animate_mbloch`: the fields along z
=============================  ============================================

``vortices=True`` marks the vortices (:func:`nlsepy.vortices`) on the
density and phase panels of :func:`frames`, :func:`nlse`, :func:`dipolar`,
``DecGPE.plot_slice`` and the animations: point vortices as red circles
(positive charge) and blue squares (negative), vortex lines projected on
the panels; :func:`overlay_vortices` marks them on any panel.

Axes are labelled in the model's units: the NLSE's dimensionless x and t,
the GPEs' oscillator lengths and trap times (``units of 2/ω`` for
DipolarGPE's ``option=2``: see :mod:`nlsepy.units`), metres and amperes for
the magnet, the retarded time and ``z`` in units of ``1/beta`` for
Maxwell-Bloch.  Phases use the cyclic colormap ``"twilight"`` and are left
blank where the density is below 1e-6 of its maximum.

Animations (:func:`animate_frames`, :func:`animate_mbloch`) are MP4 through
matplotlib's ``FFMpegWriter`` when ffmpeg is on PATH, else GIF through
``PillowWriter``; a path ending ``.gif`` is always GIF.
"""

from __future__ import annotations

from .common.plot import PANEL, PHASE_FLOOR, animate_frames, frames, overlay_vortices, save
from .dec.plot import dec
from .dipolar.plot import dipolar
from .fd.plot import nlse
from .magnet.plot import magnet
from .mbloch.plot import animate_mbloch, mbloch

__all__ = ["frames", "animate_frames", "nlse", "dipolar", "dec", "magnet", "mbloch",
           "animate_mbloch", "save", "overlay_vortices", "PANEL", "PHASE_FLOOR"]
