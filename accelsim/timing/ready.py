"""Which ready op a unit runs first: a property of the graph, never its file order.

Each op gets a rank, the position of the op in the order the engines choose
among ready ops (:func:`ready_rank`); both engines take the smallest rank from a
unit's ready ops, release an op's successors and start the first ops in rank
order, so two listings of one graph (a downsample branch written before or after
its main branch, an imported and a hand-written table) run the same events.

The rank sorts ops by, in turn:

1. the graph's own priority, where it has one (a pipeline schedule's order of
   mini-batches and stages);
2. the longest path still ahead, longest first: the op's own cycles and those
   of the costliest chain of ops that wait for it, to the step's end (critical
   path first, as a list scheduler does);
3. the longest path behind, shortest first: the cycles of the costliest chain of
   ops it waits for (the op that could have started first);
4. the op id, which decides only between ops equal in all three: in practice
   ops with the same cost, waiting for the same chain and awaited by the same
   chain (two equal optimizer updates), whose order does not change the timing.

An op's own cycles are its costed estimate, known when the engines run: the
larger of its compute cycles (fixed cost included) and the fewest cycles its DRAM
reads and writes keep its processor's memory busy
(:meth:`~accelsim.timing.memory.Memory.bound`); a transfer's, its bytes on a link
of the first level (:attr:`~accelsim.timing.machine.Machine.link`); a collective's,
the bytes its schedule puts on its busiest link (:mod:`accelsim.timing.sends`) and
its slowest participant's DRAM read and write (each kind's:
:func:`accelsim.network.collectives.dram_bytes`).  Both paths take one pass over the
dependencies each (the graph's ops are in topological order), linear in ops and
dependencies, then one sort.
"""

from __future__ import annotations

import numpy as np

from accelsim.graph.memo import per_graph
from accelsim.graph.ops import CommOp, OpGraph, TransferOp
from accelsim.network.collectives import Collective
from accelsim.timing.costs import OpCosts
from accelsim.timing.machine import Machine
from accelsim.timing.memory import Memory
from accelsim.timing.sends import dram_of, link_loads


def ready_rank(graph: OpGraph, costs: OpCosts, machine: Machine) -> np.ndarray:
    """Each op's rank among ready ops (int64, a permutation of ``0..n-1``; see the
    module docstring)."""
    return ranked(graph, own_cycles(graph, costs, machine))


def ranked(graph: OpGraph, own: np.ndarray) -> np.ndarray:
    """:func:`ready_rank` of ops whose own cycles are ``own``: it reads nothing else
    but the graph's dependencies and priority."""
    n_ops = len(graph.ops)
    ahead = path_ahead(graph, own)
    behind = path_behind(graph, own)
    explicit = np.asarray(graph.priority if graph.priority else np.zeros(n_ops), np.int64)
    order = np.lexsort((np.arange(n_ops), behind, -ahead, explicit))
    rank = np.empty(n_ops, np.int64)
    rank[order] = np.arange(n_ops, dtype=np.int64)
    return rank


def own_cycles(graph: OpGraph, costs: OpCosts, machine: Machine) -> np.ndarray:
    """Each op's own cycles as the ready order estimates them (int64)."""
    processor = np.asarray(graph.processor, np.int64)
    reads = costs.dram_read_bytes.astype(np.float64)
    writes = costs.dram_ofmap_write_bytes.astype(np.float64)
    dram = np.zeros(len(graph.ops), np.float64)
    memories = _Memories(machine.dram)
    kind = memories.kind[processor]
    for j, memory in enumerate(memories.distinct):
        here = kind == j
        dram[here] = memory.bound(reads[here]) + memory.bound(writes[here], write=True)
    own = np.maximum(costs.compute_cycles.astype(np.float64), dram)
    links = _Links(machine)
    for i, op in per_graph(graph, "communicating ops", lambda: _communicating(graph)):
        if isinstance(op, TransferOp):
            own[i] = machine.link.bound(float(op.bytes))
        elif isinstance(op, CommOp):
            own[i] = links.busiest(op) + memories.slowest(op)
    return np.ceil(own).astype(np.int64)


class _Memories:
    """The distinct DRAM memories of ``dram`` (equal ones bound alike: frozen values)
    and each processor's among them."""

    def __init__(self, dram: tuple[Memory, ...]) -> None:
        number: dict[Memory, int] = {}
        self.kind = np.fromiter(
            (number.setdefault(m, len(number)) for m in dram), np.int64, len(dram)
        )
        self.distinct = tuple(number)
        self.dram = dram

    def slowest(self, op: CommOp) -> float:
        """The slowest participant's DRAM read and write of collective ``op``."""
        moved = dram_of(op)
        if len(self.distinct) == 1 and op.collective is not Collective.BROADCAST:
            (memory,), (r, w) = self.distinct, moved[0]  # every participant alike
            return float(memory.bound(float(r)) + memory.bound(float(w), write=True))
        return float(
            max(
                self.dram[p].bound(float(r)) + self.dram[p].bound(float(w), write=True)
                for p, (r, w) in zip(op.participants, moved, strict=True)
            )
        )


class _Links:
    """The links of ``machine``, and the busiest link's cycles of each distinct load of
    a collective's schedule."""

    def __init__(self, machine: Machine) -> None:
        self.machine = machine
        self.bandwidth = np.asarray([k.read_bytes_per_cycle for k in machine.links], np.float64)
        # Each load's cycles, by its id, the load kept alive while its id is in use.
        self.seen: dict[int, tuple[object, float]] = {}

    def busiest(self, op: CommOp) -> float:
        """The cycles of the link ``op``'s schedule puts the most bytes on: each link's
        bytes over its bandwidth, the largest (:func:`~accelsim.timing.sends.link_loads`)."""
        load = link_loads(self.machine, op)
        seen = self.seen.get(id(load))
        if seen is None:
            links, loads = load
            cycles = float(np.max(loads / self.bandwidth[links])) if len(links) else 0.0
            seen = self.seen[id(load)] = (load, cycles)
        return seen[1]


def _communicating(graph: OpGraph) -> list[tuple[int, TransferOp | CommOp]]:
    """The transfers and all-reduces of ``graph``, with their ids."""
    return [(i, op) for i, op in enumerate(graph.ops) if isinstance(op, TransferOp | CommOp)]


def path_ahead(graph: OpGraph, own: np.ndarray) -> np.ndarray:
    """Each op's cycles and those of the costliest chain of ops that wait for it."""
    cycles = own.tolist()
    after = [0] * len(cycles)
    for i in range(len(cycles) - 1, -1, -1):
        through = after[i] + cycles[i]
        for d in graph.ops[i].deps:
            if after[d] < through:
                after[d] = through
    ahead: np.ndarray = np.asarray(after, np.int64) + own
    return ahead


def path_behind(graph: OpGraph, own: np.ndarray) -> np.ndarray:
    """The cycles of the costliest chain of ops each op waits for."""
    cycles = own.tolist()
    before = [0] * len(cycles)
    for i, op in enumerate(graph.ops):
        longest = 0
        for d in op.deps:
            longest = max(longest, before[d] + cycles[d])
        before[i] = longest
    return np.asarray(before, np.int64)
