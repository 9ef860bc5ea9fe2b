"""Memory checks that give a model's own advice.

:func:`nlsepy.common.guard.require_memory` ends its message with advice for
the grid models (a smaller grid or complex64); a model whose size comes
from other parameters (atoms, iterations, wires) gives its own instead
through :func:`require_memory_with`.
"""

from __future__ import annotations

from . import guard as _guard

__all__ = ["require_memory_with"]


def require_memory_with(nbytes: float, what: str, advice: str, backend: str = "cpu",
                        host_bytes: float = 0.0) -> None:
    """:func:`nlsepy.common.guard.require_memory` with `advice` in place of
    its own.

    Parameters
    ----------
    nbytes : float
        Bytes the model will take on its backend.
    what : str
        The model and the parameters behind the size, for the message.
    advice : str
        What to do instead, e.g. ``"use fewer atoms"``.
    backend : {"cpu", "cuda"}, optional
        Where `nbytes` is taken.
    host_bytes : float, optional
        Host bytes a CUDA model takes besides.

    Raises
    ------
    MemoryError
        `nbytes` (or `host_bytes`) do not fit; the message names the size,
        what is free and ends with ``"; " + advice``.
    """
    try:
        _guard.require_memory(nbytes, what, backend=backend, host_bytes=host_bytes)
    except MemoryError as exc:
        msg = str(exc)
        cut = msg.rfind("; use ")
        raise MemoryError((msg[:cut] if cut >= 0 else msg) + "; " + advice) from None
