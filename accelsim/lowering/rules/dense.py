"""Fully connected layers and embedding tables."""

from __future__ import annotations

import math

from accelsim.config.enums import VectorClass
from accelsim.graph.ops import Access, ParamKind, Phase, Tensor
from accelsim.lowering.context import StepContext
from accelsim.lowering.rules.base import LayerRule, register
from accelsim.lowering.shapes import LayerInfo, Layout, Shape, one_input
from accelsim.workload import model as wm


@register
class LinearRule(LayerRule):
    """``linear``: ``m`` = batch times tokens, ``k``/``n`` = in/out features."""

    kinds = ("linear",)
    has_params = True

    def shape(self, layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
        assert isinstance(layer, wm.Linear)
        x = one_input(layer, in_shapes, Layout.FEATURES, Layout.SEQUENCE)
        return Shape(x.layout, (*x.dims[:-1], layer.out_features))

    def forward(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        layer = info.layer
        assert isinstance(layer, wm.Linear)
        rows = ctx.n * math.prod(info.in_shapes[0].dims[:-1])
        fan_in = info.in_shapes[0].dims[-1]
        out = layer.out_features
        if layer.tied_to is None:
            weight = ctx.param(layer.name, "W", fan_in * out, ParamKind.WEIGHT, out)
        else:
            weight = ctx.parameter(layer.tied_to, "W").weight
        ctx.b.gemm(
            f"{layer.name}.fwd",
            layer.name,
            Phase.FWD,
            m=rows,
            n=out,
            k=fan_in,
            count=1,
            a=xs[0],
            b=weight,
            c=y,
        )
        if layer.bias:
            ctx.param(layer.name, "b", out, ParamKind.BIAS, out)

    def dw_columns_per_input(self, info: LayerInfo) -> int | None:
        """dW is ``out x in``: an input feature owns one column."""
        return 1

    def backward(self, ctx: StepContext, info: LayerInfo, g: Tensor | None) -> None:
        layer, b = info.layer, ctx.b
        assert isinstance(layer, wm.Linear) and g is not None
        name = layer.name
        x = ctx.acts[info.inputs[0]]
        rows = ctx.n * math.prod(info.in_shapes[0].dims[:-1])
        fan_in = info.in_shapes[0].dims[-1]
        weight = ctx.parameter(layer.tied_to or name, "W")
        if ctx.wants(info):
            grad = ctx.dx(info)
            b.gemm(
                f"{name}.dx",
                name,
                Phase.BWD_INPUT,
                m=rows,
                n=fan_in,
                k=layer.out_features,
                count=1,
                a=g,
                b=weight.weight,
                c=grad,
            )
            ctx.give(info, 0, grad)
        op = b.gemm(
            f"{name}.dw",
            name,
            Phase.BWD_WEIGHT,
            m=layer.out_features,
            n=fan_in,
            k=rows,
            count=1,
            a=g,
            b=x,
            c=weight.gradient,
        )
        if layer.tied_to is None:
            ctx.grad_done(name, "W", op)
        else:
            ctx.saved[f"{layer.tied_to}.tied"] = weight.gradient
        if layer.bias:
            ctx.bias_grad(name, "b", g)


@register
class EmbeddingRule(LayerRule):
    """``embedding``: a gather of rows forward, a scatter-add of their gradients backward."""

    kinds = ("embedding",)
    has_params = True

    def shape(self, layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
        assert isinstance(layer, wm.Embedding)
        x = one_input(layer, in_shapes, Layout.TOKENS)
        return Shape(Layout.SEQUENCE, (x.dims[0], layer.embedding_dim))

    def forward(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        layer = info.layer
        assert isinstance(layer, wm.Embedding)
        table = ctx.param(
            layer.name,
            "W",
            layer.num_embeddings * layer.embedding_dim,
            ParamKind.EMBEDDING,
            layer.num_embeddings,
        )
        ctx.b.vector(
            f"{layer.name}.fwd",
            layer.name,
            Phase.FWD,
            y.elements,
            1,
            [xs[0], Access(table, y.elements)],
            [y],
            op_class=VectorClass.DATA_MOVEMENT,
        )

    def backward(self, ctx: StepContext, info: LayerInfo, g: Tensor | None) -> None:
        name = info.layer.name
        assert g is not None
        x, y = ctx.acts[info.inputs[0]], ctx.acts[name]
        table = ctx.parameter(name, "W")
        # A tied linear layer wrote the table's whole gradient first: the scatter-add
        # reads and adds to the rows it touches.
        tied = [Access(table.gradient, y.elements)] if f"{name}.tied" in ctx.saved else []
        op = ctx.b.vector(
            f"{name}.dw",
            name,
            Phase.BWD_WEIGHT,
            y.elements,
            1,
            [g, x, *tied],
            [Access(table.gradient, y.elements)],
            op_class=VectorClass.DATA_MOVEMENT,
        )
        ctx.grad_done(name, "W", op)
