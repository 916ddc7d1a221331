"""The step graph recomputing what a plan chose: each segment's forward ops copied into
the backward stage, writing the next version of what they write, and the backward
stage's reads moved to those versions."""

from __future__ import annotations

from accelsim.config.hardware import WordBytesSpec
from accelsim.graph import links, passes, queries
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import (
    Access,
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
    anchors: dict[int, list[int]] = {}  # op id -> the groups emitted right before it
    for g, group in enumerate(chosen.groups):
        mine = {a.tensor.key for i in group for a in queries.writes_of(ops[i])}
        mine &= chosen.tensors
        first = next(
            op.op_id
            for op in ops
            if op.stage is Stage.BACKWARD
            and any(a.tensor.key in mine for a in queries.reads_of(op))
        )
        anchors.setdefault(first, []).append(g)
    made: dict[TensorKey, int] = {}

    def emit(builder: GraphBuilder, op: Op) -> None:
        for g in anchors.get(op.op_id, ()):
            for i in chosen.groups[g]:
                made.update(_again(builder, ops[i], chosen.tensors))

    rewritten, ids = passes.rewrite(graph, words, emit_before=emit, owner=owner)
    moved = {
        (ids[op.op_id][0], a.tensor.key): a.tensor
        for op in ops
        if op.stage is Stage.BACKWARD
        for a in queries.reads_of(op)
        if a.tensor.key in chosen.tensors
    }
    redirects = [
        links.Redirect(consumer, key, made[key], _next(tensor))
        for (consumer, key), tensor in moved.items()
    ]
    return links.redirect(rewritten, redirects)


def _next(tensor: Tensor) -> Tensor:
    """The tensor's next version: the value computed again."""
    return replaced(tensor, version=tensor.version + 1)


def _again(builder: GraphBuilder, op: Op, remade: frozenset[TensorKey]) -> dict[TensorKey, int]:
    """Emit ``op`` again, reading the next version of each ``remade`` tensor and
    writing the next version of every tensor it writes.

    Returns:
        The new op's id, by the key of each tensor ``op`` writes.
    """

    def read(t: Tensor) -> Tensor:
        return _next(t) if t.key in remade else t

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
    )
    return {a.tensor.key: i for a in op.writes}
