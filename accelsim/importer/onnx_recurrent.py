"""ONNX ``LSTM`` and ``GRU`` ops as ``lstm`` and ``gru`` layers.

PyTorch exports each layer of an ``nn.LSTM`` (``nn.GRU``) as one ``LSTM`` (``GRU``)
op (its weights sliced and concatenated from the module's: their data is not read,
the op's ``hidden_size`` and its input's width are what the layer needs). A layer in
one direction is one layer; a bidirectional one is two, reading the same input (the
reverse one costs as the forward one), and the ``concat`` of their outputs. A
layer's parameters are PyTorch's per direction: ``4H x (I + H)`` weights and two
``4H`` biases for an LSTM, ``3H`` for a GRU. The op's output is ``(sequence,
directions, batch, hidden)``; the views the exporter puts after it to reach
``(sequence, batch, directions x hidden)`` are the layer's output.
"""

from __future__ import annotations

from accelsim.importer.graph_view import Node
from accelsim.importer.layer_rows import LayerRows

DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}


def recurrent(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    """An ``LSTM`` or ``GRU`` op reading the activation ``X`` (the sequence; the
    initial states may be constants or activations, their cost is the first step's)."""
    direction = node.attr("direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    hidden = node.attr("hidden_size", 0)
    if acts[0] != node.inputs[0] or direction not in DIRECTIONS or hidden < 1:
        return False
    if node.attr("input_forget", 0) or node.attr("clip", None) is not None:
        return False
    if node.op == "GRU" and not node.attr("linear_before_reset", 0):
        return False  # PyTorch's GRU applies the reset gate after the product
    kind = node.op.lower()
    base = rows.name(node)
    if DIRECTIONS[direction] == 1:
        row = {"name": base, "kind": kind, "hidden_size": hidden}
        rows.emit(row, acts[:1], node.outputs[:1])
        _output_views(rows, node.outputs[0])
        return True
    parts = []
    for way in ("forward", "reverse"):
        row = {"name": rows.unique(f"{base}.{way}"), "kind": kind, "hidden_size": hidden}
        parts.append(rows.emit(row, acts[:1]))
    row = {"name": rows.unique(f"{base}.concat"), "kind": "concat", "inputs": parts}
    rows.layers.append(row)
    for out in node.outputs[:1]:
        rows.layer_of[out] = row["name"]
    _output_views(rows, node.outputs[0])
    return True


OUTPUT_VIEWS = frozenset({"Transpose", "Reshape", "Squeeze"})
"""The views an exporter puts after a recurrent op's four-dimensional output."""


def _output_views(rows: LayerRows, tensor: str) -> None:
    """Alias the views that take ``tensor`` (the op's output, four-dimensional) to
    three dimensions, up to and with the first of three (shape reads aside)."""
    view = rows.view
    while len(view.dims(tensor)) == 4:
        readers = [r for r in view.consumers.get(tensor, []) if r.op not in ("Shape", "Size")]
        if len(readers) != 1 or readers[0].op not in OUTPUT_VIEWS:
            return
        rows.skip.add(readers[0].index)
        rows.layer_of[readers[0].outputs[0]] = rows.layer_of[tensor]
        tensor = readers[0].outputs[0]
