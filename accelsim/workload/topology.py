"""SCALE-Sim topology CSV files: one GEMM or convolution layer per row.

Rows are ``name, M, N, K`` (a GEMM) or ``name, H, W, R, S, C, NF, stride`` (a
convolution on an already padded ifmap); the first line is a header and the
trailing comma SCALE-Sim needs is optional here.  ``accelsim layer --topology``
and the SCALE-Sim validation harness read them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from accelsim.config.files import read_text
from accelsim.errors import Problem, WorkloadError


@dataclass(frozen=True)
class TopologyLayer:
    """One row: ``kind`` is ``gemm`` (M, N, K) or ``conv`` (H, W, R, S, C, NF, stride)."""

    name: str
    kind: str
    dims: tuple[int, ...]

    def label(self) -> str:
        return f"{self.kind} " + ",".join(str(d) for d in self.dims)


def read_topology(path: Path) -> list[TopologyLayer]:
    """Read a topology file.

    Raises:
        WorkloadError: for an unreadable file, a malformed row (at ``line N``)
            or a file without layers.
    """
    name = str(path)
    lines = read_text(path, WorkloadError, name).splitlines()
    layers: list[TopologyLayer] = []
    problems: list[Problem] = []
    header = True
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if header:
            header = False
            continue
        where = f"line {number}"
        fields = [f.strip() for f in line.split(",")]
        while fields and fields[-1] == "":
            fields.pop()
        label, values = fields[0], fields[1:]
        try:
            dims = tuple(int(v) for v in values)
        except ValueError:
            problems.append(Problem(name, where, "expected whole numbers after the name", line))
            continue
        kind = {3: "gemm", 7: "conv"}.get(len(dims))
        if kind is None:
            problems.append(
                Problem(
                    name,
                    where,
                    "expected name,M,N,K or name,H,W,R,S,C,NF,stride",
                    f"{len(dims)} numbers",
                )
            )
        elif min(dims) < 1:
            problems.append(Problem(name, where, "sizes must be positive", line))
        elif kind == "conv" and (dims[2] > dims[0] or dims[3] > dims[1]):
            problems.append(Problem(name, where, "filter larger than the padded ifmap", line))
        else:
            layers.append(TopologyLayer(label.replace(" ", "_") or f"L{len(layers)}", kind, dims))
    if not layers and not problems:
        problems.append(Problem(name, "", "no layer rows"))
    if problems:
        raise WorkloadError(problems)
    return layers
