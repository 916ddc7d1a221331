"""Symmetric data-parallel replicas simulated once per role
(``run.data_parallel.symmetry``): the same numbers as simulating every replica, on
both engines, where it applies, and the full simulation where it does not."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from accelsim.config.interconnect import InterconnectSpec
from accelsim.config.loader import parse_sets
from accelsim.config.run import EngineKind
from accelsim.driver.inputs import load_inputs
from accelsim.driver.run import _Run
from accelsim.graph.ops import OpGraph
from accelsim.network.symmetry import link_classes
from accelsim.network.topology import Network
from accelsim.report.result import RunResult
from accelsim.report.simulated import SimulatedProcessors
from accelsim.report.summary import StepSummary
from accelsim.techniques.base import BASE
from accelsim.timing import symmetry
from accelsim.timing.costs import UNIT_ARRAY, UNIT_COMM
from tests.conftest import ROOT
from tests.timing.test_engine import allreduce, costs, gemm, machine

MLP = ROOT / "configs" / "runs" / "mlp.yaml"
TORUS = ["interconnect.topology=torus", "interconnect.dims=[2, 4]"]
HIERARCHY = [
    "interconnect={topology: switch, bandwidth_bytes_per_cycle: 64, latency_cycles: 100,"
    " levels: [{topology: ring, dims: [2], bandwidth_bytes_per_cycle: 16, latency_cycles: 500}]}"
]
BUCKETS = "run.data_parallel.bucket_bytes=1000000"

# name: settings, and each processor's representative when the step is symmetric.
CASES: dict[str, tuple[list[str], tuple[int, ...]]] = {
    "ring": (["processors=4", "batch_size=8"], (0, 0, 0, 0)),
    # 10 samples on 4: processors 0 and 1 take 3, processors 2 and 3 take 2.
    "ring, uneven": (["processors=4", "batch_size=10"], (0, 0, 2, 2)),
    "torus 2x4": (
        ["processors=8", "batch_size=16", *TORUS, "interconnect.algorithm=multi_dim"],
        (0,) * 8,
    ),
    # 13 samples on 8: five processors take 2, three take 1.
    "torus 2x4, uneven": (
        ["processors=8", "batch_size=13", *TORUS, "interconnect.algorithm=multi_dim"],
        (0, 0, 0, 0, 0, 5, 5, 5),
    ),
    "hierarchy": (
        ["processors=8", "batch_size=16", *HIERARCHY, "interconnect.algorithm=multi_dim"],
        (0,) * 8,
    ),
}


def simulated(*sets: str) -> RunResult:
    run = _Run(
        load_inputs(
            MLP, parse_sets(["assignment=data_parallel", "dram.sharing=per_processor", *sets])
        )
    )
    return run.simulate(run.placed(BASE, None), BASE)


def numbers(result: RunResult) -> dict[str, Any]:
    """Everything the summary says but which processors were simulated."""
    record = result.step_summary().to_dict()
    record.pop("symmetry", None)
    return record


@pytest.mark.parametrize("engine", ["simpy", "compiled"])
@pytest.mark.parametrize("buckets", [[], [BUCKETS]], ids=["one per gradient", "buckets"])
@pytest.mark.parametrize("case", list(CASES))
def test_the_representatives_give_every_number_of_the_full_step(
    case: str, buckets: list[str], engine: str
) -> None:
    sets, copies = CASES[case]
    every = [*sets, *buckets, f"timing.engine={engine}"]
    symmetric = simulated(*every, "run.data_parallel.symmetry=auto")
    full = simulated(*every, "run.data_parallel.symmetry=full")
    assert symmetric.trace.copies == copies
    assert full.trace.copies == ()
    # Every op of every processor at the same cycles, and so every number.
    assert symmetric.trace.start_cycle.tolist() == full.trace.start_cycle.tolist()
    assert symmetric.trace.end_cycle.tolist() == full.trace.end_cycle.tolist()
    assert numbers(symmetric) == numbers(full)
    assert len(numbers(symmetric)["busy_cycles"]["array"]) == len(copies)
    # Fewer events: only the representatives' ops and links were simulated.
    assert symmetric.trace.events < full.trace.events


SHARED = "its processors share a DRAM (dram.sharing: per_processor gives each its own)"
UNEVEN = "its all-reduces load the links of one class unevenly (topology or algorithm)"


@pytest.mark.parametrize(
    ("sets", "why"),
    [
        (["processors=4", "batch_size=8", "dram.sharing=shared"], SHARED),
        # A ring over the processors of a 2x4 torus in order: 1 -> 2 crosses both
        # dimensions, 0 -> 1 one, so the links are not loaded alike.
        (["processors=8", "batch_size=16", *TORUS, "interconnect.algorithm=ring"], UNEVEN),
    ],
)
def test_an_asymmetric_step_is_simulated_in_full_and_says_why(sets: list[str], why: str) -> None:
    result = simulated(*sets)
    assert result.trace.copies == ()
    assert result.trace.unsymmetric == why
    summary = result.step_summary()
    assert summary.symmetry is not None
    assert summary.symmetry.described() == f"every processor: {why}"
    record = summary.to_dict()
    n = len(record["busy_cycles"]["array"])
    assert record["symmetry"] == {
        "simulated_processors": list(range(n)),
        "inferred_from": [None] * n,
        "unsymmetric": why,
    }
    assert StepSummary.from_dict(record).symmetry == summary.symmetry


@pytest.mark.parametrize(
    "sets",
    [
        # Every processor simulated as asked: nothing to explain.
        ["processors=4", "batch_size=8", "dram.sharing=shared", "run.data_parallel.symmetry=full"],
        # One processor.
        ["processors=1"],
    ],
)
def test_no_reason_where_symmetry_was_not_asked_for_or_cannot_apply(sets: list[str]) -> None:
    result = simulated(*sets)
    assert result.trace.unsymmetric == ""
    assert result.step_summary().symmetry is None


def test_a_pipeline_is_not_said_to_have_fallen_back() -> None:
    run = _Run(load_inputs(MLP, parse_sets(["processors=4", "run.techniques={gpipe: {}}"])))
    base = run.simulate(run.placed(BASE, None), BASE)
    assert base.trace.unsymmetric == ""
    assert base.step_summary().symmetry is None


def test_the_summary_and_the_console_say_what_was_inferred() -> None:
    result = simulated("processors=4", "batch_size=10")
    record = result.step_summary().to_dict()
    assert record["symmetry"] == {
        "simulated_processors": [0, 2],
        "inferred_from": [None, 0, None, 2],
    }
    back = StepSummary.from_dict(record)
    assert back.symmetry == SimulatedProcessors((0, 2), (None, 0, None, 2))
    assert back.symmetry.described() == "p0, p2 (p1 as p0, p3 as p2 inferred)"
    eight = SimulatedProcessors.of((0, 0, 0, 0, 0, 5, 5, 5))
    assert eight is not None
    assert eight.described() == "p0, p5 (p1-p4 as p0, p6,p7 as p5 inferred)"
    assert SimulatedProcessors.of(()) is None
    with pytest.raises(ValueError, match="symmetry: malformed"):
        SimulatedProcessors.read({"symmetry": {"simulated_processors": [0]}})


def test_ops_csv_says_which_rows_were_inferred_and_from_which_processor() -> None:
    # 10 samples on 4: processors 0 and 2 simulated, 1 as 0 and 3 as 2.
    result = simulated("processors=4", "batch_size=10")
    rows = result.op_rows()
    assert list(rows[0])[-1] == "inferred_from"
    by = {(r["processor"], r["inferred_from"]) for r in rows}
    assert by == {(0, ""), (1, 0), (2, ""), (3, 2)}
    assert result.ops_csv().splitlines()[0].endswith(",energy_pj,inferred_from")
    full = simulated("processors=4", "batch_size=10", "run.data_parallel.symmetry=full")
    assert "inferred_from" not in full.op_rows()[0]
    # Every other column is the full simulation's, row for row.
    assert [dict(r, inferred_from=None) for r in rows] == [
        dict(r, inferred_from=None) for r in full.op_rows()
    ]


def network(**spec: Any) -> Network:
    return Network.of(InterconnectSpec(**spec), spec.get("processors", 8))


def test_link_classes_are_the_links_of_processor_0_translated() -> None:
    # A ring of 4: one link each, all translations of processor 0's.
    assert link_classes(network(bandwidth_bytes_per_cycle=1, latency_cycles=1, dims=[4])) == (
        0,
        0,
        0,
        0,
    )
    # A 2x4 torus: per processor one link in the first dimension (a size of 2) and
    # two in the second (ahead, behind): links 0..7, then 8..23 in pairs.
    torus = network(topology="torus", dims=[2, 4], bandwidth_bytes_per_cycle=1, latency_cycles=1)
    assert link_classes(torus) == (0,) * 8 + (8, 9) * 8
    # A switch of 4: each processor's way in and way out.
    switch = network(topology="switch", dims=[4], bandwidth_bytes_per_cycle=1, latency_cycles=1)
    assert link_classes(switch) == (0, 1) * 4


def two_replicas(second_waits: bool) -> OpGraph:
    """Two ops on each of two processors, then an all-reduce after the second of
    each; processor 0's second op waits for its first, processor 1's when told to."""
    ops: list[Any] = [gemm(0), gemm(1, 0), gemm(2), gemm(3, 2) if second_waits else gemm(3)]
    reduce = dataclasses.replace(allreduce((0, 1)).ops[0], op_id=4, deps=(1, 3), after=(1, 3))
    return OpGraph(ops=(*ops, reduce), processor=(0, 0, 1, 1, 0))


@pytest.mark.parametrize(
    ("second_waits", "compute", "copies"),
    [
        (True, [100, 50, 100, 50, 0], (0, 0)),
        (False, [100, 50, 100, 50, 0], None),  # the same costs, other dependencies
        (True, [100, 50, 100, 60, 0], None),  # the same dependencies, other costs
    ],
)
def test_a_role_is_the_same_ops_costs_and_dependencies(
    second_waits: bool, compute: list[int], copies: tuple[int, ...] | None
) -> None:
    graph = two_replicas(second_waits)
    c = costs([UNIT_ARRAY] * 4 + [UNIT_COMM], compute=compute)
    on = machine("processors=2", "dram.sharing=per_processor")
    found = symmetry.roles(graph, c, on)
    assert (found.copies if isinstance(found, symmetry.Roles) else None) == copies
    if isinstance(found, symmetry.Roles):
        assert found.counterpart.tolist() == [0, 1, 0, 1, 4]
        # Processor 1's ops end when processor 0's do: 100 and 150 cycles of compute.
        trace = symmetry.simulate(graph, c, on, EngineKind.SIMPY, found)
        assert trace.end_cycle.tolist()[:4] == [100, 150, 100, 150]
        assert trace.copies == (0, 0)
