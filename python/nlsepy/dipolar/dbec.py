"""DBEC-GP compatible runs: read a DBEC-GP input file, run, write its outputs.

The input format (Loncar, thesis, section 3.2; the public DBEC-GP programs)
is ``KEY = value`` lines with ``#`` comments.  A run is imaginary time
(ground state from the trap's Gaussian, or from ``INPUT``) or real time
(from ``INPUT``, else, as the published programs, from ``imag3d-den.bin``,
``imag2d-den.bin`` or ``imag1d-den.bin`` in the run's folder), in the stages
NSTP (g and gdd ramp from 0), NPAS and NRUN (real time: g and gdd multiplied
by GPAR and GDDPAR first).  Outputs, named and laid out as the published
programs write them (docs/DBEC_FILES.md): the summary (``OUTPUT.txt``, the
layout of source listing 3.11), the rms table (``RMSOUT.txt``), the real-time
dynamics (``DYNAOUT.txt``, after iterations 1, 1 + OUTSTPT, ..., labelled from
0), the density files of
INITOUT, NSTPOUT, NPASOUT and NRUNOUT (``NAME.bin`` and its sections); and
nlsepy's own: integrated densities as text (``FINALOUT``) and the full
complex state (``PSIOUT``, an ``.npz`` that an input may name as ``INPUT``).

Values are typed: an integer key takes an integer (``NX = 64``, not
``64.0`` or ``1e2``) in range, a number key a finite number.  Output names
are plain file names (no folder part, no ``..``): every output lands in the
run's folder (``out_dir``, else the current folder).  A run writes all its
outputs or none: names and folder are checked before it starts, and the
files are staged under temporary names and renamed together at the end.

The program kind comes from ``MODE`` (imag/real) and ``GEOMETRY`` (3d,
2d-xy, 2d-xz, 1d-x, 1d-z) keys, or else from the file name as DBEC-GP names
its inputs (``imag3d-input``, ``real2d-xy-input``, ``imag1d-z-input`` ...).

A file with keys that only BEC-GP-ROT-OMP inputs have (``OPTSCALE``,
``OPTREIM``, ``OMEGA``, ``D_Z`` ...) is that program's input and runs in
:mod:`nlsepy.dipolar.rot`; a file with keys of both programs is refused.

Call direction: this module over ``rot.py`` over ``keyfile.py``.
"""

from __future__ import annotations

import math
import os
import re
import time
import zipfile
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ..common import dist as _dist
from ..common.files import Key, check_npz, load_checkpoint
from ..common.guard import require_memory
from ..common.outputs import OutputSet
from ..units import lhy_gqf0
from . import keyfile as _kf
from . import rot as _rot
from .keyfile import BOHR_RADIUS, DBECResult, InputError
from .solver import DipolarGPE, Obstacle

__all__ = ["read_input", "parse_overrides", "run", "DBECResult", "InputError", "BOHR_RADIUS"]

_INT = {"OPTION", "NATOMS", "NX", "NY", "NZ", "NSTP", "NPAS", "NRUN", "OUTSTPX", "OUTSTPY",
        "OUTSTPZ", "OUTSTPT", "POTMEM", "DEVICE", "QF"}
_FLOAT = {"G0", "GDD0", "AS", "ADD", "AHO", "GPAR", "GDDPAR", "CUTOFF", "DX", "DY", "DZ", "DT",
          "GAMMA", "NU", "LAMBDA", "OBSTACLE_V0", "OBSTACLE_SIGMA", "OBSTACLE_VELOCITY",
          "OBSTACLE_START", "OBSTACLE_TMOVE", "OBSTACLE_TOFF", "GQF"}
#: the wave-function outputs: density files after initialisation and after each stage
_WF_KEYS = ("INITOUT", "NSTPOUT", "NPASOUT", "NRUNOUT")
_STR = {"OUTPUT", "RMSOUT", "DYNAOUT", "FINALOUT", "NITEROUT", "PSIOUT", "INPUT", "MODE",
        "GEOMETRY", "OBSTACLE_AXIS", "OBSTACLE_BEAM"} | set(_WF_KEYS)
#: keys naming output files: plain names, written in the run's folder
_OUTPUT_KEYS = ("OUTPUT", "RMSOUT", "DYNAOUT", "FINALOUT", "NITEROUT", "PSIOUT") + _WF_KEYS
#: the keys of DBEC-GP inputs
KEYS = _kf.KeyTable("DBEC-GP", frozenset(_INT), frozenset(_FLOAT), frozenset(_STR),
                    frozenset(_OUTPUT_KEYS))
#: the keys --set may name: those of either program (each program checks its own)
_ANY_KEYS = KEYS.union(_rot.KEYS, "DBEC-GP or BEC-GP-ROT-OMP")
#: the most points on one axis
_N_MAX = 2 ** 31 - 1
_GEOMS = ("3d", "2d-xy", "2d-xz", "1d-x", "1d-z")

_where, _need, _positive = _kf.where, _kf.need, _kf.positive


def read_input(path: Union[str, os.PathLike]) -> Dict[str, Any]:
    """Parse a DBEC-GP input file.

    Parameters
    ----------
    path : path-like
        The input file.

    Returns
    -------
    dict
        Key -> value (int, float or str), with ``"_line"`` mapping each key
        to its line number.

    Raises
    ------
    InputError
        A malformed line, an unknown or repeated key, a value of the wrong
        type or out of range, or an output name with a folder part (the
        message names the key and the line).
    OSError
        The file cannot be read.
    """
    return _kf.read_input(path, KEYS)


def parse_overrides(items: Sequence[str]) -> Dict[str, Any]:
    """Typed overrides from ``KEY=VALUE`` strings (``--set`` on the command line).

    Keys of DBEC-GP and of BEC-GP-ROT-OMP inputs are accepted here; the run
    refuses a key its program does not have.

    Parameters
    ----------
    items : sequence of str
        ``"KEY=VALUE"`` each; keys are case-insensitive.

    Returns
    -------
    dict
        Key -> value, typed as in an input file.

    Raises
    ------
    InputError
        A malformed item, an unknown or repeated key, or a bad value (the
        message quotes the item).
    """
    return _kf.parse_overrides(items, _ANY_KEYS)


def _program(path: Union[str, os.PathLike]) -> str:
    """Whose input the file at `path` is, told by its keys: BEC-GP-ROT-OMP's
    when it has a key of that program only (OPTSCALE, OPTREIM, OMEGA, D_Z,
    ...), else DBEC-GP's; InputError for a file with keys of both."""
    present = _kf.keys_in(path)
    rot_key = _kf.first_of(_rot.MARKERS, present)
    if rot_key is None:
        return KEYS.program
    own = _kf.first_of(sorted(KEYS.keys - _rot.KEYS.keys), present)
    if own is not None:
        path = os.fspath(path)
        raise InputError(f"{path}:{present[own]}: key {own} is a key of DBEC-GP inputs, but "
                         f"{rot_key} (line {present[rot_key]}) is one of {_rot.PROGRAM} "
                         f"inputs: a file is the input of one program")
    return _rot.PROGRAM


def _kind(cfg: Mapping[str, Any], mode: Optional[str], geometry: Optional[str]) -> Tuple[str, str]:
    name = os.path.basename(cfg.get("_path", "")).lower()
    m = re.match(r"(imag|real)([123])d[-_]?(xy|xz|x|z)?", name)
    mode = mode or cfg.get("MODE") or (m.group(1) if m else None)
    if geometry is None and "GEOMETRY" in cfg:
        geometry = cfg["GEOMETRY"]
    if geometry is None and m:
        d, sub = m.group(2), m.group(3)
        geometry = {"3": "3d", "2": f"2d-{sub or 'xy'}", "1": f"1d-{sub or 'x'}"}[d]
    if mode is None:
        raise InputError(f"{cfg.get('_path')}: cannot tell imaginary from real time; add "
                         f"MODE = imag or MODE = real (or name the file imag3d-input, ...)")
    mode = str(mode).lower()
    mode = {"imaginary": "imag", "imag": "imag", "real": "real"}.get(mode, mode)
    if mode not in ("imag", "real"):
        raise InputError(f"{_where(cfg, 'MODE')}: MODE must be imag or real, got {mode!r}")
    geometry = (geometry or "3d").lower()
    if geometry not in _GEOMS:
        raise InputError(f"{_where(cfg, 'GEOMETRY')}: GEOMETRY must be one of {_GEOMS}, "
                         f"got {geometry!r}")
    return mode, geometry


_AXES = {"3d": "xyz", "2d-xy": "xy", "2d-xz": "xz", "1d-x": "x", "1d-z": "z"}


def _couplings(cfg: Mapping[str, Any]) -> Tuple[float, float]:
    """G0 and GDD0 (DBEC-GP definitions) from the file."""
    natoms = _positive(cfg, "NATOMS")
    if "G0" in cfg:
        g0 = cfg["G0"]
    else:
        why = " (or G0)"
        g0 = 4 * math.pi * _need(cfg, "AS", why) * natoms * BOHR_RADIUS / _aho(cfg, "G0")
    if "GDD0" in cfg:
        gdd0 = cfg["GDD0"]
    else:
        gdd0 = 3 * _need(cfg, "ADD", " (or GDD0)") * natoms * BOHR_RADIUS / _aho(cfg, "GDD0")
    return g0, gdd0


def _lhy(cfg: Mapping[str, Any]) -> float:
    """The Lee-Huang-Yang coefficient without OPTION's factor: GQF, or with
    QF = 1 the one of AS, ADD, NATOMS and AHO (``nl.units.lhy_gqf0``); 0
    without either (QF = 0)."""
    if cfg.get("QF", 0) not in (0, 1):
        raise InputError(f"{_where(cfg, 'QF')}: QF must be 0 or 1 (the Lee-Huang-Yang term "
                         f"from AS, ADD, NATOMS, AHO), got {cfg['QF']!r}")
    if "GQF" in cfg:
        if cfg.get("QF", 0):
            raise InputError(f"{_where(cfg, 'GQF')}: give GQF or QF = 1, not both")
        return _positive(cfg, "GQF", allow_zero=True)
    if not cfg.get("QF", 0):
        return 0.0
    why = " (QF = 1 computes the Lee-Huang-Yang term from AS, ADD, NATOMS, AHO)"
    a_s, add = _need(cfg, "AS", why), cfg.get("ADD", 0.0)
    if a_s < 0 or add < 0:
        raise InputError(f"{_where(cfg, 'QF')}: QF = 1 needs AS >= 0 and ADD >= 0, got AS = "
                         f"{a_s!r}, ADD = {add!r}")
    return lhy_gqf0(a_s, add, _positive(cfg, "NATOMS"), _aho(cfg, "the QF term"), BOHR_RADIUS)


def _aho(cfg: Mapping[str, Any], what: str) -> float:
    if "AHO" not in cfg:
        raise InputError(f"{cfg.get('_path')}: missing key AHO (needed to compute {what})")
    return _positive(cfg, "AHO")


def _read_state(src: str, where: str, shape: Tuple[int, ...]) -> np.ndarray:
    """The initial state in the INPUT file `src`: a DipolarGPE checkpoint
    (the PSIOUT of an earlier run) or an ``.npz`` holding an array ``psi``."""
    if not os.path.isfile(src):
        raise InputError(f"{where}: INPUT file {src!r} does not exist; run the imaginary-time "
                         f"input first (it writes PSIOUT)")
    bad = (f"{where}: INPUT file {src!r} is not a state written by PSIOUT or an .npz with an "
           f"array 'psi'")
    if os.path.getsize(src) == 0 or not zipfile.is_zipfile(src):
        raise InputError(f"{bad} (empty, truncated or another kind of file)")
    try:
        check_npz(src)
    except ValueError as exc:
        raise InputError(f"{where}: INPUT {exc}") from None
    try:
        with np.load(src) as d:  # plain arrays only (NumPy's default)
            tagged = "_format" in d.files
            if not tagged:
                if "psi" not in d.files:
                    raise InputError(f"{where}: {src!r} holds no 'psi' array")
                psi = d["psi"]
    except InputError:
        raise
    except (ValueError, KeyError, EOFError, OSError, zipfile.BadZipFile, NotImplementedError,
            MemoryError) as exc:
        msg = " ".join(str(exc).split())[:200]
        if "Object arrays" in msg:
            msg = "it holds Python objects, which nlsepy never reads"
        raise InputError(f"{bad} ({type(exc).__name__}: {msg})") from None
    if tagged:
        try:
            psi = load_checkpoint(src, DipolarGPE.__name__, {"psi": Key("array", "fc")})["psi"]
        except ValueError as exc:
            raise InputError(f"{where}: {exc}") from None
    if psi.dtype.kind not in "fc":
        raise InputError(f"{where}: the state in {src!r} has dtype {psi.dtype}, not a float or "
                         f"complex array")
    if psi.shape != shape:
        raise InputError(f"{where}: the state in {src!r} has shape {psi.shape}, the input's "
                         f"grid is {shape}")
    if not np.all(np.isfinite(psi)):
        raise InputError(f"{where}: the state in {src!r} is not finite (NaN or Inf)")
    return psi


def _imag_tag(geometry: str) -> str:
    """The imaginary-time program of `geometry` (``imag3d``, ``imag2d``, ``imag1d-z``...)."""
    return {"3d": "imag3d", "2d-xy": "imag2d", "2d-xz": "imag2d-xz", "1d-x": "imag1d",
            "1d-z": "imag1d-z"}[geometry]


def default_state_file(geometry: str) -> str:
    """The file a real-time run without INPUT starts from, as the published
    programs do: ``imag3d-den.bin`` (3D), ``imag2d-den.bin`` (2D, xy),
    ``imag1d-den.bin`` (1D, x); ``imag2d-xz-den.bin`` and ``imag1d-z-den.bin``
    for nlsepy's other planes and axes.

    Parameters
    ----------
    geometry : str
        One of ``"3d"``, ``"2d-xy"``, ``"2d-xz"``, ``"1d-x"``, ``"1d-z"``.

    Returns
    -------
    str
        The file name (looked for in the run's folder).
    """
    return _imag_tag(geometry) + "-den.bin"


def _read_den_bin(src: str, where: str, shape: Tuple[int, ...],
                  default_of: Optional[str]) -> np.ndarray:
    """The state in the density file `src` (``NAME.bin`` of a wave-function
    output: |psi|^2 on the full grid, doubles, C order), as psi = sqrt(density).

    `default_of` names the imaginary-time program when `src` was not named
    by INPUT but is the default starting file.
    """
    size = 8 * int(np.prod(shape, dtype=np.int64))
    name = os.path.basename(src)
    if not os.path.isfile(src):
        if default_of is not None:
            raise InputError(
                f"{where}: no INPUT key, so the initial state is read from {name!r} in "
                f"{os.path.dirname(src) or '.'!r}, and that file does not exist; make it "
                f"first by running the imaginary-time input with NRUNOUT = {name[:-4]} "
                f"(python -m nlsepy dbec {default_of}-input) in that folder, or name a "
                f"state with INPUT = <file>")
        raise InputError(f"{where}: INPUT file {src!r} does not exist; run the imaginary-time "
                         f"input first (its NRUNOUT writes NAME.bin)")
    found = os.path.getsize(src)
    if found != size:
        raise InputError(f"{where}: {src!r} holds {found} bytes, but the grid "
                         f"{'x'.join(map(str, shape))} of the input needs {size} bytes (one "
                         f"double per point): truncated, or written for another grid")
    den = np.fromfile(src, dtype="<f8").reshape(shape)
    if not np.all(np.isfinite(den)) or np.any(den < 0):
        raise InputError(f"{where}: {src!r} is not a density (negative, NaN or Inf values)")
    return np.sqrt(den).astype(np.complex128)


def _select_device(cfg: Mapping[str, Any], device: int) -> None:
    """Make GPU `device` (an index into the visible GPUs) the one the CUDA
    backend uses, through ``CUDA_VISIBLE_DEVICES``; it takes effect when the
    run is the process's first use of CUDA (always so for ``python -m nlsepy
    dbec``)."""
    seen = os.environ.get("CUDA_VISIBLE_DEVICES")
    if seen is not None and seen.strip():
        ids = [s.strip() for s in seen.split(",") if s.strip()]
        if device >= len(ids):
            raise InputError(f"{_where(cfg, 'DEVICE')}: DEVICE = {device}, but "
                             f"CUDA_VISIBLE_DEVICES={seen!r} shows {len(ids)} GPU(s)")
        os.environ["CUDA_VISIBLE_DEVICES"] = ids[device]
    else:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(device)


def _build(cfg: Mapping[str, Any], mode: str, geometry: str, backend: str, dtype: Any,
           base: str, comm: Any = None) -> Tuple[DipolarGPE, Dict[str, Any]]:
    axes = _AXES[geometry]
    opt = _need(cfg, "OPTION")
    if opt not in (1, 2):
        raise InputError(f"{_where(cfg, 'OPTION')}: OPTION must be 1 or 2, got {opt!r}")
    shape = tuple(_positive(cfg, f"N{a.upper()}") for a in axes)
    for a, n in zip(axes, shape):
        if n < 4 or n > _N_MAX:
            raise InputError(f"{_where(cfg, 'N' + a.upper())}: N{a.upper()} must be >= 4 and "
                             f"<= {_N_MAX}, got {n}")
    spacing = tuple(_positive(cfg, f"D{a.upper()}") for a in axes)
    dt = _positive(cfg, "DT")
    trap = tuple(_positive(cfg, k) for k in ("GAMMA", "NU", "LAMBDA"))
    for k in ("NSTP", "NPAS", "NRUN"):
        if k in cfg:
            _positive(cfg, k, allow_zero=True)
    _need(cfg, "NPAS")
    _need(cfg, "NRUN")
    g0, gdd0 = _couplings(cfg)
    cutoff = None
    if gdd0 != 0 and geometry == "3d":
        cutoff = _positive(cfg, "CUTOFF")
    if gdd0 != 0:
        for a, n in zip(axes, shape):
            if n % 2:
                raise InputError(f"{_where(cfg, 'N' + a.upper())}: N{a.upper()} = {n} must be "
                                 f"even (the FFT grid of the dipolar term)")
    for k in ("OUTSTPX", "OUTSTPY", "OUTSTPZ", "OUTSTPT"):
        if k in cfg:
            _positive(cfg, k)
    if "POTMEM" in cfg and cfg["POTMEM"] not in (0, 1, 2):
        raise InputError(f"{_where(cfg, 'POTMEM')}: POTMEM must be 0, 1 or 2, got "
                         f"{cfg['POTMEM']!r}")
    if "DEVICE" in cfg and cfg["DEVICE"] < 0:
        raise InputError(f"{_where(cfg, 'DEVICE')}: DEVICE must be >= 0, got {cfg['DEVICE']!r}")
    obstacle = None
    if "OBSTACLE_V0" in cfg:
        obstacle = Obstacle(V0=opt * cfg["OBSTACLE_V0"], sigma=_positive(cfg, "OBSTACLE_SIGMA"),
                            velocity=cfg.get("OBSTACLE_VELOCITY", 0.0),
                            start=cfg.get("OBSTACLE_START", 0.0),
                            t_move=cfg.get("OBSTACLE_TMOVE", math.inf),
                            t_off=cfg.get("OBSTACLE_TOFF", 0.0),
                            move_axis=cfg.get("OBSTACLE_AXIS", "y").lower(),
                            beam_axis=(cfg.get("OBSTACLE_BEAM", "x").lower()
                                       if geometry == "3d" else None))
    psi0 = None
    if "INPUT" in cfg:
        src = os.path.join(base, cfg["INPUT"])
        if cfg["INPUT"].lower().endswith(".bin"):
            psi0 = _read_den_bin(src, _where(cfg, "INPUT"), shape, None)
        else:
            psi0 = _read_state(src, _where(cfg, "INPUT"), shape)
    elif mode == "real":
        name = default_state_file(geometry)
        psi0 = _read_den_bin(os.path.join(base, name), str(cfg.get("_path")), shape,
                             _imag_tag(geometry))
    gqf0 = _lhy(cfg)
    gpe = DipolarGPE(shape, spacing, dt, g=opt * g0, gdd=opt * gdd0, trap=trap, cutoff=cutoff,
                     geometry=geometry, option=opt, obstacle=obstacle, psi0=psi0, dtype=dtype,
                     dipolar=gdd0 != 0 or None, fft_effort="measure", backend=backend,
                     gqf=opt * gqf0, **({} if comm is None else {"comm": comm}))
    info = dict(option=opt, g0=g0, gdd0=gdd0, shape=shape, spacing=spacing, dt=dt, trap=trap,
                cutoff=cutoff, axes=axes, gqf0=gqf0)
    return gpe, info


def _fmt_row(label: str, o: Mapping[str, Any]) -> str:
    return (f"{label:<18s}{o['norm']:8.4f} {o['mu_dbec']:10.5f} {o['energy_dbec']:10.5f} "
            f"{o['r_rms']:9.5f} {o['psi0sq']:10.5f}")


def _summary(cfg: Mapping[str, Any], mode: str, geometry: str, info: Mapping[str, Any],
             rows: Mapping[str, Mapping[str, Any]], seconds: float, cpu: float,
             gpe: DipolarGPE) -> str:
    axes = info["axes"]
    dim = f"{len(axes)}D" + ("" if geometry == "3d" else f" ({'-'.join(axes)})")
    title = "Imaginary" if mode == "imag" else "Real"
    tag = f"{len(axes)}D"
    out = [f"{title} time propagation {dim}, OPTION = {info['option']}"]
    if "NATOMS" in cfg:
        aho = f", Unit of length AHO = {cfg['AHO']:.8f} m" if "AHO" in cfg else ""
        out.append(f"  Number of Atoms N = {cfg['NATOMS']}{aho}")
    if "AS" in cfg or "ADD" in cfg:
        parts = []
        if "AS" in cfg:
            parts.append(f"Scattering length a = {cfg['AS']:.2f}*a0")
        if "ADD" in cfg:
            parts.append(f"Dipolar ADD = {cfg['ADD']:.2f}*a0")
        out.append("  " + ", ".join(parts))
    fc, fd = gpe.reduction
    out.append(f"  Nonlinearity G_{tag} = {info['g0'] * fc:.4f}, Strength of DDI GD_{tag} = "
               f"{info['gdd0'] * fd:.5f}")
    if info["gqf0"]:
        out.append(f"  Quantum fluctuations (LHY) GQF_{tag} = "
                   f"{gpe.gqf_eff / info['option']:.5f}")
    out.append(f"  Parameters of trap: GAMMA = {info['trap'][0]:.2f}, NU = {info['trap'][1]:.2f}, "
               f"LAMBDA = {info['trap'][2]:.2f}")
    out.append("  Space Stp: " + ", ".join(f"N{a.upper()} = {n}" for a, n in zip(axes, info["shape"])))
    out.append("  Space Step: " + ", ".join(f"D{a.upper()} = {h:.6f}"
                                            for a, h in zip(axes, info["spacing"])))
    out.append(f"  Time Stp : NSTP = {cfg.get('NSTP', 0)}, NPAS = {cfg['NPAS']}, NRUN = {cfg['NRUN']}")
    out.append(f"  Time Step: DT = {info['dt']:.6f}")
    if info["cutoff"] is not None:
        out.append(f"  Dipolar Cut off: R = {info['cutoff']:.3f}")
    if mode == "real":
        out.append(f"* Change for dynamics: GPAR = {cfg.get('GPAR', 1.0):.3f}, "
                   f"GDPAR = {cfg.get('GDDPAR', 1.0):.3f} *")
    rule = "  " + "-" * 66
    zero = ",".join("0" * len(axes))
    out += [rule, f"{'':18s}{'Norm':>8s} {'Chem':>10s} {'Ener/N':>10s} {'<r>':>9s} "
                  f"{'|Psi(' + zero + ')|^2':>15s}", rule]
    out += [_fmt_row(label + ":", o) for label, o in rows.items()]
    out += [rule]
    last = list(rows.values())[-1]
    if mode == "real":
        out.append(f"  nlsepy (not in the published table): Chem and Ener/N above use the kinetic "
                   f"term of |psi|; with the flow energy the last row has Chem = "
                   f"{last['mu']:.5f}, Ener/N = {last['energy']:.5f}")
    out += [ f"  Clock Time: {seconds:.0f} seconds", f"  CPU Time: {cpu:.0f} seconds", ""]
    return "\n".join(out)


def _rms_table(mode: str, info: Mapping[str, Any], rows: Mapping[str, Mapping[str, Any]]) -> str:
    axes = info["axes"]
    title = "Imaginary" if mode == "imag" else "Real"
    rule = "-" * (30 + 13 * (len(axes) + 1))
    out = [f"  {title} time propagation {len(axes)}D, OPTION = {info['option']}", rule,
           f"{'Values of rms size:':30s}{'<r>':>13s}" + "".join(f"{'<' + a + '>':>13s}" for a in axes),
           rule]
    for label, o in rows.items():
        out.append(f"{label + ':':30s}{o['r_rms']:13.5f}" + "".join(f"{v:13.5f}" for v in o["rms"]))
    out += [rule, ""]
    return "\n".join(out)


def _densities(gpe: DipolarGPE, cfg: Mapping[str, Any]) -> Dict[str, str]:
    """Integrated 1D (and, in 3D, 2D) densities, gnuplot layout (listing 3.10):
    file suffix -> text."""
    files: Dict[str, str] = {}
    axes = gpe.axes
    co = dict(zip(axes, gpe.coords))
    step = {a: cfg.get(f"OUTSTP{a.upper()}", 1) for a in axes}
    for a in axes:
        n = gpe.density((a,))
        sl = slice(None, None, step[a])
        files[f"1d_{a}.txt"] = "".join(f"{x:.6e} {v:.6e}\n" for x, v in zip(co[a][sl], n[sl]))
    for a, b in _pairs(axes):
        n = gpe.density((a, b))[:: step[a], :: step[b]]
        xa, xb = co[a][:: step[a]], co[b][:: step[b]]
        blocks = []
        for i, x in enumerate(xa):
            blocks.append("".join(f"{x:.6e} {y:.6e} {v:.6e}\n" for y, v in zip(xb, n[i])))
        files[f"2d_{a}{b}.txt"] = "\n".join(blocks)
    return files


def _wf_suffixes(axes: str) -> List[str]:
    """File suffixes of one wave-function output (INITOUT, NSTPOUT, NPASOUT,
    NRUNOUT) of a program with these axes (docs/DBEC_FILES.md)."""
    out = [".bin"]
    if len(axes) > 1:
        out += [f"1d_{a}.bin" for a in axes]
    if len(axes) == 3:
        out += [f"2d_{a}{b}.bin" for a, b in _pairs(axes)]
        out += ["3d_xy0.bin", "3d_x0z.bin", "3d_0yz.bin"]
    return out


def _wf_files(gpe: DipolarGPE, cfg: Mapping[str, Any]) -> Dict[str, bytes]:
    """The binary files of one wave-function output: suffix -> bytes.

    ``.bin``: |psi|^2 on the full grid (little-endian doubles, C order, the
    first axis slowest); ``1d_a.bin``: pairs (a, density integrated over the
    other axes); ``2d_ab.bin``: triples (a, b, density integrated over the
    third axis); ``3d_xy0.bin`` ...: triples (a, b, |psi|^2 in the plane where
    the third coordinate is 0, grid index N/2).  Sections are sampled every
    OUTSTPX/Y/Z points, starting at index 0.
    """
    psi = gpe.psi
    den = psi.real * psi.real + psi.imag * psi.imag  # sqrt gives |psi| back exactly
    axes = gpe.axes
    co = dict(zip(axes, gpe.coords))
    step = {a: cfg.get(f"OUTSTP{a.upper()}", 1) for a in axes}
    f8 = np.dtype("<f8")
    lay = gpe.layout  # None for one process
    if lay is None:
        files: Dict[str, Any] = {".bin": np.ascontiguousarray(den, dtype=f8).tobytes()}
    else:  # this rank's rows, written in place by MPI I/O (_write_slabs)
        plane = 8 * int(np.prod(den.shape[1:]))
        files = {".bin": _Slab(np.ascontiguousarray(den, dtype=f8).tobytes(),
                               lay.start * plane)}
    if len(axes) == 1:
        return files

    def triples(a: str, b: str, n: np.ndarray) -> bytes:
        xa, xb = co[a][:: step[a]], co[b][:: step[b]]
        n = n[:: step[a], :: step[b]]
        ga, gb = np.meshgrid(xa, xb, indexing="ij")
        return np.stack([ga, gb, n], axis=-1).astype(f8).tobytes()

    for a in axes:
        n = gpe.density((a,))
        files[f"1d_{a}.bin"] = np.stack([co[a][:: step[a]], n[:: step[a]]],
                                        axis=-1).astype(f8).tobytes()
    if len(axes) == 3:
        for a, b in _pairs(axes):
            files[f"2d_{a}{b}.bin"] = triples(a, b, gpe.density((a, b)))
        nx, ny, nz = gpe.shape
        if lay is None:
            cuts = den[:, :, nz // 2], den[:, ny // 2, :], den[nx // 2, :, :]
        else:  # the x rows of every rank; the yz plane from the rank that holds it
            owner = int(np.searchsorted(lay.starts, nx // 2, side="right") - 1)
            mid = den[nx // 2 - lay.start] if lay.rank == owner else None
            cuts = (_dist.gather_rows(lay, np.ascontiguousarray(den[:, :, nz // 2]), None),
                    _dist.gather_rows(lay, np.ascontiguousarray(den[:, ny // 2, :]), None),
                    lay.comm.bcast(mid, root=owner))
        files["3d_xy0.bin"] = triples("x", "y", cuts[0])
        files["3d_x0z.bin"] = triples("x", "z", cuts[1])
        files["3d_0yz.bin"] = triples("y", "z", cuts[2])
    return files


@dataclass
class _Slab:
    """One rank's part of a binary output: its bytes and their offset in the file."""

    data: bytes
    offset: int


def _write_slabs(comm: Any, base: str, names: Mapping[str, str],
                 texts: Mapping[str, Any]) -> Dict[str, str]:
    """Write every output held in slabs by MPI I/O, all ranks together, each
    to a temporary file in the output folder (named by rank 0); returns
    output key -> temporary path, for rank 0 to stage."""
    from mpi4py import MPI
    tmp: Dict[str, str] = {}
    for key in names:
        part = texts.get(key)
        if not isinstance(part, _Slab):
            continue
        path = comm.bcast(os.path.join(base, f".{os.getpid()}.mpiio.{names[key]}")
                          if comm.Get_rank() == 0 else None, root=0)
        fh = MPI.File.Open(comm, path, MPI.MODE_WRONLY | MPI.MODE_CREATE)
        try:
            fh.Set_size(0)
            fh.Write_at_all(part.offset, np.frombuffer(part.data, dtype=np.uint8))
        finally:
            fh.Close()
        tmp[key] = path
    return tmp


def _rms(gpe: DipolarGPE) -> Tuple[float, List[float]]:
    """<r> and <a> of each axis, from the integrated 1D densities: what a
    DYNAOUT row needs, at a small part of the cost of the full observables
    (the same Simpson rule; agrees with them to round-off)."""
    x2 = [_kf.simpson(c * c * gpe.density((a,)), h)
          for a, c, h in zip(gpe.axes, gpe.coords, gpe.spacing)]
    return math.sqrt(max(sum(x2), 0.0)), [math.sqrt(max(v, 0.0)) for v in x2]


def _dyna_line(t: float, r: float, rms: Sequence[float]) -> str:
    """One DYNAOUT row: time, <r>, then <a> of each axis (``%8e``, 3 spaces)."""
    return "   ".join(f"{v:8e}" for v in (t, r, *rms)) + "\n"


def _stage(gpe: DipolarGPE, mode: str, n: int, done: int, every: int, dt: float, option: int,
           lines: Optional[List[str]], progress: bool = False, per_call: bool = False) -> int:
    """`n` steps of `mode` (``"imag"`` or ``"real"``) from iteration `done`
    of the DYNAOUT clock; with `lines`, a DYNAOUT row appended after
    iterations 1, 1 + `every`, 1 + 2 `every`, ..., labelled
    ``(iteration - 1) * dt * option``: the published programs' time column,
    which counts from 0 and whose first row holds the state after one step.

    The rows' moments (<x_a^2> per axis) are recorded by the stepping calls
    themselves, from the pass that ends each step (from what it leaves in
    cache), so a row costs no stepping call and no pass through memory of
    its own.  With `per_call`, or a solver whose stepping calls do not
    record them (the distributed one), each row takes its own stepping call
    and the integrated densities of :func:`_rms` (the same values to
    round-off).

    Returns
    -------
    int
        ``done + n``.
    """
    advance = gpe.imaginary_time if mode == "imag" else gpe.real_time
    if lines is None:
        advance(n, progress=progress)
        return done + n
    if per_call or not gpe._can_record():
        end = done + n
        while done < end:
            row = _next_row(done, every)
            k = min(row - done, end - done)
            advance(k)
            done += k
            if done == row:
                r, rms = _rms(gpe)
                lines.append(_dyna_line((done - 1) * dt * option, r, rms))
        return done
    # a row after iteration i when (i - 1) % every == 0: the recording's step
    # count runs every - 1 ahead of the iterations
    rows = gpe._steps_recording("imaginary" if mode == "imag" else "real", n, every,
                                (done + every - 1) % every, progress=progress)
    lines.extend(_dyna_lines(rows, _next_row(done, every) - 1, every, dt, option))
    return done + n


def _next_row(done: int, every: int) -> int:
    """The first iteration after `done` that ends with a DYNAOUT row: the
    smallest i > `done` with (i - 1) a multiple of `every`."""
    return -(-done // every) * every + 1


def _dyna_lines(rows: np.ndarray, first: int, every: int, dt: float, option: int) -> List[str]:
    """The DYNAOUT rows of recorded moments (``norm, <x_a^2>...`` per row),
    the first labelled `first` iterations, then every `every`: the values of
    :func:`_dyna_line` (the same operations in the same order), formatted
    with one ``%`` per row (a GPU run writes a row every 0.2 ms)."""
    if len(rows) == 0:
        return []
    it = first + every * np.arange(len(rows), dtype=np.int64)
    x2 = rows[:, 1:]
    total = x2[:, 0].copy()
    for a in range(1, x2.shape[1]):  # left to right, as sum() adds them
        total += x2[:, a]
    table = np.column_stack([it.astype(np.float64) * dt * option,
                             np.sqrt(np.maximum(total, 0.0)), np.sqrt(np.maximum(x2, 0.0))])
    fmt = "   ".join(["%8e"] * table.shape[1]) + "\n"
    return [fmt % tuple(r) for r in table.tolist()]


def _pairs(axes: str) -> List[Tuple[str, str]]:
    return [(axes[i], axes[j]) for i in range(len(axes)) for j in range(i + 1, len(axes))]


def _output_names(cfg: Mapping[str, Any], mode: str, geometry: str) -> Dict[str, str]:
    """Output key -> file name of a run (the one place that names outputs).

    ``FINALOUT`` is a prefix; its files appear as ``FINALOUT:<suffix>``.
    """
    axes = _AXES[geometry]
    tag = mode + _imag_tag(geometry)[4:]  # imag3d, real2d, imag1d-z ... as published
    names = {"OUTPUT": cfg.get("OUTPUT", f"{tag}-out") + ".txt",
             "RMSOUT": cfg.get("RMSOUT", f"{tag}-rms") + ".txt"}
    if mode == "real" and "DYNAOUT" in cfg:
        names["DYNAOUT"] = cfg["DYNAOUT"] + ".txt"
    for key in _WF_KEYS:
        if key in cfg:
            for suffix in _wf_suffixes(_AXES[geometry]):
                names[f"{key}:{suffix}"] = cfg[key] + suffix
    if "FINALOUT" in cfg:
        suffixes = [f"1d_{a}.txt" for a in axes] + [f"2d_{a}{b}.txt" for a, b in _pairs(axes)]
        for suffix in suffixes:
            names[f"FINALOUT:{suffix}"] = cfg["FINALOUT"] + suffix
    names["PSIOUT"] = cfg.get("PSIOUT", f"{tag}-psi.npz")
    if not names["PSIOUT"].lower().endswith(".npz"):  # the checkpoint INPUT reads back
        raise InputError(f"{_where(cfg, 'PSIOUT')}: key PSIOUT must name an .npz file (the "
                         f"state as a checkpoint), got {names['PSIOUT']!r}")
    return names


def _write_outputs(outs: OutputSet, names: Mapping[str, str],
                   texts: Mapping[str, Union[str, bytes]],
                   gpe: DipolarGPE, written: Optional[Mapping[str, str]] = None) -> List[str]:
    """Stage every output and rename them all into place (all or none).
    `written`: outputs already written to temporary files (key -> path),
    moved into place with the others."""
    written = written or {}
    with outs:
        for key, name in names.items():
            if key in written:
                outs.stage(name, lambda p, src=written[key]: os.replace(src, p),
                           key.split(":")[0])
            elif key == "PSIOUT":
                outs.stage(name, gpe.save, key)
            elif isinstance(texts[key], bytes):
                outs.stage_bytes(name, lambda fh, b=texts[key]: fh.write(b), key.split(":")[0])
            else:
                outs.stage_text(name, texts[key], key)
        return outs.commit()


def run(path: Union[str, os.PathLike], mode: Optional[str] = None, geometry: Optional[str] = None,
        backend: str = "auto", dtype: Any = np.complex128, out_dir: Optional[str] = None,
        overrides: Optional[Mapping[str, Any]] = None, progress: bool = False,
        announce: Optional[Callable[[str], None]] = None, comm: Any = None) -> DBECResult:
    """Run a DBEC-GP input file and write its outputs, all or none.

    A file with keys of BEC-GP-ROT-OMP (``OPTSCALE``, ``OPTREIM``,
    ``OMEGA``, ``D_Z`` ...) is that program's input: it runs its 2D or 3D
    program, told by its keys (:mod:`nlsepy.dipolar.rot`; the rows are
    labelled as its files label them, ``program`` says whose it was).

    Parameters
    ----------
    path : path-like
        The DBEC-GP (or BEC-GP-ROT-OMP) input file.
    mode : {"imag", "real"}, optional
        Override the program kind (default: MODE key or the file name; a
        BEC-GP-ROT-OMP input: OPTREIM, which `mode` must agree with).
    geometry : str, optional
        Override the geometry (default: GEOMETRY key or the file name; a
        BEC-GP-ROT-OMP input: its keys, which `geometry` must agree with).
    backend : {"auto", "cpu", "cuda"}, optional
        Where to run (``"auto"``: ``NLSEPY_BACKEND`` when set, else a CUDA
        device when present, else the CPU).
    dtype : numpy dtype, optional
        complex128 (default) or complex64.
    out_dir : str, optional
        Folder for the outputs and for INPUT (default: the current one);
        created when missing.
    overrides : mapping, optional
        Key -> value replacing the file's values (e.g. a coarser grid);
        a value is typed as in the file (an integer key takes an int, or a
        string with an integer literal).
    progress : bool, optional
        tqdm progress bars.
    announce : callable, optional
        Called with a line saying what runs, once the input is checked and
        the solver built, before the first step.
    comm : mpi4py communicator, optional
        Run the 3D program distributed over the ranks of `comm` (every rank
        calls this; the slabs of DBEC-GP's MPI edition).  The files are
        those of one process: rank 0 writes the text files and the
        sections, every rank its rows of the full-grid ``NAME.bin`` by MPI
        I/O; PSIOUT is a distributed checkpoint (its parts beside it).

    Returns
    -------
    DBECResult
        Rows of the summary, files written, and the solver.

    Raises
    ------
    InputError
        A bad input file, override or output name (nothing is written).
    OSError
        The input cannot be read or the outputs cannot be written (nothing
        is left behind).

    Examples
    --------
    >>> import nlsepy as nl                                      # doctest: +SKIP
    >>> res = nl.dbec.run("examples/dbec/imag3d-input")          # doctest: +SKIP
    >>> res.rows["After NRUN iter."]["mu"]                       # doctest: +SKIP
    """
    if _program(path) == _rot.PROGRAM:
        if comm is not None:
            raise InputError(f"{os.fspath(path)}: {_rot.PROGRAM} inputs run on one process; "
                             f"only DBEC-GP's 3D program runs distributed (under mpirun)")
        return _rot.run(path, mode=mode, geometry=geometry, backend=backend, dtype=dtype,
                        out_dir=out_dir, overrides=overrides, progress=progress,
                        announce=announce)
    if comm is not None:
        comm = _dist.as_comm(comm)
    rank0 = comm is None or comm.Get_rank() == 0
    cfg = read_input(path)
    _kf.apply_overrides(cfg, overrides, KEYS)
    mode, geometry = _kind(cfg, mode, geometry)
    if comm is not None and geometry != "3d":
        raise InputError(f"{cfg['_path']}: the {geometry} program runs on one process; only "
                         f"the 3D program runs distributed (under mpirun)")
    base = os.getcwd() if out_dir is None else os.fspath(out_dir)
    if "DEVICE" in cfg and backend == "cuda":
        _select_device(cfg, cfg["DEVICE"])
    names = _output_names(cfg, mode, geometry)
    if comm is None:
        outs = _kf.plan_outputs(cfg, names, base)
    else:  # rank 0 writes the run's files: it checks the folder and the names
        outs = _dist.agree(comm, lambda: _kf.plan_outputs(cfg, names, base) if rank0 else None)
    t_wall, t_cpu = time.perf_counter(), time.process_time()
    gpe, info = _build(cfg, mode, geometry, backend, dtype, base, comm)
    n_wf = sum(k in cfg for k in _WF_KEYS)
    if n_wf:
        # the density files are kept until the end (all or none): about 2.3
        # grid-sized double arrays each (the full density, the 3D cuts and
        # sections, and the work of computing them)
        points = int(np.prod(info["shape"], dtype=np.int64))
        require_memory(n_wf * 8.0 * points + 3 * 8.0 * points,
                       f"the wave-function outputs ({', '.join(k for k in _WF_KEYS if k in cfg)}) "
                       f"of a {'x'.join(map(str, info['shape']))} grid")
    res = DBECResult(mode=mode, geometry=geometry, gpe=gpe)
    advance = gpe.imaginary_time if mode == "imag" else gpe.real_time
    nstp, npas, nrun = cfg.get("NSTP", 0), cfg["NPAS"], cfg["NRUN"]
    if announce is not None and rank0:
        announce(f"running {cfg['_path']}: {mode} time, {geometry}, grid "
                 f"{'x'.join(map(str, info['shape']))}, {nstp + npas + nrun} steps")

    wf: Dict[str, bytes] = {}

    def keep_wf(key: str) -> None:
        if key in cfg:
            wf.update({f"{key}:{k}": v for k, v in _wf_files(gpe, cfg).items()})

    keep_wf("INITOUT")
    if nstp > 0:
        # the Initial row as the published programs print it: with the
        # nonlinearities of iteration 0, where the ramp starts from zero
        g, gdd = gpe.g, gpe.gdd
        gpe.g, gpe.gdd = 0.0, 0.0
        res.rows["Initial"] = gpe.observables()
        gpe.g, gpe.gdd = g, gdd
        advance(nstp, ramp=True, progress=progress)
        res.rows["After NSTP iter."] = gpe.observables()
    else:
        res.rows["Initial"] = gpe.observables()
    keep_wf("NSTPOUT")
    dyna_lines: Optional[List[str]] = [] if "DYNAOUT" in names else None
    every = cfg.get("OUTSTPT", max(1, (npas + nrun) // 100))
    done = 0  # iterations since the end of NSTP: the DYNAOUT clock

    def stage(n: int) -> None:
        nonlocal done
        done = _stage(gpe, mode, n, done, every, info["dt"], info["option"], dyna_lines,
                      progress)

    stage(npas)
    res.rows["After NPAS iter."] = gpe.observables()
    keep_wf("NPASOUT")
    if mode == "real":
        gpe.g = gpe.g * cfg.get("GPAR", 1.0)
        gpe.gdd = gpe.gdd * cfg.get("GDDPAR", 1.0)
    stage(nrun)
    res.rows["After NRUN iter."] = gpe.observables()
    keep_wf("NRUNOUT")
    res.seconds = time.perf_counter() - t_wall
    cpu = time.process_time() - t_cpu

    res.summary = _summary(cfg, mode, geometry, info, res.rows, res.seconds, cpu, gpe)
    texts = {"OUTPUT": res.summary, "RMSOUT": _rms_table(mode, info, res.rows),
             "DYNAOUT": "".join(dyna_lines or ()), **wf}
    if "FINALOUT" in cfg:
        texts.update({f"FINALOUT:{k}": v for k, v in _densities(gpe, cfg).items()})
    if comm is None:
        res.files = _write_outputs(outs, names, texts, gpe)
    else:
        res.files = _write_distributed(comm, outs, base, names, texts, gpe)
    return res


def _write_distributed(comm: Any, outs: Optional[OutputSet], base: str,
                       names: Mapping[str, str], texts: Mapping[str, Any],
                       gpe: DipolarGPE) -> List[str]:
    """The outputs of a distributed run, all or none: the full-grid files by
    MPI I/O and PSIOUT by every rank (to temporary names), then rank 0 moves
    them into place with the text files it writes."""
    rank0 = comm.Get_rank() == 0
    written: Dict[str, str] = {}
    try:
        # the folder first (rank 0 makes it), then the collective writes into it
        _dist.agree(comm, lambda: outs._make_folder() if rank0 else None)
        written = _write_slabs(comm, base, names, texts)
        psi_tmp = comm.bcast(os.path.join(base, f".{os.getpid()}.mpiio.{names['PSIOUT']}")
                             if rank0 else None, root=0)
        gpe.save(psi_tmp)  # the index at psi_tmp, the parts beside it
        written["PSIOUT"] = psi_tmp
        files = _dist.agree(comm, lambda: _write_outputs(outs, names, texts, gpe, written)
                            if rank0 else None)
    except BaseException:
        if rank0:  # nothing of the run stays behind
            for path in written.values():
                if os.path.exists(path):
                    os.remove(path)
            if "PSIOUT" in written:
                for r in range(comm.Get_size()):
                    part = _dist.part_name(written["PSIOUT"], r, comm.Get_size())
                    if os.path.exists(part):
                        os.remove(part)
        raise
    return comm.bcast(files, root=0)
