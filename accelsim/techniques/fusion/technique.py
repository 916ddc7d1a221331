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

import dataclasses
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
from accelsim.techniques.fusion.loop_order import LoopOrder, loop_orders
from accelsim.techniques.fusion.report import kind_figures, order_line
from accelsim.techniques.fusion.rewrite import backward_fused, forward_fused
from accelsim.techniques.fusion.traffic import (
    exposed_update_cycles,
    ideal_bytes_per_parameter,
    parameter_dram_bytes,
)
from accelsim.techniques.provenance import Origin, inputs


class OptimizerFusion(GraphRewriter[OptimizerFusionConfig]):
    """Optimizer fusion as a plug-in: moves each update into the backward or forward pass."""

    trains = "it fuses the optimizer updates into the backward or the next forward pass"
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
                orders = loop_orders(graph, ctx.machine, self.config.weight_tiles, ctx.run.timing)
                return backward_fused(graph, orders)
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
        orders = loop_orders(base.graph, ctx.machine, self.config.weight_tiles, ctx.run.timing)
        dx_first = {w for w, o in orders.items() if o.order is LoopOrder.DX_FIRST}
        ideal = {
            m.value: ideal_bytes_per_parameter(base.graph, m, optimizer, ctx.hardware, dx_first)
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
        alone = list(steps) == [NAME]  # no other technique names or defines the kind
        for kind, step in steps.items():
            at = "" if len(steps) == 1 else f" ({kind})"
            by_kind[kind], kind_lines = kind_figures(base, step, mode, optimizer, at, alone)
            lines += kind_lines
        if mode is FusionMode.BACKWARD:
            lines.append(("loop order", order_line(orders)))
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
            "loop_orders": {w: dataclasses.asdict(o) for w, o in orders.items()}
            if mode is FusionMode.BACKWARD
            else {},
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
