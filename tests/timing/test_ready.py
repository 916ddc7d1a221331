"""The ready order: paths by hand, and the same events whatever order a graph is listed in.

Own cycles on the default hardware (DRAM 128 B/cycle, links 64 B/cycle): an op's
estimate is ``max(compute, reads / 128 + writes / 128)``, a transfer's ``bytes / 64``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import simulate_run
from accelsim.graph.ops import OpGraph, Phase, Stage, TransferOp, replaced
from accelsim.timing import compiled, engine
from accelsim.timing.costs import UNIT_ARRAY, UNIT_COMM, UNIT_VECTOR, OpCosts
from accelsim.timing.flat import flatten
from accelsim.timing.machine import Machine
from accelsim.timing.ready import own_cycles, path_ahead, path_behind, ready_rank
from tests.conftest import ROOT
from tests.timing.test_compiled import GRAD, problems
from tests.timing.test_engine import costs, gemm, machine, vector


def diamond() -> tuple[OpGraph, OpCosts]:
    """op0 (array, 10) feeds op1 (vector, 5 cycles, 2560 B read: 20) and op2 (array,
    30); op3 (vector, 2) waits for both; op4 then sends 3200 2-byte elements (6400 B)
    to processor 1."""
    send = TransferOp(4, "t4", "l", Phase.FWD, Stage.FORWARD, GRAD, 3200, 0, 1, (3,))
    graph = OpGraph(
        ops=(gemm(0), vector(1, 0), gemm(2, 0), vector(3, 1, 2), send), processor=(0,) * 5
    )
    c = costs(
        [UNIT_ARRAY, UNIT_VECTOR, UNIT_ARRAY, UNIT_VECTOR, UNIT_COMM],
        compute=[10, 5, 30, 2, 0],
        reads=[0, 2560, 0, 0, 0],
    )
    return graph, c


def test_paths_by_hand() -> None:
    graph, c = diamond()
    on = machine("processors=2")
    own = own_cycles(graph, c, on)
    # op1: max(5, 2560 / 128 = 20); op4: 6400 / 64 = 100.
    assert own.tolist() == [10, 20, 30, 2, 100]
    # Ahead: op4 100; op3 2 + 100; op2 30 + 102; op1 20 + 102; op0 10 + max(132, 122).
    assert path_ahead(graph, own).tolist() == [142, 122, 132, 102, 100]
    # Behind: op1, op2 after op0 (10); op3 after op2 (10 + 30); op4 after op3 (42).
    assert path_behind(graph, own).tolist() == [0, 10, 10, 40, 42]
    assert ready_rank(graph, c, on).tolist() == [0, 2, 1, 3, 4]


def test_ties_fall_to_the_path_behind_then_the_op_id() -> None:
    # op0 (array, 40) feeds op2 (vector, 10); op1 (array, 10) feeds nothing; op3
    # (vector, 10) waits for nothing. Ahead: 50, 10, 10, 10; behind: 0, 0, 40, 0.
    # op1 and op3 tie on both: the op id decides; op2 comes after them (behind 40).
    graph = OpGraph(ops=(gemm(0), gemm(1), vector(2, 0), vector(3)), processor=(0,) * 4)
    c = costs([UNIT_ARRAY, UNIT_ARRAY, UNIT_VECTOR, UNIT_VECTOR], compute=[40, 10, 10, 10])
    assert ready_rank(graph, c, machine()).tolist() == [0, 1, 3, 2]


def test_a_long_chain_goes_first_on_a_shared_unit() -> None:
    # A (array, 20) and B (array, 30) are ready at 0; A feeds C (vector, 100). Ahead:
    # A 120, B 30, so the array runs A first whichever is listed first:
    # A 0..20, then B 20..50 and C 20..120 (B first would end the step at 150).
    graph = OpGraph(ops=(gemm(0), gemm(1), vector(2, 0)), processor=(0,) * 3)
    c = costs([UNIT_ARRAY, UNIT_ARRAY, UNIT_VECTOR], compute=[20, 30, 100])
    trace = engine.simulate(graph, c, machine())
    assert (trace.start_cycle.tolist(), trace.end_cycle.tolist()) == ([0, 20, 20], [20, 50, 120])
    # B listed first (op0), A second (op1, feeding C).
    graph = OpGraph(ops=(gemm(0), gemm(1), vector(2, 1)), processor=(0,) * 3)
    c = costs([UNIT_ARRAY, UNIT_ARRAY, UNIT_VECTOR], compute=[30, 20, 100])
    trace = engine.simulate(graph, c, machine())
    assert (trace.start_cycle.tolist(), trace.end_cycle.tolist()) == ([20, 0, 20], [50, 20, 120])


def relisted(graph: OpGraph, c: OpCosts, order: list[int]) -> tuple[OpGraph, OpCosts]:
    """The same graph with its ops listed in ``order`` (a topological order)."""
    new_id = {old: new for new, old in enumerate(order)}
    ops = tuple(
        replaced(
            graph.ops[old], op_id=new, deps=tuple(sorted(new_id[d] for d in graph.ops[old].deps))
        )
        for new, old in enumerate(order)
    )
    rows = np.asarray(order, np.int64)
    fields: dict[str, Any] = {
        name: getattr(c, name)[rows]
        for name, f in OpCosts.__dataclass_fields__.items()
        if f.type == "np.ndarray"
    }
    moved = OpGraph(
        ops=ops,
        processor=tuple(graph.processor[i] for i in order),
        priority=tuple(graph.priority[i] for i in order) if graph.priority else (),
    )
    return moved, OpCosts(**fields, unit_names=c.unit_names, arrays=c.arrays)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(problem=problems(), data=st.data())
def test_any_listing_runs_the_same_events(problem: Any, data: st.DataObject) -> None:
    # Where the rank's keys leave no tie to the op id, relisting the graph in another
    # topological order moves every op's start and end with it, in both engines.
    graph, c, hardware = problem
    on = Machine.of(hardware)
    rank = ready_rank(graph, c, on)
    own = own_cycles(graph, c, on)
    keys = set(
        zip(
            graph.priority or [0] * len(graph.ops),
            path_ahead(graph, own).tolist(),
            path_behind(graph, own).tolist(),
            strict=True,
        )
    )
    assume(len(keys) == len(graph.ops))
    order = _random_topological(graph, data)
    moved, moved_costs = relisted(graph, c, order)
    assert ready_rank(moved, moved_costs, on).tolist() == rank[order].tolist()
    before = engine.simulate(graph, c, on)
    for trace in (
        engine.simulate(moved, moved_costs, on),
        compiled.simulate(moved, moved_costs, flatten(moved, moved_costs, on)),
    ):
        assert trace.start_cycle.tolist() == before.start_cycle[order].tolist()
        assert trace.end_cycle.tolist() == before.end_cycle[order].tolist()
        assert trace.events == before.events


def _random_topological(graph: OpGraph, data: st.DataObject) -> list[int]:
    waiting = [len(op.deps) for op in graph.ops]
    successors: list[list[int]] = [[] for _ in graph.ops]
    for op in graph.ops:
        for d in op.deps:
            successors[d].append(op.op_id)
    ready = [i for i, n in enumerate(waiting) if n == 0]
    order: list[int] = []
    while ready:
        op = ready.pop(data.draw(st.integers(0, len(ready) - 1)))
        order.append(op)
        for s in successors[op]:
            waiting[s] -= 1
            if waiting[s] == 0:
                ready.append(s)
    return order


def downsample_first(table: dict[str, Any]) -> dict[str, Any]:
    """ResNet-18's table with each downsample branch listed before its block's main
    branch (same graph: the main branch's first conv names its input)."""
    layers = list(table["layers"])
    for conv in [row for row in layers if row["name"].endswith("downsample.conv")]:
        block = conv["name"].removesuffix("downsample.conv")
        at = layers.index(conv)
        branch = layers[at : at + 2]  # the conv and its batchnorm
        del layers[at : at + 2]
        main = next(i for i, row in enumerate(layers) if row["name"] == f"{block}conv1")
        layers[main] = {**layers[main], "inputs": conv["inputs"]}
        layers[main:main] = branch
    return {**table, "layers": layers}


def test_permuted_resnet18_runs_the_same_step(tmp_path: Path) -> None:
    table = yaml.safe_load((ROOT / "workloads" / "resnet18.yaml").read_text())
    permuted = downsample_first(table)
    names = [row["name"] for row in permuted["layers"]]
    assert names.index("layer2.0.downsample.bn") + 1 == names.index("layer2.0.conv1")
    assert len(names) == len(table["layers"])
    moved = tmp_path / "resnet18_downsample_first.yaml"
    moved.write_text(yaml.safe_dump(permuted, sort_keys=False))
    steps = {}
    for workload in (ROOT / "workloads" / "resnet18.yaml", moved):
        for kind in ("simpy", "compiled"):
            sets = [f"workload={workload}", f"timing.engine={kind}"]
            inputs = load_inputs(ROOT / "configs" / "runs" / "default.yaml", parse_sets(sets))
            steps[workload.name, kind] = simulate_run(inputs).summary()
    # Listed either way, in either engine: the same cycles, stalls, busy time, MACs
    # and DRAM bytes (in program order, with the streamed operands re-read per column
    # fold, 42,933,708 and 43,297,449 cycles: +0.85 %); energy to the rounding of its
    # sums, which follow the listing.
    exact = ("total_cycles", "array_stall_cycles", "busy_cycles", "macs", "dram_bytes")
    first = steps["resnet18.yaml", "simpy"]
    assert first["total_cycles"] == 41_553_778
    for step in steps.values():
        assert {key: step[key] for key in exact} == {key: first[key] for key in exact}
        assert step["energy_pj"]["total"] == pytest.approx(first["energy_pj"]["total"], rel=1e-12)
