"""The moments a stepping call records (nlse_dipolar_step_record) and the
DYNAOUT rows made from them: the norm and <x_a^2> of the state after the
recorded steps equal those of ``observables()`` (and the rows of a stepping
call per row) to round-off, in every geometry; the state is that of plain
stepping, bit for bit (CPU backend)."""

import math
import os

import numpy as np
import pytest

import nlsepy as nl
from nlsepy.dipolar import dbec
from nlsepy.dipolar import solver as dsolver

from _helpers import write_real3d_input

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "dbec")

CPU = dict(backend="cpu")

# geometry, shape, spacing, trap: small grids, every axis different
GEOMS = [("3d", (16, 12, 10), 0.5, (0.8, 1.1, 1.4)),
         ("2d-xy", (20, 16), 0.45, (0.9, 1.2, 3.0)),
         ("2d-xz", (20, 18), 0.45, (0.9, 3.0, 1.3)),
         ("1d-x", (40,), 0.3, (0.8, 3.0, 3.0)),
         ("1d-z", (36,), 0.3, (3.0, 3.0, 1.2))]


def make(geometry, shape, h, trap, **kw):
    """A solver with the dipolar term, a potential and a complex, moving state."""
    gpe = nl.DipolarGPE(shape, h, 0.01, g=6.0, gdd=3.0, trap=trap, geometry=geometry,
                        cutoff=3.0 if geometry == "3d" else None, **CPU, **kw)
    c = gpe.coords
    grids = np.meshgrid(*c, indexing="ij")
    gpe.psi = gpe.psi * np.exp(1j * (0.4 * grids[0] + 0.15 * grids[-1] ** 2)) * \
        (1.0 + 0.2 * np.tanh(grids[0]))
    gpe.V = 0.05 * np.cos(grids[0])
    return gpe


def observe_rows(gpe, mode, steps, every, phase):
    """The reference: a stepping call per recorded step, then observables()."""
    advance = gpe.real_time if mode == "real" else gpe.imaginary_time
    rows, count = [], phase
    for _ in range(steps):
        advance(1)
        count += 1
        if count % every == 0:
            o = gpe.observables()
            rows.append([o["norm"], *o["x2"]])
    return np.array(rows).reshape(-1, 1 + gpe.ndim)


@pytest.mark.parametrize("geometry,shape,h,trap", GEOMS, ids=[g[0] for g in GEOMS])
def test_recorded_moments_equal_observables_in_real_time(geometry, shape, h, trap):
    a, b = make(geometry, shape, h, trap), make(geometry, shape, h, trap)
    rows = a._steps_recording("real", 17, 3, phase=1)
    ref = observe_rows(b, "real", 17, 3, 1)
    assert rows.shape == ref.shape == ((1 + 17) // 3, 1 + len(shape))
    assert np.abs(rows / ref - 1).max() < 1e-13
    assert np.array_equal(a.psi, b.psi)  # recording changes nothing in the steps
    assert a.t == pytest.approx(b.t, rel=1e-14) and a.steps == b.steps
    # and the sizes the DYNAOUT rows were made from before: the 1D densities
    r, rms = dbec._rms(b)
    x2 = rows[-1, 1:]
    assert math.sqrt(sum(x2)) == pytest.approx(r, rel=1e-13)
    assert np.allclose(np.sqrt(x2), rms, rtol=1e-13, atol=0)


@pytest.mark.parametrize("geometry,shape,h,trap", [GEOMS[0], GEOMS[1], GEOMS[4]],
                         ids=["3d", "2d-xy", "1d-z"])
def test_recorded_moments_in_imaginary_time_are_those_of_the_normalised_state(
        geometry, shape, h, trap):
    a, b = make(geometry, shape, h, trap), make(geometry, shape, h, trap)
    rows = a._steps_recording("imaginary", 12, 4)
    ref = observe_rows(b, "imaginary", 12, 4, 0)
    assert np.all(rows[:, 0] == 1.0)
    # b's calls each end with an exact renormalisation: round-off apart
    assert np.abs(rows / ref - 1).max() < 1e-12
    o = a.observables()
    assert np.allclose(rows[-1, 1:], o["x2"], rtol=1e-13, atol=0)


def test_recording_across_blocks_keeps_the_phase(monkeypatch):
    """A long call runs in blocks (one C call each): the recorded steps are
    counted across them."""
    geometry, shape, h, trap = GEOMS[0]
    a, b = make(geometry, shape, h, trap), make(geometry, shape, h, trap)
    whole = b._steps_recording("real", 23, 5, phase=2)
    monkeypatch.setattr(dsolver.DipolarGPE, "block_steps", property(lambda self: 4))
    blocks = a._steps_recording("real", 23, 5, phase=2)
    assert blocks.shape == whole.shape == (5, 4)
    assert np.array_equal(blocks, whole) and np.array_equal(a.psi, b.psi)
    assert a._steps_recording("real", 2, 5, phase=0).shape == (0, 4)


@pytest.mark.parametrize("geometry,shape,h,trap", GEOMS, ids=[g[0] for g in GEOMS])
def test_dyna_rows_equal_those_of_a_call_per_row(geometry, shape, h, trap):
    """dbec's stage: the rows from the recorded moments are the rows of a
    stepping call per row and the 1D densities, text for text."""
    a, b = make(geometry, shape, h, trap), make(geometry, shape, h, trap)
    fast, slow = [], []
    done_a = dbec._stage(a, "real", 14, 3, 4, 0.01, 2, fast)
    done_b = dbec._stage(b, "real", 14, 3, 4, 0.01, 2, slow, per_call=True)
    # rows after iterations 5, 9, 13, 17, labelled (iteration - 1) DT OPTION
    assert done_a == done_b == 17 and len(fast) == len(slow) == 4
    assert fast == slow
    assert [float(ln.split()[0]) for ln in fast] == pytest.approx([0.08, 0.16, 0.24, 0.32])
    assert np.array_equal(a.psi, b.psi)


def test_dbec_run_writes_the_same_dynaout_as_a_call_per_row(tmp_path, monkeypatch):
    """A whole real-time run (NPAS, the couplings changed, NRUN): the same
    DYNAOUT file as the run that stepped and measured row by row."""
    path = tmp_path / "real3d-input"
    write_real3d_input(path, (16, 12, 12), outstpt=3)
    psi = make("3d", (16, 12, 12), 0.6, (0.5, 1.0, 1.5)).psi
    for run in ("fast", "slow"):  # the published start: the density in the run's folder
        (tmp_path / run).mkdir()
        (tmp_path / run / "imag3d-den.bin").write_bytes(
            (np.abs(psi) ** 2).astype("<f8").tobytes())
    dbec.run(str(path), out_dir=str(tmp_path / "fast"), backend="cpu")
    monkeypatch.setattr(dsolver.DipolarGPE, "_can_record", lambda self: False)
    dbec.run(str(path), out_dir=str(tmp_path / "slow"), backend="cpu")
    fast = (tmp_path / "fast" / "real3d-dyna.txt").read_text()
    slow = (tmp_path / "slow" / "real3d-dyna.txt").read_text()
    assert fast == slow and len(fast.splitlines()) == 6  # after iterations 1, 4, ..., 16


def test_bad_recording_requests_are_refused():
    gpe = make(*GEOMS[3])
    with pytest.raises(ValueError, match="every"):
        gpe._steps_recording("real", 4, 0)
    with pytest.raises(ValueError, match="phase"):
        gpe._steps_recording("real", 4, 3, phase=3)
    with pytest.raises(ValueError, match="mode"):
        gpe._steps_recording("sideways", 4, 1)
    with pytest.raises(ValueError, match="phase"):
        gpe._solver.step_record(1, 4, 0.0, 0.0, 0.0, 2, -1)
    assert gpe.steps == {"imaginary": 0, "real": 0}


@pytest.mark.parametrize("axes", [1, 2, 3])
def test_dyna_lines_from_a_table_are_those_of_dyna_line(axes):
    """The rows formatted from a NumPy table (what a recorded stage writes)
    are the text _dyna_line gives row by row, to the byte, negative
    round-off in a moment included."""
    rng = np.random.default_rng(7 + axes)
    rows = rng.random((257, 1 + axes)) * 10.0 ** rng.uniform(-6, 6, (257, 1 + axes))
    rows[::5, 1] = -1e-19
    for first, every, dt, option in ((3, 3, 0.005, 2), (1, 1, 4e-4, 1), (40, 20, 0.02, 2)):
        want = [dbec._dyna_line((first + q * every) * dt * option,
                                math.sqrt(max(sum(r[1:]), 0.0)),
                                [math.sqrt(max(v, 0.0)) for v in r[1:]])
                for q, r in enumerate(rows.tolist())]
        assert dbec._dyna_lines(rows, first, every, dt, option) == want
    assert dbec._dyna_lines(rows[:0], 1, 1, 0.1, 1) == []


@pytest.mark.parametrize("outstpt", [None, 1, 7], ids=["file", "every-step", "every-7"])
def test_repository_sample_dynaout_is_labelled_as_published(tmp_path, outstpt):
    """examples/dbec/real3d-input (its NPAS, NRUN, DT and OPTION; a coarse
    grid): the DYNAOUT rows come after iterations 1, 1 + OUTSTPT, ...,
    labelled (iteration - 1) DT OPTION, so the first label is 0 and there
    are ceil((NPAS + NRUN) / OUTSTPT) rows, as in the published real3d run."""
    sample = os.path.join(EXAMPLES, "real3d-input")
    cfg = dbec.read_input(sample)
    shape = (16, 12, 12)
    over = {"NX": shape[0], "NY": shape[1], "NZ": shape[2], "DX": 0.6, "DY": 0.6, "DZ": 0.6}
    if outstpt is not None:
        over["OUTSTPT"] = outstpt
    every = over.get("OUTSTPT", cfg["OUTSTPT"])
    psi = make("3d", shape, 0.6, (cfg["GAMMA"], cfg["NU"], cfg["LAMBDA"])).psi
    np.savez(tmp_path / cfg["INPUT"], psi=psi)
    dbec.run(sample, out_dir=str(tmp_path), backend="cpu", overrides=over)
    dyna = np.loadtxt(tmp_path / (cfg["DYNAOUT"] + ".txt"))
    steps = cfg["NPAS"] + cfg["NRUN"]
    assert dyna.shape[0] == -(-steps // every)
    assert dyna[0, 0] == 0.0
    iterations = 1 + every * np.arange(dyna.shape[0])
    assert np.allclose(dyna[:, 0], (iterations - 1) * cfg["DT"] * cfg["OPTION"], rtol=1e-12)
    assert iterations[-1] <= steps
