"""A step as the engines see it: flat op arrays, and a fingerprint of them.

:func:`flatten` keeps exactly what decides the timing (op kinds, units,
processors, dependencies, the ready order (:mod:`accelsim.timing.ready`), the
costed cycles and bytes, transfers' sources, collectives' participants, the sends
every collective and transfer books on the links
(:class:`~accelsim.timing.sends.SendTable`), the
stream class of every op's reads and writes and each class's priority, every DRAM
memory's model, parameters, state size, slice and latency as the arrays of
:class:`MemoryTable`, and each link's bandwidth); the compiled engine
runs on it, and :func:`fingerprint` keys the memo of simulated steps
(:mod:`accelsim.timing.engines`): two steps with the same fingerprint have the
same timing, whatever their names or energy costs, and two whose timing could
differ never share one.  The fingerprint is worked out before the arrays that follow
from what it digests (:class:`Keyed`), so a step the memo knows is never flattened
whole.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from accelsim.graph.memo import per_graph
from accelsim.graph.ops import CommOp, OpGraph, TransferOp
from accelsim.timing.costs import UNIT_COMM, OpCosts
from accelsim.timing.machine import Machine
from accelsim.timing.memory import Memory
from accelsim.timing.ready import own_cycles, ranked
from accelsim.timing.send_table import send_table
from accelsim.timing.sends import SendTable, dram_of
from accelsim.timing.streams import STREAM_PRIORITY, Streams, op_streams

KIND_UNIT, KIND_TRANSFER, KIND_COMM = 0, 1, 2


class MemoryTable(NamedTuple):
    """The processors' DRAM memories as arrays, for the compiled engine and the memo.

    Processor ``p`` uses memory ``memory_of[p]``; memory ``m`` is of model ``model[m]``
    (its code), its parameters are ``params[param_ptr[m]:param_ptr[m + 1]]`` and its
    state when idle ``state[state_ptr[m]:state_ptr[m + 1]]``
    (:class:`~accelsim.timing.memory.Memory`), and it books a background stream at
    most ``slice_bytes[m]`` at a time (0: no limit) and adds ``latency[m]`` cycles.
    """

    memory_of: np.ndarray
    model: np.ndarray
    param_ptr: np.ndarray
    params: np.ndarray
    state_ptr: np.ndarray
    state: np.ndarray
    slice_bytes: np.ndarray
    latency: np.ndarray

    @property
    def sliced(self) -> bool:
        """Whether any memory books some stream a slice at a time."""
        return bool(self.slice_bytes.any())


def memory_table(dram: tuple[Memory, ...]) -> MemoryTable:
    """The arrays of each processor's memory (``dram[p]``; one object shared by
    several processors is one memory)."""
    index: dict[int, int] = {}
    memories: list[Memory] = []
    memory_of = np.zeros(len(dram), np.int64)
    for p, memory in enumerate(dram):
        m = index.setdefault(id(memory), len(index))
        if m == len(memories):
            memories.append(memory)
        memory_of[p] = m
    params = [m.params() for m in memories]
    states = [m.initial_state() for m in memories]
    return MemoryTable(
        memory_of=memory_of,
        model=np.asarray([m.code for m in memories], np.int64),
        param_ptr=_pointers(map(len, params), len(memories)),
        params=np.asarray([x for p in params for x in p], np.float64),
        state_ptr=_pointers(map(len, states), len(memories)),
        state=np.asarray([x for state in states for x in state], np.int64),
        slice_bytes=np.asarray([m.slice_bytes for m in memories], np.int64),
        latency=np.asarray([m.latency_cycles for m in memories], np.int64),
    )


def _pointers(counts: Iterable[int], n: int) -> np.ndarray:
    """Where each of ``n`` consecutive runs of ``counts`` items starts, and the end."""
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.fromiter(counts, np.int64, n), out=ptr[1:])
    return ptr


class FlatStep(NamedTuple):
    """Per-op arrays (int64), the processors' DRAM and their links, as the compiled
    loop reads them (a named tuple of arrays).  The arrays that come from the graph
    alone are shared by every flat step of one graph object: no one changes them (an
    engine counts down a copy of ``deps``).

    ``store`` is a unit op's ready queue (processor-major, then unit, the
    interconnect left out), -1 for the others; ``where`` is the op's processor
    (a transfer's source); ``priority`` its rank among ready ops
    (:func:`~accelsim.timing.ready.ready_rank`) and ``order`` the ops by rank;
    a collective's participants are ``part_idx[part_ptr[i]:part_ptr[i + 1]]``, each
    reading ``part_read`` DRAM bytes (at the same places) before it and writing
    ``part_write`` after it; ``net`` the steps of
    sends of each collective and transfer on the links, whose bandwidths are
    ``link_bandwidth``; successors are ``succ_idx[succ_ptr[i]:succ_ptr[i + 1]]``, by
    rank, and ``deps`` counts each op's dependencies; ``store_base`` is where each
    store's heap starts in one array of ``len(ops)`` slots; ``read_stream`` and
    ``write_stream`` are the stream class of each op's DRAM reads and writes,
    ``stream_priority`` each class's priority, and ``dram`` the processors' memories.
    """

    kind: np.ndarray
    store: np.ndarray
    where: np.ndarray
    priority: np.ndarray
    order: np.ndarray
    chunks: np.ndarray
    compute: np.ndarray
    overhead: np.ndarray
    reads: np.ndarray
    writes: np.ndarray
    prologue: np.ndarray
    epilogue: np.ndarray
    part_ptr: np.ndarray
    part_idx: np.ndarray
    part_read: np.ndarray
    part_write: np.ndarray
    net: SendTable
    succ_ptr: np.ndarray
    succ_idx: np.ndarray
    deps: np.ndarray
    store_base: np.ndarray
    read_stream: np.ndarray
    write_stream: np.ndarray
    stream_priority: np.ndarray
    dram: MemoryTable
    link_bandwidth: np.ndarray
    n_stores: int
    processors: int


def flatten(
    graph: OpGraph, costs: OpCosts, machine: Machine, streams: Streams | None = None
) -> FlatStep:
    """The arrays of ``graph`` with ``costs`` on ``machine``, its ops' transfers of
    ``streams`` (by default :func:`~accelsim.timing.streams.op_streams`')."""
    return Keyed(graph, costs, machine, streams).flat()


def fingerprint(
    graph: OpGraph, costs: OpCosts, machine: Machine, streams: Streams | None = None
) -> bytes:
    """A digest of everything that decides the flat step's timing: equal digests,
    equal timing (:class:`Keyed`)."""
    return Keyed(graph, costs, machine, streams).key


class Keyed:
    """A step's :func:`fingerprint`, worked out before the arrays that follow from
    what it digests, and its :class:`FlatStep` (:meth:`flat`), made only when asked
    for (the memo of simulated steps needs no more than the key of a step it knows).

    The key digests the graph's shape (once per graph, :class:`_Shape`), every costed
    column, each op's own cycles as the ready order estimates them
    (:func:`~accelsim.timing.ready.own_cycles`), the streams, the sends, the memories
    and the links.  What it leaves out follows from them: the stores from the units
    and processors, the ready rank from the own cycles, the dependencies and the
    graph's priority (:func:`~accelsim.timing.ready.ranked`), and the order and the
    successors by rank from the rank."""

    def __init__(
        self, graph: OpGraph, costs: OpCosts, machine: Machine, streams: Streams | None
    ) -> None:
        self.graph = graph
        self.processors = machine.processors
        self.n_units = len(costs.unit_names) - 1  # every unit but the interconnect has a store
        self.shape = per_graph(graph, "flat shape", lambda: _Shape.of(graph))
        self.unit = costs.unit.astype(np.int64)
        self.columns = tuple(
            column.astype(np.int64)
            for column in (
                costs.chunks,
                costs.compute_cycles,
                costs.overhead_cycles,
                costs.dram_read_bytes,
                costs.dram_ofmap_write_bytes,
                costs.prologue_bytes,
                costs.epilogue_bytes,
            )
        )
        read_stream, write_stream = streams if streams is not None else op_streams(graph, costs)
        self.streams = (np.asarray(read_stream, np.int64), np.asarray(write_stream, np.int64))
        self.own = own_cycles(graph, costs, machine)
        self.net = send_table(graph, machine)
        self.dram = memory_table(machine.dram)
        self.links = np.asarray([k.read_bytes_per_cycle for k in machine.links], np.float64)
        digest = hashlib.blake2b(self.shape.digest, digest_size=32)
        _digest(
            digest,
            (
                self.processors,
                self.n_units,
                self.unit,
                *self.columns,
                self.own,
                *self.streams,
                STREAM_PRIORITY,
                self.net,
                self.dram,
                self.links,
            ),
        )
        self.key = digest.digest()

    def flat(self) -> FlatStep:
        """The step's arrays."""
        shape, unit, n_units = self.shape, self.unit, self.n_units
        kind, where = shape.kind, shape.where
        unit_slot = np.where(unit > UNIT_COMM, unit - 1, unit)
        store = np.where(kind == KIND_UNIT, where * n_units + unit_slot, -1).astype(np.int64)
        n_stores = self.processors * n_units
        per_store = np.bincount(store[store >= 0], minlength=n_stores)
        store_base = np.concatenate(([0], np.cumsum(per_store)[:-1])).astype(np.int64)
        rank = ranked(self.graph, self.own)
        # Successors of each op by rank: the edges sorted by their source, then the rank
        # of their target.
        edges = np.lexsort((rank[shape.targets], shape.sources))
        chunks, compute, overhead, reads, writes, prologue, epilogue = self.columns
        return FlatStep(
            kind=kind,
            store=store,
            where=where,
            priority=rank,
            order=np.argsort(rank).astype(np.int64),
            chunks=chunks,
            compute=compute,
            overhead=overhead,
            reads=reads,
            writes=writes,
            prologue=prologue,
            epilogue=epilogue,
            part_ptr=shape.part_ptr,
            part_idx=shape.part_idx,
            part_read=shape.part_read,
            part_write=shape.part_write,
            net=self.net,
            succ_ptr=shape.succ_ptr,
            succ_idx=shape.targets[edges],
            deps=shape.deps,
            store_base=store_base,
            read_stream=self.streams[0],
            write_stream=self.streams[1],
            stream_priority=STREAM_PRIORITY,
            dram=self.dram,
            link_bandwidth=self.links,
            n_stores=n_stores,
            processors=self.processors,
        )


@dataclass(frozen=True)
class _Shape:
    """What a :class:`FlatStep` takes from the graph alone (shared by every flat step
    made from the graph; ``deps`` is copied for each): the dependencies as edges from
    ``sources`` to ``targets``, and where each op's successors start among them
    (``succ_ptr``); ``digest`` digests them with the graph's own priority."""

    kind: np.ndarray
    where: np.ndarray
    part_ptr: np.ndarray
    part_idx: np.ndarray
    part_read: np.ndarray
    part_write: np.ndarray
    succ_ptr: np.ndarray
    sources: np.ndarray
    targets: np.ndarray
    deps: np.ndarray
    digest: bytes

    @staticmethod
    def of(graph: OpGraph) -> _Shape:
        ops = graph.ops
        n_ops = len(ops)
        kind = np.zeros(n_ops, np.int64)
        where = np.asarray(graph.processor, np.int64).copy()
        taking_part = np.zeros(n_ops, np.int64)
        participants: list[int] = []
        moved: list[tuple[int, int]] = []  # each participant's DRAM reads and writes
        for i, op in enumerate(ops):
            if isinstance(op, TransferOp):
                kind[i] = KIND_TRANSFER
                where[i] = op.source
            elif isinstance(op, CommOp):
                kind[i] = KIND_COMM
                taking_part[i] = len(op.participants)
                participants.extend(op.participants)
                moved.extend(dram_of(op))
        part_ptr = np.zeros(n_ops + 1, np.int64)
        np.cumsum(taking_part, out=part_ptr[1:])
        deps = np.fromiter(map(len, (op.deps for op in ops)), np.int64, n_ops)
        sources = np.fromiter(
            itertools.chain.from_iterable(op.deps for op in ops), np.int64, int(deps.sum())
        )
        targets = np.repeat(np.arange(n_ops, dtype=np.int64), deps)
        succ_ptr = np.zeros(n_ops + 1, np.int64)
        np.cumsum(np.bincount(sources, minlength=n_ops), out=succ_ptr[1:])
        part_read, part_write = np.asarray(moved, np.int64).reshape(-1, 2).T
        arrays = {
            "kind": kind,
            "where": where,
            "part_ptr": part_ptr,
            "part_idx": np.asarray(participants, np.int64),
            "part_read": np.ascontiguousarray(part_read),
            "part_write": np.ascontiguousarray(part_write),
            "succ_ptr": succ_ptr,
            "sources": sources,
            "targets": targets,
            "deps": deps,
        }
        digest = hashlib.blake2b(digest_size=32)
        _digest(digest, (*arrays.values(), np.asarray(graph.priority, np.int64)))
        return _Shape(**arrays, digest=digest.digest())


def _digest(digest: Any, value: object) -> None:
    """Feed ``value`` (a tuple of arrays, numbers and such tuples, an array or a
    number) to ``digest``."""
    if isinstance(value, np.ndarray):
        digest.update(f"{value.dtype.str}{value.size}".encode())
        digest.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, tuple):
        for field in value:
            _digest(digest, field)
    else:
        digest.update(repr(value).encode())
    digest.update(b"|")
