"""How a GEMM is dealt out among a processor's arrays (``array.count``).

A processor with ``N`` identical arrays runs each GEMM on all of them at once, from
its shared operand buffers, as a compiler splits a matmul across a chip's matrix
units.  Three cuts are considered and the one whose busiest array finishes first
is kept (the earlier in this list on a tie):

- **column folds** (output tiles), round-robin: column fold ``j`` runs on array
  ``j mod N``, so the arrays advance through the folds ``N`` at a time, side by
  side like one array ``N`` times as wide.  Each array runs ``row folds x
  ceil(col folds / N)`` folds.  The streamed operand passes by all ``N`` arrays at
  once, so it is read from DRAM ``ceil(col folds / N)`` times where one array
  needs ``col folds``;
- **rows** (output tiles): for output stationary the row folds (round-robin, as
  above); for weight and input stationary the streamed dimension (``m`` or ``n``,
  an output dimension), cut into ``N`` near-equal parts, each array running every
  fold with ``ceil(T / N)`` of the rows and holding its own copy of each
  stationary tile;
- **reduction** (weight and input stationary only, when output tiles leave arrays
  idle, as in a matrix-vector product): the row folds, which span the reduction
  dimension ``k``, round-robin; each array's partial sums are added into the
  output buffer, one more read and write of the output per extra array.

With one array every cut is the single array's mapping.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from accelsim.mapping.schedule import UnitSchedule

OS = 0  # the dataflow code of output stationary (mapping.dataflow.DATAFLOW_CODE)
COLUMNS, ROWS, REDUCTION = 0, 1, 2

CyclesOf = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""``(t, folds) -> compute cycles`` of one array, per GEMM."""


@dataclass(frozen=True)
class ArraySplit:
    """Per GEMM of a unit: the cut and what the busiest array runs (int64 arrays)."""

    cut: np.ndarray  # COLUMNS, ROWS or REDUCTION
    folds: np.ndarray  # folds the busiest array runs, per GEMM (not times ``count``)
    t: np.ndarray  # streamed rows per fold on the busiest array
    dram_row_folds: np.ndarray  # passes that set the DRAM re-reads, as one array
    dram_col_folds: np.ndarray
    wide: np.ndarray  # bool: the arrays stand side by side (partial sums of all N held)
    copies: np.ndarray  # arrays holding a copy of each stationary tile
    partials: np.ndarray  # extra partial sums of each output element (reduction cut)


def split(table: UnitSchedule, count: int, cycles_of: CyclesOf) -> ArraySplit:
    """The cut of every GEMM of ``table`` over ``count`` arrays.

    ``cycles_of(t, folds)`` gives the compute cycles of one array running ``folds``
    folds (per GEMM, before multiplying by ``table.count``) of ``t`` streamed rows.
    """
    fr, fc, t = table.row_folds, table.col_folds, table.t
    os = table.dataflow == OS
    col_share, row_share, t_share = -(-fc // count), -(-fr // count), -(-t // count)
    rows_folds = np.where(os, row_share * fc, fr * fc)
    rows_t = np.where(os, t, t_share)
    cycles = np.stack(
        [
            cycles_of(t, fr * col_share),
            cycles_of(rows_t, rows_folds),
            np.where(os, np.iinfo(np.int64).max, cycles_of(t, row_share * fc)),
        ]
    )
    cut = np.argmin(cycles, axis=0)  # the first of equal ones
    by_rows, by_reduction = cut == ROWS, cut == REDUCTION
    return ArraySplit(
        cut=cut,
        folds=np.choose(cut, [fr * col_share, rows_folds, row_share * fc]),
        t=np.where(by_rows, rows_t, t),
        dram_row_folds=np.where(by_rows & os, row_share, fr),
        dram_col_folds=np.where(cut == COLUMNS, col_share, fc),
        wide=cut == COLUMNS,
        copies=np.where(by_rows & ~os, np.minimum(count, t), 1),
        partials=np.where(by_reduction, np.minimum(count, fr) - 1, 0),
    )
