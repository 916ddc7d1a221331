"""A simulated step's totals over its processors, from a trace whose ops may each
stand for several processors' (:attr:`~accelsim.timing.trace.Trace.replicas`: a
data-parallel step placed once, processor 0's ops standing for every processor's).

Counts are exact integers, each op counted as often as it stands for.  A float total
(energy) is the correctly rounded sum of the per-processor totals (:func:`math.fsum`),
each processor's total NumPy's sum of its ops' values in op order: a step of one
processor keeps NumPy's sum, and a step placed once adds to exactly what the step of
every replica adds to, since its processors' totals are the same numbers.
"""

from __future__ import annotations

import math
from itertools import pairwise
from typing import TYPE_CHECKING

import numpy as np

from accelsim.counts import exact_group_totals, exact_total

if TYPE_CHECKING:
    from accelsim.timing.trace import Trace


def op_weights(trace: Trace) -> np.ndarray:
    """How many processors' ops each op stands for (``int64``)."""
    return np.where(trace.stand_ins(), trace.replicas, 1).astype(np.int64)


def weighted_total(trace: Trace, values: np.ndarray, mask: np.ndarray | None = None) -> int:
    """The exact sum of an integer per-op ``values`` (those ``mask`` selects), each
    counted as often as its op stands for."""
    if trace.replicas == 1:
        return exact_total(values if mask is None else values[mask])
    kept = np.ones(len(values), dtype=bool) if mask is None else mask
    stand = trace.stand_ins()
    alone = exact_total(values[kept & ~stand])
    return alone + trace.replicas * exact_total(values[kept & stand]) if stand.any() else alone


def weighted_group_totals(
    trace: Trace, group: np.ndarray, values: np.ndarray, groups: int
) -> list[int]:
    """Per group ``0 .. groups - 1``, :func:`weighted_total` of its ops' ``values``."""
    if trace.replicas == 1:
        return exact_group_totals(group, values, groups)
    stand = trace.stand_ins()
    alone = exact_group_totals(group[~stand], values[~stand], groups)
    if not stand.any():
        return alone
    each = exact_group_totals(group[stand], values[stand], groups)
    return [a + trace.replicas * e for a, e in zip(alone, each, strict=True)]


def weighted_count(trace: Trace, mask: np.ndarray | None = None) -> int:
    """How many ops of the whole step ``mask`` selects (all without one)."""
    return weighted_total(trace, np.ones(len(trace.processor), np.int64), mask)


def processor_sum(trace: Trace, values: np.ndarray, mask: np.ndarray | None = None) -> float:
    """The step's total of a float per-op ``values`` (those ``mask`` selects): the
    correctly rounded sum of each processor's total."""
    if trace.processors == 1:
        return float((values if mask is None else values[mask]).sum())
    if trace.replicas > 1:
        kept = np.ones(len(values), dtype=bool) if mask is None else mask
        first = float(values[kept & (trace.processor == 0)].sum())
        rest = [float(values[kept & trace.stand_ins()].sum())] * (trace.replicas - 1)
        return math.fsum([first, *rest])
    order, ends = trace.by_processor
    ordered = values[order]
    keep = None if mask is None else mask[order]
    parts = []
    for a, b in pairwise(ends):
        mine = ordered[a:b] if keep is None else ordered[a:b][keep[a:b]]
        parts.append(float(mine.sum()))
    return math.fsum(parts)


def processor_group_sums(
    trace: Trace, group: np.ndarray, values: np.ndarray, groups: int
) -> list[float]:
    """Per group ``0 .. groups - 1``, the correctly rounded sum of each processor's
    total of its ops' float ``values``, each added in op order."""
    if trace.replicas > 1:
        first = np.zeros(groups)
        np.add.at(first, group, values)
        stand = trace.stand_ins()
        each = np.zeros(groups)
        np.add.at(each, group[stand], values[stand])
        rest = trace.replicas - 1
        return [
            math.fsum([f, *[e] * rest]) for f, e in zip(first.tolist(), each.tolist(), strict=True)
        ]
    sums = np.zeros((groups, trace.processors))
    np.add.at(sums, (group, trace.processor), values)
    return [math.fsum(row) for row in sums.tolist()]
