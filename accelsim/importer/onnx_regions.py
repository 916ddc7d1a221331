"""Modules the exporter decomposes into many ops, read back as the one layer they are.

PyTorch's ``torch.export``-based exporter has no ONNX op for an adaptive average pool
whose output size does not divide its input's (``nn.AdaptiveAvgPool2d(5)`` of a 14 x 14
map): it writes the windows out, index arithmetic, a ``Gather`` per window tap, their
sum and a division. The nodes it records under one such module (their module path and
class, :attr:`~accelsim.importer.graph_view.Node.module_class`) that read one
activation and make one are a region; the region is the module's layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelsim.importer.graph_view import GraphView, Node
from accelsim.importer.layer_rows import scope_of
from accelsim.importer.onnx_windows import compact

REGION_KINDS = {"torch.nn.modules.pooling.AdaptiveAvgPool2d": "adaptive_avgpool"}
"""Module classes read as one layer when the exporter decomposes them, and its kind."""


@dataclass(frozen=True)
class Region:
    """One decomposed module: the nodes it covers and its layer.

    Attributes:
        input: The activation it reads.
        output_node: Index of the node making its output.
        absorbed: Indices of every other node it covers.
        kind: The layer kind.
        fields: The layer's fields beside its name and kind.
    """

    input: str
    output_node: int
    absorbed: frozenset[int]
    kind: str
    fields: dict[str, Any]


def match_regions(view: GraphView, live: set[str]) -> list[Region]:
    """The regions of the graph: modules of :data:`REGION_KINDS` written as several
    ops on activations, reading one activation and making one."""
    groups: dict[str, list[Node]] = {}
    for node in view.nodes:
        if node.module_class in REGION_KINDS:
            groups.setdefault(scope_of(node)[0], []).append(node)
    regions = []
    for nodes in groups.values():
        region = _region(view, live, nodes)
        if region is not None:
            regions.append(region)
    return regions


def _region(view: GraphView, live: set[str], nodes: list[Node]) -> Region | None:
    inside = {n.index for n in nodes}
    made = {t for n in nodes for t in n.outputs}
    working = [n for n in nodes if any(t in live for t in view.value_inputs(n))]
    reads = {t for n in working for t in view.value_inputs(n) if t in live and t not in made}
    outs = {
        t
        for n in working
        for t in n.outputs
        if any(r.index not in inside for r in view.consumers.get(t, []))
    }
    if len(working) < 2 or len(reads) != 1 or len(outs) != 1:
        return None
    (tensor,), (out,) = reads, outs
    before, after = view.dims(tensor)[1:], view.dims(out)[1:]
    if len(before) != 3 or len(after) != 3 or before[0] != after[0] or not all(after):
        return None
    last = view.producer[out]
    kind = REGION_KINDS[last.module_class]
    return Region(
        tensor, last.index, frozenset(inside - {last.index}), kind, {"output": compact(after[1:])}
    )
