"""BEC-GP-ROT-OMP compatible runs: its input files, its stages, its output files.

BEC-GP-ROT-OMP (R. Kishor Kumar, V. Lončar, P. Muruganandam, S. K.
Adhikari, A. Balaž, Comput. Phys. Commun. 240 (2019) 74) solves the
Gross-Pitaevskii equation of a condensate in a trap rotating about z, in 2D
(the x-y plane of a condensate squeezed along z) and in 3D, in imaginary time
(``OPTREIM = 1``: the ground state in the rotating frame, vortex lattices) or
real time (``OPTREIM = 2``).  Its input files are ``KEY = value`` lines as
DBEC-GP's, with keys of their own (``OPTSCALE``, ``OPTREIM``, ``OMEGA``,
``D_Z``, ``SEED``, ``ITER``, ``OUTTYPE``, ``OUTFLAGS`` ...); ``python -m
nlsepy dbec FILE`` and :func:`nlsepy.dipolar.dbec.run` tell them from DBEC-GP's by
those keys and run them here, unmodified, on :class:`nlsepy.DipolarGPE` with
its rotation term (docs/DBEC_FILES.md lists the keys and the files).

What the published programs do and this module does alike:

* the grid: NX and NY made odd (an even value takes one point more), NZ as
  given; ``x_i = (i - N/2) DX``;
* the equation: ``OPTSCALE`` as DBEC-GP's ``OPTION``; in 2D the contact
  coupling ``G_2D = G_3D / (sqrt(2 pi) D_Z)`` (a Gaussian of width D_Z along
  z, i.e. the 2D reduction of a trap of frequency ``1/D_Z^2``);
* the start: with ``NSTP > 0`` the trap's Gaussian, times ``exp(2 pi i u)``
  with u drawn per (x, y) point (``ADD_RANDOM_PHASE``) and times ``x + i y``
  (``ADD_ONE_VORTEX``); with ``NSTP = 0`` the state in ``INPUT`` (text or
  binary, as ``FINALOUT`` writes it).  The numbers u are those of the
  published programs: the C standard's example generator (``next = next *
  1103515245 + 12345``, bits 16 to 30 of ``next``, divided by 32767) seeded
  with ``SEED`` and drawn in their order (y slow, x fast), so the ``Initial``
  row is theirs to the printed digits;
* the stages: NSTP steps with the coupling ramped from 0, NPAS steps with a
  row after every ``NPAS // ITER`` steps (``NPAS iter.: k``), NRUN steps; the
  ``Chem`` and ``Ener/N`` columns in their definition (below), ``<rho>`` the
  rms radius ``sqrt(<x^2> + <y^2> (+ <z^2>))``;
* the files: the summary (``OUTPUT.txt``), the rms table (``RMSOUT.txt``),
  the density files of INITOUT, NSTPOUT, NPASOUT (``-k`` per row) and
  NRUNOUT that ``OUTFLAGS`` selects, as text, binary or VTK (``OUTTYPE``), and
  the final state (``FINALOUT``), which an input reads back as ``INPUT``.

The printed chemical potential and energy are those of the published
programs: the projections on the real part of psi,
``mu = int Re psi (H psi) / int (Re psi)^2`` with the kinetic term
``int |grad Re psi|^2`` and the rotation term
``-OPTSCALE Omega int Re psi (x d_y - y d_x) Im psi``, the energy with half
the contact term; at a stationary state mu is the eigenvalue.  They are
computed here from the state (five-point derivatives with their end rules,
Simpson's rule).  Where nlsepy differs is said in docs/DBEC_FILES.md (the
``Norm`` column in imaginary time, text layouts of non-square sections).

Call direction: ``dbec.py`` over this module over ``keyfile.py``.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from ..common import backend as _backend
from ..common.guard import require_memory
from . import keyfile as _kf
from .keyfile import BOHR_RADIUS, DBECResult, InputError
from .solver import DipolarGPE

__all__ = ["KEYS", "MARKERS", "read_input", "run", "uniform_numbers"]

PROGRAM = "BEC-GP-ROT-OMP"
_WF_KEYS = ("INITOUT", "NSTPOUT", "NPASOUT", "NRUNOUT")
_OUTPUTS = ("OUTPUT", "RMSOUT", "FINALOUT") + _WF_KEYS
KEYS = _kf.KeyTable(
    PROGRAM,
    ints=frozenset({"OPTSCALE", "OPTREIM", "ADD_RANDOM_PHASE", "ADD_ONE_VORTEX", "NATOMS",
                    "SEED", "NX", "NY", "NZ", "NSTP", "NPAS", "NRUN", "ITER", "OUTTYPE",
                    "OUTSTPX", "OUTSTPY", "OUTSTPZ", "OUTFLAGS"}),
    floats=frozenset({"G0", "AHO", "AS", "OMEGA", "DX", "DY", "DZ", "DT", "GAMMA", "NU",
                      "LAMBDA", "D_Z"}),
    strs=frozenset({"INPUT"} | set(_OUTPUTS)),
    outputs=frozenset(_OUTPUTS))
#: keys only BEC-GP-ROT-OMP inputs have: one of them makes a file one of its inputs
MARKERS = ("OPTSCALE", "OPTREIM", "OMEGA", "D_Z", "ADD_RANDOM_PHASE", "ADD_ONE_VORTEX", "SEED",
           "ITER", "OUTTYPE", "OUTFLAGS")
#: keys of the 3D program that the 2D one does not have, and the 2D one's own
_KEYS_3D = ("NZ", "DZ", "LAMBDA", "OUTSTPZ")
_KEYS_2D = ("D_Z",)
#: the most points on one axis
_N_MAX = 2 ** 31 - 1
_TITLE = {"imag": "Imaginary", "real": "Real"}
#: OUTFLAGS: bit -> (file suffix, what, axes kept in file order (slow first),
#: integrated (True) or a section through the centre (False))
_FLAGS_2D = ((1, "-1d_x", "Integrated density X", "x", True),
             (2, "-1d_y", "Integrated density Y", "y", True),
             (4, "-2d", "Density", "yx", True))
_FLAGS_3D = ((1, "-1d_x", "Integrated density X", "x", True),
             (2, "-1d_y", "Integrated density Y", "y", True),
             (4, "-1d_z", "Integrated density Z", "z", True),
             (8, "-2d_xy", "Integrated_density_XY", "yx", True),
             (16, "-2d_xz", "Integrated_density_XZ", "zx", True),
             (32, "-2d_yz", "Integrated_density_YZ", "zy", True),
             (64, "-2d_xy0", "Density_XY0", "yx", False),
             (128, "-2d_x0z", "Density_X0Z", "zx", False),
             (256, "-2d_0yz", "Density_0YZ", "zy", False),
             (512, "-3d", "Density", "zyx", True))
#: OUTTYPE -> file ending of (curves, maps)
_ENDINGS = {1: ("txt", "txt"), 2: ("bin", "bin"), 3: ("ult", "vtk")}


def read_input(path: Union[str, os.PathLike]) -> Dict[str, Any]:
    """Parse a BEC-GP-ROT-OMP input file (keys and values checked as
    :func:`nlsepy.dipolar.dbec.read_input` checks DBEC-GP's).

    Returns
    -------
    dict
        Key -> value, with ``"_line"`` mapping each key to its line.

    Raises
    ------
    InputError
        A malformed line, an unknown or repeated key or a bad value (the
        message names the file, the line and the key).
    """
    return _kf.read_input(path, KEYS)


# ------------------------------------------------------------------ the start
def uniform_numbers(seed: int, n: int) -> np.ndarray:
    """The first `n` numbers in [0, 1] that BEC-GP-ROT-OMP draws with `seed`.

    The generator is the example of the C standard (``next = next *
    1103515245 + 12345`` modulo 2**32, seeded with ``next = seed``), each
    number bits 16 to 30 of ``next`` divided by 32767, as the published
    programs' ``bec_rand`` makes them.  Computed in blocks: the state `B`
    draws ahead is an affine map of the state now.

    Parameters
    ----------
    seed : int
        The seed (taken modulo 2**32, as the C programs take an int as
        unsigned).
    n : int
        How many numbers.

    Returns
    -------
    numpy.ndarray
        float64 array of length `n`.
    """
    a, c, mask = 1103515245, 12345, 0xFFFFFFFF
    block = max(1, min(n, 4096))
    state = np.empty(n, dtype=np.uint64)
    s = seed & mask
    for k in range(min(n, block)):
        s = (s * a + c) & mask
        state[k] = s
    jump_a, jump_c = 1, 0  # the map of `block` draws: s -> jump_a s + jump_c
    for _ in range(block):
        jump_a, jump_c = (jump_a * a) & mask, (jump_c * a + c) & mask
    ja, jc, m32 = np.uint64(jump_a), np.uint64(jump_c), np.uint64(mask)
    for i in range(block, n, block):
        m = min(block, n - i)
        # products of two numbers below 2**32 and a sum stay below 2**64
        state[i:i + m] = (state[i - block:i - block + m] * ja + jc) & m32
    return ((state >> np.uint64(16)) % np.uint64(32768)).astype(np.float64) / 32767.0


def _start(info: Mapping[str, Any]) -> np.ndarray:
    """The analytic start (NSTP > 0): the trap's normalised Gaussian, with the
    random phase and the vortex the input asks for (solver axes order)."""
    coords = info["coords"]
    omegas = info["trap"][:len(coords)]
    psi = np.ones((1,) * len(coords), dtype=np.complex128)
    for a, (x, w) in enumerate(zip(coords, omegas)):
        shape = [1] * len(coords)
        shape[a] = len(x)
        psi = psi * ((w / math.pi) ** 0.25 * np.exp(-0.5 * w * x * x)).reshape(shape)
    nx, ny = info["shape"][:2]
    plane = np.ones((nx, ny), dtype=np.complex128)
    if info["random_phase"]:
        u = uniform_numbers(info["seed"], nx * ny).reshape(ny, nx).T  # drawn y slow, x fast
        plane *= np.exp(2j * math.pi * u)
    if info["vortex"]:
        x, y = coords[0][:, None], coords[1][None, :]
        plane *= x + 1j * y
    return psi * plane.reshape(plane.shape + (1,) * (len(coords) - 2))


def _read_state(src: str, where: str, shape: Tuple[int, ...]) -> np.ndarray:
    """The state in the INPUT file `src`, as FINALOUT writes it: text pairs
    ``Re Im`` (a name ending in ``.txt``) or binary pairs of doubles, the last
    axis of the file (x) fastest; solver axes order back."""
    size = int(np.prod(shape, dtype=np.int64))
    fshape = tuple(reversed(shape))  # the file's order: (z,) y, x
    if not os.path.isfile(src):
        raise InputError(f"{where}: INPUT file {src!r} does not exist; run the imaginary-time "
                         f"input first (its FINALOUT writes it)")
    if src.endswith(".txt"):
        with open(src, "rb") as fh:
            tokens = fh.read().split()
        if len(tokens) != 2 * size:
            raise InputError(f"{where}: INPUT file {src!r} holds {len(tokens)} numbers, the "
                             f"grid {'x'.join(map(str, shape))} needs {2 * size} (Re Im per "
                             f"point): written for another grid, or truncated")
        try:
            pairs = np.array(tokens, dtype=np.float64)
        except ValueError as exc:
            raise InputError(f"{where}: INPUT file {src!r} is not a state written by "
                             f"FINALOUT ({exc})") from None
    else:
        found = os.path.getsize(src)
        if found != 16 * size:
            raise InputError(f"{where}: INPUT file {src!r} holds {found} bytes, the grid "
                             f"{'x'.join(map(str, shape))} needs {16 * size} (two doubles per "
                             f"point): written for another grid, or truncated")
        pairs = np.fromfile(src, dtype="<f8")
    if not np.all(np.isfinite(pairs)):
        raise InputError(f"{where}: the state in {src!r} is not finite (NaN or Inf)")
    psi = (pairs[0::2] + 1j * pairs[1::2]).reshape(fshape)
    return np.ascontiguousarray(psi.transpose())


# -------------------------------------------------------------- the settings
def _dims(cfg: Mapping[str, Any]) -> int:
    """2 or 3: the program the keys name (D_Z: 2D; NZ, DZ, LAMBDA: 3D)."""
    path = cfg["_path"]
    three = [k for k in _KEYS_3D if k in cfg]
    two = [k for k in _KEYS_2D if k in cfg]
    if three and two:
        raise InputError(f"{_kf.where(cfg, two[0])}: key {two[0]} is the 2D program's, but "
                         f"{three[0]} ({_kf.where(cfg, three[0])}) is the 3D program's: one "
                         f"file is the input of one program")
    if not three and not two:
        raise InputError(f"{path}: cannot tell the 2D from the 3D program of {PROGRAM}: give "
                         f"D_Z (2D) or NZ, DZ and LAMBDA (3D)")
    return 3 if three else 2


def _choice(cfg: Mapping[str, Any], key: str, values: Tuple[int, ...],
            default: Optional[int] = None) -> int:
    v = cfg.get(key, default) if default is not None else _kf.need(cfg, key)
    if v not in values:
        raise InputError(f"{_kf.where(cfg, key)}: {key} must be one of "
                         f"{', '.join(map(str, values))}, got {v!r}")
    return v


def _settings(cfg: Mapping[str, Any], base: str) -> Dict[str, Any]:
    """Every key checked, and what the run needs from them."""
    dims = _dims(cfg)
    axes = "xyz"[:dims]
    opt = _choice(cfg, "OPTSCALE", (1, 2))
    mode = {1: "imag", 2: "real"}[_choice(cfg, "OPTREIM", (1, 2))]
    if "G0" in cfg:
        g0 = cfg["G0"]
    else:
        why = " (or G0)"
        natoms, aho = _kf.need(cfg, "NATOMS", why), _kf.need(cfg, "AHO", why)
        _kf.positive(cfg, "NATOMS")
        _kf.positive(cfg, "AHO")
        g0 = 4 * math.pi * _kf.need(cfg, "AS", why) * natoms * BOHR_RADIUS / aho
    omega = _kf.need(cfg, "OMEGA")
    shape = []
    for a in axes:
        key = f"N{a.upper()}"
        n = _kf.positive(cfg, key)
        if a != "z":
            n |= 1  # the published programs' grids are odd: an even N takes one point more
        if n < 4 or n > _N_MAX:
            raise InputError(f"{_kf.where(cfg, key)}: {key} must be >= 4 and < {_N_MAX}, got "
                             f"{cfg[key]}")
        shape.append(n)
    spacing = tuple(_kf.positive(cfg, f"D{a.upper()}") for a in axes)
    dt = _kf.positive(cfg, "DT")
    gamma, nu = _kf.positive(cfg, "GAMMA"), _kf.positive(cfg, "NU")
    if dims == 3:
        lam = _kf.positive(cfg, "LAMBDA")
        fc = math.sqrt(lam / (2 * math.pi))
    else:
        d_z = _kf.positive(cfg, "D_Z")
        lam = 1.0 / (d_z * d_z)  # the 2D reduction's confinement: a Gaussian of width D_Z
        fc = 1.0 / (math.sqrt(2 * math.pi) * d_z)
    if mode == "imag" and abs(omega) >= min(gamma, nu):
        raise InputError(f"{_kf.where(cfg, 'OMEGA')}: |OMEGA| = {abs(omega)} is not below the "
                         f"radial trap frequencies (GAMMA = {gamma}, NU = {nu}): the rotating "
                         f"trap does not hold the condensate, and imaginary time has no ground "
                         f"state to find")
    nstp, npas, nrun = (_kf.positive(cfg, k, allow_zero=True) for k in ("NSTP", "NPAS", "NRUN"))
    every = npas
    if "ITER" in cfg:
        it = cfg["ITER"]
        if it < 1 or (npas > 0 and it > npas):
            raise InputError(f"{_kf.where(cfg, 'ITER')}: ITER must be >= 1 and <= NPAS = "
                             f"{npas}, got {it}")
        every = npas // it
    seed = cfg.get("SEED", 1)
    if not -2 ** 31 <= seed < 2 ** 32:
        raise InputError(f"{_kf.where(cfg, 'SEED')}: SEED must be a 32-bit integer, got {seed}")
    info: Dict[str, Any] = dict(
        dims=dims, axes=axes, geometry="3d" if dims == 3 else "2d-xy", mode=mode, option=opt,
        g0=g0, g2d=g0 * fc, omega=omega, shape=tuple(shape), spacing=spacing, dt=dt,
        trap=(gamma, nu, lam), nstp=nstp, npas=npas, nrun=nrun, every=every,
        rows=npas // every if every else 0, seed=seed,
        random_phase=_choice(cfg, "ADD_RANDOM_PHASE", (0, 1), 1) == 1,
        vortex=_choice(cfg, "ADD_ONE_VORTEX", (0, 1), 1) == 1)
    info["coords"] = tuple((np.arange(n) - n // 2) * h for n, h in zip(shape, spacing))
    if nstp == 0:
        name = _kf.need(cfg, "INPUT", " (the initial state: NSTP = 0 starts from INPUT)")
        info["input"] = os.path.join(base, name)
    elif "INPUT" in cfg:
        raise InputError(f"{_kf.where(cfg, 'INPUT')}: INPUT is read only when NSTP = 0 (with "
                         f"NSTP = {nstp} the published programs start from the Gaussian and "
                         f"ignore it); set NSTP = 0 or remove INPUT")
    wf = [k for k in _WF_KEYS if k in cfg]
    if wf:
        why = f" (needed by {wf[0]})"
        _kf.need(cfg, "OUTTYPE", why)
        _kf.need(cfg, "OUTFLAGS", why)
        for a in axes:
            _kf.need(cfg, f"OUTSTP{a.upper()}", why)
    info["outtype"] = _choice(cfg, "OUTTYPE", (1, 2, 3), 1)
    flags = cfg.get("OUTFLAGS", 0)
    top = 1 << len(_FLAGS_3D if dims == 3 else _FLAGS_2D)
    if not 0 <= flags < top:
        raise InputError(f"{_kf.where(cfg, 'OUTFLAGS')}: OUTFLAGS must be a sum of the "
                         f"{dims}D program's flags, 0 to {top - 1}, got {flags}")
    info["flags"] = flags
    info["outstp"] = tuple(_kf.positive(cfg, f"OUTSTP{a.upper()}") if f"OUTSTP{a.upper()}" in cfg
                           else 1 for a in axes)
    return info


# --------------------------------------------------------- the printed values
def _deriv(f: np.ndarray, h: float, axis: int) -> np.ndarray:
    """d f / d x_axis by the five-point rule, the two-point rule next to the
    ends and 0 at the ends (DBEC-GP's and BEC-GP-ROT-OMP's derivative)."""
    f = np.moveaxis(f, axis, 0)
    d = np.zeros_like(f)
    d[1] = (f[2] - f[0]) / (2 * h)
    d[2:-2] = (f[:-4] - 8 * f[1:-3] + 8 * f[3:-1] - f[4:]) / (12 * h)
    d[-2] = (f[-1] - f[-3]) / (2 * h)
    return np.moveaxis(d, 0, axis)


def _integral(f: np.ndarray, spacing: Tuple[float, ...]) -> float:
    """Simpson's rule over every axis (the last axis first)."""
    for h in reversed(spacing):
        f = f @ (_kf.simpson_weights(f.shape[-1]) * (h / 3.0))
    return float(f)


def _density(psi: np.ndarray) -> np.ndarray:
    """|psi|^2 as Re^2 + Im^2 (the published programs' and the rows' arithmetic)."""
    return psi.real * psi.real + psi.imag * psi.imag


def _row(gpe: DipolarGPE, info: Mapping[str, Any], g: float) -> Dict[str, Any]:
    """The values of one row, in the published programs' definitions, for
    the state of `gpe` and the contact coefficient `g` of the equation.

    ``norm``: sqrt(int |psi|^2); ``mu``, ``energy``: the projections on
    Re psi (the module's docstring), divided by OPTSCALE; ``rms``: sqrt
    <x_a^2> per axis (not divided by the norm) and ``r_rms`` their root sum
    of squares."""
    psi = gpe.psi.astype(np.complex128, copy=False)
    h, coords, opt = info["spacing"], info["coords"], info["option"]
    dens = _density(psi)
    x2 = []
    for a, x in enumerate(coords):
        shape = [1] * len(coords)
        shape[a] = len(x)
        x2.append(_integral(dens * (x * x).reshape(shape), h))
    re, im = psi.real, psi.imag
    kin = 1.0 if opt == 2 else 0.5
    grad2 = sum(_deriv(re, step, a) ** 2 for a, step in enumerate(h))
    x = coords[0].reshape((-1,) + (1,) * (len(coords) - 1))
    y = coords[1].reshape((1, -1) + (1,) * (len(coords) - 2))
    turn = re * (x * _deriv(im, h[1], 1) - y * _deriv(im, h[0], 0))
    common = kin * grad2 - opt * info["omega"] * turn
    re2 = re * re
    pot = gpe.potential()
    weight = _integral(re2, h)
    with np.errstate(invalid="ignore", divide="ignore"):
        mu = _integral((pot + g * dens) * re2 + common, h) / weight
        en = _integral((pot + 0.5 * g * dens) * re2 + common, h) / weight
    return {"norm": math.sqrt(max(_integral(dens, h), 0.0)), "mu": mu / opt, "energy": en / opt,
            "x2": tuple(x2), "rms": tuple(math.sqrt(max(v, 0.0)) for v in x2),
            "r_rms": math.sqrt(max(sum(x2), 0.0))}


# ------------------------------------------------------------------ the files
def _with_ending(name: str, ending: str) -> str:
    """`name` with ``.ending`` added, unless `ending` is in it already (the
    published programs' rule for density and state files)."""
    return name if ending in name else f"{name}.{ending}"


def _wf_names(prefix: str, info: Mapping[str, Any], step: int) -> Dict[int, str]:
    """OUTFLAGS bit -> file name of one density output (``-k`` for NPAS row k)."""
    curve, grid = _ENDINGS[info["outtype"]]
    mid = f"-{step}" if step > 0 else ""
    table = _FLAGS_3D if info["dims"] == 3 else _FLAGS_2D
    return {bit: _with_ending(f"{prefix}{mid}{suffix}", curve if len(kept) == 1 else grid)
            for bit, suffix, _, kept, _ in table if info["flags"] & bit}


def _output_names(cfg: Mapping[str, Any], info: Mapping[str, Any]) -> Dict[str, str]:
    """Output key (``KEY`` or ``KEY:step:bit``) -> file name, every file the run writes."""
    names: Dict[str, str] = {}
    if "OUTPUT" in cfg:
        names["OUTPUT"] = cfg["OUTPUT"] + ".txt"
    if "RMSOUT" in cfg:
        names["RMSOUT"] = cfg["RMSOUT"] + ".txt"
    steps = {"INITOUT": [0], "NSTPOUT": [0] if info["nstp"] > 0 else [],
             "NPASOUT": list(range(1, info["rows"] + 1)), "NRUNOUT": [0]}
    for key in _WF_KEYS:
        if key in cfg:
            for step in steps[key]:
                for bit, name in _wf_names(cfg[key], info, step).items():
                    names[f"{key}:{step}:{bit}"] = name
    if "FINALOUT" in cfg:
        names["FINALOUT"] = _with_ending(cfg["FINALOUT"], "txt" if info["outtype"] == 1
                                         else "bin")
    return names


def _text(table: np.ndarray, fmt: str, block: int, blank_every: Tuple[int, ...] = ()) -> bytes:
    """Rows of `table` formatted with `fmt` (one ``%`` per value), a blank
    line after every `blank_every[i]` rows (gnuplot's blocks)."""
    n, cols = table.shape
    line = " ".join([fmt] * cols) + "\n"
    parts = []
    for start in range(0, n, block):
        rows = table[start:start + block]
        text = (line * len(rows)) % tuple(rows.ravel().tolist())
        if blank_every:
            lines = text.split("\n")[:-1]
            out = []
            for i, ln in enumerate(lines, start + 1):
                out.append(ln + "\n")
                out.extend("\n" for e in blank_every if i % e == 0)
            text = "".join(out)
        parts.append(text.encode())
    return b"".join(parts)


def _vtk(coords: List[np.ndarray], values: np.ndarray, name: str) -> bytes:
    """A legacy VTK file (binary, big-endian float32) of a rectilinear grid:
    `coords` x first (fastest), `values` in the same order, x fastest."""
    dims = [len(c) for c in coords] + [1] * (3 - len(coords))
    axes = list(coords) + [np.zeros(1)] * (3 - len(coords))
    f4 = np.dtype(">f4")
    out = [b"# vtk DataFile Version 2.0\nnlsepy density (BEC-GP-ROT-OMP layout)\nBINARY\n"
           b"DATASET RECTILINEAR_GRID\n",
           f"DIMENSIONS {dims[0]} {dims[1]} {dims[2]}\n".encode()]
    for label, c in zip("XYZ", axes):
        out += [f"{label}_COORDINATES {len(c)} float\n".encode(), c.astype(f4).tobytes(), b"\n"]
    out += [f"POINT_DATA {values.size}\nSCALARS {name} float 1\nLOOKUP_TABLE default\n".encode(),
            np.ascontiguousarray(values, dtype=f4).tobytes(), b"\n"]
    return b"".join(out)


def _density_files(gpe: DipolarGPE, info: Mapping[str, Any],
                   names: Mapping[int, str]) -> Dict[str, bytes]:
    """File name -> bytes of one density output (the OUTFLAGS bits in `names`).

    Curves: pairs (a, n(a)); maps: triples (slow axis, fast axis, value), the
    slow axis first as the published formats name them (``Y,X,DEN``,
    ``Z,X,DEN`` ...); the 3D density: (z, y, x, |psi|^2).  Integrated
    densities by Simpson's rule over the other axes; sections through grid
    index N/2 of the third axis.  Sampled every OUTSTPX/Y/Z points from
    index 0."""
    axes, coords, outtype = info["axes"], dict(zip(info["axes"], info["coords"])), info["outtype"]
    step = dict(zip(axes, info["outstp"]))
    spacing = dict(zip(axes, info["spacing"]))
    dens = _density(gpe.psi.astype(np.complex128, copy=False))
    table = _FLAGS_3D if info["dims"] == 3 else _FLAGS_2D
    files: Dict[str, bytes] = {}
    for bit, _, what, kept, integrated in table:
        if bit not in names:
            continue
        if integrated:  # integrate out the axes not kept, then order the kept ones slow first
            d = dens
            for a in reversed(axes):
                if a not in kept:
                    q = axes.index(a)
                    w = _kf.simpson_weights(d.shape[q]) * (spacing[a] / 3.0)
                    d = np.tensordot(d, w, axes=([q], [0]))
            rest = [a for a in axes if a in kept]
        else:  # the plane through the centre of the third axis
            cut = [a for a in axes if a not in kept][0]
            d = np.take(dens, info["shape"][axes.index(cut)] // 2, axis=axes.index(cut))
            rest = [a for a in axes if a != cut]
        d = np.transpose(d, [rest.index(a) for a in kept])
        d = d[tuple(slice(None, None, step[a]) for a in kept)]
        cs = [coords[a][::step[a]] for a in kept]
        grid = np.meshgrid(*cs, indexing="ij")
        tbl = np.stack([g.ravel() for g in grid] + [d.ravel()], axis=-1)
        if outtype == 2:
            data = tbl.astype("<f8").tobytes()
        elif outtype == 3 and len(kept) > 1:
            data = _vtk(cs[::-1], d, what)  # VTK lists x (the fast axis) first
        else:
            blank = tuple(int(np.prod([len(c) for c in cs[i:]])) for i in range(1, len(cs)))
            data = _text(tbl, "%8e", 16384, blank)
            if outtype == 3:
                data = f"# {what}\n".encode() + data
        files[names[bit]] = data
    return files


def _final_state(gpe: DipolarGPE, info: Mapping[str, Any]) -> bytes:
    """FINALOUT: (Re, Im) per point, the file's order (z,) y, x, x fastest;
    text ``%1.9e`` with a blank line after each x row (and each z plane), or
    binary doubles."""
    psi = gpe.psi.astype(np.complex128, copy=False).transpose()
    pairs = np.stack([psi.real.ravel(), psi.imag.ravel()], axis=-1)
    if info["outtype"] != 1:
        return pairs.astype("<f8").tobytes()
    nx = info["shape"][0]
    blank = (nx,) if info["dims"] == 2 else (nx, nx * info["shape"][1])
    return _text(pairs, "%1.9e", 32768, blank)


def _fmt_rows(rows: Mapping[str, Mapping[str, Any]]) -> List[str]:
    out = []
    for label, o in rows.items():
        vals = f"{o['mu']:11.5f} {o['energy']:11.5f} {o['r_rms']:10.5f}"
        if label.startswith("NPAS"):
            out.append(f"NPAS iter.:  {int(label.split(':')[1]):5d} {o['norm']:10.4f} {vals}")
        else:
            head = "Initial:  " if label == "Initial" else f"{label}:  "
            out.append(f"{head}{o['norm']:{29 - len(head)}.4f} {vals}")
    return out


def _summary(cfg: Mapping[str, Any], info: Mapping[str, Any],
             rows: Mapping[str, Mapping[str, Any]], seconds: float, cpu: float,
             note: Optional[str]) -> str:
    dims, opt = info["dims"], info["option"]
    threads = _backend.core().get_num_threads()
    out = [f"{_TITLE[info['mode']]} time propagation {dims}d, OPTION = {opt}, "
           f"NUM_THREADS = {threads}", ""]
    g = f"G_3D = {info['g0']:.6f}, G_2D = {info['g2d']:.6f}"
    if "G0" in cfg:
        out.append(f"Nonlinearity {g}")
    else:
        out += [f"Number of atoms N = {cfg['NATOMS']}, Unit of length AHO = {cfg['AHO']:.8f} m",
                f"Scattering length a = {cfg['AS']:.6f}*a0", f"Calculated nonlinearity {g}"]
    gamma, nu, lam = info["trap"]
    trap = f"Parameters of trap: GAMMA = {gamma:.2f}, NU = {nu:.2f}"
    out.append(trap + (f", LAMBDA = {lam:.2f}" if dims == 3 else ""))
    out.append(f"Parameters of rotation: ANG VEL = {info['omega']:.4f}")
    if dims == 2:
        out.append(f"Axial trap parameter = {cfg['D_Z']:.2f}")
    out.append("")
    axes = info["axes"]
    out.append("Space steps: " + ", ".join(f"N{a.upper()} = {n}"
                                           for a, n in zip(axes, info["shape"])))
    out.append(" " * 13 + ", ".join(f"D{a.upper()} = {h:.6f}"
                                    for a, h in zip(axes, info["spacing"])))
    out.append(f"Time steps:  NSTP = {info['nstp']}, NPAS = {info['npas']}, NRUN = {info['nrun']}")
    out.append(" " * 13 + f"DT = {info['dt']:.6f}")
    if info["nstp"] != 0:
        out.append(f"RNG seed:    SEED = {info['seed']}")
    rule = "-" * 53
    out += ["", " " * 13 + rule, f"{'':15s}Iter     Norm       Chem       Ener/N      <rho>",
            " " * 13 + rule]
    out += _fmt_rows(rows)
    out += [" " * 12 + rule, ""]
    if note:
        out += [note, ""]
    out += [f" Clock Time: {seconds:.0f} seconds", f" CPU Time: {cpu:.0f} seconds", ""]
    return "\n".join(out)


def _rms_table(info: Mapping[str, Any], rows: Mapping[str, Mapping[str, Any]]) -> str:
    axes = info["axes"]
    rule = " " * 11 + "-" * (21 + 13 * len(axes))
    out = [f"{_TITLE[info['mode']]} time propagation {info['dims']}d, OPTION = "
           f"{info['option']}", "", rule,
           "RMS size:    Iter      <r>" + "".join(f"{'<' + a + '>':>13s}" for a in axes), rule]
    for label, o in rows.items():
        vals = "".join(f" {v:12.5f}" for v in o["rms"])
        if label.startswith("NPAS"):
            out.append(f"NPAS iter.: {int(label.split(':')[1]):5d} {o['r_rms']:12.5f}{vals}")
        elif label == "Initial":
            out.append(f"Initial: {o['r_rms']:21.5f}{vals}")
        else:
            out.append(f"{label}: {o['r_rms']:18.5f}{vals}")
    out += [rule, ""]
    return "\n".join(out)


def _note(gpe: DipolarGPE) -> Optional[str]:
    """nlsepy's own line under the table: the solver's expectation values
    (not the published projections) and <L_z>, where it reports them."""
    o = gpe.observables()
    if "lz" not in o:
        return None
    return (f" nlsepy (not in the published table): last row <H>/N: mu = {o['mu']:.5f}, "
            f"E/N = {o['energy']:.5f}; <L_z>/N = {o['lz']:.5f}")


# -------------------------------------------------------------------- the run
def run(path: Union[str, os.PathLike], mode: Optional[str] = None,
        geometry: Optional[str] = None, backend: str = "auto", dtype: Any = np.complex128,
        out_dir: Optional[str] = None, overrides: Optional[Mapping[str, Any]] = None,
        progress: bool = False, announce: Optional[Callable[[str], None]] = None) -> DBECResult:
    """Run a BEC-GP-ROT-OMP input file and write its outputs, all or none.

    Called by :func:`nlsepy.dipolar.dbec.run` for a file with this program's keys;
    the parameters are those of :func:`nlsepy.dipolar.dbec.run` (`mode` and
    `geometry`, when given, must agree with ``OPTREIM`` and the keys).

    Returns
    -------
    DBECResult
        ``rows``: label (``"Initial"``, ``"NSTP iter."``, ``"NPAS iter.: k"``,
        ``"NRUN iter."``) -> ``norm``, ``mu``, ``energy``, ``r_rms``, ``rms``,
        ``x2``; ``program`` is ``"BEC-GP-ROT-OMP"``.

    Raises
    ------
    InputError
        A bad input file, override or output name (nothing is written).
    """
    cfg = read_input(path)
    _kf.apply_overrides(cfg, overrides, KEYS)
    base = os.getcwd() if out_dir is None else os.fspath(out_dir)
    info = _settings(cfg, base)
    if mode is not None and mode != info["mode"]:
        kind = "an imaginary" if info["mode"] == "imag" else "a real"
        raise InputError(f"{cfg['_path']}: mode {mode!r} asked, but OPTREIM = {cfg['OPTREIM']} "
                         f"makes it {kind}-time run")
    if geometry is not None and geometry != info["geometry"]:
        raise InputError(f"{cfg['_path']}: geometry {geometry!r} asked, but the keys make it the "
                         f"{info['dims']}D program ({info['geometry']})")
    names = _output_names(cfg, info)
    outs = _kf.plan_outputs(cfg, names, base)
    t_wall, t_cpu = time.perf_counter(), time.process_time()
    if "input" in info:
        psi0 = _read_state(info["input"], _kf.where(cfg, "INPUT"), info["shape"])
    else:
        psi0 = _start(info)
    norm0 = math.sqrt(max(_integral(_density(psi0), info["spacing"]), 0.0))
    if info["mode"] == "imag":  # the published programs normalise the start in imaginary time
        if not norm0 > 0:
            raise InputError(f"{cfg['_path']}: the initial state is zero everywhere")
        psi0 = psi0 / norm0
    g = info["option"] * info["g0"]
    # the rows' arithmetic: a few grid-sized double arrays at once
    require_memory(10 * 8.0 * int(np.prod(info["shape"], dtype=np.int64)),
                   f"the printed values of a {'x'.join(map(str, info['shape']))} grid")
    gpe = DipolarGPE(info["shape"], info["spacing"], info["dt"], g=g, trap=info["trap"],
                     geometry=info["geometry"], option=info["option"], psi0=psi0, dtype=dtype,
                     backend=backend, omega=info["omega"])
    del psi0
    res = DBECResult(mode=info["mode"], geometry=info["geometry"], gpe=gpe, program=PROGRAM)
    advance = gpe.imaginary_time if info["mode"] == "imag" else gpe.real_time
    if announce is not None:
        announce(f"running {cfg['_path']} ({PROGRAM}): {info['mode']} time, "
                 f"{info['dims']}D, grid {'x'.join(map(str, info['shape']))}, OMEGA = "
                 f"{info['omega']}, {info['nstp'] + info['npas'] + info['nrun']} steps")
    g_eq = gpe.g_eff  # the contact coefficient of the equation solved (2D: reduced)
    with outs:
        def densities(key: str, step: int) -> None:
            if key in cfg:
                for name, data in _density_files(gpe, info, _wf_names(cfg[key], info,
                                                                      step)).items():
                    outs.stage_bytes(name, lambda fh, b=data: fh.write(b), key)

        res.rows["Initial"] = _row(gpe, info, 0.0 if info["nstp"] > 0 else g_eq)
        res.rows["Initial"]["norm"] = norm0
        densities("INITOUT", 0)
        if info["nstp"] > 0:
            advance(info["nstp"], ramp=True, progress=progress)
            res.rows["NSTP iter."] = _row(gpe, info, g_eq)
            densities("NSTPOUT", 0)
        for k in range(1, info["rows"] + 1):
            advance(info["every"], progress=progress)
            res.rows[f"NPAS iter.: {k}"] = _row(gpe, info, g_eq)
            densities("NPASOUT", k)
        advance(info["npas"] - info["rows"] * info["every"], progress=progress)
        advance(info["nrun"], progress=progress)
        res.rows["NRUN iter."] = _row(gpe, info, g_eq)
        densities("NRUNOUT", 0)
        res.seconds = time.perf_counter() - t_wall
        cpu = time.process_time() - t_cpu
        res.summary = _summary(cfg, info, res.rows, res.seconds, cpu, _note(gpe))
        if "OUTPUT" in names:
            outs.stage_text(names["OUTPUT"], res.summary, "OUTPUT")
        if "RMSOUT" in names:
            outs.stage_text(names["RMSOUT"], _rms_table(info, res.rows), "RMSOUT")
        if "FINALOUT" in names:
            data = _final_state(gpe, info)
            outs.stage_bytes(names["FINALOUT"], lambda fh: fh.write(data), "FINALOUT")
        res.files = outs.commit()
    return res
