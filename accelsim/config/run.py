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


class OptimizerKind(str, Enum):
    """Optimizer; each keeps ``state_tensors`` extra tensors per parameter."""

    SGD = "sgd"
    MOMENTUM = "momentum"
    ADAM = "adam"

    @property
    def state_tensors(self) -> int:
        return {"sgd": 0, "momentum": 1, "adam": 2}[self.value]

    @property
    def ops_per_element(self) -> int:
        # SGD: w -= lr*g (mul+sub).  Momentum: v = mu*v + g; w -= lr*v (4 ops).
        # Adam: two moment updates, bias correction, sqrt, divide, axpy (~13 ops).
        return {"sgd": 2, "momentum": 4, "adam": 13}[self.value]


class StridedDx(str, Enum):
    """How the input gradient of a strided conv is computed.

    ``skip_zeros`` decomposes the transposed conv into stride-phase sub-convs
    that never multiply the inserted zeros (MACs equal the forward MACs);
    ``zero_insert`` runs one dense conv over the zero-inserted output gradient.
    """

    SKIP_ZEROS = "skip_zeros"
    ZERO_INSERT = "zero_insert"


class AssignmentPolicy(str, Enum):
    """How ops are placed on processors."""

    SINGLE = "single"
    DATA_PARALLEL = "data_parallel"


class PsumPolicy(str, Enum):
    """What ws and is do with partial sums (os keeps them in the PEs).

    ``chunk`` streams the moving dimension in chunks whose partial sums fit in
    the ofmap buffer, so they never leave the chip; ``spill`` streams it whole,
    so partial sums that do not fit go to DRAM after every row fold and are
    read back.
    """

    CHUNK = "chunk"
    SPILL = "spill"


class OptimizerSpec(Spec):
    """The optimizer.  ``clip_global_norm``: clip the gradients to this global L2
    norm (one pass over every gradient before any update; none by default)."""

    kind: Annotated[OptimizerKind, Field(strict=False)] = OptimizerKind.SGD
    clip_global_norm: PositiveFloat | None = None


class EngineKind(str, Enum):
    """Which event engine runs a step; both give the same trace.

    ``simpy`` is the readable reference (:mod:`accelsim.timing.engine`);
    ``compiled`` runs the same events in a Numba loop
    (:mod:`accelsim.timing.compiled`); ``auto`` picks the compiled engine when
    its cached compilation is on disk and the step is large enough to pay for
    loading Numba (:mod:`accelsim.timing.engines`).
    """

    AUTO = "auto"
    SIMPY = "simpy"
    COMPILED = "compiled"


DEFAULT_CHUNKS_PER_OP = 8
"""Tile groups per op unless a run file sets ``timing.chunks_per_op``."""


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


MAX_EPOCHS = 100_000


class TrainingSpec(Spec):
    """Length of training, for whole-training estimates of techniques."""

    # Whole-training plans hold a few numbers per epoch.
    epochs: Annotated[int, Field(gt=0, le=MAX_EPOCHS)] = 1
    batches_per_epoch: PositiveInt = 1


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
