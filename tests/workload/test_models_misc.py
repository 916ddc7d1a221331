"""Layer tables of MobileNet-V2, DenseNet-121, Inception-V3, the PTB LSTM and BERT-base.

Parameter counts are checked exactly against the published figures, forward MACs
within 1% of the published ones and exactly against closed forms worked out here
from the architectures (conv and linear MACs; embeddings are gathers, no MACs).
GEMM shapes follow docs/architecture.md and docs/model/lowering.md: a conv is ``count = groups`` GEMMs of
``m = batch * P * Q``, ``n = K / groups``, ``k = (C / groups) * R * S``.

| model        | parameters (reference, source)                                   | fwd MACs (reference)      |
|--------------|------------------------------------------------------------------|---------------------------|
| mobilenet_v2 | 3,504,872 (torchvision docs, MobileNet_V2_Weights.IMAGENET1K_V1) | 0.30 G (torchvision)      |
| densenet121  | 7,978,856 (torchvision docs, DenseNet121_Weights.IMAGENET1K_V1)  | 2.83 G (torchvision)      |
| inception_v3 | 23,834,568 = torchvision's 27,161,264 - AuxLogits 3,326,696      | 5.71 G (torchvision)      |
| lstm_ptb     | 19,780,400 (by hand; Zaremba et al. give no exact count)         | 464,100,000 (by hand)     |
| bert_base    | 109,482,240 (HF bert-base-uncased) + 1,538 (2-way classifier)    | ~11.2 G (by hand, seq 128)|

torchvision's "GFLOPS" column counts multiply-accumulates (ResNet-18: 1.81).  Its
Inception-V3 5.71 excludes AuxLogits (eval-mode forward): the branch's 5,683,200
MACs (25*768*128 + 128*768*25 + 768*1000) would make it 5.72.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import pytest

from accelsim.graph.ops import GemmOp, OpGraph, Phase
from tests.conftest import ROOT, fwd_macs, model, params


def gemm(graph: OpGraph, name: str) -> tuple[int, int, int, int]:
    """``(m, n, k, count)`` of the GEMM op called ``name``."""
    op = next(op for op in graph.ops if isinstance(op, GemmOp) and op.name == name)
    return (op.m, op.n, op.k, op.count)


# -- closed forms, from the architectures ----------------------------------------------


def mobilenet_v2_macs() -> int:
    # Stem 3x3/2 conv 3 -> 32 at 112x112; each inverted residual: 1x1 expansion
    # (H_in^2 * cin * hidden, absent for t = 1), 3x3 depthwise (H_out^2 * hidden * 9),
    # 1x1 projection (H_out^2 * hidden * cout); 1x1 conv 320 -> 1280 at 7x7; FC.
    macs, cin, hw = 112 * 112 * 32 * 27, 32, 112
    for t, c, n, s in [
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    ]:  # MobileNetV2 paper, table 2
        for i in range(n):
            hidden, out = cin * t, hw // (s if i == 0 else 1)
            macs += (hw * hw * cin * hidden if t != 1 else 0) + out * out * hidden * (9 + c)
            cin, hw = c, out
    return macs + 7 * 7 * 320 * 1280 + 1280 * 1000  # = 300,774,272


def densenet121_macs() -> int:
    # Stem 7x7/2 conv 3 -> 64 at 112x112.  A dense layer reading C channels at HxW:
    # H*W*(C*128 + 128*32*9); a transition reading C: H*W*C*(C/2) before its pool.
    macs, ch, hw = 112 * 112 * 64 * 147, 64, 56
    for block, layers in enumerate([6, 12, 24, 16]):
        for _ in range(layers):
            macs += hw * hw * (ch * 128 + 128 * 32 * 9)
            ch += 32
        if block < 3:
            macs += hw * hw * ch * (ch // 2)
            ch, hw = ch // 2, hw // 2
    return macs + 1024 * 1000  # = 2,834,161,664


# Inception-V3 forward MACs per module, each the sum of its convs' H*W*Cin*Cout*R*S
# (worked out by hand from the architecture; 5,713,216,096 in all).
INCEPTION_V3_MODULE_MACS = {
    "Conv2d_1a_3x3": 149 * 149 * 3 * 32 * 9,
    "Conv2d_2a_3x3": 147 * 147 * 32 * 32 * 9,
    "Conv2d_2b_3x3": 147 * 147 * 32 * 64 * 9,
    "Conv2d_3b_1x1": 73 * 73 * 64 * 80,
    "Conv2d_4a_3x3": 71 * 71 * 80 * 192 * 9,  # stem: 1,340,779,616
    "Mixed_5b": 312_345_600,  # 35x35
    "Mixed_5c": 338_688_000,
    "Mixed_5d": 348_096_000,
    "Mixed_6a": 401_937_408,  # 35 -> 17
    "Mixed_6b": 374_063_104,  # 17x17
    "Mixed_6c": 487_702_528,
    "Mixed_6d": 487_702_528,
    "Mixed_6e": 617_914_368,
    "Mixed_7a": 291_004_416,  # 17 -> 8
    "Mixed_7b": 322_437_120,  # 8x8
    "Mixed_7c": 388_497_408,
    "fc": 2048 * 1000,
}
INCEPTION_V3_MACS = sum(INCEPTION_V3_MODULE_MACS.values())

# Two LSTM layers x 35 steps x (batch 1) x (650 + 650) x 2600 gates, plus the
# decoder 35 x 650 x 10000.
LSTM_PTB_MACS = 2 * 35 * 1300 * 2600 + 35 * 650 * 10000  # 236,600,000 + 227,500,000

# Per BERT layer at 128 tokens: QKV 128*768*2304, QK^T 12 heads * 128*128*64, AV the
# same, output dense 128*768*768, FFN 128*768*3072 twice; then pooler 768*768 and
# classifier 768*2.
BERT_LAYER_MACS = (
    128 * 768 * 2304 + 2 * 12 * 128 * 128 * 64 + 128 * 768 * 768 + 2 * 128 * 768 * 3072
)  # 931,135,488
BERT_MACS = 12 * BERT_LAYER_MACS + 768 * 768 + 768 * 2  # 11,174,217,216

# name: (reference params, reference fwd MACs, closed-form fwd MACs)
MODELS = {
    "mobilenet_v2": (3_504_872, 0.30e9, mobilenet_v2_macs()),
    "densenet121": (7_978_856, 2.83e9, densenet121_macs()),
    # AuxLogits: conv0 768*128 + BN 256, conv1 128*768*25 + BN 1536, fc 768*1000 + 1000.
    "inception_v3": (
        27_161_264 - (768 * 128 + 256 + 128 * 768 * 25 + 1536 + 768 * 1000 + 1000),
        5.71e9,
        INCEPTION_V3_MACS,
    ),
    # Embedding 10000*650; LSTMs 2 * (4*650*(650+650) + 8*650); decoder 650*10000 + 10000.
    "lstm_ptb": (
        10000 * 650 + 2 * (4 * 650 * 1300 + 8 * 650) + 650 * 10000 + 10000,
        LSTM_PTB_MACS,
        LSTM_PTB_MACS,
    ),
    "bert_base": (109_482_240 + 768 * 2 + 2, 11.2e9, BERT_MACS),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_parameters_and_forward_macs_match_the_references(name: str) -> None:
    ref_params, ref_macs, closed_form = MODELS[name]
    _, graph = model(name)
    assert params(graph) == ref_params
    macs = fwd_macs(graph)
    assert macs == closed_form
    assert abs(macs - ref_macs) / ref_macs < 0.01


def fwd_macs_by(graph: OpGraph, key: Callable[[str], str]) -> dict[str, int]:
    """Forward GEMM MACs summed by ``key(layer name)``."""
    totals: dict[str, int] = defaultdict(int)
    for op in graph.ops:
        if isinstance(op, GemmOp) and op.phase is Phase.FWD:
            totals[key(op.layer)] += op.macs
    return dict(totals)


def test_module_macs_match_the_hand_counts() -> None:
    _, inception = model("inception_v3")
    assert fwd_macs_by(inception, lambda layer: layer.split(".")[0]) == INCEPTION_V3_MODULE_MACS
    _, lstm = model("lstm_ptb")
    # Each LSTM layer: 35 steps x (650 inputs + 650 hidden) x 2600 gates.
    assert fwd_macs_by(lstm, lambda layer: layer) == {
        "rnn.l0": 35 * 1300 * 2600,
        "rnn.l1": 35 * 1300 * 2600,
        "decoder": 35 * 650 * 10000,
    }
    _, bert = model("bert_base")
    by_layer = fwd_macs_by(bert, lambda layer: ".".join(layer.split(".")[:3]))
    assert by_layer == {
        **{f"encoder.layer.{i}": BERT_LAYER_MACS for i in range(12)},
        "pooler.dense": 768 * 768,
        "classifier": 768 * 2,
    }


# -- hand-computed shapes ---------------------------------------------------------------


def test_mobilenet_v2_depthwise_convs_are_one_gemm_per_channel() -> None:
    infos, graph = model("mobilenet_v2", batch=2)
    # features.2: 16 -> 96 expansion at 112x112, depthwise 3x3 stride 2 -> 56x56.
    assert gemm(graph, "features.2.conv.1.0.fwd") == (2 * 56 * 56, 1, 9, 96)
    assert gemm(graph, "features.2.conv.1.0.dw") == (1, 9, 2 * 56 * 56, 96)
    # features.14 (first 160-channel block): 96 -> 576, depthwise stride 2, 14 -> 7.
    assert gemm(graph, "features.14.conv.1.0.fwd") == (2 * 7 * 7, 1, 9, 576)
    # features.1 (t = 1): the depthwise conv comes first, on the 32 stem channels.
    assert gemm(graph, "features.1.conv.0.0.fwd") == (2 * 112 * 112, 1, 9, 32)
    # A projection 1x1 conv is an ordinary GEMM: features.14 576 -> 160 at 7x7.
    assert gemm(graph, "features.14.conv.2.fwd") == (2 * 49, 160, 576, 1)
    assert infos["features.17.conv.3"].out_shape.dims == (320, 7, 7)
    # Ten residual adds, one per stride-1 same-width block: stages 24, 32, 64, 96, 160.
    assert sum(1 for n in infos if n.endswith(".add")) == 1 + 2 + 3 + 2 + 2


def test_densenet121_concat_widths_and_dense_layer_convs() -> None:
    infos, graph = model("densenet121", batch=2)
    # Block ends: 64 + 6*32 = 256 at 56x56; 128 + 12*32 = 512 at 28x28;
    # 256 + 24*32 = 1024 at 14x14; 512 + 16*32 = 1024 at 7x7.
    assert infos["features.denseblock1.denselayer6.concat"].out_shape.dims == (256, 56, 56)
    assert infos["features.denseblock2.denselayer12.concat"].out_shape.dims == (512, 28, 28)
    assert infos["features.denseblock3.denselayer24.concat"].out_shape.dims == (1024, 14, 14)
    assert infos["features.denseblock4.denselayer16.concat"].out_shape.dims == (1024, 7, 7)
    # denseblock2.denselayer5 reads 128 + 4*32 = 256 channels at 28x28.
    assert infos["features.denseblock2.denselayer5.norm1"].in_shapes[0].dims == (256, 28, 28)
    assert gemm(graph, "features.denseblock2.denselayer5.conv1.fwd") == (2 * 784, 128, 256, 1)
    assert gemm(graph, "features.denseblock2.denselayer5.conv2.fwd") == (2 * 784, 32, 128 * 9, 1)
    # transition2: 512 -> 256 1x1 conv at 28x28, then 2x2 average pool to 14x14.
    assert gemm(graph, "features.transition2.conv.fwd") == (2 * 784, 256, 512, 1)
    assert infos["features.transition2.pool"].out_shape.dims == (256, 14, 14)


def test_inception_v3_mixed_5b_and_branch_convs() -> None:
    infos, graph = model("inception_v3", batch=2)
    # Stem: 299 -> 149 -> 147 -> 147 -> 73 -> 73 -> 71 -> 35.
    assert infos["maxpool2"].out_shape.dims == (192, 35, 35)
    # Mixed_5b: 64 (1x1) + 64 (5x5) + 96 (3x3 dbl) + 32 (pool) = 256 channels.
    assert infos["Mixed_5b.concat"].out_shape.dims == (256, 35, 35)
    # branch5x5_2: 48 -> 64, 5x5 padding 2 at 35x35.
    assert gemm(graph, "Mixed_5b.branch5x5_2.conv.fwd") == (2 * 35 * 35, 64, 48 * 25, 1)
    # Mixed_6b.branch7x7_2: 128 -> 128, 1x7 padding (0, 3) at 17x17.
    assert gemm(graph, "Mixed_6b.branch7x7_2.conv.fwd") == (2 * 17 * 17, 128, 128 * 7, 1)
    assert infos["Mixed_6a.concat"].out_shape.dims == (384 + 96 + 288, 17, 17)
    assert infos["Mixed_7a.concat"].out_shape.dims == (320 + 192 + 768, 8, 8)
    assert infos["Mixed_7c.concat"].out_shape.dims == (320 + 768 + 768 + 192, 8, 8)


def test_lstm_ptb_unrolls_35_steps_of_the_gates_gemm() -> None:
    infos, graph = model("lstm_ptb", batch=4)
    for layer in ("rnn.l0", "rnn.l1"):
        steps = [op for op in graph.ops if isinstance(op, GemmOp) and op.layer == layer]
        fwd = [op for op in steps if op.phase is Phase.FWD]
        assert len(fwd) == 35
        # [x_t, h_{t-1}] (650 + 650) times W^T -> the 4 x 650 gates, per batch row.
        assert {(op.m, op.n, op.k, op.count) for op in fwd} == {(4, 2600, 1300, 1)}
        # One dW GEMM over all steps: 2600 x 1300, reduced over batch * 35.
        assert gemm(graph, f"{layer}.dw") == (2600, 1300, 4 * 35, 1)
    assert infos["rnn.l1"].out_shape.dims == (35, 650)
    assert gemm(graph, "decoder.fwd") == (4 * 35, 10000, 650, 1)
    assert infos["decoder"].out_shape.dims == (35, 10000)


def test_bert_attention_heads_and_ffn_gemms() -> None:
    infos, graph = model("bert_base", batch=2)
    # Per head: Q K^T is 128 x 128 over d_head = 768 / 12 = 64, batch * 12 of them.
    assert gemm(graph, "encoder.layer.0.attention.qk.fwd") == (128, 128, 64, 2 * 12)
    assert gemm(graph, "encoder.layer.0.attention.av.fwd") == (128, 64, 128, 2 * 12)
    assert gemm(graph, "encoder.layer.0.attention.qkv.fwd") == (2 * 128, 3 * 768, 768, 1)
    assert gemm(graph, "encoder.layer.11.intermediate.dense.fwd") == (2 * 128, 3072, 768, 1)
    assert gemm(graph, "encoder.layer.11.output.dense.fwd") == (2 * 128, 768, 3072, 1)
    assert gemm(graph, "pooler.dense.fwd") == (2, 768, 768, 1)
    assert sum(1 for n in infos if n.endswith(".attention")) == 12
    assert infos["embeddings.add"].out_shape.dims == (128, 768)


# -- CIFAR variants ---------------------------------------------------------------------

# name: (classifier, CIFAR-10 params by hand, feature maps that must come out so)
CIFAR = {
    # 3,504,872 - FC 1280*1000 + 1000 + FC 1280*10 + 10.
    "mobilenet_v2": (
        "classifier.1",
        3_504_872 - 1_281_000 + 12_810,
        {"features.3.add": (24, 32, 32), "features.18.2": (1280, 4, 4)},
    ),
    # 7,978,856 - 7x7 stem 3*64*49 + 3x3 stem 3*64*9 - FC 1,025,000 + FC 10,250.
    "densenet121": (
        "classifier",
        7_978_856 - 3 * 64 * 49 + 3 * 64 * 9 - 1_025_000 + 10_250,
        {
            "features.denseblock1.denselayer6.concat": (256, 32, 32),
            "features.denseblock4.denselayer16.concat": (1024, 4, 4),
        },
    ),
    # 23,834,568 - FC 2048*1000 + 1000 + FC 2048*10 + 10.
    "inception_v3": (
        "fc",
        23_834_568 - 2_049_000 + 20_490,
        {
            "Conv2d_4a_3x3.relu": (192, 30, 30),
            "Mixed_5b.concat": (256, 30, 30),
            "Mixed_6a.concat": (768, 14, 14),
            "Mixed_7c.concat": (2048, 6, 6),
        },
    ),
}


@pytest.mark.parametrize("name", sorted(CIFAR))
def test_cifar_variants_take_32x32_and_predict_10_or_100_classes(name: str) -> None:
    classifier, cifar10_params, maps = CIFAR[name]
    infos, graph = model(name, "cifar10")
    assert infos[classifier].out_shape.dims == (10,)
    assert params(graph) == cifar10_params
    for layer, dims in maps.items():
        assert infos[layer].out_shape.dims == dims, layer
    infos100, _ = model(name, "cifar100")
    assert infos100[classifier].out_shape.dims == (100,)


def test_pipeline_toy_workloads() -> None:
    """LeNet-5: 61,706 parameters (C1 156, C3 2,416, C5 48,120, F6 10,164, output 850)
    and 416,520 forward MACs (C1 28x28x6x25, C3 10x10x16x150, C5 120x400, F6 120x84,
    output 84x10); linear5: five bias-free 4096x4096 layers."""
    from accelsim.lowering.infer import load_model
    from accelsim.lowering.stats import model_stats

    lenet = model_stats(*load_model(ROOT / "workloads" / "lenet5.yaml"))
    assert lenet.params == 156 + 2_416 + 48_120 + 10_164 + 850
    assert lenet.forward_macs == 28 * 28 * 6 * 25 + 10 * 10 * 16 * 150 + 120 * 400 + 120 * 84 + 840
    linear = model_stats(*load_model(ROOT / "workloads" / "linear5.yaml"))
    assert linear.params == 5 * 4096 * 4096
    assert linear.forward_macs == 5 * 4096 * 4096
