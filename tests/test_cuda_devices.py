"""Every CUDA handle keeps the device it was made on (skipped without a GPU).

Each model's CUDA handle records the device that was current when it was
made and makes it current for each call of its C API, then makes the
caller's device current again (``ON_DEVICE``, cuda/common/check.cuh).  For
each model (NLSE, DecGPE, DipolarGPE, Maxwell-Bloch, the magnet solver)
this test makes two handles on device 0 and, on a machine with two GPUs or
more, two on device 1; calls them interleaved, each call made while
another device is current (and the NLSE's frames fetched by its worker
thread, whose current device is the thread's default); and checks that

- every handle's results equal those of one handle run alone on device 0
  (the same arithmetic: 1e-12 relative, NaN where the reference has NaN),
- no call changes the caller's current device, creating or destroying a
  handle included;
- with two GPUs, a thread that never chose a device (its device reads 0,
  device 0 has no context in that process) is left on the handle's device
  by a call rather than given a context on device 0 (in a fresh process).
"""

import contextlib
import gc
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import nlsepy as nl

from _helpers import mbloch_c_problem

pytestmark = pytest.mark.cuda

ROUNDS = 3


def _cuda():
    from nlsepy import _cuda
    return _cuda


def _devices():
    """Device 0, and device 1 where there are two GPUs or more."""
    return [0, 1] if _cuda().device_count() >= 2 else [0]


@contextlib.contextmanager
def _on(device):
    """`device` current inside the block, the previous one after."""
    cuda = _cuda()
    prev = cuda.current_device()
    cuda.set_device(device)
    try:
        yield
    finally:
        cuda.set_device(prev)


def _need(model):
    if "cuda" not in nl.backends(model):
        pytest.skip(f"the CUDA backend lacks {model}")


def _same(got, want, what):
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, what
        assert np.array_equal(np.isnan(g), np.isnan(w)), what
        ok = ~np.isnan(w)
        scale = np.abs(w[ok]).max() if ok.any() else 0.0
        assert np.abs(g[ok] - w[ok]).max(initial=0.0) <= 1e-12 * scale, what


def _interleaved(make, advance, result):
    """One handle alone on device 0 (the reference), then two handles on each
    device advanced round by round in alternating order, each call made with
    another device current; the results after each round against the
    reference's."""
    cuda = _cuda()
    devs = _devices()
    with _on(0):
        ref = make()
        want = []
        for _ in range(ROUNDS):
            advance(ref)
            want.append(result(ref))
        del ref
        gc.collect()
    handles = []
    for d in devs:
        with _on(d):
            handles += [(d, make()), (d, make())]
            assert cuda.current_device() == d
    for k in range(ROUNDS):
        order = handles if k % 2 == 0 else handles[::-1]
        for i, (d, h) in enumerate(order):
            other = devs[(devs.index(d) + 1 + i) % len(devs)]
            with _on(other):
                advance(h)
                assert cuda.current_device() == other
        for i, (d, h) in enumerate(order[::-1]):
            other = devs[(devs.index(d) + i) % len(devs)]
            with _on(other):
                _same(result(h), want[k], f"round {k}, a handle on device {d}")
                assert cuda.current_device() == other
    with _on(devs[-1]):
        handles.clear()
        gc.collect()
        assert cuda.current_device() == devs[-1]


def test_nlse():
    _need("NLSE")
    x = 0.2 * (np.arange(48) - 24)
    X, Y = np.meshgrid(x, 0.25 * (np.arange(40) - 20), indexing="ij")
    psi0 = (1 + 0.4 * np.exp(-(X ** 2 + Y ** 2) / 3)) * np.exp(0.5j * X)
    V = 0.1 * np.cos(X) ** 2

    def make():
        return nl.NLSE(psi0, (0.2, 0.25), V=V, backend="cuda")

    def advance(sim):
        sim.step(25)
        sim.run(sim.t + 10 * sim.dt, frames=2)  # frames: snapshot, fetched by a thread

    def result(sim):
        return [sim.psi, sim.norm(), sim.energy()]

    _interleaved(make, advance, result)


def test_dec():
    _need("DecGPE")

    def psi0(p):
        return np.exp(-(p ** 2).sum(axis=1) / 4) * (p[:, 0] + 1j * p[:, 1] + 0.3)

    def make():
        sim = nl.DecGPE("bcc", blocks=(4, 4, 5), spacing=1.5, g=50.0, trap=(1.0, 1.1, 0.9),
                        psi0=psi0, backend="cuda")
        sim.psi = sim.psi / np.sqrt(sim.norm())
        return sim

    def advance(sim):
        sim.step(20)

    def result(sim):
        return [sim.psi, sim.psi_prev, sim.norm(), sim.energy(), sim.apply(sim.psi)]

    _interleaved(make, advance, result)

    def imaginary(sim):
        sim.imaginary_time(5, norm=1.0)

    _interleaved(make, imaginary, lambda sim: [sim.psi, sim.norm()])


def test_dipolar():
    _need("DipolarGPE")

    def make():
        return nl.DipolarGPE((16, 12, 10), 0.4, 0.005, g=100.0, gdd=30.0, cutoff=4.0,
                             trap=(0.5, 1.0, 1.5), backend="cuda")

    def advance(gpe):
        gpe.imaginary_time(3)
        gpe.real_time(3)

    def result(gpe):
        o = gpe.observables()
        return [gpe.psi, gpe.density(), gpe.dipolar_potential(),
                [o[k] for k in ("norm", "mu", "energy")]]

    _interleaved(make, advance, result)


def _mbloch_problem(n_g=4, n_e=3, modes=(-1, 1), n_atoms=21, n_t=120, h_t=0.02):
    return mbloch_c_problem(n_g, n_e, modes, n_atoms, n_t, h_t, beta=2.0, area=np.pi, delay=1.0,
                            seed=3)


def test_mbloch():
    _need("MaxwellBloch")
    cuda = _cuda()
    kw = _mbloch_problem()

    def make():
        return cuda.Mbloch(**kw, dtype=cuda.COMPLEX128)

    def advance(s):
        s.step(True)
        s.steps(2)

    def result(s):
        return [s.get_fields(), s.get_polarisation(), s.get_populations(), s.z_index(),
                s.norm_deviation()]

    _interleaved(make, advance, result)


def test_magnet():
    _need("CoaxialMagnet")
    cuda = _cuda()
    rbsor = nl.magnet.solver.METHODS["rbsor"]

    def make():
        return cuda.Magnet(0.25, 0.5, 1.0, 1.0, 0.05, 0.05, 1e-3, cuda.COMPLEX128)

    def advance(m):
        m.solve(rbsor, 1.7, 1e-300, 40)  # 40 iterations from where the last stopped

    def result(m):
        return [m.get_phi(), m.rel_residual()]

    _interleaved(make, advance, result)


def test_thread_without_a_context():
    _need("DecGPE")
    if _cuda().device_count() < 2:
        pytest.skip("needs two GPUs")
    code = textwrap.dedent("""
        import threading
        import nlsepy as nl
        from nlsepy import _cuda
        _cuda.set_device(1)
        sim = nl.DecGPE("bcc", blocks=(3, 3, 4), backend="cuda")
        seen = []
        def work():
            seen.append(_cuda.current_device())
            sim.step(3)
            seen.append(_cuda.current_device())
            seen.append(float(sim.norm()))
        t = threading.Thread(target=work)
        t.start()
        t.join()
        assert seen[:2] == [0, 1], seen
        assert _cuda.current_device() == 1
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
