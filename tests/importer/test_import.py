"""``accelsim import``: ONNX graphs (the committed graph-only fixtures) -> layer tables.

Every fixture is a torchvision or Hugging Face model (or our GPT-2) exported in
training mode with random weights and its constants' data stripped
(``scripts/export_onnx_fixtures.py``). Imported, each must have the hand table's
parameters, forward MACs and training step (GEMMs and MACs per phase): they agree
exactly. Needs only ``onnx``.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("onnx")

import onnx

import accelsim
from accelsim import cli
from accelsim.config.hardware import WordBytesSpec
from accelsim.config.run import StridedDx
from accelsim.errors import WorkloadError
from accelsim.graph.ops import GemmOp, VectorOp
from accelsim.importer.model_import import import_model
from accelsim.lowering.infer import infer_shapes, load_model
from accelsim.lowering.stats import model_stats
from accelsim.lowering.step import lower
from accelsim.workload import model as wm
from tests.conftest import ROOT as REPO
from tests.importer.tiny_graph import tiny_graph

FIXTURES = REPO / "tests" / "fixtures" / "onnx"
SUITE_MODELS = [
    "alexnet",
    "vgg13",
    "vgg16",
    "resnet18",
    "resnet34",
    "resnet50",
    "resnet101",
    "resnet152",
    "mobilenet_v2",
    "densenet121",
    "inception_v3",
    "bert_base",
]


def _step(workload: wm.Workload) -> tuple[Counter[str], Counter[str]]:
    """GEMMs and their MACs per phase of the lowered step at batch 1."""
    infos = infer_shapes(workload, workload.name)
    step = lower(infos, workload, 1, WordBytesSpec(), StridedDx.SKIP_ZEROS)
    count: Counter[str] = Counter()
    macs: Counter[str] = Counter()
    for op in step.ops:
        if isinstance(op, GemmOp):
            count[op.phase.value] += 1
            macs[op.phase.value] += op.macs
    return count, macs


@pytest.mark.parametrize("name", SUITE_MODELS)
def test_imported_suite_model_matches_its_hand_table(name: str) -> None:
    imported = import_model(FIXTURES / f"{name}.onnx.gz").workload
    hand, hand_infos = load_model(REPO / "workloads" / f"{name}.yaml")
    ours = model_stats(imported, infer_shapes(imported, name))
    theirs = model_stats(hand, hand_infos)
    assert ours.params == theirs.params
    assert ours.forward_macs == theirs.forward_macs
    assert ours.training_macs == theirs.training_macs
    assert _step(imported) == _step(hand)


def test_resnet18_counts_by_hand() -> None:
    """torchvision's ResNet-18: 11,689,512 parameters, 1,814,073,344 forward MACs; 21
    GEMMs forward (20 convs, the FC), 21 weight gradients, 26 input gradients (the
    strided 3x3 convs' dX in four stride phases: 3 extra each, conv1's none)."""
    workload = import_model(FIXTURES / "resnet18.onnx.gz").workload
    stats = model_stats(workload, infer_shapes(workload, "resnet18"))
    assert (stats.params, stats.forward_macs) == (11_689_512, 1_814_073_344)
    count, _ = _step(workload)
    assert count == Counter({"fwd": 21, "bwd_weight": 21, "bwd_input": 26})


def test_imported_table_validates_like_a_hand_written_one(tmp_path: Path) -> None:
    out = tmp_path / "resnet18.yaml"
    result = import_model(FIXTURES / "resnet18.onnx.gz")
    out.write_text(result.text, encoding="utf-8")
    loaded, _ = load_model(out)
    assert loaded == result.workload
    head = result.text.splitlines()
    assert head[:3] == [
        f"# Imported by accelsim {accelsim.__version__} from resnet18.onnx.gz (ONNX, opset 20,"
        " by pytorch 2.14.1+cu130).",
        "# The graph says: torchvision.models.resnet18(); random weights, constant data stripped",
        "# Settings: input shape image 3x224x224 (from the graph); unsupported ops: error;"
        " loss: cross_entropy.",
    ]
    assert "  - {name: layer1.0.add, kind: add, inputs: [layer1.0.bn2, maxpool]}" in head
    assert head[-1] == "  - {name: loss, kind: cross_entropy}"


def test_imported_resnet18_runs_to_the_hand_tables_cycles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Imported to a file or read as the run's workload, ResNet-18 costs what the hand
    table costs."""
    out = tmp_path / "resnet18.yaml"
    out.write_text(import_model(FIXTURES / "resnet18.onnx.gz").text, encoding="utf-8")
    settings = ["batch_size=2"]
    imported = accelsim.simulate("configs/runs/default.yaml", [*settings, f"workload={out}"])
    hand = accelsim.simulate("configs/runs/default.yaml", settings)
    ours, theirs = imported.to_dict(), hand.to_dict()
    assert ours["total_cycles"] == theirs["total_cycles"] == 4_441_904
    for key in ("macs", "vector_ops", "dram_bytes", "energy_pj", "ops"):
        assert ours[key] == theirs[key]
    # The fixture itself as the workload, relative to the working directory.
    monkeypatch.chdir(REPO)
    fixture = "tests/fixtures/onnx/resnet18.onnx.gz"
    run = ["run", "configs/runs/default.yaml", "--out", str(tmp_path / "runs")]
    assert cli.main([*run, "--set", "batch_size=2", "--set", f"workload={fixture}"]) == 0
    summary = json.loads((tmp_path / "runs" / "resnet18_default" / "summary.json").read_text())
    for key in ("total_cycles", "macs", "vector_ops", "dram_bytes", "energy_pj", "ops"):
        assert summary[key] == ours[key]
    provenance = summary["workload_provenance"]
    assert provenance["source"] == f"{ONNX_ORIGIN}, imported by accelsim {accelsim.__version__}"
    assert provenance["notes"] == RESNET18_NOTES
    assert f"workload from {provenance['source']}, assuming:" in capsys.readouterr().out


ONNX_ORIGIN = "resnet18.onnx.gz (ONNX, opset 20, by pytorch 2.14.1+cu130)"
RESNET18_NOTES = [
    "imported as accelsim import does by default: input shape image 3x224x224 (from the"
    " graph); unsupported ops: error; loss: cross_entropy",
    "views (reshape, transpose, squeeze, cast) are not layers",
    "loss: cross_entropy appended after the graph's output",
]


def test_models_reads_an_onnx_file_as_its_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "resnet18.yaml"
    out.write_text(import_model(FIXTURES / "resnet18.onnx.gz").text, encoding="utf-8")
    monkeypatch.chdir(REPO)
    fixture = "tests/fixtures/onnx/resnet18.onnx.gz"
    assert cli.main(["models", fixture, str(out), "--json"]) == cli.EXIT_OK
    direct, written = json.loads(capsys.readouterr().out)
    keys = ("name", "input", "params", "forward_macs", "training_macs", "layers")
    assert (
        {k: direct[k] for k in keys}
        == {k: written[k] for k in keys}
        == {
            "name": "resnet18",
            "input": "chw 3x224x224",
            "params": 11_689_512,
            "forward_macs": 1_814_073_344,
            "training_macs": 5_324_206_080,
            "layers": 70,
        }
    )
    assert direct["source"] == written["source"]
    assert (direct["notes"], written["notes"]) == (RESNET18_NOTES, [])
    assert cli.main(["check", fixture]) == cli.EXIT_OK
    assert capsys.readouterr().out == f"{fixture}: ok (workload 'resnet18', 70 layers)\n"


def test_an_unreadable_onnx_workload_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.ONNX.GZ"  # any letter case
    bad.write_text("layers: []")
    assert cli.main(["models", str(bad)]) == cli.EXIT_INPUT
    assert capsys.readouterr().err == (
        f"{bad}: not a readable ONNX file: Not a gzipped file (b'la')\n"
    )


def test_bert_attention_becomes_one_layer_per_block() -> None:
    result = import_model(FIXTURES / "bert_base.onnx.gz")
    attention = [x for x in result.workload.layers if isinstance(x, wm.Attention)]
    assert [x.name for x in attention] == [
        f"model.bert.encoder.layer.{i}.attention" for i in range(12)
    ]
    assert {(x.heads, x.bias, x.causal) for x in attention} == {(12, True, False)}
    assert "#   - attention (12 heads, 24 nodes each; the dropout on its probabilities not" in (
        result.text
    )


def test_gpt2_small_workload_is_the_fixtures_import() -> None:
    """The shipped GPT-2 small is `accelsim import` of its fixture, unedited: causal
    attention, the output layer tied to the token table, 124,439,808 parameters."""
    shipped = REPO / "workloads" / "gpt2_small.yaml"
    result = import_model(FIXTURES / "gpt2_small.onnx.gz", name="gpt2_small")
    assert shipped.read_text() == result.text
    workload = result.workload
    stats = model_stats(workload, infer_shapes(workload, "gpt2_small"))
    # Per token and block: Q, K, V, output 4 x 768^2, MLP 2 x 768 x 3072 = 7,077,888,
    # x 12 blocks x 1,024 tokens; QK^T and AV 2 x 12 heads x 1,024^2 x 64 per block;
    # the output layer 1,024 x 768 x 50,257.
    assert stats.forward_macs == 7_077_888 * 12 * 1024 + 2 * 12 * 1024**2 * 64 * 12 + (
        1024 * 768 * 50_257
    )
    # wte 50,257 x 768 + wpe 1,024 x 768 + 12 x 7,087,872 + ln_f 1,536; the head adds none.
    assert stats.params == 38_597_376 + 786_432 + 12 * 7_087_872 + 1_536 == 124_439_808
    head = workload.layers[-2]
    assert isinstance(head, wm.Linear) and head.tied_to == "wte"
    attention = [x for x in workload.layers if isinstance(x, wm.Attention)]
    assert len(attention) == 12 and all(x.causal for x in attention)


def test_gpt2_run_file_runs() -> None:
    summary = accelsim.simulate("configs/runs/gpt2_small.yaml", ["batch_size=1"]).to_dict()
    assert summary["parameters"] == 124_439_808
    # Forward MACs of one 1,024-token sequence (test above), and dX and dW.
    assert summary["macs"]["fwd"] == 145_824_153_600


def test_clip_to_0_6_is_relu6_and_other_clips_are_errors(tmp_path: Path) -> None:
    path = tmp_path / "tiny.onnx"
    onnx.save(tiny_graph("Clip", (0.0, 6.0)), path)
    odd = import_model(path).workload.layers[1]
    assert odd == wm.Activation(name="odd", kind="activation", function="relu6")
    onnx.save(tiny_graph("Clip", (-1.0, 1.0)), path)
    with pytest.raises(WorkloadError) as caught:
        import_model(path)
    assert [str(p) for p in caught.value.problems] == [
        f"{path}: nodes[/odd/Clip]: op type Clip has no layer kind in this form (attributes,"
        " constant operands or shapes); --unsupported vector maps it to a generic vector op"
        " (got 'Clip')"
    ]


def test_an_op_without_a_layer_kind_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "tiny.onnx"
    onnx.save(tiny_graph("Sin"), path)
    with pytest.raises(WorkloadError) as caught:
        import_model(path)
    assert [str(p) for p in caught.value.problems] == [
        f"{path}: nodes[/odd/Sin]: op type Sin has no layer kind; --unsupported vector maps it"
        " to a generic vector op (got 'Sin')"
    ]


def test_unsupported_vector_sizes_the_op_from_its_shapes(tmp_path: Path) -> None:
    path = tmp_path / "tiny.onnx"
    onnx.save(tiny_graph("Sin"), path)
    result = import_model(path, unsupported="vector")
    odd = result.workload.layers[1]
    assert odd == wm.VectorLayer(name="odd", kind="vector", op="Sin", layout="chw", shape=[4, 8, 8])
    assert (
        "#   - generic vector layers (an op per element; no layer kind of their own): odd (Sin)"
        in (result.text.splitlines())
    )
    infos = infer_shapes(result.workload, "tiny")
    step = lower(infos, result.workload, 1, WordBytesSpec(), StridedDx.SKIP_ZEROS)
    vector = [op for op in step.ops if isinstance(op, VectorOp) and op.layer == "odd"]
    # One op per output element forward (4 x 8 x 8) and per input element backward.
    assert sorted(op.elements for op in vector) == [256, 256]


def test_cli_import_writes_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "alexnet.yaml"
    model = str(FIXTURES / "alexnet.onnx.gz")
    assert cli.main(["import", model, "--out", str(out)]) == cli.EXIT_OK
    assert capsys.readouterr().out == (
        f"wrote {out}: 22 layers, 61,100,840 parameters, 714,188,480 forward MACs per sample"
        " (chw 3x224x224)\n"
    )
    assert cli.main(["check", str(out)]) == cli.EXIT_OK
    assert cli.main(["import", model, "--out", str(out)]) == cli.EXIT_INPUT
    assert capsys.readouterr().err == f"{out}: exists; pass --force to replace it\n"


def test_tied_to_must_name_an_earlier_embedding_of_the_right_size() -> None:
    workload = wm.Workload.model_validate(
        {
            "name": "tied",
            "input": {"kind": "tokens", "length": 4},
            "layers": [
                {"name": "emb", "kind": "embedding", "num_embeddings": 10, "embedding_dim": 6},
                {"name": "head", "kind": "linear", "out_features": 9, "tied_to": "emb"},
                {"name": "loss", "kind": "cross_entropy"},
            ],
        }
    )
    with pytest.raises(WorkloadError) as caught:
        infer_shapes(workload, "tied.yaml")
    assert [str(p) for p in caught.value.problems] == [
        "tied.yaml: layers[1].tied_to: the table is 10 x 6; this layer's weight is 9 x 6"
        " (got 'emb')"
    ]


def test_a_tied_layer_uses_the_table_and_adds_its_gradient_first() -> None:
    """Tokens 4 -> embedding 10 x 6 -> linear tied to it -> loss: one parameter (the
    table, 60 elements); the linear's dW GEMM (10 x 6, over 4 tokens) writes the table's
    gradient, and the embedding's scatter-add then reads it."""
    workload = wm.Workload.model_validate(
        {
            "name": "tied",
            "input": {"kind": "tokens", "length": 4},
            "layers": [
                {"name": "emb", "kind": "embedding", "num_embeddings": 10, "embedding_dim": 6},
                {
                    "name": "head",
                    "kind": "linear",
                    "out_features": 10,
                    "bias": False,
                    "tied_to": "emb",
                },
                {"name": "loss", "kind": "cross_entropy"},
            ],
        }
    )
    step = lower(infer_shapes(workload, "tied"), workload, 1, WordBytesSpec(), StridedDx.SKIP_ZEROS)
    (table,) = step.parameters
    assert (table.weight.name, table.weight.elements) == ("emb.W", 60)
    gemms = {op.name: op for op in step.ops if isinstance(op, GemmOp)}
    assert gemms["head.fwd"].b is table.weight
    dw = gemms["head.dw"]
    assert (dw.m, dw.n, dw.k, dw.c) == (10, 6, 4, table.gradient)
    scatter = step.ops[table.grad_op]
    assert isinstance(scatter, VectorOp) and scatter.name == "emb.dw"
    assert table.gradient in [access.tensor for access in scatter.reads]
    assert dw.op_id in {i for ids in scatter.sources for i in ids}
