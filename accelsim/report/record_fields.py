"""Checked reads of a ``summary.json`` record: each value of the type it must have,
or a ``ValueError`` naming where it is."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

_T = TypeVar("_T")


def checked(value: Any, where: str, kind: type[_T]) -> _T:
    """``value`` if it is a ``kind`` (a bool is not an int, an int not a float)."""
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise ValueError(
            f"summary: {where}: expected {kind.__name__} (got {type(value).__name__} {value!r})"
        )
    return value


def get_checked(data: Mapping[str, Any], key: str, kind: type[_T]) -> _T:
    """``data[key]``, which must be a ``kind``."""
    if key not in data:
        raise ValueError(f"summary: missing key '{key}'")
    return checked(data[key], key, kind)
