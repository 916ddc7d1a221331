"""Group and RMS normalisation: statistics, normalisation and a learned affine, on the
vector unit (batch and layer normalisation are in :mod:`.vector`)."""

from __future__ import annotations

from accelsim.config.enums import VectorClass
from accelsim.graph.ops import ParamKind, Phase, Tensor
from accelsim.lowering.context import StepContext
from accelsim.lowering.rules.base import LayerRule, register
from accelsim.lowering.rules.vector import BATCHNORM_BWD_OPS, BATCHNORM_FWD_OPS
from accelsim.lowering.shapes import LayerInfo, Layout, Shape, ShapeProblem, one_input
from accelsim.workload import model as wm

RMSNORM_FWD_OPS = 4  # square-and-sum, normalise, scale (the per-row root amortised)
RMSNORM_BWD_OPS = 6  # one reduction, then the dx formula and the scale's gradient


def _norm_backward(ctx: StepContext, info: LayerInfo, g: Tensor, suffix: str, ops: int) -> None:
    """``dX`` and the affine parameters' gradient in one pass over the input."""
    name = info.layer.name
    x = ctx.acts[info.inputs[0]]
    param = ctx.parameter(name, suffix)
    dx = ctx.dx(info) if ctx.wants(info) else None
    writes = [param.gradient] if dx is None else [param.gradient, dx]
    op = ctx.b.vector(
        f"{name}.bwd", name, Phase.BWD_INPUT, x.elements, ops, [g, x, param.weight], writes,
        op_class=VectorClass.NORM,
    )  # fmt: skip
    ctx.grad_done(name, suffix, op)
    if dx is not None:
        ctx.give(info, 0, dx)


@register
class GroupNormRule(LayerRule):
    """``groupnorm``: batchnorm's costs per element, statistics per (sample, group);
    a scale and a shift per channel."""

    kinds = ("groupnorm",)
    has_params = True

    def shape(self, layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
        assert isinstance(layer, wm.GroupNorm)
        x = one_input(layer, in_shapes, Layout.CHW)
        if x.channels % layer.groups:
            raise ShapeProblem("groups", f"must divide the {x.channels} channels", layer.groups)
        return x

    def forward(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        name = info.layer.name
        affine = ctx.param(name, "affine", 2 * info.in_shapes[0].channels, ParamKind.NORM, 2)
        ctx.b.vector(
            f"{name}.fwd", name, Phase.FWD, y.elements, BATCHNORM_FWD_OPS, [xs[0], affine], [y],
            op_class=VectorClass.NORM,
        )  # fmt: skip

    def backward(self, ctx: StepContext, info: LayerInfo, g: Tensor | None) -> None:
        assert g is not None
        _norm_backward(ctx, info, g, "affine", BATCHNORM_BWD_OPS)


@register
class RmsNormRule(LayerRule):
    """``rmsnorm``: ``x / rms(x) * scale`` over the last dimension; one scale per feature."""

    kinds = ("rmsnorm",)
    has_params = True

    def shape(self, layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
        return one_input(layer, in_shapes, Layout.FEATURES, Layout.SEQUENCE)

    def forward(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        name = info.layer.name
        scale = ctx.param(name, "scale", info.in_shapes[0].channels, ParamKind.NORM, 1)
        ctx.b.vector(
            f"{name}.fwd", name, Phase.FWD, y.elements, RMSNORM_FWD_OPS, [xs[0], scale], [y],
            op_class=VectorClass.NORM,
        )  # fmt: skip

    def backward(self, ctx: StepContext, info: LayerInfo, g: Tensor | None) -> None:
        assert g is not None
        _norm_backward(ctx, info, g, "scale", RMSNORM_BWD_OPS)
