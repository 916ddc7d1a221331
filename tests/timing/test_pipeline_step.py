"""A pipeline step composed at pass granularity (:mod:`accelsim.timing.pipeline_step`):
the bubble of uniform chunks against the closed form, and hand-timed schedules with
transfers, a shared link and each stage's all-reduce and update, and the same cycles
as the plain event schedule (:mod:`tests.timing.pipeline_reference`) on random ones."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsim.config.parallel import PipelineSchedule
from accelsim.timing.pipeline_step import (
    Hop,
    PassCycles,
    PipelineTimes,
    StageTimes,
    bubble_fraction,
    compose,
)
from tests.timing.pipeline_reference import reference_compose

ONE = PipelineSchedule.ONE_F_ONE_B
INTERLEAVED = PipelineSchedule.INTERLEAVED


def _times(
    schedule: PipelineSchedule,
    p: int,
    v: int,
    m: int,
    forward: int,
    backward: int,
    hop: int = 0,
    shared: bool = False,
    all_reduce: tuple[int, ...] = (),
    update: tuple[int, ...] = (),
    all_gather: tuple[int, ...] = (),
) -> PipelineTimes:
    """Uniform chunks; each hop on a link of its own (``shared``: every forward hop on
    one link, every backward hop on another)."""
    chunks = p * v
    forward_hops = tuple(Hop(hop, ("f",) if shared else (("f", g),)) for g in range(chunks - 1))
    backward_hops = tuple(Hop(hop, ("b",) if shared else (("b", g),)) for g in range(chunks - 1))
    return PipelineTimes(
        schedule,
        p,
        v,
        m,
        tuple(PassCycles(forward, backward) for _ in range(chunks)),
        forward_hops,
        backward_hops,
        all_reduce or (0,) * p,
        update or (0,) * p,
        all_gather or (0,) * p,
    )


@pytest.mark.parametrize(("schedule", "v"), [(ONE, 1), (INTERLEAVED, 2), (INTERLEAVED, 4)])
@pytest.mark.parametrize("p", [2, 4])
@pytest.mark.parametrize("m", [4, 8])
def test_uniform_chunks_bubble_is_the_closed_form(
    schedule: PipelineSchedule, v: int, p: int, m: int
) -> None:
    forward, backward = 10, 20
    step = compose(_times(schedule, p, v, m, forward, backward))
    # v m passes each way per stage, then (p - 1) (F + B) of bubble (Narayanan et al.)
    assert step.pipeline_cycles == (v * m + p - 1) * (forward + backward)
    for stage in step.stages:
        assert stage.compute_cycles == v * m * (forward + backward)
        assert stage.bubble_cycles == (p - 1) * (forward + backward)
        assert stage.exposed_transfer_cycles == 0
        fraction = Fraction(stage.bubble_cycles, step.pipeline_cycles)
        assert fraction == Fraction(p - 1, v * m + p - 1)
        assert float(fraction) == bubble_fraction(schedule, p, v, m)


def test_one_f_one_b_closed_form_values() -> None:
    assert bubble_fraction(ONE, 4, 1, 8) == 3 / 11
    assert bubble_fraction(INTERLEAVED, 4, 2, 8) == 3 / 19


def test_transfers_hand_timed() -> None:
    """p = 2, m = 2, F 10, B 20, each transfer 5 on its own link.  Stage 0 runs F0 F1
    B0 B1, stage 1 F0 B0 F1 B1: F0 0-10, F1 10-20 on stage 0; F0 reaches stage 1 at 15
    (15-25), B0 25-45, back at 50; F1 (arrived 25) 45-55, B1 55-75, back at 80; stage 0
    B0 50-70, B1 80-100."""
    step = compose(_times(ONE, 2, 1, 2, 10, 20, hop=5))
    assert step.pipeline_cycles == 100
    first, last = step.stages
    # stage 0 waits 45-50 and 75-80 on the gradients' transfers, 20-45 and 70-75 on stage 1
    assert first == StageTimes(60, 30, 10, 100, 0, 0, 0, 0)
    # stage 1 waits 10-15 on F0's activation, and is done at 75
    assert last == StageTimes(60, 35, 5, 75, 0, 0, 0, 0)


def test_transfers_sharing_a_link_run_one_after_the_other() -> None:
    """p = 2, m = 2, F = B = 1, transfers of 10.  On one link each way: F1's
    activation waits for F0's (11-21), B1's gradient for B0's (23-33): stage 0's B1
    runs 33-34.  Holding no link, F1's goes 2-12, stage 1 runs B1 14-15, its gradient
    arrives at 25 and stage 0 is done at 26."""
    assert compose(_times(ONE, 2, 1, 2, 1, 1, hop=10, shared=True)).pipeline_cycles == 34
    free = _times(ONE, 2, 1, 2, 1, 1, hop=10)
    unlinked = PipelineTimes(
        free.schedule,
        2,
        1,
        2,
        free.passes,
        (Hop(10, ()),),
        (Hop(10, ()),),
        free.all_reduce_cycles,
        free.update_cycles,
        free.all_gather_cycles,
    )
    assert compose(unlinked).pipeline_cycles == 26


def test_all_reduce_after_each_stage_last_backward_then_update() -> None:
    """Uniform 1F1B, p = 2, m = 4, F 10 B 20: stage 1's last backward ends at 130,
    stage 0's 20 later at 150 (the flush).  Stage 1's all-reduce of 40 ends at 170 (20
    past the flush), stage 0's at 190; each update of 7 after it."""
    step = compose(_times(ONE, 2, 1, 4, 10, 20, all_reduce=(40, 40), update=(7, 7)))
    first, last = step.stages
    assert (first.last_backward_end_cycles, last.last_backward_end_cycles) == (150, 130)
    assert (first.exposed_all_reduce_cycles, last.exposed_all_reduce_cycles) == (40, 20)
    assert (first.end_cycles, last.end_cycles) == (197, 177)
    assert step.total_cycles == 197


def test_a_sharded_stage_reduce_scatters_updates_then_all_gathers() -> None:
    """The same step under ZeRO: stage 1's reduce-scatter of 20 ends at 150, its
    shard's update of 4 at 154, its all-gather of 20 at 174; stage 0's at 170, 174,
    194."""
    times = _times(ONE, 2, 1, 4, 10, 20, all_reduce=(20, 20), update=(4, 4), all_gather=(20, 20))
    step = compose(times)
    first, last = step.stages
    assert (first.exposed_all_reduce_cycles, last.exposed_all_reduce_cycles) == (20, 0)
    assert (first.all_gather_cycles, last.all_gather_cycles) == (20, 20)
    assert (first.end_cycles, last.end_cycles) == (194, 174)
    assert step.total_cycles == 194


@st.composite
def _random_times(draw: st.DrawFn) -> PipelineTimes:
    """Any stages, schedule, micro-batches, chunk lengths and transfers, the transfers
    on links drawn from four, so that some share one."""
    p = draw(st.integers(1, 5))
    schedule = draw(st.sampled_from([ONE, INTERLEAVED]))
    v = 1 if schedule is ONE else draw(st.integers(2, 3))
    m = draw(st.integers(1, 6)) * (p if schedule is INTERLEAVED else 1)
    chunks = p * v
    lengths = st.integers(0, 40)
    links = st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=3, unique=True)
    hops = st.lists(
        st.builds(Hop, st.integers(0, 25), links.map(tuple)),
        min_size=chunks - 1,
        max_size=chunks - 1,
    )
    per_stage = st.lists(st.integers(0, 30), min_size=p, max_size=p).map(tuple)
    return PipelineTimes(
        schedule,
        p,
        v,
        m,
        tuple(draw(st.builds(PassCycles, lengths, lengths)) for _ in range(chunks)),
        tuple(draw(hops)),
        tuple(draw(hops)),
        draw(per_stage),
        draw(per_stage),
        draw(per_stage),
    )


@settings(max_examples=300, deadline=None)
@given(_random_times())
def test_numbered_schedule_equals_the_plain_one(times: PipelineTimes) -> None:
    """The composition over numbered passes gives every stage's cycles the plain event
    schedule over :class:`ChunkPass` keys gives, on random chunk lengths and links."""
    assert compose(times) == reference_compose(times)


@pytest.mark.parametrize(("schedule", "v"), [(ONE, 1), (INTERLEAVED, 2), (INTERLEAVED, 3)])
def test_numbered_schedule_equals_the_plain_one_on_a_long_pipeline(
    schedule: PipelineSchedule, v: int
) -> None:
    """16 stages, 48 micro-batches, chunks of three lengths, every forward hop on one
    link and every backward hop on another (the links busiest): the same cycles."""
    times = _times(schedule, 16, v, 48, 7, 13, hop=3, shared=True)
    lengths = tuple(PassCycles(7 + g % 3, 13 + g % 5) for g in range(16 * v))
    times = dataclasses.replace(times, passes=lengths)
    assert compose(times) == reference_compose(times)
