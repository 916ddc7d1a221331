"""Optimizer fusion (Jiang et al., "Optimizer Fusion: Efficient Training with Better
Locality and Parallelism", 2021, arXiv 2104.00237).

Eager training updates every parameter after the whole backward pass, reading
each weight, gradient and optimizer state back from DRAM, with the array idle.
Fusing the update into the backward or the forward pass reuses what is on chip
and overlaps the update (vector unit) with the GEMMs (array).  Modes:

* ``unfused``: today's eager step; the graph is unchanged.
* ``backward``: ``W_l`` is updated as soon as ``dW_l`` is final (after its
  all-reduce under data parallelism) and the ops reading the old ``W_l`` (its
  ``dX``) have read it; the update overlaps the rest of the backward pass.  The
  gradient stays in the ofmap buffer where ``dW_l`` accumulated it when it fits,
  so its write and read-back vanish, and the update reads ``W_l`` from the
  filter buffer the ``dX`` GEMM loaded it into, when it fits there beside the
  ``dW`` GEMM's filter operand (:mod:`accelsim.mapping.residency`).
* ``forward``: ``W_l`` is updated with the previous step's gradient just before
  its next forward pass, and that forward GEMM reads the updated weight from the
  filter buffer when it fits, so ``W`` is read once for both.

Per parameter and step, with ``k`` optimizer-state tensors (SGD 0, momentum 1,
Adam 2) and everything fitting on chip, the DRAM accesses are (see
:func:`derived_accesses` and the README's table): unfused ``W`` 4, ``g`` 2,
state ``2k``; backward ``W`` 3, ``g`` 0, state ``2k``; forward ``W`` 3, ``g`` 2,
state ``2k`` (6 + 2k, 3 + 2k and 5 + 2k in all).

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
from accelsim.graph import passes, queries
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import (
    CORE,
    Access,
    GemmOp,
    Op,
    OpGraph,
    Parameter,
    Phase,
    Tensor,
    TensorKind,
    UpdateTiming,
    VectorOp,
)
from accelsim.lowering.optimizer import buffered, update_op
from accelsim.mapping.residency import gradient_stays, weight_stays
from accelsim.mapping.units import main_array
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


class FusionMode(str, Enum):
    UNFUSED = "unfused"
    FORWARD = "forward"
    BACKWARD = "backward"


DEFAULTS: dict[str, Origin] = {
    "mode": (
        Source.OURS,
        "our choice of the paper's two orders [S]: backward (forward is the other)",
    ),
}
"""Where each setting's default comes from (``../shared/techniques.md`` section 6)."""


class OptimizerFusionConfig(Spec):
    """``techniques.optimizer_fusion`` in a run file."""

    mode: Annotated[FusionMode, Field(strict=False)] = FusionMode.BACKWARD


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
) -> Accesses:
    """DRAM accesses per element of a parameter and step when everything fits on chip.

    ``forward_reads`` and ``dx_reads`` are the GEMMs reading the weight in the
    forward pass and in ``dX`` (1 and 1 for a layer's weight matrix; no ``dX``
    for the first layer; 0 and 0 for a bias).  Unfused: those reads, and the
    update reads W, g and the states and writes W and the states; ``dW`` writes
    g.  Backward fusion keeps g on chip and serves the update's read of W from
    the ``dX`` GEMM's copy; forward fusion serves the forward GEMM's read of W
    from the update's copy.  With fp32 ``master`` weights the update reads and
    writes the master (a state) instead of reading W, so backward fusion has no W
    read to serve.
    """
    k = optimizer.state_tensors + int(master)
    weight = forward_reads + dx_reads + (1 if master else 2)
    gradient = 2
    if mode is FusionMode.BACKWARD:
        weight -= 0 if master else min(dx_reads, 1)
        gradient = 0
    elif mode is FusionMode.FORWARD:
        weight -= min(forward_reads, 1)
    return Accesses(weight, gradient, 2 * k)


def derived_parameter_bytes(
    graph: OpGraph, mode: FusionMode, optimizer: OptimizerSpec, hw: HardwareSpec
) -> int:
    """The parameters' DRAM bytes per step of ``graph`` (a baseline step) in ``mode``,
    from :func:`derived_accesses` and each weight's GEMM readers."""
    total = 0
    for p in graph.parameters:
        readers = [
            op
            for op in graph.ops
            if isinstance(op, GemmOp) and p.weight.name in (op.a.name, op.b.name)
        ]
        forward = sum(1 for op in readers if op.phase is Phase.FWD)
        dx = sum(1 for op in readers if op.phase is Phase.BWD_INPUT)
        master = optimizer.master_weights is MasterWeights.FP32
        accesses = derived_accesses(mode, optimizer.kind, forward, dx, master)
        total += p.update_elements * accesses.bytes_per_element(hw)
    return total


def parameter_dram_bytes(result: RunResult) -> int:
    """The DRAM bytes of one simulated step spent on the parameters: their weights (and
    buffered copies), gradients and optimizer states (``Tensor.parameter``, and the
    optimizer's other state such as the clipping norm), without activations and
    activation gradients.  Replicas and pipeline copies count alike; the ops of other
    techniques (a gradient predictor's own weights and state) do not count."""
    graph, costs = result.graph, result.trace.costs
    mine = (CORE, OptimizerFusion.name)

    def counted(t: Tensor) -> bool:
        if t.name in graph.on_chip:
            return False
        return bool(t.parameter) or t.kind is TensorKind.OPTIMIZER_STATE

    total = 0
    for op in graph.ops:
        i = op.op_id
        if op.owner not in mine:
            continue
        if isinstance(op, GemmOp):
            operands = (
                (op.a, costs.dram_ifmap_read_bytes[i]),
                (op.b, costs.dram_filter_read_bytes[i]),
                (op.c, costs.dram_ofmap_read_bytes[i] + costs.dram_ofmap_write_bytes[i]),
            )
            total += sum(int(b) for t, b in operands if t.parameter)
        elif isinstance(op, VectorOp):
            total += sum(a.bytes for a in (*op.reads, *op.writes) if counted(a.tensor))
    return total


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
                return backward_fused(graph, ctx.hardware)
            case FusionMode.FORWARD:
                return forward_fused(graph, ctx.hardware, ctx.run.optimizer)

    def training(
        self,
        ctx: TechniqueContext,
        base: RunResult,
        steps: Mapping[str, SimulatedStep],
        plan: TrainingPlan,
    ) -> Section:
        optimizer = ctx.run.optimizer.kind
        mode = self.settings.mode
        exposed = exposed_update_cycles(base)
        share = exposed / max(base.total_cycles, 1)
        params = sum(p.update_elements for p in base.graph.parameters)
        derived = {
            m.value: derived_parameter_bytes(base.graph, m, ctx.run.optimizer, ctx.hardware)
            for m in FusionMode
        }
        # a whole pipeline's graph holds several steps: per step, as its cost is
        simulated = {
            kind: parameter_dram_bytes(step.result)
            * step.cost.dram_bytes
            / max(step.result.dram_bytes, 1)
            for kind, step in steps.items()
        }
        details = {
            "mode": mode.value,
            "optimizer": optimizer.value,
            "master_weights": ctx.run.optimizer.master_weights.value,
            "parameters": params,
            "base_exposed_update_cycles": exposed,
            "base_exposed_update_share": share,
            "base_parameter_dram_bytes": parameter_dram_bytes(base),
            "derived_parameter_dram_bytes": derived,
            "derived_bytes_per_parameter": {m: b / max(params, 1) for m, b in derived.items()},
            "by_kind": {
                kind: {
                    "cycles_saved_fraction": 1 - step.cost.cycles / base.total_cycles,
                    "energy_saved_fraction": 1 - step.cost.energy_pj / base.energy.total_pj,
                    "parameter_dram_bytes": simulated[kind],
                    "bytes_per_parameter": simulated[kind] / max(params, 1),
                }
                for kind, step in steps.items()
            },
        }
        per = ", ".join(f"{m} {b / max(params, 1):.1f}" for m, b in derived.items())
        lines = (
            (
                "exposed update",
                f"{share * 100:.1f} % of the baseline step"
                f" ({mode.value} fusion, {optimizer.value})",
            ),
            *(
                (
                    f"parameter traffic{'' if len(steps) == 1 else f' ({kind})'}",
                    f"{b / max(params, 1):.1f} B per parameter simulated; if everything fits"
                    f" on chip: {per}",
                )
                for kind, b in simulated.items()
            ),
        )
        return Section(self.name, details, lines, inputs=inputs(self.settings, self.defaults()))


def _weight_readers(graph: OpGraph) -> dict[str, list[Op]]:
    readers: dict[str, list[Op]] = {}
    for op in graph.ops:
        for access in queries.reads_of(op):
            readers.setdefault(access.tensor.name, []).append(op)
    return readers


def backward_fused(graph: OpGraph, hw: HardwareSpec) -> OpGraph:
    """Every trained parameter updated as soon as it can be, with what stays on chip kept."""
    unit = main_array(hw)
    readers = _weight_readers(graph)
    on_chip = set(graph.on_chip)
    parameters = []
    for p in graph.parameters:
        if p.grad_op < 0:
            parameters.append(p)
            continue
        if gradient_stays(p.gradient, unit):
            on_chip.add(p.gradient.name)
        grad_op = graph.ops[p.grad_op]
        beside = (
            grad_op.b_elements * grad_op.count * grad_op.b.word_bytes
            if isinstance(grad_op, GemmOp) and grad_op.b.name != p.weight.name
            else 0
        )
        hot = any(op.phase in queries.BACKWARD for op in readers.get(p.weight.name, ()))
        if hot and weight_stays(p.weight, beside, unit):
            on_chip.add(buffered(p.weight).name)
        parameters.append(dataclasses.replace(p, update=UpdateTiming.BACKWARD))
    return dataclasses.replace(graph, on_chip=frozenset(on_chip), parameters=tuple(parameters))


def forward_fused(graph: OpGraph, hw: HardwareSpec, optimizer: OptimizerSpec) -> OpGraph:
    """Every trained parameter updated just before its layer's first forward read of it
    (or its layer's first forward op, for a parameter no forward op reads)."""
    unit = main_array(hw)
    trained = {p.weight.name: p for p in graph.parameters if p.grad_op >= 0}
    readers = _weight_readers(graph)
    first_forward: dict[str, int] = {}
    for op in graph.ops:
        if op.phase is Phase.FWD:
            first_forward.setdefault(op.layer, op.op_id)
    first_read: dict[int, list[Parameter]] = {}
    for name, p in trained.items():
        forward = [op.op_id for op in readers.get(name, ()) if op.phase is Phase.FWD]
        at = forward[0] if forward else first_forward.get(p.layer)
        if at is not None:
            first_read.setdefault(at, []).append(p)
    updates: dict[str, int] = {}

    def emit(builder: GraphBuilder, op: Op) -> None:
        for p in first_read.get(op.op_id, []):
            clipped = optimizer.clip_global_norm is not None
            updates[p.weight.name] = update_op(builder, p, optimizer, (), clipped=clipped)[0]

    rewritten, ids = passes.rewrite(
        graph, hw.word_bytes, emit_before=emit, owner=OptimizerFusion.name
    )
    resident = {
        name: buffered(trained[name].weight)
        for name in updates
        if weight_stays(trained[name].weight, 0, unit)
    }
    ops = list(rewritten.ops)
    for old, params in first_read.items():
        (new,) = ids[old]
        op = ops[new]
        reads = {a.tensor.name for a in queries.reads_of(graph.ops[old])}
        swap = {
            n: resident[n] for n in (p.weight.name for p in params) if n in resident and n in reads
        }
        wait = {updates[p.weight.name] for p in params}
        ops[new] = dataclasses.replace(
            _reading(op, swap),
            deps=tuple(sorted(set(op.deps) | wait)),
            after=tuple(sorted(set(op.after) | wait)),
        )
    parameters = tuple(
        dataclasses.replace(p, update=UpdateTiming.FORWARD) if p.weight.name in updates else p
        for p in rewritten.parameters
    )
    on_chip = rewritten.on_chip | {t.name for t in resident.values()}
    return dataclasses.replace(rewritten, ops=tuple(ops), on_chip=on_chip, parameters=parameters)


def _reading(op: Op, swap: Mapping[str, Tensor]) -> Op:
    """``op`` reading the tensors in ``swap`` (by name) from their replacements."""
    if not swap:
        return op
    if isinstance(op, GemmOp):
        return dataclasses.replace(op, a=swap.get(op.a.name, op.a), b=swap.get(op.b.name, op.b))
    if isinstance(op, VectorOp):
        reads = tuple(Access(swap.get(a.tensor.name, a.tensor), a.elements) for a in op.reads)
        return dataclasses.replace(op, reads=reads)
    return op
