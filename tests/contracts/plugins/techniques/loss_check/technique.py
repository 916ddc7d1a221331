"""The loss check as a plug-in: one op of its own in the backward stage, right after
the op that makes the loss gradient, reading that gradient and writing a flag."""

from __future__ import annotations

from collections.abc import Mapping

from accelsim.errors import Problem
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import Op, OpGraph, Phase, TensorKind
from accelsim.graph.passes import rewrite
from accelsim.graph.queries import first_backward, writes_of
from accelsim.report.result import RunResult
from accelsim.techniques.base import (
    GraphRewriter,
    LoadContext,
    Section,
    SimulatedStep,
    TechniqueContext,
    TrainingPlan,
)
from accelsim.techniques.loss_check.config import DEFAULTS, NAME, LossCheckConfig
from accelsim.techniques.provenance import Origin, inputs


class LossCheck(GraphRewriter[LossCheckConfig]):
    """Checks the loss gradient of every step."""

    name = NAME

    def validate(self, load: LoadContext) -> list[Problem]:
        return []

    def defaults(self) -> Mapping[str, Origin]:
        return DEFAULTS

    def rewrite_graph(self, graph: OpGraph, kind: str, ctx: TechniqueContext) -> OpGraph:
        loss = first_backward(graph.ops)

        def check(builder: GraphBuilder, op: Op) -> None:
            if op.op_id == loss:
                gradient = writes_of(op)[0].tensor
                flag = builder.tensor(f"{NAME}.flag", TensorKind.GRADIENT, 1)
                ops = self.config.ops_per_element
                builder.vector(
                    NAME, op.layer, Phase.AUX, gradient.elements, ops, [gradient], [flag]
                )

        checked, _ = rewrite(graph, ctx.hardware.word_bytes, emit_after=check, owner=self.name)
        return checked

    def training(
        self,
        ctx: TechniqueContext,
        base: RunResult,
        steps: Mapping[str, SimulatedStep],
        plan: TrainingPlan,
    ) -> Section:
        checked = {
            kind: step.result.step_summary().owners[self.name].vector_ops
            for kind, step in steps.items()
        }
        lines = tuple((f"loss check ({kind})", f"{n:,} vector ops") for kind, n in checked.items())
        return Section(
            self.name, {"vector_ops": checked}, lines, inputs=inputs(self.config, DEFAULTS)
        )
