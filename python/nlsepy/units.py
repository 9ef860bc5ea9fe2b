"""Physical units for the Gross-Pitaevskii models (``nl.units``).

``nl.units.BEC`` turns a condensate described in laboratory units (species or
mass, s-wave scattering length and dipolar length or magnetic moment in atomic
units, trap frequencies in Hz or a unit of length in metres, number of atoms)
into the dimensionless parameters :class:`nlsepy.DipolarGPE` takes, and
converts its results back (chemical potential in nK or Hz, lengths in um,
times in ms).

Conventions (Loncar, thesis, section 2.1, eqs. 2.6-2.9; the DBEC-GP input
keys; docs/physics.md section 2).  A reference frequency ``omega`` sets
the unit of length ``l = sqrt(hbar / (m omega))`` and the trap ratios
``(gamma, nu, lambda) = (omega_x, omega_y, omega_z) / omega``.  DBEC-GP's
couplings are ``G0 = 4 pi a_s N / l`` and ``GDD0 = 3 a_dd N / l``; with
``OPTION = 2`` (time rescaled by 2, kinetic term ``-Lap``, eq. 2.9) the
equation carries ``g = 2 G0 = 8 pi a_s N / l`` and ``gdd = 2 GDD0 = 6 a_dd N
/ l``, with ``OPTION = 1`` (kinetic ``-Lap/2``, eq. 2.7) ``g = G0``, ``gdd =
GDD0``.  The dipolar length is ``a_dd = mu0 mu^2 m / (12 pi hbar^2)``
(eq. 2.6).  In these units the solver's time ``t`` is ``t_phys * omega /
option``, so ``t_phys = t * option / omega`` (DBEC-GP prints ``iteration * DT * OPTION`` as the time in units of
``1 / omega``), and the chemical potential and energy that
:meth:`nlsepy.DipolarGPE.observables` reports are in units of ``hbar omega``.

The Lee-Huang-Yang term of quantum fluctuations, ``mu_LHY = (32 / (3
sqrt(pi))) g n sqrt(n a_s^3) Q5(eps_dd)`` with ``g = 4 pi hbar^2 a_s / m``
and ``eps_dd = a_dd / a_s`` (:func:`q5`), is in these units ``gqf |psi|^3``
with ``gqf = option (128 sqrt(pi) / 3) N^(3/2) (a_s / l)^(5/2) Q5(eps_dd)``
(docs/models/dipolar.md derives it; DipolarGPE's ``gqf``).

Constants: :mod:`scipy.constants` (the CODATA set of the installed SciPy)
when SciPy is installed, else the CODATA 2018 values built in below.
"""

from __future__ import annotations

import functools
import math
import re
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from .common.checks import real as _real

__all__ = ["BEC", "SPECIES", "constants", "dipolar_length", "q5", "lhy_gqf0"]

#: CODATA 2018 (Tiesinga et al., Rev. Mod. Phys. 93, 025010 (2021); NIST
#: physics.nist.gov/constants), used when SciPy is not installed.  h and k_B
#: are exact in the SI since 2019.
CODATA_2018 = {
    "h": 6.62607015e-34,            # Planck constant (J s)
    "k_B": 1.380649e-23,            # Boltzmann constant (J/K)
    "mu_0": 1.25663706212e-6,       # vacuum magnetic permeability (N/A^2)
    "mu_B": 9.2740100783e-24,       # Bohr magneton (J/T)
    "a0": 5.29177210903e-11,        # Bohr radius (m)
    "u": 1.66053906660e-27,         # atomic mass constant (kg)
}

#: species -> (mass in u, magnetic moment in Bohr magnetons, or None where
#: it depends on the hyperfine state and the dipolar term is left out).
#: Masses: AME2020 atomic masses (Wang et al., Chin. Phys. C 45, 030003
#: (2021)), as listed by NIST's "Atomic Weights and Isotopic Compositions"
#: (they agree with the CIAAW isotope tables to the digits those give).
#: Moments of the spin-polarised ground states: Dy 9.93 mu_B (J = 8,
#: g_J = 1.2416), Er 6.98 mu_B (J = 6, g_J = 1.1638), Cr 6 mu_B (7S3), Yb 0
#: (J = 0).
SPECIES: Dict[str, Tuple[float, Optional[float]]] = {
    "7Li": (7.0160034, None),
    "23Na": (22.9897693, None),
    "39K": (38.9637065, None),
    "41K": (40.9618253, None),
    "85Rb": (84.9117897, None),
    "87Rb": (86.9091805, None),
    "133Cs": (132.9054520, None),
    "52Cr": (51.9405062, 6.0),
    "162Dy": (161.9268056, 9.93),
    "164Dy": (163.9291819, 9.93),
    "166Er": (165.9302995, 6.98),
    "168Er": (167.9323767, 6.98),
    "174Yb": (173.9388664, 0.0),
}

_AXES = ("x", "y", "z")
_ENERGY_UNITS = ("J", "nK", "Hz")


@functools.lru_cache(maxsize=None)
def constants() -> Dict[str, Any]:
    """The physical constants this module uses, and where they come from.

    Returns
    -------
    dict
        ``h``, ``hbar`` (J s), ``k_B`` (J/K), ``mu_0`` (N/A^2), ``mu_B``
        (J/T), ``a0`` (m), ``u`` (kg) and ``source``: ``"scipy.constants
        (SciPy <version>)"`` when SciPy is installed (its CODATA set: 2018
        up to SciPy 1.14, 2022 from 1.15), else ``"CODATA 2018 (built
        in)"``.
    """
    try:
        import scipy
        import scipy.constants as sc
    except ImportError:
        c = dict(CODATA_2018)
        c["source"] = "CODATA 2018 (built in)"
    else:
        pc = sc.physical_constants
        c = {"h": sc.h, "k_B": sc.k, "mu_0": sc.mu_0, "mu_B": pc["Bohr magneton"][0],
             "a0": pc["Bohr radius"][0], "u": pc["atomic mass constant"][0],
             "source": f"scipy.constants (SciPy {scipy.__version__})"}
    c["hbar"] = c["h"] / (2 * math.pi)
    return c


def dipolar_length(mu: float, mass_kg: float) -> float:
    """Dipolar length ``a_dd = mu0 (mu mu_B)^2 m / (12 pi hbar^2)`` in Bohr radii (eq. 2.6).

    Parameters
    ----------
    mu : float
        Magnetic moment in Bohr magnetons (>= 0).
    mass_kg : float
        Atomic mass in kg (> 0).

    Returns
    -------
    float
        a_dd / a0.

    Examples
    --------
    >>> from nlsepy import units
    >>> round(units.dipolar_length(9.93, 163.9291819 * units.constants()["u"]), 1)
    130.8
    """
    mu = _real("mu (Bohr magnetons)", mu, nonneg=True)
    mass_kg = _real("mass_kg", mass_kg, positive=True)
    c = constants()
    return c["mu_0"] * (mu * c["mu_B"]) ** 2 * mass_kg / (12 * math.pi * c["hbar"] ** 2) / c["a0"]


def _lhy_integral(a: float, b: float) -> float:
    """``Re int_0^1 (a + b u^2)^(5/2) du`` for ``b >= 0`` and ``a + b >= 0``
    in closed form: the integrand is real where ``a + b u^2 >= 0`` and
    purely imaginary below (so the real part starts there when a < 0).
    With ``S = sqrt(a + b)``: ``S^5/6 + (5a/24) S^3 + (5a^2/16) S + (5a^3/16)
    ln((sqrt(b) + S) / sqrt|a|) / sqrt(b)``."""
    if b == 0:
        return a ** 2.5 if a > 0 else 0.0
    S = math.sqrt(a + b)
    out = S ** 5 / 6 + 5 * a / 24 * S ** 3 + 5 * a * a / 16 * S
    if a > 0:  # the logarithm's argument is 1 + x, x = (sqrt(b) + S - sqrt(a)) / sqrt(a)
        rb, ra = math.sqrt(b), math.sqrt(a)
        out += 5 * a ** 3 / 16 * math.log1p((rb + b / (S + ra)) / ra) / rb
    elif a < 0:
        out += 5 * a ** 3 / 16 * math.log((math.sqrt(b) + S) / math.sqrt(-a)) / math.sqrt(b)
    return out


def q5(eps: float) -> float:
    """The Lee-Huang-Yang factor of a dipolar gas, ``Q5(eps) = int_0^1 (1 - eps +
    3 eps u^2)^(5/2) du`` (its real part for ``eps > 1``, the standard choice:
    the imaginary part, from the unstable phonons of a homogeneous gas with
    eps > 1, is left out).

    ``Q5(0) = 1``, ``Q5(1) = 3^(5/2) / 6``; closed form (no quadrature).

    Parameters
    ----------
    eps : float
        ``eps_dd = a_dd / a_s`` (0 <= eps; ``a_s > 0``).

    Returns
    -------
    float
    """
    e = _real("eps", eps, nonneg=True)
    return _lhy_integral(1.0 - e, 3.0 * e)


def lhy_gqf0(a_s: float, a_dd: float, n_atoms: float, length: float,
             a0: float = CODATA_2018["a0"]) -> float:
    """The Lee-Huang-Yang coefficient in DBEC-GP's units without the factor
    OPTION: ``(128 sqrt(pi) / 3) N^(3/2) (a_s / l)^(5/2) Q5(a_dd / a_s)``
    (DipolarGPE's ``gqf`` is OPTION times it).

    Parameters
    ----------
    a_s, a_dd : float
        Scattering and dipolar lengths in Bohr radii (``a_s >= 0``; at
        ``a_s = 0`` the limit, ``(a_s)^(5/2) Q5`` staying finite).
    n_atoms : float
        Number of atoms.
    length : float
        Unit of length l in metres (DBEC-GP's AHO).
    a0 : float, optional
        The Bohr radius in metres.

    Returns
    -------
    float
    """
    a = _real("a_s (Bohr radii)", a_s, nonneg=True)
    add = _real("a_dd (Bohr radii)", a_dd, nonneg=True)
    scale = max(a, add)
    if scale == 0:
        return 0.0
    # the integral at unit scale times scale^(5/2): finite wherever the result is
    unit = _lhy_integral((a - add) / scale, 3 * add / scale)
    try:
        return 128 * math.sqrt(math.pi) / 3 * n_atoms ** 1.5 * unit * (scale * a0 / length) ** 2.5
    except OverflowError:
        return math.inf


def _species_key(species: Any) -> str:
    """The key of SPECIES for '164Dy', 'Dy164', 'dy-164', ... else ValueError."""
    known = ", ".join(SPECIES)
    if not isinstance(species, str):
        raise ValueError(f"species must be a string such as '164Dy' (known: {known}), "
                         f"got {species!r}")
    s = species.strip()
    m = (re.fullmatch(r"(\d+)\s*-?\s*([A-Za-z]{1,2})", s)
         or re.fullmatch(r"([A-Za-z]{1,2})\s*-?\s*(\d+)", s))
    if m:
        a, b = m.groups()
        mass_number, symbol = (a, b) if a.isdigit() else (b, a)
        key = f"{int(mass_number)}{symbol.capitalize()}"
        if key in SPECIES:
            return key
    raise ValueError(f"species {species!r} is not known (known: {known}); give mass= "
                     f"(atomic mass units) or mass_kg= and mu= or a_dd= instead")


def _scale(x: Any, factor: float, name: str) -> Any:
    """`x` (a number or array of numbers) times `factor`: a float for a scalar."""
    arr = np.asarray(x)
    if arr.dtype == object or arr.dtype.kind not in "fiuc" or arr.dtype == bool:
        raise TypeError(f"{name} must be a real number or an array of them, got {x!r}")
    if arr.dtype.kind == "c":
        raise TypeError(f"{name} must be real, got a complex {type(x).__name__}")
    out = arr * factor
    return float(out) if out.ndim == 0 else out


class BEC:
    """A condensate in laboratory units and its dimensionless DipolarGPE parameters.

    The reference frequency ``omega`` fixes the units: length ``l =
    sqrt(hbar / (m omega))``, time ``option / omega`` per unit of the
    solver's ``t``, energy ``hbar omega`` (what ``observables()`` reports).
    Give either the trap frequencies (`trap_hz`; ``omega`` is then one of them,
    by default ``omega_x`` as in DBEC-GP's examples and Loncar's thesis,
    chapter 9) or the unit of length (`length`, DBEC-GP's ``AHO``; then
    ``omega = hbar / (m l^2)`` and the trap ratios are given by `trap`).

    Parameters
    ----------
    species : str, optional
        An isotope of :data:`SPECIES` (``"164Dy"``, ``"162Dy"``,
        ``"168Er"``, ``"166Er"``, ``"52Cr"``, ``"87Rb"``, ``"23Na"``, ...;
        ``"Dy164"`` and ``"dy-164"`` work too): its mass and, unless `a_dd`
        or `mu` is given, its magnetic moment.  Alkali atoms have no default
        moment (their ~1 mu_B gives a_dd < 1 a0): the dipolar term is 0
        unless `mu` or `a_dd` is given.
    a_s : float
        s-wave scattering length in Bohr radii a0 (may be negative).
    n_atoms : float
        Number of atoms (> 0).
    mass : float, optional
        Atomic mass in atomic mass units (u, daltons), instead of `species`.
    mass_kg : float, optional
        Atomic mass in kilograms, instead of `species` or `mass`.
    a_dd : float, optional
        Dipolar length ``mu0 mu^2 m / (12 pi hbar^2)`` in Bohr radii.
    mu : float, optional
        Magnetic moment in Bohr magnetons (gives `a_dd` through eq. 2.6);
        not with `a_dd`.
    trap_hz : (float, float, float), optional
        Trap frequencies ``(f_x, f_y, f_z)`` in Hz (``omega_a = 2 pi f_a``;
        0 for an untrapped axis).  Not with `length`.
    reference : {"x", "y", "z", "geometric"} or float, optional
        With `trap_hz`: the reference frequency, the trap frequency along
        that axis (default ``"x"``), their geometric mean, or a frequency
        in Hz.
    length : float, optional
        The unit of length in metres (DBEC-GP's ``AHO``).  Not with
        `trap_hz`.
    trap : (float, float, float), optional
        With `length`: the trap ratios ``(gamma, nu, lambda)`` in units of
        ``omega = hbar / (m l^2)`` (DBEC-GP's GAMMA, NU, LAMBDA); default
        ``(1, 1, 1)``.
    option : {1, 2}, optional
        DBEC-GP's OPTION: 2 (default, as ``DipolarGPE``) for eq. 2.9
        (kinetic ``-Lap``), 1 for eq. 2.7 (kinetic ``-Lap/2``).

    Attributes
    ----------
    g, gdd : float
        The 3D contact and dipolar couplings :class:`~nlsepy.DipolarGPE`
        takes: ``option * 4 pi a_s N / l`` and ``option * 3 a_dd N / l``
        (the solver reduces them itself in 2D and 1D).
    g0, gdd0 : float
        DBEC-GP's ``G0 = 4 pi a_s N / l`` and ``GDD0 = 3 a_dd N / l`` (what
        its summary prints as G_3D, GD_3D).
    gqf : float or None
        The Lee-Huang-Yang coefficient :class:`~nlsepy.DipolarGPE` takes
        (``gqf=``): ``option (128 sqrt(pi) / 3) N^(3/2) (a_s / l)^(5/2)
        Q5(eps_dd)``; ``gqf0`` without the factor ``option``.  None for
        ``a_s < 0`` (the term is not defined there).
    eps_dd : float
        ``a_dd / a_s`` (inf for ``a_s = 0``); ``q5`` is ``Q5(eps_dd)``
        (:func:`q5`; None for ``a_s <= 0``).
    trap : (float, float, float)
        ``(gamma, nu, lambda)``: the trap frequencies over ``omega``.
    trap_hz : (float, float, float)
        The trap frequencies in Hz.
    length : float
        Unit of length l (m).
    omega : float
        Reference angular frequency (rad/s); ``frequency_hz`` is omega / 2 pi.
    time : float
        Seconds per unit of the solver's time: ``option / omega``.
    energy : float
        Joules per unit of the reported energies: ``hbar omega``.
    mass_kg, mass_u : float
        Atomic mass.
    a_s, a_dd : float
        Scattering and dipolar lengths in Bohr radii; ``mu`` the magnetic
        moment in Bohr magnetons when known (else None).
    n_atoms : float
    species : str or None
    option : int
    reference : str
        How omega was chosen: ``"x"``, ``"y"``, ``"z"``, ``"geometric"``,
        ``"<f> Hz"`` or ``"length"``.
    constants : dict
        The constants used (:func:`constants`, with their source).

    Raises
    ------
    ValueError
        An unknown species; a value out of range or not finite (the
        message names the argument and the value); both or neither of
        `trap_hz` and `length`; both `a_dd` and `mu`; no mass; more than
        one mass.
    TypeError
        A number argument that is not a real number.

    Examples
    --------
    >>> import nlsepy as nl
    >>> dy = nl.units.BEC("164Dy", a_s=90, n_atoms=20_000, trap_hz=(45, 45, 133))
    >>> [round(v, 3) for v in dy.trap], round(dy.length_um(1.0), 3)
    ([1.0, 1.0, 2.956], 1.171)
    >>> sample = nl.units.BEC("164Dy", a_s=100, a_dd=132.7, n_atoms=5000, length=1e-6)
    >>> round(sample.g0, 4), round(sample.gdd0, 5)
    (332.4918, 105.33272)
    """

    _NAMES = ("species", "a_s", "n_atoms", "mass", "mass_kg", "a_dd", "mu", "trap_hz",
              "reference", "length", "trap", "option")

    def __init__(self, species: Optional[str] = None, *, a_s: float, n_atoms: float,
                 mass: Optional[float] = None, mass_kg: Optional[float] = None,
                 a_dd: Optional[float] = None, mu: Optional[float] = None,
                 trap_hz: Optional[Sequence[float]] = None,
                 reference: Union[str, float] = "x", length: Optional[float] = None,
                 trap: Optional[Sequence[float]] = None, option: int = 2) -> None:
        self._set("_inputs", dict(species=species, a_s=a_s, n_atoms=n_atoms, mass=mass,
                                  mass_kg=mass_kg, a_dd=a_dd, mu=mu, trap_hz=trap_hz,
                                  reference=reference, length=length, trap=trap,
                                  option=option))
        c = constants()
        self._set("constants", dict(c))
        self._set("species", None if species is None else _species_key(species))
        self._set("option", self._check_option(option))
        self._set("a_s", _real("a_s (Bohr radii)", a_s))
        self._set("n_atoms", _real("n_atoms", n_atoms, positive=True))
        if self.n_atoms < 1:
            raise ValueError(f"n_atoms is a number of atoms, at least 1, got {n_atoms!r}")
        self._set_mass(mass, mass_kg, c)
        self._set_dipole(a_dd, mu)
        self._set_frame(trap_hz, reference, length, trap, c)
        per_atom = self.n_atoms * c["a0"] / self.length
        self._set("g0", 4 * math.pi * self.a_s * per_atom)
        self._set("gdd0", 3 * self.a_dd * per_atom)
        self._set("g", self.option * self.g0)
        self._set("gdd", self.option * self.gdd0)
        self._set("time", self.option / self.omega)
        self._set("energy", c["hbar"] * self.omega)
        for name, source in (("g", f"a_s = {a_s!r}"), ("gdd", f"the dipolar length a_dd = "
                                                              f"{self.a_dd!r} (from a_dd or mu)")):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"{source} with n_atoms = {n_atoms!r} and the unit of length "
                                 f"{self.length:g} m gives {name} = {getattr(self, name)!r}, "
                                 f"not a finite coupling")
        self._set_lhy(c)

    # ------------------------------------------------------------ construction
    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"BEC.{name} cannot be set: a BEC is fixed when made; use "
                             f"replace({name}=...) for one with other inputs")

    @staticmethod
    def _check_option(option: Any) -> int:
        if isinstance(option, bool) or not isinstance(option, (int, np.integer)) \
                or option not in (1, 2):
            raise ValueError(f"option must be 1 or 2 (DBEC-GP's OPTION), got {option!r}")
        return int(option)

    def _set_mass(self, mass: Any, mass_kg: Any, c: Dict[str, Any]) -> None:
        given = [n for n, v in (("species", self.species), ("mass", mass), ("mass_kg", mass_kg))
                 if v is not None]
        if len(given) != 1:
            what = "none" if not given else " and ".join(given)
            raise ValueError(f"give exactly one of species, mass (atomic mass units) and "
                             f"mass_kg, got {what}")
        if self.species is not None:
            mass_u = SPECIES[self.species][0]
        elif mass is not None:
            mass_u = _real("mass (atomic mass units)", mass, positive=True)
            if mass_u < 0.5:
                raise ValueError(f"mass is in atomic mass units (u), got {mass!r}, less than "
                                 f"half a nucleon; for kilograms use mass_kg=")
            if mass_u > 1e4:  # the range mass_kg accepts
                raise ValueError(f"mass = {mass!r} u is not the mass of an atom (at most "
                                 f"1e4 u)")
        else:
            kg = _real("mass_kg", mass_kg, positive=True)
            mass_u = kg / c["u"]
            if mass_u < 0.5 or mass_u > 1e4:
                raise ValueError(f"mass_kg = {mass_kg!r} is {mass_u:.3g} u, not the mass of "
                                 f"an atom; for atomic mass units use mass=")
        self._set("mass_u", mass_u)
        self._set("mass_kg", mass_u * c["u"] if mass_kg is None else float(mass_kg))

    def _set_dipole(self, a_dd: Any, mu: Any) -> None:
        if a_dd is not None and mu is not None:
            raise ValueError(f"give a_dd (Bohr radii) or mu (Bohr magnetons), not both; got "
                             f"a_dd = {a_dd!r}, mu = {mu!r}")
        if a_dd is not None:
            self._set("mu", None)
            self._set("a_dd", _real("a_dd (Bohr radii)", a_dd))
            return
        if mu is None and self.species is not None:
            mu = SPECIES[self.species][1]
        if mu is None:
            self._set("mu", None)
            self._set("a_dd", 0.0)
            return
        mu = _real("mu (Bohr magnetons)", mu, nonneg=True)
        self._set("mu", mu)
        self._set("a_dd", dipolar_length(mu, self.mass_kg))

    def _set_lhy(self, c: Dict[str, Any]) -> None:
        """gqf0, gqf, eps_dd, q5 (docs/models/dipolar.md): (a_s/l)^(5/2) Q5 is
        ``int (a_s - a_dd + 3 a_dd u^2)^(5/2) du / l^(5/2)``, finite at a_s = 0."""
        a, add = self.a_s, self.a_dd
        self._set("eps_dd", add / a if a != 0 else math.inf)
        if a < 0:
            for name in ("q5", "gqf0", "gqf"):
                self._set(name, None)
            return
        self._set("q5", q5(self.eps_dd) if a > 0 else None)
        self._set("gqf0", lhy_gqf0(a, add, self.n_atoms, self.length, c["a0"]))
        self._set("gqf", self.option * self.gqf0)

    def _set_frame(self, trap_hz: Any, reference: Any, length: Any, trap: Any,
                   c: Dict[str, Any]) -> None:
        if (trap_hz is None) == (length is None):
            raise ValueError("give exactly one of trap_hz (trap frequencies in Hz) and length "
                             f"(the unit of length in m), got trap_hz = {trap_hz!r}, "
                             f"length = {length!r}")
        if trap_hz is not None:
            if trap is not None:
                raise ValueError(f"trap (ratios) goes with length=; with trap_hz the ratios "
                                 f"follow from the frequencies, got trap = {trap!r}")
            freqs = self._triple("trap_hz", trap_hz, "Hz")
            f_ref, ref = self._reference(freqs, reference)
            omega = 2 * math.pi * f_ref
            denom = self.mass_kg * omega  # 0 when a tiny frequency underflows it
            ell = math.sqrt(c["hbar"] / denom) if 0 < denom < math.inf else math.inf
            trap_ratios = tuple(f / f_ref for f in freqs)
            if not (1e-9 <= ell <= 1e-2 and all(math.isfinite(r) for r in trap_ratios)):
                raise ValueError(f"trap_hz = {trap_hz!r} (reference {reference!r}: {f_ref:g} "
                                 f"Hz) gives the unit of length {ell:g} m and the trap ratios "
                                 f"{trap_ratios}; a trap of an atom gas has a length between "
                                 f"1e-9 and 1e-2 m (as length= accepts)")
            self._set("length", ell)
            self._set("trap", trap_ratios)
        else:
            if not (isinstance(reference, str) and reference == "x"):
                raise ValueError(f"reference goes with trap_hz=; with length= the reference "
                                 f"frequency is hbar / (m length^2), got reference = "
                                 f"{reference!r}")
            ell = _real("length (m)", length, positive=True)
            if not 1e-9 <= ell <= 1e-2:
                raise ValueError(f"length is the unit of length in metres (DBEC-GP's AHO, "
                                 f"typically ~1e-6), got {length!r}")
            ref = "length"
            omega = c["hbar"] / (self.mass_kg * ell ** 2)
            self._set("length", ell)
            self._set("trap", (1.0, 1.0, 1.0) if trap is None else self._triple("trap", trap, ""))
            freqs = tuple(r * omega / (2 * math.pi) for r in self.trap)
        self._set("trap_hz", tuple(freqs))
        self._set("omega", omega)
        self._set("frequency_hz", omega / (2 * math.pi))
        self._set("reference", ref)

    @staticmethod
    def _triple(name: str, value: Any, unit: str) -> Tuple[float, float, float]:
        try:
            items = list(value)
        except TypeError:
            items = None
        if isinstance(value, (str, bytes)) or items is None or len(items) != 3:
            raise ValueError(f"{name} must be three numbers (x, y, z), got {value!r}")
        what = f" ({unit})" if unit else ""
        return tuple(_real(f"{name}[{i}] ({a}){what}", v, nonneg=True)
                     for i, (a, v) in enumerate(zip(_AXES, items)))  # type: ignore[return-value]

    @staticmethod
    def _reference(freqs: Tuple[float, ...], reference: Any) -> Tuple[float, str]:
        if isinstance(reference, str):
            key = reference.lower()
            if key in _AXES:
                f = freqs[_AXES.index(key)]
                if f <= 0:
                    raise ValueError(f"reference = {reference!r} picks trap_hz[{_AXES.index(key)}]"
                                     f" = {f!r}, which must be > 0; choose another axis or a "
                                     f"frequency in Hz")
                return f, key
            if key == "geometric":
                if min(freqs) <= 0:
                    raise ValueError(f"reference = 'geometric' needs three trap frequencies > 0, "
                                     f"got trap_hz = {freqs!r}")
                # the mean of the logarithms: a product of three tiny
                # frequencies would underflow to 0
                return float(math.exp(sum(math.log(f) for f in freqs) / 3)), key
            raise ValueError(f"reference must be 'x', 'y', 'z', 'geometric' or a frequency in "
                             f"Hz, got {reference!r}")
        f = _real("reference (Hz)", reference, positive=True)
        return f, f"{f:g} Hz"

    def replace(self, **changes: Any) -> "BEC":
        """A new :class:`BEC` with some inputs changed.

        Parameters
        ----------
        **changes
            Any of the constructor's arguments (``n_atoms=...``,
            ``a_s=...``, ``trap_hz=...``, ...).  Setting `length` clears
            `trap_hz` and `reference` and the other way round; setting one
            mass clears the other two.

        Returns
        -------
        BEC
        """
        bad = sorted(set(changes) - set(self._NAMES))
        if bad:
            raise ValueError(f"replace() takes the constructor's arguments "
                             f"({', '.join(self._NAMES)}), got {', '.join(bad)}")
        args = dict(self._inputs)
        if "length" in changes:
            args.update(trap_hz=None, reference="x")
        if "trap_hz" in changes:
            args.update(length=None, trap=None)
        if {"species", "mass", "mass_kg"} & set(changes):
            args.update(species=None, mass=None, mass_kg=None)
        if {"a_dd", "mu"} & set(changes):
            args.update(a_dd=None, mu=None)
        args.update(changes)
        species = args.pop("species")
        return BEC(species, **args)

    # ------------------------------------------------------------ solver input
    def dipolar_kwargs(self, lhy: bool = False) -> Dict[str, Any]:
        """The keyword arguments of :class:`nlsepy.DipolarGPE` this condensate sets.

        Parameters
        ----------
        lhy : bool, optional
            Add ``gqf``, the Lee-Huang-Yang term of quantum fluctuations
            (needs ``a_s >= 0``).

        Returns
        -------
        dict
            ``g``, ``gdd`` (3D couplings in the rescaling of `option`),
            ``trap`` (gamma, nu, lambda) and ``option`` (and ``gqf``).  Add
            the grid, ``dt``, ``geometry`` and ``cutoff``:
            ``nl.DipolarGPE(shape, h, dt, cutoff=10.0, **bec.dipolar_kwargs())``.
        """
        kw = {"g": self.g, "gdd": self.gdd, "trap": tuple(self.trap), "option": self.option}
        if lhy:
            if self.gqf is None:
                raise ValueError(f"lhy=True needs a_s >= 0 (the Lee-Huang-Yang term of a "
                                 f"condensate with attractive contact is not defined), got "
                                 f"a_s = {self.a_s!r}")
            if not math.isfinite(self.gqf):
                raise ValueError(f"a_s = {self.a_s!r}, a_dd = {self.a_dd!r} with n_atoms = "
                                 f"{self.n_atoms!r} give gqf = {self.gqf!r}, not a finite "
                                 f"coupling")
            kw["gqf"] = self.gqf
        return kw

    # ------------------------------------------------------------ converters
    def length_m(self, x: Any) -> Any:
        """Solver lengths (coordinates, ``rms``, ``r_rms``) in metres."""
        return _scale(x, self.length, "x")

    def length_um(self, x: Any) -> Any:
        """Solver lengths (coordinates, ``rms``, ``r_rms``) in micrometres.

        Parameters
        ----------
        x : float or array_like
            Lengths in units of l.

        Returns
        -------
        float or numpy.ndarray
            ``x * l / 1 um``.
        """
        return _scale(x, self.length * 1e6, "x")

    def to_length(self, x_um: Any) -> Any:
        """Micrometres to solver lengths (the inverse of :meth:`length_um`)."""
        return _scale(x_um, 1e-6 / self.length, "x_um")

    def time_s(self, t: Any) -> Any:
        """Solver times (``DipolarGPE.t``, ``frames.t``) in seconds: ``t * option / omega``."""
        return _scale(t, self.time, "t")

    def time_ms(self, t: Any) -> Any:
        """Solver times (``DipolarGPE.t``, ``frames.t``) in milliseconds.

        Parameters
        ----------
        t : float or array_like
            Times of the solver (real time ``t``; steps of ``dt``).

        Returns
        -------
        float or numpy.ndarray
            ``t * option / omega`` in ms.
        """
        return _scale(t, self.time * 1e3, "t")

    def to_time(self, t_ms: Any) -> Any:
        """Milliseconds to solver times (the inverse of :meth:`time_ms`), e.g. for ``dt``."""
        return _scale(t_ms, 1e-3 / self.time, "t_ms")

    def energy_J(self, e: Any) -> Any:
        """Reported energies (``observables()["mu"]``, ``["energy"]``) in joules: ``e hbar omega``."""
        return _scale(e, self.energy, "e")

    def energy_nK(self, e: Any) -> Any:
        """Reported energies (``observables()["mu"]``, ``["energy"]``) as temperatures in nK.

        Parameters
        ----------
        e : float or array_like
            Energies in units of ``hbar omega`` (what
            :meth:`nlsepy.DipolarGPE.observables` reports, whatever the
            option).

        Returns
        -------
        float or numpy.ndarray
            ``e hbar omega / k_B`` in nanokelvin.
        """
        return _scale(e, self.energy / self.constants["k_B"] * 1e9, "e")

    mu_nK = energy_nK

    def energy_hz(self, e: Any) -> Any:
        """Reported energies (``observables()["mu"]``, ``["energy"]``) as frequencies in Hz.

        Parameters
        ----------
        e : float or array_like
            Energies in units of ``hbar omega``.

        Returns
        -------
        float or numpy.ndarray
            ``e hbar omega / h = e omega / 2 pi`` in Hz.
        """
        return _scale(e, self.frequency_hz, "e")

    mu_hz = energy_hz

    def _per_energy_unit(self, unit: str) -> float:
        """Joules per `unit`."""
        if unit == "J":
            return 1.0
        if unit == "nK":
            return self.constants["k_B"] * 1e-9
        if unit == "Hz":
            return self.constants["h"]
        raise ValueError(f"unit must be one of {_ENERGY_UNITS}, got {unit!r}")

    def to_energy(self, e: Any, unit: str = "nK") -> Any:
        """An energy in `unit` in units of ``hbar omega`` (the inverse of ``energy_*``).

        Parameters
        ----------
        e : float or array_like
            Energy in joules, nanokelvin (``e k_B``) or hertz (``e h``).
        unit : {"nK", "Hz", "J"}, optional

        Returns
        -------
        float or numpy.ndarray
        """
        return _scale(e, self._per_energy_unit(unit) / self.energy, "e")

    def to_potential(self, v: Any, unit: str = "nK") -> Any:
        """A potential energy in `unit` in the units of the equation solved.

        The equation of option 2 is twice that of option 1, so a potential
        (``DipolarGPE(V=...)``, ``Obstacle(V0=...)``) of ``v`` in units of
        ``hbar omega`` enters it as ``option * v`` (as DBEC-GP's obstacle
        height).

        Parameters
        ----------
        v : float or array_like
            Potential in nanokelvin, hertz or joules.
        unit : {"nK", "Hz", "J"}, optional

        Returns
        -------
        float or numpy.ndarray
            ``option * v / (hbar omega)``.
        """
        return _scale(v, self.option * self._per_energy_unit(unit) / self.energy, "v")

    # ------------------------------------------------------------ text
    def summary(self) -> str:
        """The condensate, its units and couplings, in lines of text."""
        sp = self.species or f"mass {self.mass_u:.6g} u"
        fx, fy, fz = self.trap_hz
        lines = [
            f"{sp}: N = {self.n_atoms:g}, a_s = {self.a_s:g} a0, a_dd = {self.a_dd:.4g} a0"
            + (f" (mu = {self.mu:g} mu_B)" if self.mu is not None else ""),
            f"trap ({fx:.6g}, {fy:.6g}, {fz:.6g}) Hz; reference omega = 2 pi x "
            f"{self.frequency_hz:.6g} Hz ({self.reference})",
            f"units: length l = {self.length * 1e6:.6g} um, time {self.time * 1e3:.6g} ms, "
            f"energy hbar omega = {self.energy_nK(1.0):.6g} nK = {self.frequency_hz:.6g} Hz",
            f"OPTION = {self.option}: g = {self.g:.6g}, gdd = {self.gdd:.6g}, trap (gamma, nu, "
            f"lambda) = ({self.trap[0]:.6g}, {self.trap[1]:.6g}, {self.trap[2]:.6g}); "
            f"DBEC-GP G0 = {self.g0:.7g}, GDD0 = {self.gdd0:.7g}",
            f"Lee-Huang-Yang: eps_dd = {self.eps_dd:.6g}, "
            + ("gqf not defined (a_s < 0)" if self.gqf is None else f"gqf = {self.gqf:.6g}"
               + ("" if self.q5 is None else f" (Q5 = {self.q5:.6g})")),
            f"constants: {self.constants['source']}",
        ]
        return "\n".join(lines)

    def __repr__(self) -> str:
        sp = repr(self.species) if self.species else f"mass={self.mass_u:.6g}"
        return (f"BEC({sp}, n_atoms={self.n_atoms:g}, a_s={self.a_s:g}, a_dd={self.a_dd:.4g}, "
                f"length={self.length:.6g} m, trap=({self.trap[0]:.4g}, {self.trap[1]:.4g}, "
                f"{self.trap[2]:.4g}), option={self.option}: g={self.g:.6g}, gdd={self.gdd:.6g})")
