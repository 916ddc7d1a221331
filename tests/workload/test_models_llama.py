"""Layer tables of SmolLM2-135M, Qwen2.5-0.5B, Llama-3.2-1B and BERT-large, each derived
from its published configuration (cited in the file's header).

Parameter counts are worked out by hand from the architectures and asserted exactly,
then set beside the published figure:

| model        | parameters (by hand)                                    | published             |
|--------------|---------------------------------------------------------|-----------------------|
| smollm2_135m | 28,311,552 + 30 x 3,540,096 + 576 = 134,515,008          | 134.5 M               |
| qwen2_5_0_5b | 136,134,656 + 24 x 14,912,384 + 896 = 494,032,768        | 494 M (0.49 B)        |
| llama3_2_1b  | 262,668,288 + 16 x 60,821,504 + 2,048 = 1,235,814,400    | 1.24 B                |
| bert_large   | 31,782,912 + 24 x 12,596,224 + 1,049,600 + 2,050         | 335-340 M             |
|              | = 335,143,938                                           |                       |

A decoder layer of width ``d``, ``h`` heads of ``d / h``, ``kv`` key/value heads and an
MLP of width ``f``: Q and O ``d^2`` each, K and V ``d * kv * d / h`` each, SwiGLU
``3 * d * f``, two RMSNorm scales ``2d``; the embedding ``vocab * d``; the LM head tied
to it (no parameter of its own), the final RMSNorm ``d``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.graph import queries
from accelsim.graph.ops import Phase
from tests.conftest import ROOT, fwd_macs, model, params


def decoder_layer(d: int, heads: int, kv: int, f: int, qkv_bias: bool = False) -> int:
    """Parameters of one Llama-style decoder layer (by the formula of the docstring)."""
    kv_width = kv * d // heads
    biases = (d + 2 * kv_width) if qkv_bias else 0
    return 2 * d * d + 2 * d * kv_width + biases + 3 * d * f + 2 * d


def test_the_layer_formula_gives_the_hand_counts() -> None:
    assert decoder_layer(576, 9, 3, 1536) == 3_540_096
    assert decoder_layer(896, 14, 2, 4864, qkv_bias=True) == 14_912_384
    assert decoder_layer(2048, 32, 8, 8192) == 60_821_504


PUBLISHED = {
    # name: (by hand, published figure, how close it is)
    "smollm2_135m": (134_515_008, 134.5e6, 0.001),
    "qwen2_5_0_5b": (494_032_768, 494e6, 0.001),
    "llama3_2_1b": (1_235_814_400, 1.24e9, 0.005),
    "bert_large": (335_143_938, 335e6, 0.015),  # HF's 335 M; the paper's "340M"
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameters_are_the_architectures_and_the_published_figure(name: str) -> None:
    exact, published, within = PUBLISHED[name]
    _, graph = model(name)
    assert params(graph) == exact
    assert abs(exact - published) / published < within


def test_smollm2_forward_macs_by_hand() -> None:
    """At 128 tokens, per layer: QKV 128 x 576 x 960, QK^T and AV 9 heads x 128 x 128 x
    64 each, O 128 x 576 x 576, SwiGLU 3 x 128 x 576 x 1,536; x30; LM head 128 x 576 x
    49,152."""
    layer = 128 * 576 * 960 + 2 * 9 * 128 * 128 * 64 + 128 * 576 * 576 + 3 * 128 * 576 * 1536
    assert layer == 471_859_200
    _, graph = model("smollm2_135m")
    assert fwd_macs(graph) == 30 * layer + 128 * 576 * 49152 == 17_779_654_656


def test_a_tied_head_is_one_parameter_whose_gradient_sums_both_uses() -> None:
    _, graph = model("smollm2_135m")
    names = [p.weight.name for p in graph.parameters]
    assert not [n for n in names if n.startswith("lm_head")]
    assert names.count("model.embed_tokens.W") == 1
    table = next(p for p in graph.parameters if p.layer == "model.embed_tokens")
    writers = [
        op.name
        for op in graph.ops
        if table.gradient.key in {a.tensor.key for a in queries.writes_of(op)}
    ]
    # The head's dW GEMM (576 x 49,152 over 128 tokens) writes it first; the
    # embedding's scatter adds its own and finishes it.
    assert writers == ["lm_head.dw", "model.embed_tokens.dw"]
    assert graph.ops[table.grad_op].name == "model.embed_tokens.dw"
    # Per layer 2 RMSNorm scales, Wqkv, Wo, gate, up, down; the table; the final norm.
    updates = [op for op in graph.ops if op.phase is Phase.UPDATE]
    assert len(updates) == len(graph.parameters) == 1 + 30 * 7 + 1


def run(tmp_path: Path, workload: str) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(
        f"name: t\nhardware: {ROOT}/configs/hardware/default.yaml\n"
        f"workload: {ROOT}/workloads/{workload}.yaml\n"
        f"energy: {ROOT}/configs/energy/horowitz45.yaml\n"
    )
    return path


@pytest.mark.parametrize("name", ["smollm2_135m", "bert_large"])
def test_the_sequence_length_is_set_from_the_command_line(tmp_path: Path, name: str) -> None:
    inputs = load_inputs(run(tmp_path, name), parse_sets(["workload.input.length=256"]))
    assert inputs.workload.input.length == 256
    attention = next(i for i in inputs.infos if "attention" in i.layer.kind)
    assert attention.in_shapes[0].dims[0] == 256
