"""The blocks of Llama-style decoders: grouped-query attention (``kv_heads``), rotary
position embeddings (``rotary``), an output projection without a bias (``out_bias``)
and a SwiGLU MLP composed of existing kinds.  Every count is worked out by hand in
the comment beside it."""

from __future__ import annotations

from typing import Any

from accelsim.graph.ops import OpGraph, Phase
from tests.conftest import params
from tests.lowering.test_layer_kinds import EMBED, TOKENS, problems, shapes, vector_ops
from tests.lowering.test_lowering import gemms, lower, net


def attention(**keys: Any) -> OpGraph:
    """Tokens 8 -> embedding 50 x 16 -> attention with 4 heads of 4 (``keys`` added),
    at batch 2."""
    layer = {"name": "attn", "kind": "attention", "heads": 4, "bias": False, **keys}
    return lower(net(TOKENS, EMBED, layer), 2)


def test_grouped_query_attention_shrinks_kv_and_batches_each_group() -> None:
    graph = attention(kv_heads=2)
    # Head size 16 / 4 = 4; K and V are 2 heads of 4: the projection is 16 + 2 x 8 = 32
    # wide.  Parameters: embedding 800, Wqkv 32 x 16 = 512, Wo 16 x 16 = 256.
    assert params(graph) == 800 + 512 + 256
    # 2 samples x 8 tokens = 16 rows.  Per key/value head (2 samples x 2 = 4 GEMMs), its
    # 2 query heads stacked: 2 x 8 = 16 rows.
    assert shapes(graph, "attn") == {
        "attn.qkv.fwd": (16, 32, 16, 1),
        "attn.qk.fwd": (16, 8, 4, 4),
        "attn.av.fwd": (16, 4, 8, 4),
        "attn.out.fwd": (16, 16, 16, 1),
        "attn.out.dx": (16, 16, 16, 1),
        "attn.out.dw": (16, 16, 16, 1),
        "attn.av.dprobs": (16, 8, 4, 4),
        "attn.av.dv": (8, 4, 16, 4),  # dV sums over the group's 16 query rows
        "attn.qk.dq": (16, 4, 8, 4),
        "attn.qk.dk": (8, 4, 16, 4),
        "attn.qkv.dx": (16, 16, 32, 1),
        "attn.qkv.dw": (32, 16, 16, 1),
    }
    # The scores' MACs are those of one GEMM per query head: 2 x 4 x 8 x 8 x 4 = 2,048.
    (qk,) = [op for op in gemms(graph) if op.name == "attn.qk.fwd"]
    assert qk.macs == 2 * 4 * 8 * 8 * 4
    # The softmax still runs over every query head's scores: 2 x 4 x 8 x 8 = 512.
    assert vector_ops(graph, "attn")["attn.softmax.fwd"][0] == 512


def test_as_many_kv_heads_as_heads_is_multi_head_attention() -> None:
    same, plain = attention(kv_heads=4), attention()
    assert [(op.name, op.deps) for op in same.ops] == [(op.name, op.deps) for op in plain.ops]
    assert shapes(same, "attn") == shapes(plain, "attn")
    assert shapes(plain, "attn")["attn.qk.fwd"] == (8, 8, 4, 8)  # one GEMM per head


def test_kv_heads_must_divide_heads() -> None:
    bad = {"name": "attn", "kind": "attention", "heads": 4, "kv_heads": 3}
    assert problems(net(TOKENS, EMBED, bad)) == [
        "w.yaml: layers[1].kv_heads: must divide the 4 heads (got 3)"
    ]


def test_rotary_rotates_queries_and_keys_forward_and_back() -> None:
    rotated, plain = attention(kv_heads=2, rotary=True), attention(kv_heads=2)
    assert shapes(rotated, "attn") == shapes(plain, "attn")
    # Q and K: 2 x 8 tokens x (16 + 8) = 384 elements, 3 ops each, forward and backward.
    extra = set(vector_ops(rotated, "attn").items()) - set(vector_ops(plain, "attn").items())
    assert extra == {("attn.rotary.fwd", (384, 3)), ("attn.rotary.bwd", (384, 3))}
    by_name = {op.name: op for op in rotated.ops}
    # The scores read the rotated Q and K; the values are read unrotated.
    assert by_name["attn.qk.fwd"].a.name == "attn.qk"
    assert by_name["attn.av.fwd"].b.name == "attn.qkv"
    # The projection's input gradient waits for both halves of dQKV: the rotated-back
    # dQ and dK, and dV.
    dx = by_name["attn.qkv.dx"]
    assert {rotated.ops[i].name for i in dx.deps} == {"attn.rotary.bwd", "attn.av.dv"}


def test_out_bias_keeps_the_projection_biases_apart() -> None:
    graph = attention(kv_heads=2, bias=True, out_bias=False)
    # Embedding 800, Wqkv 512, bqkv 32, Wo 256, and no bo.
    assert params(graph) == 800 + 512 + 32 + 256
    assert params(attention(kv_heads=2, bias=True)) == 800 + 512 + 32 + 256 + 16


def test_a_swiglu_mlp_is_gate_and_up_projections_silu_a_product_and_down() -> None:
    layers = (
        EMBED,
        {"name": "gate", "kind": "linear", "out_features": 32, "bias": False},
        {"name": "act", "kind": "activation", "function": "silu"},
        {"name": "up", "kind": "linear", "out_features": 32, "bias": False, "inputs": ["emb"]},
        {"name": "mul", "kind": "mul", "inputs": ["act", "up"]},
        {"name": "down", "kind": "linear", "out_features": 16, "bias": False},
    )
    graph = lower(net(TOKENS, *layers), 2)
    # Embedding 800; gate and up 16 x 32 = 512 each; down 32 x 16 = 512.
    assert params(graph) == 800 + 3 * 512
    fwd = {op.name: op.macs for op in gemms(graph, Phase.FWD)}
    # 16 rows x 16 x 32 each.
    assert fwd == {"gate.fwd": 8192, "up.fwd": 8192, "down.fwd": 8192}
    # The product: 16 x 32 = 512 elements, one op forward; backward one per input.
    assert vector_ops(graph, "mul") == {
        "mul.fwd": (512, 1),
        "mul.bwd0": (512, 1),
        "mul.bwd1": (512, 1),
    }
    # SiLU: 5 ops forward, 6 backward per element.
    assert set(vector_ops(graph, "act").values()) == {(512, 5), (512, 6)}
