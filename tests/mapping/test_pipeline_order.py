"""The 1F1B and interleaved orders of a pipeline's stages (:mod:`accelsim.mapping.pipeline_order`),
written out by hand as tables (``F3.1``: the forward of micro-batch 3 through chunk 1),
their bubbles on a uniform toy (each stage running its order, a pass waiting for its
input from the stage before or after: :func:`schedule_span`), and the stash each
holds at its peak."""

from __future__ import annotations

import random
from collections.abc import Sequence
from fractions import Fraction

import pytest

from accelsim.config.parallel import PipelineSchedule
from accelsim.mapping.pipeline_order import (
    ChunkPass,
    Pass,
    order_problem,
    peak_stash,
    stage_order,
)

ONE = PipelineSchedule.ONE_F_ONE_B
INTER = PipelineSchedule.INTERLEAVED


def schedule_span(
    orders: Sequence[Sequence[ChunkPass]], forward: Sequence[int], backward: Sequence[int]
) -> int:
    """The time every stage takes to run its order (``orders``, by stage), a chunk's
    forward taking ``forward[chunk]`` and its backward ``backward[chunk]``, passes
    between stages taking no time: each stage runs its passes in order, a forward
    after the micro-batch's forward through the chunk before, a backward after its
    backward through the chunk after (the last chunk's after its own forward)."""
    last = len(forward) - 1
    done: dict[tuple[Pass, int, int], int] = {}
    free = [0] * len(orders)
    position = [0] * len(orders)
    while any(position[s] < len(o) for s, o in enumerate(orders)):
        moved = False
        for s, order in enumerate(orders):
            while position[s] < len(order):
                step = order[position[s]]
                ready = _ready(step, done, last)
                if ready is None:
                    break
                took = (forward if step.direction is Pass.FORWARD else backward)[step.chunk]
                free[s] = max(free[s], ready) + took
                done[(step.direction, step.micro_batch, step.chunk)] = free[s]
                position[s] += 1
                moved = True
        if not moved:
            raise AssertionError("the stages' orders wait on each other")
    return max(free)


def _ready(step: ChunkPass, done: dict[tuple[Pass, int, int], int], last: int) -> int | None:
    """When ``step``'s input is ready (None: not yet made)."""
    mb, g = step.micro_batch, step.chunk
    if step.direction is Pass.FORWARD:
        key = (Pass.FORWARD, mb, g - 1)
        return 0 if g == 0 else done.get(key)
    key = (Pass.FORWARD, mb, g) if g == last else (Pass.BACKWARD, mb, g + 1)
    return done.get(key)


def table(schedule: PipelineSchedule, p: int, v: int, m: int) -> list[str]:
    return [" ".join(map(str, stage_order(schedule, p, v, m, s))) for s in range(p)]


def test_1f1b_on_2_stages_of_4_micro_batches() -> None:
    assert table(ONE, 2, 1, 4) == [
        "F0.0 F1.0 B0.0 F2.0 B1.0 F3.0 B2.0 B3.0",
        "F0.1 B0.1 F1.1 B1.1 F2.1 B2.1 F3.1 B3.1",
    ]


def test_1f1b_on_4_stages_of_8_micro_batches() -> None:
    assert table(ONE, 4, 1, 8) == [
        "F0.0 F1.0 F2.0 F3.0 B0.0 F4.0 B1.0 F5.0 B2.0 F6.0 B3.0 F7.0 B4.0 B5.0 B6.0 B7.0",
        "F0.1 F1.1 F2.1 B0.1 F3.1 B1.1 F4.1 B2.1 F5.1 B3.1 F6.1 B4.1 F7.1 B5.1 B6.1 B7.1",
        "F0.2 F1.2 B0.2 F2.2 B1.2 F3.2 B2.2 F4.2 B3.2 F5.2 B4.2 F6.2 B5.2 F7.2 B6.2 B7.2",
        "F0.3 B0.3 F1.3 B1.3 F2.3 B2.3 F3.3 B3.3 F4.3 B4.3 F5.3 B5.3 F6.3 B6.3 F7.3 B7.3",
    ]


def test_1f1b_with_fewer_micro_batches_than_stages_warms_up_with_all() -> None:
    assert table(ONE, 4, 1, 2)[0] == "F0.0 F1.0 B0.0 B1.0"


def test_interleaved_on_2_stages_of_2_chunks_and_4_micro_batches() -> None:
    # stage 0 holds chunks 0 and 2, stage 1 chunks 1 and 3; warm-up 2 (p - i - 1) +
    # (v - 1) p: 4 and 2 forwards; groups of p = 2 micro-batches chunk after chunk
    assert table(INTER, 2, 2, 4) == [
        "F0.0 F1.0 F0.2 F1.2 F2.0 B0.2 F3.0 B1.2 F2.2 B0.0 F3.2 B1.0 B2.2 B3.2 B2.0 B3.0",
        "F0.1 F1.1 F0.3 B0.3 F1.3 B1.3 F2.1 B0.1 F3.1 B1.1 F2.3 B2.3 F3.3 B3.3 B2.1 B3.1",
    ]


def test_interleaved_on_4_stages_of_2_chunks_and_8_micro_batches() -> None:
    # stage 0: a warm-up of 2 x 3 + 4 = 10 forwards, 6 pairs, a cool-down of 10;
    # stage 3: a warm-up of 4 forwards (its first chunk's group), 12 pairs, 4 backwards
    rows = table(INTER, 4, 2, 8)
    assert rows[0] == (
        "F0.0 F1.0 F2.0 F3.0 F0.4 F1.4 F2.4 F3.4 F4.0 F5.0"
        " F6.0 B0.4 F7.0 B1.4 F4.4 B2.4 F5.4 B3.4 F6.4 B0.0 F7.4 B1.0"
        " B2.0 B3.0 B4.4 B5.4 B6.4 B7.4 B4.0 B5.0 B6.0 B7.0"
    )
    assert rows[3] == (
        "F0.3 F1.3 F2.3 F3.3"
        " F0.7 B0.7 F1.7 B1.7 F2.7 B2.7 F3.7 B3.7 F4.3 B0.3 F5.3 B1.3"
        " F6.3 B2.3 F7.3 B3.3 F4.7 B4.7 F5.7 B5.7 F6.7 B6.7 F7.7 B7.7"
        " B4.3 B5.3 B6.3 B7.3"
    )


@pytest.mark.parametrize(("p", "m"), [(2, 4), (2, 8), (4, 4), (4, 8)])
def test_1f1b_bubble_on_a_uniform_toy(p: int, m: int) -> None:
    """A stage's forward 1, its backward 2: the first stage starts its last backward
    chain p - 1 stages late and ends p - 1 backwards after the last stage's, the step
    (m + p - 1) x 3, its bubble the fraction (p - 1) / (m + p - 1)."""
    orders = [stage_order(ONE, p, 1, m, s) for s in range(p)]
    span = schedule_span(orders, [1] * p, [2] * p)
    assert span == (m + p - 1) * 3
    assert Fraction(span - 3 * m, span) == Fraction(p - 1, m + p - 1)


@pytest.mark.parametrize(("p", "v", "m"), [(2, 2, 4), (4, 2, 4), (4, 2, 8), (4, 4, 8)])
def test_interleaved_bubble_on_a_uniform_toy(p: int, v: int, m: int) -> None:
    """Each chunk's forward 1 and backward 2 (a stage's whole forward v, backward 2v):
    the bubble is (p - 1) chunk passes' worth, a v-th of 1F1B's, so the step is
    3 v m + 3 (p - 1): Narayanan et al.'s bubble (p - 1) / (v m) of the ideal, the
    fraction (p - 1) / (v m + p - 1) of the step."""
    orders = [stage_order(INTER, p, v, m, s) for s in range(p)]
    span = schedule_span(orders, [1] * (p * v), [2] * (p * v))
    assert span == 3 * v * m + 3 * (p - 1)
    assert Fraction(span - 3 * v * m, 3 * v * m) == Fraction(p - 1, v * m)


@pytest.mark.parametrize(("p", "m"), [(2, 4), (4, 8), (4, 2), (8, 64)])
def test_1f1b_stage_i_holds_min_p_minus_i_and_m_micro_batches(p: int, m: int) -> None:
    for s in range(p):
        assert peak_stash(ONE, p, 1, m, s, [1] * p) == min(p - s, m)


@pytest.mark.parametrize(("p", "v", "m"), [(2, 2, 4), (4, 2, 8), (8, 3, 64), (4, 4, 8)])
def test_interleaved_first_stage_holds_narayanan_et_als_factor(p: int, v: int, m: int) -> None:
    """Stage 0 holds 2 (p - 1) + (v - 1) p + 1 chunk passes, each a v-th of its
    layers: p (1 + (p - 1) / (p v)) micro-batches' worth of the stage's stash."""
    chunk = 1
    peak = peak_stash(INTER, p, v, m, 0, [chunk] * (p * v))
    assert peak == 2 * (p - 1) + (v - 1) * p + 1
    assert Fraction(peak, v) == p * (1 + Fraction(p - 1, p * v))


@pytest.mark.parametrize(
    ("schedule", "p", "v", "m"),
    [
        (ONE, 4, 1, 8),
        (ONE, 8, 1, 3),
        (ONE, 5, 1, 17),
        (ONE, 3, 1, 1),
        (INTER, 2, 2, 4),
        (INTER, 4, 3, 8),
        (INTER, 4, 2, 4),
        (INTER, 4, 2, 40),
        (INTER, 2, 3, 30),
        (INTER, 3, 2, 27),
        (INTER, 4, 3, 64),
    ],
)
def test_the_peak_is_the_most_held_after_any_forward(
    schedule: PipelineSchedule, p: int, v: int, m: int
) -> None:
    """:func:`peak_stash` from the counts kept by :func:`held_at_peaks` equals walking
    the order pass by pass, for chunks of unequal stashes (a few thousand draws)."""
    draws = random.Random(7)
    for _ in range(300):
        stash = [draws.randrange(0, 1000) for _ in range(p * v)]
        for s in range(p):
            held = walked = 0
            for step in stage_order(schedule, p, v, m, s):
                held += stash[step.chunk] if step.direction is Pass.FORWARD else -stash[step.chunk]
                walked = max(walked, held)
            assert peak_stash(schedule, p, v, m, s, stash) == walked


def test_interleaved_refuses_micro_batches_the_stages_do_not_divide() -> None:
    assert order_problem(INTER, 4, 6) == (
        "the interleaved schedule needs the pipeline's 4 stages to divide the"
        " micro-batches a step (6)"
    )
    assert order_problem(ONE, 4, 6) is None
