"""The free task placements LayerPipe simulates, and the pinned-task model's optimum.

Each candidate is a processor for every task of one micro-batch's step graph
(whole dX GEMMs, or their rows split in two tasks):

- ``free``: the list scheduler (:func:`task_placement.assign`) within ``reach``
  stages of each task's layer (the moved rows of a split dX on the previous
  stage's processor), or every task on its layer's stage, whichever is rated
  better;
- ``free_anywhere``: the same with the tasks placed on any processor;
- ``task_optimum`` and ``task_optimum_split_dx``: the best assignment found in the
  pinned-task model (:mod:`accelsim.techniques.pipelines.optimum`) of the tasks
  with whole dX GEMMs and with their rows split: no reach and no link term.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from accelsim.config.dram import DramSharing
from accelsim.graph import passes
from accelsim.graph.ops import OpGraph, Phase
from accelsim.mapping import placement
from accelsim.report.result import RunResult
from accelsim.techniques.base import TechniqueContext
from accelsim.techniques.pipelines.optimum import Optimum, task_optimum
from accelsim.techniques.pipelines.plan import Plan
from accelsim.techniques.pipelines.task_placement import (
    MOVED_DX,
    TaskCosts,
    TaskKey,
    assign,
    dram_cycles,
    loads,
    measure_tasks,
)
from accelsim.timing.memory import Memory, traffic_bound

FREE = "free"
ANYWHERE = "free_anywhere"
OPTIMA = ("task_optimum", "task_optimum_split_dx")


@dataclass(frozen=True)
class TaskSet:
    """The step graph of one micro-batch (dX GEMMs whole or split) and its tasks' costs."""

    step: OpGraph
    costs: TaskCosts

    def model(
        self, memories: Sequence[Memory], shared: bool
    ) -> tuple[list[TaskKey], list[tuple[int, ...]], int]:
        """The pinned-task model of these tasks: the tasks, what each costs (its array
        and other units' cycles and, with a DRAM channel per processor, its bytes'
        time on it) and the floor of every period (a ``shared`` memory's time for
        all the bytes; else 0)."""
        c = self.costs
        tasks = sorted(set(c.array_cycles) | set(c.vector_cycles))
        moved, written = c.dram_bytes, c.dram_write_bytes
        cycles = [
            (
                c.array_cycles.get(t, 0),
                c.vector_cycles.get(t, 0),
                *(
                    ()
                    if shared
                    else (
                        math.ceil(traffic_bound(memories[0], moved.get(t, 0), written.get(t, 0))),
                    )
                ),
            )
            for t in tasks
        ]
        floor = dram_cycles(c, dict.fromkeys(tasks, 0), memories) if shared else 0.0
        return tasks, cycles, math.ceil(floor)


@dataclass(frozen=True)
class TaskLayout:
    """LayerPipe's free placement: the step graph of one micro-batch, every task's
    processor, every trained layer's weight delay in mini-batches (``S(l) + 1``), the
    busiest unit's load of every processor per mini-batch, and the period it is
    rated at (the larger of the busiest load and the DRAM time)."""

    step: OpGraph
    where: Mapping[TaskKey, int]
    delays: Mapping[str, int]
    loads: list[int]
    rating_cycles: float


def task_sets(
    ctx: TechniqueContext, whole: OpGraph, split_share: float, costed: RunResult | None = None
) -> list[TaskSet]:
    """The step with whole dX GEMMs and, for a share above 0, with their rows split
    (``split_share`` of them in the first part), each costed on one processor
    (``costed``: the whole step already simulated there)."""
    steps = [whole]
    if split_share > 0:
        steps.append(
            passes.split_gemms(
                whole, lambda op: (split_share, 0) if op.phase is Phase.BWD_INPUT else None
            )
        )
    out = []
    for one in steps:
        if costed is None or one is not whole:
            costed = ctx.simulate(placement.single(one, ctx.run.optimizer, ctx.hardware.word_bytes))
        out.append(TaskSet(one, measure_tasks(costed)))
    return out


def model_optima(
    ctx: TechniqueContext, sets: Sequence[TaskSet], processors: int
) -> tuple[Optimum, list[TaskLayout]]:
    """The pinned-task model's optimum over the task sets (the least of their optima,
    exact when no set's lower bound is below it, else beside the least bound), and
    each set's best assignment found."""
    shared = ctx.hardware.dram.sharing is DramSharing.SHARED
    optima: list[Optimum] = []
    layouts: list[TaskLayout] = []
    for one in sets:
        tasks, cycles, floor = one.model(ctx.machine.dram, shared)
        index = {t: i for i, t in enumerate(tasks)}
        exchanged = {
            (index[a], index[b]): size
            for (a, b), size in one.costs.traffic_bytes.items()
            if a in index and b in index
        }
        found = task_optimum(cycles, processors, floor, exchanged)
        optima.append(found)
        where = dict(zip(tasks, found.where, strict=True))
        layouts.append(_rated(one, where, processors, ctx.machine.dram))
    best = min(optima, key=lambda o: o.period_cycles)
    period, bound = best.period_cycles, min(o.lower_bound_cycles for o in optima)
    exact = bound >= period
    return Optimum(period, period if exact else bound, exact, best.where), layouts


def list_layout(
    ctx: TechniqueContext,
    plan: Plan,
    sets: Sequence[TaskSet],
    processors: int,
    reach: int | None,
    grouped: Callable[[OpGraph], list[set[TaskKey]]] | None,
) -> TaskLayout:
    """The list scheduler's placement within ``reach`` stages (or every task on its
    layer's stage), on the task set rated best: each is rated by the larger of its
    busiest processor's busiest unit and its DRAM time, and the first within 1 % of
    the best kept (the busiest unit's load ignores what the array and the vector unit
    cannot overlap, so a split that saves less is not worth its second pipeline fill;
    and each half of a split dX GEMM reads the whole weights).  ``grouped`` gives the
    tasks that run together (``dx_split: activation``)."""
    memories = ctx.machine.dram
    shared = ctx.hardware.dram.sharing is DramSharing.SHARED

    def near(task: TaskKey) -> list[int]:
        """Where a task may run: the moved rows of a split dX on the previous
        stage's processor; the rest within ``reach`` of the layer's stage, or on a
        processor that has no stage (more processors than layers)."""
        home = plan.stage_of.get(task[0], 0)
        if task[1] == MOVED_DX:
            return [max(home - 1, 0)]
        if reach is None:
            return list(range(processors))
        window = range(max(home - reach, 0), min(home + reach + 1, plan.stages))
        return [*window, *range(plan.stages, processors)]

    rated: list[TaskLayout] = []
    for one in sets:
        groups = grouped(one.step) if grouped is not None else []
        free = assign(
            one.costs,
            processors,
            ctx.machine.link,
            groups,
            None if shared else memories,
            near,
        )
        staged = {
            task: near(task)[0] if task[1] == MOVED_DX else plan.stage_of.get(task[0], 0)
            for task in free
        }
        for where in (free, staged):
            rated.append(_rated(one, where, processors, memories))
    least = min(r.rating_cycles for r in rated)
    return next(layout for layout in rated if layout.rating_cycles <= 1.01 * least)


def _rated(
    one: TaskSet, where: Mapping[TaskKey, int], processors: int, memories: Sequence[Memory]
) -> TaskLayout:
    """A placement, rated by its busiest processor's busiest unit or its DRAM time."""
    load = loads(one.costs, where, processors)
    dram = dram_cycles(one.costs, where, memories)
    return TaskLayout(one.step, dict(where), {}, load, max(*load, dram))
