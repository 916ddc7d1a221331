"""Placement passes: put a training step's ops on processors.

A *step graph* is one replica's forward and backward pass after every technique
has rewritten it (:func:`accelsim.lowering.step.lower`, then
``Technique.rewrite_graph``); ``StepGraph`` makes it for a batch size.  The
policies here add the optimizer updates and decide every op's processor:

* ``single``: the whole step on processor 0;
* ``data_parallel``: the batch split across the processors (earlier ones take
  the remainder), a full replica of the model on each, every gradient
  all-reduced over the interconnect, then each processor updates its own copy.

Pipeline schedules are placements too; they are techniques
(:mod:`accelsim.techniques.pipelining`) built from the same passes.  Data that
crosses processors gets its transfers from
:func:`~accelsim.graph.passes.insert_transfers`, run last by every placement.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence

from typing_extensions import assert_never

from accelsim.config.hardware import WordBytesSpec
from accelsim.config.run import AssignmentPolicy, OptimizerSpec
from accelsim.graph import passes
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import OpGraph, Parameter, Tag
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


def _shifted(parameters: Sequence[Parameter], offset: int) -> list[Parameter]:
    return [
        dataclasses.replace(p, grad_op=p.grad_op + offset) if p.grad_op >= 0 else p
        for p in parameters
    ]


def place(
    policy: AssignmentPolicy,
    step: StepGraph,
    batch: int,
    processors: int,
    optimizer: OptimizerSpec,
    words: WordBytesSpec,
) -> OpGraph:
    """The training step placed by ``policy``, with its optimizer updates.

    Data parallelism needs at least one sample per processor, which the run's
    validation checks at load time.
    """
    match policy:
        case AssignmentPolicy.SINGLE:
            return single(step(batch), optimizer, words)
        case AssignmentPolicy.DATA_PARALLEL:
            return data_parallel(step, batch, processors, optimizer, words)
        case _:
            assert_never(policy)


def single(graph: OpGraph, optimizer: OptimizerSpec, words: WordBytesSpec) -> OpGraph:
    """One replica's step on processor 0, its updates after its backward pass."""
    builder = GraphBuilder.extending(graph, words)
    add_updates(builder, graph.parameters, optimizer, after=backward_sinks(graph))
    return trained(builder.build(graph.parameters))


def data_parallel(
    step: StepGraph, batch: int, processors: int, optimizer: OptimizerSpec, words: WordBytesSpec
) -> OpGraph:
    """One replica per processor, gradients all-reduced, then every replica's updates."""
    replicas = [
        passes.instantiate(step(local), Tag(replica=p), f"p{p}/" if processors > 1 else "")
        for p, local in enumerate(split_batch(batch, processors))
    ]
    offsets = list(itertools.accumulate((len(r.ops) for r in replicas[:-1]), initial=0))
    params = [_shifted(r.parameters, o) for r, o in zip(replicas, offsets, strict=True)]
    builder = GraphBuilder.extending(passes.concat(replicas), words)
    ready: dict[str, int] = {}
    if processors > 1:
        for j, param in enumerate(params[0]):
            if param.grad_op < 0:
                continue
            name = param.weight.name.removeprefix("p0/")
            tensor = builder.tensor(f"{name}.allreduce", param.gradient.kind, param.update_elements)
            after = [replica[j].grad_op for replica in params]
            op = builder.allreduce(
                f"{name}.allreduce", param.layer, tensor, tuple(range(processors)), after
            )
            ready.update({replica[j].weight.name: op for replica in params})
    for p, (replica, offset) in enumerate(zip(replicas, offsets, strict=True)):
        sinks = [s + offset for s in backward_sinks(replica)]
        add_updates(builder, params[p], optimizer, sinks, ready, Tag(replica=p))
    placed = passes.place(builder.build(params[0]), lambda op: op.tag.replica)
    return passes.insert_transfers(trained(placed))
