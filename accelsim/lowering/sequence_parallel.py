"""Sequence parallelism (Korthikanti et al., 2022): the layers between a tensor-parallel
group's blocks on a share of the sequence.

With a tensor plan of degree ``t`` and ``sequence_parallel``, every layer the plan does
not split (norms, dropouts, residual additions, the position embedding, a replicated
MLP; with expert parallelism a ``moe`` layer, each rank routing its share,
:mod:`accelsim.lowering.rules.moe_exchange`) runs on ``s / t`` of the sequence on each
rank, its input and output that share.
Where a block meets that region the group's communication changes (Megatron-LM's
``sequence_parallel`` in ``tensor_parallel/layers.py`` and ``mappings.py``):

* forward, the all-reduce after each row-parallel linear (and after the word
  embedding) becomes a **reduce-scatter**, leaving each rank its share of the sum, and
  an **all-gather** of the shard before each column-parallel linear (or attention's
  QKV projection, or the LM head) gives it the whole sequence;
* backward the mirror: the output gradient of each row-parallel linear is
  all-gathered before its backward, the column-parallel linears' input gradient
  (partial sums over the ranks) reduce-scattered into the shard's gradient, and the
  column-parallel linear's weight gradient reads its input all-gathered **again**
  from the stashed shard (the whole sequence is not kept): that all-gather starts when
  the layer's output gradient is ready and runs beside its input-gradient GEMM, as
  Megatron-LM overlaps it;
* the parameters of the region (norms, the position table) see a rank's share of the
  tokens, so their gradients are partial sums: each all-reduced over the group after
  the backward pass (Megatron-LM's ``_allreduce_layernorm_grads``, which coalesces them
  into one all-reduce: here one each, our choice).

A reduce-scatter and an all-gather of a tensor put on the wire what one all-reduce
of it does, so a block's communication is unchanged in bytes; the stash and the vector
work of the region are a ``t``-th.  What is our choice: the word embedding's output is
reduce-scattered and the position embedding looked up on the rank's share (Megatron-LM
all-reduces the embedding and keeps its share of the sum when the model has a
position table).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from accelsim.config.enums import CommGroup
from accelsim.errors import Problem
from accelsim.graph.ops import NO_EXPERT, Stage, Tensor
from accelsim.lowering.context import StepContext
from accelsim.lowering.shapes import LayerInfo, Layout, Shape
from accelsim.lowering.tensor_parallel import Role, TensorLowering, TensorPlan
from accelsim.network.collectives import Collective

PER_TOKEN = (
    "linear",
    "layernorm",
    "rmsnorm",
    "activation",
    "add",
    "mul",
    "dropout",
    "embedding",
    "softmax",
    "cross_entropy",
)
"""Layer kinds that compute each token from that token alone, so run on any share of
the sequence: the only kinds a sequence-parallel plan leaves outside its blocks."""

GATHERED = (Role.COLUMN, Role.ATTENTION, Role.VOCAB_HEAD)
"""The roles that read their input whole: it is all-gathered before them."""

KEY = "parallel.sequence_parallel"


def sequence_problems(
    infos: Sequence[LayerInfo], plan: TensorPlan, source: str, routed: bool = False
) -> list[Problem]:
    """Why the layers ``plan`` leaves whole cannot run on a ``t``-th of the sequence: a
    layer mixing tokens (a ``moe`` layer too, but with its tokens ``routed`` to
    expert-parallel ranks, each rank routing its share), or a sequence ``t`` does not
    divide."""
    kinds = (*PER_TOKEN, "moe") if routed else PER_TOKEN
    for info in infos:
        if info.layer.name in plan.roles:
            continue
        if info.layer.kind not in kinds:
            why = (
                f"layer {info.layer.name} ({info.layer.kind}) is outside the tensor-parallel"
                " blocks and does not compute each token alone, so it cannot run on a share"
                " of the sequence"
            )
            return [Problem(source, KEY, why, True)]
        for shape in (*info.in_shapes, info.out_shape):
            if shape.layout in (Layout.SEQUENCE, Layout.TOKENS) and shape.dims[0] % plan.degree:
                why = (
                    f"parallel.tensor {plan.degree} must divide layer {info.layer.name}'s"
                    f" sequence of {shape.dims[0]} (each rank runs its share)"
                )
                return [Problem(source, KEY, why, True)]
    return []


def sequence_sharded(infos: Sequence[LayerInfo], plan: TensorPlan) -> list[LayerInfo]:
    """``infos`` with every layer ``plan`` leaves whole on a rank's share of the sequence."""
    return [
        info
        if info.layer.name in plan.roles
        else dataclasses.replace(
            info,
            in_shapes=tuple(_share(s, plan.degree) for s in info.in_shapes),
            out_shape=_share(info.out_shape, plan.degree),
        )
        for info in infos
    ]


def _share(shape: Shape, degree: int) -> Shape:
    if shape.layout not in (Layout.SEQUENCE, Layout.TOKENS):
        return shape
    return Shape(shape.layout, (shape.dims[0] // degree, *shape.dims[1:]))


class SequenceLowering(TensorLowering):
    """The collectives of one rank's sequence-parallel step: :meth:`before_forward` before
    each layer's forward ops and :meth:`before_backward` before its backward ops besides
    :class:`TensorLowering`'s calls, and :meth:`gradients_done` after the backward pass."""

    def __init__(self, plan: TensorPlan) -> None:
        super().__init__(plan)
        self._shared: set[str] = set()  # layers whose output is a rank's share
        self._shards: dict[str, Tensor] = {}  # a gathered input's stashed shard, by layer
        self._regathered: set[str] = set()

    def before_forward(self, ctx: StepContext, info: LayerInfo) -> None:
        if self.plan.roles.get(info.layer.name) not in GATHERED:
            return
        source = info.inputs[0]
        if source in self._shared and source not in self._shards:
            shard = ctx.acts[source]
            self._shards[source] = shard
            ctx.acts[source] = self._gather(ctx, source, shard, ".allgather", ())

    def forward_done(self, ctx: StepContext, info: LayerInfo, xs: list[Tensor]) -> None:
        name = info.layer.name
        if name not in self.plan.roles:
            self._shared.add(name)
        elif name in self.plan.reduced_outputs:
            y = ctx.acts[name]
            ctx.acts[name] = self._scatter(ctx, name, y)
            self._shared.add(name)
        else:
            super().forward_done(ctx, info, xs)

    def before_backward(self, ctx: StepContext, info: LayerInfo, g: Tensor) -> None:
        if self.plan.roles.get(info.layer.name) not in GATHERED:
            return
        source = info.inputs[0]
        if source in self._shards and source not in self._regathered:
            self._regathered.add(source)
            after = ctx.b.producers(g)
            shard = self._shards[source]
            with ctx.b.in_stage(Stage.BACKWARD):  # the whole input is not stashed
                ctx.acts[source] = self._gather(ctx, source, shard, ".allgather.bwd", after)

    def gradient_ready(self, ctx: StepContext, info: LayerInfo, g: Tensor) -> Tensor:
        name = info.layer.name
        if name in self._shards:
            ctx.acts[name] = self._shards[name]
            return self._scatter(ctx, name, g)
        if name in self.plan.reduced_outputs:
            return self._gather(ctx, name, g, ".allgather", ())
        return g

    def gradients_done(self, ctx: StepContext) -> None:
        """An all-reduce over the group of the gradient of each parameter of the layers
        run on a share of the sequence (each a partial sum over the ranks), in place:
        it finishes the gradient."""
        for at, p in enumerate(ctx.params):
            if p.layer in self.plan.roles or p.grad_op < 0 or p.expert != NO_EXPERT:
                continue  # an expert's shard sees every token routed to it
            op = ctx.b.allreduce(
                f"{p.gradient.name}.allreduce",
                p.layer,
                p.gradient,
                (),
                [p.grad_op],
                group=CommGroup.TENSOR,
            )
            ctx.params[at] = dataclasses.replace(p, grad_op=op)

    def _gather(
        self, ctx: StepContext, layer: str, shard: Tensor, suffix: str, after: Sequence[int]
    ) -> Tensor:
        """``shard`` all-gathered over the group (after its producers and ``after``)."""
        whole = ctx.b.derived(shard, suffix, shard.kind, shard.elements * self.plan.degree)
        waits = (*ctx.b.producers(shard), *after)
        ctx.b.collective(
            whole.name,
            layer,
            whole,
            (),
            waits,
            Collective.ALL_GATHER,
            group=CommGroup.TENSOR,
            shard=shard,
        )
        return whole

    def _scatter(self, ctx: StepContext, layer: str, whole: Tensor) -> Tensor:
        """A rank's share of ``whole`` summed over the group (a reduce-scatter)."""
        stand_in = ctx.b.derived(whole, ".reduce_scatter", whole.kind, whole.elements)
        ctx.b.collective(
            stand_in.name,
            layer,
            stand_in,
            (),
            ctx.b.producers(whole),
            Collective.REDUCE_SCATTER,
            group=CommGroup.TENSOR,
        )
        share = ctx.b.derived(whole, ".shard", whole.kind, whole.elements // self.plan.degree)
        return ctx.b.alias(share, [stand_in])
