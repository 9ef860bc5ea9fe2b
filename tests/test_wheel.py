"""`python -m build` gives an sdist and a wheel; the wheel installs into a fresh
virtual environment with no compiler on PATH and runs the README's quick start.

The sdist's contents are checked in the default suite (packing it takes a
second); the wheel's tests build it and are marked slow.  The build here is
``python -m build --no-isolation`` (the sdist, then the
wheel built from the unpacked sdist) with ``NLSEPY_CUDA=OFF`` and
``NLSEPY_MPI=OFF``: the CPU kernels only, to keep it short.  NumPy comes
into the fresh environment from the package index (as binary wheels only).
"""

import importlib.util
import os
import pathlib
import re
import subprocess
import sys
import tarfile
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
COMPILERS = ("cc", "gcc", "c99", "clang", "c++", "g++", "ld", "nvcc", "cmake")
# what may pass into the fresh environment: where to find the package index
KEEP_ENV = ("HOME", "LANG", "LC_ALL", "TMPDIR", "http_proxy", "https_proxy", "no_proxy",
            "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL",
            "PIP_TRUSTED_HOST", "PIP_CERT", "SSL_CERT_FILE", "SSL_CERT_DIR",
            "REQUESTS_CA_BUNDLE")
NETWORK_TROUBLE = ("NewConnectionError", "Network is unreachable", "Temporary failure in name",
                   "Name or service not known", "ProxyError", "ConnectTimeout",
                   "No matching distribution found for numpy")


def _need_build():
    """Skip without pypa's build.  It is looked up as ``build.__main__``: a
    folder named build/ (CMake's, in the repository) passes for a namespace
    package ``build`` but has no ``__main__``; the builds below run in
    their output folder, so ``python -m build`` never finds that folder."""
    if importlib.util.find_spec("build.__main__") is None:
        pytest.skip("needs the build package (pip install build)")


@pytest.fixture(scope="session")
def dist(tmp_path_factory):
    """(sdist, wheel) built once per session by ``python -m build``."""
    _need_build()
    out = tmp_path_factory.mktemp("dist")
    env = dict(os.environ, NLSEPY_CUDA="OFF", NLSEPY_MPI="OFF")
    proc = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "-o", str(out),
                           str(ROOT)], env=env, cwd=out, capture_output=True, text=True,
                          timeout=1800)
    assert proc.returncode == 0, f"python -m build failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    sdists, wheels = sorted(out.glob("*.tar.gz")), sorted(out.glob("*.whl"))
    assert len(sdists) == 1 and len(wheels) == 1, sorted(p.name for p in out.iterdir())
    return sdists[0], wheels[0]


@pytest.fixture(scope="session")
def sdist(tmp_path_factory):
    """The sdist alone, by ``python -m build --sdist`` (no compilation)."""
    _need_build()
    out = tmp_path_factory.mktemp("sdist")
    proc = subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "-o",
                           str(out), str(ROOT)], cwd=out, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, f"python -m build --sdist failed:\n{proc.stderr[-4000:]}"
    found = sorted(out.glob("*.tar.gz"))
    assert len(found) == 1, sorted(p.name for p in out.iterdir())
    return found[0]


def test_sdist_holds_what_a_build_needs_and_nothing_big(sdist):
    with tarfile.open(sdist) as tar:
        names = [m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name]
    files = set(names)
    for need in ["CMakeLists.txt", "pyproject.toml", "README.md", "PKG-INFO",
                 "python/nlsepy/__init__.py", "python/nlsepy/_build_config.py.in",
                 "python/nlsepy/_bind/module.c", "csrc/include/nlsepy/common.h",
                 "cuda/CMakeLists.txt"]:
        assert need in files, f"the sdist lacks {need}"
    if (ROOT / "LICENSE").exists():
        assert "LICENSE" in files
    for stem in ["fd", "dipolar", "magnet", "mbloch", "dec"]:
        assert any(n.startswith(f"csrc/{stem}/") for n in names), stem
        assert any(n.startswith(f"cuda/{stem}/") for n in names), stem
    for bad in ["build/", ".venv/", ".whl/", "out/", "dist/", "docs/_build/", ".git/",
                "notebooks/", "docs/notebooks/"]:
        assert not any(n.startswith(bad) for n in names), f"the sdist holds {bad}"
    assert sdist.stat().st_size < 5 * 2**20, f"sdist is {sdist.stat().st_size} bytes"


@pytest.mark.slow
def test_wheel_holds_the_package_and_no_sources(dist):
    _, wheel = dist
    names = zipfile.ZipFile(wheel).namelist()
    assert any(re.match(r"nlsepy/_core\..*\.so$", n) for n in names)
    assert "nlsepy/_build_config.py" in names and "nlsepy/reference/fd.py" in names
    assert not [n for n in names if n.endswith((".c", ".h", ".cu", ".in"))]
    assert not [n for n in names if "_cuda" in n or "_mpi" in n]   # built with both OFF


def _quick_start():
    """The README's quick start and the line it says it prints."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"^## Quick start.*?```python\n(.*?)```", readme, re.S | re.M)
    assert m, "README.md has no quick start"
    code = m.group(1)
    expected = re.search(r"^# prints: (.*)$", code, re.M)
    assert expected, "the quick start does not say what it prints"
    return code, expected.group(1).strip()


@pytest.mark.slow
def test_wheel_runs_the_quick_start_without_a_compiler(dist, tmp_path):
    _, wheel = dist
    env_dir = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, timeout=300)
    py = env_dir / "bin" / "python"
    tools = tmp_path / "tools"                     # the only other folder on PATH
    tools.mkdir()
    os.symlink("/bin/sh", tools / "sh")
    env = {k: os.environ[k] for k in KEEP_ENV if k in os.environ}
    env.update(PATH=f"{env_dir / 'bin'}:{tools}", OMP_NUM_THREADS="1", PYTHONNOUSERSITE="1")

    def run(*args, **kw):
        return subprocess.run([str(py), *args], env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=900, **kw)

    probe = run("-c", "import shutil, sys; print([c for c in sys.argv[1:] if shutil.which(c)])",
                *COMPILERS)
    assert probe.returncode == 0 and probe.stdout.strip() == "[]", probe.stdout + probe.stderr

    inst = run("-m", "pip", "install", "-q", "--disable-pip-version-check", "--only-binary=:all:",
               str(wheel))
    if inst.returncode != 0 and any(s in inst.stdout + inst.stderr for s in NETWORK_TROUBLE):
        pytest.skip(f"no package index reachable for NumPy:\n{inst.stderr[-2000:]}")
    assert inst.returncode == 0, inst.stdout + inst.stderr

    where = run("-c", "import nlsepy as nl; print(nl.__file__); print(nl.build_info()['cuda'])")
    assert where.returncode == 0, where.stderr
    path, cuda = where.stdout.split()
    assert pathlib.Path(path).is_relative_to(env_dir) and cuda == "False", where.stdout

    code, expected = _quick_start()
    quick = run("-c", code)
    assert quick.returncode == 0, quick.stderr
    assert quick.stdout.strip() == expected

    cli = subprocess.run([str(env_dir / "bin" / "nlsepy"), "--help"], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0 and "demo" in cli.stdout, cli.stdout + cli.stderr
