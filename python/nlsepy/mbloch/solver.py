"""Maxwell-Bloch propagation through multi-level atoms (``nl.MaxwellBloch``).

The model and scheme of Demeter, "Solving the Maxwell-Bloch equations for
resonant nonlinear optics using GPUs" (source 004): field modes
:math:`\\varepsilon_l(z, t)`, ``l = l_min .. l_max``, in retarded time,
propagate by eq. 2 through an inhomogeneously broadened ensemble of atoms
with ``n_g`` ground and ``n_e`` excited levels obeying the optical Bloch
equations (eq. 4) with the polarisation of eq. 6.  Units and equations are
those of :mod:`nlsepy.reference.mbloch` (PHYSICS.md section 5): fields in
Rabi-frequency units, :math:`\\partial_z\\varepsilon_l = iP_l`,
:math:`P_l = \\beta\\sum_{D,m} w_D F_{m,m+l} a^{D*}_m b^D_{m+l}`.

The scheme is algorithm 1: at each :math:`z_j` every atom marches the time
grid by the RK4 of algorithm 2 from the initial state, the polarisation is
reduced over the atoms and the fields advance by Adams-Bashforth 2 in z,
started by ``euler_substeps`` Euler steps.  The atom march runs in C
(OpenMP over blocks of atoms, :file:`csrc/mbloch/mbloch.c`) or on the GPU; this
module validates the input, loops over z steps and collects the output.

With ``comm=`` (an mpi4py communicator) the atoms are split over the ranks
in contiguous blocks; the solver of each rank adds the ranks' polarisations
(and populations) in rank order once per atom solve, so the fields and
every output are the same on every rank.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import _backend, _dist, _guard, _validate
from ._validate import Fixed
from ._hdf5 import check_output as _check_output
from .errors import BlowUpError
from .reference.mbloch import (absorption_coefficient, area_theorem, franck_condon,
                               gaussian_line, gaussian_pulse, lorentzian_line, sech_pulse)

__all__ = ["MaxwellBloch", "MaxwellBlochResult", "franck_condon", "sech_pulse",
           "gaussian_pulse", "gaussian_line", "lorentzian_line", "absorption_coefficient",
           "area_theorem"]

#: line shapes accepted by name in ``line=(name, width[, span])``
LINES = {"gaussian": gaussian_line, "lorentzian": lorentzian_line}


def _real_array(name: str, value: Any, shape: Optional[Tuple[int, ...]] = None) -> np.ndarray:
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


def _owned(arr: np.ndarray) -> np.ndarray:
    """A read-only copy of `arr` that no caller holds."""
    out = np.array(arr, copy=True)
    out.setflags(write=False)
    return out


def _require(nbytes: float, what: str, backend: str = "cpu", host_bytes: float = 0.0) -> None:
    """:func:`nlsepy._guard.require_memory` with the model's own advice."""
    try:
        _guard.require_memory(nbytes, what, backend=backend, host_bytes=host_bytes)
    except MemoryError as exc:
        msg = str(exc)
        cut = msg.rfind("; use ")
        raise MemoryError((msg[:cut] if cut >= 0 else msg) + "; use fewer atoms, a shorter "
                          "time grid or fewer saved positions") from None


def _fingerprint(value: Any) -> str:
    """A digest of a parameter's value (arrays: dtype, shape and bytes)."""
    h = hashlib.sha256()
    if isinstance(value, np.ndarray):
        a = np.ascontiguousarray(value)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    else:
        h.update(repr(value).encode())
    return h.hexdigest()


def _same_on_every_rank(digests: Sequence[Mapping[str, str]], who: str, what: str) -> None:
    """ValueError naming the first rank and parameter that differ from rank 0's."""
    for rank, d in enumerate(digests[1:], start=1):
        for name, value in digests[0].items():
            if d.get(name) != value:
                raise ValueError(f"{who}: every rank must pass {what} (each keeps its own "
                                 f"block of the atoms), but rank {rank}'s {name} differs from "
                                 f"rank 0's")


def _Fixed(doc: str, hint: Optional[str] = None, copy: bool = False) -> Fixed:
    """A parameter fixed at construction (:class:`nlsepy._validate.Fixed`)."""
    def refuse(name: str, value: Any) -> str:
        return (f"MaxwellBloch.{name} is read-only: runs use the value given at construction; "
                f"make a new MaxwellBloch with {hint or f'mb.replace({name}=...)'}")
    return Fixed(doc, refuse, copy=copy)


@dataclass
class MaxwellBlochResult:
    """Output of :meth:`MaxwellBloch.run`.

    Attributes
    ----------
    z : numpy.ndarray
        Positions of `fields`, shape ``(n_save,)`` (every ``z_j`` with
        ``full_map=True``).
    t : numpy.ndarray
        Time grid, shape ``(n_t,)``.
    modes : numpy.ndarray
        The mode numbers ``l_min .. l_max``.
    fields : numpy.ndarray
        :math:`\\varepsilon_l(z, t)`, complex128 of shape ``(n_save, n_t, N_F)``.
    z_populations : numpy.ndarray
        Positions of `populations` (the requested z).
    populations : numpy.ndarray or None
        :math:`\\sum_D w_D|\\psi^D_i(z, t)|^2`, shape ``(len(z_populations),
        n_t, n_g + n_e)`` (ground levels first), or None when not asked for.
    norm_deviation : float
        :math:`\\max ||\\psi|^2 - 1|` over every atom, time and atom solve of
        the run (Euler sub-steps included): the accuracy monitor of section 3.
    seconds : float
        Wall time of the run.
    kernel_seconds : float
        Time spent in the backend's steps (CUDA events on the device).
    h_z : float
        The z step.
    interrupted : bool
        True for the partial result of a run stopped by Ctrl-C
        (:attr:`MaxwellBloch.partial_result`): it ends with the fields at
        the z reached.
    """

    z: np.ndarray
    t: np.ndarray
    modes: np.ndarray
    fields: np.ndarray
    z_populations: np.ndarray
    populations: Optional[np.ndarray]
    norm_deviation: float
    seconds: float
    kernel_seconds: float
    h_z: float
    interrupted: bool = False

    @property
    def h_t(self) -> float:
        """The time step."""
        return float(self.t[1] - self.t[0])

    def _integral(self, f: np.ndarray) -> np.ndarray:
        # trapezoidal rule over the time grid, axis 1 of (n_save, n_t, N_F)
        return self.h_t * (f.sum(axis=1) - 0.5 * (f[:, 0] + f[:, -1]))

    def areas(self) -> np.ndarray:
        """Pulse areas :math:`\\theta_l(z) = \\int\\varepsilon_l(z, t)\\,dt`
        (trapezoidal rule), complex of shape ``(n_save, N_F)``; real for real
        input pulses on a symmetric line."""
        return self._integral(self.fields)

    def energies(self) -> np.ndarray:
        """Pulse energies :math:`\\int|\\varepsilon_l(z, t)|^2 dt` per mode,
        shape ``(n_save, N_F)``."""
        return self._integral(self.fields.real ** 2 + self.fields.imag ** 2)

    def field(self, l: int) -> np.ndarray:
        """:math:`\\varepsilon_l(z, t)` of mode ``l``, shape ``(n_save, n_t)``."""
        idx = int(l) - int(self.modes[0])
        if not 0 <= idx < self.modes.size:
            raise ValueError(f"mode l={l!r} is not in the mode set {self.modes[0]}..{self.modes[-1]}")
        return self.fields[:, :, idx]

    def plot(self, modes: Optional[Sequence[int]] = None, **kwargs: Any) -> Any:
        """Maps of :math:`|\\varepsilon_l(z, t)|^2` over (t, z), one panel per
        mode, and the level populations against t; needs matplotlib
        (``pip install 'nlsepy[plot]'``).

        Parameters
        ----------
        modes : sequence of int, optional
            Modes to draw (default: those that carry intensity somewhere).
        **kwargs
            ``fig``, ``ax`` (the maps only, one Axes per mode), ``path``
            (save), ``dpi``, ``title``, and keywords of
            ``Axes.pcolormesh`` (e.g. ``cmap``): see :func:`nlsepy.plot.mbloch`.

        Returns
        -------
        matplotlib.figure.Figure
        """
        from . import plot
        return plot.mbloch(self, modes=modes, **kwargs)

    def animate(self, path: Any, **kwargs: Any) -> str:
        """Write an animation of the pulses along z (MP4 when ffmpeg is on
        PATH, else GIF; ``*.gif`` always GIF).

        Parameters
        ----------
        path : path-like
            ``*.gif``, ``*.mp4`` or no suffix; written whole or not at all.
        **kwargs
            ``modes``, ``fps``, ``dpi``: see :func:`nlsepy.plot.animate_mbloch`.

        Returns
        -------
        str
            The path written.
        """
        from . import plot
        return plot.animate_mbloch(self, path, **kwargs)


class _Saved:
    """The z indices where a run keeps its output, without listing them:
    every `every`-th and the last, or the given `indices`; :meth:`end_at`
    adds the index where a callback ended the run."""

    def __init__(self, n_z: int, every: int = 0, indices: Optional[np.ndarray] = None) -> None:
        self.n_z, self.every = n_z, every
        self.indices = np.zeros(0, np.int64) if indices is None else indices
        self.extra: set = set()

    def count(self) -> int:
        """How many indices there are."""
        if self.every:
            return self.n_z // self.every + 1 + (self.n_z % self.every != 0)
        return int(self.indices.size)

    def __contains__(self, j: int) -> bool:
        if j in self.extra:
            return True
        if self.every:
            return j % self.every == 0 or j == self.n_z
        q = int(np.searchsorted(self.indices, j))
        return q < self.indices.size and int(self.indices[q]) == j

    def end_at(self, j: int) -> None:
        """Keep the output at `j` too (the run ends there)."""
        self.extra.add(j)

    def next_stop(self, j: int, full_map: bool) -> int:
        """The first index after `j` where something is kept, or the last."""
        if full_map:
            return j + 1
        if self.every:
            return min((j // self.every + 1) * self.every, self.n_z)
        q = int(np.searchsorted(self.indices, j, side="right"))
        return min(int(self.indices[q]), self.n_z) if q < self.indices.size else self.n_z


@dataclass
class _RunState:
    """What a run's callback sees after each z step."""

    j: int
    z: float
    norm_deviation: float
    _solver: Any = field(repr=False)

    @property
    def fields(self) -> np.ndarray:
        """:math:`\\varepsilon_l(z_j, t)`, shape ``(n_t, N_F)``."""
        return self._solver.get_fields()

    @property
    def polarisation(self) -> np.ndarray:
        """The polarisation of the last atom solve, shape ``(n_t, N_F)``."""
        return self._solver.get_polarisation()


class MaxwellBloch:
    """Maxwell-Bloch propagation of multimode pulses through an inhomogeneously
    broadened ensemble of multi-level atoms (source 004, eqs. 1-6, algorithms 1-2).

    Parameters
    ----------
    n_g, n_e : int, optional
        Numbers of ground and excited levels (default 1, 1: the two-level atom).
    modes : (int, int), optional
        ``(l_min, l_max)``: mode l couples ground m to excited m + l.
    F : array_like, optional
        Real coupling matrix of shape ``(n_g, n_e)``, ``F[m, n]`` between
        ground m and excited n (eqs. 4, 6), e.g. :func:`nlsepy.mbloch.franck_condon`.
        Required unless ``n_g = n_e = 1`` (then 1).
    h_t : float
        Time step (keyword).
    n_t : int
        Time grid points ``t_k = k h_t``, ``k = 0 .. n_t - 1`` (keyword).
    kappa_g, kappa_e, delta : float, optional
        Ground and excited level spacings and the mode spacing: the diagonal
        of eq. 4 is :math:`m(\\kappa_g - \\delta) + \\Delta` (ground) and
        :math:`n(\\kappa_e - \\delta)` (excited).
    line : tuple, optional
        The inhomogeneous line: ``("gaussian", sigma)`` or
        ``("lorentzian", gamma)`` (optionally a third entry, the sampled
        half-span in widths; see :func:`nlsepy.mbloch.gaussian_line`), sampled by
        `n_atoms` atoms; ``("single", detuning)`` for one atom of weight 1;
        or ``(detunings, weights)`` arrays of your own.  Default
        ``("gaussian", 1.0)``.
    n_atoms : int, optional
        Atoms sampling a named line (N_Delta).
    beta : float, optional
        Coupling constant of eq. 2 in these units (z in units of 1/beta).
    initial_state : array_like, optional
        Normalised amplitudes ``(a_0..a_{n_g-1}, b_0..b_{n_e-1})``, shape
        ``(n_g + n_e,)`` for every atom or ``(N_Delta, n_g + n_e)``; default
        ground level 0.
    dtype : {numpy.complex128, numpy.complex64}, optional
        Precision of the atoms' states and RK4 (the fields and the reductions
        over atoms are kept in double).  On the CUDA backend, where both
        manifolds have at most 32 levels and the GPU has tensor cores (sm_80
        and later), complex128 runs on the FP64 tensor cores and complex64 in
        float with the products on the TF32 tensor cores, each operand split
        in two TF32 numbers (three products per real product, as accurate as
        float arithmetic; on an H100 or H200 through the warpgroup MMA where
        the larger manifold has 17 to 32 levels); complex64 is then about
        1.7x (sm_80) to 2.6x (sm_90) faster.
    backend : {"auto", "cpu", "cuda"}, optional
        Where the atoms are solved.
    comm : mpi4py.MPI.Intracomm, optional
        Run distributed over the ranks of this communicator (e.g.
        ``MPI.COMM_WORLD``, under ``mpirun``).  Every rank passes the same
        arguments (the whole ensemble); each solves its own contiguous block
        of the atoms (:attr:`local_slice`, the first ``N_Delta % size`` ranks
        one atom more) and the polarisation of eq. 6 (and the populations)
        is summed over the ranks in rank order once per atom solve, so the
        fields and every output of :meth:`run` are the same on every rank
        (equal to one process's within rounding; bit-identical across runs
        with the same number of ranks).  Needs nlsepy's MPI layer and
        mpi4py; there must be at least as many atoms as ranks.

    Examples
    --------
    >>> import numpy as np, nlsepy as nl
    >>> mb = nl.MaxwellBloch(h_t=0.05, n_t=401, line=("gaussian", 1.0), n_atoms=64)
    >>> e0 = nl.mbloch.sech_pulse(mb.t, 1.0, 8.0, area=2 * np.pi)
    >>> out = mb.run(e0, h_z=0.1, n_z=10)
    >>> out.fields.shape, bool(abs(out.areas()[-1, 0].real - 2 * np.pi) < 0.1)
    ((11, 401, 1), True)
    """

    n_g = _Fixed("Ground levels.")
    n_e = _Fixed("Excited levels.")
    modes = _Fixed("``(l_min, l_max)``, the mode set.")
    F = _Fixed("The coupling matrix ``(n_g, n_e)`` (a copy).", copy=True)
    h_t = _Fixed("The time step.")
    n_t = _Fixed("Points of the time grid.")
    kappa_g = _Fixed("Ground level spacing.")
    kappa_e = _Fixed("Excited level spacing.")
    delta = _Fixed("Mode spacing.")
    beta = _Fixed("Coupling constant of eq. 2.")
    detunings = _Fixed("The atoms' detunings ``(N_Delta,)`` (a copy).",
                       "mb.replace(line=(detunings, weights))", copy=True)
    weights = _Fixed("The atoms' weights ``(N_Delta,)`` (a copy).",
                     "mb.replace(line=(detunings, weights))", copy=True)
    initial_state = _Fixed("Every atom's initial state ``(N_Delta, n_g + n_e)`` (a copy).",
                           copy=True)
    dtype = _Fixed("Precision of the atoms (numpy.complex128 or numpy.complex64).")
    backend = _Fixed('Where the atoms are solved ("cpu" or "cuda").')

    def __init__(self, n_g: int = 1, n_e: int = 1, modes: Tuple[int, int] = (0, 0),
                 F: Optional[Any] = None, *, h_t: float, n_t: int, kappa_g: float = 0.0,
                 kappa_e: float = 0.0, delta: float = 0.0,
                 line: Tuple[Any, ...] = ("gaussian", 1.0), n_atoms: int = 128,
                 beta: float = 1.0, initial_state: Optional[Any] = None,
                 dtype: Any = np.complex128, backend: str = "auto", comm: Any = None) -> None:
        self._partial: Optional[MaxwellBlochResult] = None
        self._comm: Any = None
        self._capsule: Any = None
        args = (n_g, n_e, modes, F, h_t, n_t, kappa_g, kappa_e, delta, line, n_atoms, beta,
                initial_state, dtype, backend)
        if comm is None:
            self._setup(*args)
            self._local = slice(0, self.n_atoms)
            return
        comm = _dist.as_comm(comm)
        _dist.agree(comm, lambda: self._setup(*args))
        self._distribute(comm)

    def _setup(self, n_g: Any, n_e: Any, modes: Any, F: Any, h_t: Any, n_t: Any, kappa_g: Any,
               kappa_e: Any, delta: Any, line: Any, n_atoms: Any, beta: Any,
               initial_state: Any, dtype: Any, backend: Any) -> None:
        """Check and keep the constructor's arguments."""
        self._n_g = _validate.count("n_g", n_g, 1)
        self._n_e = _validate.count("n_e", n_e, 1)
        self._modes = self._check_modes(modes)
        if F is None:
            if (self.n_g, self.n_e) != (1, 1):
                raise ValueError(f"F is required for n_g={self.n_g}, n_e={self.n_e} "
                                 f"(e.g. nl.mbloch.franck_condon(n_g, n_e, displacement))")
            F = [[1.0]]
        self._F = _owned(_real_array("F", F, (self.n_g, self.n_e)))
        self._h_t = _validate.real("h_t", h_t, positive=True)
        self._n_t = _validate.count("n_t", n_t, 2)
        self._kappa_g = _validate.real("kappa_g", kappa_g)
        self._kappa_e = _validate.real("kappa_e", kappa_e)
        self._delta = _validate.real("delta", delta)
        self._beta = _validate.real("beta", beta)
        dt = _validate.complex_dtype(dtype)
        self._dtype = dt.type
        self._backend = _backend.resolve(backend, "MaxwellBloch")
        self._core = _backend.module(self.backend)
        self._require_model(line, n_atoms, initial_state)
        det, w = self._line(line, n_atoms)
        self._detunings, self._weights = _owned(det), _owned(w)
        self._initial_state = _owned(self._check_initial_state(initial_state))

    def _digest(self) -> Dict[str, str]:
        """A fingerprint of each parameter (the backend aside), to check that
        every rank of a distributed run was given the same."""
        parts = {"n_g": self.n_g, "n_e": self.n_e, "modes": self.modes, "F": self._F,
                 "h_t": self.h_t, "n_t": self.n_t, "kappa_g": self.kappa_g,
                 "kappa_e": self.kappa_e, "delta": self.delta, "beta": self.beta,
                 "detunings (line)": self._detunings, "weights (line)": self._weights,
                 "initial_state": self._initial_state, "dtype": np.dtype(self.dtype).name}
        return {k: _fingerprint(v) for k, v in parts.items()}

    def _distribute(self, comm: Any) -> None:
        """Split the atoms over the ranks of `comm` (every rank calls this)."""
        digests = comm.allgather(self._digest())
        size = comm.Get_size()

        def check() -> None:
            _same_on_every_rank(digests, "MaxwellBloch(comm=...)", "the same arguments")
            if self.n_atoms < size:
                raise ValueError(f"MaxwellBloch(comm=...): {size} ranks share n_atoms = "
                                 f"{self.n_atoms} atoms, but every rank needs at least one: "
                                 f"use at most {self.n_atoms} ranks or more atoms")
        _dist.agree(comm, check)
        self._counts, self._starts = _dist.split(self.n_atoms, size)
        r = comm.Get_rank()
        self._local = slice(int(self._starts[r]), int(self._starts[r] + self._counts[r]))
        self._capsule = _dist.capsule(comm)
        self._comm = comm
        if self.backend == "cuda":  # one GPU per rank of a node
            _dist.select_gpu(comm)

    def _agreed(self, fn: Callable[[], Any]) -> Any:
        """``fn()``, and in a distributed run the same error on every rank
        when it fails on one (:func:`nlsepy._dist.agree`)."""
        return fn() if self._comm is None else _dist.agree(self._comm, fn)

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_") or isinstance(getattr(type(self), name, None), Fixed):
            object.__setattr__(self, name, value)  # a _Fixed parameter refuses
            return
        raise AttributeError(f"MaxwellBloch has no parameter {name!r} to set: its parameters "
                             f"are fixed at construction (mb.replace(...) makes a new model)")

    def replace(self, **changes: Any) -> "MaxwellBloch":
        """A new model with some parameters changed.

        Parameters
        ----------
        **changes
            Any argument of the constructor; the others are this model's
            (the line as ``(detunings, weights)``; the initial state is kept
            while the atoms and levels stay, else it defaults to ground
            level 0 unless every atom had the same).

        Returns
        -------
        MaxwellBloch
        """
        kw: Dict[str, Any] = dict(n_g=self.n_g, n_e=self.n_e, modes=self.modes, F=self._F,
                                  h_t=self.h_t, n_t=self.n_t, kappa_g=self.kappa_g,
                                  kappa_e=self.kappa_e, delta=self.delta,
                                  line=(self._detunings, self._weights), n_atoms=self.n_atoms,
                                  beta=self.beta, initial_state=self._initial_state,
                                  dtype=self.dtype, backend=self.backend, comm=self._comm)
        unknown = sorted(set(changes) - set(kw))
        if unknown:
            raise TypeError(f"replace() takes the constructor's arguments {sorted(kw)}, "
                            f"got {unknown}")
        if "initial_state" not in changes and ({"line", "n_atoms", "n_g", "n_e"} & set(changes)):
            psi = self._initial_state
            same = bool(np.all(psi == psi[:1]))
            keep_levels = changes.get("n_g", self.n_g) + changes.get("n_e", self.n_e) == \
                self.n_levels
            kw["initial_state"] = psi[0] if same and keep_levels else None
        if ("n_g" in changes or "n_e" in changes) and "F" not in changes:
            kw["F"] = None
        kw.update(changes)
        return MaxwellBloch(**kw)

    @property
    def partial_result(self) -> Optional["MaxwellBlochResult"]:
        """The partial result of the latest :meth:`run` when Ctrl-C stopped
        it, else None.

        It holds the fields and populations of the saved positions reached
        and ends with the fields at the z the run reached (``z[-1]``); its
        ``interrupted`` is True.  The model itself holds no propagation
        state: a new run starts again from z = 0.
        """
        return self._partial

    # ------------------------------------------------------------ memory
    def _require_model(self, line: Any, n_atoms: Any, initial_state: Any) -> None:
        """MemoryError before the line is sampled when the atoms (the
        model's arrays) and the smallest run (its solver, one kept field)
        do not fit the host."""
        n, extra = 1, 0
        if isinstance(line, (tuple, list)) and len(line) >= 2:
            if not isinstance(line[0], str):
                n = int(np.size(line[0]))
            elif line[0].lower() != "single":
                n = _validate.count("n_atoms", n_atoms, 1)
                extra = 4 * 8 * n                 # the sampling's temporaries
        own = (16 + 16 * self.n_levels) * n       # detunings, weights, initial states
        if initial_state is not None:
            extra += 16 * self.n_levels * n       # the given state converted
        host, _ = self._run_bytes(1, 0, n)
        _require(own + extra + host, f"MaxwellBloch with n_atoms = {n} (n_g + n_e = "
                 f"{self.n_levels} levels, n_t = {self.n_t}, N_F = {self.n_modes})")

    def _run_bytes(self, saved_fields: int, saved_populations: int,
                   n_atoms: Optional[int] = None) -> Tuple[int, int]:
        """Bytes a run takes besides the model: ``(host, device)``: the
        solver's state (on the CPU with every thread's buffers; on CUDA the
        device arrays and the host's staging), the input fields and the kept
        output twice (collected, then stacked)."""
        nf, nt, nl = self.n_modes, self.n_t, self.n_levels
        na = self._local.stop - self._local.start if n_atoms is None else n_atoms
        field = 16 * nt * nf
        out = 2 * (saved_fields * field + saved_populations * 8 * nt * nl) + field
        if self.backend == "cpu":
            from . import _core
            nthr = max(1, min(int(_core.get_num_threads()), -(-na // 16)))
            scratch = 9 * 128 * nl + 64 * self.couplings + 32 * nf + 1024
            state = (16 + 16 * nl) * na + 5 * field + 8 * nt * nl
            return out + state + nthr * (field + 8 * nt * nl + scratch), 0
        rs = np.dtype(self.dtype).itemsize // 2
        nb = -(-na // 32)                         # blocks of at most 32 atoms
        dev = (2 * rs + 2 * rs * nl) * na + 5 * field + 8 * nt * nl + nb * 2 * rs * nt * nf
        if saved_populations:
            dev += nb * rs * nt * nl
        return out + 4 * (2 + 2 * nl) * na, dev   # + the atoms staged as float

    # ------------------------------------------------------------ validation
    def _check_modes(self, modes: Any) -> Tuple[int, int]:
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
        if l_max < -(self.n_g - 1) or l_min > self.n_e - 1:
            raise ValueError(f"modes=({l_min}, {l_max}) couple no ground level (0..{self.n_g - 1}) "
                             f"to an excited level (0..{self.n_e - 1}): mode l couples m to m + l")
        return l_min, l_max

    def _line(self, line: Any, n_atoms: Any) -> Tuple[np.ndarray, np.ndarray]:
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
        det = _real_array("detunings", line[0])
        w = _real_array("weights", line[1])
        if det.ndim != 1 or det.size < 1:
            raise ValueError(f"detunings must be a non-empty 1-d array, got shape {det.shape}")
        if w.shape != det.shape:
            raise ValueError(f"weights must have the shape of detunings {det.shape}, got {w.shape}")
        if np.any(w < 0):
            raise ValueError(f"weights must be >= 0, got min {w.min()!r}")
        return det, w

    def _check_initial_state(self, psi0: Any) -> np.ndarray:
        n_lev, n_at = self.n_levels, self.n_atoms
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

    # ------------------------------------------------------------ properties
    @property
    def n_levels(self) -> int:
        """n_g + n_e."""
        return self.n_g + self.n_e

    @property
    def n_modes(self) -> int:
        """N_F = l_max - l_min + 1."""
        return self.modes[1] - self.modes[0] + 1

    @property
    def mode_numbers(self) -> np.ndarray:
        """The modes ``l_min .. l_max``."""
        return np.arange(self.modes[0], self.modes[1] + 1)

    @property
    def n_atoms(self) -> int:
        """N_Delta, the atoms sampling the line."""
        return int(self._detunings.size)

    @property
    def comm(self) -> Any:
        """The communicator of a distributed run (``comm=``), else None."""
        return self._comm

    @property
    def local_slice(self) -> slice:
        """This rank's atoms: ``mb.detunings[mb.local_slice]`` are those its
        solver holds (all of them without ``comm``)."""
        return self._local

    @property
    def comm_info(self) -> Optional[Dict[str, Any]]:
        """How a distributed run is laid out, or None without ``comm``.

        A dict: ``rank``, ``size`` and the MPI library (``library``,
        ``standard``, ``cuda_aware``, ``thread_multiple``); ``atoms`` (this
        rank's ``(start, stop)``), ``atoms_per_rank``; ``reduction``, how the
        polarisation is summed over the ranks.
        """
        if self._comm is None:
            return None
        info = _dist.info(self._comm)
        staged = " (copied through the host)" if self.backend == "cuda" else ""
        info.update(atoms=(self._local.start, self._local.stop),
                    atoms_per_rank=[int(c) for c in self._counts],
                    reduction=f"polarisation and populations{staged} summed in rank order, "
                              f"one sum and one maximum (norm monitor) per atom solve")
        return info

    @property
    def t(self) -> np.ndarray:
        """The time grid ``t_k = k h_t``."""
        return self.h_t * np.arange(self.n_t)

    @property
    def couplings(self) -> int:
        """Nonzero couplings: pairs (m, n) with ``l_min <= n - m <= l_max``."""
        m = np.arange(self.n_g)[:, None]
        n = np.arange(self.n_e)[None, :]
        return int(((n - m >= self.modes[0]) & (n - m <= self.modes[1])).sum())

    def flops_per_atom_step(self) -> int:
        """Floating-point operations of one atom over one time step, as counted
        for the benchmarks (bench/mbloch.py): 4 RK4 stages x 2 off-diagonal
        blocks x couplings x 8 (a complex multiply-add); per level 4 stages x
        14 (diagonal term, stage combination, accumulator) + 2 (norm); the
        polarisation of eq. 6, couplings x 8."""
        return 64 * self.couplings + 58 * self.n_levels + 8 * self.couplings

    # ------------------------------------------------------------ input
    def input_fields(self, fields0: Any) -> np.ndarray:
        """The input fields :math:`\\varepsilon_l(0, t_k)` as a complex128 array
        of shape ``(n_t, N_F)``.

        Parameters
        ----------
        fields0 : array_like or dict
            An array ``(n_t, N_F)`` (or ``(n_t,)`` with one mode), or a dict
            ``{l: (n_t,) array}`` for the modes that carry a pulse (the others
            start at zero), e.g. ``{0: nl.mbloch.sech_pulse(mb.t, 1.0, 8.0,
            area=2 * np.pi)}``.
        """
        nf, n_t = self.n_modes, self.n_t
        if isinstance(fields0, Mapping):
            out = np.zeros((n_t, nf), dtype=np.complex128)
            for l, pulse in fields0.items():
                if isinstance(l, bool) or not isinstance(l, (int, np.integer)) or \
                        not self.modes[0] <= l <= self.modes[1]:
                    raise ValueError(f"fields0: mode {l!r} is not in the mode set "
                                     f"{self.modes[0]}..{self.modes[1]}")
                p = np.asarray(pulse)
                if p.shape != (n_t,):
                    raise ValueError(f"fields0[{l}] must have shape ({n_t},), got {p.shape}")
                out[:, int(l) - self.modes[0]] = self._numeric(p, f"fields0[{l}]")
        else:
            arr = np.asarray(fields0)
            if arr.ndim == 1 and nf == 1:
                arr = arr[:, None]
            if arr.shape != (n_t, nf):
                raise ValueError(f"fields0 must have shape (n_t, N_F) = ({n_t}, {nf})"
                                 + (f" or ({n_t},)" if nf == 1 else "")
                                 + f", got {np.shape(fields0)}")
            out = np.ascontiguousarray(self._numeric(arr, "fields0"), dtype=np.complex128)
        if not np.all(np.isfinite(out)):
            bad = np.argwhere(~np.isfinite(out))[0]
            raise ValueError(f"fields0 must be finite: t index {bad[0]}, mode "
                             f"l={self.modes[0] + bad[1]} is {out[tuple(bad)]!r}")
        return out

    @staticmethod
    def _numeric(arr: np.ndarray, name: str) -> np.ndarray:
        if arr.dtype.kind not in "fciu" or arr.dtype == bool:
            raise TypeError(f"{name} must be a numeric array, got dtype {arr.dtype}")
        return arr.astype(np.complex128)

    def _saved(self, save_every: Any, h_z: float, n_z: int) -> "_Saved":
        if np.ndim(save_every) == 0:
            k = _validate.count("save_every", save_every, 1)
            return _Saved(n_z, every=k)
        z = _real_array("save_every (z positions)", save_every)
        if z.ndim != 1 or z.size < 1:
            raise ValueError(f"save_every must be an integer or a 1-d array of z positions, "
                             f"got shape {z.shape}")
        j = np.rint(z / h_z).astype(np.int64)
        off = np.abs(j * h_z - z) > 1e-9 * max(1.0, n_z * h_z)
        if np.any(off) or np.any(j < 0) or np.any(j > n_z):
            q = int(np.argmax(off | (j < 0) | (j > n_z)))
            raise ValueError(f"save_every: z = {z[q]!r} is not a point z_j = j h_z of the grid "
                             f"0 .. {n_z * h_z:g} (h_z = {h_z:g})")
        return _Saved(n_z, indices=np.unique(j))

    # ------------------------------------------------------------ running
    def run(self, fields0: Any, h_z: float, n_z: int, save_every: Any = 1,
            full_map: bool = False, populations: bool = True, euler_substeps: int = 8,
            progress: bool = False,
            callback: Optional[Callable[[Any], Any]] = None,
            output: Any = None) -> MaxwellBlochResult:
        """Propagate `fields0` from z = 0 to ``n_z h_z`` (algorithm 1).

        Parameters
        ----------
        fields0 : array_like or dict
            The input fields :math:`\\varepsilon_l(0, t)` (see :meth:`input_fields`).
        h_z : float
            z step (> 0), in units of 1/beta.
        n_z : int
            Number of z steps (>= 1).
        save_every : int or array_like, optional
            Keep fields and populations at every `save_every`-th z point and
            the last, or at these z positions (each a grid point ``j h_z``).
        full_map : bool, optional
            Keep the fields at every z point (the full z-t map); populations
            still at the `save_every` points.
        populations : bool, optional
            Keep the level populations at the saved points.
        euler_substeps : int, optional
            Euler sub-steps of the start-up step z_0 -> z_1 (section 3).
        progress : bool, optional
            Show a tqdm progress bar over the z steps (needs ``tqdm``).
        callback : callable, optional
            Called after each z step with an object holding ``j``, ``z``,
            ``norm_deviation`` and (fetched when read) ``fields`` and
            ``polarisation``; raising ``StopIteration`` ends the run there (the
            fields and populations of that z are kept).
        output : path-like, optional
            Stream what the run keeps into this HDF5 file (``.h5``/``.hdf5``,
            needs h5py: ``pip install 'nlsepy[hdf5]'``) as it is kept:
            ``fields`` over ``(z, t, mode)``, ``norm_deviation`` (the
            running maximum) over ``z``, ``populations`` over
            ``(z_populations, t, level)``, the coordinates ``t``, ``mode``,
            ``level`` and ``atom`` (with ``detuning`` and ``weight``), every
            parameter of the model and of the run; flushed after each kept
            position, readable after Ctrl-C (the positions kept so far),
            read back by :func:`nlsepy.open_run`.  Distributed: rank 0
            (whose fields are every rank's) writes the file with h5py
            (without MPI).

        Returns
        -------
        MaxwellBlochResult

        Raises
        ------
        nlsepy.BlowUpError
            When a field or the polarisation becomes non-finite; ``step`` is
            the z index that failed, ``t`` its z, ``last_good`` the
            ``(z, fields)`` kept.
        KeyboardInterrupt
            On Ctrl-C, after the z step (or the call of z steps, about half
            a second on CUDA) under way; what the run had reached is kept in
            :attr:`partial_result`.
        MemoryError
            Before anything is allocated, when the solver (its state and
            every thread's buffers, or the device's arrays) and the kept
            output do not fit.

        Notes
        -----
        On the CUDA tensor-core kernel the z steps between two kept
        positions run several in one launch where the device holds them
        (slice j + 1 follows slice j along the time grid); the result is
        that of one z step at a time, bit for bit.  Keeping fewer positions
        (``save_every``, no ``full_map``, no ``callback``) lets it do so.

        Distributed (``comm=``): every rank calls ``run`` with the same
        arguments (checked) and gets the same result; the solver takes one z
        step a call.  An error on one rank (a bad argument, a blow-up in its
        atoms, an exception in its callback) is raised on every rank;
        Ctrl-C or a callback's ``StopIteration`` on any rank stops every rank
        after the same z step.  Only rank 0 shows the progress bar.
        """
        t_start = time.perf_counter()
        self._partial = None
        comm = self._comm

        def check() -> Tuple[float, int, int, "_Saved", np.ndarray]:
            h = _validate.real("h_z", h_z, positive=True)
            n = _validate.count("n_z", n_z, 1)
            subs = _validate.count("euler_substeps", euler_substeps, 1)
            if callback is not None and not callable(callback):
                raise TypeError(f"callback must be callable, got {type(callback).__name__}")
            sv = self._saved(save_every, h, n)
            n_fld = n + 1 if full_map else sv.count()
            n_pop = sv.count() if populations else 0
            host, dev = self._run_bytes(n_fld, n_pop)
            what = (f"MaxwellBloch.run with n_atoms = {self.n_atoms}, n_t = {self.n_t}, "
                    f"N_F = {self.n_modes}, n_g + n_e = {self.n_levels}: fields kept at {n_fld} "
                    f"z positions{' (full_map)' if full_map else ''}, populations at {n_pop}")
            if self.backend == "cuda":
                _require(dev, what, backend="cuda", host_bytes=host)
            else:
                _require(host, what)
            path = None if output is None else _check_output(output)
            return h, n, subs, sv, self.input_fields(fields0), path

        h_z, n_z, euler_substeps, saved, eps0, path = self._agreed(check)
        if comm is not None:  # the loop below must take the same z steps everywhere
            mine = {"h_z": _fingerprint(h_z), "n_z": _fingerprint(n_z),
                    "euler_substeps": _fingerprint(euler_substeps),
                    "save_every": _fingerprint(np.asarray(save_every, dtype=np.float64)),
                    "full_map": _fingerprint(bool(full_map)),
                    "populations": _fingerprint(bool(populations)),
                    "callback (given or not)": _fingerprint(callback is not None),
                    "output (given or not)": _fingerprint(output is not None),
                    "fields0": _fingerprint(eps0)}
            everyone = comm.allgather(mine)
            _dist.agree(comm, lambda: _same_on_every_rank(everyone, "MaxwellBloch.run",
                                                          "the same run arguments"))

        def keep_fld(j: int) -> bool:
            return j <= n_z if full_map else j in saved

        def keep_pop(j: int) -> bool:
            return populations and j in saved

        core, own = self._core, self._local

        def make() -> Any:
            sv = core.Mbloch(self.n_g, self.n_e, self.modes[0], self.modes[1], self._F,
                             self._detunings[own], self._weights[own],
                             self._initial_state[own], eps0, self.h_t, h_z, self.beta,
                             self.kappa_g, self.kappa_e, self.delta, euler_substeps,
                             core.COMPLEX64 if self.dtype == np.complex64 else core.COMPLEX128)
            if self._capsule is not None:
                sv.set_comm(self._capsule)
            return sv

        solver = self._agreed(make)
        zf, fl, zp, pops = [], [], [], []
        kernel = 0.0
        rec: Any = None
        if path is not None:
            run_args = {"h_z": h_z, "n_z": n_z, "save_every": save_every,
                        "full_map": bool(full_map), "populations": bool(populations),
                        "euler_substeps": euler_substeps, "fields0": eps0}
            rec = self._on_root(lambda: self._record_file(path, run_args))

        def record(dim: str, z: float, data: Dict[str, Any]) -> None:
            if rec is not None:  # rank 0 (or the one process) writes
                rec.append(dim, z, data)

        def keep(j: int, fields: Optional[np.ndarray] = None) -> None:
            if keep_fld(j):
                zf.append(j * h_z)
                fl.append(solver.get_fields() if fields is None else fields)
                if path is not None:
                    nd = float(solver.norm_deviation())
                    self._on_root(lambda: record("z", j * h_z, {"fields": fl[-1],
                                                               "norm_deviation": nd}))
            if keep_pop(j):
                zp.append(j * h_z)
                pops.append(solver.get_populations())
                if path is not None:
                    self._on_root(lambda: record("z_populations", j * h_z,
                                                 {"populations": pops[-1]}))

        def solve(j: int, step: bool, n: int = 0) -> None:
            """The atoms at z_j, then (step) the fields to z_{j+1}; n >= 1:
            to z_{j+n} without populations, in launches of the z pipeline
            of the CUDA tensor-core kernels.  Distributed: the same error
            on every rank (the fields are the same everywhere)."""
            nonlocal kernel, per_step
            try:
                if not step:
                    self._agreed(lambda: solver.atoms(keep_pop(j)))
                elif n == 0:
                    self._agreed(lambda: solver.step(keep_pop(j)))
                else:
                    self._agreed(lambda: solver.steps(n))
            except BlowUpError as exc:
                jf = solver.z_index()  # the fields of z_jf are kept
                raise BlowUpError(
                    f"{exc} (MaxwellBloch: at z index {jf}, z = {jf * h_z:g}; reduce "
                    f"h_z = {h_z:g} or h_t = {self.h_t:g}, or check the parameters)",
                    step=jf + 1, t=(jf + 1) * h_z,
                    last_good=(jf * h_z, solver.get_fields())) from None
            kernel += solver.last_seconds()
            # seconds of device time a z step (the Euler start: a substep)
            per_step = solver.last_seconds() / max(n, 1 if j > 0 else euler_substeps)

        def result(interrupted: bool = False) -> MaxwellBlochResult:
            z, f = zf, fl
            j = int(solver.z_index())
            if interrupted and not (zf and zf[-1] == j * h_z):  # end at the z reached
                z, f = zf + [j * h_z], fl + [solver.get_fields()]
            return MaxwellBlochResult(
                z=np.array(z), t=self.t, modes=self.mode_numbers, fields=np.array(f),
                z_populations=np.array(zp), populations=np.array(pops) if populations else None,
                norm_deviation=float(solver.norm_deviation()),
                seconds=time.perf_counter() - t_start, kernel_seconds=kernel, h_z=h_z,
                interrupted=interrupted)

        def call_back(j: int) -> bool:
            """The callback after z step j; True when it ended the run
            (distributed: when it did so on any rank; an error on one rank
            is raised on all)."""
            def one() -> bool:
                try:
                    callback(_RunState(j, j * h_z, solver.norm_deviation(), solver))
                except StopIteration:
                    return True
                except Exception as exc:  # distributed: as an error agree() passes on
                    if comm is None or isinstance(exc, (ValueError, TypeError, RuntimeError,
                                                        MemoryError, OSError)):
                        raise
                    raise RuntimeError(f"the callback raised {type(exc).__name__}: {exc}") \
                        from exc
                return False
            return bool(self._agreed(one))

        def anywhere(*flags: bool) -> Tuple[bool, ...]:
            """The flags or'ed over the ranks (one collective)."""
            if comm is None:
                return tuple(bool(f) for f in flags)
            bits = sum(int(bool(f)) << q for q, f in enumerate(flags))
            from mpi4py import MPI
            bits = comm.allreduce(bits, op=MPI.BOR)
            return tuple(bool(bits >> q & 1) for q in range(len(flags)))

        # z steps one call can take: up to the next z index where something
        # is kept (the Euler start goes alone), and about half a second of
        # device time (at least the solver's z slices; the Hopper kernel pays
        # its start and drain once a call), so that Ctrl-C and the progress
        # bar act every half second or launch; the solver splits a call into
        # launches itself.  Ctrl-C is held while a call runs (deferred_sigint)
        # and acts between calls, the output consistent.  Distributed: one z
        # step a call (the solver reduces over the ranks after each), and
        # Ctrl-C on any rank stops every rank after the same z step.
        per_step = 0.0
        pipe = solver.pipeline() if comm is None else 1

        bar = None
        if progress and (comm is None or comm.Get_rank() == 0):
            from .runner import _progress_bar
            bar = _progress_bar(True, n_z)
        with _guard.deferred_sigint() as flag:
            hit = False
            ok = False
            try:
                j = 0
                while j < n_z and not hit:
                    fields_j = solver.get_fields() if keep_fld(j) else None
                    n = 0
                    if pipe > 1 and not keep_pop(j):
                        n = 1
                        if j > 0 and callback is None:
                            n = max(pipe, int(0.5 / per_step) if per_step > 0 else pipe)
                            n = min(n, saved.next_stop(j, full_map) - j)
                    solve(j, step=True, n=n)
                    keep(j, fields_j)
                    if bar is not None:
                        bar.update(max(n, 1))
                    j += max(n, 1)
                    ended = callback is not None and call_back(j)  # after one z step
                    hit, ended = anywhere(flag.hit, ended)
                    if ended:  # the run ends at z_j, a saved point
                        n_z = j
                        saved.end_at(n_z)
                        break
                if not hit:
                    solve(n_z, step=False)  # populations and the norm monitor at the last z
                    keep(n_z)
                    hit = anywhere(flag.hit)[0]  # Ctrl-C during that solve
                ok = not hit
            finally:
                if bar is not None:
                    bar.close()
                if path is not None:  # marked complete when the run returns
                    try:
                        self._on_root(lambda: rec.close(ok) if rec is not None else None)
                    except Exception:
                        if ok:
                            raise  # else the exception under way says more
            if hit:
                self._partial = result(interrupted=True)
                if not flag.hit:  # Ctrl-C reached another rank only
                    raise KeyboardInterrupt
                flag.raise_now()
        return result()

    def _on_root(self, fn: Callable[[], Any]) -> Any:
        """``fn()`` in one process; distributed, on rank 0 only, its error
        raised on every rank."""
        return fn() if self._comm is None else _dist.agree(self._comm, fn, only=0)

    def _record_file(self, path: str, run_args: Dict[str, Any]) -> Any:
        """The run file of :meth:`run` with its header (see ``output``)."""
        from ._hdf5 import RunFile, RunHeader
        params: Dict[str, Any] = {
            "n_g": self.n_g, "n_e": self.n_e, "modes": self.modes, "F": self._F,
            "h_t": self.h_t, "n_t": self.n_t, "kappa_g": self.kappa_g, "kappa_e": self.kappa_e,
            "delta": self.delta, "beta": self.beta, "dtype": np.dtype(self.dtype).name,
            "n_atoms": self.n_atoms, "initial_state": self._initial_state}
        params.update(run_args)
        levels = [f"ground {m}" for m in range(self.n_g)] + \
            [f"excited {n}" for n in range(self.n_e)]
        coords = {
            "t": (("t",), self.t, "time unit of the equations", "retarded time t_k = k h_t"),
            "mode": (("mode",), self.mode_numbers, "", "mode number l"),
            "level": (("level",), np.arange(self.n_levels), "",
                      "level: " + ", ".join(levels)),
            "atom": (("atom",), np.arange(self.n_atoms), "", "atom D sampling the line"),
            "detuning": (("atom",), self._detunings, "frequency unit (1 / time unit)",
                         "detuning Delta_D"),
            "weight": (("atom",), self._weights, "", "weight w_D")}
        header = RunHeader(
            model="MaxwellBloch", parameters=params, backend=self.backend,
            units=("dimensionless units of the equations (source 004; "
                   "nlsepy.reference.mbloch): fields in Rabi-frequency units, t the "
                   "retarded time, frequencies (kappa, delta, detunings) in 1 / (time unit), "
                   "z in the units of d eps / dz = i P with P = beta sum w F a* b"),
            coords=coords,
            dims={"fields": ("t", "mode"), "norm_deviation": (),
                  "populations": ("t", "level")},
            var_units={"z": "length unit of the equations", "z_populations":
                       "length unit of the equations", "fields": "Rabi frequency",
                       "norm_deviation": "", "populations": ""},
            long_names={"z": "position of the kept fields",
                        "z_populations": "position of the kept populations",
                        "fields": "eps_l(z, t)",
                        "norm_deviation": "max ||psi|^2 - 1| over the atoms so far",
                        "populations": "sum_D w_D |psi^D_i(z, t)|^2"})
        return RunFile(path, header, time="retarded (frames along z)")

    def __repr__(self) -> str:
        return (f"MaxwellBloch(n_g={self.n_g}, n_e={self.n_e}, modes={self.modes}, "
                f"n_atoms={self.n_atoms}, n_t={self.n_t}, h_t={self.h_t:g}, "
                f"dtype={np.dtype(self.dtype).name}, backend={self.backend!r})")
