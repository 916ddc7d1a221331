"""Checks that a step graph is well formed, run after every rewrite of it.

As torch.fx's pass manager lints the graph after each pass, the driver checks each
technique's rewrite of a step graph (:func:`graph_problems`), so a rewrite that
breaks the graph is caught where it happens, named by technique and step kind,
instead of surfacing later as an engine error or a wrong number.
"""

from __future__ import annotations

from collections.abc import Iterable

from accelsim.graph import queries
from accelsim.graph.ops import NO_TILES, GemmOp, OpGraph, TensorKind, VectorOp, described

SOURCE_KINDS = (TensorKind.WEIGHT, TensorKind.OPTIMIZER_STATE)
"""Tensors a step may read without producing them: weights and optimizer state (the
model's, or a technique's own, such as a gradient predictor's)."""


def graph_problems(graph: OpGraph, inputs: Iterable[str] = ()) -> list[str]:
    """What is wrong with ``graph``, one sentence each (empty when nothing is).

    * every GEMM has ``m``, ``n``, ``k``, ``count`` and operand footprints of at
      least 1, and every vector op at least one element;
    * every tensor an op reads has a producer in the graph, or is one of
      ``inputs`` (the network's input), a weight or optimizer state
      (:data:`SOURCE_KINDS`), or a parameter's tensor (``Tensor.parameter``: a
      forward-fused update reads the previous step's gradient);
    * the stash is the activations the backward stage reads and does not make;
    * every parameter whose gradient an op makes names an op that writes it, and
      updates at least one element;
    * every tile stream is well formed (:func:`tile_problems`).
    """
    problems: list[str] = []
    given = frozenset(inputs)
    for op in graph.ops:
        if isinstance(op, GemmOp):
            sizes = {
                "m": op.m,
                "n": op.n,
                "k": op.k,
                "count": op.count,
                "a_elements": op.a_elements,
                "b_elements": op.b_elements,
            }
            problems += [f"GEMM {op.name} has {key} = {v}" for key, v in sizes.items() if v < 1]
        elif isinstance(op, VectorOp) and op.elements < 1:
            problems.append(f"vector op {op.name} has {op.elements} elements")
        for access, producers in zip(queries.reads_of(op), op.sources, strict=False):
            t = access.tensor
            if producers or t.kind in SOURCE_KINDS or t.parameter or t.name in given:
                continue
            problems.append(f"{op.name} reads {t.name}, which no op before it makes")
    stashed = queries.stashed(graph.ops)
    if stashed != graph.stashed:
        extra = [described(key) for key in sorted(graph.stashed - stashed)]
        missing = [described(key) for key in sorted(stashed - graph.stashed)]
        problems.append(
            f"the stash is not what the backward stage reads (stashed but unread: {extra},"
            f" read but not stashed: {missing})"
        )
    for p in graph.parameters:
        if p.grad_op < 0:
            continue
        if p.grad_op >= len(graph.ops):
            problems.append(f"{p.weight.name}'s gradient op {p.grad_op} is not in the graph")
            continue
        made = {a.tensor.key for a in queries.writes_of(graph.ops[p.grad_op])}
        if p.gradient.key not in made:
            problems.append(
                f"{p.weight.name}'s gradient op {graph.ops[p.grad_op].name} does not write"
                f" {p.gradient.name}"
            )
        if p.update_elements < 1:
            problems.append(f"{p.weight.name} is trained but updates {p.update_elements} elements")
    return problems + tile_problems(graph)


def tile_problems(graph: OpGraph) -> list[str]:
    """What is wrong with the tile streams of ``graph`` (empty when nothing is).

    * an op that declares tile sources declares one per tensor it reads;
    * a stream's source is an earlier GEMM or vector op on the same processor that
      writes the tensor (its only producer) or reads it;
    * a vector op takes the whole tensor;
    * the ops a group of streams links can run as one op where its first op is: every
      op a member waits for is in the group, or before its first op (or in a group
      whose first op is).
    """
    problems: list[str] = []
    ops = graph.ops
    for op in ops:
        tiles = queries.tile_sources(op)
        if not tiles:
            continue
        reads = queries.reads_of(op)
        if len(tiles) != len(reads):
            problems.append(f"{op.name} declares {len(tiles)} tile sources for {len(reads)} reads")
            continue
        for i, source in enumerate(tiles):
            if source == NO_TILES:
                continue
            access = reads[i]
            name, key = access.tensor.name, access.tensor.key
            if not 0 <= source < op.op_id or not isinstance(ops[source], (GemmOp, VectorOp)):
                problems.append(f"{op.name} takes tiles of {name} from op {source}, not before it")
                continue
            src = ops[source]
            writes = {a.tensor.key for a in queries.writes_of(src)}
            if key in writes and op.sources[i] != (source,):
                problems.append(f"{op.name} takes tiles of {name} from one of its producers")
            elif key not in writes | {a.tensor.key for a in queries.reads_of(src)}:
                problems.append(f"{op.name} takes tiles of {name} from {src.name}, which has none")
            if isinstance(op, VectorOp) and access.elements != access.tensor.elements:
                problems.append(f"{op.name} takes tiles of only part of {name}")
            if graph.processor[source] != graph.processor[op.op_id]:
                problems.append(f"{op.name} takes tiles of {name} from another processor")
    groups = queries.tile_groups(graph)
    first = {i: group[0] for group in groups for i in group}
    for group in groups:
        for i in group:
            late = [d for d in ops[i].deps if first.get(d, d) > group[0]]
            if late:
                problems.append(
                    f"{ops[i].name} runs in one op with {ops[group[0]].name} but waits for"
                    f" {ops[late[0]].name}, which comes after it"
                )
    return problems
