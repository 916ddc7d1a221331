"""Export a sweep's store as one flat table (``accelsim collect``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accelsim.sweep.store import TIMING_COLUMNS, Store

# Bookkeeping columns, moved after the numbers.
_TRAILING = ("status", "error", "label", "identity")


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
