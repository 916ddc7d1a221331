"""The compiled event loop's records, each a named tuple of one-dimensional arrays (one
per field, as the loop was fastest with them): what it reads, made by :func:`records`
from a flat step (:class:`Ops`, :class:`Dram` and :class:`Links` with the memories'
and links' state when idle), and what it keeps, which the loop allocates itself
(:class:`Heap`, :class:`Stores`, :class:`Chains`, :class:`Progress`, the units'
:class:`accelsim.timing.loop.units.Units`, and copies of the idle state); and the
codes the loop's pieces share.

The loop's pieces read each other's constants as attributes of this module
(``records.SLICE``), so that the loop's disk cache covers it
(:func:`accelsim.timing.numba_setup.compiled_from`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from accelsim.timing.flat import FlatStep

# Event kinds.
INIT_UNIT, PUT, GET, WAKE, FETCH, DRAIN, INIT_PROC, PROC, SLICE = range(9)
URGENT, NORMAL = 0, 1
PRIORITY_SHIFT = 62
# Status codes.
OK, OVER_LIMIT = 0, 1
# Columns of a sliced transfer's state: one row per transfer in flight.
C_LEFT, C_MEMORY, C_EVENT, C_UNIT, C_STREAM = range(5)
CHAIN_COLUMNS = 5


class Ops(NamedTuple):
    """Per-op arrays of :class:`~accelsim.timing.flat.FlatStep` (``processor`` is its
    ``where``; ``store_base`` is per store), read only."""

    kind: np.ndarray
    store: np.ndarray
    processor: np.ndarray
    priority: np.ndarray
    chunks: np.ndarray
    compute: np.ndarray
    overhead: np.ndarray
    reads: np.ndarray
    writes: np.ndarray
    prologue: np.ndarray
    epilogue: np.ndarray
    link_bytes: np.ndarray
    part_ptr: np.ndarray
    part_idx: np.ndarray
    succ_ptr: np.ndarray
    succ_idx: np.ndarray
    read_stream: np.ndarray
    write_stream: np.ndarray
    deps: np.ndarray
    store_base: np.ndarray


class Dram(NamedTuple):
    """The memories (:class:`~accelsim.timing.flat.MemoryTable`, their ``state``: the
    idle one, or the loop's copy it changes) and each stream class's priority."""

    memory_of: np.ndarray
    model: np.ndarray
    param_ptr: np.ndarray
    params: np.ndarray
    state_ptr: np.ndarray
    state: np.ndarray
    slice_bytes: np.ndarray
    latency: np.ndarray
    stream_priority: np.ndarray


class Links(NamedTuple):
    """Each processor's outgoing link: the cycle it is free (0 when idle, or the loop's
    copy), and all links' bandwidth and latency."""

    free: np.ndarray
    bandwidth: float
    latency: int


class Heap(NamedTuple):
    """The event heap, ordered by ``(time, key)``: ``key`` is the priority shifted by
    :data:`PRIORITY_SHIFT` plus the sequence number."""

    time: np.ndarray
    key: np.ndarray
    kind: np.ndarray
    arg: np.ndarray


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
    """Each op's start and end (-1 until then), dependencies left, all-reduce stage,
    and the ops ready to dispatch."""

    start: np.ndarray
    end: np.ndarray
    waiting: np.ndarray
    stage: np.ndarray
    ready: np.ndarray


def records(flat: FlatStep) -> tuple[Ops, Dram, Links]:
    """What the loop reads of ``flat``: its ops, its memories and links when idle."""
    table = flat.dram
    return (
        Ops(
            flat.kind, flat.store, flat.where, flat.priority, flat.chunks, flat.compute,
            flat.overhead, flat.reads, flat.writes, flat.prologue, flat.epilogue,
            flat.link_bytes, flat.part_ptr, flat.part_idx, flat.succ_ptr, flat.succ_idx,
            flat.read_stream, flat.write_stream, flat.deps, flat.store_base,
        ),
        Dram(
            table.memory_of, table.model, table.param_ptr, table.params, table.state_ptr,
            table.state, table.slice_bytes, table.latency, flat.stream_priority,
        ),
        Links(np.zeros(flat.processors, np.int64), flat.link_bandwidth, flat.link_latency),
    )  # fmt: skip


def capacities(flat: FlatStep) -> tuple[int, int]:
    """How many events the loop's heap holds (every event that can be pending at
    once: two per op, and per unit its tile groups' and a few more) and how many
    sliced transfers can be in flight (one per unit's fetch and drains, when a
    memory slices)."""
    max_chunks = int(flat.chunks.max(initial=1))
    heap = 2 * len(flat.kind) + flat.n_stores * (max_chunks + 4) + 16
    return heap, flat.n_stores * (max_chunks + 2) if flat.dram.sliced else 0
