"""``scale``: the input times a constant, element by element: one vector op per
element forward, and one per element for the input's gradient."""

from __future__ import annotations

from accelsim.graph.ops import Phase, Tensor
from accelsim.lowering.context import StepContext
from accelsim.lowering.rules.base import LayerRule, register
from accelsim.lowering.shapes import LayerInfo, Layout, Shape, one_input
from accelsim.workload import model as wm


@register
class ScaleRule(LayerRule):
    """``scale``: element-wise both ways, no parameters."""

    kinds = ("scale",)

    def shape(self, layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
        return one_input(layer, in_shapes, Layout.CHW, Layout.FEATURES, Layout.SEQUENCE)

    def forward(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        name = info.layer.name
        ctx.b.vector(f"{name}.fwd", name, Phase.FWD, y.elements, 1, xs, [y])

    def backward(self, ctx: StepContext, info: LayerInfo, g: Tensor | None) -> None:
        assert g is not None
        if ctx.wants(info):
            name, grad = info.layer.name, ctx.dx(info)
            ctx.b.vector(f"{name}.bwd", name, Phase.BWD_INPUT, g.elements, 1, [g], [grad])
            ctx.give(info, 0, grad)
