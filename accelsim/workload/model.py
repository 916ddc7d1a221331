"""Layer-table spec of a DNN workload, as written in ``workloads/*.yaml``.

A workload is an input description plus an ordered list of layers.  Each
layer reads the previous layer's output unless it names its ``inputs``
explicitly (residual adds, concats, branches).  Shapes are per sample and are
inferred by :mod:`accelsim.lowering.infer`; the batch size is a run setting.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import Field

from accelsim.config.base import Name, PositiveInt, Spec

NonNegative = Annotated[int, Field(ge=0)]
Pair = PositiveInt | Annotated[list[PositiveInt], Field(min_length=2, max_length=2)]
PairOrZero = NonNegative | Annotated[list[NonNegative], Field(min_length=2, max_length=2)]


def pair(value: int | list[int]) -> tuple[int, int]:
    """Expand ``3`` to ``(3, 3)``; keep ``[3, 1]`` as ``(3, 1)``."""
    if isinstance(value, int):
        return (value, value)
    return (value[0], value[1])


class ImageInput(Spec):
    kind: Literal["image"]
    channels: PositiveInt
    height: PositiveInt
    width: PositiveInt


class VectorInput(Spec):
    kind: Literal["vector"]
    features: PositiveInt


class TokenInput(Spec):
    kind: Literal["tokens"]
    length: PositiveInt


InputSpec = Annotated[ImageInput | VectorInput | TokenInput, Field(discriminator="kind")]


class LayerBase(Spec):
    name: Name
    inputs: list[Name] | None = None


class Conv2d(LayerBase):
    kind: Literal["conv2d"]
    out_channels: PositiveInt
    kernel: Pair
    stride: Pair = 1
    padding: PairOrZero = 0
    dilation: Pair = 1
    groups: PositiveInt = 1
    bias: bool = False


class Linear(LayerBase):
    kind: Literal["linear"]
    out_features: PositiveInt
    bias: bool = True


class MaxPool(LayerBase):
    kind: Literal["maxpool"]
    kernel: Pair
    stride: Pair | None = None
    padding: PairOrZero = 0


class AvgPool(LayerBase):
    kind: Literal["avgpool"]
    kernel: Pair
    stride: Pair | None = None
    padding: PairOrZero = 0


class GlobalAvgPool(LayerBase):
    kind: Literal["global_avgpool"]


class BatchNorm(LayerBase):
    kind: Literal["batchnorm"]


class LayerNorm(LayerBase):
    kind: Literal["layernorm"]


class ActivationFunction(str, Enum):
    """Element-wise non-linearities, with their vector-op cost per element."""

    RELU = "relu"
    RELU6 = "relu6"
    GELU = "gelu"
    SIGMOID = "sigmoid"
    TANH = "tanh"
    SILU = "silu"
    HARDSWISH = "hardswish"

    @property
    def forward_ops(self) -> int:
        # Compare/select ops; transcendental functions counted as a few ops each
        # (exp ~ 3, tanh ~ 4), a common vector-unit costing assumption.
        return {
            "relu": 1,
            "relu6": 2,
            "gelu": 8,
            "sigmoid": 4,
            "tanh": 4,
            "silu": 5,
            "hardswish": 4,
        }[self.value]

    @property
    def backward_ops(self) -> int:
        return {
            "relu": 1,
            "relu6": 2,
            "gelu": 10,
            "sigmoid": 3,
            "tanh": 3,
            "silu": 6,
            "hardswish": 3,
        }[self.value]


class Activation(LayerBase):
    kind: Literal["activation"]
    function: Annotated[ActivationFunction, Field(strict=False)]


class Add(LayerBase):
    kind: Literal["add"]


class Concat(LayerBase):
    kind: Literal["concat"]


class Flatten(LayerBase):
    kind: Literal["flatten"]


class Bridge(LayerBase):
    """Its input handed on as a tensor of ``shape``, of any size, at no cost: it stands
    for what the table leaves out between two layers (padding, pooling, residual
    adds), as between the rows of a SCALE-Sim topology.  Three sizes are a feature
    map (channels, height, width), two a sequence (tokens, features), one a feature
    vector."""

    kind: Literal["bridge"]
    shape: Annotated[list[PositiveInt], Field(min_length=1, max_length=3)] = Field(
        description="the per-sample shape the next layer sees"
    )


class Softmax(LayerBase):
    kind: Literal["softmax"]


class Dropout(LayerBase):
    """Random dropout at ``rate``: a mask is drawn, applied, and kept for backward."""

    kind: Literal["dropout"]
    rate: Annotated[float, Field(ge=0, lt=1)]


class TokenSelect(LayerBase):
    """Pick one token of a sequence (e.g. BERT's [CLS] token for the pooler)."""

    kind: Literal["token_select"]
    index: Annotated[int, Field(ge=0)] = 0


class CrossEntropy(LayerBase):
    """Softmax plus negative log-likelihood; the loss that starts the backward pass."""

    kind: Literal["cross_entropy"]


class Embedding(LayerBase):
    kind: Literal["embedding"]
    num_embeddings: PositiveInt
    embedding_dim: PositiveInt


class Lstm(LayerBase):
    """One LSTM layer, unrolled over the sequence (stack entries for depth)."""

    kind: Literal["lstm"]
    hidden_size: PositiveInt


class Attention(LayerBase):
    """Multi-head self-attention: QKV projection, per-head QK^T and AV, output projection."""

    kind: Literal["attention"]
    heads: PositiveInt
    bias: bool = True


Layer = Annotated[
    Conv2d
    | Linear
    | MaxPool
    | AvgPool
    | GlobalAvgPool
    | BatchNorm
    | LayerNorm
    | Activation
    | Add
    | Concat
    | Flatten
    | Bridge
    | Softmax
    | Dropout
    | TokenSelect
    | CrossEntropy
    | Embedding
    | Lstm
    | Attention,
    Field(discriminator="kind"),
]


class VariantSpec(Spec):
    """A named variant of a workload (e.g. CIFAR-10): dotted-key overrides of the file.

    Keys address the workload file, e.g. ``input.height`` or
    ``layers[fc].out_features``; a run file selects it by ``workload_variant``.
    """

    description: str = ""
    overrides: dict[str, Any] = Field(min_length=1)


class Workload(Spec):
    """A model: its input per sample and its layers in execution order."""

    name: Name
    description: str = ""
    source: str = ""
    input: InputSpec
    layers: list[Layer] = Field(min_length=1)
    variants: dict[Name, VariantSpec] = Field(default_factory=dict)
    notes: list[str] | None = Field(
        default=None,
        description="what the table assumes beyond its layers (an imported file's"
        " simplifications); printed with a run's results.  None when there are none,"
        " so that a table without them dumps (and identifies sweep points) as before",
    )
