"""Sequence with expert parallelism: the two-layer mixture-of-experts model of
``test_expert_parallel.py`` (s = 8, h = 16, 4 experts, top-2, inner width 24, 2-byte
words) on 8 processors at t = 2, e = 2 with sequence parallelism, every count by hand.

As Megatron-LM's all-to-all token dispatcher does (permute, all-to-all over the
expert group, all-gather over the tensor group; back: reduce-scatter over the tensor
group, all-to-all), each tensor rank routes its own share of the sequence: 2 samples x
8 / 2 = 8 tokens, a capacity of ceil(8 x 2 / 4) = 4 tokens an expert, an all-to-all of
its E x C x h = 256 words (512 B); the buffer it receives is all-gathered over the
tensor group (1,024 B), each of its E / e = 2 experts computes t x e x C = 16 tokens at
inner width 12 (the GEMMs of t = 2, e = 2 without sequence parallelism), and their
outputs are reduce-scattered back to the rank's share before the return all-to-all."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from accelsim.config.enums import CommGroup
from accelsim.driver.run import _Run, simulate_training, step_memory
from accelsim.errors import ConfigError
from accelsim.graph.ops import NO_EXPERT, CommOp, GemmOp, OpGraph, Phase
from accelsim.network.collectives import Collective
from accelsim.techniques.base import BASE
from tests.mapping.test_expert_parallel import load_inputs, parse_sets, run_file

H, E, F, WORD = 16, 4, 24, 2
C = 4  # each expert's capacity of a rank's 8 tokens
BUFFER = E * C * H * WORD  # 512 B
PLAN = "run.parallel={expert: 2, tensor: 2, sequence_parallel: true}"
BATCH = "batch_size=8"  # 2 samples a replica


def placed(tmp_path: Path, *sets: str) -> OpGraph:
    inputs = load_inputs(run_file(tmp_path), parse_sets(["processors=8", BATCH, PLAN, *sets]))
    return _Run(inputs).placed(BASE, None)


def moe_collectives(graph: OpGraph) -> Counter[tuple[Collective, CommGroup, int, str]]:
    """Each moe layer's collectives by kind, group, bytes and name (the layer's aside)."""
    return Counter(
        (op.collective, op.group, op.tensor.bytes, op.name.split(".", 1)[1])
        for op in graph.ops
        if isinstance(op, CommOp) and op.layer in ("moe0", "moe1")
    )


def test_each_rank_routes_its_share_and_its_experts_compute_the_gathered_tokens(
    tmp_path: Path,
) -> None:
    """Per layer: 4 all-to-alls of 512 B in each of the 4 expert groups (2 groups of 2
    replicas, 2 tensor positions); an all-gather of the received buffer and of its
    gradient, and a reduce-scatter of the experts' outputs and input gradients (1,024
    B each) in each of the 4 tensor groups; the router's gradient (64 words, a partial
    sum over the rank's tokens) all-reduced over the tensor group, the experts' not."""
    graph = placed(tmp_path)
    found = moe_collectives(graph)
    a2a, ag, rs = Collective.ALL_TO_ALL, Collective.ALL_GATHER, Collective.REDUCE_SCATTER
    expert, tensor = CommGroup.EXPERT, CommGroup.TENSOR
    for name in ("received", "returned", "dreceived", "ddispatched"):
        assert found[a2a, expert, BUFFER, f"{name}.all_to_all"] == 2 * 4
    assert found[ag, tensor, 2 * BUFFER, "dispatched.allgather"] == 2 * 4
    assert found[ag, tensor, 2 * BUFFER, "dreturned.allgather"] == 2 * 4
    assert found[rs, tensor, 2 * BUFFER, "expert_outputs.reduce_scatter"] == 2 * 4
    assert found[rs, tensor, 2 * BUFFER, "expert_dx.reduce_scatter"] == 2 * 4
    assert found[Collective.ALL_REDUCE, tensor, H * E * WORD, "drouter.W.allreduce"] == 2 * 4
    reduced_over_tensor = {
        name
        for (kind, group, _, name) in found
        if kind is Collective.ALL_REDUCE and group is tensor
    }
    assert reduced_over_tensor == {"drouter.W.allreduce"}
    gemms = [
        op
        for op in graph.ops
        if isinstance(op, GemmOp)
        and op.expert != NO_EXPERT
        and op.phase is Phase.FWD
        and graph.processor[op.op_id] == 0
    ]
    assert sorted({(op.m, op.n, op.k) for op in gemms}) == [(16, 12, 16), (16, 16, 12)]
    assert len(gemms) == 2 * 2 * 3


def test_a_rank_holds_what_it_holds_without_sequence_parallelism(tmp_path: Path) -> None:
    """The same 3,456 parameters a rank as t = 2, e = 2 without it (2 layers x 2 experts
    x 3 x 16 x 12, half the embedding and LM head, the routers and norms whole); the
    communication buffer the gathered 1,024 B."""
    inputs = load_inputs(run_file(tmp_path), parse_sets(["processors=8", BATCH, PLAN]))
    got = step_memory(inputs).bytes_by_class
    assert (got["weights"], got["gradients"]) == (3_456 * WORD, 3_456 * WORD)
    assert got["communication"] == 2 * BUFFER


def test_both_engines_agree(tmp_path: Path) -> None:
    own = ("dram.sharing=per_processor", "run.data_parallel.symmetry=full")
    runs = [
        simulate_training(
            load_inputs(
                run_file(tmp_path),
                parse_sets(["processors=8", BATCH, PLAN, *own, f"timing.engine={engine}"]),
            )
        ).base
        for engine in ("simpy", "compiled")
    ]
    assert runs[0].total_cycles == runs[1].total_cycles
    assert (runs[0].trace.end_cycle == runs[1].trace.end_cycle).all()


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (
            (PLAN, "workload.layers[moe0].intermediate=25"),
            "parallel.tensor: must divide layer moe0's inner width 25 (each expert's MLP"
            " splits over the tensor-parallel group) (got 2)",
        ),
        (
            ("run.parallel={tensor: 2, sequence_parallel: true}",),
            "parallel.sequence_parallel: layer moe0 (moe) is outside the tensor-parallel"
            " blocks and does not compute each token alone, so it cannot run on a share of"
            " the sequence (got True)",
        ),
    ],
)
def test_refusals(tmp_path: Path, sets: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_inputs(run_file(tmp_path), parse_sets(["processors=8", BATCH, *sets]))
    assert any(str(p).endswith(message) for p in caught.value.problems), caught.value.problems
