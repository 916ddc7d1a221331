"""The step graph recomputing what a plan chose: each segment's forward ops copied into
the backward stage, writing the next version of what they write, and the backward
stage's reads moved to those versions."""

from __future__ import annotations

from collections.abc import Callable

from accelsim.config.hardware import WordBytesSpec
from accelsim.graph import links, passes, queries
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import (
    NO_TILES,
    Access,
    CommOp,
    GemmOp,
    Op,
    OpGraph,
    Phase,
    Stage,
    Tensor,
    TensorKey,
    VectorOp,
    replaced,
)
from accelsim.techniques.recomputation.choice import Plan


def recomputed(graph: OpGraph, chosen: Plan, words: WordBytesSpec, owner: str) -> OpGraph:
    """``graph`` recomputing what ``chosen`` says: each segment's ops copied (``owner``'s,
    in the backward stage) right before the first backward op reading one of its
    tensors, and the backward stage reading the copies' new versions."""
    ops = graph.ops
    read_first = _first_backward_reads(ops, chosen.tensors)
    anchors: dict[int, list[int]] = {}  # op id -> the groups emitted right before it
    for g, group in enumerate(chosen.groups):
        mine = {a.tensor.key for i in group for a in queries.writes_of(ops[i])}
        first = min(read_first[key] for key in mine & read_first.keys())
        anchors.setdefault(first, []).append(g)
    made: dict[TensorKey, int] = {}
    copies: dict[int, int] = {}  # a recomputed op (or collective) -> its copy

    def emit(builder: GraphBuilder, op: Op) -> None:
        for g in anchors.get(op.op_id, ()):
            group = set(chosen.groups[g])
            for i in chosen.groups[g]:
                inside = [c for c in ops[i].after if _within(ops[c], group)]
                for c in inside:
                    if c not in copies:
                        copies[c] = _collective_again(builder, ops[c], copies)
                made.update(_again(builder, ops[i], chosen.tensors, copies))
                builder.add_dependencies(copies[i], [copies[c] for c in inside])

    rewritten, ids = passes.rewrite(graph, words, emit_before=emit, owner=owner)
    redirects: dict[tuple[int, TensorKey], links.Redirect] = {}
    for op in ops:
        if op.stage is not Stage.BACKWARD:
            continue
        tiles = queries.tile_sources(op)
        for j, a in enumerate(queries.reads_of(op)):
            key = a.tensor.key
            if key not in chosen.tensors:
                continue
            consumer, source = ids[op.op_id][0], tiles[j] if tiles else NO_TILES
            if _rereads(ops, source, key):
                # A tile still in the buffer of an op that reads the value too: that op
                # reads the new version (redirected before), and the tiles still come.
                redirect = links.Redirect(consumer, key, ids[source][0], _next(a.tensor), True)
                redirects[consumer, key] = redirect
            else:
                redirect = links.Redirect(consumer, key, made[key], _next(a.tensor))
                redirects.setdefault((consumer, key), redirect)
    return links.redirect(rewritten, redirects.values())


def _first_backward_reads(ops: tuple[Op, ...], keys: frozenset[TensorKey]) -> dict[TensorKey, int]:
    """The id of the first backward op reading each of ``keys`` (those one reads)."""
    first: dict[TensorKey, int] = {}
    for op in ops:
        if op.stage is Stage.BACKWARD:
            for a in queries.reads_of(op):
                if a.tensor.key in keys:
                    first.setdefault(a.tensor.key, op.op_id)
    return first


def _within(op: Op, group: set[int]) -> bool:
    """Whether ``op`` is a collective of a recomputed segment's forward work (a
    tensor-parallel all-reduce after one of its ops, which a later op of it waits
    for): recomputing the segment repeats it, as Megatron-LM's full recomputation does."""
    return isinstance(op, CommOp) and bool(group & set(op.deps))


def _collective_again(builder: GraphBuilder, op: Op, copies: dict[int, int]) -> int:
    """Emit collective ``op`` again, of its tensor's next version, after the copies of
    the recomputed ops it waited for."""
    assert isinstance(op, CommOp)
    return builder.collective(
        f"{op.name}.recompute",
        op.layer,
        _next(op.tensor),
        op.participants,
        [copies[d] for d in op.deps if d in copies],
        op.collective,
        op.root,
        group=op.group,
    )


def _rereads(ops: tuple[Op, ...], source: int, key: TensorKey) -> bool:
    """Whether ``source`` is a backward op that reads the tensor ``key`` too (a stream
    of tiles it holds, not of tiles it makes)."""
    if source == NO_TILES or ops[source].stage is not Stage.BACKWARD:
        return False
    return any(a.tensor.key == key for a in queries.reads_of(ops[source]))


def _next(tensor: Tensor) -> Tensor:
    """The tensor's next version: the value computed again."""
    return replaced(tensor, version=tensor.version + 1)


def _again(
    builder: GraphBuilder, op: Op, remade: frozenset[TensorKey], copies: dict[int, int]
) -> dict[TensorKey, int]:
    """Emit ``op`` again, reading the next version of each ``remade`` tensor and
    writing the next version of every tensor it writes (kept on chip where the first
    version is), taking tiles from the copies (``copies``, filled in) of the ops it took
    them from.

    Returns:
        The new op's id, by the key of each tensor ``op`` writes.
    """

    def read(t: Tensor) -> Tensor:
        return _next(t) if t.key in remade else t

    for a in queries.writes_of(op):
        if builder.is_on_chip(a.tensor):
            builder.keep_on_chip(_next(a.tensor))
    made = _emit_again(builder, op, read)
    copies[op.op_id] = next(iter(made.values()))
    for source, a in zip(queries.tile_sources(op), queries.reads_of(op), strict=False):
        if source in copies:
            builder.take_tiles(copies[op.op_id], read(a.tensor), copies[source])
    return made


def _emit_again(
    builder: GraphBuilder, op: Op, read: Callable[[Tensor], Tensor]
) -> dict[TensorKey, int]:
    """Emit the copy of ``op`` (its reads through ``read``, its writes the next
    versions); the new op's id by the key of each tensor ``op`` writes."""

    name = f"{op.name}.recompute"
    if isinstance(op, GemmOp):
        i = builder.gemm(
            name,
            op.layer,
            Phase.FWD,
            op.m,
            op.n,
            op.k,
            op.count,
            read(op.a),
            read(op.b),
            _next(op.c),
            op.a_elements,
            op.b_elements,
            unit=op.unit,
        )
        return {op.c.key: i}
    assert isinstance(op, VectorOp)
    i = builder.vector(
        name,
        op.layer,
        Phase.FWD,
        op.elements,
        op.ops_per_element,
        [Access(read(a.tensor), a.elements) for a in op.reads],
        [Access(_next(a.tensor), a.elements) for a in op.writes],
        epilogue=op.epilogue,
        op_class=op.op_class,
    )
    return {a.tensor.key: i for a in op.writes}
