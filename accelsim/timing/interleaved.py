"""A second DRAM model: ``N`` independent channels with addresses interleaved over them.

High-bandwidth memory splits a stack into independent channels (HBM2's
pseudo-channels, HBM3's 16 channels of two pseudo-channels each), each with its
own bus, and the memory controller spreads consecutive addresses over them so
one stream of traffic keeps them all busy.  ``dram.channels: N`` models a
processor's memory (or the one the processors share) that way:
:class:`InterleavedMemory` is ``N`` first-come-first-served channels, each of
``dram.bandwidth_bytes_per_cycle`` and ``dram.capacity_gib``, behind one
``dram.latency_cycles``.

**Interleaving.**  The engine knows a transfer's size, not its addresses, so a
transfer is taken as the next addresses after the memory's previous transfer:
its bytes are cut into blocks of :data:`INTERLEAVE_BYTES` (the last one short)
and dealt out to the channels in turn, starting at the channel after the one
that took the previous transfer's last block.  Each channel books its share as
a :class:`~accelsim.timing.memory.FifoMemory` would (after what it already
carries, ``ceil(share / bandwidth)`` cycles), and the transfer arrives when its
last share has, plus the latency.  A transfer of ``N`` blocks or more keeps every
channel busy; a smaller one uses only some, and the next one starts where it
stopped.  Per-address effects (row buffers, bank conflicts, a tensor's real
layout) are not modelled.

Its bound is the bytes over ``N`` times a channel's bandwidth, its capacity ``N``
times a channel's; with ``priority`` arbitration a background slice is
:data:`~accelsim.timing.memory.SLICE_CYCLES` of the whole memory's bandwidth.
The compiled engine runs the same arithmetic from :meth:`InterleavedMemory.channels`
(``event_loop._dram_reserve``).
"""

from __future__ import annotations

from accelsim.timing.memory import BACKGROUND, Amount, Channels, FifoMemory, Stream

INTERLEAVE_BYTES = 256
"""The interleaving granularity: 256 B blocks go to the channels in turn (a
common choice for HBM address maps, and a few DRAM bursts: large transfers
spread evenly, a tile's worth of bytes reaches every channel)."""


class InterleavedMemory:
    """``channels`` first-come-first-served channels with addresses interleaved in
    blocks of :data:`INTERLEAVE_BYTES`.

    Args:
        channels: How many (at least 2; one channel is a
            :class:`~accelsim.timing.memory.FifoMemory`).
        bytes_per_cycle: Each channel's bandwidth.
        latency_cycles: Cycles from the end of a transfer to its data being usable.
        capacity_bytes: Each channel's capacity.
        slice_bytes: The most one reservation of a background stream books (0: no
            limit).
        write_bytes_per_cycle: Each channel's writes' bandwidth (``None``:
            ``bytes_per_cycle``).
    """

    def __init__(
        self,
        channels: int,
        bytes_per_cycle: float,
        latency_cycles: int,
        capacity_bytes: int,
        slice_bytes: int = 0,
        write_bytes_per_cycle: float | None = None,
    ) -> None:
        if channels < 2:
            raise ValueError("an interleaved memory needs at least two channels")
        self.bytes_per_cycle = bytes_per_cycle
        self.write_bytes_per_cycle = (
            bytes_per_cycle if write_bytes_per_cycle is None else write_bytes_per_cycle
        )
        self.latency_cycles = latency_cycles
        self.capacity_bytes = channels * capacity_bytes
        self.slice_bytes = slice_bytes
        self.lanes = [
            FifoMemory(bytes_per_cycle, 0, write_bytes_per_cycle=self.write_bytes_per_cycle)
            for _ in range(channels)
        ]
        self.cursor = 0  # the channel that takes the next block

    def portion(self, n_bytes: int, stream: Stream) -> int:
        if self.slice_bytes and stream.priority == BACKGROUND:
            return min(n_bytes, self.slice_bytes)
        return n_bytes

    def shares(self, n_bytes: int) -> list[int]:
        """The bytes each channel gets of a transfer of ``n_bytes`` starting at the
        cursor (channel ``(cursor + j) % N`` gets ``shares[j]``)."""
        count = len(self.lanes)
        blocks = -(-n_bytes // INTERLEAVE_BYTES)
        each, more = divmod(blocks, count)
        last = (blocks - 1) % count  # who takes the last block, short by `short`
        short = blocks * INTERLEAVE_BYTES - n_bytes
        return [
            (each + (1 if j < more else 0)) * INTERLEAVE_BYTES - (short if j == last else 0)
            for j in range(count)
        ]

    def reserve(self, now: int, n_bytes: int, stream: Stream) -> int:
        lanes, count = self.lanes, len(self.lanes)
        end = now
        for j, share in enumerate(self.shares(n_bytes)):
            if share > 0:
                end = max(end, lanes[(self.cursor + j) % count].reserve(now, share, stream))
        self.cursor = (self.cursor + -(-n_bytes // INTERLEAVE_BYTES)) % count
        return end + self.latency_cycles

    def bound(self, n_bytes: Amount, write: bool = False) -> Amount:
        bandwidth = self.write_bytes_per_cycle if write else self.bytes_per_cycle
        cycles: Amount = n_bytes / (len(self.lanes) * bandwidth)
        return cycles

    def channels(self) -> Channels:
        count = len(self.lanes)
        return Channels(
            (self.bytes_per_cycle,) * count,
            INTERLEAVE_BYTES,
            self.slice_bytes,
            (self.write_bytes_per_cycle,) * count,
        )
