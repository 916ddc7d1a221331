"""The order each pipeline stage runs its micro-batches' forward and backward passes in
(Narayanan et al., SC 2021), and the stash it holds at its peak.

``1f1b`` (PipeDream-Flush): stage ``i`` of ``p`` runs a warm-up of ``min(p - i - 1,
m)`` forwards, then one forward and one backward in turn until every forward has run,
then the backwards left (the cool-down).  ``interleaved``: stage ``i`` holds ``v``
model chunks (:mod:`accelsim.mapping.pipeline_stages`) and runs the ``v m`` chunk
passes in Megatron-LM's order: its ``k``-th forward is of local chunk ``(k mod p v)
// p`` and micro-batch ``(k // p v) p + k mod p`` (groups of ``p`` micro-batches
through one chunk after the other; the backwards through the chunks in reverse), a
warm-up of ``min(2 (p - i - 1) + (v - 1) p, v m)`` forwards, then forward-backward
pairs, then the cool-down.  It needs ``p`` to divide ``m``, as Megatron-LM's does.

A stage holds the stash of every forward whose backward has not run yet: 1F1B's
stage ``i`` at most ``min(p - i, m)`` micro-batches' (the first stage ``min(p, m)``);
the interleaved stage 0 at most ``2 (p - 1) + (v - 1) p + 1 = p v (1 + (p - 1) /
(p v))`` chunk passes, each a ``v``-th of the stage's layers: ``p (1 + (p - 1) /
(p v))`` micro-batches' worth, Narayanan et al.'s factor.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from accelsim.config.parallel import PipelineSchedule


class Pass(str, Enum):
    """A chunk pass's direction."""

    FORWARD = "F"
    BACKWARD = "B"


@dataclass(frozen=True)
class ChunkPass:
    """One pass of one micro-batch through one model chunk (``chunk``: the chunk's
    index in the whole model, ``0 .. p v - 1``)."""

    direction: Pass
    micro_batch: int
    chunk: int

    def __str__(self) -> str:
        return f"{self.direction.value}{self.micro_batch}.{self.chunk}"


def order_problem(schedule: PipelineSchedule, stages: int, micro_batches: int) -> str | None:
    """Why ``micro_batches`` cannot run in ``schedule`` on ``stages`` stages (None:
    they can)."""
    if schedule is PipelineSchedule.INTERLEAVED and micro_batches % stages:
        return (
            f"the interleaved schedule needs the pipeline's {stages} stages to divide the"
            f" micro-batches a step ({micro_batches})"
        )
    return None


def stage_order(
    schedule: PipelineSchedule, stages: int, virtual_stages: int, micro_batches: int, stage: int
) -> tuple[ChunkPass, ...]:
    """The passes stage ``stage`` runs, in order (:func:`order_problem` found nothing)."""
    p, v, m = stages, virtual_stages, micro_batches
    if schedule is PipelineSchedule.ONE_F_ONE_B:
        v = 1
        warm = min(p - stage - 1, m)
    else:
        warm = min(2 * (p - stage - 1) + (v - 1) * p, v * m)
    total = v * m

    def passed(direction: Pass, k: int) -> ChunkPass:
        within = k % (p * v)
        local = within // p
        if direction is Pass.BACKWARD:
            local = v - 1 - local
        return ChunkPass(direction, (k // (p * v)) * p + within % p, local * p + stage)

    order = [passed(Pass.FORWARD, k) for k in range(warm)]
    for k in range(total - warm):
        order += [passed(Pass.FORWARD, warm + k), passed(Pass.BACKWARD, k)]
    order += [passed(Pass.BACKWARD, k) for k in range(total - warm, total)]
    return tuple(order)


@functools.lru_cache(maxsize=4096)
def held_at_peaks(
    schedule: PipelineSchedule, stages: int, virtual_stages: int, micro_batches: int, stage: int
) -> tuple[tuple[tuple[int, int], ...], ...]:
    """The stashes stage ``stage`` holds at once after each forward of its order, as
    ``(chunk, count)`` pairs, those another holds at least as many of each left out:
    the stage's peak stash is the most of these weighed by each chunk's stash (a
    stash is never negative), for any stashes (what the memory of a plan search's
    candidates of one cut and schedule shares).  Under 1F1B that is one holding: the
    stage's own chunk, ``min(p - i, m)`` micro-batches of it (the module's count)."""
    if schedule is PipelineSchedule.ONE_F_ONE_B:
        return (((stage, min(stages - stage, micro_batches)),),)
    # Past the warm-up, each forward-backward pair moves both passes on by one, and
    # the chunks they run repeat every p v of them: so do the holdings, and fewer
    # micro-batches (a multiple of p) that leave the warm-up and p v pairs after it
    # give the same ones, in the same order.
    p, v = stages, virtual_stages
    warm = 2 * (p - stage - 1) + (v - 1) * p
    enough = -(-(warm + p * v) // (v * p)) * p
    if enough < micro_batches:
        return held_at_peaks(schedule, stages, virtual_stages, enough, stage)
    held: dict[int, int] = {}
    seen: dict[tuple[tuple[int, int], ...], None] = {}
    for step in stage_order(schedule, stages, virtual_stages, micro_batches, stage):
        forward = step.direction is Pass.FORWARD
        held[step.chunk] = held.get(step.chunk, 0) + (1 if forward else -1)
        if forward:
            seen[tuple(sorted((c, n) for c, n in held.items() if n))] = None
    # Another holding at least as many of each and differing holds more in all, so
    # by falling totals a holding is left out when one of those kept so far covers it.
    kept: list[dict[int, int]] = []
    for h in sorted(seen, key=lambda h: -sum(n for _, n in h)):
        c = dict(h)
        if not any(o != c and all(o.get(k, 0) >= n for k, n in c.items()) for o in kept):
            kept.append(c)
    peaks = {tuple(sorted(c.items())) for c in kept}
    return tuple(h for h in seen if h in peaks)


def peak_stash(
    schedule: PipelineSchedule,
    stages: int,
    virtual_stages: int,
    micro_batches: int,
    stage: int,
    stash_of_chunk: Sequence[int],
) -> int:
    """The most stage ``stage`` holds at once running its order: each forward adds its
    chunk's stash (``stash_of_chunk``, by chunk), each backward frees it."""
    peaks = held_at_peaks(schedule, stages, virtual_stages, micro_batches, stage)
    return max(sum(n * stash_of_chunk[c] for c, n in held) for held in peaks)
