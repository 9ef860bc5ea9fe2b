"""The command lines ``python -m nlsepy demo`` and ``python -m nlsepy dbec``:
every failure is one line ``nlsepy: error: ...`` and a non-zero exit status,
inputs are typed, outputs stay inside the output folder and a run writes all
of them or none.  Each test runs the CLI in its own process on a tiny input."""

import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import nlsepy as nl

ENV = dict(os.environ, OMP_NUM_THREADS="1")
ENV.pop("NLSEPY_TRACEBACK", None)


def cli(cwd, *args, timeout=120):
    return subprocess.run([sys.executable, "-m", "nlsepy", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, env=ENV)


def assert_error(r, match, status=None):
    """One line 'nlsepy: error: ...' matching `match`, no traceback, exit != 0."""
    assert r.returncode != 0, r.stdout
    if status is not None:
        assert r.returncode == status, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("nlsepy: error: "), r.stderr
    assert match in lines[0], r.stderr


def tree(path):
    """Every file and folder under `path`, relative, sorted."""
    out = []
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            out.append(os.path.relpath(os.path.join(root, name), path))
    return sorted(out)


# --------------------------------------------------------------------- demo
def demo_input(problem="", solver="", run="t_end = 1.0\nframes = 2\n", name='"tiny"'):
    return (f"name = {name}\n[problem]\nexample = \"dark_soliton\"\nlength = 20.0\nh = 0.1\n"
            f"{problem}[solver]\n{solver}[run]\n{run}")


def run_demo(tmp_path, text, *extra):
    (tmp_path / "in.toml").write_text(text)
    return cli(tmp_path, "demo", "--input", "in.toml", "--out", "out", *extra)


def test_demo_tiny_input_runs(tmp_path):
    r = run_demo(tmp_path, demo_input())
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert tree(tmp_path / "out") == ["frames.npz", "summary.json", "summary.txt", "tiny.png"]


@pytest.mark.parametrize("text,match", [
    # h = 0 was a ZeroDivisionError traceback
    (demo_input().replace("h = 0.1", "h = 0"), "[problem] h must be > 0, got 0.0"),
    (demo_input().replace("h = 0.1", "h = -0.1"), "[problem] h must be > 0"),
    (demo_input().replace("h = 0.1", "h = nan"), "[problem] h must be finite"),
    (demo_input().replace("h = 0.1", 'h = "0.1"'), "[problem] h must be a number, got '0.1'"),
    # frames = 2.7 and frames = true were accepted (as 2 and 1)
    (demo_input(run="t_end = 1.0\nframes = 2.7\n"), "[run] frames must be an integer, got 2.7"),
    (demo_input(run="t_end = 1.0\nframes = true\n"), "[run] frames must be an integer, got true"),
    (demo_input(run="t_end = 1.0\nframes = 0\n"), "[run] frames must be > 0"),
    (demo_input(run="t_end = 1.0\n"), "[run] needs the key 'frames'"),
    (demo_input(run="t_end = true\nframes = 2\n"), "[run] t_end must be a number, got true"),
    (demo_input(solver="force = 1\n"), "[solver] force must be true or false, got 1"),
    (demo_input(solver="dtype = \"float16\"\n"), "[solver] dtype must be one of"),
    (demo_input(solver="shceme = \"cd\"\n"), "unknown key(s) in [solver]: ['shceme']"),
    (demo_input(problem="m = 1\n"), "unknown key(s) in [problem]: ['m']"),
    (demo_input() + "[extra]\n", "unknown key(s) or table(s): ['extra']"),
    (demo_input(name="3"), "name must be a string, got 3"),
    # bad TOML
    ("name = \n", "not valid TOML"),
])
def test_demo_bad_input_is_one_line(tmp_path, text, match):
    r = run_demo(tmp_path, text)
    assert_error(r, match, status=2)
    assert tree(tmp_path) == ["in.toml"]


@pytest.mark.parametrize("name", ['"../escaped"', '"sub/x"', '".."', '""', '"a\\\\b"'])
def test_demo_name_cannot_leave_the_output_folder(tmp_path, name):
    """name = "../escaped" wrote ../escaped.png outside --out."""
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "in.toml").write_text(demo_input(name=name))
    r = cli(tmp_path / "work", "demo", "--input", "in.toml", "--out", "out")
    assert_error(r, "name", status=2)
    assert tree(tmp_path) == ["work", os.path.join("work", "in.toml")]


def test_demo_missing_input_file(tmp_path):
    r = cli(tmp_path, "demo", "--input", "nowhere.toml", "--out", "out")
    assert_error(r, "cannot read the input 'nowhere.toml': No such file or directory", 2)
    assert tree(tmp_path) == []


def test_demo_bad_command_line_is_one_line(tmp_path):
    assert_error(cli(tmp_path, "demo", "--bogus"), "unrecognized arguments: --bogus", 2)
    assert_error(cli(tmp_path), "required: command", 2)
    assert_error(cli(tmp_path, "dbec"), "required: input", 2)
    assert_error(cli(tmp_path, "dbec", "x", "--mode", "sideways"), "invalid choice", 2)


def test_demo_memory_refused_at_once(tmp_path):
    """A grid that cannot fit: MemoryError as one line, before allocating."""
    text = demo_input().replace('"dark_soliton"', '"vortex_ring"').replace(
        "length = 20.0", "length = 10000.0").replace("h = 0.1", "h = 1.0")
    r = run_demo(tmp_path, text)
    assert_error(r, "needs", status=1)
    assert "memory" in r.stderr and "10001x10001x10001" in r.stderr
    assert tree(tmp_path) == ["in.toml"]


def test_demo_blow_up_is_one_line(tmp_path):
    """BlowUpError (dt far above the stability bound, forced): one line, no outputs."""
    r = run_demo(tmp_path, demo_input(solver="dt = 0.5\nforce = true\n",
                                      run="t_end = 50.0\nframes = 2\n"))
    assert_error(r, "non-finite", status=1)
    assert tree(tmp_path) == ["in.toml"]


@pytest.mark.skipif("cuda" in nl.backends("NLSE"), reason="CUDA present: the run succeeds")
def test_demo_backend_error_is_one_line(tmp_path):
    r = run_demo(tmp_path, demo_input(solver='backend = "cuda"\n'))
    assert_error(r, "cuda", status=1)
    assert tree(tmp_path) == ["in.toml"]


def test_demo_output_folder_is_a_file(tmp_path):
    """An output folder that cannot be written: one line, before running."""
    (tmp_path / "in.toml").write_text(demo_input())
    (tmp_path / "out").write_text("a file")
    r = cli(tmp_path, "demo", "--input", "in.toml", "--out", "out")
    assert_error(r, "is not a folder", status=1)
    assert tree(tmp_path) == ["in.toml", "out"]


def test_demo_writes_all_outputs_or_none(tmp_path, monkeypatch):
    """The plot (the last output) fails: no frames.npz or summaries either, no
    temporary files, and no new output folder."""
    pytest.importorskip("matplotlib")
    from nlsepy import __main__ as cli_main

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device", "tiny.png")

    monkeypatch.setattr(cli_main, "plot_frames", broken)
    (tmp_path / "in.toml").write_text(demo_input())
    status = cli_main.main(["demo", "--input", str(tmp_path / "in.toml"),
                            "--out", str(tmp_path / "a" / "out")])
    assert status == 1
    assert tree(tmp_path) == ["in.toml"]


def wait_for_line(proc):
    line = proc.stdout.readline()
    assert line.startswith("running"), (line, proc.stderr.read() if proc.poll() else "")


def interrupt_cli(args, cwd):
    """Start ``python -m nlsepy ARGS`` in `cwd`, send SIGINT once it prints,
    and check that it ends with exit 130 and the one line 'interrupted'."""
    proc = subprocess.Popen([sys.executable, "-m", "nlsepy", *args], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        wait_for_line(proc)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert err == "nlsepy: error: interrupted\n"


def test_demo_interrupted_leaves_nothing(tmp_path):
    """SIGINT during a long run: 'nlsepy: error: interrupted', exit 130, no
    outputs and no temporary files."""
    (tmp_path / "in.toml").write_text(demo_input(run="t_end = 20000.0\nframes = 4000\n"))
    interrupt_cli(["demo", "--input", "in.toml", "--out", "out"], tmp_path)
    assert tree(tmp_path) == ["in.toml"]


# --------------------------------------------------------------------- dbec
DBEC = """OPTION = 2
NATOMS = 2000
AHO = 1.e-6
AS = 100.
ADD = 0.
NZ = 32
DZ = 0.25
DT = 0.002
GAMMA = 8.0
NU = 8.0
LAMBDA = 1.0
NPAS = 10
NRUN = 10
"""


def run_dbec(tmp_path, text, *extra, name="imag1d-z-input"):
    (tmp_path / name).write_text(text)
    return cli(tmp_path, "dbec", name, *extra)


def dbec_refused(tmp_path, text, match, *extra):
    """The run stops with one line (status 2) and writes nothing beside its input."""
    r = run_dbec(tmp_path, text, *extra)
    assert_error(r, match, status=2)
    assert tree(tmp_path) == ["imag1d-z-input"]
    return r


def test_dbec_tiny_input_runs(tmp_path):
    r = run_dbec(tmp_path, DBEC)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    # OUTPUT and RMSOUT get the .txt suffix, as the published programs write them
    assert tree(tmp_path) == ["imag1d-z-input", "imag1d-z-out.txt", "imag1d-z-psi.npz",
                              "imag1d-z-rms.txt"]
    # --set takes typed values; the real-time input reads the state written
    r = run_dbec(tmp_path, DBEC + "INPUT = imag1d-z-psi.npz\n", "--set", "NRUN=4",
                 "--set", "gpar=1.5", "--out", ".", name="real1d-z-input")
    assert r.returncode == 0, r.stderr
    assert "NRUN = 4" in (tmp_path / "real1d-z-out.txt").read_text()


@pytest.mark.parametrize("edit,match", [
    # NX = 1e30 was "cannot fit 'int' into an index-sized integer"
    (("NZ = 32", "NZ = 1e30"), "key NZ must be an integer, got '1e30'"),
    (("NZ = 32", "NZ = 1000000000000000000000000000000"), "key NZ = 1000000000000000000000000"
                                                          "000000 is out of range"),
    (("NZ = 32", "NZ = 4000000000"), "NZ must be >= 4 and <= 2147483647, got 4000000000"),
    (("NZ = 32", "NZ = 32.0"), "key NZ must be an integer, got '32.0'"),
    (("OPTION = 2", "OPTION = 1.5"), "key OPTION must be an integer, got '1.5'"),
    (("DZ = 0.25", "DZ = 0"), "key DZ must be > 0"),
    (("DT = 0.002", "DT = inf"), "key DT must be finite"),
    (("NPAS = 10", "NPAS = ten"), "key NPAS must be an integer, got 'ten'"),
])
def test_dbec_bad_value_is_one_line(tmp_path, edit, match):
    r = dbec_refused(tmp_path, DBEC.replace(*edit), match)
    assert "imag1d-z-input:" in r.stderr  # names the file (and line)


@pytest.mark.parametrize("item,match", [
    # --set OPTION=1.5 was accepted (as 1)
    ("OPTION=1.5", "--set OPTION=1.5: key OPTION must be an integer, got '1.5'"),
    ("NZ=1e30", "--set NZ=1e30: key NZ must be an integer"),
    ("DT=nan", "--set DT=nan: key DT must be finite"),
    ("NZZ=4", "--set NZZ=4: unknown key 'NZZ'"),
    ("NZ", "--set NZ: expected KEY=VALUE"),
    ("NZ=", "--set NZ=: key NZ has no value"),
])
def test_dbec_set_is_typed(tmp_path, item, match):
    dbec_refused(tmp_path, DBEC, match, "--set", item)


@pytest.mark.parametrize("line,match", [
    # PSIOUT in a missing folder left imag1d-z-out and imag1d-z-rms behind
    ("PSIOUT = missing/state.npz", "PSIOUT = 'missing/state.npz' must be a plain file name"),
    ("OUTPUT = ../escaped", "OUTPUT = '../escaped' must be a plain file name"),
    ("RMSOUT = /tmp/escaped", "RMSOUT = '/tmp/escaped' must be a plain file name"),
    ("FINALOUT = ../den", "FINALOUT = '../den' must be a plain file name"),
    ("OUTPUT = same\nRMSOUT = same", "RMSOUT = 'same.txt' names the same file as OUTPUT"),
])
def test_dbec_outputs_stay_in_the_folder(tmp_path, line, match):
    (tmp_path / "work").mkdir()
    r = run_dbec(tmp_path / "work", DBEC + line + "\n")
    assert_error(r, match, status=2)
    assert tree(tmp_path) == ["work", os.path.join("work", "imag1d-z-input")]


def test_dbec_output_blocked_by_a_folder(tmp_path):
    (tmp_path / "imag1d-z-psi.npz").mkdir()
    r = run_dbec(tmp_path, DBEC)
    assert_error(r, "PSIOUT = 'imag1d-z-psi.npz'", status=2)
    assert tree(tmp_path) == ["imag1d-z-input", "imag1d-z-psi.npz"]


def test_dbec_missing_files(tmp_path):
    assert_error(cli(tmp_path, "dbec", "nowhere-input"),
                 "cannot read the input 'nowhere-input': No such file or directory", 2)
    r = run_dbec(tmp_path, DBEC + "INPUT = nowhere.npz\n", name="real1d-z-input")
    assert_error(r, "INPUT file", status=2)
    assert "does not exist" in r.stderr
    assert tree(tmp_path) == ["real1d-z-input"]


@pytest.mark.parametrize("content", [b"", b"garbage, not an archive\n", "truncated"])
def test_dbec_bad_input_state(tmp_path, content):
    """An empty, garbage or truncated INPUT state (BadZipFile before): one line."""
    if content == "truncated":
        buf = tmp_path / "good.npz"
        np.savez(buf, psi=np.ones(32, complex))
        content = buf.read_bytes()[:200]
        buf.unlink()
    (tmp_path / "state.npz").write_bytes(content)
    r = run_dbec(tmp_path, DBEC + "INPUT = state.npz\n", name="real1d-z-input")
    assert_error(r, "state.npz' is not a state written by PSIOUT", status=2)
    assert tree(tmp_path) == ["real1d-z-input", "state.npz"]


def test_dbec_input_state_checked(tmp_path):
    np.savez(tmp_path / "wrong.npz", psi=np.ones(16, complex))
    r = run_dbec(tmp_path, DBEC + "INPUT = wrong.npz\n", name="real1d-z-input")
    assert_error(r, "has shape (16,), the input's grid is (32,)", status=2)
    np.savez(tmp_path / "nan.npz", psi=np.full(32, np.nan))
    r = run_dbec(tmp_path, DBEC + "INPUT = nan.npz\n", name="real1d-z-input")
    assert_error(r, "is not finite", status=2)
    np.savez(tmp_path / "ints.npz", psi=np.ones(32, int))
    r = run_dbec(tmp_path, DBEC + "INPUT = ints.npz\n", name="real1d-z-input")
    assert_error(r, "has dtype int64, not a float or complex array", status=2)
    np.savez(tmp_path / "other.npz", phi=np.ones(32))
    r = run_dbec(tmp_path, DBEC + "INPUT = other.npz\n", name="real1d-z-input")
    assert_error(r, "holds no 'psi' array", status=2)
    assert tree(tmp_path) == ["ints.npz", "nan.npz", "other.npz", "real1d-z-input", "wrong.npz"]


def test_dbec_memory_is_one_line(tmp_path):
    """A grid that cannot fit: MemoryError as one line."""
    r = run_dbec(tmp_path, DBEC.replace("NZ = 32", "NZ = 100000") +
                 "NX = 100000\nNY = 100000\nDX = 0.1\nDY = 0.1\n", "--geometry", "3d")
    assert_error(r, "memory", status=1)
    assert tree(tmp_path) == ["imag1d-z-input"]


def test_dbec_blow_up_is_one_line(tmp_path):
    """Collapse in imaginary time (BlowUpError): one line, no outputs."""
    r = run_dbec(tmp_path, DBEC.replace("AS = 100.", "AS = -100000.").replace(
        "NPAS = 10", "NPAS = 2000"))
    assert_error(r, "non-finite", status=1)
    assert tree(tmp_path) == ["imag1d-z-input"]


@pytest.mark.skipif("cuda" in nl.backends("DipolarGPE"), reason="CUDA present: the run succeeds")
def test_dbec_backend_error_is_one_line(tmp_path):
    r = run_dbec(tmp_path, DBEC, "--backend", "cuda")
    assert_error(r, "cuda", status=1)
    assert tree(tmp_path) == ["imag1d-z-input"]


def test_dbec_writes_all_outputs_or_none(tmp_path, monkeypatch):
    """The last output (PSIOUT) fails after the others were produced: none of
    them is left, and no temporary file either."""
    def broken(self, path):
        raise OSError(28, "No space left on device", path)

    monkeypatch.setattr(nl.DipolarGPE, "save", broken)
    (tmp_path / "imag1d-z-input").write_text(DBEC + "FINALOUT = den-\n")
    with pytest.raises(OSError, match="No space left"):
        nl.dbec.run(tmp_path / "imag1d-z-input", out_dir=str(tmp_path / "new" / "out"))
    assert tree(tmp_path) == ["imag1d-z-input"]
    from nlsepy.__main__ import main
    assert main(["dbec", str(tmp_path / "imag1d-z-input"), "--out", str(tmp_path)]) == 1
    assert tree(tmp_path) == ["imag1d-z-input"]


def test_dbec_interrupted_leaves_nothing(tmp_path):
    """SIGINT during a long real-time run: exit 130, one line, no outputs and
    no temporary files."""
    np.savez(tmp_path / "state.npz", psi=np.exp(-np.linspace(-4, 4, 32) ** 2).astype(complex))
    (tmp_path / "real1d-z-input").write_text(
        DBEC.replace("NRUN = 10", "NRUN = 100000000") +
        "INPUT = state.npz\nDYNAOUT = dyna\nOUTSTPT = 2000\n")
    interrupt_cli(["dbec", "real1d-z-input"], tmp_path)
    assert tree(tmp_path) == ["real1d-z-input", "state.npz"]


def test_dbec_published_output_keys_accepted(tmp_path):
    """NRUNOUT stopped the run ('unknown key'); indented keys with trailing
    spaces and comment blocks, as the published inputs write them."""
    text = "".join(f"#  {k}: what it means\n#  Required: yes\n   {ln}   \n\n"
                   for k, ln in ((ln.split()[0], ln) for ln in DBEC.splitlines()))
    text += ("#" * 60 + "\n   NRUNOUT = imag1d-z-den   \n   INITOUT = imag1d-z-den0\n"
             "   POTMEM = 1\n   DEVICE = 0\n")
    r = run_dbec(tmp_path, text)
    assert r.returncode == 0, r.stderr
    assert tree(tmp_path) == ["imag1d-z-den.bin", "imag1d-z-den0.bin", "imag1d-z-input",
                              "imag1d-z-out.txt", "imag1d-z-psi.npz", "imag1d-z-rms.txt"]
    assert (tmp_path / "imag1d-z-den.bin").stat().st_size == 8 * 32
    # the real-time program starts from it with no INPUT key ... when named so
    r = run_dbec(tmp_path, DBEC, name="real1d-z-input")
    assert r.returncode == 0, r.stderr


# ------------------------------------------------------- byte-order marks
BOM = "\ufeff"


def test_demo_input_with_a_byte_order_mark_runs(tmp_path):
    """An input saved by an editor that starts UTF-8 files with a byte-order
    mark: the same run as without it (was: invalid TOML)."""
    (tmp_path / "in.toml").write_text(BOM + demo_input(), encoding="utf-8")
    r = cli(tmp_path, "demo", "--input", "in.toml", "--out", "out")
    assert r.returncode == 0, r.stderr
    (tmp_path / "plain.toml").write_text(demo_input(), encoding="utf-8")
    r = cli(tmp_path, "demo", "--input", "plain.toml", "--out", "plain")
    assert r.returncode == 0, r.stderr
    a, b = np.load(tmp_path / "out" / "frames.npz"), np.load(tmp_path / "plain" / "frames.npz")
    assert sorted(a.files) == sorted(b.files)
    assert all(np.array_equal(a[k], b[k]) for k in a.files)


def test_dbec_input_with_a_byte_order_mark_is_read(tmp_path):
    """The dbec parser read the mark as part of the first key ('unknown key
    \\ufeffOPTION'); the file now gives the same keys as without it."""
    (tmp_path / "bom").write_text(BOM + DBEC, encoding="utf-8")
    (tmp_path / "plain").write_text(DBEC, encoding="utf-8")
    with_bom = nl.dbec.read_input(tmp_path / "bom")
    plain = nl.dbec.read_input(tmp_path / "plain")
    assert {k: v for k, v in with_bom.items() if not k.startswith("_")} == \
        {k: v for k, v in plain.items() if not k.startswith("_")}
    assert with_bom["_line"] == plain["_line"]
    r = run_dbec(tmp_path, BOM + DBEC)
    assert r.returncode == 0, r.stderr
