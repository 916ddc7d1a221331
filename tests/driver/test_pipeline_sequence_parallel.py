"""Sequence parallelism under a pipeline plan on the 4-block GPT of
``tests/fixtures/workloads/tiny_gpt_blocks.yaml`` (s = 8, h = 16, 2-byte words;
t = 2, p = 2, batch 4): each chunk's passes hold the tensor group's collectives,
counted by hand, and each rank sends its peer its share of the sequence."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from accelsim.driver.pipeline_step import _chunk_ops, rank_step
from accelsim.driver.run import _Run, simulate_training
from accelsim.graph.ops import CommOp, Stage
from accelsim.mapping.pipeline_stages import cut_stages
from accelsim.network.collectives import Collective
from accelsim.techniques.base import BASE
from tests.mapping.test_pipeline_memory import H, S, loaded

WHOLE = 2 * S * H  # a gathered (or reduced, then scattered) activation: 256 bytes
NORM = 2 * 2 * H  # a norm's weight and bias gradients: 64 bytes
AG, RS, AR = Collective.ALL_GATHER, Collective.REDUCE_SCATTER, Collective.ALL_REDUCE


def _collectives(tmp_path: Path, plan: str) -> list[dict[Stage, Counter[tuple[str, int]]]]:
    inputs = loaded(tmp_path, plan, 4, "batch_size=4")
    graph = rank_step(inputs.run, inputs.hardware, _Run(inputs).step_graph(BASE), 1)
    ops = _chunk_ops(graph, cut_stages(inputs.infos, 2, 1))
    return [
        {
            stage: Counter(
                (op.collective.value, op.tensor.bytes)
                for op in (graph.ops[i] for i in ops.rank_zero[g][stage])
                if isinstance(op, CommOp)
            )
            for stage in (Stage.FORWARD, Stage.BACKWARD)
        }
        for g in range(2)
    ]


def test_each_pass_holds_its_reduce_scatters_and_all_gathers(tmp_path: Path) -> None:
    """Forward: the embedding's output reduce-scattered along the sequence; each block
    gathers each norm's output (2) and reduce-scatters attention's and the MLP's (2);
    the last chunk gathers ln_f's output for the head and all-reduces the loss's three
    vocabulary-parallel sums (max, sum, target: a 2-byte word a token, 16 bytes).
    Backward: each of these the other way, each norm's input gathered again, and each
    norm's weight gradients all-reduced."""
    first, last = _collectives(tmp_path, "{pipeline: 2, tensor: 2, sequence_parallel: true}")
    assert first[Stage.FORWARD] == {(RS.value, WHOLE): 1 + 2 * 2, (AG.value, WHOLE): 2 * 2}
    assert first[Stage.BACKWARD] == {
        (AG.value, WHOLE): 1 + 2 * 2 + 2 * 2,
        (RS.value, WHOLE): 2 * 2,
        (AR.value, NORM): 2 * 2,
    }
    assert last[Stage.FORWARD] == {
        (RS.value, WHOLE): 2 * 2,
        (AG.value, WHOLE): 2 * 2 + 1,
        (AR.value, 16): 3,
    }
    assert last[Stage.BACKWARD] == {
        (AG.value, WHOLE): 2 * 2 + 2 * 2 + 1,
        (RS.value, WHOLE): 2 * 2 + 1,
        (AR.value, NORM): 2 * 2 + 1,
    }


def test_tensor_parallel_all_reduces_in_the_passes(tmp_path: Path) -> None:
    """Without the sequence split: one all-reduce after each block's attention and MLP
    in the forward, one for each norm's input gradient in the backward."""
    first, last = _collectives(tmp_path, "{pipeline: 2, tensor: 2}")
    assert first[Stage.FORWARD] == {(AR.value, WHOLE): 1 + 2 * 2}
    assert first[Stage.BACKWARD] == {(AR.value, WHOLE): 2 * 2}
    assert last[Stage.FORWARD] == {(AR.value, WHOLE): 2 * 2, (AR.value, 16): 3}
    assert last[Stage.BACKWARD] == {(AR.value, WHOLE): 2 * 2 + 1}


def test_a_rank_sends_its_share_of_the_sequence(tmp_path: Path) -> None:
    plan = "{pipeline: 2, tensor: 2, sequence_parallel: true}"
    step = simulate_training(loaded(tmp_path, plan, 4, "batch_size=4")).pipeline
    assert step is not None
    assert step.activation_bytes == step.gradient_bytes == (WHOLE // 2,)
