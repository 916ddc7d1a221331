"""Per-op costs of a graph: compute cycles, SRAM accesses and DRAM bytes.

GEMM costs come from the fold-level closed forms (NumPy or Numba, see
:mod:`accelsim.timing.backend`) over the whole graph's
:class:`~accelsim.mapping.tiler.GemmTable`; vector and communication ops are
costed here.  The event engine then turns costs into time, adding the stalls
that DRAM and interconnect contention cause.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from accelsim.config.base import Convention
from accelsim.config.hardware import HardwareSpec
from accelsim.config.run import PsumPolicy
from accelsim.errors import SimulationError
from accelsim.mapping.tiler import GemmTable, tabulate
from accelsim.mapping.units import ArrayUnit, main_array
from accelsim.timing import backend
from accelsim.timing.closed_form import ACCELSIM, SCALESIM
from accelsim.graph.ops import CommOp, GemmOp, OpGraph, TransferOp, VectorOp

UNIT_ARRAY, UNIT_VECTOR, UNIT_COMM = 0, 1, 2
BASE_UNITS = ("array", "vector", "interconnect")

# Ops shorter than this many cycles per tile group use fewer groups: the
# overlap of their traffic is then resolved at a finer grain than it matters.
MIN_CHUNK_CYCLES = 2048


def _chunks(cycles: np.ndarray, chunks_per_op: int, limit: np.ndarray | None = None) -> np.ndarray:
    """Tile groups per op: at most ``chunks_per_op``, ``limit`` and one per ``MIN_CHUNK_CYCLES``."""
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
    of the traffic overlaps compute in ``chunks`` tile groups.
    """

    unit: np.ndarray
    compute_cycles: np.ndarray
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

    def is_array(self) -> np.ndarray:
        """Which ops run on a systolic array (the main one or any other)."""
        array_units = [
            i for i, n in enumerate(self.unit_names) if n in {a.name for a in self.arrays}
        ]
        mask: np.ndarray = np.isin(self.unit, array_units)
        return mask

    @property
    def dram_read_bytes(self) -> np.ndarray:
        total: np.ndarray = (
            self.dram_ifmap_read_bytes + self.dram_filter_read_bytes + self.dram_ofmap_read_bytes
        )
        return total


def op_costs(
    graph: OpGraph,
    hw: HardwareSpec,
    convention: Convention,
    psums: PsumPolicy,
    chunks_per_op: int,
    extra_arrays: Sequence[ArrayUnit] = (),
) -> OpCosts:
    """Cost every op of ``graph`` on ``hw`` under ``convention`` and the ``psums`` tiling.

    Args:
        extra_arrays: Array units beyond the main one that GEMM ops may name.

    Raises:
        SimulationError: if a GEMM names an array unit that does not exist.
    """
    arrays = (main_array(hw), *extra_arrays)
    names = (*BASE_UNITS, *(a.name for a in extra_arrays))
    n_ops = len(graph.ops)
    z: dict[str, np.ndarray] = {
        name: np.zeros(n_ops, np.int64)
        for name, f in OpCosts.__dataclass_fields__.items()
        if f.type == "np.ndarray"
    }
    z["mapping_efficiency"] = np.zeros(n_ops, np.float64)
    unknown = {op.unit for op in graph.ops if isinstance(op, GemmOp)} - {a.name for a in arrays}
    if unknown:
        raise SimulationError(f"GEMMs name array units that do not exist: {sorted(unknown)}")
    conv = SCALESIM if convention is Convention.SCALESIM else ACCELSIM
    for unit in arrays:
        table = tabulate(graph, unit)
        if len(table):
            _cost_gemms(z, table, unit, names.index(unit.name), conv, psums, chunks_per_op)

    lanes = hw.vector_unit.lanes
    for op in graph.ops:
        i = op.op_id
        if isinstance(op, VectorOp):
            z["unit"][i] = UNIT_VECTOR
            z["vector_ops"][i] = op.vector_ops
            z["compute_cycles"][i] = -(-op.vector_ops // lanes)
            reads = [a for a in op.reads if a.tensor.name not in graph.on_chip]
            writes = [a for a in op.writes if a.tensor.name not in graph.on_chip]
            read_bytes = sum(a.bytes for a in reads)
            z["sram_ofmap_read_bytes"][i] = sum(a.bytes for a in op.reads)
            z["sram_ofmap_write_bytes"][i] = sum(a.bytes for a in op.writes)
            z["dram_ifmap_read_bytes"][i] = read_bytes
            z["dram_ofmap_write_bytes"][i] = sum(a.bytes for a in writes)
            chunks = int(_chunks(z["compute_cycles"][i : i + 1], chunks_per_op)[0])
            z["chunks"][i] = chunks
            z["prologue_bytes"][i] = read_bytes // chunks
            z["epilogue_bytes"][i] = int(z["dram_ofmap_write_bytes"][i]) // chunks
        elif isinstance(op, CommOp):
            procs = len(op.participants)
            z["unit"][i] = UNIT_COMM
            z["interconnect_bytes"][i] = 2 * (procs - 1) * -(-op.tensor.bytes // procs) * procs
            z["dram_ifmap_read_bytes"][i] = procs * op.tensor.bytes
            z["dram_ofmap_write_bytes"][i] = procs * op.tensor.bytes
            z["chunks"][i] = 1
        elif isinstance(op, TransferOp):
            z["unit"][i] = UNIT_COMM
            z["interconnect_bytes"][i] = op.bytes
            z["chunks"][i] = 1
    return OpCosts(**z, unit_names=names, arrays=arrays)


def _cost_gemms(
    z: dict[str, np.ndarray],
    table: GemmTable,
    unit: ArrayUnit,
    unit_index: int,
    conv: int,
    psums: PsumPolicy,
    chunks_per_op: int,
) -> None:
    """Fill the cost arrays of the GEMMs in ``table``, which run on ``unit``."""
    idx = table.op_index
    rows, cols = unit.array.rows, unit.array.cols
    kernels = backend.kernels_for(len(idx))
    fr, fc, folds, cycles = kernels.fold_cycles(
        table.dataflow, table.sr, table.sc, table.t, table.count, rows, cols, conv
    )
    ifr, flr, ofr, ofw = kernels.sram_counts(
        table.dataflow, table.m, table.n, table.k, table.count, fr, fc, rows, cols, conv
    )
    a_rd, b_rd, c_rd, c_wr = kernels.dram_words(
        table.dataflow,
        table.m,
        table.n,
        table.count,
        fr,
        fc,
        table.a_footprint,
        table.b_footprint,
        table.a_word,
        table.b_word,
        table.c_word,
        table.a_on_chip,
        table.b_on_chip,
        table.c_on_chip,
        unit.ifmap_bytes,
        unit.filter_bytes,
        unit.ofmap_bytes,
        cols,
        conv,
        psums is PsumPolicy.CHUNK,
    )
    z["unit"][idx] = unit_index
    z["compute_cycles"][idx] = cycles
    z["macs"][idx] = table.m * table.n * table.k * table.count
    z["folds"][idx] = folds
    z["mapping_efficiency"][idx] = (table.sr * table.sc) / (fr * rows * fc * cols)
    z["sram_ifmap_read_bytes"][idx] = ifr * table.a_word
    z["sram_filter_read_bytes"][idx] = flr * table.b_word
    z["sram_ofmap_read_bytes"][idx] = ofr * table.c_word
    z["sram_ofmap_write_bytes"][idx] = ofw * table.c_word
    z["sram_ifmap_write_bytes"][idx] = a_rd * table.a_word
    z["sram_filter_write_bytes"][idx] = b_rd * table.b_word
    z["dram_ifmap_read_bytes"][idx] = a_rd * table.a_word
    z["dram_filter_read_bytes"][idx] = b_rd * table.b_word
    z["dram_ofmap_read_bytes"][idx] = c_rd * table.c_word
    z["dram_ofmap_write_bytes"][idx] = c_wr * table.c_word
    tile = rows * cols
    z["prologue_bytes"][idx] = (
        np.minimum(a_rd, tile) * table.a_word + np.minimum(b_rd, tile) * table.b_word
    )
    z["epilogue_bytes"][idx] = np.minimum(c_wr, tile) * table.c_word
    z["chunks"][idx] = _chunks(cycles, chunks_per_op, folds)
