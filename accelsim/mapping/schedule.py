"""The fold schedule: how every GEMM of a graph maps onto its systolic array.

For each array unit, one row per GEMM op that runs on it: its ``(Sr, Sc, T)``
mapping (see :mod:`accelsim.mapping.dataflow`), its row and column folds, its
shape, its operand footprints and word sizes, whether each operand stays on
chip, and which operands resident tile streams serve
(:mod:`accelsim.mapping.tile_reuse`, whose result the schedule keeps for the vector
ops too).  A technique may mask folds (``mask_tiles``): a GEMM's mask has one entry
per ``(row fold, column fold)``, false for a fold that is skipped in every one of
its ``count`` GEMMs.  Timing (:mod:`accelsim.timing.costs`) consumes the
schedule and never maps anything itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from accelsim.errors import SimulationError
from accelsim.graph.ops import GemmOp, OpGraph
from accelsim.mapping.dataflow import DATAFLOW_CODE, array_dims
from accelsim.mapping.tile_reuse import NO_REUSE, TileReuse, tile_reuse
from accelsim.mapping.units import ArrayUnit


@dataclass(frozen=True)
class UnitSchedule:
    """Per-GEMM arrays (int64 unless noted) of the GEMMs on one array unit."""

    unit: ArrayUnit
    op_index: np.ndarray
    dataflow: np.ndarray
    sr: np.ndarray
    sc: np.ndarray
    t: np.ndarray
    row_folds: np.ndarray
    col_folds: np.ndarray
    m: np.ndarray
    n: np.ndarray
    k: np.ndarray
    count: np.ndarray
    a_footprint: np.ndarray
    b_footprint: np.ndarray
    a_word: np.ndarray
    b_word: np.ndarray
    c_word: np.ndarray
    a_on_chip: np.ndarray  # bool
    b_on_chip: np.ndarray  # bool
    c_on_chip: np.ndarray  # bool
    active_folds: np.ndarray  # folds that run, per GEMM of the op (all unless masked)
    # bool: a resident tile stream serves the first pass over A (B) / saves C's write
    a_tiled: np.ndarray
    b_tiled: np.ndarray
    c_unwritten: np.ndarray

    def __len__(self) -> int:
        return int(self.op_index.shape[0])


@dataclass(frozen=True)
class FoldSchedule:
    """The fold schedule of a graph: one :class:`UnitSchedule` per array unit."""

    units: tuple[UnitSchedule, ...]
    masks: Mapping[int, np.ndarray] = field(default_factory=dict)
    reuse: TileReuse = NO_REUSE

    def with_masks(self, masks: Mapping[int, np.ndarray]) -> FoldSchedule:
        """The schedule with fold masks (by op id) applied.

        Raises:
            SimulationError: if a mask's shape is not ``(row folds, column folds)``.
        """
        merged = {**self.masks, **masks}
        units = []
        for unit in self.units:
            active = unit.active_folds.copy()
            for j, op_id in enumerate(unit.op_index.tolist()):
                mask = merged.get(op_id)
                if mask is None:
                    continue
                shape = (int(unit.row_folds[j]), int(unit.col_folds[j]))
                if mask.shape != shape:
                    raise SimulationError(
                        f"fold mask of op {op_id} is {mask.shape}, expected {shape}"
                    )
                active[j] = int(np.count_nonzero(mask))
            units.append(dataclasses.replace(unit, active_folds=active))
        return FoldSchedule(tuple(units), merged, self.reuse)


def schedule_unit(graph: OpGraph, unit: ArrayUnit, reuse: TileReuse = NO_REUSE) -> UnitSchedule:
    """The :class:`UnitSchedule` of the GEMM ops of ``graph`` that run on ``unit``, with
    the tile streams ``reuse`` keeps on chip."""
    dataflow = unit.array.dataflow
    gemms = [op for op in graph.ops if isinstance(op, GemmOp) and op.unit == unit.name]
    dims = [array_dims(dataflow, op.m, op.n, op.k) for op in gemms]

    def ints(values: Sequence[int]) -> np.ndarray:
        return np.asarray(values, dtype=np.int64).reshape(len(values))

    def flags(values: Sequence[bool]) -> np.ndarray:
        return np.asarray(values, dtype=np.bool_).reshape(len(values))

    on_chip = graph.on_chip
    rows, cols = unit.array.rows, unit.array.cols
    row_folds = ints([-(-d[0] // rows) for d in dims])
    col_folds = ints([-(-d[1] // cols) for d in dims])
    return UnitSchedule(
        unit=unit,
        op_index=ints([op.op_id for op in gemms]),
        dataflow=ints([DATAFLOW_CODE[dataflow]] * len(gemms)),
        sr=ints([d[0] for d in dims]),
        sc=ints([d[1] for d in dims]),
        t=ints([d[2] for d in dims]),
        row_folds=row_folds,
        col_folds=col_folds,
        m=ints([op.m for op in gemms]),
        n=ints([op.n for op in gemms]),
        k=ints([op.k for op in gemms]),
        count=ints([op.count for op in gemms]),
        a_footprint=ints([op.a_elements for op in gemms]),
        b_footprint=ints([op.b_elements for op in gemms]),
        a_word=ints([op.a.word_bytes for op in gemms]),
        b_word=ints([op.b.word_bytes for op in gemms]),
        c_word=ints([op.c.word_bytes for op in gemms]),
        a_on_chip=flags([op.a.name in on_chip for op in gemms]),
        b_on_chip=flags([op.b.name in on_chip for op in gemms]),
        c_on_chip=flags([op.c.name in on_chip for op in gemms]),
        active_folds=row_folds * col_folds,
        a_tiled=flags([reuse.takes(op.op_id, 0) is not None for op in gemms]),
        b_tiled=flags([reuse.takes(op.op_id, 1) is not None for op in gemms]),
        c_unwritten=flags([not reuse.writes_dram(op.op_id, op.c.name) for op in gemms]),
    )


def schedule(graph: OpGraph, units: Sequence[ArrayUnit]) -> FoldSchedule:
    """The fold schedule of every GEMM of ``graph`` on the array ``units``.

    Raises:
        SimulationError: if a GEMM names an array unit that is not in ``units``.
    """
    unknown = {op.unit for op in graph.ops if isinstance(op, GemmOp)} - {u.name for u in units}
    if unknown:
        raise SimulationError(f"GEMMs name array units that do not exist: {sorted(unknown)}")
    reuse = tile_reuse(graph, units)
    return FoldSchedule(tuple(schedule_unit(graph, u, reuse) for u in units), {}, reuse)
