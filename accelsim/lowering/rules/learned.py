"""Learned tensors joined to an activation: ``prepend_tokens`` (a class token),
``add_parameter`` (a learned position embedding), ``scale_parameter`` (a layer
scale) and ``position_bias`` (a relative position bias table)."""

from __future__ import annotations

import math

from accelsim.config.enums import VectorClass
from accelsim.graph.ops import Access, Epilogue, ParamKind, Phase, Tensor
from accelsim.lowering.context import StepContext
from accelsim.lowering.rules.base import LayerRule, register
from accelsim.lowering.shapes import LayerInfo, Layout, Shape, one_input
from accelsim.workload import model as wm


@register
class LearnedRule(LayerRule):
    """FWD one op per output element (a copy, an add or a multiply); BWD the
    parameter's gradient summed over the samples (one op per element of the gradient
    it reads; a scale's reads the input too, two ops; a position bias's reads the whole
    output gradient, summed over windows and samples into its table) and ``dX`` one op
    per input element."""

    kinds = ("prepend_tokens", "add_parameter", "scale_parameter", "position_bias")
    has_params = True

    def shape(self, layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
        if isinstance(layer, wm.PrependTokens):
            x = one_input(layer, in_shapes, Layout.SEQUENCE)
            return Shape(Layout.SEQUENCE, (x.dims[0] + layer.tokens, x.dims[1]))
        return one_input(layer, in_shapes, Layout.CHW, Layout.FEATURES, Layout.SEQUENCE)

    def forward(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        name = info.layer.name
        size = _size(info)
        weight = ctx.param(name, "p", size, ParamKind.BIAS, size)
        ctx.b.vector(
            f"{name}.fwd", name, Phase.FWD, y.elements, 1, [xs[0], weight], [y],
            op_class=_class(info.layer),
        )  # fmt: skip

    def backward(self, ctx: StepContext, info: LayerInfo, g: Tensor | None) -> None:
        assert g is not None
        name = info.layer.name
        param = ctx.parameter(name, "p")
        scale = isinstance(info.layer, wm.ScaleParameter)
        whole = scale or isinstance(info.layer, wm.PositionBias)
        part = g.elements if whole else ctx.n * _size(info)
        reads: list[Access | Tensor] = [Access(g, part)]
        if scale:
            reads.append(ctx.acts[info.inputs[0]])
        op = ctx.b.vector(
            f"{name}.dp",
            name,
            Phase.BWD_WEIGHT,
            part,
            2 if scale else 1,
            reads,
            [param.gradient],
            epilogue=Epilogue.ELEMENTWISE,
            op_class=VectorClass.REDUCE,  # summed over the samples
        )
        ctx.grad_done(name, "p", op)
        if ctx.wants(info):
            x = ctx.acts[info.inputs[0]]
            dx = ctx.dx(info)
            back: list[Access | Tensor] = [Access(g, x.elements)]
            if scale:
                back.append(param.weight)
            ctx.b.vector(
                f"{name}.bwd", name, Phase.BWD_INPUT, x.elements, 1, back, [dx],
                op_class=_class(info.layer),
            )  # fmt: skip
            ctx.give(info, 0, dx)


def _class(layer: wm.Layer) -> VectorClass:
    """Prepending tokens copies (and its gradient is a slice); the others add or
    multiply element by element."""
    if isinstance(layer, wm.PrependTokens):
        return VectorClass.DATA_MOVEMENT
    return VectorClass.ELEMENTWISE


def _size(info: LayerInfo) -> int:
    """The parameter's elements: the prepended tokens', one per channel (a scale), the
    table's (a position bias) or one per input element."""
    layer = info.layer
    if isinstance(layer, wm.PositionBias):
        return layer.table
    if isinstance(layer, wm.PrependTokens):
        return layer.tokens * info.out_shape.dims[1]
    if isinstance(layer, wm.ScaleParameter):
        return info.in_shapes[0].channels
    return math.prod(info.in_shapes[0].dims)
