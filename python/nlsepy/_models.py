"""The models of nlsepy, each under one stem in every layer of the package."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

# stem -> Python class name, in the order of the mission
_STEMS = (("fd", "NLSE"), ("dipolar", "DipolarGPE"), ("magnet", "CoaxialMagnet"),
          ("mbloch", "MaxwellBloch"), ("dec", "DecGPE"))


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
    import nlsepy
    from ._backend import backends
    return {stem: Model(stem, name, getattr(nlsepy, name), backends(name))
            for stem, name in _STEMS}
