"""Symmetric data-parallel replicas simulated once per role.

A data-parallel step (:func:`accelsim.mapping.placement.data_parallel`) runs a
replica on every processor.  Replicas of the same **role** do the same work: the
same ops in the same order, with the same costs and the same dependencies (on their
own ops and on the same all-reduces), which equal local batches give.  An uneven
split (``batch % P != 0``) has two roles, the processors with one sample more and
the others.  When, moreover,

- every processor has its own DRAM (``dram.sharing: per_processor``): a replica's
  traffic meets no other replica's;
- the step's only communication is all-reduces over every processor (no
  point-to-point transfer, no other kind of collective, none pipelined in chunks);
- every step of every all-reduce puts the same sends, in the same order, on every
  link of a class (the links that are one another's translations:
  :func:`accelsim.network.symmetry.link_classes`), so that all links of a class
  are in the same state throughout,

the replicas of a role run the same events at the same cycles, and simulating one
of each role is simulating all.  The step is then simulated on one representative
of each role (the role's first processor) with the all-reduces over the
representatives: their DRAM phases on the representatives' memories and their
steps' sends on processor 0's links alone, each carrying every send of the full
step routed over it (:class:`~accelsim.timing.representatives.Representatives`).
Every other processor's ops take their representative's start and end cycles.  The
ops keep the order of their ranks in the whole step (:mod:`accelsim.timing.ready`),
so the engines take them in the same order.

Anything else (a shared DRAM, a halving-doubling or a ring over the processors of a
torus, which load the links unevenly, a graph with transfers or priorities) is
simulated in full.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import numpy as np

from accelsim.config.run import EngineKind
from accelsim.graph.ops import CommOp, OpGraph, TransferOp, replaced
from accelsim.graph.passes import subgraph
from accelsim.network.collectives import Collective
from accelsim.network.symmetry import link_classes
from accelsim.timing.costs import OpCosts
from accelsim.timing.machine import Machine
from accelsim.timing.ready import ready_rank
from accelsim.timing.representatives import Representatives
from accelsim.timing.sends import NetStep, lowered, pipelined
from accelsim.timing.tile_groups import simulate_grouped
from accelsim.timing.trace import Trace, build_trace


@dataclass(frozen=True)
class Roles:
    """Each processor's representative (``copies[p]``: the processor whose timing
    processor ``p`` takes, ``p`` itself when it is simulated) and each op's
    counterpart on its processor's representative (``counterpart[i]``: ``i`` for an
    op that is simulated and for an all-reduce)."""

    copies: tuple[int, ...]
    counterpart: np.ndarray

    @property
    def simulated(self) -> tuple[int, ...]:
        return tuple(p for p, q in enumerate(self.copies) if p == q)


def roles(graph: OpGraph, costs: OpCosts, machine: Machine) -> Roles | None:
    """The roles of ``graph``'s processors, or None where simulating one processor of
    each would not give the full step's timing (see the module docstring)."""
    processors = machine.processors
    if processors < 2 or graph.priority or len({id(m) for m in machine.dram}) < processors:
        return None
    everyone = tuple(range(processors))
    comms: list[int] = []
    for i, op in enumerate(graph.ops):
        if isinstance(op, TransferOp):
            return None
        if isinstance(op, CommOp):
            if (
                op.participants != everyone
                or op.collective is not Collective.ALL_REDUCE
                or pipelined(machine, op)
            ):
                return None
            comms.append(i)
    is_comm = np.zeros(len(graph.ops), bool)
    is_comm[comms] = True
    processor = np.asarray(graph.processor, np.int64)
    ops_of, position = _ops_of(processor, is_comm, processors)
    shapes = _shapes(graph, processor, is_comm, position, processors)
    waits = [_waits(graph, c, position) for c in comms]
    work = _work(costs)
    copies: list[int] = []
    for p in range(processors):
        copies.append(
            next(
                (q for q in dict.fromkeys(copies) if _same(p, q, ops_of, shapes, waits, work)),
                p,
            )
        )
    if len(set(copies)) == processors or not _balanced(graph, comms, machine):
        return None
    counterpart = np.arange(len(graph.ops), dtype=np.int64)
    for p, q in enumerate(copies):
        if p != q:
            counterpart[ops_of[p]] = ops_of[q]
    return Roles(tuple(copies), counterpart)


def _ops_of(
    processor: np.ndarray, is_comm: np.ndarray, processors: int
) -> tuple[list[np.ndarray], np.ndarray]:
    """Each processor's ops (all-reduces aside) in order, and each op's position among
    its processor's."""
    ops = np.flatnonzero(~is_comm)
    owner = processor[ops]
    by_owner = ops[np.argsort(owner, kind="stable")]
    counts = np.bincount(owner, minlength=processors)
    starts = np.concatenate(([0], np.cumsum(counts)))
    position = np.zeros(len(processor), np.int64)
    position[by_owner] = np.arange(len(by_owner)) - np.repeat(starts[:-1], counts)
    return [by_owner[starts[p] : starts[p + 1]] for p in range(processors)], position


def _shapes(
    graph: OpGraph,
    processor: np.ndarray,
    is_comm: np.ndarray,
    position: np.ndarray,
    processors: int,
) -> list[np.ndarray]:
    """What each processor's ops wait for, op by op in order: the count of its
    dependencies, then each by place, another op of the processor as ``-1 - its
    position`` there, an all-reduce as its id."""
    n_ops = len(graph.ops)
    counts = np.fromiter(map(len, (op.deps for op in graph.ops)), np.int64, n_ops)
    deps = np.fromiter(
        itertools.chain.from_iterable(op.deps for op in graph.ops), np.int64, int(counts.sum())
    )
    first = np.concatenate(([0], np.cumsum(1 + counts)))
    record = np.empty(int(first[-1]), np.int64)
    record[first[:-1]] = counts
    # Dependency e of op i goes right after the ops before i and their counts, and
    # i's count: at e + i + 1.
    at = np.arange(len(deps)) + np.repeat(np.arange(n_ops), counts) + 1
    record[at] = np.where(is_comm[deps], deps, -1 - position[deps])
    owner = np.repeat(np.where(is_comm, processors, processor), 1 + counts)
    order = np.argsort(owner, kind="stable")
    starts = np.concatenate(([0], np.cumsum(np.bincount(owner, minlength=processors + 1))))
    return [record[order[starts[p] : starts[p + 1]]] for p in range(processors)]


def _waits(graph: OpGraph, c: int, position: np.ndarray) -> dict[int, frozenset[int]]:
    """The ops all-reduce ``c`` waits for, by processor, as their positions there
    (an all-reduce it waits for, every processor's, aside)."""
    out: dict[int, set[int]] = {}
    for d in graph.ops[c].deps:
        if isinstance(graph.ops[d], CommOp):
            continue
        out.setdefault(graph.processor[d], set()).add(int(position[d]))
    return {p: frozenset(s) for p, s in out.items()}


def _work(costs: OpCosts) -> np.ndarray:
    """Every cost of each op, one row per op."""
    columns = [
        getattr(costs, f.name)
        for f in fields(costs)
        if isinstance(getattr(costs, f.name), np.ndarray)
    ]
    return np.column_stack([c.astype(np.float64) for c in columns])


def _same(
    p: int,
    q: int,
    ops_of: Sequence[np.ndarray],
    shapes: Sequence[np.ndarray],
    waits: Sequence[dict[int, frozenset[int]]],
    work: np.ndarray,
) -> bool:
    """Whether processors ``p`` and ``q`` do the same work."""
    return (
        len(ops_of[p]) == len(ops_of[q])
        and bool(np.array_equal(shapes[p], shapes[q]))
        and all(w.get(p) == w.get(q) for w in waits)
        and bool(np.array_equal(work[ops_of[p]], work[ops_of[q]]))
    )


def _balanced(graph: OpGraph, comms: Sequence[int], machine: Machine) -> bool:
    """Whether every step of every all-reduce loads every link of a class alike."""
    classes = link_classes(machine.network)
    size = Counter(classes)
    seen: set[int] = set()
    for c in comms:
        op = graph.ops[c]
        assert isinstance(op, CommOp)
        for step in lowered(machine, op):
            if id(step) not in seen:
                seen.add(id(step))
                if not _even(step, classes, size):
                    return False
    return True


def _even(step: NetStep, classes: Sequence[int], size: Counter[int]) -> bool:
    """Whether ``step`` puts the same sends, in the same order, on each link of a class."""
    on: dict[int, list[tuple[int, int]]] = {}
    for s in step:
        on.setdefault(s.link, []).append((s.bytes, s.latency_cycles))
    loaded: Counter[int] = Counter()
    for link, sends in on.items():
        home = classes[link]
        if on.get(home) != sends:
            return False
        loaded[home] += 1
    return all(loaded[home] == size[home] for home in loaded)


def simulate(
    graph: OpGraph, costs: OpCosts, machine: Machine, kind: EngineKind, found: Roles
) -> Trace:
    """The step of ``graph`` simulated on its representatives (``found``), every
    processor's ops timed as its representative's (:func:`roles` found them)."""
    simulated = found.simulated
    keep = [
        i
        for i, op in enumerate(graph.ops)
        if isinstance(op, CommOp) or found.copies[graph.processor[i]] == graph.processor[i]
    ]
    # The kept ops rank among themselves as in the whole step: a processor's paths
    # ahead and behind are its representative's, and the all-reduces' over every
    # processor (their own cycles count their participants).
    small, small_costs = subgraph(graph, keep), _taken(costs, keep)
    rank = ready_rank(small, small_costs, machine)
    small = replace(
        small,
        ops=tuple(
            replaced(op, participants=simulated) if isinstance(op, CommOp) else op
            for op in small.ops
        ),
        priority=tuple(rank.tolist()),
    )
    rep = Representatives(
        tuple(range(machine.processors)), simulated, frozenset(link_classes(machine.network))
    )
    inner = simulate_grouped(small, small_costs, replace(machine, represented=rep), kind)
    where = np.full(len(graph.ops), -1, np.int64)
    where[keep] = np.arange(len(keep), dtype=np.int64)
    index = where[found.counterpart]
    return replace(
        build_trace(
            graph,
            costs,
            machine.processors,
            inner.start_cycle[index],
            inner.end_cycle[index],
            inner.events,
            inner.engine,
        ),
        copies=found.copies,
    )


def _taken(costs: OpCosts, keep: Sequence[int]) -> OpCosts:
    """``costs`` of the ops ``keep`` alone."""
    index = np.asarray(keep, np.int64)
    return replace(
        costs,
        **{
            f.name: getattr(costs, f.name)[index]
            for f in fields(costs)
            if isinstance(getattr(costs, f.name), np.ndarray)
        },
    )
