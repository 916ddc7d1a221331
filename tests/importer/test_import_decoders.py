"""``accelsim import`` of Llama-style and GPT-2-style blocks (built by
:mod:`tests.importer.decoder_graphs` as ``torch.onnx.export`` writes them):
grouped-query attention repeated by ``repeat_interleave`` or ``repeat_kv``, rotary
embeddings, SwiGLU with ``F.silu`` as ``x * sigmoid(x)``, ``RMSNormalization``, a
tied head, and GPT-2's fused QKV projection cut by a ``Split``."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("onnx")

import onnx

from accelsim.importer.model_import import import_model
from accelsim.lowering.infer import infer_shapes
from accelsim.lowering.stats import model_stats
from accelsim.workload import model as wm
from tests.importer.decoder_graphs import gpt2_fused_block, llama_decoder
from tests.importer.tiny_graph import tiny_graph

LAYER = "model.layers.0"
LLAMA_ROWS = [
    ("model.embed_tokens", "embedding"),
    (f"{LAYER}.input_layernorm", "rmsnorm"),
    (f"{LAYER}.self_attn", "attention"),
    (f"{LAYER}.add", "add"),
    (f"{LAYER}.post_attention_layernorm", "rmsnorm"),
    (f"{LAYER}.mlp.gate_proj", "linear"),
    (f"{LAYER}.mlp.act_fn", "activation"),
    (f"{LAYER}.mlp.up_proj", "linear"),
    (f"{LAYER}.mlp.mul", "mul"),
    (f"{LAYER}.mlp.down_proj", "linear"),
    (f"{LAYER}.add_2", "add"),
    ("model.norm", "rmsnorm"),
    ("lm_head", "linear"),
    ("loss", "cross_entropy"),
]


def imported(tmp_path: Path, model: onnx.ModelProto) -> wm.Workload:
    path = tmp_path / "block.onnx"
    onnx.save(model, path)
    return import_model(path).workload


def params(workload: wm.Workload) -> int:
    return model_stats(workload, infer_shapes(workload, "t")).params


@pytest.mark.parametrize("form", ["tile", "expand"])
def test_a_llama_layer_imports_as_gqa_rotary_attention_and_swiglu(
    tmp_path: Path, form: str
) -> None:
    workload = imported(tmp_path, llama_decoder(form))
    assert [(x.name, x.kind) for x in workload.layers] == LLAMA_ROWS
    layers = {x.name: x for x in workload.layers}
    assert layers[f"{LAYER}.self_attn"] == wm.Attention(
        name=f"{LAYER}.self_attn",
        kind="attention",
        heads=4,
        kv_heads=2,
        bias=False,
        causal=True,
        rotary=True,
    )
    act = layers[f"{LAYER}.mlp.act_fn"]
    assert isinstance(act, wm.Activation) and act.function is wm.ActivationFunction.SILU
    assert layers[f"{LAYER}.mlp.mul"].inputs == [f"{LAYER}.mlp.act_fn", f"{LAYER}.mlp.up_proj"]
    head = layers["lm_head"]
    assert isinstance(head, wm.Linear) and head.tied_to == "model.embed_tokens"
    # Embedding 50 x 16 = 800; three RMSNorm scales 3 x 16; Q 16 x 16 with K and V of 2
    # heads of 4 (8 x 16 each): 512; O 256; gate, up and down 16 x 32 each: 1,536; the
    # tied head none.
    assert params(workload) == 800 + 48 + 512 + 256 + 1536 == 3152


def test_gpt2s_fused_qkv_and_split_import_as_one_attention(tmp_path: Path) -> None:
    workload = imported(tmp_path, gpt2_fused_block())
    attention = [x for x in workload.layers if isinstance(x, wm.Attention)]
    assert attention == [
        wm.Attention(name="transformer.h.0.attn", kind="attention", heads=4, causal=True)
    ]
    # wte 800, wpe 8 x 16 = 128, ln_1 32; c_attn 16 x 48 + 48, c_proj 16 x 16 + 16.
    assert params(workload) == 800 + 128 + 32 + 768 + 48 + 256 + 16 == 2048


def test_a_sigmoid_not_gating_its_input_stays_a_sigmoid(tmp_path: Path) -> None:
    odd = imported(tmp_path, tiny_graph("Sigmoid")).layers[1]
    assert odd == wm.Activation(name="odd", kind="activation", function="sigmoid")
