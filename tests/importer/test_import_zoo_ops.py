"""``accelsim import`` of the ops the zoo's last families write: ``torch.chunk`` as a
``SplitToSequence`` and its ``SequenceAt`` parts (ShuffleNetV2, MaxViT); Swin's
padding, ``torch.roll``, strided slices and attention within windows (Swin V1 and V2,
MaxViT).

Each graph is built here with ``onnx.helper``, or is a zoo fixture; each MAC count is
worked out by hand beside it. Needs only ``onnx``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("onnx")

import onnx
from onnx import TensorProto, helper

from accelsim.config.hardware import WordBytesSpec
from accelsim.config.run import StridedDx
from accelsim.errors import WorkloadError
from accelsim.graph.ops import GemmOp, OpGraph, Phase
from accelsim.importer.model_import import import_model
from accelsim.lowering.infer import infer_shapes
from accelsim.lowering.stats import model_stats
from accelsim.lowering.step import lower
from accelsim.workload.model import Workload
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "onnx"


def _save(path: Path, nodes: list[Any], inits: list[Any], shape: list[int]) -> Path:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]), path)
    return path


def _step(workload: Workload) -> OpGraph:
    """One sample's training step of ``workload``."""
    return lower(
        infer_shapes(workload, workload.name), workload, 1, WordBytesSpec(), StridedDx.SKIP_ZEROS
    )


def _forward_macs(step: OpGraph, prefix: str) -> dict[str, int]:
    """The forward GEMM MACs of each layer whose name starts with ``prefix``."""
    return {
        op.layer: op.macs
        for op in step.ops
        if isinstance(op, GemmOp) and op.phase is Phase.FWD and op.layer.startswith(prefix)
    }


def _chunk_graph(path: Path, split: list[int] | int, index: int, sizes: list[int]) -> Path:
    """input 1x3x8x8 -> Conv 3->8 1x1 -> SplitToSequence(split, axis 1), into parts of
    ``sizes`` -> the part at ``index`` and the part at 0 concatenated ->
    GlobalAveragePool -> Flatten -> Gemm (to 2)."""
    width = sizes[index] + sizes[0]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="/conv/Conv", kernel_shape=[1, 1]),
        helper.make_node("SplitToSequence", ["c", "s"], ["seq"], name="/block/split", axis=1),
        helper.make_node("SequenceAt", ["seq", "i"], ["a"], name="/block/getitem"),
        helper.make_node("SequenceAt", ["seq", "zero"], ["b"], name="/block/getitem_1"),
        helper.make_node("Concat", ["a", "b"], ["cat"], name="/block/cat", axis=1),
        helper.make_node("GlobalAveragePool", ["cat"], ["p"], name="/pool/GlobalAveragePool"),
        helper.make_node("Flatten", ["p"], ["f"], name="/Flatten"),
        helper.make_node("Gemm", ["f", "fw"], ["y"], name="/fc/Gemm", transB=1),
    ]
    split_dims = [] if isinstance(split, int) else [len(split)]
    split_values = [split] if isinstance(split, int) else split
    inits = [
        helper.make_tensor("w", TensorProto.FLOAT, [8, 3, 1, 1], [0.0] * 24),
        helper.make_tensor("s", TensorProto.INT64, split_dims, split_values),
        helper.make_tensor("i", TensorProto.INT64, [], [index]),
        helper.make_tensor("zero", TensorProto.INT64, [], [0]),
        helper.make_tensor("fw", TensorProto.FLOAT, [2, width], [0.0] * 2 * width),
    ]
    return _save(path, nodes, inits, [1, 3, 8, 8])


def test_chunk_parts_are_split_layers(tmp_path: Path) -> None:
    """``torch.chunk(x, 2, dim=1)`` of 8 channels (a scalar split of 4) and its last
    part taken by index -1: two ``split`` layers of sizes [4, 4], indices 1 and 0."""
    workload = import_model(_chunk_graph(tmp_path / "chunk.onnx", 4, -1, [4, 4])).workload
    rows = [layer.model_dump(exclude_defaults=True) for layer in workload.layers]
    assert rows[1:4] == [
        {"name": "block.split.1", "kind": "split", "sizes": [4, 4], "index": 1},
        {"name": "block.split.0", "inputs": ["conv"], "kind": "split", "sizes": [4, 4], "index": 0},
        {"name": "block.cat", "inputs": ["block.split.1", "block.split.0"], "kind": "concat"},
    ]
    stats = model_stats(workload, infer_shapes(workload, workload.name))
    # conv 8 x 8 x 8 x 3 = 1,536 MACs, 24 weights; classifier 8 x 2 = 16 MACs, 16 weights.
    assert (stats.params, stats.forward_macs) == (40, 1_536 + 16)


def test_split_sizes_and_a_scalar_remainder(tmp_path: Path) -> None:
    """``torch.split(x, [2, 6], dim=1)``: the sizes as given; a scalar split of 3 of 8
    channels is [3, 3, 2], the last part smaller."""
    for split, index, sizes in (([2, 6], 1, [2, 6]), (3, 2, [3, 3, 2])):
        path = _chunk_graph(tmp_path / f"split{index}.onnx", split, index, sizes)
        row = import_model(path).workload.layers[1].model_dump(exclude_defaults=True)
        assert row == {
            "name": f"block.split.{index}",
            "kind": "split",
            "sizes": sizes,
            "index": index,
        }


def test_a_split_along_the_height_names_the_node(tmp_path: Path) -> None:
    """A cut along a map's height is no ``split`` layer: an error naming the node."""
    nodes = [
        helper.make_node("SplitToSequence", ["x", "s"], ["seq"], name="/block/split", axis=2),
        helper.make_node("SequenceAt", ["seq", "i"], ["y"], name="/block/getitem"),
    ]
    inits = [
        helper.make_tensor("s", TensorProto.INT64, [], [2]),
        helper.make_tensor("i", TensorProto.INT64, [], [0]),
    ]
    path = _save(tmp_path / "height.onnx", nodes, inits, [1, 8, 4, 4])
    with pytest.raises(WorkloadError) as caught:
        import_model(path)
    assert [str(p).split(": ", 1)[1] for p in caught.value.problems] == [
        "nodes[/block/split]: op type SplitToSequence has no layer kind in this form"
        " (attributes, constant operands or shapes); --unsupported vector maps it to a generic"
        " vector op (got 'SplitToSequence')",
        "nodes[/block/getitem]: op type SequenceAt has no layer kind in this form (attributes,"
        " constant operands or shapes); --unsupported vector maps it to a generic vector op"
        " (got 'SequenceAt')",
    ]


def _shifted_graph(path: Path, pad_height: int) -> Path:
    """input 1x3x4x4 -> Conv 3->4 1x1 -> channels last (1x4x4x4) -> Pad (height by
    ``pad_height`` each side) -> torch.roll by 2 along the height (two Slices and a
    Concat) -> every other column (a strided Slice) -> channels first ->
    GlobalAveragePool -> Flatten -> Gemm (to 2)."""
    big = 2**62
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="/conv/Conv", kernel_shape=[1, 1]),
        helper.make_node("Transpose", ["c"], ["t"], name="/permute", perm=[0, 2, 3, 1]),
        helper.make_node("Pad", ["t", "pads"], ["p"], name="/attn/pad"),
        helper.make_node("Slice", ["p", "two", "end", "one"], ["a"], name="/attn/roll"),
        helper.make_node("Slice", ["p", "zero", "two", "one"], ["b"], name="/attn/roll"),
        helper.make_node("Concat", ["a", "b"], ["r"], name="/attn/roll", axis=1),
        helper.make_node("Slice", ["r", "zero", "end", "two", "two"], ["s"], name="/merge/slice"),
        helper.make_node("Transpose", ["s"], ["u"], name="/permute_1", perm=[0, 3, 1, 2]),
        helper.make_node("GlobalAveragePool", ["u"], ["g"], name="/pool/GlobalAveragePool"),
        helper.make_node("Flatten", ["g"], ["f"], name="/Flatten"),
        helper.make_node("Gemm", ["f", "fw"], ["y"], name="/fc/Gemm", transB=1),
    ]
    inits = [
        helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 1, 1], [0.0] * 12),
        helper.make_tensor("pads", TensorProto.INT64, [8], [0, pad_height, 0, 0] * 2),
        *(helper.make_tensor(n, TensorProto.INT64, [1], [v]) for n, v in (("zero", 0), ("one", 1))),
        *(
            helper.make_tensor(n, TensorProto.INT64, [1], [v])
            for n, v in (("two", 2), ("end", big))
        ),
        helper.make_tensor("fw", TensorProto.FLOAT, [2, 4], [0.0] * 8),
    ]
    return _save(path, nodes, inits, [1, 3, 4, 4])


@pytest.mark.parametrize("pad_height", [0, 1])
def test_roll_padding_and_a_strided_slice_of_a_channels_last_map(
    tmp_path: Path, pad_height: int
) -> None:
    """Padding by zero is omitted, by one row each side a ``vector`` op writing the
    4 x 6 x 4 map; the roll a ``vector`` op copying the map (its channels first, as the
    table has it); every other column a ``bridge`` to 4 x H x 2."""
    result = import_model(_shifted_graph(tmp_path / "shift.onnx", pad_height))
    rows = [layer.model_dump(exclude_defaults=True) for layer in result.workload.layers]
    height = 4 + 2 * pad_height
    padded = {"name": "attn.pad", "kind": "vector", "op": "Pad", "layout": "chw"}
    assert rows[1:-4] == [
        *([{**padded, "shape": [4, 6, 4]}] if pad_height else []),
        {
            "name": "attn.roll",
            "kind": "vector",
            "op": "roll",
            "layout": "chw",
            "shape": [4, height, 4],
        },
        {"name": "merge", "kind": "bridge", "shape": [4, height, 2]},
    ]
    header = [line[1:].strip() for line in result.text.splitlines() if line.startswith("#")]
    notes = " ".join(header)
    assert (
        "padding by zero elements (to a multiple of the window), omitted: /attn/pad" in notes
    ) == (not pad_height)
    assert (
        "torch.roll (a Slice and a Concat per dimension): a vector op copying the map: attn.roll"
        in notes
    )
    stats = model_stats(result.workload, infer_shapes(result.workload, "shift"))
    # conv 4 x 4 x 4 x 3 = 192 MACs, 12 weights; classifier 4 x 2 = 8 of each.
    assert (stats.params, stats.forward_macs) == (20, 192 + 8)


def test_swin_shifted_window_attention_is_its_parts_on_the_map() -> None:
    """torchvision's ``swin_t``, its second block (``features.1.1``): 3 heads over 64
    windows of 7 x 7 tokens of the 96 x 56 x 56 map, shifted (rolled, and a mask added
    to the scores), with a relative position bias from a table of 13 x 13 x 3 values."""
    workload = import_model(FIXTURES / "swin_t.onnx.gz").workload
    rows = [layer.model_dump(exclude_defaults=True) for layer in workload.layers]
    block = [row for row in rows if row["name"].startswith("features.1.1.attn")]
    base = "features.1.1.attn"
    heads = {"kind": "bridge", "shape": [192, 49, 32]}
    parts = [
        [
            {"name": f"{base}.{p}", "kind": "split", "sizes": [96] * 3, "index": i}
            | ({"inputs": [f"{base}.qkv"]} if i else {}),
            {"name": f"{base}.{p}.heads", **heads},
        ]
        for i, p in enumerate("qkv")
    ]
    assert block == [
        {
            "name": f"{base}.roll",
            "kind": "vector",
            "op": "roll",
            "layout": "chw",
            "shape": [96, 56, 56],
        },
        {"name": f"{base}.qkv", "kind": "conv2d", "out_channels": 288, "kernel": 1, "bias": True},
        *parts[0],
        *parts[1],
        *parts[2],
        {
            "name": f"{base}.scores",
            "kind": "matmul",
            "heads": 192,
            "transpose_b": True,
            "inputs": [f"{base}.q.heads", f"{base}.k.heads"],
        },
        {"name": f"{base}.position_bias", "kind": "position_bias", "table": 507},
        {
            "name": f"{base}.add",
            "kind": "vector",
            "op": "Add",
            "layout": "chw",
            "shape": [192, 49, 49],
        },
        {"name": f"{base}.softmax", "kind": "softmax"},
        {
            "name": f"{base}.mix",
            "kind": "matmul",
            "heads": 192,
            "inputs": [f"{base}.softmax", f"{base}.v.heads"],
        },
        {"name": f"{base}.merge", "kind": "bridge", "shape": [96, 56, 56]},
        {"name": f"{base}.proj", "kind": "conv2d", "out_channels": 96, "kernel": 1, "bias": True},
        {
            "name": f"{base}.roll_2",
            "kind": "vector",
            "op": "roll",
            "layout": "chw",
            "shape": [96, 56, 56],
        },
    ]
    forward = _forward_macs(_step(workload), base)
    # Q, K, V: 3,136 positions x 96 x 288; scores and their product with V: 64 windows
    # x 3 heads x 49 x 49 x 32; the output projection 3,136 x 96 x 96.
    assert forward == {
        f"{base}.qkv": 86_704_128,
        f"{base}.scores": 14_751_744,
        f"{base}.mix": 14_751_744,
        f"{base}.proj": 28_901_376,
    }


def test_swin_v2_cosine_attention_logit_scale_and_position_bias_mlp() -> None:
    """torchvision's ``swin_v2_t`` (256 x 256), its first block's attention: 3 heads
    over 64 windows of 8 x 8 tokens. Q and K are L2-normalised; the scores times a
    learned logit scale per head (3 parameters); the bias added is computed by an MLP
    from 15 x 15 constant coordinates: 2 x 512 + 512 weights and biases, 512 x 3
    weights, 3,072 parameters, not the coordinates'."""
    workload = import_model(FIXTURES / "swin_v2_t.onnx.gz").workload
    rows = {row.name: row.model_dump(exclude_defaults=True) for row in workload.layers}
    base = "features.1.0.attn"
    normalize = {"kind": "vector", "op": "l2_normalize", "layout": "chw", "shape": [192, 64, 32]}
    assert rows[f"{base}.q.normalize"] == {"name": f"{base}.q.normalize", **normalize}
    assert rows[f"{base}.scores"]["inputs"] == [f"{base}.q.normalize", f"{base}.k.normalize"]
    scaled = [rows[f"{base}.{name}"] for name in ("heads_first", "logit_scale", "windows_first")]
    assert scaled == [
        {"name": f"{base}.heads_first", "kind": "bridge", "shape": [3, 4096, 64]},
        {"name": f"{base}.logit_scale", "kind": "scale_parameter"},
        {"name": f"{base}.windows_first", "kind": "bridge", "shape": [192, 64, 64]},
    ]
    assert rows[f"{base}.position_bias"] == {
        "name": f"{base}.position_bias",
        "kind": "position_bias",
        "table": 2 * 512 + 512 + 512 * 3,
    }
    step = _step(workload)
    learned = {p.weight.name: p.weight.elements for p in step.parameters if base in p.weight.name}
    assert sum(learned.values()) == (96 * 288 + 288) + 3 + 3_072 + (96 * 96 + 96)


def test_maxvit_block_and_grid_attention_read_the_map_as_windows() -> None:
    """torchvision's ``maxvit_t``, its first block: window attention (7 x 7 blocks) and
    grid attention (a 7 x 7 grid) of the 64 x 56 x 56 map, 2 heads of 32 each, the
    windows a dimension of each sample, the products ``Einsum``s, a relative position
    bias from a table of 13 x 13 x 2 values each."""
    workload = import_model(FIXTURES / "maxvit_t.onnx.gz").workload
    rows = {row.name: row.model_dump(exclude_defaults=True) for row in workload.layers}
    step = _step(workload)
    for kind in ("window", "grid"):
        base = f"blocks.0.layers.0.layers.{kind}_attention.attn_layer.1"
        assert rows[f"{base}.q.heads"]["shape"] == [128, 49, 32]
        assert rows[f"{base}.position_bias"]["table"] == 13 * 13 * 2
        assert rows[f"{base}.merge"]["shape"] == [64, 56, 56]
        forward = _forward_macs(step, base)
        # Q, K, V: 3,136 positions x 64 x 192; scores and their product with V: 64
        # windows x 2 heads x 49 x 49 x 32; the output projection 3,136 x 64 x 64.
        assert forward == {
            f"{base}.qkv": 38_535_168,
            f"{base}.scores": 9_834_496,
            f"{base}.mix": 9_834_496,
            f"{base}.proj": 12_845_056,
        }
    # The MLP after each attention reads the windows' tokens, channels last: 1x1 convs.
    mlp = rows["blocks.0.layers.0.layers.grid_attention.mlp_layer.1"]
    assert (mlp["kind"], mlp["out_channels"], mlp["kernel"]) == ("conv2d", 256, 1)
