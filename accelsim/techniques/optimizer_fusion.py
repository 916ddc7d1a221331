"""Optimizer fusion (Jiang et al., "Optimizer Fusion: Efficient Training with Better
Locality and Parallelism", 2021, arXiv 2104.00237).

Eager training updates every parameter after the whole backward pass, reading
each weight, gradient and optimizer state back from DRAM, with the array idle.
Fusing the update into the backward or the forward pass reuses what is on chip
and overlaps the update (vector unit) with the GEMMs (array).  Modes:

* ``unfused``: today's eager step; the graph is unchanged.
* ``backward``: ``W_l`` is updated tile by tile right after its final ``dW_l``
  tile: the update takes the gradient's tiles as the ``dW`` GEMM emits them and the
  weight's tiles from the filter buffer the ``dX`` GEMM loaded them into (tile
  streams, declared by :func:`~accelsim.lowering.optimizer.add_updates`), so
  ``dX``, ``dW`` and the update run as one fused op and neither g nor a second read
  of W goes to DRAM when their tiles fit (:mod:`accelsim.mapping.tile_reuse`).
  With fp32 master weights the update reads the master from DRAM (the bf16 tile
  is not it).  Under data parallelism the gradient is final only after its
  all-reduce, which is no tile source: the update then reads W and g from DRAM.
* ``forward``: ``W_l`` is updated with the previous step's gradient just before
  its next forward pass, and that forward GEMM takes the updated weight's tiles
  as the update writes them, so ``W`` is read once for both.

Per parameter and step, with ``k`` optimizer-state tensors (SGD 0, momentum 1,
Adam 2), every tile on chip and one pass per GEMM, the DRAM accesses are (see
:func:`derived_accesses` and the table in docs/techniques/optimizer-fusion.md):
unfused ``W`` 4, ``g`` 2, state ``2k``; backward ``W`` 3, ``g`` 0, state ``2k``;
forward ``W`` 3, ``g`` 2, state ``2k`` (6 + 2k, 3 + 2k and 5 + 2k in all).
:func:`derived_traffic` counts a simulated step's by hand, with its GEMMs' passes and
the streams that stayed on chip, and the report sets it beside the simulated bytes
(:func:`parameter_dram_bytes`).

Backward fusion needs each gradient final on its own, so global-norm clipping
(all gradients first) and gradient accumulation over micro-batches forbid it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from enum import Enum
from typing import Annotated

from pydantic import Field

from accelsim.config.base import Spec
from accelsim.config.hardware import HardwareSpec
from accelsim.config.run import MasterWeights, OptimizerKind, OptimizerSpec
from accelsim.errors import Problem
from accelsim.graph import links, passes, queries
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import (
    CORE,
    GemmOp,
    Op,
    OpGraph,
    Parameter,
    Phase,
    Tensor,
    TensorKey,
    TensorKind,
    UpdateTiming,
    VectorOp,
)
from accelsim.lowering.optimizer import update_op
from accelsim.mapping.tile_reuse import tile_reuse
from accelsim.report.result import RunResult
from accelsim.report.training import Source
from accelsim.techniques.base import (
    LoadContext,
    RewritePhase,
    Section,
    SimulatedStep,
    Technique,
    TechniqueContext,
    TrainingPlan,
)
from accelsim.techniques.provenance import Origin, inputs
from accelsim.timing.costs import vector_dram_bytes


class FusionMode(str, Enum):
    UNFUSED = "unfused"
    FORWARD = "forward"
    BACKWARD = "backward"


DEFAULTS: dict[str, Origin] = {
    "mode": (
        Source.OURS,
        "our choice of the paper's two orders [S]: backward (forward is the other)",
    ),
    "weight_tiles": (
        Source.OURS,
        "our choice: the weight tile dX loaded serves the update (the audit's tile-fused"
        " count); dram is the other",
    ),
}
"""Where each setting's default comes from (``../shared/techniques.md`` section 6)."""


class WeightTiles(str, Enum):
    """Where a backward-fused update reads the weight from."""

    DX = "dx"  # the tiles the dX GEMM loaded: dX, dW and the update run as one op
    DRAM = "dram"  # DRAM: dX runs on its own, its consumers need not wait for dW


class OptimizerFusionConfig(Spec):
    """``techniques.optimizer_fusion`` in a run file."""

    mode: Annotated[FusionMode, Field(strict=False)] = Field(
        default=FusionMode.BACKWARD,
        description="unfused (updates after the whole backward pass), backward (each"
        " weight tile updated on chip right after its final dW tile) or forward (each"
        " update as the layer's next forward GEMM loads the weight, with the previous"
        " step's gradient).",
    )
    weight_tiles: Annotated[
        WeightTiles,
        Field(
            strict=False,
            description="backward mode: dx takes the weight's tiles from the dX GEMM's"
            " filter buffer (no second read of W; dX, dW and the update run as one op);"
            " dram reads W from DRAM (dX runs on its own, so its consumers overlap dW)",
        ),
    ] = WeightTiles.DX


@dataclasses.dataclass(frozen=True)
class Accesses:
    """DRAM accesses per parameter element and step, by tensor class."""

    weight: int
    gradient: int
    state: int

    def bytes_per_element(self, hw: HardwareSpec) -> int:
        words = hw.word_bytes
        return (
            self.weight * words.weights
            + self.gradient * words.gradients
            + self.state * words.optimizer_state
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
    k = optimizer.state_tensors + int(master)
    weight = forward_reads + dx_reads + (1 if master else 2)
    gradient = 2
    if mode is FusionMode.BACKWARD:
        weight -= min(dx_reads, 1) if weight_from_dx and not master else 0
        gradient = 0
    elif mode is FusionMode.FORWARD:
        weight -= min(forward_reads, 1)
    return Accesses(weight, gradient, 2 * k)


def ideal_bytes_per_parameter(
    graph: OpGraph,
    mode: FusionMode,
    optimizer: OptimizerSpec,
    hw: HardwareSpec,
    weight_tiles: WeightTiles = WeightTiles.DX,
) -> float:
    """DRAM bytes per parameter of a step of ``graph`` (a baseline step) in ``mode`` by
    :func:`derived_accesses`, from each weight's GEMM readers: every tile on chip,
    one pass per GEMM."""
    total = params = 0
    master = optimizer.master_weights is MasterWeights.FP32
    for p in graph.parameters:
        readers = [op for op in graph.ops if isinstance(op, GemmOp) and _reads(op, p.weight)]
        forward = sum(1 for op in readers if op.phase is Phase.FWD)
        dx = sum(1 for op in readers if op.phase is Phase.BWD_INPUT)
        shared = weight_tiles is WeightTiles.DX
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


MINE = (CORE, "optimizer_fusion")
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
        replicas: The data-parallel replicas the step updates (each its own copy).
    """

    dram_bytes: int
    weight_pass_bytes: int
    updated_elements: int
    gradient_in_dram: int
    weight_in_dram: int
    replicas: int


def derived_traffic(
    base: RunResult, step: RunResult, mode: FusionMode, optimizer: OptimizerSpec
) -> DerivedTraffic:
    """The parameters' DRAM bytes of ``step`` (``base`` fused in ``mode``), by hand.

    * GEMM passes over the weights: each GEMM reading a weight passes over it as many
      times as the same phase's GEMMs reading it pass in ``base`` (once, unless the
      weight is larger than half the filter buffer: then once per chunk of the
      streamed dimension, see :func:`~accelsim.timing.closed_form.dram_words`), less
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
                pass_bytes += access.bytes * passes.get((t.parameter, op.phase), 1.0)
                if (op.op_id, t.key) in resident:
                    pass_bytes -= access.bytes
    states = optimizer.kind.state_tensors + int(optimizer.master_weights is MasterWeights.FP32)
    clipped = optimizer.clip_global_norm is not None
    per_update = 0
    elements = gradient_in_dram = weight_in_dram = 0
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
        gradient_in_dram += 0 if g_on_chip else e
        elements += e
        w = 1 + (weight_read and not w_served)
        g = (0 if g_on_chip else 2) + clipped
        per_update += e * (w * words.weights + g * words.gradients)
        per_update += e * 2 * states * words.optimizer_state
    return DerivedTraffic(
        round(pass_bytes) + per_update,
        round(pass_bytes),
        elements,
        gradient_in_dram,
        weight_in_dram,
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


class OptimizerFusion(Technique):
    """Optimizer fusion as a plug-in: moves each update into the backward or forward pass."""

    name = "optimizer_fusion"
    Config = OptimizerFusionConfig
    rewrite_phase = RewritePhase.FUSE

    @property
    def settings(self) -> OptimizerFusionConfig:
        assert isinstance(self.config, OptimizerFusionConfig)
        return self.config

    def defaults(self) -> dict[str, Origin]:
        return DEFAULTS

    def validate(self, load: LoadContext) -> list[Problem]:
        mode = self.settings.mode
        problems = []
        clip = load.run.optimizer.clip_global_norm
        if mode is FusionMode.BACKWARD and clip is not None:
            problems.append(
                Problem(
                    self.source,
                    self.where("mode"),
                    "backward fusion updates each layer as its gradient is ready, but"
                    f" global-norm clipping (optimizer.clip_global_norm: {clip:g}) needs"
                    " every gradient first; use mode: forward",
                    mode.value,
                )
            )
        for other in load.techniques:
            micro = other.accumulated_micro_batches()
            if mode is FusionMode.BACKWARD and micro > 1:
                problems.append(
                    Problem(
                        self.source,
                        self.where("mode"),
                        f"backward fusion cannot update before {other.name} has summed the"
                        f" gradients of its {micro} micro-batches; use micro_batches: 1",
                        mode.value,
                    )
                )
            if mode is FusionMode.FORWARD and other.places():
                problems.append(
                    Problem(
                        self.source,
                        self.where("mode"),
                        f"forward fusion under the {other.name} schedule is not modelled"
                        " (the update would wait for an earlier mini-batch's gradient);"
                        " use mode: backward",
                        mode.value,
                    )
                )
        return problems

    def rewrite_graph(self, graph: OpGraph, kind: str, ctx: TechniqueContext) -> OpGraph:
        match self.settings.mode:
            case FusionMode.UNFUSED:
                return graph
            case FusionMode.BACKWARD:
                return backward_fused(graph, self.settings.weight_tiles)
            case FusionMode.FORWARD:
                return forward_fused(graph, ctx.hardware, ctx.run.optimizer)

    def training(
        self,
        ctx: TechniqueContext,
        base: RunResult,
        steps: Mapping[str, SimulatedStep],
        plan: TrainingPlan,
    ) -> Section:
        optimizer = ctx.run.optimizer
        mode = self.settings.mode
        exposed = exposed_update_cycles(base)
        share = exposed / max(base.total_cycles, 1)
        params = sum(p.update_elements for p in base.graph.parameters)
        ideal = {
            m.value: ideal_bytes_per_parameter(
                base.graph, m, optimizer, ctx.hardware, self.settings.weight_tiles
            )
            for m in FusionMode
        }
        by_kind = {}
        lines = [
            (
                "exposed update",
                f"{share * 100:.1f} % of the baseline step"
                f" ({mode.value} fusion, {optimizer.kind.value})",
            )
        ]
        for kind, step in steps.items():
            derived = derived_traffic(base, step.result, mode, optimizer)
            # a whole pipeline's graph holds several steps: per step, as its cost is;
            # each data-parallel replica updates its own copy: per replica
            per_step = step.cost.dram_bytes / max(step.result.dram_bytes, 1) / derived.replicas
            simulated = parameter_dram_bytes(step.result) * per_step
            updated = max(derived.updated_elements, 1)  # every replica's, mini-batch's
            in_dram = derived.gradient_in_dram / updated
            speedup = base.total_cycles / max(step.cost.cycles, 1)
            bound = base.total_cycles / max(step.cost.bound_cycles, 1)
            by_kind[kind] = {
                "cycles_saved_fraction": 1 - step.cost.cycles / base.total_cycles,
                "energy_saved_fraction": 1 - step.cost.energy_pj / base.energy.total_pj,
                "speedup": speedup,
                "speedup_bound": bound,
                "binding_bound": step.cost.binding_bound,
                "replicas": derived.replicas,
                "parameter_dram_bytes": simulated,
                "bytes_per_parameter": simulated / max(params, 1),
                "derived_parameter_dram_bytes": derived.dram_bytes * per_step,
                "derived_bytes_per_parameter": derived.dram_bytes * per_step / max(params, 1),
                "derived_weight_pass_bytes": derived.weight_pass_bytes * per_step,
                "gradient_in_dram_share": in_dram,
                "weight_in_dram_share": derived.weight_in_dram / updated,
            }
            at = "" if len(steps) == 1 else f" ({kind})"
            lines.append(
                (
                    f"fused step{at}",
                    f"{speedup:.3f} x the baseline step (at most {bound:.3f} x:"
                    f" {step.cost.binding_bound} bound)",
                )
            )
            lines.append(
                (
                    f"parameter traffic{at}",
                    f"{simulated / max(params, 1):.2f} B per parameter"
                    f"{' and replica' if derived.replicas > 1 else ''} simulated,"
                    f" {derived.dram_bytes * per_step / max(params, 1):.2f} derived"
                    f" (gradient through DRAM for {in_dram * 100:.1f} % of the updated"
                    " elements)",
                )
            )
        per = ", ".join(f"{m} {b:.1f}" for m, b in ideal.items())
        lines.append(
            ("ideal traffic", f"{per} B per parameter (every tile fits, one pass per GEMM)")
        )
        details = {
            "mode": mode.value,
            "weight_tiles": self.settings.weight_tiles.value,
            "optimizer": optimizer.kind.value,
            "master_weights": optimizer.master_weights.value,
            "parameters": params,
            "base_exposed_update_cycles": exposed,
            "base_exposed_update_share": share,
            "base_parameter_dram_bytes": parameter_dram_bytes(base),
            "ideal_bytes_per_parameter": ideal,
            "by_kind": by_kind,
        }
        notes = (
            "derived: the hand count per update element (W, g and states, less what"
            " resident tile streams serve) plus each GEMM's passes over its weight as in"
            " the baseline; a gradient made final by an all-reduce or a sum cannot be a"
            " tile source, so it goes through DRAM",
        )
        return Section(
            self.name,
            details,
            tuple(lines),
            notes,
            inputs=inputs(self.settings, self.defaults()),
        )


def backward_fused(graph: OpGraph, weight_tiles: WeightTiles = WeightTiles.DX) -> OpGraph:
    """Every trained parameter updated as soon as it can be: placement's
    :func:`~accelsim.lowering.optimizer.add_updates` runs each update right after its
    final ``dW`` tile, taking the gradient's tiles on chip, and the weight's from
    ``dX`` with ``weight_tiles: dx``."""
    shares = weight_tiles is WeightTiles.DX
    parameters = tuple(
        dataclasses.replace(p, update=UpdateTiming.BACKWARD, shares_weight_tiles=shares)
        if p.grad_op >= 0
        else p
        for p in graph.parameters
    )
    return dataclasses.replace(graph, parameters=parameters)


def forward_fused(graph: OpGraph, hw: HardwareSpec, optimizer: OptimizerSpec) -> OpGraph:
    """Every trained parameter updated just before its layer's first forward read of it
    (or its layer's first forward op, for a parameter no forward op reads); a forward
    GEMM reading the weight takes its tiles from the update as it writes them (the
    weight read shared by both), so the two run as one op."""
    trained = {p.weight.key: p for p in graph.parameters if p.grad_op >= 0}
    first_forward: dict[str, int] = {}
    for op in graph.ops:
        if queries.forward_work(op):
            first_forward.setdefault(op.layer, op.op_id)
    first_read: dict[int, list[Parameter]] = {}
    for key, p in trained.items():
        forward = [
            op.op_id
            for op in graph.ops
            if queries.forward_work(op) and any(a.tensor.key == key for a in queries.reads_of(op))
        ]
        at = forward[0] if forward else first_forward.get(p.layer)
        if at is not None:
            first_read.setdefault(at, []).append(p)
    for at, params in first_read.items():
        # the updates whose weight the op reads last, so the op and they run as one op
        read = {a.tensor.key for a in queries.reads_of(graph.ops[at])}
        params.sort(key=lambda p: p.weight.key in read)
    updates: dict[TensorKey, int] = {}

    def emit(builder: GraphBuilder, op: Op) -> None:
        for p in first_read.get(op.op_id, []):
            clipped = optimizer.clip_global_norm is not None
            updates[p.weight.key] = update_op(builder, p, optimizer, (), clipped=clipped)[0]

    rewritten, ids = passes.rewrite(
        graph, hw.word_bytes, emit_before=emit, owner=OptimizerFusion.name
    )
    waits: dict[int, list[int]] = {}
    taken: list[links.Redirect] = []  # a forward GEMM takes the weight's tiles from its update
    for old, params in first_read.items():
        (at,) = ids[old]
        waits[at] = [updates[p.weight.key] for p in params]
        if isinstance(graph.ops[old], GemmOp):
            read = {a.tensor.key for a in queries.reads_of(graph.ops[old])}
            taken += [
                links.Redirect(at, p.weight.key, updates[p.weight.key], tiles=True)
                for p in params
                if p.weight.key in read
            ]
    fused = links.redirect(links.wait_for(rewritten, waits), taken)
    parameters = tuple(
        dataclasses.replace(p, update=UpdateTiming.FORWARD) if p.weight.key in updates else p
        for p in fused.parameters
    )
    return dataclasses.replace(fused, parameters=parameters)
