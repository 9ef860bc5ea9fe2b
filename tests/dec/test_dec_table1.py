"""Table 1 of source 001: the dual edge lengths of the six grids scaled to
equal operation counts.

Where the table's numbers come from.  Source 001's grid generator (the
program published with the paper; docs/models/dec.md, "Table 1") scales
the blocks by fixed lattice constants relative to the cubic grid's,
AUTHORS_SCALE below, and prints one dual edge per grid: the table is
those constants times one of the block's dual edges, to its two printed
digits (A15 and Z have edges of several lengths; the printed one is the
generator's first face's, which is one of them).  The one exception is
C15: 5.39 x 0.12759 = 0.6877 prints as 0.69, the table has 0.68, one
unit in the last digit.

What section 5.1 states: each grid scaled so that the arithmetic per unit
of time, sum_i #J^i / dt (#J^i = faces of cell i + 1, dt the bound of
eq. 11 with the trap's largest value on the domain), is 6e9 on the cuboid
of eq. 15 of the (lambda, g, kappa) = (1, 300, 10) vortex.  Derived here
(an operation count of its own, checked against nl.dec.grids), it gives
lattice constants 2.409 (FCC), 2.289 (BCC), 3.637 (A15), 5.153 (C15),
3.579 (Z) against the generator's 2.51, 2.27, 3.91, 5.39, 3.70: BCC
within 1 %, the others 3-7 % smaller, because the generator fixed its
constants from a count of its own (docs/models/dec.md: the face count
times the first face's Hodge ratio in place of the largest diagonal).
So the derivation meets Table 1 where the two counts agree (cubic, BCC:
0.809 against 0.80) and is checked to its own three digits elsewhere
(FCC 1.043 against 1.09, C15's shortest 0.657 against 0.68).
"""

import numpy as np
import pytest

pytest.importorskip("scipy")

import nlsepy as nl  # noqa: E402

TABLE1 = {"cubic": 1.0, "fcc": 1.09, "bcc": 0.80, "a15": 0.93, "c15": 0.68, "z": 0.99}
#: the lattice constants of source 001's generator, relative to the cubic grid's
AUTHORS_SCALE = {"cubic": 1.0, "fcc": 2.51, "bcc": 2.27, "a15": 3.91, "c15": 5.39, "z": 3.70}
#: section 5.1's equal-cost lattice constants relative to the cubic grid's, as
#: derived here (test_equal_cost_scales), and the dual edges they give
DERIVED_SCALE = {"cubic": 1.0, "fcc": 2.409, "bcc": 2.289, "a15": 3.637, "c15": 5.153,
                 "z": 3.579}
OPS = 6e9


def operations(grid, h, L):
    """sum_i #J^i / dt per unit time for `grid` at lattice constant h on the
    box L (blocks counted fractionally), counted here from the block."""
    blk = nl.dec.block(grid)
    cells = blk.cells * np.prod(L / (np.asarray(blk.edge) * h))
    faces_plus_one = np.bincount(blk.nbr_row).mean() + 1
    diag = 0.5 * blk.diagonal().max() / h ** 2
    vmax = 0.5 * np.sum((L / 2) ** 2)
    return cells * faces_plus_one * 2.0 * (diag + vmax)


def scale(grid, L):
    """The library's equal-cost lattice constant (nl.dec.grids)."""
    h = nl.dec.grids.equal_cost_spacing(grid, L, OPS, vmax=0.5 * np.sum((L / 2) ** 2))
    assert nl.dec.grids.operations_per_time(grid, h, L, 0.5 * np.sum((L / 2) ** 2)) == \
        pytest.approx(operations(grid, h, L), rel=1e-12)
    return h


@pytest.fixture(scope="module")
def dual_edges():
    st = nl.examples.vortex_state(1.0, 300.0, 10)
    lo, hi = st.cuboid(1e-5)
    L = hi - lo
    out = {}
    for g in nl.dec.GRIDS:
        h = scale(g, L)
        assert operations(g, h, L) == pytest.approx(OPS, rel=1e-9)
        out[g] = nl.dec.block(g).nbr_dual * h
    ref = out["cubic"].min()
    return {g: d / ref for g, d in out.items()}


@pytest.mark.parametrize("grid", ["cubic", "fcc", "bcc", "a15", "c15", "z"])
def test_table_is_the_generators_constants_times_a_dual_edge(grid):
    """Table 1's entry is AUTHORS_SCALE times one of the block's dual edges,
    to the table's two digits (0.005); C15 to one unit of the last digit
    (0.6877 printed as 0.68)."""
    d = np.unique(nl.dec.block(grid).nbr_dual) * AUTHORS_SCALE[grid]
    tol = 0.01 if grid == "c15" else 0.005
    assert np.abs(d - TABLE1[grid]).min() <= tol, (grid, d)


def test_equal_cost_scales(dual_edges):
    """Section 5.1's scaling (equal sum #J^i / dt) as derived here: the
    lattice constants to three digits, the uniform grids' dual edges equal."""
    for g, d in dual_edges.items():
        ratio = d / (nl.dec.block(g).nbr_dual / nl.dec.block("cubic").nbr_dual.min())
        assert ratio.max() - ratio.min() < 1e-9
        assert ratio[0] == pytest.approx(DERIVED_SCALE[g], abs=5e-4), g
    for g in ("cubic", "fcc", "bcc"):
        assert dual_edges[g].max() - dual_edges[g].min() < 1e-9


def test_derivation_meets_the_table_where_the_counts_agree(dual_edges):
    """Cubic and BCC, where the generator's constants are section 5.1's
    within 1 %: Table 1 to its two digits (BCC 0.809 against 0.80)."""
    for g in ("cubic", "bcc"):
        assert AUTHORS_SCALE[g] == pytest.approx(DERIVED_SCALE[g], rel=0.01)
        assert dual_edges[g][0] == pytest.approx(TABLE1[g], abs=0.01)


@pytest.mark.parametrize("grid", ["a15", "z"])
def test_table_value_within_range(grid, dual_edges):
    """A15 and Z: the derived grid's dual edges span Table 1's one value."""
    d = dual_edges[grid]
    assert d.min() < TABLE1[grid] < d.max()


def test_ordering_of_resolution(dual_edges):
    """At equal cost BCC resolves finer than the cubic grid and FCC coarser
    (the ranking behind Fig. 5's accuracy comparison)."""
    assert dual_edges["bcc"].max() < 1.0 < dual_edges["fcc"].min()
