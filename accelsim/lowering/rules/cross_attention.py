"""Cross-attention: an ``attention`` layer with two inputs, the queries from the first
and the keys and values from the second (a decoder's attention to its encoder's
output, ``nn.MultiheadAttention(q, kv, kv)``), or with three, the queries, the keys and
the values from one each (``nn.MultiheadAttention(q, k, v)``).

The Q projection reads the first input (``Lq`` positions of width ``d``), one K and V
projection reads the second (``Lk`` positions of its own width; with three inputs a K
projection reads the second and a V projection the third, each of its own width, both
of ``Lk`` positions), the scores are ``Lq x Lk`` per head, and the output projection
gives ``Lq`` positions of width ``d``.  The backward pass gives each input its own
gradient.  No causal mask (which key a query may not see is a matter of one sequence's
order) and no rotary embedding.  Under ``lowering.compile: fused`` the core is
flash-attention kernels (:mod:`accelsim.lowering.flash_attention`), its query and key
blocks each along its own sequence.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelsim.config.enums import VectorClass
from accelsim.graph.ops import ParamKind, Phase, Tensor, TensorKind
from accelsim.lowering import flash_attention as flash
from accelsim.lowering.context import StepContext
from accelsim.lowering.rules.attention_core import AttentionDims, probs_backward
from accelsim.lowering.rules.vector import SOFTMAX_FWD_OPS
from accelsim.lowering.shapes import LayerInfo, Layout, Shape, ShapeProblem
from accelsim.workload import model as wm

COUNTS = {2: "two", 3: "three"}


@dataclass(frozen=True)
class Projection:
    """One input's projection: its name in the layer (``q``, ``kv``; or ``k`` and
    ``v``), the input it reads, its rows, the input's width and its output's."""

    part: str
    index: int
    rows: int
    width: int
    out: int


def projections(s: AttentionDims, inputs: int) -> tuple[Projection, ...]:
    """The Q projection, and one K and V projection (two inputs) or a K and a V
    projection (three)."""
    q = Projection("q", 0, s.rows, s.d, s.d)
    if inputs == 2:
        return (q, Projection("kv", 1, s.key_rows, s.features, 2 * s.kv_width))
    k = Projection("k", 1, s.key_rows, s.features, s.kv_width)
    return (q, k, Projection("v", 2, s.key_rows, s.value_features, s.kv_width))


def check(layer: wm.Attention, in_shapes: tuple[Shape, ...]) -> None:
    """What cross-attention refuses: inputs that are not sequences, keys and values of
    different lengths, a causal mask, a rotary embedding."""
    count = COUNTS[len(in_shapes)]
    if any(x.layout is not Layout.SEQUENCE for x in in_shapes):
        raise ShapeProblem(
            "inputs", f"cross-attention needs {count} sequence inputs", [str(x) for x in in_shapes]
        )
    if len(in_shapes) == 3 and in_shapes[1].dims[0] != in_shapes[2].dims[0]:
        message = "keys (the second input) and values (the third) need the same length"
        raise ShapeProblem("inputs", message, [str(x) for x in in_shapes])
    for key, on in (("causal", layer.causal), ("rotary", layer.rotary)):
        if on:
            message = f"needs self-attention (one input); this layer has {count} (cross-attention)"
            raise ShapeProblem(key, message, on)


def forward(
    ctx: StepContext, layer: wm.Attention, s: AttentionDims, xs: list[Tensor], y: Tensor
) -> None:
    """Each input's projection, ``QK^T``, the softmax, ``AV`` and the output projection
    to ``y``."""
    name, b = layer.name, ctx.b
    d, parts = s.d, projections(s, len(xs))
    weights = [
        ctx.param(name, f"W{p.part}", p.out * p.width, ParamKind.WEIGHT, p.out) for p in parts
    ]
    wo = ctx.param(name, "Wo", d * d, ParamKind.WEIGHT, d)
    if layer.bias:
        for p in parts:
            ctx.param(name, f"b{p.part}", p.out, ParamKind.BIAS, p.out)
    if layer.output_bias:
        ctx.param(name, "bo", d, ParamKind.BIAS, d)
    made = [ctx.t(f"{name}.{p.part}", TensorKind.ACTIVATION, p.rows * p.out) for p in parts]
    att = ctx.t(f"{name}.ctx", TensorKind.ACTIVATION, s.rows * d)
    for p, w, out in zip(parts, weights, made, strict=True):
        b.gemm(
            f"{name}.{p.part}.fwd", name, Phase.FWD, p.rows, p.out, p.width, 1, xs[p.index], w, out
        )
    q, k, v = made[0], made[1], made[-1]
    if ctx.attention is not None:
        word = q.word_bytes
        tiles = flash.tiling(ctx.attention, s.steps, layer.heads, s.kv, s.dh, False, word, s.keys)
        fused = flash.FusedAttention(name, tiles, s.n, s.kv, v, att, None if k is v else k, q)
        stats = flash.forward(ctx, fused)
        b.gemm(f"{name}.out.fwd", name, Phase.FWD, s.rows, d, d, 1, att, wo, y)
        ctx.saved[name] = (fused, stats)
        return
    elements = s.n * layer.heads * s.steps * s.keys
    scores = ctx.t(f"{name}.scores", TensorKind.ACTIVATION, elements)
    probs = ctx.t(f"{name}.probs", TensorKind.ACTIVATION, elements)
    b.gemm(f"{name}.qk.fwd", name, Phase.FWD, s.queries, s.keys, s.dh, s.per_head, q, k, scores)
    b.vector(
        f"{name}.softmax.fwd", name, Phase.FWD, elements, SOFTMAX_FWD_OPS, [scores], [probs],
        op_class=VectorClass.NORM,
    )  # fmt: skip
    b.gemm(f"{name}.av.fwd", name, Phase.FWD, s.queries, s.dh, s.keys, s.per_head, probs, v, att)
    b.gemm(f"{name}.out.fwd", name, Phase.FWD, s.rows, d, d, 1, att, wo, y)
    ctx.saved[name] = (q, k, v, probs, att)


def backward(
    ctx: StepContext,
    info: LayerInfo,
    s: AttentionDims,
    saved: tuple[Tensor, ...] | tuple[flash.FusedAttention, Tensor],
    datt: Tensor,
) -> None:
    """From the gradient of ``AV``'s output ``datt``: the gradients of ``AV``, the softmax
    and ``QK^T`` (the fused kernels' under ``lowering.compile: fused``), then each
    projection's, each input's to its reader."""
    name = info.layer.name
    parts = projections(s, len(info.inputs))
    grads = [ctx.t(f"{name}.d{p.part}", TensorKind.GRADIENT, p.rows * p.out) for p in parts]
    dq, dk, dv = grads[0], grads[1], grads[-1]
    if isinstance(saved[0], flash.FusedAttention):
        assert isinstance(saved[1], Tensor)
        flash.backward(ctx, saved[0], saved[1], datt, (dq, dk, dv))
    else:
        _core_backward(ctx, name, s, saved, datt, (dq, dk, dv))
    for p, grad in zip(parts, grads, strict=True):
        _projection_backward(ctx, info, p, grad)


def _core_backward(
    ctx: StepContext,
    name: str,
    s: AttentionDims,
    saved: tuple[Tensor, ...],
    datt: Tensor,
    grads: tuple[Tensor, Tensor, Tensor],
) -> None:
    """The gradients of ``AV``, the softmax and ``QK^T`` as separate ops, into ``dQ``,
    ``dK`` and ``dV`` (``grads``; ``dK`` and ``dV`` one tensor with two inputs)."""
    b, bi = ctx.b, Phase.BWD_INPUT
    q, k, v, probs, _ = saved
    dq, dk, dv = grads
    dscores = probs_backward(ctx, name, s, datt, probs, v, dv)
    queries, keys, dh, count = s.queries, s.keys, s.dh, s.per_head
    b.gemm(f"{name}.qk.dq", name, bi, queries, dh, keys, count, dscores, k, dq)
    b.gemm(f"{name}.qk.dk", name, bi, keys, dh, queries, count, dscores, q, dk, partial=True)


def _projection_backward(ctx: StepContext, info: LayerInfo, p: Projection, grad: Tensor) -> None:
    """A projection's gradients: its input's, when that needs one, its weight's and its
    bias's."""
    name, b = info.layer.name, ctx.b
    assert isinstance(info.layer, wm.Attention)
    weight = ctx.parameter(name, f"W{p.part}")
    if ctx.wants(info, p.index):
        dx = ctx.dx(info, p.index)
        bi = Phase.BWD_INPUT
        b.gemm(f"{name}.{p.part}.dx", name, bi, p.rows, p.width, p.out, 1, grad, weight.weight, dx)
        ctx.give(info, p.index, dx)
    x = ctx.acts[info.inputs[p.index]]
    bw = Phase.BWD_WEIGHT
    op = b.gemm(
        f"{name}.{p.part}.dw", name, bw, p.out, p.width, p.rows, 1, grad, x, weight.gradient
    )
    ctx.grad_done(name, f"W{p.part}", op)
    if info.layer.bias:
        ctx.bias_grad(name, f"b{p.part}", grad)
