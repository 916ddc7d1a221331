"""Activation recomputation (gradient checkpointing): Chen et al., "Training Deep Nets
with Sublinear Memory Cost", arXiv 1604.06174, 2016 (keep some activations, recompute
the rest in the backward pass), and Korthikanti et al., "Reducing Activation
Recomputation in Large Transformer Models", MLSys 2023, arXiv 2205.05198 (selective
recomputation of attention's score and softmax tensors).

A training step saves the activations its backward stage reads (the stash,
:func:`~accelsim.graph.queries.stashed`).  Recomputation keeps fewer and recomputes the
others in the backward stage, from the ones it kept, just before the backward pass
reads them: a smaller stash for more work.

**Blocks.**  The layer table has no typed block, so blocks are read off the layer
graph: a *cut* is a layer every later path passes through (no later layer reads what a
layer before it, or the step's input, made), which is where a residual block or a
transformer sub-layer ends (:func:`cuts`).  The layers up to and including a cut, after
the cut before it, are a block; on a chain every layer is one.

**Policies** (``policy``):

* ``full``: keep each block's input (the cut before it) and recompute the activations
  inside the block that the backward stage reads;
* ``every``: keep every ``keep_every``-th cut's output only (so ``keep_every`` blocks
  are recomputed from one kept input; ``every`` with 1 is ``full``);
* ``selective``: in every attention layer, recompute the scores and the softmax (the
  ``QK^T`` GEMM and the vector ops after it up to the next GEMM), as Korthikanti et al.
  do; keep everything else.

**What is recomputed.**  In ``full`` and ``every`` a *segment* is the blocks recomputed
from one kept input.  A tensor the backward stage reads is recomputed when a forward op
of its segment made it and no later segment's forward work reads it (a tensor a later
segment reads is the segment's output, kept); so is every tensor such an op reads that
its segment made, back to the kept ones.  The recomputed ops are copies of the forward
ops (phase ``fwd``: forward MACs; owner ``recomputation``; stage ``backward``), writing
the next version of every tensor they write (``Tensor.version``), emitted in forward
order right before the first backward op that reads a tensor of their segment; the
backward stage's reads of the recomputed tensors then read the new versions
(:func:`~accelsim.graph.links.redirect`), so the stash shrinks to the kept tensors.

**Kept whatever the policy**: what an op reading a view writes (a tensor no op writes
whose readers wait for its parts: a concat, a flatten, a split, a recurrent layer's
input and state), and a tensor several ops write piecewise (a transposed
convolution's output); a view itself, which is its parts' memory.  A step without a
backward stage (ADA-GP's GP step) recomputes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any

from pydantic import Field

from accelsim.config.base import PositiveInt, Spec
from accelsim.config.hardware import WordBytesSpec
from accelsim.errors import Problem
from accelsim.graph import links, passes, queries
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import (
    Access,
    GemmOp,
    Op,
    OpGraph,
    Phase,
    Stage,
    Tensor,
    TensorKey,
    TensorKind,
    VectorOp,
    replaced,
)
from accelsim.lowering.shapes import INPUT_NAME, LayerInfo
from accelsim.report.result import RunResult
from accelsim.report.summary import WorkSummary
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
from accelsim.workload import model as wm


class Policy(str, Enum):
    FULL = "full"
    SELECTIVE = "selective"
    EVERY = "every"


DEFAULTS: dict[str, Origin] = {
    "policy": (
        Source.OURS,
        "our choice: full applies to every workload; selective, Korthikanti et al.'s"
        " policy for transformers, needs attention layers",
    ),
    "keep_every": (
        Source.OURS,
        "our choice: every second block (a transformer layer's two sub-layers);"
        " read by policy every only",
    ),
}
"""Where each setting's default comes from."""


class RecomputationConfig(Spec):
    """``techniques.recomputation`` in a run file."""

    policy: Annotated[Policy, Field(strict=False)] = Field(
        default=Policy.FULL,
        description="full (keep each block's input, recompute the rest of the block),"
        " selective (recompute attention's scores and softmax only) or every (keep every"
        " keep_every-th block's output); a block ends at a layer every later path passes"
        " through.",
    )
    keep_every: PositiveInt = Field(
        default=2,
        description="policy every: the blocks recomputed from one kept input (1 is full).",
    )


def cuts(infos: Sequence[LayerInfo]) -> list[str]:
    """The layers every later path passes through, in network order: a layer is one when
    no layer after it reads what a layer before it (or the step's input) made."""
    last_read: dict[str, int] = {}
    for i, info in enumerate(infos):
        for source in info.inputs:
            last_read[source] = max(last_read.get(source, -1), i)
    reach = last_read.get(INPUT_NAME, -1)  # the last read of anything made so far
    out = []
    for i, info in enumerate(infos):
        if reach <= i:
            out.append(info.layer.name)
        reach = max(reach, last_read.get(info.layer.name, -1))
    return out


def segments(infos: Sequence[LayerInfo], every: int) -> dict[str, int]:
    """Each layer's segment: the blocks between one kept cut and the next, ``every``
    blocks to a segment."""
    ends = set(cuts(infos))
    out: dict[str, int] = {}
    segment = blocks = 0
    for info in infos:
        out[info.layer.name] = segment
        if info.layer.name in ends:
            blocks += 1
            segment += blocks % every == 0
    return out


def score_ops(graph: OpGraph, infos: Sequence[LayerInfo]) -> dict[int, int]:
    """Every attention layer's score and softmax ops (by op id, with the layer's index):
    in its forward work, its first GEMM of two activations (``QK^T``) and the vector
    ops after it up to its next GEMM (the causal mask, the softmax)."""
    attention = {info.layer.name: info.index for info in infos if _attends(info)}
    work: dict[str, list[Op]] = {}
    for op in graph.ops:
        if op.layer in attention and queries.forward_work(op):
            work.setdefault(op.layer, []).append(op)
    out = {}
    for layer, ops in work.items():
        first = next((k for k, op in enumerate(ops) if _scores(op)), len(ops))
        for op in ops[first:]:
            if isinstance(op, GemmOp) and op is not ops[first]:
                break
            out[op.op_id] = attention[layer]
    return out


def _scores(op: Op) -> bool:
    """Whether ``op`` is a GEMM of two activations (attention's ``QK^T``)."""
    return isinstance(op, GemmOp) and op.a.kind is op.b.kind is TensorKind.ACTIVATION


def _attends(info: LayerInfo) -> bool:
    return isinstance(info.layer, wm.Attention)


@dataclass(frozen=True)
class Plan:
    """What one step graph recomputes: the forward ops of each segment (in forward order)
    and the tensors (their keys) whose backward reads move to the new version."""

    groups: tuple[tuple[int, ...], ...]
    tensors: frozenset[TensorKey]


def choose(graph: OpGraph, infos: Sequence[LayerInfo], policy: Policy, every: int) -> Plan:
    """The ops ``graph`` recomputes under ``policy`` (see the module docstring)."""
    ops = graph.ops
    if policy is Policy.SELECTIVE:
        segment_of = score_ops(graph, infos)
        layer_segment: dict[str, int] = {}
    else:
        layer_segment = segments(infos, 1 if policy is Policy.FULL else every)
        segment_of = {
            op.op_id: layer_segment[op.layer]
            for op in ops
            if queries.forward_work(op) and op.layer in layer_segment
        }
    writers: dict[TensorKey, int] = {}  # how many ops write each tensor
    for op in ops:
        for a in queries.writes_of(op):
            writers[a.tensor.key] = writers.get(a.tensor.key, 0) + 1
    candidates = {
        i: s
        for i, s in segment_of.items()
        if isinstance(ops[i], (GemmOp, VectorOp))
        and not _reads_view(ops[i], writers)
        and all(writers[a.tensor.key] == 1 for a in queries.writes_of(ops[i]))
    }
    maker = {a.tensor.key: i for i in candidates for a in queries.writes_of(ops[i])}
    kept = {
        a.tensor.key
        for op in ops
        if queries.forward_work(op) and op.layer in layer_segment
        for a in queries.reads_of(op)
        if a.tensor.key in maker and layer_segment[op.layer] > candidates[maker[a.tensor.key]]
    }
    need = [t.key for t in queries.stashed_tensors(ops) if t.key in maker and t.key not in kept]
    chosen: set[int] = set()
    while need:
        i = maker[need.pop()]
        if i not in chosen:
            chosen.add(i)
            need += [
                a.tensor.key
                for a in queries.reads_of(ops[i])
                if a.tensor.key in maker and a.tensor.key not in kept
            ]
    groups: dict[int, list[int]] = {}
    for i in sorted(chosen):
        groups.setdefault(candidates[i], []).append(i)
    tensors = frozenset(
        a.tensor.key for i in chosen for a in queries.writes_of(ops[i]) if a.tensor.key not in kept
    )
    return Plan(tuple(tuple(g) for _, g in sorted(groups.items())), tensors)


def _reads_view(op: Op, written: Mapping[TensorKey, int]) -> bool:
    """Whether ``op`` reads a view: a tensor no op writes whose readers wait for its
    parts' makers."""
    return any(
        sources and a.tensor.key not in written
        for a, sources in zip(queries.reads_of(op), op.sources, strict=False)
    )


def recomputed(graph: OpGraph, chosen: Plan, words: WordBytesSpec, owner: str) -> OpGraph:
    """``graph`` recomputing what ``chosen`` says: each segment's ops copied (``owner``'s,
    in the backward stage) right before the first backward op reading one of its
    tensors, and the backward stage reading the copies' new versions."""
    ops = graph.ops
    anchors: dict[int, list[int]] = {}  # op id -> the groups emitted right before it
    for g, group in enumerate(chosen.groups):
        mine = {a.tensor.key for i in group for a in queries.writes_of(ops[i])}
        mine &= chosen.tensors
        first = next(
            op.op_id
            for op in ops
            if op.stage is Stage.BACKWARD
            and any(a.tensor.key in mine for a in queries.reads_of(op))
        )
        anchors.setdefault(first, []).append(g)
    made: dict[TensorKey, int] = {}

    def emit(builder: GraphBuilder, op: Op) -> None:
        for g in anchors.get(op.op_id, ()):
            for i in chosen.groups[g]:
                made.update(_again(builder, ops[i], chosen.tensors))

    rewritten, ids = passes.rewrite(graph, words, emit_before=emit, owner=owner)
    moved = {
        (ids[op.op_id][0], a.tensor.key): a.tensor
        for op in ops
        if op.stage is Stage.BACKWARD
        for a in queries.reads_of(op)
        if a.tensor.key in chosen.tensors
    }
    redirects = [
        links.Redirect(consumer, key, made[key], _next(tensor))
        for (consumer, key), tensor in moved.items()
    ]
    return links.redirect(rewritten, redirects)


def _next(tensor: Tensor) -> Tensor:
    """The tensor's next version: the value computed again."""
    return replaced(tensor, version=tensor.version + 1)


def _again(builder: GraphBuilder, op: Op, remade: frozenset[TensorKey]) -> dict[TensorKey, int]:
    """Emit ``op`` again, reading the next version of each ``remade`` tensor and
    writing the next version of every tensor it writes.

    Returns:
        The new op's id, by the key of each tensor ``op`` writes.
    """

    def read(t: Tensor) -> Tensor:
        return _next(t) if t.key in remade else t

    name = f"{op.name}.recompute"
    if isinstance(op, GemmOp):
        i = builder.gemm(
            name,
            op.layer,
            Phase.FWD,
            op.m,
            op.n,
            op.k,
            op.count,
            read(op.a),
            read(op.b),
            _next(op.c),
            op.a_elements,
            op.b_elements,
            unit=op.unit,
        )
        return {op.c.key: i}
    assert isinstance(op, VectorOp)
    i = builder.vector(
        name,
        op.layer,
        Phase.FWD,
        op.elements,
        op.ops_per_element,
        [Access(read(a.tensor), a.elements) for a in op.reads],
        [Access(_next(a.tensor), a.elements) for a in op.writes],
        epilogue=op.epilogue,
    )
    return {a.tensor.key: i for a in op.writes}


class Recomputation(Technique):
    """Activation recomputation as a plug-in: the stash shrinks, forward work runs again
    in the backward stage."""

    name = "recomputation"
    Config = RecomputationConfig
    rewrite_phase = RewritePhase.AUGMENT

    @property
    def settings(self) -> RecomputationConfig:
        assert isinstance(self.config, RecomputationConfig)
        return self.config

    def defaults(self) -> dict[str, Origin]:
        return DEFAULTS

    def validate(self, load: LoadContext) -> list[Problem]:
        cfg = self.settings
        problems = []
        if "keep_every" in cfg.model_fields_set and cfg.policy is not Policy.EVERY:
            problems.append(
                Problem(
                    self.source,
                    self.where("keep_every"),
                    f"read only by policy: every (the policy is {cfg.policy.value})",
                    cfg.keep_every,
                )
            )
        if cfg.policy is Policy.SELECTIVE and not any(_attends(i) for i in load.infos):
            problems.append(
                Problem(
                    self.source,
                    self.where("policy"),
                    "selective recomputes attention's scores and softmax, and the workload"
                    " has no attention layer; use full or every",
                    cfg.policy.value,
                )
            )
        return problems

    def rewrite_graph(self, graph: OpGraph, kind: str, ctx: TechniqueContext) -> OpGraph:
        cfg = self.settings
        chosen = choose(graph, ctx.infos, cfg.policy, cfg.keep_every)
        if not chosen.groups:
            return graph
        return recomputed(graph, chosen, ctx.hardware.word_bytes, self.name)

    def training(
        self,
        ctx: TechniqueContext,
        base: RunResult,
        steps: Mapping[str, SimulatedStep],
        plan: TrainingPlan,
    ) -> Section:
        cfg = self.settings
        summary = base.step_summary()
        by_kind = {kind: self._kind_report(base, step) for kind, step in steps.items()}
        lines = []
        for kind, r in by_kind.items():
            at = "" if len(steps) == 1 else f" ({kind})"
            lines += [
                (
                    f"stash{at}",
                    f"{_mib(r['stash_bytes'])} of the baseline's {_mib(summary.stash.bytes)}"
                    f" ({r['stash_saved_fraction'] * 100:.1f} % saved)",
                ),
                (
                    f"recomputed{at}",
                    f"{r['extra_macs']:,.0f} MACs ({r['extra_mac_fraction'] * 100:.1f} % of"
                    f" the forward pass), {r['extra_vector_ops']:,.0f} vector ops, in the"
                    " backward stage",
                ),
                (
                    f"recomputing step{at}",
                    f"{r['speedup']:.3f} x the baseline step (at most"
                    f" {r['speedup_bound']:.3f} x: {r['binding_bound']} bound)",
                ),
            ]
        details = {
            "policy": cfg.policy.value,
            "keep_every": cfg.keep_every,
            "blocks": len(cuts(ctx.infos)),
            "base_stash_bytes": summary.stash.bytes,
            "base_forward_macs": summary.macs.fwd,
            "by_kind": by_kind,
        }
        notes = (
            "a block ends at a layer every later path passes through; the recomputed ops"
            " are forward work (phase fwd, counted in the forward MACs) run in the backward"
            " stage and owned by recomputation (summary.json's stages and owners)",
        )
        return Section(self.name, details, tuple(lines), notes, inputs=inputs(cfg, DEFAULTS))

    def _kind_report(self, base: RunResult, step: SimulatedStep) -> dict[str, Any]:
        """One step kind against the baseline step: its stash, what it recomputed (this
        technique's ops: MACs, vector ops, each unit's busy cycles), its cost and bound;
        per mini-batch of a pipeline's graph."""
        summary, base_summary = step.result.step_summary(), base.step_summary()
        repeats = 1 + max(op.tag.mini_batch for op in step.result.graph.ops)
        mine = summary.owners.get(self.name, _NOTHING)
        stash, base_stash = summary.stash.bytes / repeats, base_summary.stash.bytes
        return {
            "stash_bytes": stash,
            "stash_saved_bytes": base_stash - stash,
            "stash_saved_fraction": 1 - stash / max(base_stash, 1),
            "recomputed_ops": mine.ops / repeats,
            "extra_macs": mine.macs / repeats,
            "extra_mac_fraction": mine.macs / repeats / max(base_summary.macs.fwd, 1),
            "extra_vector_ops": mine.vector_ops / repeats,
            "recompute_busy_cycles": {
                unit: sum(cycles) / repeats for unit, cycles in mine.busy_cycles.items()
            },
            "extra_cycles": step.cost.cycles - base.total_cycles,
            "speedup": base.total_cycles / max(step.cost.cycles, 1),
            "speedup_bound": base.total_cycles / max(step.cost.bound_cycles, 1),
            "binding_bound": step.cost.binding_bound,
        }


_NOTHING = WorkSummary(0, 0, 0, 0, 0, 0.0, {})
"""The work of an owner that added no op."""


def _mib(n_bytes: float) -> str:
    return f"{n_bytes / 2**20:,.1f} MiB"
