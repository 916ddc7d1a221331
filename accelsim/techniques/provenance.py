"""Where a technique's inputs come from: the provenance its report states.

Every technique keeps a table of where the default of each of its settings comes
from (:class:`~accelsim.report.training.Source`: the paper, a re-implementation,
recalled from the paper, or our own choice, with the basis in words), and of the
constants of its model.  :func:`inputs` turns the table and a run's config into
the report's :class:`~accelsim.report.training.Input` list: a setting the run
sets is the run's, a file of measured statistics the run names is a trace, and
every other value comes from where its default does.  ``tests`` hold every
setting of every technique to having an entry.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from enum import Enum
from typing import Any

from pydantic import BaseModel

from accelsim.report.training import Input, Source

Origin = tuple[Source, str]
"""Where a default comes from, and on what basis."""

SET_IN_RUN = "set in the run"


def leaves(config: BaseModel, prefix: str = "") -> Iterator[tuple[str, Any, bool]]:
    """Every setting of ``config`` as ``(dotted key, value, set by the run)``, nested
    specs walked (a nested spec the run set counts its own settings)."""
    for name in type(config).model_fields:
        value = getattr(config, name)
        key = prefix + name
        if isinstance(value, BaseModel):
            yield from leaves(value, key + ".")
        else:
            yield key, value, name in config.model_fields_set


def _plain(value: Any) -> Any:
    """``value`` as JSON holds it."""
    if isinstance(value, Enum):
        return value.value
    return value


def inputs(
    config: BaseModel,
    defaults: Mapping[str, Origin],
    traces: Sequence[str] = (),
    constants: Mapping[str, tuple[Any, Origin]] | None = None,
) -> tuple[Input, ...]:
    """The inputs of a technique's model in a run with ``config``.

    Args:
        config: The technique's config in this run.
        defaults: Where each setting's default comes from, by dotted key (every
            setting must have one).
        traces: Settings that name a file of statistics measured in a real training
            run: when the run sets one, that input is a trace.
        constants: The model's fixed numbers, by name: value and origin.

    Raises:
        KeyError: for a setting without an entry in ``defaults`` (a bug).
    """
    out = []
    for key, value, is_set in leaves(config):
        if is_set:
            source, basis = (
                (Source.TRACE, f"measured, read from {value}")
                if key in traces
                else (
                    Source.RUN,
                    SET_IN_RUN,
                )
            )
        else:
            source, basis = defaults[key]
        out.append(Input(key, _plain(value), source, basis))
    for name, (value, (source, basis)) in (constants or {}).items():
        out.append(Input(name, value, source, basis))
    return tuple(out)


BUNDLED = "measured: the bundled digits traces (scripts/training_signals.py)"


def bundled_trace_inputs(found: Sequence[Input], key: str) -> tuple[Input, ...]:
    """``found`` with setting ``key`` a trace where it chooses the bundled measured
    traces (``measured``), whoever set it."""
    chosen = [i.key == key and i.value == "measured" for i in found]
    return tuple(
        Input(i.key, i.value, Source.TRACE, BUNDLED) if bundled else i
        for i, bundled in zip(found, chosen, strict=True)
    )
