"""The z-slab entry points of the DEC C API (nlse_dec_set_slab, get/set_layers,
layers_to/from, combine, has_prev, set_comm; source 001 section 4.2) and the
device-to-device exchange's barriers (nlsepy.common.dist.IpcHalo) without MPI, on every
backend: a handle over a slab with its halo layers reproduces the whole
grid's step on its own layers bit for bit, the RK4 start by `combine` is
the solver's own, the observables of the slabs add up to the whole grid's,
and bad arguments are refused."""

import numpy as np
import pytest

import nlsepy as nl

BLOCKS = (3, 4, 7)


def make(bc, backend, grid="bcc", **kw):
    sim = nl.DecGPE(grid, blocks=BLOCKS, spacing=0.9, g=3.0, trap=(1.0, 0.8, 1.3), bc=bc,
                    V=lambda x, y, z: 0.3 * np.cos(x) * np.sin(y + z), backend=backend, **kw)
    p = sim.positions
    rng = np.random.default_rng(2)
    psi = np.exp(-(p ** 2).sum(axis=1) / 3 + 0.5j * p[:, 0]) + 0.1 * rng.standard_normal(len(p))
    prev = psi * np.exp(0.05j) + 0.01 * rng.standard_normal(len(p))
    sim.set_state(psi, prev)
    return sim


def rows_of(sim, a, first, count):
    """Layers first .. first + count - 1 of a global per-cell array, wrapped
    around the periodic grid."""
    layers = a.reshape(sim.blocks[2], -1)
    return layers[np.arange(first, first + count) % sim.blocks[2]].reshape(-1)


def slab(sim, z0, count, lo=1, hi=1):
    """A handle over layers z0 - lo .. z0 + count + hi - 1 with the whole
    grid's state, previous state and potential there."""
    h = sim._handle(count + lo + hi)
    h.set_slab(z0 - lo, lo, count)
    h.set_potential(rows_of(sim, sim.V, z0 - lo, count + lo + hi))
    h.set_state(rows_of(sim, sim.psi, z0 - lo, count + lo + hi),
                rows_of(sim, sim.psi_prev, z0 - lo, count + lo + hi))
    return h


@pytest.mark.parametrize("bc", ["zero", "periodic"])
def test_slab_step_is_the_whole_grids(bc, backend):
    sim = make(bc, backend)
    before, prev0 = sim.psi, sim.psi_prev
    sim.step(1)
    want = sim.psi.reshape(BLOCKS[2], -1)
    edge = bc == "zero"
    for z0, count in ((0, 3), (3, 2), (5, 2), (2, 1)):
        lo = 0 if edge and z0 == 0 else 1
        hi = 0 if edge and z0 + count == BLOCKS[2] else 1
        h = slab(sim, z0, count, lo, hi)
        h.set_state(rows_of(sim, before, z0 - lo, count + lo + hi),
                    rows_of(sim, prev0, z0 - lo, count + lo + hi))
        assert h.has_prev()
        _, blew = h.step(1)
        assert not blew
        np.testing.assert_array_equal(h.get_layers(lo, count), want[z0:z0 + count].reshape(-1))
        # the halo layers are not computed: they keep what the buffer held
        if lo:
            np.testing.assert_array_equal(h.get_layers(0, 1), rows_of(sim, prev0, z0 - 1, 1))
        if hi:
            np.testing.assert_array_equal(h.get_layers(lo + count, 1),
                                          rows_of(sim, prev0, z0 + count, 1))


def test_slab_observables_add_up(backend):
    sim = make("periodic", backend)
    parts = [slab(sim, z0, n).observe() for z0, n in ((0, 3), (3, 2), (5, 2))]
    norm, energy = np.sum(parts, axis=0)
    assert abs(norm - sim.norm()) <= 1e-12 * sim.norm()
    assert abs(energy - sim.energy()) <= 1e-12 * abs(sim.energy())


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_combine_is_the_rk4_start(backend, dtype):
    sim = make("zero", backend, dtype=dtype)
    psi = sim.psi
    sim.psi = psi  # no psi(-dt): the next step is the RK4 start
    assert not sim._solver.has_prev()
    sim.step(1)
    h, dt = sim._handle(BLOCKS[2]), sim.dt
    h.set_potential(sim.V)
    c = h.combine
    acc, b1 = c(psi, psi, 0.0, -dt / 6)
    ya, _ = c(psi, psi, 0.0, -dt / 2)
    acc, _ = c(acc, ya, 0.0, -dt / 3)
    yb, _ = c(psi, ya, 0.0, -dt / 2)
    acc, _ = c(acc, yb, 0.0, -dt / 3)
    ya, _ = c(psi, yb, 0.0, -dt)
    acc, b7 = c(acc, ya, 0.0, -dt / 6)
    assert not (b1 or b7)
    np.testing.assert_array_equal(acc, sim.psi)
    np.testing.assert_array_equal(psi, sim.psi_prev)
    # a non-finite result is reported, not raised
    big = psi.copy()
    big[5] = 1e30 if dtype == np.complex64 else 1e200
    _, bad = c(big, big, 0.0, -dt)
    assert bad


def test_layers_and_arguments(backend):
    sim = make("zero", backend)
    h = sim._solver
    plane = sim.size // BLOCKS[2]
    two = h.get_layers(2, 2)
    np.testing.assert_array_equal(two, sim.psi[2 * plane:4 * plane])
    h.set_layers(2, 2, two * 2)
    np.testing.assert_array_equal(sim.psi[2 * plane:4 * plane], two * 2)
    for first, count in ((-1, 1), (6, 2), (0, 0), (7, 1)):
        with pytest.raises(ValueError, match="layers"):
            h.get_layers(first, count)
        with pytest.raises(ValueError, match="layers"):
            h.set_slab(0, first, count)
    bad = two.copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match="not finite"):
        h.set_layers(2, 2, bad)
    with pytest.raises(ValueError, match="layers"):
        h.set_layers(2, 1, two)
    with pytest.raises(TypeError, match="dtype"):
        h.set_layers(2, 2, two.astype(np.complex64))
    with pytest.raises(TypeError, match="capsule"):
        h.set_comm(object())
    h.set_comm(None)
    with pytest.raises(ValueError, match="not finite"):
        h.combine(sim.psi, sim.psi, np.nan, 0.0)


def _backend_buffer(backend, nbytes):
    """A buffer of the backend's memory: (address, free)."""
    if backend == "cuda":
        from nlsepy import _cuda
        addr = _cuda.device_alloc(nbytes)
        return addr, lambda: _cuda.device_free(addr)
    buf = np.zeros(nbytes, np.uint8)
    return buf.ctypes.data, lambda: buf  # the array lives as long as the closure


def test_layers_to_and_from_an_address(backend):
    """layers_to / layers_from: the layers to and from the backend's memory
    (the device-to-device halo exchange), the same bytes as get_layers."""
    sim = make("zero", backend)
    h = sim._solver
    plane = sim.size // BLOCKS[2]
    psi = sim.psi
    addr, free = _backend_buffer(backend, 2 * plane * psi.itemsize)
    try:
        h.layers_to(2, 2, addr)
        h.layers_from(4, 2, addr)
        want = psi.copy()
        want[4 * plane:6 * plane] = psi[2 * plane:4 * plane]
        np.testing.assert_array_equal(sim.psi, want)
        h.layers_from(0, 1, addr)  # one layer of the two
        np.testing.assert_array_equal(h.get_layers(0, 1), psi[2 * plane:3 * plane])
        for first, count in ((-1, 1), (6, 2), (0, 0), (7, 1)):
            with pytest.raises(ValueError, match="layers"):
                h.layers_to(first, count, addr)
            with pytest.raises(ValueError, match="layers"):
                h.layers_from(first, count, addr)
        with pytest.raises(ValueError, match="NULL"):
            h.layers_to(0, 1, 0)
        with pytest.raises(ValueError, match="NULL"):
            h.layers_from(0, 1, 0)
        with pytest.raises(TypeError):
            h.layers_to(0, 1, "address")
    finally:
        free()
    if backend == "cpu":  # the values are not checked (a neighbour's finite step)
        nan = np.full(plane, np.nan, psi.dtype)
        h.layers_from(1, 1, nan.ctypes.data)
        assert np.isnan(h.get_layers(1, 1)).all()


class _Comm:
    """Records the barriers of an IpcHalo swap among its copies."""

    def __init__(self, log):
        self.log = log

    def Barrier(self):
        self.log.append("barrier")


def test_ipc_swap_barriers():
    """The exchange protocol of nlsepy.common.dist.IpcHalo: copies out, a barrier,
    copies in, then the closing barrier; without it (settle=False) the next
    swap opens with the barrier unless a collective settled it."""
    from nlsepy.common import dist as _dist
    log = []
    halo = _dist.IpcHalo(_Comm(log), None, 8, True, True)
    halo.mail, halo.peers = [10, 11], {"lower": 20, "upper": 21}

    def put(side, addr):
        log.append(("put", side, addr))

    def get(which, addr):
        log.append(("get", which, addr))

    copies = [("put", 0, 10), ("put", 1, 11), "barrier", ("get", "lower", 20),
              ("get", "upper", 21)]
    halo.swap(put, get)
    assert log == copies + ["barrier"] and not halo.unsettled
    del log[:]
    halo.swap(put, get, settle=False)
    assert log == copies and halo.unsettled
    del log[:]
    halo.swap(put, get, settle=False)  # nothing settled it: the barrier first
    assert log == ["barrier"] + copies
    del log[:]
    halo.settled()  # e.g. the next step's agreed check
    halo.swap(put, get)
    assert log == copies + ["barrier"] and not halo.unsettled


def test_comm_needs_a_communicator():
    with pytest.raises((TypeError, ImportError), match="comm"):
        nl.DecGPE("bcc", blocks=2, backend="cpu", comm=object())


# ------------------------------------------------- the reduction table
_CAPSULE = b"nlsepy.nlse_comm"


class _Table:
    """A reduction table of one process in the layout of nlsepy/common.h's
    nlse_comm, in the capsule nlsepy._mpi makes: the sums and maxima of one
    process are the values themselves, unless `max_to` / `sum_to` replace
    them (what another process's blow-up looks like)."""

    def __init__(self, max_to=None, sum_to=None):
        import ctypes
        fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_double),
                              ctypes.c_size_t)
        self.calls = []

        def op(kind, to):
            def f(ctx, x, n):
                self.calls.append((kind, n))
                if to is not None:
                    x[0] = to
                return 0
            return fn(f)

        class Struct(ctypes.Structure):
            _fields_ = [("ctx", ctypes.c_void_p), ("sum", fn), ("max", fn)]

        self._ops = (op("sum", sum_to), op("max", max_to))
        self.table = Struct(None, *self._ops)
        new = ctypes.pythonapi.PyCapsule_New
        new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p,
                                                        ctypes.c_void_p]
        self.capsule = new(ctypes.addressof(self.table), _CAPSULE, None)


def test_with_a_reduction_table(backend):
    """With a table the steps agree their blow-up check and the imaginary-time
    norm through it: on one process the same numbers as without."""
    ref, sim = make("periodic", backend), make("periodic", backend)
    t = _Table()
    sim._solver.set_comm(t.capsule)
    ref.step(5)
    sim.step(5)
    np.testing.assert_array_equal(sim.psi, ref.psi)
    assert t.calls == [("max", 1)] * 5
    ref.imaginary_time(5)
    sim.imaginary_time(5)
    assert np.max(np.abs(sim.psi - ref.psi)) <= 1e-12 * np.max(np.abs(ref.psi))
    assert t.calls.count(("sum", 1)) == 5
    # the leapfrog is not started by RK4 with a table (the halos could not be refreshed)
    with pytest.raises(ValueError, match="RK4"):
        sim._solver.step(1)


def test_a_blow_up_elsewhere_is_a_blow_up_here(backend):
    sim = make("zero", backend)
    before = sim.psi
    t = _Table(max_to=1.0, sum_to=float("nan"))
    sim._solver.set_comm(t.capsule)
    done, blew = sim._solver.step(3)
    assert (done, blew) == (0, True) and not sim._solver.has_prev()
    np.testing.assert_array_equal(sim.psi, before)
    done, blew = sim._solver.imaginary(3, 1.0)
    assert (done, blew) == (0, True)
    np.testing.assert_array_equal(sim.psi, before)
    sim._solver.set_comm(None)
    assert sim._solver.imaginary(3, 1.0) == (3, False)
