"""``plot()`` and ``save(path)`` of the models whose work ends in a result
object (``CoaxialMagnet.solve``, ``MaxwellBloch.run``), written once.

Such a model keeps its last result (:meth:`Results._keep`); ``plot`` draws
it with the result's own ``plot`` and ``save`` writes it, with the model's
parameters, in the format the file's ending names (as the time-stepping
models' ``save`` does, :func:`nlsepy.common.files.save_format`):

``.npz``
    a NumPy archive with the checkpoint's format tag, version and model's
    name (:func:`nlsepy.common.files.save_checkpoint`): the result's arrays
    and numbers by name, the parameters as ``parameter_<name>``.
``.h5`` / ``.hdf5``
    an HDF5 file that :func:`nlsepy.open_run` and plain h5py read: the
    result's arrays as datasets, the parameters in the group
    ``/parameters``.

Both are written whole or not at all; a symbolic link is written through
and a destination that is not a regular file is refused.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Dict, Union

import numpy as np

from . import files as _files
from . import hdf5 as _hdf5

__all__ = ["Results", "result_arrays"]


def _storable(value: Any) -> Any:
    """`value` as an array a file holds, or None (left out: objects, None)."""
    if value is None or isinstance(value, (dict, set)) or callable(value):
        return None
    if isinstance(value, (np.dtype, type)):
        try:
            return np.array(np.dtype(value).name)
        except TypeError:
            return None
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):
        return None
    if arr.dtype == object:
        return None
    return arr


def result_arrays(result: Any) -> Dict[str, np.ndarray]:
    """The fields of a result (a dataclass) that a file holds: arrays,
    numbers, strings and bools by name (None and objects left out).

    Parameters
    ----------
    result : dataclass instance

    Returns
    -------
    dict of str to numpy.ndarray
    """
    out: Dict[str, np.ndarray] = {}
    for f in dataclasses.fields(result):
        arr = _storable(getattr(result, f.name))
        if arr is not None:
            out[f.name] = arr
    return out


class Results:
    """``plot()`` and ``save(path)`` of a model whose work returns a result.

    A model sets ``_MODEL``, ``_RESULT_CALL`` (what makes a result, for the
    message when there is none, e.g. ``"solve()"``) and calls
    :meth:`_keep` with each result it returns; it provides
    ``_replace_args()`` (its parameters, :class:`~nlsepy.common.params.Replaceable`).
    """

    _MODEL = ""
    _RESULT_CALL = ""
    _last_result: Any = None

    def _keep(self, result: Any) -> Any:
        """Keep `result` as the one :meth:`plot` and :meth:`save` use; return it."""
        self._last_result = result
        return result

    def _result(self, what: str) -> Any:
        if self._last_result is None:
            raise RuntimeError(f"{self._MODEL}.{what}() needs a result: call "
                               f"{self._RESULT_CALL} first")
        return self._last_result

    def plot(self, **kwargs: Any) -> Any:
        """Draw the last result (needs matplotlib: ``pip install 'nlsepy[plot]'``).

        Parameters
        ----------
        **kwargs
            Those of the result's ``plot`` (``path`` saves the figure).

        Returns
        -------
        matplotlib.figure.Figure

        Raises
        ------
        RuntimeError
            Nothing has been computed yet.
        """
        return self._result("plot").plot(**kwargs)

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Write the last result and the model's parameters, whole or not
        at all, in the format the file's ending names: ``.npz`` (a NumPy
        archive) or ``.h5`` / ``.hdf5`` (HDF5 that :func:`nlsepy.open_run`
        and h5py read; needs h5py).

        Parameters
        ----------
        path : path-like
            Destination file, ending in ``.npz``, ``.h5`` or ``.hdf5``.

        Raises
        ------
        RuntimeError
            Nothing has been computed yet.
        ValueError
            Another ending (the message names the path and the endings
            accepted); a destination that is not a regular file.
        ImportError
            ``.h5`` without h5py.
        """
        kind = _files.save_format(path)
        result = self._result("save")
        arrays = result_arrays(result)
        params = {k: v for k, v in ((k, _storable(v)) for k, v in self._replace_args().items())
                  if v is not None}
        if kind == "npz":
            _files.save_checkpoint(path, self._MODEL, **arrays,
                                   **{f"parameter_{k}": v for k, v in params.items()})
            return
        _hdf5.save_arrays(os.fspath(path), self._MODEL,
                          {**arrays, **{f"parameters/{k}": v for k, v in params.items()}},
                          {"result": type(result).__name__})
