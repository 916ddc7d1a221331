"""A proven lower bound on a plan's simulated step, from the array work of its passes
and their tensor-parallel chains, cheap enough to compute for every plan that fits
(one lowered step a recomputation policy, then sums by layer).

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
ends no earlier.

With ``t`` above 1 a pass also waits for its tensor-parallel chains
(:mod:`accelsim.planner.chain`: collectives one after the other, GEMMs in the gaps):
a chunk's forward pass takes at least the larger of its forward array MACs at peak
and its forward chain, its backward pass the larger of its backward array MACs
(recomputation's among them) and its backward chain, and these replace ``W_g m / (B t
peak)`` above.  Without a pipeline the step's backward starts after the forward chain
into the loss (the table's last layer), and every gradient GEMM reads a gradient
made after it: the step takes at least that chain plus the larger of the backward
chain and the gradient GEMMs' MACs at peak.  The bound leaves out what the arrays
lose to their shape (a fold's fill and drain, a GEMM smaller than the array), memory
stalls, the vector unit and every other communication.  It holds for the runs a plan
search makes (recomputation the only technique; a technique that masks folds would
run fewer MACs).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from accelsim.graph.ops import GemmOp, OpGraph, Phase, Stage
from accelsim.lowering.shapes import LayerInfo
from accelsim.lowering.tensor_parallel import plan_tensor
from accelsim.mapping.pipeline_stages import PipelineCut
from accelsim.network.collectives import Collective
from accelsim.planner.candidates import Candidate
from accelsim.planner.chain import (
    LayerCollectives,
    chain_collectives,
    layer_weights,
    pass_chains,
)
from accelsim.timing.machine import Machine
from accelsim.timing.sends import least_cycles

PASSES = (Stage.FORWARD, Stage.BACKWARD)
"""The stages of the ops a plan's passes hold (its updates are not array work)."""

GRADIENTS = (Phase.BWD_INPUT, Phase.BWD_WEIGHT)
"""The phases of the GEMMs that read an output's gradient."""


@dataclass(frozen=True)
class PassMacs:
    """One layer's array MACs by what bounds a pass: ``forward``, the forward pass's;
    ``gradients``, the backward pass's input- and weight-gradient GEMMs'; and those on
    its tensor-parallel chains, ``chain_forward`` its forward GEMMs' in the forward
    pass and ``chain_backward`` its input-gradient GEMMs'."""

    forward: int = 0
    gradients: int = 0
    chain_forward: int = 0
    chain_backward: int = 0


@dataclass(frozen=True)
class Work:
    """The array MACs of one step of ``batch`` samples lowered on one processor, by
    layer name, for one recomputation policy; ``passes_by_layer``: those by what
    bounds a pass (:func:`pass_macs`)."""

    batch: int
    macs_by_layer: Mapping[str, int]
    passes_by_layer: Mapping[str, PassMacs] = field(default_factory=dict)

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


def pass_macs(graph: OpGraph) -> dict[str, PassMacs]:
    """The graph's :class:`PassMacs` by layer (the GEMMs :func:`array_macs` counts; a
    recomputed forward and the weight gradients on no chain: they need not lie on
    one)."""
    out: dict[str, PassMacs] = {}
    for op in graph.ops:
        if not (isinstance(op, GemmOp) and op.unit == "array" and op.groups == 1):
            continue
        had = out.get(op.layer, PassMacs())
        forward, gradients = had.forward, had.gradients
        chain_forward, chain_backward = had.chain_forward, had.chain_backward
        if op.stage is Stage.FORWARD:
            forward += op.macs
            chain_forward += op.macs if op.phase is Phase.FWD else 0
        if op.stage is Stage.BACKWARD and op.phase in GRADIENTS:
            gradients += op.macs
            chain_backward += op.macs if op.phase is Phase.BWD_INPUT else 0
        out[op.layer] = PassMacs(forward, gradients, chain_forward, chain_backward)
    return out


Pair = tuple[Fraction, Fraction]
"""Least cycles of a forward pass and of a backward pass."""


class Chains:
    """Each plan's tensor-parallel chains (:mod:`accelsim.planner.chain`) on a
    machine, each worked out once per work, tensor degree, sequence parallelism,
    samples and cut, each collective's least cycles once per kind, group and size."""

    def __init__(self, infos: Sequence[LayerInfo], machine: Machine) -> None:
        self.infos = infos
        self.by_name = {info.layer.name: info for info in infos}
        self.machine = machine
        words = machine.hardware.word_bytes
        self.word_bytes = (words.activations, words.gradients)
        self.peak = machine.hardware.array.peak_macs_per_cycle
        self._collectives: dict[tuple[int, bool], dict[str, LayerCollectives]] = {}
        self._timed: dict[tuple[Collective, int, int], int] = {}
        self._chains: dict[tuple[object, ...], tuple[Work, tuple[Pair, ...]]] = {}

    def __call__(
        self,
        work: Work,
        t: int,
        sequence: bool,
        samples: int,
        chunks: Sequence[Sequence[str]] | None,
    ) -> tuple[Pair, ...]:
        """The least cycles of each chunk's forward chain and backward chain for
        ``samples`` samples a pass (``work``: its GEMMs); ``chunks`` None: the step's
        forward chain into the last layer and its backward chain."""
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
    ) -> tuple[Pair, ...]:
        if (t, sequence) not in self._collectives:
            plan = plan_tensor(self.infos, t, sequence)
            self._collectives[(t, sequence)] = chain_collectives(self.infos, plan)
        found = self._collectives[(t, sequence)]

        def timed(kind: Collective, size_bytes: int) -> int:
            key = (kind, t, size_bytes)
            if key not in self._timed:
                self._timed[key] = least_cycles(self.machine, kind, tuple(range(t)), size_bytes)
            return self._timed[key]

        scale = work.batch * t * self.peak
        gemms = {
            name: (macs.chain_forward, macs.chain_backward)
            for name, macs in work.passes_by_layer.items()
        }
        weights = layer_weights(found, gemms, scale, samples, timed, self.word_bytes)
        if chunks is None:
            names = [info.layer.name for info in self.infos]
            into, _, backward = pass_chains(self.by_name, names, weights, scale)
            return ((into, backward),)
        out = []
        for chunk in chunks:
            ordered = sorted(chunk, key=lambda name: self.by_name[name].index)
            _, forward, backward = pass_chains(self.by_name, ordered, weights, scale)
            out.append((forward, backward))
        return tuple(out)


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
            ((into, backward),) = chains(work, t, sequence, int(replica), None)
            gradients = sum(macs.gradients for macs in work.passes_by_layer.values())
            chain = math.ceil(into + max(backward, replica * Fraction(gradients, scale)))
        return Bound(max(cycles, chain), 0, 1, max(cycles, chain), chain > cycles)
    cut = cuts(p, int(fields.get("virtual_stages", 1)))
    m = int(fields.get("micro_batch") or 1)
    passes = [
        m * Fraction(sum(work.macs_by_layer.get(name, 0) for name in names), scale)
        for names in cut.chunks
    ]
    longer = False
    if chains is not None and t > 1:
        by_chunk = chains(work, t, sequence, m, cut.chunks)
        for g, (names, (forward, backward)) in enumerate(zip(cut.chunks, by_chunk, strict=True)):
            macs = [work.passes_by_layer.get(name, PassMacs()) for name in names]
            array_forward = m * Fraction(sum(x.forward for x in macs), scale)
            least = max(forward, array_forward) + max(backward, passes[g] - array_forward)
            longer = longer or least > passes[g]
            passes[g] = max(passes[g], least)
    micro_batches = replica / m
    best = Bound(0, 0, p, 0, longer)
    for s in range(p):
        own = math.ceil(micro_batches * sum(passes[s::p]))
        cycles = math.ceil(micro_batches * sum(passes[s::p]) + sum(passes[:s]))
        if cycles > best.cycles:
            best = Bound(cycles, s, p, own, longer)
    return best
