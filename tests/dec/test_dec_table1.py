"""Table 1 of source 001: the dual edge lengths of the six grids scaled to
equal operation counts, derived as section 5.1 states it.

Section 5.1 scales each grid so that the arithmetic per unit of time,
sum_i #J^i / dt (#J^i = faces of cell i + 1, dt the bound of eq. 11 with
the trap's largest value on the domain), is 6e9 on the cuboid of eq. 15 of
the (lambda, g, kappa) = (1, 300, 10) vortex, and lists one dual edge length
per grid relative to the cubic grid's.

What the derivation reproduces: BCC (0.80, all its dual edges equal) to
the table's two digits, and FCC (1.05 here against 1.09) and the shortest
C15 dual edge (0.66 against 0.68) within 4.5%: the authors' scale constants,
set in their generator from their own operation count (the face count times
the first face's Hodge ratio in place of the largest diagonal), give FCC
1.09.  A15 and Z have dual edges of many lengths and the
table gives one of them (the authors print the first face's): the test
checks that it lies within the grid's range.
"""

import numpy as np
import pytest

pytest.importorskip("scipy")

import nlsepy as nl  # noqa: E402

TABLE1 = {"cubic": 1.0, "fcc": 1.09, "bcc": 0.80, "a15": 0.93, "c15": 0.68, "z": 0.99}
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


def test_uniform_grids(dual_edges):
    for g in ("cubic", "bcc"):
        d = dual_edges[g]
        assert d.max() - d.min() < 1e-9
        assert d[0] == pytest.approx(TABLE1[g], abs=0.015)


def test_fcc(dual_edges):
    d = dual_edges["fcc"]
    assert d.max() - d.min() < 1e-9
    assert d[0] == pytest.approx(TABLE1["fcc"], rel=0.045)


def test_c15_shortest(dual_edges):
    assert dual_edges["c15"].min() == pytest.approx(TABLE1["c15"], rel=0.045)


@pytest.mark.parametrize("grid", ["a15", "z"])
def test_table_value_within_range(grid):
    st = nl.examples.vortex_state(1.0, 300.0, 10)
    lo, hi = st.cuboid(1e-5)
    L = hi - lo
    ref = scale("cubic", L)
    d = nl.dec.block(grid).nbr_dual * scale(grid, L) / ref
    assert d.min() < TABLE1[grid] < d.max()


def test_ordering_of_resolution(dual_edges):
    """At equal cost BCC resolves finer than the cubic grid and FCC coarser
    (the ranking behind Fig. 5's accuracy comparison)."""
    assert dual_edges["bcc"].max() < 1.0 < dual_edges["fcc"].min()
