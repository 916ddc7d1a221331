"""The mapper (``mapping.search: per_layer``) by hand: a depthwise 3x3 convolution on the
vector unit, a dense one on the array in the dataflow whose closed form is shortest,
the objective switching the choice where time and energy disagree, and no search
changing nothing.

The set-up: an 8x8 array, 8 vector lanes and DRAM fast enough (64 KiB a cycle) that
every GEMM here is compute-bound, a batch of one 8x4x4 map.  A convolution of 8
channels, 3x3, padding 1, makes 16 output positions.  Under the accelsim convention
a fold of a ``Sr x Sc`` block streaming ``T`` takes ``2R + C + T - 2`` cycles on an
``R x C`` array: 22 + T here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import accelsim
from accelsim.errors import ConfigError
from accelsim.report.console import summary_table
from accelsim.report.mapping_summary import MappingSummary
from accelsim.report.summary import StepSummary
from tests.conftest import ROOT

WORKLOAD = """\
name: tiny_dw
description: a depthwise and a dense 3x3 convolution
input: {kind: image, channels: 8, height: 4, width: 4}
layers:
  - {name: dw, kind: conv2d, out_channels: 8, kernel: 3, padding: 1, groups: 8}
  - {name: dense, kind: conv2d, out_channels: 8, kernel: 3, padding: 1}
  - {name: flat, kind: flatten}
  - {name: fc, kind: linear, out_features: 10}
  - {name: loss, kind: cross_entropy}
"""
SMALL = [
    "array.rows=8",
    "array.cols=8",
    "vector_unit.lanes=8",
    "dram.bandwidth_bytes_per_cycle=65536",
]
SEARCH = ["mapping.search=per_layer"]


@pytest.fixture(scope="module")
def run_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("mapper")
    (folder / "tiny.yaml").write_text(WORKLOAD)
    run = folder / "run.yaml"
    run.write_text(
        f"name: tiny\nhardware: {ROOT / 'configs/hardware/default.yaml'}\n"
        f"workload: tiny.yaml\nenergy: {ROOT / 'configs/energy/horowitz45.yaml'}\n"
        "batch_size: 1\noptimizer: {kind: sgd}\ntiming: {convention: accelsim}\n"
    )
    return run


def gemms(run_file: Path, *sets: str) -> dict[str, dict[str, Any]]:
    """The GEMM rows of ``ops.csv`` by op name, on the small hardware with ``sets``."""
    rows = accelsim.simulate(run_file, [*SMALL, *sets]).base.op_rows()
    return {r["name"]: r for r in rows if r["kind"] == "gemm"}


def test_depthwise_runs_on_the_vector_unit_and_a_dense_conv_stays_on_the_array(
    run_file: Path,
) -> None:
    plain = gemms(run_file)
    searched = gemms(run_file, *SEARCH)
    # The depthwise forward GEMM: 8 groups of 16 x 1 outputs over k = 9 taps.  Weight
    # stationary maps k = 9 on the rows (2 row folds) and one column: 2 x 8 folds of
    # T = 16, each 38 cycles, at 9 of the 8 x 8 x 2 PEs its folds hold (~1 / rows).
    dw = plain["dw.fwd"]
    assert (dw["m"], dw["n"], dw["k"], dw["count"]) == (16, 1, 9, 8)
    assert dw["compute_cycles"] == 2 * 8 * (22 + 16) == 608
    assert dw["mapping_efficiency"] == round(9 / (2 * 8 * 8), 6)
    # On the vector unit: 16 x 9 x 8 = 1,152 MACs at 8 lanes.
    moved = searched["dw.fwd"]
    assert (moved["unit"], moved["dataflow"], moved["orientation"]) == ("vector", "", "")
    assert moved["compute_cycles"] == 16 * 9 * 8 // 8 == 144
    assert moved["macs"] == moved["vector_ops"] == 1152
    assert searched["dw.dw"]["unit"] == "vector"  # 9 x 16 per group: the same MACs
    # The dense convolution: 16 x 8 outputs over k = 72 on the array, weight stationary
    # (its only dataflow here), 9 row folds of T = 16; the vector unit would take
    # 16 x 8 x 72 / 8 = 1,152 cycles.
    dense = searched["dense.fwd"]
    assert (dense["unit"], dense["dataflow"], dense["stream_blocking"]) == (
        "array",
        "ws",
        "fewest_reads",
    )
    assert dense["compute_cycles"] == plain["dense.fwd"]["compute_cycles"] == 9 * (22 + 16)


def test_output_stationary_wins_where_its_closed_form_is_shorter(run_file: Path) -> None:
    rows = gemms(run_file, *SEARCH, "array.dataflows=[ws, os, is]")
    dense = rows["dense.fwd"]
    # ws: 9 row folds x (22 + 16) = 342; os: m = 16 on 2 row folds, n = 8 on one column
    # fold, T = k = 72: 2 x (22 + 72) = 188; is: k = 72 on 9 row folds, m = 16 on 2
    # column folds, T = 8: 18 x 30 = 540.
    assert (dense["dataflow"], dense["compute_cycles"]) == ("os", 2 * (22 + 72))
    assert gemms(run_file, "array.dataflow=is")["dense.fwd"]["compute_cycles"] == 18 * 30
    # dW (8 x 72 over k = 16): is maps k = 16 on 2 row folds and m = 8 on one column
    # fold, T = n = 72: 2 x (22 + 72) = 188, against ws's 2 x 9 folds x (22 + 8) = 540.
    assert (rows["dense.dw"]["dataflow"], rows["dense.dw"]["compute_cycles"]) == ("is", 188)


def test_the_energy_objective_keeps_the_depthwise_conv_on_the_array(run_file: Path) -> None:
    offered = [*SEARCH, "array.dataflows=[ws, os, is]"]
    fast = gemms(run_file, *offered)["dw.fwd"]
    frugal = gemms(run_file, *offered, "mapping.objective=energy")["dw.fwd"]
    assert (fast["unit"], fast["compute_cycles"]) == ("vector", 144)
    # On the array, output stationary: 2 row folds of T = 9 per group, 8 x 2 x 31.
    assert (frugal["unit"], frugal["dataflow"], frugal["compute_cycles"]) == (
        "array",
        "os",
        8 * 2 * (22 + 9),
    )
    # The vector unit's energy by hand (horowitz45: fp32 operation 4.6 pJ; SRAM 1.25 pJ a
    # byte at 8 KiB, scaled by (1024 / 8) ** 0.48 for the 1 MiB ofmap buffer it works
    # through; DRAM 20 pJ a bit): 1,152 operations, each MAC reading 2 + 2 bytes, 16 x 8
    # bf16 outputs written; DRAM: the 8 x 16 input, the 8 x 9 weights, the outputs.
    sram = 1.25 * (1024 / 8) ** 0.48
    by_hand = 1152 * 4.6 + (1152 * 4 + 256) * sram + (256 + 144 + 256) * 8 * 20
    assert fast["energy_pj"] == pytest.approx(by_hand, rel=1e-6)
    assert frugal["energy_pj"] < by_hand  # what the energy objective saw
    assert frugal["compute_cycles"] > fast["compute_cycles"]  # and what time sees


def test_edp_weighs_both(run_file: Path) -> None:
    rows = gemms(run_file, *SEARCH, "array.dataflows=[ws, os, is]", "mapping.objective=edp")
    # 144 cycles at 172.7 nJ beats 496 cycles at 163.5 nJ by their product.
    assert rows["dw.fwd"]["unit"] == "vector"


def test_summary_counts_the_moved_gemms(run_file: Path) -> None:
    result = accelsim.simulate(run_file, [*SMALL, *SEARCH, "array.dataflows=[ws, os, is]"])
    summary = result.base.step_summary()
    rows = {r["name"]: r for r in result.base.op_rows() if r["kind"] == "gemm"}
    flows = [r["dataflow"] for r in rows.values() if r["unit"] == "array"]
    expected = MappingSummary(
        gemms=len(rows),
        moved=sum(r["unit"] == "vector" or r["dataflow"] != "ws" for r in rows.values()),
        vector_unit=2,
        transposed=0,
        fewest_reads=len(flows),
        dataflows={d: flows.count(d) for d in ("os", "ws", "is")},
    )
    assert summary.mapping == expected
    record = json.loads(json.dumps(result.base.summary()))
    assert record["mapping"]["vector_unit"] == 2
    assert StepSummary.from_dict(record).mapping == expected
    line = f"{expected.moved} of {len(rows)} GEMMs moved: 2 on the vector unit,"
    assert line in summary_table(summary)


def test_no_search_changes_nothing(run_file: Path) -> None:
    plain = accelsim.simulate(run_file, SMALL).base
    offered = accelsim.simulate(run_file, [*SMALL, "array.dataflows=[ws, os]"]).base
    assert offered.ops_csv() == plain.ops_csv()
    assert "mapping" not in offered.summary()
    assert "dataflow" not in offered.op_rows()[0]


def test_a_search_with_one_choice_moves_nothing() -> None:
    """The smoke run's MLP (no grouped convolution) with its one dataflow, the given
    orientation and the stream blocking fixed: every GEMM keeps its mapping."""
    smoke = ROOT / "configs" / "runs" / "smoke.yaml"
    plain = accelsim.simulate(smoke).base
    searched = accelsim.simulate(smoke, [*SEARCH, "mapping.stream_blocking=psums"]).base
    assert searched.total_cycles == plain.total_cycles
    assert [r["compute_cycles"] for r in searched.op_rows()] == [
        r["compute_cycles"] for r in plain.op_rows()
    ]
    assert searched.step_summary().mapping is not None
    assert searched.step_summary().mapping.moved == 0


def test_dataflows_must_hold_the_dataflow(run_file: Path) -> None:
    with pytest.raises(ConfigError) as excinfo:
        accelsim.simulate(run_file, ["array.dataflows=[os, is]"])
    assert "array.dataflows: must hold dataflow (ws) (got ['os', 'is'])" in str(excinfo.value)
    with pytest.raises(ConfigError) as excinfo:
        accelsim.simulate(run_file, ["array.dataflows=[ws, ws]"])
    assert "array.dataflows: names a dataflow twice (got ['ws', 'ws'])" in str(excinfo.value)


def test_both_engines_time_a_gemm_on_the_vector_unit_alike(run_file: Path) -> None:
    sets = [*SMALL, *SEARCH, "array.dataflows=[ws, os, is]"]
    simpy = accelsim.simulate(run_file, [*sets, "timing.engine=simpy"]).base
    compiled = accelsim.simulate(run_file, [*sets, "timing.engine=compiled"]).base
    assert compiled.ops_csv() == simpy.ops_csv()
    assert "vector" in {r["unit"] for r in simpy.op_rows() if r["kind"] == "gemm"}


def test_a_layer_query_reports_the_dataflow_the_mapper_chose(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from accelsim.cli import main

    hardware = str(ROOT / "configs" / "hardware" / "default.yaml")
    sets = ["array.rows=8", "array.cols=8", "mapping.search=per_layer", "array.dataflows=[ws, os]"]
    args = ["layer", "--hardware", hardware, "--gemm", "16", "8", "72", "--json"]
    assert main([*args, *(a for s in sets for a in ("--set", s))]) == 0
    record = json.loads(capsys.readouterr().out)
    # 2 row folds of T = 72 (output stationary) against weight stationary's 9 of T = 16.
    assert (record["array"]["dataflow"], record["compute_cycles"]) == ("os", 2 * (22 + 72))
