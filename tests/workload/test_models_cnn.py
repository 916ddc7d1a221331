"""The CNN workload tables: AlexNet, VGG-13/16, ResNet-34/50/101/152.

Parameter counts must equal torchvision's exactly, forward MACs must be within
1 % of torchvision's documented figure, a few layers' GEMM shapes are checked
against values worked out by hand, and every CIFAR variant must load.
"""

from __future__ import annotations

import re

import pytest

from accelsim.graph.ops import GemmOp, OpGraph, Phase
from accelsim.lowering.shapes import LayerInfo
from accelsim.workload.model import Conv2d
from tests.conftest import fwd_macs, model, params

# Reference values from the torchvision model documentation
# (https://pytorch.org/vision/stable/models.html, "Table of all available
# classification weights": "Params" and "GFLOPS", the latter really GMACs at
# batch 1, 224x224).  Parameters must match exactly, MACs within 1 % (the
# documentation rounds to two decimals: AlexNet's 0.714 G is listed as 0.71).
REFERENCE = {
    # model: (parameters, forward GMACs per image)
    "alexnet": (61_100_840, 0.71),
    "vgg13": (133_047_848, 11.31),
    "vgg16": (138_357_544, 15.47),
    "resnet34": (21_797_672, 3.66),
    "resnet50": (25_557_032, 4.09),
    "resnet101": (44_549_160, 7.80),
    "resnet152": (60_192_808, 11.51),
}
MODELS = list(REFERENCE)
# The classifier layer whose out_features the CIFAR variants change.
HEAD = {"alexnet": "classifier.6", "vgg13": "classifier.6", "vgg16": "classifier.6"}


def gemm(graph: OpGraph, name: str) -> tuple[int, int, int]:
    """(m, n, k) of the single GEMM op ``name``, e.g. ``conv1.fwd``."""
    (op,) = [op for op in graph.ops if isinstance(op, GemmOp) and op.name == name]
    assert op.count == 1
    return (op.m, op.n, op.k)


def out_dims(infos: dict[str, LayerInfo], layer: str) -> tuple[int, ...]:
    return infos[layer].out_shape.dims


@pytest.mark.parametrize("name", MODELS)
def test_parameters_and_forward_macs_match_torchvision(name: str) -> None:
    ref_params, ref_gmacs = REFERENCE[name]
    _, graph = model(name)
    assert params(graph) == ref_params
    assert fwd_macs(graph) == pytest.approx(ref_gmacs * 1e9, rel=0.01)


def test_alexnet_shapes() -> None:
    infos, graph = model("alexnet")
    # conv1 11x11/4 pad 2: (224 + 4 - 11) // 4 + 1 = 55; 3x3/2 pools: 55 -> 27, 27 -> 13, 13 -> 6.
    assert out_dims(infos, "features.0") == (64, 55, 55)
    assert out_dims(infos, "features.2") == (64, 27, 27)
    assert out_dims(infos, "features.5") == (192, 13, 13)
    assert out_dims(infos, "features.12") == (256, 6, 6)
    assert gemm(graph, "features.0.fwd") == (55 * 55, 64, 3 * 11 * 11)
    assert gemm(graph, "features.3.fwd") == (27 * 27, 192, 64 * 5 * 5)
    assert gemm(graph, "classifier.1.fwd") == (1, 4096, 256 * 6 * 6)  # fc6
    # Forward MACs by hand: conv1 3025*64*363 = 70,276,800; conv2 729*192*1600 =
    # 223,948,800; conv3 169*384*1728 = 112,140,288; conv4 169*256*3456 = 149,520,384;
    # conv5 169*256*2304 = 99,680,256; fc6 9216*4096 = 37,748,736; fc7 16,777,216;
    # fc8 4,096,000.  Total 714,188,480 (torchvision lists 0.71 G).
    assert fwd_macs(graph) == 714_188_480


def test_vgg_shapes() -> None:
    infos, graph = model("vgg16")
    # Five 2x2/2 pools: 224 -> 7, so fc6 reads 512*7*7 = 25,088 features.
    assert out_dims(infos, "features.30") == (512, 7, 7)
    assert gemm(graph, "classifier.0.fwd") == (1, 4096, 25_088)  # fc6
    assert gemm(graph, "classifier.6.fwd") == (1, 1000, 4096)  # fc8
    assert gemm(graph, "features.0.fwd") == (224 * 224, 64, 3 * 9)  # conv1_1
    assert gemm(graph, "features.28.fwd") == (14 * 14, 512, 512 * 9)  # conv5_3
    # Forward MACs by hand: sum of H*W*Cout*Cin*9 over configuration D, plus the FCs.
    cfg = [(224, 3, 64), (224, 64, 64), (112, 64, 128), (112, 128, 128)]
    cfg += [(56, 128, 256)] + [(56, 256, 256)] * 2 + [(28, 256, 512)] + [(28, 512, 512)] * 2
    cfg += [(14, 512, 512)] * 3
    convs = sum(hw * hw * cin * cout * 9 for hw, cin, cout in cfg)  # 15,346,630,656
    conv_layers = [i.layer for i in infos.values() if isinstance(i.layer, Conv2d)]
    conv_names = {n for n, i in infos.items() if isinstance(i.layer, Conv2d)}
    fwd = [op for op in graph.ops if isinstance(op, GemmOp) and op.phase is Phase.FWD]
    assert sum(op.macs for op in fwd if op.layer in conv_names) == convs
    assert fwd_macs(graph) == convs + 25_088 * 4096 + 4096 * 4096 + 4096 * 1000
    assert len(conv_layers) == 13 and all(layer.bias for layer in conv_layers)

    infos13, graph13 = model("vgg13")
    # Configuration B: 10 convs, the last pool is features.24.
    assert sum(i.layer.kind == "conv2d" for i in infos13.values()) == 10
    assert out_dims(infos13, "features.24") == (512, 7, 7)
    assert gemm(graph13, "classifier.0.fwd") == (1, 4096, 25_088)


def blocks_per_stage(infos: dict[str, LayerInfo]) -> list[int]:
    """Residual blocks per stage, counted from the ``layerS.B.add`` layers."""
    found = [re.fullmatch(r"layer(\d)\.(\d+)\.add", n) for n in infos]
    stages = [int(m.group(1)) for m in found if m]
    return [stages.count(s) for s in (1, 2, 3, 4)]


@pytest.mark.parametrize(
    ("name", "blocks"),
    [
        ("resnet34", [3, 4, 6, 3]),
        ("resnet50", [3, 4, 6, 3]),
        ("resnet101", [3, 4, 23, 3]),
        ("resnet152", [3, 8, 36, 3]),
    ],
)
def test_resnet_block_counts(name: str, blocks: list[int]) -> None:
    infos, _ = model(name)
    assert blocks_per_stage(infos) == blocks
    # One projection shortcut per stage, except ResNet-34's layer1 (64 -> 64, stride 1).
    shortcuts = [n for n in infos if n.endswith(".downsample.conv")]
    assert len(shortcuts) == (3 if name == "resnet34" else 4)
    # The weight layers on the main path give the name: conv1, 2 or 3 convs per
    # block and fc (the projection shortcuts are not counted).
    weights = [n for n, i in infos.items() if i.layer.kind in ("conv2d", "linear")]
    main_path = [n for n in weights if not n.endswith(".downsample.conv")]
    assert len(main_path) == int(name.removeprefix("resnet"))


def test_resnet34_shapes() -> None:
    infos, graph = model("resnet34")
    # layer3.0: 128x28x28 in, 3x3 stride 2 -> 256x14x14; 1x1 stride-2 shortcut.
    assert gemm(graph, "layer3.0.conv1.fwd") == (14 * 14, 256, 128 * 9)
    assert gemm(graph, "layer3.0.conv2.fwd") == (14 * 14, 256, 256 * 9)
    assert gemm(graph, "layer3.0.downsample.conv.fwd") == (14 * 14, 256, 128)
    assert out_dims(infos, "layer4.2.relu2") == (512, 7, 7)
    assert gemm(graph, "fc.fwd") == (1, 1000, 512)


def test_resnet50_bottleneck_shapes() -> None:
    infos, graph = model("resnet50")
    assert out_dims(infos, "maxpool") == (64, 56, 56)
    # layer1.0 widens 64 -> 256, so it has a stride-1 projection shortcut.
    assert gemm(graph, "layer1.0.downsample.conv.fwd") == (56 * 56, 256, 64)
    # layer2.0 reads 256x56x56.  v1.5: the 1x1 reduce keeps 56x56, the 3x3 has stride 2
    # ((56 + 2 - 3) // 2 + 1 = 28), the 1x1 expand and the stride-2 shortcut give 512x28x28.
    assert gemm(graph, "layer2.0.conv1.fwd") == (56 * 56, 128, 256)
    assert gemm(graph, "layer2.0.conv2.fwd") == (28 * 28, 128, 128 * 9)
    assert gemm(graph, "layer2.0.conv3.fwd") == (28 * 28, 512, 128)
    assert gemm(graph, "layer2.0.downsample.conv.fwd") == (28 * 28, 512, 256)
    assert infos["layer2.0.add"].inputs == ("layer2.0.bn3", "layer2.0.downsample.bn")
    # Identity shortcut in the next block: it adds layer2.0's output.
    assert infos["layer2.1.add"].inputs == ("layer2.1.bn3", "layer2.0.relu3")
    assert out_dims(infos, "layer4.2.relu3") == (2048, 7, 7)
    assert gemm(graph, "fc.fwd") == (1, 1000, 2048)


def test_resnet152_shapes() -> None:
    infos, graph = model("resnet152")
    # The last block of each stage exists and the next index does not.
    for stage, last in ((1, 2), (2, 7), (3, 35), (4, 2)):
        assert f"layer{stage}.{last}.relu3" in infos
        assert f"layer{stage}.{last + 1}.conv1" not in infos
    assert gemm(graph, "layer3.35.conv2.fwd") == (14 * 14, 256, 256 * 9)
    assert gemm(graph, "layer4.0.downsample.conv.fwd") == (7 * 7, 2048, 1024)


# Parameters the CIFAR variants remove, worked out by hand:
#   ResNet stem 7x7 -> 3x3: 64*3*49 - 64*3*9 = 7,680.
#   fc to 10 classes: 512-wide (ResNet-34) 513,000 - 5,130 = 507,870;
#   2048-wide (Bottleneck ResNets) 2,049,000 - 20,490 = 2,028,510;
#   4096-wide fc8 (AlexNet, VGG) 4,097,000 - 40,970 = 4,056,030.
#   VGG fc6 reads 512 instead of 25,088 features: 24,576*4096 = 100,663,296.
#   AlexNet conv1 11x11/4 -> 3x3/1: (64*363 + 64) - (64*27 + 64) = 21,504; fc6 reads
#   256*3*3 = 2,304 instead of 9,216 features: 6,912*4096 = 28,311,552.
CIFAR10_REMOVED = {
    "alexnet": 21_504 + 28_311_552 + 4_056_030,
    "vgg13": 100_663_296 + 4_056_030,
    "vgg16": 100_663_296 + 4_056_030,
    "resnet34": 7_680 + 507_870,
    "resnet50": 7_680 + 2_028_510,
    "resnet101": 7_680 + 2_028_510,
    "resnet152": 7_680 + 2_028_510,
}


@pytest.mark.parametrize("name", MODELS)
def test_cifar10_variant(name: str) -> None:
    infos, graph = model(name, "cifar10")
    _, imagenet = model(name)
    assert out_dims(infos, HEAD.get(name, "fc")) == (10,)
    assert params(graph) == params(imagenet) - CIFAR10_REMOVED[name]
    # 32x32 instead of 224x224: at most 40 % of the ImageNet work (ResNets ~32 %,
    # AlexNet ~28 %, VGG ~2 %).
    assert fwd_macs(graph) < 0.4 * fwd_macs(imagenet)
    infos100, _ = model(name, "cifar100")
    assert out_dims(infos100, HEAD.get(name, "fc")) == (100,)


def test_cifar_shapes_by_hand() -> None:
    infos, graph = model("alexnet", "cifar10")
    # 3x3/1 conv1 keeps 32x32; pools 32 -> 15 -> 7 -> 3.
    assert out_dims(infos, "features.0") == (64, 32, 32)
    assert out_dims(infos, "features.12") == (256, 3, 3)
    assert gemm(graph, "classifier.1.fwd") == (1, 4096, 2304)

    infos, graph = model("vgg16", "cifar10")
    assert out_dims(infos, "features.30") == (512, 1, 1)
    assert gemm(graph, "classifier.0.fwd") == (1, 4096, 512)
    # Every conv map shrinks by (224 / 32)^2 = 49: 15,346,630,656 / 49 = 313,196,544,
    # plus fc6 512*4096, fc7 4096*4096, fc8 4096*10.
    assert fwd_macs(graph) == 313_196_544 + 512 * 4096 + 4096 * 4096 + 4096 * 10

    infos, graph = model("resnet50", "cifar10")
    assert out_dims(infos, "conv1") == (64, 32, 32)
    assert out_dims(infos, "maxpool") == (64, 32, 32)
    assert gemm(graph, "layer2.0.conv2.fwd") == (16 * 16, 128, 128 * 9)
    assert out_dims(infos, "layer4.2.relu3") == (2048, 4, 4)
