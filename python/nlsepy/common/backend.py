"""Which backends this build and machine offer, and how a name is resolved."""

from __future__ import annotations

import os
from typing import Tuple

from . import _build_config
from .errors import BackendError

_NAMES = ("auto", "cpu", "cuda")


def _cuda_models() -> Tuple[str, ...]:
    """Models implemented by the CUDA extension when it imports and sees a GPU."""
    if not _build_config.cuda:
        return ()
    try:
        from . import _cuda  # type: ignore[attr-defined]
    except ImportError:
        return ()
    try:
        if _cuda.device_count() < 1:
            return ()
    except Exception:  # a broken driver counts as no device
        return ()
    return tuple(getattr(_cuda, "MODELS", ()))


def backends(model: str = "NLSE") -> Tuple[str, ...]:
    """Backends available for `model` in this build on this machine.

    Parameters
    ----------
    model : str, optional
        Model class name (default ``"NLSE"``).

    Returns
    -------
    tuple of str
        ``("cpu",)`` or ``("cpu", "cuda")``.

    Examples
    --------
    >>> import nlsepy as nl
    >>> "cpu" in nl.backends()
    True
    """
    return ("cpu", "cuda") if model in _cuda_models() else ("cpu",)


def module(backend: str):
    """The extension module implementing `backend` (``_core`` or ``_cuda``)."""
    if backend == "cuda":
        from . import _cuda  # type: ignore[attr-defined]
        return _cuda
    from . import _core
    return _core


def resolve(backend: str, model: str) -> str:
    """Turn ``"auto" | "cpu" | "cuda"`` into the backend to use for `model`.

    ``"auto"`` takes the environment variable ``NLSEPY_BACKEND`` when it is
    set (``cpu`` or ``cuda``: one switch for every model of a job script),
    else CUDA when this build and machine offer it for `model`, else the CPU.
    """
    if not isinstance(backend, str) or backend.lower() not in _NAMES:
        raise ValueError(f"backend must be one of {_NAMES}, got {backend!r}")
    backend = backend.lower()
    have = backends(model)
    if backend == "auto":
        env = os.environ.get("NLSEPY_BACKEND", "").strip().lower()
        if env in ("", "auto"):
            return "cuda" if "cuda" in have else "cpu"
        if env not in ("cpu", "cuda"):
            raise ValueError(f"the environment variable NLSEPY_BACKEND must be 'cpu', 'cuda' "
                             f"or 'auto', got {os.environ['NLSEPY_BACKEND']!r}")
        backend = env
    if backend not in have:
        why = ("this build has no CUDA backend" if not _build_config.cuda else
               "no CUDA device is available or the CUDA backend lacks this model")
        raise BackendError(f"backend='cuda' is not available for {model}: {why}")
    return backend
