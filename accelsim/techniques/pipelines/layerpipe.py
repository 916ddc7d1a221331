"""LayerPipe (Unnikrishnan and Parhi, ICCAD 2021; LayerPipe2, arXiv 2512.08160).

``placement: tasks`` places every layer's forward, input gradient (or its two
row halves, the first on the previous stage's processor), weight gradient and
update as separate tasks on the processors within ``reach`` stages of the
layer's own (:mod:`accelsim.techniques.pipelines.task_placement`), with per-layer weight
delays of at most ``P`` mini-batches.  ``placement: stages`` keeps PipeDream's
contiguous partition and 1F1B order, defers each layer's dW behind the
activation-gradient chain and splits the dX work of each stage's first layer
with the previous stage; it simulates its options, PipeDream's own order among
them.  ``placement: best`` (the default) tries both, and the free tasks also
anywhere and as the pinned-task model's best assignments
(:mod:`accelsim.techniques.pipelines.free_layouts`), and keeps the fastest; the
report sets the model's optimum beside it.
Weights are delayed by ``2 S(l)`` half-steps: ``S(l)`` stashed versions per
layer, or one extra buffer with LayerPipe2's moving-average reconstruction
(``weights: ema``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from accelsim.errors import SimulationError
from accelsim.graph import passes, queries
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.copies import Relabel
from accelsim.graph.ops import GemmOp, Op, OpGraph, Parameter, Phase, Tag
from accelsim.lowering.optimizer import add_updates
from accelsim.mapping.placement import StepGraph
from accelsim.report.result import RunResult
from accelsim.report.training import Source
from accelsim.techniques.base import LoadContext, TechniqueContext
from accelsim.techniques.pipelines.config import (
    MAX_MINI_BATCHES,
    DxSplit,
    LayerPipeConfig,
    TaskPlacement,
    WeightVersions,
)
from accelsim.techniques.pipelines.free_layouts import (
    ANYWHERE,
    FREE,
    OPTIMA,
    TaskLayout,
    TaskSet,
    list_layout,
    model_optima,
    task_sets,
)
from accelsim.techniques.pipelines.graph import (
    SplitShares,
    accumulate_gradients,
    copy_step,
    stage_sinks,
)
from accelsim.techniques.pipelines.memory import ProcessorMemory, processor_memory
from accelsim.techniques.pipelines.plan import Plan
from accelsim.techniques.pipelines.report import ModelOptimum, Placed, optimum_report
from accelsim.techniques.pipelines.schedule import Schedule
from accelsim.techniques.pipelines.task_placement import TaskKey, activation_groups, task_of
from accelsim.techniques.provenance import Origin


@dataclass(frozen=True)
class Candidate:
    """One placement LayerPipe tried: which (``tasks`` or ``stages``), its name, its
    steady period and whether its DRAM footprint fits (None for a free placement not
    simulated), and a free placement's rated period (its busiest processor's load or
    DRAM time)."""

    placement: TaskPlacement
    name: str
    period: float | None
    fits: bool | None
    rated: float | None = None


class LayerPipe(Schedule[LayerPipeConfig]):
    """LayerPipe: dW off the critical path, dX split across consecutive stages."""

    name = "layerpipe"
    one_task_backward = False

    def __init__(self, config: LayerPipeConfig, source: str) -> None:
        super().__init__(config, source)
        self._layouts: dict[int, tuple[object, TaskLayout]] = {}
        self._chosen: dict[int, tuple[object, Candidate, list[Candidate], ModelOptimum | None]] = {}

    def shares(self, plan: Plan, single: RunResult) -> dict[str, tuple[float, int]]:
        """The share of each stage's first layer's dX rows done by the previous stage
        (from the dX GEMMs' times in ``single``, the step the plan was balanced on)."""
        stage_cost = [0] * plan.stages
        for name, cost in zip(plan.stage_of, plan.costs, strict=True):
            stage_cost[plan.stage_of[name]] += cost
        dx_cycles: dict[str, int] = {}
        for op in single.graph.ops:
            if op.phase is Phase.BWD_INPUT and isinstance(op, GemmOp):
                span = int(single.trace.end_cycle[op.op_id] - single.trace.start_cycle[op.op_id])
                dx_cycles[op.layer] = dx_cycles.get(op.layer, 0) + span
        shares: dict[str, tuple[float, int]] = {}
        for stage, name in plan.first_of().items():
            if stage == 0 or not dx_cycles.get(name):
                continue
            if self.config.split == "balance":
                gap = stage_cost[stage] - stage_cost[stage - 1]
                share = min(1.0, max(0.0, gap / (2 * dx_cycles[name])))
            else:
                share = float(self.config.split)
            if share > 0:
                shares[name] = (share, stage - 1)
        return shares

    def place(self, ctx: TechniqueContext, step: StepGraph, base: RunResult) -> OpGraph:
        """LayerPipe's placement: the fastest of the free task placements and the stage
        options (``placement`` may keep to one kind), each simulated.

        The free placements are the list scheduler's within ``reach`` stages, its
        placement on any processor and the pinned-task model's optimum
        (:mod:`accelsim.techniques.pipelines.free_layouts`; with ``placement:
        tasks`` only those ``reach`` allows).  The stage options, on PipeDream's
        partition, are the inter-layer split with dW deferred, dW deferred alone,
        the plain 1F1B order, and PipeDream's own (1F1B, each stage's input gradient
        sent when its backward is done), so with them LayerPipe is never slower than
        PipeDream on the same partition.  On one processor every option is the
        baseline step.  Ties go to the earlier option, the free placements first.
        """
        single, own = self.single_step(ctx, step, base)
        plan = self.plan(ctx, single)
        placement = self.config.placement
        processors = self.processors(ctx)
        staged: list[tuple[Candidate, OpGraph | None]] = []
        if placement is not TaskPlacement.TASKS or processors == 1:
            staged += self.stage_candidates(ctx, step, plan, single)
        free: list[tuple[Candidate, OpGraph | None]] = []
        optimum: ModelOptimum | None = None
        if processors > 1:
            whole = step(ctx.run.batch_size // self.config.micro_batches)
            # The step on one processor is the whole step's unless micro-batches split it.
            costed = single if self.config.micro_batches == 1 else None
            sets = task_sets(ctx, whole, self.share(), costed)
            best_model, optimal = model_optima(ctx, sets, processors)
            optimum = ModelOptimum(best_model, base.total_cycles)
            if placement is not TaskPlacement.STAGES:
                free = self.free_candidates(ctx, plan, sets, optimal, staged)
        tried = [(c, g) for c, g in [*free, *staged] if g is not None]
        # A placement whose stashes fit in DRAM beats any that does not.
        best, graph = min(tried, key=lambda t: (not t[0].fits, t[0].period))
        candidates = [c for c, _ in [*free, *staged]]
        self._chosen[id(graph.ops)] = (graph.ops, best, candidates, optimum)
        return self.remember(ctx, graph, Placed(plan, single, own))

    def free_candidates(
        self,
        ctx: TechniqueContext,
        plan: Plan,
        sets: list[TaskSet],
        optimal: list[TaskLayout],
        staged: list[tuple[Candidate, OpGraph | None]],
    ) -> list[tuple[Candidate, OpGraph | None]]:
        """The free placements, each simulated unless its rated period (its busiest
        processor's load or DRAM time, which bound its period from below) exceeds
        the shortest period of a placement that fits simulated before it."""
        shortest = min((c.period or math.inf for c, _ in staged if c.fits), default=math.inf)
        free: list[tuple[Candidate, OpGraph | None]] = []
        for name, alone in self.free_layouts(ctx, plan, sets, optimal):
            rated = alone.rating_cycles
            if rated > shortest:
                free.append((Candidate(TaskPlacement.TASKS, name, None, None, rated), None))
                continue
            graph, period = self.place_tasks(ctx, plan, self.timed(ctx, alone))
            fits = self.fits(ctx, plan, graph)
            free.append((Candidate(TaskPlacement.TASKS, name, period, fits, rated), graph))
            if fits:
                shortest = min(shortest, period)
        return free

    def share(self) -> float:
        """The share of each dX GEMM's rows in the first part of the free placement's
        split (0: no split)."""
        if self.config.dx_split is not DxSplit.ROWS:
            return 0.0
        return 0.5 if self.config.split == "balance" else float(self.config.split)

    def free_layouts(
        self, ctx: TechniqueContext, plan: Plan, sets: list[TaskSet], optimal: list[TaskLayout]
    ) -> list[tuple[str, TaskLayout]]:
        """The free placements to try, by name; a placement equal to an earlier one is
        tried once."""
        processors = self.processors(ctx)
        reach = self.config.reach
        grouped = activation_groups if self.config.dx_split is DxSplit.ACTIVATION else None
        layouts = [(FREE, list_layout(ctx, plan, sets, processors, reach, grouped))]
        if self.config.placement is TaskPlacement.BEST and reach is not None:
            layouts.append((ANYWHERE, list_layout(ctx, plan, sets, processors, None, grouped)))
        if self.config.placement is TaskPlacement.BEST or reach is None:
            layouts += zip(OPTIMA, optimal, strict=False)
        distinct: list[tuple[str, TaskLayout]] = []
        for name, layout in layouts:
            if not any(
                kept.step is layout.step and kept.where == layout.where for _, kept in distinct
            ):
                distinct.append((name, layout))
        return distinct

    def stage_candidates(
        self, ctx: TechniqueContext, step: StepGraph, plan: Plan, single: RunResult
    ) -> list[tuple[Candidate, OpGraph | None]]:
        """The stage options on ``plan``, each simulated, with their graphs."""
        shares = self.shares(plan, single)
        options: list[tuple[str, SplitShares | None, bool, bool]] = [
            ("defer_dw", None, True, False),
            ("one_f_one_b", None, False, False),
            ("pipedream", None, False, True),
        ]
        if shares:
            options.insert(0, ("split_dx_defer_dw", shares, True, False))
        tried: list[tuple[Candidate, OpGraph | None]] = []
        for name, split, defer, send_after in options:
            graph, period = self.measure(
                ctx,
                functools.partial(self.build, ctx, step, plan, split, defer, send_after),
                self.mini_batches(plan.stages),
            )
            fits = self.fits(ctx, plan, graph)
            tried.append((Candidate(TaskPlacement.STAGES, name, period, fits), graph))
        return tried

    def place_tasks(
        self, ctx: TechniqueContext, plan: Plan, alone: TaskLayout
    ) -> tuple[OpGraph, float]:
        """A free task placement, with the weight delays it needs, and its period.

        Each layer's delay is its one-mini-batch latency in periods plus a margin
        for a full pipeline's queueing: ``delay_margin``, or with ``auto`` the
        first of 0, 1, 2, 4, ..., 32 at which the steady period is within 0.5 %
        of its bounds (the busiest processor's load, DRAM, links), or the best
        before the period stops improving by 0.5 %.  (A larger margin keeps more
        weight versions.)  No delay exceeds ``P`` mini-batches, PipeDream's
        deepest (its first stage's), so no weight is staler than PipeDream's.
        Unless ``mini_batches`` is set, a layout is measured
        over ``max(3 P + 2, 2 D + 2)`` mini-batches for its deepest delay ``D``.
        """
        processors = self.processors(ctx)
        margin = self.config.delay_margin
        margins = [0, 1, 2, 4, 8, 16, 32] if margin == "auto" else [margin]
        best: tuple[float, OpGraph, TaskLayout] | None = None
        tried: list[dict[str, int]] = []
        for extra in margins:
            # At most P mini-batches in flight: no staler than PipeDream's first stage.
            delays = {layer: min(d + extra, processors) for layer, d in alone.delays.items()}
            if delays in tried:
                break
            tried.append(delays)
            layout = dataclasses.replace(alone, delays=delays)
            # Enough mini-batches to fill a pipeline this deep twice over.
            count = self.config.mini_batches or min(
                max(3 * processors + 2, 2 * max(delays.values(), default=1) + 2),
                MAX_MINI_BATCHES,
            )
            graph, period = self.measure(
                ctx, functools.partial(self.build_tasks, ctx, layout), count
            )
            self._layouts[id(graph.ops)] = (graph.ops, layout)
            # A larger margin keeps more versions: never one whose stashes do not fit.
            if best is not None and (period > 0.995 * best[0] or not self.fits(ctx, plan, graph)):
                break
            best = (period, graph, layout)
            bound = max(max(alone.loads), *ctx.simulate(graph).cycle_bounds(count).values())
            if period <= 1.005 * bound:
                break
        assert best is not None
        return best[1], best[0]

    def processors(self, ctx: TechniqueContext) -> int:
        """Processors the free task placement uses (not capped at the layer count)."""
        return self.config.stages or ctx.hardware.processors

    def defaults(self) -> dict[str, Origin]:
        return {
            **super().defaults(),
            "placement": (
                Source.OURS,
                "our choice: the fastest of the free placements (within reach, anywhere, the"
                " task model's) and the stage options",
            ),
            "dx_split": (Source.RECALLED, "the dX split across consecutive stages, recalled"),
            "split": (Source.OURS, "our choice: move what evens out the two stages"),
            "weights": (
                Source.PAPER,
                "S(l) stashed versions for the delay of 2 S(l) half-steps (LayerPipe2)",
            ),
            "delay_margin": (Source.OURS, "our choice: the least margin near the bound"),
            "reach": (
                Source.OURS,
                "our choice: the list scheduler within one stage of a task's layer (best also"
                " tries it anywhere)",
            ),
        }

    def depth(self, load: LoadContext) -> tuple[int, int]:
        """The free task placement spans every processor ``P`` (not capped at the layer
        count): ``2 P + 1`` mini-batches fill it (its delays are at most ``P``, and
        ``2 P + 2`` of them still fit in the limit); the stage options as a
        schedule's."""
        if self.config.placement is TaskPlacement.STAGES:
            return super().depth(load)
        processors = self.config.stages or load.hardware.processors
        return processors, 2 * processors + 1

    def timed(self, ctx: TechniqueContext, alone: TaskLayout) -> TaskLayout:
        """A placement with every layer's weight delay.

        The delay of layer ``l`` here is the number of periods (at least one) its
        mini-batch spends between the start of its forward and the end of its
        update (or, without weights, of its backward: how long it keeps its
        activations) when one mini-batch runs alone on the placement, with the
        period estimated by the placement's rating; :meth:`place_tasks` adds the
        margin a full pipeline's queueing needs.
        """
        busiest = max(alone.rating_cycles, 1)
        run = ctx.simulate(self.build_tasks(ctx, alone, 1))
        trace = run.trace
        began: dict[str, int] = {}
        ended: dict[str, int] = {}
        for op in run.graph.ops:
            if queries.forward_work(op):
                start = int(trace.start_cycle[op.op_id])
                began[op.layer] = min(began.get(op.layer, start), start)
            else:
                ended[op.layer] = max(ended.get(op.layer, 0), int(trace.end_cycle[op.op_id]))
        delays = {
            layer: max(1, math.ceil((end - began.get(layer, 0)) / busiest))
            for layer, end in ended.items()
        }
        return dataclasses.replace(alone, delays=delays)

    def build_tasks(self, ctx: TechniqueContext, layout: TaskLayout, mini_batches: int) -> OpGraph:
        """The graph of ``mini_batches`` mini-batches with every task on its own processor.

        A layer's update waits for its gradient, for its dX (which reads the old
        weights) and for the whole backward pass of the mini-batch on the update's
        processor; the forward of mini-batch ``j`` waits for the update of
        mini-batch ``j - (S(l) + 1)`` (the layout's delays).  Each unit runs the
        oldest mini-batch's ready work first, in program order.
        """
        one, where = layout.step, layout.where

        def on(op: Op) -> int:
            return where[task_of(op)]

        builder = GraphBuilder(ctx.hardware.word_bytes)
        relabel = Relabel(one.ops, one.parameters)  # one copier for every copy
        priority: list[int] = []
        updates: dict[tuple[int, str], list[int]] = {}
        first: list[Parameter] = []
        for j in range(mini_batches):
            start = len(builder.ops)
            copies = [
                copy_step(builder, one, Tag(mini_batch=j, micro_batch=i), on, copies=relabel)
                for i in range(self.config.micro_batches)
            ]
            first = first or copies[0]
            dw_on = {p.layer: where.get((p.layer, "dw"), 0) for p in copies[0]}
            ready = accumulate_gradients(builder, copies, dw_on, Tag(mini_batch=j), self.name)
            backward_done = stage_sinks(builder, start)
            reads_weights: dict[str, list[int]] = {}
            for i in range(start, len(builder.ops)):
                op = builder.ops[i]
                if op.phase is Phase.BWD_INPUT and isinstance(op, GemmOp):
                    reads_weights.setdefault(op.layer, []).append(i)
            for p, param in enumerate(copies[0]):
                home = on_update(where, param)
                after = [*backward_done.get(home, ()), *reads_weights.get(param.layer, ())]
                for op_id in add_updates(
                    builder,
                    [param],
                    ctx.run.optimizer,
                    after=after,
                    gradient_ready={param.weight.name: ready[p]},
                    tag=Tag(mini_batch=j),
                ):
                    builder.processor[op_id] = home
                    updates.setdefault((j, param.layer), []).append(op_id)
            for op_id in range(start, len(builder.ops)):
                op = builder.ops[op_id]
                earlier = j - layout.delays.get(op.layer, 1)
                if queries.forward_work(op) and earlier >= 0:
                    builder.add_dependencies(op_id, updates.get((earlier, op.layer), ()))
                priority.append(j)
        return passes.insert_transfers(builder.build(first, priority=priority))

    def weight_versions(self, stage: int, plan: Plan) -> int:
        return self.kept(plan.stages - 1 - stage)  # S(l); delay 2 S(l) half-steps

    def kept(self, downstream: int) -> int:
        """Extra weight copies of a layer ``S(l) = downstream`` stages from the end:
        ``S(l)`` stashed versions, or one buffer for the moving average."""
        if self.config.weights is WeightVersions.EMA:
            return min(1, downstream)
        return downstream

    def _layout(self, graph: OpGraph) -> TaskLayout | None:
        # By the ops: the simulated graph may be a copy with more tensors kept on chip.
        found = self._layouts.get(id(graph.ops))
        return found[1] if found is not None and found[0] is graph.ops else None

    def memory(self, ctx: TechniqueContext, plan: Plan, graph: OpGraph) -> list[ProcessorMemory]:
        """What each processor keeps in DRAM; in the free placement, where a layer's
        tasks may run on different processors, each stash on the processors that
        hold it (:func:`~accelsim.techniques.pipelines.memory.processor_memory`)."""
        return processor_memory(
            graph,
            self.layer_delays(plan, graph),
            ctx.run.optimizer,
            ctx.hardware,
            held_by_readers=self._layout(graph) is not None,
        )

    def layer_delays(self, plan: Plan, graph: OpGraph) -> dict[str, tuple[int, int]]:
        layout = self._layout(graph)
        if layout is None:
            return super().layer_delays(plan, graph)
        return {
            layer: (layout.delays.get(layer, 1), self.kept(layout.delays.get(layer, 1) - 1))
            for layer in plan.stage_of
        }

    def placement_report(self, run: RunResult) -> dict[str, Any]:
        """The winning placement (``placement``, ``candidate``), every option tried with
        its steady period (``candidates``), the pinned-task model's optimum beside it
        (``task_optimum``, with more than one processor), and the free placement's
        tasks when it won."""
        found = self._chosen.get(id(run.graph.ops))
        if found is None or found[0] is not run.graph.ops:
            raise SimulationError(f"{self.name}: no placement recorded for this simulated graph")
        chosen: dict[str, Any] = {
            "placement": found[1].placement.value,
            "candidate": found[1].name,
            "candidates": [
                {
                    "placement": c.placement.value,
                    "candidate": c.name,
                    "steady_cycles_per_minibatch": c.period,
                    "fits": c.fits,
                    **({} if c.rated is None else {"rated_cycles_per_minibatch": c.rated}),
                }
                for c in found[2]
            ],
        }
        period = found[1].period  # the chosen placement was simulated
        if found[3] is not None and period is not None:
            chosen["task_optimum"] = optimum_report(found[3], period)
        layout = self._layout(run.graph)
        if layout is None:
            return chosen
        tasks: dict[int, list[str]] = {}
        for (layer, role), p in sorted(layout.where.items()):
            tasks.setdefault(p, []).append(f"{layer}:{role}")
        return {
            **chosen,
            "dx_split_rows": any(role.startswith("dx.part") for _, role in layout.where),
            "task_loads_cycles": layout.loads,
            "weight_delay_minibatches": dict(layout.delays),
            "tasks_per_processor": {str(p): names for p, names in sorted(tasks.items())},
        }


def on_update(where: Mapping[TaskKey, int], param: Parameter) -> int:
    """The processor of a parameter's update task."""
    return where.get((param.layer, "update"), where.get((param.layer, "dw"), 0))
