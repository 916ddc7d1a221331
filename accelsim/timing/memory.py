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

**Arbitration** (``dram.arbitration``).  Every transfer carries a :class:`Stream`:
the class of what it moves and a priority (:mod:`accelsim.timing.streams`).
With ``fcfs`` (the default) the stream changes nothing.  With ``priority`` a
memory books a background stream's transfer a slice at a time
(:meth:`Memory.portion`): a slice is at most :data:`SLICE_CYCLES` cycles of the
memory's bandwidth, and the engine books the next one when the previous one has
left the memory, behind whatever was booked meanwhile.  Foreground transfers
are booked whole, as with ``fcfs``.  So a foreground transfer requested while a
background one streams waits for at most the slice in flight (and one more
already queued per background transfer), not for the whole background
transfer, and the background stream takes whatever bandwidth the others leave;
no reservation is ever moved once booked, so the memory never moves more than
its bandwidth, and every arrival is known when its part is booked.  The
approximation: a real controller arbitrates per request (a burst of tens of
bytes); here the grain is a slice, which bounds the priority inversion to a
slice per background transfer and costs one engine event per slice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol, TypeVar

import numpy as np

from accelsim.config.dram import DramArbitration, DramSharing, DramSpec
from accelsim.config.hardware import HardwareSpec, InterconnectSpec


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

SLICE_CYCLES = 256
"""With ``priority`` arbitration, the most cycles of a memory's bandwidth one slice
of a background transfer holds it (256 cycles: 32 KiB at the default 128 B/cycle,
0.26 us at 1 GHz).  Finer slices wait less behind the background stream and cost
more events; see the README for how the results depend on it."""


@dataclass(frozen=True, slots=True)
class Stream:
    """The stream a transfer belongs to: the class of what it moves and its priority."""

    kind: StreamClass
    priority: int = FOREGROUND
    write: bool = False  # a write: booked at the memory's write bandwidth


DEFAULT_STREAM = Stream(StreamClass.ACTIVATION)
"""The stream of a transfer that nobody classified (a channel alone, a link)."""
DEFAULT_WRITE_STREAM = Stream(StreamClass.ACTIVATION, write=True)
"""The stream of a write that nobody classified."""

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

    def portion(self, n_bytes: int, stream: Stream) -> int:
        """How many of ``n_bytes`` one reservation of ``stream`` books: all of them,
        unless the memory books that stream a slice at a time (the engine then
        books the rest when the slice has left the memory)."""
        ...

    def reserve(self, now: int, n_bytes: int, stream: Stream) -> int:
        """Book ``n_bytes`` of ``stream`` (at most :meth:`portion` of them) at cycle
        ``now``; the cycle they arrive (they leave the memory
        :attr:`latency_cycles` earlier)."""
        ...

    def bound(self, n_bytes: Amount, write: bool = False) -> Amount:
        """The fewest cycles ``n_bytes`` (a number or an array of them) can keep this
        memory busy, latency left out (written, with ``write``)."""
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
        slice_bytes: The most one reservation of a background stream books
            (0: no limit, first come first served).
        write_bandwidths: Bytes per cycle of each channel's writes (empty: the
            ``bandwidths``).
    """

    bandwidths: tuple[float, ...]
    block_bytes: int = 0
    slice_bytes: int = 0
    write_bandwidths: tuple[float, ...] = ()


class FifoMemory:
    """One first-come-first-served channel of ``bytes_per_cycle`` and ``latency_cycles``.

    Args:
        bytes_per_cycle: Bandwidth; ``inf`` makes transfers take only the latency.
        latency_cycles: Cycles from the end of a transfer to the data being usable.
        capacity_bytes: What it holds (0 for a link).
        slice_bytes: The most one reservation of a background stream books (0, the
            default: no limit; :func:`slice_bytes` for ``priority`` arbitration).
        write_bytes_per_cycle: The writes' bandwidth (``None``: ``bytes_per_cycle``);
            reads and writes share the one channel, each transfer holding it at its
            own direction's bandwidth.
    """

    def __init__(
        self,
        bytes_per_cycle: float,
        latency_cycles: int,
        capacity_bytes: int = 0,
        slice_bytes: int = 0,
        write_bytes_per_cycle: float | None = None,
    ) -> None:
        self.bytes_per_cycle = bytes_per_cycle
        self.write_bytes_per_cycle = (
            bytes_per_cycle if write_bytes_per_cycle is None else write_bytes_per_cycle
        )
        self.latency_cycles = latency_cycles
        self.capacity_bytes = capacity_bytes
        self.slice_bytes = slice_bytes
        self.free_at = 0

    def portion(self, n_bytes: int, stream: Stream) -> int:
        if self.slice_bytes and stream.priority == BACKGROUND:
            return min(n_bytes, self.slice_bytes)
        return n_bytes

    def reserve(self, now: int, n_bytes: int, stream: Stream) -> int:
        bandwidth = self.write_bytes_per_cycle if stream.write else self.bytes_per_cycle
        free_at = self.free_at
        free_at = (free_at if free_at > now else now) + math.ceil(n_bytes / bandwidth)
        self.free_at = free_at
        return free_at + self.latency_cycles

    def bound(self, n_bytes: Amount, write: bool = False) -> Amount:
        cycles: Amount = n_bytes / (self.write_bytes_per_cycle if write else self.bytes_per_cycle)
        return cycles

    def channels(self) -> Channels:
        return Channels(
            (self.bytes_per_cycle,),
            slice_bytes=self.slice_bytes,
            write_bandwidths=(self.write_bytes_per_cycle,),
        )


def traffic_bound(memory: Memory, n_bytes: float, written_bytes: float) -> float:
    """The fewest cycles ``n_bytes`` of traffic, ``written_bytes`` of them written, keep
    ``memory`` busy: the reads at its read rate and the writes at its write rate (one
    bound of all of them when the two rates are equal)."""
    if memory.bound(1.0) == memory.bound(1.0, write=True):
        return float(memory.bound(n_bytes))
    return float(memory.bound(n_bytes - written_bytes) + memory.bound(written_bytes, write=True))


def slice_bytes(arbitration: DramArbitration, bytes_per_cycle: float) -> int:
    """The most one reservation of a background stream books on a memory of
    ``bytes_per_cycle`` (its total over all its channels): :data:`SLICE_CYCLES` of
    it with ``priority`` arbitration (at least a byte), no limit (0) with ``fcfs``
    or an infinite bandwidth (transfers then take no time)."""
    if arbitration is DramArbitration.FCFS or math.isinf(bytes_per_cycle):
        return 0
    return max(1, math.floor(SLICE_CYCLES * bytes_per_cycle))


def dram_memory(spec: DramSpec) -> Memory:
    """One DRAM memory as ``spec`` describes it: a :class:`FifoMemory`, or with
    ``channels`` above one an :class:`~accelsim.timing.interleaved.InterleavedMemory`."""
    bandwidth, channels = spec.read_bytes_per_cycle, spec.channels
    if channels > 1:
        from accelsim.timing.interleaved import InterleavedMemory

        return InterleavedMemory(
            channels,
            bandwidth,
            spec.latency_cycles,
            spec.capacity_bytes,
            slice_bytes(spec.arbitration, channels * bandwidth),
            spec.write_bytes_per_cycle,
        )
    return FifoMemory(
        bandwidth,
        spec.latency_cycles,
        spec.capacity_bytes,
        slice_bytes(spec.arbitration, bandwidth),
        spec.write_bytes_per_cycle,
    )


def dram_memories(hw: HardwareSpec) -> tuple[Memory, ...]:
    """Each processor's DRAM memory: one object for all of them when they share it
    (``dram.sharing: shared``), one each otherwise.  Fresh, empty memories."""
    if hw.dram.sharing is DramSharing.PER_PROCESSOR:
        return tuple(dram_memory(hw.dram) for _ in range(hw.processors))
    return (dram_memory(hw.dram),) * hw.processors


def dram_bandwidths(hw: HardwareSpec) -> tuple[float, ...]:
    """Each distinct DRAM memory's bandwidth in bytes per cycle, all its channels
    together: one per processor with ``per_processor`` sharing, one when they share
    it (what a figure compares the traffic's demand with)."""
    count = hw.processors if hw.dram.sharing is DramSharing.PER_PROCESSOR else 1
    return (hw.dram.bandwidth_bytes_per_cycle * hw.dram.channels,) * count


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
    ``channel_bandwidth`` bytes per cycle each for reads, ``channel_write_bandwidth``
    for writes) over which its transfers are cut
    in blocks of ``block_bytes[m]``, and books a background stream at most
    ``slice_bytes[m]`` at a time (0: no limit); processor ``p`` uses memory
    ``memory_of[p]``.
    """

    memory_of: np.ndarray
    channel_ptr: np.ndarray
    channel_bandwidth: np.ndarray
    channel_write_bandwidth: np.ndarray
    block_bytes: np.ndarray
    slice_bytes: np.ndarray
    latency_cycles: int

    @property
    def sliced(self) -> bool:
        """Whether any memory books some stream a slice at a time (streams matter)."""
        return bool(self.slice_bytes.any())


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
        channel_write_bandwidth=np.asarray(
            [b for d in described for b in (d.write_bandwidths or d.bandwidths)], np.float64
        ),
        block_bytes=np.asarray([d.block_bytes for d in described], np.int64),
        slice_bytes=np.asarray([d.slice_bytes for d in described], np.int64),
        latency_cycles=memories[0].latency_cycles if memories else 0,
    )
