"""Epilogue fusion (``lowering.fuse_epilogues``): which vector ops take their input's
tiles on chip, and conservation: fusing moves bytes from DRAM to nothing else, never
changes the work, and every byte a producer writes is still read by its consumers."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelsim.config.enums import EpilogueFusion
from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import simulate_run, simulate_training
from accelsim.errors import ConfigError
from accelsim.graph import queries
from accelsim.graph.check import graph_problems
from accelsim.graph.ops import Epilogue, OpGraph, TensorKey, VectorOp
from accelsim.lowering.epilogues import fuse_epilogues
from accelsim.lowering.shapes import INPUT_NAME
from accelsim.mapping.tile_reuse import tile_reuse
from accelsim.mapping.units import main_array
from accelsim.report.result import RunResult
from tests.conftest import ROOT, make_hw, model

ELEMENTWISE, ALL = EpilogueFusion.ELEMENTWISE, EpilogueFusion.ALL


def groups(graph: OpGraph, prefixes: tuple[str, ...] = ("",)) -> list[list[str]]:
    """The tile groups whose first op's name starts with one of ``prefixes``, by name."""
    named = [[graph.ops[i].name for i in g] for g in queries.tile_groups(graph)]
    return [g for g in named if g[0].startswith(prefixes)]


def test_none_leaves_the_graph_alone() -> None:
    _, graph = model("resnet18")
    assert fuse_epilogues(graph, EpilogueFusion.NONE) is graph
    assert queries.tile_streams(graph) == ()


def test_resnet18_elementwise_fuses_around_batchnorm() -> None:
    """Batchnorm (batch statistics) reads its input from DRAM; ReLU and the residual add
    take their tiles from it; backward, the ReLU mask takes the dX GEMM's tiles, and the
    sum of a branched gradient those of the later-made part."""
    _, graph = model("resnet18")
    fused = fuse_epilogues(graph, ELEMENTWISE)
    assert groups(fused, ("bn1", "layer1.0", "layer2.0", "layer1.1.conv1.dx", "maxpool")) == [
        ["bn1.fwd", "relu1.fwd"],
        ["layer1.0.bn1.fwd", "layer1.0.relu1.fwd"],
        ["layer1.0.bn2.fwd", "layer1.0.add.fwd", "layer1.0.relu2.fwd"],
        ["layer2.0.bn1.fwd", "layer2.0.relu1.fwd"],
        # the add fuses onto the later branch, the shortcut's
        ["layer2.0.downsample.bn.fwd", "layer2.0.add.fwd", "layer2.0.relu2.fwd"],
        ["layer2.0.conv2.dx", "layer2.0.relu1.bwd"],
        ["layer1.1.conv1.dx", "layer1.0.relu2.grad_accum", "layer1.0.relu2.bwd"],
        ["layer1.0.conv2.dx", "layer1.0.relu1.bwd"],
        ["layer1.0.conv1.dx", "maxpool.grad_accum"],
        ["maxpool.bwd", "relu1.bwd"],
    ]
    assert groups(fused, ("loss",)) == [["loss.bwd", "fc.db"]]  # the bias gradient
    # a sum of gradients a strided dX writes piecewise (several producers) takes no tiles
    accum = next(op for op in fused.ops if op.name == "layer1.1.relu2.grad_accum")
    assert isinstance(accum, VectorOp) and accum.tile_sources == ()
    assert graph_problems(fused, (INPUT_NAME,)) == []


def test_resnet18_all_fuses_batchnorm_onto_its_gemm() -> None:
    _, graph = model("resnet18")
    fused = fuse_epilogues(graph, ALL)
    assert groups(fused, ("conv1", "layer1.0", "layer2.0", "layer1.1.conv1.dx", "maxpool")) == [
        ["conv1.fwd", "bn1.fwd", "relu1.fwd"],
        ["layer1.0.conv1.fwd", "layer1.0.bn1.fwd", "layer1.0.relu1.fwd"],
        ["layer1.0.conv2.fwd", "layer1.0.bn2.fwd", "layer1.0.add.fwd", "layer1.0.relu2.fwd"],
        ["layer2.0.conv1.fwd", "layer2.0.bn1.fwd", "layer2.0.relu1.fwd"],
        ["layer2.0.conv2.fwd", "layer2.0.bn2.fwd"],
        [
            "layer2.0.downsample.conv.fwd",
            "layer2.0.downsample.bn.fwd",
            "layer2.0.add.fwd",
            "layer2.0.relu2.fwd",
        ],
        ["layer2.0.conv2.dx", "layer2.0.relu1.bwd", "layer2.0.bn1.bwd"],
        [
            "layer1.1.conv1.dx",
            "layer1.0.relu2.grad_accum",
            "layer1.0.relu2.bwd",
            "layer1.0.bn2.bwd",
        ],
        ["layer1.0.conv2.dx", "layer1.0.relu1.bwd", "layer1.0.bn1.bwd"],
        ["layer1.0.conv1.dx", "maxpool.grad_accum"],
        ["maxpool.bwd", "relu1.bwd", "bn1.bwd"],
    ]
    # every op the mode could fuse does, but the sums of piecewise-written gradients
    left = [
        op.name
        for op in fused.ops
        if isinstance(op, VectorOp) and op.epilogue is not Epilogue.NONE and not op.tile_sources
    ]
    assert left == [f"layer{i}.1.relu2.grad_accum" for i in (3, 2, 1)]


def test_resident_streams_and_saved_writes_on_resnet18() -> None:
    """The conv output batchnorm backward re-reads keeps its write; what only the fused
    chain reads (batchnorm's output, the add's, a dX GEMM's output) is never written."""
    _, graph = model("resnet18")
    fused = fuse_epilogues(graph, ALL)
    reuse = tile_reuse(fused, (main_array(make_hw()),))
    assert len(reuse.resident) == len(queries.tile_streams(fused))  # one tile always fits
    unwritten = {name for _, (name, _) in reuse.unwritten}
    assert {"layer1.0.bn2.out", "layer1.0.add.out", "layer1.0.relu1.grad<-layer1.0.conv2"} < (
        unwritten
    )
    assert "layer1.0.conv2.out" not in unwritten  # batchnorm backward reads it from DRAM
    assert "layer1.0.relu2.out" not in unwritten  # the next conv and ReLU backward read it


@pytest.mark.parametrize("name", ["mlp", "vgg16", "bert_base", "lstm_ptb", "mobilenet_v2"])
def test_every_mode_gives_well_formed_graphs(name: str) -> None:
    _, graph = model(name)
    for mode in (ELEMENTWISE, ALL):
        fused = fuse_epilogues(graph, mode)
        assert graph_problems(fused, (INPUT_NAME,)) == []
        assert [op.name for op in fused.ops] == [op.name for op in graph.ops]


def test_mlp_fuses_relu_and_bias_gradients() -> None:
    _, graph = model("mlp")
    assert groups(fuse_epilogues(graph, ELEMENTWISE)) == [
        ["fc1.fwd", "relu1.fwd"],
        ["fc2.fwd", "relu2.fwd"],
        ["loss.bwd", "fc3.db"],
        ["fc3.dx", "relu2.bwd", "fc2.db"],
        ["fc2.dx", "relu1.bwd", "fc1.db"],
    ]


def resnet(mode: EpilogueFusion) -> RunResult:
    sets = ["batch_size=2", "workload_variant=cifar10", f"lowering.fuse_epilogues={mode.value}"]
    return simulate_run(load_inputs(ROOT / "configs/runs/default.yaml", parse_sets(sets)))


COUNTERS = (
    "macs",
    "vector_ops",
    "folds",
    "compute_cycles",
    "sram_ifmap_read_bytes",
    "sram_ifmap_write_bytes",
    "sram_filter_read_bytes",
    "sram_filter_write_bytes",
    "sram_ofmap_read_bytes",
    "sram_ofmap_write_bytes",
)


@pytest.mark.parametrize("mode", [ELEMENTWISE, ALL])
def test_fusion_conserves_bytes_and_work(mode: EpilogueFusion) -> None:
    """Per op, the work and the SRAM traffic are the unfused step's; DRAM loses exactly
    the streamed bytes: each resident stream's read and each write no reader needs.
    Every byte a producer writes is read by each of its readers, from DRAM (when the
    producer wrote it there) or from the SRAM tile."""
    plain, fused = resnet(EpilogueFusion.NONE), resnet(mode)
    before, after = plain.trace.costs, fused.trace.costs
    for name in COUNTERS:
        assert getattr(after, name).tolist() == getattr(before, name).tolist(), name
    graph = fused.graph
    streams = queries.tile_streams(graph)
    reuse = tile_reuse(graph, (main_array(fused.hardware),))
    assert streams and len(reuse.resident) == len(streams)
    read = sum(s.tensor.bytes for s in streams)  # vector consumers read the whole tensor
    written = sum(
        a.bytes
        for p, key in reuse.unwritten
        for a in queries.writes_of(graph.ops[p])
        if a.tensor.key == key
    )
    assert plain.dram_bytes - fused.dram_bytes == read + written > 0
    # per tensor: a write saved only when every reader takes the tile on chip
    readers: dict[TensorKey, list[tuple[int, int]]] = {}
    for op in graph.ops:
        for j, access in enumerate(queries.reads_of(op)):
            readers.setdefault(access.tensor.key, []).append((op.op_id, j))
    for p, key in reuse.unwritten:
        for i, j in readers[key]:
            assert reuse.takes(i, j) is not None and graph.ops[i].tile_sources[j] == p  # type: ignore[union-attr]
    # the saved DRAM energy is all the energy saved, but for leakage over a shorter step
    e0, e1 = plain.energy.by_component_pj, fused.energy.by_component_pj
    assert e0["dram"] - e1["dram"] == pytest.approx((read + written) * 8 * 20)
    for key in ("mac", "vector", "sram_ifmap", "sram_filter", "sram_ofmap"):
        assert e1[key] == pytest.approx(e0[key])
    assert fused.total_cycles < plain.total_cycles
    assert fused.settings["fuse_epilogues"] == mode.value
    assert "fuse_epilogues" not in plain.settings  # default summaries are unchanged


def test_the_option_is_validated(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"lowering\.fuse_epilogues: .*'none', 'elementwise' or 'all'"
    ):
        load_inputs(
            ROOT / "configs/runs/default.yaml", parse_sets(["lowering.fuse_epilogues=some"])
        )


@pytest.mark.parametrize(
    "sets",
    [
        ["processors=2", "assignment=data_parallel"],
        ["processors=2", "run.techniques={gpipe: {micro_batches: 2}}"],
        ["run.techniques={optimizer_fusion: {mode: backward}, gradient_prediction: {}}"],
        [
            "dram.arbitration=priority",
            "dram.channels=4",
            "run.techniques={optimizer_fusion: {mode: backward}}",
        ],
    ],
)
def test_fused_steps_place_and_time_alike_in_both_engines(sets: list[str]) -> None:
    """Placement copies and splits fused steps (a stream between stages ends at its
    transfer) and both engines time the contracted groups alike, also with their
    transfers in streams under priority arbitration on interleaved channels."""
    summaries = []
    for engine in ("simpy", "compiled"):
        common = ["batch_size=2", "workload_variant=cifar10", "lowering.fuse_epilogues=all"]
        inputs = load_inputs(
            ROOT / "configs/runs/default.yaml",
            parse_sets([*common, *sets, f"timing.engine={engine}"]),
        )
        result = simulate_training(inputs)
        summary = result.summary()
        assert summary.pop("engine") == engine
        summaries.append(summary)
        graphs = [result.base.graph, *(r.graph for r in result.steps.values())]
        assert all(queries.tile_streams(g) for g in graphs)
    assert summaries[0] == summaries[1]
