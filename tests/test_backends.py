"""Backends: what this build offers, selection by name and by NLSEPY_BACKEND,
and the OpenMP threads of the CPU backend.

The CPU/GPU parity of each model is tested in its own folder,
``tests/<stem>/test_<stem>_cuda.py`` (marked cuda, skipped without a GPU)."""

import numpy as np
import pytest

import nlsepy as nl


def test_backends_lists_cpu():
    b = nl.backends()
    assert b[0] == "cpu" and set(b) <= {"cpu", "cuda"}


def test_auto_resolves_to_an_available_backend():
    psi0, h, p = nl.examples.dark_soliton(length=10.0, h=0.1)
    sim = nl.NLSE(psi0, h, backend="auto")
    assert sim.backend in nl.backends()
    assert nl.NLSE(psi0, h, backend="cpu").backend == "cpu"


def test_cuda_unavailable_is_a_backend_error():
    if "cuda" in nl.backends():
        pytest.skip("this machine has the CUDA backend (tests/<stem>/test_<stem>_cuda.py)")
    psi0, h, p = nl.examples.dark_soliton(length=10.0, h=0.1)
    with pytest.raises(nl.BackendError, match="backend='cuda' is not available"):
        nl.NLSE(psi0, h, backend="cuda")


def test_build_info():
    info = nl.build_info()
    for key in ("openmp", "fftw", "cuda", "cuda_archs", "version"):
        assert key in info
    assert info["version"] == nl.__version__
    if info["cuda"]:
        assert "80" in info["cuda_archs"] and "90" in info["cuda_archs"]
        assert "native" not in info["cuda_archs"]


def test_threads_do_not_change_results():
    """OpenMP splits lines between threads; results must not depend on it.
    The CPU backend explicitly: "auto" is the GPU where there is one, and
    the thread count would then change nothing."""
    psi0, h, p = nl.examples.dark_vortex(length=40.0, h=0.25)  # 161^2 > parallel threshold
    before = nl.get_num_threads()
    out = []
    try:
        for n in (1, 2):
            nl.set_num_threads(n)
            assert nl.get_num_threads() == (n if nl.build_info()["openmp"] else 1)
            sim = nl.NLSE(psi0, h, a=p["a"], s=p["s"], bc="msd", backend="cpu")
            sim.step(20)
            out.append(sim.psi)
    finally:
        nl.set_num_threads(before)
    assert np.array_equal(out[0], out[1])


def test_observables_do_not_depend_on_threads():
    """The CPU norm and energy of NLSE (periodic and closed ends) and DecGPE
    are sums in a fixed order (nlse_sum_parts): the same bits on 1 to 4
    threads, and on repeated calls (an OpenMP reduction adds the threads'
    sums in the order they finish)."""
    psi0, h, p = nl.examples.dark_vortex(length=40.0, h=0.25)
    before = nl.get_num_threads()
    seen = {}
    try:
        for n in (1, 2, 3, 4, 4):
            nl.set_num_threads(n)
            vals = []
            for bc in ("periodic", "msd"):
                sim = nl.NLSE(psi0, h, a=p["a"], s=p["s"], bc=bc, backend="cpu")
                vals += [sim.norm(), sim.energy()]
            dec = nl.DecGPE("bcc", blocks=24, spacing=0.5, g=50.0, trap=1.0, backend="cpu",
                            psi0=lambda r: np.exp(-0.5 * (r ** 2).sum(axis=-1)) * (1 + 0.3j * r[..., 0]))
            vals += [dec.norm(), dec.energy()]
            seen.setdefault(tuple(vals), []).append(n)
    finally:
        nl.set_num_threads(before)
    assert len(seen) == 1, f"observables differ between thread counts: {seen}"


def test_nlsepy_backend_variable_steers_auto(monkeypatch):
    psi0, h, p = nl.examples.dark_soliton(length=10.0, h=0.1)
    monkeypatch.setenv("NLSEPY_BACKEND", "cpu")
    assert nl.NLSE(psi0, h, backend="auto").backend == "cpu"
    assert nl.DipolarGPE((16,), 0.2, 0.01, trap=(1, 2, 2), geometry="1d-x").backend == "cpu"
    monkeypatch.setenv("NLSEPY_BACKEND", "gpu")
    with pytest.raises(ValueError, match="NLSEPY_BACKEND must be 'cpu', 'cuda' or 'auto', got 'gpu'"):
        nl.NLSE(psi0, h, backend="auto")
    monkeypatch.setenv("NLSEPY_BACKEND", "cuda")
    if "cuda" in nl.backends("DipolarGPE"):
        assert nl.DipolarGPE((16,), 0.2, 0.01, trap=(1, 2, 2), geometry="1d-x").backend == "cuda"
    else:
        with pytest.raises(nl.BackendError, match="not available"):
            nl.DipolarGPE((16,), 0.2, 0.01, trap=(1, 2, 2), geometry="1d-x")
