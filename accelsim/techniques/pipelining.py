"""Pipeline-parallel training schedules: GPipe, PipeDream and LayerPipe.

Each is a plug-in that owns the ``assign`` hook: it partitions the layers
into contiguous stages, one per processor, lowers several mini-batches
(each of ``micro_batches`` micro-batches) with every op placed on its layer's
stage, orders the work on each processor, and lets the event engine simulate
the whole task graph; activations and gradients that cross stages travel over
the interconnect.  The report takes the steady state from the simulation.

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

from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import Field

from accelsim.config.base import PositiveInt, Spec
from accelsim.errors import ConfigError
from accelsim.report.result import RunResult
from accelsim.techniques.base import Technique, TechniqueContext
from accelsim.timing.costs import UNIT_ARRAY
from accelsim.workload.lowering import GraphBuilder, StepLowering, writes_of
from accelsim.graph.ops import GemmOp, OpGraph, Phase, TensorKind, VectorOp

Fraction = Annotated[float, Field(ge=0, lt=1)]
# Priorities: (schedule position) * SLOT + program order keeps each unit's order.
SLOT = 1 << 32


class PipelineConfig(Spec):
    """``techniques.<schedule>``: stages default to the hardware's processors."""

    stages: PositiveInt | None = None
    micro_batches: PositiveInt = 1
    mini_batches: PositiveInt = 6


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


class _Schedule(Technique):
    """Common machinery of the three schedules."""

    one_task_backward = True
    conflicts = frozenset({"gpipe", "pipedream", "layerpipe", "gradient_prediction"})

    @property
    def settings(self) -> PipelineConfig:
        assert isinstance(self.config, PipelineConfig)
        return self.config

    def stages(self, ctx: TechniqueContext) -> int:
        stages = self.settings.stages or ctx.hardware.processors
        if stages > ctx.hardware.processors:
            raise ConfigError.single(
                self.source,
                f"techniques.{self.name}.stages",
                f"more stages than the hardware's {ctx.hardware.processors} processors",
                stages,
            )
        return stages

    def micro_batch(self, ctx: TechniqueContext) -> int:
        m = self.settings.micro_batches
        if ctx.run.batch_size % m:
            raise ConfigError.single(
                self.source,
                f"techniques.{self.name}.micro_batches",
                f"must divide the batch size {ctx.run.batch_size}",
                m,
            )
        return ctx.run.batch_size // m

    def in_flight(self, stage: int, stages: int) -> int:
        """Mini-batches between a stage's forward and the update whose weights it uses."""
        return stages - stage

    def position(self, stage: int, stages: int, j: int, backward: bool) -> int:
        """Place of mini-batch ``j``'s forward or backward in the stage's 1F1B order."""
        warm = self.in_flight(stage, stages)
        if backward:
            return warm + 2 * j
        return j if j < warm else warm + 2 * (j - warm) + 1

    def split(
        self,
        stage_of: Mapping[str, int],
        first_of: Mapping[int, str],
        base: RunResult,
        costs: Sequence[int],
    ) -> Any:
        """The builder's GEMM-splitting rule (None: no splitting)."""
        return None

    def plan(self, ctx: TechniqueContext, base: RunResult) -> tuple[int, dict[str, int], list[int]]:
        """Stages, the stage of every layer, and the layer costs it was balanced on.

        A layer's cost is the time its ops kept the single-processor baseline's
        units busy (forward, backward and update).
        """
        names = [info.layer.name for info in ctx.infos]
        stages = min(self.stages(ctx), len(names))  # a stage needs a layer
        busy = {row["layer"]: row for row in base.layer_rows()}
        keys = ("fwd_busy_cycles", "bwd_busy_cycles", "update_busy_cycles")
        costs = [sum(int(busy[n][k]) for k in keys) if n in busy else 0 for n in names]
        return stages, dict(zip(names, partition(costs, stages), strict=True)), costs

    def assign(self, ctx: TechniqueContext, base: RunResult) -> OpGraph:
        stages, stage_of, costs = self.plan(ctx, base)
        first_of = {s: next(n for n in stage_of if stage_of[n] == s) for s in range(stages)}
        rule = self.split(stage_of, first_of, base, costs)
        return self.build(ctx, stage_of, rule, defer=not self.one_task_backward)

    def build(
        self, ctx: TechniqueContext, stage_of: Mapping[str, int], rule: Any, defer: bool
    ) -> OpGraph:
        """The graph of ``mini_batches`` pipelined mini-batches on the stages.

        Args:
            stage_of: The stage of every layer.
            rule: The builder's GEMM-splitting rule, or None.
            defer: Whether dW yields to dX on stages that send dX upstream.
        """
        cfg = self.settings
        micro = self.micro_batch(ctx)
        stages = max(stage_of.values()) + 1
        builder = GraphBuilder(ctx.hardware.word_bytes)
        builder.placement = lambda layer, phase: stage_of[layer]
        builder.split = rule
        priority: list[int] = []
        updates: dict[tuple[int, int], list[int]] = {}
        optimizer, run = ctx.run.optimizer.kind, ctx.run
        for j in range(cfg.mini_batches):
            steps: list[StepLowering] = []
            start = len(builder.ops)
            for i in range(cfg.micro_batches):
                steps.append(
                    builder.lower_step(
                        ctx.infos, ctx.workload, micro, run.lowering.strided_dx, f"b{j}m{i}/"
                    )
                )
            ready = self._accumulate(builder, steps)
            backward_done = _stage_sinks(builder, start)
            for p, step_param in enumerate(steps[0].parameters):
                stage = stage_of[step_param.layer]
                builder.current_processor = stage
                (op,) = builder.add_updates(
                    [step_param],
                    optimizer,
                    after=backward_done.get(stage, ()),
                    gradient_ready={step_param.weight.name: ready[p]},
                )
                updates.setdefault((j, stage), []).append(op)
            self._order(builder, start, j, stages, updates, priority, defer)
        return builder.build(priority=priority)

    def _accumulate(self, builder: GraphBuilder, steps: list[StepLowering]) -> list[int]:
        """Sum each parameter's gradient over the micro-batches; the op that finishes it."""
        if len(steps) == 1:
            return [p.grad_op for p in steps[0].parameters]
        ready = []
        for p, first in enumerate(steps[0].parameters):
            parts = [s.parameters[p].gradient for s in steps]
            total = builder.tensor(
                f"{first.weight.name}.grad_sum", TensorKind.GRADIENT, first.gradient.elements
            )
            ready.append(
                builder.vector(
                    f"{first.weight.name}.grad_sum",
                    first.layer,
                    Phase.BWD_WEIGHT,
                    total.elements,
                    len(parts) - 1,
                    parts,
                    [total],
                )
            )
        return ready

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
            priority.append((2 * rank + int(later)) * SLOT + op_id)

    def training(
        self, ctx: TechniqueContext, base: RunResult, steps: Mapping[str, RunResult]
    ) -> dict[str, Any]:
        return pipeline_report(self, ctx, base, steps[self.name])

    def weight_versions(self, stage: int, stages: int) -> int:
        """Extra weight copies a layer on ``stage`` keeps for delayed backward passes."""
        return self.in_flight(stage, stages) - 1


class GPipe(_Schedule):
    """GPipe: micro-batched, all forwards then all backwards, synchronous updates."""

    name = "gpipe"
    Config = GPipeConfig

    def in_flight(self, stage: int, stages: int) -> int:
        return 1

    def position(self, stage: int, stages: int, j: int, backward: bool) -> int:
        return 2 * j + int(backward)

    def weight_versions(self, stage: int, stages: int) -> int:
        return 0


class PipeDream(_Schedule):
    """PipeDream: 1F1B with weight stashing; a layer's backward is one task."""

    name = "pipedream"
    Config = PipelineConfig


class LayerPipe(_Schedule):
    """LayerPipe: dW off the critical path, dX split across consecutive stages."""

    name = "layerpipe"
    Config = LayerPipeConfig
    one_task_backward = False

    @property
    def layerpipe(self) -> LayerPipeConfig:
        assert isinstance(self.config, LayerPipeConfig)
        return self.config

    def split(
        self,
        stage_of: Mapping[str, int],
        first_of: Mapping[int, str],
        base: RunResult,
        costs: Sequence[int],
    ) -> Any:
        stage_cost = [0] * (max(stage_of.values()) + 1)
        for name, cost in zip(stage_of, costs, strict=True):
            stage_cost[stage_of[name]] += cost
        dx_cycles: dict[str, int] = {}
        for op in base.graph.ops:
            if op.phase is Phase.BWD_INPUT and isinstance(op, GemmOp):
                span = int(base.trace.end_cycle[op.op_id] - base.trace.start_cycle[op.op_id])
                dx_cycles[op.layer] = dx_cycles.get(op.layer, 0) + span
        shares: dict[str, tuple[float, int]] = {}
        for stage, name in first_of.items():
            if stage == 0 or not dx_cycles.get(name):
                continue
            if self.layerpipe.split == "balance":
                gap = stage_cost[stage] - stage_cost[stage - 1]
                share = min(1.0, max(0.0, gap / (2 * dx_cycles[name])))
            else:
                share = float(self.layerpipe.split)
            if share > 0:
                shares[name] = (share, stage - 1)

        def rule(layer: str, phase: Phase) -> tuple[float, int] | None:
            return shares.get(layer) if phase is Phase.BWD_INPUT else None

        return rule

    def assign(self, ctx: TechniqueContext, base: RunResult) -> OpGraph:
        """The fastest of LayerPipe's options on the balanced partition.

        Candidates: the inter-layer split with dW deferred, dW deferred alone,
        and the plain 1F1B order (PipeDream's); each is simulated and the one
        with the shortest steady state is kept, so LayerPipe is never slower than
        PipeDream on the same partition.
        """
        stages, stage_of, costs = self.plan(ctx, base)
        first_of = {s: next(n for n in stage_of if stage_of[n] == s) for s in range(stages)}
        rule = self.split(stage_of, first_of, base, costs)
        candidates = (
            [(rule, True), (None, True), (None, False)] if rule else [(None, True), (None, False)]
        )
        best: tuple[float, OpGraph] | None = None
        for split_rule, defer in candidates:
            graph = self.build(ctx, stage_of, split_rule, defer)
            steady = steady_state(ctx.simulate(graph), self.settings.mini_batches)[0]
            if best is None or steady < best[0]:
                best = (steady, graph)
        assert best is not None
        return best[1]

    def weight_versions(self, stage: int, stages: int) -> int:
        downstream = stages - 1 - stage  # S(l); delay 2 S(l) half-steps = S(l) versions
        if self.layerpipe.weights is WeightVersions.EMA:
            return min(1, downstream)
        return downstream


def _stage_sinks(builder: GraphBuilder, start: int) -> dict[int, tuple[int, ...]]:
    """Per processor, the backward ops since ``start`` that no later one there waits for.

    Updating a stage's weights after these is updating after its whole backward
    pass, as the baseline step does.
    """
    backward = [
        i
        for i in range(start, len(builder.ops))
        if builder.ops[i].phase in (Phase.BWD_INPUT, Phase.BWD_WEIGHT)
    ]
    used = {d for i in backward for d in builder.ops[i].deps}
    sinks: dict[int, list[int]] = {}
    for i in backward:
        if i not in used:
            sinks.setdefault(builder.processor[i], []).append(i)
    return {stage: tuple(ids) for stage, ids in sinks.items()}


def _mini_batch(tensor_name: str) -> int:
    """Mini-batch ``j`` of a tensor named with the prefix ``b{j}m{i}/``."""
    return int(tensor_name.partition("/")[0].removeprefix("b").partition("m")[0])


def _entered(run: RunResult, j: int) -> int:
    """When mini-batch ``j``'s first forward GEMM started (its outputs carry its prefix)."""
    return min(
        int(run.trace.start_cycle[op.op_id])
        for op in run.graph.ops
        if isinstance(op, GemmOp) and op.phase is Phase.FWD and op.c.name.startswith(f"b{j}m")
    )


def steady_state(run: RunResult, mini_batches: int) -> tuple[float, list[int], tuple[int, int]]:
    """Mean interval between mini-batch completions over the second half of the run.

    A mini-batch completes when its last update ends.  Returns the steady-state
    cycles per mini-batch, every completion time, and the measured window.
    """
    done = [0] * mini_batches
    for op in run.graph.ops:
        if op.phase is Phase.UPDATE and isinstance(op, VectorOp):
            j = _mini_batch(op.writes[0].tensor.name)
            done[j] = max(done[j], int(run.trace.end_cycle[op.op_id]))
    if mini_batches == 1:
        return float(done[0]), done, (0, done[0])
    first = (mini_batches - 1) // 2
    return (done[-1] - done[first]) / (mini_batches - 1 - first), done, (done[first], done[-1])


def pipeline_report(
    schedule: _Schedule, ctx: TechniqueContext, base: RunResult, run: RunResult
) -> dict[str, Any]:
    """Steady state, per-processor use and memory of a simulated pipeline schedule.

    The steady state is the mean interval between mini-batch completions (end of
    their last update) over the second half of the simulated mini-batches; the
    warm-up is what the first mini-batch took beyond one steady interval, the
    flush what the last one spent in the pipeline beyond it.  Busy, stall and
    idle time and utilization are per processor's array over the steady window.
    """
    cfg = schedule.settings
    stages, stage_of, costs = schedule.plan(ctx, base)
    trace, c, graph = run.trace, run.trace.costs, run.graph
    steady, done, (lo, hi) = steady_state(run, cfg.mini_batches)
    span = max(hi - lo, 1)
    hw = ctx.hardware
    stash = [0] * stages
    weight_bytes = [0] * stages
    for op in graph.ops:
        if op.phase is Phase.FWD:
            for access in writes_of(op):
                name = access.tensor.name
                if name in graph.stashed and name.startswith("b0m0/"):
                    stash[stage_of[op.layer]] += access.tensor.bytes
    for parameter in graph.parameters:
        weight_bytes[stage_of[parameter.layer]] += parameter.weight.bytes
    processors = []
    for p in range(stages):
        mine = (trace.processor == p) & (c.unit == UNIT_ARRAY)
        starts, ends = trace.start_cycle[mine], trace.end_cycle[mine]
        inside = (starts >= lo) & (ends <= hi)
        busy = int((ends.clip(lo, hi) - starts.clip(lo, hi)).sum())
        in_flight = (
            cfg.micro_batches if isinstance(schedule, GPipe) else schedule.in_flight(p, stages)
        )
        versions = schedule.weight_versions(p, stages)
        processors.append(
            {
                "processor": p,
                "busy_cycles": busy,
                "stall_cycles": int(trace.stall_cycles[mine][inside].sum()),
                "idle_cycles": max(span - busy, 0),
                "utilization": int(c.macs[mine][inside].sum())
                / (hw.array.rows * hw.array.cols * span),
                "activation_stash_bytes": stash[p] * in_flight,
                "weight_versions": versions,
                "weight_stash_bytes": weight_bytes[p] * versions,
            }
        )
    names = list(stage_of)
    partition_rows = []
    for s in range(stages):
        layers = [n for n in names if stage_of[n] == s]
        partition_rows.append(
            {
                "stage": s,
                "first_layer": layers[0],
                "last_layer": layers[-1],
                "layers": len(layers),
                "cost_cycles": sum(costs[names.index(n)] for n in layers),
            }
        )
    return {
        "technique": schedule.name,
        "stages": stages,
        "micro_batches": cfg.micro_batches,
        "mini_batches_simulated": cfg.mini_batches,
        "partition": partition_rows,
        "steady_cycles_per_minibatch": steady,
        "warmup_cycles": max(done[0] - steady, 0.0),
        "flush_cycles": max(done[-1] - _entered(run, cfg.mini_batches - 1) - steady, 0.0),
        "interconnect_bytes_per_minibatch": int(c.interconnect_bytes.sum()) / cfg.mini_batches,
        "single_processor_cycles": base.total_cycles,
        "speedup": base.total_cycles / steady,
        "steps": {
            "base": {"cycles": base.total_cycles},
            schedule.name: {"cycles": steady},
        },
        "processors": processors,
    }
