"""The compiled event loop's transfers: a unit's DRAM transfers (whole, or a slice at
a time when its memory books the stream so), a point-to-point transfer on the links
of its route, and a collective's stages.

A DRAM transfer is booked on its memory through
:func:`accelsim.timing.memories.compiled.reserve` (the memory's model's kernel) and
arrives the memory's latency after it has left it.  A link is a
first-come-first-served channel, as :class:`~accelsim.timing.memories.fifo.Fifo`
books it: a reservation starts at ``max(now, free)`` and holds the link
``ceil(bytes / bandwidth)`` cycles; a step's sends
(:class:`~accelsim.timing.sends.SendTable`) are booked together and each arrives
its transfer's route latency after its link is done.
"""

from __future__ import annotations

import math
from typing import Any

from accelsim.timing import flat
from accelsim.timing.loop import records
from accelsim.timing.loop.queues import push
from accelsim.timing.memories.compiled import reserve
from accelsim.timing.numba_setup import inline


@inline
def send(s: int, now: int, net: Any, links: Any) -> int:
    """Book the sends of step ``s`` on their links, each after what its link already
    carries; returns the last arrival (``now`` if it sends nothing).

    A step of a link class whose links are all free by the same cycle is booked
    once for the class, any other send by send, as
    :class:`accelsim.timing.links.Links` books them."""
    free, bandwidth, class_free, other = links.free, links.bandwidth, links.class_free, links.other
    c = net.step_class[s]
    if c >= 0:
        start = max(now, class_free[c])
        if other[c] <= start:
            e = net.step_ptr[s]
            done = start + math.ceil(net.bytes[e] / bandwidth[net.link[e]])
            class_free[c] = done
            row = free.shape[0] + c  # the classes sharing a link with c
            for j in range(net.class_ptr[row], net.class_ptr[row + 1]):
                near = net.classes[j]
                other[near] = max(other[near], done)
            return int(done + net.latency[e])
    t = now
    for e in range(net.step_ptr[s], net.step_ptr[s + 1]):
        k = net.link[e]
        was = free[k]
        for j in range(net.class_ptr[k], net.class_ptr[k + 1]):
            was = max(was, class_free[net.classes[j]])
        done = max(now, was) + math.ceil(net.bytes[e] / bandwidth[k])
        free[k] = done
        for j in range(net.class_ptr[k], net.class_ptr[k + 1]):
            c = net.classes[j]
            other[c] = max(other[c], done)
        t = max(t, done + net.latency[e])
    return int(t)


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
    """Start a transfer (its one step of sends) or a collective (its DRAM read on
    every participant's memory); returns the last arrival, when its process goes on."""
    net = ops.net
    if ops.kind[op] == flat.KIND_TRANSFER:
        return send(net.steps[net.op_ptr[op]], now, net, links)
    t = now
    stream = ops.read_stream[op]
    for k in range(ops.part_ptr[op], ops.part_ptr[op + 1]):
        if ops.part_read[k]:
            m = dram.table.memory_of[ops.part_idx[k]]
            a = reserve(dram, m, now, ops.part_read[k], stream, False) + dram.table.latency[m]
            t = max(t, a)
    return t


@inline
def process_step(op: int, now: int, ops: Any, stage: Any, dram: Any, links: Any) -> int:
    """Advance a transfer or a collective on its event; returns the cycle of its next
    event, :data:`~accelsim.timing.loop.records.ENDED` when its process ends now (the
    op is finished) or :data:`~accelsim.timing.loop.records.START_ITEMS` when its
    pipelined items start now (:func:`start_items`).

    A collective alternates an arrival (odd ``stage``) and its join (even, a
    zero-delay event): after each join it books its next phase, each of its steps
    of sends on the links in turn (a pipelined one's items, whose last one's end is
    its next event), then the DRAM write on its participants' memories.
    """
    if ops.kind[op] == flat.KIND_TRANSFER:
        return records.ENDED
    stage[op] += 1
    if stage[op] % 2 == 1:  # the last arrival: join
        return now
    net = ops.net
    first = net.op_ptr[op]
    steps = net.op_ptr[op + 1] - first
    items = net.item_ptr[op] < net.item_ptr[op + 1]
    if items:  # its items run as one phase, which ends with an event, not a join
        steps = 1
    phase = stage[op] // 2
    if phase > steps + 1:
        return records.ENDED
    if phase <= steps:
        if items:
            stage[op] += 1
            return records.START_ITEMS
        return send(net.steps[first + phase - 1], now, net, links)
    t = now
    stream = ops.write_stream[op]
    for k in range(ops.part_ptr[op], ops.part_ptr[op + 1]):
        if ops.part_write[k]:
            m = dram.table.memory_of[ops.part_idx[k]]
            a = reserve(dram, m, now, ops.part_write[k], stream, True) + dram.table.latency[m]
            t = max(t, a)
    return t


@inline
def _send_item(
    k: int, step: int, now: int, net: Any, links: Any, queue: Any, size: int, seq: int
) -> tuple[int, int]:
    """Book step ``step`` of item ``k`` and queue its arrival; the queue's size and the
    sequence number."""
    t = send(net.steps[net.item_first[k] + step], now, net, links)
    size = push(queue, size, t, (records.NORMAL << records.PRIORITY_SHIFT) + seq, records.ITEM, k)
    return size, seq + 1


@inline
def start_items(
    op: int, now: int, ops: Any, links: Any, queue: Any, size: int, seq: int
) -> tuple[int, int]:
    """Start the items of pipelined collective ``op`` that wait for none, in order;
    the queue's size and the sequence number."""
    net = ops.net
    for k in range(net.item_ptr[op], net.item_ptr[op + 1]):
        if net.item_waits[k] == 0:
            size, seq = _send_item(k, 0, now, net, links, queue, size, seq)
    return size, seq


@inline
def item_event(
    k: int, now: int, ops: Any, items: Any, links: Any, queue: Any, size: int, seq: int
) -> tuple[int, int]:
    """Advance item ``k`` on its event, as :class:`accelsim.timing.engine._Pipeline`
    does: an arrival queues its join; a join books the item's next step or, after
    its last, starts the items now free of waiting, in order, and, after the op's
    last item, queues the op's next event.  The queue's size and the sequence number."""
    net = ops.net
    normal = records.NORMAL << records.PRIORITY_SHIFT
    items.stage[k] += 1
    if items.stage[k] % 2 == 1:
        return push(queue, size, now, normal + seq, records.ITEM, k), seq + 1
    step = items.stage[k] // 2
    if step < net.item_count[k]:
        return _send_item(k, step, now, net, links, queue, size, seq)
    op = net.item_op[k]
    items.left[op] -= 1
    for e in range(net.item_succ_ptr[k], net.item_succ_ptr[k + 1]):
        j = net.item_succ[e]
        items.waiting[j] -= 1
        if items.waiting[j] == 0:
            size, seq = _send_item(j, 0, now, net, links, queue, size, seq)
    if items.left[op] == 0:
        size = push(queue, size, now, normal + seq, records.PROC, op)
        seq += 1
    return size, seq
