"""Large language models from their published configurations (each file's header cites
it and works its parameters out by hand), and their steps counted exactly past int64.

| model        | parameters (by hand)                                          | published |
|--------------|---------------------------------------------------------------|-----------|
| gpt3_175b    | 617,558,016 + 25,165,824 + 96 x 1,812,099,072 + 24,576          | 175.0 B   |
|              | = 174,604,259,328 (vocabulary 50,257, tied head)                |           |
| llama3_8b    | 2 x 525,336,576 + 32 x 218,112,000 + 4,096 = 8,030,261,248      | 8.03 B    |
| llama3_70b   | 2 x 1,050,673,152 + 80 x 855,654,400 + 8,192 = 70,553,706,496   | 70.6 B    |
| mixtral_8x7b | 2 x 131,072,000 + 32 x 1,451,270,144 + 4,096 = 46,702,792,704   | 46.7 B    |

A GPT layer of width ``h``: ``12 h^2 + 13 h`` (QKV ``3 h^2 + 3 h``, output ``h^2 + h``, MLP
``8 h^2 + 5 h``, two LayerNorms ``4 h``); a Llama layer: Q and O ``h^2``, K and V
``h x kv x h / heads``, SwiGLU ``3 h f``, two RMSNorms ``2 h``; a Mixtral layer's MLP is 8
experts of ``3 h f`` and a router ``8 h``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from accelsim import cli
from accelsim.lowering.infer import load_model
from accelsim.lowering.stats import model_stats
from tests.conftest import ROOT

MEGATRON = ROOT / "configs" / "validation" / "megatron"


def gpt_layer(h: int) -> int:
    return 12 * h * h + 13 * h


def llama_layer(h: int, heads: int, kv: int, mlp: int) -> int:
    return 2 * h * h + 2 * h * (kv * h // heads) + mlp + 2 * h


def test_the_layer_formulas_give_the_hand_counts() -> None:
    assert gpt_layer(12288) == 1_812_099_072
    assert llama_layer(4096, 32, 8, 3 * 4096 * 14336) == 218_112_000
    assert llama_layer(8192, 64, 8, 3 * 8192 * 28672) == 855_654_400
    assert llama_layer(4096, 32, 8, 8 * 3 * 4096 * 14336 + 8 * 4096) == 1_451_270_144


PUBLISHED = {
    # file: (by hand, published figure, how close it is)
    ROOT / "workloads" / "gpt3_175b.yaml": (174_604_259_328, 175.0e9, 0.003),
    ROOT / "workloads" / "llama3_8b.yaml": (8_030_261_248, 8.03e9, 0.001),
    ROOT / "workloads" / "llama3_70b.yaml": (70_553_706_496, 70.6e9, 0.001),
    ROOT / "workloads" / "mixtral_8x7b.yaml": (46_702_792_704, 46.7e9, 0.001),
    # Korthikanti et al. 2022 Table 3: vocabulary 51,200, 2,048 positions
    MEGATRON / "megatron_22b.yaml": (
        51200 * 6144 + 2048 * 6144 + 48 * gpt_layer(6144) + 2 * 6144, 22e9, 0.004),
    MEGATRON / "gpt3_175b.yaml": (
        51200 * 12288 + 2048 * 12288 + 96 * gpt_layer(12288) + 2 * 12288, 175e9, 0.003),
    MEGATRON / "turing_530b.yaml": (
        51200 * 20480 + 2048 * 20480 + 105 * gpt_layer(20480) + 2 * 20480, 530e9, 0.001),
    MEGATRON / "megatron_1t.yaml": (
        51200 * 25600 + 2048 * 25600 + 128 * gpt_layer(25600) + 2 * 25600, 1e12, 0.01),
}  # fmt: skip


@pytest.mark.parametrize("path", sorted(PUBLISHED), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_parameters_are_the_architectures_and_the_published_figure(path: Path) -> None:
    exact, published, within = PUBLISHED[path]
    workload, infos = load_model(path)
    assert model_stats(workload, infos).params == exact
    assert abs(exact - published) / published < within


def test_gpt3_forward_macs_by_hand() -> None:
    """Per layer at 2,048 tokens of 12,288: QKV, output and the MLP 12 s h^2, the scores
    and their product with V 2 s^2 h; the tied LM head s h V."""
    s, h, vocab = 2048, 12288, 50257
    workload, infos = load_model(ROOT / "workloads" / "gpt3_175b.yaml")
    stats = model_stats(workload, infos)
    assert stats.forward_macs == 96 * (12 * s * h * h + 2 * s * s * h) + s * h * vocab
    assert stats.forward_macs == 367_402_130_866_176
    assert stats.layers == 3 + 96 * 8 + 3


def test_the_megatron_plans_are_table_3s() -> None:
    rows = [
        line.split(",")
        for line in (MEGATRON / "plans.csv").read_text("utf-8").splitlines()
        if not line.startswith("#")
    ]
    assert rows[0] == [
        "model", "workload", "tensor_parallel", "pipeline_parallel", "data_parallel", "gpus",
        "global_batch", "micro_batch",
    ]  # fmt: skip
    for model, workload, t, p, d, gpus, *_ in rows[1:]:
        assert int(t) * int(p) * int(d) == int(gpus)
        assert (MEGATRON / workload).is_file(), model
    assert [r[0] for r in rows[1:]] == ["22B", "175B", "530B", "1T"]


def test_llama3_8b_trains_a_short_sequence_on_one_chip(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["run", str(ROOT / "configs/runs/default.yaml"), "--out", str(out)]
    sets = ["workload=workloads/llama3_8b.yaml", "workload.input.length=64", "batch_size=1"]
    assert cli.main([*args, *(x for s in sets for x in ("--set", s))]) == cli.EXIT_OK
    (summary,) = out.glob("*/summary.json")
    data = json.loads(summary.read_text("utf-8"))
    assert data["parameters"] == 8_030_261_248
    assert data["total_cycles"] > 0


def test_a_gpt3_layer_past_int64_macs_is_counted_exactly(tmp_path: Path) -> None:
    """One GPT-3 layer (width 12,288, 96 heads, 2,048 tokens) at 10^6 sequences: per
    sequence 36 s h^2 (the GEMMs, forward, dX and dW) + 6 s^2 h (the scores and their
    product with V, forward and the four backward GEMMs) MACs; 1.15e19 for the step,
    past 2^53 and int64's 9.22e18, each op under 2^62."""
    s, h, batch = 2048, 12288, 10**6
    layers = [
        {"name": "ln_1", "kind": "layernorm"},
        {"name": "attn", "kind": "attention", "heads": 96, "causal": True},
        {"name": "add", "kind": "add", "inputs": ["input", "attn"]},
        {"name": "ln_2", "kind": "layernorm"},
        {"name": "fc", "kind": "linear", "out_features": 4 * h},
        {"name": "act", "kind": "activation", "function": "gelu"},
        {"name": "proj", "kind": "linear", "out_features": h},
        {"name": "add_2", "kind": "add", "inputs": ["add", "proj"]},
        {"name": "loss", "kind": "cross_entropy"},
    ]
    path = tmp_path / "gpt3_layer.yaml"
    data = {"name": "gpt3_layer", "input": {"kind": "sequence", "length": s, "features": h}}
    path.write_text(yaml.safe_dump({**data, "layers": layers}, sort_keys=False), "utf-8")
    out = tmp_path / "out"
    sets = [f"workload={path}", f"batch_size={batch}"]
    args = ["run", str(ROOT / "configs/runs/default.yaml"), "--out", str(out)]
    assert cli.main([*args, *(x for s in sets for x in ("--set", s))]) == cli.EXIT_OK
    text = next(out.glob("*/summary.json")).read_text("utf-8")
    macs = json.loads(text)["macs"]
    hand = batch * (36 * s * h * h + 6 * s * s * h)
    assert macs["total"] == hand == 11_441_792_876_544_000_000
    assert hand > 10**19 > 2**63 - 1 > 2**53
    assert macs["fwd"] == batch * (12 * s * h * h + 2 * s * s * h)
    assert f'"total": {hand}' in text  # a JSON integer, every digit
