"""DBEC-GP drop-in: input files in the published programs' style run as they
are, and the runs write the published programs' files (docs/DBEC_FILES.md).

The input files here are written for these tests in the published style:
a long ``#`` block before every key, keys indented by three spaces, values
followed by spaces, every output key set.
"""

import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import nlsepy as nl
from nlsepy.dipolar import dbec

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = dict(os.environ, PYTHONWARNINGS="ignore")

# what each key means, written before it as a comment block
HELP = {
    "OPTION": ("Scaling of the Gross-Pitaevskii equation: 1 puts a factor 1/2 in front of",
               "the kinetic term, 2 does not (the chemical potential and the energy are",
               "then printed divided by 2)."),
    "NATOMS": ("Number of atoms in the condensate.",),
    "AHO": ("Unit of length, the oscillator length of the reference frequency (m).",),
    "AS": ("Contact scattering length, in Bohr radii.",),
    "ADD": ("Dipolar length, in Bohr radii.",),
    "CUTOFF": ("Radius of the spherical cut-off of the dipolar kernel.",),
    "GPAR": ("Factor on the contact coupling after NPAS steps of a real-time run.",),
    "GDDPAR": ("Factor on the dipolar coupling after NPAS steps of a real-time run.",),
    "NX": ("Points along x.",), "NY": ("Points along y.",), "NZ": ("Points along z.",),
    "DX": ("Spacing along x.",), "DY": ("Spacing along y.",), "DZ": ("Spacing along z.",),
    "DT": ("Time step.",),
    "GAMMA": ("Trap frequency along x over the reference frequency.",),
    "NU": ("Trap frequency along y over the reference frequency.",),
    "LAMBDA": ("Trap frequency along z over the reference frequency.",),
    "NSTP": ("Steps over which the couplings are ramped from zero.",),
    "NPAS": ("Steps at full coupling.",), "NRUN": ("Final steps.",),
    "OUTPUT": ("Summary file (.txt is added).",), "RMSOUT": ("Rms sizes (.txt is added).",),
    "DYNAOUT": ("Rms sizes in time (.txt is added).",),
    "INITOUT": ("Densities after initialisation.",),
    "NSTPOUT": ("Densities after NSTP steps.",), "NPASOUT": ("Densities after NPAS steps.",),
    "NRUNOUT": ("Densities after NRUN steps.",),
    "OUTSTPX": ("Output every OUTSTPX points along x.",),
    "OUTSTPY": ("Output every OUTSTPY points along y.",),
    "OUTSTPZ": ("Output every OUTSTPZ points along z.",),
    "OUTSTPT": ("Dynamics output every OUTSTPT steps.",),
    "POTMEM": ("GPU memory for the potentials: 0, 1 or 2 arrays.",),
    "DEVICE": ("GPU to run on.",),
}


def published(items):
    """An input file in the published style from (key, value) pairs."""
    out = ["#" * 70, "#  Input parameters (written for the tests of nlsepy)", "#" * 70, ""]
    for key, value in items:
        out.append("#" + "-" * 69)
        out += [f"#  {line}" for line in HELP.get(key, (key,))]
        out += ["#  Required: yes", "#" + "-" * 69, f"   {key} = {value}   ", ""]
    return "\n".join(out) + "\n"


def common(dims, **kw):
    items = [("OPTION", 2), ("NATOMS", 5000), ("AHO", "1.e-6"), ("AS", "100."),
             ("ADD", "132.7" if dims == 3 else "0."), ("CUTOFF", "3."),
             ("GPAR", "1.5"), ("GDDPAR", "1.")]
    grid = {3: (("X", 16, 0.6), ("Y", 12, 0.6), ("Z", 12, 0.6)),
            2: (("X", 24, 0.4), ("Y", 24, 0.4)), 1: (("X", 32, 0.3),)}[dims]
    items += [(f"N{a}", n) for a, n, _ in grid] + [(f"D{a}", h) for a, _, h in grid]
    items += [("DT", "0.01"), ("GAMMA", "0.5" if dims == 3 else "1.0"),
              ("NU", "1.0" if dims == 3 else ("1.0" if dims == 2 else "7.0")),
              ("LAMBDA", "1.5" if dims == 3 else "7.0"),
              ("NSTP", kw.pop("NSTP", 0)), ("NPAS", kw.pop("NPAS", 8)),
              ("NRUN", kw.pop("NRUN", 12))]
    items += list(kw.items())
    return items


def outputs(prog, dims, real):
    kw = dict(OUTPUT=f"{prog}-out", RMSOUT=f"{prog}-rms")
    if real:
        kw["DYNAOUT"] = f"{prog}-dyna"
    kw.update(INITOUT=f"{prog}-den-init", NSTPOUT=f"{prog}-den-nstp",
              NPASOUT=f"{prog}-den-npas", NRUNOUT=f"{prog}-den",
              OUTSTPX=2, OUTSTPY=(2 if dims == 2 else 3), OUTSTPZ=2, OUTSTPT=4,
              POTMEM=2, DEVICE=0)
    return kw


def cli(folder, *args):
    return subprocess.run([sys.executable, "-m", "nlsepy", "dbec", *args], cwd=folder,
                          capture_output=True, text=True, env=ENV, timeout=300)


def expected_files(prefix, dims, shape, steps):
    """File name -> size in bytes, as docs/DBEC_FILES.md gives them."""
    axes = "xyz"[:dims]
    n = dict(zip(axes, (math.ceil(s / k) for s, k in zip(shape, steps))))
    out = {f"{prefix}.bin": 8 * int(np.prod(shape))}
    if dims > 1:
        out.update({f"{prefix}1d_{a}.bin": 16 * n[a] for a in axes})
    if dims == 3:
        for a, b in (("x", "y"), ("x", "z"), ("y", "z")):
            out[f"{prefix}2d_{a}{b}.bin"] = 24 * n[a] * n[b]
        out[f"{prefix}3d_xy0.bin"] = 24 * n["x"] * n["y"]
        out[f"{prefix}3d_x0z.bin"] = 24 * n["x"] * n["z"]
        out[f"{prefix}3d_0yz.bin"] = 24 * n["y"] * n["z"]
    return out


CASES = [(3, "3d", (16, 12, 12), (2, 3, 2)), (2, "2d", (24, 24), (2, 2)), (1, "1d", (32,), (2,))]


@pytest.mark.parametrize("dims,tag,shape,steps", CASES)
def test_published_style_pair_runs_and_writes_the_published_files(tmp_path, dims, tag, shape,
                                                                  steps):
    """imagNd then realNd in one folder, no INPUT key: exactly the published files."""
    imag, real = f"imag{tag}", f"real{tag}"
    (tmp_path / f"{imag}-input").write_text(
        published(common(dims, NSTP=4, **outputs(imag, dims, False))))
    (tmp_path / f"{real}-input").write_text(
        published(common(dims, **outputs(real, dims, True))))
    r = cli(tmp_path, f"{imag}-input")
    assert r.returncode == 0, r.stderr
    r = cli(tmp_path, f"{real}-input")
    assert r.returncode == 0, r.stderr
    want = {}
    for prog in (imag, real):
        for stage in ("-den-init", "-den-nstp", "-den-npas", "-den"):
            want.update(expected_files(prog + stage, dims, shape, steps))
        want[f"{prog}-out.txt"] = None
        want[f"{prog}-rms.txt"] = None
        want[f"{prog}-psi.npz"] = None  # nlsepy's own full complex state (PSIOUT default)
    want[f"{real}-dyna.txt"] = None
    want[f"{imag}-input"] = want[f"{real}-input"] = None
    assert sorted(os.listdir(tmp_path)) == sorted(want)
    for name, size in want.items():
        if size is not None:
            assert os.path.getsize(tmp_path / name) == size, name
    # the real-time run started from imagNd-den.bin: its Initial row is the
    # imaginary-time run's last row
    rows = {p: {ln.split(":")[0].strip(): ln.split(":")[1].split()
                for ln in (tmp_path / f"{p}-out.txt").read_text().splitlines()
                if ln.startswith(("Initial", "After"))} for p in (imag, real)}
    assert rows[real]["Initial"] == rows[imag]["After NRUN iter."]
    # DYNAOUT: after iterations 1, 5, ..., 17 of NPAS (8) and NRUN (12),
    # labelled (iteration - 1) DT OPTION from 0 as the published programs do
    dyna = np.loadtxt(tmp_path / f"{real}-dyna.txt")
    assert dyna.shape == (5, 2 + dims)
    assert np.allclose(dyna[:, 0], np.arange(0, 20, 4) * 0.01 * 2, rtol=1e-12)


def test_density_file_layouts(tmp_path):
    """The binary layouts: full density, pairs, triples, cuts through 0."""
    items = common(3, **outputs("imag3d", 3, False))
    path = tmp_path / "imag3d-input"
    path.write_text(published(items))
    res = nl.dbec.run(path, out_dir=str(tmp_path))
    gpe = res.gpe
    den = np.abs(gpe.psi) ** 2
    x, y, z = gpe.coords
    full = np.fromfile(tmp_path / "imag3d-den.bin").reshape(gpe.shape)
    assert np.allclose(full, den, rtol=1e-14, atol=0)
    d1 = np.fromfile(tmp_path / "imag3d-den1d_y.bin").reshape(-1, 2)
    assert np.array_equal(d1[:, 0], y[::3])
    assert np.allclose(d1[:, 1], gpe.density(("y",))[::3])
    d2 = np.fromfile(tmp_path / "imag3d-den2d_xz.bin").reshape(-1, 3)
    gx, gz = np.meshgrid(x[::2], z[::2], indexing="ij")
    assert np.array_equal(d2[:, 0], gx.ravel()) and np.array_equal(d2[:, 1], gz.ravel())
    assert np.allclose(d2[:, 2], gpe.density(("x", "z"))[::2, ::2].ravel())
    cut = np.fromfile(tmp_path / "imag3d-den3d_xy0.bin").reshape(-1, 3)
    assert z[len(z) // 2] == 0
    assert np.allclose(cut[:, 2], den[::2, ::3, len(z) // 2].ravel())
    cut = np.fromfile(tmp_path / "imag3d-den3d_0yz.bin").reshape(-1, 3)
    gy, gz = np.meshgrid(y[::3], z[::2], indexing="ij")
    assert np.array_equal(cut[:, 0], gy.ravel())
    assert np.allclose(cut[:, 2], den[len(x) // 2, ::3, ::2].ravel())


@pytest.mark.parametrize("dims,tag", [(3, "3d"), (1, "1d")])
def test_reading_the_bin_back_continues_bit_identically(tmp_path, dims, tag):
    """NPAS + NRUN in one run equals NPAS steps, NRUNOUT's .bin, then NRUN
    steps from it (double precision, bit for bit)."""
    prog = f"imag{tag}"
    one = tmp_path / "one"
    two = tmp_path / "two"
    one.mkdir()
    two.mkdir()
    (one / f"{prog}-input").write_text(published(common(dims, NPAS=6, NRUN=9)))
    a = nl.dbec.run(one / f"{prog}-input", out_dir=str(one))
    (two / f"{prog}-input").write_text(published(common(dims, NPAS=6, NRUN=0,
                                                        NRUNOUT=f"{prog}-den")))
    nl.dbec.run(two / f"{prog}-input", out_dir=str(two))
    (two / f"{prog}-input").write_text(published(common(dims, NPAS=0, NRUN=9,
                                                        INPUT=f"{prog}-den.bin")))
    b = nl.dbec.run(two / f"{prog}-input", out_dir=str(two))
    assert np.array_equal(a.gpe.psi, b.gpe.psi)


@pytest.mark.parametrize("cut", [8, 100, -8])
def test_wrong_size_state_file_is_refused(tmp_path, cut):
    """A truncated or wrong-size imag3d-den.bin: the file, the expected and
    the found size; nothing written."""
    (tmp_path / "real3d-input").write_text(published(common(3, **outputs("real3d", 3, True))))
    size = 8 * 16 * 12 * 12
    (tmp_path / "imag3d-den.bin").write_bytes(b"\0" * (size - cut))
    before = sorted(os.listdir(tmp_path))
    r = cli(tmp_path, "real3d-input")
    assert r.returncode == 2
    line = r.stderr.strip()
    assert len(line.splitlines()) == 1
    assert "imag3d-den.bin" in line and f"holds {size - cut} bytes" in line
    assert f"needs {size} bytes" in line and "16x12x12" in line
    assert sorted(os.listdir(tmp_path)) == before


def test_missing_state_file_says_how_to_make_it(tmp_path):
    (tmp_path / "real2d-input").write_text(published(common(2, NPAS=2, NRUN=2)))
    r = cli(tmp_path, "real2d-input")
    assert r.returncode == 2
    assert "'imag2d-den.bin'" in r.stderr and "does not exist" in r.stderr
    assert "NRUNOUT = imag2d-den" in r.stderr and "imag2d-input" in r.stderr
    assert sorted(os.listdir(tmp_path)) == ["real2d-input"]


def test_unknown_key_in_a_published_file_names_key_and_line(tmp_path):
    text = published(common(1)) + "   NRUNUOT = x   \n"
    (tmp_path / "imag1d-input").write_text(text)
    with pytest.raises(dbec.InputError, match=rf":{len(text.splitlines())}: unknown key "
                                              r"'NRUNUOT'"):
        nl.dbec.run(tmp_path / "imag1d-input", out_dir=str(tmp_path))


@pytest.mark.parametrize("line,match", [("POTMEM = 3", "POTMEM must be 0, 1 or 2"),
                                        ("DEVICE = -1", "DEVICE must be >= 0"),
                                        ("DEVICE = gpu", "key DEVICE must be an integer")])
def test_device_keys_checked(tmp_path, line, match):
    (tmp_path / "imag1d-input").write_text(published(common(1)) + f"   {line}\n")
    with pytest.raises(dbec.InputError, match=match):
        nl.dbec.run(tmp_path / "imag1d-input", out_dir=str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["imag1d-input"]


def test_initial_row_uses_the_couplings_of_iteration_zero(tmp_path):
    """NSTP > 0: the ramp starts from zero, so the Initial row is the linear
    problem's (the same as with AS = ADD = 0); mu and E divided by OPTION."""
    (tmp_path / "imag3d-input").write_text(published(common(3, NSTP=3)))
    res = nl.dbec.run(tmp_path / "imag3d-input", out_dir=str(tmp_path))
    lin = [(k, "0." if k in ("AS", "ADD") else v) for k, v in common(3, NSTP=0)]
    (tmp_path / "imag3d-input").write_text(published(lin))
    res0 = nl.dbec.run(tmp_path / "imag3d-input", out_dir=str(tmp_path))
    a, b = res.rows["Initial"], res0.rows["Initial"]
    assert a["mu_dbec"] == pytest.approx(b["mu_dbec"], rel=1e-12)
    assert a["energy_dbec"] == pytest.approx(b["energy_dbec"], rel=1e-12)
    # linear, OPTION = 2: mu = E = (trap's zero-point energy) / 2 for the Gaussian
    assert a["mu_dbec"] == pytest.approx(a["energy_dbec"], rel=1e-12)
    row = [ln for ln in res.summary.splitlines() if ln.startswith("Initial:")][0]
    assert float(row.split()[2]) == pytest.approx(a["mu_dbec"], abs=6e-6)
    assert "After NSTP iter.:" in res.summary


def test_nlsepy_extras_on_a_labelled_line(tmp_path):
    (tmp_path / "real1d-input").write_text(published(common(1, NPAS=2, NRUN=2)))
    (tmp_path / "imag1d-input").write_text(published(common(1, NRUNOUT="imag1d-den")))
    nl.dbec.run(tmp_path / "imag1d-input", out_dir=str(tmp_path))
    res = nl.dbec.run(tmp_path / "real1d-input", out_dir=str(tmp_path))
    lines = res.summary.splitlines()
    extra = [ln for ln in lines if "flow" in ln]
    assert len(extra) == 1 and extra[0].strip().startswith("nlsepy (not in the published table)")
    assert lines.index(extra[0]) > max(i for i, ln in enumerate(lines) if ln.startswith("After"))


#: a number as the -out.txt files print it
NUMBER = re.compile(r"[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?")


def check_same_printed_rows(a, b, where):
    """Two -out.txt texts print the same rows: the same words, and the same
    numbers, each to one unit of its last printed digit (the backends
    agree to about 1e-12, so a value on a rounding boundary may print one
    digit apart); the clock and CPU-time lines differ by design."""
    rows = [[ln for ln in text.splitlines() if "Time:" not in ln] for text in (a, b)]
    assert len(rows[0]) == len(rows[1]), where
    for x, y in zip(*rows):
        assert NUMBER.sub("#", x) == NUMBER.sub("#", y), (where, x, y)
        for u, v in zip(NUMBER.findall(x), NUMBER.findall(y)):
            mantissa = re.split("[eE]", u)[0]
            decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
            exponent = int(re.split("[eE]", u)[1]) if re.search("[eE]", u) else 0
            assert abs(float(u) - float(v)) <= 1.01 * 10.0 ** (exponent - decimals), (where, x, y)


def test_printed_rows_check_sees_one_digit():
    """check_same_printed_rows on the rows the CPU prints: equal to
    themselves, refused with one number changed in its fourth decimal
    (which the line lengths, compared before, did not see)."""
    text = """  ------------------------------------------------------------------
                      Norm       Chem     Ener/N       <r>  |Psi(0,0,0)|^2
Initial:            1.0000    6.32295    4.43693   2.11999    0.03220
After NRUN iter.:   1.0052    7.88949    5.29859   2.20998    0.02372
  Clock Time: 7 seconds
"""
    check_same_printed_rows(text, text.replace("Clock Time: 7", "Clock Time: 9"), "same")
    check_same_printed_rows(text, text.replace("7.88949", "7.88950"), "last digit")
    with pytest.raises(AssertionError):
        check_same_printed_rows(text, text.replace("7.88949", "7.88959"), "changed")
    with pytest.raises(AssertionError):
        check_same_printed_rows(text, text.replace("Initial:", "Initial;"), "words")


@pytest.mark.cuda
def test_published_pair_on_cuda_matches_cpu(tmp_path):
    if "cuda" not in nl.backends("DipolarGPE"):
        pytest.skip("no CUDA backend")
    files = {}
    for backend in ("cpu", "cuda"):
        d = tmp_path / backend
        d.mkdir()
        (d / "imag3d-input").write_text(published(common(3, **outputs("imag3d", 3, False))))
        (d / "real3d-input").write_text(published(common(3, **outputs("real3d", 3, True))))
        for prog in ("imag3d", "real3d"):
            r = cli(d, f"{prog}-input", "--backend", backend)
            assert r.returncode == 0, r.stderr
        files[backend] = {n: os.path.getsize(d / n) for n in os.listdir(d)
                          if not n.endswith("-out.txt")}
    assert files["cpu"] == files["cuda"]
    for prog in ("imag3d", "real3d"):  # the same rows; the clock and CPU seconds differ
        check_same_printed_rows(*((tmp_path / b / f"{prog}-out.txt").read_text()
                                  for b in ("cpu", "cuda")), prog)
    a = np.fromfile(tmp_path / "cpu" / "real3d-den.bin")
    b = np.fromfile(tmp_path / "cuda" / "real3d-den.bin")
    assert np.allclose(a, b, rtol=1e-9, atol=1e-12)


@pytest.mark.slow
def test_published_style_3d_pair_gives_listing_3_11(tmp_path):
    """The 128x96x80 pair of listing 3.11 from published-style files, real3d
    starting from imag3d-den.bin: every row to the printed digit, and the
    dyna file's rows and time column."""
    base = [(k, v) for k, v in common(3)
            if k not in ("CUTOFF", "NX", "NY", "NZ", "DX", "DY", "DZ", "DT", "NSTP",
                         "NPAS", "NRUN")]
    grid = [("CUTOFF", "10."), ("NX", 128), ("NY", 96), ("NZ", 80), ("DX", "0.2"),
            ("DY", "0.2"), ("DZ", "0.2"), ("DT", "0.005"), ("NSTP", 0)]
    (tmp_path / "imag3d-input").write_text(published(
        base + grid + [("NPAS", 500), ("NRUN", 500), ("OUTPUT", "imag3d-out"),
                       ("RMSOUT", "imag3d-rms"), ("NRUNOUT", "imag3d-den"),
                       ("OUTSTPX", 1), ("OUTSTPY", 1), ("OUTSTPZ", 1)]))
    (tmp_path / "real3d-input").write_text(published(
        base + grid + [("NPAS", 100), ("NRUN", 900), ("OUTPUT", "real3d-out"),
                       ("RMSOUT", "real3d-rms"), ("DYNAOUT", "real3d-dyna"),
                       ("OUTSTPT", 10)]))
    for name in ("imag3d-input", "real3d-input"):
        r = cli(tmp_path, name)
        assert r.returncode == 0, r.stderr
    rows = {ln.split(":")[0].strip(): [float(v) for v in ln.split(":")[1].split()]
            for ln in (tmp_path / "real3d-out.txt").read_text().splitlines()
            if ln.startswith(("Initial", "After"))}
    assert rows["Initial"] == [1.0, 5.81621, 4.33909, 2.54499, 0.02162]
    assert np.allclose(rows["After NPAS iter."], [1.0, 5.81920, 4.33911, 2.54358, 0.02181],
                       rtol=0, atol=3e-5)
    assert np.allclose(rows["After NRUN iter."], [1.0, 6.93923, 5.00916, 2.63297, 0.01448],
                       rtol=0, atol=3e-5)
    dyna = np.loadtxt(tmp_path / "real3d-dyna.txt")
    assert dyna.shape == (100, 5)
    assert np.allclose(dyna[:, 0], np.arange(0, 100) * 10 * 0.005 * 2, rtol=1e-12)
