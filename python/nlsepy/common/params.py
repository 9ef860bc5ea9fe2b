"""A model's parameters, declared once as a table.

Each model class lists its parameters as :class:`Param` class attributes:
the name (the attribute's), the docstring, and whether a change needs a new
C handle (``rebuild=True``: the kernels, work arrays or stability bound were
set up with it) or goes to the live handle (``rebuild=False``, with the
``check`` that a new value passes).  :class:`Parametrised`, the base of every
model, reads the table: assigning a ``rebuild`` parameter raises
``AttributeError`` with the model's own advice (``_refuse``), and assigning
a live one checks the value and hands it to the model (``_set_param``).
:meth:`Replaceable.replace` makes a new model with some of them changed.

Values live in the instance attribute ``_<name>`` (or in the dict attribute
named by the class's ``_PARAM_STORE``).  :class:`Sealed` refuses
assignments to any other public attribute.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional

__all__ = ["Param", "Parametrised", "Replaceable", "Sealed"]


class Param:
    """One entry of a model's parameter table (a data descriptor).

    Parameters
    ----------
    doc : str
        The attribute's docstring.
    rebuild : bool, optional
        A change needs a new C handle: the attribute is read-only and
        assigning it raises ``AttributeError`` with the owner's
        ``_refuse(name, value)``.  When False, assigning calls
        ``check(name, value)`` and then the owner's
        ``_set_param(name, value)``.
    check : callable, optional
        ``check(name, value) -> value``: the value as the model keeps it, or
        an exception that names the argument and the value.
    copy : bool, optional
        Reading hands out a copy (for arrays).
    """

    def __init__(self, doc: str, rebuild: bool = True,
                 check: Optional[Callable[[str, Any], Any]] = None, copy: bool = False) -> None:
        self.__doc__ = doc
        self.rebuild = rebuild
        self.check = check
        self.copy = copy
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        store = type(obj)._PARAM_STORE
        value = getattr(obj, store)[self.name] if store else getattr(obj, "_" + self.name)
        return value.copy() if self.copy else value

    def __set__(self, obj: Any, value: Any) -> None:
        if self.rebuild:
            raise AttributeError(obj._refuse(self.name, value))
        if self.check is not None:
            value = self.check(self.name, value)
        obj._set_param(self.name, value)

    def __delete__(self, obj: Any) -> None:
        raise AttributeError(obj._refuse(self.name, None))


class Parametrised:
    """What every model shares about its parameters: the declared table and
    the refusal of a change that needs a new handle.

    A model sets ``_MODEL`` (its class name in messages), declares its
    :class:`Param` attributes, and may override ``_refuse`` (its advice) and
    ``_set_param`` (how a live parameter reaches its handle).
    """

    #: the model's name in messages
    _MODEL = ""
    #: the dict attribute that holds the parameters' values ("" for ``_<name>``)
    _PARAM_STORE = ""

    @classmethod
    def parameter_table(cls) -> Dict[str, Param]:
        """The declared parameters, by name, in the order of their declaration.

        Returns
        -------
        dict of str to Param
        """
        table: Dict[str, Param] = {}
        for klass in reversed(cls.__mro__):
            for name, attr in vars(klass).items():
                if isinstance(attr, Param):
                    table[name] = attr
        return table

    def _refuse(self, name: str, value: Any) -> str:
        """The message of the AttributeError when parameter `name` is assigned."""
        return (f"{self._MODEL}.{name} is fixed when the model is made; make a new one with "
                f"replace({name}=...)")

    def _set_param(self, name: str, value: Any) -> None:
        """Keep the checked value of a live parameter (a model passes it on to
        its handle first)."""
        store = self._PARAM_STORE
        if store:
            getattr(self, store)[name] = value
        else:
            object.__setattr__(self, "_" + name, value)


class Replaceable(Parametrised):
    """A model whose parameters are all fixed at construction and which
    :meth:`replace` makes again with some of them changed (a model defines
    ``_replace_args``, the constructor's arguments that make it again).

    Assigning a parameter is refused with why it is fixed (``_FIXED_WHY``)
    and the call that makes a new model with it changed: the model's
    ``_HINTS`` entry for the name, else ``<_VAR>.replace(<name>=...)``.
    """

    #: the model's variable in the refusal's advice (``mag`` of ``mag.replace(...)``)
    _VAR = "model"
    #: why a parameter cannot change, in the refusal's message
    _FIXED_WHY = "the model uses the value given at construction"
    #: the advice for the parameters that ``<_VAR>.replace(name=...)`` does not set
    _HINTS: Dict[str, str] = {}

    def _refuse(self, name: str, value: Any) -> str:
        hint = self._HINTS.get(name, f"{self._VAR}.replace({name}=...)")
        return (f"{self._MODEL}.{name} is read-only: {self._FIXED_WHY}; make a new "
                f"{self._MODEL} with {hint}")

    def _replace_args(self) -> Dict[str, Any]:
        """The constructor's keyword arguments that make this model again
        (every model of this kind defines it)."""
        raise NotImplementedError

    def replace(self, **changes: Any) -> Any:
        """A new model with some parameters changed, the others this one's.

        Parameters
        ----------
        **changes
            Any argument of the constructor.

        Returns
        -------
        object
            A new model of the same class.

        Raises
        ------
        TypeError
            A name that is not an argument of the constructor.
        """
        kw = self._replace_args()
        unknown = sorted(set(changes) - set(kw))
        if unknown:
            raise TypeError(f"replace() takes the constructor's arguments {sorted(kw)}, "
                            f"got {unknown}")
        kw.update(self._replace_changes(kw, changes))
        return type(self)(**kw)

    def _replace_changes(self, kw: Dict[str, Any], changes: Dict[str, Any]) -> Dict[str, Any]:
        """The arguments :meth:`replace` changes: `changes`, and what they
        imply for the others (a model overrides this)."""
        return changes


class Sealed(Parametrised):
    """A model whose public attributes are its declared parameters only:
    assigning any other public name (a property, or a name it does not
    have) raises ``AttributeError`` instead of adding an attribute that
    nothing reads.  A model sets ``_SEALED_ADVICE``, what to do instead
    (e.g. ``"mb.replace(...) makes a new model"``)."""

    #: what the refusal of an unknown attribute advises
    _SEALED_ADVICE = ""

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_") or isinstance(getattr(type(self), name, None), Param):
            object.__setattr__(self, name, value)  # a parameter refuses or checks itself
            return
        advice = f" ({self._SEALED_ADVICE})" if self._SEALED_ADVICE else ""
        raise AttributeError(f"{self._MODEL} has no parameter {name!r} to set: its parameters "
                             f"are fixed at construction{advice}")
