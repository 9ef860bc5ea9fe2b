"""The notebooks run end to end (their code cells, in order, headless)."""

import json
import pathlib

import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, tmp_path, monkeypatch):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    nb = json.loads(path.read_text())
    scope = {"__name__": "__notebook__"}
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            src = "".join(cell["source"])
            exec(compile(src, f"{path.name}[cell {i}]", "exec"), scope)
    import matplotlib.pyplot as plt
    plt.close("all")


def test_demo_cli_writes_outputs(tmp_path):
    """`python -m nlsepy demo` writes frames, summary and plot; the run matches
    the exact dark soliton it simulates."""
    pytest.importorskip("matplotlib")
    from nlsepy.__main__ import main
    out = tmp_path / "out"
    assert main(["demo", "--out", str(out)]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == ["dark_soliton.png", "frames.npz", "summary.json", "summary.txt"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["max_error_vs_exact"] < 1e-4
    assert abs(summary["norm_end"] / summary["norm_start"] - 1) < 1e-6
    assert (out / "dark_soliton.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_demo_cli_bad_input(tmp_path, capsys):
    from nlsepy.__main__ import main
    bad = tmp_path / "bad.toml"
    bad.write_text('[problem]\nexample = "nope"\n[run]\nt_end = 1.0\nframes = 2\n')
    assert main(["demo", "--input", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert "example must be one of" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
