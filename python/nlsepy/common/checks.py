"""Argument checks shared by the model classes (clear errors naming the argument)."""

from __future__ import annotations

import math
from numbers import Real
from typing import Any, Tuple

import numpy as np


def real(name: str, value: Any, positive: bool = False, nonneg: bool = False) -> float:
    """`value` as a finite float (> 0 with `positive`, >= 0 with `nonneg`), else raise."""
    if isinstance(value, bool) or not isinstance(value, (Real, np.floating, np.integer)):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or (positive and v <= 0) or (nonneg and v < 0):
        cond = "finite and > 0" if positive else "finite and >= 0" if nonneg else "finite"
        raise ValueError(f"{name} must be {cond}, got {value!r}")
    return v


def count(name: str, value: Any, minimum: int = 0) -> int:
    """`value` as an int >= `minimum`, else raise ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def complex_dtype(value: Any) -> np.dtype:
    """`value` as numpy.complex64 or numpy.complex128, else raise TypeError."""
    try:
        dtype = np.dtype(value)
    except TypeError as exc:
        raise TypeError(f"dtype must be numpy.complex64 or numpy.complex128, "
                        f"got {value!r}") from exc
    if dtype not in (np.complex64, np.complex128):
        raise TypeError(f"dtype must be numpy.complex64 or numpy.complex128, got {dtype}")
    return dtype


def potential(value: Any, shape: Tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A static real potential on the grid: checked, contiguous, in the real
    precision of the complex `dtype`."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "fiu" or arr.dtype == bool:
        raise TypeError(f"V must be a real array, got dtype {arr.dtype}")
    if arr.shape != tuple(shape):
        raise ValueError(f"V must have the shape of the grid {tuple(shape)}, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("V contains non-finite values (NaN or Inf)")
    return np.ascontiguousarray(arr, dtype=np.float32 if dtype == np.complex64 else np.float64)
