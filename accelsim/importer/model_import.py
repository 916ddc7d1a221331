"""``accelsim import``: a model (ONNX file or PyTorch module) -> a workload file."""

from __future__ import annotations

import functools
import importlib
import os
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal

from accelsim._version import __version__
from accelsim.config.base import NAME_PATTERN
from accelsim.config.files import display_path
from accelsim.config.validate import validate_data
from accelsim.errors import Problem, WorkloadError
from accelsim.importer.input_shapes import InputShapes, InputType, element_types, several
from accelsim.importer.table_text import workload_text
from accelsim.lowering.infer import infer_shapes
from accelsim.workload.model import Workload

if TYPE_CHECKING:
    from accelsim.importer.onnx_graph import ImportedTable

Unsupported = Literal["error", "vector"]
Loss = Literal["cross_entropy", "none"]


@dataclass(frozen=True)
class ImportResult:
    """An imported model.

    Attributes:
        workload: The validated layer table.
        text: The workload file's text (header comment and table).
    """

    workload: Workload
    text: str


def import_model(
    source: Any,
    *,
    input_shape: InputShapes | None = None,
    tokens: bool = False,
    input_types: Sequence[str] | None = None,
    name: str | None = None,
    unsupported: Unsupported = "error",
    loss: Loss = "cross_entropy",
) -> ImportResult:
    """Import a model as a layer table, validated as a hand-written one is.

    Args:
        source: An ONNX file (a path), or a PyTorch ``nn.Module`` (exported to ONNX in
            training mode, which needs ``torch``).
        input_shape: Per-sample input dimensions: required for a module (``(3, 224,
            224)``: an image); for an ONNX file only when its input has symbolic ones.
            A model of several inputs takes a sequence of them, one per input in order
            (``[(16, 64), (32, 64)]``): the first is the workload's ``input``, the others
            its ``extra_inputs``, named after the graph's inputs.
        tokens: A module's (first) input is a sequence of integer token ids
            (``input_shape`` its length).
        input_types: A module's inputs' elements, one per input: ``float`` (the
            default), ``int`` (token ids, or a mask of ones and zeros such as Hugging
            Face's ``attention_mask``) or ``bool`` (a padding mask).
        name: The workload's name (default: the file's stem or the module's class).
        unsupported: ``error``: an op without a layer kind is an error naming its type
            and node; ``vector``: it becomes a generic vector layer, listed in the header.
        loss: ``cross_entropy`` appends the loss when the graph has none; ``none`` does not.

    Raises:
        WorkloadError: for ops without a layer kind, unreadable graphs, and tables that
            do not validate.
    """
    if isinstance(source, str | Path):
        path = Path(source)
        if input_types is not None:
            message = "an ONNX file's inputs have their types: give types only for a module"
            raise WorkloadError.single(str(path), "input_types", message, list(input_types))
        onnx_graph = _onnx_graph(str(path))
        model = _read(onnx_graph, path, str(path))
        origin = f"{_file_name(path)} (ONNX, {_producer(model)})"
        label = str(path)
        default_name = _stem(path)
        shape = None if input_shape is None else several(input_shape)
    else:
        if input_shape is None:
            raise WorkloadError.single("module", "input_shape", "a module needs an input shape")
        onnx_graph = _onnx_graph("module")
        shapes = several(input_shape)
        types = element_types(len(shapes), tokens, input_types)
        model = _exported(onnx_graph, source, shapes, types)
        origin = (
            f"PyTorch module {type(source).__module__}.{type(source).__qualname__},"
            " exported in training mode by torch.onnx (torch.export-based)"
        )
        label = type(source).__name__
        default_name = type(source).__name__.lower()
        shape = None
    table = onnx_graph.table_from_onnx(model, label, unsupported, loss, shape)
    model_name = name or _safe_name(default_name)
    settings = _settings(table, input_shape is not None, unsupported, loss)
    header = _header(origin, settings, table)
    if model.doc_string:
        header[1:1] = textwrap.wrap(f"The graph says: {model.doc_string}", 86)
    top = _top(model_name, origin, table)
    text = workload_text(header, top, table.layers)
    data = {**top, "layers": table.layers}
    workload = _validated(data, table, label)
    return ImportResult(workload, text)


def _exported(
    onnx_graph: ModuleType,
    module: Any,
    shapes: tuple[tuple[int, ...], ...],
    types: tuple[InputType, ...],
) -> Any:
    """``module`` exported to an ONNX model at batch 1: batch first, ``(1, S, E)``, or,
    when it reads its float sequences' first axis as the sequence, again as ``(S, 1,
    E)``, so that the graph runs over the sequences given (a module of several inputs
    whose batch-first export fails, its inputs' lengths taken for batches that differ,
    is tried sequence-first, and kept when its graph is; else the first export's problem
    is the one reported)."""
    from accelsim.importer.torch_source import onnx_bytes

    flat = all(t == "float" for t in types) and all(len(dims) == 2 for dims in shapes)
    export = functools.partial(onnx_bytes, module, shapes, weights=False, input_types=types)
    try:
        model = onnx_graph.model_from_bytes(export())
    except WorkloadError as exc:
        if not flat or len(shapes) < 2:
            raise
        try:
            again = export(sequence_first=True)
        except WorkloadError:
            raise exc from None
        model = onnx_graph.model_from_bytes(again)
        if not _sequence_first(onnx_graph, model):
            raise exc from None
        return model
    if flat and _sequence_first(onnx_graph, model):
        model = onnx_graph.model_from_bytes(export(sequence_first=True))
    return model


def _sequence_first(onnx_graph: ModuleType, model: Any) -> bool:
    """Whether the graph of a module exported at ``(1, S, E)`` runs its sequence ops
    over the first axis (a problem of the graph is left to the import to report)."""
    try:
        return bool(onnx_graph.table_from_onnx(model, "module", "vector", "none").sequence_first)
    except WorkloadError:
        return False


def _validated(data: dict[str, Any], table: ImportedTable, file: str) -> Workload:
    """The table validated as a workload file is, each problem blamed on the node of
    the model ``file`` its layer comes from (or the graph's input)."""
    try:
        workload = validate_data(Workload, data, file, error=WorkloadError)
        infer_shapes(workload, file)
    except WorkloadError as exc:
        raise WorkloadError([_blamed(p, table) for p in exc.problems]) from None
    return workload


LAYER_KEY = re.compile(r"layers\[(\d+)\](?:\.(.+))?")
"""A key of the generated table's ``layers``: the row's index, the rest of the key."""


def _blamed(problem: Problem, table: ImportedTable) -> Problem:
    """``problem`` of the generated table at the place in the model it comes from."""
    row = LAYER_KEY.fullmatch(problem.path)
    if row is not None and int(row[1]) < len(table.sources):
        index = int(row[1])
        field = f"{row[2]}: " if row[2] else ""
        message = f"its layer {table.layers[index]['name']}: {field}{problem.message}"
        return Problem(problem.file, table.sources[index], message, problem.value)
    if problem.path.split(".")[0] in ("input", "extra_inputs"):
        message = f"as the workload's {problem.path}: {problem.message}"
        return Problem(problem.file, "graph.input", message, problem.value)
    return problem


def onnx_table(path: Path) -> dict[str, Any]:
    """The layer table of an ONNX file as a workload YAML would give it: the reader
    of ``.onnx`` and ``.onnx.gz`` workload files
    (:data:`~accelsim.workload.formats.READERS`).

    It is the table ``accelsim import FILE`` writes, with that command's defaults
    (input shape from the graph, an op without a layer kind an error, a
    cross-entropy loss appended when the graph has none); its ``notes`` say so and
    list the import notes.

    Raises:
        WorkloadError: as :func:`import_model` does, naming the file as shown.
    """
    file = display_path(path)
    onnx_graph = _onnx_graph(file)
    model = _read(onnx_graph, path, file)
    table = onnx_graph.table_from_onnx(model, file)
    origin = f"{_file_name(path)} (ONNX, {_producer(model)})"
    settings = _settings(table, False, "error", "cross_entropy")
    notes = [
        "imported as accelsim import does by default: " + "; ".join(settings),
        "views (reshape, transpose, squeeze, cast) are not layers",
        *table.notes,
    ]
    return {
        **_top(_safe_name(_stem(path)), origin, table),
        "layers": table.layers,
        "notes": notes,
    }


def _onnx_graph(file: str) -> ModuleType:
    """:mod:`accelsim.importer.onnx_graph`, or an error when ``onnx`` is missing."""
    try:
        return importlib.import_module("accelsim.importer.onnx_graph")
    except ImportError:
        message = "reading ONNX files needs the onnx package: pip install 'accelsim[import]'"
        raise WorkloadError.single(file, "", message) from None


def _read(onnx_graph: ModuleType, path: Path, file: str) -> Any:
    if not path.is_file():
        raise WorkloadError.single(file, "", "no such ONNX file")
    return onnx_graph.read_onnx(str(path), file)


def _file_name(path: Path) -> str:
    """``path``'s name as text: bytes of a name that is not UTF-8 as ``\\xff``."""
    return os.fsencode(path.name).decode("utf-8", "backslashreplace")


def _stem(path: Path) -> str:
    return path.name.removesuffix(".gz").removesuffix(".onnx")


def _settings(table: ImportedTable, given: bool, unsupported: str, loss: str) -> list[str]:
    extra = "".join(f", {n} {_shape_text(spec)}" for n, spec in table.extra_inputs.items())
    shapes = f"input shape {_shape_text(table.input)}{extra}"
    return [
        shapes + (" (given)" if given else " (from the graph)"),
        f"unsupported ops: {unsupported}",
        f"loss: {loss}",
    ]


def _top(name: str, origin: str, table: ImportedTable) -> dict[str, Any]:
    top = {
        "name": name,
        "description": f"{name}, imported from {origin}",
        "source": f"{origin}, imported by accelsim {__version__}",
        "input": table.input,
    }
    return {**top, "extra_inputs": table.extra_inputs} if table.extra_inputs else top


def _header(origin: str, settings: list[str], table: ImportedTable) -> list[str]:
    lines = [
        f"Imported by accelsim {__version__} from {origin}.",
        "Settings: " + "; ".join(settings) + ".",
        "Views (reshape, transpose, squeeze, cast) are not layers; each layer is named",
        "after the module (or module and op) that produced it.  Check with",
        "`accelsim check FILE`; edit freely: it validates like a hand-written table.",
    ]
    if table.notes:
        lines.append("Import notes:")
        for note in table.notes:
            lines += textwrap.wrap(note, 84, initial_indent="  - ", subsequent_indent="    ")
    return lines


def _producer(model: Any) -> str:
    opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)
    producer = f"{model.producer_name} {model.producer_version}".strip()
    return f"opset {opset}" + (f", by {producer}" if producer else "")


def _shape_text(spec: dict[str, Any]) -> str:
    dims = [v for k, v in spec.items() if k != "kind"]
    return f"{spec['kind']} " + "x".join(str(d) for d in dims)


def _safe_name(text: str) -> str:
    cleaned = "".join(c if NAME_PATTERN.fullmatch(c) or c in "._-" else "_" for c in text)
    return cleaned.lstrip("._-") or "model"
