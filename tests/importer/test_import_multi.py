"""``accelsim import`` of models with several inputs: each graph input an input of the
table (the first ``input``, the others ``extra_inputs`` named after the graph's), and
cross-attention (Q from one tensor, K and V from another) as one ``attention`` layer of
two inputs.

The ``torch_decoder_layer*`` fixtures are ``nn.TransformerDecoderLayer(64, 4, 256)``
exported by ``scripts/export_op_fixtures.py`` with a 16 x 64 target and a 32 x 64 memory
(random weights, data stripped), and ``torch_mha_cross`` ``nn.MultiheadAttention`` as
cross-attention; each parameter count is torch's ``sum(p.numel() for p in
block.parameters())``, computed once with torch 2.14 and written here, and each MAC count is worked out by hand beside it. Needs only ``onnx``
(but the last test, marked ``torch``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("onnx")

import onnx
from onnx import TensorProto, helper

from accelsim import cli
from accelsim.config.hardware import WordBytesSpec
from accelsim.config.run import StridedDx
from accelsim.errors import WorkloadError
from accelsim.graph.ops import GemmOp, Phase
from accelsim.importer.model_import import import_model
from accelsim.lowering.infer import infer_shapes
from accelsim.lowering.stats import model_stats
from accelsim.lowering.step import lower
from accelsim.workload import model as wm
from accelsim.workload.inputs import SequenceInput
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "onnx"
MEMORY = SequenceInput(kind="sequence", length=32, features=64)

SELF_MACS = 3 * 16 * 64 * 64 + 2 * 4 * 16 * 16 * 16 + 16 * 64 * 64
"""Self-attention on 16 x 64, 4 heads of 16: Q, K, V 3 x 16 x 64 x 64 = 196,608; the
scores and their product with V 2 x 4 x 16 x 16 x 16 = 32,768; out 16 x 64 x 64 = 65,536."""
CROSS_MACS = 16 * 64 * 64 + 32 * 128 * 64 + 2 * 4 * 16 * 32 * 16 + 16 * 64 * 64
"""Cross-attention of 16 queries to 32 memory positions: Q 16 x 64 x 64 = 65,536; K and V
32 x 128 x 64 = 262,144; the scores (16 x 32 per head) and their product with V 2 x 4 x
16 x 32 x 16 = 65,536; out 65,536."""
MLP_MACS = 2 * 16 * 64 * 256
"""linear1 and linear2, 16 x 64 x 256 = 262,144 each."""


def _rows(workload: wm.Workload) -> list[dict[str, Any]]:
    return [layer.model_dump(exclude_defaults=True) for layer in workload.layers]


@pytest.mark.parametrize("causal", [False, True])
def test_transformer_decoder_layer_imports_with_its_cross_attention(causal: bool) -> None:
    """torch: 66,752 parameters: self_attn and multihead_attn 16,640 each (in-projection
    3 x 64 x 64 + 192, out-projection 64 x 64 + 64), linear1 64 x 256 + 256 = 16,640,
    linear2 256 x 64 + 64 = 16,448, three layernorms 3 x 128 = 384."""
    name = "torch_decoder_layer_causal" if causal else "torch_decoder_layer"
    workload = import_model(FIXTURES / f"{name}.onnx.gz").workload
    assert workload.input == SequenceInput(kind="sequence", length=16, features=64)
    assert workload.extra_inputs == {"memory": MEMORY}
    rows = {row["name"].removeprefix("layer."): row for row in _rows(workload)}
    self_attn = {"kind": "attention", "heads": 4, **({"causal": True} if causal else {})}
    assert {k: v for k, v in rows["self_attn"].items() if k != "name"} == self_attn
    prefix = "layer." if causal else ""
    assert rows["multihead_attn"] == {
        "name": f"{prefix}multihead_attn",
        "kind": "attention",
        "heads": 4,
        "inputs": [f"{prefix}norm1", "memory"],
    }
    stats = model_stats(workload, infer_shapes(workload, name))
    assert stats.params == 16_640 * 2 + 16_640 + 16_448 + 384 == 66_752
    assert stats.forward_macs == SELF_MACS + CROSS_MACS + MLP_MACS == 1_277_952
    assert stats.input == "sequence 16x64 + memory sequence 32x64"


def test_a_sequence_first_decoder_layer_reads_both_inputs_sequence_first() -> None:
    """``nn.TransformerDecoderLayer(64, 4, 256)`` (``batch_first=False``) exported as
    ``(16, 1, 64)`` and ``(32, 1, 64)``: the batch-first layer's table, each input noted."""
    first = import_model(FIXTURES / "torch_decoder_layer_seq_first.onnx.gz")
    batch = import_model(FIXTURES / "torch_decoder_layer.onnx.gz").workload
    assert (first.workload.layers, first.workload.extra_inputs) == (
        batch.layers,
        batch.extra_inputs,
    )
    assert "memory: sequence-first, (sequence 32, batch 1, features)" in first.text


def test_multihead_attention_of_a_query_and_a_key_value_tensor() -> None:
    """``nn.MultiheadAttention(64, 4, kdim=48, vdim=48, batch_first=True)`` called as
    ``attn(q, kv, kv)`` on 16 x 64 queries and 32 x 48 keys and values. torch: 14,592
    parameters (Q 64 x 64 = 4,096, K and V 2 x 64 x 48 = 6,144, in-projection bias 192,
    out-projection 64 x 64 + 64 = 4,160)."""
    workload = import_model(FIXTURES / "torch_mha_cross.onnx.gz").workload
    assert workload.extra_inputs == {"kv": SequenceInput(kind="sequence", length=32, features=48)}
    assert _rows(workload)[0] == {
        "name": "attn",
        "kind": "attention",
        "heads": 4,
        "inputs": ["input", "kv"],
    }
    stats = model_stats(workload, infer_shapes(workload, "cross"))
    # Q 16 x 64 x 64 = 65,536; K and V 32 x 128 x 48 = 196,608; the scores and their
    # product with V 2 x 4 x 16 x 32 x 16 = 65,536; out 65,536.
    assert (stats.params, stats.forward_macs) == (14_592, 65_536 + 196_608 + 65_536 + 65_536)


@pytest.mark.parametrize(
    ("name", "widths", "params", "kv_macs"),
    [
        # Q 32 x 32, K and V 2 x 32 x 32, in-projection bias 96, out 32 x 32 + 32; K and V
        # 2 x 24 x 32 x 32.
        ("torch_mha_qkv", (32, 32), 1_024 + 2_048 + 96 + 1_056, 2 * 24 * 32 * 32),
        # kdim 24 and vdim 48: K 32 x 24 = 768, V 32 x 48 = 1,536; K 24 x 24 x 32 =
        # 18,432, V 24 x 48 x 32 = 36,864.
        ("torch_mha_qkv_widths", (24, 48), 1_024 + 768 + 1_536 + 96 + 1_056, 18_432 + 36_864),
    ],
)
def test_multihead_attention_of_queries_keys_and_values(
    name: str, widths: tuple[int, int], params: int, kv_macs: int
) -> None:
    """``nn.MultiheadAttention(32, 4, batch_first=True)`` (and with ``kdim=24,
    vdim=48``) called as ``attn(q, k, v)`` on 16 x 32 queries and 24 keys and values:
    one ``attention`` of three inputs. torch: 4,224 and 4,480 parameters."""
    imported = import_model(FIXTURES / f"{name}.onnx.gz")
    workload = imported.workload
    assert workload.input == SequenceInput(kind="sequence", length=16, features=32)
    assert workload.extra_inputs == {
        "k": SequenceInput(kind="sequence", length=24, features=widths[0]),
        "v": SequenceInput(kind="sequence", length=24, features=widths[1]),
    }
    assert _rows(workload)[0] == {
        "name": "attn",
        "kind": "attention",
        "heads": 4,
        "inputs": ["input", "k", "v"],
    }
    assert "attention (4 heads, keys and values from two tensors, 26 nodes each): attn" in (
        imported.text
    )
    stats = model_stats(workload, infer_shapes(workload, name))
    # Q 16 x 32 x 32 = 16,384; the scores and their product with V 2 x 4 heads x 16 x 24
    # x 8 = 24,576; out 16,384.
    assert (stats.params, stats.forward_macs) == (params, 16_384 + kv_macs + 24_576 + 16_384)
    assert (stats.params, stats.forward_macs) == (
        (4_224, 106_496) if name == "torch_mha_qkv" else (4_480, 112_640)
    )


def test_decoder_cross_attention_backward_gives_the_memory_no_gradient() -> None:
    workload = import_model(FIXTURES / "torch_decoder_layer.onnx.gz").workload
    infos = infer_shapes(workload, "decoder")
    step = lower(infos, workload, 1, WordBytesSpec(), StridedDx.SKIP_ZEROS)
    macs = {
        phase: sum(
            op.macs
            for op in step.ops
            if isinstance(op, GemmOp) and op.layer == "multihead_attn" and op.phase is phase
        )
        for phase in (Phase.BWD_INPUT, Phase.BWD_WEIGHT)
    }
    # Input gradients: out 65,536; dP, dV, dQ, dK 4 x 16 x 32 x 16 = 32,768 each; Q's
    # input (norm1) 65,536; none for K and V's input, the memory (a model input).
    assert macs[Phase.BWD_INPUT] == 65_536 + 4 * 32_768 + 65_536
    # Weight gradients: Wo 65,536, Wq 65,536, Wkv 128 x 64 x 32 = 262,144.
    assert macs[Phase.BWD_WEIGHT] == 65_536 + 65_536 + 262_144
    assert "multihead_attn.kv.dx" not in {op.name for op in step.ops}


def two_inputs(second: str = "enc out:0", length: int | str = 4) -> onnx.ModelProto:
    """``x`` 1 x 4 x 8 and ``second`` 1 x ``length`` x 6, each through a linear to 8
    features (``wx`` 8 x 8, ``wm`` 6 x 8), added."""
    nodes = [
        helper.make_node("MatMul", ["x", "wx"], ["a"], name="/px/MatMul"),
        helper.make_node("MatMul", [second, "wm"], ["b"], name="/pm/MatMul"),
        helper.make_node("Add", ["a", "b"], ["y"], name="/Add"),
    ]
    inits = [
        helper.make_tensor("wx", TensorProto.FLOAT, [8, 8], [0.0] * 64),
        helper.make_tensor("wm", TensorProto.FLOAT, [6, 8], [0.0] * 48),
    ]
    graph = helper.make_graph(
        nodes,
        "two",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8]),
            helper.make_tensor_value_info(second, TensorProto.FLOAT, [1, length, 6]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


def _save(tmp_path: Path, model: onnx.ModelProto) -> Path:
    path = tmp_path / "two.onnx"
    onnx.save(model, path)
    return path


def test_each_graph_input_is_an_input_of_the_table(tmp_path: Path) -> None:
    result = import_model(_save(tmp_path, two_inputs()))
    workload = result.workload
    # The second input's name made safe: no space or colon in a name.
    assert workload.extra_inputs == {
        "enc_out_0": SequenceInput(kind="sequence", length=4, features=6)
    }
    assert [(x.name, x.inputs) for x in workload.layers] == [
        ("px", None),
        ("pm", ["enc_out_0"]),
        ("add", ["px", "pm"]),
        ("loss", None),
    ]
    assert "extra_inputs: {enc_out_0: {kind: sequence, length: 4, features: 6}}" in result.text
    assert "input shape sequence 4x8, enc_out_0 sequence 4x6 (from the graph)" in result.text
    # Per sample: px 4 x 8 x 8 = 256, pm 4 x 6 x 8 = 192; 64 + 48 parameters.
    stats = model_stats(workload, infer_shapes(workload, "two"))
    assert (stats.params, stats.forward_macs) == (64 + 48, 256 + 192)


def test_a_second_input_named_input_is_numbered(tmp_path: Path) -> None:
    workload = import_model(_save(tmp_path, two_inputs("input"))).workload
    assert list(workload.extra_inputs) == ["input_2"]


def test_symbolic_inputs_take_an_input_shape_each(tmp_path: Path) -> None:
    path = _save(tmp_path, two_inputs(length="S"))
    with pytest.raises(WorkloadError) as caught:
        import_model(path)
    assert [str(p) for p in caught.value.problems] == [
        f"{path}: graph.input[1]: the input has symbolic dimensions: give them with"
        " --input-shape (got [1, 'S', 6])"
    ]
    with pytest.raises(WorkloadError) as caught:
        import_model(path, input_shape=(4, 8))
    assert [str(p) for p in caught.value.problems] == [
        f"{path}: graph.input: --input-shape given 1 times: give it once per model input, in"
        " the graph's order (got ['x', 'enc out:0'])"
    ]
    workload = import_model(path, input_shape=[(5, 8), (5, 6)]).workload
    assert workload.input == SequenceInput(kind="sequence", length=5, features=8)
    assert workload.extra_inputs["enc_out_0"] == SequenceInput(
        kind="sequence", length=5, features=6
    )


def test_the_command_takes_an_input_shape_per_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, out = _save(tmp_path, two_inputs(length="S")), tmp_path / "w.yaml"
    shapes = ["--input-shape", "5x8", "--input-shape", "5x6"]
    assert cli.main(["import", str(path), "--out", str(out), *shapes]) == 0
    # Per sample: px 5 x 8 x 8 = 320, pm 5 x 6 x 8 = 240.
    assert capsys.readouterr().out == (
        f"wrote {out}: 4 layers, 112 parameters, 560 forward MACs per sample (sequence 5x8 +"
        " enc_out_0 sequence 5x6)\n"
    )
    assert "extra_inputs: {enc_out_0: {kind: sequence, length: 5, features: 6}}" in (
        out.read_text()
    )


@pytest.mark.torch
def test_a_module_of_two_inputs_imports_as_its_fixture() -> None:
    """``nn.TransformerDecoderLayer`` exported from its code with one example per input
    (``--input-shape 16x64 --input-shape 32x64``) imports as the committed fixture."""
    torch = pytest.importorskip("torch")
    layer = torch.nn.TransformerDecoderLayer(64, 4, 256, batch_first=True)
    shapes = [(16, 64), (32, 64)]
    ours = import_model(layer, input_shape=shapes).workload
    committed = import_model(FIXTURES / "torch_decoder_layer.onnx.gz").workload
    assert (ours.layers, ours.extra_inputs) == (committed.layers, committed.extra_inputs)
    assert sum(p.numel() for p in layer.parameters()) == 66_752
    # Sequence-first (batch_first=False), the two inputs' lengths would be batches that
    # differ at (1, S, E): exported as (S, 1, E), it imports as the batch-first layer.
    first = import_model(torch.nn.TransformerDecoderLayer(64, 4, 256), input_shape=shapes)
    assert (first.workload.layers, first.workload.extra_inputs) == (ours.layers, ours.extra_inputs)
    assert "memory: sequence-first" in first.text


@pytest.mark.torch
def test_a_module_of_queries_keys_and_values_imports_as_its_fixture() -> None:
    """``nn.MultiheadAttention`` called on three inputs, exported from its code with
    ``--input-shape 16x32 --input-shape 24x32 --input-shape 24x32``."""
    torch = pytest.importorskip("torch")

    class Qkv(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.attn = torch.nn.MultiheadAttention(32, 4, batch_first=True)

        def forward(self, q: Any, k: Any, v: Any) -> Any:
            return self.attn(q, k, v, need_weights=False)[0]

    module = Qkv()
    ours = import_model(module, input_shape=[(16, 32), (24, 32), (24, 32)]).workload
    committed = import_model(FIXTURES / "torch_mha_qkv.onnx.gz").workload
    assert (ours.layers, ours.extra_inputs) == (committed.layers, committed.extra_inputs)
    assert sum(p.numel() for p in module.parameters()) == 4_224
