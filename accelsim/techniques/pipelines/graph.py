"""Graph-building pieces the pipeline schedules share: copying a step for a
(mini-batch, micro-batch), summing micro-batch gradients, a stage's backward
sinks, PipeDream's send-after-backward ordering, and the updates (with the
all-reduce among a replicated stage's replicas) after a round of mini-batches.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from accelsim.config.enums import VectorClass
from accelsim.config.run import OptimizerSpec
from accelsim.graph import passes, queries
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.copies import Relabel, TensorMap, copied_as, instantiate, prefixed, recopied
from accelsim.graph.ops import Access, Op, OpGraph, Parameter, Phase, Tag, TensorKind, replaced
from accelsim.graph.queries import GRADIENT_PHASES
from accelsim.lowering.optimizer import add_updates

SplitShares = Mapping[str, tuple[float, int]]
"""Layers whose dX GEMMs are split: the share of rows moved and the processor."""


def copy_prefix(tag: Tag) -> str:
    """The start of the names of micro-batch ``tag``'s tensors (``b<mini-batch>m<micro>/``)."""
    return f"b{tag.mini_batch}m{tag.micro_batch}/"


def copy_step(
    builder: GraphBuilder,
    one: OpGraph,
    tag: Tag,
    where: Callable[[Op], int],
    shares: SplitShares | None = None,
    copies: Relabel | None = None,
) -> list[Parameter]:
    """Append micro-batch ``tag``'s copy of the step, each op on the processor ``where``
    gives it; its trained parameters.

    ``copies`` (``Relabel(one.ops, one.parameters)``, made once for the many
    copies of a step) copies each op once, at its place in the builder; split GEMMs
    (``shares``) take the passes one after another.
    """
    prefix = copy_prefix(tag)
    if shares:
        graph = passes.split_gemms(
            passes.place(instantiate(one, tag, prefix), where),
            lambda op: shares.get(op.layer) if op.phase is Phase.BWD_INPUT else None,
        )
        offset = builder.append_graph(graph)
        parameters = [dataclasses.replace(p, grad_op=p.grad_op + offset) for p in graph.parameters]
    else:
        copy = copies if copies is not None else Relabel(one.ops, one.parameters)
        start = len(builder.ops)
        ops, parameters = copy(tag, copied_as(prefix, tag), range(start, start + len(one.ops)))
        builder.append_ops(ops, [where(op) for op in ops], prefixed(one.on_chip, prefix))
    return [p for p in parameters if p.grad_op >= 0]


def accumulate_gradients(
    builder: GraphBuilder,
    copies: list[list[Parameter]],
    stage_of: Mapping[str, int],
    tag: Tag,
    owner: str,
) -> list[int]:
    """Sum each parameter's gradient over the micro-batches (ops of the schedule
    ``owner``); the op that finishes it."""
    if len(copies) == 1:
        return [p.grad_op for p in copies[0]]
    ready = []
    for p, first in enumerate(copies[0]):
        parts = [c[p].gradient for c in copies]
        total = builder.derived(
            first.weight, ".grad_sum", TensorKind.GRADIENT, first.update_elements
        )
        with builder.owned_by(owner):
            op = builder.vector(
                f"{first.weight.step_name}.grad_sum",
                first.layer,
                Phase.BWD_WEIGHT,
                total.elements,
                len(parts) - 1,
                [Access(part, total.elements) for part in parts],
                [total],
                tag=tag,
                op_class=VectorClass.ELEMENTWISE,
            )
        builder.processor[op] = stage_of[first.layer]
        ready.append(op)
    return ready


def by_layer(processor_of: Mapping[str, int]) -> Callable[[Op], int]:
    """Placement of ops by their layer."""
    return lambda op: processor_of[op.layer]


@dataclass(frozen=True)
class Done:
    """A processor's finished backward pass of mini-batch ``j``: its parameters with the
    ops that make their gradients, and its backward sinks."""

    j: int
    processor: int
    params: list[tuple[Parameter, int]]
    sinks: tuple[int, ...]


def add_round_updates(
    builder: GraphBuilder,
    done: list[Done],
    optimizer: OptimizerSpec,
    updates: dict[tuple[int, int], list[int]],
    owner: str,
) -> None:
    """The updates after a round of a stage's mini-batches, one per replica.

    With one replica each mini-batch's gradients update the weights right after
    its stage's backward pass.  Replicas (PipeDream's data-parallel stages)
    all-reduce each parameter's gradients of the round first (ops of the schedule
    ``owner``), then each updates its own copy of the weights.
    """
    procs = tuple(d.processor for d in done)
    for p, (param, grad) in enumerate(done[0].params):
        ready = grad
        if len(done) > 1:
            name = param.weight.step_name
            total = builder.tensor(
                f"b{done[0].j}/{name}.allreduce",
                param.gradient.kind,
                param.gradient.elements,
                name,
            )
            with builder.owned_by(owner):
                ready = builder.allreduce(
                    f"b{done[0].j}/{name}.allreduce",
                    param.layer,
                    total,
                    procs,
                    [d.params[p][1] for d in done],
                )
            builder.processor[ready] = procs[0]
        for d in done:
            mine = d.params[p][0]
            for op in add_updates(
                builder,
                [mine],
                optimizer,
                after=d.sinks,
                gradient_ready={mine.weight.name: ready},
                tag=Tag(mini_batch=d.j),
            ):
                builder.processor[op] = d.processor
                updates.setdefault((d.j, d.processor), []).append(op)


def send_after_backward(
    builder: GraphBuilder, start: int, backward_done: Mapping[int, tuple[int, ...]]
) -> None:
    """Backward ops since ``start`` that read a gradient made on another stage wait for
    that stage's whole backward pass: a stage sends its input gradient when its
    backward is done (the transfer then waits too)."""
    for i in range(start, len(builder.ops)):
        op = builder.ops[i]
        if op.phase not in GRADIENT_PHASES:
            continue
        here = builder.processor[i]
        senders = {
            builder.processor[p]
            for group in op.sources
            for p in group
            if builder.processor[p] != here and builder.ops[p].phase in GRADIENT_PHASES
        }
        for sender in senders:
            builder.add_dependencies(i, backward_done.get(sender, ()))


def stage_sinks(builder: GraphBuilder, start: int) -> dict[int, tuple[int, ...]]:
    """Per processor, the backward ops since ``start`` that no later one there waits for.

    Updating a stage's weights after these is updating after its whole backward
    pass, as the baseline step does.
    """
    backward = [
        i for i in range(start, len(builder.ops)) if builder.ops[i].phase in GRADIENT_PHASES
    ]
    used = {d for i in backward for d in builder.ops[i].deps}
    sinks: dict[int, list[int]] = {}
    for i in backward:
        if i not in used:
            sinks.setdefault(builder.processor[i], []).append(i)
    return {stage: tuple(ids) for stage, ids in sinks.items()}


def repeat_last_block(graph: OpGraph, mini_batches: int) -> OpGraph | None:
    """``graph`` (a schedule's mini-batches ``0..J``, transfers inserted) extended to
    ``mini_batches`` by copies of its last mini-batch's block; None unless that block
    is the one before it moved by one block.

    A block is a mini-batch's ops (its copies of the step, gradient sums, updates
    and transfers), contiguous in program order.  A copy for mini-batch ``j`` has
    the last block's ops retagged, its tensors (those tagged with mini-batch ``J``)
    copied for ``j`` (:func:`copy_prefix`), every id they refer to (their own, and
    earlier blocks') moved by ``j - J`` blocks, and priorities moved as the last two
    blocks' differ.
    """
    ops = graph.ops
    last = ops[-1].tag.mini_batch
    if last < 1:
        return None
    begins = [i for i in range(1, len(ops)) if ops[i].tag.mini_batch != ops[i - 1].tag.mini_batch]
    size = len(ops) - begins[-1] if begins else 0
    if len(begins) < 2 or begins[-1] - begins[-2] != size:
        return None
    block = ops[begins[-1] :]
    earlier = _moved(Relabel(ops[begins[-2] : begins[-1]]), last - 1, last, size, len(ops))
    if tuple(earlier) != block:
        return None
    priority = graph.priority[begins[-1] :]
    before = graph.priority[begins[-2] : begins[-1]]
    step = [now - then for then, now in zip(before, priority, strict=True)]
    relabel = Relabel(block)
    new_ops, new_priority = list(ops), list(graph.priority)
    stashed, on_chip = set(graph.stashed), set(graph.on_chip)
    own = [t for t in queries.tensors(block).values() if t.local and t.tag.mini_batch == last]
    stashed_keys = queries.stashed(block)
    mine = [t for t in own if t.key in stashed_keys]
    kept = [t for t in own if t.key in graph.on_chip]
    for j in range(last + 1, mini_batches):
        copy = _copied(last, j)
        new_ops += _moved(relabel, last, j, (j - last) * size, len(ops))
        new_priority += [p + (j - last) * d for p, d in zip(priority, step, strict=True)]
        stashed.update(copy(t).key for t in mine)
        on_chip.update(copy(t).key for t in kept)
    processor = graph.processor[begins[-1] :]
    return OpGraph(
        ops=tuple(new_ops),
        processor=graph.processor + processor * (mini_batches - last - 1),
        on_chip=frozenset(on_chip),
        stashed=frozenset(stashed),
        parameters=graph.parameters,
        priority=tuple(new_priority),
    )


def _moved(relabel: Relabel, old: int, new: int, by: int, ops: int) -> list[Op]:
    """Mini-batch ``old``'s ops (``relabel``'s, in a graph of ``ops`` ops) for mini-batch
    ``new``, ids moved ``by``."""
    moved, _ = relabel(
        lambda tag: replaced(tag, mini_batch=new), _copied(old, new), range(by, by + ops)
    )
    return moved


def _copied(old: int, new: int) -> TensorMap:
    """Mini-batch ``old``'s tensors as mini-batch ``new``'s."""
    return recopied(
        lambda tag: replaced(tag, mini_batch=new) if tag.mini_batch == old else None, copy_prefix
    )
