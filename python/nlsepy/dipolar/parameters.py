"""The parameters of ``nl.DipolarGPE``: their checks, the moving beam
(:class:`Obstacle`), the reduction of the 3D couplings (the Lee-Huang-Yang
one too) to the effective 2D and 1D equations, the C core's constructor
arguments, and the energy parts of the observables.

Everything here is a function of the parameters alone (no solver, no
handle), shared by the single-process and the distributed solver.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

from ..common import backend as _backend
from ..common.checks import complex_dtype as _complex_dtype
from ..common.checks import count as _count
from ..common.checks import potential as _potential
from ..common.checks import real as _real

__all__ = ["GEOMETRIES", "Obstacle", "MODEL", "FFT_EFFORT", "MODES", "SETTABLE", "refusal",
           "check", "reduction", "check_even", "obstacle_args", "owned_potential", "state_array",
           "c_args", "check_omega", "check_rotating_ground", "check_gqf", "lhy_reduction",
           "check_free_start", "energy_parts"]

#: the model's name in messages and checkpoints
MODEL = "DipolarGPE"

#: geometry name -> (C code, solver axis names)
GEOMETRIES = {
    "3d": (0, ("x", "y", "z")),
    "2d-xy": (1, ("x", "y")),   # dipoles perpendicular to the plane, eq. 2.11
    "2d-xz": (2, ("x", "z")),   # dipoles in the plane, eq. 2.14
    "1d-x": (3, ("x",)),        # dipoles perpendicular to the axis, eq. 2.16
    "1d-z": (4, ("z",)),        # dipoles along the axis, eq. 2.19
}
#: FFTW planning effort -> C code
FFT_EFFORT = {"estimate": 0, "measure": 1, "patient": 2}
#: kind of step -> C code
MODES = {"imaginary": 0, "real": 1}

#: attributes set after construction: what they do
SETTABLE = ("psi", "V", "obstacle", "g", "gdd", "dt", "omega", "gqf")

#: read-only attributes and how to change what they stand for
_FIXED = {
    "t": "t counts the real-time steps taken; it moves only with real_time() and run() "
         "(save() and load() keep it)",
    "steps": "steps counts the steps taken; save() and load() keep it",
    "frames": "frames holds the snapshots of the last call with frames=",
}
_FIXED_DEFAULT = ("{name} is fixed at construction (it sets the solver's grid, tables or "
                  "kernel); make a new solver with the value you want: DipolarGPE(..., "
                  "{name}=...), or DipolarGPE.load(path, {name}=...) from a state written by "
                  "save(). Settable after construction: " + ", ".join(SETTABLE))


def refusal(name: str) -> str:
    """The message of the AttributeError when read-only attribute `name` is assigned."""
    return f"DipolarGPE.{name} cannot be set: " + _FIXED.get(name, _FIXED_DEFAULT.format(name=name))


@dataclass(frozen=True)
class Obstacle:
    """A moving repulsive Gaussian beam (Loncar, thesis, eq. 9.1).

    ``V_B = A(t) exp(-2 sum_a (x_a - c_a(t))^2 / sigma^2)`` over the solver
    axes other than `beam_axis`; the centre is 0 except along `move_axis`,
    where ``c(t) = start + velocity min(t, t_move)``; ``A(t) = V0`` until
    `t_move`, then falls linearly to 0 over `t_off`.  Imaginary time sees the
    beam at t = 0.  Units are those of the equation solved (``V0`` adds to
    the Hamiltonian as is).

    Parameters
    ----------
    V0 : float
        Peak height.
    sigma : float
        The 1/e^2 waist (> 0).
    velocity : float, optional
        Speed along `move_axis`.
    start : float, optional
        Centre at t = 0 along `move_axis`.
    t_move : float, optional
        Time the beam stops (default: never).
    t_off : float, optional
        Duration of the linear switch-off after `t_move` (0: at once).
    move_axis : str, optional
        Axis name the beam moves along (default ``"y"``).
    beam_axis : str or None, optional
        Axis the beam propagates along (no dependence on it); default
        ``"x"`` in 3D as in eq. 9.1, none (a round spot) in 2D and 1D.
    """

    V0: float
    sigma: float
    velocity: float = 0.0
    start: float = 0.0
    t_move: float = math.inf
    t_off: float = 0.0
    move_axis: str = "y"
    beam_axis: Optional[str] = "x"


def check(shape: Any, spacing: Any, dt: Any, g: Any, gdd: Any, trap: Any, cutoff: Any,
          geometry: Any, option: Any, dtype: Any, dipolar: Any, fft_effort: Any,
          gqf: Any = 0.0) -> Dict[str, Any]:
    """The checked scalar parameters of a solver, by attribute name (without
    the leading underscore): those of the constructor, the axes, the
    reduction factors ``fc``, ``fd``, ``fq``, the geometry's C ``code``,
    ``kscale`` (sqrt(2 kappa)) and ``dipolar`` (whether the dipolar term is
    on)."""
    p: Dict[str, Any] = {}
    if not isinstance(geometry, str) or geometry.lower() not in GEOMETRIES:
        raise ValueError(f"geometry must be one of {sorted(GEOMETRIES)}, got {geometry!r}")
    p["geometry"] = geometry.lower()
    p["code"], p["axes"] = GEOMETRIES[p["geometry"]]
    nd = len(p["axes"])
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        shape = tuple(np.asarray(shape, dtype=object).ravel().tolist())
    except Exception:  # noqa: BLE001 - anything that is not a sequence
        raise ValueError(f"shape must be a sequence of {nd} integers, got {shape!r}") from None
    if len(shape) != nd:
        raise ValueError(f"shape must have {nd} entries for geometry {p['geometry']!r}, "
                         f"got {shape!r}")
    p["shape"] = tuple(_count(f"shape[{a}]", n, 4) for a, n in enumerate(shape))
    if np.ndim(spacing) == 0:
        spacing = (spacing,) * nd
    spacing = tuple(np.asarray(spacing, dtype=object).ravel().tolist())
    if len(spacing) != nd:
        raise ValueError(f"spacing must be a number or {nd} numbers, got {spacing!r}")
    p["spacing"] = tuple(_real(f"spacing[{a}]", h, positive=True) for a, h in enumerate(spacing))
    p["dt"] = _real("dt", dt, positive=True)
    if isinstance(option, bool) or not isinstance(option, (int, np.integer)) \
            or option not in (1, 2):
        raise ValueError(f"option must be 1 or 2, got {option!r}")
    p["option"] = int(option)
    trap = tuple(trap) if not isinstance(trap, (str, bytes)) else trap
    if len(trap) != 3:
        raise ValueError(f"trap must be (gamma, nu, lambda), got {trap!r}")
    p["trap"] = tuple(_real(n, v, nonneg=True) for n, v in zip(("gamma", "nu", "lambda"), trap))
    p["g"] = _real("g", g)
    p["gdd"] = _real("gdd", gdd)
    p["cutoff"] = None if cutoff is None else _real("cutoff", cutoff, positive=True)
    p["dtype"] = _complex_dtype(dtype)
    if not isinstance(fft_effort, str) or fft_effort not in FFT_EFFORT:
        raise ValueError(f"fft_effort must be one of {sorted(FFT_EFFORT)}, got {fft_effort!r}")
    p["fft_effort"] = fft_effort
    p["fc"], p["fd"], p["kscale"] = reduction(p["geometry"], p["trap"])
    p["gqf"] = check_gqf(gqf)
    p["fq"] = lhy_reduction(p["geometry"], p["trap"])
    p["dipolar"] = (p["gdd"] != 0) if dipolar is None else bool(dipolar)
    if not p["dipolar"] and p["gdd"] != 0:
        raise ValueError(f"dipolar=False needs gdd = 0, got gdd = {p['gdd']!r}")
    if p["dipolar"]:
        check_even(p["shape"])
    return p


def reduction(geometry: str, trap: Tuple[float, float, float]) -> Tuple[float, float, float]:
    """Factors turning the 3D g, gdd into the effective ones of `geometry`,
    and sqrt(2 kappa) (kappa the confining frequency; 0 in 3D)."""
    gam, nu, lam = trap
    if geometry == "3d":
        return 1.0, 1.0, 0.0
    if geometry in ("2d-xy", "2d-xz"):
        kappa = lam if geometry == "2d-xy" else nu
        name = "lambda" if geometry == "2d-xy" else "nu"
        if kappa <= 0:
            raise ValueError(f"geometry {geometry!r} needs a confining trap frequency {name} > 0")
        f = math.sqrt(kappa / (2 * math.pi))
        return f, 4 * math.pi / 3 * f, math.sqrt(2 * kappa)
    pair = (nu, lam) if geometry == "1d-x" else (gam, nu)
    names = "nu = lambda" if geometry == "1d-x" else "gamma = nu"
    if pair[0] <= 0 or not math.isclose(pair[0], pair[1], rel_tol=1e-12):
        raise ValueError(f"geometry {geometry!r} needs an axially symmetric transverse trap "
                         f"({names} > 0), got trap = {trap!r}")
    kappa = pair[0]
    return kappa / (2 * math.pi), 2 * kappa / 3, math.sqrt(2 * kappa)


def check_even(shape: Sequence[int]) -> None:
    """ValueError unless every axis has an even number of points (the dipolar FFT box)."""
    odd = [a for a, n in enumerate(shape) if n % 2]
    if odd:
        raise ValueError(f"shape[{odd[0]}] = {shape[odd[0]]} must be even with the "
                         f"dipolar term (x = 0 at index n/2 of a symmetric FFT box)")


def obstacle_args(ob: Any, axes: Tuple[str, ...]) -> Tuple[Any, ...]:
    """Check the beam `ob` against the solver axes `axes`; its C arguments."""
    if not isinstance(ob, Obstacle):
        raise TypeError(f"obstacle must be an nlsepy.Obstacle, got {type(ob).__name__}")
    for name in ("V0", "sigma", "velocity", "start"):
        _real(f"obstacle.{name}", getattr(ob, name), positive=(name == "sigma"))
    for name in ("t_move", "t_off"):
        v = getattr(ob, name)
        if isinstance(v, bool) or not isinstance(v, (Real, np.floating, np.integer)) \
                or math.isnan(v) or v < 0:
            raise ValueError(f"obstacle.{name} must be >= 0 (inf allowed), got {v!r}")
    if not isinstance(ob.move_axis, str) or ob.move_axis not in axes:
        raise ValueError(f"obstacle.move_axis must be one of {axes}, got {ob.move_axis!r}")
    beam = ob.beam_axis if len(axes) == 3 else None
    if beam is not None and (not isinstance(beam, str) or beam not in axes
                             or beam == ob.move_axis):
        raise ValueError(f"obstacle.beam_axis must be None or an axis of {axes} other "
                         f"than move_axis, got {beam!r}")
    return (float(ob.V0), float(ob.sigma), float(ob.velocity), float(ob.start),
            float(ob.t_move), float(ob.t_off), -1 if beam is None else axes.index(beam),
            axes.index(ob.move_axis))


def owned_potential(value: Any, shape: Tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A checked, owned, read-only copy of a potential in the precision of `dtype`."""
    arr = np.array(_potential(value, shape, dtype), copy=True, order="C")
    arr.flags.writeable = False
    return arr


def state_array(value: Any, shape: Tuple[int, ...]) -> np.ndarray:
    """A new state of one process: a float or complex array of the grid's shape."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "fc":
        raise TypeError(f"psi must be a float or complex array, got dtype {arr.dtype}")
    if arr.shape != shape:
        raise ValueError(f"psi must have shape {shape}, got {arr.shape}")
    return arr


def c_args(p: Dict[str, Any]) -> Tuple[Any, ...]:
    """The C core's constructor arguments from the checked parameters `p`
    (:func:`check`): the kinetic coefficient and the trap coefficient of each
    solver axis follow from the rescaling ``option``."""
    core = _backend.core()
    kin = 1.0 if p["option"] == 2 else 0.5
    coef = [(p["option"] / 2.0) * p["trap"]["xyz".index(a)] ** 2 for a in p["axes"]]
    return (p["code"], p["shape"], p["spacing"],
            core.COMPLEX64 if p["dtype"] == np.complex64 else core.COMPLEX128, p["dt"], kin,
            coef, p["g"] * p["fc"], p["gdd"] * p["fd"],
            0.0 if p["cutoff"] is None else p["cutoff"], p["kscale"], int(p["dipolar"]),
            FFT_EFFORT[p["fft_effort"]])


def check_omega(value: Any, geometry: str) -> float:
    """The rotation frequency Omega (about z, in units of the reference
    frequency): finite, and nonzero only where the geometry has the x-y plane."""
    w = _real("omega", value)
    if w != 0 and geometry not in ("3d", "2d-xy"):
        raise ValueError(f"omega = {w!r}: rotation about z needs the x-y plane, geometry "
                         f"'3d' or '2d-xy', not {geometry!r}")
    return w


def check_rotating_ground(omega: float, trap: Tuple[float, float, float]) -> None:
    """Imaginary time in a frame rotating at `omega`: below the smallest radial
    trap frequency min(gamma, nu), beyond which the rotating frame's energy has
    no lower bound (no ground state)."""
    bound = min(abs(trap[0]), abs(trap[1]))
    if omega != 0 and abs(omega) >= bound:
        raise ValueError(f"imaginary time with omega = {omega!r} needs |omega| < "
                         f"min(gamma, nu) = {bound!r}, the smallest radial trap frequency "
                         f"(beyond it the rotating frame has no ground state); pass "
                         f"force=True to run anyway")


def check_gqf(value: Any) -> float:
    """The Lee-Huang-Yang coefficient gqf of ``gqf |psi|^3 psi`` (3D, in the
    equation's units like `g`): finite and >= 0 (the term of quantum
    fluctuations is repulsive; ``nl.units.BEC(...).gqf`` gives it)."""
    try:
        return _real("gqf", value, nonneg=True)
    except ValueError as exc:
        raise ValueError(f"{exc} (gqf is the coefficient of the Lee-Huang-Yang term "
                         f"gqf |psi|^3 psi, >= 0)") from None


def lhy_reduction(geometry: str, trap: Tuple[float, float, float]) -> float:
    """The factor turning the 3D Lee-Huang-Yang coefficient into that of the
    effective equation of `geometry` (docs/models/dipolar.md): the transverse
    Gaussian ground state ``(kappa/pi)^(1/4) exp(-kappa z^2/2)`` per confined
    axis, integrated in ``|psi|^3 psi``, gives ``int |G|^5 = sqrt(2/5)
    (kappa/pi)^(3/4)`` per axis: ``sqrt(2/5) (kappa/pi)^(3/4)`` in 2D and
    ``(2/5) (kappa/pi)^(3/2)`` in 1D (1 in 3D)."""
    if geometry == "3d":
        return 1.0
    gam, nu, lam = trap
    if geometry in ("2d-xy", "2d-xz"):
        kappa = lam if geometry == "2d-xy" else nu
        return math.sqrt(0.4) * (kappa / math.pi) ** 0.75
    kappa = nu if geometry == "1d-x" else gam
    return 0.4 * (kappa / math.pi) ** 1.5


def check_free_start(trap: Tuple[float, float, float], axes: Tuple[str, ...]) -> None:
    """Imaginary time from the default start where a solver axis has no trap
    (a frequency 0: free space, e.g. a self-bound droplet): refused, since
    the Gaussian of the trap is not defined there (the C core would take a
    unit width); the caller passes an explicit start."""
    free = [f"{n} = 0 ({a})" for n, a in zip(("gamma", "nu", "lambda"), "xyz")
            if a in axes and trap["xyz".index(a)] == 0]
    if free:
        raise ValueError(f"imaginary time with trap = {tuple(trap)!r} ({', '.join(free)}: "
                         f"free space) needs an explicit start: pass psi0= to DipolarGPE (or "
                         f"assign gpe.psi), e.g. a Gaussian of the expected size with a little "
                         f"noise; the default start is the Gaussian of the trap")


def energy_parts(o: Dict[str, Any], option: int, omega: float) -> Dict[str, float]:
    """The parts of the energy from the C core's observables `o` (equation
    units) in units of the reference frequency (divided by `option`), as
    ``observables()`` reports them: their sum is ``energy``, and ``mu`` is
    ``e_kin + e_trap + 2 e_contact + 2 e_dd + (5/2) e_qf + e_rot``."""
    return {"e_kin": o["kinetic"] / option, "e_trap": o["potential"] / option,
            "e_contact": o["contact"] / option, "e_dd": o["dipolar"] / option,
            "e_qf": o["lhy"] / option, "e_rot": -omega * o["lz"]}
