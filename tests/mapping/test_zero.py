"""ZeRO stages 1, 2 and 3 (``run.parallel.zero``) on the MLP 784-2048-2048-10 over 4
replicas (and the tiny GPT with tensor parallelism): the collectives' bytes on the
wire and the updates' elements counted by hand, both engines, one replica simulated
for all, stage 3's gathers, the memory against the ZeRO paper's formula, and the
configurations refused at load time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import accelsim
from accelsim.cli import main
from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import _Run, simulate_training, step_memory
from accelsim.errors import ConfigError
from accelsim.graph.ops import CommOp, OpGraph, Phase, Stage, Tensor, TensorKind, VectorOp
from accelsim.mapping.zero_placement import gathered
from accelsim.network.collectives import Collective
from accelsim.report.result import RunResult
from accelsim.techniques.base import BASE
from accelsim.timing.costs import UNIT_ARRAY, UNIT_COMM, UNIT_VECTOR
from accelsim.timing.engine import simulate
from tests.conftest import ROOT
from tests.lowering.test_tensor_parallel import run_file
from tests.timing.test_compiled import run_compiled
from tests.timing.test_engine import costs, gemm, machine, vector
from tests.timing.test_symmetry import CASES as SYMMETRY_CASES
from tests.timing.test_symmetry import numbers
from tests.timing.test_tensor_symmetry import CASES as TENSOR_CASES

MLP = ROOT / "configs" / "runs" / "mlp.yaml"
# The MLP's parameters (elements; 2 B words): fc1 1,605,632 + 2,048, fc2 4,194,304 +
# 2,048, fc3 20,480 + 10: 5,824,522 in all, 11,649,044 bytes of gradient (and of weight).
PARAMETERS = 5_824_522
GRADIENT_BYTES = 11_649_044
# Each replica's shard of each parameter over 4: ceil(elements / 4).
SHARD = 401_408 + 512 + 1_048_576 + 512 + 5_120 + 3
D = 4


def run(zero: int, *sets: str) -> _Run:
    given = ["assignment=data_parallel", f"processors={D}", f"run.parallel={{zero: {zero}}}"]
    return _Run(load_inputs(MLP, parse_sets([*given, *sets])))


def simulated(zero: int, *sets: str) -> RunResult:
    r = run(zero, *sets)
    return r.simulate(r.placed(BASE, None), BASE)


def bytes_by_kind(result: RunResult) -> dict[str, int]:
    return {k: v["bytes"] for k, v in result.summary()["communication"].items() if v["bytes"]}


def test_wire_bytes_are_an_all_reduce_below_stage_3_and_half_again_at_it() -> None:
    # A ring collective over d = 4: each processor sends d - 1 pieces of n / d for a
    # reduce-scatter or an all-gather, 2 (d - 1) for an all-reduce; over the 4
    # processors, (d - 1) n and 2 (d - 1) n bytes (every piece divides: n / 4 whole).
    psi = GRADIENT_BYTES
    assert bytes_by_kind(simulated(0)) == {"all_reduce": 2 * (D - 1) * psi}
    for zero in (1, 2):
        assert bytes_by_kind(simulated(zero)) == {
            "reduce_scatter": (D - 1) * psi,
            "all_gather": (D - 1) * psi,
        }
    # Stage 3: every weight gathered twice (forward, backward), every gradient
    # reduce-scattered once: 3 (d - 1) / d of the model per processor.
    assert bytes_by_kind(simulated(3)) == {
        "all_gather": 2 * (D - 1) * psi,
        "reduce_scatter": (D - 1) * psi,
    }


def updates(graph: OpGraph) -> list[VectorOp]:
    return [op for op in graph.ops if isinstance(op, VectorOp) and op.phase is Phase.UPDATE]


@pytest.mark.parametrize("zero", [1, 2, 3])
def test_each_replica_updates_its_shard(zero: int) -> None:
    graph = run(zero).placed(BASE, None)
    assert sum(op.elements for op in updates(run(0).placed(BASE, None))) == D * PARAMETERS
    assert sum(op.elements for op in updates(graph)) == D * SHARD
    for op in updates(graph):
        # Adam without masters reads the weight, its gradient and two states, writes
        # the weight and the states: each access its shard.
        assert {a.elements for a in (*op.reads, *op.writes)} == {op.elements}
    by_name = {op.name: op.elements for op in updates(graph) if graph.processor[op.op_id] == 3}
    assert by_name["fc3.b.update"] == 3  # ceil(10 / 4)


def test_stage_1_gathers_each_weight_after_every_replica_updated_its_shard() -> None:
    graph = run(1).placed(BASE, None)
    comms = [op for op in graph.ops if isinstance(op, CommOp)]
    gathers = [op for op in comms if op.collective is Collective.ALL_GATHER]
    scatters = [op for op in comms if op.collective is Collective.REDUCE_SCATTER]
    assert len(gathers) == len(scatters) == 6
    assert not [op for op in comms if op.collective is Collective.ALL_REDUCE]
    for gather in gathers:
        (scatter,) = [
            s for s in scatters if s.name == gather.name.replace("all_gather", "reduce_scatter")
        ]
        assert gather.participants == scatter.participants == (0, 1, 2, 3)
        waited = [op for op in updates(graph) if scatter.op_id in op.deps]
        assert len(waited) == D  # one update per replica
        assert set(gather.deps) == {op.op_id for op in waited}
        assert gather.tensor.bytes == scatter.tensor.bytes


def test_stage_3_gathers_each_layer_before_each_pass_prefetched() -> None:
    step = run(0).step_graph(BASE)(16)
    words = run(0).inputs.hardware.word_bytes
    for prefetch in (0, 1):
        graph = gathered(step, words, prefetch)
        gathers = [op for op in graph.ops if isinstance(op, CommOp)]
        assert [g.name for g in gathers] == [
            f"{layer}.{stage}.all_gather"
            for stage, layers in (("forward", "123"), ("backward", "321"))
            for layer in (f"fc{n}" for n in layers)
        ]
        assert [g.tensor.elements for g in gathers[:3]] == [1_607_680, 4_196_352, 20_490]
        for g in gathers:
            mine = [
                op
                for op in graph.ops
                if not isinstance(op, CommOp) and op.layer == g.layer and op.stage.value in g.name
            ]
            assert mine and all(g.op_id in op.deps for op in mine)
        # Each gather after the one before; the third of a pass also after the unit
        # prefetch + 1 before it (fc1 with prefetch 1, fc2 with none) has run so far.
        third = gathers[2]
        assert gathers[1].op_id in third.deps
        unit = "fc1" if prefetch else "fc2"
        last = max(
            op.op_id
            for op in graph.ops[: third.op_id]
            if op.layer == unit and op.stage is Stage.FORWARD
        )
        assert set(third.deps) == {gathers[1].op_id, last}
        assert gathers[0].deps == ()


@pytest.mark.parametrize(
    ("zero", "sets"),
    [(1, ["run.data_parallel.bucket_bytes=4194304"]), (2, []), (3, [])],
)
def test_both_engines_give_the_same_cycles(zero: int, sets: list[str]) -> None:
    runs = [simulated(zero, *sets, f"timing.engine={engine}") for engine in ("simpy", "compiled")]
    assert runs[0].trace.end_cycle.tolist() == runs[1].trace.end_cycle.tolist()
    assert runs[0].summary()["communication"] == runs[1].summary()["communication"]


def same_as_full(result: RunResult, full: RunResult) -> None:
    assert full.trace.copies == ()
    assert result.trace.start_cycle.tolist() == full.trace.start_cycle.tolist()
    assert result.trace.end_cycle.tolist() == full.trace.end_cycle.tolist()
    assert numbers(result) == numbers(full)


@pytest.mark.parametrize("engine", ["simpy", "compiled"])
@pytest.mark.parametrize(
    ("zero", "sets", "copies"),
    [
        (1, [], (0, 0, 0, 0)),
        (2, ["run.data_parallel.bucket_bytes=4194304"], (0, 0, 0, 0)),
        (3, [], (0, 0, 0, 0)),
        # 18 samples: replicas 0 and 1 take 5, 2 and 3 take 4: two roles.
        (2, ["batch_size=18"], (0, 0, 2, 2)),
    ],
)
def test_one_replica_simulated_gives_every_number(
    zero: int, sets: list[str], copies: tuple[int, ...], engine: str
) -> None:
    every = [*sets, "dram.sharing=per_processor", f"timing.engine={engine}"]
    symmetric = simulated(zero, *every, "run.data_parallel.symmetry=auto")
    assert symmetric.trace.copies == copies
    same_as_full(symmetric, simulated(zero, *every, "run.data_parallel.symmetry=full"))


@pytest.mark.parametrize(
    ("case", "zero"),
    [
        (case, zero)
        for case in SYMMETRY_CASES
        for zero in (1, 3)
        if "uneven" not in case or zero < 3
    ],
)
def test_one_replica_stands_for_all_on_tori_and_hierarchies(case: str, zero: int) -> None:
    sets, copies = SYMMETRY_CASES[case]
    every = [*sets, "dram.sharing=per_processor"]
    symmetric = simulated(zero, *every, "run.data_parallel.symmetry=auto")
    assert symmetric.trace.copies == copies
    same_as_full(symmetric, simulated(zero, *every, "run.data_parallel.symmetry=full"))


def test_a_shared_dram_is_simulated_in_full() -> None:
    shared = simulated(2, "dram.sharing=shared", "run.data_parallel.symmetry=auto")
    assert shared.trace.copies == ()


@pytest.mark.parametrize(
    ("case", "zero", "buckets"),
    [
        ("ring t2 d2", 2, []),
        ("ring t4 d2", 1, ["run.data_parallel.bucket_bytes=4096"]),
        ("torus 2x2 t2 d2", 1, []),
        ("hierarchy t4 d2", 2, ["run.data_parallel.bucket_bytes=4096"]),
    ],
)
def test_tensor_ranks_reduce_scatter_over_their_data_parallel_group(
    tmp_path: Path, case: str, zero: int, buckets: list[str]
) -> None:
    t, d, topology = TENSOR_CASES[case]
    sets = [
        f"processors={t * d}",
        f"batch_size={2 * d}",
        f"run.parallel={{tensor: {t}, zero: {zero}}}",
        "assignment=data_parallel",
        "dram.sharing=per_processor",
        *topology,
        *buckets,
    ]
    results = {}
    for symmetry in ("auto", "full"):
        inputs = load_inputs(
            run_file(tmp_path), parse_sets([*sets, f"run.data_parallel.symmetry={symmetry}"])
        )
        r = _Run(inputs)
        graph = r.placed(BASE, None)
        results[symmetry] = r.simulate(graph, BASE)
    comms = [op for op in graph.ops if isinstance(op, CommOp)]
    # Rank r of each replica: processors r, r + t, ...: each rank's gradients over its
    # data-parallel group.
    groups = {op.participants for op in comms if op.collective is Collective.REDUCE_SCATTER}
    assert groups == {tuple(range(r, t * d, t)) for r in range(t)}
    gathered_groups = {op.participants for op in comms if op.collective is Collective.ALL_GATHER}
    assert gathered_groups == groups
    assert results["auto"].trace.copies == (0,) * (t * d)
    same_as_full(results["auto"], results["full"])


def memory(zero: int, *sets: str) -> dict[str, Any]:
    inputs = load_inputs(
        MLP,
        parse_sets(
            [
                "assignment=data_parallel",
                "processors=2",
                "optimizer.master_weights=fp32",
                f"run.parallel={{zero: {zero}}}",
                *sets,
            ]
        ),
    )
    return step_memory(inputs).to_dict()


def test_memory_by_stage_is_the_zero_papers_formula() -> None:
    # Rajbhandari et al. 2020, figure 1: bf16 weights and gradients (2 + 2 bytes) and
    # mixed-precision Adam's K = 12 (fp32 master, momentum, variance) per parameter;
    # Ψ = 5,824,522 parameters over N_d = 2 replicas (every parameter's count even).
    psi, n = PARAMETERS, 2
    model = ("weights_bytes", "gradients_bytes", "optimizer_state_bytes", "master_weights_bytes")
    expected = {
        0: (2 * psi, 2 * psi, 8 * psi, 4 * psi),  # (2 + 2 + K) Ψ
        1: (2 * psi, 2 * psi, 8 * psi // n, 4 * psi // n),  # 2Ψ + 2Ψ + KΨ / N_d
        2: (2 * psi, 2 * psi // n, 8 * psi // n, 4 * psi // n),  # 2Ψ + (2 + K) Ψ / N_d
        # (2 + 2 + K) Ψ / N_d, and the two largest layers' weights gathered at once
        # (the one computing and the one prefetched): fc2 8,392,704 B, fc1 3,215,360 B.
        3: (2 * psi // n + 8_392_704 + 3_215_360, 2 * psi // n, 8 * psi // n, 4 * psi // n),
    }
    totals = {0: 16 * psi, 1: 10 * psi, 2: 9 * psi, 3: 8 * psi + 11_608_064}
    for zero, classes in expected.items():
        counted = memory(zero)
        assert tuple(counted[k] for k in model) == classes
        assert sum(counted[k] for k in model) == totals[zero]
        assert counted.get("zero", 0) == zero
    assert memory(3, "run.parallel.zero_prefetch=0")["weights_bytes"] == psi + 8_392_704


def test_memory_only_prints_the_stage(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "run",
        str(MLP),
        "--memory-only",
        "--set",
        "assignment=data_parallel",
        "--set",
        "processors=4",
        "--set",
        "run.parallel={zero: 2}",
    ]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("memory "))
    assert lines[at + 1] == "  ZeRO stage 2, sharded over 4 data-parallel processors"
    # 11,649,044 B of gradient over 4: 2,912,261 B, 2.777 MiB.
    assert lines[at + 3].split()[:2] == ["gradients", "2.777"]


def refusal(*sets: str) -> str:
    with pytest.raises(ConfigError) as raised:
        load_inputs(MLP, parse_sets(list(sets)))
    return str(raised.value)


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (
            ["processors=1", "run.parallel={zero: 1}"],
            "--set: run.parallel.zero: shards over the data-parallel group: needs assignment"
            " data_parallel and at least 2 replicas (the plan leaves 1) (got 1)",
        ),
        (
            ["assignment=data_parallel", "processors=4", "run.parallel={zero: 3}", "batch_size=18"],
            "--set: batch_size: must be a multiple of the 4 replicas with parallel.zero 3"
            " (every replica gathers each layer's weights for the same work) (got 18)",
        ),
        (
            [
                "assignment=data_parallel",
                "processors=4",
                "run.parallel={zero: 2}",
                "optimizer.clip_global_norm=1.0",
            ],
            "--set: optimizer.clip_global_norm: not with parallel.zero above 0: the global"
            " norm of the sharded gradients needs an all-reduce over the data-parallel group,"
            " which is not modelled (got 2)",
        ),
        (
            [
                "assignment=data_parallel",
                "processors=4",
                "run.parallel={zero: 1}",
                "run.techniques={optimizer_fusion: {}}",
            ],
            "--set: run.techniques.optimizer_fusion: not with parallel.zero above 0: its"
            " rewrites or placements do not know the sharded optimizer state, gradients and"
            " weights (got 1)",
        ),
    ],
)
def test_refused_at_load_time(sets: list[str], message: str) -> None:
    assert refusal(*sets) == message


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        *(
            (
                ["run.parallel={zero: 1}", f"run.techniques={{{name}: {{}}}}"],
                f"--set: run.techniques.{name}: not with parallel.zero above 0: its rewrites or"
                " placements do not know the sharded optimizer state, gradients and weights"
                " (got 1)",
            )
            for name in ("gradient_prediction", "gradient_skipping", "pipedream", "layerpipe")
        ),
    ],
)
def test_refused_beside_techniques(tmp_path: Path, sets: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        given = ["processors=4", "batch_size=4", "assignment=data_parallel", *sets]
        load_inputs(run_file(tmp_path), parse_sets(given))
    assert str(raised.value) == message


def test_stage_3_with_a_pipeline_plan_is_refused() -> None:
    message = refusal(
        "assignment=data_parallel", "processors=4", "run.parallel={pipeline: 2, zero: 3}"
    )
    assert (
        "--set: run.parallel.zero: 3 not with parallel.pipeline above 1: it gathers each"
        " layer's weights before each micro-batch's forward and backward pass, inside the"
        " passes a pipeline's step simulates once for all micro-batches (the gathers, and"
        " their prefetch across passes, are not modelled there) (got 3)"
    ) in message.splitlines()


def test_recomputation_and_dropout_compose(tmp_path: Path) -> None:
    # Full recomputation's replayed forward runs in the backward stage, after the
    # layer's backward gather; the updates stay the shards.
    sets = ["processors=4", "batch_size=4", "assignment=data_parallel", "run.parallel={zero: 3}"]
    policy = "run.techniques={recomputation: {policy: full}}"
    inputs = load_inputs(run_file(tmp_path), parse_sets([*sets, policy]))
    result = simulate_training(inputs)
    assert result.steps
    for step in (result.base, *result.steps.values()):
        comms = [op for op in step.graph.ops if isinstance(op, CommOp)]
        kinds = {op.collective for op in comms}
        assert kinds == {Collective.ALL_GATHER, Collective.REDUCE_SCATTER}
        assert sum(op.elements for op in updates(step.graph)) == sum(
            op.elements for op in updates(result.base.graph)
        )
    dropout = ROOT / "configs" / "runs" / "mlp_dropout.yaml"
    run_dropout = accelsim.simulate(
        dropout, ["assignment=data_parallel", "processors=4", "run.parallel={zero: 2}"]
    )
    assert run_dropout.base.total_cycles > 0


def collective(op_id: int, kind: Collective, *deps: int) -> CommOp:
    tensor = Tensor(f"c{op_id}", TensorKind.GRADIENT, 1001, 2)
    return CommOp(
        op_id,
        f"c{op_id}",
        "",
        Phase.COMM,
        Stage.COMMUNICATION,
        tensor,
        (0, 1),
        deps,
        collective=kind,
    )


def test_a_reduce_scatter_then_the_shards_update_then_an_all_gather_timed_by_hand() -> None:
    # Default hardware, 2 processors: one shared DRAM channel of 128 B/cycle + 100, links
    # of 64 B/cycle + 200. A gradient of 1,001 words (2,002 B) made on each by 100.
    # Reduce-scatter: each reads its 2,002 B (2 x 16: 100..132, arrive 232), one link
    # step of a 1,001 B piece (16 + 200: 448), each writes its piece (2 x 8: 448..464,
    # arrive 564). Each shard's update, 50 cycles: 564..614. All-gather after both:
    # each reads its piece (2 x 8: 614..630, arrive 730), one step (16 + 200: 946),
    # each writes the gathered 2,002 B (2 x 16: 946..978, arrive 1078).
    ops = (
        gemm(0),
        gemm(1),
        collective(2, Collective.REDUCE_SCATTER, 0, 1),
        vector(3, 2, phase=Phase.UPDATE),
        vector(4, 2, phase=Phase.UPDATE),
        collective(5, Collective.ALL_GATHER, 3, 4),
    )
    graph = OpGraph(ops=ops, processor=(0, 1, 0, 0, 1, 0))
    units = [UNIT_ARRAY, UNIT_ARRAY, UNIT_COMM, UNIT_VECTOR, UNIT_VECTOR, UNIT_COMM]
    c = costs(units, compute=[100, 100, 0, 50, 50, 0])
    on = machine("processors=2")
    trace = simulate(graph, c, on)
    assert trace.start_cycle.tolist() == [0, 0, 100, 564, 564, 614]
    assert trace.end_cycle.tolist() == [100, 100, 564, 614, 614, 1078]
    compiled = run_compiled(graph, c, on)
    assert compiled.end_cycle.tolist() == trace.end_cycle.tolist()
