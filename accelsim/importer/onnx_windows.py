"""Sliding-window ops (convolutions and pooling) as layers.

A window's padding is written symmetric: asymmetric pads (``[0, 0, 1, 1]``, as
TensorFlow's ``same`` padding) and ``ceil_mode`` pooling become the symmetric padding
that gives the same output size (the layer's cost depends on its output size only),
and the import notes it; a window no symmetric padding matches is declined.
"""

from __future__ import annotations

from typing import Any

from accelsim.importer.graph_view import Node
from accelsim.importer.layer_rows import Handler, LayerRows


def _conv(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    weight = rows.view.const_dims(node.inputs[1])
    pads = _pads(rows, node, acts, weight[2:] if weight else ())
    if weight is None or len(weight) != 4 or pads is None:
        return False
    row: dict[str, Any] = {"out_channels": weight[0], "kernel": compact(weight[2:])}
    row.update(_window_fields(node, pads, stride_default=1))
    dilation = compact(node.attr("dilations", [1, 1]))
    if dilation != 1:
        row["dilation"] = dilation
    if node.attr("group", 1) != 1:
        row["groups"] = node.attr("group", 1)
    if rows.view.is_parameter(node, 2):
        row["bias"] = True
    return rows.layer(node, "conv2d", acts[:1], **row)


def _conv_transpose(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    weight = rows.view.const_dims(node.inputs[1])
    pads = _symmetric_pads(node)
    if weight is None or len(weight) != 4 or pads is None:
        return False
    groups = node.attr("group", 1)
    row: dict[str, Any] = {"out_channels": weight[1] * groups, "kernel": compact(weight[2:])}
    row.update(_window_fields(node, pads, stride_default=1))
    extra = compact(node.attr("output_padding", [0, 0]))
    if extra != 0:
        row["output_padding"] = extra
    dilation = compact(node.attr("dilations", [1, 1]))
    if dilation != 1:
        row["dilation"] = dilation
    if groups != 1:
        row["groups"] = groups
    if rows.view.is_parameter(node, 2):
        row["bias"] = True
    return rows.layer(node, "conv_transpose2d", acts[:1], **row)


def _pool(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    kernel = node.attr("kernel_shape", [])
    pads = _pads(rows, node, acts, kernel)
    if pads is None or len(kernel) != 2:
        return False
    strides = node.attr("strides", [1, 1])
    if list(kernel) == [1, 1] and list(strides) == [1, 1] and pads == [0, 0]:
        rows.notes.append(f"{node.name}: a 1x1 {node.op} of stride 1 is the identity: omitted")
        rows.alias(node, acts[0])
        return True
    kind = "maxpool" if node.op == "MaxPool" else "avgpool"
    row: dict[str, Any] = {"kernel": compact(kernel)}
    row.update(_window_fields(node, pads, stride_default=compact(kernel)))
    return rows.layer(node, kind, acts[:1], **row)


def _global_pool(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    """``global_avgpool`` (a vector) when only flattens read it, else an
    ``adaptive_avgpool`` to 1 x 1 (a map, e.g. a squeeze-and-excitation gate's)."""
    readers = rows.view.consumers.get(node.outputs[0], [])
    if readers and all(r.op in ("Flatten", "Reshape") for r in readers):
        return rows.layer(node, "global_avgpool", acts[:1])
    return rows.layer(node, "adaptive_avgpool", acts[:1], output=1)


def _reduce_mean(rows: LayerRows, node: Node, acts: list[str]) -> bool:
    """A mean over a map's height and width (``torch.mean(x, (2, 3))``, as the
    ``torch.export``-based exporter writes an adaptive pool to 1 x 1) is a global pool."""
    rank = len(rows.view.dims(acts[0]))
    axes = node.attr("axes", None)
    if axes is None and len(node.inputs) > 1:
        axes = rows.view.values(node.inputs[1])
    if rank != 4 or axes is None or sorted(int(a) % rank for a in axes) != [2, 3]:
        return False
    if not node.attr("keepdims", 1):
        return rows.layer(node, "global_avgpool", acts[:1])
    return _global_pool(rows, node, acts)


def _pads(rows: LayerRows, node: Node, acts: list[str], kernel: Any) -> list[int] | None:
    """The window's symmetric padding (height, width): its own, or for asymmetric pads,
    ``auto_pad`` or ``ceil_mode``, the one that gives the same output size (noted);
    None when there is none."""
    pads = None if node.attr("ceil_mode", 0) else _symmetric_pads(node)
    if pads is not None:
        return pads
    before, after = rows.dims(acts[0]), rows.dims(node.outputs[0])
    if len(before) != 3 or len(after) != 3 or len(kernel) != 2 or not all(after):
        return None
    strides = node.attr("strides", [1, 1])
    dilations = node.attr("dilations", [1, 1])
    found = []
    for size, out, k, s, d in zip(before[1:], after[1:], kernel, strides, dilations, strict=True):
        reach = d * (k - 1) + 1
        fits = [p for p in range(k // 2 + 1) if (size + 2 * p - reach) // s + 1 == out]
        if not fits:
            return None
        found.append(fits[0])
    form = "ceil_mode" if node.attr("ceil_mode", 0) else "asymmetric padding"
    rows.notes.append(
        f"{node.name}: {form} written as padding {compact(found)}, the same output size"
    )
    return found


def _symmetric_pads(node: Node) -> list[int] | None:
    if node.attr("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        return None
    pads = list(node.attr("pads", [0, 0, 0, 0]))
    if len(pads) != 4 or pads[:2] != pads[2:]:
        return None
    return pads[:2]


def _window_fields(node: Node, pads: list[int], stride_default: Any) -> dict[str, Any]:
    row: dict[str, Any] = {}
    stride = compact(node.attr("strides", [1, 1]))
    if stride != stride_default:
        row["stride"] = stride
    if compact(pads) != 0:
        row["padding"] = compact(pads)
    return row


def compact(values: Any) -> Any:
    """``[3, 3]`` -> ``3``; ``[1, 7]`` stays a list."""
    items = [int(v) for v in values]
    return items[0] if len(set(items)) == 1 else items


WINDOW_HANDLERS: dict[str, Handler] = {
    "Conv": _conv,
    "ConvTranspose": _conv_transpose,
    "GlobalAveragePool": _global_pool,
    "ReduceMean": _reduce_mean,
    "MaxPool": _pool,
    "AveragePool": _pool,
}
"""The handlers of the window ops."""
