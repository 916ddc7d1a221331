"""The sweep store: one SQLite database (WAL mode) per sweep output directory.

Table ``points`` holds one row per finished point, keyed by its identity (its
columns: :mod:`accelsim.sweep.schema`).  Table ``meta`` holds the sweep's
name, file and axes; table ``staging`` the token of every sweep process that
wrote into ``points/`` (its staging entries carry it, see
:mod:`accelsim.sweep.points`).  Only the sweep's own process writes; the points
of a chunk (at most 16, see :func:`~accelsim.sweep.executors.chunked`) are one
transaction, so a killed sweep loses at most the points it had not committed.

Every open checks the database (SQLite's ``quick_check`` and the schema) before
anything reads or writes it, so a damaged store or a file that is not a store is
reported (exit 2) and left as it was.  Readers (``collect``, ``plot``) open it
read-only.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

from accelsim.errors import InputError, OutputError, shown
from accelsim.sweep.schema import (
    EXTRA_COLUMN,
    POINTS_DIR,
    REQUIRED_COLUMNS,
    STORE_NAME,
    TABLES,
    TIMING_COLUMNS,
    StoredPoint,
    column_key,
    dumps,
    point_row,
    points_columns,
    quote,
    strict,
)

_SQLITE_HEADER = b"SQLite format 3\x00"


class Store:
    """The SQLite store of one sweep directory.

    Args:
        directory: The sweep's output directory.
        write: Open for the sweep to write (creating the store if there is none);
            otherwise read-only (``collect``, ``plot``): the file is never
            changed, and a store the user may read but not write can be read.
        empty: Read-only: take an empty database (a sweep started at the same
            time has created the file and not yet its tables) for a store without
            points instead of refusing it; :attr:`created` says which it was.

    Raises:
        InputError: for a file that is not a sweep store, or a damaged one
            (with what can still be recovered).
        OutputError: when the store cannot be opened or created.
    """

    def __init__(self, directory: Path, write: bool = False, empty: bool = False) -> None:
        self.directory = directory
        self.path = directory / STORE_NAME
        self._shown = shown(str(self.path))
        self._use = "write" if write else "read"
        self._inserts: dict[tuple[str, ...], str] = {}
        self._db = self._connect(write)
        try:
            self._tables = self._check(write or empty)
            self._meta = self._read_meta()
            if write:
                # WAL with synchronous=NORMAL survives a killed process (not a power cut).
                self._write("PRAGMA journal_mode=WAL", [])
                self._write("PRAGMA synchronous=NORMAL", [])
        except BaseException:
            self._db.close()
            raise

    def _connect(self, write: bool) -> sqlite3.Connection:
        # The sweep writes only a store of its own, never through a symbolic link.
        try:
            info: os.stat_result | None = os.lstat(self.path) if write else os.stat(self.path)
        except FileNotFoundError:
            info = None
        except OSError as exc:
            raise OutputError(
                f"{self._shown}: cannot open the sweep store: {_reason(exc)}"
            ) from None
        if info is None and not write:
            raise InputError.single(
                shown(str(self.directory)), "", f"not a sweep output directory (no {STORE_NAME})"
            )
        if info is not None and not stat.S_ISREG(info.st_mode):
            kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a regular file"
            raise self._problem(f"not a sweep store: {kind}")
        if info is not None and info.st_size > 0:
            self._check_header()
        try:
            db = (
                sqlite3.connect(self.path, isolation_level=None) if write else _read_only(self.path)
            )
        except sqlite3.OperationalError as exc:
            raise OutputError(f"{self._shown}: cannot open the sweep store: {exc}") from None
        except sqlite3.Error as exc:
            raise self._damaged([str(exc)], None) from None
        db.text_factory = _utf8
        return db

    def _check_header(self) -> None:
        try:
            with self.path.open("rb") as handle:
                header = handle.read(len(_SQLITE_HEADER))
        except OSError as exc:
            raise OutputError(
                f"{self._shown}: cannot read the sweep store: {_reason(exc)}"
            ) from None
        if header != _SQLITE_HEADER:
            raise self._problem(
                "not a sweep store: not an SQLite database (another file, or its first page"
                " is damaged)"
            )

    def _check(self, empty: bool) -> dict[str, set[str]]:
        """The store's tables and their columns, after checking the database and its
        schema (an empty database only if ``empty`` may be)."""
        problems = [str(row[0]) for row in self._read("PRAGMA quick_check")]
        if problems != ["ok"]:
            raise self._damaged(problems, self._db)
        tables = self._schema()
        names = sorted(tables)
        if not names and not empty:
            raise self._problem("not a sweep store yet: an empty database")
        if set(names) - TABLES or (names and "meta" not in names):
            listed = ", ".join(shown(repr(n)) for n in names)
            raise self._problem(f"not a sweep store: an SQLite database with tables {listed}")
        if tables.get("meta", {"key", "value"}) != {"key", "value"}:
            raise self._problem("not a sweep store: table 'meta' lacks columns key, value")
        missing = [c for c in REQUIRED_COLUMNS if "points" in tables and c not in tables["points"]]
        if missing:
            raise self._problem(
                f"table 'points' lacks column {', '.join(repr(c) for c in missing)}; a sweep"
                " store has always had it: the file was changed outside accelsim"
            )
        return tables

    def _schema(self) -> dict[str, set[str]]:
        """Each table's name and columns."""
        names = [
            str(row[0]) for row in self._read("SELECT name FROM sqlite_master WHERE type = 'table'")
        ]
        return {
            name: {str(row[1]) for row in self._read(f"PRAGMA table_info({quote(name)})")}
            for name in names
        }

    def _read_meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = {}
        if "meta" not in self._tables:
            return meta
        for key, value in self._read("SELECT key, value FROM meta"):
            try:
                meta[str(key)] = json.loads(value)
            except (TypeError, json.JSONDecodeError):
                raise self._problem(f"meta '{key}': not JSON (got {shown(repr(value))})") from None
        axes = meta.get("axes", [])
        if not isinstance(axes, list) or not all(isinstance(a, str) for a in axes):
            raise self._problem(f"meta 'axes': not a list of axis keys (got {shown(repr(axes))})")
        return meta

    def _problem(self, message: str) -> InputError:
        return InputError.single(self._shown, "", message)

    def _damaged(self, problems: Sequence[str], db: sqlite3.Connection | None) -> InputError:
        """The report of a damaged store: what SQLite found and what can be recovered
        (the rows ``db`` can still read, the points' files)."""
        rows = 0
        try:
            for _ in db.execute("SELECT * FROM points") if db is not None else ():
                rows += 1
        except (sqlite3.Error, UnicodeDecodeError):
            pass
        points = self.directory / POINTS_DIR
        intact = sum(1 for p in points.glob("*/summary.json")) if points.is_dir() else 0
        # quick_check heads its list with "*** in database main ***" lines.
        found = [line for p in problems for line in p.splitlines() if not line.startswith("***")]
        more = f", and {len(found) - 1:,} more" if len(found) > 1 else ""
        return self._problem(
            f"damaged sweep store ({shown(found[0] if found else 'unreadable')}{more});"
            f" nothing was changed. {rows:,} point rows are still readable and {intact:,}"
            f" finished points are intact in {POINTS_DIR}/: move {STORE_NAME} aside and run the"
            " sweep again to rebuild it (the points are recomputed), or salvage rows with"
            " sqlite3's .recover"
        )

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def prepare(self, meta: Mapping[str, Any], axes: Mapping[str, Sequence[Any]]) -> None:
        """Record the sweep's ``meta`` and make sure every table and column exists.

        ``axes`` maps each axis key to its values (the columns:
        :func:`~accelsim.sweep.schema.points_columns`).

        Raises:
            OutputError: for an axis whose column name SQLite takes for another column's
                (they differ only in letter case), or when the store cannot be written.
        """
        columns = points_columns(axes)
        have = {column_key(c): c for c in self._tables.get("points", set())}
        for name, _ in columns:
            other = have.get(column_key(name), name)
            if other != name:
                raise OutputError(
                    f"{self._shown}: axis {shown(repr(name))} would share column"
                    f" {shown(repr(other))} (SQLite ignores letter case in column names);"
                    " rename the axis or write the sweep to another --out"
                )
        try:
            with closing(self._db.cursor()) as cur:
                cur.execute("BEGIN IMMEDIATE")
                cur.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
                cur.execute(
                    "CREATE TABLE IF NOT EXISTS staging (token TEXT PRIMARY KEY, started_at REAL)"
                )
                cur.execute(
                    "CREATE TABLE IF NOT EXISTS points ("
                    + ", ".join(f"{quote(n)} {t}" for n, t in columns)
                    + ")"
                )
                present = {row[1] for row in cur.execute("PRAGMA table_info(points)")}
                for name, kind in columns:  # new axes, or a store of an older version
                    if name not in present:
                        cur.execute(f"ALTER TABLE points ADD COLUMN {quote(name)} {kind}")
                cur.executemany(
                    "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                    [(k, dumps(v)) for k, v in meta.items()],
                )
                cur.execute("COMMIT")
        except sqlite3.Error as exc:
            raise OutputError(f"{self._shown}: cannot write the sweep store: {exc}") from None
        self._tables = self._schema()
        self._meta = {**self._meta, **strict(dict(meta))}

    @property
    def created(self) -> bool:
        """Whether the store has its tables (a sweep made them), not an empty database."""
        return bool(self._tables)

    def meta(self) -> dict[str, Any]:
        """The sweep's name, file, spec, axes, version and commit, as recorded."""
        return dict(self._meta)

    def finished(self, include_failed: bool = True) -> set[str]:
        """Identities of the stored points (``ok`` only unless ``include_failed``), from
        whole rows as :meth:`rows` reads them: a row ``collect`` reports as damaged (raising
        :class:`InputError`) is reported when a sweep resumes into the store too."""
        rows = self.rows()
        return {str(r["identity"]) for r in rows if include_failed or r["status"] == "ok"}

    def staging_tokens(self) -> set[str]:
        """The tokens of the sweep processes that may have left staging entries in ``points/``."""
        if "staging" not in self._tables:
            return set()
        return {str(row[0]) for row in self._read("SELECT token FROM staging")}

    def record_token(self, token: str, started_at: float) -> None:
        """Record this process's token before it makes any staging entry."""
        self._write("INSERT INTO staging VALUES (?, ?)", [token, started_at])

    def forget_tokens(self, tokens: Iterable[str]) -> None:
        """Drop tokens whose staging entries are all gone."""
        for token in tokens:
            self._write("DELETE FROM staging WHERE token = ?", [token])

    def add(self, points: Iterable[StoredPoint]) -> None:
        """Insert (or replace) finished points, all in one transaction."""
        rows = [point_row(point) for point in points]
        try:
            with closing(self._db.cursor()) as cur:
                cur.execute("BEGIN IMMEDIATE")
                for row in rows:
                    cur.execute(self._insert(tuple(row)), list(row.values()))
                cur.execute("COMMIT")
        except sqlite3.Error as exc:
            if self._db.in_transaction:
                self._db.rollback()
            raise OutputError(f"{self._shown}: cannot write the sweep store: {exc}") from None

    def _insert(self, columns: tuple[str, ...]) -> str:
        """The statement inserting a row of ``columns`` (made once per set of columns)."""
        if columns not in self._inserts:
            names = ", ".join(quote(k) for k in columns)
            marks = ", ".join("?" for _ in columns)
            self._inserts[columns] = f"INSERT OR REPLACE INTO points ({names}) VALUES ({marks})"
        return self._inserts[columns]

    def rows(self) -> list[dict[str, Any]]:
        """Every stored point as one flat record, in sweep order.

        The ``extra`` JSON is spread into the record (after the typed columns);
        timings stay last.

        Raises:
            InputError: for a row whose ``extra`` column is not a JSON object.
        """
        if "points" not in self._tables:
            return []
        names, values_of_rows = self._read_with_names(
            "SELECT * FROM points ORDER BY point, identity"
        )
        timing = {name for name, _ in TIMING_COLUMNS}
        result = []
        for values in values_of_rows:
            raw = dict(zip(names, values, strict=True))
            record = {k: v for k, v in raw.items() if k != EXTRA_COLUMN and k not in timing}
            try:
                extra = json.loads(raw[EXTRA_COLUMN] or "{}")
            except (TypeError, json.JSONDecodeError):
                extra = None
            if not isinstance(extra, dict):
                raise self._problem(
                    f"point {shown(repr(raw['identity']))}: column '{EXTRA_COLUMN}' is not a JSON"
                    f" object (got {shown(repr(raw[EXTRA_COLUMN]))})"
                )
            record |= extra
            record |= {k: raw[k] for k in names if k in timing}
            result.append(record)
        return result

    def integrity(self) -> str:
        """SQLite's own integrity check: ``ok`` for a sound database."""
        return str(self._read("PRAGMA integrity_check")[0][0])

    def _read(self, query: str) -> list[Any]:
        """Every row ``query`` gives; a database error is reported as damage."""
        return self._read_with_names(query)[1]

    def _read_with_names(self, query: str) -> tuple[list[str], list[Any]]:
        try:
            cursor = self._db.execute(query)
            return [d[0] for d in cursor.description or ()], cursor.fetchall()
        except sqlite3.OperationalError as exc:  # locked, read-only, cannot open, I/O
            raise OutputError(f"{self._shown}: cannot {self._use} the sweep store: {exc}") from None
        except sqlite3.Error as exc:  # malformed, not a database
            raise self._damaged([str(exc)], self._db) from None
        except UnicodeDecodeError:  # a scrambled text value, which quick_check does not see
            raise self._damaged(["a text value is not UTF-8"], self._db) from None

    def _write(self, statement: str, values: Sequence[Any]) -> None:
        try:
            self._db.execute(statement, values)
        except sqlite3.Error as exc:
            raise OutputError(f"{self._shown}: cannot write the sweep store: {exc}") from None


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _utf8(data: bytes) -> str:
    """A text value; one that is not UTF-8 raises :class:`UnicodeDecodeError` (damage)."""
    return data.decode("utf-8")


def _read_only(path: Path) -> sqlite3.Connection:
    """A connection that cannot change the database (``mode=ro``).

    A WAL database needs its ``-shm`` file, which SQLite creates beside it; in a
    directory the user cannot write, and with no ``-wal`` file left (no sweep
    running, none killed with uncommitted pages), the database file alone is the
    whole store and is opened as immutable.
    """
    uri = f"file:{urllib.parse.quote(str(path.absolute()))}?mode=ro"
    db = sqlite3.connect(uri, uri=True)
    try:
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return db
    except sqlite3.OperationalError:
        db.close()
        if os.path.lexists(f"{path}-wal"):
            raise
    return sqlite3.connect(f"{uri}&immutable=1", uri=True)
