"""The timing of a step of one op, without an event engine (``accelsim layer``).

A lone GEMM or vector op has no dependencies, no other op on its unit and no
other traffic on its DRAM channel, so the events of the SimPy engine
(:mod:`accelsim.timing.engine`) happen in an order known in advance: the op's
fixed cost passes, the prologue arrives, then each tile group computes while the next one is fetched
and its outputs drain behind it, then the epilogue drains.  :func:`simulate_single_op`
does that arithmetic directly (on processor 0's DRAM memory of the
:class:`~accelsim.timing.machine.Machine`, booked as the engine books it), so a
single-layer query loads neither SimPy nor Numba.  ``tests/timing/test_single_op.py``
checks it against the SimPy engine on random GEMMs and hardware.
"""

from __future__ import annotations

import numpy as np

from accelsim.errors import MAX_COUNT, LimitError
from accelsim.graph.ops import CommOp, OpGraph, TransferOp
from accelsim.timing.costs import OpCosts
from accelsim.timing.machine import Machine
from accelsim.timing.memory import DEFAULT_STREAM, DEFAULT_WRITE_STREAM, MemoryState, Stream
from accelsim.timing.streams import STREAMS, WRITE_STREAMS, op_streams
from accelsim.timing.trace import LIMIT_MESSAGE, Trace, build_trace

ENGINE_NAME = "single_op"
"""What the trace names as its engine: no events are simulated."""


def _part(total: int, parts: int, j: int) -> int:
    """The ``j``-th of ``parts`` near-equal integer parts of ``total``."""
    q, r = divmod(total, parts)
    return q + (1 if j < r else 0)


def single_op_cycles(
    costs: OpCosts,
    machine: Machine,
    streams: tuple[Stream, Stream] = (DEFAULT_STREAM, DEFAULT_WRITE_STREAM),
) -> int:
    """The cycle the only op of ``costs`` ends when it starts at cycle 0 on processor 0,
    its reads and writes of ``streams``.

    Raises:
        ValueError: if the memory would book one of its transfers a slice at a time
            (a background stream under ``priority`` arbitration: the slices and the
            op's other transfers then interleave as only an engine times them).
        LimitError: if that is more than :data:`~accelsim.errors.MAX_COUNT` cycles.
    """
    dram = MemoryState(machine.dram[0])
    reads_stream, writes_stream = streams
    overhead = int(costs.overhead_cycles[0])
    chunks, compute = int(costs.chunks[0]), int(costs.compute_cycles[0]) - overhead
    reads, writes = int(costs.dram_read_bytes[0]), int(costs.dram_ofmap_write_bytes[0])
    prologue = reads if chunks == 1 else min(reads, int(costs.prologue_bytes[0]))
    epilogue = min(writes, int(costs.epilogue_bytes[0]))
    rest, behind = reads - prologue, writes - epilogue

    def book(now: int, n_bytes: int, stream: Stream) -> int:
        return _whole(dram, now, n_bytes, stream)

    now = book(overhead, prologue, reads_stream) if prologue else overhead
    drains = []
    for j in range(chunks):
        fetch_bytes = _part(rest, chunks - 1, j) if j + 1 < chunks else 0
        fetched = book(now, fetch_bytes, reads_stream) if fetch_bytes else now
        now += _part(compute, chunks, j)
        drain_bytes = _part(behind, chunks, j)
        if drain_bytes:
            drains.append(book(now, drain_bytes, writes_stream))
        now = max(now, fetched)
    if epilogue:
        drains.append(book(now, epilogue, writes_stream))
    end = max([now, *drains])
    if end > MAX_COUNT:
        raise LimitError(LIMIT_MESSAGE)
    return end


def _whole(dram: MemoryState, now: int, n_bytes: int, stream: Stream) -> int:
    """Book all of ``n_bytes`` at once; the cycle they arrive."""
    if dram.portion(n_bytes, stream) < n_bytes:
        raise ValueError(
            f"a lone op's {stream.kind.name.lower()} transfers are booked a slice at a time"
            " (dram.arbitration: priority): time it with an engine"
        )
    return dram.reserve(now, n_bytes, stream)


def simulate_single_op(graph: OpGraph, costs: OpCosts, machine: Machine) -> Trace:
    """The :class:`Trace` the SimPy engine gives a graph of one GEMM or vector op
    (with ``events`` 0 and engine :data:`ENGINE_NAME`: nothing was simulated).

    Raises:
        ValueError: if the graph is not one such op on processor 0, or its memory
            books its transfers a slice at a time.
        LimitError: if the op takes more than :data:`~accelsim.errors.MAX_COUNT` cycles.
    """
    if len(graph.ops) != 1 or graph.processor[0] != 0:
        raise ValueError("simulate_single_op needs a graph of one op on processor 0")
    if isinstance(graph.ops[0], TransferOp | CommOp):
        raise ValueError("simulate_single_op needs a GEMM or vector op")
    read_classes, write_classes = op_streams(graph, costs)
    streams = (STREAMS[int(read_classes[0])], WRITE_STREAMS[int(write_classes[0])])
    start = np.zeros(1, np.int64)
    end = np.array([single_op_cycles(costs, machine, streams)], np.int64)
    return build_trace(graph, costs, machine.processors, start, end, 0, ENGINE_NAME)
