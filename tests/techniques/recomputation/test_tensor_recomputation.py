"""Full recomputation under tensor parallelism, on the 2-block GPT of
``tests/lowering/test_tensor_parallel.py`` (s = 8, h = 16, 4 heads, MLP 64, b = 2) at
t = 2: what a rank stashes and recomputes, counted by hand, the forward all-reduces a
recomputed segment holds repeated, and both engines."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelsim.driver.run import _Run, simulate_training
from accelsim.graph.ops import CommOp, GemmOp, OpGraph, Stage
from accelsim.graph.queries import stashed_tensors
from tests.lowering.test_tensor_parallel import FF, HEADS, B, H, S, inputs

FULL = "run.techniques={recomputation: {policy: full}}"
LAYERS = "run.techniques={recomputation: {policy: every, keep_every: 2}}"
T = 2


def rewritten(tmp_path: Path, policy: str) -> OpGraph:
    return _Run(inputs(tmp_path, T, policy)).step_graph("recomputation")(B)


def test_full_keeps_each_cuts_output_and_recomputes_the_rest(tmp_path: Path) -> None:
    """The full policy keeps the output of every layer all later paths pass through: a
    transformer layer's two residual additions, ``2 s b h`` bytes each (whole on every
    rank); Megatron-LM keeps the layer's input alone (``2 s b h``)."""
    graph = rewritten(tmp_path, FULL)
    block = sorted(x.name for x in stashed_tensors(graph.ops) if x.name.startswith("h0."))
    assert block == ["h0.add.out", "h0.add_2.out"]
    # a rank recomputes its share: the first norm, QKV (16 rows x 24 x 16), QK^T and
    # AV (2 samples x 2 heads, 8 x 8 x 4 each), fc (16 x 32 x 16), GELU; neither
    # row-parallel linear, whose outputs only the kept additions read
    again = [
        op for op in graph.ops if op.stage is Stage.BACKWARD and op.name.endswith(".recompute")
    ]
    macs = sum(op.macs for op in again if isinstance(op, GemmOp))
    per_block = B * S * (3 * H // T) * H + 2 * (B * HEADS // T) * S * S * (H // HEADS)
    per_block += B * S * (FF // T) * H
    assert macs == 2 * per_block == 32_768
    assert not any(isinstance(op, CommOp) and op.stage is Stage.BACKWARD for op in graph.ops)


def test_a_layer_a_segment_repeats_its_forward_all_reduces(tmp_path: Path) -> None:
    """Segments of two cuts (``every``, 2): one ``2 s b h`` residual a layer kept, as
    Megatron-LM's count; recomputing the MLP's row-parallel output and the embedding's
    repeats their all-reduces, and their readers wait for the copies."""
    graph = rewritten(tmp_path, LAYERS)
    stash = [x for x in stashed_tensors(graph.ops) if x.name.startswith(("h0.", "h1."))]
    assert [x.name for x in stash] == ["h1.add.out", "h0.add.out"]
    assert [x.bytes for x in stash] == [2 * S * B * H] * 2
    again = [op for op in graph.ops if isinstance(op, CommOp) and op.stage is Stage.BACKWARD]
    names = [op.name for op in again]
    assert names == [
        "h1.proj.out.allreduce.recompute",
        "h0.proj.out.allreduce.recompute",
        "wte.out.allreduce.recompute",
    ]
    assert all(op.tensor.bytes == B * S * H * 2 for op in again)
    waits = {op.name: op.after for op in graph.ops}
    ids = {op.name: op.op_id for op in again}
    assert ids["h0.proj.out.allreduce.recompute"] in waits["h0.add_2.fwd.recompute"]
    assert ids["wte.out.allreduce.recompute"] in waits["h0.ln_1.fwd.recompute"]


@pytest.mark.parametrize("policy", [FULL, LAYERS])
def test_both_engines_agree(tmp_path: Path, policy: str) -> None:
    steps = [
        simulate_training(inputs(tmp_path, T, policy, f"timing.engine={e}")).steps
        for e in ("simpy", "compiled")
    ]
    simpy, compiled = steps[0]["recomputation"], steps[1]["recomputation"]
    assert simpy.total_cycles == compiled.total_cycles
    assert (simpy.trace.start_cycle == compiled.trace.start_cycle).all()
