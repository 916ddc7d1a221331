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

``fastest`` (:func:`fastest`) times each algorithm without lowering the costliest:
``direct`` on every processor of the network, every processor sending to every
other, loads each link as its class under the translations that keep the routes
(:func:`accelsim.network.symmetry.route_classes`), so its step is timed from the
routes of the few processors standing for all (:func:`_everyone_cycles`), the same
cycles as its lowered schedule's.  The choice is kept per network, collective, group
and size.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Callable

from accelsim.network.algorithms import lower
from accelsim.network.collectives import (
    Algorithm,
    Collective,
    Schedule,
    Step,
    piece,
    together,
)
from accelsim.network.symmetry import route_classes
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
    """Cycles of one step: its slowest transfer, latency plus its busiest link's bytes
    (a step whose transfers are all of one size from the routes of its pairs, found
    once per network and pairs: :func:`_routes`)."""
    sizes = {t.bytes for t in step}
    if len(sizes) == 1:
        (n_bytes,) = sizes
        pairs = tuple((t.source, t.destination) for t in step)
        return _slowest(n_bytes, _routes(network, pairs))
    load = link_bytes(network, (step,))
    slowest = 0
    for t in step:
        route = network.route(t.source, t.destination)
        if not route:
            continue
        busiest = max(math.ceil(load[link] / network.bandwidth(link)) for link in route)
        slowest = max(slowest, network.route_latency(route) + busiest)
    return slowest


Routes = frozenset[tuple[int, tuple[tuple[int, float], ...]]]
"""A step's routes, each as its latency and, per link, the transfers of the step
crossing it and its bandwidth (every transfer of the same size)."""


def _slowest(n_bytes: int, routes: Routes) -> int:
    """The slowest of ``routes`` when each of their transfers moves ``n_bytes``."""
    return max(
        (
            latency + max(math.ceil(n_bytes * count / bandwidth) for count, bandwidth in links)
            for latency, links in routes
        ),
        default=0,
    )


@functools.lru_cache(maxsize=4096)
def _routes(network: Network, pairs: tuple[tuple[int, int], ...]) -> Routes:
    """The :data:`Routes` of a step of transfers between ``pairs`` (source, destination)."""
    return _crossed(network, [network.route(a, b) for a, b in pairs], lambda link: link)


def _crossed(
    network: Network, routes: list[tuple[Link, ...]], home: Callable[[Link], Link]
) -> Routes:
    """:data:`Routes` of ``routes``, a link's transfers counted on its class
    (``home``): all of them that cross a link of it."""
    crossing = Counter(home(link) for route in routes for link in route)
    return frozenset(
        (
            network.route_latency(route),
            tuple(sorted({(crossing[home(link)], network.bandwidth(link)) for link in route})),
        )
        for route in routes
        if route
    )


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
    found = lower(
        network,
        collective,
        group,
        size_bytes,
        _chosen(network, collective, group, size_bytes, algorithm),
    )
    if found is None:
        raise ValueError(_cannot(algorithm, collective, group))
    return found


def cycles(
    network: Network,
    collective: Collective,
    group: tuple[int, ...],
    size_bytes: int,
    algorithm: Algorithm,
) -> int:
    """Cycles of :func:`plan`'s schedule alone on ``network`` (:func:`algorithm_cycles`).

    Raises:
        ValueError: if ``algorithm`` does not apply to the collective or the group.
    """
    chosen = _chosen(network, collective, group, size_bytes, algorithm)
    found = algorithm_cycles(network, collective, group, size_bytes, chosen)
    if found is None:
        raise ValueError(_cannot(algorithm, collective, group))
    return found


def _chosen(
    network: Network,
    collective: Collective,
    group: tuple[int, ...],
    size_bytes: int,
    algorithm: Algorithm,
) -> Algorithm:
    if algorithm is Algorithm.FASTEST:
        return fastest(network, collective, group, size_bytes)
    return algorithm


def _cannot(algorithm: Algorithm, collective: Collective, group: tuple[int, ...]) -> str:
    return f"{algorithm.value} cannot run a {collective.value} on {len(group)} processors"


@functools.lru_cache(maxsize=4096)
def fastest(
    network: Network, collective: Collective, group: tuple[int, ...], size_bytes: int
) -> Algorithm:
    """The algorithm of fewest cycles (:func:`algorithm_cycles`) among those that run
    ``collective`` on ``group`` (the first in :class:`Algorithm` order on a tie).

    Raises:
        ValueError: if none does.
    """
    options = [
        (cycles, a)
        for a in Algorithm
        if a is not Algorithm.FASTEST
        and (cycles := algorithm_cycles(network, collective, group, size_bytes, a)) is not None
    ]
    if not options:
        raise ValueError(f"no algorithm runs a {collective.value} on {len(group)} processors")
    return min(options, key=lambda option: option[0])[1]


_EVERYONE = (
    Collective.ALL_REDUCE,
    Collective.ALL_GATHER,
    Collective.REDUCE_SCATTER,
    Collective.ALL_TO_ALL,
)


def algorithm_cycles(
    network: Network,
    collective: Collective,
    group: tuple[int, ...],
    size_bytes: int,
    algorithm: Algorithm,
) -> int | None:
    """Cycles of ``collective`` by ``algorithm`` (not ``fastest``) alone on
    ``network``, as :func:`schedule_cycles` of its schedule; None where it does not
    apply.  ``direct`` on every processor of the network is timed without lowering
    it (:func:`_everyone_cycles`)."""
    n = len(group)
    if (
        algorithm is Algorithm.DIRECT
        and collective in _EVERYONE
        and n > 1
        and group == tuple(range(network.processors))
    ):
        step = _everyone_cycles(network, piece(size_bytes, n))
        return 2 * step if collective is Collective.ALL_REDUCE else step
    schedule = lower(network, collective, group, size_bytes, algorithm)
    return None if schedule is None else schedule_cycles(network, schedule)


def _everyone_cycles(network: Network, n_bytes: int) -> int:
    """Cycles of the step in which every processor of ``network`` sends ``n_bytes``
    to every other (:func:`step_cycles` of it)."""
    return _slowest(n_bytes, _everyone_routes(network))


@functools.lru_cache(maxsize=32)
def _everyone_routes(network: Network) -> Routes:
    """The :data:`Routes` of the step in which every processor sends to every other.

    A translation that keeps the routes maps the step onto itself, so every link of a
    class carries as many transfers as the class's links together carry from the
    processors standing for all (each transfer is one of theirs translated, by one
    translation), and each route is one of theirs translated."""
    starts, home = route_classes(network)
    routes = [network.route(p, q) for p in starts for q in range(network.processors) if q != p]
    return _crossed(network, routes, home)
