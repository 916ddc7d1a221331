"""The plan search that simulates only the plans that may win: each fitting plan's
proven least step (:mod:`accelsim.planner.bound`), the plans simulated in rounds
through the sweep store, and a plan skipped once a simulated plan is proven to beat
it.

A plan ``P`` is pruned when some simulated plan ``Q`` has ``step(Q) < bound(P)``
and ``memory(Q) <= memory(P)``: then ``step(Q) < step(P)``, so ``P`` is neither the
fastest nor on the Pareto front of step time against memory per chip (``Q``
dominates it; on equal steps nothing is pruned, so every plan tying the fastest, or
a point of the front, is simulated and the search's order still settles ties).  A
simulated plan that a pruned one would dominate is dominated by that one's ``Q``
too, so the fastest and the front are exactly those of every fitting plan simulated.

The plans are simulated in rounds, each plan of every later round checked against
all the plans simulated so far.  The first round probes each rank-graph group
(:func:`~accelsim.planner.search.rank_graph_of`): its plan of the least bound (the
bound leaves most communication out, so it cannot tell which groups are fast; one
plan of each can).  Every later round takes whole groups, the group of the fastest plan
simulated first, each group's plans by bound, until it holds a group a worker and
:data:`ROUND_PLANS` plans a worker (a worker keeps a group's rank graph for its
plans).  Each round is a sweep of its plans into the search's store
(:func:`~accelsim.sweep.run.run_sweep`), the points of the whole search's sweep, so a
killed search resumes (the plans stored are read first) and ``--exhaustive`` shares
its store.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelsim.driver.inputs import InputCache, RunInputs
from accelsim.driver.run import rewritten_step
from accelsim.mapping.pipeline_stages import cut_stages
from accelsim.planner.bound import (
    Bound,
    Chains,
    Work,
    array_macs,
    pass_macs,
    plan_bound,
)
from accelsim.planner.grouped import ByRankGraph
from accelsim.planner.result import Evaluated, Fitting, evaluated
from accelsim.planner.search import Request, model_inputs, rank_graph_of
from accelsim.sweep.executors import Executor
from accelsim.sweep.plan import SweepPlan
from accelsim.sweep.points import KeepPoints
from accelsim.sweep.run import run_sweep
from accelsim.sweep.schema import STORE_NAME
from accelsim.timing.machine import machine_of

ROUND_PLANS = 8
"""The fewest plans a round gives each worker (fewer: more rounds, more pruning,
more waiting for a round's last plan)."""


def bounds_of(
    cache: InputCache,
    base: Path,
    sets: dict[str, Any],
    inputs: RunInputs,
    fitting: Sequence[Fitting],
    request: Request,
) -> list[Bound]:
    """Each fitting plan's proven least step (``inputs``: the run without a plan): one
    step of the global batch lowered on one processor a recomputation policy, and its
    tensor-parallel chains on the run's network."""
    works: dict[str, Work] = {}
    cuts = functools.partial(cut_stages, inputs.infos)  # each cut made once a process
    chains = Chains(inputs.infos, machine_of(inputs.hardware))
    peak = inputs.hardware.array.peak_macs_per_cycle
    out = []
    for plan in fitting:
        candidate = plan.candidate
        policy = candidate.overrides()["techniques"]
        if candidate.recompute not in works:
            one = model_inputs(cache, base, sets | {"techniques": policy})
            graph = rewritten_step(one, request.global_batch)
            works[candidate.recompute] = Work(
                request.global_batch, array_macs(graph), pass_macs(graph)
            )
        work = works[candidate.recompute]
        out.append(plan_bound(candidate, work, cuts, request.chips, peak, chains))
    return out


def search_order(bounds: Sequence[Bound], groups: Sequence[tuple[str, ...]]) -> list[int]:
    """The plans' indices in the order they are simulated: their rank-graph groups by
    the groups' least bound, each group's plans by bound (ties: the sweep's order)."""
    least: dict[tuple[str, ...], tuple[int, int]] = {}
    for i, (bound, group) in enumerate(zip(bounds, groups, strict=True)):
        least[group] = min(least.get(group, (bound.cycles, i)), (bound.cycles, i))
    return sorted(range(len(bounds)), key=lambda i: (least[groups[i]], bounds[i].cycles, i))


class Beaten:
    """The simulated plans by memory per chip, each with the least step of those of no
    more memory: whether a bound is beaten (:meth:`beats`)."""

    def __init__(self, plans: Sequence[Evaluated]) -> None:
        pairs = sorted((e.memory_bytes, e.step_cycles) for e in plans)
        self.memory = [m for m, _ in pairs]
        self.least: list[int] = []
        for _, step in pairs:
            self.least.append(min(step, self.least[-1]) if self.least else step)

    def beats(self, bound: Bound, memory_bytes: int) -> bool:
        """Whether a simulated plan of at most ``memory_bytes`` per chip has a step
        shorter than ``bound``."""
        n = bisect.bisect_right(self.memory, memory_bytes)
        return n > 0 and self.least[n - 1] < bound.cycles


@dataclass(frozen=True)
class Pruned:
    """What a pruned search did: the plans already stored when it began, the plans
    it simulated and failed, and the indices of those it pruned."""

    already_stored: int
    ran: int
    failed: int
    pruned: tuple[int, ...]


def simulate_pruned(
    request: Request,
    plan: SweepPlan,
    executor: Executor,
    fitting: Sequence[Fitting],
    bounds: Sequence[Bound],
    most: int | None = None,
) -> Pruned:
    """Simulate, in rounds (the module's), the plans no simulated plan is proven to
    beat; those stored already count as simulated (a killed search resumes).  With
    ``most``, stop after the round that brings the plans simulated to ``most``."""
    groups = [rank_graph_of(f.candidate) for f in fitting]
    order = search_order(bounds, groups)
    index_of = {id(f.candidate): i for i, f in enumerate(fitting)}
    stored = (
        evaluated(request.store, plan, fitting) if (request.store / STORE_NAME).exists() else []
    )
    known = {index_of[id(e.candidate)]: e for e in stored}
    already = len(known)
    tried = set(known)
    grouped = ByRankGraph(executor, groups)
    ran = failed = 0
    pruned: list[int] = []
    while True:
        beaten = Beaten(list(known.values()))
        left = []
        for i in order:
            if i in tried:
                continue
            if beaten.beats(bounds[i], fitting[i].memory.total_bytes):
                pruned.append(i)
                tried.add(i)
            else:
                left.append(i)
        if not left or (most is not None and len(known) >= most):
            break
        batch = next_round(left, groups, known, executor.workers)
        tried.update(batch)
        sub = dataclasses.replace(plan, points=tuple(plan.points[i] for i in batch))
        report = run_sweep(sub, request.store.parent, grouped, keep_points=KeepPoints.ALL)
        ran += report.ran
        failed += report.failed
        for e in evaluated(request.store, sub, [fitting[i] for i in batch]):
            known[index_of[id(e.candidate)]] = e
    return Pruned(already, ran, failed, tuple(sorted(pruned)))


def next_round(
    left: Sequence[int],
    groups: Sequence[tuple[str, ...]],
    known: Mapping[int, Evaluated],
    workers: int,
) -> list[int]:
    """The next round's plans of ``left`` (in the search's order): the first plan of
    each group no plan of which is simulated yet, if any; else whole groups, the group
    of the fastest plan simulated first, until the round holds a group and
    :data:`ROUND_PLANS` plans a worker."""
    by_group: dict[tuple[str, ...], list[int]] = {}
    for i in left:
        by_group.setdefault(groups[i], []).append(i)
    fastest: dict[tuple[str, ...], int] = {}
    for i, e in known.items():
        fastest[groups[i]] = min(fastest.get(groups[i], e.step_cycles), e.step_cycles)
    probes = [members[0] for group, members in by_group.items() if group not in fastest]
    if probes:
        return probes
    batch: list[int] = []
    for n, group in enumerate(sorted(by_group, key=lambda g: fastest[g])):
        if n >= workers and len(batch) >= ROUND_PLANS * workers:
            break
        batch.extend(by_group[group])
    return batch
