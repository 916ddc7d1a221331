"""Workloads with several inputs (``extra_inputs``) and cross-attention (an
``attention`` layer with two inputs): shapes, validation, the bytes each input is read
with and every GEMM's MACs, counted by hand in the comments beside them."""

from __future__ import annotations

from typing import Any

import pytest

from accelsim.config.hardware import WordBytesSpec
from accelsim.config.run import StridedDx
from accelsim.config.validate import validate_data
from accelsim.graph import queries
from accelsim.graph.ops import GemmOp, Phase, VectorOp
from accelsim.lowering.flash_attention import AttentionBudget
from accelsim.lowering.infer import infer_shapes
from accelsim.lowering.stats import model_stats
from accelsim.lowering.step import lower as lower_step
from accelsim.report.model_counts import models_table
from accelsim.techniques.recomputation.choice import cuts
from accelsim.workload.model import Workload
from tests.conftest import params
from tests.lowering.test_layer_kinds import problems, shapes
from tests.lowering.test_lowering import lower
from tests.lowering.test_lowering import macs as layer_macs

TARGET = {"kind": "sequence", "length": 4, "features": 8}
MEMORY = {"kind": "sequence", "length": 6, "features": 12}


def decoder(*layers: dict[str, Any], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """A workload of a 4 x 8 target sequence and a 6 x 12 memory, ``layers`` and a loss."""
    return {
        "name": "t",
        "input": TARGET,
        "extra_inputs": {"memory": MEMORY} if extra is None else extra,
        "layers": [*layers, {"name": "loss", "kind": "cross_entropy"}],
    }


PRE = {"name": "pre", "kind": "linear", "out_features": 8, "inputs": ["input"]}
MEM = {"name": "mem", "kind": "linear", "out_features": 12, "inputs": ["memory"]}
CROSS = {"name": "attn", "kind": "attention", "heads": 2, "inputs": ["pre", "mem"]}


def test_each_input_is_read_from_dram_and_gets_no_gradient() -> None:
    graph = lower(decoder(PRE, MEM, CROSS), 2)
    reads = {
        (op.name, a.tensor.name): a.elements * a.tensor.word_bytes
        for op in graph.ops
        for a in queries.reads_of(op)
        if a.tensor.name in ("input", "memory")
    }
    # Batch 2: the target 2 x 4 x 8 = 64 elements, the memory 2 x 6 x 12 = 144, of 2
    # bytes each; each read by its linear's forward GEMM and its weight gradient.
    assert reads == {
        ("pre.fwd", "input"): 128,
        ("pre.dw", "input"): 128,
        ("mem.fwd", "memory"): 288,
        ("mem.dw", "memory"): 288,
    }
    # Neither linear computes a gradient of its input: the backward pass stops there.
    assert not [op.name for op in graph.ops if op.name in ("pre.dx", "mem.dx")]


CORE = {
    # 2 samples: 8 query rows, 12 key rows; per-head GEMMs 2 samples x 2 heads = 4.
    "attn.q.fwd": (8, 8, 8, 1),
    "attn.qk.fwd": (4, 6, 4, 4),  # scores Lq 4 x Lk 6 per head
    "attn.av.fwd": (4, 4, 6, 4),
    "attn.out.fwd": (8, 8, 8, 1),
    "attn.out.dx": (8, 8, 8, 1),
    "attn.out.dw": (8, 8, 8, 1),
    "attn.av.dprobs": (4, 6, 4, 4),
    "attn.av.dv": (6, 4, 4, 4),
    "attn.qk.dq": (4, 4, 6, 4),
    "attn.qk.dk": (6, 4, 4, 4),
    "attn.q.dx": (8, 8, 8, 1),  # the gradient of pre's output
    "attn.q.dw": (8, 8, 8, 1),
}
"""The GEMMs of a cross-attention of 4 x 8 queries (2 heads of 4) and 6 keys, at batch
2, but for the keys' and values' projections."""


def test_cross_attention_projects_each_input_and_scores_lq_by_lk() -> None:
    graph = lower(decoder(PRE, MEM, CROSS), 2)
    # d 8, 2 heads of 4; K and V 2 heads of 4 from the memory's 12 features.
    # Parameters: pre 8 x 8 + 8 = 72, mem 12 x 12 + 12 = 156; attn Wq 8 x 8 = 64,
    # Wkv 16 x 12 = 192, Wo 8 x 8 = 64, bq 8, bkv 16, bo 8 = 352.
    assert params(graph) == 72 + 156 + 352
    assert shapes(graph, "attn") == {
        **CORE,
        "attn.kv.fwd": (12, 16, 12, 1),
        "attn.kv.dx": (12, 12, 16, 1),  # the gradient of mem's output
        "attn.kv.dw": (16, 12, 12, 1),
    }
    macs = {phase: layer_macs(graph, "attn", phase) for phase in Phase}
    # Forward: Q 512, KV 12 x 16 x 12 = 2,304, QK^T and AV 4 x 4 x 6 x 4 = 384 each, out 512.
    assert macs[Phase.FWD] == 512 + 2304 + 384 + 384 + 512
    # Input gradients: out 512, dP, dV, dQ, dK 384 each, Q 512, KV 2,304.
    assert macs[Phase.BWD_INPUT] == 512 + 4 * 384 + 512 + 2304
    # Weight gradients: Wo 512, Wq 512, Wkv 2,304.
    assert macs[Phase.BWD_WEIGHT] == 512 + 512 + 2304
    by_name = {op.name: op for op in graph.ops}
    # Each input's gradient reaches the layer that made it.
    assert by_name["attn.q.dx"].op_id in by_name["pre.dw"].deps
    assert by_name["attn.kv.dx"].op_id in by_name["mem.dw"].deps
    qk = by_name["attn.qk.fwd"]
    assert isinstance(qk, GemmOp) and (qk.a.name, qk.b.name) == ("attn.q", "attn.kv")


def test_model_stats_count_both_inputs() -> None:
    workload = validate_data(Workload, decoder(PRE, MEM, CROSS), "t")
    stats = model_stats(workload, infer_shapes(workload, "t"))
    assert stats.input == "sequence 4x8 + memory sequence 6x12"
    # Batch 1: pre 4 x 8 x 8 = 256, mem 6 x 12 x 12 = 864; attn Q 256, KV 6 x 16 x 12 =
    # 1,152, QK^T and AV 2 heads x 4 x 6 x 4 = 192 each, out 256.
    assert (stats.params, stats.forward_macs) == (580, 256 + 864 + 256 + 1152 + 192 + 192 + 256)
    assert "sequence 4x8 + memory sequence 6x12" in models_table([stats]).splitlines()[1]


def test_a_table_without_extra_inputs_dumps_as_before() -> None:
    data = decoder(PRE, extra={})
    data["layers"][0] = {"name": "pre", "kind": "linear", "out_features": 8}
    assert "extra_inputs" not in validate_data(Workload, data, "t").model_dump()


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            decoder({**PRE, "inputs": ["memroy"]}, MEM),
            "w.yaml: layers[0].inputs: unknown input (inputs must be defined earlier); did you"
            " mean 'memory'? (got 'memroy')",
        ),
        (
            decoder({**PRE, "name": "memory"}, MEM),
            "w.yaml: layers[0].name: the name of a model input (input or extra_inputs): a layer"
            " needs its own (got 'memory')",
        ),
        (
            decoder(PRE, extra={"memory": MEMORY, "input": TARGET}),
            "w.yaml: extra_inputs.input: input names the first input (the workload's input):"
            " name this one otherwise (got 'input')",
        ),
        (
            decoder(PRE),
            "w.yaml: extra_inputs.memory: no layer reads this input (got 'memory')",
        ),
    ],
)
def test_input_names_are_checked(data: dict[str, Any], expected: str) -> None:
    assert expected in problems(data)


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        (
            {"causal": True},
            "w.yaml: layers[2].causal: needs self-attention (one input); this layer has two"
            " (cross-attention) (got True)",
        ),
        (
            {"rotary": True},
            "w.yaml: layers[2].rotary: needs self-attention (one input); this layer has two"
            " (cross-attention) (got True)",
        ),
        (
            {"inputs": ["pre", "mem", "pre"]},
            "w.yaml: layers[2].inputs: keys (the second input) and values (the third) need"
            " the same length (got ['sequence 4x8', 'sequence 6x12', 'sequence 4x8'])",
        ),
        (
            {"inputs": ["pre", "mem", "mem", "pre"]},
            "w.yaml: layers[2].inputs: attention takes one input (self-attention), two"
            " (cross-attention: queries from the first, keys and values from the second) or"
            " three (queries, keys and values from one each) (got 4)",
        ),
        (
            {"heads": 3},
            "w.yaml: layers[2].heads: must divide the model width 8 (got 3)",
        ),
    ],
)
def test_cross_attention_refuses(keys: dict[str, Any], expected: str) -> None:
    assert problems(decoder(PRE, MEM, {**CROSS, **keys})) == [expected]


def test_cross_attention_needs_sequences() -> None:
    vector = {"kind": "vector", "features": 12}
    data = decoder(PRE, {**MEM, "name": "mem"}, CROSS, extra={"memory": vector})
    assert problems(data) == [
        "w.yaml: layers[2].inputs: cross-attention needs two sequence inputs (got"
        " ['sequence 4x8', 'features 12'])"
    ]


def test_recomputation_cuts_no_layer_before_the_last_read_of_an_input() -> None:
    # The memory is read by mem, the third layer, so neither pre nor act before it is a
    # cut (a path from the memory passes them by); nor is mem (act's output is read
    # after it, by attn): attn and the loss are.
    act = {"name": "act", "kind": "activation", "function": "relu"}
    data = decoder(PRE, act, {**MEM, "inputs": ["memory"]}, {**CROSS, "inputs": ["act", "mem"]})
    workload = validate_data(Workload, data, "t")
    assert cuts(infer_shapes(workload, "t")) == ["attn", "loss"]


def test_flash_attention_blocks_queries_and_keys_each_along_its_own_sequence() -> None:
    # 20 queries of width 8 (2 heads of 4), 12 keys and values from 12 features, at
    # batch 1; buffers too small for more than the smallest block, 8 positions: 3 query
    # blocks (24 rows, padded) and 2 key blocks (16 keys), 6 score blocks per head.
    long = {"kind": "sequence", "length": 20, "features": 8}
    memory = {"kind": "sequence", "length": 12, "features": 12}
    data = {**decoder(PRE, MEM, CROSS, extra={"memory": memory}), "input": long}
    workload = validate_data(Workload, data, "t")
    infos = infer_shapes(workload, "t")
    budget = AttentionBudget(1, 1, 1)
    graph = lower_step(infos, workload, 1, WordBytesSpec(), StridedDx.SKIP_ZEROS, budget)
    # Each query block meets 16 keys, each key block 24 queries; a query block's GEMMs
    # are 2 heads x 3 blocks = 6, a key block's 2 x 2 = 4: every core GEMM is 3,072 MACs
    # (24 x 16 scores per head, padded, x 4 x 2 heads).
    assert shapes(graph, "attn") == {
        "attn.q.fwd": (20, 8, 8, 1),
        "attn.kv.fwd": (12, 16, 12, 1),
        "attn.qk.fwd": (8, 16, 4, 6),
        "attn.av.fwd": (8, 4, 16, 6),
        "attn.out.fwd": (20, 8, 8, 1),
        "attn.out.dx": (20, 8, 8, 1),
        "attn.out.dw": (8, 8, 20, 1),
        "attn.qk.dkv": (8, 24, 4, 4),
        "attn.dp.dkv": (8, 24, 4, 4),
        "attn.av.dv": (8, 4, 24, 4),
        "attn.qk.dk": (8, 4, 24, 4),
        "attn.qk.dq": (8, 16, 4, 6),
        "attn.dp.dq": (8, 16, 4, 6),
        "attn.qk.dq_grad": (8, 4, 16, 6),
        "attn.q.dx": (20, 8, 8, 1),
        "attn.q.dw": (8, 8, 20, 1),
        "attn.kv.dx": (12, 12, 16, 1),
        "attn.kv.dw": (16, 12, 12, 1),
    }
    by_name = {op.name: op for op in graph.ops}
    # The forward kernel reads Q from the queries' projection, K and V from the other.
    qk, av = by_name["attn.qk.fwd"], by_name["attn.av.fwd"]
    assert isinstance(qk, GemmOp) and (qk.a.name, qk.b.name) == ("attn.q", "attn.kv")
    assert isinstance(av, GemmOp) and av.b.name == "attn.kv"
    # 6 score blocks of 8 x 8 per head: 768 scores, 5 ops each and the rescaling of 2
    # ops per output element spread over the key block's 8 scores, ceil(2 x 4 / 8) = 1.
    softmax = by_name["attn.softmax.fwd"]
    assert isinstance(softmax, VectorOp)
    assert (softmax.elements, softmax.ops_per_element) == (768, 6)


KEYS = {"name": "keys", "kind": "linear", "out_features": 12, "inputs": ["memory"]}
VALUES = {"name": "values", "kind": "linear", "out_features": 10, "inputs": ["memory"]}
QKV = {"name": "attn", "kind": "attention", "heads": 2, "inputs": ["pre", "keys", "values"]}


def test_keys_and_values_from_two_inputs_have_a_projection_each() -> None:
    graph = lower(decoder(PRE, KEYS, VALUES, QKV), 2)
    # d 8, 2 heads of 4; K 2 heads of 4 from 12 features, V from 10.
    # Parameters: pre 72, keys 12 x 12 + 12 = 156, values 12 x 10 + 10 = 130; attn Wq
    # 8 x 8 = 64, Wk 8 x 12 = 96, Wv 8 x 10 = 80, Wo 64, bq, bk, bv, bo 4 x 8 = 336.
    assert params(graph) == 72 + 156 + 130 + 336
    # 12 key and value rows, each projected to 8.
    assert shapes(graph, "attn") == {
        **CORE,
        "attn.k.fwd": (12, 8, 12, 1),
        "attn.v.fwd": (12, 8, 10, 1),
        "attn.k.dx": (12, 12, 8, 1),  # the gradient of keys' output
        "attn.k.dw": (8, 12, 12, 1),
        "attn.v.dx": (12, 10, 8, 1),  # the gradient of values' output
        "attn.v.dw": (8, 10, 12, 1),
    }
    macs = {phase: layer_macs(graph, "attn", phase) for phase in Phase}
    # Forward: Q 512, K 12 x 8 x 12 = 1,152, V 12 x 8 x 10 = 960, QK^T and AV 384 each,
    # out 512.
    assert macs[Phase.FWD] == 512 + 1152 + 960 + 384 + 384 + 512
    # Input gradients: out 512, dP, dV, dQ, dK 384 each, Q 512, K 1,152, V 960.
    assert macs[Phase.BWD_INPUT] == 512 + 4 * 384 + 512 + 1152 + 960
    # Weight gradients: Wo 512, Wq 512, Wk 1,152, Wv 960.
    assert macs[Phase.BWD_WEIGHT] == 512 + 512 + 1152 + 960
    by_name = {op.name: op for op in graph.ops}
    # Each input's gradient reaches the layer that made it: K's and V's both.
    assert by_name["attn.k.dx"].op_id in by_name["keys.dw"].deps
    assert by_name["attn.v.dx"].op_id in by_name["values.dw"].deps
    # The scores read K, the product with the probabilities V: each 2 samples x 6
    # positions x 8 = 96 elements of 2 bytes, per GEMM as wide as it reads them.
    reads = {
        (op.name, a.tensor.name): a.elements * a.tensor.word_bytes
        for op in graph.ops
        for a in queries.reads_of(op)
        if a.tensor.name in ("attn.k", "attn.v") and op.layer == "attn"
    }
    assert reads == {
        ("attn.qk.fwd", "attn.k"): 192,
        ("attn.qk.dq", "attn.k"): 192,
        ("attn.av.fwd", "attn.v"): 192,
        ("attn.av.dprobs", "attn.v"): 192,
    }
    written = {op.name: op.c.name for op in graph.ops if isinstance(op, GemmOp)}
    assert (written["attn.qk.dk"], written["attn.av.dv"]) == ("attn.dk", "attn.dv")


def test_keys_and_values_from_two_inputs_in_flash_attention_kernels() -> None:
    # As the cross-attention above, 20 queries, 12 keys and values: each kernel reads K
    # from K's projection and V from V's, and writes dK and dV each to its own.
    long = {"kind": "sequence", "length": 20, "features": 8}
    memory = {"kind": "sequence", "length": 12, "features": 12}
    data = {**decoder(PRE, KEYS, VALUES, QKV, extra={"memory": memory}), "input": long}
    workload = validate_data(Workload, data, "t")
    graph = lower_step(
        infer_shapes(workload, "t"),
        workload,
        1,
        WordBytesSpec(),
        StridedDx.SKIP_ZEROS,
        AttentionBudget(1, 1, 1),
    )
    gemms = {op.name: op for op in graph.ops if isinstance(op, GemmOp) and op.layer == "attn"}
    operands = {name: (op.a.name, op.b.name, op.c.name) for name, op in gemms.items()}
    assert operands["attn.qk.fwd"] == ("attn.q", "attn.k", "attn.scores")
    assert operands["attn.av.fwd"] == ("attn.probs", "attn.v", "attn.ctx")
    assert operands["attn.dp.dkv"] == ("attn.v", "attn.dctx", "attn.dprobs_t")
    assert operands["attn.av.dv"][2] == "attn.dv" and operands["attn.qk.dk"][2] == "attn.dk"
    assert operands["attn.qk.dq_grad"] == ("attn.dscores_q", "attn.k", "attn.dq")
    # The core's GEMMs are those of the two-input attention: 3,072 MACs each (24 x 16
    # scores per head, padded, x 4 x 2 heads).
    assert {op.macs for n, op in gemms.items() if n.split(".")[1] in ("qk", "av", "dp")} == {3072}


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        (
            {"causal": True},
            "w.yaml: layers[3].causal: needs self-attention (one input); this layer has three"
            " (cross-attention) (got True)",
        ),
        (
            {"inputs": ["pre", "keys", "memory_vector"]},
            "w.yaml: layers[3].inputs: cross-attention needs three sequence inputs (got"
            " ['sequence 4x8', 'sequence 6x12', 'features 12'])",
        ),
    ],
)
def test_three_input_attention_refuses(keys: dict[str, Any], expected: str) -> None:
    extra = {"memory": MEMORY, "memory_vector": {"kind": "vector", "features": 12}}
    data = decoder(PRE, KEYS, VALUES, {**QKV, **keys}, extra=extra)
    assert expected in problems(data)
