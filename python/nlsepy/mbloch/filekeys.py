"""The values and the plan of a Maxwell-Bloch run file
(:mod:`nlsepy.mbloch.config`, :mod:`nlsepy.mbloch.compat`): typed checks
whose errors name the file, the table, the key and the value, and
:class:`Plan`, the checked run."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

__all__ = ["Plan", "show", "number", "integer", "boolean", "string", "numbers", "table",
           "steps"]


def show(value: Any) -> str:
    """`value` as the file writes it (for messages)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a table"
    return repr(value)


def number(v: Any, what: str, positive: bool = False, nonneg: bool = False) -> float:
    """A finite number (> 0, >= 0 when asked); ValueError naming `what`."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"{what} must be a number, got {show(v)}")
    x = float(v)
    if not math.isfinite(x):
        raise ValueError(f"{what} must be finite, got {show(v)}")
    if positive and x <= 0:
        raise ValueError(f"{what} must be > 0, got {show(v)}")
    if nonneg and x < 0:
        raise ValueError(f"{what} must be >= 0, got {show(v)}")
    return x


def integer(v: Any, what: str, minimum: Optional[int] = None) -> int:
    """An integer (not a boolean, not 2.0), >= `minimum` when given."""
    if type(v) is not int:
        raise ValueError(f"{what} must be an integer, got {show(v)}")
    if minimum is not None and v < minimum:
        raise ValueError(f"{what} must be >= {minimum}, got {show(v)}")
    return v


def boolean(v: Any, what: str) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"{what} must be true or false, got {show(v)}")
    return v


def string(v: Any, what: str, choices: Optional[Sequence[str]] = None) -> str:
    if not isinstance(v, str):
        raise ValueError(f"{what} must be a string, got {show(v)}")
    if choices is not None and v not in choices:
        raise ValueError(f"{what} must be one of {list(choices)}, got {show(v)}")
    return v


def numbers(v: Any, what: str, ndim: int = 1, nonneg: bool = False) -> np.ndarray:
    """A list (ndim 1) or list of equal lists (ndim 2) of finite numbers."""
    if not isinstance(v, list) or not v:
        raise ValueError(f"{what} must be a non-empty list{' of lists' * (ndim - 1)} of "
                         f"numbers, got {show(v)}")
    if ndim == 2:
        rows = [numbers(r, f"{what}[{i}]", 1, nonneg) for i, r in enumerate(v)]
        if len({r.size for r in rows}) != 1:
            raise ValueError(f"{what} must be a list of equally long lists, got row lengths "
                             f"{[r.size for r in rows]}")
        return np.array(rows)
    return np.array([number(x, f"{what}[{i}]", nonneg=nonneg) for i, x in enumerate(v)])


def table(cfg: Dict[str, Any], name: str, keys: set, source: str,
          required: Sequence[str] = ()) -> Dict[str, Any]:
    """The table `name` of `cfg` ({} when absent), its keys among `keys`."""
    sec = cfg.get(name, {})
    if not isinstance(sec, dict):
        raise ValueError(f"{source}: [{name}] must be a table, got {show(sec)}")
    unknown = sorted(set(sec) - keys)
    if unknown:
        raise ValueError(f"{source}: unknown key(s) in [{name}]: {unknown}; known keys: "
                         f"{sorted(keys)}")
    for k in required:
        if k not in sec:
            raise ValueError(f"{source}: [{name}] needs the key {k!r}")
    return sec


def steps(sec: Dict[str, Any], h: str, n: str, top: str, where: str, minimum: int
          ) -> Tuple[float, int]:
    """``(h, n)`` from `h` and either `n` or the span `top` (a whole number
    of steps; the grid has n points for time, n steps for z)."""
    if h not in sec:
        raise ValueError(f"{where} needs the key {h!r}")
    step = number(sec[h], f"{where} {h}", positive=True)
    if (n in sec) == (top in sec):
        raise ValueError(f"{where} needs exactly one of {n!r} and {top!r}")
    if n in sec:
        return step, integer(sec[n], f"{where} {n}", minimum)
    span = number(sec[top], f"{where} {top}", positive=True)
    k = round(span / step)
    if abs(k * step - span) > 1e-9 * span:
        raise ValueError(f"{where} {top} = {span!r} is not a whole number of steps {h} = "
                         f"{step!r} ({span / step!r} steps)")
    # a positive span of whole steps has k >= 1: n_t = k + 1 points, n_z = k steps
    return step, int(k) + (1 if n == "n_t" else 0)


# ------------------------------------------------------------------ plan
@dataclass
class Plan:
    """A checked input file: what :func:`nlsepy.mbloch.config.build_model` and
    :func:`nlsepy.mbloch.config.run_config` use.

    Attributes
    ----------
    source : str
        The file (for messages).
    name : str
        The stem of the outputs.
    model : dict
        Keyword arguments of :class:`nlsepy.MaxwellBloch` (``decay`` and
        ``dephasing`` only when the file gives them).
    fields : dict
        ``{l: (n_t,) complex array}``, the input pulses by mode.
    run : dict
        Keyword arguments of :meth:`nlsepy.MaxwellBloch.run` but the fields.
    outputs : dict
        ``run_file``, ``plot``, ``summary``: file names, or None to leave out.
    labels : dict
        ``{l: label}`` of the modes that carry a named pulse.
    field_scale : dict
        ``{l: s}``: the file's field on mode l is ``s`` times the model's
        (1 for every mode of a native file).
    t0, z0 : float
        The file's time at ``t = 0`` and position at ``z = 0`` of the model.
    format : str
        "nlsepy" or "maxwellbloch".
    """

    source: str
    name: str
    model: Dict[str, Any]
    fields: Dict[int, np.ndarray]
    run: Dict[str, Any]
    outputs: Dict[str, Optional[str]]
    labels: Dict[int, str] = field(default_factory=dict)
    field_scale: Dict[int, float] = field(default_factory=dict)
    t0: float = 0.0
    z0: float = 0.0
    format: str = "nlsepy"

    @property
    def t(self) -> np.ndarray:
        """The model's time grid."""
        return self.model["h_t"] * np.arange(self.model["n_t"])
