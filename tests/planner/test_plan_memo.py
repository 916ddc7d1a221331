"""A pipeline plan simulated inside a search, where it reuses the rank graph, passes,
updates, tables and stage memory of the plans before it
(:mod:`accelsim.driver.pipeline_memo`), gives the numbers ``--plan`` gives it alone
(the memo emptied first): the whole ``summary.json``, on the 4-block GPT of
``tiny_gpt_blocks.yaml`` on 8 chips, global batch 4, for 1F1B and interleaved plans,
with and without ZeRO and recomputation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from accelsim.cli import main
from accelsim.config.loader import parse_sets
from accelsim.config.parallel import ParallelSpec
from accelsim.driver import pipeline_memo, pipeline_step
from accelsim.driver.inputs import InputCache, load_inputs
from accelsim.driver.run import simulate_training
from accelsim.planner import search
from accelsim.planner.given import parse_plan
from accelsim.sweep.executors import Executor
from tests.conftest import ROOT
from tests.planner.test_plan_command import BLOCKS, HARDWARE, plan

PLANS = [
    "tp=2,pp=2,micro_batch=1",
    "tp=2,pp=2,micro_batch=1,zero=2",
    "tp=2,pp=2,schedule=interleaved,virtual_stages=2,micro_batch=1,zero=1",
    "tp=2,pp=2,schedule=interleaved,virtual_stages=2,micro_batch=1,recompute=selective",
    "tp=2,pp=2,micro_batch=1,recompute=selective",
    "tp=1,pp=4,micro_batch=1,zero=1,recompute=full",
    "tp=1,pp=4,micro_batch=1,recompute=full",
    "tp=4,pp=2,schedule=interleaved,virtual_stages=2,micro_batch=2,recompute=full",
    "tp=4,pp=2,micro_batch=2,recompute=full",
]
"""Plans that share rank graphs in twos (tensor degree, micro-batch and recomputation
alike)."""


def _summary(store: Path) -> dict[str, Any]:
    (point,) = (store / "points").iterdir()
    summary: dict[str, Any] = json.loads((point / "summary.json").read_text("utf-8"))
    return summary


def test_a_plan_in_a_search_equals_the_plan_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pipeline_memo.forget()
    request = search.Request(BLOCKS, HARDWARE, 8, 4, None, tmp_path / "search")
    cache = InputCache()
    base = search.base_run(request)
    sets = search.fixed_sets(request, cache.hardware(HARDWARE))
    given = [parse_plan(text, ParallelSpec.model_fields, 8) for text in PLANS]
    candidates = sorted(given, key=search.sharing_first)
    filtered = search.filter_plans(cache, base, sets, candidates)
    assert [f.candidate for f in filtered.fitting] == candidates
    sweep = search.sweep_of(request, base, sets, filtered.fitting, 100)
    with Executor() as executor:
        assert search.simulate(request, sweep, executor, filtered.fitting).failed == 0
    summaries = {
        point.task.identity: json.loads(
            (request.store / "points" / point.task.identity / "summary.json").read_text("utf-8")
        )
        for point in sweep.points
    }
    for n, (candidate, point) in enumerate(zip(candidates, sweep.points, strict=True)):
        pipeline_memo.forget()
        text = candidate.label
        alone = plan(tmp_path / f"alone{n}", "--plan", text)
        alone[1] = str(BLOCKS)
        assert main(alone) == 0
        capsys.readouterr()
        assert _summary(tmp_path / f"alone{n}" / "search") == summaries[point.task.identity], text


def test_filtered_in_two_processes_as_in_one(tmp_path: Path) -> None:
    """The memory filter on two forked workers, each a contiguous share: the same
    counts, fitting plans (in order, with their memory) and refusals as in one."""
    request = search.Request(BLOCKS, HARDWARE, 8, 4, None, tmp_path / "search")
    cache = InputCache()
    base = search.base_run(request)
    sets = search.fixed_sets(request, cache.hardware(HARDWARE))
    model = search.model_of(search.model_inputs(cache, base, sets), 8, 4)
    candidates = search.candidates_of(model)
    assert len(candidates) >= search.FILTERED_APART
    one = search.filter_plans(cache, base, sets, candidates)
    two = search.filter_in_parallel(cache, base, sets, candidates, 2)
    assert two.counts(0) == one.counts(0)
    assert two.fitting == one.fitting
    assert list(two.refusals.items()) == list(one.refusals.items())


def test_the_memo_tells_energy_tables_apart(tmp_path: Path) -> None:
    """Two run files alike but for the energy table their same relative path names
    (Horowitz's and Accelergy's 45 nm tables): loaded through one cache they share the
    workload objects and the run's settings, and each pipeline plan still gets its own
    table's energy, the energy it gets alone."""
    runs = []
    for name, table in (("a", "horowitz45.yaml"), ("b", "accelergy45.yaml")):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "energy.yaml").write_text(
            (ROOT / "configs" / "energy" / table).read_text("utf-8"), "utf-8"
        )
        run = folder / "run.yaml"
        run.write_text(
            "name: tiny\n"
            f"hardware: {ROOT / 'configs/hardware/default.yaml'}\n"
            f"workload: {BLOCKS}\n"
            "energy: energy.yaml\n"
            "batch_size: 8\n"
            "optimizer: {kind: adam}\n",
            "utf-8",
        )
        runs.append(run)
    sets = parse_sets(["processors=2", "run.parallel={pipeline: 2}"])
    pipeline_memo.forget()
    cache = InputCache()
    shared = [simulate_training(cache.load(run, sets)).summary()["energy_pj"] for run in runs]
    alone = []
    for run in runs:
        pipeline_memo.forget()
        alone.append(simulate_training(load_inputs(run, sets)).summary()["energy_pj"])
    assert shared == alone
    assert alone[0] != alone[1]


def _tiny_run(folder: Path) -> Path:
    run = folder / "run.yaml"
    run.write_text(
        "name: tiny\n"
        f"hardware: {ROOT / 'configs/hardware/default.yaml'}\n"
        f"workload: {BLOCKS}\n"
        f"energy: {ROOT / 'configs/energy/horowitz45.yaml'}\n"
        "batch_size: 8\n"
        "assignment: data_parallel\n"
        "optimizer: {kind: adam}\n",
        "utf-8",
    )
    return run


def test_the_memo_keeps_a_bounded_share_of_a_rank_graph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plans of one rank graph over two cuts, alternating, with one cut kept: each
    plan's op lists are made again when its cut comes back, never more than one cut's
    and stage's are held, the passes' cycles are kept by 20-byte digests, and every
    plan still gets the summary it gets alone."""
    monkeypatch.setattr(pipeline_step, "KEPT_CUTS", 1)
    run = _tiny_run(tmp_path)
    plans = ["{pipeline: 2}", "{pipeline: 4}", "{pipeline: 2, zero: 1}", "{pipeline: 4}"]
    sets = [parse_sets(["processors=4", f"run.parallel={text}"]) for text in plans]
    pipeline_memo.forget()
    cache = InputCache()
    shared = []
    for each in sets:
        shared.append(simulate_training(cache.load(run, each)).summary())
        (entry,) = pipeline_memo._Kept.graphs.values()
        assert len(entry.passes.cuts) == len(entry.passes.stages) == 1
        assert entry.passes.cycles
        assert {(len(digest), type(shard)) for digest, shard in entry.passes.cycles} == {(20, int)}
    alone = []
    for each in sets:
        pipeline_memo.forget()
        alone.append(simulate_training(load_inputs(run, each)).summary())
    assert shared == alone
    assert shared[0] != shared[1]


def test_a_process_keeps_at_most_its_rank_graphs(tmp_path: Path) -> None:
    """Plans of four rank graphs (tensor degree and recomputation) in one process: it
    keeps the last :data:`~accelsim.driver.pipeline_memo.SHARED_RANK_GRAPHS`, each with
    at most :data:`~accelsim.driver.pipeline_step.KEPT_CUTS` cuts' op lists."""
    run = _tiny_run(tmp_path)
    pipeline_memo.forget()
    cache = InputCache()
    for tensor in (1, 2):
        for techniques in ("{}", "{recomputation: {policy: full}}"):
            for pipeline in (2, 4, 2):
                sets = parse_sets(
                    [
                        "processors=8",
                        f"run.parallel={{pipeline: {pipeline}, tensor: {tensor}}}",
                        f"run.techniques={techniques}",
                    ]
                )
                simulate_training(cache.load(run, sets))
                kept = pipeline_memo._Kept.graphs.values()
                assert len(kept) <= pipeline_memo.SHARED_RANK_GRAPHS
                assert all(len(e.passes.cuts) <= pipeline_step.KEPT_CUTS for e in kept)
    assert len(pipeline_memo._Kept.graphs) == pipeline_memo.SHARED_RANK_GRAPHS
