"""Hyperfine line strengths and sublevel couplings (nl.mbloch.hyperfine):
the 3j and 6j symbols against closed forms, orthogonality and sympy, the
strengths S_FF' against the formula and Steck's published tables, the
sum rules of the couplings, the layout for nl.MaxwellBloch and a run of it."""

import importlib
import itertools
import math
from fractions import Fraction as Fr

import numpy as np
import pytest

import nlsepy as nl
hfm = importlib.import_module("nlsepy.mbloch.hyperfine")  # nl.mbloch.hyperfine is the function

H = Fr(1, 2)


def _js(top):
    """0, 1/2, ..., top."""
    return [Fr(k, 2) for k in range(int(2 * top) + 1)]


def _ms(j):
    return [-j + k for k in range(int(2 * j) + 1)]


# ------------------------------------------------------------ 3j and 6j
def test_3j_closed_forms():
    # (j j 0; m -m 0) = (-1)^(j-m) / sqrt(2j+1), exactly (signed square)
    for j in _js(4):
        for m in _ms(j):
            sign = -1 if (j - m) % 2 else 1
            assert hfm.wigner_3j(j, j, 0, m, -m, 0, exact=True) == sign * Fr(1, int(2 * j + 1))
    # (j1 j2 J; m1 m2 -M) = (-1)^(j1-j2+M) <j1 m1 j2 m2|J M> / sqrt(2J+1):
    # <1/2 1/2 1/2 1/2|1 1> = 1 gives -1/sqrt(3); <1 1 1 0|1 1> = 1/sqrt(2) gives -1/sqrt(6)
    assert hfm.wigner_3j(H, H, 1, H, H, -1, exact=True) == Fr(-1, 3)
    assert hfm.wigner_3j(1, 1, 1, 1, 0, -1, exact=True) == Fr(-1, 6)
    # <3/2 3/2 3/2 1/2|3 2> = 1/sqrt(2): (-1)^(0+2) / sqrt(7) / sqrt(2)
    assert hfm.wigner_3j("3/2", 1.5, 3, 1.5, "1/2", -2) == pytest.approx(math.sqrt(1 / 14))
    # selection rules give 0
    assert hfm.wigner_3j(1, 1, 3, 0, 0, 0) == 0.0          # triangle
    assert hfm.wigner_3j(1, 1, 1, 1, 1, -1) == 0.0          # m sum
    assert hfm.wigner_3j(1, 1, 1, 0, 0, 0) == 0.0           # odd sum with m = 0
    assert hfm.wigner_3j(1, 1, 2, 2, -2, 0) == 0.0          # |m| > j


def test_6j_closed_form():
    # {a b c; 0 c b} = (-1)^(a+b+c) / sqrt((2b+1)(2c+1)) where (a b c) is a triad
    for a, b, c in itertools.product(_js(3), repeat=3):
        if abs(b - c) <= a <= b + c and (a + b + c).denominator == 1:
            sign = -1 if (a + b + c) % 2 else 1
            want = sign * Fr(1, int((2 * b + 1) * (2 * c + 1)))
            assert hfm.wigner_6j(a, b, c, 0, c, b, exact=True) == want
    assert hfm.wigner_6j(1, 1, 1, 1, 1, 1, exact=True) == Fr(1, 36)
    assert hfm.wigner_6j(1, 1, 3, 1, 1, 1) == 0.0  # (1 1 3) is no triad


def test_3j_6j_orthogonality():
    # sum_{m1 m2} (2 j3 + 1) 3j(j3 m3) 3j(j3' m3) = delta; sum_x (2x+1)(2j+1) 6j 6j = delta
    # (sums of a few dozen doubles: 1e-13 covers the rounding)
    for j1, j2 in itertools.product(_js(2), repeat=2):
        j3s = [j1 + j2 - k for k in range(int(j1 + j2 - abs(j1 - j2)) + 1)]
        for j3, j3p in itertools.product(j3s, repeat=2):
            m3 = -min(j3, j3p)
            s = sum((2 * j3 + 1) * hfm.wigner_3j(j1, j2, j3, m1, m2, m3)
                    * hfm.wigner_3j(j1, j2, j3p, m1, m2, m3)
                    for m1 in _ms(j1) for m2 in _ms(j2))
            assert s == pytest.approx(float(j3 == j3p), abs=1e-13)
    a, b, c, d = Fr(3, 2), Fr(1), Fr(3, 2), Fr(2)
    for j, jp in itertools.product((Fr(1, 2), Fr(3, 2), Fr(5, 2)), repeat=2):
        s = sum((2 * x + 1) * (2 * j + 1) * hfm.wigner_6j(a, b, x, c, d, j)
                * hfm.wigner_6j(a, b, x, c, d, jp) for x in _js(4))
        assert s == pytest.approx(float(j == jp), abs=1e-13)


def test_against_sympy():
    """Every 3j with j <= 3/2 and every 6j with j <= 3/2, exactly, against
    sympy.physics.wigner (optional: skipped when sympy is not installed)."""
    sympy = pytest.importorskip("sympy")
    from sympy.physics.wigner import wigner_3j as s3j, wigner_6j as s6j

    def signed(expr):
        v = sympy.nsimplify(expr)
        sq = sympy.Rational(v * v)
        return Fr(int(sq.p), int(sq.q)) * (-1 if v < 0 else 1)

    sr = lambda x: sympy.Rational(x.numerator, x.denominator)  # noqa: E731
    n3 = 0
    for j1, j2, j3 in itertools.product(_js(Fr(3, 2)), repeat=3):
        for m1, m2 in itertools.product(_ms(j1), _ms(j2)):
            m3 = -m1 - m2
            if abs(m3) > j3 or (j3 - m3).denominator != 1:
                continue
            assert hfm.wigner_3j(j1, j2, j3, m1, m2, m3, exact=True) == \
                signed(s3j(sr(j1), sr(j2), sr(j3), sr(m1), sr(m2), sr(m3))), (j1, j2, j3, m1, m2)
            n3 += 1
    n6 = 0
    for js in itertools.product(_js(Fr(3, 2)), repeat=6):
        mine = hfm.wigner_6j(*js, exact=True)
        j1, j2, j3, j4, j5, j6 = js
        triads = ((j1, j2, j3), (j1, j5, j6), (j4, j2, j6), (j4, j5, j3))
        if not all(abs(a - b) <= c <= a + b and (a + b + c).denominator == 1
                   for a, b, c in triads):
            assert mine == 0, js  # sympy refuses these
            continue
        assert mine == signed(s6j(*map(sr, js))), js
        n6 += 1
    assert n3 == 128 and n6 > 100  # 128: every 3j of j <= 3/2 with m3 allowed


def test_bad_angular_momenta():
    with pytest.raises(ValueError, match="j1 must be an integer or half-integer, got 1.3"):
        hfm.wigner_3j(1.3, 1, 1, 0, 0, 0)
    with pytest.raises(ValueError, match="m2"):
        hfm.wigner_3j(1, 1, 1, 0, "x", 0)
    with pytest.raises(TypeError, match="j4"):
        hfm.wigner_6j(1, 1, 1, True, 1, 1)


# -------------------------------------------------------------- strengths
#: Steck, "Rubidium 87 D Line Data", "Rubidium 85 D Line Data", "Cesium D Line
#: Data", "Sodium D Line Data": the hyperfine transition strength factors S_FF'
STECK = {
    ("87Rb", "D1"): {1: {1: Fr(1, 6), 2: Fr(5, 6)}, 2: {1: Fr(1, 2), 2: Fr(1, 2)}},
    ("87Rb", "D2"): {1: {0: Fr(1, 6), 1: Fr(5, 12), 2: Fr(5, 12)},
                     2: {1: Fr(1, 20), 2: Fr(1, 4), 3: Fr(7, 10)}},
    ("85Rb", "D1"): {2: {2: Fr(2, 9), 3: Fr(7, 9)}, 3: {2: Fr(5, 9), 3: Fr(4, 9)}},
    ("85Rb", "D2"): {2: {1: Fr(3, 10), 2: Fr(7, 18), 3: Fr(14, 45)},
                     3: {2: Fr(5, 63), 3: Fr(5, 18), 4: Fr(9, 14)}},
    ("133Cs", "D1"): {3: {3: Fr(1, 4), 4: Fr(3, 4)}, 4: {3: Fr(7, 12), 4: Fr(5, 12)}},
    ("133Cs", "D2"): {3: {2: Fr(5, 14), 3: Fr(3, 8), 4: Fr(15, 56)},
                      4: {3: Fr(7, 72), 4: Fr(7, 24), 5: Fr(11, 18)}},
}


@pytest.mark.parametrize("key", list(STECK))
def test_strengths_formula_and_published_tables(key):
    species, line = key
    I = hfm.SPECIES[species]
    J, Jp = hfm.LINES[line]
    for F, row in STECK[key].items():
        total = Fr(0)
        for Fp, published in row.items():
            # S_FF' = (2F'+1)(2J+1){J J' 1; F' F I}^2 from the 6j symbol
            six = hfm.wigner_6j(J, Jp, 1, Fp, F, I, exact=True)
            formula = (2 * Fp + 1) * (2 * J + 1) * abs(six)
            assert formula == published, (key, F, Fp)
            assert hfm.strength(species, line, F, Fp) == published
            assert float(formula) == pytest.approx((2 * Fp + 1) * (2 * J + 1) * hfm.wigner_6j(
                J, Jp, 1, Fp, F, I) ** 2, rel=1e-14)
            total += published
        assert total == 1
        hf = nl.mbloch.hyperfine(species, line, F=F)
        assert {int(k): v for k, v in hf.strengths.items() if v} == row


@pytest.mark.parametrize("species", sorted(hfm.SPECIES))
@pytest.mark.parametrize("line", ["D1", "D2"])
def test_strengths_sum_to_one(species, line):
    I = hfm.SPECIES[species]
    J, Jp = hfm.LINES[line]
    for F in (I - H, I + H):
        hf = nl.mbloch.hyperfine(species, line, F=F)
        assert sum(hf.strengths.values()) == 1
        # the F' that F reaches (|F' - F| <= 1) are the default excited levels
        assert sorted(hf.F_prime) == [f for f, s in sorted(hf.strengths.items()) if s]


# ---------------------------------------------------------------- couplings
@pytest.mark.parametrize("species,line,F", [("87Rb", "D2", 2), ("87Rb", "D2", 1),
                                            ("87Rb", "D1", 1), ("85Rb", "D2", 3),
                                            ("133Cs", "D2", 4), ("133Cs", "D1", 3),
                                            ("23Na", "D1", 2), ("39K", "D2", 1)])
def test_sum_rules(species, line, F):
    """Exact sum rules of the couplings c (units of <J||er||J'>):
    from every ground sublevel sum_{F' mF' q} c^2 = 1 and, for pi light,
    1/3 (J = 1/2); into every excited sublevel sum_{mF q} c^2 summed over
    both ground F is (2J+1)/(2J'+1) (equal decay rates); per F -> F' block
    sum_{mF mF' q} c^2 = (2F+1) S_FF'."""
    hf = nl.mbloch.hyperfine(species, line, F=F)
    c2 = [[abs(x) for x in row] for row in hf.coupling_squared]
    for m in range(hf.n_g):
        assert sum(c2[m]) == 1
    pi = nl.mbloch.hyperfine(species, line, F=F, polarisation="pi")
    for m in range(pi.n_g):
        assert sum(abs(x) for x in pi.coupling_squared[m]) == Fr(1, 3)
    for Fp in hf.F_prime:
        cols = [n for n, (f, _) in enumerate(hf.excited) if f == Fp]
        assert sum(c2[m][n] for m in range(hf.n_g) for n in cols) == \
            (2 * hf.F + 1) * hf.strengths[Fp]
    # into each excited sublevel, from both ground levels F = I -/+ 1/2
    I, (J, Jp) = hfm.SPECIES[species], hfm.LINES[line]
    into = {}
    for Fg in (I - H, I + H):
        both = nl.mbloch.hyperfine(species, line, F=Fg)
        for n, lev in enumerate(both.excited):
            into[lev] = into.get(lev, 0) + sum(abs(both.coupling_squared[m][n])
                                               for m in range(both.n_g))
    assert set(into.values()) == {(2 * J + 1) / (2 * Jp + 1)}
    assert np.allclose(hf.coupling ** 2, np.array(c2, dtype=float), rtol=1e-15, atol=0)


def test_layout_for_the_model():
    """Level order (ground mF ascending; excited blocks of ascending F', mF'
    ascending), the mode of each (F', q) and where the couplings sit."""
    hf = nl.mbloch.hyperfine("87Rb", "D2", F=2, F_prime=(3, 1, 2))
    assert (hf.n_g, hf.n_e) == (5, 15)
    assert hf.F_prime == (1, 2, 3) and hf.polarisations == (-1, 0, 1)
    assert hf.ground == tuple((Fr(2), Fr(m)) for m in range(-2, 3))
    assert hf.excited[:3] == tuple((Fr(1), Fr(m)) for m in range(-1, 2))
    assert hf.excited[-1] == (Fr(3), Fr(3))
    offsets = {1: 0, 2: 3, 3: 8}
    for (Fp, q), l in hf.mode_of.items():
        assert l == offsets[int(Fp)] + int(Fp) - 2 + q
        assert hf.mode(Fp, {-1: "sigma-", 0: "pi", 1: "sigma+"}[q]) == l
    assert hf.modes == (-2, 10)
    nz = np.argwhere(hf.coupling != 0)
    for m, n in nz:
        (F, mF), (Fp, mFp) = hf.ground[m], hf.excited[n]
        assert mFp - mF in (-1, 0, 1)
        assert hf.mode(Fp, int(mFp - mF)) == n - m
    allowed = [(m, n) for m, (F, mF) in enumerate(hf.ground) for n, (Fp, mFp) in
               enumerate(hf.excited) if hfm.wigner_3j(Fp, 1, F, -mFp, mFp - mF, mF) != 0]
    assert sorted(map(tuple, nz)) == allowed  # every dipole-allowed pair, no other
    kw = hf.model_kwargs()
    assert set(kw) == {"n_g", "n_e", "modes", "F"} and kw["F"].shape == (5, 15)
    assert hf.level(2, -2) == 0 and hf.level(3, 3) == 19
    assert hf.labels()[0] == "F=2 mF=-2" and hf.labels()[-1] == "F'=3 mF'=3"
    # one polarisation: only its pairs
    sp = nl.mbloch.hyperfine("87Rb", "D2", F=2, F_prime=3, polarisation=+1)
    assert sp.modes == (2, 2) and sp.coupling[4, 6] == pytest.approx(math.sqrt(0.5), rel=1e-15)
    assert np.count_nonzero(sp.coupling) == 5
    # the half-integer levels of 85Rb's neighbours take strings and floats
    assert nl.mbloch.hyperfine("85Rb", "D1", F="3", F_prime=2.0).F_prime == (2,)


def test_bad_input():
    with pytest.raises(ValueError, match="species must be one of"):
        nl.mbloch.hyperfine("7Li")
    with pytest.raises(ValueError, match="line must be one of"):
        nl.mbloch.hyperfine("87Rb", "D3")
    with pytest.raises(ValueError, match=r"F=3 is not a hyperfine level of the ground state "
                                         r"of 87Rb D2; F is one of \[1, 2\]"):
        nl.mbloch.hyperfine("87Rb", "D2", F=3)
    with pytest.raises(ValueError, match=r"F_prime=3 is not a hyperfine level of the excited"):
        nl.mbloch.hyperfine("87Rb", "D1", F=2, F_prime=3)
    with pytest.raises(ValueError, match="polarisation must be -1, 0, \\+1"):
        nl.mbloch.hyperfine("87Rb", "D2", F=2, polarisation="circular")
    with pytest.raises(ValueError, match="polarisation must be -1, 0, \\+1"):
        nl.mbloch.hyperfine("87Rb", "D2", F=2, polarisation=2)
    # F=1 -> F'=0, 1 with sigma+ and sigma-: in either block order some (F', q) share a mode
    with pytest.raises(ValueError, match=r"F'=\[0, 1\] with polarisations \[-1, 0, 1\] cannot"):
        nl.mbloch.hyperfine("87Rb", "D2", F=1, F_prime=(0, 1))
    # with F'=2 as well a block order exists: 0, 2, 1
    assert nl.mbloch.hyperfine("87Rb", "D2", F=1).F_prime == (0, 2, 1)
    assert nl.mbloch.hyperfine("87Rb", "D2", F=1, F_prime=(0, 1), polarisation="pi").n_e == 4
    with pytest.raises(ValueError, match="not coupled here"):
        nl.mbloch.hyperfine("87Rb", "D2", F=2, F_prime=3, polarisation="pi").mode(3, 1)


# ----------------------------------------------------------------- a run
def test_run_pi_pulse_on_the_d2_manifold():
    """87Rb D2 F=2 -> F'=1,2,3 (5 + 15 sublevels), pi light: the same pulse
    on the three pi modes drives each ground sublevel |2 m> to the bright
    superposition of |F' m> with Rabi frequency sqrt(sum c^2) eps =
    eps / sqrt(3) (the pi sum rule), so an area pi sqrt(3) inverts every
    atom; the excited populations split as c^2 / (1/3).  One atom per
    ground sublevel (weights 1/5), beta tiny so the field stays the input.
    RK4 error at h_t = 0.02: measured 2e-12 (the norm monitor, 1.9e-12,
    bounds it); 1e-9 leaves room across machines."""
    hf = nl.mbloch.hyperfine("87Rb", "D2", F=2, polarisation="pi")
    n_lev = hf.n_g + hf.n_e
    psi0 = np.eye(hf.n_g, n_lev)
    mb = nl.MaxwellBloch(**hf.model_kwargs(), h_t=0.02, n_t=1201, n_atoms=hf.n_g,
                         line=(np.zeros(hf.n_g), np.full(hf.n_g, 1 / hf.n_g)),
                         initial_state=psi0, beta=1e-9, backend="cpu")
    e0 = nl.mbloch.sech_pulse(mb.t, 1.0, 12.0, area=math.pi * math.sqrt(3))
    theta = mb.h_t * (e0.sum() - 0.5 * (e0[0] + e0[-1]))  # the area the grid holds
    out = mb.run({hf.mode(Fp, 0): e0 for Fp in hf.F_prime}, h_z=1.0, n_z=1)
    p = out.populations[0, -1]
    excited = math.sin(theta / (2 * math.sqrt(3))) ** 2
    assert p[hf.n_g:].sum() == pytest.approx(excited, abs=1e-9)
    assert excited > 1 - 1e-9
    want = np.zeros(hf.n_e)
    for m in range(hf.n_g):
        want += 3 * hf.coupling[m] ** 2 * excited / hf.n_g
    np.testing.assert_allclose(p[hf.n_g:], want, atol=1e-9)
    assert out.norm_deviation < 1e-9
