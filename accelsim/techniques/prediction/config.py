"""ADA-GP's settings (its predictor array, network and schedule) and where their
defaults come from."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

from pydantic import Field, model_validator

from accelsim.config.base import (
    Dataflow,
    DataflowField,
    Kib,
    NonNegativeInt,
    NonNegativeKib,
    PositiveFloat,
    Precision,
    PrecisionField,
    RuleViolation,
    Spec,
)
from accelsim.config.hardware import ArrayDim
from accelsim.report.training import Source
from accelsim.techniques.prediction.predictor import PredictorNetSpec
from accelsim.techniques.provenance import Origin

NAME = "gradient_prediction"
"""ADA-GP's name in run files, and the owner of the ops it adds."""

PREDICTOR = "predictor"
"""The name of the predictor array unit (``placement: dedicated``)."""

Fraction = Annotated[float, Field(ge=0, le=1)]

REIMPL = "TAMU CSCE-614 re-implementation report (k3shavkish0re/ADAGP), not the paper"
_OUR_ARRAY = "our choice: a quarter of the default main array's PEs, bf16, WS"
_OUR_SCHEDULE = "our choice: the paper's adaptive rule is not available to us"
DEFAULTS: dict[str, Origin] = {
    "placement": (Source.RECALLED, "a predictor unit beside the main array, recalled"),
    **{
        f"array.{key}": (Source.OURS, _OUR_ARRAY)
        for key in ("rows", "cols", "dataflow", "precision", "ifmap_kib", "filter_kib")
    },
    "array.ofmap_kib": (Source.OURS, _OUR_ARRAY),
    "array.weights_kib": (Source.OURS, "our choice: 2 MiB of predictor weight SRAM"),
    "network.pool": (Source.REIMPLEMENTATION, REIMPL + ": pool to 4x4"),
    "network.conv_layers": (Source.REIMPLEMENTATION, REIMPL + ": 2-4 conv layers"),
    "network.channels": (Source.REIMPLEMENTATION, REIMPL + ": 64 channels"),
    "schedule.warmup_epochs": (Source.REIMPLEMENTATION, REIMPL + ": 5 warm-up epochs"),
    "schedule.policy": (Source.PAPER, "the paper adapts when and how long prediction is used"),
    **{
        f"schedule.{key}": (Source.OURS, _OUR_SCHEDULE)
        for key in ("gp_fraction", "start", "step", "minimum", "maximum", "error_threshold")
    },
    "schedule.error_trace": (
        Source.OURS,
        "none: our synthetic predictor error floor + (1 - floor) exp(-epoch / decay_epochs)",
    ),
    "schedule.errors": (
        Source.OURS,
        "synthetic: the measured digits trace is of our linear predictor, whose error"
        " (0.9-1.1) is not on the scale of error_threshold",
    ),
    "schedule.floor": (Source.OURS, "our synthetic error curve"),
    "schedule.decay_epochs": (Source.OURS, "our synthetic error curve"),
}
"""Where each setting's default comes from (``../shared/techniques.md`` section 2)."""

CURVE_KEYS = frozenset({"schedule.floor", "schedule.decay_epochs"})
"""The synthetic error curve's parameters: our choice whichever file sets them."""

CURVE_SET = "our synthetic error curve's parameter, set in the run file: our choice, not measured"


class Placement(str, Enum):
    DEDICATED = "dedicated"
    SHARED = "shared"


class ErrorSignal(str, Enum):
    SYNTHETIC = "synthetic"
    MEASURED = "measured"


class Policy(str, Enum):
    FIXED = "fixed"
    ADAPTIVE = "adaptive"


class PredictorArraySpec(Spec):
    """The dedicated predictor array of each processor and its operand buffers [D].

    ``weights_kib`` is the predictor's own weight SRAM (either placement): its conv
    and FC weights and their Adam state stay there when they fit, smallest tensors
    first, and the rest stream from DRAM on every use [D].
    """

    rows: ArrayDim = Field(default=64, description="PE rows of the predictor array.")
    cols: ArrayDim = Field(default=64, description="PE columns of the predictor array.")
    dataflow: DataflowField = Field(
        default=Dataflow.WS, description="Dataflow of the predictor array."
    )
    precision: PrecisionField = Field(
        default=Precision.BF16, description="MAC precision of the predictor array."
    )
    ifmap_kib: Kib = Field(default=256.0, description="The predictor array's input SRAM.")
    filter_kib: Kib = Field(default=1024.0, description="The predictor array's weight SRAM.")
    ofmap_kib: Kib = Field(default=256.0, description="The predictor array's output SRAM.")
    weights_kib: NonNegativeKib = Field(
        default=2048.0,
        description="SRAM for the predictor's weights and their Adam state, kept smallest"
        " tensors first; the rest stream from DRAM on every use.",
    )


class ScheduleSpec(Spec):
    """When GP steps run instead of BP steps.

    ``fixed`` uses ``gp_fraction`` after warm-up.  ``adaptive`` starts at
    ``start`` and each epoch moves the GP share by ``step`` (within
    ``[minimum, maximum]``): up while the epoch's mean predictor error is below
    ``error_threshold``, down otherwise.  Errors come from ``error_trace`` (a CSV
    of ``epoch,batch,predictor_error``, relative to the run file) or, without one,
    from ``floor + (1 - floor) * exp(-epoch / decay_epochs)`` [D].
    """

    warmup_epochs: NonNegativeInt = Field(
        default=5, description="Epochs of backpropagation (BP steps only) before any GP step."
    )
    policy: Annotated[Policy, Field(strict=False)] = Field(
        default=Policy.ADAPTIVE,
        description="fixed (a gp_fraction share of GP steps after warm-up) or adaptive (the"
        " share moves by step each epoch with the predictor error).",
    )
    gp_fraction: Fraction = Field(
        default=0.5, description="Share of GP steps after warm-up, with policy fixed."
    )
    start: Fraction = Field(default=0.5, description="Adaptive: the GP share after warm-up.")
    step: Fraction = Field(default=0.1, description="Adaptive: the GP share's change per epoch.")
    minimum: Fraction = Field(default=0.0, description="Adaptive: the lowest GP share.")
    maximum: Fraction = Field(default=0.9, description="Adaptive: the highest GP share.")
    error_threshold: PositiveFloat = Field(
        default=0.2,
        description="Adaptive: the share rises while the epoch's mean predictor error is"
        " below this, and falls otherwise.",
    )
    error_trace: str | None = Field(
        default=None,
        description="CSV of epoch,batch,predictor_error (relative to the run file); null:"
        " the synthetic curve floor + (1 - floor) exp(-epoch / decay_epochs).",
    )
    errors: Annotated[ErrorSignal, Field(strict=False)] = Field(
        default=ErrorSignal.SYNTHETIC,
        description="Without error_trace: synthetic (our curve: floor, decay_epochs) or"
        " measured (the bundled digits predictor-error trace, the CNN's for a model with"
        " convolutions, else the MLP's: its mean over layers, epoch e of E at trace"
        " epoch floor(e T / E)).",
    )
    floor: Fraction = Field(default=0.05, description="Synthetic error curve: its limit.")
    decay_epochs: PositiveFloat = Field(
        default=8.0, description="Synthetic error curve: its decay constant, in epochs."
    )

    @model_validator(mode="after")
    def _check_range(self) -> ScheduleSpec:
        if self.minimum > self.maximum:
            raise RuleViolation("minimum", f"larger than maximum ({self.maximum:g})", self.minimum)
        return self


class GradientPredictionConfig(Spec):
    """``techniques.gradient_prediction`` in a run file."""

    placement: Annotated[Placement, Field(strict=False)] = Field(
        default=Placement.DEDICATED,
        description="dedicated (a predictor array beside each main array) or shared (the"
        " predictor's work time-shares the main array).",
    )
    array: PredictorArraySpec = Field(
        default_factory=PredictorArraySpec, description="The dedicated predictor array."
    )
    network: PredictorNetSpec = Field(
        default_factory=PredictorNetSpec, description="The predictor network."
    )
    schedule: ScheduleSpec = Field(
        default_factory=ScheduleSpec, description="When GP steps run instead of BP steps."
    )
