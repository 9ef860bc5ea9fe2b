"""``maxwellbloch`` input files (tpogden/maxwellbloch's JSON) as runs of
:class:`nlsepy.MaxwellBloch` (docs/models/mbloch.md, "Input files").

maxwellbloch describes an atom of ``num_states`` levels driven by fields
that each couple ``coupled_levels`` pairs with strength ``factors`` at the
Rabi frequency :math:`\\Omega_f(t) = 2\\pi\\,\\mathrm{rabi\\_freq}\\,
f(t)` (its ``rabi_freq_t_func``), the rotating-frame Hamiltonian
:math:`H = 2\\pi\\,\\mathrm{diag(energies)} - \\sum_f s_f 2\\pi\\Delta_f
\\sum_{i \\in \\mathrm{upper}(f)} |i\\rangle\\langle i| + \\sum_f
\\tfrac{\\Omega_f}{2}\\sum_{(a,b)} c_{ab}(|a\\rangle\\langle b| + \\mathrm{h.c.})`
(upper(f): the second level of each pair, :math:`s_f = \\pm1` from
``detuning_positive``), decays ``[[a, b], ...]`` from b to a at
:math:`2\\pi\\,\\mathrm{rate}\\times\\mathrm{factor}^2`, and the
propagation :math:`\\partial_z\\Omega_f = i\\,2\\pi g_f N(z)\\sum c_{ab}^2
\\rho_{ab}` with ``interaction_strengths`` :math:`g_f` and the number
density N(z) (``num_density_z_func``, a square on [0, 1] by default);
velocity classes shift each field's detuning by ``factor_doppler_shift``
times the class's :math:`2\\pi\\delta`, weighted by
:math:`e^{-(\\delta/w)^2}` (normalised).

The map onto the model (the model's equations, :mod:`nlsepy.reference.mbloch`:
:math:`\\partial_z\\varepsilon_l = iP_l`, level energies linear in the level
index):

- levels: the lower level of each pair (the first, or the second with
  ``"detuning_positive": false``, maxwellbloch's way of writing a Λ) is a
  ground level, the other an excited one, each manifold in the order of
  the file's indices; levels in no pair are ground levels.  A level that is
  lower for one field and upper for another (a ladder) is refused;
- fields: field f is mode :math:`l_f = n - m` of its pairs (one l per
  field, a different l for every field); ``F[m, n]`` is the pair's factor
  times :math:`\\sqrt{g_f/g_1}`, the model's field is
  :math:`\\varepsilon_{l_f} = \\Omega_f/\\sqrt{g_f/g_1}` and
  :math:`\\beta = 2\\pi g_1 A` (A the density's amplitude, :math:`g_1` the
  first field's strength), so that every field propagates with its own
  :math:`g_f`; the summary and ``Plan.field_scale`` give the factors;
- energies: the diagonal of H must be equally spaced within each manifold
  (ground: :math:`\\kappa_g` per index, excited: :math:`\\kappa_e`); the
  atoms' detuning is that of excited level 0 against ground level 0;
- velocity classes: the atoms of the line (detunings shifted by the
  classes, Maxwell-Boltzmann weights), where every ground level shifts alike
  and every excited level alike (co-propagating fields of one Doppler
  factor); otherwise (a Λ, counter-propagating fields) ``doppler=`` of the
  model, a factor per mode (the shift of its transitions per unit of class
  shift) and the classes of an evenly spaced grid symmetric about 0;
- ``initial_state`` (populations): one atom per populated level and
  velocity class, weighted by the population (a mixture);
- the medium: the part of ``[z_min, z_max]`` where the square density is
  on, in steps of maxwellbloch's inner step; the outputs are kept at its
  outer steps;
- ``decays`` become ``decay=[(rate, from, to), ...]`` (channels of rate 0
  left out).

maxwellbloch couples the atoms to the real part of :math:`\\Omega` only;
the model keeps the complex envelope (the same for real, resonant pulses).
``method`` and ``opts`` (QuTiP's solver and its options) are read and left
unused.
"""

from __future__ import annotations

import math
import os
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..common.outputs import check_name
from .filekeys import Plan, integer, number, show, string

__all__ = ["from_maxwellbloch", "T_FUNCS"]

_TOP = {"atom", "t_min", "t_max", "t_steps", "method", "opts", "savefile", "z_min", "z_max",
        "z_steps", "z_steps_inner", "num_density_z_func", "num_density_z_args",
        "interaction_strengths", "velocity_classes"}
_ATOM = {"label", "num_states", "energies", "decays", "initial_state", "fields"}
_FIELD = {"label", "index", "coupled_levels", "factors", "detuning", "detuning_positive",
          "counter_propagating", "factor_doppler_shift", "rabi_freq", "rabi_freq_t_func",
          "rabi_freq_t_args"}
_VC = {"thermal_width", "thermal_delta_min", "thermal_delta_max", "thermal_delta_steps",
       "thermal_delta_inner_min", "thermal_delta_inner_max", "thermal_delta_inner_steps"}
_LN2 = math.log(2.0)
#: maxwellbloch's sech full width at half maximum over its width
_SECH_FWHM = 2.6339157938


def _gauss_edge(t: np.ndarray, at: float, fwhm: float) -> np.ndarray:
    return np.exp(-4 * _LN2 * ((t - at) / fwhm) ** 2)


def _amplitude(a: Dict[str, float], area_per_ampl: float, w: str) -> float:
    if ("ampl" in a) == ("n_pi" in a):
        raise ValueError(f"{w} needs exactly one of 'ampl' and 'n_pi'")
    return a["ampl"] if "ampl" in a else a["n_pi"] * math.pi / (2 * math.pi * area_per_ampl)


def _sech(t: np.ndarray, a: Dict[str, float], w: str) -> np.ndarray:
    if ("width" in a) == ("fwhm" in a):
        raise ValueError(f"{w} needs exactly one of 'width' and 'fwhm'")
    width = a["width"] if "width" in a else a["fwhm"] / _SECH_FWHM
    return _amplitude(a, math.pi * width, w) / np.cosh((t - a["centre"]) / width)


def _gaussian(t: np.ndarray, a: Dict[str, float], w: str) -> np.ndarray:
    area = a["fwhm"] * math.sqrt(math.pi / (4 * _LN2))
    return _amplitude(a, area, w) * _gauss_edge(t, a["centre"], a["fwhm"])


def _ramp_on(t: np.ndarray, a: Dict[str, float], w: str) -> np.ndarray:
    return a["ampl"] * np.where(t <= a["on"], _gauss_edge(t, a["on"], a["fwhm"]), 1.0)


def _ramp_off(t: np.ndarray, a: Dict[str, float], w: str) -> np.ndarray:
    return a["ampl"] * np.where(t >= a["off"], _gauss_edge(t, a["off"], a["fwhm"]), 1.0)


#: maxwellbloch's time functions: (function, the arguments each needs)
T_FUNCS = {
    "square": (lambda t, a, w: a["ampl"] * ((t >= a["on"]) & (t <= a["off"])),
               ("ampl", "on", "off")),
    "gaussian": (_gaussian, ("centre", "fwhm")),
    "sech": (_sech, ("centre",)),
    "ramp_on": (_ramp_on, ("ampl", "fwhm", "on")),
    "ramp_off": (_ramp_off, ("ampl", "fwhm", "off")),
    "ramp_onoff": (lambda t, a, w: _ramp_on(t, a, w) + _ramp_off(t, a, w) - a["ampl"],
                   ("ampl", "fwhm", "on", "off")),
    "ramp_offon": (lambda t, a, w: _ramp_on(t, a, w) + _ramp_off(t, a, w),
                   ("ampl", "fwhm", "on", "off")),
}


def _keys(d: Any, keys: set, what: str) -> Dict[str, Any]:
    if not isinstance(d, dict):
        raise ValueError(f"{what} must be an object, got {show(d)}")
    unknown = sorted(set(d) - keys)
    if unknown:
        raise ValueError(f"{what}: unknown key(s) {unknown}; known keys: {sorted(keys)}")
    return d


def _pulse(f: Dict[str, Any], t: np.ndarray, w: str) -> np.ndarray:
    name = string(f.get("rabi_freq_t_func") or "square", f"{w} rabi_freq_t_func")
    if name not in T_FUNCS:
        raise ValueError(f"{w} rabi_freq_t_func = {name!r} is not supported here; supported: "
                         f"{sorted(T_FUNCS)}")
    args = f.get("rabi_freq_t_args") or {"on": 0.0, "off": 1.0, "ampl": 1.0}
    if not isinstance(args, dict):
        raise ValueError(f"{w} rabi_freq_t_args must be an object, got {show(args)}")
    a = {k: number(v, f"{w} rabi_freq_t_args {k}") for k, v in args.items()}
    fn, need = T_FUNCS[name]
    missing = [k for k in need if k not in a]
    if missing:
        raise ValueError(f"{w} rabi_freq_t_func {name!r} needs rabi_freq_t_args {missing}")
    rabi = number(f.get("rabi_freq", 1.0), f"{w} rabi_freq")
    return 2 * math.pi * rabi * np.asarray(fn(t, a, f"{w} rabi_freq_t_args"), dtype=float)


def _pairs(f: Dict[str, Any], n: int, w: str) -> Tuple[List[Tuple[int, int]], List[float]]:
    cl = f.get("coupled_levels")
    if not isinstance(cl, list) or not cl:
        raise ValueError(f"{w} coupled_levels must be a non-empty list of [a, b], got {show(cl)}")
    pairs = []
    for i, p in enumerate(cl):
        if not isinstance(p, list) or len(p) != 2:
            raise ValueError(f"{w} coupled_levels[{i}] must be [a, b], got {show(p)}")
        a, b = (integer(x, f"{w} coupled_levels[{i}]", 0) for x in p)
        for x in (a, b):
            if x >= n:
                raise ValueError(f"{w} coupled_levels[{i}] = {p}: level {x} does not exist "
                                 f"(num_states = {n})")
        if a == b:
            raise ValueError(f"{w} coupled_levels[{i}] = {p} couples a level to itself")
        pairs.append((a, b))
    fac = f.get("factors") or [1.0] * len(pairs)
    if not isinstance(fac, list) or len(fac) != len(pairs):
        raise ValueError(f"{w} factors must list one number per pair of coupled_levels "
                         f"({len(pairs)}), got {show(fac)}")
    return pairs, [number(x, f"{w} factors[{i}]") for i, x in enumerate(fac)]


def _roles(fields: List[Dict[str, Any]], pairs: List[List[Tuple[int, int]]], n: int,
           source: str) -> Tuple[List[int], List[int]]:
    role: Dict[int, Tuple[str, int]] = {}
    for i, (f, ps) in enumerate(zip(fields, pairs)):
        for a, b in ps:
            lo, up = (a, b) if f.get("detuning_positive", True) else (b, a)
            for lev, r in ((lo, "lower"), (up, "upper")):
                if role.setdefault(lev, (r, i))[0] != r:
                    j = role[lev][1]
                    raise ValueError(
                        f"{source}: level {lev} is the {role[lev][0]} level of field {j} and the "
                        f"{r} level of field {i} (a ladder); nl.MaxwellBloch couples one ground "
                        f"manifold to one excited manifold (two-level, Λ, V, N, hyperfine). For a "
                        f"Λ write the pair as maxwellbloch does, with \"detuning_positive\": false")
    ground = [k for k in range(n) if role.get(k, ("lower",))[0] == "lower"]
    excited = [k for k in range(n) if role.get(k, ("lower",))[0] == "upper"]
    return ground, excited


def _spacing(h: np.ndarray, levels: List[int], what: str, source: str) -> float:
    """The spacing of h over `levels` (0 for one level); ValueError unless equal."""
    if len(levels) < 2:
        return 0.0
    d = np.diff(h[levels])
    scale = max(1.0, float(np.abs(h).max()))
    if np.abs(d - d[0]).max() > 1e-12 * scale:
        raise ValueError(f"{source}: the rotating-frame energies of the {what} levels "
                         f"{levels} are {[float(x) for x in h[levels]]}, not equally spaced "
                         f"in the order of their indices: nl.MaxwellBloch's levels have "
                         f"energies m kappa_g (ground) and n kappa_e (excited)")
    return float(-d[0])


def from_maxwellbloch(data: Dict[str, Any], source: str) -> Plan:
    """The :class:`~nlsepy.mbloch.filekeys.Plan` of a maxwellbloch input (see the module docstring).

    Raises
    ------
    ValueError
        An unknown key, a value of the wrong type, or a system the model
        cannot hold (a ladder, fields that share or mix their offsets,
        unequally spaced energies, an unsupported time or density function,
        velocity classes with per-field factors on an uneven or one-sided grid).
    """
    _keys(data, _TOP, source)
    atom = _keys(data["atom"], _ATOM, f"{source}: atom")
    n = integer(atom.get("num_states", 1), f"{source}: atom num_states", 1)
    fields = atom.get("fields", [])
    if not isinstance(fields, list) or not fields:
        raise ValueError(f"{source}: atom fields must be a non-empty list, got {show(fields)}")
    fw = [f"{source}: atom fields[{i}]" for i in range(len(fields))]
    for f, w in zip(fields, fw):
        _keys(f, _FIELD, w)
    pairs, factors = zip(*(_pairs(f, n, w) for f, w in zip(fields, fw)))
    ground, excited = _roles(fields, list(pairs), n, source)
    if not excited:
        raise ValueError(f"{source}: no field couples two levels")
    pos = {lev: m for m, lev in enumerate(ground)}
    pos.update({lev: k for k, lev in enumerate(excited)})
    # one mode per field: l = n - m over its pairs
    mode_of: List[int] = []
    for i, (f, ps) in enumerate(zip(fields, pairs)):
        up_first = not f.get("detuning_positive", True)
        ls = {pos[a if up_first else b] - pos[b if up_first else a] for a, b in ps}
        if len(ls) != 1:
            raise ValueError(f"{fw[i]} couples pairs at different offsets n - m {sorted(ls)} "
                             f"(ground levels {ground}, excited {excited} in index order): in "
                             f"nl.MaxwellBloch a field couples ground m to excited m + l, one l")
        mode_of.append(ls.pop())
    for i, l in enumerate(mode_of):
        if mode_of.index(l) != i:
            raise ValueError(f"{fw[i]} and {fw[mode_of.index(l)]} fall on the same mode l = {l} "
                             f"(the same offset n - m): each field needs a mode of its own")
    # interaction strengths and the field scale
    g = data.get("interaction_strengths", [])
    if not isinstance(g, list) or len(g) != len(fields):
        raise ValueError(f"{source}: interaction_strengths must list one number per field "
                         f"({len(fields)}), got {show(g)}")
    g = [number(x, f"{source}: interaction_strengths[{i}]", nonneg=True) for i, x in enumerate(g)]
    if 0 < sum(x == 0 for x in g) < len(g):
        raise ValueError(f"{source}: interaction_strengths {g} mix zero and nonzero strengths: "
                         f"nl.MaxwellBloch scales each field by sqrt(g_f / g_1)")
    scale = [math.sqrt(x / g[0]) if g[0] > 0 else 1.0 for x in g]
    F = np.zeros((len(ground), len(excited)))
    for i, (f, ps, fs) in enumerate(zip(fields, pairs, factors)):
        up_first = not f.get("detuning_positive", True)
        for (a, b), c in zip(ps, fs):
            lo, up = (b, a) if up_first else (a, b)
            F[pos[lo], pos[up]] = c * scale[i]
    model: Dict[str, Any] = {"n_g": len(ground), "n_e": len(excited),
                             "modes": (min(mode_of), max(mode_of)), "F": F}
    _grids(data, source, model)
    beta, run, z0 = _medium(data, source, model["h_t"])
    model["beta"] = 2 * math.pi * g[0] * beta
    # rotating-frame energies, their Doppler coefficients, the line
    h = np.zeros(n)
    s = np.zeros(n)
    energies = atom.get("energies") or []
    if energies:
        if not isinstance(energies, list) or len(energies) != n:
            raise ValueError(f"{source}: atom energies must list num_states = {n} numbers, got "
                             f"{show(energies)}")
        h += 2 * math.pi * np.array([number(x, f"{source}: atom energies[{i}]")
                                     for i, x in enumerate(energies)])
    for f, ps, w in zip(fields, pairs, fw):
        sgn = 1.0 if f.get("detuning_positive", True) else -1.0
        fds = -1.0 if f.get("counter_propagating", False) else \
            number(f.get("factor_doppler_shift", 1.0), f"{w} factor_doppler_shift")
        for up in sorted({b for _, b in ps}):
            h[up] -= sgn * 2 * math.pi * number(f.get("detuning", 0.0), f"{w} detuning")
            s[up] -= sgn * 2 * math.pi * fds
    model["kappa_g"] = _spacing(h, ground, "ground", source)
    model["kappa_e"] = _spacing(h, excited, "excited", source)
    delta0 = float(h[excited[0]] - h[ground[0]])
    det, w8, doppler = _velocity(data, source, s, ground, excited, pairs, fields, pos, mode_of,
                                 model["modes"])
    if doppler is not None:
        model["doppler"] = doppler
    _initial(atom, source, n, pos, ground, len(excited), delta0 + det, w8, model)
    if doppler is not None:  # the model gives every atom of the line every class, atom major
        psi = model["initial_state"]
        model["initial_state"] = psi[0] if psi.shape[0] == 1 else \
            np.repeat(psi, doppler["n_classes"], axis=0)
    decay = _decays(atom, source, n, pos, ground)
    if decay:
        model["decay"] = decay
    t = model["h_t"] * np.arange(model["n_t"]) + float(data.get("t_min", 0.0))
    fields0 = {}
    labels = {}
    for i, (f, w) in enumerate(zip(fields, fw)):
        fields0[mode_of[i]] = (_pulse(f, t, w) / scale[i]).astype(complex)
        labels[mode_of[i]] = string(f.get("label", f"field {i}"), f"{w} label")
    name = data.get("savefile") or os.path.splitext(os.path.basename(source))[0] or "mbloch"
    name = check_name(string(name, f"{source}: savefile"), f"{source}: savefile")
    outputs = {"run_file": f"{name}.h5", "plot": f"{name}.png", "summary": f"{name}.json"}
    return Plan(source=source, name=name, model=model, fields=fields0, run=run,
                outputs=outputs, labels=labels,
                field_scale={mode_of[i]: scale[i] for i in range(len(fields))},
                t0=float(data.get("t_min", 0.0)), z0=z0, format="maxwellbloch")


def _grids(data: Dict[str, Any], source: str, model: Dict[str, Any]) -> None:
    t_min = number(data.get("t_min", 0.0), f"{source}: t_min")
    t_max = number(data.get("t_max", 1.0), f"{source}: t_max")
    steps = integer(data.get("t_steps", 100), f"{source}: t_steps", 1)
    if t_max <= t_min:
        raise ValueError(f"{source}: t_max = {t_max!r} must be after t_min = {t_min!r}")
    model["h_t"], model["n_t"] = (t_max - t_min) / steps, steps + 1


def _medium(data: Dict[str, Any], source: str, h_t: float) -> Tuple[float, Dict[str, Any], float]:
    """(density amplitude, run arguments, z of the medium's front)."""
    z_min = number(data.get("z_min", 0.0), f"{source}: z_min")
    z_max = number(data.get("z_max", 1.0), f"{source}: z_max")
    z_steps = integer(data.get("z_steps", 10), f"{source}: z_steps", 1)
    inner = integer(data.get("z_steps_inner", 2), f"{source}: z_steps_inner", 1)
    if z_max <= z_min:
        raise ValueError(f"{source}: z_max = {z_max!r} must be after z_min = {z_min!r}")
    func = data.get("num_density_z_func") or "square"
    if func != "square":
        raise ValueError(f"{source}: num_density_z_func = {show(func)} is not supported: "
                         f"nl.MaxwellBloch's medium is uniform (use \"square\")")
    args = data.get("num_density_z_args") or {"on": 0.0, "off": 1.0, "ampl": 1.0}
    args = _keys(args, {"on", "off", "ampl"}, f"{source}: num_density_z_args")
    on, off = (number(args.get(k, d), f"{source}: num_density_z_args {k}")
               for k, d in (("on", 0.0), ("off", 1.0)))
    ampl = number(args.get("ampl", 1.0), f"{source}: num_density_z_args ampl", nonneg=True)
    front, back = max(on, z_min), min(off, z_max)
    if back <= front:
        raise ValueError(f"{source}: the medium (num_density_z_args on = {on!r}, off = {off!r}) "
                         f"lies outside [z_min, z_max] = [{z_min!r}, {z_max!r}]")
    step = (z_max - z_min) / (z_steps * inner)
    n_z = max(1, round((back - front) / step))
    h_z = (back - front) / n_z
    every = max(1, round((z_max - z_min) / z_steps / h_z))
    return ampl, {"h_z": h_z, "n_z": n_z, "save_every": every}, front


def _velocity(data: Dict[str, Any], source: str, s: np.ndarray, ground: List[int],
              excited: List[int], pairs: Any, fields: Any, pos: Dict[int, int],
              mode_of: List[int], modes: Tuple[int, int]
              ) -> Tuple[np.ndarray, np.ndarray, Optional[Dict[str, Any]]]:
    """The velocity classes: as detuning shifts and weights of the line
    where every ground level shifts alike and every excited level alike,
    else as ``doppler=`` (per-mode factors) of the model; one class at 0
    without classes."""
    vc = _keys(data.get("velocity_classes") or {}, _VC, f"{source}: velocity_classes")
    w = f"{source}: velocity_classes"
    c = {"thermal_width": 1.0, "thermal_delta_min": 0.0, "thermal_delta_max": 0.0,
         "thermal_delta_steps": 0, "thermal_delta_inner_min": 0.0,
         "thermal_delta_inner_max": 0.0, "thermal_delta_inner_steps": 0}
    for k, v in vc.items():
        c[k] = integer(v, f"{w} {k}", 0) if k.endswith("steps") else number(v, f"{w} {k}")
    width = number(c["thermal_width"], f"{w} thermal_width", positive=True)
    deltas = np.unique(np.concatenate([
        np.linspace(c["thermal_delta_min"], c["thermal_delta_max"], c["thermal_delta_steps"] + 1),
        np.linspace(c["thermal_delta_inner_min"], c["thermal_delta_inner_max"],
                    c["thermal_delta_inner_steps"] + 1)]))
    uniform = all(np.ptp(s[levels]) == 0 for levels in (ground, excited))
    if (deltas.size == 1 and deltas[0] == 0) or uniform:
        weights = np.exp(-(deltas / width) ** 2)
        shift = (s[excited[0]] - s[ground[0]]) * deltas
        return shift, weights / weights.sum(), None
    return np.zeros(1), np.ones(1), _doppler(deltas, width, s, ground, pairs, fields, pos,
                                               mode_of, modes, w)


def _doppler(deltas: np.ndarray, width: float, s: np.ndarray, ground: List[int], pairs: Any,
             fields: Any, pos: Dict[int, int], mode_of: List[int], modes: Tuple[int, int],
             w: str) -> Dict[str, Any]:
    """``doppler=`` of the model for classes whose shifts differ within a
    manifold (a Λ's two fields): mode l's factor is the shift of its pairs'
    transition per unit of class shift, (s_e - s_g) / 2 pi; the classes
    are the midpoint-rule sample of nl.mbloch.Doppler whose nodes are
    maxwellbloch's evenly spaced, symmetric grid (weights not renormalised:
    the Gaussian's tails beyond the grid are left out)."""
    d = np.diff(deltas)
    if deltas[0] != -deltas[-1] or np.ptp(d) > 1e-12 * abs(deltas[-1]):
        raise ValueError(f"{w}: with Doppler shifts that differ within a manifold (per-field "
                         f"factors) the classes must be one evenly spaced grid symmetric about 0, "
                         f"got {[float(x) for x in deltas]}")
    factors = [0.0] * (modes[1] - modes[0] + 1)
    for i, (f, ps) in enumerate(zip(fields, pairs)):
        up_first = not f.get("detuning_positive", True)
        got = {float(s[b if not up_first else a] - s[a if not up_first else b]) / (2 * math.pi)
               for a, b in ps}
        if len(got) != 1:
            raise ValueError(f"{w}: field {i} shifts its pairs' transitions by different "
                             f"factors {sorted(got)}: one Doppler factor per field")
        factors[mode_of[i] - modes[0]] = got.pop()
    n = deltas.size
    sigma = 2 * math.pi * width / math.sqrt(2)
    return {"factors": factors, "width": sigma, "n_classes": int(n),
            "span": float(n * d[0] / (math.sqrt(2) * width))}


def _decays(atom: Dict[str, Any], source: str, n: int, pos: Dict[int, int],
            ground: List[int]) -> List[Tuple[float, int, int]]:
    """``(rate, from, to)`` in the model's level numbers (ground first) of
    every channel of nonzero rate: channel [a, b] takes b to a at 2 pi rate
    factor^2 (maxwellbloch's collapse operator sqrt(2 pi rate) factor |a><b|)."""
    decays = atom.get("decays") or []
    if not isinstance(decays, list):
        raise ValueError(f"{source}: atom decays must be a list, got {show(decays)}")
    n_g = len(ground)
    index = {lev: pos[lev] + (0 if lev in ground else n_g) for lev in range(n)}
    out = []
    for i, d in enumerate(decays):
        w = f"{source}: atom decays[{i}]"
        _keys(d, {"rate", "channels", "factors"}, w)
        rate = number(d.get("rate", 0.0), f"{w} rate", nonneg=True)
        chans = d.get("channels")
        if not isinstance(chans, list) or not chans:
            raise ValueError(f"{w} channels must be a non-empty list of [a, b], got {show(chans)}")
        fac = d.get("factors") or [1.0] * len(chans)
        if not isinstance(fac, list) or len(fac) != len(chans):
            raise ValueError(f"{w} factors must list one number per channel ({len(chans)}), got "
                             f"{show(fac)}")
        for k, (c, f) in enumerate(zip(chans, fac)):
            if not isinstance(c, list) or len(c) != 2:
                raise ValueError(f"{w} channels[{k}] must be [a, b], got {show(c)}")
            a, b = (integer(x, f"{w} channels[{k}]", 0) for x in c)
            if max(a, b) >= n:
                raise ValueError(f"{w} channels[{k}] = {c}: level {max(a, b)} does not exist "
                                 f"(num_states = {n})")
            r = 2 * math.pi * rate * number(f, f"{w} factors[{k}]") ** 2
            if r > 0:
                out.append((r, index[b], index[a]))
    return out


def _initial(atom: Dict[str, Any], source: str, n: int, pos: Dict[int, int],
             ground: List[int], n_e: int, det: np.ndarray, w8: np.ndarray,
             model: Dict[str, Any]) -> None:
    """The line and initial states: one atom per velocity class and populated level."""
    pops = atom.get("initial_state") or [1.0] + [0.0] * (n - 1)
    if not isinstance(pops, list) or len(pops) != n:
        raise ValueError(f"{source}: atom initial_state must list num_states = {n} populations, "
                         f"got {show(pops)}")
    p = np.array([number(x, f"{source}: atom initial_state[{i}]", nonneg=True)
                  for i, x in enumerate(pops)])
    if abs(p.sum() - 1) > 1e-9:
        raise ValueError(f"{source}: atom initial_state populations must sum to 1, got "
                         f"{p.sum()!r}")
    n_g = len(ground)
    dets, weights, states = [], [], []
    for lev in np.flatnonzero(p):
        psi = np.zeros(n_g + n_e)
        psi[pos[lev] + (0 if lev in ground else n_g)] = 1.0
        dets.append(det)
        weights.append(w8 * p[lev])
        states.append(np.tile(psi, (det.size, 1)))
    det, w8 = np.concatenate(dets), np.concatenate(weights)
    if det.size == 1:
        model["line"] = ("single", float(det[0]))
    else:
        model["line"] = (det, w8)
        model["n_atoms"] = int(det.size)
    model["initial_state"] = np.concatenate(states)
