"""The kernels' tuning switches: one declared table, a context manager, a reader.

Every choice a backend otherwise makes from the grid and the device (the
kernel form, tile and launch shapes, the path of a transpose) can be forced
by an environment variable ``NLSEPY_*``.  The C and CUDA backends read them
in one function per model (``csrc/<stem>/<stem>_tuning.c``), once, when a
solver handle is created, and keep them in the handle; a value that is
unset, empty or not accepted leaves the backend's own choice (but
``NLSEPY_DEC_KERNEL`` takes any integer: one that names no form runs the
plain loop).  :func:`tuning` accepts only the declared values.  Two switches
of the Maxwell-Bloch CUDA kernel are compile definitions instead (CMake
cache entry ``NLSEPY_MBLOCH_CUDA_DEFS``).  The distribution layer reads
``NLSEPY_HALO`` and ``NLSEPY_CUDA_DEVICE`` (model ``"dist"``) when a
distributed solver is set up.

The defaults are the fastest choices measured (``bench/RESULTS.md``); the
switches exist for benchmarks and for tests that compare the kernel forms.

=======================  ====================================================
:func:`switches`         the table: every switch of a model, or of all
:func:`tuning`           a context manager that sets switches for the
                         handles created inside it and restores the
                         environment on exit
:func:`current`          the settings in force now, read as the backends
                         read them
:func:`markdown`         a model's table as Markdown (for docs/models/)
=======================  ====================================================

A switch's keyword is its variable without ``NLSEPY_``, in lower case:
``NLSEPY_DEC_KERNEL`` is ``dec_kernel``.

Examples
--------
>>> from nlsepy.common.tuning import tuning, current
>>> with tuning(dec_kernel=21, dec_march_band=8):  # doctest: +SKIP
...     sim = nl.DecGPE(...)           # this handle marches with bands of 8
>>> current("dec")["dec_kernel"] is None          # doctest: +SKIP
True
"""

from __future__ import annotations

import contextlib
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

import numpy as np

#: The names :func:`switches` takes: the model stems, and "dist" for the distribution layer.
MODELS: Tuple[str, ...] = ("fd", "dipolar", "magnet", "mbloch", "dec", "dist")


@dataclass(frozen=True)
class Switch:
    """One tuning switch.

    Attributes
    ----------
    model : str
        The model stem (or ``"dist"``).
    keyword : str
        Its keyword in :func:`tuning` and :func:`current`.
    env : str
        The environment variable, or for a build-time switch the compile
        definition.
    allowed : str
        The values it takes, in words.
    default : str
        What the backend does when it is unset.
    doc : str
        What it does, in one line.
    when : str
        ``"runtime"``: read from the environment when a handle is created
        (for ``"dist"``, when a distributed solver is set up); ``"build"``:
        a compile definition, fixed when the library is built.
    values : tuple of str or None
        The accepted values, where they are a short list.
    encode : callable
        The check of a value given to :func:`tuning`: the variable's text,
        or an exception.
    read : callable
        The backend's parsing of the variable's text (None when unset): the
        value in force, None for the default.
    """

    model: str
    keyword: str
    env: str
    allowed: str
    default: str
    doc: str
    when: str = "runtime"
    values: Optional[Tuple[str, ...]] = None
    encode: Callable[[Any], str] = field(default=str, repr=False, compare=False)
    read: Callable[[Optional[str]], Any] = field(default=lambda v: v, repr=False, compare=False)


# ---------------------------------------------------------------------------
# C's parsing of a variable's value (atoi, atof, sscanf), for current()
# ---------------------------------------------------------------------------

_INT = re.compile(r"[ \t\n\v\f\r]*([+-]?[0-9]+)")
_FLOAT = re.compile(r"[ \t\n\v\f\r]*([+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[+-]?[0-9]+)?"
                    r"|inf(?:inity)?|nan))", re.IGNORECASE)
_HEX = re.compile(r"[ \t\n\v\f\r]*([+-]?0x(?:[0-9a-f]+\.?[0-9a-f]*|\.[0-9a-f]+)(?:p[+-]?[0-9]+)?)",
                  re.IGNORECASE)
_TILE = re.compile(r"[ \t\n\v\f\r]*([+-]?[0-9]+)x[ \t\n\v\f\r]*([+-]?[0-9]+)")


def _atoi(v: str) -> int:
    m = _INT.match(v)
    return int(m.group(1)) if m else 0


def _atof(v: str) -> float:
    m = _HEX.match(v)
    if m:
        return float.fromhex(m.group(1))
    m = _FLOAT.match(v)
    return float(m.group(1)) if m else 0.0


def _read_count(v: Optional[str]) -> Optional[int]:
    n = _atoi(v) if v is not None else 0
    return n if n > 0 else None


def _read_kernel(v: Optional[str]) -> Optional[int]:
    n = _atoi(v) if v else -1
    return n if n >= 0 else None


def _read_mib(v: Optional[str]) -> Optional[float]:
    x = _atof(v) if v is not None else 0.0
    return x if x > 0 else None


def _read_ring(v: Optional[str]) -> Optional[int]:
    n = _atoi(v) if v else 0
    return n if 4 <= n <= 6 else None


def _read_tile(v: Optional[str]) -> Optional[Tuple[int, int]]:
    m = _TILE.match(v) if v is not None else None
    if not m:
        return None
    a, b = (int(g) % 2**32 for g in m.groups())  # %u wraps a sign
    return (a, b) if a > 0 and b > 0 else None


def _read_word(*words: str) -> Callable[[Optional[str]], Optional[str]]:
    return lambda v: v if v in words else None


def _read_power_of_two(v: Optional[str]) -> Optional[int]:
    n = _atoi(v) if v is not None else 0
    return n if 1 <= n <= 32 and n & (n - 1) == 0 else None


def _read_pipe(v: Optional[str]) -> Optional[int]:
    n = _atoi(v) if v is not None else 0
    return n if n >= 1 else None


def _read_halo(v: Optional[str]) -> Optional[str]:
    return "host" if v is not None and v.strip().lower() == "host" else None


def _read_device(v: Optional[str]) -> Any:
    s = (v or "").strip()
    if not s:
        return None
    try:
        return int(s)
    except ValueError:
        return s  # the distribution layer refuses it


def _read_build(v: Optional[str]) -> None:
    return None


# ---------------------------------------------------------------------------
# checks of tuning()'s values: the value as the variable's text, else raise
# ---------------------------------------------------------------------------

class _Refused(ValueError):
    pass


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _as_int(value: Any) -> int:
    if _is_int(value):
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"[+-]?[0-9]+", value):
        return int(value)
    raise _Refused


def _one_of(*values: Any) -> Callable[[Any], str]:
    words = tuple(str(v) for v in values)

    def encode(value: Any) -> str:
        text = str(int(value)) if _is_int(value) else value
        if isinstance(text, str) and text in words:
            return text
        raise _Refused
    return encode


def _at_least(lo: int) -> Callable[[Any], str]:
    def encode(value: Any) -> str:
        n = _as_int(value)
        if n < lo or n > 2**31 - 1:  # the backends read a C int
            raise _Refused
        return str(n)
    return encode


def _positive_number(value: Any) -> str:
    if isinstance(value, (bool, np.bool_)):
        raise _Refused
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise _Refused from None
    if not (math.isfinite(x) and x > 0):
        raise _Refused
    return str(int(value)) if _is_int(value) else repr(x)


def _tile(value: Any) -> str:
    if isinstance(value, str):
        m = re.fullmatch(r"([0-9]+)x([0-9]+)", value)
        pair = tuple(int(g) for g in m.groups()) if m else ()
    elif isinstance(value, (tuple, list)) and len(value) == 2 and all(_is_int(v) for v in value):
        pair = tuple(int(v) for v in value)
    else:
        pair = ()
    if len(pair) != 2 or min(pair) < 1:
        raise _Refused
    return f"{pair[0]}x{pair[1]}"


# ---------------------------------------------------------------------------
# the table
# ---------------------------------------------------------------------------

_DEC_KERNELS = tuple(range(10)) + (18, 21) + tuple(range(23, 30))

_TABLE: Tuple[Switch, ...] = (
    # -- dipolar (distributed solver: CPU ranks and GPU slabs) --
    Switch("dipolar", "dipolar_xsolve", "NLSEPY_DIPOLAR_XSOLVE",
           '"transpose", "substructure"',
           "substructure (the highest choice of any rank wins: the transposes "
           "only where every rank asks for them; one GPU rank alone transposes "
           "in place)",
           "How a distributed run's x solve crosses the slabs: transposes to x "
           "pencils and back, or each slab's own systems coupled through their "
           "lines' end values.",
           values=("transpose", "substructure"),
           encode=_one_of("transpose", "substructure"), read=_read_word("transpose")),
    Switch("dipolar", "dipolar_copy", "NLSEPY_DIPOLAR_COPY",
           '"engines", "kernel"',
           "where other ranks share this GPU, the SMs copy the blocks for them "
           "and for this rank itself, the copy engines the rest",
           "How a GPU slab's transposes move their blocks: by the copy engines "
           "or by a copy kernel on the SMs, for every rank alike.",
           values=("engines", "kernel"),
           encode=_one_of("engines", "kernel"), read=_read_word("engines", "kernel")),
    # -- mbloch (CUDA backend) --
    Switch("mbloch", "mbloch_kernel", "NLSEPY_MBLOCH_KERNEL",
           '"tc", "tcf", "tc64", "simt"',
           'by the device ("tc"): the tensor-core kernel where the device has '
           "FP64 and TF32 mma and each half has at most 32 levels (in float the "
           "warpgroup kernel on sm_90 for 17 to 32 levels a half, else the "
           "mma.sync split-TF32 one), else the plain kernel",
           'The atom kernel: "simt" the plain kernel (for open systems the '
           'general density-matrix kernel, also at two or three levels), "tc64" '
           'the FP64 tensor-core kernel for float too, "tcf" the mma.sync float '
           'kernel instead of the warpgroup one, "tc" the default choice.',
           values=("tc", "tcf", "tc64", "simt"),
           encode=_one_of("tc", "tcf", "tc64", "simt"),
           read=_read_word("tcf", "tc64", "simt")),
    Switch("mbloch", "mbloch_atoms_per_block", "NLSEPY_MBLOCH_ATOMS_PER_BLOCK",
           "1, 2, 4, 8, 16, 32",
           "about 512 threads of one level each, fewer where the registers or "
           "the shared memory do not allow them",
           "Atoms a thread block of the plain kernel takes (halved further "
           "where the block does not fit).",
           values=("1", "2", "4", "8", "16", "32"),
           encode=_one_of(1, 2, 4, 8, 16, 32), read=_read_power_of_two),
    Switch("mbloch", "mbloch_pipe", "NLSEPY_MBLOCH_PIPE",
           "an integer >= 1",
           "as many z slices as the device holds at once (at most 8 for the "
           "tensor-core kernels, 64 for the open systems' kernels), fewer where "
           "their buffers do not fit in a quarter of the free memory",
           "The most z slices a launch of the tensor-core or open-system "
           "kernel holds (1: one z step a launch).",
           encode=_at_least(1), read=_read_pipe),
    Switch("mbloch", "mbloch_syncthreads", "NLSEPY_MBLOCH_SYNCTHREADS",
           "0, 1, 2",
           "0: the mbarrier",
           "The float mma.sync kernel's stage barrier: 1 __syncthreads where a "
           "warp waits, 2 where it arrives (for racecheck; the same bits).",
           when="build", values=("0", "1", "2"), read=_read_build),
    Switch("mbloch", "mbloch_arrive_all", "NLSEPY_MBLOCH_ARRIVE_ALL",
           "0, 1",
           "0: one arrival a warp",
           "1: every thread arrives on the float kernel's mbarrier (for "
           "racecheck; the same bits).",
           when="build", values=("0", "1"), read=_read_build),
    # -- dec (CUDA backend) --
    Switch("dec", "dec_kernel", "NLSEPY_DEC_KERNEL",
           "0-9, 18, 21, 23-29",
           "by the grid and dtype: z marching on grids of at most 12 cells a "
           "block (the table held, 21, on cubic, FCC and BCC), else the row "
           "form of the grid",
           "The kernel form of every launch (the table of variants in "
           "cuda/dec/dec.cu, launch_n); every form gives the same bits.",
           values=tuple(str(k) for k in _DEC_KERNELS),
           encode=_one_of(*_DEC_KERNELS), read=_read_kernel),
    Switch("dec", "dec_tile_mib", "NLSEPY_DEC_TILE_MIB",
           "a number > 0",
           "8: y tiles of at most 8 MiB of psi(n) a plane",
           "The size of the y tiles the row forms sweep z through, in MiB "
           "of psi(n) a plane.",
           encode=_positive_number, read=_read_mib),
    Switch("dec", "dec_tile_rows", "NLSEPY_DEC_TILE_ROWS",
           "an integer >= 1",
           "from dec_tile_mib",
           "Rows of blocks of a y tile of the row forms (instead of "
           "dec_tile_mib).",
           encode=_at_least(1), read=_read_count),
    Switch("dec", "dec_blocks_per_sm", "NLSEPY_DEC_BLOCKS_PER_SM",
           "an integer >= 1",
           "as many thread blocks an SM as 2048 threads allow",
           "Thread blocks an SM of the row forms' launch grid.",
           encode=_at_least(1), read=_read_count),
    Switch("dec", "dec_march_ring", "NLSEPY_DEC_MARCH_RING",
           "4, 5, 6",
           "the deepest ring of 5 or 6 that keeps as many thread blocks an SM "
           "as 4 and leaves 32 KiB of the SM's shared memory to L1, else 4",
           "Plane slots of the z-marching kernel's ring with the table held "
           "(planes copied one, two or three ahead).",
           values=("4", "5", "6"), encode=_one_of(4, 5, 6), read=_read_ring),
    Switch("dec", "dec_march_tile", "NLSEPY_DEC_MARCH_TILE",
           '"TXxTY" (or a pair), positive integers',
           "64 x 8 blocks of one cell; 8 x 8 (complex64) or 8 x 6 (complex128) "
           "with the table held on 2 to 12 cells a block; square tiles of at "
           "most 768 (complex64) or 432 (complex128) cells a plane otherwise",
           "The z-marching kernel's tile in blocks (trimmed to at most 1024 "
           "cells a plane and to the grid).",
           encode=_tile, read=_read_tile),
    Switch("dec", "dec_march_chunks", "NLSEPY_DEC_MARCH_CHUNKS",
           "an integer >= 1",
           "about 8 units for each thread block the GPU holds, chunks of at "
           "least 16 layers (at most 72 where the tiles go in bands)",
           "Chunks of layers the z-marching kernel splits the own layers into "
           "(at most one a layer).",
           encode=_at_least(1), read=_read_count),
    Switch("dec", "dec_march_band", "NLSEPY_DEC_MARCH_BAND",
           "an integer >= 1",
           "the tiles row by row, or bands of 8 tile columns on the largest "
           "grids",
           "Tile columns of a band of the z-marching kernel's order (at most "
           "the tile columns).",
           encode=_at_least(1), read=_read_count),
    # -- dist (the distribution layer, Python) --
    Switch("dist", "halo", "NLSEPY_HALO",
           '"host"',
           "device to device through CUDA IPC where the GPU ranks share a node",
           "Halo rows and transposes of GPU ranks staged through host memory "
           "and MPI instead of device-to-device copies.",
           values=("host",), encode=_one_of("host"), read=_read_halo),
    Switch("dist", "cuda_device", "NLSEPY_CUDA_DEVICE",
           "a device index >= 0",
           "the rank's index among its node's ranks, modulo the node's GPUs",
           "The GPU a rank takes, instead of its index among its node's ranks "
           "(e.g. several ranks sharing one GPU).",
           encode=_at_least(0), read=_read_device),
)

_BY_KEYWORD: Dict[str, Switch] = {s.keyword: s for s in _TABLE}


def _check_model(model: Any) -> str:
    if model not in MODELS:
        raise ValueError(f"model must be one of {', '.join(map(repr, MODELS))}, got {model!r}")
    return model


def switches(model: Optional[str] = None) -> Dict[str, Switch]:
    """The declared table of tuning switches.

    Parameters
    ----------
    model : str, optional
        A model stem (``"fd"``, ``"dipolar"``, ``"magnet"``, ``"mbloch"``,
        ``"dec"``) or ``"dist"`` for the distribution layer; every switch
        when omitted.

    Returns
    -------
    dict of str to Switch
        The switches by keyword, in the table's order (empty for a model
        without switches).

    Raises
    ------
    ValueError
        `model` is not one of the names above.

    Examples
    --------
    >>> from nlsepy.common.tuning import switches
    >>> switches("dec")["dec_kernel"].env
    'NLSEPY_DEC_KERNEL'
    >>> switches("fd")
    {}
    """
    if model is None:
        return dict(_BY_KEYWORD)
    _check_model(model)
    return {k: s for k, s in _BY_KEYWORD.items() if s.model == model}


def _encode(keyword: str, value: Any) -> Optional[str]:
    """The variable's text for `value` (None: unset), else ValueError."""
    s = _BY_KEYWORD.get(keyword)
    if s is None:
        raise ValueError(f"{keyword!r} is not a tuning switch; the switches are "
                         f"{', '.join(_BY_KEYWORD)}")
    if s.when == "build":
        raise ValueError(f"{keyword} ({s.env}) is a build-time switch, a CMake define "
                         f"(-DNLSEPY_MBLOCH_CUDA_DEFS={s.env}=<value>), not read at run time")
    if value is None:
        return None
    try:
        return s.encode(value)
    except _Refused:
        raise ValueError(f"{keyword} must be {s.allowed}, got {value!r}") from None


@contextlib.contextmanager
def tuning(**settings: Any) -> Iterator[Dict[str, Optional[str]]]:
    """Set tuning switches for the solver handles created inside the block.

    Each keyword sets its environment variable (``dec_kernel=21`` sets
    ``NLSEPY_DEC_KERNEL=21``; ``None`` unsets it, so the backend chooses);
    the backends read the variables when a handle is created, so a handle
    keeps the settings it was created with.  On exit, also on an error, the
    variables get back the values they had before.  The environment is the
    process's: do not create handles on other threads meanwhile.

    Parameters
    ----------
    **settings
        Keywords of :func:`switches` (any model's) and their values.

    Yields
    ------
    dict of str to str or None
        The variables set (None: unset) in the block.

    Raises
    ------
    ValueError
        A keyword that is not in the table, a value it does not take (the
        message names both and lists the accepted values), or a build-time
        switch.  Nothing is set then.

    Examples
    --------
    >>> import nlsepy as nl                              # doctest: +SKIP
    >>> from nlsepy.common.tuning import tuning
    >>> with tuning(dec_kernel=21, dec_march_band=8):  # doctest: +SKIP
    ...     sim = nl.DecGPE(...)
    """
    wanted: Dict[str, Optional[str]] = {}
    for keyword, value in settings.items():  # every value checked before any is set
        text = _encode(keyword, value)
        wanted[_BY_KEYWORD[keyword].env] = text
    before = {env: os.environ.get(env) for env in wanted}
    try:
        for env, text in wanted.items():
            _put(env, text)
        yield dict(wanted)
    finally:
        for env, text in before.items():
            _put(env, text)


def _put(env: str, text: Optional[str]) -> None:
    if text is None:
        os.environ.pop(env, None)
    else:
        os.environ[env] = text


def current(model: str) -> Dict[str, Any]:
    """The run-time switches of a model as a handle created now would take them.

    Each variable is parsed as the backend parses it; a switch that is
    unset, empty or set to a value the backend does not take reads None
    (the backend's own choice, the table's ``default``).  Build-time
    switches are not listed.

    Parameters
    ----------
    model : str
        A model stem or ``"dist"`` (see :func:`switches`).

    Returns
    -------
    dict of str to object
        Keyword to value: an int, a float (``dec_tile_mib``), a str, a pair
        of ints (``dec_march_tile``) or None.

    Raises
    ------
    ValueError
        `model` is not one of the names of :func:`switches`.

    Examples
    --------
    >>> from nlsepy.common.tuning import current, tuning
    >>> with tuning(mbloch_pipe=1):
    ...     current("mbloch")["mbloch_pipe"]
    1
    """
    return {k: s.read(os.environ.get(s.env)) for k, s in switches(model).items()
            if s.when == "runtime"}


def markdown(model: str) -> str:
    """A model's switches as a Markdown table (switch, values, default, what it does).

    Parameters
    ----------
    model : str
        A model stem or ``"dist"`` (see :func:`switches`).

    Returns
    -------
    str
        The table, or a sentence saying the model has no switches.
    """
    rows = switches(model).values()
    if not rows:
        return f"The {model} model has no tuning switches."
    lines = ["| switch | values | default | what it does | read |",
             "|---|---|---|---|---|"]
    for s in rows:
        when = ("build time (CMake define)" if s.when == "build" else
                "when a distributed solver is set up" if s.model == "dist" else
                "at handle creation")
        lines.append(f"| `{s.env}` | {s.allowed} | {s.default} | {s.doc} | {when} |")
    return "\n".join(lines)
