"""Export a sweep's store as one flat table (``accelsim collect``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accelsim.sweep.schema import TIMING_COLUMNS
from accelsim.sweep.store import Store

# Bookkeeping columns, moved after the numbers.
_TRAILING = ("status", "error", "label", "identity")

COLUMN_UNITS = {
    "seconds": "s (simulated step time at the clock)",
    "macs": "multiply-accumulates per step",
    "params": "parameters",
    "utilization": "fraction of peak MACs (0 to 1)",
    "stall_fraction": "fraction of the step (0 to 1)",
    "speedup": "x (the technique's whole-training time ratio, baseline / technique)",
    "speedup_bound": "x (the most the binding resource allows)",
    "energy_reduction": "fraction (0.25 = 25 % saved; negative = more energy)",
    "dram_reduction": "fraction (0.25 = 25 % fewer DRAM bytes; negative = more)",
    "gp_fraction": "fraction of steps",
    "wall_seconds": "s (host time to simulate the point)",
    "finished_at": "s since 1970-01-01 UTC (host clock)",
}
"""Units of the ``collect`` columns a name's suffix does not give (:func:`column_unit`)."""

_SUFFIX_UNITS = (
    ("_bytes_per_cycle", "bytes per cycle"),
    ("_cycles", "cycles"),
    ("_bytes", "bytes"),
    ("_pj", "pJ"),
    ("_kib", "KiB"),
    ("_gib", "GiB"),
    ("_mhz", "MHz"),
)
_WORD_BYTES = "word_bytes_"


def column_unit(name: str) -> str:
    """The unit of a ``collect`` column: from :data:`COLUMN_UNITS`, else from its suffix
    (``_cycles``, ``_bytes``, ``_bytes_per_cycle``, ``_pj``, ``_kib``, ``_gib``,
    ``_mhz``), bytes per element for the word sizes (``word_bytes_weights``), else
    empty (names, counts, labels and axis values as the sweep file wrote them)."""
    if name in COLUMN_UNITS:
        return COLUMN_UNITS[name]
    if name.startswith(_WORD_BYTES):
        return "bytes per element"
    return next((unit for suffix, unit in _SUFFIX_UNITS if name.endswith(suffix)), "")


def open_store(directory: Path) -> Store:
    """The store of a sweep output directory, opened read-only.

    Raises:
        InputError: when ``directory`` holds no sweep store, or a damaged one.
    """
    return Store(directory)


def collect(directory: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """The sweep's columns and one row per stored point, in sweep order.

    Columns: ``point``, each axis key (named exactly as the key), the design
    knobs, the run's settings and metrics (cycles, time, utilization, stalls,
    DRAM bytes, energy in all and by component, technique metrics), then
    ``status``, ``error``, ``label``, ``identity`` and the timings.

    Raises:
        InputError: when ``directory`` holds no sweep store, or a damaged one.
    """
    with open_store(directory) as store:
        axes: list[str] = store.meta().get("axes", [])
        rows = store.rows()
    timing = [name for name, _ in TIMING_COLUMNS]
    columns = ["point", *axes]
    for row in rows:
        columns += [k for k in row if k not in columns and k not in _TRAILING + tuple(timing)]
    columns += [*_TRAILING, *timing]
    return columns, [{c: row.get(c) for c in columns} for row in rows]
