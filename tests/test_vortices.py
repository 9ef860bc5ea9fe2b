"""Vortex finding (nl.vortices, sim.vortices(), frames.vortices()): exact
planted fields (products of (x - x0) + i s (y - y0) factors times a
Gaussian; a straight line and a ring ((r - R) + i (z - z0)) in 3D) found at
their sub-grid positions with their charges; the density threshold; the
periodic grid; tracking across frames; the solvers' coordinates; the DEC
path; the overlay on plots; bad input."""

import math

import numpy as np
import pytest

import nlsepy as nl
from nlsepy.common import vortices as vx

H = 0.1
X1 = np.arange(-40, 41) * H            # 81 points: the centred grid, origin -4


def plane(x=X1, y=X1):
    return np.meshgrid(x, y, indexing="ij")


def planted(cores, width=1.5, x=X1, y=X1):
    """Gaussian times one factor ((x - x0) + i sign(q) (y - y0))^|q| per core."""
    X, Y = plane(x, y)
    psi = np.exp(-(X ** 2 + Y ** 2) / (2 * width ** 2)).astype(complex)
    for x0, y0, q in cores:
        psi *= ((X - x0) + 1j * np.sign(q) * (Y - y0)) ** abs(q)
    return psi


def match(found, cores):
    """Distance (grid spacings) and charge of the found vortex nearest each core."""
    out = []
    for x0, y0, q in cores:
        d = np.hypot(found.positions[:, 0] - x0, found.positions[:, 1] - y0)
        k = int(np.argmin(d))
        out.append((d[k] / H, int(found.charges[k])))
    return out


# ---------------------------------------------------------------------- 2D
@pytest.mark.parametrize("q", [1, -1, 2, -2])
def test_one_planted_vortex_at_a_subgrid_position(q):
    x0, y0 = 0.537, -1.0683                      # 0.37 h and 0.17 h off the nodes
    v = nl.vortices(planted([(x0, y0, q)]), H)
    assert isinstance(v, nl.Vortices) and len(v) == 1
    assert v.charges.tolist() == [q] and v.net_charge == q
    err = math.hypot(*(v.positions[0] - (x0, y0))) / H
    assert err < 0.5
    # the cubic through the 4 x 4 nodes: far better than the bound
    assert err < (1e-3 if abs(q) == 1 else 0.05)


def test_planted_charges_plus_minus_one_and_two_within_half_a_cell():
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(12):
        while True:  # four cores, at least 6 cells apart and off the nodes
            P = rng.uniform(-2.0, 2.0, (4, 2))
            D = np.hypot(*(P[:, None] - P[None]).transpose(2, 0, 1)) + 9 * np.eye(4)
            if D.min() > 6 * H:
                break
        cores = [(px, py, q) for (px, py), q in zip(P, (1, -1, 2, -2))]
        v = nl.vortices(planted(cores), H, threshold=0.0)
        assert len(v) == 4 and v.net_charge == 0
        for (err, q_found), (_, _, q) in zip(match(v, cores), cores):
            assert q_found == q
            assert err < 0.5
            checked += 1
    assert checked == 48


def test_anisotropic_core_spacing_and_origin():
    """(2(x - x0) + i (y - y0)) on hx != hy with an explicit origin."""
    hx, hy = 0.08, 0.13
    x = 1.0 + hx * np.arange(60)
    y = -2.0 + hy * np.arange(45)
    X, Y = plane(x, y)
    x0, y0 = 3.3113, 0.6071
    psi = (2 * (X - x0) - 1j * (Y - y0)) * np.exp(-((X - 3.4) ** 2 + (Y - 0.8) ** 2) / 4)
    v = nl.vortices(psi, (hx, hy), origin=(1.0, -2.0))
    assert v.charges.tolist() == [-1]
    assert np.allclose(v.positions[0], (x0, y0), atol=1e-3 * hx)


def test_a_core_on_a_node_is_found_once():
    """psi = 0 exactly at a node (nl.examples.dark_vortex): one vortex there."""
    psi, h, _ = nl.examples.dark_vortex(length=10.0, h=0.25, m=1)
    v = nl.vortices(psi, h)
    assert v.charges.tolist() == [1]
    assert np.allclose(v.positions, 0.0, atol=1e-9)
    psi2, _, _ = nl.examples.dark_vortex(length=10.0, h=0.25, m=-2)
    v = nl.vortices(psi2, h)
    assert v.charges.tolist() == [-2]
    assert np.abs(v.positions).max() < 0.5 * h


def test_net_charge_is_the_winding_around_the_boundary():
    """The plaquettes' windings add up exactly (discrete Stokes): on a
    random smooth field the net charge is the phase winding along the
    grid's edge."""
    rng = np.random.default_rng(3)
    n = 48
    k = np.fft.fftfreq(n)[:, None] ** 2 + np.fft.fftfreq(n)[None, :] ** 2
    spec = (rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))) * np.exp(-k * 150)
    psi = np.fft.ifft2(spec)
    v = nl.vortices(psi, 1.0, threshold=0.0)
    assert len(v) > 4
    edge = np.concatenate((psi[:, 0], psi[-1, 1:], psi[-2::-1, -1], psi[0, -2:0:-1]))
    winding = np.sum(np.angle(np.roll(edge, -1) / edge)) / (2 * np.pi)
    assert v.net_charge == round(winding)


def test_threshold_leaves_out_the_phase_noise_of_the_outskirts():
    rng = np.random.default_rng(1)
    X, Y = plane(np.arange(-60, 61) * H, np.arange(-60, 61) * H)
    cores = [(0.31, -0.52, 1), (-0.77, 0.23, -2)]
    psi = planted(cores, width=1.2, x=np.arange(-60, 61) * H, y=np.arange(-60, 61) * H)
    dens = np.abs(psi) ** 2
    outskirts = dens < 1e-8 * dens.max()
    assert outskirts.mean() > 0.1
    noisy = np.where(outskirts, np.abs(psi) * np.exp(2j * np.pi * rng.random(X.shape)), psi)
    assert len(nl.vortices(noisy, H, threshold=0.0)) > 100       # the noise winds at random
    v = nl.vortices(noisy, H)                                      # default: 1e-3 of the peak
    assert sorted(v.charges.tolist()) == [-2, 1]
    assert all(err < 0.5 and q_found == q for (err, q_found), (_, _, q)
               in zip(match(v, cores), cores))
    assert vx.DEFAULT_THRESHOLD == 1e-3
    # the cores' own density holes are not cut away by the threshold
    assert len(nl.vortices(noisy, H, threshold=0.01)) == 2


def test_periodic_grid_counts_the_plaquettes_across_the_boundary():
    """sin(k(x - x0)) + i sin(k(y - y0)) on a periodic box: four vortices
    (+1, -1, -1, +1), one of them between the last and the first node."""
    n, L = 40, 4.0
    h = L / n
    x = -L / 2 + h * np.arange(n)                  # nl.examples.grid(L, h, periodic=True)
    X, Y = plane(x, x)
    k = 2 * np.pi / L
    x0, y0 = 1.953, 0.4321         # between the last node (1.9) and the first (-2 = 2)
    psi = np.sin(k * (X - x0)) + 1j * np.sin(k * (Y - y0))
    v = nl.vortices(psi, h, periodic=True)         # default origin: -n h / 2
    want = [(x0, y0, 1), (x0 - L / 2, y0, -1), (x0, y0 - L / 2, -1), (x0 - L / 2, y0 - L / 2, 1)]
    assert len(v) == 4 and v.net_charge == 0
    for xw, yw, q in want:
        d = np.hypot(*((v.positions - (xw, yw) + L / 2) % L - L / 2).T)
        assert d.min() < 0.05 * h and v.charges[np.argmin(d)] == q
    assert np.all((v.positions >= -L / 2) & (v.positions < L / 2))
    assert len(nl.vortices(psi, h, origin=-L / 2)) == 2       # bounded: two are lost


# ---------------------------------------------------------------------- 3D
def grid3(n=41, h=0.2):
    x = (np.arange(n) - (n - 1) / 2) * h
    return np.meshgrid(x, x, x, indexing="ij"), h


@pytest.mark.parametrize("sign", [1, -1])
def test_straight_line(sign):
    (X, Y, Z), h = grid3()
    x0, y0, tilt = 0.33, -0.41, 0.1
    psi = ((X - x0 - tilt * Z) + 1j * sign * (Y - y0)) * np.exp(-(X ** 2 + Y ** 2 + Z ** 2) / 12.5)
    lines = nl.vortices(psi, h)
    assert isinstance(lines, nl.VortexLines) and len(lines) == 1
    line = lines[0]
    assert line.charge == 1 and not line.closed
    p = line.points
    assert np.hypot(p[:, 0] - x0 - tilt * p[:, 2], p[:, 1] - y0).max() < 0.01 * h
    # from end to end of the box, along the vorticity (+z for sign = +1)
    assert np.allclose(sorted(p[[0, -1], 2]), [-4.0, 4.0])
    assert np.sign(p[-1, 2] - p[0, 2]) == sign
    assert np.all(np.diff(p[:, 2]) * sign >= 0)


def test_ring_is_one_closed_loop_of_radius_R():
    (X, Y, Z), h = grid3()
    R, c = 1.7, np.array([0.13, -0.07, 0.31])     # centre off the nodes
    rho = np.hypot(X - c[0], Y - c[1])
    psi = ((rho - R) + 1j * (Z - c[2])) * np.exp(-(X ** 2 + Y ** 2 + Z ** 2) / 12.5)
    lines = nl.vortices(psi, h)
    assert len(lines) == 1
    ring = lines[0]
    assert ring.closed and ring.charge == 1
    p = ring.points
    r = np.hypot(p[:, 0] - c[0], p[:, 1] - c[1])
    assert np.abs(r - R).max() < h and np.abs(p[:, 2] - c[2]).max() < h
    assert np.abs(r - R).max() < 0.01 * h                    # the fit does far better
    assert ring.length == pytest.approx(2 * np.pi * R, rel=0.02)
    assert np.allclose(ring.centroid, c, atol=0.05 * h)
    # (rho - R) + i z winds counter-clockwise in the (rho, z) half-plane: the
    # line runs along -e_phi (right-hand rule)
    step = np.roll(p, -1, axis=0) - p
    e_phi = np.column_stack((-(p[:, 1] - c[1]), p[:, 0] - c[0], np.zeros(len(p))))
    assert np.all(np.einsum("ij,ij->i", step, e_phi) < 0)


@pytest.mark.parametrize("sign", [1, -1])
def test_doubly_charged_line_and_ring(sign):
    """A charge-2 core spreads over two plaquettes of each plane: traced as
    two unit lines side by side, merged into one line of charge 2."""
    (X, Y, Z), h = grid3()
    x0, y0, tilt = 0.33, -0.41, 0.1
    env = np.exp(-(X ** 2 + Y ** 2 + Z ** 2) / 12.5)
    line = nl.vortices(((X - x0 - tilt * Z) + 1j * sign * (Y - y0)) ** 2 * env, h)
    assert len(line) == 1 and line[0].charge == 2 and not line[0].closed
    p = line[0].points
    assert np.hypot(p[:, 0] - x0 - tilt * p[:, 2], p[:, 1] - y0).max() < 0.02 * h
    assert np.sign(p[-1, 2] - p[0, 2]) == sign
    R, c = 1.7, np.array([0.13, -0.07, 0.31])
    ring = nl.vortices(((np.hypot(X - c[0], Y - c[1]) - R) + 1j * (Z - c[2])) ** 2 * env, h)
    assert len(ring) == 1 and ring[0].charge == 2 and ring[0].closed
    p = ring[0].points
    assert np.abs(np.hypot(p[:, 0] - c[0], p[:, 1] - c[1]) - R).max() < 0.02 * h
    assert np.abs(p[:, 2] - c[2]).max() < 0.02 * h
    # a vortex and an antivortex line two cells apart stay two lines
    pair = ((X - 0.2) + 1j * (Y - 0.05)) * ((X + 0.21) - 1j * (Y - 0.05)) * env
    assert sorted(len(ln) > 0 and ln.charge for ln in nl.vortices(pair, h)) == [1, 1]


def test_ring_in_a_plane_of_nodes_and_the_threshold_cut():
    """nl.examples.vortex_ring lies in the plane z = 0 of nodes (psi real there):
    still one closed loop of radius d within h; a line cut by the
    threshold ends there."""
    psi, h, p = nl.examples.vortex_ring(length=24.0, h=1.5, d=5.0)
    lines = nl.vortices(psi, h)
    assert len(lines) == 1 and lines[0].closed
    pts = lines[0].points
    assert np.abs(np.hypot(pts[:, 0], pts[:, 1]) - p["d"]).max() < h
    (X, Y, Z), h2 = grid3()
    psi = ((X - 0.33) + 1j * (Y + 0.41)) * np.exp(-(X ** 2 + Y ** 2 + 4 * Z ** 2))
    line = nl.vortices(psi, h2)[0]                  # the cloud ends before the box
    assert not line.closed and np.abs(line.points[:, 2]).max() < 3.0


# ------------------------------------------------------------------ frames
def pair_frames(n_frames=6, speed=0.3, extra_from=3):
    """A vortex pair moving along y (+1 at x = -0.6, -1 at x = +0.6), and a
    third vortex that appears at frame `extra_from`."""
    x = np.arange(-40, 41) * H
    frames = nl.Frames(nl.runner.FrameGrid(axes=("x", "y"), coords=(x, x)))
    truth = []
    for k in range(n_frames):
        y = -1.0 + speed * k + 0.013
        cores = [(-0.6031, y, 1), (0.6017, y, -1)]
        if k >= extra_from:
            cores.append((2.2, -2.1 + 0.05 * k, 1))
        frames.append(0.5 * k, planted(cores, width=2.0))
        truth.append(cores)
    return frames, truth


def test_frames_track_vortices_with_stable_ids():
    frames, truth = pair_frames()
    tracks = frames.vortices()
    assert isinstance(tracks, nl.VortexTracks) and len(tracks) == len(frames)
    assert np.array_equal(tracks.t, frames.t)
    first = tracks[0]
    ids = {q: first.ids[first.charges == q][0] for q in (1, -1)}
    for k, (found, cores) in enumerate(zip(tracks, truth)):
        assert found.t == frames.t[k]
        for x0, y0, q in cores[:2]:
            d = np.hypot(found.positions[:, 0] - x0, found.positions[:, 1] - y0)
            assert d.min() < 0.5 * H and found.ids[np.argmin(d)] == ids[q]
    # the third vortex appears with a new id and keeps it
    new = set(tracks[3].ids.tolist()) - set(ids.values())
    assert len(new) == 1
    (new_id,) = new
    assert new_id not in tracks[2].ids
    assert all(new_id in f.ids for f in tracks[3:])
    path = tracks.track(ids[1])
    assert np.array_equal(path["frame"], np.arange(len(frames)))
    assert np.allclose(path["position"][:, 1], [c[0][1] for c in truth], atol=0.05 * H)
    assert set(path["charge"].tolist()) == {1}
    assert tracks.ids.tolist() == sorted(set(ids.values()) | {new_id})
    # moves farther than max_jump give new ids in every frame
    jumpy = frames.vortices(max_jump=0.01)
    assert len(jumpy.ids) == sum(len(f) for f in jumpy)
    with pytest.raises(ValueError, match="id must be one of"):
        tracks.track(99)


def test_frames_track_a_moving_ring():
    (X, Y, Z), h = grid3(n=25, h=0.25)
    axis = (np.arange(25) - 12) * h
    frames = nl.Frames(nl.runner.FrameGrid(axes=("x", "y", "z"), coords=(axis, axis, axis)))
    for k in range(4):
        z0 = -0.4 + 0.2 * k + 0.03
        rho = np.hypot(X, Y)
        frames.append(k, ((rho - 1.6) + 1j * (Z - z0)) * np.exp(-(X ** 2 + Y ** 2 + Z ** 2) / 8))
    tracks = frames.vortices()
    assert [len(f) for f in tracks] == [1, 1, 1, 1]
    assert len(set(f.ids[0] for f in tracks)) == 1
    assert np.allclose(tracks.track(tracks.ids[0])["position"][:, 2],
                       -0.4 + 0.2 * np.arange(4) + 0.03, atol=0.05 * h)


# ----------------------------------------------------------------- solvers
def shifted_dark_vortex(n=64, h=0.25, x0=0.3, y0=-0.45, periodic=False):
    x = (np.arange(n) - (n / 2 if periodic else (n - 1) / 2)) * h
    X, Y = plane(x, x)
    r = np.hypot(X - x0, Y - y0)
    return np.tanh(r / np.sqrt(2)) * np.exp(1j * np.arctan2(Y - y0, X - x0)), h


def test_nlse_state_after_steps(backend):
    psi, h = shifted_dark_vortex()
    sim = nl.NLSE(psi, h, a=1.0, s=-1.0, bc="msd", backend=backend)
    frames = sim.run(0.2, frames=2)
    v = sim.vortices()
    assert v.charges.tolist() == [1]
    # a dark vortex in a uniform background barely moves in t = 0.2
    assert np.hypot(*(v.positions[0] - (0.3, -0.45))) < 0.5 * h
    # in the coordinates of the frames
    x = frames.grid.coords[0]
    assert x[0] == pytest.approx(-(len(x) - 1) / 2 * h)
    tracks = frames.vortices()
    assert [f.ids.tolist() for f in tracks] == [[0], [0], [0]]
    assert np.allclose(tracks[-1].positions, v.positions)
    with pytest.raises(ValueError, match="2D or 3D"):
        nl.NLSE(np.ones(16, complex), 0.1, backend=backend).vortices()


def test_nlse_periodic_grid_coordinates(backend):
    """NLSE with bc="periodic": its frames' grid wraps, node i at (i - n/2) h."""
    n, L = 40, 4.0
    h = L / n
    x = nl.examples.grid(L, h, periodic=True)
    X, Y = plane(x, x)
    k = 2 * np.pi / L
    x0, y0 = 1.953, 0.4321
    psi = np.sin(k * (X - x0)) + 1j * np.sin(k * (Y - y0))
    sim = nl.NLSE(psi, h, a=1.0, s=0.0, bc="periodic", backend=backend)
    v = sim.vortices()
    assert len(v) == 4 and v.net_charge == 0
    d = np.hypot(*((v.positions - (x0, y0) + L / 2) % L - L / 2).T)
    assert d.min() < 0.05 * h and v.charges[np.argmin(d)] == 1


def test_dipolar_gpe_coordinates():
    """DipolarGPE puts node i at (i - n//2) h: its vortices() uses that."""
    n, h = 32, 0.25
    x = (np.arange(n) - n // 2) * h
    X, Y = plane(x, x)
    x0, y0 = 0.41, -0.29
    psi = ((X - x0) + 1j * (Y - y0)) * np.exp(-(X ** 2 + Y ** 2) / 4)
    gpe = nl.DipolarGPE((n, n), h, 0.01, g=1.0, geometry="2d-xy", trap=(1.0, 1.0, 2.0),
                        psi0=psi, backend="cpu")
    assert np.array_equal(gpe.coords[0], x)
    v = gpe.vortices()
    assert v.charges.tolist() == [1]
    assert np.allclose(v.positions[0], (x0, y0), atol=0.01 * h)
    # nl.vortices' default origin centres the grid: half a cell off for even n
    centred = nl.vortices(gpe.psi, h)
    assert np.allclose(centred.positions[0] - v.positions[0], (h / 2, h / 2), atol=1e-9)
    pytest.importorskip("matplotlib")
    fig = gpe.plot(vortices=True)                   # marked on density and phase
    for ax in fig.axes[:2]:
        (mark,) = [c for c in ax.collections if c.get_label() == "vortex (+)"]
        assert np.allclose(mark.get_offsets(), v.positions)


def test_dec_state_on_a_resampled_grid():
    pytest.importorskip("scipy", reason="DecGPE.psi_on_grid needs scipy's cKDTree")
    sim = nl.DecGPE("bcc", blocks=(10, 10, 8), spacing=0.6, g=1.0, trap=1.0, backend="cpu")
    x0, y0 = 0.37, -0.21
    sim.set_state(lambda p: ((p[..., 0] - x0) + 1j * (p[..., 1] - y0))
                  * np.exp(-0.5 * (p[..., 0] ** 2 + p[..., 1] ** 2 + p[..., 2] ** 2)))
    lo = np.asarray(sim.centre) - 2.5
    hi = np.asarray(sim.centre) + 2.5
    bounds = [(lo[0], hi[0]), (lo[1], hi[1]), (0.0, 0.0)]
    v = sim.vortices((51, 51), bounds=bounds)
    step = 5.0 / 50
    assert v.charges.tolist() == [1]
    assert np.hypot(*(v.positions[0] - (x0, y0))) < 2 * step
    psi, axes = sim.psi_on_grid((51, 51), bounds=bounds)
    assert psi.dtype == np.complex128 and psi.shape == (51, 51)
    assert np.allclose(axes[0], np.linspace(lo[0], hi[0], 51))
    lines = sim.vortices((26, 26, 26), bounds=[(lo[q], hi[q]) for q in range(3)])
    assert len(lines) == 1 and lines[0].charge == 1 and not lines[0].closed
    assert np.hypot(lines[0].points[:, 0] - x0, lines[0].points[:, 1] - y0).max() < 0.4
    assert lines[0].points[-1, 2] > lines[0].points[0, 2]     # along +z


# ------------------------------------------------------------------- plots
def test_overlay_on_density_and_phase(tmp_path):
    pytest.importorskip("matplotlib")
    frames, _ = pair_frames(n_frames=2)
    fig = frames.plot(vortices=True)
    dens, phase = fig.axes[0], fig.axes[1]
    for ax in (dens, phase):
        offsets = np.concatenate([c.get_offsets() for c in ax.collections
                                  if c.get_label().startswith(("vortex", "antivortex"))])
        assert len(offsets) == 2
    fig = frames.plot(vortices={"threshold": 0.5})
    assert frames.animate(tmp_path / "pair.gif", vortices=True).endswith(".gif")
    with pytest.raises(ValueError, match="vortices must be"):
        frames.plot(vortices="yes")
    (X, Y, Z), h = grid3(n=21, h=0.3)
    ring = ((np.hypot(X, Y) - 1.5) + 1j * (Z - 0.11)) * np.exp(-(X ** 2 + Y ** 2 + Z ** 2) / 8)
    sim = nl.NLSE(ring, h, backend="cpu")
    fig = sim.plot(vortices=True)
    lines = [ln for ln in fig.axes[0].lines]
    assert len(lines) == 1 and np.hypot(*lines[0].get_xydata().T).mean() == pytest.approx(1.5,
                                                                                     abs=h)
    fig = sim.plot(vortices=True, view="slice")
    with pytest.raises(TypeError, match="found must be"):
        nl.plot.overlay_vortices(fig.axes[0], [1, 2])


# --------------------------------------------------------------- bad input
@pytest.mark.parametrize("psi, spacing, kw, exc, words", [
    (np.ones(10, complex), 0.1, {}, ValueError, "psi must be a 2D or 3D array"),
    (np.ones((3, 3, 3, 3), complex), 0.1, {}, ValueError, "psi must be a 2D or 3D array"),
    (np.ones((1, 8), complex), 0.1, {}, ValueError, "at least 2 points"),
    (np.ones((8, 8)), 0.1, {}, TypeError, "psi must be a complex array"),
    ([["a", "b"], ["c", "d"]], 0.1, {}, TypeError, "psi must be a complex array"),
    (np.full((8, 8), np.nan + 0j), 0.1, {}, ValueError, "psi must be finite"),
    (np.ones((8, 8), complex), 0.0, {}, ValueError, "spacing must be finite and > 0"),
    (np.ones((8, 8), complex), -1.0, {}, ValueError, "spacing must be finite and > 0"),
    (np.ones((8, 8), complex), float("nan"), {}, ValueError, "spacing must be finite"),
    (np.ones((8, 8), complex), "h", {}, TypeError, "spacing must be a real number"),
    (np.ones((8, 8), complex), (0.1, 0.1, 0.1), {}, ValueError, "spacing must be a number or 2"),
    (np.ones((8, 8), complex), (0.1, -0.1), {}, ValueError, r"spacing\[1\] must be finite and > 0"),
    (np.ones((8, 8), complex), 0.1, {"origin": (0.0, np.inf)}, ValueError, r"origin\[1\]"),
    (np.ones((8, 8), complex), 0.1, {"threshold": 1.0}, ValueError, "threshold must be in"),
    (np.ones((8, 8), complex), 0.1, {"threshold": -0.1}, ValueError, "threshold must be"),
    (np.ones((8, 8), complex), 0.1, {"reach": -1}, ValueError, "reach must be an integer"),
    (np.ones((8, 8), complex), 0.1, {"reach": 1.5}, ValueError, "reach must be an integer"),
    (np.ones((8, 8), complex), 0.1, {"periodic": "yes"}, ValueError, "periodic must be"),
])
def test_bad_input_names_the_argument(psi, spacing, kw, exc, words):
    with pytest.raises(exc, match=words):
        nl.vortices(psi, spacing, **kw)


def test_nan_message_gives_the_index_and_edge_cases():
    psi = np.ones((6, 7), complex)
    psi[2, 5] = complex(np.inf, 0)
    with pytest.raises(ValueError, match=r"at index \(2, 5\)"):
        nl.vortices(psi, 1.0)
    assert len(nl.vortices(np.zeros((5, 5), complex), 1.0)) == 0      # no density, no vortex
    assert len(nl.vortices(np.zeros((4, 4, 4), complex), 1.0)) == 0
    v = nl.vortices(np.ones((2, 2), np.complex64), 1.0)
    assert len(v) == 0 and v.positions.shape == (0, 2)
    frames = nl.Frames()
    frames.append(0.0, np.ones(8, complex))
    with pytest.raises(ValueError, match="2D or 3D"):
        frames.vortices()
    with pytest.raises(ValueError, match="max_jump must be finite and > 0"):
        pair_frames(2)[0].vortices(max_jump=0.0)
