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
from typing import Any, ClassVar

from accelsim.errors import Problem
from accelsim.graph.ops import OpGraph
from accelsim.lowering.shapes import LayerInfo
from accelsim.report.result import RunResult
from accelsim.report.summary import WorkSummary
from accelsim.techniques.base import (
    GraphRewriter,
    LoadContext,
    Section,
    SimulatedStep,
    TechniqueContext,
    TrainingPlan,
)
from accelsim.techniques.provenance import Origin, inputs
from accelsim.techniques.recomputation.choice import attends, choose, cuts, segments
from accelsim.techniques.recomputation.config import DEFAULTS, NAME, Policy, RecomputationConfig
from accelsim.techniques.recomputation.rewrite import recomputed


class Recomputation(GraphRewriter[RecomputationConfig]):
    """Activation recomputation as a plug-in: the stash shrinks, forward work runs again
    in the backward stage."""

    trains = "it recomputes the stash the backward pass reads (a forward pass keeps none)"
    name = NAME
    after: ClassVar[Mapping[str, str]] = {
        **dict.fromkeys(
            ("approximate_dropout", "gradient_skipping"),
            "work is removed before work is added: it recomputes the step the pruning"
            " techniques left",
        ),
        "gradient_prediction": "it recomputes for every reader of the backward stage,"
        " ADA-GP's predictor training among them",
    }
    before: ClassVar[Mapping[str, str]] = {
        "optimizer_fusion": "fusion fuses the updates of the step the other rewrites left",
        **dict.fromkeys(
            ("gpipe", "pipedream", "layerpipe"),
            "a schedule places the step graph the rewrites made; its section follows theirs",
        ),
    }

    def defaults(self) -> dict[str, Origin]:
        return DEFAULTS

    def zero_problem(self) -> str | None:
        """Recomputation rewrites the forward and backward ops of a replica's step and
        leaves its updates and collectives to placement: it composes with every stage
        (under stage 3 a recomputed layer runs after its weights' backward gather)."""
        return None

    def validate(self, load: LoadContext) -> list[Problem]:
        cfg = self.config
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
        if cfg.policy is Policy.SELECTIVE and not any(attends(i) for i in load.infos):
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

    def tensor_parallel_problem(self) -> str | None:
        """Selective recomputation redoes attention's scores and softmax, inside a rank's
        heads with no all-reduce among them; the other policies recompute whole blocks
        with their forward all-reduces, as Megatron-LM does."""
        return None

    def pipeline_problem(
        self, infos: Sequence[LayerInfo], chunk_of_layer: Mapping[str, int]
    ) -> str | None:
        """Each stage recomputes its own chunks' work in their backward passes: a
        segment recomputed from one kept input must lie inside one model chunk
        (selective's lie inside one attention layer)."""
        cfg = self.config
        if cfg.policy is Policy.SELECTIVE or not chunk_of_layer:
            return None
        every = 1 if cfg.policy is Policy.FULL else cfg.keep_every
        chunks_of: dict[int, set[int]] = {}
        for layer, segment in segments(infos, every).items():
            chunks_of.setdefault(segment, set()).add(chunk_of_layer[layer])
        split = sorted(s for s, chunks in chunks_of.items() if len(chunks) > 1)
        if not split:
            return None
        return (
            f"policy {cfg.policy.value} with keep_every {every} recomputes {len(split)}"
            f" segment(s) across the end of a pipeline model chunk (the first: segment"
            f" {split[0]}), and each stage recomputes only its own chunks' work: use a"
            " keep_every whose segments end where the chunks do, or full"
        )

    def sequence_parallel_problem(self) -> str | None:
        """Recomputing a block under sequence parallelism would gather its input again
        from the ranks' shares (its all-gathers and reduce-scatters), which the rewrite
        does not repeat."""
        if self.config.policy is Policy.SELECTIVE:
            return None
        return (
            f"policy {self.config.policy.value} not with parallel.sequence_parallel: it"
            " would recompute blocks without their all-gathers and reduce-scatters; use"
            " selective"
        )

    def rewrite_graph(self, graph: OpGraph, kind: str, ctx: TechniqueContext) -> OpGraph:
        cfg = self.config
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
        cfg = self.config
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
