"""Training plans: what a technique's effect is over a whole training run.

A technique whose effect changes over training (ADA-GP's share of GP steps,
convergence-aware skipping's share of skipped groups) turns a per-epoch signal
into per-epoch shares of step kinds (``Technique.kind_shares``), and the
whole-training totals follow from what one step of each kind costs
(:class:`~accelsim.report.training.TrainingPlan`).  The signal comes from a trace (a CSV of a real
training run) or a documented synthetic curve; the simulator trains nothing.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from accelsim.config.files import read_text
from accelsim.errors import ConfigError


def synthetic_decay(floor: float, decay_epochs: float, epochs: int) -> list[float]:
    """``floor + (1 - floor) * exp(-epoch / decay_epochs)`` for each epoch."""
    return [floor + (1 - floor) * math.exp(-e / decay_epochs) for e in range(epochs)]


def read_trace(path: Path, column: str, epochs: int, source: str, where: str) -> list[float]:
    """Mean of ``column`` per epoch from a CSV with an ``epoch`` column.

    Raises:
        ConfigError: at ``where`` in ``source`` if the file is missing,
            malformed or lacks an epoch.
    """
    text = read_text(path, ConfigError, source, where)
    try:
        rows = list(csv.DictReader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise ConfigError.single(source, where, f"malformed CSV: {exc}", str(path)) from None
    sums: dict[int, list[float]] = {}
    for line, row in enumerate(rows, start=2):
        try:
            epoch, value = int(row["epoch"]), float(row[column])
        except (KeyError, TypeError, ValueError):
            value = math.nan
        if not math.isfinite(value):
            raise ConfigError.single(
                source,
                where,
                f"line {line}: expected columns epoch, batch, {column} with finite numbers",
                str(path),
            )
        sums.setdefault(epoch, []).append(value)
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
