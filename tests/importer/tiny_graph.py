"""A tiny ONNX graph for the importer's tests, one op of it chosen by the test."""

from __future__ import annotations

from typing import Any

import onnx
from onnx import TensorProto, helper


def tiny_graph(op: str = "Relu", operands: tuple[float, ...] = (), **conv: Any) -> onnx.ModelProto:
    """input 1x3x8x8 -> Conv 3->4 3x3 pad 1 (named conv, weight ``w``, more attributes
    ``conv``) -> ``op`` of it and the constant scalars ``operands`` (named odd) ->
    GlobalAveragePool -> Flatten -> Gemm 4->2 (weight ``fw``, bias ``fb``)."""
    names = [f"k{i}" for i in range(len(operands))]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="/conv/Conv", pads=[1] * 4, **conv),
        helper.make_node(op, ["c", *names], ["s"], name="/odd/" + op),
        helper.make_node("GlobalAveragePool", ["s"], ["p"], name="/pool/GlobalAveragePool"),
        helper.make_node("Flatten", ["p"], ["f"], name="/Flatten"),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], name="/fc/Gemm", transB=1),
    ]
    inits = [
        helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 3, 3], [0.0] * 108),
        helper.make_tensor("fw", TensorProto.FLOAT, [2, 4], [0.0] * 8),
        helper.make_tensor("fb", TensorProto.FLOAT, [2], [0.0] * 2),
        *(
            helper.make_tensor(n, TensorProto.FLOAT, [], [v])
            for n, v in zip(names, operands, strict=True)
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
