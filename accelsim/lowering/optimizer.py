"""The optimizer: the single owner of update ops.

One vector op per parameter tensor reads the weight, its gradient and the
optimizer's state tensors and writes the weight and the states (0 state tensors
for SGD, 1 for momentum, 2 for Adam).  By default updates run after the backward
pass, as in eager ``loss.backward(); optimizer.step()``; a parameter's
``update`` timing moves them (optimizer fusion):

* ``BACKWARD``: right after the gradient is final (its all-reduce, if any) and
  every op reading the old weight has read it, in the backward stage.  The update
  takes tile streams (:meth:`~accelsim.graph.builder.GraphBuilder.take_tiles`): the
  gradient's tiles as the op making it emits them, and (without fp32 masters) the
  weight's tiles from the filter buffer of the last ``dX`` GEMM that loaded them, so
  the three run as one fused op, tile by tile (:func:`fuse_backward_update`).  A gradient
  made final by another op (an all-reduce, a sum over micro-batches) cannot be a
  tile source, and the weight's tiles cannot wait in the buffer for it: such an
  update reads both from DRAM;
* ``FORWARD``: the update is already in the step graph, before the layer's
  forward pass, in the forward stage (:func:`update_op`), so none is added here.

Only ``updated_elements`` of a parameter are updated (a technique that skips
groups shrinks it), and a parameter with ``monitor_groups`` also pays a
convergence monitor: ``MONITOR_OPS_PER_ELEMENT`` more ops per updated element in
the update, then one small op per parameter folding the per-group norms into an
exponential moving average (``MONITOR_OPS_PER_GROUP`` ops per group, the EMA
kept as an optimizer-state tensor of one value per group); that op is owned by
the technique that asked for the monitor (``Parameter.monitor_owner``).

Global-norm gradient clipping (``clip_global_norm``) adds one op reading every
gradient (square and accumulate) that all updates wait for, and one op per
element to each update (the scaling).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

from accelsim.config.enums import OptimizerKind, VectorClass
from accelsim.config.run import MasterWeights, OptimizerSpec
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import (
    NO_TILES,
    Access,
    GemmOp,
    Op,
    Parameter,
    Phase,
    Stage,
    Tag,
    Tensor,
    TensorKey,
    TensorKind,
    UpdateTiming,
    VectorOp,
)
from accelsim.graph.queries import reads_of, tile_sources, writes_of

# |dw| and |w| (abs), and their two sums per group, fused into the update [D].
MONITOR_OPS_PER_ELEMENT = 4
# ratio of the group norms, and the EMA (multiply, fused multiply-add) [D].
MONITOR_OPS_PER_GROUP = 3
# the fp32 master weight rounded to the array's word [D].
MASTER_CAST_OPS_PER_ELEMENT = 1
# the square and the sum of the global gradient norm, then the scaling [D].
CLIP_NORM_OPS_PER_ELEMENT = 2
CLIP_SCALE_OPS_PER_ELEMENT = 1
UPDATE_CLASS = {
    OptimizerKind.SGD: VectorClass.ELEMENTWISE,
    OptimizerKind.MOMENTUM: VectorClass.ELEMENTWISE,
    OptimizerKind.ADAM: VectorClass.TRANSCENDENTAL,  # a square root per element
}
"""Each optimizer's update's vector op class."""


def update_op(
    builder: GraphBuilder,
    p: Parameter,
    optimizer: OptimizerSpec,
    after: Iterable[int],
    tag: Tag | None = None,
    clipped: bool = False,
) -> list[int]:
    """One parameter's update (and its monitor, if any) after the ops in ``after``.

    The update reads the weight (from DRAM, unless a tile stream declared later serves
    it), its gradient and its states.  With fp32 master weights
    (``optimizer.master_weights``) the update reads and writes the master copy, an
    optimizer-state tensor, instead, and writes the weight from it (one more op per
    element, the cast).

    Returns:
        The update op, then the monitor op if the parameter is monitored.
    """
    kind = optimizer.kind
    elements = p.update_elements
    states = [
        builder.derived(p.weight, f".state{j}", TensorKind.OPTIMIZER_STATE, p.weight.elements)
        for j in range(kind.state_tensors)
    ]
    ops = kind.ops_per_element
    ops += MONITOR_OPS_PER_ELEMENT if p.monitor_groups else 0
    ops += CLIP_SCALE_OPS_PER_ELEMENT if clipped else 0
    weight = p.weight
    if optimizer.master_weights is MasterWeights.FP32:
        master = builder.derived(p.weight, ".master", TensorKind.OPTIMIZER_STATE, p.weight.elements)
        master = dataclasses.replace(master, word_bytes=optimizer.master_weights.word_bytes)
        weight = master
        states = [master, *states]
        ops += MASTER_CAST_OPS_PER_ELEMENT
    short = p.weight.step_name
    update = builder.vector(
        f"{short}.update",
        p.layer,
        Phase.UPDATE,
        elements,
        ops,
        reads=[Access(t, elements) for t in dict.fromkeys((weight, p.gradient, *states))],
        writes=[Access(t, elements) for t in (p.weight, *states)],
        after=after,
        tag=tag,
        op_class=UPDATE_CLASS[kind],
        expert=p.expert,
    )
    if not p.monitor_groups:
        return [update]
    ema = builder.derived(p.weight, ".ema", TensorKind.OPTIMIZER_STATE, p.monitor_groups)
    with builder.owned_by(p.monitor_owner):
        monitor = builder.vector(
            f"{short}.monitor",
            p.layer,
            Phase.UPDATE,
            p.monitor_groups,
            MONITOR_OPS_PER_GROUP,
            reads=[ema],
            writes=[ema],
            after=(update,),
            tag=tag,
            op_class=VectorClass.ELEMENTWISE,
        )
    return [update, monitor]


def add_updates(
    builder: GraphBuilder,
    parameters: Sequence[Parameter],
    optimizer: OptimizerSpec,
    after: Iterable[int],
    gradient_ready: Mapping[str, int] | None = None,
    tag: Tag | None = None,
) -> list[int]:
    """Add the updates of the trained parameter tensors (those with a gradient op).

    Args:
        builder: Builder of the graph that computes the gradients.
        parameters: The trainable tensors.
        optimizer: Decides the state tensors, ops per element and clipping.
        after: Ops every eager update waits for (the end of the backward pass).
        gradient_ready: Op that makes each gradient final, by weight name
            (an all-reduce or a sum over micro-batches), instead of the op that
            computed it.
        tag: The updates' tag (default: the builder's).

    Returns:
        The ops added: the clipping norm if any, then per parameter (none for
        one updated in the step graph, ``FORWARD``) its update and its monitor.

    An update after ``after`` waits for those ops themselves only until an update
    ready exactly when they are done (its gradient final among them, nothing else
    read from other ops) is emitted: each later one waits for the last such update
    instead, and so for ``after`` through it, one dependency instead of ``after``'s
    many (a graph linear in its layers, not quadratic).  The times are the same
    provided the updates of one call run on one processor with priorities in
    program order, as every caller places them: both are on its vector unit, and the
    earlier, ready no later, goes first, so the later could not start before the
    earlier ends.
    """
    barrier = tuple(after)
    ready_of = {
        p.weight.name: (gradient_ready or {}).get(p.weight.name, p.grad_op) for p in parameters
    }
    trained = [p for p in parameters if p.grad_op >= 0]
    placed = [p for p in trained if p.update is not UpdateTiming.FORWARD]
    clip = optimizer.clip_global_norm is not None and bool(trained)
    if clip:
        # over every gradient, forward-fused ones too (their updates, in the next
        # step's forward pass, scale by this norm)
        norm = builder.tensor("grad_norm", TensorKind.OPTIMIZER_STATE, 1)
        total = sum(p.update_elements for p in trained)
        norm_op = builder.vector(
            "grad_norm",
            "",
            Phase.UPDATE,
            total,
            CLIP_NORM_OPS_PER_ELEMENT,
            reads=[Access(p.gradient, p.update_elements) for p in trained],
            writes=[norm],
            after=(*barrier, *(ready_of[p.weight.name] for p in trained)),
            tag=tag,
            op_class=VectorClass.REDUCE,
        )
        barrier = (*barrier, norm_op)
    ids = [norm_op] if clip else []
    groups = (
        _Groups(builder.ops) if any(p.update is UpdateTiming.BACKWARD for p in placed) else None
    )
    at_barrier = set(barrier)
    anchor: int | None = None
    for p in placed:
        ready = ready_of[p.weight.name]
        if groups is not None and p.update is UpdateTiming.BACKWARD:
            readers = _readers(builder.ops, p.weight)
            with builder.in_stage(Stage.BACKWARD):
                made = update_op(builder, p, optimizer, (*readers, ready), tag, clip)
            fuse_backward_update(builder, groups, p, made[0], ready, readers)
        else:
            after = (*barrier, ready) if anchor is None else (anchor, ready)
            made = update_op(builder, p, optimizer, after, tag, clip)
            if ready in at_barrier and _producers(builder.ops[made[0]]) <= at_barrier:
                anchor = made[0]
        ids += made
    return ids


def _producers(op: Op) -> set[int]:
    """The ops that make what ``op`` reads."""
    return {d for group in op.sources for d in group}


def fuse_backward_update(
    builder: GraphBuilder,
    groups: _Groups,
    p: Parameter,
    update: int,
    ready: int,
    readers: Sequence[int],
) -> None:
    """Declare the tile streams of a backward-fused update: the gradient's tiles from
    ``ready`` when it is the op making the gradient (a GEMM or vector op writing all of
    it), the weight's from the last of its ``readers`` when that is a ``dX`` GEMM, the
    update reads the weight (no fp32 master) and the parameter shares its tiles
    (``Parameter.shares_weight_tiles``).  The update reads all of both.  The
    update, ``dX`` and ``dW`` then run as one op (with the ``groups`` they are in), so
    every op a member waits for must be a member or come before the first of them;
    streams that would break this (a weight tile that would wait for an all-reduce,
    or for the later time steps of a recurrent layer's ``dW``) are not declared,
    the weight's first."""
    op = builder.ops[update]
    assert isinstance(op, VectorOp)
    whole = {a.tensor.key for a in op.reads if a.elements == a.tensor.elements}
    sources: dict[TensorKey, int] = {}
    if p.gradient.key in whole and ready == p.grad_op:
        maker = builder.ops[ready]
        if isinstance(maker, (GemmOp, VectorOp)) and any(
            a.tensor.key == p.gradient.key and a.elements == a.tensor.elements
            for a in writes_of(maker)
        ):
            sources[p.gradient.key] = ready
    last = builder.ops[readers[-1]] if readers else None
    if (
        p.shares_weight_tiles
        and p.weight.key in whole
        and isinstance(last, GemmOp)
        and last.phase is Phase.BWD_INPUT
    ):
        sources[p.weight.key] = last.op_id
    while sources and not groups.runs_as_one(builder.ops, (update, *sources.values())):
        sources.pop(p.weight.key if p.weight.key in sources else p.gradient.key)
    for key, source in sources.items():
        tensor = p.gradient if key == p.gradient.key else p.weight
        builder.take_tiles(update, tensor, source)
        groups.join(source, update)


class _Groups:
    """The groups of ops that tile streams link (as
    :func:`~accelsim.graph.queries.tile_groups`), kept up to date as streams are
    declared: each op's group, by its first op."""

    def __init__(self, ops: Sequence[Op]) -> None:
        self._members: dict[int, set[int]] = {}
        self._first: dict[int, int] = {}
        for op in ops:
            for source in tile_sources(op):
                if source != NO_TILES:
                    self.join(source, op.op_id)

    def first(self, i: int) -> int:
        """The first op of ``i``'s group (``i`` when it is in none)."""
        return self._first.get(i, i)

    def join(self, a: int, b: int) -> None:
        """Put ``a``'s and ``b``'s groups together."""
        members = self.members(a) | self.members(b)
        first = min(members)
        self._members[first] = members
        for i in members:
            self._first[i] = first

    def members(self, i: int) -> set[int]:
        """The ops of ``i``'s group."""
        return self._members.get(self.first(i), {i})

    def runs_as_one(self, ops: Sequence[Op], linked: Iterable[int]) -> bool:
        """Whether the groups of ``linked`` can run as one op: everything a member
        waits for is a member or in a group starting before their first op."""
        members = set().union(*(self.members(i) for i in linked))
        first = min(members)
        return all(d in members or self.first(d) < first for i in members for d in ops[i].deps)


def _readers(ops: Sequence[Op], tensor: Tensor) -> list[int]:
    """The ops that read ``tensor``, in program order."""
    return [op.op_id for op in ops if any(a.tensor.key == tensor.key for a in reads_of(op))]
