"""Decide which tensors stay on chip instead of going to DRAM.

Activations saved in the forward pass for the backward pass (the *stash*)
are written to DRAM and read back unless they fit in the processor's
``buffers.stash_kib``.  Tensors are kept greedily in the order the backward
pass first needs them (the last forward tensors first), per processor.

What a consumer takes tile by tile while it is still on chip (optimizer fusion's
updates, fused epilogues) is decided per tile, not per tensor:
:mod:`accelsim.mapping.tile_reuse`.
"""

from __future__ import annotations

from dataclasses import replace

from accelsim.graph.ops import OpGraph, Stage, Tensor, TensorKey
from accelsim.graph.queries import reads_of, writes_of


def keep_stash_on_chip(graph: OpGraph, capacity_bytes: int) -> OpGraph:
    """Return ``graph`` with the stashed tensors that fit marked on chip."""
    if capacity_bytes <= 0 or not graph.stashed:
        return graph
    owner: dict[TensorKey, int] = {}
    tensors: dict[TensorKey, Tensor] = {}
    first_backward_read: dict[TensorKey, int] = {}
    for op in graph.ops:
        for access in (*writes_of(op), *reads_of(op)):
            key = access.tensor.key
            owner.setdefault(key, graph.processor[op.op_id])
            tensors.setdefault(key, access.tensor)
        if op.stage is Stage.BACKWARD:
            for access in reads_of(op):
                first_backward_read.setdefault(access.tensor.key, op.op_id)
    free: dict[int, int] = {}
    kept = set(graph.on_chip)
    for key in sorted(graph.stashed, key=lambda t: (first_backward_read.get(t, 0), t)):
        proc = owner[key]
        left = free.setdefault(proc, capacity_bytes)
        size = tensors[key].bytes
        if size <= left:
            kept.add(key)
            free[proc] = left - size
    return replace(graph, on_chip=frozenset(kept))
