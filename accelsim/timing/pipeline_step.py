"""A pipeline plan's step composed at pass granularity: an exact event schedule of
every stage's chunk passes (:mod:`accelsim.mapping.pipeline_order`), the transfers
between consecutive chunks, each stage's data-parallel all-reduce and its update.

A stage runs one pass at a time, in its schedule's order: a pass starts when the
stage has finished the pass before it and its input is there (a forward's: the
activation from the chunk before, sent when that chunk's forward of the micro-batch
ended; a backward's: the gradient from the chunk after, or, on the last chunk, its
own forward).  Every micro-batch's pass through a chunk takes that chunk's cycles
(:class:`PassCycles`, one micro-batch simulated once).  A transfer starts when the
pass that made it has ended and every link of its :class:`Hop` is free, and holds
them for its cycles (transfers sharing a link run one after the other, in the order
they became ready, the earlier stage first on a tie).  After its last backward a
stage sums its gradients over its data-parallel group (an all-reduce, or under ZeRO
stages 1 and 2 a reduce-scatter), then updates (under ZeRO its shard), then
all-gathers its updated weights over the group (under ZeRO only).

What this leaves out: a transfer's reads and writes of DRAM contending with a pass
on the same chip, and a pass's own collectives sharing a link with a transfer (each
pass is timed alone); a link is held whole by one transfer at a time (no bandwidth
shared between two at once).  Otherwise it is exact: a stage never runs two passes
at once, so a pass's cycles do not depend on when it runs.
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from accelsim.config.parallel import PipelineSchedule
from accelsim.mapping.pipeline_order import Pass, stage_order


@dataclass(frozen=True)
class PassCycles:
    """One micro-batch's forward and backward pass through one model chunk."""

    forward_cycles: int
    backward_cycles: int


@dataclass(frozen=True)
class Hop:
    """A transfer between two consecutive chunks' stages: its cycles and the links it
    holds while it runs."""

    cycles: int
    links: tuple[Hashable, ...]


@dataclass(frozen=True)
class PipelineTimes:
    """What :func:`compose` schedules: ``passes`` by chunk (``p v`` of them),
    ``forward_hops[g]`` the activation from chunk ``g`` to ``g + 1`` and
    ``backward_hops[g]`` the gradient from chunk ``g + 1`` back to ``g``, and each
    stage's data-parallel gradient sum (all-reduce, or reduce-scatter under ZeRO),
    update and weight all-gather (0 without ZeRO) cycles."""

    schedule: PipelineSchedule
    stages: int
    virtual_stages: int
    micro_batches: int
    passes: tuple[PassCycles, ...]
    forward_hops: tuple[Hop, ...]
    backward_hops: tuple[Hop, ...]
    all_reduce_cycles: tuple[int, ...]
    update_cycles: tuple[int, ...]
    all_gather_cycles: tuple[int, ...]


@dataclass(frozen=True)
class StageTimes:
    """One stage's share of the step, in cycles: its passes' sum, its idle time until
    the pipeline's flush while no input was in flight (the bubble) and while one was
    (exposed transfers), when its last backward ended, its gradient sum's cycles
    (all-reduce, or reduce-scatter under ZeRO) and the part of them past the flush, its
    update and its weight all-gather (under ZeRO)."""

    compute_cycles: int
    bubble_cycles: int
    exposed_transfer_cycles: int
    last_backward_end_cycles: int
    all_reduce_cycles: int
    exposed_all_reduce_cycles: int
    update_cycles: int
    all_gather_cycles: int

    @property
    def end_cycles(self) -> int:
        """When the stage's update (and its weight all-gather) ends."""
        return (
            self.last_backward_end_cycles
            + self.all_reduce_cycles
            + self.update_cycles
            + self.all_gather_cycles
        )


@dataclass(frozen=True)
class ComposedStep:
    """The step's stages and its cycles: the pipeline's flush (the last backward's end)
    and the whole step (the last update's end)."""

    stages: tuple[StageTimes, ...]
    pipeline_cycles: int
    total_cycles: int


@dataclass(frozen=True)
class ChunkPasses:
    """The chunks one simulation of a forward and a backward pass stands for, and
    their ops (one rank's group) and cycles, and the cycles of the forward work the
    backward pass recomputes (the ops a technique added to it) simulated alone."""

    chunks: tuple[int, ...]
    forward_ops: int
    backward_ops: int
    passes: PassCycles
    recomputed_cycles: int


@dataclass(frozen=True)
class PipelineStep:
    """A pipeline plan's composed step, with what it was composed of: the distinct
    chunks' simulations, the bytes each rank sends per micro-batch between chunks
    (``activation_bytes[g]`` from chunk ``g`` to ``g + 1``, ``gradient_bytes[g]`` back),
    each stage's data-parallel summed gradient bytes (one rank's), the degrees and the
    ZeRO stage (0, 1 or 2)."""

    times: PipelineTimes
    step: ComposedStep
    distinct: tuple[ChunkPasses, ...]
    activation_bytes: tuple[int, ...]
    gradient_bytes: tuple[int, ...]
    stage_gradient_bytes: tuple[int, ...]
    data: int
    tensor: int
    zero: int
    expert: int
    """The expert-parallel degree: the replicas of a stage's expert group."""


def bubble_fraction(schedule: PipelineSchedule, stages: int, virtual_stages: int, m: int) -> float:
    """The bubble's share of the pipeline's time when every chunk pass of a direction
    takes the same time and transfers none (Narayanan et al. 2021): ``(p - 1) / (m + p -
    1)`` for 1F1B and ``(p - 1) / (v m + p - 1)`` interleaved (a ``v``-th of 1F1B's bubble
    time, ``(p - 1) / (v m)`` of the ideal time)."""
    v = 1 if schedule is PipelineSchedule.ONE_F_ONE_B else virtual_stages
    return (stages - 1) / (v * m + stages - 1)


def compose(times: PipelineTimes) -> ComposedStep:
    """The step's event schedule (the module's rules), its passes numbered
    (:func:`_numbered_orders`) so that every table is a list.

    Raises:
        ValueError: if the stages' orders wait on each other for ever (a bug).
    """
    p, v, m = times.stages, times.virtual_stages, times.micro_batches
    chunks = p * v
    n = m * chunks  # the forwards' numbers, then the backwards'
    orders = _numbered_orders(times.schedule, p, v, m)
    links: dict[Hashable, int] = {}
    forward_hops = [_numbered_hop(hop, links) for hop in times.forward_hops]
    backward_hops = [_numbered_hop(hop, links) for hop in times.backward_hops]
    forward_cycles = [c.forward_cycles for c in times.passes]
    backward_cycles = [c.backward_cycles for c in times.passes]
    link_free = [0] * len(links)
    made = [0] * (2 * n)  # when a pass ended
    arrived = [-1] * (2 * n)  # when a pass's input arrived (-1: not yet)
    nexts, free = [0] * p, [0] * p
    compute, exposed = [0] * p, [0] * p
    events: list[tuple[int, int, int, int, int]] = []
    pushed = 0
    last_chunk = chunks - 1

    def try_start(s: int) -> None:
        nonlocal pushed
        order = orders[s]
        if nexts[s] == len(order):
            return
        step = order[nexts[s]]
        g = step % chunks
        ready = free[s]
        if step < n:
            cycles = forward_cycles[g]
            source = step - 1 if g else -1
        else:
            cycles = backward_cycles[g]
            source = step - n if g == last_chunk else step + 1
        if source >= 0:
            at = arrived[step]
            if at < 0:
                return
            exposed[s] += max(0, at - max(ready, made[source]))
            ready = max(ready, at)
        compute[s] += cycles
        nexts[s] += 1
        free[s] = ready + cycles
        pushed += 1
        heapq.heappush(events, (free[s], s, 0, pushed, step))

    for s in range(p):
        try_start(s)
    while events:
        now, s, kind, _, step = heapq.heappop(events)
        if kind == 1:  # an input arrived
            arrived[step] = now
            try_start(s)
            continue
        made[step] = now
        g = step % chunks
        if step < n:  # a forward feeds the next chunk's forward, the last its backward
            if g == last_chunk:
                arrived[step + n] = now
                try_start(s)
                continue
            consumer, (hop_cycles, hop_links) = step + 1, forward_hops[g]
        elif g:  # a backward feeds the chunk before's backward
            consumer, (hop_cycles, hop_links) = step - 1, backward_hops[g - 1]
        else:
            try_start(s)
            continue
        start = max([now, *(link_free[link] for link in hop_links)])
        for link in hop_links:
            link_free[link] = start + hop_cycles
        pushed += 1
        heapq.heappush(events, (start + hop_cycles, consumer % chunks % p, 1, pushed, consumer))
        try_start(s)
    if any(nexts[s] < len(orders[s]) for s in range(p)):
        raise ValueError("the pipeline's stage orders wait on each other")
    return stages_after(times, free, compute, exposed)


def stages_after(
    times: PipelineTimes, free: Sequence[int], compute: Sequence[int], exposed: Sequence[int]
) -> ComposedStep:
    """The step once every stage has run its passes: each stage's last backward's end
    (``free``), its passes' sum and its exposed transfers by stage, then each stage's
    data-parallel work after its last backward."""
    p = times.stages
    flush = max(free)
    stages = []
    for s in range(p):
        ar, update = times.all_reduce_cycles[s], times.update_cycles[s]
        stages.append(
            StageTimes(
                compute[s],
                flush - compute[s] - exposed[s],
                exposed[s],
                free[s],
                ar,
                max(0, free[s] + ar - flush),
                update,
                times.all_gather_cycles[s],
            )
        )
    return ComposedStep(tuple(stages), flush, max(st.end_cycles for st in stages))


def _numbered_hop(hop: Hop, links: dict[Hashable, int]) -> tuple[int, tuple[int, ...]]:
    """A hop's cycles and its links' numbers (``links``: each link's, added to)."""
    return hop.cycles, tuple(links.setdefault(link, len(links)) for link in hop.links)


@functools.lru_cache(maxsize=64)
def _numbered_orders(
    schedule: PipelineSchedule, stages: int, virtual_stages: int, micro_batches: int
) -> tuple[tuple[int, ...], ...]:
    """Each stage's order (:func:`~accelsim.mapping.pipeline_order.stage_order`), a
    pass numbered ``j c + g`` forward and ``(m + j) c + g`` backward (micro-batch
    ``j`` of ``m``, chunk ``g`` of ``c``)."""
    chunks = stages * virtual_stages
    n = micro_batches * chunks
    return tuple(
        tuple(
            (n if step.direction is Pass.BACKWARD else 0) + step.micro_batch * chunks + step.chunk
            for step in stage_order(schedule, stages, virtual_stages, micro_batches, s)
        )
        for s in range(stages)
    )
