"""The mapper (``mapping.search: per_layer``): per GEMM of the main array, the cheapest
of the mappings the hardware offers, each costed in closed form as a lone op, as
:func:`~accelsim.timing.gemm_costs.better_orientation` chooses an orientation.

The candidates (:class:`~accelsim.timing.mapping_options.SearchOptions`), in order:
every dataflow of ``array.dataflows`` (``array.dataflow`` first), in the given
orientation and then (``mapping.orientation: best``) the transposed one, each with the
run's stream blocking and then (``mapping.stream_blocking`` null) the other; then, for
a GEMM of a grouped convolution (``GemmOp.groups`` above 1), the vector unit
(:func:`vector_columns`).  The first candidate is the GEMM as the graph gives it,
without a search; a tie keeps the earlier candidate, so a GEMM moves only for a
strictly lower objective.  A GEMM with a fold mask or a resident tile stream (as
:func:`~accelsim.timing.gemm_costs.better_orientation` fixes) keeps that first
mapping, and one whose output a resident tile stream takes stays on the array.

Objectives (``mapping.objective``), per candidate: ``time``, the lone op's cycles
(:meth:`~accelsim.timing.gemm_costs.ChipOptions.lone_op_cycles`, compute or DRAM
transfer, plus the unit's fixed cost per op); ``energy``, its dynamic energy at the
energy table's prices (:class:`~accelsim.timing.mapping_options.Prices`: MACs on
the array or vector operations on the vector unit, each buffer's SRAM reads and
writes, DRAM bytes; leakage, which follows the step's time, is not weighed);
``edp``, their product.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from accelsim.config.enums import PsumPolicy
from accelsim.config.mapping_search import MappingObjective
from accelsim.mapping.schedule import UnitSchedule
from accelsim.timing.gemm_costs import ChipOptions, gemm_columns, remapped, transposed
from accelsim.timing.mapping_options import Prices, SearchOptions

Columns = dict[str, np.ndarray]


@dataclass(frozen=True)
class Candidate:
    """One mapping of a GEMM: its dataflow's code, orientation and stream blocking on
    the array, or the vector unit."""

    dataflow: int
    transposed: bool
    fewest_reads: bool
    on_vector: bool = False


@dataclass(frozen=True)
class Chosen:
    """The search's result for one array unit's GEMMs: their cost columns under the
    mappings chosen, per GEMM the chosen mapping's fields (arrays in the table's
    order), and the mapping without a search (``first``)."""

    columns: Columns
    first: Candidate
    dataflow: np.ndarray
    transposed: np.ndarray  # bool
    fewest_reads: np.ndarray  # bool
    on_vector: np.ndarray  # bool


def candidates(options: SearchOptions) -> list[Candidate]:
    """The array mappings the search tries, the one without a search first."""
    orientations = (False, True) if options.transposes else (False,)
    return [
        Candidate(d, o, b)
        for d in options.dataflows
        for o in orientations
        for b in options.blockings
    ]


def search(
    table: UnitSchedule,
    given: Columns,
    conv: int,
    psums: PsumPolicy,
    fold_overlap: bool,
    chip: ChipOptions,
    fixed: np.ndarray,
    grouped: np.ndarray,
) -> Chosen:
    """Per GEMM of ``table`` (the main array's), the candidate with the least objective
    (``chip.search``), ``given`` being the first candidate's columns; ``fixed`` GEMMs
    keep it, only ``grouped`` ones (of a grouped convolution) may take the vector
    unit."""
    options = chip.search
    assert options is not None
    tried = candidates(options)
    columns = [given] + [
        _array_columns(table, c, conv, psums, fold_overlap, chip) for c in tried[1:]
    ]
    scores = [objective(c, chip, options, on_vector=False) for c in columns]
    vector = Candidate(-1, False, tried[0].fewest_reads, on_vector=True)
    if grouped.any():
        tried.append(vector)
        columns.append(vector_columns(table, chip, options))
        scores.append(np.where(grouped, objective(columns[-1], chip, options, True), np.inf))
    best = np.where(fixed, 0, np.argmin(np.stack(scores), axis=0))
    rows = np.arange(len(table))
    chosen = {name: np.stack([c[name] for c in columns])[best, rows] for name in given}
    return Chosen(
        chosen,
        tried[0],
        dataflow=np.asarray([c.dataflow for c in tried], np.int64)[best],
        transposed=np.asarray([c.transposed for c in tried], np.bool_)[best],
        fewest_reads=np.asarray([c.fewest_reads for c in tried], np.bool_)[best],
        on_vector=np.asarray([c.on_vector for c in tried], np.bool_)[best],
    )


def _array_columns(
    table: UnitSchedule,
    candidate: Candidate,
    conv: int,
    psums: PsumPolicy,
    fold_overlap: bool,
    chip: ChipOptions,
) -> Columns:
    """The cost columns of every GEMM of ``table`` mapped as ``candidate`` says on the
    array (the DRAM read columns naming the operand, as the given orientation's)."""
    mapped = transposed(table) if candidate.transposed else table
    mapped = remapped(mapped, np.full_like(table.dataflow, candidate.dataflow))
    options = dataclasses.replace(chip, fewest_reads=candidate.fewest_reads)
    columns = gemm_columns(mapped, conv, psums, fold_overlap, options)
    if candidate.transposed:
        columns["dram_ifmap_read_bytes"], columns["dram_filter_read_bytes"] = (
            columns["dram_filter_read_bytes"],
            columns["dram_ifmap_read_bytes"],
        )
    return columns


def vector_columns(table: UnitSchedule, chip: ChipOptions, options: SearchOptions) -> Columns:
    """The cost columns of every GEMM of ``table`` run on the vector unit, less its fixed
    cost per op.

    Each MAC is one vector operation (a multiply-add into the lane holding its output),
    and so is each of ``vector_unit.gemm_output_ops`` per output; the lanes do
    ``lanes`` a cycle (and with ``vector_unit.stream_bytes_per_cycle``, at most that
    many bytes of the buffer accesses below a cycle).  Each MAC reads its A and its B
    element from the ofmap buffer, through which the vector unit works (no operand is
    held in the lanes between MACs: an upper bound on the SRAM reads); each output is
    written there once.  DRAM: each operand's unique footprint read once (a convolution
    window slides over the rows of its input held on chip), each output written once;
    none for a tensor kept on chip.  The MACs stay MACs (the step's work), priced by the
    energy model as vector operations since they run on the vector unit; no folds."""
    macs = table.m * table.n * table.k * table.count
    ops = macs + chip.output_ops(table.m, table.n, table.count)
    outputs = table.m * table.n * table.count
    sram_reads = macs * (table.a_word + table.b_word)
    sram_writes = outputs * table.c_word
    compute = -(-ops // chip.vector_lanes)
    stream = options.vector_stream_bytes_per_cycle
    if stream is not None:
        moved = (sram_reads + sram_writes).astype(np.float64)
        compute = np.maximum(compute, np.ceil(moved / stream).astype(np.int64))
    a_read = np.where(table.a_on_chip, 0, table.a_footprint * table.count * table.a_word)
    b_read = np.where(table.b_on_chip, 0, table.b_footprint * table.count * table.b_word)
    c_write = np.where(table.c_on_chip, 0, outputs * table.c_word)
    zero = np.zeros_like(macs)
    return {
        "compute_cycles": compute,
        "vector_ops": ops,
        "macs": macs,
        "folds": zero,
        "mapping_efficiency": np.zeros(len(table), np.float64),
        "sram_ifmap_read_bytes": zero,
        "sram_filter_read_bytes": zero,
        "sram_ofmap_read_bytes": sram_reads,
        "sram_ofmap_write_bytes": sram_writes,
        "sram_ifmap_write_bytes": zero,
        "sram_filter_write_bytes": zero,
        "dram_ifmap_read_bytes": a_read,
        "dram_filter_read_bytes": b_read,
        "dram_ofmap_read_bytes": zero,
        "dram_ofmap_write_bytes": c_write,
        "prologue_bytes": a_read + b_read,  # cut per tile group once the groups are known
        "epilogue_bytes": c_write,
    }


def objective(
    columns: Columns, chip: ChipOptions, options: SearchOptions, on_vector: bool
) -> np.ndarray:
    """The objective of each GEMM of these cost columns, on the vector unit or the
    array (:mod:`accelsim.timing.mapper`)."""
    if options.objective is MappingObjective.TIME:
        return cycles(columns, chip, options, on_vector)
    assert options.prices is not None
    energy = dynamic_pj(columns, options.prices, on_vector)
    if options.objective is MappingObjective.ENERGY:
        return energy
    edp: np.ndarray = energy * cycles(columns, chip, options, on_vector)
    return edp


def cycles(
    columns: Columns, chip: ChipOptions, options: SearchOptions, on_vector: bool
) -> np.ndarray:
    """A lone op's cycles: compute or DRAM transfer, plus the unit's fixed cost."""
    fixed = options.vector_overhead_cycles if on_vector else chip.op_overhead_cycles
    total: np.ndarray = chip.lone_op_cycles(columns) + fixed
    return total.astype(np.float64)


def dynamic_pj(columns: Columns, prices: Prices, on_vector: bool) -> np.ndarray:
    """The dynamic energy of each GEMM of these cost columns at ``prices``: MACs on the
    array (none on the vector unit, whose operations are priced instead), vector
    operations, each buffer's SRAM accesses and DRAM bytes."""
    reads, writes = prices.sram_read_pj_per_byte, prices.sram_write_pj_per_byte
    energy: np.ndarray = (
        (0.0 if on_vector else prices.mac_pj) * columns["macs"]
        + prices.vector_op_pj * columns["vector_ops"]
        + reads[0] * columns["sram_ifmap_read_bytes"]
        + reads[1] * columns["sram_filter_read_bytes"]
        + reads[2] * columns["sram_ofmap_read_bytes"]
        + writes[0] * columns["sram_ifmap_write_bytes"]
        + writes[1] * columns["sram_filter_write_bytes"]
        + writes[2] * columns["sram_ofmap_write_bytes"]
        + prices.dram_read_pj_per_byte
        * (
            columns["dram_ifmap_read_bytes"]
            + columns["dram_filter_read_bytes"]
            + columns["dram_ofmap_read_bytes"]
        )
        + prices.dram_write_pj_per_byte * columns["dram_ofmap_write_bytes"]
    )
    return energy


@dataclass(frozen=True)
class OpMapping:
    """Per op of a graph, the mapping the search gave it (``ops.csv``'s ``dataflow``,
    ``orientation`` and ``stream_blocking`` columns; its ``unit`` is the op's own).

    Attributes:
        searched: Whether the op is a GEMM the search mapped (the main array's).
        dataflow: Its dataflow's code on the array, -1 on the vector unit or unsearched.
        transposed: Whether it runs as its transpose.
        fewest_reads: Whether its streamed dimension is blocked for the fewest reads.
        moved: Whether its mapping is not the first candidate's (the graph's GEMM in
            ``array.dataflow`` with the run's stream blocking, on the array).
    """

    searched: np.ndarray
    dataflow: np.ndarray
    transposed: np.ndarray
    fewest_reads: np.ndarray
    moved: np.ndarray

    @classmethod
    def of(cls, n_ops: int, op_index: np.ndarray, chosen: Chosen) -> OpMapping:
        """The record of ``n_ops`` ops, the GEMMs at ``op_index`` mapped as ``chosen``."""
        first = chosen.first
        fields = {
            "searched": np.zeros(n_ops, np.bool_),
            "dataflow": np.full(n_ops, -1, np.int64),
            "transposed": np.zeros(n_ops, np.bool_),
            "fewest_reads": np.zeros(n_ops, np.bool_),
            "moved": np.zeros(n_ops, np.bool_),
        }
        fields["searched"][op_index] = True
        fields["dataflow"][op_index] = np.where(chosen.on_vector, -1, chosen.dataflow)
        fields["transposed"][op_index] = chosen.transposed
        fields["fewest_reads"][op_index] = chosen.fewest_reads
        fields["moved"][op_index] = (
            chosen.on_vector
            | chosen.transposed
            | (chosen.dataflow != first.dataflow)
            | (chosen.fewest_reads != first.fewest_reads)
        )
        return cls(**fields)
