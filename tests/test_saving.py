"""One API for saving and plotting: every model has ``save(path)``, whose
format the file's ending chooses (``.npz`` or ``.h5``/``.hdf5``, any other
refused), and ``plot()``; ``load`` reads back, bit for bit, what ``save``
wrote in either format, and ``nl.open_run`` and plain h5py read the HDF5
files."""

import dataclasses
import os
import sys

import numpy as np
import pytest

import nlsepy as nl

os.environ.setdefault("MPLBACKEND", "Agg")

MODELS = ("NLSE", "DipolarGPE", "DecGPE", "CoaxialMagnet", "MaxwellBloch")


def nlse():
    x = np.linspace(-4, 4, 48)
    sim = nl.NLSE((np.exp(-x ** 2) * np.exp(0.7j * x)).astype(complex), 0.1, bc="periodic",
                  V=0.1 * x ** 2, backend="cpu")
    sim.step(7)
    return sim


def dipolar():
    gpe = nl.DipolarGPE((10, 8, 8), 0.5, 0.01, g=5.0, gdd=2.0, trap=(1.0, 1.2, 1.4),
                        backend="cpu")
    gpe.imaginary_time(4)
    gpe.real_time(3)
    return gpe


def dec():
    sim = nl.DecGPE("bcc", 3, g=1.0, trap=1.0, backend="cpu")
    sim.psi = (np.exp(-np.sum(sim.positions ** 2, axis=1)) *
               np.exp(0.3j * sim.positions[:, 0])).astype(complex)
    sim.step(5)
    return sim


def magnet():
    mag = nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.0, 0.05, B=1e-3)
    mag.solve("rbsor", tol=1e-6)
    return mag


def mbloch():
    mb = nl.MaxwellBloch(h_t=0.05, n_t=81, line=("gaussian", 1.0), n_atoms=6)
    mb.run(nl.mbloch.sech_pulse(mb.t, 1.0, 2.0, area=np.pi), h_z=0.1, n_z=3)
    return mb


MAKE = {"NLSE": nlse, "DipolarGPE": dipolar, "DecGPE": dec, "CoaxialMagnet": magnet,
        "MaxwellBloch": mbloch}
STEPPERS = ("NLSE", "DipolarGPE", "DecGPE")


def test_every_model_has_plot_and_save():
    for name in MODELS:
        cls = getattr(nl, name)
        assert callable(getattr(cls, "plot", None)), name
        assert callable(getattr(cls, "save", None)), name


def advance(sim, n):
    (getattr(sim, "real_time", None) or sim.step)(n)


@pytest.mark.parametrize("suffix", [".npz", ".h5", ".hdf5"])
@pytest.mark.parametrize("name", STEPPERS)
def test_load_reads_what_save_wrote_bit_for_bit(tmp_path, name, suffix):
    sim = MAKE[name]()
    path = tmp_path / f"state{suffix}"
    sim.save(path)
    back = type(sim).load(path, backend="cpu")
    assert np.array_equal(back.psi, sim.psi) and back.psi.dtype == sim.psi.dtype
    assert back.t == sim.t
    assert (back.V is None and sim.V is None) or np.array_equal(back.V, sim.V)
    advance(sim, 3)
    advance(back, 3)
    assert np.array_equal(back.psi, sim.psi) and back.t == sim.t


@pytest.mark.parametrize("name", STEPPERS)
def test_h5_save_is_a_run_file_of_one_frame(tmp_path, name):
    h5py = pytest.importorskip("h5py")
    sim = MAKE[name]()
    sim.save(tmp_path / "state.h5")
    run = nl.open_run(tmp_path / "state.h5")
    assert run.attrs["model"] == name and run.attrs["complete"] is True
    assert run.psi.shape == (1,) + sim.psi.shape
    assert np.array_equal(run.psi[0], sim.psi) and run.t.tolist() == [sim.t]
    with h5py.File(tmp_path / "state.h5", "r") as f:  # plain h5py reads it too
        assert np.array_equal(f["psi"][0], sim.psi)
        assert str(f["checkpoint"]["_model"].asstr()[()]) == name


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("bad", ["state.txt", "state", "state.npy", "state.h5.bak"])
def test_save_refuses_an_ending_it_does_not_write(tmp_path, name, bad):
    sim = MAKE[name]()
    with pytest.raises(ValueError) as exc:
        sim.save(tmp_path / bad)
    msg = str(exc.value)
    assert bad in msg and ".npz" in msg and ".h5" in msg
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name", ["CoaxialMagnet", "MaxwellBloch"])
def test_result_models_save_their_last_result(tmp_path, name):
    h5py = pytest.importorskip("h5py")
    model = MAKE[name]()
    result = model._last_result
    big = "phi" if name == "CoaxialMagnet" else "fields"
    model.save(tmp_path / "r.npz")
    with np.load(tmp_path / "r.npz") as d:
        assert str(d["_model"]) == name
        assert np.array_equal(d[big], getattr(result, big), equal_nan=True)
    model.save(tmp_path / "r.h5")
    run = nl.open_run(tmp_path / "r.h5")
    assert run.attrs["model"] == name
    assert np.array_equal(run[big], getattr(result, big), equal_nan=True)
    with h5py.File(tmp_path / "r.h5", "r") as f:
        assert np.array_equal(f[big][()], getattr(result, big), equal_nan=True)
        assert "parameters" in f


def mbloch_open():
    """An open Lambda system with branching decay, dephasing and Doppler
    classes: the richest constructor arguments a file must give back."""
    mb = nl.MaxwellBloch(n_g=2, n_e=1, modes=(-1, 0), F=[[1.0], [0.8]], h_t=0.05, n_t=81,
                         line=("gaussian", 0.3), n_atoms=3, beta=1.5,
                         decay=[(1.0, 2, 0, 0.5), (1.0, 2, 1, 0.5)], dephasing=[0.0, 0.05, 0.0],
                         doppler=nl.mbloch.Doppler(factors=[-1.0, 1.0], width=0.8, n_classes=5),
                         dtype=np.complex64, backend="cpu")
    mb.run(open_fields(mb), 0.02, 4, density=True)
    return mb


def open_fields(mb):
    return {0: 0.3 * nl.mbloch.sech_pulse(mb.t, 1.0, 1.5, area=1.0), -1: 0.2 + 0 * mb.t}


def same(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True) and \
            np.asarray(a).dtype == np.asarray(b).dtype
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    return a == b or (a != a and b != b)


@pytest.mark.parametrize("suffix", [".npz", ".h5"])
@pytest.mark.parametrize("name", ["CoaxialMagnet", "MaxwellBloch", "MaxwellBloch-open"])
def test_result_models_load_what_save_wrote(tmp_path, name, suffix):
    """load() makes the model again from its file (the same constructor
    arguments, tuples, arrays, dtypes and Doppler classes included) with
    the saved result, bit for bit, as its last one; the model computes the
    same result again."""
    if suffix == ".h5":
        pytest.importorskip("h5py")
    model = mbloch_open() if name == "MaxwellBloch-open" else MAKE[name]()
    model.save(tmp_path / f"r{suffix}")
    back = type(model).load(tmp_path / f"r{suffix}", backend="cpu")
    want = {k: v for k, v in model._replace_args().items() if k not in ("backend", "comm")}
    got = {k: v for k, v in back._replace_args().items() if k not in ("backend", "comm")}
    assert want.keys() == got.keys()
    for k in want:
        assert same(got[k], want[k]), k
    saved, loaded = model._last_result, back._last_result
    for f in dataclasses.fields(saved):
        a, b = getattr(saved, f.name), getattr(loaded, f.name)
        if a is model:
            assert b is back
        else:
            assert same(b, a) and type(b) is type(a), f.name
    if name == "CoaxialMagnet":
        again = back.solve("rbsor", tol=1e-6)
        assert np.array_equal(again.phi, saved.phi, equal_nan=True)
    else:
        fields0 = open_fields(back) if name == "MaxwellBloch-open" else \
            nl.mbloch.sech_pulse(back.t, 1.0, 2.0, area=np.pi)
        run = dict(h_z=0.02, n_z=4, density=True) if name == "MaxwellBloch-open" else \
            dict(h_z=0.1, n_z=3)
        assert np.array_equal(back.run(fields0, **run).fields, saved.fields)


@pytest.mark.parametrize("name", ["CoaxialMagnet", "MaxwellBloch"])
def test_result_models_load_refuses_what_is_not_their_file(tmp_path, name):
    cls = getattr(nl, name)
    nlse().save(tmp_path / "other.npz")
    with pytest.raises(ValueError, match="other.npz.*NLSE"):
        cls.load(tmp_path / "other.npz")
    with pytest.raises(FileNotFoundError, match="nowhere.npz"):
        cls.load(tmp_path / "nowhere.npz")
    model = MAKE[name]()
    model.save(tmp_path / "r.npz")
    with np.load(tmp_path / "r.npz") as d:  # the same file without its model_json
        kept = {k: d[k] for k in d.files if k != "model_json"}
    np.savez(tmp_path / "old.npz", **kept)
    with pytest.raises(ValueError, match="old.npz.*model_json"):
        cls.load(tmp_path / "old.npz")
    raw = (tmp_path / "r.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match="cut.npz"):
        cls.load(tmp_path / "cut.npz")


@pytest.mark.parametrize("name", ["CoaxialMagnet", "MaxwellBloch"])
def test_result_models_need_a_result_to_plot_or_save(tmp_path, name):
    model = (nl.CoaxialMagnet(0.25, 0.5, 1.0, 1.0, 0.05) if name == "CoaxialMagnet" else
             nl.MaxwellBloch(h_t=0.05, n_t=81, n_atoms=6))
    for call in (model.plot, lambda: model.save(tmp_path / "r.npz")):
        with pytest.raises(RuntimeError, match="first"):
            call()
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name", MODELS)
def test_every_model_plots(tmp_path, name):
    pytest.importorskip("matplotlib")
    model = MAKE[name]()
    fig = model.plot(path=tmp_path / "fig.png")
    assert fig.axes and os.path.getsize(tmp_path / "fig.png") > 0


@pytest.mark.parametrize("name", STEPPERS)
def test_load_takes_the_backend_it_is_given(tmp_path, name, monkeypatch):
    """load() chooses its backend as a constructor does, never the one that
    wrote the file: "auto" (the default) is the GPU where this machine has
    one, else the CPU (NLSEPY_BACKEND steers it); an explicit backend is
    taken.  The state comes back bit for bit either way, and on the CPU,
    which wrote it, the steps that follow are the saved solver's bit for bit."""
    monkeypatch.delenv("NLSEPY_BACKEND", raising=False)
    model = MAKE[name]()  # a CPU solver
    model.save(tmp_path / "ck.npz")
    cls = type(model)
    auto = cls.load(tmp_path / "ck.npz")
    assert auto.backend == ("cuda" if "cuda" in nl.backends(name) else "cpu")
    assert np.array_equal(auto.psi, model.psi) and auto.t == model.t
    monkeypatch.setenv("NLSEPY_BACKEND", "cpu")
    assert cls.load(tmp_path / "ck.npz").backend == "cpu"
    monkeypatch.delenv("NLSEPY_BACKEND")
    cpu = cls.load(tmp_path / "ck.npz", backend="cpu")
    assert cpu.backend == "cpu"
    advance(model, 3)
    advance(cpu, 3)
    assert np.array_equal(cpu.psi, model.psi) and cpu.t == model.t


def test_h5_without_h5py_is_a_clear_import_error(tmp_path, monkeypatch):
    sim = nlse()
    monkeypatch.setitem(sys.modules, "h5py", None)  # import h5py fails
    with pytest.raises(ImportError, match=r"h5py.*pip install 'nlsepy\[hdf5\]'"):
        sim.save(tmp_path / "state.h5")
    assert os.listdir(tmp_path) == []
    sim.save(tmp_path / "state.npz")  # the other format needs nothing more
    assert np.array_equal(nl.NLSE.load(tmp_path / "state.npz").psi, sim.psi)


# constructor arguments changed on load: the state and clock are the saved
# ones, and the loaded solver steps as a new one made with those arguments
# from the saved state does
CHANGES = {"NLSE": [{"a": 0.7}, {"scheme": "cd", "fused": False}, {"dt": 0.002}],
           "DecGPE": [{"g": 2.5}, {"trap": (0.5, 0.6, 0.7), "centre": (0.1, 0.0, 0.0)}, {"dt": 0.004}]}


def fresh(name, saved, change, path):
    """A new solver from the saved one's state, arguments and `change` (the
    DEC's previous state too, unless dt changes)."""
    if name == "NLSE":
        args = dict(a=saved.a, s=saved.s, scheme=saved.scheme, bc=saved.bc, dt=saved.dt,
                    V=saved.V, backend="cpu")
        args.update(change)
        return nl.NLSE(saved.psi, saved.spacing, **args)
    args = dict(g=saved.g, trap=saved.trap, bc=saved.bc, centre=saved.centre, dt=saved.dt,
                backend="cpu")
    args.update(change)
    with np.load(path) as f:
        prev = None if "dt" in change else f["psi_prev"]
    return nl.DecGPE(saved.grid, saved.blocks, saved.spacing, psi0=saved.psi, psi_prev=prev,
                     **args)


@pytest.mark.parametrize("name", ["NLSE", "DecGPE"])
def test_load_changes_constructor_arguments(tmp_path, name):
    saved = MAKE[name]()
    path = str(tmp_path / "c.npz")
    saved.save(path)
    for change in CHANGES[name]:
        sim = getattr(nl, name).load(path, backend="cpu", **change)
        assert sim.t == saved.t and sim._steps == saved._steps
        np.testing.assert_array_equal(sim.psi, saved.psi)
        for key, value in change.items():
            if key == "fused":  # seen in the kernel a step runs
                sim.step(1)
                got, value = sim.last_kernel, "staged"
            else:
                got = getattr(sim, key)
            assert (tuple(got) if isinstance(value, tuple) else got) == value, key
        if "fused" in change:
            continue
        ref = fresh(name, saved, change, path)
        sim.step(4)
        ref.step(4)
        np.testing.assert_array_equal(sim.psi, ref.psi)
        dt = change.get("dt", saved.dt)
        assert sim.t == pytest.approx(saved.t + 4 * dt, rel=1e-14), change
        assert sim._steps == saved._steps + 4


@pytest.mark.parametrize("name", ["NLSE", "DecGPE"])
def test_load_refuses_what_it_cannot_change(tmp_path, name):
    saved = MAKE[name]()
    path = str(tmp_path / "c.npz")
    saved.save(path)
    cls = getattr(nl, name)
    for key in ("V", "psi0", "spacing", "dtype", "colour"):
        with pytest.raises(TypeError, match=f"cannot change '{key}'"):
            cls.load(path, backend="cpu", **{key: None})
    bad = {"NLSE": {"scheme": "6th"}, "DecGPE": {"g": "strong"}}[name]
    # the constructor's own error (TypeError or ValueError), naming the file and the change
    with pytest.raises((TypeError, ValueError), match=f"{path} with {next(iter(bad))} changed"):
        cls.load(path, backend="cpu", **bad)
    # a step the changed parameters make unstable is refused, unless forced
    big = {"dt": 10.0}
    with pytest.raises(ValueError, match="dt changed"):
        cls.load(path, backend="cpu", **big)
    assert cls.load(path, backend="cpu", force=True, **big).dt == 10.0
