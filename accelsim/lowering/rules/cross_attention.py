"""Cross-attention: an ``attention`` layer with two inputs, the queries from the first
and the keys and values from the second (a decoder's attention to its encoder's
output, ``nn.MultiheadAttention(q, kv, kv)``).

The Q projection reads the first input (``Lq`` positions of width ``d``), one K and V
projection reads the second (``Lk`` positions of its own width), the scores are ``Lq x
Lk`` per head, and the output projection gives ``Lq`` positions of width ``d``.  The
backward pass gives each input its own gradient.  No causal mask (which key a query
may not see is a matter of one sequence's order) and no rotary embedding.  Under
``lowering.compile: fused`` the core is flash-attention kernels
(:mod:`accelsim.lowering.flash_attention`), its query and key blocks each along its
own sequence.
"""

from __future__ import annotations

from accelsim.config.enums import VectorClass
from accelsim.graph.ops import ParamKind, Phase, Tensor, TensorKind
from accelsim.lowering import flash_attention as flash
from accelsim.lowering.context import StepContext
from accelsim.lowering.rules.attention_core import AttentionDims, probs_backward
from accelsim.lowering.rules.vector import SOFTMAX_FWD_OPS
from accelsim.lowering.shapes import LayerInfo, Layout, Shape, ShapeProblem
from accelsim.workload import model as wm


def check(layer: wm.Attention, in_shapes: tuple[Shape, ...]) -> None:
    """What cross-attention refuses: inputs that are not sequences, a causal mask, a
    rotary embedding."""
    if any(x.layout is not Layout.SEQUENCE for x in in_shapes):
        raise ShapeProblem(
            "inputs", "cross-attention needs two sequence inputs", [str(x) for x in in_shapes]
        )
    for key, on in (("causal", layer.causal), ("rotary", layer.rotary)):
        if on:
            message = "needs self-attention (one input); this layer has two (cross-attention)"
            raise ShapeProblem(key, message, on)


def forward(
    ctx: StepContext, layer: wm.Attention, s: AttentionDims, xs: list[Tensor], y: Tensor
) -> None:
    """The Q projection of ``xs[0]``, the K and V projection of ``xs[1]``, ``QK^T``, the
    softmax, ``AV`` and the output projection to ``y``."""
    name, b = layer.name, ctx.b
    d, kv_width = s.d, 2 * s.kv_width
    wq = ctx.param(name, "Wq", d * d, ParamKind.WEIGHT, d)
    wkv = ctx.param(name, "Wkv", kv_width * s.features, ParamKind.WEIGHT, kv_width)
    wo = ctx.param(name, "Wo", d * d, ParamKind.WEIGHT, d)
    if layer.bias:
        ctx.param(name, "bq", d, ParamKind.BIAS, d)
        ctx.param(name, "bkv", kv_width, ParamKind.BIAS, kv_width)
    if layer.output_bias:
        ctx.param(name, "bo", d, ParamKind.BIAS, d)
    q = ctx.t(f"{name}.q", TensorKind.ACTIVATION, s.rows * d)
    kv = ctx.t(f"{name}.kv", TensorKind.ACTIVATION, s.key_rows * kv_width)
    att = ctx.t(f"{name}.ctx", TensorKind.ACTIVATION, s.rows * d)
    b.gemm(f"{name}.q.fwd", name, Phase.FWD, s.rows, d, d, 1, xs[0], wq, q)
    b.gemm(f"{name}.kv.fwd", name, Phase.FWD, s.key_rows, kv_width, s.features, 1, xs[1], wkv, kv)
    if ctx.attention is not None:
        word = q.word_bytes
        tiles = flash.tiling(ctx.attention, s.steps, layer.heads, s.kv, s.dh, False, word, s.keys)
        fused = flash.FusedAttention(name, tiles, s.n, s.kv, kv, att, q=q)
        stats = flash.forward(ctx, fused)
        b.gemm(f"{name}.out.fwd", name, Phase.FWD, s.rows, d, d, 1, att, wo, y)
        ctx.saved[name] = (fused, stats)
        return
    elements = s.n * layer.heads * s.steps * s.keys
    scores = ctx.t(f"{name}.scores", TensorKind.ACTIVATION, elements)
    probs = ctx.t(f"{name}.probs", TensorKind.ACTIVATION, elements)
    b.gemm(f"{name}.qk.fwd", name, Phase.FWD, s.queries, s.keys, s.dh, s.per_head, q, kv, scores)
    b.vector(
        f"{name}.softmax.fwd", name, Phase.FWD, elements, SOFTMAX_FWD_OPS, [scores], [probs],
        op_class=VectorClass.NORM,
    )  # fmt: skip
    b.gemm(f"{name}.av.fwd", name, Phase.FWD, s.queries, s.dh, s.keys, s.per_head, probs, kv, att)
    b.gemm(f"{name}.out.fwd", name, Phase.FWD, s.rows, d, d, 1, att, wo, y)
    ctx.saved[name] = (q, kv, probs, att)


def backward(
    ctx: StepContext,
    info: LayerInfo,
    s: AttentionDims,
    saved: tuple[Tensor, Tensor, Tensor, Tensor] | tuple[flash.FusedAttention, Tensor],
    datt: Tensor,
) -> None:
    """From the gradient of ``AV``'s output ``datt``: the gradients of ``AV``, the softmax
    and ``QK^T`` (the fused kernels' under ``lowering.compile: fused``), then each
    projection's, each input's to its reader."""
    name = info.layer.name
    if isinstance(saved[0], flash.FusedAttention):
        fused, stats = saved[0], saved[1]
        dq = ctx.t(f"{name}.dq", TensorKind.GRADIENT, fused.queries.elements)
        dkv = ctx.t(f"{name}.dkv", TensorKind.GRADIENT, fused.qkv.elements)
        flash.backward(ctx, fused, stats, datt, (dq, dkv, dkv))
    else:
        dq, dkv = _core_backward(ctx, name, s, saved, datt)
    _projection_backward(ctx, info, 0, "q", dq, s.rows, s.d)
    _projection_backward(ctx, info, 1, "kv", dkv, s.key_rows, s.features)


def _core_backward(
    ctx: StepContext, name: str, s: AttentionDims, saved: tuple[Tensor, ...], datt: Tensor
) -> tuple[Tensor, Tensor]:
    """The gradients of ``AV``, the softmax and ``QK^T`` as separate ops: ``dQ`` and
    ``dKV``."""
    b, bi = ctx.b, Phase.BWD_INPUT
    q, kv, probs, _ = saved
    dq = ctx.t(f"{name}.dq", TensorKind.GRADIENT, q.elements)
    dkv = ctx.t(f"{name}.dkv", TensorKind.GRADIENT, kv.elements)
    dscores = probs_backward(ctx, name, s, datt, probs, kv, dkv)
    queries, keys, dh, count = s.queries, s.keys, s.dh, s.per_head
    b.gemm(f"{name}.qk.dq", name, bi, queries, dh, keys, count, dscores, kv, dq)
    b.gemm(f"{name}.qk.dk", name, bi, keys, dh, queries, count, dscores, q, dkv, partial=True)
    return dq, dkv


def _projection_backward(
    ctx: StepContext, info: LayerInfo, index: int, part: str, grad: Tensor, rows: int, width: int
) -> None:
    """The Q (``part`` q) or the K and V (``kv``) projection's gradients: its input's
    (``index``), when that needs one, its weight's and its bias's."""
    name, b = info.layer.name, ctx.b
    assert isinstance(info.layer, wm.Attention)
    weight = ctx.parameter(name, f"W{part}")
    out_width = grad.elements // rows
    if ctx.wants(info, index):
        dx = ctx.dx(info, index)
        b.gemm(
            f"{name}.{part}.dx",
            name,
            Phase.BWD_INPUT,
            rows,
            width,
            out_width,
            1,
            grad,
            weight.weight,
            dx,
        )
        ctx.give(info, index, dx)
    x = ctx.acts[info.inputs[index]]
    op = b.gemm(
        f"{name}.{part}.dw",
        name,
        Phase.BWD_WEIGHT,
        out_width,
        width,
        rows,
        1,
        grad,
        x,
        weight.gradient,
    )
    ctx.grad_done(name, f"W{part}", op)
    if info.layer.bias:
        ctx.bias_grad(name, f"b{part}", grad)
