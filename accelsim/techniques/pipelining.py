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
  over mini-batches; a layer's backward (dX then dW) is one task; stage ``s`` of
  ``S`` keeps ``S - s`` mini-batches in flight and stashes a weight version for
  each.
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
from collections.abc import Mapping
from enum import Enum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from accelsim.config.base import PositiveInt, Spec
from accelsim.errors import Problem, SimulationError
from accelsim.graph import passes
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import Access, GemmOp, OpGraph, Parameter, Phase, Tag, TensorKind
from accelsim.graph.queries import BACKWARD
from accelsim.lowering.optimizer import add_updates
from accelsim.mapping.placement import StepGraph
from accelsim.report.result import RunResult
from accelsim.techniques.base import (
    LoadContext,
    SimulatedStep,
    StepCost,
    Technique,
    TechniqueContext,
)
from accelsim.techniques.pipeline_plan import Plan, partition
from accelsim.techniques.pipeline_report import pipeline_report, steady_state

Fraction = Annotated[float, Field(ge=0, lt=1)]


class PipelineConfig(Spec):
    """``techniques.<schedule>``: stages default to the hardware's processors;
    ``mini_batches`` to ``3 S + 2`` for ``S`` stages (at least ``2 S + 1``, so the
    pipeline is full for at least two completions)."""

    stages: PositiveInt | None = None
    micro_batches: PositiveInt = 1
    mini_batches: PositiveInt | None = None


class GPipeConfig(PipelineConfig):
    micro_batches: PositiveInt = 4


class WeightVersions(str, Enum):
    STASH = "stash"
    EMA = "ema"


class LayerPipeConfig(PipelineConfig):
    """LayerPipe: ``split`` is the share of a stage's first layer's dX work done by
    the previous stage: a number, or ``balance`` to move as much as evens out the
    two stages' costs (at most all of it) [D]; ``weights`` how delayed weights are
    kept."""

    split: Fraction | Literal["balance"] = "balance"
    weights: Annotated[WeightVersions, Field(strict=False)] = WeightVersions.STASH


SplitShares = Mapping[str, tuple[float, int]]


class Schedule(Technique):
    """Common machinery of the three schedules."""

    one_task_backward: ClassVar[bool] = True
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

    def in_flight(self, stage: int, stages: int) -> int:
        """Mini-batches between a stage's forward and the update whose weights it uses."""
        return stages - stage

    def position(self, stage: int, stages: int, j: int, backward: bool) -> int:
        """Place of mini-batch ``j``'s forward or backward in the stage's 1F1B order."""
        warm = self.in_flight(stage, stages)
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
        return self.measure(ctx, step, plan, None, not self.one_task_backward)[0]

    def measure(
        self,
        ctx: TechniqueContext,
        step: StepGraph,
        plan: Plan,
        shares: SplitShares | None,
        defer: bool,
    ) -> tuple[OpGraph, float]:
        """The schedule's graph of ``M`` mini-batches and its steady period.

        The period is ``(T(2M) - T(M)) / M`` for the makespans ``T`` of ``M`` and
        ``2M`` pipelined mini-batches: the fill, the drain and whatever work is in
        flight at any instant cancel, so the figure is the cost of one more
        mini-batch in a full pipeline, not an average over a transient.
        """
        count = self.mini_batches(plan.stages)
        graph = self.build(ctx, step, plan, shares, defer, count)
        short = ctx.simulate(graph)
        longer = ctx.simulate(self.build(ctx, step, plan, shares, defer, 2 * count))
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
        mini_batches: int,
    ) -> OpGraph:
        """The graph of ``mini_batches`` pipelined mini-batches on the stages.

        Args:
            step: Makes the step graph of one micro-batch.
            plan: The partition.
            shares: Layers whose ``dX`` GEMMs are split: the share of rows moved
                and the processor they move to.
            defer: Whether dW yields to dX on stages that send dX upstream.
        """
        cfg = self.settings
        one = step(ctx.run.batch_size // cfg.micro_batches)
        stage_of = plan.stage_of
        builder = GraphBuilder(ctx.hardware.word_bytes)
        priority: list[int] = []
        updates: dict[tuple[int, int], list[int]] = {}
        optimizer = ctx.run.optimizer
        first: list[Parameter] = []
        for j in range(mini_batches):
            start = len(builder.ops)
            copies = [
                self._copy(builder, one, Tag(mini_batch=j, micro_batch=i), stage_of, shares)
                for i in range(cfg.micro_batches)
            ]
            first = first or copies[0]
            ready = _accumulate(builder, copies, stage_of, Tag(mini_batch=j))
            backward_done = _stage_sinks(builder, start)
            for p, param in enumerate(copies[0]):
                stage = stage_of[param.layer]
                for op in add_updates(
                    builder,
                    [param],
                    optimizer,
                    after=backward_done.get(stage, ()),
                    gradient_ready={param.weight.name: ready[p]},
                    tag=Tag(mini_batch=j),
                ):
                    builder.processor[op] = stage
                    updates.setdefault((j, stage), []).append(op)
            self._order(builder, start, j, plan.stages, updates, priority, defer)
        # The graph's parameters are the first micro-batch's: one copy of the weights.
        return passes.insert_transfers(builder.build(first, priority=priority))

    @staticmethod
    def _copy(
        builder: GraphBuilder,
        one: OpGraph,
        tag: Tag,
        stage_of: Mapping[str, int],
        shares: SplitShares | None,
    ) -> list[Parameter]:
        """Append micro-batch ``tag``'s copy of the step, on the stages; its trained parameters."""
        graph = passes.place(
            passes.instantiate(one, tag, f"b{tag.mini_batch}m{tag.micro_batch}/"),
            lambda op: stage_of[op.layer],
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

    def _order(
        self,
        builder: GraphBuilder,
        start: int,
        j: int,
        stages: int,
        updates: Mapping[tuple[int, int], list[int]],
        priority: list[int],
        defer: bool,
    ) -> None:
        """Weight-version dependencies and each unit's order for mini-batch ``j``'s ops.

        A stage's forward of mini-batch ``j`` waits for the stage's whole update of
        mini-batch ``j - lag``: the dependency goes on the stage's entry ops (those
        that wait for no other forward op of the stage); the rest follow them.
        Each unit runs its ready ops by schedule position, then program order.
        """
        for op_id in range(start, len(builder.ops)):
            op = builder.ops[op_id]
            stage = builder.processor[op_id]
            backward = op.phase not in (Phase.FWD, Phase.AUX)
            entry = op.phase is Phase.FWD and not any(
                d >= start and builder.ops[d].phase is Phase.FWD and builder.processor[d] == stage
                for d in op.deps
            )
            earlier = j - self.in_flight(stage, stages)
            if entry and earlier >= 0:
                builder.add_dependencies(op_id, updates.get((earlier, stage), ()))
            rank = self.position(stage, stages, j, backward)
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

    def weight_versions(self, stage: int, stages: int) -> int:
        """Extra weight copies a layer on ``stage`` keeps for delayed backward passes."""
        return self.in_flight(stage, stages) - 1


class GPipe(Schedule):
    """GPipe: micro-batched, all forwards then all backwards, synchronous updates."""

    name = "gpipe"
    Config = GPipeConfig
    synchronous = True

    def in_flight(self, stage: int, stages: int) -> int:
        return 1

    def position(self, stage: int, stages: int, j: int, backward: bool) -> int:
        return 2 * j + int(backward)

    def weight_versions(self, stage: int, stages: int) -> int:
        return 0


class PipeDream(Schedule):
    """PipeDream: 1F1B with weight stashing; a layer's backward is one task."""

    name = "pipedream"
    Config = PipelineConfig


class LayerPipe(Schedule):
    """LayerPipe: dW off the critical path, dX split across consecutive stages."""

    name = "layerpipe"
    Config = LayerPipeConfig
    one_task_backward = False

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
        """The fastest of LayerPipe's options on the balanced partition.

        Candidates: the inter-layer split with dW deferred, dW deferred alone,
        and the plain 1F1B order (PipeDream's); each is simulated and the one
        with the shortest steady state is kept, so LayerPipe is never slower than
        PipeDream on the same partition.
        """
        plan = self.plan(ctx, base)
        shares = self.shares(plan, base)
        candidates: list[tuple[SplitShares | None, bool]] = [(None, True), (None, False)]
        if shares:
            candidates.insert(0, (shares, True))
        best: tuple[float, OpGraph] | None = None
        for split, defer in candidates:
            graph, period = self.measure(ctx, step, plan, split, defer)
            if best is None or period < best[0]:
                best = (period, graph)
        assert best is not None
        return best[1]

    def weight_versions(self, stage: int, stages: int) -> int:
        downstream = stages - 1 - stage  # S(l); delay 2 S(l) half-steps = S(l) versions
        if self.layerpipe.weights is WeightVersions.EMA:
            return min(1, downstream)
        return downstream


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
