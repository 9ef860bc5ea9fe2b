"""nlsepy: nonlinear Schrödinger-type equations with C99/OpenMP and CUDA kernels.

Models
------
NLSE
    The NLSE by explicit RK4 with CD or 2SHOC finite differences in 1D/2D/3D.
DipolarGPE
    The dipolar Gross-Pitaevskii equation by split-step Crank-Nicolson in 3D
    and the effective 2D/1D forms (the DBEC-GP scheme); ``dbec.run`` reads
    DBEC-GP input files.
CoaxialMagnet
    The axisymmetric Laplace problem of magnet design (scalar potential
    between a cylindrical magnet and an outer cylinder), Jacobi,
    Gauss-Seidel, SOR and red-black SOR.
MaxwellBloch
    Multimode pulses through an inhomogeneously broadened ensemble of
    multi-level atoms: RK4 over the atoms, Adams-Bashforth 2 in z (source
    004); ``nl.mbloch`` holds line shapes, pulses and Franck-Condon factors.

Helpers
-------
models()            the models by stem (``fd``, ``dipolar``, ``magnet``, ``mbloch``):
                    class and backends
backends()          the backends this build and machine offer
set_num_threads(n)  OpenMP threads of the CPU kernels
examples            initial states of the source test problems
plot                plots and animations of every model's results (matplotlib):
                    ``frames.plot()``, ``frames.animate("run.gif")``, ``gpe.plot()``...
units               physical units of the GPE models: ``units.BEC(species, a_s=, n_atoms=,
                    trap_hz=)`` gives DipolarGPE's g, gdd, trap and converts results back
open_run(path)      a run file written by ``run(..., output="run.h5")`` or ``save("x.h5")``
                    (HDF5, h5py): a dict of arrays with attribute access (``run.psi``,
                    ``run.t``, ``run.attrs``), the same with or without xarray;
                    ``run.to_xarray()`` gives an xarray Dataset
vortices(psi, h)    quantised vortices of a 2D or 3D state: point vortices (positions,
                    charges) or vortex lines (polylines, rings closed); every solver
                    has ``sim.vortices()`` and a run's frames ``frames.vortices()``
                    (ids that follow each vortex)
scatter(a, comm)    split a global array into the slabs a model with ``comm=`` holds
                    (MPI, optional: mpi4py and nlsepy's MPI layer)
"""

from __future__ import annotations

import operator

import numpy as np

from . import _build_config, examples, runner
from ._models import Model, models
from .common.backend import backends
from .common.backend import core as _core_module
from .common.backend import cuda as _cuda_module
from .common.dist import Slab, scatter
from .common.errors import BackendError, BlowUpError
from .common.hdf5 import open_run
from .common.version import __version__
from .common.vortices import VortexLine, VortexLines, Vortices, VortexTracks, vortices
from .dec import DecGPE
from .dipolar import DipolarGPE, Obstacle, dbec
from .fd import NLSE, stability_bound
from .magnet import CoaxialMagnet, ConvergenceWarning, MagnetSolution
from . import mbloch, plot, units
from .mbloch import MaxwellBloch, MaxwellBlochResult
from .runner import Frames

__all__ = ["NLSE", "DipolarGPE", "DecGPE", "Obstacle", "CoaxialMagnet", "MagnetSolution",
           "ConvergenceWarning", "MaxwellBloch", "MaxwellBlochResult", "mbloch", "dbec",
           "Frames", "vortices", "Vortices", "VortexLine", "VortexLines", "VortexTracks",
           "open_run", "plot", "units", "Slab", "scatter", "BlowUpError", "BackendError", "backends", "examples", "set_num_threads",
           "get_num_threads", "max_threads", "stability_bound", "build_info", "runner", "models", "Model"]


def set_num_threads(n: int) -> None:
    """Set the number of OpenMP threads of the CPU kernels, process-wide.

    The setting holds for every thread of the process that calls nlsepy
    (not only the calling one).

    Parameters
    ----------
    n : int
        Threads, 1 to :func:`max_threads` (4 per processor of this machine);
        a Python or NumPy integer.  The default follows ``OMP_NUM_THREADS``.

    Raises
    ------
    TypeError
        `n` is not an integer.
    ValueError
        `n` is out of range.
    """
    if isinstance(n, (bool, np.bool_)):
        raise TypeError(f"n must be an integer, got {n!r}")
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"n must be an integer, got {n!r}") from None
    _core = _core_module()
    most = _core.max_threads()
    if not 1 <= n <= most:
        raise ValueError(f"n (num_threads) must be in [1, {most}] (4 per processor of this "
                         f"machine), got {n}")
    _core.set_num_threads(n)
    if _build_config.cuda:
        try:
            _cuda = _cuda_module()
        except ImportError:
            return
        _cuda.set_num_threads(n)


def get_num_threads() -> int:
    """Number of OpenMP threads the CPU kernels use."""
    return _core_module().get_num_threads()


def max_threads() -> int:
    """The most threads :func:`set_num_threads` accepts on this machine."""
    return _core_module().max_threads()


def build_info() -> dict:
    """What this build contains (OpenMP, FFTW3, CUDA and its architectures).

    Returns
    -------
    dict
        Fields of the generated ``nlsepy._build_config`` module.
    """
    return {k: getattr(_build_config, k) for k in dir(_build_config) if not k.startswith("_")}
