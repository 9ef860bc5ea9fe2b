"""Rank side of the distributed DecGPE tests (run by tests/dec/test_dec_mpi.py
under ``mpirun -n 2`` and ``-n 3``; every rank runs every test, so each
calls the collectives in the same order).

- ``nl.DecGPE(..., comm=)`` against the single-process solver, which every
  rank also runs as the reference, on grids of 7 layers of blocks along z
  (which neither 2 nor 3 divides): bcc and fcc, zero and periodic
  boundaries, trap, potential and nonlinearity.  100 real-time steps (the
  first by RK4, taken stage by stage across the ranks): each rank's part
  equals its cells of the reference bit for bit, observables within 1e-12.
  100 imaginary-time steps (the global norm summed over the ranks): within
  1e-12.
- The same rank count twice: bit-identical observables, the same on every
  rank.  The layout (``local_slice``, ``comm_info``), gather, states given
  as global arrays, rank parts or callables, the vortex initial state.
- A checkpoint written by N ranks (psi and psi_prev) loads with fewer
  ranks, with more ranks and with one process and continues identically;
  a single-process checkpoint loads into the distributed solver.
- One rank's bad input (a NaN in its layers, a wrong shape): the same
  ValueError on every rank.  A blow-up: BlowUpError on every rank at the
  same step, the last finite state kept.
- The device-to-device halo path (``_dist.IpcHalo``) on CPU ranks: its
  mailboxes in host memory the ranks share (an MPI shared-memory window in
  place of CUDA IPC), the copies the CPU backend's layers_to / layers_from.
  The real-time, imaginary-time and blow-up checks above hold on it, its
  states are the host path's bit for bit, and ``NLSEPY_HALO=host`` turns it
  off (``comm_info["halo"]`` says which path runs).
- With a GPU: GPU ranks, each on its own GPU (the rank's index on its node
  modulo the GPUs) while its single-process reference stays on device 0,
  against that reference (1e-12 after 100 real-time and 50 imaginary-time
  steps), halos through CUDA IPC and through the host; real time bit for
  bit the same on both paths and as the single GPU.  The CUDA IPC path's
  real-time steps are overlapped (``nlse_dec_slab_connect``): bit for bit
  the single GPU's on slabs of one, two and more layers, over calls longer
  than its timed waits; a blow-up on one rank stops every rank at the
  single GPU's step with its last good state.
"""

import gc
import importlib
import os
import struct
import tempfile

import numpy as np
import pytest
from mpi4py import MPI

import nlsepy as nl

from _helpers import check_gather_at_last_rank

COMM = MPI.COMM_WORLD
RANK, SIZE = COMM.Get_rank(), COMM.Get_size()
BLOCKS = {"bcc": (3, 4, 7), "fcc": (3, 3, 7)}


def state(positions, seed=7):
    """A smooth, asymmetric moving Gaussian plus a small random part (the
    same on every rank: the random part is drawn for the whole grid)."""
    p = np.asarray(positions)
    psi = np.exp(-(0.6 * p[:, 0] ** 2 + 0.4 * p[:, 1] ** 2 + 0.5 * p[:, 2] ** 2) / 2
                 + 1j * (0.7 * p[:, 0] - 0.3 * p[:, 2])) + 0.2
    rng = np.random.default_rng(seed)
    return psi + 0.01 * (rng.standard_normal(len(p)) + 1j * rng.standard_normal(len(p)))


def kwargs(grid, bc, **kw):
    out = dict(blocks=BLOCKS[grid], spacing=0.9, g=3.0, trap=(1.0, 0.8, 1.3), bc=bc,
               V=lambda x, y, z: 0.3 * np.cos(x) * np.sin(y + z), backend="cpu")
    out.update(kw)
    return out


def pair(grid, bc, **kw):
    """The single-process reference and the distributed solver from the same
    global initial state."""
    ref = nl.DecGPE(grid, **kwargs(grid, bc, **kw))
    psi0 = state(ref.positions)
    ref.psi = psi0
    sim = nl.DecGPE(grid, **kwargs(grid, bc, **kw), psi0=psi0, comm=COMM)
    return ref, sim


def same_everywhere(value):
    values = COMM.allgather(value)
    return all(v == values[0] for v in values)


class SharedDevice:
    """What ``_dist.IpcHalo`` asks of nlsepy's CUDA extension, over host
    memory shared by the ranks of one node (an MPI shared-memory window):
    CPU ranks then run the device-to-device exchange, its copies being the
    CPU backend's layers_to / layers_from.  A handle is (rank, offset)."""

    BYTES = 1 << 20  # per rank

    def __init__(self, comm):
        self.comm, self.rank = comm, comm.Get_rank()
        self.win = MPI.Win.Allocate_shared(self.BYTES, 1, comm=comm)
        self.base = self.address(self.rank)
        self.used = 0

    def address(self, rank):
        buf, _ = self.win.Shared_query(rank)
        return np.frombuffer(buf, np.uint8).ctypes.data

    def device_alloc(self, nbytes):
        assert self.used + nbytes <= self.BYTES
        self.used += nbytes
        return self.base + self.used - nbytes

    def device_free(self, address):
        pass

    def ipc_handle(self, address):
        return struct.pack("qq", self.rank, address - self.base)

    def ipc_open(self, handle):
        rank, offset = struct.unpack("qq", handle)
        return self.address(rank) + offset

    def ipc_close(self, address):
        pass

    def free(self):
        gc.collect()  # the solvers that mapped the window
        self.comm.Barrier()
        self.win.Free()


@pytest.fixture(params=["host", "shared"])
def halo(request, monkeypatch):
    """The halo path of the CPU ranks: "host" (the table's halo swap) or "shared"
    (the device-to-device protocol over shared host memory); the value
    comm_info["halo"] reports."""
    if request.param == "host":
        yield "host"
        return
    dev = SharedDevice(COMM)
    monkeypatch.setattr(importlib.import_module("nlsepy.dec.solver"), "_halo_device",
                        lambda backend: dev)
    yield "cuda-ipc"
    monkeypatch.undo()
    dev.free()


CASES = [("bcc", "zero"), ("bcc", "periodic"), ("fcc", "zero"), ("fcc", "periodic")]


@pytest.mark.parametrize("grid,bc", CASES)
def test_real_time_matches_single_process(grid, bc, halo):
    ref, sim = pair(grid, bc)
    assert sim.comm_info["halo"] == halo
    assert sim.max_dt == ref.max_dt and sim.dt == ref.dt
    ref.step(100)
    sim.step(100)
    if halo == "host":  # the C steps swapped the halos themselves (MPI_Isend/Irecv
        # overlapped with the interior layers), so they waited on a swap
        assert sim._solver.h.last_wait_seconds() > 0
    assert sim.t == ref.t and sim.steps == ref.steps == 100
    np.testing.assert_array_equal(sim.psi, ref.psi[sim.local_slice])
    np.testing.assert_array_equal(sim.psi_prev, ref.psi_prev[sim.local_slice])
    np.testing.assert_array_equal(sim.gather(root=None), ref.psi)
    assert abs(sim.norm() - ref.norm()) <= 1e-12 * ref.norm()
    assert abs(sim.energy() - ref.energy()) <= 1e-12 * abs(ref.energy())
    assert same_everywhere((sim.norm(), sim.energy()))


@pytest.mark.parametrize("grid,bc", CASES)
def test_imaginary_time_matches_single_process(grid, bc, halo):
    ref, sim = pair(grid, bc)
    assert sim.comm_info["halo"] == halo
    ref.imaginary_time(100, norm=2.0)
    sim.imaginary_time(100, norm=2.0)
    assert sim.imaginary_steps == ref.imaginary_steps == 100
    want = ref.psi
    assert np.max(np.abs(sim.gather(root=None) - want)) <= 1e-12 * np.max(np.abs(want))
    assert abs(sim.norm() - 2.0) <= 1e-12 and abs(sim.energy() - ref.energy()) <= \
        1e-12 * abs(ref.energy())
    # then real time from the relaxed state: the RK4 start again, stage by stage
    sim.psi = want
    ref.psi = want
    sim.step(10)
    ref.step(10)
    np.testing.assert_array_equal(sim.psi, ref.psi[sim.local_slice])


def test_complex64_within_float_accuracy():
    ref, sim = pair("bcc", "periodic", dtype=np.complex64)
    ref.step(50)
    sim.step(50)
    np.testing.assert_array_equal(sim.psi, ref.psi[sim.local_slice])
    assert abs(sim.norm() - ref.norm()) <= 1e-6 * ref.norm()


def test_same_ranks_same_bits():
    out = []
    for _ in range(2):
        _, sim = pair("bcc", "periodic")
        sim.step(30)
        sim.imaginary_time(20)
        out.append((sim.norm(), sim.energy(), sim.inner(sim.gather(root=None))))
    assert out[0] == out[1]
    assert same_everywhere(out[0])


def test_layout_gather_and_states():
    ref, sim = pair("bcc", "zero")
    nz = BLOCKS["bcc"][2]
    counts = [nz // SIZE + (r < nz % SIZE) for r in range(SIZE)]
    start = sum(counts[:RANK])
    plane = sim.cells_per_block * BLOCKS["bcc"][0] * BLOCKS["bcc"][1]
    assert sim.local_slice == slice(start * plane, (start + counts[RANK]) * plane)
    info = sim.comm_info
    assert info["ranks"] == SIZE and info["rank"] == RANK and info["counts"] == counts
    assert info["layers"] == (start, counts[RANK]) and info["halo_layers"] == 1
    assert ref.comm_info == {} and ref.comm is None and sim.comm is COMM
    assert sim.size == ref.size and sim.psi.shape == (counts[RANK] * plane,)
    np.testing.assert_array_equal(sim.positions, ref.positions[sim.local_slice])
    np.testing.assert_array_equal(sim.volumes, ref.volumes[sim.local_slice])
    check_gather_at_last_rank(sim, ref.psi, COMM)
    with pytest.raises(ValueError, match="root"):
        sim.gather(root=SIZE)
    # a state as this rank's part, as a callable of the positions
    sim.psi = ref.psi[sim.local_slice] * 0.5
    np.testing.assert_array_equal(sim.gather(root=None), ref.psi * 0.5)
    sim.set_state(lambda p: np.exp(-(p ** 2).sum(axis=1)))
    ref.set_state(lambda p: np.exp(-(p ** 2).sum(axis=1)))
    np.testing.assert_array_equal(sim.gather(root=None), ref.psi)
    # H psi, inner products and the rmse reduce over the ranks
    np.testing.assert_array_equal(sim.apply(ref.psi), ref.apply(ref.psi)[sim.local_slice])
    other = state(ref.positions, seed=3)
    assert abs(sim.inner(other) - ref.inner(other)) <= 1e-12 * abs(ref.inner(other))
    assert abs(sim.rmse(other) - ref.rmse(other)) <= 1e-12 * ref.rmse(other)
    # the potential: the global array or this rank's part
    V = 0.1 * np.arange(ref.size) / ref.size
    sim.V = V
    ref.V = V
    np.testing.assert_array_equal(sim.V, V[sim.local_slice])
    assert sim.max_dt == ref.max_dt
    sim.V = V[sim.local_slice]
    sim.step(5)
    ref.step(5)
    np.testing.assert_array_equal(sim.gather(root=None), ref.psi)
    # the interpolated density (the state gathered on every rank)
    pts = np.array([[0.1, -0.2, 0.3], [0.5, 0.5, -1.0]])
    np.testing.assert_array_equal(sim.density_at(pts), ref.density_at(pts))


def test_run_frames_and_a_given_psi_prev():
    ref, sim = pair("fcc", "periodic")
    prev = state(ref.positions, seed=11)
    ref.set_state(ref.psi, prev)
    sim.set_state(ref.psi, prev)  # the leapfrog starts from psi(-dt): no RK4
    fr = sim.run(20 * ref.dt, frames=4)
    fr_ref = ref.run(20 * ref.dt, frames=4)
    assert len(fr) == 5 and np.array_equal(fr.t, fr_ref.t)
    np.testing.assert_array_equal(fr.psi[-1], fr_ref.psi[-1][sim.local_slice])


def test_vortex_initial_state():
    pytest.importorskip("scipy")
    vs = nl.examples.vortex_state(1.0, 50.0, 1, h=0.2, rho_max=7.0, z_max=7.0)
    kw = dict(blocks=(4, 4, 7), spacing=1.6, g=50.0, trap=(1.0, 1.0, 1.0), backend="cpu")
    ref = nl.DecGPE("bcc", **kw, psi0=vs, psi_prev=vs)
    psi0 = vs(ref.positions)  # the global array on every rank
    prev = vs(ref.positions, -ref.dt)
    sim = nl.DecGPE("bcc", **kw, psi0=psi0, psi_prev=prev, comm=COMM)
    also = nl.DecGPE("bcc", **kw, psi0=vs, psi_prev=vs, comm=COMM)  # evaluated per rank
    for s in (ref, sim, also):
        s.step(40)
    np.testing.assert_array_equal(sim.psi, ref.psi[sim.local_slice])
    np.testing.assert_array_equal(also.psi, ref.psi[sim.local_slice])
    assert abs(sim.overlap(vs) - ref.overlap(vs)) <= 1e-12


def shared_dir():
    path = tempfile.mkdtemp(prefix="nlsepy-dec-mpi-") if RANK == 0 else None
    return COMM.bcast(path, root=0)


def test_checkpoint_n_to_m_ranks():
    ref, sim = pair("bcc", "periodic")
    sim.step(30)
    ref.step(30)
    path = os.path.join(shared_dir(), "ck.npz")
    sim.save(path)  # psi and psi_prev in parts
    ref.step(20)
    sub = COMM.Split(0 if RANK < SIZE - 1 else MPI.UNDEFINED, RANK)
    if sub != MPI.COMM_NULL:  # fewer ranks
        back = nl.DecGPE.load(path, backend="cpu", comm=sub)
        assert back.t == sim.t and back.steps == 30 and back.comm_info["ranks"] == SIZE - 1
        back.step(20)
        np.testing.assert_array_equal(back.gather(root=None), ref.psi)
        sub.Free()
    one = nl.DecGPE.load(path, backend="cpu")  # one process reads the parts
    assert one.psi_prev is not None
    # changed arguments: the distributed load steps as the single-process one
    for changed in (dict(g=one.g + 1.0), dict(dt=0.5 * one.dt)):
        b = nl.DecGPE.load(path, backend="cpu", comm=COMM, **changed)
        c = nl.DecGPE.load(path, backend="cpu", **changed)
        b.step(10)
        c.step(10)
        np.testing.assert_array_equal(b.gather(root=None), c.psi)
        assert b.t == c.t and b.steps == c.steps == 40
    one.step(20)
    np.testing.assert_array_equal(one.psi, ref.psi)
    # a single-process checkpoint loads into the distributed solver
    single = os.path.join(os.path.dirname(path), "one.npz")
    if RANK == 0:
        one.save(single)
    COMM.Barrier()
    again = nl.DecGPE.load(single, backend="cpu", comm=COMM)
    again.step(5)
    one.step(5)
    np.testing.assert_array_equal(again.gather(root=None), one.psi)
    sim.step(20)
    np.testing.assert_array_equal(sim.gather(root=None), ref.psi)


def test_checkpoint_fewer_to_more_ranks():
    """Written by the first SIZE - 1 ranks (a sub-communicator; one rank
    under mpirun -n 2), read by all SIZE."""
    ref = nl.DecGPE("fcc", **kwargs("fcc", "zero"))
    psi0 = state(ref.positions)
    ref.psi = psi0
    path = os.path.join(shared_dir(), "few.npz")
    sub = COMM.Split(0 if RANK < SIZE - 1 else MPI.UNDEFINED, RANK)
    if sub != MPI.COMM_NULL:
        sim = nl.DecGPE("fcc", **kwargs("fcc", "zero"), psi0=psi0, comm=sub)
        sim.step(30)
        sim.save(path)
        del sim
        sub.Free()
    COMM.Barrier()
    ref.step(30)
    back = nl.DecGPE.load(path, backend="cpu", comm=COMM)
    assert back.steps == 30 and back.t == ref.t and back.psi_prev is not None
    np.testing.assert_array_equal(back.psi, ref.psi[back.local_slice])
    back.step(20)
    ref.step(20)
    np.testing.assert_array_equal(back.gather(root=None), ref.psi)


def test_checkpoint_after_imaginary_time_has_no_prev():
    _, sim = pair("fcc", "zero")
    sim.imaginary_time(10)
    path = os.path.join(shared_dir(), "im.npz")
    sim.save(path)
    back = nl.DecGPE.load(path, backend="cpu", comm=COMM)
    assert back.psi_prev is None and back.imaginary_steps == 10
    np.testing.assert_array_equal(back.psi, sim.psi)


def test_bad_input_on_one_rank():
    ref = nl.DecGPE("bcc", **kwargs("bcc", "periodic"))
    psi0 = state(ref.positions)
    bad = psi0.copy()
    if RANK == 1:
        bad[:] = np.nan  # only rank 1's copy, and rank 1 reads its own layers only
    with pytest.raises(ValueError, match="rank 1: psi contains non-finite"):
        nl.DecGPE("bcc", **kwargs("bcc", "periodic"), psi0=bad, comm=COMM)
    shaped = psi0 if RANK != SIZE - 1 else psi0[:-1]
    with pytest.raises(ValueError, match=f"rank {SIZE - 1}: psi must be 1-d with one value"):
        nl.DecGPE("bcc", **kwargs("bcc", "periodic"), psi0=shaped, comm=COMM)
    sim = nl.DecGPE("bcc", **kwargs("bcc", "periodic"), psi0=psi0, comm=COMM)
    with pytest.raises(ValueError, match="rank 0: V contains non-finite"):
        sim.V = np.full(ref.size, np.nan) if RANK == 0 else np.zeros(ref.size)
    with pytest.raises(ValueError, match="rank 1: psi contains non-finite"):
        sim.psi = bad
    sim.step(3)  # and the solver goes on
    assert same_everywhere(sim.norm())
    with pytest.raises(ValueError, match=f"{SIZE} ranks cannot split the {SIZE - 1} layers"):
        nl.DecGPE("bcc", blocks=(2, 2, SIZE - 1), backend="cpu", comm=COMM)


def blow_up_against_one_process(backend, check=None):
    """A run that blows up (g = 10, dt = 1) on one process and distributed
    from the same state (`check(sim)` before the steps): BlowUpError on
    every rank at the single process's step, the time kept, psi(-dt)
    dropped, the state the last finite one.  Returns the solvers and the
    distributed run's error."""
    kw = kwargs("bcc", "periodic", g=10.0, dt=1.0, force=True, backend=backend)
    ref = nl.DecGPE("bcc", **kw)
    ref.psi = np.exp(-(ref.positions ** 2).sum(axis=1))
    sim = nl.DecGPE("bcc", **kw, psi0=ref.psi, comm=COMM)
    if check:
        check(sim)
    with pytest.raises(nl.BlowUpError) as e_ref:
        ref.step(5000)
    with pytest.raises(nl.BlowUpError) as e:
        sim.step(5000)
    assert e.value.step == e_ref.value.step and same_everywhere(sim.steps)
    assert sim.t == ref.t and sim.psi_prev is None
    np.testing.assert_array_equal(sim.gather(root=None), ref.psi)
    return ref, sim, e


def test_blow_up_stops_every_rank():
    ref, sim, e = blow_up_against_one_process("cpu")
    np.testing.assert_array_equal(sim.psi, ref.psi[sim.local_slice])
    np.testing.assert_array_equal(e.value.last_good[1], ref.psi[sim.local_slice])


def test_blow_up_in_one_rank_only(halo):
    """A value that only one rank's layers make non-finite: every rank
    stops at the same step and keeps the last finite state, in the leapfrog,
    in its RK4 start and in imaginary time."""
    _, sim = pair("bcc", "zero")
    assert sim.comm_info["halo"] == halo
    sim.step(3)
    big, prev = sim.psi, sim.psi_prev
    if RANK == SIZE - 1:
        big[-1] = 1e150  # overflows g |psi|^2 psi in the next step, on this rank only
    sim.set_state(big, prev)
    before = sim.gather(root=None)
    with pytest.raises(nl.BlowUpError):
        sim.step(5)  # the leapfrog: the check agreed in C
    assert same_everywhere(sim.steps) and sim.steps == 3 and sim.psi_prev is None
    np.testing.assert_array_equal(sim.gather(root=None), before)
    with pytest.raises(nl.BlowUpError):
        sim.step(5)  # the RK4 start, stage by stage
    assert same_everywhere(sim.steps) and sim.steps == 3
    np.testing.assert_array_equal(sim.gather(root=None), before)
    with pytest.raises(nl.BlowUpError):
        sim.imaginary_time(5)  # the global norm: NaN from one rank
    assert same_everywhere(sim.imaginary_steps) and sim.imaginary_steps == 0
    np.testing.assert_array_equal(sim.gather(root=None), before)


class CountingComm:
    """A communicator that counts its barriers."""

    def __init__(self, comm):
        self.comm, self.barriers = comm, 0

    def Barrier(self):
        self.barriers += 1
        self.comm.Barrier()

    def __getattr__(self, name):
        return getattr(self.comm, name)


def test_shared_path_is_the_host_path_bit_for_bit(monkeypatch):
    """The device-to-device protocol moves the host path's bytes: the same
    states after real-time steps (a given psi(-dt), then a new state and
    the RK4 start), run frames and imaginary time, on both boundaries;
    NLSEPY_HALO=host turns it off."""
    dev = SharedDevice(COMM)
    try:
        for bc in ("zero", "periodic"):
            host = pair("fcc", bc)[1]
            monkeypatch.setattr(importlib.import_module("nlsepy.dec.solver"), "_halo_device",
                                lambda backend: dev)
            ref, sim = pair("fcc", bc)
            monkeypatch.undo()
            info = sim.comm_info
            assert info["halo"] == "cuda-ipc" and "CUDA IPC" in info["exchange"]
            assert host.comm_info["halo"] == "host"
            prev = state(ref.positions, seed=5)
            for s in (host, sim):
                s.set_state(ref.psi, prev)
                s.step(7)
                assert s.last_timings["steps"] == 7
                s.step(1)
            assert set(sim.last_timings) == {"step", "exchange", "steps"}
            np.testing.assert_array_equal(sim.psi, host.psi)
            # one barrier per exchange: the next step's agreed check closes
            # each exchange but the call's last
            ipc = sim._solver.ipc
            ipc.comm = counting = CountingComm(ipc.comm)
            for s in (host, sim):
                assert s._solver.step(10) == (10, False)  # one call of the slab
            assert counting.barriers == 11 and not ipc.unsettled
            ipc.comm = counting.comm
            np.testing.assert_array_equal(sim.psi, host.psi)
            np.testing.assert_array_equal(sim.psi_prev, host.psi_prev)
            for s in (host, sim):
                s.psi = ref.psi
                s.run(13 * ref.dt, frames=3)
                s.imaginary_time(9)
            np.testing.assert_array_equal(sim.gather(root=None), host.gather(root=None))
            del ref, sim, host
        monkeypatch.setenv("NLSEPY_HALO", "host")
        monkeypatch.setattr(importlib.import_module("nlsepy.dec.solver"), "_halo_device",
                            lambda backend: dev)
        _, sim = pair("bcc", "periodic")
        info = sim.comm_info
        assert info["halo"] == "host" and "NLSEPY_HALO=host" in info["exchange"]
        del sim
        monkeypatch.undo()
    finally:
        dev.free()


def node_rank():
    node = COMM.Split_type(MPI.COMM_TYPE_SHARED)
    rank = node.Get_rank()
    node.Free()
    return rank


def needs_cuda(test):
    """GPU ranks: marked cuda (test_dec_mpi.py runs them apart) and skipped
    without the DecGPE CUDA backend."""
    return pytest.mark.cuda(pytest.mark.skipif("cuda" not in nl.backends("DecGPE"),
                                               reason="needs the CUDA backend and a GPU")(test))


@needs_cuda
@pytest.mark.parametrize("path", ["cuda-ipc", "host"])
@pytest.mark.parametrize("bc", ["zero", "periodic"])
def test_cuda_matches_single_gpu(bc, path, monkeypatch):
    """GPU ranks (one GPU each, round-robin; the halo layers device to device
    through CUDA IPC, or staged through the host with NLSEPY_HALO=host)
    against one GPU.  Every rank's reference is made before its solver
    selects the rank's GPU, so on a machine with several GPUs the two live
    on different devices and are called in turn."""
    from nlsepy import _cuda
    if path == "host":
        monkeypatch.setenv("NLSEPY_HALO", "host")
    ref, sim = pair("bcc", bc, backend="cuda")
    info = sim.comm_info
    assert info["halo"] == path, info["exchange"]
    assert "interior layers compute" in info["exchange"]  # real-time steps overlapped
    device = info["device"]
    if not os.environ.get("NLSEPY_CUDA_DEVICE", "").strip():
        assert device == node_rank() % _cuda.device_count()
    ref.step(100)
    sim.step(100)
    want = ref.psi
    assert _cuda.current_device() == device  # the reference's calls gave it back
    assert np.abs(sim.gather(root=None) - want).max() <= 1e-12 * np.abs(want).max()
    prev = ref.psi_prev[sim.local_slice]
    assert np.abs(sim.psi_prev - prev).max() <= 1e-12 * np.abs(prev).max()
    assert abs(sim.norm() - ref.norm()) <= 1e-12 * ref.norm()
    ref.imaginary_time(50, norm=2.0)
    sim.imaginary_time(50, norm=2.0)
    want = ref.psi
    assert np.abs(sim.gather(root=None) - want).max() <= 1e-12 * np.abs(want).max()
    assert same_everywhere((sim.norm(), sim.energy()))
    assert _cuda.current_device() == device


@needs_cuda
@pytest.mark.parametrize("bc", ["zero", "periodic"])
def test_cuda_ipc_is_the_host_path_and_one_gpu_bit_for_bit(bc, monkeypatch):
    """The halo layers through CUDA IPC and through the host: the same bits
    after real-time steps (the RK4 start, the leapfrog, a given psi(-dt)),
    run frames and imaginary time, and in real time the single GPU's bits;
    the exchanges keep their barriers at the end of each call."""
    ref, ipc = pair("bcc", bc, backend="cuda")
    monkeypatch.setenv("NLSEPY_HALO", "host")
    host = nl.DecGPE("bcc", **kwargs("bcc", bc, backend="cuda"), psi0=ref.psi, comm=COMM)
    monkeypatch.delenv("NLSEPY_HALO")
    assert ipc.comm_info["halo"] == "cuda-ipc", ipc.comm_info["exchange"]
    assert host.comm_info["halo"] == "host"
    for s in (ref, ipc, host):
        s.step(100)
    np.testing.assert_array_equal(ipc.psi, host.psi)
    np.testing.assert_array_equal(ipc.psi_prev, host.psi_prev)
    np.testing.assert_array_equal(ipc.gather(root=None), ref.psi)
    np.testing.assert_array_equal(ipc.psi_prev, ref.psi_prev[ipc.local_slice])
    assert not ipc._solver.ipc.unsettled
    assert ipc.last_timings["steps"] == 99  # and the RK4 start
    psi, prev, t_end = ref.psi, state(ref.positions, seed=5), ref.t + 20 * ref.dt
    for s in (ref, ipc, host):
        s.set_state(psi, prev)
        s.run(t_end, frames=4)
    np.testing.assert_array_equal(ipc.psi, host.psi)
    np.testing.assert_array_equal(ipc.gather(root=None), ref.psi)
    for s in (ipc, host):
        s.imaginary_time(50, norm=2.0)
    np.testing.assert_array_equal(ipc.psi, host.psi)
    assert (ipc.norm(), ipc.energy()) == (host.norm(), host.energy())


def link_of(sim):
    """The overlapped real-time path of a distributed DecGPE on GPU ranks."""
    return sim._solver.link and "interior layers compute" in sim.comm_info["exchange"]


@needs_cuda
@pytest.mark.parametrize("nz", [SIZE + 1, 7, 4 * SIZE + 1])
def test_cuda_link_slabs_of_every_thickness_match_one_gpu(nz):
    """Slabs of one layer (edges only, on one stream), two (no interior)
    and many: the overlapped steps give the single GPU's bits, in calls of
    one step, of fewer and of more steps than the timed waits (64), with
    the RK4 start and a given psi(-dt); the edges' wait is measured."""
    kw = kwargs("bcc", "zero", blocks=(3, 4, nz), backend="cuda")
    ref = nl.DecGPE("bcc", **kw)
    ref.psi = state(ref.positions)
    sim = nl.DecGPE("bcc", **kw, psi0=ref.psi, comm=COMM)
    assert link_of(sim), sim.comm_info["exchange"]
    for n in (1, 5, 150):
        ref.step(n)
        sim.step(n)
        np.testing.assert_array_equal(sim.gather(root=None), ref.psi)
        np.testing.assert_array_equal(sim.psi_prev, ref.psi_prev[sim.local_slice])
    assert sim.last_timings["steps"] == 150 and sim.last_timings["exchange"] >= 0
    psi, prev = ref.psi, state(ref.positions, seed=5)
    for s in (ref, sim):
        s.set_state(psi, prev)
        s.step(70)
    np.testing.assert_array_equal(sim.gather(root=None), ref.psi)
    assert same_everywhere(sim.norm())


@needs_cuda
def test_cuda_link_blow_up_matches_one_gpu():
    """A blow-up in the overlapped steps: BlowUpError on every rank at the
    single GPU's step, the state the single GPU's last good one, psi(-dt)
    dropped."""

    def linked(sim):
        assert link_of(sim), sim.comm_info["exchange"]

    blow_up_against_one_process("cuda", linked)


@needs_cuda
def test_cuda_link_blow_up_in_one_rank_only():
    """A value that only the last rank's layers make non-finite at the
    first step of an overlapped call: every rank stops there with the state
    before it (the call's starting buffers taken back)."""
    ref, sim = pair("bcc", "zero", backend="cuda")
    assert link_of(sim), sim.comm_info["exchange"]
    for s in (ref, sim):
        s.step(4)
    big, prev = ref.psi, ref.psi_prev
    big[int(np.argmax(ref.positions[:, 2]))] = 1e150  # on the last rank's layers
    ref.set_state(big, prev)
    sim.set_state(big[sim.local_slice], prev[sim.local_slice])
    with pytest.raises(nl.BlowUpError) as e_ref:
        ref.step(50)
    with pytest.raises(nl.BlowUpError) as e:
        sim.step(50)
    assert e.value.step == e_ref.value.step and same_everywhere(sim.steps)
    assert sim.steps == ref.steps == 4 and sim.psi_prev is None
    np.testing.assert_array_equal(sim.gather(root=None), ref.psi)
