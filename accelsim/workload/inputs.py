"""A workload's input per sample: an image, a feature vector, token ids or a
sequence of float vectors (one of :data:`InputSpec`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from accelsim.config.base import PositiveInt, Spec

KIND = "Which kind of input or layer this entry is."

INPUT_NAME = "input"
"""The name layers read the (first) model input by."""


class ImageInput(Spec):
    kind: Literal["image"] = Field(description=KIND)
    channels: PositiveInt = Field(description="Channels of each sample's image.")
    height: PositiveInt = Field(description="Height of each sample's image, in pixels.")
    width: PositiveInt = Field(description="Width of each sample's image, in pixels.")


class VectorInput(Spec):
    kind: Literal["vector"] = Field(description=KIND)
    features: PositiveInt = Field(description="Features of each sample.")


class TokenInput(Spec):
    kind: Literal["tokens"] = Field(description=KIND)
    length: PositiveInt = Field(description="Tokens of each sample's sequence.")


class SequenceInput(Spec):
    """Float vectors in a sequence (hidden states), for a block without an embedding."""

    kind: Literal["sequence"] = Field(description=KIND)
    length: PositiveInt = Field(description="Positions of each sample's sequence.")
    features: PositiveInt = Field(description="Features at each position.")


InputSpec = Annotated[
    ImageInput | VectorInput | TokenInput | SequenceInput, Field(discriminator="kind")
]
