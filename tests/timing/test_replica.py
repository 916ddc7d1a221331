"""A symmetric data-parallel step placed, costed and simulated once, one replica
standing for every processor: processor 0's ops and the all-reduces get the costs and
cycles of the step of every replica (``symmetry: full``), on both engines, and the
step's totals are the replica's expanded by the count."""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pytest

from accelsim.config.loader import parse_sets
from accelsim.driver.inputs import load_inputs
from accelsim.driver.limits import step_totals
from accelsim.driver.replica import ReplicaStep, replica_totals, simulate_replica_step
from accelsim.driver.run import _Run
from accelsim.graph.ops import CommOp
from accelsim.mapping.replication import replication_problem
from accelsim.report.result import RunResult
from accelsim.techniques.base import BASE
from accelsim.timing.symmetry import UNBALANCED
from tests.timing.test_symmetry import BUCKETS, HIERARCHY, MLP, TORUS, simulated

DATA_PARALLEL = ["assignment=data_parallel", "dram.sharing=per_processor"]
CASES: dict[str, list[str]] = {
    "ring of 2": ["processors=2", "batch_size=4"],
    "ring of 4": ["processors=4", "batch_size=8"],
    "ring of 8": ["processors=8", "batch_size=8"],
    "torus 2x4": ["processors=8", "batch_size=16", *TORUS, "interconnect.algorithm=multi_dim"],
    "hierarchy": ["processors=8", "batch_size=16", *HIERARCHY, "interconnect.algorithm=multi_dim"],
}


def _run(*sets: str) -> _Run:
    return _Run(load_inputs(MLP, parse_sets([*DATA_PARALLEL, *sets])))


def replica(*sets: str) -> ReplicaStep | str:
    return simulate_replica_step(_run(*sets).inputs)


def full(*sets: str) -> RunResult:
    run = _run(*sets, "run.data_parallel.symmetry=full")
    return run.simulate(run.placed(BASE, None), BASE)


@pytest.mark.parametrize("engine", ["simpy", "compiled"])
@pytest.mark.parametrize("buckets", [[], [BUCKETS]], ids=["one per gradient", "buckets"])
@pytest.mark.parametrize("case", list(CASES))
def test_one_replica_gives_processor_0s_ops_and_the_all_reduces_of_the_full_step(
    case: str, buckets: list[str], engine: str
) -> None:
    sets = [*CASES[case], *buckets, f"timing.engine={engine}"]
    step = replica(*sets)
    assert isinstance(step, ReplicaStep)
    whole = full(*sets)
    processors = whole.hardware.processors
    graph, count = step.replicated.graph, step.replicated.count
    assert count == processors
    # The replica is processor 0's ops and the all-reduces of the full step, in its
    # order, under the same names and tags.
    at = {(op.name, op.tag): i for i, op in enumerate(whole.graph.ops)}
    assert len(at) == len(whole.graph.ops)
    index = np.asarray([at[op.name, op.tag] for op in graph.ops])
    kept = [
        i
        for i, op in enumerate(whole.graph.ops)
        if isinstance(op, CommOp) or whole.graph.processor[i] == 0
    ]
    assert index.tolist() == kept
    comms = [op for op in graph.ops if isinstance(op, CommOp)]
    assert comms and all(op.participants == tuple(range(processors)) for op in comms)
    assert set(graph.processor) == {0}
    # The same costs, the same cycles, op by op.
    for f in fields(step.costs):
        value = getattr(step.costs, f.name)
        if isinstance(value, np.ndarray):
            assert value.tolist() == getattr(whole.trace.costs, f.name)[index].tolist(), f.name
    assert step.trace.start_cycle.tolist() == whole.trace.start_cycle[index].tolist()
    assert step.trace.end_cycle.tolist() == whole.trace.end_cycle[index].tolist()
    assert step.trace.total_cycles == whole.trace.total_cycles
    assert step.trace.copies == (0,) * processors
    # The full step's ops: the replica's count times, the all-reduces once.
    replica_ops = len(graph.ops) - len(comms)
    assert len(whole.graph.ops) == count * replica_ops + len(comms)
    assert replica_totals(step.replicated) == step_totals(whole.graph)
    # Only processor 0's ops and links were simulated: the events of the full step
    # simulated on its representative (symmetry: auto), fewer than the full step's.
    auto = simulated(*sets)
    assert auto.trace.copies == step.trace.copies
    assert step.trace.events == auto.trace.events < whole.trace.events


@pytest.mark.parametrize(
    ("sets", "why"),
    [
        (
            ["processors=4", "batch_size=10"],
            "its batch of 10 does not split evenly over 4 processors",
        ),
        (
            ["processors=4", "batch_size=8", "dram.sharing=shared"],
            "its processors share a DRAM (dram.sharing: per_processor gives each its own)",
        ),
        (
            ["processors=4", "batch_size=8", "run.data_parallel.symmetry=full"],
            "run.data_parallel.symmetry: full simulates every processor",
        ),
        (["processors=1"], "it is not data-parallel over several processors"),
        (
            ["processors=4", "batch_size=8", "run.parallel={tensor: 2}"],
            "it has a parallel plan (run.parallel)",
        ),
        (
            ["processors=4", "batch_size=8", "run.techniques={gpipe: {}}"],
            "a technique rewrites or places its step",
        ),
    ],
)
def test_the_specs_say_why_the_replicas_are_not_placed_once(sets: list[str], why: str) -> None:
    inputs = _run(*sets).inputs
    assert replication_problem(inputs.run, inputs.hardware) == why
    assert replica(*sets) == why


def test_a_ring_over_a_torus_is_refused_once_placed() -> None:
    # The specs allow it, but a ring over the processors of a 2x4 torus in order
    # crosses both dimensions from 1 to 2 and one from 0 to 1: the links of a class
    # are not loaded alike.
    sets = ["processors=8", "batch_size=16", *TORUS, "interconnect.algorithm=ring"]
    inputs = _run(*sets).inputs
    assert replication_problem(inputs.run, inputs.hardware) == ""
    assert replica(*sets) == UNBALANCED
