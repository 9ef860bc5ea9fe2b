"""``KEY = value`` input files: what the DBEC-GP (:mod:`~nlsepy.dipolar.dbec`)
and BEC-GP-ROT-OMP (:mod:`~nlsepy.dipolar.rot`) front ends share.

Both programs read files of ``KEY = value`` lines with ``#`` comments.  A
:class:`KeyTable` says which keys a program knows and of what kind each value
is (integer, number, text; which texts name output files); :func:`read_input`
parses a file against one table, :func:`parse_overrides` and
:func:`apply_overrides` type ``--set KEY=VALUE`` items the same way, and
:func:`keys_in` lists a file's keys without judging them (the front end tells
the program from them).  The checks' messages name the file, the line and the
key.  Also here: the run's result record (:class:`DBECResult`), the plan of a
run's output files (all or none, :func:`plan_outputs`) and DBEC-GP's Simpson
rule (:func:`simpson`), which both programs use.

Call direction: ``dbec.py`` over ``rot.py`` over this module.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ..common.outputs import OutputSet, check_name

__all__ = ["InputError", "KeyTable", "DBECResult", "BOHR_RADIUS", "read_input", "keys_in",
           "parse_overrides", "apply_overrides", "where", "need", "positive", "plan_outputs",
           "simpson", "simpson_weights", "first_of"]

#: Bohr radius in metres (CODATA 2018)
BOHR_RADIUS = 5.29177210903e-11

#: the largest size of an integer key's value (grid sizes are checked tighter)
INT_MAX = 2 ** 63 - 1
_INT_RE = re.compile(r"[+-]?[0-9]+\Z")


class InputError(ValueError):
    """An input file that cannot be used (names the key and line)."""


@dataclass(frozen=True)
class KeyTable:
    """The keys of one program and the kind of each value.

    Attributes
    ----------
    program : str
        The program's name, for messages.
    ints, floats, strs : frozenset of str
        Keys taking an integer literal, a finite number, a text.
    outputs : frozenset of str
        Text keys naming output files (plain names: no folder part).
    """

    program: str
    ints: FrozenSet[str]
    floats: FrozenSet[str]
    strs: FrozenSet[str]
    outputs: FrozenSet[str] = frozenset()

    @property
    def keys(self) -> FrozenSet[str]:
        """Every key of the program."""
        return self.ints | self.floats | self.strs

    def union(self, other: "KeyTable", program: str) -> "KeyTable":
        """The keys of both tables (a key is of one kind in both)."""
        return KeyTable(program, self.ints | other.ints, self.floats | other.floats,
                        self.strs | other.strs, self.outputs | other.outputs)


def parse_value(table: KeyTable, key: str, value: str, where_: str) -> Any:
    """The typed value of `key` written as the text `value`.

    Integer keys take integer literals (``64``, not ``64.0`` or ``1e2``),
    number keys finite numbers (Fortran's ``1.d-6`` too), string keys the
    text.  `where_` (file and line, or the override) starts the message.
    """
    if key in table.ints:
        if not _INT_RE.match(value):
            raise InputError(f"{where_}: key {key} must be an integer, got {value!r}")
        return check_value(table, key, int(value), where_)
    if key in table.floats:
        try:
            v = float(value.replace("d", "e").replace("D", "E"))
        except ValueError:
            raise InputError(f"{where_}: key {key} must be a number, got {value!r}") from None
        return check_value(table, key, v, where_)
    return check_value(table, key, value, where_)


def check_value(table: KeyTable, key: str, value: Any, where_: str) -> Any:
    """`value` (a Python object) checked against the kind of `key`.

    Integers are integers (``bool`` is not one) of at most 2**63 - 1 in
    size; numbers are finite ints or floats; output names are plain file
    names.
    """
    if key in table.ints:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise InputError(f"{where_}: key {key} must be an integer, got {value!r}")
        value = int(value)
        if abs(value) > INT_MAX:
            raise InputError(f"{where_}: key {key} = {value} is out of range (at most "
                             f"{INT_MAX} in size)")
        return value
    if key in table.floats:
        if isinstance(value, (bool, np.bool_)) or not isinstance(
                value, (int, float, np.integer, np.floating)):
            raise InputError(f"{where_}: key {key} must be a number, got {value!r}")
        v = float(value)
        if not math.isfinite(v):
            raise InputError(f"{where_}: key {key} must be finite, got {value!r}")
        return v
    if not isinstance(value, str):
        raise InputError(f"{where_}: key {key} must be a string, got {value!r}")
    if key in table.outputs:
        try:
            check_name(value, key)
        except (TypeError, ValueError) as exc:
            raise InputError(f"{where_}: {exc}") from None
    return value


def _lines(path: str) -> List[Tuple[int, str, str]]:
    """The non-blank lines of the file at `path` without their comments:
    (line number, text, the raw line)."""
    try:
        # utf-8-sig: a byte-order mark (written by some Windows editors) is dropped
        with open(path, encoding="utf-8-sig") as fh:
            text_lines = fh.read().splitlines()
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not an input file of KEY = value lines (not UTF-8 text: "
                         f"{exc.reason} at byte {exc.start})") from None
    out = []
    for no, raw in enumerate(text_lines, 1):
        text = raw.split("#", 1)[0].strip()
        if text:
            out.append((no, text, raw))
    return out


def split_key(text: str, where_: str, expected: str,
              table: Optional[KeyTable] = None) -> Tuple[str, str]:
    """``KEY = value`` split into the key (upper case) and its non-empty value
    text; InputError at `where_` otherwise (`expected`: what a line should
    look like).  With `table`, the key must be one of its keys."""
    if "=" not in text:
        raise InputError(f"{where_}: {expected}")
    key, value = (s.strip() for s in text.split("=", 1))
    key = key.upper()
    if table is not None and key not in table.keys:
        raise InputError(f"{where_}: unknown key {key!r}; known keys of {table.program} "
                         f"inputs: {', '.join(sorted(table.keys))}")
    if not value:
        raise InputError(f"{where_}: key {key} has no value")
    return key, value


def keys_in(path: Union[str, os.PathLike]) -> Dict[str, int]:
    """The keys of an input file, each with the line it is on (the file's
    form is checked, its keys and values are not).

    Raises
    ------
    InputError
        A line that is not ``KEY = value``.
    OSError
        The file cannot be read.
    """
    path = os.fspath(path)
    out: Dict[str, int] = {}
    for no, text, raw in _lines(path):
        key, _ = split_key(text, f"{path}:{no}", f"expected KEY = value, got {raw.strip()!r}")
        out.setdefault(key, no)
    return out


def read_input(path: Union[str, os.PathLike], table: KeyTable) -> Dict[str, Any]:
    """Parse an input file against the keys of `table`.

    Returns
    -------
    dict
        Key -> value (int, float or str), with ``"_line"`` mapping each key
        to its line number, ``"_path"`` the file and ``"_override"`` the
        keys set by :func:`apply_overrides`; a bad line raises
        :class:`InputError` naming the key and the line (what
        :func:`nlsepy.dbec.read_input` documents), an unreadable file OSError.
    """
    path = os.fspath(path)
    out: Dict[str, Any] = {}
    lines: Dict[str, int] = {}
    for no, text, raw in _lines(path):
        where_ = f"{path}:{no}"
        key, value = split_key(text, where_, f"expected KEY = value, got {raw.strip()!r}", table)
        if key in out:
            raise InputError(f"{where_}: key {key} repeated (first on line {lines[key]})")
        out[key] = parse_value(table, key, value, where_)
        lines[key] = no
    out["_line"] = lines
    out["_path"] = path
    out["_override"] = set()
    return out


def parse_overrides(items: Sequence[str], table: KeyTable) -> Dict[str, Any]:
    """Typed overrides from ``KEY=VALUE`` strings (``--set`` on the command line).

    Raises
    ------
    InputError
        A malformed item, an unknown or repeated key, or a bad value (the
        message quotes the item).
    """
    out: Dict[str, Any] = {}
    for item in items:
        where_ = f"--set {item}"
        key, value = split_key(item, where_, "expected KEY=VALUE", table)
        if key in out:
            raise InputError(f"{where_}: key {key} given twice")
        out[key] = parse_value(table, key, value, where_)
    return out


def apply_overrides(cfg: Dict[str, Any], overrides: Optional[Mapping[str, Any]],
                    table: KeyTable) -> None:
    """Replace keys of `cfg` by `overrides` (key -> value, a text typed as in
    a file or a Python value checked against its kind)."""
    for k, v in (overrides or {}).items():
        key = k.upper() if isinstance(k, str) else k
        where_ = f"override {k!r}"
        if key not in table.keys:
            raise InputError(f"{where_}: unknown key {k!r} (not a key of {table.program} "
                             f"inputs)")
        cfg[key] = (parse_value(table, key, v.strip(), where_) if isinstance(v, str)
                    else check_value(table, key, v, where_))
        cfg["_line"].pop(key, None)
        cfg["_override"].add(key)


def where(cfg: Mapping[str, Any], key: str) -> str:
    """Where `key` of `cfg` was given: ``file:line``, the override, or the file."""
    if key in cfg.get("_override", ()):
        return f"override {key}"
    no = cfg.get("_line", {}).get(key)
    return f"{cfg.get('_path', 'input')}:{no}" if no else cfg.get("_path", "input")


def need(cfg: Mapping[str, Any], key: str, why: str = "") -> Any:
    """The value of `key`; InputError naming the file and the key when missing."""
    if key not in cfg:
        raise InputError(f"{cfg.get('_path', 'input')}: missing key {key}{why}")
    return cfg[key]


def positive(cfg: Mapping[str, Any], key: str, allow_zero: bool = False) -> Any:
    """The value of `key`, > 0 (>= 0 with `allow_zero`), else InputError."""
    v = need(cfg, key)
    if v < 0 or (v == 0 and not allow_zero):
        cond = ">= 0" if allow_zero else "> 0"
        raise InputError(f"{where(cfg, key)}: key {key} must be {cond}, got {v!r}")
    return v


def plan_outputs(cfg: Mapping[str, Any], names: Mapping[str, str], base: str) -> OutputSet:
    """Check the run's folder and every output name before the run starts.

    `names`: output key (``KEY`` or ``KEY:part``) -> file name."""
    outs = OutputSet(base)
    outs.check_folder()
    for key, name in names.items():
        what = key.split(":")[0]
        try:
            outs.reserve(name, what)
        except ValueError as exc:  # the same name twice, or a folder in the way
            raise InputError(f"{where(cfg, what)}: {exc}") from None
    return outs


def simpson_weights(n: int) -> np.ndarray:
    """DBEC-GP's Simpson weights without h/3: 1, 4, 2, 4, ..., 2 or 4, 1."""
    w = np.full(n, 2.0)
    w[1::2] = 4.0
    w[0] = w[-1] = 1.0
    return w


def simpson(f: np.ndarray, h: float) -> float:
    """DBEC-GP's Simpson sum of the samples `f` of spacing `h`, as the solver's."""
    return float(h / 3.0 * np.dot(simpson_weights(len(f)), f))


@dataclass
class DBECResult:
    """What :func:`nlsepy.dipolar.dbec.run` did.

    Attributes
    ----------
    mode, geometry : str
        Program kind (``"imag"`` or ``"real"``; ``"3d"``, ``"2d-xy"``, ...).
    rows : dict
        Row label ("Initial", "After NSTP iter.", "NPAS iter.: 3", ...) ->
        the values printed in it.
    files : list of str
        Files written.
    gpe : DipolarGPE
        The solver, at the final state.
    seconds : float
        Wall-clock time of the run.
    summary : str
        The text of the summary file (``OUTPUT``).
    program : str
        ``"DBEC-GP"`` or ``"BEC-GP-ROT-OMP"``: whose input file it was.
    """

    mode: str
    geometry: str
    rows: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    files: List[str] = field(default_factory=list)
    gpe: Any = None
    seconds: float = 0.0
    summary: str = ""
    program: str = "DBEC-GP"


def first_of(keys: Iterable[str], present: Mapping[str, int]) -> Optional[str]:
    """The key of `keys` that comes first in the file (`present`: key -> line), or None."""
    found = [k for k in keys if k in present]
    return min(found, key=lambda k: present[k]) if found else None
