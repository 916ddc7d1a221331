"""The per-op and per-layer tables of a simulated step (``ops.csv``, ``layers.csv``).

Built a column at a time from the cost and trace arrays (``tolist`` once, then
plain Python numbers), so graphs of hundreds of thousands of ops cost little to
report: a row is a ``zip`` of the columns.  Every value is the Python ``int``,
``float`` or ``str`` the CSV writer prints; ratios are Python's true division of
the exact integers, rounded by Python's ``round``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from accelsim.config.hardware import HardwareSpec, StreamBlocking
from accelsim.graph.ops import CommOp, GemmOp, OpGraph, Phase, Stage, TransferOp, VectorOp
from accelsim.mapping.dataflow import DATAFLOW_CODE
from accelsim.timing.costs import UNIT_COMM, UNIT_VECTOR, OpCosts
from accelsim.timing.trace import Trace
from accelsim.timing.weights import op_weights, processor_group_sums, weighted_group_totals

OP_COLUMNS = (
    "op_id",
    "name",
    "layer",
    "phase",
    "stage",
    "owner",
    "replica",
    "mini_batch",
    "micro_batch",
    "kind",
    "m",
    "n",
    "k",
    "count",
    "processor",
    "unit",
    "start_cycle",
    "end_cycle",
    "compute_cycles",
    "stall_cycles",
    "utilization",
    "macs",
    "vector_ops",
    "folds",
    "mapping_efficiency",
    "sram_read_ifmap_bytes",
    "sram_read_filter_bytes",
    "sram_read_ofmap_bytes",
    "sram_write_ifmap_bytes",
    "sram_write_filter_bytes",
    "sram_write_ofmap_bytes",
    "dram_read_ifmap_bytes",
    "dram_read_filter_bytes",
    "dram_read_ofmap_bytes",
    "dram_write_ofmap_bytes",
    "interconnect_bytes",
    "energy_pj",
)

MAPPING_COLUMNS = ("dataflow", "orientation", "stream_blocking")
"""The columns ``ops.csv`` adds under ``mapping.search``, after :data:`OP_COLUMNS`: a
searched GEMM's dataflow on the array, orientation (``as_given``, ``transposed``) and
stream blocking (``psums``, ``fewest_reads``); empty for any other op, a GEMM on the
vector unit among them."""

INFERRED_COLUMN = "inferred_from"
"""The column ``ops.csv`` adds last when a symmetric step was simulated on one processor
of each role (:mod:`accelsim.timing.symmetry`): the simulated processor whose op gives
the row its cycles, empty for an op simulated itself."""

STANDS_FOR_COLUMN = "stands_for"
"""The column ``ops.csv`` adds last when a data-parallel step was placed once (one
replica standing for every processor's): how many processors' ops the row stands
for, the processor count for a replica's op (each processor runs the same), 1 for a
collective (one op over every processor)."""

LAYER_COLUMNS = (
    "layer",
    "ops",
    "params",
    "fwd_macs",
    "bwd_input_macs",
    "bwd_weight_macs",
    "aux_macs",
    "vector_ops",
    "fwd_busy_cycles",
    "bwd_busy_cycles",
    "update_busy_cycles",
    "aux_busy_cycles",
    "stall_cycles",
    "dram_read_bytes",
    "dram_write_bytes",
    "stash_bytes",
    "energy_pj",
)

_KINDS = {GemmOp: "gemm", VectorOp: "vector", CommOp: "comm", TransferOp: "transfer"}
_PHASES = {p: p.value for p in Phase}
_STAGES = {s: s.value for s in Stage}


def op_rows(
    graph: OpGraph, trace: Trace, op_pj: np.ndarray, hw: HardwareSpec
) -> Iterator[tuple[Any, ...]]:
    """The rows of ``ops.csv``, one per op, values in :data:`OP_COLUMNS` order."""
    return zip(*op_columns(graph, trace, op_pj, hw), strict=True)


def op_header(trace: Trace) -> tuple[str, ...]:
    """The columns of ``ops.csv``: :data:`OP_COLUMNS`, then :data:`MAPPING_COLUMNS` when
    the costs come from a mapping search, then :data:`INFERRED_COLUMN` when some
    processors were inferred, then :data:`STANDS_FOR_COLUMN` when one replica stood
    for every processor's."""
    mapped = trace.costs.mapping is not None
    columns = (*OP_COLUMNS, *(MAPPING_COLUMNS if mapped else ()))
    inferred = (INFERRED_COLUMN,) if trace.copies else ()
    return (*columns, *inferred, *((STANDS_FOR_COLUMN,) if trace.replicas > 1 else ()))


def ops_csv(columns: Sequence[Sequence[Any]], header: Sequence[str] = OP_COLUMNS) -> str:
    """The text :func:`csv.writer` writes for ``header`` (:func:`op_header`) and the rows
    of ``columns`` (:func:`op_columns`), made a column at a time.

    Each distinct string is quoted as the writer quotes it and each distinct number
    formatted once (floats as ``repr``, as the writer prints them).  The columns
    hold one type each: strings, integers (or ``""`` in a GEMM's shape), or floats.
    """
    text = [_formatted(values) for values in columns]
    header_line = ",".join(map(_quoted, header))
    return "\n".join((header_line, *map(",".join, zip(*text, strict=True)), ""))


def _formatted(values: Sequence[Any]) -> list[str]:
    """One column's values as the CSV writer prints them.

    A value that repeats is formatted once: equal values print alike, but for
    ``0.0`` and ``-0.0`` (and NaN, unequal to itself), so a float column with
    either prints value by value.
    """
    distinct = set(values)
    floats = bool(values) and isinstance(values[0], float)
    if floats and (0.0 in distinct or any(v != v for v in distinct)):
        return list(map(repr, values))
    if 2 * len(distinct) > len(values) and not isinstance(values[0], str):
        return list(map(repr if floats else str, values))  # mostly distinct numbers
    memo = {
        v: _quoted(v) if isinstance(v, str) else repr(v) if floats else str(v) for v in distinct
    }
    return list(map(memo.__getitem__, values))


def _quoted(value: str) -> str:
    """``value`` as :func:`csv.writer` writes it in a row of several fields."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow((value, ""))
    return buffer.getvalue()[:-2]  # the empty second field, then the line end


def op_columns(
    graph: OpGraph, trace: Trace, op_pj: np.ndarray, hw: HardwareSpec
) -> list[Sequence[Any]]:
    """The columns of ``ops.csv`` in :func:`op_header` order, one value per op."""
    c = trace.costs
    ops = graph.ops
    start, end = trace.start_cycle.tolist(), trace.end_cycle.tolist()
    durations = [max(e - s, 1) for s, e in zip(start, end, strict=True)]
    units = c.unit.tolist()
    macs, vector_ops = c.macs.tolist(), c.vector_ops.tolist()
    pes = {c.unit_names.index(a.name): a.array.peak_macs_per_cycle for a in c.arrays}
    lanes = hw.vector_unit.lanes
    utilization = [
        round(m / (pes[u] * d), 6)
        if u in pes
        else round(v / (lanes * d), 6)
        if u == UNIT_VECTOR
        else 0.0
        for u, d, m, v in zip(units, durations, macs, vector_ops, strict=True)
    ]
    gemms = [op if isinstance(op, GemmOp) else None for op in ops]
    return [
        list(range(len(ops))),
        [op.name for op in ops],
        [op.layer for op in ops],
        [_PHASES[op.phase] for op in ops],
        [_STAGES[op.stage] for op in ops],
        [op.owner for op in ops],
        [op.tag.replica for op in ops],
        [op.tag.mini_batch for op in ops],
        [op.tag.micro_batch for op in ops],
        [_KINDS[type(op)] for op in ops],
        [g.m if g else "" for g in gemms],
        [g.n if g else "" for g in gemms],
        [g.k if g else "" for g in gemms],
        [g.count if g else "" for g in gemms],
        trace.processor.tolist(),
        [c.unit_names[u] for u in units],
        start,
        end,
        np.where(c.unit != UNIT_COMM, c.compute_cycles, 0).tolist(),
        trace.stall_cycles.tolist(),
        utilization,
        macs,
        vector_ops,
        c.folds.tolist(),
        [round(x, 6) for x in c.mapping_efficiency.tolist()],
        *(
            array.tolist()
            for array in (
                c.sram_ifmap_read_bytes,
                c.sram_filter_read_bytes,
                c.sram_ofmap_read_bytes,
                c.sram_ifmap_write_bytes,
                c.sram_filter_write_bytes,
                c.sram_ofmap_write_bytes,
                c.dram_ifmap_read_bytes,
                c.dram_filter_read_bytes,
                c.dram_ofmap_read_bytes,
                c.dram_ofmap_write_bytes,
                c.interconnect_bytes,
            )
        ),
        [round(x, 3) for x in op_pj.tolist()],
        *mapping_columns(c),
        *inferred_column(trace),
        *([op_weights(trace).tolist()] if trace.replicas > 1 else []),
    ]


def inferred_column(trace: Trace) -> list[list[int | str]]:
    """:data:`INFERRED_COLUMN` (none when every processor was simulated)."""
    copies = trace.copies
    if not copies:
        return []
    return [[copies[p] if copies[p] != p else "" for p in trace.processor.tolist()]]


def mapping_columns(costs: OpCosts) -> list[list[str]]:
    """The :data:`MAPPING_COLUMNS` of ``ops.csv`` (none without a mapping search)."""
    chosen = costs.mapping
    if chosen is None:
        return []
    names = {code: d.value for d, code in DATAFLOW_CODE.items()}
    on_array = (chosen.searched & (chosen.dataflow >= 0)).tolist()
    return [
        [names.get(d, "") for d in chosen.dataflow.tolist()],
        [
            ("transposed" if t else "as_given") if a else ""
            for a, t in zip(on_array, chosen.transposed.tolist(), strict=True)
        ],
        [
            (StreamBlocking.FEWEST_READS.value if f else StreamBlocking.PSUMS.value) if a else ""
            for a, f in zip(on_array, chosen.fewest_reads.tolist(), strict=True)
        ],
    ]


def layer_rows(graph: OpGraph, trace: Trace, op_pj: np.ndarray) -> list[dict[str, Any]]:
    """One ``layers.csv`` row per layer, in order of first appearance.

    Sums are exact (counts as :func:`~accelsim.counts.exact_group_totals` adds them,
    each op as often as it stands for), cycles summed likewise, energies each
    processor's added in op order, then the processors' correctly rounded sum
    (:mod:`accelsim.timing.weights`)."""
    c = trace.costs
    ops = graph.ops
    order: dict[str, int] = {}
    layer = np.array([order.setdefault(op.layer, len(order)) for op in ops], np.int64)
    phase = np.array([_PHASE_CODE[op.phase] for op in ops], np.int64)
    durations = trace.end_cycle - trace.start_cycle

    def total(values: np.ndarray, where: np.ndarray | None = None) -> list[Any]:
        kept = values if where is None else np.where(where, values, 0)
        return weighted_group_totals(trace, layer, kept, len(order))

    fwd, aux = phase == _PHASE_CODE[Phase.FWD], phase == _PHASE_CODE[Phase.AUX]
    bwd_input, bwd_weight = (phase == _PHASE_CODE[p] for p in (Phase.BWD_INPUT, Phase.BWD_WEIGHT))
    columns = {
        "ops": total(np.ones(len(ops), np.int64)),
        "fwd_macs": total(c.macs, fwd),
        "bwd_input_macs": total(c.macs, bwd_input),
        "bwd_weight_macs": total(c.macs, bwd_weight),
        "aux_macs": total(c.macs, aux),
        "vector_ops": total(c.vector_ops),
        "fwd_busy_cycles": total(durations, fwd),
        "bwd_busy_cycles": total(durations, bwd_input | bwd_weight),
        "update_busy_cycles": total(durations, ~(fwd | aux | bwd_input | bwd_weight)),
        "aux_busy_cycles": total(durations, aux),
        "stall_cycles": total(trace.stall_cycles),
        "dram_read_bytes": total(c.dram_read_bytes),
        "dram_write_bytes": total(c.dram_ofmap_write_bytes),
        "stash_bytes": [b * trace.replicas for b in _stash_bytes(graph, len(order), layer)],
        "energy_pj": [round(x, 3) for x in processor_group_sums(trace, layer, op_pj, len(order))],
    }
    params = dict.fromkeys(order, 0)
    for p in graph.parameters:
        if p.layer in params:
            params[p.layer] += p.weight.elements
    rows = []
    for name, i in order.items():
        row: dict[str, Any] = {"layer": name, "ops": columns["ops"][i], "params": params[name]}
        for column in LAYER_COLUMNS[3:]:
            row[column] = columns[column][i]
        rows.append(row)
    return rows


_PHASE_CODE = {p: i for i, p in enumerate(Phase)}


def _stash_bytes(graph: OpGraph, layers: int, layer: np.ndarray) -> list[int]:
    """Per layer, the bytes its ops of the forward stage write into stashed activations."""
    stashed = graph.stashed
    out = [0] * layers
    for op, i in zip(graph.ops, layer.tolist(), strict=True):
        if op.stage is not Stage.FORWARD:
            continue
        if isinstance(op, GemmOp):
            if op.c.key in stashed:
                out[i] += op.c.bytes
        elif isinstance(op, VectorOp):
            out[i] += sum(a.bytes for a in op.writes if a.tensor.key in stashed)
    return out
