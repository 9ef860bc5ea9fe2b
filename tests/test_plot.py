"""Plots and animations (nlsepy.plot): every model's figure rendered to PNG
headless, a GIF of a short run, the MP4 and import rules."""

import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib", reason="the plots need matplotlib "
                                 "(pip install 'nlsepy[plot]')")
matplotlib.use("Agg")

import nlsepy as nl  # noqa: E402
from nlsepy import plot  # noqa: E402

DPI = 50  # small files: a panel of PANEL inches is 200 x 170 pixels
W, H = (int(round(v * DPI)) for v in plot.PANEL)
PNG = b"\x89PNG\r\n\x1a\n"


def png_size(path):
    """(width, height) of a PNG file, after checking its signature."""
    with open(path, "rb") as fh:
        head = fh.read(24)
    assert head[:8] == PNG, f"{path} is not a PNG"
    assert head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


def check_png(fig, path, cols, rows=1):
    assert os.path.isfile(path)
    assert png_size(path) == (cols * W, rows * H)
    w, h = fig.get_size_inches()
    assert (w, h) == pytest.approx((cols * plot.PANEL[0], rows * plot.PANEL[1]))
    assert not [p for p in os.listdir(os.path.dirname(path)) if p.startswith(".")]


def check_panels(fig, panels, total, xlabel, ylabel):
    """`total` Axes (panels and colorbars); the first `panels` are labelled."""
    assert len(fig.axes) == total
    for ax in fig.axes[:panels]:
        assert xlabel in ax.get_xlabel(), (ax.get_xlabel(), xlabel)
        assert ylabel in ax.get_ylabel(), (ax.get_ylabel(), ylabel)


@pytest.fixture(scope="module")
def soliton():
    psi0, h, p = nl.examples.dark_soliton(length=10.0, h=0.1)
    sim = nl.NLSE(psi0, h, a=p["a"], s=p["s"], bc="msd")
    return sim.run(0.5, frames=5), p


def gaussian(ndim, n, h):
    x = (np.arange(n) - n / 2) * h
    grids = np.meshgrid(*([x] * ndim), indexing="ij")
    r2 = sum(g ** 2 for g in grids)
    return np.exp(-r2) * np.exp(1j * grids[0])


# ------------------------------------------------------------------ NLSE
def test_nlse_1d_space_time_map(soliton, tmp_path):
    frames, p = soliton
    assert np.allclose(frames.grid.coords[0], p["x"])  # centred as examples.grid
    path = tmp_path / "nlse1d.png"
    fig = frames.plot(path=path, dpi=DPI)
    check_png(fig, path, 2)
    check_panels(fig, 2, 4, "x (dimensionless)", "t (dimensionless)")
    assert fig.axes[1].collections[0].get_cmap().name == "twilight"  # phase
    y0, y1 = fig.axes[0].get_ylim()
    assert y0 < frames.t[0] and y1 > frames.t[-1]


def test_nlse_2d_density_and_phase(tmp_path):
    sim = nl.NLSE(gaussian(2, 16, 0.5), 0.5, s=1.0, bc="periodic")
    frames = sim.run(0.2, frames=2)
    path = tmp_path / "nlse2d.png"
    fig = frames.plot(path=path, dpi=DPI)
    check_png(fig, path, 2)
    check_panels(fig, 2, 4, "x (dimensionless)", "y (dimensionless)")
    assert fig.axes[1].images[0].get_cmap().name == "twilight"
    assert "t = 0.2" in fig._suptitle.get_text()


def test_nlse_current_state(tmp_path):
    """sim.plot(): the state now, on the grid's own coordinates: 1D
    |psi|^2 against x (the exact dark soliton's profile), 2D density and
    phase."""
    psi0, h, p = nl.examples.dark_soliton(length=10.0, h=0.1)
    sim = nl.NLSE(psi0, h, a=p["a"], s=p["s"], bc="msd")
    path = tmp_path / "nlse-now-1d.png"
    fig = sim.plot(path=path, dpi=DPI)
    assert os.path.isfile(path)
    (ax,) = fig.axes
    x, dens = ax.lines[0].get_data()
    assert np.allclose(x, p["x"]) and np.allclose(dens, np.abs(psi0) ** 2)
    assert "x (dimensionless)" in ax.get_xlabel() and "t = 0" in fig._suptitle.get_text()
    sim2 = nl.NLSE(gaussian(2, 16, 0.5), 0.5, s=1.0, bc="periodic")
    path = tmp_path / "nlse-now-2d.png"
    fig = sim2.step(3).plot(path=path, dpi=DPI)
    check_png(fig, path, 2)
    check_panels(fig, 2, 4, "x (dimensionless)", "y (dimensionless)")
    assert f"t = {sim2.t:.4g}" in fig._suptitle.get_text()


def test_nlse_3d_integrated_and_slices(tmp_path):
    sim = nl.NLSE(gaussian(3, 8, 0.75), 0.75, s=1.0, bc="periodic")
    frames = sim.run(0.05, frames=1)
    for view in ("integrated", "slice"):
        path = tmp_path / f"nlse3d-{view}.png"
        fig = frames.plot(view=view, path=path, dpi=DPI)
        check_png(fig, path, 2, 2)
        check_panels(fig, 4, 8, "(dimensionless)", "(dimensionless)")
        assert [a.get_xlabel()[0] + a.get_ylabel()[0] for a in fig.axes[:4]] == \
            ["xy", "xz", "yz", "xy"]
    with pytest.raises(ValueError, match="view must be one of"):
        frames.plot(view="sideways")


def test_ax_draws_one_panel_and_fig_must_be_empty(soliton):
    from matplotlib.figure import Figure
    frames, _ = soliton
    fig = Figure()
    ax = fig.add_subplot()
    assert frames.plot(ax=ax) is fig
    assert ax.get_xlabel() == "x (dimensionless)" and len(fig.axes) == 2  # map + colorbar
    with pytest.raises(ValueError, match="fig must be an empty Figure"):
        frames.plot(fig=fig)
    with pytest.raises(ValueError, match="index must be"):
        nl.NLSE(gaussian(2, 8, 0.5), 0.5).run(0.01, frames=1).plot(index=5)


# ------------------------------------------------------------------ DipolarGPE
def test_dipolar_3d_state_and_frames(tmp_path):
    gpe = nl.DipolarGPE((8, 8, 8), 0.75, 0.01, g=2.0, backend="cpu")
    gpe.imaginary_time(10)
    path = tmp_path / "gpe.png"
    fig = gpe.plot(path=path, dpi=DPI)
    check_png(fig, path, 2, 2)
    check_panels(fig, 4, 7, "(oscillator lengths)", "")
    assert "integrated density" in fig.axes[3].get_ylabel()
    assert [ln.get_label() for ln in fig.axes[3].lines] == ["n(x)", "n(y)", "n(z)"]
    assert np.allclose(fig.axes[3].lines[2].get_ydata(), gpe.density("z"))
    assert "units of 2/ω" in fig._suptitle.get_text()

    frames = gpe.run(gpe.t + 0.02, frames=2)
    assert all(np.array_equal(a, b) for a, b in zip(frames.grid.coords, gpe.coords))
    fig = frames.plot(path=tmp_path / "frames.png", dpi=DPI)
    check_panels(fig, 4, 8, "(oscillator lengths)", "(oscillator lengths)")
    assert png_size(tmp_path / "frames.png") == (2 * W, 2 * H)


def test_dipolar_2d_and_1d(tmp_path):
    gpe = nl.DipolarGPE((16, 16), 0.5, 0.01, g=2.0, geometry="2d-xz", backend="cpu")
    fig = gpe.plot(path=tmp_path / "2d.png", dpi=DPI)
    assert png_size(tmp_path / "2d.png") == (3 * W, H)
    check_panels(fig, 2, 5, "x (oscillator lengths)", "z (oscillator lengths)")
    gpe = nl.DipolarGPE((16,), 0.5, 0.01, geometry="1d-x", backend="cpu")
    gpe.imaginary_time(4, frames=2)  # imaginary time: the frames keep t, drawn by number
    fig = gpe.frames.plot(path=tmp_path / "1d.png", dpi=DPI)
    check_panels(fig, 2, 4, "x (oscillator lengths)", "frame")
    fig = gpe.plot(path=tmp_path / "1d-state.png", dpi=DPI)
    check_png(fig, tmp_path / "1d-state.png", 2)
    check_panels(fig, 2, 2, "x (oscillator lengths)", "")


# ------------------------------------------------------------------ DecGPE
def test_dec_slice_of_cells(tmp_path):
    sim = nl.DecGPE("bcc", blocks=3, spacing=1.0, trap=1.0, backend="cpu")
    pos = sim.positions
    sim.psi = np.exp(-(pos ** 2).sum(axis=1) / 2) * np.exp(1j * np.arctan2(pos[:, 1], pos[:, 0]))
    path = tmp_path / "dec.png"
    fig = sim.plot(path=path, dpi=DPI)
    check_png(fig, path, 2)
    check_panels(fig, 2, 4, "x (oscillator lengths)", "y (oscillator lengths)")
    plane = np.abs(pos[:, 2] - pos[np.argmin(np.abs(pos[:, 2])), 2]) < 1e-9
    assert len(fig.axes[0].collections[0].get_offsets()) == plane.sum()
    fig = sim.plot(width=1.0)
    assert len(fig.axes[0].collections[0].get_offsets()) == (np.abs(pos[:, 2]) <= 0.5).sum()
    with pytest.raises(ValueError, match="no cell within"):
        sim.plot(z=100.0, width=0.1)
    frames = sim.run(3 * sim.dt, frames=1)
    fig = frames.plot(path=tmp_path / "frames.png", dpi=DPI)
    check_panels(fig, 2, 4, "x (oscillator lengths)", "y (oscillator lengths)")


def test_dec_plot_slice_is_the_density_at_the_cells():
    """DecGPE.plot_slice: |psi|^2 interpolated on the plane z, exact at the
    circumcentres (on the cubic grid a 2 h / 4 grid of the box puts every
    other point on a cell centre); on the Axes given, imshow's keywords
    passed on, the box as the extent, the plane and time in the title."""
    pytest.importorskip("scipy")
    import matplotlib.pyplot as plt
    sim = nl.DecGPE("cubic", blocks=(6, 5, 4), spacing=0.5, trap=1.0, backend="cpu")
    x, y, z = sim.positions.T
    sim.psi = (1 + 0.3 * x - 0.2 * y + 0.1 * z) * np.exp(1j * x)
    fig, ax = plt.subplots()
    im = sim.plot_slice(0.25, ax=ax, shape=(13, 11), cmap="magma")
    assert im.axes is ax and im.get_cmap().name == "magma"
    assert im.get_extent() == pytest.approx([-1.5, 1.5, -1.25, 1.25])
    img = np.asarray(im.get_array()).T  # (x, y)
    assert img.shape == (13, 11)
    on = np.isclose(z, 0.25)
    i = np.rint((x[on] + 1.5) / 0.25).astype(int)
    j = np.rint((y[on] + 1.25) / 0.25).astype(int)
    assert np.all(i % 2 == 1) and np.all(j % 2 == 1) and on.sum() == 30
    np.testing.assert_allclose(img[i, j], np.abs(sim.psi[on]) ** 2, rtol=1e-12)
    assert "z = 0.25" in ax.get_title() and "oscillator lengths" in ax.get_xlabel()
    assert sim.plot_slice().axes.figure is not fig  # a new figure without ax
    plt.close("all")


# ------------------------------------------------------------------ magnet
def test_magnet_phi_and_winding(tmp_path):
    sol = nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.0, 0.05, backend="cpu").solve()
    path = tmp_path / "magnet.png"
    fig = sol.plot(n_turns=6, path=path, dpi=DPI)
    check_png(fig, path, 2)
    check_panels(fig, 1, 3, "r (m)", "z (m)")
    assert fig.axes[1].get_ylabel() == "ΔΦ (A)" and "(m)" in fig.axes[1].get_xlabel()
    wires = [ln for ln in fig.axes[1].lines if ln.get_marker() == "o"]
    assert sum(len(ln.get_xdata()) for ln in wires) == 6
    assert len(sol.plot(n_turns=None).axes) == 3


# ------------------------------------------------------------------ Maxwell-Bloch
@pytest.fixture(scope="module")
def pulse():
    mb = nl.MaxwellBloch(h_t=0.1, n_t=41, n_atoms=4, backend="cpu")
    return mb.run(nl.mbloch.sech_pulse(mb.t, 1.0, 2.0, area=1.0), 0.2, 4)


def test_mbloch_fields_and_populations(pulse, tmp_path):
    path = tmp_path / "mb.png"
    fig = pulse.plot(path=path, dpi=DPI)
    check_png(fig, path, 2)
    assert len(fig.axes) == 3  # the mode's map, the populations, the map's colorbar
    assert fig.axes[0].get_ylabel() == "z (units of 1/β)"
    for ax in fig.axes[:2]:
        assert ax.get_xlabel().startswith("t (retarded")
    assert fig.axes[1].get_ylabel() == "population" and len(fig.axes[1].lines) == 4
    from matplotlib.figure import Figure
    mine = Figure()
    ax = mine.add_subplot()
    assert pulse.plot(ax=[ax], cmap="magma") is mine  # the map only, with pcolormesh's keywords
    assert ax.collections[0].get_cmap().name == "magma" and len(mine.axes) == 2


def test_mbloch_animation_along_z(pulse, tmp_path):
    Image = pytest.importorskip("PIL.Image")
    out = pulse.animate(tmp_path / "mb.gif", dpi=DPI)
    with Image.open(out) as im:
        assert im.format == "GIF" and im.n_frames == pulse.z.size


# ------------------------------------------------------------------ animations
def test_gif_of_a_1d_run(soliton, tmp_path):
    frames, _ = soliton
    path = tmp_path / "soliton.gif"
    assert frames.animate(path, fps=5, dpi=DPI) == str(path)
    with open(path, "rb") as fh:
        assert fh.read(6) in (b"GIF87a", b"GIF89a")
    assert os.listdir(tmp_path) == ["soliton.gif"]  # no temporary file left
    Image = pytest.importorskip("PIL.Image")
    with Image.open(path) as im:
        assert im.n_frames == len(frames)
        assert im.size == (int(6.0 * DPI), H)


def test_mp4_without_ffmpeg_is_a_clear_error(soliton, tmp_path, monkeypatch):
    frames, _ = soliton
    monkeypatch.setattr(shutil, "which", lambda *args, **kwargs: None)
    with pytest.raises(RuntimeError, match="needs ffmpeg.*install ffmpeg.*\\.gif"):
        frames.animate(tmp_path / "run.mp4")
    assert os.listdir(tmp_path) == []
    # without a suffix: GIF when there is no ffmpeg; .gif is GIF even with ffmpeg
    assert frames[:2].animate(tmp_path / "run", dpi=20).endswith("run.gif")
    monkeypatch.setattr(shutil, "which", lambda *args, **kwargs: "/usr/bin/ffmpeg")
    assert frames[:2].animate(tmp_path / "run2.gif", dpi=20).endswith("run2.gif")
    with open(tmp_path / "run2.gif", "rb") as fh:
        assert fh.read(3) == b"GIF"
    with pytest.raises(ValueError, match="must end in .gif or .mp4"):
        frames.animate(tmp_path / "run.avi")


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="ffmpeg is not on PATH")
def test_mp4_with_ffmpeg(soliton, tmp_path):
    frames, _ = soliton
    path = frames[:3].animate(tmp_path / "run", dpi=20)
    assert path.endswith("run.mp4")
    with open(path, "rb") as fh:
        assert fh.read(8)[4:] == b"ftyp"  # an ISO media (MP4) file
    assert os.listdir(tmp_path) == ["run.mp4"]


def test_failed_animation_leaves_no_file(soliton, tmp_path, monkeypatch):
    from matplotlib import animation
    frames, _ = soliton
    (tmp_path / "old.gif").write_bytes(b"old")

    def broken(self, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(animation.PillowWriter, "grab_frame", broken)
    with pytest.raises(OSError, match="No space left"):
        frames.animate(tmp_path / "old.gif", dpi=20)
    assert os.listdir(tmp_path) == ["old.gif"]
    assert (tmp_path / "old.gif").read_bytes() == b"old"


# ------------------------------------------------------------------ imports
def test_no_pyplot_at_import_nor_when_plotting():
    code = ("import sys, nlsepy as nl, numpy as np\n"
            "assert 'matplotlib' not in sys.modules, 'matplotlib imported by import nlsepy'\n"
            "sim = nl.NLSE(np.ones(16, complex), 0.1)\n"
            "sim.run(0.001, frames=1).plot()\n"
            "assert 'matplotlib' in sys.modules\n"
            "assert 'matplotlib.pyplot' not in sys.modules, 'pyplot imported'\n")
    env = dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr


def test_without_matplotlib_names_the_extra(soliton, monkeypatch):
    frames, _ = soliton
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"pip install 'nlsepy\[plot\]'"):
        frames.plot()
