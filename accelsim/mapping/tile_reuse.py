"""Tile reuse: which declared tile streams keep their tiles on chip, and which DRAM
writes that makes unnecessary.

A tile stream (:class:`~accelsim.graph.ops.TileStream`, declared by a pass such as
:mod:`accelsim.lowering.epilogues`) says that a consumer takes a tensor tile by
tile, in the order its source passes the tiles through a buffer: the source's
output as it leaves the array or the vector unit, or an operand the source loaded.
Whole-tensor residency (:mod:`accelsim.mapping.residency`) needs the whole tensor
to fit; a stream needs one tile to, whatever the tensor's size.

**Where a tile lives.**  In the source's buffer: a GEMM's output in its array's
ofmap buffer, its A operand in the ifmap buffer, its B operand in the filter
buffer; a vector op's tensors in the main array's ofmap buffer (the vector unit
works through it).  A tile is ``rows x cols`` elements (one array tile; all of a
smaller tensor).

**Capacity, per tile.**  Every buffer is double-buffered: one half belongs to the
GEMM that runs (its partial sums, the operand it streams), whether or not it is in
the group, so a group of ops linked by streams (:func:`~accelsim.graph.queries.tile_groups`)
keeps its tiles in the other half: two tiles of each streamed tensor (one being
made, one being taken) and one tile of every other tensor a vector op of the group
reads or writes.  When a group's tiles do not fit a buffer's half, the streams
through that buffer are not resident: their tiles go out to DRAM and back, still in
the consumer's order (the group still runs as one op).

**Traffic.**  A resident stream's consumer reads the tile from the buffer, not
DRAM; a GEMM consumer's first pass over the operand is served so (a later re-read
of an operand that does not fit its buffer still comes from DRAM).  A tensor's
write to DRAM disappears when it has readers, every one of which takes it from its
one producer by a resident stream, and it is not a weight or optimizer state
(which outlive the step).  The SRAM accesses stay counted as without the stream:
the producer's write of the tile into its buffer, the consumer's read of it (from
the buffer the tile is in, :attr:`TileReuse.resident`).

**Loop order.**  A resident stream that takes a GEMM's operand as the GEMM loads it
takes each tile once, so the GEMM loads each tile of that operand once
(:attr:`TileReuse.served`): where it is the stationary operand, the GEMM cannot
re-load it per chunk of its streamed dimension, and :mod:`accelsim.timing.closed_form`
charges the partial sums that do not fit instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from accelsim.graph import queries
from accelsim.graph.ops import (
    GemmOp,
    OpGraph,
    Tensor,
    TensorKey,
    TensorKind,
    TileStream,
    VectorOp,
)
from accelsim.mapping.units import ArrayUnit


class Buffer(str, Enum):
    """An array unit's operand buffer."""

    IFMAP = "ifmap"
    FILTER = "filter"
    OFMAP = "ofmap"


LASTING = (TensorKind.WEIGHT, TensorKind.OPTIMIZER_STATE)
"""Tensors whose DRAM copy outlives the step: their writes always reach DRAM."""


@dataclass(frozen=True)
class TileReuse:
    """The tile streams of a graph that stay on chip and the writes they save.

    Attributes:
        resident: ``(consumer op, read number)`` of every resident stream, with the
            buffer the consumer reads the tile from.
        unwritten: ``(producer op, tensor key)`` of every write that never reaches
            DRAM.
        served: ``(GEMM op, tensor key)`` of every operand a resident stream takes
            from the GEMM's buffer as the GEMM loads it (each tile loaded once).
    """

    resident: Mapping[tuple[int, int], Buffer] = field(default_factory=dict)
    unwritten: frozenset[tuple[int, TensorKey]] = frozenset()
    served: frozenset[tuple[int, TensorKey]] = frozenset()

    def takes(self, op_id: int, read: int) -> Buffer | None:
        """The buffer op ``op_id`` takes its read number ``read`` from, or None (DRAM)."""
        return self.resident.get((op_id, read))

    def writes_dram(self, op_id: int, tensor: TensorKey) -> bool:
        """Whether op ``op_id``'s write of the tensor ``tensor`` (its key) reaches DRAM
        (when it is not on chip)."""
        return (op_id, tensor) not in self.unwritten


NO_REUSE = TileReuse()


def tile_reuse(graph: OpGraph, units: Sequence[ArrayUnit]) -> TileReuse:
    """The resident streams of ``graph`` and the writes they save; ``units`` are the
    array units (the first is the main array, whose ofmap buffer vector ops use)."""
    streams = queries.tile_streams(graph)
    if not streams:
        return NO_REUSE
    by_name = {u.name: u for u in units}
    main = units[0]
    group_of = {i: g for g, group in enumerate(queries.tile_groups(graph)) for i in group}
    where = {s: _buffer(graph, s, by_name, main) for s in streams}
    need: dict[tuple[int, str, Buffer], int] = {}
    counted: set[tuple[int, str, Buffer, TensorKey]] = set()

    def hold(group: int, unit: ArrayUnit, buffer: Buffer, t: Tensor, tiles: int) -> None:
        key = (group, unit.name, buffer)
        if (*key, t.key) not in counted:
            counted.add((*key, t.key))
            per_tile = min(t.elements, unit.array.rows * unit.array.cols) * t.word_bytes
            need[key] = need.get(key, 0) + tiles * per_tile

    for s in streams:
        unit, buffer = where[s]
        hold(group_of[s.consumer], unit, buffer, s.tensor, 2)
    taken = {(s.consumer, s.read) for s in streams}
    for i, g in group_of.items():
        op = graph.ops[i]
        if isinstance(op, VectorOp):
            for j, access in enumerate(op.reads):
                if (i, j) not in taken:
                    hold(g, main, Buffer.OFMAP, access.tensor, 1)
            for access in op.writes:
                hold(g, main, Buffer.OFMAP, access.tensor, 1)
    resident = {}
    for s in streams:
        unit, buffer = where[s]
        if need[group_of[s.consumer], unit.name, buffer] <= _bytes(unit, buffer) // 2:
            resident[s.consumer, s.read] = buffer
    served = frozenset(
        (s.source, s.tensor.key)
        for s in streams
        if (s.consumer, s.read) in resident and where[s][1] is not Buffer.OFMAP
    )
    return TileReuse(resident, _unwritten(graph, streams, resident), served)


def _buffer(
    graph: OpGraph, s: TileStream, units: Mapping[str, ArrayUnit], main: ArrayUnit
) -> tuple[ArrayUnit, Buffer]:
    """The unit and buffer the tiles of stream ``s`` pass through (its source's)."""
    source = graph.ops[s.source]
    if not isinstance(source, GemmOp):
        return main, Buffer.OFMAP
    key = s.tensor.key
    buffer = (
        Buffer.OFMAP
        if source.c.key == key
        else Buffer.IFMAP
        if source.a.key == key
        else Buffer.FILTER
    )
    return units[source.unit], buffer


def _bytes(unit: ArrayUnit, buffer: Buffer) -> int:
    return {
        Buffer.IFMAP: unit.ifmap_bytes,
        Buffer.FILTER: unit.filter_bytes,
        Buffer.OFMAP: unit.ofmap_bytes,
    }[buffer]


def _unwritten(
    graph: OpGraph, streams: Sequence[TileStream], resident: Mapping[tuple[int, int], Buffer]
) -> frozenset[tuple[int, TensorKey]]:
    """``(producer, tensor key)`` of the writes every reader takes by a resident stream."""
    candidates = {
        (s.source, s.tensor.key)
        for s in streams
        if (s.consumer, s.read) in resident and s.tensor.kind not in LASTING
    }
    if not candidates:
        return frozenset()
    keys = {key for _, key in candidates}
    readers: dict[TensorKey, list[tuple[int, int]]] = {}
    for op in graph.ops:
        for j, access in enumerate(queries.reads_of(op)):
            if access.tensor.key in keys:
                readers.setdefault(access.tensor.key, []).append((op.op_id, j))
    saved = set()
    for source, key in candidates:
        found = readers.get(key, [])
        if found and all(
            (i, j) in resident
            and isinstance(graph.ops[i], VectorOp)
            and queries.tile_sources(graph.ops[i])[j] == source
            for i, j in found
        ):
            saved.add((source, key))
    return frozenset(saved)
