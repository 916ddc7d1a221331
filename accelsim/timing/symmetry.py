"""Symmetric processors (data-parallel replicas, tensor-parallel ranks) simulated
once per role.

A data-parallel step (:func:`accelsim.mapping.placement.data_parallel`) runs a
replica on every processor; a tensor-parallel one
(:func:`accelsim.mapping.tensor_placement.tensor_parallel`) runs the same sharded
rank on every processor of a group, with all-reduces over the group (and, with
data-parallel replicas of the groups, the gradients' all-reduces over the ranks of
the same place in every replica).  Processors of the same **role** do the same
work: the same ops in the same order, with the same costs and the same
dependencies, on their own ops and on their collectives, numbered among the
collectives each takes part in, which match in bytes, group size and the ops they
wait for.  Equal local batches give that; an uneven split (``batch % P != 0``) has
two roles, the processors with one sample more and the others.  Each collective
then stands for a **class**: the collectives that its participants'
representatives run in its place (a group's all-reduce for every group's).  When,
moreover,

- every processor has its own DRAM (``dram.sharing: per_processor``): a replica's
  traffic meets no other replica's;
- the step's only communication is all-reduces, reduce-scatters and all-gathers
  (:data:`SYMMETRIC`: no point-to-point transfer, no other kind of collective, none
  pipelined in chunks), each of whose participants maps it onto the same collective;
- every step of every class of collectives puts the same sends, in the same order,
  on every link of a link class (the links that are one another's translations:
  :func:`accelsim.network.symmetry.link_classes`), each link's sends from one
  collective of the class, so that all links of a class are in the same state
  throughout,

the processors of a role run the same events at the same cycles, and simulating one
of each role is simulating all.  The step is then simulated on one representative
of each role (the role's first processor) with each class's collective over its
simulated participants: its DRAM phases on their memories and, step by step, the
sends of its whole class on processor 0's links alone, each carrying every send of
the full step routed over it (:class:`~accelsim.timing.representatives.Representatives`).
Every other processor's ops, and every other collective, take their
representative's start and end cycles.  The ops keep the order of their ranks in
the whole step (:mod:`accelsim.timing.ready`), so the engines take them in the same
order.

Anything else (a shared DRAM, a halving-doubling or a ring over the processors of a
torus, groups that are blocks of a torus, which load the links unevenly, a graph
with transfers or priorities) is simulated in full.
"""

from __future__ import annotations

import functools
import itertools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace

import numpy as np

from accelsim.config.run import EngineKind
from accelsim.graph.ops import CommOp, OpGraph, TensorKey, TransferOp, replaced
from accelsim.graph.passes import subgraph
from accelsim.network.collectives import Collective
from accelsim.network.symmetry import link_classes
from accelsim.timing.costs import OpCosts
from accelsim.timing.machine import Machine
from accelsim.timing.ready import ready_rank
from accelsim.timing.representatives import Representatives
from accelsim.timing.sends import NetStep, distinct_steps, group, lowered, on_ring, pipelined
from accelsim.timing.tile_groups import simulate_grouped
from accelsim.timing.trace import Trace, build_trace

UNBALANCED = "its all-reduces load the links of one class unevenly (topology or algorithm)"
"""Why a step whose collectives load the links of a class unevenly is simulated in full."""

SYMMETRIC = (Collective.ALL_REDUCE, Collective.REDUCE_SCATTER, Collective.ALL_GATHER)
"""The collectives whose participants all give and keep alike (no root, the same
bytes each): a step may be simulated on its representatives with them."""


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


def roles(graph: OpGraph, costs: OpCosts, machine: Machine) -> Roles | str:
    """The roles of ``graph``'s processors, or why simulating one processor of each
    would not give the full step's timing (see the module docstring)."""
    processors = machine.processors
    if processors < 2:
        return "one processor"
    comms = collectives(graph, machine)
    if isinstance(comms, str):
        return comms
    is_comm = np.zeros(len(graph.ops), bool)
    is_comm[comms] = True
    processor = np.asarray(graph.processor, np.int64)
    ops_of, position = _ops_of(processor, is_comm, processors)
    calls = _Calls.of(graph, comms, processors)
    shapes = _shapes(graph, processor, is_comm, position, processors, calls)
    signs = calls.signatures(graph, position)
    if shapes is None or signs is None:
        return "an op or a collective waits for a collective outside its processors' groups"
    work = _work(costs)
    copies: list[int] = []
    distinct: list[int] = []  # the processors simulated so far, in order
    for p in range(processors):
        found = next(
            (q for q in distinct if signs[p] == signs[q] and _same(p, q, ops_of, shapes, work)),
            p,
        )
        copies.append(found)
        if found == p:
            distinct.append(p)
    if len(set(copies)) == processors:
        return "no two processors do the same work"
    counterpart = np.arange(len(graph.ops), dtype=np.int64)
    for p, q in enumerate(copies):
        if p != q:
            counterpart[ops_of[p]] = ops_of[q]
    for c in comms:
        images = {
            calls.of_processor[copies[p]][calls.local[c, p]] for p in _comm(graph, c).participants
        }
        if len(images) > 1:
            return "a collective's participants run different collectives in its place"
        counterpart[c] = images.pop()
    kept = [c for c in comms if counterpart[c] == c]
    if len({_key(_comm(graph, c), copies) for c in kept}) < len(kept):
        return "two of its simulated collectives could not be told apart"
    if not balanced(graph, comms, counterpart, machine):
        return UNBALANCED
    return Roles(tuple(copies), counterpart)


def collectives(graph: OpGraph, machine: Machine) -> list[int] | str:
    """The collectives of ``graph``, or why its processors could not be simulated as
    representatives of others whatever their work: its ops ordered by priority, a
    DRAM shared, or communication other than collectives that every participant
    gives and keeps alike (a transfer, another kind of collective, one pipelined in
    chunks)."""
    if graph.priority:
        return "its ops are ordered by priority"
    if len({id(m) for m in machine.dram}) < machine.processors:
        return "its processors share a DRAM (dram.sharing: per_processor gives each its own)"
    comms: list[int] = []
    for i, op in enumerate(graph.ops):
        if isinstance(op, TransferOp):
            return "it sends point-to-point transfers"
        if isinstance(op, CommOp):
            if op.collective not in SYMMETRIC:
                return (
                    "it runs a collective other than all-reduce, reduce-scatter and"
                    f" all-gather ({op.collective.value})"
                )
            if pipelined(machine, op):
                return "its collectives are pipelined in chunks across the network's dimensions"
            comms.append(i)
    return comms


def _key(op: CommOp, copies: Sequence[int]) -> tuple[TensorKey, tuple[int, ...]]:
    """What tells a simulated collective from the others in the step simulated on the
    representatives: its tensor and its simulated participants."""
    return op.tensor.key, tuple(p for p in op.participants if copies[p] == p)


@dataclass(frozen=True)
class _Calls:
    """The collectives each processor takes part in, in op order
    (``of_processor[p]``), and each one's place there (``local[c, p]``; as arrays,
    ``place[i]`` for the ascending ``key[i] = c * processors + p``)."""

    of_processor: tuple[tuple[int, ...], ...]
    local: dict[tuple[int, int], int]
    key: np.ndarray
    place: np.ndarray

    @staticmethod
    def of(graph: OpGraph, comms: Sequence[int], processors: int) -> _Calls:
        of_processor: list[list[int]] = [[] for _ in range(processors)]
        local: dict[tuple[int, int], int] = {}
        for c in comms:
            for p in _comm(graph, c).participants:
                local[c, p] = len(of_processor[p])
                of_processor[p].append(c)
        key = np.fromiter((c * processors + p for c, p in local), np.int64, len(local))
        place = np.fromiter(local.values(), np.int64, len(local))
        order = np.argsort(key)
        return _Calls(tuple(map(tuple, of_processor)), local, key[order], place[order])

    def signatures(
        self, graph: OpGraph, position: np.ndarray
    ) -> list[list[tuple[object, ...]]] | None:
        """What each processor's collectives are, in order: their bytes, their group's
        size, the positions of the processor's ops they wait for, and the places among
        its collectives of the collectives they wait for; None where one waits for a
        processor outside its group or a collective one of its processors is not in."""
        out: list[list[tuple[object, ...]]] = [[] for _ in self.of_processor]
        for c in sorted({c for calls in self.of_processor for c in calls}):
            op = _comm(graph, c)
            own: dict[int, set[int]] = {}
            waits: list[int] = []
            for d in op.deps:
                if isinstance(graph.ops[d], CommOp):
                    waits.append(d)
                else:
                    own.setdefault(graph.processor[d], set()).add(int(position[d]))
            if not own.keys() <= set(op.participants):
                return None
            for p in op.participants:
                if any((d, p) not in self.local for d in waits):
                    return None
                calls = (self.local[d, p] for d in waits)
                mine = frozenset(own.get(p, ()))
                out[p].append((op.tensor.bytes, len(op.participants), mine, *calls))
        return out


def _ops_of(
    processor: np.ndarray, is_comm: np.ndarray, processors: int
) -> tuple[list[np.ndarray], np.ndarray]:
    """Each processor's ops (collectives aside) in order, and each op's position among
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
    calls: _Calls,
) -> list[np.ndarray] | None:
    """What each processor's ops wait for, op by op in order: the count of its
    dependencies, then each by place, another op of the processor as ``-1 - its
    position`` there, a collective as its place among the processor's collectives;
    None where an op waits for a collective its processor is not in."""
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
    waiter = np.repeat(np.arange(n_ops), counts)
    at = np.arange(len(deps)) + waiter + 1
    value = -1 - position[deps]
    on_comm = np.flatnonzero(is_comm[deps] & ~is_comm[waiter])
    key = deps[on_comm] * processors + processor[waiter[on_comm]]
    at_key = np.minimum(np.searchsorted(calls.key, key), max(len(calls.key) - 1, 0))
    if len(key) and not np.array_equal(calls.key[at_key], key):
        return None  # an op waits for a collective its processor is not in
    value[on_comm] = calls.place[at_key]
    record[at] = value
    owner = np.repeat(np.where(is_comm, processors, processor), 1 + counts)
    order = np.argsort(owner, kind="stable")
    starts = np.concatenate(([0], np.cumsum(np.bincount(owner, minlength=processors + 1))))
    return [record[order[starts[p] : starts[p + 1]]] for p in range(processors)]


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
    work: np.ndarray,
) -> bool:
    """Whether processors ``p`` and ``q`` do the same work."""
    return (
        len(ops_of[p]) == len(ops_of[q])
        and bool(np.array_equal(shapes[p], shapes[q]))
        and bool(np.array_equal(work[ops_of[p]], work[ops_of[q]]))
    )


def _classes(comms: Iterable[int], counterpart: np.ndarray) -> dict[int, list[int]]:
    """Each simulated collective's class: the collectives timed as it, in order."""
    out: dict[int, list[int]] = {}
    for c in comms:
        out.setdefault(int(counterpart[c]), []).append(c)
    return out


def balanced(
    graph: OpGraph, comms: Sequence[int], counterpart: np.ndarray, machine: Machine
) -> bool:
    """Whether every step of every class of collectives loads every link of a link
    class alike, each link by one collective of the class.

    A class of one collective over every processor of a one-level ring in order, by
    the ring (:func:`~accelsim.timing.sends.on_ring`), is: each step puts one send of the
    same piece on every link, and the ring's links are one class.  Any other class
    is checked send by send, each distinct step once."""
    links = link_classes(machine.network)
    size = Counter(links)
    seen: set[tuple[int, ...]] = set()
    for members in _classes(comms, counterpart).values():
        if len(members) == 1 and _rings_everyone(machine, _comm(graph, members[0])):
            continue
        ran = [lowered(machine, _comm(graph, c)) for c in members]
        if len({len(steps) for steps in ran}) > 1:
            return False
        for steps in _distinct(ran):
            key = tuple(map(id, steps))
            if key not in seen:
                seen.add(key)
                if not _even(steps, links, size):
                    return False
    return True


def _rings_everyone(machine: Machine, op: CommOp) -> bool:
    """Whether ``op`` runs by the ring over every processor of a one-level ring."""
    return group(op) == _everyone(machine.processors) and on_ring(machine, op)


@functools.lru_cache(maxsize=8)
def _everyone(processors: int) -> tuple[int, ...]:
    """Every processor, in order."""
    return tuple(range(processors))


def _distinct(ran: Sequence[tuple[NetStep, ...]]) -> Iterable[tuple[NetStep, ...]]:
    """The steps of collectives ``ran`` run together, one tuple per step; of a single
    collective, each distinct step (by object) once."""
    if len(ran) == 1:
        return ((step,) for step in distinct_steps(ran[0]).values())
    return zip(*ran, strict=True)


def _comm(graph: OpGraph, c: int) -> CommOp:
    op = graph.ops[c]
    assert isinstance(op, CommOp)
    return op


def _even(steps: Sequence[NetStep], classes: Sequence[int], size: Counter[int]) -> bool:
    """Whether ``steps`` (one step of each collective of a class) put the same sends,
    in the same order, on each link of a link class, each link's from one of them."""
    on: dict[int, list[tuple[int, int]]] = {}
    by: dict[int, int] = {}
    for k, step in enumerate(steps):
        for s in step:
            if by.setdefault(s.link, k) != k:
                return False
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
    kept = set(simulated)
    comms = [i for i, op in enumerate(graph.ops) if isinstance(op, CommOp)]
    keep = [
        i
        for i, op in enumerate(graph.ops)
        if found.counterpart[i] == i and (isinstance(op, CommOp) or graph.processor[i] in kept)
    ]
    groups = {
        _key(_comm(graph, c), found.copies): tuple(_comm(graph, m).participants for m in timed)
        for c, timed in _classes(comms, found.counterpart).items()
    }
    inner = on_representatives(
        subgraph(graph, keep), _taken(costs, keep), machine, kind, simulated, groups
    )
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


def on_representatives(
    small: OpGraph,
    small_costs: OpCosts,
    machine: Machine,
    kind: EngineKind,
    simulated: tuple[int, ...],
    groups: Mapping[tuple[TensorKey, tuple[int, ...]], tuple[tuple[int, ...], ...]],
) -> Trace:
    """``small`` (the ops of the processors ``simulated`` and the collectives simulated,
    each over its whole group) simulated on those processors alone, each collective
    booking the sends of the ``groups`` of its class (keyed by its tensor and its
    simulated participants) on processor 0's links."""
    kept = set(simulated)
    # The kept ops rank among themselves as in the whole step: a processor's paths
    # ahead and behind are its representative's, and the collectives' over their
    # whole group (their own cycles count their participants).
    rank = ready_rank(small, small_costs, machine)
    cut: dict[int, tuple[int, ...]] = {}

    def simulated_of(group: tuple[int, ...]) -> tuple[int, ...]:
        """``group``'s simulated participants, worked out once per group object (the
        collectives over one group share its tuple)."""
        if id(group) not in cut:
            cut[id(group)] = tuple(filter(kept.__contains__, group))
        return cut[id(group)]

    small = replace(
        small,
        ops=tuple(
            replaced(
                op,
                participants=simulated_of(op.participants),
                group_size=len(op.participants),
            )
            if isinstance(op, CommOp)
            else op
            for op in small.ops
        ),
        priority=tuple(rank.tolist()),
    )
    rep = Representatives(simulated, frozenset(link_classes(machine.network)), groups)
    return simulate_grouped(small, small_costs, replace(machine, represented=rep), kind)


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
