"""The kernels' tuning switches (nlsepy.common.tuning): one declared table per
model, a context manager that sets them for the handles made inside it and
gives the environment back, and a reader that parses them as the C and CUDA
backends do (csrc/<stem>/<stem>_tuning.c)."""

import os

import pytest

import nlsepy as nl
from nlsepy.common import tuning as T


def test_table_names_every_switch_the_backends_read():
    """Every NLSEPY_* variable that csrc/ and cuda/ read with getenv is in the
    table, and the table names no variable they do not read."""
    import pathlib
    import re
    root = pathlib.Path(__file__).resolve().parents[1]
    read = set()
    for path in list((root / "csrc").rglob("*.[ch]")) + list((root / "cuda").rglob("*.cu*")):
        read |= set(re.findall(r'getenv\("(NLSEPY_[A-Z0-9_]+)"\)', path.read_text()))
    table = {s.env for s in T.switches().values() if s.model != "dist" and s.when == "runtime"}
    assert read and read == table
    # getenv only in the one reader of each model
    readers = {p.name for p in (root / "csrc").rglob("*_tuning.c")}
    for path in list((root / "csrc").rglob("*.[ch]")) + list((root / "cuda").rglob("*.cu*")):
        if "getenv(" in path.read_text():
            assert path.name in readers, f"{path} reads the environment"


def test_tuning_sets_and_restores_the_environment(monkeypatch):
    monkeypatch.setenv("NLSEPY_DEC_KERNEL", "3")
    monkeypatch.delenv("NLSEPY_MBLOCH_PIPE", raising=False)
    with T.tuning(dec_kernel=21, mbloch_pipe=2) as set_:
        assert set_ == {"NLSEPY_DEC_KERNEL": "21", "NLSEPY_MBLOCH_PIPE": "2"}
        assert os.environ["NLSEPY_DEC_KERNEL"] == "21"
        assert T.current("dec")["dec_kernel"] == 21
        assert T.current("mbloch")["mbloch_pipe"] == 2
    assert os.environ["NLSEPY_DEC_KERNEL"] == "3"
    assert "NLSEPY_MBLOCH_PIPE" not in os.environ
    with pytest.raises(RuntimeError):  # restored on an error too
        with T.tuning(dec_kernel=None):
            assert "NLSEPY_DEC_KERNEL" not in os.environ
            raise RuntimeError("inside")
    assert os.environ["NLSEPY_DEC_KERNEL"] == "3"


@pytest.mark.parametrize("settings, match", [
    ({"dec_kernl": 1}, "'dec_kernl' is not a tuning switch"),
    ({"dec_kernel": 10}, "dec_kernel must be"),
    ({"dec_march_ring": 7}, "dec_march_ring must be"),
    ({"dec_tile_mib": -1.0}, "dec_tile_mib must be"),
    ({"dec_march_tile": "8x0"}, "dec_march_tile must be"),
    ({"mbloch_kernel": "fast"}, "mbloch_kernel must be"),
    ({"mbloch_atoms_per_block": 3}, "mbloch_atoms_per_block must be"),
    ({"dipolar_xsolve": "lu"}, "dipolar_xsolve must be"),
    ({"mbloch_syncthreads": 1}, "build-time switch"),
])
def test_tuning_refuses_what_the_table_does_not_take(monkeypatch, settings, match):
    monkeypatch.delenv("NLSEPY_DEC_MARCH_BAND", raising=False)
    with pytest.raises(ValueError, match=match):
        with T.tuning(**{"dec_march_band": 8, **settings}):
            pass
    assert "NLSEPY_DEC_MARCH_BAND" not in os.environ  # nothing was set


def test_current_reads_as_the_backends_do(monkeypatch):
    monkeypatch.setenv("NLSEPY_DEC_MARCH_TILE", "8x6")
    monkeypatch.setenv("NLSEPY_DEC_TILE_MIB", "garbage")
    monkeypatch.setenv("NLSEPY_HALO", "host")
    dec = T.current("dec")
    assert dec["dec_march_tile"] == (8, 6)
    assert dec["dec_tile_mib"] is None        # not accepted: the backend's own choice
    assert T.current("dist")["halo"] == "host"
    assert T.current("fd") == {} and T.current("magnet") == {}
    with pytest.raises(ValueError, match="model must be one of"):
        T.current("nlse")


def test_a_solver_made_inside_the_block_runs(monkeypatch):
    """A switch a CPU handle does not read changes nothing of its result."""
    monkeypatch.delenv("NLSEPY_DEC_KERNEL", raising=False)
    ref = nl.DecGPE("bcc", blocks=3, trap=1.0, backend="cpu")
    ref.psi = 1.0 + 0 * ref.positions[:, 0]
    with T.tuning(dec_kernel=0):
        sim = nl.DecGPE("bcc", blocks=3, trap=1.0, backend="cpu", psi0=ref.psi)
    sim.step(3)
    ref.step(3)
    assert (sim.psi == ref.psi).all()


@pytest.mark.parametrize("model", T.MODELS)
def test_markdown_tables(model):
    text = T.markdown(model)
    for s in T.switches(model).values():
        assert f"`{s.env}`" in text


@pytest.mark.parametrize("model", ["dipolar", "mbloch", "dec"])
def test_each_model_page_names_its_switches(model):
    import pathlib
    page = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "models" / f"{model}.md")
    text = page.read_text()
    assert "## Tuning switches" in text
    for s in T.switches(model).values():
        assert f"`{s.env}`" in text, f"docs/models/{model}.md does not name {s.env}"
