"""SCALE-Sim topology CSV files: one GEMM or convolution layer per row.

SCALE-Sim reads the columns by position and skips the first line, its header:

* the conv form, ``Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter
  Width, Channels, Num Filter, Strides,`` (an already padded ifmap, one stride
  for both dimensions);
* the GEMM form, ``Layer, M, N, K,`` (``C[M x N] = A[M x K] . B[K x N]``).

Here the form is told row by row from the number of values (a file may mix
them), the trailing comma SCALE-Sim needs is optional, and a field starting with
``#`` ends its row (SCALE-Sim's own MobileNet file marks rows ``#dw``).  A problem
is reported at ``row N, column`` (row N is line N of the file: lines end at a
line feed, a carriage return or both, never at another character, which a layer
name refuses instead).

A file holds at most :data:`MAX_ROWS` layer rows, and every GEMM of a row (any
phase, either convention) at most :data:`~accelsim.errors.MAX_COUNT` MACs.

:func:`read_topology` gives the rows (``accelsim layer --topology``, the
SCALE-Sim validation harness); :func:`topology_table` lowers them to a training
layer table (``workload: x.csv``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelsim.config.base import MAX_INT
from accelsim.config.files import display_path, read_text
from accelsim.errors import MAX_COUNT, MAX_COUNT_TEXT, Problem, WorkloadError
from accelsim.units import plural

CONV_COLUMNS = (
    "Layer name",
    "IFMAP Height",
    "IFMAP Width",
    "Filter Height",
    "Filter Width",
    "Channels",
    "Num Filter",
    "Strides",
)
"""The conv form's columns, as SCALE-Sim's topology files name them."""
GEMM_COLUMNS = ("Layer", "M", "N", "K")
"""The GEMM form's columns."""
MAX_ROWS = 100_000
"""Most layer rows in a topology file: its rows are read, and a run lowers them, in
time and memory proportional to their count; a file with more is refused at the
first row past it."""
_FORMS = {
    len(GEMM_COLUMNS) - 1: ("gemm", GEMM_COLUMNS),
    len(CONV_COLUMNS) - 1: ("conv", CONV_COLUMNS),
}


@dataclass(frozen=True)
class TopologyLayer:
    """One row: ``kind`` is ``gemm`` (M, N, K) or ``conv`` (H, W, R, S, C, NF, stride);
    ``row`` is its line in the file."""

    name: str
    kind: str
    dims: tuple[int, ...]
    row: int

    def label(self) -> str:
        return f"{self.kind} " + ",".join(str(d) for d in self.dims)


def read_topology(path: Path) -> list[TopologyLayer]:
    """Read a topology file.

    Raises:
        WorkloadError: for an unreadable file, a first line of numbers (no header),
            a value that is no positive whole number (at ``row N, column``), a row
            of neither form, a name with a non-printable character, a filter larger
            than its ifmap, a row with a GEMM of more than 2^62 MACs, a file without
            layer rows, or one with more than :data:`MAX_ROWS`; every problem of the
            file at once (up to the row past the limit).
    """
    name = display_path(path)
    lines = _lines(read_text(path, WorkloadError, name))
    layers: list[TopologyLayer] = []
    problems: list[Problem] = []
    header = True
    for number, line in enumerate(lines, 1):
        fields = _fields(line)
        if not fields:
            continue
        if header:
            header = False
            if all(_is_int(f) for f in fields[1:]) and len(fields) > 1:
                problems.append(
                    Problem(
                        name,
                        f"row {number}",
                        "expected the header line first (SCALE-Sim skips the first line)",
                        line.strip(),
                    )
                )
            continue
        if len(layers) == MAX_ROWS:
            problems.append(
                Problem(name, f"row {number}", f"more than {MAX_ROWS:,} layer rows", line.strip())
            )
            break
        layer = _row(fields, number, len(layers), name, problems)
        if layer is not None:
            layers.append(layer)
    if not layers and not problems:
        problems.append(Problem(name, "", "no layer rows"))
    if problems:
        raise WorkloadError(problems)
    return layers


def _lines(text: str) -> list[str]:
    """``text``'s lines, ended by a line feed, a carriage return or both (as the
    ``csv`` module reads them), not by the other characters ``str.splitlines`` takes
    (a form feed, NEL, U+2028): those stay in the line."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _fields(line: str) -> list[str]:
    """The line's comma-separated fields, stripped, up to a ``#`` field, without
    trailing empty ones."""
    fields = []
    for field in line.split(","):
        text = field.strip()
        if text.startswith("#"):
            break
        fields.append(text)
    while fields and not fields[-1]:
        fields.pop()
    return fields


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _row(
    fields: list[str], number: int, index: int, file: str, problems: list[Problem]
) -> TopologyLayer | None:
    """The layer of one row, or None after adding its problems to ``problems``."""
    values = fields[1:]
    form = _FORMS.get(len(values))
    if form is None:
        problems.append(
            Problem(
                file,
                f"row {number}",
                f"expected {', '.join(GEMM_COLUMNS[1:])} (GEMM) or"
                f" {', '.join(CONV_COLUMNS[1:])} (conv) after the name",
                f"{len(values)} values",
            )
        )
        return None
    kind, columns = form
    dims: list[int] = []
    found = len(problems)
    if not fields[0].isprintable():
        problems.append(
            Problem(
                file,
                f"row {number}, {columns[0]}",
                "the name holds a control or other non-printable character",
                fields[0],
            )
        )
    for column, text in zip(columns[1:], values, strict=True):
        where = f"row {number}, {column}"
        try:
            value = int(text)
        except ValueError:
            problems.append(Problem(file, where, "expected a whole number", text))
            continue
        if not 0 < value <= MAX_INT:
            problems.append(Problem(file, where, "must be between 1 and 2^31 - 1", value))
        dims.append(value)
    if len(problems) > found:
        return None
    if kind == "conv":
        for filt, size in ((2, 0), (3, 1)):
            if dims[filt] > dims[size]:
                problems.append(
                    Problem(
                        file,
                        f"row {number}, {columns[filt + 1]}",
                        f"larger than the {columns[size + 1]} {dims[size]}"
                        " (the ifmap is already padded)",
                        dims[filt],
                    )
                )
    macs = largest_macs(kind, dims)
    if macs > MAX_COUNT:
        problems.append(
            Problem(
                file,
                f"row {number}",
                f"its largest GEMM's MACs ({macs:.3g}) exceed the limit of {MAX_COUNT_TEXT}"
                f" ({MAX_COUNT:.3g})",
                dims,
            )
        )
    if len(problems) > found:
        return None
    label = fields[0].replace(" ", "_") or f"L{index}"
    return TopologyLayer(label, kind, tuple(dims), number)


def largest_macs(kind: str, dims: list[int] | tuple[int, ...]) -> int:
    """The MACs of a row's largest GEMM per sample, over the phases and both
    conventions: ``M N K`` for a GEMM row (each phase's GEMM is the same product),
    and for a conv row its ``dX`` GEMM, ``H W C NF R S``, which no output size
    (``P Q`` at most ``H W``) exceeds."""
    product = 1
    for d in dims if kind == "gemm" else dims[:6]:
        product *= d
    return product


def topology_table(path: Path) -> dict[str, Any]:
    """The training layer table of a topology file, as a workload YAML would give it.

    Each row becomes one layer, in file order, each reading the previous one's
    output: a conv row a ``conv2d`` (no padding, no bias) on its ifmap, a GEMM row
    a ``linear`` layer (no bias) on ``M`` rows of ``K`` features per sample.  Where
    the previous output (or the workload's input) is not the row's input, a
    ``bridge`` (no ops) hands the row the input it states.  The last row's output
    feeds a ``cross_entropy`` loss (through a ``flatten`` after a conv).  The
    table's ``notes`` say so.

    Raises:
        WorkloadError: for a bad file (:func:`read_topology`) or a row named like
            another row or like a layer the table adds.
    """
    name = display_path(path)
    rows = read_topology(path)
    first = rows[0]
    if first.kind == "conv":
        h, w, _, _, c, _, _ = first.dims
        source_input: dict[str, Any] = {"kind": "image", "channels": c, "height": h, "width": w}
        shape: tuple[int, ...] = (c, h, w)
    else:
        m, _, k = first.dims
        source_input = {"kind": "vector", "features": m * k}
        shape = (m * k,)
    layers: list[dict[str, Any]] = []
    for row in rows:
        wanted, layer, out = _row_layer(row)
        if wanted != shape:
            layers.append({"name": f"{row.name}.in", "kind": "bridge", "shape": list(wanted)})
        layers.append(layer)
        shape = out
    last = rows[-1].name
    if len(shape) == 3:
        layers.append({"name": f"{last}.flat", "kind": "flatten"})
    layers.append({"name": f"{last}.loss", "kind": "cross_entropy"})
    _check_names(rows, layers, name)
    kinds = sorted({row.kind for row in rows})
    return {
        "name": path.stem,
        "description": f"{len(rows)} {plural(len(rows), 'row')} of a SCALE-Sim topology,"
        " as training layers",
        "source": f"SCALE-Sim topology {name} ({' and '.join(kinds)} rows)",
        "input": source_input,
        "layers": layers,
        "notes": [
            *TOPOLOGY_NOTES,
            *(CONV_NOTES if "conv" in kinds else ()),
            *(GEMM_NOTES if "gemm" in kinds else ()),
        ],
    }


TOPOLOGY_NOTES = (
    "each row is one layer, run in file order and reading the previous row's output:"
    " nothing between rows (activations, pooling, normalisation, residual adds) is simulated",
    "a bridge layer (no ops) hands a row the input size it states where the previous"
    " output differs",
    "the batch is the run's (SCALE-Sim's is 1); every row trains: forward, dX (but the"
    " first row), dW and the optimizer's update of its weights; no biases",
    "the last row's output feeds a cross-entropy loss (a vector op over its outputs)",
)
"""What :func:`topology_table` assumes of every file, in its table's ``notes``."""
CONV_NOTES = (
    "conv ifmap sizes are taken as already padded: no padding, no groups, and"
    " P = (H - R) // stride + 1 (SCALE-Sim 3.0.0 rounds up instead)",
)
"""What it assumes of conv rows."""
GEMM_NOTES = (
    "a GEMM row is a linear layer C[M x N] = A[M x K] . B[K x N]: B is a trained K x N"
    " weight, M counts rows per sample (times the batch)",
)
"""What it assumes of GEMM rows."""


def _row_layer(row: TopologyLayer) -> tuple[tuple[int, ...], dict[str, Any], tuple[int, ...]]:
    """The input shape a row wants, its layer and its output shape."""
    if row.kind == "gemm":
        m, n, k = row.dims
        layer = {"name": row.name, "kind": "linear", "out_features": n, "bias": False}
        return (m, k), layer, (m, n)
    h, w, r, s, c, nf, stride = row.dims
    conv = {
        "name": row.name,
        "kind": "conv2d",
        "out_channels": nf,
        "kernel": [r, s],
        "stride": stride,
    }
    return (c, h, w), conv, (nf, (h - r) // stride + 1, (w - s) // stride + 1)


_ADDED_KINDS = ("bridge", "flatten", "cross_entropy")
"""The kinds of the layers :func:`topology_table` adds to the rows' own."""


def _check_names(rows: list[TopologyLayer], layers: list[dict[str, Any]], file: str) -> None:
    """Refuse a row named like an earlier row, a layer the table adds, or the input."""
    seen = {"input"}
    problems = []
    added = {layer["name"] for layer in layers if layer["kind"] in _ADDED_KINDS}
    for row in rows:
        if row.name in seen or row.name in added:
            problems.append(
                Problem(
                    file,
                    f"row {row.row}, {'Layer' if row.kind == 'gemm' else 'Layer name'}",
                    "names another row, the input or a layer the table adds (.in, .flat, .loss)",
                    row.name,
                )
            )
        seen.add(row.name)
    if problems:
        raise WorkloadError(problems)
