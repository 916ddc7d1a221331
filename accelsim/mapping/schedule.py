"""The fold schedule: how every GEMM of a graph maps onto its systolic array.

For each array unit, one row per GEMM op that runs on it: its ``(Sr, Sc, T)``
mapping (see :mod:`accelsim.mapping.dataflow`), its row and column folds, its
shape, its operand footprints and word sizes, whether each operand stays on
chip, which operands resident tile streams serve and whether one takes its
stationary operand as it is loaded (:mod:`accelsim.mapping.tile_reuse`, whose
result the schedule keeps for the vector ops too).  A technique may mask folds (a
sampled rewriter's ``fold_uses``): a GEMM's mask has one entry per ``(row fold,
column fold)``, false for a fold that is skipped in every one of its ``count``
GEMMs.  The schedule keeps what the running folds use
(:func:`fold_use`): how many run, the share of each operand's blocks they touch,
and the partial-sum round trips of each column block, so that timing charges a
masked GEMM's DRAM traffic by its operands' reuse.  Timing
(:mod:`accelsim.timing.costs`) consumes the schedule and never maps anything itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from accelsim.config.base import Dataflow
from accelsim.errors import SimulationError
from accelsim.graph.memo import RECENT_DESIGNS, per_graph, per_graph_recent
from accelsim.graph.ops import GemmOp, Op, OpGraph
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
    # what the running folds use (USE_FIELDS), per GEMM, in elements of Sr, Sc and T:
    stream: np.ndarray  # the running folds' summed stream lengths
    work: np.ndarray  # their summed rows x columns x stream (MACs of the running folds)
    run_area: np.ndarray  # their summed rows x columns (a stationary operand's tiles)
    run_rows: np.ndarray  # their summed rows x stream (a row-blocked operand, per pass)
    run_cols: np.ndarray  # their summed columns x stream (a column-blocked one, per pass)
    any_rows: np.ndarray  # distinct (row, stream position) pairs they need (read once)
    any_cols: np.ndarray  # distinct (column, stream position) pairs they need (read once)
    spill_cols: np.ndarray  # partial-sum round trips: per column block, columns x stream
    # x (its running row folds - 1)
    # bool: a resident tile stream serves the first pass over A (B) / saves C's write
    a_tiled: np.ndarray
    b_tiled: np.ndarray
    c_unwritten: np.ndarray
    # bool: a resident tile stream takes the stationary operand (ws: B, is: A) as it is
    # loaded, so each of its tiles is loaded once (TileReuse.served)
    stationary_served: np.ndarray

    def __len__(self) -> int:
        return int(self.op_index.shape[0])


@dataclass(frozen=True)
class FoldSchedule:
    """The fold schedule of a graph: one :class:`UnitSchedule` per array unit."""

    units: tuple[UnitSchedule, ...]
    uses: Mapping[int, np.ndarray] = field(default_factory=dict)  # USE_FIELDS by op id
    reuse: TileReuse = NO_REUSE

    def with_masks(self, masks: Mapping[int, np.ndarray]) -> FoldSchedule:
        """The schedule with fold masks (by op id) applied.

        Raises:
            SimulationError: if a mask's shape is not ``(row folds, column folds)``.
        """
        uses = {}
        for unit in self.units:
            rows, cols = unit.unit.array.rows, unit.unit.array.cols
            for j, op_id in enumerate(unit.op_index.tolist()):
                mask = masks.get(op_id)
                if mask is None:
                    continue
                shape = (int(unit.row_folds[j]), int(unit.col_folds[j]))
                if mask.shape != shape:
                    raise SimulationError(
                        f"fold mask of op {op_id} is {mask.shape}, expected {shape}"
                    )
                uses[op_id] = fold_use(
                    mask, int(unit.sr[j]), int(unit.sc[j]), int(unit.t[j]), rows, cols
                )
        return self.with_uses(uses)

    def with_uses(self, uses: Mapping[int, np.ndarray]) -> FoldSchedule:
        """The schedule with what the running folds of some GEMMs use (by op id, each
        a vector of :data:`USE_FIELDS`), from a technique that compacts folds."""
        merged = {**self.uses, **uses}
        units = []
        for unit in self.units:
            use = {name: getattr(unit, name).copy() for name in USE_FIELDS}
            for j, op_id in enumerate(unit.op_index.tolist()):
                found = merged.get(op_id)
                if found is not None:
                    for name, value in zip(USE_FIELDS, found.tolist(), strict=True):
                        use[name][j] = value
            units.append(dataclasses.replace(unit, **use))
        return FoldSchedule(tuple(units), merged, self.reuse)


USE_FIELDS = (
    "active_folds",
    "stream",
    "work",
    "run_area",
    "run_rows",
    "run_cols",
    "any_rows",
    "any_cols",
    "spill_cols",
)
"""The :class:`UnitSchedule` fields :func:`fold_use` gives, in its order."""


def extents(size: int, block: int) -> np.ndarray:
    """The lengths of the folds that cut ``size`` into blocks of ``block``."""
    folds = -(-size // block)
    lengths: np.ndarray = np.minimum(block, size - block * np.arange(folds, dtype=np.int64))
    return lengths


def fold_use(mask: np.ndarray, sr: int, sc: int, t: int, rows: int, cols: int) -> np.ndarray:
    """What the running folds of ``mask`` (row folds x column folds, true: runs) of a
    GEMM with array-mapped dimensions ``sr`` x ``sc`` and stream ``t`` on a ``rows`` x
    ``cols`` array use, as :data:`USE_FIELDS` (``e_i``, ``f_j``: the lengths of row
    fold ``i`` and column fold ``j``, :func:`extents`; every running fold streams all
    of ``t``)."""
    e, f = extents(sr, rows), extents(sc, cols)
    run = mask.astype(np.int64)
    per_row, per_col = run.sum(axis=1), run.sum(axis=0)
    area = e @ run @ f
    return np.array(
        [
            run.sum(),
            run.sum() * t,
            area * t,
            area,
            (per_row @ e) * t,
            (per_col @ f) * t,
            ((per_row > 0) @ e) * t,
            ((per_col > 0) @ f) * t,
            (np.maximum(per_col - 1, 0) @ f) * t,
        ],
        np.int64,
    )


def whole_use(
    sr: np.ndarray, sc: np.ndarray, t: np.ndarray, rows: int, cols: int
) -> dict[str, np.ndarray]:
    """:data:`USE_FIELDS` of GEMMs whose folds all run, by field."""
    fr, fc = -(-sr // rows), -(-sc // cols)
    values = (
        fr * fc, fr * fc * t, sr * sc * t, sr * sc, fc * sr * t, fr * sc * t, sr * t, sc * t,
        (fr - 1) * sc * t,
    )  # fmt: skip
    return dict(zip(USE_FIELDS, values, strict=True))


def schedule_unit(graph: OpGraph, unit: ArrayUnit, reuse: TileReuse = NO_REUSE) -> UnitSchedule:
    """The :class:`UnitSchedule` of the GEMM ops of ``graph`` that run on ``unit``, with
    the tile streams ``reuse`` keeps on chip.

    What comes from the graph and the dataflow alone is worked out once per graph
    object (:func:`_unit_gemms`); the folds and what they use follow the array's
    rows and columns, and the tile flags ``reuse``.
    """
    dataflow = unit.array.dataflow
    key = ("unit GEMMs", unit.name, dataflow, unit.array.k_per_pe)
    made = per_graph(graph, key, lambda: _unit_gemms(graph, unit))
    rows, cols = unit.array.rows, unit.array.cols
    if reuse.resident or reuse.unwritten:
        ids = made.op_index.tolist()
        a_tiled = _flags([reuse.takes(i, 0) is not None for i in ids])
        b_tiled = _flags([reuse.takes(i, 1) is not None for i in ids])
        c_unwritten = _flags([not reuse.writes_dram(i, graph.ops[i].c.key) for i in ids])
        served = _flags([_stationary_served(graph.ops[i], dataflow, reuse) for i in ids])
    else:
        a_tiled = b_tiled = c_unwritten = served = made.a_tiled
    return dataclasses.replace(
        made,
        unit=unit,
        row_folds=-(-made.sr // rows),
        col_folds=-(-made.sc // cols),
        **whole_use(made.sr, made.sc, made.t, rows, cols),
        a_tiled=a_tiled,
        b_tiled=b_tiled,
        c_unwritten=c_unwritten,
        stationary_served=served,
    )


def _stationary_served(op: Op, dataflow: Dataflow, reuse: TileReuse) -> bool:
    """Whether a resident tile stream takes GEMM ``op``'s stationary operand as it
    loads it (output stationary has none)."""
    assert isinstance(op, GemmOp)
    match dataflow:
        case Dataflow.WS:
            return (op.op_id, op.b.key) in reuse.served
        case Dataflow.IS:
            return (op.op_id, op.a.key) in reuse.served
        case _:
            return False


def _ints(values: Sequence[int]) -> np.ndarray:
    return np.asarray(values, dtype=np.int64).reshape(len(values))


def _flags(values: Sequence[bool]) -> np.ndarray:
    return np.asarray(values, dtype=np.bool_).reshape(len(values))


def _unit_gemms(graph: OpGraph, unit: ArrayUnit) -> UnitSchedule:
    """The schedule of the GEMMs of ``graph`` on ``unit`` without tile streams: the
    arrays :func:`schedule_unit` shares between the schedules it makes from it (never
    changed)."""
    dataflow = unit.array.dataflow
    gemms = [op for op in graph.ops if isinstance(op, GemmOp) and op.unit == unit.name]
    rate = unit.array.k_per_pe
    dims = [array_dims(dataflow, op.m, op.n, op.k, rate) for op in gemms]
    on_chip = graph.on_chip
    sr, sc, t = (_ints([d[i] for d in dims]) for i in range(3))
    rows, cols = unit.array.rows, unit.array.cols
    none = _flags([False] * len(gemms))
    return UnitSchedule(
        unit=unit,
        op_index=_ints([op.op_id for op in gemms]),
        dataflow=_ints([DATAFLOW_CODE[dataflow]] * len(gemms)),
        sr=sr,
        sc=sc,
        t=t,
        row_folds=-(-sr // rows),
        col_folds=-(-sc // cols),
        m=_ints([op.m for op in gemms]),
        n=_ints([op.n for op in gemms]),
        k=_ints([op.k for op in gemms]),
        count=_ints([op.count for op in gemms]),
        a_footprint=_ints([op.a_elements for op in gemms]),
        b_footprint=_ints([op.b_elements for op in gemms]),
        a_word=_ints([op.a.word_bytes for op in gemms]),
        b_word=_ints([op.b.word_bytes for op in gemms]),
        c_word=_ints([op.c.word_bytes for op in gemms]),
        a_on_chip=_flags([op.a.key in on_chip for op in gemms]),
        b_on_chip=_flags([op.b.key in on_chip for op in gemms]),
        c_on_chip=_flags([op.c.key in on_chip for op in gemms]),
        **whole_use(sr, sc, t, rows, cols),
        a_tiled=none,
        b_tiled=none,
        c_unwritten=none,
        stationary_served=none,
    )


def schedule(graph: OpGraph, units: Sequence[ArrayUnit]) -> FoldSchedule:
    """The fold schedule of every GEMM of ``graph`` on the array ``units`` (made once
    per graph and units among the :data:`~accelsim.graph.memo.RECENT_DESIGNS` used
    last).

    Raises:
        SimulationError: if a GEMM names an array unit that is not in ``units``.
    """
    named = per_graph(
        graph, "GEMM units", lambda: {op.unit for op in graph.ops if isinstance(op, GemmOp)}
    )
    unknown = named - {u.name for u in units}
    if unknown:
        raise SimulationError(f"GEMMs name array units that do not exist: {sorted(unknown)}")

    def make() -> FoldSchedule:
        reuse = tile_reuse(graph, units)
        return FoldSchedule(tuple(schedule_unit(graph, u, reuse) for u in units), {}, reuse)

    return per_graph_recent(graph, "fold schedule", tuple(units), make, RECENT_DESIGNS)
