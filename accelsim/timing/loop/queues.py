"""The compiled event loop's queues: the event heap, ordered like SimPy's event queue
by ``(cycle, key)``, and each unit's store of ready ops, ordered by ``(priority, op
id)`` (:class:`~accelsim.timing.loop.records.Heap`,
:class:`~accelsim.timing.loop.records.Stores`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from accelsim.timing.numba_setup import inline


@inline
def push(heap: Any, size: int, time: int, key: int, kind: int, arg: int) -> int:
    """Push an event on the heap of ``size`` entries; returns the new size."""
    h_time, h_key, h_kind, h_arg = heap
    if size >= h_time.shape[0]:  # the caller's bound is wrong: never write past the heap
        raise RuntimeError("event heap overflow")
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
    return size + 1


@inline
def pop(heap: Any, size: int) -> int:
    """Remove the heap's first event (read it at index 0 before); returns the new size."""
    h_time, h_key, h_kind, h_arg = heap
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
    return size


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
