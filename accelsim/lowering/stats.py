"""Size of a workload: parameters, MACs of the forward pass and of a training step."""

from __future__ import annotations

from collections.abc import Sequence

from accelsim.config.hardware import WordBytesSpec
from accelsim.config.run import StridedDx
from accelsim.graph.ops import GemmOp, Phase
from accelsim.lowering.counts import ModelStats
from accelsim.lowering.shapes import LayerInfo, inputs_text
from accelsim.lowering.step import lower
from accelsim.workload.model import Workload


def model_stats(
    workload: Workload, infos: Sequence[LayerInfo], strided_dx: StridedDx = StridedDx.SKIP_ZEROS
) -> ModelStats:
    """Count parameters and GEMM MACs of ``workload`` at batch 1."""
    step = lower(infos, workload, 1, WordBytesSpec(), strided_dx)
    gemms = [op for op in step.ops if isinstance(op, GemmOp)]
    return ModelStats(
        name=workload.name,
        input=inputs_text(workload),
        params=sum(p.weight.elements for p in step.parameters),
        forward_macs=sum(op.macs for op in gemms if op.phase is Phase.FWD),
        training_macs=sum(op.macs for op in gemms),
        layers=len(workload.layers),
    )
