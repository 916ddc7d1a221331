"""``bridge``: the previous output handed on at another size, with no ops either way."""

from __future__ import annotations

from accelsim.graph.ops import Tensor, TensorKind
from accelsim.lowering.context import StepContext
from accelsim.lowering.rules.base import LayerRule, register
from accelsim.lowering.shapes import LayerInfo, Layout, Shape, one_input
from accelsim.workload import model as wm

_LAYOUTS = {1: Layout.FEATURES, 2: Layout.SEQUENCE, 3: Layout.CHW}


@register
class BridgeRule(LayerRule):
    """``bridge``: a view of its input with the stated shape; its input's gradient is a
    view of the output's.  Both are ready when what they view is."""

    kinds = ("bridge",)

    def shape(self, layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
        assert isinstance(layer, wm.Bridge)
        one_input(layer, in_shapes, Layout.CHW, Layout.FEATURES, Layout.SEQUENCE)
        return Shape(_LAYOUTS[len(layer.shape)], tuple(layer.shape))

    def forward(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        ctx.b.alias(y, xs)

    def backward(self, ctx: StepContext, info: LayerInfo, g: Tensor | None) -> None:
        assert g is not None
        if ctx.wants(info):
            grad = ctx.t(f"{g.name}[in]", TensorKind.GRADIENT, ctx.acts[info.inputs[0]].elements)
            ctx.give(info, 0, ctx.b.alias(grad, [g]))
