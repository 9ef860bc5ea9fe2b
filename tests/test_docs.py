"""The HTML documentation builds with warnings as errors (what `make docs` runs).

The API pages come from the docstrings of the installed package (numpydoc),
the notebooks are rendered as stored, never executed (myst-nb with
``nb_execution_mode = "off"``).
"""

import ast
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
                 "api/runs", "api/vortices", "api/units", "api/plot", "api/mpi", "api/helpers",
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


@pytest.mark.parametrize("extra, variable, target", [("docs", "DOCS_DEPS", "docs"),
                                                     ("notebooks", "NOTEBOOK_DEPS", "notebooks")])
def test_deps_agree(extra, variable, target):
    """The Makefile's DOCS_DEPS and NOTEBOOK_DEPS are the `docs` and `notebooks`
    extras of pyproject.toml, and the target that needs them installs them."""
    tomllib = pytest.importorskip("tomllib")
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"][extra]
    names = sorted(re.split(r"[<>=!~\[ ;]", d, 1)[0].lower() for d in deps)
    make = (ROOT / "Makefile").read_text()
    line = re.search(rf"^{variable}\s*:=\s*(.*)$", make, re.M)
    assert line, f"Makefile has no {variable}"
    assert sorted(line.group(1).lower().split()) == names
    assert f"$({variable})" in _recipe(make, target), f"`make {target}` does not install {variable}"


def _recipe(make, target):
    """The recipe lines of `target` in the Makefile's text."""
    m = re.search(rf"^{re.escape(target)}:[^\n]*\n((?:\t[^\n]*\n)*)", make, re.M)
    assert m, f"Makefile has no target {target}"
    return m.group(1)


def _prerequisites(make, target, seen=None):
    """`target` and every target it depends on, transitively."""
    seen = set() if seen is None else seen
    m = re.search(rf"^{re.escape(target)}:([^=\n]*)$", make, re.M)
    if target in seen or not m:
        return seen
    seen.add(target)
    for dep in m.group(1).split():
        _prerequisites(make, dep, seen)
    return seen


def test_demo_installs_only_what_it_needs():
    """`make demo` installs the build's and the demo's Python packages
    (NumPy, scikit-build-core, matplotlib, tqdm) and no test, docs,
    notebook or MPI extras; `make test` adds the test extras and MPI."""
    make = (ROOT / "Makefile").read_text()
    demo = re.search(r"^DEMO_DEPS\s*:=\s*(.*)$", make, re.M).group(1).split()
    assert sorted(demo) == ["matplotlib", "numpy", "scikit-build-core", "tqdm"]
    chain = _prerequisites(make, "demo")
    assert {"venv", "sysdeps"} <= chain and not chain & {"test-venv", "mpi-venv",
                                                                   "mpi-sysdeps"}, chain
    recipes = "".join(_recipe(make, t) for t in chain if t != "$(PY)")
    for var in ("TEST_DEPS", "DOCS_DEPS", "NOTEBOOK_DEPS", "MPI_DEBS"):
        assert f"$({var})" not in recipes, f"`make demo` installs {var}"
    assert {"test-venv", "mpi-venv"} <= _prerequisites(make, "test")
    assert {"mpi-venv", "mpi-sysdeps"} <= _prerequisites(make, "mpi")
    assert "$(MPI_DEBS)" in _recipe(make, "mpi-sysdeps")
    assert len(re.findall(r"^MPI_DEBS\s*:=", make, re.M)) == 1


# ------------------------------------------------------------------ README
README = ROOT / "README.md"
#: the README's sections whose blocks take more than a few seconds on 2 cores
#: (their run times are stated in the README); run by `make test-all`
SLOW_SECTIONS = ("The dipolar GPE", "GPE on crystal grids")
#: files the blocks write, named in them as string literals
WRITTEN = re.compile(r"""["']([\w.-]+\.(?:png|gif|npz|h5))["']""")


def readme_sections():
    """The README's Python blocks grouped under their heading, in order.

    Returns
    -------
    list of (str, list of str)
        ``(heading, blocks)`` for each heading (``##`` or ``###``) with at
        least one ```` ```python ```` block below it.
    """
    sections, heading, block = [], None, None
    for line in README.read_text(encoding="utf-8").splitlines(keepends=True):
        if block is not None:
            if line.strip() == "```":
                sections[-1][1].append("".join(block))
                block = None
            else:
                block.append(line)
        elif line.startswith("```python"):
            if not sections or sections[-1][0] != heading:
                sections.append((heading, []))
            block = []
        elif re.match(r"#{2,3} ", line):
            heading = line.lstrip("#").strip()
    assert block is None, "README.md: a ```python block is not closed"
    return sections


def _is(heading, prefix):
    return heading.startswith(prefix)


def _section(prefix):
    found = [(h, b) for h, b in readme_sections() if _is(h, prefix)]
    assert len(found) == 1, f"README.md has no one section {prefix!r}: {[h for h, _ in found]}"
    return found[0][1]


def _hdf5_missing():
    """Why the README's HDF5 block cannot run here ("" when it can): it needs h5py."""
    import importlib.util
    if importlib.util.find_spec("h5py") is None:
        return "the HDF5 block needs h5py (pip install 'nlsepy[hdf5]')"
    return ""


def _skip_unless_hdf5():
    why = _hdf5_missing()
    if why:
        pytest.skip(why)


def _skip_unless_mpi():
    import shutil
    from nlsepy import _build_config
    if not shutil.which("mpirun"):
        pytest.skip("no mpirun (Debian: openmpi-bin)")
    if not getattr(_build_config, "mpi", False):
        pytest.skip("nlsepy was built without its MPI layer (make mpi)")
    pytest.importorskip("mpi4py")


def _env():
    import os
    return dict(os.environ, MPLBACKEND="Agg", PYTHONUNBUFFERED="1")


def _run(cmd, cwd, timeout):
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=_env())
    assert proc.returncode == 0, (f"{' '.join(map(str, cmd))} exited with {proc.returncode}:\n"
                                  f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def _check_claims(blocks, stdout, where):
    """Every ``# prints: ...`` comment of the blocks is a line of the output."""
    lines = [ln.strip() for ln in stdout.splitlines()]
    for block in blocks:
        for claim in re.findall(r"#\s*prints:\s*(.+)$", block, re.M):
            assert claim.strip() in lines, f"{where}: README says it prints {claim!r}; it printed:\n{stdout}"


def _check_written(blocks, folder, where):
    """Every file the blocks name (figures, animations, checkpoints) was written."""
    for block in blocks:
        for name in WRITTEN.findall(block):
            assert (folder / name).is_file() and (folder / name).stat().st_size > 0, (
                f"{where}: {name} was not written")


def test_readme_blocks_are_tutorial_shaped():
    """The README's Python blocks: every section starts from its own imports,
    nothing waits on a window (figures go to files), and no section is missing."""
    sections = readme_sections()
    headings = [h for h, _ in sections]
    for prefix in ("Quick start", "Runs on disk", "The dipolar GPE", "Physical units",
                   "Magnet design", "Maxwell-Bloch", "GPE on crystal grids", "Running on many"):
        assert sum(_is(h, prefix) for h in headings) == 1, (prefix, headings)
    for heading, blocks in sections:
        assert re.search(r"^(import nlsepy as nl|from mpi4py import MPI)$", blocks[0], re.M), (
            f"README section {heading!r} does not start from its own imports")
        for block in blocks:
            assert "plt.show()" not in block, f"README section {heading!r} calls plt.show()"


def _section_params():
    params = []
    for heading, _ in readme_sections():
        if _is(heading, "Running on many"):
            continue                       # under mpirun: test_readme_mpi_block
        marks = [pytest.mark.slow] if heading.startswith(SLOW_SECTIONS) else []
        params.append(pytest.param(heading, marks=marks, id=heading.split(" (")[0]))
    return params


@pytest.mark.parametrize("heading", _section_params())
def test_readme_section_runs_as_a_script(heading, tmp_path):
    """Each section's blocks, pasted in order into one script, run in a fresh
    process, print what the README says they print and write the files they name."""
    if _is(heading, "Runs on disk"):
        _skip_unless_hdf5()
    blocks = dict(readme_sections())[heading]
    script = tmp_path / "section.py"
    script.write_text("\n".join(blocks), encoding="utf-8")
    proc = _run([sys.executable, str(script)], tmp_path, timeout=1800)
    _check_claims(blocks, proc.stdout, heading)
    _check_written(blocks, tmp_path, heading)


@pytest.mark.slow
def test_readme_runs_in_one_session(tmp_path):
    """All the Python blocks, top to bottom, one after the other in one
    interpreter (as typed into one session); the MPI block as a single rank
    when mpi4py is there, the HDF5 block when h5py is."""
    import importlib.util
    have_h5py = not _hdf5_missing()
    have_mpi = importlib.util.find_spec("mpi4py") is not None
    blocks = []
    for heading, bs in readme_sections():
        if (_is(heading, "Runs on disk") and not have_h5py) or (
                _is(heading, "Running on many") and not have_mpi):
            continue
        blocks += bs
    (tmp_path / "blocks.json").write_text(json.dumps(blocks), encoding="utf-8")
    driver = tmp_path / "session.py"
    driver.write_text(
        "import json, sys\n"
        "scope = {'__name__': '__main__'}\n"
        "for i, block in enumerate(json.load(open('blocks.json', encoding='utf-8'))):\n"
        "    exec(compile(block, f'README block {i + 1}', 'exec'), scope)\n", encoding="utf-8")
    proc = _run([sys.executable, str(driver)], tmp_path, timeout=3600)
    _check_claims(blocks, proc.stdout, "README")
    _check_written(blocks, tmp_path, "README")


def test_readme_mpi_block(tmp_path):
    """The MPI block under ``mpirun -n 2`` at a reduced size: both ranks run it
    and agree on the observables; the checkpoint's parts are written."""
    _skip_unless_mpi()
    (block,) = _section("Running on many")
    small = block.replace("(64, 64, 64), 0.25", "(24, 24, 24), 0.5").replace(
        "imaginary_time(500)", "imaginary_time(20)")
    assert small.count("(24, 24, 24)") == 1 and "imaginary_time(20)" in small, (
        "the README's MPI block changed: update the reduced size in this test")
    script = tmp_path / "ground_mpi.py"
    script.write_text(small, encoding="utf-8")
    proc = _run(["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", "2",
                 sys.executable, str(script)], tmp_path, timeout=600)
    ranks = sorted(re.findall(r"rank (\d+) of (\d+): x rows \d+-\d+, mu = ([-\d.]+)", proc.stdout))
    assert [r[:2] for r in ranks] == [("0", "2"), ("1", "2")], proc.stdout
    assert ranks[0][2] == ranks[1][2], proc.stdout
    assert list(tmp_path.glob("ground*.npz")), sorted(p.name for p in tmp_path.iterdir())


def _nl_chains(tree):
    """Every attribute chain under the name ``nl`` (``nl.units.BEC``) in `tree`."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            parts, cur = [], node
            while isinstance(cur, ast.Attribute):
                parts.append(cur.attr)
                cur = cur.value
            if isinstance(cur, ast.Name) and cur.id == "nl":
                found.add(".".join(reversed(parts)))
    return found


@pytest.mark.parametrize("prefix", SLOW_SECTIONS)
def test_slow_readme_sections_compile_and_name_what_exists(prefix):
    """The fast representative of the README sections that run only in
    ``make test-all``: their blocks compile, and every ``nl.<name>`` chain
    they use (module, class, function) exists in the package."""
    import nlsepy as nl

    sections = [(h, b) for h, b in readme_sections() if h.startswith(prefix)]
    assert sections, f"the README has no section {prefix!r}"
    for heading, blocks in sections:
        tree = ast.parse("\n".join(blocks), filename=f"README: {heading}")
        chains = _nl_chains(tree)
        assert chains, f"{heading}: no nl.<name> used"
        for chain in sorted(chains):
            obj = nl
            for part in chain.split("."):
                if isinstance(obj, type) and not hasattr(obj, part):
                    break                          # an instance attribute of a class: not checkable here
                assert hasattr(obj, part), f"{heading}: nl.{chain} does not exist"
                obj = getattr(obj, part)
