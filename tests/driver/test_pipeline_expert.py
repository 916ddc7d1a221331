"""Expert parallelism inside a pipeline (``parallel.pipeline`` and ``parallel.expert``
above 1) on the 4-block mixture-of-experts decoder of
``tests/fixtures/workloads/tiny_moe_blocks.yaml`` (s = 8, h = 16, 4 experts, top-2,
inner width 24, 2-byte words; batch 8, micro-batches of one sample), every count
worked out by hand beside it.

One micro-batch's tokens on a rank: N = 1 x 8 = 8; an expert's capacity C = ceil(1.0 x 8
x 2 / 4) = 4 tokens; an all-to-all moves the rank's buffer of E x C x h = 4 x 4 x 16 =
256 elements, 512 bytes (each rank sending (e - 1) / e of it to its peers).  An
expert's MLP holds w1, w3 (h x f) and w2 (f x h): 3 x 16 x 24 = 1,152 elements; a block
besides its experts: two RMSNorm scales (16 each), Wqkv (768), Wo (256) and the router
(h x E = 64): 1,120; the embedding and the LM head 1,024 each."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import RunInputs, load_inputs
from accelsim.driver.pipeline_step import _chunk_ops, rank_step
from accelsim.driver.run import _Run, simulate_training, step_memory
from accelsim.errors import ConfigError
from accelsim.graph.ops import NO_EXPERT, CommOp, GemmOp, OpGraph, Phase, Stage
from accelsim.mapping.pipeline_stages import cut_stages
from accelsim.network.collectives import Collective
from accelsim.network.cost import cycles
from accelsim.report.pipeline import EXPERT_TABLES, pipeline_block
from accelsim.techniques.base import BASE
from tests.conftest import ROOT

BLOCKS = ROOT / "tests" / "fixtures" / "workloads" / "tiny_moe_blocks.yaml"
E, C, H, F, WORD = 4, 4, 16, 24, 2
BUFFER_BYTES = E * C * H * WORD  # one all-to-all's buffer on a rank: 512
EXPERT = 3 * H * F  # one expert's MLP: 1,152 elements
DENSE_BLOCK = 2 * H + 768 + 256 + H * E  # a block but its experts: 1,120
TABLE = 64 * H  # the embedding, the LM head: 1,024


def loaded(tmp_path: Path, plan: str, processors: int = 8, *sets: str) -> RunInputs:
    run = tmp_path / "run.yaml"
    run.write_text(
        "name: tiny\n"
        f"hardware: {ROOT / 'configs/hardware/default.yaml'}\n"
        f"workload: {BLOCKS}\n"
        f"energy: {ROOT / 'configs/energy/horowitz45.yaml'}\n"
        "batch_size: 8\n"
        "assignment: data_parallel\n"
        "optimizer: {kind: adam}\n",
        "utf-8",
    )
    return load_inputs(run, parse_sets([f"processors={processors}", f"run.parallel={plan}", *sets]))


def graph_of(inputs: RunInputs) -> OpGraph:
    return rank_step(inputs.run, inputs.hardware, _Run(inputs).step_graph(BASE), 1)


def all_to_alls(graph: OpGraph) -> list[CommOp]:
    return [
        op for op in graph.ops if isinstance(op, CommOp) and op.collective is Collective.ALL_TO_ALL
    ]


def test_a_stage_pass_holds_its_moe_layers_all_to_alls_over_its_expert_group(
    tmp_path: Path,
) -> None:
    """p = 2, e = 2 on 8 processors: 4 replicas of 2 stages, processor 2r + s is stage s
    of replica r, so the first stage's expert group is processors 0 and 2.  Each of the
    4 moe layers has 2 all-to-alls forward and 2 backward of 512 bytes; a chunk (2
    blocks) has 4 in its forward pass and 4 in its backward."""
    inputs = loaded(tmp_path, "{pipeline: 2, expert: 2}")
    graph = graph_of(inputs)
    found = all_to_alls(graph)
    assert len(found) == 4 * 4
    assert {(op.tensor.bytes, op.participants) for op in found} == {(BUFFER_BYTES, (0, 2))}
    assert sorted(set(graph.processor)) == [0, 2]
    ops = _chunk_ops(graph, cut_stages(inputs.infos, 2, 1))
    for chunk in ops.group:
        for stage in (Stage.FORWARD, Stage.BACKWARD):
            own = [graph.ops[i] for i in chunk[stage]]
            exchanged = [op for op in own if isinstance(op, CommOp)]
            assert len(exchanged) == 4
            assert all(op.collective is Collective.ALL_TO_ALL for op in exchanged)
    # each rank's 2 experts a layer compute e x C = 8 tokens each (w1, w3, w2 forward)
    gemms = [
        op
        for op in graph.ops
        if isinstance(op, GemmOp)
        and op.expert != NO_EXPERT
        and op.phase is Phase.FWD
        and graph.processor[op.op_id] == 0
    ]
    assert len(gemms) == 4 * 2 * 3 and {op.m for op in gemms} == {2 * C}


def test_tensor_pipeline_expert_groups(tmp_path: Path) -> None:
    """t = 2, p = 2, e = 2 on 16 processors: (2r + s) x 2 + k is rank k of stage s of
    replica r; the first stage's expert groups are its tensor positions in replicas 0
    and 1 ({0, 4} and {1, 5}), its tensor groups {0, 1} and {4, 5}; each expert's inner
    width splits over the tensor group (12 a rank), the buffer stays whole."""
    graph = graph_of(loaded(tmp_path, "{pipeline: 2, expert: 2, tensor: 2}", 16))
    assert {op.participants for op in all_to_alls(graph)} == {(0, 4), (1, 5)}
    assert {op.tensor.bytes for op in all_to_alls(graph)} == {BUFFER_BYTES}
    reduced = {
        op.participants
        for op in graph.ops
        if isinstance(op, CommOp) and op.collective is Collective.ALL_REDUCE
    }
    assert reduced == {(0, 1), (4, 5)}
    w1 = [q for q in graph.parameters if q.weight.name.endswith("moe.experts.0.w1")]
    assert {q.weight.elements for q in w1} == {H * F // 2}


def test_the_same_exchange_as_without_a_pipeline(tmp_path: Path) -> None:
    """The non-pipeline plan e = 2 on 4 processors with one sample a replica routes the
    same tokens: every all-to-all the same 512 bytes, 16 of them, only its ranks differ
    ({0, 1}: replicas are consecutive there, a stage's are a replica's p x t processors
    apart).  The steps' cycles differ by what a pipeline is: passes composed by a
    schedule, not one step of every layer."""
    flat = loaded(tmp_path, "{expert: 2}", 4, "batch_size=4")
    placed = _Run(flat).placed(BASE, None)
    mine = [op for op in all_to_alls(placed) if 0 in op.participants]
    piped = all_to_alls(graph_of(loaded(tmp_path, "{pipeline: 2, expert: 2}")))
    assert {op.participants for op in mine} == {(0, 1)}
    assert sorted(op.tensor.bytes for op in mine) == sorted(op.tensor.bytes for op in piped)


def test_expert_memory_per_chip(tmp_path: Path) -> None:
    """The most loaded stage (the first: the embedding and 2 blocks) holds E / e experts
    of each of its 2 moe layers: 1,024 + 2 x (1,120 + 4 x 1,152 / e) elements at 2 bytes
    -- 24,960, 15,744 and 11,136 weight bytes at e = 1, 2, 4; gradients as many, Adam's
    state four times; the communication buffer an all-to-all's 512 bytes."""
    got = {}
    for e in (1, 2, 4):
        memory = step_memory(loaded(tmp_path, f"{{pipeline: 2, expert: {e}}}"))
        assert memory.to_dict()["pipeline_stage"] == 0
        got[e] = memory.bytes_by_class
    for e in (1, 2, 4):
        held = (TABLE + 2 * (DENSE_BLOCK + E // e * EXPERT)) * WORD
        assert (got[e]["weights"], got[e]["gradients"]) == (held, held)
        assert got[e]["optimizer_state"] == 4 * held
    assert [got[e]["weights"] for e in (1, 2, 4)] == [24_960, 15_744, 11_136]
    assert got[1]["weights"] - got[2]["weights"] == 2 * 2 * EXPERT * WORD
    assert (got[2]["communication"], got[4]["communication"]) == (BUFFER_BYTES, BUFFER_BYTES)


@pytest.mark.parametrize(
    ("plan", "dense", "expert"),
    [
        # 4 replicas: dense gradients over all 4, each expert's over the 2 holding it
        ("{pipeline: 2, expert: 2}", (0, 2, 4, 6), (0, 4)),
        # one expert group of all 4 replicas: no replica shares an expert
        ("{pipeline: 2, expert: 4}", (0, 2, 4, 6), None),
    ],
)
def test_a_stage_sums_expert_gradients_over_the_replicas_holding_them(
    tmp_path: Path, plan: str, dense: tuple[int, ...], expert: tuple[int, ...] | None
) -> None:
    """Stage 0's gradients: dense 2 x (1,024 + 2 x 1,120) = 6,528 bytes all-reduced over
    its 4 replicas, its experts' 2 layers x 4 / e experts x 1,152 x 2 bytes (9,216 at
    e = 2) over the dp / e replicas holding the same experts, one after the other (one
    bucket each)."""
    inputs = loaded(tmp_path, plan)
    e = inputs.run.parallel.expert if inputs.run.parallel else 1
    step = simulate_training(inputs).pipeline
    assert step is not None
    network, algorithm = inputs.machine.network, inputs.hardware.interconnect.algorithm
    dense_bytes = (TABLE + 2 * DENSE_BLOCK) * WORD
    expert_bytes = 2 * (E // e) * EXPERT * WORD
    assert step.stage_gradient_bytes[0] == dense_bytes + expert_bytes
    summed = cycles(network, Collective.ALL_REDUCE, dense, dense_bytes, algorithm)
    if expert is not None:
        summed += cycles(network, Collective.ALL_REDUCE, expert, expert_bytes, algorithm)
    assert step.times.all_reduce_cycles[0] == summed
    assert step.expert == e


def test_interleaved_with_experts(tmp_path: Path) -> None:
    """The interleaved schedule, 2 stages of 2 one-block chunks, 2 micro-batches a
    replica: each chunk's passes hold its one moe layer's 2 all-to-alls each way; the
    middle chunks share one simulation; the summary names the expert degree and the
    expert group the tables were simulated on."""
    inputs = loaded(
        tmp_path,
        "{pipeline: 2, expert: 2, schedule: interleaved, virtual_stages: 2}",
        8,
    )
    graph = graph_of(inputs)
    ops = _chunk_ops(graph, cut_stages(inputs.infos, 2, 2))
    for chunk in ops.group:
        for stage in (Stage.FORWARD, Stage.BACKWARD):
            exchanged = [i for i in chunk[stage] if isinstance(graph.ops[i], CommOp)]
            assert len(exchanged) == 2
    result = simulate_training(inputs)
    step = result.pipeline
    assert step is not None
    assert (step.times.virtual_stages, step.times.micro_batches) == (2, 2)
    assert [c.chunks for c in step.distinct] == [(0,), (1, 2), (3,)]
    section = result.summary()["pipeline"]
    assert (section["expert"], section["tables"]) == (2, EXPERT_TABLES)
    assert ", expert groups of 2 replicas" in pipeline_block(step)


def test_a_plain_pipeline_has_no_expert_key(tmp_path: Path) -> None:
    result = simulate_training(loaded(tmp_path, "{pipeline: 2}"))
    assert "expert" not in result.summary()["pipeline"]


@pytest.mark.parametrize(
    ("plan", "sets", "message"),
    [
        (
            "{pipeline: 2, expert: 8}",
            (),
            "parallel.expert: must divide the 4 data-parallel replicas of 2 processors (got 8)",
        ),
        (
            "{pipeline: 2, expert: 2}",
            ("workload.layers[h.0.moe].overflow=dropless",),
            "parallel.expert: not with layer h.0.moe's overflow dropless: its ranks' experts"
            " would compute unequal tokens and exchange unequal pieces, an all-to-all the"
            " network does not model (overflow pad or drop keeps every expert's buffer"
            " equal) (got 2)",
        ),
        (
            "{pipeline: 2, expert: 2}",
            ("run.techniques={recomputation: {policy: full}}",),
            "techniques.recomputation: not with parallel.expert above 1: its rewrites and"
            " placements do not know the expert-parallel all-to-alls (got 2)",
        ),
        (
            "{pipeline: 2, expert: 2, zero: 1}",
            (),
            "parallel.zero: not with parallel.expert above 1: sharding over the"
            " data-parallel group of an expert-parallel plan's processors is not modelled"
            " (got 1)",
        ),
    ],
)
def test_refusals_that_remain(
    tmp_path: Path, plan: str, sets: tuple[str, ...], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        loaded(tmp_path, plan, 8, *sets)
    assert any(str(p).endswith(message) for p in caught.value.problems), caught.value.problems


def test_sequence_parallel_with_experts_in_a_pipeline(tmp_path: Path) -> None:
    """t = 2, p = 2, e = 2 with sequence parallelism on 16 processors: each tensor rank
    routes its 4 tokens of the micro-batch (capacity ceil(4 x 2 / 4) = 2), an
    all-to-all of 4 x 2 x 16 words (256 B) over {0, 4} or {1, 5}; the buffer received
    all-gathered over the tensor group (512 B), the experts' outputs reduce-scattered
    back; 4 moe layers x 2 each way of each, on each of the 2 tensor groups."""
    plan = "{pipeline: 2, expert: 2, tensor: 2, sequence_parallel: true}"
    graph = graph_of(loaded(tmp_path, plan, 16))
    assert {(op.tensor.bytes, op.participants) for op in all_to_alls(graph)} == {
        (256, (0, 4)),
        (256, (1, 5)),
    }
    gathered = [
        op
        for op in graph.ops
        if isinstance(op, CommOp)
        and op.collective is Collective.ALL_GATHER
        and op.name.endswith(("dispatched.allgather", "dreturned.allgather"))
    ]
    assert len(gathered) == 4 * 2 * 2
    assert {(op.tensor.bytes, op.participants) for op in gathered} == {
        (512, (0, 1)),
        (512, (4, 5)),
    }
