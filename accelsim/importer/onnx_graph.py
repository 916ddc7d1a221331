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
* every other op has a handler that writes its layer (``onnx_ops.HANDLERS``), or
  none, or a handler that declines the op's form: then it is an error, or with
  ``unsupported="vector"`` a generic ``vector`` layer sized from its shapes.

Shapes are per sample: the first dimension of every activation is the batch.
"""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass, field
from typing import Any

import onnx
from google.protobuf.message import DecodeError
from onnx import shape_inference

from accelsim.errors import Problem, WorkloadError
from accelsim.importer.attention import AttentionMatch, match_attentions
from accelsim.importer.graph_view import GraphView, Node
from accelsim.importer.layer_rows import FUNCTIONAL, LayerRows, scope_of
from accelsim.importer.mask_inputs import mask_inputs
from accelsim.importer.onnx_model import inline_constant_ifs, model_problems
from accelsim.importer.onnx_ops import HANDLERS, VIEWS, embedding, is_embedding
from accelsim.importer.onnx_regions import Region, match_regions
from accelsim.importer.sequence_axis import is_sequence_first
from accelsim.importer.window_attention import window_attention, windowed

MAX_GZIP_BYTES = 256 * 2**20
"""Most bytes a ``.onnx.gz`` file may decompress to (256 MiB): a graph without its
weights is a few MiB, and reading stops here, so no small file can expand to
gigabytes of memory."""

MAX_INPUT_DIM = 2**31 - 1
"""Largest ``input_shape`` dimension, as for every integer setting."""

SHAPE_OPS = frozenset({"Shape", "Size"})
"""Ops whose output depends on a tensor's shape only, never on its values."""


@dataclass(frozen=True)
class ImportedTable:
    """A layer table read from a graph, with what the import decided.

    Attributes:
        input: The workload's ``input`` mapping (per sample).
        layers: One mapping per layer, in order, as a workload file writes it.
        notes: What the import did that a reader should know: absorbed ops, generic
            vector layers, the loss it appended.
        sources: Where in the model each layer comes from, as a key of the model
            (``nodes[/layer1/conv1/Conv]``; ``graph.output`` for the loss appended
            after it): a problem of the layer is blamed there.
        sequence_first: The graph's inputs are (sequence, batch, features): its
            sequence ops run over the first axis (:mod:`accelsim.importer.sequence_axis`).
        extra_inputs: The workload's ``extra_inputs``: each graph input after the first,
            by its name in the table.
    """

    input: dict[str, Any]
    layers: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    sequence_first: bool = False
    extra_inputs: dict[str, dict[str, Any]] = field(default_factory=dict)


def read_onnx(path: str, file: str) -> onnx.ModelProto:
    """Load an ONNX file (its external data, if any, is not needed: only shapes are);
    a name ending in ``.gz`` (any letter case) is read through gzip, at most
    :data:`MAX_GZIP_BYTES` of it.

    Raises:
        WorkloadError: naming ``file``, for a file that is no (gzipped) ONNX model.
    """
    try:
        if not path.lower().endswith(".gz"):
            return onnx.load(path, load_external_data=False)
        with gzip.open(path, "rb") as stream:
            data = stream.read(MAX_GZIP_BYTES + 1)
    except (OSError, EOFError, DecodeError, zlib.error) as exc:
        raise WorkloadError.single(file, "", f"not a readable ONNX file: {exc}") from None
    if len(data) > MAX_GZIP_BYTES:
        message = (
            f"decompresses to more than {MAX_GZIP_BYTES:,} bytes, the limit of a gzipped model"
            " (only shapes are read: export it without weights, or decompress it)"
        )
        raise WorkloadError.single(file, "", message)
    try:
        return onnx.load_from_string(data)
    except DecodeError as exc:
        raise WorkloadError.single(file, "", f"not a readable ONNX file: {exc}") from None


def model_from_bytes(data: bytes) -> onnx.ModelProto:
    """An ONNX model from its serialised bytes."""
    return onnx.load_from_string(data)


def table_from_onnx(
    model: onnx.ModelProto,
    source: str,
    unsupported: str = "error",
    loss: str = "cross_entropy",
    input_shapes: tuple[tuple[int, ...], ...] | None = None,
) -> ImportedTable:
    """Convert ``model`` to layer-table rows.

    Args:
        model: A graph exported in training mode (weights may be stripped; shapes are read).
        source: The file name problems are reported against.
        unsupported: ``error`` (an op without a layer kind is an error) or ``vector``
            (it becomes a generic vector layer).
        loss: ``cross_entropy`` appends that loss unless the graph ends in one; ``none``
            appends nothing.
        input_shapes: Per-sample dimensions of each graph input, in order, for a graph
            whose inputs have symbolic ones.

    Raises:
        WorkloadError: listing every op without a layer kind (naming its type and node),
            and graphs this importer cannot read (no input, unknown shapes, the
            problems of :func:`~accelsim.importer.onnx_model.model_problems`).
    """
    problems = model_problems(model, source)
    if problems:
        raise WorkloadError(problems)
    inline_constant_ifs(model)
    view = GraphView(_with_shapes(model, source, input_shapes), source)
    view = view.with_masks(mask_inputs(view))
    return _Converter(view, source, unsupported).convert(loss)


def _with_shapes(
    model: onnx.ModelProto, source: str, input_shapes: tuple[tuple[int, ...], ...] | None
) -> onnx.ModelProto:
    graph_inputs = _graph_inputs(model)
    if not graph_inputs:
        raise WorkloadError.single(source, "graph.input", "expected a model input", [])
    if input_shapes is not None:
        _given_shapes(model, graph_inputs, source, input_shapes)
    for index, graph_input in enumerate(graph_inputs):
        dims = graph_input.type.tensor_type.shape.dim
        if input_shapes is None and dims and not dims[0].dim_value:
            dims[0].dim_value = 1
        if any(not d.dim_value for d in dims):
            raise WorkloadError.single(
                source,
                _input_key(index, len(graph_inputs)),
                "the input has symbolic dimensions: give them with --input-shape",
                [d.dim_param or d.dim_value for d in dims],
            )
    try:
        return shape_inference.infer_shapes(model, data_prop=True)
    except shape_inference.InferenceError as exc:
        raise WorkloadError.single(source, "graph", f"shape inference failed: {exc}") from None


def _given_shapes(
    model: onnx.ModelProto,
    graph_inputs: list[onnx.ValueInfoProto],
    source: str,
    input_shapes: tuple[tuple[int, ...], ...],
) -> None:
    """Set each graph input's dimensions to its ``--input-shape`` (batch 1)."""
    if len(input_shapes) != len(graph_inputs):
        names = [i.name for i in graph_inputs]
        message = (
            f"--input-shape given {len(input_shapes)} times: give it once per model input,"
            " in the graph's order"
        )
        raise WorkloadError.single(source, "graph.input", message, names)
    for index, (graph_input, shape) in enumerate(zip(graph_inputs, input_shapes, strict=True)):
        dims = graph_input.type.tensor_type.shape.dim
        if not all(1 <= d <= MAX_INPUT_DIM for d in shape):
            message = f"each dimension is 1 to {MAX_INPUT_DIM:,}"
            raise WorkloadError.single("--input-shape", "", message, list(shape))
        if len(shape) != len(dims) - 1:
            raise WorkloadError.single(
                source,
                _input_key(index, len(graph_inputs)),
                f"--input-shape needs {len(dims) - 1} dimensions per sample",
                list(shape),
            )
        for dim, value in zip(dims, (1, *shape), strict=True):
            dim.dim_value = value
    # Shapes recorded for the exported input size would contradict the new one.
    del model.graph.value_info[:]
    for output in model.graph.output:
        output.type.tensor_type.ClearField("shape")


def _input_key(index: int, count: int) -> str:
    """The key of the graph's input ``index`` of ``count``: ``graph.input`` when it is
    the only one."""
    return "graph.input" if count == 1 else f"graph.input[{index}]"


def _graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    initialized = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in initialized]


class _Converter:
    """One walk over a graph's nodes, writing their layers into a :class:`LayerRows`."""

    def __init__(self, view: GraphView, source: str, unsupported: str) -> None:
        self.view = view
        self.source = source
        self.unsupported = unsupported
        self.rows = LayerRows(view, _scope_ops(view))
        self.problems: list[Problem] = []
        self.vector_ops: list[str] = []
        self.attentions: dict[int, AttentionMatch] = {}
        self.regions: dict[int, Region] = {}

    def convert(self, loss: str) -> ImportedTable:
        rows = self.rows
        for match in match_attentions(self.view):
            rows.skip.update(match.absorbed)
            self.attentions[match.output_node] = match
        for region in match_regions(self.view, self.view.live()):
            rows.skip.update(region.absorbed)
            self.regions[region.output_node] = region
        sources: list[str] = []
        for node in self.view.nodes:
            start = len(rows.layers)
            self._node(node)
            sources += [f"nodes[{node.name or node.index}]"] * (len(rows.layers) - start)
        if self.problems:
            raise WorkloadError(self.problems)
        if loss == "cross_entropy" and not any(x["kind"] == "cross_entropy" for x in rows.layers):
            rows.emit({"name": rows.unique("loss"), "kind": "cross_entropy"}, [])
            rows.notes.append("loss: cross_entropy appended after the graph's output")
            sources.append("graph.output")
        for note, names in rows.grouped_notes.items():
            rows.notes.append(f"{note}: {', '.join(names)}")
        if self.vector_ops:
            rows.notes.append(
                "generic vector layers (an op per element; no layer kind of their own): "
                + ", ".join(self.vector_ops)
            )
        for mask in self.view.mask_names:
            rows.notes.append(
                f"{mask}: {self._mask_kind(mask)}, read as a constant (it adds no work)"
            )
        first = is_sequence_first(self.view, self.attentions.values())
        specs = {}
        for graph_name, name in rows.inputs.items():
            specs[name] = self.view.input_spec(graph_name, sequence_first=first)
            if first:
                length, batch = self.view.dims(graph_name)[:2]
                rows.notes.append(
                    f"{name}: sequence-first, (sequence {length}, batch {batch}, features): read"
                    f" as sequences of {length} (the batch is the run's)"
                )
        spec = specs.pop("input")
        return ImportedTable(
            spec, rows.layers, rows.notes, sources, sequence_first=first, extra_inputs=specs
        )

    def _mask_kind(self, mask: str) -> str:
        """What the mask input ``mask`` is, for its note."""
        elem_type = self.view.elem_types[mask]
        if elem_type == onnx.TensorProto.BOOL:
            return "a boolean mask input"
        kind = "float" if self.view.is_float_input(mask) else "integer"
        return f"an {kind} input that only masks attention scores"

    def _node(self, node: Node) -> None:
        """Write the layers of ``node`` (none for a constant, a view or an absorbed node)."""
        rows = self.rows
        if node.index in rows.skip:
            return
        if node.index in self.attentions:
            self._attention(node, self.attentions[node.index])
            return
        if node.index in self.regions:
            region = self.regions[node.index]
            row = {"name": rows.unique(scope_of(node)[0] or region.kind), "kind": region.kind}
            rows.emit({**row, **region.fields}, [region.input], node.outputs[:1])
            return
        if is_embedding(self.view, node):
            embedding(rows, node)
            return
        acts = [t for t in self.view.value_inputs(node) if rows.is_activation(t)]
        if not acts or node.op in SHAPE_OPS:
            return
        handler = HANDLERS.get(node.op)
        if handler is None or not handler(rows, node, acts):
            self._unsupported(node, acts, known=handler is not None)

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
            self.rows.alias(node, acts[0])
            return
        out = node.outputs[0]
        dims = self.rows.dims(out)
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
        name = self.rows.name(node)
        self.vector_ops.append(f"{name} ({node.op})")
        row = {"name": name, "kind": "vector", "op": node.op, "layout": layout, "shape": list(dims)}
        self.rows.emit(row, acts[:1], node.outputs[:1])

    def _attention(self, node: Node, match: AttentionMatch) -> None:
        if windowed(self.rows, match):
            written = window_attention(self.rows, node, match)
            if written is None:
                self._unsupported(node, [match.inputs[0]], known=True)
            else:
                self.rows.grouped_notes.setdefault(written[1], []).append(written[0])
            return
        row: dict[str, Any] = {"name": self.rows.unique(match.name), "kind": "attention"}
        row["heads"] = match.heads
        if match.kv_heads != match.heads:
            row["kv_heads"] = match.kv_heads
        if not match.bias:
            row["bias"] = False
        if match.out_bias != match.bias:
            row["out_bias"] = match.out_bias
        if match.causal:
            row["causal"] = True
        if match.rotary:
            row["rotary"] = True
        self.rows.emit(row, list(match.inputs), node.outputs)
        self.rows.grouped_notes.setdefault(match.note, []).append(str(row["name"]))


def _scope_ops(view: GraphView) -> dict[str, set[str]]:
    """The op types of the layer-making nodes of each module scope."""
    ops: dict[str, set[str]] = {}
    skipped = VIEWS | SHAPE_OPS | FUNCTIONAL
    live = view.live()
    for node in view.nodes:
        if node.op not in skipped and any(t in live for t in node.inputs):
            ops.setdefault(scope_of(node)[0], set()).add(node.op)
    return ops
