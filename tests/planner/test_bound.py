"""A plan's proven least step (:mod:`accelsim.planner.bound`): its closed form by hand
(without a pipeline, 1F1B's ``M + p - 1`` passes of the last stage, the interleaved
schedule's ``M v + p - 1``), and never above the simulated step of any plan of whole
searches: the tiny GPT and MoE fixtures (default) and the 4-block GPT's pipeline plans
(slow)."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelsim.cli import main
from accelsim.config.parallel import ParallelSpec
from accelsim.driver.inputs import InputCache
from accelsim.driver.run import rewritten_step
from accelsim.mapping.pipeline_stages import PipelineCut
from accelsim.planner import pruned, search
from accelsim.planner.bound import Bound, Work, array_macs, plan_bound
from accelsim.planner.given import parse_plan
from accelsim.planner.result import Evaluated, evaluated
from accelsim.sweep.plan import MAX_POINTS
from tests.conftest import ROOT
from tests.planner.test_plan_command import BLOCKS, HARDWARE, WORKLOAD

MOE = ROOT / "tests" / "fixtures" / "workloads" / "tiny_moe.yaml"


def _bound(text: str, chips: int, work: Work, chunks: tuple[tuple[str, ...], ...]) -> Bound:
    candidate = parse_plan(text, ParallelSpec.model_fields, chips)

    def cuts(stages: int, virtual_stages: int) -> PipelineCut:
        assert stages * virtual_stages == len(chunks)
        return PipelineCut(stages, virtual_stages, chunks, tuple(1 for _ in chunks))

    return plan_bound(candidate, work, cuts, chips, peak_macs_per_cycle=10)


def test_without_a_pipeline_the_macs_over_every_chip() -> None:
    # 6,400 MACs of 8 samples on 4 replicas of 2 ranks at 10 MACs a cycle: 80 cycles.
    work = Work(8, {"a": 2400, "b": 4000})
    assert _bound("tp=2", 8, work, ()) == Bound(80, 0, 1, 80)
    # An odd share: 7 samples on 2 replicas, 3.5 samples' 3,500 MACs over 20: 175.
    assert _bound("tp=2", 4, Work(7, {"a": 7000}), ()).cycles == 175


def test_1f1b_is_its_last_stage_passes_and_the_fill() -> None:
    # 4 equal chunks of 480 MACs at 16 samples, micro-batches of 2 on 2 replicas (4 a
    # replica), tp = 1: one pass is 480 x 2 / 16 / 10 = 6 cycles; the last stage's
    # 4 micro-batches and the 3 stages before it: (M + p - 1) 6 = 42.
    work = Work(16, {name: 480 for name in "abcd"})
    chunks = (("a",), ("b",), ("c",), ("d",))
    assert _bound("pp=4,micro_batch=2", 8, work, chunks) == Bound(42, 3, 4, 24)
    # Unequal chunks: stage 0 (1,600 MACs: 4 x 20) against stage 1 (800 after 1,600:
    # 4 x 10 + 20): the first binds.
    uneven = Work(16, {"a": 1600, "b": 800})
    assert _bound("pp=2,micro_batch=2", 4, uneven, (("a",), ("b",))) == Bound(80, 0, 2, 80)


def test_interleaved_is_m_v_plus_p_minus_1_passes() -> None:
    # 2 stages of 2 chunks each (stage 1 holds chunks 1 and 3), 6-cycle passes as
    # above, on 4 chips (2 replicas, 4 micro-batches each): M v + p - 1 = 9 passes.
    work = Work(16, {name: 480 for name in "abcd"})
    chunks = (("a",), ("b",), ("c",), ("d",))
    text = "pp=2,schedule=interleaved,virtual_stages=2,micro_batch=2"
    assert _bound(text, 4, work, chunks) == Bound(54, 1, 2, 48)


def test_the_tiny_gpts_array_macs_by_hand(tmp_path: Path) -> None:
    """32 tokens (4 samples of 8), width 16, 4 heads of 4, MLP width 64, vocabulary
    64; each GEMM three times (forward, its input's and its weight's gradient)."""
    request = search.Request(WORKLOAD, HARDWARE, 8, 4, None, tmp_path / "s")
    cache = InputCache()
    base = search.base_run(request)
    sets = search.fixed_sets(request, cache.hardware(HARDWARE))
    macs = array_macs(rewritten_step(search.model_inputs(cache, base, sets), 4))
    qkv, out = 32 * 16 * 48, 32 * 16 * 16
    scores = 4 * 4 * (8 * 8 * 4) * 2  # QK^T and AV of each sample's 4 heads
    block = {"attn": 3 * (qkv + out + scores), "fc": 3 * 32 * 16 * 64, "proj": 3 * 32 * 64 * 16}
    assert macs == {
        **{f"h{i}.{name}": n for i in (0, 1) for name, n in block.items()},
        "lm_head": 3 * 32 * 16 * 64,
    }
    # 737,280 MACs over the 8 chips' 108 arrays of 32 x 32 a cycle: one cycle.
    assert sum(macs.values()) == 737_280 < 8 * 108 * 1024


def bounds_and_steps(
    tmp_path: Path, workload: Path, chips: int, batch: int, seq: int | None = None
) -> list[tuple[Bound, Evaluated]]:
    """Every plan of an exhaustive search with its bound."""
    store = tmp_path / "search"
    argv = ["plan", str(workload), "--hardware", str(HARDWARE), "--chips", str(chips)]
    argv += ["--global-batch", str(batch), "--jobs", "1", "--store", str(store), "--exhaustive"]
    argv += [] if seq is None else ["--seq", str(seq)]
    assert main(argv) == 0
    request = search.Request(workload, HARDWARE, chips, batch, seq, store)
    cache = InputCache()
    base = search.base_run(request)
    sets = search.fixed_sets(request, cache.hardware(HARDWARE))
    inputs = search.model_inputs(cache, base, sets)
    model = search.model_of(inputs, chips, batch)
    fitting = search.filter_plans(cache, base, sets, search.candidates_of(model)).fitting
    plan = search.sweep_of(request, base, sets, fitting, MAX_POINTS)
    bounds = pruned.bounds_of(cache, base, sets, inputs, fitting, request)
    by = {f.candidate: b for f, b in zip(fitting, bounds, strict=True)}
    plans = evaluated(store, plan, fitting)
    assert len(plans) == len(fitting)
    return [(by[e.candidate], e) for e in plans]


def test_the_tiny_gpts_bounds_are_below_every_step(tmp_path: Path) -> None:
    # 40 plans: one cycle of array work (the tiny model's arrays idle most of a step).
    # A plan of 2 ranks (4 replicas of 1 sample) waits for 10 all-reduces of 8 x 16
    # words of 2 bytes one after the other: the embedding's and each block's 2 in the
    # forward, each block's 2 and ln_f's in the backward, each 2 steps of 128 B over
    # the NVSwitch of 12 x 17.73 B/cycle (1 cycle) and 1,000 cycles of latency; and at
    # least a cycle of GEMMs: 10 x 2 x 1,001 + 1.  With sequence parallelism as many
    # gathers and scatters of one step each.
    found = bounds_and_steps(tmp_path, WORKLOAD, 8, 4)
    assert len(found) == 40
    by_tensor: dict[int, set[int]] = {}
    for b, e in found:
        by_tensor.setdefault(dict(e.candidate.parallel).get("tensor", 1), set()).add(b.cycles)
    assert sorted(by_tensor) == [2, 4]
    assert by_tensor[2] == {10 * 2 * 1001 + 1}
    assert all(b.cycles <= e.step_cycles for b, e in found)


def test_the_tiny_moes_bounds_are_below_every_step(tmp_path: Path) -> None:
    found = bounds_and_steps(tmp_path, MOE, 8, 8)
    assert all(0 < b.cycles <= e.step_cycles for b, e in found)


@pytest.mark.slow
def test_the_4_block_gpts_pipeline_bounds_are_below_every_step(tmp_path: Path) -> None:
    found = bounds_and_steps(tmp_path, BLOCKS, 8, 4)
    assert len(found) == 152
    assert all(0 < b.cycles <= e.step_cycles for b, e in found)
    assert {b.stages for b, _ in found} == {1, 2, 4}
    assert {b.stages for b, _ in found if b.chained} == {1, 2, 4}
