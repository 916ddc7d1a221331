"""Placement of a tensor-parallel step: ``data`` replicas of a group of ``tensor`` ranks.

The step graph is one rank's (:func:`accelsim.lowering.step.lower` with a tensor plan):
its own share of every split layer, with stand-ins for the group's all-reduces. Each
replica ``d`` of the batch (split as data parallelism splits it) is a group of
processors ``d * tensor .. d * tensor + tensor - 1``: consecutive processors, so a
group lies in the innermost dimensions of the topology (inside a node of a
hierarchy whose nodes hold a multiple of ``tensor`` processors). Every rank runs a
copy of the step; each stand-in becomes one all-reduce over its group, after the
ops it waited for on every rank. With more than one replica, each rank's gradients
are all-reduced over the ranks of the same position in every replica (its
data-parallel group; in buckets with ``bucket_bytes``, as
:func:`~accelsim.mapping.placement.data_parallel` does), then every processor
updates its own share of the weights.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from accelsim.config.enums import CommGroup
from accelsim.config.hardware import WordBytesSpec
from accelsim.config.run import OptimizerSpec
from accelsim.graph import passes
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.copies import Relabel, copied_as, prefixed
from accelsim.graph.ops import CommOp, Op, OpGraph, Parameter, Tag, TensorKey, replaced
from accelsim.lowering.optimizer import add_updates
from accelsim.lowering.step import backward_sinks
from accelsim.mapping.placement import StepGraph, buckets, split_batch, trained


def tensor_parallel(
    step: StepGraph,
    batch: int,
    processors: int,
    tensor: int,
    optimizer: OptimizerSpec,
    words: WordBytesSpec,
    bucket_bytes: int | None = None,
) -> OpGraph:
    """The step on ``processors`` = data x ``tensor`` processors, with its updates."""
    data = processors // tensor
    builder = GraphBuilder(words)
    on_chip: set[TensorKey] = set()
    params: list[list[Parameter]] = []
    sinks: list[list[int]] = []
    made_for: dict[int, RankStep] = {}  # one rank's step per distinct local batch
    for d, local in enumerate(split_batch(batch, data)):
        group = tuple(range(d * tensor, (d + 1) * tensor))
        if local not in made_for:
            made_for[local] = RankStep.of(step(local))
        shared = made_for[local]
        graph = shared.graph
        made, sunk = group_copies(builder, shared, group)
        on_chip.update(*(prefixed(graph.on_chip, f"p{p}/") for p in group))
        params += made
        sinks += sunk
    ready: list[dict[str, int]] = [{} for _ in range(processors)]
    if data > 1:
        for rank in range(tensor):
            reduce_gradients(builder, params, ready, rank, tensor, bucket_bytes)
    return updated(builder, (params, sinks, ready), optimizer, on_chip)


def updated(
    builder: GraphBuilder,
    held: tuple[list[list[Parameter]], list[list[int]], list[dict[str, int]]],
    optimizer: OptimizerSpec,
    on_chip: set[TensorKey],
    members: Sequence[int] | None = None,
) -> OpGraph:
    """Every processor's copy in ``builder`` with its updates (``held``: each processor's
    parameters, backward sinks and the op that makes each gradient ready, processor
    ``members[i]`` the ``i``-th, or processor ``i`` without ``members``), placed by its
    tag's replica, with the transfers it needs."""
    params, sinks, ready = held
    for i in range(len(params)):
        at = i if members is None else members[i]
        add_updates(builder, params[i], optimizer, sinks[i], ready[i], Tag(replica=at))
    built = dataclasses.replace(builder.build(params[0]), on_chip=frozenset(on_chip))
    placed = passes.place(built, lambda op: op.tag.replica)
    return trained(passes.insert_transfers(placed))


@dataclasses.dataclass(frozen=True)
class RankStep:
    """One rank's step ``graph``, its copier and its backward sinks (made once per
    local batch, copied for every rank of every group)."""

    graph: OpGraph
    copy: Relabel
    sinks: tuple[int, ...]

    @staticmethod
    def of(graph: OpGraph) -> RankStep:
        return RankStep(graph, Relabel(graph.ops, graph.parameters), backward_sinks(graph))


def group_copies(
    builder: GraphBuilder, rank: RankStep, group: tuple[int, ...]
) -> tuple[list[list[Parameter]], list[list[int]]]:
    """Every rank of ``group``'s copy of ``rank``'s step appended to ``builder``, each
    stand-in all-reduce once for the group; each rank's parameters and backward sinks."""
    return partitioned_copies(builder, rank, group, lambda op: (group,))


def partitioned_copies(
    builder: GraphBuilder,
    rank: RankStep,
    members: Sequence[int],
    groups: Callable[[CommOp], Sequence[tuple[int, ...]]],
) -> tuple[list[list[Parameter]], list[list[int]]]:
    """Every processor of ``members``' copy of ``rank``'s step appended to ``builder``:
    each stand-in collective once for each group of ``groups(op)`` (a partition of
    ``members``, the same for every stand-in of a :class:`CommGroup`), waiting for what
    it waits for on each of its members; each processor's parameters and backward
    sinks, in ``members``' order."""
    start = at = len(builder.ops)
    ids: list[list[int]] = [[] for _ in members]
    first: list[int] = []  # the processor each op is appended on, in order
    shared: dict[int, tuple[int, ...]] = {}  # each stand-in's group, by its id
    # a kind's groups, and the place of each member's group among them
    layouts: dict[CommGroup, tuple[tuple[tuple[int, ...], ...], tuple[int, ...]]] = {}
    for op in rank.graph.ops:
        if not isinstance(op, CommOp):
            for i, column in enumerate(ids):
                column.append(at + i)
            first += members
            at += len(members)
            continue
        if op.group not in layouts:
            found = tuple(groups(op))
            where = {p: i for i, g in enumerate(found) for p in g}
            layouts[op.group] = found, tuple(where[p] for p in members)
        parts, of = layouts[op.group]
        for column, place in zip(ids, of, strict=True):
            column.append(at + place)
        for group in parts:
            shared[at] = group
            first.append(group[0])
            at += 1
    slots: dict[int, Op] = {}
    params: list[list[Parameter]] = []
    for i, p in enumerate(members):
        tag = Tag(replica=p)
        ops, mine = rank.copy(tag, copied_as(f"p{p}/", tag), ids[i])
        params.append(mine)
        for op in ops:
            slots[op.op_id] = joined(slots.get(op.op_id), op, shared.get(op.op_id, ()))
    for i in range(start, at):
        builder.append(slots[i], first[i - start])
    return params, [[ids[i][s] for s in rank.sinks] for i in range(len(members))]


def joined(seen: Op | None, op: Op, group: tuple[int, ...]) -> Op:
    """A rank's copy of an op; a stand-in collective, the one collective of ``group``
    waiting for what it waits for on every member."""
    if not isinstance(op, CommOp):
        return op
    if seen is None:
        return replaced(op, participants=group, tag=Tag(replica=group[0]))
    assert isinstance(seen, CommOp)
    deps = tuple(sorted({*seen.deps, *op.deps}))
    return replaced(seen, deps=deps, after=tuple(sorted({*seen.after, *op.after})))


def reduce_gradients(
    builder: GraphBuilder,
    params: Sequence[Sequence[Parameter]],
    ready: list[dict[str, int]],
    rank: int,
    tensor: int,
    bucket_bytes: int | None,
) -> None:
    """The all-reduces of rank ``rank``'s gradients over its data-parallel group."""
    members = tuple(range(rank, len(params), tensor))
    first = [p for p in params[rank] if p.grad_op >= 0]
    groups = [(p,) for p in first] if bucket_bytes is None else buckets(first, bucket_bytes)
    index = {p.weight.name: j for j, p in enumerate(params[rank])}
    previous: list[int] = []
    for j, bucket in enumerate(groups):
        at = [index[p.weight.name] for p in bucket]
        waits = [params[m][i].grad_op for m in members for i in at]
        name = f"p{rank}/bucket{j}" if bucket_bytes is not None else bucket[0].weight.name
        gradient = bucket[0].gradient
        elements = sum(p.update_elements for p in bucket)
        tensor_of = builder.derived(gradient, f".dp{j}.allreduce", gradient.kind, elements)
        op = builder.allreduce(
            f"{name}.allreduce",
            bucket[0].layer if bucket_bytes is None else "",
            tensor_of,
            members,
            [*waits, *previous],
            [p.gradient for p in bucket],
        )
        builder.ops[op] = replaced(builder.ops[op], tag=Tag(replica=rank))
        if bucket_bytes is not None:
            previous = [op]
        for m in members:
            for i in at:
                ready[m][params[m][i].weight.name] = op
