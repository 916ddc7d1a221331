"""Maps with their channels last (``x.permute(0, 2, 3, 1)``, as ConvNeXt and Swin
keep them), and the ops that move such a map's elements: zero padding, slices (a
strided one: Swin's patch merging), ``torch.roll`` (Swin's shifted windows).

The table holds every map channels first: a channels-last tensor of H x W x C per
sample is the table's C x H x W map. A slice is a view (a ``bridge`` to its shape);
a roll, which PyTorch exports as a ``Slice`` and ``Concat`` of the two parts per
dimension, is a named ``vector`` op that copies the map; padding by zero is none.
"""

from __future__ import annotations

from typing import Any

from accelsim.importer.graph_view import Node
from accelsim.importer.layer_rows import LayerRows

CHANNELS_LAST = [0, 2, 3, 1]
"""The permutation that puts a batch of maps' channels last (``x.permute(0, 2, 3, 1)``)."""
KEEPS_LAYOUT = frozenset(
    {
        "LayerNormalization",
        "MatMul",
        "Add",
        "Mul",
        "Dropout",
        "Relu",
        "Sigmoid",
        "Tanh",
        "Gelu",
        "HardSwish",
        "Pad",
        "Slice",
        "Concat",
    }
)
"""Ops whose output keeps their first activation's layout (channels-last stays so)."""
VIEWS = frozenset({"Reshape", "Transpose", "Identity"})
"""Views that keep a tensor's last dimension last keep a channels-last map so."""
ZERO_PADDING = "padding by zero elements (to a multiple of the window), omitted"
ROLLED = "torch.roll (a Slice and a Concat per dimension): a vector op copying the map"
SLICED = "slices of a map (strided: patch merging) as bridges, views"
LAYOUT_DEPTH = 512
"""Nodes walked above a tensor for the permutation that put its channels last (a
residual stream passes two adds per block)."""


def channels_last(rows: LayerRows, tensor: str) -> bool:
    """Whether ``tensor`` is a map with its channels last: a ``Transpose`` that puts
    them last above it, or a tensor :attr:`LayerRows.channels_last` holds,
    through ops that keep the layout (layernorms, linears, activations, residual
    adds, padding, slices) and views that keep the channels last."""
    for _ in range(LAYOUT_DEPTH):
        if tensor in rows.channels_last:
            return True
        node = rows.view.producer.get(tensor)
        if node is None:
            return False
        if node.op == "Transpose" and _puts_channels_last(list(node.attr("perm", []))):
            return True
        acts = [t for t in node.inputs if t not in rows.view.const_shapes]
        if not acts or not (node.op in KEEPS_LAYOUT or _keeps_last(rows, node, acts[0])):
            return False
        tensor = acts[0]
    return False


def _puts_channels_last(perm: list[int]) -> bool:
    """Whether a permutation puts a map's channels last: :data:`CHANNELS_LAST`, or a
    window partition's (``(0, 2, 4, 3, 5, 1)``: the batch first, the channels last)."""
    return perm == CHANNELS_LAST or (len(perm) >= 5 and perm[0] == 0 and perm[-1] == 1)


def _keeps_last(rows: LayerRows, node: Node, source: str) -> bool:
    """Whether a view keeps its input's last dimension last (a window partition)."""
    if node.op not in VIEWS:
        return False
    if node.op == "Transpose":
        perm = list(node.attr("perm", []))
        return bool(perm) and perm[-1] == len(perm) - 1
    before, after = rows.view.dims(source), rows.view.dims(node.outputs[0])
    return bool(before) and bool(after) and before[-1] == after[-1]


def table_dims(rows: LayerRows, tensor: str) -> tuple[int, ...]:
    """The per-sample dimensions the table gives ``tensor``: a channels-last map's
    channels first."""
    dims = rows.dims(tensor)
    if len(dims) == 3 and channels_last(rows, tensor):
        return (dims[2], dims[0], dims[1])
    return dims


def pad(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    """Padding by nothing is omitted (Swin pads its maps to a multiple of the window);
    other constant padding of a map is a ``vector`` op writing the padded map."""
    pads = rows.view.values(node.inputs[1]) if len(node.inputs) > 1 else None
    mode = node.attr("mode", b"constant")
    if pads is None or mode not in (b"constant", "constant") or acts[0] != node.inputs[0]:
        return False
    if not any(pads):
        rows.alias(node, acts[0])
        rows.grouped_notes.setdefault(ZERO_PADDING, []).append(node.name)
        return True
    return _vector(rows, node, acts, "Pad")


def slice_view(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    """A part of a roll (:func:`roll`), or a slice of a map or sequence (strided:
    every other row and column, as Swin's patch merging takes them): a ``bridge``
    to its shape, a view."""
    if acts[0] != node.inputs[0]:
        return False
    reader = rows.view.single_reader(node.outputs[0])
    if reader is not None and _roll_source(rows, reader) is not None:
        rows.alias(node, acts[0])
        return True
    shape = table_dims(rows, node.outputs[0])
    if not 2 <= len(shape) <= 3 or not all(shape):
        return False
    row = {"name": rows.name(node), "kind": "bridge", "shape": list(shape)}
    rows.grouped_notes.setdefault(SLICED, []).append(rows.emit(row, acts[:1], node.outputs[:1]))
    return True


def roll(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    """``torch.roll`` of a map: a ``Concat`` of the two ``Slice`` parts of one tensor
    (swapped), one per rolled dimension; the last of a chain is one ``vector`` op
    that copies the map, the ones before it views."""
    if _roll_source(rows, node) is None:
        return False
    readers = [r for r in rows.view.consumers.get(node.outputs[0], []) if r.op != "Shape"]
    if readers and all(r.op == "Slice" for r in readers):
        outer = [rows.view.single_reader(r.outputs[0]) for r in readers]
        indices = {n.index for n in outer if n is not None and _roll_source(rows, n) is not None}
        if len(indices) == 1 and None not in outer:
            rows.alias(node, acts[0])
            return True
    if not _vector(rows, node, acts, "roll"):
        return False
    rows.grouped_notes.setdefault(ROLLED, []).append(str(rows.layers[-1]["name"]))
    return True


def _roll_source(rows: LayerRows, concat: Node) -> str | None:
    """The tensor a ``Concat`` rolls: two ``Slice`` parts of it, along the axis of
    the concatenation; None for any other node."""
    if concat.op != "Concat" or len(concat.inputs) != 2:
        return None
    parts = [rows.view.producer.get(t) for t in concat.inputs]
    slices = [p for p in parts if p is not None and p.op == "Slice" and len(p.inputs) > 3]
    if len(slices) != 2 or len({p.inputs[0] for p in slices}) != 1:
        return None
    axis = concat.attr("axis", 0)
    if any(rows.view.values(p.inputs[3]) != [axis] for p in slices):
        return None
    return slices[0].inputs[0]


def _vector(rows: LayerRows, node: Node, acts: list[str], op: str) -> bool:
    """A ``vector`` op writing ``node``'s output, a map in the table's layout."""
    shape = table_dims(rows, node.outputs[0])
    if len(shape) != 3 or not all(shape):
        return False
    row: dict[str, Any] = {"name": rows.name(node), "kind": "vector", "op": op}
    row.update(layout="chw", shape=list(shape))
    rows.emit(row, acts[:1], node.outputs[:1])
    return True
