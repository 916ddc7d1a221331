"""``moe``: a mixture-of-experts MLP on one processor, every expert's work its own ops.

With ``N`` tokens in the batch (samples x sequence length) of width ``d``, ``E``
experts of inner width ``f`` and ``k`` experts per token, each expert computes its
capacity ``C = ceil(capacity_factor x N x k / E)`` tokens, padded, or what the layer's
``overflow`` and ``hot_load`` give it (:mod:`accelsim.lowering.expert_load`).

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

On one rank of an expert-parallel group of ``e`` (``StepContext.expert_ranks``), the
layer holds ``E / e`` experts (``expert`` 0 to ``E / e - 1``, the rank's own), each
computing ``e x C`` tokens (its ``C`` from every rank), between two all-to-alls of
the rank's ``E x C x d`` buffer each way, stand-ins over group ``expert`` that
placement gives their ranks (:mod:`accelsim.mapping.expert_placement`): one dispatch
and one combine of the whole buffer replace the experts' own
(:mod:`accelsim.lowering.rules.moe_exchange`).  Each expert's MLP is in
:mod:`accelsim.lowering.rules.moe_experts`, split over a tensor-parallel group with
``StepContext.expert_shards`` above 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

from accelsim.config.enums import VectorClass
from accelsim.graph.ops import Access, ParamKind, Phase, Tensor, TensorKind
from accelsim.lowering.context import StepContext
from accelsim.lowering.expert_load import expert_load, routed_tokens
from accelsim.lowering.rules.base import LayerRule, register
from accelsim.lowering.rules.moe_exchange import exchanged_backward, exchanged_forward
from accelsim.lowering.rules.moe_experts import (
    COMBINE_OPS,
    Expert,
    Saved,
    expert_params,
    mlp_backward,
    mlp_forward,
    reduced_over_tensor,
)
from accelsim.lowering.rules.vector import SOFTMAX_BWD_OPS, SOFTMAX_FWD_OPS
from accelsim.lowering.shapes import LayerInfo, Layout, Shape, ShapeProblem, one_input
from accelsim.workload import model as wm


def _sizes(ctx: StepContext, info: LayerInfo) -> tuple[wm.Moe, int, int, tuple[int, ...]]:
    """The layer, its batch's tokens ``N``, width ``d`` and the tokens each expert
    computes."""
    layer = info.layer
    assert isinstance(layer, wm.Moe)
    tokens = ctx.n * math.prod(info.in_shapes[0].dims[:-1])
    return layer, tokens, info.in_shapes[0].dims[-1], expert_load(tokens, layer).computed


@register
class MoeRule(LayerRule):
    kinds = ("moe",)
    has_params = True

    def shape(self, layer: wm.Layer, in_shapes: tuple[Shape, ...]) -> Shape:
        assert isinstance(layer, wm.Moe)
        x = one_input(layer, in_shapes, Layout.FEATURES, Layout.SEQUENCE)
        if layer.top_k > layer.experts:
            raise ShapeProblem("top_k", f"at most experts ({layer.experts})", layer.top_k)
        if Fraction(layer.hot_load) * layer.top_k > layer.experts:
            most = f"{layer.experts} / {layer.top_k}"
            why = f"at most experts / top_k ({most}): a token picks an expert once"
            raise ShapeProblem("hot_load", why, layer.hot_load)
        if layer.overflow == "dropless" and 0 in routed_tokens(math.prod(x.dims[:-1]), layer):
            why = "leaves an expert no token of a sample under overflow dropless"
            raise ShapeProblem("hot_load", why, layer.hot_load)
        return x

    def forward(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor], y: Tensor) -> None:
        layer, tokens, d, caps = _sizes(ctx, info)
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
        if ctx.expert_ranks > 1:
            (cap,) = set(caps)  # uneven experts are refused with expert parallelism
            kept = exchanged_forward(ctx, name, (xs[0], gates, y), (experts, d, f, cap))
            ctx.saved[name] = Saved(probs, gates, kept)
            return
        kept = _local_forward(ctx, name, (xs[0], gates, y), (caps, d, f // ctx.expert_shards))
        ctx.saved[name] = Saved(probs, gates, kept)

    def backward(self, ctx: StepContext, info: LayerInfo, g: Tensor | None) -> None:
        layer, tokens, d, caps = _sizes(ctx, info)
        assert g is not None
        name, b, experts = layer.name, ctx.b, layer.experts
        saved: Saved = ctx.saved[name]
        x = ctx.acts[info.inputs[0]]
        wants = ctx.wants(info)
        dgates = ctx.t(f"{name}.dgates", TensorKind.GRADIENT, saved.gates.elements)
        dx = ctx.t(f"{x.name}.grad<-{name}.experts", TensorKind.GRADIENT, x.elements)
        f, into = layer.intermediate, dx if wants else None
        if ctx.expert_ranks > 1:
            exchanged_backward(ctx, name, saved, (g, dgates), (experts, d, f, caps[0]), into)
        else:
            flow = (g, saved.gates, dgates)
            _local_backward(ctx, name, saved, flow, (caps, d, f // ctx.expert_shards), into)
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


def _local_forward(
    ctx: StepContext,
    name: str,
    flow: tuple[Tensor, Tensor, Tensor],
    sizes: tuple[tuple[int, ...], int, int],
) -> tuple[Expert, ...]:
    """Every expert's forward ops on this processor, each its dispatch, SwiGLU MLP and
    share of the combine (``flow``: the layer's input, the gates and its output;
    ``sizes``: each expert's tokens, the width and the rank's inner width); with the
    experts split over ``ctx.expert_shards`` tensor-parallel ranks, every combine after
    the all-reduce of their outputs (partial sums)."""
    caps, d, f = sizes
    split, kept = ctx.expert_shards > 1, []
    for e, cap in enumerate(caps):
        kept.append(_expert_forward(ctx, name, e, flow[0], (cap, d, f)))
        if not split:
            _combine(ctx, name, (e, cap), kept[-1], flow, [])
    if split:
        summed = reduced_over_tensor(
            ctx, name, "expert_outputs", [k.y for k in kept], TensorKind.ACTIVATION
        )
        for e, k in enumerate(kept):
            _combine(ctx, name, (e, caps[e]), k, flow, summed)
    return tuple(kept)


def _expert_forward(
    ctx: StepContext, name: str, e: int, x: Tensor, sizes: tuple[int, int, int]
) -> Expert:
    """Expert ``e``'s parameters, dispatch (its ``cap`` tokens of the layer's input
    ``x``) and SwiGLU MLP (``sizes``: the tokens, the width and the inner width)."""
    cap, d, f = sizes
    b, at = ctx.b, f"{name}.experts.{e}"
    expert_params(ctx, name, e, d, f)
    xe = ctx.t(f"{at}.x", TensorKind.ACTIVATION, cap * d)
    b.vector(
        f"{at}.dispatch", name, Phase.FWD, xe.elements, 1, [Access(x, xe.elements)], [xe],
        op_class=VectorClass.DATA_MOVEMENT, expert=e,
    )  # fmt: skip
    return mlp_forward(ctx, name, e, xe, sizes)


def _combine(
    ctx: StepContext,
    name: str,
    expert: tuple[int, int],
    kept: Expert,
    flow: tuple[Tensor, Tensor, Tensor],
    after: Sequence[int],
) -> None:
    """Expert ``e``'s share of the combine (``expert``: ``e`` and its tokens): its
    outputs times their gates, added into the layer's output (``flow``), after the ops
    ``after``."""
    (e, cap), (_, gates, y) = expert, flow
    ctx.b.vector(
        f"{name}.experts.{e}.combine", name, Phase.FWD, kept.y.elements, COMBINE_OPS,
        [kept.y, Access(gates, cap)], [Access(y, kept.y.elements)], partial=True,
        after=list(after), op_class=VectorClass.ELEMENTWISE, expert=e,
    )  # fmt: skip


def _local_backward(
    ctx: StepContext,
    name: str,
    saved: Saved,
    flow: tuple[Tensor, Tensor, Tensor],
    sizes: tuple[tuple[int, ...], int, int],
    dx: Tensor | None,
) -> None:
    """The mirror of :func:`_local_forward` (``flow``: the output gradient, the gates and
    their gradient): each expert's backward and the scatter-add of its ``dX`` into
    ``dx`` when the input needs one; with the experts split over the tensor group, every
    scatter-add after the all-reduce of their ``dX`` (partial sums)."""
    caps, d, f = sizes
    split, dxes = ctx.expert_shards > 1, []
    for e, kept in enumerate(saved.experts):
        dxes.append(_expert_backward(ctx, name, e, kept, flow, (caps[e], d, f)))
        if dx is not None and not split:
            _scattered(ctx, name, e, dxes[-1], dx, [])
    if dx is not None and split:
        summed = reduced_over_tensor(ctx, name, "expert_dx", dxes, TensorKind.GRADIENT)
        for e, dxe in enumerate(dxes):
            _scattered(ctx, name, e, dxe, dx, summed)


def _expert_backward(
    ctx: StepContext,
    name: str,
    e: int,
    kept: Expert,
    flow: tuple[Tensor, Tensor, Tensor],
    sizes: tuple[int, int, int],
) -> Tensor:
    """Expert ``e``'s backward ops (``flow``: the output gradient, the gates and their
    gradient; ``sizes``: its tokens, the width and the inner width); its ``dX``."""
    g, gates, dgates = flow
    b, at, cap = ctx.b, f"{name}.experts.{e}", sizes[0]
    dye = ctx.t(f"{at}.dy", TensorKind.GRADIENT, kept.y.elements)
    b.vector(
        f"{at}.combine.bwd", name, Phase.BWD_INPUT, dye.elements, COMBINE_OPS,
        [Access(g, dye.elements), kept.y, Access(gates, cap)], [dye, Access(dgates, cap)],
        partial=True, op_class=VectorClass.ELEMENTWISE, expert=e,
    )  # fmt: skip
    return mlp_backward(ctx, name, e, kept, dye, sizes)


def _scattered(
    ctx: StepContext, name: str, e: int, dxe: Tensor, dx: Tensor, after: Sequence[int]
) -> None:
    """Expert ``e``'s ``dX`` scatter-added into the input's gradient ``dx``, after the
    ops ``after``."""
    ctx.b.vector(
        f"{name}.experts.{e}.dispatch.bwd", name, Phase.BWD_INPUT, dxe.elements, 1, [dxe],
        [Access(dx, dxe.elements)], partial=True, after=list(after),
        op_class=VectorClass.DATA_MOVEMENT, expert=e,
    )  # fmt: skip
