"""Tests of nlsepy.magnet.post: the potential jump across the magnet's surface,
the winding at equally spaced Delta Phi levels and the field of the wires
(source 002, sections 1.4.2-1.4.3 and 6.2-6.3.4), on potentials solved by
nlsepy.reference.magnet."""

import functools
import math
import sys

import numpy as np
import pytest

from nlsepy.magnet import post as mp
from nlsepy.reference import magnet as rl

R0, Z0 = 0.25, 0.5            # the source's magnet (section 6.1)
B_SRC = 0.008                 # the source's field (T)
H = 0.025


@functools.lru_cache(maxsize=None)
def solved(r1, z1, h, B):
    """Phi of the magnet problem (r0 = 0.25, z0 = 0.5) in a box r1 x z1 at spacing h."""
    st = rl.coaxial_stencil(R0, Z0, r1, z1, h, B=B)
    if st.active.sum() <= 2000:
        return rl.solve_dense(st)
    res = rl.red_black_sor(st, rl.omega_estimate(r1, z1, h), tol=1e-10, max_iter=100000)
    assert res.converged
    return res.phi


@pytest.fixture(scope="module")
def small():
    """The 41 x 41 grid: alpha = 4, beta = 2, dr = dz = 0.025, B = 1 mT (dense solve)."""
    return solved(1.0, 1.0, H, 1e-3)


# ------------------------------------------------------------------ potential jump

def test_phi_inside_is_minus_B_z_over_mu0_and_matches_the_cap_condition(small):
    z = np.linspace(-0.5, 0.5, 11)
    assert np.allclose(mp.phi_inside(z, 1e-3), -1e-3 * z / (4e-7 * math.pi), rtol=1e-15, atol=0)
    # eq. 1.23: dPhi_inside/dz = -B/mu0, the same as Table 1.1's cap condition
    # on the outside (B_z continuous through the cap); the solved potential's
    # second-order one-sided derivative above the cap agrees in sign and size
    p = small
    j0 = round(Z0 / H)
    dphidz = (-3 * p[:11, j0] + 4 * p[:11, j0 + 1] - p[:11, j0 + 2]) / (2 * H)
    target = -1e-3 / mp.MU0
    # away from the re-entrant corner (r0, z0), whose singularity spoils the
    # one-sided difference over the outer half of the cap
    assert np.all(np.abs(dphidz[:6] / target - 1) < 0.005)
    assert mp.cap_field(p, H, H, R0, Z0) == pytest.approx(1e-3, rel=1e-12)


def test_delta_phi_is_zero_at_the_midplane_and_continuous_at_the_corner(small):
    d = mp.delta_phi(small, H, H, R0, Z0)
    assert d["side"][0] == 0.0                      # boundary 6: Phi = 0 on z = 0, Phi_inside(0) = 0
    assert d["side"][-1] == d["cap"][-1]             # the corner node belongs to both
    assert d["z"][-1] == pytest.approx(Z0) and d["r"][-1] == pytest.approx(R0)
    # along the path (side up, cap in) no step near the corner jumps out of
    # line: the current density grows towards the re-entrant corner and falls
    # again on the cap
    steps = np.diff(d["path"])
    k = d["z"].size - 1                             # last side step ends at the corner
    assert steps[k - 1] == steps.max()
    assert 0.5 < steps[k] / steps[k - 1] < 1.0
    assert d["s"].size == d["path"].size == d["z"].size + d["r"].size - 1
    assert np.all(np.diff(d["s"]) > 0) and d["path"][-1] == d["cap"][0]
    assert d["B"] == pytest.approx(1e-3, rel=1e-12)


def test_delta_phi_on_the_side_rises_faster_than_the_inside_field(small):
    """Fig. 6.5: Delta Phi(z) increases from 0 and steepens towards the cap; its
    slope is the sheet current K = H_in - H_out,z (eq. 1.34), larger than
    B/mu0 because the return flux outside points down."""
    d = mp.delta_phi(small, H, H, R0, Z0)
    k = np.diff(d["side"]) / H
    assert np.all(k > 0) and np.all(np.diff(k) > 0)
    assert k[0] > 1e-3 / mp.MU0


def test_delta_phi_on_the_cap_is_a_smooth_dome(small):
    """Fig. 6.6: over -r0 <= r <= r0 Delta Phi is a dome, largest and flat on
    the axis, falling monotonically and ever faster to the rim (concave), and
    above the corner value: the cap carries the last wires (Fig. 6.13)."""
    d = mp.delta_phi(small, H, H, R0, Z0)
    cap = d["cap"]
    d1, d2 = np.diff(cap), np.diff(cap, 2)
    assert np.all(d1 < 0) and np.all(d2 < 0)
    # an even function of r: the first step is half the second difference
    assert d1[0] / d2[0] == pytest.approx(0.5, abs=0.03)
    assert cap[0] > cap[-1] > 0


def test_delta_phi_converges_with_the_mesh():
    """Figs 6.7/6.8: the difference to the finest mesh shrinks with the spacing."""
    fine = mp.delta_phi(solved(1.0, 1.0, 0.0125, 1e-3), 0.0125, 0.0125, R0, Z0)
    errs = []
    for h in (0.05, 0.025):
        d = mp.delta_phi(solved(1.0, 1.0, h, 1e-3), h, h, R0, Z0)
        q = round(h / 0.0125)
        es = np.abs(d["side"][1:] / fine["side"][::q][1:] - 1).max()
        ec = np.abs(d["cap"] / fine["cap"][::q] - 1).max()
        errs.append((es, ec))
    assert errs[1][0] < errs[0][0] and errs[1][1] < errs[0][1]


# ------------------------------------------------------------------ winding

@pytest.mark.parametrize("n", [1, 3, 10, 37])
def test_winding_levels_positions_and_current(small, n):
    d = mp.delta_phi(small, H, H, R0, Z0)
    w = mp.winding(small, H, H, R0, Z0, n)
    total = d["cap"][0] - d["side"][0]              # Delta Phi_B - Delta Phi_A (Fig. 6.11)
    assert w.n_turns == n
    assert w.total_current == pytest.approx(total, rel=1e-14)
    assert w.current * n == pytest.approx(total, rel=1e-14)
    assert np.allclose(w.levels, (np.arange(1, n + 1) - 0.5) * total / n, rtol=1e-14)   # eq. 6.6
    # side wires up from the midplane, cap wires in from the rim, monotone
    assert np.all(np.diff(w.z_side) > 0) and np.all(np.diff(w.r_cap) < 0)
    assert np.all((w.z_side > 0) & (w.z_side <= Z0)) and np.all((w.r_cap >= 0) & (w.r_cap < R0))
    # as many side wires as levels below the corner value
    assert w.z_side.size == np.count_nonzero(w.levels <= d["side"][-1])
    # eq. 1.34 read back: Delta Phi at each wire is its level
    at = np.concatenate((np.interp(w.z_side, d["z"], d["side"]), np.interp(w.r_cap, d["r"], d["cap"])))
    assert np.allclose(at, w.levels, rtol=1e-12)
    rad, hgt = w.loops()
    assert rad.size == hgt.size == 2 * n
    assert np.allclose(np.sort(hgt[:n]), np.sort(-hgt[n:]))


def test_winding_layout_matches_figs_6_12_to_6_14():
    """10 wires on the upper half: 8 on the body, 2 on the cap (Figs 6.12,
    6.13); 20 in all: 16 body and 4 cap wires (Fig. 6.14)."""
    p = solved(3.0, 3.0, H, B_SRC)
    w = mp.winding(p, H, H, R0, Z0, 10)
    assert (w.z_side.size, w.r_cap.size) == (8, 2)
    rad, hgt = w.loops()
    assert np.count_nonzero(np.abs(hgt) < Z0) == 16 and np.count_nonzero(np.abs(hgt) == Z0) == 4


def test_efficiency_matches_the_source():
    """Section 6.3.4, eq. 6.9: chi = B(centre)/I = 0.045, 0.090, 0.18, 0.27,
    0.36, 0.45 mT/A for 50 ... 500 wires in all (r0 = 0.25 m, z0 = 0.5 m,
    B = 8 mT), each to the digits the source prints."""
    p = solved(3.0, 3.0, H, B_SRC)
    for wires, chi, unit in ((50, 0.045, 1e-3), (100, 0.090, 1e-3), (200, 0.18, 1e-2),
                             (300, 0.27, 1e-2), (400, 0.36, 1e-2), (500, 0.45, 1e-2)):
        f = mp.field_inside(p, H, H, R0, Z0, B_SRC, wires // 2, z=[0.0])
        assert abs(f["efficiency"] * 1e3 - chi) <= 0.5 * unit, (wires, f["efficiency"] * 1e3)


def test_negative_field_reverses_the_current_not_the_wires(small):
    neg = solved(1.0, 1.0, H, -1e-3)
    w, wn = mp.winding(small, H, H, R0, Z0, 12), mp.winding(neg, H, H, R0, Z0, 12)
    assert wn.current == pytest.approx(-w.current, rel=1e-12)
    assert np.allclose(wn.z_side, w.z_side, rtol=1e-12) and np.allclose(wn.r_cap, w.r_cap, rtol=1e-12)
    f = mp.field_inside(neg, H, H, R0, Z0, -1e-3, 12)
    assert np.all(f["Bz"] < 0)
    with pytest.raises(ValueError, match="B = 0.001 has the opposite sign"):
        mp.delta_phi(neg, H, H, R0, Z0, B=1e-3)


# ------------------------------------------------------------------ field

def test_loop_field_on_axis_is_eq_6_7_and_off_axis_matches_quadrature():
    a, zw, cur = 0.3, 0.1, 2.0
    z = np.linspace(-1, 1, 9)
    br, bz = mp.loop_field(a, zw, cur, 0.0, z)
    assert np.all(br == 0)
    assert np.allclose(bz, mp.MU0 * cur * a * a / (2 * (a * a + (z - zw) ** 2) ** 1.5), rtol=1e-13)
    # direct Biot-Savart quadrature over the loop (trapezoid on a periodic integrand)
    t = np.linspace(0, 2 * np.pi, 4096, endpoint=False)[:, None]
    pts = np.array([[0.1, 0.0], [0.2, 0.35], [0.29, 0.12], [0.6, -0.4]])
    src = np.stack((a * np.cos(t), a * np.sin(t), np.full_like(t, zw)), -1)
    dl = np.stack((-a * np.sin(t), a * np.cos(t), np.zeros_like(t)), -1) * (2 * np.pi / t.size)
    zero = 0 * t + 0 * pts[:, 0]
    R = np.stack((pts[:, 0] + zero, zero, pts[:, 1] + zero), -1) - src
    dB = mp.MU0 * cur / (4 * np.pi) * np.cross(dl, R) / np.linalg.norm(R, axis=-1, keepdims=True) ** 3
    Bq = dB.sum(axis=0)
    br, bz = mp.loop_field(a, zw, cur, pts[:, 0], pts[:, 1])
    assert np.allclose(br, Bq[:, 0], rtol=1e-9, atol=0) and np.allclose(bz, Bq[:, 2], rtol=1e-9, atol=0)
    # near the axis Br = -(r/2) dBz/dz, without the cancellation of the closed form
    r = np.array([1e-9, 1e-6, 1e-4])
    br, _ = mp.loop_field(a, zw, cur, r, 0.4)
    slope = 1.5 * mp.MU0 * cur * a * a / 2 * 0.3 * (a * a + 0.09) ** -2.5
    assert np.allclose(br / r, slope, rtol=1e-6)


def test_centre_field_improves_with_more_wires(small):
    """Fig. 6.15: the normalized field difference (Bz(0, 0) - B)/B falls from
    10 to 20 to 40 wires on the upper half; the part due to the wires (the
    distance to the many-wire limit) falls like 1/n^2 (mid-point levels)."""
    c = {n: mp.field_inside(small, H, H, R0, Z0, 1e-3, n, z=[0.0])["normalized"][0]
         for n in (10, 20, 40, 2000)}
    assert c[10] > c[20] > c[40] > c[2000] > 0
    assert (c[10] - c[2000]) / (c[20] - c[2000]) > 3
    assert (c[20] - c[2000]) / (c[40] - c[2000]) > 3


def test_many_wire_field_tends_to_B_with_box_and_mesh():
    """The many-wire limit is off B by the error of Delta Phi: the closed
    superconducting box (alpha = 4, beta = 2 squeezes the return flux) and
    the mesh.  Both shrink: the normalized centre difference falls as the box
    grows and as the spacing falls, to under 1 %."""
    def centre(r1, h):
        p = solved(r1, r1, h, 1e-3)
        return mp.field_inside(p, h, h, R0, Z0, 1e-3, 2000, z=[0.0])["normalized"][0]
    boxes = [centre(1.0, H), centre(2.0, H), centre(3.0, H)]
    assert boxes[0] > boxes[1] > boxes[2] > 0
    meshes = [centre(2.0, 0.05), centre(2.0, H), centre(2.0, 0.0125)]
    assert meshes[0] > meshes[1] > meshes[2] > 0
    assert meshes[2] < 0.01


def test_field_inside_off_axis_symmetry(small):
    r = np.array([0.0, 0.05, 0.1, 0.2])[:, None]
    z = np.array([-0.3, -0.1, 0.1, 0.3])[None, :]
    f = mp.field_inside(small, H, H, R0, Z0, 1e-3, 20, z=z, r=r)
    assert f["Bz"].shape == (4, 4)
    assert np.allclose(f["Bz"], f["Bz"][:, ::-1], rtol=1e-12)       # Bz even in z
    assert np.allclose(f["Br"], -f["Br"][:, ::-1], rtol=1e-12, atol=1e-18)    # Br odd in z
    assert np.all(f["Br"][0] == 0)
    assert np.all(np.abs(f["normalized"]) < 0.1)


def test_homogeneity_middle_range(small):
    p = solved(3.0, 3.0, H, B_SRC)
    f = mp.field_inside(p, H, H, R0, Z0, B_SRC, 20, z=np.linspace(-0.2, 0.2, 401))
    assert mp.homogeneity(p, H, H, R0, Z0, B_SRC, 20) == pytest.approx(np.abs(f["normalized"]).max())
    hs = [mp.homogeneity(p, H, H, R0, Z0, B_SRC, 20, z_range=zr) for zr in (0.1, 0.2, 0.4)]
    assert hs[0] <= hs[1] <= hs[2]
    c = mp.field_inside(p, H, H, R0, Z0, B_SRC, 20, z=[0.0], reference="centre")
    assert c["normalized"][0] == 0.0 and c["B_ref"] == c["B_centre"]
    # Fig. 6.15/6.16: relative to the centre, the middle 40 cm get more uniform with more wires
    hc = [mp.homogeneity(p, H, H, R0, Z0, B_SRC, n, reference="centre") for n in (10, 20, 40)]
    assert hc[0] > hc[1] > hc[2]


# ------------------------------------------------------------------ bad input

@pytest.mark.parametrize("kw,match", [
    (dict(dr=0.0), "dr"), (dict(dr=-0.025), "dr"), (dict(dz=0.0), "dz"), (dict(dz=float("nan")), "dz"),
    (dict(r0=0.0), "r0"), (dict(z0=-0.5), "z0"), (dict(r0=0.26), "r0 = 0.26"),
    (dict(z0=0.51), "z0 = 0.51"), (dict(dr=0.05), "phi has non-finite"),
])
def test_bad_sizes(small, kw, match):
    args = dict(phi=small, dr=H, dz=H, r0=R0, z0=Z0)
    args.update(kw)
    for fn in (mp.delta_phi, mp.cap_field):
        with pytest.raises(ValueError, match=match):
            fn(**args)
    with pytest.raises(ValueError, match=match):
        mp.winding(n_turns=5, **args)
    with pytest.raises(ValueError, match=match):
        mp.field_inside(B=1e-3, n_turns=5, **args)


@pytest.mark.parametrize("phi,match", [
    (np.zeros(41), "2-D"), (np.zeros((41, 41, 1)), "2-D"), (np.zeros((11, 41)), r"phi has shape \(11, 41\)"),
    (np.zeros((41, 21)), r"phi has shape \(41, 21\)"), (np.full((41, 41), np.nan), "non-finite"),
    (np.array([["a"] * 41] * 41), "real array"),
])
def test_bad_phi(phi, match):
    with pytest.raises(ValueError, match=match):
        mp.delta_phi(phi, H, H, R0, Z0, B=1e-3)


@pytest.mark.parametrize("n", [0, -3, 2.5, True, "10", None])
def test_bad_n_turns(small, n):
    with pytest.raises(ValueError, match="n_turns"):
        mp.winding(small, H, H, R0, Z0, n)
    with pytest.raises(ValueError, match="n_turns"):
        mp.field_inside(small, H, H, R0, Z0, 1e-3, n)


def test_bad_field_and_ranges(small):
    with pytest.raises(ValueError, match="B must be non-zero"):
        mp.field_inside(small, H, H, R0, Z0, 0.0, 5)
    with pytest.raises(ValueError, match="B must be finite"):
        mp.delta_phi(small, H, H, R0, Z0, B=float("inf"))
    with pytest.raises(ValueError, match="B must be finite"):
        mp.phi_inside(0.1, float("nan"))
    with pytest.raises(ValueError, match="z contains"):
        mp.phi_inside([0.1, np.nan], 1e-3)
    with pytest.raises(ValueError, match="no field through its cap"):
        mp.delta_phi(np.zeros((41, 41)), H, H, R0, Z0)
    with pytest.raises(ValueError, match="not strictly monotone"):
        mp.winding(np.zeros((41, 41)), H, H, R0, Z0, 4, B=1e-3)
    for zr in (0.0, -0.1, 0.6):
        with pytest.raises(ValueError, match="z_range"):
            mp.homogeneity(small, H, H, R0, Z0, 1e-3, 10, z_range=zr)
    with pytest.raises(ValueError, match="n_points"):
        mp.homogeneity(small, H, H, R0, Z0, 1e-3, 10, n_points=1)
    with pytest.raises(ValueError, match="reference"):
        mp.field_inside(small, H, H, R0, Z0, 1e-3, 10, reference="peak")
    with pytest.raises(ValueError, match="r must hold radii"):
        mp.field_inside(small, H, H, R0, Z0, 1e-3, 10, z=[0.0], r=[R0])
    with pytest.raises(ValueError, match="r must hold radii"):
        mp.field_inside(small, H, H, R0, Z0, 1e-3, 10, z=[0.0], r=[-0.1])
    with pytest.raises(ValueError, match="z contains"):
        mp.field_inside(small, H, H, R0, Z0, 1e-3, 10, z=[np.inf])
    with pytest.raises(ValueError, match="radius must be > 0"):
        mp.loop_field(0.0, 0.0, 1.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="r must be >= 0"):
        mp.loop_field(0.1, 0.0, 1.0, -0.1, 0.0)


# ------------------------------------------------------------------ plot

def test_plot_draws_contours_outline_and_wires(small):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    w = mp.winding(small, H, H, R0, Z0, 10)
    ax = mp.plot(small, H, H, R0, Z0, winding=w)
    assert isinstance(ax, matplotlib.axes.Axes)
    xs = np.concatenate([ln.get_xdata() for ln in ax.lines if ln.get_marker() == "o"])
    assert xs.size == 10
    _, ax2 = plt.subplots()
    assert mp.plot(small, H, H, R0, Z0, winding=w, ax=ax2, full=True) is ax2
    assert sum(len(ln.get_xdata()) for ln in ax2.lines if ln.get_marker() == "o") == 40
    with pytest.raises(ValueError, match="winding must be a Winding"):
        mp.plot(small, H, H, R0, Z0, winding={"z": [0.1]})
    plt.close("all")


def test_plot_without_matplotlib_names_the_extra(small, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match="matplotlib.*nlsepy\\[plot\\]"):
        mp.plot(small, H, H, R0, Z0)
