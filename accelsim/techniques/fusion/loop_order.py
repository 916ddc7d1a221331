"""The loop order of each backward-fused layer: whether its update takes the weight's
tiles from the ``dX`` GEMM (``dX``, ``dW`` and the update one op) or ``dX`` runs first
and the update reads the weight from DRAM.

Taking the weight's tiles from ``dX`` saves a read of W (2 B per parameter), and, as
the three run as one op tile by tile, ``dW``'s DRAM traffic overlaps ``dX``'s
compute.  But it binds ``dX`` to the group: its output leaves with the group, so the
work waiting for it (the ops reading ``dX``'s output, and the vector ops reading
theirs, up to the next GEMM: the activation mask, batchnorm backward) cannot overlap
``dW`` as it does unfused.  And the order that keeps a weight tile on chip until its
``dW`` tile is final loads each weight tile once and passes over all of ``dX``'s rows
per tile: the unfused ``dX`` GEMM takes its rows in chunks whose partial sums fit half
the ofmap buffer, re-loading the weight per chunk when it does not fit half the filter
buffer; sharing the tiles cannot, so ``dX``'s partial sums that do not fit half the
ofmap buffer, column block by column block, go out to DRAM after every pass over the
reduction dimension but the last and come back for the next
(:func:`~accelsim.timing.closed_form.spilled_words`, which the simulation charges).

Estimates, from the step graph and the hardware alone (a GEMM's compute at one MAC per
processing element and cycle, bytes at the DRAM memory's bound, vector work at the
unit's lanes):

* what waiting costs: the waiting work's time, the more of its vector cycles and its
  DRAM bytes' cycles;
* what sharing costs besides: the spill's bytes, half written, half read back;
* what sharing gains: the weight's read, plus the overlap of ``dW``'s bytes with
  ``dX``'s compute (the less of the two).

A layer shares the weight's tiles (``TILE_SHARED``) when waiting and spilling cost no
more than sharing gains; otherwise ``dX`` runs first (``DX_FIRST``), as a compiler
choosing per layer would.  ``weight_tiles: dx`` and ``dram`` force one order on every
layer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from enum import Enum

import numpy as np

from accelsim.config.base import Convention, Dataflow
from accelsim.config.enums import PsumPolicy
from accelsim.config.run import TimingSpec
from accelsim.graph import queries
from accelsim.graph.ops import GemmOp, Op, OpGraph, Phase, TensorKey, VectorOp
from accelsim.mapping.dataflow import array_dims
from accelsim.mapping.units import ArrayUnit, main_array
from accelsim.techniques.fusion.config import WeightTiles
from accelsim.timing.closed_form import spilled_words
from accelsim.timing.machine import Machine
from accelsim.timing.memory import Memory, traffic_bound


class LoopOrder(str, Enum):
    """How a backward-fused layer's ``dX``, ``dW`` and update are ordered."""

    TILE_SHARED = "tile_shared"  # the update takes W's tiles from dX: one op
    DX_FIRST = "dx_first"  # dX on its own first; the update reads W from DRAM
    NO_DX = "no_dx"  # no dX GEMM reads the weight (a first layer, a bias)


@dataclasses.dataclass(frozen=True)
class LayerOrder:
    """One parameter's loop order and the estimates that chose it (0 with no ``dX``).

    Attributes:
        order: The order.
        spill_bytes: The DRAM bytes of ``dX``'s partial sums that leave the ofmap
            buffer and come back under ``order`` (written and read alike; 0 unless
            the order shares the weight's tiles and they spill).
        waiting_cycles: What the work waiting for ``dX``'s output takes.
        sharing_gain_cycles: What taking the weight's tiles from ``dX`` saves.
        spill_forced: Whether sharing the tiles would spill ``dX``'s partial sums.
    """

    order: LoopOrder
    spill_bytes: int
    waiting_cycles: float
    sharing_gain_cycles: float
    spill_forced: bool


def loop_orders(
    graph: OpGraph, machine: Machine, weight_tiles: WeightTiles, timing: TimingSpec
) -> dict[str, LayerOrder]:
    """Per trained parameter (by weight name), its loop order under ``weight_tiles``
    (``timing``: the run's, whose partial-sum policy and convention say whether a
    spill is charged)."""
    hw = machine.hardware
    array = main_array(hw)
    memory = machine.dram[0]
    charged = timing.psums is PsumPolicy.CHUNK and timing.convention is Convention.ACCELSIM
    orders: dict[str, LayerOrder] = {}
    last_reader: dict[TensorKey, Op] = {}  # of each tensor, but updates
    readers: dict[int, list[int]] = {}  # of each op's output
    for op in graph.ops:
        if op.phase is not Phase.UPDATE:
            last_reader.update((a.tensor.key, op) for a in queries.reads_of(op))
        for source in {s for sources in op.sources for s in sources}:
            readers.setdefault(source, []).append(op.op_id)
    for p in graph.parameters:
        if p.grad_op < 0:
            continue
        dx = last_reader.get(p.weight.key)
        dw = graph.ops[p.grad_op]
        if not (isinstance(dx, GemmOp) and dx.phase is Phase.BWD_INPUT):
            orders[p.weight.name] = LayerOrder(LoopOrder.NO_DX, 0, 0.0, 0.0, False)
            continue
        vector, moved = _waiting_work(graph, readers, dx, hw.vector_unit.lanes)
        waiting = max(vector, traffic_bound(memory, moved, 0.0))
        overlap = min(dx.macs / (hw.array.rows * hw.array.cols), _gemm_cycles(dw, memory))
        gain = traffic_bound(memory, p.weight.bytes, 0.0) + overlap
        spill = spill_bytes(dx, p.weight.key, array) if charged else 0
        match weight_tiles:
            case WeightTiles.DX:
                shared = True
            case WeightTiles.DRAM:
                shared = False
            case WeightTiles.AUTO:
                shared = waiting + traffic_bound(memory, spill, spill / 2) <= gain
        order = LoopOrder.TILE_SHARED if shared else LoopOrder.DX_FIRST
        orders[p.weight.name] = LayerOrder(order, spill if shared else 0, waiting, gain, spill > 0)
    return orders


def spill_bytes(dx: GemmOp, weight: TensorKey, unit: ArrayUnit) -> int:
    """The DRAM bytes of ``dX``'s partial sums, written and read back, when it shares the
    tiles of the weight ``weight`` on the array ``unit``: where the weight is the
    stationary operand and does not fit half its buffer, each of its tiles is loaded
    once and all of the streamed dimension passes it, so per column block the partial
    sums beyond half the ofmap buffer leave after every row fold but the last and come
    back for the next (as :func:`~accelsim.timing.closed_form.dram_words` charges a GEMM
    whose stationary operand a resident tile stream takes)."""
    dataflow = unit.array.dataflow
    if dataflow is Dataflow.WS and dx.b.key == weight:
        fits = dx.b_elements * dx.b.word_bytes <= unit.filter_bytes // 2
    elif dataflow is Dataflow.IS and dx.a.key == weight:
        fits = dx.a_elements * dx.a.word_bytes <= unit.ifmap_bytes // 2
    else:
        return 0  # output stationary keeps its partial sums; a streamed weight
    if fits:
        return 0
    sr, sc, t = array_dims(dataflow, dx.m, dx.n, dx.k, unit.array.k_per_pe)
    cap = unit.ofmap_bytes // 2 // dx.c.word_bytes
    words = spilled_words(np.array([t]), np.array([sc]), unit.array.cols, np.array([cap]))
    passes = -(-sr // unit.array.rows)
    return 2 * (passes - 1) * int(words[0]) * dx.c.word_bytes * dx.count


def _gemm_cycles(op: Op, memory: Memory) -> float:
    """The DRAM cycles of a GEMM's operands and output, read and written once (0 for
    an op that is no GEMM)."""
    if not isinstance(op, GemmOp):
        return 0.0
    moved = op.a_elements * op.a.word_bytes + op.b_elements * op.b.word_bytes + op.c.bytes
    return traffic_bound(memory, moved, 0.0)


def _waiting_work(
    graph: OpGraph, readers: Mapping[int, list[int]], dx: GemmOp, lanes: int
) -> tuple[int, int]:
    """The vector cycles and the bytes of the ops that read ``dX``'s output
    (``readers``: of each op's output), and of the vector ops reading theirs, up to the
    next GEMM; updates are not counted (the report reads a placed graph, the rewrite
    one without them)."""
    seen: set[int] = set()
    todo = [dx.op_id]
    cycles = moved = 0
    while todo:
        for r in readers.get(todo.pop(), []):
            op = graph.ops[r]
            if r in seen or not isinstance(op, VectorOp) or op.phase is Phase.UPDATE:
                continue
            seen.add(r)
            cycles += -(-op.elements * op.ops_per_element // lanes)
            moved += sum(a.bytes for a in (*op.reads, *op.writes))
            todo.append(r)
    return cycles, moved
