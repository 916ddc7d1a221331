"""``dram.model: turnaround``: one first-come-first-served channel whose bus turns
around between reads and writes: a transfer in the other direction than the channel's
last waits ``turnaround_cycles`` first (a DRAM's read-to-write and write-to-read
turnarounds in one figure).

Parameters ``(read bandwidth, write bandwidth, turnaround cycles)``; state
``(free_at, last direction)``, the direction -1 before the first transfer, 0 after a
read and 1 after a write.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

from accelsim.config.dram import DramSpec, TurnaroundDramSpec
from accelsim.timing.memories.fifo import Fifo
from accelsim.timing.memory import Params, State

CODE = 3
"""The code by which the compiled engine dispatches to this model."""


@dataclass(frozen=True)
class Turnaround(Fifo):
    """The channel of :class:`~accelsim.timing.memories.fifo.Fifo` (its attributes and
    bound), its bus turning around in ``turnaround_cycles``."""

    name: ClassVar[str] = "turnaround"
    code: ClassVar[int] = CODE

    turnaround_cycles: int = field(kw_only=True)

    @classmethod
    def of(cls, spec: DramSpec) -> Turnaround:
        """The memory ``spec`` (a :class:`~accelsim.config.dram.TurnaroundDramSpec`)
        describes."""
        assert isinstance(spec, TurnaroundDramSpec)
        return cls(**vars(Fifo.of(spec)), turnaround_cycles=spec.turnaround_cycles)

    def params(self) -> tuple[float, ...]:
        return (*super().params(), float(self.turnaround_cycles))

    def initial_state(self) -> tuple[int, ...]:
        return (0, -1)

    @staticmethod
    def reserve(
        params: Params,
        p: int,
        state: State,
        s: int,
        now: int,
        n_bytes: int,
        stream: int,
        write: bool,
    ) -> int:
        direction = 1 if write else 0
        free_at = state[s] if state[s] > now else now
        if state[s + 1] >= 0 and state[s + 1] != direction:
            free_at += int(params[p + 2])
        free_at += math.ceil(n_bytes / (params[p + 1] if write else params[p]))
        state[s] = free_at
        state[s + 1] = direction
        return free_at
