"""What every layer of a workload's table has (:mod:`accelsim.workload.model` adds each
kind's own fields)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from accelsim.config.base import Name, Spec

NonNegative = Annotated[int, Field(ge=0)]


class Block(Spec):
    """Which copy of a repeated block a layer belongs to (set by a ``repeat`` entry)."""

    repeat: Name = Field(description="The repeat's name, the prefix of its layers' names.")
    index: NonNegative = Field(description="The copy, from 0.")


class LayerBase(Spec):
    """What every layer has: a unique name and the layers it reads."""

    name: Name = Field(description="The layer's name, unique in the workload.")
    inputs: list[Name] | None = Field(
        default=None, description="The layers it reads; null: the previous layer."
    )
    block: Block | None = Field(
        default=None,
        exclude_if=lambda v: v is None,  # a table without repeats dumps (and identifies) as before
        description="The repeated block's copy the layer is part of: set by a repeat entry"
        " of layers, null for a layer written on its own.",
    )
