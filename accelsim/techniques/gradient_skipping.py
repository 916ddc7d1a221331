"""Convergence-aware gradient skipping (Oh et al., "Convergence-Aware Neural Network
Training", DAC 2020, DOI 10.1109/DAC18072.2020.9218518).

Parameter groups that have converged contribute little to the update, so their
weight-gradient computation is pruned stochastically.  A monitor keeps, per group,
an exponential moving average of ``|dw| / |w|`` (the norms of the group's update
and weights); its work runs on the vector unit at update time (see
:mod:`accelsim.lowering.optimizer`: ops per updated element in the update, and
one op per parameter over its groups' EMA state).  Each step every group draws
whether it is skipped, so a skipped group is re-checked whenever a later draw
computes it.  The simulator trains nothing: the cost of a step depends only on
how many groups are skipped, and the expected count ``p * groups`` (rounded
half up) is used.

Groups (``grouping``):

* ``filter``: a conv filter or an FC neuron's weight row (an output channel):
  rows of the ``dW`` GEMM;
* ``row``: one input channel's (or input feature's) weights across all output
  channels: columns of the ``dW`` GEMM;
* ``layer``: a whole layer, the layers earliest in the network first (they
  converge first) [M].

A skipped group drops its rows or columns of the ``dW`` GEMM, compacted (the
kept ones are packed, so the GEMM shrinks and its folds follow from its kept
size), its share of the update and of the optimizer-state traffic.  ``dX`` is
always computed, except where nothing needs it: when a layer and every layer
below it are fully skipped, the gradient chain below the first layer still
trained is dead and is removed, with the activations it would have stashed.
Biases, norm parameters, embeddings, recurrent and attention weights are not
grouped under ``filter`` and ``row`` (they train every step).

Over training, the skip probability of an epoch follows the monitored metric
``m``: ``p = clip((threshold - m) / threshold, 0, max_skip)`` [D, from the notes'
simulator model].  ``m`` per epoch comes from a CSV trace (``epoch,batch,
update_ratio``) or the synthetic ``floor + (1 - floor) * exp(-epoch /
decay_epochs)`` (in units of its epoch-0 value) [D].  A fixed ``skip_fraction``
replaces the schedule.  The trace-driven schedule simulates ``levels + 1`` skip
levels evenly spaced in ``[0, max_skip]`` as step kinds and splits each epoch
between the two levels around its ``p`` (the cost is taken as linear between
levels).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from accelsim.config.base import PositiveFloat, PositiveInt, Spec
from accelsim.config.hardware import WordBytesSpec
from accelsim.errors import ConfigError, Problem
from accelsim.graph import passes, queries
from accelsim.graph.ops import GemmOp, OpGraph, Parameter, ParamKind, Phase
from accelsim.lowering.optimizer import MONITOR_OPS_PER_ELEMENT, MONITOR_OPS_PER_GROUP
from accelsim.lowering.rules import rule_for
from accelsim.lowering.shapes import LayerInfo
from accelsim.report.result import RunResult
from accelsim.report.training import Source
from accelsim.techniques.base import (
    BASE,
    LoadContext,
    RewritePhase,
    Section,
    SimulatedStep,
    StepCost,
    Technique,
    TechniqueContext,
    TrainingPlan,
)
from accelsim.techniques.plan import read_trace, synthetic_decay
from accelsim.techniques.provenance import Origin, inputs

Fraction = Annotated[float, Field(ge=0, le=1)]

_OURS = "our model: the paper's abstract gives no rule or number"
_CURVE = "our synthetic curve floor + (1 - floor) exp(-epoch / decay_epochs)"
DEFAULTS: dict[str, Origin] = {
    "grouping": (
        Source.RECALLED,
        "groups of semantically related parameters [S]; filter groups, recalled",
    ),
    "skip_fraction": (Source.OURS, "none: the trace-driven schedule, our model"),
    "update_trace": (Source.OURS, "none: " + _CURVE),
    "threshold": (Source.OURS, _OURS),
    "max_skip": (Source.OURS, _OURS),
    "floor": (Source.OURS, _CURVE),
    "decay_epochs": (Source.OURS, _CURVE),
    "levels": (Source.OURS, "our choice: skip levels simulated between 0 and max_skip"),
}
"""Where each setting's default comes from (``../shared/techniques.md`` section 5)."""


class Grouping(str, Enum):
    FILTER = "filter"
    ROW = "row"
    LAYER = "layer"


class GradientSkippingConfig(Spec):
    """``techniques.gradient_skipping`` in a run file.

    ``skip_fraction`` set: every step skips that share of the groups.  Unset: the
    trace-driven schedule (``update_trace``, a CSV relative to the run file, or
    the synthetic curve ``floor``, ``decay_epochs``), with ``threshold`` and
    ``max_skip``, simulated at ``levels + 1`` skip levels.
    """

    grouping: Annotated[Grouping, Field(strict=False)] = Grouping.FILTER
    skip_fraction: Fraction | None = None
    update_trace: str | None = None
    threshold: PositiveFloat = 0.5
    max_skip: Fraction = 0.9
    floor: Fraction = 0.05
    decay_epochs: PositiveFloat = 8.0
    levels: PositiveInt = 4


@dataclasses.dataclass(frozen=True)
class _Kept:
    """What remains of one parameter's gradient: the shrunk ``dW`` GEMM (or None to
    keep it), its groups and how many are kept (0: skipped; -1: not grouped, kept
    unmonitored) and the updated elements."""

    gemm: GemmOp | None
    groups: int
    kept: int
    updated_elements: int


def skip_groups(
    graph: OpGraph,
    fraction: float,
    grouping: Grouping,
    infos: Mapping[str, LayerInfo],
    words: WordBytesSpec,
    keep_dx: bool = False,
) -> OpGraph:
    """``graph`` with ``fraction`` of its parameter groups' weight gradients skipped.

    Kept groups are monitored; the backward ops nothing trained needs any more
    are removed (but every ``dX`` op stays if ``keep_dx``).
    """
    kept = _plan(graph, fraction, grouping, infos)
    grad_ops = {p.grad_op for p in graph.parameters if kept[p.weight.name].kept}
    live = _live(graph, grad_ops, keep_dx)
    rewritten, ids = passes.rewrite(graph, words, drop=lambda op: op.op_id not in live)
    ops = list(rewritten.ops)
    parameters = []
    for old, new in zip(graph.parameters, rewritten.parameters, strict=True):
        k = kept[old.weight.name]
        if k.kept < 0:
            parameters.append(new)
            continue
        if not k.kept or new.grad_op < 0:
            parameters.append(dataclasses.replace(new, grad_op=-1))
            continue
        if k.gemm is not None:
            (i,) = ids[old.grad_op]
            ops[i] = dataclasses.replace(k.gemm, op_id=i, deps=ops[i].deps, sources=ops[i].sources)
        parameters.append(
            dataclasses.replace(
                new,
                updated_elements=k.updated_elements,
                monitor_groups=k.kept,
                monitor_owner=GradientSkipping.name,
            )
        )
    return dataclasses.replace(rewritten, ops=tuple(ops), parameters=tuple(parameters))


def _plan(
    graph: OpGraph, fraction: float, grouping: Grouping, infos: Mapping[str, LayerInfo]
) -> dict[str, _Kept]:
    trained = [p for p in graph.parameters if p.grad_op >= 0]
    plan = {p.weight.name: _Kept(None, 0, 0, 0) for p in graph.parameters}
    if grouping is Grouping.LAYER:
        layers = list(dict.fromkeys(p.layer for p in trained))
        skipped = set(layers[: skipped_count(fraction, len(layers))])
        for p in trained:
            keep = 0 if p.layer in skipped else 1
            plan[p.weight.name] = _Kept(None, 1, keep, p.update_elements * keep)
        return plan
    for p in trained:
        op = graph.ops[p.grad_op]
        width = _column_width(p, op, infos[p.layer]) if isinstance(op, GemmOp) else None
        if not isinstance(op, GemmOp) or width is None:
            plan[p.weight.name] = _Kept(None, 0, -1, p.update_elements)
            continue
        groups = op.m if grouping is Grouping.FILTER else op.n // width
        keep = groups - skipped_count(fraction, groups)
        gemm = None
        if 0 < keep < groups and grouping is Grouping.FILTER:
            gemm = dataclasses.replace(op, m=keep, a_elements=op.a_elements * keep // groups)
        elif 0 < keep < groups:
            b_elements = op.b_elements * keep // groups
            gemm = dataclasses.replace(op, n=keep * width, b_elements=b_elements)
        updated = p.update_elements * keep // groups
        plan[p.weight.name] = _Kept(gemm, groups * op.count, keep * op.count, updated)
    return plan


def skipped_count(fraction: float, groups: int) -> int:
    """How many of ``groups`` a step skips: the expected count, rounded half up."""
    return math.floor(fraction * groups + 0.5)


def _column_width(p: Parameter, op: GemmOp, info: LayerInfo) -> int | None:
    """Columns of the ``dW`` GEMM per input channel, from the layer's rule (None: not a
    grouped weight).  The groups are counted on the GEMM as it is now, which another
    technique may already have compacted (approximate dropout's kept inputs)."""
    if p.kind is not ParamKind.WEIGHT or op.c.name != p.gradient.name:
        return None
    width = rule_for(info.layer).dw_columns_per_input(info)
    return width if width is not None and op.n % width == 0 else None


def _live(graph: OpGraph, grad_ops: set[int], keep_dx: bool) -> set[int]:
    """Ops still needed: everything outside the backward pass, the kept gradients' ops
    (and the ``dX`` ops if ``keep_dx``) and every backward op whose output a needed
    op reads."""
    live: set[int] = set()
    for op in reversed(graph.ops):
        root = op.phase not in queries.BACKWARD or (keep_dx and op.phase is Phase.BWD_INPUT)
        if root or op.op_id in grad_ops or op.op_id in live:
            live.add(op.op_id)
            live.update(d for group in op.sources for d in group)
            live.update(op.after)
    return live


class GradientSkipping(Technique):
    """Convergence-aware gradient skipping as a plug-in (a PRUNE rewrite)."""

    name = "gradient_skipping"
    Config = GradientSkippingConfig
    rewrite_phase = RewritePhase.PRUNE

    @property
    def settings(self) -> GradientSkippingConfig:
        assert isinstance(self.config, GradientSkippingConfig)
        return self.config

    def defaults(self) -> dict[str, Origin]:
        return DEFAULTS

    def levels(self) -> list[float]:
        """The skip fraction of each step kind of the trace-driven schedule."""
        cfg = self.settings
        return [cfg.max_skip * j / cfg.levels for j in range(cfg.levels + 1)]

    def step_kinds(self) -> Sequence[str]:
        if self.settings.skip_fraction is not None:
            return ()
        return [f"skip_{j}" for j in range(self.settings.levels + 1)]

    def validate(self, load: LoadContext) -> list[Problem]:
        cfg = self.settings
        problems = []
        if cfg.skip_fraction is not None and cfg.update_trace is not None:
            problems.append(
                Problem(
                    self.source,
                    self.where("update_trace"),
                    "a fixed skip_fraction replaces the trace-driven schedule; set one",
                    cfg.update_trace,
                )
            )
        if cfg.skip_fraction is None:
            try:
                self.metric(load.run_file, load.run.training.epochs)
            except ConfigError as exc:
                problems += exc.problems
        return problems

    def packed_weight_gradients(self, load: LoadContext) -> frozenset[str]:
        """``filter`` and ``row`` grouping pack the kept rows or columns of every grouped
        weight's gradient GEMM (``layer`` grouping drops whole GEMMs)."""
        cfg = self.settings
        if cfg.grouping is Grouping.LAYER or cfg.skip_fraction == 0:
            return frozenset()
        return frozenset(
            info.layer.name
            for info in load.infos
            if rule_for(info.layer).has_params
            and rule_for(info.layer).dw_columns_per_input(info) is not None
        )

    def fraction(self, kind: str) -> float:
        """The share of groups a step of ``kind`` skips."""
        cfg = self.settings
        if cfg.skip_fraction is not None:
            return cfg.skip_fraction
        if kind.startswith("skip_"):
            return self.levels()[int(kind.removeprefix("skip_"))]
        return 0.0

    def rewrite_graph(self, graph: OpGraph, kind: str, ctx: TechniqueContext) -> OpGraph:
        fraction = self.fraction(kind)
        if self.settings.skip_fraction == 0:
            return graph
        infos = {info.layer.name: info for info in ctx.infos}
        return skip_groups(graph, fraction, self.settings.grouping, infos, ctx.hardware.word_bytes)

    def metric(self, run_file: Path, epochs: int) -> list[float]:
        """The monitored ``|dw| / |w|`` per epoch: the trace's, or the synthetic curve."""
        cfg = self.settings
        if cfg.update_trace is None:
            return synthetic_decay(cfg.floor, cfg.decay_epochs, epochs)
        return read_trace(
            run_file.parent / cfg.update_trace,
            "update_ratio",
            epochs,
            self.source,
            self.where("update_trace"),
        )

    def skip_by_epoch(self, run_file: Path, epochs: int) -> list[float]:
        """The skip probability of each epoch."""
        cfg = self.settings
        if cfg.skip_fraction is not None:
            return [cfg.skip_fraction] * epochs
        tau = cfg.threshold
        return [min(cfg.max_skip, max(0.0, (tau - m) / tau)) for m in self.metric(run_file, epochs)]

    def shares(self, skip: Sequence[float]) -> list[dict[str, float]]:
        """Per epoch, the shares of the two skip levels (step kinds) around its skip
        probability, the cost taken as linear between levels."""
        levels = self.levels()
        step = levels[1] - levels[0] if len(levels) > 1 else 1.0
        out = []
        for p in skip:
            j = min(int(p / step) if step else 0, len(levels) - 2)
            upper = (p - levels[j]) / step if step else 0.0
            out.append({f"skip_{j}": 1 - upper, f"skip_{j + 1}": upper})
        return out

    def kind_shares(self, ctx: TechniqueContext) -> list[dict[str, float]]:
        """Per epoch, the two skip levels around its skip probability (the trace-driven
        schedule, whose levels are the step kinds)."""
        return self.shares(self.skip_by_epoch(ctx.run_file, ctx.run.training.epochs))

    def bounds(
        self, ctx: TechniqueContext, kinds: Sequence[str], keep_dx: bool
    ) -> dict[str, StepCost]:
        """Per step kind, the composed step with every weight gradient and update
        skipped (and so the whole ``dX`` chain, unless ``keep_dx``), the other
        techniques' rewrites, placement and costs as in the run.  When this technique
        defines the kinds they differ only in what it skips, so the first kind's bound
        serves every kind."""
        infos = {info.layer.name: info for info in ctx.infos}
        words = ctx.hardware.word_bytes

        def everything(graph: OpGraph) -> OpGraph:
            return skip_groups(graph, 1.0, Grouping.LAYER, infos, words, keep_dx)

        own = bool(self.step_kinds())
        costs: dict[str, StepCost] = {}
        for kind in kinds:
            costs[kind] = (
                costs[kinds[0]] if own and costs else ctx.cost_of(kind, {self.name: everything})
            )
        return costs

    def training(
        self,
        ctx: TechniqueContext,
        base: RunResult,
        steps: Mapping[str, SimulatedStep],
        plan: TrainingPlan,
    ) -> Section:
        cfg = self.settings
        own = bool(self.step_kinds())
        skip = self.skip_by_epoch(ctx.run_file, plan.epochs)
        details: dict[str, Any] = {
            "grouping": cfg.grouping.value,
            "schedule": "fixed" if cfg.skip_fraction is not None else "trace",
            "skip_fraction": sum(skip) / plan.epochs,
            "by_kind": {
                kind: {"skip_fraction": self.fraction(kind), **gemm_macs(s.result)}
                for kind, s in steps.items()
            },
            "base_macs": gemm_macs(base),
        }
        if own:
            details["skip_fraction_by_epoch"] = skip
            details["cycles_by_epoch"] = [
                plan.batches_per_epoch * sum(share * steps[k].cost.cycles for k, share in e.items())
                for e in plan.shares
            ]
        base_cost = StepCost.of(base)
        lines = [
            ("skip share", f"{details['skip_fraction']:.3f} of the groups ({cfg.grouping.value})")
        ]
        for key, keep_dx, what in (
            (
                "upper_bound",
                False,
                "every weight gradient and update skipped, so no dX is needed either: the"
                " forward pass and the loss (the most any grouping can give)",
            ),
            (
                "upper_bound_dx_kept",
                True,
                "every weight gradient and update skipped, dX still computed (the most"
                " filter and row grouping give while every layer keeps a group)",
            ),
        ):
            bound = self.bounds(ctx, list(steps), keep_dx)
            cycles = plan.totals({BASE: base_cost, **bound})["cycles"]
            speedup = cycles.baseline / cycles.technique
            details[key] = {
                "note": what + "; with the run's other techniques and placement",
                "steps": {kind: dataclasses.asdict(cost) for kind, cost in bound.items()},
                "speedup": speedup,
            }
            details[f"{key}_speedup"] = speedup
        lines += [
            ("nothing trains", f"{details['upper_bound_speedup']:.3f} x at most"),
            ("dX kept", f"{details['upper_bound_dx_kept_speedup']:.3f} x at most"),
        ]
        return Section(
            self.name,
            details,
            tuple(lines),
            inputs=inputs(
                self.settings,
                self.defaults(),
                traces=("update_trace",),
                constants={
                    "monitor_ops_per_element": (MONITOR_OPS_PER_ELEMENT, (Source.OURS, _OURS)),
                    "monitor_ops_per_group": (MONITOR_OPS_PER_GROUP, (Source.OURS, _OURS)),
                },
            ),
        )


def gemm_macs(result: RunResult) -> dict[str, int]:
    """MACs of a simulated step by phase (dW, dX), and the monitor's vector ops."""
    costs = result.trace.costs
    by: dict[str, int] = {"dw_macs": 0, "dx_macs": 0, "monitor_vector_ops": 0}
    for op in result.graph.ops:
        if op.phase is Phase.BWD_WEIGHT:
            by["dw_macs"] += int(costs.macs[op.op_id])
        elif op.phase is Phase.BWD_INPUT:
            by["dx_macs"] += int(costs.macs[op.op_id])
    for p in result.graph.parameters:
        if p.monitor_groups and p.grad_op >= 0:
            by["monitor_vector_ops"] += MONITOR_OPS_PER_ELEMENT * p.update_elements
    monitors = [op for op in result.graph.ops if op.owner == GradientSkipping.name]
    by["monitor_vector_ops"] += sum(int(costs.vector_ops[op.op_id]) for op in monitors)
    return by
