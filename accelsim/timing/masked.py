"""The DRAM words and costs of GEMMs whose folds are not all run from DRAM.

A technique may mask folds (:meth:`~accelsim.techniques.base.SampledRewriter.fold_uses`):
a masked GEMM's MACs and SRAM accesses scale with its running folds, its compute
cycles are those of its running folds alone (:func:`masked_costs`), and its DRAM
traffic follows its operands' reuse (:func:`masked_dram`).  A resident tile stream
(:mod:`accelsim.mapping.tile_reuse`) takes its tensor's first pass off DRAM
(:func:`tiled_words`).  :mod:`accelsim.timing.costs` applies them to a unit's GEMMs.
"""

from __future__ import annotations

import numpy as np

from accelsim.mapping.schedule import UnitSchedule, whole_use
from accelsim.timing.closed_form import IS, WS, op_cycles


def tiled_words(
    table: UnitSchedule, a_rd: np.ndarray, b_rd: np.ndarray, c_wr: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """DRAM words without what resident tile streams serve: the first pass over a
    streamed operand (its footprint, per GEMM), the final write of an output that no
    reader takes from DRAM (``m x n``, per GEMM; partial sums that spill still go)."""
    count = table.count
    a_off = np.where(table.a_tiled, np.minimum(a_rd, table.a_footprint * count), 0)
    b_off = np.where(table.b_tiled, np.minimum(b_rd, table.b_footprint * count), 0)
    c_off = np.where(table.c_unwritten, np.minimum(c_wr, table.m * table.n * count), 0)
    return a_rd - a_off, b_rd - b_off, c_wr - c_off


def masked_gemms(table: UnitSchedule) -> np.ndarray:
    """Per GEMM of ``table``, whether a technique skipped or compacted any of its folds."""
    rows, cols = table.unit.array.rows, table.unit.array.cols
    whole = whole_use(table.sr, table.sc, table.t, rows, cols)
    masked = np.zeros(len(table.sr), np.bool_)
    for name, value in whole.items():
        masked |= getattr(table, name) != value
    return masked


def any_masked(table: UnitSchedule) -> bool:
    """Whether a technique skipped or compacted any fold of the GEMMs in ``table``."""
    return bool(masked_gemms(table).any())


def masked_costs(
    table: UnitSchedule,
    conv: int,
    fold_overlap: bool,
    macs: np.ndarray,
    sram: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
    """Costs with only the running folds: the op's cycles are those of an op of that
    many folds streaming their mean stream length (with fold overlap, the running
    folds pipeline back to back), dealt round-robin among the unit's arrays; MACs and
    SRAM accesses scale with their work."""
    unit = table.unit.array
    running = table.active_folds * table.count
    whole = table.sr * table.sc * table.t  # the work of all folds
    scaled = tuple(_share(x, table.work, whole) for x in (macs, *sram))
    stream = -(-table.stream // np.maximum(table.active_folds, 1))  # the running folds' mean
    per_array = -(-table.active_folds // unit.count) * table.count  # dealt round-robin
    cycles = op_cycles(
        table.dataflow,
        stream,
        per_array,
        unit.rows,
        unit.cols,
        conv,
        fold_overlap,
        unit.load_rows_per_cycle,
        unit.tile_swap_cycles,
    )
    return cycles, running, scaled[0], scaled[1:]


def masked_dram(
    table: UnitSchedule, a_rd: np.ndarray, b_rd: np.ndarray, c_rd: np.ndarray, c_wr: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """DRAM words of masked GEMMs from what their running folds use (the schedule's
    :func:`~accelsim.mapping.schedule.fold_use`), operand by operand.

    The unmasked closed form reads an operand ``p`` times its footprint (``p`` passes:
    once, once per fold of the other dimension, once per partial-sum chunk).  By
    dataflow, an operand is either *stationary* (a fold holds tile ``(i, j)`` of it:
    ws B, is A), *row-blocked* (a fold reads its rows' slice over its stream: os A,
    ws A, is B) or *column-blocked* (os B).  Masked:

    * stationary: ``p`` times the running folds' share of the tiles' area;
    * row-blocked, read once (``p = 1``): the share of (row, stream position) pairs
      some running fold needs; read once per column-fold pass: in each pass, what
      its running folds read (``p / fc`` of their summed rows x stream over
      ``Sr x T``);
    * column-blocked: likewise with columns (passes per row fold);
    * the output: written whole once (a column block with no running fold still
      writes its zeros or bias); written per row fold (spilled partial sums,
      SCALE-Sim's ws and is), one write per running row fold of its column block
      and at least one, and one read back per running row fold after the first.
    """
    count = table.count
    t = table.t
    sr, sc = table.sr, table.sc
    fr, fc = table.row_folds, table.col_folds
    area = sr * sc
    dataflow = table.dataflow

    def passes(words: np.ndarray, footprint: np.ndarray) -> np.ndarray:
        whole = footprint * count
        p: np.ndarray = np.where(whole > 0, words // np.maximum(whole, 1), 0)
        return p

    def stationary(words: np.ndarray, footprint: np.ndarray) -> np.ndarray:
        return _share(footprint * count * passes(words, footprint), table.run_area, area)

    def blocked(words: np.ndarray, footprint: np.ndarray, by_rows: bool) -> np.ndarray:
        p = passes(words, footprint)
        size, other = (sr * t, fc) if by_rows else (sc * t, fr)
        if by_rows:
            run, need = table.run_rows, table.any_rows
        else:
            run, need = table.run_cols, table.any_cols
        whole = footprint * count
        fetched: np.ndarray = np.where(
            p <= 1, _share(p * whole, need, size), _share(whole * p, run, other * size)
        )
        return fetched

    a = np.where(
        dataflow == IS,
        stationary(a_rd, table.a_footprint),
        blocked(a_rd, table.a_footprint, by_rows=True),
    )
    b = np.where(
        dataflow == WS,
        stationary(b_rd, table.b_footprint),
        np.where(
            dataflow == IS,
            blocked(b_rd, table.b_footprint, by_rows=True),
            blocked(b_rd, table.b_footprint, by_rows=False),
        ),
    )
    mn = table.m * table.n * count
    c_r = np.where(c_rd > 0, _share(mn, table.spill_cols, sc * t), 0)
    c_w = np.where(c_wr > mn, _share(mn, table.spill_cols + sc * t, sc * t), c_wr)
    return a, b, c_r, c_w


def _share(x: np.ndarray, part: np.ndarray, whole: np.ndarray) -> np.ndarray:
    """``x * part / whole`` rounded to the nearest count (in floating point: the product
    of two counts of a large GEMM overflows int64)."""
    out: np.ndarray = np.rint(x * (part / np.maximum(whole, 1))).astype(np.int64)
    return out
