"""Trace: what the engine observed, per op and per processor."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

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
        replicas: How many processors each op but a collective stands for: 1, or, for
            a data-parallel step placed once (every op but a collective is processor
            0's and every processor runs the same), the processor count
            (:mod:`accelsim.timing.weights` adds the step up).
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
    replicas: int = 1

    def busy_cycles(self, unit: int) -> np.ndarray:
        """Cycles each processor's ``unit`` spent running ops (compute plus stalls)."""
        mask = self.costs.unit == unit
        return self.per_processor(np.where(mask, self.end_cycle - self.start_cycle, 0))

    @cached_property
    def by_processor(self) -> tuple[np.ndarray, list[int]]:
        """The ops in processor order (op order within one) and where each
        processor's start, the last end after them."""
        order = np.argsort(self.processor, kind="stable")
        ends = np.searchsorted(self.processor[order], np.arange(self.processors + 1))
        return order, ends.tolist()

    def stand_ins(self) -> np.ndarray:
        """Which ops stand for every processor's (all False but in a step placed
        once, :attr:`replicas` above 1: every op but a collective)."""
        if self.replicas == 1:
            return np.zeros(len(self.processor), dtype=bool)
        return np.asarray(self.costs.unit != UNIT_COMM)

    def per_processor(self, values: np.ndarray) -> np.ndarray:
        """Each processor's total of an integer per-op ``values`` (``int64``), the
        ops that stand for every processor's counted on every processor."""
        out = np.zeros(self.processors, np.int64)
        if self.replicas == 1:
            np.add.at(out, self.processor, values)
            return out
        stand = self.stand_ins()
        np.add.at(out, self.processor[~stand], values[~stand])
        if stand.any():
            out += np.int64(values[stand].sum())
        return out


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
