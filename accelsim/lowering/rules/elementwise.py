"""Element-wise and slicing layers on the vector unit: multiply (with a broadcast
operand), split and chunk (views), and the generic vector op that stands for an
operation without a layer kind of its own."""

from __future__ import annotations

import math

from accelsim.config.enums import VectorClass
from accelsim.graph.ops import Phase, Tensor
from accelsim.lowering.context import StepContext
from accelsim.lowering.rules.base import LayerRule, register
from accelsim.lowering.shapes import LayerInfo, Layout, Shape, ShapeProblem, one_input
from accelsim.workload import model as wm

ANY = (Layout.CHW, Layout.FEATURES, Layout.SEQUENCE)


@register
class MulRule(LayerRule):
    """``mul``: one op per output element forward; backward one op per element for the
    first input's gradient and, for the second's, one more per element when it is
    broadcast (the products are summed over the broadcast positions)."""

    kinds = ("mul",)

    def shape(self, layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
        if len(in_shapes) == 1:
            return one_input(layer, in_shapes, *ANY)
        if len(in_shapes) != 2:
            raise ShapeProblem("inputs", "mul takes one or two inputs", len(in_shapes))
        a, b = in_shapes
        fits = (
            a.layout is b.layout
            and len(a.dims) == len(b.dims)
            and all(j in (i, 1) for i, j in zip(a.dims, b.dims, strict=True))
        )
        if not fits:
            raise ShapeProblem(
                "inputs",
                f"the second input must match the first or be 1 where it differs: {a} and {b}",
                [str(a), str(b)],
            )
        return a

    def forward(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        name = info.layer.name
        ctx.b.vector(
            f"{name}.fwd", name, Phase.FWD, y.elements, 1, xs, [y], op_class=VectorClass.ELEMENTWISE
        )

    def backward(self, ctx: StepContext, info: LayerInfo, g: Tensor | None) -> None:
        assert g is not None
        name = info.layer.name
        xs = [ctx.acts[i] for i in info.inputs]
        for index, x in enumerate(xs):
            if not ctx.wants(info, index):
                continue
            others = xs[:index] + xs[index + 1 :]
            broadcast = x.elements < g.elements  # its products summed: a reduction
            grad = ctx.dx(info, index)
            ctx.b.vector(
                f"{name}.bwd{index}", name, Phase.BWD_INPUT, g.elements, 2 if broadcast else 1,
                [g, *others], [grad],
                op_class=VectorClass.REDUCE if broadcast else VectorClass.ELEMENTWISE,
            )  # fmt: skip
            ctx.give(info, index, grad)


def split_sizes(layer: wm.Split, channels: int) -> list[int]:
    """The parts of ``channels``: ``sizes``, or ``chunks`` parts of ``ceil(C / chunks)``
    (fewer when that covers the channels sooner, as ``torch.chunk`` does).

    Raises:
        ShapeProblem: when neither or both are given, or ``sizes`` do not add up.
    """
    if (layer.sizes is None) == (layer.chunks is None):
        raise ShapeProblem("", "give exactly one of sizes and chunks", None)
    if layer.sizes is not None:
        if sum(layer.sizes) != channels:
            raise ShapeProblem("sizes", f"must add up to the {channels} channels", layer.sizes)
        return list(layer.sizes)
    assert layer.chunks is not None
    step = -(-channels // layer.chunks)
    return [min(step, channels - start) for start in range(0, channels, step)]


@register
class SplitRule(LayerRule):
    """``split``: a view of one part of the channels (features); its gradient is a view
    of that part of the input's gradient."""

    kinds = ("split",)

    def shape(self, layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
        assert isinstance(layer, wm.Split)
        x = one_input(layer, in_shapes, *ANY)
        sizes = split_sizes(layer, x.channels)
        if layer.index >= len(sizes):
            raise ShapeProblem("index", f"beyond the {len(sizes)} parts", layer.index)
        part = sizes[layer.index]
        if x.layout is Layout.CHW:
            return Shape(Layout.CHW, (part, *x.dims[1:]))
        return Shape(x.layout, (*x.dims[:-1], part))

    def forward(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        ctx.b.alias(y, xs)

    def backward(self, ctx: StepContext, info: LayerInfo, g: Tensor | None) -> None:
        assert g is not None
        if ctx.wants(info):
            ctx.give_slice(info, g)


@register
class VectorLayerRule(LayerRule):
    """``vector``: one op per output element forward, reading every input; backward one
    op per element of each input that needs a gradient."""

    kinds = ("vector",)

    def shape(self, layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
        assert isinstance(layer, wm.VectorLayer)
        if not in_shapes:
            raise ShapeProblem("inputs", "vector needs at least one input", 0)
        return Shape(Layout(layer.layout), tuple(layer.shape))

    def forward(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        name = info.layer.name
        ctx.b.vector(
            f"{name}.fwd", name, Phase.FWD, y.elements, 1, xs, [y], op_class=VectorClass.ELEMENTWISE
        )

    def backward(self, ctx: StepContext, info: LayerInfo, g: Tensor | None) -> None:
        assert g is not None
        name = info.layer.name
        for index in range(len(info.inputs)):
            if ctx.wants(info, index):
                grad = ctx.dx(info, index)
                elements = ctx.n * math.prod(info.in_shapes[index].dims)
                ctx.b.vector(
                    f"{name}.bwd{index}", name, Phase.BWD_INPUT, elements, 1, [g], [grad],
                    op_class=VectorClass.ELEMENTWISE,
                )  # fmt: skip
                ctx.give(info, index, grad)
