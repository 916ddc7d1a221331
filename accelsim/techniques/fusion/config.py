"""Optimizer fusion's settings and where their defaults come from."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

from pydantic import Field

from accelsim.config.base import Spec
from accelsim.report.training import Source
from accelsim.techniques.provenance import Origin

NAME = "optimizer_fusion"
"""Optimizer fusion's name in run files, and the owner of the ops it adds."""


class FusionMode(str, Enum):
    UNFUSED = "unfused"
    FORWARD = "forward"
    BACKWARD = "backward"


DEFAULTS: dict[str, Origin] = {
    "mode": (
        Source.OURS,
        "our choice of the paper's two orders [S]: backward (forward is the other)",
    ),
    "weight_tiles": (
        Source.OURS,
        "our choice: per layer, the weight tile dX loaded serves the update unless the"
        " work waiting for dX and the dX partial sums sharing spills would take longer"
        " than sharing saves (estimated; a compiler's per-layer choice); dx and dram"
        " force one",
    ),
}
"""Where each setting's default comes from (``../shared/techniques.md`` section 6)."""


class WeightTiles(str, Enum):
    """Where a backward-fused update reads the weight from."""

    AUTO = "auto"  # per layer (techniques/fusion/loop_order.py)
    DX = "dx"  # the tiles the dX GEMM loaded: dX, dW and the update run as one op
    DRAM = "dram"  # DRAM: dX runs on its own, its consumers need not wait for dW


class OptimizerFusionConfig(Spec):
    """``techniques.optimizer_fusion`` in a run file."""

    mode: Annotated[FusionMode, Field(strict=False)] = Field(
        default=FusionMode.BACKWARD,
        description="unfused (updates after the whole backward pass), backward (each"
        " weight tile updated on chip right after its final dW tile) or forward (each"
        " update as the layer's next forward GEMM loads the weight, with the previous"
        " step's gradient).",
    )
    weight_tiles: Annotated[
        WeightTiles,
        Field(
            strict=False,
            description="backward mode: dx takes the weight's tiles from the dX GEMM's"
            " filter buffer (no second read of W; dX, dW and the update run as one op);"
            " dram reads W from DRAM (dX runs on its own, so its consumers overlap dW);"
            " auto chooses per layer: dx unless the work waiting for dX and the DRAM"
            " round trips of the dX partial sums sharing spills take longer than sharing"
            " saves (W's read, and dW's traffic under dX's compute), by estimates from the"
            " graph and the hardware",
        ),
    ] = WeightTiles.AUTO
