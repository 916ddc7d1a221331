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
    tied_to: Name | None = Field(
        default=None,
        description="An earlier embedding layer whose table is this layer's weight (tied"
        " embeddings, as GPT-2's output layer): no parameter of its own; its weight"
        " gradient is the table's, to which the embedding then adds its own",
    )


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
    causal: bool = Field(
        default=False,
        description="Mask every score of a later token (a decoder's attention): one select"
        " per score forward and backward; the GEMMs stay whole, as eager PyTorch computes them",
    )


class GroupNorm(LayerBase):
    """Group normalisation (Wu and He, 2018): statistics per sample and channel group."""

    kind: Literal["groupnorm"]
    groups: PositiveInt = Field(description="Channel groups; must divide the channels")


class RmsNorm(LayerBase):
    """RMS normalisation (Zhang and Sennrich, 2019): a scale and no shift, no mean."""

    kind: Literal["rmsnorm"]


class ConvTranspose2d(LayerBase):
    """Transposed convolution (PyTorch's ConvTranspose2d): the adjoint of a conv2d."""

    kind: Literal["conv_transpose2d"]
    out_channels: PositiveInt = Field(description="Output channels")
    kernel: Pair = Field(description="Filter height and width")
    stride: Pair = Field(default=1, description="Stride of the adjoint convolution")
    padding: PairOrZero = Field(default=0, description="Padding of the adjoint convolution")
    output_padding: PairOrZero = Field(
        default=0, description="Extra rows and columns on one side of the output"
    )
    dilation: Pair = Field(default=1, description="Filter dilation")
    groups: PositiveInt = Field(default=1, description="Groups; must divide both channel counts")
    bias: bool = Field(default=False, description="Whether it adds a bias per output channel")


class UpsampleMode(str, Enum):
    """How ``upsample`` interpolates, with its vector-op cost per output element."""

    NEAREST = "nearest"
    BILINEAR = "bilinear"

    @property
    def forward_ops(self) -> int:
        # Nearest copies one input; bilinear weighs four neighbours (4 multiplies, 3 adds).
        return {"nearest": 1, "bilinear": 7}[self.value]

    @property
    def backward_ops(self) -> int:
        # Each output gradient goes back to its one (nearest) or four weighted (bilinear,
        # a multiply and an accumulate each) input positions.
        return {"nearest": 1, "bilinear": 8}[self.value]


class Upsample(LayerBase):
    """Upsampling or interpolation of a feature map to a larger size."""

    kind: Literal["upsample"]
    mode: Annotated[UpsampleMode, Field(strict=False, description="nearest or bilinear")] = (
        UpsampleMode.NEAREST
    )
    scale: Pair | None = Field(default=None, description="Whole-number scale factor per side")
    size: Annotated[list[PositiveInt], Field(min_length=2, max_length=2)] | None = Field(
        default=None, description="Output height and width (instead of scale)"
    )


class Mul(LayerBase):
    """Element-wise multiply: two inputs, the second broadcast over the first (a
    squeeze-and-excitation gate C x 1 x 1 over C x H x W), or one input times a constant."""

    kind: Literal["mul"]


class MatMul(LayerBase):
    """A product of two activations ``A . B`` per sample, per head when ``heads`` > 1."""

    kind: Literal["matmul"]
    heads: PositiveInt = Field(
        default=1,
        description="Independent products per sample (a batched matmul): each input's"
        " features are ``heads`` equal slices, one per product",
    )
    transpose_b: bool = Field(default=False, description="Multiply by B's transpose (QK^T)")


class Split(LayerBase):
    """One part of its input cut along the channels (or features): split or chunk."""

    kind: Literal["split"]
    sizes: Annotated[list[PositiveInt], Field(min_length=1)] | None = Field(
        default=None, description="The parts' sizes, which add up to the channels (split)"
    )
    chunks: PositiveInt | None = Field(
        default=None, description="Equal parts, the last smaller if need be (torch.chunk)"
    )
    index: NonNegative = Field(description="Which part this layer outputs")


class AdaptiveAvgPool(LayerBase):
    """Average pooling to a given output size, with PyTorch's adaptive windows."""

    kind: Literal["adaptive_avgpool"]
    output: Pair = Field(description="Output height and width")


class VectorLayer(LayerBase):
    """An operation without a layer kind of its own, costed as a generic vector op:
    one op per output element forward and one per input element backward."""

    kind: Literal["vector"]
    op: Name = Field(description="The source operation it stands for, e.g. an ONNX op type")
    layout: Literal["chw", "features", "sequence"] = Field(description="Layout of its output")
    shape: Annotated[list[PositiveInt], Field(min_length=1, max_length=3)] = Field(
        description="Its output's dimensions per sample"
    )


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
    | Attention
    | GroupNorm
    | RmsNorm
    | ConvTranspose2d
    | Upsample
    | Mul
    | MatMul
    | Split
    | AdaptiveAvgPool
    | VectorLayer,
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
