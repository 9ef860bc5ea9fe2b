"""Command line: ``python -m nlsepy demo [--input FILE.toml] [--out DIR]``.

``demo`` runs a simulation described by a small TOML input (an embedded
default when none is given: the NLSEmagic dark soliton), and writes its
frames (``frames.npz``), a summary (``summary.json`` and ``summary.txt``) and
a plot (``<name>.png``) under the output folder.  ``dbec`` runs a DBEC-GP
input file (:mod:`nlsepy.dipolar.dbec`); ``mbloch`` a Maxwell-Bloch run
file, TOML or JSON or a ``maxwellbloch`` JSON input (:mod:`nlsepy.mbloch.config`).

Both check their input before running (types: an integer is an integer, a
boolean a boolean, a number finite; output names are plain file names kept
inside the output folder), write all of a run's outputs or none (staged
under temporary names, renamed together at the end), and report any failure
as one line ``nlsepy: error: <message>`` on stderr with a non-zero exit
status: 2 for a bad command line or input, 1 for a failed run, 130 for
Ctrl-C.  ``NLSEPY_TRACEBACK=1`` shows the Python traceback instead.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from . import examples
from .common import plot
from .common.backend import core
from .common.errors import BackendError, BlowUpError
from .common.guard import require_memory
from .common.outputs import OutputSet, check_name
from .common.version import __version__
from .dipolar import dbec
from .fd import NLSE
from .mbloch.config import run_config

#: the default input of ``python -m nlsepy demo``
DEFAULT_INPUT = """\
# Co-moving dark soliton of NLSEmagic (Caplan, section 4, eq. 20):
# s = -1, a = 1, c = 0.5, Omega = -1, modulus-squared Dirichlet boundaries.
name = "dark_soliton"

[problem]
example = "dark_soliton"   # a builder of nlsepy.examples
length = 40.0
h = 0.05
c = 0.5
omega = -1.0

[solver]
scheme = "2shoc"
bc = "msd"
dtype = "complex128"

[run]
t_end = 20.0
frames = 50
"""

#: builders of nlsepy.examples a demo may name, and their dimension
_BUILDERS = {"dark_soliton": 1, "bright_soliton": 1, "dark_vortex": 2, "vortex_ring": 3}
#: kinds of the builders' keyword arguments ([problem]); "+" marks "> 0"
_PROBLEM_KEYS = {"length": "float+", "h": "float+", "a": "float+", "s": "float", "c": "float",
                 "omega": "float", "x0": "float", "d": "float+", "m": "int",
                 "periodic": "bool"}
#: kinds of the keys of [solver] (keyword arguments of nl.NLSE) and [run]
_SOLVER_KEYS = {"scheme": "str", "bc": "str", "dt": "float+", "dtype": "str", "force": "bool",
                "backend": "str"}
_RUN_KEYS = {"t_end": "float+", "frames": "int+"}
_DTYPES = ("complex64", "complex128")
#: the most points on one axis of a demo grid
_N_MAX = 2 ** 31 - 1


class UsageError(ValueError):
    """A bad command line (reported as one line, exit status 2)."""


class _Parser(argparse.ArgumentParser):
    """argparse without its usage block: an error is one line."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see {self.prog} --help)")


# ------------------------------------------------------------------- demo
def _parse_toml(text: str, source: str) -> Dict[str, Any]:
    try:
        import tomllib  # Python >= 3.11
    except ImportError:  # pragma: no cover - older Pythons
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError as exc:
            raise ImportError("reading TOML inputs on Python < 3.11 needs tomli: "
                              "pip install tomli") from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{source}: not valid TOML: {exc}") from None


def _show(value: Any) -> str:
    """`value` as TOML writes it (for messages)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a table"
    return repr(value)


def _typed(value: Any, kind: str, what: str) -> Any:
    """`value` checked against `kind` ("int", "float", "bool", "str"; a
    trailing "+" asks for > 0); ValueError naming `what` and the value."""
    base, positive = kind.rstrip("+"), kind.endswith("+")
    if base == "int":
        if type(value) is not int:  # bool is not an integer, 2.0 is not either
            raise ValueError(f"{what} must be an integer, got {_show(value)}")
    elif base == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{what} must be a number, got {_show(value)}")
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f"{what} must be finite, got {_show(value)}")
    elif base == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"{what} must be true or false, got {_show(value)}")
    elif not isinstance(value, str):
        raise ValueError(f"{what} must be a string, got {_show(value)}")
    if positive and value <= 0:
        raise ValueError(f"{what} must be > 0, got {_show(value)}")
    return value


def _section(cfg: Dict[str, Any], name: str, kinds: Dict[str, str], source: str
             ) -> Dict[str, Any]:
    sec = cfg.get(name, {})
    if not isinstance(sec, dict):
        raise ValueError(f"{source}: [{name}] must be a table, got {_show(sec)}")
    unknown = sorted(set(sec) - set(kinds))
    if unknown:
        raise ValueError(f"{source}: unknown key(s) in [{name}]: {unknown}; known keys: "
                         f"{sorted(kinds)}")
    return {k: _typed(v, kinds[k], f"{source}: [{name}] {k}") for k, v in sec.items()}


@dataclass
class _Demo:
    """A checked demo input."""

    name: str
    example: str
    problem: Dict[str, Any]
    solver: Dict[str, Any]
    t_end: float
    frames: int
    dtype: np.dtype
    shape: Tuple[int, ...]


def _read_demo(text: str, source: str = "<input>") -> _Demo:
    """Check a demo input: keys, types, ranges and the grid it asks for.

    Raises
    ------
    ValueError
        Naming the input, the table, the key and the value.
    """
    cfg = _parse_toml(text, source)
    unknown = sorted(set(cfg) - {"name", "problem", "solver", "run"})
    if unknown:
        raise ValueError(f"{source}: unknown key(s) or table(s): {unknown}; an input has "
                         f"name, [problem], [solver] and [run]")
    name = _typed(cfg.get("name", "nlse"), "str", f"{source}: name")
    check_name(name, f"{source}: name")
    problem = cfg.get("problem", {})
    if not isinstance(problem, dict):
        raise ValueError(f"{source}: [problem] must be a table, got {_show(problem)}")
    problem = dict(problem)
    example = problem.pop("example", None)
    if not isinstance(example, str) or example not in _BUILDERS:
        raise ValueError(f"{source}: [problem] example must be one of {tuple(_BUILDERS)}, "
                         f"got {_show(example)}")
    builder = inspect.signature(getattr(examples, example)).parameters
    kinds = {k: v for k, v in _PROBLEM_KEYS.items() if k in builder}
    problem = _section({"problem": problem}, "problem", kinds, source)
    solver = _section(cfg, "solver", _SOLVER_KEYS, source)
    run = _section(cfg, "run", _RUN_KEYS, source)
    for key in ("t_end", "frames"):
        if key not in run:
            raise ValueError(f"{source}: [run] needs the key {key!r}")
    dtype = solver.get("dtype", "complex128")
    if dtype not in _DTYPES:
        raise ValueError(f"{source}: [solver] dtype must be one of {_DTYPES}, got {_show(dtype)}")
    solver["dtype"] = np.dtype(dtype)
    # the grid of nlsepy.examples.grid, checked before it is made
    length = problem.get("length", builder["length"].default)
    h = problem.get("h", builder["h"].default)
    ratio = length / h
    if not math.isfinite(ratio) or ratio > _N_MAX:
        raise ValueError(f"{source}: [problem] length / h = {length!r} / {h!r} gives more than "
                         f"{_N_MAX} points per axis")
    periodic = example == "bright_soliton" and problem.get("periodic", True)
    n = int(round(ratio)) + (0 if periodic else 1)
    return _Demo(name=name, example=example, problem=problem, solver=solver,
                 t_end=run["t_end"], frames=run["frames"], dtype=solver["dtype"],
                 shape=(n,) * _BUILDERS[example])


def _demo_bytes(demo: _Demo) -> int:
    """Host bytes a demo run takes: the builder's work arrays, the solver's
    state and stages, the frames (kept, stacked and compressed)."""
    points = math.prod(demo.shape)
    item = demo.dtype.itemsize
    return points * (16 * 8 + item * (8 + 3 * (demo.frames + 1)))


def run_input(text: str, out: str, source: str = "<input>",
              announce: Optional[Callable[[str], None]] = None) -> Dict[str, Any]:
    """Run the simulation described by TOML `text` and write results to `out`.

    The input is checked whole before anything runs; the four outputs are
    staged and renamed into `out` together at the end, so a failed or
    interrupted run leaves nothing (not even a new `out` folder).

    Parameters
    ----------
    text : str
        TOML input: ``name`` (a plain file name, used for the plot),
        ``[problem]`` (``example`` plus the builder's keyword arguments),
        ``[solver]`` (``scheme``, ``bc``, ``dt``, ``dtype``, ``force``,
        ``backend`` of :class:`nlsepy.NLSE`) and ``[run]`` (``t_end``,
        ``frames``).  Integer keys take integers, booleans ``true`` or
        ``false``, numbers finite values.
    out : str
        Output folder (created if missing).
    source : str, optional
        Name of the input for error messages.
    announce : callable, optional
        Called with a line saying what runs, before it runs.

    Returns
    -------
    dict
        The summary that was written.

    Raises
    ------
    ValueError
        A bad input (names the key and the value); nothing is written.
    MemoryError
        The run would not fit in memory.
    """
    demo = _read_demo(text, source)
    outs = OutputSet(out)
    outs.check_folder()
    files = ["frames.npz", "summary.json", "summary.txt", f"{demo.name}.png"]
    for f in files:
        outs.reserve(f, f"{source}: name")
    _matplotlib()  # the plot comes last: fail now, not after the run
    require_memory(_demo_bytes(demo), f"{source}: the {demo.example} run on a "
                   f"{'x'.join(map(str, demo.shape))} grid with {demo.frames} frames "
                   f"({demo.dtype.name})")

    psi0, h, params = getattr(examples, demo.example)(dtype=demo.dtype, **demo.problem)
    solver = dict(demo.solver)
    solver.setdefault("bc", params["bc"])
    sim = NLSE(psi0, h, a=params["a"], s=params["s"], **solver)
    if announce is not None:
        announce(f"running {demo.name}: {demo.example} on a {'x'.join(map(str, sim.shape))} "
                 f"grid to t = {demo.t_end:g} in {demo.frames} frames")

    n0, e0 = sim.norm(), sim.energy()
    wall = time.perf_counter()
    frames = sim.run(demo.t_end, frames=demo.frames)
    wall = time.perf_counter() - wall
    n1, e1 = sim.norm(), sim.energy()
    summary: Dict[str, Any] = {
        "name": demo.name, "example": demo.example, "shape": list(sim.shape),
        "spacing": list(sim.spacing), "scheme": sim.scheme, "bc": sim.bc,
        "dtype": sim.dtype.name, "dt": sim.dt, "t_end": sim.t, "frames": len(frames),
        "norm_start": n0, "norm_end": n1, "energy_start": e0, "energy_end": e1,
        "wall_seconds": wall, "threads": core().get_num_threads(), "version": __version__,
    }
    if "exact" in params:
        summary["max_error_vs_exact"] = float(np.abs(sim.psi - params["exact"](sim.t)).max())
    coords = {k: params[k] for k in ("x", "y", "z") if k in params}

    with outs:
        outs.stage_bytes("frames.npz", lambda fh: np.savez_compressed(
            fh, t=frames.t, psi=frames.psi, **coords))
        outs.stage_text("summary.json", json.dumps(summary, indent=2) + "\n")
        outs.stage_text("summary.txt", "".join(f"{k:>20s} : {v}\n" for k, v in summary.items()))
        outs.stage(f"{demo.name}.png",
                   lambda p: plot_frames(frames, params, p, title=demo.name))
        outs.commit()
    return summary


def _matplotlib() -> Any:
    """matplotlib, or ImportError naming the ``plot`` extra (checked before a run)."""
    return plot.require()


def plot_frames(frames: Any, params: Dict[str, Any], path: str, title: str = "") -> None:
    """Save a PNG of the run (:mod:`nlsepy.plot`): in 1D the space-time map
    of |psi|^2 beside the last profile and the exact one; in 2D and 3D
    :func:`nlsepy.plot.frames` of the last frame.

    Parameters
    ----------
    frames : nlsepy.Frames
        Snapshots of a run.
    params : dict
        Example parameters (coordinate ``x``, ``exact``).
    path : str
        PNG file to write.
    title : str, optional
        Figure title.
    """
    if frames.psi.ndim == 2:
        fig, (left, right) = plot.panels(None, 2, size=(5.5, 4.0))
        plot.frames(frames, ax=left)
        x, dens = params["x"], np.abs(frames.psi[-1]) ** 2
        right.plot(x, dens, label=f"nlsepy, t = {frames.t[-1]:g}")
        if "exact" in params:
            right.plot(x, np.abs(params["exact"](frames.t[-1])) ** 2, "--", label="exact")
        right.set(xlabel=left.get_xlabel(), ylabel="|ψ|²")
        right.legend()
    else:
        fig = plot.frames(frames)
    fig.suptitle(title)
    plot.save(fig, path, dpi=110)


def _read_text(path: str, text: bool = True) -> str:
    """The input file's text (or, with ``text=False``, only a check that it
    can be opened); ValueError naming the file."""
    try:
        # utf-8-sig: a byte-order mark (written by some Windows editors) is dropped
        with open(path, encoding="utf-8-sig") as fh:
            return fh.read() if text else ""
    except UnicodeDecodeError as exc:
        raise ValueError(f"cannot read the input {path!r}: not UTF-8 text ({exc.reason} at "
                         f"byte {exc.start})") from None
    except OSError as exc:
        raise ValueError(f"cannot read the input {path!r}: {exc.strerror or exc}") from None


def _say(line: str) -> None:
    print(line, flush=True)


def _demo_main(args: argparse.Namespace) -> int:
    if args.print_input:
        sys.stdout.write(DEFAULT_INPUT)
        return 0
    if args.input:
        text, source = _read_text(args.input), args.input
    else:
        text, source = DEFAULT_INPUT, "<default input>"
    summary = run_input(text, args.out, source, announce=_say)
    for k, v in summary.items():
        print(f"{k:>20s} : {v}")
    print(f"wrote {os.path.join(args.out, 'frames.npz')}, summary.json, summary.txt, "
          f"{summary['name']}.png")
    return 0


# ------------------------------------------------------------------- dbec
def _dbec_main(args: argparse.Namespace) -> int:
    _read_text(args.input, text=False)
    overrides = dbec.parse_overrides(args.set)
    if args.progress:
        try:
            import tqdm  # noqa: F401
        except ImportError:
            raise ImportError("--progress needs tqdm: pip install 'nlsepy[progress]'") from None
    comm = _launched_comm()
    res = dbec.run(args.input, mode=args.mode, geometry=args.geometry, backend=args.backend,
                   dtype=np.complex64 if args.single else np.complex128, out_dir=args.out,
                   overrides=overrides, progress=args.progress, announce=_say, comm=comm)
    if comm is None or comm.Get_rank() == 0:
        sys.stdout.write(res.summary)
        if res.files:
            print("wrote " + ", ".join(res.files))
    return 0


def _launched_comm():
    """MPI.COMM_WORLD when this process is one of several started by mpirun
    (Open MPI, MPICH, Slurm's PMI), else None."""
    size = 1
    for var in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"):
        try:
            size = max(size, int(os.environ.get(var, "1")))
        except ValueError:
            pass
    if size <= 1:
        return None
    try:
        from mpi4py import MPI
    except ImportError:
        raise ImportError("started by mpirun with several ranks, but mpi4py is not installed: "
                          "pip install mpi4py (or run one process)") from None
    return MPI.COMM_WORLD


# ----------------------------------------------------------------- mbloch
def _mbloch_main(args: argparse.Namespace) -> int:
    if args.progress:
        try:
            import tqdm  # noqa: F401
        except ImportError:
            raise ImportError("--progress needs tqdm: pip install 'nlsepy[progress]'") from None
    summary = run_config(args.input, args.out, backend=args.backend, progress=args.progress,
                         announce=_say)
    for k in ("area_in", "area_out", "energy_in", "energy_out", "norm_deviation", "seconds"):
        print(f"{k:>20s} : {summary[k]}")
    if summary["files"]:
        print("wrote " + ", ".join(summary["files"]))
    return 0


# ----------------------------------------------------------------- errors
_PLAIN = (ValueError, TypeError, OSError, MemoryError, ImportError, BlowUpError, BackendError)


def _describe(exc: BaseException) -> str:
    """One line saying what went wrong."""
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        msg = f"{exc.filename}: {exc.strerror}"
        if exc.filename2 is not None:
            msg += f" ({exc.filename2})"
    elif isinstance(exc, KeyError) and exc.args:
        msg = str(exc.args[0])
    else:
        msg = str(exc)
    if isinstance(exc, MemoryError) and not msg:
        msg = "out of memory"
    if not isinstance(exc, _PLAIN):
        msg = f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__
    return " ".join(msg.split()) or type(exc).__name__


def _fail(message: str, status: int) -> int:
    try:
        sys.stderr.write(f"nlsepy: error: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    return status


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="nlsepy", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run a simulation from a TOML input (default: embedded)")
    demo.add_argument("--input", help="TOML input file (default: the embedded dark soliton)")
    demo.add_argument("--out", default="out", help="output folder (default: out)")
    demo.add_argument("--print-input", action="store_true",
                      help="print the embedded default input and exit")
    dbec = sub.add_parser("dbec", help="run a DBEC-GP input file (imaginary or real time)")
    dbec.add_argument("input", help="DBEC-GP input file (e.g. examples/dbec/imag3d-input)")
    dbec.add_argument("--mode", choices=("imag", "real"), help="override the program kind")
    dbec.add_argument("--geometry", choices=("3d", "2d-xy", "2d-xz", "1d-x", "1d-z"),
                      help="override the geometry")
    dbec.add_argument("--backend", default="auto", choices=("auto", "cpu", "cuda"),
                      help="where to run (auto: $NLSEPY_BACKEND, else the GPU when present)")
    dbec.add_argument("--single", action="store_true", help="single precision (complex64)")
    dbec.add_argument("--out", default=None,
                      help="folder for outputs and INPUT files (default: current folder)")
    dbec.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                      help="replace a key of the input file (repeatable; typed as in the file)")
    dbec.add_argument("--progress", action="store_true", help="show progress bars (tqdm)")
    mb = sub.add_parser("mbloch", help="run a Maxwell-Bloch run file (TOML or JSON; a "
                        "maxwellbloch JSON input too)")
    mb.add_argument("input", help="run file (e.g. examples/mbloch/sech_2pi.toml)")
    mb.add_argument("--out", default=".", help="output folder (default: current folder)")
    mb.add_argument("--backend", default=None, choices=("auto", "cpu", "cuda"),
                    help="replace the file's backend")
    mb.add_argument("--progress", action="store_true", help="show a progress bar (tqdm)")
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of ``python -m nlsepy`` and the ``nlsepy`` script.

    Returns the exit status: 0 on success, 2 for a bad command line or
    input, 1 for a failed run, 130 after Ctrl-C; a failure is reported as
    one line ``nlsepy: error: <message>`` on stderr.
    """
    try:
        args = _parser().parse_args(argv)
        run = {"demo": _demo_main, "dbec": _dbec_main, "mbloch": _mbloch_main}[args.command]
        return run(args)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except BrokenPipeError:
        # the reader of stdout went away: stop writing to it
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return _fail("standard output closed (broken pipe)", 1)
    except Exception as exc:  # every failure: one line, no traceback
        if os.environ.get("NLSEPY_TRACEBACK"):
            raise
        return _fail(_describe(exc), 2 if isinstance(exc, (ValueError, TypeError, KeyError))
                     else 1)


if __name__ == "__main__":
    sys.exit(main())
