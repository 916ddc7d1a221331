"""Pipeline-parallel training schedules: GPipe, PipeDream and LayerPipe.

Each is a plug-in that places the step (the ``place`` hook): it partitions the
layers into contiguous stages, one per processor, copies the step graph the
rewriting techniques produced for each of several mini-batches (each of
``micro_batches`` micro-batches) with every op on its layer's stage, orders the
work on each processor, and lets the event engine simulate the whole task graph;
activations and gradients that cross stages travel over the interconnect.  The
report takes the steady state from the simulation.

* **GPipe** (Huang et al., NeurIPS 2019): ``micro_batches`` per mini-batch; all
  forwards, then all backwards, then the update; the next mini-batch waits for
  it (synchronous).
* **PipeDream** (Narayanan et al., SOSP 2019): one-forward-one-backward (1F1B)
  over mini-batches; a layer's backward (dX then dW) is one task, and a stage
  sends its input gradient upstream when its whole backward pass is done; stage
  ``s`` of ``S`` keeps ``S - s`` mini-batches in flight and stashes a weight
  version for each.
* **LayerPipe** (Unnikrishnan and Parhi, ICCAD 2021; LayerPipe2, arXiv
  2512.08160): the same partition and 1F1B order, but a layer's dW is a task of
  its own that yields to the activation-gradient chain, and the dX work of each
  stage's first layer is split between that stage and the previous one
  (``split``: the share moved) to balance the stages.  Weights are delayed by
  ``2 S(l)`` half-steps (``S(l)`` stages downstream): ``S(l)`` stashed versions
  per layer, or one extra buffer with LayerPipe2's moving-average
  reconstruction (``weights: ema``).

Weight versions in time: the forward of mini-batch ``j`` on stage ``s`` uses the
weights updated after mini-batch ``j - (S - s)`` (PipeDream, LayerPipe) or
``j - 1`` (GPipe).  With one stage and one micro-batch every schedule is the
baseline step, repeated.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from accelsim.config.base import NonNegativeInt, PositiveInt, Spec
from accelsim.config.hardware import DramSharing
from accelsim.config.run import OptimizerSpec
from accelsim.errors import Problem, SimulationError
from accelsim.graph import passes
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import Access, GemmOp, Op, OpGraph, Parameter, Phase, Tag, TensorKind
from accelsim.graph.queries import BACKWARD
from accelsim.lowering.optimizer import add_updates
from accelsim.mapping import placement
from accelsim.mapping.placement import StepGraph
from accelsim.report.result import RunResult
from accelsim.techniques.base import (
    LoadContext,
    SimulatedStep,
    StepCost,
    Technique,
    TechniqueContext,
)
from accelsim.techniques.pipeline_plan import Plan, partition, replicated_partition
from accelsim.techniques.pipeline_report import pipeline_report, steady_state
from accelsim.techniques.task_placement import (
    TaskKey,
    activation_groups,
    assign,
    dram_cycles,
    loads,
    measure_tasks,
    task_of,
)

Fraction = Annotated[float, Field(ge=0, lt=1)]


MAX_MINI_BATCHES = 256


class PipelineConfig(Spec):
    """``techniques.<schedule>``: stages default to the hardware's processors;
    ``mini_batches`` to ``3 S + 2`` for ``S`` stages (at least ``2 S + 1``, so the
    pipeline is full for at least two completions)."""

    stages: PositiveInt | None = None
    micro_batches: PositiveInt = 1
    # Each mini-batch is a copy of the step graph in the simulated schedule.
    mini_batches: Annotated[int, Field(gt=0, le=MAX_MINI_BATCHES)] | None = None


class PipeDreamConfig(PipelineConfig):
    """PipeDream: ``replicate`` lets its partitioner run a stage on several processors
    (data-parallel replicas that take turns over mini-batches and all-reduce their
    weight gradients), as PipeDream's optimizer does."""

    replicate: bool = False


class GPipeConfig(PipelineConfig):
    micro_batches: PositiveInt = 4


class WeightVersions(str, Enum):
    STASH = "stash"
    EMA = "ema"


class TaskPlacement(str, Enum):
    TASKS = "tasks"
    STAGES = "stages"


class DxSplit(str, Enum):
    ROWS = "rows"
    ACTIVATION = "activation"
    NONE = "none"


class LayerPipeConfig(PipelineConfig):
    """LayerPipe.

    ``placement``: ``tasks`` places every layer's forward, input-gradient,
    weight-gradient and update tasks freely on the processors (the paper's
    model; ``stages`` may then exceed the layer count); ``stages`` keeps every
    task of a layer on its contiguous stage, with the inter-layer split below.
    ``dx_split`` (``tasks``): ``rows`` divides each dX GEMM's rows into two tasks
    (``split`` of them in the first, ``balance``: half); ``activation`` runs
    ``Wᵀδ`` as layer ``l``'s dX task and the element-wise ``⊙ f'`` (the backward
    of the vector layers below it) with layer ``l - 1``'s; ``none`` keeps dX whole.
    ``split`` (``stages``): the share of a stage's first layer's dX work done by
    the previous stage, or ``balance`` to move as much as evens out the two
    stages' costs (at most all of it) [D].  ``weights``: how delayed weights are
    kept."""

    placement: Annotated[TaskPlacement, Field(strict=False)] = TaskPlacement.TASKS
    dx_split: Annotated[DxSplit, Field(strict=False)] = DxSplit.ROWS
    split: Fraction | Literal["balance"] = "balance"
    weights: Annotated[WeightVersions, Field(strict=False)] = WeightVersions.STASH
    delay_margin: NonNegativeInt | Literal["auto"] = "auto"


SplitShares = Mapping[str, tuple[float, int]]


@dataclass(frozen=True)
class TaskLayout:
    """LayerPipe's free placement: the step graph of one micro-batch, every task's
    processor, every trained layer's weight delay in mini-batches (``S(l) + 1``), and
    the busiest unit's load of every processor per mini-batch."""

    step: OpGraph
    where: Mapping[TaskKey, int]
    delays: Mapping[str, int]
    loads: list[int]


class Schedule(Technique):
    """Common machinery of the three schedules."""

    one_task_backward: ClassVar[bool] = True
    send_after_backward: ClassVar[bool] = False  # each stage's dX leaves when its backward ends
    synchronous: ClassVar[bool] = False
    conflicts = frozenset({"gpipe", "pipedream", "layerpipe"})

    def __init__(self, config: Spec, source: str) -> None:
        super().__init__(config, source)
        self._plans: dict[int, tuple[RunResult, Plan]] = {}
        self._periods: dict[int, tuple[object, float, float]] = {}

    @property
    def settings(self) -> PipelineConfig:
        assert isinstance(self.config, PipelineConfig)
        return self.config

    def accumulated_micro_batches(self) -> int:
        return self.settings.micro_batches

    def places(self) -> bool:
        return True

    def mini_batches(self, stages: int) -> int:
        """Mini-batches to simulate on ``stages`` stages."""
        return self.settings.mini_batches or 3 * stages + 2

    def validate(self, load: LoadContext) -> list[Problem]:
        cfg, processors, batch = self.settings, load.hardware.processors, load.run.batch_size
        problems = []
        stages = min(cfg.stages or processors, len(load.infos))
        if cfg.mini_batches is not None and cfg.mini_batches < 2 * stages + 1:
            problems.append(
                Problem(
                    self.source,
                    self.where("mini_batches"),
                    f"too few to fill {stages} stages and measure a steady state"
                    f" (needs >= {2 * stages + 1})",
                    cfg.mini_batches,
                )
            )
        if cfg.stages is not None and cfg.stages > processors:
            problems.append(
                Problem(
                    self.source,
                    self.where("stages"),
                    f"more stages than the hardware's {processors} processors",
                    cfg.stages,
                )
            )
        if batch % cfg.micro_batches:
            problems.append(
                Problem(
                    self.source,
                    self.where("micro_batches"),
                    f"must divide the batch size {batch}",
                    cfg.micro_batches,
                )
            )
        if load.run.optimizer.clip_global_norm is not None:
            problems.append(
                Problem(
                    self.source,
                    "optimizer.clip_global_norm",
                    "global-norm clipping across pipeline stages is not modelled",
                    load.run.optimizer.clip_global_norm,
                )
            )
        return problems

    def in_flight(self, stage: int, plan: Plan) -> int:
        """Mini-batches between a stage's forward and the update whose weights it uses:
        one per processor from the stage on (``S - s`` without replicas)."""
        return sum(plan.copies(t) for t in range(stage, plan.stages))

    def position(self, stage: int, plan: Plan, j: int, backward: bool) -> int:
        """Place of mini-batch ``j``'s forward or backward in its replica's 1F1B order."""
        copies = plan.copies(stage)
        warm = -(-self.in_flight(stage, plan) // copies)
        j //= copies
        if backward:
            return warm + 2 * j
        return j if j < warm else warm + 2 * (j - warm) + 1

    def plan(self, ctx: TechniqueContext, base: RunResult) -> Plan:
        """The partition, balanced on the baseline step (computed once per baseline).

        A layer's cost is the time its ops kept the single-processor baseline's
        units busy (forward, backward and update).
        """
        cached = self._plans.get(id(base))
        if cached is not None and cached[0] is base:
            return cached[1]
        names = [info.layer.name for info in ctx.infos]
        stages = min(self.settings.stages or ctx.hardware.processors, len(names))
        busy = base.layer_busy_cycles()
        costs = [busy.get(n, 0) for n in names]
        plan = Plan(stages, dict(zip(names, partition(costs, stages), strict=True)), costs)
        self._plans[id(base)] = (base, plan)
        return plan

    def place(self, ctx: TechniqueContext, step: StepGraph, base: RunResult) -> OpGraph:
        plan = self.plan(ctx, base)
        defer = not self.one_task_backward
        return self.measure(
            ctx,
            lambda count: self.build(ctx, step, plan, None, defer, self.send_after_backward, count),
            self.mini_batches(len(plan.stage_of_processor())),
        )[0]

    def measure(
        self, ctx: TechniqueContext, build: Callable[[int], OpGraph], count: int
    ) -> tuple[OpGraph, float]:
        """The schedule's graph of ``count`` mini-batches (``build`` makes it) and its
        steady period.

        The period is ``(T(2M) - T(M)) / M`` for the makespans ``T`` of ``M`` and
        ``2M`` pipelined mini-batches: the fill, the drain and whatever work is in
        flight at any instant cancel, so the figure is the cost of one more
        mini-batch in a full pipeline, not an average over a transient.
        """
        graph = build(count)
        short = ctx.simulate(graph)
        longer = ctx.simulate(build(2 * count))
        measured = (longer.total_cycles - short.total_cycles) / count
        # Two finite runs can drain a saturated channel slightly differently, which
        # can put the difference a hair under a hard bound; the period is never
        # less than its bounds, and the report keeps the measured figure too.
        period = max(measured, max(short.cycle_bounds(count).values()))
        self._periods[id(short.trace)] = (short.trace, period, measured)
        return graph, period

    def period(self, result: RunResult, measured: bool = False) -> float:
        """The steady period :meth:`measure` found for a simulated graph of this schedule
        (``measured``: the makespan difference itself, before the bounds).

        Raises:
            SimulationError: for a result this schedule did not measure.
        """
        found = self._periods.get(id(result.trace))
        if found is None or found[0] is not result.trace:
            raise SimulationError(f"{self.name}: no period measured for this simulated graph")
        return found[2] if measured else found[1]

    def build(
        self,
        ctx: TechniqueContext,
        step: StepGraph,
        plan: Plan,
        shares: SplitShares | None,
        defer: bool,
        send_after: bool,
        mini_batches: int,
    ) -> OpGraph:
        """The graph of ``mini_batches`` pipelined mini-batches on the stages.

        Args:
            step: Makes the step graph of one micro-batch.
            plan: The partition.
            shares: Layers whose ``dX`` GEMMs are split: the share of rows moved
                and the processor they move to.
            defer: Whether dW yields to dX on stages that send dX upstream.
            send_after: Whether a stage sends its input gradient only when its
                whole backward pass is done (PipeDream), or as soon as it is made.
        """
        cfg = self.settings
        one = step(ctx.run.batch_size // cfg.micro_batches)
        builder = GraphBuilder(ctx.hardware.word_bytes)
        priority: list[int] = []
        updates: dict[tuple[int, int], list[int]] = {}
        first: list[Parameter] = []
        rounds: dict[int, list[_Done]] = {}
        for j in range(mini_batches):
            start = len(builder.ops)
            on = {layer: plan.processor(stage, j) for layer, stage in plan.stage_of.items()}
            copies = [
                _copy(builder, one, Tag(mini_batch=j, micro_batch=i), _by_layer(on), shares)
                for i in range(cfg.micro_batches)
            ]
            first = first or copies[0]
            ready = _accumulate(builder, copies, on, Tag(mini_batch=j))
            backward_done = _stage_sinks(builder, start)
            if send_after:
                _send_after_backward(builder, start, backward_done)
            for stage in range(plan.stages):
                copies_of = plan.copies(stage)
                done = rounds.setdefault(stage, [])
                params = [
                    (param, ready[p])
                    for p, param in enumerate(copies[0])
                    if plan.stage_of[param.layer] == stage
                ]
                proc = plan.processor(stage, j)
                done.append(_Done(j, proc, params, backward_done.get(proc, ())))
                if len(done) == copies_of or j == mini_batches - 1:
                    _update(builder, done, ctx.run.optimizer, updates)
                    done.clear()
            self._order(builder, start, j, plan, updates, priority, defer)
        # The graph's parameters are the first micro-batch's: one copy of the weights.
        return passes.insert_transfers(builder.build(first, priority=priority))

    def _order(
        self,
        builder: GraphBuilder,
        start: int,
        j: int,
        plan: Plan,
        updates: Mapping[tuple[int, int], list[int]],
        priority: list[int],
        defer: bool,
    ) -> None:
        """Weight-version dependencies and each unit's order for mini-batch ``j``'s ops.

        A stage's forward of mini-batch ``j`` waits for the processor's whole update
        after mini-batch ``j - lag``: the dependency goes on the stage's entry ops
        (those that wait for no other forward op of the stage); the rest follow
        them.  Each unit runs its ready ops by schedule position, then program
        order.
        """
        stage_of = plan.stage_of_processor()
        for op_id in range(start, len(builder.ops)):
            op = builder.ops[op_id]
            proc = builder.processor[op_id]
            stage = stage_of[proc]
            backward = op.phase not in (Phase.FWD, Phase.AUX)
            entry = op.phase is Phase.FWD and not any(
                d >= start and builder.ops[d].phase is Phase.FWD and builder.processor[d] == proc
                for d in op.deps
            )
            # The update this processor made after its own mini-batch ``lag`` back.
            copies = plan.copies(stage)
            earlier = j - copies * -(-self.in_flight(stage, plan) // copies)
            if entry and earlier >= 0:
                builder.add_dependencies(op_id, updates.get((earlier, proc), ()))
            rank = self.position(stage, plan, j, backward)
            # dW yields to dX only where dX feeds an upstream stage.
            later = defer and op.phase is Phase.BWD_WEIGHT and stage > 0
            priority.append(2 * rank + int(later))

    def step_cost(self, result: RunResult) -> StepCost:
        """One mini-batch in steady state: its interval, and the energy and DRAM traffic
        of the whole simulated task graph shared over its mini-batches."""
        count = steady_state(result).mini_batches
        return StepCost.per(result, self.period(result), result.cycle_bounds(count), count)

    def training(
        self, ctx: TechniqueContext, base: RunResult, steps: Mapping[str, SimulatedStep]
    ) -> dict[str, Any]:
        plan = self.plan(ctx, base)
        if self.name in steps:
            return pipeline_report(self, plan, ctx, base, steps[self.name].result)
        return {
            "technique": self.name,
            "step_kinds": {
                kind: pipeline_report(self, plan, ctx, base, step.result)
                for kind, step in steps.items()
            },
        }

    def weight_versions(self, stage: int, plan: Plan) -> int:
        """Extra weight copies each processor of ``stage`` keeps for delayed backward
        passes: one per mini-batch of its own in flight, less the current one."""
        return -(-self.in_flight(stage, plan) // plan.copies(stage)) - 1

    def layer_delays(self, plan: Plan, run: RunResult) -> dict[str, tuple[int, int]]:
        """Per layer of a simulated graph of this schedule: the (micro-)batches whose
        activations it keeps, and its extra weight versions."""
        out = {}
        for layer, stage in plan.stage_of.items():
            in_flight = (
                self.settings.micro_batches
                if self.synchronous
                else -(-self.in_flight(stage, plan) // plan.copies(stage))
            )
            out[layer] = (in_flight, self.weight_versions(stage, plan))
        return out

    def placement_report(self, run: RunResult) -> dict[str, Any]:
        """What the report says of how a simulated graph of this schedule was placed."""
        return {}


class GPipe(Schedule):
    """GPipe: micro-batched, all forwards then all backwards, synchronous updates."""

    name = "gpipe"
    Config = GPipeConfig
    synchronous = True

    def in_flight(self, stage: int, plan: Plan) -> int:
        return 1

    def position(self, stage: int, plan: Plan, j: int, backward: bool) -> int:
        return 2 * j + int(backward)

    def weight_versions(self, stage: int, plan: Plan) -> int:
        return 0


class PipeDream(Schedule):
    """PipeDream: 1F1B with weight stashing; a layer's backward is one task."""

    name = "pipedream"
    Config = PipeDreamConfig
    send_after_backward = True

    def plan(self, ctx: TechniqueContext, base: RunResult) -> Plan:
        """With ``replicate``, PipeDream's partitioner: stages and their replicas chosen
        together, a replicated stage costing its layers' time over its replicas plus
        the ring all-reduce of their gradients (both DRAM passes and
        ``2 (r - 1)`` link steps of ``1/r`` of the bytes, with latencies)."""
        assert isinstance(self.config, PipeDreamConfig)
        if not self.config.replicate:
            return super().plan(ctx, base)
        cached = self._plans.get(id(base))
        if cached is not None and cached[0] is base:
            return cached[1]
        names = [info.layer.name for info in ctx.infos]
        busy = base.layer_busy_cycles()
        costs = [busy.get(n, 0) for n in names]
        gradients: dict[str, int] = {}
        for param in base.graph.parameters:
            gradients[param.layer] = gradients.get(param.layer, 0) + param.gradient.bytes
        hw = ctx.hardware
        link, dram = hw.interconnect, hw.dram

        def allreduce(size: np.ndarray, copies: int) -> np.ndarray:
            steps = 2 * (copies - 1)
            hops = steps * (np.ceil(size / copies) / link.bandwidth_bytes_per_cycle)
            dram_cycles = 2 * (size / dram.bandwidth_bytes_per_cycle + dram.latency_cycles)
            return hops + steps * link.latency_cycles + dram_cycles

        stages, replicas = replicated_partition(
            costs,
            [gradients.get(n, 0) for n in names],
            self.settings.stages or hw.processors,
            allreduce,
        )
        plan = Plan(len(replicas), dict(zip(names, stages, strict=True)), costs, tuple(replicas))
        self._plans[id(base)] = (base, plan)
        return plan


class LayerPipe(Schedule):
    """LayerPipe: dW off the critical path, dX split across consecutive stages."""

    name = "layerpipe"
    Config = LayerPipeConfig
    one_task_backward = False

    def __init__(self, config: Spec, source: str) -> None:
        super().__init__(config, source)
        self._layouts: dict[int, tuple[OpGraph, TaskLayout]] = {}

    @property
    def layerpipe(self) -> LayerPipeConfig:
        assert isinstance(self.config, LayerPipeConfig)
        return self.config

    def shares(self, plan: Plan, base: RunResult) -> dict[str, tuple[float, int]]:
        """The share of each stage's first layer's dX rows done by the previous stage."""
        stage_cost = [0] * plan.stages
        for name, cost in zip(plan.stage_of, plan.costs, strict=True):
            stage_cost[plan.stage_of[name]] += cost
        dx_cycles: dict[str, int] = {}
        for op in base.graph.ops:
            if op.phase is Phase.BWD_INPUT and isinstance(op, GemmOp):
                span = int(base.trace.end_cycle[op.op_id] - base.trace.start_cycle[op.op_id])
                dx_cycles[op.layer] = dx_cycles.get(op.layer, 0) + span
        shares: dict[str, tuple[float, int]] = {}
        for stage, name in plan.first_of().items():
            if stage == 0 or not dx_cycles.get(name):
                continue
            if self.layerpipe.split == "balance":
                gap = stage_cost[stage] - stage_cost[stage - 1]
                share = min(1.0, max(0.0, gap / (2 * dx_cycles[name])))
            else:
                share = float(self.layerpipe.split)
            if share > 0:
                shares[name] = (share, stage - 1)
        return shares

    def place(self, ctx: TechniqueContext, step: StepGraph, base: RunResult) -> OpGraph:
        """LayerPipe's placement: free tasks, or the fastest of the stage options (also
        on one processor, where either is the baseline step).

        With ``placement: tasks`` PipeDream's own schedule on the same partition
        is simulated too, and kept when the free placement's list scheduling
        comes out slower (the report's ``placement`` says which ran), so
        LayerPipe is never slower than PipeDream.

        With ``placement: stages`` the candidates are the inter-layer split with
        dW deferred, dW deferred alone, the plain 1F1B order, and PipeDream's own
        (1F1B, each stage's input gradient sent when its backward is done); each
        is simulated and the one with the shortest steady state is kept, so on the
        same partition LayerPipe is never slower than PipeDream.
        """
        plan = self.plan(ctx, base)
        if self.layerpipe.placement is TaskPlacement.TASKS and self.processors(ctx) > 1:
            graph, period = self.place_tasks(ctx, step, plan)
            fallback, fallback_period = self.measure(
                ctx,
                functools.partial(self.build, ctx, step, plan, None, False, True),
                self.mini_batches(plan.stages),
            )
            return graph if period <= fallback_period else fallback
        shares = self.shares(plan, base)
        candidates: list[tuple[SplitShares | None, bool, bool]] = [
            (None, True, False),
            (None, False, False),
            (None, False, True),
        ]
        if shares:
            candidates.insert(0, (shares, True, False))
        best: tuple[float, OpGraph] | None = None
        for split, defer, send_after in candidates:
            graph, period = self.measure(
                ctx,
                functools.partial(self.build, ctx, step, plan, split, defer, send_after),
                self.mini_batches(plan.stages),
            )
            if best is None or period < best[0]:
                best = (period, graph)
        assert best is not None
        return best[1]

    def place_tasks(
        self, ctx: TechniqueContext, step: StepGraph, plan: Plan
    ) -> tuple[OpGraph, float]:
        """The free task placement, with the weight delays it needs, and its period.

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
        alone = self.layout(ctx, step, plan)
        processors = self.processors(ctx)
        margin = self.layerpipe.delay_margin
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
            count = self.settings.mini_batches or max(
                3 * processors + 2, 2 * max(delays.values(), default=1) + 2
            )
            graph, period = self.measure(
                ctx, functools.partial(self.build_tasks, ctx, layout), count
            )
            if best is not None and period > 0.995 * best[0]:
                break
            best = (period, graph, layout)
            bound = max(max(alone.loads), *ctx.simulate(graph).cycle_bounds(count).values())
            if period <= 1.005 * bound:
                break
        assert best is not None
        self._layouts[id(best[1])] = (best[1], best[2])
        return best[1], best[0]

    def processors(self, ctx: TechniqueContext) -> int:
        """Processors the free task placement uses (not capped at the layer count)."""
        return self.settings.stages or ctx.hardware.processors

    def layout(self, ctx: TechniqueContext, step: StepGraph, plan: Plan) -> TaskLayout:
        """Every task's processor and every layer's weight delay.

        The tasks' costs come from the step simulated on one processor.  The
        candidates are the list scheduler's placement of the tasks (with the dX
        GEMMs split as ``dx_split`` says, and without the split, which costs a
        second pipeline fill on the array), and the partition's stages (every
        task on its layer's stage); each is rated by the larger of its busiest
        processor's busiest unit and its DRAM time (the shared channel's, or the
        busiest processor's own), and the first of them, in that order, within
        1 % of the best is kept (the busiest unit's load ignores what the array
        and the vector unit cannot overlap, so a split that saves less is not
        worth its second pipeline fill; and each half of a split dX GEMM reads
        the whole weights).

        The delay of layer ``l`` here is the number of periods (at least one)
        its mini-batch spends between the start of its forward and the end of
        its update (or, without weights, of its backward: how long it keeps its
        activations) when one mini-batch runs alone on the placement, with the
        period estimated by the candidate's rating; :meth:`place_tasks` adds the
        margin a full pipeline's queueing needs.
        """
        whole = step(ctx.run.batch_size // self.settings.micro_batches)
        processors = self.processors(ctx)
        link = ctx.hardware.interconnect.bandwidth_bytes_per_cycle
        bandwidth = ctx.hardware.dram.bandwidth_bytes_per_cycle
        shared = ctx.hardware.dram.sharing is DramSharing.SHARED
        split = self.layerpipe.split
        share = 0.5 if split == "balance" else float(split)
        steps = [whole]
        if self.layerpipe.dx_split is DxSplit.ROWS and share > 0:
            steps.append(
                passes.split_gemms(
                    whole, lambda op: (share, 0) if op.phase is Phase.BWD_INPUT else None
                )
            )
        candidates: list[tuple[float, OpGraph, dict[TaskKey, int], list[int]]] = []
        for one in steps:
            single = placement.single(one, ctx.run.optimizer, ctx.hardware.word_bytes)
            costs = measure_tasks(ctx.simulate(single))
            groups = activation_groups(one) if self.layerpipe.dx_split is DxSplit.ACTIVATION else []
            free = assign(costs, processors, link, groups, 0.0 if shared else bandwidth)
            staged = {task: plan.stage_of.get(task[0], 0) for task in free}
            for where in (free, staged):
                load = loads(costs, where, processors)
                dram = dram_cycles(costs, where, processors, bandwidth, shared)
                candidates.append((max(*load, dram), one, where, load))
        least = min(c[0] for c in candidates)
        busiest, one, where, load = next(c for c in candidates if c[0] <= 1.01 * least)
        busiest = max(busiest, 1)
        alone = TaskLayout(one, where, {}, load)
        run = ctx.simulate(self.build_tasks(ctx, alone, 1))
        trace = run.trace
        began: dict[str, int] = {}
        ended: dict[str, int] = {}
        for op in run.graph.ops:
            if op.phase is Phase.FWD:
                start = int(trace.start_cycle[op.op_id])
                began[op.layer] = min(began.get(op.layer, start), start)
            else:
                ended[op.layer] = max(ended.get(op.layer, 0), int(trace.end_cycle[op.op_id]))
        delays = {
            layer: max(1, math.ceil((end - began.get(layer, 0)) / busiest))
            for layer, end in ended.items()
        }
        return TaskLayout(one, where, delays, alone.loads)

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
        priority: list[int] = []
        updates: dict[tuple[int, str], list[int]] = {}
        first: list[Parameter] = []
        for j in range(mini_batches):
            start = len(builder.ops)
            copies = [
                _copy(builder, one, Tag(mini_batch=j, micro_batch=i), on)
                for i in range(self.settings.micro_batches)
            ]
            first = first or copies[0]
            dw_on = {p.layer: where.get((p.layer, "dw"), 0) for p in copies[0]}
            ready = _accumulate(builder, copies, dw_on, Tag(mini_batch=j))
            backward_done = _stage_sinks(builder, start)
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
                if op.phase is Phase.FWD and earlier >= 0:
                    builder.add_dependencies(op_id, updates.get((earlier, op.layer), ()))
                priority.append(j)
        return passes.insert_transfers(builder.build(first, priority=priority))

    def weight_versions(self, stage: int, plan: Plan) -> int:
        return self.kept(plan.stages - 1 - stage)  # S(l); delay 2 S(l) half-steps

    def kept(self, downstream: int) -> int:
        """Extra weight copies of a layer ``S(l) = downstream`` stages from the end:
        ``S(l)`` stashed versions, or one buffer for the moving average."""
        if self.layerpipe.weights is WeightVersions.EMA:
            return min(1, downstream)
        return downstream

    def _layout(self, run: RunResult) -> TaskLayout | None:
        found = self._layouts.get(id(run.graph))
        return found[1] if found is not None and found[0] is run.graph else None

    def layer_delays(self, plan: Plan, run: RunResult) -> dict[str, tuple[int, int]]:
        layout = self._layout(run)
        if layout is None:
            return super().layer_delays(plan, run)
        return {
            layer: (layout.delays.get(layer, 1), self.kept(layout.delays.get(layer, 1) - 1))
            for layer in plan.stage_of
        }

    def placement_report(self, run: RunResult) -> dict[str, Any]:
        layout = self._layout(run)
        if layout is None:
            return {"placement": TaskPlacement.STAGES.value}
        tasks: dict[int, list[str]] = {}
        for (layer, role), p in sorted(layout.where.items()):
            tasks.setdefault(p, []).append(f"{layer}:{role}")
        return {
            "placement": TaskPlacement.TASKS.value,
            "dx_split_rows": any(role.startswith("dx.part") for _, role in layout.where),
            "task_loads_cycles": layout.loads,
            "weight_delay_minibatches": dict(layout.delays),
            "tasks_per_processor": {str(p): names for p, names in sorted(tasks.items())},
        }


def _copy(
    builder: GraphBuilder,
    one: OpGraph,
    tag: Tag,
    where: Callable[[Op], int],
    shares: SplitShares | None = None,
) -> list[Parameter]:
    """Append micro-batch ``tag``'s copy of the step, each op on the processor ``where``
    gives it; its trained parameters."""
    graph = passes.place(
        passes.instantiate(one, tag, f"b{tag.mini_batch}m{tag.micro_batch}/"), where
    )
    if shares:
        graph = passes.split_gemms(
            graph,
            lambda op: shares.get(op.layer) if op.phase is Phase.BWD_INPUT else None,
        )
    offset = builder.append_graph(graph)
    return [
        dataclasses.replace(p, grad_op=p.grad_op + offset)
        for p in graph.parameters
        if p.grad_op >= 0
    ]


def on_update(where: Mapping[TaskKey, int], param: Parameter) -> int:
    """The processor of a parameter's update task."""
    return where.get((param.layer, "update"), where.get((param.layer, "dw"), 0))


def _accumulate(
    builder: GraphBuilder, copies: list[list[Parameter]], stage_of: Mapping[str, int], tag: Tag
) -> list[int]:
    """Sum each parameter's gradient over the micro-batches; the op that finishes it."""
    if len(copies) == 1:
        return [p.grad_op for p in copies[0]]
    ready = []
    for p, first in enumerate(copies[0]):
        parts = [c[p].gradient for c in copies]
        total = builder.tensor(
            f"{first.weight.name}.grad_sum", TensorKind.GRADIENT, first.update_elements
        )
        op = builder.vector(
            f"{first.weight.name}.grad_sum",
            first.layer,
            Phase.BWD_WEIGHT,
            total.elements,
            len(parts) - 1,
            [Access(part, total.elements) for part in parts],
            [total],
            tag=tag,
        )
        builder.processor[op] = stage_of[first.layer]
        ready.append(op)
    return ready


def _by_layer(processor_of: Mapping[str, int]) -> Callable[[Op], int]:
    """Placement of ops by their layer."""
    return lambda op: processor_of[op.layer]


@dataclass(frozen=True)
class _Done:
    """A processor's finished backward pass of mini-batch ``j``: its parameters with the
    ops that make their gradients, and its backward sinks."""

    j: int
    processor: int
    params: list[tuple[Parameter, int]]
    sinks: tuple[int, ...]


def _update(
    builder: GraphBuilder,
    done: list[_Done],
    optimizer: OptimizerSpec,
    updates: dict[tuple[int, int], list[int]],
) -> None:
    """The updates after a round of a stage's mini-batches, one per replica.

    With one replica each mini-batch's gradients update the weights right after
    its stage's backward pass.  Replicas (PipeDream's data-parallel stages)
    all-reduce each parameter's gradients of the round first, then each updates
    its own copy of the weights.
    """
    procs = tuple(d.processor for d in done)
    for p, (param, grad) in enumerate(done[0].params):
        ready = grad
        if len(done) > 1:
            name = param.weight.name.split("/", 1)[-1]
            total = builder.tensor(
                f"b{done[0].j}/{name}.allreduce", param.gradient.kind, param.gradient.elements
            )
            ready = builder.allreduce(
                f"b{done[0].j}/{name}.allreduce",
                param.layer,
                total,
                procs,
                [d.params[p][1] for d in done],
            )
            builder.processor[ready] = procs[0]
        for d in done:
            mine = d.params[p][0]
            for op in add_updates(
                builder,
                [mine],
                optimizer,
                after=d.sinks,
                gradient_ready={mine.weight.name: ready},
                tag=Tag(mini_batch=d.j),
            ):
                builder.processor[op] = d.processor
                updates.setdefault((d.j, d.processor), []).append(op)


def _send_after_backward(
    builder: GraphBuilder, start: int, backward_done: Mapping[int, tuple[int, ...]]
) -> None:
    """Backward ops since ``start`` that read a gradient made on another stage wait for
    that stage's whole backward pass: a stage sends its input gradient when its
    backward is done (the transfer then waits too)."""
    for i in range(start, len(builder.ops)):
        op = builder.ops[i]
        if op.phase not in BACKWARD:
            continue
        here = builder.processor[i]
        senders = {
            builder.processor[p]
            for group in op.sources
            for p in group
            if builder.processor[p] != here and builder.ops[p].phase in BACKWARD
        }
        for sender in senders:
            builder.add_dependencies(i, backward_done.get(sender, ()))


def _stage_sinks(builder: GraphBuilder, start: int) -> dict[int, tuple[int, ...]]:
    """Per processor, the backward ops since ``start`` that no later one there waits for.

    Updating a stage's weights after these is updating after its whole backward
    pass, as the baseline step does.
    """
    backward = [i for i in range(start, len(builder.ops)) if builder.ops[i].phase in BACKWARD]
    used = {d for i in backward for d in builder.ops[i].deps}
    sinks: dict[int, list[int]] = {}
    for i in backward:
        if i not in used:
            sinks.setdefault(builder.processor[i], []).append(i)
    return {stage: tuple(ids) for stage, ids in sinks.items()}
