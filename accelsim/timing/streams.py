"""The stream of every DRAM transfer: what it moves, from the ops' typed fields.

An op's DRAM traffic is a few transfers (its prologue and fetches read, its
drains and epilogue write), each carrying several operands' bytes at once, so a
transfer's stream is that of its op's reads or of its writes, classified by
what the op is and what it moves, never by names:

* a collective moves the class of its buffer's kind (a gradient all-reduce, gradients:
  :attr:`StreamClass.GRADIENT`);
* an op of the update phase (an optimizer update, a clipping pass, a
  convergence monitor run with the update) is the optimizer stream
  (:attr:`StreamClass.OPTIMIZER`);
* an auxiliary op a technique adds (its ``owner``, in whatever stage) is the
  technique stream (:attr:`StreamClass.TECHNIQUE`): the core names no technique;
* any other op's reads are the class of the operand it reads most bytes of from
  DRAM, and its writes the class of what it writes (of its largest output for
  a vector op): the tensor's kind (activation, weight, gradient, optimizer
  state), or :attr:`StreamClass.STASH` for an activation saved for backward,
  written in the forward stage or read back in the backward stage.

:data:`PRIORITY` gives each class its priority: the optimizer stream is
background (it yields where the memory's arbitration says so, see
:mod:`accelsim.timing.memory`), the rest foreground: the step's own ops wait for
them (a technique's auxiliary work feeds the ops after it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from accelsim.graph.memo import per_graph
from accelsim.graph.ops import (
    CORE,
    CommOp,
    GemmOp,
    OpGraph,
    Phase,
    Stage,
    Tensor,
    TensorKind,
    TransferOp,
    VectorOp,
)
from accelsim.timing.costs import OpCosts
from accelsim.timing.memory import BACKGROUND, FOREGROUND, Stream, StreamClass

PRIORITY: dict[StreamClass, int] = {kind: FOREGROUND for kind in StreamClass} | {
    StreamClass.OPTIMIZER: BACKGROUND
}
"""Each stream class's priority."""

STREAMS: tuple[Stream, ...] = tuple(Stream(kind, PRIORITY[kind]) for kind in StreamClass)
"""The stream of each class, indexed by class."""
WRITE_STREAMS: tuple[Stream, ...] = tuple(
    Stream(kind, PRIORITY[kind], write=True) for kind in StreamClass
)
"""The stream of each class's writes (booked at the memory's write bandwidth)."""

Streams = tuple[np.ndarray, np.ndarray]
"""The stream class of each op's DRAM reads and of its DRAM writes (int64 arrays of
:class:`StreamClass` values), as :func:`op_streams` gives them."""

STREAM_PRIORITY = np.asarray([PRIORITY[kind] for kind in StreamClass], np.int64)
""":data:`PRIORITY` as an array indexed by class, for the compiled engine."""

_KIND = {
    TensorKind.ACTIVATION: StreamClass.ACTIVATION,
    TensorKind.WEIGHT: StreamClass.WEIGHT,
    TensorKind.GRADIENT: StreamClass.GRADIENT,
    TensorKind.OPTIMIZER_STATE: StreamClass.OPTIMIZER,
}


def op_streams(graph: OpGraph, costs: OpCosts) -> Streams:
    """The stream class of each op's DRAM reads and of its DRAM writes (int64 arrays
    of :class:`StreamClass` values).  Every class but a GEMM's reads follows from the
    graph alone (worked out once per graph); a GEMM reads the class of the operand
    with the most DRAM bytes in ``costs``, the first of ties."""
    fixed = per_graph(graph, "op streams", lambda: _GraphStreams.of(graph))
    reads = fixed.reads.copy()
    if fixed.gemms.size:
        moved = np.stack(
            [
                costs.dram_ifmap_read_bytes[fixed.gemms],
                costs.dram_filter_read_bytes[fixed.gemms],
                costs.dram_ofmap_read_bytes[fixed.gemms],
            ],
            axis=1,
        )
        most = np.argmax(moved, axis=1)  # the first of ties
        reads[fixed.gemms] = fixed.operands[np.arange(fixed.gemms.size), most]
    return reads, fixed.writes.copy()


@dataclass(frozen=True)
class _GraphStreams:
    """What :func:`op_streams` takes from the graph alone: each op's read and write
    class (a GEMM's reads left to its costs), the GEMMs whose reads the costs choose
    and, for each, the class of reading its ``a``, ``b`` and ``c`` operands."""

    reads: np.ndarray
    writes: np.ndarray
    gemms: np.ndarray
    operands: np.ndarray

    @staticmethod
    def of(graph: OpGraph) -> _GraphStreams:
        n_ops = len(graph.ops)
        reads = np.zeros(n_ops, np.int64)
        writes = np.zeros(n_ops, np.int64)
        gemms: list[int] = []
        operands: list[tuple[StreamClass, ...]] = []
        stashed, on_chip = graph.stashed, graph.on_chip

        def kind_of(tensor: Tensor, stage: Stage, read: bool) -> StreamClass:
            saved = stage is (Stage.BACKWARD if read else Stage.FORWARD)
            if saved and tensor.key in stashed:
                return StreamClass.STASH
            return _KIND[tensor.kind]

        for op in graph.ops:
            i, stage = op.op_id, op.stage
            if isinstance(op, CommOp):  # its buffer's kind: a gradient all-reduce's, gradients
                reads[i] = writes[i] = _KIND[op.tensor.kind]
            elif isinstance(op, TransferOp):
                continue  # links only
            elif op.phase is Phase.UPDATE:
                reads[i] = writes[i] = StreamClass.OPTIMIZER
            elif op.phase is Phase.AUX and op.owner != CORE:
                reads[i] = writes[i] = StreamClass.TECHNIQUE
            elif isinstance(op, GemmOp):
                gemms.append(i)
                operands.append(tuple(kind_of(t, stage, read=True) for t in (op.a, op.b, op.c)))
                writes[i] = kind_of(op.c, stage, read=False)
            elif isinstance(op, VectorOp):
                for accesses, out, read in ((op.reads, reads, True), (op.writes, writes, False)):
                    moved = [a for a in accesses if a.tensor.key not in on_chip]
                    if moved:
                        most = max(moved, key=lambda access: access.bytes).tensor
                        out[i] = kind_of(most, stage, read)
        return _GraphStreams(
            reads,
            writes,
            np.asarray(gemms, np.int64),
            np.asarray(operands, np.int64).reshape(len(gemms), 3),
        )


def group_stream(classes: np.ndarray, moved: np.ndarray, members: Sequence[int]) -> int:
    """The stream class of a fused op's transfers (a tile group run as one op,
    :mod:`accelsim.timing.tile_groups`), which carry its ``members``' bytes at once:
    the class (``classes[i]``) of the member moving the most bytes (``moved[i]``),
    a foreground member's before any background one's (the group's foreground ops
    wait for the transfer), the first of ties."""
    best = min(members, key=lambda i: (PRIORITY[StreamClass(int(classes[i]))], -moved[i], i))
    return int(classes[best])
