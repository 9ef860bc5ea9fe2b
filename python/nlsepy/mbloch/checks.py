"""The input checks of ``nl.MaxwellBloch``: the mode set, the line, the
initial state and the input fields, each with an error that names the
argument and the value."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Tuple

import numpy as np

from ..common import checks as _validate
from ..reference.mbloch import gaussian_line, lorentzian_line

__all__ = ["LINES", "real_array", "owned", "check_modes", "sample_line",
           "check_initial_state", "input_fields"]

#: line shapes accepted by name in ``line=(name, width[, span])``
LINES = {"gaussian": gaussian_line, "lorentzian": lorentzian_line}


def real_array(name: str, value: Any, shape: Optional[Tuple[int, ...]] = None) -> np.ndarray:
    """`value` as a finite float64 array (of `shape` when given)."""
    arr = np.asarray(value)
    if arr.dtype.kind == "c":
        if np.any(arr.imag != 0):
            raise ValueError(f"{name} must be real, got complex values")
        arr = arr.real
    if arr.dtype.kind not in "fiu" or arr.dtype == bool:
        raise TypeError(f"{name} must be a real array, got dtype {arr.dtype}")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if shape is not None and arr.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite values (NaN or Inf)")
    return arr


def owned(arr: np.ndarray) -> np.ndarray:
    """A read-only copy of `arr` that no caller holds."""
    out = np.array(arr, copy=True)
    out.setflags(write=False)
    return out


def check_modes(modes: Any, n_g: int, n_e: int) -> Tuple[int, int]:
    """`modes` as ``(l_min, l_max)`` that couple some ground level to some
    excited one."""
    try:
        l_min, l_max = modes
    except (TypeError, ValueError):
        raise ValueError(f"modes must be (l_min, l_max), got {modes!r}") from None
    for v in (l_min, l_max):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ValueError(f"modes must be two integers (l_min, l_max), got {modes!r}")
    l_min, l_max = int(l_min), int(l_max)
    if l_max < l_min:
        raise ValueError(f"modes is an empty mode set: l_max={l_max} < l_min={l_min}")
    if l_max < -(n_g - 1) or l_min > n_e - 1:
        raise ValueError(f"modes=({l_min}, {l_max}) couple no ground level (0..{n_g - 1}) "
                         f"to an excited level (0..{n_e - 1}): mode l couples m to m + l")
    return l_min, l_max


def sample_line(line: Any, n_atoms: Any) -> Tuple[np.ndarray, np.ndarray]:
    """The atoms' detunings and weights of `line` (see the ``line`` argument
    of :class:`nlsepy.MaxwellBloch`)."""
    if not isinstance(line, (tuple, list)) or len(line) < 2:
        raise ValueError(f"line must be (name, width[, span]) with name in "
                         f"{sorted(LINES) + ['single']} or (detunings, weights), got {line!r}")
    if isinstance(line[0], str):
        name = line[0].lower()
        if name == "single":
            if len(line) != 2:
                raise ValueError(f"line=('single', detuning) takes one value, got {line!r}")
            det = _validate.real("line detuning", line[1])
            return np.array([det]), np.array([1.0])
        if name not in LINES or len(line) > 3:
            raise ValueError(f"line must be (name, width[, span]) with name in "
                             f"{sorted(LINES) + ['single']}, got {line!r}")
        width = _validate.real(f"line width ({name})", line[1], positive=True)
        n = _validate.count("n_atoms", n_atoms, 1)
        kw = {}
        if len(line) == 3:
            kw["span"] = _validate.real("line span", line[2], positive=True)
        return LINES[name](n, width, **kw)
    if len(line) != 2:
        raise ValueError(f"line must be (detunings, weights), got {len(line)} entries")
    det = real_array("detunings", line[0])
    w = real_array("weights", line[1])
    if det.ndim != 1 or det.size < 1:
        raise ValueError(f"detunings must be a non-empty 1-d array, got shape {det.shape}")
    if w.shape != det.shape:
        raise ValueError(f"weights must have the shape of detunings {det.shape}, got {w.shape}")
    if np.any(w < 0):
        raise ValueError(f"weights must be >= 0, got min {w.min()!r}")
    return det, w


def check_initial_state(psi0: Any, n_levels: int, n_atoms: int) -> np.ndarray:
    """Every atom's normalised initial state, complex128 of shape
    ``(n_atoms, n_levels)`` (ground level 0 when `psi0` is None)."""
    n_lev, n_at = n_levels, n_atoms
    if psi0 is None:
        psi = np.zeros((n_at, n_lev), dtype=np.complex128)
        psi[:, 0] = 1.0
        return psi
    arr = np.asarray(psi0)
    if arr.dtype.kind not in "fciu" or arr.dtype == bool:
        raise TypeError(f"initial_state must be a numeric array, got dtype {arr.dtype}")
    arr = arr.astype(np.complex128)
    if arr.shape == (n_lev,):
        arr = np.broadcast_to(arr, (n_at, n_lev))
    if arr.shape != (n_at, n_lev):
        raise ValueError(f"initial_state must have shape ({n_lev},) or ({n_at}, {n_lev}), "
                         f"got {np.shape(psi0)}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("initial_state contains non-finite values (NaN or Inf)")
    norm = (arr.real ** 2 + arr.imag ** 2).sum(axis=1)
    bad = int(np.argmax(np.abs(norm - 1)))
    if abs(norm[bad] - 1) > 1e-6:
        raise ValueError(f"initial_state must be normalised (|psi|^2 = 1 per atom, the "
                         f"norm monitor's reference): atom {bad} has |psi|^2 = {norm[bad]:g}")
    return np.ascontiguousarray(arr)


def one_or_all(psi: np.ndarray) -> np.ndarray:
    """Every atom's initial state, or the one they share (``(n_levels,)``)."""
    return psi[0] if bool(np.all(psi == psi[:1])) else psi


def _numeric(arr: np.ndarray, name: str) -> np.ndarray:
    if arr.dtype.kind not in "fciu" or arr.dtype == bool:
        raise TypeError(f"{name} must be a numeric array, got dtype {arr.dtype}")
    return arr.astype(np.complex128)


def input_fields(fields0: Any, modes: Tuple[int, int], n_t: int) -> np.ndarray:
    """The input fields as a complex128 array ``(n_t, N_F)`` (see
    :meth:`nlsepy.MaxwellBloch.input_fields`)."""
    nf = modes[1] - modes[0] + 1
    if isinstance(fields0, Mapping):
        out = np.zeros((n_t, nf), dtype=np.complex128)
        for l, pulse in fields0.items():
            if isinstance(l, bool) or not isinstance(l, (int, np.integer)) or \
                    not modes[0] <= l <= modes[1]:
                raise ValueError(f"fields0: mode {l!r} is not in the mode set "
                                 f"{modes[0]}..{modes[1]}")
            p = np.asarray(pulse)
            if p.shape != (n_t,):
                raise ValueError(f"fields0[{l}] must have shape ({n_t},), got {p.shape}")
            out[:, int(l) - modes[0]] = _numeric(p, f"fields0[{l}]")
    else:
        arr = np.asarray(fields0)
        if arr.ndim == 1 and nf == 1:
            arr = arr[:, None]
        if arr.shape != (n_t, nf):
            raise ValueError(f"fields0 must have shape (n_t, N_F) = ({n_t}, {nf})"
                             + (f" or ({n_t},)" if nf == 1 else "")
                             + f", got {np.shape(fields0)}")
        out = np.ascontiguousarray(_numeric(arr, "fields0"), dtype=np.complex128)
    if not np.all(np.isfinite(out)):
        bad = np.argwhere(~np.isfinite(out))[0]
        raise ValueError(f"fields0 must be finite: t index {bad[0]}, mode "
                         f"l={modes[0] + bad[1]} is {out[tuple(bad)]!r}")
    return out
