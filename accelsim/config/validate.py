"""Validate plain data against a spec model and report problems path by path.

pydantic does the checking; this module turns each of its errors into a
:class:`~accelsim.errors.Problem` with the file, a readable key path such as
``layers[3].kernel``, a short message and the offending value, and adds
close-match suggestions for unknown keys and unknown layer kinds.
"""

from __future__ import annotations

import types
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from accelsim.config.base import RuleViolation
from accelsim.errors import ConfigError, InputError, Problem

M = TypeVar("M", bound=BaseModel)

_MESSAGES = {
    "missing": "missing required key",
    "int_type": "expected an integer",
    "float_type": "expected a number",
    "string_type": "expected a string",
    "bool_type": "expected true or false",
    "list_type": "expected a list",
    "dict_type": "expected a mapping",
    "model_type": "expected a mapping",
    "model_attributes_type": "expected a mapping",
    "finite_number": "expected a finite number",
}


def validate_data(
    model: type[M],
    data: Any,
    file: str,
    prefix: str = "",
    error: type[InputError] = ConfigError,
) -> M:
    """Validate ``data`` as ``model`` or raise ``error`` listing every problem.

    Args:
        model: The spec class.
        data: Plain data (from YAML).
        file: Name of the source, used in messages.
        prefix: Key path of ``data`` inside ``file`` (empty for the top level).
        error: The :class:`InputError` subclass to raise.

    Returns:
        The validated, frozen spec.

    Raises:
        InputError: of type ``error``, with one problem per pydantic error.
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = _merge([_to_problem(model, err, file, prefix) for err in exc.errors()])
        raise error(problems) from None


def _merge(problems: list[Problem]) -> list[Problem]:
    """Join the per-member errors of a plain union (``3`` or ``[3, 1]``) into one problem."""
    merged: dict[tuple[str, str], Problem] = {}
    for p in problems:
        key = (p.file, p.path)
        if key in merged:
            first = merged[key]
            if p.message not in first.message.split(" or "):
                merged[key] = Problem(
                    first.file, first.path, f"{first.message} or {p.message}", first.value
                )
        else:
            merged[key] = p
    return list(merged.values())


def join_path(prefix: str, part: str | int) -> str:
    """Append a key or list index to a dotted key path."""
    if isinstance(part, int):
        return f"{prefix}[{part}]"
    return f"{prefix}.{part}" if prefix else part


def suggest(name: str, choices: list[str]) -> str:
    """Return a ``did you mean`` hint (or the list of choices) for an unknown name."""
    import difflib  # only on bad input: no command pays for it otherwise

    close = difflib.get_close_matches(name, choices, n=3, cutoff=0.6)
    if close:
        return "did you mean " + " or ".join(repr(c) for c in close) + "?"
    return "expected one of: " + ", ".join(sorted(choices))


def _to_problem(model: type[BaseModel], err: ErrorDetails, file: str, prefix: str) -> Problem:
    path, owner, annotation = _resolve(model, err["loc"], prefix)
    kind = err["type"]
    ctx = err.get("ctx", {})
    if kind == "extra_forbidden" and owner is not None:
        key = str(err["loc"][-1])
        message = "unknown key; " + suggest(key, list(owner.model_fields))
        return Problem(file, path, message, err["input"])
    if kind == "union_tag_invalid":
        tags = [t.strip(" '") for t in str(ctx.get("expected_tags", "")).split(",")]
        tag, key = str(ctx.get("tag", "")), _tag_key(annotation)
        return Problem(file, join_path(path, key), f"unknown {key}; " + suggest(tag, tags), tag)
    if kind == "union_tag_not_found":
        return Problem(file, join_path(path, _tag_key(annotation)), "missing required key")
    if kind == "value_error" and isinstance(ctx.get("error"), RuleViolation):
        rule: RuleViolation = ctx["error"]
        return Problem(
            file, join_path(path, rule.path) if path else rule.path, rule.message, rule.value
        )
    if kind == "missing":
        return Problem(file, path, _MESSAGES["missing"])
    message = _MESSAGES.get(kind, err["msg"])
    if message[:1].isupper():
        message = message[0].lower() + message[1:]
    return Problem(file, path, message, err["input"])


def _resolve(
    model: type[BaseModel], loc: tuple[str | int, ...], prefix: str
) -> tuple[str, type[BaseModel] | None, Any]:
    """Map a pydantic location to a key path, skipping union tags.

    Returns the path, the model that owns the last key (for suggestions) and the
    annotation of what the location holds (None where it cannot be told).
    """
    path = prefix
    current: Any = model
    owner: type[BaseModel] | None = None
    for part in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            owner = current
            field = current.model_fields.get(str(part))
            path = join_path(path, str(part))  # a mapping key, even if YAML made it a number
            current = field.annotation if field is not None else None
            continue
        members = _union_members(current)
        if members is not None:
            tagged = _tagged_member(members, part)
            # A plain union's error names the member it tried; that is no key.
            current = tagged
            continue
        args = get_args(current)
        origin = get_origin(current)
        if origin in (list, tuple) and isinstance(part, int):
            path = join_path(path, part)
            current = args[0] if args else None
        elif origin is dict:
            path = join_path(path, str(part))
            current = args[1] if len(args) == 2 else None
        elif not str(part).startswith(("function-", "[key]")):
            path = join_path(path, part)
            current = None
    return path, owner, current


def _unwrap(annotation: Any) -> Any:
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _union_members(annotation: Any) -> tuple[Any, ...] | None:
    if get_origin(annotation) in (Union, types.UnionType):
        return tuple(_unwrap(a) for a in get_args(annotation))
    return None


def _tags(member: Any) -> dict[str, tuple[Any, ...]]:
    """The fields of a union member that name it (``Literal`` fields: ``kind``, a
    DRAM spec's ``model``) and their values."""
    if not (isinstance(member, type) and issubclass(member, BaseModel)):
        return {}
    return {
        name: get_args(f.annotation)
        for name, f in member.model_fields.items()
        if get_origin(f.annotation) is Literal
    }


def _tagged_member(members: tuple[Any, ...], tag: str | int) -> type[BaseModel] | None:
    for member in members:
        if any(tag in values for values in _tags(member).values()):
            return member  # type: ignore[no-any-return]
    return None


def _tag_key(annotation: Any) -> str:
    """The key that names the member of a tagged union (``kind`` unless its members
    name themselves by another field, as DRAM specs do by ``model``)."""
    members = _union_members(_unwrap(annotation)) or ()
    keys = [set(_tags(m)) for m in members]
    common = set.intersection(*keys) if keys else set()
    return common.pop() if len(common) == 1 else "kind"
