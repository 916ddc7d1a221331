"""The sweep store: one SQLite database (WAL mode) per sweep output directory.

Table ``points`` holds one row per finished point, keyed by its identity: its
axis values (a column per axis key, named exactly as the key), the design
knobs and headline metrics as typed columns, the rest of its flat record
(energy by component, technique metrics) as JSON, its status (``ok`` or
``failed``), error message and timings.  Table ``meta`` holds the sweep's
name, file and axes.  Only the sweep's own process writes; each point is one
transaction, so a killed sweep loses at most the points it had not committed.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelsim.errors import OutputError

STORE_NAME = "store.sqlite"
POINTS_DIR = "points"

# (column, SQLite type): the design knobs (summary.json ``design``) then the metrics.
KNOB_COLUMNS: tuple[tuple[str, str], ...] = (
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


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


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
    return json.dumps(value, sort_keys=True)


class Store:
    """The SQLite store of one sweep directory.

    Raises:
        OutputError: when the database cannot be opened or written.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / STORE_NAME
        try:
            directory.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            # WAL with synchronous=NORMAL survives a killed process (not a power cut).
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
        except (OSError, sqlite3.Error) as exc:
            raise OutputError(f"{self.path}: cannot open the sweep store: {exc}") from None

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def prepare(self, meta: Mapping[str, Any], axes: Mapping[str, Sequence[Any]]) -> None:
        """Record the sweep's ``meta`` and make sure every column exists.

        ``axes`` maps each axis key to its values (for the column's type); an axis
        that names a knob or metric column shares that column.
        """
        fixed = {name for name, _ in (*STATUS_COLUMNS, *KNOB_COLUMNS, *METRIC_COLUMNS)}
        axis_columns = [(k, _sql_type(v)) for k, v in axes.items() if k not in fixed]
        columns = [
            *STATUS_COLUMNS,
            *axis_columns,
            *KNOB_COLUMNS,
            *METRIC_COLUMNS,
            (EXTRA_COLUMN, "TEXT"),
            *TIMING_COLUMNS,
        ]
        try:
            with closing(self._db.cursor()) as cur:
                cur.execute("BEGIN IMMEDIATE")
                cur.execute(
                    "CREATE TABLE IF NOT EXISTS points ("
                    + ", ".join(f"{_quote(n)} {t}" for n, t in columns)
                    + ")"
                )
                have = {row[1] for row in cur.execute("PRAGMA table_info(points)")}
                for name, kind in columns:  # new axes, or a store of an older version
                    if name not in have:
                        cur.execute(f"ALTER TABLE points ADD COLUMN {_quote(name)} {kind}")
                cur.executemany(
                    "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                    [(k, json.dumps(v)) for k, v in meta.items()],
                )
                cur.execute("COMMIT")
        except sqlite3.Error as exc:
            raise OutputError(f"{self.path}: cannot write the sweep store: {exc}") from None

    def meta(self) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in self._db.execute("SELECT key, value FROM meta")}

    def finished(self, include_failed: bool = True) -> set[str]:
        """Identities of the stored points (``ok`` only unless ``include_failed``)."""
        if not self._has_points():
            return set()
        query = "SELECT identity FROM points"
        if not include_failed:
            query += " WHERE status = 'ok'"
        return {row[0] for row in self._db.execute(query)}

    def add(self, point: StoredPoint) -> None:
        """Insert (or replace) one finished point in its own transaction."""
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
        row[EXTRA_COLUMN] = json.dumps(record)
        row |= {
            "wall_seconds": point.wall_seconds,
            "finished_at": point.finished_at,
            "worker": point.worker,
        }
        names = ", ".join(_quote(k) for k in row)
        marks = ", ".join("?" for _ in row)
        try:
            self._db.execute(
                f"INSERT OR REPLACE INTO points ({names}) VALUES ({marks})", list(row.values())
            )
        except sqlite3.Error as exc:
            raise OutputError(f"{self.path}: cannot write the sweep store: {exc}") from None

    def rows(self) -> list[dict[str, Any]]:
        """Every stored point as one flat record, in sweep order.

        The ``extra`` JSON is spread into the record (after the typed columns);
        timings stay last.
        """
        if not self._has_points():
            return []
        cursor = self._db.execute("SELECT * FROM points ORDER BY point, identity")
        names = [d[0] for d in cursor.description]
        timing = {name for name, _ in TIMING_COLUMNS}
        result = []
        for values in cursor:
            raw = dict(zip(names, values, strict=True))
            record = {k: v for k, v in raw.items() if k != EXTRA_COLUMN and k not in timing}
            record |= json.loads(raw[EXTRA_COLUMN] or "{}")
            record |= {k: raw[k] for k in names if k in timing}
            result.append(record)
        return result

    def integrity(self) -> str:
        """SQLite's own integrity check: ``ok`` for a sound database."""
        return str(self._db.execute("PRAGMA integrity_check").fetchone()[0])

    def _has_points(self) -> bool:
        query = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'points'"
        return self._db.execute(query).fetchone() is not None
