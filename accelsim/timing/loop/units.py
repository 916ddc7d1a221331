"""The compiled event loop's units: each SimPy unit process (one per processor and
array or vector unit) as a state machine.

A unit takes the ready op with the smallest ``(priority, op id)`` from its store when
its get is served (:func:`take`), then waits out the op's fixed cost (a WAKE, when it
has one), runs the prologue, the ``chunks`` tile groups (fetch ahead, compute, drain
behind) and waits for its drains to arrive (an ``all_of`` is one more event after
the last drain): :func:`step` advances it on each event and says what it asks for,
in the order the SimPy process asks.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from accelsim.timing.loop import records
from accelsim.timing.loop.queues import store_pop
from accelsim.timing.numba_setup import inline

# Unit phases.
IDLE, GOT, LAUNCHING, AFTER_PROLOGUE, AFTER_COMPUTE, WAIT_FETCH, WAIT_DRAINS = range(7)
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
# What a unit asks for (a row of :func:`step`'s requests): ``(ASK_DRAM, bytes,
# event)`` is a DRAM transfer whose event fires when it arrives, ``(ASK_AT, cycle,
# event)`` an event at that cycle.  A step asks for at most three things.
ASK_DRAM, ASK_AT = 0, 1
MAX_ASKS = 3


class Units(NamedTuple):
    """Each unit's state (a row of the ``U_*`` columns) and the requests its last step
    wrote."""

    table: np.ndarray
    asks: np.ndarray


@inline
def take(st: int, units: Any, stores: Any) -> bool:
    """Serve unit ``st``'s get if it is idle and its store holds an op: the store's
    first op becomes its op.  Returns whether it was served (a GET event follows)."""
    table = units.table
    if table[st, U_PHASE] != IDLE or stores.size[st] == 0:
        return False
    table[st, U_CURRENT] = store_pop(stores, st)
    table[st, U_PHASE] = GOT
    return True


@inline
def part(total: int, parts: int, j: int) -> int:
    """The ``j``-th of ``parts`` near-equal integer parts of ``total``."""
    q = total // parts
    return q + (1 if j < total - q * parts else 0)


@inline
def _ask(asks: np.ndarray, n: int, what: int, value: int, event: int) -> int:
    """Write request ``n`` (``what``, ``value``, ``event``); returns ``n + 1``."""
    asks[n, 0] = what
    asks[n, 1] = value
    asks[n, 2] = event
    return n + 1


@inline
def step(
    ev_kind: int, st: int, now: int, ops: Any, units: Any, start: np.ndarray
) -> tuple[int, int]:
    """Advance unit ``st`` on its event (GET, FETCH, DRAIN or WAKE).

    Returns ``(finished, n)``: its op if the op ended now (else -1), and how many
    requests it wrote in ``units.asks[:n]``, in the order the SimPy process makes them.
    """
    table, asks = units.table, units.asks
    chunks = ops.chunks
    op = int(table[st, U_CURRENT])
    phase = table[st, U_PHASE]
    n = 0
    begin = False  # begin tile group U_CHUNK
    after = False  # a tile group is done: go on to the next
    if ev_kind == records.GET:
        start[op] = now
        if ops.overhead[op]:  # its fixed cost first
            table[st, U_PHASE] = LAUNCHING
            return -1, _ask(asks, n, ASK_AT, now + ops.overhead[op], records.WAKE)
    if ev_kind == records.GET or phase == LAUNCHING:  # launched: the prologue
        reads = ops.reads[op]
        first = reads if chunks[op] == 1 else min(reads, ops.prologue[op])
        table[st, U_EPILOGUE] = min(ops.writes[op], ops.epilogue[op])
        table[st, U_REST] = reads - first
        table[st, U_BEHIND] = ops.writes[op] - table[st, U_EPILOGUE]
        table[st, U_DRAINS] = 0
        table[st, U_OUTSTANDING] = 0
        table[st, U_CHUNK] = 0
        if first:
            n = _ask(asks, n, ASK_DRAM, first, records.WAKE)
            table[st, U_PHASE] = AFTER_PROLOGUE
        else:
            begin = True
    elif ev_kind == records.FETCH:
        table[st, U_FETCH_PENDING] = 0
        after = phase == WAIT_FETCH
    elif ev_kind == records.DRAIN:
        table[st, U_OUTSTANDING] -= 1
        if phase == WAIT_DRAINS and table[st, U_OUTSTANDING] == 0:  # the all_of fires
            n = _ask(asks, n, ASK_AT, now, records.WAKE)
    elif phase == AFTER_PROLOGUE:
        begin = True
    elif phase == AFTER_COMPUTE:
        drain = part(table[st, U_BEHIND], chunks[op], table[st, U_CHUNK])
        if drain:
            n = _ask(asks, n, ASK_DRAM, drain, records.DRAIN)
            table[st, U_DRAINS] += 1
            table[st, U_OUTSTANDING] += 1
        if table[st, U_FETCH_PENDING]:
            table[st, U_PHASE] = WAIT_FETCH
        else:
            after = True
    else:  # WAIT_DRAINS: the all_of fired
        return op, n
    if after:
        table[st, U_CHUNK] += 1
        if table[st, U_CHUNK] < chunks[op]:
            begin = True
        else:
            epilogue = table[st, U_EPILOGUE]
            if epilogue:
                n = _ask(asks, n, ASK_DRAM, epilogue, records.DRAIN)
                table[st, U_DRAINS] += 1
                table[st, U_OUTSTANDING] += 1
            if table[st, U_DRAINS] == 0:
                return op, n
            table[st, U_PHASE] = WAIT_DRAINS
            if table[st, U_OUTSTANDING] == 0:  # every drain arrived already
                n = _ask(asks, n, ASK_AT, now, records.WAKE)
    if begin:  # fetch group j + 1 while group j computes
        j = table[st, U_CHUNK]
        fetch = part(table[st, U_REST], chunks[op] - 1, j) if j + 1 < chunks[op] else 0
        if fetch:
            n = _ask(asks, n, ASK_DRAM, fetch, records.FETCH)
        table[st, U_FETCH_PENDING] = 1 if fetch else 0
        compute = part(ops.compute[op] - ops.overhead[op], chunks[op], j)
        n = _ask(asks, n, ASK_AT, now + compute, records.WAKE)
        table[st, U_PHASE] = AFTER_COMPUTE
    return -1, n
