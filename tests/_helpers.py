"""Checks and test problems that several test files share.

Imported as ``import _helpers`` (or ``from _helpers import ...``): pytest
puts this folder on ``sys.path`` when it loads ``tests/conftest.py``, for
the test files of every sub-folder and for the rank-side files that the MPI
tests run under ``mpirun ... -m pytest``.  Nothing here imports mpi4py; the
MPI helpers take the communicator.
"""

import contextlib
import os
import signal
import threading
import time

import numpy as np
import pytest

import nlsepy as nl
from nlsepy.common import guard
from nlsepy.reference import mbloch as mref
from nlsepy.reference.dipolar import SplitStepReference


# ------------------------------------------------------------- time, Ctrl-C
#: seconds from a SIGINT to the KeyboardInterrupt that no interrupted call may
#: exceed.  Not the design latency (a chunk of CHUNK_SECONDS, 0.1 s): the
#: tests assert the mechanism behind it exactly (check_interrupt_mechanism),
#: and this bound only catches a call that was not cut at all (the calls
#: interrupted ask for hours of work), with room for a machine whose cores
#: are shared with other work, where a 0.1 s chunk can take several times that.
LATENCY_BOUND = 5.0


@contextlib.contextmanager
def chunk_log():
    """Record every work call that ``nlsepy.common.guard.chunked`` makes.

    Yields a list that receives ``(invocation, start, end, units)`` per
    call (``time.perf_counter`` seconds), for
    :func:`check_interrupt_mechanism`; every model's long calls go through
    ``guard.chunked``.
    """
    real = guard.chunked
    calls = []
    invocations = []

    def spy(total, work, *args, **kw):
        inv = len(invocations)
        invocations.append(total)

        def timed(k):
            t0 = time.perf_counter()
            try:
                return work(k)
            finally:
                calls.append((inv, t0, time.perf_counter(), k))
        return real(total, timed, *args, **kw)

    guard.chunked = spy
    try:
        yield calls
    finally:
        guard.chunked = real


def check_interrupt_mechanism(calls, sent, caught):
    """What makes Ctrl-C act within a chunk, asserted without a clock bound.

    - The chunks were planned: within one ``guard.chunked``, each call does
      at most 8 times the units of the one before and at most
      ``CHUNK_SECONDS`` worth at the speed that call measured.
    - The flag was seen between chunks: at most one call ended after the
      signal was sent (the one in flight, or one started before the flag
      was read), and the KeyboardInterrupt came after it ended.

    Parameters
    ----------
    calls : list
        What :func:`chunk_log` recorded.
    sent, caught : float
        ``time.perf_counter()`` when the signal was sent and when the
        KeyboardInterrupt was caught.
    """
    assert calls, "no chunk ran"
    for (i0, s0, e0, k0), (i1, s1, e1, k1) in zip(calls, calls[1:]):
        if i0 == i1:
            assert k1 <= 8 * k0, (k0, k1)
            assert k1 <= max(1.0, guard.CHUNK_SECONDS * k0 / (e0 - s0)) * (1 + 1e-9), \
                (k0, e0 - s0, k1)
    later = [c for c in calls if c[2] > sent]
    assert len(later) <= 1, f"{len(later)} chunks ended after the signal: {later}"
    assert all(c[1] < caught for c in calls)
    assert caught >= max(c[2] for c in calls)


def sigint_during(call, after=0.4, what="call"):
    """Run ``call()`` with a SIGINT sent from a timer thread `after` seconds in.

    The call must raise KeyboardInterrupt; the signal must have gone out
    before the call ended, and Python's own SIGINT handler must be back in
    place afterwards.  Where the call's work goes through
    ``guard.chunked``, the interrupt's mechanism is checked
    (:func:`check_interrupt_mechanism`).

    Parameters
    ----------
    call : callable
        What is interrupted (no arguments).
    after : float, optional
        Seconds from the start of the call to the signal.
    what : str, optional
        The call's name in the failure message ("the <what> ended before
        the signal").

    Returns
    -------
    float
        Seconds from the signal to the KeyboardInterrupt.
    """
    sent = []
    timer = threading.Timer(after, lambda: (sent.append(time.perf_counter()),
                                            os.kill(os.getpid(), signal.SIGINT)))
    with chunk_log() as calls:
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                call()
            caught = time.perf_counter()
        finally:
            timer.cancel()
            timer.join()
    assert sent, f"the {what} ended before the signal"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    if calls:
        check_interrupt_mechanism(calls, sent[0], caught)
    return caught - sent[0]


@contextlib.contextmanager
def finishes_within(seconds):
    """Context manager: the ``with`` body must take less than `seconds`.

    Used around calls that must be refused before they allocate (a refusal
    after the allocation would take far longer, or not return at all).

    Parameters
    ----------
    seconds : float
        Wall-clock limit of the body.
    """
    t0 = time.perf_counter()
    yield
    assert time.perf_counter() - t0 < seconds


# --------------------------------------------------------------------- CUDA
def cuda_device_properties():
    """What the current CUDA device offers, read from the driver (libcuda)
    with ctypes, independently of the code under test.

    Returns
    -------
    dict
        ``major``, ``minor`` (compute capability), ``smem_optin`` (the most
        shared memory a block can opt in to, bytes), ``sms`` (multiprocessors)
        and ``cooperative`` (cooperative launches supported).
    """
    import ctypes
    from nlsepy import _cuda
    lib = ctypes.CDLL("libcuda.so.1")
    assert lib.cuInit(0) == 0, "cuInit failed"
    dev = ctypes.c_int()
    assert lib.cuDeviceGet(ctypes.byref(dev), _cuda.current_device()) == 0

    def attribute(code):
        value = ctypes.c_int()
        assert lib.cuDeviceGetAttribute(ctypes.byref(value), code, dev) == 0, code
        return value.value
    # CUdevice_attribute codes of cuda.h
    return dict(major=attribute(75), minor=attribute(76), smem_optin=attribute(97),
                sms=attribute(16), cooperative=bool(attribute(95)))


# ---------------------------------------------------------------------- MPI
def check_z_pipeline_steps(s, r, calls):
    """Maxwell-Bloch solver `s` takes each count n of `calls` z steps in one
    call (``steps(n)``: the z pipeline where it has one), `r` the same z
    steps one a call (``step(False)``): after each call the same z index and
    the same bits for the fields, the polarisation and the norm monitor."""
    for n in calls:
        s.steps(n)
        for _ in range(n):
            r.step(False)
        assert s.z_index() == r.z_index()
        assert np.array_equal(s.get_fields(), r.get_fields())
        assert np.array_equal(s.get_polarisation(), r.get_polarisation())
        assert s.norm_deviation() == r.norm_deviation()


def check_z_pipeline_blow_up(s, r, n=6):
    """A blow-up within `n` z steps taken in one call by `s` is reported at
    the z index where `r`, one z step a call, reports it, with the same
    finite fields kept."""
    with pytest.raises(nl.BlowUpError):
        s.steps(n)
    with pytest.raises(nl.BlowUpError):
        for _ in range(n):
            r.step(False)
    assert s.z_index() == r.z_index()
    assert np.all(np.isfinite(s.get_fields()))
    assert np.array_equal(s.get_fields(), r.get_fields())


def check_gather_at_last_rank(sim, full, comm):
    """``sim.gather(root=last rank)``: the whole state there, None elsewhere.

    Parameters
    ----------
    sim
        A distributed solver (its ``gather(root=)``).
    full : numpy.ndarray
        The whole state it must gather (a single-process solver's).
    comm : mpi4py.MPI.Comm
        The solver's communicator.
    """
    root = comm.Get_size() - 1
    g = sim.gather(root=root)
    if comm.Get_rank() == root:
        np.testing.assert_array_equal(g, full)
    else:
        assert g is None


# ----------------------------------------------------------------- DBEC-GP
def write_real3d_input(path, shape, outstpt):
    """Write a real-time DBEC-GP input (OPTION 2, DYNAOUT) on a grid of `shape`.

    5000 atoms of a_s = 100 a_0 and a_dd = 132.7 a_0 in the trap (0.5, 1,
    1.5), spacing 0.6, dt = 0.01, 7 steps with the initial couplings
    (GPAR = 1.5, GDDPAR = 1) and 11 with the final ones, a DYNAOUT row
    every `outstpt` steps.  One ``   KEY = value`` line per key, as the
    published inputs have them.

    Parameters
    ----------
    path : pathlib.Path
        The input file to write.
    shape : tuple of int
        ``(NX, NY, NZ)``.
    outstpt : int
        OUTSTPT, steps between DYNAOUT rows.
    """
    nx, ny, nz = shape
    items = {"OPTION": 2, "NATOMS": 5000, "AHO": 1e-6, "AS": 100.0, "ADD": 132.7,
             "CUTOFF": 3.0, "GPAR": 1.5, "GDDPAR": 1.0, "NX": nx, "NY": ny, "NZ": nz,
             "DX": 0.6, "DY": 0.6, "DZ": 0.6, "DT": 0.01, "GAMMA": 0.5, "NU": 1.0,
             "LAMBDA": 1.5, "NSTP": 0, "NPAS": 7, "NRUN": 11, "OUTPUT": "real3d-out",
             "RMSOUT": "real3d-rms", "DYNAOUT": "real3d-dyna", "OUTSTPT": outstpt}
    path.write_text("".join(f"   {k} = {v}\n" for k, v in items.items()))


# ----------------------------------------------------------- Maxwell-Bloch
def mbloch_multilevel(n_atoms, seed, t, gaussian, sech):
    """A multi-level, multi-mode Maxwell-Bloch ensemble and its input fields.

    n_g = 4, n_e = 3, modes -1..2 (empty bands at the edges), Franck-Condon
    F, a Gaussian line (sigma 1 on [-3, 3]), level and mode spacings, and a
    random normalised state per atom.  The fields: a Gaussian pi pulse in
    mode 0, and sech pulses of area 1 (times 0.5 + 0.3i) in mode 1 and
    (times 0.1i) in mode -1.

    Parameters
    ----------
    n_atoms : int
        Number of atoms.
    seed : int
        Seed of the atoms' states.
    t : numpy.ndarray
        The time grid.
    gaussian : (float, float)
        Width and centre of the Gaussian pulse.
    sech : (float, float)
        Width and centre of the sech pulses.

    Returns
    -------
    model : dict
        Keyword arguments of the model (``n_g`` ... ``initial_state``).
    det, w : numpy.ndarray
        Detunings and weights of the line.
    e0 : numpy.ndarray
        Fields ``(len(t), 4)``, modes -1..2.
    """
    rng = np.random.default_rng(seed)
    ng, ne = 4, 3
    det, w = mref.gaussian_line(n_atoms, 1.0, span=3.0)
    psi0 = rng.normal(size=(n_atoms, ng + ne)) + 1j * rng.normal(size=(n_atoms, ng + ne))
    psi0 /= np.linalg.norm(psi0, axis=1)[:, None]
    model = dict(n_g=ng, n_e=ne, modes=(-1, 2), F=mref.franck_condon(ng, ne, 1.1), beta=0.7,
                 kappa_g=0.3, kappa_e=0.2, delta=0.1, initial_state=psi0)
    e0 = np.zeros((len(t), 4), complex)
    e0[:, 1] = mref.gaussian_pulse(t, *gaussian, area=np.pi)
    e0[:, 2] = (0.5 + 0.3j) * mref.sech_pulse(t, *sech, area=1.0)
    e0[:, 0] = 0.1j * mref.sech_pulse(t, *sech, area=1.0)
    return model, det, w, e0


def mbloch_c_problem(n_g, n_e, modes, n_atoms, n_t, h_t, beta=2.0, area=np.pi, delay=1.0,
                     seed=3):
    """Keyword arguments of the C API's Maxwell-Bloch solver for a multi-level case.

    Franck-Condon F, a Gaussian line of width 1.3, every atom in
    ``sqrt(0.7) |0> + sqrt(0.3) e^{i phi} |1>`` with a random phase, a sech
    pulse of width 0.6 in every mode (centred at ``delay + 0.2 q``, area
    `area` in the middle mode and less towards the edges), h_z = 0.05,
    kappa_g = 0.3, kappa_e = 0.25, delta = 0.1 and 4 Euler substeps.

    Parameters
    ----------
    n_g, n_e : int
        Ground and excited levels.
    modes : (int, int)
        Lowest and highest mode.
    n_atoms, n_t : int
        Atoms and time points.
    h_t, beta : float
        Time step and coupling.
    area, delay : float, optional
        Area of the middle mode's pulse, centre of the lowest mode's.
    seed : int, optional
        Seed of the atoms' phases.

    Returns
    -------
    dict
        ``n_g``, ``n_e``, ``l_min``, ``l_max``, ``F``, ``detunings``,
        ``weights``, ``initial_state``, ``fields0``, ``h_t``, ``h_z``,
        ``beta``, ``kappa_g``, ``kappa_e``, ``delta``, ``euler_substeps``.
    """
    rng = np.random.default_rng(seed)
    det, w = mref.gaussian_line(n_atoms, 1.3)
    psi0 = np.zeros((n_atoms, n_g + n_e), complex)
    psi0[:, 0] = np.sqrt(0.7)
    psi0[:, 1] = np.sqrt(0.3) * np.exp(1j * rng.uniform(0, 2 * np.pi, n_atoms))
    t = mref.time_grid(h_t, n_t)
    nf = modes[1] - modes[0] + 1
    fields = np.zeros((n_t, nf), complex)
    for q in range(nf):
        fields[:, q] = mref.sech_pulse(t, 0.6, delay + 0.2 * q, area=area / (1 + abs(q - nf // 2)))
    return dict(n_g=n_g, n_e=n_e, l_min=modes[0], l_max=modes[1],
                F=mref.franck_condon(n_g, n_e, 1.1), detunings=det, weights=w,
                initial_state=psi0, fields0=fields, h_t=h_t, h_z=0.05, beta=beta,
                kappa_g=0.3, kappa_e=0.25, delta=0.1, euler_substeps=4)


def mccall_hahn_delay(beta, tau, detunings, weights, z):
    """Delay in retarded time of the 2 pi sech soliton after `z` (McCall-Hahn).

    ``eps = (2/tau) sech((t - z/V)/tau)`` is an exact solution of the
    two-level Maxwell-Bloch equations for any line: an atom of detuning
    Delta answers with the polarisation ``tau^2 F(Delta) d eps/dt``,
    ``F = 1 / (1 + Delta^2 tau^2)``, so that ``dz eps = i P`` (docs/physics.md
    section 5) moves the pulse at ``1/V = (beta/2) tau^2 sum_D w_D F(Delta_D)``
    past the retarded frame: ``alpha tau / 2`` for a line much broader than
    1/tau (alpha = pi beta g(0)), 0.52 of that for a Gaussian line of rms
    width 1/tau.

    Parameters
    ----------
    beta, tau : float
        Coupling and pulse width.
    detunings, weights : numpy.ndarray
        The sampled line.
    z : float
        Propagation length (units of 1/beta).

    Returns
    -------
    float
        ``z / V``.
    """
    F = 1.0 / (1.0 + (np.asarray(detunings) * tau) ** 2)
    return 0.5 * beta * tau ** 2 * float(np.sum(np.asarray(weights) * F)) * z


def check_4pi_split(e, h_t):
    """A 4 pi sech of width 1 after alpha z = 12 (h_t = 0.05, alpha h_z = 0.3):
    two pulses of area ~2 pi.

    The areas are split at the intensity minimum between the two peaks.
    Their sum, the output's whole area, is 4 pi to 1.5e-4 (measured
    3.6e-5, independent of h_z and halved with h_t: the time grid's
    quadrature of the pulse).  The overlap of the two pulses' tails at the
    split moves area from the second to the first: each within 8 % of
    2 pi (measured +6.4 % and -6.4 %, the same at half h_t or h_z).  The peaks tend to 6 and 2 (the
    2 pi solitons of widths 1/3 and 1), which the narrow one has not
    reached at alpha z = 12: within 5 % (measured -3.6 %, -0.8 % at
    alpha z = 20) and 1 % (measured +0.2 %).

    Parameters
    ----------
    e : numpy.ndarray
        The real field at the end, one value per time point.
    h_t : float
        The time step.
    """
    I = e ** 2
    peaks = [k for k in range(1, len(e) - 1)
             if I[k] > I[k - 1] and I[k] >= I[k + 1] and I[k] > 0.05 * I.max()]
    assert len(peaks) == 2
    kmin = peaks[0] + int(np.argmin(I[peaks[0]:peaks[1]]))
    a1, a2 = e[:kmin].sum() * h_t, e[kmin:].sum() * h_t
    assert a1 + a2 == pytest.approx(4 * np.pi, rel=1.5e-4)
    assert a1 == pytest.approx(2 * np.pi, rel=0.08)
    assert a2 == pytest.approx(2 * np.pi, rel=0.08)
    assert np.sqrt(I[peaks[0]]) == pytest.approx(6.0, rel=0.05)
    assert np.sqrt(I[peaks[1]]) == pytest.approx(2.0, rel=0.01)


def rank_tests(ranks):
    """The two drivers of a model's rank-side tests in file `ranks` under
    ``mpirun`` on 2 and 3 ranks: the CPU ranks' tests (``-m "not cuda"``)
    and the GPU ranks' (``-m cuda``); a rank-side skip is the driver's skip.
    A test module binds them to its own ``test_*`` names."""

    @pytest.mark.mpi
    @pytest.mark.parametrize("nranks", [2, 3])
    def cpu_ranks(mpirun, nranks):
        """The CPU rank-side tests (any rank-side skip is this test's skip)."""
        mpirun(nranks, ranks, "-m", "not cuda")

    @pytest.mark.mpi
    @pytest.mark.cuda
    @pytest.mark.parametrize("nranks", [2, 3])
    def gpu_ranks(mpirun, nranks):
        """The rank-side tests marked cuda: GPU ranks against one GPU."""
        mpirun(nranks, ranks, "-m", "cuda")

    return cpu_ranks, gpu_ranks


def dipolar_against_reference(shape, h, trap, imaginary, dtype, backend="cpu", steps=20, **kw):
    """Step a DipolarGPE and nlsepy.reference.dipolar's SplitStepReference
    from the same perturbed ground-state-like start (moving, in real time)
    and return both states and the relative difference (max norm).

    `kw` are the coupling constants (g, gdd and where it applies gqf)."""
    ref = SplitStepReference(shape, (h,) * 3, 0.005, kin=1.0, trap=[w * w for w in trap],
                             cutoff=3.0, imaginary=imaginary, dtype=dtype, **kw)
    gpe = nl.DipolarGPE(shape, h, 0.005, trap=trap, cutoff=3.0, dtype=dtype,
                        backend=backend, **kw)
    X = np.meshgrid(*gpe.coords, indexing="ij")
    psi = np.asarray(ref.psi) * (1 + 0.2 * np.cos(X[0]) * np.sin(X[1] + 0.3))
    if not imaginary:
        psi = psi * np.exp(0.4j * X[0] - 0.2j * X[2] ** 2)
    ref.psi = psi.astype(ref.psi.dtype)
    if imaginary:
        ref.psi = ref.psi / np.sqrt(ref.norm())
    start = np.asarray(ref.psi).copy()
    gpe.psi = start
    ref.step(steps)
    (gpe.imaginary_time if imaginary else gpe.real_time)(steps)
    a, b = gpe.psi, np.asarray(ref.psi)
    return a, b, start, float(np.abs(a - b).max() / np.abs(b).max())


def same_everywhere(comm, a):
    """True on every rank of `comm` when `a` has the same bytes on every rank."""
    mine = np.ascontiguousarray(a).tobytes()
    return all(b == mine for b in comm.allgather(mine))
