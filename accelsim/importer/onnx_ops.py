"""How each ONNX op becomes layers: one handler per op type in :data:`HANDLERS`.

A handler gets the table being written (:class:`~accelsim.importer.layer_rows.LayerRows`),
the node and its activation inputs, and returns True when the node became layers (or
a view of its input), False when it declines the op's form (attributes, constant
operands or shapes it has no layer kind for).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from accelsim.importer.graph_view import GraphView, Node
from accelsim.importer.layer_rows import Handler, LayerRows
from accelsim.importer.onnx_chains import erf_gelu, hard_sigmoid, random_mask
from accelsim.importer.onnx_layout import channels_last, pad, roll, slice_view
from accelsim.importer.onnx_recurrent import recurrent
from accelsim.importer.onnx_sequences import sequence_at, split_to_sequence
from accelsim.importer.onnx_windows import WINDOW_HANDLERS, compact

VIEWS = frozenset(
    {
        "Reshape",
        "Transpose",
        "Squeeze",
        "Unsqueeze",
        "Identity",
        "Cast",
        "CastLike",
        "Expand",
        "Flatten",
    }
)
"""Ops that move no data in the layer table (``Flatten`` and reshapes to a vector
become ``flatten`` layers)."""

ACTIVATIONS = {
    "Relu": "relu",
    "Sigmoid": "sigmoid",
    "Tanh": "tanh",
    "Gelu": "gelu",
    "HardSwish": "hardswish",
}
"""ONNX activation ops and the ``activation`` function each is."""

SIMPLE = {
    "BatchNormalization": "batchnorm",
    "LayerNormalization": "layernorm",
    "RMSNormalization": "rmsnorm",
    "Softmax": "softmax",
}
"""Ops that are a layer of one kind whatever their attributes."""


def _simple(kind: str) -> Handler:
    def handle(rows: LayerRows, node: Node, acts: list[str]) -> bool:
        return rows.layer(node, kind, acts[:1])

    return handle


def _view(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    """A view aliases its input, but a map flattened to a vector is a ``flatten`` and
    a map viewed as a sequence (``x.flatten(2).transpose(1, 2)``, a vision
    transformer's patches) a ``bridge`` to the sequence's shape (the transpose after
    it, if any, taken in)."""
    before, after = rows.dims(acts[0]), rows.dims(node.outputs[0])
    if len(before) == 3 and len(after) == 1:
        return rows.layer(node, "flatten", acts[:1])
    if len(before) == 3 and len(after) == 2 and all(after) and node.op != "Transpose":
        out = node.outputs[0]
        turn = rows.view.single_reader(out)
        if turn is not None and turn.op == "Transpose" and len(rows.dims(turn.outputs[0])) == 2:
            rows.skip.add(turn.index)
            out = turn.outputs[0]
        row = {"name": rows.name(node), "kind": "bridge", "shape": list(rows.dims(out))}
        rows.emit(row, acts[:1], (out,))
        return True
    rows.alias(node, acts[0])
    return True


def _parameter(rows: LayerRows, tensor: str, rank: int) -> tuple[int, ...] | None:
    """The dimensions of a parameter (an initializer, expanded or viewed) as it
    broadcasts over one sample of ``rank`` dimensions (a leading batch dimension of 1
    dropped, missing leading ones 1), None for other tensors."""
    source = tensor
    while source not in rows.view.initializers:
        node = rows.view.producer.get(source)
        if node is None or node.op not in VIEWS:
            return None
        source = node.inputs[0]
    dims = list(rows.view.dims(tensor) or rows.view.const_dims(source) or ())
    while len(dims) > rank and dims[0] == 1:
        dims.pop(0)
    return tuple([1] * (rank - len(dims)) + dims) if len(dims) <= rank else None


def _activation(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    return rows.layer(node, "activation", acts[:1], function=ACTIVATIONS[node.op])


def _sigmoid(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    """A sigmoid, or with the ``Mul`` of its input that alone reads it, SiLU: PyTorch
    exports ``F.silu(x)`` as ``x * sigmoid(x)`` (ONNX has no SiLU before opset 24)."""
    gate = rows.view.single_reader(node.outputs[0])
    if gate is None or gate.op != "Mul" or sorted(gate.inputs) != sorted([acts[0], *node.outputs]):
        return _activation(rows, node, acts)
    rows.skip.add(gate.index)
    row = {"name": rows.name(node), "kind": "activation", "function": "silu"}
    rows.emit(row, acts[:1], gate.outputs)
    return True


def _clip(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    low, high = (rows.view.scalar(t) if t else None for t in (*node.inputs[1:3], "")[:2])
    if low == 0 and high == 6:
        return rows.layer(node, "activation", acts[:1], function="relu6")
    if low == 0 and high is None:
        return rows.layer(node, "activation", acts[:1], function="relu")
    return False


def _add(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    """An ``add`` of activations, or of a parameter of the activation's shape (a
    learned position embedding): ``add_parameter``."""
    if len(acts) >= 2:
        return rows.layer(node, "add", acts)
    others = [t for t in node.inputs if t not in acts]
    dims = rows.dims(acts[0])
    if len(others) == 1 and _parameter(rows, others[0], len(dims)) == dims:
        return rows.layer(node, "add_parameter", acts)
    return False


def _mul(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    """A ``mul`` of two activations; of one, a random mask (dropout) or a parameter of
    one value per channel (a layer scale: ``scale_parameter``)."""
    if len(acts) == 1:
        others = [t for t in node.inputs if t not in acts]
        dims = rows.dims(acts[0])
        learned = _parameter(rows, others[0], len(dims)) if len(others) == 1 else None
        if learned is not None and dims and learned == _per_channel(dims):
            return rows.layer(node, "scale_parameter", acts)
        return random_mask(rows, node, acts)
    if len(acts) != 2:
        return False
    big, small = sorted(acts, key=lambda t: -int(np.prod(rows.dims(t))))
    return rows.layer(node, "mul", [big, small])


def _concat(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    """A ``concat`` along the channels (a channels-last map's last axis), a roll, or a
    class token put first."""
    rank = len(rows.dims(acts[0]))
    if len(acts) != len(node.inputs):
        return _prepend_tokens(rows, node, acts)
    if roll(rows, node, acts):
        return True
    axes = (1, -rank - 1) + ((rank, -1) if rank == 3 and channels_last(rows, acts[0]) else ())
    if node.attr("axis", 0) not in axes:
        return False
    if len(acts) == 1:
        rows.alias(node, acts[0])
        return True
    return rows.layer(node, "concat", acts)


def _per_channel(dims: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of one value per channel of a map (C x 1 x 1) or feature of a sequence."""
    return (dims[0], 1, 1) if len(dims) == 3 else (dims[-1],)


def _prepend_tokens(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    """A parameter of ``t`` tokens put before a sequence (a class token): ``prepend_tokens``."""
    dims = rows.dims(acts[0])
    learned = _parameter(rows, node.inputs[0], 2) if node.inputs[1:] == (acts[0],) else None
    token_axis = node.attr("axis", 0) in (1, -2)
    if learned is None or len(dims) != 2 or len(learned) != 2 or not token_axis:
        return False
    if learned[1] != dims[1]:
        return False
    fields = {} if learned[0] == 1 else {"tokens": learned[0]}
    return rows.layer(node, "prepend_tokens", acts, **fields)


def _dropout(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    ratio = rows.view.scalar(node.inputs[1]) if len(node.inputs) > 1 else 0.5
    training = rows.view.scalar(node.inputs[2]) if len(node.inputs) > 2 else 0
    if ratio is None or not training:
        rows.alias(node, acts[0])
        rows.notes.append(f"{node.name}: dropout not in training mode: omitted")
        return True
    return rows.layer(node, "dropout", acts[:1], rate=round(float(ratio), 6))


def _gemm(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    weight = rows.view.const_dims(node.inputs[1])
    if len(acts) != 1 or acts[0] != node.inputs[0] or weight is None or node.attr("transA", 0):
        return False
    out = weight[0] if node.attr("transB", 0) else weight[1]
    name = rows.name(node)
    row: dict[str, Any] = {"name": name, "kind": "linear", "out_features": out}
    if not rows.view.is_parameter(node, 2):
        row["bias"] = False
    row.update(_weight_fields(rows, name, node.inputs[1]))
    rows.emit(row, acts, node.outputs[:1])
    return True


def _matmul(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    if len(acts) == 2:
        return _activation_matmul(rows, node, acts)
    weight = rows.view.const_dims(node.inputs[1])
    if acts[0] != node.inputs[0] or weight is None or len(weight) != 2:
        return False
    bias = rows.view.bias_after(node, weight[1], rows.is_activation)
    name = rows.name(node, functional=False)
    row: dict[str, Any] = {"name": name, "kind": "linear", "out_features": weight[1]}
    if channels_last(rows, acts[0]):
        # A linear on a map's channels, its positions last (ConvNeXt's): a 1x1 conv of
        # the map the table has, the same parameters and MACs.
        row = {"name": name, "kind": "conv2d", "out_channels": weight[1], "kernel": 1}
        row.update({"bias": True} if bias is not None else {})
    elif bias is None:
        row["bias"] = False
    if bias is not None:
        rows.skip.add(bias.index)
    row.update(_weight_fields(rows, name, node.inputs[1]))
    rows.emit(row, acts, (bias or node).outputs)
    return True


def _activation_matmul(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    a, b = (rows.dims(t) for t in acts)
    if len(a) != len(b) or len(a) not in (2, 3):
        return False
    heads = a[0] if len(a) == 3 else 1
    return rows.layer(node, "matmul", acts, **({} if heads == 1 else {"heads": heads}))


def is_embedding(view: GraphView, node: Node) -> bool:
    """Whether ``node`` looks a row up in a constant table (whatever its inputs)."""
    table = view.const_dims(node.inputs[0]) if node.op == "Gather" else None
    return table is not None and len(table) == 2 and node.attr("axis", 0) == 0


def embedding(rows: LayerRows, node: Node) -> None:
    """A lookup in a constant table: an ``embedding`` of the token input (position
    and token-type ids are computed from it, or are constants), or of the graph's input
    of ids it reads (token type ids given as an input of their own)."""
    table = rows.view.const_dims(node.inputs[0])
    assert table is not None
    ids = rows.inputs.get(node.inputs[1], "input")
    row: dict[str, Any] = {"name": rows.name(node), "kind": "embedding"}
    row.update({"num_embeddings": table[0], "embedding_dim": table[1], "inputs": [ids]})
    rows.tables[node.inputs[0]] = rows.emit(row, [], node.outputs[:1])


def _weight_fields(rows: LayerRows, name: str, weight: str) -> dict[str, Any]:
    """``tied_to`` when a linear's weight is an embedding's table (tied embeddings)."""
    table = rows.tables.get(rows.view.const_root(weight) or "")
    if table is None:
        return {}
    rows.notes.append(f"{name}: its weight is {table}'s table (tied)")
    return {"tied_to": table}


def _gather(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    """One token of a sequence (``token_select``), or every element of its input
    reordered by constant indices (``as_strided`` as exported): a view."""
    index = rows.view.scalar(node.inputs[1])
    data = rows.dims(node.inputs[0])
    indices = rows.view.const_dims(node.inputs[1])
    whole = rows.view.dims(node.inputs[0])
    if acts == [node.inputs[0]] and indices and whole and math.prod(indices) == math.prod(whole):
        rows.alias(node, acts[0])
        return True
    if (
        acts == [node.inputs[0]]
        and index is not None
        and len(data) == 2
        and node.attr("axis", 0) == 1
    ):
        return rows.layer(node, "token_select", acts, index=int(index))
    return False


def _instancenorm(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    """PyTorch's group norm: a reshape to groups, ``InstanceNormalization``, a reshape
    back and the per-channel scale and shift (a ``Mul`` and an ``Add`` of constants,
    absorbed); a plain instance norm is a group norm of one channel per group."""
    dims = rows.dims(acts[0])
    groups = dims[0] if dims else 0
    reshape_to = rows.view.producer.get(acts[0])
    if not groups and reshape_to is not None and reshape_to.op == "Reshape":
        target = rows.view.values(reshape_to.inputs[1]) or []
        groups = int(target[1]) if len(target) == 3 and target[1] > 0 else 0
    if len(dims) not in (2, 3) or not groups:
        return False
    out = node.outputs[0]
    reshape = rows.view.single_reader(out)
    if len(dims) == 2 and reshape is not None and reshape.op == "Reshape":
        out = reshape.outputs[0]
        rows.skip.add(reshape.index)
    for op in ("Mul", "Add"):
        affine = rows.view.single_reader(out)
        others = [t for t in affine.inputs if t != out] if affine is not None else []
        if affine is None or affine.op != op or len(others) != 1 or rows.is_activation(others[0]):
            break
        rows.skip.add(affine.index)
        out = affine.outputs[0]
    row = {"name": rows.name(node), "kind": "groupnorm", "groups": groups}
    rows.emit(row, acts[:1], (out,))
    return True


def _groupnorm(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    return rows.layer(node, "groupnorm", acts[:1], groups=node.attr("num_groups", 1))


def _split(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    sizes = [rows.dims(t)[0] for t in node.outputs]
    if node.attr("axis", 0) != 1 or not all(sizes):
        return False
    base = rows.name(node)
    for index, out in enumerate(node.outputs):
        name = rows.unique(f"{base}.{index}")
        row: dict[str, Any] = {"name": name, "kind": "split", "sizes": sizes, "index": index}
        rows.emit(row, acts[:1], (out,))
    return True


def _resize(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    mode = node.attr("mode", b"nearest")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    modes = {"nearest": "nearest", "linear": "bilinear"}
    after = rows.dims(node.outputs[0])
    scales = rows.view.values(node.inputs[2]) if len(node.inputs) > 2 else None
    if mode not in modes or len(rows.dims(acts[0])) != 3:
        return False
    if len(after) == 3 and all(after):
        return rows.layer(node, "upsample", acts[:1], mode=modes[mode], size=list(after[1:]))
    if scales is None or len(scales) != 4 or any(v != int(v) or v < 1 for v in scales[2:]):
        return False
    scale = compact(scales[2:])
    return rows.layer(node, "upsample", acts[:1], mode=modes[mode], scale=scale)


def _loss(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    return rows.layer(node, "cross_entropy", acts[:1])


HANDLERS: dict[str, Handler] = {
    **{op: _simple(kind) for op, kind in SIMPLE.items()},
    **dict.fromkeys(VIEWS, _view),
    **dict.fromkeys(ACTIVATIONS, _activation),
    "Sigmoid": _sigmoid,
    "HardSigmoid": hard_sigmoid,
    "Div": erf_gelu,
    **WINDOW_HANDLERS,
    "Clip": _clip,
    "Add": _add,
    "Sum": _add,
    "Mul": _mul,
    "Concat": _concat,
    "Dropout": _dropout,
    "Gemm": _gemm,
    "MatMul": _matmul,
    "Gather": _gather,
    "GroupNormalization": _groupnorm,
    "InstanceNormalization": _instancenorm,
    "Split": _split,
    "Pad": pad,
    "Slice": slice_view,
    "SplitToSequence": split_to_sequence,
    "SequenceAt": sequence_at,
    "LSTM": recurrent,
    "GRU": recurrent,
    "Resize": _resize,
    "SoftmaxCrossEntropyLoss": _loss,
}
"""The handler of each op type that has one; an op without one is unsupported."""
