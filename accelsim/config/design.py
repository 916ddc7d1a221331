"""A hardware spec's design keys: every field a sweep can vary, as a flat record.

``summary.json``'s ``design`` and a sweep store's design columns are these keys, so
two points that differ in any hardware field differ in them.  The keys are made
from the spec, not listed by hand: a field added to :class:`HardwareSpec` (or to a
DRAM model's spec) is a key at once.

A field's key is its path with ``_`` for ``.`` (``dram.channels`` is
``dram_channels``, ``array.count`` is ``array_count``), except the names
``summary.json`` has always used: the array's ``rows``, ``cols`` and ``dataflow`` and
the buffers' sizes (``ifmap_kib``, ...) bare, like the top level's
(``processors``, ``clock_mhz``).  ``name`` and ``description`` name a design and
are no key of it.  Values are as JSON holds them: an enum's value, ``null`` where an
optional field is unset, a non-finite number as its YAML spelling ``".inf"``, a list
as text (``interconnect.dims`` ``[4, 4, 4]`` as ``"4x4x4"``, the ``interconnect.levels``
as their JSON, ``null`` when empty), a mapping as ``key:value`` pairs joined by ``,``
(``array.rates`` ``{bf16: 1, fp8: 2}`` as ``"bf16:1,fp8:2"``).
"""

from __future__ import annotations

import json
import math
import types
from collections.abc import Iterator
from enum import Enum
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel

from accelsim.config.hardware import HardwareSpec

DesignValue = str | int | float | bool | None
"""A design key's value, as strict JSON holds it."""

_NOT_DESIGN = ("name", "description", "calibrated_under")
"""Hardware-file keys that describe the file, not the design: its name, its text, and
the run settings a calibration was fitted under."""
_BARE_SECTIONS = ("", "buffers")
_BARE_PATHS = ("array.rows", "array.cols", "array.dataflow")


def design_key(path: str) -> str:
    """The design key of the hardware field at dotted ``path``."""
    section, _, name = path.rpartition(".")
    if section in _BARE_SECTIONS or path in _BARE_PATHS:
        return name
    return path.replace(".", "_")


def design_values(hw: HardwareSpec) -> dict[str, DesignValue]:
    """Every design key of ``hw`` (its DRAM model's own keys included) and its value,
    in the spec's order."""
    values: dict[str, DesignValue] = {}
    for name in type(hw).model_fields:
        if name in _NOT_DESIGN:
            continue
        value = getattr(hw, name)
        if isinstance(value, BaseModel):
            values.update(_section_values(value, f"{name}."))
        else:
            values[design_key(name)] = _json_value(value)
    return values


_SECTIONS: dict[tuple[int, str], tuple[BaseModel, tuple[tuple[str, DesignValue], ...]]] = {}
"""The design keys and values of the sections seen last, by the section object (kept
beside them, so its id names no other object) and its path: a sweep's points share
most sections (:mod:`accelsim.config.sections`)."""
_SECTIONS_KEPT = 256


def _section_values(section: BaseModel, prefix: str) -> tuple[tuple[str, DesignValue], ...]:
    """The design keys and values of the nested ``section`` at ``prefix``."""
    key = (id(section), prefix)
    known = _SECTIONS.get(key)
    if known is not None and known[0] is section:
        return known[1]
    values = tuple((design_key(path), _json_value(v)) for path, v in _leaves(section, prefix))
    _SECTIONS[key] = (section, values)
    if len(_SECTIONS) > _SECTIONS_KEPT:
        del _SECTIONS[next(iter(_SECTIONS))]
    return values


def design_columns() -> tuple[tuple[str, str], ...]:
    """Every design key any hardware spec has (each DRAM model's own keys included),
    in the spec's order, with the SQLite type of its column."""
    found: dict[str, str] = {}
    for path, annotation in _fields(HardwareSpec, ""):
        found.setdefault(design_key(path), _sql_type(annotation))
    return tuple(found.items())


def _leaves(spec: BaseModel, prefix: str) -> Iterator[tuple[str, Any]]:
    for name in type(spec).model_fields:
        if not prefix and name in _NOT_DESIGN:
            continue
        value = getattr(spec, name)
        if isinstance(value, BaseModel):
            yield from _leaves(value, f"{prefix}{name}.")
        else:
            yield prefix + name, value


def _fields(spec: type[BaseModel], prefix: str) -> Iterator[tuple[str, Any]]:
    for name, info in spec.model_fields.items():
        if not prefix and name in _NOT_DESIGN:
            continue
        models = _models(info.annotation)
        if models:
            for model in models:
                yield from _fields(model, f"{prefix}{name}.")
        else:
            yield prefix + name, info.annotation


def _members(annotation: Any) -> tuple[Any, ...]:
    """The types a (possibly annotated, possibly union) annotation admits."""
    if get_origin(annotation) is Annotated:
        return _members(get_args(annotation)[0])
    if get_origin(annotation) in (Union, types.UnionType):
        return tuple(m for arg in get_args(annotation) for m in _members(arg))
    return (annotation,)


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The specs a nested section's annotation admits (a DRAM model each); none for a
    leaf."""
    return [m for m in _members(annotation) if isinstance(m, type) and issubclass(m, BaseModel)]


def _sql_type(annotation: Any) -> str:
    kinds = {m for m in _members(annotation) if m is not type(None)}
    if kinds == {int}:
        return "INTEGER"
    if kinds <= {int, float}:
        return "REAL"
    return "TEXT"


def _json_value(value: Any) -> DesignValue:
    if isinstance(value, Enum):
        return str(value.value)
    if value == math.inf:  # a bandwidth's ideal: no other field takes a non-finite number
        return ".inf"
    if value is None or isinstance(value, str | int | float):
        return value
    if isinstance(value, tuple) and value and all(isinstance(v, tuple) for v in value):
        return ",".join(f"{_json_value(k)}:{v}" for k, v in value)  # array.rates' pairs
    if isinstance(value, tuple):
        return _sequence_text(value)
    raise TypeError(f"hardware field of no design type: {value!r}")


def _sequence_text(value: tuple[Any, ...]) -> str | None:
    """A list field's value as one text: ints joined by ``x``, names (enums) by ``,``,
    specs as JSON."""
    if not value:
        return None
    if all(isinstance(v, int) for v in value):
        return "x".join(map(str, value))
    if all(isinstance(v, Enum) for v in value):
        return ",".join(str(v.value) for v in value)
    dumped = [v.model_dump(mode="json") for v in value]
    return json.dumps(dumped, separators=(",", ":"), sort_keys=True)
