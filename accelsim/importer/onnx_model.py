"""What an import checks of an ONNX model before it walks the graph, and the one
rewrite it makes first.

:func:`model_problems` refuses what the onnx library would fail on later, or what
the walk would misread: an IR version or a standard-domain opset newer than the
installed onnx library knows (or none), a tensor stored in segments, of no element
type, with a negative dimension or with data of the wrong size, a node reading a
tensor no earlier node makes, a graph output no node makes. Each problem names the
tensor, the node or the key. A tensor whose data is external is never opened,
wherever it points: like a tensor whose data was stripped, only its shape is read.

:func:`inline_constant_ifs` replaces an ``If`` whose condition is a constant by the
nodes of the branch it takes (its outputs become the ``If``'s), so the walk sees
what the graph computes.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import onnx
from onnx import TensorProto, helper

from accelsim.errors import Problem
from accelsim.importer.graph_view import STANDARD_DOMAINS, attribute_graphs, const_array

PACKED_BITS = {
    getattr(TensorProto, name): bits
    for name, bits in (
        ("INT4", 4),
        ("UINT4", 4),
        ("FLOAT4E2M1", 4),
        ("INT2", 2),
        ("UINT2", 2),
        ("FLOAT6E2M3", 6),
        ("FLOAT6E3M2", 6),
    )
    if hasattr(TensorProto, name)
}
"""Element types packed below a byte in raw data, and their bits per element (those
the installed onnx library has)."""

COMPLEX = frozenset({TensorProto.COMPLEX64, TensorProto.COMPLEX128})
"""Element types stored as two numbers each (real and imaginary parts)."""

ELEMENT_TYPES = frozenset(TensorProto.DataType.values()) - {TensorProto.UNDEFINED}
"""The element types the installed onnx library knows."""


def model_problems(model: onnx.ModelProto, file: str) -> list[Problem]:
    """Everything in ``model`` that the import refuses, each naming where it is."""
    problems = _version_problems(model, file)
    for where, tensor in _tensors(model.graph, ""):
        message = _tensor_problem(tensor)
        if message is not None:
            problems.append(Problem(file, where, message))
    return problems + _flow_problems(model.graph, file)


def _version_problems(model: onnx.ModelProto, file: str) -> list[Problem]:
    problems = []
    if model.ir_version > onnx.IR_VERSION:
        message = f"newer than the installed onnx library reads ({onnx.IR_VERSION})"
        problems.append(Problem(file, "ir_version", message, model.ir_version))
    versions = [o.version for o in model.opset_import if o.domain in STANDARD_DOMAINS]
    newest = onnx.defs.onnx_opset_version()
    if not versions:
        message = "the model imports no opset of the standard ONNX domain"
        problems.append(Problem(file, "opset_import", message))
    elif max(versions) > newest:
        message = f"opset newer than the installed onnx library knows ({newest})"
        problems.append(Problem(file, "opset_import", message, max(versions)))
    return problems


def _tensors(graph: onnx.GraphProto, scope: str) -> Iterator[tuple[str, onnx.TensorProto]]:
    """Every constant tensor of ``graph`` and its subgraphs, with its key path."""
    for tensor in graph.initializer:
        yield f"{scope}initializer[{tensor.name}]", tensor
    for index, node in enumerate(graph.node):
        where = f"{scope}nodes[{node.name or index}]"
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR:
                yield f"{where}.{attr.name}", attr.t
            for sub in attribute_graphs(attr):
                yield from _tensors(sub, f"{where}.{attr.name}.")


def _tensor_problem(tensor: onnx.TensorProto) -> str | None:
    if tensor.HasField("segment"):
        return "a tensor stored in segments is not supported"
    if tensor.data_type not in ELEMENT_TYPES:
        return f"data type {tensor.data_type} is no ONNX element type"
    if any(d < 0 for d in tensor.dims):
        return f"a negative dimension in its shape {list(tensor.dims)}"
    if tensor.data_location == TensorProto.EXTERNAL or tensor.data_type == TensorProto.STRING:
        return None
    count, shape = math.prod(tensor.dims), list(tensor.dims)
    if tensor.HasField("raw_data"):
        np_dtype = helper.tensor_dtype_to_np_dtype(tensor.data_type)
        size = math.ceil(count * PACKED_BITS.get(tensor.data_type, np_dtype.itemsize * 8) / 8)
        if len(tensor.raw_data) != size:
            return f"raw data of {len(tensor.raw_data):,} bytes; its shape {shape} needs {size:,}"
        return None
    values = len(getattr(tensor, helper.tensor_dtype_to_field(tensor.data_type)))
    if tensor.data_type in COMPLEX:
        count *= 2
    if values and tensor.data_type not in PACKED_BITS and values != count:
        return f"{values:,} values; its shape {shape} needs {count:,}"
    return None


def _flow_problems(graph: onnx.GraphProto, file: str) -> list[Problem]:
    """Nodes reading tensors no earlier node makes; outputs no node makes."""
    known = {"", *(i.name for i in graph.input), *(t.name for t in graph.initializer)}
    known.update(t.values.name for t in graph.sparse_initializer)
    problems = []
    for index, node in enumerate(graph.node):
        missing = [t for t in node.input if t not in known]
        if missing:
            message = "reads a tensor that no earlier node makes"
            problems.append(Problem(file, f"nodes[{node.name or index}]", message, missing[0]))
        known.update(node.output)
    for output in graph.output:
        if output.name not in known:
            message = "no node makes this output"
            problems.append(Problem(file, "graph.output", message, output.name))
    return problems


def inline_constant_ifs(model: onnx.ModelProto) -> None:
    """Replace each ``If`` of the main graph whose condition is a constant (an
    initializer or a ``Constant`` node's ``value``, of one element) by its taken
    branch when that makes as many outputs as the ``If``, nested ones too; ``model``
    must have no :func:`model_problems`."""
    graph = model.graph
    constants = {t.name: t for t in graph.initializer}
    nodes = _inlined(list(graph.node), constants, graph)
    del graph.node[:]
    graph.node.extend(nodes)


def _inlined(
    nodes: list[onnx.NodeProto], constants: dict[str, onnx.TensorProto], graph: onnx.GraphProto
) -> list[onnx.NodeProto]:
    result: list[onnx.NodeProto] = []
    for node in nodes:
        if node.op_type == "Constant" and node.domain in STANDARD_DOMAINS:
            for attr in node.attribute:
                if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR:
                    constants[node.output[0]] = attr.t
        taken = _taken_branch(node, constants)
        if taken is None:
            result.append(node)
            continue
        graph.initializer.extend(taken.initializer)
        constants.update((t.name, t) for t in taken.initializer)
        result += _inlined(list(taken.node), constants, graph)
        for inner, outer in zip(taken.output, node.output, strict=True):
            name = f"{node.name}/{outer}"
            result.append(helper.make_node("Identity", [inner.name], [outer], name=name))
    return result


def _taken_branch(
    node: onnx.NodeProto, constants: dict[str, onnx.TensorProto]
) -> onnx.GraphProto | None:
    """The branch an ``If`` of a constant condition takes, None for other nodes."""
    if node.op_type != "If" or node.domain not in STANDARD_DOMAINS or not node.input:
        return None
    condition = constants.get(node.input[0])
    values = None if condition is None else const_array(condition)
    if values is None or values.size != 1:
        return None
    branches = {a.name: a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH}
    taken = branches.get("then_branch" if values.reshape(-1)[0] else "else_branch")
    return taken if taken is not None and len(taken.output) == len(node.output) else None
