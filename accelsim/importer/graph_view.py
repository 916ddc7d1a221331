"""Read-only view of an ONNX graph with inferred shapes: nodes, constants, producers."""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from accelsim.errors import WorkloadError


@dataclass(frozen=True)
class Node:
    """One ONNX node: its position, name, op type, tensors and attributes.

    Attributes:
        op: The op type; qualified by its domain (``com.example.Relu``) outside the
            standard one, so no handler takes it for a standard op.
        captured: The tensors of the enclosing graph its subgraphs (an ``If``'s
            branches, a ``Loop``'s body) read.
        module_class: The class of the innermost ``torch.nn`` module that made it
            (``torch.nn.modules.pooling.AdaptiveAvgPool2d``), as PyTorch's
            ``torch.export``-based exporter records it; empty when none is recorded.
    """

    index: int
    name: str
    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: dict[str, Any]
    captured: tuple[str, ...] = ()
    module_class: str = ""

    def attr(self, key: str, default: Any) -> Any:
        """An attribute's value (lists as lists, strings as bytes), or ``default``."""
        return self.attrs.get(key, default)


class GraphView:
    """Nodes in order, every tensor's dimensions, the constants and who reads what."""

    def __init__(self, model: onnx.ModelProto, source: str) -> None:
        graph = model.graph
        self.source = source
        self.nodes = [
            Node(
                i,
                _scoped_name(n),
                n.op_type if n.domain in STANDARD_DOMAINS else f"{n.domain}.{n.op_type}",
                tuple(n.input),
                tuple(n.output),
                {a.name: helper.get_attribute_value(a) for a in n.attribute},
                tuple(sorted(_captured(n))),
                _module_class(n),
            )
            for i, n in enumerate(graph.node)
        ]
        self.constants: dict[str, onnx.TensorProto] = {t.name: t for t in graph.initializer}
        self.initializers = frozenset(self.constants)
        for node in self.nodes:
            if node.op == "Constant":
                value = _constant_value(node)
                if value is not None:
                    self.constants[node.outputs[0]] = value
        self.const_shapes = {n: tuple(int(d) for d in t.dims) for n, t in self.constants.items()}
        self.const_roots = {name: name for name in self.constants}
        parts: dict[str, list[tuple[int, ...]]] = {}
        for node in self.nodes:
            if node.op == "Transpose" and node.inputs[0] in self.const_shapes:
                dims = self.const_shapes[node.inputs[0]]
                perm = node.attr("perm", list(range(len(dims)))[::-1])
                self.const_shapes[node.outputs[0]] = tuple(dims[p] for p in perm)
                self.const_roots[node.outputs[0]] = self.const_roots[node.inputs[0]]
            elif node.op == "SplitToSequence" and node.inputs[0] in self.const_shapes:
                split = self._split_parts(node)
                if split is not None:
                    parts[node.outputs[0]] = split
            elif node.op == "SequenceAt" and node.inputs[0] in parts:
                cut, index = parts[node.inputs[0]], self._known(node.inputs[1])
                if index is not None and len(index) == 1 and -len(cut) <= index[0] < len(cut):
                    self.const_shapes[node.outputs[0]] = cut[index[0]]
                    self.const_roots[node.outputs[0]] = node.outputs[0]
        self.shapes: dict[str, tuple[int, ...]] = {}
        for info in [*graph.input, *graph.value_info, *graph.output]:
            tensor_type = info.type.tensor_type
            if tensor_type.HasField("shape"):
                self.shapes[info.name] = tuple(d.dim_value for d in tensor_type.shape.dim)
        inputs = [i for i in graph.input if i.name not in self.constants]
        boolean = {
            i.name for i in inputs[1:] if i.type.tensor_type.elem_type == onnx.TensorProto.BOOL
        }
        self.mask_names = tuple(i.name for i in inputs if i.name in boolean)
        """The graph's boolean inputs after the first (and those :meth:`with_masks` adds):
        masks (a ``src_key_padding_mask``), whose values select elements and add no work;
        read as constants, as a mask the model builds itself is."""
        self.input_names = tuple(i.name for i in inputs if i.name not in self.mask_names)
        """The graph's inputs in order (not its initializers or masks): the model's inputs."""
        self.elem_types = {i.name: i.type.tensor_type.elem_type for i in inputs}
        self.output_names = tuple(o.name for o in graph.output)
        self.producer: dict[str, Node] = {o: n for n in self.nodes for o in n.outputs}
        self.consumers: dict[str, list[Node]] = {}
        for node in self.nodes:
            for tensor in node.inputs:
                self.consumers.setdefault(tensor, []).append(node)

    def with_masks(self, masks: tuple[str, ...]) -> GraphView:
        """This view with the model inputs ``masks`` read as masks too (integer or float
        inputs whose values only mask attention scores: Hugging Face's
        ``attention_mask``, :mod:`accelsim.importer.mask_inputs`)."""
        view = copy.copy(self)
        names = [n for n in self.elem_types if n in self.mask_names or n in masks]
        view.mask_names = tuple(names)
        view.input_names = tuple(n for n in self.input_names if n not in masks)
        return view

    def _split_parts(self, node: Node) -> list[tuple[int, ...]] | None:
        """The dimensions of each part a ``SplitToSequence`` of a constant cuts along its
        axis by constant sizes, or into parts of one size given as a scalar, the last
        smaller (``nn.MultiheadAttention``'s packed in-projection cut into Q's and K and
        V's weights, or into each one's), None when unknown."""
        dims = self.const_shapes[node.inputs[0]]
        sizes = self._known(node.inputs[1]) if len(node.inputs) > 1 else None
        axis = node.attr("axis", 0) % len(dims) if dims else 0
        if dims and sizes is not None and not self.const_shapes[node.inputs[1]] and sizes[0] > 0:
            whole, size = dims[axis], sizes[0]
            sizes = [size] * (whole // size) + ([whole % size] if whole % size else [])
        if not dims or sizes is None or sum(sizes) != dims[axis]:
            return None
        return [tuple(int(n) if a == axis else d for a, d in enumerate(dims)) for n in sizes]

    def _known(self, tensor: str) -> list[int] | None:
        """The values of a constant with its data, as integers (None for any other)."""
        proto = self.constants.get(tensor)
        array = None if proto is None else const_array(proto)
        return None if array is None else [int(v) for v in array.reshape(-1)]

    def dims(self, tensor: str) -> tuple[int, ...]:
        """Dimensions of ``tensor`` (batch first), ``()`` when inference found none."""
        return self.shapes.get(tensor, ())

    def const_dims(self, tensor: str) -> tuple[int, ...] | None:
        """Dimensions of a constant or a transposed constant (kept when the data is
        stripped), None for other tensors."""
        return self.const_shapes.get(tensor)

    def live(self, sources: Iterable[str] | None = None) -> set[str]:
        """The tensors whose values depend on the model inputs' values (or those of the
        graph inputs ``sources``)."""
        live = set(self.input_names if sources is None else sources)
        for node in self.nodes:
            if node.op not in ("Shape", "Size") and any(t in live for t in self.value_inputs(node)):
                live.update(node.outputs)
        return live

    @staticmethod
    def value_inputs(node: Node) -> tuple[str, ...]:
        """The inputs whose values the node's output depends on: all, and the tensors
        its subgraphs read, but for ``CastLike`` only the first (the second lends its
        type)."""
        return node.inputs[:1] if node.op == "CastLike" else node.inputs + node.captured

    def is_parameter(self, node: Node, position: int) -> bool:
        """Whether ``node``'s input at ``position`` is a parameter (an initializer): a
        bias the exporter wrote as zeros it computed (``torch.export``'s) is none."""
        return position < len(node.inputs) and node.inputs[position] in self.initializers

    def const_root(self, tensor: str) -> str | None:
        """The constant a (transposed) constant is, None for other tensors."""
        return self.const_roots.get(tensor)

    def learned(self, tensor: str) -> tuple[int, ...] | None:
        """The dimensions of the float initializer (a learned table) ``tensor`` is, or
        is a transpose of; None for other tensors."""
        root = self.const_roots.get(tensor, "")
        proto = self.constants.get(root) if root in self.initializers else None
        if proto is None or proto.data_type not in FLOAT_TYPES:
            return None
        return tuple(int(d) for d in proto.dims)

    def values(self, tensor: str) -> list[float] | None:
        """The values of a constant (flattened), of a ``Concat`` of constants (as
        PyTorch writes an upsample's scales) or of a reshaped constant; None for others
        or stripped data."""
        proto = self.constants.get(tensor)
        if proto is None:
            node = self.producer.get(tensor)
            if node is None or node.op not in RESHAPED | {"Concat"}:
                return None
            sources = node.inputs if node.op == "Concat" else node.inputs[:1]
            parts = [self.values(t) for t in sources]
            return None if any(p is None for p in parts) else [v for p in parts for v in p or []]
        array = const_array(proto)
        return None if array is None else [float(v) for v in array.reshape(-1)]

    def scalar(self, tensor: str) -> float | None:
        """The value of a one-element constant, None for anything else."""
        values = self.values(tensor)
        return values[0] if values is not None and len(values) == 1 else None

    def single_reader(self, tensor: str) -> Node | None:
        """The one node that reads ``tensor``'s values, None when there are none or
        several (a ``CastLike`` that takes only its type does not count)."""
        readers = [r for r in self.consumers.get(tensor, []) if tensor in self.value_inputs(r)]
        return readers[0] if len(readers) == 1 else None

    def bias_after(self, node: Node, width: int, is_activation: Any) -> Node | None:
        """The ``Add`` of a constant of ``width`` elements that alone reads ``node``'s output."""
        add = self.single_reader(node.outputs[0])
        if add is None or add.op != "Add":
            return None
        others = [t for t in add.inputs if t != node.outputs[0]]
        if len(others) != 1 or is_activation(others[0]):
            return None
        dims = self.const_dims(others[0])
        return add if dims is not None and int(np.prod(dims)) == width else None

    def is_float_input(self, name: str) -> bool:
        """Whether the graph's input ``name`` holds floating-point values (not token ids)."""
        return self.elem_types[name] in FLOAT_TYPES

    def input_spec(self, name: str, sequence_first: bool = False) -> dict[str, Any]:
        """The workload input of the graph's input ``name``: image, vector, sequence or
        tokens; a ``sequence_first`` input's first axis is the sequence and its second
        the batch."""
        whole = self.dims(name)
        dims = (whole[0], whole[2]) if sequence_first else whole[1:]
        floating = self.is_float_input(name)
        if floating and len(dims) == 3:
            return {"kind": "image", "channels": dims[0], "height": dims[1], "width": dims[2]}
        if floating and len(dims) == 1:
            return {"kind": "vector", "features": dims[0]}
        if floating and len(dims) == 2:
            return {"kind": "sequence", "length": dims[0], "features": dims[1]}
        if not floating and len(dims) == 1:
            return {"kind": "tokens", "length": dims[0]}
        raise WorkloadError.single(
            self.source,
            f"graph.input[{self.input_names.index(name)}]"
            if len(self.input_names) > 1
            else "graph.input",
            "expected an image (C x H x W floats), a vector, a sequence of vectors (S x H"
            " floats) or a token sequence (integers) per sample",
            list(dims),
        )


FLOAT_TYPES = frozenset(
    {
        onnx.TensorProto.FLOAT,
        onnx.TensorProto.FLOAT16,
        onnx.TensorProto.BFLOAT16,
        onnx.TensorProto.DOUBLE,
    }
)
"""The floating-point element types (a model's parameters; not its index buffers)."""

STANDARD_DOMAINS = ("", "ai.onnx")
"""The standard ONNX operator domain's two spellings."""

RESHAPED = frozenset({"Reshape", "Cast", "CastLike", "Identity", "Squeeze", "Unsqueeze"})
"""Ops that keep a constant's values (in order) and change its shape or type."""

NAME_SCOPES = "pkg.torch.onnx.name_scopes"
"""Node metadata of PyTorch's ``torch.export``-based exporter: the module path of the
node, ``['', 'layer1', 'layer1.0', 'layer1.0.conv1', 'conv2d_1']``."""


def _scoped_name(node: onnx.NodeProto) -> str:
    """The node's name, or ``/layer1/layer1.0/layer1.0.conv1/conv2d_1`` from its module
    path when the exporter recorded one (its own names are ``node_conv2d_1``)."""
    for prop in node.metadata_props:
        if prop.key == NAME_SCOPES:
            scopes = [s.strip(" '") for s in prop.value.strip("[]").split(",")]
            return "/" + "/".join(s for s in scopes if s)
    return node.name


CLASS_HIERARCHY = "pkg.torch.onnx.class_hierarchy"
"""Node metadata of the same exporter: the class of each module on the node's path, then
its op, ``['torchvision.models.resnet.ResNet', 'torch.nn.modules.conv.Conv2d',
'aten.convolution.default']``."""


def _module_class(node: onnx.NodeProto) -> str:
    """The class of the innermost module on the node's path, "" when none is recorded."""
    for prop in node.metadata_props:
        if prop.key == CLASS_HIERARCHY:
            classes = [s.strip(" '") for s in prop.value.strip("[]").split(",")]
            return classes[-2] if len(classes) > 1 else ""
    return ""


def attribute_graphs(attr: onnx.AttributeProto) -> list[onnx.GraphProto]:
    """The graphs an attribute holds (an ``If``'s branch, a ``Loop``'s body)."""
    return [*attr.graphs, *([attr.g] if attr.HasField("g") else [])]


def _captured(node: onnx.NodeProto) -> set[str]:
    """The tensors of the enclosing graphs that ``node``'s subgraphs read."""
    read: set[str] = set()
    for attr in node.attribute:
        for graph in attribute_graphs(attr):
            made = {i.name for i in graph.input} | {t.name for t in graph.initializer}
            for inner in graph.node:
                read.update(t for t in [*inner.input, *_captured(inner)] if t not in made)
                made.update(inner.output)
    read.discard("")
    return read


def _constant_value(node: Node) -> onnx.TensorProto | None:
    """A ``Constant`` node's tensor, from whichever attribute holds it."""
    if "value" in node.attrs:
        value: onnx.TensorProto = node.attrs["value"]
        return value
    for key, dtype in (
        ("value_float", np.float32),
        ("value_floats", np.float32),
        ("value_int", np.int64),
        ("value_ints", np.int64),
    ):
        if key in node.attrs:
            return numpy_helper.from_array(np.array(node.attrs[key], dtype=dtype))
    return None


def const_array(tensor: onnx.TensorProto) -> np.ndarray[Any, Any] | None:
    """The values of a constant, or None when its data was stripped or is external
    (never opened, wherever it points: only its shape is read)."""
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        return None
    fields = ("float_data", "int32_data", "int64_data", "double_data")
    has_data = bool(tensor.raw_data) or any(len(getattr(tensor, f)) for f in fields)
    if not has_data and math.prod(tensor.dims) != 0:
        return None
    return numpy_helper.to_array(tensor)
