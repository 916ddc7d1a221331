"""Decide which tensors stay on chip instead of going to DRAM.

Activations saved in the forward pass for the backward pass (the *stash*)
are written to DRAM and read back unless they fit in the processor's
``buffers.stash_kib``.  Tensors are kept greedily in the order the backward
pass first needs them (the last forward tensors first), per processor.

A fused optimizer update (optimizer fusion) reuses what an array's buffers
already hold: the gradient where the weight-gradient GEMM accumulated it (the
ofmap buffer), and the weight where the GEMM before it loaded it (the filter
buffer), if it fits there beside that buffer's other operand in between.
"""

from __future__ import annotations

from dataclasses import replace

from accelsim.graph.ops import OpGraph, Phase, Tensor
from accelsim.graph.queries import reads_of, writes_of
from accelsim.mapping.units import ArrayUnit


def gradient_stays(gradient: Tensor, unit: ArrayUnit) -> bool:
    """Whether a gradient can stay in ``unit``'s ofmap buffer until its update reads it."""
    return gradient.bytes <= unit.ofmap_bytes


def weight_stays(weight: Tensor, beside_bytes: int, unit: ArrayUnit) -> bool:
    """Whether a weight can stay in ``unit``'s filter buffer between two uses while
    ``beside_bytes`` of other filter operands pass through it."""
    return weight.bytes + beside_bytes <= unit.filter_bytes


def keep_stash_on_chip(graph: OpGraph, capacity_bytes: int) -> OpGraph:
    """Return ``graph`` with the stashed tensors that fit marked on chip."""
    if capacity_bytes <= 0 or not graph.stashed:
        return graph
    owner: dict[str, int] = {}
    tensors: dict[str, Tensor] = {}
    first_backward_read: dict[str, int] = {}
    for op in graph.ops:
        for access in (*writes_of(op), *reads_of(op)):
            name = access.tensor.name
            owner.setdefault(name, graph.processor[op.op_id])
            tensors.setdefault(name, access.tensor)
        if op.phase in (Phase.BWD_INPUT, Phase.BWD_WEIGHT):
            for access in reads_of(op):
                first_backward_read.setdefault(access.tensor.name, op.op_id)
    free: dict[int, int] = {}
    kept = set(graph.on_chip)
    for name in sorted(graph.stashed, key=lambda t: (first_backward_read.get(t, 0), t)):
        proc = owner[name]
        left = free.setdefault(proc, capacity_bytes)
        size = tensors[name].bytes
        if size <= left:
            kept.add(name)
            free[proc] = left - size
    return replace(graph, on_chip=frozenset(kept))
