"""The step graph with its updates fused into the backward or the forward pass."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from accelsim.config.hardware import HardwareSpec
from accelsim.config.run import OptimizerSpec
from accelsim.graph import links, passes, queries
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import GemmOp, Op, OpGraph, Parameter, TensorKey, UpdateTiming
from accelsim.lowering.optimizer import update_op
from accelsim.techniques.fusion.config import NAME
from accelsim.techniques.fusion.loop_order import LayerOrder, LoopOrder


def backward_fused(graph: OpGraph, orders: Mapping[str, LayerOrder]) -> OpGraph:
    """Every trained parameter updated as soon as it can be: placement's
    :func:`~accelsim.lowering.optimizer.add_updates` runs each update right after its
    final ``dW`` tile, taking the gradient's tiles on chip, and the weight's from
    ``dX`` where its loop order (``orders``, by weight name) shares them."""
    parameters = tuple(
        dataclasses.replace(
            p,
            update=UpdateTiming.BACKWARD,
            shares_weight_tiles=orders[p.weight.name].order is not LoopOrder.DX_FIRST,
        )
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
    trained = {p.weight.key: p for p in graph.parameters if p.grad_op >= 0}
    first_forward: dict[str, int] = {}
    for op in graph.ops:
        if queries.forward_work(op):
            first_forward.setdefault(op.layer, op.op_id)
    first_read: dict[int, list[Parameter]] = {}
    for key, p in trained.items():
        forward = [
            op.op_id
            for op in graph.ops
            if queries.forward_work(op) and any(a.tensor.key == key for a in queries.reads_of(op))
        ]
        at = forward[0] if forward else first_forward.get(p.layer)
        if at is not None:
            first_read.setdefault(at, []).append(p)
    for at, params in first_read.items():
        # the updates whose weight the op reads last, so the op and they run as one op
        read = {a.tensor.key for a in queries.reads_of(graph.ops[at])}
        params.sort(key=lambda p: p.weight.key in read)
    updates: dict[TensorKey, int] = {}

    def emit(builder: GraphBuilder, op: Op) -> None:
        for p in first_read.get(op.op_id, []):
            clipped = optimizer.clip_global_norm is not None
            updates[p.weight.key] = update_op(builder, p, optimizer, (), clipped=clipped)[0]

    rewritten, ids = passes.rewrite(graph, hw.word_bytes, emit_before=emit, owner=NAME)
    waits: dict[int, list[int]] = {}
    taken: list[links.Redirect] = []  # a forward GEMM takes the weight's tiles from its update
    for old, params in first_read.items():
        (at,) = ids[old]
        waits[at] = [updates[p.weight.key] for p in params]
        if isinstance(graph.ops[old], GemmOp):
            read = {a.tensor.key for a in queries.reads_of(graph.ops[old])}
            taken += [
                links.Redirect(at, p.weight.key, updates[p.weight.key], tiles=True)
                for p in params
                if p.weight.key in read
            ]
    fused = links.redirect(links.wait_for(rewritten, waits), taken)
    parameters = tuple(
        dataclasses.replace(p, update=UpdateTiming.FORWARD) if p.weight.key in updates else p
        for p in fused.parameters
    )
    return dataclasses.replace(fused, parameters=parameters)
