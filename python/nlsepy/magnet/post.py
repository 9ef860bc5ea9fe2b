"""Post-processing of the magnet-design Laplace problem: potential jump, winding, field.

Source 002 (Madhubhashini's thesis) designs a cylindrical magnet of radius
``r0`` and half-height ``z0`` whose field inside is the uniform ``B z``.  The
scalar potential of ``H = B / mu0 = -grad Phi`` is chosen inside (section
1.4.2, eq. 1.23), the potential outside is the solution of the Laplace problem
of Table 1.1 (:mod:`nlsepy.reference.magnet`, or any solver of the same
rows), and the jump

    Delta Phi = Phi_outside - Phi_inside                               (eq. 6.3)

across the magnet's surface is the stream function of the surface current
that makes the field (section 1.4.3, eq. 1.34): the current crossing the
surface between two points is the difference of Delta Phi there.  Equally
spaced levels of Delta Phi therefore place wires that each carry the same
current (section 6.3.3, eq. 6.6), and the field of those wires, circular loops
by Biot-Savart (eqs. 6.7-6.8), shows how uniform the magnet's field is
(Figs 6.15-6.16).

Conventions are those of :mod:`nlsepy.reference.magnet`: ``phi[i, j]`` at
``r = i dr``, ``z = j dz`` with z up; the magnet occupies ``i < i0 = r0/dr``,
``j < j0 = z0/dz`` (NaN there), its side is ``i = i0, 0 <= j <= j0`` and its
cap ``j = j0, 0 <= i <= i0``; the cap condition is Table 1.1's
``dPhi/dz = -B/mu0``; ``MU0 = 4e-7 pi``.  Phi and Delta Phi are in amperes
(H is in A/m).

Functions
---------
phi_inside      the potential inside the magnet, ``-B z / mu0`` (eq. 1.23)
cap_field       the field B a solved phi carries through its cap rows (eq. 2.30)
delta_phi       Delta Phi along the side and the cap (eq. 6.3, Figs 6.5/6.6)
winding         wire positions at the levels ``(k - 1/2) I_step`` (eq. 6.6)
loop_field      Br, Bz of circular current loops (Biot-Savart; eq. 6.7 on axis)
field_inside    the field of the winding inside the magnet (eq. 6.8)
homogeneity     max ``|normalized field difference|`` over the middle of the axis
plot            contours of Phi with the magnet and the wires (matplotlib)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

import numpy as np

from ..common.checks import count, real
from ..common.guard import require_memory
from ..reference.magnet import MU0, whole_spacings

__all__ = ["MU0", "Winding", "phi_inside", "cap_field", "delta_phi", "winding", "loop_field",
           "field_inside", "homogeneity", "plot"]


#: bytes per wire that :func:`winding` takes at its peak (levels, positions
#: and their temporaries)
WINDING_BYTES_PER_TURN = 56
#: (field point, loop) pairs :func:`loop_field` evaluates at once: larger
#: problems go in blocks of points (and of loops past this many loops)
LOOP_BLOCK_PAIRS = 1 << 18
#: bytes per pair of one block at its peak (the elliptic integrals and the
#: field terms)
_PAIR_BYTES = 30 * 8


# ------------------------------------------------------------------ checks

def _geometry(phi: Any, dr: Any, dz: Any, r0: Any, z0: Any) -> Tuple[np.ndarray, float, float,
                                                                       float, float, int, int]:
    """Check the solved potential against the geometry; return it as floats with the sizes."""
    dr, dz = real("dr", dr, positive=True), real("dz", dz, positive=True)
    r0, z0 = real("r0", r0, positive=True), real("z0", z0, positive=True)
    i0, j0 = whole_spacings(r0, dr, "r0"), whole_spacings(z0, dz, "z0")
    arr = np.asarray(phi)
    if arr.dtype.kind not in "fiu" or arr.dtype == bool:
        raise ValueError(f"phi must be a real array, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"phi must be a 2-D array phi[i, j] at (r, z) = (i dr, j dz), "
                         f"got shape {arr.shape}")
    nr, nz = arr.shape
    if nr < i0 + 2 or nz < j0 + 2:
        raise ValueError(f"phi has shape {arr.shape}, too small for the magnet r0 = {r0!r}, "
                         f"z0 = {z0!r} at dr = {dr!r}, dz = {dz!r}: it needs at least "
                         f"({i0 + 2}, {j0 + 2}) nodes (r0/dr + 2, z0/dz + 2) to reach outside")
    arr = arr.astype(float, copy=False)
    side, cap = arr[i0, :j0 + 1], arr[:i0 + 1, j0]
    if not (np.all(np.isfinite(side)) and np.all(np.isfinite(cap))):
        raise ValueError(f"phi has non-finite values on the magnet's surface (i = {i0} or "
                         f"j = {j0}): shape {arr.shape} does not match r0 = {r0!r}, "
                         f"z0 = {z0!r} at dr = {dr!r}, dz = {dz!r}, or phi is not solved")
    return arr, dr, dz, r0, z0, i0, j0


def _field_arg(B: Any) -> float:
    """B as a finite non-zero float."""
    b = real("B", B)
    if b == 0.0:
        raise ValueError(f"B must be non-zero (the magnet's field), got {B!r}")
    return b


# ------------------------------------------------------------------ potential jump

def phi_inside(z: Any, B: float) -> np.ndarray:
    """Scalar potential inside the magnet, ``Phi_inside = -B z / mu0`` (eq. 1.23).

    Section 1.4.2 asks for the uniform field ``B z_hat`` inside; with
    ``H = B / mu0 = -grad Phi`` (eqs. 1.10, 1.12) that is
    ``dPhi/dz = -B / mu0`` and, with ``Phi = 0`` on the midplane (boundary 6
    of Table 1.1), ``Phi_inside = -B z / mu0``.  The sign agrees with the cap
    condition of Table 1.1 used by :mod:`nlsepy.reference.magnet`: the
    normal field B_z is continuous across the cap, so just outside it
    ``dPhi_outside/dz = -B / mu0`` as well.

    Parameters
    ----------
    z : array_like
        Heights (m), z up from the midplane.
    B : float
        Field inside the magnet (T), along +z when positive.

    Returns
    -------
    numpy.ndarray
        ``-B z / mu0`` (A), the shape of `z`.
    """
    b = real("B", B)
    zz = np.asarray(z, dtype=float)
    if not np.all(np.isfinite(zz)):
        raise ValueError("z contains non-finite values (NaN or Inf)")
    return -b * zz / MU0


def cap_field(phi: Any, dr: float, dz: float, r0: float, z0: float) -> float:
    """The field B whose cap condition a solved potential satisfies.

    The cap rows of Table 2.1 (eq. 2.30 with z up, as in
    :func:`nlsepy.reference.magnet.coaxial_stencil`) read

        a Phi[i+1, j0] + b Phi[i-1, j0] + 2 gamma Phi[i, j0+1] + e Phi[i, j0]
            = -2 gamma B dz / mu0,

    with ``gamma = (dr/dz)^2``, ``a, b = 1 +- 1/(2i)``, ``e = -2 (1 + gamma)``
    on ``0 < i < i0``, ``a = 4, b = 0, e = -2 (2 + gamma)`` on the axis
    (corner C) and ``a = 2, b = 0, e = -2 (1 + gamma)`` at the rim (corner D).
    Each row gives B; this returns their mean.  For a potential solved from
    those rows it is B up to the solver tolerance; for one solved from
    another consistent discretisation it is B up to the truncation error.

    Parameters
    ----------
    phi : array_like
        Solved potential, shape ``(nr, nz)``.
    dr, dz : float
        Spacings (m).
    r0, z0 : float
        Magnet radius and half-height (m).

    Returns
    -------
    float
        B (T).
    """
    p, dr, dz, r0, z0, i0, j0 = _geometry(phi, dr, dz, r0, z0)
    g = (dr / dz) ** 2
    i = np.arange(i0 + 1, dtype=float)
    alpha = np.where(i > 0, 0.5 / np.maximum(i, 1.0), 0.0)
    a = np.where(i == 0, 4.0, np.where(i == i0, 2.0, 1.0 + alpha))
    b = np.where((i == 0) | (i == i0), 0.0, 1.0 - alpha)
    e = np.where(i == 0, -2.0 * (2.0 + g), -2.0 * (1.0 + g))
    here = p[:i0 + 1, j0]
    up = p[:i0 + 1, j0 + 1]
    right = p[1:i0 + 2, j0]
    left = np.concatenate(([0.0], here[:-1]))
    lhs = a * right + b * left + 2.0 * g * up + e * here
    return float(np.mean(-MU0 * lhs / (2.0 * g * dz)))


def _resolve_B(p: np.ndarray, dr: float, dz: float, r0: float, z0: float,
               B: Optional[float]) -> float:
    """B as given (checked against the sign phi was solved with), or read from phi's cap."""
    found = cap_field(p, dr, dz, r0, z0)
    if B is None:
        if not math.isfinite(found) or found == 0.0:
            raise ValueError(f"phi carries no field through its cap (B read from the cap rows "
                             f"= {found!r}); pass B")
        return found
    b = _field_arg(B)
    if found * b < 0 and abs(found) > 1e-3 * abs(b):
        raise ValueError(f"B = {B!r} has the opposite sign of the cap condition phi was solved "
                         f"with (B = {found:.6g} from its cap rows); note Table 2.1 of the "
                         f"source, read with j downwards, solves for -Phi")
    return b


def delta_phi(phi: Any, dr: float, dz: float, r0: float, z0: float,
              B: Optional[float] = None) -> Dict[str, Any]:
    """The potential jump across the magnet's surface (eq. 6.3, Figs 6.5 and 6.6).

    ``Delta Phi = Phi_outside - Phi_inside`` with ``Phi_outside`` the solved
    potential at the surface nodes and ``Phi_inside = -B z / mu0``
    (eq. 1.23):

    * side (``r = r0``, ``z_j = j dz``, ``0 <= j <= j0``):
      ``phi[i0, j] + B z_j / mu0``; it is 0 at z = 0 (boundary 6) and grows
      with z;
    * cap (``z = z0``, ``r_i = i dr``, ``0 <= i <= i0``):
      ``phi[i, j0] + B z0 / mu0``; largest on the axis, flat there
      (``dDelta Phi/dr = 0``) and falling towards the rim.

    Both share the corner node ``(i0, j0)``.  The lower half follows from the
    symmetry ``Delta Phi(-z) = -Delta Phi(z)`` (Fig. 6.3).  Along the path
    from the midplane up the side and in along the cap to the axis, Delta Phi
    is the azimuthal current (A) crossing the path so far (eq. 1.34).

    Parameters
    ----------
    phi : array_like
        Solved potential ``phi[i, j]`` at ``(i dr, j dz)``, shape ``(nr, nz)``
        with ``nr >= r0/dr + 2``, ``nz >= z0/dz + 2``; NaN (or anything)
        strictly inside the magnet, finite on its surface.
    dr, dz : float
        Spacings (m).
    r0, z0 : float
        Magnet radius and half-height (m), whole multiples of dr and dz.
    B : float, optional
        Field inside (T).  Default: read from phi's cap rows
        (:func:`cap_field`); when given, its sign is checked against them.

    Returns
    -------
    dict
        ``"z"``: side heights ``0 .. z0``; ``"side"``: Delta Phi there (A);
        ``"r"``: cap radii ``0 .. r0``; ``"cap"``: Delta Phi there (A);
        ``"s"``: arc length along the path (side up, then cap inwards, the
        corner once), ``"path"``: Delta Phi along it; ``"B"``: the field used.
    """
    p, dr, dz, r0, z0, i0, j0 = _geometry(phi, dr, dz, r0, z0)
    b = _resolve_B(p, dr, dz, r0, z0, B)
    z = np.arange(j0 + 1) * dz
    r = np.arange(i0 + 1) * dr
    side = p[i0, :j0 + 1] - phi_inside(z, b)
    cap = p[:i0 + 1, j0] - phi_inside(z0, b)
    s = np.concatenate((z, z0 + (r0 - r[-2::-1])))
    path = np.concatenate((side, cap[-2::-1]))
    return {"z": z, "side": side, "r": r, "cap": cap, "s": s, "path": path, "B": b}


# ------------------------------------------------------------------ winding

@dataclass(frozen=True)
class Winding:
    """Wires on the upper half of the magnet at equally spaced Delta Phi levels.

    Attributes
    ----------
    z_side : numpy.ndarray
        Heights (m) of the side wires, loops of radius r0, ascending.
    r_cap : numpy.ndarray
        Radii (m) of the cap wires at height z0, from the rim inwards.
    levels : numpy.ndarray
        The Delta Phi levels ``Delta Phi_A + (k - 1/2) I`` (A), ``k = 1 .. n_turns``
        (``Delta Phi_A = 0``, boundary 6).
    current : float
        Current per wire, ``I = Delta Phi_total / n_turns`` (A), positive
        for B > 0: every wire, on both halves, carries it in the +phi sense
        (right-handed about +z).
    total_current : float
        ``Delta Phi_B - Delta Phi_A`` (A): the jump on the axis at the cap
        minus the jump at the midplane of the side (which is 0), the
        current on the upper half (Fig. 6.11).
    r0, z0 : float
        Magnet size (m).
    """

    z_side: np.ndarray
    r_cap: np.ndarray
    levels: np.ndarray
    current: float
    total_current: float
    r0: float
    z0: float

    @property
    def n_turns(self) -> int:
        """Wires on the upper half."""
        return int(self.z_side.size + self.r_cap.size)

    def loops(self) -> Tuple[np.ndarray, np.ndarray]:
        """Radius and height of all ``2 n_turns`` loops, the lower half mirrored.

        The lower half is the mirror image in z = 0 with the same current in
        the same sense: ``Phi(-z) = -Phi(z)`` makes ``B_z`` even and ``B_r``
        odd in z, so the azimuthal sheet current ``K = n x (H_out - H_in)``
        is even on the side and on the caps.

        Returns
        -------
        radius, height : numpy.ndarray
            One entry per loop.
        """
        rad = np.concatenate((np.full(self.z_side.size, self.r0), self.r_cap))
        hgt = np.concatenate((self.z_side, np.full(self.r_cap.size, self.z0)))
        return np.concatenate((rad, rad)), np.concatenate((hgt, -hgt))


def winding(phi: Any, dr: float, dz: float, r0: float, z0: float, n_turns: int,
            B: Optional[float] = None) -> Winding:
    """Wire positions at equally spaced levels of Delta Phi (eqs. 1.34, 6.6).

    By eq. 1.34, ``Delta Phi_B - Delta Phi_A`` is the current crossing the
    surface between A and B.  Following section 6.3.3, the total current on
    the upper half is ``Delta Phi_total = Delta Phi(axis, z0) -
    Delta Phi(r0, 0)`` (points B and A of Fig. 6.11), it is split into
    ``n_turns`` equal steps ``I = Delta Phi_total / n_turns`` and the wires sit
    at the levels

        Delta Phi_k = (k - 1/2) I,    k = 1 .. n_turns                  (eq. 6.6)

    counted from the midplane: each wire stands for the sheet current of the
    band ``[(k - 1) I, k I]`` and carries I.  Positions are found by linear
    interpolation of Delta Phi against arc length along the surface path
    (side from z = 0 up to the corner, then the cap inwards to the axis), on
    which Delta Phi is monotone; levels below the corner value are side wires
    (loops of radius r0 at height z), the others cap wires (radius r at z0).
    The source interpolated Figs 6.5/6.6 with ``scipy.interpolate.interp1d``
    (linear by default); this is the same on the path.

    Units: Phi is the potential of H (``H = -grad Phi``, ``B = mu0 H``), in
    amperes, so Delta Phi and I are in A; for ``B = -mu0 grad Phi`` the jump
    of Phi across a current sheet is the sheet's stream function.

    Parameters
    ----------
    phi, dr, dz, r0, z0
        As for :func:`delta_phi`: the solved potential, its spacings and the magnet.
    n_turns : int
        Wires on the upper half (>= 1); the magnet has ``2 n_turns``.
    B : float, optional
        Field inside (T); default read from phi (:func:`cap_field`).

    Returns
    -------
    Winding
        Side heights, cap radii, levels, current per wire and total current.
    """
    n = count("n_turns", n_turns, minimum=1)
    require_memory(WINDING_BYTES_PER_TURN * n, f"a winding of n_turns = {n} wires",
                   advice="use fewer turns")
    d = delta_phi(phi, dr, dz, r0, z0, B)
    s, path = d["s"], d["path"]
    z0f, r0f = float(d["z"][-1]), float(d["r"][-1])
    total = float(path[-1] - path[0])
    sgn = 1.0 if total > 0 else -1.0
    if total == 0.0 or not np.all(sgn * np.diff(path) > 0):
        raise ValueError("phi: Delta Phi is not strictly monotone along the magnet's surface "
                         "(side up, cap inwards); is phi converged and solved for this B?")
    step = total / n
    levels = path[0] + (np.arange(1, n + 1) - 0.5) * step
    pos = np.interp(sgn * levels, sgn * path, s)
    on_side = pos <= z0f
    z_side = pos[on_side]
    r_cap = r0f - (pos[~on_side] - z0f)
    return Winding(z_side=z_side, r_cap=r_cap, levels=levels, current=step,
                   total_current=total, r0=r0f, z0=z0f)


# ------------------------------------------------------------------ field

def _ellipke(m: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Complete elliptic integrals K(m), E(m) (parameter m = k^2 in [0, 1)) by the AGM."""
    a = np.ones_like(m)
    b = np.sqrt(1.0 - m)
    c2 = m.copy()                     # c_n^2, c_0 = k
    acc = 0.5 * c2                    # sum 2^(n-1) c_n^2
    w = 0.5
    for _ in range(40):
        a, b, c = 0.5 * (a + b), np.sqrt(a * b), 0.5 * (a - b)
        w *= 2.0
        c2 = c * c
        acc = acc + w * c2
        if float(np.max(c2)) < 1e-33:
            break
    K = np.pi / (2.0 * a)
    return K, K * (1.0 - acc)


def loop_field(radius: Any, height: Any, current: Any, r: Any, z: Any) -> Tuple[np.ndarray, np.ndarray]:
    """Field (Br, Bz) of circular current loops about the z axis (Biot-Savart).

    On the axis this is eq. 6.7, ``Bz = mu0 I a^2 / (2 (a^2 + (z - z_w)^2)^(3/2))``;
    off the axis the standard closed form with complete elliptic integrals
    (``k^2 = 4 a r / ((a + r)^2 + dz^2)``, ``dz = z - z_w``):

        Bz = mu0 I / (2 pi sqrt((a + r)^2 + dz^2)) [K + (a^2 - r^2 - dz^2) / ((a - r)^2 + dz^2) E]
        Br = mu0 I dz / (2 pi r sqrt((a + r)^2 + dz^2)) [-K + (a^2 + r^2 + dz^2) / ((a - r)^2 + dz^2) E]

    Parameters
    ----------
    radius, height, current : array_like
        Loops (m, m, A; broadcast together, 1-D); positive current circulates
        in the +phi sense.
    r, z : array_like
        Field points (m), broadcast together; ``r >= 0``.

    Returns
    -------
    Br, Bz : numpy.ndarray
        Summed over the loops (T), the broadcast shape of `r` and `z`
        (infinite on a wire).
    """
    a, zw, cur = (np.ravel(x).astype(float) for x in np.broadcast_arrays(radius, height, current))
    rr, zz = (np.asarray(x, dtype=float) for x in np.broadcast_arrays(r, z))
    if np.any(a <= 0) or not (np.all(np.isfinite(a)) and np.all(np.isfinite(zw))
                              and np.all(np.isfinite(cur))):
        raise ValueError("radius must be > 0 and radius, height, current finite")
    if np.any(rr < 0) or not (np.all(np.isfinite(rr)) and np.all(np.isfinite(zz))):
        raise ValueError("r must be >= 0 and r, z finite")
    shape = rr.shape
    npt, nloop = rr.size, a.size
    rows = max(1, LOOP_BLOCK_PAIRS // max(nloop, 1))
    cols = max(1, min(nloop, LOOP_BLOCK_PAIRS))
    require_memory(16.0 * npt + _PAIR_BYTES * min(npt, rows) * cols,
                   f"the field of {nloop} loops at {npt} points (in blocks of "
                   f"{min(npt, rows)} x {cols})", advice="use fewer loops or points")
    rflat, zflat = rr.reshape(-1), zz.reshape(-1)
    if npt <= rows and nloop <= cols:  # one block
        br, bz = _loop_pairs(a, zw, cur, rflat, zflat)
        return br.reshape(shape), bz.reshape(shape)
    br = np.zeros(npt)
    bz = np.zeros(npt)
    for p0 in range(0, npt, rows):
        part = slice(p0, p0 + rows)
        for l0 in range(0, nloop, cols):
            loops = slice(l0, l0 + cols)
            pbr, pbz = _loop_pairs(a[loops], zw[loops], cur[loops], rflat[part], zflat[part])
            br[part] += pbr
            bz[part] += pbz
    return br.reshape(shape), bz.reshape(shape)


def _loop_pairs(a: np.ndarray, zw: np.ndarray, cur: np.ndarray, rr: np.ndarray,
                zz: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Br, Bz at the points `rr`, `zz` (1-D) summed over the loops (1-D): one block."""
    rp, zp = rr.reshape(-1, 1), zz.reshape(-1, 1)
    d = zp - zw
    plus = (a + rp) ** 2 + d * d
    minus = (a - rp) ** 2 + d * d
    with np.errstate(divide="ignore", invalid="ignore"):
        m = np.clip(4.0 * a * rp / plus, 0.0, 1.0)
        K, E = _ellipke(np.minimum(m, 1.0 - 2.0 ** -52))
        pref = MU0 * cur / (2.0 * np.pi * np.sqrt(plus))
        bz = pref * (K + (a * a - rp * rp - d * d) / minus * E)
        br = pref * d / rp * (-K + (a * a + rp * rp + d * d) / minus * E)
        # near the axis the bracket cancels to O(k^2): use the expansion
        # Br = -(r/2) Bz0' + (r^3/16) Bz0''' of the on-axis field (error O(k^8))
        u = a * a + d * d
        c = MU0 * cur * a * a / 2.0
        near = 1.5 * c * rp * d * u ** -2.5 + rp ** 3 / 16.0 * (45.0 * c * d * u ** -3.5
                                                               - 105.0 * c * d ** 3 * u ** -4.5)
        br = np.where(m < 1e-3, near, br)
    bz = np.where(minus == 0.0, np.inf, bz)
    return br.sum(axis=1), bz.sum(axis=1)


def field_inside(phi: Any, dr: float, dz: float, r0: float, z0: float, B: float, n_turns: int,
                 z: Any = None, r: Any = None, reference: str = "target") -> Dict[str, Any]:
    """Field of the discrete winding inside the magnet (eqs. 6.7, 6.8; Figs 6.15, 6.16).

    The ``2 n_turns`` wires of :func:`winding` (the upper half and its mirror
    image, all carrying ``I`` in the same sense, see :meth:`Winding.loops`)
    are circular loops in free space; their field is summed by
    :func:`loop_field` (eq. 6.8 on the axis).  The normalized field
    difference of Figs 6.15/6.16 is ``(Bz - B_ref) / B_ref`` with ``B_ref``
    the target B (default) or the winding's own field at the centre
    (``reference="centre"``).

    Parameters
    ----------
    phi, dr, dz, r0, z0
        As for :func:`delta_phi`: the solved potential, its spacings and the magnet.
    B : float
        Target field (T); also fixes Phi_inside (its sign is checked
        against phi's cap).
    n_turns : int
        Wires on the upper half (>= 1).
    z : array_like, optional
        Heights of the field points (m); default the mesh heights
        ``-z0 .. z0`` in steps dz.
    r : array_like, optional
        Radii of the field points (m), broadcast with `z`, each < r0;
        default 0 (on the axis).
    reference : {"target", "centre"}
        Normalisation of the field difference.

    Returns
    -------
    dict
        ``"r"``, ``"z"``: the points; ``"Br"``, ``"Bz"``: the field (T);
        ``"normalized"``: ``(Bz - B_ref) / B_ref``; ``"B_ref"``; ``"B_centre"``:
        Bz at the centre; ``"efficiency"``: ``B_centre / I`` (T/A, eq. 6.9);
        ``"winding"``: the :class:`Winding`.

    Notes
    -----
    The difference from the target B has two parts: the discreteness of the
    winding, which falls like ``1 / n_turns^2`` (the levels are mid-points of
    equal current bands), and the error of Delta Phi itself, which the wires
    inherit: the finite superconducting box (the wires radiate in free space,
    the potential was solved inside a box with ``dPhi/dn = 0`` walls) and the
    mesh (slower than second order: the magnet's rim is a re-entrant corner).
    For the source's magnet (r0 = 0.25 m, z0 = 0.5 m) with many wires, the
    centre field is off B by 4.4 % in a 1 m box at dr = dz = 0.025 m, 1.2 %
    in a 2 m box, 0.93 % in a 3 m box, and 0.73 %, 0.53 % in the 2 m box at
    0.0125 m and 0.00625 m.
    """
    if reference not in ("target", "centre", "center"):
        raise ValueError(f"reference must be 'target' or 'centre', got {reference!r}")
    b = _field_arg(B)
    w = winding(phi, dr, dz, r0, z0, n_turns, B=b)
    if z is None:
        j0 = int(round(w.z0 / float(dz)))
        z = np.arange(-j0, j0 + 1) * float(dz)
    zz = np.asarray(z, dtype=float)
    rr = np.zeros_like(zz) if r is None else np.asarray(r, dtype=float)
    if not np.all(np.isfinite(zz)):
        raise ValueError("z contains non-finite values (NaN or Inf)")
    if not np.all(np.isfinite(rr)) or np.any(rr < 0) or np.any(rr >= w.r0):
        raise ValueError(f"r must hold radii 0 <= r < r0 = {w.r0!r} (inside the magnet), got {r!r}")
    rr, zz = np.broadcast_arrays(rr, zz)
    rad, hgt = w.loops()
    br, bz = loop_field(rad, hgt, w.current, rr, zz)
    _, bc = loop_field(rad, hgt, w.current, 0.0, 0.0)
    bc = float(bc)
    bref = b if reference == "target" else bc
    return {"r": rr, "z": zz, "Br": br, "Bz": bz, "normalized": (bz - bref) / bref,
            "B_ref": bref, "B_centre": bc, "efficiency": bc / w.current, "winding": w}


def homogeneity(phi: Any, dr: float, dz: float, r0: float, z0: float, B: float, n_turns: int,
                z_range: float = 0.2, n_points: int = 401, reference: str = "target") -> float:
    """Largest normalized field difference on the middle of the axis (Fig. 6.16).

    ``max |Bz(0, z) - B_ref| / |B_ref|`` over ``|z| <= z_range``, the field
    that of the ``2 n_turns`` wires (:func:`field_inside`); Fig. 6.16 uses the
    middle 40 cm of its 1 m magnet, ``z_range = 0.2`` m.

    Parameters
    ----------
    phi, dr, dz, r0, z0
        As for :func:`delta_phi`: the solved potential, its spacings and the magnet.
    B : float
        Target field (T).
    n_turns : int
        Wires on the upper half (>= 1).
    z_range : float
        Half-length of the middle range (m), ``0 < z_range <= z0``.
    n_points : int
        Points on ``[-z_range, z_range]`` (>= 2).
    reference : {"target", "centre"}
        ``B_ref``: the target B or the winding's field at the centre.

    Returns
    -------
    float
        The largest ``|normalized difference|`` (multiply by 1e6 for ppm).
    """
    zr = real("z_range", z_range, positive=True)
    z0f = real("z0", z0, positive=True)
    if zr > z0f:
        raise ValueError(f"z_range = {z_range!r} must not exceed z0 = {z0!r} (inside the magnet)")
    n = count("n_points", n_points, minimum=2)
    out = field_inside(phi, dr, dz, r0, z0, B, n_turns, z=np.linspace(-zr, zr, n),
                       reference=reference)
    return float(np.max(np.abs(out["normalized"])))


# ------------------------------------------------------------------ plot

def plot(phi: Any, dr: float, dz: float, r0: float, z0: float, winding: Optional[Winding] = None,
         ax: Any = None, levels: Any = 20, full: bool = False, filled: bool = False) -> Any:
    """Contour plot of Phi outside the magnet with its outline and wires (Figs 6.2, 6.3, 6.14).

    Parameters
    ----------
    phi : array_like
        Solved potential (NaN inside the magnet, which is left blank).
    dr, dz : float
        Spacings (m).
    r0, z0 : float
        Magnet radius and half-height (m).
    winding : Winding, optional
        Wires to mark: side wires on ``r = r0``, cap wires on ``z = z0``.
    ax : matplotlib.axes.Axes, optional
        Axes to draw on (default a new figure's).
    levels : int or array_like
        Contour levels, as for ``Axes.contour``.
    full : bool
        Draw the whole (r, z) section, mirrored with ``Phi(r, -z) =
        -Phi(r, z)`` and ``Phi(-r, z) = Phi(r, z)`` (Fig. 6.3), instead of the
        quadrant solved.
    filled : bool
        Fill between the levels (with a colorbar) under black contour lines.

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.

    Raises
    ------
    ImportError
        When matplotlib (the ``plot`` extra) is not installed.
    """
    p, dr, dz, r0, z0, i0, j0 = _geometry(phi, dr, dz, r0, z0)
    if winding is not None and not isinstance(winding, Winding):
        raise ValueError(f"winding must be a Winding (from nlsepy.magnet.winding), got {winding!r}")
    try:
        import matplotlib
        del matplotlib  # only whether it is installed matters here
        if ax is None:
            import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError("MagnetSolution.plot needs matplotlib: pip install 'nlsepy[plot]' "
                          "(the 'plot' extra installs matplotlib)") from exc
    if ax is None:
        _, ax = plt.subplots()
    nr, nz = p.shape
    r = np.arange(nr) * dr
    z = np.arange(nz) * dz
    pm = np.ma.masked_invalid(p)
    if full:
        r = np.concatenate((-r[:0:-1], r))
        z = np.concatenate((-z[:0:-1], z))
        pm = np.ma.concatenate((pm[:0:-1, :], pm), axis=0)
        pm = np.ma.concatenate((-pm[:, :0:-1], pm), axis=1)
    if filled:
        cs = ax.contourf(r, z, pm.T, levels=levels, cmap="RdBu_r")
        ax.figure.colorbar(cs, ax=ax, label="Phi (A)")
        ax.contour(r, z, pm.T, levels=cs.levels, colors="k", linewidths=0.5)
    else:
        ax.contour(r, z, pm.T, levels=levels)
    quads = [(1.0, 1.0)] + ([(1.0, -1.0), (-1.0, 1.0), (-1.0, -1.0)] if full else [])
    for sr, sz in quads:
        ax.plot([0.0, sr * r0, sr * r0], [sz * z0, sz * z0, 0.0], "k-", lw=1.5)
        if winding is not None:
            ax.plot(np.full(winding.z_side.size, sr * winding.r0), sz * winding.z_side, "o",
                    color="tab:orange", ms=4)
            ax.plot(sr * winding.r_cap, np.full(winding.r_cap.size, sz * winding.z0), "o",
                    color="tab:green", ms=4)
    ax.set_xlabel("r (m)")
    ax.set_ylabel("z (m)")
    ax.set_aspect("equal")
    ax.set_title("Phi (A)")
    return ax
