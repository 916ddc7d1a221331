"""Epilogue fusion (``lowering.fuse_epilogues``): element-wise vector ops take their
input tile by tile from the op producing it, so the tile is used before it leaves
the chip.

A training accelerator applies a GEMM's element-wise epilogue (bias, activation,
residual add) to each output tile while it is still in the accumulator, and a
compiler runs chains of element-wise ops as one loop.  This pass declares that as
tile streams (:class:`~accelsim.graph.ops.TileStream`); whether a tile fits on chip
is decided later (:mod:`accelsim.mapping.tile_reuse`), and each group of linked ops
runs as one fused op (:mod:`accelsim.timing.tile_groups`).  It never changes an
op's work (MACs and vector ops stay those of the unfused step), only where its data
lives and what overlaps.

Which ops, by their :class:`~accelsim.graph.ops.Epilogue` (set by the layer rules):

* ``elementwise``: activations (forward, and backward's derivative mask on the
  incoming gradient), residual adds and the sums of a branched tensor's gradients,
  dropout (both ways), and bias gradients (a sum per channel, in any tile order);
* ``all``: batchnorm too, forward and backward.  That needs its per-channel
  statistics before the first tile arrives: true with running statistics
  (inference-style normalisation, as frozen batchnorm does in fine-tuning), not with
  the current batch's (its mean and variance, and backward's two sums, need the
  whole tensor first), so for batch-statistics training ``all`` is a bound.

An op takes tiles from the producer of one of its inputs: the latest-made of them
(an activation or gradient its single producer, a GEMM or vector op on the same
processor, writes whole), so that its other inputs are complete, and only when it
can run in one op with that producer's group: everything else it waits for comes
before the group's first op (so a residual add fuses onto the later of its two
branches).  A chain fuses onto its first op: a GEMM, then batchnorm (with
``all``), the add, the activation.  The forward bias add has no op (its cost is not
modelled), so there is nothing of it to fuse.

**Compiled programs** (``lowering.compile: fused``, ``chains``): every vector op that
is not a batchnorm fuses as well, reductions along a row included (layernorm, softmax,
the loss, ``D`` of fused attention's backward), as an XLA-like compiler fuses a chain
of element-wise ops and row reductions into the kernel making their input: a tile
group of the producer's output holds whole rows (our assumption: the producer emits
its output a block of rows at a time).  So a chain of vector ops whose intermediates
only the chain reads runs as one kernel with its producer, reading its inputs once
and writing its outputs once (an intermediate another op reads is written, as the
tile reuse decides).  Batchnorm with the batch's statistics still needs the whole
tensor first; ``fuse_epilogues: all`` fuses it as before.
"""

from __future__ import annotations

import dataclasses

from typing_extensions import assert_never

from accelsim.config.enums import EpilogueFusion
from accelsim.graph import queries
from accelsim.graph.ops import (
    NO_TILES,
    Epilogue,
    GemmOp,
    Op,
    OpGraph,
    Tensor,
    TensorKind,
    VectorOp,
    replaced,
)

STREAMED_KINDS = (TensorKind.ACTIVATION, TensorKind.GRADIENT)
"""What an epilogue takes tiles of: what a GEMM or vector op makes in the step."""


def fused_kinds(mode: EpilogueFusion, chains: bool = False) -> frozenset[Epilogue]:
    """The epilogue kinds ``mode`` fuses, with every kind but batchnorm for
    ``chains`` (a compiled program)."""
    if chains:
        return fused_kinds(mode) | {Epilogue.ELEMENTWISE, Epilogue.NONE}
    match mode:
        case EpilogueFusion.NONE:
            return frozenset()
        case EpilogueFusion.ELEMENTWISE:
            return frozenset({Epilogue.ELEMENTWISE})
        case EpilogueFusion.ALL:
            return frozenset({Epilogue.ELEMENTWISE, Epilogue.BATCHNORM})
        case _:
            assert_never(mode)


def fuse_epilogues(graph: OpGraph, mode: EpilogueFusion, chains: bool = False) -> OpGraph:
    """``graph`` with the vector ops ``mode`` fuses (and with ``chains``, every chain
    of vector ops: a compiled program) taking their input's tiles on chip (``graph``
    itself when nothing fuses)."""
    kinds = fused_kinds(mode, chains)
    if not kinds:
        return graph
    ops = list(graph.ops)
    first: dict[int, int] = {}  # op -> the first op of its tile group
    for op in graph.ops:
        if not isinstance(op, VectorOp) or op.epilogue not in kinds or op.tile_sources:
            continue
        found = _source(graph, op)
        if found is None:
            continue
        read, source = found
        group = first.get(source, source)
        if any(first.get(d, d) > group for d in op.deps):
            continue  # it waits for an op after the group's first: not one op with it
        tiles = [NO_TILES] * len(op.reads)
        tiles[read] = source
        ops[op.op_id] = replaced(op, tile_sources=tuple(tiles))
        first[source] = first[op.op_id] = group
    if not first:
        return graph
    return dataclasses.replace(graph, ops=tuple(ops))


def _source(graph: OpGraph, op: VectorOp) -> tuple[int, int] | None:
    """``(read number, producer)`` of the input ``op`` would take tiles of: the
    latest-made of those a single GEMM or vector op on its processor writes whole."""
    best: tuple[int, int] | None = None
    for i, (access, producers) in enumerate(zip(op.reads, op.sources, strict=True)):
        t = access.tensor
        if len(producers) != 1 or t.kind not in STREAMED_KINDS or access.elements != t.elements:
            continue
        (p,) = producers
        elsewhere = graph.processor[p] != graph.processor[op.op_id]
        if elsewhere or not _writes_whole(graph.ops[p], t):
            continue
        if best is None or p > best[1]:
            best = (i, p)
    return best


def _writes_whole(op: Op, tensor: Tensor) -> bool:
    """Whether ``op`` is a GEMM or vector op writing all of ``tensor``."""
    if not isinstance(op, (GemmOp, VectorOp)):
        return False
    return any(
        a.tensor.key == tensor.key and a.elements == a.tensor.elements
        for a in queries.writes_of(op)
    )
