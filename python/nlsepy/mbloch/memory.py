"""The memory accounting of ``nl.MaxwellBloch``: what the model and a run
take, checked before anything is allocated (``MemoryError`` naming the
size, the parameters behind it and what to change)."""

from __future__ import annotations

from typing import Any, Optional, Tuple

import numpy as np

from ..common import backend as _backend
from ..common import checks as _validate
from ..common.guard import require_memory
from . import lindblad as _lindblad

__all__ = ["ADVICE", "require", "require_model", "require_run", "run_bytes"]

#: what a MemoryError of the model advises
ADVICE = "use fewer atoms, a shorter time grid or fewer saved positions"


def require(nbytes: float, what: str, backend: str = "cpu", host_bytes: float = 0.0) -> None:
    """:func:`nlsepy.common.guard.require_memory` with the model's own advice."""
    require_memory(nbytes, what, advice=ADVICE, backend=backend, host_bytes=host_bytes)


def run_bytes(mb: Any, saved_fields: int, saved_populations: int,
              n_atoms: Optional[int] = None) -> Tuple[int, int]:
    """Bytes a run of `mb` takes besides the model: ``(host, device)``: the
    solver's state (on the CPU with every thread's buffers; on CUDA the
    device arrays and the host's staging), the input fields and the kept
    output twice (collected, then stacked).  `n_atoms`: the atoms of this
    process (default those of ``mb.local_slice``)."""
    nf, nt, nl = mb.n_modes, mb.n_t, mb.n_levels
    if n_atoms is None:
        local = mb.local_slice
        n_atoms = local.stop - local.start
    na = n_atoms
    field = 16 * nt * nf
    out = 2 * (saved_fields * field + saved_populations * 8 * nt * nl) + field
    if getattr(mb, "is_open", False):
        return open_run_bytes(mb, na, out, field, saved_populations)
    if mb.backend == "cpu":
        nthr = max(1, min(int(_backend.core().get_num_threads()), -(-na // 16)))
        scratch = 9 * 128 * nl + 64 * mb.couplings + 32 * nf + 1024
        state = (16 + 16 * nl) * na + 5 * field + 8 * nt * nl
        return out + state + nthr * (field + 8 * nt * nl + scratch), 0
    rs = np.dtype(mb.dtype).itemsize // 2
    nb = -(-na // 32)                         # blocks of at most 32 atoms
    dev = (2 * rs + 2 * rs * nl) * na + 5 * field + 8 * nt * nl + nb * 2 * rs * nt * nf
    if saved_populations:
        dev += nb * rs * nt * nl
    return out + 4 * (2 + 2 * nl) * na, dev   # + the atoms staged as float


def open_run_bytes(mb: Any, na: int, out: int, field: int, saved_populations: int) -> Tuple[int, int]:
    """``(host, device)`` bytes of a run of an open model over `na` atoms:
    the density matrices (initial, the march's state), the ensemble density
    matrix of each kept position (twice, as the populations) and the
    per-thread (CPU) or per-block (CUDA) sums."""
    nf, nt, nl = mb.n_modes, mb.n_t, mb.n_levels
    n2, pops = nl * nl, saved_populations > 0
    out += 2 * saved_populations * 16 * nt * n2
    state = (16 + 16 * nl) * na + 5 * field + 16 * nt * n2
    if mb.backend == "cpu":
        nthr = max(1, min(int(_backend.core().get_num_threads()), -(-na // 8)))
        return out + state + _lindblad.open_bytes(nl, nt, nf, na, nthr, pops), 0
    rs = np.dtype(mb.dtype).itemsize // 2
    nb = -(-na // max(1, 256 // n2))          # blocks of the density-matrix kernel
    dev = state + 2 * rs * (n2 + nl) * na + 8 * n2 + nb * 2 * rs * nt * nf + \
        nb * 8 * rs * n2 * max(1, 256 // n2)  # states of blocks that spill to global memory
    if pops:
        dev += nb * 2 * rs * nt * n2
    return out + 16 * n2 * na, dev


def require_model(mb: Any, line: Any, n_atoms: Any, initial_state: Any, classes: int = 1) -> None:
    """MemoryError before the line is sampled when the atoms (the model's
    arrays) and the smallest run (its solver, one kept field) do not fit
    the host.  `mb` has its levels, modes, time grid and backend set."""
    n, extra = 1, 0
    if isinstance(line, (tuple, list)) and len(line) >= 2:
        if not isinstance(line[0], str):
            n = int(np.size(line[0]))
        elif line[0].lower() != "single":
            n = _validate.count("n_atoms", n_atoms, 1)
            extra = 4 * 8 * n                 # the sampling's temporaries
    n *= _validate.count("doppler n_classes", classes, 1)  # every atom of the line, every class
    own = (16 + 16 * mb.n_levels) * n         # detunings, weights, initial states
    if initial_state is not None:
        extra += 16 * mb.n_levels * n         # the given state converted
    host, _ = run_bytes(mb, 1, 0, n)
    require(own + extra + host, f"MaxwellBloch with n_atoms = {n} (n_g + n_e = "
            f"{mb.n_levels} levels, n_t = {mb.n_t}, N_F = {mb.n_modes})")


def require_run(mb: Any, saved_fields: int, saved_populations: int, full_map: bool) -> None:
    """MemoryError before a run allocates anything, when its solver and the
    output it keeps do not fit (the device's memory on CUDA)."""
    host, dev = run_bytes(mb, saved_fields, saved_populations)
    what = (f"MaxwellBloch.run with n_atoms = {mb.n_atoms}, n_t = {mb.n_t}, "
            f"N_F = {mb.n_modes}, n_g + n_e = {mb.n_levels}: fields kept at {saved_fields} "
            f"z positions{' (full_map)' if full_map else ''}, populations at "
            f"{saved_populations}")
    if mb.backend == "cuda":
        require(dev, what, backend="cuda", host_bytes=host)
    else:
        require(host, what)
