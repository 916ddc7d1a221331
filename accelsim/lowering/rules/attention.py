"""Multi-head self-attention: QKV projection, per-head ``QK^T`` and ``AV``, output projection.

Under ``lowering.compile: fused`` the core between the projections (``QK^T``, mask,
softmax, ``AV``) is one flash-attention kernel per pass
(:mod:`accelsim.lowering.flash_attention`).
"""

from __future__ import annotations

from accelsim.graph.ops import ParamKind, Phase, Tensor, TensorKind
from accelsim.lowering import flash_attention as flash
from accelsim.lowering.context import StepContext
from accelsim.lowering.rules.base import LayerRule, register
from accelsim.lowering.rules.vector import SOFTMAX_BWD_OPS, SOFTMAX_FWD_OPS
from accelsim.lowering.shapes import LayerInfo, Layout, Shape, ShapeProblem, one_input
from accelsim.workload import model as wm


@register
class AttentionRule(LayerRule):
    """``attention``: the projections are GEMMs, ``QK^T`` and ``AV`` batched GEMMs per head,
    the softmax a vector op (and with ``causal``, a select on the scores before it)."""

    kinds = ("attention",)
    has_params = True

    def shape(self, layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
        assert isinstance(layer, wm.Attention)
        x = one_input(layer, in_shapes, Layout.SEQUENCE)
        if x.dims[1] % layer.heads:
            raise ShapeProblem("heads", f"must divide the model width {x.dims[1]}", layer.heads)
        return x

    def forward(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        layer = info.layer
        assert isinstance(layer, wm.Attention)
        name, n, b, x = layer.name, ctx.n, ctx.b, xs[0]
        steps, d = info.in_shapes[0].dims
        heads = layer.heads
        dh = d // heads
        wqkv = ctx.param(name, "Wqkv", 3 * d * d, ParamKind.WEIGHT, 3 * d)
        wo = ctx.param(name, "Wo", d * d, ParamKind.WEIGHT, d)
        if layer.bias:
            ctx.param(name, "bqkv", 3 * d, ParamKind.BIAS, 3 * d)
            ctx.param(name, "bo", d, ParamKind.BIAS, d)
        qkv = ctx.t(f"{name}.qkv", TensorKind.ACTIVATION, n * steps * 3 * d)
        att = ctx.t(f"{name}.ctx", TensorKind.ACTIVATION, n * steps * d)
        rows, per_head = n * steps, n * heads
        b.gemm(f"{name}.qkv.fwd", name, Phase.FWD, rows, 3 * d, d, 1, x, wqkv, qkv)
        if ctx.attention is not None:
            word = qkv.word_bytes
            kv = flash.kv_heads(layer)
            tiles = flash.tiling(ctx.attention, steps, heads, kv, dh, layer.causal, word)
            fused = flash.FusedAttention(name, tiles, n, kv, qkv, att)
            stats = flash.forward(ctx, fused)
            b.gemm(f"{name}.out.fwd", name, Phase.FWD, rows, d, d, 1, att, wo, y)
            ctx.saved[name] = (fused, stats)
            return
        scores = ctx.t(f"{name}.scores", TensorKind.ACTIVATION, n * heads * steps * steps)
        probs = ctx.t(f"{name}.probs", TensorKind.ACTIVATION, n * heads * steps * steps)
        b.gemm(f"{name}.qk.fwd", name, Phase.FWD, steps, steps, dh, per_head, qkv, qkv, scores)
        if layer.causal:
            masked = ctx.t(f"{name}.masked", TensorKind.ACTIVATION, scores.elements)
            b.vector(f"{name}.mask.fwd", name, Phase.FWD, scores.elements, 1, [scores], [masked])
            scores = masked
        b.vector(
            f"{name}.softmax.fwd",
            name,
            Phase.FWD,
            scores.elements,
            SOFTMAX_FWD_OPS,
            [scores],
            [probs],
        )
        b.gemm(f"{name}.av.fwd", name, Phase.FWD, steps, dh, steps, per_head, probs, qkv, att)
        b.gemm(f"{name}.out.fwd", name, Phase.FWD, rows, d, d, 1, att, wo, y)
        ctx.saved[name] = (qkv, probs, att)

    def backward(self, ctx: StepContext, info: LayerInfo, g: Tensor | None) -> None:
        layer = info.layer
        assert isinstance(layer, wm.Attention) and g is not None
        name, n, b = layer.name, ctx.n, ctx.b
        x = ctx.acts[info.inputs[0]]
        steps, d = info.in_shapes[0].dims
        rows = n * steps
        saved = ctx.saved[name]
        if isinstance(saved[0], flash.FusedAttention):
            fused, stats = saved
            qkv, att = fused.qkv, fused.out
        else:
            qkv, probs, att = saved
        wqkv, wo = ctx.parameter(name, "Wqkv"), ctx.parameter(name, "Wo")
        datt = ctx.t(f"{name}.dctx", TensorKind.GRADIENT, att.elements)
        bi, bw = Phase.BWD_INPUT, Phase.BWD_WEIGHT
        b.gemm(f"{name}.out.dx", name, bi, rows, d, d, 1, g, wo.weight, datt)
        op = b.gemm(f"{name}.out.dw", name, bw, d, d, rows, 1, g, att, wo.gradient)
        ctx.grad_done(name, "Wo", op)
        if layer.bias:
            ctx.bias_grad(name, "bo", g)
        dqkv = ctx.t(f"{name}.dqkv", TensorKind.GRADIENT, qkv.elements)
        if isinstance(saved[0], flash.FusedAttention):
            flash.backward(ctx, fused, stats, datt, dqkv)
        else:
            self._core_backward(ctx, info, qkv, probs, datt, dqkv)
        if ctx.wants(info):
            grad = ctx.dx(info)
            b.gemm(f"{name}.qkv.dx", name, bi, rows, d, 3 * d, 1, dqkv, wqkv.weight, grad)
            ctx.give(info, 0, grad)
        op = b.gemm(f"{name}.qkv.dw", name, bw, 3 * d, d, rows, 1, dqkv, x, wqkv.gradient)
        ctx.grad_done(name, "Wqkv", op)
        if layer.bias:
            ctx.bias_grad(name, "bqkv", dqkv)

    @staticmethod
    def _core_backward(
        ctx: StepContext, info: LayerInfo, qkv: Tensor, probs: Tensor, datt: Tensor, dqkv: Tensor
    ) -> None:
        """The gradients of ``AV``, the softmax, the mask and ``QK^T`` as separate ops."""
        layer = info.layer
        assert isinstance(layer, wm.Attention)
        name, b = layer.name, ctx.b
        steps, d = info.in_shapes[0].dims
        dh = d // layer.heads
        per_head = ctx.n * layer.heads
        bi = Phase.BWD_INPUT
        dprobs = ctx.t(f"{name}.dprobs", TensorKind.GRADIENT, probs.elements)
        dscores = ctx.t(f"{name}.dscores", TensorKind.GRADIENT, probs.elements)
        b.gemm(f"{name}.av.dprobs", name, bi, steps, steps, dh, per_head, datt, qkv, dprobs)
        b.gemm(
            f"{name}.av.dv", name, bi, steps, dh, steps, per_head, probs, datt, dqkv, partial=True
        )
        b.vector(
            f"{name}.softmax.bwd",
            name,
            bi,
            probs.elements,
            SOFTMAX_BWD_OPS,
            [dprobs, probs],
            [dscores],
        )
        if layer.causal:
            # The select's gradient: zero where the forward pass masked a score.
            dmasked = ctx.t(f"{name}.dmasked", TensorKind.GRADIENT, probs.elements)
            b.vector(f"{name}.mask.bwd", name, bi, probs.elements, 1, [dscores], [dmasked])
            dscores = dmasked
        for part in ("dq", "dk"):
            b.gemm(
                f"{name}.qk.{part}",
                name,
                bi,
                steps,
                dh,
                steps,
                per_head,
                dscores,
                qkv,
                dqkv,
                partial=True,
            )
