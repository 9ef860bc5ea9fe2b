"""Every model lives under one stem in every layer (docs/ARCHITECTURE.md,
"Adding a model"): a new model cannot forget its header, its C and CUDA
folders, its binding, module, reference, tests, benchmark or notebook."""

import ast
import pathlib
import re

import pytest

import nlsepy as nl

ROOT = pathlib.Path(__file__).resolve().parents[1]
MODELS = nl.models()


def test_models_lists_every_model_class():
    assert list(MODELS) == ["fd", "dipolar", "magnet", "mbloch", "dec"]
    for stem, m in MODELS.items():
        assert m.stem == stem
        assert m.cls is getattr(nl, m.name)
        assert m.backends == nl.backends(m.name) and m.backends[0] == "cpu"


@pytest.mark.parametrize("stem", list(MODELS))
def test_model_has_every_layer(stem):
    need = {
        "public C header": ROOT / "csrc" / "include" / "nlsepy" / f"{stem}.h",
        "C folder": ROOT / "csrc" / stem,
        "CUDA folder": ROOT / "cuda" / stem,
        "binding": ROOT / "python" / "nlsepy" / "_bind" / f"{stem}.c",
        "reference": ROOT / "python" / "nlsepy" / "reference" / f"{stem}.py",
        "tests folder": ROOT / "tests" / stem,
        "benchmark": ROOT / "bench" / f"{stem}.py",
        "notebook": ROOT / "notebooks" / f"{stem}.ipynb",
    }
    missing = [f"{what} ({path.relative_to(ROOT)})" for what, path in need.items()
               if not path.exists()]
    module = ROOT / "python" / "nlsepy"
    if not ((module / f"{stem}.py").is_file() or (module / stem / "__init__.py").is_file()):
        missing.append(f"module (python/nlsepy/{stem}.py or {stem}/__init__.py)")
    assert not missing, f"model {stem!r} lacks: {', '.join(missing)}"
    assert list((ROOT / "csrc" / stem).glob(f"{stem}*.c")), f"csrc/{stem}/ has no {stem}*.c"
    assert list((ROOT / "cuda" / stem).glob(f"{stem}*.cu")), f"cuda/{stem}/ has no {stem}*.cu"
    assert list((ROOT / "tests" / stem).glob(f"test_{stem}*.py")), f"tests/{stem}/ has no tests"
    # the C API prefix is the stem, and the binding registers the model
    header = need["public C header"].read_text()
    assert re.search(rf"\bnlse_{stem}_create\b", header), f"{stem}.h lacks nlse_{stem}_create"
    assert f"nlsepy_bind_{stem}" in need["binding"].read_text()
    # the module exposes the class
    assert getattr(nl, stem).__name__ == f"nlsepy.{stem}"
    assert MODELS[stem].cls.__module__.startswith(f"nlsepy.{stem}")


def test_extensions_register_every_model():
    from nlsepy import _core
    assert tuple(_core.STEMS) == tuple(MODELS)
    assert tuple(_core.MODELS) == tuple(m.name for m in MODELS.values())


def test_no_model_files_outside_their_folders():
    """csrc/ and cuda/ hold only the per-model folders, common/ and include/."""
    allowed = set(MODELS) | {"common", "include"}
    for top in ("csrc", "cuda"):
        stray = [p.name for p in (ROOT / top).iterdir()
                 if p.is_dir() and p.name not in allowed
                 or p.is_file() and p.name != "CMakeLists.txt"]
        assert not stray, f"{top}/ has files outside the model folders: {stray}"
    headers = {p.stem for p in (ROOT / "csrc" / "include" / "nlsepy").glob("*.h")}
    assert headers == set(MODELS) | {"common", "device"}


def _objects_by_target():
    """The object files of the last CMake build of this tree, by target."""
    import glob
    builds = sorted(glob.glob(str(ROOT / "build" / "*" / "CMakeCache.txt")),
                    key=lambda p: pathlib.Path(p).stat().st_mtime)
    if not builds:
        return {}
    top = pathlib.Path(builds[-1]).parent
    out = {}
    for obj in glob.glob(str(top / "**" / "CMakeFiles" / "*.dir" / "**" / "*.o"), recursive=True):
        rel = pathlib.Path(obj).relative_to(top)          # [sub/]CMakeFiles/T.dir/path.o
        i = rel.parts.index("CMakeFiles")
        target = rel.parts[i + 1][:-len(".dir")]
        source = pathlib.Path(*rel.parts[:i], *rel.parts[i + 2:]).with_suffix("")  # path.c
        out.setdefault(target, []).append((str(source), obj))
    return out


def _cycle(edges):
    """A cycle of the directed graph `edges` (node -> set of nodes), or None."""
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(edges.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(edges):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_no_call_circles_between_files():
    """The files call one way only (a lower file never calls an upper one):
    in each extension with the libraries it links (``_core``: nlsepy_common
    and nlsepy_core; ``_cuda``: nlsepy_common and the CUDA libraries), the
    graph "file A uses a symbol that file B defines" has no cycle.  Read
    with nm from the objects of the build that `make test` has just made
    (objects whose source is no longer in the tree are left out)."""
    import shutil
    import subprocess
    objs = _objects_by_target()
    if not objs or not shutil.which("nm"):
        pytest.skip("no CMake build of this tree (build/*/CMakeFiles) or no nm")
    groups = {"_core": ("nlsepy_common", "nlsepy_core", "_core"),
              "_cuda": ("nlsepy_common", "nlsepy_cuda", "nlsepy_cuda_mbloch", "_cuda")}
    checked = 0
    for ext, targets in groups.items():
        files = [(src, obj) for t in targets for src, obj in objs.get(t, ())
                 if (ROOT / src).is_file()]
        if ext == "_cuda" and "_cuda" not in objs:
            continue  # a build without CUDA
        defs, uses = {}, {}
        for name, obj in files:
            lines = subprocess.run(["nm", obj], capture_output=True, text=True,
                                   check=True).stdout.splitlines()
            uses[name] = {ln.split()[-1] for ln in lines if ln.split()[-2:-1] == ["U"]}
            for ln in lines:
                parts = ln.split()
                if len(parts) == 3 and parts[1] in "TDBRW":
                    defs.setdefault(parts[2], set()).add(name)
        edges = {a: {b for sym in u for b in defs.get(sym, ()) if b != a}
                 for a, u in uses.items()}
        cyc = _cycle(edges)
        assert cyc is None, f"{ext}: files call each other: {' -> '.join(cyc)}"
        checked += len(files)
    assert checked > 10


def test_cycle_finder():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"x": {"y"}, "y": {"y2"}, "y2": {"y"}}) == ["y", "y2", "y"]


# ------------------------------------------------------------ Python imports
PKG = ROOT / "python" / "nlsepy"
#: compiled parts of a build that may be missing (no GPU toolkit, no MPI):
#: imported on first use, by the shared layer's backend module only
_OPTIONAL_EXTENSIONS = {"nlsepy._cuda", "nlsepy._mpi"}
_EXTENSIONS = {"nlsepy._core", "nlsepy._build_config"} | _OPTIONAL_EXTENSIONS


def _module_name(path):
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _python_imports():
    """Every import statement of the package's modules, as ``(module, target,
    line, inside_a_function)``; `target` is the nlsepy module imported (a
    module named by ``from X import name`` when `name` is one, else ``X``)
    or the top-level name of a third-party one.  Imports under ``if
    TYPE_CHECKING:`` are left out: they never run."""
    modules = {_module_name(p): p for p in PKG.rglob("*.py")}
    known = set(modules) | _EXTENSIONS
    found = []
    for name, path in sorted(modules.items()):
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]

        def targets(node):
            if isinstance(node, ast.Import):
                return [a.name for a in node.names]
            base = (here[:len(here) - node.level + 1] if node.level else [])
            mod = ".".join(base + ([node.module] if node.module else []))
            return [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod for a in node.names]

        def walk(node, in_function):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                    continue
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    for target in targets(child):
                        if not target.startswith("nlsepy"):
                            target = target.split(".")[0]
                        found.append((name, target, child.lineno, in_function))
                walk(child, in_function or isinstance(
                    child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

        walk(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def test_python_imports_inside_functions_are_optional_packages_only():
    """An import inside a function is kept for what may be missing: an
    optional third-party package (matplotlib, h5py, mpi4py, tqdm, scipy,
    ...) or one of the optional extensions, which only the shared layer's
    backend module imports.  Never a module of the package (that would hide
    an import circle), nor of the standard library."""
    import sys
    # the standard library is always there; tomllib only from Python 3.11 on
    stdlib = set(sys.stdlib_module_names) - {"tomllib"}
    bad = [f"{m}:{line} imports {t}" for m, t, line, inside in _python_imports()
           if inside and (t.split(".")[0] in stdlib or t.startswith("nlsepy")
                          and not (t in _OPTIONAL_EXTENSIONS and m == "nlsepy.common.backend"))]
    assert not bad, "imports inside functions that are not optional:\n" + "\n".join(bad)


def test_python_import_graph_has_no_circles_and_common_imports_no_model():
    """The package's modules import one way: the graph "A imports B" (every
    import statement, at any level) has no cycle, and no arrow runs from the
    shared layer ``nlsepy.common`` to a model, or to anything above it."""
    edges = {}
    for m, t, _, _ in _python_imports():
        if t.startswith("nlsepy") and t != m:
            edges.setdefault(m, set()).add(t)
    cyc = _cycle(edges)
    assert cyc is None, f"Python modules import each other: {' -> '.join(cyc)}"
    up = [f"{m} -> {t}" for m, ts in edges.items() if m.startswith("nlsepy.common")
          for t in ts if not (t.startswith("nlsepy.common") or t in _EXTENSIONS)]
    assert not up, "the shared layer imports from above it:\n" + "\n".join(up)
    # the checker sees real edges: a model imports the shared layer
    assert "nlsepy.common.runner" in edges["nlsepy.fd.solver"]


@pytest.mark.parametrize("stem", list(MODELS))
def test_model_subpackage_shape(stem):
    """Every model is a subpackage of the same shape: ``solver.py`` (the
    public class), ``plot.py`` (its figures), and ``dist.py`` where it has a
    distributed part of its own."""
    folder = PKG / stem
    assert (folder / "__init__.py").is_file() and (folder / "solver.py").is_file()
    assert (folder / "plot.py").is_file(), f"{stem}/plot.py is missing"
    assert MODELS[stem].cls.__module__ == f"nlsepy.{stem}.solver"
    top = {p.stem for p in PKG.glob("*.py")}
    assert stem not in top, f"python/nlsepy/{stem}.py stands beside the subpackage"


@pytest.mark.parametrize("stem", list(MODELS))
def test_model_class_fits_on_the_shared_layer(stem):
    """A model's public class stays at most 500 lines: its parameters, its
    handle and its hooks; the run protocol lives in ``common``."""
    path = PKG / stem / "solver.py"
    name = MODELS[stem].name
    tree = ast.parse(path.read_text())
    cls = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    assert len(cls) == 1, f"{path.relative_to(ROOT)} does not define {name}"
    lines = cls[0].end_lineno - cls[0].lineno + 1
    assert lines <= 500, f"{name} is {lines} lines (at most 500: move shared code to common/)"


@pytest.mark.parametrize("path,most", [("docs/ARCHITECTURE.md", 400), ("bench/RESULTS.md", 600)])
def test_notes_stay_short(path, most):
    """The architecture map and the current benchmark records stay short: design notes
    go to docs/models/, dated records to bench/history/."""
    n = len((ROOT / path).read_text().splitlines())
    assert n <= most, f"{path} has {n} lines (at most {most})"
