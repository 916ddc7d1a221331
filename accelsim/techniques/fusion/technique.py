"""Optimizer fusion (Jiang et al., "Optimizer Fusion: Efficient Training with Better
Locality and Parallelism", 2021, arXiv 2104.00237).

Eager training updates every parameter after the whole backward pass, reading
each weight, gradient and optimizer state back from DRAM, with the array idle.
Fusing the update into the backward or the forward pass reuses what is on chip
and overlaps the update (vector unit) with the GEMMs (array).  Modes:

* ``unfused``: today's eager step; the graph is unchanged.
* ``backward``: ``W_l`` is updated tile by tile right after its final ``dW_l``
  tile: the update takes the gradient's tiles as the ``dW`` GEMM emits them and the
  weight's tiles from the filter buffer the ``dX`` GEMM loaded them into (tile
  streams, declared by :func:`~accelsim.lowering.optimizer.add_updates`), so
  ``dX``, ``dW`` and the update run as one fused op and neither g nor a second read
  of W goes to DRAM when their tiles fit (:mod:`accelsim.mapping.tile_reuse`).
  With fp32 master weights the update reads the master from DRAM (the bf16 tile
  is not it).  Under data parallelism the gradient is final only after its
  all-reduce, which is no tile source: the update then reads W and g from DRAM.
* ``forward``: ``W_l`` is updated with the previous step's gradient just before
  its next forward pass, and that forward GEMM takes the updated weight's tiles
  as the update writes them, so ``W`` is read once for both.

The report sets the parameters' DRAM bytes each step kind spends, as simulated,
beside a hand count and the ideal of each mode (:mod:`accelsim.techniques.fusion.traffic`).

Backward fusion needs each gradient final on its own, so global-norm clipping
(all gradients first) and gradient accumulation over micro-batches forbid it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from accelsim.errors import Problem
from accelsim.graph.ops import OpGraph
from accelsim.report.result import RunResult
from accelsim.techniques.base import (
    GraphRewriter,
    LoadContext,
    Section,
    SimulatedStep,
    TechniqueContext,
    TrainingPlan,
    placers,
)
from accelsim.techniques.fusion.config import DEFAULTS, NAME, FusionMode, OptimizerFusionConfig
from accelsim.techniques.fusion.rewrite import backward_fused, forward_fused
from accelsim.techniques.fusion.traffic import (
    derived_traffic,
    exposed_update_cycles,
    ideal_bytes_per_parameter,
    parameter_dram_bytes,
)
from accelsim.techniques.provenance import Origin, inputs


class OptimizerFusion(GraphRewriter[OptimizerFusionConfig]):
    """Optimizer fusion as a plug-in: moves each update into the backward or forward pass."""

    name = NAME
    after: ClassVar[Mapping[str, str]] = dict.fromkeys(
        ("approximate_dropout", "gradient_skipping", "gradient_prediction"),
        "fusion fuses the updates of the step the other rewrites left",
    )

    def defaults(self) -> dict[str, Origin]:
        return DEFAULTS

    def validate(self, load: LoadContext) -> list[Problem]:
        mode = self.config.mode
        problems = []
        clip = load.run.optimizer.clip_global_norm
        if mode is FusionMode.BACKWARD and clip is not None:
            problems.append(
                Problem(
                    self.source,
                    self.where("mode"),
                    "backward fusion updates each layer as its gradient is ready, but"
                    f" global-norm clipping (optimizer.clip_global_norm: {clip:g}) needs"
                    " every gradient first; use mode: forward",
                    mode.value,
                )
            )
        for other in placers(load.techniques):
            micro = other.accumulated_micro_batches()
            if mode is FusionMode.BACKWARD and micro > 1:
                problems.append(
                    Problem(
                        self.source,
                        self.where("mode"),
                        f"backward fusion cannot update before {other.name} has summed the"
                        f" gradients of its {micro} micro-batches; use micro_batches: 1",
                        mode.value,
                    )
                )
            if mode is FusionMode.FORWARD:
                problems.append(
                    Problem(
                        self.source,
                        self.where("mode"),
                        f"forward fusion under the {other.name} schedule is not modelled"
                        " (the update would wait for an earlier mini-batch's gradient);"
                        " use mode: backward",
                        mode.value,
                    )
                )
        return problems

    def rewrite_graph(self, graph: OpGraph, kind: str, ctx: TechniqueContext) -> OpGraph:
        match self.config.mode:
            case FusionMode.UNFUSED:
                return graph
            case FusionMode.BACKWARD:
                return backward_fused(graph, self.config.weight_tiles)
            case FusionMode.FORWARD:
                return forward_fused(graph, ctx.hardware, ctx.run.optimizer)

    def training(
        self,
        ctx: TechniqueContext,
        base: RunResult,
        steps: Mapping[str, SimulatedStep],
        plan: TrainingPlan,
    ) -> Section:
        optimizer = ctx.run.optimizer
        mode = self.config.mode
        exposed = exposed_update_cycles(base)
        share = exposed / max(base.total_cycles, 1)
        params = sum(p.update_elements for p in base.graph.parameters)
        ideal = {
            m.value: ideal_bytes_per_parameter(
                base.graph, m, optimizer, ctx.hardware, self.config.weight_tiles
            )
            for m in FusionMode
        }
        by_kind = {}
        lines = [
            (
                "exposed update",
                f"{share * 100:.1f} % of the baseline step"
                f" ({mode.value} fusion, {optimizer.kind.value})",
            )
        ]
        for kind, step in steps.items():
            derived = derived_traffic(base, step.result, mode, optimizer)
            # a whole pipeline's graph holds several steps: per step, as its cost is;
            # each data-parallel replica updates its own copy: per replica
            per_step = step.cost.dram_bytes / max(step.result.dram_bytes, 1) / derived.replicas
            simulated = parameter_dram_bytes(step.result) * per_step
            updated = max(derived.updated_elements, 1)  # every replica's, mini-batch's
            in_dram = derived.gradient_in_dram / updated
            speedup = base.total_cycles / max(step.cost.cycles, 1)
            bound_cycles, binding = phase_ordered_bound(step)
            bound = base.total_cycles / max(bound_cycles, 1)
            by_kind[kind] = {
                "cycles_saved_fraction": 1 - step.cost.cycles / base.total_cycles,
                "energy_saved_fraction": 1 - step.cost.energy_pj / base.energy.total_pj,
                "speedup": speedup,
                "speedup_bound": bound,
                "binding_bound": binding,
                "replicas": derived.replicas,
                "parameter_dram_bytes": simulated,
                "bytes_per_parameter": simulated / max(params, 1),
                "derived_parameter_dram_bytes": derived.dram_bytes * per_step,
                "derived_bytes_per_parameter": derived.dram_bytes * per_step / max(params, 1),
                "derived_weight_pass_bytes": derived.weight_pass_bytes * per_step,
                "gradient_in_dram_share": in_dram,
                "weight_in_dram_share": derived.weight_in_dram / updated,
            }
            at = "" if len(steps) == 1 else f" ({kind})"
            lines.append(
                (
                    f"fused step{at}",
                    f"{speedup:.3f} x the baseline step (at most {bound:.3f} x: {binding} bound)",
                )
            )
            lines.append(
                (
                    f"parameter traffic{at}",
                    f"{simulated / max(params, 1):.2f} B per parameter"
                    f"{' and replica' if derived.replicas > 1 else ''} simulated,"
                    f" {derived.dram_bytes * per_step / max(params, 1):.2f} derived"
                    f" (gradient through DRAM for {in_dram * 100:.1f} % of the updated"
                    " elements)",
                )
            )
        per = ", ".join(f"{m} {b:.1f}" for m, b in ideal.items())
        lines.append(
            ("ideal traffic", f"{per} B per parameter (every tile fits, one pass per GEMM)")
        )
        details = {
            "mode": mode.value,
            "weight_tiles": self.config.weight_tiles.value,
            "optimizer": optimizer.kind.value,
            "master_weights": optimizer.master_weights.value,
            "parameters": params,
            "base_exposed_update_cycles": exposed,
            "base_exposed_update_share": share,
            "base_parameter_dram_bytes": parameter_dram_bytes(base),
            "ideal_bytes_per_parameter": ideal,
            "by_kind": by_kind,
        }
        notes = (
            "derived: the hand count per update element (W, g and states, less what"
            " resident tile streams serve) plus each GEMM's passes over its weight as in"
            " the baseline; a gradient made final by an all-reduce or a sum cannot be a"
            " tile source, so it goes through DRAM",
        )
        return Section(
            self.name,
            details,
            tuple(lines),
            notes,
            inputs=inputs(self.config, self.defaults()),
        )


def phase_ordered_bound(step: SimulatedStep) -> tuple[float, str]:
    """The lower bound on a step kind's cycles and what binds it: the step's own
    (:class:`~accelsim.report.training.StepCost`), or, when tighter, the forward pass
    as simulated, then the binding bound of what waits for its end
    (:meth:`~accelsim.report.result.RunResult.ordered_cycle_bounds`).  No update,
    fused or not, overlaps the forward pass it follows, and the forward pass is what
    it is whatever the backward pass does, so the bytes-over-bandwidth bound of the
    whole step, which lets them overlap, is loose.  Only for a step costed as its
    whole simulation (a pipeline's period is costed per mini-batch)."""
    cost, result = step.cost, step.result
    if cost.cycles != result.total_cycles:
        return cost.bound_cycles, cost.binding_bound
    parts = result.ordered_cycle_bounds()
    after = max(parts.after, key=lambda k: parts.after[k])
    ordered = parts.before_end_cycles + parts.after[after]
    if ordered <= cost.bound_cycles:
        return cost.bound_cycles, cost.binding_bound
    return ordered, f"forward pass as simulated, then {after}"
