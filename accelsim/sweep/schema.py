"""What a sweep store holds: its files in a sweep directory, the columns of its
table ``points`` and how a finished point becomes a row of it.

A row has a column per axis key (named exactly as the key), the design knobs and
headline metrics as typed columns, the rest of the point's flat record (energy by
component, technique metrics) as JSON in :data:`EXTRA_COLUMN`, its status, error
message and timings.  JSON is strict: a non-finite number (an axis value ``.inf``)
is stored as its YAML spelling, the string ``".inf"``.  :mod:`accelsim.sweep.store`
opens, checks, reads and writes the database.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelsim.config.design import design_columns
from accelsim.report.silicon import SILICON_COLUMNS

STORE_NAME = "store.sqlite"
POINTS_DIR = "points"
OWNED_NAMES = (
    STORE_NAME,
    f"{STORE_NAME}-wal",
    f"{STORE_NAME}-shm",
    f"{STORE_NAME}-journal",
    POINTS_DIR,
)
"""Entries of a sweep directory that belong to the sweep (no command writes onto them)."""

# (column, SQLite type): the design knobs (summary.json ``design``) then the metrics.
_NAMED_KNOBS: tuple[tuple[str, str], ...] = (
    ("workload", "TEXT"),
    ("hardware", "TEXT"),
    ("rows", "INTEGER"),
    ("cols", "INTEGER"),
    ("dataflow", "TEXT"),
    ("ifmap_kib", "REAL"),
    ("filter_kib", "REAL"),
    ("ofmap_kib", "REAL"),
    ("stash_kib", "REAL"),
    ("dram_bandwidth_bytes_per_cycle", "REAL"),
    ("dram_latency_cycles", "INTEGER"),
    ("processors", "INTEGER"),
    ("clock_mhz", "REAL"),
    ("batch_size", "INTEGER"),
    ("techniques", "TEXT"),
)
KNOB_COLUMNS = (
    *_NAMED_KNOBS,
    *((key, kind) for key, kind in design_columns() if key not in dict(_NAMED_KNOBS)),
)
"""The columns above, then every other design key of any hardware spec (each DRAM
model's own keys included): a point's hardware fields are typed columns, whichever
its sweep varies."""
METRIC_COLUMNS: tuple[tuple[str, str], ...] = (
    ("total_cycles", "INTEGER"),
    ("seconds", "REAL"),
    ("macs", "INTEGER"),
    ("params", "INTEGER"),
    ("utilization", "REAL"),
    ("stall_fraction", "REAL"),
    ("array_stall_cycles", "INTEGER"),
    ("dram_bytes", "INTEGER"),
    ("dram_read_bytes", "INTEGER"),
    ("dram_write_bytes", "INTEGER"),
    ("interconnect_bytes", "INTEGER"),
    ("energy_pj", "REAL"),
    *((name, "REAL") for name in SILICON_COLUMNS),
)
# Bookkeeping columns: identical across executors except the timings.
STATUS_COLUMNS: tuple[tuple[str, str], ...] = (
    ("identity", "TEXT PRIMARY KEY"),
    ("point", "INTEGER"),
    ("label", "TEXT"),
    ("status", "TEXT NOT NULL CHECK (status IN ('ok', 'failed'))"),
    ("error", "TEXT"),
)
TIMING_COLUMNS: tuple[tuple[str, str], ...] = (
    ("wall_seconds", "REAL"),
    ("finished_at", "REAL"),
    ("worker", "TEXT"),
)
EXTRA_COLUMN = "extra"
REQUIRED_COLUMNS = (*(name for name, _ in STATUS_COLUMNS), EXTRA_COLUMN)
"""Columns every version of the store has had: a store without one is not readable."""
TABLES = {"meta", "points", "staging"}


@dataclass(frozen=True)
class StoredPoint:
    """A finished point as the store records it."""

    identity: str
    point: int
    label: str
    status: str
    error: str | None
    axes: Mapping[str, Any]
    record: Mapping[str, Any]
    wall_seconds: float
    finished_at: float
    worker: str


def quote(name: str) -> str:
    """``name`` as an SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def column_key(name: str) -> str:
    """``name`` as SQLite compares column names: ASCII letters in lower case."""
    return "".join(c.lower() if "A" <= c <= "Z" else c for c in name)


def strict(value: Any) -> Any:
    """``value`` with every non-finite number as its YAML spelling (``.inf``, ``-.inf``,
    ``.nan``), so that it can be written as strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else (".inf" if value > 0 else "-.inf")
    if isinstance(value, Mapping):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict(v) for v in value]
    return value


def dumps(value: Any, **options: Any) -> str:
    """``value`` as strict JSON (see :func:`strict`)."""
    return json.dumps(strict(value), allow_nan=False, **options)


def _sql_type(values: Iterable[Any]) -> str:
    kinds = {type(v) for v in values}
    if kinds <= {int}:
        return "INTEGER"
    if kinds <= {int, float}:
        return "REAL"
    return "TEXT"


def _cell(value: Any) -> Any:
    """A value as a column holds it (lists and mappings as JSON text)."""
    if value is None or isinstance(value, int | float | str):
        return value
    return dumps(value, sort_keys=True)


def points_columns(axes: Mapping[str, Sequence[Any]]) -> list[tuple[str, str]]:
    """The columns of table ``points`` and their SQLite types for a sweep whose ``axes``
    map each axis key to its values (for the column's type); an axis that names a knob
    or metric column shares that column."""
    fixed = {name for name, _ in (*STATUS_COLUMNS, *KNOB_COLUMNS, *METRIC_COLUMNS)}
    axis_columns = [(k, _sql_type(v)) for k, v in axes.items() if k not in fixed]
    return [
        *STATUS_COLUMNS,
        *axis_columns,
        *KNOB_COLUMNS,
        *METRIC_COLUMNS,
        (EXTRA_COLUMN, "TEXT"),
        *TIMING_COLUMNS,
    ]


def point_row(point: StoredPoint) -> dict[str, Any]:
    """The cells of ``point``'s row, by column name."""
    record = dict(point.record)
    row: dict[str, Any] = {
        "identity": point.identity,
        "point": point.point,
        "label": point.label,
        "status": point.status,
        "error": point.error,
    }
    for name, _ in (*KNOB_COLUMNS, *METRIC_COLUMNS):
        row[name] = _cell(record.pop(name, None))
    for key, value in point.axes.items():
        row.setdefault(key, _cell(value))
    row[EXTRA_COLUMN] = dumps(record)
    return row | {
        "wall_seconds": point.wall_seconds,
        "finished_at": point.finished_at,
        "worker": point.worker,
    }


def sweep_owning(path: Path) -> Path | None:
    """The sweep directory whose own file ``path`` is (its store, the store's journal files,
    ``points/`` or anything in it), after following symbolic links; None for any other path."""
    real = Path(os.path.realpath(path))
    for entry in (real, *real.parents):
        directory = entry.parent
        if entry.name in OWNED_NAMES and (directory / STORE_NAME).is_file():
            return directory
    return None
