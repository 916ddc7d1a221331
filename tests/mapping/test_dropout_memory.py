"""Megatron-LM's dropouts in a layer table (``tests/fixtures/workloads/tiny_gpt_dropout.yaml``:
the tiny GPT with byte masks after the embedding, attention and the MLP, and attention
dropout on the probabilities), a block's stash set against Korthikanti et al. (2022)'s
closed forms (their eqs. 2 to 5: ``s b h (34 + 5 a s / h)`` without parallelism,
``s b h (10 + 24 / t + 5 a s / (h t))`` with tensor parallelism, ``s b h (34 / t + 5 a s
/ (h t))`` with sequence parallelism, ``34 s b h / t`` with sequence parallelism and
selective recomputation), to the byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import _Run
from accelsim.graph.ops import GemmOp, Stage, VectorOp
from accelsim.graph.queries import stashed_tensors
from accelsim.techniques.base import BASE
from tests.conftest import ROOT
from tests.lowering.test_tensor_parallel import HEADS, B, H, S, run_file

DROPOUT = ROOT / "tests" / "fixtures" / "workloads" / "tiny_gpt_dropout.yaml"
SP = "run.parallel.sequence_parallel=true"
SELECTIVE = "run.techniques={recomputation: {policy: selective}}"
SBH, AS2B = S * B * H, HEADS * S * S * B


def block(tmp_path: Path, t: int, *sets: str) -> tuple[int, list[str]]:
    """The stash of block h0 (its layers' tensors) at tensor-parallel degree ``t``."""
    plan = [f"run.parallel={{tensor: {t}}}", f"processors={t}", f"workload={DROPOUT}"]
    run = _Run(load_inputs(run_file(tmp_path), parse_sets([*plan, *sets])))
    graph = run.step_graph(run.rewriters[0].name if run.rewriters else BASE)(B)
    stash = [x for x in stashed_tensors(graph.ops) if x.name.startswith("h0.")]
    return sum(x.bytes for x in stash), sorted(x.name for x in stash)


@pytest.mark.parametrize("t", [1, 2, 4])
def test_a_block_stashes_korthikanti_et_als_count(tmp_path: Path, t: int) -> None:
    stash, names = block(tmp_path, t)
    assert stash == SBH * (10 + 24 // t) + 5 * AS2B // t
    assert stash == SBH * (10 + 24 / t + 5 * HEADS * S / (H * t))
    # the masks a byte a word: the hidden dropouts' whole, attention dropout's split
    assert {"h0.drop.mask", "h0.drop_2.mask", "h0.attn.dropout_mask", "h0.attn.dropped"} <= {*names}


@pytest.mark.parametrize("t", [2, 4])
def test_sequence_parallelism_splits_the_rest(tmp_path: Path, t: int) -> None:
    stash, _ = block(tmp_path, t, SP)
    assert stash == SBH * 34 // t + 5 * AS2B // t


@pytest.mark.parametrize("t", [2, 4])
def test_selective_recomputation_drops_the_attention_core_dropout_with_it(
    tmp_path: Path, t: int
) -> None:
    stash, names = block(tmp_path, t, SP, SELECTIVE)
    assert stash == SBH * 34 // t
    assert not any(n.startswith(("h0.attn.probs", "h0.attn.drop")) for n in names)


def test_attention_dropout_ops_by_hand(tmp_path: Path) -> None:
    """Forward: one draw per score (3 ops each: draw, compare, scale) after the softmax,
    ``AV`` reading the dropped probabilities; backward: ``dV`` from them, the mask
    applied to their gradient (1 op a score) before the softmax's backward."""
    run = _Run(load_inputs(run_file(tmp_path), parse_sets([f"workload={DROPOUT}"])))
    ops = {op.name: op for op in run.step_graph(BASE)(B).ops}
    drop, back = ops["h0.attn.dropout.fwd"], ops["h0.attn.dropout.bwd"]
    assert isinstance(drop, VectorOp) and isinstance(back, VectorOp)
    assert (drop.elements, drop.ops_per_element) == (AS2B, 3)
    assert (back.elements, back.ops_per_element, back.stage) == (AS2B, 1, Stage.BACKWARD)
    av, dv = ops["h0.attn.av.fwd"], ops["h0.attn.av.dv"]
    assert isinstance(av, GemmOp) and isinstance(dv, GemmOp)
    assert av.a.name == dv.a.name == "h0.attn.dropped"
    assert [a.tensor.word_bytes for a in drop.writes] == [2, 1]
