"""Trace: what the engine observed, per op and per processor."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accelsim.timing.costs import OpCosts


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

    def busy_cycles(self, unit: int) -> np.ndarray:
        """Cycles each processor's ``unit`` spent running ops (compute plus stalls)."""
        busy = np.zeros(self.processors, np.int64)
        mask = self.costs.unit == unit
        np.add.at(busy, self.processor[mask], (self.end_cycle - self.start_cycle)[mask])
        return busy
