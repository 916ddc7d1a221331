"""Data parallelism's gradient buckets (``run.data_parallel.bucket_bytes``): which
gradients a bucket holds, the all-reduces and updates placement makes of them, and
their time on both engines, counted by hand."""

from __future__ import annotations

import pytest

import accelsim
from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import _Run
from accelsim.errors import ConfigError
from accelsim.graph.ops import CORE, CommOp, OpGraph, Phase, Stage, Tensor, TensorKind, VectorOp
from accelsim.mapping import placement
from accelsim.techniques.base import BASE
from accelsim.timing.costs import UNIT_ARRAY, UNIT_COMM
from accelsim.timing.engine import simulate
from tests.conftest import ROOT
from tests.timing.test_compiled import run_compiled
from tests.timing.test_engine import costs, gemm, machine

MLP = ROOT / "configs" / "runs" / "mlp.yaml"
SMOKE = ROOT / "configs" / "runs" / "smoke.yaml"
MIB = 2**20

# The MLP 784-2048-2048-10's gradients in the order backward makes them, 2 B a word:
# fc3.W 20,480 x 2 = 40,960 B, fc3.b 20 B, fc2.W 8,388,608 B, fc2.b 4,096 B,
# fc1.W 1,605,632 x 2 = 3,211,264 B, fc1.b 4,096 B: 11,649,044 B in all.
GRADIENT_BYTES = 11_649_044


def mlp_run(*sets: str) -> _Run:
    return _Run(load_inputs(MLP, parse_sets(["assignment=data_parallel", "processors=2", *sets])))


def placed(bucket_bytes: int | None) -> OpGraph:
    run = mlp_run()
    inputs = run.inputs
    return placement.data_parallel(
        run.step_graph(BASE),
        inputs.run.batch_size,
        2,
        inputs.run.optimizer,
        inputs.hardware.word_bytes,
        bucket_bytes,
    )


def allreduces(graph: OpGraph) -> list[CommOp]:
    return [op for op in graph.ops if isinstance(op, CommOp)]


def test_buckets_take_the_gradients_in_backward_order_up_to_the_cap() -> None:
    step = mlp_run().step_graph(BASE)(64)
    names = [[p.weight.name for p in b] for b in placement.buckets(step.parameters, 4 * MIB)]
    # 4 MiB = 4,194,304 B: fc3's two (40,980 B); fc2.W, larger than a bucket, alone;
    # fc2.b, fc1.W and fc1.b (3,219,456 B).
    assert names == [["fc3.W", "fc3.b"], ["fc2.W"], ["fc2.b", "fc1.W", "fc1.b"]]
    # DDP's 25 MiB holds them all; a byte a bucket, each its own.
    assert [len(b) for b in placement.buckets(step.parameters, 25 * MIB)] == [6]
    assert [len(b) for b in placement.buckets(step.parameters, 1)] == [1] * 6


@pytest.mark.parametrize(("bucket_bytes", "sizes"), [(None, 6), (4 * MIB, 3), (25 * MIB, 1)])
def test_one_all_reduce_per_bucket_moves_every_gradient_byte_once(
    bucket_bytes: int | None, sizes: int
) -> None:
    graph = placed(bucket_bytes)
    ops = allreduces(graph)
    assert len(ops) == sizes
    assert sum(op.tensor.bytes for op in ops) == GRADIENT_BYTES
    for op in ops:
        assert op.tensor.bytes == sum(g.bytes for g in op.gradients)
        assert (op.participants, op.owner, graph.processor[op.op_id]) == ((0, 1), CORE, 0)
    held = [g for op in ops for g in op.gradients]
    assert sorted(g.name for g in held) == sorted(p.gradient.name for p in graph.parameters)


def test_a_bucket_waits_for_its_gradients_and_the_bucket_before_it() -> None:
    graph = placed(4 * MIB)
    ops = allreduces(graph)
    made = {op.op_id: (graph.processor[op.op_id], op.name) for op in graph.ops}
    # every replica's gradient ops of the bucket, then the bucket before it
    first = [(0, "fc3.dw"), (0, "fc3.db"), (1, "fc3.dw"), (1, "fc3.db")]
    assert [made[d] for d in ops[0].deps] == first
    assert [made[d] for d in ops[1].deps] == [
        (0, "fc2.dw"),
        (1, "fc2.dw"),
        (0, "bucket0.allreduce"),
    ]
    assert ops[2].deps[-1] == ops[1].op_id
    # without buckets, nothing chains the all-reduces
    unchained = placed(None)
    assert not any(
        isinstance(unchained.ops[d], CommOp) for op in allreduces(unchained) for d in op.deps
    )
    # every replica's update of a parameter waits for its bucket's all-reduce
    bucket_of = {g.local: op.op_id for op in ops for g in op.gradients}
    updates = [op for op in graph.ops if isinstance(op, VectorOp) and op.phase is Phase.UPDATE]
    assert len(updates) == 12
    for update in updates:
        (gradient,) = (a.tensor for a in update.reads if a.tensor.kind is TensorKind.GRADIENT)
        assert bucket_of[gradient.local] in update.deps


def comm(op_id: int, elements: int, *deps: int) -> CommOp:
    tensor = Tensor(f"ar{op_id}", TensorKind.GRADIENT, elements, 2)
    return CommOp(op_id, f"ar{op_id}", "", Phase.COMM, Stage.COMMUNICATION, tensor, (0, 1), deps)


# Two gradients of 1,001 words (2,002 B) on 2 processors, made by GEMMs: gradient a at
# 100 (ops 0, 1), gradient b at 200 (ops 2, 3, after a's on each array).  Default
# hardware: one DRAM channel of 128 B/cycle + 100, links of 64 B/cycle + 200.
GRADIENTS = (gemm(0), gemm(1), gemm(2, 0), gemm(3, 1))
ON = (0, 1, 0, 1)


@pytest.mark.parametrize(
    ("reduces", "ends"),
    [
        # a bucket each, one after the other (tiny buckets): a's all-reduce at 100,
        # DRAM reads 2 x 16 (100..132, arrive 232), 2(P-1) = 2 link steps of 1,001 B,
        # 16 + 200 each (-> 664), writes 2 x 16 (664..696, arrive 796); b's, after
        # it, the same 696 cycles: 796 -> 1492.
        ((comm(4, 1001, 0, 1), comm(5, 1001, 2, 3, 4)), [796, 1492]),
        # one bucket of both (4,004 B) at 200: reads 2 x 32 (200..264, arrive 364),
        # 2 steps of 2,002 B, 32 + 200 each (-> 828), writes 2 x 32 (828..892,
        # arrive 992): the same 192 busy cycles as the two, one set of latencies
        # (2 x 100 of DRAM, 2(P-1) x 200 of links) instead of two: 600 cycles
        # fewer, less the 100 the bucket waits for b: 1492 - 500.
        ((comm(4, 2002, 0, 1, 2, 3),), [992]),
        # without buckets (no stream orders them), b's reads queue behind a's
        # (200..232, arrive 332) and each step follows a's on the links by 100
        # (-> 548, 764), writes 764..796, arrive 896: the latencies overlap.
        ((comm(4, 1001, 0, 1), comm(5, 1001, 2, 3)), [796, 896]),
    ],
)
def test_a_bucket_of_two_pays_the_latencies_once(
    reduces: tuple[CommOp, ...], ends: list[int]
) -> None:
    graph = OpGraph(ops=(*GRADIENTS, *reduces), processor=ON + (0,) * len(reduces))
    units = [UNIT_ARRAY] * 4 + [UNIT_COMM] * len(reduces)
    c = costs(units, compute=[100] * 4 + [0] * len(reduces))
    on = machine("processors=2")
    trace = simulate(graph, c, on)
    assert trace.end_cycle.tolist() == [100, 100, 200, 200, *ends]
    compiled = run_compiled(graph, c, on)
    assert compiled.start_cycle.tolist() == trace.start_cycle.tolist()
    assert compiled.end_cycle.tolist() == trace.end_cycle.tolist()


def test_a_bucketed_run_is_the_same_on_both_engines() -> None:
    sets = ["processors=2", "assignment=data_parallel", "run.data_parallel.bucket_bytes=65536"]
    runs = [
        accelsim.simulate(SMOKE, [*sets, f"timing.engine={engine}"]).base
        for engine in ("simpy", "compiled")
    ]
    assert len(allreduces(runs[0].graph)) > 1
    assert runs[0].trace.end_cycle.tolist() == runs[1].trace.end_cycle.tolist()
    assert runs[0].summary()["communication"] == runs[1].summary()["communication"]


def test_buckets_need_data_parallelism() -> None:
    with pytest.raises(ConfigError) as raised:
        load_inputs(MLP, parse_sets(["run.data_parallel.bucket_bytes=1000"]))
    assert str(raised.value) == (
        "--set: run.data_parallel.bucket_bytes: needs assignment: data_parallel (the step"
        " of another assignment all-reduces no gradient among replicas) (got 1000)"
    )
