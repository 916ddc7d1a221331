"""accelsim's collective times against ASTRA-sim's analytical network backend: the table
of docs/model/network.md, "Against ASTRA-sim's analytical backend".

    python scripts/compare_astra.py

Reads :data:`CSV` (ASTRA-sim's congestion-unaware times) and :data:`AWARE_CSV` (its
congestion-aware times, 1-D networks only; provenance of both in the README beside them)
and, for each row, times the same collective on the same network with
:func:`accelsim.collective_cycles`:

- **links**: every dimension's 50 GB/s and 500 ns in ASTRA-sim's units, whose "GB" is
  2^30 bytes (its ``NetworkFunction.cpp``): 50 x 2^30 bytes per second is
  :data:`BANDWIDTH` bytes per ns; accelsim runs at 1 GHz, so a cycle is a ns and the
  link carries :data:`BANDWIDTH` bytes per cycle after 500 cycles;
- **topologies** (:data:`TOPOLOGIES`): ASTRA-sim's ``Ring`` is bidirectional (a message
  takes the shorter way), so it is accelsim's ``torus`` (a ring both ways) of one
  dimension, and ``Ring_Ring`` a ``[2, 4]`` torus; ``FullyConnected`` and ``Switch``
  are accelsim's namesakes; ``Switch_Switch_8x4`` a switch of 8 and an outer switched
  level of 4;
- **algorithms** (:func:`accelsim_algorithm`): the namesake on a 1-D network; on a
  multi-dimensional one ASTRA-sim runs one phase per dimension whatever the algorithm,
  which is accelsim's ``multi_dim`` (an all-to-all, which ``multi_dim`` does not run,
  takes the namesake over all the processors), in ASTRA-sim's :data:`CHUNKS` chunks
  pipelined across the dimensions;
- **sizes**: ASTRA-sim's all-gather size is each NPU's shard, accelsim's the gathered
  buffer, so accelsim's is ``npus`` times it; the others mean the same.

Writes the table between the :data:`BEGIN` and :data:`END` lines of :data:`DOCS`.
"""

from __future__ import annotations

import csv
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelsim import collective_cycles

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "configs" / "validation" / "network"
CSV = DATA / "astra_sim_analytical.csv"
AWARE_CSV = DATA / "astra_sim_analytical_congestion_aware.csv"
DOCS = ROOT / "docs" / "model" / "network.md"
BEGIN = (
    "<!-- ASTRA-sim table: written by scripts/compare_astra.py from"
    " configs/validation/network/astra_sim_analytical*.csv -->"
)
END = "<!-- end of the ASTRA-sim table -->"
BANDWIDTH = 50 * 2**30 / 1e9
"""ASTRA-sim's 50 GB/s in bytes per ns (its GB is 2^30 bytes), per cycle at 1 GHz."""
LATENCY = 500
"""ASTRA-sim's 500 ns per link, in cycles at 1 GHz."""
LINK = {"bandwidth_bytes_per_cycle": BANDWIDTH, "latency_cycles": LATENCY}
CHUNKS = 4
"""The chunks ASTRA-sim's runs cut a collective into (``preferred-dataset-splits: 4``):
``multi_dim_chunks`` of every network."""
TOPOLOGIES: dict[str, dict[str, Any]] = {
    "Ring_4": {"topology": "torus", "dims": [4]},
    "Ring_8": {"topology": "torus", "dims": [8]},
    "FullyConnected_4": {"topology": "fully_connected", "dims": [4]},
    "FullyConnected_8": {"topology": "fully_connected", "dims": [8]},
    "Switch_8": {"topology": "switch", "dims": [8]},
    "Ring_Ring_2x4": {"topology": "torus", "dims": [2, 4]},
    "Ring_Ring_Ring_4x4x4": {"topology": "torus", "dims": [4, 4, 4]},
    "Switch_Switch_8x4": {
        "topology": "switch",
        "dims": [8],
        "levels": [{"topology": "switch", "dims": [4], **LINK}],
    },
}
"""Each ASTRA-sim network as an accelsim ``interconnect`` (with :data:`LINK`)."""
ALGORITHMS = {
    "ring": "ring",
    "direct": "direct",
    "halvingDoubling": "halving_doubling",
    "doubleBinaryTree": "double_binary_tree",
}
"""ASTRA-sim's algorithm names, accelsim's."""
SIZES = {1 << 20: "1 MiB", 64 << 20: "64 MiB", 1 << 30: "1 GiB"}


@dataclass(frozen=True)
class Row:
    """One collective: ASTRA-sim's time and accelsim's."""

    topology: str
    collective: str
    algorithm: str
    """ASTRA-sim's, per dimension, slash-joined."""
    accelsim_algorithm: str
    size_bytes: int
    """ASTRA-sim's size (an all-gather's: each NPU's shard)."""
    astra_ns: int
    accelsim_ns: int

    @property
    def difference_pct(self) -> float:
        """accelsim's time over ASTRA-sim's, less 1, in per cent."""
        return 100 * (self.accelsim_ns / self.astra_ns - 1)


def accelsim_algorithm(collective: str, algorithm: str) -> str:
    """accelsim's algorithm for ASTRA-sim's ``algorithm`` (per dimension, slash-joined)."""
    first = ALGORITHMS[algorithm.split("/")[0]]
    if "/" in algorithm and collective != "all_to_all":
        return "multi_dim"
    return first


def accelsim_ns(topology: str, npus: int, collective: str, size_bytes: int, algorithm: str) -> int:
    """accelsim's time of the collective, ASTRA-sim's size semantics, in ns (cycles at 1 GHz)."""
    interconnect = {**TOPOLOGIES[topology], **LINK, "multi_dim_chunks": CHUNKS}
    size = size_bytes * npus if collective == "all_gather" else size_bytes
    return collective_cycles(interconnect, npus, collective, size, algorithm)


def compare(record: dict[str, str]) -> Row:
    """A row of :data:`CSV` with accelsim's time beside ASTRA-sim's."""
    collective, algorithm = record["collective"], record["algorithm"]
    ours = accelsim_algorithm(collective, algorithm)
    size, npus = int(record["size_bytes"]), int(record["npus"])
    return Row(
        topology=record["topology"],
        collective=collective,
        algorithm=algorithm,
        accelsim_algorithm=ours,
        size_bytes=size,
        astra_ns=int(record["time_ns"]),
        accelsim_ns=accelsim_ns(record["topology"], npus, collective, size, ours),
    )


def read_records(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _cells(row: Row) -> str:
    return f"{row.astra_ns:,} | {row.accelsim_ns:,} | {row.difference_pct:+.1f} %"


def summary(rows: list[Row]) -> str:
    """The median and largest absolute difference per ASTRA-sim algorithm, on the 1-D
    networks and on the multi-dimensional ones."""
    lines = [
        "| ASTRA-sim algorithm | networks | rows | median abs. difference | max abs. difference |",
        "|---|---|---|---|---|",
    ]
    for name in ALGORITHMS:
        for networks, multi in (("1-D", False), ("multi-dimensional", True)):
            found = [
                abs(r.difference_pct)
                for r in rows
                if r.algorithm.split("/")[0] == name and ("/" in r.algorithm) is multi
            ]
            if found:
                median, most = statistics.median(found), max(found)
                lines.append(
                    f"| {name} | {networks} | {len(found)} | {median:.1f} % | {most:.1f} % |"
                )
    return "\n".join(lines)


def table(rows: list[Row]) -> str:
    """The summary, then a line per topology, collective and algorithm with the times
    at each size (ns) and accelsim's difference."""
    by_case: dict[tuple[str, str, str, str], dict[int, Row]] = {}
    for r in rows:
        key = (r.topology, r.collective, r.algorithm, r.accelsim_algorithm)
        by_case.setdefault(key, {})[r.size_bytes] = r
    head = " | ".join(f"{s}: ASTRA-sim (ns) | accelsim (ns) | difference" for s in SIZES.values())
    lines = [
        summary(rows),
        "",
        f"| topology | collective | ASTRA-sim algorithm | accelsim algorithm | {head} |",
        "|---|---|---|---|" + "---|---|---|" * len(SIZES),
    ]
    for (topology, collective, algorithm, ours), sizes in by_case.items():
        cells = " | ".join(_cells(sizes[s]) if s in sizes else " |  | " for s in SIZES)
        lines.append(f"| {topology} | {collective} | {algorithm} | {ours} | {cells} |")
    return "\n".join(lines)


def block(unaware: list[Row], aware: list[Row]) -> str:
    """The page's block: the tables of both backends."""
    return (
        "**Congestion-unaware backend**, every network:\n\n"
        f"{table(unaware)}\n\n"
        "**Congestion-aware backend**, the 1-D networks (accelsim's times as above):\n\n"
        f"{table(aware)}"
    )


def compared(path: Path) -> list[Row]:
    """Every row of ``path`` (:data:`CSV` or :data:`AWARE_CSV`) compared."""
    return [compare(record) for record in read_records(path)]


def write_docs(text: str, path: Path = DOCS) -> None:
    """The block between the markers of ``path`` replaced by ``text``."""
    page = path.read_text(encoding="utf-8")
    head, _, rest = page.partition(BEGIN + "\n")
    _, _, tail = rest.partition(END)
    path.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}", encoding="utf-8")


def main() -> None:
    unaware, aware = compared(CSV), compared(AWARE_CSV)
    write_docs(block(unaware, aware))
    print(summary(unaware), summary(aware), sep="\n\n")


if __name__ == "__main__":
    main()
