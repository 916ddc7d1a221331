"""The compiled event loop's transfers: a unit's DRAM transfers (whole, or a slice at
a time when its memory books the stream so), a point-to-point transfer on its
source's link, and an all-reduce's stages.

A DRAM transfer is booked on its memory through
:func:`accelsim.timing.memories.compiled.reserve` (the memory's model's kernel) and
arrives the memory's latency after it has left it.  A link is a
first-come-first-served channel, as :class:`~accelsim.timing.memories.fifo.Fifo`
books it: a reservation starts at ``max(now, free)``, holds the link
``ceil(bytes / bandwidth)`` cycles and arrives the link's latency later.
"""

from __future__ import annotations

import math
from typing import Any

from accelsim.timing import flat
from accelsim.timing.loop import records
from accelsim.timing.memories.compiled import reserve
from accelsim.timing.numba_setup import inline


@inline
def link_reserve(links: Any, p: int, now: int, n_bytes: int) -> int:
    """Hold processor ``p``'s link for ``n_bytes`` after what it already carries; returns
    the cycle they arrive."""
    free = links.free
    free[p] = max(now, free[p]) + math.ceil(n_bytes / links.bandwidth)
    return int(free[p] + links.latency)


@inline
def book(
    unit: int,
    event: int,
    m: int,
    now: int,
    n_bytes: int,
    stream: int,
    background: bool,
    dram: Any,
    chains: Any,
) -> tuple[int, int, int]:
    """Book a unit's DRAM transfer of ``n_bytes`` of stream class ``stream`` (a write
    when ``event`` is a DRAIN; of a background stream, with ``background``) on memory
    ``m``; returns the event to queue, ``(cycle, kind, arg)``: the unit's ``event`` when
    the data arrives, or, when the memory books this background stream a slice at a
    time, a SLICE event when the first slice has left the memory (the transfer's state
    in a free row of ``chains``)."""
    part = n_bytes
    limit = dram.table.slice_bytes[m]
    if background and 0 < limit < n_bytes:
        part = limit
    leaves = reserve(dram, m, now, part, stream, event == records.DRAIN)
    if part == n_bytes:
        return leaves + dram.table.latency[m], event, unit
    rows, free = chains
    row = free[free[0]]
    free[0] -= 1
    rows[row, records.C_LEFT] = n_bytes - part
    rows[row, records.C_MEMORY] = m
    rows[row, records.C_EVENT] = event
    rows[row, records.C_UNIT] = unit
    rows[row, records.C_STREAM] = stream
    return leaves, records.SLICE, row


@inline
def book_slice(row: int, now: int, dram: Any, chains: Any) -> tuple[int, int, int]:
    """The previous slice of sliced transfer ``row`` has left its memory: book the
    next; returns the event to queue, as :func:`book` (the unit's event when this
    was the last slice, which frees the row)."""
    rows, free = chains
    m, event = rows[row, records.C_MEMORY], rows[row, records.C_EVENT]
    part = min(rows[row, records.C_LEFT], dram.table.slice_bytes[m])
    written = event == records.DRAIN  # a drain's slices are writes
    leaves = reserve(dram, m, now, part, rows[row, records.C_STREAM], written)
    rows[row, records.C_LEFT] -= part
    if rows[row, records.C_LEFT] > 0:
        return leaves, records.SLICE, row
    free[0] += 1
    free[free[0]] = row
    return leaves + dram.table.latency[m], event, rows[row, records.C_UNIT]


@inline
def process_start(op: int, now: int, ops: Any, dram: Any, links: Any) -> int:
    """Start a transfer (its link reservation, or on a topology its route's cycles) or
    an all-reduce (its DRAM read on every participant's memory); returns the last
    arrival, when its process goes on."""
    size = ops.link_bytes[op]
    if ops.kind[op] == flat.KIND_TRANSFER:
        if ops.network_cycles[op] >= 0:  # along its route on a topology, no link booked
            return int(now + ops.network_cycles[op])
        return link_reserve(links, ops.where[op], now, size)
    t = 0
    stream = ops.read_stream[op]
    for k in range(ops.part_ptr[op], ops.part_ptr[op + 1]):
        m = dram.table.memory_of[ops.part_idx[k]]
        t = max(t, reserve(dram, m, now, size, stream, False) + dram.table.latency[m])
    return t


@inline
def process_step(op: int, now: int, ops: Any, stage: Any, dram: Any, links: Any) -> int:
    """Advance a transfer or an all-reduce on its event; returns the cycle of its next
    event, or -1 when its process ends now (the op is finished).

    An all-reduce alternates an arrival (odd ``stage``) and its join (even, a
    zero-delay event): after each join it reserves its next phase, ``2(P - 1)``
    ring steps on the participants' links (on a topology other than a ring, one
    phase of its ``network_cycles``, no link booked), then the DRAM write on their
    memories.
    """
    if ops.kind[op] == flat.KIND_TRANSFER:
        return -1
    stage[op] += 1
    if stage[op] % 2 == 1:  # the last arrival: join
        return now
    first, last = ops.part_ptr[op], ops.part_ptr[op + 1]
    network = ops.network_cycles[op]
    steps = 2 * (last - first - 1) if network < 0 else 1
    phase = stage[op] // 2
    if phase > steps + 1:
        return -1
    if phase <= steps and network >= 0:  # a topology's all-reduce: its schedule's time
        return int(now + network)
    size = ops.link_bytes[op]
    t = 0
    for k in range(first, last):
        p = ops.part_idx[k]
        if phase <= steps:
            a = link_reserve(links, p, now, (size + last - first - 1) // (last - first))
        else:
            m = dram.table.memory_of[p]
            a = reserve(dram, m, now, size, ops.write_stream[op], True) + dram.table.latency[m]
        t = max(t, a)
    return t
