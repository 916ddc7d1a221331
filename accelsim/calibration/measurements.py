"""Measured GEMM latencies: the CSV ``accelsim calibrate`` reads, and size classes.

Columns ``M, N, K, dtype, latency_us`` (SCALE-Sim's GEMM convention,
``C[M x N] = A[M x K] . B[K x N]``), one GEMM launched alone per row.  A GEMM's
size is SCALE-Sim's compute cycles on one 128x128 array,
``(3 * 128 + M - 2) * ceil(N / 128) * ceil(K / 128) - 1``: the column the
published measurements carry, by which accuracy is reported per class.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from accelsim.config.files import display_path, read_text
from accelsim.errors import InputError, Problem

COLUMNS = ("M", "N", "K", "dtype", "latency_us")
SIZE_CLASSES = (
    ("< 1e4", 0.0, 1e4),
    ("1e4-1e5", 1e4, 1e5),
    ("1e5-1e6", 1e5, 1e6),
    ("> 1e6", 1e6, math.inf),
)
"""Size classes (label, lowest size, size it stays below), in SCALE-Sim cycles."""
MAX_DIM = 2**24
"""Largest GEMM dimension accepted (a lone GEMM past it overflows a step's counts)."""
MAX_GEMMS = 10_000
"""Most measured GEMMs (rows) a file holds: each distinct one is costed once, and the
fit prices them all at every step of its search."""


@dataclass(frozen=True)
class Measurements:
    """Measured GEMMs, one entry per row of the file (int64, latency float)."""

    m: np.ndarray
    n: np.ndarray
    k: np.ndarray
    latency_us: np.ndarray

    def __len__(self) -> int:
        return int(self.m.shape[0])

    def subset(self, rows: np.ndarray) -> Measurements:
        """The measurements at ``rows`` (indices or a mask)."""
        return Measurements(self.m[rows], self.n[rows], self.k[rows], self.latency_us[rows])

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
            not a positive integer up to :data:`MAX_DIM`, a latency that is not a
            positive finite number, another dtype), an empty file, or one of more
            than :data:`MAX_GEMMS` rows.
    """
    name = display_path(path)
    text = read_text(path, InputError, name)
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise InputError.single(
            name, "", f"missing columns {', '.join(missing)}", reader.fieldnames
        )
    problems: list[Problem] = []
    rows: list[tuple[int, int, int, float]] = []
    for line, row in enumerate(reader, start=2):
        where = f"line {line}"
        dims = []
        for col in ("M", "N", "K"):
            value = (row[col] or "").strip()
            if not value.isdigit() or not 0 < int(value) <= MAX_DIM:
                problems.append(
                    Problem(name, f"{where}: {col}", f"not an integer in 1..{MAX_DIM}", value)
                )
            else:
                dims.append(int(value))
        try:
            latency = float(row["latency_us"] or "")
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
        if len(dims) == 3 and math.isfinite(latency) and latency > 0:
            rows.append((dims[0], dims[1], dims[2], latency))
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
        np.asarray(m, ints), np.asarray(n, ints), np.asarray(k, ints), np.asarray(lat, float)
    )


def mape(predicted: np.ndarray, measured: np.ndarray) -> float:
    """Mean absolute percentage error, in percent (nan for no GEMMs)."""
    if measured.size == 0:
        return math.nan
    return float(np.mean(np.abs(predicted - measured) / measured) * 100)
