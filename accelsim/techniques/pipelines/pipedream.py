"""PipeDream (Narayanan et al., SOSP 2019): one-forward-one-backward (1F1B) over
mini-batches; a layer's backward (dX then dW) is one task, and a stage sends its input
gradient upstream when its whole backward pass is done; stage ``s`` of ``S`` keeps
``S - s`` mini-batches in flight and stashes a weight version for each.  With
``replicate``, its partitioner may run a stage on several processors."""

from __future__ import annotations

from accelsim.report.result import RunResult
from accelsim.report.training import Source
from accelsim.techniques.base import TechniqueContext
from accelsim.techniques.pipelines.config import PipeDreamConfig
from accelsim.techniques.pipelines.plan import Plan, replicated_partition, ring_allreduce_cycles
from accelsim.techniques.pipelines.schedule import Schedule
from accelsim.techniques.provenance import Origin


class PipeDream(Schedule[PipeDreamConfig]):
    """PipeDream: 1F1B with weight stashing; a layer's backward is one task."""

    name = "pipedream"
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
        link, dram = single.machine.link, single.machine.dram[0]
        stages, replicas = replicated_partition(
            costs,
            [gradients.get(n, 0) for n in names],
            self.config.stages or hw.processors,
            lambda size, copies: ring_allreduce_cycles(size, copies, link, dram),
        )
        plan = Plan(len(replicas), dict(zip(names, stages, strict=True)), costs, tuple(replicas))
        self._plans[id(single)] = (single, plan)
        return plan
