"""What the engines book on the links: each collective and point-to-point transfer of a
step lowered to **sends**, the bytes each of its transfers puts on each link of its
route, step by step.

The machine's links are the network's directed links
(:meth:`accelsim.network.topology.Network.links`), numbered in that order
(:attr:`accelsim.timing.machine.Machine.links`).  A collective (each kind of
:class:`~accelsim.graph.ops.CommOp`) runs its kind's schedule by
``interconnect.algorithm`` (``fastest`` where the group cannot run the one named:
:func:`accelsim.network.cost.plan`) and a transfer is one step of its bytes
(:mod:`accelsim.network.algorithms`).  Every transfer of a step is a send of its
bytes on each link of its route, carrying the route's latency: the engines book all
of a transfer's links when the step starts, each on its own first-come-first-served
channel after what it already carries, and the transfer arrives the route's
latencies after the last of them is done (cut-through: the bytes stream along the
route behind the head, so the bandwidth term is paid once, not per hop).

On a ``ring`` of one level (no ``levels``) the lowering is the ring's as it always
was: a collective is the ring algorithm over its participants whatever
``interconnect.algorithm`` says, and a transfer, like each transfer of the ring
algorithm, is one send on its source's one outgoing link (link ``p`` is processor
``p``'s), whatever its destination.

A step simulated on representatives (:attr:`Machine.represented
<accelsim.timing.machine.Machine.represented>`) books of each collective the sends
of its whole class (the collectives over the groups it stands for) on the
representatives' links alone (:mod:`accelsim.timing.symmetry`).

:func:`accelsim.timing.send_table.send_table` flattens the sends of a graph's ops
into arrays for the compiled engine, once per graph object and network.

On a one-level ring a reduce-scatter, an all-gather and an all-reduce repeat one
shift of one piece (:func:`accelsim.network.algorithms.ring_shifts`): each member
of the group sends the piece on its own link every step.  Their represented steps,
each link's load and their bytes are worked out from that closed form and the
group (:func:`_ring_form`), never from the group's transfers, so their cost does not
grow with the group beyond reading it.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from accelsim.config.interconnect import Algorithm
from accelsim.graph.ops import CommOp, TransferOp
from accelsim.network.algorithms import lower, ring_shifts
from accelsim.network.collectives import Collective, Schedule, Step, dram_bytes
from accelsim.network.cost import phase_cycles, pipeline_order, plan
from accelsim.network.topology import Link, Network
from accelsim.timing.machine import Machine


@dataclass(frozen=True)
class Send:
    """``bytes`` of one transfer on link ``link``; the transfer's route takes
    ``latency_cycles``."""

    link: int
    bytes: int
    latency_cycles: int


NetStep = tuple[Send, ...]
"""The sends of one step, booked together; the step ends with its last arrival."""

ALIKE_SENDS = 4
"""The fewest sends of a step the engines may book as one (:func:`alike`): fewer
cost as little booked one by one."""


@dataclass(frozen=True)
class Alike:
    """A step whose sends are all alike: one on each link of ``links``, the links all
    of one bandwidth, each send of ``bytes`` on a route of ``latency_cycles``.

    Booked on links that are all free by the same cycle (each ``max(now, free)``
    the same), every send holds its link to the same cycle, and the step's last
    arrival is that cycle plus ``latency_cycles``: the engines book such a step once
    for all its links (:mod:`accelsim.timing.links`)."""

    links: frozenset[int]
    bytes: int
    latency_cycles: int


def alike(step: NetStep, bandwidth: Sequence[float]) -> Alike | None:
    """``step`` as an :class:`Alike` on links of ``bandwidth`` (each link's), or None
    where its sends are not all alike or are fewer than :data:`ALIKE_SENDS`."""
    if len(step) < ALIKE_SENDS:
        return None
    links = frozenset(s.link for s in step)
    first = step[0]
    if len(links) < len(step) or any(
        (s.bytes, s.latency_cycles, bandwidth[s.link])
        != (first.bytes, first.latency_cycles, bandwidth[first.link])
        for s in step
    ):
        return None
    return Alike(links, first.bytes, first.latency_cycles)


@dataclass(frozen=True)
class _Lowering:
    """How a machine's network lowers communication: its ``network``, whether it is
    the one-level ``ring`` (``ring``) and the all-reduce's ``algorithm``."""

    network: Network
    ring: bool
    algorithm: Algorithm

    @staticmethod
    def of(machine: Machine) -> _Lowering:
        spec = machine.hardware.interconnect
        return _Lowering(machine.network, spec.is_ring, spec.algorithm)


def lowered(machine: Machine, op: CommOp | TransferOp) -> tuple[NetStep, ...]:
    """The steps of sends of ``op`` (a collective or a transfer) on ``machine``."""
    how = _Lowering.of(machine)
    if isinstance(op, TransferOp):
        return _steps(how, Collective.POINT_TO_POINT, (op.source, op.destination), op.bytes)
    rep = machine.represented
    if rep is not None:
        return _represented(how, rep.groups_of(op), rep.links, op.collective, op.tensor.bytes)
    return _steps(how, op.collective, group(op), op.tensor.bytes)


def least_cycles(
    machine: Machine, collective: Collective, group: tuple[int, ...], size_bytes: int
) -> int:
    """The fewest cycles the engines can take for ``collective`` of ``size_bytes`` over
    ``group`` on ``machine`` (not represented), from its steps of sends.

    The engines book a step's sends when the step before it has ended, each on its
    link after what the link already carries, for ``ceil(bytes / bandwidth)`` cycles,
    and it arrives its route's latency later (:mod:`accelsim.timing.links`): so a step
    ends no earlier than, on each of its links, the cycles of its sends there plus the
    least latency among them, and traffic of other ops only delays it.  A pipelined
    schedule's steps overlap: it takes at least that over all its sends at once."""
    how = _Lowering.of(machine)
    steps = _steps(how, collective, group, size_bytes)
    bandwidth = [link.read_bytes_per_cycle for link in machine.links]
    if not how.ring and _schedule(how, collective, group, size_bytes).chunks > 1:
        return _least_step([send for step in steps for send in step], bandwidth)
    timed: dict[int, int] = {}
    for step in steps:
        if id(step) not in timed:
            timed[id(step)] = _least_step(step, bandwidth)
    return sum(timed[id(step)] for step in steps)


def _least_step(sends: Sequence[Send], bandwidth: Sequence[float]) -> int:
    """The fewest cycles of ``sends`` booked together on free links."""
    held: dict[int, int] = {}
    latency: dict[int, int] = {}
    for send in sends:
        held[send.link] = held.get(send.link, 0) + math.ceil(send.bytes / bandwidth[send.link])
        latency[send.link] = min(latency.get(send.link, send.latency_cycles), send.latency_cycles)
    return max((held[link] + latency[link] for link in held), default=0)


def group(op: CommOp) -> tuple[int, ...]:
    """The group ``op`` runs on: its participants, a broadcast's from its root on (the
    schedules send a broadcast from the group's first processor)."""
    if op.root is None:
        return op.participants
    at = op.participants.index(op.root)
    return op.participants[at:] + op.participants[:at]


def schedule_of(machine: Machine, op: CommOp) -> Schedule:
    """The schedule ``op`` runs on ``machine``: its transfers, step by step."""
    return _schedule(_Lowering.of(machine), op.collective, group(op), op.tensor.bytes)


def link_loads(machine: Machine, op: CommOp) -> tuple[np.ndarray, np.ndarray]:
    """Each link ``op``'s sends use, in the order they first use it, and the bytes
    they put on it over all its steps (worked out once per kind, group, size and
    network; read-only arrays)."""
    return _link_loads(_Lowering.of(machine), op.collective, group(op), op.tensor.bytes)


@functools.lru_cache(maxsize=4096)
def _link_loads(
    how: _Lowering, collective: Collective, group: tuple[int, ...], size_bytes: int
) -> tuple[np.ndarray, np.ndarray]:
    form = _ring_form(how, collective, group, size_bytes)
    if form is not None:  # each member's link, the piece every step
        count, piece = form
        links, loads = np.asarray(group, np.int64), np.full(len(group), count * piece, np.int64)
    else:
        steps = _steps(how, collective, group, size_bytes)
        repeats = Counter(map(id, steps))  # a step repeated as one object counted once
        load: Counter[int] = Counter()
        for step in distinct_steps(steps).values():
            for send in step:
                load[send.link] += send.bytes * repeats[id(step)]
        links = np.fromiter(load, np.int64, len(load))
        loads = np.fromiter(load.values(), np.int64, len(load))
    links.flags.writeable = loads.flags.writeable = False
    return links, loads


def schedule_bytes(machine: Machine, op: CommOp) -> int:
    """Every byte the transfers of ``op``'s schedule send (:attr:`Schedule.bytes`),
    worked out once per kind, group, size and network."""
    return _schedule_bytes(_Lowering.of(machine), op.collective, group(op), op.tensor.bytes)


@functools.lru_cache(maxsize=4096)
def _schedule_bytes(
    how: _Lowering, collective: Collective, group: tuple[int, ...], size_bytes: int
) -> int:
    form = _ring_form(how, collective, group, size_bytes)
    if form is not None:
        count, piece = form
        return count * len(group) * piece
    return _schedule(how, collective, group, size_bytes).bytes


def _ring_form(
    how: _Lowering, collective: Collective, group: tuple[int, ...], size_bytes: int
) -> tuple[int, int] | None:
    """The steps of ``collective`` on a one-level ring in closed form (their count,
    each member's piece each step: :func:`~accelsim.network.algorithms.ring_shifts`),
    or None where it is not one of those."""
    if not how.ring or len(group) < 2:
        return None
    return ring_shifts(collective, len(group), size_bytes)


def on_ring(machine: Machine, op: CommOp) -> bool:
    """Whether ``op``'s steps on ``machine`` are a one-level ring's closed form: each
    member of its group sending one piece on its own link every step, the same."""
    how = _Lowering.of(machine)
    return _ring_form(how, op.collective, group(op), op.tensor.bytes) is not None


def distinct_steps(steps: Sequence[NetStep]) -> dict[int, NetStep]:
    """Each distinct step of ``steps`` (a step repeated, as a ring's are, is one
    object) by its id, in the order they first appear."""
    return dict(zip(map(id, steps), steps, strict=True))


def dram_of(op: CommOp) -> tuple[tuple[int, int], ...]:
    """The DRAM bytes each participant of ``op`` reads before it and writes after it
    (:func:`accelsim.network.collectives.dram_bytes`, pieces of its ``group_size``
    when it is set), in ``participants`` order."""
    root, n, size = group(op)[0], op.group_size or len(op.participants), op.tensor.bytes
    if op.collective is not Collective.BROADCAST:  # every participant alike
        return (dram_bytes(op.collective, size, n, False),) * len(op.participants)
    return tuple(dram_bytes(op.collective, size, n, p == root) for p in op.participants)


def dram_totals(op: CommOp) -> tuple[int, int]:
    """The DRAM bytes every participant of ``op`` reads and writes, summed
    (:func:`dram_of`)."""
    moved = dram_of(op)
    if op.collective is not Collective.BROADCAST:  # every participant alike
        read, write = moved[0] if moved else (0, 0)
        return len(moved) * read, len(moved) * write
    return sum(r for r, _ in moved), sum(w for _, w in moved)


@dataclass(frozen=True)
class Item:
    """One chunk's phase of a pipelined collective: the op's :func:`lowered` steps
    ``first`` to ``first + count``, run one after the other once the ``waits`` items
    before it are done (the chunk's previous phase, the dimension's previous phase);
    ``successors`` are the items that wait for it, in order."""

    first: int
    count: int
    waits: int
    successors: tuple[int, ...]


def pipelined(machine: Machine, op: CommOp) -> tuple[Item, ...]:
    """The items of ``op``, a collective whose schedule cuts its buffer into chunks
    pipelined across the dimensions (none for any other), chunk after chunk.

    Each dimension runs its phases in the order
    :func:`accelsim.network.cost.pipeline_order` starts them without contention, so an
    item starts when both the chunk's previous phase and the previous phase on its
    dimension in that order are done: without contention the engines take
    :func:`accelsim.network.cost.pipeline_cycles`.
    """
    if machine.represented is not None:
        return ()  # symmetry is only taken where no collective is pipelined
    how = _Lowering.of(machine)
    if how.ring:
        return ()  # no schedule on a one-level ring is cut into chunks (multi_dim's are)
    return _items(how, op.collective, group(op), op.tensor.bytes)


@functools.lru_cache(maxsize=4096)
def _items(
    how: _Lowering, collective: Collective, group: tuple[int, ...], size_bytes: int
) -> tuple[Item, ...]:
    schedule = _schedule(how, collective, group, size_bytes)
    if schedule.chunks == 1:
        return ()
    phases = schedule.phases
    per_chunk = sum(len(phase.steps) for phase in phases)
    offsets = [sum(len(p.steps) for p in phases[:i]) for i in range(len(phases))]
    dimensions = [phase.dimension for phase in phases]
    order = pipeline_order(phase_cycles(how.network, schedule), dimensions, schedule.chunks)
    before: dict[int, list[int]] = {}  # each item's items to wait for
    last_on: dict[int, int] = {}  # the item each dimension ran last
    for chunk, i in order:
        k = chunk * len(phases) + i
        waits = [k - 1] if i else []
        prev = last_on.get(dimensions[i])
        if prev is not None and prev not in waits:
            waits.append(prev)
        before[k] = waits
        last_on[dimensions[i]] = k
    after: dict[int, list[int]] = {k: [] for k in before}
    for k, waits in before.items():
        for j in waits:
            after[j].append(k)
    return tuple(
        Item(
            chunk * per_chunk + offsets[i],
            len(phases[i].steps),
            len(before[chunk * len(phases) + i]),
            tuple(sorted(after[chunk * len(phases) + i])),
        )
        for chunk in range(schedule.chunks)
        for i in range(len(phases))
    )


@functools.lru_cache(maxsize=4096)
def _represented(
    how: _Lowering,
    groups: tuple[tuple[int, ...], ...],
    links: frozenset[int],
    collective: Collective,
    size_bytes: int,
) -> tuple[NetStep, ...]:
    """The steps of the ``collective`` over each of ``groups`` run together, each
    step with only their sends on ``links``
    (:class:`~accelsim.timing.representatives.Representatives`)."""
    forms = {_ring_form(how, collective, g, size_bytes) for g in groups}
    form = forms.pop() if len(forms) == 1 else None
    if form is not None:  # every group the same count of shifts of the same piece
        count, piece = form
        latency = how.network.dimensions[0].latency_cycles
        return (tuple(Send(p, piece, latency) for g in groups for p in g if p in links),) * count
    ran = [_steps(how, collective, g, size_bytes) for g in groups]
    made: dict[tuple[int, ...], NetStep] = {}
    out = []
    for steps in zip(*ran, strict=True):
        key = tuple(map(id, steps))
        if key not in made:
            made[key] = tuple(s for step in steps for s in step if s.link in links)
        out.append(made[key])
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def _steps(
    how: _Lowering, collective: Collective, group: tuple[int, ...], size_bytes: int
) -> tuple[NetStep, ...]:
    schedule = _schedule(how, collective, group, size_bytes)
    ids = _link_ids(how.network)
    made: dict[int, NetStep] = {}
    out = []
    for step in schedule.steps:
        if id(step) not in made:  # a step repeated as one object (a ring's) is lowered once
            made[id(step)] = _sends(how, ids, step)
        out.append(made[id(step)])
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def _schedule(
    how: _Lowering, collective: Collective, group: tuple[int, ...], size_bytes: int
) -> Schedule:
    algorithm = Algorithm.RING if how.ring else how.algorithm
    if collective is Collective.POINT_TO_POINT:
        algorithm = Algorithm.DIRECT
    schedule = None
    if algorithm is not Algorithm.FASTEST:
        schedule = lower(how.network, collective, group, size_bytes, algorithm)
    if schedule is None:  # fastest, or an algorithm the group cannot run
        schedule = plan(how.network, collective, group, size_bytes, Algorithm.FASTEST)
    return schedule


def _sends(how: _Lowering, ids: dict[Link, int], step: Step) -> NetStep:
    network = how.network
    if how.ring:
        latency = network.dimensions[0].latency_cycles
        return tuple(Send(t.source, t.bytes, latency) for t in step)
    out = []
    for t in step:
        route = network.route(t.source, t.destination)
        latency = network.route_latency(route)
        out += [Send(ids[link], t.bytes, latency) for link in route]
    return tuple(out)


def lowering_key(machine: Machine) -> Hashable:
    """What the lowering of a graph's communication on ``machine`` depends on: equal
    keys, equal sends (a key for :func:`accelsim.graph.memo.per_graph`)."""
    return _Lowering.of(machine)


@functools.lru_cache(maxsize=32)
def _link_ids(network: Network) -> dict[Link, int]:
    """Each link's number: its place in :meth:`Network.links`."""
    return {link: i for i, link in enumerate(network.links())}


class SendTable(NamedTuple):
    """The sends of a graph's ops as arrays, for the compiled engine.

    Op ``i`` runs the steps ``steps[op_ptr[i]:op_ptr[i + 1]]`` in order (none for a
    unit op); step ``s``'s sends are ``step_ptr[s]:step_ptr[s + 1]`` of ``link``,
    ``bytes`` and ``latency`` (a step repeated, as a ring's are, is stored once).
    A pipelined collective's steps are its :class:`Item` s
    ``item_ptr[i]:item_ptr[i + 1]`` (none for any other op): item ``k`` of op
    ``item_op[k]`` runs the steps ``steps[item_first[k]:item_first[k] +
    item_count[k]]`` once ``item_waits[k]`` items are done, and the items
    ``item_succ[item_succ_ptr[k]:item_succ_ptr[k + 1]]`` wait for it.

    Step ``s`` whose sends are all alike (:func:`alike`) is of link class
    ``step_class[s]`` (-1 for any other step), a class per distinct set of links.
    Row ``k`` of ``classes`` (``classes[class_ptr[k]:class_ptr[k + 1]]``) is link
    ``k``'s classes, and row ``links + c``, past the network's ``links``, the
    classes sharing a link with class ``c`` (:mod:`accelsim.timing.links` says
    how the engines book them).  Few arrays, not one per kind of row: the
    compiled loop's call unboxes each array of its step anew.
    """

    op_ptr: np.ndarray
    steps: np.ndarray
    step_ptr: np.ndarray
    link: np.ndarray
    bytes: np.ndarray
    latency: np.ndarray
    item_ptr: np.ndarray
    item_op: np.ndarray
    item_first: np.ndarray
    item_count: np.ndarray
    item_waits: np.ndarray
    item_succ_ptr: np.ndarray
    item_succ: np.ndarray
    step_class: np.ndarray
    class_ptr: np.ndarray
    classes: np.ndarray
