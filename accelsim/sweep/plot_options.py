"""What ``accelsim plot``'s options choose: the figure's kind, the file it goes to
(``--output``, ``--format``) and the points it draws (``--where``, and the
``--baseline`` pair of ``speedup``).  :mod:`accelsim.sweep.plots` draws them.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import Any

from accelsim.config.loader import parse_value
from accelsim.errors import InputError
from accelsim.report.figure import FORMATS
from accelsim.sweep.labels import Row, value_text


class PlotKind(str, Enum):
    """The figures of ``accelsim plot``."""

    SPEEDUP = "speedup"
    TECHNIQUE = "technique"
    ENERGY = "energy"
    HEATMAP = "heatmap"
    PARETO = "pareto"
    SCALING = "scaling"


def output_path(
    directory: Path, kind: PlotKind, output: Path | None, fmt: str | None
) -> tuple[Path, str]:
    """Where ``accelsim plot`` writes, and in which format.

    Without ``output``: ``directory/plots/<kind>.<fmt>`` (png by default).  With it,
    exactly ``output``: in the format its suffix names, or without a suffix in ``fmt``
    (png by default).

    Raises:
        InputError: for a suffix that is not a format's, or that contradicts ``fmt``.
    """
    if output is None:
        fmt = fmt or FORMATS[0]
        return directory / "plots" / f"{kind.value}.{fmt}", fmt
    suffix = output.suffix.lower().removeprefix(".")
    if not suffix:
        return output, fmt or FORMATS[0]
    if suffix not in FORMATS:
        raise InputError.single(
            "--output",
            "",
            f"unknown suffix '.{suffix}'; the formats are {', '.join(FORMATS)}",
            str(output),
        )
    if fmt is not None and fmt != suffix:
        raise InputError.single(
            "--output", "", f"its suffix contradicts --format {fmt}", str(output)
        )
    return output, suffix


def parse_assignment(text: str, option: str) -> tuple[str, Any]:
    """``KEY=VALUE`` of ``--baseline`` or ``--where``, the value read as YAML.

    Raises:
        InputError: for text without ``=``.
    """
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise InputError.single(option, "", "expected KEY=VALUE", text)
    return key.strip(), parse_value(value.strip())


def same_value(a: Any, b: Any) -> bool:
    """Whether a row's axis value ``a`` is ``b``, the value a filter gave (equal, or
    written alike)."""
    return a == b or str(a) == str(b)


def matches(key: str, a: Any, b: Any) -> bool:
    """Whether a row's value ``a`` of axis ``key`` is the filter's ``b``; for the
    ``techniques`` axis, the same techniques, whether ``b`` is written as the sweep
    file writes a section (``{gradient_prediction: {}, optimizer_fusion: {}}``, ``{}``
    for none) or as the column's label (``gradient_prediction+optimizer_fusion``, in
    any order; ``none``)."""
    if key != "techniques":
        return same_value(a, b)
    return _technique_names(a) == _technique_names(b)


def _technique_names(value: Any) -> frozenset[str]:
    """The techniques a ``techniques`` value names: a section's keys, or a label's
    ``+``-joined names."""
    if isinstance(value, dict):
        return frozenset(map(str, value))
    text = "" if value is None else str(value)
    return frozenset(text.split("+")) - {"", "none"}


def select(rows: Sequence[Row], axes: Sequence[str], where: Sequence[tuple[str, Any]]) -> list[Row]:
    """The successful rows matching every ``where`` pair (:func:`matches`).

    Raises:
        InputError: for a ``where`` key that is not an axis, or no row left: the first
            filter no finished point matches with the values its axis takes, else the
            filters together.
    """
    for key, value in where:
        if key not in axes:
            raise InputError.single("--where", key, f"not an axis; axes: {', '.join(axes)}", value)
    finished = [r for r in rows if r.get("status") == "ok"]
    for key, value in where:
        if not any(matches(key, r.get(key), value) for r in finished):
            values = ", ".join(dict.fromkeys(value_text(r.get(key)) for r in finished))
            raise InputError.single(
                "--where", key, f"no finished point has this value; it takes: {values}", value
            )
    chosen = [r for r in finished if all(matches(k, r.get(k), v) for k, v in where)]
    if not chosen:
        together = " them all" if len(where) > 1 else ""
        raise InputError.single("--where", "", f"no finished point matches{together}", dict(where))
    return chosen
