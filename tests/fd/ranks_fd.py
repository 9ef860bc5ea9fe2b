"""Rank side of the distributed NLSE tests (run by tests/fd/test_fd_mpi.py
under ``mpirun -n 2`` and ``-n 3``; every rank runs every test, so each
calls the collectives in the same order).

- ``nl.NLSE(..., comm=)`` against the single-process solver, which every
  rank also runs as the reference, on grids whose first axis the rank
  counts do not divide (25 rows in 3D, 31 in 2D): both schemes, periodic
  and non-periodic boundaries, a potential; after 100 steps each rank's
  slab equals its rows of the reference bit for bit (the same arithmetic
  point by point), and the global norm and energy agree within 1e-12.
- The same rank count twice: bit-identical observables.
- The state given as the global array or as nl.scatter's slabs; gather.
- A checkpoint written by N ranks loads with fewer ranks (a
  sub-communicator) and with one process, and continues identically.
- One rank's bad input (a NaN in its rows, a wrong shape): the same
  ValueError on every rank.  A blow-up: BlowUpError on every rank.
"""

import os
import shutil
import tempfile

import numpy as np
import pytest
from mpi4py import MPI

import nlsepy as nl

from _helpers import check_gather_at_last_rank

COMM = MPI.COMM_WORLD
RANK, SIZE = COMM.Get_rank(), COMM.Get_size()


def grid(shape, seed=5):
    """A smooth, asymmetric state with a phase gradient plus a small random
    part, and a harmonic potential (the same on every rank)."""
    axes = np.meshgrid(*[np.linspace(-3, 3, n) for n in shape], indexing="ij")
    r2 = sum((0.7 + 0.2 * q) * x ** 2 for q, x in enumerate(axes))
    rng = np.random.default_rng(seed)
    psi = np.exp(-r2 / 2 + 1j * (0.8 * axes[0] - 0.3 * axes[-1])) + 0.4
    psi = psi + 0.01 * (rng.standard_normal(shape) + 1j * rng.standard_normal(shape))
    return psi.astype(np.complex128), 0.5 * r2


def pair(shape, scheme, bc, **kw):
    psi, V = grid(shape)
    h = 6.0 / (shape[0] - 1)
    ref = nl.NLSE(psi, h, s=-1.0, V=V, scheme=scheme, bc=bc, backend="cpu", **kw)
    sim = nl.NLSE(psi, h, s=-1.0, V=V, scheme=scheme, bc=bc, backend="cpu", comm=COMM, **kw)
    return ref, sim


CASES = [((25, 12, 10), "2shoc", "periodic"), ((25, 12, 10), "cd", "msd"),
         ((25, 11, 9), "2shoc", "dirichlet"), ((31, 16), "cd", "periodic"),
         ((31, 16), "2shoc", "l0")]


@pytest.mark.parametrize("shape,scheme,bc", CASES)
def test_matches_single_process(shape, scheme, bc):
    ref, sim = pair(shape, scheme, bc)
    ref.step(100)
    sim.step(100)
    assert sim.t == ref.t
    np.testing.assert_array_equal(sim.psi, ref.psi[sim.local_slice])
    full = sim.gather(root=None)
    np.testing.assert_array_equal(full, ref.psi)
    assert abs(sim.norm() - ref.norm()) <= 1e-12 * ref.norm()
    assert abs(sim.energy() - ref.energy()) <= 1e-12 * abs(ref.energy())


@pytest.mark.parametrize("shape,scheme,bc", CASES)
def test_fused_slabs_match_single_process(shape, scheme, bc):
    """The fused step on the slabs (each slab one handle whose halo, 4 R rows
    deep, covers the four stages of one step): equal to one process's
    staged step bit for bit."""
    ref, sim = pair(shape, scheme, bc)
    fused = pair(shape, scheme, bc, fused=True)[1]
    ref.step(100)
    fused.step(100)
    assert fused.last_kernel == "fused" and ref.last_kernel == "fused"  # the CPU's "auto"
    np.testing.assert_array_equal(fused.psi, ref.psi[fused.local_slice])
    psi, V = grid(shape)
    staged = nl.NLSE(psi, 6.0 / (shape[0] - 1), s=-1.0, V=V, scheme=scheme, bc=bc,
                     backend="cpu", fused=False)
    staged.step(100)
    assert staged.last_kernel == "staged"
    np.testing.assert_array_equal(fused.gather(root=None), staged.psi)


def test_same_ranks_same_bits():
    out = []
    for _ in range(2):
        _, sim = pair((25, 12, 10), "2shoc", "periodic")
        sim.step(20)
        out.append((sim.norm(), sim.energy()))
    assert out[0] == out[1]
    values = COMM.allgather(out[0])
    assert all(v == values[0] for v in values)  # every rank holds the global value


def test_scatter_and_gather_roots():
    psi, V = grid((25, 12, 10))
    part = nl.scatter(psi if RANK == 0 else None, COMM)
    vpart = nl.scatter(V if RANK == SIZE - 1 else None, COMM, root=SIZE - 1)
    sim = nl.NLSE(part, 0.25, V=vpart, scheme="cd", bc="periodic", backend="cpu", comm=COMM)
    ref = nl.NLSE(psi, 0.25, V=V, scheme="cd", bc="periodic", backend="cpu")
    sim.step(10)
    ref.step(10)
    check_gather_at_last_rank(sim, ref.psi, COMM)
    assert sim.comm_info["ranks"] == SIZE and sim.comm_info["halo_rows"] == 4
    assert sim.local_slice[0] == slice(part.start, part.start + part.data.shape[0])
    with pytest.raises(ValueError, match="root"):
        sim.gather(root=SIZE)


def test_run_frames_and_psi_assignment():
    ref, sim = pair((25, 12, 10), "cd", "msd")
    fr = sim.run(0.05, frames=3)
    fr_ref = ref.run(0.05, frames=3)
    assert len(fr) == 4 and np.allclose(fr.t, fr_ref.t, rtol=0, atol=0)
    np.testing.assert_array_equal(fr.psi[-1], fr_ref.psi[-1][sim.local_slice])
    sim.psi = ref.psi  # the global array on every rank
    np.testing.assert_array_equal(sim.psi, ref.psi[sim.local_slice])
    sim.psi = ref.psi[sim.local_slice] * 0.5  # this rank's rows
    np.testing.assert_array_equal(sim.gather(root=None), ref.psi * 0.5)


def shared_dir():
    path = tempfile.mkdtemp(prefix="nlsepy-mpi-") if RANK == 0 else None
    return COMM.bcast(path, root=0)


def test_checkpoint_n_to_m_ranks():
    ref, sim = pair((25, 12, 10), "2shoc", "msd")
    sim.step(30)
    ref.step(30)
    path = os.path.join(shared_dir(), "ck.npz")
    sim.save(path)
    # fewer ranks: a sub-communicator of the first SIZE - 1 ranks
    sub = COMM.Split(0 if RANK < SIZE - 1 else MPI.UNDEFINED, RANK)
    ref.step(20)
    if sub != MPI.COMM_NULL:
        back = nl.NLSE.load(path, backend="cpu", comm=sub)
        assert back.t == sim.t and back.comm_info["ranks"] == SIZE - 1
        back.step(20)
        np.testing.assert_array_equal(back.gather(root=None), ref.psi)
        sub.Free()
    one = nl.NLSE.load(path, backend="cpu")  # one process reads the parts
    # changed arguments: the distributed load steps as the single-process one
    changed = dict(a=0.7, dt=0.5 * one.dt, fused=False)
    b = nl.NLSE.load(path, backend="cpu", comm=COMM, **changed)
    c = nl.NLSE.load(path, backend="cpu", **changed)
    b.step(10)
    c.step(10)
    np.testing.assert_array_equal(b.gather(root=None), c.psi)
    assert b.t == c.t and b.a == 0.7
    one.step(20)
    np.testing.assert_array_equal(one.psi, ref.psi)
    # and a single-process checkpoint loads into the distributed solver
    if RANK == 0:
        one.save(os.path.join(os.path.dirname(path), "one.npz"))
    COMM.Barrier()
    again = nl.NLSE.load(os.path.join(os.path.dirname(path), "one.npz"), backend="cpu",
                         comm=COMM)
    np.testing.assert_array_equal(again.gather(root=None), one.psi)
    sim.step(20)
    np.testing.assert_array_equal(sim.gather(root=None), ref.psi)


def test_checkpoint_parts_of_another_save_are_refused():
    """Index and parts carry the save's fingerprint: the part of an earlier save,
    left where a later save stopped before its index, is refused by name."""
    _, sim = pair((25, 12, 10), "cd", "periodic")
    folder = shared_dir()
    path = os.path.join(folder, "ck.npz")
    sim.save(path)
    part = os.path.join(folder, f"ck.part0000of{SIZE:04d}.npz")
    if RANK == 0:
        shutil.copy(part, part + ".old")
    COMM.Barrier()
    sim.step(5)
    sim.save(path)
    if RANK == 0:
        os.replace(part + ".old", part)
    COMM.Barrier()
    with pytest.raises(ValueError, match=r"part ck\.part0000of\d+\.npz belongs to another save"):
        nl.NLSE.load(path, backend="cpu", comm=COMM)
    with pytest.raises(ValueError, match="belongs to another save"):
        nl.NLSE.load(path, backend="cpu")


def test_bad_input_on_one_rank():
    psi, V = grid((25, 12, 10))
    bad = psi.copy()
    if RANK == 1:
        bad[:] = np.nan  # this rank's rows (and everyone else's) only here
    with pytest.raises(ValueError, match="rank 1: psi0 contains non-finite"):
        nl.NLSE(bad, 0.25, scheme="cd", bc="periodic", backend="cpu", comm=COMM)
    shaped = psi if RANK != SIZE - 1 else psi[:, :, :-1]
    with pytest.raises(ValueError, match=f"rank {SIZE - 1} was given the grid.s shape"):
        nl.NLSE(shaped, 0.25, scheme="cd", bc="periodic", backend="cpu", comm=COMM)
    COMM.Barrier()


def test_too_many_ranks_for_the_halo():
    psi = np.ones((2 * SIZE + 1, 8, 8), complex)
    with pytest.raises(ValueError, match="needs at least 8 per rank"):
        nl.NLSE(psi, 0.25, scheme="2shoc", bc="periodic", backend="cpu", comm=COMM)


def test_blow_up_stops_every_rank():
    psi, _ = grid((25, 12, 10))
    sim = nl.NLSE(psi * 3, 0.25, s=1.0, scheme="cd", bc="periodic", backend="cpu",
                  dt=0.2, force=True, comm=COMM)
    with pytest.raises(nl.BlowUpError):
        sim.step(2000)
    steps = COMM.allgather(sim._steps)
    assert len(set(steps)) == 1 and steps[0] < 2000


def test_blow_up_in_one_slab_only():
    """A potential so deep in the last rank's rows that the explicit step is
    unstable there only: every rank drops that step, and the global state is
    the single-process solver's last finite state."""
    psi, V = grid((25, 12, 10))
    V = V.copy()
    V[-4:] = 400.0
    kw = dict(s=-1.0, V=V, scheme="cd", bc="periodic", backend="cpu", dt=0.01, force=True)
    ref = nl.NLSE(psi, 0.25, **kw)
    sim = nl.NLSE(psi, 0.25, comm=COMM, **kw)
    with pytest.raises(nl.BlowUpError):
        ref.step(500)
    with pytest.raises(nl.BlowUpError):
        sim.step(500)
    assert sim._steps == ref._steps and sim.t == ref.t
    np.testing.assert_array_equal(sim.gather(root=None), ref.psi)


@pytest.mark.cuda
@pytest.mark.skipif("cuda" not in nl.backends("NLSE"), reason="needs the CUDA backend and a GPU")
@pytest.mark.parametrize("shape,scheme,bc,fused", [((25, 12, 10), "2shoc", "periodic", False),
                                                   ((31, 16), "cd", "msd", False),
                                                   ((31, 16), "cd", "msd", True),
                                                   ((31, 40), "2shoc", "periodic", True),
                                                   ((25, 12, 10), "cd", "periodic", True)])
def test_cuda_matches_single_gpu(shape, scheme, bc, fused):
    """GPU ranks (rows staged through the host) against one GPU; the fused
    kernels on the slabs (the box kernel on closed 2D grids, the streamed
    one on periodic 2D and 3D grids) against one GPU's staged steps."""
    psi, V = grid(shape)
    h = 6.0 / (shape[0] - 1)
    ref = nl.NLSE(psi, h, s=-1.0, V=V, scheme=scheme, bc=bc, backend="cuda", fused=False)
    sim = nl.NLSE(psi, h, s=-1.0, V=V, scheme=scheme, bc=bc, backend="cuda", comm=COMM,
                  fused=fused)
    ref.step(100)
    sim.step(100)
    assert sim.last_kernel == ("fused" if fused else "staged")
    want = ref.psi
    assert np.abs(sim.gather(root=None) - want).max() <= 1e-12 * np.abs(want).max()
    assert abs(sim.norm() - ref.norm()) <= 1e-12 * ref.norm()
    assert abs(sim.energy() - ref.energy()) <= 1e-12 * abs(ref.energy())
