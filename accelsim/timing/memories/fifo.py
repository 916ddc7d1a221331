"""The default DRAM model, ``dram.model: fifo``: one first-come-first-served channel.

A transfer starts when the channel is free (at ``now``, or when the transfers
booked before it are done), holds it ``ceil(bytes / bandwidth)`` cycles (the
read or the write bandwidth, by its direction: reads and writes share the one
channel) and arrives ``latency`` cycles later; the latency is pipelined (it does
not hold the channel).  A processor's interconnect link is the same kind of
channel (:meth:`Fifo.link`), whose streams and direction change nothing.

Parameters ``(read bandwidth, write bandwidth)``; state ``(free_at,)``: the cycle
the channel is free.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from accelsim.config.dram import DramSpec
from accelsim.config.interconnect import InterconnectSpec
from accelsim.timing.memory import Amount, Params, State, slice_bytes

CODE = 0
"""The code by which the compiled engine dispatches to this model."""


@dataclass(frozen=True)
class Fifo:
    """One first-come-first-served channel.

    Attributes:
        read_bytes_per_cycle: Reads' bandwidth; ``inf`` makes transfers take only
            the latency.
        write_bytes_per_cycle: Writes' bandwidth.
        latency_cycles: Cycles from the end of a transfer to the data being usable.
        capacity_bytes: What it holds (0 for a link).
        slice_bytes: The most one reservation of a background stream books (0: no
            limit).
    """

    name: ClassVar[str] = "fifo"
    code: ClassVar[int] = CODE

    read_bytes_per_cycle: float
    write_bytes_per_cycle: float
    latency_cycles: int
    capacity_bytes: int = 0
    slice_bytes: int = 0

    @classmethod
    def of(cls, spec: DramSpec) -> Fifo:
        """The memory ``spec`` describes."""
        read = spec.read_bytes_per_cycle
        return cls(
            read,
            spec.write_bytes_per_cycle,
            spec.latency_cycles,
            spec.capacity_bytes,
            slice_bytes(spec.arbitration, read),
        )

    @classmethod
    def link(cls, spec: InterconnectSpec) -> Fifo:
        """A processor's outgoing interconnect link (its ``links`` parallel links together)."""
        bandwidth = spec.bandwidth_bytes_per_cycle * spec.links
        return cls(bandwidth, bandwidth, spec.latency_cycles)

    def bound(self, n_bytes: Amount, write: bool = False) -> Amount:
        cycles: Amount = n_bytes / (
            self.write_bytes_per_cycle if write else self.read_bytes_per_cycle
        )
        return cycles

    def params(self) -> tuple[float, ...]:
        return (self.read_bytes_per_cycle, self.write_bytes_per_cycle)

    def initial_state(self) -> tuple[int, ...]:
        return (0,)

    def channel_free(self, state: Sequence[int]) -> tuple[int, ...]:
        return (state[0],)

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
        free_at = state[s]
        if free_at < now:
            free_at = now
        free_at += math.ceil(n_bytes / (params[p + 1] if write else params[p]))
        state[s] = free_at
        return free_at
