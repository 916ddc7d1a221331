"""Convergence-aware gradient skipping's decisions: which groups skip in each epoch.

The convergence monitor keeps, per parameter group, the statistic ``|dw| / |w|``;
a trained group whose statistic is below ``threshold`` stops computing its weight
gradient.  The monitor is closed-loop: a skipped group's statistic is not
observed (it has no update) until the group is re-checked, and each skipped group
is re-checked on each step with probability ``1 / recheck_iterations``, drawn per
group with the run's seed; a re-check computes the group's gradient that step,
and a group whose statistic is at or above the threshold again trains again (Oh
et al., DAC 2020 [S]: stochastic pruning of converged groups, driven by a
light-weight monitor; the rule is ours [D]).

The simulator trains nothing, so the statistics are an input, per group and
epoch, constant within an epoch: the bundled measured traces
(:mod:`accelsim.techniques.skipping.signals`), a per-layer trace of a real
training run (CSV ``layer,epoch,statistic``) or our synthetic curve [D]:
``floor + (1 - floor) exp(-epoch / (decay_epochs (0.5 + d)))`` for a layer at
depth ``d`` (0 for the first grouped layer, 1 for the last: earlier layers
converge first, a trend recalled from the literature [M]), in units of its
epoch-0 value.  With a per-layer statistic, a group's is its layer's times the
group's own factor, drawn once from a log-normal of spread ``group_spread`` [D]
with the run's seed (``layer`` grouping: one group, factor 1).

Within an epoch of ``B`` steps, with ``q = 1 / recheck_iterations``, a group
below the threshold trains on its first step if it entered the epoch trained and
on its re-checks (a binomial draw over the rest); a group at or above it trains
every step if it entered trained, else from its first re-check on (a geometric
draw; later than ``B``: not this epoch).  Each layer's skipped share ``s_l`` of
its group-steps then makes the epoch's steps: ``w = max_l s_l`` of them skip
``s_l / w`` of each layer's groups (rounded to ``levels`` steps), the rest skip
nothing.  Epochs with the same rounded set share their step kind, so a run
simulates one step per distinct set.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from accelsim.config.run import MAX_EPOCHS
from accelsim.errors import ConfigError, Problem
from accelsim.techniques.plan import cell, read_csv
from accelsim.units import plural

RECHECK = "recheck"
"""The step kind that computes and monitors every group."""


def synthetic_statistics(
    layers: Sequence[str], floor: float, decay_epochs: float, epochs: int
) -> dict[str, list[float]]:
    """Our synthetic monitored statistic of each layer per epoch: faster decay for
    earlier layers (``decay_epochs (0.5 + depth)``, depth from 0 to 1)."""
    last = max(len(layers) - 1, 1)
    out = {}
    for i, layer in enumerate(layers):
        tau = decay_epochs * (0.5 + i / last)
        out[layer] = [floor + (1 - floor) * math.exp(-e / tau) for e in range(epochs)]
    return out


def read_statistics(
    path: Path, layers: Sequence[str], epochs: int, source: str, where: str
) -> dict[str, list[float]]:
    """Each layer's statistic per epoch from a CSV ``layer,epoch,statistic``.

    Every row is checked (a layer of the run's grouped layers, an epoch from 0 to the
    limit, each pair once, a finite statistic >= 0); every layer needs every epoch
    the run trains.

    Raises:
        ConfigError: at ``where`` in ``source`` for a file that cannot be read or
            lacks an epoch of a layer; every bad row in the file, at its line.
    """
    name, rows = read_csv(path, ("layer", "epoch", "statistic"), source, where)
    known = set(layers)
    problems: list[Problem] = []
    values: dict[tuple[str, int], float] = {}
    first: dict[tuple[str, int], int] = {}
    whole = f"a whole number from 0 to {MAX_EPOCHS - 1:,}"
    for line, row in rows:
        layer = (row.get("layer") or "").strip()
        if layer not in known:
            problems.append(
                Problem(name, f"line {line}", "layer: expected a layer with grouped weights", layer)
            )
            continue
        epoch = cell(name, line, row, "epoch", int, lambda e: 0 <= e < MAX_EPOCHS, whole, problems)
        value = cell(
            name,
            line,
            row,
            "statistic",
            float,
            lambda v: math.isfinite(v) and v >= 0,
            "a finite number >= 0",
            problems,
        )
        if epoch is None or value is None:
            continue
        earlier = first.setdefault((layer, epoch), line)
        if earlier != line:
            problems.append(
                Problem(
                    name,
                    f"line {line}",
                    f"a second row for {layer}, epoch {epoch} (the first is line {earlier})",
                    value,
                )
            )
            continue
        values[layer, epoch] = value
    if problems:
        raise ConfigError(problems)
    missing = [(layer, e) for layer in layers for e in range(epochs) if (layer, e) not in values]
    if missing:
        layer, epoch = missing[0]
        raise ConfigError.single(
            source,
            where,
            f"no statistic for {layer} at epoch {epoch} ({len(missing)} missing; the run"
            f" trains {epochs} {plural(epochs, 'epoch')} and every grouped layer needs each)",
            str(path),
        )
    return {layer: [values[layer, e] for e in range(epochs)] for layer in layers}


@dataclass(frozen=True)
class SkipSchedule:
    """Which groups skip in each epoch, and the step kinds that simulate it.

    Attributes:
        groups: Groups of each grouped layer.
        below: Per epoch and layer, the share of its groups whose statistic is below
            the threshold.
        skipped: Per epoch and layer, the share of its group-steps the monitor skips
            (re-checks and groups that train again counted).
        kinds: Per step kind, each layer's skipped share (the re-check kind skips
            nothing).
        shares: Per epoch, the share of its steps of each kind.
    """

    groups: Mapping[str, int]
    below: tuple[Mapping[str, float], ...]
    skipped: tuple[Mapping[str, float], ...]
    kinds: Mapping[str, Mapping[str, float]]
    shares: tuple[Mapping[str, float], ...]


def group_statistics(
    statistics: Mapping[str, Sequence[float]],
    groups: Mapping[str, int],
    spread: float,
    rng: np.random.Generator,
) -> dict[str, np.ndarray]:
    """Per layer, a ``(groups, epochs)`` array: its statistic times each group's
    log-normal factor (``spread`` the sigma of its logarithm; one group: factor 1)."""
    out = {}
    for layer, n in groups.items():
        factors = rng.lognormal(0.0, spread, n) if n > 1 else np.ones(1)
        out[layer] = np.outer(factors, np.asarray(statistics[layer], dtype=float))
    return out


def monitor(
    statistics: np.ndarray, threshold: float, recheck: int, steps: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """The closed-loop monitor over one layer's ``(groups, epochs)`` statistics.

    Returns:
        Per epoch, the share of the layer's groups below the threshold and the share
        of its group-steps skipped, for epochs of ``steps`` steps.
    """
    n, epochs = statistics.shape
    q = 1.0 / recheck
    trained = np.ones(n, dtype=bool)
    below = np.empty(epochs)
    skipped = np.empty(epochs)
    for e in range(epochs):
        low = statistics[:, e] < threshold
        rechecks = rng.binomial(steps - trained, q)
        first = rng.geometric(q, n)
        back = ~low & ~trained & (first <= steps)
        computed = np.where(low, trained + rechecks, np.where(trained, steps, 0))
        computed = np.where(back, steps - first + 1, computed)
        below[e] = low.mean()
        skipped[e] = 1.0 - computed.sum() / (n * steps)
        trained = ~low & (trained | back)
    return below, skipped


def schedule(
    statistics: Mapping[str, np.ndarray],
    threshold: float,
    recheck: int,
    levels: int,
    steps: int,
    rng: np.random.Generator,
) -> SkipSchedule:
    """The skip schedule of layers with these per-group ``statistics`` (each a
    ``(groups, epochs)`` array) and epochs of ``steps`` steps."""
    groups = {layer: stats.shape[0] for layer, stats in statistics.items()}
    epochs = next(iter(statistics.values())).shape[1] if statistics else 0
    decided = {
        layer: monitor(stats, threshold, recheck, steps, rng) for layer, stats in statistics.items()
    }
    kinds: dict[str, dict[str, float]] = {RECHECK: dict.fromkeys(groups, 0.0)}
    by_set: dict[tuple[int, ...], str] = {}
    shares: list[dict[str, float]] = []
    for e in range(epochs):
        now = {layer: float(decided[layer][1][e]) for layer in groups}
        most = max(now.values(), default=0.0)
        quantized = tuple(
            math.floor(now[layer] / most * levels + 0.5) if most > 0 else 0 for layer in groups
        )
        if not any(quantized):
            shares.append({RECHECK: 1.0})
            continue
        kind = by_set.get(quantized)
        if kind is None:
            kind = by_set[quantized] = f"skip_{len(by_set) + 1}"
            kinds[kind] = {layer: q / levels for layer, q in zip(groups, quantized, strict=True)}
        shares.append({kind: most, RECHECK: 1 - most} if most < 1 else {kind: 1.0})
    return SkipSchedule(
        groups,
        tuple({layer: float(decided[layer][0][e]) for layer in groups} for e in range(epochs)),
        tuple({layer: float(decided[layer][1][e]) for layer in groups} for e in range(epochs)),
        kinds,
        tuple(shares),
    )
