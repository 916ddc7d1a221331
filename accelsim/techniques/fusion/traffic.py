"""The parameters' DRAM traffic of a step: derived by hand per fusion mode, and as the
simulated step's costs count it.

Per parameter and step, with ``k`` optimizer-state tensors (SGD 0, momentum 1,
Adam 2), every tile on chip and one pass per GEMM, the DRAM accesses are (see
:func:`derived_accesses` and the table in docs/techniques/optimizer-fusion.md):
unfused ``W`` 4, ``g`` 2, state ``2k``; backward ``W`` 3, ``g`` 0, state ``2k``;
forward ``W`` 3, ``g`` 2, state ``2k`` (6 + 2k, 3 + 2k and 5 + 2k in all).
:func:`derived_traffic` counts a simulated step's by hand, with its GEMMs' passes and
the streams that stayed on chip, and the report sets it beside the simulated bytes
(:func:`parameter_dram_bytes`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

from accelsim.config.hardware import HardwareSpec
from accelsim.config.run import MasterWeights, OptimizerKind, OptimizerSpec
from accelsim.graph import queries
from accelsim.graph.ops import CORE, GemmOp, OpGraph, Phase, Tensor, TensorKind, VectorOp
from accelsim.mapping.tile_reuse import tile_reuse
from accelsim.report.result import RunResult
from accelsim.techniques.fusion.config import NAME, FusionMode
from accelsim.techniques.fusion.loop_order import spill_bytes
from accelsim.timing.costs import vector_dram_bytes


@dataclasses.dataclass(frozen=True)
class Accesses:
    """DRAM accesses per parameter element and step, by tensor class."""

    weight: int
    gradient: int
    state: int
    master: int = 0

    def bytes_per_element(self, hw: HardwareSpec) -> int:
        words = hw.word_bytes
        return (
            self.weight * words.weights
            + self.gradient * words.gradients
            + self.state * words.optimizer_state
            + self.master * MasterWeights.FP32.word_bytes
        )


def derived_accesses(
    mode: FusionMode,
    optimizer: OptimizerKind,
    forward_reads: int = 1,
    dx_reads: int = 1,
    master: bool = False,
    weight_from_dx: bool = True,
) -> Accesses:
    """DRAM accesses per element of a parameter and step when every tile stays on chip
    and every GEMM passes once over the weight.

    ``forward_reads`` and ``dx_reads`` are the GEMMs reading the weight in the
    forward pass and in ``dX`` (1 and 1 for a layer's weight matrix; no ``dX``
    for the first layer; 0 and 0 for a bias).  Unfused: those reads, and the
    update reads W, g and the states and writes W and the states; ``dW`` writes
    g.  Backward fusion takes g's tiles as ``dW`` makes them (no write, no read)
    and W's from the ``dX`` GEMM's filter buffer; forward fusion serves the forward
    GEMM's read of W from the update's tiles.  With fp32 ``master`` weights the
    update reads and writes the master (a state) instead of reading W, so backward
    fusion has no W read to serve; nor has it with ``weight_from_dx`` false
    (``weight_tiles: dram``).
    """
    k = optimizer.state_tensors
    weight = forward_reads + dx_reads + (1 if master else 2)
    gradient = 2
    if mode is FusionMode.BACKWARD:
        weight -= min(dx_reads, 1) if weight_from_dx and not master else 0
        gradient = 0
    elif mode is FusionMode.FORWARD:
        weight -= min(forward_reads, 1)
    return Accesses(weight, gradient, 2 * k, 2 * int(master))


def ideal_bytes_per_parameter(
    graph: OpGraph,
    mode: FusionMode,
    optimizer: OptimizerSpec,
    hw: HardwareSpec,
    dx_first: Collection[str] = (),
) -> float:
    """DRAM bytes per parameter of a step of ``graph`` (a baseline step) in ``mode`` by
    :func:`derived_accesses`, from each weight's GEMM readers: every tile on chip,
    one pass per GEMM; the weights named in ``dx_first`` backward-fused without
    taking the weight's tiles from ``dX``."""
    total = params = 0
    master = optimizer.master_weights is MasterWeights.FP32
    for p in graph.parameters:
        readers = [op for op in graph.ops if isinstance(op, GemmOp) and _reads(op, p.weight)]
        forward = sum(1 for op in readers if op.phase is Phase.FWD)
        dx = sum(1 for op in readers if op.phase is Phase.BWD_INPUT)
        shared = p.weight.name not in dx_first
        accesses = derived_accesses(mode, optimizer.kind, forward, dx, master, shared)
        total += p.update_elements * accesses.bytes_per_element(hw)
        params += p.update_elements
    return total / max(params, 1)


def _reads(op: GemmOp, t: Tensor) -> bool:
    return t.key in (op.a.key, op.b.key)


def _counted(graph: OpGraph, t: Tensor) -> bool:
    """Whether ``t`` is the parameters' DRAM traffic: a weight, gradient or state of
    one (``Tensor.parameter``), or the optimizer's other state (the clipping norm)."""
    if t.key in graph.on_chip:
        return False
    return bool(t.parameter) or t.kind is TensorKind.OPTIMIZER_STATE


MINE = (CORE, NAME)
"""The owners of the ops whose traffic counts: the step's own and this technique's
(a gradient predictor's weights, a skipping monitor's state do not count)."""


def parameter_dram_bytes(result: RunResult) -> int:
    """The DRAM bytes of one simulated step spent on the parameters: their weights,
    gradients and optimizer states (``Tensor.parameter``, and the optimizer's other
    state such as the clipping norm), without activations and activation gradients,
    as the step's costs count them: each GEMM operand's DRAM bytes, and each vector
    op's per access (:func:`~accelsim.timing.costs.vector_dram_bytes`, which the
    costs sum).  Replicas and pipeline copies count alike; the ops of other
    techniques do not."""
    graph, costs = result.graph, result.trace.costs
    reuse = tile_reuse(graph, costs.arrays)
    total = 0
    for op in graph.ops:
        i = op.op_id
        if op.owner not in MINE:
            continue
        if isinstance(op, GemmOp):
            operands = (
                (op.a, costs.dram_ifmap_read_bytes[i]),
                (op.b, costs.dram_filter_read_bytes[i]),
                (op.c, costs.dram_ofmap_read_bytes[i] + costs.dram_ofmap_write_bytes[i]),
            )
            total += sum(int(b) for t, b in operands if t.parameter)
        elif isinstance(op, VectorOp):
            reads, writes = vector_dram_bytes(op, graph.on_chip, reuse)
            accesses = zip((*op.reads, *op.writes), (*reads, *writes), strict=True)
            total += sum(b for a, b in accesses if _counted(graph, a.tensor))
    return total


@dataclasses.dataclass(frozen=True)
class DerivedTraffic:
    """The parameters' DRAM bytes of a step, derived by hand from its structure.

    Attributes:
        dram_bytes: The total (compare :func:`parameter_dram_bytes`).
        weight_pass_bytes: Of which the GEMMs' passes over the weights.
        updated_elements: Elements the step's updates update (every replica's).
        gradient_in_dram: Of those, the elements whose gradient goes through DRAM
            (no tile stream: an all-reduce or a sum made it final, or the update
            takes part of it; or the stream's tiles do not fit on chip).
        weight_in_dram: The elements whose update reads the weight from DRAM
            although the mode could serve it (no ``dX`` GEMM to take it from, the
            tiles do not fit); fp32 masters are not counted (there is no read).
        weight_served: The elements whose update takes the weight's tiles from the
            ``dX`` GEMM that loaded them (no read of W).
        replicas: The data-parallel replicas the step updates (each its own copy).
    """

    dram_bytes: int
    weight_pass_bytes: int
    updated_elements: int
    gradient_in_dram: int
    weight_in_dram: int
    weight_served: int
    replicas: int


def derived_traffic(
    base: RunResult, step: RunResult, mode: FusionMode, optimizer: OptimizerSpec
) -> DerivedTraffic:
    """The parameters' DRAM bytes of ``step`` (``base`` fused in ``mode``), by hand.

    * GEMM passes over the weights: each GEMM reading a weight passes over it as many
      times as the same phase's GEMMs reading it pass in ``base`` (once, unless the
      weight is larger than half the filter buffer: then once per chunk of the
      streamed dimension, see :func:`~accelsim.timing.closed_form.dram_words`), or
      once where the update takes the weight's tiles from a ``dX`` GEMM whose partial
      sums that order spills (:func:`~accelsim.techniques.fusion.loop_order.spill_bytes`:
      each tile loaded once, the rows not chunked), less
      the first pass of every forward GEMM a resident tile stream serves from the
      update (forward fusion);
    * per element of every update: the weight's write, and its read unless there is
      an fp32 master (which it reads instead) or a resident stream from ``dX`` serves
      it; the gradient's write by the op making it and its read by the update, unless
      a resident stream takes it as it is made; one more gradient read under
      global-norm clipping (the norm's pass); a read and a write of every state.

    Which streams are resident is the one thing taken from the step's tile reuse
    (:mod:`accelsim.mapping.tile_reuse`: two tiles must fit half a buffer).
    """
    words = step.hardware.word_bytes
    passes = _passes(base)
    graph = step.graph
    units = {u.name: u for u in step.trace.costs.arrays}
    reuse = tile_reuse(graph, step.trace.costs.arrays)
    resident = {
        (s.consumer, s.tensor.key): s.source
        for s in queries.tile_streams(graph)
        if reuse.takes(s.consumer, s.read) is not None
    }
    pass_bytes = 0.0
    for op in graph.ops:
        if op.owner not in MINE or not isinstance(op, GemmOp):
            continue
        for access in queries.reads_of(op):
            t = access.tensor
            if t.kind is TensorKind.WEIGHT and t.parameter and t.key not in graph.on_chip:
                once = (op.op_id, t.key) in reuse.served
                once = once and spill_bytes(op, t.key, units[op.unit]) > 0
                over = 1.0 if once else passes.get((t.parameter, op.phase), 1.0)
                pass_bytes += access.bytes * over
                if (op.op_id, t.key) in resident:
                    pass_bytes -= access.bytes
    states, master = optimizer.kind.state_tensors, optimizer.master_weights.word_bytes
    clipped = optimizer.clip_global_norm is not None
    per_update = 0
    elements = gradient_in_dram = weight_in_dram = weight_served = 0
    replicas = set()
    for op in graph.ops:
        if not (op.owner in MINE and isinstance(op, VectorOp) and op.phase is Phase.UPDATE):
            continue
        weights = [a.tensor for a in op.writes if a.tensor.kind is TensorKind.WEIGHT]
        if not weights:
            continue  # the clipping norm, a monitor
        replicas.add(op.tag.replica)
        e = op.elements
        gradient = next(a.tensor for a in op.reads if a.tensor.kind is TensorKind.GRADIENT)
        weight_read = any(a.tensor.kind is TensorKind.WEIGHT for a in op.reads)
        g_on_chip = (op.op_id, gradient.key) in resident
        w_served = weight_read and (op.op_id, weights[0].key) in resident
        if weight_read and mode is FusionMode.BACKWARD and not w_served:
            weight_in_dram += e
        weight_served += e if w_served else 0
        gradient_in_dram += 0 if g_on_chip else e
        elements += e
        w = 1 + (weight_read and not w_served)
        g = (0 if g_on_chip else 2) + clipped
        per_update += e * (w * words.weights + g * words.gradients)
        per_update += e * 2 * (states * words.optimizer_state + master)
    return DerivedTraffic(
        round(pass_bytes) + per_update,
        round(pass_bytes),
        elements,
        gradient_in_dram,
        weight_in_dram,
        weight_served,
        max(len(replicas), 1),
    )


def _passes(base: RunResult) -> dict[tuple[str, Phase], float]:
    """Per (parameter, phase): the passes ``base``'s GEMMs make over its weight (DRAM
    bytes over the bytes they read)."""
    costs = base.trace.costs
    moved: dict[tuple[str, Phase], list[int]] = {}
    for op in base.graph.ops:
        if not isinstance(op, GemmOp):
            continue
        i = op.op_id
        operands = (
            (op.a, costs.dram_ifmap_read_bytes[i], op.a_elements),
            (op.b, costs.dram_filter_read_bytes[i], op.b_elements),
        )
        for t, dram, unique in operands:
            if t.kind is TensorKind.WEIGHT and t.parameter and t.key not in base.graph.on_chip:
                key = (t.parameter, op.phase)
                found = moved.setdefault(key, [0, 0])
                found[0] += int(dram)
                found[1] += unique * op.count * t.word_bytes
    return {key: dram / max(read, 1) for key, (dram, read) in moved.items()}


def exposed_update_cycles(result: RunResult) -> int:
    """Cycles from the end of the last non-update op to the end of the step: the part of
    the step that only updates run in."""
    trace = result.trace
    others = [
        int(trace.end_cycle[op.op_id]) for op in result.graph.ops if op.phase is not Phase.UPDATE
    ]
    return int(result.total_cycles) - max(others, default=0)
