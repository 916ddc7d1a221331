"""An array's MAC rates: the MACs one PE does per cycle at each precision it runs
(``array.rates``, :class:`~accelsim.config.hardware.ArraySpec`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, PlainSerializer

from accelsim.config.base import Precision, PrecisionField

MAX_RATE = 64
"""Most MACs a PE does per cycle at one precision."""
Rate = Annotated[int, Field(gt=0, le=MAX_RATE)]


def _rate_pairs(value: Any) -> Any:
    """An ``array.rates`` mapping as pairs (a hardware spec is hashed)."""
    return tuple(value.items()) if isinstance(value, Mapping) else value


def rate_mapping(pairs: tuple[tuple[Precision, int], ...]) -> dict[str, int]:
    """``array.rates`` as the file writes it."""
    return {precision.value: rate for precision, rate in pairs}


Rates = Annotated[
    tuple[tuple[PrecisionField, Rate], ...],
    Field(strict=False, min_length=1, max_length=len(Precision)),
    BeforeValidator(_rate_pairs),
    PlainSerializer(rate_mapping),
]
"""MACs per PE per cycle at each precision, written ``{bf16: 1, fp8: 2}``."""
