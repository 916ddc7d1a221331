"""Pipeline-parallel training schedules: the common machinery, GPipe and PipeDream.

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
* **LayerPipe** (:mod:`accelsim.techniques.layerpipe`) builds on :class:`Schedule`
  with its own placements.

Weight versions in time: the forward of mini-batch ``j`` on stage ``s`` uses the
weights updated after mini-batch ``j - (S - s)`` (PipeDream, LayerPipe) or
``j - 1`` (GPipe).  With one stage and one micro-batch every schedule is the
baseline step, repeated.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar

from pydantic import Field

from accelsim.config.base import PositiveInt, Spec
from accelsim.config.dram import GIB_BYTES
from accelsim.config.run import OnCapacity
from accelsim.errors import ConfigError, Problem, SimulationError
from accelsim.graph import passes
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import OpGraph, Parameter, Phase, Tag
from accelsim.mapping import placement
from accelsim.mapping.placement import StepGraph
from accelsim.report.result import RunResult
from accelsim.report.training import Source
from accelsim.techniques.base import (
    LoadContext,
    Section,
    SimulatedStep,
    StepCost,
    Technique,
    TechniqueContext,
    TrainingPlan,
)
from accelsim.techniques.pipeline_graph import (
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
from accelsim.techniques.pipeline_memory import ProcessorMemory, overflow, processor_memory
from accelsim.techniques.pipeline_plan import (
    Plan,
    partition,
    replicated_partition,
    ring_allreduce_cycles,
)
from accelsim.techniques.pipeline_report import Placed, pipeline_report, steady_state
from accelsim.techniques.provenance import Origin, inputs
from accelsim.timing.engines import followed_by
from accelsim.units import bytes_to_mb

Fraction = Annotated[float, Field(ge=0, lt=1)]


INTERNAL_DETAILS = (
    "mini_batches_simulated",
    "steady_window_cycles",
    "balanced_on",
    "measured_cycles_per_minibatch",
    "binding_bound_cycles",
    "single_processor_cycles",
)
"""A pipeline report's details on how the period was measured (the mini-batches
simulated, the window measured, the bound's and the baseline's cycles that
``speedup_bound`` and ``base_step_cycles`` already give): in ``summary.json``, not
in CSV rows."""

# A schedule simulates graphs of M and 2M mini-batches, each a copy of the step
# graph; events and graph size grow linearly in M (tests/test_compiled.py), so the cap
# bounds memory the way ``processors``' 1,024 does (a copy of the step per processor).
MAX_MINI_BATCHES = 1024


class PipelineConfig(Spec):
    """``techniques.<schedule>``: stages default to the hardware's processors;
    ``mini_batches`` to ``3 S + 2`` for ``S`` stages (at least ``2 S + 1``, so the
    pipeline is full for at least two completions)."""

    stages: PositiveInt | None = Field(
        default=None, description="Pipeline stages; null: the hardware's processors."
    )
    micro_batches: PositiveInt = Field(
        default=1, description="Micro-batches each mini-batch is split into."
    )
    # Each mini-batch is a copy of the step graph in the simulated schedule.
    mini_batches: Annotated[int, Field(gt=0, le=MAX_MINI_BATCHES)] | None = Field(
        default=None,
        description="Mini-batches simulated to measure the steady period; null: 3 S + 2 for"
        " S stages.",
    )


class PipeDreamConfig(PipelineConfig):
    """PipeDream: ``replicate`` lets its partitioner run a stage on several processors
    (data-parallel replicas that take turns over mini-batches and all-reduce their
    weight gradients), as PipeDream's optimizer does."""

    replicate: bool = Field(
        default=False,
        description="Let the partitioner run a stage on several processors, as data-parallel"
        " replicas taking turns over mini-batches.",
    )


class GPipeConfig(PipelineConfig):
    """GPipe: all forwards of a mini-batch's micro-batches, then all backwards, then
    the update (synchronous)."""

    micro_batches: PositiveInt = Field(
        default=4, description="Micro-batches each mini-batch is split into."
    )


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
        self._placed: dict[int, tuple[object, Placed]] = {}

    @property
    def settings(self) -> PipelineConfig:
        assert isinstance(self.config, PipelineConfig)
        return self.config

    def accumulated_micro_batches(self) -> int:
        return self.settings.micro_batches

    def places(self) -> bool:
        return True

    def mini_batches(self, stages: int) -> int:
        """Mini-batches to simulate on ``stages`` stages: ``3 S + 2`` by default, at most
        :data:`MAX_MINI_BATCHES` (``validate`` keeps ``2 S + 1`` within it)."""
        return self.settings.mini_batches or min(3 * stages + 2, MAX_MINI_BATCHES)

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
        stages = min(self.settings.stages or load.hardware.processors, len(load.infos))
        return stages, 2 * stages + 1

    def deepest(self) -> int:
        """The most stages whose fill fits in :data:`MAX_MINI_BATCHES` mini-batches."""
        return (MAX_MINI_BATCHES - 1) // 2

    def validate(self, load: LoadContext) -> list[Problem]:
        cfg, processors, batch = self.settings, load.hardware.processors, load.run.batch_size
        problems = []
        stages, needed = self.depth(load)
        if cfg.mini_batches is not None and cfg.mini_batches < needed:
            problems.append(
                Problem(
                    self.source,
                    self.where("mini_batches"),
                    f"too few to fill {stages} stages and measure a steady state"
                    f" (needs >= {needed})",
                    cfg.mini_batches,
                )
            )
        if cfg.mini_batches is None and needed > MAX_MINI_BATCHES:
            problems.append(
                Problem(
                    self.source,
                    self.where("stages"),
                    f"{stages} stages need {needed} mini-batches to fill and measure a steady"
                    f" state, more than the limit of {MAX_MINI_BATCHES:,}; set stages to at"
                    f" most {self.deepest()}",
                    stages,
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
        stages = min(self.settings.stages or ctx.hardware.processors, len(names))
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
                channel's) footprint exceeds ``hardware.dram.capacity_gib``; blamed on
                the run file, which puts the schedule on that hardware.
        """
        problem = overflow(self.memory(ctx, placed.plan, graph), ctx.hardware)
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
        return overflow(self.memory(ctx, plan, graph), ctx.hardware) is None

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
        cfg = self.settings
        one = step(ctx.run.batch_size // cfg.micro_batches)
        relabel = passes.Relabel(one.ops, one.parameters)
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
        them.  Each unit runs its ready ops by schedule position, then program
        order.
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
            backward = op.phase not in (Phase.FWD, Phase.AUX)
            entry = op.phase is Phase.FWD and not any(
                d >= start and ops[d].phase is Phase.FWD and processor[d] == proc for d in op.deps
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
            kind: pipeline_report(self, self.placed(step.result), ctx, base, step.result)
            for kind, step in steps.items()
        }
        lines = []
        for kind, report in reports.items():
            label = "" if len(reports) == 1 else f" ({kind})"
            stash = ", ".join(
                f"p{row['processor']} "
                f"{bytes_to_mb(row['activation_stash_bytes'] + row['weight_stash_bytes']):,.1f}"
                for row in report["processors"]
            )
            fullest = max(report["memory"]["channels"], key=lambda c: c["footprint_bytes"])
            lines += [
                (
                    f"steady period{label}",
                    f"{report['steady_cycles_per_minibatch']:,.0f} cycles per mini-batch on"
                    f" {report['stages']} stages"
                    + (" (clamped to its bound)" if report["clamped"] else ""),
                ),
                (f"stash per processor{label}", f"{stash} MB (activations and weight versions)"),
                (
                    f"DRAM footprint{label}",
                    f"{fullest['footprint_bytes'] / GIB_BYTES:,.3f} GiB in the fullest channel"
                    f" of {report['memory']['capacity_bytes'] / GIB_BYTES:,.3f} GiB"
                    + ("" if report["fits"] else ": does NOT fit"),
                ),
            ]
        warnings = tuple(
            w if len(reports) == 1 else f"{kind}: {w}"
            for kind, report in reports.items()
            for w in report["warnings"]
        )
        if self.name in steps:
            shared = ("technique", "steps", "speedup", "speedup_bound", "binding_bound", "warnings")
            details = {k: v for k, v in reports[self.name].items() if k not in shared}
        else:
            details = {
                "step_kinds": {
                    kind: {k: v for k, v in r.items() if k not in ("technique", "warnings")}
                    for kind, r in reports.items()
                },
                "clamped": any(r["clamped"] for r in reports.values()),
                "fits": all(r["fits"] for r in reports.values()),
            }
        return Section(
            self.name,
            details,
            tuple(lines),
            warnings=warnings,
            inputs=inputs(self.settings, self.defaults()),
            internal=INTERNAL_DETAILS,
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

    def defaults(self) -> dict[str, Origin]:
        return {
            **super().defaults(),
            "micro_batches": (
                Source.OURS,
                "our choice: 4 micro-batches (GPipe splits each mini-batch into several)",
            ),
        }

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

    def defaults(self) -> dict[str, Origin]:
        return {
            **super().defaults(),
            "replicate": (
                Source.OURS,
                "our choice: off (PipeDream's partitioner may replicate stages, recalled)",
            ),
        }

    def plan(self, ctx: TechniqueContext, single: RunResult) -> Plan:
        """With ``replicate``, PipeDream's partitioner: stages and their replicas chosen
        together, a replicated stage costing its layers' time over its replicas plus
        the ring all-reduce of their gradients (both DRAM passes and
        ``2 (r - 1)`` link steps of ``1/r`` of the bytes, with latencies)."""
        assert isinstance(self.config, PipeDreamConfig)
        if not self.config.replicate:
            return super().plan(ctx, single)
        cached = self._plans.get(id(single))
        if cached is not None and cached[0] is single:
            return cached[1]
        names = [info.layer.name for info in ctx.infos]
        busy = single.layer_busy_cycles()
        costs = [busy.get(n, 0) for n in names]
        gradients: dict[str, int] = {}
        for param in single.graph.parameters:
            gradients[param.layer] = gradients.get(param.layer, 0) + param.gradient.bytes
        hw = ctx.hardware
        link, dram = single.machine.links[0], single.machine.dram[0]
        stages, replicas = replicated_partition(
            costs,
            [gradients.get(n, 0) for n in names],
            self.settings.stages or hw.processors,
            lambda size, copies: ring_allreduce_cycles(size, copies, link, dram),
        )
        plan = Plan(len(replicas), dict(zip(names, stages, strict=True)), costs, tuple(replicas))
        self._plans[id(single)] = (single, plan)
        return plan
