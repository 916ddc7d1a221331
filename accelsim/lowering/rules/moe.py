"""``moe``: a mixture-of-experts MLP on one processor, every expert's work its own ops.

With ``N`` tokens in the batch (samples x sequence length) of width ``d``, ``E``
experts of inner width ``f`` and ``k`` experts per token, each expert computes its
capacity ``C = ceil(capacity_factor x N x k / E)`` tokens (``balance: balanced``: a
trained router spreads tokens evenly, so every expert is full).

Forward: the router (a GEMM ``N x E x d``, a softmax over the ``E`` logits, and the
top-k: ``k`` compare-and-select passes over the logits, which also renormalise the
kept gates); per expert ``e``, the dispatch (a gather of its ``C`` tokens), the
SwiGLU MLP (``w1`` and ``w3``: GEMMs ``C x f x d``; SiLU of ``w1``'s output times
``w3``'s; ``w2``: a GEMM ``C x d x f``) and its share of the combine (its outputs
times their gates, added into the layer's output: 2 ops per element).  Backward
mirrors it: per expert the combine's gradient (the output gradient gathered and
scaled by the gate, and each gate's gradient, a dot product), ``dX`` and ``dW`` of
``w2``, the product's and SiLU's gradients, ``dX`` and ``dW`` of ``w1`` and ``w3``, and
the scatter-add of the expert's ``dX`` to its tokens; then the gates' gradients
scattered to the ``E`` logits, the softmax's gradient, and the router's ``dW`` and
``dX``.  Every op and parameter of expert ``e`` carries ``expert=e``, so a placement
can put experts on processors; the router, the softmax and the top-k carry none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from accelsim.config.enums import VectorClass
from accelsim.graph.ops import Access, Epilogue, ParamKind, Phase, Tensor, TensorKind
from accelsim.lowering.context import StepContext
from accelsim.lowering.rules.base import LayerRule, register
from accelsim.lowering.rules.vector import SOFTMAX_BWD_OPS, SOFTMAX_FWD_OPS
from accelsim.lowering.shapes import LayerInfo, Layout, Shape, ShapeProblem, one_input
from accelsim.workload import model as wm

SILU = wm.ActivationFunction.SILU
COMBINE_OPS = 2  # forward: times the gate, add; backward: dY x gate, and dY . y for the gate


def capacity(tokens: int, layer: wm.Moe) -> int:
    """Tokens each expert computes: ``ceil(capacity_factor x tokens x top_k / experts)``,
    exact (the factor as the fraction its float is)."""
    return math.ceil(Fraction(layer.capacity_factor) * tokens * layer.top_k / layer.experts)


@dataclass(frozen=True)
class _Expert:
    """What expert ``e``'s forward ops left for its backward ops."""

    x: Tensor
    h1: Tensor
    h3: Tensor
    act: Tensor
    hidden: Tensor
    y: Tensor


@dataclass(frozen=True)
class _Saved:
    probs: Tensor
    gates: Tensor
    experts: tuple[_Expert, ...]


def _sizes(ctx: StepContext, info: LayerInfo) -> tuple[wm.Moe, int, int, int]:
    """The layer, its batch's tokens ``N``, width ``d`` and capacity ``C``."""
    layer = info.layer
    assert isinstance(layer, wm.Moe)
    tokens = ctx.n * math.prod(info.in_shapes[0].dims[:-1])
    return layer, tokens, info.in_shapes[0].dims[-1], capacity(tokens, layer)


@register
class MoeRule(LayerRule):
    kinds = ("moe",)
    has_params = True

    def shape(self, layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
        assert isinstance(layer, wm.Moe)
        x = one_input(layer, in_shapes, Layout.FEATURES, Layout.SEQUENCE)
        if layer.top_k > layer.experts:
            raise ShapeProblem("top_k", f"at most experts ({layer.experts})", layer.top_k)
        return x

    def forward(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        layer, tokens, d, cap = _sizes(ctx, info)
        name, b, experts, f = layer.name, ctx.b, layer.experts, layer.intermediate
        router = ctx.param(name, "router.W", d * experts, ParamKind.WEIGHT, experts)
        logits = ctx.t(f"{name}.logits", TensorKind.ACTIVATION, tokens * experts)
        b.gemm(f"{name}.router.fwd", name, Phase.FWD, tokens, experts, d, 1, xs[0], router, logits)
        probs = ctx.t(f"{name}.probs", TensorKind.ACTIVATION, tokens * experts)
        b.vector(
            f"{name}.softmax.fwd", name, Phase.FWD, probs.elements, SOFTMAX_FWD_OPS, [logits],
            [probs], op_class=VectorClass.NORM,
        )  # fmt: skip
        gates = ctx.t(f"{name}.gates", TensorKind.ACTIVATION, tokens * layer.top_k)
        b.vector(
            f"{name}.topk", name, Phase.FWD, probs.elements, layer.top_k, [probs], [gates],
            op_class=VectorClass.REDUCE,
        )  # fmt: skip
        saved = []
        for e in range(experts):
            saved.append(_expert_forward(ctx, name, e, (xs[0], gates, y), d, f, cap))
        ctx.saved[name] = _Saved(probs, gates, tuple(saved))

    def backward(self, ctx: StepContext, info: LayerInfo, g: Tensor | None) -> None:
        layer, tokens, d, cap = _sizes(ctx, info)
        assert g is not None
        name, b, experts = layer.name, ctx.b, layer.experts
        saved: _Saved = ctx.saved[name]
        x = ctx.acts[info.inputs[0]]
        wants = ctx.wants(info)
        dgates = ctx.t(f"{name}.dgates", TensorKind.GRADIENT, saved.gates.elements)
        dx = ctx.t(f"{x.name}.grad<-{name}.experts", TensorKind.GRADIENT, x.elements)
        for e, kept in enumerate(saved.experts):
            flow = (g, saved.gates, dgates)
            sizes = (cap, d, layer.intermediate)
            _expert_backward(ctx, name, e, kept, flow, sizes, dx if wants else None)
        dprobs = ctx.t(f"{name}.dprobs", TensorKind.GRADIENT, saved.probs.elements)
        b.vector(
            f"{name}.topk.bwd", name, Phase.BWD_INPUT, dprobs.elements, 1, [dgates], [dprobs],
            op_class=VectorClass.DATA_MOVEMENT,
        )  # fmt: skip
        dlogits = ctx.t(f"{name}.dlogits", TensorKind.GRADIENT, dprobs.elements)
        b.vector(
            f"{name}.softmax.bwd", name, Phase.BWD_INPUT, dlogits.elements, SOFTMAX_BWD_OPS,
            [dprobs, saved.probs], [dlogits], op_class=VectorClass.NORM,
        )  # fmt: skip
        router = ctx.parameter(name, "router.W")
        if wants:
            dx_router = ctx.t(f"{x.name}.grad<-{name}.router", TensorKind.GRADIENT, x.elements)
            b.gemm(
                f"{name}.router.dx", name, Phase.BWD_INPUT, tokens, d, experts, 1, dlogits,
                router.weight, dx_router,
            )  # fmt: skip
            ctx.give(info, 0, dx)
            ctx.give(info, 0, dx_router)
        op = b.gemm(
            f"{name}.router.dw", name, Phase.BWD_WEIGHT, experts, d, tokens, 1, dlogits, x,
            router.gradient,
        )  # fmt: skip
        ctx.grad_done(name, "router.W", op)


def _expert_forward(
    ctx: StepContext,
    name: str,
    e: int,
    flow: tuple[Tensor, Tensor, Tensor],
    d: int,
    f: int,
    cap: int,
) -> _Expert:
    """Expert ``e``'s forward ops: its dispatch, SwiGLU MLP and share of the combine
    (``flow``: the layer's input, the gates and its output)."""
    x, gates, y = flow
    b, at = ctx.b, f"{name}.experts.{e}"
    w1, w3, w2 = (
        ctx.param(name, f"experts.{e}.{w}", d * f, ParamKind.WEIGHT, rows, expert=e)
        for w, rows in (("w1", f), ("w3", f), ("w2", d))
    )
    xe = ctx.t(f"{at}.x", TensorKind.ACTIVATION, cap * d)
    b.vector(
        f"{at}.dispatch", name, Phase.FWD, xe.elements, 1, [Access(x, xe.elements)], [xe],
        op_class=VectorClass.DATA_MOVEMENT, expert=e,
    )  # fmt: skip
    h1, h3, act, hidden = (
        ctx.t(f"{at}.{part}", TensorKind.ACTIVATION, cap * f)
        for part in ("h1", "h3", "act", "hidden")
    )
    b.gemm(f"{at}.w1.fwd", name, Phase.FWD, cap, f, d, 1, xe, w1, h1, expert=e)
    b.gemm(f"{at}.w3.fwd", name, Phase.FWD, cap, f, d, 1, xe, w3, h3, expert=e)
    b.vector(
        f"{at}.act.fwd", name, Phase.FWD, act.elements, SILU.forward_ops, [h1], [act],
        epilogue=Epilogue.ELEMENTWISE, op_class=VectorClass.TRANSCENDENTAL, expert=e,
    )  # fmt: skip
    b.vector(
        f"{at}.mul.fwd", name, Phase.FWD, hidden.elements, 1, [act, h3], [hidden],
        epilogue=Epilogue.ELEMENTWISE, op_class=VectorClass.ELEMENTWISE, expert=e,
    )  # fmt: skip
    ye = ctx.t(f"{at}.y", TensorKind.ACTIVATION, cap * d)
    b.gemm(f"{at}.w2.fwd", name, Phase.FWD, cap, d, f, 1, hidden, w2, ye, expert=e)
    b.vector(
        f"{at}.combine", name, Phase.FWD, ye.elements, COMBINE_OPS, [ye, Access(gates, cap)],
        [Access(y, ye.elements)], partial=True, op_class=VectorClass.ELEMENTWISE, expert=e,
    )  # fmt: skip
    return _Expert(xe, h1, h3, act, hidden, ye)


def _expert_backward(
    ctx: StepContext,
    name: str,
    e: int,
    kept: _Expert,
    flow: tuple[Tensor, Tensor, Tensor],
    sizes: tuple[int, int, int],
    dx: Tensor | None,
) -> None:
    """Expert ``e``'s backward ops (``flow``: the output gradient, the gates and their
    gradient; ``sizes``: its capacity, the width and the inner width); its ``dX``
    scatter-added into ``dx`` when the input needs one."""
    g, gates, dgates = flow
    b, at = ctx.b, f"{name}.experts.{e}"
    w2 = ctx.parameter(name, f"experts.{e}.w2")
    cap, d, f = sizes
    dye = ctx.t(f"{at}.dy", TensorKind.GRADIENT, kept.y.elements)
    b.vector(
        f"{at}.combine.bwd", name, Phase.BWD_INPUT, dye.elements, COMBINE_OPS,
        [Access(g, dye.elements), kept.y, Access(gates, cap)], [dye, Access(dgates, cap)],
        partial=True, op_class=VectorClass.ELEMENTWISE, expert=e,
    )  # fmt: skip
    dhidden, dact, dh1, dh3 = (
        ctx.t(f"{at}.d{part}", TensorKind.GRADIENT, cap * f)
        for part in ("hidden", "act", "h1", "h3")
    )
    b.gemm(f"{at}.w2.dx", name, Phase.BWD_INPUT, cap, f, d, 1, dye, w2.weight, dhidden, expert=e)
    op = b.gemm(
        f"{at}.w2.dw", name, Phase.BWD_WEIGHT, d, f, cap, 1, dye, kept.hidden, w2.gradient,
        expert=e,
    )  # fmt: skip
    ctx.grad_done(name, f"experts.{e}.w2", op)
    b.vector(
        f"{at}.mul.bwd", name, Phase.BWD_INPUT, dact.elements, 2, [dhidden, kept.act, kept.h3],
        [dact, dh3], epilogue=Epilogue.ELEMENTWISE, op_class=VectorClass.ELEMENTWISE, expert=e,
    )  # fmt: skip
    b.vector(
        f"{at}.act.bwd", name, Phase.BWD_INPUT, dh1.elements, SILU.backward_ops,
        [dact, kept.h1], [dh1], epilogue=Epilogue.ELEMENTWISE,
        op_class=VectorClass.TRANSCENDENTAL, expert=e,
    )  # fmt: skip
    dxe = ctx.t(f"{at}.dx", TensorKind.GRADIENT, kept.x.elements)
    for w, dh in (("w1", dh1), ("w3", dh3)):
        weight = ctx.parameter(name, f"experts.{e}.{w}")
        b.gemm(
            f"{at}.{w}.dx", name, Phase.BWD_INPUT, cap, d, f, 1, dh, weight.weight, dxe,
            partial=True, expert=e,
        )  # fmt: skip
        op = b.gemm(
            f"{at}.{w}.dw", name, Phase.BWD_WEIGHT, f, d, cap, 1, dh, kept.x, weight.gradient,
            expert=e,
        )  # fmt: skip
        ctx.grad_done(name, f"experts.{e}.{w}", op)
    if dx is not None:
        b.vector(
            f"{at}.dispatch.bwd", name, Phase.BWD_INPUT, dxe.elements, 1, [dxe],
            [Access(dx, dxe.elements)], partial=True, op_class=VectorClass.DATA_MOVEMENT,
            expert=e,
        )  # fmt: skip
