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
and a destination that is not a regular file is refused.  Both also hold
the model's constructor arguments and the result's layout as one JSON text
(``model_json``: arrays, tuples, dtypes and the model's own argument types
encoded exactly), from which :meth:`Results.load` makes the model again
with its last result.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Dict, Mapping, Union

import numpy as np

from . import files as _files
from . import hdf5 as _hdf5

__all__ = ["Results", "result_arrays", "encode_value", "decode_value"]


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


def encode_value(value: Any, types: Mapping[str, type]) -> Any:
    """`value` as JSON data that :func:`decode_value` turns back into an
    equal value: None, bools, numbers (complex ones too), strings, lists,
    tuples, dicts with string keys, NumPy arrays and dtypes exactly, and
    the dataclasses named in `types`; anything else raises TypeError."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, complex):
        return {"__complex__": [value.real, value.imag]}
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biufcU":
            raise TypeError(f"cannot save an array of dtype {value.dtype}")
        data = np.stack([value.real, value.imag], axis=-1) if value.dtype.kind == "c" else value
        return {"__array__": data.tolist(), "dtype": value.dtype.str, "shape": list(value.shape)}
    if isinstance(value, (np.dtype, type)):
        try:
            return {"__dtype__": np.dtype(value).name}
        except TypeError:
            raise TypeError(f"cannot save the type {value!r}") from None
    if isinstance(value, tuple):
        return {"__tuple__": [encode_value(v, types) for v in value]}
    if isinstance(value, list):
        return [encode_value(v, types) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"__dict__": {k: encode_value(v, types) for k, v in value.items()}}
    name = type(value).__name__
    if dataclasses.is_dataclass(value) and types.get(name) is type(value):
        return {"__dataclass__": name,
                "fields": {f.name: encode_value(getattr(value, f.name), types)
                           for f in dataclasses.fields(value) if f.init}}
    raise TypeError(f"cannot save a value of type {name}: {value!r}")


def decode_value(data: Any, types: Mapping[str, type]) -> Any:
    """The value :func:`encode_value` encoded as `data`."""
    if isinstance(data, list):
        return [decode_value(v, types) for v in data]
    if not isinstance(data, dict):
        return data
    if "__complex__" in data:
        re, im = data["__complex__"]
        return complex(re, im)
    if "__array__" in data:
        dtype = np.dtype(data["dtype"])
        if dtype.kind == "c":
            pairs = np.array(data["__array__"], dtype=dtype.type(0).real.dtype)
            arr = (pairs[..., 0] + 1j * pairs[..., 1]).astype(dtype)
        else:
            arr = np.array(data["__array__"], dtype=dtype)
        return arr.reshape(data["shape"])
    if "__dtype__" in data:
        return np.dtype(data["__dtype__"]).type
    if "__tuple__" in data:
        return tuple(decode_value(v, types) for v in data["__tuple__"])
    if "__dict__" in data:
        return {k: decode_value(v, types) for k, v in data["__dict__"].items()}
    if "__dataclass__" in data:
        cls = types.get(data["__dataclass__"])
        if cls is None:
            raise ValueError(f"unknown argument type {data['__dataclass__']!r}")
        return cls(**{k: decode_value(v, types) for k, v in data["fields"].items()})
    raise ValueError(f"not an encoded value: {data!r}")


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
        args = self._replace_args()
        params = {k: v for k, v in ((k, _storable(v)) for k, v in args.items()) if v is not None}
        arrays["model_json"] = np.array(self._model_json(args, result, arrays))
        if kind == "npz":
            _files.save_checkpoint(path, self._MODEL, **arrays,
                                   **{f"parameter_{k}": v for k, v in params.items()})
            return
        _hdf5.save_arrays(os.fspath(path), self._MODEL,
                          {**arrays, **{f"parameters/{k}": v for k, v in params.items()}},
                          {"result": type(result).__name__})

    #: the model's own types among its constructor's arguments (by name), which
    #: ``model_json`` encodes field by field
    _ARG_TYPES: Dict[str, type] = {}
    #: the class of the model's result
    _RESULT_TYPE: Any = None

    def _model_json(self, args: Dict[str, Any], result: Any, arrays: Dict[str, Any]) -> str:
        """The constructor's arguments (not ``backend`` and ``comm``) and the
        result's fields: stored as an array of the file, the model itself, or None."""
        kept = {k: encode_value(v, self._ARG_TYPES) for k, v in args.items()
                if k not in ("backend", "comm")}
        fields = {}
        for f in dataclasses.fields(result):
            value = getattr(result, f.name)
            fields[f.name] = ("array" if f.name in arrays else "model" if value is self
                              else "none")
        return json.dumps({"arguments": kept, "result": fields})

    @classmethod
    def load(cls, path: Union[str, os.PathLike], backend: str = "auto", comm: Any = None) -> Any:
        """The model a file of :meth:`save` was written from, with its result.

        Parameters
        ----------
        path : path-like
            A file written by :meth:`save` (``.npz``, ``.h5`` or ``.hdf5``).
        backend : {"auto", "cpu", "cuda"}, optional
            Where the new model computes (whichever backend wrote the file).
        comm : mpi4py communicator, optional
            For a model that distributes its work (``MaxwellBloch``).

        Returns
        -------
        object
            A model of this class with the saved parameters, whose last
            result (:meth:`plot`, :meth:`save`) is the saved one, its
            arrays bit for bit.

        Raises
        ------
        FileNotFoundError
            No such file.
        ValueError
            Not a whole file of this model's :meth:`save` (another model's,
            an older one without ``model_json``, truncated or edited); the
            message names the file.
        ImportError
            ``.h5`` without h5py.
        """
        spath = os.fspath(path)
        entries = _read_saved(spath, cls._MODEL)
        try:
            doc = json.loads(str(entries.pop("model_json")))
            args = {k: decode_value(v, cls._ARG_TYPES) for k, v in doc["arguments"].items()}
            layout = doc["result"]
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{spath}: its model_json cannot be read ({exc})") from None
        if comm is not None:
            args["comm"] = comm
        model = cls(backend=backend, **args)
        fields = {}
        for name, how in layout.items():
            if how == "array":
                if name not in entries:
                    raise ValueError(f"{spath}: lacks the result's entry {name!r}")
                arr = entries[name]
                fields[name] = arr.item() if arr.ndim == 0 and arr.dtype.kind != "U" else \
                    (str(arr) if arr.ndim == 0 else arr)
            else:
                fields[name] = model if how == "model" else None
        try:
            result = cls._RESULT_TYPE(**fields)
        except TypeError as exc:
            raise ValueError(f"{spath}: the result's fields do not fit "
                             f"{cls._RESULT_TYPE.__name__} ({exc})") from None
        model._keep(result)
        return model


def _read_saved(path: str, model: str) -> Dict[str, np.ndarray]:
    """The arrays of a file of :meth:`Results.save` by name (its
    ``model_json`` and the result's; the parameters' copies left out)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such file: {path!r}")
    if _files.save_format(path) == "npz":
        head = _files.load_checkpoint(path, model, {"model_json": _files.Key("str")})
        with np.load(path) as d:
            names = [n for n in d.files if not n.startswith(("_", "parameter_", "model_json"))]
        keys = {n: _files.Key("array", "biufcU", finite=False) for n in names}
        out = _files.load_checkpoint(path, model, keys)
        out["model_json"] = head["model_json"]
        return out
    h5py = _hdf5.require_h5py()
    try:
        with h5py.File(path, "r") as f:
            got = f.attrs.get("model")
            got = got.decode() if isinstance(got, bytes) else got
            if got != model:
                raise ValueError(f"{path}: is a file of {got}, not of {model}")
            if not f.attrs.get("complete", False):
                raise ValueError(f"{path}: is not complete")
            out = {}
            for name, item in f.items():
                if isinstance(item, h5py.Dataset):
                    v = item.asstr()[()] if h5py.check_string_dtype(item.dtype) else item[()]
                    out[name] = np.asarray(v)
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read as HDF5 ({exc})") from None
    if "model_json" not in out:
        raise ValueError(f"{path}: holds no model_json (written by an older nlsepy)")
    return out
