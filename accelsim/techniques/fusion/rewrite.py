"""The step graph with its updates fused into the backward or the forward pass."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from accelsim.config.hardware import HardwareSpec
from accelsim.config.run import OptimizerSpec
from accelsim.graph import passes, queries
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import (
    NO_TILES,
    GemmOp,
    Op,
    OpGraph,
    Parameter,
    Phase,
    UpdateTiming,
    replaced,
)
from accelsim.lowering.optimizer import update_op
from accelsim.techniques.fusion.config import NAME, WeightTiles


def backward_fused(graph: OpGraph, weight_tiles: WeightTiles = WeightTiles.DX) -> OpGraph:
    """Every trained parameter updated as soon as it can be: placement's
    :func:`~accelsim.lowering.optimizer.add_updates` runs each update right after its
    final ``dW`` tile, taking the gradient's tiles on chip, and the weight's from
    ``dX`` with ``weight_tiles: dx``."""
    shares = weight_tiles is WeightTiles.DX
    parameters = tuple(
        dataclasses.replace(p, update=UpdateTiming.BACKWARD, shares_weight_tiles=shares)
        if p.grad_op >= 0
        else p
        for p in graph.parameters
    )
    return dataclasses.replace(graph, parameters=parameters)


def forward_fused(graph: OpGraph, hw: HardwareSpec, optimizer: OptimizerSpec) -> OpGraph:
    """Every trained parameter updated just before its layer's first forward read of it
    (or its layer's first forward op, for a parameter no forward op reads); a forward
    GEMM reading the weight takes its tiles from the update as it writes them (the
    weight read shared by both), so the two run as one op."""
    trained = {p.weight.name: p for p in graph.parameters if p.grad_op >= 0}
    first_forward: dict[str, int] = {}
    for op in graph.ops:
        if op.phase is Phase.FWD:
            first_forward.setdefault(op.layer, op.op_id)
    first_read: dict[int, list[Parameter]] = {}
    for name, p in trained.items():
        forward = [
            op.op_id
            for op in graph.ops
            if op.phase is Phase.FWD and any(a.tensor.name == name for a in queries.reads_of(op))
        ]
        at = forward[0] if forward else first_forward.get(p.layer)
        if at is not None:
            first_read.setdefault(at, []).append(p)
    for at, params in first_read.items():
        # the updates whose weight the op reads last, so the op and they run as one op
        read = {a.tensor.name for a in queries.reads_of(graph.ops[at])}
        params.sort(key=lambda p: p.weight.name in read)
    updates: dict[str, int] = {}

    def emit(builder: GraphBuilder, op: Op) -> None:
        for p in first_read.get(op.op_id, []):
            clipped = optimizer.clip_global_norm is not None
            updates[p.weight.name] = update_op(builder, p, optimizer, (), clipped=clipped)[0]

    rewritten, ids = passes.rewrite(graph, hw.word_bytes, emit_before=emit, owner=NAME)
    ops = list(rewritten.ops)
    for old, params in first_read.items():
        (new,) = ids[old]
        op = ops[new]
        wait = {updates[p.weight.name] for p in params}
        op = replaced(
            op, deps=tuple(sorted(set(op.deps) | wait)), after=tuple(sorted(set(op.after) | wait))
        )
        ops[new] = _taking_weights(op, {p.weight.name: updates[p.weight.name] for p in params})
    parameters = tuple(
        dataclasses.replace(p, update=UpdateTiming.FORWARD) if p.weight.name in updates else p
        for p in rewritten.parameters
    )
    return dataclasses.replace(rewritten, ops=tuple(ops), parameters=parameters)


def _taking_weights(op: Op, updates: Mapping[str, int]) -> Op:
    """``op`` taking the tiles of each weight it reads from the update writing it
    (``updates``: update op by weight name; the update is then the weight's source),
    when it is a GEMM."""
    if not isinstance(op, GemmOp):
        return op
    reads = queries.reads_of(op)
    tiles = list(op.tile_sources or (NO_TILES,) * len(reads))
    sources = list(op.sources or ((),) * len(reads))
    for i, access in enumerate(reads):
        if access.tensor.name in updates:
            tiles[i] = updates[access.tensor.name]
            sources[i] = (tiles[i],)
    if set(tiles) == {NO_TILES}:
        return op
    return replaced(op, tile_sources=tuple(tiles), sources=tuple(sources))
