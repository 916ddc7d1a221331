"""Sharded data parallelism: ZeRO stages 1, 2 and 3 (Rajbhandari et al., SC 2020;
PyTorch FSDP) over the data-parallel group of each processor.

A data-parallel placement sums each gradient (or bucket of gradients) over the
replicas by one all-reduce, then every replica updates all of its weights.  Under
``run.parallel.zero`` each processor of a data-parallel group of ``d`` instead owns
``1/d`` of every parameter's optimizer state (``ceil(elements / d)`` of each
parameter):

* stages 1 and 2 (:func:`sharded`): each gradient all-reduce becomes a
  reduce-scatter of the same buffer over the same group, waiting for the same ops
  (so it overlaps backward in buckets as the all-reduces did), each processor's
  update runs on its shard only, and the updated weights of each bucket are
  all-gathered over the group once every processor has updated its shard (each
  all-gather after the one before when the buckets are chained, as DeepSpeed's
  ``allgather_bucket_size`` buckets are).  On the wire a reduce-scatter and an
  all-gather of ``n`` bytes over ``d`` processors move ``(d - 1) / d * n`` each, the
  ``2 (d - 1) / d * n`` of the all-reduce.  DeepSpeed's stage 1 and stage 2 are one
  optimizer (``reduce_scatter: true`` by default) and both reduce-scatter here; they
  differ in the memory a processor holds (:mod:`accelsim.mapping.zero_memory`);
* stage 3 (:func:`zero3_data_parallel`): the weights are sharded too.  Each layer
  of the layer table with trained parameters (a unit; FSDP usually wraps a whole
  transformer block) has its
  weights all-gathered before its forward ops and again before its backward ops
  (:func:`gathered`), the gathers run in order on one stream, and the gather of a
  unit starts once the unit ``prefetch + 1`` before it in that pass has finished
  (``run.parallel.zero_prefetch``, 1 by default: one gather ahead of the unit
  computing, as FSDP's default backward prefetch and its two all-gather buffers in
  flight); the gradients are reduce-scattered and the shard updated as in stage 2,
  and no all-gather follows the update (the next step's forward gathers).  Wire
  bytes: two all-gathers and one reduce-scatter of every weight, ``3 (d - 1) / d``.
"""

from __future__ import annotations

import dataclasses

from accelsim.config.enums import CommGroup
from accelsim.config.hardware import WordBytesSpec
from accelsim.config.run import OptimizerSpec
from accelsim.graph import passes
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.copies import prefixed
from accelsim.graph.ops import (
    Access,
    CommOp,
    Op,
    OpGraph,
    Parameter,
    Phase,
    Stage,
    TensorKey,
    TensorKind,
    VectorOp,
    replaced,
)
from accelsim.mapping.placement import StepGraph
from accelsim.mapping.tensor_placement import (
    RankStep,
    partitioned_copies,
    reduce_gradients,
    updated,
)
from accelsim.network.collectives import Collective

GATHERED_STAGES = (Stage.FORWARD, Stage.BACKWARD)
"""The passes before each of which a stage-3 unit's weights are gathered."""


def shard(elements: int, group: int) -> int:
    """The elements of one processor's shard of ``elements`` over ``group`` processors."""
    return -(-elements // group)


def _renamed(name: str, kind: Collective) -> str:
    return f"{name.removesuffix('.allreduce')}.{kind.value}"


def _gradient_sums(graph: OpGraph) -> dict[int, CommOp]:
    """The all-reduces of gradients over a data-parallel group, by op id."""
    return {
        op.op_id: op
        for op in graph.ops
        if isinstance(op, CommOp)
        and op.group is CommGroup.DATA
        and op.collective is Collective.ALL_REDUCE
        and op.gradients
    }


def sharded(graph: OpGraph, words: WordBytesSpec, stage: int) -> OpGraph:
    """A placed data-parallel ``graph`` with its optimizer sharded at ZeRO ``stage``:
    every gradient all-reduce over a data-parallel group a reduce-scatter, every update
    waiting for one on its processor's shard, and (below stage 3) the updated weights
    all-gathered after the last update of each reduce-scatter's gradients."""
    sums = _gradient_sums(graph)
    updates: dict[int, list[int]] = {c: [] for c in sums}
    ops = list(graph.ops)
    for op in graph.ops:
        of = [d for d in op.deps if d in sums]
        if isinstance(op, VectorOp) and op.phase is Phase.UPDATE and of:
            size = len(sums[of[0]].participants)
            ops[op.op_id] = on_shard(op, size)
            updates[of[0]].append(op.op_id)
    for c, op in sums.items():
        name = _renamed(op.name, Collective.REDUCE_SCATTER)
        ops[c] = replaced(op, name=name, collective=Collective.REDUCE_SCATTER)
    resharded = dataclasses.replace(graph, ops=tuple(ops))
    if stage == 3:
        return resharded
    return _gathered_after_updates(resharded, words, sums, updates)


def on_shard(op: VectorOp, group: int) -> VectorOp:
    """An update run on one processor's shard of each tensor it reads and writes."""
    return replaced(
        op,
        elements=shard(op.elements, group),
        reads=tuple(Access(a.tensor, shard(a.elements, group)) for a in op.reads),
        writes=tuple(Access(a.tensor, shard(a.elements, group)) for a in op.writes),
    )


def _gathered_after_updates(
    graph: OpGraph, words: WordBytesSpec, sums: dict[int, CommOp], updates: dict[int, list[int]]
) -> OpGraph:
    """``graph`` with an all-gather of each reduce-scatter's weights after the last of
    its updates, chained to the one before over the same group when the
    reduce-scatters are."""
    last = {max(ids): c for c, ids in updates.items() if ids}
    new_ids: dict[int, int] = {}
    previous: dict[tuple[int, ...], int] = {}

    def emit(builder: GraphBuilder, op: Op) -> None:
        new_ids[op.op_id] = len(builder.ops) - 1
        c = last.get(op.op_id)
        if c is None:
            return
        reduce = sums[c]
        chained = any(d in sums for d in reduce.deps)
        waits = [new_ids[u] for u in updates[c]]
        if chained and reduce.participants in previous:
            waits.append(previous[reduce.participants])
        elements = reduce.tensor.elements
        name = _renamed(reduce.name, Collective.ALL_GATHER)
        weights = builder.tensor(name, TensorKind.WEIGHT, elements, reduce.tensor.parameter)
        with builder.in_stage(Stage.COMMUNICATION):
            at = builder.collective(
                name, reduce.layer, weights, reduce.participants, waits, Collective.ALL_GATHER
            )
        builder.ops[at] = replaced(builder.ops[at], tag=reduce.tag)
        builder.processor[at] = graph.processor[c]
        previous[reduce.participants] = at

    rebuilt, _ = passes.rewrite(graph, words, emit_after=emit)
    return dataclasses.replace(rebuilt, stashed=graph.stashed, on_chip=graph.on_chip)


def gathered(step: OpGraph, words: WordBytesSpec, prefetch: int) -> OpGraph:
    """One replica's ``step`` with a stand-in all-gather (no participants yet) of each
    unit's weights before its first op of each pass (:data:`GATHERED_STAGES`), every
    op of the unit in that pass waiting for it; each gather after the one before and
    after the ops so far of the unit ``prefetch + 1`` before it in the same pass."""
    weights: dict[str, dict[TensorKey, int]] = {}
    for p in step.parameters:
        if p.grad_op >= 0:
            weights.setdefault(p.layer, {})[p.weight.key] = p.weight.elements
    first: dict[tuple[Stage, str], int] = {}
    for op in step.ops:
        if op.layer in weights and op.stage in GATHERED_STAGES:
            first.setdefault((op.stage, op.layer), op.op_id)
    units = {at: key for key, at in first.items()}
    order: dict[Stage, list[str]] = {stage: [] for stage in GATHERED_STAGES}
    last_op: dict[tuple[Stage, str], int] = {}
    gather_of: dict[tuple[Stage, str], int] = {}
    seen = [0]

    def emit(builder: GraphBuilder, op: Op) -> None:
        for made in builder.ops[seen[0] :]:
            if not isinstance(made, CommOp):
                last_op[(made.stage, made.layer)] = made.op_id
        key = units.get(op.op_id)
        if key is not None:
            stage, layer = key
            before = order[stage]
            waits = list(gather_of.values())[-1:]
            if len(before) > prefetch:
                trigger = last_op.get((stage, before[-1 - prefetch]))
                waits += [] if trigger is None else [trigger]
            name = f"{layer}.{stage.value}.all_gather"
            tensor = builder.tensor(name, TensorKind.WEIGHT, sum(weights[layer].values()), layer)
            with builder.in_stage(Stage.COMMUNICATION):
                gather_of[key] = builder.collective(
                    name, layer, tensor, (), waits, Collective.ALL_GATHER
                )
            before.append(layer)
        seen[0] = len(builder.ops)

    rebuilt, _ = passes.rewrite(step, words, emit_before=emit)
    ops = [
        op
        if isinstance(op, CommOp) or (op.stage, op.layer) not in gather_of
        else _waiting(op, gather_of[(op.stage, op.layer)])
        for op in rebuilt.ops
    ]
    return dataclasses.replace(rebuilt, ops=tuple(ops))


def _waiting(op: Op, gather: int) -> Op:
    """``op`` also waiting for ``gather``."""
    return replaced(
        op,
        deps=tuple(sorted({*op.deps, gather})),
        after=tuple(sorted({*op.after, gather})),
    )


def zero3_data_parallel(
    step: StepGraph,
    batch: int,
    processors: int,
    optimizer: OptimizerSpec,
    words: WordBytesSpec,
    bucket_bytes: int | None,
    prefetch: int,
    tensor: int = 1,
) -> OpGraph:
    """The step at ZeRO stage 3 on ``processors`` = data x ``tensor`` processors, the
    replicas an equal share of ``batch``: every processor's copy of one rank's gathered
    step (:func:`gathered`), op by op (:func:`_copies`: each stand-in gather one
    all-gather over the rank's data-parallel group, each stand-in of the tensor group
    one collective over its replica's ranks), each rank's gradients reduce-scattered
    over its data-parallel group in buckets and each processor's shard updated."""
    data = processors // tensor
    graph = gathered(step(batch // data), words, prefetch)
    builder = GraphBuilder(words)
    params, sinks = _copies(builder, RankStep.of(graph), data, tensor)
    ready: list[dict[str, int]] = [{} for _ in range(processors)]
    for rank in range(tensor):
        reduce_gradients(builder, params, ready, rank, tensor, bucket_bytes)
    on_chip: set[TensorKey] = set()
    on_chip.update(*(prefixed(graph.on_chip, f"p{p}/") for p in range(processors)))
    return sharded(updated(builder, (params, sinks, ready), optimizer, on_chip), words, 3)


def _copies(
    builder: GraphBuilder, rank: RankStep, data: int, tensor: int
) -> tuple[list[list[Parameter]], list[list[int]]]:
    """Every processor ``r tensor + k`` (rank ``k`` of replica ``r``)'s copy of
    ``rank``'s step appended to ``builder``: a stand-in collective of the data group
    (a gather) once for the ranks ``k`` of every replica, one of the tensor group once
    for the ranks of replica ``r``, each waiting for what it waits for on each of
    them; each processor's parameters and backward sinks."""
    processors = data * tensor
    replicas = [tuple(range(r * tensor, (r + 1) * tensor)) for r in range(data)]
    positions = [tuple(range(k, processors, tensor)) for k in range(tensor)]
    return partitioned_copies(
        builder,
        rank,
        range(processors),
        lambda op: replicas if op.group is CommGroup.TENSOR else positions,
    )
