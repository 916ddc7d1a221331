"""Read-only questions about ops and graphs: what an op reads and writes, what is stashed,
which ops take tiles from which (tile streams) and so run as one fused op."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from accelsim.graph.memo import per_graph
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
    TensorKind,
    TileStream,
    TransferOp,
    VectorOp,
    whole,
)

GRADIENT_PHASES = (Phase.BWD_INPUT, Phase.BWD_WEIGHT)
"""What the ops computing gradients compute: input and weight gradients."""


def reads_of(op: Op) -> tuple[Access, ...]:
    """Every tensor access an op reads (GEMM operands by unique footprint)."""
    if isinstance(op, GemmOp):
        return (Access(op.a, op.a_elements * op.count), Access(op.b, op.b_elements * op.count))
    if isinstance(op, VectorOp):
        return op.reads
    if isinstance(op, TransferOp):
        return (Access(op.tensor, op.elements),)
    return (whole(op.tensor),)


def writes_of(op: Op) -> tuple[Access, ...]:
    """Every tensor access an op writes (a transfer makes a copy, not a new tensor)."""
    if isinstance(op, GemmOp):
        return (Access(op.c, op.m * op.n * op.count),)
    if isinstance(op, VectorOp):
        return op.writes
    if isinstance(op, TransferOp):
        return ()
    return (whole(op.tensor),)


def stashed(ops: Sequence[Op]) -> frozenset[TensorKey]:
    """The stash: the keys of the activations the backward stage reads and does not
    make, so saved for it (written in the forward stage, or given to the step)."""
    return frozenset(t.key for t in stashed_tensors(ops))


def stashed_tensors(ops: Sequence[Op]) -> list[Tensor]:
    """The tensors :func:`stashed` names, each once, in the order backward first reads them."""
    backward = [op for op in ops if op.stage is Stage.BACKWARD]
    made = {a.tensor.key for op in backward for a in writes_of(op)}
    found: dict[TensorKey, Tensor] = {}
    for op in backward:
        shard = (whole(op.shard),) if isinstance(op, CommOp) and op.shard is not None else ()
        for a in (*reads_of(op), *shard):
            t = a.tensor
            if t.kind is TensorKind.ACTIVATION and t.key not in made:
                found.setdefault(t.key, t)
    return list(found.values())


def sinks(ops: Sequence[Op], start: int) -> tuple[int, ...]:
    """Ops from ``start`` on that no later op from ``start`` on waits for."""
    used = {d for op in ops[start:] for d in op.deps}
    return tuple(op.op_id for op in ops[start:] if op.op_id not in used)


def first_backward(ops: Sequence[Op]) -> int:
    """Index of the first op of the backward stage (``len(ops)`` when there is none)."""
    return next((op.op_id for op in ops if op.stage is Stage.BACKWARD), len(ops))


def forward_work(op: Op) -> bool:
    """Whether ``op`` is the step's forward work in the forward stage (neither a
    recomputation of it in the backward stage nor a technique's auxiliary op)."""
    return op.phase is Phase.FWD and op.stage is Stage.FORWARD


def tensors(ops: Iterable[Op]) -> dict[str, Tensor]:
    """Every tensor the ops read or write, by name: of each name, the value the step
    computes (version 0)."""
    return {
        a.tensor.name: a.tensor
        for op in ops
        for a in (*reads_of(op), *writes_of(op))
        if not a.tensor.version
    }


def tile_sources(op: Op) -> tuple[int, ...]:
    """``op.tile_sources`` (empty for the ops that take no tiles: all-reduces, transfers)."""
    return op.tile_sources if isinstance(op, (GemmOp, VectorOp)) else ()


def tile_streams(graph: OpGraph) -> tuple[TileStream, ...]:
    """Every tile stream the ops of ``graph`` declare, in consumer order (found once per
    graph object)."""
    return per_graph(graph, "tile streams", lambda: _tile_streams(graph))


def _tile_streams(graph: OpGraph) -> tuple[TileStream, ...]:
    streams = []
    for op in graph.ops:
        taken = tile_sources(op)
        if not taken:
            continue
        for i, (source, access) in enumerate(zip(taken, reads_of(op), strict=False)):
            if source != NO_TILES:
                streams.append(TileStream(op.op_id, i, access.tensor, source))
    return tuple(streams)


def tile_groups(graph: OpGraph) -> tuple[tuple[int, ...], ...]:
    """The ops that tile streams link, as groups of two or more op ids (each sorted;
    the groups ordered by their first op): every op of a group takes tiles from, or
    gives tiles to, another op of the group, so the group runs as one fused op (found
    once per graph object)."""
    return per_graph(graph, "tile groups", lambda: _tile_groups(graph))


def group_lead(graph: OpGraph, group: Sequence[int]) -> int:
    """The member of a tile group whose unit the group runs on: its first GEMM, else
    its first op."""
    return next((i for i in group if isinstance(graph.ops[i], GemmOp)), group[0])


def kernels(graph: OpGraph) -> int:
    """Kernels the graph launches: each tile group one, each other GEMM or vector op
    one (a transfer or an all-reduce launches none)."""
    groups = tile_groups(graph)
    grouped = {i for group in groups for i in group}
    alone = sum(
        1 for op in graph.ops if isinstance(op, (GemmOp, VectorOp)) and op.op_id not in grouped
    )
    return alone + len(groups)


def _tile_groups(graph: OpGraph) -> tuple[tuple[int, ...], ...]:
    parent: dict[int, int] = {}

    def find(i: int) -> int:
        root = i
        while parent.get(root, root) != root:
            root = parent[root]
        while i != root:  # path compression
            parent[i], i = root, parent.get(i, i)
        return root

    for stream in tile_streams(graph):
        a, b = find(stream.source), find(stream.consumer)
        parent.setdefault(a, a)
        parent.setdefault(b, b)
        if a != b:
            parent[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = {}
    for i in parent:
        groups.setdefault(find(i), []).append(i)
    return tuple(tuple(sorted(g)) for _, g in sorted(groups.items()) if len(g) > 1)
