"""The run settings a calibrated hardware file was fitted under, and their use.

A fit prices its measurements under some of a run's settings (the folds pipelined or
not, how partial sums are tiled): a hardware file fitted under them describes the chip
only with them.  Such a file records them in ``calibrated_under``, its settings of a run
file's ``timing`` and ``lowering`` sections as the run file holds them
(``timing: {fold_overlap: true}``); a hardware setting the fit used is the file's own key
(``mapping.stream_blocking``).  Every command then takes them as its own: a run whose
file, ``overrides`` or ``--set`` leave a recorded key unset gets the recorded value,
and one that sets it to another value is refused, as is a command-line flag that asks
for another value (``accelsim layer --no-fold-overlap``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, PlainSerializer, ValidationError

from accelsim.config.base import Convention
from accelsim.config.enums import PsumPolicy
from accelsim.errors import ConfigError, InputError, Problem


def sections() -> dict[str, type[BaseModel]]:
    """The run file's sections a calibrated file may record settings of (imported
    only for a file that records some: ``accelsim layer`` loads no run spec)."""
    from accelsim.config.run import LoweringSpec, TimingSpec

    return {"timing": TimingSpec, "lowering": LoweringSpec}


FIELD = "calibrated_under"


Pairs = tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]


def _pairs(value: Any) -> Any:
    """A ``calibrated_under`` mapping of mappings as pairs (a hardware spec is hashed)."""
    if not isinstance(value, Mapping):
        return value
    return tuple(
        (section, tuple(values.items()) if isinstance(values, Mapping) else values)
        for section, values in value.items()
    )


def _mapping(pairs: Pairs) -> dict[str, dict[str, Any]]:
    """``calibrated_under`` as the file writes it."""
    return {section: dict(values) for section, values in pairs}


CalibratedUnder = Annotated[Pairs, BeforeValidator(_pairs), PlainSerializer(_mapping)]
"""A hardware file's ``calibrated_under``: a run section's name, then its settings."""


def flat(record: Pairs) -> dict[str, Any]:
    """A ``calibrated_under`` record by dotted key (``timing.fold_overlap``)."""
    return {f"{section}.{name}": v for section, values in record for name, v in values}


def record_problem(key: str, value: Any) -> str | None:
    """What is wrong with recording ``key: value`` (None: nothing): a key that is not a
    setting of :func:`sections`, or a value that setting refuses."""
    section, _, name = key.partition(".")
    known_sections = sections()
    spec = known_sections.get(section)
    if spec is None or name not in spec.model_fields:
        known = [f"{s}.{f}" for s, model in known_sections.items() for f in model.model_fields]
        return f"not a run setting of timing or lowering (known: {', '.join(known)})"
    try:
        spec.model_validate({name: value})
    except ValidationError as exc:
        return f"not a value of {key}: {exc.errors()[0]['msg']}"
    return None


def canonical(key: str, value: Any) -> Any:
    """``value`` of the run setting ``key`` as its section holds it (an enum for its
    name, a number for its text as YAML gives it)."""
    section, _, name = key.partition(".")
    return getattr(sections()[section].model_validate({name: value}), name)


def shown(value: Any) -> str:
    """A setting's value as a file writes it."""
    value = getattr(value, "value", value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def flag_value(
    record: Mapping[str, Any], source: str, key: str, asked: Any, flag: str, default: Any
) -> Any:
    """The value of the run setting ``key`` for a command with a flag for it: the
    recorded one unless the flag asked (``asked`` not None), the flag's when nothing
    is recorded, else ``default``.

    Raises:
        InputError: at the recorded key of ``source`` (the hardware file) when the flag
            asks for another value than the one recorded.
    """
    if key not in record:
        return default if asked is None else asked
    recorded = canonical(key, record[key])
    if asked is not None and canonical(key, asked) != recorded:
        raise InputError.single(
            source,
            f"{FIELD}.{key}",
            f"the file was calibrated with {key}: {shown(recorded)}; {flag} asks for"
            " another value (use the file as it was fitted, or another hardware file)",
            asked,
        )
    return recorded


def run_problems(
    record: Mapping[str, Any], source: str, run: Any, written: Mapping[str, tuple[str, str]]
) -> tuple[dict[str, dict[str, Any]], list[Problem]]:
    """The updates of each run section the record asks for, and the problems of a run
    that sets a recorded key to another value.

    Args:
        record: The hardware file's ``calibrated_under``.
        source: The hardware file, as messages name it.
        run: The validated run spec.
        written: For each recorded key the run sets itself (its file, ``overrides`` or
            ``--set``), the file and key path where it was written.
    """
    updates: dict[str, dict[str, Any]] = {}
    problems = []
    for key, value in record.items():
        section, _, name = key.partition(".")
        recorded = canonical(key, value)
        actual = getattr(getattr(run, section), name)
        if actual == recorded:
            continue
        if key in written:
            file, path = written[key]
            problems.append(
                Problem(
                    file,
                    path,
                    f"{source} was calibrated with {key}: {shown(recorded)} (its {FIELD});"
                    " leave it unset, or use another hardware file",
                    getattr(actual, "value", actual),
                )
            )
        else:
            updates.setdefault(section, {})[name] = recorded
    return updates, problems


def applied(run: Any, updates: Mapping[str, Mapping[str, Any]], source: str) -> Any:
    """``run`` with each section's ``updates``, validated again.

    Raises:
        ConfigError: at the hardware file's record when a section refuses the values
            together with the run's others (fold overlap under the scalesim convention).
    """
    changed = {}
    for section, values in updates.items():
        spec = getattr(run, section)
        try:
            plain = {k: getattr(v, "value", v) for k, v in values.items()}
            changed[section] = type(spec).model_validate({**spec.model_dump(mode="json"), **plain})
        except ValidationError as exc:
            raise ConfigError.single(
                source,
                f"{FIELD}.{section}",
                f"the run cannot take the settings the file was calibrated with:"
                f" {exc.errors()[0]['msg']}",
                {k: shown(v) for k, v in values.items()},
            ) from None
    return run.model_copy(update=changed)


def timing_flags(
    record: Mapping[str, Any],
    source: str,
    convention: str | None,
    psums: str | None,
    fold_overlap: bool | None,
) -> tuple[Convention, PsumPolicy, bool]:
    """The timing convention, partial sums and fold overlap of a command with flags
    for them (``accelsim layer``, ``accelsim calibrate``): each flag's value (None:
    not given), else the hardware's ``record``, else the run file's default.

    Raises:
        InputError: at the record of ``source`` for a flag that asks otherwise.
    """
    overlap_flag = "--fold-overlap" if fold_overlap else "--no-fold-overlap"
    return (
        Convention(
            flag_value(
                record, source, "timing.convention", convention, "--convention",
                Convention.ACCELSIM,
            )
        ),
        PsumPolicy(
            flag_value(record, source, "timing.psums", psums, "--psums", PsumPolicy.CHUNK)
        ),
        bool(flag_value(record, source, "timing.fold_overlap", fold_overlap, overlap_flag, False)),
    )  # fmt: skip
