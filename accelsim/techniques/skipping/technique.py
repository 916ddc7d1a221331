"""Convergence-aware gradient skipping (Oh et al., "Convergence-Aware Neural Network
Training", DAC 2020, DOI 10.1109/DAC18072.2020.9218518).

Parameter groups that have converged contribute little to the update, so their
weight-gradient computation is pruned stochastically.  A monitor keeps, per group,
an exponential moving average of ``|dw| / |w|`` (the norms of the group's update
and weights); its work runs on the vector unit at update time (see
:mod:`accelsim.lowering.optimizer`: ops per updated element in the update, and
one op per parameter over its groups' EMA state).  A skipped group is
re-checked on a step drawn at random, and trains again if it moved.  The
simulator trains nothing: the cost of a step depends only on how many groups are
skipped, and a step kind skips the count ``p * groups`` (rounded half up).

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

Over training, per-group decisions of a closed-loop monitor
(:mod:`accelsim.techniques.skipping.schedule`): a trained group skips once its
statistic is below ``threshold``, a skipped group is re-checked on each step with
probability ``1 / recheck_iterations``, and the statistics come from the bundled
measured traces (:mod:`accelsim.techniques.skipping.signals`), a per-layer trace
(CSV ``layer,epoch,statistic``) or our synthetic curve.  A
fixed ``skip_fraction`` replaces the schedule: every step skips that share of
every grouped weight's groups (``layer``: of the layers, earliest first).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from accelsim.errors import ConfigError, Problem
from accelsim.graph.ops import OpGraph
from accelsim.lowering.optimizer import MONITOR_OPS_PER_ELEMENT, MONITOR_OPS_PER_GROUP
from accelsim.lowering.step import lower
from accelsim.report.result import RunResult
from accelsim.report.training import Source
from accelsim.techniques.base import (
    BASE,
    GraphRewriter,
    KindDefiner,
    LoadContext,
    Section,
    SimulatedStep,
    StepCost,
    TechniqueContext,
    TrainingPlan,
)
from accelsim.techniques.provenance import Origin, bundled_trace_inputs, inputs
from accelsim.techniques.skipping.config import (
    DEFAULTS,
    NAME,
    OUR_MODEL,
    GradientSkippingConfig,
    Grouping,
    Statistics,
)
from accelsim.techniques.skipping.groups import grouped_layers, plan_groups, skip_groups
from accelsim.techniques.skipping.report import gemm_macs, layer_report, mean_share, sensitivity
from accelsim.techniques.skipping.schedule import (
    SkipSchedule,
    group_statistics,
    read_statistics,
    schedule,
    synthetic_statistics,
)
from accelsim.techniques.skipping.signals import measured_statistics


class GradientSkipping(GraphRewriter[GradientSkippingConfig], KindDefiner[GradientSkippingConfig]):
    """Convergence-aware gradient skipping as a plug-in: a rewrite that removes work and,
    driven by its monitor, the step kinds of its skip sets."""

    trains = "it skips weight gradients and their updates"
    name = NAME
    after: ClassVar[Mapping[str, str]] = {
        "approximate_dropout": "skipping counts the groups of the dW GEMMs as dropout left"
        " them: a neuron dropout dropped has no gradient to skip",
    }

    def __init__(self, config: GradientSkippingConfig, source: str) -> None:
        super().__init__(config, source)
        self._schedule: SkipSchedule | None = None
        self._decided_by = ""
        self._groups: dict[str, int] | None = None

    def defaults(self) -> dict[str, Origin]:
        return DEFAULTS

    def defines_kinds(self) -> bool:
        return self.config.skip_fraction is None

    def step_kinds(self, ctx: TechniqueContext) -> Sequence[str]:
        return list(self.schedule(ctx).kinds)

    def validate(self, load: LoadContext) -> list[Problem]:
        cfg = self.config
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
        if cfg.skip_fraction is None and cfg.update_trace is not None:
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
        cfg = self.config
        if cfg.grouping is Grouping.LAYER or cfg.skip_fraction == 0:
            return frozenset()
        return frozenset(grouped_layers(load.infos, cfg.grouping))

    def statistics(
        self, run_file: Path, layers: Sequence[str], epochs: int
    ) -> dict[str, list[float]]:
        """Each grouped layer's statistic per epoch: the run's trace's, or our curve's."""
        cfg = self.config
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
            self._schedule = self.decide(ctx, self.config.threshold, self.config.recheck_iterations)
        return self._schedule

    def groups(self, ctx: TechniqueContext) -> dict[str, int]:
        """The groups of each grouped layer (counted once)."""
        if self._groups is None:
            cfg = self.config
            infos = {info.layer.name: info for info in ctx.infos}
            words = ctx.hardware.word_bytes
            one = lower(ctx.infos, ctx.workload, 1, words, ctx.run.lowering.strided_dx)
            kept = plan_groups(one, 0.0, cfg.grouping, infos)
            groups = dict.fromkeys(grouped_layers(ctx.infos, cfg.grouping), 1)
            for p in one.parameters:
                if p.layer in groups and kept[p.weight.name].kept >= 0:
                    groups[p.layer] = max(groups[p.layer], kept[p.weight.name].groups)
            self._groups = groups
        return self._groups

    def decide(self, ctx: TechniqueContext, threshold: float, recheck: int) -> SkipSchedule:
        """The monitor's decisions at this ``threshold`` and ``recheck_iterations``, the
        other settings and the seed as in the run."""
        cfg = self.config
        groups = self.groups(ctx)
        layers = list(groups)
        epochs = ctx.run.training.epochs
        rng = np.random.default_rng(ctx.run.seed)
        if cfg.update_trace is None and cfg.statistics is Statistics.MEASURED:
            model, per_group, _ = measured_statistics(ctx.infos, layers, groups, epochs)
            self._decided_by = f"measured: the bundled {model} trace"
        else:
            stats = self.statistics(ctx.run_file, layers, epochs)
            per_group = group_statistics(stats, groups, cfg.group_spread, rng)
            self._decided_by = (
                f"measured: the trace {cfg.update_trace}"
                if cfg.update_trace is not None
                else "our synthetic curve"
            )
        steps = ctx.run.training.batches_per_epoch
        return schedule(per_group, threshold, recheck, cfg.levels, steps, rng)

    def sensitivity(
        self,
        ctx: TechniqueContext,
        base: StepCost,
        steps: Mapping[str, SimulatedStep],
        plan: TrainingPlan,
    ) -> tuple[dict[str, Any], str]:
        """The speedup at other thresholds and ``recheck_iterations``: each skip set
        simulated once, composed as the run's steps are."""
        cfg = self.config
        infos = {info.layer.name: info for info in ctx.infos}
        words = ctx.hardware.word_bytes
        kinds = self.schedule(ctx).kinds
        costs = {_key(kinds[k]): s.cost for k, s in steps.items()}
        first = next(iter(steps))

        def cost(shares: Mapping[str, float]) -> StepCost:
            def rewrite(graph: OpGraph) -> OpGraph:
                return skip_groups(graph, shares, cfg.grouping, infos, words)

            key = _key(shares)
            if key not in costs:
                costs[key] = ctx.cost_of(first, {self.name: rewrite})
            return costs[key]

        return sensitivity(
            lambda threshold, recheck: self.decide(ctx, threshold, recheck),
            cost,
            base,
            plan,
            cfg.threshold,
            cfg.recheck_iterations,
        )

    def shares_of(self, kind: str, ctx: TechniqueContext) -> float | Mapping[str, float]:
        """The share of groups a step of ``kind`` skips: the fixed one, or per layer."""
        cfg = self.config
        if cfg.skip_fraction is not None:
            return cfg.skip_fraction
        return self.schedule(ctx).kinds.get(kind, {})

    def rewrite_graph(self, graph: OpGraph, kind: str, ctx: TechniqueContext) -> OpGraph:
        if self.config.skip_fraction == 0:
            return graph
        infos = {info.layer.name: info for info in ctx.infos}
        return skip_groups(
            graph,
            self.shares_of(kind, ctx),
            self.config.grouping,
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
        cfg = self.config
        own = self.defines_kinds()
        details: dict[str, Any] = {
            "grouping": cfg.grouping.value,
            "schedule": "fixed" if cfg.skip_fraction is not None else "monitor",
        }
        decided = self.schedule(ctx) if own else None

        def share(kind: str) -> float:
            if decided is None:
                return float(cfg.skip_fraction or 0.0)
            return mean_share(decided.kinds[kind], decided.groups)

        if decided is not None:
            by_epoch = [sum(w * share(k) for k, w in e.items()) for e in plan.shares]
            details |= {
                "decided_by": self._decided_by,
                "skip_fraction": sum(by_epoch) / plan.epochs,
                "skip_fraction_by_epoch": by_epoch,
                "cycles_by_epoch": [
                    plan.batches_per_epoch * sum(w * steps[k].cost.cycles for k, w in e.items())
                    for e in plan.shares
                ],
                "layers": layer_report(decided, plan),
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
        if decided is not None:
            lines.append(("decided by", self._decided_by))
        if decided is not None and self._decided_by == "our synthetic curve":
            details["sensitivity"], text = self.sensitivity(ctx, base_cost, steps, plan)
            lines.append(("sensitivity", text))
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
            inputs=bundled_trace_inputs(
                inputs(
                    self.config,
                    self.defaults(),
                    traces=("update_trace",),
                    constants={
                        "monitor_ops_per_element": (
                            MONITOR_OPS_PER_ELEMENT,
                            (Source.OURS, OUR_MODEL),
                        ),
                        "monitor_ops_per_group": (MONITOR_OPS_PER_GROUP, (Source.OURS, OUR_MODEL)),
                    },
                ),
                "statistics",
            ),
        )


def _key(shares: Mapping[str, float]) -> tuple[tuple[str, float], ...]:
    """A skip set as a key: its layers' shares in name order."""
    return tuple(sorted(shares.items()))
