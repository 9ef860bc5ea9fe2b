"""Maxwell-Bloch runs described by files: ``python -m nlsepy mbloch FILE``.

A TOML or JSON file describes the atoms, the input pulses, the z and t grids
and the outputs of one run of :class:`nlsepy.MaxwellBloch`
(docs/models/mbloch.md, "Input files").  Its keys are the model's own:

- ``name``: the stem of the output files (a plain file name);
- ``[model]``: the constructor's arguments, ``n_g``, ``n_e``, ``modes``,
  ``F``, ``h_t``, ``n_t`` (or ``t_max``), ``kappa_g``, ``kappa_e``,
  ``delta``, ``beta``, ``line``, ``n_atoms``, ``initial_state``, ``dtype``,
  ``backend``, and the open-system channels ``decay`` (a list of
  ``[rate, from, to]`` or ``[rate, from, to, branching]``, levels numbered
  ground first), ``dephasing`` (a rate per level, or a matrix of rates per
  coherence) and ``doppler`` (the fields of ``nl.mbloch.Doppler``: per-mode
  ``factors``, ``width`` or the gas, ``n_classes``, ``span``);
- ``[hyperfine]``: instead of ``n_g``, ``n_e``, ``modes`` and ``F``, the
  sublevels of an alkali D line (:func:`nlsepy.mbloch.hyperfine`:
  ``species``, ``line``, ``F``, ``F_prime``, ``polarisation``; ``initial``
  ``[F, mF]`` starts every atom in that sublevel);
- ``[[fields]]``: input pulses :math:`\\varepsilon_l(0, t)`, each on a
  ``mode`` (or, with ``[hyperfine]``, on the modes of ``polarisation`` and
  ``F_prime``): ``shape`` "sech" or "gaussian" (``width``, ``delay``, one of
  ``area`` or ``amplitude``, as :func:`nlsepy.mbloch.sech_pulse`) or
  "square" (``amplitude``, ``on``, ``off``), an optional constant ``phase``
  (radians); pulses on one mode add up;
- ``[run]``: the arguments of :meth:`nlsepy.MaxwellBloch.run`, ``h_z``,
  ``n_z`` (or ``z_max``), ``save_every``, ``full_map``, ``populations``,
  ``euler_substeps``;
- ``[output]``: file names of the HDF5 run file (``run_file``, default
  ``NAME.h5``), the figure (``plot``, ``NAME.png``) and the summary
  (``summary``, ``NAME.json``); ``false`` leaves one out.

A JSON file with an ``"atom"`` object is read as a ``maxwellbloch`` input
file instead (:mod:`nlsepy.mbloch.compat`).  Every key and value is checked
before anything runs; an error names the file, the table, the key and the
value.  The outputs are written all or none (staged, then renamed together).
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import numpy as np

from ..common.hdf5 import require_h5py
from ..common.outputs import OutputSet, check_name
from ..common.plot import require as require_matplotlib
from ..reference.mbloch import gaussian_pulse, sech_pulse
from .compat import from_maxwellbloch
from .filekeys import Plan, boolean, integer, number, numbers, show, steps, string, table
from .hyperfine import _polarisation, hyperfine
from .solver import MaxwellBloch

__all__ = ["Plan", "read_config", "parse_config", "build_model", "run_config"]

_MODEL = {"n_g", "n_e", "modes", "F", "h_t", "n_t", "t_max", "kappa_g", "kappa_e", "delta",
          "beta", "line", "n_atoms", "initial_state", "dtype", "backend", "decay", "dephasing",
          "doppler"}
_DOPPLER = {"factors": "numbers", "width": "float", "temperature": "float", "mass": "float",
            "wavelength": "float", "time_unit": "float", "n_classes": "int", "span": "float"}
_HYPERFINE = {"species", "line", "F", "F_prime", "polarisation", "initial"}
_FIELD = {"mode", "F_prime", "polarisation", "shape", "width", "delay", "area", "amplitude",
          "on", "off", "phase", "label"}
_RUN = {"h_z", "n_z", "z_max", "save_every", "full_map", "populations", "euler_substeps"}
_OUTPUT = {"run_file", "plot", "summary"}
_TOP = {"name", "model", "hyperfine", "fields", "run", "output"}
_SHAPES = ("sech", "gaussian", "square")


def _load(path: Union[str, os.PathLike]) -> Tuple[Dict[str, Any], str]:
    source = os.fspath(path)
    try:
        with open(source, encoding="utf-8-sig") as fh:
            text = fh.read()
    except UnicodeDecodeError as exc:
        raise ValueError(f"cannot read {source!r}: not UTF-8 text ({exc.reason} at byte "
                         f"{exc.start})") from None
    except OSError as exc:
        raise ValueError(f"cannot read {source!r}: {exc.strerror or exc}") from None
    suffix = os.path.splitext(source)[1].lower()
    if suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{source}: not valid JSON: {exc}") from None
    elif suffix == ".toml":
        data = _toml(text, source)
    else:
        raise ValueError(f"{source}: an input file must end in .toml or .json, got "
                         f"{suffix or 'no suffix'!r}")
    if not isinstance(data, dict):
        raise ValueError(f"{source}: the file must hold a table (a JSON object), got "
                         f"{type(data).__name__}")
    return data, source


def _toml(text: str, source: str) -> Dict[str, Any]:
    try:
        import tomllib  # Python >= 3.11
    except ImportError:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError:
            raise ImportError(f"{source}: reading TOML on Python < 3.11 needs tomli (pip "
                              f"install tomli), or give the same keys as a .json file") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{source}: not valid TOML: {exc}") from None


def read_config(path: Union[str, os.PathLike]) -> Plan:
    """Read and check a run file (``.toml`` or ``.json``; a JSON file with
    an ``"atom"`` object is a ``maxwellbloch`` input).

    Parameters
    ----------
    path : path-like
        The file.

    Returns
    -------
    Plan

    Raises
    ------
    ValueError
        A file that cannot be read or parsed, an unknown key, a value of the
        wrong type or out of range, a missing key: the message names the
        file, the table, the key and the value.
    """
    data, source = _load(path)
    return parse_config(data, source)


def parse_config(data: Dict[str, Any], source: str = "<input>") -> Plan:
    """Check the parsed contents `data` of a run file named `source`
    (see :func:`read_config`)."""
    if "atom" in data:
        return from_maxwellbloch(data, source)
    unknown = sorted(set(data) - _TOP)
    if unknown:
        raise ValueError(f"{source}: unknown key(s) or table(s): {unknown}; a run file has "
                         f"name, [model], [hyperfine], [[fields]], [run] and [output] (or is "
                         f"a maxwellbloch JSON file with \"atom\")")
    name = string(data.get("name", "mbloch"), f"{source}: name")
    check_name(name, f"{source}: name")
    model, hf = _model(data, source)
    fields, labels = _fields(data.get("fields", []), model, hf, source)
    run = _run(data, source)
    outputs = _outputs(data, name, source)
    return Plan(source=source, name=name, model=model, fields=fields, run=run,
                outputs=outputs, labels=labels, field_scale={l: 1.0 for l in fields})


def _model(data: Dict[str, Any], source: str) -> Tuple[Dict[str, Any], Any]:
    sec = table(data, "model", _MODEL, source)
    w = f"{source}: [model]"
    kw: Dict[str, Any] = {}
    kw["h_t"], kw["n_t"] = steps(sec, "h_t", "n_t", "t_max", w, 2)
    hf = None
    if "hyperfine" in data:
        clash = sorted({"n_g", "n_e", "modes", "F"} & set(sec))
        if clash:
            raise ValueError(f"{w} {clash} and [hyperfine] both describe the levels: give one")
        hf, psi0 = _hyperfine(data, source)
        kw.update(hf.model_kwargs())
        if psi0 is not None:
            if "initial_state" in sec:
                raise ValueError(f"{w} initial_state and [hyperfine] initial both give the "
                                 f"initial state: give one")
            kw["initial_state"] = psi0
    else:
        for k in ("n_g", "n_e"):
            if k in sec:
                kw[k] = integer(sec[k], f"{w} {k}", 1)
        if "modes" in sec:
            m = sec["modes"]
            if not isinstance(m, list) or len(m) != 2:
                raise ValueError(f"{w} modes must be [l_min, l_max], got {show(m)}")
            kw["modes"] = tuple(integer(x, f"{w} modes[{i}]") for i, x in enumerate(m))
        if "F" in sec:
            kw["F"] = numbers(sec["F"], f"{w} F", ndim=2)
    for k in ("kappa_g", "kappa_e", "delta", "beta"):
        if k in sec:
            kw[k] = number(sec[k], f"{w} {k}")
    if "n_atoms" in sec:
        kw["n_atoms"] = integer(sec["n_atoms"], f"{w} n_atoms", 1)
    if "line" in sec:
        kw["line"] = _line(sec["line"], w)
    if "initial_state" in sec:
        kw["initial_state"] = _state(sec["initial_state"], f"{w} initial_state")
    if "dtype" in sec:
        kw["dtype"] = np.dtype(string(sec["dtype"], f"{w} dtype", ("complex128", "complex64")))
    if "backend" in sec:
        kw["backend"] = string(sec["backend"], f"{w} backend", ("auto", "cpu", "cuda"))
    n_lev = kw.get("n_g", 1) + kw.get("n_e", 1)
    if "decay" in sec:
        kw["decay"] = decay_channels(sec["decay"], n_lev, f"{w} decay")
    if "dephasing" in sec:
        kw["dephasing"] = dephasing_rates(sec["dephasing"], n_lev, f"{w} dephasing")
    if "doppler" in sec:
        kw["doppler"] = _doppler(sec["doppler"], f"{w} doppler")
    return kw, hf


def _doppler(v: Any, what: str) -> Dict[str, Any]:
    """The fields of nl.mbloch.Doppler, typed (the model checks their values)."""
    if not isinstance(v, dict):
        raise ValueError(f"{what} must be a table of factors, width (or temperature, mass, "
                         f"wavelength, time_unit), n_classes, span; got {show(v)}")
    unknown = sorted(set(v) - set(_DOPPLER))
    if unknown:
        raise ValueError(f"{what}: unknown key(s) {unknown}; known keys: {sorted(_DOPPLER)}")
    if "factors" not in v:
        raise ValueError(f"{what} needs the key 'factors' (one per mode)")
    out: Dict[str, Any] = {}
    for k, x in v.items():
        kind = _DOPPLER[k]
        out[k] = (numbers(x, f"{what} {k}").tolist() if kind == "numbers" else
                  integer(x, f"{what} {k}", 1) if kind == "int" else
                  number(x, f"{what} {k}", positive=True))
    return out


def decay_channels(v: Any, n_lev: int, what: str) -> List[Tuple[Any, ...]]:
    """``[(rate, from, to[, branching]), ...]`` checked: rates finite and
    >= 0, branching factors in [0, 1], levels integers in 0 .. n_lev - 1,
    from != to."""
    if not isinstance(v, list):
        raise ValueError(f"{what} must be a list of [rate, from, to] or [rate, from, to, "
                         f"branching], got {show(v)}")
    out = []
    for i, ch in enumerate(v):
        wi = f"{what}[{i}]"
        if not isinstance(ch, list) or len(ch) not in (3, 4):
            raise ValueError(f"{wi} must be [rate, from, to] or [rate, from, to, branching], "
                             f"got {show(ch)}")
        rate = number(ch[0], f"{wi} rate", nonneg=True)
        ends = []
        for j, end in ((1, "from"), (2, "to")):
            lev = integer(ch[j], f"{wi} {end} level")
            if not 0 <= lev < n_lev:
                raise ValueError(f"{wi} {end} level {lev} does not exist: the levels are 0 .. "
                                 f"{n_lev - 1} (ground first)")
            ends.append(lev)
        if ends[0] == ends[1]:
            raise ValueError(f"{wi} decays from level {ends[0]} into itself")
        item: Tuple[Any, ...] = (rate, ends[0], ends[1])
        if len(ch) == 4:
            b = number(ch[3], f"{wi} branching", nonneg=True)
            if b > 1:
                raise ValueError(f"{wi} branching must be in [0, 1], got {show(ch[3])}")
            item += (b,)
        out.append(item)
    return out


def dephasing_rates(v: Any, n_lev: int, what: str) -> np.ndarray:
    """Pure dephasing rates: ``(n_lev,)`` per level or ``(n_lev, n_lev)`` per
    coherence (symmetric), finite and >= 0."""
    ndim = 2 if isinstance(v, list) and v and isinstance(v[0], list) else 1
    arr = numbers(v, what, ndim=ndim, nonneg=True)
    want = (n_lev,) * ndim
    if arr.shape != want:
        kind = "a rate per level" if ndim == 1 else "a matrix of rates per coherence"
        raise ValueError(f"{what} must hold {kind}, shape {want}, got {arr.shape}")
    if ndim == 2 and not np.array_equal(arr, arr.T):
        i, j = np.argwhere(arr != arr.T)[0]
        raise ValueError(f"{what} must be symmetric: [{i}][{j}] = {arr[i, j]!r}, [{j}][{i}] = "
                         f"{arr[j, i]!r}")
    return arr


def _line(v: Any, w: str) -> Tuple[Any, ...]:
    what = f"{w} line"
    if isinstance(v, dict):
        if set(v) == {"detunings", "weights"}:
            return (numbers(v["detunings"], f"{what} detunings"),
                    numbers(v["weights"], f"{what} weights", nonneg=True))
        raise ValueError(f"{what} as a table must have the keys detunings and weights, got "
                         f"{sorted(v)}")
    if not isinstance(v, list) or not 2 <= len(v) <= 3 or not isinstance(v[0], str):
        raise ValueError(f"{what} must be [shape, width(, span)] with shape \"gaussian\" or "
                         f"\"lorentzian\", [\"single\", detuning], or a table {{detunings, "
                         f"weights}}, got {show(v)}")
    shape = string(v[0], f"{what}[0]", ("gaussian", "lorentzian", "single"))
    if shape == "single":
        if len(v) != 2:
            raise ValueError(f"{what} [\"single\", detuning] takes one value, got {show(v)}")
        return (shape, number(v[1], f"{what} detuning"))
    return (shape,) + tuple(number(x, f"{what} {n}", positive=True)
                            for x, n in zip(v[1:], ("width", "span")))


def _state(v: Any, what: str) -> np.ndarray:
    if isinstance(v, dict):
        if set(v) != {"re", "im"}:
            raise ValueError(f"{what} as a table must have the keys re and im, got {sorted(v)}")
        ndim = 2 if isinstance(v["re"], list) and v["re"] and isinstance(v["re"][0], list) \
            else 1
        re, im = numbers(v["re"], f"{what} re", ndim), numbers(v["im"], f"{what} im", ndim)
        if re.shape != im.shape:
            raise ValueError(f"{what} re and im must have one shape, got {re.shape} and "
                             f"{im.shape}")
        return re + 1j * im
    ndim = 2 if isinstance(v, list) and v and isinstance(v[0], list) else 1
    return numbers(v, what, ndim)


def _hyperfine(data: Dict[str, Any], source: str) -> Tuple[Any, Optional[np.ndarray]]:
    sec = table(data, "hyperfine", _HYPERFINE, source, required=("species", "line", "F"))
    w = f"{source}: [hyperfine]"
    kw = {k: sec[k] for k in ("species", "line", "F", "F_prime", "polarisation") if k in sec}
    try:
        hf = hyperfine(**kw)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{w} {exc}") from None
    psi0 = None
    if "initial" in sec:
        init = sec["initial"]
        if not isinstance(init, list) or len(init) != 2:
            raise ValueError(f"{w} initial must be [F, mF], got {show(init)}")
        try:
            level = hf.level(*init)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{w} initial = {show(init)}: {exc}") from None
        psi0 = np.zeros(hf.n_g + hf.n_e)
        psi0[level] = 1.0
    return hf, psi0


def _fields(v: Any, model: Dict[str, Any], hf: Any, source: str
            ) -> Tuple[Dict[int, np.ndarray], Dict[int, str]]:
    if not isinstance(v, list) or not all(isinstance(f, dict) for f in v):
        raise ValueError(f"{source}: fields must be a list of tables ([[fields]]), got {show(v)}")
    modes = model.get("modes", (0, 0))
    t = model["h_t"] * np.arange(model["n_t"])
    out: Dict[int, np.ndarray] = {}
    labels: Dict[int, str] = {}
    for i, f in enumerate(v):
        w = f"{source}: [[fields]] {i}:"
        unknown = sorted(set(f) - _FIELD)
        if unknown:
            raise ValueError(f"{w} unknown key(s) {unknown}; known keys: {sorted(_FIELD)}")
        pulse = _pulse(f, t, w)
        for l in _field_modes(f, modes, hf, w):
            out[l] = out.get(l, 0) + pulse
            if "label" in f:
                labels[l] = string(f["label"], f"{w} label")
    return out, labels


def _field_modes(f: Dict[str, Any], modes: Tuple[int, int], hf: Any, w: str) -> List[int]:
    if "mode" in f:
        if "F_prime" in f or "polarisation" in f:
            raise ValueError(f"{w} give mode, or F_prime and polarisation, not both")
        l = integer(f["mode"], f"{w} mode")
        if not modes[0] <= l <= modes[1]:
            raise ValueError(f"{w} mode = {l} is not in the mode set {modes[0]} .. {modes[1]}")
        return [l]
    if hf is None:
        if "F_prime" in f or "polarisation" in f:
            raise ValueError(f"{w} F_prime and polarisation name modes of a [hyperfine] system "
                             f"only; give mode")
        if modes[0] != modes[1]:
            raise ValueError(f"{w} needs the key 'mode' (the model has modes {modes[0]} .. "
                             f"{modes[1]})")
        return [modes[0]]
    try:
        qs = _polarisation(f["polarisation"]) if "polarisation" in f else hf.polarisations
        fps = f["F_prime"] if "F_prime" in f else list(hf.F_prime)
        fps = fps if isinstance(fps, list) else [fps]
        return [hf.mode(fp, q) for fp in fps for q in qs]
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{w} {exc}") from None


def _pulse(f: Dict[str, Any], t: np.ndarray, w: str) -> np.ndarray:
    shape = string(f.get("shape", "sech"), f"{w} shape", _SHAPES)
    allowed = {"sech": {"width", "delay", "area", "amplitude"},
               "gaussian": {"width", "delay", "area", "amplitude"},
               "square": {"amplitude", "on", "off"}}[shape]
    extra = sorted(set(f) & ({"width", "delay", "area", "amplitude", "on", "off"} - allowed))
    if extra:
        raise ValueError(f"{w} shape {shape!r} takes {sorted(allowed)}, not {extra}")
    if shape == "square":
        for k in ("amplitude", "on", "off"):
            if k not in f:
                raise ValueError(f"{w} shape 'square' needs the key {k!r}")
        amp = number(f["amplitude"], f"{w} amplitude")
        on, off = number(f["on"], f"{w} on"), number(f["off"], f"{w} off")
        if off <= on:
            raise ValueError(f"{w} off = {off!r} must be after on = {on!r}")
        p = np.where((t >= on) & (t <= off), amp, 0.0).astype(complex)
    else:
        for k in ("width", "delay"):
            if k not in f:
                raise ValueError(f"{w} shape {shape!r} needs the key {k!r}")
        if ("area" in f) == ("amplitude" in f):
            raise ValueError(f"{w} shape {shape!r} needs exactly one of 'area' and 'amplitude'")
        size = {k: number(f[k], f"{w} {k}") for k in ("area", "amplitude") if k in f}
        fn = sech_pulse if shape == "sech" else gaussian_pulse
        p = fn(t, number(f["width"], f"{w} width", positive=True),
               number(f["delay"], f"{w} delay"), **size).astype(complex)
    if "phase" in f:
        p = p * np.exp(1j * number(f["phase"], f"{w} phase"))
    return p


def _run(data: Dict[str, Any], source: str) -> Dict[str, Any]:
    sec = table(data, "run", _RUN, source)
    w = f"{source}: [run]"
    run: Dict[str, Any] = {}
    run["h_z"], run["n_z"] = steps(sec, "h_z", "n_z", "z_max", w, 1)
    if "save_every" in sec:
        v = sec["save_every"]
        run["save_every"] = (integer(v, f"{w} save_every", 1) if not isinstance(v, list)
                             else numbers(v, f"{w} save_every", nonneg=True))
    for k in ("full_map", "populations"):
        if k in sec:
            run[k] = boolean(sec[k], f"{w} {k}")
    if "euler_substeps" in sec:
        run["euler_substeps"] = integer(sec["euler_substeps"], f"{w} euler_substeps", 1)
    return run


def _outputs(data: Dict[str, Any], name: str, source: str) -> Dict[str, Optional[str]]:
    sec = table(data, "output", _OUTPUT, source)
    defaults = {"run_file": f"{name}.h5", "plot": f"{name}.png", "summary": f"{name}.json"}
    out: Dict[str, Optional[str]] = {}
    for k, default in defaults.items():
        v = sec.get(k, default)
        what = f"{source}: [output] {k}"
        if v is False:
            out[k] = None
            continue
        out[k] = check_name(string(v, what), what)
    if out["run_file"] is not None and not out["run_file"].endswith((".h5", ".hdf5")):
        raise ValueError(f"{source}: [output] run_file = {out['run_file']!r} must end in .h5 "
                         f"or .hdf5")
    return out


# ------------------------------------------------------------------- run
def build_model(plan: Plan, backend: Optional[str] = None) -> Any:
    """The :class:`nlsepy.MaxwellBloch` of `plan` (`backend` replaces the file's).

    Raises
    ------
    ValueError
        The model refuses a value (the message names the file), or the
        file asks for ``decay`` or ``dephasing`` and this build's model has
        no open systems.
    """
    kw = dict(plan.model)
    if backend is not None:
        kw["backend"] = backend
    try:
        return MaxwellBloch(**kw)
    except TypeError as exc:
        open_keys = [k for k in ("decay", "dephasing", "doppler") if k in kw]
        if open_keys and "unexpected keyword argument" in str(exc):
            verb = "need" if len(open_keys) > 1 else "needs"
            raise ValueError(f"{plan.source}: {' and '.join(open_keys)} {verb} the open-system "
                             f"Maxwell-Bloch solver (nl.MaxwellBloch(decay=..., dephasing=..., "
                             f"doppler=...)), which this build of nlsepy does not have") from None
        raise TypeError(f"{plan.source}: {exc}") from None
    except ValueError as exc:
        raise ValueError(f"{plan.source}: {exc}") from None


def _summary(plan: Plan, mb: Any, res: Any, files: List[str]) -> Dict[str, Any]:
    modes = [int(l) for l in res.modes]
    scale = np.array([plan.field_scale.get(l, 1.0) for l in modes])
    areas = res.areas() * scale
    energies = res.energies() * scale ** 2
    return {
        "name": plan.name, "source": plan.source, "format": plan.format,
        "n_g": mb.n_g, "n_e": mb.n_e, "modes": modes, "n_atoms": mb.n_atoms,
        "n_t": mb.n_t, "h_t": mb.h_t, "h_z": res.h_z, "z_end": float(res.z[-1]),
        "t0": plan.t0, "z0": plan.z0, "field_scale": [float(s) for s in scale],
        "labels": {str(l): s for l, s in plan.labels.items()},
        "backend": mb.backend, "dtype": np.dtype(mb.dtype).name,
        "open_system": any(k in plan.model for k in ("decay", "dephasing", "doppler")),
        "area_in": [float(a.real) for a in areas[0]], "area_out": [float(a.real) for a in areas[-1]],
        "energy_in": [float(e) for e in energies[0]], "energy_out": [float(e) for e in energies[-1]],
        "norm_deviation": float(res.norm_deviation), "seconds": float(res.seconds),
        "files": files,
    }


def run_config(path: Union[str, os.PathLike], out: Union[str, os.PathLike] = ".",
               backend: Optional[str] = None, progress: bool = False,
               announce: Optional[Callable[[str], None]] = None) -> Dict[str, Any]:
    """Run the file `path` and write its outputs into the folder `out`.

    The file is checked whole, the model made (its memory counted) and the
    outputs' names and folder checked before the run; the HDF5 run file
    (fields, populations, every parameter; :func:`nlsepy.open_run` reads
    it), the figure (:meth:`nlsepy.MaxwellBlochResult.plot`) and the JSON
    summary are staged and renamed together at the end, so a failed or
    interrupted run leaves none of them.

    Parameters
    ----------
    path : path-like
        The run file (see :mod:`nlsepy.mbloch.config`).
    out : path-like, optional
        The output folder (created when missing).
    backend : {"auto", "cpu", "cuda"}, optional
        Replaces the file's ``backend``.
    progress : bool, optional
        A progress bar over the z steps (tqdm).
    announce : callable, optional
        Called with a line saying what runs, before it runs.

    Returns
    -------
    dict
        The summary (also written as JSON unless left out): levels, modes,
        areas and energies of each mode at the first and last kept z (in
        the file's field units), the norm monitor, the wall time, the files.
    """
    plan = read_config(path)
    outs = OutputSet(out)
    outs.check_folder()
    names = {k: v for k, v in plan.outputs.items() if v is not None}
    for k, v in names.items():
        outs.reserve(v, f"{plan.source}: [output] {k}")
    if "plot" in names:
        require_matplotlib()
    if "run_file" in names:
        require_h5py()
    mb = build_model(plan, backend)
    if announce is not None:
        announce(f"running {plan.name}: {mb!r}, {plan.run['n_z']} z steps of "
                 f"{plan.run['h_z']:g}")
    kept: Dict[str, Any] = {}

    def go(output: Optional[str]) -> None:
        kept["res"] = mb.run(plan.fields, output=output, progress=progress, **plan.run)

    with outs:
        if "run_file" in names:
            outs.stage(names["run_file"], go)
        else:
            go(None)
        res = kept["res"]
        if "plot" in names:
            outs.stage(names["plot"], lambda p: res.plot(path=p, title=plan.name))
        files = [os.path.join(outs.folder, v) for v in names.values()]
        summary = _summary(plan, mb, res, files)
        if "summary" in names:
            outs.stage_text(names["summary"], json.dumps(summary, indent=2) + "\n")
        outs.commit()
    return summary
