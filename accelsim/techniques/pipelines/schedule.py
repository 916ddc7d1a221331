"""Pipeline-parallel training schedules: the machinery GPipe, PipeDream and LayerPipe share.

Each is a plug-in that places the step (a :class:`~accelsim.techniques.base.Placer`):
it partitions the layers into contiguous stages, one per processor, copies the step
graph the rewriting techniques produced for each of several mini-batches (each of
``micro_batches`` micro-batches) with every op on its layer's stage, orders the
work on each processor, and lets the event engine simulate the whole task graph;
activations and gradients that cross stages travel over the interconnect.  The
report takes the steady state from the simulation.

The schedules (:mod:`~accelsim.techniques.pipelines.gpipe`,
:mod:`~accelsim.techniques.pipelines.pipedream`,
:mod:`~accelsim.techniques.pipelines.layerpipe`) build on :class:`Schedule`.

Weight versions in time: the forward of mini-batch ``j`` on stage ``s`` uses the
weights updated after mini-batch ``j - (S - s)`` (PipeDream, LayerPipe) or
``j - 1`` (GPipe).  With one stage and one micro-batch every schedule is the
baseline step, repeated.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

from accelsim.config.run import OnCapacity
from accelsim.errors import ConfigError, Problem, SimulationError
from accelsim.graph import passes
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.copies import Relabel
from accelsim.graph.ops import OpGraph, Parameter, Phase, Stage, Tag
from accelsim.graph.queries import forward_work
from accelsim.mapping import placement
from accelsim.mapping.placement import StepGraph
from accelsim.report.result import RunResult
from accelsim.report.training import Source
from accelsim.techniques.base import (
    LoadContext,
    Placer,
    Section,
    SimulatedStep,
    StepCost,
    TechniqueContext,
    TrainingPlan,
)
from accelsim.techniques.pipelines.checks import schedule_problems
from accelsim.techniques.pipelines.config import MAX_MINI_BATCHES, PipelineConfig
from accelsim.techniques.pipelines.graph import (
    Done,
    SplitShares,
    accumulate_gradients,
    add_round_updates,
    by_layer,
    copy_step,
    repeat_last_block,
    send_after_backward,
    stage_sinks,
)
from accelsim.techniques.pipelines.memory import ProcessorMemory, overflow, processor_memory
from accelsim.techniques.pipelines.plan import Plan, partition
from accelsim.techniques.pipelines.report import (
    Placed,
    Scheduled,
    pipeline_report,
    schedule_section,
    steady_state,
)
from accelsim.techniques.provenance import Origin, inputs
from accelsim.timing.engines import followed_by

P = TypeVar("P", bound=PipelineConfig)
"""A schedule's config."""


class Schedule(Placer[P]):
    """Common machinery of the three schedules."""

    trains = "it pipelines micro-batches' forward and backward passes and their updates"
    one_task_backward: ClassVar[bool] = True
    send_after_backward: ClassVar[bool] = False  # each stage's dX leaves when its backward ends
    synchronous: ClassVar[bool] = False
    conflicts = frozenset({"gpipe", "pipedream", "layerpipe"})
    after: ClassVar[Mapping[str, str]] = dict.fromkeys(
        ("approximate_dropout", "gradient_skipping", "gradient_prediction", "optimizer_fusion"),
        "a schedule places the step graph the rewrites made; its section follows theirs",
    )

    def __init__(self, config: P, source: str) -> None:
        super().__init__(config, source)
        self._plans: dict[int, tuple[RunResult, Plan]] = {}
        self._periods: dict[int, tuple[object, float, float]] = {}
        self._placed: dict[int, tuple[object, Placed]] = {}

    def accumulated_micro_batches(self) -> int:
        return self.config.micro_batches

    def mini_batches(self, stages: int) -> int:
        """Mini-batches to simulate on ``stages`` stages: ``3 S + 2`` by default, at most
        :data:`MAX_MINI_BATCHES` (``validate`` keeps ``2 S + 1`` within it)."""
        return self.config.mini_batches or min(3 * stages + 2, MAX_MINI_BATCHES)

    def defaults(self) -> dict[str, Origin]:
        """Where each setting's default comes from (its report's inputs)."""
        table: dict[str, Origin] = {
            "stages": (Source.OURS, "none: one stage per processor"),
            "micro_batches": (Source.OURS, "our choice: one micro-batch per mini-batch"),
            "mini_batches": (Source.OURS, "none: 3 S + 2, enough to measure a steady state"),
        }
        return table

    def depth(self, load: LoadContext) -> tuple[int, int]:
        """How deep the pipeline is (its stages) and the fewest mini-batches that fill
        it and measure a steady state (``2 S + 1``)."""
        stages = min(self.config.stages or load.hardware.processors, len(load.infos))
        return stages, 2 * stages + 1

    def deepest(self) -> int:
        """The most stages whose fill fits in :data:`MAX_MINI_BATCHES` mini-batches."""
        return (MAX_MINI_BATCHES - 1) // 2

    def validate(self, load: LoadContext) -> list[Problem]:
        return schedule_problems(
            self.config, load, self.depth(load), self.deepest(), self.source, self.where
        )

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

    def single_step(
        self, ctx: TechniqueContext, step: StepGraph, base: RunResult
    ) -> tuple[RunResult, bool]:
        """The step on one processor whose layer costs balance a step kind's stages, and
        whether it is the kind's own.

        The kind's own step graph (what the rewriting techniques made of it, an
        ADA-GP prediction step's forward pass, say) with its updates on processor 0,
        simulated; or ``base`` itself when that graph is the baseline step's (no
        technique rewrote it), which then costs no simulation.
        """
        batch, hw = ctx.run.batch_size, ctx.hardware
        graph = placement.single(step(batch), ctx.run.optimizer, hw.word_bytes)
        if graph.ops == base.graph.ops:
            return base, False
        return ctx.simulate(graph), True

    def plan(self, ctx: TechniqueContext, single: RunResult) -> Plan:
        """The partition, balanced on the step ``single`` simulated on one processor
        (computed once per such step).

        A layer's cost is the time its ops kept that step's units busy (forward,
        backward and update).
        """
        cached = self._plans.get(id(single))
        if cached is not None and cached[0] is single:
            return cached[1]
        names = [info.layer.name for info in ctx.infos]
        stages = min(self.config.stages or ctx.hardware.processors, len(names))
        busy = single.layer_busy_cycles()
        costs = [busy.get(n, 0) for n in names]
        plan = Plan(stages, dict(zip(names, partition(costs, stages), strict=True)), costs)
        self._plans[id(single)] = (single, plan)
        return plan

    def place(self, ctx: TechniqueContext, step: StepGraph, base: RunResult) -> OpGraph:
        single, own = self.single_step(ctx, step, base)
        plan = self.plan(ctx, single)
        defer = not self.one_task_backward
        graph = self.measure(
            ctx,
            lambda count: self.build(ctx, step, plan, None, defer, self.send_after_backward, count),
            self.mini_batches(len(plan.stage_of_processor())),
        )[0]
        return self.remember(ctx, graph, Placed(plan, single, own))

    def remember(self, ctx: TechniqueContext, graph: OpGraph, placed: Placed) -> OpGraph:
        """``graph``, recorded as placed by ``placed`` (the report reads it back), once
        its DRAM footprint is known to fit (or the run asked only to report it).

        Raises:
            ConfigError: with ``on_capacity: error``, when a processor's (or the shared
                channel's) footprint exceeds ``hardware.dram.capacity_gib``; at that
                key of the run file, which puts the schedule on that hardware (the
                driver blames it on the override that set the capacity, if one did).
        """
        problem = overflow(self.memory(ctx, placed.plan, graph), ctx.machine)
        if problem is not None and ctx.run.on_capacity is OnCapacity.ERROR:
            raise ConfigError.single(
                self.source,
                "hardware.dram.capacity_gib",
                f"{self.name}: {problem}; set on_capacity: report to simulate it anyway",
                ctx.hardware.dram.capacity_gib,
            )
        self._placed[id(graph.ops)] = (graph.ops, placed)
        return graph

    def memory(self, ctx: TechniqueContext, plan: Plan, graph: OpGraph) -> list[ProcessorMemory]:
        """What each processor of ``graph``, placed on ``plan``, keeps in DRAM."""
        return processor_memory(
            graph, self.layer_delays(plan, graph), ctx.run.optimizer, ctx.hardware
        )

    def fits(self, ctx: TechniqueContext, plan: Plan, graph: OpGraph) -> bool:
        """Whether every DRAM channel holds what ``graph``'s processors keep in it."""
        return overflow(self.memory(ctx, plan, graph), ctx.machine) is None

    def placed(self, result: RunResult) -> Placed:
        """How this schedule placed the step kind simulated in ``result``.

        Raises:
            SimulationError: for a result of a graph this schedule did not place.
        """
        found = self._placed.get(id(result.graph.ops))
        if found is None or found[0] is not result.graph.ops:
            raise SimulationError(f"{self.name}: no placement recorded for this simulated graph")
        return found[1]

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
        with followed_by(2.0):  # the 2M graph has about twice the events
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

        Without replicated stages or split GEMMs, every mini-batch from
        :meth:`steady_from` on is the one before it moved by a block: those
        are copies of the first one (:func:`repeat_last_block`, which checks it).
        """
        steady = (
            self.steady_from(plan)
            if not shares and plan.stages == len(plan.stage_of_processor())
            else None
        )
        if steady is not None and steady + 1 < mini_batches:
            head = self._build(ctx, step, plan, shares, defer, send_after, steady + 1)
            graph = repeat_last_block(head, mini_batches)
            if graph is not None:
                return graph
        return self._build(ctx, step, plan, shares, defer, send_after, mini_batches)

    def steady_from(self, plan: Plan) -> int:
        """The first mini-batch whose block, and the one before it, have every
        weight-version dependency and a schedule position linear in the mini-batch
        (without replicated stages)."""
        return 1 + max(self.in_flight(stage, plan) for stage in range(plan.stages))

    def _build(
        self,
        ctx: TechniqueContext,
        step: StepGraph,
        plan: Plan,
        shares: SplitShares | None,
        defer: bool,
        send_after: bool,
        mini_batches: int,
    ) -> OpGraph:
        """:meth:`build`, one mini-batch after another."""
        cfg = self.config
        one = step(ctx.run.batch_size // cfg.micro_batches)
        relabel = Relabel(one.ops, one.parameters)
        builder = GraphBuilder(ctx.hardware.word_bytes)
        priority: list[int] = []
        updates: dict[tuple[int, int], list[int]] = {}
        first: list[Parameter] = []
        rounds: dict[int, list[Done]] = {}
        for j in range(mini_batches):
            start = len(builder.ops)
            on = {layer: plan.processor(stage, j) for layer, stage in plan.stage_of.items()}
            tags = [Tag(mini_batch=j, micro_batch=i) for i in range(cfg.micro_batches)]
            copies = [copy_step(builder, one, t, by_layer(on), shares, relabel) for t in tags]
            first = first or copies[0]
            ready = accumulate_gradients(builder, copies, on, Tag(mini_batch=j), self.name)
            backward_done = stage_sinks(builder, start)
            if send_after:
                send_after_backward(builder, start, backward_done)
            for stage in range(plan.stages):
                copies_of = plan.copies(stage)
                done = rounds.setdefault(stage, [])
                params = [
                    (param, ready[p])
                    for p, param in enumerate(copies[0])
                    if plan.stage_of[param.layer] == stage
                ]
                proc = plan.processor(stage, j)
                done.append(Done(j, proc, params, backward_done.get(proc, ())))
                if len(done) == copies_of or j == mini_batches - 1:
                    add_round_updates(builder, done, ctx.run.optimizer, updates, self.name)
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
        them.  Each unit runs its ready ops by schedule position (the forward's or the
        backward's by their stage; a technique's auxiliary ops the forward's wherever
        they run), then program order.
        """
        stage_of = plan.stage_of_processor()
        # Per stage: the mini-batch whose update its forward waits for (the processor's
        # own, ``lag`` back), and the schedule positions of its forward and backward.
        earlier, rank = {}, {}
        for stage in set(stage_of):
            copies = plan.copies(stage)
            earlier[stage] = j - copies * -(-self.in_flight(stage, plan) // copies)
            for backward in (False, True):
                rank[stage, backward] = self.position(stage, plan, j, backward)
        ops, processor = builder.ops, builder.processor
        for op_id in range(start, len(ops)):
            op = ops[op_id]
            proc = processor[op_id]
            stage = stage_of[proc]
            backward = op.stage is not Stage.FORWARD and op.phase is not Phase.AUX
            entry = forward_work(op) and not any(
                d >= start and forward_work(ops[d]) and processor[d] == proc for d in op.deps
            )
            if entry and earlier[stage] >= 0:
                builder.add_dependencies(op_id, updates.get((earlier[stage], proc), ()))
            # dW yields to dX only where dX feeds an upstream stage.
            later = defer and op.phase is Phase.BWD_WEIGHT and stage > 0
            priority.append(2 * rank[stage, backward] + int(later))

    def step_cost(self, result: RunResult) -> StepCost:
        """One mini-batch in steady state: its interval, and the energy and DRAM traffic
        of the whole simulated task graph shared over its mini-batches."""
        count = steady_state(result).mini_batches
        return StepCost.per(result, self.period(result), result.cycle_bounds(count), count)

    def training(
        self,
        ctx: TechniqueContext,
        base: RunResult,
        steps: Mapping[str, SimulatedStep],
        plan: TrainingPlan,
    ) -> Section:
        reports = {
            kind: {
                **pipeline_report(
                    self.name,
                    self.config.micro_batches,
                    self.scheduled(ctx, step.result),
                    ctx,
                    base,
                    step.result,
                ),
                **self.placement_report(step.result),
            }
            for kind, step in steps.items()
        }
        return schedule_section(self.name, reports, steps, inputs(self.config, self.defaults()))

    def scheduled(self, ctx: TechniqueContext, result: RunResult) -> Scheduled:
        """How this schedule placed and measured the simulated graph of ``result``."""
        placed = self.placed(result)
        return Scheduled(
            placed,
            self.period(result),
            self.period(result, measured=True),
            self.memory(ctx, placed.plan, result.graph),
        )

    def weight_versions(self, stage: int, plan: Plan) -> int:
        """Extra weight copies each processor of ``stage`` keeps for delayed backward
        passes: one per mini-batch of its own in flight, less the current one."""
        return -(-self.in_flight(stage, plan) // plan.copies(stage)) - 1

    def layer_delays(self, plan: Plan, graph: OpGraph) -> dict[str, tuple[int, int]]:
        """Per layer of a graph of this schedule: the (micro-)batches whose activations
        it keeps, and its extra weight versions."""
        out = {}
        for layer, stage in plan.stage_of.items():
            in_flight = (
                self.config.micro_batches
                if self.synchronous
                else -(-self.in_flight(stage, plan) // plan.copies(stage))
            )
            out[layer] = (in_flight, self.weight_versions(stage, plan))
        return out

    def placement_report(self, run: RunResult) -> dict[str, Any]:
        """What the report says of how a simulated graph of this schedule was placed."""
        return {}
