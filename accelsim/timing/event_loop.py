"""The compiled engine's event loop, in Numba (``cache=True``).

It replays, over flat op arrays, exactly the events that the SimPy engine
(:mod:`accelsim.timing.engine`) processes, in the same order: a binary heap
ordered like SimPy's event queue, by ``(cycle, priority, sequence)`` where
process starts are urgent (priority 0) and everything else normal (1), and the
sequence number counts scheduled events.  Each SimPy process is a small state
machine:

* a unit (one per processor and array or vector unit) takes the ready op with
  the smallest ``(priority, op id)`` from its store when its get is served (at
  the get, or when a later put is processed), then waits out its fixed cost
  (a WAKE, when it has one), runs the prologue, the
  ``chunks`` tile groups (fetch ahead, compute, drain behind) and waits for
  its drains to arrive (an ``all_of`` is one more event after the last drain);
* a transfer reserves its source's link and finishes when the data arrives;
* an all-reduce runs its DRAM read, ``2(P - 1)`` ring steps and DRAM write,
  each a reservation on every participant's channel, one event to the last
  arrival and a join event;
* a transfer that its memory books a slice at a time (a background stream under
  ``priority`` arbitration) is a SLICE event when each slice has left the
  memory, where the next is booked, and the unit's event when the last arrives
  (:class:`accelsim.timing.channel.SlicedTransfer`).

DRAM is the :class:`~accelsim.timing.memory.Memory` of each processor described as
arrays (:class:`~accelsim.timing.memory.MemoryLayout`: channels, and how a memory
of several cuts its transfers over them).  A channel reservation starts at
``max(now, free_at)``, holds the channel for ``ceil(bytes / bandwidth)`` cycles
and arrives ``latency`` cycles later, as :class:`~accelsim.timing.memory.FifoMemory`
books it; links are such channels too.  Events that change nothing (a
transfer's or all-reduce's process ending) are counted but not queued.

:func:`run_events` pops events, dispatches ready ops and queues what its
helpers ask for; each helper does one of the things above: the event heap
(:func:`_push`, :func:`_pop`), the units' stores (:func:`_put`, :func:`_take`),
the unit state machine (:func:`_unit_step`: it says what the unit asks for, DRAM
transfers and wake-ups, in the order the SimPy process asks), the memory and
channel reservations (:func:`_dram_reserve`, :func:`_reserve`; a unit's, slice
by slice when its memory says so: :func:`_book`, :func:`_book_slice`), the
transfers' and all-reduces' stages (:func:`_process_start`, :func:`_process_step`) and the
release of an op's successors (:func:`_release`).

The loop and its helpers use NumPy's error model (``error_model="numpy"``): an
integer division or remainder is not checked for a zero divisor, which the
Python model raises on and which cannot happen here (every divisor is a
channel count, block size, bandwidth or participant count the specs keep
positive).  Without the checks LLVM optimises the loop further: 1.36 to 1.43
times the events per second on the ResNet-18, BERT-base and PipeDream steps of
``scripts/bench.py --engines``, with every result unchanged.

The helpers are as fast as the single loop they were split from (paired runs,
README "Event engines and scaling") because of three choices, each measured:
they are compiled into the loop (``forceinline``: LLVM inlines every call) and
without Numba's reference counting (``_nrt=False``: they only index the loop's
arrays, never allocate or keep one; with counting, every call paid atomic
operations on each array argument, twice as slow); and the arrays stay
one-dimensional per field, as the loop had them (a ``(n, 4)`` event heap was
12 % slower, a ``(ops, 11)`` op table 8 %).  The loop is cached with
:func:`~accelsim.timing.numba_setup.cached`, keyed by every module it is compiled
from, so it reads other modules' constants as module attributes (``flat.KIND_UNIT``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from accelsim import errors
from accelsim.timing import flat
from accelsim.timing.numba_setup import cached, njit

# Event kinds.
INIT_UNIT, PUT, GET, WAKE, FETCH, DRAIN, INIT_PROC, PROC, SLICE = range(9)
# Unit phases.
IDLE, GOT, LAUNCHING, AFTER_PROLOGUE, AFTER_COMPUTE, WAIT_FETCH, WAIT_DRAINS = range(7)
URGENT, NORMAL = 0, 1
PRIORITY_SHIFT = 62
# Status codes.
OK, OVER_LIMIT = 0, 1
# Columns of the unit state: one row per unit (store).
(
    U_PHASE,
    U_CURRENT,
    U_CHUNK,
    U_FETCH_PENDING,
    U_DRAINS,
    U_OUTSTANDING,
    U_REST,
    U_BEHIND,
    U_EPILOGUE,
) = range(9)
UNIT_COLUMNS = 9
# What a unit asks for (a row of :func:`_unit_step`'s requests): ``(ASK_DRAM, bytes,
# event)`` is a DRAM transfer whose event fires when it arrives, ``(ASK_AT, cycle,
# event)`` an event at that cycle.  A step asks for at most three things.
ASK_DRAM, ASK_AT = 0, 1
MAX_ASKS = 3
# Columns of a sliced transfer's state (:func:`_book`): one row per transfer in flight.
C_LEFT, C_MEMORY, C_EVENT, C_UNIT = range(4)
BACKGROUND = 1  # accelsim.timing.memory.BACKGROUND

_F = TypeVar("_F", bound=Callable[..., Any])
# ``_nrt`` is Numba's switch for its reference counting (``NRT``); it is not in
# Numba's type stubs, hence the dictionary.  The error model: see the module docstring.
_HELPER_OPTIONS: dict[str, Any] = {"_nrt": False, "error_model": "numpy"}


def _helper(function: _F) -> _F:
    """Compile one of the loop's helpers: inlined into the loop, without reference
    counting (see the module docstring)."""
    compiled: _F = njit(cache=True, forceinline=True, **_HELPER_OPTIONS)(function)
    return compiled


# -- the event heap and the units' stores --------------------------------------------------


@_helper
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


@_helper
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


@_helper
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


@_helper
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


@_helper
def _put(
    op: int,
    store: np.ndarray,
    priority: np.ndarray,
    s_prio: np.ndarray,
    s_op: np.ndarray,
    s_size: np.ndarray,
    store_base: np.ndarray,
) -> int:
    """Put the ready unit op ``op`` in its unit's store; returns the store."""
    st = store[op]
    _store_push(s_prio, s_op, store_base[st], s_size[st], priority[op], op)
    s_size[st] += 1
    return int(st)


@_helper
def _take(
    st: int,
    units: np.ndarray,
    s_prio: np.ndarray,
    s_op: np.ndarray,
    s_size: np.ndarray,
    store_base: np.ndarray,
) -> bool:
    """Serve unit ``st``'s get if it is idle and its store holds an op: the store's
    first op becomes its op.  Returns whether it was served (a GET event follows)."""
    if units[st, U_PHASE] != IDLE or s_size[st] == 0:
        return False
    units[st, U_CURRENT] = _store_pop(s_prio, s_op, store_base[st], s_size[st])
    s_size[st] -= 1
    units[st, U_PHASE] = GOT
    return True


# -- channel reservations ------------------------------------------------------------------


@_helper
def _reserve(free_at: np.ndarray, channel: int, now: int, n_bytes: int, bandwidth: float) -> int:
    """Hold ``channel`` for ``n_bytes`` after what it already carries; returns the end."""
    start = max(now, free_at[channel])
    free_at[channel] = start + math.ceil(n_bytes / bandwidth)
    return int(free_at[channel])


@_helper
def _dram_reserve(
    m: int,
    now: int,
    n_bytes: int,
    channel_ptr: np.ndarray,
    channel_bandwidth: np.ndarray,
    channel_free: np.ndarray,
    block_bytes: np.ndarray,
    cursor: np.ndarray,
) -> int:
    """Book ``n_bytes`` on DRAM memory ``m`` (:class:`accelsim.timing.memory.MemoryLayout`)
    at cycle ``now``; returns the cycle they have left it (they arrive a latency later).

    A memory of one channel books them there.  Over several channels they are cut
    into blocks of ``block_bytes[m]`` (the last one short), dealt out in turn from
    the channel after the one that took the memory's previous last block
    (``cursor[m]``), and each channel books its share.
    """
    first = channel_ptr[m]
    count = channel_ptr[m + 1] - first
    if count == 1:
        return _reserve(channel_free, first, now, n_bytes, channel_bandwidth[first])
    block = block_bytes[m]
    blocks = (n_bytes + block - 1) // block
    each = blocks // count
    more = blocks - each * count  # the first `more` channels from the cursor get one more
    last = (blocks - 1) % count  # the channel (from the cursor) of the last, short block
    short = blocks * block - n_bytes
    k = cursor[m]
    end = now
    for j in range(count):
        share = (each + (1 if j < more else 0)) * block - (short if j == last else 0)
        if share > 0:
            c = first + (k + j) % count
            end = max(end, _reserve(channel_free, c, now, share, channel_bandwidth[c]))
    cursor[m] = (k + blocks) % count
    return end


@_helper
def _part(total: int, parts: int, j: int) -> int:
    """The ``j``-th of ``parts`` near-equal integer parts of ``total``."""
    q = total // parts
    return q + (1 if j < total - q * parts else 0)


@_helper
def _book(
    unit: int,
    event: int,
    m: int,
    now: int,
    n_bytes: int,
    background: bool,
    slice_bytes: np.ndarray,
    chains: np.ndarray,
    free_chains: np.ndarray,
    channel_ptr: np.ndarray,
    channel_bandwidth: np.ndarray,
    channel_free: np.ndarray,
    block_bytes: np.ndarray,
    cursor: np.ndarray,
    dram_latency: int,
) -> tuple[int, int, int]:
    """Book a unit's DRAM transfer of ``n_bytes`` on memory ``m``; returns the event to
    queue, ``(cycle, kind, arg)``: the unit's ``event`` when the data arrives, or,
    when the memory books this background stream a slice at a time, a SLICE event
    when the first slice has left the memory (the transfer's state in a free row
    of ``chains``; ``free_chains[0]`` counts the free rows listed after it)."""
    part = n_bytes
    if background and 0 < slice_bytes[m] < n_bytes:
        part = slice_bytes[m]
    leaves = _dram_reserve(
        m, now, part, channel_ptr, channel_bandwidth, channel_free, block_bytes, cursor
    )
    if part == n_bytes:
        return leaves + dram_latency, event, unit
    row = free_chains[free_chains[0]]
    free_chains[0] -= 1
    chains[row, C_LEFT] = n_bytes - part
    chains[row, C_MEMORY] = m
    chains[row, C_EVENT] = event
    chains[row, C_UNIT] = unit
    return leaves, SLICE, row


@_helper
def _book_slice(
    row: int,
    now: int,
    slice_bytes: np.ndarray,
    chains: np.ndarray,
    free_chains: np.ndarray,
    channel_ptr: np.ndarray,
    channel_bandwidth: np.ndarray,
    channel_free: np.ndarray,
    block_bytes: np.ndarray,
    cursor: np.ndarray,
    dram_latency: int,
) -> tuple[int, int, int]:
    """The previous slice of sliced transfer ``row`` has left its memory: book the
    next; returns the event to queue, as :func:`_book` (the unit's event when this
    was the last slice, which frees the row)."""
    m = chains[row, C_MEMORY]
    part = min(chains[row, C_LEFT], slice_bytes[m])
    leaves = _dram_reserve(
        m, now, part, channel_ptr, channel_bandwidth, channel_free, block_bytes, cursor
    )
    chains[row, C_LEFT] -= part
    if chains[row, C_LEFT] > 0:
        return leaves, SLICE, row
    free_chains[0] += 1
    free_chains[free_chains[0]] = row
    return leaves + dram_latency, chains[row, C_EVENT], chains[row, C_UNIT]


# -- the unit state machine ----------------------------------------------------------------


@_helper
def _ask(asks: np.ndarray, n: int, what: int, value: int, event: int) -> int:
    """Write request ``n`` (``what``, ``value``, ``event``); returns ``n + 1``."""
    asks[n, 0] = what
    asks[n, 1] = value
    asks[n, 2] = event
    return n + 1


@_helper
def _unit_step(
    ev_kind: int,
    st: int,
    now: int,
    chunks: np.ndarray,
    compute: np.ndarray,
    overhead: np.ndarray,
    reads: np.ndarray,
    writes: np.ndarray,
    prologue_bytes: np.ndarray,
    epilogue_bytes: np.ndarray,
    units: np.ndarray,
    start: np.ndarray,
    asks: np.ndarray,
) -> tuple[int, int]:
    """Advance unit ``st`` on its event (GET, FETCH, DRAIN or WAKE).

    Returns ``(finished, n)``: its op if the op ended now (else -1), and how many
    requests it wrote in ``asks[:n]``, in the order the SimPy process makes them.
    """
    op = int(units[st, U_CURRENT])
    phase = units[st, U_PHASE]
    n = 0
    begin = False  # begin tile group U_CHUNK
    after = False  # a tile group is done: go on to the next
    if ev_kind == GET:
        start[op] = now
        if overhead[op]:  # its fixed cost first
            units[st, U_PHASE] = LAUNCHING
            return -1, _ask(asks, n, ASK_AT, now + overhead[op], WAKE)
    if ev_kind == GET or phase == LAUNCHING:  # launched: the prologue
        first = reads[op] if chunks[op] == 1 else min(reads[op], prologue_bytes[op])
        units[st, U_EPILOGUE] = min(writes[op], epilogue_bytes[op])
        units[st, U_REST] = reads[op] - first
        units[st, U_BEHIND] = writes[op] - units[st, U_EPILOGUE]
        units[st, U_DRAINS] = 0
        units[st, U_OUTSTANDING] = 0
        units[st, U_CHUNK] = 0
        if first:
            n = _ask(asks, n, ASK_DRAM, first, WAKE)
            units[st, U_PHASE] = AFTER_PROLOGUE
        else:
            begin = True
    elif ev_kind == FETCH:
        units[st, U_FETCH_PENDING] = 0
        after = phase == WAIT_FETCH
    elif ev_kind == DRAIN:
        units[st, U_OUTSTANDING] -= 1
        if phase == WAIT_DRAINS and units[st, U_OUTSTANDING] == 0:  # the all_of fires
            n = _ask(asks, n, ASK_AT, now, WAKE)
    elif phase == AFTER_PROLOGUE:
        begin = True
    elif phase == AFTER_COMPUTE:
        drain = _part(units[st, U_BEHIND], chunks[op], units[st, U_CHUNK])
        if drain:
            n = _ask(asks, n, ASK_DRAM, drain, DRAIN)
            units[st, U_DRAINS] += 1
            units[st, U_OUTSTANDING] += 1
        if units[st, U_FETCH_PENDING]:
            units[st, U_PHASE] = WAIT_FETCH
        else:
            after = True
    else:  # WAIT_DRAINS: the all_of fired
        return op, n
    if after:
        units[st, U_CHUNK] += 1
        if units[st, U_CHUNK] < chunks[op]:
            begin = True
        else:
            epilogue = units[st, U_EPILOGUE]
            if epilogue:
                n = _ask(asks, n, ASK_DRAM, epilogue, DRAIN)
                units[st, U_DRAINS] += 1
                units[st, U_OUTSTANDING] += 1
            if units[st, U_DRAINS] == 0:
                return op, n
            units[st, U_PHASE] = WAIT_DRAINS
            if units[st, U_OUTSTANDING] == 0:  # every drain arrived already
                n = _ask(asks, n, ASK_AT, now, WAKE)
    if begin:  # fetch group j + 1 while group j computes
        j = units[st, U_CHUNK]
        fetch = _part(units[st, U_REST], chunks[op] - 1, j) if j + 1 < chunks[op] else 0
        if fetch:
            n = _ask(asks, n, ASK_DRAM, fetch, FETCH)
        units[st, U_FETCH_PENDING] = 1 if fetch else 0
        n = _ask(asks, n, ASK_AT, now + _part(compute[op] - overhead[op], chunks[op], j), WAKE)
        units[st, U_PHASE] = AFTER_COMPUTE
    return -1, n


# -- transfers and all-reduce stages -------------------------------------------------------


@_helper
def _process_start(
    op: int,
    now: int,
    kind: np.ndarray,
    processor: np.ndarray,
    link_bytes: np.ndarray,
    part_ptr: np.ndarray,
    part_idx: np.ndarray,
    memory_of: np.ndarray,
    channel_ptr: np.ndarray,
    channel_bandwidth: np.ndarray,
    channel_free: np.ndarray,
    block_bytes: np.ndarray,
    cursor: np.ndarray,
    dram_latency: int,
    link_free: np.ndarray,
    link_bandwidth: float,
    link_latency: int,
) -> int:
    """Start a transfer (its link reservation) or an all-reduce (its DRAM read on every
    participant's channel); returns the last arrival, when its process goes on."""
    size = link_bytes[op]
    if kind[op] == flat.KIND_TRANSFER:
        return _reserve(link_free, processor[op], now, size, link_bandwidth) + link_latency
    t = 0
    for k in range(part_ptr[op], part_ptr[op + 1]):
        a = _dram_reserve(
            memory_of[part_idx[k]], now, size, channel_ptr, channel_bandwidth, channel_free,
            block_bytes, cursor,
        )  # fmt: skip
        t = max(t, a + dram_latency)
    return t


@_helper
def _process_step(
    op: int,
    now: int,
    kind: np.ndarray,
    link_bytes: np.ndarray,
    stage: np.ndarray,
    part_ptr: np.ndarray,
    part_idx: np.ndarray,
    memory_of: np.ndarray,
    channel_ptr: np.ndarray,
    channel_bandwidth: np.ndarray,
    channel_write_bandwidth: np.ndarray,
    channel_free: np.ndarray,
    block_bytes: np.ndarray,
    cursor: np.ndarray,
    dram_latency: int,
    link_free: np.ndarray,
    link_bandwidth: float,
    link_latency: int,
) -> int:
    """Advance a transfer or an all-reduce on its event; returns the cycle of its next
    event, or -1 when its process ends now (the op is finished).

    An all-reduce alternates an arrival (odd ``stage``) and its join (even, a
    zero-delay event): after each join it reserves its next phase, ``2(P - 1)``
    ring steps on the participants' links, then the DRAM write on their channels.
    """
    if kind[op] == flat.KIND_TRANSFER:
        return -1
    stage[op] += 1
    if stage[op] % 2 == 1:  # the last arrival: join
        return now
    procs = part_ptr[op + 1] - part_ptr[op]
    steps = 2 * (procs - 1)
    phase = stage[op] // 2
    if phase > steps + 1:
        return -1
    size = link_bytes[op]
    t = 0
    for k in range(part_ptr[op], part_ptr[op + 1]):
        p = part_idx[k]
        if phase <= steps:
            per = (size + procs - 1) // procs
            a = _reserve(link_free, p, now, per, link_bandwidth) + link_latency
        else:
            a = _dram_reserve(
                memory_of[p], now, size, channel_ptr, channel_write_bandwidth, channel_free,
                block_bytes, cursor,
            )  # fmt: skip
            a += dram_latency
        t = max(t, a)
    return t


# -- the loop ------------------------------------------------------------------------------


@_helper
def _release(
    op: int,
    succ_ptr: np.ndarray,
    succ_idx: np.ndarray,
    waiting: np.ndarray,
    ready: np.ndarray,
    n_ready: int,
) -> int:
    """Count ``op`` done for its successors; those with nothing left to wait for join
    the ready list, in order.  Returns the list's new length."""
    for k in range(succ_ptr[op], succ_ptr[op + 1]):
        nxt = succ_idx[k]
        waiting[nxt] -= 1
        if waiting[nxt] == 0:
            ready[n_ready] = nxt
            n_ready += 1
    return n_ready


@cached(error_model="numpy")
def run_events(
    kind: np.ndarray,
    store: np.ndarray,
    processor: np.ndarray,
    priority: np.ndarray,
    chunks: np.ndarray,
    compute: np.ndarray,
    overhead: np.ndarray,
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
    read_stream: np.ndarray,
    write_stream: np.ndarray,
    stream_priority: np.ndarray,
    memory_of: np.ndarray,
    channel_ptr: np.ndarray,
    channel_bandwidth: np.ndarray,
    channel_write_bandwidth: np.ndarray,
    block_bytes: np.ndarray,
    slice_bytes: np.ndarray,
    dram_latency: int,
    n_links: int,
    link_bandwidth: float,
    link_latency: int,
    heap_capacity: int,
    chain_capacity: int,
) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Run every op; returns ``(start, end, events, status)`` (cycles -1 if never run).

    The arrays are those of :class:`accelsim.timing.flat.FlatStep` (``processor``
    is its ``where``; ``waiting``, its ``deps``, is modified), the DRAM those of its
    :class:`~accelsim.timing.memory.MemoryLayout`, ``stream_priority`` the priority
    of each stream class.  ``chain_capacity`` bounds the sliced transfers in
    flight (at most one per unit's fetch and drains).  ``status`` is
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
    channel_free = np.zeros(channel_bandwidth.shape[0], np.int64)
    cursor = np.zeros(block_bytes.shape[0], np.int64)  # a memory's next channel
    link_free = np.zeros(n_links, np.int64)
    units = np.zeros((n_stores, UNIT_COLUMNS), np.int64)
    units[:, U_PHASE] = IDLE
    units[:, U_CURRENT] = -1
    asks = np.zeros((MAX_ASKS, 3), np.int64)
    chains = np.zeros((max(chain_capacity, 1), 4), np.int64)
    free_chains = np.arange(max(chain_capacity, 1) + 1, dtype=np.int64) - 1
    free_chains[0] = max(chain_capacity, 1)
    stage = np.zeros(n_ops, np.int64)  # all-reduce stage
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
    # The unit that may take an op from its store now: one whose op just finished
    # (after the puts of that op's successors, as in SimPy) or whose store got a put.
    serve = -1
    while True:
        # Dispatch what became ready, in order (a put or a process start each).
        for r in range(n_ready):
            op = ready[r]
            if kind[op] == flat.KIND_UNIT:
                st = _put(op, store, priority, s_prio, s_op, s_size, store_base)
                size = _push(h_time, h_key, h_kind, h_arg, size, now, normal + seq, PUT, st)
            else:
                size = _push(h_time, h_key, h_kind, h_arg, size, now, seq, INIT_PROC, op)
            seq += 1
        n_ready = 0
        if serve >= 0 and _take(serve, units, s_prio, s_op, s_size, store_base):
            size = _push(h_time, h_key, h_kind, h_arg, size, now, normal + seq, GET, serve)
            seq += 1
        serve = -1
        if size == 0:
            break
        now, ev_kind, arg = h_time[0], h_kind[0], h_arg[0]
        size = _pop(h_time, h_key, h_kind, h_arg, size)
        events += 1
        finished = -1
        if ev_kind in (INIT_UNIT, PUT):
            serve = arg
        elif ev_kind == INIT_PROC:
            start[arg] = now
            t = _process_start(
                arg, now, kind, processor, link_bytes, part_ptr, part_idx, memory_of,
                channel_ptr, channel_bandwidth, channel_free, block_bytes, cursor, dram_latency,
                link_free, link_bandwidth, link_latency,
            )  # fmt: skip
            size = _push(h_time, h_key, h_kind, h_arg, size, t, normal + seq, PROC, arg)
            seq += 1
        elif ev_kind == PROC:
            t = _process_step(
                arg, now, kind, link_bytes, stage, part_ptr, part_idx, memory_of, channel_ptr,
                channel_bandwidth, channel_write_bandwidth, channel_free, block_bytes, cursor,
                dram_latency, link_free, link_bandwidth, link_latency,
            )  # fmt: skip
            if t >= 0:
                size = _push(h_time, h_key, h_kind, h_arg, size, t, normal + seq, PROC, arg)
                seq += 1
            else:
                finished = arg
                events += 1  # the process ends
        elif ev_kind == SLICE:
            written = chains[arg, C_EVENT] == DRAIN  # a drain's slices are writes
            t, event, target = _book_slice(
                arg, now, slice_bytes, chains, free_chains, channel_ptr,
                channel_write_bandwidth if written else channel_bandwidth,
                channel_free, block_bytes, cursor, dram_latency,
            )  # fmt: skip
            size = _push(h_time, h_key, h_kind, h_arg, size, t, normal + seq, event, target)
            seq += 1
        else:
            finished, n = _unit_step(
                ev_kind, arg, now, chunks, compute, overhead, reads, writes, prologue_bytes,
                epilogue_bytes, units, start, asks,
            )  # fmt: skip
            op = units[arg, U_CURRENT]
            m = memory_of[processor[op]]
            for a in range(n):  # what the unit asked for, in order
                t, event, target = asks[a, 1], asks[a, 2], arg
                if asks[a, 0] == ASK_DRAM:
                    stream = write_stream[op] if event == DRAIN else read_stream[op]
                    t, event, target = _book(
                        arg, event, m, now, t, stream_priority[stream] == BACKGROUND,
                        slice_bytes, chains, free_chains, channel_ptr,
                        channel_write_bandwidth if event == DRAIN else channel_bandwidth,
                        channel_free, block_bytes, cursor, dram_latency,
                    )  # fmt: skip
                size = _push(h_time, h_key, h_kind, h_arg, size, t, normal + seq, event, target)
                seq += 1
        if finished >= 0:
            if now > errors.MAX_COUNT:
                status = OVER_LIMIT
                break
            end[finished] = now
            n_ready = _release(finished, succ_ptr, succ_idx, waiting, ready, n_ready)
            if kind[finished] == flat.KIND_UNIT:
                serve = store[finished]
                units[serve, U_PHASE] = IDLE
    return start, end, events, status
