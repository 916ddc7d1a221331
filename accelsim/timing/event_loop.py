"""The compiled engine's event loop, in Numba, cached on disk.

It replays, over flat op arrays, exactly the events that the SimPy engine
(:mod:`accelsim.timing.engine`) processes, in the same order: an event queue
(:mod:`accelsim.timing.loop.queues`: a binary heap for a step of few units, a
radix heap for many) popping in the order of SimPy's event queue, by ``(cycle,
priority, sequence)`` where process starts are urgent (priority 0) and everything
else normal (1), and the sequence number counts scheduled events.  Each SimPy
process is a small state machine:

* a unit (one per processor and array or vector unit) takes the ready op with
  the smallest rank (``priority``, :mod:`accelsim.timing.ready`) from its store
  when its get is served (at the get, or when a later put is processed), then
  runs it
  (:mod:`accelsim.timing.loop.units`);
* a transfer reserves the links of its route and finishes when the data arrives;
* a collective runs its DRAM read, its steps of sends on the links
  (:class:`~accelsim.timing.sends.SendTable`) and its DRAM write, each phase one
  event to the last arrival and a join event; a pipelined one's chunks run as
  items (ITEM events, each step an arrival and a join), its write after the
  event the last item's end queues (:mod:`accelsim.timing.loop.transfers`);
* a transfer that its memory books a slice at a time (a background stream under
  ``priority`` arbitration) is a SLICE event when each slice has left the
  memory, where the next is booked, and the unit's event when the last arrives
  (:class:`accelsim.timing.channel.SlicedTransfer`).

DRAM is each processor's :class:`~accelsim.timing.memory.Memory` described as
arrays (:class:`~accelsim.timing.flat.MemoryTable`: each memory's model, its
parameters and its state), booked through its model's kernel
(:mod:`accelsim.timing.memories.compiled`): the loop is compiled once for each
model, which it takes as a literal argument (:func:`run` gives it), so that it books
with that model's kernel alone; links are first-come-first-served channels, a step
whose sends are all alike booked once for its links while they are free by the same
cycle (:mod:`accelsim.timing.links`).  Events
that change nothing (a transfer's or collective's process ending) are counted but
not queued.

:func:`run_events` pops events, dispatches ready ops and queues what its helpers
ask for, one helper per thing it does (the event queue and the units' stores,
:mod:`accelsim.timing.loop.queues`; the unit state machine; the transfers; the
dispatch of ready ops and the release of an op's successors).  It reads and keeps
named tuples of one-dimensional arrays (:mod:`accelsim.timing.loop.records`), not
long argument lists.

Two compile options leave out checks that Python's semantics add and the loop never
needs, every result unchanged.  It uses NumPy's error model
(``error_model="numpy"``): an integer division or remainder is not checked for a
zero divisor, which cannot happen here (every divisor is a channel count, block
size, bandwidth or participant count the specs keep positive): 1.36 to 1.43 times
the events per second.  And its arrays are indexed without the wraparound of a
negative index (``wraparound=False``, :func:`~accelsim.timing.numba_setup.cached`):
every index is an op, unit, memory, event, parameter or state slot, never negative,
while Numba otherwise puts a compare and a select before every load whose index it
cannot prove non-negative: 1.30 to 1.44 times the events per second (paired runs,
docs/performance.md "Event engines and scaling").

The helpers cost little against one function (paired, both compiled without
wraparound: 0.93 to 1.03 times the events per second of the single function over
two fixed memory models it replaced, docs/performance.md) because of four choices,
each measured: they are compiled into the loop and without Numba's reference counting
(:func:`~accelsim.timing.numba_setup.inline`); the arrays stay one-dimensional
per field, as the loop had them (a ``(n, 4)`` event heap was 12 % slower, a
``(ops, 11)`` op table 8 %), grouped in records that LLVM takes apart once the
helpers are inlined; the loop allocates every array it writes itself
(:func:`_allocate`, inlined), so LLVM knows that no two of them overlap (the same
arrays handed in by the caller were 10 % slower); and the loop's own body reads
only local arrays, never a record's field (each read of one costs a reference
count, three tenths of the loop's speed), leaving the records to the helpers.  The
loop is cached with :func:`~accelsim.timing.numba_setup.cached`, keyed by every
module it is compiled from, so its pieces read other modules' constants as module
attributes (``records.SLICE``, ``flat.KIND_UNIT``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from accelsim import errors
from accelsim.timing import flat, memory
from accelsim.timing.loop import records, units
from accelsim.timing.loop.queues import pop, push, put
from accelsim.timing.loop.transfers import (
    book,
    book_slice,
    item_event,
    process_start,
    process_step,
    start_items,
)
from accelsim.timing.memories import compiled as kernels
from accelsim.timing.numba_setup import cached, inline, njit


@njit(forceinline=True, error_model="numpy")
def _allocate(step: Any, queue_size: int, chains: int, model: int, heap: bool) -> Any:
    """The loop's state, fresh: the memories (their model ``model``) with a copy of
    their idle state, the links, the event queue (a binary heap if ``heap``, else a
    radix heap), the stores, the units, ``chains``
    rows for sliced transfers, each op's progress and each pipelined item's."""
    n_ops, n_stores, chains = step.kind.shape[0], step.n_stores, max(chains, 1)
    n_classes = step.net.class_ptr.shape[0] - 1 - step.link_bandwidth.shape[0]
    table = np.zeros((n_stores, units.UNIT_COLUMNS), np.int64)
    table[:, units.U_CURRENT] = -1
    free = np.arange(chains + 1) - 1
    free[0] = chains
    queue_state = np.zeros(records.Q_STATE, np.int64)
    queue_state[records.Q_HEAP] = heap
    return (
        records.Dram(step.dram, step.dram.state.copy(), model),
        records.Links(
            np.zeros(step.link_bandwidth.shape[0], np.int64), step.link_bandwidth,
            np.zeros(n_classes, np.int64), np.zeros(n_classes, np.int64),
        ),
        records.Queue(
            np.empty(queue_size, np.int64), np.empty(queue_size, np.int64),
            np.empty(queue_size, np.int64), np.empty(queue_size, np.int64),
            np.empty(queue_size, np.int64), np.full(records.STAGED_LIST + 1, -1, np.int64),
            np.full(records.STAGED_LIST + 1, -1, np.int64),
            queue_state, np.arange(queue_size),
        ),
        records.Stores(
            np.empty(max(n_ops, 1), np.int64), np.empty(max(n_ops, 1), np.int64),
            np.zeros(n_stores, np.int64), step.store_base,
        ),
        units.Units(table, np.zeros((units.MAX_ASKS, 3), np.int64)),
        records.Chains(np.zeros((chains, records.CHAIN_COLUMNS), np.int64), free),
        records.Progress(
            np.full(n_ops, -1, np.int64), np.full(n_ops, -1, np.int64), step.deps.copy(),
            np.zeros(n_ops, np.int64), np.empty(max(n_ops, 1), np.int64),
        ),
        records.Items(
            np.zeros(step.net.item_op.shape[0], np.int64), step.net.item_waits.copy(),
            step.net.item_ptr[1:] - step.net.item_ptr[:-1],
        ),
    )  # fmt: skip


@inline
def _release(op: int, ops: Any, progress: Any, n_ready: int) -> int:
    """Count ``op`` done for its successors; those with nothing left to wait for join
    the ready list, in order.  Returns the list's new length."""
    waiting, ready = progress.waiting, progress.ready
    for k in range(ops.succ_ptr[op], ops.succ_ptr[op + 1]):
        nxt = ops.succ_idx[k]
        waiting[nxt] -= 1
        if waiting[nxt] == 0:
            ready[n_ready] = nxt
            n_ready += 1
    return n_ready


@inline
def _dispatch(
    n_ready: int, now: int, size: int, seq: int, ops: Any, queue: Any, stores: Any, progress: Any
) -> tuple[int, int]:
    """Dispatch the ops that became ready, in order: a unit op is put in its unit's
    store (a PUT event), a transfer or collective starts its process (INIT_PROC).
    Returns the queue's size and the sequence number."""
    normal = records.NORMAL << records.PRIORITY_SHIFT
    for r in range(n_ready):
        op = progress.ready[r]
        if ops.kind[op] == flat.KIND_UNIT:
            size = push(queue, size, now, normal + seq, records.PUT, put(op, ops, stores))
        else:
            size = push(queue, size, now, seq, records.INIT_PROC, op)
        seq += 1
    return size, seq


@inline
def _asked(
    n: int,
    st: int,
    now: int,
    size: int,
    seq: int,
    ops: Any,
    dram: Any,
    unit: Any,
    queue: Any,
    chains: Any,
) -> tuple[int, int]:
    """Queue what unit ``st`` asked for (its first ``n`` requests), in order: a DRAM
    transfer booked on its op's processor's memory, or an event at a cycle.  Returns
    the queue's size and the sequence number."""
    op = unit.table[st, units.U_CURRENT]
    m = dram.table.memory_of[ops.where[op]]
    asks = unit.asks
    for a in range(n):
        t, event, target = asks[a, 1], asks[a, 2], st
        if asks[a, 0] == units.ASK_DRAM:
            written = event == records.DRAIN
            stream = ops.write_stream[op] if written else ops.read_stream[op]
            background = ops.stream_priority[stream] == memory.BACKGROUND
            t, event, target = book(st, event, m, now, t, stream, background, dram, chains)
        size = push(queue, size, t, (records.NORMAL << records.PRIORITY_SHIFT) + seq, event, target)
        seq += 1
    return size, seq


@inline
def _finished(op: int, ops: Any, unit: Any) -> int:
    """The unit whose op ``op`` just finished, now idle (it serves its store next), or
    -1 for a transfer or collective."""
    if ops.kind[op] != flat.KIND_UNIT:
        return -1
    st = ops.store[op]
    unit.table[st, units.U_PHASE] = units.IDLE
    return int(st)


@cached(error_model="numpy", wraparound=False)
def run_events(
    ops: Any, queue_size: int, chains: int, heap: bool, model: Any
) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Run every op of the flat step ``ops``; returns ``(start, end, events, status)``
    (cycles -1 if never run).

    ``queue_size`` and ``chains`` are its
    :func:`~accelsim.timing.loop.records.capacities`, ``heap`` whether its event
    queue is the binary heap or the radix heap (:mod:`accelsim.timing.loop.queues`;
    both pop the same order), ``model`` the
    :func:`~accelsim.timing.memories.compiled.model_of` its memories (a literal: a
    loop compiled for each).  ``status`` is
    :data:`~accelsim.timing.loop.records.OVER_LIMIT` if an op ended after
    :data:`~accelsim.errors.MAX_COUNT` cycles (the loop stops there).
    """
    state = _allocate(ops, queue_size, chains, model, heap)
    dram, links, queue, stores, unit, chain, progress, items = state
    start, end, stage = progress.start, progress.end, progress.stage
    ready, waiting = progress.ready, progress.waiting
    seq = size = events = n_ready = 0
    status = records.OK
    for s in range(ops.n_stores):
        size = push(queue, size, 0, seq, records.INIT_UNIT, s)
        seq += 1
    for i in ops.order:  # the dispatch list: ops with nothing to wait for, by rank
        if waiting[i] == 0:
            ready[n_ready] = i
            n_ready += 1
    now = 0
    normal = records.NORMAL << records.PRIORITY_SHIFT
    # The unit that may take an op from its store now: one whose op just finished
    # (after the puts of that op's successors, as in SimPy) or whose store got a put.
    serve = -1
    while True:
        size, seq = _dispatch(n_ready, now, size, seq, ops, queue, stores, progress)
        n_ready = 0
        if serve >= 0 and units.take(serve, unit, stores):
            size = push(queue, size, now, normal + seq, records.GET, serve)
            seq += 1
        serve = -1
        if size == 0:
            break
        size, now, ev_kind, arg = pop(queue, size)
        events += 1
        finished = -1
        if ev_kind == records.INIT_UNIT or ev_kind == records.PUT:
            serve = arg
        elif ev_kind == records.INIT_PROC:
            start[arg] = now
            t = process_start(arg, now, ops, dram, links)
            size = push(queue, size, t, normal + seq, records.PROC, arg)
            seq += 1
        elif ev_kind == records.PROC:
            t = process_step(arg, now, ops, stage, dram, links)
            if t >= 0:
                size = push(queue, size, t, normal + seq, records.PROC, arg)
                seq += 1
            elif t == records.START_ITEMS:
                size, seq = start_items(arg, now, ops, links, queue, size, seq)
            else:
                finished = arg
                events += 1  # the process ends
        elif ev_kind == records.ITEM:
            size, seq = item_event(arg, now, ops, items, links, queue, size, seq)
        elif ev_kind == records.SLICE:
            t, event, target = book_slice(arg, now, dram, chain)
            size = push(queue, size, t, normal + seq, event, target)
            seq += 1
        else:
            finished, n = units.step(ev_kind, arg, now, ops, unit, start)
            size, seq = _asked(n, arg, now, size, seq, ops, dram, unit, queue, chain)
        if finished >= 0:
            if now > errors.MAX_COUNT:
                status = records.OVER_LIMIT
                break
            end[finished] = now
            n_ready = _release(finished, ops, progress, n_ready)
            serve = _finished(finished, ops, unit)
    return start, end, events, status


def run(step: flat.FlatStep) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Run the ops of ``step``, its event queue a binary heap under
    :data:`~accelsim.timing.loop.records.HEAP_UNITS` units, else a radix heap;
    returns ``(start, end, events, status)``."""
    model = kernels.model_of(step.dram)
    heap = step.n_stores < records.HEAP_UNITS
    start, end, events, status = run_events(step, *records.capacities(step), heap, model)
    return start, end, int(events), int(status)
