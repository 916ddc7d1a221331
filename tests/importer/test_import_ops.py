"""``accelsim import`` of the ops torch.nn blocks and the zoo write: attention
as ``nn.MultiheadAttention`` and ``nn.TransformerEncoderLayer`` export it, LSTMs,
in-place dropout, stochastic depth, hard sigmoid and swish, ``Erf`` GELU, asymmetric
padding and ``ceil_mode`` pooling, a vision transformer's class token and position
embedding.

The ``torch_*`` fixtures are torch.nn blocks exported by
``scripts/export_op_fixtures.py`` (random weights, data stripped); each parameter
count is torch's ``sum(p.numel() for p in block.parameters())``, computed once with
torch 2.13 and written here, and each MAC count is worked out by hand beside it.
Needs only ``onnx``.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("onnx")

import onnx
from onnx import TensorProto, helper

from accelsim.config.hardware import WordBytesSpec
from accelsim.config.run import StridedDx
from accelsim.errors import WorkloadError
from accelsim.graph.ops import VectorOp
from accelsim.importer.model_import import import_model
from accelsim.lowering.infer import infer_shapes
from accelsim.lowering.stats import model_stats
from accelsim.lowering.step import lower
from accelsim.workload import model as wm
from accelsim.workload.inputs import SequenceInput
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "onnx"


def _counts(workload: wm.Workload) -> tuple[int, int]:
    stats = model_stats(workload, infer_shapes(workload, workload.name))
    return stats.params, stats.forward_macs


def _rows(workload: wm.Workload) -> list[dict[str, Any]]:
    return [layer.model_dump(exclude_defaults=True) for layer in workload.layers]


def _import(name: str) -> wm.Workload:
    return import_model(FIXTURES / f"{name}.onnx.gz").workload


@pytest.mark.parametrize("causal", [False, True])
def test_multihead_attention_is_one_attention_layer(causal: bool) -> None:
    """``nn.MultiheadAttention(64, 4, batch_first=True)`` on 16 float vectors: its packed
    in-projection viewed as three, each part taken by a ``Gather``. torch: 16,640
    parameters (in-projection 3 x 64 x 64 + 192, out-projection 64 x 64 + 64)."""
    workload = _import("torch_mha_causal" if causal else "torch_mha")
    assert workload.input == SequenceInput(kind="sequence", length=16, features=64)
    attention = {"name": "attn", "kind": "attention", "heads": 4}
    assert _rows(workload)[0] == ({**attention, "causal": True} if causal else attention)
    # Q, K, V: 3 x 16 x 64 x 64 = 196,608; scores and their product with V: 2 x 4
    # heads x 16 x 16 x 16 = 32,768; out-projection 16 x 64 x 64 = 65,536.
    assert _counts(workload) == (16_640, 196_608 + 32_768 + 65_536)


def test_scaled_dot_product_attention_under_a_boolean_mask() -> None:
    """Q, K, V linears (64 -> 64) and ``scaled_dot_product_attention`` with a boolean
    ``tril`` mask (its ``IsNaN`` guard after the softmax): one causal attention. torch:
    4 x (64 x 64 + 64) = 16,640 parameters; MACs as ``nn.MultiheadAttention``'s."""
    rows = _rows(_import("torch_sdpa_masked"))
    assert rows[0] == {"name": "attention", "kind": "attention", "heads": 4, "causal": True}
    assert _counts(_import("torch_sdpa_masked")) == (16_640, 294_912)


def test_transformer_encoder_layer_imports_with_its_attention_and_mlp() -> None:
    """``nn.TransformerEncoderLayer(64, 4, 256, batch_first=True, activation="gelu")``:
    torch 49,984 parameters (attention 16,640, linear1 16,640, linear2 16,448, two
    layernorms 256)."""
    workload = _import("torch_encoder_layer")
    kinds = [row["kind"] for row in _rows(workload)]
    assert kinds == [
        "attention",
        "dropout",
        "add",
        "layernorm",
        "linear",
        "activation",
        "dropout",
        "linear",
        "dropout",
        "add",
        "layernorm",
        "cross_entropy",
    ]
    # Attention 294,912 (above); linear1 and linear2 16 x 64 x 256 = 262,144 each.
    assert _counts(workload) == (49_984, 294_912 + 2 * 262_144)


def test_bidirectional_two_layer_lstm_is_two_lstm_layers_per_layer() -> None:
    """``nn.LSTM(64, 32, num_layers=2, batch_first=True, bidirectional=True)``: torch
    50,176 parameters (per layer and direction 4 x 32 x (64 + 32) + 2 x 128 = 12,544;
    the second layer reads both directions' 2 x 32 = 64 features)."""
    workload = _import("torch_lstm")
    assert _rows(workload)[:3] == [
        {"name": "lstm.forward", "kind": "lstm", "hidden_size": 32},
        {"name": "lstm.reverse", "kind": "lstm", "hidden_size": 32, "inputs": ["input"]},
        {"name": "lstm.concat", "kind": "concat", "inputs": ["lstm.forward", "lstm.reverse"]},
    ]
    # Per step and direction a gates GEMM 4 x 32 x (64 + 32) = 12,288; 16 steps, two
    # directions, two layers.
    assert _counts(workload) == (50_176, 12_288 * 16 * 2 * 2)


@pytest.mark.parametrize("block", ["torch_encoder_layer", "torch_lstm"])
def test_a_sequence_first_export_is_read_as_its_sequence(block: str) -> None:
    """The same block with ``batch_first=False``, exported as ``(16, 1, 64)``: read batch
    first it would be 16 samples of one token; its attention's scores (16 x 16) and its
    LSTM's input (sequence first by ONNX's definition) say the first axis is the
    sequence. The table, parameters and MACs are the batch-first export's."""
    first = import_model(FIXTURES / f"{block}_seq_first.onnx.gz")
    assert first.workload.input == SequenceInput(kind="sequence", length=16, features=64)
    assert _rows(first.workload) == _rows(_import(block))
    assert _counts(first.workload) == _counts(_import(block))
    assert (
        "#   - input: sequence-first, (sequence 16, batch 1, features): read as sequences of 16"
        in first.text
    )


def test_bidirectional_two_layer_gru_is_two_gru_layers_per_layer() -> None:
    """``nn.GRU(64, 32, num_layers=2, batch_first=True, bidirectional=True)``: torch
    37,632 parameters (per layer and direction 3 x 32 x (64 + 32) + 2 x 96 = 9,408)."""
    workload = _import("torch_gru")
    assert [row["kind"] for row in _rows(workload)] == [
        *["gru", "gru", "concat"] * 2,
        "cross_entropy",
    ]
    # Per step and direction a gates GEMM 3 x 32 x (64 + 32) = 9,216; 16 steps, two
    # directions, two layers.
    assert _counts(workload) == (37_632, 9_216 * 16 * 2 * 2)
    infos = infer_shapes(workload, workload.name)
    step = lower(infos, workload, 1, WordBytesSpec(), StridedDx.SKIP_ZEROS)
    cells = {op.name: op.ops_per_element for op in step.ops if isinstance(op, VectorOp)}
    assert cells["lstm.forward.cell.t0"] == 17 and cells["lstm.forward.cell.bwd.t0"] == 22


def test_in_place_dropout_stochastic_depth_and_hard_activations() -> None:
    """A conv (3 -> 8, 3x3), ``Dropout(0.2, inplace=True)``, a hard-sigmoid gate of a
    1x1 conv, torchvision-style stochastic depth (rate 0.1), a hard swish and a
    classifier: torch 386 parameters (224 + 72 + 90)."""
    workload = _import("torch_chains")
    rows = {row["name"]: row for row in _rows(workload)}
    assert rows["drop.mul"] == {"name": "drop.mul", "kind": "dropout", "rate": 0.2}
    assert rows["gate"]["function"] == "hardsigmoid"
    assert rows["depth.mul"] == {"name": "depth.mul", "kind": "stochastic_depth", "rate": 0.1}
    assert rows["act"]["function"] == "hardswish"
    # conv 8 x 8 x 8 x 27 = 13,824; squeeze 8 x 8 x 8 x 8 = 4,096; linear 8 x 10 = 80.
    assert _counts(workload) == (386, 13_824 + 4_096 + 80)


def test_vision_transformer_patches_class_token_and_position_embedding() -> None:
    """torchvision's ``VisionTransformer`` in small (8x8 patches of 3x32x32, width 64,
    4 heads, MLP 128, one block): torch 47,754 parameters (conv_proj 12,352, class
    token 64, position embedding 17 x 64 = 1,088, three layernorms 384, attention
    16,640, MLP 16,576, head 650)."""
    workload = _import("torch_tiny_vit")
    rows = _rows(workload)
    assert rows[1:4] == [
        {"name": "view", "kind": "bridge", "shape": [16, 64]},
        {"name": "cat", "kind": "prepend_tokens"},
        {"name": "add", "kind": "add_parameter"},
    ]
    # conv_proj 16 patches x 64 x 192 = 196,608; attention on 17 tokens: Q, K, V
    # 3 x 17 x 64 x 64 = 208,896, scores and their product with V 2 x 4 x 17 x 17 x 16
    # = 36,992, out-projection 17 x 64 x 64 = 69,632; MLP 2 x 17 x 64 x 128 = 278,528;
    # head 640.
    macs = 196_608 + 208_896 + 36_992 + 69_632 + 278_528 + 640
    assert _counts(workload) == (47_754, macs)
    infos = infer_shapes(workload, workload.name)
    step = lower(infos, workload, 2, WordBytesSpec(), StridedDx.SKIP_ZEROS)
    learned = {
        op.name: op.elements for op in step.ops if isinstance(op, VectorOp) and op.layer == "cat"
    }
    # 2 samples: 17 x 64 = 1,088 elements out each; the class token's gradient sums
    # 2 x 64 elements, dX reads 2 x 16 x 64.
    assert learned == {"cat.fwd": 2_176, "cat.dp": 128, "cat.bwd": 2_048}


def test_convnext_channels_last_layers_are_map_layers() -> None:
    """torchvision's ``ConvNeXt`` in small (a 4x4 stem to 32 channels, one block, a
    2x2 downsampling to 64, the classifier; 3x32x32): the layernorms and linears on
    channels-last maps are layernorms and 1x1 convs of the maps, the layer scale a
    ``scale_parameter``. torch: 20,778 parameters (stem 1,568 + 64, block 1,600 +
    64 + 4,224 + 4,128 + 32, downsampling 64 + 8,256, classifier 128 + 650)."""
    workload = _import("torch_tiny_convnext")
    rows = {row["name"]: row for row in _rows(workload)}
    assert rows["block.norm"] == {"name": "block.norm", "kind": "layernorm"}
    assert rows["block.pwconv1"] == {
        "name": "block.pwconv1",
        "kind": "conv2d",
        "out_channels": 128,
        "kernel": 1,
        "bias": True,
    }
    assert rows["block.mul"] == {"name": "block.mul", "kind": "scale_parameter"}
    assert rows["block.stochastic_depth.mul"]["kind"] == "stochastic_depth"
    # stem 8 x 8 x 32 x 48 = 98,304; depthwise 7x7 8 x 8 x 32 x 49 = 100,352; the two
    # 1x1s 8 x 8 x 32 x 128 = 262,144 each; downsampling 4 x 4 x 64 x 128 = 131,072;
    # head 640.
    macs = 98_304 + 100_352 + 2 * 262_144 + 131_072 + 640
    assert _counts(workload) == (20_778, macs)


def _window_graph(op: str, **attrs: Any) -> onnx.ModelProto:
    """input 1x3x10x10 -> ``op`` (a 3x3 window of stride 2, ``attrs``) -> Flatten -> Gemm."""
    conv = op == "Conv"
    inputs = ["x", "w"] if conv else ["x"]
    channels = 4 if conv else 3
    nodes = [
        helper.make_node(op, inputs, ["c"], name=f"/win/{op}", kernel_shape=[3, 3], **attrs),
        helper.make_node("Flatten", ["c"], ["f"], name="/Flatten"),
        helper.make_node("Gemm", ["f", "fw"], ["y"], name="/fc/Gemm", transB=1),
    ]
    inits = [
        helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 3, 3], [0.0] * 108),
        helper.make_tensor("fw", TensorProto.FLOAT, [2, channels * 25], [0.0] * channels * 50),
    ]
    graph = helper.make_graph(
        nodes,
        "window",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 10, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
        inits[:1] * conv + inits[1:],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


def test_asymmetric_padding_and_ceil_mode_keep_the_output_size(tmp_path: Any) -> None:
    """A stride-2 3x3 conv padded (0, 0, 1, 1), as TensorFlow's ``same``, and a
    ``ceil_mode`` max pool on 10x10: both give 5x5, as padding 1 does (none gives 4x4).
    A stride-1 conv padded (0, 0, 1, 1) gives 9x9, which no symmetric padding gives
    (0: 8x8, 1: 10x10): an error naming the node."""
    for op, attrs in (
        ("Conv", {"pads": [0, 0, 1, 1], "strides": [2, 2]}),
        ("MaxPool", {"ceil_mode": 1, "strides": [2, 2]}),
    ):
        path = tmp_path / f"{op}.onnx"
        onnx.save(_window_graph(op, **attrs), path)
        result = import_model(path)
        window = _rows(result.workload)[0]
        assert window["padding"] == 1 and window.get("stride", 2) == 2
        form = "ceil_mode" if op == "MaxPool" else "asymmetric padding"
        assert f"#   - /win/{op}: {form} written as padding 1, the same output size" in (
            result.text
        )
    onnx.save(_window_graph("Conv", pads=[0, 0, 1, 1], strides=[1, 1]), tmp_path / "bad.onnx")
    with pytest.raises(WorkloadError, match=r"nodes\[/win/Conv\]: op type Conv has no layer"):
        import_model(tmp_path / "bad.onnx")


def test_erf_gelu_is_one_gelu(tmp_path: Any) -> None:
    """``x / sqrt(2)``, ``Erf``, ``+ 1``, ``* x``, ``* 0.5`` (GELU before opset 20)."""
    consts = {"r2": 2**0.5, "one": 1.0, "half": 0.5}
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="/fc1/MatMul"),
        helper.make_node("Div", ["h", "r2"], ["d"], name="/act/Div"),
        helper.make_node("Erf", ["d"], ["e"], name="/act/Erf"),
        helper.make_node("Add", ["e", "one"], ["a"], name="/act/Add"),
        helper.make_node("Mul", ["h", "a"], ["m"], name="/act/Mul"),
        helper.make_node("Mul", ["m", "half"], ["g"], name="/act/Mul_1"),
        helper.make_node("MatMul", ["g", "w2"], ["y"], name="/fc2/MatMul"),
    ]
    inits = [
        helper.make_tensor("w", TensorProto.FLOAT, [8, 16], [0.0] * 128),
        helper.make_tensor("w2", TensorProto.FLOAT, [16, 4], [0.0] * 64),
        *(helper.make_tensor(n, TensorProto.FLOAT, [], [v]) for n, v in consts.items()),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        inits,
    )
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "g.onnx"
    )
    rows = _rows(import_model(tmp_path / "g.onnx").workload)
    assert [row["kind"] for row in rows] == ["linear", "activation", "linear", "cross_entropy"]
    assert rows[1] == {"name": "act", "kind": "activation", "function": "gelu"}


def test_adaptive_pool_to_a_size_that_does_not_divide_is_one_layer() -> None:
    """``nn.AdaptiveAvgPool2d(5)`` of a 14 x 14 map: the exporter writes its windows
    out (a ``Gather`` per tap, their sum, a division); the module's nodes are one
    ``adaptive_avgpool``. Conv 14 x 14 x 8 x 27 = 42,336 MACs and 224 parameters,
    linear 200 x 10 = 2,000 MACs and 2,010 parameters."""
    workload = _import("torch_adaptive_pool")
    assert [(row["name"], row["kind"]) for row in _rows(workload)] == [
        ("0", "conv2d"),
        ("1", "adaptive_avgpool"),
        ("2.view", "flatten"),
        ("3", "linear"),
        ("loss", "cross_entropy"),
    ]
    assert _rows(workload)[1]["output"] == 5
    assert _counts(workload) == (2_234, 42_336 + 2_000)


def test_a_boolean_mask_input_is_read_as_a_constant() -> None:
    """``nn.TransformerEncoderLayer(64, 4, 256, batch_first=True)`` given a
    ``src_key_padding_mask`` as a second, boolean input: the mask is no input of the
    table (it selects, it adds no work), so the attention it masks is matched. The
    same parameters and MACs as the encoder layer without it (its ReLU costs no MAC)."""
    imported = import_model(FIXTURES / "torch_encoder_layer_padding_mask.onnx.gz")
    assert imported.workload.extra_inputs == {}
    assert [row["kind"] for row in _rows(imported.workload)][:2] == ["attention", "dropout"]
    assert _counts(imported.workload) == (49_984, 294_912 + 2 * 262_144)
    assert "#   - mask: a boolean mask input, read as a constant (it adds no work)" in imported.text
