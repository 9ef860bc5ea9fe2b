"""Safety of nl.MaxwellBloch: Ctrl-C during a run, inputs owned by the model,
read-only parameters, memory counted before it is taken."""

import numpy as np
import pytest

import nlsepy as nl
from nlsepy.common import guard as _guard

from _helpers import LATENCY_BOUND, finishes_within, sigint_during

GiB = 1 << 30


def model(backend="cpu", **kw):
    args = dict(h_t=0.1, n_t=64, line=("gaussian", 1.0), n_atoms=8, backend=backend)
    args.update(kw)
    return nl.MaxwellBloch(**args)


def pulse(mb):
    return nl.mbloch.sech_pulse(mb.t, 1.0, 3.0, area=np.pi)


def interrupted_run(mb, after=0.4, n_z=10**7, **kw):
    """Run until a SIGINT from a timer thread stops it; return the seconds
    from the signal to the KeyboardInterrupt and the partial result."""
    delay = sigint_during(lambda: mb.run(pulse(mb), h_z=1e-4, n_z=n_z, **kw), after, "run")
    return delay, mb.partial_result


def check_against_a_full_run(mb, part, save_every):
    """The partial result is what a run to the z reached gives (bar the
    populations at that z, which the interrupted run had not solved)."""
    assert part.interrupted
    j = int(round(part.z[-1] / part.h_z))
    assert 0 < j < 10**7
    full = mb.run(pulse(mb), h_z=1e-4, n_z=j, save_every=save_every)
    assert not full.interrupted
    assert np.array_equal(part.z, full.z)
    assert np.array_equal(part.fields, full.fields)
    assert np.array_equal(part.z_populations, full.z_populations[:-1])
    assert np.array_equal(part.populations, full.populations[:-1])
    assert mb.partial_result is None  # the finished run cleared it


def test_sigint_stops_a_run_within_a_second_and_keeps_what_it_reached():
    mb = model()
    delay, part = interrupted_run(mb, save_every=500)
    assert delay < LATENCY_BOUND
    check_against_a_full_run(mb, part, 500)


def test_sigint_with_full_map_and_a_callback():
    mb = model()
    seen = []
    delay, part = interrupted_run(mb, n_z=10**6, save_every=2000, full_map=True,
                                  callback=lambda st: seen.append(st.j))
    assert delay < LATENCY_BOUND
    j = int(round(part.z[-1] / part.h_z))
    assert part.fields.shape == (j + 1, mb.n_t, 1) and seen[-1] == j
    assert np.array_equal(part.z, np.arange(j + 1) * 1e-4)


@pytest.mark.cuda
@pytest.mark.skipif("cuda" not in nl.backends("MaxwellBloch"),
                    reason="needs the CUDA backend and a CUDA device")
def test_sigint_stops_a_cuda_run():
    mb = model("cuda", n_atoms=64, n_t=256)
    delay, part = interrupted_run(mb, after=0.5, save_every=5000)
    assert delay < LATENCY_BOUND
    check_against_a_full_run(mb, part, 5000)


# ----------------------------------------------------------------- ownership

def test_the_callers_arrays_are_copied():
    F = nl.mbloch.franck_condon(2, 2, 0.6)
    det, w = nl.mbloch.gaussian_line(6, 1.0)
    psi0 = np.zeros((6, 4), complex)
    psi0[:, 0] = 1
    kw = dict(n_g=2, n_e=2, modes=(0, 1), h_t=0.1, n_t=48, backend="cpu")
    mb = nl.MaxwellBloch(F=F, line=(det, w), initial_state=psi0, **kw)
    ref = nl.MaxwellBloch(F=F.copy(), line=(det.copy(), w.copy()), initial_state=psi0.copy(),
                          **kw).run({0: pulse(mb)}, h_z=0.05, n_z=4)
    F[:] = 7.0
    det[:] = 3.0
    w[:] = 0.0
    psi0[:] = 0.5
    assert not np.shares_memory(mb.F, F) and np.all(mb.F != 7.0)
    assert np.all(mb.detunings != 3.0) and np.all(mb.weights > 0)
    assert np.all(mb.initial_state[:, 0] == 1)
    out = mb.run({0: pulse(mb)}, h_z=0.05, n_z=4)
    assert np.array_equal(out.fields, ref.fields)


def test_exposed_arrays_are_copies():
    mb = model()
    for name in ("F", "detunings", "weights", "initial_state"):
        a = getattr(mb, name)
        a[...] = 0
        assert not np.array_equal(getattr(mb, name), a), name


@pytest.mark.parametrize("name", ["n_g", "n_e", "modes", "F", "h_t", "n_t", "kappa_g",
                                  "kappa_e", "delta", "beta", "detunings", "weights",
                                  "initial_state", "dtype", "backend"])
def test_every_parameter_is_read_only(name):
    mb = model()
    with pytest.raises(AttributeError, match=rf"MaxwellBloch.{name} is read-only.*replace"):
        setattr(mb, name, getattr(mb, name))


def test_dtype_is_not_silently_ignored():
    mb = model()
    with pytest.raises(AttributeError, match=r"mb.replace\(dtype=...\)"):
        mb.dtype = np.complex64
    assert mb.dtype is np.complex128
    single = mb.replace(dtype=np.complex64)
    assert single.dtype is np.complex64
    direct = model(dtype=np.complex64)
    a = single.run(pulse(mb), h_z=0.05, n_z=3)
    b = direct.run(pulse(mb), h_z=0.05, n_z=3)
    assert np.array_equal(a.fields, b.fields)


def test_unknown_attributes_are_refused():
    mb = model()
    for name in ("n_atoms", "t", "h_z", "line"):
        with pytest.raises(AttributeError, match="fixed at construction"):
            setattr(mb, name, 1)


def test_replace_keeps_the_rest():
    mb = model(kappa_g=0.2, beta=0.5)
    more = mb.replace(n_atoms=16, line=("lorentzian", 0.5))
    assert more.n_atoms == 16 and more.kappa_g == 0.2 and more.beta == 0.5
    assert np.all(more.initial_state[:, 0] == 1)
    same = mb.replace(h_t=0.1)
    assert np.array_equal(same.detunings, mb.detunings)
    with pytest.raises(TypeError, match="replace"):
        mb.replace(h_z=0.1)


# ----------------------------------------------------------------- memory

def test_a_billion_atoms_are_refused_before_sampling(monkeypatch):
    monkeypatch.setattr(_guard, "host_memory_available", lambda: 8 * GiB)
    with finishes_within(1.0):
        with pytest.raises(MemoryError, match=r"MaxwellBloch with n_atoms = 1000000000 \(n_g "
                                              r"\+ n_e = 2 levels, n_t = 401, N_F = 1\) needs "
                                              r"\d+\.\d GiB.*fewer atoms"):
            nl.MaxwellBloch(n_atoms=10**9, h_t=0.05, n_t=401, backend="cpu")
        with pytest.raises(MemoryError, match=r"n_atoms = 1000000000"):
            det = np.broadcast_to(np.float32(0.5), (10**9,))  # a caller's line, to be copied
            nl.MaxwellBloch(line=(det, det), h_t=0.05, n_t=401, backend="cpu")
        with pytest.raises(MemoryError, match=r"n_t = 10000000000"):
            nl.MaxwellBloch(n_atoms=4, h_t=0.05, n_t=10**10, backend="cpu")


def test_a_full_map_that_does_not_fit_is_refused_at_once(monkeypatch):
    mb = model()
    monkeypatch.setattr(_guard, "host_memory_available", lambda: 8 * GiB)
    with finishes_within(1.0):
        with pytest.raises(MemoryError,
                           match=r"fields kept at 1000000001 z positions \(full_map\)"):
            mb.run(pulse(mb), h_z=1e-3, n_z=10**9, full_map=True)
        with pytest.raises(MemoryError, match=r"populations at 1000000001"):
            mb.run(pulse(mb), h_z=1e-3, n_z=10**9)


def test_saved_positions_are_not_listed(monkeypatch):
    """A long run that keeps few positions takes no memory for the others."""
    mb = model()
    out = mb.run(pulse(mb), h_z=1e-3, n_z=40, save_every=np.array([0.0, 0.013, 0.02]))
    assert np.allclose(out.z, [0.0, 0.013, 0.02])
    out = mb.run(pulse(mb), h_z=1e-3, n_z=40, save_every=15)
    assert np.allclose(out.z, [0.0, 0.015, 0.03, 0.04])
    assert np.allclose(out.z_populations, out.z)
