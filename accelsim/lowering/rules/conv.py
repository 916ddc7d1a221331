"""Convolutions (grouped and depthwise too): three GEMMs by im2col."""

from __future__ import annotations

from accelsim.config.run import StridedDx
from accelsim.graph.ops import ParamKind, Phase, Tensor
from accelsim.lowering.context import StepContext
from accelsim.lowering.conv_dims import conv_gemm_dims
from accelsim.lowering.rules.base import LayerRule, register
from accelsim.lowering.shapes import (
    LayerInfo,
    Layout,
    Shape,
    ShapeProblem,
    conv_output_hw,
    one_input,
)
from accelsim.workload import model as wm
from accelsim.workload.model import pair


def strided_dx_shapes(
    h: int,
    w: int,
    kernel: tuple[int, int],
    stride: tuple[int, int],
    padding: tuple[int, int],
    dilation: tuple[int, int],
) -> list[tuple[int, int, int]]:
    """Sub-convolutions of a strided conv's input gradient that skip inserted zeros.

    Input positions fall into ``stride_h * stride_w`` phases by ``(i + pad) mod
    stride``; each phase sees only the filter taps ``r`` with ``r * dilation``
    in the same residue class.  Returns ``(positions, taps, multiplicity)`` per
    distinct phase shape, where positions is the phase's ``h_a * w_b`` and taps
    its ``r_a * s_b``.
    """

    def per_dim(size: int, k: int, s: int, p: int, d: int) -> list[tuple[int, int]]:
        out = []
        for a in range(s):
            positions = sum(1 for i in range(size) if (i + p) % s == a)
            taps = sum(1 for r in range(k) if (r * d) % s == a)
            out.append((positions, taps))
        return out

    rows = per_dim(h, kernel[0], stride[0], padding[0], dilation[0])
    cols = per_dim(w, kernel[1], stride[1], padding[1], dilation[1])
    shapes: dict[tuple[int, int], int] = {}
    for pos_r, taps_r in rows:
        for pos_c, taps_c in cols:
            if pos_r * pos_c and taps_r * taps_c:
                key = (pos_r * pos_c, taps_r * taps_c)
                shapes[key] = shapes.get(key, 0) + 1
    return [(pos, taps, mult) for (pos, taps), mult in sorted(shapes.items(), reverse=True)]


@register
class ConvRule(LayerRule):
    """``conv2d``: FWD ``(N.P.Q) x (C.R.S/g) x (K/g)``, dX and dW as in the architecture doc."""

    kinds = ("conv2d",)
    has_params = True

    def shape(self, layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
        assert isinstance(layer, wm.Conv2d)
        x = one_input(layer, in_shapes, Layout.CHW)
        c, h, w = x.dims
        if c % layer.groups:
            raise ShapeProblem("groups", f"must divide the {c} input channels", layer.groups)
        if layer.out_channels % layer.groups:
            raise ShapeProblem(
                "groups", f"must divide out_channels {layer.out_channels}", layer.groups
            )
        p, q = conv_output_hw(
            h, w, pair(layer.kernel), pair(layer.stride), pair(layer.padding), pair(layer.dilation)
        )
        if p < 1 or q < 1:
            raise ShapeProblem("kernel", f"larger than the padded {h}x{w} input", layer.kernel)
        return Shape(Layout.CHW, (layer.out_channels, p, q))

    def forward(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        layer, n = info.layer, ctx.n
        assert isinstance(layer, wm.Conv2d)
        c, h, w = info.in_shapes[0].dims
        k_out, p, q = info.out_shape.dims
        r, s = pair(layer.kernel)
        g = layer.groups
        weight = ctx.param(layer.name, "W", k_out * (c // g) * r * s, ParamKind.WEIGHT, k_out)
        gm, gn, gk = conv_gemm_dims(Phase.FWD, n, (c, k_out), (h, w, p, q), (r, s), g)
        ctx.b.gemm(
            f"{layer.name}.fwd",
            layer.name,
            Phase.FWD,
            m=gm,
            n=gn,
            k=gk,
            count=g,
            groups=g,
            a=xs[0],
            b=weight,
            c=y,
            a_elements=n * (c // g) * h * w,
        )
        if layer.bias:
            ctx.param(layer.name, "b", k_out, ParamKind.BIAS, k_out)

    def dw_columns_per_input(self, info: LayerInfo) -> int | None:
        """dW is ``(K/g) x (C/g . R . S)``: an input channel owns its ``R . S`` taps."""
        assert isinstance(info.layer, wm.Conv2d)
        r, s = pair(info.layer.kernel)
        return r * s

    def backward(self, ctx: StepContext, info: LayerInfo, g: Tensor | None) -> None:
        layer, n, b = info.layer, ctx.n, ctx.b
        assert isinstance(layer, wm.Conv2d) and g is not None
        name = layer.name
        x = ctx.acts[info.inputs[0]]
        c, h, w = info.in_shapes[0].dims
        k_out, p, q = info.out_shape.dims
        r, s = pair(layer.kernel)
        stride, dil = pair(layer.stride), pair(layer.dilation)
        groups = layer.groups
        cg, kg = c // groups, k_out // groups
        weight = ctx.parameter(name, "W")
        if ctx.wants(info):
            grad = ctx.dx(info)
            if stride == (1, 1) or ctx.strided_dx is StridedDx.ZERO_INSERT:
                shapes = [(h * w, r * s, 1)]
            else:
                shapes = strided_dx_shapes(h, w, (r, s), stride, pair(layer.padding), dil)
            for i, (positions, taps, mult) in enumerate(shapes):
                suffix = f".{i}" if len(shapes) > 1 else ""
                b.gemm(
                    f"{name}.dx{suffix}",
                    name,
                    Phase.BWD_INPUT,
                    m=n * positions,
                    n=cg,
                    k=kg * taps,
                    count=groups * mult,
                    groups=groups,
                    a=g,
                    b=weight.weight,
                    c=grad,
                    a_elements=n * kg * p * q,
                    partial=True,
                )
            ctx.give(info, 0, grad)
        gm, gn, gk = conv_gemm_dims(Phase.BWD_WEIGHT, n, (c, k_out), (h, w, p, q), (r, s), groups)
        op = b.gemm(
            f"{name}.dw",
            name,
            Phase.BWD_WEIGHT,
            m=gm,
            n=gn,
            k=gk,
            count=groups,
            groups=groups,
            a=g,
            b=x,
            c=weight.gradient,
            b_elements=n * cg * h * w,
        )
        ctx.grad_done(name, "W", op)
        if layer.bias:
            ctx.bias_grad(name, "b", g)
