"""Every model lives under one stem in every layer (docs/ARCHITECTURE.md,
"Adding a model"): a new model cannot forget its header, its C and CUDA
folders, its binding, module, reference, tests, benchmark or notebook."""

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
