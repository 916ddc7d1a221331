"""``accelsim import`` of the ops the zoo's last families write: ``torch.chunk`` as a
``SplitToSequence`` and its ``SequenceAt`` parts (ShuffleNetV2, MaxViT).

Each graph is built here with ``onnx.helper``; each MAC count is worked out by hand
beside it. Needs only ``onnx``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("onnx")

import onnx
from onnx import TensorProto, helper

from accelsim.errors import WorkloadError
from accelsim.importer.model_import import import_model
from accelsim.lowering.infer import infer_shapes
from accelsim.lowering.stats import model_stats


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
