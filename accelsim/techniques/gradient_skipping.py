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

Over training, per-layer and per-group decisions (:mod:`accelsim.techniques.skip_schedule`):
a group skips while its monitored average is below ``threshold``, every
``recheck_iterations``-th step re-checks every group, and the statistics come
from a per-layer trace (CSV ``layer,epoch,statistic``) or our synthetic curve.  A
fixed ``skip_fraction`` replaces the schedule: every step skips that share of
every grouped weight's groups (``layer``: of the layers, earliest first).
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
from accelsim.graph import passes
from accelsim.graph.ops import GemmOp, OpGraph, Parameter, ParamKind, Phase, Stage, replaced
from accelsim.lowering.optimizer import MONITOR_OPS_PER_ELEMENT, MONITOR_OPS_PER_GROUP
from accelsim.lowering.rules import rule_for
from accelsim.lowering.shapes import LayerInfo
from accelsim.lowering.step import lower
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
from accelsim.techniques.provenance import Origin, inputs
from accelsim.techniques.skip_schedule import (
    SkipSchedule,
    read_statistics,
    schedule,
    synthetic_statistics,
)

Fraction = Annotated[float, Field(ge=0, le=1)]

_OURS = "our model: the paper's abstract gives no rule or number"
_CURVE = "our synthetic curve: floor + (1 - floor) exp(-epoch / (decay_epochs (0.5 + depth)))"
DEFAULTS: dict[str, Origin] = {
    "grouping": (
        Source.RECALLED,
        "groups of semantically related parameters [S]; filter groups, recalled",
    ),
    "skip_fraction": (Source.OURS, "none: the monitor decides, our model"),
    "update_trace": (Source.OURS, "none: " + _CURVE),
    "threshold": (Source.OURS, _OURS),
    "group_spread": (Source.OURS, _OURS + ": groups' averages log-normal around the layer's"),
    "recheck_iterations": (Source.OURS, _OURS),
    "floor": (Source.OURS, _CURVE),
    "decay_epochs": (Source.OURS, _CURVE + "; earlier layers converge first, recalled"),
    "levels": (Source.OURS, "our choice: skipped shares rounded to quarters"),
}
"""Where each setting's default comes from (``../shared/techniques.md`` section 5)."""


class Grouping(str, Enum):
    FILTER = "filter"
    ROW = "row"
    LAYER = "layer"


class GradientSkippingConfig(Spec):
    """``techniques.gradient_skipping`` in a run file."""

    grouping: Annotated[Grouping, Field(strict=False)] = Field(
        default=Grouping.FILTER,
        description="A group of related parameters: a filter (output channel), a row (input"
        " channel) or a whole layer.",
    )
    skip_fraction: Fraction | None = Field(
        default=None,
        description="A fixed share of every grouped weight's groups skipped in every step;"
        " unset: the monitor's decisions over training (threshold, statistics).",
    )
    update_trace: str | None = Field(
        default=None,
        description="CSV of layer,epoch,statistic (relative to the run file): each layer's"
        " mean monitored |dw| / |w| per epoch, in the units of threshold, measured in a"
        " real training run; unset: the synthetic curve (floor, decay_epochs).",
    )
    threshold: PositiveFloat = Field(
        default=0.5,
        description="A group skips while its monitored |dw| / |w| average is below this.",
    )
    group_spread: Annotated[float, Field(ge=0, le=10)] = Field(
        default=0.5,
        description="Log-normal spread of a group's average around its layer's (sigma of"
        " its logarithm); 0: every group of a layer alike.",
    )
    recheck_iterations: Annotated[int, Field(ge=1, le=10**6)] = Field(
        default=10,
        description="Every this many steps every group is computed and re-checked (1:"
        " every step, so nothing is ever skipped).",
    )
    floor: Fraction = Field(
        default=0.05,
        description="Synthetic curve: the statistic a layer settles to, in units of its"
        " epoch-0 value.",
    )
    decay_epochs: PositiveFloat = Field(
        default=8.0,
        description="Synthetic curve: the decay time, in epochs, of the layer half way"
        " down the network (earlier layers decay faster).",
    )
    levels: PositiveInt = Field(
        default=4,
        description="Each layer's skipped share is rounded to a multiple of 1 / levels,"
        " so that epochs share simulated step kinds.",
    )


@dataclasses.dataclass(frozen=True)
class _Kept:
    """What remains of one parameter's gradient: the dimensions of its ``dW`` GEMM that
    shrink (none to keep it whole), its groups and how many are kept (0: skipped; -1:
    not grouped, kept unmonitored) and the updated elements."""

    shrink: Mapping[str, int]
    groups: int
    kept: int
    updated_elements: int


def skip_groups(
    graph: OpGraph,
    fraction: float | Mapping[str, float],
    grouping: Grouping,
    infos: Mapping[str, LayerInfo],
    words: WordBytesSpec,
    keep_dx: bool = False,
) -> OpGraph:
    """``graph`` with ``fraction`` of its parameter groups' weight gradients skipped
    (one share for every layer, or a share per layer; a layer missing from the
    mapping skips nothing).

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
        if k.shrink:
            (i,) = ids[old.grad_op]
            ops[i] = replaced(ops[i], **k.shrink)
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
    graph: OpGraph,
    fraction: float | Mapping[str, float],
    grouping: Grouping,
    infos: Mapping[str, LayerInfo],
) -> dict[str, _Kept]:
    trained = [p for p in graph.parameters if p.grad_op >= 0]
    plan = {p.weight.name: _Kept({}, 0, 0, 0) for p in graph.parameters}

    def share(layer: str) -> float:
        return fraction.get(layer, 0.0) if isinstance(fraction, Mapping) else fraction

    if grouping is Grouping.LAYER:
        layers = list(dict.fromkeys(p.layer for p in trained))
        if isinstance(fraction, Mapping):
            skipped = {layer for layer in layers if share(layer) >= 0.5}
        else:
            skipped = set(layers[: skipped_count(fraction, len(layers))])
        for p in trained:
            keep = 0 if p.layer in skipped else 1
            plan[p.weight.name] = _Kept({}, 1, keep, p.update_elements * keep)
        return plan
    for p in trained:
        op = graph.ops[p.grad_op]
        width = _column_width(p, op, infos[p.layer]) if isinstance(op, GemmOp) else None
        if not isinstance(op, GemmOp) or width is None:
            plan[p.weight.name] = _Kept({}, 0, -1, p.update_elements)
            continue
        groups = op.m if grouping is Grouping.FILTER else op.n // width
        keep = groups - skipped_count(share(p.layer), groups)
        shrink: dict[str, int] = {}
        if 0 < keep < groups and grouping is Grouping.FILTER:
            shrink = {"m": keep, "a_elements": op.a_elements * keep // groups}
        elif 0 < keep < groups:
            shrink = {"n": keep * width, "b_elements": op.b_elements * keep // groups}
        updated = p.update_elements * keep // groups
        plan[p.weight.name] = _Kept(shrink, groups * op.count, keep * op.count, updated)
    return plan


def grouped_layers(infos: Sequence[LayerInfo], grouping: Grouping) -> list[str]:
    """The layers whose parameters ``grouping`` groups, in network order: those whose
    weight gradient groups by input (a conv's, a linear layer's) for ``filter`` and
    ``row``, every layer with parameters for ``layer``."""
    out = []
    for info in infos:
        rule = rule_for(info.layer)
        if rule.has_params and (
            grouping is Grouping.LAYER or rule.dw_columns_per_input(info) is not None
        ):
            out.append(info.layer.name)
    return out


def skipped_count(fraction: float, groups: int) -> int:
    """How many of ``groups`` a step skips: the expected count, rounded half up."""
    return math.floor(fraction * groups + 0.5)


def _column_width(p: Parameter, op: GemmOp, info: LayerInfo) -> int | None:
    """Columns of the ``dW`` GEMM per input channel, from the layer's rule (None: not a
    grouped weight).  The groups are counted on the GEMM as it is now, which another
    technique may already have compacted (approximate dropout's kept inputs)."""
    if p.kind is not ParamKind.WEIGHT or op.c.key != p.gradient.key:
        return None
    width = rule_for(info.layer).dw_columns_per_input(info)
    return width if width is not None and op.n % width == 0 else None


def _live(graph: OpGraph, grad_ops: set[int], keep_dx: bool) -> set[int]:
    """Ops still needed: everything outside the backward stage, a technique's auxiliary
    ops, the kept gradients' ops (and the ``dX`` ops if ``keep_dx``) and every op of
    the backward stage whose output a needed op reads."""
    live: set[int] = set()
    for op in reversed(graph.ops):
        root = op.stage is not Stage.BACKWARD or op.phase is Phase.AUX
        root = root or (keep_dx and op.phase is Phase.BWD_INPUT)
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

    def __init__(self, config: Spec, source: str) -> None:
        super().__init__(config, source)
        self._schedule: SkipSchedule | None = None

    @property
    def settings(self) -> GradientSkippingConfig:
        assert isinstance(self.config, GradientSkippingConfig)
        return self.config

    def defaults(self) -> dict[str, Origin]:
        return DEFAULTS

    def defines_kinds(self) -> bool:
        return self.settings.skip_fraction is None

    def step_kinds(self, ctx: TechniqueContext) -> Sequence[str]:
        return list(self.schedule(ctx).kinds)

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
                self.statistics(
                    load.run_file,
                    grouped_layers(load.infos, cfg.grouping),
                    load.run.training.epochs,
                )
            except ConfigError as exc:
                problems += exc.problems
        return problems

    def packed_weight_gradients(self, load: LoadContext) -> frozenset[str]:
        """``filter`` and ``row`` grouping pack the kept rows or columns of every grouped
        weight's gradient GEMM (``layer`` grouping drops whole GEMMs)."""
        cfg = self.settings
        if cfg.grouping is Grouping.LAYER or cfg.skip_fraction == 0:
            return frozenset()
        return frozenset(grouped_layers(load.infos, cfg.grouping))

    def statistics(
        self, run_file: Path, layers: Sequence[str], epochs: int
    ) -> dict[str, list[float]]:
        """Each grouped layer's monitored statistic per epoch: the trace's, or ours."""
        cfg = self.settings
        if cfg.update_trace is None:
            return synthetic_statistics(layers, cfg.floor, cfg.decay_epochs, epochs)
        return read_statistics(
            run_file.parent / cfg.update_trace,
            layers,
            epochs,
            self.source,
            self.where("update_trace"),
        )

    def schedule(self, ctx: TechniqueContext) -> SkipSchedule:
        """The run's decisions: which groups skip in each epoch (computed once)."""
        if self._schedule is None:
            cfg = self.settings
            infos = {info.layer.name: info for info in ctx.infos}
            one = lower(
                ctx.infos, ctx.workload, 1, ctx.hardware.word_bytes, ctx.run.lowering.strided_dx
            )
            kept = _plan(one, 0.0, cfg.grouping, infos)
            layers = grouped_layers(ctx.infos, cfg.grouping)
            groups = dict.fromkeys(layers, 1)
            for p in one.parameters:
                if p.layer in groups and kept[p.weight.name].kept >= 0:
                    groups[p.layer] = max(groups[p.layer], kept[p.weight.name].groups)
            stats = self.statistics(ctx.run_file, layers, ctx.run.training.epochs)
            self._schedule = schedule(
                stats,
                groups,
                cfg.threshold,
                cfg.group_spread,
                cfg.recheck_iterations,
                cfg.levels,
                ctx.run.seed,
            )
        return self._schedule

    def shares_of(self, kind: str, ctx: TechniqueContext) -> float | Mapping[str, float]:
        """The share of groups a step of ``kind`` skips: the fixed one, or per layer."""
        cfg = self.settings
        if cfg.skip_fraction is not None:
            return cfg.skip_fraction
        return self.schedule(ctx).kinds.get(kind, {})

    def rewrite_graph(self, graph: OpGraph, kind: str, ctx: TechniqueContext) -> OpGraph:
        if self.settings.skip_fraction == 0:
            return graph
        infos = {info.layer.name: info for info in ctx.infos}
        return skip_groups(
            graph,
            self.shares_of(kind, ctx),
            self.settings.grouping,
            infos,
            ctx.hardware.word_bytes,
        )

    def kind_shares(self, ctx: TechniqueContext) -> list[dict[str, float]]:
        """Per epoch, its skip set's kind and the re-check steps."""
        return [dict(epoch) for epoch in self.schedule(ctx).shares]

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

        own = self.defines_kinds()
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
        own = self.defines_kinds()
        details: dict[str, Any] = {
            "grouping": cfg.grouping.value,
            "schedule": "fixed" if cfg.skip_fraction is not None else "monitor",
        }
        decided = self.schedule(ctx) if own else None

        def share(kind: str) -> float:
            if decided is None:
                return float(cfg.skip_fraction or 0.0)
            return _mean_share(decided.kinds[kind], decided.groups)

        if decided is not None:
            by_epoch = [sum(w * share(k) for k, w in e.items()) for e in plan.shares]
            details |= {
                "skip_fraction": sum(by_epoch) / plan.epochs,
                "skip_fraction_by_epoch": by_epoch,
                "cycles_by_epoch": [
                    plan.batches_per_epoch * sum(w * steps[k].cost.cycles for k, w in e.items())
                    for e in plan.shares
                ],
                "layers": _layer_report(decided, plan),
            }
        else:
            details["skip_fraction"] = cfg.skip_fraction
        details |= {
            "by_kind": {
                kind: {"skip_fraction": share(kind), **gemm_macs(s.result)}
                for kind, s in steps.items()
            },
            "base_macs": gemm_macs(base),
        }
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


def _mean_share(shares: Mapping[str, float], groups: Mapping[str, int]) -> float:
    """The share of all groups that per-layer ``shares`` skip."""
    total = sum(groups.values())
    return sum(shares.get(layer, 0.0) * n for layer, n in groups.items()) / max(total, 1)


def _layer_report(decided: SkipSchedule, plan: TrainingPlan) -> dict[str, dict[str, Any]]:
    """Per grouped layer: its groups, the share of them it skips over training (re-checks
    counted), and the first epoch it skips any."""
    out = {}
    for layer, n in decided.groups.items():
        by_epoch = [
            sum(w * decided.kinds[k].get(layer, 0.0) for k, w in e.items()) for e in plan.shares
        ]
        first = next((e for e, v in enumerate(by_epoch) if v > 0), None)
        out[layer] = {
            "groups": n,
            "skip_fraction": sum(by_epoch) / max(len(by_epoch), 1),
            "first_epoch": first,
        }
    return out


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
