"""Run spec: which hardware, workload and energy table, and how to simulate them.

A run file (``configs/runs/*.yaml``) names the other three files by paths
relative to itself and may override any of their fields with dotted keys.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any

from pydantic import Field, model_validator

from accelsim.config.base import (
    Convention,
    ConventionField,
    Name,
    NonNegativeInt,
    PathName,
    PositiveFloat,
    PositiveInt,
    RuleViolation,
    Spec,
)
from accelsim.config.enums import DEFAULT_CHUNKS_PER_OP as DEFAULT_CHUNKS_PER_OP
from accelsim.config.enums import DEFAULT_GROUP_CYCLES as DEFAULT_GROUP_CYCLES
from accelsim.config.enums import AssignmentPolicy as AssignmentPolicy
from accelsim.config.enums import AttentionKernels as AttentionKernels
from accelsim.config.enums import CompileMode as CompileMode
from accelsim.config.enums import EngineKind as EngineKind
from accelsim.config.enums import EpilogueFusion as EpilogueFusion
from accelsim.config.enums import MasterWeights as MasterWeights
from accelsim.config.enums import OptimizerKind as OptimizerKind
from accelsim.config.enums import PsumPolicy as PsumPolicy
from accelsim.config.enums import RunMode as RunMode
from accelsim.config.enums import StridedDx as StridedDx
from accelsim.config.iso_area import IsoArea
from accelsim.config.parallel import ParallelSpec
from accelsim.config.precision import PrecisionSpec
from accelsim.config.symmetry import Symmetry


class OptimizerSpec(Spec):
    """The optimizer.  ``clip_global_norm``: clip the gradients to this global L2
    norm (one pass over every gradient before any update; none by default)."""

    kind: Annotated[OptimizerKind, Field(strict=False)] = Field(
        default=OptimizerKind.SGD,
        description="sgd (no state tensor, 2 ops per element), momentum (1 state, 4 ops)"
        " or adam (2 states, 13 ops).",
    )
    clip_global_norm: PositiveFloat | None = Field(
        default=None,
        description="Clip the gradients to this global L2 norm: one vector pass over every"
        " gradient (2 ops per element) before any update, and 1 more op per element in each"
        " update; forbids backward optimizer fusion.  Null: no clipping.",
    )
    master_weights: Annotated[MasterWeights, Field(strict=False)] = Field(
        default=MasterWeights.NONE,
        description="fp32: the optimizer keeps an fp32 master copy of every weight (4 bytes"
        " per element, whatever word_bytes.optimizer_state or precision.optimizer_state"
        " give the moments), which the update reads and writes before writing the weight"
        " the array uses; none: the update works on the weight itself.",
    )


class TimingSpec(Spec):
    """Timing convention, partial-sum tiling, fold pipelining, engine granularity and engine.

    The engine runs each op as tile groups (fetch of the next overlapping compute of
    this one), and how finely it cuts them changes the result even with one
    processor: each op and each unit keeps one fetch in flight on the shared DRAM
    channel.  With ``group_cycles`` null, an op has at most ``chunks_per_op`` groups
    of at least 2,048 compute cycles (a GEMM at most one per fold): the step then
    depends on ``chunks_per_op`` and does not settle as it grows (AlexNet at batch
    32: 19.10 M cycles at 8, 20.04 M at 4,096).  With ``group_cycles`` (the default:
    4,096, with ``chunks_per_op`` 4,096), every op of the step is cut into groups of
    at most that many cycles of compute and of DRAM transfer
    (:mod:`accelsim.timing.groups`), and the step converges as ``group_cycles``
    shrinks, until groups near the DRAM latency expose it once per group;
    ``chunks_per_op`` then caps the groups of the step's longest op, which lengthens
    every group of that step alike.  The default is within 0.5 % of the converged
    step on every model of the suite.
    """

    convention: ConventionField = Field(
        default=Convention.ACCELSIM,
        description="Timing convention: accelsim, or scalesim to reproduce SCALE-Sim 3.0.0's"
        " compute cycles and SRAM counts.",
    )
    psums: Annotated[PsumPolicy, Field(strict=False)] = Field(
        default=PsumPolicy.CHUNK,
        description="ws/is partial sums: chunk the streamed dimension so they fit on chip,"
        " or spill them to DRAM and read them back when they do not fit.",
    )
    fold_overlap: bool = Field(
        default=False,
        description="Pipeline a GEMM's folds: the next fold's stationary operand loads"
        " (or, output stationary, the last fold's outputs drain) while the current fold"
        " streams, so an op of F folds takes (F - 1) * max(T, R) + 2R + C + T - 2"
        " compute cycles instead of F * (2R + C + T - 2).  Only with convention"
        " accelsim: SCALE-Sim 3.0.0 never overlaps folds.",
    )
    chunks_per_op: Annotated[int, Field(gt=0, le=4096)] = Field(
        default=DEFAULT_CHUNKS_PER_OP,
        description="Most tile groups (engine events) an op is cut into.",
    )
    group_cycles: PositiveInt | None = Field(
        default=DEFAULT_GROUP_CYCLES,
        description="Longest tile group, in cycles of compute or of DRAM transfer at"
        " the channel's bandwidth, the same for every op of a step (longer if the"
        " step's longest op would need more than chunks_per_op groups); null cuts each"
        " op into at most chunks_per_op groups of at least 2,048 compute cycles.",
    )
    engine: Annotated[EngineKind, Field(strict=False)] = Field(
        default=EngineKind.AUTO,
        description="simpy (the reference engine), compiled (the same events in a Numba"
        " loop, identical results) or auto (SimPy until the events simulated would have"
        " paid for loading the compiled engine).",
    )

    @model_validator(mode="after")
    def _check_fold_overlap(self) -> TimingSpec:
        if self.fold_overlap and self.convention is Convention.SCALESIM:
            raise RuleViolation(
                "fold_overlap",
                "needs convention: accelsim (the scalesim convention reproduces"
                " SCALE-Sim 3.0.0, which runs every fold's fill and drain)",
                self.fold_overlap,
            )
        return self


class LoweringSpec(Spec):
    """How layers become ops: strided input gradients, epilogue fusion and how the step
    is compiled into kernels."""

    strided_dx: Annotated[StridedDx, Field(strict=False)] = Field(
        default=StridedDx.SKIP_ZEROS,
        description="Input gradient of strided convolutions: skip_zeros (stride_h x stride_w"
        " phase sub-convolutions that never multiply inserted zeros) or zero_insert (one"
        " dense convolution over the zero-inserted gradient).",
    )
    fuse_epilogues: Annotated[EpilogueFusion, Field(strict=False)] = Field(
        default=EpilogueFusion.NONE,
        description="Which vector ops take their input tile by tile, on chip, from the"
        " op producing it (a GEMM's output tile before it leaves the chip): none,"
        " elementwise (activations and their derivatives, residual adds, gradient sums,"
        " dropout, bias gradients) or all (batchnorm too, with its statistics known"
        " before its input arrives, as with running statistics).",
    )
    # Left out of dumps (resolved_config.yaml, sweep point identities) at its default.
    compile: Annotated[CompileMode, Field(strict=False)] = Field(
        default=CompileMode.EAGER,
        exclude_if=lambda v: v is CompileMode.EAGER,
        description="How the step is compiled into kernels: eager (every op a kernel,"
        " paying timing.op_overhead_cycles) or fused (as an XLA-like compiler: chains of"
        " vector ops fused into their producer, attention as one flash-attention kernel"
        " per pass whose score tiles stay on chip, fixed costs once per kernel"
        " (timing.kernel_overhead_cycles) and the rest of op_overhead_cycles once per"
        " program, a step).",
    )
    # Left out of dumps at its default, as compile is.
    attention: Annotated[AttentionKernels, Field(strict=False)] = Field(
        default=AttentionKernels.FLASH,
        exclude_if=lambda v: v is AttentionKernels.FLASH,
        description="Under compile fused, how attention's core runs: flash (one"
        " flash-attention kernel per pass, the scores on chip) or separate (QK^T, the"
        " softmax chain and AV as kernels of their own, the scores through DRAM, as XLA"
        " compiles eager PyTorch attention). Eager runs ignore it.",
    )


class DataParallelSpec(Spec):
    """How data parallelism all-reduces the gradients (with ``assignment:
    data_parallel``).

    ``bucket_bytes`` groups the gradients as PyTorch's ``DistributedDataParallel``
    does (its ``bucket_cap_mb``, 25 MiB by default: 26,214,400 bytes): in the
    order backward makes them, into buckets of at most ``bucket_bytes``, each
    all-reduced once its last gradient is final, one bucket after another.
    """

    bucket_bytes: PositiveInt | None = Field(
        default=None,
        description="Gradients all-reduced together, at most this many bytes a bucket, in"
        " the order backward makes them (a larger gradient is a bucket of its own); each"
        " bucket's all-reduce starts when its last gradient is final and the previous"
        " bucket's all-reduce has ended, as PyTorch DDP's buckets (bucket_cap_mb=25:"
        " 26214400); only with assignment: data_parallel.  Null: one all-reduce per"
        " gradient, all free to run at once.",
    )
    symmetry: Annotated[Symmetry, Field(strict=False)] = Field(
        default=Symmetry.AUTO,
        description="auto: where the replicas do the same work and their all-reduces load"
        " every processor's links alike, simulate one replica of each local batch size"
        " (its links alone carrying the all-reduces) and copy its timing to the others,"
        " the same numbers as simulating all; full: simulate every replica.",
    )


MAX_EPOCHS = 100_000


class TrainingSpec(Spec):
    """Length of training, for whole-training estimates of techniques."""

    # Whole-training plans hold a few numbers per epoch.
    epochs: Annotated[int, Field(gt=0, le=MAX_EPOCHS)] = Field(
        default=1, description="Epochs of training, for whole-training estimates."
    )
    batches_per_epoch: PositiveInt = Field(
        default=1, description="Training steps per epoch, for whole-training estimates."
    )


class OnCapacity(str, Enum):
    """What a run does when a schedule's DRAM footprint (or, under a parallel plan, a
    processor's memory) exceeds a channel's capacity."""

    ERROR = "error"
    REPORT = "report"


class RunSpec(Spec):
    """A run file, before the files it references are loaded."""

    name: PathName = Field(description="The run's name: its directory under --out.")
    description: str = Field(default="", description="Free text.")
    hardware: Name = Field(description="The hardware file, relative to the run file.")
    workload: Name = Field(
        description="The workload file, relative to the run file: a layer table (.yaml) or a"
        " SCALE-Sim topology (.csv)."
    )
    workload_variant: Name | None = Field(
        default=None, description="One of the workload's variants (e.g. cifar10), or null."
    )
    energy: Name = Field(description="The energy table, relative to the run file.")
    mode: Annotated[RunMode, Field(strict=False)] = Field(
        default=RunMode.TRAINING,
        # A training run dumps (and identifies its sweep points) as before.
        exclude_if=lambda v: v is RunMode.TRAINING,
        description="training (a training step: forward, loss, backward, updates) or"
        " forward (the forward pass alone, as an inference or a profiled forward runs it:"
        " no loss, no backward, no update, dropout off, no stash kept; no technique).",
    )
    batch_size: PositiveInt = Field(default=1, description="Samples per training step.")
    optimizer: OptimizerSpec = Field(
        default_factory=OptimizerSpec, description="The optimizer whose update ends the step."
    )
    timing: TimingSpec = Field(
        default_factory=TimingSpec,
        description="Timing convention, partial sums, fold overlap, tile groups and engine.",
    )
    lowering: LoweringSpec = Field(
        default_factory=LoweringSpec, description="How layers become ops."
    )
    assignment: Annotated[AssignmentPolicy, Field(strict=False)] = Field(
        default=AssignmentPolicy.SINGLE,
        description="single (the whole step on processor 0) or data_parallel (the batch"
        " split over the processors, gradients all-reduced on a ring).",
    )
    # Left out of dumps (resolved_config.yaml, sweep point identities) at its default.
    data_parallel: DataParallelSpec = Field(
        default_factory=DataParallelSpec,
        exclude_if=lambda v: v == DataParallelSpec(),
        description="How data parallelism all-reduces the gradients: in buckets or one"
        " gradient at a time.",
    )
    # Left out of dumps at its default; a run that sets it has its memory checked.
    parallel: ParallelSpec | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="The parallel plan (tensor: the tensor-parallel degree).  Set, the"
        " run's memory per processor is counted, checked against hardware.dram.capacity_gib"
        " (on_capacity) and reported.  Null: no plan, no memory check.",
    )
    precision: PrecisionSpec | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="The precision every GEMM runs at (gemm: one of the hardware's"
        " array.rates) and the bytes of each tensor class under it.  Null: the hardware"
        " file's array.precision and word_bytes.",
    )
    overrides: dict[str, Any] = Field(
        default_factory=dict,
        description="Dotted keys into the referenced files, validated like them:"
        " hardware.array.rows: 64.",
    )
    training: TrainingSpec = Field(
        default_factory=TrainingSpec,
        description="Length of training, for the techniques' whole-training estimates.",
    )
    techniques: dict[Name, dict[str, Any] | None] = Field(
        default_factory=dict,
        description="Technique name -> its settings (see the techniques' tables); they"
        " compose in the order the techniques declare, whatever order the file lists them"
        " in.",
    )
    seed: NonNegativeInt = Field(
        default=0,
        description="Seeds the random patterns techniques draw (tile masks); the baseline"
        " has no random effects.",
    )
    iso_area: IsoArea = Field(
        default=False,
        exclude_if=lambda v: v is False,
        description="Run the techniques' steps on hardware of the baseline's area: true or"
        " array shrinks the main array (rows and columns), sram its operand buffers, to"
        " pay for the hardware the techniques add (ADA-GP's predictor array and SRAM);"
        " false: their hardware is added. The baseline step keeps the hardware file's.",
    )
    on_capacity: Annotated[OnCapacity, Field(strict=False)] = Field(
        default=OnCapacity.ERROR,
        description="When a pipeline schedule's DRAM footprint, or a processor's memory"
        " under a parallel plan, exceeds a channel's hardware.dram.capacity_gib: refuse the"
        " run (error) or simulate it and report it as not fitting (report).",
    )

    @model_validator(mode="after")
    def _check_buckets(self) -> RunSpec:
        if (
            self.data_parallel.bucket_bytes is not None
            and self.assignment is not AssignmentPolicy.DATA_PARALLEL
        ):
            raise RuleViolation(
                "data_parallel.bucket_bytes",
                "needs assignment: data_parallel (the step of another assignment"
                " all-reduces no gradient among replicas)",
                self.data_parallel.bucket_bytes,
            )
        return self
