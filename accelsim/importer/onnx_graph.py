"""An ONNX graph -> the rows of a layer table (:class:`ImportedTable`).

With :mod:`accelsim.importer.graph_view`, the only module that imports ``onnx``.
It reads a graph exported in training mode
(batchnorm and dropout kept as ops), infers its shapes, and walks its nodes in order:

* a node whose inputs are all constants or shapes (``Shape``, ``Constant``, the
  arithmetic on them) is not a layer;
* a view (``Reshape``, ``Transpose``, ``Squeeze``, ``Unsqueeze``, ``Identity``,
  ``Cast``, ``Expand``) is not a layer: its output is its input's layer, except that
  a reshape of a C x H x W map to a vector is a ``flatten``;
* a ``MatMul`` or ``Gemm`` by a constant is a ``linear`` (with the ``Add`` of a
  constant bias after it folded in); a ``MatMul`` of two activations a ``matmul``;
* self-attention (two linears' outputs multiplied, a softmax, the product with a
  third linear's output, and a fourth linear after it) is one ``attention`` layer
  (see :mod:`accelsim.importer.attention`);
* every other op has a handler that writes its layer (``_Converter._handlers``), or
  none, or a handler that declines the op's form: then it is an error, or with
  ``unsupported="vector"`` a generic ``vector`` layer sized from its shapes.

Shapes are per sample: the first dimension of every activation is the batch.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import shape_inference

from accelsim.errors import Problem, WorkloadError
from accelsim.importer.attention import AttentionMatch, match_attentions
from accelsim.importer.graph_view import GraphView, Node

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

SHAPE_OPS = frozenset({"Shape", "Size"})
"""Ops whose output depends on a tensor's shape only, never on its values."""

ACTIVATIONS = {
    "Relu": "relu",
    "Sigmoid": "sigmoid",
    "Tanh": "tanh",
    "Gelu": "gelu",
    "HardSwish": "hardswish",
}
"""ONNX activation ops and the ``activation`` function each is."""

FUNCTIONAL = frozenset({"Add", "Sum", "Concat", "Mul", "MatMul", "Flatten", "Reshape", "Split"})
"""Ops PyTorch writes as functions inside a module: their layer is named after the
module and the op (``layer1.0.add``), never the module alone."""


@dataclass(frozen=True)
class ImportedTable:
    """A layer table read from a graph, with what the import decided.

    Attributes:
        input: The workload's ``input`` mapping (per sample).
        layers: One mapping per layer, in order, as a workload file writes it.
        notes: What the import did that a reader should know: absorbed ops, generic
            vector layers, the loss it appended.
    """

    input: dict[str, Any]
    layers: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)


def read_onnx(path: str, file: str) -> onnx.ModelProto:
    """Load an ONNX file (its external data, if any, is not needed: only shapes are);
    a name ending in ``.gz`` (any letter case) is read through gzip.

    Raises:
        WorkloadError: naming ``file``, for a file that is no (gzipped) ONNX model.
    """
    try:
        if path.lower().endswith(".gz"):
            with gzip.open(path, "rb") as stream:
                return onnx.load_from_string(stream.read())
        return onnx.load(path, load_external_data=False)
    except (OSError, EOFError, DecodeError) as exc:
        raise WorkloadError.single(file, "", f"not a readable ONNX file: {exc}") from None


def model_from_bytes(data: bytes) -> onnx.ModelProto:
    """An ONNX model from its serialised bytes."""
    return onnx.load_from_string(data)


def table_from_onnx(
    model: onnx.ModelProto,
    source: str,
    unsupported: str = "error",
    loss: str = "cross_entropy",
    input_shape: tuple[int, ...] | None = None,
) -> ImportedTable:
    """Convert ``model`` to layer-table rows.

    Args:
        model: A graph exported in training mode (weights may be stripped; shapes are read).
        source: The file name problems are reported against.
        unsupported: ``error`` (an op without a layer kind is an error) or ``vector``
            (it becomes a generic vector layer).
        loss: ``cross_entropy`` appends that loss unless the graph ends in one; ``none``
            appends nothing.
        input_shape: Per-sample input dimensions for a graph whose input has symbolic ones.

    Raises:
        WorkloadError: listing every op without a layer kind (naming its type and node),
            and graphs this importer cannot read (several inputs, unknown shapes).
    """
    view = GraphView(_with_shapes(model, source, input_shape), source)
    return _Converter(view, source, unsupported).convert(loss)


def _with_shapes(
    model: onnx.ModelProto, source: str, input_shape: tuple[int, ...] | None
) -> onnx.ModelProto:
    graph_inputs = _graph_inputs(model)
    if len(graph_inputs) != 1:
        names = [i.name for i in graph_inputs]
        raise WorkloadError.single(source, "graph.input", "expected exactly one model input", names)
    dims = graph_inputs[0].type.tensor_type.shape.dim
    if input_shape is not None:
        if len(input_shape) != len(dims) - 1:
            raise WorkloadError.single(
                source,
                "graph.input",
                f"--input-shape needs {len(dims) - 1} dimensions per sample",
                list(input_shape),
            )
        for dim, value in zip(dims, (1, *input_shape), strict=True):
            dim.dim_value = value
        # Shapes recorded for the exported input size would contradict the new one.
        del model.graph.value_info[:]
        for output in model.graph.output:
            output.type.tensor_type.ClearField("shape")
    elif dims and not dims[0].dim_value:
        dims[0].dim_value = 1
    if any(not d.dim_value for d in dims):
        raise WorkloadError.single(
            source,
            "graph.input",
            "the input has symbolic dimensions: give them with --input-shape",
            [d.dim_param or d.dim_value for d in dims],
        )
    return shape_inference.infer_shapes(model, data_prop=True)


def _graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    initialized = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in initialized]


class _Converter:
    """One walk over a graph's nodes, emitting layers."""

    def __init__(self, view: GraphView, source: str, unsupported: str) -> None:
        self.view = view
        self.source = source
        self.unsupported = unsupported
        self.layers: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.problems: list[Problem] = []
        self.vector_ops: list[str] = []
        self.layer_of: dict[str, str] = {view.input_name: "input"}
        self.names: set[str] = {"input"}
        self.skip: set[int] = set()
        self.attentions: dict[int, AttentionMatch] = {}
        self.scope_ops = _scope_ops(view)
        self.attention_notes: dict[str, list[str]] = {}
        self.tables: dict[str, str] = {}

    def convert(self, loss: str) -> ImportedTable:
        for match in match_attentions(self.view):
            self.skip.update(match.absorbed)
            self.attentions[match.output_node] = match
        handlers = self._handlers()
        for node in self.view.nodes:
            if node.index in self.skip:
                continue
            if node.index in self.attentions:
                self._attention(node, self.attentions[node.index])
                continue
            if self._is_embedding(node):
                self._embedding(node)
                continue
            acts = [t for t in self.view.value_inputs(node) if self.is_activation(t)]
            if not acts or node.op in SHAPE_OPS:
                continue
            handler = handlers.get(node.op)
            if handler is None or not handler(node, acts):
                self._unsupported(node, acts, known=handler is not None)
        if self.problems:
            raise WorkloadError(self.problems)
        if loss == "cross_entropy" and not any(x["kind"] == "cross_entropy" for x in self.layers):
            self._emit({"name": self._unique("loss"), "kind": "cross_entropy"}, [])
            self.notes.append("loss: cross_entropy appended after the graph's output")
        for note, names in self.attention_notes.items():
            self.notes.append(f"{note}: {', '.join(names)}")
        if self.vector_ops:
            self.notes.append(
                "generic vector layers (an op per element; no layer kind of their own): "
                + ", ".join(self.vector_ops)
            )
        return ImportedTable(self.view.input_spec(), self.layers, self.notes)

    # -- tensors ---------------------------------------------------------------

    def is_activation(self, tensor: str) -> bool:
        """Whether ``tensor``'s values depend on the model input's values."""
        return tensor in self.layer_of

    def dims(self, tensor: str) -> tuple[int, ...]:
        """Per-sample dimensions of an activation."""
        return self.view.dims(tensor)[1:]

    def _alias(self, node: Node, tensor: str) -> None:
        for out in node.outputs:
            self.layer_of[out] = self.layer_of[tensor]

    # -- emitting --------------------------------------------------------------

    def _name(self, node: Node, functional: bool | None = None) -> str:
        scope, leaf = _scope(node)
        if functional is None:
            functional = node.op in FUNCTIONAL
        # The exporters number an op's calls (``Add_1``, ``add_3``): names are numbered
        # per table instead, by ``_unique``.
        op = re.sub(r"_\d+$", "", leaf).lower() or node.op.lower()
        if not scope:
            base = op
        elif functional or len(self.scope_ops.get(scope, ())) > 1:
            base = f"{scope}.{op}"
        else:
            base = scope
        return self._unique(base)

    def _unique(self, base: str) -> str:
        name, k = base, 1
        while name in self.names:
            k += 1
            name = f"{base}_{k}"
        self.names.add(name)
        return name

    def _emit(self, row: dict[str, Any], inputs: list[str], outputs: tuple[str, ...] = ()) -> str:
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

    def _layer(self, node: Node, kind: str, inputs: list[str], **fields: Any) -> bool:
        row = {"name": self._name(node), "kind": kind, **fields}
        self._emit(row, inputs, node.outputs[:1])
        return True

    def _unsupported(self, node: Node, acts: list[str], known: bool) -> None:
        if self.unsupported != "vector":
            form = " in this form (attributes, constant operands or shapes)" if known else ""
            self.problems.append(
                Problem(
                    self.source,
                    f"nodes[{node.name or node.index}]",
                    f"op type {node.op} has no layer kind{form}; --unsupported vector maps it"
                    " to a generic vector op",
                    node.op,
                )
            )
            self._alias(node, acts[0])
            return
        out = node.outputs[0]
        dims = self.dims(out)
        if not 1 <= len(dims) <= 3 or not all(dims):
            self.problems.append(
                Problem(
                    self.source,
                    f"nodes[{node.name or node.index}]",
                    f"op type {node.op}: a vector op needs 1 to 3 known dimensions per sample",
                    list(dims),
                )
            )
            return
        layout = {3: "chw", 2: "sequence", 1: "features"}[len(dims)]
        name = self._name(node)
        self.vector_ops.append(f"{name} ({node.op})")
        row = {"name": name, "kind": "vector", "op": node.op, "layout": layout, "shape": list(dims)}
        self._emit(row, acts[:1], node.outputs[:1])

    # -- op handlers: True when the node became layers (or a view) ----------------

    def _handlers(self) -> dict[str, Callable[[Node, list[str]], bool]]:
        simple = {
            "BatchNormalization": "batchnorm",
            "LayerNormalization": "layernorm",
            "RMSNormalization": "rmsnorm",
            "Softmax": "softmax",
        }
        handlers: dict[str, Callable[[Node, list[str]], bool]] = {
            op: self._simple(kind) for op, kind in simple.items()
        }
        handlers.update({op: self._view for op in VIEWS})
        handlers.update({op: self._activation for op in ACTIVATIONS})
        handlers.update(
            {
                "Conv": self._conv,
                "ConvTranspose": self._conv_transpose,
                "GlobalAveragePool": self._global_pool,
                "ReduceMean": self._reduce_mean,
                "MaxPool": self._pool,
                "AveragePool": self._pool,
                "Clip": self._clip,
                "Add": self._add,
                "Sum": self._add,
                "Mul": self._mul,
                "Concat": self._concat,
                "Dropout": self._dropout,
                "Gemm": self._gemm,
                "MatMul": self._matmul,
                "Gather": self._gather,
                "GroupNormalization": self._groupnorm,
                "InstanceNormalization": self._instancenorm,
                "Split": self._split,
                "Resize": self._resize,
                "SoftmaxCrossEntropyLoss": self._loss,
            }
        )
        return handlers

    def _simple(self, kind: str) -> Callable[[Node, list[str]], bool]:
        def handle(node: Node, acts: list[str]) -> bool:
            return self._layer(node, kind, acts[:1])

        return handle

    def _view(self, node: Node, acts: list[str]) -> bool:
        before, after = self.dims(acts[0]), self.dims(node.outputs[0])
        if len(before) == 3 and len(after) == 1:
            return self._layer(node, "flatten", acts[:1])
        self._alias(node, acts[0])
        return True

    def _activation(self, node: Node, acts: list[str]) -> bool:
        return self._layer(node, "activation", acts[:1], function=ACTIVATIONS[node.op])

    def _clip(self, node: Node, acts: list[str]) -> bool:
        low, high = (self.view.scalar(t) if t else None for t in (*node.inputs[1:3], "")[:2])
        if low == 0 and high == 6:
            return self._layer(node, "activation", acts[:1], function="relu6")
        if low == 0 and high is None:
            return self._layer(node, "activation", acts[:1], function="relu")
        return False

    def _conv(self, node: Node, acts: list[str]) -> bool:
        weight = self.view.const_dims(node.inputs[1])
        pads = self._symmetric_pads(node)
        if weight is None or len(weight) != 4 or pads is None:
            return False
        row: dict[str, Any] = {"out_channels": weight[0], "kernel": _compact(weight[2:])}
        row.update(self._window_fields(node, pads, stride_default=1))
        dilation = _compact(node.attr("dilations", [1, 1]))
        if dilation != 1:
            row["dilation"] = dilation
        if node.attr("group", 1) != 1:
            row["groups"] = node.attr("group", 1)
        if self.view.is_parameter(node, 2):
            row["bias"] = True
        return self._layer(node, "conv2d", acts[:1], **row)

    def _conv_transpose(self, node: Node, acts: list[str]) -> bool:
        weight = self.view.const_dims(node.inputs[1])
        pads = self._symmetric_pads(node)
        if weight is None or len(weight) != 4 or pads is None:
            return False
        groups = node.attr("group", 1)
        row: dict[str, Any] = {"out_channels": weight[1] * groups, "kernel": _compact(weight[2:])}
        row.update(self._window_fields(node, pads, stride_default=1))
        extra = _compact(node.attr("output_padding", [0, 0]))
        if extra != 0:
            row["output_padding"] = extra
        dilation = _compact(node.attr("dilations", [1, 1]))
        if dilation != 1:
            row["dilation"] = dilation
        if groups != 1:
            row["groups"] = groups
        if self.view.is_parameter(node, 2):
            row["bias"] = True
        return self._layer(node, "conv_transpose2d", acts[:1], **row)

    def _pool(self, node: Node, acts: list[str]) -> bool:
        pads = self._symmetric_pads(node)
        kernel = node.attr("kernel_shape", [])
        if pads is None or len(kernel) != 2 or node.attr("ceil_mode", 0):
            return False
        strides = node.attr("strides", [1, 1])
        if list(kernel) == [1, 1] and list(strides) == [1, 1] and pads == [0, 0]:
            self.notes.append(f"{node.name}: a 1x1 {node.op} of stride 1 is the identity: omitted")
            self._alias(node, acts[0])
            return True
        kind = "maxpool" if node.op == "MaxPool" else "avgpool"
        row: dict[str, Any] = {"kernel": _compact(kernel)}
        row.update(self._window_fields(node, pads, stride_default=_compact(kernel)))
        return self._layer(node, kind, acts[:1], **row)

    def _global_pool(self, node: Node, acts: list[str]) -> bool:
        """``global_avgpool`` (a vector) when only flattens read it, else an
        ``adaptive_avgpool`` to 1 x 1 (a map, e.g. a squeeze-and-excitation gate's)."""
        readers = self.view.consumers.get(node.outputs[0], [])
        if readers and all(r.op in ("Flatten", "Reshape") for r in readers):
            return self._layer(node, "global_avgpool", acts[:1])
        return self._layer(node, "adaptive_avgpool", acts[:1], output=1)

    def _reduce_mean(self, node: Node, acts: list[str]) -> bool:
        """A mean over a map's height and width (``torch.mean(x, (2, 3))``, as the
        ``torch.export``-based exporter writes an adaptive pool to 1 x 1) is a global pool."""
        rank = len(self.view.dims(acts[0]))
        axes = node.attr("axes", None)
        if axes is None and len(node.inputs) > 1:
            axes = self.view.values(node.inputs[1])
        if rank != 4 or axes is None or sorted(int(a) % rank for a in axes) != [2, 3]:
            return False
        if not node.attr("keepdims", 1):
            return self._layer(node, "global_avgpool", acts[:1])
        return self._global_pool(node, acts)

    def _symmetric_pads(self, node: Node) -> list[int] | None:
        if node.attr("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
            return None
        pads = list(node.attr("pads", [0, 0, 0, 0]))
        if len(pads) != 4 or pads[:2] != pads[2:]:
            return None
        return pads[:2]

    def _window_fields(self, node: Node, pads: list[int], stride_default: Any) -> dict[str, Any]:
        row: dict[str, Any] = {}
        stride = _compact(node.attr("strides", [1, 1]))
        if stride != stride_default:
            row["stride"] = stride
        if _compact(pads) != 0:
            row["padding"] = _compact(pads)
        return row

    def _add(self, node: Node, acts: list[str]) -> bool:
        if len(acts) < 2:
            return False
        return self._layer(node, "add", acts)

    def _mul(self, node: Node, acts: list[str]) -> bool:
        if len(acts) != 2:
            return False
        big, small = sorted(acts, key=lambda t: -int(np.prod(self.dims(t))))
        return self._layer(node, "mul", [big, small])

    def _concat(self, node: Node, acts: list[str]) -> bool:
        rank = len(self.dims(acts[0]))
        if len(acts) != len(node.inputs) or node.attr("axis", 0) not in (1, -rank - 1):
            return False
        if len(acts) == 1:
            self._alias(node, acts[0])
            return True
        return self._layer(node, "concat", acts)

    def _dropout(self, node: Node, acts: list[str]) -> bool:
        ratio = self.view.scalar(node.inputs[1]) if len(node.inputs) > 1 else 0.5
        training = self.view.scalar(node.inputs[2]) if len(node.inputs) > 2 else 0
        if ratio is None or not training:
            self._alias(node, acts[0])
            self.notes.append(f"{node.name}: dropout not in training mode: omitted")
            return True
        return self._layer(node, "dropout", acts[:1], rate=round(float(ratio), 6))

    def _gemm(self, node: Node, acts: list[str]) -> bool:
        weight = self.view.const_dims(node.inputs[1])
        if len(acts) != 1 or acts[0] != node.inputs[0] or weight is None or node.attr("transA", 0):
            return False
        out = weight[0] if node.attr("transB", 0) else weight[1]
        name = self._name(node)
        row: dict[str, Any] = {"name": name, "kind": "linear", "out_features": out}
        if not self.view.is_parameter(node, 2):
            row["bias"] = False
        row.update(self._weight_fields(name, node.inputs[1]))
        self._emit(row, acts, node.outputs[:1])
        return True

    def _matmul(self, node: Node, acts: list[str]) -> bool:
        if len(acts) == 2:
            return self._activation_matmul(node, acts)
        weight = self.view.const_dims(node.inputs[1])
        if acts[0] != node.inputs[0] or weight is None or len(weight) != 2:
            return False
        bias = self.view.bias_after(node, weight[1], self.is_activation)
        name = self._name(node, functional=False)
        row: dict[str, Any] = {"name": name, "kind": "linear", "out_features": weight[1]}
        if bias is None:
            row["bias"] = False
        else:
            self.skip.add(bias.index)
        row.update(self._weight_fields(name, node.inputs[1]))
        self._emit(row, acts, (bias or node).outputs)
        return True

    def _activation_matmul(self, node: Node, acts: list[str]) -> bool:
        a, b = (self.dims(t) for t in acts)
        if len(a) != len(b) or len(a) not in (2, 3):
            return False
        heads = a[0] if len(a) == 3 else 1
        return self._layer(node, "matmul", acts, **({} if heads == 1 else {"heads": heads}))

    def _is_embedding(self, node: Node) -> bool:
        table = self.view.const_dims(node.inputs[0]) if node.op == "Gather" else None
        return table is not None and len(table) == 2 and node.attr("axis", 0) == 0

    def _embedding(self, node: Node) -> None:
        """A lookup in a constant table: an ``embedding`` of the token input (position
        and token-type ids are computed from it, or are constants)."""
        table = self.view.const_dims(node.inputs[0])
        assert table is not None
        row: dict[str, Any] = {"name": self._name(node), "kind": "embedding"}
        row.update({"num_embeddings": table[0], "embedding_dim": table[1], "inputs": ["input"]})
        self.tables[node.inputs[0]] = self._emit(row, [], node.outputs[:1])

    def _weight_fields(self, name: str, weight: str) -> dict[str, Any]:
        """``tied_to`` when a linear's weight is an embedding's table (tied embeddings)."""
        table = self.tables.get(self.view.const_root(weight) or "")
        if table is None:
            return {}
        self.notes.append(f"{name}: its weight is {table}'s table (tied)")
        return {"tied_to": table}

    def _gather(self, node: Node, acts: list[str]) -> bool:
        index = self.view.scalar(node.inputs[1])
        data = self.dims(node.inputs[0])
        if (
            acts == [node.inputs[0]]
            and index is not None
            and len(data) == 2
            and node.attr("axis", 0) == 1
        ):
            return self._layer(node, "token_select", acts, index=int(index))
        return False

    def _instancenorm(self, node: Node, acts: list[str]) -> bool:
        """PyTorch's group norm: a reshape to groups, ``InstanceNormalization``, a reshape
        back and the per-channel scale and shift (a ``Mul`` and an ``Add`` of constants,
        absorbed); a plain instance norm is a group norm of one channel per group."""
        dims = self.dims(acts[0])
        groups = dims[0] if dims else 0
        reshape_to = self.view.producer.get(acts[0])
        if not groups and reshape_to is not None and reshape_to.op == "Reshape":
            target = self.view.values(reshape_to.inputs[1]) or []
            groups = int(target[1]) if len(target) == 3 and target[1] > 0 else 0
        if len(dims) not in (2, 3) or not groups:
            return False
        out = node.outputs[0]
        reshape = self.view.single_reader(out)
        if len(dims) == 2 and reshape is not None and reshape.op == "Reshape":
            out = reshape.outputs[0]
            self.skip.add(reshape.index)
        for op in ("Mul", "Add"):
            affine = self.view.single_reader(out)
            others = [t for t in affine.inputs if t != out] if affine is not None else []
            if (
                affine is None
                or affine.op != op
                or len(others) != 1
                or self.is_activation(others[0])
            ):
                break
            self.skip.add(affine.index)
            out = affine.outputs[0]
        row = {"name": self._name(node), "kind": "groupnorm", "groups": groups}
        self._emit(row, acts[:1], (out,))
        return True

    def _groupnorm(self, node: Node, acts: list[str]) -> bool:
        return self._layer(node, "groupnorm", acts[:1], groups=node.attr("num_groups", 1))

    def _split(self, node: Node, acts: list[str]) -> bool:
        sizes = [self.dims(t)[0] for t in node.outputs]
        if node.attr("axis", 0) != 1 or not all(sizes):
            return False
        base = self._name(node)
        for index, out in enumerate(node.outputs):
            name = self._unique(f"{base}.{index}")
            row: dict[str, Any] = {"name": name, "kind": "split", "sizes": sizes, "index": index}
            self._emit(row, acts[:1], (out,))
        return True

    def _resize(self, node: Node, acts: list[str]) -> bool:
        mode = node.attr("mode", b"nearest")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        modes = {"nearest": "nearest", "linear": "bilinear"}
        after = self.dims(node.outputs[0])
        scales = self.view.values(node.inputs[2]) if len(node.inputs) > 2 else None
        if mode not in modes or len(self.dims(acts[0])) != 3:
            return False
        if len(after) == 3 and all(after):
            return self._layer(node, "upsample", acts[:1], mode=modes[mode], size=list(after[1:]))
        if scales is None or len(scales) != 4 or any(v != int(v) or v < 1 for v in scales[2:]):
            return False
        scale = _compact(scales[2:])
        return self._layer(node, "upsample", acts[:1], mode=modes[mode], scale=scale)

    def _loss(self, node: Node, acts: list[str]) -> bool:
        return self._layer(node, "cross_entropy", acts[:1])

    def _attention(self, node: Node, match: AttentionMatch) -> None:
        row: dict[str, Any] = {"name": self._unique(match.name), "kind": "attention"}
        row["heads"] = match.heads
        if not match.bias:
            row["bias"] = False
        if match.causal:
            row["causal"] = True
        self._emit(row, [match.input], node.outputs)
        self.attention_notes.setdefault(match.note, []).append(str(row["name"]))


def _scope(node: Node) -> tuple[str, str]:
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
    joined = ".".join(path)
    return re.sub(r"[^A-Za-z0-9_.\-]", "_", joined), parts[-1]


def _scope_ops(view: GraphView) -> dict[str, set[str]]:
    """The op types of the layer-making nodes of each module scope."""
    ops: dict[str, set[str]] = {}
    skipped = VIEWS | SHAPE_OPS | FUNCTIONAL
    live = view.live()
    for node in view.nodes:
        if node.op not in skipped and any(t in live for t in node.inputs):
            ops.setdefault(_scope(node)[0], set()).add(node.op)
    return ops


def _compact(values: Any) -> Any:
    """``[3, 3]`` -> ``3``; ``[1, 7]`` stays a list."""
    items = [int(v) for v in values]
    return items[0] if len(set(items)) == 1 else items
