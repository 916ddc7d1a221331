"""ADA-GP (techniques/prediction/): steps, predictor costs, schedule, errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs, suite_entries, suite_inputs
from accelsim.driver.run import simulate_training
from accelsim.errors import ConfigError
from accelsim.graph.ops import CommOp, GemmOp, Phase
from accelsim.report.result import RunResult
from accelsim.report.training import StepCost, TrainingResult
from accelsim.techniques.plan import measured_errors
from accelsim.techniques.prediction.config import Policy, ScheduleSpec
from accelsim.techniques.prediction.shares import share_for
from accelsim.techniques.prediction.technique import gp_fractions
from tests.conftest import ROOT

GP = "run.techniques.gradient_prediction"
NAME = "gradient_prediction"


def run_file(tmp_path: Path, workload: str = "resnet18", **technique: Any) -> Path:
    path = tmp_path / "run.yaml"
    lines = [
        "name: adagp",
        f"hardware: {ROOT / 'configs/hardware/default.yaml'}",
        f"workload: {ROOT / 'workloads' / workload}.yaml",
        f"energy: {ROOT / 'configs/energy/horowitz45.yaml'}",
        "batch_size: 8",
        "optimizer: {kind: momentum}",
        "training: {epochs: 20, batches_per_epoch: 10}",
        "techniques:",
        f"  gradient_prediction: {technique or '{}'}",
    ]
    path.write_text("\n".join(lines).replace("'", '"') + "\n", encoding="utf-8")
    return path


def train(path: Path, *sets: str) -> TrainingResult:
    return simulate_training(load_inputs(path, parse_sets(list(sets))))


def aux_macs(step: RunResult, layer: str) -> int:
    return sum(
        op.macs
        for op in step.graph.ops
        if isinstance(op, GemmOp) and op.phase is Phase.AUX and op.layer == layer
    )


def test_gp_step_has_no_backward_gemms_and_no_stash(tmp_path: Path) -> None:
    result = train(run_file(tmp_path))
    gp = result.steps["gp"]
    phases = {op.phase for op in gp.graph.ops}
    assert Phase.BWD_INPUT not in phases and Phase.BWD_WEIGHT not in phases
    assert not gp.graph.stashed
    stash = gp.summary()["stash"]
    assert stash["bytes"] == stash["dram_read_bytes"] == stash["dram_write_bytes"] == 0
    assert not any(op.name == "loss.bwd" for op in gp.graph.ops)
    # Every predicted weight is updated with its predicted gradient.
    updates = [op for op in gp.graph.ops if op.phase is Phase.UPDATE]
    assert len(updates) == 21  # 20 convs and the fc weight of ResNet-18
    assert all(".predictor.gradient" in op.reads[1].tensor.name for op in updates)


def test_gp_step_is_faster_than_baseline_on_every_model(tmp_path: Path) -> None:
    path = run_file(tmp_path)
    for entry in suite_entries(ROOT / "configs" / "suites" / "default.yaml"):
        result = simulate_training(suite_inputs(path, entry, parse_sets(["batch_size=32"])))
        base, gp = result.base.total_cycles, result.steps["gp"].total_cycles
        assert gp < base, f"{entry.name}: GP step {gp} >= baseline step {base}"


def test_predictor_macs_match_a_hand_count(tmp_path: Path) -> None:
    result = train(run_file(tmp_path))
    # layer1.0.conv1: K = 64 output channels, per-channel gradient O = 64*3*3 = 576,
    # 56x56 output pooled to 4x4 = 16 values.  Inference: conv0 (1 -> 64 ch, 3x3)
    # 64*16 x 9 x 64; conv1 (64 -> 64, 3x3) 64*16 x 576 x 64; FC 64 x (64*16) x 576.
    conv_layer = 1024 * 9 * 64 + 1024 * 576 * 64 + 64 * 1024 * 576  # 76,087,296
    # fc: K = 1000, O = 512, a plain feature vector has 1 value per channel, so a 3x3
    # conv sees only its centre tap: conv0 1000 x 1 x 64; conv1 1000 x 64 x 64;
    # FC 1000 x 64 x 512.
    fc_layer = 1000 * 1 * 64 + 1000 * 64 * 64 + 1000 * 64 * 512  # 36,928,000
    gp, bp = result.steps["gp"], result.steps["bp"]
    assert aux_macs(gp, "layer1.0.conv1") == conv_layer
    assert aux_macs(gp, "fc") == fc_layer
    # Training adds the backward of every predictor GEMM (dW and dX) except conv0's dX.
    assert aux_macs(bp, "layer1.0.conv1") == 3 * conv_layer - 1024 * 9 * 64
    assert aux_macs(bp, "fc") == 3 * fc_layer - 1000 * 1 * 64
    assert aux_macs(result.base, "fc") == 0
    # The per-layer closed form in the training report agrees with the ops.
    assert result.training is not None
    predictor = result.training.sections[NAME].details["predictor"]
    report = {r["parameter"]: r for r in predictor["layers"]}
    assert report["layer1.0.conv1.W"]["forward_macs"] == conv_layer
    assert report["fc.W"]["training_macs"] == 2 * fc_layer - 1000 * 1 * 64
    assert (
        report["fc.W"]["pooled_values"] == 1 and report["layer1.0.conv1.W"]["pooled_values"] == 16
    )
    layers = {row["layer"]: row for row in bp.layer_rows()}
    assert layers["fc"]["aux_macs"] == 3 * fc_layer - 1000 * 1 * 64


def test_gp_fraction_zero_is_never_faster(tmp_path: Path) -> None:
    result = train(run_file(tmp_path, schedule={"policy": "fixed", "gp_fraction": 0.0}))
    t = result.training
    assert t is not None and t.sections[NAME].details["gp_fraction"] == 0.0
    assert t.speedup <= 1.0
    assert t.speedup == pytest.approx(t.steps["base"].cycles / t.steps["bp"].cycles)


def test_gp_fraction_one_gives_the_gp_step_bound(tmp_path: Path) -> None:
    schedule = {"policy": "fixed", "gp_fraction": 1.0, "warmup_epochs": 0}
    t = train(run_file(tmp_path, schedule=schedule)).training
    assert t is not None and t.sections[NAME].details["gp_fraction"] == 1.0
    assert t.speedup == pytest.approx(t.steps["base"].cycles / t.steps["gp"].cycles)
    assert t.speedup > 1.0


@pytest.mark.parametrize("workload", ["mlp", "resnet18"])
def test_shared_placement_is_never_faster_than_dedicated(tmp_path: Path, workload: str) -> None:
    # A dedicated unit of the same size as the main array, with the same buffers.
    same = {"rows": 128, "cols": 128, "ifmap_kib": 2048, "filter_kib": 2048, "ofmap_kib": 1024}
    dedicated = train(run_file(tmp_path, workload, array=same)).steps
    shared = train(run_file(tmp_path, workload, placement="shared")).steps
    for kind in ("bp", "gp"):
        assert dedicated[kind].total_cycles <= shared[kind].total_cycles
    names = dedicated["bp"].trace.costs.unit_names
    assert "predictor" in names and "predictor" not in shared["bp"].trace.costs.unit_names
    energy = dedicated["bp"].energy.by_component_pj
    assert energy["predictor_mac"] > 0 and energy["predictor_sram"] > 0
    assert "predictor_mac" not in shared["bp"].energy.by_component_pj


def test_composes_with_data_parallel(tmp_path: Path) -> None:
    result = train(run_file(tmp_path), "processors=2", "assignment=data_parallel")
    gp = result.steps["gp"]
    assert set(gp.trace.processor.tolist()) == {0, 1}
    allreduced = [op for op in gp.graph.ops if isinstance(op, CommOp)]
    assert len(allreduced) == 21 and all(".predictor.gradient" not in op.name for op in allreduced)
    assert not any(op.phase in (Phase.BWD_INPUT, Phase.BWD_WEIGHT) for op in gp.graph.ops)
    predictor_procs = {
        int(gp.trace.processor[op.op_id])
        for op in gp.graph.ops
        if isinstance(op, GemmOp) and op.unit == "predictor"
    }
    assert predictor_procs == {0, 1}
    t = result.training
    assert t is not None
    cycles = {kind: step.cycles for kind, step in t.steps.items()}
    # A BP step is the baseline step plus training the predictor on each replica.
    assert cycles["bp"] > cycles["base"]
    # The speedup weighs the BP and GP steps by the share of GP batches.
    f = t.sections[NAME].details["gp_fraction"]
    assert 0 < f < 1
    assert t.speedup == pytest.approx(cycles["base"] / ((1 - f) * cycles["bp"] + f * cycles["gp"]))


def test_adaptive_schedule_follows_the_error() -> None:
    schedule = ScheduleSpec(
        warmup_epochs=2, start=0.5, step=0.2, minimum=0.1, maximum=0.9, error_threshold=0.3
    )
    errors = [1.0, 1.0, 0.9, 0.1, 0.1, 0.1, 0.5, 0.1]
    fractions = gp_fractions(schedule, len(errors), errors)
    assert fractions == pytest.approx([0, 0, 0.5, 0.7, 0.9, 0.9, 0.7, 0.9])
    fixed = ScheduleSpec(policy=Policy.FIXED, warmup_epochs=1, gp_fraction=0.4)
    assert gp_fractions(fixed, 3, [1.0] * 3) == [0.0, 0.4, 0.4]


def test_error_trace_drives_the_schedule(tmp_path: Path) -> None:
    trace = tmp_path / "errors.csv"
    rows = ["epoch,batch,predictor_error"]
    rows += [f"{e},{b},{0.05 if e % 2 else 0.9}" for e in range(20) for b in range(3)]
    trace.write_text("\n".join(rows) + "\n", encoding="utf-8")
    schedule = {
        "error_trace": "errors.csv",
        "warmup_epochs": 0,
        "start": 0.5,
        "step": 0.5,
        "maximum": 1.0,
    }
    t = train(run_file(tmp_path, schedule=schedule)).training
    assert t is not None
    assert t.sections[NAME].details["gp_fraction_by_epoch"][:4] == [0.5, 1.0, 0.5, 1.0]
    assert [epoch["gp"] for epoch in t.plan.shares[:4]] == [0.5, 1.0, 0.5, 1.0]
    trace.write_text("epoch,batch,predictor_error\n0,0,0.1\n", encoding="utf-8")
    with pytest.raises(
        ConfigError,
        match=r"techniques.gradient_prediction.schedule.error_trace: "
        r"no values for epoch 1",
    ):
        train(run_file(tmp_path, schedule=schedule))


def test_bad_technique_configs_are_reported(tmp_path: Path) -> None:
    path = run_file(tmp_path, placement="sharde", network={"pools": 4})
    with pytest.raises(ConfigError) as excinfo:
        load_inputs(path)
    assert [str(p) for p in excinfo.value.problems] == [
        f"{path}: techniques.gradient_prediction.placement: input should be 'dedicated' or"
        " 'shared' (got 'sharde')",
        f"{path}: techniques.gradient_prediction.network.pools: unknown key; did you mean"
        " 'pool'? (got 4)",
    ]
    with pytest.raises(
        ConfigError,
        match=r"techniques.gradient_predictio: unknown technique; "
        r"did you mean 'gradient_prediction'",
    ):
        load_inputs(path, parse_sets(["run.techniques={gradient_predictio: {}}"]))
    with pytest.raises(
        ConfigError,
        match=r"techniques.gradient_prediction.array.filter_kib: too "
        r"small for one 64x64 tile \(needs >= 8 KiB\)",
    ):
        load_inputs(run_file(tmp_path, array={"filter_kib": 4}))


def test_predictor_weight_sram_keeps_what_fits(tmp_path: Path) -> None:
    """ResNet-18's predictor: conv0 9x1x64 = 576, conv1 9x64x64 = 36,864 and FC
    64 x 4x4 x 4,608 (layer4's 512x3x3 gradient per channel) = 4,718,592 weights, each
    with bf16 weight and two fp32 Adam states: 10 B per weight."""
    small = train(run_file(tmp_path))
    assert small.training is not None
    storage = small.training.sections[NAME].details["predictor"]["storage"]
    assert storage["footprint_bytes"] == (576 + 36_864 + 4_718_592) * 10
    assert storage["sram_bytes"] == 2048 * 1024
    assert storage["resident"] == ["predictor.conv0.W", "predictor.conv1.W"]
    assert storage["resident_bytes"] == (576 + 36_864) * 10
    big = train(run_file(tmp_path, array={"weights_kib": 65536}))
    none = train(run_file(tmp_path, array={"weights_kib": 0}))
    assert big.training is not None and none.training is not None
    assert big.training.sections[NAME].details["predictor"]["storage"]["streamed"] == []
    assert none.training.sections[NAME].details["predictor"]["storage"]["resident"] == []
    # Resident weights and state stop streaming: less DRAM traffic in both step kinds,
    # the same MACs.
    for kind in ("bp", "gp"):
        bytes_ = [r.steps[kind].dram_bytes for r in (none, small, big)]
        assert bytes_[0] > bytes_[1] > bytes_[2]
        macs = {int(r.steps[kind].trace.costs.macs.sum()) for r in (none, small, big)}
        assert len(macs) == 1


def test_speedup_never_beats_its_bound(tmp_path: Path) -> None:
    """Whole-training cycles are at least the sum of every step's cycle bound (DRAM bytes
    over bandwidth, busiest unit), so the speedup is at most what that sum allows."""
    result = train(run_file(tmp_path))
    report = result.training
    assert report is not None
    for kind in ("base", "bp", "gp"):
        step = report.steps[kind]
        assert step.cycles >= step.bound_cycles > 0
    bp, gp = report.steps["bp"].binding_bound, report.steps["gp"].binding_bound
    assert report.binding_bound == (bp if bp == gp else f"bp {bp}, gp {gp}")
    assert 0 < report.speedup <= report.speedup_bound
    # the bound adds up the per-step bounds as the cycles add up the steps
    assert report.totals["bound_cycles"].technique <= report.totals["cycles"].technique


def test_range_over_gp_share_is_the_mix_of_bp_and_gp_steps(tmp_path: Path) -> None:
    t = train(run_file(tmp_path, workload="mlp")).training
    assert t is not None
    details = t.sections[NAME].details
    base, bp, gp = t.steps["base"], t.steps["bp"], t.steps["gp"]
    for point, g in zip(details["by_gp_fraction"], (0.3, 0.5, 0.7), strict=True):
        cycles = (1 - g) * bp.cycles + g * gp.cycles
        energy = (1 - g) * bp.energy_pj + g * gp.energy_pj
        assert point["gp_fraction"] == g
        assert point["speedup"] == pytest.approx(base.cycles / cycles, rel=1e-12)
        assert point["energy_reduction"] == pytest.approx(1 - energy / base.energy_pj)
        assert point["speedup"] <= point["speedup_bound"]
    # The paper's 1.47x: T_base / 1.47 = (1 - g) T_bp + g T_gp solved for g.
    # On this MLP even GP steps only give less: g > 1, so no share reaches it.
    g = (base.cycles / 1.47 - bp.cycles) / (gp.cycles - bp.cycles)
    assert g > 1 and details["paper"]["gp_fraction"] is None
    lines = dict(t.sections[NAME].lines)
    assert lines["paper's 1.47 x"] == "no GP share from 0 to 1 gives it on this model"
    # The adaptive headline is the same line at the run's mean GP share.
    mean = details["gp_fraction"]
    assert t.speedup == pytest.approx(
        base.cycles / ((1 - mean) * bp.cycles + mean * gp.cycles), rel=1e-12
    )
    assert details["error_signal"] == "our synthetic predictor-error curve"


def test_synthetic_curve_parameters_are_ours_even_when_the_run_sets_them(tmp_path: Path) -> None:
    t = train(run_file(tmp_path, workload="mlp", schedule={"floor": 0.1, "step": 0.2})).training
    assert t is not None
    sources = {i.key: i.source.value for i in t.sections[NAME].inputs}
    assert sources["schedule.floor"] == "ours"
    assert sources["schedule.decay_epochs"] == "ours"
    assert sources["schedule.step"] == "run"


def test_share_for_the_papers_speedup_by_hand() -> None:
    # ResNet-18 batch 32 steps: base 42,933,708 cycles, BP 58,744,684, GP 18,139,974:
    # (42,933,708 / 1.47 - 58,744,684) / (18,139,974 - 58,744,684) = 0.727455.
    def cost(cycles: int) -> StepCost:
        return StepCost(cycles, 1.0, 0.0, cycles, "compute")

    g = share_for(cost(42_933_708), cost(58_744_684), cost(18_139_974), 1.47)
    assert g == pytest.approx(0.727455, abs=1e-6)
    assert share_for(cost(100), cost(100), cost(100), 1.47) is None


def test_measured_errors_take_the_bundled_trace_by_training_progress(tmp_path: Path) -> None:
    path = ROOT / "accelsim" / "data" / "traces" / "digits_mlp.predictor.csv"
    rows = [line.split(",") for line in path.read_text(encoding="utf-8").split()[1:]]
    by_epoch: dict[int, list[float]] = {}
    for _, epoch, error in rows:
        by_epoch.setdefault(int(epoch), []).append(float(error))
    # 60 run epochs on 30 measured ones: run epoch e takes epoch e // 2, mean of 3 layers
    model, errors = measured_errors(["linear"], 60)
    assert model == "digits_mlp" and len(errors) == 60
    assert errors[7] == pytest.approx(sum(by_epoch[3]) / 3)
    # every measured error is far above the 0.2 threshold: after the 5 warm-up epochs
    # the adaptive share starts at 0.5 and falls by 0.1 an epoch to 0
    assert min(errors) > 0.2
    t = train(run_file(tmp_path, workload="mlp", schedule={"errors": "measured"})).training
    assert t is not None
    details = t.sections[NAME].details
    assert details["gp_fraction_by_epoch"] == pytest.approx(
        [0.0] * 5 + [0.5, 0.4, 0.3, 0.2, 0.1] + [0.0] * 10
    )
    assert details["error_signal"] == "the bundled measured predictor-error trace of a digits model"
    sources = {i.key: i.source.value for i in t.sections[NAME].inputs}
    assert sources["schedule.errors"] == "trace"
