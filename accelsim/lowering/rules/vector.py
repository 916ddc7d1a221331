"""Layers that run on the vector unit: pooling, normalisation, activations, dropout,
token selection, the loss, and the shape-only layers (add, concat, flatten).

Vector-op costs per element are documented in docs/model/lowering.md.
"""

from __future__ import annotations

from accelsim.config.enums import VectorClass
from accelsim.graph.ops import Access, Epilogue, ParamKind, Phase, Tensor, TensorKind
from accelsim.lowering.context import StepContext
from accelsim.lowering.rules.base import LayerRule, register
from accelsim.lowering.shapes import (
    LayerInfo,
    Layout,
    Shape,
    ShapeProblem,
    conv_output_hw,
    merge,
    one_input,
)
from accelsim.workload import model as wm
from accelsim.workload.model import pair

BATCHNORM_FWD_OPS = 6  # mean, variance, normalise, scale, shift
BATCHNORM_BWD_OPS = 8  # two reductions, then the dx formula
SOFTMAX_FWD_OPS = 5  # max, subtract, exp, sum, divide
SOFTMAX_BWD_OPS = 3  # dot(y, dy), subtract, multiply
CROSS_ENTROPY_FWD_OPS = 6  # softmax plus log and pick
DROPOUT_FWD_OPS = 3  # random draw, compare, scale
ANY = (Layout.CHW, Layout.FEATURES, Layout.SEQUENCE)
# Activations whose derivative is computed from their output rather than their input.
BY_OUTPUT = frozenset(
    {
        wm.ActivationFunction.RELU,
        wm.ActivationFunction.RELU6,
        wm.ActivationFunction.SIGMOID,
        wm.ActivationFunction.TANH,
    }
)
# Activations that compute an exponential, tanh or erf per element (the rest compare,
# clip and scale).
TRANSCENDENTAL = frozenset(
    {
        wm.ActivationFunction.GELU,
        wm.ActivationFunction.SIGMOID,
        wm.ActivationFunction.TANH,
        wm.ActivationFunction.SILU,
    }
)


def _elementwise_backward(
    ctx: StepContext,
    info: LayerInfo,
    ops: int,
    reads: list[Tensor],
    op_class: VectorClass,
    epilogue: Epilogue = Epilogue.NONE,
) -> None:
    """``dX`` by one vector op of ``op_class`` over the input's elements, if the input
    needs a gradient."""
    if ctx.wants(info):
        x = ctx.acts[info.inputs[0]]
        grad = ctx.dx(info)
        name = info.layer.name
        ctx.b.vector(
            f"{name}.bwd", name, Phase.BWD_INPUT, x.elements, ops, reads, [grad],
            epilogue=epilogue, op_class=op_class,
        )  # fmt: skip
        ctx.give(info, 0, grad)


@register
class PoolRule(LayerRule):
    """``maxpool``/``avgpool``: one op per window tap; ``global_avgpool``: one per input."""

    kinds = ("maxpool", "avgpool", "global_avgpool")

    def shape(self, layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
        x = one_input(layer, in_shapes, Layout.CHW)
        if isinstance(layer, wm.GlobalAvgPool):
            return Shape(Layout.FEATURES, (x.dims[0],))
        assert isinstance(layer, (wm.MaxPool, wm.AvgPool))
        c, h, w = x.dims
        kernel, padding = pair(layer.kernel), pair(layer.padding)
        # PyTorch's pool2d_shape_check (max and average pooling): a window must
        # cover at least one input element, so padding <= kernel // 2 per dimension.
        if any(pad > k // 2 for pad, k in zip(padding, kernel, strict=True)):
            raise ShapeProblem(
                "padding",
                f"more than half the {kernel[0]}x{kernel[1]} kernel (at most"
                f" {kernel[0] // 2}x{kernel[1] // 2}, as PyTorch requires)",
                layer.padding,
            )
        stride = pair(layer.stride if layer.stride is not None else layer.kernel)
        p, q = conv_output_hw(h, w, kernel, stride, padding)
        if p < 1 or q < 1:
            raise ShapeProblem("kernel", f"larger than the padded {h}x{w} input", layer.kernel)
        return Shape(Layout.CHW, (c, p, q))

    def forward(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        layer = info.layer
        if isinstance(layer, wm.GlobalAvgPool):
            ctx.b.vector(
                f"{layer.name}.fwd", layer.name, Phase.FWD, xs[0].elements, 1, xs, [y],
                op_class=VectorClass.REDUCE,
            )  # fmt: skip
            return
        assert isinstance(layer, (wm.MaxPool, wm.AvgPool))
        r, s = pair(layer.kernel)
        ctx.b.vector(
            f"{layer.name}.fwd", layer.name, Phase.FWD, y.elements, r * s, xs, [y],
            op_class=VectorClass.REDUCE,
        )  # fmt: skip

    def backward(self, ctx: StepContext, info: LayerInfo, g: Tensor | None) -> None:
        assert g is not None
        x = ctx.acts[info.inputs[0]]
        reads = [g, x] if isinstance(info.layer, wm.MaxPool) else [g]
        _elementwise_backward(ctx, info, 1, reads, VectorClass.ELEMENTWISE)


@register
class NormRule(LayerRule):
    """``batchnorm``/``layernorm``: statistics, normalisation and an affine scale and shift."""

    kinds = ("batchnorm", "layernorm")
    has_params = True

    def shape(self, layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
        if isinstance(layer, wm.BatchNorm):
            return one_input(layer, in_shapes, Layout.CHW, Layout.FEATURES)
        # A map's layernorm normalises each position's channels (channels-last, as
        # ConvNeXt's): its affine has a scale and a shift per channel, as batchnorm's.
        return one_input(layer, in_shapes, Layout.FEATURES, Layout.SEQUENCE, Layout.CHW)

    def forward(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        name = info.layer.name
        affine = ctx.param(name, "affine", 2 * info.in_shapes[0].channels, ParamKind.NORM, 2)
        ctx.b.vector(
            f"{name}.fwd",
            name,
            Phase.FWD,
            y.elements,
            BATCHNORM_FWD_OPS,
            [xs[0], affine],
            [y],
            epilogue=_norm_epilogue(info),
            op_class=VectorClass.NORM,
        )

    def backward(self, ctx: StepContext, info: LayerInfo, g: Tensor | None) -> None:
        assert g is not None
        name = info.layer.name
        x = ctx.acts[info.inputs[0]]
        affine = ctx.parameter(name, "affine")
        dx = ctx.dx(info) if ctx.wants(info) else None
        writes = [affine.gradient] if dx is None else [affine.gradient, dx]
        op = ctx.b.vector(
            f"{name}.bwd",
            name,
            Phase.BWD_INPUT,
            x.elements,
            BATCHNORM_BWD_OPS,
            [g, x, affine.weight],
            writes,
            epilogue=_norm_epilogue(info),
            op_class=VectorClass.NORM,
        )
        ctx.grad_done(name, "affine", op)
        if dx is not None:
            ctx.give(info, 0, dx)


def _norm_epilogue(info: LayerInfo) -> Epilogue:
    """Batchnorm normalises per channel, so it is element-wise once its statistics are
    known; layernorm needs a whole row of features (across the array's column folds)."""
    return Epilogue.BATCHNORM if isinstance(info.layer, wm.BatchNorm) else Epilogue.NONE


def _activation_class(layer: wm.Layer, backward: bool) -> VectorClass:
    """Softmax takes a row's statistics (its maximum, the sum of its exponentials) and
    normalises every element by them, as a norm does; in backward, a row's dot product
    of output and gradient.  An activation is transcendental where it computes an
    exponential, tanh or erf per element: in backward only where its derivative is
    computed from its input (from its output, a sigmoid's or tanh's is arithmetic)."""
    if not isinstance(layer, wm.Activation):
        return VectorClass.NORM
    function = layer.function
    if function in TRANSCENDENTAL and not (backward and function in BY_OUTPUT):
        return VectorClass.TRANSCENDENTAL
    return VectorClass.ELEMENTWISE


def _activation_epilogue(layer: wm.Layer) -> Epilogue:
    """An activation works element by element; softmax needs its whole row."""
    return Epilogue.ELEMENTWISE if isinstance(layer, wm.Activation) else Epilogue.NONE


@register
class ActivationRule(LayerRule):
    """``activation`` and ``softmax``: element-wise forward, one op per element backward."""

    kinds = ("activation", "softmax")

    def shape(self, layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
        return one_input(layer, in_shapes, *ANY)

    def forward(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        layer = info.layer
        ops = layer.function.forward_ops if isinstance(layer, wm.Activation) else SOFTMAX_FWD_OPS
        ctx.b.vector(
            f"{layer.name}.fwd",
            layer.name,
            Phase.FWD,
            y.elements,
            ops,
            xs,
            [y],
            epilogue=_activation_epilogue(layer),
            op_class=_activation_class(layer, backward=False),
        )

    def backward(self, ctx: StepContext, info: LayerInfo, g: Tensor | None) -> None:
        assert g is not None
        layer = info.layer
        x, y = ctx.acts[info.inputs[0]], ctx.acts[layer.name]
        if isinstance(layer, wm.Activation):
            ops, saved = layer.function.backward_ops, y if layer.function in BY_OUTPUT else x
        else:
            ops, saved = SOFTMAX_BWD_OPS, y
        op_class = _activation_class(layer, backward=True)
        _elementwise_backward(ctx, info, ops, [g, saved], op_class, _activation_epilogue(layer))


@register
class DropoutRule(LayerRule):
    """``dropout``: a random mask, kept bit-packed (one bit per element) for backward, or
    one byte per element with ``mask: byte``;
    ``stochastic_depth``: one bit per sample, each element scaled by its sample's."""

    kinds = ("dropout", "stochastic_depth")

    def shape(self, layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
        return one_input(layer, in_shapes, *ANY)

    def forward(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        name = info.layer.name
        per_sample = isinstance(info.layer, wm.StochasticDepth)
        bits = ctx.n if per_sample else y.elements
        byte = isinstance(info.layer, wm.Dropout) and info.layer.mask == "byte"
        mask = Tensor(f"{name}.mask", TensorKind.ACTIVATION, bits if byte else -(-bits // 8), 1)
        ctx.saved[name] = mask
        ctx.b.vector(
            f"{name}.fwd",
            name,
            Phase.FWD,
            y.elements,
            1 if per_sample else DROPOUT_FWD_OPS,
            xs,
            [y, mask],
            epilogue=Epilogue.ELEMENTWISE,
            op_class=VectorClass.ELEMENTWISE,
        )

    def inference(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        """Dropout is off in evaluation: its output is its input, no op, no mask."""
        ctx.b.alias(y, xs)

    def backward(self, ctx: StepContext, info: LayerInfo, g: Tensor | None) -> None:
        assert g is not None
        reads = [g, ctx.saved[info.layer.name]]
        _elementwise_backward(ctx, info, 1, reads, VectorClass.ELEMENTWISE, Epilogue.ELEMENTWISE)


@register
class TokenSelectRule(LayerRule):
    """``token_select``: copy one token; its gradient is zero everywhere else."""

    kinds = ("token_select",)

    def shape(self, layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
        assert isinstance(layer, wm.TokenSelect)
        x = one_input(layer, in_shapes, Layout.SEQUENCE)
        if layer.index >= x.dims[0]:
            raise ShapeProblem("index", f"beyond the {x.dims[0]} tokens", layer.index)
        return Shape(Layout.FEATURES, (x.dims[1],))

    def forward(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        name = info.layer.name
        reads = [Access(xs[0], y.elements)]
        ctx.b.vector(
            f"{name}.fwd", name, Phase.FWD, y.elements, 1, reads, [y],
            op_class=VectorClass.DATA_MOVEMENT,
        )  # fmt: skip

    def backward(self, ctx: StepContext, info: LayerInfo, g: Tensor | None) -> None:
        assert g is not None
        _elementwise_backward(ctx, info, 1, [g], VectorClass.DATA_MOVEMENT)


@register
class CrossEntropyRule(LayerRule):
    """``cross_entropy``: softmax and log-likelihood; its backward starts the backward pass."""

    kinds = ("cross_entropy",)
    is_loss = True

    def shape(self, layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
        one_input(layer, in_shapes, Layout.FEATURES, Layout.SEQUENCE)
        return Shape(Layout.FEATURES, (1,))

    def forward(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        name, x = info.layer.name, xs[0]
        probs = ctx.t(f"{name}.probs", TensorKind.ACTIVATION, x.elements)
        ctx.saved[name] = probs
        ctx.b.vector(
            f"{name}.fwd", name, Phase.FWD, x.elements, CROSS_ENTROPY_FWD_OPS, [x], [probs, y],
            op_class=VectorClass.NORM,
        )  # fmt: skip

    def inference(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        """No loss outside training: the forward pass ends with the logits."""

    def backward(self, ctx: StepContext, info: LayerInfo, g: Tensor | None) -> None:
        _elementwise_backward(ctx, info, 1, [ctx.saved[info.layer.name]], VectorClass.ELEMENTWISE)


@register
class AddRule(LayerRule):
    """``add``: one op per extra input; the gradient goes to every input unchanged."""

    kinds = ("add",)

    def shape(self, layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
        return merge(layer, in_shapes, concat=False)

    def forward(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        name = info.layer.name
        ctx.b.vector(
            f"{name}.fwd",
            name,
            Phase.FWD,
            y.elements,
            len(xs) - 1,
            xs,
            [y],
            epilogue=Epilogue.ELEMENTWISE,
            op_class=VectorClass.ELEMENTWISE,
        )

    def backward(self, ctx: StepContext, info: LayerInfo, g: Tensor | None) -> None:
        assert g is not None
        for i in range(len(info.inputs)):
            if ctx.wants(info, i):
                ctx.give(info, i, g)


@register
class FlattenRule(AddRule):
    """``flatten``: a view of its input; no ops."""

    kinds = ("flatten",)

    def shape(self, layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
        x = one_input(layer, in_shapes, Layout.CHW, Layout.FEATURES)
        return Shape(Layout.FEATURES, (x.numel,))

    def forward(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        ctx.b.alias(y, xs)


@register
class ConcatRule(LayerRule):
    """``concat``: a view of its inputs; each input's gradient is a view of a slice."""

    kinds = ("concat",)

    def shape(self, layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
        return merge(layer, in_shapes, concat=True)

    def forward(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        ctx.b.alias(y, xs)

    def backward(self, ctx: StepContext, info: LayerInfo, g: Tensor | None) -> None:
        assert g is not None
        for i, source in enumerate(info.inputs):
            if ctx.wants(info, i):
                part = ctx.t(f"{g.name}[{i}]", TensorKind.GRADIENT, ctx.acts[source].elements)
                ctx.give(info, i, ctx.b.alias(part, [g]))
