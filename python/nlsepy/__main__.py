"""Command line: ``python -m nlsepy demo [--input FILE.toml] [--out DIR]``.

``demo`` runs a simulation described by a small TOML input (an embedded
default when none is given: the NLSEmagic dark soliton), and writes its
frames (``frames.npz``), a summary (``summary.json`` and ``summary.txt``) and
a plot (``<name>.png``) under the output folder.  Every file is written to a
temporary name and renamed, so it is whole or absent.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Dict, List, Optional

import numpy as np

from .runner import atomic_write

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

_BUILDERS = ("dark_soliton", "bright_soliton", "dark_vortex", "vortex_ring")


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
        raise ValueError(f"{source}: {exc}") from exc


def _write_text(path: str, text: str) -> None:
    atomic_write(path, lambda fh: fh.write(text), binary=False)


def _section(cfg: Dict[str, Any], name: str, source: str) -> Dict[str, Any]:
    sec = cfg.get(name, {})
    if not isinstance(sec, dict):
        raise ValueError(f"{source}: [{name}] must be a table")
    return dict(sec)


def run_input(text: str, out: str, source: str = "<input>") -> Dict[str, Any]:
    """Run the simulation described by TOML `text` and write results to `out`.

    Parameters
    ----------
    text : str
        TOML input with tables ``[problem]`` (``example`` plus the builder's
        keyword arguments), ``[solver]`` (keyword arguments of
        :class:`nlsepy.NLSE`) and ``[run]`` (``t_end``, ``frames``).
    out : str
        Output folder (created if missing).
    source : str, optional
        Name of the input for error messages.

    Returns
    -------
    dict
        The summary that was written.
    """
    import nlsepy as nl

    cfg = _parse_toml(text, source)
    name = str(cfg.get("name", "nlse"))
    problem = _section(cfg, "problem", source)
    solver = _section(cfg, "solver", source)
    run = _section(cfg, "run", source)
    example = problem.pop("example", None)
    if example not in _BUILDERS:
        raise ValueError(f"{source}: [problem] example must be one of {_BUILDERS}, "
                         f"got {example!r}")
    if "dtype" in solver:
        solver["dtype"] = np.dtype(solver["dtype"])
        problem.setdefault("dtype", solver["dtype"])
    try:
        psi0, h, params = getattr(nl.examples, example)(**problem)
    except TypeError as exc:
        raise ValueError(f"{source}: bad key in [problem]: {exc}") from exc
    for key in ("t_end", "frames"):
        if key not in run:
            raise ValueError(f"{source}: [run] needs the key {key!r}")
    extra = set(run) - {"t_end", "frames"}
    if extra:
        raise ValueError(f"{source}: unknown key(s) in [run]: {sorted(extra)}")
    solver.setdefault("bc", params["bc"])
    try:
        sim = nl.NLSE(psi0, h, a=params["a"], s=params["s"], **solver)
    except TypeError as exc:
        raise ValueError(f"{source}: bad key in [solver]: {exc}") from exc

    n0, e0 = sim.norm(), sim.energy()
    wall = time.perf_counter()
    frames = sim.run(float(run["t_end"]), frames=int(run["frames"]))
    wall = time.perf_counter() - wall
    n1, e1 = sim.norm(), sim.energy()
    summary: Dict[str, Any] = {
        "name": name, "example": example, "shape": list(sim.shape),
        "spacing": list(sim.spacing), "scheme": sim.scheme, "bc": sim.bc,
        "dtype": sim.dtype.name, "dt": sim.dt, "t_end": sim.t, "frames": len(frames),
        "norm_start": n0, "norm_end": n1, "energy_start": e0, "energy_end": e1,
        "wall_seconds": wall, "threads": nl.get_num_threads(), "version": nl.__version__,
    }
    if "exact" in params:
        summary["max_error_vs_exact"] = float(np.abs(sim.psi - params["exact"](sim.t)).max())

    os.makedirs(out, exist_ok=True)
    coords = {k: params[k] for k in ("x", "y", "z") if k in params}

    atomic_write(os.path.join(out, "frames.npz"),
                 lambda fh: np.savez_compressed(fh, t=frames.t, psi=frames.psi, **coords))
    _write_text(os.path.join(out, "summary.json"), json.dumps(summary, indent=2) + "\n")
    _write_text(os.path.join(out, "summary.txt"),
                "".join(f"{k:>20s} : {v}\n" for k, v in summary.items()))
    plot_frames(frames, params, os.path.join(out, f"{name}.png"), title=name)
    return summary


def plot_frames(frames: Any, params: Dict[str, Any], path: str, title: str = "") -> None:
    """Save a PNG of |psi|^2: a space-time map in 1D, the last frame in 2D/3D.

    Parameters
    ----------
    frames : nlsepy.Frames
        Snapshots of a run.
    params : dict
        Example parameters (coordinates ``x``, ``y``, ``exact``).
    path : str
        PNG file to write.
    title : str, optional
        Figure title.
    """
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError("plots need matplotlib: pip install 'nlsepy[plot]'") from exc
    dens = np.abs(frames.psi) ** 2
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    if dens.ndim == 2:
        x = params["x"]
        im = axes[0].pcolormesh(x, frames.t, dens, shading="auto", cmap="viridis")
        axes[0].set(xlabel="x", ylabel="t", title="|psi|^2")
        fig.colorbar(im, ax=axes[0])
        axes[1].plot(x, dens[-1], label=f"nlsepy, t = {frames.t[-1]:g}")
        if "exact" in params:
            axes[1].plot(x, np.abs(params["exact"](frames.t[-1])) ** 2, "--", label="exact")
        axes[1].set(xlabel="x", ylabel="|psi|^2")
        axes[1].legend()
    else:
        last = dens[-1] if dens.ndim == 3 else dens[-1][:, :, dens.shape[-1] // 2]
        first = dens[0] if dens.ndim == 3 else dens[0][:, :, dens.shape[-1] // 2]
        for ax, img, t in ((axes[0], first, frames.t[0]), (axes[1], last, frames.t[-1])):
            im = ax.imshow(img.T, origin="lower", cmap="viridis")
            ax.set(title=f"|psi|^2 at t = {t:g}")
            fig.colorbar(im, ax=ax)
    fig.suptitle(title)
    fig.tight_layout()

    try:
        atomic_write(path, lambda fh: fig.savefig(fh, format="png", dpi=110))
    finally:
        plt.close(fig)


def _dbec_main(args: argparse.Namespace) -> int:
    from .dipolar import dbec
    import numpy as np

    overrides: Dict[str, Any] = {}
    for item in args.set:
        if "=" not in item:
            print(f"nlsepy: error: --set needs KEY=VALUE, got {item!r}", file=sys.stderr)
            return 2
        k, v = (x.strip() for x in item.split("=", 1))
        key = k.upper()
        try:
            overrides[key] = (int(float(v)) if key in dbec._INT else
                              float(v) if key in dbec._FLOAT else v)
        except ValueError:
            print(f"nlsepy: error: --set {key}: bad value {v!r}", file=sys.stderr)
            return 2
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    try:
        res = dbec.run(args.input, mode=args.mode, geometry=args.geometry, backend=args.backend,
                       dtype=np.complex64 if args.single else np.complex128, out_dir=args.out,
                       overrides=overrides, progress=args.progress)
    except (OSError, ValueError, TypeError, ImportError) as exc:
        print(f"nlsepy: error: {exc}", file=sys.stderr)
        return 2
    with open(res.files[0], encoding="utf-8") as fh:
        sys.stdout.write(fh.read())
    print("wrote " + ", ".join(res.files))
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of ``python -m nlsepy`` and the ``nlsepy`` script."""
    parser = argparse.ArgumentParser(prog="nlsepy", description=__doc__.splitlines()[0])
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
                      help="replace a key of the input file (repeatable)")
    dbec.add_argument("--progress", action="store_true", help="show progress bars (tqdm)")
    args = parser.parse_args(argv)
    if args.command == "dbec":
        return _dbec_main(args)
    if args.command == "demo":
        if args.print_input:
            sys.stdout.write(DEFAULT_INPUT)
            return 0
        if args.input:
            with open(args.input, encoding="utf-8") as fh:
                text, source = fh.read(), args.input
        else:
            text, source = DEFAULT_INPUT, "<default input>"
        try:
            summary = run_input(text, args.out, source)
        except (ValueError, TypeError, ImportError) as exc:
            print(f"nlsepy: error: {exc}", file=sys.stderr)
            return 2
        for k, v in summary.items():
            print(f"{k:>20s} : {v}")
        print(f"wrote {args.out}/frames.npz, summary.json, summary.txt, {summary['name']}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
