"""Maxwell-Bloch propagation through multi-level atoms (``nl.MaxwellBloch``).

The model and scheme of Demeter, "Solving the Maxwell-Bloch equations for
resonant nonlinear optics using GPUs" (source 004): field modes
:math:`\\varepsilon_l(z, t)`, ``l = l_min .. l_max``, in retarded time,
propagate by eq. 2 through an inhomogeneously broadened ensemble of atoms
with ``n_g`` ground and ``n_e`` excited levels obeying the optical Bloch
equations (eq. 4) with the polarisation of eq. 6.  Units and equations are
those of :mod:`nlsepy.reference.mbloch` (docs/physics.md section 5): fields in
Rabi-frequency units, :math:`\\partial_z\\varepsilon_l = iP_l`,
:math:`P_l = \\beta\\sum_{D,m} w_D F_{m,m+l} a^{D*}_m b^D_{m+l}`.

The scheme is algorithm 1: at each :math:`z_j` every atom marches the time
grid by the RK4 of algorithm 2 from the initial state, the polarisation is
reduced over the atoms and the fields advance by Adams-Bashforth 2 in z,
started by ``euler_substeps`` Euler steps.  The atom march runs in C
(OpenMP over blocks of atoms, :file:`csrc/mbloch/mbloch.c`) or on the GPU; this
module holds the model, :mod:`.checks` validates the input, :mod:`.memory`
counts what the model and a run take, :mod:`.propagate` loops over the z
steps and collects the output (:mod:`.result`).

With ``comm=`` (an mpi4py communicator) the atoms are split over the ranks
in contiguous blocks; the solver of each rank adds the ranks' polarisations
(and populations) in rank order once per atom solve, so the fields and
every output are the same on every rank (:mod:`.dist`).

With ``decay``, ``dephasing`` or ``doppler`` the atoms are density matrices
(the Lindblad master equation of :mod:`.lindblad`), stepped by the same scheme
on every backend.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from ..common import backend as _backend
from ..common import checks as _validate
from ..common import dist as _dist
from ..common.params import Param, Replaceable, Sealed
from ..common.results import Results
from ..reference.mbloch import (absorption_coefficient, area_theorem, franck_condon,
                               gaussian_line, gaussian_pulse, lorentzian_line, sech_pulse)
from . import checks as _checks
from . import dist as _mbdist
from . import memory as _memory
from . import lindblad as _lindblad
from . import propagate as _propagate
from .checks import LINES
from .result import MaxwellBlochResult

__all__ = ["MaxwellBloch", "MaxwellBlochResult", "LINES", "franck_condon", "sech_pulse",
           "gaussian_pulse", "gaussian_line", "lorentzian_line", "absorption_coefficient",
           "area_theorem"]


class MaxwellBloch(Results, Sealed, Replaceable):
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
    decay : list of tuple, optional
        Spontaneous decay channels ``(Gamma, from, to[, branching])``: the
        population of level ``from`` goes to ``to`` at rate Gamma x
        branching (levels numbered ground 0..n_g-1, then excited n_g..).
        Any of `decay`, `dephasing`, `doppler` makes the atoms density
        matrices (Lindblad form, :mod:`nlsepy.mbloch.lindblad`,
        docs/models/mbloch.md); without them the amplitudes of eq. 4 are
        solved as they always were.
    dephasing : array_like, optional
        Pure dephasing: per level ``(n_g + n_e,)`` (coherence i, j decays at
        gamma_i + gamma_j) or per coherence ``(n_g + n_e, n_g + n_e)``.
    doppler : nlsepy.mbloch.Doppler or dict, optional
        Velocity classes and the Doppler factor of each mode; every atom of
        `line` gets every class.

    Notes
    -----
    The parameters are fixed when the model is made (read-only: assigning
    raises ``AttributeError``).  :meth:`replace` makes a new model with some
    of them changed and the others this one's: the line as ``(detunings,
    weights)``, the communicator kept; the initial state is kept while the
    atoms and levels stay, else it defaults to ground level 0 unless every
    atom had the same; new ``n_g`` or ``n_e`` need a new ``F`` (unless both
    are 1).

    Examples
    --------
    >>> import numpy as np, nlsepy as nl
    >>> mb = nl.MaxwellBloch(h_t=0.05, n_t=401, line=("gaussian", 1.0), n_atoms=64)
    >>> e0 = nl.mbloch.sech_pulse(mb.t, 1.0, 8.0, area=2 * np.pi)
    >>> out = mb.run(e0, h_z=0.1, n_z=10)
    >>> out.fields.shape, bool(abs(out.areas()[-1, 0].real - 2 * np.pi) < 0.1)
    ((11, 401, 1), True)
    """

    _MODEL = "MaxwellBloch"
    #: what makes the result that plot() and save() use
    _RESULT_CALL = "run()"
    _RESULT_TYPE = MaxwellBlochResult
    _ARG_TYPES = {"Doppler": _lindblad.Doppler}
    _SEALED_ADVICE = "mb.replace(...) makes a new model"
    _VAR = "mb"
    _FIXED_WHY = "runs use the value given at construction"
    #: what the refusal of a parameter advises where ``mb.replace(name=...)`` does not fit
    _HINTS = {"detunings": "mb.replace(line=(detunings, weights))",
              "weights": "mb.replace(line=(detunings, weights))"}

    # the parameter table: every run uses the values given at construction
    n_g = Param("Ground levels.")
    n_e = Param("Excited levels.")
    modes = Param("``(l_min, l_max)``, the mode set.")
    F = Param("The coupling matrix ``(n_g, n_e)`` (a copy).", copy=True)
    h_t = Param("The time step.")
    n_t = Param("Points of the time grid.")
    kappa_g = Param("Ground level spacing.")
    kappa_e = Param("Excited level spacing.")
    delta = Param("Mode spacing.")
    beta = Param("Coupling constant of eq. 2.")
    detunings = Param("The atoms' detunings ``(N_Delta,)`` (a copy).", copy=True)
    weights = Param("The atoms' weights ``(N_Delta,)`` (a copy).", copy=True)
    initial_state = Param("Every atom's initial state ``(N_Delta, n_g + n_e)`` (a copy).",
                          copy=True)
    dtype = Param("Precision of the atoms (numpy.complex128 or numpy.complex64).")
    backend = Param('Where the atoms are solved ("cpu" or "cuda").')
    dephasing = Param("The dephasing of each coherence ``(n, n)`` (read-only), or None.")
    doppler = Param("The Doppler broadening (nl.mbloch.Doppler), or None.")

    def __init__(self, n_g: int = 1, n_e: int = 1, modes: Tuple[int, int] = (0, 0),
                 F: Optional[Any] = None, *, h_t: float, n_t: int, kappa_g: float = 0.0,
                 kappa_e: float = 0.0, delta: float = 0.0,
                 line: Tuple[Any, ...] = ("gaussian", 1.0), n_atoms: int = 128,
                 beta: float = 1.0, initial_state: Optional[Any] = None,
                 dtype: Any = np.complex128, backend: str = "auto", comm: Any = None,
                 decay: Any = None, dephasing: Any = None, doppler: Any = None) -> None:
        self._partial: Optional[MaxwellBlochResult] = None
        self._comm: Any = None
        self._capsule: Any = None
        args = (n_g, n_e, modes, F, h_t, n_t, kappa_g, kappa_e, delta, line, n_atoms, beta,
                initial_state, dtype, backend, decay, dephasing, doppler)
        if comm is None:
            self._setup(*args)
            self._local = slice(0, self.n_atoms)
            return
        comm = _dist.as_comm(comm)
        _dist.agree(comm, lambda: self._setup(*args))
        self._distribute(comm)

    def _setup(self, n_g: Any, n_e: Any, modes: Any, F: Any, h_t: Any, n_t: Any, kappa_g: Any,
               kappa_e: Any, delta: Any, line: Any, n_atoms: Any, beta: Any,
               initial_state: Any, dtype: Any, backend: Any, decay: Any = None,
               dephasing: Any = None, doppler: Any = None) -> None:
        """Check and keep the constructor's arguments."""
        self._n_g = _validate.count("n_g", n_g, 1)
        self._n_e = _validate.count("n_e", n_e, 1)
        self._modes = _checks.check_modes(modes, self.n_g, self.n_e)
        if F is None:
            if (self.n_g, self.n_e) != (1, 1):
                raise ValueError(f"F is required for n_g={self.n_g}, n_e={self.n_e} "
                                 f"(e.g. nl.mbloch.franck_condon(n_g, n_e, displacement))")
            F = [[1.0]]
        self._F = _checks.owned(_checks.real_array("F", F, (self.n_g, self.n_e)))
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
        self._decay_in = decay
        self._decay = _lindblad.check_decay(decay, self.n_levels)
        deph = _lindblad.check_dephasing(dephasing, self.n_levels)
        self._dephasing = None if deph is None else _checks.owned(deph)
        self._doppler = _lindblad.as_doppler(doppler)
        classes = 1 if self._doppler is None else self._doppler.n_classes
        _memory.require_model(self, line, n_atoms, initial_state, classes)
        det, w = _checks.sample_line(line, n_atoms)
        self._line = (_checks.owned(det), _checks.owned(w))
        self._shifts = None
        if self._doppler is not None:
            det, w, shifts = _lindblad.expand_atoms(det, w, self._doppler, self.modes, self._F)
            self._shifts = _checks.owned(shifts)
        self._detunings, self._weights = _checks.owned(det), _checks.owned(w)
        self._initial_state = _checks.owned(
            _checks.check_initial_state(initial_state, self.n_levels, self.n_atoms))

    def _distribute(self, comm: Any) -> None:
        """Split the atoms over the ranks of `comm` (every rank calls this)."""
        self._counts, self._starts, self._local = _mbdist.split_atoms(comm, self)
        self._capsule = _dist.capsule(comm)
        self._comm = comm
        if self.backend == "cuda":  # one GPU per rank of a node
            _dist.select_gpu(comm)

    def _agree(self, fn: Callable[[], Any]) -> Any:
        """``fn()``, and in a distributed run the same error on every rank
        when it fails on one (:func:`nlsepy.common.dist.agree`)."""
        return fn() if self._comm is None else _dist.agree(self._comm, fn)

    # ------------------------------------------------------------ replace
    def _replace_args(self) -> Dict[str, Any]:
        """The constructor's arguments that make this model again (the line
        as its atoms' detunings and weights, the communicator kept)."""
        return dict(n_g=self.n_g, n_e=self.n_e, modes=self.modes, F=self._F, h_t=self.h_t,
                    n_t=self.n_t, kappa_g=self.kappa_g, kappa_e=self.kappa_e,
                    delta=self.delta, line=self._line, n_atoms=self._line[0].size,
                    beta=self.beta, initial_state=_checks.one_or_all(self._initial_state), dtype=self.dtype,
                    backend=self.backend, comm=self._comm, decay=self._decay_in,
                    dephasing=self._dephasing, doppler=self._doppler)

    def _replace_changes(self, kw: Dict[str, Any], changes: Dict[str, Any]) -> Dict[str, Any]:
        """`changes`, and what they imply: new atoms or levels drop the
        initial state (kept when every atom had the same and the levels
        stay), new levels drop F."""
        out = dict(changes)
        if "initial_state" not in changes and ({"line", "n_atoms", "n_g", "n_e", "doppler"} &
                                               set(changes)):
            psi = self._initial_state
            same = bool(np.all(psi == psi[:1]))
            keep_levels = changes.get("n_g", self.n_g) + changes.get("n_e", self.n_e) == \
                self.n_levels
            out["initial_state"] = psi[0] if same and keep_levels else None
        if ("n_g" in changes or "n_e" in changes) and "F" not in changes:
            out["F"] = None
        return out

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

    # ------------------------------------------------------------ properties
    @property
    def n_levels(self) -> int:
        """n_g + n_e."""
        return self.n_g + self.n_e

    @property
    def is_open(self) -> bool:
        """Whether the atoms are density matrices (decay, dephasing or doppler given)."""
        return not (self._decay_in is None and self._dephasing is None and self._doppler is None)

    @property
    def level_shifts(self) -> Optional[np.ndarray]:
        """Each atom's Doppler level shifts ``(N_Delta, n_g + n_e)`` (a copy), or None."""
        return None if self._shifts is None else self._shifts.copy()

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

        Returns
        -------
        numpy.ndarray
            complex128 of shape ``(n_t, N_F)``.
        """
        return _checks.input_fields(fields0, self.modes, self.n_t)

    # ------------------------------------------------------------ running
    def run(self, fields0: Any, h_z: float, n_z: int, save_every: Any = 1,
            full_map: bool = False, populations: bool = True, euler_substeps: int = 8,
            progress: bool = False,
            callback: Optional[Callable[[Any], Any]] = None,
            output: Any = None, density: bool = False) -> MaxwellBlochResult:
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
        density : bool, optional
            Open models: keep the ensemble density matrix (populations and
            coherences) where the populations are kept (``result.density``;
            not streamed to `output`).

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
        h_z, n_z, euler_substeps, saved, eps0, path = self._agree(lambda: _propagate.check_run(
            self, fields0, h_z, n_z, save_every, full_map, populations, euler_substeps,
            callback, output))
        if self._comm is not None:  # the z loop must take the same z steps everywhere
            _mbdist.same_run(self._comm, {
                "h_z": h_z, "n_z": n_z, "euler_substeps": euler_substeps,
                "save_every": np.asarray(save_every, dtype=np.float64),
                "full_map": bool(full_map), "populations": bool(populations),
                "callback (given or not)": callback is not None,
                "output (given or not)": output is not None, "fields0": eps0})
        solver = self._agree(lambda: _propagate.make_solver(self, eps0, h_z, euler_substeps))
        march = _propagate.ZMarch(self, solver, h_z, n_z, saved, full_map, populations,
                                  euler_substeps, callback, path, t_start,
                                  density=density and self.is_open)
        if path is not None:
            march.open_record({"h_z": h_z, "n_z": n_z, "save_every": save_every,
                               "full_map": bool(full_map), "populations": bool(populations),
                               "euler_substeps": euler_substeps, "fields0": eps0})
        try:
            return self._keep(march.march(progress))
        finally:
            self._partial = march.partial  # set when Ctrl-C stopped the run

    def __repr__(self) -> str:
        return (f"MaxwellBloch(n_g={self.n_g}, n_e={self.n_e}, modes={self.modes}, "
                f"n_atoms={self.n_atoms}, n_t={self.n_t}, h_t={self.h_t:g}, "
                f"dtype={np.dtype(self.dtype).name}, backend={self.backend!r})")
