"""The pipeline step's event schedule written plainly, pass by pass with the passes as
:class:`~accelsim.mapping.pipeline_order.ChunkPass` keys: the reference
:func:`accelsim.timing.pipeline_step.compose` (numbered passes in lists) must equal to
the cycle."""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Sequence

from accelsim.mapping.pipeline_order import ChunkPass, Pass, stage_order
from accelsim.timing.pipeline_step import ComposedStep, Hop, PipelineTimes, stages_after


def reference_compose(times: PipelineTimes) -> ComposedStep:
    """The step's event schedule (:mod:`accelsim.timing.pipeline_step`'s rules), each
    pass a :class:`ChunkPass` in dictionaries.

    Raises:
        ValueError: if the stages' orders wait on each other for ever (a bug).
    """
    p, v, m = times.stages, times.virtual_stages, times.micro_batches
    orders = [stage_order(times.schedule, p, v, m, s) for s in range(p)]
    last_chunk = p * v - 1
    made: dict[ChunkPass, int] = {}  # when a pass ended
    arrived: dict[ChunkPass, int] = {}  # when a pass's input arrived
    link_free: dict[Hashable, int] = {}
    nexts, free = [0] * p, [0] * p
    compute, exposed = [0] * p, [0] * p
    events: list[tuple[int, int, int, int, ChunkPass]] = []
    pushed = [0]

    def input_of(step: ChunkPass) -> tuple[ChunkPass, Hop | None] | None:
        """The pass ``step`` waits for and the hop between them (None: no input)."""
        j, g = step.micro_batch, step.chunk
        if step.direction is Pass.FORWARD:
            return (
                None if g == 0 else (ChunkPass(Pass.FORWARD, j, g - 1), times.forward_hops[g - 1])
            )
        if g == last_chunk:
            return ChunkPass(Pass.FORWARD, j, g), None
        return ChunkPass(Pass.BACKWARD, j, g + 1), times.backward_hops[g]

    def try_start(s: int) -> None:
        if nexts[s] == len(orders[s]):
            return
        step = orders[s][nexts[s]]
        source = input_of(step)
        ready = free[s]
        if source is not None:
            if step not in arrived:
                return
            producer_end = made[source[0]]
            exposed[s] += max(0, arrived[step] - max(free[s], producer_end))
            ready = max(ready, arrived[step])
        chunk = times.passes[step.chunk]
        cycles = chunk.forward_cycles if step.direction is Pass.FORWARD else chunk.backward_cycles
        compute[s] += cycles
        nexts[s] += 1
        free[s] = ready + cycles
        pushed[0] += 1
        heapq.heappush(events, (free[s], s, 0, pushed[0], step))

    for s in range(p):
        try_start(s)
    while events:
        now, s, kind, _, step = heapq.heappop(events)
        if kind == 1:  # an input arrived
            arrived[step] = now
            try_start(s)
            continue
        made[step] = now
        for consumer in _consumers(step, last_chunk):
            source = input_of(consumer)
            assert source is not None
            hop = source[1]
            if hop is None:
                arrived[consumer] = now
                continue
            start = max([now, *(link_free.get(link, 0) for link in hop.links)])
            for link in hop.links:
                link_free[link] = start + hop.cycles
            pushed[0] += 1
            arrival = (start + hop.cycles, consumer.chunk % p, 1, pushed[0], consumer)
            heapq.heappush(events, arrival)
        try_start(s)
    if any(nexts[s] < len(orders[s]) for s in range(p)):
        raise ValueError("the pipeline's stage orders wait on each other")
    return stages_after(times, free, compute, exposed)


def _consumers(step: ChunkPass, last_chunk: int) -> Sequence[ChunkPass]:
    """The passes that wait for ``step``'s output."""
    j, g = step.micro_batch, step.chunk
    if step.direction is Pass.FORWARD:
        if g == last_chunk:
            return (ChunkPass(Pass.BACKWARD, j, g),)
        return (ChunkPass(Pass.FORWARD, j, g + 1),)
    return () if g == 0 else (ChunkPass(Pass.BACKWARD, j, g - 1),)
