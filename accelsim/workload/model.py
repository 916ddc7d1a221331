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
from accelsim.workload.activations import ActivationFunction as ActivationFunction
from accelsim.workload.inputs import KIND, InputSpec
from accelsim.workload.layer_base import Block as Block
from accelsim.workload.layer_base import LayerBase as LayerBase
from accelsim.workload.layer_base import NonNegative
from accelsim.workload.moe import Moe as Moe

Pair = PositiveInt | Annotated[list[PositiveInt], Field(min_length=2, max_length=2)]
PairOrZero = NonNegative | Annotated[list[NonNegative], Field(min_length=2, max_length=2)]


def pair(value: int | list[int]) -> tuple[int, int]:
    """Expand ``3`` to ``(3, 3)``; keep ``[3, 1]`` as ``(3, 1)``."""
    if isinstance(value, int):
        return (value, value)
    return (value[0], value[1])


class Conv2d(LayerBase):
    kind: Literal["conv2d"] = Field(description=KIND)
    out_channels: PositiveInt = Field(description="Filters (output channels).")
    kernel: Pair = Field(description="Filter size: an int or [height, width].")
    stride: Pair = Field(default=1, description="Stride: an int or [height, width].")
    padding: PairOrZero = Field(default=0, description="Zero padding: an int or [height, width].")
    dilation: Pair = Field(default=1, description="Dilation: an int or [height, width].")
    groups: PositiveInt = Field(
        default=1, description="Groups; equal to the input channels for a depthwise convolution."
    )
    bias: bool = Field(default=False, description="Whether the convolution has a bias.")


class Linear(LayerBase):
    kind: Literal["linear"] = Field(description=KIND)
    out_features: PositiveInt = Field(
        description="Output features (per token of a sequence input)."
    )
    bias: bool = Field(default=True, description="Whether the layer has a bias.")
    tied_to: Name | None = Field(
        default=None,
        description="An earlier embedding layer whose table is this layer's weight (tied"
        " embeddings, as GPT-2's output layer): no parameter of its own; its weight"
        " gradient is the table's, to which the embedding then adds its own",
    )


class MaxPool(LayerBase):
    kind: Literal["maxpool"] = Field(description=KIND)
    kernel: Pair = Field(description="Window size: an int or [height, width].")
    stride: Pair | None = Field(default=None, description="Stride; null: the kernel.")
    padding: PairOrZero = Field(
        default=0, description="Padding, at most half the kernel in each dimension."
    )


class AvgPool(LayerBase):
    kind: Literal["avgpool"] = Field(description=KIND)
    kernel: Pair = Field(description="Window size: an int or [height, width].")
    stride: Pair | None = Field(default=None, description="Stride; null: the kernel.")
    padding: PairOrZero = Field(
        default=0, description="Padding, at most half the kernel in each dimension."
    )


class GlobalAvgPool(LayerBase):
    kind: Literal["global_avgpool"] = Field(description=KIND)


class BatchNorm(LayerBase):
    kind: Literal["batchnorm"] = Field(description=KIND)


class LayerNorm(LayerBase):
    kind: Literal["layernorm"] = Field(description=KIND)


class Activation(LayerBase):
    kind: Literal["activation"] = Field(description=KIND)
    function: Annotated[ActivationFunction, Field(strict=False)] = Field(
        description="The element-wise function."
    )


class Add(LayerBase):
    kind: Literal["add"] = Field(description=KIND)


class Concat(LayerBase):
    kind: Literal["concat"] = Field(description=KIND)


class Flatten(LayerBase):
    kind: Literal["flatten"] = Field(description=KIND)


class Bridge(LayerBase):
    """Its input handed on as a tensor of ``shape``, of any size, at no cost: it stands
    for what the table leaves out between two layers (padding, pooling, residual
    adds), as between the rows of a SCALE-Sim topology.  Three sizes are a feature
    map (channels, height, width), two a sequence (tokens, features), one a feature
    vector."""

    kind: Literal["bridge"] = Field(description=KIND)
    shape: Annotated[list[PositiveInt], Field(min_length=1, max_length=3)] = Field(
        description="The per-sample shape the next layer sees."
    )


class Softmax(LayerBase):
    kind: Literal["softmax"] = Field(description=KIND)


class Dropout(LayerBase):
    """Random dropout at ``rate``: a mask is drawn, applied, and kept for backward."""

    kind: Literal["dropout"] = Field(description=KIND)
    rate: Annotated[float, Field(ge=0, lt=1)] = Field(description="Share of elements dropped.")
    mask: Literal["bit", "byte"] = Field(
        default="bit",
        exclude_if=lambda v: v == "bit",  # a table without it dumps (and identifies) as before
        description="How the mask kept for backward is stored: one bit per element (packed),"
        " or one byte (a boolean tensor, as PyTorch's dropout and Megatron-LM's fused"
        " bias-dropout-add keep it).",
    )


class StochasticDepth(LayerBase):
    """Stochastic depth (a residual branch dropped per sample at ``rate``): one draw
    per sample, kept for backward, and every element scaled by its sample's draw."""

    kind: Literal["stochastic_depth"] = Field(description=KIND)
    rate: Annotated[float, Field(ge=0, lt=1)] = Field(description="Share of samples dropped.")


class PrependTokens(LayerBase):
    """Learned vectors put before a sequence's tokens (a vision transformer's class
    token): ``tokens x features`` parameters, the same for every sample."""

    kind: Literal["prepend_tokens"] = Field(description=KIND)
    tokens: PositiveInt = Field(default=1, description="Learned tokens put first.")


class AddParameter(LayerBase):
    """A learned tensor of its input's shape added to it (a learned position
    embedding): one parameter per element of a sample, the same for every sample."""

    kind: Literal["add_parameter"] = Field(description=KIND)


class ScaleParameter(LayerBase):
    """Its input times a learned scale per channel (per feature of a sequence): a layer
    scale, as ConvNeXt's. One parameter per channel."""

    kind: Literal["scale_parameter"] = Field(description=KIND)


class PositionBias(LayerBase):
    """Learned values gathered, by constant indices, into a tensor that broadcasts over
    the input, and added to it: a relative position bias on attention scores (Swin's,
    MaxViT's), the same for every window and sample."""

    kind: Literal["position_bias"] = Field(description=KIND)
    table: PositiveInt = Field(
        description="Its parameters: a table's, (2M - 1)^2 x heads for windows of M x M"
        " tokens, or those of the MLP that computes the table (Swin V2's)."
    )


class TokenSelect(LayerBase):
    """Pick one token of a sequence (e.g. BERT's [CLS] token for the pooler)."""

    kind: Literal["token_select"] = Field(description=KIND)
    index: Annotated[int, Field(ge=0)] = Field(
        default=0, description="The token kept (0: the first, BERT's [CLS])."
    )


class CrossEntropy(LayerBase):
    """Softmax plus negative log-likelihood; the loss that starts the backward pass."""

    kind: Literal["cross_entropy"] = Field(description=KIND)


class Embedding(LayerBase):
    kind: Literal["embedding"] = Field(description=KIND)
    num_embeddings: PositiveInt = Field(description="Rows of the table (the vocabulary).")
    embedding_dim: PositiveInt = Field(description="Width of each embedding vector.")


class Lstm(LayerBase):
    """One LSTM layer, unrolled over the sequence (stack entries for depth)."""

    kind: Literal["lstm"] = Field(description=KIND)
    hidden_size: PositiveInt = Field(description="Hidden state size.")


class Gru(LayerBase):
    """One GRU layer, unrolled over the sequence (stack entries for depth)."""

    kind: Literal["gru"] = Field(description=KIND)
    hidden_size: PositiveInt = Field(description="Hidden state size.")


class Attention(LayerBase):
    """Multi-head self-attention: QKV projection, per-head QK^T and AV, output projection;
    grouped-query with ``kv_heads`` below ``heads``, rotary position embeddings with
    ``rotary``.  Of two inputs, cross-attention (queries from the first, keys and values
    from the second); of three, queries, keys and values from one each."""

    kind: Literal["attention"] = Field(description=KIND)
    heads: PositiveInt = Field(description="Attention (query) heads; they divide the model width.")
    kv_heads: PositiveInt | None = Field(
        default=None,
        description="Key and value heads (grouped-query attention: each serves heads /"
        " kv_heads query heads); must divide heads.  The K and V projections are kv_heads"
        " heads wide.  Null: heads (multi-head attention).",
    )
    rotary: bool = Field(
        default=False,
        exclude_if=lambda v: not v,  # a table without it dumps (and identifies) as before
        description="Rotary position embeddings (Su et al., RoFormer, 2021; as in Llama):"
        " each query and key is rotated by its position after the projection, one vector"
        " op forward and one backward over Q and K.",
    )
    bias: bool = Field(
        default=True,
        description="Whether the projections have biases (the output's too, unless"
        " out_bias says otherwise).",
    )
    out_bias: bool | None = Field(
        default=None,
        description="Whether the output projection has a bias; null: as bias (Qwen2 has"
        " biases on Q, K and V and none on the output).",
    )
    causal: bool = Field(
        default=False,
        description="Mask every score of a later token (a decoder's attention): one select"
        " per score forward and backward; the GEMMs stay whole, as eager PyTorch computes them",
    )
    dropout: Annotated[float, Field(ge=0, lt=1)] = Field(
        default=0.0,
        exclude_if=lambda v: not v,  # a table without it dumps (and identifies) as before
        description="Dropout on the attention probabilities in training (self-attention):"
        " a mask drawn after the softmax, one byte per score kept for backward beside the"
        " dropped probabilities AV reads (Megatron-LM's attention dropout); not modelled"
        " in lowering.compile: fused's kernels.  0: none.",
    )

    @property
    def key_value_heads(self) -> int:
        """The key and value heads: ``kv_heads``, or ``heads`` when it is null."""
        return self.heads if self.kv_heads is None else self.kv_heads

    @property
    def output_bias(self) -> bool:
        """Whether the output projection has a bias: ``out_bias``, or ``bias`` when null."""
        return self.bias if self.out_bias is None else self.out_bias


class GroupNorm(LayerBase):
    """Group normalisation (Wu and He, 2018): statistics per sample and channel group."""

    kind: Literal["groupnorm"] = Field(description=KIND)
    groups: PositiveInt = Field(description="Channel groups; must divide the channels")


class RmsNorm(LayerBase):
    """RMS normalisation (Zhang and Sennrich, 2019): a scale and no shift, no mean."""

    kind: Literal["rmsnorm"] = Field(description=KIND)


class ConvTranspose2d(LayerBase):
    """Transposed convolution (PyTorch's ConvTranspose2d): the adjoint of a conv2d."""

    kind: Literal["conv_transpose2d"] = Field(description=KIND)
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

    kind: Literal["upsample"] = Field(description=KIND)
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

    kind: Literal["mul"] = Field(description=KIND)


class MatMul(LayerBase):
    """A product of two activations ``A . B`` per sample, per head when ``heads`` > 1:
    a GEMM without a weight (backward: one GEMM per input's gradient)."""

    kind: Literal["matmul"] = Field(description=KIND)
    heads: PositiveInt = Field(
        default=1,
        description="Independent products per sample (a batched matmul): each sequence"
        " input's features are ``heads`` equal slices, one per product, or two maps are"
        " ``heads x M x K`` and ``heads x K x N``",
    )
    transpose_b: bool = Field(default=False, description="Multiply by B's transpose (QK^T)")


class Split(LayerBase):
    """One part of its input cut along the channels (or features): split or chunk."""

    kind: Literal["split"] = Field(description=KIND)
    sizes: Annotated[list[PositiveInt], Field(min_length=1)] | None = Field(
        default=None, description="The parts' sizes, which add up to the channels (split)"
    )
    chunks: PositiveInt | None = Field(
        default=None, description="Equal parts, the last smaller if need be (torch.chunk)"
    )
    index: NonNegative = Field(description="Which part this layer outputs")


class AdaptiveAvgPool(LayerBase):
    """Average pooling to a given output size, with PyTorch's adaptive windows."""

    kind: Literal["adaptive_avgpool"] = Field(description=KIND)
    output: Pair = Field(description="Output height and width")


class VectorLayer(LayerBase):
    """An operation without a layer kind of its own, costed as a generic vector op:
    one op per output element forward and one per input element backward."""

    kind: Literal["vector"] = Field(description=KIND)
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
    | StochasticDepth
    | PrependTokens
    | AddParameter
    | ScaleParameter
    | PositionBias
    | TokenSelect
    | CrossEntropy
    | Embedding
    | Lstm
    | Gru
    | Attention
    | GroupNorm
    | RmsNorm
    | ConvTranspose2d
    | Upsample
    | Mul
    | MatMul
    | Split
    | AdaptiveAvgPool
    | VectorLayer
    | Moe,
    Field(discriminator="kind"),
]


class VariantSpec(Spec):
    """A named variant of a workload (e.g. CIFAR-10): dotted-key overrides of the file.

    Keys address the workload file, e.g. ``input.height`` or
    ``layers[fc].out_features``; a run file selects it by ``workload_variant``.
    """

    description: str = Field(default="", description="Free text.")
    overrides: dict[str, Any] = Field(
        min_length=1,
        description="Dotted keys of the workload file and their values: input.height: 32,"
        " layers[fc].out_features: 10.",
    )


class Workload(Spec):
    """A model: its input per sample and its layers in execution order."""

    name: Name = Field(description="The model's name.")
    description: str = Field(default="", description="Free text.")
    source: str = Field(default="", description="Where the layer table comes from.")
    input: InputSpec = Field(
        description="One sample's input (the first, when there are extra_inputs): image,"
        " vector, tokens or a sequence of vectors; layers name it input."
    )
    extra_inputs: dict[Name, InputSpec] = Field(
        default_factory=dict,
        exclude_if=lambda v: not v,  # a table without them dumps (and identifies) as before
        description="Further inputs of each sample, by name, that layers name in their"
        " inputs as they name input (a decoder's encoder output: memory: {kind: sequence,"
        " length: 32, features: 64}); read from DRAM like input, and given no gradient."
        " Names differ from input and from every layer's.",
    )
    layers: list[Layer] = Field(
        min_length=1, description="The layers in execution order; one cross_entropy ends them."
    )
    variants: dict[Name, VariantSpec] = Field(
        default_factory=dict,
        description="Named variants (e.g. cifar10), chosen by a run's workload_variant.",
    )
    notes: list[str] | None = Field(
        default=None,
        description="What the table assumes beyond its layers (an imported file's"
        " simplifications), printed with a run's results; null when there are none (a"
        " table without notes resolves and identifies sweep points without the key).",
    )
