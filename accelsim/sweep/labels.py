"""The words of a sweep's figures: axis names, values, the set-up a title states.

A figure names an axis as the user wrote it in the sweep file, or in words for the
common ones (``array.rows`` is "array rows", ``dram.bandwidth_bytes_per_cycle``
"DRAM bandwidth (B/cycle)"); tick labels and legend entries are values only.  A
title states the set-up of the points drawn, from their own columns: technique,
hardware (array, DRAM, processors), model and batch, each "varied" when the
points differ, and every ``--where`` filter that chose them.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

Row = Mapping[str, Any]

AXIS_TITLES = {
    "model": "model",
    "workload": "model",
    "array.rows": "array rows",
    "array.cols": "array columns",
    "array.dataflow": "dataflow",
    "dram.bandwidth_bytes_per_cycle": "DRAM bandwidth (B/cycle)",
    "dram.latency_cycles": "DRAM latency (cycles)",
    "batch_size": "batch size",
    "processors": "processors",
    "buffers.ifmap_kib": "ifmap SRAM (KiB)",
    "buffers.filter_kib": "filter SRAM (KiB)",
    "buffers.ofmap_kib": "ofmap SRAM (KiB)",
    "buffers.stash_kib": "stash SRAM (KiB)",
    "clock_mhz": "clock (MHz)",
}
"""Words for the common axes; any other axis is named by its key."""


def axis_title(key: str) -> str:
    """How a figure names axis ``key``."""
    return AXIS_TITLES.get(key, key)


def value_text(value: Any) -> str:
    """An axis value as a tick label: ``64`` for 64.0, ``ideal`` for an infinite bandwidth,
    a techniques section by its techniques' names (``gradient_prediction+optimizer_fusion``,
    ``none``)."""
    if isinstance(value, dict):
        return "+".join(map(str, value)) or "none"
    if value == ".inf" or value == float("inf"):
        return "ideal"
    if isinstance(value, float):
        return f"{value:g}"
    return "" if value is None else str(value)


def values_text(row: Row, keys: Sequence[str]) -> str:
    """The values of ``keys`` in ``row``, as a tick label or legend entry (``all`` for none)."""
    return ", ".join(value_text(row.get(k)) for k in keys) or "all"


def _one(rows: Sequence[Row], text: Any) -> str:
    values = {text(r) for r in rows}
    return values.pop() if len(values) == 1 else "varied"


def _array(row: Row) -> str:
    return f"{row.get('rows')}x{row.get('cols')} {row.get('dataflow')}"


def _dram(row: Row) -> str:
    if row.get("dram_ideal"):
        return "ideal"
    return f"{value_text(row.get('dram_bandwidth_bytes_per_cycle'))} B/cycle"


def setup_line(rows: Sequence[Row]) -> str:
    """The set-up of ``rows``: technique, hardware, model and batch, "varied" where they
    differ."""
    processors = _one(rows, lambda r: str(r.get("processors")))
    parts = [
        f"technique {_one(rows, lambda r: str(r.get('techniques') or 'none'))}",
        f"array {_one(rows, _array)}",
        f"DRAM {_one(rows, _dram)}",
        f"{processors} processor{'' if processors == '1' else 's'}",
        f"model {_one(rows, lambda r: str(r.get('workload')))}",
        f"batch {_one(rows, lambda r: str(r.get('batch_size')))}",
    ]
    return "; ".join(parts)


def title(
    name: str, what: str, rows: Sequence[Row], where: Sequence[tuple[str, Any]], width: int
) -> str:
    """A figure's title: the sweep and what is drawn, the set-up of ``rows``, and every
    ``where`` filter, wrapped at ``width`` characters."""
    lines = [f"{name}: {what}", setup_line(rows)]
    if where:
        lines.append(
            "points with " + ", ".join(f"{axis_title(k)} = {value_text(v)}" for k, v in where)
        )
    return "\n".join(textwrap.fill(line, width) for line in lines)
