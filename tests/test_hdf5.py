"""Run files: ``run(..., output="run.h5")`` streams frames and series into
HDF5 (h5py) and ``nl.open_run`` reads them back, also after an interrupt."""

import datetime
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

h5py = pytest.importorskip(
    "h5py", reason="h5py is not installed: the run files need the 'hdf5' extra "
                   "(pip install 'nlsepy[hdf5]')")

import nlsepy as nl  # noqa: E402

COMMON = ("model", "units", "nlsepy_version", "backend", "date", "time", "complete")


def nlse2d(n=24, h=0.3):
    x = h * (np.arange(n) - n / 2)
    X, Y = np.meshgrid(x, x, indexing="ij")
    psi = (1 + 0.3 * np.exp(-(X ** 2 + Y ** 2) / 2)) * np.exp(0.3j * X)
    return nl.NLSE(psi, h, a=0.5, s=-1.0, bc="periodic", scheme="2shoc", backend="cpu")


def check_common(f, model, complete=True):
    for key in COMMON:
        assert key in f.attrs, key
    assert f.attrs["model"] == model
    assert f.attrs["nlsepy_version"] == nl.__version__
    assert f.attrs["backend"] == "cpu"
    assert bool(f.attrs["complete"]) is complete
    date = datetime.datetime.fromisoformat(f.attrs["date"])
    assert date.utcoffset() == datetime.timedelta(0)
    assert abs((datetime.datetime.now(datetime.timezone.utc) - date).total_seconds()) < 600
    for name, ds in f.items():
        if isinstance(ds, h5py.Dataset):
            assert "units" in ds.attrs and "dims" in ds.attrs, name


def data(run, name):
    """An array of what open_run returned (xarray Dataset or dict)."""
    return np.asarray(run[name])


def attrs(run):
    return run["attrs"] if isinstance(run, dict) else run.attrs


def dims(run, name):
    return run["attrs"]["dims"][name] if isinstance(run, dict) else run[name].dims


# ------------------------------------------------------------- round trips
def test_nlse_2d_round_trip(tmp_path):
    sim = nlse2d()
    path = tmp_path / "run.h5"
    frames = sim.run(40 * sim.dt, frames=5, output=path)
    with h5py.File(path, "r") as f:  # plain h5py
        check_common(f, "NLSE")
        assert f["psi"].shape == (6, 24, 24) and f["psi"].chunks == (1, 24, 24)
        assert np.array_equal(f["psi"][:], frames.psi)
        assert np.array_equal(f["t"][:], frames.t)
        assert np.array_equal(f["x"][:], 0.3 * np.arange(24))
        assert np.array_equal(f["y"][:], 0.3 * np.arange(24))
        assert f["psi"].attrs["dims"] == "t,x,y"
        assert f["psi"].dims[0][0].name == "/t" and f["psi"].dims[2][0].name == "/y"
        p = f["parameters"].attrs
        assert p["a"] == 0.5 and p["s"] == -1.0 and p["scheme"] == "2shoc"
        assert p["bc"] == "periodic" and list(p["spacing"]) == [0.3, 0.3]
        assert f["norm"].shape == (6,) and f["energy"].shape == (6,)
        assert f["norm"][-1] == sim.norm() and f["energy"][-1] == sim.energy()
        assert list(f["steps"][:]) == [0, 8, 16, 24, 32, 40]
    run = nl.open_run(path)
    assert np.array_equal(data(run, "psi"), frames.psi)
    assert dims(run, "psi") == ("t", "x", "y")
    assert np.array_equal(data(run, "t"), frames.t)
    assert attrs(run)["model"] == "NLSE" and attrs(run)["parameters"]["V"] is None
    assert attrs(run)["complete"] is True
    # a subset of the frames
    part = nl.open_run(path, frames=slice(1, None, 2))
    assert np.array_equal(data(part, "psi"), frames.psi[1::2])
    assert np.array_equal(data(part, "norm"), data(run, "norm")[1::2])
    assert np.array_equal(data(nl.open_run(path, frames=[4, 0]), "t"), frames.t[[4, 0]])
    assert np.array_equal(data(nl.open_run(path, frames=-1), "psi"), frames.psi[-1:])


def test_nlse_potential_is_kept_as_a_dataset(tmp_path):
    sim = nlse2d()
    V = np.linspace(0, 1, 24 * 24).reshape(24, 24)
    sim.V = V
    sim.run(4 * sim.dt, frames=2, output=tmp_path / "v.hdf5")
    with h5py.File(tmp_path / "v.hdf5", "r") as f:
        assert np.array_equal(f["parameters/V"][()], V)


def test_dipolar_3d_round_trip(tmp_path):
    gpe = nl.DipolarGPE((8, 8, 10), 0.6, 0.005, g=3.0, gdd=1.0, trap=(1.0, 1.0, 1.5),
                        backend="cpu")
    gpe.imaginary_time(40, frames=2, output=tmp_path / "ground.h5")
    with h5py.File(tmp_path / "ground.h5", "r") as f:
        check_common(f, "DipolarGPE")
        assert f.attrs["time"] == "imaginary"
        assert list(f["step"][:]) == [0, 20, 40]
        assert np.array_equal(f["psi"][-1], gpe.psi)
    o = gpe.observables()
    frames = gpe.run(0.04, frames=4, output=tmp_path / "run.h5")
    with h5py.File(tmp_path / "run.h5", "r") as f:
        check_common(f, "DipolarGPE")
        assert f.attrs["time"] == "real"
        assert np.array_equal(f["psi"][:], frames.psi)
        assert np.array_equal(f["t"][:], frames.t)
        for q, a in enumerate("xyz"):
            assert np.array_equal(f[a][:], gpe.coords[q])
        assert f["mu"][0] == o["mu"] and f["energy"][0] == o["energy"]
        assert f["z2"][0] == o["x2"][2] and f["norm"][0] == o["norm"]
        for key in ("norm_sum", "mu_dbec", "energy_dbec", "x2", "y2", "r_rms", "psi0sq",
                    "steps_real", "steps_imaginary"):
            assert f[key].shape == (5,), key
        p = f["parameters"].attrs
        assert p["g"] == 3.0 and p["gdd"] == 1.0 and list(p["trap"]) == [1.0, 1.0, 1.5]
        assert p["geometry"] == "3d" and p["option"] == 2
        assert "hbar omega" in f.attrs["units"] and f["mu"].attrs["units"] == "hbar omega"
    run = nl.open_run(tmp_path / "run.h5")
    assert dims(run, "psi") == ("t", "x", "y", "z")
    assert np.array_equal(data(run, "z"), gpe.coords[2])
    assert np.array_equal(data(run, "psi"), frames.psi)


def test_dec_round_trip(tmp_path):
    sim = nl.DecGPE("bcc", blocks=3, spacing=1.0, trap=1.0, g=1.0, backend="cpu")
    r2 = (sim.positions ** 2).sum(axis=1)
    sim.psi = np.exp(-r2 / 2)
    frames = sim.run(6 * sim.dt, frames=3, output=tmp_path / "dec.h5")
    with h5py.File(tmp_path / "dec.h5", "r") as f:
        check_common(f, "DecGPE")
        assert np.array_equal(f["psi"][:], frames.psi)
        assert np.array_equal(f["t"][:], frames.t)
        pos = np.stack([f["x"][:], f["y"][:], f["z"][:]], axis=1)
        assert np.array_equal(pos, sim.positions)
        assert np.array_equal(f["volume"][:], sim.volumes)
        assert f["norm"][-1] == sim.norm() and f["energy"][-1] == sim.energy()
        assert f["parameters"].attrs["grid"] == "bcc"
    run = nl.open_run(tmp_path / "dec.h5")
    assert dims(run, "psi") == ("t", "cell") and dims(run, "x") == ("cell",)


def test_maxwell_bloch_round_trip(tmp_path):
    mb = nl.MaxwellBloch(h_t=0.1, n_t=101, line=("gaussian", 1.0), n_atoms=16, backend="cpu")
    e0 = nl.mbloch.sech_pulse(mb.t, 1.0, 4.0, area=2 * np.pi)
    out = mb.run(e0, h_z=0.1, n_z=6, save_every=2, output=tmp_path / "mb.h5")
    with h5py.File(tmp_path / "mb.h5", "r") as f:
        check_common(f, "MaxwellBloch")
        assert np.array_equal(f["fields"][:], out.fields)
        assert np.array_equal(f["z"][:], out.z)
        assert np.array_equal(f["populations"][:], out.populations)
        assert np.array_equal(f["t"][:], mb.t) and np.array_equal(f["detuning"][:], mb.detunings)
    run = nl.open_run(tmp_path / "mb.h5")
    assert dims(run, "fields") == ("z", "t", "mode")
    assert dims(run, "weight") == ("atom",)
    assert dims(run, "populations") == ("z_populations", "t", "level")


# ------------------------------------------------------------- interrupts
def test_interrupted_run_leaves_the_frames_so_far(tmp_path):
    """A callback raising KeyboardInterrupt after the third chunk: the file
    holds the first four frames, readable with plain h5py."""
    sim = nlse2d()
    path = tmp_path / "cut.h5"
    seen = []

    def stop(model):
        seen.append(model.t)
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as info:
        sim.run(100 * sim.dt, frames=10, output=path, callback=stop)
    kept = info.value.frames
    assert len(kept) == 4
    with h5py.File(path, "r") as f:
        check_common(f, "NLSE", complete=False)
        assert np.array_equal(f["psi"][:], kept.psi)
        assert np.array_equal(f["t"][:], kept.t)
        assert f["norm"].shape == (4,)
    run = nl.open_run(path)
    assert attrs(run)["complete"] is False and data(run, "t").shape == (4,)
    assert data(run, "psi").shape[0] == 4


def test_sigint_mid_run_leaves_a_readable_file(tmp_path):
    """SIGINT from a timer thread during a long run: KeyboardInterrupt,
    and the file holds exactly the frames the exception carries."""
    sim = nlse2d(n=48)
    path = tmp_path / "sigint.h5"
    timer = threading.Timer(0.6, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt) as info:
            sim.run(10 ** 5 * sim.dt, frames=2000, output=path)
    finally:
        timer.cancel()
        timer.join()
    kept = info.value.frames
    assert len(kept) >= 1
    with h5py.File(path, "r") as f:
        assert f["psi"].shape[0] == len(kept) == f["t"].shape[0]
        assert np.array_equal(f["psi"][:], kept.psi)
        assert not f.attrs["complete"]


_KILLED = textwrap.dedent("""
    import sys, time
    import numpy as np
    import nlsepy as nl
    x = 0.3 * (np.arange(24) - 12)
    psi = np.exp(-x[:, None] ** 2 - x[None, :] ** 2) + 0j
    sim = nl.NLSE(psi, 0.3, bc="periodic", backend="cpu")

    def tell(model):
        tell.seen.append(model.t)
        if len(tell.seen) == 3:
            time.sleep(1.0)  # the writer thread has flushed the fourth frame by now
            print("killme", flush=True)
            time.sleep(60)
    tell.seen = []
    sim.run(100 * sim.dt, frames=10, output=sys.argv[1], callback=tell)
""")


def test_killed_process_leaves_a_readable_file(tmp_path):
    """SIGKILL a second after the fourth frame was taken (its write and
    flush long done): the file opens with plain h5py and holds the frames
    up to the last flush."""
    path = tmp_path / "killed.h5"
    proc = subprocess.Popen([sys.executable, "-c", _KILLED, str(path)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "killme"
    finally:
        proc.kill()
        proc.wait()
    with h5py.File(path, "r") as f:
        assert f["t"].shape[0] == 4 and f["psi"].shape[0] >= 4
        assert np.all(np.isfinite(f["psi"][:4]))
        assert not f.attrs["complete"]
    run = nl.open_run(path)
    assert data(run, "t").shape == (4,) and data(run, "psi").shape[0] == 4


# ------------------------------------------------------------- open_run
def test_open_run_without_xarray(tmp_path, monkeypatch):
    sim = nlse2d()
    frames = sim.run(4 * sim.dt, frames=2, output=tmp_path / "run.h5")
    monkeypatch.setitem(sys.modules, "xarray", None)  # import xarray fails
    run = nl.open_run(tmp_path / "run.h5")
    assert isinstance(run, nl.common.hdf5.Run) and isinstance(run, dict)
    assert np.array_equal(run["psi"], frames.psi) and np.array_equal(run["t"], frames.t)
    # attribute access, as on an xarray Dataset
    assert run.psi is run["psi"] and np.array_equal(run.t, frames.t)
    assert run.attrs["model"] == "NLSE" and run.attrs is run["attrs"]
    assert run["attrs"]["dims"]["psi"] == ("t", "x", "y") == run.dims["psi"]
    assert run["attrs"]["parameters"]["scheme"] == "2shoc"
    assert set(run) >= {"psi", "t", "x", "y", "norm", "energy", "steps", "attrs"}
    assert set(run.coords) == {"t", "x", "y"}
    with pytest.raises(AttributeError, match="no 'rho'"):
        run.rho
    with pytest.raises(ImportError, match="xarray"):
        run.to_xarray()


def test_open_run_is_the_same_object_with_xarray(tmp_path):
    """With xarray installed open_run returns the same Run; to_xarray()
    gives the Dataset with the coordinates and units."""
    try:
        import xarray as xr
    except ImportError:
        pytest.skip("xarray is not installed (optional: pip install xarray)")
    sim = nlse2d()
    frames = sim.run(4 * sim.dt, frames=2, output=tmp_path / "run.h5")
    run = nl.open_run(tmp_path / "run.h5")
    assert type(run) is nl.common.hdf5.Run
    assert np.array_equal(run.psi, frames.psi)
    ds = run.to_xarray()
    assert isinstance(ds, xr.Dataset)
    assert set(ds.coords) == {"t", "x", "y"}
    assert ds["norm"].dims == ("t",) and ds["norm"].attrs["units"] == ""
    assert np.array_equal(ds.psi.values, frames.psi)


def test_open_run_refuses_what_is_not_a_run(tmp_path):
    with pytest.raises(FileNotFoundError):
        nl.open_run(tmp_path / "none.h5")
    (tmp_path / "text.h5").write_text("not hdf5")
    with pytest.raises(ValueError, match="not a readable HDF5 file"):
        nl.open_run(tmp_path / "text.h5")
    with h5py.File(tmp_path / "other.h5", "w") as f:
        f["a"] = 1
    with pytest.raises(ValueError, match="not an nlsepy run file"):
        nl.open_run(tmp_path / "other.h5")


# ------------------------------------------------------------- bad arguments
@pytest.mark.parametrize("name, error, match", [
    ("run.npz", ValueError, r"\.h5 or \.hdf5"),
    ("run", ValueError, r"\.h5 or \.hdf5"),
    ("no/such/folder/run.h5", FileNotFoundError, "does not exist"),
    ("folder.h5", ValueError, "is a folder"),
])
def test_bad_output_is_refused_before_anything(tmp_path, name, error, match):
    (tmp_path / "folder.h5").mkdir()
    before = sorted(os.listdir(tmp_path))
    sim = nlse2d()
    psi = sim.psi
    with pytest.raises(error, match=match):
        sim.run(4 * sim.dt, frames=2, output=tmp_path / name)
    assert sorted(os.listdir(tmp_path)) == before
    assert sim.t == 0.0 and np.array_equal(sim.psi, psi)


def test_bad_output_types_and_clashes(tmp_path):
    sim = nlse2d()
    with pytest.raises(TypeError, match="output must be a path"):
        sim.run(4 * sim.dt, frames=2, output=123)
    with pytest.raises(TypeError, match="output must be a path"):
        sim.run(4 * sim.dt, frames=2, output=b"run.h5")
    with pytest.raises(ValueError, match="same file"):
        sim.run(4 * sim.dt, frames=2, output=tmp_path / "a.h5", checkpoint=tmp_path / "a.h5")
    # another argument wrong: no file either
    with pytest.raises(ValueError, match="frames"):
        sim.run(4 * sim.dt, frames=50, output=tmp_path / "b.h5")
    with pytest.raises(ValueError, match="t_end"):
        sim.run(-1.0, output=tmp_path / "c.h5")
    gpe = nl.DipolarGPE((8,), 0.5, 0.01, geometry="1d-x", trap=(1, 1, 1), backend="cpu")
    with pytest.raises(ValueError, match=r"\.h5 or \.hdf5"):
        gpe.imaginary_time(10, output=tmp_path / "g.txt")
    mb = nl.MaxwellBloch(h_t=0.1, n_t=11, n_atoms=4, backend="cpu")
    with pytest.raises(ValueError, match=r"\.h5 or \.hdf5"):
        mb.run(np.zeros(11), 0.1, 2, output=tmp_path / "m.nc")
    assert sim.t == 0.0 and os.listdir(tmp_path) == []


def test_missing_h5py_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "h5py", None)
    sim = nlse2d()
    with pytest.raises(ImportError, match=r"pip install 'nlsepy\[hdf5\]'"):
        sim.run(4 * sim.dt, frames=2, output=tmp_path / "run.h5")
    assert os.listdir(tmp_path) == [] and sim.t == 0.0
    with pytest.raises(ImportError, match=r"nlsepy\[hdf5\]"):
        nl.open_run(tmp_path / "run.h5")


def test_existing_file_is_replaced(tmp_path):
    path = tmp_path / "run.h5"
    sim = nlse2d()
    sim.run(4 * sim.dt, frames=4, output=path)
    sim.run(sim.t + 2 * sim.dt, frames=2, output=path)
    with h5py.File(path, "r") as f:
        assert f["psi"].shape[0] == 3


def test_large_frames_are_split_into_chunks_below_the_limit(tmp_path, monkeypatch):
    """A frame larger than MAX_CHUNK_BYTES is chunked along its first axis
    (HDF5 refuses chunks of 4 GiB); the data still round-trip."""
    from nlsepy.common import hdf5 as _hdf5
    monkeypatch.setattr(_hdf5, "MAX_CHUNK_BYTES", 24 * 16 * 5)
    sim = nlse2d()
    frames = sim.run(4 * sim.dt, frames=2, output=tmp_path / "run.h5")
    with h5py.File(tmp_path / "run.h5", "r") as f:
        assert f["psi"].chunks == (1, 5, 24)
        assert np.array_equal(f["psi"][:], frames.psi)


@pytest.mark.parametrize("compression", ["lzf", "gzip"])
def test_compressed_frames_round_trip(tmp_path, monkeypatch, compression):
    from nlsepy.common import hdf5 as _hdf5
    monkeypatch.setattr(_hdf5, "COMPRESSION", compression)
    sim = nlse2d()
    frames = sim.run(4 * sim.dt, frames=2, output=tmp_path / "run.h5")
    with h5py.File(tmp_path / "run.h5", "r") as f:
        assert f["psi"].compression == compression
        assert np.array_equal(f["psi"][:], frames.psi)


def test_a_failed_write_is_raised_and_the_file_keeps_what_came_before(tmp_path, monkeypatch):
    """An error of the writer thread (here: the third entry) is raised by the
    run; the file is closed, not marked complete, with the entries before."""
    from nlsepy.common import hdf5 as _hdf5
    calls = []
    write = _hdf5.RunFile._write

    def failing(self, *args):
        calls.append(1)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        write(self, *args)

    monkeypatch.setattr(_hdf5.RunFile, "_write", failing)
    sim = nlse2d()
    with pytest.raises(OSError, match="No space left"):
        sim.run(40 * sim.dt, frames=5, output=tmp_path / "full.h5")
    with h5py.File(tmp_path / "full.h5", "r") as f:
        assert f["t"].shape == (2,) and not f.attrs["complete"]


def test_frames_still_on_their_way_are_written_in_order(tmp_path):
    """A frame handed over as a Future (a device copy under way) is written
    once it has arrived, before the frames after it."""
    from concurrent.futures import Future
    from nlsepy.common import hdf5 as _hdf5
    header = _hdf5.RunHeader(model="Test", parameters={"k": 1}, units="none",
                             coords={"x": (("x",), np.arange(3.0), "", "x")},
                             dims={"psi": ("x",)})
    late = Future()
    rf = _hdf5.RunFile(_hdf5.check_output(tmp_path / "f.h5"), header)
    rf.append("t", 0.0, {"psi": late})
    rf.append("t", 1.0, {"psi": np.ones(3)})
    threading.Timer(0.2, late.set_result, (np.zeros(3),)).start()
    rf.close()
    with h5py.File(tmp_path / "f.h5", "r") as f:
        assert np.array_equal(f["psi"][:], [np.zeros(3), np.ones(3)])
        assert list(f["t"][:]) == [0.0, 1.0] and f.attrs["complete"]


def test_frames_synced_to_disk_round_trip(tmp_path, monkeypatch):
    """With SYNC_BYTES the writer thread puts each frame on the disk and drops
    it from the page cache; the data are the same."""
    from nlsepy.common import hdf5 as _hdf5
    monkeypatch.setattr(_hdf5, "SYNC_BYTES", 1)
    sim = nlse2d()
    frames = sim.run(4 * sim.dt, frames=2, output=tmp_path / "run.h5")
    with h5py.File(tmp_path / "run.h5", "r") as f:
        assert np.array_equal(f["psi"][:], frames.psi)
