"""Tensor with expert parallelism: the two-layer mixture-of-experts model of
``test_expert_parallel.py`` on 4 processors at t = 2, e = 2, every count by hand.

The processors are 2 replicas of 2 tensor ranks; each replica routes 2 samples x 8
tokens = 16 tokens, a capacity of ceil(16 x 2 / 4) = 8 tokens an expert.  The LM head
(64 x 16) and the embedding it matches split by vocabulary, each moe layer's router
runs whole on every rank, and each rank holds E / e = 2 experts of each layer with
their inner width 24 / 2 = 12."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelsim.config.enums import CommGroup
from accelsim.driver.run import _Run, simulate_training, step_memory
from accelsim.errors import ConfigError
from accelsim.graph.ops import NO_EXPERT, CommOp, GemmOp, Phase
from accelsim.mapping.groups import GroupKind, processor_groups
from accelsim.network.collectives import Collective
from accelsim.techniques.base import BASE
from tests.conftest import ROOT
from tests.mapping.test_expert_parallel import (
    expert_gemms,
    inputs,
    load_inputs,
    parse_sets,
    run_file,
)

H, E, F = 16, 4, 24
TOKENS, C = 16, 8  # a replica's tokens; each expert's capacity
PLAN = "run.parallel.tensor=2"


def test_each_rank_holds_its_experts_split_over_the_tensor_group(tmp_path: Path) -> None:
    graph = _Run(inputs(tmp_path, 2, PLAN)).placed(BASE, None)
    for p in range(4):
        experts = expert_gemms(graph, p)
        # per layer 2 experts x (w1, w3: 16 tokens x 12 x 16; w2: 16 x 16 x 12)
        assert sorted({(op.m, op.n, op.k) for op in experts}) == [(16, 12, 16), (16, 16, 12)]
        assert len(experts) == 2 * 2 * 3
        assert sum(op.macs for op in experts) == 2 * 2 * 3 * (2 * C) * (F // 2) * H == 36_864


def test_groups_and_the_collectives_wire_bytes_by_hand(tmp_path: Path) -> None:
    """Per moe layer and expert group: 4 all-to-alls of a rank's E x C x h = 4 x 8 x 16
    words (1,024 B), each rank sending the other half (512 B); per tensor group: the
    experts' outputs (forward) and input gradients (backward) all-reduced, 2 x 16
    tokens x 16 words = 1,024 B, a ring of 2 sending 1,024 B a rank.  The rest: the
    embedding's output (16 x 16 x 2 = 512 B) and the LM head's input gradient (512 B),
    the loss's 3 statistics (16 x 2 = 32 B each), and each tensor position's data
    all-reduces of its 512-word embedding and LM head shards and two 64-word routers."""
    run = simulate_training(inputs(tmp_path, 2, PLAN, "timing.engine=compiled")).base
    groups = processor_groups(run.graph, run.machine.network, run.machine.hardware.interconnect)
    assert [(g.kind, g.members) for g in groups] == [
        (GroupKind.TENSOR, (0, 1)),
        (GroupKind.TENSOR, (2, 3)),
        (GroupKind.EXPERT, (0, 2)),
        (GroupKind.EXPERT, (1, 3)),
        (GroupKind.DATA, (0, 2)),
        (GroupKind.DATA, (1, 3)),
    ]
    comms = [op for op in run.graph.ops if isinstance(op, CommOp)]
    mine = {(op.name, op.participants) for op in comms if op.name.startswith("moe0.")}
    assert {n for n, _ in mine} == {
        "moe0.received.all_to_all",
        "moe0.returned.all_to_all",
        "moe0.dreceived.all_to_all",
        "moe0.ddispatched.all_to_all",
        "moe0.expert_outputs.allreduce",
        "moe0.expert_dx.allreduce",
    }
    summed = [op for op in comms if op.name.endswith(("expert_outputs.allreduce", "dx.allreduce"))]
    assert {(op.group, op.participants, op.tensor.bytes) for op in summed} == {
        (CommGroup.TENSOR, (0, 1), 2 * 2 * C * H * 2),
        (CommGroup.TENSOR, (2, 3), 2 * 2 * C * H * 2),
    }
    sent = run.summary()["communication"]
    assert sent["all_to_all"]["bytes"] == 2 * 4 * 2 * 2 * (E * C * H * 2 // 2) == 16_384
    tensor = 2 * 2 * (2 * 2 * 1024 + 2 * 512 + 3 * 32)  # groups x ranks x (moe, wte, head, loss)
    data = 2 * 2 * (2 * 1024 + 2 * 128)  # positions x ranks x (wte, lm_head, two routers)
    assert sent["all_reduce"]["bytes"] == tensor + data == 30_080


def test_memory_by_hand(tmp_path: Path) -> None:
    """A rank's parameters: the embedding's and the LM head's 32 x 16 shards (512
    each), two routers of 16 x 4, and 2 experts x 3 x 16 x 12 of each layer: 3,456;
    2 + 2 + 8 bytes each with Adam; the largest collective in flight a 1,024-byte
    expert buffer."""
    got = step_memory(inputs(tmp_path, 2, PLAN)).bytes_by_class
    held = 2 * 512 + 2 * 64 + 2 * 2 * 3 * H * (F // 2)
    assert held == 3_456
    assert (got["weights"], got["gradients"], got["optimizer_state"]) == (
        2 * held,
        2 * held,
        8 * held,
    )
    assert got["communication"] == E * C * H * 2 == 1024


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (
            ("run.parallel={expert: 4, tensor: 2}",),
            "parallel.expert: must divide the 2 replicas of 2 ranks (got 4)",
        ),
        (
            ("run.parallel={expert: 2, tensor: 2}", "batch_size=3"),
            "batch_size: must be a multiple of the 2 data-parallel replicas with"
            " parallel.expert above 1 (every rank of an expert group routes as many tokens)"
            " (got 3)",
        ),
        (
            (
                "run.parallel={expert: 2, tensor: 2}",
                "workload.layers[moe0].intermediate=25",
            ),
            "parallel.tensor: must divide layer moe0's inner width 25 (each expert's MLP"
            " splits over the tensor-parallel group) (got 2)",
        ),
        (
            ("run.parallel={expert: 2, pipeline: 2, tensor: 2}",),
            "parallel.expert: must divide the 1 data-parallel replicas of 4 processors (got 2)",
        ),
    ],
)
def test_refusals(tmp_path: Path, sets: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_inputs(run_file(tmp_path), parse_sets(["processors=4", *sets]))
    assert any(str(p).endswith(message) for p in caught.value.problems), caught.value.problems


def test_both_engines_agree(tmp_path: Path) -> None:
    own = ("dram.sharing=per_processor", "run.data_parallel.symmetry=full")
    runs = [
        simulate_training(inputs(tmp_path, 2, PLAN, *own, f"timing.engine={engine}")).base
        for engine in ("simpy", "compiled")
    ]
    assert runs[0].total_cycles == runs[1].total_cycles
    assert (runs[0].trace.end_cycle == runs[1].trace.end_cycle).all()
    a2a = [op for op in runs[0].graph.ops if isinstance(op, CommOp)]
    assert {op.collective for op in a2a} == {Collective.ALL_TO_ALL, Collective.ALL_REDUCE}


def test_mixtral_at_tensor_2_expert_8_fits_an_a100(tmp_path: Path) -> None:
    """Mixtral-8x7B on 16 GPUs as 8 replicas of 2 tensor ranks, one expert group of 8:
    a GPU holds one expert of each layer at half its inner width (32 x 3 x 4,096 x
    7,168 = 2,818,572,288), half the attention, embedding and LM head ((2 x 131,072,000
    + 32 x 41,943,040) / 2 = 802,160,640), and the norms (32 x 8,192 + 4,096) and
    routers (32 x 32,768) whole: 3,622,047,744 parameters, 16 bytes each with Adam and
    fp32 master weights, 53.97 GiB of the 57.15 GiB it needs (within an A100's
    74.5 GiB)."""
    mixtral = ROOT / "configs" / "runs" / "mixtral_ep8.yaml"
    sets = ["run.parallel={expert: 8, tensor: 2}", "workload.input.length=256"]
    memory = step_memory(load_inputs(mixtral, parse_sets(sets)))
    held = 32 * 3 * 4096 * 7168 + (2 * 131_072_000 + 32 * 41_943_040) // 2
    held += 32 * 8192 + 4096 + 32 * 32_768
    assert held == 3_622_047_744
    got = memory.bytes_by_class
    assert (got["weights"], got["optimizer_state"], got["master_weights"]) == (
        2 * held,
        8 * held,
        4 * held,
    )
    assert memory.fits


def test_tensor_parallelism_alone_splits_every_expert(tmp_path: Path) -> None:
    """t = 2 on 2 processors, no expert parallelism: one replica of 4 samples, 32 tokens,
    a capacity of 16; each rank computes all 4 experts at inner width 12 (36,864 MACs
    forward a layer, 3 x that with dX and dW, 2 layers: 221,184), then all-reduces their
    outputs and input gradients, 4 x 16 x 16 words (2,048 B) each, a ring of 2 sending
    2,048 B a rank; beside them the embedding's output and the LM head's input gradient
    (32 x 16 x 2 = 1,024 B each) and the loss's 3 statistics (64 B each)."""
    sets = ("run.parallel={tensor: 2}", "processors=2", "timing.engine=compiled")
    run = simulate_training(inputs(tmp_path, None, *sets)).base
    graph = run.graph
    experts = [
        op
        for op in graph.ops
        if isinstance(op, GemmOp) and op.expert != NO_EXPERT and graph.processor[op.op_id] == 0
    ]
    assert {(op.m, op.n, op.k) for op in experts if op.phase is Phase.FWD} == {
        (16, 12, 16),
        (16, 16, 12),
    }
    assert sum(op.macs for op in experts) == 2 * 3 * 4 * 3 * 16 * 12 * 16 == 221_184
    summed = [op for op in graph.ops if isinstance(op, CommOp) and ".expert_" in op.name]
    assert [(op.name, op.participants, op.tensor.bytes) for op in summed] == [
        (f"{m}.{what}.allreduce", (0, 1), 4 * 16 * H * 2)
        for m, what in (
            ("moe0", "expert_outputs"),
            ("moe1", "expert_outputs"),
            ("moe1", "expert_dx"),
            ("moe0", "expert_dx"),
        )
    ]
    wire = 2 * (4 * 2048 + 2 * 1024 + 3 * 64)  # ranks x (what each rank sends per op)
    assert run.summary()["communication"]["all_reduce"]["bytes"] == wire == 20_864
