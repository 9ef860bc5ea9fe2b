"""The models of nlsepy, each under one stem in every layer of the package."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

from .common.backend import backends
from .dec import DecGPE
from .dipolar import DipolarGPE
from .fd import NLSE
from .magnet import CoaxialMagnet
from .mbloch import MaxwellBloch

# stem -> Python class name, in the order of the mission
_STEMS = (("fd", "NLSE"), ("dipolar", "DipolarGPE"), ("magnet", "CoaxialMagnet"),
          ("mbloch", "MaxwellBloch"), ("dec", "DecGPE"))
_CLASSES = {c.__name__: c for c in (NLSE, DipolarGPE, CoaxialMagnet, MaxwellBloch, DecGPE)}


@dataclass(frozen=True)
class Model:
    """One model of nlsepy.

    Attributes
    ----------
    stem : str
        The model's name in every layer: ``csrc/include/nlsepy/<stem>.h``,
        ``csrc/<stem>/``, ``cuda/<stem>/``, the C API prefix ``nlse_<stem>_``,
        ``python/nlsepy/_bind/<stem>.c``, ``nlsepy.<stem>``,
        ``nlsepy.reference.<stem>``, ``tests/<stem>/``, ``bench/<stem>.py``,
        ``notebooks/<stem>.ipynb``.
    name : str
        The class name under ``nlsepy``.
    cls : type
        The class.
    backends : tuple of str
        The backends this build and machine offer for it (``nl.backends(name)``).
    """

    stem: str
    name: str
    cls: type
    backends: Tuple[str, ...]


def models() -> Dict[str, Model]:
    """The models of this package, by stem.

    Returns
    -------
    dict of str to Model
        ``{stem: Model(stem, name, cls, backends)}`` in a fixed order.

    Examples
    --------
    >>> import nlsepy as nl
    >>> m = nl.models()["fd"]
    >>> m.cls is nl.NLSE, m.name, "cpu" in m.backends
    (True, 'NLSE', True)
    """
    return {stem: Model(stem, name, _CLASSES[name], backends(name)) for stem, name in _STEMS}
