"""SCALE-Sim topology CSVs as training workloads, the bridge layer, and ``accelsim models FILE``.

MACs and parameters are counted by hand from the rows: a conv row ``H, W, R, S,
C, NF, stride`` has ``P = (H - R) // stride + 1`` output rows (no padding),
``P.Q.NF.C.R.S`` forward MACs and ``NF.C.R.S`` weights; a GEMM row ``M, N, K``
has ``M.N.K`` forward MACs and ``K.N`` weights.  dW has the forward's MACs; dX
is computed for every row but the first.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from accelsim import cli
from accelsim.api import simulate
from accelsim.config.hardware import WordBytesSpec
from accelsim.config.run import StridedDx
from accelsim.errors import WorkloadError
from accelsim.graph.ops import GemmOp, ParamKind, Phase
from accelsim.lowering.infer import load_model
from accelsim.lowering.stats import model_stats
from accelsim.lowering.step import lower
from accelsim.report.summary import StepSummary
from tests.conftest import ROOT as REPO

SMOKE = REPO / "configs" / "runs" / "smoke.yaml"

CONV_CSV = """\
Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,
c1, 8, 8, 3, 3, 2, 4, 1,
c2, 8, 8, 3, 3, 4, 6, 1,
c3, 6, 6, 2, 2, 6, 5, 2,
"""
# c1: 2x8x8 -> 4x6x6; c2 (a bridge from 4x6x6 to its padded 4x8x8) -> 6x6x6; c3 reads
# c2's output as it is (no bridge) -> 5x3x3.
CONV_FWD = {"c1": 6 * 6 * 4 * 2 * 9, "c2": 6 * 6 * 6 * 4 * 9, "c3": 3 * 3 * 5 * 6 * 4}
CONV_PARAMS = {"c1.W": 4 * 2 * 9, "c2.W": 6 * 4 * 9, "c3.W": 5 * 6 * 4}
# dX: c2 (stride 1) is 8x8 input positions x 4 channels x (6 filters x 9 taps); c3 (stride
# 2, 2x2 filter) splits into 4 phases of 3x3 positions with one tap each: 4 x 9 x 6 x 5.
CONV_DX = {"c2": 64 * 4 * 54, "c3": 4 * 9 * 6 * 5}

GEMM_CSV = """\
Layer, M, N, K,
q, 4, 6, 5,
o, 4, 5, 6,
f, 2, 3, 10,
"""
# The input is a vector of 4 x 5 features bridged to 4 rows of 5; o reads q's 4x6 output
# as it is; f gets q's 4x5 output bridged to 2 rows of 10.
GEMM_FWD = {"q": 4 * 6 * 5, "o": 4 * 5 * 6, "f": 2 * 3 * 10}
GEMM_DX = {"o": 4 * 5 * 6, "f": 2 * 3 * 10}


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _macs_by_layer(path: Path, batch: int) -> tuple[dict[tuple[str, Phase], int], dict[str, int]]:
    workload, infos = load_model(path)
    graph = lower(infos, workload, batch, WordBytesSpec(), StridedDx.SKIP_ZEROS)
    macs: dict[tuple[str, Phase], int] = {}
    for op in graph.ops:
        if isinstance(op, GemmOp):
            macs[(op.layer, op.phase)] = macs.get((op.layer, op.phase), 0) + op.macs
    params = {p.weight.name: p.weight.elements for p in graph.parameters}
    return macs, params


def test_conv_rows_lower_to_hand_counted_layers(tmp_path: Path) -> None:
    path = _write(tmp_path, "convs.csv", CONV_CSV)
    workload, _ = load_model(path)
    assert [(layer.name, layer.kind) for layer in workload.layers] == [
        ("c1", "conv2d"),
        ("c2.in", "bridge"),
        ("c2", "conv2d"),
        ("c3", "conv2d"),
        ("c3.flat", "flatten"),
        ("c3.loss", "cross_entropy"),
    ]
    assert workload.input.model_dump() == {"kind": "image", "channels": 2, "height": 8, "width": 8}
    batch = 3
    macs, params = _macs_by_layer(path, batch)
    expected = {(name, Phase.FWD): batch * m for name, m in CONV_FWD.items()}
    expected |= {(name, Phase.BWD_WEIGHT): batch * m for name, m in CONV_FWD.items()}
    expected |= {(name, Phase.BWD_INPUT): batch * m for name, m in CONV_DX.items()}
    assert macs == expected
    assert params == CONV_PARAMS


def test_gemm_rows_lower_to_hand_counted_layers(tmp_path: Path) -> None:
    path = _write(tmp_path, "gemms.csv", GEMM_CSV)
    workload, _ = load_model(path)
    assert [(layer.name, layer.kind) for layer in workload.layers] == [
        ("q.in", "bridge"),
        ("q", "linear"),
        ("o", "linear"),
        ("f.in", "bridge"),
        ("f", "linear"),
        ("f.loss", "cross_entropy"),
    ]
    assert workload.input.model_dump() == {"kind": "vector", "features": 20}
    batch = 2
    macs, params = _macs_by_layer(path, batch)
    expected = {(name, Phase.FWD): batch * m for name, m in GEMM_FWD.items()}
    expected |= {(name, Phase.BWD_WEIGHT): batch * m for name, m in GEMM_FWD.items()}
    expected |= {(name, Phase.BWD_INPUT): batch * m for name, m in GEMM_DX.items()}
    assert macs == expected
    assert params == {"q.W": 5 * 6, "o.W": 6 * 5, "f.W": 10 * 3}


def test_csv_layer_costs_what_the_same_yaml_layer_costs(tmp_path: Path) -> None:
    """c2 of CONV_CSV is a 3x3 conv, 4 -> 6 channels, on an 8x8 input: as a YAML layer
    after another conv (so that it computes dX too), its GEMMs take the same cycles."""
    csv_path = _write(tmp_path, "convs.csv", CONV_CSV)
    yaml_path = _write(
        tmp_path,
        "twin.yaml",
        "name: twin\n"
        "input: {kind: image, channels: 4, height: 8, width: 8}\n"
        "layers:\n"
        "  - {name: c1, kind: conv2d, out_channels: 4, kernel: 1}\n"
        "  - {name: c2, kind: conv2d, out_channels: 6, kernel: 3}\n"
        "  - {name: flat, kind: flatten}\n"
        "  - {name: loss, kind: cross_entropy}\n",
    )

    def c2_ops(workload: Path) -> dict[str, tuple[int, int, int, int, int]]:
        result = simulate(SMOKE, [f"workload={workload}"])
        return {
            row["name"]: (row["m"], row["n"], row["k"], row["compute_cycles"], row["macs"])
            for row in result.base.op_rows()
            if row["layer"] == "c2" and row["kind"] == "gemm"
        }

    from_csv = c2_ops(csv_path)
    assert set(from_csv) == {"c2.fwd", "c2.dx", "c2.dw"}
    assert from_csv == c2_ops(yaml_path)
    assert from_csv["c2.fwd"][4] == 4 * CONV_FWD["c2"]  # the smoke run's batch is 4


def test_run_prints_and_records_the_assumptions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, "gemms.csv", GEMM_CSV)
    out = tmp_path / "out"
    code = cli.main(["run", str(SMOKE), "--set", f"workload={path}", "--out", str(out)])
    assert code == cli.EXIT_OK
    printed = capsys.readouterr().out
    assert f"workload from SCALE-Sim topology {path} (gemm rows), assuming:" in printed
    assert (
        "  - a GEMM row is a linear layer C[M x N] = A[M x K] . B[K x N]: B is a trained"
        " K x N weight, M counts rows per sample (times the batch)"
    ) in printed
    summary = json.loads((out / "gemms_smoke" / "summary.json").read_text())
    provenance = summary["workload_provenance"]
    assert provenance["source"] == f"SCALE-Sim topology {path} (gemm rows)"
    assert len(provenance["notes"]) == 5
    assert "no biases" in provenance["notes"][2]
    assert StepSummary.from_dict(summary).workload == "gemms"
    assert summary["macs"]["fwd"] == 4 * sum(GEMM_FWD.values())


def test_yaml_runs_record_no_workload_provenance() -> None:
    """A table without notes records none: its summary, resolved configuration and sweep
    identity stay as they were."""
    from accelsim.driver.inputs import load_inputs, resolved_data

    assert "workload_provenance" not in simulate(SMOKE).summary()
    assert "notes" not in resolved_data(load_inputs(SMOKE))["workload"]


def test_models_file_summarises_one_workload(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, "convs.csv", CONV_CSV)
    assert cli.main(["models", str(path), "--json"]) == cli.EXIT_OK
    (record,) = json.loads(capsys.readouterr().out)
    fwd = sum(CONV_FWD.values())
    assert {
        k: record[k] for k in ("name", "params", "forward_macs", "training_macs", "layers")
    } == {
        "name": "convs",
        "params": sum(CONV_PARAMS.values()),
        "forward_macs": fwd,
        "training_macs": 2 * fwd + sum(CONV_DX.values()),
        "layers": 6,
    }
    assert record["input"] == "chw 2x8x8"
    assert record["source"] == f"SCALE-Sim topology {path} (conv rows)"
    assert cli.main(["models", str(path)]) == cli.EXIT_OK
    table = capsys.readouterr().out.splitlines()
    assert table[1].split() == ["convs", "chw", "2x8x8", "408", "11,448", "37,800", "6"]
    assert table[3] == f"convs: workload from SCALE-Sim topology {path} (conv rows), assuming:"


def test_models_file_reads_yaml_tables(capsys: pytest.CaptureFixture[str]) -> None:
    # workloads/mlp.yaml is 784-2048-2048-10 with biases.
    widths = (784, 2048, 2048, 10)
    assert cli.main(["models", "workloads/mlp.yaml", "--json"]) == cli.EXIT_OK
    (record,) = json.loads(capsys.readouterr().out)
    fwd = sum(a * b for a, b in itertools.pairwise(widths))
    assert (record["params"], record["forward_macs"]) == (
        fwd + sum(widths[1:]),
        fwd,
    )
    assert record["notes"] == [] and record["file"] == "workloads/mlp.yaml"


def test_models_refuses_files_with_a_suite(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["models", "workloads/mlp.yaml", "--suite", "configs/suites/default.yaml"])
    assert code == cli.EXIT_INPUT
    assert capsys.readouterr().err == "--suite: give workload files or --suite, not both\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "Layer, M, N, K,\na, 0, 5, 3,\n",
            "row 2, M: must be between 1 and 2^31 - 1 (got 0)",
        ),
        (
            "Layer, M, N, K,\na, 4, 5, x,\n",
            "row 2, K: expected a whole number (got 'x')",
        ),
        (
            "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels,"
            " Num Filter, Strides,\n\nc, 4, 6, 5, 3, 1, 1, 1,\n",
            "row 3, Filter Height: larger than the IFMAP Height 4 (the ifmap is already padded)"
            " (got 5)",
        ),
        (
            "Layer, M, N, K,\na, 4, 5,\n",
            "row 2: expected M, N, K (GEMM) or IFMAP Height, IFMAP Width, Filter Height, Filter"
            " Width, Channels, Num Filter, Strides (conv) after the name (got '2 values')",
        ),
        (
            "a, 4, 5, 3,\nb, 4, 5, 3,\n",
            "row 1: expected the header line first (SCALE-Sim skips the first line)"
            " (got 'a, 4, 5, 3,')",
        ),
        (
            "Layer, M, N, K,\na, 4, 5, 3,\na, 4, 5, 5,\n",
            "row 3, Layer: names another row, the input or a layer the table adds"
            " (.in, .flat, .loss) (got 'a')",
        ),
        (
            "Layer, M, N, K,\nq, 4, 5, 3,\nq.in, 4, 5, 5,\n",
            "row 3, Layer: names another row, the input or a layer the table adds"
            " (.in, .flat, .loss) (got 'q.in')",
        ),
        ("Layer, M, N, K,\n", "no layer rows"),
    ],
)
def test_bad_topology_rows_are_named_by_row_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    path = _write(tmp_path, "bad.csv", text)
    assert cli.main(["models", str(path)]) == cli.EXIT_INPUT
    assert capsys.readouterr().err == f"{path}: {message}\n"


def test_every_problem_of_a_file_is_reported_at_once(tmp_path: Path) -> None:
    path = _write(tmp_path, "bad.csv", "Layer, M, N, K,\na, 0, 5, x,\nb, 1,\n")
    with pytest.raises(WorkloadError) as caught:
        load_model(path)
    assert [p.path for p in caught.value.problems] == ["row 2, M", "row 2, K", "row 3"]


def test_scalesim_file_quirks_are_read(tmp_path: Path) -> None:
    """SCALE-Sim's own files: a '#dw' field after the values, a row without the trailing
    comma, tabs and blank lines."""
    path = _write(
        tmp_path,
        "quirks.csv",
        "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels,"
        " Num Filter, Strides,\n\n"
        "Conv1, 8, 8, 3, 3, 3, 4, 1,\n"
        "Conv2_dw, 6, 6, 3, 3, 4, 4, 1,#dw\n"
        "\tConv3,4,4,1,1,4,8,1\n",
    )
    workload, _ = load_model(path)
    assert [layer.name for layer in workload.layers] == [
        "Conv1",
        "Conv2_dw",
        "Conv3",
        "Conv3.flat",
        "Conv3.loss",
    ]


def test_set_overrides_a_csv_workload(tmp_path: Path) -> None:
    path = _write(tmp_path, "convs.csv", CONV_CSV)
    result = simulate(SMOKE, [f"workload={path}", "workload.layers[c3].out_channels=7"])
    assert result.base.summary()["macs"]["fwd"] == 4 * (
        CONV_FWD["c1"] + CONV_FWD["c2"] + 3 * 3 * 7 * 6 * 4
    )


def test_bridge_has_no_ops_and_passes_the_gradient_on(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "bridged.yaml",
        "name: bridged\n"
        "input: {kind: vector, features: 6}\n"
        "layers:\n"
        "  - {name: a, kind: linear, out_features: 8, bias: false}\n"
        "  - {name: b, kind: bridge, shape: [2, 3]}\n"
        "  - {name: c, kind: linear, out_features: 4, bias: false}\n"
        "  - {name: loss, kind: cross_entropy}\n",
    )
    workload, infos = load_model(path)
    assert str(infos[1].out_shape) == "sequence 2x3"
    graph = lower(infos, workload, 1, WordBytesSpec(), StridedDx.SKIP_ZEROS)
    assert not [op for op in graph.ops if op.layer == "b"]
    gemms = {op.name: (op.m, op.n, op.k) for op in graph.ops if isinstance(op, GemmOp)}
    # a's dW waits on c's dX through the bridge: a gets its gradient (8 x 6 weight).
    assert gemms == {
        "a.fwd": (1, 8, 6),
        "c.fwd": (2, 4, 3),
        "c.dx": (2, 3, 4),
        "c.dw": (4, 3, 2),
        "a.dw": (8, 6, 1),
    }
    a_dw = next(op for op in graph.ops if op.name == "a.dw")
    c_dx = next(op for op in graph.ops if op.name == "c.dx")
    assert c_dx.op_id in a_dw.deps


def test_shipped_resnet18_topology_matches_the_layer_table() -> None:
    """workloads/scalesim_resnet18.csv: ResNet-18's convs on padded inputs and the fc as a
    1x1 conv; it has the layer table's weights (no batchnorm, no fc bias) and the same
    forward and dW MACs."""
    csv_workload, csv_infos = load_model(REPO / "workloads" / "scalesim_resnet18.csv")
    table, table_infos = load_model(REPO / "workloads" / "resnet18.yaml")
    graph = lower(table_infos, table, 1, WordBytesSpec(), StridedDx.SKIP_ZEROS)
    weights = sum(p.weight.elements for p in graph.parameters if p.kind is ParamKind.WEIGHT)
    from_csv, from_table = model_stats(csv_workload, csv_infos), model_stats(table, table_infos)
    assert from_csv.params == weights == 11_678_912
    assert from_table.params == 11_689_512  # plus 9,600 batchnorm and 1,000 fc bias
    assert from_csv.forward_macs == from_table.forward_macs == 1_814_073_344


def test_shipped_bert_layer_topology() -> None:
    """workloads/scalesim_bert_layer.csv: a BERT-base layer's four weight GEMMs, 128 tokens."""
    stats = model_stats(*load_model(REPO / "workloads" / "scalesim_bert_layer.csv"))
    weights = 768 * 2304 + 768 * 768 + 2 * 768 * 3072
    assert stats.params == weights == 7_077_888
    assert stats.forward_macs == 128 * weights
    assert stats.training_macs == 2 * 128 * weights + 128 * (weights - 768 * 2304)


def test_a_suite_model_may_be_a_topology(tmp_path: Path) -> None:
    """A suite drops a ``workload_variant`` its topology model does not define."""
    from accelsim.config.loader import parse_sets
    from accelsim.driver.inputs import SuiteEntry, suite_inputs

    path = _write(tmp_path, "gemms.csv", GEMM_CSV)
    inputs = suite_inputs(SMOKE, SuiteEntry("g", path), parse_sets(["workload_variant=cifar10"]))
    assert (inputs.workload.name, inputs.run.workload_variant) == ("gemms", None)
