"""The largest step accelsim simulates: every count stays exact and inside int64.

Counts are kept in int64 arrays (NumPy and Numba kernels), which wrap around
silently, and converted to float64 for rates and energies.  A step whose MACs,
vector ops or bytes moved exceed :data:`MAX_COUNT` (2^53, the largest integer a
float64 holds exactly, 9.0e15; VGG-16 at batch 100,000 needs 4.6e15 MACs) is
rejected before it is simulated, naming the batch size and the limit; a step
whose simulated time exceeds it stops the engine (:mod:`accelsim.timing.engine`).
"""

from __future__ import annotations

from collections import OrderedDict

from accelsim.errors import MAX_COUNT, Problem
from accelsim.graph.ops import GemmOp, OpGraph, TransferOp, VectorOp

KEPT_TOTALS = 16
"""Graphs whose totals :func:`step_totals` keeps (a sweep's points share a few graphs)."""

_totals: OrderedDict[int, tuple[OpGraph, dict[str, int]]] = OrderedDict()


def step_totals(graph: OpGraph) -> dict[str, int]:
    """MACs, vector ops and bytes read and written by the ops of ``graph`` (exact ints):
    the bytes of :func:`~accelsim.graph.queries.reads_of` and
    :func:`~accelsim.graph.queries.writes_of`, summed without making their accesses.

    Graphs are immutable, so the totals of the last :data:`KEPT_TOTALS` graphs are
    kept by identity (the points of a sweep that share a workload share its graph)."""
    known = _totals.get(id(graph))
    if known is not None and known[0] is graph:
        _totals.move_to_end(id(graph))
        return dict(known[1])
    totals = _count(graph)
    _totals[id(graph)] = (graph, totals)  # holding the graph keeps its id unique
    if len(_totals) > KEPT_TOTALS:
        _totals.popitem(last=False)
    return dict(totals)


def _count(graph: OpGraph) -> dict[str, int]:
    """:func:`step_totals`, counted."""
    macs = vector_ops = moved = 0
    for op in graph.ops:
        if isinstance(op, GemmOp):
            macs += op.m * op.n * op.k * op.count
            per_gemm = op.a_elements * op.a.word_bytes + op.b_elements * op.b.word_bytes
            moved += (per_gemm + op.m * op.n * op.c.word_bytes) * op.count
        elif isinstance(op, VectorOp):
            vector_ops += op.elements * op.ops_per_element
            for access in (*op.reads, *op.writes):
                moved += access.elements * access.tensor.word_bytes
        elif isinstance(op, TransferOp):
            moved += op.elements * op.tensor.word_bytes
        else:  # an all-reduce reads and writes its whole tensor
            moved += 2 * op.tensor.elements * op.tensor.word_bytes
    return {"MACs": macs, "vector ops": vector_ops, "bytes read and written": moved}


def limit_problems(graph: OpGraph, source: str, batch_size: int) -> list[Problem]:
    """One problem per total of ``graph`` above :data:`MAX_COUNT`, blamed on the batch size."""
    return [
        Problem(
            source,
            "batch_size",
            f"the step's {quantity} ({value:.3g}) exceed the limit of 2^53 ({MAX_COUNT:.3g});"
            " lower the batch size or the workload's layer sizes",
            batch_size,
        )
        for quantity, value in step_totals(graph).items()
        if value > MAX_COUNT
    ]
