"""``run.iso_area``: whether a technique's steps run on hardware shrunk to the
baseline's area, and what shrinks."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

from pydantic import Field


class Shrink(str, Enum):
    """What an iso-area run shrinks to pay for the hardware its techniques add."""

    ARRAY = "array"
    SRAM = "sram"


IsoArea = bool | Annotated[Shrink, Field(strict=False)]
"""``false``; ``true`` (the main array shrinks); or ``array`` or ``sram``."""


def shrinks(setting: IsoArea) -> Shrink | None:
    """What ``setting`` shrinks (None: nothing, the techniques' hardware is added)."""
    if setting is True:
        return Shrink.ARRAY
    if setting is False:
        return None
    return setting
