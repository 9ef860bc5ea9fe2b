"""nl.DecGPE on the CUDA backend against the CPU backend: the same numbers
(double to 1e-12 after 1000 leapfrog steps on every grid), chunking bit for
bit, imaginary time, observables, and blow-up keeping the last good state."""

import os

import numpy as np
import pytest

pytest.importorskip("scipy")

import nlsepy as nl  # noqa: E402

pytestmark = pytest.mark.cuda


def vortex_like(sim, kappa=2):
    p = sim.positions
    psi = np.exp(-(p ** 2).sum(axis=1) / 4) * (p[:, 0] + 1j * p[:, 1]) ** kappa
    return psi / np.sqrt(np.sum(np.abs(psi) ** 2 * sim.volumes))


def pair(grid, dtype=np.complex128, bc="zero", V=None, **kw):
    blocks = kw.pop("blocks", (5, 4, 6) if grid not in ("c15", "z") else (3, 2, 3))
    spacing = kw.pop("spacing", 8.0 / max(blocks))  # once: both solvers take it
    sims = [nl.DecGPE(grid, blocks=blocks, spacing=spacing,
                      g=kw.get("g", 100.0), trap=(1.0, 1.1, 0.9), bc=bc, V=V, dtype=dtype,
                      backend=b) for b in ("cpu", "cuda")]
    psi = vortex_like(sims[0])
    for s in sims:
        s.psi = psi
    return sims


def form(sim):
    """The kernel form of the last launch, less its details in brackets."""
    return sim.last_kernel().split(" (")[0]


#: the CUDA kernel form each grid takes by default (cuda/dec/dec.cu)
DEFAULT_FORM = {"cubic": "z marching", "fcc": "z marching", "bcc": "z marching",
                "a15": "rows, units by warps, lean, streamed",
                "c15": "rows, units by thread blocks", "z": "rows, units by thread blocks"}
# complex64, real time: A15, C15 and Z take their units by warps, two cells
# a lane, streamed on C15 and Z (bench/RESULTS.md)
PAIRS = "rows, units by warps, two cells a lane"
DEFAULT_FORM_64 = dict(DEFAULT_FORM, a15=PAIRS, c15=PAIRS + ", streamed", z=PAIRS + ", streamed")


@pytest.mark.parametrize("grid", nl.dec.GRIDS)
@pytest.mark.parametrize("bc", ["zero", "periodic"])
def test_cpu_cuda_agree_double(grid, bc):
    V = (lambda x, y, z: 0.2 * np.sin(x + 2 * y) * np.cos(z)) if bc == "periodic" else None
    cpu, gpu = pair(grid, bc=bc, V=V)
    np.testing.assert_allclose(gpu.apply(cpu.psi), cpu.apply(cpu.psi), rtol=0,
                               atol=1e-13 * np.abs(cpu.apply(cpu.psi)).max())
    cpu.step(1000)
    gpu.step(1000)
    if not os.environ.get("NLSEPY_DEC_KERNEL"):
        assert form(gpu) == DEFAULT_FORM[grid]
    assert cpu.last_kernel() == "rows"
    a, b = cpu.psi, gpu.psi
    assert np.max(np.abs(a - b)) <= 1e-12 * np.max(np.abs(a))
    nc, ec = cpu.norm(), cpu.energy()
    ng, eg = gpu.norm(), gpu.energy()
    assert ng == pytest.approx(nc, rel=1e-12) and eg == pytest.approx(ec, rel=1e-12)


def test_solvers_of_two_grids_in_turns():
    """An FCC solver made before a cubic one still steps right after it:
    the two share one instance of the marching kernel, and the FCC one
    needs more than 48 KB of its shared memory (a later solver must not
    lower the instance's limit)."""
    cpu, gpu = pair("fcc", blocks=(8, 8, 6), spacing=1.0)
    other = nl.DecGPE("cubic", blocks=(8, 8, 6), spacing=1.0, g=100.0, backend="cuda")
    other.psi = vortex_like(other)
    other.step(20)
    cpu.step(50)
    gpu.step(50)
    if not os.environ.get("NLSEPY_DEC_KERNEL"):
        assert form(gpu) == form(other) == "z marching"
    a = cpu.psi
    assert np.max(np.abs(gpu.psi - a)) <= 1e-12 * np.max(np.abs(a))


@pytest.mark.parametrize("grid", nl.dec.GRIDS)
def test_cpu_cuda_agree_single(grid):
    cpu, gpu = pair(grid, dtype=np.complex64)
    cpu.step(300)
    gpu.step(300)
    if not os.environ.get("NLSEPY_DEC_KERNEL"):
        assert form(gpu) == DEFAULT_FORM_64[grid]
    a, b = cpu.psi.astype(complex), gpu.psi.astype(complex)
    assert np.max(np.abs(a - b)) <= 1e-5 * np.max(np.abs(a))


def test_chunking_is_bitwise():
    _, one = pair("fcc")
    _, many = pair("fcc")
    one.step(300)
    for _ in range(3):
        many.step(100)
    np.testing.assert_array_equal(one.psi, many.psi)


def test_imaginary_time_agrees():
    cpu, gpu = pair("bcc", g=50.0)
    cpu.imaginary_time(300)
    gpu.imaginary_time(300)
    assert np.max(np.abs(cpu.psi - gpu.psi)) <= 1e-11 * np.max(np.abs(cpu.psi))
    assert gpu.norm() == pytest.approx(1.0, abs=1e-12)
    assert gpu.energy() == pytest.approx(cpu.energy(), rel=1e-12)


def test_imaginary_time_same_bits_every_run():
    """Each thread block's part of the norm comes from a fixed set of work
    units, so two runs give the same bits (on a grid of many units)."""
    runs = []
    for _ in range(2):
        _, gpu = pair("bcc", g=50.0, blocks=(24, 20, 28), spacing=0.4)
        gpu.imaginary_time(40)
        runs.append(gpu.psi)
    np.testing.assert_array_equal(runs[0], runs[1])


def test_blowup_keeps_last_good_state():
    sim = nl.DecGPE("bcc", blocks=4, spacing=1.0, g=10.0, trap=1.0, backend="cuda",
                    force=True, dt=1.0)
    sim.psi = vortex_like(sim)
    with pytest.raises(nl.BlowUpError) as e:
        sim.step(5000)
    t_good, psi_good = e.value.last_good
    assert np.all(np.isfinite(psi_good)) and np.all(np.isfinite(sim.psi))
    assert sim.t == t_good and e.value.step >= 2
    np.testing.assert_array_equal(sim.psi, psi_good)


def test_y_tiles_with_remainder(monkeypatch):
    """The sweep by y tiles (here 2 rows, 5 rows in all: a short last tile)
    visits every cell once: the same numbers as the CPU."""
    monkeypatch.setenv("NLSEPY_DEC_TILE_ROWS", "2")
    cpu, gpu = pair("bcc", blocks=(4, 5, 3))
    np.testing.assert_array_equal(gpu.apply(cpu.psi) != 0, cpu.apply(cpu.psi) != 0)
    cpu.step(100)
    gpu.step(100)
    assert np.max(np.abs(cpu.psi - gpu.psi)) <= 1e-12 * np.max(np.abs(cpu.psi))
    assert gpu.energy() == pytest.approx(cpu.energy(), rel=1e-12)


@pytest.mark.parametrize("grid", ["cubic", "fcc", "bcc"])
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_march_rings_and_plain_form_same_bits(grid, dtype, monkeypatch):
    """The z-marching kernel with its ring of 4, 5 and 6 plane slots (planes
    copied one, two and three ahead) and its plain form (18) step to the
    same bits, in real and imaginary time."""
    monkeypatch.delenv("NLSEPY_DEC_KERNEL", raising=False)
    monkeypatch.delenv("NLSEPY_DEC_MARCH_RING", raising=False)
    runs = {}
    for key, value in (("NLSEPY_DEC_MARCH_RING", "4"), ("NLSEPY_DEC_MARCH_RING", "5"),
                       ("NLSEPY_DEC_MARCH_RING", "6"), ("NLSEPY_DEC_KERNEL", "18")):
        monkeypatch.setenv(key, value)
        _, gpu = pair(grid, dtype=dtype, blocks=(7, 5, 23))
        gpu.step(40)
        assert form(gpu) == "z marching"
        if key == "NLSEPY_DEC_MARCH_RING":
            assert f"ring of {value} planes" in gpu.last_kernel()
        gpu.imaginary_time(5)
        runs[f"{key}={value}"] = gpu.psi
        monkeypatch.delenv(key)
    ref = runs.pop("NLSEPY_DEC_MARCH_RING=4")
    assert np.all(np.isfinite(ref)) and np.max(np.abs(ref)) > 0
    for name, psi in runs.items():
        np.testing.assert_array_equal(psi, ref, err_msg=name)


@pytest.mark.parametrize("grid", ["a15", "c15", "z"])
@pytest.mark.parametrize("bc", ["zero", "periodic"])
def test_two_cells_a_lane_same_bits_as_lean_rows(grid, bc, monkeypatch):
    """The form with two cells a lane (streamed at 48 and 64 registers, and
    unstreamed) steps to the bits of the lean rows (one cell a lane), on a
    grid with interior blocks and a last unit of a row shorter than the
    others; with the potential of an array on the periodic grid.  Its
    imaginary-time steps go to the lean rows."""
    V = (lambda x, y, z: 0.2 * np.sin(x + 2 * y) * np.cos(z)) if bc == "periodic" else None
    runs = {}
    for k in ("23", "27", "28", "29"):
        monkeypatch.setenv("NLSEPY_DEC_KERNEL", k)
        _, gpu = pair(grid, dtype=np.complex64, bc=bc, V=V, blocks=(5, 4, 4), spacing=1.5)
        gpu.step(30)
        name = "rows, units by warps, lean" if k == "23" else PAIRS
        assert gpu.last_kernel().startswith(name), gpu.last_kernel()
        runs[k] = gpu.psi
    monkeypatch.delenv("NLSEPY_DEC_KERNEL")
    ref = runs.pop("23")
    assert np.all(np.isfinite(ref)) and np.max(np.abs(ref)) > 0
    for k, psi in runs.items():
        np.testing.assert_array_equal(psi, ref, err_msg=f"NLSEPY_DEC_KERNEL={k}")
    _, gpu = pair(grid, dtype=np.complex64, bc=bc, V=V, blocks=(5, 4, 4), spacing=1.5)
    gpu.imaginary_time(3)
    assert gpu.last_kernel().startswith("rows, units by warps, lean"), gpu.last_kernel()


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("bc", ["zero", "periodic"])
def test_march_several_tiles_agrees_with_cpu(dtype, bc, monkeypatch):
    """The marching kernel in its default order on a grid of several tiles
    in x and y and several chunks of layers steps to the CPU's numbers."""
    for key in ("NLSEPY_DEC_KERNEL", "NLSEPY_DEC_MARCH_BAND", "NLSEPY_DEC_MARCH_CHUNKS"):
        monkeypatch.delenv(key, raising=False)
    V = (lambda x, y, z: 0.2 * np.sin(x + 2 * y) * np.cos(z)) if bc == "periodic" else None
    cpu, gpu = pair("bcc", dtype=dtype, bc=bc, V=V, blocks=(40, 17, 21), spacing=0.3)
    cpu.step(20)
    gpu.step(20)
    assert form(gpu) == "z marching"
    tx, ty = map(int, gpu.last_kernel().split("tiles ")[1].split(",")[0].split("x"))
    assert -(-40 // tx) > 2 and -(-17 // ty) > 1, gpu.last_kernel()
    a, b = cpu.psi.astype(complex), gpu.psi.astype(complex)
    tol = 1e-12 if dtype == np.complex128 else 1e-5
    assert np.max(np.abs(a - b)) <= tol * np.max(np.abs(a))


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_march_bands_and_chunks_same_bits(dtype, monkeypatch):
    """The marching kernel's tiles in bands of 2 and 1 tile columns (the
    last band of 2 narrower) and chunks of the layers set by hand step to
    the bits of the row order, and so to the CPU's numbers."""
    monkeypatch.delenv("NLSEPY_DEC_KERNEL", raising=False)
    runs = {}
    for band, chunks, layers in ((None, None, None), ("2", "3", 7), ("1", "7", 3)):
        for key, value in (("NLSEPY_DEC_MARCH_BAND", band), ("NLSEPY_DEC_MARCH_CHUNKS", chunks)):
            if value is None:
                monkeypatch.delenv(key, raising=False)
            else:
                monkeypatch.setenv(key, value)
        cpu, gpu = pair("bcc", dtype=dtype, blocks=(40, 17, 21), spacing=0.3)
        gpu.step(20)
        assert form(gpu) == "z marching"
        if band is None:
            assert "bands" not in gpu.last_kernel()
        else:
            assert f"bands of {band} tile column" in gpu.last_kernel()
            assert f"chunks of {layers} layers" in gpu.last_kernel()
        runs[band] = gpu.psi
    ref = runs.pop(None)
    for band, psi in runs.items():
        np.testing.assert_array_equal(psi, ref, err_msg=f"bands of {band}")
    cpu.step(20)
    a = cpu.psi.astype(complex)
    tol = 1e-12 if dtype == np.complex128 else 1e-5
    assert np.max(np.abs(a - ref.astype(complex))) <= tol * np.max(np.abs(a))
