"""Approximate random dropout: patterns, the SGD search, fold counts, composition, checks."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import RunInputs, load_inputs
from accelsim.driver.run import simulate_training
from accelsim.errors import ConfigError
from accelsim.graph.ops import GemmOp, Phase
from accelsim.mapping.schedule import fold_use
from accelsim.report.result import RunResult
from accelsim.report.training import TrainingResult
from accelsim.techniques.base import StepCost, TechniqueContext
from accelsim.techniques.dropout import kernels
from accelsim.techniques.dropout.folds import FIELDS, NONE, W_IN, W_OUT, compacted_use, table
from accelsim.techniques.dropout.patterns import (
    PatternFamily,
    project_simplex,
    save_distribution,
    search,
)
from accelsim.techniques.dropout.rewrite import Plan
from accelsim.techniques.dropout.steps import StepCounts, StepPlan, count_steps
from accelsim.techniques.dropout.technique import ApproximateDropout
from tests.conftest import ROOT

RUN = ROOT / "configs" / "runs" / "mlp_dropout.yaml"
KIND = "approximate_dropout"


def run(*sets: str, path: Path = RUN) -> TrainingResult:
    return simulate_training(load_inputs(path, parse_sets(list(sets))))


def gemm(result: TrainingResult, name: str, kind: str = KIND) -> tuple[GemmOp, int, int]:
    """The op, its MACs and folds in the simulated step of ``kind``."""
    step = result.steps[kind] if kind != "base" else result.base
    op = next(o for o in step.graph.ops if o.name == name)
    assert isinstance(op, GemmOp)
    c = step.trace.costs
    return op, int(c.macs[op.op_id]), int(c.folds[op.op_id])


@pytest.mark.parametrize("rate", [0.3, 0.5, 0.7])
@pytest.mark.parametrize("units", [2048, 650, 37])
def test_search_converges_to_the_rate_for_every_unit(rate: float, units: int) -> None:
    family = PatternFamily.up_to(16)
    drops = family.row_drops(units)
    found = search(drops, rate, iterations=600)
    assert found.probabilities.min() >= 0
    assert found.probabilities.sum() == pytest.approx(1, abs=1e-12)
    assert found.max_error < 1e-3
    assert found.losses[-50:].mean() < found.losses[:50].mean() or found.losses[0] < 1e-20
    # the drawn patterns' rates stay near the target (the spread regulariser)
    assert found.rate_spread(drops) < 0.1


def test_search_converges_over_a_tile_grid() -> None:
    drops = PatternFamily.up_to(8).tile_drops(16, 11)
    assert search(drops, 0.4, iterations=600).max_error < 1e-3


def test_simplex_projection() -> None:
    v = np.array([0.5, 1.2, -0.3, 0.1])
    p = project_simplex(v)
    assert p.sum() == pytest.approx(1) and p.min() >= 0
    np.testing.assert_allclose(project_simplex(p), p)
    np.testing.assert_allclose(project_simplex(np.array([0.2, 0.3, 0.5])), [0.2, 0.3, 0.5])


def test_kept_rows_match_the_drop_matrix() -> None:
    family = PatternFamily.up_to(9)
    for units in (1, 7, 100, 650):
        expected = units - family.row_drops(units).sum(axis=1)
        np.testing.assert_array_equal(family.kept_rows(np.arange(len(family)), units), expected)


def test_numba_kernel_matches_the_numpy_reference() -> None:
    rng = np.random.default_rng(3)
    g, steps = 16, 5
    w_in = rng.integers(50, 700, g)
    w_out = rng.integers(20, 600, g)
    # (Sr, Sc, T): ws forward and dX, ws dW, os forward, os dW, is forward
    roles = [(W_IN, W_OUT, NONE), (W_OUT, W_IN, NONE), (NONE, W_IN, W_OUT),
             (NONE, W_OUT, W_IN), (W_OUT, W_IN, NONE), (W_IN, NONE, W_OUT)]  # fmt: skip
    pick = rng.integers(0, len(roles), g)
    pick[: len(roles)] = range(len(roles))
    sr_is = np.array([roles[i][0] for i in pick])
    sc_is = np.array([roles[i][1] for i in pick])
    t_is = np.array([roles[i][2] for i in pick])
    batch = rng.integers(10, 300, g)
    dims = {W_IN: w_in, W_OUT: w_out, NONE: batch}
    sr = np.array([dims[r][j] for j, r in enumerate(sr_is)])
    sc = np.array([dims[c][j] for j, c in enumerate(sc_is)])
    t = np.array([dims[x][j] for j, x in enumerate(t_is)])
    part = np.maximum(1, w_in - rng.integers(0, 40, g))
    rows, cols = np.full(g, 32), np.full(g, 32)
    tr, tc = rng.integers(4, 33, g), rng.integers(4, 33, g)
    site = rng.integers(-1, 3, g)
    period = rng.integers(2, 6, (steps, 3))
    offset = rng.integers(0, 2, (steps, 3))
    keep = rng.integers(0, 2, (steps, 3))
    columns = (sr, sc, t, rows, cols, sr_is, sc_is, w_in, w_out, part, tr, tc)
    fast = kernels.compacted_use(
        table(dict(zip(FIELDS, columns, strict=True))), site, period, offset, keep
    )
    for s in range(steps):
        for j in range(g):
            if site[j] < 0:
                mask = np.ones((-(-sr[j] // 32), -(-sc[j] // 32)), bool)
                expected = fold_use(mask, int(sr[j]), int(sc[j]), int(t[j]), 32, 32)
            else:
                p = (int(period[s, site[j]]), int(offset[s, site[j]]), bool(keep[s, site[j]]))
                expected = compacted_use(
                    int(sr[j]), int(sc[j]), int(t[j]), 32, 32, int(sr_is[j]), int(sc_is[j]),
                    int(w_in[j]), int(w_out[j]), int(part[j]), (int(tr[j]), int(tc[j])), p,
                )  # fmt: skip
            assert fast[s, j].tolist() == expected.tolist(), (s, j)


def period_two(tmp_path: Path) -> Path:
    """A distribution file: the two period-2 drop patterns, equally likely (rate 0.5)."""
    family = PatternFamily.up_to(16)
    q = np.where((family.period == 2) & ~family.keep, 0.5, 0.0)
    found = search(family.row_drops(4), 0.5, iterations=1)
    path = tmp_path / "period2.json"
    save_distribution(path, family, dataclasses.replace(found, probabilities=q))
    return path


def test_row_pattern_skips_whole_folds_by_hand(tmp_path: Path) -> None:
    """Period-2 patterns only: 1024 of 2048 neurons kept per layer in every step."""
    dist = period_two(tmp_path)
    result = run("batch_size=256", f"run.techniques.approximate_dropout.distribution={dist}")
    b = 256
    # fc1: 784 -> 1024 kept outputs; WS folds ceil(784/128) x ceil(1024/128)
    op, macs, folds = gemm(result, "fc1.fwd")
    assert (op.m, op.n, op.k) == (b, 1024, 784)
    assert (macs, folds) == (b * 1024 * 784, 7 * 8)
    # fc2 (hidden to hidden) scales by k^2 in every GEMM
    base_macs = gemm(result, "fc2.fwd", "base")[1]
    for name in ("fc2.fwd", "fc2.dx", "fc2.dw"):
        op, macs, folds = gemm(result, name)
        assert macs * 4 == base_macs == b * 2048 * 2048
    assert gemm(result, "fc2.fwd")[2] == 8 * 8
    assert gemm(result, "fc2.dw")[2] == 8 * -(-b // 128)  # WS dW: Sr = batch, Sc = in
    # fc3: 1024 kept inputs; dX columns 1024
    op, macs, folds = gemm(result, "fc3.fwd")
    assert (op.k, macs, folds) == (1024, b * 10 * 1024, 8)
    training = result.training
    assert training is not None
    report = training.sections[KIND].details
    assert report["skipped_mac_fraction"] == pytest.approx(
        report["skipped_macs"] / int(result.base.trace.costs.macs.sum())
    )
    # every step draws period 2: no spread
    assert report["by_kind"][KIND]["per_step"]["cycles"]["std"] == 0
    assert training.speedup <= training.speedup_bound


def test_row_pattern_folds_follow_the_drawn_kept_counts() -> None:
    result = run(
        "batch_size=128",
        "run.techniques.approximate_dropout={rate: 0.3, steps: 40}",
    )
    assert result.training is not None
    report = result.training.sections[KIND].details
    sites = {s["dropout"]: s for s in report["sites"]}
    assert set(sites) == {"drop1", "drop2"}
    op, macs, folds = gemm(result, "fc2.fwd")
    k1, k2 = op.k, op.n
    assert folds == -(-k1 // 128) * -(-k2 // 128)
    assert macs == 128 * k1 * k2
    # step 0's kept counts are within the patterns' range and vary over the steps
    assert 0.5 * 2048 <= k1 <= 0.8 * 2048
    per_step = report["by_kind"][KIND]["per_step"]["cycles"]
    assert per_step["std"] > 0
    assert per_step["min"] <= result.training.steps[KIND].cycles <= per_step["max"]


def test_tile_patterns_compact_per_column_block_by_hand(tmp_path: Path) -> None:
    """Period 2 (a checkerboard of dropped tiles) on the 128x128 ws array, batch 256."""
    dist = period_two(tmp_path)
    result = run(
        "batch_size=256",
        f"run.techniques.approximate_dropout={{pattern: tile, distribution: {dist}}}",
    )
    mib = 1 << 20
    # 128x128 tiles: each of fc2's 16 tile columns keeps 8 of its 16 tiles: 8 row folds
    for name in ("fc2.fwd", "fc2.dx"):
        op, macs, folds = gemm(result, name)
        assert folds == 16 * 8
        assert macs * 2 == op.m * op.n * op.k
    # fc2.fwd reads half its 8 MiB weight (the kept tiles) and all of its 1 MiB input
    # (read once: every input row is needed by some column block)
    fwd = gemm(result, "fc2.fwd")[0].op_id
    costs = result.steps[KIND].trace.costs
    assert int(costs.dram_filter_read_bytes[fwd]) == 4 * mib
    assert int(costs.dram_ifmap_read_bytes[fwd]) == mib
    # dW streams the weight's output dimension: the same 2 x 16 folds, each streaming the
    # 1024 kept positions of its tile column instead of 2048
    op, macs, folds = gemm(result, "fc2.dw")
    dw = op.op_id
    assert folds == gemm(result, "fc2.dw", "base")[2] == 32
    assert macs * 2 == op.m * op.n * op.k
    per_fold = 2 * 128 + 128 - 2
    assert int(costs.compute_cycles[dw]) == 32 * (per_fold + 1024)
    base_dw = gemm(result, "fc2.dw", "base")[0].op_id
    assert int(result.base.trace.costs.compute_cycles[base_dw]) == 32 * (per_fold + 2048)
    # fc3's weight is 16 x 1 tiles: its one tile column keeps 8, in 8 row folds
    assert gemm(result, "fc3.fwd")[2] == 8
    # 64x64 tiles: 32 tile columns, two to a 128-wide column block, gathered by parity;
    # each block keeps 16 of 32 tile rows (1024 rows): 8 row folds, half of the 256
    small = run(
        "batch_size=256",
        f"run.techniques.approximate_dropout={{pattern: tile, distribution: {dist},"
        " tile: {rows: 64, cols: 64}}",
    )
    for name in ("fc2.fwd", "fc2.dx"):
        op, macs, folds = gemm(small, name)
        assert (folds, macs * 2) == (128, op.m * op.n * op.k)
    assert gemm(small, "fc3.fwd")[2] == 8


def test_element_pattern_is_the_baseline_exactly() -> None:
    result = run("run.techniques.approximate_dropout.pattern=element")
    step, base = result.steps[KIND], result.base
    assert step.total_cycles == base.total_cycles
    assert step.energy.total_pj == base.energy.total_pj
    assert step.dram_bytes == base.dram_bytes
    np.testing.assert_array_equal(step.trace.costs.macs, base.trace.costs.macs)
    report = result.training
    assert report is not None and report.speedup == 1.0
    assert report.energy_reduction == report.dram_reduction == 0.0
    details = report.sections[KIND].details
    assert details["skipped_macs"] == details["skipped_folds"] == 0.0


def drawn(inputs: RunInputs, result: TrainingResult) -> tuple[TechniqueContext, Plan]:
    """The context of the run's approximate dropout and the plan it drew."""
    technique = inputs.techniques[0]
    assert isinstance(technique, ApproximateDropout)
    ctx = TechniqueContext(
        inputs.run,
        inputs.run_file.path,
        inputs.hardware,
        inputs.machine,
        inputs.workload,
        inputs.infos,
        (),
        lambda g: result.base,
        lambda kind, replace: StepCost.of(result.base),
    )
    gemms = [o for o in result.base.graph.ops if isinstance(o, GemmOp)]
    return ctx, technique.plan(ctx, gemms)


def counted_as_simulated(counts: StepCounts, result: TrainingResult, dram: str) -> RunResult:
    """Asserts that the counted step 0's GEMMs cost what the simulated step's do (MACs,
    folds, compute cycles and the ``dram`` bytes); returns the simulated step."""
    step = result.steps[KIND]
    by_name = {o.name: o.op_id for o in step.graph.ops}
    for j, op_id in enumerate(counts.op_ids.tolist()):
        mine = by_name[result.base.graph.ops[op_id].name]
        for field in ("macs", "folds", "compute_cycles", dram):
            assert counts.costs[field][0, j] == getattr(step.trace.costs, field)[mine], field
    return step


@pytest.mark.parametrize("pattern", ["row", "tile"])
def test_the_counted_step_zero_is_the_simulated_step(pattern: str) -> None:
    """The per-step count (closed forms on the baseline schedule, the fold kernel) gives
    step 0's simulated GEMM costs exactly, and the report's per-layer skipped MACs."""
    sets = [
        "batch_size=128",
        f"run.techniques.approximate_dropout={{rate: 0.3, pattern: {pattern}}}",
    ]
    inputs = load_inputs(RUN, parse_sets(sets))
    result = simulate_training(inputs)
    ctx, plan = drawn(inputs, result)
    counts = count_steps(
        ctx,
        result.base,
        StepPlan(
            plan.shrinks, plan.tiles, plan.kept, plan.fetched, plan.patterns, plan.tile, {}, 1
        ),
    )
    # row: fc1's fwd and dW (it has no dX), fc2's and fc3's three; tile: the consumers'
    assert counts.steps == 100 and len(counts.op_ids) == {"row": 8, "tile": 6}[pattern]
    step = counted_as_simulated(counts, result, "dram_filter_read_bytes")
    assert result.training is not None
    report = result.training.sections[KIND].details
    skipped = result.base.trace.costs.macs[counts.op_ids] - counts.costs["macs"]
    assert report["skipped_macs"] == pytest.approx(skipped.sum(axis=1).mean())
    cycles = report["by_kind"][KIND]["per_step"]["cycles"]
    assert cycles["min"] <= step.total_cycles <= cycles["max"]
    assert cycles["std"] > 0
    layers = report["layers"]
    assert set(layers) == ({"fc1", "fc2", "fc3"} if pattern == "row" else {"fc2", "fc3"})
    for row in layers.values():
        assert 0 < row["skipped_macs"] < row["baseline_macs"]
        assert row["gemm_compute_cycles"]["min"] < row["gemm_compute_cycles"]["max"]
        assert row["gemm_energy_pj"]["mean"] > 0


def test_lstm_consumers_shrink_only_their_input_part(tmp_path: Path) -> None:
    result = run(
        "workload=workloads/lstm_ptb.yaml",
        "batch_size=8",
        f"run.techniques.approximate_dropout={{steps: 4, distribution: {period_two(tmp_path)}}}",
    )
    op, _, _ = gemm(result, "rnn.l1.fwd.t3")
    assert op.k == 325 + 650  # x part halved, recurrent part whole
    assert gemm(result, "decoder.fwd")[0].k == 325
    assert gemm(result, "rnn.l0.fwd.t0")[0].k == 325 + 650
    report = result.training
    assert report is not None and report.speedup > 1


@pytest.mark.parametrize("model", ["resnet18", "vgg16"])
def test_feature_map_dropping_shrinks_conv_reductions(model: str) -> None:
    result = run(
        f"workload=workloads/{model}.yaml",
        "batch_size=2",
        "run.techniques.approximate_dropout={pattern: element, feature_maps: {rate: 0.25}}",
        path=ROOT / "configs" / "runs" / "default.yaml",
    )
    report = result.training
    assert report is not None
    maps = report.sections[KIND].details["feature_maps"]
    assert len(maps) >= 10
    for layer, row in maps.items():
        assert row["kept"] == row["channels"] - int(0.25 * row["channels"])
        assert 0.75 - 1e-9 <= row["sensitivity_kept"] <= 1  # the least sensitive go
        fwd = next(o for o in result.steps[KIND].graph.ops if o.layer == layer)
        base = next(o for o in result.base.graph.ops if o.layer == layer)
        assert isinstance(fwd, GemmOp) and isinstance(base, GemmOp)
        assert fwd.k * row["channels"] == base.k * row["kept"]
    scores = [o for o in result.steps[KIND].graph.ops if o.name.endswith(".score")]
    assert len(scores) == len(maps) and all(o.phase is Phase.AUX for o in scores)
    assert 1 < report.speedup <= report.speedup_bound


def test_composes_with_adagp_and_a_pipeline(tmp_path: Path) -> None:
    mine = f"approximate_dropout: {{distribution: {period_two(tmp_path)}}}"
    adagp = run(f"run.techniques={{{mine}, gradient_prediction: {{}}}}")
    assert adagp.training is not None
    section = adagp.training.sections[KIND].details
    assert set(section["by_kind"]) == {"bp", "gp"}
    for kind in ("bp", "gp"):
        assert gemm(adagp, "fc2.fwd", kind)[0].k == 1024
    assert not any(o.phase is Phase.BWD_INPUT for o in adagp.steps["gp"].graph.ops)
    piped = run("processors=3", f"run.techniques={{{mine}, pipedream: {{}}}}")
    graph = piped.steps["pipedream"].graph
    fc2 = [o for o in graph.ops if isinstance(o, GemmOp) and o.layer == "fc2"]
    assert len(fc2) > 3 and all(2048 not in (o.m, o.n, o.k) for o in fc2)
    assert len({graph.processor[o.op_id] for o in graph.ops}) == 3
    report = piped.training
    assert report is not None and report.techniques == (KIND, "pipedream")
    pipelined = report.steps["pipedream"]
    assert pipelined.cycles >= pipelined.bound_cycles
    assert report.speedup > 1


def test_skip_updates_shrinks_the_optimizer_updates(tmp_path: Path) -> None:
    dist = f"run.techniques.approximate_dropout.distribution={period_two(tmp_path)}"
    plain = run("batch_size=16", dist)
    skipped = run("batch_size=16", dist, "run.techniques.approximate_dropout.skip_updates=true")

    def update_ops(result: TrainingResult) -> int:
        return sum(
            o.vector_ops  # type: ignore[union-attr]
            for o in result.steps[KIND].graph.ops
            if o.phase is Phase.UPDATE
        )

    assert update_ops(skipped) < update_ops(plain)
    fc2 = next(p for p in skipped.steps[KIND].graph.parameters if p.layer == "fc2")
    # half of fc2's rows (its outputs) are dropped; its inputs, every second element of
    # each row, move whole 64 B bursts (32 bf16 weights, every one holding kept ones)
    assert fc2.weight.elements * 2 == 2048 * 2048
    coarse = run(
        "batch_size=16",
        dist,
        "run.techniques.approximate_dropout.skip_updates=true",
        "hardware.dram.burst_bytes=2",
    )
    fc2 = next(p for p in coarse.steps[KIND].graph.parameters if p.layer == "fc2")
    assert fc2.weight.elements * 4 == 2048 * 2048  # one-weight bursts: a quarter


def test_row_patterns_fetch_a_reader_weight_in_whole_bursts(tmp_path: Path) -> None:
    """Period 2: fc2 keeps 1024 of its 2048 inputs, every second one."""
    dist = f"run.techniques.approximate_dropout.distribution={period_two(tmp_path)}"
    mib = 1 << 20
    for burst, weight in ((64, 4 * mib), (4, 4 * mib), (2, 2 * mib)):
        result = run("batch_size=256", dist, f"hardware.dram.burst_bytes={burst}")
        op = gemm(result, "fc2.fwd")[0]
        assert (op.k, op.n) == (1024, 1024)  # compacted rows and columns compute
        # of the 2048 x 2048 weight, the 1024 kept rows (outputs, 4 KiB each, whole
        # bursts) and, of each, the bursts holding a kept input: all but with one-word
        # (2 B) bursts
        assert op.b_elements * 2 == weight
        costs = result.steps[KIND].trace.costs
        assert int(costs.dram_filter_read_bytes[op.op_id]) == weight


@pytest.mark.parametrize(
    ("override", "path", "message"),
    [
        ("rate=1.0", "run.techniques.approximate_dropout.rate", "less than 1"),
        ("rate=-0.1", "run.techniques.approximate_dropout.rate", "greater than or equal to 0"),
        ("pattern=diagonal", "run.techniques.approximate_dropout.pattern", "'element', 'row' or"),
        ("tile={rows: 0}", "run.techniques.approximate_dropout.tile.rows", "greater than 0"),
        ("rate=0.02", "run.techniques.approximate_dropout.rate", "out of reach"),
        (
            "tile={cols: 256}",
            "run.techniques.approximate_dropout.tile.cols",
            "a tile must fit in one fold: at most the array's smaller side, 128",
        ),
    ],
)
def test_bad_options_are_config_errors(override: str, path: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_inputs(RUN, parse_sets([f"run.techniques.approximate_dropout.{override}"]))
    problems = info.value.problems
    # Blamed on the --set that wrote the value, as it was written.
    assert any((p.file, p.path) == ("--set", path) and message in p.message for p in problems), (
        problems
    )


def test_a_distribution_for_another_rate_is_rejected(tmp_path: Path) -> None:
    sets = [
        f"run.techniques.approximate_dropout.distribution={period_two(tmp_path)}",
        "run.techniques.approximate_dropout.rate=0.3",
    ]
    with pytest.raises(ConfigError) as info:
        load_inputs(RUN, parse_sets(sets))
    (problem,) = info.value.problems
    assert (problem.file, problem.path) == (
        "--set",
        "run.techniques.approximate_dropout.distribution",
    )
    assert problem.message == "is for rate 0.5, but drop1 drops at 0.3"


def test_check_rejects_a_zero_tile_with_exit_2(tmp_path: Path) -> None:
    data = yaml.safe_load(RUN.read_text(encoding="utf-8"))
    data["techniques"]["approximate_dropout"]["tile"] = {"rows": 0, "cols": 32}
    data["hardware"] = str(RUN.parent / data["hardware"])
    data["workload"] = str(RUN.parent / data["workload"])
    data["energy"] = str(RUN.parent / data["energy"])
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "accelsim", "check", str(bad)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 2
    assert "techniques.approximate_dropout.tile.rows" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_workload_without_dropout_needs_feature_maps() -> None:
    with pytest.raises(ConfigError, match="no dropout layer"):
        load_inputs(
            ROOT / "configs" / "runs" / "mlp.yaml",
            parse_sets(["run.techniques={approximate_dropout: {}}"]),
        )
    assert ApproximateDropout.name == KIND


def test_feature_map_scores_from_a_trace(tmp_path: Path) -> None:
    """LeNet-5: c3 (6 input maps) and c5 (16) may drop maps; c1 reads the image."""
    scores = tmp_path / "scores.csv"
    lines = ["layer,channel,score"]
    lines += [f"c3,{c},{s}" for c, s in enumerate([5, 1, 4, 2, 6, 3])]
    lines += [f"c5,{c},{c + 1}" for c in range(16)]
    scores.write_text("\n".join(lines) + "\n", encoding="utf-8")
    technique = f"{{pattern: element, feature_maps: {{rate: 0.5, scores: {scores}}}}}"
    sets = [
        "workload=workloads/lenet5.yaml",
        "batch_size=4",
        f"run.techniques.approximate_dropout={technique}",
    ]
    result = run(*sets, path=ROOT / "configs" / "runs" / "default.yaml")
    assert result.training is not None
    maps = result.training.sections[KIND].details["feature_maps"]
    assert set(maps) == {"c3", "c5"}
    assert maps["c3"]["kept"] == 3 and maps["c3"]["sensitivity_kept"] == pytest.approx(15 / 21)
    assert maps["c5"]["kept"] == 8 and maps["c5"]["sensitivity_kept"] == pytest.approx(100 / 136)
    c3 = gemm(result, "c3.fwd")[0]
    assert c3.k == 3 * 25  # C.R.S with 3 of 6 maps
    scores.write_text("layer,channel,score\nc3,0,1.0\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_inputs(ROOT / "configs" / "runs" / "default.yaml", parse_sets(sets))
    (problem,) = info.value.problems
    assert (problem.file, problem.path) == (
        "--set",
        "run.techniques.approximate_dropout.feature_maps.scores",
    )
    assert problem.message == (
        "no score for input map 1 of c3 (it has 6; every input map of every droppable"
        " convolution needs one)"
    )


@pytest.mark.parametrize("rate", [0.3, 0.5])
def test_enough_steps_are_drawn_for_the_kept_share(rate: float) -> None:
    """Steps are drawn (100, doubling) until every site's mean kept share is within 0.5 %
    of its expectation under the pattern distribution; with a loose tolerance the first
    100 suffice."""
    result = run("batch_size=64", f"run.techniques.approximate_dropout={{rate: {rate}}}")
    assert result.training is not None
    report = result.training.sections[KIND].details
    steps = report["steps_drawn"]
    assert steps in {100 * 2**j for j in range(8)}
    for site in report["sites"]:
        expected, drawn = site["kept_share_expected"], site["kept_share_drawn"]
        assert expected == pytest.approx(1 - rate, abs=0.02)
        assert abs(drawn - expected) <= 0.005 * expected
    loose = run(
        "batch_size=64",
        f"run.techniques.approximate_dropout={{rate: {rate}, kept_tolerance: 1.0}}",
    )
    assert loose.training is not None
    assert loose.training.sections[KIND].details["steps_drawn"] == 100


@pytest.mark.parametrize(
    ("sets", "binding"),
    [
        (("run.techniques.approximate_dropout.pattern=row",), "dram"),
        (("run.techniques.approximate_dropout.pattern=tile",), "dram"),
        (
            (
                "run.techniques.approximate_dropout.tile={rows: 32, cols: 32}",
                "run.techniques.approximate_dropout.pattern=tile",
            ),
            "dram",
        ),
        (
            (
                "run.techniques.approximate_dropout.pattern=tile",
                "hardware.dram.bandwidth_bytes_per_cycle=.inf",
            ),
            "compute",
        ),
        # The LSTM's streamed operands are read about once (stream blocking for the
        # fewest reads), so its busiest unit binds, not DRAM.
        (
            (
                "workload=workloads/lstm_ptb.yaml",
                "batch_size=16",
                "run.techniques.approximate_dropout.pattern=tile",
            ),
            "compute",
        ),
    ],
)
def test_every_speedup_keeps_its_binding_bound(sets: tuple[str, ...], binding: str) -> None:
    """The speedup over conventional dropout never beats the baseline's cycles over the
    mean drawn step's bound (the larger of its DRAM traffic and its busiest unit)."""
    result = run("batch_size=256", *sets)
    report = result.training
    assert report is not None
    assert 1 < report.speedup <= report.speedup_bound
    assert report.binding_bound == binding
    step = report.steps[KIND]
    assert step.cycles >= step.bound_cycles
