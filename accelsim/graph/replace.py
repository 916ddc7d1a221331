"""Copies of frozen dataclasses (ops, tensors, parameters) with some fields changed,
made field by field without calling ``__init__``: the passes copy every op of graphs
of hundreds of thousands of ops."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

_D = TypeVar("_D")

# Per dataclass and changed fields: a function that copies an instance with new values.
_COPIERS: dict[tuple[type, tuple[str, ...]], Callable[..., Any]] = {}


def copier(cls: type[_D], changed: tuple[str, ...]) -> Callable[..., _D]:
    """A function ``copy(obj, *values)``: a copy of ``obj``, a ``cls``, with the fields
    ``changed`` set to ``values`` (in that order), made field by field without calling
    ``__init__``, one statement per field (as ``dataclasses`` generates ``__init__``).

    It is :func:`replaced` without the keyword arguments and their check, for the
    passes' loops over every op of a graph.  Only for dataclasses without
    ``__post_init__`` (which would be skipped).

    Raises:
        TypeError: for a field ``cls`` does not have, or a class with ``__post_init__``.
    """
    found = _COPIERS.get((cls, changed))
    if found is not None:
        return found
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"replaced() would skip {cls.__name__}.__post_init__")
    names = tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]
    unknown = sorted(set(changed) - set(names))
    if unknown:
        raise TypeError(f"{cls.__name__} has no field {', '.join(unknown)}")
    values = {name: f"v{i}" for i, name in enumerate(changed)}
    lines = [
        f"def copy(obj, {', '.join(values.values())}):",
        "    new = new_object(cls)",
        *(f"    set_field(new, {name!r}, {values.get(name, f'obj.{name}')})" for name in names),
        "    return new",
    ]
    scope: dict[str, Any] = {"new_object": object.__new__, "set_field": object.__setattr__}
    scope["cls"] = cls
    exec("\n".join(lines), scope)  # the code is made from the class's own field names
    copy: Callable[..., _D] = scope["copy"]
    _COPIERS[cls, changed] = copy
    return copy


def replaced(obj: _D, **changes: Any) -> _D:
    """``dataclasses.replace(obj, **changes)`` for the frozen ops, tensors and
    parameters, at about a third of its cost: the passes copy every op of graphs
    of hundreds of thousands of ops.

    The copy is made field by field without calling ``__init__`` (:func:`copier`),
    so it is only for dataclasses without ``__post_init__`` (which would be skipped).

    Raises:
        TypeError: for a field ``obj`` does not have, or a class with ``__post_init__``.
    """
    copy = copier(type(obj), tuple(changes))
    new: _D = copy(obj, *changes.values())
    return new
