"""A proven lower bound on a plan's simulated step, from the array work of its passes,
cheap enough to compute for every plan that fits (one lowered step a recomputation
policy, then sums by layer).

Every GEMM on a processor's arrays takes at least its MACs over the arrays' peak MACs
per cycle (:attr:`~accelsim.config.hardware.ArraySpec.peak_macs_per_cycle`: each of
a GEMM's folds streams ``T`` rows through an ``R x C`` array in at least ``T``
cycles, :func:`~accelsim.timing.closed_form.op_cycles`), and one processor's arrays
run their ops one after the other; so a step, or a pipeline pass, takes at least the
array MACs of its busiest processor over the peak, and at least the mean of its
processors'.  A replica of ``b`` samples does at least ``b / B`` of the array MACs
``W`` of the whole batch ``B`` lowered on one processor (``W``: the GEMMs of the
forward and backward passes, recomputation's added forward among them, counted with
:func:`array_macs`): a GEMM's rows grow with the samples, and splitting a batch, or
a GEMM over tensor-parallel ranks, never makes less work.

Without a pipeline the plan's ``d`` replicas of ``t`` tensor ranks each run a step of
at least ``B / d`` samples, so the step takes at least ``W / (d t peak)`` cycles.  A
pipeline of ``p`` stages and ``v`` chunks a stage (chunk ``g`` on stage ``g mod p``)
runs ``M`` micro-batches of ``m`` samples on each replica (``M m = B / d``); a
chunk's pass of one micro-batch takes at least ``F_g + B_g >= W_g m / (B t peak)``
(``W_g``: the array MACs of chunk ``g``'s layers).  Stage ``s`` runs its passes one
at a time (:mod:`accelsim.timing.pipeline_step`); its first pass is a forward of one
of its chunks, after that micro-batch's forwards through chunks ``0 .. s - 1``, and
its last pass a backward, before that micro-batch's backwards through chunks ``s - 1
.. 0``.  So the pipeline cannot flush before::

    max over s of  (B / d) sum(W_g, g on s) / (B t peak)  +  m sum(W_g, g < s) / (B t peak)

(the uniform 1F1B pipeline's ``(M + p - 1)`` passes of its last stage), and the step
ends no earlier.  The bound leaves out what the arrays lose to their shape (a fold's
fill and drain, a GEMM smaller than the array), memory stalls, the vector unit and
communication.  It holds for the runs a plan search makes (recomputation the only
technique; a technique that masks folds would run fewer MACs).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from accelsim.graph.ops import GemmOp, OpGraph, Stage
from accelsim.lowering.shapes import LayerInfo
from accelsim.mapping.pipeline_stages import PipelineCut, cut_stages
from accelsim.planner.candidates import Candidate

PASSES = (Stage.FORWARD, Stage.BACKWARD)
"""The stages of the ops a plan's passes hold (its updates are not array work)."""


@dataclass(frozen=True)
class Work:
    """The array MACs of one step of ``batch`` samples lowered on one processor, by
    layer name, for one recomputation policy."""

    batch: int
    macs_by_layer: Mapping[str, int]

    @property
    def macs(self) -> int:
        """Every layer's."""
        return sum(self.macs_by_layer.values())


@dataclass(frozen=True)
class Bound:
    """A plan's proven least step: ``cycles``, set by stage ``stage`` of its
    ``stages`` (its passes and the earlier stages' passes of one micro-batch),
    ``passes_cycles`` of it that stage's own passes."""

    cycles: int
    stage: int
    stages: int
    passes_cycles: int

    def describe(self, seconds_per_cycle: float) -> str:
        """The bound and what binds it, in seconds."""
        total = f"{self.cycles * seconds_per_cycle:.4f} s at least"
        if self.stages == 1:
            return f"{total} (the busiest chip's array MACs at peak)"
        passes = self.passes_cycles * seconds_per_cycle
        fill = (self.cycles - self.passes_cycles) * seconds_per_cycle
        return (
            f"{total} (stage {self.stage} of {self.stages}: its passes' array MACs at"
            f" peak, {passes:.4f} s, and one micro-batch's through the stages before it,"
            f" {fill:.4f} s)"
        )


def array_macs(graph: OpGraph) -> dict[str, int]:
    """The MACs of the graph's GEMMs on the array (not a depthwise convolution's, which
    may run on the vector unit) in its forward and backward passes, by layer."""
    out: dict[str, int] = {}
    for op in graph.ops:
        if isinstance(op, GemmOp) and op.unit == "array" and op.groups == 1 and op.stage in PASSES:
            out[op.layer] = out.get(op.layer, 0) + op.macs
    return out


class Cuts:
    """A layer table's cuts into pipeline chunks, each made once."""

    def __init__(self, infos: Sequence[LayerInfo]) -> None:
        self.infos = infos
        self._cuts: dict[tuple[int, int], PipelineCut] = {}

    def __call__(self, stages: int, virtual_stages: int) -> PipelineCut:
        key = (stages, virtual_stages)
        if key not in self._cuts:
            self._cuts[key] = cut_stages(self.infos, stages, virtual_stages)
        return self._cuts[key]


def plan_bound(
    candidate: Candidate,
    work: Work,
    cuts: Callable[[int, int], PipelineCut],
    chips: int,
    peak_macs_per_cycle: int,
) -> Bound:
    """The least step ``candidate`` can simulate on ``chips`` processors (the module's
    derivation), ``work`` its recomputation policy's."""
    fields = dict(candidate.parallel)
    t = int(fields.get("tensor", 1))
    p = int(fields.get("pipeline", 1))
    if p == 1:
        chunks, m = [work.macs], 1
    else:
        cut = cuts(p, int(fields.get("virtual_stages", 1)))
        m = int(fields.get("micro_batch") or 1)
        chunks = [sum(work.macs_by_layer.get(name, 0) for name in names) for names in cut.chunks]
    replica = Fraction(work.batch, chips // (p * t))
    scale = work.batch * t * peak_macs_per_cycle
    best = Bound(0, 0, p, 0)
    for s in range(p):
        own = math.ceil(replica * sum(chunks[s::p]) / scale)
        cycles = math.ceil((replica * sum(chunks[s::p]) + m * sum(chunks[:s])) / scale)
        if cycles > best.cycles:
            best = Bound(cycles, s, p, own)
    return best
