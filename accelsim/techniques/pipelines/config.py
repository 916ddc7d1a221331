"""The pipeline schedules' settings."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Literal

from pydantic import Field

from accelsim.config.base import NonNegativeInt, PositiveInt, Spec

Fraction = Annotated[float, Field(ge=0, lt=1)]


# A schedule simulates graphs of M and 2M mini-batches, each a copy of the step
# graph; events and graph size grow linearly in M (tests/timing/test_compiled.py), so
# the cap bounds memory the way ``processors``' 1,024 does (a copy of the step per
# processor).
MAX_MINI_BATCHES = 1024


class PipelineConfig(Spec):
    """``techniques.<schedule>``: stages default to the hardware's processors;
    ``mini_batches`` to ``3 S + 2`` for ``S`` stages (at least ``2 S + 1``, so the
    pipeline is full for at least two completions)."""

    stages: PositiveInt | None = Field(
        default=None, description="Pipeline stages; null: the hardware's processors."
    )
    micro_batches: PositiveInt = Field(
        default=1, description="Micro-batches each mini-batch is split into."
    )
    # Each mini-batch is a copy of the step graph in the simulated schedule.
    mini_batches: Annotated[int, Field(gt=0, le=MAX_MINI_BATCHES)] | None = Field(
        default=None,
        description="Mini-batches simulated to measure the steady period; null: 3 S + 2 for"
        " S stages.",
    )


class PipeDreamConfig(PipelineConfig):
    """PipeDream: ``replicate`` lets its partitioner run a stage on several processors
    (data-parallel replicas that take turns over mini-batches and all-reduce their
    weight gradients), as PipeDream's optimizer does."""

    replicate: bool = Field(
        default=False,
        description="Let the partitioner run a stage on several processors, as data-parallel"
        " replicas taking turns over mini-batches.",
    )


class GPipeConfig(PipelineConfig):
    """GPipe: all forwards of a mini-batch's micro-batches, then all backwards, then
    the update (synchronous)."""

    micro_batches: PositiveInt = Field(
        default=4, description="Micro-batches each mini-batch is split into."
    )


class WeightVersions(str, Enum):
    STASH = "stash"
    EMA = "ema"


class TaskPlacement(str, Enum):
    BEST = "best"
    TASKS = "tasks"
    STAGES = "stages"


class DxSplit(str, Enum):
    ROWS = "rows"
    ACTIVATION = "activation"
    NONE = "none"


class LayerPipeConfig(PipelineConfig):
    """LayerPipe.

    ``placement``: ``tasks`` places every layer's forward, input-gradient,
    weight-gradient and update tasks freely on the processors within ``reach``
    stages of the layer's own (the paper's model; ``stages`` may then exceed the
    layer count, and processors beyond the layer count take any task);
    ``stages`` keeps every task of a layer on its contiguous stage, with the
    inter-layer split below; ``best`` (the default) tries both, the free tasks
    also on any processor and as the pinned-task model's best assignments, and
    keeps the fastest.  ``dx_split`` (``tasks``): ``rows`` divides each dX GEMM's rows into
    two tasks (``split`` of them in the first, ``balance``: half), the first on
    the previous stage's processor; ``activation`` runs ``Wᵀδ`` as layer ``l``'s
    dX task and the element-wise ``⊙ f'`` (the backward of the vector layers
    below it) with layer ``l - 1``'s; ``none`` keeps dX whole.  ``split``
    (``stages``): the share of a stage's first layer's dX work done by the
    previous stage, or ``balance`` to move as much as evens out the two stages'
    costs (at most all of it) [D].  ``weights``: how delayed weights are kept."""

    placement: Annotated[TaskPlacement, Field(strict=False)] = Field(
        default=TaskPlacement.BEST,
        description="tasks (each layer's forward, dX, dW and update placed freely within"
        " reach stages), stages (every task of a layer on its contiguous stage) or best"
        " (both tried, the free tasks also anywhere and as the task model's best"
        " assignments, the fastest kept).",
    )
    dx_split: Annotated[DxSplit, Field(strict=False)] = Field(
        default=DxSplit.ROWS,
        description="Free placement: rows (each dX GEMM's rows in two tasks, the first on"
        " the previous stage's processor), activation (the element-wise derivative with the"
        " layer below) or none.",
    )
    split: Fraction | Literal["balance"] = Field(
        default="balance",
        description="Share of a split dX done by the previous stage, or balance to even out"
        " the two stages' costs.",
    )
    weights: Annotated[WeightVersions, Field(strict=False)] = Field(
        default=WeightVersions.STASH,
        description="How delayed weights are kept: stash (one version per mini-batch of"
        " delay) or ema (one buffer, LayerPipe2's moving-average reconstruction).",
    )
    delay_margin: NonNegativeInt | Literal["auto"] = Field(
        default="auto",
        description="Mini-batches of delay added for a full pipeline's queueing; auto: the"
        " first of 0, 1, 2, 4, ..., 32 whose steady period is within 0.5 % of its bounds.",
    )
    reach: NonNegativeInt | None = Field(
        default=1,
        description="With the free task placement: how many stages away from its layer's"
        " stage a task may run (besides processors with no stage, when there are more"
        " processors than layers); null: anywhere.",
    )
