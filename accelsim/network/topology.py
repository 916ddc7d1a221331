"""A network's topology: its dimensions, its links and the route between two processors.

Every level of the ``interconnect`` section (:mod:`accelsim.config.interconnect`) is
one or more **dimensions** (a torus level one per entry of its ``dims``), innermost
first; processor ``p``'s coordinate in dimension ``d`` is ``(p // stride[d]) % size[d]``
with the stride the product of the sizes before it.  A dimension links the processors
that differ from each other in its coordinate alone:

- ``ring``: one link from each processor to the next (coordinate ``c`` to ``c + 1``,
  wrapping), one way;
- ``torus``: the same ring both ways (a size of 2 has one link each way between its
  two processors, no second wrap-around link);
- ``fully_connected``: a link from every processor to every other;
- ``switch``: a link from each processor to the group's switch and one back.

A link is directed and carries ``links x bandwidth`` bytes per cycle (its dimension's
parallel links taken together) after the dimension's latency; a switch's two links
share one hop, so its latency is on the way in and none on the way out.  A route
goes dimension by dimension, the first first (dimension-order routing), and on a
torus the shorter way round; on a tie (exactly half-way round) a processor of even
coordinate goes the positive way and one of odd coordinate the negative way, so the
transfers of a step that all go half-way round load both directions alike, as a
dimension-order router that uses both directions balances them.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from accelsim.config.interconnect import InterconnectSpec, Topology


@dataclass(frozen=True)
class Dimension:
    """One dimension of a network.

    Attributes:
        topology: How the processors of one of its groups are linked.
        size: Processors of one group (its coordinates).
        bandwidth_bytes_per_cycle: A link's bandwidth per direction, its parallel
            links together.
        latency_cycles: What a transfer waits on one hop of it.
    """

    topology: Topology
    size: int
    bandwidth_bytes_per_cycle: float
    latency_cycles: int


@dataclass(frozen=True)
class Switch:
    """The switch of one group of dimension ``dimension``: the group of the processors
    whose other coordinates are those of processor ``base`` (its coordinate 0 in
    ``dimension``)."""

    dimension: int
    base: int


Node = int | Switch
"""A link's end: a processor (its number) or a switch."""


@dataclass(frozen=True)
class Link:
    """A directed link of dimension ``dimension`` from ``source`` to ``destination``."""

    dimension: int
    source: Node
    destination: Node


@dataclass(frozen=True)
class Network:
    """The topology of ``processors`` processors: their dimensions, innermost first,
    and the chunks a ``multi_dim`` collective on it is pipelined in."""

    dimensions: tuple[Dimension, ...]
    multi_dim_chunks: int = 1

    @classmethod
    def of(cls, spec: InterconnectSpec, processors: int) -> Network:
        """The network ``spec`` describes for ``processors`` processors (the first
        level's ``dims`` unset: the processors the outer levels leave)."""
        inner = spec.dims or (max(processors // spec.outer_processors(), 1),)
        first = [(spec.topology, d, spec.bandwidth_bytes_per_cycle * spec.links) for d in inner]
        dims = [Dimension(t, d, bw, spec.latency_cycles) for t, d, bw in first]
        for level in spec.levels:
            bandwidth = level.bandwidth_bytes_per_cycle * level.links
            dims += [
                Dimension(level.topology, d, bandwidth, level.latency_cycles) for d in level.dims
            ]
        return cls(tuple(dims), spec.multi_dim_chunks)

    @property
    def processors(self) -> int:
        return math.prod(d.size for d in self.dimensions)

    @functools.cached_property
    def strides(self) -> tuple[int, ...]:
        """Each dimension's stride: the processors of one group of the dimensions before it."""
        out, stride = [], 1
        for d in self.dimensions:
            out.append(stride)
            stride *= d.size
        return tuple(out)

    def coordinate(self, p: int, dimension: int) -> int:
        """Processor ``p``'s coordinate in ``dimension``."""
        return (p // self.strides[dimension]) % self.dimensions[dimension].size

    def moved(self, p: int, dimension: int, coordinate: int) -> int:
        """The processor with ``p``'s coordinates but ``coordinate`` in ``dimension``."""
        stride = self.strides[dimension]
        return p + (coordinate - self.coordinate(p, dimension)) * stride

    def bandwidth(self, link: Link) -> float:
        return self.dimensions[link.dimension].bandwidth_bytes_per_cycle

    def latency(self, link: Link) -> int:
        """The latency of ``link`` (a switch's way out: none, the hop's is on the way in)."""
        if isinstance(link.source, Switch):
            return 0
        return self.dimensions[link.dimension].latency_cycles

    def links(self) -> tuple[Link, ...]:
        """Every link of the network, dimension by dimension, processor by processor."""
        out: list[Link] = []
        for k, dim in enumerate(self.dimensions):
            for p in range(self.processors):
                c = self.coordinate(p, k)
                if dim.topology is Topology.SWITCH:
                    switch = Switch(k, self.moved(p, k, 0))
                    out += [Link(k, p, switch), Link(k, switch, p)]
                    continue
                if dim.topology is Topology.FULLY_CONNECTED:
                    ends = [e for e in range(dim.size) if e != c]
                else:
                    ends = ring_ends(dim, c)
                out += [Link(k, p, self.moved(p, k, e)) for e in ends]
        return tuple(out)

    @functools.cached_property
    def _routes(self) -> dict[tuple[int, int], tuple[Link, ...]]:
        """The routes found so far, by their ends."""
        return {}

    def route(self, source: int, destination: int) -> tuple[Link, ...]:
        """The links a transfer from ``source`` to ``destination`` takes, in order."""
        found = self._routes.get((source, destination))
        if found is None:
            found = self._routes[source, destination] = self._route(source, destination)
        return found

    def _route(self, source: int, destination: int) -> tuple[Link, ...]:
        hops: list[Link] = []
        here = source
        for k, dim in enumerate(self.dimensions):
            goal = self.coordinate(destination, k)
            c = self.coordinate(here, k)
            if c == goal:
                continue
            there = self.moved(here, k, goal)
            if dim.topology is Topology.SWITCH:
                switch = Switch(k, self.moved(here, k, 0))
                hops += [Link(k, here, switch), Link(k, switch, there)]
            elif dim.topology is Topology.FULLY_CONNECTED:
                hops.append(Link(k, here, there))
            else:
                hops += self._ring_hops(k, here, c, goal)
            here = there
        return tuple(hops)

    def outgoing_bandwidth(self) -> float:
        """Bytes per cycle a processor can send at once: all its links together (every
        processor has the same links)."""
        total = 0.0
        for dim in self.dimensions:
            if dim.topology is Topology.FULLY_CONNECTED:
                total += (dim.size - 1) * dim.bandwidth_bytes_per_cycle
            elif dim.topology is Topology.SWITCH:
                total += dim.bandwidth_bytes_per_cycle if dim.size > 1 else 0.0
            else:
                total += len(ring_ends(dim, 0)) * dim.bandwidth_bytes_per_cycle
        return total

    def route_latency(self, route: tuple[Link, ...]) -> int:
        """Cycles a transfer's head takes along ``route``: its links' latencies."""
        return sum(self.latency(link) for link in route)

    def _ring_hops(self, k: int, here: int, c: int, goal: int) -> list[Link]:
        dim = self.dimensions[k]
        forward = (goal - c) % dim.size
        backward = dim.size - forward
        tie_backward = backward == forward and c % 2 == 1
        step = 1
        if dim.topology is Topology.TORUS and (backward < forward or tie_backward):
            step = -1
        hops = []
        while c != goal:
            n = (c + step) % dim.size
            hops.append(Link(k, here, self.moved(here, k, n)))
            here, c = self.moved(here, k, n), n
        return hops


def ring_ends(dim: Dimension, c: int) -> list[int]:
    """The coordinates a ring's or torus's processor at ``c`` has links to."""
    if dim.size == 1:
        return []
    ahead = (c + 1) % dim.size
    if dim.topology is Topology.RING or dim.size == 2:
        return [ahead]
    return [ahead, (c - 1) % dim.size]
