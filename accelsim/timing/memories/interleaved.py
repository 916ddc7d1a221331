"""``dram.model: interleaved``: ``N`` independent channels with addresses interleaved
over them (the model of a ``dram`` with ``channels`` above 1 and no ``model``).

High-bandwidth memory splits a stack into independent channels (HBM2's
pseudo-channels, HBM3's 16 channels of two pseudo-channels each), each with its
own bus, and the memory controller spreads consecutive addresses over them so
one stream of traffic keeps them all busy.  :class:`Interleaved` is ``N``
first-come-first-served channels, each of ``dram.bandwidth_bytes_per_cycle`` and
``dram.capacity_gib``, behind one ``dram.latency_cycles``.

**Interleaving.**  The engine knows a transfer's size, not its addresses, so a
transfer is taken as the next addresses after the memory's previous transfer:
its bytes are cut into blocks of :data:`INTERLEAVE_BYTES` (the last one short)
and dealt out to the channels in turn, starting at the channel after the one
that took the previous transfer's last block.  Each channel books its share as
a :class:`~accelsim.timing.memories.fifo.Fifo` would (after what it already
carries, ``ceil(share / bandwidth)`` cycles), and the transfer arrives when its
last share has, plus the latency.  A transfer of ``N`` blocks or more keeps every
channel busy; a smaller one uses only some, and the next one starts where it
stopped.  Per-address effects (row buffers, bank conflicts, a tensor's real
layout) are not modelled.

Its bound is the bytes over ``N`` times a channel's bandwidth, its capacity ``N``
times a channel's; with ``priority`` arbitration a background slice is
:data:`~accelsim.timing.memory.SLICE_CYCLES` of the whole memory's bandwidth.

Parameters ``(read bandwidth, write bandwidth, N, block bytes)`` (each channel's
bandwidths); state ``(cursor, free_at of channel 0, ..., of channel N - 1)``, the
cursor being the channel that takes the next block.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from accelsim.config.dram import DramSpec
from accelsim.timing.memory import Amount, Params, State, slice_bytes

CODE = 1
"""The code by which the compiled engine dispatches to this model."""

INTERLEAVE_BYTES = 256
"""The interleaving granularity: 256 B blocks go to the channels in turn (a
common choice for HBM address maps, and a few DRAM bursts: large transfers
spread evenly, a tile's worth of bytes reaches every channel)."""


def channels_of(spec: DramSpec) -> dict[str, Any]:
    """The fields of :class:`Interleaved` that ``spec`` sets: its channels, their
    bandwidths, latency and capacity, and the slice of all channels' bandwidth."""
    channels, read = spec.channels, spec.read_bytes_per_cycle
    return {
        "channels": channels,
        "read_bytes_per_cycle": read,
        "write_bytes_per_cycle": spec.write_bytes_per_cycle,
        "latency_cycles": spec.latency_cycles,
        "capacity_bytes": channels * spec.capacity_bytes,
        "slice_bytes": slice_bytes(spec.arbitration, channels * read),
    }


@dataclass(frozen=True)
class Interleaved:
    """``channels`` first-come-first-served channels with addresses interleaved in
    blocks of :data:`INTERLEAVE_BYTES`.

    Attributes:
        channels: How many.
        read_bytes_per_cycle: Each channel's reads' bandwidth.
        write_bytes_per_cycle: Each channel's writes' bandwidth.
        latency_cycles: Cycles from the end of a transfer to its data being usable.
        capacity_bytes: What all the channels hold.
        slice_bytes: The most one reservation of a background stream books (0: no
            limit).
    """

    name: ClassVar[str] = "interleaved"
    code: ClassVar[int] = CODE

    channels: int
    read_bytes_per_cycle: float
    write_bytes_per_cycle: float
    latency_cycles: int
    capacity_bytes: int
    slice_bytes: int = 0

    @classmethod
    def of(cls, spec: DramSpec) -> Interleaved:
        """The memory ``spec`` describes."""
        return cls(**channels_of(spec))

    def bound(self, n_bytes: Amount, write: bool = False) -> Amount:
        bandwidth = self.write_bytes_per_cycle if write else self.read_bytes_per_cycle
        cycles: Amount = n_bytes / (self.channels * bandwidth)
        return cycles

    def params(self) -> tuple[float, ...]:
        return (
            self.read_bytes_per_cycle,
            self.write_bytes_per_cycle,
            float(self.channels),
            float(INTERLEAVE_BYTES),
        )

    def initial_state(self) -> tuple[int, ...]:
        return (0,) * (1 + self.channels)

    def channel_free(self, state: Sequence[int]) -> tuple[int, ...]:
        return tuple(state[1 : 1 + self.channels])

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
        bandwidth = params[p + 1] if write else params[p]
        count, block = int(params[p + 2]), int(params[p + 3])
        blocks = (n_bytes + block - 1) // block
        each = blocks // count
        more = blocks - each * count  # the first `more` channels from the cursor get one more
        last = (blocks - 1) % count  # the channel (from the cursor) of the last, short block
        short = blocks * block - n_bytes
        cursor = state[s]
        end = now
        for j in range(count):
            share = (each + (1 if j < more else 0)) * block - (short if j == last else 0)
            if share > 0:
                c = s + 1 + (cursor + j) % count
                free_at = state[c] if state[c] > now else now
                state[c] = free_at + math.ceil(share / bandwidth)
                if state[c] > end:
                    end = state[c]
        state[s] = (cursor + blocks) % count
        return end
