"""The distributed part of ``nl.MaxwellBloch`` (``comm=``): the atoms split
over the ranks in contiguous blocks, and the checks that every rank was
given the same model and the same run (the fields are the same
everywhere, so every rank must take the same z steps)."""

from __future__ import annotations

import hashlib
from typing import Any, Dict, Mapping, Sequence, Tuple

import numpy as np

from ..common import dist as _dist

__all__ = ["fingerprint", "same_on_every_rank", "digest", "split_atoms", "same_run"]


def fingerprint(value: Any) -> str:
    """A digest of a parameter's value (arrays: dtype, shape and bytes)."""
    h = hashlib.sha256()
    if isinstance(value, np.ndarray):
        a = np.ascontiguousarray(value)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    else:
        h.update(repr(value).encode())
    return h.hexdigest()


def same_on_every_rank(digests: Sequence[Mapping[str, str]], who: str, what: str) -> None:
    """ValueError naming the first rank and parameter that differ from rank 0's."""
    for rank, d in enumerate(digests[1:], start=1):
        for name, value in digests[0].items():
            if d.get(name) != value:
                raise ValueError(f"{who}: every rank must pass {what} (each keeps its own "
                                 f"block of the atoms), but rank {rank}'s {name} differs from "
                                 f"rank 0's")


def digest(mb: Any) -> Dict[str, str]:
    """A fingerprint of each parameter of `mb` (the backend aside), to check
    that every rank of a distributed run was given the same."""
    parts = {"n_g": mb.n_g, "n_e": mb.n_e, "modes": mb.modes, "F": mb._F,
             "h_t": mb.h_t, "n_t": mb.n_t, "kappa_g": mb.kappa_g,
             "kappa_e": mb.kappa_e, "delta": mb.delta, "beta": mb.beta,
             "detunings (line)": mb._detunings, "weights (line)": mb._weights,
             "initial_state": mb._initial_state, "dtype": np.dtype(mb.dtype).name,
             "decay": mb._decay, "dephasing": mb._dephasing, "level shifts": mb._shifts}
    return {k: fingerprint(v) for k, v in parts.items()}


def split_atoms(comm: Any, mb: Any) -> Tuple[np.ndarray, np.ndarray, slice]:
    """The atoms of `mb` over the ranks of `comm` (collective): every rank's
    count and first atom, and this rank's slice; the same error on every
    rank when a rank was given another model or there are fewer atoms than
    ranks."""
    digests = comm.allgather(digest(mb))
    size = comm.Get_size()

    def check() -> None:
        same_on_every_rank(digests, "MaxwellBloch(comm=...)", "the same arguments")
        if mb.n_atoms < size:
            raise ValueError(f"MaxwellBloch(comm=...): {size} ranks share n_atoms = "
                             f"{mb.n_atoms} atoms, but every rank needs at least one: "
                             f"use at most {mb.n_atoms} ranks or more atoms")
    _dist.agree(comm, check)
    counts, starts = _dist.split(mb.n_atoms, size)
    r = comm.Get_rank()
    return counts, starts, slice(int(starts[r]), int(starts[r] + counts[r]))


def same_run(comm: Any, args: Mapping[str, Any]) -> None:
    """The same error on every rank (collective) unless every rank passed
    the same run arguments `args` (name -> value as the run uses it)."""
    mine = {name: fingerprint(value) for name, value in args.items()}
    everyone = comm.allgather(mine)
    _dist.agree(comm, lambda: same_on_every_rank(everyone, "MaxwellBloch.run",
                                                 "the same run arguments"))
