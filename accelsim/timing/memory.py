"""DRAM as everything else sees it: the :class:`Memory` protocol, the only place DRAM
timing lives.

A memory answers two questions.  :meth:`Memory.reserve` books a transfer of
``n_bytes`` requested at cycle ``now`` by a :class:`Stream` and says the cycle its
data arrives, at once, without an event: the engines (:mod:`accelsim.timing.engine`,
and :mod:`accelsim.timing.compiled` through the arrays of :class:`MemoryLayout`)
and :mod:`accelsim.timing.single_op` time every DRAM transfer with it.
:meth:`Memory.bound` says the fewest cycles ``n_bytes`` can take, whatever the
order: the cycle bounds of a step (:meth:`accelsim.report.result.RunResult.cycle_bounds`)
and the techniques' estimates (pipeline partitions, task placement, dropout's
rooflines) use it.  No other module divides bytes by a bandwidth.

:func:`dram_memories` builds each processor's memory from the hardware spec (one
object for every processor when they share DRAM) and :func:`link_memories` each
processor's interconnect link, which is the same kind of first-come-first-served
channel and answers the same two questions (its stream is ignored).

The model here is :class:`FifoMemory`: one channel, first come first served.  A
transfer starts when the channel is free (at ``now``, or when the transfers
booked before it are done), holds it ``ceil(bytes / bandwidth)`` cycles and
arrives ``latency`` cycles later; the latency is pipelined (it does not hold the
channel).  Contention is therefore decided by the order in which the
simulation books transfers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol, TypeVar

import numpy as np

from accelsim.config.hardware import DramSharing, DramSpec, HardwareSpec, InterconnectSpec


class StreamClass(IntEnum):
    """What a DRAM transfer moves.  Integers: the compiled engine takes them as data."""

    ACTIVATION = 0
    WEIGHT = 1
    GRADIENT = 2
    OPTIMIZER = 3
    STASH = 4
    PREDICTOR = 5
    TECHNIQUE = 6


FOREGROUND, BACKGROUND = 0, 1
"""Stream priorities: background streams yield to the others where the memory's
arbitration says so."""


@dataclass(frozen=True, slots=True)
class Stream:
    """The stream a transfer belongs to: the class of what it moves and its priority."""

    kind: StreamClass
    priority: int = FOREGROUND


DEFAULT_STREAM = Stream(StreamClass.ACTIVATION)
"""The stream of a transfer that nobody classified (a channel alone, a link)."""

Amount = TypeVar("Amount", float, np.ndarray)


class Memory(Protocol):
    """A memory (or a link) as the engines, the bounds and the techniques see it."""

    @property
    def latency_cycles(self) -> int:
        """Cycles from the end of a transfer to its data being usable."""
        ...

    @property
    def capacity_bytes(self) -> int:
        """What it holds (0 for a link)."""
        ...

    def reserve(self, now: int, n_bytes: int, stream: Stream) -> int:
        """Book ``n_bytes`` of ``stream`` at cycle ``now``; the cycle they arrive (they
        leave the memory :attr:`latency_cycles` earlier)."""
        ...

    def bound(self, n_bytes: Amount) -> Amount:
        """The fewest cycles ``n_bytes`` (a number or an array of them) can keep this
        memory busy, latency left out."""
        ...

    def channels(self) -> Channels:
        """The memory as the compiled engine runs it."""
        ...


@dataclass(frozen=True)
class Channels:
    """A memory as channels: what the compiled engine's loop knows how to run.

    Attributes:
        bandwidths: Bytes per cycle of each channel (``inf`` allowed).
        block_bytes: With several channels, a transfer is cut into blocks of
            this many bytes dealt out to the channels in turn; unused with one.
    """

    bandwidths: tuple[float, ...]
    block_bytes: int = 0


class FifoMemory:
    """One first-come-first-served channel of ``bytes_per_cycle`` and ``latency_cycles``.

    Args:
        bytes_per_cycle: Bandwidth; ``inf`` makes transfers take only the latency.
        latency_cycles: Cycles from the end of a transfer to the data being usable.
        capacity_bytes: What it holds (0 for a link).
    """

    def __init__(
        self, bytes_per_cycle: float, latency_cycles: int, capacity_bytes: int = 0
    ) -> None:
        self.bytes_per_cycle = bytes_per_cycle
        self.latency_cycles = latency_cycles
        self.capacity_bytes = capacity_bytes
        self.free_at = 0

    def reserve(self, now: int, n_bytes: int, stream: Stream) -> int:
        free_at = self.free_at
        free_at = (free_at if free_at > now else now) + math.ceil(n_bytes / self.bytes_per_cycle)
        self.free_at = free_at
        return free_at + self.latency_cycles

    def bound(self, n_bytes: Amount) -> Amount:
        cycles: Amount = n_bytes / self.bytes_per_cycle
        return cycles

    def channels(self) -> Channels:
        return Channels((self.bytes_per_cycle,))


def dram_memory(spec: DramSpec) -> Memory:
    """One DRAM memory as ``spec`` describes it."""
    return FifoMemory(spec.bandwidth_bytes_per_cycle, spec.latency_cycles, spec.capacity_bytes)


def dram_memories(hw: HardwareSpec) -> tuple[Memory, ...]:
    """Each processor's DRAM memory: one object for all of them when they share it
    (``dram.sharing: shared``), one each otherwise.  Fresh, empty memories."""
    if hw.dram.sharing is DramSharing.PER_PROCESSOR:
        return tuple(dram_memory(hw.dram) for _ in range(hw.processors))
    return (dram_memory(hw.dram),) * hw.processors


def link_memory(spec: InterconnectSpec) -> Memory:
    """One processor's outgoing interconnect link."""
    return FifoMemory(spec.bandwidth_bytes_per_cycle, spec.latency_cycles)


def link_memories(hw: HardwareSpec) -> tuple[Memory, ...]:
    """Each processor's outgoing link (fresh, empty)."""
    return tuple(link_memory(hw.interconnect) for _ in range(hw.processors))


def dram_capacity_bytes(hw: HardwareSpec) -> int:
    """What one DRAM memory holds (each processor's with ``per_processor`` sharing,
    all processors' together when they share one)."""
    return dram_memory(hw.dram).capacity_bytes


@dataclass(frozen=True)
class MemoryLayout:
    """The processors' DRAM as arrays, for the compiled engine.

    Memory ``m`` is the channels ``channel_ptr[m]:channel_ptr[m + 1]`` (of
    ``channel_bandwidth`` bytes per cycle each) over which its transfers are cut
    in blocks of ``block_bytes[m]``; processor ``p`` uses memory ``memory_of[p]``.
    """

    memory_of: np.ndarray
    channel_ptr: np.ndarray
    channel_bandwidth: np.ndarray
    block_bytes: np.ndarray
    latency_cycles: int


def memory_layout(memories: tuple[Memory, ...]) -> MemoryLayout:
    """The arrays of each processor's memory (``memories[p]``; one object shared by
    several processors is one memory)."""
    index: dict[int, int] = {}
    described: list[Channels] = []
    memory_of = np.zeros(len(memories), np.int64)
    for p, memory in enumerate(memories):
        m = index.setdefault(id(memory), len(index))
        if m == len(described):
            described.append(memory.channels())
        memory_of[p] = m
    counts = [len(d.bandwidths) for d in described]
    channel_ptr = np.zeros(len(described) + 1, np.int64)
    np.cumsum(counts, out=channel_ptr[1:])
    return MemoryLayout(
        memory_of=memory_of,
        channel_ptr=channel_ptr,
        channel_bandwidth=np.asarray([b for d in described for b in d.bandwidths], np.float64),
        block_bytes=np.asarray([d.block_bytes for d in described], np.int64),
        latency_cycles=memories[0].latency_cycles if memories else 0,
    )
