"""Placement of an expert-parallel step: every processor a data-parallel replica, its
``moe`` layers' experts spread over an expert-parallel group.

The step graph is one rank's (:func:`accelsim.lowering.step.lower` with ``expert``
above 1): its own tokens through every layer, its ``E / e`` experts of each ``moe``
layer computing the tokens every rank of its group routed to them, between
all-to-all stand-ins (:mod:`accelsim.lowering.rules.moe`).  Processor ``p`` is a
replica with its share of the batch (the same share on every processor), in the
expert group ``p // e`` of the ``e`` consecutive processors ``(p // e) * e .. (p //
e) * e + e - 1`` (inside a node of a hierarchy whose nodes hold a multiple of ``e``
processors), at rank ``p % e`` of it; each stand-in becomes one all-to-all over the
group, after the ops it waited for on every rank.

With a tensor-parallel degree ``t`` above 1 (the step then one tensor rank's, each
expert's MLP split over the tensor group, :mod:`accelsim.lowering.rules.moe`), each
replica is ``t`` consecutive processors: replica ``r`` is ``r t .. r t + t - 1``,
expert group ``g`` its replicas ``g e .. g e + e - 1``, and the expert-parallel
groups within it the ranks of one tensor position, ``t`` of them; each tensor
stand-in becomes one all-reduce over its replica's tensor group.  Every dense
gradient is then all-reduced over the ranks of its tensor position in every replica,
an expert's over those of its position holding the same experts.

This is expert parallelism inside the data-parallel group, as Megatron-LM and
DeepSpeed-MoE place it: every layer but the experts is replicated on every processor
and its gradients all-reduced over all of them; an expert's gradients are
all-reduced over the ranks that hold the same experts (the processors at the same
rank of every group: ``processors / e`` of them; none when one group holds them
all), in buckets with ``bucket_bytes`` as
:func:`~accelsim.mapping.placement.data_parallel` cuts them.  Then every processor
updates what it holds.  Rank ``r``'s expert ``j`` of a layer (``expert`` of its ops
and parameters) is the layer's expert ``r x E / e + j``.

Inside a pipeline (:func:`expert_group`) the expert groups are those of each stage:
the same stage's ranks in ``e`` consecutive data-parallel replicas, a replica's
``pipeline x tensor`` processors apart; one group's micro-batch step is placed on the
processors it occupies, its data-parallel sums left to the pipeline.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from accelsim.config.enums import CommGroup
from accelsim.config.hardware import HardwareSpec
from accelsim.config.run import RunSpec
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.copies import prefixed
from accelsim.graph.ops import NO_EXPERT, CommOp, OpGraph, Parameter
from accelsim.mapping.placement import StepGraph, split_batch
from accelsim.mapping.tensor_placement import (
    RankStep,
    partitioned_copies,
    reduce_gradients,
    updated,
)


def expert_parallel(step: StepGraph, run: RunSpec, hw: HardwareSpec) -> OpGraph:
    """The step on the hardware's processors in expert groups of ``run.parallel.expert``
    replicas (of ``run.parallel.tensor`` ranks each), with its gradients' all-reduces and
    updates (the batch splits evenly over the replicas: checked at load)."""
    assert run.parallel is not None
    processors, expert, tensor = hw.processors, run.parallel.expert, run.parallel.tensor
    bucket_bytes, optimizer = run.data_parallel.bucket_bytes, run.optimizer
    replicas = processors // tensor
    (local,) = set(split_batch(run.batch_size, replicas))
    graph = step(local)
    builder, rank_step = GraphBuilder(hw.word_bytes), RankStep.of(graph)
    params: list[list[Parameter]] = []
    sinks: list[list[int]] = []
    for g in range(replicas // expert):
        block = range(g * expert * tensor, (g + 1) * expert * tensor)
        made, sunk = partitioned_copies(builder, rank_step, block, _groups(block, tensor))
        params += made
        sinks += sunk
    on_chip = {k for p in range(processors) for k in prefixed(graph.on_chip, f"p{p}/")}
    ready: list[dict[str, int]] = [{} for _ in range(processors)]
    dense = [[p for p in held if p.expert == NO_EXPERT] for held in params]
    if replicas > 1 and dense[0]:
        for rank in range(tensor):
            reduce_gradients(builder, dense, ready, rank, tensor, bucket_bytes)
    if replicas > expert:
        experts = [[p for p in held if p.expert != NO_EXPERT] for held in params]
        for rank in range(expert * tensor):
            reduce_gradients(builder, experts, ready, rank, expert * tensor, bucket_bytes)
    return updated(builder, (params, sinks, ready), optimizer, on_chip)


def expert_group(
    step: StepGraph,
    batch: int,
    run: RunSpec,
    hw: HardwareSpec,
    stride: int,
) -> OpGraph:
    """One expert group of a pipeline stage: ``run.parallel.expert`` replicas of
    ``run.parallel.tensor`` ranks, rank ``k`` of replica ``r`` on processor ``r x stride
    + k`` (``stride``: the processors of a replica, ``pipeline x tensor``, so the group
    is the first stage's), each running ``step(batch)`` with its tensor all-reduces and
    its expert all-to-alls over the group's processors, and its updates; the
    data-parallel sums of its gradients are left out (a pipeline times them itself)."""
    assert run.parallel is not None
    expert, tensor = run.parallel.expert, run.parallel.tensor
    graph = step(batch)
    builder = GraphBuilder(hw.word_bytes)
    block = tuple(r * stride + k for r in range(expert) for k in range(tensor))
    params, sinks = partitioned_copies(builder, RankStep.of(graph), block, _groups(block, tensor))
    on_chip = {k for p in block for k in prefixed(graph.on_chip, f"p{p}/")}
    ready: list[dict[str, int]] = [{} for _ in block]
    return updated(builder, (params, sinks, ready), run.optimizer, on_chip, block)


def _groups(block: Sequence[int], tensor: int) -> Callable[[CommOp], tuple[tuple[int, ...], ...]]:
    """The groups of each kind of stand-in collective in an expert group's ``block`` of
    processors (its replicas of ``tensor`` ranks each, in order): the tensor group of
    each replica; the expert group of each tensor position, the replicas' ranks there."""
    by_replica = tuple(tuple(block[r : r + tensor]) for r in range(0, len(block), tensor))
    by_position = tuple(tuple(block[k::tensor]) for k in range(tensor))
    return lambda op: by_replica if op.group is CommGroup.TENSOR else by_position
