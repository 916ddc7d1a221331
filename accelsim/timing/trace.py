"""Trace: what the engine observed, per op and per processor."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from accelsim.counts import LIMIT_MESSAGE as LIMIT_MESSAGE
from accelsim.graph.ops import OpGraph
from accelsim.timing.costs import UNIT_COMM, OpCosts


@dataclass(frozen=True)
class Trace:
    """Timing of every op plus the costs it was simulated with.

    Attributes:
        costs: The per-op costs (counts of MACs, accesses, bytes).
        processor: Processor of each op.
        start_cycle: When each op started (all its inputs ready and its unit free).
        end_cycle: When its last write reached DRAM.
        stall_cycles: ``end - start - compute``: waiting for DRAM or links.
        total_cycles: End of the last op.
        processors: Number of processors simulated.
        events: Events the engine processed (the same count in both engines).
        engine: Which engine ran: ``simpy`` or ``compiled``.
        copies: Empty when every processor was simulated; else, when the step was
            simulated on one processor of each role (:mod:`accelsim.timing.symmetry`),
            the processor each processor's timing is that of (itself when simulated).
        unsymmetric: Why a step of data-parallel replicas or tensor-parallel ranks
            under ``symmetry: auto`` was simulated on every processor; empty otherwise.
    """

    costs: OpCosts
    processor: np.ndarray
    start_cycle: np.ndarray
    end_cycle: np.ndarray
    stall_cycles: np.ndarray
    total_cycles: int
    processors: int
    events: int
    engine: str
    copies: tuple[int, ...] = ()
    unsymmetric: str = ""

    def busy_cycles(self, unit: int) -> np.ndarray:
        """Cycles each processor's ``unit`` spent running ops (compute plus stalls)."""
        busy = np.zeros(self.processors, np.int64)
        mask = self.costs.unit == unit
        np.add.at(busy, self.processor[mask], (self.end_cycle - self.start_cycle)[mask])
        return busy


def build_trace(
    graph: OpGraph,
    costs: OpCosts,
    processors: int,
    start: np.ndarray,
    end: np.ndarray,
    events: int,
    engine: str,
) -> Trace:
    """The trace of a finished simulation: an op's stall is its time beyond its compute
    (all of it for transfers and collectives)."""
    duration = end - start
    compute = np.where(costs.unit == UNIT_COMM, duration, costs.compute_cycles)
    return Trace(
        costs=costs,
        processor=np.asarray(graph.processor, np.int64),
        start_cycle=start,
        end_cycle=end,
        stall_cycles=duration - compute,
        total_cycles=int(end.max(initial=0)),
        processors=processors,
        events=events,
        engine=engine,
    )


def launched(trace: Trace, cycles: int) -> Trace:
    """``trace`` after a program's fixed cost of ``cycles``: every op starts and ends
    that much later (the program's launch precedes all its kernels)."""
    if not cycles:
        return trace
    return replace(
        trace,
        start_cycle=trace.start_cycle + cycles,
        end_cycle=trace.end_cycle + cycles,
        total_cycles=trace.total_cycles + cycles,
    )
