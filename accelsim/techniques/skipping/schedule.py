"""Convergence-aware gradient skipping's decisions: which groups skip in each epoch.

The convergence monitor keeps, per parameter group, an exponential moving average
of ``|dw| / |w|``; a group whose average falls below ``threshold`` stops
computing its weight gradient, and every ``recheck_iterations``-th step computes
every group again, re-checking it (Oh et al., DAC 2020 [S]: stochastic pruning of
converged groups, driven by a light-weight monitor; the rule below is ours [D]).

The simulator trains nothing, so the statistics are an input: per layer and
epoch, the mean of its groups' averages, from a trace of a real training run
(CSV ``layer,epoch,statistic``) or our synthetic curve [D]: ``floor + (1 - floor)
exp(-epoch / (decay_epochs (0.5 + d)))`` for a layer at depth ``d`` (0 for the
first grouped layer, 1 for the last: earlier layers converge first, a trend
recalled from the literature [M]), in units of its epoch-0 value.  A group's
average is its layer's times the group's own factor, drawn once from a
log-normal of spread ``group_spread`` [D] with the run's seed (``layer``
grouping: one group, factor 1).

Each epoch's step kinds are then the quantized skip set (every layer's share of
its groups below the threshold, rounded to ``levels`` steps), run in ``1 - 1 /
recheck_iterations`` of its steps, and the re-check step that computes and
monitors every group, run in the rest.  Epochs with the same quantized set share
their step kind, so a run simulates one step per distinct set.
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
            f" trains {epochs} epochs and every grouped layer needs each)",
            str(path),
        )
    return {layer: [values[layer, e] for e in range(epochs)] for layer in layers}


@dataclass(frozen=True)
class SkipSchedule:
    """Which groups skip in each epoch, and the step kinds that simulate it.

    Attributes:
        groups: Groups of each grouped layer.
        below: Per epoch and layer, the share of its groups whose average is below
            the threshold.
        kinds: Per step kind, each layer's skipped share (the re-check kind skips
            nothing).
        shares: Per epoch, the share of its steps of each kind.
    """

    groups: Mapping[str, int]
    below: tuple[Mapping[str, float], ...]
    kinds: Mapping[str, Mapping[str, float]]
    shares: tuple[Mapping[str, float], ...]


def schedule(
    statistics: Mapping[str, Sequence[float]],
    groups: Mapping[str, int],
    threshold: float,
    spread: float,
    recheck: int,
    levels: int,
    seed: int,
) -> SkipSchedule:
    """The skip schedule of layers with ``groups`` groups and these ``statistics``.

    A group skips while its layer's statistic times its factor is below
    ``threshold``; a layer's skipped share is rounded to a multiple of ``1 /
    levels``; ``1 / recheck`` of each epoch's steps re-check every group.
    """
    rng = np.random.default_rng(seed)
    factors = {
        layer: rng.lognormal(0.0, spread, n) if n > 1 else np.ones(1) for layer, n in groups.items()
    }
    epochs = len(next(iter(statistics.values()), ()))
    kinds: dict[str, dict[str, float]] = {RECHECK: dict.fromkeys(groups, 0.0)}
    by_set: dict[tuple[int, ...], str] = {}
    below: list[dict[str, float]] = []
    shares: list[dict[str, float]] = []
    for e in range(epochs):
        now = {
            layer: float(np.mean(statistics[layer][e] * factors[layer] < threshold))
            for layer in groups
        }
        below.append(now)
        quantized = tuple(math.floor(now[layer] * levels + 0.5) for layer in groups)
        if not any(quantized):
            shares.append({RECHECK: 1.0})
            continue
        kind = by_set.get(quantized)
        if kind is None:
            kind = by_set[quantized] = f"skip_{len(by_set) + 1}"
            kinds[kind] = {layer: q / levels for layer, q in zip(groups, quantized, strict=True)}
        shares.append({kind: 1 - 1 / recheck, RECHECK: 1 / recheck})
    return SkipSchedule(dict(groups), tuple(below), kinds, tuple(shares))
