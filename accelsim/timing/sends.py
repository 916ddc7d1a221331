"""What the engines book on the links: each all-reduce and point-to-point transfer of a
step lowered to **sends**, the bytes each of its transfers puts on each link of its
route, step by step.

The machine's links are the network's directed links
(:meth:`accelsim.network.topology.Network.links`), numbered in that order
(:attr:`accelsim.timing.machine.Machine.links`).  An all-reduce runs the schedule of
``interconnect.algorithm`` (``fastest`` where the group cannot run the one named:
:func:`accelsim.network.cost.plan`) and a transfer is one step of its bytes
(:mod:`accelsim.network.algorithms`).  Every transfer of a step is a send of its
bytes on each link of its route, carrying the route's latency: the engines book all
of a transfer's links when the step starts, each on its own first-come-first-served
channel after what it already carries, and the transfer arrives the route's
latencies after the last of them is done (cut-through: the bytes stream along the
route behind the head, so the bandwidth term is paid once, not per hop).

On a ``ring`` of one level (no ``levels``) the lowering is the ring's as it always
was: an all-reduce is the ring algorithm over its participants whatever
``interconnect.algorithm`` says, and a transfer, like each transfer of the ring
algorithm, is one send on its source's one outgoing link (link ``p`` is processor
``p``'s), whatever its destination.

A step simulated on representatives (:attr:`Machine.represented
<accelsim.timing.machine.Machine.represented>`) books of an all-reduce over them the
whole group's schedule's sends on the representatives' links alone
(:mod:`accelsim.timing.symmetry`).

:func:`send_table` flattens the sends of a graph's ops into arrays for the compiled
engine, once per graph object and network.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from accelsim.config.interconnect import Algorithm
from accelsim.graph.memo import per_graph
from accelsim.graph.ops import CommOp, OpGraph, TransferOp
from accelsim.network.algorithms import lower
from accelsim.network.collectives import Collective, Schedule, Step
from accelsim.network.cost import plan
from accelsim.network.topology import Link, Network
from accelsim.timing.machine import Machine
from accelsim.timing.representatives import Representatives


@dataclass(frozen=True)
class Send:
    """``bytes`` of one transfer on link ``link``; the transfer's route takes
    ``latency_cycles``."""

    link: int
    bytes: int
    latency_cycles: int


NetStep = tuple[Send, ...]
"""The sends of one step, booked together; the step ends with its last arrival."""


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
    """The steps of sends of ``op`` (an all-reduce or a transfer) on ``machine``."""
    how = _Lowering.of(machine)
    if isinstance(op, TransferOp):
        return _steps(how, Collective.POINT_TO_POINT, (op.source, op.destination), op.bytes)
    rep = machine.represented
    if rep is not None and op.participants == rep.simulated:
        return _represented(how, rep, op.tensor.bytes)
    return _steps(how, Collective.ALL_REDUCE, op.participants, op.tensor.bytes)


@functools.lru_cache(maxsize=4096)
def _represented(how: _Lowering, rep: Representatives, size_bytes: int) -> tuple[NetStep, ...]:
    """The steps of the all-reduce over ``rep.group``, each with only its sends on
    ``rep.links`` (:class:`~accelsim.timing.representatives.Representatives`)."""
    full = _steps(how, Collective.ALL_REDUCE, rep.group, size_bytes)
    made: dict[int, NetStep] = {}
    for step in full:
        if id(step) not in made:
            made[id(step)] = tuple(s for s in step if s.link in rep.links)
    return tuple(made[id(step)] for step in full)


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


@functools.lru_cache(maxsize=32)
def _link_ids(network: Network) -> dict[Link, int]:
    """Each link's number: its place in :meth:`Network.links`."""
    return {link: i for i, link in enumerate(network.links())}


class SendTable(NamedTuple):
    """The sends of a graph's ops as arrays, for the compiled engine.

    Op ``i`` runs the steps ``steps[op_ptr[i]:op_ptr[i + 1]]`` in order (none for a
    unit op); step ``s``'s sends are ``step_ptr[s]:step_ptr[s + 1]`` of ``link``,
    ``bytes`` and ``latency`` (a step repeated, as a ring's are, is stored once).
    """

    op_ptr: np.ndarray
    steps: np.ndarray
    step_ptr: np.ndarray
    link: np.ndarray
    bytes: np.ndarray
    latency: np.ndarray


def send_table(graph: OpGraph, machine: Machine) -> SendTable:
    """The :class:`SendTable` of ``graph`` on ``machine``, made once per graph object
    and network (a sweep's points that change neither share it)."""
    how = _Lowering.of(machine)
    key = ("send table", how, machine.represented)
    return per_graph(graph, key, lambda: _table(graph, machine))


def _table(graph: OpGraph, machine: Machine) -> SendTable:
    step_id: dict[int, int] = {}
    kept: list[NetStep] = []  # every step numbered, alive while ids are in use
    counts = np.zeros(len(graph.ops), np.int64)
    steps: list[int] = []
    for i, op in enumerate(graph.ops):
        if not isinstance(op, (CommOp, TransferOp)):
            continue
        ran = lowered(machine, op)
        for step in ran:
            if id(step) not in step_id:
                step_id[id(step)] = len(kept)
                kept.append(step)
            steps.append(step_id[id(step)])
        counts[i] = len(ran)
    op_ptr = np.zeros(len(graph.ops) + 1, np.int64)
    np.cumsum(counts, out=op_ptr[1:])
    sends = [s for step in kept for s in step]
    step_ptr = np.zeros(len(kept) + 1, np.int64)
    np.cumsum([len(step) for step in kept], out=step_ptr[1:])
    return SendTable(
        op_ptr=op_ptr,
        steps=np.asarray(steps, np.int64),
        step_ptr=step_ptr,
        link=np.asarray([s.link for s in sends], np.int64),
        bytes=np.asarray([s.bytes for s in sends], np.int64),
        latency=np.asarray([s.latency_cycles for s in sends], np.int64),
    )
