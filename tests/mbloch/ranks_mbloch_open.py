"""Rank side of the distributed tests of open Maxwell-Bloch systems (run by
tests/mbloch/test_mbloch_open_mpi.py under ``mpirun -n 2`` and ``-n 3``).

- A Lambda system with decay (branching), dephasing and Doppler classes
  (counter-propagating coupling) over 3 line atoms x 5 classes = 15 atoms
  split over the ranks: fields, populations, the ensemble density matrix
  and the trace monitor within 1e-10 of one process (the sum over atoms
  is reassociated), the same bytes on every rank.
- A rank given another decay: the same ValueError on every rank.
"""

import numpy as np
import pytest
from mpi4py import MPI

import nlsepy as nl
from _helpers import same_everywhere

COMM = MPI.COMM_WORLD
RANK, SIZE = COMM.Get_rank(), COMM.Get_size()


def model(gamma=1.0):
    kw = dict(n_g=2, n_e=1, modes=(-1, 0), F=[[1.0], [0.8]], h_t=0.02, n_t=601,
              line=("gaussian", 0.3), n_atoms=3, beta=1.5,
              decay=[(gamma, 2, 0, 0.5), (gamma, 2, 1, 0.5)], dephasing=[0.0, 0.05, 0.0],
              doppler=nl.mbloch.Doppler(factors=[-1.0, 1.0], width=0.8, n_classes=5))
    t = 0.02 * np.arange(601)
    e0 = {0: 0.3 * nl.mbloch.sech_pulse(t, 1.0, 4.0, area=1.0),
          -1: 1.5 * nl.mbloch.sech_pulse(t, 3.0, 5.0, area=1.0) + 0.2}
    return kw, e0


def test_open_matches_single_process():
    kw, e0 = model()
    run = dict(h_z=0.02, n_z=12, save_every=4, euler_substeps=3, density=True)
    out = nl.MaxwellBloch(**kw, comm=COMM).run(e0, **run)
    ref = nl.MaxwellBloch(**kw).run(e0, **run)
    assert ref.fields.shape == (4, 601, 2) and nl.MaxwellBloch(**kw).n_atoms == 15
    scale = np.abs(ref.fields).max()
    assert np.abs(out.fields - ref.fields).max() < 1e-10 * scale
    assert np.abs(out.populations - ref.populations).max() < 1e-10
    assert np.abs(out.density - ref.density).max() < 1e-10
    assert out.norm_deviation < 1e-12
    assert np.abs(ref.fields[-1, :, 1] - ref.fields[0, :, 1]).max() > 1e-3  # the probe changed
    for a in (out.fields, out.populations, out.density):
        assert same_everywhere(COMM, a)


def test_different_decay_on_one_rank():
    kw, _ = model(gamma=1.0 if RANK != SIZE - 1 else 2.0)
    with pytest.raises(ValueError, match="decay differs from rank 0's"):
        nl.MaxwellBloch(**kw, comm=COMM)


@pytest.mark.cuda
@pytest.mark.skipif("cuda" not in nl.backends("MaxwellBloch"),
                    reason="needs the CUDA backend and a GPU")
def test_cuda_ranks_match_one_cpu_process():
    """GPU ranks (density matrices on the device, sums through the host)
    against one CPU process: 1e-10."""
    kw, e0 = model()
    run = dict(h_z=0.02, n_z=6, save_every=3, euler_substeps=2, density=True)
    out = nl.MaxwellBloch(**kw, backend="cuda", comm=COMM).run(e0, **run)
    ref = nl.MaxwellBloch(**kw, backend="cpu").run(e0, **run)
    assert np.abs(out.fields - ref.fields).max() < 1e-10 * np.abs(ref.fields).max()
    assert np.abs(out.density - ref.density).max() < 1e-10
    assert same_everywhere(COMM, out.fields)
