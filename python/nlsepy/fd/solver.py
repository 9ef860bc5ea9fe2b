"""The NLSE by explicit RK4 and finite differences (``nl.NLSE``).

Solves ``i dPsi/dt + a Lap(Psi) - V Psi + s |Psi|^2 Psi = 0`` in 1, 2 or 3
dimensions with classic RK4 in time and the second-order central difference
(CD) or two-step fourth-order compact (2SHOC) Laplacian (Caplan, NLSEmagic,
sections 3.1-3.4).
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from ..common import backend as _backend
from ..common import dist as _dist
from ..common import files as _files
from ..common import guard as _guard
from ..common import runner
from ..common.checks import complex_dtype as _complex_dtype
from ..common.checks import potential as _potential
from ..common.checks import real as _check_real
from ..common.hdf5 import RunHeader
from ..common.params import Param
from ..common.stepper import CLOCK_KEYS, TimeStepper
from . import plot as _plot
from .dist import SlabFD, grid_arrays, halo_rows, local_rows, same_everywhere

__all__ = ["NLSE", "stability_bound"]

_SCHEMES = {"cd": 0, "2shoc": 1}
_BCS = {"dirichlet": 0, "msd": 1, "l0": 2, "periodic": 3, "one-sided": 4}
_BC_ALIASES = {"one_sided": "one-sided", "1s": "one-sided", "d": "dirichlet"}

#: fraction of the linear stability bound used when dt is not given
DT_SAFETY = 0.8

#: pinned host blocks the CUDA backend stages frames through (2 x 32 MiB)
_CUDA_STAGING_BYTES = 2 * (32 << 20)


def _refuse(name: str, value: Any) -> str:
    """How to change a fixed NLSE parameter (the message of its AttributeError)."""
    keys = ("a", "s", "scheme", "bc", "backend") + (("dtype",) if name == "dtype" else ())
    args = ["sim.psi", "<new spacing>" if name == "spacing" else "sim.spacing"]
    args += [f"{k}=<new>" if k == name else f"{k}=sim.{k}" for k in keys]
    call = f"nl.NLSE({', '.join(args + ['V=sim.V'])})"
    if name == "max_dt":
        how = f"it follows from a, spacing and scheme; make a new solver with others: {call}"
    else:
        how = f"make a new solver from the current state: {call}"
    return (f"NLSE.{name} cannot be changed: the solver's kernels, work arrays and stability "
            f"bound were set up with it; {how}")


def _core():
    return _backend.core()


#: the step's kernel by the `fused` argument, and back by the handle's code
_KERNELS = {False: 0, True: 1, "auto": 2}
_KERNEL_NAMES = {-1: None, 0: "staged", 1: "fused"}


def _kernel_code(fused: Any) -> int:
    """The handle's kernel code of NLSE's `fused` argument."""
    if isinstance(fused, str):
        fused = fused.lower()
    if not (isinstance(fused, (bool, str)) and fused in _KERNELS):
        raise ValueError(f"fused must be True, False or 'auto', got {fused!r}")
    return _KERNELS[fused]


def _spacing(spacing: Union[float, Sequence[float]], ndim: int) -> Tuple[float, ...]:
    if np.ndim(spacing) == 0:
        h = (spacing,) * ndim
    else:
        h = tuple(np.asarray(spacing).ravel().tolist())
        if len(h) != ndim:
            raise ValueError(f"spacing must be a number or {ndim} numbers (one per axis), "
                             f"got {len(h)}: {spacing!r}")
    return tuple(_check_real(f"spacing[{q}]" if ndim > 1 else "spacing", v, positive=True)
                 for q, v in enumerate(h))


def _name(kind: str, value: Any, table: dict, aliases: dict = {}) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{kind} must be a string, one of {sorted(table)}, got {value!r}")
    key = aliases.get(value.lower(), value.lower())
    if key not in table:
        raise ValueError(f"unknown {kind} {value!r}; choose one of {sorted(table)}")
    return key


def stability_bound(spacing: Union[float, Sequence[float]], ndim: int, a: float = 1.0,
                    scheme: str = "2shoc") -> float:
    """Linear stability bound of RK4 + CD or 2SHOC (NLSEmagic eqs. 18-19).

    ``k < h^2 / (d sqrt(2) a)`` for CD and 3/4 of that for 2SHOC, with ``h``
    the smallest spacing and ``d`` the number of dimensions.

    Parameters
    ----------
    spacing : float or sequence of float
        Grid spacing, one value or one per axis.
    ndim : int
        Number of dimensions (1, 2 or 3).
    a : float, optional
        Dispersion coefficient.
    scheme : {"cd", "2shoc"}, optional
        Spatial scheme.

    Returns
    -------
    float
        The largest linearly stable time step.

    Examples
    --------
    >>> round(stability_bound(0.1, 1, 1.0, "cd"), 7)
    0.0070711
    """
    if ndim not in (1, 2, 3):
        raise ValueError(f"ndim must be 1, 2 or 3, got {ndim!r}")
    h = _spacing(spacing, ndim)
    a = _check_real("a", a, positive=True)
    return _core().fd_max_dt(ndim, a, h, _SCHEMES[_name("scheme", scheme, _SCHEMES)])

class NLSE(TimeStepper):
    """Nonlinear Schrödinger equation by RK4 and finite differences.

    Solves ``i dPsi/dt + a Lap(Psi) - V Psi + s |Psi|^2 Psi = 0`` on a
    uniform grid in 1, 2 or 3 dimensions (arrays of shape ``(nx,)``,
    ``(nx, ny)`` or ``(nx, ny, nz)``, the last axis contiguous).

    Parameters
    ----------
    psi0 : array_like
        Initial state, real or complex, 1-3 dimensional.
    spacing : float or sequence of float
        Grid spacing ``h``, one value or one per axis.
    a : float, optional
        Dispersion coefficient (> 0).
    s : float, optional
        Nonlinearity: ``s < 0`` defocusing (dark solitons), ``s > 0`` focusing.
    V : array_like or None, optional
        Static real potential with the shape of `psi0`.
    scheme : {"cd", "2shoc"}, optional
        Laplacian: second-order central differences or the fourth-order
        two-step compact scheme.
    bc : {"dirichlet", "msd", "l0", "periodic", "one-sided"}, optional
        Boundary condition on every face: fixed value (eq. 11), fixed modulus
        squared (eq. 14), zero Laplacian (eq. 16), periodic, or one-sided
        differences (1D only).  For non-periodic conditions the first and last
        point of every axis are boundary points.
    dt : float, optional
        Time step.  Default: 0.8 of the linear stability bound
        (:func:`stability_bound`).  A larger value raises unless `force`.
    dtype : {numpy.complex64, numpy.complex128}, optional
        Precision of state and arithmetic.  Default: complex64 for float32 or
        complex64 input, complex128 otherwise.
    force : bool, optional
        Accept a `dt` above the linear stability bound.
    backend : {"auto", "cpu", "cuda"}, optional
        Where the state lives and the kernels run.
    fused : {"auto", True, False}, optional
        ``False``: four passes a step, one per RK4 stage (the reference);
        ``True``: one pass, each tile taking all four stages (on CUDA, 3D
        2SHOC: two passes of two stages; staged where CUDA has no fused
        kernel: closed 3D grids);
        ``"auto"``: the faster form (see ``docs/models/fd.md``).  The same
        state either way (bit for bit on the CPU, to rounding on CUDA);
        :attr:`last_kernel` says which ran.
    comm : mpi4py communicator, optional
        Distribute the grid over the ranks of `comm` (run the script under
        ``mpirun``): each rank holds a slab of rows of axis 0 (the slowest),
        `psi0` and `V` being the global arrays on every rank or each rank's
        :class:`nlsepy.Slab` from :func:`nlsepy.scatter`.  :attr:`psi` is then
        the local slab (:attr:`local_slice`), :meth:`gather` assembles the
        global state, observables are global, and every method is
        collective (every rank calls it).  Needs mpi4py and nlsepy's MPI
        layer (see the README).

    Attributes
    ----------
    a, s, spacing, scheme, bc, dtype, backend, max_dt
        Fixed when the solver is made (assigning raises ``AttributeError``).
    V : numpy.ndarray or None
        A copy of the potential; assigning checks the new one, copies it and
        applies it from the next step.
    dt : float
        Time step; assigning checks it against :attr:`max_dt`.
    t : float
        Current time; always that of the state (also after Ctrl-C).

    Notes
    -----
    :meth:`step` and :meth:`run` work in calls of about 0.1 s: Ctrl-C raises
    ``KeyboardInterrupt`` within about that time, with :attr:`t`, the step
    counter and :attr:`psi` consistent, and the solver can go on (continuing
    gives, bit for bit, what an uninterrupted call gives).  The memory the
    solver takes is checked before it is allocated (``MemoryError``).

    Examples
    --------
    >>> import nlsepy as nl
    >>> psi0, h, p = nl.examples.dark_soliton(length=20.0, h=0.05)
    >>> sim = nl.NLSE(psi0, h, a=p["a"], s=p["s"], scheme="2shoc", bc="msd")
    >>> frames = sim.run(1.0, frames=4)
    >>> len(frames)
    5
    """

    _MODEL = "NLSE"
    _PARAM_STORE = "_fixed"
    _TIMINGS = ("step", "wait", "exchange")
    _REPR = (("shape", ""), ("scheme", "r"), ("bc", "r"), ("a", "g"), ("s", "g"), ("dt", "g"),
             ("t", "g"), ("dtype", ""), ("backend", "r"))

    # the parameter table: each sets up the kernels, work arrays and stability bound
    a = Param("Dispersion coefficient (read-only).")
    s = Param("Nonlinearity coefficient (read-only).")
    spacing = Param("Grid spacing per axis (read-only).")
    scheme = Param("Spatial scheme, 'cd' or '2shoc' (read-only).")
    bc = Param("Boundary condition (read-only).")
    dtype = Param("Complex dtype of the state (read-only).")
    backend = Param("Backend, 'cpu' or 'cuda' (read-only).")
    max_dt = Param("Linear stability bound of the time step (read-only).")

    def _refuse(self, name: str, value: Any) -> str:
        return _refuse(name, value)

    def __init__(self, psi0: Any, spacing: Union[float, Sequence[float]], a: float = 1.0,
                 s: float = -1.0, V: Optional[Any] = None, scheme: str = "2shoc",
                 bc: str = "msd", dt: Optional[float] = None, dtype: Any = None,
                 force: bool = False, backend: str = "auto", comm: Any = None,
                 fused: Union[bool, str] = "auto") -> None:
        self._comm = None if comm is None else _dist.as_comm(comm)
        self._kernel = _kernel_code(fused)
        if self._comm is None:
            self._setup(psi0, spacing, a, s, V, scheme, bc, dt, dtype, force, backend)
            self._solver.set_kernel(self._kernel)
            return
        # every rank checks its part; one rank's bad input is every rank's
        # error (the collective calls come before and after, never inside)
        capsule = _dist.capsule(self._comm)
        local = _dist.agree(self._comm, lambda: self._setup(
            psi0, spacing, a, s, V, scheme, bc, dt, dtype, force, backend))
        same_everywhere(self._comm, {
            "the grid's shape": self._shape, "spacing": self.spacing, "a": self.a, "s": self.s,
            "scheme": self.scheme, "bc": self.bc, "dt": self._dt, "dtype": str(self.dtype),
            "backend": self.backend, "force": self._force, "V given": local[1] is not None})
        if self.backend == "cuda":
            self._device = _dist.select_gpu(self._comm)
        _dist.agree(self._comm, lambda: self._solver.create(capsule))
        self._solver.set_kernel(self._kernel)
        self._solver.start(*local)  # the halos of psi and V
        if local[1] is not None:
            local[1].flags.writeable = False
        self._V = local[1]

    def _setup(self, psi0: Any, spacing: Any, a: Any, s: Any, V: Any, scheme: Any, bc: Any,
               dt: Any, dtype: Any, force: Any, backend: Any) -> Any:
        slab = psi0 if isinstance(psi0, _dist.Slab) else None
        if slab is not None and self._comm is None:
            raise ValueError("psi0 is an nl.Slab (one rank's part of a distributed array): "
                             "pass comm= as well")
        arr = np.asarray(slab.data if slab is not None else psi0)
        if arr.dtype.kind not in "fc" or arr.dtype.itemsize > 16:
            raise TypeError(f"psi0 must be a float or complex array (float32/64, "
                            f"complex64/128), got dtype {arr.dtype}")
        if arr.ndim not in (1, 2, 3):
            raise ValueError(f"psi0 must be 1-, 2- or 3-dimensional, got ndim={arr.ndim} "
                             f"(shape {arr.shape})")
        if dtype is None:
            dtype = np.complex64 if arr.dtype in (np.float32, np.complex64) else np.complex128
        dtype = _complex_dtype(dtype)
        fixed: Dict[str, Any] = {}
        self._fixed = fixed
        fixed["scheme"] = _name("scheme", scheme, _SCHEMES)
        fixed["bc"] = _name("bc", bc, _BCS, _BC_ALIASES)
        if self.bc == "one-sided" and arr.ndim != 1:
            raise ValueError(f"bc='one-sided' is only available in 1D, psi0 has ndim={arr.ndim}")
        fixed["a"] = _check_real("a", a, positive=True)
        fixed["s"] = _check_real("s", s)
        fixed["spacing"] = _spacing(spacing, arr.ndim)
        fixed["dtype"] = dtype
        self._shape = tuple(int(n) for n in (slab.shape if slab is not None else arr.shape))
        core = _core()
        nmin = core.fd_min_points(_SCHEMES[self.scheme], _BCS[self.bc])
        for q, n in enumerate(self._shape):
            if n < nmin:
                raise ValueError(f"grid too small for the stencil: psi0 has {n} points on axis "
                                 f"{q}, scheme={self.scheme!r} with bc={self.bc!r} needs at "
                                 f"least {nmin}")
        fixed["backend"] = _backend.resolve(backend, "NLSE")
        fixed["max_dt"] = stability_bound(self.spacing, arr.ndim, self.a, self.scheme)
        self._dt = self._check_dt(DT_SAFETY * self.max_dt if dt is None else dt, force)
        self._force = bool(force)
        self._start_clock(self._dt)
        self._slots_ready = False      # CUDA frame slots allocated
        self._fetcher = None           # worker bringing GPU frames to the host
        self._pending = [None, None]   # frames in flight, per device slot
        self._slot = 0
        self._V: Optional[np.ndarray] = None
        code = core.COMPLEX64 if dtype == np.complex64 else core.COMPLEX128
        if self._comm is not None:
            return self._setup_slab(arr, slab, V, code)
        if not np.all(np.isfinite(arr)):
            raise ValueError("psi0 contains non-finite values (NaN or Inf)")
        self._require_memory(V is not None)
        self._solver = _backend.module(self.backend).FD(
            self._shape, self.spacing, self.a, self.s, self._dt, _SCHEMES[self.scheme],
            _BCS[self.bc], code)
        self._solver.set_state(np.ascontiguousarray(arr, dtype=dtype))
        self.V = V
        return None

    def _setup_slab(self, arr: np.ndarray, slab: Optional[_dist.Slab], V: Any,
                    code: int) -> Tuple[np.ndarray, Optional[np.ndarray]]:
        """This rank's part of a distributed solver (no collective calls):
        the slab handle with its halos, the local state and potential."""
        layout = _dist.Layout.of(self._comm, self._shape)
        local = local_rows(arr, slab, layout, "psi0")
        if not np.all(np.isfinite(local)):
            raise ValueError(f"psi0 contains non-finite values (NaN or Inf) in rows "
                             f"{layout.start} .. {layout.start + layout.count - 1}")
        v_local = None
        if V is not None:
            v_slab = V if isinstance(V, _dist.Slab) else None
            v_arr = np.asarray(v_slab.data if v_slab is not None else V)
            if v_slab is not None and v_slab.shape != self._shape:
                raise ValueError(f"V must have the grid's shape {self._shape}, got a slab of "
                                 f"{v_slab.shape}")
            if v_slab is None and v_arr.shape != self._shape:
                raise ValueError(f"V must have the grid's shape {self._shape}, got {v_arr.shape}")
            v_local = _potential(local_rows(v_arr, v_slab, layout, "V"), layout.local_shape,
                                 self.dtype).copy()
        depth = halo_rows(self.scheme)
        if layout.size > 1:
            layout.require_rows(depth, f"the {self.scheme.upper()} stencil over one RK4 step "
                                       f"(a halo of {depth} rows)")
        self._solver = SlabFD(_backend.module(self.backend), layout, depth, self.bc == "periodic",
                               (self.spacing, self.a, self.s, self._dt, _SCHEMES[self.scheme],
                                _BCS[self.bc], code), self)
        return np.ascontiguousarray(local, dtype=self.dtype), v_local

    # ------------------------------------------------------------------ state
    @property
    def shape(self) -> Tuple[int, ...]:
        """Grid shape."""
        return self._shape

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.spacing)

    @property
    def last_kernel(self) -> Optional[str]:
        """Kernel of the last step taken: ``"fused"``, ``"staged"`` or None."""
        return _KERNEL_NAMES[self._solver.last_kernel()]

    def _state_bytes(self) -> int:
        return int(math.prod(self._shape)) * self.dtype.itemsize

    def _what(self) -> str:
        return (f"NLSE on a grid of shape {self._shape} ({self.dtype.name}, "
                f"scheme={self.scheme!r}, backend={self.backend!r})")

    def _require_memory(self, with_V: bool) -> None:
        """Check that the solver's arrays fit before any is allocated: the
        RK4 work arrays, the potential (the solver's copy and ours) and one
        state-sized staging copy on the host."""
        state = self._state_bytes()
        v = state // 2 if with_V else 0
        arrays = grid_arrays(self.scheme, self.backend, self.bc == "periodic")
        what = f"{self._what()}, {arrays} state arrays{' and V' if with_V else ''},"
        if self.backend == "cuda":
            _guard.require_memory(arrays * state + v, what, backend="cuda",
                                  host_bytes=state + v)
        else:
            _guard.require_memory(arrays * state + 2 * v + state, what)

    def _set_state(self, value: Any) -> None:
        if self._comm is not None:  # collective: every rank assigns
            local = _dist.agree(self._comm, lambda: self._local_state(value))
            self._solver.set_state(local)
            return
        arr = np.asarray(value)
        if arr.dtype.kind not in "fc":
            raise TypeError(f"psi must be a float or complex array, got dtype {arr.dtype}")
        if arr.shape != self._shape:
            raise ValueError(f"psi must have shape {self._shape}, got {arr.shape}")
        self._solver.set_state(np.ascontiguousarray(arr, dtype=self.dtype))

    def _local_state(self, value: Any) -> np.ndarray:
        """This rank's rows of a new state: the global array, this rank's
        slab (``local_shape``) or its nl.Slab."""
        lay = self._solver.layout
        slab = value if isinstance(value, _dist.Slab) else None
        arr = np.asarray(slab.data if slab is not None else value)
        if arr.dtype.kind not in "fc":
            raise TypeError(f"psi must be a float or complex array, got dtype {arr.dtype}")
        if slab is None and arr.shape == lay.local_shape and arr.shape != lay.shape:
            local = arr
        else:
            local = local_rows(arr, slab, lay, "psi")
        if not np.all(np.isfinite(local)):
            raise ValueError("psi contains non-finite values (NaN or Inf)")
        return np.ascontiguousarray(local, dtype=self.dtype)

    def _set_potential(self, value: Any) -> None:
        if self._comm is not None:  # collective: every rank assigns the global V
            def local() -> Optional[np.ndarray]:
                if value is None:
                    return None
                v_slab = value if isinstance(value, _dist.Slab) else None
                arr = np.asarray(v_slab.data if v_slab is not None else value)
                rows = local_rows(arr, v_slab, self._solver.layout, "V")
                return _potential(rows, self._solver.layout.local_shape, self.dtype).copy()
            v = _dist.agree(self._comm, local)
            self._solver.set_potential(v)
            if v is not None:
                v.flags.writeable = False
            self._V = v
            return
        if value is None:
            self._solver.set_potential(None)
            self._V = None
            return
        arr = _potential(value, self._shape, self.dtype)
        if arr is value or arr.base is not None:  # the caller's memory: own a copy
            arr = arr.copy()
        arr.flags.writeable = False
        self._solver.set_potential(arr)
        self._V = arr

    def _bound_text(self) -> str:
        return (f"the linear stability bound {self.max_dt:g} of RK4+{self.scheme.upper()} "
                f"(NLSEmagic eqs. 18-19)")

    # --------------------------------------------------------------- stepping
    def _frame_grid(self, whole: bool = False) -> runner.FrameGrid:
        """Coordinates of the frames: centred on the box as
        :func:`nlsepy.examples.grid` lays them out (this rank's rows when
        distributed, unless `whole`)."""
        shift = [n / 2 if self.bc == "periodic" else (n - 1) / 2 for n in self._shape]
        coords = tuple((np.arange(n) - c) * h for n, c, h in zip(self._shape, shift, self.spacing))
        if not whole:
            coords = tuple(x[s] for x, s in zip(coords, self.local_slice))
        return runner.FrameGrid(axes=("x", "y", "z")[:self.ndim], coords=coords,
                                length="dimensionless", time="dimensionless", model="NLSE",
                                periodic=(self.bc == "periodic",) * self.ndim)

    def plot(self, **kwargs: Any) -> Any:
        """Draw the current state (needs matplotlib: ``pip install 'nlsepy[plot]'``):
        :func:`nlsepy.plot.nlse`.

        Parameters
        ----------
        **kwargs
            ``view``, ``fig``, ``ax``, ``path``, ``dpi``, ``title``,
            ``vortices`` (mark the vortices): see
            :func:`nlsepy.plot.frames`.

        Returns
        -------
        matplotlib.figure.Figure
        """
        return _plot.nlse(self, **kwargs)

    def _snapshot(self) -> Any:
        if self.backend != "cuda" or self._comm is not None:
            return self.psi
        # GPU: copy the state into one of two device slots in stream order and
        # bring it to the host on a worker thread while the next chunk runs
        if self._fetcher is None:
            self._fetcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nlsepy-frames")
        slot = self._slot
        if self._pending[slot] is not None:
            self._pending[slot].result()  # the slot's previous frame has landed
        self._solver.snapshot(slot)
        self._slots_ready = True
        self._pending[slot] = self._fetcher.submit(self._solver.fetch, slot)
        self._slot ^= 1
        return self._pending[slot]

    def _before_run(self) -> None:
        """On CUDA, the two device frame slots must fit before the first step."""
        if self.backend == "cuda" and not self._slots_ready:
            state = self._state_bytes()
            _guard.require_memory(2 * state, f"{self._what()}, 2 device frame slots,",
                                  backend="cuda", host_bytes=_CUDA_STAGING_BYTES)

    def _record_header(self) -> Any:
        """What a run file holds besides the frames (distributed: every rank,
        with its rows of V as a slab, nothing gathered)."""
        axes = ("x", "y", "z")[: self.ndim]
        V = self._V
        slabs = {} if self._comm is None or V is None else {"V": V}
        params = {"a": self.a, "s": self.s, "spacing": self.spacing, "scheme": self.scheme,
                  "bc": self.bc, "dt": self._dt, "max_dt": self.max_dt, "force": self._force,
                  "dtype": self.dtype.name, "shape": self._shape}
        if not slabs:
            params["V"] = V
        coords = {ax: ((ax,), np.arange(n) * h, "length unit of the equation",
                       f"grid position {ax}_i = i h_{ax} from the first point")
                  for ax, n, h in zip(axes, self._shape, self.spacing)}
        return RunHeader(
            model="NLSE", parameters=params, backend=self.backend, slabs=slabs,
            units=("dimensionless: those of i dPsi/dt + a Lap Psi - V Psi + s |Psi|^2 Psi = 0 "
                   "(t, x and Psi as the equation is written)"),
            coords=coords, dims={"psi": axes, "norm": (), "energy": (), "steps": ()},
            var_units={"t": "time unit of the equation", "psi": "", "norm": "",
                       "energy": "", "steps": ""},
            long_names={"t": "time", "psi": "the state Psi",
                        "norm": "N = sum |Psi|^2 dV",
                        "energy": "H = sum [a |grad Psi|^2 + V |Psi|^2 - (s/2) |Psi|^4] dV",
                        "steps": "RK4 steps since the solver was made"})

    # ------------------------------------------------------------ observables
    def norm(self) -> float:
        """``N = sum |Psi|^2 dV`` (the discrete L2 norm squared)."""
        return self._solver.observe()[0]

    def energy(self) -> float:
        """``H = sum [a |grad Psi|^2 + V |Psi|^2 - (s/2) |Psi|^4] dV``.

        With periodic boundaries the kinetic part is ``-a Re<Psi, L Psi>`` with
        the scheme's own Laplacian ``L``, the quantity the semi-discrete system
        conserves; otherwise forward differences over the grid's links.
        """
        return self._solver.observe()[1]

    def bytes_per_step(self, fused: Optional[bool] = None) -> float:
        """Bytes a step moves through memory (traffic model) in the fused or
        staged form (default: the last step's, else the one asked for)."""
        if fused is None:
            fused = (self.last_kernel or ("staged", "fused", "fused")[self._kernel]) == "fused"
        per = (self._solver.fused_bytes_per_point_step() if fused
               else self._solver.bytes_per_point_step())
        return per * int(np.prod(self._shape))

    # ------------------------------------------------------------ checkpoints
    def _checkpoint(self) -> Tuple[Dict[str, np.ndarray], Dict[str, Any]]:
        real = np.float32 if self.dtype == np.complex64 else np.float64
        V = self._V if self._V is not None else np.zeros(0, real)
        return {"psi": self.psi, "V": V}, dict(
            self._clock(), spacing=np.asarray(self.spacing), a=self.a, s=self.s, dt=self._dt,
            scheme=self.scheme, bc=self.bc, force=self._force)

    _KEYS = {
        "psi": _files.Key("array", "c", ndim=(1, 2, 3)), **CLOCK_KEYS,
        "spacing": _files.Key("array", "f", ndim=(1,)),
        "a": _files.Key("float"), "s": _files.Key("float"), "dt": _files.Key("float"),
        "scheme": _files.Key("str", choices=tuple(_SCHEMES)),
        "bc": _files.Key("str", choices=tuple(_BCS)),
        "force": _files.Key("bool"),
        "V": _files.Key("array", "f", ndim=(1, 2, 3)),
    }

    _OVERRIDES = ("a", "s", "scheme", "bc", "dt", "force", "fused")

    @classmethod
    def _from_checkpoint(cls, where: str, d: Dict[str, Any], backend: str,
                         comm: Any, overrides: Dict[str, Any]) -> "NLSE":
        def bad(what: str) -> ValueError:
            return ValueError(f"{where}: {what}")

        for name in ("steps", "k"):
            if d[name] < 0:
                raise bad(f"entry {name!r} must be >= 0, got {d[name]}")
        if d["k"] > d["steps"]:
            raise bad(f"entry 'k' ({d['k']}) exceeds 'steps' ({d['steps']})")
        if d["solver_dt"] <= 0:
            raise bad(f"entry 'solver_dt' must be > 0, got {d['solver_dt']!r}")
        t = d["t_base"] + d["k"] * d["solver_dt"]
        if t != d["t"]:
            raise bad(f"entry 't' = {d['t']!r} does not match t_base + k * solver_dt = {t!r}")
        V = d["V"] if d["V"] is not None and d["V"].size else None
        psi = d["psi"]
        if comm is not None and d["parts"]:  # this rank's rows of the parts
            shape = d["global_shape"]
            start = _dist.Layout.of(comm, shape).start
            psi = _dist.Slab(psi, start, shape)
            V = None if V is None else _dist.Slab(V, start, shape)
        args = dict(a=d["a"], s=d["s"], scheme=d["scheme"], bc=d["bc"], dt=d["dt"],
                    force=d["force"])
        args.update(overrides)
        try:
            sim = cls(psi, tuple(d["spacing"].tolist()), V=V, dtype=d["psi"].dtype,
                      backend=backend, comm=comm, **args)
        except (TypeError, ValueError) as exc:
            raise cls._refused(where, overrides, exc) from None
        if "dt" not in overrides and not sim._force and \
                d["solver_dt"] > sim.max_dt * (1 + 1e-6):
            raise bad(f"entry 'solver_dt' = {d['solver_dt']:g} exceeds the stability bound "
                      f"{sim.max_dt:g} of the {'changed' if overrides else 'saved'} parameters")
        sim._restore_clock(d, overrides)
        return sim

    # ------------------------------------------------------------ distributed
    def _comm_details(self) -> Dict[str, Any]:
        sol = self._solver
        lay = sol.layout
        info = _dist.info(self._comm)
        return {"ranks": lay.size, "rank": lay.rank, "axis": 0,
                "rows": (lay.start, lay.count), "counts": lay.counts.tolist(),
                "halo_rows": sol.depth,
                "exchange": ("device to device through CUDA IPC (one node), once per step"
                             if sol.ipc else "the communicator table's halo swap (MPI_Isend/"
                             "MPI_Irecv) of host buffers, once per step" +
                             (" (device rows staged through pinned host memory)"
                              if self.backend == "cuda" else "")) +
                            (f"; no CUDA IPC: {sol.ipc_why}" if sol.ipc_why else ""),
                "reduction": "rank-ordered sum (MPI_Allgather)", "mpi": info["library"],
                "cuda_aware_mpi": info["cuda_aware"]}
