"""Exceptions raised by nlsepy solvers."""

from __future__ import annotations

from typing import Any, Optional

__all__ = ["BlowUpError", "BackendError"]


class BlowUpError(RuntimeError):
    """The state became non-finite (NaN or Inf) during a time step.

    The solver keeps the last finite state: after catching the error,
    ``sim.psi`` and ``sim.t`` are those of the last good step.

    Attributes
    ----------
    step : int or None
        Index (counted from the solver's creation, starting at 1) of the step
        that produced the first non-finite value.
    t : float or None
        Time that step would have reached.
    last_good : tuple (float, numpy.ndarray) or None
        ``(t, psi)`` of the last finite state.
    """

    def __init__(self, message: str, step: Optional[int] = None, t: Optional[float] = None,
                 last_good: Optional[tuple] = None) -> None:
        super().__init__(message)
        self.step = step
        self.t = t
        self.last_good = last_good


class BackendError(RuntimeError):
    """A backend is unavailable or failed (no GPU, out of device memory, launch failure)."""

    def __init__(self, message: str, *args: Any) -> None:
        super().__init__(message, *args)
