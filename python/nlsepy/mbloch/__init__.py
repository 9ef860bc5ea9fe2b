"""Maxwell-Bloch propagation through multi-level atoms (``nl.MaxwellBloch``):
the model (``solver``: ``MaxwellBloch``; ``result``: ``MaxwellBlochResult``;
``checks``, ``memory``, ``propagate`` and ``dist``: its input checks, memory
accounting, z loop and distributed part; ``lindblad``: decay, dephasing and
Doppler classes, ``Doppler``), its figures (``plot``), and the
line shapes, pulses and Franck-Condon factors that describe a run's input;
``hyperfine``: the alkali D-line sublevels, strengths and couplings
(:func:`hyperfine`, with the Wigner 3j and 6j symbols); ``config``: runs
described by TOML or JSON files (``python -m nlsepy mbloch FILE``).

Line shapes, pulses and Franck-Condon factors are those of
:mod:`nlsepy.reference.mbloch`, under this name for convenience.
"""

from ..reference.mbloch import (absorption_coefficient, area_theorem, franck_condon,
                                gaussian_line, gaussian_pulse, lorentzian_line, sech_pulse)
from .hyperfine import Hyperfine, hyperfine, wigner_3j, wigner_6j
from .lindblad import Doppler, doppler_width
from .solver import LINES, MaxwellBloch, MaxwellBlochResult

__all__ = ["MaxwellBloch", "MaxwellBlochResult", "franck_condon", "sech_pulse",
           "gaussian_pulse", "gaussian_line", "lorentzian_line", "absorption_coefficient",
           "area_theorem", "LINES", "Doppler", "doppler_width", "hyperfine", "Hyperfine",
           "wigner_3j", "wigner_6j"]
