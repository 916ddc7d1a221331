"""Partitioning layers into pipeline stages, and the paper-mode task bounds.

``partition`` balances contiguous stages; ``task_bounds`` gives the ideal
periods of the LayerPipe paper's task model, beside which the simulated
pipelines are reported: PipeDream's (the best contiguous partition of each
layer's whole forward, backward and update) and a free schedule of the separate
tasks (forward, input gradient, weight gradient and update of every layer on any
processor).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

TASKS = ("fwd", "dx", "dw", "update")


def partition(costs: Sequence[int], stages: int) -> list[int]:
    """Split layers into ``stages`` contiguous groups minimising the largest group's cost.

    Binary search on the bottleneck with a greedy feasibility check (optimal for
    contiguous partitions), then splitting groups until there are ``stages``
    (or one layer each).

    Returns:
        The stage of every layer, non-decreasing from 0.
    """

    def groups(limit: int) -> list[list[int]]:
        out: list[list[int]] = [[]]
        total = 0
        for i, c in enumerate(costs):
            if out[-1] and total + c > limit:
                out.append([])
                total = 0
            out[-1].append(i)
            total += c
        return out

    lo, hi = max(costs, default=0), sum(costs)
    while lo < hi:
        mid = (lo + hi) // 2
        if len(groups(mid)) <= stages:
            hi = mid
        else:
            lo = mid + 1
    parts = groups(lo)
    while len(parts) < min(stages, len(costs)):
        widest = max(
            range(len(parts)), key=lambda g: (len(parts[g]) > 1, sum(costs[i] for i in parts[g]))
        )
        part = parts[widest]
        half = len(part) // 2
        parts[widest : widest + 1] = [part[:half], part[half:]]
    return [s for s, part in enumerate(parts) for _ in part]


@dataclass(frozen=True)
class Plan:
    """A partition: the stages, the stage of every layer, and the layer costs it
    was balanced on."""

    stages: int
    stage_of: dict[str, int]
    costs: list[int]

    def first_of(self) -> dict[int, str]:
        """The first layer of every stage."""
        stage_of = self.stage_of
        return {s: next(n for n in stage_of if stage_of[n] == s) for s in range(self.stages)}


def task_bounds(tasks: Mapping[str, Mapping[str, int]], processors: int) -> dict[str, float]:
    """Ideal steady periods of one mini-batch on ``processors`` in the paper's task model.

    Args:
        tasks: Per layer, the cycles of its ``fwd``, ``dx``, ``dw`` and ``update``
            tasks (as measured in the single-processor baseline step).

    Returns:
        ``pipedream_cycles``: the largest stage of the best contiguous partition of
        whole layers; ``free_tasks_cycles``: the makespan of the longest-first list
        schedule of the separate tasks on ``processors`` (at least the mean load
        and the longest task); and ``gain``, their ratio: what a free task
        schedule gains over PipeDream's in this model.  Communication and memory
        are free, and a task costs the busy time of all its ops summed, so a
        simulation in which a processor's array and vector unit overlap can beat
        these periods: they are the paper's model, not bounds on the simulation.
    """
    layers = [sum(t.values()) for t in tasks.values()]
    stages = partition(layers, processors)
    stage_cost = [0] * (max(stages, default=0) + 1)
    for stage, cost in zip(stages, layers, strict=True):
        stage_cost[stage] += cost
    pipedream = float(max(stage_cost, default=0))
    loads = [0] * max(processors, 1)  # a heap of processor loads
    for cost in sorted((c for t in tasks.values() for c in t.values() if c), reverse=True):
        heapq.heapreplace(loads, loads[0] + cost)
    free = float(max(loads, default=0))
    return {
        "pipedream_cycles": pipedream,
        "free_tasks_cycles": free,
        "gain": pipedream / free if free else 1.0,
    }
