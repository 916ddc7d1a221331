"""``torch.chunk`` and ``torch.split`` as the ``torch.export``-based exporter writes
them: a ``SplitToSequence`` of a tensor into a sequence of parts and a
``SequenceAt`` taking each part by its constant index.

The sequence is no layer (it aliases its input); each part taken is a ``split``
layer of its input, as a ``Split`` op's outputs are.
"""

from __future__ import annotations

from typing import Any

from accelsim.importer.graph_view import Node
from accelsim.importer.layer_rows import LayerRows, SplitSequence


def split_to_sequence(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    """A cut along the channels (a map's, or a sequence's features) into parts of the
    constant size given (a scalar: ``torch.chunk``'s and ``split``'s equal parts, the
    last smaller) or sizes (a list); declined for other axes and ``keepdims`` 0."""
    dims = rows.dims(acts[0])
    axis = node.attr("axis", 0)
    split = rows.view.values(node.inputs[1]) if len(node.inputs) > 1 else None
    channels_axis = 1 if len(dims) == 3 else len(dims)
    if not dims or axis not in (channels_axis, channels_axis - len(dims) - 1):
        return False
    if split is None or not node.attr("keepdims", 1) or any(s < 1 for s in split):
        return False
    width = dims[0] if len(dims) == 3 else dims[-1]
    sizes = [int(s) for s in split]
    if rows.view.const_dims(node.inputs[1]) == ():
        step = sizes[0]
        sizes = [step] * (width // step) + ([width % step] if width % step else [])
    if sum(sizes) != width:
        return False
    rows.sequences[node.outputs[0]] = SplitSequence(acts[0], rows.name(node), tuple(sizes))
    rows.alias(node, acts[0])
    return True


def sequence_at(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    """One part of a :func:`split_to_sequence`'s sequence, by its constant index: a
    ``split`` layer."""
    sequence = rows.sequences.get(node.inputs[0])
    index = rows.view.scalar(node.inputs[1]) if len(node.inputs) > 1 else None
    if sequence is None or index is None:
        return False
    count = len(sequence.sizes)
    part = int(index) + (count if index < 0 else 0)
    if not 0 <= part < count:
        return False
    row: dict[str, Any] = {"name": rows.unique(f"{sequence.name}.{part}"), "kind": "split"}
    row.update({"sizes": list(sequence.sizes), "index": part})
    rows.emit(row, [sequence.source], node.outputs[:1])
    return True
