"""Optimizer fusion's speedup (techniques/fusion/): each backward-fused layer's loop
order, counted by hand; the bound that knows the phase order; the hand band each
headline lands in; both engines alike; no suite model slower."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.graph import queries
from accelsim.graph.ops import GemmOp, Phase
from accelsim.report.result import RunResult
from accelsim.techniques.fusion.loop_order import LayerOrder, LoopOrder
from accelsim.techniques.fusion.report import order_line
from accelsim.techniques.fusion.traffic import exposed_update_cycles, parameter_dram_bytes
from tests.conftest import ROOT
from tests.techniques.fusion.test_optimizer_fusion import OF, by_name
from tests.techniques.skipping.test_gradient_skipping import tiny_run, train


def test_fusion_bound_knows_the_forward_pass_comes_first() -> None:
    """AlexNet, momentum, batch 32, backward fusion: the whole step's bytes over the
    bandwidth allow 1.756x; the forward pass as simulated (its updates cannot overlap
    it), then the bytes of the rest over the bandwidth allow 1.552x (1.380x with every
    layer taking W's tiles from dX: three convolutions spill 199.7 MB of partial sums)."""
    sets = [
        "run.workload=workloads/alexnet.yaml",
        "run.optimizer={kind: momentum}",
        "run.techniques={optimizer_fusion: {mode: backward}}",
    ]
    result = train(ROOT / "configs/runs/default.yaml", *sets)
    report = result.training
    assert report is not None
    (kind,) = report.sections["optimizer_fusion"].details["by_kind"].values()
    base, step = result.base, result.steps["optimizer_fusion"]
    parts = step.ordered_cycle_bounds()
    forward = parts.before_end_cycles
    # the forward pass is the baseline's, op for op
    assert forward == base.ordered_cycle_bounds().before_end_cycles
    assert kind["speedup_bound"] == base.total_cycles / (forward + parts.after["dram"])
    assert kind["binding_bound"] == "forward pass as simulated, then dram"
    assert report.speedup_bound == pytest.approx(1.756, abs=5e-4)
    assert kind["speedup_bound"] == pytest.approx(1.552, abs=5e-4)
    assert kind["speedup"] == pytest.approx(1.223, abs=5e-4)
    # conv3 (features.6, 384 x 192 x 3 x 3): W is 663,552 x 2 B = 1.33 MB, more than half
    # the 2 MiB filter buffer, and dX's partial sums for one column block, 32 x 13 x 13
    # rows x 128 columns x 2 B = 1.38 MB, more than half the 1 MiB ofmap buffer: sharing
    # W's tiles would spill them, so dX runs first
    orders = report.sections["optimizer_fusion"].details["loop_orders"]
    assert orders["features.6.W"]["spill_forced"] is True
    assert orders["features.6.W"]["order"] == "dx_first"
    assert {orders[f"classifier.{i}.W"]["order"] for i in (1, 4, 6)} == {"tile_shared"}


def test_each_layer_takes_the_loop_order_its_estimates_choose(tmp_path: Path) -> None:
    """``weight_tiles: auto`` (momentum, batch 32, a 128 x 128 array, 128 vector lanes,
    128 B/cycle, 2 B words).  fc2's dX output waits for relu1's mask (reads dX and the
    mask, writes 32 x 512: 3 x 32,768 B) and fc1's bias gradient (reads 32,768 B,
    writes 1,024 B): 132,096 B, 1,032 cycles, more than their 2 x 32 x 512 / 128 = 256
    vector cycles.  Sharing saves W's read (512 x 256 x 2 B: 2,048 cycles) and overlaps
    dW's bytes (16,384 + 32,768 + 262,144 B: 2,432 cycles) with dX's compute (32 x 256
    x 512 MACs / 16,384 PEs: 256 cycles): 2,304 cycles, so fc2 shares W's tiles.  fc3's
    waits for 49,152 + 16,896 B (516 cycles); sharing would save its W read (10 x 256 x
    2 B: 40 cycles) and 5 cycles of dX compute: its dX runs first, and its update reads
    W from DRAM (5,120 B more than with every layer sharing).  Their dX partial sums (32
    rows x at most 128 columns x 2 B) fit half the 1 MiB ofmap buffer: no spill."""
    path = tiny_run(tmp_path, f"{{{OF}: {{mode: backward}}}}", "momentum")
    result = train(path)
    assert result.training is not None
    orders = result.training.sections[OF].details["loop_orders"]
    assert orders["fc2.W"] == {
        "order": "tile_shared",
        "spill_bytes": 0,
        "waiting_cycles": 1032.0,
        "sharing_gain_cycles": 2048.0 + 256.0,
        "spill_forced": False,
    }
    assert orders["fc3.W"] == {
        "order": "dx_first",
        "spill_bytes": 0,
        "waiting_cycles": 516.0,
        "sharing_gain_cycles": 40.0 + 5.0,
        "spill_forced": False,
    }
    assert {orders[w]["order"] for w in ("fc1.W", "fc1.b", "fc2.b", "fc3.b")} == {"no_dx"}
    step = result.steps[OF]
    groups = {i for g in queries.tile_groups(step.graph) for i in g}
    assert by_name(step, "fc2.dx").op_id in groups
    assert by_name(step, "fc3.dx").op_id not in groups
    shared = train(tiny_run(tmp_path, f"{{{OF}: {{weight_tiles: dx}}}}", "momentum"))
    assert parameter_dram_bytes(step) - parameter_dram_bytes(shared.steps[OF]) == 10 * 256 * 2


SUITE = ROOT / "configs/runs/suite.yaml"  # momentum, batch 32, default accelerator


def suite_fused(model: str, mode: str) -> tuple[RunResult, dict[str, Any]]:
    """The baseline step of ``model`` at the suite's settings and fusion's figures."""
    sets = [f"run.workload=workloads/{model}.yaml", f"run.techniques={{{OF}: {{mode: {mode}}}}}"]
    result = train(SUITE, *sets)
    assert result.training is not None
    details = result.training.sections[OF].details
    (kind,) = details["by_kind"].values()
    return result.base, {**kind, "loop_orders": details["loop_orders"]}


@pytest.mark.parametrize(
    ("model", "backward", "forward"),
    [
        # (lower, upper) ends of each band, as docs/techniques/optimizer-fusion.md derives
        ("resnet18", (1.006, 1.037), (1.000, 1.032)),
        ("alexnet", (1.108, 1.552), (1.000, 1.154)),
        ("mlp", (1.180, 1.410), (1.000, 1.243)),
    ],
)
def test_fusion_lands_in_its_hand_band(
    model: str, backward: tuple[float, float], forward: tuple[float, float]
) -> None:
    """Momentum, batch 32, 128 B/cycle.  From the baseline step's cycles T and exposed
    update U, and the bytes fusion removes: backward, at least T / (T - R_u) (the update
    no longer reads g, 2 B per element, nor W, 2 B per element whose W tile dX serves),
    at most T / (T - U - R_g) (the whole exposed update hidden, dW no longer writes g),
    capped at the phase-ordered bound; forward, 1 to T / (T - U), capped alike."""
    for mode, band in (("backward", backward), ("forward", forward)):
        base, kind = suite_fused(model, mode)
        t, u = base.total_cycles, exposed_update_cycles(base)
        trained = [p for p in base.graph.parameters if p.grad_op >= 0]
        elements = sum(p.update_elements for p in trained)
        shared = sum(
            p.update_elements
            for p in trained
            if mode == "backward" and kind["loop_orders"][p.weight.name]["order"] == "tile_shared"
        )
        if mode == "backward":
            lo = t / (t - (2 * elements + 2 * shared) / 128)
            hi = min(t / (t - u - 2 * elements / 128), kind["speedup_bound"])
        else:
            lo, hi = 1.0, min(t / (t - u), kind["speedup_bound"])
        assert kind["hand_band"] == pytest.approx([lo, hi], rel=1e-12)
        assert (round(lo, 3), round(hi, 3)) == band
        assert 1.0 <= lo <= kind["speedup"] <= hi


@pytest.mark.slow
@pytest.mark.parametrize(
    "model",
    [
        "alexnet",
        "bert_base",
        "densenet121",
        "gpt2_small",
        "inception_v3",
        "lenet5",
        "lstm_ptb",
        "mlp",
        "mobilenet_v2",
        "resnet18",
        "resnet34",
        "resnet50",
        "vgg13",
        "vgg16",
    ],
)
def test_fusion_never_slows_a_suite_model(model: str) -> None:
    for mode in ("backward", "forward"):
        _, kind = suite_fused(model, mode)
        assert 1.0 <= kind["speedup"] <= kind["speedup_bound"]


def test_both_engines_agree_on_mixed_loop_orders(tmp_path: Path) -> None:
    """The tiny MLP with fc2 tile-shared and fc3's dX first: the SimPy engine and its
    compiled twin give the same fused step, op for op."""
    path = tiny_run(tmp_path, f"{{{OF}: {{mode: backward}}}}", "momentum")
    simpy, compiled = (train(path, f"timing.engine={e}").steps[OF] for e in ("simpy", "compiled"))
    assert compiled.trace.engine != simpy.trace.engine
    assert list(simpy.trace.start_cycle) == list(compiled.trace.start_cycle)
    assert list(simpy.trace.end_cycle) == list(compiled.trace.end_cycle)
    assert simpy.total_cycles == compiled.total_cycles


FORCED = [
    "run.workload=workloads/alexnet.yaml",
    "run.optimizer={kind: momentum}",
    "run.techniques={optimizer_fusion: {mode: backward, weight_tiles: dx}}",
]
"""AlexNet, momentum, every backward-fused layer taking W's tiles from dX."""


def test_forced_sharing_charges_the_partial_sums_it_spills() -> None:
    """AlexNet, momentum, batch 32, ``weight_tiles: dx`` (128 x 128 ws array, 2 MiB
    filter and 1 MiB ofmap buffers, 2 B words).  conv3's dX (features.6) is
    dX[5,408 x 192] = dY[5,408 x 3,456] . W[3,456 x 192]: W (1,327,104 B) does not fit
    half the filter buffer, so unfused dX streams its 5,408 rows in 4 chunks and reads
    W 4 times (5,308,416 B).  Sharing W's tiles with the update loads each tile once:
    all 5,408 rows pass each of the 27 row folds (3,456 / 128), so the partial sums of
    a column block, 5,408 x 128 x 2 B = 1,384,448 B (and 5,408 x 64 x 2 B = 692,224 B
    for the last), keep 524,288 B in half the ofmap buffer and send the rest,
    860,160 + 167,936 = 1,028,096 B, out after each of the first 26 folds and back
    for the next: 26 x 1,028,096 = 26,730,496 B written and as many read,
    53,460,992 B in all.  dY (4,153,344 B) no longer fits a chunk's slice: read once
    per column block (2 x 4,153,344 B).  fc6's dX (classifier.1, 32 rows x 128 columns
    x 2 B = 8 KiB of partial sums) spills nothing.  The step is slower than the
    16,511,864 cycles it takes when the shared order is costed as unfused dX's chunks
    (W read per chunk, no spill)."""
    result = train(ROOT / "configs/runs/default.yaml", *FORCED)
    report = result.training
    assert report is not None
    orders = report.sections[OF].details["loop_orders"]
    assert orders["features.6.W"]["order"] == "tile_shared"
    assert orders["features.6.W"]["spill_bytes"] == 2 * 26 * (860_160 + 167_936) == 53_460_992
    assert orders["classifier.1.W"]["spill_bytes"] == 0
    step = result.steps[OF]
    costs = step.trace.costs
    dx = by_name(step, "features.6.dx").op_id
    assert int(costs.dram_ifmap_read_bytes[dx]) == 2 * 4_153_344
    assert int(costs.dram_filter_read_bytes[dx]) == 1_327_104
    assert int(costs.dram_ofmap_read_bytes[dx]) == 26_730_496
    assert int(costs.dram_ofmap_write_bytes[dx]) == 5_408 * 192 * 2 + 26_730_496
    # every spilling layer's charge is the simulated partial sums' round trips
    spilling = {w for w, o in orders.items() if o["spill_bytes"]}
    assert spilling == {"features.6.W", "features.8.W", "features.10.W"}
    for p in step.graph.parameters:
        if p.weight.name in spilling:
            (op,) = [o for o in gemms_of(step, p.layer) if o.phase is Phase.BWD_INPUT]
            i = op.op_id
            extra = costs.dram_ofmap_write_bytes[i] - op.c.bytes + costs.dram_ofmap_read_bytes[i]
            assert orders[p.weight.name]["spill_bytes"] == extra
    # and the energy charges the bytes moved: reads and writes at their pJ per bit
    table = load_inputs(ROOT / "configs/runs/default.yaml", parse_sets(FORCED)).energy
    read = 8 * (2 * 4_153_344 + 1_327_104 + 26_730_496) * table.dram_read_pj_per_bit
    write = 8 * (2_076_672 + 26_730_496) * table.dram_write_pj_per_bit
    assert step.energy.op_component_pj["dram"][dx] == pytest.approx(read + write, rel=1e-12)
    assert step.total_cycles > 16_511_864
    # the hand count of the parameters' bytes reads each spilling dX's W once, as simulated
    (kind,) = report.sections[OF].details["by_kind"].values()
    assert kind["parameter_dram_bytes"] == kind["derived_parameter_dram_bytes"]


def gemms_of(result: RunResult, layer: str) -> list[GemmOp]:
    return [o for o in result.graph.ops if isinstance(o, GemmOp) and o.layer == layer]


def test_both_engines_charge_the_spill_alike() -> None:
    """AlexNet with every W tile from dX (three convolutions spill): the SimPy engine and
    its compiled twin give the same fused step, op for op."""
    simpy, compiled = (
        train(ROOT / "configs/runs/default.yaml", *FORCED, f"timing.engine={e}").steps[OF]
        for e in ("simpy", "compiled")
    )
    assert compiled.trace.engine != simpy.trace.engine
    assert list(simpy.trace.start_cycle) == list(compiled.trace.start_cycle)
    assert list(simpy.trace.end_cycle) == list(compiled.trace.end_cycle)
    assert simpy.dram_bytes == compiled.dram_bytes


def test_the_loop_order_line_names_the_spill_only_where_sharing_spills() -> None:
    """Two shared weights, one spilling 53,460,992 B; one dX first where sharing would
    spill; one without dX."""
    shared = LayerOrder(LoopOrder.TILE_SHARED, 0, 1.0, 2.0, False)
    orders = {
        "a": LayerOrder(LoopOrder.TILE_SHARED, 53_460_992, 1.0, 2.0, True),
        "b": shared,
        "c": LayerOrder(LoopOrder.DX_FIRST, 0, 3.0, 2.0, True),
        "d": LayerOrder(LoopOrder.NO_DX, 0, 0.0, 0.0, False),
    }
    tail = (
        " 1 run dX first (1 of them where sharing would spill dX's partial sums),"
        " 1 have no dX (per weight: sections.optimizer_fusion.loop_orders)"
    )
    assert order_line(orders) == (
        "2 weights take W's tiles from dX (1 of them spilling dX's partial sums:"
        " 53.46 MB written and read back)," + tail
    )
    assert order_line({**orders, "a": shared}) == "2 weights take W's tiles from dX," + tail
