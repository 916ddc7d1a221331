"""The machine a run simulates: its hardware spec with the parts the timing uses built
once (the main array, each processor's DRAM memory, the network and its links).

A :class:`Machine` is frozen and keeps no simulation state: each simulation makes
fresh memories from it (:meth:`Machine.memories`; the engines keep each link's
state themselves), the compiled engine describes its memories as arrays
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
from accelsim.mapping.units import ArrayUnit, main_array
from accelsim.network.topology import Network
from accelsim.timing.memories.fifo import Fifo
from accelsim.timing.memories.registry import dram_memory, link_memory
from accelsim.timing.memory import Memory, MemoryState
from accelsim.timing.representatives import Representatives


@dataclass(frozen=True)
class Machine:
    """A run's hardware, built.

    Attributes:
        hardware: The spec it is built from.
        array: Each processor's main array and operand buffers.
        dram: Each processor's DRAM memory: one object for every processor when they
            share it (``dram.sharing: shared``), one each otherwise.
        network: The topology of the ``interconnect`` section.
        links: Each directed link of the network, numbered as
            :meth:`~accelsim.network.topology.Network.links` lists them (on a
            ``ring``, link ``p`` is processor ``p``'s one outgoing link): a
            first-come-first-served channel of its bandwidth and latency (a
            switch's way out: none, the hop's latency is on the way in).
        link: A link of the first level, what estimates of one processor's
            sending take (every processor has such links, even alone).
        represented: None, or the processors a symmetric step is simulated on and
            the links its all-reduces book (:mod:`accelsim.timing.symmetry`).
    """

    hardware: HardwareSpec
    array: ArrayUnit
    dram: tuple[Memory, ...]
    network: Network
    links: tuple[Fifo, ...]
    link: Fifo
    represented: Representatives | None = None

    @classmethod
    def of(cls, hw: HardwareSpec) -> Machine:
        """The machine ``hw`` describes (:func:`machine_of` builds a run's once)."""
        if hw.dram.sharing is DramSharing.PER_PROCESSOR:
            dram = tuple(dram_memory(hw.dram) for _ in range(hw.processors))
        else:
            dram = (dram_memory(hw.dram),) * hw.processors
        network = Network.of(hw.interconnect, hw.processors)
        links = tuple(
            Fifo(network.bandwidth(k), network.bandwidth(k), network.latency(k))
            for k in network.links()
        )
        return cls(hw, main_array(hw), dram, network, links, link_memory(hw.interconnect))

    @property
    def processors(self) -> int:
        return self.hardware.processors

    def memories(self) -> tuple[MemoryState, ...]:
        """Each processor's DRAM memory, fresh and empty (one object for the
        processors that share one)."""
        made: dict[int, MemoryState] = {}
        return tuple(made.setdefault(id(m), MemoryState(m)) for m in self.dram)

    def link_bound(self, n_bytes: float) -> float:
        """Fewest cycles a processor takes to send ``n_bytes``: on a ring over its one
        link, on another topology over all its links at once."""
        if self.hardware.interconnect.is_ring:
            return float(self.link.bound(n_bytes))
        return n_bytes / self.network.outgoing_bandwidth() if n_bytes else 0.0

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
