"""Transposed convolutions: the adjoint of a convolution, three GEMMs by im2col.

A ``conv_transpose2d`` from ``C`` channels at ``H x W`` to ``K`` channels at ``P x Q``
is the input gradient of the convolution from ``K x P x Q`` to ``C x H x W`` with the
same kernel, stride, padding and dilation (its adjoint): its forward GEMMs are that
convolution's ``dX`` GEMMs (split into stride phases that skip inserted zeros, as
``lowering.strided_dx`` says), its ``dX`` is that convolution's forward GEMM, and its
``dW`` has the same shape as that convolution's.
"""

from __future__ import annotations

from accelsim.config.run import StridedDx
from accelsim.graph.ops import ParamKind, Phase, Tensor
from accelsim.lowering.context import StepContext
from accelsim.lowering.conv_dims import conv_gemm_dims
from accelsim.lowering.rules.base import LayerRule, register
from accelsim.lowering.rules.conv import strided_dx_shapes
from accelsim.lowering.shapes import LayerInfo, Layout, Shape, ShapeProblem, one_input
from accelsim.workload import model as wm
from accelsim.workload.model import pair


def transposed_output_hw(layer: wm.ConvTranspose2d, h: int, w: int) -> tuple[int, int]:
    """PyTorch's output size: ``(H - 1) s - 2 p + d (k - 1) + output_padding + 1``."""
    kernel, stride, padding = pair(layer.kernel), pair(layer.stride), pair(layer.padding)
    dilation, extra = pair(layer.dilation), pair(layer.output_padding)
    return (
        (h - 1) * stride[0] - 2 * padding[0] + dilation[0] * (kernel[0] - 1) + extra[0] + 1,
        (w - 1) * stride[1] - 2 * padding[1] + dilation[1] * (kernel[1] - 1) + extra[1] + 1,
    )


@register
class ConvTransposeRule(LayerRule):
    """``conv_transpose2d``: FWD ``(N.P.Q) x (K/g) x (C/g.R.S)`` in stride phases, dX
    ``(N.H.W) x (C/g) x (K/g.R.S)``, dW ``(K/g) x (C/g.R.S) x (N.H.W)``."""

    kinds = ("conv_transpose2d",)
    has_params = True

    def shape(self, layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
        assert isinstance(layer, wm.ConvTranspose2d)
        x = one_input(layer, in_shapes, Layout.CHW)
        c, h, w = x.dims
        channels = ((c, f"the {c} input channels"), (layer.out_channels, "out_channels"))
        for count, what in channels:
            if count % layer.groups:
                raise ShapeProblem("groups", f"must divide {what}", layer.groups)
        for extra, stride, dilation in zip(
            pair(layer.output_padding), pair(layer.stride), pair(layer.dilation), strict=True
        ):
            if extra >= max(stride, dilation):
                raise ShapeProblem(
                    "output_padding",
                    "must be smaller than the stride or the dilation (as PyTorch requires)",
                    layer.output_padding,
                )
        p, q = transposed_output_hw(layer, h, w)
        if p < 1 or q < 1:
            raise ShapeProblem("padding", f"leaves no output of the {h}x{w} input", layer.padding)
        return Shape(Layout.CHW, (layer.out_channels, p, q))

    def forward(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        layer, n = info.layer, ctx.n
        assert isinstance(layer, wm.ConvTranspose2d)
        c, h, w = info.in_shapes[0].dims
        k_out, p, q = info.out_shape.dims
        r, s = pair(layer.kernel)
        g = layer.groups
        weight = ctx.param(layer.name, "W", c * (k_out // g) * r * s, ParamKind.WEIGHT, k_out)
        if pair(layer.stride) == (1, 1) or ctx.strided_dx is StridedDx.ZERO_INSERT:
            shapes = [(p * q, r * s, 1)]
        else:
            shapes = strided_dx_shapes(
                p, q, (r, s), pair(layer.stride), pair(layer.padding), pair(layer.dilation)
            )
        for i, (positions, taps, mult) in enumerate(shapes):
            suffix = f".{i}" if len(shapes) > 1 else ""
            ctx.b.gemm(
                f"{layer.name}.fwd{suffix}",
                layer.name,
                Phase.FWD,
                m=n * positions,
                n=k_out // g,
                k=(c // g) * taps,
                count=g * mult,
                groups=g,
                a=xs[0],
                b=weight,
                c=y,
                a_elements=n * (c // g) * h * w,
                partial=True,
            )
        if layer.bias:
            ctx.param(layer.name, "b", k_out, ParamKind.BIAS, k_out)

    def dw_columns_per_input(self, info: LayerInfo) -> int | None:
        """dW is ``(K/g) x (C/g . R . S)``: an input channel owns its ``R . S`` taps."""
        assert isinstance(info.layer, wm.ConvTranspose2d)
        r, s = pair(info.layer.kernel)
        return r * s

    def backward(self, ctx: StepContext, info: LayerInfo, g: Tensor | None) -> None:
        layer, n, b = info.layer, ctx.n, ctx.b
        assert isinstance(layer, wm.ConvTranspose2d) and g is not None
        name = layer.name
        c, h, w = info.in_shapes[0].dims
        k_out, p, q = info.out_shape.dims
        r, s = pair(layer.kernel)
        groups = layer.groups
        weight = ctx.parameter(name, "W")
        # The adjoint convolution maps K x P x Q to C x H x W.
        adjoint = (k_out, c), (p, q, h, w), (r, s)
        if ctx.wants(info):
            grad = ctx.dx(info)
            gm, gn, gk = conv_gemm_dims(Phase.FWD, n, *adjoint, groups)
            b.gemm(
                f"{name}.dx",
                name,
                Phase.BWD_INPUT,
                m=gm,
                n=gn,
                k=gk,
                count=groups,
                groups=groups,
                a=g,
                b=weight.weight,
                c=grad,
                a_elements=n * (k_out // groups) * p * q,
            )
            ctx.give(info, 0, grad)
        op = b.gemm(
            f"{name}.dw",
            name,
            Phase.BWD_WEIGHT,
            m=k_out // groups,
            n=(c // groups) * r * s,
            k=n * h * w,
            count=groups,
            groups=groups,
            a=g,
            b=ctx.acts[info.inputs[0]],
            c=weight.gradient,
            a_elements=n * (k_out // groups) * p * q,
            b_elements=n * (c // groups) * h * w,
        )
        ctx.grad_done(name, "W", op)
        if layer.bias:
            ctx.bias_grad(name, "b", g)
