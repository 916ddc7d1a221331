"""The machine a run simulates: its hardware spec with the parts the timing uses built
once (the main array, each processor's DRAM memory and outgoing link, the network).

A :class:`Machine` is frozen and keeps no simulation state: each simulation makes
fresh memories from it (:meth:`Machine.memories`, :meth:`Machine.link_memories`),
the compiled engine describes its memories as arrays
(:func:`accelsim.timing.flat.memory_table`), and the cost model, the engines,
:mod:`accelsim.timing.single_op`, a step's cycle bounds and the techniques'
estimates read its memories' bounds, latencies and capacities.
:func:`machine_of` builds a run's machine once (the driver's, a layer query's, and
any technique holding only the spec get the same object).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from accelsim.config.dram import DramSharing
from accelsim.config.hardware import HardwareSpec
from accelsim.config.interconnect import Algorithm
from accelsim.mapping.units import ArrayUnit, main_array
from accelsim.network.algorithms import lower
from accelsim.network.collectives import Collective
from accelsim.network.cost import plan, schedule_cycles
from accelsim.network.topology import Network
from accelsim.timing.memories.fifo import Fifo
from accelsim.timing.memories.registry import dram_memory, link_memory
from accelsim.timing.memory import Memory, MemoryState


@dataclass(frozen=True)
class Machine:
    """A run's hardware, built.

    Attributes:
        hardware: The spec it is built from.
        array: Each processor's main array and operand buffers.
        dram: Each processor's DRAM memory: one object for every processor when they
            share it (``dram.sharing: shared``), one each otherwise.
        links: Each processor's outgoing interconnect link.
        network: The topology of the ``interconnect`` section.
    """

    hardware: HardwareSpec
    array: ArrayUnit
    dram: tuple[Memory, ...]
    links: tuple[Fifo, ...]
    network: Network

    @classmethod
    def of(cls, hw: HardwareSpec) -> Machine:
        """The machine ``hw`` describes (:func:`machine_of` builds a run's once)."""
        if hw.dram.sharing is DramSharing.PER_PROCESSOR:
            dram = tuple(dram_memory(hw.dram) for _ in range(hw.processors))
        else:
            dram = (dram_memory(hw.dram),) * hw.processors
        links = tuple(link_memory(hw.interconnect) for _ in range(hw.processors))
        network = Network.of(hw.interconnect, hw.processors)
        return cls(hw, main_array(hw), dram, links, network)

    @property
    def processors(self) -> int:
        return self.hardware.processors

    def memories(self) -> tuple[MemoryState, ...]:
        """Each processor's DRAM memory, fresh and empty (one object for the
        processors that share one)."""
        made: dict[int, MemoryState] = {}
        return tuple(made.setdefault(id(m), MemoryState(m)) for m in self.dram)

    def link_memories(self) -> tuple[MemoryState, ...]:
        """Each processor's outgoing link, fresh and empty."""
        return tuple(MemoryState(link) for link in self.links)

    def link_bound(self, n_bytes: float) -> float:
        """Fewest cycles a processor takes to send ``n_bytes``: on a ring over its one
        link, on another topology over all its links at once."""
        if self.hardware.interconnect.is_ring:
            return float(self.links[0].bound(n_bytes))
        return n_bytes / self.network.outgoing_bandwidth() if n_bytes else 0.0

    def all_reduce_cycles(self, participants: tuple[int, ...], n_bytes: int) -> int:
        """Cycles the network takes to all-reduce ``n_bytes`` among ``participants``
        by ``interconnect.algorithm`` (``fastest`` where the group cannot run it:
        :func:`accelsim.network.cost.plan`), without contention; -1 on a ring, whose
        all-reduce the engines book on each participant's link."""
        spec = self.hardware.interconnect
        if spec.is_ring:
            return -1
        return _all_reduce_cycles(self.network, spec.algorithm, participants, n_bytes)

    def transfer_cycles(self, source: int, destination: int, n_bytes: int) -> int:
        """Cycles ``n_bytes`` take from ``source`` to ``destination`` along their route,
        without contention; -1 on a ring, whose transfers the engines book on the
        source's link."""
        if self.hardware.interconnect.is_ring:
            return -1
        schedule = plan(
            self.network,
            Collective.POINT_TO_POINT,
            (source, destination),
            n_bytes,
            Algorithm.DIRECT,
        )
        return schedule_cycles(self.network, schedule)

    @property
    def dram_capacity_bytes(self) -> int:
        """What one DRAM memory holds (each processor's with ``per_processor`` sharing,
        all processors' together when they share one)."""
        return self.dram[0].capacity_bytes

    def dram_bandwidths(self) -> tuple[float, ...]:
        """Each distinct DRAM memory's bandwidth in bytes per cycle, all its channels
        together: one per processor with ``per_processor`` sharing, one when they share
        it (what a figure compares the traffic's demand with)."""
        spec = self.hardware.dram
        count = len({id(m) for m in self.dram})
        return (spec.bandwidth_bytes_per_cycle * spec.channels,) * count


@functools.lru_cache(maxsize=32)
def machine_of(hw: HardwareSpec) -> Machine:
    """The machine of ``hw``, built once per distinct spec (the last 32 kept)."""
    return Machine.of(hw)


@functools.lru_cache(maxsize=4096)
def _all_reduce_cycles(
    network: Network, algorithm: Algorithm, participants: tuple[int, ...], n_bytes: int
) -> int:
    schedule = None
    if algorithm is not Algorithm.FASTEST:
        schedule = lower(network, Collective.ALL_REDUCE, participants, n_bytes, algorithm)
    if schedule is None:  # fastest, or an algorithm the group cannot run
        schedule = plan(network, Collective.ALL_REDUCE, participants, n_bytes, Algorithm.FASTEST)
    return schedule_cycles(network, schedule)
