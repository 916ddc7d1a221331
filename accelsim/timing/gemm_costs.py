"""The cost columns of the GEMMs of one array unit's schedule (:mod:`accelsim.timing.costs`
fills them into every op's costs): compute cycles of the busiest array, SRAM accesses,
DRAM traffic (:func:`dram_words`, the NumPy or Numba closed forms) and, with
``mapping.orientation: best``, the better of each GEMM and its transpose
(:func:`better_orientation`), under what of the chip shapes them (:class:`ChipOptions`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from accelsim.config.base import Convention
from accelsim.config.energy import EnergyTable
from accelsim.config.enums import PsumPolicy
from accelsim.config.hardware import Orientation
from accelsim.mapping.arrays import split
from accelsim.mapping.dataflow import packed_k
from accelsim.mapping.schedule import UnitSchedule, whole_use
from accelsim.timing import backend
from accelsim.timing.closed_form import IS, OS, WS, DramGemms, DramRules, op_cycles
from accelsim.timing.machine import Machine
from accelsim.timing.mapping_options import SearchOptions
from accelsim.timing.masked import any_masked, masked_costs, masked_dram, masked_gemms, tiled_words
from accelsim.timing.memory import Memory


@dataclass(frozen=True)
class ChipOptions:
    """What of the hardware, beyond each unit's arrays and buffers, shapes GEMM costs."""

    best_orientation: bool = False
    fewest_reads: bool = False  # mapping.stream_blocking: fewest_reads (or its default)
    op_overhead_cycles: int = 0
    memory: Memory | None = None  # one processor's DRAM (None: transfers take no time)
    gemm_output_ops: int = 0  # vector operations per GEMM output element
    vector_lanes: int = 1
    search: SearchOptions | None = None  # mapping.search: per_layer (timing/mapper.py)

    @classmethod
    def of(
        cls, machine: Machine, convention: Convention, energy: EnergyTable | None = None
    ) -> ChipOptions:
        """The options ``machine``'s hardware sets under the run's ``convention`` (which
        picks the default stream blocking), with its processors' DRAM memory and the
        mapper's search (priced by ``energy``).

        Raises:
            ValueError: if the mapper's objective weighs energy and ``energy`` is None.
        """
        hw = machine.hardware
        return cls(
            best_orientation=hw.mapping.orientation is Orientation.BEST,
            fewest_reads=hw.mapping.blocks_for_fewest_reads(convention),
            op_overhead_cycles=hw.timing.op_overhead_cycles,
            memory=machine.dram[0],
            gemm_output_ops=hw.vector_unit.gemm_output_ops,
            vector_lanes=hw.vector_unit.lanes,
            search=SearchOptions.of(hw, convention, energy),
        )

    def output_ops(self, m: np.ndarray, n: np.ndarray, count: np.ndarray) -> np.ndarray:
        """Vector operations taking the outputs of ``count`` GEMMs of ``m x n`` outputs
        off the arrays (``vector_unit.gemm_output_ops`` per output), the same for a GEMM
        and its transpose."""
        ops: np.ndarray = self.gemm_output_ops * m * n * count
        return ops

    def output_cycles(self, m: np.ndarray, n: np.ndarray, count: np.ndarray) -> np.ndarray:
        """Cycles the vector unit takes for :meth:`output_ops`, all lanes busy."""
        cycles: np.ndarray = -(-self.output_ops(m, n, count) // self.vector_lanes)
        return cycles

    def lone_op_cycles(self, columns: dict[str, np.ndarray]) -> np.ndarray:
        """How long GEMMs of these cost columns take alone, to first order and less
        the fixed cost per op (which precedes both): their compute or their DRAM
        reads and writes (the memory's bounds), whichever is longer."""
        if self.memory is None:
            return columns["compute_cycles"]
        reads = (
            columns["dram_ifmap_read_bytes"]
            + columns["dram_filter_read_bytes"]
            + columns["dram_ofmap_read_bytes"]
        )
        transfer = self.memory.bound(reads) + self.memory.bound(
            columns["dram_ofmap_write_bytes"], write=True
        )
        longer: np.ndarray = np.maximum(columns["compute_cycles"], transfer)
        return longer


def gemm_columns(
    table: UnitSchedule, conv: int, psums: PsumPolicy, fold_overlap: bool, chip: ChipOptions
) -> dict[str, np.ndarray]:
    """The :class:`OpCosts` columns of the GEMMs in ``table`` but ``unit`` and ``chunks``,
    their output tiles dealt out among the unit's arrays (:mod:`accelsim.mapping.arrays`),
    the vector unit's time taking their outputs off the arrays included (``chip``)."""
    unit = table.unit
    rows, cols, count = unit.array.rows, unit.array.cols, unit.array.count
    kernels = backend.kernels_for(len(table))
    load, swap = unit.array.load_rows_per_cycle, unit.array.tile_swap_cycles
    fr, fc, folds, cycles = kernels.fold_cycles(
        table.dataflow,
        table.sr,
        table.sc,
        table.t,
        table.count,
        rows,
        cols,
        conv,
        fold_overlap,
        load,
        swap,
    )
    ifr, flr, ofr, ofw = kernels.sram_counts(
        table.dataflow, table.m, table.n, table.k, table.count, fr, fc, rows, cols, conv
    )

    def dram(row_folds: np.ndarray, col_folds: np.ndarray, width: int) -> tuple[np.ndarray, ...]:
        return dram_words(kernels, table, row_folds, col_folds, width, conv, psums, chip)

    if count == 1:
        a_rd, b_rd, c_rd, c_wr = dram(fr, fc, cols)
        efficiency = (table.sr * table.sc) / (fr * rows * fc * cols)
    else:

        def cycles_of(t: np.ndarray, per_array: np.ndarray) -> np.ndarray:
            return op_cycles(
                table.dataflow, t, per_array * table.count, rows, cols, conv, fold_overlap,
                load, swap,
            )  # fmt: skip

        cut = split(table, count, cycles_of)
        cycles = cycles_of(cut.t, cut.folds)
        wide = dram(cut.dram_row_folds, cut.dram_col_folds, cols * count)
        narrow = dram(cut.dram_row_folds, cut.dram_col_folds, cols)
        a_rd, b_rd, c_rd, c_wr = (
            np.where(cut.wide, w, n) for w, n in zip(wide, narrow, strict=True)
        )
        ifr = np.where(table.dataflow == IS, ifr * cut.copies, ifr)
        flr = np.where(table.dataflow == WS, flr * cut.copies, flr)
        partial_sums = cut.partials * table.m * table.n * table.count
        ofr, ofw = ofr + partial_sums, ofw + partial_sums
        efficiency = (table.sr * table.sc * table.t) / (count * rows * cols * cut.folds * cut.t)
    macs = table.m * table.n * table.k * table.count
    if any_masked(table):
        cycles, folds, macs, (ifr, flr, ofr, ofw) = masked_costs(
            table, conv, fold_overlap, macs, (ifr, flr, ofr, ofw)
        )
        a_rd, b_rd, c_rd, c_wr = masked_dram(table, a_rd, b_rd, c_rd, c_wr)
    fill_a, fill_b = a_rd, b_rd  # written into the operand buffers, from DRAM or a tile stream
    if table.a_tiled.any() or table.b_tiled.any() or table.c_unwritten.any():
        a_rd, b_rd, c_wr = tiled_words(table, a_rd, b_rd, c_wr)
    tile = rows * cols * count
    return {
        "compute_cycles": cycles + chip.output_cycles(table.m, table.n, table.count),
        "vector_ops": chip.output_ops(table.m, table.n, table.count),
        "macs": macs,
        "folds": folds,
        "mapping_efficiency": efficiency,
        "sram_ifmap_read_bytes": ifr * table.a_word,
        "sram_filter_read_bytes": flr * table.b_word,
        "sram_ofmap_read_bytes": ofr * table.c_word,
        "sram_ofmap_write_bytes": ofw * table.c_word,
        "sram_ifmap_write_bytes": fill_a * table.a_word,
        "sram_filter_write_bytes": fill_b * table.b_word,
        "dram_ifmap_read_bytes": a_rd * table.a_word,
        "dram_filter_read_bytes": b_rd * table.b_word,
        "dram_ofmap_read_bytes": c_rd * table.c_word,
        "dram_ofmap_write_bytes": c_wr * table.c_word,
        "prologue_bytes": np.minimum(a_rd, tile) * table.a_word
        + np.minimum(b_rd, tile) * table.b_word,
        "epilogue_bytes": np.minimum(c_wr, tile) * table.c_word,
    }


def kept_columns(
    table: UnitSchedule, conv: int, psums: PsumPolicy, fold_overlap: bool, chip: ChipOptions
) -> dict[str, np.ndarray]:
    """:func:`gemm_columns`, worked out once per ``table`` object and options (a fold
    schedule made once per graph and array design, :func:`~accelsim.mapping.schedule.schedule`,
    is costed once however many DRAM or other settings its points vary); a new dict
    of the same arrays, which callers must not change in place.  Of ``chip`` the key
    leaves out what the columns do not read: the memory, the search, the orientation
    choice and the fixed cost per op (:func:`~accelsim.timing.costs.op_costs` applies
    those)."""
    read = dataclasses.replace(
        chip, memory=None, search=None, best_orientation=False, op_overhead_cycles=0
    )
    key = (conv, psums, fold_overlap, read)
    kept: dict[Any, dict[str, np.ndarray]] = table.__dict__.setdefault(_KEPT, {})
    if key not in kept:
        kept[key] = gemm_columns(table, conv, psums, fold_overlap, read)
    return dict(kept[key])


_KEPT = "_kept_columns"
"""The instance attribute of a :class:`UnitSchedule` holding its columns by options
(not a dataclass field: no part of its equality, ``repr`` or ``replace``)."""


def dram_words(
    kernels: backend.Kernels,
    table: UnitSchedule,
    row_folds: np.ndarray,
    col_folds: np.ndarray,
    width: int,
    conv: int,
    psums: PsumPolicy,
    chip: ChipOptions,
) -> tuple[np.ndarray, ...]:
    """DRAM words of A, B and C read and C written, per GEMM of ``table``, for these
    folds over arrays ``width`` columns wide (``kernels``: the NumPy or Numba twin;
    ``chip``: the streamed dimension's blocking)."""
    unit = table.unit
    # a GEMM with a fold mask keeps the chunked order (timing/masked.py charges its reuse)
    served = table.stationary_served
    if served.any():
        served = served & ~masked_gemms(table)
    gemms = DramGemms(
        table.dataflow, table.m, table.n, table.count, table.a_footprint, table.b_footprint,
        table.a_word, table.b_word, table.c_word, table.a_on_chip, table.b_on_chip, table.c_on_chip,
        served,
    )  # fmt: skip
    rules = DramRules(
        unit.ifmap_bytes,
        unit.filter_bytes,
        unit.ofmap_bytes,
        width,
        conv,
        chunk_stream=psums is PsumPolicy.CHUNK,
        fit_stream=chip.fewest_reads,
    )
    words: tuple[np.ndarray, ...] = kernels.dram_words(gemms, row_folds, col_folds, rules)
    return words


def better_orientation(
    table: UnitSchedule,
    given: dict[str, np.ndarray],
    conv: int,
    psums: PsumPolicy,
    fold_overlap: bool,
    chip: ChipOptions,
) -> dict[str, np.ndarray]:
    """Per GEMM, the columns of it or of its transpose ``C^T = B^T . A^T``, whichever a
    lone op finishes first (``max(compute, DRAM reads / read bandwidth + writes / write
    bandwidth)``; the given one on a tie).  GEMMs with a fold mask or a resident tile
    stream (as its consumer, or serving its stationary operand) keep their
    orientation.  The DRAM read columns keep naming the operand (the
    ifmap column is A's traffic); the SRAM columns name the buffer."""
    flipped = gemm_columns(transposed(table), conv, psums, fold_overlap, chip)
    flipped["dram_ifmap_read_bytes"], flipped["dram_filter_read_bytes"] = (
        flipped["dram_filter_read_bytes"],
        flipped["dram_ifmap_read_bytes"],
    )
    flip = ~kept_mapping(table) & (chip.lone_op_cycles(flipped) < chip.lone_op_cycles(given))
    return {name: np.where(flip, flipped[name], values) for name, values in given.items()}


def kept_mapping(table: UnitSchedule) -> np.ndarray:
    """Per GEMM of ``table``, whether it keeps its mapping whatever a search finds: it
    has a fold mask or a resident tile stream (as its consumer, or serving its
    stationary operand), which the schedule worked out for its mapping."""
    fixed: np.ndarray = masked_gemms(table) | table.a_tiled | table.b_tiled | table.c_unwritten
    kept: np.ndarray = fixed | table.stationary_served
    return kept


def transposed(table: UnitSchedule) -> UnitSchedule:
    """``table`` with every GEMM replaced by its transpose: ``m`` and ``n``, A and B
    swapped, mapped again onto the unit's arrays."""
    swapped = dataclasses.replace(
        table,
        m=table.n,
        n=table.m,
        a_footprint=table.b_footprint,
        b_footprint=table.a_footprint,
        a_word=table.b_word,
        b_word=table.a_word,
        a_on_chip=table.b_on_chip,
        b_on_chip=table.a_on_chip,
        a_tiled=table.b_tiled,
        b_tiled=table.a_tiled,
    )
    return remapped(swapped, table.dataflow)


def remapped(table: UnitSchedule, dataflow: np.ndarray) -> UnitSchedule:
    """``table`` with every GEMM mapped again onto the unit's arrays under ``dataflow``
    (a code per GEMM, :data:`~accelsim.mapping.dataflow.DATAFLOW_CODE`), every fold
    running (``k`` packed as the array's precision packs it,
    :func:`~accelsim.mapping.dataflow.packed_k`)."""
    m, n, k = table.m, table.n, packed_k(table.k, table.unit.array.k_per_pe)
    sr = np.where(dataflow == OS, m, k)
    sc = np.where(dataflow == IS, m, n)
    t = np.where(dataflow == OS, k, np.where(dataflow == WS, m, n))
    rows, cols = table.unit.array.rows, table.unit.array.cols
    uses: dict[str, Any] = whole_use(sr, sc, t, rows, cols)
    return dataclasses.replace(
        table,
        **uses,
        dataflow=dataflow,
        sr=sr,
        sc=sc,
        t=t,
        row_folds=-(-sr // rows),
        col_folds=-(-sc // cols),
    )
