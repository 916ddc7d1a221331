"""Products of two activations (``A . B``, per head for a batched matmul): GEMMs
without parameters, and both inputs get a gradient GEMM.

The inputs are two sequences, each head a slice of their features, or two
``heads x M x K`` maps (an exported ``12x197x64 @ 12x64x197``: the heads first)."""

from __future__ import annotations

from accelsim.graph.ops import Phase, Tensor
from accelsim.lowering.context import StepContext
from accelsim.lowering.rules.base import LayerRule, register
from accelsim.lowering.shapes import LayerInfo, Layout, Shape, ShapeProblem
from accelsim.workload import model as wm


def matmul_dims(layer: wm.MatMul, a: Shape, b: Shape) -> tuple[int, int, int]:
    """``(M, N, K)`` of each of the ``heads`` products per sample.

    ``A`` is ``M x (heads . K)``, ``B`` is ``K x (heads . N)`` (``N x (heads . K)``
    with ``transpose_b``): each head reads its slice of both inputs' features. As
    maps, ``A`` is ``heads x M x K`` and ``B`` ``heads x K x N`` (``heads x N x K``).

    Raises:
        ShapeProblem: when the inputs' sizes do not fit.
    """
    heads = layer.heads
    if a.layout is Layout.CHW:
        if a.dims[0] != heads or b.dims[0] != heads:
            raise ShapeProblem("heads", "must be both maps' first size", [str(a), str(b)])
        (m, a_width), (b_rows, b_width) = a.dims[1:], (b.dims[1], heads * b.dims[2])
        a_width *= heads
    else:
        (m, a_width), (b_rows, b_width) = a.dims, b.dims
    if a_width % heads or b_width % heads:
        raise ShapeProblem(
            "heads", f"must divide both inputs' features ({a_width}, {b_width})", heads
        )
    k = a_width // heads
    n, b_k = (b_rows, b_width // heads) if layer.transpose_b else (b_width // heads, b_rows)
    if b_k != k:
        raise ShapeProblem(
            "inputs",
            f"inner sizes differ: A has {k} per head, B {b_k}",
            [str(a), str(b)],
        )
    return m, n, k


@register
class MatMulRule(LayerRule):
    """``matmul``: FWD ``heads`` GEMMs ``M x N x K`` per sample; dA ``M x K x N``; dB
    ``K x N x M`` (``N x K x M`` with ``transpose_b``)."""

    kinds = ("matmul",)

    def shape(self, layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
        assert isinstance(layer, wm.MatMul)
        if len(in_shapes) != 2:
            raise ShapeProblem("inputs", "matmul takes exactly two inputs", len(in_shapes))
        layouts = {s.layout for s in in_shapes}
        if layouts not in ({Layout.SEQUENCE}, {Layout.CHW}):
            raise ShapeProblem(
                "inputs",
                "matmul needs two sequence inputs or two heads x M x K maps",
                [str(s) for s in in_shapes],
            )
        m, n, _ = matmul_dims(layer, *in_shapes)
        if layouts == {Layout.CHW}:
            return Shape(Layout.CHW, (layer.heads, m, n))
        return Shape(Layout.SEQUENCE, (m, layer.heads * n))

    def forward(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        layer = info.layer
        assert isinstance(layer, wm.MatMul)
        m, n, k = matmul_dims(layer, *info.in_shapes)
        count = ctx.n * layer.heads
        ctx.b.gemm(f"{layer.name}.fwd", layer.name, Phase.FWD, m, n, k, count, xs[0], xs[1], y)

    def backward(self, ctx: StepContext, info: LayerInfo, g: Tensor | None) -> None:
        layer = info.layer
        assert isinstance(layer, wm.MatMul) and g is not None
        m, n, k = matmul_dims(layer, *info.in_shapes)
        count = ctx.n * layer.heads
        a, b = (ctx.acts[i] for i in info.inputs)
        name, bi = layer.name, Phase.BWD_INPUT
        if ctx.wants(info, 0):
            da = ctx.dx(info, 0)
            ctx.b.gemm(f"{name}.da", name, bi, m, k, n, count, g, b, da)
            ctx.give(info, 0, da)
        if ctx.wants(info, 1):
            db = ctx.dx(info, 1)
            rows, cols = (n, k) if layer.transpose_b else (k, n)
            ctx.b.gemm(f"{name}.db", name, bi, rows, cols, m, count, a, g, db)
            ctx.give(info, 1, db)
