"""The layer kinds real models need beyond the hand-written tables' (issue 26): group
and RMS norm, transposed conv, upsample, element-wise multiply, matmul and batched
matmul, causal attention, split and chunk, adaptive average pooling, the generic
vector op.  Every count below is worked out by hand in the comment beside it."""

from __future__ import annotations

from typing import Any

import pytest

from accelsim.config.run import StridedDx
from accelsim.config.validate import validate_data
from accelsim.errors import WorkloadError
from accelsim.graph.ops import GemmOp, OpGraph, Phase, VectorOp
from accelsim.lowering.infer import infer_shapes
from accelsim.lowering.rules.elementwise import split_sizes
from accelsim.lowering.rules.resample import adaptive_windows
from accelsim.workload.model import Split, Workload
from tests.conftest import params
from tests.lowering.test_lowering import gemms, lower, net

IMAGE = {"kind": "image", "channels": 4, "height": 3, "width": 3}
TOKENS = {"kind": "tokens", "length": 8}
EMBED = {"name": "emb", "kind": "embedding", "num_embeddings": 50, "embedding_dim": 16}
HEAD = ({"name": "flat", "kind": "flatten"}, {"name": "fc", "kind": "linear", "out_features": 2})


def vector_ops(graph: OpGraph, layer: str) -> dict[str, tuple[int, int]]:
    """(elements, ops per element) of each vector op of ``layer``, by op name."""
    return {
        op.name: (op.elements, op.ops_per_element)
        for op in graph.ops
        if isinstance(op, VectorOp) and op.layer == layer and op.phase is not Phase.UPDATE
    }


def shapes(graph: OpGraph, layer: str) -> dict[str, tuple[int, int, int, int]]:
    return {op.name: (op.m, op.n, op.k, op.count) for op in gemms(graph) if op.layer == layer}


def problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(WorkloadError) as caught:
        infer_shapes(validate_data(Workload, data, "w.yaml"), "w.yaml")
    return [str(p) for p in caught.value.problems]


def test_groupnorm_costs_as_batchnorm_with_a_scale_and_shift_per_channel() -> None:
    conv = {"name": "conv", "kind": "conv2d", "out_channels": 8, "kernel": 1}
    graph = lower(net(IMAGE, conv, {"name": "gn", "kind": "groupnorm", "groups": 4}, *HEAD), 2)
    # Parameters: conv 4*8 = 32, gn 2*8 = 16, fc 8*3*3*2 + 2 = 146.
    assert params(graph) == 32 + 16 + 146
    # 2 samples x 8 x 3 x 3 = 144 elements; batchnorm's 6 ops forward, 8 backward.
    assert vector_ops(graph, "gn") == {"gn.fwd": (144, 6), "gn.bwd": (144, 8)}
    bad = net(IMAGE, conv, {"name": "gn", "kind": "groupnorm", "groups": 3}, *HEAD)
    assert problems(bad) == ["w.yaml: layers[1].groups: must divide the 8 channels (got 3)"]


def test_rmsnorm_has_one_scale_per_feature() -> None:
    graph = lower(net(TOKENS, EMBED, {"name": "rms", "kind": "rmsnorm"}), 2)
    # embedding 50*16 = 800, rmsnorm 16 scales; 2 x 8 x 16 = 256 elements.
    assert params(graph) == 800 + 16
    assert vector_ops(graph, "rms") == {"rms.fwd": (256, 4), "rms.bwd": (256, 6)}


def test_conv_transpose2d_is_the_adjoint_convolution() -> None:
    conv = {"name": "conv", "kind": "conv2d", "out_channels": 4, "kernel": 1}
    up = {
        "name": "up",
        "kind": "conv_transpose2d",
        "out_channels": 2,
        "kernel": 3,
        "stride": 2,
        "padding": 1,
        "output_padding": 1,
    }
    data = net(IMAGE, conv, up, *HEAD)
    infos = {i.layer.name: i for i in infer_shapes(validate_data(Workload, data, "t"), "t")}
    # (3 - 1) * 2 - 2 * 1 + 1 * (3 - 1) + 1 + 1 = 6, as torch.nn.ConvTranspose2d gives.
    assert infos["up"].out_shape.dims == (2, 6, 6)
    graph = lower(data, 1)
    # Weight C x K x R x S = 4 * 2 * 9 = 72 (no bias).
    assert params(graph) == 16 + 72 + (2 * 36 * 2 + 2)
    # Forward in stride phases over the 6x6 output: rows (i + 1) % 2 == 0 (i = 1, 3, 5)
    # see taps r = 0, 2 and rows 0, 2, 4 see r = 1, likewise columns: 3x3 positions
    # with 2x2, 2x1 (twice) and 1x1 taps; k = 4 channels x taps, n = 2.
    assert shapes(graph, "up") == {
        "up.fwd.0": (9, 2, 16, 1),
        "up.fwd.1": (9, 2, 8, 2),
        "up.fwd.2": (9, 2, 4, 1),
        # dX: the adjoint conv's forward, m = 3 * 3, n = 4, k = 2 * 9.
        "up.dx": (9, 4, 18, 1),
        # dW: (K/g) x (C/g . R . S) over the 3 * 3 input positions.
        "up.dw": (2, 36, 9, 1),
    }
    # Every phase adds up to C.K.R.S.H.W = 4 * 2 * 9 * 9 = 648 MACs, as do dX and dW.
    for phase in (Phase.FWD, Phase.BWD_INPUT, Phase.BWD_WEIGHT):
        assert sum(op.macs for op in gemms(graph, phase) if op.layer == "up") == 648
    dense = lower(data, 1, strided_dx=StridedDx.ZERO_INSERT)
    # Zero insertion: one GEMM over the 36 outputs with all 9 taps, 36 * 2 * 36 = 2,592.
    assert shapes(dense, "up")["up.fwd"] == (36, 2, 36, 1)


def test_upsample_nearest_and_bilinear() -> None:
    conv = {"name": "conv", "kind": "conv2d", "out_channels": 3, "kernel": 1}
    near = {"name": "up", "kind": "upsample", "scale": 2}
    graph = lower(net(IMAGE, conv, near, *HEAD), 1)
    # 3 x 6 x 6 = 108 outputs: one copy each, one accumulate back.
    assert vector_ops(graph, "up") == {"up.fwd": (108, 1), "up.bwd": (108, 1)}
    bilinear = {"name": "up", "kind": "upsample", "size": [5, 4], "mode": "bilinear"}
    graph = lower(net(IMAGE, conv, bilinear, *HEAD), 1)
    # 3 x 5 x 4 = 60 outputs: 4 multiplies and 3 adds each, 4 weighted accumulates back.
    assert vector_ops(graph, "up") == {"up.fwd": (60, 7), "up.bwd": (60, 8)}
    both = {"name": "up", "kind": "upsample", "scale": 2, "size": [6, 6]}
    assert problems(net(IMAGE, conv, both, *HEAD)) == [
        "w.yaml: layers[1]: give exactly one of scale and size (got None)"
    ]


def test_mul_broadcasts_a_squeeze_and_excitation_gate() -> None:
    image = {"kind": "image", "channels": 8, "height": 4, "width": 4}
    layers = (
        {"name": "conv", "kind": "conv2d", "out_channels": 8, "kernel": 1},
        {"name": "pool", "kind": "adaptive_avgpool", "output": 1},
        {"name": "fc", "kind": "conv2d", "out_channels": 8, "kernel": 1, "bias": True},
        {"name": "gate", "kind": "activation", "function": "sigmoid"},
        {"name": "scale", "kind": "mul", "inputs": ["conv", "gate"]},
        {"name": "flat", "kind": "flatten"},
        {"name": "out", "kind": "linear", "out_features": 2},
    )
    graph = lower(net(image, *layers), 2)
    # 2 x 8 x 4 x 4 = 256 products; the gate's gradient sums 16 products per channel
    # (a multiply and an accumulate per element), the feature map's is one multiply.
    assert vector_ops(graph, "scale") == {
        "scale.fwd": (256, 1),
        "scale.bwd0": (256, 1),
        "scale.bwd1": (256, 2),
    }
    # Adaptive pooling to 1x1 is a global average: 16 taps per channel, 2 x 8 x 16.
    assert vector_ops(graph, "pool") == {"pool.fwd": (256, 1), "pool.bwd": (256, 1)}
    bad = net(image, *layers[:4], {"name": "scale", "kind": "mul", "inputs": ["gate", "conv"]})
    assert problems(bad) == [
        "w.yaml: layers[4].inputs: the second input must match the first or be 1 where it"
        " differs: chw 8x1x1 and chw 8x4x4 (got ['chw 8x1x1', 'chw 8x4x4'])"
    ]


def test_matmul_and_batched_matmul() -> None:
    layers = (
        EMBED,
        {"name": "q", "kind": "linear", "out_features": 16, "inputs": ["emb"]},
        {"name": "k", "kind": "linear", "out_features": 16, "inputs": ["emb"]},
        {"name": "qk", "kind": "matmul", "heads": 2, "transpose_b": True, "inputs": ["q", "k"]},
    )
    graph = lower(net(TOKENS, *layers), 3)
    # Per head: Q 8 x 8 times K^T 8 x 8 (16 features in 2 heads of 8); 3 samples x 2 heads.
    assert shapes(graph, "qk") == {
        "qk.fwd": (8, 8, 8, 6),
        "qk.da": (8, 8, 8, 6),  # dQ = dS . K: M x K x N
        "qk.db": (8, 8, 8, 6),  # dK = dS^T . Q: N x K x M
    }
    assert sum(op.macs for op in gemms(graph) if op.layer == "qk") == 3 * 6 * 512
    plain = (
        EMBED,
        {"name": "w", "kind": "linear", "out_features": 4, "inputs": ["emb"]},
        {"name": "t", "kind": "linear", "out_features": 8, "inputs": ["emb"]},
        {"name": "mm", "kind": "matmul", "inputs": ["w", "t"]},
    )
    bad = problems(net(TOKENS, *plain))
    assert bad == [
        "w.yaml: layers[3].inputs: inner sizes differ: A has 4 per head, B 8"
        " (got ['sequence 8x4', 'sequence 8x8'])"
    ]
    square = (*plain[:2], {**plain[3], "inputs": ["w", "w"], "transpose_b": True})
    graph = lower(net(TOKENS, *square), 1)
    # W W^T: 8 x 8 x 4; both gradients flow to w and are summed there.
    assert shapes(graph, "mm")["mm.fwd"] == (8, 8, 4, 1)
    assert "w.grad_accum" in {op.name for op in graph.ops}


def test_matmul_of_two_maps_is_a_product_per_head() -> None:
    """Two 2 x 5 x 3 maps (heads x M x K, as an exported ``12x197x64 @ 12x64x197``
    arrives) times B's transpose: 2 x 5 x 5 out."""
    image = {"kind": "image", "channels": 2, "height": 5, "width": 3}
    layers = (
        {"name": "a", "kind": "conv2d", "out_channels": 2, "kernel": 1},
        {"name": "b", "kind": "conv2d", "out_channels": 2, "kernel": 1, "inputs": ["input"]},
        {"name": "ab", "kind": "matmul", "heads": 2, "transpose_b": True, "inputs": ["a", "b"]},
        *HEAD,
    )
    graph = lower(net(image, *layers), 3)
    # Per head M 5, N 5, K 3; 3 samples x 2 heads: 6 products of 75 MACs each way.
    assert shapes(graph, "ab") == {
        "ab.fwd": (5, 5, 3, 6),
        "ab.da": (5, 3, 5, 6),  # dA = dC . B: M x K x N
        "ab.db": (5, 3, 5, 6),  # dB = dC^T . A: N x K x M
    }
    bad = net(image, *layers[:2], {**layers[2], "heads": 3}, *HEAD)
    assert problems(bad) == [
        "w.yaml: layers[2].heads: must be both maps' first size (got ['chw 2x5x3', 'chw 2x5x3'])"
    ]


def test_stochastic_depth_draws_once_per_sample() -> None:
    conv = {"name": "conv", "kind": "conv2d", "out_channels": 4, "kernel": 1}
    layer = {"name": "sd", "kind": "stochastic_depth", "rate": 0.1}
    graph = lower(net(IMAGE, conv, layer, *HEAD), 2)
    # 2 samples x 4 x 3 x 3 = 72 elements, each scaled once (forward and backward).
    assert vector_ops(graph, "sd") == {"sd.fwd": (72, 1), "sd.bwd": (72, 1)}
    mask = next(op for op in graph.ops if op.name == "sd.fwd").writes[1]
    assert mask.bytes == 1  # two samples' bits


def test_causal_attention_masks_scores_and_keeps_the_gemms() -> None:
    def attention(causal: bool) -> OpGraph:
        layer = {"name": "attn", "kind": "attention", "heads": 2, "causal": causal}
        return lower(net(TOKENS, EMBED, layer), 2)

    masked, plain = attention(True), attention(False)
    assert shapes(masked, "attn") == shapes(plain, "attn")
    # One select per score: 2 samples x 2 heads x 8 x 8 = 256, forward and backward.
    extra = set(vector_ops(masked, "attn").items()) - set(vector_ops(plain, "attn").items())
    assert extra == {("attn.mask.fwd", (256, 1)), ("attn.mask.bwd", (256, 1))}


def test_split_and_chunk_are_views() -> None:
    assert split_sizes(Split(kind="split", name="s", chunks=3, index=0), 10) == [4, 4, 2]
    # torch.chunk(6 channels, 4) gives three chunks of 2.
    assert split_sizes(Split(kind="split", name="s", chunks=4, index=0), 6) == [2, 2, 2]
    layers = (
        {"name": "fc0", "kind": "linear", "out_features": 10},
        {"name": "a", "kind": "split", "sizes": [4, 6], "index": 0, "inputs": ["fc0"]},
        {"name": "b", "kind": "split", "sizes": [4, 6], "index": 1, "inputs": ["fc0"]},
        {"name": "fa", "kind": "linear", "out_features": 3, "inputs": ["a"]},
        {"name": "fb", "kind": "linear", "out_features": 3, "inputs": ["b"]},
        {"name": "sum", "kind": "add", "inputs": ["fa", "fb"]},
    )
    graph = lower(net({"kind": "vector", "features": 5}, *layers), 2)
    assert not [op for op in graph.ops if op.layer in ("a", "b")]  # no op of their own
    # fc0's output gradient is the view of its two parts: no accumulation op.
    assert not [op for op in graph.ops if op.name == "fc0.grad_accum"]
    (dw,) = [op for op in gemms(graph, Phase.BWD_WEIGHT) if op.layer == "fc0"]
    assert dw.a.name == "fc0.grad_parts" and dw.a.elements == 2 * 10
    uneven = net({"kind": "vector", "features": 5}, layers[0], {**layers[1], "sizes": [4, 5]})
    assert problems(uneven) == [
        "w.yaml: layers[1].sizes: must add up to the 10 channels (got [4, 5])"
    ]


def test_adaptive_avgpool_windows_follow_pytorch() -> None:
    # 5 -> 3: windows [0, 2), [1, 4), [3, 5): lengths 2, 3, 2 (they overlap).
    assert adaptive_windows(5, 3) == [2, 3, 2]
    assert adaptive_windows(7, 7) == [1] * 7
    image = {"kind": "image", "channels": 2, "height": 5, "width": 5}
    conv = {"name": "conv", "kind": "conv2d", "out_channels": 2, "kernel": 1}
    pool = {"name": "pool", "kind": "adaptive_avgpool", "output": 3}
    graph = lower(net(image, conv, pool, *HEAD), 1)
    # 2 channels x 7 row taps x 7 column taps = 98.
    assert vector_ops(graph, "pool") == {"pool.fwd": (98, 1), "pool.bwd": (98, 1)}


def test_generic_vector_op_is_sized_from_its_shapes() -> None:
    layers = (
        {"name": "fc0", "kind": "linear", "out_features": 10},
        {"name": "erf", "kind": "vector", "op": "Erf", "layout": "features", "shape": [10]},
    )
    graph = lower(net({"kind": "vector", "features": 5}, *layers), 3)
    assert vector_ops(graph, "erf") == {"erf.fwd": (30, 1), "erf.bwd0": (30, 1)}
    assert not [op for op in graph.ops if isinstance(op, GemmOp) and op.layer == "erf"]
