"""Training plans: what a technique's effect is over a whole training run.

A technique whose effect changes over training (ADA-GP's share of GP steps,
convergence-aware skipping's share of skipped groups) turns a per-epoch signal
into per-epoch shares of step kinds (``KindDefiner.kind_shares``), and the
whole-training totals follow from what one step of each kind costs
(:class:`~accelsim.report.training.TrainingPlan`).  The signal comes from a trace (a CSV of a real
training run) or a documented synthetic curve; the simulator trains nothing.

Techniques read their CSV side files (these traces, approximate dropout's
sensitivity scores) through :func:`read_csv`: a file the run cannot read is
blamed on the key that names it, a bad row on the file itself, as
``file: line N: column: problem (got value)``.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from accelsim.config.files import display_path, read_text
from accelsim.config.run import MAX_EPOCHS
from accelsim.errors import ConfigError, Problem
from accelsim.resources import data_dir

T = TypeVar("T")

Row = tuple[int, dict[str, str]]
"""A CSV row: its line in the file (the header is line 1) and its cells by column."""


CONV_KINDS = frozenset({"conv2d", "conv_transpose2d"})
"""Layer kinds that take the bundled CNN's measured signals."""


def bundled_trace(kinds: Sequence[str], what: str) -> tuple[str, Path]:
    """The bundled measured trace (``what``: ``weights`` or ``predictor``) of the small
    model that stands for a run with layers of these kinds: the digits CNN's when
    any is a convolution, else the digits MLP's (``scripts/training_signals.py``).

    Returns:
        The model's name and the trace's path.
    """
    model = "digits_cnn" if any(k in CONV_KINDS for k in kinds) else "digits_mlp"
    return model, data_dir() / "traces" / f"{model}.{what}.csv"


def trace_epochs(epochs: int, measured: int) -> list[int]:
    """The measured epoch each of a run's ``epochs`` takes, ``floor(e T / E)`` of ``T``,
    so that a signal keeps its place in training."""
    return [e * measured // epochs for e in range(epochs)]


def measured_errors(kinds: Sequence[str], epochs: int) -> tuple[str, list[float]]:
    """The bundled predictor-error trace's mean over layers per epoch, at a run's
    ``epochs`` (:func:`trace_epochs`), for a run with layers of these ``kinds``."""
    model, path = bundled_trace(kinds, "predictor")
    _, rows = read_csv(path, ("epoch", "predictor_error"), str(path), "trace")
    sums: dict[int, list[float]] = {}
    for _, row in rows:
        sums.setdefault(int(row["epoch"]), []).append(float(row["predictor_error"]))
    means = [sum(sums[e]) / len(sums[e]) for e in range(len(sums))]
    return model, [means[t] for t in trace_epochs(epochs, len(means))]


def synthetic_decay(floor: float, decay_epochs: float, epochs: int) -> list[float]:
    """``floor + (1 - floor) * exp(-epoch / decay_epochs)`` for each epoch."""
    return [floor + (1 - floor) * math.exp(-e / decay_epochs) for e in range(epochs)]


def read_csv(path: Path, columns: Sequence[str], source: str, where: str) -> tuple[str, list[Row]]:
    """The rows of a technique's CSV side file whose header names ``columns``.

    Returns:
        The file as messages name it, and its rows with their line numbers.

    Raises:
        ConfigError: at ``where`` in ``source`` (the key that names the file) when
            the file cannot be read; in the file when it is not CSV or its header
            lacks a column.
    """
    text = read_text(path, ConfigError, source, where)
    name = display_path(path)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        header = reader.fieldnames or []
        missing = [c for c in columns if c not in header]
        if missing:
            raise ConfigError.single(
                name,
                "line 1",
                "expected a header line naming the columns " + ", ".join(columns),
                ",".join(header),
            )
        rows = [(reader.line_num, row) for row in reader]
    except csv.Error as exc:
        raise ConfigError.single(name, f"line {reader.line_num}", f"malformed CSV: {exc}") from None
    return name, rows


def cell(
    name: str,
    line: int,
    row: dict[str, str],
    column: str,
    convert: Callable[[str], T],
    valid: Callable[[T], bool],
    expected: str,
    problems: list[Problem],
) -> T | None:
    """Cell ``column`` of a row converted, or ``None`` with a problem added when it
    cannot be converted or is not ``valid`` (``expected`` says what is)."""
    text = (row.get(column) or "").strip()
    try:
        value = convert(text)
    except ValueError:
        value = None
    if value is None or not valid(value):
        problems.append(Problem(name, f"line {line}", f"{column}: expected {expected}", text))
        return None
    return value


def read_trace(path: Path, column: str, epochs: int, source: str, where: str) -> list[float]:
    """Mean of ``column`` per epoch from a CSV with ``epoch`` and, optionally, ``batch``.

    Every row is checked: ``epoch`` a whole number below the training limit
    (:data:`~accelsim.config.run.MAX_EPOCHS`), ``batch`` (if present) a whole number
    >= 0, each (epoch, batch) once, and ``column`` (a norm or a ratio) a finite
    number >= 0.  Epochs past the run's ``epochs`` are read and not used.

    Raises:
        ConfigError: at ``where`` in ``source`` if the file is missing or lacks an
            epoch the run trains; every bad row in the file, at its line.
    """
    name, rows = read_csv(path, ("epoch", column), source, where)
    problems: list[Problem] = []
    sums: dict[int, list[float]] = {}
    seen: dict[tuple[int, int], int] = {}
    whole = f"a whole number from 0 to {MAX_EPOCHS - 1:,}"
    for line, row in rows:
        epoch = cell(name, line, row, "epoch", int, lambda e: 0 <= e < MAX_EPOCHS, whole, problems)
        if "batch" in row:
            batch = cell(
                name, line, row, "batch", int, lambda b: b >= 0, "a whole number >= 0", problems
            )
            if epoch is not None and batch is not None:
                first = seen.setdefault((epoch, batch), line)
                if first != line:
                    problems.append(
                        Problem(
                            name,
                            f"line {line}",
                            f"a second row for epoch {epoch}, batch {batch}"
                            f" (the first is line {first})",
                            row.get(column),
                        )
                    )
        value = cell(
            name,
            line,
            row,
            column,
            float,
            lambda v: math.isfinite(v) and v >= 0,
            "a finite number >= 0",
            problems,
        )
        if epoch is not None and value is not None:
            sums.setdefault(epoch, []).append(value)
    if problems:
        raise ConfigError(problems)
    missing = [e for e in range(epochs) if e not in sums]
    if missing:
        raise ConfigError.single(
            source,
            where,
            f"no values for epoch {missing[0]} (epochs are"
            f" counted from 0; the run trains {epochs})",
            str(path),
        )
    return [sum(sums[e]) / len(sums[e]) for e in range(epochs)]
