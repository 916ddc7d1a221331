"""Compiled programs (``lowering.compile: fused``): the fused attention kernels' MACs and
DRAM bytes counted by hand, vector chains run as one kernel, the kernels of a small
transformer's forward pass, the fixed costs per kernel and per program, both engines.

The small transformer: 256 tokens, width 64, 2 heads of 32, causal, batch 1, on the
default hardware (2 MiB ifmap and filter buffers, 1 MiB ofmap): a 128-position block
fits (queries 2 x 128 x 32 x 2 B = 16 KiB, keys and values 4 x 128 x 32 x 2 B = 32 KiB,
scores, accumulator and statistics 2 x 128 x (128 + 32 + 2) x 4 B = 162 KiB), so the
sequence is T = 2 blocks.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from accelsim.api import simulate
from accelsim.config.base import Convention
from accelsim.config.enums import PsumPolicy, StridedDx
from accelsim.graph import queries
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import GemmOp, OpGraph, Phase, Stage, TensorKind, VectorOp
from accelsim.lowering.context import StepContext
from accelsim.lowering.flash_attention import AttentionBudget, FusedAttention, forward, tiling
from accelsim.mapping.schedule import schedule
from accelsim.report.result import RunResult
from accelsim.timing.costs import op_costs
from accelsim.timing.machine import machine_of
from accelsim.timing.tile_groups import simulate_grouped
from accelsim.timing.trace import launched
from tests.conftest import ROOT, make_hw

TINY = """\
name: tiny_transformer
input: {{kind: tokens, length: 256}}
layers:
  - {{name: emb, kind: embedding, num_embeddings: 1000, embedding_dim: 64}}
  - {{name: ln1, kind: layernorm}}
  - {{name: attn, kind: attention, heads: 2, causal: {causal}}}
  - {{name: add1, kind: add, inputs: [emb, attn]}}
  - {{name: ln2, kind: layernorm}}
  - {{name: fc1, kind: linear, out_features: 256}}
  - {{name: act, kind: activation, function: gelu}}
  - {{name: fc2, kind: linear, out_features: 64}}
  - {{name: add2, kind: add, inputs: [add1, fc2]}}
  - {{name: head, kind: linear, out_features: 1000}}
  - {{name: loss, kind: cross_entropy}}
"""


def step_file(tmp_path: Path, causal: bool = True) -> Path:
    """The tiny transformer's run file: a training step, SGD, batch 1."""
    (tmp_path / "tiny.yaml").write_text(TINY.format(causal=str(causal).lower()))
    (tmp_path / "run.yaml").write_text(
        "name: tiny\n"
        f"hardware: {ROOT}/configs/hardware/default.yaml\n"
        "workload: tiny.yaml\n"
        f"energy: {ROOT}/configs/energy/horowitz45.yaml\n"
        "batch_size: 1\noptimizer: {kind: sgd}\n"
    )
    return tmp_path / "run.yaml"


def step(tmp_path: Path, mode: str, causal: bool = True, *sets: str) -> RunResult:
    """The tiny transformer's training step under ``lowering.compile``."""
    return simulate(step_file(tmp_path, causal), [f"lowering.compile={mode}", *sets]).base


def by_name(result: RunResult) -> dict[str, int]:
    return {op.name: op.op_id for op in result.graph.ops}


def dram(result: RunResult, names: list[str]) -> tuple[int, int]:
    """DRAM bytes the named ops read and write."""
    ids = [by_name(result)[n] for n in names]
    costs = result.trace.costs
    return int(costs.dram_read_bytes[ids].sum()), int(costs.dram_ofmap_write_bytes[ids].sum())


def macs(result: RunResult, name: str) -> int:
    op = result.graph.ops[by_name(result)[name]]
    assert isinstance(op, GemmOp)
    return op.macs


def test_the_block_fits_the_buffers() -> None:
    """128 positions fit the default buffers; with a 64 KiB ofmap buffer the scores
    (2 x 128 x 162 x 4 B = 162 KiB) do not, 64 positions (2 x 64 x 98 x 4 B = 49 KiB) do;
    a sequence shorter than a block is one block."""
    budget = AttentionBudget.of(make_hw())
    assert tiling(budget, 256, 2, 2, 32, True, 2).block == 128
    small = AttentionBudget(budget.ifmap_bytes, budget.filter_bytes, 64 * 1024)
    assert tiling(small, 256, 2, 2, 32, True, 2).block == 64
    short = tiling(budget, 77, 2, 2, 32, True, 2)
    assert (short.block, short.blocks, short.keys) == (77, 1, 77)


@pytest.mark.parametrize("causal", [False, True])
def test_fused_attention_forward_counted_by_hand(tmp_path: Path, causal: bool) -> None:
    """T = 2 blocks of 128: all 4 score blocks, or causal the 3 with j <= i (the two
    diagonal ones whole).  Per head: QK^T and AV are blocks x 128 x 128 x 32 MACs; Q
    is read once (256 x 32 x 2 B per head), K and V once per block they meet (the
    blocks' keys: 128 x 32 x 2 B each), O written once, with 2 fp32 statistics per
    query row; the scores never reach DRAM."""
    fused = step(tmp_path, "fused", causal)
    blocks = 3 if causal else 4
    heads = 2
    block_macs = 128 * 128 * 32
    assert macs(fused, "attn.qk.fwd") == heads * blocks * block_macs
    assert macs(fused, "attn.av.fwd") == heads * blocks * block_macs
    q_bytes = heads * 256 * 32 * 2
    kv_bytes = heads * blocks * 128 * 32 * 2  # K, and again V
    o_bytes = 256 * 64 * 2
    stats_bytes = heads * 256 * 2 * 4
    kernel = ["attn.qk.fwd", "attn.softmax.fwd", "attn.av.fwd"]
    assert dram(fused, kernel) == (q_bytes + 2 * kv_bytes, o_bytes + stats_bytes)
    assert [fused.graph.ops[i].name for i in group_of(fused, "attn.qk.fwd")] == kernel
    on_chip = {k[0] for k in fused.graph.on_chip}
    assert {"attn.scores", "attn.probs"} <= on_chip
    eager = step(tmp_path, "eager", causal)
    assert macs(eager, "attn.qk.fwd") == heads * 4 * block_macs  # eager computes every score


def test_fused_attention_backward_recomputes_the_scores(tmp_path: Path) -> None:
    """Backward (causal): the dK, dV kernel and the dQ kernel each recompute QK^T (3
    blocks per head, forward work in the backward stage) and dP; no op reads a stored
    heads x S x S tensor.  Each kernel reads Q (or the key block side) and K as the
    forward kernel does; the dK, dV kernel reads each query row's 2 statistics and D
    once per key block it meets (768 rows in all), the dQ kernel once."""
    fused = step(tmp_path, "fused", True)
    ops = fused.graph.ops
    recomputed = [
        op
        for op in ops
        if isinstance(op, GemmOp) and op.phase is Phase.FWD and op.stage is Stage.BACKWARD
    ]
    assert [op.name for op in recomputed] == ["attn.qk.dkv", "attn.qk.dq"]
    assert sum(op.macs for op in recomputed) == 2 * macs(fused, "attn.qk.fwd")
    square = 256 * 256 * 2
    for op in (op for op in ops if op.layer == "attn"):
        for access in queries.reads_of(op):
            stored = access.tensor.key not in fused.graph.on_chip
            assert not (stored and access.tensor.elements >= square), (op.name, access.tensor)
    qk_bytes = 2 * 256 * 32 * 2 + 2 * 3 * 128 * 32 * 2
    assert dram(fused, ["attn.qk.dkv"]) == (qk_bytes, 0)
    assert dram(fused, ["attn.qk.dq"]) == (qk_bytes, 0)
    assert dram(fused, ["attn.softmax.dkv"]) == (768 * (2 + 1) * 4, 0)
    assert dram(fused, ["attn.softmax.dq"]) == (512 * (2 + 1) * 4, 0)
    dq_kernel = ["attn.qk.dq", "attn.dp.dq", "attn.softmax.dq", "attn.qk.dq_grad"]
    assert [ops[i].name for i in group_of(fused, "attn.qk.dq")] == dq_kernel


def group_of(result: RunResult, name: str) -> tuple[int, ...]:
    op = by_name(result)[name]
    return next(g for g in queries.tile_groups(result.graph) if op in g)


def forward_kernels(graph: OpGraph) -> list[list[str]]:
    """The forward stage's kernels: each tile group, and each op outside one, by name."""
    forward = [
        op.op_id
        for op in graph.ops
        if op.stage is Stage.FORWARD and isinstance(op, (GemmOp, VectorOp))
    ]
    groups = {i: g for g in queries.tile_groups(graph) for i in g}
    kernels: list[list[str]] = []
    for i in forward:
        group = groups.get(i, (i,))
        if group[0] == i:
            kernels.append([graph.ops[j].name for j in group if j in forward])
    return kernels


def test_forward_kernels_of_a_small_transformer(tmp_path: Path) -> None:
    """Eager: 16 forward ops, each a kernel.  Fused: 7 kernels: the embedding with the
    first layernorm, the QKV projection, the attention kernel, the output projection
    with the residual add and the second layernorm, fc1 with GELU, fc2 with the
    residual add, the head with the loss."""
    eager = step(tmp_path, "eager")
    assert len(forward_kernels(eager.graph)) == 16
    fused = step(tmp_path, "fused")
    assert forward_kernels(fused.graph) == [
        ["emb.fwd", "ln1.fwd"],
        ["attn.qkv.fwd"],
        ["attn.qk.fwd", "attn.softmax.fwd", "attn.av.fwd"],
        ["attn.out.fwd", "add1.fwd", "ln2.fwd"],
        ["fc1.fwd", "act.fwd"],
        ["fc2.fwd", "add2.fwd"],
        ["head.fwd", "loss.fwd"],
    ]


def test_a_vector_chain_reads_its_inputs_and_writes_its_outputs_once(tmp_path: Path) -> None:
    """Output projection -> residual add -> layernorm: eagerly each op reads and writes
    DRAM (the projection's output written, then read by the add; the add's output
    read again by the layernorm).  Fused, the kernel reads its inputs once (the
    projection's 256 x 64 input and 64 x 64 weight, the residual, the layernorm's 128
    parameters) and writes what later ops read: the sum (the next residual) and the
    layernorm's output; the projection's output, read only inside, never leaves."""
    chain = ["attn.out.fwd", "add1.fwd", "ln2.fwd"]
    act, weight, params = 256 * 64 * 2, 64 * 64 * 2, 128 * 2
    fused = step(tmp_path, "fused")
    assert dram(fused, chain) == (act + weight + act + params, 2 * act)
    eager = step(tmp_path, "eager")
    assert dram(eager, chain) == (act + weight + 2 * act + act + params, 3 * act)


def test_fixed_costs_per_kernel_and_per_program(tmp_path: Path) -> None:
    """With op_overhead_cycles 100 and kernel_overhead_cycles 30, every kernel pays 30
    once (its lead op; the other members nothing) and the program 70 before its first
    op; eagerly every GEMM and vector op pays 100."""
    sets = ("hardware.timing.op_overhead_cycles=100", "hardware.timing.kernel_overhead_cycles=30")
    fused = step(tmp_path, "fused", True, *sets)
    graph, costs = fused.graph, fused.trace.costs
    work = [op.op_id for op in graph.ops if isinstance(op, (GemmOp, VectorOp))]
    in_groups = {i for g in queries.tile_groups(graph) for i in g}
    kernels = len(queries.tile_groups(graph)) + len(set(work) - in_groups)
    assert int(costs.overhead_cycles.sum()) == 30 * kernels
    assert int(fused.trace.start_cycle.min()) == 70
    eager = step(tmp_path, "eager", True, *sets)
    eager_work = [op for op in eager.graph.ops if isinstance(op, (GemmOp, VectorOp))]
    assert int(eager.trace.costs.overhead_cycles.sum()) == 100 * len(eager_work)
    assert int(eager.trace.start_cycle.min()) == 0


def test_a_lone_gemm_costs_as_a_one_kernel_program() -> None:
    """One GEMM: eagerly it pays op_overhead_cycles; as a program, its kernel's 30 and
    the program's 70: the same cycles, so the GEMM calibration holds under both."""
    hw = make_hw(**{"timing.op_overhead_cycles": 100, "timing.kernel_overhead_cycles": 30})
    b = GraphBuilder(hw.word_bytes)
    x, w, y = (b.tensor(n, TensorKind.ACTIVATION, 512 * 512) for n in "xwy")
    b.gemm("g", "g", Phase.FWD, 512, 512, 512, 1, x, w, y)
    graph = b.build()
    machine = machine_of(hw)
    folds = schedule(graph, (machine.array,))
    timing = hw.timing
    totals = []
    for per_kernel in (False, True):
        costs = op_costs(
            graph, folds, machine, Convention.ACCELSIM, PsumPolicy.CHUNK, 8, per_kernel=per_kernel
        )
        trace = simulate_grouped(graph, costs, machine)
        totals.append(launched(trace, timing.program_cycles() if per_kernel else 0).total_cycles)
    assert totals[0] == totals[1]


def test_both_engines_agree_on_a_fused_step(tmp_path: Path) -> None:
    simpy = step(tmp_path, "fused", True, "timing.engine=simpy").trace
    compiled = step(tmp_path, "fused", True, "timing.engine=compiled").trace
    assert (simpy.engine, compiled.engine) == ("simpy", "compiled")
    assert np.array_equal(simpy.start_cycle, compiled.start_cycle)
    assert np.array_equal(simpy.end_cycle, compiled.end_cycle)
    assert simpy.total_cycles == compiled.total_cycles


def test_recomputation_recomputes_the_fused_kernel_on_chip(tmp_path: Path) -> None:
    """Full recomputation copies the forward attention kernel into the backward stage:
    the copy's scores and probabilities stay on chip and its tile streams hold, so it
    moves the forward kernel's DRAM bytes; the backward kernels keep their streams of
    the tiles they hold (dK takes Q's tiles from the recomputed S^T).  Selective
    recomputation has no stored scores of a fused kernel to drop: it recomputes nothing."""
    full = simulate(
        step_file(tmp_path), ["lowering.compile=fused", "techniques.recomputation.policy=full"]
    )
    again = full.steps["recomputation"]
    kernel = ["attn.qk.fwd", "attn.softmax.fwd", "attn.av.fwd"]
    assert dram(again, [f"{n}.recompute" for n in kernel]) == dram(full.base, kernel)
    assert dram(again, ["attn.qk.dk"]) == dram(full.base, ["attn.qk.dk"])
    selective = simulate(
        step_file(tmp_path), ["lowering.compile=fused", "techniques.recomputation.policy=selective"]
    )
    assert selective.steps["recomputation"].total_cycles == selective.base.total_cycles


def test_grouped_query_attention_loads_each_key_block_once_per_group() -> None:
    """2 query heads sharing 1 key/value head, 256 tokens, heads of 32, not causal: a
    query block packs both heads' 128 positions (256 rows), so QK^T's MACs are those of
    2 heads (2 x 256 x 256 x 32), Q is read once (2 x 256 x 32 x 2 B) and K once per
    query block (2 x 256 x 32 x 2 B): half of what 2 key/value heads read."""
    hw = make_hw()
    budget = AttentionBudget.of(hw)
    b = GraphBuilder(hw.word_bytes)
    ctx = StepContext(b, 1, StridedDx.SKIP_ZEROS, budget)
    qkv = b.tensor("qkv", TensorKind.ACTIVATION, 256 * (64 + 2 * 32))
    out = b.tensor("out", TensorKind.ACTIVATION, 256 * 64)
    tiles = tiling(budget, 256, 2, 1, 32, False, 2)
    assert (tiles.block, tiles.blocks, tiles.group) == (128, 2, 2)
    forward(ctx, FusedAttention("a", tiles, 1, 1, qkv, out))
    graph = b.build()
    qk = graph.ops[0]
    assert isinstance(qk, GemmOp) and qk.macs == 2 * 256 * 256 * 32
    machine = machine_of(hw)
    folds = schedule(graph, (machine.array,))
    costs = op_costs(graph, folds, machine, Convention.ACCELSIM, PsumPolicy.CHUNK, 8)
    assert int(costs.dram_read_bytes[0]) == 2 * 256 * 32 * 2 + 2 * 256 * 32 * 2


def test_rotary_grouped_query_attention_as_fused_kernels(tmp_path: Path) -> None:
    """The tiny transformer's attention with 1 key/value head for its 2 query heads of
    32 and a rotary embedding, fused: the projection is 64 + 2 x 32 = 128 wide; the
    kernels read the rotated Q and K (256 x 96 elements) and V from the projection; the
    rotation's transpose adds dQ and dK (256 x 96) to the projection's gradient beside
    the kernel's dV, so the input gradient waits for both; both engines agree."""
    text = TINY.format(causal="true").replace(
        "heads: 2, causal: true", "heads: 2, kv_heads: 1, rotary: true, causal: true"
    )
    run = step_file(tmp_path)  # the tiny transformer's file, replaced by this variant
    (tmp_path / "tiny.yaml").write_text(text)
    results = {
        e: simulate(run, ["lowering.compile=fused", f"timing.engine={e}"]).base
        for e in ("simpy", "compiled")
    }
    result = results["simpy"]
    ops = by_name(result)
    graph = result.graph
    projection = graph.ops[ops["attn.qkv.fwd"]]
    assert isinstance(projection, GemmOp) and projection.n == 128
    qk = graph.ops[ops["attn.qk.fwd"]]
    assert isinstance(qk, GemmOp) and (qk.a.name, qk.b.name) == ("attn.qk", "attn.qk")
    av = graph.ops[ops["attn.av.fwd"]]
    assert isinstance(av, GemmOp) and av.b.name == "attn.qkv"
    rotary = graph.ops[ops["attn.rotary.bwd"]]
    assert isinstance(rotary, VectorOp) and rotary.elements == 256 * 96
    dx = graph.ops[ops["attn.qkv.dx"]]
    assert {ops["attn.av.dv"], ops["attn.rotary.bwd"]} <= set(dx.deps)
    assert not any(o.name == "attn.softmax.bwd" for o in graph.ops)
    simpy, compiled = results["simpy"].trace, results["compiled"].trace
    assert list(simpy.end_cycle) == list(compiled.end_cycle)


def test_attention_as_separate_kernels(tmp_path: Path) -> None:
    """``lowering.attention: separate``: QK^T with its mask and softmax (the chain fused
    into the GEMM's output) is one kernel and AV another, so the probabilities (2 heads
    x 256 x 256, 2 B each) go through DRAM between them: 8 forward kernels, one more
    than with the flash kernel; the summary names the setting."""
    result = step(tmp_path, "fused", True, "lowering.attention=separate")
    assert forward_kernels(result.graph)[2:4] == [
        ["attn.qk.fwd", "attn.mask.fwd", "attn.softmax.fwd"],
        ["attn.av.fwd"],
    ]
    assert len(forward_kernels(result.graph)) == 8
    # the softmax writes the probabilities; AV reads them and V (256 x 64 x 2 B)
    assert dram(result, ["attn.softmax.fwd"]) == (0, 2 * 256 * 256 * 2)
    assert dram(result, ["attn.av.fwd"])[0] == 2 * 256 * 256 * 2 + 256 * 64 * 2
    summary = result.summary()
    assert (summary["compile"], summary["attention"]) == ("fused", "separate")
