"""Rank side of the distributed Maxwell-Bloch tests (run by
tests/mbloch/test_mbloch_mpi.py under ``mpirun -n 2`` and ``-n 3``; every
rank runs every test, so each calls the collectives in the same order).

- ``nl.MaxwellBloch(..., comm=)`` against the single-process solver, which
  every rank also runs as the reference: a multi-level, multi-mode ensemble
  of 13 atoms (split 7 + 6 and 5 + 4 + 4), 100 z steps, fields, populations
  and the norm monitor within 1e-12 in double (the sum over atoms is
  reassociated, so not bit for bit), every rank holding the same result;
  single precision within float accuracy.
- Two runs with the same ranks: bit-identical; the layout (``local_slice``,
  ``comm_info``); ``replace`` keeps the communicator.
- One rank's bad input (a NaN, a wrong shape, an argument that differs
  from rank 0's, fields0 with a NaN) and fewer atoms than ranks: the same
  ValueError on every rank, no hang.
- A blow-up in one rank's atoms only: BlowUpError on every rank at the same
  z step, the last good fields kept.
- Ctrl-C reaching one rank and a callback ending the run on one rank: every
  rank stops after the same z step.
"""

import os
import signal

import numpy as np
import pytest
from mpi4py import MPI

import nlsepy as nl
from nlsepy.reference import mbloch as rm

from _helpers import mbloch_multilevel, same_everywhere

COMM = MPI.COMM_WORLD
RANK, SIZE = COMM.Get_rank(), COMM.Get_size()
LAST = SIZE - 1
N_AT, H_T, N_T, H_Z = 13, 0.03, 121, 0.01


def model(n_atoms=N_AT, seed=3):
    """n_g = 4, n_e = 3, modes -1..2, Franck-Condon F, a Gaussian line, level
    and mode spacings, a different normalised state per atom; fields in
    three modes."""
    kw, det, w, e0 = mbloch_multilevel(n_atoms, seed, rm.time_grid(H_T, N_T),
                                       gaussian=(0.5, 1.8), sech=(0.4, 2.0))
    kw.update(h_t=H_T, n_t=N_T, line=(det, w))
    return kw, e0


def test_layout():
    kw, _ = model()
    mb = nl.MaxwellBloch(**kw, comm=COMM)
    counts, starts = [N_AT // SIZE + (r < N_AT % SIZE) for r in range(SIZE)], [0]
    for c in counts[:-1]:
        starts.append(starts[-1] + c)
    assert mb.local_slice == slice(starts[RANK], starts[RANK] + counts[RANK])
    info = mb.comm_info
    assert info["rank"] == RANK and info["size"] == SIZE
    assert info["atoms_per_rank"] == counts and info["atoms"] == (starts[RANK],
                                                                  starts[RANK] + counts[RANK])
    assert mb.n_atoms == N_AT and mb.detunings.shape == (N_AT,)  # the model is global
    assert mb.replace(beta=0.5).comm is COMM
    assert nl.MaxwellBloch(**kw).comm_info is None


def test_matches_single_process_double():
    """100 z steps (Euler start with 3 sub-steps): within 1e-12 of one
    process, the same bits on every rank."""
    kw, e0 = model()
    run = dict(h_z=H_Z, n_z=100, save_every=25, euler_substeps=3)
    out = nl.MaxwellBloch(**kw, comm=COMM).run(e0, **run)
    ref = nl.MaxwellBloch(**kw).run(e0, **run)
    assert np.array_equal(out.z, ref.z) and out.fields.shape == ref.fields.shape == (5, N_T, 4)
    scale = np.abs(ref.fields).max()
    assert np.abs(out.fields - ref.fields).max() < 1e-12 * scale
    assert np.abs(out.populations - ref.populations).max() < 1e-12
    assert out.norm_deviation == pytest.approx(ref.norm_deviation, rel=1e-10, abs=1e-15)
    assert np.abs(out.fields[-1, :, 0]).max() > 1e-4  # the coupling acted
    for a in (out.fields, out.populations, np.array([out.norm_deviation])):
        assert same_everywhere(COMM, a)


def test_polarisation_and_full_map():
    """The callback's polarisation and the full z map: 1e-12, every rank the same."""
    kw, e0 = model()
    pol = {}

    def grab(key):
        def cb(state):
            if state.j in (1, 7):
                pol[key, state.j] = state.polarisation
        return cb
    out = nl.MaxwellBloch(**kw, comm=COMM).run(e0, H_Z, 8, full_map=True, populations=False,
                                              callback=grab("mpi"))
    ref = nl.MaxwellBloch(**kw).run(e0, H_Z, 8, full_map=True, populations=False,
                                   callback=grab("one"))
    assert out.populations is None and out.fields.shape == (9, N_T, 4)
    assert np.abs(out.fields - ref.fields).max() < 1e-12 * np.abs(ref.fields).max()
    for j in (1, 7):
        p, q = pol["mpi", j], pol["one", j]
        assert np.abs(p - q).max() < 1e-12 * np.abs(q).max()
        assert same_everywhere(COMM, p)


def test_single_precision():
    kw, e0 = model()
    out = nl.MaxwellBloch(**kw, dtype=np.complex64, comm=COMM).run(e0, H_Z, 20, save_every=20)
    ref = nl.MaxwellBloch(**kw, dtype=np.complex64).run(e0, H_Z, 20, save_every=20)
    assert np.abs(out.fields - ref.fields).max() < 1e-5 * np.abs(ref.fields).max()
    assert same_everywhere(COMM, out.fields)


def test_same_ranks_bit_identical():
    kw, e0 = model()
    mb = nl.MaxwellBloch(**kw, comm=COMM)
    a, b = (mb.run(e0, H_Z, 30, save_every=10) for _ in range(2))
    assert np.array_equal(a.fields, b.fields) and np.array_equal(a.populations, b.populations)
    assert a.norm_deviation == b.norm_deviation


def test_fewer_atoms_than_ranks():
    kw, _ = model(n_atoms=SIZE - 1)
    with pytest.raises(ValueError, match=f"{SIZE} ranks share n_atoms = {SIZE - 1} atoms"):
        nl.MaxwellBloch(**kw, comm=COMM)


def test_nan_on_one_rank():
    kw, _ = model()
    if RANK == LAST:
        det = kw["line"][0].copy()
        det[4] = np.nan
        kw["line"] = (det, kw["line"][1])
    with pytest.raises(ValueError, match=f"rank {LAST}: detunings contains non-finite"):
        nl.MaxwellBloch(**kw, comm=COMM)


def test_wrong_shape_on_one_rank():
    kw, _ = model()
    if RANK == 0:
        kw["initial_state"] = kw["initial_state"][:-1]
    with pytest.raises(ValueError, match="rank 0: initial_state must have shape"):
        nl.MaxwellBloch(**kw, comm=COMM)


def test_different_arguments_on_one_rank():
    kw, e0 = model()
    if RANK == LAST:
        kw["beta"] = 0.71
    with pytest.raises(ValueError, match=f"rank {LAST}'s beta differs from rank 0's"):
        nl.MaxwellBloch(**kw, comm=COMM)
    kw["beta"] = 0.7
    mb = nl.MaxwellBloch(**kw, comm=COMM)
    bad = e0.copy()
    if RANK == LAST:
        bad[3, 1] = np.nan
    with pytest.raises(ValueError, match=f"rank {LAST}: fields0 must be finite"):
        mb.run(bad, H_Z, 3)
    if RANK == LAST:
        bad[3, 1] = 0.25
    with pytest.raises(ValueError, match=f"rank {LAST}'s fields0 differs"):
        mb.run(bad, H_Z, 3)
    with pytest.raises(ValueError, match=f"rank {LAST}'s n_z differs"):
        mb.run(e0, H_Z, 3 + (RANK == LAST))


def test_blow_up_in_one_ranks_atoms():
    """One atom of the last rank's block is far off resonance: its march
    overflows, so that rank's polarisation is NaN; every rank stops with
    BlowUpError at the same z step and keeps the same fields."""
    kw, e0 = model()
    det = kw["line"][0].copy()
    det[-1] = 1e305
    kw["line"] = (det, kw["line"][1])
    mb = nl.MaxwellBloch(**kw, comm=COMM)
    with pytest.raises(nl.BlowUpError, match="non-finite") as info:
        mb.run(e0, H_Z, 5)
    assert info.value.step == 1 and info.value.last_good[0] == 0.0
    assert np.array_equal(info.value.last_good[1], e0)
    steps = COMM.allgather(info.value.step)
    assert steps == [1] * SIZE
    with pytest.raises(nl.BlowUpError):  # the same model on one process
        nl.MaxwellBloch(**kw).run(e0, H_Z, 5)


def test_ctrl_c_on_one_rank_stops_all():
    kw, e0 = model()
    mb = nl.MaxwellBloch(**kw, comm=COMM)

    def cb(state):
        if state.j == 4 and RANK == 0:
            os.kill(os.getpid(), signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        mb.run(e0, H_Z, 20, save_every=2, callback=cb)
    part = mb.partial_result
    assert part.interrupted and part.z[-1] == pytest.approx(4 * H_Z)
    assert same_everywhere(COMM, part.fields)


def test_callback_ends_the_run_on_one_rank():
    kw, e0 = model()

    def cb(state):
        if state.j == 6 and RANK == LAST:
            raise StopIteration
    out = nl.MaxwellBloch(**kw, comm=COMM).run(e0, H_Z, 20, save_every=4, callback=cb)
    assert out.z[-1] == pytest.approx(6 * H_Z) and out.populations.shape[0] == out.z.size
    assert same_everywhere(COMM, out.fields)

    def bad(state):
        if state.j == 2 and RANK == LAST:
            raise KeyError("boom")
    with pytest.raises(RuntimeError, match=f"rank {LAST}: the callback raised KeyError"):
        nl.MaxwellBloch(**kw, comm=COMM).run(e0, H_Z, 5, callback=bad)


@pytest.mark.cuda
@pytest.mark.skipif("cuda" not in nl.backends("MaxwellBloch"),
                    reason="needs the CUDA backend and a GPU")
def test_cuda_matches_single_gpu():
    """GPU ranks (the polarisation summed through the host) against one GPU."""
    kw, e0 = model()
    kw["backend"] = "cuda"
    run = dict(h_z=H_Z, n_z=100, save_every=25, euler_substeps=3)
    out = nl.MaxwellBloch(**kw, comm=COMM).run(e0, **run)
    ref = nl.MaxwellBloch(**kw).run(e0, **run)
    scale = np.abs(ref.fields).max()
    assert np.abs(out.fields - ref.fields).max() < 1e-12 * scale
    assert np.abs(out.populations - ref.populations).max() < 1e-12
    assert same_everywhere(COMM, out.fields)
