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
from dataclasses import dataclass, field
from fractions import Fraction

from accelsim.graph.ops import GemmOp, OpGraph, Phase, Stage
from accelsim.lowering.shapes import LayerInfo
from accelsim.lowering.tensor_parallel import plan_tensor
from accelsim.mapping.pipeline_stages import PipelineCut, cut_stages
from accelsim.network.collectives import Collective
from accelsim.planner.candidates import Candidate
from accelsim.planner.chain import LayerCollectives, chain_collectives, pass_chains
from accelsim.timing.machine import Machine
from accelsim.timing.sends import least_cycles

PASSES = (Stage.FORWARD, Stage.BACKWARD)
"""The stages of the ops a plan's passes hold (its updates are not array work)."""


@dataclass(frozen=True)
class Work:
    """The array MACs of one step of ``batch`` samples lowered on one processor, by
    layer name, for one recomputation policy; ``chain_macs_by_layer``: those of its
    forward GEMMs in the forward pass and of its input-gradient GEMMs
    (:func:`chain_macs`)."""

    batch: int
    macs_by_layer: Mapping[str, int]
    chain_macs_by_layer: Mapping[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def macs(self) -> int:
        """Every layer's."""
        return sum(self.macs_by_layer.values())


@dataclass(frozen=True)
class Bound:
    """A plan's proven least step: ``cycles``, set by stage ``stage`` of its
    ``stages`` (its passes and the earlier stages' passes of one micro-batch),
    ``passes_cycles`` of it that stage's own passes; ``chained``: whether a pass's
    tensor-parallel chains, not its array MACs, set some of it."""

    cycles: int
    stage: int
    stages: int
    passes_cycles: int
    chained: bool = False

    def describe(self, seconds_per_cycle: float) -> str:
        """The bound and what binds it, in seconds."""
        total = f"{self.cycles * seconds_per_cycle:.4f} s at least"
        if self.stages == 1:
            if self.chained:
                return f"{total} (its tensor-parallel chains: collectives and GEMMs in turn)"
            return f"{total} (the busiest chip's array MACs at peak)"
        passes = self.passes_cycles * seconds_per_cycle
        fill = (self.cycles - self.passes_cycles) * seconds_per_cycle
        what = "array MACs at peak" + (" or tensor-parallel chains" if self.chained else "")
        return (
            f"{total} (stage {self.stage} of {self.stages}: its passes' {what},"
            f" {passes:.4f} s, and one micro-batch's through the stages before it,"
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


def chain_macs(graph: OpGraph) -> dict[str, tuple[int, int]]:
    """The MACs on the array of the graph's forward GEMMs in its forward pass and of its
    input-gradient GEMMs, by layer (a recomputed forward and the weight gradients
    left out: they need not lie on a pass's chain)."""
    out: dict[str, tuple[int, int]] = {}
    for op in graph.ops:
        if not (isinstance(op, GemmOp) and op.unit == "array" and op.groups == 1):
            continue
        forward, dx = out.get(op.layer, (0, 0))
        if op.phase is Phase.FWD and op.stage is Stage.FORWARD:
            out[op.layer] = (forward + op.macs, dx)
        elif op.phase is Phase.BWD_INPUT:
            out[op.layer] = (forward, dx + op.macs)
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


class Chains:
    """Each plan's tensor-parallel chains (:mod:`accelsim.planner.chain`) on a
    machine, each worked out once per work, tensor degree, sequence parallelism,
    samples and cut, each collective's least cycles once per kind, group and size."""

    def __init__(self, infos: Sequence[LayerInfo], machine: Machine) -> None:
        self.infos = infos
        self.machine = machine
        words = machine.hardware.word_bytes
        self.word_bytes = (words.activations, words.gradients)
        self.peak = machine.hardware.array.peak_macs_per_cycle
        self._collectives: dict[tuple[int, bool], dict[str, LayerCollectives]] = {}
        self._timed: dict[tuple[Collective, int, int], int] = {}
        self._chains: dict[tuple[object, ...], tuple[Work, tuple[Fraction, ...]]] = {}

    def __call__(
        self,
        work: Work,
        t: int,
        sequence: bool,
        samples: int,
        chunks: Sequence[Sequence[str]] | None,
    ) -> tuple[Fraction, ...]:
        """The least cycles of each chunk's forward and backward chains for ``samples``
        samples a pass (``work``: its GEMMs); ``chunks`` None: the step's one forward
        chain into the last layer and its backward chain."""
        cut = None if chunks is None else tuple(map(tuple, chunks))
        key = (id(work), t, sequence, samples, cut)
        if key not in self._chains:  # the work kept with its chains: its id stays its
            self._chains[key] = (work, self._worked_out(work, t, sequence, samples, cut))
        return self._chains[key][1]

    def _worked_out(
        self,
        work: Work,
        t: int,
        sequence: bool,
        samples: int,
        chunks: tuple[tuple[str, ...], ...] | None,
    ) -> tuple[Fraction, ...]:
        if (t, sequence) not in self._collectives:
            plan = plan_tensor(self.infos, t, sequence)
            self._collectives[(t, sequence)] = chain_collectives(self.infos, plan)
        found = self._collectives[(t, sequence)]
        scale = work.batch * t * self.peak
        gemms = {
            name: (Fraction(f, scale), Fraction(dx, scale))
            for name, (f, dx) in work.chain_macs_by_layer.items()
        }

        def timed(kind: Collective, size_bytes: int) -> int:
            key = (kind, t, size_bytes)
            if key not in self._timed:
                self._timed[key] = least_cycles(self.machine, kind, tuple(range(t)), size_bytes)
            return self._timed[key]

        def chains(layers: Sequence[str]) -> tuple[Fraction, Fraction, Fraction]:
            return pass_chains(self.infos, found, gemms, layers, samples, timed, self.word_bytes)

        if chunks is None:
            into, _, backward = chains([info.layer.name for info in self.infos])
            return (into + backward,)
        return tuple(forward + backward for _, forward, backward in map(chains, chunks))


def plan_bound(
    candidate: Candidate,
    work: Work,
    cuts: Callable[[int, int], PipelineCut],
    chips: int,
    peak_macs_per_cycle: int,
    chains: Chains | None = None,
) -> Bound:
    """The least step ``candidate`` can simulate on ``chips`` processors (the module's
    derivation), ``work`` its recomputation policy's; with ``chains``, each pass at
    least its tensor-parallel chains too."""
    fields = dict(candidate.parallel)
    t = int(fields.get("tensor", 1))
    p = int(fields.get("pipeline", 1))
    sequence = bool(fields.get("sequence_parallel", False))
    replica = Fraction(work.batch, chips // (p * t))
    scale = work.batch * t * peak_macs_per_cycle
    if p == 1:
        cycles = math.ceil(replica * work.macs / scale)
        chain = 0
        if chains is not None and t > 1:
            chain = math.ceil(chains(work, t, sequence, int(replica), None)[0])
        return Bound(max(cycles, chain), 0, 1, max(cycles, chain), chain > cycles)
    cut = cuts(p, int(fields.get("virtual_stages", 1)))
    m = int(fields.get("micro_batch") or 1)
    passes = [
        m * Fraction(sum(work.macs_by_layer.get(name, 0) for name in names), scale)
        for names in cut.chunks
    ]
    chained = chains(work, t, sequence, m, cut.chunks) if chains is not None and t > 1 else passes
    longer = any(b > a for a, b in zip(passes, chained, strict=True))
    passes = [max(a, b) for a, b in zip(passes, chained, strict=True)]
    micro_batches = replica / m
    best = Bound(0, 0, p, 0, longer)
    for s in range(p):
        own = math.ceil(micro_batches * sum(passes[s::p]))
        cycles = math.ceil(micro_batches * sum(passes[s::p]) + sum(passes[:s]))
        if cycles > best.cycles:
            best = Bound(cycles, s, p, own, longer)
    return best
