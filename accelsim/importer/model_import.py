"""``accelsim import``: a model (ONNX file or PyTorch module) -> a workload file."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from accelsim._version import __version__
from accelsim.config.base import NAME_PATTERN
from accelsim.config.loader import validate_with_origins
from accelsim.errors import WorkloadError
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
    input_shape: tuple[int, ...] | None = None,
    tokens: bool = False,
    name: str | None = None,
    unsupported: Unsupported = "error",
    loss: Loss = "cross_entropy",
    out: Path | None = None,
) -> ImportResult:
    """Import a model as a layer table, validated as a hand-written one is.

    Args:
        source: An ONNX file (a path), or a PyTorch ``nn.Module`` (exported to ONNX in
            training mode, which needs ``torch``).
        input_shape: Per-sample input dimensions: required for a module (``(3, 224,
            224)``: an image); for an ONNX file only when its input has symbolic ones.
        tokens: A module's input is a sequence of integer token ids (``input_shape``
            its length).
        name: The workload's name (default: the file's stem or the module's class).
        unsupported: ``error``: an op without a layer kind is an error naming its type
            and node; ``vector``: it becomes a generic vector layer, listed in the header.
        loss: ``cross_entropy`` appends the loss when the graph has none; ``none`` does not.
        out: Write the workload file here as well.

    Raises:
        WorkloadError: for ops without a layer kind, unreadable graphs, and tables that
            do not validate.
    """
    from accelsim.importer import onnx_graph

    if isinstance(source, str | Path):
        path = Path(source)
        if not path.is_file():
            raise WorkloadError.single(str(path), "", "no such ONNX file")
        model = onnx_graph.read_onnx(str(path))
        origin = f"{path.name} (ONNX, {_producer(model)})"
        label = str(path)
        default_name = path.name.removesuffix(".gz").removesuffix(".onnx")
        shape = input_shape
    else:
        from accelsim.importer.torch_source import onnx_bytes

        if input_shape is None:
            raise WorkloadError.single("module", "input_shape", "a module needs an input shape")
        model = onnx_graph.model_from_bytes(onnx_bytes(source, input_shape, tokens))
        origin = (
            f"PyTorch module {type(source).__module__}.{type(source).__qualname__},"
            " exported in training mode by torch.onnx (torch.export-based)"
        )
        label = type(source).__name__
        default_name = type(source).__name__.lower()
        shape = None
    table = onnx_graph.table_from_onnx(model, label, unsupported, loss, shape)
    model_name = name or _safe_name(default_name)
    settings = [
        f"input shape {_shape_text(table.input)}"
        + (" (given)" if input_shape is not None else " (from the graph)"),
        f"unsupported ops: {unsupported}",
        f"loss: {loss}",
    ]
    header = _header(origin, settings, table)
    if model.doc_string:
        header[1:1] = textwrap.wrap(f"The graph says: {model.doc_string}", 86)
    top = {
        "name": model_name,
        "description": f"{model_name}, imported from {origin}",
        "source": f"imported from {origin} by accelsim {__version__}",
        "input": table.input,
    }
    text = workload_text(header, top, table.layers)
    data = {**top, "layers": table.layers}
    file = str(out) if out is not None else label
    workload, _ = validate_with_origins(Workload, data, file, [], WorkloadError)
    infer_shapes(workload, file)
    if out is not None:
        out.write_text(text, encoding="utf-8")
    return ImportResult(workload, text)


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
