"""Per-op costs of a graph: compute cycles, SRAM accesses and DRAM bytes.

GEMM costs come from the fold-level closed forms (NumPy or Numba, see
:mod:`accelsim.timing.backend`) over the graph's
:class:`~accelsim.mapping.schedule.FoldSchedule`, a unit's columns at a time
(:mod:`accelsim.timing.gemm_costs`); vector and communication ops are costed
here.  A fold that a mask skips costs nothing: a masked GEMM's MACs
and SRAM accesses scale with its running folds and its compute cycles are those
of its running folds alone (pipelined, with fold overlap).  Its DRAM traffic
follows its operands' reuse (:mod:`accelsim.timing.masked`): a stationary
operand's tile is fetched for a running fold only; an operand fetched once needs
the blocks some running fold touches; one fetched once per pass over the other
dimension's folds needs, in each pass, the blocks of that pass's running folds;
the output is written whole, and partial sums that spill make one round trip per
running row fold after the first of their column block.  A resident tile stream
(:mod:`accelsim.mapping.tile_reuse`) takes its tensor's DRAM read off its consumer
and, when no reader needs DRAM, the write off its producer; the SRAM accesses stay.
The event engine then turns costs into time, adding the stalls that DRAM and
interconnect contention cause.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from accelsim.config.base import Convention
from accelsim.config.energy import EnergyTable
from accelsim.config.enums import PsumPolicy, VectorClass
from accelsim.config.hardware import VectorUnitSpec
from accelsim.counts import whole_cycles
from accelsim.graph import queries
from accelsim.graph.memo import per_graph
from accelsim.graph.ops import CommOp, GemmOp, OpGraph, TensorKey, TransferOp, VectorOp
from accelsim.mapping.schedule import FoldSchedule, UnitSchedule
from accelsim.mapping.tile_reuse import Buffer, TileReuse
from accelsim.mapping.units import ArrayUnit
from accelsim.timing import mapper
from accelsim.timing.closed_form import ACCELSIM, SCALESIM
from accelsim.timing.gemm_costs import ChipOptions, better_orientation, kept_columns, kept_mapping
from accelsim.timing.groups import busy_cycles, tile_groups
from accelsim.timing.machine import Machine
from accelsim.timing.memory import Memory
from accelsim.timing.sends import dram_totals, lowering_key, schedule_bytes
from accelsim.timing.unit_codes import BASE_UNITS as BASE_UNITS
from accelsim.timing.unit_codes import UNIT_ARRAY as UNIT_ARRAY
from accelsim.timing.unit_codes import UNIT_COMM as UNIT_COMM
from accelsim.timing.unit_codes import UNIT_VECTOR as UNIT_VECTOR

PLAIN_CHIP = ChipOptions()
"""No chip options: each GEMM as given, no fixed cost, transfers taking no time."""

# The per-op rule (``timing.group_cycles: null``): ops shorter than this many
# compute cycles per tile group use fewer groups.
MIN_CHUNK_CYCLES = 2048


def _chunks(cycles: np.ndarray, chunks_per_op: int, limit: np.ndarray | None = None) -> np.ndarray:
    """Tile groups per op by the per-op rule: at most ``chunks_per_op``, ``limit`` and
    one per ``MIN_CHUNK_CYCLES`` of compute."""
    chunks: np.ndarray = np.clip(-(-cycles // MIN_CHUNK_CYCLES), 1, chunks_per_op)
    return chunks if limit is None else np.minimum(chunks, np.maximum(limit, 1))


@dataclass(frozen=True)
class OpCosts:
    """Structure of arrays, one entry per op of the graph (int64 unless noted).

    ``unit`` indexes ``unit_names``: the main array, the vector unit, the
    interconnect, then any extra array units (described in ``arrays``, which
    starts with the main array).

    SRAM, DRAM and interconnect counts are in bytes.  Vector ops read and
    write through the ofmap buffer (the accumulator side of the array, where
    outputs are post-processed).  ``prologue_bytes`` must arrive
    before an op can start computing (one array-sized tile of each input) and
    ``epilogue_bytes`` drain after it stops (its last output tile); the rest
    of the traffic overlaps compute in ``chunks`` tile groups.  The first
    ``overhead_cycles`` of ``compute_cycles`` (the chip's fixed cost per op) pass
    before the op asks for any transfer, its prologue included.
    """

    unit: np.ndarray
    compute_cycles: np.ndarray
    overhead_cycles: np.ndarray
    macs: np.ndarray
    vector_ops: np.ndarray
    folds: np.ndarray
    mapping_efficiency: np.ndarray  # float
    sram_ifmap_read_bytes: np.ndarray
    sram_filter_read_bytes: np.ndarray
    sram_ofmap_read_bytes: np.ndarray
    sram_ifmap_write_bytes: np.ndarray
    sram_filter_write_bytes: np.ndarray
    sram_ofmap_write_bytes: np.ndarray
    dram_ifmap_read_bytes: np.ndarray
    dram_filter_read_bytes: np.ndarray
    dram_ofmap_read_bytes: np.ndarray
    dram_ofmap_write_bytes: np.ndarray
    interconnect_bytes: np.ndarray
    prologue_bytes: np.ndarray
    epilogue_bytes: np.ndarray
    chunks: np.ndarray
    unit_names: tuple[str, ...] = BASE_UNITS
    arrays: tuple[ArrayUnit, ...] = ()
    mapping: mapper.OpMapping | None = None  # what mapping.search chose (None: no search)

    @cached_property
    def dram_read_bytes(self) -> np.ndarray:
        """DRAM bytes each op reads (computed once: callers index it per op)."""
        total: np.ndarray = (
            self.dram_ifmap_read_bytes + self.dram_filter_read_bytes + self.dram_ofmap_read_bytes
        )
        return total


def op_costs(
    graph: OpGraph,
    schedule: FoldSchedule,
    machine: Machine,
    convention: Convention,
    psums: PsumPolicy,
    chunks_per_op: int,
    *,
    fold_overlap: bool = False,
    group_cycles: int | None = None,
    per_kernel: bool = False,
    energy: EnergyTable | None = None,
) -> OpCosts:
    """Cost every op of ``graph``, whose GEMMs ``schedule`` maps, on ``machine``.

    ``convention`` picks the closed forms, ``psums`` the partial-sum tiling and
    ``fold_overlap`` whether a GEMM's folds pipeline (accelsim convention only).
    The schedule's first unit is the main array.  Array and vector ops are cut into
    tile groups of at most ``group_cycles`` cycles, uniform over the step
    (:mod:`accelsim.timing.groups`), or, with ``None``, by the per-op rule (at most
    ``chunks_per_op`` groups of at least ``MIN_CHUNK_CYCLES`` compute cycles, a GEMM's
    at most one per fold); at most ``chunks_per_op`` either way.  Each GEMM and vector
    op pays the chip's fixed cost per op (``timing.op_overhead_cycles``), or with
    ``per_kernel`` (a compiled program) each kernel pays its fixed cost per kernel
    (``timing.kernel_overhead_cycles``) once: a lone op, or a tile group's lead
    (:func:`~accelsim.graph.queries.group_lead`) for the whole group.  With
    ``mapping.search: per_layer`` the main array's GEMMs are mapped by
    :mod:`accelsim.timing.mapper`, its energy objectives priced by ``energy``.

    Raises:
        ValueError: if ``fold_overlap`` is asked of the scalesim convention, or the
            mapper's objective weighs energy and ``energy`` is None.
    """
    conv = _convention_code(convention, fold_overlap)
    chip = ChipOptions.of(machine, convention, energy)
    arrays = tuple(u.unit for u in schedule.units)
    names = (*BASE_UNITS, *(a.name for a in arrays[1:]))
    n_ops = len(graph.ops)
    z: dict[str, np.ndarray] = {
        name: np.zeros(n_ops, np.int64)
        for name, f in OpCosts.__dataclass_fields__.items()
        if f.type == "np.ndarray"
    }
    z["mapping_efficiency"] = np.zeros(n_ops, np.float64)
    mapping = None
    for table in schedule.units:
        if len(table):
            index = names.index(table.unit.name)
            grouped = _grouped(graph, table) if chip.search and index == UNIT_ARRAY else None
            chosen = _cost_gemms(
                z, table, index, conv, psums, chunks_per_op, fold_overlap, chip, grouped
            )
            if chosen is not None:
                mapping = mapper.OpMapping.of(n_ops, table.op_index, chosen)

    _cost_vectors(z, graph, machine.hardware.vector_unit, chunks_per_op, schedule.reuse, chip)
    _cost_links(z, graph, machine)
    if per_kernel:
        _per_kernel(z, graph, machine.hardware.timing.program_cycles())
    if group_cycles is not None:
        _regroup(z, machine.dram[0], group_cycles, chunks_per_op)
    return OpCosts(**z, unit_names=names, arrays=arrays, mapping=mapping)


def _grouped(graph: OpGraph, table: UnitSchedule) -> np.ndarray:
    """Per GEMM of ``table``, whether the mapper may run it on the vector unit: it is a
    grouped convolution's (``GemmOp.groups`` above 1) and no resident tile stream takes
    its output (the stream's buffer is the array's)."""
    sources = per_graph(
        graph,
        "tile stream sources",
        lambda: {
            s for op in graph.ops if isinstance(op, GemmOp | VectorOp) for s in op.tile_sources
        },
    )
    ops = graph.ops
    flags = []
    for i in table.op_index.tolist():
        op = ops[i]
        flags.append(isinstance(op, GemmOp) and op.groups > 1 and i not in sources)
    return np.asarray(flags, np.bool_).reshape(len(flags))


def _per_kernel(z: dict[str, np.ndarray], graph: OpGraph, program_cycles: int) -> None:
    """Each op's fixed cost made its kernel's: the program's part taken off every op
    (the tile groups cut as for the whole cost, so a one-kernel program times as its
    lone op does; a vector op whose own fixed cost, ``vector_unit.op_overhead_cycles``,
    is less than the program's part keeps none), then the rest off every member of a
    tile group but its lead (the group is one kernel)."""
    cut = np.minimum(z["overhead_cycles"], program_cycles)
    z["compute_cycles"] -= cut
    z["overhead_cycles"] -= cut
    for group in queries.tile_groups(graph):
        lead = queries.group_lead(graph, group)
        members = np.asarray([i for i in group if i != lead], np.int64)
        z["compute_cycles"][members] -= z["overhead_cycles"][members]
        z["overhead_cycles"][members] = 0


def _regroup(z: dict[str, np.ndarray], dram: Memory, group_cycles: int, chunks_per_op: int) -> None:
    """Cut the array and vector ops into tile groups uniform over the step: the
    groups, and a vector op's prologue and epilogue (one group's traffic)."""
    units = z["unit"] != UNIT_COMM
    reads = z["dram_ifmap_read_bytes"] + z["dram_filter_read_bytes"] + z["dram_ofmap_read_bytes"]
    writes = z["dram_ofmap_write_bytes"]
    busy = busy_cycles(z["compute_cycles"][units], (reads + writes)[units], dram)
    z["chunks"][units] = tile_groups(busy, group_cycles, chunks_per_op)
    vector = z["unit"] == UNIT_VECTOR
    z["prologue_bytes"][vector] = reads[vector] // z["chunks"][vector]
    z["epilogue_bytes"][vector] = writes[vector] // z["chunks"][vector]


def _vector_overheads(graph: OpGraph, unit: VectorUnitSpec, chip_cycles: int) -> int | np.ndarray:
    """The fixed cost of each vector op of ``graph``, in program order, by its class
    (:meth:`~accelsim.config.hardware.VectorUnitSpec.overhead_cycles`): one number
    when every class pays the same."""
    classes = list(VectorClass)
    by_class = np.asarray([unit.overhead_cycles(c, chip_cycles) for c in classes], np.int64)
    if (by_class == by_class[0]).all():
        return int(by_class[0])
    codes = per_graph(graph, "vector classes", lambda: _vector_class_codes(graph, classes))
    overheads: np.ndarray = by_class[codes]
    return overheads


def _vector_class_codes(graph: OpGraph, classes: list[VectorClass]) -> np.ndarray:
    """Each vector op's class, as its place in ``classes``, in program order (the
    vector columns' order)."""
    code = {c: i for i, c in enumerate(classes)}
    return np.asarray([code[op.op_class] for op in graph.ops if isinstance(op, VectorOp)], np.int64)


def _cost_vectors(
    z: dict[str, np.ndarray],
    graph: OpGraph,
    unit: VectorUnitSpec,
    chunks_per_op: int,
    reuse: TileReuse,
    chip: ChipOptions,
) -> None:
    """Fill the cost arrays of the vector ops (:func:`_vector_columns`, then the lanes,
    the stream bound, tile groups and fixed cost per op).  Every op's compute starts
    with the vector unit's fixed cost for its class (:func:`_vector_overheads`), before
    its transfers."""
    columns = per_graph(
        graph,
        ("vector columns", frozenset(reuse.resident.items()), reuse.unwritten),
        lambda: _vector_columns(graph, reuse),
    )
    if columns is None:
        return
    idx, vector_ops, sram_reads, sram_writes, dram_reads, dram_writes, elsewhere = columns
    overhead_cycles = _vector_overheads(graph, unit, chip.op_overhead_cycles)
    compute = -(-vector_ops // unit.lanes)
    if unit.stream_bytes_per_cycle is not None:
        moved = sram_reads + sram_writes  # and the reads of tiles in other buffers:
        served = np.asarray(list(elsewhere), np.int64)
        np.add.at(moved, np.searchsorted(idx, served), [sum(e) for e in elsewhere.values()])
        compute = np.maximum(compute, stream_cycles(moved, unit.stream_bytes_per_cycle))
    compute = compute + overhead_cycles
    chunks = _chunks(compute, chunks_per_op)
    z["unit"][idx] = UNIT_VECTOR
    z["vector_ops"][idx] = vector_ops
    z["compute_cycles"][idx] = compute
    z["overhead_cycles"][idx] = overhead_cycles
    for i, (ifmap, filt) in elsewhere.items():
        z["sram_ifmap_read_bytes"][i] = ifmap
        z["sram_filter_read_bytes"][i] = filt
    z["sram_ofmap_read_bytes"][idx] = sram_reads
    z["sram_ofmap_write_bytes"][idx] = sram_writes
    z["dram_ifmap_read_bytes"][idx] = dram_reads
    z["dram_ofmap_write_bytes"][idx] = dram_writes
    z["chunks"][idx] = chunks
    z["prologue_bytes"][idx] = dram_reads // chunks
    z["epilogue_bytes"][idx] = dram_writes // chunks


def stream_cycles(moved_bytes: np.ndarray, bytes_per_cycle: float) -> np.ndarray:
    """Cycles a vector op takes to stream ``moved_bytes`` through the unit at
    ``bytes_per_cycle`` (``vector_unit.stream_bytes_per_cycle``), rounded up (a
    :class:`~accelsim.errors.LimitError` past :data:`~accelsim.errors.MAX_COUNT`)."""
    return whole_cycles(moved_bytes / bytes_per_cycle)


_Column = np.ndarray
_VectorColumns = tuple[
    _Column, _Column, _Column, _Column, _Column, _Column, dict[int, tuple[int, int]]
]


def _vector_columns(graph: OpGraph, reuse: TileReuse) -> _VectorColumns | None:
    """What the vector ops' costs take from the graph and ``reuse`` alone (the sums per
    op in Python ints): their op ids, vector operations, SRAM reads and writes of the
    ofmap buffer, DRAM bytes read and written, and the ifmap and filter buffer reads of
    the ops a resident tile stream serves.  A read a resident tile stream serves costs
    no DRAM traffic and reads the buffer the tile is in; a write ``reuse`` saves does
    not reach DRAM.  None for a graph without vector ops."""
    on_chip = graph.on_chip
    index: list[int] = []
    columns: list[tuple[int, int, int, int, int]] = []
    elsewhere: dict[int, tuple[int, int]] = {}  # op -> SRAM reads of ifmap, filter tiles
    for op in graph.ops:
        if isinstance(op, VectorOp):
            sram_read = 0
            tiled = bool(op.tile_sources)
            for j, a in enumerate(op.reads):
                size = a.elements * a.tensor.word_bytes
                buffer = reuse.takes(op.op_id, j) if tiled else None
                if buffer is None or buffer is Buffer.OFMAP:
                    sram_read += size
                else:
                    ifmap, filt = elsewhere.get(op.op_id, (0, 0))
                    is_ifmap = buffer is Buffer.IFMAP
                    elsewhere[op.op_id] = (ifmap + size * is_ifmap, filt + size * (not is_ifmap))
            sram_write = sum(a.elements * a.tensor.word_bytes for a in op.writes)
            reads, writes = vector_dram_bytes(op, on_chip, reuse)
            index.append(op.op_id)
            columns.append((op.vector_ops, sram_read, sram_write, sum(reads), sum(writes)))
    if not index:
        return None
    idx = np.asarray(index, np.int64)
    vector_ops, sram_reads, sram_writes, dram_reads, dram_writes = np.asarray(columns, np.int64).T
    return idx, vector_ops, sram_reads, sram_writes, dram_reads, dram_writes, elsewhere


def vector_dram_bytes(
    op: VectorOp, on_chip: frozenset[TensorKey], reuse: TileReuse
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The DRAM bytes of each read and each write of vector op ``op`` (what its costs
    sum): none for a tensor kept on chip, a read a resident tile stream serves, or a
    write ``reuse`` saves."""
    tiled = bool(op.tile_sources)
    reads = tuple(
        0
        if a.tensor.key in on_chip or (tiled and reuse.takes(op.op_id, j) is not None)
        else a.elements * a.tensor.word_bytes
        for j, a in enumerate(op.reads)
    )
    saves = bool(reuse.unwritten)
    writes = tuple(
        0
        if a.tensor.key in on_chip or (saves and not reuse.writes_dram(op.op_id, a.tensor.key))
        else a.elements * a.tensor.word_bytes
        for a in op.writes
    )
    return reads, writes


def _cost_links(z: dict[str, np.ndarray], graph: OpGraph, machine: Machine) -> None:
    """Fill the cost arrays of the collectives and transfers (:func:`_link_columns`)."""
    key = ("link columns", lowering_key(machine))
    columns = per_graph(graph, key, lambda: _link_columns(graph, machine))
    if columns is None:
        return
    idx, link, dram_read, dram_write = columns
    z["unit"][idx] = UNIT_COMM
    z["interconnect_bytes"][idx] = link
    z["dram_ifmap_read_bytes"][idx] = dram_read
    z["dram_ofmap_write_bytes"][idx] = dram_write
    z["chunks"][idx] = 1


def _link_columns(
    graph: OpGraph, machine: Machine
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """The collectives' and transfers' op ids, the bytes their transfers send and the
    DRAM bytes they read and write, every participant's (in Python ints, then a
    column at a time); None for a graph without them."""
    index: list[int] = []
    columns: list[tuple[int, int, int]] = []  # link bytes, DRAM bytes read and written
    for op in graph.ops:
        if isinstance(op, CommOp):
            index.append(op.op_id)
            columns.append((schedule_bytes(machine, op), *dram_totals(op)))
        elif isinstance(op, TransferOp):
            index.append(op.op_id)
            columns.append((op.bytes, 0, 0))
    if not index:
        return None
    link, dram_read, dram_write = np.asarray(columns, np.int64).T
    return np.asarray(index, np.int64), link, dram_read, dram_write


def _convention_code(convention: Convention, fold_overlap: bool) -> int:
    """The closed forms' code of ``convention``, which must allow ``fold_overlap``."""
    if convention is Convention.SCALESIM:
        if fold_overlap:
            raise ValueError("fold overlap needs the accelsim convention")
        return SCALESIM
    return ACCELSIM


def unit_costs(
    table: UnitSchedule,
    convention: Convention,
    psums: PsumPolicy,
    chunks_per_op: int,
    *,
    fold_overlap: bool = False,
    chip: ChipOptions = PLAIN_CHIP,
) -> dict[str, np.ndarray]:
    """Costs of the GEMMs of ``table`` (whose ``op_index`` is ``0..len - 1``), by
    :class:`OpCosts` field: the same closed forms, fold masking and ``chip`` options
    as :func:`op_costs`.

    Raises:
        ValueError: if ``fold_overlap`` is asked of the scalesim convention.
    """
    conv = _convention_code(convention, fold_overlap)
    z = {
        name: np.zeros(len(table), np.int64)
        for name, f in OpCosts.__dataclass_fields__.items()
        if f.type == "np.ndarray"
    }
    z["mapping_efficiency"] = np.zeros(len(table), np.float64)
    _cost_gemms(z, table, 0, conv, psums, chunks_per_op, fold_overlap, chip)
    return z


def _cost_gemms(
    z: dict[str, np.ndarray],
    table: UnitSchedule,
    unit_index: int,
    conv: int,
    psums: PsumPolicy,
    chunks_per_op: int,
    fold_overlap: bool,
    chip: ChipOptions,
    grouped: np.ndarray | None = None,
) -> mapper.Chosen | None:
    """Fill the cost arrays of the GEMMs in ``table``, which run on ``table.unit``, in
    the orientation ``chip`` asks for, with its fixed cost per op; with ``grouped`` (the
    main array's GEMMs under a search: which may take the vector unit), in the mappings
    :func:`accelsim.timing.mapper.search` chooses, which it returns."""
    columns = kept_columns(table, conv, psums, fold_overlap, chip)
    chosen = None
    overhead: int | np.ndarray = chip.op_overhead_cycles
    limit = columns["folds"]
    if grouped is not None and chip.search is not None:
        fixed = kept_mapping(table)
        chosen = mapper.search(table, columns, conv, psums, fold_overlap, chip, fixed, grouped)
        columns = chosen.columns
        vector = chosen.on_vector
        overhead = np.where(vector, chip.search.vector_overhead_cycles, chip.op_overhead_cycles)
        limit = np.where(vector, chunks_per_op, limit)
    elif chip.best_orientation:
        columns = better_orientation(table, columns, conv, psums, fold_overlap, chip)
    cycles = columns["compute_cycles"]
    if np.any(overhead):
        cycles = columns["compute_cycles"] = cycles + overhead
    idx = table.op_index
    for name, values in columns.items():
        z[name][idx] = values
    z["overhead_cycles"][idx] = overhead
    z["unit"][idx] = unit_index
    z["chunks"][idx] = _chunks(cycles, chunks_per_op, limit)
    if chosen is not None:
        moved = idx[chosen.on_vector]
        z["unit"][moved] = UNIT_VECTOR
        z["prologue_bytes"][moved] //= z["chunks"][moved]
        z["epilogue_bytes"][moved] //= z["chunks"][moved]
    return chosen
