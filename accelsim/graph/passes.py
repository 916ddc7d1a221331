"""Graph-to-graph passes: every one returns a renumbered graph with its stash recomputed.

* :func:`concat` appends graphs (replicas, mini-batches) into one;
* :func:`instantiate` makes a tagged copy of a step with its own tensor names;
* :func:`rewrite` drops ops and emits new ones after chosen ops (what
  techniques use);
* :func:`place` puts ops on processors, :func:`split_gemms` shares a GEMM's
  rows between two processors, and :func:`insert_transfers` adds the transfers
  that bring data to ops on other processors than its producers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from accelsim.config.hardware import WordBytesSpec
from accelsim.graph import queries
from accelsim.graph.builder import GraphBuilder, shifted
from accelsim.graph.ops import (
    Access,
    CommOp,
    GemmOp,
    Op,
    OpGraph,
    Parameter,
    Tag,
    Tensor,
    TransferOp,
    VectorOp,
    replaced,
)

# old op id -> the ids that replace it (none when it was dropped, two when split)
IdMap = Mapping[int, tuple[int, ...]]


AnyOp = TypeVar("AnyOp", bound=GemmOp | VectorOp | CommOp | TransferOp)


def _relink(op: AnyOp, op_id: int, ids: IdMap) -> AnyOp:
    """``op`` renumbered to ``op_id`` with every reference mapped through ``ids``."""

    def mapped(group: Iterable[int]) -> tuple[int, ...]:
        return tuple(new for old in group for new in ids.get(old, ()))

    return replaced(
        op,
        op_id=op_id,
        deps=tuple(sorted(set(mapped(op.deps)))),
        sources=tuple(mapped(g) for g in op.sources),
        after=tuple(sorted(set(mapped(op.after)))),
    )


def _parameters(parameters: Iterable[Parameter], ids: IdMap) -> tuple[Parameter, ...]:
    """Parameters with ``grad_op`` mapped (-1 when its op is gone)."""
    out = []
    for p in parameters:
        new = ids.get(p.grad_op, ()) if p.grad_op >= 0 else ()
        out.append(replaced(p, grad_op=new[-1] if new else -1))
    return tuple(out)


def _graph(
    ops: Sequence[Op],
    processor: Sequence[int],
    on_chip: Iterable[str],
    parameters: Iterable[Parameter],
    priority: Sequence[int] = (),
) -> OpGraph:
    return OpGraph(
        ops=tuple(ops),
        processor=tuple(processor),
        on_chip=frozenset(on_chip),
        stashed=queries.stashed(ops),
        parameters=tuple(parameters),
        priority=tuple(priority),
    )


def concat(graphs: Sequence[OpGraph]) -> OpGraph:
    """The graphs one after another in program order, with the first one's parameters."""
    ops: list[Op] = []
    processor: list[int] = []
    priority: list[int] = []
    for g in graphs:
        offset = len(ops)
        ops.extend(shifted(op, offset) for op in g.ops)
        processor.extend(g.processor)
        priority.extend(g.priority)
    on_chip = {name for g in graphs for name in g.on_chip}
    keep = priority if len(priority) == len(ops) else ()
    return _graph(ops, processor, on_chip, graphs[0].parameters, keep)


def instantiate(graph: OpGraph, tag: Tag, prefix: str) -> OpGraph:
    """A copy of ``graph`` tagged ``tag`` whose tensor names start with ``prefix``."""
    if not prefix:
        return dataclasses.replace(graph, ops=tuple(replaced(o, tag=tag) for o in graph.ops))

    # One copy per tensor and per access object: ops share them, and copies cost.
    # Keyed by identity (hashing a tensor hashes all its fields); equal objects
    # that are not the same get equal copies.
    copies: dict[int, Tensor] = {}
    access_copies: dict[int, Access] = {}

    def t(tensor: Tensor) -> Tensor:
        copy = copies.get(id(tensor))
        if copy is None:
            copy = copies[id(tensor)] = replaced(tensor, name=prefix + tensor.name)
        return copy

    def a(access: Access) -> Access:
        copy = access_copies.get(id(access))
        if copy is None:
            copy = access_copies[id(access)] = Access(t(access.tensor), access.elements)
        return copy

    def renamed(op: Op) -> Op:
        if isinstance(op, GemmOp):
            return replaced(op, a=t(op.a), b=t(op.b), c=t(op.c), tag=tag)
        if isinstance(op, VectorOp):
            reads, writes = tuple(map(a, op.reads)), tuple(map(a, op.writes))
            return replaced(op, reads=reads, writes=writes, tag=tag)
        return replaced(op, tensor=t(op.tensor), tag=tag)

    ops = [renamed(op) for op in graph.ops]
    parameters = [replaced(p, weight=t(p.weight), gradient=t(p.gradient)) for p in graph.parameters]
    return _graph(
        ops, graph.processor, {prefix + n for n in graph.on_chip}, parameters, graph.priority
    )


EmitAfter = Callable[[GraphBuilder, Op], None]


def rewrite(
    graph: OpGraph,
    words: WordBytesSpec,
    drop: Callable[[Op], bool] = lambda op: False,
    emit_after: EmitAfter | None = None,
    emit_before: EmitAfter | None = None,
) -> tuple[OpGraph, dict[int, tuple[int, ...]]]:
    """Drop the ops ``drop`` selects and let ``emit_after`` add ops after each kept op.

    ``emit_after(builder, op)`` receives ``op`` as it was in ``graph`` and a
    builder positioned right after its renumbered copy, whose producer table
    covers every op so far, and emits into it; ``emit_before`` likewise, right
    before the copy (which does not wait for what it emits).  Ops that waited
    for a dropped op no longer wait for it.

    Returns:
        The new graph (parameters' ``grad_op`` remapped, -1 where dropped) and
        the map from old op ids to new ones.
    """
    if graph.priority:
        raise ValueError("rewrite runs before a schedule sets priorities")
    builder = GraphBuilder(words, on_chip=graph.on_chip)
    ids: dict[int, tuple[int, ...]] = {}
    for op in graph.ops:
        if drop(op):
            ids[op.op_id] = ()
            continue
        if emit_before is not None:
            emit_before(builder, op)
        new = _relink(op, len(builder.ops), ids)
        builder.append(new, graph.processor[op.op_id])
        ids[op.op_id] = (new.op_id,)
        if emit_after is not None:
            emit_after(builder, op)
    return builder.build(_parameters(graph.parameters, ids)), ids


def place(graph: OpGraph, where: Callable[[Op], int]) -> OpGraph:
    """``graph`` with every op on the processor ``where`` gives it."""
    return dataclasses.replace(graph, processor=tuple(where(op) for op in graph.ops))


SplitRule = Callable[[GemmOp], tuple[float, int] | None]


def split_gemms(graph: OpGraph, rule: SplitRule) -> OpGraph:
    """Share GEMMs' rows between two processors.

    Where ``rule(op)`` gives ``(fraction, processor)``, the GEMM becomes two:
    ``.part0`` with that fraction of the rows (at least one, at most all but one)
    on ``processor``, then ``.part1`` with the rest where it was; both write the
    output piecewise, and ops reading it wait for both.
    """
    ops: list[Op] = []
    processor: list[int] = []
    ids: dict[int, tuple[int, ...]] = {}
    for op in graph.ops:
        share = rule(op) if isinstance(op, GemmOp) and op.m > 1 else None
        if share is None or not isinstance(op, GemmOp):
            ids[op.op_id] = (len(ops),)
            ops.append(_relink(op, len(ops), ids))
            processor.append(graph.processor[op.op_id])
            continue
        fraction, other = share
        moved = min(op.m - 1, max(1, round(fraction * op.m)))
        parts = ((moved, other, ".part0"), (op.m - moved, graph.processor[op.op_id], ".part1"))
        base = _relink(op, len(ops), ids)
        ids[op.op_id] = (len(ops), len(ops) + 1)
        for rows, where, suffix in parts:
            a_part = min(rows * op.k, max(1, op.a_elements * rows // op.m))
            ops.append(
                replaced(base, op_id=len(ops), name=op.name + suffix, m=rows, a_elements=a_part)
            )
            processor.append(where)
    return _graph(ops, processor, graph.on_chip, _parameters(graph.parameters, ids), ())


def insert_transfers(graph: OpGraph) -> OpGraph:
    """Send data made on one processor to the ops that read it on another.

    Each tensor travels once per (source, destination) pair, as a
    :class:`TransferOp` placed right before the first op that needs it; later
    readers reuse the copy.  The transfer leaves after its producers and after
    whatever that first reader is ordered ``after`` on the sending processor (a
    schedule that sends a stage's output when the stage is done says so that
    way).  An op then waits for its local producers, its transfers and its
    ``after`` dependencies.
    """
    ops: list[Op] = []
    processor: list[int] = []
    priority: list[int] = []
    new_id: list[int] = []  # old op id -> new (this pass only inserts ops)
    sent: dict[tuple[str, int, int], int] = {}
    for op in graph.ops:
        here = graph.processor[op.op_id]
        sources = [tuple([new_id[old] for old in g]) for g in op.sources]
        ordered = {new_id[old] for old in op.after}
        deps = set(ordered)
        for access, producers in zip(queries.reads_of(op), sources, strict=False):
            remote: dict[int, list[int]] = {}
            for producer in producers:
                if processor[producer] == here:
                    deps.add(producer)
                else:
                    remote.setdefault(processor[producer], []).append(producer)
            for source, made_by in remote.items():
                key = (access.tensor.name, source, here)
                if key not in sent:
                    sent[key] = len(ops)
                    waits = [d for d in ordered if processor[d] == source]
                    ops.append(_transfer(len(ops), op, access, source, here, made_by, waits))
                    processor.append(source)
                    if graph.priority:
                        priority.append(graph.priority[op.op_id])
                deps.add(sent[key])
        new_op: Op
        if not isinstance(op, (CommOp, TransferOp)) and op.sources:
            op_id, links = len(ops), (tuple(sorted(deps)), tuple(sources), tuple(sorted(ordered)))
            # Most ops of a placed graph keep their links: reuse them, they are immutable.
            if op_id == op.op_id and links == (op.deps, op.sources, op.after):
                new_op = op
            else:
                new_op = replaced(op, op_id=op_id, deps=links[0], sources=links[1], after=links[2])
        else:
            new_op = replaced(
                op,
                op_id=len(ops),
                deps=tuple(sorted({new_id[old] for old in op.deps})),
                sources=tuple(tuple([new_id[old] for old in g]) for g in op.sources),
                after=tuple(sorted({new_id[old] for old in op.after})),
            )
        new_id.append(len(ops))
        ops.append(new_op)
        processor.append(here)
        if graph.priority:
            priority.append(graph.priority[op.op_id])
    ids = {old: (new,) for old, new in enumerate(new_id)}
    return _graph(ops, processor, graph.on_chip, _parameters(graph.parameters, ids), priority)


def _transfer(
    op_id: int,
    reader: Op,
    access: Access,
    source: int,
    destination: int,
    producers: list[int],
    waits: list[int],
) -> TransferOp:
    return TransferOp(
        op_id=op_id,
        name=f"{access.tensor.name}.to_p{destination}",
        layer=reader.layer,
        phase=reader.phase,
        tensor=access.tensor,
        elements=access.elements,
        source=source,
        destination=destination,
        deps=tuple(sorted({*producers, *waits})),
        sources=(tuple(producers),),
        after=tuple(sorted(waits)),
        tag=reader.tag,
    )
