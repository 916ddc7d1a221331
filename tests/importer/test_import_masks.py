"""``accelsim import`` of a mask given as an integer or float input (Hugging Face's
``attention_mask``): read as a constant, no input of the table, the attention it masks
matched.

The ``hf_*_masked`` fixtures are Hugging Face models built from a config (2 layers,
width 64, 4 heads, feed-forward 256, a 1,000-token vocabulary, 64 positions; random
weights) called with ``input_ids`` and ``attention_mask`` of 16 tokens, exported by
``scripts/export_op_fixtures.py`` with transformers 5.24 and torch 2.14 (data
stripped); each parameter count is torch's ``sum(p.numel() for p in
model.parameters())``, computed once and written here, and each MAC count is worked
out by hand beside it. The other graphs are written here with the ``onnx`` helper
API. Needs only ``onnx`` (but the last two tests, marked ``torch``: they need torch and
transformers, and skip without them).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("onnx")

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from accelsim import cli
from accelsim.config.hardware import WordBytesSpec
from accelsim.config.run import StridedDx
from accelsim.errors import WorkloadError
from accelsim.graph.ops import GemmOp, Phase
from accelsim.importer.graph_view import GraphView
from accelsim.importer.mask_inputs import mask_inputs
from accelsim.importer.model_import import import_model
from accelsim.lowering.flash_attention import AttentionBudget
from accelsim.lowering.infer import infer_shapes
from accelsim.lowering.stats import model_stats
from accelsim.lowering.step import lower
from accelsim.workload.inputs import SequenceInput, TokenInput
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "onnx"

LAYER_MACS = 4 * 16 * 64 * 64 + 2 * 4 * 16 * 16 * 16 + 2 * 16 * 64 * 256
"""One layer at 16 tokens: Q, K, V and the output projection 4 x 16 x 64 x 64 =
262,144; the scores and their product with V 2 x 4 heads x 16 x 16 x 16 = 32,768; the
feed-forward linears 2 x 16 x 64 x 256 = 524,288 (the embeddings are lookups)."""
LAYER_PARAMS = 4 * (64 * 64 + 64) + 2 * 128 + (64 * 256 + 256) + (256 * 64 + 64)
"""One layer's 49,984 parameters: Q, K, V and the output projection with biases 16,640,
two layernorms 256, the feed-forward linears 16,640 + 16,448."""
EMBEDDINGS = 1000 * 64 + 64 * 64
"""The token and position embeddings: 64,000 + 4,096."""

HF = {
    # BERT: embeddings with token types (2 x 64) and their layernorm (128), no pooler.
    "hf_bert_masked": ("model.encoder.layer.{}.attention", False, 168_320),
    # GPT-2: a final layernorm (128); its attention causal, the mask built from
    # positions (keys' against queries', each from a Range).
    "hf_gpt2_masked": ("model.h.{}.attn", True, 168_192),
    # DistilBERT: the embeddings' layernorm (128).
    "hf_distilbert_masked": ("model.transformer.layer.{}.attention", False, 168_192),
}


@pytest.mark.parametrize("name", sorted(HF))
def test_a_hugging_face_attention_mask_is_read_as_a_constant(name: str) -> None:
    scope, causal, params = HF[name]
    imported = import_model(FIXTURES / f"{name}.onnx.gz")
    workload = imported.workload
    assert workload.input == TokenInput(kind="tokens", length=16)
    assert workload.extra_inputs == {}
    attentions = [x.model_dump(exclude_defaults=True) for x in workload.layers]
    attentions = [row for row in attentions if row["kind"] == "attention"]
    extra = {"causal": True} if causal else {}
    assert attentions == [
        {"name": scope.format(i), "kind": "attention", "heads": 4, **extra} for i in (0, 1)
    ]
    stats = model_stats(workload, infer_shapes(workload, name))
    assert params == EMBEDDINGS + 2 * LAYER_PARAMS + 128 + (128 if name == "hf_bert_masked" else 0)
    assert (stats.params, stats.forward_macs) == (params, 2 * LAYER_MACS)
    assert 2 * LAYER_MACS == 1_638_400
    assert "attention_mask: an integer input that only masks attention scores, read as" in (
        " ".join(imported.text.replace("#", "").split())
    )


def test_the_masked_attention_lowers_to_flash_attention_kernels() -> None:
    workload = import_model(FIXTURES / "hf_bert_masked.onnx.gz").workload
    infos = infer_shapes(workload, "bert")
    budget = AttentionBudget(1, 1, 1)
    step = lower(infos, workload, 1, WordBytesSpec(), StridedDx.SKIP_ZEROS, budget)
    gemms = {op.name: op for op in step.ops if isinstance(op, GemmOp)}
    for i in (0, 1):
        name = f"model.encoder.layer.{i}.attention"
        # Buffers that hold the smallest block, 8 queries: 2 query blocks of 16 keys
        # each, per head: 8 GEMMs of 8 x 16 x 16, the scores' 4 x 16 x 16 x 16 MACs.
        qk = gemms[f"{name}.qk.fwd"]
        assert (qk.m, qk.n, qk.k, qk.count) == (8, 16, 16, 8)
        assert f"{name}.qk.dkv" in gemms and f"{name}.softmax.fwd" not in gemms
    forward = sum(op.macs for op in gemms.values() if op.phase is Phase.FWD)
    # And the scores each backward kernel recomputes (forward GEMMs): 2 x 16,384 a layer.
    assert forward == 2 * LAYER_MACS + 2 * 2 * 16_384


S, W, M = 4, 8, 6
"""Tokens and width of the graphs written here, and the positions of a memory."""


def _graph(second: str = "", mask_type: int = TensorProto.INT64) -> onnx.ModelProto:
    """Token ids through an embedding, one single-head attention whose scores get the
    additive mask made from ``attention_mask`` (``(1 - mask) * -1e9``, unsqueezed), a
    classifier. ``second``: ``token_types`` adds a second input of token type ids, an
    embedding added to the tokens'; ``gate`` also multiplies the embedded tokens by the
    mask; ``cross`` takes K and V from a second input, ``memory`` (M x W floats), whose
    positions the mask masks (cross-attention). A float ``mask_type`` is an additive
    mask of its own (1 x 1 x S)."""
    f32 = TensorProto.FLOAT
    inits = [numpy_helper.from_array(np.zeros(s, np.float32), n) for n, s in _WEIGHTS.items()]
    inits += [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in _SCALARS.items()]
    inits.append(numpy_helper.from_array(np.array([1], np.int64), "axis1"))
    node = helper.make_node
    nodes = [node("Gather", ["table", "input_ids"], ["x0"], name="/embed/Gather")]
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, S])]
    keys = M if second == "cross" else S
    if second == "cross":
        inputs.append(helper.make_tensor_value_info("memory", f32, [1, M, W]))
    if mask_type == f32:
        inputs.append(helper.make_tensor_value_info("attention_mask", f32, [1, 1, S]))
        nodes.append(node("Identity", ["attention_mask"], ["additive"], name="/mask/Identity"))
    else:
        inputs.append(helper.make_tensor_value_info("attention_mask", mask_type, [1, keys]))
        nodes += [
            node("Cast", ["attention_mask"], ["m"], name="/mask/Cast", to=f32),
            node("Sub", ["one", "m"], ["inv"], name="/mask/Sub"),
            node("Mul", ["inv", "low"], ["low_m"], name="/mask/Mul"),
            node("Unsqueeze", ["low_m", "axis1"], ["additive"], name="/mask/Unsqueeze"),
        ]
    x = "x0"
    if second == "token_types":
        inputs.append(helper.make_tensor_value_info("token_type_ids", TensorProto.INT64, [1, S]))
        nodes += [
            node("Gather", ["types", "token_type_ids"], ["t"], name="/types/Gather"),
            node("Add", ["x0", "t"], ["x1"], name="/embed/Add"),
        ]
        x = "x1"
    if second == "gate":
        nodes += [
            node("Unsqueeze", ["m", "axis2"], ["m3"], name="/gate/Unsqueeze"),
            node("Mul", ["x0", "m3"], ["x1"], name="/gate/Mul"),
        ]
        inits.append(numpy_helper.from_array(np.array([2], np.int64), "axis2"))
        x = "x1"
    kv = "memory" if second == "cross" else x
    nodes += [
        node("MatMul", [x, "wq"], ["q"], name="/attn/q/MatMul"),
        node("MatMul", [kv, "wk"], ["k"], name="/attn/k/MatMul"),
        node("MatMul", [kv, "wv"], ["v"], name="/attn/v/MatMul"),
        node("Transpose", ["k"], ["kt"], name="/attn/Transpose", perm=[0, 2, 1]),
        node("MatMul", ["q", "kt"], ["scores"], name="/attn/MatMul"),
        node("Add", ["scores", "additive"], ["masked"], name="/attn/Add"),
        node("Softmax", ["masked"], ["probs"], name="/attn/Softmax", axis=-1),
        node("MatMul", ["probs", "v"], ["ctx"], name="/attn/MatMul_1"),
        node("MatMul", ["ctx", "wo"], ["y"], name="/attn/o/MatMul"),
    ]
    graph = helper.make_graph(
        nodes, "masked", inputs, [helper.make_tensor_value_info("y", f32, None)], inits
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


_WEIGHTS = {"table": (50, W), "types": (2, W), "wq": (W, W), "wk": (W, W), "wv": (W, W)}
_WEIGHTS["wo"] = (W, W)
_SCALARS = {"one": 1.0, "low": -1e9}


def _view(model: onnx.ModelProto) -> GraphView:
    return GraphView(onnx.shape_inference.infer_shapes(model), "g")


def test_an_input_that_only_masks_scores_is_a_mask() -> None:
    assert mask_inputs(_view(_graph())) == ("attention_mask",)
    assert mask_inputs(_view(_graph(mask_type=TensorProto.FLOAT))) == ("attention_mask",)


def test_token_type_ids_are_an_embedding_s_indices_and_stay_an_input() -> None:
    assert mask_inputs(_view(_graph("token_types"))) == ("attention_mask",)


def test_a_mask_of_the_keys_of_cross_attention_is_a_mask(tmp_path: Path) -> None:
    path = tmp_path / "cross.onnx"
    onnx.save(_graph("cross"), path)
    imported = import_model(path)
    workload = imported.workload
    assert workload.extra_inputs == {"memory": SequenceInput(kind="sequence", length=M, features=W)}
    rows = [x.model_dump(exclude_defaults=True) for x in workload.layers]
    attention = {"name": "attn", "kind": "attention", "heads": 1, "bias": False}
    assert rows[1] == {**attention, "inputs": ["embed", "memory"]}
    # Q and out 2 x 4 x 8 x 8 = 512, K and V 2 x 6 x 8 x 8 = 768, scores and AV 2 x 4 x 6
    # x 8 = 384.
    stats = model_stats(workload, infer_shapes(workload, "cross"))
    assert stats.forward_macs == 512 + 768 + 384
    assert "#   - attention_mask: an integer input that only masks attention scores" in (
        imported.text
    )


def test_a_mask_that_also_scales_activations_is_no_mask() -> None:
    assert mask_inputs(_view(_graph("gate"))) == ()


@pytest.mark.parametrize(
    ("mask_type", "kind"), [(TensorProto.INT64, "integer"), (TensorProto.FLOAT, "float")]
)
def test_the_import_reads_the_mask_as_a_constant(tmp_path: Path, mask_type: int, kind: str) -> None:
    path = tmp_path / "masked.onnx"
    onnx.save(_graph("token_types", mask_type), path)
    imported = import_model(path)
    workload = imported.workload
    assert workload.extra_inputs == {"token_type_ids": TokenInput(kind="tokens", length=S)}
    assert [(x.name, x.kind) for x in workload.layers] == [
        ("embed", "embedding"),
        ("types", "embedding"),
        ("embed.add", "add"),
        ("attn", "attention"),
        ("loss", "cross_entropy"),
    ]
    # One head of 8: Q, K, V and out 4 x 4 x 8 x 8 = 1,024; scores and AV 2 x 4 x 4 x 8.
    stats = model_stats(workload, infer_shapes(workload, "masked"))
    assert stats.forward_macs == 4 * S * W * W + 2 * S * S * W == 1_280
    note = f"attention_mask: an {kind} input that only masks attention scores, read as a"
    assert f"#   - {note}" in imported.text


def test_types_are_given_only_for_a_module(tmp_path: Path) -> None:
    path = tmp_path / "masked.onnx"
    onnx.save(_graph(), path)
    with pytest.raises(WorkloadError) as caught:
        import_model(path, input_shape=[(S,), (S,)], input_types=["int", "int"])
    assert [str(p) for p in caught.value.problems] == [
        f"{path}: input_types: an ONNX file's inputs have their types: give types only for a"
        " module (got ['int', 'int'])"
    ]


def test_the_command_takes_a_type_after_the_dimensions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, out = tmp_path / "masked.onnx", tmp_path / "w.yaml"
    onnx.save(_graph(), path)
    typed = ["--input-shape", "4:int", "--input-shape", "4:int"]
    assert cli.main(["import", str(path), "--out", str(out), *typed]) == 2
    assert "input_types: an ONNX file's inputs have their types" in capsys.readouterr().err
    with pytest.raises(SystemExit) as caught:
        cli.main(["import", str(path), "--out", str(out), "--input-shape", "4:long"])
    assert caught.value.code == 2
    assert (
        "argument --input-shape: expected a type of float, int, bool after the colon (got"
        " '4:long')" in capsys.readouterr().err
    )
    assert not out.exists()


@pytest.mark.torch
@pytest.mark.parametrize("attention", ["eager", "sdpa"])
@pytest.mark.parametrize(
    ("name", "params"), [("hf_bert_masked", 168_320), ("hf_gpt2_masked", 168_192)]
)
def test_a_hugging_face_module_with_a_mask_imports_as_its_fixture(
    name: str, params: int, attention: str
) -> None:
    """The model of the fixture built from its config and exported with two integer
    inputs (``--input-shape 16:int --input-shape 16:int``) imports as the fixture, its
    attention written eagerly (the fixture's) or by ``scaled_dot_product_attention``
    (transformers' default, ``sdpa``)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "export_op_fixtures", ROOT / "scripts" / "export_op_fixtures.py"
    )
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    module = script.hugging_face(name, attention)
    ours = import_model(module, input_shape=[(16,), (16,)], input_types=["int", "int"])
    committed = import_model(FIXTURES / f"{name}.onnx.gz").workload
    assert (ours.workload.layers, ours.workload.extra_inputs) == (committed.layers, {})
    assert sum(p.numel() for p in module.parameters()) == params


@pytest.mark.torch
def test_the_command_exports_a_factory_s_module_with_integer_inputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    script = ROOT / "scripts" / "export_op_fixtures.py"
    (tmp_path / "hfmask.py").write_text(
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('export_op_fixtures', {str(script)!r})\n"
        "script = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(script)\n"
        "def build():\n"
        "    return script.hugging_face('hf_bert_masked')\n"
    )
    monkeypatch.chdir(tmp_path)
    typed = ["--input-shape", "16:int", "--input-shape", "16:int"]
    assert cli.main(["import", "hfmask:build", "--out", "bert.yaml", *typed]) == 0
    assert capsys.readouterr().out == (
        "wrote bert.yaml: 28 layers, 168,320 parameters, 1,638,400 forward MACs per sample"
        " (tokens 16)\n"
    )
    assert "attention_mask: an integer input that only masks attention scores" in (
        " ".join((tmp_path / "bert.yaml").read_text().replace("#", "").split())
    )
