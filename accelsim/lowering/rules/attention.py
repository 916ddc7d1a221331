"""Self-attention: QKV projection, per-head ``QK^T`` and ``AV``, output projection
(an attention layer of two or three inputs is cross-attention: :mod:`.cross_attention`).

Multi-head attention is the case of as many key/value heads as query heads.  With
fewer (grouped-query attention, ``kv_heads``), the K and V projections are
``kv_heads`` heads wide and each key/value head serves a group of ``heads /
kv_heads`` query heads: the per-head GEMMs run once per key/value head, on the
group's queries stacked (``group x S`` rows), so each K and V tile is loaded once
per group, as a compiler batches them; the MACs are those of one GEMM per query head.

Under ``lowering.compile: fused`` the core between the projections (``QK^T``, mask,
softmax, ``AV``) is one flash-attention kernel per pass
(:mod:`accelsim.lowering.flash_attention`); a rotary embedding stays the op before it
(forward) and after it (backward).
"""

from __future__ import annotations

from accelsim.config.enums import VectorClass
from accelsim.graph.ops import Access, ParamKind, Phase, Tensor, TensorKind
from accelsim.lowering import flash_attention as flash
from accelsim.lowering.context import StepContext
from accelsim.lowering.rules import cross_attention as cross
from accelsim.lowering.rules.attention_core import AttentionDims, drop_scores, probs_backward
from accelsim.lowering.rules.base import LayerRule, register
from accelsim.lowering.rules.vector import SOFTMAX_FWD_OPS
from accelsim.lowering.shapes import LayerInfo, Layout, Shape, ShapeProblem, one_input
from accelsim.workload import model as wm

ROTARY_OPS = 3
"""Ops per element of Q and K to rotate them, forward or backward (ours):
``x * cos + rotate_half(x) * sin``, two multiplies and an add (the half's sign is the
sin table's).  The cos and sin tables (``S x head size``, shared by every head and
sample) are not counted: a step computes them once."""


@register
class AttentionRule(LayerRule):
    """``attention``: the projections are GEMMs, ``QK^T`` and ``AV`` batched GEMMs per
    key/value head, the softmax a vector op (and with ``causal``, a select on the
    scores before it; with ``rotary``, a rotation of Q and K before ``QK^T``)."""

    kinds = ("attention",)
    has_params = True

    def shape(self, layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
        assert isinstance(layer, wm.Attention)
        if len(in_shapes) > 3:
            message = (
                "attention takes one input (self-attention), two (cross-attention: queries"
                " from the first, keys and values from the second) or three (queries, keys"
                " and values from one each)"
            )
            raise ShapeProblem("inputs", message, len(in_shapes))
        if len(in_shapes) > 1:
            cross.check(layer, in_shapes)
            if layer.dropout:
                why = "only self-attention drops its scores (cross-attention's are not modelled)"
                raise ShapeProblem("dropout", why, layer.dropout)
        x = in_shapes[0] if len(in_shapes) > 1 else one_input(layer, in_shapes, Layout.SEQUENCE)
        if x.dims[1] % layer.heads:
            raise ShapeProblem("heads", f"must divide the model width {x.dims[1]}", layer.heads)
        if layer.heads % layer.key_value_heads:
            raise ShapeProblem("kv_heads", f"must divide the {layer.heads} heads", layer.kv_heads)
        return x

    def forward(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        self._forward(ctx, info, xs, y, training=True)

    def inference(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        """The forward ops without attention dropout (off in evaluation)."""
        self._forward(ctx, info, xs, y, training=False)

    def _forward(
        self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor, training: bool
    ) -> None:
        layer = info.layer
        assert isinstance(layer, wm.Attention)
        name, b, x = layer.name, ctx.b, xs[0]
        s = AttentionDims.of(layer, info, ctx.n, ctx.head_shards.get(name, 1))
        if len(xs) > 1:
            cross.forward(ctx, layer, s, xs, y)
            return
        steps, d, dh = s.steps, s.d, s.dh
        wqkv = ctx.param(name, "Wqkv", s.qkv_width * d, ParamKind.WEIGHT, s.qkv_width)
        wo = ctx.param(name, "Wo", d * s.inner, ParamKind.WEIGHT, d)
        if layer.bias:
            ctx.param(name, "bqkv", s.qkv_width, ParamKind.BIAS, s.qkv_width)
        if layer.output_bias:
            ctx.param(name, "bo", d, ParamKind.BIAS, d)
        qkv = ctx.t(f"{name}.qkv", TensorKind.ACTIVATION, s.rows * s.qkv_width)
        att = ctx.t(f"{name}.ctx", TensorKind.ACTIVATION, s.rows * s.inner)
        b.gemm(f"{name}.qkv.fwd", name, Phase.FWD, s.rows, s.qkv_width, d, 1, x, wqkv, qkv)
        qk = qkv
        if layer.rotary:
            qk = ctx.t(f"{name}.qk", TensorKind.ACTIVATION, s.rows * (s.inner + s.kv_width))
            b.vector(
                f"{name}.rotary.fwd", name, Phase.FWD, qk.elements, ROTARY_OPS, [qkv], [qk],
                op_class=VectorClass.ELEMENTWISE,
            )  # fmt: skip
        if ctx.attention is not None:
            tiles = flash.tiling(
                ctx.attention, steps, s.heads, s.kv, dh, layer.causal, qkv.word_bytes
            )
            fused = flash.FusedAttention(
                name, tiles, s.n, s.kv, qkv, att, qk if layer.rotary else None
            )
            stats = flash.forward(ctx, fused)
            b.gemm(f"{name}.out.fwd", name, Phase.FWD, s.rows, d, s.inner, 1, att, wo, y)
            ctx.saved[name] = (fused, stats)
            return
        heads_scores = s.n * s.heads * steps * steps
        scores = ctx.t(f"{name}.scores", TensorKind.ACTIVATION, heads_scores)
        probs = ctx.t(f"{name}.probs", TensorKind.ACTIVATION, heads_scores)
        b.gemm(f"{name}.qk.fwd", name, Phase.FWD, s.queries, steps, dh, s.per_head, qk, qk, scores)
        if layer.causal:
            masked = ctx.t(f"{name}.masked", TensorKind.ACTIVATION, scores.elements)
            b.vector(
                f"{name}.mask.fwd", name, Phase.FWD, scores.elements, 1, [scores], [masked],
                op_class=VectorClass.ELEMENTWISE,
            )  # fmt: skip
            scores = masked
        b.vector(
            f"{name}.softmax.fwd",
            name,
            Phase.FWD,
            scores.elements,
            SOFTMAX_FWD_OPS,
            [scores],
            [probs],
            op_class=VectorClass.NORM,
        )
        if training and layer.dropout:
            probs_read, _ = drop_scores(ctx, name, probs)
        else:
            probs_read = probs
        b.gemm(
            f"{name}.av.fwd",
            name,
            Phase.FWD,
            s.queries,
            dh,
            steps,
            s.per_head,
            probs_read,
            qkv,
            att,
        )
        b.gemm(f"{name}.out.fwd", name, Phase.FWD, s.rows, d, s.inner, 1, att, wo, y)
        ctx.saved[name] = (qkv, qk, probs, att)

    def backward(self, ctx: StepContext, info: LayerInfo, g: Tensor | None) -> None:
        layer = info.layer
        assert isinstance(layer, wm.Attention) and g is not None
        name, b = layer.name, ctx.b
        x = ctx.acts[info.inputs[0]]
        s = AttentionDims.of(layer, info, ctx.n, ctx.head_shards.get(name, 1))
        d, rows = s.d, s.rows
        saved = ctx.saved[name]
        wo = ctx.parameter(name, "Wo")
        out = saved[0].out if isinstance(saved[0], flash.FusedAttention) else saved[-1]
        datt = ctx.t(f"{name}.dctx", TensorKind.GRADIENT, out.elements)
        bi, bw = Phase.BWD_INPUT, Phase.BWD_WEIGHT
        b.gemm(f"{name}.out.dx", name, bi, rows, s.inner, d, 1, g, wo.weight, datt)
        op = b.gemm(f"{name}.out.dw", name, bw, d, s.inner, rows, 1, g, out, wo.gradient)
        ctx.grad_done(name, "Wo", op)
        if layer.output_bias:
            ctx.bias_grad(name, "bo", g)
        if len(info.inputs) > 1:
            cross.backward(ctx, info, s, saved, datt)
            return
        if isinstance(saved[0], flash.FusedAttention):
            dqkv = _fused_backward(ctx, layer, saved, datt)
        else:
            dqkv = _core_backward(ctx, layer, s, saved, datt)
        wqkv = ctx.parameter(name, "Wqkv")
        if ctx.wants(info):
            grad = ctx.dx(info)
            b.gemm(f"{name}.qkv.dx", name, bi, rows, d, s.qkv_width, 1, dqkv, wqkv.weight, grad)
            ctx.give(info, 0, grad)
        op = b.gemm(f"{name}.qkv.dw", name, bw, s.qkv_width, d, rows, 1, dqkv, x, wqkv.gradient)
        ctx.grad_done(name, "Wqkv", op)
        if layer.bias:
            ctx.bias_grad(name, "bqkv", dqkv)


def _fused_backward(
    ctx: StepContext, layer: wm.Attention, saved: tuple[flash.FusedAttention, Tensor], datt: Tensor
) -> Tensor:
    """The fused kernels' gradients of ``QK^T``, the softmax and ``AV``; with a rotary
    embedding, ``dQ`` and ``dK`` rotated back into ``dqkv`` after them, beside ``dV``."""
    name = layer.name
    fused, stats = saved
    dqkv = ctx.t(f"{name}.dqkv", TensorKind.GRADIENT, fused.qkv.elements)
    if fused.qk is None:
        flash.backward(ctx, fused, stats, datt, (dqkv, dqkv, dqkv))
        return dqkv
    dqk = ctx.t(f"{name}.dqk", TensorKind.GRADIENT, fused.qk.elements)
    flash.backward(ctx, fused, stats, datt, (dqk, dqk, dqkv))
    _rotate_back(ctx, name, dqk, dqkv)
    return dqkv


def _core_backward(
    ctx: StepContext,
    layer: wm.Attention,
    s: AttentionDims,
    saved: tuple[Tensor, Tensor, Tensor, Tensor],
    datt: Tensor,
) -> Tensor:
    """The gradients of ``AV``, the softmax, the mask and ``QK^T`` as separate ops."""
    name, b = layer.name, ctx.b
    steps, dh = s.steps, s.dh
    qkv, qk, probs, _ = saved
    bi = Phase.BWD_INPUT
    dqkv = ctx.t(f"{name}.dqkv", TensorKind.GRADIENT, qkv.elements)
    dscores = probs_backward(ctx, name, s, datt, probs, qkv, dqkv)
    if layer.causal:
        # The select's gradient: zero where the forward pass masked a score.
        dmasked = ctx.t(f"{name}.dmasked", TensorKind.GRADIENT, probs.elements)
        b.vector(
            f"{name}.mask.bwd", name, bi, probs.elements, 1, [dscores], [dmasked],
            op_class=VectorClass.ELEMENTWISE,
        )  # fmt: skip
        dscores = dmasked
    dqk = dqkv
    if layer.rotary:
        dqk = ctx.t(f"{name}.dqk", TensorKind.GRADIENT, qk.elements)
    # dQ stacks the group's queries (M = group x S); dK sums over them (K = group x S).
    for part, m, k in (("dq", s.queries, steps), ("dk", steps, s.queries)):
        b.gemm(f"{name}.qk.{part}", name, bi, m, dh, k, s.per_head, dscores, qk, dqk, partial=True)
    if layer.rotary:
        _rotate_back(ctx, name, dqk, dqkv)
    return dqkv


def _rotate_back(ctx: StepContext, name: str, dqk: Tensor, dqkv: Tensor) -> None:
    """The rotation's transpose: the gradient of the rotated Q and K added to their
    part of ``dqkv``, beside ``dV`` (a partial write: the projection's gradients wait
    for both)."""
    ctx.b.vector(
        f"{name}.rotary.bwd",
        name,
        Phase.BWD_INPUT,
        dqk.elements,
        ROTARY_OPS,
        [dqk],
        [Access(dqkv, dqk.elements)],
        partial=True,
        op_class=VectorClass.ELEMENTWISE,
    )
