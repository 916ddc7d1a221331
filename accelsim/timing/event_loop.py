"""The compiled engine's event loop, in Numba (``cache=True``).

It replays, over flat op arrays, exactly the events that the SimPy engine
(:mod:`accelsim.timing.engine`) processes, in the same order: a binary heap
ordered like SimPy's event queue, by ``(cycle, priority, sequence)`` where
process starts are urgent (priority 0) and everything else normal (1), and the
sequence number counts scheduled events.  Each SimPy process is a small state
machine:

* a unit (one per processor and array or vector unit) takes the ready op with
  the smallest ``(priority, op id)`` from its store when its get is served (at
  the get, or when a later put is processed), then runs the prologue, the
  ``chunks`` tile groups (fetch ahead, compute, drain behind) and waits for
  its drains to arrive (an ``all_of`` is one more event after the last drain);
* a transfer reserves its source's link and finishes when the data arrives;
* an all-reduce runs its DRAM read, ``2(P - 1)`` ring steps and DRAM write,
  each a reservation on every participant's channel, one event to the last
  arrival and a join event.

A channel reservation starts at ``max(now, free_at)``, holds the channel for
``ceil(bytes / bandwidth)`` cycles and arrives ``latency`` cycles later
(:class:`accelsim.timing.channel.Channel`).  Events that change nothing (a
transfer's or all-reduce's process ending) are counted but not queued.
"""

from __future__ import annotations

import math

import numpy as np

from accelsim.errors import MAX_COUNT
from accelsim.timing.flat import KIND_TRANSFER, KIND_UNIT
from accelsim.timing.numba_setup import njit

# Event kinds.
INIT_UNIT, PUT, GET, WAKE, FETCH, DRAIN, INIT_PROC, PROC = range(8)
# Unit phases.
IDLE, GOT, AFTER_PROLOGUE, AFTER_COMPUTE, WAIT_FETCH, WAIT_DRAINS = range(6)
URGENT, NORMAL = 0, 1
PRIORITY_SHIFT = 62
# Status codes.
OK, OVER_LIMIT = 0, 1


@njit(cache=True)
def _push(
    h_time: np.ndarray,
    h_key: np.ndarray,
    h_kind: np.ndarray,
    h_arg: np.ndarray,
    size: int,
    time: int,
    key: int,
    kind: int,
    arg: int,
) -> int:
    """Push an event on the heap of ``size`` entries; returns the new size."""
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


@njit(cache=True)
def _pop(
    h_time: np.ndarray, h_key: np.ndarray, h_kind: np.ndarray, h_arg: np.ndarray, size: int
) -> int:
    """Remove the heap's first event (read it at index 0 before); returns the new size."""
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


@njit(cache=True)
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


@njit(cache=True)
def _store_pop(s_prio: np.ndarray, s_op: np.ndarray, base: int, size: int) -> int:
    """Remove and return the op with the smallest ``(prio, op)`` of a store heap."""
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
    return int(first)


@njit(cache=True)
def _reserve(free_at: np.ndarray, channel: int, now: int, n_bytes: int, bandwidth: float) -> int:
    """Hold ``channel`` for ``n_bytes`` after what it already carries; returns the end."""
    start = max(now, free_at[channel])
    free_at[channel] = start + math.ceil(n_bytes / bandwidth)
    return int(free_at[channel])


@njit(cache=True)
def _part(total: int, parts: int, j: int) -> int:
    """The ``j``-th of ``parts`` near-equal integer parts of ``total``."""
    q = total // parts
    return q + (1 if j < total - q * parts else 0)


@njit(cache=True)
def run_events(
    kind: np.ndarray,
    store: np.ndarray,
    processor: np.ndarray,
    priority: np.ndarray,
    chunks: np.ndarray,
    compute: np.ndarray,
    reads: np.ndarray,
    writes: np.ndarray,
    prologue_bytes: np.ndarray,
    epilogue_bytes: np.ndarray,
    link_bytes: np.ndarray,
    part_ptr: np.ndarray,
    part_idx: np.ndarray,
    succ_ptr: np.ndarray,
    succ_idx: np.ndarray,
    waiting: np.ndarray,
    store_base: np.ndarray,
    n_stores: int,
    dram_channel: np.ndarray,
    n_dram: int,
    n_links: int,
    dram_bandwidth: float,
    dram_write_bandwidth: float,
    dram_latency: int,
    link_bandwidth: float,
    link_latency: int,
    heap_capacity: int,
) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Run every op; returns ``(start, end, events, status)`` (cycles -1 if never run).

    The arrays are those of :class:`accelsim.timing.flat.FlatStep` (``processor``
    is its ``where``; ``waiting``, its ``deps``, is modified).  ``status`` is
    :data:`OVER_LIMIT` if an op ended after :data:`~accelsim.errors.MAX_COUNT`
    cycles (the loop stops there).
    """
    n_ops = kind.shape[0]
    start = np.full(n_ops, -1, np.int64)
    end = np.full(n_ops, -1, np.int64)
    h_time = np.empty(heap_capacity, np.int64)
    h_key = np.empty(heap_capacity, np.int64)
    h_kind = np.empty(heap_capacity, np.int64)
    h_arg = np.empty(heap_capacity, np.int64)
    s_prio = np.empty(max(n_ops, 1), np.int64)
    s_op = np.empty(max(n_ops, 1), np.int64)
    s_size = np.zeros(n_stores, np.int64)
    dram_free = np.zeros(n_dram, np.int64)
    link_free = np.zeros(n_links, np.int64)
    # Unit state.
    phase = np.full(n_stores, IDLE, np.int64)
    current = np.full(n_stores, -1, np.int64)
    chunk = np.zeros(n_stores, np.int64)
    fetch_pending = np.zeros(n_stores, np.int64)
    drains = np.zeros(n_stores, np.int64)
    outstanding = np.zeros(n_stores, np.int64)
    rest = np.zeros(n_stores, np.int64)
    behind = np.zeros(n_stores, np.int64)
    epilogue = np.zeros(n_stores, np.int64)
    # All-reduce stage.
    stage = np.zeros(n_ops, np.int64)
    seq = 0
    size = 0
    events = 0
    status = OK
    for s in range(n_stores):
        size = _push(h_time, h_key, h_kind, h_arg, size, 0, seq, INIT_UNIT, s)
        seq += 1
    # The dispatch list: ops whose dependencies are all done, in order.
    ready = np.empty(max(n_ops, 1), np.int64)
    n_ready = 0
    for i in range(n_ops):
        if waiting[i] == 0:
            ready[n_ready] = i
            n_ready += 1
    now = 0
    normal = NORMAL << PRIORITY_SHIFT
    asks = -1  # the unit whose op just finished: it asks its store for the next op
    while True:
        # Dispatch what became ready, in order (a put or a process start each).
        for r in range(n_ready):
            op = ready[r]
            if kind[op] == KIND_UNIT:
                st = store[op]
                _store_push(s_prio, s_op, store_base[st], s_size[st], priority[op], op)
                s_size[st] += 1
                size = _push(h_time, h_key, h_kind, h_arg, size, now, normal + seq, PUT, st)
            else:
                size = _push(h_time, h_key, h_kind, h_arg, size, now, seq, INIT_PROC, op)
            seq += 1
        n_ready = 0
        if asks >= 0:  # after the puts of its successors, as in SimPy
            phase[asks] = IDLE
            if s_size[asks] > 0:
                current[asks] = _store_pop(s_prio, s_op, store_base[asks], s_size[asks])
                s_size[asks] -= 1
                size = _push(h_time, h_key, h_kind, h_arg, size, now, normal + seq, GET, asks)
                seq += 1
                phase[asks] = GOT
            asks = -1
        if size == 0:
            break
        now = h_time[0]
        ev_kind = h_kind[0]
        arg = h_arg[0]
        size = _pop(h_time, h_key, h_kind, h_arg, size)
        events += 1
        finished = -1
        if ev_kind in (INIT_UNIT, PUT):
            st = arg
            if phase[st] == IDLE and s_size[st] > 0:
                current[st] = _store_pop(s_prio, s_op, store_base[st], s_size[st])
                s_size[st] -= 1
                size = _push(h_time, h_key, h_kind, h_arg, size, now, normal + seq, GET, st)
                seq += 1
                phase[st] = GOT
        elif ev_kind == INIT_PROC:
            op = arg
            start[op] = now
            if kind[op] == KIND_TRANSFER:
                t = _reserve(link_free, processor[op], now, link_bytes[op], link_bandwidth)
                t += link_latency
            else:
                t = 0
                for k in range(part_ptr[op], part_ptr[op + 1]):
                    a = _reserve(
                        dram_free, dram_channel[part_idx[k]], now, link_bytes[op], dram_bandwidth
                    )
                    t = max(t, a + dram_latency)
            size = _push(h_time, h_key, h_kind, h_arg, size, t, normal + seq, PROC, op)
            seq += 1
        elif ev_kind == PROC:
            op = arg
            if kind[op] == KIND_TRANSFER:
                finished = op
                events += 1  # the process ends
            elif stage[op] % 2 == 0:  # the last arrival: join
                stage[op] += 1
                size = _push(h_time, h_key, h_kind, h_arg, size, now, normal + seq, PROC, op)
                seq += 1
            else:
                procs = part_ptr[op + 1] - part_ptr[op]
                steps = 2 * (procs - 1)
                nxt = (stage[op] + 1) // 2
                stage[op] += 1
                if nxt > steps + 1:
                    finished = op
                    events += 1
                else:
                    t = 0
                    for k in range(part_ptr[op], part_ptr[op + 1]):
                        p = part_idx[k]
                        if nxt <= steps:
                            per = (link_bytes[op] + procs - 1) // procs
                            a = _reserve(link_free, p, now, per, link_bandwidth) + link_latency
                        else:
                            a = _reserve(
                                dram_free,
                                dram_channel[p],
                                now,
                                link_bytes[op],
                                dram_write_bandwidth,
                            )
                            a += dram_latency
                        t = max(t, a)
                    size = _push(h_time, h_key, h_kind, h_arg, size, t, normal + seq, PROC, op)
                    seq += 1
        else:
            st = arg
            op = current[st]
            ch = dram_channel[processor[op]] if op >= 0 else 0
            begin_chunk = False
            next_chunk = False
            if ev_kind == GET:
                start[op] = now
                n_chunks = chunks[op]
                rd = reads[op]
                first = rd if n_chunks == 1 else min(rd, prologue_bytes[op])
                epilogue[st] = min(writes[op], epilogue_bytes[op])
                rest[st] = rd - first
                behind[st] = writes[op] - epilogue[st]
                drains[st] = 0
                outstanding[st] = 0
                chunk[st] = 0
                if first:
                    t = _reserve(dram_free, ch, now, first, dram_bandwidth) + dram_latency
                    size = _push(h_time, h_key, h_kind, h_arg, size, t, normal + seq, WAKE, st)
                    seq += 1
                    phase[st] = AFTER_PROLOGUE
                else:
                    begin_chunk = True
            elif ev_kind == FETCH:
                fetch_pending[st] = 0
                if phase[st] == WAIT_FETCH:
                    next_chunk = True
            elif ev_kind == DRAIN:
                outstanding[st] -= 1
                if phase[st] == WAIT_DRAINS and outstanding[st] == 0:
                    size = _push(h_time, h_key, h_kind, h_arg, size, now, normal + seq, WAKE, st)
                    seq += 1
            elif phase[st] == AFTER_PROLOGUE:
                begin_chunk = True
            elif phase[st] == AFTER_COMPUTE:
                n_chunks = chunks[op]
                drain = _part(behind[st], n_chunks, chunk[st])
                if drain:
                    t = _reserve(dram_free, ch, now, drain, dram_write_bandwidth) + dram_latency
                    size = _push(h_time, h_key, h_kind, h_arg, size, t, normal + seq, DRAIN, st)
                    seq += 1
                    drains[st] += 1
                    outstanding[st] += 1
                if fetch_pending[st]:
                    phase[st] = WAIT_FETCH
                else:
                    next_chunk = True
            else:  # WAIT_DRAINS: the all_of fired
                finished = op
            if next_chunk:
                chunk[st] += 1
                if chunk[st] < chunks[op]:
                    begin_chunk = True
                else:
                    if epilogue[st]:
                        t = _reserve(dram_free, ch, now, epilogue[st], dram_write_bandwidth)
                        t += dram_latency
                        size = _push(h_time, h_key, h_kind, h_arg, size, t, normal + seq, DRAIN, st)
                        seq += 1
                        drains[st] += 1
                        outstanding[st] += 1
                    if drains[st]:
                        phase[st] = WAIT_DRAINS
                        if outstanding[st] == 0:
                            size = _push(
                                h_time, h_key, h_kind, h_arg, size, now, normal + seq, WAKE, st
                            )
                            seq += 1
                    else:
                        finished = op
            if begin_chunk:
                n_chunks = chunks[op]
                j = chunk[st]
                fetch = _part(rest[st], n_chunks - 1, j) if j + 1 < n_chunks else 0
                if fetch:
                    t = _reserve(dram_free, ch, now, fetch, dram_bandwidth) + dram_latency
                    size = _push(h_time, h_key, h_kind, h_arg, size, t, normal + seq, FETCH, st)
                    seq += 1
                fetch_pending[st] = 1 if fetch else 0
                t = now + _part(compute[op], n_chunks, j)
                size = _push(h_time, h_key, h_kind, h_arg, size, t, normal + seq, WAKE, st)
                seq += 1
                phase[st] = AFTER_COMPUTE
        if finished >= 0:
            if now > MAX_COUNT:
                status = OVER_LIMIT
                break
            end[finished] = now
            for k in range(succ_ptr[finished], succ_ptr[finished + 1]):
                nxt_op = succ_idx[k]
                waiting[nxt_op] -= 1
                if waiting[nxt_op] == 0:
                    ready[n_ready] = nxt_op
                    n_ready += 1
            if kind[finished] == KIND_UNIT:
                asks = store[finished]
    return start, end, events, status
