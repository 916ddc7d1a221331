"""The pinned-task model's optimum (techniques/pipelines/optimum.py): the branch and
bound against exhaustive search, by hand, with a floor and past its size limit."""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from collections.abc import Sequence

import pytest

from accelsim.techniques.pipelines.optimum import MAX_TASKS, lower_bound, task_optimum


def exhaustive(costs: Sequence[tuple[int, ...]], processors: int) -> int:
    """The least period over all ``P^n`` assignments."""
    best = math.inf
    for where in itertools.product(range(processors), repeat=len(costs)):
        loads = [[0] * len(costs[0]) for _ in range(processors)]
        for cost, p in zip(costs, where, strict=True):
            loads[p] = [x + c for x, c in zip(loads[p], cost, strict=True)]
        best = min(best, max(max(row) for row in loads))
    return int(best)


@pytest.mark.parametrize("seed", range(12))
def test_branch_and_bound_equals_exhaustive_search(seed: int) -> None:
    """Random tasks on two resources (some on one only, some alike), 2 to 4
    processors: the exact optimum of every assignment, an assignment achieving it,
    and a lower bound no higher."""
    rng = random.Random(seed)
    processors = rng.choice([2, 3, 4])
    n = 8 if processors < 4 else 7
    costs = [
        (rng.choice([0, 30, 30, 45, 70, 100]), rng.choice([0, 0, 10, 25, 60])) for _ in range(n)
    ]
    found = task_optimum(costs, processors)
    assert found.exact
    assert found.period_cycles == found.lower_bound_cycles == exhaustive(costs, processors)
    loads: Counter[tuple[int, int]] = Counter()
    for (a, v), p in zip(costs, found.where, strict=True):
        loads[(p, 0)] += a
        loads[(p, 1)] += v
    assert max(loads.values()) == found.period_cycles
    assert lower_bound(costs, processors) <= found.period_cycles


def test_optimum_by_hand_floor_and_size_limit() -> None:
    """The five-layer toy's tasks in small numbers: nine forward and dX tasks of 5 and
    five dW tasks of 4 on 7 or 8 processors put two 5s together: 10.  With the dX
    rows split, five 5s, five 4s and eight halves of 3 on 8 processors: the mean
    load is 69 / 8 > 8, and 9 is reached (5 + 4 five times, 3 + 3 + 3 twice and
    3 + 3).  A floor above every load is the period.  Past ``MAX_TASKS`` tasks the
    greedy assignment stands beside the lower bound (here the mean load)."""
    whole = [(5,)] * 9 + [(4,)] * 5
    assert task_optimum(whole, 7).period_cycles == task_optimum(whole, 8).period_cycles == 10
    split = [(5,)] * 5 + [(4,)] * 5 + [(3,)] * 8
    assert task_optimum(split, 8).period_cycles == 9
    costs = whole
    floored = task_optimum(costs, 8, floor=50)
    assert (floored.period_cycles, floored.lower_bound_cycles, floored.exact) == (50, 50, True)
    many = [(3,)] * (MAX_TASKS + 1) + [(2,)]
    found = task_optimum(many, 4)
    assert found.lower_bound_cycles == math.ceil((3 * (MAX_TASKS + 1) + 2) / 4)
    assert found.period_cycles >= found.lower_bound_cycles
