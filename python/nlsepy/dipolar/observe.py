"""What a ``DipolarGPE`` says about its state: the grid's coordinates,
observables, densities, phases, potentials, the figures, and what its run
files and frames hold.

:class:`Observables` holds these methods of :class:`nlsepy.DipolarGPE`
(a base class of it); they read the solver's handle, single-process or
distributed alike (the distributed handle reduces over the ranks).
"""

from __future__ import annotations

import math
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

from ..common import runner
from ..common.checks import count as _count
from ..common.checks import real as _real
from ..common.hdf5 import RunHeader
from . import plot as _plot
from .parameters import MODEL, MODES, energy_parts

__all__ = ["Observables"]


class Observables:
    """The grid, observables, outputs and run-file contents of :class:`nlsepy.DipolarGPE`."""

    @property
    def ndim(self) -> int:
        """Number of solver axes."""
        return len(self._shape)

    @property
    def coords(self) -> Tuple[np.ndarray, ...]:
        """Grid coordinates per solver axis, ``x_i = (i - n/2) h`` (new arrays)."""
        return tuple((np.arange(n) - n // 2) * h for n, h in zip(self._shape, self._spacing))

    def observables(self) -> Dict[str, Any]:
        """Norm, chemical potential, energy, sizes and central density (section 2.4).

        Integrals use the composite Simpson rule and derivatives the
        five-point formula, as DBEC-GP; ``mu`` and ``energy`` are in units of
        the reference frequency (divided by :attr:`option`), the quantities
        DBEC-GP prints.  In 2D and 1D they are those of the effective
        equation (without the transverse zero-point energy).  Distributed:
        of the whole grid, the same on every rank (collective).

        Returns
        -------
        dict
            ``norm`` (Simpson), ``norm_sum`` (``sum |psi|^2 dV``, what the
            Crank-Nicolson steps conserve exactly), ``mu``, ``energy``,
            ``x2`` (<x_a^2> per solver axis), ``rms`` (square roots),
            ``r_rms``, ``psi0sq`` (``|psi|^2`` at the grid centre), ``t``, and
            ``mu_dbec``, ``energy_dbec``: the values DBEC-GP's real-time
            programs print, whose kinetic term is that of ``|psi|`` (it
            leaves out the flow energy ``int |psi|^2 |grad phase|^2``; equal
            to ``mu``, ``energy`` for a real state).  With :attr:`omega`
            nonzero, ``mu`` and ``energy`` (and the DBEC-GP values) are those
            of the rotating frame, ``- omega lz`` included, as BEC-GP-ROT-OMP
            prints them, and ``lz`` is <L_z> = int psi* L_z psi (per atom:
            the state's norm is 1 after any step; 0 without an x-y plane).

            The parts of the energy, in the same units: ``e_kin`` (the
            kinetic energy, flow included), ``e_trap`` (``int V |psi|^2``:
            trap, :attr:`V`, obstacle), ``e_contact`` (``(g/2) int
            |psi|^4``), ``e_dd`` (``(gdd/2) int Phi_dd |psi|^2``), ``e_qf``
            (``(2/5) gqf int |psi|^5``, the Lee-Huang-Yang energy) and
            ``e_rot`` (``-omega lz``, 0 without rotation): ``energy`` is
            their sum and ``mu`` is ``e_kin + e_trap + 2 e_contact + 2 e_dd
            + (5/2) e_qf + e_rot``, both to rounding (each a Simpson
            integral of the equation solved: the reduced one in 2D and 1D).
        """
        o = self._solver.observe(self.t)
        x2 = tuple(o["x2"][: self.ndim])
        flow = o["kinetic"] - o["kinetic_modulus"]
        return {"norm": o["norm"], "norm_sum": o["norm_sum"], "mu": o["mu"] / self.option,
                "energy": o["energy"] / self.option,
                "mu_dbec": (o["mu"] - flow) / self.option,
                "energy_dbec": (o["energy"] - flow) / self.option, "x2": x2,
                "rms": tuple(math.sqrt(max(v, 0.0)) for v in x2),
                "r_rms": math.sqrt(max(sum(x2), 0.0)), "psi0sq": o["psi0sq"], "lz": o["lz"],
                **energy_parts(o, self.option, self._omega), "t": self.t}

    def density(self, keep: Optional[Sequence[str]] = None) -> np.ndarray:
        """``|psi|^2``, or its integral (Simpson) over the axes not in `keep` (eq. 2.59).

        Parameters
        ----------
        keep : sequence of str or None, optional
            Axis names to keep, e.g. ``("x",)`` for n(x) or ``("x", "y")``
            for n(x, y).  None: the full density (distributed: on this
            rank's slab; an integral is of the whole grid, the same on every
            rank, and collective).

        Returns
        -------
        numpy.ndarray
            float64 array over the kept axes (in grid order).
        """
        if keep is None:
            keep = self.axes
        if isinstance(keep, str):
            keep = (keep,)
        mask = 0
        for a in keep:
            if a not in self.axes:
                raise ValueError(f"keep must name axes of {self.axes}, got {a!r}")
            mask |= 1 << self.axes.index(a)
        if mask == (1 << self.ndim) - 1:
            p = self.psi
            return (p.real.astype(np.float64) ** 2 + p.imag.astype(np.float64) ** 2)
        return self._solver.density(mask)

    def phase_slice(self, axis: str, index: Optional[int] = None) -> np.ndarray:
        """arg(psi) on the slice ``axis = index`` (default: the centre, x = 0).

        Parameters
        ----------
        axis : str
            Axis name held fixed.
        index : int, optional
            Grid index along `axis` (default ``n // 2``).

        Returns
        -------
        numpy.ndarray
            Phase in (-pi, pi] over the other axes (distributed: of the
            whole grid, on every rank; collective).
        """
        if axis not in self.axes:
            raise ValueError(f"axis must be one of {self.axes}, got {axis!r}")
        q = self.axes.index(axis)
        index = self._shape[q] // 2 if index is None else _count("index", index)
        return self._solver.phase_slice(q, index)

    def plot(self, **kwargs: Any) -> Any:
        """Draw the current state: densities integrated along each axis, the
        phase; needs matplotlib (``pip install 'nlsepy[plot]'``).

        Parameters
        ----------
        **kwargs
            ``fig``, ``ax`` (the integrated densities only), ``path``
            (save), ``dpi``, ``title``: see :func:`nlsepy.plot.dipolar`.

        Returns
        -------
        matplotlib.figure.Figure
        """
        return _plot.dipolar(self, **kwargs)

    def dipolar_potential(self) -> np.ndarray:
        """``V_dd * |psi|^2`` (the kernel of the geometry, without gdd) on the grid
        (distributed: this rank's rows; collective)."""
        return self._solver.dipolar_potential()

    def potential(self, t: Optional[float] = None) -> np.ndarray:
        """The total external potential V(r, t) (trap, V, obstacle) in equation units
        (distributed: this rank's rows)."""
        return self._solver.potential(self.t if t is None else _real("t", t))

    def kernel(self) -> np.ndarray:
        """The dipolar kernel on the real-to-complex frequency grid (distributed:
        this rank's rows)."""
        return self._solver.kernel()

    def bytes_per_step(self, mode: str = "real") -> float:
        """Bytes one step moves through memory (the backend's traffic model), for
        `mode` (distributed: through this rank's memory, for its slab)."""
        if mode not in MODES:
            raise ValueError(f"mode must be 'imaginary' or 'real', got {mode!r}")
        lay = self.layout
        points = np.prod(self._shape if lay is None else lay.local_shape)
        return self._solver.bytes_per_point_step(MODES[mode]) * float(points)

    @property
    def memory_bytes(self) -> int:
        """Bytes of memory the solver holds: device memory on ``backend="cuda"``
        (distributed: this rank's solver, its slab and transpose buffers).

        Counts the state, the backup of the state a step call keeps (to
        restore it on a blow-up), the density/FFT buffer, the kernel, the
        FFT plans' work areas, the user potential and the tables.
        """
        return int(self._solver.memory_bytes())

    @property
    def last_step_seconds(self) -> float:
        """Duration of the steps of the last stepping call, in seconds.

        The sum over the blocks (:attr:`block_steps`, one backend call
        each) of :meth:`real_time`, :meth:`imaginary_time` or one frame of
        :meth:`run`, each measured by the backend: CUDA events around the
        steps on the device, the wall clock on the CPU.  Observables,
        frames and callbacks between blocks are not included.
        """
        return self._last_seconds

    # ------------------------------------------------------------ run files
    def _frame_grid(self) -> runner.FrameGrid:
        """Axes, coordinates (this rank's rows when distributed) and units of the frames."""
        coords = tuple(x[s] for x, s in zip(self.coords, self.local_slice))
        return runner.FrameGrid(axes=self.axes, coords=coords, length="oscillator lengths",
                                time=f"units of {self.option}/ω", model=MODEL)

    def _record_header(self) -> Any:
        """What a run file holds besides the frames (distributed: every rank,
        with its rows of V as a slab, nothing gathered)."""
        V = self._V
        slabs = {} if self.comm is None or V is None else {"V": V}
        ob = self.obstacle
        axes, option = self.axes, self.option
        params: Dict[str, Any] = {
            "shape": self.shape, "spacing": self.spacing, "dt": self.dt, "g": self.g,
            "gdd": self.gdd, "trap": self.trap, "cutoff": self.cutoff, "geometry": self.geometry,
            "axes": axes, "option": option, "dtype": self.dtype.name, "dipolar": self._dipolar,
            "fft_effort": self.fft_effort, "g_eff": self.g_eff, "gdd_eff": self.gdd_eff,
            "obstacle": ob is not None}
        if self.gqf != 0:
            params.update(gqf=self.gqf, gqf_eff=self.gqf_eff)
        if not slabs:
            params["V"] = V
        if ob is not None:
            params.update({f"obstacle_{k}": getattr(ob, k) for k in (
                "V0", "sigma", "velocity", "start", "t_move", "t_off", "move_axis",
                "beam_axis")})
        d = self.ndim
        length = "l = sqrt(hbar / (m omega))"
        coords = {a: ((a,), c, length, f"grid position {a}_i = (i - n/2) h_{a}")
                  for a, c in zip(axes, self.coords)}
        scalars = ("norm", "norm_sum", "mu", "energy", "mu_dbec", "energy_dbec") + \
            tuple(f"{a}2" for a in axes) + ("r_rms", "psi0sq", "steps_imaginary", "steps_real")
        energy = "hbar omega"
        var_units = {"t": f"1 / ({option} omega)", "step": "",
                     "psi": f"l^(-{d}/2)", "norm": "", "norm_sum": "", "mu": energy,
                     "energy": energy, "mu_dbec": energy, "energy_dbec": energy,
                     "r_rms": "l", "psi0sq": f"l^(-{d})", "steps_imaginary": "",
                     "steps_real": ""}
        var_units.update({f"{a}2": "l^2" for a in axes})
        long_names = {"t": "real time (the solver's t = option * omega * t_physical)",
                      "step": "imaginary-time steps taken", "psi": "the state psi",
                      "norm": "norm (Simpson)", "norm_sum": "sum |psi|^2 dV",
                      "mu": "chemical potential", "energy": "energy per atom",
                      "mu_dbec": "chemical potential as DBEC-GP's real-time programs print it",
                      "energy_dbec": "energy as DBEC-GP's real-time programs print it",
                      "r_rms": "root mean square radius", "psi0sq": "|psi|^2 at the centre",
                      "steps_imaginary": "imaginary-time steps since the solver was made",
                      "steps_real": "real-time steps since the solver was made"}
        long_names.update({f"{a}2": f"<{a}^2>" for a in axes})
        return RunHeader(
            model=MODEL, parameters=params, backend=self.backend, slabs=slabs,
            units=(f"trap units of the reference frequency omega: lengths in {length}, "
                   f"energies in hbar omega, time t in 1 / (option omega) with option = "
                   f"{option} (nl.units.BEC converts)"),
            coords=coords, dims={"psi": axes, **{k: () for k in scalars}},
            var_units=var_units, long_names=long_names)

    def _record_scalars(self) -> Dict[str, Any]:
        """The series a run file keeps per frame: :meth:`observables` and the
        step counters (collective when distributed)."""
        o = self.observables()
        out = {k: float(o[k]) for k in ("norm", "norm_sum", "mu", "energy", "mu_dbec",
                                        "energy_dbec")}
        out.update({f"{a}2": float(v) for a, v in zip(self.axes, o["x2"])})
        steps = self.steps
        out.update(r_rms=float(o["r_rms"]), psi0sq=float(o["psi0sq"]),
                   steps_imaginary=int(steps["imaginary"]), steps_real=int(steps["real"]))
        return out
