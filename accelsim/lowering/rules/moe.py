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
and one combine of the whole buffer replace the experts' own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from accelsim.config.enums import CommGroup, VectorClass
from accelsim.graph.ops import Access, Epilogue, ParamKind, Phase, Tensor, TensorKind
from accelsim.graph.queries import reads_of
from accelsim.lowering.context import StepContext
from accelsim.lowering.expert_load import expert_load, routed_tokens
from accelsim.lowering.rules.base import LayerRule, register
from accelsim.lowering.rules.vector import SOFTMAX_BWD_OPS, SOFTMAX_FWD_OPS
from accelsim.lowering.shapes import LayerInfo, Layout, Shape, ShapeProblem, one_input
from accelsim.network.collectives import Collective
from accelsim.workload import model as wm

SILU = wm.ActivationFunction.SILU
COMBINE_OPS = 2  # forward: times the gate, add; backward: dY x gate, and dY . y for the gate


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
            kept = _exchanged_forward(ctx, name, (xs[0], gates, y), (experts, d, f, cap))
            ctx.saved[name] = _Saved(probs, gates, kept)
            return
        kept = _local_forward(ctx, name, (xs[0], gates, y), (caps, d, f // ctx.expert_shards))
        ctx.saved[name] = _Saved(probs, gates, kept)

    def backward(self, ctx: StepContext, info: LayerInfo, g: Tensor | None) -> None:
        layer, tokens, d, caps = _sizes(ctx, info)
        assert g is not None
        name, b, experts = layer.name, ctx.b, layer.experts
        saved: _Saved = ctx.saved[name]
        x = ctx.acts[info.inputs[0]]
        wants = ctx.wants(info)
        dgates = ctx.t(f"{name}.dgates", TensorKind.GRADIENT, saved.gates.elements)
        dx = ctx.t(f"{x.name}.grad<-{name}.experts", TensorKind.GRADIENT, x.elements)
        f, into = layer.intermediate, dx if wants else None
        if ctx.expert_ranks > 1:
            _exchanged_backward(ctx, name, saved, (g, dgates), (experts, d, f, caps[0]), into)
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
) -> tuple[_Expert, ...]:
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
        summed = _summed(ctx, name, "expert_outputs", [k.y for k in kept], TensorKind.ACTIVATION)
        for e, k in enumerate(kept):
            _combine(ctx, name, (e, caps[e]), k, flow, summed)
    return tuple(kept)


def _expert_forward(
    ctx: StepContext, name: str, e: int, x: Tensor, sizes: tuple[int, int, int]
) -> _Expert:
    """Expert ``e``'s parameters, dispatch (its ``cap`` tokens of the layer's input
    ``x``) and SwiGLU MLP (``sizes``: the tokens, the width and the inner width)."""
    cap, d, f = sizes
    b, at = ctx.b, f"{name}.experts.{e}"
    _expert_params(ctx, name, e, d, f)
    xe = ctx.t(f"{at}.x", TensorKind.ACTIVATION, cap * d)
    b.vector(
        f"{at}.dispatch", name, Phase.FWD, xe.elements, 1, [Access(x, xe.elements)], [xe],
        op_class=VectorClass.DATA_MOVEMENT, expert=e,
    )  # fmt: skip
    return _mlp_forward(ctx, name, e, xe, sizes)


def _combine(
    ctx: StepContext,
    name: str,
    expert: tuple[int, int],
    kept: _Expert,
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


def _expert_params(ctx: StepContext, name: str, e: int, d: int, f: int) -> None:
    """Expert ``e``'s weights ``w1``, ``w3`` and ``w2``."""
    for w, rows in (("w1", f), ("w3", f), ("w2", d)):
        ctx.param(name, f"experts.{e}.{w}", d * f, ParamKind.WEIGHT, rows, expert=e)


def _mlp_forward(
    ctx: StepContext, name: str, e: int, xe: Tensor, sizes: tuple[int, int, int]
) -> _Expert:
    """Expert ``e``'s SwiGLU MLP on its ``cap`` tokens of ``xe`` (``sizes``: the tokens,
    the width and the inner width)."""
    cap, d, f = sizes
    b, at = ctx.b, f"{name}.experts.{e}"
    w1, w3, w2 = (ctx.parameter(name, f"experts.{e}.{w}").weight for w in ("w1", "w3", "w2"))
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
    return _Expert(xe, h1, h3, act, hidden, ye)


def _local_backward(
    ctx: StepContext,
    name: str,
    saved: _Saved,
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
        summed = _summed(ctx, name, "expert_dx", dxes, TensorKind.GRADIENT)
        for e, dxe in enumerate(dxes):
            _scattered(ctx, name, e, dxe, dx, summed)


def _expert_backward(
    ctx: StepContext,
    name: str,
    e: int,
    kept: _Expert,
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
    return _mlp_backward(ctx, name, e, kept, dye, sizes)


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


def _mlp_backward(
    ctx: StepContext,
    name: str,
    e: int,
    kept: _Expert,
    dye: Tensor,
    sizes: tuple[int, int, int],
) -> Tensor:
    """Expert ``e``'s MLP backward from its output gradient ``dye``, each weight's
    gradient on the way; its input gradient."""
    cap, d, f = sizes
    b, at = ctx.b, f"{name}.experts.{e}"
    w2 = ctx.parameter(name, f"experts.{e}.w2")
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
    dxe = ctx.t(f"{at}.dx", TensorKind.GRADIENT, cap * d)
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
    return dxe


def _summed(
    ctx: StepContext, layer: str, name: str, parts: Sequence[Tensor], kind: TensorKind
) -> list[int]:
    """The ops an all-to-all of the experts' ``parts`` waits for: the ops that made them
    or, with each expert split over ``ctx.expert_shards`` tensor-parallel ranks (partial
    sums), the all-reduce of the buffer they fill over the tensor group (a stand-in)
    after them."""
    b = ctx.b
    after = [o for t in parts for o in b.producers(t)]
    if ctx.expert_shards == 1:
        return after
    buffer = ctx.t(f"{layer}.{name}", kind, sum(t.elements for t in parts))
    return [
        b.allreduce(f"{buffer.name}.allreduce", layer, buffer, (), after, group=CommGroup.TENSOR)
    ]


def _all_to_all(
    ctx: StepContext,
    layer: str,
    name: str,
    sent: Sequence[Tensor],
    kind: TensorKind,
    after: Sequence[int] | None = None,
) -> int:
    """An all-to-all over the expert-parallel group (a stand-in: placement gives it its
    ranks) of each rank's buffer ``sent`` (one tensor or several that fill it), after
    the ops that made it (or ``after``); every later op reading the buffer it delivers
    reads ``sent`` (the same size on every rank of a balanced group) and waits for it
    (:func:`_wait_for`)."""
    b = ctx.b
    buffer = ctx.t(f"{layer}.{name}", kind, sum(t.elements for t in sent))
    if after is None:
        after = [o for t in sent for o in b.producers(t)]
    return b.collective(
        f"{buffer.name}.all_to_all", layer, buffer, (), after, Collective.ALL_TO_ALL,
        group=CommGroup.EXPERT,
    )  # fmt: skip


def _wait_for(ctx: StepContext, comm: int, start: int, delivered: Tensor) -> None:
    """Every op from ``start`` on that reads ``delivered`` waits for all-to-all ``comm``."""
    for op in ctx.b.ops[start:]:
        if any(a.tensor.key == delivered.key for a in reads_of(op)):
            ctx.b.add_dependencies(op.op_id, [comm])


def _exchanged_forward(
    ctx: StepContext, name: str, flow: tuple[Tensor, Tensor, Tensor], sizes: tuple[int, ...]
) -> tuple[_Expert, ...]:
    """One expert-parallel rank's forward ops of the experts (``flow``: the layer's input,
    the gates and its output; ``sizes``: the experts ``E``, width ``d``, inner width
    ``f`` and capacity ``C`` of this rank's tokens).

    The dispatch gathers the rank's ``E x C`` routed tokens into one buffer (``C`` per
    expert, grouped by the rank that holds it), the first all-to-all delivers to each
    rank the ``C`` tokens of each of its ``E / e`` experts from each of the ``e`` ranks,
    each local expert computes its ``e x C`` tokens, the second all-to-all returns the
    outputs to their tokens' ranks and the combine weights and sums them there.
    """
    x, gates, y = flow
    experts, d, f, cap = sizes
    ranks, b, f = ctx.expert_ranks, ctx.b, f // ctx.expert_shards
    buffer = experts * cap * d
    for e in range(experts // ranks):
        _expert_params(ctx, name, e, d, f)
    sent = ctx.t(f"{name}.dispatched", TensorKind.ACTIVATION, buffer)
    b.vector(
        f"{name}.dispatch", name, Phase.FWD, buffer, 1, [Access(x, buffer)], [sent],
        op_class=VectorClass.DATA_MOVEMENT,
    )  # fmt: skip
    comm = _all_to_all(ctx, name, "received", [sent], TensorKind.ACTIVATION)
    start = len(b.ops)
    kept = tuple(
        _mlp_forward(ctx, name, e, sent, (ranks * cap, d, f)) for e in range(experts // ranks)
    )
    _wait_for(ctx, comm, start, sent)
    outputs = [k.y for k in kept]
    summed = _summed(ctx, name, "expert_outputs", outputs, TensorKind.ACTIVATION)
    comm = _all_to_all(ctx, name, "returned", outputs, TensorKind.ACTIVATION, summed)
    b.vector(
        f"{name}.combine", name, Phase.FWD, buffer, COMBINE_OPS,
        [*outputs, Access(gates, experts * cap)], [y], after=[comm],
        op_class=VectorClass.ELEMENTWISE,
    )  # fmt: skip
    return kept


def _exchanged_backward(
    ctx: StepContext,
    name: str,
    saved: _Saved,
    flow: tuple[Tensor, Tensor],
    sizes: tuple[int, int, int, int],
    dx: Tensor | None,
) -> None:
    """The mirror of :func:`_exchanged_forward` (``flow``: the output gradient and the
    gates' gradient): the combine's gradient, an all-to-all of it to the experts' ranks,
    each local expert's backward, and (when the input needs a gradient) an all-to-all of
    the experts' ``dX`` back and its scatter-add."""
    g, dgates = flow
    experts, d, f, cap = sizes
    ranks, b, f = ctx.expert_ranks, ctx.b, f // ctx.expert_shards
    buffer = experts * cap * d
    dy = ctx.t(f"{name}.dreturned", TensorKind.GRADIENT, buffer)
    b.vector(
        f"{name}.combine.bwd", name, Phase.BWD_INPUT, buffer, COMBINE_OPS,
        [Access(g, buffer), *(k.y for k in saved.experts), Access(saved.gates, experts * cap)],
        [dy, dgates], op_class=VectorClass.ELEMENTWISE,
    )  # fmt: skip
    comm = _all_to_all(ctx, name, "dreceived", [dy], TensorKind.GRADIENT)
    start = len(b.ops)
    dxes = [
        _mlp_backward(ctx, name, e, kept, dy, (ranks * cap, d, f))
        for e, kept in enumerate(saved.experts)
    ]
    _wait_for(ctx, comm, start, dy)
    if dx is None:
        return
    summed = _summed(ctx, name, "expert_dx", dxes, TensorKind.GRADIENT)
    comm = _all_to_all(ctx, name, "ddispatched", dxes, TensorKind.GRADIENT, summed)
    b.vector(
        f"{name}.dispatch.bwd", name, Phase.BWD_INPUT, buffer, 1, dxes, [Access(dx, buffer)],
        after=[comm], partial=True, op_class=VectorClass.DATA_MOVEMENT,
    )  # fmt: skip
