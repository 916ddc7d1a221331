"""LayerPipe's placement against the pinned-task model's optimum on the toys of five
equal and seven uneven linear layers, whose optimum the tests derive by a search of
their own over the task model."""

from __future__ import annotations

import functools
import itertools
import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import RunInputs, load_inputs
from accelsim.driver.run import simulate_graph, simulate_training
from accelsim.graph import passes
from accelsim.graph.ops import WHOLE, GemmOp, Phase
from accelsim.report.result import RunResult
from accelsim.report.training import TrainingResult
from accelsim.techniques.pipelines.optimum import Optimum
from accelsim.techniques.pipelines.report import ModelOptimum, optimum_line, optimum_report
from accelsim.timing.costs import UNIT_ARRAY
from tests.conftest import ROOT
from tests.techniques.pipelines.test_pipelining import pipeline

LINEAR5 = ROOT / "configs/experiments/linear5.yaml"
UNEVEN7 = ROOT / "tests/techniques/pipelines/uneven7.yaml"


def by_counts(sizes: Sequence[int], processors: int, below: float = math.inf) -> float:
    """The least period of tasks of one resource on ``processors`` if it is below
    ``below`` (else ``below``): a search over how many tasks of each size every
    processor takes (processors are alike, so each takes one of the largest tasks
    left, or nothing more is left)."""
    kinds = sorted(Counter(s for s in sizes if s).items(), reverse=True)
    values = [size for size, _ in kinds]

    @functools.cache
    def best(left: tuple[int, ...], bins: int) -> float:
        if not any(left):
            return 0
        if bins == 0:
            return math.inf
        first = next(i for i, c in enumerate(left) if c)
        result = below
        ranges = [range(1 if i == first else 0, c + 1) for i, c in enumerate(left)]
        for take in itertools.product(*ranges):
            load = sum(v * t for v, t in zip(values, take, strict=True))
            if load >= result:
                continue
            rest = tuple(c - t for c, t in zip(left, take, strict=True))
            result = min(result, max(load, best(rest, bins - 1)))
        return result

    return best(tuple(c for _, c in kinds), processors)


def task_sizes(single: RunResult) -> tuple[list[int], list[int]]:
    """Each task's array and other units' cycles in a step simulated on one processor,
    summed here by (layer, phase, part) from the trace."""
    array: Counter[tuple[str, Phase, int]] = Counter()
    other: Counter[tuple[str, Phase, int]] = Counter()
    trace = single.trace
    for op in single.graph.ops:
        phase = Phase.UPDATE if op.phase is Phase.COMM else op.phase
        key = (op.layer, phase, op.part if isinstance(op, GemmOp) else WHOLE)
        busy = int(trace.end_cycle[op.op_id] - trace.start_cycle[op.op_id])
        (array if trace.costs.unit[op.op_id] == UNIT_ARRAY else other)[key] += busy
    assert not set(array) & set(other)  # every task on one resource: they are independent
    return list(array.values()), list(other.values())


def model_optimum(inputs: RunInputs, base: RunResult, processors: int) -> int:
    """The toy's task-model optimum, derived here: the better of the whole and the
    row-split dX tasks, each resource packed alone (its tasks need one resource),
    a set whose mean array load is no lower than the other's optimum passed over."""
    split = passes.split_gemms(
        base.graph, lambda op: (0.5, 0) if op.phase is Phase.BWD_INPUT else None
    )
    best = math.inf
    for run in (base, simulate_graph(inputs, split)):
        array, other = task_sizes(run)
        if math.ceil(sum(array) / processors) >= best:
            continue  # its mean load alone is no better
        period = max(by_counts(array, processors, best), by_counts(other, processors, best))
        best = min(best, period)
    return int(best)


@functools.cache
def toy(workload: Path | None, processors: int) -> TrainingResult:
    """``configs/experiments/linear5.yaml`` (or its run of ``workload``) on
    ``processors`` under LayerPipe's defaults, simulated once per test session."""
    sets = [f"processors={processors}", "run.techniques={layerpipe: {}}"]
    sets += [f"workload={workload}"] if workload is not None else []
    return simulate_training(load_inputs(LINEAR5, parse_sets(sets)))


def check_optimum(workload: Path | None, processors: int) -> dict[str, Any]:
    """The report's task-model optimum is exact, equals the one derived here, and its
    speedup and share are the period's; the speedup stays within its bound."""
    result = toy(workload, processors)
    report = pipeline(result)
    best = report["task_optimum"]
    assert best["exact"]
    assert best["period_cycles"] == best["lower_bound_cycles"]
    sets = [] if workload is None else [f"workload={workload}"]
    inputs = load_inputs(LINEAR5, parse_sets(sets))
    assert best["period_cycles"] == model_optimum(inputs, result.base, processors)
    assert best["speedup"] == result.base.total_cycles / best["period_cycles"]
    assert best["share"] == pytest.approx(report["speedup"] / best["speedup"], rel=1e-12)
    assert report["speedup"] <= report["speedup_bound"]
    return report


@pytest.mark.parametrize(
    ("processors", "optimum", "speedup", "winner"),
    [(7, 7.159, 7.159, "free_anywhere"), (8, 7.452, 7.286, "task_optimum_split_dx")],
)
def test_five_equal_layers_reach_the_task_model_optimum(
    processors: int, optimum: float, speedup: float, winner: str
) -> None:
    """``configs/experiments/linear5.yaml`` (unlimited DRAM bandwidth): on 7 processors
    the optimum pairs the fourteen whole array tasks (2 x 2,488,520 cycles), on 8 it
    splits the dX rows (a forward and a dW together, 4,781,456).  The default
    placement reaches 100 % and 98 % of it (the list scheduler within one stage
    alone, 68 % and 66 %)."""
    report = check_optimum(None, processors)
    forward, dw = 2_488_520, 2_292_936  # a forward or dX GEMM, a dW, on one processor
    pairs = {7: 2 * forward, 8: forward + dw}[processors]
    assert report["task_optimum"]["period_cycles"] == pairs
    assert report["candidate"] == winner
    assert round(report["task_optimum"]["speedup"], 3) == optimum
    assert round(report["speedup"], 3) == speedup
    assert report["speedup"] >= 0.95 * report["task_optimum"]["speedup"]
    within_one = next(c for c in report["candidates"] if c["candidate"] == "free")
    share = report["task_optimum"]["period_cycles"] / within_one["steady_cycles_per_minibatch"]
    assert round(share, 2) == {7: 0.68, 8: 0.66}[processors]


def test_uneven_layers_reach_the_optimum_but_for_the_delay_cap() -> None:
    """Seven uneven linear layers (``uneven7.yaml``, batch 2048, unlimited DRAM
    bandwidth) on 7 processors: the optimum of the whole tasks is exact, 7.024x; the
    default placement reaches 95.8 % of it, held back by the cap of ``P``
    mini-batches in flight (its tasks' chain through the processors is longer than
    the cap allows at the optimum's period)."""
    report = check_optimum(UNEVEN7, 7)
    assert round(report["task_optimum"]["speedup"], 3) == 7.024
    assert round(report["task_optimum"]["share"], 3) == 0.958


def test_the_optimum_is_printed_beside_the_speedup() -> None:
    """Exact: the optimum's speedup and the share reached; else the bound its proven
    lower bound of the period gives, the best found, and the share's range."""
    exact = optimum_report(ModelOptimum(Optimum(400, 400, True, ()), 2000), 500.0)
    assert (exact["speedup"], exact["share"], exact["share_at_least"]) == (5.0, 0.8, 0.8)
    assert optimum_line({"task_optimum": exact}, "") == [
        (
            "task-model optimum",
            "5.000x (exact, 400 cycles per mini-batch); this placement reaches 80 % of it",
        )
    ]
    loose = optimum_report(ModelOptimum(Optimum(400, 320, False, ()), 2000), 500.0)
    assert (loose["speedup_bound"], loose["share_at_least"]) == (6.25, 0.64)
    assert optimum_line({"task_optimum": loose}, " (bp)") == [
        (
            "task-model optimum (bp)",
            "at most 6.250x (a proven bound of its period, 320 cycles; best assignment"
            " found 5.000x); this placement reaches 64-80 % of it",
        )
    ]
    assert optimum_line({}, "") == []
