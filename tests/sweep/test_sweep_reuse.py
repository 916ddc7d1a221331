"""What a sweep reuses between points: input files read once and each file's data
validated once per distinct set of overrides (:class:`InputCache`), identities from
each input's JSON made once, and the lowered and placed baseline step of points
that share a workload.  Every reuse must give exactly what the uncached path gives."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from pathlib import Path
from typing import Any

import pytest

from accelsim.config.loader import Override, parse_sets
from accelsim.driver import inputs as inputs_module
from accelsim.driver import run as run_module
from accelsim.driver.inputs import InputCache, load_inputs, resolved_data
from accelsim.driver.run import simulate_run, simulate_training
from accelsim.errors import ConfigError, InputError
from accelsim.provenance import version
from accelsim.sweep import plan as plan_module
from accelsim.sweep import plan_sweep
from accelsim.sweep.plan import identity
from accelsim.sweep.worker import _Loaded, run_point
from tests.conftest import ROOT

SMOKE = ROOT / "configs" / "runs" / "smoke.yaml"
DEFAULT = ROOT / "configs" / "runs" / "default.yaml"
GOLDEN_CASES = {
    "smoke": (SMOKE, []),
    "mlp_adam_b128": (ROOT / "configs" / "runs" / "mlp.yaml", []),
    "resnet18_b4": (DEFAULT, ["batch_size=4"]),
    "resnet18_b4_os_scalesim_2proc": (
        DEFAULT,
        [
            "batch_size=4",
            "array.dataflow=os",
            "timing.convention=scalesim",
            "processors=2",
            "assignment=data_parallel",
        ],
    ),
}


def sweep_file(directory: Path, text: str, base: Path = SMOKE) -> Path:
    path = directory / "sw.yaml"
    path.write_text(f"base: {base}\n{text}", encoding="utf-8")
    return path


def count_calls(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    calls: list[int] = []
    real = getattr(module, name)

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counting)
    return calls


def test_planning_validates_each_file_once_per_distinct_overrides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """3 row counts x 2 batch sizes: the run file's data is validated twice (two batch
    sizes), the hardware file's three times (three row counts), the energy table and
    the workload once each, for six points."""
    counts = {
        name: count_calls(monkeypatch, inputs_module, name)
        for name in (
            "read_run_file",
            "validate_by_sections",
            "load_energy_with_origins",
            "load_model",
        )
    }
    path = sweep_file(
        tmp_path, "name: once\ngrid:\n  batch_size: [1, 2]\n  array.rows: [8, 16, 32]\n"
    )
    assert len(plan_sweep(path).points) == 6
    assert {name: len(calls) for name, calls in counts.items()} == {
        "read_run_file": 2,
        "validate_by_sections": 3,
        "load_energy_with_origins": 1,
        "load_model": 1,
    }


def test_the_cache_loads_what_load_inputs_loads_problems_included() -> None:
    cache = InputCache()
    good = [
        [],
        ["array.rows=64", "batch_size=2"],
        ["array.rows=64"],
        ["workload_variant=cifar10", "run.techniques={optimizer_fusion: {}}"],
        ["array.rows=64", "batch_size=2"],
    ]
    for sets in good:
        cached = cache.load(DEFAULT, parse_sets(sets))
        assert resolved_data(cached) == resolved_data(load_inputs(DEFAULT, parse_sets(sets)))
    bad = [["array.rows=0"], ["batch_size=-1", "array.rows=0"], ["workload_variant=nope"]]
    for sets in bad * 2:  # a cached problem is raised again, the same
        with pytest.raises(InputError) as expected:
            load_inputs(DEFAULT, parse_sets(sets))
        with pytest.raises(InputError) as got:
            cache.load(DEFAULT, parse_sets(sets))
        assert type(got.value) is type(expected.value)
        assert str(got.value) == str(expected.value)


def test_typed_values_are_distinct_overrides() -> None:
    """``1``, ``1.0`` and ``true`` compare equal in Python; validation tells them apart
    (strict specs), so the cache must too."""
    cache = InputCache()
    assert (
        cache.load(SMOKE, [Override("array.rows", 16, "--set", "array.rows")]).hardware.array.rows
        == 16
    )
    for value in (16.0, True):
        with pytest.raises(InputError) as raised:
            cache.load(SMOKE, [Override("array.rows", value, "--set", "array.rows")])
        assert str(raised.value) == f"--set: array.rows: expected an integer (got {value})"


def test_identity_is_the_hash_of_the_resolved_configuration(tmp_path: Path) -> None:
    """The identity assembled from each input's own JSON is the hash of the whole
    resolved configuration (without the keys that only name things)."""
    path = sweep_file(
        tmp_path,
        "name: ids\ngrid:\n  array.rows: [8, 16]\n  optimizer.kind: [sgd, adam]\n",
    )
    for point in plan_sweep(path).points:
        loaded = load_inputs(Path(point.task.base), point.task.overrides())
        data = resolved_data(loaded)
        data["run"] = {
            k: v
            for k, v in data["run"].items()
            if k not in ("name", "description", "hardware", "workload", "energy", "overrides")
        }
        text = json.dumps({"accelsim": version(), **data}, sort_keys=True, separators=(",", ":"))
        assert point.task.identity == hashlib.sha256(text.encode()).hexdigest()[:16]
        assert identity(loaded) == point.task.identity


def test_points_that_share_a_workload_reuse_its_lowered_and_placed_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four hardware-only points lower and place the step once; a batch size more
    lowers it once more."""
    lowered = count_calls(monkeypatch, run_module, "lower")
    monkeypatch.setattr(run_module._Reused, "graphs", type(run_module._Reused.graphs)())
    path = sweep_file(
        tmp_path,
        "name: reuse\ngrid:\n  batch_size: [1, 2]\n"
        "  array.rows: [8, 16]\n  dram.bandwidth_bytes_per_cycle: [8, 64]\n",
    )
    for point in plan_sweep(path).points:
        assert run_point(point.task).status == "ok"
    assert len(lowered) == 2


def _uncached(base: Path, sets: list[Override]) -> str:
    run_module._Reused.graphs.clear()
    result = simulate_training(load_inputs(base, sets))
    return json.dumps(result.summary(), indent=2, allow_nan=False) + "\n"


def test_reused_steps_give_the_uncached_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three random runs of eight consecutive ResNet-18 points (the last three axes,
    hardware, vary fastest), over batch, processors, assignment, optimizer and a
    technique, simulated one after another in this process, reuse the lowered step
    and give the summary that a fresh, uncached run of each point gives, byte for byte."""
    path = sweep_file(
        tmp_path,
        "name: sample\ngrid:\n  batch_size: [2, 4]\n  processors: [1, 2]\n"
        "  assignment: [single, data_parallel]\n  optimizer.kind: [sgd, adam]\n"
        "  run.techniques: [{}, {optimizer_fusion: {}}]\n  array.rows: [32, 128]\n"
        "  array.dataflow: [os, ws]\n  dram.bandwidth_bytes_per_cycle: [32, 128]\n",
        base=DEFAULT,
    )
    points = plan_sweep(path).points
    starts = random.Random(29).sample(range(0, len(points), 8), 3)
    sample = [p for start in starts for p in points[start : start + 8]]
    lowered = count_calls(monkeypatch, run_module, "lower")
    monkeypatch.setattr(run_module._Reused, "graphs", type(run_module._Reused.graphs)())
    reused = [run_point(p.task) for p in sample]
    assert len(lowered) <= 3
    for point, outcome in zip(sample, reused, strict=True):
        assert outcome.status == "ok", outcome.error
        assert outcome.summary_json == _uncached(Path(point.task.base), point.task.overrides())


@pytest.mark.parametrize("name", sorted(GOLDEN_CASES))
def test_golden_runs_through_the_cache_twice(name: str) -> None:
    """Each golden run loaded through one cache and simulated twice (the second reusing
    the first's graphs) gives the uncached run's summary."""
    base, sets = GOLDEN_CASES[name]
    cache = InputCache()
    expected = simulate_run(load_inputs(base, parse_sets(sets))).summary()
    for _ in range(2):
        assert simulate_run(cache.load(base, parse_sets(sets))).summary() == expected


def test_a_worker_keeps_one_cache_per_plan() -> None:
    first = _Loaded.cache("plan-a")
    assert _Loaded.cache("plan-a") is first
    assert _Loaded.cache("plan-b") is not first


def test_step_totals_are_counted_once_per_graph_and_handed_out_as_copies() -> None:
    from accelsim.driver import limits

    graph = simulate_run(load_inputs(SMOKE)).graph
    first = limits.step_totals(graph)
    first["MACs"] = -1  # a caller's copy: the kept totals do not change
    assert limits.step_totals(graph) == limits._count(graph).totals
    assert limits.step_totals(graph)["MACs"] > 0


def test_reused_fused_steps_give_the_uncached_results(tmp_path: Path) -> None:
    """With epilogues fused (tile streams whose residency depends on the buffers), points
    that differ in buffer sizes and dataflow reuse one lowered step, and the facts kept
    on it (tile streams, the vector ops' costs per residency, the schedule's GEMM
    columns), and give what a fresh run of each gives."""
    path = sweep_file(
        tmp_path,
        "name: fused\nset:\n  lowering.fuse_epilogues: all\n  batch_size: 2\ngrid:\n"
        "  buffers.ofmap_kib: [32, 64, 1024]\n  array.dataflow: [os, ws]\n",
        base=DEFAULT,
    )
    run_module._Reused.graphs.clear()
    for point in plan_sweep(path).points:
        outcome = run_point(point.task)
        assert outcome.status == "ok", outcome.error
        assert outcome.summary_json == _uncached(Path(point.task.base), point.task.overrides())


def test_facts_are_kept_once_per_graph_object() -> None:
    from accelsim.graph.memo import per_graph

    graph = simulate_run(load_inputs(SMOKE)).graph
    made: list[int] = []

    def make() -> list[int]:
        made.append(1)
        return [len(graph.ops)]

    first = per_graph(graph, "test fact", make)
    assert per_graph(graph, "test fact", make) is first
    assert made == [1]
    copy = dataclasses.replace(graph)
    assert copy == graph  # the kept facts take no part in equality
    assert per_graph(copy, "test fact", make) == first and made == [1, 1]


def _planned(plan: Any) -> list[tuple[Any, ...]]:
    return [
        (p.axes, p.task.identity, p.task.index, p.task.label, p.task.sets, p.task.layers)
        for p in plan.points
    ]


def test_forked_planning_gives_the_plan_of_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planned by two forked processes in 16 shares (a grid, a zip, an exclude, a fixed
    set and a suite's model axis), a sweep has the points, identities, indices, labels
    and overrides that one process gives it."""
    monkeypatch.setattr(plan_module, "PARALLEL_POINTS", 1)
    suite = ROOT / "configs" / "suites" / "default.yaml"
    path = sweep_file(
        tmp_path,
        f"name: forked\nsuite: {suite}\nmodels: [mlp, alexnet, lstm_ptb]\nset:\n  batch_size: 2\n"
        "grid:\n  array.rows: [16, 32, 64]\n  dram.bandwidth_bytes_per_cycle: [16, 64]\n"
        "zip:\n  - {array.cols: [16, 32], array.dataflow: [os, ws]}\n"
        "exclude:\n  - {array.rows: 32, array.cols: 16}\n",
    )
    alone = plan_sweep(path)
    assert len(alone.points) == 3 * 2 * 2 * 3 - 3 * 2
    assert _planned(plan_sweep(path, jobs=2)) == _planned(alone)


BANDWIDTH = "dram.bandwidth_bytes_per_cycle"


def test_forked_planning_reports_the_problems_of_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bad values and two points that are the same design, planned by forked processes:
    the same problems, in the same order, as one process reports."""
    monkeypatch.setattr(plan_module, "PARALLEL_POINTS", 1)
    path = sweep_file(
        tmp_path,
        "name: bad\ngrid:\n  array.rows: [8, 0, 16, -1]\n"
        "  dram.bandwidth_bytes_per_cycle: [8, 8.0, 16]\n",
    )
    with pytest.raises(ConfigError) as alone:
        plan_sweep(path)
    with pytest.raises(ConfigError) as forked:
        plan_sweep(path, jobs=3)
    assert forked.value.problems == alone.value.problems
    assert [(p.path, p.message, p.value) for p in alone.value.problems] == [
        ("", "two points are the same design (point 0)", {"array.rows": 8, BANDWIDTH: 8.0}),
        ("grid.array.rows", "input should be greater than 0", 0),
        ("", "two points are the same design (point 2)", {"array.rows": 16, BANDWIDTH: 8.0}),
        ("grid.array.rows", "input should be greater than 0", -1),
    ]
