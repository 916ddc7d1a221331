"""Convergence-aware gradient skipping (techniques/skipping/): hand-counted
MACs and folds, the dead dX chain, the monitor, the schedule, the report, errors."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import simulate_training
from accelsim.errors import ConfigError
from accelsim.graph.ops import CommOp, GemmOp, Phase, VectorOp
from accelsim.lowering.infer import load_model
from accelsim.report.result import RunResult
from accelsim.report.training import TrainingResult
from accelsim.techniques.plan import bundled_trace
from accelsim.techniques.skipping.schedule import (
    RECHECK,
    group_statistics,
    monitor,
    schedule,
    synthetic_statistics,
)
from accelsim.techniques.skipping.signals import measured_statistics, read_trace
from tests.conftest import ROOT

GS = "gradient_skipping"
BATCH = 32
# tiny MLP 256-512-256-10 with biases: every tensor fits on chip on the default hardware
TINY = """name: tiny
description: tiny MLP 256-512-256-10
input: {kind: vector, features: 256}
layers:
  - {name: fc1, kind: linear, out_features: 512}
  - {name: relu1, kind: activation, function: relu}
  - {name: fc2, kind: linear, out_features: 256}
  - {name: relu2, kind: activation, function: relu}
  - {name: fc3, kind: linear, out_features: 10}
  - {name: loss, kind: cross_entropy}
"""


def tiny_run(tmp_path: Path, techniques: str, optimizer: str = "sgd", extra: str = "") -> Path:
    (tmp_path / "tiny.yaml").write_text(TINY, encoding="utf-8")
    path = tmp_path / "run.yaml"
    path.write_text(
        "\n".join(
            [
                "name: tiny",
                f"hardware: {ROOT / 'configs/hardware/default.yaml'}",
                "workload: tiny.yaml",
                f"energy: {ROOT / 'configs/energy/horowitz45.yaml'}",
                f"batch_size: {BATCH}",
                f"optimizer: {{kind: {optimizer}}}",
                f"techniques: {techniques}",
                extra,
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    return path


def train(path: Path, *sets: str) -> TrainingResult:
    return simulate_training(load_inputs(path, parse_sets(list(sets))))


def gemm(result: RunResult, name: str) -> GemmOp:
    (op,) = [o for o in result.graph.ops if isinstance(o, GemmOp) and o.name == name]
    return op


def vector(result: RunResult, name: str) -> VectorOp:
    (op,) = [o for o in result.graph.ops if isinstance(o, VectorOp) and o.name == name]
    return op


def macs(result: RunResult, phase: Phase) -> int:
    costs = result.trace.costs
    return sum(int(costs.macs[op.op_id]) for op in result.graph.ops if op.phase is phase)


def test_skipping_nothing_is_the_baseline_byte_for_byte(tmp_path: Path) -> None:
    result = train(tiny_run(tmp_path, f"{{{GS}: {{skip_fraction: 0}}}}"))
    step, base = result.steps[GS], result.base
    assert step.graph == base.graph
    assert step.op_rows() == base.op_rows()
    assert step.layer_rows() == base.layer_rows()
    summary = {k: v for k, v in step.summary().items() if k not in ("settings", "step")}
    assert summary == {k: v for k, v in base.summary().items() if k not in ("settings", "step")}
    assert result.training is not None and result.training.speedup == 1.0


def test_filter_groups_scale_dw_macs_exactly_and_leave_dx(tmp_path: Path) -> None:
    result = train(tiny_run(tmp_path, f"{{{GS}: {{skip_fraction: 0.25, grouping: filter}}}}"))
    step, base = result.steps[GS], result.base
    # dW of a linear layer is (out x in x batch); a quarter of the output rows go,
    # rounded half up: fc1 512 -> 384, fc2 256 -> 192, fc3 10 -> 10 - 3 = 7
    assert gemm(step, "fc1.dw").m == 384
    assert macs(step, Phase.BWD_WEIGHT) == BATCH * (384 * 256 + 192 * 512 + 7 * 256)
    assert macs(base, Phase.BWD_WEIGHT) == BATCH * (512 * 256 + 256 * 512 + 10 * 256)
    assert (
        macs(step, Phase.BWD_INPUT) == macs(base, Phase.BWD_INPUT) == BATCH * (512 * 256 + 256 * 10)
    )
    assert macs(step, Phase.FWD) == macs(base, Phase.FWD)
    # the kept rows' update only, with the monitor's 4 ops per element; one EMA per row
    update = vector(step, "fc2.W.update")
    assert update.elements == 192 * 512
    assert update.ops_per_element == 2 + 4
    monitor = vector(step, "fc2.W.monitor")
    assert (monitor.elements, monitor.ops_per_element) == (192, 3)
    assert [a.tensor.name for a in monitor.reads] == ["fc2.W.ema"]
    assert vector(step, "fc1.b.update").elements == 512  # biases are not grouped


def test_row_groups_drop_whole_column_folds(tmp_path: Path) -> None:
    result = train(tiny_run(tmp_path, f"{{{GS}: {{skip_fraction: 0.25, grouping: row}}}}"))
    step, base = result.steps[GS], result.base
    costs, base_costs = step.trace.costs, base.trace.costs
    # ws on 128 x 128: the dW columns (input features) fold over the array columns,
    # the batch (32) is one row fold: fc2 512 -> 384 columns, 4 -> 3 folds
    fc2 = gemm(step, "fc2.dw")
    assert (fc2.m, fc2.n, fc2.k) == (256, 384, BATCH)
    assert int(costs.folds[fc2.op_id]) == 3
    assert int(base_costs.folds[gemm(base, "fc2.dw").op_id]) == 4
    # fc3: 256 -> 192 columns: still 2 folds, 3/4 of the MACs
    assert int(costs.folds[gemm(step, "fc3.dw").op_id]) == 2
    assert int(costs.macs[gemm(step, "fc3.dw").op_id]) == 10 * 192 * BATCH
    assert macs(step, Phase.BWD_INPUT) == macs(base, Phase.BWD_INPUT)
    assert vector(step, "fc2.W.update").elements == 256 * 384


def test_fully_skipped_layers_take_the_dx_chain_below_them(tmp_path: Path) -> None:
    one = train(tiny_run(tmp_path, f"{{{GS}: {{skip_fraction: 0.34, grouping: layer}}}}"))
    names = {op.name for op in one.steps[GS].graph.ops}
    # fc1 is skipped: its dW and bias gradient go, and so do fc2's dX and relu1's
    # backward, which only fed them; fc1's input is no longer stashed
    assert not names & {"fc1.dw", "fc1.db", "fc2.dx", "relu1.bwd", "fc1.W.update"}
    assert {"fc2.dw", "fc3.dx", "relu2.bwd", "fc2.W.update"} <= names
    assert ("input", 0) in one.base.graph.stashed
    assert ("input", 0) not in one.steps[GS].graph.stashed
    two = train(tiny_run(tmp_path, f"{{{GS}: {{skip_fraction: 0.67, grouping: layer}}}}"))
    step = two.steps[GS]
    backward = [op.name for op in step.graph.ops if op.phase in (Phase.BWD_INPUT, Phase.BWD_WEIGHT)]
    # only fc3 trains: nothing below it needs a gradient, not even fc3's dX
    assert backward == ["loss.bwd", "fc3.dw", "fc3.db"]
    assert step.graph.stashed == {("relu2.out", 0)} | {
        (name, v) for name, v in one.base.graph.stashed if name.startswith("loss")
    }


def test_partly_skipped_layers_keep_every_dx(tmp_path: Path) -> None:
    result = train(tiny_run(tmp_path, f"{{{GS}: {{skip_fraction: 0.9}}}}"))
    step = result.steps[GS]
    assert macs(step, Phase.BWD_INPUT) == macs(result.base, Phase.BWD_INPUT)
    assert gemm(step, "fc3.dw").m == 1  # 10 rows, 9 skipped


def test_data_parallel_reduces_only_the_kept_gradients(tmp_path: Path) -> None:
    result = train(
        tiny_run(tmp_path, f"{{{GS}: {{skip_fraction: 0.5}}}}", extra="assignment: data_parallel"),
        "processors=2",
    )
    reduce = {
        op.name: op.tensor.elements for op in result.steps[GS].graph.ops if isinstance(op, CommOp)
    }
    assert reduce["fc2.W.allreduce"] == 128 * 512
    assert reduce["fc2.b.allreduce"] == 256


def test_training_report_bounds_and_upper_bound(tmp_path: Path) -> None:
    result = train(tiny_run(tmp_path, f"{{{GS}: {{skip_fraction: 0.5}}}}"))
    training = result.training
    assert training is not None
    report = training.sections[GS].details
    assert 1 < training.speedup <= training.speedup_bound
    assert report["by_kind"][GS]["dw_macs"] * 2 == report["base_macs"]["dw_macs"]
    upper, dx_kept = report["upper_bound"], report["upper_bound_dx_kept"]
    assert upper["speedup"] > dx_kept["speedup"] > training.speedup
    assert upper["steps"][GS]["cycles"] >= upper["steps"][GS]["bound_cycles"]
    assert upper["steps"][GS]["cycles"] < dx_kept["steps"][GS]["cycles"] < result.base.total_cycles


def test_the_monitor_decides_per_layer_from_a_trace_by_hand(tmp_path: Path) -> None:
    """Groups alike (no spread), threshold 0.5, halves (levels 2), re-checks so rare
    (one in 10^6 steps) that none is drawn.  fc1's statistic falls below the threshold
    in epoch 1, fc2's in epoch 2, fc3's never.  Epoch 0 trains everything; in epoch 1
    fc1's groups train on their first step only (9 of 10 steps skipped); in epoch 2
    fc1 skips all 10 steps and fc2 9 of 10, so w = 1 and fc2's 0.9 rounds to 1.  In
    epoch 3 fc1's statistic is back above the threshold, but no re-check observes it:
    it stays skipped (closed loop)."""
    rows = {"fc1": (1.0, 0.2, 0.1, 1.0), "fc2": (1.0, 1.0, 0.2, 0.2), "fc3": (1.0,) * 4}
    (tmp_path / "stats.csv").write_text(
        "layer,epoch,statistic\n"
        + "".join(f"{layer},{e},{v}\n" for layer, vs in rows.items() for e, v in enumerate(vs)),
        encoding="utf-8",
    )
    settings = "update_trace: stats.csv, group_spread: 0, levels: 2"
    path = tiny_run(
        tmp_path,
        f"{{{GS}: {{{settings}, recheck_iterations: 1000000}}}}",
        extra="training: {epochs: 4, batches_per_epoch: 10}",
    )
    result = train(path)
    training = result.training
    assert training is not None
    assert set(result.steps) == {"recheck", "skip_1", "skip_2"}
    assert training.plan.shares == (
        {"recheck": 1.0},
        {"skip_1": pytest.approx(0.9), "recheck": pytest.approx(0.1)},
        {"skip_2": 1.0},
        {"skip_2": 1.0},
    )
    report = training.sections[GS].details
    assert report["decided_by"] == "measured: the trace stats.csv"
    assert report["layers"] == {
        "fc1": {"groups": 512, "skip_fraction": pytest.approx(2.9 / 4), "first_epoch": 1},
        "fc2": {"groups": 256, "skip_fraction": 0.5, "first_epoch": 2},
        "fc3": {"groups": 10, "skip_fraction": 0.0, "first_epoch": None},
    }
    groups = 512 + 256 + 10
    assert report["skip_fraction"] == pytest.approx((0.9 * 512 + 2 * 768) / groups / 4)
    # dW MACs: fc1 256 x 512, fc2 512 x 256, fc3 256 x 10, each over the batch
    dw = {"fc1": 512 * 256 * BATCH, "fc2": 256 * 512 * BATCH, "fc3": 10 * 256 * BATCH}
    by_kind = report["by_kind"]
    assert by_kind["recheck"]["dw_macs"] == sum(dw.values())
    assert by_kind["skip_1"]["dw_macs"] == dw["fc2"] + dw["fc3"]
    assert by_kind["skip_2"]["dw_macs"] == dw["fc3"]
    # the step that trains every group monitors every group
    assert by_kind["recheck"]["monitor_vector_ops"] > 0
    cycles = {k: s.cycles for k, s in training.steps.items()}
    assert cycles["recheck"] > cycles["skip_1"] > cycles["skip_2"]
    assert report["cycles_by_epoch"][1] == pytest.approx(
        10 * (0.9 * cycles["skip_1"] + 0.1 * cycles["recheck"])
    )
    assert sum(report["cycles_by_epoch"]) == pytest.approx(training.totals["cycles"].technique)
    # Re-checked on every step, every group is observed every step: nothing skips.
    every = train(path, f"run.techniques.{GS}.recheck_iterations=1").training
    assert every is not None and every.plan.shares == ({"recheck": 1.0},) * 4


def test_closed_loop_monitor_by_hand() -> None:
    rng = np.random.default_rng(0)
    # One group per row: low then high.  q = 1: every skipped group is re-checked at
    # once, so a trained low group trains all 10 steps and nothing is skipped.
    stats = np.array([[0.1, 1.0]] * 3)
    below, skipped = monitor(stats, 0.5, 1, 10, rng)
    assert below.tolist() == [1.0, 0.0] and skipped.tolist() == [0.0, 0.0]
    # q = 1/4 over many groups: a trained low group trains its first step and on
    # Binomial(9, 1/4) re-checks, so (1 + 9/4) / 10 of its steps; a skipped high group
    # waits Geometric(1/4) steps: E[10 - K + 1; K <= 10] = sum_k (11 - k) q (1-q)^(k-1).
    many = np.array([[0.1, 1.0]] * 200_000)
    below, skipped = monitor(many, 0.5, 4, 10, rng)
    assert skipped[0] == pytest.approx(1 - 3.25 / 10, abs=2e-3)
    trained = sum((11 - k) * 0.25 * 0.75 ** (k - 1) for k in range(1, 11))
    assert skipped[1] == pytest.approx(1 - trained / 10, abs=2e-3)


def test_synthetic_statistics_skip_earlier_layers_first() -> None:
    layers = ["a", "b", "c"]
    stats = synthetic_statistics(layers, 0.05, 8.0, 40)
    # decay times 4, 8 and 12 epochs for depths 0, 0.5 and 1
    assert stats["a"][4] == pytest.approx(0.05 + 0.95 * math.exp(-1))
    assert stats["c"][12] == pytest.approx(0.05 + 0.95 * math.exp(-1))
    rng = np.random.default_rng(0)
    per_group = group_statistics(stats, {"a": 64, "b": 64, "c": 64}, 0.5, rng)
    decided = schedule(per_group, 0.5, 10, 4, 100, rng)
    # the epoch from which half a layer's groups are below the threshold
    firsts = [
        next(e for e, share in enumerate(decided.below) if share[layer] >= 0.5) for layer in layers
    ]
    assert firsts == sorted(firsts) and firsts[0] < firsts[2]
    for layer in layers:
        below = [share[layer] for share in decided.below]
        assert all(x <= y for x, y in itertools.pairwise(below))
    # re-checks cap every layer's skipped share near 1 - (1 + 99 / 10) / 100 = 0.891
    assert decided.shares[-1][RECHECK] == pytest.approx(0.109, abs=0.01)


def test_a_statistics_trace_is_checked_row_by_row(tmp_path: Path) -> None:
    (tmp_path / "stats.csv").write_text(
        "layer,epoch,statistic\nfc1,0,0.3\nfc9,0,0.3\nfc2,0,-1\nfc1,0,0.2\n",
        encoding="utf-8",
    )
    path = tiny_run(tmp_path, f"{{{GS}: {{update_trace: stats.csv}}}}")
    with pytest.raises(ConfigError) as err:
        load_inputs(path)
    assert [str(p) for p in err.value.problems] == [
        f"{tmp_path / 'stats.csv'}: line 3: layer: expected a layer with grouped weights"
        " (got 'fc9')",
        f"{tmp_path / 'stats.csv'}: line 4: statistic: expected a finite number >= 0 (got '-1')",
        f"{tmp_path / 'stats.csv'}: line 5: a second row for fc1, epoch 0 (the first is"
        " line 2) (got 0.2)",
    ]
    (tmp_path / "stats.csv").write_text("layer,epoch,statistic\nfc1,0,0.3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"update_trace: no statistic for fc2 at epoch 0"):
        load_inputs(path)


@pytest.mark.parametrize(
    ("section", "key", "message"),
    [
        ("{skip_fraction: 1.5}", "skip_fraction", "less than or equal to 1"),
        ("{grouping: channel}", "grouping", "'filter', 'row' or 'layer'"),
        (
            "{skip_fraction: 0.5, update_trace: t.csv}",
            "update_trace",
            "a fixed skip_fraction replaces the trace-driven schedule",
        ),
        ("{update_trace: missing.csv}", "update_trace", "file not found"),
    ],
)
def test_bad_settings_are_config_errors(
    tmp_path: Path, section: str, key: str, message: str
) -> None:
    with pytest.raises(ConfigError) as err:
        load_inputs(tiny_run(tmp_path, f"{{{GS}: {section}}}"))
    text = str(err.value)
    assert f"techniques.{GS}.{key}" in text and message in text


def test_trace_schedule_defines_kinds_so_it_cannot_join_adagp(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="at most one technique may define"):
        load_inputs(tiny_run(tmp_path, f"{{{GS}: {{}}, gradient_prediction: {{}}}}"))


CONV = """name: tinyconv
description: two 3x3 convs and a classifier
input: {kind: image, channels: 16, height: 8, width: 8}
layers:
  - {name: c1, kind: conv2d, out_channels: 64, kernel: 3, padding: 1}
  - {name: r1, kind: activation, function: relu}
  - {name: c2, kind: conv2d, out_channels: 32, kernel: 3, padding: 1}
  - {name: flat, kind: flatten}
  - {name: fc, kind: linear, out_features: 10}
  - {name: loss, kind: cross_entropy}
"""


@pytest.mark.parametrize(("grouping", "m", "n"), [("filter", 24, 64 * 9), ("row", 32, 48 * 9)])
def test_conv_groups_are_filters_or_input_channels(
    tmp_path: Path, grouping: str, m: int, n: int
) -> None:
    path = tiny_run(tmp_path, f"{{{GS}: {{skip_fraction: 0.25, grouping: {grouping}}}}}")
    (tmp_path / "tiny.yaml").write_text(CONV, encoding="utf-8")
    result = train(path)
    step, base = result.steps[GS], result.base
    # c2's dW: (32 filters) x (64 input channels x 3 x 3) x (batch x 8 x 8 positions)
    dw = gemm(step, "c2.dw")
    assert (dw.m, dw.n, dw.k) == (m, n, BATCH * 8 * 8)
    assert int(step.trace.costs.macs[dw.op_id]) == m * n * BATCH * 64
    assert vector(step, "c2.W.update").elements == m * n
    assert macs(step, Phase.BWD_INPUT) == macs(base, Phase.BWD_INPUT)


def test_synthetic_curve_reports_its_sensitivity_and_the_run_is_one_point(tmp_path: Path) -> None:
    path = tiny_run(
        tmp_path,
        f"{{{GS}: {{statistics: synthetic}}}}",
        extra="training: {epochs: 30, batches_per_epoch: 20}",
    )
    training = train(path).training
    assert training is not None
    details = training.sections[GS].details
    assert details["decided_by"] == "our synthetic curve"
    sens = details["sensitivity"]
    assert set(sens["recheck_iterations"]) == {"2", "10", "100", "1000"}
    assert set(sens["threshold"]) == {"0.25", "0.5", "1"}
    # the run's own setting (recheck 10, threshold 0.5) is the headline, to the bit
    assert sens["recheck_iterations"]["10"] == training.speedup
    assert sens["threshold"]["0.5"] == training.speedup
    # rarer re-checks skip more; a higher threshold skips more
    by_recheck = [sens["recheck_iterations"][r] for r in ("2", "10", "100", "1000")]
    assert by_recheck == sorted(by_recheck) and by_recheck[0] < by_recheck[-1]
    assert sens["threshold"]["0.25"] <= sens["threshold"]["1"]
    line = dict(training.sections[GS].lines)["sensitivity"]
    assert line.startswith("recheck_iterations 2: ")


def test_measured_traces_decide_by_default(tmp_path: Path) -> None:
    path = tiny_run(
        tmp_path, f"{{{GS}: {{}}}}", extra="training: {epochs: 60, batches_per_epoch: 5}"
    )
    training = train(path).training
    assert training is not None
    section = training.sections[GS]
    assert section.details["decided_by"] == "measured: the bundled digits_mlp trace"
    assert "sensitivity" not in section.details
    sources = {i.key: i.source.value for i in section.inputs}
    assert sources["statistics"] == "trace"


def test_measured_statistics_map_by_kind_depth_group_and_epoch() -> None:
    # Three linear layers on the MLP trace's fc1, fc2, fc3 (64, 32, 10 groups, 30 epochs).
    infos = load_model(ROOT / "workloads" / "mlp.yaml")[1]
    layers = ["fc1", "fc2", "fc3"]
    model, stats, source = measured_statistics(infos, layers, {"fc1": 128, "fc2": 2, "fc3": 1}, 60)
    assert model == "digits_mlp" and source == {"fc1": "fc1", "fc2": "fc2", "fc3": "fc3"}
    trace = read_trace(bundled_trace(["linear"], "weights")[1])
    fc1, fc2, fc3 = (trace[n][1] for n in layers)
    # 128 groups on 64: group j takes trace group j // 2; epoch e of 60 takes e // 2
    assert stats["fc1"].shape == (128, 60)
    assert stats["fc1"][5, 7] == fc1[2, 3]
    # 2 groups on 32: groups 0 and 16; one group: the layer's mean
    assert stats["fc2"][1, 59] == fc2[16, 29]
    assert stats["fc3"][0, 0] == pytest.approx(fc3[:, 0].mean())
    assert fc1[:, 0].mean() == pytest.approx(1.0, abs=1e-5)
