"""What ``accelsim plot --kind pareto`` plots: two metrics of each point, by column
name (``--x``, ``--y``), both minimised, and the points no other point beats in both.

Two metrics are derived per sample, so that points of different batch sizes compare:
``seconds_per_sample`` (the default x) and ``energy_pj_per_sample`` (the default y),
each of the point's own mean step: for a point that runs a technique, the baseline
step's ``seconds`` over the technique's ``speedup`` and its ``energy_pj`` times one
less the ``energy_reduction`` (the technique's whole training over its steps), never
the baseline step's; over the point's ``batch_size``.  Any other numeric column of
``accelsim collect`` (a design knob, ``macs``, ``dram_bytes``, a column a later
version adds) is plotted as stored.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from accelsim.errors import InputError
from accelsim.sweep.labels import Row

SECONDS_PER_SAMPLE = "seconds_per_sample"
ENERGY_PER_SAMPLE = "energy_pj_per_sample"
DERIVED = (SECONDS_PER_SAMPLE, ENERGY_PER_SAMPLE)


def metric(row: Row, key: str, option: str) -> float:
    """The value of metric ``key`` (a derived one, or a numeric column) of ``row``.

    Raises:
        InputError: for a key that is no numeric column of the row (named by
            ``option``, ``--x`` or ``--y``).
    """
    if key == SECONDS_PER_SAMPLE:
        return _number(row, "seconds", option) / _speedup(row) / _batch(row, option)
    if key == ENERGY_PER_SAMPLE:
        saved = row.get("energy_reduction")
        kept = 1.0 if saved is None else 1.0 - float(saved)
        return _number(row, "energy_pj", option) * kept / _batch(row, option)
    return _number(row, key, option)


def _speedup(row: Row) -> float:
    speedup = row.get("speedup")
    return 1.0 if speedup is None else float(speedup)


def _batch(row: Row, option: str) -> float:
    return _number(row, "batch_size", option)


def _number(row: Row, key: str, option: str) -> float:
    value: Any = row.get(key)
    if not _numeric(value) or not math.isfinite(value):
        numeric = ", ".join([*DERIVED, *(k for k, v in row.items() if _numeric(v))])
        raise InputError.single(
            option, key, f"not a numeric column of every point; the numeric ones: {numeric}", value
        )
    return float(value)


def _numeric(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point dominates (at most as large in both
    coordinates and smaller in one: both minimised), by the first coordinate, then the
    second, then the index.  Equal points are all on the front or all off it."""
    order = sorted(range(len(points)), key=lambda i: (points[i], i))
    front: list[int] = []
    best = math.inf  # the least second coordinate among points of a smaller first one
    start = 0
    while start < len(order):
        x = points[order[start]][0]
        end = start
        while end < len(order) and points[order[end]][0] == x:
            end += 1
        least = points[order[start]][1]  # sorted: the group's least second coordinate
        if least < best:
            front += [i for i in order[start:end] if points[i][1] == least]
            best = least
        start = end
    return front


TIME_UNITS = ((1.0, "s"), (1e3, "ms"), (1e6, "µs"))
ENERGY_UNITS = ((1e-12, "J"), (1e-9, "mJ"), (1e-6, "µJ"))
"""The units the derived metrics are drawn in (the factor from seconds or pJ), the
first in which the largest value drawn is at least 1."""


def axis_label(key: str, values: Sequence[float]) -> tuple[float, str]:
    """The factor metric ``key``'s ``values`` are drawn at and its axis label: the
    derived metrics per sample in the unit of :data:`TIME_UNITS` or
    :data:`ENERGY_UNITS` that suits them, any other column as stored, in its own unit
    (:func:`~accelsim.sweep.collect.column_unit`)."""
    from accelsim.sweep.collect import column_unit

    derived = {
        SECONDS_PER_SAMPLE: ("time", TIME_UNITS),
        ENERGY_PER_SAMPLE: ("energy", ENERGY_UNITS),
    }
    if key in derived:
        what, units = derived[key]
        largest = max(values, default=0.0)
        factor, unit = next(((f, u) for f, u in units if largest * f >= 1), units[-1])
        return factor, f"{what} per sample ({unit})"
    unit = column_unit(key)
    return 1.0, f"{key} ({unit})" if unit else key
