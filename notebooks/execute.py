"""Execute the notebooks in place and store them with their outputs (`make notebooks`).

Each notebook runs top to bottom in a fresh kernel: nbclient with the kernel
``python3`` of the environment of the interpreter that runs this script
(``python -m ipykernel install --sys-prefix`` puts it there; that environment's
kernels are looked up first and the kernel checks that it runs in the same
environment, so the notebooks use the nlsepy installed there).  The kernel
runs in the notebook's folder with matplotlib's inline backend (PNG figures
of 72 dpi, no display needed) and NumPy's global seed fixed; unless the
environment sets them, with one OpenMP thread, the CPU backend and the quick
variant of the notebooks that have a larger one (``NLSEPY_NOTEBOOK_FULL=0``),
so that a re-run stores the same outputs.  The stored file is made
reproducible: no execution timings or kernel versions in the metadata, cell
ids kept (missing ones derived from the notebook's name and the cell's
place, never random), consecutive stream outputs merged, and execution counts
1, 2, ... in the order of the code cells.

Usage::

    python notebooks/execute.py [NOTEBOOK.ipynb ...] [--timeout SECONDS]

With no notebook, every ``notebooks/*.ipynb``.  Prints each notebook's wall
time and stored size; exits non-zero when a cell raises (that notebook is
then left as it was).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import sys
import time
from typing import List, Optional, Sequence, Tuple

HERE = pathlib.Path(__file__).resolve().parent

#: set in the kernel's environment unless the caller's environment sets them
KERNEL_ENV = {
    "OMP_NUM_THREADS": "1",
    "NLSEPY_BACKEND": "cpu",
    "NLSEPY_NOTEBOOK_FULL": "0",
    "PYTHONHASHSEED": "0",
}

#: always set in the kernel's environment: figures go into the notebook
KERNEL_FORCE = {"MPLBACKEND": "module://matplotlib_inline.backend_inline"}

#: run in the kernel before the first cell (not stored in the notebook): the
#: kernel is that of this environment, modest PNG figures, NumPy's global seed
SETUP = """\
import os as _os, sys as _sys
assert _os.path.realpath(_sys.prefix) == {prefix!r}, (
    f"the kernel python3 runs {{_sys.executable}}, outside the environment {prefix!r}: "
    "run `{python} -m ipykernel install --sys-prefix` (and check JUPYTER_PATH)")
del _os, _sys
import numpy as _np
_np.random.seed(0)
del _np
%config InlineBackend.figure_formats = ['png']
%config InlineBackend.rc = {{'figure.dpi': 72, 'savefig.dpi': 72}}
"""

#: the notebook metadata that is kept (the rest is what the kernel reports
#: about itself: versions, which change from one machine to the next)
METADATA = {
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
}


def _fill_ids(cells: list, stem: str) -> None:
    """Give every cell without an id, or with one an earlier cell has, a fixed new one."""
    taken = {c.get("id") for c in cells if c.get("id")}
    seen: set = set()
    for i, cell in enumerate(cells):
        if not cell.get("id") or cell["id"] in seen:
            k = 0
            while True:
                new = hashlib.sha1(f"{stem}:{i}:{k}".encode()).hexdigest()[:8]
                if new not in taken:
                    break
                k += 1
            cell["id"] = new
            taken.add(new)
        seen.add(cell["id"])


def _merge_streams(outputs: list) -> list:
    """Consecutive stream outputs of one name as one (how they are split depends on timing)."""
    merged: list = []
    for out in outputs:
        prev = merged[-1] if merged else None
        if (out.get("output_type") == "stream" and prev is not None
                and prev.get("output_type") == "stream" and prev.get("name") == out.get("name")):
            prev["text"] = "".join(prev["text"]) + "".join(out["text"])
        else:
            merged.append(out)
    return merged


def normalize(nb, stem: str) -> None:
    """Make `nb` (an nbformat NotebookNode) reproducible, in place."""
    nb.metadata = {k: v for k, v in METADATA.items()}
    _fill_ids(nb.cells, stem)
    count = 0
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        cell.metadata.pop("collapsed", None)
        cell.metadata.pop("scrolled", None)
        if cell.cell_type != "code":
            continue
        count += 1
        cell.execution_count = count
        cell.outputs = _merge_streams(cell.outputs)
        for out in cell.outputs:
            if "execution_count" in out:
                out["execution_count"] = count
            out.get("metadata", {}).pop("execution", None)


def _read(path: pathlib.Path):
    """The notebook at `path`, its missing cell ids filled in (fixed, not random)."""
    import nbformat

    raw = json.loads(path.read_text(encoding="utf-8"))
    _fill_ids(raw.get("cells", []), path.stem)
    return nbformat.reads(json.dumps(raw), as_version=4)


#: a code cell that runs longer than this says so in the markdown above it
LONG_CELL_SECONDS = 30.0


def execute(path: pathlib.Path, timeout: int) -> Tuple[float, List[Tuple[int, float]]]:
    """Run `path` in a fresh kernel and write it back with its outputs.

    Returns
    -------
    seconds : float
        Wall time of the whole notebook.
    long_cells : list of (int, float)
        The code cells (numbered 1, 2, ... as their execution counts) that
        ran longer than :data:`LONG_CELL_SECONDS`, with their wall times.
    """
    import nbformat
    from nbclient import NotebookClient

    nb = _read(path)
    normalize(nb, path.stem)
    env = dict(os.environ)
    for key, value in KERNEL_ENV.items():
        env.setdefault(key, value)
    env.update(KERNEL_FORCE)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=False,
                            record_timing=False, resources={"metadata": {"path": str(path.parent)}})
    setup = nbformat.v4.new_code_cell(SETUP.format(prefix=os.path.realpath(sys.prefix),
                                                  python=sys.executable))
    t0 = time.perf_counter()
    with client.setup_kernel(env=env):
        nb.cells.append(setup)          # nbclient stores outputs by index: run it in place
        client.execute_cell(setup, len(nb.cells) - 1, store_history=False)
        nb.cells.pop()
        code = 0
        long_cells = []
        for index, cell in enumerate(nb.cells):
            t_cell = time.perf_counter()
            client.execute_cell(cell, index)
            if cell.cell_type == "code":
                code += 1
                if time.perf_counter() - t_cell > LONG_CELL_SECONDS:
                    long_cells.append((code, time.perf_counter() - t_cell))
    seconds = time.perf_counter() - t0
    normalize(nb, path.stem)
    nbformat.validate(nb)
    path.write_text(nbformat.writes(nb) + "\n", encoding="utf-8")
    return seconds, long_cells


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=pathlib.Path)
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    args = parser.parse_args(argv)
    # the kernels of this environment before those of the user and the system
    os.environ.setdefault("JUPYTER_PREFER_ENV_PATH", "1")
    paths: List[pathlib.Path] = args.notebooks or sorted(HERE.glob("*.ipynb"))
    failed = []
    t0 = time.perf_counter()
    for path in paths:
        print(f"{path}: running", flush=True)
        try:
            seconds, long_cells = execute(path, args.timeout)
        except Exception as exc:  # noqa: BLE001 - report and go on with the others
            print(f"{path}: FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
            failed.append(path)
            continue
        print(f"{path}: {seconds:.1f} s, {path.stat().st_size / 1024:.0f} KiB", flush=True)
        for n, cell_seconds in long_cells:
            print(f"    code cell {n}: {cell_seconds:.1f} s (over {LONG_CELL_SECONDS:g} s: the "
                  f"markdown above it gives its run time)", flush=True)
    print(f"{len(paths)} notebook(s) in {time.perf_counter() - t0:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
