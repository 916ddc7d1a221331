"""``dram.model: row_buffer``: interleaved channels, each with one open row.

A DRAM channel reads and writes through a row buffer: the row (page) last opened
serves any bytes it holds at the channel's bandwidth; bytes of another row first
close it and open theirs (precharge and activate), which holds the channel.
:class:`RowBuffer` is ``dram.channels`` first-come-first-served channels (one or
more), each with one open row of ``dram.row_bytes``, over which a transfer is dealt
out exactly as by :class:`~accelsim.timing.memories.interleaved.Interleaved`: blocks
of :data:`~accelsim.timing.memories.interleaved.INTERLEAVE_BYTES` in turn from the
channel after the one that took the memory's previous block.

**Where a transfer's bytes fall** (the engines know sizes, not addresses; this is
our convention).  Each stream class and direction (a read or a write) is taken as
one sequential run of addresses per channel: a channel's share of a transfer
continues where that channel's last share left its open row when the two are of the
same stream class and direction, and opens a new row at its start otherwise.  So a
channel's position in its open row advances by the bytes it serves of the same
stream and direction, and a share pays one miss for each row it opens:

* one when it is of another stream class or direction than the channel's last share
  (or the channel's first), and
* one for each row boundary it crosses (a share of ``b`` bytes starting ``p`` bytes
  into its row crosses ``(p + b - 1) // row_bytes`` of them; a row used up to its
  last byte stays open, so the next share of the stream opens the next row).

A share of ``b`` bytes with ``k`` misses holds its channel
``k * miss_cycles + ceil(b / bandwidth)`` cycles (the miss first, after what the
channel already carries), and the transfer arrives when its last share has, plus
the latency.  Two streams alternating on a channel therefore miss at every switch,
as two streams in one bank thrash its row buffer; banks, refresh and a tensor's real
layout are not modelled.  Its bound is the bytes over all channels' bandwidth (no
misses: a bound whatever the streams), its capacity all channels'; with ``priority``
arbitration a background slice is
:data:`~accelsim.timing.memory.SLICE_CYCLES` of all channels' bandwidth.

Parameters ``(read bandwidth, write bandwidth, channels, block bytes, row bytes,
miss cycles)``; state ``(cursor, then per channel: free_at, open row's stream,
position)``, the open row's stream being ``2 * stream class + write`` (-1 before
the first share) and the position the bytes used of the open row (1 to
``row_bytes``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from accelsim.config.dram import DramSpec, RowBufferDramSpec
from accelsim.timing.memories.interleaved import Interleaved, channels_of
from accelsim.timing.memory import Params, State

CODE = 2
"""The code by which the compiled engine dispatches to this model."""


@dataclass(frozen=True)
class RowBuffer(Interleaved):
    """The channels of :class:`~accelsim.timing.memories.interleaved.Interleaved`
    (its attributes, bound and capacity), each with one open row of ``row_bytes`` that
    a miss of ``miss_cycles`` opens.

    Attributes:
        row_bytes: Bytes of one row.
        miss_cycles: Cycles a channel is held to open a row.
    """

    name: ClassVar[str] = "row_buffer"
    code: ClassVar[int] = CODE

    row_bytes: int = field(kw_only=True)
    miss_cycles: int = field(kw_only=True)

    @classmethod
    def of(cls, spec: DramSpec) -> RowBuffer:
        """The memory ``spec`` (a :class:`~accelsim.config.dram.RowBufferDramSpec`)
        describes."""
        assert isinstance(spec, RowBufferDramSpec)
        return cls(**channels_of(spec), row_bytes=spec.row_bytes, miss_cycles=spec.miss_cycles)

    def params(self) -> tuple[float, ...]:
        return (*super().params(), float(self.row_bytes), float(self.miss_cycles))

    def initial_state(self) -> tuple[int, ...]:
        return (0, *(0, -1, 0) * self.channels)

    def channel_free(self, state: Sequence[int]) -> tuple[int, ...]:
        return tuple(state[1 : 1 + 3 * self.channels : 3])

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
        row, miss = int(params[p + 4]), int(params[p + 5])
        opened = 2 * stream + (1 if write else 0)
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
                c = s + 1 + 3 * ((cursor + j) % count)
                position = state[c + 2]
                misses = 0
                if state[c + 1] != opened:  # another stream or direction: a new row
                    misses, position = 1, 0
                misses += (position + share - 1) // row  # the row boundaries it crosses
                free_at = state[c] if state[c] > now else now
                state[c] = free_at + misses * miss + math.ceil(share / bandwidth)
                state[c + 1] = opened
                state[c + 2] = (position + share - 1) % row + 1
                if state[c] > end:
                    end = state[c]
        state[s] = (cursor + blocks) % count
        return end
