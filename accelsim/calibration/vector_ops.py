"""Measured latencies of non-matrix ops, and what each op is to accelsim's vector unit.

The measurements ``accelsim calibrate`` reads for the vector unit are a directory of
CSV files, one per operation, named ``<op>_dataset.csv`` (SCALE-Sim's published
layout), each with columns ``d0, d1, d2`` (the op's largest tensor) and ``latency_us``
(the op launched alone, device time); other columns are ignored.

:data:`OPS` says what each operation moves and computes, from how SCALE-Sim's collector
builds it (``scalesim/model/calibration/collect_ops_tpu.py`` in
scalesim-project/SCALE-Sim: bf16 tensors, a shape ``(d0, d1, d2)`` of ``S``
elements): the elements it reads and writes, each with its word size, and the
operations per element accelsim's vector unit spends on it (our counts, in the units
of the layer rules: one per arithmetic step, an activation's own count for
exponential, tanh and the logistic).  Each operation belongs to one of
:data:`CLASSES`, by which accuracy is reported.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from accelsim.config.enums import VectorClass
from accelsim.config.files import display_path, read_text
from accelsim.errors import InputError, Problem

BF16, F32, PRED = 2, 4, 1
"""Word sizes in bytes: the measured tensors are bf16, ``convert`` writes f32 and
``select`` reads a one-byte predicate."""

ELEMENTWISE, TRANSCENDENTAL, REDUCE, MOVEMENT, NORM = VectorClass
CLASSES = tuple(VectorClass)
"""The op classes, each with its own fitted fixed cost, accuracy is reported by."""

FITTED_OPS = -1
"""Operations per element that the fit finds (``sine_cosine_ops``): sine and cosine
run well below the stream rate on both TPUs, on the lanes (range reduction and a
polynomial) rather than a transcendental unit, and accelsim's layers count no such op."""


@dataclass(frozen=True)
class VectorKind:
    """What one measured operation is to the vector unit: its class, the tensors it
    reads and writes (each as a share of the shape's elements, which dimension it
    keeps, and its word size), and its operations per element of the shape."""

    op_class: VectorClass
    reads: tuple[tuple[str, int], ...]
    writes: tuple[tuple[str, int], ...]
    ops_per_element: int


_BINARY = ((("all", BF16), ("all", BF16)), (("all", BF16),))
_UNARY = ((("all", BF16),), (("all", BF16),))

OPS: dict[str, VectorKind] = {
    "add": VectorKind(ELEMENTWISE, *_BINARY, 1),
    "subtract": VectorKind(ELEMENTWISE, *_BINARY, 1),
    "multiply": VectorKind(ELEMENTWISE, *_BINARY, 1),
    "divide": VectorKind(ELEMENTWISE, *_BINARY, 1),
    "maximum": VectorKind(ELEMENTWISE, *_BINARY, 1),
    "minimum": VectorKind(ELEMENTWISE, *_BINARY, 1),
    "compare": VectorKind(ELEMENTWISE, *_BINARY, 2),  # compare, convert to bf16
    "and": VectorKind(ELEMENTWISE, *_BINARY, 4),  # two compares, and, convert
    "select": VectorKind(
        ELEMENTWISE, (("all", PRED), ("all", BF16), ("all", BF16)), (("all", BF16),), 1
    ),
    "negate": VectorKind(ELEMENTWISE, *_UNARY, 1),
    "power": VectorKind(ELEMENTWISE, *_UNARY, 2),  # x * x * x
    "exponential": VectorKind(TRANSCENDENTAL, *_UNARY, 3),
    "logistic": VectorKind(TRANSCENDENTAL, *_UNARY, 4),  # the sigmoid activation's count
    "tanh": VectorKind(TRANSCENDENTAL, *_UNARY, 4),  # the tanh activation's count
    "rsqrt": VectorKind(TRANSCENDENTAL, *_UNARY, 3),
    "sine": VectorKind(TRANSCENDENTAL, *_UNARY, FITTED_OPS),
    "cosine": VectorKind(TRANSCENDENTAL, *_UNARY, FITTED_OPS),
    "reduce": VectorKind(REDUCE, (("all", BF16),), (("rows", BF16),), 1),  # sum over d2
    "transpose": VectorKind(MOVEMENT, *_UNARY, 1),  # (d0, d2, d1)
    "reshape": VectorKind(MOVEMENT, *_UNARY, 1),  # (d0, d1 * d2), a copy
    "convert": VectorKind(MOVEMENT, (("all", BF16),), (("all", F32),), 1),  # bf16 to f32
    "slice": VectorKind(MOVEMENT, (("half", BF16),), (("half", BF16),), 1),  # d2 // 2 kept
    "broadcast": VectorKind(MOVEMENT, (("planes", BF16),), (("all", BF16),), 1),  # (d0,1,d2)
    "concatenate": VectorKind(MOVEMENT, *_UNARY, 1),  # two halves of d2, one output
    # layer normalisation over d2 (the collector's mean, variance, normalise): read
    # once, as the layer rules' norms are; the layer rule's count for batch and layer norm
    "batch_norm_training": VectorKind(NORM, *_UNARY, 6),
}

SUFFIX = "_dataset.csv"
COLUMNS = ("d0", "d1", "d2", "latency_us")
MAX_DIM = 2**24
MAX_ROWS = 100_000
"""Most measured ops a directory holds (each is priced at every step of the fit)."""


def elements(share: str, d0: np.ndarray, d1: np.ndarray, d2: np.ndarray) -> np.ndarray:
    """Elements of a tensor that is ``share`` of the shape ``(d0, d1, d2)``: ``all``,
    ``rows`` (``d0 x d1``, a sum over ``d2``), ``half`` (``d2 // 2`` kept, at least 1)
    or ``planes`` (``d0 x d2``, broadcast along ``d1``)."""
    counts: np.ndarray
    if share == "all":
        counts = d0 * d1 * d2
    elif share == "rows":
        counts = d0 * d1
    elif share == "half":
        counts = d0 * d1 * np.maximum(d2 // 2, 1)
    else:
        assert share == "planes", share
        counts = d0 * d2
    return counts


@dataclass(frozen=True)
class VectorMeasurements:
    """Measured vector ops, one entry per row: the op (its name), the shape and the
    latency; ``source`` the directory as messages name it."""

    op: np.ndarray
    d0: np.ndarray
    d1: np.ndarray
    d2: np.ndarray
    latency_us: np.ndarray
    source: str = "measurements"

    def __len__(self) -> int:
        return int(self.op.shape[0])

    def subset(self, rows: np.ndarray) -> VectorMeasurements:
        """The measurements at ``rows`` (indices or a mask)."""
        return VectorMeasurements(
            self.op[rows], self.d0[rows], self.d1[rows], self.d2[rows], self.latency_us[rows],
            self.source,
        )  # fmt: skip

    @property
    def op_class(self) -> np.ndarray:
        """Each row's class, as its :class:`VectorClass` value."""
        return np.asarray([OPS[str(op)].op_class.value for op in self.op])

    def half(self, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """A random half of each op's rows (``seed``) and the rest, as sorted indices:
        every op is in both halves (an op of one row in the first)."""
        rng = np.random.default_rng(seed)
        first: list[np.ndarray] = []
        for name in sorted(set(self.op.tolist())):
            rows = rng.permutation(np.flatnonzero(self.op == name))
            first.append(rows[: -(-len(rows) // 2)])
        train = np.sort(np.concatenate(first))
        return train, np.setdiff1d(np.arange(len(self)), train)


def read_vector_measurements(directory: Path) -> VectorMeasurements:
    """The measurements of every ``<op>_dataset.csv`` in ``directory``.

    Raises:
        InputError: listing every problem: a file of an op :data:`OPS` does not know,
            a missing column, a dimension that is not a positive integer up to
            :data:`MAX_DIM`, a latency that is not a positive finite number, a line
            the CSV reader refuses; no such files, or more than :data:`MAX_ROWS` rows.
    """
    name = display_path(directory)
    files = sorted(directory.glob("*" + SUFFIX)) if directory.is_dir() else []
    if not files:
        raise InputError.single(name, "", f"no <op>{SUFFIX} files of measured vector ops")
    problems: list[Problem] = []
    rows: list[tuple[str, int, int, int, float]] = []
    for path in files:
        op = path.name.removesuffix(SUFFIX)
        if op not in OPS:
            problems.append(Problem(name, path.name, f"unknown op (known: {', '.join(OPS)})", op))
            continue
        rows.extend(_read_file(path, op, problems))
    if len(rows) > MAX_ROWS:
        problems.append(Problem(name, "", f"more than {MAX_ROWS:,} measured ops", len(rows)))
    if problems:
        raise InputError(problems)
    ops, d0, d1, d2, latency = zip(*rows, strict=True)
    ints = np.int64
    return VectorMeasurements(
        np.asarray(ops), np.asarray(d0, ints), np.asarray(d1, ints), np.asarray(d2, ints),
        np.asarray(latency, float), name,
    )  # fmt: skip


def _read_file(
    path: Path, op: str, problems: list[Problem]
) -> list[tuple[str, int, int, int, float]]:
    """The rows of one op's file; its problems added to ``problems``."""
    name = display_path(path)
    reader = csv.DictReader(io.StringIO(read_text(path, InputError, name).removeprefix("\ufeff")))
    rows = []
    try:
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            problems.append(Problem(name, "", f"missing columns {', '.join(missing)}"))
            return []
        for row in reader:
            where = f"line {reader.line_num}"
            found = len(problems)
            dims = [_dimension(row[c], name, f"{where}: {c}", problems) for c in COLUMNS[:3]]
            latency = _latency(row["latency_us"])
            if latency is None:
                problems.append(
                    Problem(
                        name, f"{where}: latency_us", "not a positive number", row["latency_us"]
                    )
                )
            if len(problems) == found and latency is not None:
                rows.append((op, dims[0], dims[1], dims[2], latency))
    except csv.Error as exc:
        problems.append(Problem(name, f"line {reader.line_num + 1}", f"not CSV: {exc}"))
    return rows


def _dimension(text: str | None, name: str, where: str, problems: list[Problem]) -> int:
    """A dimension of ``1..MAX_DIM`` (0 after adding a problem)."""
    value = (text or "").strip()
    if value.isascii() and value.isdigit() and 0 < int(value) <= MAX_DIM:
        return int(value)
    problems.append(Problem(name, where, f"not an integer in 1..{MAX_DIM}", value))
    return 0


def _latency(text: str | None) -> float | None:
    """A positive finite latency, else None."""
    value = (text or "").strip()
    try:
        latency = float(value) if value.isascii() else math.nan
    except ValueError:
        return None
    return latency if math.isfinite(latency) and latency > 0 else None
