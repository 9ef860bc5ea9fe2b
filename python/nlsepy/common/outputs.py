"""The files of one run, written all or none, inside one output folder.

The command lines (``python -m nlsepy demo``, ``python -m nlsepy dbec``) and
:func:`nlsepy.dbec.run` write several files per run.  :class:`OutputSet`
checks every name and the folder before the run starts, stages each file
under a hidden temporary name in the folder once the run is done, and
renames them all at the end (:meth:`OutputSet.commit`).  On any failure,
Ctrl-C included, the staged files and the folders the set created are
removed: a failed run leaves nothing behind.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from .files import atomic_write
from .guard import deferred_sigint

__all__ = ["OutputSet", "check_name"]


def check_name(name: Any, what: str) -> str:
    """`name` if it is a plain file name, else ValueError naming `what`.

    Output names may not hold a folder part (``/``, ``\\``), be ``.`` or
    ``..``, be empty or hold a NUL: every output stays inside its folder.

    Parameters
    ----------
    name : str
        The file name.
    what : str
        What names it (a key), for the message.

    Returns
    -------
    str
        `name`.
    """
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a file name (a string), got {name!r}")
    if not name.strip():
        raise ValueError(f"{what} must be a file name, got {name!r}")
    seps = {"/", "\\", os.sep} | ({os.altsep} if os.altsep else set())
    if any(s in name for s in seps) or name in (".", "..") or "\0" in name:
        raise ValueError(f"{what} = {name!r} must be a plain file name (no folder part, no "
                         f"'..'): outputs are written inside the output folder only")
    return name


class OutputSet:
    """Files of one run in `folder`, renamed into place together.

    Parameters
    ----------
    folder : path-like
        The output folder; created (with missing parents) when the first file
        is staged, and removed again if the run fails.

    Examples
    --------
    >>> outs = OutputSet("out")                              # doctest: +SKIP
    >>> outs.reserve("summary.txt", "summary")               # doctest: +SKIP
    >>> # ... run ...
    >>> with outs:                                           # doctest: +SKIP
    ...     outs.stage_text("summary.txt", text)
    ...     files = outs.commit()
    """

    def __init__(self, folder: Union[str, os.PathLike]) -> None:
        self.folder = os.path.abspath(os.fspath(folder))
        self._names: Dict[str, str] = {}          # file name -> what named it
        self._staged: List[Tuple[str, str]] = []  # (temporary path, final path)
        self._created: List[str] = []             # folders made here, deepest first

    # ------------------------------------------------------------- checks
    def check_folder(self) -> None:
        """Raise OSError now if the folder cannot be created or written."""
        path = self.folder
        while not os.path.exists(path):
            parent = os.path.dirname(path)
            if parent == path:
                break
            path = parent
        if not os.path.isdir(path):
            raise NotADirectoryError(f"output folder {self.folder!r}: {path!r} is not a folder")
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(f"output folder {self.folder!r}: cannot write in {path!r}")

    def reserve(self, name: str, what: str) -> str:
        """Check and book the output `name` (named by `what`); return its path.

        Raises ValueError for a name with a folder part, a name booked twice
        or a destination that is a folder (TypeError for a non-string).
        """
        check_name(name, what)
        if name in self._names:
            raise ValueError(f"{what} = {name!r} names the same file as {self._names[name]}")
        dest = os.path.join(self.folder, name)
        if os.path.isdir(dest):
            raise ValueError(f"{what} = {name!r} names a folder, {dest!r}, not a file")
        self._names[name] = what
        return dest

    # ------------------------------------------------------------ staging
    def _make_folder(self) -> None:
        if os.path.isdir(self.folder):
            return
        missing = []
        path = self.folder
        while not os.path.exists(path):
            missing.append(path)
            parent = os.path.dirname(path)
            if parent == path:
                break
            path = parent
        os.makedirs(self.folder, exist_ok=True)
        self._created.extend(missing)  # deepest first

    def stage(self, name: str, save: Callable[[str], Any], what: Optional[str] = None) -> str:
        """Have ``save(path)`` write the output `name` to a temporary path.

        Returns the final path (the file appears there at :meth:`commit`).
        """
        if name not in self._names:
            self.reserve(name, what or name)
        self._make_folder()
        tmp = os.path.join(self.folder, f".{os.getpid()}.part.{name}")
        try:
            save(tmp)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise
        dest = os.path.join(self.folder, name)
        self._staged.append((tmp, dest))
        return dest

    def stage_text(self, name: str, text: str, what: Optional[str] = None) -> str:
        """Stage a text file (UTF-8)."""
        return self.stage(name, lambda p: atomic_write(p, lambda fh: fh.write(text),
                                                              binary=False), what)

    def stage_bytes(self, name: str, write: Callable[[Any], Any],
                    what: Optional[str] = None) -> str:
        """Stage a binary file filled by ``write(fh)``."""
        return self.stage(name, lambda p: atomic_write(p, write), what)

    def commit(self) -> List[str]:
        """Rename every staged file into place (Ctrl-C held until done).

        Returns
        -------
        list of str
            The final paths, in staging order.
        """
        done = []
        with deferred_sigint():
            for tmp, dest in self._staged:
                os.replace(tmp, dest)
                done.append(dest)
            self._staged = []
            self._created = []
        return done

    def discard(self) -> None:
        """Remove the staged files and the folders this set created (if empty)."""
        for tmp, _ in self._staged:
            try:
                os.remove(tmp)
            except OSError:
                pass
        self._staged = []
        for path in self._created:
            try:
                os.rmdir(path)
            except OSError:
                break
        self._created = []

    def __enter__(self) -> "OutputSet":
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        if kind is not None:
            self.discard()
