"""Measured GEMM latencies: the CSV ``accelsim calibrate`` reads, and size classes.

Columns ``M, N, K, dtype, latency_us`` (SCALE-Sim's GEMM convention,
``C[M x N] = A[M x K] . B[K x N]``), one GEMM launched alone per row.  A GEMM's
size is SCALE-Sim's compute cycles on one 128x128 array,
``(3 * 128 + M - 2) * ceil(N / 128) * ceil(K / 128) - 1``: the column the
published measurements carry, by which accuracy is reported per class.  The file
may start with a UTF-8 byte order mark (Excel's "CSV UTF-8"); numbers are written
in ASCII digits.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from accelsim.config.files import display_path, read_text
from accelsim.errors import MAX_COUNT, MAX_COUNT_TEXT, InputError, Problem

COLUMNS = ("M", "N", "K", "dtype", "latency_us")
SIZE_CLASSES = (
    ("< 1e4", 0.0, 1e4),
    ("1e4-1e5", 1e4, 1e5),
    ("1e5-1e6", 1e5, 1e6),
    ("> 1e6", 1e6, math.inf),
)
"""Size classes (label, lowest size, size it stays below), in SCALE-Sim cycles."""
MAX_DIM = 2**24
"""Largest GEMM dimension accepted; a row's MACs (``M x N x K``) are at most
:data:`~accelsim.errors.MAX_COUNT` too."""
MAX_GEMMS = 10_000
"""Most measured GEMMs (rows) a file holds: each distinct one is costed once, and the
fit prices them all at every step of its search."""


@dataclass(frozen=True)
class Measurements:
    """Measured GEMMs, one entry per row of the file (int64, latency float), and
    where each was written: ``source`` (the file as messages name it) and ``lines``
    (each GEMM's line in it; None for GEMMs not read from a file, named by their
    1-based position)."""

    m: np.ndarray
    n: np.ndarray
    k: np.ndarray
    latency_us: np.ndarray
    source: str = "measurements"
    lines: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.m.shape[0])

    def subset(self, rows: np.ndarray) -> Measurements:
        """The measurements at ``rows`` (indices or a mask)."""
        lines = None if self.lines is None else self.lines[rows]
        return Measurements(
            self.m[rows], self.n[rows], self.k[rows], self.latency_us[rows], self.source, lines
        )

    def row(self, index: int) -> str:
        """Where the GEMM at ``index`` was written: ``line N`` of the file (``row N``
        for GEMMs not read from one)."""
        if self.lines is None:
            return f"row {index + 1}"
        return f"line {int(self.lines[index])}"

    @property
    def size_cycles(self) -> np.ndarray:
        """SCALE-Sim's compute cycles of each GEMM on one 128x128 array."""
        return size_cycles(self.m, self.n, self.k)

    def in_class(self, label: str) -> np.ndarray:
        """Mask of the GEMMs in the size class ``label`` (one of :data:`SIZE_CLASSES`)."""
        return size_class(self.size_cycles, label)


def size_cycles(m: np.ndarray, n: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``(3 * 128 + M - 2) * ceil(N / 128) * ceil(K / 128) - 1``."""
    sizes: np.ndarray = (3 * 128 + m - 2) * (-(-n // 128)) * (-(-k // 128)) - 1
    return sizes


def size_class(sizes: np.ndarray, label: str) -> np.ndarray:
    """Mask of the GEMMs in the size class ``label`` (one of :data:`SIZE_CLASSES`)."""
    low, high = next((lo, hi) for name, lo, hi in SIZE_CLASSES if name == label)
    mask: np.ndarray = (sizes >= low) & (sizes < high)
    return mask


def read_measurements(path: Path, dtype: str) -> Measurements:
    """The measurements in ``path``; every row's ``dtype`` must be ``dtype``.

    Raises:
        InputError: listing every malformed row (missing column, a dimension that is
            not a positive integer up to :data:`MAX_DIM`, MACs past
            :data:`~accelsim.errors.MAX_COUNT`, a latency that is not a positive
            finite number, another dtype), a line the CSV reader refuses, an empty
            file, or one of more than :data:`MAX_GEMMS` rows.
    """
    name = display_path(path)
    text = read_text(path, InputError, name).removeprefix("\ufeff")
    reader = csv.DictReader(io.StringIO(text))
    problems: list[Problem] = []
    rows: list[tuple[int, int, int, float]] = []
    lines: list[int] = []
    try:
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError.single(
                name, "", f"missing columns {', '.join(missing)}", reader.fieldnames
            )
        for row in reader:
            found = _row(row, f"line {reader.line_num}", dtype, name, problems)
            if found is not None:
                rows.append(found)
                lines.append(reader.line_num)
    except csv.Error as exc:
        line = reader.line_num + 1  # the line the reader failed in, not yet counted
        raise InputError.single(name, f"line {line}", f"not CSV: {exc}") from None
    if len(rows) > MAX_GEMMS:
        problems.append(
            Problem(name, "", f"more than {MAX_GEMMS:,} measured GEMMs", f"{len(rows):,} rows")
        )
    if problems:
        raise InputError(problems)
    if not rows:
        raise InputError.single(name, "", "no measurements")
    m, n, k, lat = zip(*rows, strict=True)
    ints = np.int64
    return Measurements(
        np.asarray(m, ints), np.asarray(n, ints), np.asarray(k, ints), np.asarray(lat, float),
        name, np.asarray(lines, ints),
    )  # fmt: skip


def _row(
    row: dict[str | None, str | None], where: str, dtype: str, name: str, problems: list[Problem]
) -> tuple[int, int, int, float] | None:
    """The GEMM of one row, or None after adding its problems to ``problems``."""
    found = len(problems)
    dims = []
    for col in ("M", "N", "K"):
        value = (row[col] or "").strip()
        digits = value.lstrip("0")
        if not (value.isascii() and value.isdigit() and len(digits) <= len(str(MAX_DIM))):
            digits = ""  # not digits, or more of them than any dimension in range has
        if not digits or int(digits) > MAX_DIM:
            problems.append(
                Problem(name, f"{where}: {col}", f"not an integer in 1..{MAX_DIM}", value)
            )
        else:
            dims.append(int(digits))
    if len(dims) == 3 and dims[0] * dims[1] * dims[2] > MAX_COUNT:
        macs = dims[0] * dims[1] * dims[2]
        problems.append(
            Problem(
                name, where, f"the GEMM's MACs, M x N x K ({macs:.3g}), exceed the limit"
                f" of {MAX_COUNT_TEXT} ({MAX_COUNT:.3g})", f"{dims[0]} x {dims[1]} x {dims[2]}",
            )
        )  # fmt: skip
    text = (row["latency_us"] or "").strip()
    try:
        latency = float(text) if text.isascii() else math.nan
    except ValueError:
        latency = math.nan
    if not (math.isfinite(latency) and latency > 0):
        problems.append(
            Problem(name, f"{where}: latency_us", "not a positive number", row["latency_us"])
        )
    if (row["dtype"] or "").strip() != dtype:
        problems.append(
            Problem(name, f"{where}: dtype", f"the hardware computes in {dtype}", row["dtype"])
        )
    if len(problems) > found:
        return None
    return dims[0], dims[1], dims[2], latency


def mape(predicted: np.ndarray, measured: np.ndarray) -> float:
    """Mean absolute percentage error, in percent (nan for no GEMMs)."""
    if measured.size == 0:
        return math.nan
    return float(np.mean(np.abs(predicted - measured) / measured) * 100)
