"""Optimizer fusion (techniques/fusion/): the derived DRAM traffic table
against the engine, identical MACs, update order, residency, errors, composition."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import pytest

from accelsim.config.run import OptimizerKind, OptimizerSpec
from accelsim.driver.inputs import load_inputs
from accelsim.errors import ConfigError
from accelsim.graph import queries
from accelsim.graph.ops import NO_TILES, GemmOp, Phase, Stage, UpdateTiming, VectorOp
from accelsim.mapping.tile_reuse import Buffer, tile_reuse
from accelsim.report.result import RunResult
from accelsim.techniques.fusion.config import FusionMode
from accelsim.techniques.fusion.traffic import (
    derived_accesses,
    derived_traffic,
    parameter_dram_bytes,
)
from tests.conftest import ROOT, make_hw
from tests.techniques.skipping.test_gradient_skipping import tiny_run, train

OF = "optimizer_fusion"
# tiny MLP 256-512-256-10: weights (elements, forward GEMM reads, dX GEMM reads)
WEIGHTS = ((256 * 512, 1, 0), (512 * 256, 1, 1), (256 * 10, 1, 1))
BIASES = 512 + 256 + 10
WORD_W, WORD_G, WORD_STATE = 2, 2, 4  # default hardware word sizes


def fused(
    tmp_path: Path, mode: str, optimizer: str = "sgd", extra: str = "", tiles: str = "dx"
) -> tuple[RunResult, RunResult]:
    """The tiny MLP's baseline and fused steps (by default every backward-fused update
    taking W's tiles from dX, the order the hand counts below assume)."""
    config = f"{{{OF}: {{mode: {mode}, weight_tiles: {tiles}}}}}"
    result = train(tiny_run(tmp_path, config, optimizer, extra))
    return result.base, result.steps[OF]


def by_name(result: RunResult, name: str) -> VectorOp | GemmOp:
    (op,) = [o for o in result.graph.ops if o.name == name]
    assert isinstance(op, VectorOp | GemmOp)
    return op


@pytest.mark.parametrize(
    ("mode", "total"),
    [(FusionMode.UNFUSED, 6), (FusionMode.BACKWARD, 3), (FusionMode.FORWARD, 5)],
)
def test_derived_table_for_a_weight_matrix(mode: FusionMode, total: int) -> None:
    for optimizer, k in (
        (OptimizerKind.SGD, 0),
        (OptimizerKind.MOMENTUM, 1),
        (OptimizerKind.ADAM, 2),
    ):
        a = derived_accesses(mode, optimizer)
        assert a.weight + a.gradient + a.state == total + 2 * k


@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "adam"])
@pytest.mark.parametrize("mode", ["unfused", "backward", "forward"])
def test_engine_traffic_matches_the_derived_table(
    tmp_path: Path, mode: str, optimizer: str
) -> None:
    base, step = fused(tmp_path, mode, optimizer)
    k = OptimizerKind(optimizer).state_tensors
    expected = 0
    for elements, fwd, dx in WEIGHTS:
        # unfused: fwd and dX read W; the update reads and writes W; dW writes g and
        # the update reads it; the states are read and written
        w, g = fwd + dx + 2, 2
        if mode == "backward":
            w, g = w - dx, 0  # the update reads dX's copy of W; g stays on chip
        if mode == "forward":
            w -= fwd  # the forward GEMM reads the update's copy of W
        expected += elements * (w * WORD_W + g * WORD_G + 2 * k * WORD_STATE)
    # biases: read and written by the update only (no GEMM reads them)
    g_bias = 0 if mode == "backward" else 2
    expected += BIASES * (2 * WORD_W + g_bias * WORD_G + 2 * k * WORD_STATE)
    assert parameter_dram_bytes(step) == expected
    # nothing else moves: the step's whole DRAM traffic changes by the same bytes
    assert base.dram_bytes - step.dram_bytes == parameter_dram_bytes(base) - expected
    # fusion moves work, never adds or removes any
    assert step.trace.costs.macs.sum() == base.trace.costs.macs.sum()
    assert step.trace.costs.vector_ops.sum() == base.trace.costs.vector_ops.sum()


def test_unfused_is_the_baseline(tmp_path: Path) -> None:
    base, step = fused(tmp_path, "unfused")
    assert step.graph == base.graph and step.op_rows() == base.op_rows()


def test_backward_fusion_updates_right_after_each_gradient(tmp_path: Path) -> None:
    base, step = fused(tmp_path, "backward", "adam")
    trace = step.trace
    update, dx, dw = (by_name(step, n) for n in ("fc2.W.update", "fc2.dx", "fc2.dw"))
    # it waits for the dX that reads the old W and for its gradient, nothing more
    assert set(update.after) == {by_name(step, "fc2.fwd").op_id, dx.op_id, dw.op_id}
    # and takes W's tiles from dX's filter buffer, g's as dW makes them: one op
    assert [a.tensor.name for a in update.reads] == [
        "fc2.W",
        "fc2.dW",
        "fc2.W.state0",
        "fc2.W.state1",
    ]
    assert update.tile_sources == (dx.op_id, dw.op_id, NO_TILES, NO_TILES)
    assert (dx.op_id, dw.op_id, update.op_id) in queries.tile_groups(step.graph)
    assert trace.end_cycle[update.op_id] == trace.end_cycle[dw.op_id]  # the group's end
    assert trace.start_cycle[dx.op_id] <= trace.start_cycle[update.op_id]
    # while the backward pass goes on (fc1's dW after it)
    assert trace.end_cycle[update.op_id] <= trace.start_cycle[by_name(step, "fc1.dw").op_id]
    # the first layer has no dX: its update reads W from DRAM, takes only g
    first = by_name(step, "fc1.W.update")
    assert first.tile_sources == (NO_TILES, by_name(step, "fc1.dw").op_id, NO_TILES, NO_TILES)
    assert not step.graph.on_chip
    assert step.total_cycles < base.total_cycles
    # an update fused into the backward pass runs in the backward stage
    assert (update.phase, update.stage) == (Phase.UPDATE, Stage.BACKWARD)
    assert by_name(base, "fc2.W.update").stage is Stage.UPDATE


def test_forward_fusion_updates_just_before_the_forward(tmp_path: Path) -> None:
    _, step = fused(tmp_path, "forward", "momentum")
    update, forward = by_name(step, "fc2.W.update"), by_name(step, "fc2.fwd")
    assert isinstance(forward, GemmOp)
    assert update.op_id < forward.op_id and update.op_id in forward.after
    # the forward GEMM takes W's tiles as the update writes them
    assert forward.b.name == "fc2.W" and forward.tile_sources == (NO_TILES, update.op_id)
    assert by_name(step, "fc2.dx").tile_sources == ()
    assert all(p.update is UpdateTiming.FORWARD for p in step.graph.parameters)
    assert len([op for op in step.graph.ops if op.phase is Phase.UPDATE]) == 6
    assert update.stage is Stage.FORWARD  # in the forward pass, beside its GEMM


def test_gradient_tiles_that_do_not_fit_go_through_dram(tmp_path: Path) -> None:
    """A 128 KiB ofmap buffer keeps 64 KiB for a group: fc2's group needs two 128 x 128
    bf16 tiles of g (32 KiB each) and one of the W it writes (32 KiB), 96 KiB, so g is
    written and read back; fc3's (10 x 256: 5 KiB tiles) needs 15 KiB and stays.  The
    weight tiles (filter buffer: 2 MiB) stay in both."""
    extra = "overrides: {hardware.buffers.ofmap_kib: 128}"
    base, step = fused(tmp_path, "backward", extra=extra)
    reuse = tile_reuse(step.graph, step.trace.costs.arrays)
    for layer, g_stays in (("fc2", False), ("fc3", True)):
        update = by_name(step, f"{layer}.W.update")
        assert reuse.takes(update.op_id, 0) is Buffer.FILTER
        assert (reuse.takes(update.op_id, 1) is Buffer.OFMAP) is g_stays
    costs = step.trace.costs
    fc2, fc3 = (by_name(step, f"{n}.W.update").op_id for n in ("fc2", "fc3"))
    assert int(costs.dram_read_bytes[fc2]) == 512 * 256 * WORD_G  # g; W from dX's tiles
    assert int(costs.dram_read_bytes[fc3]) == 0
    assert int(costs.dram_ofmap_write_bytes[by_name(step, "fc2.dw").op_id]) == 512 * 256 * 2
    assert int(costs.dram_ofmap_write_bytes[by_name(step, "fc3.dw").op_id]) == 0
    derived = derived_traffic(base, step, FusionMode.BACKWARD, OptimizerSpec(kind="sgd"))
    assert derived.dram_bytes == parameter_dram_bytes(step)
    # fc1's g has the same 32 KiB tiles; every bias's stays
    assert derived.gradient_in_dram == 2 * 256 * 512
    assert derived.weight_in_dram == 256 * 512 + BIASES  # fc1 and the biases have no dX


def test_data_parallel_fusion_waits_for_the_reduced_gradient(tmp_path: Path) -> None:
    path = tiny_run(tmp_path, f"{{{OF}: {{mode: backward}}}}", extra="assignment: data_parallel")
    result = train(path, "processors=2")
    step, trace = result.steps[OF], result.steps[OF].trace
    (reduce,) = [op for op in step.graph.ops if op.name == "fc2.W.allreduce"]
    updates = [op for op in step.graph.ops if op.name == "fc2.W.update"]
    assert sorted(op.tag.replica for op in updates) == [0, 1]
    for update in updates:
        assert isinstance(update, VectorOp) and reduce.op_id in update.after
        assert trace.start_cycle[update.op_id] >= trace.end_cycle[reduce.op_id]
        # an all-reduce is no tile source, and W's tiles cannot wait for it in dX's
        # buffer: the update reads both from DRAM, as unfused
        assert update.tile_sources == ()
    assert trace.costs.macs.sum() == result.base.trace.costs.macs.sum()
    derived = derived_traffic(result.base, step, FusionMode.BACKWARD, OptimizerSpec(kind="sgd"))
    assert derived.dram_bytes == parameter_dram_bytes(step)
    assert (
        derived.gradient_in_dram == derived.updated_elements == 2 * (2 * 256 * 512 + 2560 + BIASES)
    )
    assert parameter_dram_bytes(step) == parameter_dram_bytes(result.base)


# MLP 784-2048-2048-10: fc1 (no dX), fc2 and fc3, biases; Adam (two fp32 states)
MLP = 784 * 2048, 2048 * 2048 + 2048 * 10, 2048 + 2048 + 10


def mlp_bytes(mode: str, master: bool) -> float:
    """Bytes per parameter on the MLP with Adam, by hand: a weight read by the forward
    GEMM and dX (fc2, fc3), by the forward GEMM only (fc1), by no GEMM (biases); the
    update reads W (not with a master) and writes it, reads and writes each state
    (Adam's two and the master: 8 B each), g is written and read unless backward-fused.
    Backward serves the update's W read from dX; forward serves the forward read."""
    first, rest, biases = MLP
    states = 8 * (2 + master)
    g = 0 if mode == "backward" else 4
    update_w = 1 if master else 2
    served = {"backward": (0, 0 if master else 1, 0), "forward": (1, 1, 0)}[mode]
    reads = (1, 2, 0)  # GEMM reads of W: fc1, fc2 and fc3, biases
    total = 0
    for elements, gemm, off in zip((first, rest, biases), reads, served, strict=True):
        total += elements * (2 * (gemm + update_w - off) + g + states)
    return total / sum(MLP)


@pytest.mark.parametrize("master", ["none", "fp32"])
@pytest.mark.parametrize("mode", ["backward", "forward"])
@pytest.mark.parametrize(
    ("model", "optimizer", "ideal"),
    [
        # momentum, bf16 W and g: unfused 20 B, backward 14, forward 18; fp32 masters
        # 26, 22, 24 (within 0.1 B: the first conv layer has no dX, biases no GEMM)
        ("alexnet", "momentum", {"backward": (14.0, 22.0), "forward": (18.0, 24.0)}),
        (
            "mlp",
            "adam",
            {m: (mlp_bytes(m, False), mlp_bytes(m, True)) for m in ("backward", "forward")},
        ),
    ],
)
def test_simulated_parameter_traffic_agrees_with_the_derivation(
    model: str, optimizer: str, ideal: dict[str, tuple[float, float]], mode: str, master: str
) -> None:
    """Default accelerator, batch 32: the simulated bytes per parameter agree with the
    derived within 1 % (exactly: both count the same passes), the derivation without
    weight re-reads and for every tile on chip is the hand table within 0.1 B, and the
    fused step's speedup stays under its bound."""
    sets = [
        f"run.workload=workloads/{model}.yaml",
        f"run.optimizer={{kind: {optimizer}, master_weights: {master}}}",
        f"run.techniques={{{OF}: {{mode: {mode}}}}}",
    ]
    report = train(ROOT / "configs/runs/default.yaml", *sets).training
    assert report is not None
    section = report.sections[OF].details
    (kind,) = section["by_kind"].values()
    assert kind["bytes_per_parameter"] == pytest.approx(
        kind["derived_bytes_per_parameter"], rel=0.01
    )
    assert section["ideal_bytes_per_parameter"][mode] == pytest.approx(
        ideal[mode][master == "fp32"], abs=0.1
    )
    assert kind["gradient_in_dram_share"] == (1.0 if mode == "forward" else 0.0)
    assert 1 < kind["speedup"] <= kind["speedup_bound"]
    assert report.speedup <= report.speedup_bound


@pytest.mark.parametrize(
    ("techniques", "optimizer", "message"),
    [
        (
            "{optimizer_fusion: {mode: backward}}",
            "sgd, clip_global_norm: 1.0",
            "global-norm clipping",
        ),
        (
            "{optimizer_fusion: {mode: backward}, gpipe: {micro_batches: 2}}",
            "sgd",
            "summed the gradients of its 2 micro-batches",
        ),
        (
            "{optimizer_fusion: {mode: forward}, pipedream: {}}",
            "sgd",
            "forward fusion under the pipedream schedule is not modelled",
        ),
        ("{optimizer_fusion: {mode: sideways}}", "sgd", "'unfused', 'forward' or 'backward'"),
    ],
)
def test_invalid_combinations_are_config_errors(
    tmp_path: Path, techniques: str, optimizer: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        load_inputs(tiny_run(tmp_path, techniques, optimizer))
    assert f"techniques.{OF}.mode" in str(err.value)


def test_check_rejects_an_invalid_combination_cleanly(tmp_path: Path) -> None:
    path = tiny_run(tmp_path, f"{{{OF}: {{mode: backward}}}}", "adam, clip_global_norm: 1.0")
    check = subprocess.run(
        [sys.executable, "-m", "accelsim", "check", str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert check.returncode == 2 and "Traceback" not in check.stderr
    assert f"techniques.{OF}.mode: backward fusion" in check.stderr


def test_clipping_costs_a_pass_over_the_gradients(tmp_path: Path) -> None:
    result = train(tiny_run(tmp_path, "{}", "sgd, clip_global_norm: 1.0"))
    norm = by_name(result.base, "grad_norm")
    assert norm.elements == 2 * 256 * 512 + 256 * 10 + BIASES
    updates = [op for op in result.base.graph.ops if op.name.endswith(".update")]
    assert all(op.ops_per_element == 3 for op in updates)
    # every update waits for the norm: the first directly, each later one through the
    # update before it (lowering/optimizer.add_updates)
    assert norm.op_id in updates[0].after
    assert all(b.op_id in a.after for b, a in itertools.pairwise(updates))


def test_composes_with_skipping_adagp_and_pipedream(tmp_path: Path) -> None:
    techniques = (
        "{gradient_prediction: {schedule: {warmup_epochs: 0, policy: fixed}},"
        " gradient_skipping: {skip_fraction: 0.5},"
        f" {OF}: {{mode: backward}}, pipedream: {{}}}}"
    )
    result = train(tiny_run(tmp_path, techniques, "momentum"), "processors=2")
    report = result.training
    assert report is not None and set(result.steps) == {"bp", "gp"}
    assert report.techniques == ("gradient_skipping", "gradient_prediction", OF, "pipedream")
    assert set(report.sections) == set(report.techniques)
    assert report.speedup <= report.speedup_bound
    bp = result.steps["bp"]
    (dw,) = [op for op in bp.graph.ops if op.name == "fc2.dw" and op.tag.mini_batch == 0]
    assert isinstance(dw, GemmOp) and dw.m == 128  # half of fc2's 256 rows
    fused_updates = [
        op for op in bp.graph.ops if op.name == "fc2.W.update" and op.tag.mini_batch == 0
    ]
    (update,) = fused_updates
    assert isinstance(update, VectorOp) and update.elements == 128 * 512
    # backward-fused: it waits for its layer's gradient, not for the stage's whole backward
    assert dw.op_id in update.after
    assert {op.tag.mini_batch for op in bp.graph.ops} == set(range(8))


def test_forward_fusion_updates_only_the_kept_groups(tmp_path: Path) -> None:
    techniques = f"{{gradient_skipping: {{skip_fraction: 0.25}}, {OF}: {{mode: forward}}}}"
    result = train(tiny_run(tmp_path, techniques, "adam"))
    step = result.steps["gradient_skipping"]
    update, forward = by_name(step, "fc2.W.update"), by_name(step, "fc2.fwd")
    assert isinstance(update, VectorOp) and isinstance(forward, GemmOp)
    assert update.elements == 192 * 512 and update.op_id in forward.after
    # skipping's monitor rides along the fused update: Adam's 13 ops and 4 more
    assert update.ops_per_element == 13 + 4
    report = result.training
    assert report is not None and report.sections[OF].details["mode"] == "forward"


def test_forward_fusion_keeps_clipping(tmp_path: Path) -> None:
    # the norm still reads every gradient after the backward pass; the fused updates
    # (next step's) scale by it
    _, step = fused(tmp_path, "forward", "sgd, clip_global_norm: 1.0")
    norm = by_name(step, "grad_norm")
    assert norm.elements == 2 * 256 * 512 + 256 * 10 + BIASES
    update = by_name(step, "fc2.W.update")
    assert isinstance(update, VectorOp) and update.ops_per_element == 2 + 1
    assert update.op_id < by_name(step, "fc2.fwd").op_id < norm.op_id


@pytest.mark.parametrize("mode", ["unfused", "backward", "forward"])
def test_fp32_master_weights_by_hand(tmp_path: Path, mode: str) -> None:
    """With fp32 masters (momentum) the update reads and writes the master (4 B) and the
    momentum (4 B), reads g (2 B) and writes the bf16 W (2 B): a weight matrix read by
    its forward and dX GEMMs costs 2 + 2 + 2 (W), 2 + 2 (g), 8 + 8 (states) = 26 B
    unfused; backward fusion keeps g on chip but has no W read to serve from dX's copy
    (22 B); forward fusion serves the forward GEMM's read from the update's W (24 B)."""
    _, step = fused(tmp_path, mode, "momentum, master_weights: fp32")
    per = {"unfused": 26, "backward": 22, "forward": 24}[mode]
    assert (
        derived_accesses(FusionMode(mode), OptimizerKind.MOMENTUM, master=True).bytes_per_element(
            make_hw()
        )
        == per
    )
    expected = 0
    for elements, fwd, dx in WEIGHTS:
        w = fwd + dx + 1 - (fwd if mode == "forward" else 0)
        g = 0 if mode == "backward" else 2
        expected += elements * (w * WORD_W + g * WORD_G + 4 * WORD_STATE)
    expected += BIASES * (WORD_W + (0 if mode == "backward" else 2) * WORD_G + 4 * WORD_STATE)
    assert parameter_dram_bytes(step) == expected
    update = by_name(step, "fc2.W.update")
    assert isinstance(update, VectorOp)
    assert [a.tensor.name for a in update.reads] == ["fc2.W.master", "fc2.dW", "fc2.W.state0"]
    assert [a.tensor.name for a in update.writes] == ["fc2.W", "fc2.W.master", "fc2.W.state0"]
    assert update.ops_per_element == 4 + 1  # momentum, and the cast to bf16


def test_weight_tiles_from_dram_leave_dx_on_its_own(tmp_path: Path) -> None:
    """``weight_tiles: dram``: the update takes only g's tiles and reads W from DRAM, so
    dX is no member of its group and the W read costs 2 B per element again."""
    path = tiny_run(tmp_path, f"{{{OF}: {{mode: backward, weight_tiles: dram}}}}", "momentum")
    result = train(path)
    step = result.steps[OF]
    update, dx, dw = (by_name(step, n) for n in ("fc2.W.update", "fc2.dx", "fc2.dw"))
    assert update.tile_sources == (NO_TILES, dw.op_id, NO_TILES)
    assert (dw.op_id, update.op_id) in queries.tile_groups(step.graph)
    assert int(step.trace.costs.dram_read_bytes[update.op_id]) == 512 * 256 * (WORD_W + 4)
    derived = derived_traffic(
        result.base, step, FusionMode.BACKWARD, OptimizerSpec(kind="momentum")
    )
    assert derived.dram_bytes == parameter_dram_bytes(step)
    assert derived.weight_in_dram == derived.updated_elements
    assert dx.op_id not in {i for g in queries.tile_groups(step.graph) for i in g}


def test_epilogue_groups_too_large_for_a_gradient_tile_are_counted() -> None:
    """ResNet-18 (CIFAR-10 variant, batch 2, momentum) with batchnorm fused too: a
    backward group that also holds its epilogue chain's tiles no longer fits half the
    ofmap buffer for some layers, so their gradients go through DRAM (27.7 % of the
    elements); the derivation counts them and agrees with the simulation within
    0.03 % (batchnorm's scale and shift, read by its own ops, are not in it)."""
    sets = [
        "batch_size=2",
        "workload_variant=cifar10",
        f"run.techniques={{{OF}: {{weight_tiles: dx}}}}",
    ]
    by_setting = {}
    for fuse in ("none", "all"):
        report = train(
            ROOT / "configs/runs/default.yaml", *sets, f"lowering.fuse_epilogues={fuse}"
        ).training
        assert report is not None
        (kind,) = report.sections[OF].details["by_kind"].values()
        assert kind["bytes_per_parameter"] == pytest.approx(
            kind["derived_bytes_per_parameter"], rel=3e-4
        )
        assert 1 < kind["speedup"] <= kind["speedup_bound"]
        by_setting[fuse] = kind
    assert by_setting["none"]["gradient_in_dram_share"] == 0
    assert by_setting["all"]["gradient_in_dram_share"] == pytest.approx(0.277, abs=1e-3)
    # 2 B written and 2 B read per such gradient element: 4 x 0.277 = 1.11 B more
    more = by_setting["all"]["derived_bytes_per_parameter"]
    assert more - by_setting["none"]["derived_bytes_per_parameter"] == pytest.approx(
        4 * by_setting["all"]["gradient_in_dram_share"], rel=1e-3
    )
