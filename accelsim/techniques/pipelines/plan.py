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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from accelsim.timing.memory import Memory

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
    """A partition: the stages, the stage of every layer, the layer costs it was
    balanced on, and how many processors run each stage (``replicas``; empty: one
    each).  A replicated stage's replicas take turns: mini-batch ``j`` runs on its
    replica ``j mod r``."""

    stages: int
    stage_of: dict[str, int]
    costs: list[int]
    replicas: tuple[int, ...] = ()

    def first_of(self) -> dict[int, str]:
        """The first layer of every stage."""
        stage_of = self.stage_of
        return {s: next(n for n in stage_of if stage_of[n] == s) for s in range(self.stages)}

    def copies(self, stage: int) -> int:
        """Processors running ``stage``."""
        return self.replicas[stage] if self.replicas else 1

    def processor(self, stage: int, j: int) -> int:
        """The processor running mini-batch ``j`` of ``stage``."""
        return sum(self.copies(s) for s in range(stage)) + j % self.copies(stage)

    def stage_of_processor(self) -> list[int]:
        """The stage every processor runs."""
        return [s for s in range(self.stages) for _ in range(self.copies(s))]


def ring_allreduce_cycles(
    size_bytes: np.ndarray, copies: int, link: Memory, dram: Memory
) -> np.ndarray:
    """Cycles of a ring all-reduce of ``size_bytes`` (element-wise) among ``copies``
    processors, as the engine runs one: ``2 (copies - 1)`` link steps of
    ``1 / copies`` of the bytes, each with the link's latency, and each processor's
    read of the tensor from DRAM and its write back (at the read and the write
    bandwidth), each with the DRAM's latency."""
    steps = 2 * (copies - 1)
    hops = steps * (link.bound(np.ceil(size_bytes / copies)) + link.latency_cycles)
    passes = dram.bound(size_bytes) + dram.bound(size_bytes, write=True)
    total: np.ndarray = hops + passes + 2 * dram.latency_cycles
    return total


def replicated_partition(
    costs: Sequence[int],
    weight_bytes: Sequence[int],
    processors: int,
    allreduce_cycles: Callable[[np.ndarray, int], np.ndarray],
) -> tuple[list[int], list[int]]:
    """PipeDream's partitioner: contiguous stages, each on one or more processors.

    A stage of layers ``i..j`` on ``r`` processors costs ``(C_j - C_i) / r`` plus
    the all-reduce of its weights' gradients among the ``r``
    (``allreduce_cycles(bytes, r)``, element-wise on an array of sizes);
    dynamic programming over layers and processors minimises the costliest
    stage, using at most ``processors``.

    Returns:
        The stage of every layer (non-decreasing from 0) and each stage's replicas.
    """
    n = len(costs)
    prefix = np.concatenate([[0.0], np.cumsum(np.asarray(costs, dtype=float))])
    weights = np.concatenate([[0.0], np.cumsum(np.asarray(weight_bytes, dtype=float))])
    inf = float("inf")
    # best[j, m]: the least bottleneck of layers 0..j-1 on exactly m processors.
    best = np.full((n + 1, processors + 1), inf)
    choice = np.zeros((n + 1, processors + 1, 2), dtype=int)
    best[0, 0] = 0.0
    starts = np.arange(n)
    for j in range(1, n + 1):
        before = starts[:j]
        work = prefix[j] - prefix[before]
        size = weights[j] - weights[before]
        for m in range(1, processors + 1):
            for r in range(1, m + 1):
                stage = work / r + (allreduce_cycles(size, r) if r > 1 else 0.0)
                cand = np.maximum(best[before, m - r], stage)
                k = int(np.argmin(cand))
                if cand[k] < best[j, m]:
                    best[j, m] = cand[k]
                    choice[j, m] = (k, r)
    m = int(np.argmin(best[n, 1:])) + 1
    bounds: list[tuple[int, int, int]] = []
    j = n
    while j > 0:
        first, copies = int(choice[j, m, 0]), int(choice[j, m, 1])
        bounds.append((first, j, copies))
        j, m = first, m - copies
    bounds.reverse()
    stage_of = [s for s, (lo, hi, _) in enumerate(bounds) for _ in range(lo, hi)]
    return stage_of, [r for _, _, r in bounds]


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
