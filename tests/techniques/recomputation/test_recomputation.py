"""Activation recomputation: blocks from the layer graph, the stash and the extra MACs of
ResNet-18 and GPT-2 counted by hand, the ops it adds (forward work, backward stage, its
own), its report, its load-time checks, and its composition with every other technique."""

from __future__ import annotations

import collections
from functools import cache
from pathlib import Path

import pytest

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import _Run, simulate_training
from accelsim.errors import ConfigError
from accelsim.graph import queries
from accelsim.graph.check import graph_problems
from accelsim.graph.ops import GemmOp, OpGraph, Phase, Stage, TransferOp
from accelsim.lowering.shapes import INPUT_NAME
from accelsim.report.training import TrainingResult
from accelsim.techniques.base import kind_definers
from accelsim.techniques.recomputation.choice import cuts
from tests.conftest import ROOT

RUNS = ROOT / "configs" / "runs"
RESNET = (RUNS / "default.yaml", "workloads/resnet18.yaml")
GPT2 = (RUNS / "gpt2_small.yaml", "workloads/gpt2_small.yaml")
WORD = 2  # bytes of an activation on the default accelerator
NAME = "recomputation"


@cache
def rewritten(model: tuple[Path, str], batch: int, setting: str) -> tuple[OpGraph, OpGraph]:
    """The lowered step of ``model`` at ``batch`` and its rewrite by recomputation."""
    run_file, workload = model
    sets = [f"workload={workload}", f"batch_size={batch}", f"run.techniques={{{NAME}: {setting}}}"]
    run = _Run(load_inputs(run_file, parse_sets(sets)))
    lowered = run.lowered(batch)
    (technique,) = run.rewriters
    return lowered, technique.rewrite_graph(lowered, NAME, run.ctx)


def stash_bytes(graph: OpGraph) -> int:
    return sum(t.bytes for t in queries.stashed_tensors(graph.ops))


def extra_macs(graph: OpGraph) -> int:
    return sum(op.macs for op in graph.ops if isinstance(op, GemmOp) and op.owner == NAME)


def test_blocks_end_where_every_later_path_passes() -> None:
    """ResNet-18: the stem's four layers are a chain (each a cut); a residual block's
    input is read again by its add (or its downsample conv), so nothing inside it is a
    cut, but its add and the ReLU after it are; then avgpool, fc, loss: 4 + 8 x 2 + 3.
    GPT-2: wte and wpe both read the tokens, so the first cut is their add; the dropout
    after it; each transformer sub-layer's residual add (its input is read by it); then
    ln_f, lm_head, loss: 2 + 12 x 2 + 3."""
    infos = load_inputs(RESNET[0]).infos
    found = cuts(infos)
    assert found[:6] == ["conv1", "bn1", "relu1", "maxpool", "layer1.0.add", "layer1.0.relu2"]
    assert found[-3:] == ["avgpool", "fc", "loss"] and len(found) == 4 + 8 * 2 + 3
    gpt2 = load_inputs(GPT2[0]).infos
    found = cuts(gpt2)
    assert found[:4] == ["add", "drop", "h.0.add", "h.0.add_2"]
    assert found[-3:] == ["ln_f", "lm_head", "loss"] and len(found) == 2 + 12 * 2 + 3


def test_resnet18_full_stash_and_extra_macs_by_hand() -> None:
    """ResNet-18, batch N = 2, policy full, 2-byte activations.

    Kept (each block's input, and what the backward stage still reads of the layers
    that are blocks of their own): the input (3 x 224 x 224); conv1's output (bn1's
    backward reads it) and relu1's (its own backward and maxpool's), 64 x 112 x 112
    each; maxpool's (layer1.0's input) 64 x 56 x 56; the eight blocks' outputs (each
    read by its ReLU's backward and the next block's conv1 and downsample dW):
    2 x 64 x 56^2, 2 x 128 x 28^2, 2 x 256 x 14^2, 2 x 512 x 7^2; avgpool's 512 (fc's
    dW); fc's 1000 logits (the loss, recomputed, reads them).  That is 5,422,032
    elements per 2 samples: 10,844,064 B, 14 tensors.

    Recomputed: in every block both 3x3 convs (and the downsample conv), with their
    batchnorm and ReLU between, whose outputs the backward reads; not bn2 and the add
    (their outputs only feed the block's output, kept) and not the stem's conv1 (its
    output is kept).  A 3x3 conv of C channels at H x W: H W C^2 9 MACs; per sample
    layer1 4 x 56^2 64^2 9 = 462,422,016; layers 2-4 each a stride-2 conv1 (57,802,752),
    three C -> C convs (3 x 115,605,504) and the 1x1 downsample (6,422,528):
    411,041,792; in all 1,695,547,392 per sample, 3,391,094,784 for two, 93.5 % of the
    forward's 1,814,073,344 per sample (the stem conv's 118,013,952 and fc's 512,000
    are the rest).  The model and the hand count agree to the byte and the MAC."""
    n = 2
    lowered, graph = rewritten(RESNET, n, "{}")
    stem = 3 * 224 * 224 + 2 * 64 * 112 * 112 + 64 * 56 * 56
    blocks = 2 * (64 * 56 * 56 + 128 * 28 * 28 + 256 * 14 * 14 + 512 * 7 * 7)
    assert stash_bytes(graph) == n * (stem + blocks + 512 + 1000) * WORD == 10_844_064
    assert len(graph.stashed) == 14
    same = 56 * 56 * 64 * 64 * 9
    assert same == 115_605_504
    per_sample = 4 * same + 3 * (same // 2 + 3 * same + 28 * 28 * 128 * 64)
    assert extra_macs(graph) == n * per_sample == 3_391_094_784
    forward = sum(op.macs for op in lowered.ops if isinstance(op, GemmOp) and op.phase is Phase.FWD)
    assert forward == n * (per_sample + 112 * 112 * 64 * 3 * 49 + 512 * 1000)
    assert stash_bytes(lowered) == 20_578_208  # the 41 tensors without recomputation


def test_gpt2_stash_and_extra_macs_by_hand() -> None:
    """GPT-2 small, batch 1: s = 1024 tokens, d = 768, 12 heads, 12 layers, 2-byte
    activations; a token id takes an activation word.

    full: kept are the tokens (1024), the embeddings' sum and its dropout (the first
    two blocks), each sub-layer's residual output (24), ln_f's output (lm_head's dW)
    and the logits s x 50257 (the loss, recomputed, reads them): 1024 + 27 x 786,432 +
    51,463,168 elements = 145,395,712 B in 29 tensors.  Recomputed per layer: the QKV
    projection s 3d d = 1,811,939,328 MACs, QK^T and AV 12 heads x s^2 x 64 =
    805,306,368 each, the output projection s d^2 = 603,979,776, the MLP's two s 4d d =
    2,415,919,104 each: 8,858,370,048, x 12 = 106,300,440,576 (72.9 % of the forward:
    lm_head's s d 50257 is not recomputed).

    selective: only QK^T (and the causal mask and softmax) is recomputed, 12 x
    805,306,368 = 9,663,676,416 MACs, and only the softmax output leaves the stash,
    12 heads x s^2 per layer: 12 x 12 x 1024^2 x 2 B = 301,989,888 B.  Korthikanti
    et al. count 5 a s^2 b bytes per layer (scores, softmax output and dropout mask);
    this model's attention saves only the softmax output (its scores are read by the
    softmax alone, and the imported GPT-2 has no dropout on the probabilities), so the
    model saves 2 a s^2 b of those 5.

    every, keep_every 2: a segment is a whole transformer layer (two blocks) and the
    first one also takes in the embeddings: kept are the tokens, drop's output, the 12
    layers' outputs and the logits: 1024 + 13 x 786,432 + 51,463,168 elements =
    123,375,616 B; the same GEMMs are recomputed (the adds and ln_f, vector work, too)."""
    s, d, layers = 1024, 768, 12
    lowered, full = rewritten(GPT2, 1, "{}")
    logits = s * 50257
    assert stash_bytes(full) == (s + 27 * s * d + logits) * WORD == 145_395_712
    assert len(full.stashed) == 29
    per_layer = s * 3 * d * d + 2 * 12 * s * s * 64 + s * d * d + 2 * s * 4 * d * d
    assert per_layer == 8_858_370_048
    assert extra_macs(full) == layers * per_layer == 106_300_440_576
    _, selective = rewritten(GPT2, 1, "{policy: selective}")
    assert extra_macs(selective) == layers * 12 * s * s * 64 == 9_663_676_416
    saved = stash_bytes(lowered) - stash_bytes(selective)
    assert saved == layers * 12 * s * s * WORD == 301_989_888
    recomputed = [op.name for op in selective.ops if op.owner == NAME]
    assert recomputed[:3] == [
        "h.11.attn.qk.fwd.recompute",
        "h.11.attn.mask.fwd.recompute",
        "h.11.attn.softmax.fwd.recompute",
    ]
    assert len(recomputed) == 3 * layers
    _, every = rewritten(GPT2, 1, "{policy: every, keep_every: 2}")
    assert stash_bytes(every) == (s + 13 * s * d + logits) * WORD == 123_375_616
    assert extra_macs(every) == extra_macs(full)


def test_recomputed_ops_are_forward_work_in_the_backward_stage() -> None:
    """Each recomputed op computes what its forward op computes (phase fwd, the same
    MACs), runs in the backward stage, is the technique's, and writes a new version;
    the backward reads those versions, and no forward-stage op reads them."""
    lowered, graph = rewritten(GPT2, 1, "{policy: selective}")
    assert graph_problems(graph, (INPUT_NAME,)) == []
    forward = {op.name: op for op in lowered.ops}
    mine = [op for op in graph.ops if op.owner == NAME]
    for op in mine:
        original = forward[op.name.removesuffix(".recompute")]
        assert (op.phase, op.stage, op.layer) == (Phase.FWD, Stage.BACKWARD, original.layer)
        assert getattr(op, "macs", 0) == getattr(original, "macs", 0)
        assert all(a.tensor.version == 1 for a in queries.writes_of(op))
    remade = {a.tensor.key for op in mine for a in queries.writes_of(op)}
    readers = [
        op
        for op in graph.ops
        if op.owner != NAME and any(a.tensor.key in remade for a in queries.reads_of(op))
    ]
    assert {op.stage for op in readers} == {Stage.BACKWARD}
    read = {a.tensor.key for op in readers for a in queries.reads_of(op)} & remade
    # per layer one softmax output (the scores feed only the softmax), read by the
    # softmax's backward and the AV GEMM's dV; none of it is stashed
    assert len(read) == 12 and len(readers) == 2 * 12
    assert not read & graph.stashed


@cache
def resnet_run() -> TrainingResult:
    sets = ["batch_size=2", f"run.techniques={{{NAME}: {{}}}}"]
    return simulate_training(load_inputs(RESNET[0], parse_sets(sets)))


def test_the_report_counts_recomputed_macs_as_forward_work_of_its_own() -> None:
    """The MAC table counts recomputed MACs as forward MACs; summary.json's stages put
    them in the backward stage and its owners under recomputation; the report's
    speedup is below 1 and printed beside its bound."""
    result = resnet_run()
    base, step = result.base.step_summary(), result.steps[NAME].step_summary()
    extra = 3_391_094_784
    assert step.macs.fwd == base.macs.fwd + extra
    assert (step.macs.bwd_input, step.macs.bwd_weight) == (
        base.macs.bwd_input,
        base.macs.bwd_weight,
    )
    assert step.owners[NAME].macs == extra and step.owners["core"].macs == base.macs.total
    assert step.stages["forward"].macs == base.macs.fwd
    assert step.stages["backward"].macs == base.macs.bwd_input + base.macs.bwd_weight + extra
    assert step.stash.bytes == 10_844_064 and base.stash.bytes == 20_578_208
    assert result.training is not None
    section = result.training.sections[NAME]
    report = section.details["by_kind"][NAME]
    assert report["extra_macs"] == extra and report["stash_saved_bytes"] == 9_734_144
    assert report["speedup"] == result.base.total_cycles / result.steps[NAME].total_cycles < 1
    assert report["speedup"] <= report["speedup_bound"]
    lines = dict(section.lines)
    assert lines["stash"] == "10.3 MiB of the baseline's 19.6 MiB (47.3 % saved)"
    assert lines["recomputed"].startswith("3,391,094,784 MACs (93.5 % of the forward pass)")
    assert lines["recomputing step"].startswith(f"{report['speedup']:.3f} x the baseline step")
    assert f"at most {report['speedup_bound']:.3f} x" in lines["recomputing step"]
    assert section.provenance() == "ours: policy, keep_every"


@pytest.mark.parametrize(
    ("setting", "where", "message"),
    [
        (
            "{keep_every: 3}",
            "techniques.recomputation.keep_every",
            "read only by policy: every (the policy is full) (got 3)",
        ),
        (
            "{policy: selective}",
            "techniques.recomputation.policy",
            "selective recomputes attention's scores and softmax, and the workload has no"
            " attention layer; use full or every (got 'selective')",
        ),
    ],
)
def test_load_time_checks(setting: str, where: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_inputs(RESNET[0], parse_sets([f"run.techniques={{{NAME}: {setting}}}"]))
    assert str(caught.value) == f"--set: run.{where}: {message}"


DROPOUT_MLP = RUNS / "mlp_dropout.yaml"
OTHERS = {
    "approximate_dropout": "{rate: 0.5, pattern: row}",
    "gradient_skipping": "{grouping: filter, skip_fraction: 0.5}",
    "gradient_prediction": "{}",
    "optimizer_fusion": "{mode: forward}",
}


def content(graph: OpGraph) -> collections.Counter[tuple[object, ...]]:
    """What a graph computes, whatever the order of its ops: each op's name, phase,
    stage, owner and size, and the tensors it reads and writes (by key)."""
    return collections.Counter(
        (
            op.name,
            op.phase,
            op.stage,
            op.owner,
            getattr(op, "macs", 0),
            getattr(op, "vector_ops", 0),
            tuple(a.tensor.key for a in queries.reads_of(op)),
            tuple(a.tensor.key for a in queries.writes_of(op)),
        )
        for op in graph.ops
    )


@pytest.mark.parametrize("other", list(OTHERS))
def test_composes_with_every_rewriting_technique_in_both_orders(other: str) -> None:
    """Each other rewriting technique's rewrite and recomputation's, applied in either
    order to the dropout MLP's step (each step kind): the same ops, stash and
    parameters.  ADA-GP's GP step has no backward stage: nothing is recomputed."""
    sets = ["batch_size=16", f"run.techniques={{{NAME}: {{}}, {other}: {OTHERS[other]}}}"]
    run = _Run(load_inputs(DROPOUT_MLP, parse_sets(sets)))
    lowered = run.lowered(16)
    mine = next(t for t in run.rewriters if t.name == NAME)
    theirs = next(t for t in run.rewriters if t.name == other)
    definers = kind_definers([theirs])
    kinds = list(definers[0].step_kinds(run.ctx)) if definers else [NAME]
    for kind in kinds:
        one = mine.rewrite_graph(theirs.rewrite_graph(lowered, kind, run.ctx), kind, run.ctx)
        two = theirs.rewrite_graph(mine.rewrite_graph(lowered, kind, run.ctx), kind, run.ctx)
        assert content(one) == content(two), kind
        assert one.stashed == two.stashed and one.parameters == two.parameters
        assert graph_problems(one, (INPUT_NAME,)) == graph_problems(two, (INPUT_NAME,)) == []
        recomputed = [op for op in one.ops if op.owner == NAME]
        assert bool(recomputed) == (kind != "gp"), kind


def test_the_stash_per_pipeline_processor_shrinks() -> None:
    """The dropout MLP (784 -> 2048 -> 2048 -> 10, batch 64) under GPipe on two
    processors: full recomputation regenerates drop1's and drop2's masks in the backward
    stage, so each processor's stash loses one mask of all micro-batches in flight,
    64 x 2048 bits = 16,384 B; the loss's probabilities (64 x 10 x 2 B) give way to
    the logits it is recomputed from, the same size."""

    def stash(techniques: str) -> list[int]:
        sets = ["processors=2", "batch_size=64", f"run.techniques={{{techniques}}}"]
        result = simulate_training(load_inputs(DROPOUT_MLP, parse_sets(sets)))
        assert result.training is not None
        rows = result.training.sections["gpipe"].details["processors"]
        return [row["activation_stash_bytes"] for row in rows]

    plain, recomputing = stash("gpipe: {}"), stash(f"gpipe: {{}}, {NAME}: {{}}")
    assert [a - b for a, b in zip(plain, recomputing, strict=True)] == [64 * 2048 // 8] * 2


def test_a_segment_a_pipeline_cuts_in_two_is_recomputed_on_both_stages() -> None:
    """keep_every beyond the dropout MLP's blocks makes one segment of the whole network:
    under GPipe on two processors each stage recomputes its own layers, and the first
    sends the second the recomputed tensors its layers read (their new version: drop1's
    output, fc2's input), once per micro-batch; the stash keeps only the input, 64 x 784
    activations (per mini-batch)."""
    sets = [
        "processors=2",
        "batch_size=64",
        f"run.techniques={{gpipe: {{}}, {NAME}: {{policy: every, keep_every: 100}}}}",
    ]
    result = simulate_training(load_inputs(DROPOUT_MLP, parse_sets(sets)))
    graph = next(iter(result.steps.values())).graph
    mine = [op for op in graph.ops if op.owner == NAME]
    assert {graph.processor[op.op_id] for op in mine} == {0, 1}
    sent = {
        (op.tensor.step_name, op.tensor.version)
        for op in graph.ops
        if isinstance(op, TransferOp) and op.tensor.version
    }
    assert sent == {("drop1.out", 1)}
    assert result.training is not None
    report = result.training.sections[NAME].details["by_kind"]["gpipe"]
    assert report["stash_bytes"] == 64 * 784 * WORD
