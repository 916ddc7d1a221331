"""Shared pydantic base for every validated spec, and the enums used after load.

Specs are pydantic v2 models that are frozen, forbid unknown keys and use
strict types (a bool is not an int, a string is not a number).  Enums are
matched by their exact lower-case value: ``WS`` is an error, never a silent
fallback.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class Spec(BaseModel):
    """Base of every validated spec: frozen, strict, no unknown keys."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)


class Dataflow(str, Enum):
    """Which operand stays in the PEs: outputs, weights or inputs."""

    OS = "os"
    WS = "ws"
    IS = "is"


class Precision(str, Enum):
    """Arithmetic precision of an array or vector unit (keys of the energy tables)."""

    INT8 = "int8"
    FP8 = "fp8"
    INT16 = "int16"
    FP16 = "fp16"
    BF16 = "bf16"
    FP32 = "fp32"


PRECISION_BYTES = {
    Precision.INT8: 1,
    Precision.FP8: 1,
    Precision.INT16: 2,
    Precision.FP16: 2,
    Precision.BF16: 2,
    Precision.FP32: 4,
}
"""Bytes of one operand word at each precision."""


class Convention(str, Enum):
    """Timing convention: SCALE-Sim 3.0.0 compatible, or accelsim's own."""

    SCALESIM = "scalesim"
    ACCELSIM = "accelsim"


# Enum fields accept the YAML string of the exact value (strict mode would only
# accept enum instances); any other spelling is an error listing the choices.
DataflowField = Annotated[Dataflow, Field(strict=False)]
PrecisionField = Annotated[Precision, Field(strict=False)]
ConventionField = Annotated[Convention, Field(strict=False)]

# Upper bounds keep every derived count inside int64 and every result finite;
# each is far beyond any real design (docs/reliability.md).
MAX_INT = 2**31 - 1
"""Largest integer setting (sizes, counts, cycles of latency)."""
MAX_FLOAT = 1e12
"""Largest real setting without a bound of its own."""

PositiveInt = Annotated[int, Field(gt=0, le=MAX_INT)]
NonNegativeInt = Annotated[int, Field(ge=0, le=MAX_INT)]
PositiveFloat = Annotated[float, Field(gt=0, le=MAX_FLOAT, allow_inf_nan=False)]
NonNegativeFloat = Annotated[float, Field(ge=0, le=MAX_FLOAT, allow_inf_nan=False)]
# On-chip capacities: at most 1 TiB per buffer.
Kib = Annotated[float, Field(gt=0, le=2**30, allow_inf_nan=False)]
NonNegativeKib = Annotated[float, Field(ge=0, le=2**30, allow_inf_nan=False)]
# Energy per event: at most 1 uJ (10^6 pJ), about 10^4 times a DRAM bit's.
Picojoules = Annotated[float, Field(gt=0, le=1e6, allow_inf_nan=False)]
NonNegativePicojoules = Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)]
# Only bandwidths may be infinite (an ideal memory); NaN fails the lower bound.  Below
# 1/1000 byte per cycle a step's cycles leave the range the simulator counts in.
Bandwidth = Annotated[float, Field(ge=1e-3, allow_inf_nan=True)]
Name = Annotated[str, Field(min_length=1)]

MAX_NAME_CHARS = 200
"""Longest run or model name: it names a directory, and file names stop at 255 bytes."""
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# A run or suite model name becomes a directory name: one plain path component.
PathName = Annotated[str, Field(pattern=f"^{NAME_PATTERN.pattern}$", max_length=MAX_NAME_CHARS)]


class RuleViolation(ValueError):
    """A cross-field rule broken inside a spec, raised from a model validator.

    The loader reports it at ``path`` relative to the model that raised it,
    instead of pydantic's generic model-level location.

    Args:
        path: Dotted key path relative to the validating model.
        message: What is wrong.
        value: The offending value.
    """

    def __init__(self, path: str, message: str, value: object) -> None:
        super().__init__(f"{path}: {message} (got {value!r})")
        self.path = path
        self.message = message
        self.value = value
