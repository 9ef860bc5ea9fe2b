"""Hyperfine line strengths and sublevel couplings of the alkali D lines
(``nl.mbloch.hyperfine``), from Wigner 3j and 6j symbols in exact rational
arithmetic.

Angular momentum algebra (Racah's closed forms).  The 3j symbol is

.. math::

    \\begin{pmatrix} j_1 & j_2 & j_3\\\\ m_1 & m_2 & m_3 \\end{pmatrix}
    = (-1)^{j_1 - j_2 - m_3}\\sqrt{\\Delta(j_1 j_2 j_3)
      \\textstyle\\prod_i (j_i + m_i)!(j_i - m_i)!}
    \\sum_k \\frac{(-1)^k}{k!\\,(j_3 - j_2 + k + m_1)!\\,(j_3 - j_1 + k - m_2)!
      \\,(j_1 + j_2 - j_3 - k)!\\,(j_1 - k - m_1)!\\,(j_2 - k + m_2)!}

for :math:`m_1 + m_2 + m_3 = 0` (else 0), with the triangle coefficient
:math:`\\Delta(abc) = (a+b-c)!(a-b+c)!(-a+b+c)!/(a+b+c+1)!`; the 6j symbol is

.. math::

    \\begin{Bmatrix} j_1 & j_2 & j_3\\\\ j_4 & j_5 & j_6 \\end{Bmatrix}
    = \\sqrt{\\Delta(j_1 j_2 j_3)\\Delta(j_1 j_5 j_6)\\Delta(j_4 j_2 j_6)
      \\Delta(j_4 j_5 j_3)}
    \\sum_t \\frac{(-1)^t (t + 1)!}{\\prod_{a}(t - a)!\\,\\prod_{b}(b - t)!}

with a over the four triad sums (:math:`j_1+j_2+j_3`, :math:`j_1+j_5+j_6`,
:math:`j_4+j_2+j_6`, :math:`j_4+j_5+j_3`) and b over the three sums
:math:`j_1+j_2+j_4+j_5`, :math:`j_2+j_3+j_5+j_6`, :math:`j_3+j_1+j_6+j_4`
(Edmonds, *Angular Momentum in Quantum Mechanics*, eqs. 3.7.3 and 6.3.7).
Both are a rational number times the square root of one, so they are kept
exactly as a *signed square*: the Fraction ``x`` with symbol
:math:`= \\mathrm{sign}(x)\\sqrt{|x|}`.

D-line couplings (Steck, *Alkali D Line Data*: "Rubidium 87 D Line Data",
"Rubidium 85 D Line Data", "Cesium D Line Data", "Sodium D Line Data",
sections "Hyperfine structure" and "Interaction with light", the
hyperfine transition strength factors; Tiecke, "Properties of Potassium",
for ³⁹K).  The ground state is :math:`n^2S_{1/2}` (J = 1/2), the D1 line
goes to J' = 1/2 and the D2 line to J' = 3/2; F = I ± 1/2 and
:math:`|J' - I| \\le F' \\le J' + I`.  The relative strength of F → F' is

.. math::

    S_{FF'} = (2F' + 1)(2J + 1)
              \\begin{Bmatrix} J & J' & 1\\\\ F' & F & I \\end{Bmatrix}^2,
    \\qquad \\sum_{F'} S_{FF'} = 1,

and the coupling of ground sublevel :math:`|F m_F\\rangle` to excited
:math:`|F' m_F'\\rangle` by light of polarisation q
(:math:`m_F' = m_F + q`) is, in units of the reduced matrix element
:math:`\\langle J\\|e r\\|J'\\rangle` (Wigner-Eckart theorem, then the
decoupling of the nuclear spin),

.. math::

    c = (-1)^{F' - m_F'}
        \\begin{pmatrix} F' & 1 & F\\\\ -m_F' & q & m_F \\end{pmatrix}
        (-1)^{J' + I + F + 1}\\sqrt{(2F + 1)(2F' + 1)(2J + 1)}
        \\begin{Bmatrix} J' & F' & I\\\\ F & J & 1 \\end{Bmatrix},

so that :math:`\\sum_{F', m_F', q} c^2 = 1` from every ground sublevel
and :math:`\\sum_{m_F, m_F', q} c^2 = (2F + 1) S_{FF'}`; :math:`|c|` is
Steck's :math:`|\\langle F m_F|e r_q|F' m_F'\\rangle| / \\langle J\\|e r\\|J'\\rangle`
(e.g. :math:`1/\\sqrt2` on the ⁸⁷Rb D2 cycling transition).

The couplings are laid out as :class:`nlsepy.MaxwellBloch` takes them
(``n_g``, ``n_e``, ``modes``, ``F``): ground levels ``m = m_F + F``, excited
levels in blocks of ascending F', ``n = o(F') + m_F' + F'`` with
:math:`o(F')` the levels of the blocks before (where two (F', q) would then
share a mode, as F' = 0 and 1 do with σ⁺ and σ⁻ together, the first
permutation of the blocks in lexicographic order that gives every (F', q) a
mode of its own: F' = 0, 2, 1 for ⁸⁷Rb D2 F = 1).  The pair (m, n) is then
coupled by mode :math:`l = n - m = o(F') + F' - F + q`: for one F' the three
modes are the polarisation components σ⁻, π, σ⁺ of the light, and the
model's level spacings ``kappa_g`` and ``kappa_e`` are linear Zeeman shifts
per unit of :math:`m_F` (:math:`g_F\\mu_B B/\\hbar`).  With several F' each
(F', q) is a mode of its own: in the model each mode is a separate field
driving only its own pairs and the excited levels keep one spacing, so the
F' are not split by their hyperfine energies.  Such a run treats every
hyperfine line as driven by its own field component; the matrices, the
strengths and the level bookkeeping are exact either way.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np

__all__ = ["hyperfine", "Hyperfine", "SPECIES", "LINES", "POLARISATIONS", "wigner_3j",
           "wigner_6j", "strength"]

#: nuclear spin I of each species (Steck's Alkali D Line Data; Tiecke for ³⁹K)
SPECIES: Dict[str, Fraction] = {"87Rb": Fraction(3, 2), "85Rb": Fraction(5, 2),
                                "133Cs": Fraction(7, 2), "23Na": Fraction(3, 2),
                                "39K": Fraction(3, 2)}
#: the D lines: J of the ground state and J' of the excited state
LINES: Dict[str, Tuple[Fraction, Fraction]] = {"D1": (Fraction(1, 2), Fraction(1, 2)),
                                               "D2": (Fraction(1, 2), Fraction(3, 2))}
#: polarisations by name: q = m_F' - m_F
POLARISATIONS: Dict[str, int] = {"sigma-": -1, "pi": 0, "sigma+": 1}

AngMom = Union[int, float, str, Fraction]


# ----------------------------------------------------------------- numbers
def _j(value: Any, name: str) -> Fraction:
    """`value` (int, half-integer float, "3/2" or Fraction) as an exact
    Fraction with 2 value an integer; ValueError naming `name` otherwise."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer or half-integer, got {value!r}")
    try:
        x = Fraction(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        raise ValueError(f"{name} must be an integer or half-integer, got {value!r}") from None
    if (2 * x).denominator != 1:
        raise ValueError(f"{name} must be an integer or half-integer, got {value!r}")
    return x


def _int(x: Fraction) -> int:
    return x.numerator if x.denominator == 1 else None  # type: ignore[return-value]


def _fact(x: Fraction) -> int:
    return math.factorial(_int(x))


def _triangle(a: Fraction, b: Fraction, c: Fraction) -> Optional[Fraction]:
    """Delta(abc) of Racah's formulas, or None when a, b, c break the
    triangle rule or do not sum to an integer."""
    if _int(a + b + c) is None or c < abs(a - b) or c > a + b:
        return None
    return Fraction(_fact(a + b - c) * _fact(a - b + c) * _fact(-a + b + c), _fact(a + b + c + 1))


def _signed(prefactor: Fraction, total: Fraction, phase: int) -> Fraction:
    """The signed square of ``phase * sqrt(prefactor) * total``."""
    value = prefactor * total * total
    return value if phase * total >= 0 else -value


def wigner_3j(j1: AngMom, j2: AngMom, j3: AngMom, m1: AngMom, m2: AngMom, m3: AngMom,
              exact: bool = False) -> Union[float, Fraction]:
    """The Wigner 3j symbol (j1 j2 j3; m1 m2 m3) by Racah's formula.

    Parameters
    ----------
    j1, j2, j3, m1, m2, m3 : int, float, str or fractions.Fraction
        Integers or half-integers (``1.5``, ``"3/2"``, ``Fraction(3, 2)``).
    exact : bool, optional
        Return the exact *signed square* instead of a float: the Fraction
        ``x`` with symbol ``= sign(x) * sqrt(|x|)``.

    Returns
    -------
    float or fractions.Fraction
        0 where a selection rule fails (triangle, ``|m| <= j``, ``j - m``
        integral, ``m1 + m2 + m3 = 0``).
    """
    js = [_j(v, n) for v, n in ((j1, "j1"), (j2, "j2"), (j3, "j3"))]
    ms = [_j(v, n) for v, n in ((m1, "m1"), (m2, "m2"), (m3, "m3"))]
    x = _three_j(*js, *ms)
    return x if exact else _value(x)


def _three_j(j1: Fraction, j2: Fraction, j3: Fraction, m1: Fraction, m2: Fraction,
             m3: Fraction) -> Fraction:
    if m1 + m2 + m3 != 0:
        return Fraction(0)
    for j, m in ((j1, m1), (j2, m2), (j3, m3)):
        if j < 0 or abs(m) > j or _int(j - m) is None:
            return Fraction(0)
    delta = _triangle(j1, j2, j3)
    if delta is None:
        return Fraction(0)
    pre = delta
    for j, m in ((j1, m1), (j2, m2), (j3, m3)):
        pre *= _fact(j + m) * _fact(j - m)
    k_min = _int(max(0, j2 - j3 - m1, j1 - j3 + m2))
    k_max = _int(min(j1 + j2 - j3, j1 - m1, j2 + m2))
    total = Fraction(0)
    for k in range(k_min, k_max + 1):
        den = (math.factorial(k) * _fact(j3 - j2 + k + m1) * _fact(j3 - j1 + k - m2)
               * _fact(j1 + j2 - j3 - k) * _fact(j1 - k - m1) * _fact(j2 - k + m2))
        total += Fraction((-1) ** k, den)
    phase = -1 if _int(j1 - j2 - m3) % 2 else 1
    return _signed(pre, total, phase)


def wigner_6j(j1: AngMom, j2: AngMom, j3: AngMom, j4: AngMom, j5: AngMom, j6: AngMom,
              exact: bool = False) -> Union[float, Fraction]:
    """The Wigner 6j symbol {j1 j2 j3; j4 j5 j6} by Racah's formula.

    Parameters
    ----------
    j1, j2, j3, j4, j5, j6 : int, float, str or fractions.Fraction
        Integers or half-integers.
    exact : bool, optional
        Return the exact signed square (see :func:`wigner_3j`).

    Returns
    -------
    float or fractions.Fraction
        0 where a triad (j1 j2 j3), (j1 j5 j6), (j4 j2 j6), (j4 j5 j3)
        breaks the triangle rule or has a half-integral sum.
    """
    js = [_j(v, f"j{i + 1}") for i, v in enumerate((j1, j2, j3, j4, j5, j6))]
    x = _six_j(*js)
    return x if exact else _value(x)


def _six_j(j1: Fraction, j2: Fraction, j3: Fraction, j4: Fraction, j5: Fraction,
           j6: Fraction) -> Fraction:
    if min(j1, j2, j3, j4, j5, j6) < 0:
        return Fraction(0)
    triads = ((j1, j2, j3), (j1, j5, j6), (j4, j2, j6), (j4, j5, j3))
    pre = Fraction(1)
    for t in triads:
        d = _triangle(*t)
        if d is None:
            return Fraction(0)
        pre *= d
    a = [sum(t) for t in triads]
    b = [j1 + j2 + j4 + j5, j2 + j3 + j5 + j6, j3 + j1 + j6 + j4]
    total = Fraction(0)
    for t in range(_int(max(a)), _int(min(b)) + 1):
        den = 1
        for x in a:
            den *= _fact(t - x)
        for x in b:
            den *= _fact(x - t)
        total += Fraction((-1) ** t * math.factorial(t + 1), den)
    return _signed(pre, total, 1)


def _value(x: Fraction) -> float:
    return math.copysign(math.sqrt(abs(x)), x) if x else 0.0


# ---------------------------------------------------------------- species
def _species_line(species: Any, line: Any) -> Tuple[str, str, Fraction, Fraction, Fraction]:
    if not isinstance(species, str) or species not in SPECIES:
        raise ValueError(f"species must be one of {sorted(SPECIES)}, got {species!r}")
    if not isinstance(line, str) or line.upper() not in LINES:
        raise ValueError(f"line must be one of {sorted(LINES)}, got {line!r}")
    line = line.upper()
    J, Jp = LINES[line]
    return species, line, SPECIES[species], J, Jp


def _levels(I: Fraction, J: Fraction) -> Tuple[Fraction, ...]:
    """The F of a level J with nuclear spin I: |J - I| .. J + I."""
    lo = abs(J - I)
    return tuple(lo + k for k in range(_int(J + I - lo) + 1))


def _pick(value: Any, allowed: Tuple[Fraction, ...], name: str, where: str) -> Fraction:
    x = _j(value, name)
    if x not in allowed:
        raise ValueError(f"{name}={value!r} is not a hyperfine level of {where}; "
                         f"{name} is one of {[_show(a) for a in allowed]}")
    return x


def _show(x: Fraction) -> Union[int, str]:
    return x.numerator if x.denominator == 1 else str(x)


def strength(species: str, line: str, F: AngMom, F_prime: AngMom) -> Fraction:
    """The relative hyperfine transition strength factor
    :math:`S_{FF'} = (2F' + 1)(2J + 1)\\{J\\,J'\\,1; F'\\,F\\,I\\}^2`, exactly.

    Parameters
    ----------
    species : str
        One of :data:`SPECIES` ("87Rb", "85Rb", "133Cs", "23Na", "39K").
    line : {"D1", "D2"}
        The D line.
    F, F_prime : int, float, str or fractions.Fraction
        The ground and excited hyperfine levels.

    Returns
    -------
    fractions.Fraction
        :math:`S_{FF'}`; summed over F' it is 1.

    Examples
    --------
    >>> from nlsepy.mbloch.hyperfine import strength
    >>> strength("87Rb", "D2", 2, 3)
    Fraction(7, 10)
    """
    species, line, I, J, Jp = _species_line(species, line)
    where = f"{species} {line}"
    F = _pick(F, _levels(I, J), "F", f"the ground state of {where}")
    Fp = _pick(F_prime, _levels(I, Jp), "F_prime", f"the excited state of {where}")
    return (2 * Fp + 1) * (2 * J + 1) * abs(_six_j(J, Jp, Fraction(1), Fp, F, I))


def _coupling(I: Fraction, J: Fraction, Jp: Fraction, F: Fraction, mF: Fraction,
              Fp: Fraction, mFp: Fraction) -> Fraction:
    """The signed square of c(F mF -> F' mF') (module docstring), exactly."""
    q = mFp - mF
    three = _three_j(Fp, Fraction(1), F, -mFp, q, mF)
    six = _six_j(Jp, Fp, I, F, J, Fraction(1))
    phase = 1 if (_int(Fp - mFp) + _int(Jp + I + F + 1)) % 2 == 0 else -1
    # a product of signed squares is the signed square of the product
    return phase * (2 * F + 1) * (2 * Fp + 1) * (2 * J + 1) * three * six


# ---------------------------------------------------------------- system
@dataclass(frozen=True, eq=False)
class Hyperfine:
    """The hyperfine sublevels of one D-line transition F → F′ and their
    couplings, laid out for :class:`nlsepy.MaxwellBloch` (made by
    :func:`nlsepy.mbloch.hyperfine`, whose notes give the layout).

    Attributes
    ----------
    species, line : str
        E.g. "87Rb", "D2".
    I, J, J_prime, F : fractions.Fraction
        Nuclear spin, the ground and excited J, the ground hyperfine level.
    F_prime : tuple of fractions.Fraction
        The excited hyperfine levels in the order of their blocks of
        excited levels (ascending, see :func:`nlsepy.mbloch.hyperfine`).
    polarisations : tuple of int
        The q = m_F' - m_F coupled (ascending).
    strengths : dict
        ``{F': S_FF'}`` (Fractions) for every F' of the line, so that
        they sum to 1 (not only those in `F_prime`).
    ground, excited : tuple of (Fraction, Fraction)
        ``(F, m_F)`` of ground level m and ``(F', m_F')`` of excited level n.
    coupling : numpy.ndarray
        ``(n_g, n_e)``: :math:`c` of the pair (m, n) for the chosen
        polarisations, 0 elsewhere (read-only): the ``F`` of the model.
    coupling_squared : tuple of tuple of Fraction
        The exact signed squares of `coupling`.
    mode_of : dict
        ``{(F', q): l}``, the mode that couples F → F' with polarisation q.
    """

    species: str
    line: str
    I: Fraction
    J: Fraction
    J_prime: Fraction
    F: Fraction
    F_prime: Tuple[Fraction, ...]
    polarisations: Tuple[int, ...]
    strengths: Dict[Fraction, Fraction]
    ground: Tuple[Tuple[Fraction, Fraction], ...]
    excited: Tuple[Tuple[Fraction, Fraction], ...]
    coupling: np.ndarray = field(repr=False)
    coupling_squared: Tuple[Tuple[Fraction, ...], ...] = field(repr=False)
    mode_of: Dict[Tuple[Fraction, int], int] = field(repr=False)

    @property
    def n_g(self) -> int:
        """Ground sublevels, 2F + 1."""
        return len(self.ground)

    @property
    def n_e(self) -> int:
        """Excited sublevels, the sum of 2F' + 1."""
        return len(self.excited)

    @property
    def modes(self) -> Tuple[int, int]:
        """``(l_min, l_max)`` spanning every mode of `mode_of`."""
        ls = self.mode_of.values()
        return min(ls), max(ls)

    def mode(self, F_prime: AngMom, q: Union[int, str]) -> int:
        """The mode l that couples F → `F_prime` with polarisation `q`."""
        key = (_j(F_prime, "F_prime"), _polarisation(q)[0])
        if key not in self.mode_of:
            raise ValueError(f"(F_prime, q) = ({F_prime!r}, {q!r}) is not coupled here: "
                             f"F_prime in {[_show(f) for f in self.F_prime]}, q in "
                             f"{list(self.polarisations)}")
        return self.mode_of[key]

    def level(self, F: AngMom, mF: AngMom) -> int:
        """The model's level index of sublevel ``|F m_F>``: ground levels
        first (0 .. n_g - 1), then the excited ones (n_g .. n_g + n_e - 1),
        as in the populations and the initial state of the model."""
        key = (_j(F, "F"), _j(mF, "mF"))
        for i, lev in enumerate(self.ground + self.excited):
            if lev == key:
                return i
        raise ValueError(f"|F={F!r}, mF={mF!r}> is not a sublevel of this system")

    def model_kwargs(self) -> Dict[str, Any]:
        """``n_g``, ``n_e``, ``modes`` and ``F`` for :class:`nlsepy.MaxwellBloch`."""
        return {"n_g": self.n_g, "n_e": self.n_e, "modes": self.modes,
                "F": np.array(self.coupling)}

    def labels(self) -> Tuple[str, ...]:
        """A label per model level, e.g. ``"F=2 mF=-2"``, ``"F'=3 mF'=1"``."""
        g = [f"F={_show(f)} mF={_show(m)}" for f, m in self.ground]
        e = [f"F'={_show(f)} mF'={_show(m)}" for f, m in self.excited]
        return tuple(g + e)


def _polarisation(q: Any) -> Tuple[int, ...]:
    if q is None:
        return (-1, 0, 1)
    if isinstance(q, str):
        if q.lower() not in POLARISATIONS:
            raise ValueError(f"polarisation must be -1, 0, +1 or one of "
                             f"{sorted(POLARISATIONS)}, got {q!r}")
        return (POLARISATIONS[q.lower()],)
    if isinstance(q, (list, tuple)):
        qs = sorted({p for item in q for p in _polarisation(item)})
        if not qs:
            raise ValueError("polarisation must name at least one of -1, 0, +1")
        return tuple(qs)
    if isinstance(q, bool) or not isinstance(q, (int, np.integer)) or q not in (-1, 0, 1):
        raise ValueError(f"polarisation must be -1, 0, +1 or one of "
                         f"{sorted(POLARISATIONS)}, got {q!r}")
    return (int(q),)


def _modes(F: Fraction, order: Tuple[Fraction, ...], qs: Tuple[int, ...]
           ) -> Optional[Dict[Tuple[Fraction, int], int]]:
    """``{(F', q): l}`` for the excited blocks in `order`, or None when two
    (F', q) fall on the same mode."""
    modes: Dict[Tuple[Fraction, int], int] = {}
    offset = 0
    for fp in order:
        for q in qs:
            modes[(fp, q)] = offset + _int(fp - F) + q
        offset += _int(2 * fp + 1)
    return modes if len(set(modes.values())) == len(modes) else None


def _block_order(F: Fraction, fps: Tuple[Fraction, ...], qs: Tuple[int, ...]
                 ) -> Tuple[Tuple[Fraction, ...], Dict[Tuple[Fraction, int], int]]:
    """The excited blocks in ascending F', or else the first permutation of
    them (in lexicographic order) whose (F', q) all fall on modes of their
    own (an F' = 0 block next to F' = 1 with σ⁺ and σ⁻ needs one)."""
    for order in itertools.permutations(fps):
        modes = _modes(F, order, qs)
        if modes is not None:
            return order, modes
    raise ValueError(f"the excited levels F'={[_show(f) for f in fps]} with polarisations "
                     f"{list(qs)} cannot each have a mode of their own in any block order: ask "
                     f"for fewer polarisations or F' levels")


def hyperfine(species: str = "87Rb", line: str = "D2", F: AngMom = 2,
              F_prime: Optional[Union[AngMom, Sequence[AngMom]]] = None,
              polarisation: Optional[Union[int, str, Sequence[Union[int, str]]]] = None
              ) -> Hyperfine:
    """The sublevels of an alkali D-line transition F → F′, their
    strengths S_FF′ and couplings, laid out for :class:`nlsepy.MaxwellBloch`.

    Parameters
    ----------
    species : str, optional
        "87Rb", "85Rb", "133Cs", "23Na" or "39K" (nuclear spins from Steck's
        Alkali D Line Data; Tiecke for ³⁹K).
    line : {"D1", "D2"}, optional
        J = 1/2 → J' = 1/2 (D1) or 3/2 (D2).
    F : int, float, str or fractions.Fraction, optional
        The ground hyperfine level (I ± 1/2).
    F_prime : level or sequence of levels, optional
        The excited hyperfine level(s); default every F' that F couples to
        (|F' - F| <= 1).
    polarisation : int, str or sequence, optional
        q = m_F' - m_F: -1, 0, +1 or "sigma-", "pi", "sigma+", or several;
        default all three.

    Returns
    -------
    Hyperfine
        ``model_kwargs()`` gives ``n_g``, ``n_e``, ``modes`` and ``F`` of
        the model; ``strengths``, ``coupling``, ``mode(F', q)``,
        ``level(F, mF)`` and ``labels()`` describe them.

    Raises
    ------
    ValueError
        An unknown species, line or polarisation, or a level that the
        line does not have.

    Notes
    -----
    Levels: ground ``m = m_F + F``; excited in blocks of F' (in the order
    of ``F_prime``: ascending, unless two (F', q) would share a mode, then
    the first permutation that keeps them apart), ``m_F'`` ascending in a
    block.  ``level(F, mF)`` gives an index, ``labels()`` names them all.

    Examples
    --------
    >>> import nlsepy as nl
    >>> hf = nl.mbloch.hyperfine("87Rb", "D2", F=2, F_prime=(1, 2, 3), polarisation="sigma+")
    >>> hf.n_g, hf.n_e, [str(hf.strengths[f]) for f in hf.F_prime]
    (5, 15, ['1/20', '1/4', '7/10'])
    >>> mb = nl.MaxwellBloch(**hf.model_kwargs(), h_t=0.05, n_t=64, line=("single", 0.0))
    """
    species, line, I, J, Jp = _species_line(species, line)
    where = f"{species} {line}"
    F = _pick(F, _levels(I, J), "F", f"the ground state of {where}")
    all_fp = _levels(I, Jp)
    if F_prime is None:
        fps = tuple(f for f in all_fp if abs(f - F) <= 1 and not (f == 0 and F == 0))
    else:
        items = F_prime if isinstance(F_prime, (list, tuple)) else (F_prime,)
        if not items:
            raise ValueError("F_prime must name at least one excited level")
        fps = tuple(sorted({_pick(f, all_fp, "F_prime", f"the excited state of {where}")
                            for f in items}))
    qs = _polarisation(polarisation)
    strengths = {fp: (2 * fp + 1) * (2 * J + 1) * abs(_six_j(J, Jp, Fraction(1), fp, F, I))
                 for fp in all_fp}
    ground = tuple((F, -F + k) for k in range(_int(2 * F) + 1))
    order, modes = _block_order(F, fps, qs)
    excited = tuple((fp, -fp + k) for fp in order for k in range(_int(2 * fp) + 1))
    exact = []
    for f, m in ground:
        exact.append(tuple(_coupling(I, J, Jp, f, m, fp, mp) if mp - m in qs else Fraction(0)
                           for fp, mp in excited))
    coupling = np.array([[_value(x) for x in row] for row in exact], dtype=np.float64)
    coupling.setflags(write=False)
    return Hyperfine(species=species, line=line, I=I, J=J, J_prime=Jp, F=F, F_prime=order,
                     polarisations=qs, strengths=strengths, ground=ground, excited=excited,
                     coupling=coupling, coupling_squared=tuple(exact), mode_of=modes)
