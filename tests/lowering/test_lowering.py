"""Lowering: GEMM shapes per layer kind, MAC conservation, stash and updates."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from accelsim.config.run import AssignmentPolicy, OptimizerKind, StridedDx
from accelsim.config.validate import validate_data
from accelsim.graph.ops import GemmOp, OpGraph, Phase, VectorOp
from accelsim.lowering.infer import infer_shapes
from accelsim.lowering.rules.conv import strided_dx_shapes
from accelsim.workload.loader import load_workload
from accelsim.workload.model import Workload
from tests.conftest import ROOT, assign, make_hw

RESNET18_PARAMS = 11_689_512  # torchvision.models.resnet18, documented parameter count
RESNET18_FWD_MACS = 1_814_073_344  # per image at 224x224 (torchvision: 1.81 GFLOPS as MACs)


def lower(
    data: dict[str, Any] | Path,
    batch: int = 4,
    strided_dx: StridedDx = StridedDx.SKIP_ZEROS,
    optimizer: OptimizerKind = OptimizerKind.SGD,
) -> OpGraph:
    workload = (
        load_workload(data) if isinstance(data, Path) else validate_data(Workload, data, "test")
    )
    infos = infer_shapes(workload, "test")
    return assign(AssignmentPolicy.SINGLE, infos, workload, make_hw(), batch, strided_dx, optimizer)


def gemms(graph: OpGraph, phase: Phase | None = None) -> list[GemmOp]:
    return [
        op for op in graph.ops if isinstance(op, GemmOp) and (phase is None or op.phase is phase)
    ]


def macs(graph: OpGraph, layer: str, phase: Phase) -> int:
    return sum(op.macs for op in gemms(graph, phase) if op.layer == layer)


def net(input_: dict[str, Any], *layers: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "t",
        "input": input_,
        "layers": [*layers, {"name": "loss", "kind": "cross_entropy"}],
    }


def test_dense_layers_dx_and_dw_equal_forward_macs() -> None:
    graph = lower(ROOT / "workloads" / "mlp.yaml", batch=16)
    for layer in ("fc1", "fc2", "fc3"):
        fwd = macs(graph, layer, Phase.FWD)
        assert fwd == 16 * {"fc1": 784 * 2048, "fc2": 2048 * 2048, "fc3": 2048 * 10}[layer]
        assert macs(graph, layer, Phase.BWD_WEIGHT) == fwd
    assert macs(graph, "fc1", Phase.BWD_INPUT) == 0  # first layer: no dX
    assert macs(graph, "fc2", Phase.BWD_INPUT) == macs(graph, "fc2", Phase.FWD)
    assert macs(graph, "fc3", Phase.BWD_INPUT) == macs(graph, "fc3", Phase.FWD)


def test_linear_gemm_shapes() -> None:
    graph = lower(
        net(
            {"kind": "vector", "features": 300},
            {"name": "a", "kind": "linear", "out_features": 50},
            {"name": "b", "kind": "linear", "out_features": 20},
        ),
        batch=8,
    )
    shapes = {(op.name): (op.m, op.n, op.k) for op in gemms(graph)}
    assert shapes["b.fwd"] == (8, 20, 50)
    assert shapes["b.dx"] == (8, 50, 20)  # dX = dY . W^T
    assert shapes["b.dw"] == (20, 50, 8)  # dW^T = dY^T . X, reduction over the batch


def test_resnet18_parameters_and_macs() -> None:
    graph = lower(ROOT / "workloads" / "resnet18.yaml", batch=1)
    assert sum(p.weight.elements for p in graph.parameters) == RESNET18_PARAMS
    fwd = sum(op.macs for op in gemms(graph, Phase.FWD))
    assert fwd == RESNET18_FWD_MACS
    assert sum(op.macs for op in gemms(graph, Phase.BWD_WEIGHT)) == fwd
    conv1 = 112 * 112 * 64 * 3 * 7 * 7
    # skip_zeros makes every strided dX exact, so dX = forward minus conv1 (no dX).
    assert sum(op.macs for op in gemms(graph, Phase.BWD_INPUT)) == fwd - conv1


def test_resnet50_style_bottleneck_conv_shapes() -> None:
    graph = lower(
        net(
            {"kind": "image", "channels": 64, "height": 56, "width": 56},
            {"name": "c1", "kind": "conv2d", "out_channels": 64, "kernel": 1},
            {"name": "c2", "kind": "conv2d", "out_channels": 64, "kernel": 3, "padding": 1},
            {"name": "c3", "kind": "conv2d", "out_channels": 256, "kernel": 1},
            {"name": "pool", "kind": "global_avgpool"},
            {"name": "fc", "kind": "linear", "out_features": 10},
        ),
        batch=2,
    )
    shapes = {op.name: (op.m, op.n, op.k, op.count) for op in gemms(graph)}
    assert shapes["c1.fwd"] == (2 * 56 * 56, 64, 64, 1)
    assert shapes["c2.fwd"] == (2 * 56 * 56, 64, 576, 1)
    assert shapes["c3.fwd"] == (2 * 56 * 56, 256, 64, 1)
    assert shapes["c3.dx"] == (2 * 56 * 56, 64, 256, 1)
    assert shapes["c2.dw"] == (64, 576, 2 * 56 * 56, 1)


def test_depthwise_conv_lowers_to_one_gemm_per_channel() -> None:
    graph = lower(
        net(
            {"kind": "image", "channels": 32, "height": 16, "width": 16},
            {"name": "pw", "kind": "conv2d", "out_channels": 32, "kernel": 1},
            {
                "name": "dw",
                "kind": "conv2d",
                "out_channels": 32,
                "kernel": 3,
                "padding": 1,
                "groups": 32,
            },
            {"name": "flat", "kind": "flatten"},
            {"name": "fc", "kind": "linear", "out_features": 10},
        ),
        batch=2,
    )
    shapes = {op.name: (op.m, op.n, op.k, op.count) for op in gemms(graph)}
    assert shapes["dw.fwd"] == (2 * 16 * 16, 1, 9, 32)
    assert shapes["dw.dx"] == (2 * 16 * 16, 1, 9, 32)
    assert shapes["dw.dw"] == (1, 9, 2 * 16 * 16, 32)
    assert macs(graph, "dw", Phase.FWD) == 2 * 16 * 16 * 32 * 9


@pytest.mark.parametrize(
    ("h", "kernel", "stride", "padding"),
    [(56, 3, 2, 1), (56, 1, 2, 0), (224, 7, 2, 3), (28, 3, 2, 1), (17, 3, 2, 0), (32, 5, 3, 2)],
)
def test_strided_dx_skip_zeros_matches_forward_macs(
    h: int, kernel: int, stride: int, padding: int
) -> None:
    p = (h + 2 * padding - kernel) // stride + 1
    shapes = strided_dx_shapes(h, h, (kernel, kernel), (stride, stride), (padding, padding), (1, 1))
    dx = sum(pos * taps * mult for pos, taps, mult in shapes)
    fwd = p * p * kernel * kernel
    # Every forward MAC is one dX MAC; the sub-convolutions' borders add or drop
    # a few taps when the input size is not aligned to the stride.
    assert abs(dx - fwd) <= 0.2 * fwd
    if h % stride == 0 and kernel % stride in (0, 1) and padding < stride:
        assert dx == fwd


def test_strided_dx_zero_insert_pays_for_zeros() -> None:
    layers = (
        {"name": "a", "kind": "conv2d", "out_channels": 8, "kernel": 3, "padding": 1},
        {"name": "b", "kind": "conv2d", "out_channels": 8, "kernel": 3, "stride": 2, "padding": 1},
        {"name": "pool", "kind": "global_avgpool"},
        {"name": "fc", "kind": "linear", "out_features": 10},
    )
    image = {"kind": "image", "channels": 8, "height": 32, "width": 32}
    skip = lower(net(image, *layers), strided_dx=StridedDx.SKIP_ZEROS)
    dense = lower(net(image, *layers), strided_dx=StridedDx.ZERO_INSERT)
    assert macs(skip, "b", Phase.BWD_INPUT) == macs(skip, "b", Phase.FWD)
    assert macs(dense, "b", Phase.BWD_INPUT) == 4 * macs(skip, "b", Phase.FWD)


def test_lstm_unrolls_over_time() -> None:
    graph = lower(
        net(
            {"kind": "tokens", "length": 5},
            {"name": "emb", "kind": "embedding", "num_embeddings": 100, "embedding_dim": 16},
            {"name": "lstm", "kind": "lstm", "hidden_size": 32},
            {"name": "fc", "kind": "linear", "out_features": 100},
        ),
        batch=3,
    )
    fwd = [op for op in gemms(graph, Phase.FWD) if op.layer == "lstm"]
    assert [(op.m, op.n, op.k) for op in fwd] == [(3, 128, 48)] * 5
    for earlier, later in itertools.pairwise(fwd):
        assert later.op_id > earlier.op_id
        assert any(graph.ops[d].op_id > earlier.op_id for d in later.deps)  # waits for h_{t-1}
    dw = [op for op in gemms(graph, Phase.BWD_WEIGHT) if op.layer == "lstm"]
    assert [(op.m, op.n, op.k) for op in dw] == [(128, 48, 15)]
    dx = [op for op in gemms(graph, Phase.BWD_INPUT) if op.layer == "lstm"]
    assert len(dx) == 5 and dx[0].n == 16 + 32 and dx[-1].n == 16  # t = 0 needs no dh_{-1}


def test_attention_heads_lower_to_batched_gemms() -> None:
    graph = lower(
        net(
            {"kind": "tokens", "length": 128},
            {"name": "emb", "kind": "embedding", "num_embeddings": 1000, "embedding_dim": 768},
            {"name": "attn", "kind": "attention", "heads": 12},
            {"name": "fc", "kind": "linear", "out_features": 2},
        ),
        batch=2,
    )
    shapes = {op.name: (op.m, op.n, op.k, op.count) for op in gemms(graph)}
    assert shapes["attn.qkv.fwd"] == (256, 2304, 768, 1)
    assert shapes["attn.qk.fwd"] == (128, 128, 64, 24)
    assert shapes["attn.av.fwd"] == (128, 64, 128, 24)
    assert shapes["attn.out.fwd"] == (256, 768, 768, 1)
    assert shapes["attn.qk.dq"] == (128, 64, 128, 24)
    softmax = [op for op in graph.ops if op.name == "attn.softmax.fwd"]
    assert isinstance(softmax[0], VectorOp) and softmax[0].elements == 2 * 12 * 128 * 128


def test_updates_count_optimizer_state() -> None:
    for optimizer, states in (
        (OptimizerKind.SGD, 0),
        (OptimizerKind.MOMENTUM, 1),
        (OptimizerKind.ADAM, 2),
    ):
        graph = lower(ROOT / "workloads" / "mlp.yaml", optimizer=optimizer)
        updates = [op for op in graph.ops if op.phase is Phase.UPDATE]
        assert len(updates) == len(graph.parameters) == 6  # weight and bias of 3 layers
        assert all(isinstance(u, VectorOp) and len(u.reads) == 2 + states for u in updates)
        last_backward = max(
            op.op_id for op in graph.ops if op.phase in (Phase.BWD_INPUT, Phase.BWD_WEIGHT)
        )
        assert all(op.op_id > last_backward for op in updates)


def test_stash_holds_what_backward_rereads() -> None:
    graph = lower(ROOT / "workloads" / "mlp.yaml")
    assert graph.stashed == {(t, 0) for t in ("input", "relu1.out", "relu2.out", "loss.probs")}


def test_residual_gradients_are_accumulated() -> None:
    graph = lower(ROOT / "workloads" / "resnet18.yaml", batch=1)
    accum = [op.name for op in graph.ops if op.name.endswith(".grad_accum")]
    assert "maxpool.grad_accum" in accum and "layer1.0.relu2.grad_accum" in accum


def test_word_sizes_follow_tensor_class() -> None:
    workload = load_workload(ROOT / "workloads" / "mlp.yaml")
    hw = make_hw(
        **{
            "word_bytes.activations": 1,
            "word_bytes.weights": 4,
            "word_bytes.gradients": 2,
            "word_bytes.optimizer_state": 8,
        }
    )
    graph = assign(
        AssignmentPolicy.SINGLE,
        infer_shapes(workload, "t"),
        workload,
        hw,
        2,
        StridedDx.SKIP_ZEROS,
        OptimizerKind.MOMENTUM,
    )
    fc2 = next(op for op in gemms(graph) if op.name == "fc2.fwd")
    assert (fc2.a.word_bytes, fc2.b.word_bytes, fc2.c.word_bytes) == (1, 4, 1)
    update = next(op for op in graph.ops if op.name == "fc2.W.update")
    assert isinstance(update, VectorOp)
    # Weight, gradient and the momentum buffer, each at its class's word size.
    assert [a.tensor.word_bytes for a in update.reads] == [4, 2, 8]
    assert [a.bytes for a in update.reads] == [2048 * 2048 * w for w in (4, 2, 8)]


def test_cifar_variant_changes_input_stem_and_classes() -> None:
    from accelsim.config.loader import Override

    choose = Override("workload_variant", "cifar10", "run.yaml", "workload_variant")
    workload = load_workload(ROOT / "workloads" / "resnet18.yaml", variant=choose)
    infos = {i.layer.name: i for i in infer_shapes(workload, "t")}
    assert infos["conv1"].out_shape.dims == (64, 32, 32)
    assert infos["layer4.1.relu2"].out_shape.dims == (512, 4, 4)
    assert infos["fc"].out_shape.dims == (10,)
    graph = assign(
        AssignmentPolicy.SINGLE,
        tuple(infos.values()),
        workload,
        make_hw(),
        1,
        StridedDx.SKIP_ZEROS,
        OptimizerKind.SGD,
    )
    # CIFAR ResNet-18 (kuangliu/pytorch-cifar): 11,173,962 parameters.  Forward MACs by
    # hand: stem 32*32*64*27 = 1,769,472; layer1 4 * 32*32*64*576 = 150,994,944;
    # layers 2-4 each 134,217,728 (first conv, three convs, 1x1 shortcut); fc 5,120.
    assert sum(p.weight.elements for p in graph.parameters) == 11_173_962
    assert sum(op.macs for op in gemms(graph, Phase.FWD)) == 555_422_720


def test_unknown_variant_is_blamed_on_the_run_file() -> None:
    from accelsim.config.loader import Override
    from accelsim.errors import WorkloadError

    choose = Override("workload_variant", "cifar11", "run.yaml", "workload_variant")
    with pytest.raises(
        WorkloadError,
        match=r"^run.yaml: workload_variant: unknown workload "
        r"variant; did you mean 'cifar10'",
    ):
        load_workload(ROOT / "workloads" / "resnet18.yaml", variant=choose)


def test_dropout_keeps_a_bit_mask_and_token_select_picks_one_token() -> None:
    graph = lower(
        net(
            {"kind": "tokens", "length": 16},
            {"name": "emb", "kind": "embedding", "num_embeddings": 50, "embedding_dim": 64},
            {"name": "drop", "kind": "dropout", "rate": 0.1},
            {"name": "cls", "kind": "token_select"},
            {"name": "fc", "kind": "linear", "out_features": 2},
        ),
        batch=4,
    )
    ops = {op.name: op for op in graph.ops}
    drop_fwd, drop_bwd = ops["drop.fwd"], ops["drop.bwd"]
    assert isinstance(drop_fwd, VectorOp) and isinstance(drop_bwd, VectorOp)
    mask = drop_fwd.writes[1].tensor
    assert (mask.elements, mask.word_bytes) == (4 * 16 * 64 // 8, 1)
    assert mask.key in graph.stashed
    assert ops["cls.fwd"].elements == 4 * 64
    assert ops["cls.bwd"].elements == 4 * 16 * 64
    assert {op.m for op in gemms(graph) if op.layer == "fc"} == {4, 2}
