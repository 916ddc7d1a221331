"""The layer table an import writes: its rows in order, the layer each tensor comes
from, names unique in the table and taken from the nodes' module scopes, and the
notes a reader should know.

:mod:`accelsim.importer.onnx_graph` walks the graph and
:mod:`accelsim.importer.onnx_ops` writes each op's rows here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accelsim.importer.graph_view import GraphView, Node

FUNCTIONAL = frozenset({"Add", "Sum", "Concat", "Mul", "MatMul", "Flatten", "Reshape", "Split"})
"""Ops PyTorch writes as functions inside a module: their layer is named after the
module and the op (``layer1.0.add``), never the module alone."""


@dataclass(frozen=True)
class SplitSequence:
    """A tensor cut into parts along its channels (features), taken one at a time.

    Attributes:
        source: The tensor cut.
        name: The base of its parts' layer names (each part's index appended).
        sizes: The parts' sizes, in order.
    """

    source: str
    name: str
    sizes: tuple[int, ...]


class LayerRows:
    """The rows of one graph's table, as the walk writes them.

    Args:
        view: The graph.
        scope_ops: The op types of the layer-making nodes of each module scope (a
            scope with one names its layer alone).
    """

    def __init__(self, view: GraphView, scope_ops: dict[str, set[str]]) -> None:
        self.view = view
        self.scope_ops = scope_ops
        self.layers: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.names: set[str] = {"input"}
        self.inputs: dict[str, str] = {view.input_names[0]: "input"}
        """The table's name of each graph input: ``input`` the first, the others their
        own names made safe and unique."""
        for name in view.input_names[1:]:
            self.inputs[name] = self.unique(_safe(name) or "input")
        self.layer_of: dict[str, str] = dict(self.inputs)
        self.skip: set[int] = set()
        """Nodes a layer written already stands for (a folded bias, an absorbed affine)."""
        self.tables: dict[str, str] = {}
        """The embedding layer of each constant table (for a linear tied to it)."""
        self.sequences: dict[str, SplitSequence] = {}
        """The parts of each sequence a ``SplitToSequence`` cuts."""
        self.grouped_notes: dict[str, list[str]] = {}
        """Notes that name every layer they are true of: the note, the names."""
        self.channels_last: set[str] = set()
        """Tensors that are maps with their channels last, as a layer written knows."""

    def is_activation(self, tensor: str) -> bool:
        """Whether ``tensor``'s values depend on the model input's values."""
        return tensor in self.layer_of

    def dims(self, tensor: str) -> tuple[int, ...]:
        """Per-sample dimensions of an activation."""
        return self.view.dims(tensor)[1:]

    def alias(self, node: Node, tensor: str) -> None:
        """``node``'s outputs are ``tensor``'s layer (a view, an omitted op)."""
        for out in node.outputs:
            self.layer_of[out] = self.layer_of[tensor]

    def name(self, node: Node, functional: bool | None = None) -> str:
        """A new layer's name for ``node``: its module scope, with the op when the op is
        ``functional`` (by default: of :data:`FUNCTIONAL`) or the scope makes several
        layers."""
        scope, leaf = scope_of(node)
        if functional is None:
            functional = node.op in FUNCTIONAL
        # The exporters number an op's calls (``Add_1``, ``add_3``): names are numbered
        # per table instead, by ``unique``.
        op = re.sub(r"_\d+$", "", leaf).lower() or node.op.lower()
        if not scope:
            base = op
        elif functional or len(self.scope_ops.get(scope, ())) > 1:
            base = f"{scope}.{op}"
        else:
            base = scope
        return self.unique(base)

    def unique(self, base: str) -> str:
        """``base``, numbered (``base_2``, ...) when the table has it already."""
        name, k = base, 1
        while name in self.names:
            k += 1
            name = f"{base}_{k}"
        self.names.add(name)
        return name

    def emit(self, row: dict[str, Any], inputs: list[str], outputs: tuple[str, ...] = ()) -> str:
        """Append a layer reading ``inputs`` (tensors); name ``inputs`` only when they are
        not just the previous layer."""
        sources = [self.layer_of[t] for t in inputs]
        previous = self.layers[-1]["name"] if self.layers else "input"
        if sources and sources != [previous]:
            row["inputs"] = sources
        self.layers.append(row)
        for out in outputs:
            self.layer_of[out] = row["name"]
        return str(row["name"])

    def layer(self, node: Node, kind: str, inputs: list[str], **fields: Any) -> bool:
        """Append ``node`` as a layer of ``kind`` making its first output (True: done)."""
        row = {"name": self.name(node), "kind": kind, **fields}
        self.emit(row, inputs, node.outputs[:1])
        return True


def _safe(name: str) -> str:
    """``name`` with what a layer name should not hold (``/``, ``:``, spaces) as ``_``."""
    return re.sub(r"[^A-Za-z0-9_.\-]", "_", name)


def scope_of(node: Node) -> tuple[str, str]:
    """``/layer1/layer1.0/conv1/Conv`` -> (``layer1.0.conv1``, ``Conv``)."""
    parts = [p for p in node.name.split("/") if p]
    if len(parts) < 2:
        return "", (parts[0] if parts else node.op)
    path: list[str] = []
    for part in parts[:-1]:
        if path and part.startswith(path[-1] + "."):
            path[-1] = part
        else:
            path.append(part)
    return _safe(".".join(path)), parts[-1]


Handler = Callable[[LayerRows, Node, list[str]], bool]
"""Writes a node's layers (True), or declines the op's form (False)."""
