"""The HTML documentation builds with warnings as errors (what `make docs` runs).

The API pages come from the docstrings of the installed package (numpydoc),
the notebooks are rendered as stored, never executed (myst-nb with
``nb_execution_mode = "off"``).
"""

import json
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _need_docs_deps():
    for mod in ("sphinx", "numpydoc", "myst_parser", "myst_nb"):
        pytest.importorskip(mod, reason=f"the docs need {mod} (pip install 'nlsepy[docs]')")


@pytest.fixture(scope="module")
def html(tmp_path_factory):
    """Build the docs once into a temporary folder; returns the HTML folder."""
    _need_docs_deps()
    out = tmp_path_factory.mktemp("docs")
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
           "-d", str(out / "doctrees"), str(DOCS), str(out / "html")]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"sphinx-build failed:\n{proc.stdout}\n{proc.stderr}"
    return out / "html"


def test_docs_build_without_warnings(html):
    for page in ["index", "api/nlse", "api/dipolar", "api/magnet", "api/mbloch", "api/dec",
                 "api/runs", "api/units", "api/plot", "api/mpi", "api/helpers",
                 "ARCHITECTURE", "DBEC_FILES"]:
        assert (html / f"{page}.html").is_file(), page


def test_every_public_name_has_an_entry(html):
    """Each name of ``nlsepy.__all__`` (and the result classes) is documented."""
    import nlsepy as nl
    text = "".join(p.read_text(encoding="utf-8") for p in (html / "api").glob("*.html"))
    anchors = set(re.findall(r'<dt class="sig sig-object py" id="([^"]+)"', text))
    anchors |= set(re.findall(r'<section id="module-([^"]+)"', text))
    modules = {"mbloch": "nlsepy.mbloch", "dbec": "nlsepy.dipolar.dbec", "plot": "nlsepy.plot",
               "units": "nlsepy.units", "examples": "nlsepy.examples", "runner": "nlsepy.runner"}
    for name in nl.__all__:
        target = modules.get(name, f"nlsepy.{name}")
        if name == "Frames":
            target = "nlsepy.runner.Frames"
        assert target in anchors, f"{name} ({target}) has no entry in the API pages"
    for method in ["nlsepy.NLSE.run", "nlsepy.DipolarGPE.imaginary_time",
                   "nlsepy.CoaxialMagnet.solve", "nlsepy.MaxwellBloch.run", "nlsepy.DecGPE.run",
                   "nlsepy.MagnetSolution.winding", "nlsepy.MaxwellBlochResult.areas",
                   "nlsepy.units.BEC", "nlsepy.dipolar.dbec.run"]:
        assert method in anchors, method


def test_notebooks_rendered_as_stored(html):
    """Every notebook has its page with exactly the outputs stored in it (its
    figures included): nothing is executed by the docs build."""
    conf = (DOCS / "conf.py").read_text()
    assert re.search(r'^nb_execution_mode\s*=\s*"off"', conf, re.M)
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert notebooks
    for path in notebooks:
        page = html / "notebooks" / f"{path.stem}.html"
        assert page.is_file(), f"{path.name} has no page"
        text = page.read_text(encoding="utf-8")
        cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        with_outputs = sum(1 for c in cells if c.get("outputs"))
        images = sum(1 for c in cells for o in c.get("outputs", [])
                     if "image/png" in o.get("data", {}))
        assert text.count('class="cell_input') == len(cells), path.name
        assert text.count('class="cell_output') == with_outputs, path.name
        assert text.count("<img ") >= images, path.name


@pytest.mark.parametrize("extra, variable", [("docs", "DOCS_DEPS"),
                                             ("notebooks", "NOTEBOOK_DEPS")])
def test_deps_agree(extra, variable):
    """The Makefile's DOCS_DEPS and NOTEBOOK_DEPS are the `docs` and `notebooks`
    extras of pyproject.toml, and the Makefile installs them."""
    tomllib = pytest.importorskip("tomllib")
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"][extra]
    names = sorted(re.split(r"[<>=!~\[ ;]", d, 1)[0].lower() for d in deps)
    make = (ROOT / "Makefile").read_text()
    line = re.search(rf"^{variable}\s*:=\s*(.*)$", make, re.M)
    assert line, f"Makefile has no {variable}"
    assert sorted(line.group(1).lower().split()) == names
    pydeps = re.search(r"^PYDEPS\s*:=\s*(.*)$", make, re.M)
    assert pydeps and f"$({variable})" in pydeps.group(1).split()
