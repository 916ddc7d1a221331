"""Training plans: what a technique's effect is over a whole training run.

A technique whose effect changes over training (ADA-GP's share of GP steps,
convergence-aware skipping's share of skipped groups) turns a per-epoch signal
into per-epoch shares of step kinds, and the whole-training totals follow from
what one step of each kind costs.  The signal comes from a trace (a CSV of a real
training run) or a documented synthetic curve; the simulator trains nothing.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from accelsim.config.files import read_text
from accelsim.errors import ConfigError
from accelsim.techniques.base import StepCost

METRICS = ("cycles", "energy_pj", "dram_bytes", "bound_cycles")


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


def whole_training(
    costs: Mapping[str, StepCost],
    shares: Sequence[Mapping[str, float]],
    batches_per_epoch: int,
    baseline: str = "base",
) -> dict[str, dict[str, float]]:
    """Whole-training totals per metric: the baseline's and the technique's.

    ``bound_cycles`` sums each step's lower bound on its cycles, so the baseline's
    total cycles over the technique's ``bound_cycles`` is the most the technique
    can speed training up by.

    Args:
        costs: What one step of each kind costs, the baseline's included.
        shares: Per epoch, the share of each step kind (summing to 1).
        batches_per_epoch: Steps per epoch.
    """
    epochs = len(shares)
    totals = {}
    for metric in METRICS:
        per_step = {kind: getattr(cost, metric) for kind, cost in costs.items()}
        technique = batches_per_epoch * sum(
            sum(share * per_step[kind] for kind, share in epoch.items()) for epoch in shares
        )
        totals[metric] = {
            "baseline": epochs * batches_per_epoch * per_step[baseline],
            "technique": technique,
        }
    return totals
