"""One expert-parallel rank's experts of a ``moe`` layer: the tokens every rank of its
group routes to them, between all-to-all stand-ins over group ``expert`` that placement
gives their ranks (:mod:`accelsim.mapping.expert_placement`; the rule:
:mod:`accelsim.lowering.rules.moe`).  Under sequence parallelism
(``StepContext.expert_gathered``) each tensor rank routes its share of the sequence, as
Megatron-LM's all-to-all token dispatcher does: the buffer an all-to-all delivers is
all-gathered over the tensor group before the experts, and what they return
reduce-scattered over it before the all-to-all back."""

from __future__ import annotations

from collections.abc import Sequence

from accelsim.config.enums import CommGroup, VectorClass
from accelsim.graph.ops import Access, Phase, Tensor, TensorKind
from accelsim.graph.queries import reads_of
from accelsim.lowering.context import StepContext
from accelsim.lowering.rules.moe_experts import (
    COMBINE_OPS,
    Expert,
    Saved,
    expert_params,
    mlp_backward,
    mlp_forward,
    reduced_over_tensor,
)
from accelsim.network.collectives import Collective


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


def _gathered(ctx: StepContext, layer: str, received: Tensor, comm: int) -> Tensor:
    """With ``ctx.expert_gathered``, the buffer all-to-all ``comm`` delivered gathered
    over the tensor group (a stand-in all-gather after it): every tensor rank's tokens
    for the rank's experts, each split over the group; else the buffer itself."""
    if not ctx.expert_gathered:
        return received
    b = ctx.b
    whole = b.derived(received, ".allgather", received.kind, received.elements * ctx.expert_shards)
    b.collective(
        whole.name, layer, whole, (), [comm], Collective.ALL_GATHER, group=CommGroup.TENSOR,
        shard=received,
    )  # fmt: skip
    return whole


def _shares(
    ctx: StepContext, layer: str, name: str, parts: Sequence[Tensor], kind: TensorKind
) -> tuple[list[Tensor], list[int]]:
    """What the all-to-all returning the experts' ``parts`` sends and the ops it waits
    for: with ``ctx.expert_gathered``, the rank's share of their buffer summed over the
    tensor group (a stand-in reduce-scatter); else the parts, summed over the group by
    :func:`reduced_over_tensor` when each expert is split."""
    if not ctx.expert_gathered:
        return list(parts), reduced_over_tensor(ctx, layer, name, parts, kind)
    b = ctx.b
    buffer = ctx.t(f"{layer}.{name}", kind, sum(t.elements for t in parts))
    after = [o for t in parts for o in b.producers(t)]
    scatter = b.collective(
        f"{buffer.name}.reduce_scatter", layer, buffer, (), after, Collective.REDUCE_SCATTER,
        group=CommGroup.TENSOR,
    )  # fmt: skip
    share = b.derived(buffer, ".shard", kind, buffer.elements // ctx.expert_shards)
    return [b.alias(share, [buffer])], [scatter]


def _wait_for(ctx: StepContext, comm: int, start: int, delivered: Tensor) -> None:
    """Every op from ``start`` on that reads ``delivered`` waits for all-to-all ``comm``."""
    for op in ctx.b.ops[start:]:
        if any(a.tensor.key == delivered.key for a in reads_of(op)):
            ctx.b.add_dependencies(op.op_id, [comm])


def exchanged_forward(
    ctx: StepContext, name: str, flow: tuple[Tensor, Tensor, Tensor], sizes: tuple[int, ...]
) -> tuple[Expert, ...]:
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
        expert_params(ctx, name, e, d, f)
    sent = ctx.t(f"{name}.dispatched", TensorKind.ACTIVATION, buffer)
    b.vector(
        f"{name}.dispatch", name, Phase.FWD, buffer, 1, [Access(x, buffer)], [sent],
        op_class=VectorClass.DATA_MOVEMENT,
    )  # fmt: skip
    comm = _all_to_all(ctx, name, "received", [sent], TensorKind.ACTIVATION)
    start = len(b.ops)
    tokens = _gathered(ctx, name, sent, comm)
    computed = ranks * cap * (ctx.expert_shards if ctx.expert_gathered else 1)
    kept = tuple(
        mlp_forward(ctx, name, e, tokens, (computed, d, f)) for e in range(experts // ranks)
    )
    _wait_for(ctx, comm, start, sent)
    outputs = [k.y for k in kept]
    sent_back, summed = _shares(ctx, name, "expert_outputs", outputs, TensorKind.ACTIVATION)
    comm = _all_to_all(ctx, name, "returned", sent_back, TensorKind.ACTIVATION, summed)
    b.vector(
        f"{name}.combine", name, Phase.FWD, buffer, COMBINE_OPS,
        [*sent_back, Access(gates, experts * cap)], [y], after=[comm],
        op_class=VectorClass.ELEMENTWISE,
    )  # fmt: skip
    return kept


def exchanged_backward(
    ctx: StepContext,
    name: str,
    saved: Saved,
    flow: tuple[Tensor, Tensor],
    sizes: tuple[int, int, int, int],
    dx: Tensor | None,
) -> None:
    """The mirror of :func:`exchanged_forward` (``flow``: the output gradient and the
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
    dys = _gathered(ctx, name, dy, comm)
    computed = ranks * cap * (ctx.expert_shards if ctx.expert_gathered else 1)
    dxes = [
        mlp_backward(ctx, name, e, kept, dys, (computed, d, f))
        for e, kept in enumerate(saved.experts)
    ]
    _wait_for(ctx, comm, start, dy)
    if dx is None:
        return
    sent_back, summed = _shares(ctx, name, "expert_dx", dxes, TensorKind.GRADIENT)
    comm = _all_to_all(ctx, name, "ddispatched", sent_back, TensorKind.GRADIENT, summed)
    b.vector(
        f"{name}.dispatch.bwd", name, Phase.BWD_INPUT, buffer, 1, sent_back,
        [Access(dx, buffer)], after=[comm], partial=True, op_class=VectorClass.DATA_MOVEMENT,
    )  # fmt: skip
