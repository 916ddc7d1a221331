"""Expert parallelism (``run.parallel.expert``): a two-layer mixture-of-experts model on
4 processors at e = 1, 2, 4, every count worked out by hand beside it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelsim import cli
from accelsim.config.enums import CommGroup
from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import RunInputs, load_inputs
from accelsim.driver.run import _Run, simulate_training, step_memory
from accelsim.errors import ConfigError
from accelsim.graph.builder import GraphBuilder
from accelsim.graph.ops import NO_EXPERT, CommOp, GemmOp, OpGraph, Phase, TensorKind, TransferOp
from accelsim.mapping.expert_placement import expert_parallel
from accelsim.mapping.groups import GroupKind, processor_groups
from accelsim.network.collectives import Collective
from accelsim.techniques.base import BASE
from accelsim.timing.costs import UNIT_ARRAY, UNIT_COMM, UNIT_VECTOR
from accelsim.timing.engine import simulate
from tests.conftest import ROOT
from tests.timing.test_compiled import run_compiled
from tests.timing.test_engine import costs, machine

MOE = ROOT / "tests" / "fixtures" / "workloads" / "tiny_moe.yaml"
P, B, S, H, E, K, F = (
    4,
    4,
    8,
    16,
    4,
    2,
    24,
)  # processors, batch, tokens, width, experts, top-k, inner
WORD = 2  # bytes of an activation and a gradient (the default word sizes)
C = -(-(B // P) * S * K // E)  # a rank's capacity per expert: ceil(8 x 2 / 4) = 4 tokens


def run_file(tmp_path: Path) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(
        "name: tiny_moe\n"
        f"hardware: {ROOT / 'configs/hardware/default.yaml'}\n"
        f"workload: {MOE}\n"
        f"energy: {ROOT / 'configs/energy/horowitz45.yaml'}\n"
        f"batch_size: {B}\n"
        "assignment: data_parallel\n"
        "optimizer: {kind: adam}\n"
    )
    return path


def inputs(tmp_path: Path, e: int | None, *sets: str) -> RunInputs:
    plan = [] if e is None else [f"run.parallel={{expert: {e}}}"]
    return load_inputs(run_file(tmp_path), parse_sets([f"processors={P}", *plan, *sets]))


def placed(tmp_path: Path, e: int | None, *sets: str) -> OpGraph:
    return _Run(inputs(tmp_path, e, *sets)).placed(BASE, None)


def comms(graph: OpGraph, kind: Collective) -> list[CommOp]:
    return [op for op in graph.ops if isinstance(op, CommOp) and op.collective is kind]


def expert_gemms(graph: OpGraph, p: int) -> list[GemmOp]:
    """Processor ``p``'s forward GEMMs of experts."""
    return [
        op
        for op in graph.ops
        if isinstance(op, GemmOp)
        and graph.processor[op.op_id] == p
        and op.expert != NO_EXPERT
        and op.phase is Phase.FWD
    ]


@pytest.mark.parametrize("e", [1, 2, 4])
def test_each_rank_computes_its_experts_on_every_ranks_tokens(tmp_path: Path, e: int) -> None:
    graph = placed(tmp_path, e)
    for p in range(P):
        experts = expert_gemms(graph, p)
        # per moe layer: E / e experts of 3 GEMMs, each on e x C tokens
        assert len(experts) == 2 * 3 * E // e
        assert {op.m for op in experts if ".w2." not in op.name} == {e * C}
        assert {op.expert for op in experts} == set(range(E // e))
        # E / e experts x e x C tokens x 3 GEMMs of d x f: 4 x 4 x 3 x 16 x 24 = 18,432 a
        # layer at every e (a balanced router gives each rank as many expert tokens)
        assert sum(op.macs for op in experts) == 2 * E * C * 3 * H * F == 36_864


@pytest.mark.parametrize("e", [2, 4])
def test_two_all_to_alls_each_way_per_moe_layer_of_the_routed_tokens(
    tmp_path: Path, e: int
) -> None:
    graph = placed(tmp_path, e)
    a2a = comms(graph, Collective.ALL_TO_ALL)
    groups = [tuple(range(g, g + e)) for g in range(0, P, e)]
    for group in groups:
        mine = [op for op in a2a if op.participants == group]
        assert all(op.group is CommGroup.EXPERT for op in mine)
        assert [op.name.removeprefix(f"p{group[0]}/") for op in mine] == [
            "moe0.received.all_to_all",
            "moe0.returned.all_to_all",
            "moe1.received.all_to_all",
            "moe1.returned.all_to_all",
            "moe1.dreceived.all_to_all",
            "moe1.ddispatched.all_to_all",
            "moe0.dreceived.all_to_all",
            "moe0.ddispatched.all_to_all",
        ]
        # each rank's buffer: C tokens for each of the E experts, h words each
        # (tokens x k x capacity factor, rounded up per expert): 4 x 4 x 16 x 2 B
        assert {op.tensor.bytes for op in mine} == {E * C * H * WORD} == {512}
    assert len(a2a) == 8 * len(groups)
    # the all-to-all stands for the data the experts read: nothing moves between ranks
    assert not any(isinstance(op, TransferOp) for op in graph.ops)
    assert not comms(placed(tmp_path, 1), Collective.ALL_TO_ALL)


@pytest.mark.parametrize(
    ("e", "expert_groups"),
    [(1, set()), (2, {(0, 2), (1, 3)}), (4, set())],
)
def test_expert_gradients_are_all_reduced_over_the_ranks_holding_them(
    tmp_path: Path, e: int, expert_groups: set[tuple[int, ...]]
) -> None:
    graph = placed(tmp_path, e)
    reduces = comms(graph, Collective.ALL_REDUCE)
    dense = {op.participants for op in reduces if ".experts." not in op.name}
    experts = {op.participants for op in reduces if ".experts." in op.name}
    assert dense == {(0, 1, 2, 3)}
    if e == 1:  # data parallelism: every expert is on every processor
        assert experts == {(0, 1, 2, 3)}
    else:
        assert experts == expert_groups
    # e = 2: each rank's 2 experts x 3 weights x 2 layers, over 2 groups of ranks
    assert sum(".experts." in op.name for op in reduces) == {1: 24, 2: 24, 4: 0}[e]


def test_expert_1_is_data_parallelism(tmp_path: Path) -> None:
    plain, one = placed(tmp_path, None), placed(tmp_path, 1)
    assert plain.ops == one.ops and plain.processor == one.processor


def test_groups_both_engines_and_symmetry_agree(tmp_path: Path) -> None:
    """Symmetric replicas (``data_parallel.symmetry: auto``, a DRAM per processor):
    data parallelism simulates one processor for all four; an expert-parallel step
    has all-to-alls, so it falls back to simulating every processor, the same
    numbers as ``symmetry: full``."""
    own = "dram.sharing=per_processor"
    runs = [
        simulate_training(inputs(tmp_path, 2, own, *sets)).base
        for sets in (
            ("timing.engine=simpy", "run.data_parallel.symmetry=full"),
            ("timing.engine=compiled", "run.data_parallel.symmetry=full"),
            ("timing.engine=compiled",),
        )
    ]
    simpy, compiled, symmetric = runs
    assert simpy.total_cycles == compiled.total_cycles == symmetric.total_cycles
    assert symmetric.trace.copies == ()
    data = simulate_training(inputs(tmp_path, None, own, "timing.engine=compiled")).base
    assert data.trace.copies == (0, 0, 0, 0)
    assert (simpy.trace.start_cycle == compiled.trace.start_cycle).all()
    assert (simpy.trace.end_cycle == compiled.trace.end_cycle).all()
    machine = simpy.machine
    groups = processor_groups(simpy.graph, machine.network, machine.hardware.interconnect)
    assert [(g.kind, g.members) for g in groups] == [
        (GroupKind.EXPERT, (0, 1)),
        (GroupKind.EXPERT, (2, 3)),
        (GroupKind.DATA, (0, 1, 2, 3)),
    ]
    assert simpy.settings["expert_parallel"] == "2"


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (
            ("run.parallel={expert: 8}", "processors=8", "batch_size=8"),
            "parallel.expert: must divide layer moe0's 4 experts (each rank holds experts"
            " / e) (got 8)",
        ),
        (
            ("run.parallel={expert: 3}",),
            "parallel.expert: must divide the 4 processors (got 3)",
        ),
        (
            ("run.parallel={expert: 2}", "assignment=single"),
            "parallel.expert: runs every layer but the experts data-parallel over the"
            " processors: needs assignment data_parallel (got 2)",
        ),
        (
            ("run.parallel={expert: 2}", "batch_size=6"),
            "batch_size: must be a multiple of the 4 processors with parallel.expert above 1"
            " (every rank of an expert group routes as many tokens) (got 6)",
        ),
        (
            ("run.parallel={expert: 2}", "run.techniques={gpipe: {}}"),
            "techniques.gpipe: not with parallel.expert above 1: its rewrites and placements"
            " do not know the expert-parallel all-to-alls (got 2)",
        ),
        (
            (
                "run.parallel={expert: 2}",
                f"workload={ROOT / 'tests/fixtures/workloads/tiny_gpt.yaml'}",
            ),
            "parallel.expert: needs a moe layer to spread (the workload has none) (got 2)",
        ),
    ],
)
def test_refusals(tmp_path: Path, sets: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_inputs(run_file(tmp_path), parse_sets([f"processors={P}", *sets]))
    assert any(str(p).endswith(message) for p in caught.value.problems), caught.value.problems


def test_an_expert_pair_hand_timed_on_both_engines(tmp_path: Path) -> None:
    """One rank's dispatch (a vector op, 100 cycles, hand costs) of a 1,000-word buffer
    (2,000 B), its all-to-all stand-in and an expert's GEMM (100 cycles) reading the
    buffer, placed for an expert group of 2 (default hardware: one DRAM channel of
    128 B/cycle + 100, links of 64 B/cycle + 200).  The ranks' dispatches end at 100;
    the group's one all-to-all starts then: each rank reads its 2,000 B buffer, 16
    cycles each on the channel (100..132, arrive 232), one ring shift of the other
    rank's half, 1,000 B (16 + 200 -> 448), each writes what it holds, 2 x 16
    (448..480, arrive 580); each rank's GEMM waits for it: 580..680."""
    run = inputs(tmp_path, 2, "processors=2", "batch_size=2")
    words = run.hardware.word_bytes
    builder = GraphBuilder(words)
    x = builder.tensor("x", TensorKind.ACTIVATION, 1000)
    w = builder.tensor("w", TensorKind.WEIGHT, 1)
    sent = builder.tensor("sent", TensorKind.ACTIVATION, 1000)
    y = builder.tensor("y", TensorKind.ACTIVATION, 1000)
    builder.vector("dispatch", "moe", Phase.FWD, 1000, 1, [x], [sent])
    delivered = builder.tensor("received", TensorKind.ACTIVATION, 1000)
    a2a = builder.collective(
        "received.all_to_all", "moe", delivered, (), [0], Collective.ALL_TO_ALL,
        group=CommGroup.EXPERT,
    )  # fmt: skip
    gemm = builder.gemm("w1.fwd", "moe", Phase.FWD, 1000, 1, 1, 1, sent, w, y, expert=0)
    builder.add_dependencies(gemm, [a2a])
    step = builder.build()
    graph = expert_parallel(lambda _: step, run.run, run.hardware)
    assert [type(op).__name__ for op in graph.ops] == [
        "VectorOp", "VectorOp", "CommOp", "GemmOp", "GemmOp"
    ]  # fmt: skip
    assert graph.processor == (0, 1, 0, 0, 1)
    units = [UNIT_VECTOR, UNIT_VECTOR, UNIT_COMM, UNIT_ARRAY, UNIT_ARRAY]
    c = costs(units, compute=[100, 100, 0, 100, 100])
    on = machine("processors=2")
    trace = simulate(graph, c, on)
    assert trace.end_cycle.tolist() == [100, 100, 580, 680, 680]
    compiled = run_compiled(graph, c, on)
    assert compiled.start_cycle.tolist() == trace.start_cycle.tolist()
    assert compiled.end_cycle.tolist() == trace.end_cycle.tolist()


MIXTRAL_RUN = ROOT / "configs" / "runs" / "mixtral_ep8.yaml"
SHORT = ("workload.input.length=256",)


def test_mixtral_at_expert_8_holds_one_expert_a_layer_and_does_not_fit_an_a100(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Mixtral-8x7B's 46,702,792,704 parameters less 7 of each layer's 8 experts
    (32 x 7 x 3 x 4,096 x 14,336 = 39,460,012,032): 7,242,780,672 a GPU, 16 bytes each
    with Adam and fp32 master weights (2 + 2 + 8 + 4): 108 GiB of weights and
    optimizer state, more than the 74.5 GiB of an A100's HBM."""
    inputs = load_inputs(MIXTRAL_RUN, parse_sets(list(SHORT)))
    memory = step_memory(inputs)
    held = 46_702_792_704 - 32 * 7 * 3 * 4096 * 14336
    assert held == 7_242_780_672
    got = memory.bytes_by_class
    assert got["weights"] == got["gradients"] == 2 * held
    assert got["optimizer_state"] == 8 * held
    assert got["master_weights"] == 4 * held
    # the largest buffer in flight: an all-to-all's, 8 experts x C = 256 x 2 / 8 = 64
    # tokens x 4,096 words x 2 B
    assert got["communication"] == 8 * 64 * 4096 * 2
    assert not memory.fits
    sets = ("--set", SHORT[0], "--set", "run.on_capacity=error")
    args = ["run", str(MIXTRAL_RUN), "--out", str(tmp_path), *sets]
    assert cli.main(args) == cli.EXIT_INPUT
    assert (
        "mixtral_ep8.yaml: hardware.dram.capacity_gib: a processor needs 110.60 GiB, more"
        " than the 74.50 GiB of its DRAM (weights 13.49, gradients 13.49, optimizer_state"
        " 53.96, master_weights 26.98, activations 2.63, communication 0.00, workspace 0.04"
        " GiB); set on_capacity: report to simulate it anyway (got 74.5)"
    ) in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_mixtral_one_step_on_two_dgx_nodes_at_expert_8(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["run", str(MIXTRAL_RUN), "--out", str(out), "--set", SHORT[0]]
    assert cli.main(args) == cli.EXIT_OK
    (summary,) = out.glob("*/summary.json")
    data = json.loads(summary.read_text("utf-8"))
    assert [g["kind"] for g in data["groups"]] == ["expert", "expert", "data"]
    assert [g["span"][-1]["level"] for g in data["groups"]] == [0, 0, 1]
    assert data["memory"]["fits"] is False
    # 32 layers x 4 all-to-alls x 2 groups, each of 8 ranks sending 7 pieces of 1/8 of
    # its 4 MiB buffer (a switch: direct)
    a2a = data["communication"]["all_to_all"]
    assert a2a["bytes"] == 32 * 4 * 2 * 8 * 7 * (8 * 64 * 4096 * 2 // 8)


def test_buckets_cut_the_dense_and_the_expert_gradients_apart(tmp_path: Path) -> None:
    """4,096-byte buckets at e = 2.  Dense gradients (2 B words) in backward's order:
    the LM head 64 x 16 (2,048 B), the routers 16 x 4 (128 B each), then the embedding
    (2,048 B): 2,304 B, and the embedding alone.  A rank's expert gradients: 2 experts
    x 3 weights x 2 layers of 16 x 24 (768 B each): 5 to a bucket, 5 + 5 + 2."""
    graph = placed(tmp_path, 2, "run.data_parallel.bucket_bytes=4096")
    reduces = comms(graph, Collective.ALL_REDUCE)
    by_group = [(op.participants, op.tensor.bytes) for op in reduces]
    assert by_group == [
        ((0, 1, 2, 3), 2048 + 2 * 128),
        ((0, 1, 2, 3), 2048),
        *(((0, 2), b) for b in (5 * 768, 5 * 768, 2 * 768)),
        *(((1, 3), b) for b in (5 * 768, 5 * 768, 2 * 768)),
    ]
