"""``last_step_seconds`` covers every backend call of the last stepping call.

A stepping call is split into backend calls of about 0.1 s (DecGPE) or of
``block_steps`` steps (DipolarGPE), so that Ctrl-C and progress act between
them.  The seconds the backend measures for each call must be summed, not
only the last call's kept (a benchmark divides them by all the steps).  The
backend's clock is replaced by a fixed 0.25 s a call, so the test counts the
calls without timing anything.
"""

from __future__ import annotations

import numpy as np
import pytest

import nlsepy as nl
from nlsepy.common import guard as _guard


class _FixedClock:
    """The solver with its per-call seconds fixed and its calls counted."""

    def __init__(self, inner, name: str) -> None:
        self._inner, self._name, self.calls = inner, name, 0

    def __getattr__(self, attr):
        if attr == self._name:
            def seconds() -> float:
                self.calls += 1
                return 0.25
            return seconds
        return getattr(self._inner, attr)


def test_dec_step_sums_every_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    sim = nl.DecGPE("bcc", blocks=(3, 3, 3), spacing=0.5, g=1.0, trap=(1, 1, 1))
    p = sim.positions
    sim.psi = np.exp(-(p ** 2).sum(axis=1) / 4).astype(np.complex128)
    sim.step(1)  # psi(n - 1) exists: the rest are leapfrog steps
    monkeypatch.setattr(_guard, "CHUNK_SECONDS", 0.0)  # one step a backend call
    clock = _FixedClock(sim._solver, "last_seconds")
    monkeypatch.setattr(sim, "_solver", clock)
    sim.step(5)
    assert clock.calls == 5
    assert sim.last_step_seconds() == pytest.approx(5 * 0.25)
    sim.imaginary_time(3)
    assert clock.calls == 8
    assert sim.last_step_seconds() == pytest.approx(3 * 0.25)


def test_dipolar_run_sums_every_block(monkeypatch: pytest.MonkeyPatch) -> None:
    gpe = nl.DipolarGPE((16, 12, 8), 0.3, 0.002, g=10.0)
    monkeypatch.setattr(type(gpe), "block_steps", property(lambda self: 2))
    clock = _FixedClock(gpe._solver, "last_step_seconds")
    monkeypatch.setattr(gpe, "_solver", clock)
    gpe.real_time(7)  # blocks of 2, 2, 2, 1 steps
    assert clock.calls == 4
    assert gpe.last_step_seconds == pytest.approx(4 * 0.25)
    gpe.imaginary_time(2)
    assert gpe.last_step_seconds == pytest.approx(0.25)
