"""Processor groups: which processors a placed step's all-reduces and pipelines join,
and which dimensions and levels of the topology they span."""

from __future__ import annotations

import json

import accelsim
from accelsim.config.loader import load_hardware
from accelsim.graph.ops import CommOp, OpGraph, Phase, Stage, Tag, Tensor, TensorKind, replaced
from accelsim.mapping.groups import (
    GroupKind,
    ProcessorGroup,
    SpannedDimension,
    described,
    processor_groups,
)
from accelsim.network.topology import Network
from accelsim.report.console import summary_table
from accelsim.report.summary import StepSummary
from tests.conftest import ROOT
from tests.timing.test_engine import gemm, hw

SMOKE = ROOT / "configs" / "runs" / "smoke.yaml"
GPU_CLUSTER = ROOT / "configs" / "hardware" / "gpu_cluster.yaml"


def reduce(op_id: int, members: tuple[int, ...]) -> CommOp:
    grad = Tensor(f"g{op_id}", TensorKind.GRADIENT, 8, 2)
    return CommOp(op_id, f"ar{op_id}", "l", Phase.COMM, Stage.COMMUNICATION, grad, members, ())


def groups_of(graph: OpGraph, *sets: str) -> tuple[ProcessorGroup, ...]:
    spec = hw(*sets)
    network = Network.of(spec.interconnect, spec.processors)
    return processor_groups(graph, network, spec.interconnect)


def test_a_data_parallel_group_of_8_on_a_2x4_torus_spans_both_dimensions() -> None:
    # two all-reduces over the same 8 processors are one group
    graph = OpGraph(ops=(reduce(0, tuple(range(8))), reduce(1, tuple(range(8)))), processor=(0, 0))
    torus = ("processors=8", "interconnect.topology=torus", "interconnect.dims=[2, 4]")
    (group,) = groups_of(graph, *torus)
    assert group == ProcessorGroup(
        GroupKind.DATA,
        tuple(range(8)),
        (SpannedDimension(0, 0, "torus", 2), SpannedDimension(1, 0, "torus", 4)),
    )
    assert described(group) == "data p0-p7 across torus 2 x torus 4 (level 0)"
    # processors 0 and 2 differ in dimension 1 alone (coordinates (0, 0) and (0, 1))
    pair = OpGraph(ops=(reduce(0, (0, 2)),), processor=(0,))
    assert groups_of(pair, *torus)[0].span == (SpannedDimension(1, 0, "torus", 4),)
    # an all-reduce over some of a group's members (a last round's) is of that group
    graph = OpGraph(ops=(reduce(0, (0, 2)), reduce(1, tuple(range(8)))), processor=(0, 0))
    assert [g.members for g in groups_of(graph, *torus)] == [tuple(range(8))]


def test_on_a_hierarchy_a_group_inside_a_node_spans_level_0_alone() -> None:
    # the GPU cluster: 8 GPUs on a node's switch (level 0), 2 nodes on a fabric (level 1)
    spec = load_hardware(GPU_CLUSTER)
    network = Network.of(spec.interconnect, spec.processors)

    def group(members: tuple[int, ...]) -> ProcessorGroup:
        graph = OpGraph(ops=(reduce(0, members),), processor=(0,))
        (found,) = processor_groups(graph, network, spec.interconnect)
        return found

    inside, across, everyone = group(tuple(range(8))), group((0, 8)), group(tuple(range(16)))
    assert inside.span == (SpannedDimension(0, 0, "switch", 8),)
    assert across.span == (SpannedDimension(1, 1, "switch", 2),)
    assert everyone.span == inside.span + across.span
    assert described(across) == "data p0,p8 across switch 2 (level 1)"
    assert described(everyone) == "data p0-p15 across switch 8 x switch 2 (levels 0, 1)"


def test_a_pipeline_is_the_processors_one_copy_of_the_forward_pass_visits() -> None:
    # mini-batch 0's forward on p0, p2, then p1; mini-batch 1's the same way: one group;
    # a backward op (on p3) is not the forward pass's
    fwd = [replaced(gemm(i), tag=Tag(mini_batch=i // 3)) for i in range(6)]
    dx = replaced(gemm(6), phase=Phase.BWD_INPUT, stage=Stage.BACKWARD)
    graph = OpGraph(ops=(*fwd, dx), processor=(0, 2, 1, 0, 2, 1, 3))
    (group,) = groups_of(graph, "processors=4")
    assert group == ProcessorGroup(
        GroupKind.PIPELINE, (0, 2, 1), (SpannedDimension(0, 0, "ring", 4),)
    )
    # one processor's forward pass alone is no group
    assert groups_of(OpGraph(ops=(gemm(0),), processor=(0,)), "processors=4") == ()


def test_summary_json_and_the_console_give_the_groups() -> None:
    record = accelsim.simulate(SMOKE, ["processors=2", "assignment=data_parallel"]).base.summary()
    ring = {"dimension": 0, "level": 0, "topology": "ring", "size": 2}
    assert record["groups"] == [{"kind": "data", "members": [0, 1], "span": [ring]}]
    summary = StepSummary.from_dict(json.loads(json.dumps(record)))
    assert summary.to_dict()["groups"] == record["groups"]
    lines = [line.split() for line in summary_table(record).splitlines()]
    assert ["groups", "data", "p0,p1", "across", "ring", "2", "(level", "0)"] in lines
    older = {k: v for k, v in record.items() if k != "groups"}
    assert StepSummary.from_dict(older).groups == ()
