"""The compiled event loop's records, each a named tuple of one-dimensional arrays (one
per field, as the loop was fastest with them), besides the flat step it reads
(:class:`accelsim.timing.flat.FlatStep`, its memories in
:class:`~accelsim.timing.flat.MemoryTable`): what it keeps, which it allocates itself
(:class:`Dram`'s state, :class:`Links`, :class:`Queue`, :class:`Stores`,
:class:`Chains`, :class:`Progress`, :class:`Items`, the units'
:class:`accelsim.timing.loop.units.Units`);
how large some of them are (:func:`capacities`); and the codes the loop's pieces
share.

The loop's pieces read each other's constants as attributes of this module
(``records.SLICE``), so that the loop's disk cache covers it
(:func:`accelsim.timing.numba_setup.compiled_from`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from accelsim.timing.flat import FlatStep, MemoryTable

# Event kinds.
INIT_UNIT, PUT, GET, WAKE, FETCH, DRAIN, INIT_PROC, PROC, SLICE, ITEM = range(10)
# What a transfer's or collective's step asks besides an event's cycle.
ENDED, START_ITEMS = -1, -2
URGENT, NORMAL = 0, 1
PRIORITY_SHIFT = 62
# The event queue (:mod:`accelsim.timing.loop.queues`): a binary heap for a step of
# fewer than HEAP_UNITS units, else a radix heap, whose lists are a bucket per digit
# (DIGIT_BITS bits) and level of a cycle, then the current cycle's, the urgent
# events' and the staged events'.
HEAP_UNITS = 32
DIGIT_BITS = 4
DIGITS = 1 << DIGIT_BITS
CURRENT_LIST = DIGITS * 64 // DIGIT_BITS
URGENT_LIST, STAGED_LIST = CURRENT_LIST + 1, CURRENT_LIST + 2
# The event queue's state: the current cycle, whether it is the binary heap, then a
# bit per bucket not empty (in CURRENT_LIST // 64 words).
Q_NOW, Q_HEAP, Q_MASK = range(3)
Q_STATE = Q_MASK + CURRENT_LIST // 64
# Status codes.
OK, OVER_LIMIT = 0, 1
# Columns of a sliced transfer's state: one row per transfer in flight.
C_LEFT, C_MEMORY, C_EVENT, C_UNIT, C_STREAM = range(5)
CHAIN_COLUMNS = 5


class Dram(NamedTuple):
    """The memories as the loop books them
    (:func:`accelsim.timing.memories.compiled.reserve`): the step's table, the state the
    loop changes (a copy of the table's idle state) and the code of the model every
    memory is of (a compile-time constant of the loop), or
    :data:`~accelsim.timing.memories.compiled.MIXED`."""

    table: MemoryTable
    state: np.ndarray
    model: int


class Links(NamedTuple):
    """Each link of the network: the cycle booked on it send by send, and its
    bandwidth; each link class (:class:`~accelsim.timing.sends.SendTable`): the
    cycle booked on all its links at once, and the largest anything else booked on
    one of them (:mod:`accelsim.timing.links`)."""

    free: np.ndarray
    bandwidth: np.ndarray
    class_free: np.ndarray
    other: np.ndarray


class Queue(NamedTuple):
    """The event queue (:mod:`accelsim.timing.loop.queues`).  As a binary heap
    (``state[Q_HEAP]``), its first ``size`` entries of ``time``, ``key``, ``kind``
    and ``arg`` by ``(time, key)``.  As a radix heap, each event's cycle, kind,
    argument and the next event of its list; each list's first and last event (-1:
    empty): the buckets', then :data:`CURRENT_LIST`, :data:`URGENT_LIST` and
    :data:`STAGED_LIST`; its state (``Q_*``: the current cycle, a bit per bucket
    not empty); and the free events, ``free[size:]`` for a queue of ``size``."""

    time: np.ndarray
    key: np.ndarray
    kind: np.ndarray
    arg: np.ndarray
    next: np.ndarray
    head: np.ndarray
    tail: np.ndarray
    state: np.ndarray
    free: np.ndarray


class Stores(NamedTuple):
    """Each unit's store of ready ops, a heap by ``(priority, op)`` starting at
    ``base[store]`` in ``prio`` and ``op``, holding ``size[store]`` ops."""

    prio: np.ndarray
    op: np.ndarray
    size: np.ndarray
    base: np.ndarray


class Chains(NamedTuple):
    """Sliced transfers in flight (a row of ``C_*`` columns each) and the free rows:
    ``free[0]`` counts those listed after it."""

    rows: np.ndarray
    free: np.ndarray


class Progress(NamedTuple):
    """Each op's start and end (-1 until then), dependencies left, collective stage,
    and the ops ready to dispatch."""

    start: np.ndarray
    end: np.ndarray
    waiting: np.ndarray
    stage: np.ndarray
    ready: np.ndarray


class Items(NamedTuple):
    """Each item of a pipelined collective (:class:`~accelsim.timing.sends.SendTable`):
    its stage (an arrival, odd, or a join, even, per step), the items it still waits
    for, and each op's items not yet done."""

    stage: np.ndarray
    waiting: np.ndarray
    left: np.ndarray


def capacities(flat: FlatStep) -> tuple[int, int]:
    """How many events the loop's queue holds (every event that can be pending at
    once: two per op, one per pipelined collective's item, per unit that runs ops
    its tile groups' and a few more, and per unit that runs none its start alone)
    and how many sliced transfers can be in flight (one per unit's fetch and
    drains, when a memory slices).

    A step simulated on representatives leaves every other processor's units
    without ops: at one event each, they do not grow the queue by the chunks of
    the largest op."""
    max_chunks = int(flat.chunks.max(initial=1))
    busy = int(np.unique(flat.store[flat.store >= 0]).size)
    idle = flat.n_stores - busy
    events = 2 * len(flat.kind) + len(flat.net.item_op) + busy * (max_chunks + 4) + idle + 16
    return events, busy * (max_chunks + 2) if flat.dram.sliced else 0
