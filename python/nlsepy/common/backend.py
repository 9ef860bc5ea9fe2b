"""Which backends this build and machine offer, how a name is resolved, and
the one door to the compiled extensions.

``_core`` (the CPU kernels) is always built and imported with the package;
``_cuda`` and ``_mpi`` are optional parts of a build and are imported here
only, on first use (:func:`cuda`, :func:`mpi`), so that ``import nlsepy``
never fails for want of a GPU or of MPI.
"""

from __future__ import annotations

import os
from typing import Any, Tuple

from .. import _build_config, _core
from .errors import BackendError

_NAMES = ("auto", "cpu", "cuda")


def core() -> Any:
    """The CPU extension ``nlsepy._core`` (always built)."""
    return _core


def cuda() -> Any:
    """The CUDA extension ``nlsepy._cuda``, imported on first use.

    Raises
    ------
    ImportError
        This build has no CUDA backend, or its runtime cannot be loaded.
    """
    if not _build_config.cuda:
        raise ImportError("this build of nlsepy has no CUDA backend")
    from .. import _cuda  # type: ignore[attr-defined]  # optional extension
    return _cuda


def mpi() -> Any:
    """The MPI extension ``nlsepy._mpi``, imported on first use.

    Raises
    ------
    ImportError
        This build has no MPI layer, or MPI cannot be loaded.
    """
    from .. import _mpi  # type: ignore[attr-defined]  # optional extension
    return _mpi


def _cuda_models() -> Tuple[str, ...]:
    """Models implemented by the CUDA extension when it imports and sees a GPU."""
    try:
        _cuda = cuda()
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
    return cuda() if backend == "cuda" else _core


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
