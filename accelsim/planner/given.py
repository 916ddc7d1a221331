"""A plan written on the command line (``--plan tp=8,pp=16,dp=8,recompute=selective``):
``key=value`` items, each key a field of the parallel plan, a short name of one
(:data:`SHORT`), ``dp`` (the data-parallel degree: the chips over the others when
left out) or ``recompute`` (``none``, ``selective``, ``full``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic.fields import FieldInfo

from accelsim.errors import ConfigError, Problem
from accelsim.planner.candidates import AXES, DATA, RECOMPUTE, Candidate, defaults_of

OPTION = "--plan"

SHORT = {"tp": "tensor", "pp": "pipeline", "ep": "expert", "sp": "sequence_parallel"}
"""The short names of the plan's fields, as Megatron-LM's papers write the degrees."""


def _value(text: str, info: FieldInfo) -> Any:
    """A field's value as written: a whole number, a truth value, or the text (which
    the run's own checks validate)."""
    if info.annotation is bool and text in ("true", "false"):
        return text == "true"
    try:
        return int(text)
    except ValueError:
        return text


def parse_plan(text: str, fields: Mapping[str, FieldInfo], chips: int) -> Candidate:
    """The candidate ``text`` writes, the fields it leaves out at their defaults.

    Raises:
        ConfigError: ``--plan: key: problem (got value)`` for every bad item.
    """
    problems: list[Problem] = []
    chosen: dict[str, Any] = {}
    data: int | None = None
    recompute = "none"
    shorts = [short for short, name in SHORT.items() if name in fields]
    known = ", ".join([*fields, *shorts, "dp", "recompute"])
    for item in text.split(","):
        key, sep, value = (part.strip() for part in item.partition("="))
        name = SHORT.get(key, key)
        if not sep or not key or not value:
            problems.append(Problem(OPTION, key, "expected key=value", item))
        elif name in chosen or (key == "dp" and data is not None):
            problems.append(Problem(OPTION, key, "given twice", value))
        elif key == "recompute":
            if value not in RECOMPUTE:
                why = f"expected one of {', '.join(RECOMPUTE)}"
                problems.append(Problem(OPTION, key, why, value))
            recompute = value
        elif key == "dp" or (name in AXES and AXES[name].degree and name in fields):
            degree = int(value) if value.isdigit() else 0
            if degree < 1:
                problems.append(Problem(OPTION, key, "expected a positive integer", value))
            elif key == "dp":
                data = degree
            else:
                chosen[name] = degree
        elif name in fields:
            chosen[name] = _value(value, fields[name])
        else:
            why = f"not a field of the parallel plan (expected one of {known})"
            problems.append(Problem(OPTION, key, why, value))
    if problems:
        raise ConfigError(problems)
    degrees = math.prod(v for k, v in chosen.items() if k in AXES and AXES[k].degree)
    if data is None and chips % degrees == 0:
        data = chips // degrees
    if data is None or degrees * data != chips:
        why = f"the degrees multiply to {degrees * (data or 1)}, not the {chips} chips"
        raise ConfigError.single(OPTION, "", why, text)
    if DATA in fields:
        chosen[DATA] = data
    parallel = tuple((name, chosen.get(name, info.default)) for name, info in fields.items())
    return Candidate(parallel, data, recompute, defaults_of(fields))
