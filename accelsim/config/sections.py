"""Validating a file's data with overrides a section at a time, each section kept.

A sweep's points differ in a few keys of one file, and most of its axes set keys
inside a nested section (``array.rows``, ``dram.bandwidth_bytes_per_cycle``): the
points share most sections and each distinct section recurs at many points.
:func:`validate_by_sections` validates each nested section that the overrides touch
on its own, once per distinct set of overrides through the caller's ``once``, takes
every other section from the file validated without overrides, and validates only
the top level (its own keys and the checks across sections) at each point.  The
result is the spec that validating the whole merged data gives; any problem sends
the whole file through :func:`~accelsim.config.loader.validate_with_overrides`, so
messages, and where they are blamed, are exactly that path's.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Hashable
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, TypeAdapter, ValidationError

from accelsim.config.loader import validate_with_overrides
from accelsim.config.overrides import Override, merge
from accelsim.errors import InputError

M = TypeVar("M", bound=BaseModel)
Once = Callable[[Hashable, Callable[[], Any]], Any]
"""``once(key, make)``: ``make()``'s result, made once per ``key`` (the caller's cache)."""


Validate = Callable[[Any], BaseModel]
"""What validates a section's data into its spec."""


@functools.cache
def nested_sections(model: type[BaseModel]) -> dict[str, Validate]:
    """The fields of ``model`` that hold a spec of their own (one spec, or one of a
    tagged union of specs, as ``dram`` holds its model's), each with what validates
    it, by name (callers must not change what it returns)."""
    sections: dict[str, Validate] = {}
    for name, f in model.model_fields.items():
        if isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel):
            sections[name] = f.annotation.model_validate
        elif get_origin(f.annotation) in (Union, types.UnionType) and all(
            _is_spec(get_args(member)[0] if get_origin(member) is Annotated else member)
            for member in get_args(f.annotation)
        ):
            sections[name] = TypeAdapter(f.rebuild_annotation()).validate_python
    return sections


def _is_spec(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def validate_by_sections(
    model: type[M],
    data: dict[str, Any],
    file: str,
    overrides: list[Override],
    once: Once,
) -> M:
    """``validate_with_overrides(model, data, file, overrides)``, a section at a time.

    ``once`` keeps the file validated without overrides (key ``()``) and each nested
    section validated with its overrides (key ``(name, their cache keys)``);
    its keys name nothing but the section, so the caller's keys must name the file.

    Raises:
        InputError: what :func:`~accelsim.config.loader.validate_with_overrides` raises.
    """
    sections = nested_sections(model)
    touched: dict[str, list[Override]] = {}
    top: list[Override] = []
    for item in overrides:
        first = item.parts[0]
        if isinstance(first, str) and first in sections:
            touched.setdefault(first, []).append(item)
        else:
            top.append(item)
    if not touched:
        return validate_with_overrides(model, data, file, overrides)
    try:
        base = once((), lambda: validate_with_overrides(model, data, file, []))
        values = {
            name: once(
                (name, tuple(o.cache_key for o in sets)),
                _maker(sections[name], data, file, name, sets),
            )
            for name, sets in touched.items()
        }
        merged, _ = merge({k: v for k, v in data.items() if k not in sections}, file, top)
        for name in sections:
            if name in values:
                merged[name] = values[name]
            elif name in data:
                merged[name] = getattr(base, name)
        return model.model_validate(merged)
    except (InputError, ValidationError, ValueError):
        return validate_with_overrides(model, data, file, overrides)


def _maker(
    validate: Validate, data: dict[str, Any], file: str, name: str, sets: list[Override]
) -> Callable[[], BaseModel]:
    """What validates section ``name`` of ``data`` after ``sets`` (keys below ``name``)."""

    def make() -> BaseModel:
        merged, _ = merge({name: data[name]} if name in data else {}, file, sets)
        return validate(merged[name])

    return make
