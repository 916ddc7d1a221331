"""The largest op accelsim simulates: every count stays exact and inside int64.

Per op, counts are kept in int64 arrays (NumPy and Numba kernels), which wrap around
silently, so an op whose MACs, vector ops or bytes moved exceed :data:`MAX_COUNT`
(2^62, 4.6e18: the sum of two still fits int64) is rejected before the step is
simulated, naming the op's layer, the batch size and the limit; a step whose
simulated time exceeds it stops the engine (:mod:`accelsim.timing.engine`).  A
step's totals are Python integers (:func:`step_totals`, :mod:`accelsim.counts`),
exact at any size: a GPT-3 step on 1,024 chips (10^21 MACs and more) is counted,
not refused.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from accelsim.errors import MAX_COUNT, MAX_COUNT_TEXT, Problem
from accelsim.graph.ops import GemmOp, Op, OpGraph, TransferOp, VectorOp

QUANTITIES = ("MACs", "vector ops", "bytes read and written")
"""What :func:`step_totals` counts."""

KEPT_TOTALS = 16
"""Graphs whose totals :func:`step_totals` keeps (a sweep's points share a few graphs)."""


@dataclass(frozen=True)
class _Counts:
    """A graph's totals, and per quantity its largest op's count and layer."""

    totals: dict[str, int]
    largest: dict[str, tuple[int, str]]


_totals: OrderedDict[int, tuple[OpGraph, _Counts]] = OrderedDict()


def step_totals(graph: OpGraph) -> dict[str, int]:
    """MACs, vector ops and bytes read and written by the ops of ``graph`` (exact
    Python ints, of any size): the bytes of :func:`~accelsim.graph.queries.reads_of`
    and :func:`~accelsim.graph.queries.writes_of`, summed without making their accesses."""
    return dict(_counted(graph).totals)


def _counted(graph: OpGraph) -> _Counts:
    """The counts of ``graph``; graphs are immutable, so those of the last
    :data:`KEPT_TOTALS` graphs are kept by identity (the points of a sweep that share a
    workload share its graph)."""
    known = _totals.get(id(graph))
    if known is not None and known[0] is graph:
        _totals.move_to_end(id(graph))
        return known[1]
    counts = _count(graph)
    _totals[id(graph)] = (graph, counts)  # holding the graph keeps its id unique
    if len(_totals) > KEPT_TOTALS:
        _totals.popitem(last=False)
    return counts


def _count(graph: OpGraph) -> _Counts:
    """:func:`_counted`, counted."""
    totals = [0] * len(QUANTITIES)
    largest = [(0, "")] * len(QUANTITIES)
    for op in graph.ops:
        for i, value in enumerate(op_counts(op)):
            totals[i] += value
            if value > largest[i][0]:
                largest[i] = (value, op.layer)
    return _Counts(
        dict(zip(QUANTITIES, totals, strict=True)), dict(zip(QUANTITIES, largest, strict=True))
    )


def op_counts(op: Op) -> tuple[int, int, int]:
    """An op's :data:`QUANTITIES`: its MACs, vector ops and bytes read and written
    (exact ints)."""
    macs = vector_ops = moved = 0
    if isinstance(op, GemmOp):
        macs = op.m * op.n * op.k * op.count
        per_gemm = op.a_elements * op.a.word_bytes + op.b_elements * op.b.word_bytes
        moved = (per_gemm + op.m * op.n * op.c.word_bytes) * op.count
    elif isinstance(op, VectorOp):
        vector_ops = op.elements * op.ops_per_element
        moved = sum(a.elements * a.tensor.word_bytes for a in (*op.reads, *op.writes))
    elif isinstance(op, TransferOp):
        moved = op.elements * op.tensor.word_bytes
    else:  # an all-reduce reads and writes its whole tensor
        moved = 2 * op.tensor.elements * op.tensor.word_bytes
    return macs, vector_ops, moved


def limit_problems(graph: OpGraph, source: str, batch_size: int) -> list[Problem]:
    """One problem per count whose largest op in ``graph`` is above :data:`MAX_COUNT`,
    blamed on the batch size."""
    return [
        Problem(
            source,
            "batch_size",
            f"layer {layer}: one op's {quantity} ({value:.3g}) exceed the limit of"
            f" {MAX_COUNT_TEXT} ({MAX_COUNT:.3g}) of an op's counts; lower the batch size"
            " or the workload's layer sizes",
            batch_size,
        )
        for quantity, (value, layer) in _counted(graph).largest.items()
        if value > MAX_COUNT
    ]
