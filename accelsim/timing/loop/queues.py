"""The compiled event loop's queues: the event queue, popping events in the order of
SimPy's event queue, by ``(cycle, key)``, and each unit's store of ready ops, ordered
by ``(priority, op id)`` (:class:`~accelsim.timing.loop.records.Queue`,
:class:`~accelsim.timing.loop.records.Stores`).

A key is the priority shifted by
:data:`~accelsim.timing.loop.records.PRIORITY_SHIFT` plus a sequence number that
grows with every push.  The event queue is one of two structures, chosen per run
by the unit count (:data:`~accelsim.timing.loop.records.HEAP_UNITS`): a binary heap
by ``(cycle, key)`` for a step of few units, whose pending events (about two a
unit) make it shallow, and otherwise a radix heap (Ahuja, Mehlhorn, Orlin and
Tarjan, 1990), whose pop costs no more as more events are pending, where the heap
walks about log2 of them (docs/performance.md, "Event engines and scaling").

The radix heap has sixteen-way digits over the events' cycles, which never go
back, as nested timing wheels: a pending event is in the bucket ``(level, digit)``
of the highest four-bit digit in which its cycle differs from the current cycle
(the last popped), ``digit`` being its own digit there, or in the current cycle's
list.  Buckets ordered by ``(level, digit)`` hold ever later cycles, a level-0
bucket a single cycle, and a bit per bucket says which are not empty.  A pop
takes the current list's first event; when that list is empty, the first bucket
that is not becomes the current list if it holds one cycle (a level-0 bucket, or
one event), or else its smallest cycle becomes the current one and its events are
spread, in order, over the lower levels, all empty.  An event moves only to lower
levels, at most once per digit of its delay.  A pushed event, unless urgent, waits
in a staged list until the next pop files it, so that the loop inlines the filing
once, not at each of its pushes.  The order is the heap's exactly: a cycle's
events keep their push order (key order within a priority) through every move, as
they always share a list and a list is moved in order into empty ones; the urgent
events (a unit's or a process's start) are always queued at the current cycle and
wait in a list of their own, popped first.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from accelsim.timing.loop import records
from accelsim.timing.numba_setup import inline, leading_zeros, trailing_zeros


@inline
def _heap_push(queue: Any, size: int, time: int, key: int, kind: int, arg: int) -> None:
    """Push an event on the binary heap of ``size`` events."""
    h_time, h_key, h_kind, h_arg = queue.time, queue.key, queue.kind, queue.arg
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        if h_time[parent] < time or (h_time[parent] == time and h_key[parent] < key):
            break
        h_time[i] = h_time[parent]
        h_key[i] = h_key[parent]
        h_kind[i] = h_kind[parent]
        h_arg[i] = h_arg[parent]
        i = parent
    h_time[i] = time
    h_key[i] = key
    h_kind[i] = kind
    h_arg[i] = arg


@inline
def _heap_pop(queue: Any, size: int) -> None:
    """Remove the binary heap's first event (read it at index 0 before); ``size``
    counts it."""
    h_time, h_key, h_kind, h_arg = queue.time, queue.key, queue.kind, queue.arg
    size -= 1
    time, key, kind, arg = h_time[size], h_key[size], h_kind[size], h_arg[size]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        right = child + 1
        if right < size and (
            h_time[right] < h_time[child]
            or (h_time[right] == h_time[child] and h_key[right] < h_key[child])
        ):
            child = right
        if h_time[child] > time or (h_time[child] == time and h_key[child] > key):
            break
        h_time[i] = h_time[child]
        h_key[i] = h_key[child]
        h_kind[i] = h_kind[child]
        h_arg[i] = h_arg[child]
        i = child
    h_time[i] = time
    h_key[i] = key
    h_kind[i] = kind
    h_arg[i] = arg


@inline
def _bucket(time: int, now: int) -> int:
    """The bucket of an event at cycle ``time`` later than the current cycle ``now``:
    ``level * DIGITS + digit`` of the highest digit in which they differ."""
    level = (63 - int(leading_zeros(time ^ now))) // records.DIGIT_BITS
    digit = (time >> (level * records.DIGIT_BITS)) & (records.DIGITS - 1)
    return int(level * records.DIGITS + digit)


@inline
def _append(queue: Any, b: int, node: int) -> None:
    """Append event ``node`` to list ``b`` (a bucket, the current or urgent list)."""
    head, tail = queue.head, queue.tail
    queue.next[node] = -1
    if head[b] < 0:
        head[b] = node
    else:
        queue.next[tail[b]] = node
    tail[b] = node


@inline
def _file(queue: Any, node: int, time: int, now: int) -> None:
    """Put event ``node`` at cycle ``time`` in its list, after a pop at ``now``."""
    if time == now:
        _append(queue, records.CURRENT_LIST, node)
    else:
        b = _bucket(time, now)
        _append(queue, b, node)
        queue.state[records.Q_MASK + (b >> 6)] |= np.int64(1) << (b & 63)


@inline
def push(queue: Any, size: int, time: int, key: int, kind: int, arg: int) -> int:
    """Queue an event on the queue of ``size`` events; returns the new size."""
    if size >= queue.free.shape[0]:  # the caller's bound is wrong: never write past it
        raise RuntimeError("event queue overflow")
    if queue.state[records.Q_HEAP]:
        _heap_push(queue, size, time, key, kind, arg)
        return size + 1
    node = queue.free[size]
    queue.time[node] = time
    queue.kind[node] = kind
    queue.arg[node] = arg
    urgent = key < records.NORMAL << records.PRIORITY_SHIFT  # always at the current cycle
    _append(queue, records.URGENT_LIST if urgent else records.STAGED_LIST, node)
    return size + 1


@inline
def _file_staged(queue: Any) -> None:
    """File the radix heap's staged events, in order."""
    head, nxt, times = queue.head, queue.next, queue.time
    now = queue.state[records.Q_NOW]
    node = head[records.STAGED_LIST]
    head[records.STAGED_LIST] = -1
    while node >= 0:
        following = nxt[node]
        if times[node] < now:  # a radix heap keeps in order only events not earlier
            raise RuntimeError("event queued before the current cycle")
        _file(queue, node, times[node], now)
        node = following


@inline
def _advance(queue: Any) -> None:
    """The current list is empty: make the first bucket that is not, or its smallest
    cycle, the current one (spreading that bucket over the lower levels)."""
    head, nxt, times, state = queue.head, queue.next, queue.time, queue.state
    w = records.Q_MASK
    while state[w] == 0:
        w += 1
    b = (w - records.Q_MASK) * 64 + int(trailing_zeros(state[w]))
    state[w] &= ~(np.int64(1) << (b & 63))
    node = head[b]
    head[b] = -1
    if b < records.DIGITS or node == queue.tail[b]:  # one cycle: the current list
        state[records.Q_NOW] = times[node]
        head[records.CURRENT_LIST] = node
        queue.tail[records.CURRENT_LIST] = queue.tail[b]
        return
    now = times[node]
    first = node
    while node >= 0:
        now = min(now, times[node])
        node = nxt[node]
    state[records.Q_NOW] = now
    node = first
    while node >= 0:
        following = nxt[node]
        _file(queue, node, times[node], now)
        node = following


@inline
def pop(queue: Any, size: int) -> tuple[int, int, int, int]:
    """Remove the queue's first event; returns the new size and the event's
    ``(cycle, kind, arg)``."""
    if queue.state[records.Q_HEAP]:
        time, kind, arg = queue.time[0], queue.kind[0], queue.arg[0]
        _heap_pop(queue, size)
        return size - 1, time, kind, arg
    head = queue.head
    if head[records.STAGED_LIST] >= 0:
        _file_staged(queue)
    b = records.URGENT_LIST
    if head[b] < 0:
        b = records.CURRENT_LIST
        if head[b] < 0:
            _advance(queue)
    node = head[b]
    head[b] = queue.next[node]
    size -= 1
    queue.free[size] = node
    return size, queue.time[node], queue.kind[node], queue.arg[node]


@inline
def _store_push(
    s_prio: np.ndarray, s_op: np.ndarray, base: int, size: int, prio: int, op: int
) -> None:
    """Push ``(prio, op)`` on the store heap at ``base`` holding ``size`` items."""
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        p = base + parent
        if s_prio[p] < prio or (s_prio[p] == prio and s_op[p] < op):
            break
        s_prio[base + i] = s_prio[p]
        s_op[base + i] = s_op[p]
        i = parent
    s_prio[base + i] = prio
    s_op[base + i] = op


@inline
def store_pop(stores: Any, st: int) -> int:
    """Remove and return the op with the smallest ``(prio, op)`` of store ``st``."""
    s_prio, s_op, base, size = stores.prio, stores.op, stores.base[st], stores.size[st]
    first = s_op[base]
    size -= 1
    prio, op = s_prio[base + size], s_op[base + size]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        c, r = base + child, base + child + 1
        if child + 1 < size and (
            s_prio[r] < s_prio[c] or (s_prio[r] == s_prio[c] and s_op[r] < s_op[c])
        ):
            child += 1
            c = r
        if s_prio[c] > prio or (s_prio[c] == prio and s_op[c] > op):
            break
        s_prio[base + i] = s_prio[c]
        s_op[base + i] = s_op[c]
        i = child
    s_prio[base + i] = prio
    s_op[base + i] = op
    stores.size[st] = size
    return int(first)


@inline
def put(op: int, ops: Any, stores: Any) -> int:
    """Put the ready unit op ``op`` in its unit's store; returns the store."""
    st = ops.store[op]
    _store_push(stores.prio, stores.op, stores.base[st], stores.size[st], ops.priority[op], op)
    stores.size[st] += 1
    return int(st)
