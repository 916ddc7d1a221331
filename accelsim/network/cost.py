"""The time of a schedule on a network's links, without contention from outside it,
and the choice of the fastest algorithm.

A step's transfers start together; every link carries the bytes of every transfer
of the step routed over it (:meth:`~accelsim.network.topology.Network.route`), so a
transfer takes its route's latency plus ``ceil(bytes / bandwidth)`` of the busiest
link on its route, and the step ends with its slowest transfer.  A schedule takes
the sum of its steps; schedules run at once take the sum of their steps taken
together (:func:`concurrent_cycles`), so two collectives sharing a link take the time
that link's bytes need.  The link with the most bytes over the whole schedule bounds
it from below (:func:`bandwidth_bound`): no step finishes its bytes faster than that
link carries them.
"""

from __future__ import annotations

import math
from collections import Counter

from accelsim.network.algorithms import lower
from accelsim.network.collectives import Algorithm, Collective, Schedule, Step, together
from accelsim.network.topology import Link, Network


def link_bytes(network: Network, steps: tuple[Step, ...]) -> Counter[Link]:
    """Bytes each link carries over ``steps``."""
    load: Counter[Link] = Counter()
    for step in steps:
        for t in step:
            for link in network.route(t.source, t.destination):
                load[link] += t.bytes
    return load


def step_cycles(network: Network, step: Step) -> int:
    """Cycles of one step: its slowest transfer, latency plus its busiest link's bytes."""
    load = link_bytes(network, (step,))
    slowest = 0
    for t in step:
        route = network.route(t.source, t.destination)
        if not route:
            continue
        busiest = max(math.ceil(load[link] / network.bandwidth(link)) for link in route)
        slowest = max(slowest, network.route_latency(route) + busiest)
    return slowest


def _steps_cycles(network: Network, steps: tuple[Step, ...]) -> int:
    """Cycles of ``steps`` one after the other (a step repeated as the same object, as
    a ring's are, timed once)."""
    timed: dict[int, int] = {}
    total = 0
    for step in steps:
        if id(step) not in timed:
            timed[id(step)] = step_cycles(network, step)
        total += timed[id(step)]
    return total


def schedule_cycles(network: Network, schedule: Schedule) -> int:
    """Cycles of ``schedule`` alone on ``network`` (a pipelined one's by
    :func:`pipeline_cycles`)."""
    if schedule.chunks == 1:
        return _steps_cycles(network, schedule.steps)
    dimensions = [phase.dimension for phase in schedule.phases]
    return pipeline_cycles(phase_cycles(network, schedule), dimensions, schedule.chunks)


def pipeline_cycles(durations: list[int], dimensions: list[int], chunks: int) -> int:
    """Cycles of ``chunks`` equal chunks each going through phases of ``durations``
    in order, phase ``i`` on the links of dimension ``dimensions[i]``.

    A dimension works on one chunk's phase at a time (an all-reduce's reduce-scatter
    and all-gather along a dimension share its links) and never idles while a chunk
    waits for it: each phase in turn starts at the earliest a chunk can start its
    next one; on a tie the chunk with the most phases still to go first (a new
    chunk's reduce-scatter before an older chunk's all-gather, the longest remaining
    path first), then the oldest.  Where every phase has a dimension of its own (a
    reduce-scatter, an all-gather) this is ``sum(durations) + (chunks - 1) x
    max(durations)``: the first chunk through every phase, the others following at
    the slowest phase's rate.
    """
    return max(_pipeline(durations, dimensions, chunks)[1], default=0)


def pipeline_order(
    durations: list[int], dimensions: list[int], chunks: int
) -> list[tuple[int, int]]:
    """The ``(chunk, phase)`` pairs in the order :func:`pipeline_cycles` starts them:
    each dimension's phases run in this order (the engines keep it under contention)."""
    return _pipeline(durations, dimensions, chunks)[0]


def _pipeline(
    durations: list[int], dimensions: list[int], chunks: int
) -> tuple[list[tuple[int, int]], list[int]]:
    """:func:`pipeline_cycles`' list schedule: the ``(chunk, phase)`` pairs in the
    order they start and when each chunk's last phase ends."""
    ended = [0] * chunks  # when each chunk's last phase ended
    done = [0] * chunks  # phases each chunk has been through
    free: dict[int, int] = {}  # when each dimension is free
    order = []
    for _ in range(chunks * len(durations)):
        start, _, chunk = min(
            (max(ended[j], free.get(dimensions[done[j]], 0)), done[j], j)
            for j in range(chunks)
            if done[j] < len(durations)
        )
        phase = done[chunk]
        ended[chunk] = free[dimensions[phase]] = start + durations[phase]
        done[chunk] += 1
        order.append((chunk, phase))
    return order, ended


def phase_cycles(network: Network, schedule: Schedule) -> list[int]:
    """Cycles of each of a pipelined schedule's phases alone (one chunk's)."""
    return [_steps_cycles(network, phase.steps) for phase in schedule.phases]


def concurrent_cycles(network: Network, schedules: tuple[Schedule, ...]) -> int:
    """Cycles of ``schedules`` started together, each step sharing the links with the
    same step of the others (a pipelined schedule's steps one chunk after the other,
    not overlapped)."""
    return _steps_cycles(network, together(*(s.steps for s in schedules)))


def bandwidth_bound(network: Network, schedules: tuple[Schedule, ...]) -> int:
    """Fewest cycles ``schedules`` could take: their busiest link's bytes over its bandwidth."""
    load = link_bytes(network, tuple(step for s in schedules for step in s.steps))
    return max((math.ceil(b / network.bandwidth(link)) for link, b in load.items()), default=0)


def plan(
    network: Network,
    collective: Collective,
    group: tuple[int, ...],
    size_bytes: int,
    algorithm: Algorithm,
) -> Schedule:
    """The schedule of ``collective`` on ``group`` by ``algorithm``; with ``fastest``,
    the schedule of fewest cycles among the algorithms that apply (the first in
    :class:`Algorithm` order on a tie).

    Raises:
        ValueError: if ``algorithm`` does not apply to the collective or the group.
    """
    if algorithm is not Algorithm.FASTEST:
        found = lower(network, collective, group, size_bytes, algorithm)
        if found is None:
            raise ValueError(
                f"{algorithm.value} cannot run a {collective.value} on {len(group)} processors"
            )
        return found
    options = [
        s
        for a in Algorithm
        if a is not Algorithm.FASTEST
        and (s := lower(network, collective, group, size_bytes, a)) is not None
    ]
    if not options:
        raise ValueError(f"no algorithm runs a {collective.value} on {len(group)} processors")
    return min(options, key=lambda s: schedule_cycles(network, s))
