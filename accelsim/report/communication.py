"""What a simulated step communicated, by collective kind (``summary.json``'s
``communication``).

Every kind of :class:`~accelsim.network.collectives.Collective`: a
:class:`~accelsim.graph.ops.CommOp` of its ``collective`` (its DRAM phases
included), a :class:`~accelsim.graph.ops.TransferOp` ``point_to_point``;
``all_reduce`` and ``point_to_point`` are always named, the others where the step
has one.  For each kind: the bytes its ops' transfers send (their
``interconnect_bytes``), the cycles they span (summed over the ops) and the cycles
of those spans **exposed**: during which none of the op's processors (a
collective's participants; a transfer's source and destination) runs a GEMM or a
vector op.  Overlapped cycles (``overlapped_cycles``) are the others,
``cycles - exposed_cycles``: the communication hidden behind compute.
"""

from __future__ import annotations

import numpy as np

from accelsim.graph.memo import per_graph
from accelsim.graph.ops import CommOp, OpGraph, TransferOp
from accelsim.network.collectives import Collective
from accelsim.report.summary import CommunicationSummary
from accelsim.timing.costs import UNIT_COMM
from accelsim.timing.trace import Trace
from accelsim.timing.weights import op_weights

ALL_REDUCE, POINT_TO_POINT = "all_reduce", "point_to_point"


def by_collective(graph: OpGraph, trace: Trace) -> dict[str, CommunicationSummary]:
    """The step's communication by kind, every kind named (zeros where none ran)."""
    kinds = per_graph(graph, "collective kinds", lambda: _kinds(graph))
    c = trace.costs
    # A processor whose timing is another's (an inferred one) is busy when that one is.
    timed_as = trace.copies or tuple(range(trace.processors))
    busy = _busy_spans(trace, set(timed_as)) if any(kinds.values()) else {}
    weights = op_weights(trace).tolist()
    unions: dict[frozenset[int], _Union] = {}
    keys: dict[tuple[int, ...], frozenset[int]] = {}
    out = {}
    for name, ops in kinds.items():
        cycles = exposed = 0
        for i, processors in ops:
            start, end = int(trace.start_cycle[i]), int(trace.end_cycle[i])
            if processors not in keys:
                keys[processors] = frozenset(timed_as[p] for p in processors)
            key = keys[processors]
            if key not in unions:
                unions[key] = _Union.of([busy[p] for p in key])
            cycles += (end - start) * weights[i]
            exposed += (end - start - unions[key].covered(start, end)) * weights[i]
        out[name] = CommunicationSummary(
            bytes=int(sum(int(c.interconnect_bytes[i]) * weights[i] for i, _ in ops)),
            cycles=cycles,
            exposed_cycles=exposed,
        )
    return out


def _kinds(graph: OpGraph) -> dict[str, list[tuple[int, tuple[int, ...]]]]:
    """Each kind's ops: (op id, the processors it waits on); ``all_reduce`` and
    ``point_to_point`` always, the other kinds where the step has one, in
    :class:`~accelsim.network.collectives.Collective` order."""
    kinds: dict[str, list[tuple[int, tuple[int, ...]]]] = {ALL_REDUCE: [], POINT_TO_POINT: []}
    for op in graph.ops:
        if isinstance(op, CommOp):
            kinds.setdefault(op.collective.value, []).append((op.op_id, op.participants))
        elif isinstance(op, TransferOp):
            kinds[POINT_TO_POINT].append((op.op_id, (op.source, op.destination)))
    return {kind.value: kinds[kind.value] for kind in Collective if kind.value in kinds}


Spans = tuple[np.ndarray, np.ndarray]
"""Disjoint busy spans, sorted: their starts and ends."""


def _busy_spans(trace: Trace, processors: set[int]) -> dict[int, Spans]:
    """Each of ``processors``' cycles with a GEMM or vector op running, as disjoint
    spans."""
    compute = trace.costs.unit != UNIT_COMM
    out = {}
    for p in sorted(processors):
        mine = compute & (trace.processor == p)
        out[p] = _merged(trace.start_cycle[mine], trace.end_cycle[mine])
    return out


def _merged(starts: np.ndarray, ends: np.ndarray) -> Spans:
    """The union of spans ``[starts[i], ends[i])`` as disjoint sorted spans."""
    order = np.argsort(starts, kind="stable")
    merged: list[list[int]] = []
    for s, e in zip(starts[order].tolist(), ends[order].tolist(), strict=True):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        elif e > s:
            merged.append([s, e])
    spans = np.asarray(merged, np.int64).reshape(-1, 2)
    return spans[:, 0], spans[:, 1]


class _Union:
    """Disjoint sorted busy spans and their lengths summed up to each."""

    def __init__(self, spans: Spans) -> None:
        self.starts, self.ends = spans
        self.before = np.concatenate(([0], np.cumsum(self.ends - self.starts)))

    @classmethod
    def of(cls, each: list[Spans]) -> _Union:
        """The union of several processors' spans."""
        return cls(
            _merged(np.concatenate([s for s, _ in each]), np.concatenate([e for _, e in each]))
        )

    def covered(self, start: int, end: int) -> int:
        """Busy cycles within ``[start, end)``."""
        first = int(np.searchsorted(self.ends, start, side="right"))
        last = int(np.searchsorted(self.starts, end, side="left"))
        if first >= last:
            return 0
        inside = int(self.before[last] - self.before[first])
        inside -= max(0, start - int(self.starts[first]))
        return inside - max(0, int(self.ends[last - 1]) - end)
