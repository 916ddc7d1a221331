"""The plan search's memory filter gives, candidate by candidate, what the filter
that counted every pipeline stage from its ops gave (``reference_filter.py``): the
same fitting plans in the same order with equal breakdowns (every class, every
stage), the same refusals and messages, over whole searches with pipelines (1F1B and
interleaved), ZeRO stages, recomputation, sequence parallelism and experts."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelsim.driver import pipeline_memo
from accelsim.driver.inputs import InputCache
from accelsim.planner import search
from tests.conftest import ROOT
from tests.planner.reference_filter import counted_from_ops, reference_filter
from tests.planner.test_plan_command import BLOCKS, HARDWARE

GPT2 = ROOT / "workloads" / "gpt2_small.yaml"
MOE = ROOT / "tests" / "fixtures" / "workloads" / "tiny_moe.yaml"

SEARCHES = [
    (BLOCKS, 8, 4, None, {"hardware.dram.capacity_gib": 4e-5}),
    (BLOCKS, 16, 32, None, {"hardware.dram.capacity_gib": 4.6e-5}),
    (BLOCKS, 8, 8, None, {"optimizer.clip_global_norm": 1.0}),
    (MOE, 8, 16, None, {"hardware.dram.capacity_gib": 6e-5}),
    pytest.param(GPT2, 16, 32, 64, {"hardware.dram.capacity_gib": 0.27}, marks=pytest.mark.slow),
]
"""Workload, chips, global batch, sequence length and what else each search sets
(a DRAM capacity that about half the plans fit, or gradient clipping, which the
run's checks refuse with any parallelism but data parallelism)."""


@pytest.mark.parametrize(("workload", "chips", "batch", "seq", "extra"), SEARCHES)
def test_the_filter_gives_the_reference_answers(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    workload: Path,
    chips: int,
    batch: int,
    seq: int | None,
    extra: dict[str, object],
) -> None:
    request = search.Request(workload, HARDWARE, chips, batch, seq, tmp_path / "search")
    cache = InputCache()
    base = search.base_run(request)
    sets = search.fixed_sets(request, cache.hardware(HARDWARE)) | extra
    model = search.model_of(search.model_inputs(cache, base, sets), chips, batch)
    candidates = search.candidates_of(model)
    pipeline_memo.forget()
    fast = search.filter_plans(cache, base, sets, candidates)
    with counted_from_ops(monkeypatch):
        slow = reference_filter(base, sets, candidates, search.SOURCE)
    assert fast.counts(0) == slow.counts(0)
    assert [f.candidate.label for f in fast.fitting] == [f.candidate.label for f in slow.fitting]
    for mine, theirs in zip(fast.fitting, slow.fitting, strict=True):
        assert mine.memory == theirs.memory, mine.candidate.label
    assert list(fast.refusals.items()) == list(slow.refusals.items())
    assert fast.fitting and fast.refusals
