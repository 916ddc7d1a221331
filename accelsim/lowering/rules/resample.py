"""Resampling feature maps on the vector unit: upsampling (nearest, bilinear) and
adaptive average pooling to any output size."""

from __future__ import annotations

from accelsim.config.enums import VectorClass
from accelsim.graph.ops import Phase, Tensor
from accelsim.lowering.context import StepContext
from accelsim.lowering.rules.base import LayerRule, register
from accelsim.lowering.shapes import LayerInfo, Layout, Shape, ShapeProblem, one_input
from accelsim.workload import model as wm
from accelsim.workload.model import pair


def adaptive_windows(size: int, out: int) -> list[int]:
    """Window lengths of adaptive pooling from ``size`` to ``out`` (PyTorch's
    ``start = floor(i size / out)``, ``end = ceil((i + 1) size / out)``)."""
    return [-(-(i + 1) * size // out) - (i * size // out) for i in range(out)]


def _backward(
    ctx: StepContext, info: LayerInfo, g: Tensor, elements: int, ops: int, op_class: VectorClass
) -> None:
    """``dX``: ``ops`` per element of ``elements``, reading the output gradient."""
    if ctx.wants(info):
        grad = ctx.dx(info)
        name = info.layer.name
        ctx.b.vector(
            f"{name}.bwd", name, Phase.BWD_INPUT, elements, ops, [g], [grad], op_class=op_class
        )
        ctx.give(info, 0, grad)


@register
class UpsampleRule(LayerRule):
    """``upsample``: per output element 1 op (nearest) or 7 (bilinear) forward, 1 or 8
    backward (see :class:`~accelsim.workload.model.UpsampleMode`)."""

    kinds = ("upsample",)

    def shape(self, layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
        assert isinstance(layer, wm.Upsample)
        x = one_input(layer, in_shapes, Layout.CHW)
        c, h, w = x.dims
        if (layer.scale is None) == (layer.size is None):
            raise ShapeProblem("", "give exactly one of scale and size", None)
        if layer.size is not None:
            return Shape(Layout.CHW, (c, layer.size[0], layer.size[1]))
        sh, sw = pair(layer.scale if layer.scale is not None else 1)
        return Shape(Layout.CHW, (c, h * sh, w * sw))

    def forward(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        layer = info.layer
        assert isinstance(layer, wm.Upsample)
        ops = layer.mode.forward_ops
        nearest = layer.mode is wm.UpsampleMode.NEAREST  # copies; bilinear interpolates
        op_class = VectorClass.DATA_MOVEMENT if nearest else VectorClass.ELEMENTWISE
        ctx.b.vector(
            f"{layer.name}.fwd", layer.name, Phase.FWD, y.elements, ops, xs, [y], op_class=op_class
        )

    def backward(self, ctx: StepContext, info: LayerInfo, g: Tensor | None) -> None:
        assert isinstance(info.layer, wm.Upsample) and g is not None
        # each input element's gradient sums those of the outputs it reached
        _backward(ctx, info, g, g.elements, info.layer.mode.backward_ops, VectorClass.REDUCE)


@register
class AdaptiveAvgPoolRule(LayerRule):
    """``adaptive_avgpool``: one op per window tap forward (windows may overlap) and one
    per tap backward, the tap's share of its window's gradient."""

    kinds = ("adaptive_avgpool",)

    def shape(self, layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
        assert isinstance(layer, wm.AdaptiveAvgPool)
        c, _, _ = one_input(layer, in_shapes, Layout.CHW).dims
        oh, ow = pair(layer.output)
        return Shape(Layout.CHW, (c, oh, ow))

    @staticmethod
    def taps(info: LayerInfo) -> int:
        """Window taps of one sample: channels x row taps x column taps."""
        c, h, w = info.in_shapes[0].dims
        _, oh, ow = info.out_shape.dims
        return c * sum(adaptive_windows(h, oh)) * sum(adaptive_windows(w, ow))

    def forward(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        name = info.layer.name
        ctx.b.vector(
            f"{name}.fwd", name, Phase.FWD, ctx.n * self.taps(info), 1, xs, [y],
            op_class=VectorClass.REDUCE,
        )  # fmt: skip

    def backward(self, ctx: StepContext, info: LayerInfo, g: Tensor | None) -> None:
        assert g is not None
        _backward(ctx, info, g, ctx.n * self.taps(info), 1, VectorClass.ELEMENTWISE)
