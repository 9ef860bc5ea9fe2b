"""The distributed dipolar GPE, rank side: every rank of ``mpirun -n N`` runs
these tests (driver: test_dipolar_mpi.py).  Each test compares with the
single-process solver that every rank also runs, on a grid whose x rows the
rank count does not always divide evenly (3 ranks: 8 + 7 + 7), and
every assertion is agreed between the ranks so that a failure on one rank
fails the test on all of them instead of hanging the next collective."""

import os
import signal

import numpy as np
import pytest

import nlsepy as nl

MPI = pytest.importorskip("mpi4py.MPI")
COMM = MPI.COMM_WORLD
RANK, SIZE = COMM.Get_rank(), COMM.Get_size()
#: the ranks' backend: "cpu" or "cuda" (GPU ranks, compared with one GPU);
#: the driver sets it
BACKEND = os.environ.get("NLSEPY_RANKS_BACKEND", "cpu")
if BACKEND not in nl.backends("DipolarGPE"):
    pytest.skip(f"no {BACKEND} backend here", allow_module_level=True)
GPU = BACKEND == "cuda"

SHAPE = (22, 16, 12)  # x rows: 2 ranks 11 + 11; 3 ranks 8 + 7 + 7 (as nl.scatter)
BASE = dict(shape=SHAPE, spacing=(0.45, 0.5, 0.6), dt=0.004, g=4.0, gdd=3.0,
            trap=(1.0, 1.3, 0.8), cutoff=3.5)
TOL = 1e-12


def everywhere(ok, what=""):
    """Assert on every rank that `ok` holds on every rank."""
    bad = COMM.allgather(bool(ok))
    assert all(bad), f"{what}: fails on ranks {[r for r, v in enumerate(bad) if not v]}"


def rel_err(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))) / np.max(np.abs(b)))


def shared_dir(tmp_path):
    return COMM.bcast(str(tmp_path), root=0)


def state(seed=3, complex_=True):
    """The same global initial state on every rank."""
    rng = np.random.default_rng(seed)
    x = [(np.arange(n) - n // 2) * h for n, h in zip(SHAPE, BASE["spacing"])]
    X, Y, Z = np.meshgrid(*x, indexing="ij")
    psi = np.exp(-0.5 * (X ** 2 + 1.3 * Y ** 2 + 0.8 * Z ** 2))
    psi = psi * (1 + 0.1 * rng.standard_normal(SHAPE))
    if complex_:
        psi = psi * np.exp(1j * (0.4 * X - 0.2 * Y + 0.1 * rng.standard_normal(SHAPE)))
    return psi


def pair(**kw):
    args = dict(BASE, **kw)
    return (nl.DipolarGPE(backend=BACKEND, **args),
            nl.DipolarGPE(comm=COMM, backend=BACKEND, **args))


def same_obs(a, b, tol=TOL):
    oa, ob = a.observables(), b.observables()
    for k in ("norm", "norm_sum", "mu", "energy", "mu_dbec", "psi0sq", "r_rms"):
        everywhere(abs(oa[k] - ob[k]) <= tol * max(1.0, abs(oa[k])), f"observable {k}")
    everywhere(np.allclose(oa["x2"], ob["x2"], rtol=tol, atol=0), "x2")


def test_layout_and_info():
    gpe = nl.DipolarGPE(comm=COMM, backend=BACKEND, **BASE)
    info = gpe.comm_info
    assert info["ranks"] == SIZE and info["rank"] == RANK and info["backend"] == BACKEND
    assert info["mpi"]
    counts = info["layout"]["counts"]
    sub = os.environ.get("NLSEPY_DIPOLAR_XSOLVE") != "transpose"  # the default on 2+ ranks
    # an even split, the first nx % ranks ranks one row more
    assert counts == [SHAPE[0] // SIZE + (r < SHAPE[0] % SIZE) for r in range(SIZE)]
    if GPU:  # transposes into the other ranks' buffers
        staged = os.environ.get("NLSEPY_HALO", "").lower() == "host"
        assert info["fft"] == "cufft-slabs"
        path = info["transpose"]
        if sub:
            assert path.startswith("substructured over ")
            path = path[len("substructured over "):]
        assert path.startswith("host-staged" if staged else "cuda-ipc")
    else:
        assert info["fft"] == "fftw-slabs"
        assert info["transpose"] == ("substructured" if sub else "MPI_Alltoallv")
    assert gpe.psi.shape == (counts[RANK],) + SHAPE[1:]
    assert gpe.local_slice[0] == slice(gpe.layout.start, gpe.layout.start + counts[RANK])


def test_real_time_matches_one_process():
    psi0 = state()
    ob = nl.Obstacle(V0=5.0, sigma=0.8, velocity=0.3, start=-1.0, t_move=0.2, t_off=0.1)
    V = 0.2 * np.cos(np.arange(np.prod(SHAPE)).reshape(SHAPE) * 0.01)
    ref, gpe = pair(psi0=psi0, V=V, obstacle=ob)
    ref.real_time(100)
    gpe.real_time(100)
    everywhere(rel_err(gpe.gather(root=None), ref.psi) < TOL, "psi after 100 real-time steps")
    everywhere(rel_err(gpe.psi, ref.psi[gpe.local_slice]) < TOL, "local psi")
    everywhere(gpe.t == ref.t and gpe.steps == ref.steps, "clock")
    same_obs(ref, gpe)


def test_imaginary_time_matches_one_process():
    ref, gpe = pair(psi0=state(complex_=False))
    assert gpe.is_real
    ref.imaginary_time(100)
    gpe.imaginary_time(100)
    everywhere(rel_err(gpe.gather(root=None), ref.psi) < TOL, "psi after 100 imaginary steps")
    same_obs(ref, gpe)
    # complex state in imaginary time, and a ramp of the couplings
    ref, gpe = pair(psi0=state())
    ref.imaginary_time(60, ramp=True)
    gpe.imaginary_time(60, ramp=True)
    everywhere(rel_err(gpe.gather(root=None), ref.psi) < TOL, "complex imaginary time, ramp")


def test_lhy_matches_one_process():
    """gqf != 0: the Lee-Huang-Yang power in the slabs' non-derivative step
    (imaginary time, a real state; then real time) and its energy part in
    the observables, summed over the ranks."""
    ref, gpe = pair(psi0=state(complex_=False), gqf=6.0)
    ref.imaginary_time(60)
    gpe.imaginary_time(60)
    everywhere(rel_err(gpe.gather(root=None), ref.psi) < TOL, "LHY imaginary time")
    for s in (ref, gpe):
        s.gqf = 9.0
        s.real_time(60)
    everywhere(rel_err(gpe.gather(root=None), ref.psi) < TOL, "LHY real time")
    same_obs(ref, gpe)
    oa, ob = ref.observables(), gpe.observables()
    for k in ("e_kin", "e_trap", "e_contact", "e_dd", "e_qf"):
        everywhere(abs(oa[k] - ob[k]) <= TOL * max(1.0, abs(oa[k])), f"energy part {k}")
    everywhere(oa["e_qf"] > 0, "the Lee-Huang-Yang energy")


def test_rotating_frame_matches_one_process():
    """omega != 0: the x solve through x pencils (with either switch), real and
    imaginary time, a real start promoted."""
    ref, gpe = pair(psi0=state(complex_=False), omega=0.5)
    ref.imaginary_time(60)
    gpe.imaginary_time(60)
    everywhere(rel_err(gpe.gather(root=None), ref.psi) < 1e-10, "rotating imaginary time")
    for s in (ref, gpe):
        s.omega = -0.3
        s.real_time(60)
    everywhere(rel_err(gpe.gather(root=None), ref.psi) < 1e-10, "rotating real time")
    oa, ob = ref.observables(), gpe.observables()
    everywhere(abs(oa["lz"] - ob["lz"]) <= 1e-10 * max(1.0, abs(oa["lz"])), "lz")
    same_obs(ref, gpe, tol=1e-10)


def test_single_precision():
    ref, gpe = pair(psi0=state(), dtype=np.complex64)
    ref.real_time(50)
    gpe.real_time(50)
    out = gpe.gather(root=None)
    assert out.dtype == np.complex64
    everywhere(rel_err(out, ref.psi) < 1e-5, "complex64")


def test_switch_dipolar_on_and_setters():
    ref, gpe = pair(psi0=state(), gdd=0.0, dipolar=False)
    for m in (ref, gpe):
        m.real_time(10)
        m.gdd = 2.5  # plans made now, on every rank
        m.g = 3.0
        m.dt = 0.003
        m.real_time(10)
        m.V = 0.1 * np.ones(SHAPE)
    gpe.real_time(5)
    ref.real_time(5)
    everywhere(rel_err(gpe.gather(root=None), ref.psi) < TOL, "after setters")


def test_outputs_match_one_process():
    ref, gpe = pair(psi0=state())
    ref.real_time(20)
    gpe.real_time(20)
    sl = gpe.local_slice
    everywhere(rel_err(gpe.density(), ref.density()[sl]) < TOL, "density, local")
    for keep in (("x",), ("y",), ("z",), ("x", "z"), ("y", "z")):
        everywhere(rel_err(gpe.density(keep), ref.density(keep)) < TOL, f"density {keep}")
    for axis, index in (("x", None), ("x", 3), ("y", 5), ("z", None)):
        a, b = gpe.phase_slice(axis, index), ref.phase_slice(axis, index)
        everywhere(np.max(np.abs(np.angle(np.exp(1j * (a - b))))) < 1e-10, f"phase {axis}")
    everywhere(rel_err(gpe.dipolar_potential(), ref.dipolar_potential()[sl]) < TOL, "V_dd")
    everywhere(rel_err(gpe.potential(0.1), ref.potential(0.1)[sl]) < TOL, "potential")
    everywhere(np.array_equal(gpe.kernel(), ref.kernel()[sl]), "kernel rows")
    full = gpe.gather(root=0)
    everywhere((full is None) == (RANK != 0), "gather root 0")
    assert gpe.last_timings["step"] >= 0 and gpe.memory_bytes > 0


def test_same_ranks_same_bits():
    runs = []
    for _ in range(2):
        gpe = nl.DipolarGPE(comm=COMM, backend=BACKEND, psi0=state(), **BASE)
        gpe.real_time(30)
        gpe.imaginary_time(20)
        runs.append((gpe.observables(), gpe.psi))
    (o1, p1), (o2, p2) = runs
    everywhere(o1 == o2, "observables of two runs")
    everywhere(np.array_equal(p1, p2), "states of two runs")


def test_scatter_slab_input():
    psi0 = state()
    slab = nl.scatter(psi0 if RANK == 0 else None, COMM)
    a = nl.DipolarGPE(comm=COMM, backend=BACKEND, psi0=slab, **BASE)
    b = nl.DipolarGPE(comm=COMM, backend=BACKEND, psi0=psi0, **BASE)
    everywhere(np.array_equal(a.psi, b.psi), "Slab input")
    a.V = nl.scatter(np.ones(SHAPE) * 0.3 if RANK == 0 else None, COMM)
    everywhere(np.array_equal(a.V, np.full(a.psi.shape, 0.3)), "Slab V")
    b.psi = b.psi  # this rank's slab in
    everywhere(np.array_equal(a.psi, b.psi), "local slab input")


def test_checkpoint_n_to_m(tmp_path):
    folder = shared_dir(tmp_path)
    path = os.path.join(folder, "ck.npz")
    gpe = nl.DipolarGPE(comm=COMM, backend=BACKEND, psi0=state(), V=0.1 * np.ones(SHAPE),
                        **BASE)
    gpe.real_time(15)
    gpe.save(path)
    gpe.real_time(25)
    want = gpe.gather(root=None)
    # the same ranks: bit for bit
    back = nl.DipolarGPE.load(path, comm=COMM, backend=BACKEND)
    everywhere(back.t == 15 * BASE["dt"] and back.steps == {"imaginary": 0, "real": 15}, "clock")
    back.real_time(25)
    everywhere(np.array_equal(back.gather(root=None), want), "same ranks continue bit for bit")
    # one process without comm (every rank for itself)
    one = nl.DipolarGPE.load(path, backend=BACKEND)
    assert type(one) is nl.DipolarGPE and one.V is not None
    one.real_time(25)
    everywhere(rel_err(one.psi, want) < TOL, "one process continues")
    # fewer ranks (M = N - 1); the last rank waits
    sub = COMM.Split(0 if RANK < SIZE - 1 else MPI.UNDEFINED, RANK)
    if sub != MPI.COMM_NULL:
        few = nl.DipolarGPE.load(path, comm=sub, backend=BACKEND)
        few.real_time(25)
        got = few.gather(root=None)
        ok = rel_err(got, want) < TOL
        sub.Free()
    else:
        ok = True
    everywhere(ok, f"{SIZE - 1} ranks continue")
    # written by fewer ranks (N - 1), read by all N
    sub = COMM.Split(0 if RANK < SIZE - 1 else MPI.UNDEFINED, RANK)
    if sub != MPI.COMM_NULL:
        w = nl.DipolarGPE(comm=sub, backend=BACKEND, psi0=state(), V=0.1 * np.ones(SHAPE),
                          **BASE)
        w.real_time(15)
        w.save(os.path.join(folder, "few.npz"))
        sub.Free()
    COMM.Barrier()
    more = nl.DipolarGPE.load(os.path.join(folder, "few.npz"), comm=COMM, backend=BACKEND)
    more.real_time(25)
    everywhere(rel_err(more.gather(root=None), want) < TOL, f"{SIZE - 1} -> {SIZE} ranks")
    # a single-process checkpoint read by the ranks
    one.save(os.path.join(folder, f"one{RANK}.npz"))
    COMM.Barrier()
    d = nl.DipolarGPE.load(os.path.join(folder, "one0.npz"), comm=COMM, backend=BACKEND)
    everywhere(rel_err(d.gather(root=None), one.psi) == 0, "single-process checkpoint in")


def test_bad_input_on_one_rank_raises_everywhere():
    gpe = nl.DipolarGPE(comm=COMM, backend=BACKEND, psi0=state(), **BASE)
    slab = state()[gpe.local_slice].copy()
    if RANK == SIZE - 1:
        slab[1, 2, 3] = np.nan
    with pytest.raises(ValueError, match=rf"rank {SIZE - 1}: psi contains a non-finite value"):
        gpe.psi = slab
    wrong = slab[:, :-1] if RANK == 0 else state()[gpe.local_slice]
    with pytest.raises(ValueError, match="rank 0: psi must have the grid's shape"):
        gpe.psi = wrong
    with pytest.raises(ValueError, match="must be the same on every rank"):
        gpe.g = 1.0 + RANK
    with pytest.raises(ValueError, match="must be the same on every rank"):
        nl.DipolarGPE(comm=COMM, backend=BACKEND, **dict(BASE, dt=0.01 if RANK else 0.02))
    V = np.zeros(SHAPE)
    if RANK == SIZE - 1:
        V[gpe.local_slice][0, 0, 0] = np.inf
    with pytest.raises(ValueError, match=rf"rank {SIZE - 1}: V contains non-finite"):
        gpe.V = V
    gpe.real_time(3)  # the collectives are still paired
    everywhere(np.isfinite(gpe.observables()["norm"]), "usable after errors")


def test_blowup_on_one_rank_stops_all():
    V = np.zeros(SHAPE)
    V[SHAPE[0] - 2, SHAPE[1] // 2, SHAPE[2] // 2] = -1e6  # on the last rank's slab only
    gpe = nl.DipolarGPE(comm=COMM, backend=BACKEND, psi0=state(complex_=False), V=V,
                        **dict(BASE, dt=0.5))
    before = gpe.psi
    with pytest.raises(nl.BlowUpError, match="non-finite"):
        gpe.imaginary_time(40)
    everywhere(np.array_equal(gpe.psi, before), "state restored")
    everywhere(gpe.steps["imaginary"] == 0, "counters")


def test_ctrl_c_on_one_rank_stops_all_after_the_same_block():
    gpe = nl.DipolarGPE(comm=COMM, backend=BACKEND, psi0=state(), **BASE)

    def hit(_):
        if RANK == 0 and gpe.steps["real"] == 2:
            signal.raise_signal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        gpe.real_time(8, frames=4, callback=hit)
    everywhere(gpe.steps["real"] == 2, f"steps at the interrupt ({gpe.steps})")
    gpe.real_time(6)
    ref = nl.DipolarGPE(comm=COMM, backend=BACKEND, psi0=state(), **BASE)
    ref.real_time(8)
    everywhere(np.array_equal(gpe.psi, ref.psi), "resumed run")


def test_callback_stop_on_one_rank_and_run():
    gpe = nl.DipolarGPE(comm=COMM, backend=BACKEND, psi0=state(), **BASE)

    def stop(m):
        if RANK == SIZE - 1 and m.steps["real"] >= 4:
            raise StopIteration
    gpe.real_time(10, frames=5, callback=stop)
    everywhere(gpe.steps["real"] == 4, "StopIteration on one rank")
    fr = gpe.run(gpe.t + 4 * BASE["dt"], frames=2)
    everywhere(len(fr) == 3 and fr.psi.shape[1:] == gpe.psi.shape, "run frames")


def test_refusals():
    with pytest.raises(ValueError, match="3d geometry"):
        nl.DipolarGPE((16, 16), 0.5, 0.01, geometry="2d-xy", comm=COMM)
    if "cuda" not in nl.backends("DipolarGPE"):
        with pytest.raises(nl.BackendError, match="cuda"):
            nl.DipolarGPE(comm=COMM, backend="cuda", **BASE)
    if SIZE >= 3:  # 4 x rows over 3 ranks: 2, 1, 1
        with pytest.raises(ValueError, match="needs at least 2 per rank: use 2 ranks or fewer"):
            nl.DipolarGPE(comm=COMM, backend=BACKEND, **dict(BASE, shape=(4, 8, 8), gdd=0.0))
    with pytest.raises(TypeError, match="mpi4py intracommunicator"):
        nl.DipolarGPE(comm="world", **BASE)
