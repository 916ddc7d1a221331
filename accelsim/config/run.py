"""Run spec: which hardware, workload and energy table, and how to simulate them.

A run file (``configs/runs/*.yaml``) names the other three files by paths
relative to itself and may override any of their fields with dotted keys.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any

from pydantic import Field

from accelsim.config.base import (
    Convention,
    ConventionField,
    Name,
    NonNegativeInt,
    PathName,
    PositiveFloat,
    PositiveInt,
    Spec,
)
from accelsim.config.enums import DEFAULT_CHUNKS_PER_OP as DEFAULT_CHUNKS_PER_OP
from accelsim.config.enums import AssignmentPolicy as AssignmentPolicy
from accelsim.config.enums import EngineKind as EngineKind
from accelsim.config.enums import EpilogueFusion as EpilogueFusion
from accelsim.config.enums import MasterWeights as MasterWeights
from accelsim.config.enums import OptimizerKind as OptimizerKind
from accelsim.config.enums import PsumPolicy as PsumPolicy
from accelsim.config.enums import StridedDx as StridedDx


class OptimizerSpec(Spec):
    """The optimizer.  ``clip_global_norm``: clip the gradients to this global L2
    norm (one pass over every gradient before any update; none by default)."""

    kind: Annotated[OptimizerKind, Field(strict=False)] = OptimizerKind.SGD
    clip_global_norm: PositiveFloat | None = None
    master_weights: Annotated[MasterWeights, Field(strict=False)] = Field(
        default=MasterWeights.NONE,
        description="fp32: the optimizer keeps an fp32 master copy of every weight"
        " (hardware.word_bytes.optimizer_state per element), which the update reads and"
        " writes before writing the bf16 weight the array uses; none: the update works on"
        " the weight itself.",
    )

    @property
    def state_tensors(self) -> int:
        """Tensors the optimizer keeps per parameter besides it and its gradient: the
        kind's states, and the master copy."""
        return self.kind.state_tensors + (self.master_weights is MasterWeights.FP32)


class TimingSpec(Spec):
    """Timing convention, partial-sum tiling, engine granularity and engine.

    ``chunks_per_op`` bounds the number of tile groups (and so engine events) per
    op; with one processor the result does not depend on it.
    """

    convention: ConventionField = Convention.ACCELSIM
    psums: Annotated[PsumPolicy, Field(strict=False)] = PsumPolicy.CHUNK
    chunks_per_op: Annotated[int, Field(gt=0, le=4096)] = DEFAULT_CHUNKS_PER_OP
    engine: Annotated[EngineKind, Field(strict=False)] = EngineKind.AUTO


class LoweringSpec(Spec):
    strided_dx: Annotated[StridedDx, Field(strict=False)] = StridedDx.SKIP_ZEROS
    fuse_epilogues: Annotated[EpilogueFusion, Field(strict=False)] = Field(
        default=EpilogueFusion.NONE,
        description="Which vector ops take their input tile by tile, on chip, from the"
        " op producing it (a GEMM's output tile before it leaves the chip): none,"
        " elementwise (activations and their derivatives, residual adds, gradient sums,"
        " dropout, bias gradients) or all (batchnorm too, with its statistics known"
        " before its input arrives, as with running statistics).",
    )


MAX_EPOCHS = 100_000


class TrainingSpec(Spec):
    """Length of training, for whole-training estimates of techniques."""

    # Whole-training plans hold a few numbers per epoch.
    epochs: Annotated[int, Field(gt=0, le=MAX_EPOCHS)] = 1
    batches_per_epoch: PositiveInt = 1


class OnCapacity(str, Enum):
    """What a run does when a schedule's DRAM footprint exceeds a channel's capacity."""

    ERROR = "error"
    REPORT = "report"


class RunSpec(Spec):
    """A run file, before the files it references are loaded."""

    name: PathName
    description: str = ""
    hardware: Name
    workload: Name
    workload_variant: Name | None = None
    energy: Name
    batch_size: PositiveInt = 1
    optimizer: OptimizerSpec = Field(default_factory=OptimizerSpec)
    timing: TimingSpec = Field(default_factory=TimingSpec)
    lowering: LoweringSpec = Field(default_factory=LoweringSpec)
    assignment: Annotated[AssignmentPolicy, Field(strict=False)] = AssignmentPolicy.SINGLE
    overrides: dict[str, Any] = Field(default_factory=dict)
    training: TrainingSpec = Field(default_factory=TrainingSpec)
    techniques: dict[Name, dict[str, Any] | None] = Field(default_factory=dict)
    seed: NonNegativeInt = 0
    on_capacity: Annotated[OnCapacity, Field(strict=False)] = Field(
        default=OnCapacity.ERROR,
        description="When a pipeline schedule's DRAM footprint exceeds a channel's"
        " hardware.dram.capacity_gib: refuse the run (error) or simulate it and report"
        " it as not fitting (report).",
    )
