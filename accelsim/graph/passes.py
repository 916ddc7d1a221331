"""Graph-to-graph passes: every one returns a renumbered graph with its stash recomputed
(the copies of a step are :mod:`accelsim.graph.copies`).

* :func:`rewrite` drops ops and emits new ones after chosen ops (what
  techniques use);
* :func:`place` puts ops on processors, :func:`split_gemms` shares a GEMM's
  rows between two processors, and :func:`insert_transfers` adds the transfers
  that bring data to ops on other processors than its producers.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from accelsim.config.hardware import WordBytesSpec
from accelsim.graph import queries
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import (
    CORE,
    NO_TILES,
    Access,
    CommOp,
    GemmOp,
    Op,
    OpGraph,
    Parameter,
    TensorKey,
    TransferOp,
    VectorOp,
    copier,
    replaced,
)

# old op id -> the ids that replace it (none when it was dropped, two when split)
IdMap = Mapping[int, tuple[int, ...]]


AnyOp = TypeVar("AnyOp", bound=GemmOp | VectorOp | CommOp | TransferOp)


def _relink(op: AnyOp, op_id: int, ids: IdMap) -> AnyOp:
    """``op`` renumbered to ``op_id`` with every reference mapped through ``ids``.

    A tile source that is gone, or was split in two, is no longer one: the tensor is
    then read as it was before any stream (:data:`~accelsim.graph.ops.NO_TILES`)."""

    def mapped(group: Iterable[int]) -> tuple[int, ...]:
        return tuple(new for old in group for new in ids.get(old, ()))

    new = replaced(
        op,
        op_id=op_id,
        deps=tuple(sorted(set(mapped(op.deps)))),
        sources=tuple(mapped(g) for g in op.sources),
        after=tuple(sorted(set(mapped(op.after)))),
    )
    tiles = queries.tile_sources(op)
    if not tiles:
        return new
    return replaced(new, tile_sources=tuple(_one(ids.get(s, ())) for s in tiles))


def _one(ids: tuple[int, ...]) -> int:
    """The one op an old tile source became, or :data:`NO_TILES`."""
    return ids[0] if len(ids) == 1 else NO_TILES


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
    on_chip: Iterable[TensorKey],
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


_COPY_LINKS: dict[type, Callable[..., Op]] = {
    cls: copier(cls, ("op_id", "deps", "sources", "after"))
    for cls in (GemmOp, VectorOp, CommOp, TransferOp)
}


EmitAfter = Callable[[GraphBuilder, Op], None]


def rewrite(
    graph: OpGraph,
    words: WordBytesSpec,
    drop: Callable[[Op], bool] = lambda op: False,
    emit_after: EmitAfter | None = None,
    emit_before: EmitAfter | None = None,
    owner: str = CORE,
) -> tuple[OpGraph, dict[int, tuple[int, ...]]]:
    """Drop the ops ``drop`` selects and let ``emit_after`` add ops after each kept op.

    ``emit_after(builder, op)`` receives ``op`` as it was in ``graph`` and a
    builder positioned right after its renumbered copy, whose producer table
    covers every op so far, and emits into it; ``emit_before`` likewise, right
    before the copy (which does not wait for what it emits).  Ops that waited
    for a dropped op no longer wait for it.  The ops emitted are ``owner``'s (the
    technique rewriting the graph) and run in ``op``'s stage unless the emitter
    says otherwise (:meth:`~accelsim.graph.builder.GraphBuilder.in_stage`); the
    kept ones keep their owners and stages.

    Returns:
        The new graph (parameters' ``grad_op`` remapped, -1 where dropped) and
        the map from old op ids to new ones.
    """
    if graph.priority:
        raise ValueError("rewrite runs before a schedule sets priorities")
    builder = GraphBuilder(words, on_chip=graph.on_chip)
    ids: dict[int, tuple[int, ...]] = {}
    with builder.owned_by(owner):
        for op in graph.ops:
            if drop(op):
                ids[op.op_id] = ()
                continue
            if emit_before is not None:
                with builder.in_stage(op.stage):
                    emit_before(builder, op)
            new = _relink(op, len(builder.ops), ids)
            builder.append(new, graph.processor[op.op_id])
            ids[op.op_id] = (new.op_id,)
            if emit_after is not None:
                with builder.in_stage(op.stage):
                    emit_after(builder, op)
    return builder.build(_parameters(graph.parameters, ids)), ids


def subgraph(graph: OpGraph, keep: Sequence[int], priority: Sequence[int] = ()) -> OpGraph:
    """The ops ``keep`` (ascending) of ``graph`` alone, renumbered in order, each
    waiting for the kept ops it waited for, with ``priority`` (one per kept op)."""
    ids = {old: (new,) for new, old in enumerate(keep)}
    ops = [_relink(graph.ops[old], new, ids) for new, old in enumerate(keep)]
    processor = [graph.processor[old] for old in keep]
    return _graph(ops, processor, graph.on_chip, _parameters(graph.parameters, ids), priority)


def place(graph: OpGraph, where: Callable[[Op], int]) -> OpGraph:
    """``graph`` with every op on the processor ``where`` gives it."""
    return dataclasses.replace(graph, processor=tuple(where(op) for op in graph.ops))


SplitRule = Callable[[GemmOp], tuple[float, int] | None]


def split_gemms(graph: OpGraph, rule: SplitRule) -> OpGraph:
    """Share GEMMs' rows between two processors.

    Where ``rule(op)`` gives ``(fraction, processor)``, the GEMM becomes two:
    part 0 (``GemmOp.part``, named ``.part0``) with that fraction of the rows (at
    least one, at most all but one) on ``processor``, then part 1 (``.part1``) with
    the rest where it was; both write the output piecewise, and ops reading it wait
    for both.
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
        parts = ((moved, other), (op.m - moved, graph.processor[op.op_id]))
        base = _relink(op, len(ops), ids)
        ids[op.op_id] = (len(ops), len(ops) + 1)
        for part, (rows, where) in enumerate(parts):
            a_part = min(rows * op.k, max(1, op.a_elements * rows // op.m))
            ops.append(
                replaced(
                    base,
                    op_id=len(ops),
                    name=f"{op.name}.part{part}",
                    m=rows,
                    a_elements=a_part,
                    part=part,
                )
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

    The stash is the graph's: a transfer has its reader's phase, stage, tag, owner
    and tensor, and is named after the tensor's name in the step (``Tensor.step_name``)
    and its destination.  A tile stream between two processors ends here (the
    tensor comes by the transfer).
    """
    ops: list[Op] = []
    processor: list[int] = []
    priority: list[int] = []
    new_id: list[int] = []  # old op id -> new (this pass only inserts ops)
    sent: dict[tuple[TensorKey, int, int], int] = {}
    placed = graph.processor
    for op in graph.ops:
        here = placed[op.op_id]
        if len(ops) == op.op_id and all(
            _at(graph.ops[x], placed[x], here) for g in op.sources for x in g
        ):
            # No transfer before it and none for it: its ids stay.
            new_op = _relinked(op, op.op_id, op.sources, op.after, _kept_deps(op))
        else:
            new_op = _with_transfers(op, here, new_id, ops, processor, sent, graph, priority)
        if queries.tile_sources(op):
            new_op = _local_tiles(new_op, op, new_id, processor, here)
        new_id.append(len(ops))
        ops.append(new_op)
        processor.append(here)
        if graph.priority:
            priority.append(graph.priority[op.op_id])
    ids = {old: (new,) for old, new in enumerate(new_id)}
    return OpGraph(
        ops=tuple(ops),
        processor=tuple(processor),
        on_chip=graph.on_chip,
        stashed=graph.stashed,
        parameters=_parameters(graph.parameters, ids),
        priority=tuple(priority),
    )


def _local_tiles(
    new_op: Op, op: Op, new_id: Sequence[int], processor: Sequence[int], here: int
) -> Op:
    """``new_op`` (``op`` renumbered) taking tiles only from ops on its own processor: a
    tile cannot stay on chip across processors, so a tensor made elsewhere arrives by
    its transfer instead."""
    assert isinstance(op, (GemmOp, VectorOp))
    tiles = tuple(
        new_id[s] if s != NO_TILES and processor[new_id[s]] == here else NO_TILES
        for s in op.tile_sources
    )
    if tiles == queries.tile_sources(new_op):
        return new_op
    return replaced(new_op, tile_sources=tiles)


def settled(op: Op) -> bool:
    """Whether :func:`insert_transfers` leaves ``op`` as it is when every op it reads
    from is on its processor and no transfer comes before it."""
    return _relinked(op, op.op_id, op.sources, op.after, _kept_deps(op)) is op


def _relinked(
    op: Op,
    op_id: int,
    sources: Sequence[tuple[int, ...]],
    after: Iterable[int],
    deps: Iterable[int] | None = None,
) -> Op:
    """``op`` numbered ``op_id`` with those links, ``deps`` and ``after`` sorted without
    repeats (``deps`` by default: ``after`` and every producer in ``sources``); itself
    when they do not change, since ops are immutable."""
    ordered = tuple(sorted(set(after))) if after else ()
    if deps is None:
        waits = tuple(sorted({*ordered, *itertools.chain.from_iterable(sources)}))
    else:
        waits = tuple(sorted(set(deps)))
    if op_id == op.op_id and (waits, ordered) == (op.deps, op.after) and sources == op.sources:
        return op
    return _COPY_LINKS[type(op)](op, op_id, waits, tuple(sources), ordered)


def _kept_deps(op: Op) -> Iterable[int] | None:
    """What a comm or transfer op, or one reading nothing made in the graph, waits for
    (the ops it waited for); None for others, which wait for ``after`` and producers."""
    return op.deps if isinstance(op, (CommOp, TransferOp)) or not op.sources else None


def _at(producer: Op, placed: int, here: int) -> bool:
    """Whether what ``producer`` (placed on processor ``placed``) writes is on processor
    ``here``: made there, or delivered there by a collective ``here`` takes part in."""
    return placed == here or (isinstance(producer, CommOp) and here in producer.participants)


def _with_transfers(
    op: Op,
    here: int,
    new_id: list[int],
    ops: list[Op],
    processor: list[int],
    sent: dict[tuple[TensorKey, int, int], int],
    graph: OpGraph,
    priority: list[int],
) -> Op:
    """``op`` renumbered after the ops so far, with the transfers it needs appended first.

    A comm or transfer op, or one that reads nothing made in the graph, keeps what it
    waited for; another waits for its ``after``, its local producers and its transfers.
    """
    sources = tuple([tuple([new_id[old] for old in g]) for g in op.sources])
    ordered = [new_id[old] for old in op.after]
    if _kept_deps(op) is not None:
        return _relinked(op, len(ops), sources, ordered, [new_id[old] for old in op.deps])
    if all(_at(ops[x], processor[x], here) for g in sources for x in g):
        return _relinked(op, len(ops), sources, ordered)
    deps = set(ordered)
    for access, producers in zip(queries.reads_of(op), sources, strict=False):
        remote: dict[int, list[int]] = {}
        for producer in producers:
            if _at(ops[producer], processor[producer], here):
                deps.add(producer)
            else:
                remote.setdefault(processor[producer], []).append(producer)
        for source, made_by in remote.items():
            key = (access.tensor.key, source, here)
            if key not in sent:
                sent[key] = len(ops)
                waits = [d for d in set(ordered) if processor[d] == source]
                ops.append(_transfer(len(ops), op, access, source, here, made_by, waits))
                processor.append(source)
                if graph.priority:
                    priority.append(graph.priority[op.op_id])
            deps.add(sent[key])
    return _relinked(op, len(ops), sources, ordered, deps)


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
        name=f"{access.tensor.step_name}.to_p{destination}",
        layer=reader.layer,
        phase=reader.phase,
        stage=reader.stage,
        tensor=access.tensor,
        elements=access.elements,
        source=source,
        destination=destination,
        deps=tuple(sorted({*producers, *waits})),
        sources=(tuple(producers),),
        after=tuple(sorted(waits)),
        tag=reader.tag,
        owner=reader.owner,
    )
