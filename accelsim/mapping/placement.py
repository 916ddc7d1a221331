"""Placement passes: put a training step's ops on processors.

A *step graph* is one replica's forward and backward pass after every technique
has rewritten it (:func:`accelsim.lowering.step.lower`, then
``GraphRewriter.rewrite_graph``); ``StepGraph`` makes it for a batch size.  The
policies here add the optimizer updates and decide every op's processor:

* ``single``: the whole step on processor 0;
* ``data_parallel``: the batch split across the processors (earlier ones take
  the remainder), a full replica of the model on each, every gradient
  all-reduced over the interconnect (one at a time, or in buckets as PyTorch's
  ``DistributedDataParallel`` does: :func:`buckets`), then each processor
  updates its own copy.

Pipeline schedules are placements too; they are techniques
(:mod:`accelsim.techniques.pipelines`) built from the same passes.  Data that
crosses processors gets its transfers from
:func:`~accelsim.graph.passes.insert_transfers`, run last by every placement.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from typing_extensions import assert_never

from accelsim.config.hardware import WordBytesSpec
from accelsim.config.run import AssignmentPolicy, OptimizerSpec
from accelsim.graph import passes, queries
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.copies import Relabel, TensorMap, copied_as, prefixed, recopied
from accelsim.graph.ops import CommOp, Op, OpGraph, Parameter, Tag, Tensor, replaced
from accelsim.lowering.optimizer import add_updates
from accelsim.lowering.step import backward_sinks

StepGraph = Callable[[int], OpGraph]


def split_batch(batch: int, processors: int) -> list[int]:
    """Split ``batch`` samples over ``processors`` as evenly as possible."""
    base, extra = divmod(batch, processors)
    return [base + (1 if p < extra else 0) for p in range(processors)]


def trained(graph: OpGraph) -> OpGraph:
    """``graph`` with only the parameters some op computes a gradient for."""
    return dataclasses.replace(
        graph, parameters=tuple(p for p in graph.parameters if p.grad_op >= 0)
    )


def buckets(parameters: Sequence[Parameter], bucket_bytes: int) -> list[tuple[Parameter, ...]]:
    """The trained ``parameters`` in the order backward makes their gradients (by the
    op that makes each), cut into buckets of at most ``bucket_bytes`` of gradient
    (what the all-reduce moves: ``update_elements`` words), as PyTorch DDP's
    ``bucket_cap_mb`` does; a gradient larger than ``bucket_bytes`` is a bucket of
    its own.  (DDP closes a bucket once it holds ``bucket_cap_mb`` or more, its
    last gradient included, and makes its first bucket smaller; neither is modelled.)
    """
    made: list[list[Parameter]] = []
    filled = 0
    for p in sorted((p for p in parameters if p.grad_op >= 0), key=lambda p: p.grad_op):
        size = p.update_elements * p.gradient.word_bytes
        if not made or filled + size > bucket_bytes:
            made.append([])
            filled = 0
        made[-1].append(p)
        filled += size
    return [tuple(bucket) for bucket in made]


def place(
    policy: AssignmentPolicy,
    step: StepGraph,
    batch: int,
    processors: int,
    optimizer: OptimizerSpec,
    words: WordBytesSpec,
    bucket_bytes: int | None = None,
) -> OpGraph:
    """The training step placed by ``policy``, with its optimizer updates (under data
    parallelism, the gradients all-reduced in buckets of ``bucket_bytes``, or one at a
    time: :func:`data_parallel`).

    Data parallelism needs at least one sample per processor, which the run's
    validation checks at load time.
    """
    match policy:
        case AssignmentPolicy.SINGLE:
            return single(step(batch), optimizer, words)
        case AssignmentPolicy.DATA_PARALLEL:
            return data_parallel(step, batch, processors, optimizer, words, bucket_bytes)
        case _:
            assert_never(policy)


def single(graph: OpGraph, optimizer: OptimizerSpec, words: WordBytesSpec) -> OpGraph:
    """One replica's step on processor 0, its updates after its backward pass."""
    builder = GraphBuilder.extending(graph, words)
    add_updates(builder, graph.parameters, optimizer, after=backward_sinks(graph))
    return trained(builder.build(graph.parameters))


def data_parallel(
    step: StepGraph,
    batch: int,
    processors: int,
    optimizer: OptimizerSpec,
    words: WordBytesSpec,
    bucket_bytes: int | None = None,
    alone: bool = False,
) -> OpGraph:
    """One replica per processor, gradients all-reduced, then every replica's updates.

    Program order: every replica's step, the all-reduces, every replica's updates.
    Without ``bucket_bytes``, one all-reduce per trained parameter (in the order of
    the parameters), each after its gradient on every replica, all free to run at
    once; with it, one per bucket (:func:`buckets`), each after its gradients on
    every replica and after the bucket before it, as DDP launches its buckets in
    order on one communication stream, which runs one collective at a time.  A
    parameter's update waits for its gradient's all-reduce.  Replicas of the same
    local batch are one graph under other tensor names, so each local batch's
    replica is built once (:class:`_Replica`) and every op is copied once per
    replica, renamed and at its final ids.

    With ``alone`` (an even split), processor 0's replica alone, with its updates and
    the all-reduces over every processor (each after processor 0's gradients): the
    step of one replica standing for all (:mod:`accelsim.mapping.replication`).
    """
    sizes = split_batch(batch, processors)[: 1 if alone else processors]
    prefixes = [f"p{p}/" if processors > 1 else "" for p in range(len(sizes))]
    made: dict[int, _Replica] = {}
    for p, local in enumerate(sizes):
        if local not in made:
            made[local] = _Replica.build(
                step(local), prefixes[p], p, optimizer, words, processors, bucket_bytes
            )
    replicas = [made[local] for local in sizes]
    starts = list(itertools.accumulate((len(r.step.ops) for r in replicas), initial=0))
    reduced_at = starts[-1]
    updates_at = list(
        itertools.accumulate(
            (len(r.updates) for r in replicas), initial=reduced_at + len(replicas[0].allreduces)
        )
    )
    ops: list[Op] = []
    parameters: list[Parameter] = []
    for p, r in enumerate(replicas):
        ids = range(starts[p], starts[p + 1])
        copies, params = r.copy(Tag(replica=p), copied_as(prefixes[p], Tag(replica=p)), ids)
        ops += copies
        if p == 0:  # the graph's parameters are the first replica's (one copy of the weights)
            parameters = [q for q in params if q.grad_op >= 0]
    everyone = tuple(range(processors))
    chained = bucket_bytes is not None
    for j, stand_in in enumerate(replicas[0].allreduces):
        waits = {starts[p] + g for p, r in enumerate(replicas) for g in r.gradient_ops[j]}
        order = tuple(sorted(waits | ({len(ops) - 1} if chained and j else set())))
        ops.append(
            replaced(stand_in, op_id=len(ops), participants=everyone, deps=order, after=order)
        )
    for p, r in enumerate(replicas):
        n, k = len(r.step.ops), len(r.allreduces)
        update_ids = [
            *range(starts[p], starts[p] + n),
            *range(reduced_at, reduced_at + k),
            *range(updates_at[p], updates_at[p + 1]),
        ]
        ops += r.copy_updates(Tag(replica=p), _into(p, prefixes[p]), update_ids)[0]
    graph = OpGraph(
        ops=tuple(ops),
        processor=tuple(op.tag.replica for op in ops),
        on_chip=frozenset().union(
            *(
                prefixed(r.step.on_chip, prefix)
                for r, prefix in zip(replicas, prefixes, strict=True)
            )
        ),
        stashed=frozenset(
            _into(p, prefixes[p])(t).key for p, r in enumerate(replicas) for t in r.stashed
        ),
        parameters=tuple(parameters),
    )
    if all(r.settled for r in replicas) and all(
        map(passes.settled, ops[reduced_at : updates_at[0]])
    ):
        # A replica's ops read only what its own ops make, on its processor: the
        # transfers pass would keep every op (the copies' links are the settled
        # links of the replica's ops, moved in order).
        return graph
    return passes.insert_transfers(graph)


def _into(replica: int, prefix: str) -> TensorMap:
    """A replica's tensors (the copies of the step's, and the states and sums named
    after them) in replica ``replica``, whose names start with ``prefix``; tensors of
    no replica, such as ``grad_norm`` and the all-reduced gradients, are every
    replica's."""
    tag = Tag(replica=replica)
    return recopied(lambda _: tag, lambda _: prefix)


@dataclass(frozen=True)
class _Replica:
    """The replica of one local batch, built once for a data-parallel step.

    ``updates`` are the replica's update ops as
    :func:`~accelsim.lowering.optimizer.add_updates` makes them for the replica
    whose tensor names start with ``prefix``, at local ids: its step ``0..n-1``,
    ``allreduces`` (stand-ins: no participants yet) ``n..n+k-1``, then the updates.
    ``gradient_ops`` are, per all-reduce, the step's ops making its gradients.
    ``stashed`` are the activations its step and updates stash (its copies);
    ``settled`` says whether the transfers pass keeps all its ops as they are
    (:func:`~accelsim.graph.passes.settled`).
    """

    step: OpGraph
    prefix: str
    gradient_ops: tuple[tuple[int, ...], ...]
    allreduces: tuple[CommOp, ...]
    updates: tuple[Op, ...]
    stashed: tuple[Tensor, ...]
    settled: bool
    copy: Relabel
    copy_updates: Relabel

    @classmethod
    def build(
        cls,
        step: OpGraph,
        prefix: str,
        replica: int,
        optimizer: OptimizerSpec,
        words: WordBytesSpec,
        processors: int,
        bucket_bytes: int | None,
    ) -> _Replica:
        tag = Tag(replica=replica)
        copy = Relabel(step.ops, step.parameters)
        ops, params = copy(tag, copied_as(prefix, tag), range(len(step.ops)))
        builder = GraphBuilder(words, on_chip=prefixed(step.on_chip, prefix))
        for op in ops:
            builder.append(op, 0)
        sinks = backward_sinks(builder.build())
        trained = [p for p in params if p.grad_op >= 0]
        groups: list[tuple[Parameter, ...]] = []
        if processors > 1:
            groups = (
                [(p,) for p in trained] if bucket_bytes is None else buckets(params, bucket_bytes)
            )
        ready: dict[str, int] = {}
        for j, group in enumerate(groups):
            ready |= dict.fromkeys(
                (p.weight.name for p in group), _allreduce(builder, group, j, bucket_bytes)
            )
        add_updates(builder, params, optimizer, sinks, ready, tag)
        n, k = len(ops), len(groups)
        allreduces = tuple(op for op in builder.ops[n : n + k] if isinstance(op, CommOp))
        updates = tuple(builder.ops[n + k :])
        return cls(
            step=step,
            prefix=prefix,
            gradient_ops=tuple(tuple(p.grad_op for p in group) for group in groups),
            allreduces=allreduces,
            updates=updates,
            stashed=tuple(queries.stashed_tensors(builder.ops)),
            settled=all(map(passes.settled, (*ops, *updates))),
            copy=copy,
            copy_updates=Relabel(updates),
        )


def _allreduce(
    builder: GraphBuilder, group: tuple[Parameter, ...], j: int, bucket_bytes: int | None
) -> int:
    """The stand-in all-reduce of bucket ``j``'s gradients (one gradient's, named after
    its weight and in its layer, without buckets; else named after the bucket, in no
    layer), after the ops making them."""
    if bucket_bytes is None:
        (param,) = group
        name, layer, of = f"{param.weight.step_name}.allreduce", param.layer, param.weight.step_name
    else:
        name, layer, of = f"bucket{j}.allreduce", "", ""
    kind = group[0].gradient.kind
    tensor = builder.tensor(name, kind, sum(p.update_elements for p in group), of)
    return builder.allreduce(
        name, layer, tensor, (), [p.grad_op for p in group], [p.gradient for p in group]
    )
